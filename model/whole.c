/* The dense part of a whole gpt-oss or Qwen3-MoE model: hyperparameters
 * from the metadata and every attention, norm, embedding and output tensor,
 * each checked for type and shape against them before the forward pass may
 * read it.  A file without them is still a valid MoE file; it just cannot
 * run whole, and the reason is kept for the caller who asks. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu_kernels/formats.h"
#include "model/arch.h"
#include "model/gguf.h"
#include "model/whole.h"

struct ctx {
	const struct hs_gguf *g;
	const char *arch, *path;
	char *why;
	size_t why_len;
};

/* Records why the file is not a whole model; returns 1 (not an error). */
static int not_whole(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int not_whole(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(c->why, c->why_len, "%s: ", c->path);

	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < c->why_len)
		vsnprintf(c->why + n, c->why_len - n, fmt, ap);
	va_end(ap);
	return 1;
}

/* {arch}.key as an int in [lo, hi]; absent: *v = dflt when dflt >= 0. */
static int meta_int(struct ctx *c, const char *key, int dflt, int lo, int hi, int *v)
{
	char full[128];
	uint64_t u;

	snprintf(full, sizeof full, "%s.%s", c->arch, key);
	int rc = hs__gguf_get_u64(c->g, full, &u);
	if (rc == -ENOENT && dflt >= 0) {
		*v = dflt;
		return 0;
	}
	if (rc == -ENOENT)
		return not_whole(c, "metadata key '%s' missing", full);
	if (rc || u < (uint64_t)lo || u > (uint64_t)hi)
		return not_whole(c, "%s = %llu (%d..%d allowed)", full, rc ? 0ull : (unsigned long long)u, lo, hi);
	*v = (int)u;
	return 0;
}

static int meta_float(struct ctx *c, const char *key, float dflt, float lo, float hi, float *v)
{
	char full[128];

	snprintf(full, sizeof full, "%s.%s", c->arch, key);
	int rc = hs__gguf_get_f32(c->g, full, v);
	if (rc == -ENOENT) {
		*v = dflt;
		return 0;
	}
	if (rc || !(*v >= lo && *v <= hi))
		return not_whole(c, "%s = %g (%g..%g allowed)", full, rc ? 0.0 : (double)*v, (double)lo, (double)hi);
	return 0;
}

static const struct hs_gguf_tensor *find(struct ctx *c, int layer, const char *what)
{
	char name[96];

	if (layer >= 0)
		snprintf(name, sizeof name, "blk.%d.%s", layer, what);
	else
		snprintf(name, sizeof name, "%s", what);
	return hs__gguf_find_tensor(c->g, name);
}

/* An f32 vector of n values; optional ones may be absent (*v = NULL). */
static int vec(struct ctx *c, int layer, const char *what, int n, int optional, const float **v)
{
	const struct hs_gguf_tensor *t = find(c, layer, what);

	*v = NULL;
	if (!t)
		return optional ? 0
				: layer >= 0 ? not_whole(c, "tensor 'blk.%d.%s' missing", layer, what)
					     : not_whole(c, "tensor '%s' missing", what);
	if (t->type != HS_TYPE_F32 || t->n_dims != 1 || t->ne[0] != (uint64_t)n)
		return not_whole(c, "tensor '%s' is %s {%llu} (%d dims), expected f32 {%d}", t->name,
				 hs__type_name(t->type) ? hs__type_name(t->type) : "an unknown type",
				 (unsigned long long)t->ne[0], t->n_dims, n);
	*v = (const float *)(const void *)t->data;
	return 0;
}

