/* The architectures hotset runs.  A further architecture adds an entry and,
 * if its gating or activation is new, those functions in cpu_kernels/. */
#include "config.h"

#include <string.h>

#include "model/arch.h"

const struct hs_moe_arch hs__arch_gpt_oss = { "gpt-oss", 1, HS_ACT_SWIGLU_OAI, hs__gating_topk_softmax,
					       hs__act_gpt_oss, hs__act_gpt_oss_f, hs__gating_topk_softmax_f, NULL, NULL };
/* Qwen3 MoE takes a softmax over all experts, then the top k, renormalised
 * (norm_topk_prob): the full softmax's denominator cancels, so that is the
 * same as gpt-oss's softmax over the k chosen logits. */
const struct hs_moe_arch hs__arch_qwen3moe = { "qwen3moe", 0, HS_ACT_SILU_MUL, hs__gating_topk_softmax,
						hs__act_silu_mul, hs__act_silu_mul_f, hs__gating_topk_softmax_f, NULL, NULL };

/* GLM-4.5/4.6 routes by sigmoid scores plus a per-expert bias that only
 * picks (exp_probs_b), weighs by the unbiased scores, normalised and scaled
 * as the file says (the layer's sel, model.c); its experts are SwiGLU. */
const struct hs_moe_arch hs__arch_glm4moe = { "glm4moe", 0, HS_ACT_SILU_MUL, NULL, hs__act_silu_mul,
					       hs__act_silu_mul_f, NULL, hs__gating_sel, hs__gating_sel_f };

/* Qwen3.5/3.6 MoE: the same gating (llama.cpp hard-codes softmax, top-k,
 * renormalise for it); its shared expert is outside the routed part. */
const struct hs_moe_arch hs__arch_qwen35moe = { "qwen35moe", 0, HS_ACT_SILU_MUL, hs__gating_topk_softmax,
						 hs__act_silu_mul, hs__act_silu_mul_f, hs__gating_topk_softmax_f, NULL, NULL };

static const struct hs_moe_arch *const archs[] = { &hs__arch_gpt_oss, &hs__arch_qwen3moe, &hs__arch_glm4moe,
						    &hs__arch_qwen35moe };

const struct hs_moe_arch *hs__arch_find(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
		if (strlen(archs[i]->name) == len && memcmp(archs[i]->name, name, len) == 0)
			return archs[i];
	return NULL;
}

/* gpt-oss alternates sliding-window and full attention layers, starting
 * with a sliding one (llama.cpp's swa pattern 2); its pre-MoE norm is
 * called post_attention_norm. */
static const struct hs_model_arch model_archs[] = {
	{ &hs__arch_gpt_oss, "post_attention_norm", 1, 1, 0, 2, 0, 0 },
	{ &hs__arch_qwen3moe, "ffn_norm", 0, 0, 1, 0, 0, 0 },
	/* glm4moe: q/k/v biases and q/k norms where the file has them, leading
	 * dense FFN layers and a shared expert (whole.c's glm4moe part) */
	{ &hs__arch_glm4moe, "post_attention_norm", 0, 0, 0, 0, 1, 0 },
	/* qwen35moe: q/k norms, Gated DeltaNet layers beside gated attention (whole.c's q35 part) */
	{ &hs__arch_qwen35moe, "post_attention_norm", 0, 0, 1, 0, 0, 1 },
};

const struct hs_model_arch *hs__model_arch_find(const char *name, size_t len)
{
	for (size_t i = 0; i < sizeof model_archs / sizeof model_archs[0]; i++)
		if (strlen(model_archs[i].moe->name) == len && memcmp(model_archs[i].moe->name, name, len) == 0)
			return &model_archs[i];
	return NULL;
}
