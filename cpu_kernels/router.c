/* The fast router: logits through the dense matrix product, float gating. */
#include "config.h"

#include <math.h>
#include <stdlib.h>

#include "cpu_kernels/router.h"
#include "base/error.h"

void hs__gating_topk_softmax_f(const float *logits, int n_experts, int k, int32_t *ids, float *weights)
{
	int have = 0;
	float max, sum = 0;

	/* insertion into a list kept best first; scanning ids upwards and
	 * moving past equal values only when strictly greater keeps the lower
	 * id first among equals */
	for (int e = 0; e < n_experts; e++) {
		const float v = logits[e];
		int at;
		if (have == k && !(v > logits[ids[k - 1]]))
			continue;
		at = have < k ? have++ : k - 1;
		while (at > 0 && v > logits[ids[at - 1]]) {
			ids[at] = ids[at - 1];
			at--;
		}
		ids[at] = e;
	}
	max = logits[ids[0]];
	for (int j = 0; j < k; j++)
		sum += weights[j] = expf(logits[ids[j]] - max);
	for (int j = 0; j < k; j++)
		weights[j] /= sum;
}

void hs__gating_sel_f(const struct hs_moe_layer *l, const float *logits, int32_t *ids, float *weights)
{
	const int n = l->n_experts, k = l->n_used;
	float p[HS_SEL_MAX_EXPERTS], pick[HS_SEL_MAX_EXPERTS], max = logits[0], sum = 0;
	int32_t order[HS_SEL_MAX_EXPERTS];
	float w[HS_SEL_MAX_EXPERTS];

	for (int e = 1; e < n; e++)
		max = logits[e] > max ? logits[e] : max;
	for (int e = 0; e < n; e++) {
		p[e] = l->sel.softmax ? expf(logits[e] - max) : 1 / (1 + expf(-logits[e]));
		sum += p[e];
	}
	for (int e = 0; e < n; e++) {
		if (l->sel.softmax)
			p[e] /= sum;
		pick[e] = p[e] + (l->sel.bias ? l->sel.bias[e] : 0);
	}
	/* the top k of the biased scores, as the softmax gating picks them (its
	 * weights are thrown away) */
	hs__gating_topk_softmax_f(pick, n, k, order, w);
	sum = 0;
	for (int j = 0; j < k; j++) {
		ids[j] = order[j];
		sum += p[order[j]];
	}
	const float div = l->sel.norm ? (sum > 0x1p-14f ? sum : 0x1p-14f) : 1;
	for (int j = 0; j < k; j++)
		weights[j] = p[ids[j]] / div * l->sel.scale;
}

size_t hs__route_scratch_bytes(const struct hs_moe_layer *l, int n)
{
	return ((size_t)(n > 0 ? n : 0) * (size_t)l->n_experts * sizeof(float) + 63) & ~(size_t)63;
}

int hs__route_prepare(struct hs_route_job *job)
{
	const struct hs_moe_layer *l = job->layer;
	const int t = l->router_type;

	if (t != HS_TYPE_F32 && t != HS_TYPE_F16 && t != HS_TYPE_BF16)
		return hs__error(EINVAL, "router: weight type %s (f32, f16 or bf16)",
				 hs__type_name(t) ? hs__type_name(t) : "unknown");
	if (l->n_used < 1 || l->n_used > l->n_experts)
		return hs__error(EINVAL, "router: %d experts used of %d (1..%d)", l->n_used, l->n_experts,
				 l->n_experts);
	if (!l->arch || (!l->arch->gating_f && !l->arch->gating_sel_f))
		return hs__error(EINVAL, "router: the architecture has no float gating");
	job->logits = job->scratch;
	job->mm = (struct hs_matmul_job){
		.dops = job->dops,
		.type = t,
		.rows = l->n_experts,
		.cols = l->n_embd,
		.w = l->router,
		.row_bytes = hs__type_row_bytes(t, (uint64_t)l->n_embd),
		.bias = l->router_b,
		.n = job->n,
		.x = job->x,
		.x_stride = job->x_stride ? job->x_stride : (size_t)l->n_embd,
		.y = job->logits,
		.y_stride = (size_t)l->n_experts,
	};
	return hs__matmul_prepare(&job->mm);
}

void hs__route_step_logits(struct hs_route_job *job, int ith, int nth)
{
	hs__matmul_step_mul(&job->mm, ith, nth);
}

void hs__route_step_gate(struct hs_route_job *job, int ith, int nth)
{
	const struct hs_moe_layer *l = job->layer;

	for (int t = ith; t < job->n; t += nth) {
		const float *logits = job->logits + (size_t)t * l->n_experts;
		int32_t *ids = job->ids + (size_t)t * l->n_used;
		float *weights = job->weights + (size_t)t * l->n_used;
		if (l->arch->gating_sel_f)
			l->arch->gating_sel_f(l, logits, ids, weights);
		else
			l->arch->gating_f(logits, l->n_experts, l->n_used, ids, weights);
	}
}

static void route_logits(void *job, int ith, int nth)
{
	hs__route_step_logits(job, ith, nth);
}

static void route_gate(void *job, int ith, int nth)
{
	hs__route_step_gate(job, ith, nth);
}

int hs__route_run_omp(struct hs_route_job *job, int nthreads)
{
	int rc = hs__route_prepare(job);

	if (!rc)
		hs__omp_steps(job, route_logits, route_gate, nthreads);
	return rc;
}

int hs__moe_route(const struct hs_moe_layer *l, int n, const float *x, int32_t *ids, float *weights)
{
	struct hs_route_job job = {
		.layer = l, .dops = hs__dense_best(), .n = n, .x = x, .ids = ids, .weights = weights
	};
	size_t bytes = hs__route_scratch_bytes(l, n);
	int rc;

	if (bytes && !(job.scratch = aligned_alloc(64, bytes)))
		return hs__error(ENOMEM, "router: out of memory");
	if (!(rc = hs__route_prepare(&job))) {
		hs__route_step_logits(&job, 0, 1);
		hs__route_step_gate(&job, 0, 1);
	}
	free(job.scratch);
	return rc;
}