/* A matrix of `rows` rows of `cols` values in a type the dense kernels take. */
static int mat(struct ctx *c, int layer, const char *what, int cols, int rows, struct hs_weight *w)
{
	const struct hs_gguf_tensor *t = find(c, layer, what);

	memset(w, 0, sizeof *w);
	if (!t)
		return layer >= 0 ? not_whole(c, "tensor 'blk.%d.%s' missing", layer, what)
				  : not_whole(c, "tensor '%s' missing", what);
	if (!hs__type_supported(t->type))
		return not_whole(c, "tensor '%s' is %s, a type hotset does not compute with (it takes %s)", t->name,
				 hs__type_name(t->type) ? hs__type_name(t->type) : "of an unknown type",
				 hs__type_supported_names());
	if (t->n_dims != 2 || t->ne[0] != (uint64_t)cols || (rows > 0 && t->ne[1] != (uint64_t)rows))
		return not_whole(c, "tensor '%s' has shape {%llu, %llu} (%d dims), expected {%d, %d}", t->name,
				 (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], t->n_dims, cols, rows);
	if (t->ne[1] < 1 || t->ne[1] > (1u << 24))
		return not_whole(c, "tensor '%s' has %llu rows (1..%u allowed)", t->name, (unsigned long long)t->ne[1],
				 1u << 24);
	w->type = t->type;
	w->cols = cols;
	w->rows = (int)t->ne[1];
	w->row_bytes = hs__type_row_bytes(t->type, (uint64_t)cols);
	w->data = t->data;
	w->name = t->name;
	if (!w->row_bytes)
		return not_whole(c, "tensor '%s': rows of %d values do not fit %s blocks", t->name, cols,
				 hs__type_name(t->type));
	return 0;
}

/* ---- qwen35moe: Gated DeltaNet layers, gated attention, the shared expert ---- */

/* Element i of the int/bool array {arch}.key (i < n it holds): 0, or 1 when
 * absent; not_whole when of another kind or too short. */
static int meta_arr_int(struct ctx *c, const char *key, int i, int *v)
{
	char full[128];
	snprintf(full, sizeof full, "%s.%s", c->arch, key);
	const struct hs_gguf_kv *kv = hs__gguf_find_kv(c->g, full);
	if (!kv)
		return -1;
	size_t es = kv->arr_type == HS_GGUF_INT32 || kv->arr_type == HS_GGUF_UINT32 ? 4
		    : kv->arr_type == HS_GGUF_BOOL || kv->arr_type == HS_GGUF_INT8 || kv->arr_type == HS_GGUF_UINT8 ? 1
														 : 0;
	if (kv->type != HS_GGUF_ARRAY || !es || (uint64_t)i >= kv->arr_n)
		return not_whole(c, "%s: not an array of at least %d integers", full, i + 1);
	const uint8_t *p = kv->value + 12 + (size_t)i * es; /* element type, count, then the elements */
	int32_t x = 0;
	if (es == 4)
		memcpy(&x, p, 4);
	else
		x = kv->arr_type == HS_GGUF_INT8 ? (int8_t)p[0] : p[0];
	*v = x;
	return 0;
}

static int q35_hparams(struct ctx *c, struct hs_hparams *hp)
{
	int rc, inner, interval, sec_sum = 0;

	if ((rc = meta_int(c, "ssm.conv_kernel", -1, 1, 16, &hp->ssm_conv)) ||
	    (rc = meta_int(c, "ssm.state_size", -1, 1, 1024, &hp->ssm_dh)) ||
	    (rc = meta_int(c, "ssm.group_count", -1, 1, 1024, &hp->ssm_nk)) ||
	    (rc = meta_int(c, "ssm.time_step_rank", -1, 1, 1024, &hp->ssm_nv)) ||
	    (rc = meta_int(c, "ssm.inner_size", -1, 1, 1 << 20, &inner)) ||
	    (rc = meta_int(c, "full_attention_interval", 4, 1, 1 << 16, &interval)) ||
	    (rc = meta_float(c, "expert_weights_scale", 0, 0, 1e6f, &hp->expert_scale)))
		return rc;
	if (hp->expert_scale == 0)
		hp->expert_scale = 1;
	if (hp->ssm_nv % hp->ssm_nk || inner != hp->ssm_nv * hp->ssm_dh)
		return not_whole(c, "DeltaNet: %d value heads, %d key heads, inner size %d: value heads must be a multiple "
				    "of key heads and the inner size value heads x %d",
				 hp->ssm_nv, hp->ssm_nk, inner, hp->ssm_dh);
	/* the rope sections: for text every position id is the token's, so
	 * interleaved M-RoPE is plain NEOX rope when they cover n_rot / 2 */
	for (int i = 0; i < 4; i++) {
		int v = 0;
		if ((rc = meta_arr_int(c, "rope.dimension_sections", i, &v)) > 0)
			return rc;
		if (rc < 0)
			break; /* absent: plain rope */
		sec_sum += v;
	}
	if (sec_sum && sec_sum != hp->n_rot / 2)
		return not_whole(c, "%s.rope.dimension_sections sum to %d, not rope.dimension_count / 2 = %d", c->arch,
				 sec_sum, hp->n_rot / 2);
	(void)interval;
	return 0;
}

