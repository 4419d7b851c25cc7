/* The MoE router, one home: logits = W_r h + b_r (W_r F32, F16 or BF16),
 * then the architecture's gating (struct hs_moe_arch.gating_f), in float.
 * The double-precision twin is hs__moe_route_ref (moe.h).
 *
 * Gating (both architectures reduce to this; see model/arch.c): the k largest
 * logits, best first, and their softmax.  qwen3moe's "softmax over all
 * experts, top-k, renormalise" is the same numbers, since the full
 * softmax's denominator cancels.  Ties: on equal logits the lower expert id
 * is taken first, so the ids equal the reference's except where two logits
 * are within float rounding of each other. */
#ifndef HS_ROUTER_H
#define HS_ROUTER_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels/dense.h"
#include "cpu_kernels/moe.h"

/* Reads layer->router (n_experts rows of n_embd values), router_b, n
 * tokens of x (x_stride floats apart; 0 means n_embd); writes ids[n][n_used]
 * and weights[n][n_used].  Scratch: the logits. */
struct hs_route_job {
	const struct hs_moe_layer *layer;
	const struct hs_dense_ops *dops;
	int n;
	const float *x;
	size_t x_stride;
	int32_t *ids;
	float *weights;
	void *scratch;           /* hs__route_scratch_bytes(layer, n) */
	float *logits;           /* by prepare: [n][n_experts] */
	struct hs_matmul_job mm; /* by prepare */
};

size_t hs__route_scratch_bytes(const struct hs_moe_layer *l, int n);
/* -EINVAL: router type not F32/F16/BF16, n_used outside [1, n_experts],
 * no gating_f in the architecture. */
int hs__route_prepare(struct hs_route_job *job);
/* logits: (expert rows x tokens) items split over threads, as a matrix
 * product (dense.h). */
void hs__route_step_logits(struct hs_route_job *job, int ith, int nth);
/* gating: tokens split over threads; after a barrier. */
void hs__route_step_gate(struct hs_route_job *job, int ith, int nth);
int hs__route_run_omp(struct hs_route_job *job, int nthreads);
/* The whole router on the calling thread, scratch from malloc: a drop-in
 * for hs__moe_route_ref's call sites.  -EINVAL, -ENOMEM. */
int hs__moe_route(const struct hs_moe_layer *l, int n, const float *x, int32_t *ids, float *weights);

#endif
