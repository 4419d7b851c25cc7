/* One MoE layer as the kernels see it, the architecture table entries
 * (gating + activation), and the double-precision reference forward that
 * every fast kernel is checked against. */
#ifndef HS_MOE_H
#define HS_MOE_H

#include <stddef.h>
#include <stdint.h>

/* What the kernels need of an architecture: whether experts carry biases,
 * how router logits become (ids, weights), and the gated activation.  The
 * entries themselves are model knowledge (model/arch.c). */
enum hs_act { HS_ACT_SWIGLU_OAI, HS_ACT_SILU_MUL };

struct hs_moe_layer;

struct hs_moe_arch {
	const char *name;         /* general.architecture in GGUF */
	int has_bias;             /* expert gate/up/down biases and router bias */
	enum hs_act act;          /* which activation (for kernels that cannot call one) */
	/* logits[E] -> ids[K] (distinct, best first) and weights[K] */
	void (*gating)(const double *logits, int n_experts, int k, int32_t *ids, float *weights);
	double (*activation)(double g, double u);
	float (*activation_f)(float g, float u); /* the same in float, for the fast kernels */
	/* the gating in float, for the fast router (cpu_kernels/router.h) */
	void (*gating_f)(const float *logits, int n_experts, int k, int32_t *ids, float *weights);
	/* Or gating that needs the layer's own values (glm4moe: scores, a
	 * choice bias, normalisation and scale; struct hs_moe_layer.sel): when
	 * set, the routers call these instead of gating and gating_f. */
	void (*gating_sel)(const struct hs_moe_layer *l, const double *logits, int32_t *ids, float *weights);
	void (*gating_sel_f)(const struct hs_moe_layer *l, const float *logits, int32_t *ids, float *weights);
};

void hs__gating_topk_softmax(const double *logits, int n_experts, int k, int32_t *ids, float *weights);
/* The same in float (cpu_kernels/router.c): the k largest of logits[n]
 * (lower index first on equal values), best first, and their softmax. */
void hs__gating_topk_softmax_f(const float *logits, int n_experts, int k, int32_t *ids, float *weights);
double hs__act_gpt_oss(double g, double u);   /* min/clamp at 7, g*sigmoid(1.702 g)*(u+1) */
double hs__act_silu_mul(double g, double u);  /* silu(g) * u */
float hs__act_gpt_oss_f(float g, float u);
float hs__act_silu_mul_f(float g, float u);
/* glm4moe's gating (the layer's sel): p = sigmoid(logits) (softmax over all
 * when sel.softmax); the k largest p + sel.bias chosen (the bias picks,
 * it does not weigh; lower id first on ties), best first; weights the
 * chosen p, divided by their sum (clamped at 2^-14) when sel.norm, times
 * sel.scale. */
#define HS_SEL_MAX_EXPERTS 1024 /* the most experts these take (model.c holds files to it) */
void hs__gating_sel(const struct hs_moe_layer *l, const double *logits, int32_t *ids, float *weights);
void hs__gating_sel_f(const struct hs_moe_layer *l, const float *logits, int32_t *ids, float *weights);

enum { HS_GATE, HS_UP, HS_DOWN }; /* the three matrices of an expert */

/* Pointers into the model's memory.  Expert e's gate matrix starts at
 * gate + e * gate_stride (n_ff rows of n_embd values), up likewise, down at
 * down + e * down_stride (n_embd rows of n_ff values). */
struct hs_moe_layer {
	const struct hs_moe_arch *arch;
	int n_embd, n_ff, n_experts, n_used;
	int type[3];                       /* ggml types of gate, up, down (HS_GATE, HS_UP, HS_DOWN):
					      llama-quantize's mixes give down another type */
	const uint8_t *gate, *up, *down;
	size_t gate_stride, up_stride, down_stride;
	const float *gate_b, *up_b, *down_b; /* [E][n_ff], [E][n_ff], [E][n_embd]; NULL without biases */
	int router_type;                   /* f32, f16 or bf16 */
	const uint8_t *router;             /* E rows of n_embd values */
	const float *router_b;             /* [E] or NULL */
	struct hs_moe_sel {                /* what arch->gating_sel reads (glm4moe) */
		const float *bias;         /* [E] exp_probs_b: added to the scores to choose, or NULL */
		int softmax;               /* scores by softmax over all experts, not sigmoid */
		int norm;                  /* the chosen weights divided by their sum */
		float scale;               /* the weights times this */
	} sel;
	/* Or, when pool is set, every expert is one packed block (a device
	 * slot): expert e at pool + slot_of[e] * pool_stride, laid out as pack
	 * says (matrices row-interleaved when pack.packed_rows is set, see
	 * cpu_kernels/repack.h); gate/up/down and their strides are then
	 * unused. */
	const uint8_t *pool;
	size_t pool_stride;
	const int32_t *slot_of;            /* [E]; only routed experts are looked up */
	struct hs_expert_pack {
		size_t gate, up, down, gate_b, up_b, down_b; /* byte offsets (bias offsets 0 = none) */
		size_t bytes;                  /* the whole block, 256-byte multiple */
		size_t type[3];                /* ggml types of gate, up, down */
		size_t packed_rows;            /* HS_PACK_ROWS: matrices in the row-interleaved
						  layout; 0: plain ggml rows (size_t: no padding,
						  the struct is compared with memcmp) */
	} pack;
};