/* Layer i is a DeltaNet layer: attention.recurrent_layers when the file
 * has it, else every layer but each full_attention_interval-th. */
static int q35_is_recurrent(struct ctx *c, int i, int *rec)
{
	int interval = 4, rc = meta_arr_int(c, "attention.recurrent_layers", i, rec);
	if (rc >= 0)
		return rc;
	if ((rc = meta_int(c, "full_attention_interval", 4, 1, 1 << 16, &interval)))
		return rc;
	*rec = (i + 1) % interval != 0;
	return 0;
}

static int vec2(struct ctx *c, int layer, const char *what, int ne0, int ne1, const float **v)
{
	const struct hs_gguf_tensor *t = find(c, layer, what);
	*v = NULL;
	if (!t)
		return not_whole(c, "tensor 'blk.%d.%s' missing", layer, what);
	if (t->type != HS_TYPE_F32 || t->ne[0] != (uint64_t)ne0 || t->ne[1] != (uint64_t)ne1 || t->ne[2] != 1)
		return not_whole(c, "tensor '%s' is %s {%llu, %llu}, expected f32 {%d, %d}", t->name,
				 hs__type_name(t->type) ? hs__type_name(t->type) : "an unknown type",
				 (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], ne0, ne1);
	*v = (const float *)(const void *)t->data;
	return 0;
}

static int q35_layer(struct ctx *c, const struct hs_hparams *hp, int i, struct hs_dense_layer *L)
{
	struct hs_q35_layer *Q = &L->q35;
	const int d = hp->n_embd, q = hp->n_head * hp->head_dim, kv = hp->n_head_kv * hp->head_dim;
	const int key = hp->ssm_nk * hp->ssm_dh, val = hp->ssm_nv * hp->ssm_dh, conv = 2 * key + val;
	int rc;

	if ((rc = q35_is_recurrent(c, i, &Q->recurrent)) ||
	    (rc = vec(c, i, "attn_norm.weight", d, 0, &L->attn_norm)) ||
	    (rc = vec(c, i, "post_attention_norm.weight", d, 0, &L->ffn_norm)))
		return rc;
	if (Q->recurrent) {
		if ((rc = mat(c, i, "attn_qkv.weight", d, conv, &Q->qkv)) || (rc = mat(c, i, "attn_gate.weight", d, val, &Q->z)) ||
		    (rc = mat(c, i, "ssm_beta.weight", d, hp->ssm_nv, &Q->beta)) ||
		    (rc = mat(c, i, "ssm_alpha.weight", d, hp->ssm_nv, &Q->alpha)) ||
		    (rc = mat(c, i, "ssm_out.weight", val, d, &Q->out)) ||
		    (rc = vec2(c, i, "ssm_conv1d.weight", hp->ssm_conv, conv, &Q->conv)) ||
		    (rc = vec(c, i, "ssm_dt.bias", hp->ssm_nv, 0, &Q->dt_bias)) ||
		    (rc = vec(c, i, "ssm_a", hp->ssm_nv, 0, &Q->a)) ||
		    (rc = vec(c, i, "ssm_norm.weight", hp->ssm_dh, 0, &Q->norm)))
			return rc;
	} else {
		L->attn_gate = 1;
		if ((rc = mat(c, i, "attn_q.weight", d, 2 * q, &L->wq)) || (rc = mat(c, i, "attn_k.weight", d, kv, &L->wk)) ||
		    (rc = mat(c, i, "attn_v.weight", d, kv, &L->wv)) ||
		    (rc = mat(c, i, "attn_output.weight", q, d, &L->wo)) ||
		    (rc = vec(c, i, "attn_q_norm.weight", hp->head_dim, 0, &L->q_norm)) ||
		    (rc = vec(c, i, "attn_k_norm.weight", hp->head_dim, 0, &L->k_norm)))
			return rc;
	}
	if (find(c, i, "ffn_up_shexp.weight")) {
		int fs = 0;
		const struct hs_gguf_tensor *t = find(c, i, "ffn_up_shexp.weight");
		fs = t->n_dims == 2 && t->ne[1] <= (1u << 20) ? (int)t->ne[1] : 0;
		if (!fs)
			return not_whole(c, "tensor '%s' is not a matrix of at most 2^20 rows", t->name);
		if ((rc = mat(c, i, "ffn_gate_shexp.weight", d, fs, &Q->sh_gate)) ||
		    (rc = mat(c, i, "ffn_up_shexp.weight", d, fs, &Q->sh_up)) ||
		    (rc = mat(c, i, "ffn_down_shexp.weight", fs, d, &Q->sh_down)) ||
		    (rc = vec(c, i, "ffn_gate_inp_shexp.weight", d, 0, &Q->sh_inp)))
			return rc;
	}
	return 0;
}


