/* A GGUF model's MoE description: architecture from the table in
 * cpu_kernels/moe-ref.c, shapes from metadata cross-checked against the
 * tensors, and per layer the pointers and byte ranges of every expert. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "model/arch.h"
#include "base/error.h"
#include "base/log.h"
#include "model/model.h"
#include "model/whole.h"

struct layer {
	int moe;
	struct hs_moe_layer l;
	const struct hs_gguf_tensor *w[3], *b[3]; /* gate, up, down */
};

struct hs_model {
	struct hs_gguf *g;
	struct hs_model_info info;
	char *arch, *name;
	char *path;
	struct layer *layers;
	struct hs_whole *whole;       /* NULL: not a whole model, whole_why says why */
	char whole_why[320];
	char expert_types[224];       /* hs_model_info.expert_types */
	struct hs_moe_sel sel;        /* glm4moe's gating keys (every MoE layer's, bias aside) */
};

static const char *const part[3] = { "gate", "up", "down" };

uint64_t hs__model_expert_weight_bytes(const struct hs_moe_layer *l)
{
	return (uint64_t)l->n_ff * (hs__type_row_bytes(l->type[HS_GATE], (uint64_t)l->n_embd) +
				    hs__type_row_bytes(l->type[HS_UP], (uint64_t)l->n_embd)) +
	       (uint64_t)l->n_embd * hs__type_row_bytes(l->type[HS_DOWN], (uint64_t)l->n_ff);
}

/* "q4_K" when every expert matrix has one type, else each part's types
 * in layer order, e.g. "gate q4_K, up q4_K, down q4_K/q6_K". */
static void describe_types(hs_model *m)
{
	char list[3][64];
	int first = -1, mixed = 0;

	for (int p = 0; p < 3; p++) {
		int seen[64], n = 0;
		size_t at = 0;
		list[p][0] = 0;
		for (int i = 0; i < m->info.n_layers; i++) {
			if (!m->layers[i].moe)
				continue;
			int t = m->layers[i].l.type[p], k;
			if (first < 0)
				first = t;
			mixed |= t != first;
			for (k = 0; k < n && seen[k] != t; k++)
				;
			if (k < n || n == 64)
				continue;
			seen[n++] = t;
			at += (size_t)snprintf(list[p] + at, at < sizeof list[p] ? sizeof list[p] - at : 0, "%s%s",
					       n > 1 ? "/" : "", hs__type_name(t));
			if (at >= sizeof list[p])
				at = sizeof list[p];
		}
	}
	if (!mixed)
		snprintf(m->expert_types, sizeof m->expert_types, "%s", hs__type_name(first));
	else
		snprintf(m->expert_types, sizeof m->expert_types, "gate %s, up %s, down %s", list[0], list[1], list[2]);
}

void hs_model_free(hs_model *m)
{
	if (!m)
		return;
	hs__gguf_close(m->g);
	hs__whole_free(m->whole);
	free(m->layers);
	free(m->arch);
	free(m->name);
	free(m->path);
	free(m);
}

/* {arch}.key as a positive int. */
static int meta_int(const hs_model *m, const char *path, const char *key, int required, int *v)
{
	char full[128];
	uint64_t u;
	int rc;

	snprintf(full, sizeof full, "%s.%s", m->arch, key);
	rc = hs__gguf_get_u64(m->g, full, &u);
	if (rc == -ENOENT && !required)
		return 0;
	if (rc == -ENOENT)
		return hs__error(EINVAL, "%s: metadata key '%s' missing", path, full);
	if (rc)
		return hs__error(EINVAL, "%s: %s", path, hs_last_error());
	if (u == 0 || u > (1u << 24))
		return hs__error(EINVAL, "%s: %s = %llu (1..%u allowed)", path, full, (unsigned long long)u, 1u << 24);
	*v = (int)u;
	return 0;
}

static int shape_is(const struct hs_gguf_tensor *t, int n_dims, uint64_t a, uint64_t b, uint64_t c)
{
	return t->n_dims == n_dims && t->ne[0] == a && t->ne[1] == b && t->ne[2] == c;
}

static int bad_shape(const char *path, const struct hs_gguf_tensor *t, const char *want)
{
	return hs__error(EINVAL, "%s: tensor '%s' has shape {%llu, %llu, %llu} (%d dims), expected %s", path,
			 t->name, (unsigned long long)t->ne[0], (unsigned long long)t->ne[1],
			 (unsigned long long)t->ne[2], t->n_dims, want);
}

