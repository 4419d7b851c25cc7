/* What the planner needs to know about a model: from a preset (shapes as
 * `gen` writes them, plus published file sizes) or from a GGUF file. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "hotset.h"
#include "base/error.h"
#include "model/gen.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model/whole.h"

/* Published facts the shapes alone do not give: the size of the common
 * GGUF file (its non-expert part follows from it) and the attention shape
 * that sizes the KV cache.  gpt-oss-120b: 59.02 GiB (NOTES.md); the others
 * are the sizes of the common MXFP4 / Q8_0 files, rounded (approximate). */
static const struct {
	const char *name;
	double file_gib;
	int n_head_kv, head_dim, swa_window, swa_every;
} published[] = {
	{ "gpt-oss-120b", 59.02, 8, 64, 128, 2 },
	{ "gpt-oss-20b", 11.28, 8, 64, 128, 2 },
	{ "qwen3-30b-a3b", 30.25, 4, 128, 0, 0 },
	{ "qwen3-235b-a22b", 232.8, 4, 128, 0, 0 },
	{ "tiny", 0, 2, 32, 0, 0 },
};

/* ---- the dense tensors a device holds (runtime/fwd-dev.c uploads them) ---- */

static void dense_tensor(struct hs_model_desc *out, uint64_t bytes)
{
	if (!bytes)
		return;
	out->dense_device_bytes += (bytes + 255) & ~(uint64_t)255;
	out->dense_device_tensors++;
}

/* From the tensors `gen` writes for a preset (the published files' layout):
 * every tensor but token_embd, the routers (and their biases) and the
 * experts goes to the device; the dense FFNs among them (glm4moe's leading
 * layers and shared experts) are counted apart too. */
static void dense_from_gen(const struct hs_gen_params *in, struct hs_model_desc *out)
{
	const struct hs_gen_params p = hs__gen_resolve(in);
	const int oss = strcmp(p.arch, "gpt-oss") == 0;

	out->n_head = p.n_head;
	out->n_head_kv = p.n_head_kv; /* the shapes the file has */
	out->head_dim = p.head_dim;
	out->swa_window = oss ? p.swa_window : 0;
	out->swa_every = oss && p.swa_window ? 2 : 0;
	out->n_vocab = p.n_vocab;
	out->n_rot = p.n_rot;
	if (strcmp(p.arch, "qwen35moe") == 0) { /* attention every full_attn_every-th layer, DeltaNet states */
		const uint64_t conv = (uint64_t)(p.ssm_conv - 1) * (2 * p.ssm_nk + p.ssm_nv) * p.ssm_dh,
			       delta = (uint64_t)p.ssm_nv * p.ssm_dh * p.ssm_dh;
		out->full_attn_every = p.full_attn_every;
		out->recurrent_state_bytes = (uint64_t)(p.n_layers - p.n_layers / p.full_attn_every) * 4 * (conv + delta);
		out->recurrent_ubatch_floats = hs__q35_ubatch_floats((2 * p.ssm_nk + p.ssm_nv) * p.ssm_dh, p.ssm_nv * p.ssm_dh,
								       p.ssm_nv, p.n_head * p.head_dim);
	}
	out->dense_type = out->output_type = p.dense_type;
	for (int t = 0, n = hs__gen_n_tensors(&p); t < n; t++) {
		char name[64];
		uint64_t ne[3];
		int type;
		hs__gen_tensor_info(&p, t, name, sizeof name, ne, &type);
		if (!strcmp(name, "token_embd.weight") || strstr(name, "_exps.") || strstr(name, "ffn_gate_inp.") ||
		    strstr(name, "exp_probs_b."))
			continue;
		const uint64_t bytes = hs__type_row_bytes(type, ne[0]) * ne[1] * ne[2];
		dense_tensor(out, bytes);
		const char *ffn = strstr(name, ".ffn_");
		if (!ffn || strstr(name, "_norm") || strstr(name, "ffn_gate_inp")) /* qwen35moe's shared gate vector */
			continue;
		out->ffn_macs += ne[0] * ne[1];
		if (strstr(name, "_shexp."))
			out->shared_expert_bytes += bytes;
		if (!strncmp(ffn, ".ffn_gate", 9) && (int)ne[1] > out->ffn_ff) {
			out->ffn_ff = (int)ne[1];
			out->ffn_gate_type = out->ffn_down_type = type;
		}
	}
}