static int hparams(struct ctx *c, const struct hs_model_arch *a, int n_layers, int n_embd, struct hs_hparams *hp)
{
	struct hs_gguf_str s;
	int rc;

	hp->n_layers = n_layers;
	hp->n_embd = n_embd;
	if ((rc = meta_int(c, "attention.head_count", -1, 1, 4096, &hp->n_head)) ||
	    (rc = meta_int(c, "attention.head_count_kv", hp->n_head, 1, hp->n_head, &hp->n_head_kv)) ||
	    (rc = meta_int(c, "attention.key_length", n_embd / hp->n_head, 1, 1024, &hp->head_dim)) ||
	    (rc = meta_int(c, "rope.dimension_count", hp->head_dim, 2, hp->head_dim, &hp->n_rot)) ||
	    (rc = meta_int(c, "context_length", 4096, 1, 1 << 24, &hp->n_ctx_train)) ||
	    (rc = meta_float(c, "attention.layer_norm_rms_epsilon", 1e-6f, 0, 1, &hp->eps)) ||
	    (rc = meta_float(c, "rope.freq_base", 10000.0f, 1, 1e12f, &hp->rope_base)))
		return rc;
	if (hp->n_head % hp->n_head_kv)
		return not_whole(c, "%d query heads are not a multiple of %d KV heads", hp->n_head, hp->n_head_kv);
	if (hp->head_dim % 2 || hp->n_rot % 2)
		return not_whole(c, "head size %d and rotated dimensions %d must be even", hp->head_dim, hp->n_rot);
	int vlen;
	if ((rc = meta_int(c, "attention.value_length", hp->head_dim, 1, 1024, &vlen)))
		return rc;
	if (vlen != hp->head_dim)
		return not_whole(c, "value heads of %d values differ from key heads of %d: not supported", vlen,
				 hp->head_dim);
	hp->rope_factor = 1;
	char key[128];
	snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch);
	if (hs__gguf_get_str(c->g, key, &s) == 0 && !(s.n == 4 && memcmp(s.p, "none", 4) == 0)) {
		if (!(s.n == 4 && memcmp(s.p, "yarn", 4) == 0))
			return not_whole(c, "%s '%.*s': hotset runs yarn or none", key, (int)(s.n > 32 ? 32 : s.n), s.p);
		hp->rope_yarn = 1;
		if ((rc = meta_float(c, "rope.scaling.factor", 1, 1, 1024, &hp->rope_factor)) ||
		    (rc = meta_int(c, "rope.scaling.original_context_length", hp->n_ctx_train, 1, 1 << 24,
				   &hp->rope_orig_ctx)))
			return rc;
	}
	if (a->swa_every && (rc = meta_int(c, "attention.sliding_window", 0, 0, 1 << 24, &hp->swa_window)))
		return rc;
	hp->expert_scale = 1;
	if (a->qwen35 && (rc = q35_hparams(c, hp)))
		return rc;
	return 0;
}

static int layer(struct ctx *c, const struct hs_model_arch *a, const struct hs_hparams *hp, int i,
		 struct hs_dense_layer *L)
{
	const int q = hp->n_head * hp->head_dim, kv = hp->n_head_kv * hp->head_dim, d = hp->n_embd;
	char norm[64];
	int rc;

