/* One MoE layer as the kernels see it, the architecture table entries
 * (gating + activation), and the double-precision reference forward that
 * every fast kernel is checked against. */
#ifndef HS_MOE_H
#define HS_MOE_H

#include <stddef.h>
#include <stdint.h>

/* An architecture is a table entry: whether experts carry biases, how
 * router logits become (ids, weights), and the gated activation.  A further
 * architecture adds an entry and, if new, its two functions. */
struct hs_moe_arch {
	const char *name;         /* general.architecture in GGUF */
	int has_bias;             /* expert gate/up/down biases and router bias */
	/* logits[E] -> ids[K] (distinct, best first) and weights[K] */
	void (*gating)(const double *logits, int n_experts, int k, int32_t *ids, float *weights);
	double (*activation)(double g, double u);
	float (*activation_f)(float g, float u); /* the same in float, for the fast kernels */
};

extern const struct hs_moe_arch hs_arch_gpt_oss, hs_arch_qwen3moe;
/* Entry by GGUF architecture name, or NULL. */
const struct hs_moe_arch *hs__moe_arch_find(const char *name, size_t len);

void hs__gating_topk_softmax(const double *logits, int n_experts, int k, int32_t *ids, float *weights);
double hs__act_gpt_oss(double g, double u);   /* min/clamp at 7, g*sigmoid(1.702 g)*(u+1) */
double hs__act_silu_mul(double g, double u);  /* silu(g) * u */
float hs__act_gpt_oss_f(float g, float u);
float hs__act_silu_mul_f(float g, float u);

/* Pointers into the model's memory.  Expert e's gate matrix starts at
 * gate + e * gate_stride (n_ff rows of n_embd values), up likewise, down at
 * down + e * down_stride (n_embd rows of n_ff values). */
struct hs_moe_layer {
	const struct hs_moe_arch *arch;
	int n_embd, n_ff, n_experts, n_used;
	int type;                          /* ggml type of gate, up and down */
	const uint8_t *gate, *up, *down;
	size_t gate_stride, up_stride, down_stride;
	const float *gate_b, *up_b, *down_b; /* [E][n_ff], [E][n_ff], [E][n_embd]; NULL without biases */
	int router_type;                   /* f32, f16 or bf16 */
	const uint8_t *router;             /* E rows of n_embd values */
	const float *router_b;             /* [E] or NULL */
};

/* Router and gating for n tokens: ids/weights [n][n_used].  -ENOMEM. */
int hs__moe_route_ref(const struct hs_moe_layer *l, int n, const float *x, int32_t *ids, float *weights);

/* y[n][n_embd] = sum over k of weights[t][k] * expert(ids[t][k])(x[t]),
 * accumulated in double.  ids == NULL routes first.  Ids of -1 are skipped
 * (their expert is never read); duplicates within a token are legal.
 * -EINVAL for an id outside [-1, E), -ENOMEM. */
int hs__moe_forward_ref(const struct hs_moe_layer *l, int n, const float *x, const int32_t *ids,
			const float *weights, float *y);

#endif