static uint64_t weight_bytes(const struct hs_weight *w)
{
	return (uint64_t)w->rows * w->row_bytes;
}

/* From an opened whole model: the tensors the forward pass uploads. */
static void dense_from_whole(const struct hs_whole *w, struct hs_model_desc *out)
{
	const struct hs_hparams *hp = &w->hp;
	const uint64_t D = hp->n_embd, Q = (uint64_t)hp->n_head * hp->head_dim, KV = (uint64_t)hp->n_head_kv * hp->head_dim;

	out->n_head = hp->n_head;
	out->n_vocab = hp->n_vocab;
	out->n_rot = hp->n_rot;
	out->dense_type = w->output.type;
	for (int l = hp->n_layers - 1; l >= 0; l--) /* the first layer with attention (qwen35moe's 0 has none) */
		if (w->layers[l].wq.data)
			out->dense_type = w->layers[l].wq.type;
	out->output_type = w->output.type;
	if (hp->n_recurrent) {
		/* the layer pattern as an interval (what llama.cpp's converter writes); a file whose
		 * recurrent_layers follow no interval is counted as attention everywhere (more KV) */
		int first = 0;
		while (first < hp->n_layers && w->layers[first].q35.recurrent)
			first++;
		int every = first + 1, ok = 1;
		for (int l = 0; l < hp->n_layers; l++)
			ok &= w->layers[l].q35.recurrent == ((l + 1) % every != 0);
		out->full_attn_every = ok ? every : 0;
		out->recurrent_state_bytes = hs__whole_state_bytes(hp);
		out->recurrent_ubatch_floats = hs__q35_ubatch_floats((2 * hp->ssm_nk + hp->ssm_nv) * hp->ssm_dh,
								       hp->ssm_nv * hp->ssm_dh, hp->ssm_nv,
								       hp->n_head * hp->head_dim);
	}
	dense_tensor(out, 4 * D);
	dense_tensor(out, weight_bytes(&w->output));
	for (int l = 0; l < hp->n_layers; l++) {
		const struct hs_dense_layer *L = &w->layers[l];
		dense_tensor(out, L->attn_norm ? 4 * D : 0);
		dense_tensor(out, L->ffn_norm ? 4 * D : 0);
		dense_tensor(out, weight_bytes(&L->wq));
		dense_tensor(out, weight_bytes(&L->wk));
		dense_tensor(out, weight_bytes(&L->wv));
		dense_tensor(out, weight_bytes(&L->wo));
		dense_tensor(out, L->bq ? 4 * Q : 0);
		dense_tensor(out, L->bk ? 4 * KV : 0);
		dense_tensor(out, L->bv ? 4 * KV : 0);
		dense_tensor(out, L->bo ? 4 * D : 0);
		dense_tensor(out, L->sinks ? 4 * (uint64_t)hp->n_head : 0);
		dense_tensor(out, L->q_norm ? 4 * (uint64_t)hp->head_dim : 0);
		dense_tensor(out, L->k_norm ? 4 * (uint64_t)hp->head_dim : 0);
		/* qwen35moe: the DeltaNet matrices and vectors, the shared expert's gate vector */
		const struct hs_q35_layer *R = &L->q35;
		const uint64_t conv = (uint64_t)(2 * hp->ssm_nk + hp->ssm_nv) * hp->ssm_dh;
		struct hs_weight *extra[8];
		for (int k = 0, ne = hs__q35_matrices((struct hs_dense_layer *)L, extra); k < ne; k++)
			if (extra[k] != &R->sh_gate && extra[k] != &R->sh_up && extra[k] != &R->sh_down)
				dense_tensor(out, weight_bytes(extra[k]));
		dense_tensor(out, R->conv ? 4 * (uint64_t)hp->ssm_conv * conv : 0);
		dense_tensor(out, R->dt_bias ? 4 * (uint64_t)hp->ssm_nv : 0);
		dense_tensor(out, R->a ? 4 * (uint64_t)hp->ssm_nv : 0);
		dense_tensor(out, R->norm ? 4 * (uint64_t)hp->ssm_dh : 0);
		dense_tensor(out, R->sh_inp ? 4 * D : 0);
		/* a dense FFN beside the attention: glm4moe's, or a shared expert (qwen35moe's too) */
		int shexp = R->sh_gate.data != NULL;
		const struct hs_weight *f[3] = { shexp ? &R->sh_gate : &L->ffn_gate, shexp ? &R->sh_up : &L->ffn_up,
						 shexp ? &R->sh_down : &L->ffn_down };
		if (!f[0]->data)
			continue;
		for (int i = 0; i < 3; i++) {
			dense_tensor(out, weight_bytes(f[i]));
			out->ffn_macs += (uint64_t)f[i]->rows * f[i]->cols;
			if (!L->ffn_dense)
				out->shared_expert_bytes += weight_bytes(f[i]);
		}
		if (f[0]->rows > out->ffn_ff) {
			out->ffn_ff = f[0]->rows;
			out->ffn_gate_type = f[0]->type;
			out->ffn_down_type = f[2]->type;
		}
	}
}