	snprintf(norm, sizeof norm, "%s.weight", a->moe_norm);
	if ((rc = vec(c, i, "attn_norm.weight", d, 0, &L->attn_norm)) || (rc = vec(c, i, norm, d, 0, &L->ffn_norm)) ||
	    (rc = mat(c, i, "attn_q.weight", d, q, &L->wq)) || (rc = mat(c, i, "attn_k.weight", d, kv, &L->wk)) ||
	    (rc = mat(c, i, "attn_v.weight", d, kv, &L->wv)) || (rc = mat(c, i, "attn_output.weight", q, d, &L->wo)))
		return rc;
	if (a->attn_bias &&
	    ((rc = vec(c, i, "attn_q.bias", q, 0, &L->bq)) || (rc = vec(c, i, "attn_k.bias", kv, 0, &L->bk)) ||
	     (rc = vec(c, i, "attn_v.bias", kv, 0, &L->bv)) || (rc = vec(c, i, "attn_output.bias", d, 0, &L->bo))))
		return rc;
	if (a->sinks && (rc = vec(c, i, "attn_sinks.weight", hp->n_head, 0, &L->sinks)))
		return rc;
	if (a->qk_norm && ((rc = vec(c, i, "attn_q_norm.weight", hp->head_dim, 0, &L->q_norm)) ||
			   (rc = vec(c, i, "attn_k_norm.weight", hp->head_dim, 0, &L->k_norm))))
		return rc;
	L->swa = hp->swa_window > 0 && a->swa_every > 0 && i % a->swa_every != a->swa_every - 1;
	return 0;
}

/* glm4moe (as llama.cpp reads it): q/k/v biases and per-head q/k norms
 * each optional (GLM-4.5-Air has the biases, GLM-4.5 the norms too); the
 * first leading_dense_block_count layers have a dense SwiGLU FFN of
 * feed_forward_length, the others a shared expert of expert_shared_count x
 * expert_feed_forward_length beside their routed experts. */
static int layer_glm4moe(struct ctx *c, const struct hs_hparams *hp, int i, int n_dense, int ff_dense, int ff_shared,
			 struct hs_dense_layer *L)
{
	const int q = hp->n_head * hp->head_dim, kv = hp->n_head_kv * hp->head_dim, d = hp->n_embd;
	const int ff = i < n_dense ? ff_dense : ff_shared;
	const char *sfx = i < n_dense ? "" : "_shexp";
	char g[48], u[48], dn[48];
	int rc;

	if ((rc = vec(c, i, "attn_q.bias", q, 1, &L->bq)) || (rc = vec(c, i, "attn_k.bias", kv, 1, &L->bk)) ||
	    (rc = vec(c, i, "attn_v.bias", kv, 1, &L->bv)) ||
	    (rc = vec(c, i, "attn_q_norm.weight", hp->head_dim, 1, &L->q_norm)) ||
	    (rc = vec(c, i, "attn_k_norm.weight", hp->head_dim, 1, &L->k_norm)))
		return rc;
	if (!L->q_norm != !L->k_norm)
		return not_whole(c, "layer %d has one of attn_q_norm and attn_k_norm, not both", i);
	L->ffn_dense = i < n_dense;
	if (ff == 0)
		return 0; /* an MoE layer without a shared expert */
	snprintf(g, sizeof g, "ffn_gate%s.weight", sfx);
	snprintf(u, sizeof u, "ffn_up%s.weight", sfx);
	snprintf(dn, sizeof dn, "ffn_down%s.weight", sfx);
	if ((rc = mat(c, i, g, d, ff, &L->ffn_gate)) || (rc = mat(c, i, u, d, ff, &L->ffn_up)) ||
	    (rc = mat(c, i, dn, ff, d, &L->ffn_down)))
		return rc;
	return 0;
}

/* The glm4moe keys that shape the FFNs. */
static int glm4moe_ffn_keys(struct ctx *c, int n_layers, int *n_dense, int *ff_dense, int *ff_shared)
{
	int n_shared, ff_exp, rc;

	if ((rc = meta_int(c, "leading_dense_block_count", 0, 0, n_layers, n_dense)) ||
	    (rc = meta_int(c, "feed_forward_length", *n_dense ? -1 : 0, *n_dense ? 1 : 0, 1 << 20, ff_dense)) ||
	    (rc = meta_int(c, "expert_shared_count", 0, 0, 64, &n_shared)) ||
	    (rc = meta_int(c, "expert_feed_forward_length", n_shared ? -1 : 0, n_shared ? 1 : 0, 1 << 20, &ff_exp)))
		return rc;
	*ff_shared = n_shared * ff_exp;
	return 0;
}

uint64_t hs__whole_state_bytes(const struct hs_hparams *hp)
{
	const uint64_t conv = (uint64_t)(hp->ssm_conv - 1) * (2 * hp->ssm_nk + hp->ssm_nv) * hp->ssm_dh,
		       delta = (uint64_t)hp->ssm_nv * hp->ssm_dh * hp->ssm_dh;
	return hp->n_recurrent ? (uint64_t)hp->n_recurrent * sizeof(float) * (conv + delta) : 0;
}

