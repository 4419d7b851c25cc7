/* Model knowledge by architecture: the table entries the kernels use
 * (gating, activation, biases), keyed by GGUF's general.architecture. */
#ifndef HS_ARCH_H
#define HS_ARCH_H

#include <stddef.h>

#include "cpu_kernels/moe.h"

extern const struct hs_moe_arch hs__arch_gpt_oss, hs__arch_qwen3moe, hs__arch_glm4moe, hs__arch_qwen35moe;

/* Entry by GGUF architecture name (len bytes, not NUL-terminated), or NULL. */
const struct hs_moe_arch *hs__arch_find(const char *name, size_t len);

/* What the whole model's forward pass needs to know beyond the MoE part. */
struct hs_model_arch {
	const struct hs_moe_arch *moe;
	const char *moe_norm;     /* tensor name of the pre-MoE norm ("post_attention_norm" in gpt-oss) */
	int attn_bias;            /* q, k, v and output projections carry biases */
	int sinks;                /* attn_sinks: one sink logit per head */
	int qk_norm;              /* attn_q_norm / attn_k_norm: per-head RMSNorm before RoPE */
	int swa_every;            /* with a sliding window: layer i slides unless i % swa_every == swa_every - 1 */
	int glm4moe;              /* optional q/k/v biases and q/k norms, leading dense FFN layers, shared experts */
	int qwen35;               /* Gated DeltaNet layers, gated attention, a shared expert (whole.c's q35 part) */
};

/* The whole-model entry of an architecture, or NULL. */
const struct hs_model_arch *hs__model_arch_find(const char *name, size_t len);

#endif