static const struct hs_gguf_tensor *tensor(const hs_model *m, int layer, const char *what)
{
	char name[96];
	snprintf(name, sizeof name, "blk.%d.%s", layer, what);
	return hs__gguf_find_tensor(m->g, name);
}

static int load_layer(hs_model *m, const char *path, int i)
{
	struct hs_model_info *in = &m->info;
	struct layer *L = &m->layers[i];
	struct hs_moe_layer *l = &L->l;
	const struct hs_gguf_tensor *r, *rb;
	char want[128], name[64];
	int present = 0;

	for (int p = 0; p < 3; p++) {
		snprintf(name, sizeof name, "ffn_%s_exps.weight", part[p]);
		L->w[p] = tensor(m, i, name);
		present += L->w[p] != NULL;
	}
	if (present == 0)
		return 0; /* a dense layer: not hotset's business */
	if (present != 3)
		return hs__error(EINVAL, "%s: layer %d has %d of the 3 expert tensors ffn_{gate,up,down}_exps.weight",
				 path, i, present);
	/* n_ff comes from the first MoE layer's gate tensor. */
	if (in->n_ff == 0)
		in->n_ff = (int)(L->w[0]->ne[1] > (1u << 24) ? 0 : L->w[0]->ne[1]);
	snprintf(want, sizeof want, "{n_embd %d, n_ff %d, experts %d}", in->n_embd, in->n_ff, in->n_experts);
	for (int p = 0; p < 2; p++)
		if (!shape_is(L->w[p], 3, in->n_embd, in->n_ff, in->n_experts) || in->n_ff == 0)
			return bad_shape(path, L->w[p], want);
	snprintf(want, sizeof want, "{n_ff %d, n_embd %d, experts %d}", in->n_ff, in->n_embd, in->n_experts);
	if (!shape_is(L->w[2], 3, in->n_ff, in->n_embd, in->n_experts))
		return bad_shape(path, L->w[2], want);
	for (int p = 0; p < 3; p++) {
		const int t = L->w[p]->type;
		const uint64_t row = p == 2 ? (uint64_t)in->n_ff : (uint64_t)in->n_embd;
		if (!hs__type_supported(t))
			return hs__error(EINVAL, "%s: tensor '%s' is %s, a type hotset does not compute with (it takes %s)",
					 path, L->w[p]->name, hs__type_name(t), hs__type_supported_names());
		if (!hs__type_row_bytes(t, row))
			return hs__error(EINVAL, "%s: tensor '%s': rows of %llu values are not a multiple of %s's block of %zu",
					 path, L->w[p]->name, (unsigned long long)row, hs__type_name(t), hs__type_block_values(t));
		l->type[p] = t;
	}
	if (in->n_moe_layers == 0) {
		in->expert_type = l->type[HS_GATE];
		in->expert_type_name = hs__type_name(l->type[HS_GATE]);
	}
	for (int p = 0; p < 3; p++) {
		snprintf(name, sizeof name, "ffn_%s_exps.bias", part[p]);
		L->b[p] = tensor(m, i, name);
		if (!L->b[p] && in->has_bias)
			return hs__error(EINVAL, "%s: layer %d: %s architecture needs tensor blk.%d.%s", path, i, m->arch, i, name);
		if (!L->b[p])
			continue;
		int len = p == 2 ? in->n_embd : in->n_ff;
		snprintf(want, sizeof want, "f32 {%d, experts %d}", len, in->n_experts);
		if (L->b[p]->type != HS_TYPE_F32 || !shape_is(L->b[p], 2, (uint64_t)len, in->n_experts, 1))
			return bad_shape(path, L->b[p], want);
	}
	r = tensor(m, i, "ffn_gate_inp.weight");
	rb = tensor(m, i, "ffn_gate_inp.bias");
	if (!r)
		return hs__error(EINVAL, "%s: layer %d has experts but no router blk.%d.ffn_gate_inp.weight", path, i, i);
	snprintf(want, sizeof want, "f32, f16 or bf16 {n_embd %d, experts %d}", in->n_embd, in->n_experts);
	if ((r->type != HS_TYPE_F32 && r->type != HS_TYPE_F16 && r->type != HS_TYPE_BF16) ||
	    !shape_is(r, 2, in->n_embd, in->n_experts, 1))
		return bad_shape(path, r, want);
	if (rb && (rb->type != HS_TYPE_F32 || !shape_is(rb, 1, in->n_experts, 1, 1)))
		return bad_shape(path, rb, "f32 {experts}");

	L->moe = 1;
	l->arch = hs__arch_find(m->arch, strlen(m->arch));
	l->n_embd = in->n_embd;
	l->n_ff = in->n_ff;
	l->n_experts = in->n_experts;
	l->n_used = in->n_used;
	l->gate = L->w[0]->data;
	l->up = L->w[1]->data;
	l->down = L->w[2]->data;
	l->gate_stride = L->w[0]->size / in->n_experts;
	l->up_stride = L->w[1]->size / in->n_experts;
	l->down_stride = L->w[2]->size / in->n_experts;
	l->gate_b = L->b[0] ? (const float *)L->b[0]->data : NULL;
	l->up_b = L->b[1] ? (const float *)L->b[1]->data : NULL;
	l->down_b = L->b[2] ? (const float *)L->b[2]->data : NULL;
	l->router_type = r->type;
	l->router = r->data;
	l->router_b = rb ? (const float *)rb->data : NULL;
	if (l->arch->gating_sel) {
		const struct hs_gguf_tensor *pb = tensor(m, i, "exp_probs_b.bias");
		if (!pb)
			return hs__error(EINVAL, "%s: layer %d: %s needs tensor blk.%d.exp_probs_b.bias", path, i, m->arch, i);
		if (pb->type != HS_TYPE_F32 || !shape_is(pb, 1, in->n_experts, 1, 1))
			return bad_shape(path, pb, "f32 {experts}");
		l->sel = m->sel;
		l->sel.bias = (const float *)(const void *)pb->data;
		in->router_bytes += pb->size;
	}
	in->n_moe_layers++;
	in->router_bytes += r->size + (rb ? rb->size : 0);
	for (int p = 0; p < 3; p++)
		in->expert_bytes += L->w[p]->size + (L->b[p] ? L->b[p]->size : 0);
	return 0;
}