static uint64_t expert_bytes(int type, int arch_bias, int n_embd, int n_ff)
{
	uint64_t w = hs__type_row_bytes(type, (uint64_t)n_embd) * 2 * (uint64_t)n_ff +
		     hs__type_row_bytes(type, (uint64_t)n_ff) * (uint64_t)n_embd;
	return w + (arch_bias ? 4ull * (2ull * n_ff + n_embd) : 0);
}

int hs_model_desc_preset(const char *name, struct hs_model_desc *out)
{
	const struct hs_gen_params *g = name ? hs__gen_preset(name) : NULL;

	HS_NEED(out, -EINVAL);
	if (!g)
		return hs__error(EINVAL, "unknown model preset '%s' (known: %s)", name ? name : "(null)",
				 hs__gen_preset_names());
	hs__model_desc_from_gen(g, out);
	return 0;
}

void hs__model_desc_from_gen(const struct hs_gen_params *g, struct hs_model_desc *out)
{
	const char *name = g->name ? g->name : "";

	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "%s", g->name);
	snprintf(out->arch, sizeof out->arch, "%s", g->arch);
	out->n_layers = g->n_layers;
	out->n_moe_layers = g->n_layers - g->n_dense_layers; /* glm4moe's leading layers are dense */
	for (int i = 0; i < out->n_moe_layers; i++)
		out->moe_layer[i] = g->n_dense_layers + i;
	out->n_experts = g->n_experts;
	out->n_used = g->n_used;
	out->n_embd = g->n_embd;
	out->n_ff = g->n_ff;
	out->expert_type = g->type;
	out->expert_bytes = expert_bytes(g->type, strcmp(g->arch, "gpt-oss") == 0, g->n_embd, g->n_ff);
	uint64_t experts = out->expert_bytes * (uint64_t)g->n_experts * (uint64_t)out->n_moe_layers;
	/* without a published size: the file gen writes (glm4moe: no MTP layer) */
	out->file_bytes = hs__gen_data_bytes(g);
	out->nonexpert_bytes = out->file_bytes > experts ? out->file_bytes - experts : 0;
	for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
		if (strcmp(published[i].name, name))
			continue;
		out->file_bytes = (uint64_t)(published[i].file_gib * 1073741824.0);
		if (out->file_bytes < experts) /* tiny: gen writes experts and routers only */
			out->file_bytes = experts + (uint64_t)g->n_layers * g->n_experts * g->n_embd * 4;
		out->nonexpert_bytes = out->file_bytes - experts;
		out->n_head_kv = published[i].n_head_kv;
		out->head_dim = published[i].head_dim;
		out->swa_window = published[i].swa_window;
		out->swa_every = published[i].swa_every;
	}
	if (!g->moe_only)
		dense_from_gen(g, out);
}

static int key_u32(const struct hs_gguf *g, const char *arch, const char *suffix, int *v)
{
	char key[128];
	uint64_t x;

	snprintf(key, sizeof key, "%s.%s", arch, suffix);
	if (hs__gguf_get_u64(g, key, &x) || x > 1u << 30)
		return -1;
	*v = (int)x;
	return 0;
}