/* One expert's pieces, wherever they live. */
struct hs_expert_view {
	const uint8_t *gate, *up, *down;
	const float *gate_b, *up_b, *down_b; /* NULL without biases */
	int packed;                          /* matrices row-interleaved (repack.h) */
};

static inline struct hs_expert_view hs__expert(const struct hs_moe_layer *l, int e)
{
	struct hs_expert_view v;
	if (l->pool) {
		const uint8_t *b = l->pool + (size_t)l->slot_of[e] * l->pool_stride;
		v.gate = b + l->pack.gate;
		v.up = b + l->pack.up;
		v.down = b + l->pack.down;
		v.gate_b = l->pack.gate_b ? (const float *)(const void *)(b + l->pack.gate_b) : NULL;
		v.up_b = l->pack.up_b ? (const float *)(const void *)(b + l->pack.up_b) : NULL;
		v.down_b = l->pack.down_b ? (const float *)(const void *)(b + l->pack.down_b) : NULL;
		v.packed = l->pack.packed_rows != 0;
		return v;
	}
	v.gate = l->gate + (size_t)e * l->gate_stride;
	v.up = l->up + (size_t)e * l->up_stride;
	v.down = l->down + (size_t)e * l->down_stride;
	v.gate_b = l->gate_b ? l->gate_b + (size_t)e * l->n_ff : NULL;
	v.up_b = l->up_b ? l->up_b + (size_t)e * l->n_ff : NULL;
	v.down_b = l->down_b ? l->down_b + (size_t)e * l->n_embd : NULL;
	v.packed = 0;
	return v;
}

/* A layer whose experts lie in one buffer w: all gate matrices, then all
 * up, then all down (each expert's contiguous), biases (when the
 * architecture has them and b is not NULL) as [E][n_ff] gate, [E][n_ff] up,
 * [E][n_embd] down in b.  For synthetic layers (tune, bench, tests).
 * Returns the bytes w must hold. */
size_t hs__moe_layer_flat(struct hs_moe_layer *l, const struct hs_moe_arch *arch, int type, int n_embd, int n_ff,
			  int n_experts, int n_used, const uint8_t *w, const float *b);
/* The same with a type per matrix (gate, up, down). */
size_t hs__moe_layer_flat3(struct hs_moe_layer *l, const struct hs_moe_arch *arch, const int type[3], int n_embd,
			   int n_ff, int n_experts, int n_used, const uint8_t *w, const float *b);

/* The packed block of one expert of this shape (types: gate, up, down): sections 256-byte aligned
 * (gate, up, down, then the biases when the architecture has them), and
 * 256 bytes of slack at the end (room for vector loads that pass a
 * section's end; none of today's kernels does).  When all three are MXFP4 or Q8_0 the matrices are
 * row-interleaved (repack.h): the one layout of host copies and device slots; otherwise (the K-quants,
 * IQ4, the other 32-value types, float types, mixes of them) every matrix keeps plain rows. */
struct hs_expert_pack hs__expert_pack_layout(const int type[3], int n_embd, int n_ff, int has_bias);
/* The same with one type for all three. */
struct hs_expert_pack hs__expert_pack_layout1(int type, int n_embd, int n_ff, int has_bias);
/* Writes expert e of layer l as one packed block at dst (pack.bytes),
 * repacking its matrices from whatever layout l holds them in. */
void hs__expert_pack(const struct hs_moe_layer *l, int e, const struct hs_expert_pack *pack, uint8_t *dst);

/* Router and gating for n tokens: ids/weights [n][n_used].  -ENOMEM. */
int hs__moe_route_ref(const struct hs_moe_layer *l, int n, const float *x, int32_t *ids, float *weights);

/* y[n][n_embd] = sum over k of weights[t][k] * expert(ids[t][k])(x[t]),
 * accumulated in double.  ids == NULL routes first.  Ids of -1 are skipped
 * (their expert is never read); duplicates within a token are legal.
 * -EINVAL for an id outside [-1, E), -ENOMEM. */
int hs__moe_forward_ref(const struct hs_moe_layer *l, int n, const float *x, const int32_t *ids,
			const float *weights, float *y);

#endif