/* glm4moe's gating keys, as llama.cpp reads them: expert_gating_func
 * (1 softmax, 2 sigmoid; absent: sigmoid), expert_weights_norm (absent: no),
 * expert_weights_scale (absent or 0: 1). */
static int gating_keys(hs_model *m, const char *path)
{
	struct hs_model_info *in = &m->info;
	const struct hs_gguf_kv *kv;
	char full[128];
	int func = 2;
	int rc;

	if ((rc = meta_int(m, path, "expert_gating_func", 0, &func)))
		return rc;
	if (func != 1 && func != 2)
		return hs__error(EINVAL, "%s: %s.expert_gating_func %d (1 softmax or 2 sigmoid)", path, m->arch, func);
	m->sel.softmax = func == 1;
	snprintf(full, sizeof full, "%s.expert_weights_norm", m->arch);
	if ((kv = hs__gguf_find_kv(m->g, full))) {
		if (kv->type != HS_GGUF_BOOL)
			return hs__error(EINVAL, "%s: metadata '%s' is %s, not a bool", path, full, hs__gguf_vtype_name(kv->type));
		m->sel.norm = kv->value[0] != 0;
	}
	snprintf(full, sizeof full, "%s.expert_weights_scale", m->arch);
	m->sel.scale = 1;
	rc = hs__gguf_get_f32(m->g, full, &m->sel.scale);
	if (rc && rc != -ENOENT)
		return hs__error(EINVAL, "%s: %s", path, hs_last_error());
	if (rc == -ENOENT || m->sel.scale == 0)
		m->sel.scale = 1;
	if (!(m->sel.scale > 0 && m->sel.scale <= 1000))
		return hs__error(EINVAL, "%s: %s = %g (0..1000 allowed)", path, full, (double)m->sel.scale);
	if (in->n_experts > HS_SEL_MAX_EXPERTS)
		return hs__error(EINVAL, "%s: %d experts (%s: at most %d)", path, in->n_experts, m->arch, HS_SEL_MAX_EXPERTS);
	return 0;
}

/* MTP ("nextn") layers: the last nextn_predict_layers blocks predict a
 * further token for speculative decoding; plain decoding runs the trunk
 * only (as llama.cpp does), so they are left out of n_layers here. */