int hs__q35_matrices(struct hs_dense_layer *L, struct hs_weight **out)
{
	struct hs_q35_layer *Q = &L->q35;
	struct hs_weight *all[8] = { &Q->qkv, &Q->z, &Q->beta, &Q->alpha, &Q->out, &Q->sh_gate, &Q->sh_up, &Q->sh_down };
	int n = 0;
	for (int i = 0; i < 8; i++)
		if (all[i]->data)
			out[n++] = all[i];
	return n;
}

void hs__whole_free(struct hs_whole *w)
{
	if (!w)
		return;
	free(w->layers);
	free(w);
}

static uint64_t weight_bytes(const struct hs_weight *w)
{
	return (uint64_t)w->rows * w->row_bytes;
}

int hs__whole_describe(const struct hs_gguf *g, const char *arch, const char *path, int n_layers, int n_embd,
		       struct hs_whole **out, char *why, size_t why_len)
{
	struct ctx c = { g, arch, path, why, why_len };
	const struct hs_model_arch *a = hs__model_arch_find(arch, strlen(arch));
	struct hs_whole *w = calloc(1, sizeof *w);
	int rc;

	*out = NULL;
	why[0] = '\0';
	if (!w || !(w->layers = calloc(n_layers, sizeof *w->layers))) {
		hs__whole_free(w);
		return hs__error(ENOMEM, "%s: out of memory", path);
	}
	if (!a) {
		rc = not_whole(&c, "architecture '%s' has no whole-model entry", arch);
		goto out_free;
	}
	struct hs_hparams *hp = &w->hp;
	if ((rc = hparams(&c, a, n_layers, n_embd, hp)) || (rc = mat(&c, -1, "token_embd.weight", n_embd, 0, &w->tok_embd)) ||
	    (rc = vec(&c, -1, "output_norm.weight", n_embd, 0, &w->output_norm)))
		goto out_free;
	hp->n_vocab = w->tok_embd.rows;
	if (find(&c, -1, "output.weight")) {
		if ((rc = mat(&c, -1, "output.weight", n_embd, hp->n_vocab, &w->output)))
			goto out_free;
	} else {
		w->output = w->tok_embd; /* tied embeddings (some Qwen3 files) */
	}
	if (a->glm4moe && (rc = glm4moe_ffn_keys(&c, n_layers, &w->n_dense_ffn, &w->n_ff_dense, &w->n_ff_shared)))
		goto out_free;
	for (int i = 0; i < n_layers; i++) {
		if ((rc = a->qwen35 ? q35_layer(&c, hp, i, &w->layers[i]) : layer(&c, a, hp, i, &w->layers[i])) ||
		    (a->glm4moe &&
		     (rc = layer_glm4moe(&c, hp, i, w->n_dense_ffn, w->n_ff_dense, w->n_ff_shared, &w->layers[i]))))
			goto out_free;
		hp->n_recurrent += w->layers[i].q35.recurrent;
	}
	w->dense_bytes = w->output.data != w->tok_embd.data ? weight_bytes(&w->output) : 0;
	for (int i = 0; i < n_layers; i++) {
		const struct hs_dense_layer *L = &w->layers[i];
		const uint64_t ffn = L->ffn_gate.data ? weight_bytes(&L->ffn_gate) + weight_bytes(&L->ffn_up) +
								 weight_bytes(&L->ffn_down)
						      : 0;
		w->dense_bytes += weight_bytes(&L->wq) + weight_bytes(&L->wk) + weight_bytes(&L->wv) + weight_bytes(&L->wo) + ffn;
		*(L->ffn_dense ? &w->dense_ffn_bytes : &w->shared_bytes) += ffn;
		if (L->ffn_gate.data && L->ffn_gate.rows > w->n_ff_max)
			w->n_ff_max = L->ffn_gate.rows;
		struct hs_weight *extra[8];
		for (int k = 0, ne = hs__q35_matrices(&w->layers[i], extra); k < ne; k++)
			w->dense_bytes += weight_bytes(extra[k]);
	}
	*out = w;
	return 0;
out_free:
	hs__whole_free(w);
	return 0; /* not a whole model: why says so */
}