/* The expert weight bytes of one more matrix of `type`; a type past the
 * HS_MAX_MIX-th counts with the last one kept. */
static void mix_add(struct hs_model_desc *d, int type, uint64_t bytes)
{
	int i = 0;
	while (i < d->n_mix && d->mix_type[i] != type)
		i++;
	if (i == HS_MAX_MIX)
		i = HS_MAX_MIX - 1;
	else if (i == d->n_mix)
		d->mix_type[d->n_mix++] = type;
	d->mix_bytes[i] += bytes;
}

static void mix_sort(struct hs_model_desc *d)
{
	for (int i = 1; i < d->n_mix; i++)
		for (int j = i; j > 0 && d->mix_bytes[j] > d->mix_bytes[j - 1]; j--) {
			uint64_t b = d->mix_bytes[j];
			int t = d->mix_type[j];
			d->mix_bytes[j] = d->mix_bytes[j - 1];
			d->mix_type[j] = d->mix_type[j - 1];
			d->mix_bytes[j - 1] = b;
			d->mix_type[j - 1] = t;
		}
}

int hs_model_desc_from_model(const hs_model *m, struct hs_model_desc *out)
{
	HS_NEED(m, -EINVAL);
	HS_NEED(out, -EINVAL);
	const struct hs_model_info *in = hs_model_info(m);
	const struct hs_gguf *g = hs__model_gguf(m);

	if (in->n_layers > HS_MAX_LAYERS)
		return hs__error(EINVAL, "model '%s' has %d layers, the planner takes at most %d", in->name,
				 in->n_layers, HS_MAX_LAYERS);
	memset(out, 0, sizeof *out);
	snprintf(out->name, sizeof out->name, "%s", in->name[0] ? in->name : "model");
	snprintf(out->arch, sizeof out->arch, "%s", in->arch);
	out->n_layers = in->n_layers;
	for (int i = 0; i < in->n_layers; i++)
		if (hs_model_layer_is_moe(m, i))
			out->moe_layer[out->n_moe_layers++] = i;
	out->n_experts = in->n_experts;
	out->n_used = in->n_used;
	out->n_embd = in->n_embd;
	out->n_ff = in->n_ff;
	out->expert_type = in->expert_type;
	out->expert_bytes = in->expert_weight_bytes + in->expert_bias_bytes;
	uint64_t largest = 0;
	for (int i = 0; i < out->n_moe_layers; i++) {
		const struct hs_moe_layer *l = hs__model_layer(m, out->moe_layer[i]);
		if (hs__model_expert_weight_bytes(l) > largest) {
			largest = hs__model_expert_weight_bytes(l);
			memcpy(out->slot_types, l->type, sizeof out->slot_types);
		}
		for (int p = 0; p < 3; p++) {
			uint64_t rows = p == HS_DOWN ? (uint64_t)l->n_embd : (uint64_t)l->n_ff;
			uint64_t cols = p == HS_DOWN ? (uint64_t)l->n_ff : (uint64_t)l->n_embd;
			mix_add(out, l->type[p], rows * hs__type_row_bytes(l->type[p], cols) * (uint64_t)l->n_experts);
		}
	}
	mix_sort(out);
	out->file_bytes = in->file_bytes;
	out->nonexpert_bytes = in->non_expert_bytes;

	/* the KV cache: head_count_kv and key_length; absent keys leave it 0
	 * (files written by `gen` carry no attention) */
	int n_head = 0, kv = 0, klen = 0, swa = 0;
	key_u32(g, in->arch, "attention.head_count", &n_head);
	if (key_u32(g, in->arch, "attention.head_count_kv", &kv))
		kv = n_head;
	if (key_u32(g, in->arch, "attention.key_length", &klen) && n_head > 0)
		klen = in->n_embd / n_head;
	out->n_head_kv = kv;
	out->head_dim = klen;
	if (!key_u32(g, in->arch, "attention.sliding_window", &swa) && swa > 0) {
		out->swa_window = swa;
		out->swa_every = strcmp(in->arch, "gpt-oss") == 0 ? 2 : 0; /* gpt-oss alternates */
	}
	const struct hs_whole *w = hs__model_whole(m);
	if (w)
		dense_from_whole(w, out);
	hs__error_clear();
	return 0;
}