static int nextn_layers(hs_model *m, const char *path)
{
	struct hs_model_info *in = &m->info;
	char full[128];
	uint64_t nextn = 0;

	snprintf(full, sizeof full, "%s.nextn_predict_layers", m->arch);
	int rc = hs__gguf_get_u64(m->g, full, &nextn);
	if (rc && rc != -ENOENT)
		return hs__error(EINVAL, "%s: %s", path, hs_last_error());
	if (nextn == 0)
		return 0;
	if (nextn >= (uint64_t)in->n_layers)
		return hs__error(EINVAL, "%s: %s %llu, but block_count is %d (the trunk needs a layer)", path, full,
				 (unsigned long long)nextn, in->n_layers);
	in->n_nextn_layers = (int)nextn;
	in->n_layers -= (int)nextn;
	hs__log(HS_LOG_INFO, "%s: %d MTP (nextn) layer%s after layer %d skipped: not run for plain decoding", path,
		in->n_nextn_layers, nextn > 1 ? "s" : "", in->n_layers - 1);
	return 0;
}

int hs_model_open(const char *path, hs_model **out)
{
	struct hs_gguf_str s;
	struct hs_model_info *in;
	hs_model *m;
	int rc;

	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(path, -EINVAL);
	m = calloc(1, sizeof *m);
	if (!m)
		return hs__error(ENOMEM, "%s: out of memory", path);
	in = &m->info;
	if (!(m->path = strdup(path))) {
		rc = hs__error(ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	if ((rc = hs__gguf_open(path, &m->g)))
		goto out_free;
	if ((rc = hs__gguf_get_str(m->g, "general.architecture", &s))) {
		rc = hs__error(EINVAL, "%s: %s", path, rc == -ENOENT ? "metadata key 'general.architecture' missing" : hs_last_error());
		goto out_free;
	}
	m->arch = strndup(s.p, s.n > 64 ? 64 : s.n);
	m->name = hs__gguf_get_str(m->g, "general.name", &s) == 0 ? strndup(s.p, s.n > 256 ? 256 : s.n) : strdup("");
	if (!m->arch || !m->name) {
		rc = hs__error(ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	const struct hs_moe_arch *arch = hs__arch_find(m->arch, strlen(m->arch));
	if (!arch) {
		rc = hs__error(EINVAL, "%s: architecture '%s' is not one hotset runs (gpt-oss, qwen3moe, qwen35moe, glm4moe)", path, m->arch);
		goto out_free;
	}
	in->arch = arch->name;
	in->name = m->name;
	in->has_bias = arch->has_bias;
	int ff_meta = 0;
	if ((rc = meta_int(m, path, "block_count", 1, &in->n_layers)) ||
	    (rc = meta_int(m, path, "expert_count", 1, &in->n_experts)) ||
	    (rc = meta_int(m, path, "expert_used_count", 1, &in->n_used)) ||
	    (rc = meta_int(m, path, "embedding_length", 1, &in->n_embd)) ||
	    (rc = meta_int(m, path, "expert_feed_forward_length", 0, &ff_meta)))
		goto out_free;
	if (arch->gating_sel && ((rc = gating_keys(m, path)) || (rc = nextn_layers(m, path))))
		goto out_free;
	if (in->n_used > in->n_experts) {
		rc = hs__error(EINVAL, "%s: %s.expert_used_count %d exceeds expert_count %d", path, m->arch, in->n_used,
			       in->n_experts);
		goto out_free;
	}
	in->n_ff = ff_meta;
	m->layers = calloc(in->n_layers, sizeof *m->layers);
	if (!m->layers) {
		rc = hs__error(ENOMEM, "%s: out of memory", path);
		goto out_free;
	}
	for (int i = 0; i < in->n_layers; i++)
		if ((rc = load_layer(m, path, i)))
			goto out_free;
	if (in->n_moe_layers == 0) {
		rc = hs__error(EINVAL, "%s: no layer has expert tensors (blk.N.ffn_gate_exps.weight)", path);
		goto out_free;
	}
	if (ff_meta && ff_meta != in->n_ff) {
		rc = hs__error(EINVAL, "%s: %s.expert_feed_forward_length %d, but the expert tensors have n_ff %d", path,
			       m->arch, ff_meta, in->n_ff);
		goto out_free;
	}
	/* the mean over the MoE layers: llama-quantize's mixes give some
	 * layers' down matrices a larger type */
	uint64_t w_all = 0;
	for (int i = 0; i < in->n_layers; i++)
		if (m->layers[i].moe)
			w_all += hs__model_expert_weight_bytes(&m->layers[i].l);
	in->expert_weight_bytes = (w_all + (uint64_t)in->n_moe_layers / 2) / (uint64_t)in->n_moe_layers;
	describe_types(m);
	in->expert_types = m->expert_types;
	in->expert_bias_bytes = in->has_bias ? sizeof(float) * (2 * (uint64_t)in->n_ff + in->n_embd) : 0;
	in->layer_token_bytes = (uint64_t)in->n_used * (in->expert_weight_bytes + in->expert_bias_bytes);
	in->layer_expert_bytes = (uint64_t)in->n_experts * (in->expert_weight_bytes + in->expert_bias_bytes);
	in->file_bytes = m->g->size;
	for (uint64_t i = 0; i < m->g->n_tensors; i++)
		in->non_expert_bytes += m->g->tensors[i].size;
	in->non_expert_bytes -= in->expert_bytes;
	if ((rc = hs__whole_describe(m->g, m->arch, path, in->n_layers, in->n_embd, &m->whole, m->whole_why,
				     sizeof m->whole_why)))
		goto out_free;
	for (int i = 0; m->whole && i < in->n_layers; i++)
		if (!m->layers[i].moe == !m->whole->layers[i].ffn_dense) { /* the forward pass runs one or the other */
			snprintf(m->whole_why, sizeof m->whole_why, "%s: layer %d has %s", path, i,
				 m->layers[i].moe ? "experts and a dense FFN" : "neither experts nor a dense FFN");
			hs__whole_free(m->whole);
			m->whole = NULL;
		}
	if (m->whole) {
		const struct hs_hparams *hp = &m->whole->hp;
		in->n_dense_ffn_layers = m->whole->n_dense_ffn;
		in->n_ff_dense = m->whole->n_ff_dense;
		in->n_ff_shared = m->whole->n_ff_shared;
		in->shared_expert_bytes = m->whole->shared_bytes;
		in->dense_ffn_bytes = m->whole->dense_ffn_bytes;
		in->whole = 1;
		in->n_vocab = hp->n_vocab;
		in->n_head = hp->n_head;
		in->n_head_kv = hp->n_head_kv;
		in->head_dim = hp->head_dim;
		in->n_ctx_train = hp->n_ctx_train;
		in->swa_window = hp->swa_window;
		in->dense_bytes = m->whole->dense_bytes;
		in->n_recurrent_layers = hp->n_recurrent;
		in->recurrent_state_bytes = hs__whole_state_bytes(hp);
	}
	*out = m;
	return 0;

out_free:
	hs_model_free(m);
	return rc;
}

const struct hs_model_info *hs_model_info(const hs_model *m)
{
	HS_NEED(m, NULL);
	return &m->info;
}

int hs_model_layer_is_moe(const hs_model *m, int layer)
{
	HS_NEED(m, -EINVAL);
	return layer >= 0 && layer < m->info.n_layers && m->layers[layer].moe;
}

const struct hs_moe_layer *hs__model_layer(const hs_model *m, int layer)
{
	return m && hs_model_layer_is_moe(m, layer) > 0 ? &m->layers[layer].l : NULL;
}

const struct hs_gguf *hs__model_gguf(const hs_model *m)
{
	return m->g;
}

static int check_layer(const hs_model *m, int layer)
{
	if (!hs_model_layer_is_moe(m, layer))
		return hs__error(EINVAL, "layer %d is not a MoE layer of this model (%d layers, %d with experts)", layer,
				 m->info.n_layers, m->info.n_moe_layers);
	return 0;
}

int hs_model_expert_layout(const hs_model *m, int layer, int expert, struct hs_expert_layout *o)
{
	const struct layer *L;
	int rc;

	HS_NEED(m, -EINVAL);
	HS_NEED(o, -EINVAL);
	if ((rc = check_layer(m, layer)))
		return rc;
	if (expert < 0 || expert >= m->info.n_experts)
		return hs__error(EINVAL, "expert %d: out of range (0..%d)", expert, m->info.n_experts - 1);
	L = &m->layers[layer];
	memset(o, 0, sizeof *o);
	struct hs_span *w[3] = { &o->gate, &o->up, &o->down }, *b[3] = { &o->gate_bias, &o->up_bias, &o->down_bias };
	for (int p = 0; p < 3; p++) {
		w[p]->bytes = L->w[p]->size / m->info.n_experts;
		w[p]->offset = L->w[p]->offset + (uint64_t)expert * w[p]->bytes;
		if (L->b[p]) {
			b[p]->bytes = L->b[p]->size / m->info.n_experts;
			b[p]->offset = L->b[p]->offset + (uint64_t)expert * b[p]->bytes;
		}
	}
	return 0;
}

const struct hs_whole *hs__model_whole(const hs_model *m)
{
	return m->whole;
}

const char *hs__model_whole_why(const hs_model *m)
{
	return m->whole ? "" : m->whole_why;
}

const char *hs__model_path(const hs_model *m)
{
	return m->path;
}
