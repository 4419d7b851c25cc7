/* `hotset gen`: synthetic MoE GGUF files.  Every row is made from its own
 * seed (seed, tensor, row), so rows can be made in any order, in parallel,
 * and again later by a test that checks what was written. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "model/arch.h"
#include "cpu_kernels/moe.h"
#include "base/error.h"
#include "model/gen.h"

static const struct hs_gen_params presets[] = {
	{ "gpt-oss", 36, 128, 4, 2880, 2880, HS_TYPE_MXFP4, 1, "gpt-oss-120b" },
	{ "gpt-oss", 24, 32, 4, 2880, 2880, HS_TYPE_MXFP4, 1, "gpt-oss-20b" },
	{ "qwen3moe", 48, 128, 8, 2048, 768, HS_TYPE_Q8_0, 1, "qwen3-30b-a3b" },
	{ "qwen3moe", 94, 128, 8, 4096, 1536, HS_TYPE_Q8_0, 1, "qwen3-235b-a22b" },
	{ "gpt-oss", 2, 32, 4, 256, 256, HS_TYPE_MXFP4, 1, "tiny" },
};

const struct hs_gen_params *hs__gen_preset(const char *name)
{
	for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
		if (strcmp(presets[i].name, name) == 0)
			return &presets[i];
	return NULL;
}

const char *hs__gen_preset_names(void)
{
	return "gpt-oss-120b, gpt-oss-20b, qwen3-30b-a3b, qwen3-235b-a22b, tiny";
}

enum kind { ROUTER_W, ROUTER_B, W_IN, W_OUT, B_FF, B_EMBD };

static const struct {
	const char *suffix;
	enum kind kind;
	int bias; /* only for architectures with biases */
} slots[] = {
	{ "ffn_gate_inp.weight", ROUTER_W, 0 }, { "ffn_gate_exps.weight", W_IN, 0 },
	{ "ffn_up_exps.weight", W_IN, 0 },     { "ffn_down_exps.weight", W_OUT, 0 },
	{ "ffn_gate_inp.bias", ROUTER_B, 1 },  { "ffn_gate_exps.bias", B_FF, 1 },
	{ "ffn_up_exps.bias", B_FF, 1 },       { "ffn_down_exps.bias", B_EMBD, 1 },
};

static int per_layer(const struct hs_gen_params *p)
{
	return hs__arch_find(p->arch, strlen(p->arch))->has_bias ? 8 : 4;
}

int hs__gen_check(const struct hs_gen_params *p)
{
	const struct hs_moe_arch *a = p->arch ? hs__arch_find(p->arch, strlen(p->arch)) : NULL;
	size_t blk = hs__type_block_values(p->type);

	if (!a)
		return hs__error(EINVAL, "--arch %s: not one of gpt-oss, qwen3moe", p->arch ? p->arch : "(none)");
	if (p->type != HS_TYPE_MXFP4 && p->type != HS_TYPE_Q8_0 && p->type != HS_TYPE_F16 &&
	    p->type != HS_TYPE_BF16 && p->type != HS_TYPE_F32)
		return hs__error(EINVAL, "--type: not one of mxfp4, q8_0, f16, bf16, f32");
	if (p->n_layers < 1 || p->n_layers > 1024)
		return hs__error(EINVAL, "--layers %d: 1..1024 allowed", p->n_layers);
	if (p->n_experts < 1 || p->n_experts > 4096)
		return hs__error(EINVAL, "--experts %d: 1..4096 allowed", p->n_experts);
	if (p->n_used < 1 || p->n_used > p->n_experts || p->n_used > 64)
		return hs__error(EINVAL, "--used %d: 1..%d allowed (at most the expert count, at most 64)", p->n_used,
				 p->n_experts < 64 ? p->n_experts : 64);
	if (p->n_embd < (int)blk || p->n_embd > 65536 || p->n_embd % (int)blk)
		return hs__error(EINVAL, "--embd %d: a multiple of %zu (the %s block) up to 65536", p->n_embd, blk,
				 hs__type_name(p->type));
	if (p->n_ff < (int)blk || p->n_ff > 65536 || p->n_ff % (int)blk)
		return hs__error(EINVAL, "--ff %d: a multiple of %zu (the %s block) up to 65536", p->n_ff, blk,
				 hs__type_name(p->type));
	return 0;
}

int hs__gen_n_tensors(const struct hs_gen_params *p)
{
	return p->n_layers * per_layer(p);
}

const char *hs__gen_tensor_name(const struct hs_gen_params *p, int tensor, char *buf, int len)
{
	snprintf(buf, len, "blk.%d.%s", tensor / per_layer(p), slots[tensor % per_layer(p)].suffix);
	return buf;
}

