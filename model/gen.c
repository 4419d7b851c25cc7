/* `hotset gen`: synthetic GGUF files.  Every row is made from its own seed
 * (seed, tensor, row), so rows can be made in any order, in parallel, and
 * again later by a test that checks what was written.  A whole model holds
 * what llama.cpp's files of the architecture hold (attention with its
 * biases, sinks or q/k norms, norms, embeddings, output, the routers and
 * experts) and a byte-level tokenizer: 256 byte tokens, the architecture's
 * special tokens, reserved tokens up to the vocabulary size, no merges. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/moe.h"
#include "model/arch.h"
#include "model/gen.h"

/* name, arch, layers, experts, used, embd, ff, type, seed, general.name, moe_only, vocab, heads, kv heads,
 * head size, dense type, window, context, down type; glm4moe: dense layers, their ff, shared experts, q/k
 * norms, expert scale (the models' config.json; the MTP layer the published files add is not written) */
static const struct hs_gen_params presets[] = {
	{ "gpt-oss", 36, 128, 4, 2880, 2880, HS_TYPE_MXFP4, 1, "gpt-oss-120b", 0, 201088, 64, 8, 64, 0, 128, 131072, 0,
	  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	{ "gpt-oss", 24, 32, 4, 2880, 2880, HS_TYPE_MXFP4, 1, "gpt-oss-20b", 0, 201088, 64, 8, 64, 0, 128, 131072, 0,
	  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	{ "qwen3moe", 48, 128, 8, 2048, 768, HS_TYPE_Q8_0, 1, "qwen3-30b-a3b", 0, 151936, 32, 4, 128, 0, 0, 40960, 0,
	  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	{ "qwen3moe", 94, 128, 8, 4096, 1536, HS_TYPE_Q8_0, 1, "qwen3-235b-a22b", 0, 151936, 64, 4, 128, 0, 0, 40960, 0,
	  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
	{ "glm4moe", 46, 128, 8, 4096, 1408, HS_TYPE_Q8_0, 1, "glm-4.5-air", 0, 151552, 96, 8, 128, 0, 0, 131072, 0,
	  1, 10944, 1, 0, 1.0f, 0, 0, 0, 0, 0, 0 },
	{ "glm4moe", 92, 160, 8, 5120, 1536, HS_TYPE_Q8_0, 1, "glm-4.5", 0, 151552, 96, 8, 128, 0, 0, 131072, 0,
	  3, 12288, 1, 1, 2.5f, 0, 0, 0, 0, 0, 0 },
	{ "qwen35moe", 40, 256, 8, 2048, 512, HS_TYPE_Q8_0, 1, "qwen3.5-35b-a3b", 0, 248320, 16, 2, 256, 0, 0, 262144,
	  0, 0, 0, 1, 0, 0, 64, 4, 16, 32, 128, 4 },
	{ "gpt-oss", 2, 32, 4, 256, 256, HS_TYPE_MXFP4, 1, "tiny", 0, 512, 8, 2, 64, 0, 128, 131072, 0,
	  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 },
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
	return "gpt-oss-120b, gpt-oss-20b, qwen3-30b-a3b, qwen3-235b-a22b, glm-4.5-air, glm-4.5, qwen3.5-35b-a3b, tiny";
}

/* The special tokens of each architecture's tokenizer, in id order after
 * the 256 byte tokens; the first is BOS, the one marked is EOS. */
static const char *const harmony[] = { "<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>",
				       "<|channel|>", "<|start|>", "<|end|>", "<|message|>", "<|call|>" };
static const char *const chatml[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>" };
static const char *const glm[] = { "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
				   "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>" };
#define HARMONY_EOS 2 /* <|return|> */
#define CHATML_EOS 2  /* <|im_end|> */

static int is_gpt_oss(const struct hs_gen_params *p)
{
	return strcmp(p->arch, "gpt-oss") == 0;
}

static int is_glm(const struct hs_gen_params *p)
{
	return strcmp(p->arch, "glm4moe") == 0;
}

static int is_q35(const struct hs_gen_params *p)
{
	return strcmp(p->arch, "qwen35moe") == 0;
}

/* qwen35moe's layer l is a Gated DeltaNet layer */
static int q35_recurrent(const struct hs_gen_params *p, int l)
{
	return is_q35(p) && (l + 1) % p->full_attn_every != 0;
}

static int n_special(const struct hs_gen_params *p)
{
	return is_gpt_oss(p) ? (int)(sizeof harmony / sizeof *harmony)
	       : is_glm(p)   ? (int)(sizeof glm / sizeof *glm)
			     : (int)(sizeof chatml / sizeof *chatml);
}

struct hs_gen_params hs__gen_resolve(const struct hs_gen_params *in)
{
	struct hs_gen_params p = *in;
	int oss = p.arch && strcmp(p.arch, "gpt-oss") == 0;

	if (!p.n_vocab)
		p.n_vocab = 512;
	if (!p.head_dim)
		p.head_dim = p.n_embd >= 64 ? 64 : 32;
	if (!p.n_head)
		p.n_head = p.n_embd / p.head_dim > 0 ? p.n_embd / p.head_dim : 1;
	if (!p.n_head_kv)
		p.n_head_kv = p.n_head % 4 == 0 ? p.n_head / 4 : p.n_head % 2 == 0 ? p.n_head / 2 : p.n_head;
	if (!p.dense_type)
		p.dense_type = HS_TYPE_Q8_0;
	if (p.swa_window < 0) /* asked for none */
		p.swa_window = 0;
	else if (!p.swa_window && oss)
		p.swa_window = 128;
	if (!p.n_ctx)
		p.n_ctx = oss ? 131072 : 40960;
	const int glm4 = p.arch && strcmp(p.arch, "glm4moe") == 0, q35 = p.arch && strcmp(p.arch, "qwen35moe") == 0;
	if (glm4 && !p.n_ff_dense)
		p.n_ff_dense = 4 * p.n_ff;
	if (!p.expert_scale)
		p.expert_scale = 1;
	if (!p.n_rot)
		p.n_rot = glm4 ? p.head_dim / 2 : q35 ? p.head_dim / 4 : p.head_dim;
	if (q35) {
		p.full_attn_every = p.full_attn_every ? p.full_attn_every : 4;
		p.ssm_nk = p.ssm_nk ? p.ssm_nk : 16;
		p.ssm_nv = p.ssm_nv ? p.ssm_nv : 32;
		p.ssm_dh = p.ssm_dh ? p.ssm_dh : 128;
		p.ssm_conv = p.ssm_conv ? p.ssm_conv : 4;
	}
	return p;
}

int hs__gen_check(const struct hs_gen_params *in)
{
	const struct hs_moe_arch *a = in->arch ? hs__arch_find(in->arch, strlen(in->arch)) : NULL;
	size_t blk = hs__type_block_values(in->type);

	if (!a)
		return hs__error(EINVAL, "--arch %s: not one of gpt-oss, qwen3moe, glm4moe, qwen35moe",
				 in->arch ? in->arch : "(none)");
	struct hs_gen_params r = hs__gen_resolve(in), *p = &r;
	if (!hs__type_supported(p->type))
		return hs__error(EINVAL, "--type: not one of %s", hs__type_supported_names());
	if (p->down_type && !hs__type_supported(p->down_type))
		return hs__error(EINVAL, "--down-type: not one of %s", hs__type_supported_names());
	const int dt = p->down_type ? p->down_type : p->type;
	const size_t dblk = hs__type_block_values(dt);
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
	if (p->n_ff < (int)dblk || p->n_ff > 65536 || p->n_ff % (int)dblk)
		return hs__error(EINVAL, "--ff %d: a multiple of %zu (the %s block) up to 65536", p->n_ff, dblk,
				 hs__type_name(dt));
	if (p->n_embd % (int)dblk)
		return hs__error(EINVAL, "--embd %d: a multiple of %zu (the %s block of the down matrices)", p->n_embd,
				 dblk, hs__type_name(dt));
	if (p->n_dense_layers < 0 || p->n_dense_layers >= p->n_layers || p->n_shared < 0 || p->n_shared > 8 ||
	    ((p->n_dense_layers || p->qk_norm) && !is_glm(p)) || (p->n_shared && !is_glm(p) && !is_q35(p)) ||
	    (is_q35(p) && p->n_shared > 1))
		return hs__error(EINVAL, "--dense-layers %d / --shared-experts %d: dense layers for glm4moe only (fewer than "
				 "the layers), shared experts for glm4moe (at most 8) and qwen35moe (0 or 1)",
				 p->n_dense_layers, p->n_shared);
	if (!is_q35(p) && in->full_attn_every)
		return hs__error(EINVAL, "--full-attn-every: qwen35moe only");
	if (is_q35(p) && (p->full_attn_every < 1 || p->full_attn_every > p->n_layers || p->ssm_nk < 1 ||
			  p->ssm_nv % p->ssm_nk || p->ssm_nv > 1024 || p->ssm_dh < 1 || p->ssm_dh > 1024 ||
			  (p->ssm_nv * p->ssm_dh) % (int)hs__type_block_values(p->dense_type ? p->dense_type : HS_TYPE_Q8_0) ||
			  p->ssm_conv < 2 || p->ssm_conv > 16))
		return hs__error(EINVAL, "qwen35moe: --full-attn-every %d (1..layers), DeltaNet %d key / %d value heads "
				 "(a multiple of the key heads) of %d (value heads x size a multiple of the dense "
				 "type's block), conv kernel %d (2..16)", p->full_attn_every, p->ssm_nk, p->ssm_nv,
				 p->ssm_dh, p->ssm_conv);
	if (p->n_rot < 2 || p->n_rot > p->head_dim || p->n_rot % 2)
		return hs__error(EINVAL, "rotary dimensions %d: even, 2..the head size %d", p->n_rot, p->head_dim);
	if (is_glm(p) && (p->n_ff_dense < (int)dblk || p->n_ff_dense > 65536 || p->n_ff_dense % (int)dblk))
		return hs__error(EINVAL, "--dense-ff %d: a multiple of %zu up to 65536", p->n_ff_dense, dblk);
	if (!(p->expert_scale > 0 && p->expert_scale <= 1000))
		return hs__error(EINVAL, "expert scale %g: 0..1000", (double)p->expert_scale);
	if (p->moe_only)
		return 0;
	if (!hs__type_supported(p->dense_type) || p->dense_type == HS_TYPE_F32)
		return hs__error(EINVAL, "--dense-type: one of %s but f32", hs__type_supported_names());
	if (p->n_vocab < 256 + n_special(p) || p->n_vocab > (1 << 20))
		return hs__error(EINVAL, "--vocab %d: %d..%d (256 byte tokens and %d special ones at least)", p->n_vocab,
				 256 + n_special(p), 1 << 20, n_special(p));
	if (p->head_dim < 32 || p->head_dim > 256 || p->head_dim % 32)
		return hs__error(EINVAL, "--head-dim %d: a multiple of 32 from 32 to 256", p->head_dim);
	if (p->n_head < 1 || p->n_head > 256 || p->n_head_kv < 1 || p->n_head % p->n_head_kv)
		return hs__error(EINVAL, "--heads %d / --kv-heads %d: 1..256 query heads, a multiple of the KV heads",
				 p->n_head, p->n_head_kv);
	if ((p->n_head * p->head_dim) % (int)hs__type_block_values(p->dense_type) ||
	    p->n_embd % (int)hs__type_block_values(p->dense_type))
		return hs__error(EINVAL, "--dense-type %s: rows of %d and %d values do not fit its blocks",
				 hs__type_name(p->dense_type), p->n_embd, p->n_head * p->head_dim);
	if (p->swa_window < 0 || p->n_ctx < 1 || p->n_ctx > (1 << 24))
		return hs__error(EINVAL, "--window %d / context %d: window >= 0, context 1..%d", p->swa_window, p->n_ctx,
				 1 << 24);
	return 0;
}

/* ---- the tensors, in file order ------------------------------------------------ */

enum kind { MAT, BIAS, NORM, SINK, EMBD, ROUTER, DECAY };

struct spec {
	char name[64];
	int nd;
	uint64_t ne[3];
	int type;
	enum kind kind;
};

/* Calls back for each tensor in order; stops early when want >= 0 and that
 * tensor was reached (its spec in *out).  Returns the count seen. */
static int walk(const struct hs_gen_params *in, int want, struct spec *out)
{
	const struct hs_gen_params r = hs__gen_resolve(in), *p = &r;
	const int oss = is_gpt_oss(p), g = is_glm(p), q35 = is_q35(p), whole = !p->moe_only;
	const uint64_t D = p->n_embd, F = p->n_ff, E = p->n_experts, V = p->n_vocab, HD = p->head_dim,
		       Q = (uint64_t)p->n_head * p->head_dim, KV = (uint64_t)p->n_head_kv * p->head_dim;
	int n = 0;
	struct spec s;

#define T(nm, dims, a, b, c, ty, k)                                                                       \
	do {                                                                                              \
		if (n == want || want < 0) {                                                              \
			snprintf(s.name, sizeof s.name, "%s", nm);                                        \
			s.nd = dims, s.ne[0] = a, s.ne[1] = b, s.ne[2] = c, s.type = ty, s.kind = k;      \
			if (n == want) {                                                                  \
				*out = s;                                                                 \
				return n + 1;                                                             \
			}                                                                                 \
		}                                                                                         \
		n++;                                                                                      \
	} while (0)
	char nm[64];
#define L(suffix) (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), nm)
	if (whole) {
		T("token_embd.weight", 2, D, V, 1, p->dense_type, EMBD);
		T("output_norm.weight", 1, D, 1, 1, HS_TYPE_F32, NORM);
		T("output.weight", 2, D, V, 1, p->dense_type, MAT);
	}
	for (int l = 0; l < p->n_layers; l++) {
		if (whole && q35) { /* a Gated DeltaNet layer, or gated attention */
			const uint64_t K = (uint64_t)p->ssm_nk * p->ssm_dh, VV = (uint64_t)p->ssm_nv * p->ssm_dh,
				       NV = p->ssm_nv;
			T(L("attn_norm.weight"), 1, D, 1, 1, HS_TYPE_F32, NORM);
			T(L("post_attention_norm.weight"), 1, D, 1, 1, HS_TYPE_F32, NORM);
			if (q35_recurrent(p, l)) {
				T(L("attn_qkv.weight"), 2, D, 2 * K + VV, 1, p->dense_type, MAT);
				T(L("attn_gate.weight"), 2, D, VV, 1, p->dense_type, MAT);
				T(L("ssm_conv1d.weight"), 2, p->ssm_conv, 2 * K + VV, 1, HS_TYPE_F32, MAT);
				T(L("ssm_dt.bias"), 1, NV, 1, 1, HS_TYPE_F32, BIAS);
				T(L("ssm_a"), 1, NV, 1, 1, HS_TYPE_F32, DECAY);
				T(L("ssm_beta.weight"), 2, D, NV, 1, p->dense_type, MAT);
				T(L("ssm_alpha.weight"), 2, D, NV, 1, p->dense_type, MAT);
				T(L("ssm_norm.weight"), 1, p->ssm_dh, 1, 1, HS_TYPE_F32, NORM);
				T(L("ssm_out.weight"), 2, VV, D, 1, p->dense_type, MAT);
			} else { /* per head: the query rows, then the output gate's */
				T(L("attn_q.weight"), 2, D, 2 * Q, 1, p->dense_type, MAT);
				T(L("attn_k.weight"), 2, D, KV, 1, p->dense_type, MAT);
				T(L("attn_v.weight"), 2, D, KV, 1, p->dense_type, MAT);
				T(L("attn_output.weight"), 2, Q, D, 1, p->dense_type, MAT);
				T(L("attn_q_norm.weight"), 1, HD, 1, 1, HS_TYPE_F32, NORM);
				T(L("attn_k_norm.weight"), 1, HD, 1, 1, HS_TYPE_F32, NORM);
			}
		} else if (whole) {
			T(L("attn_norm.weight"), 1, D, 1, 1, HS_TYPE_F32, NORM);
			T(L("attn_q.weight"), 2, D, Q, 1, p->dense_type, MAT);
			T(L("attn_k.weight"), 2, D, KV, 1, p->dense_type, MAT);
			T(L("attn_v.weight"), 2, D, KV, 1, p->dense_type, MAT);
			T(L("attn_output.weight"), 2, Q, D, 1, p->dense_type, MAT);
			if (oss) {
				T(L("attn_q.bias"), 1, Q, 1, 1, HS_TYPE_F32, BIAS);
				T(L("attn_k.bias"), 1, KV, 1, 1, HS_TYPE_F32, BIAS);
				T(L("attn_v.bias"), 1, KV, 1, 1, HS_TYPE_F32, BIAS);
				T(L("attn_output.bias"), 1, D, 1, 1, HS_TYPE_F32, BIAS);
				T(L("attn_sinks.weight"), 1, p->n_head, 1, 1, HS_TYPE_F32, SINK);
				T(L("post_attention_norm.weight"), 1, D, 1, 1, HS_TYPE_F32, NORM);
			} else if (g) { /* GLM-4.5: q/k/v biases, q/k norms where it has them */
				T(L("attn_q.bias"), 1, Q, 1, 1, HS_TYPE_F32, BIAS);
				T(L("attn_k.bias"), 1, KV, 1, 1, HS_TYPE_F32, BIAS);
				T(L("attn_v.bias"), 1, KV, 1, 1, HS_TYPE_F32, BIAS);
				if (p->qk_norm) {
					T(L("attn_q_norm.weight"), 1, HD, 1, 1, HS_TYPE_F32, NORM);
					T(L("attn_k_norm.weight"), 1, HD, 1, 1, HS_TYPE_F32, NORM);
				}
				T(L("post_attention_norm.weight"), 1, D, 1, 1, HS_TYPE_F32, NORM);
			} else {
				T(L("attn_q_norm.weight"), 1, HD, 1, 1, HS_TYPE_F32, NORM);
				T(L("attn_k_norm.weight"), 1, HD, 1, 1, HS_TYPE_F32, NORM);
				T(L("ffn_norm.weight"), 1, D, 1, 1, HS_TYPE_F32, NORM);
			}
		}
		if (g && l < p->n_dense_layers) { /* a dense SwiGLU FFN instead of experts */
			const uint64_t FD = p->n_ff_dense;
			T(L("ffn_gate.weight"), 2, D, FD, 1, p->dense_type, MAT);
			T(L("ffn_up.weight"), 2, D, FD, 1, p->dense_type, MAT);
			T(L("ffn_down.weight"), 2, FD, D, 1, p->dense_type, MAT);
			continue;
		}
		T(L("ffn_gate_inp.weight"), 2, D, E, 1, HS_TYPE_F32, ROUTER);
		if (g)
			T(L("exp_probs_b.bias"), 1, E, 1, 1, HS_TYPE_F32, BIAS);
		T(L("ffn_gate_exps.weight"), 3, D, F, E, p->type, MAT);
		T(L("ffn_up_exps.weight"), 3, D, F, E, p->type, MAT);
		T(L("ffn_down_exps.weight"), 3, F, D, E, p->down_type ? p->down_type : p->type, MAT);
		if (q35 && p->n_shared) /* qwen35moe's shared expert is gated: sigmoid(w . h) */
			T(L("ffn_gate_inp_shexp.weight"), 1, D, 1, 1, HS_TYPE_F32, MAT);
		if ((g || q35) && p->n_shared) {
			const uint64_t FS = (uint64_t)p->n_shared * F;
			T(L("ffn_gate_shexp.weight"), 2, D, FS, 1, p->dense_type, MAT);
			T(L("ffn_up_shexp.weight"), 2, D, FS, 1, p->dense_type, MAT);
			T(L("ffn_down_shexp.weight"), 2, FS, D, 1, p->dense_type, MAT);
		}
		if (oss) {
			T(L("ffn_gate_inp.bias"), 1, E, 1, 1, HS_TYPE_F32, BIAS);
			T(L("ffn_gate_exps.bias"), 2, F, E, 1, HS_TYPE_F32, BIAS);
			T(L("ffn_up_exps.bias"), 2, F, E, 1, HS_TYPE_F32, BIAS);
			T(L("ffn_down_exps.bias"), 2, D, E, 1, HS_TYPE_F32, BIAS);
		}
	}
#undef L
#undef T
	return n;
}

int hs__gen_n_tensors(const struct hs_gen_params *p)
{
	return walk(p, -1, NULL);
}

const char *hs__gen_tensor_name(const struct hs_gen_params *p, int tensor, char *buf, int len)
{
	struct spec s;
	walk(p, tensor, &s);
	snprintf(buf, len, "%s", s.name);
	return buf;
}

void hs__gen_tensor_info(const struct hs_gen_params *p, int tensor, char *buf, int len, uint64_t ne[3], int *type)
{
	struct spec s;
	walk(p, tensor, &s);
	snprintf(buf, len, "%s", s.name);
	memcpy(ne, s.ne, sizeof s.ne);
	*type = s.type;
}

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Values of one row: near-Gaussian (a sum of four uniforms).  Matrices
 * have standard deviation 1/sqrt(fan-in) (the routers 4x that, so that
 * their top-k choices are rarely near a tie), biases 0.05, sink logits 1,
 * embeddings 1, norms 1 + 0.1 x. */
static void make_row(const struct hs_gen_params *p, int tensor, const struct spec *sp, uint64_t row, float *out)
{
	uint64_t s = p->seed * 0x2545f4914f6cdd1dull ^ ((uint64_t)tensor << 40) ^ row;
	const uint64_t n = sp->ne[0];
	float sd = 1.0f, mean = 0;

	switch (sp->kind) {
	case MAT: sd = 1.0f / sqrtf((float)n); break;
	case ROUTER: sd = 4.0f / sqrtf((float)n); break;
	case BIAS: sd = 0.05f; break;
	case NORM: sd = 0.1f; mean = 1; break;
	case SINK: case EMBD: sd = 1; break;
	case DECAY: sd = 0.1f; mean = -1; break; /* DeltaNet's A: negative, so the state decays */
	}
	const float norm = sd * 1.7320508f / 65535.0f; /* sqrt(3): unit variance */
	splitmix64(&s);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t r = splitmix64(&s);
		float sum = (float)(r & 0xffff) + (float)((r >> 16) & 0xffff) + (float)((r >> 32) & 0xffff) +
			    (float)(r >> 48);
		out[i] = mean + (sum - 2.0f * 65535.0f) * norm;
	}
}

int hs__gen_rows(const struct hs_gen_params *p, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	struct spec sp;
	int failed = 0;

	walk(p, tensor, &sp);
	size_t rb = hs__type_row_bytes(sp.type, sp.ne[0]);
#pragma omp parallel
	{
		float *row = malloc(sizeof *row * sp.ne[0]);
		if (!row) {
#pragma omp atomic write
			failed = 1;
		}
#pragma omp for schedule(static)
		for (int64_t r = 0; r < (int64_t)n_rows; r++) {
			if (!row)
				continue;
			make_row(p, tensor, &sp, row0 + (uint64_t)r, row);
			hs__quantize_row_ref(sp.type, row, (uint8_t *)buf + (size_t)r * rb, sp.ne[0]);
		}
		free(row);
	}
	return failed ? hs__error(ENOMEM, "gen: out of memory") : 0;
}

uint64_t hs__gen_data_bytes(const struct hs_gen_params *p)
{
	uint64_t total = 0;
	for (int t = 0; t < hs__gen_n_tensors(p); t++) {
		struct spec s;
		walk(p, t, &s);
		total += hs__type_row_bytes(s.type, s.ne[0]) * s.ne[1] * s.ne[2];
	}
	return total;
}

static int fill(void *p, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	return hs__gen_rows(p, tensor, row0, n_rows, buf);
}

/* GPT-2's byte-to-text map (bytes_to_unicode): printable bytes stand for
 * themselves, the others for U+0100 on, in byte order; as UTF-8. */
static void byte_token(int b, char out[4])
{
	int cp = b, k = 0;
	if (!((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff))) {
		for (int i = 0; i < b; i++)
			k += !((i >= 0x21 && i <= 0x7e) || (i >= 0xa1 && i <= 0xac) || (i >= 0xae && i <= 0xff));
		cp = 256 + k;
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		out[1] = 0;
	} else {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		out[2] = 0;
	}
}

static int write_tokenizer(struct hs_gguf_writer *w, const struct hs_gen_params *p)
{
	const int oss = is_gpt_oss(p), g = is_glm(p), ns = n_special(p), V = p->n_vocab;
	const char *const *sp = oss ? harmony : g ? glm : chatml;
	char **tok = calloc(V, sizeof *tok);
	int32_t *type = calloc(V, sizeof *type);
	int rc = 0;

	if (!tok || !type) {
		rc = hs__error(ENOMEM, "gen: out of memory for the vocabulary");
		goto out_free;
	}
	for (int i = 0; i < V && !rc; i++) {
		char buf[32];
		if (i < 256)
			byte_token(i, buf);
		else if (i < 256 + ns)
			snprintf(buf, sizeof buf, "%s", sp[i - 256]);
		else
			snprintf(buf, sizeof buf, "<|reserved_%d|>", i);
		tok[i] = strdup(buf);
		type[i] = i < 256 ? 1 : 3; /* normal, control */
		if (!tok[i])
			rc = hs__error(ENOMEM, "gen: out of memory for the vocabulary");
	}
	if (!rc) rc = hs__gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
	if (!rc) rc = hs__gguf_w_str(w, "tokenizer.ggml.pre", oss ? "gpt-4o" : g ? "glm4" : is_q35(p) ? "qwen35" : "qwen2");
	if (!rc) rc = hs__gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, (uint64_t)V);
	if (!rc) rc = hs__gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)V);
	if (!rc) rc = hs__gguf_w_arr_str(w, "tokenizer.ggml.merges", NULL, 0);
	if (!rc) rc = hs__gguf_w_u32(w, "tokenizer.ggml.bos_token_id", g ? 258 : 256); /* GLM: [gMASK] */
	if (!rc) rc = hs__gguf_w_u32(w, "tokenizer.ggml.eos_token_id", 256 + (oss ? HARMONY_EOS : g ? 0 : CHATML_EOS));
	if (!rc) rc = hs__gguf_w_u32(w, "tokenizer.ggml.padding_token_id", oss ? 257 : 256);
	if (!rc && g) /* the end of an answer: the next user turn, or the tools' */
		rc = hs__gguf_w_u32(w, "tokenizer.ggml.eot_token_id", 256 + 7);
	if (!rc && g)
		rc = hs__gguf_w_u32(w, "tokenizer.ggml.eom_token_id", 256 + 9);
	if (!rc) rc = hs__gguf_w_bool(w, "tokenizer.ggml.add_bos_token", 0);
out_free:
	for (int i = 0; tok && i < V; i++)
		free(tok[i]);
	free(tok);
	free(type);
	return rc;
}

/* The writer with p's metadata and tensors (p resolved) into *out. */
static int gen_writer(const struct hs_gen_params *p, struct hs_gguf_writer **out)
{
	struct hs_gguf_writer *w;
	char key[96];
	int rc;

	*out = w = hs__gguf_writer_new();
	if (!w)
		return -ENOMEM;
	rc = hs__gguf_w_str(w, "general.architecture", p->arch);
	if (!rc) rc = hs__gguf_w_str(w, "general.name", p->name ? p->name : "hotset gen");
	if (!rc) rc = hs__gguf_w_u32(w, "general.alignment", 32);
	if (!rc) rc = hs__gguf_w_u64(w, "hotset.gen.seed", p->seed);
#define ARCH_U32(k, v) \
	if (!rc) { snprintf(key, sizeof key, "%s." k, p->arch); rc = hs__gguf_w_u32(w, key, (uint32_t)(v)); }
#define ARCH_F32(k, v) \
	if (!rc) { snprintf(key, sizeof key, "%s." k, p->arch); rc = hs__gguf_w_f32(w, key, (float)(v)); }
	ARCH_U32("block_count", p->n_layers);
	ARCH_U32("expert_count", p->n_experts);
	ARCH_U32("expert_used_count", p->n_used);
	ARCH_U32("embedding_length", p->n_embd);
	ARCH_U32("expert_feed_forward_length", p->n_ff);
	if (!p->moe_only) {
		const int oss = is_gpt_oss(p);
		ARCH_U32("context_length", p->n_ctx);
		ARCH_U32("feed_forward_length", is_glm(p) ? p->n_ff_dense : p->n_ff);
		ARCH_U32("attention.head_count", p->n_head);
		ARCH_U32("attention.head_count_kv", p->n_head_kv);
		ARCH_U32("attention.key_length", p->head_dim);
		ARCH_U32("attention.value_length", p->head_dim);
		ARCH_F32("attention.layer_norm_rms_epsilon", oss || is_glm(p) ? 1e-5 : 1e-6);
		if (is_q35(p)) { /* partial rotary, the DeltaNet shapes, the layer pattern */
			ARCH_U32("rope.dimension_count", p->n_rot);
			ARCH_U32("ssm.conv_kernel", p->ssm_conv);
			ARCH_U32("ssm.state_size", p->ssm_dh);
			ARCH_U32("ssm.group_count", p->ssm_nk);
			ARCH_U32("ssm.time_step_rank", p->ssm_nv);
			ARCH_U32("ssm.inner_size", p->ssm_nv * p->ssm_dh);
			ARCH_U32("full_attention_interval", p->full_attn_every);
			if (!rc) { /* llama.cpp requires them (M-RoPE); as Qwen3.5's files: 11, 11, 10 of 32 */
				const int half = p->n_rot / 2;
				const int32_t sec[4] = { (half + 2) / 3, (half + 1) / 3, half / 3, 0 }; /* sum: half */
				snprintf(key, sizeof key, "%s.rope.dimension_sections", p->arch);
				rc = hs__gguf_w_arr_i32(w, key, sec, 4);
			}
			if (p->n_shared)
				ARCH_U32("expert_shared_feed_forward_length", p->n_ff);
		}
		if (is_glm(p)) { /* partial rotary (half of each head), the FFN shapes, sigmoid gating */
			ARCH_U32("rope.dimension_count", p->n_rot);
			ARCH_U32("leading_dense_block_count", p->n_dense_layers);
			ARCH_U32("expert_shared_count", p->n_shared);
			ARCH_U32("expert_gating_func", 2);
			ARCH_F32("expert_weights_scale", p->expert_scale);
			if (!rc) {
				snprintf(key, sizeof key, "%s.expert_weights_norm", p->arch);
				rc = hs__gguf_w_bool(w, key, 1);
			}
		}
		ARCH_F32("rope.freq_base", oss ? 150000.0 : is_q35(p) ? 10000000.0 : 1000000.0);
		if (oss) {
			ARCH_U32("attention.sliding_window", p->swa_window);
			if (!rc) {
				snprintf(key, sizeof key, "%s.rope.scaling.type", p->arch);
				rc = hs__gguf_w_str(w, key, "yarn");
			}
			ARCH_F32("rope.scaling.factor", 32.0);
			ARCH_U32("rope.scaling.original_context_length", 4096);
		}
		if (!rc)
			rc = write_tokenizer(w, p);
	}
#undef ARCH_U32
#undef ARCH_F32
	for (int t = 0; t < hs__gen_n_tensors(p) && !rc; t++) {
		struct spec s;
		walk(p, t, &s);
		rc = hs__gguf_w_tensor(w, s.name, s.nd, s.ne, s.type);
		rc = rc < 0 ? rc : 0;
	}
	if (rc) {
		hs__gguf_writer_free(w);
		*out = NULL;
	}
	return rc;
}

/* split_max 0: one file at path; else shards path-0000k-of-0000n.gguf */
static int gen_write(const struct hs_gen_params *in, const char *path, uint64_t split_max, hs_gguf_progress_fn progress,
		     void *ctx)
{
	struct hs_gguf_writer *w;
	int rc;

	if ((rc = hs__gen_check(in)))
		return rc;
	const struct hs_gen_params r = hs__gen_resolve(in), *p = &r;
	if ((rc = gen_writer(p, &w)))
		return rc;
	if (split_max)
		rc = hs__gguf_w_write_split(w, path, split_max, fill, (void *)p, progress, ctx);
	else
		rc = hs__gguf_w_write(w, path, fill, (void *)p, progress, ctx);
	hs__gguf_writer_free(w);
	return rc;
}

int hs__gen_write(const struct hs_gen_params *in, const char *path, hs_gguf_progress_fn progress, void *ctx)
{
	return gen_write(in, path, 0, progress, ctx);
}

int hs__gen_write_split(const struct hs_gen_params *in, const char *prefix, uint64_t max_bytes,
			hs_gguf_progress_fn progress, void *ctx)
{
	if (!max_bytes)
		return hs__error(EINVAL, "gen: a shard size of 0 bytes");
	return gen_write(in, prefix, max_bytes, progress, ctx);
}

int hs__gen_shard_count(const struct hs_gen_params *in, uint64_t max_bytes)
{
	struct hs_gguf_writer *w;
	int rc;

	if ((rc = hs__gen_check(in)))
		return rc;
	const struct hs_gen_params r = hs__gen_resolve(in);
	if ((rc = gen_writer(&r, &w)))
		return rc;
	rc = hs__gguf_w_shard_count(w, max_bytes);
	hs__gguf_writer_free(w);
	return rc;
}