/* Shape {ne0, ne1, ne2}, dims and type of a tensor. */
static int shape(const struct hs_gen_params *p, int tensor, uint64_t ne[3], int *type)
{
	uint64_t D = p->n_embd, F = p->n_ff, E = p->n_experts;

	*type = HS_TYPE_F32;
	switch (slots[tensor % per_layer(p)].kind) {
	case ROUTER_W: ne[0] = D; ne[1] = E; return 2;
	case ROUTER_B: ne[0] = E; return 1;
	case W_IN: ne[0] = D; ne[1] = F; ne[2] = E; *type = p->type; return 3;
	case W_OUT: ne[0] = F; ne[1] = D; ne[2] = E; *type = p->type; return 3;
	case B_FF: ne[0] = F; ne[1] = E; return 2;
	case B_EMBD: ne[0] = D; ne[1] = E; return 2;
	}
	return 0;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Values of one row: near-Gaussian (a sum of four uniforms) with standard
 * deviation 1/sqrt(fan-in) for matrices, 0.05 for biases. */
static void make_row(const struct hs_gen_params *p, int tensor, uint64_t row, uint64_t n, float *out)
{
	uint64_t s = p->seed * 0x2545f4914f6cdd1dull ^ ((uint64_t)tensor << 40) ^ row;
	enum kind k = slots[tensor % per_layer(p)].kind;
	float sd = k == ROUTER_B || k == B_FF || k == B_EMBD ? 0.05f : 1.0f / sqrtf((float)n);
	const float norm = sd * 1.7320508f / 65535.0f; /* sqrt(3): unit variance */

	splitmix64(&s);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t r = splitmix64(&s);
		float sum = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) + (float)((r >> 32) & 0xffff) +
			    (float)(r >> 48);
		out[i] = (sum - 2.0f * 65535.0f) * norm;
	}
}

int hs__gen_rows(const struct hs_gen_params *p, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	uint64_t ne[3] = { 1, 1, 1 };
	int type, failed = 0;

	shape(p, tensor, ne, &type);
	size_t rb = hs__type_row_bytes(type, ne[0]);
#pragma omp parallel
	{
		float *row = malloc(sizeof *row * ne[0]);
		if (!row) {
#pragma omp atomic write
			failed = 1;
		}
#pragma omp for schedule(static)
		for (int64_t r = 0; r < (int64_t)n_rows; r++) {
			if (!row)
				continue;
			make_row(p, tensor, row0 + (uint64_t)r, ne[0], row);
			hs__quantize_row_ref(type, row, (uint8_t *)buf + (size_t)r * rb, ne[0]);
		}
		free(row);
	}
	return failed ? hs__error(ENOMEM, "gen: out of memory") : 0;
}

uint64_t hs__gen_data_bytes(const struct hs_gen_params *p)
{
	uint64_t total = 0;
	for (int t = 0; t < hs__gen_n_tensors(p); t++) {
		uint64_t ne[3] = { 1, 1, 1 };
		int type;
		shape(p, t, ne, &type);
		total += hs__type_row_bytes(type, ne[0]) * ne[1] * ne[2];
	}
	return total;
}

static int fill(void *p, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	return hs__gen_rows(p, tensor, row0, n_rows, buf);
}

int hs__gen_write(const struct hs_gen_params *p, const char *path, hs_gguf_progress_fn progress, void *ctx)
{
	struct hs_gguf_writer *w;
	char key[96], name[96];
	int rc;

	if ((rc = hs__gen_check(p)))
		return rc;
	w = hs__gguf_writer_new();
	if (!w)
		return -ENOMEM;
	rc = hs__gguf_w_str(w, "general.architecture", p->arch);
	if (!rc) rc = hs__gguf_w_str(w, "general.name", p->name ? p->name : "hotset gen");
	if (!rc) rc = hs__gguf_w_u32(w, "general.alignment", 32);
	if (!rc) rc = hs__gguf_w_u64(w, "hotset.gen.seed", p->seed);
#define ARCH_U32(k, v) \
	if (!rc) { snprintf(key, sizeof key, "%s." k, p->arch); rc = hs__gguf_w_u32(w, key, (uint32_t)(v)); }
	ARCH_U32("block_count", p->n_layers);
	ARCH_U32("expert_count", p->n_experts);
	ARCH_U32("expert_used_count", p->n_used);
	ARCH_U32("embedding_length", p->n_embd);
	ARCH_U32("expert_feed_forward_length", p->n_ff);
#undef ARCH_U32
	for (int t = 0; t < hs__gen_n_tensors(p) && !rc; t++) {
		uint64_t ne[3] = { 1, 1, 1 };
		int type, nd = shape(p, t, ne, &type);
		rc = hs__gguf_w_tensor(w, hs__gen_tensor_name(p, t, name, sizeof name), nd, ne, type);
		rc = rc < 0 ? rc : 0;
	}
	if (!rc)
		rc = hs__gguf_w_write(w, path, fill, (void *)p, progress, ctx);
	hs__gguf_writer_free(w);
	return rc;
}
