/* The public one-layer MoE calls on the CPU: the double-precision
 * reference (the oracle) and the fast kernels on OpenMP threads. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu_kernels/router.h"
#include "cpu_kernels/kernels.h"
#include "hotset.h"
#include "model/model.h"

/* The kernel view of a MoE layer, or NULL with a message. */
static const struct hs_moe_layer *moe_layer(const hs_model *m, int layer)
{
	if (!m) {
		hs__error(EINVAL, "MoE layer %d: the model m is NULL", layer);
		return NULL;
	}
	const struct hs_moe_layer *l = hs__model_layer(m, layer);

	if (!l) {
		const struct hs_model_info *i = hs_model_info(m);
		hs__error(EINVAL, "layer %d is not a MoE layer of this model (%d layers, %d with experts)", layer,
			  i->n_layers, i->n_moe_layers);
	}
	return l;
}

/* NaN or Inf in the hidden states (or the caller's gating weights) would
 * come out as NaN without a word: refused, naming the row and column. */
static int check_inputs(const struct hs_moe_layer *l, int n, const float *x, const float *weights)
{
	if (n && !x)
		return hs__error(EINVAL, "hidden states: x is NULL for %d tokens", n);
	int rc = hs__check_finite(x, n, l->n_embd, "hidden states");
	return rc || !weights ? rc : hs__check_finite(weights, n, l->n_used, "expert weights");
}

int hs_moe_ref(const hs_model *m, int layer, int n, const float *x, const int32_t *ids, const float *weights,
	       float *y)
{
	const struct hs_moe_layer *l = moe_layer(m, layer);

	if (!l)
		return -EINVAL;
	if (n < 0 || (ids && !weights))
		return hs__error(EINVAL, "hs_moe_ref: %s", n < 0 ? "negative token count" : "ids without weights");
	if (n)
		HS_NEED(y, -EINVAL);
	int rc = check_inputs(l, n, x, weights);
	return rc ? rc : hs__moe_forward_ref(l, n, x, ids, weights, y);
}

int hs_moe_route_ref(const hs_model *m, int layer, int n, const float *x, int32_t *ids, float *weights)
{
	const struct hs_moe_layer *l = moe_layer(m, layer);

	if (!l)
		return -EINVAL;
	if (n < 0)
		return hs__error(EINVAL, "hs_moe_route_ref: negative token count");
	if (n) {
		HS_NEED(ids, -EINVAL);
		HS_NEED(weights, -EINVAL);
	}
	int rc = check_inputs(l, n, x, NULL);
	return rc ? rc : hs__moe_route_ref(l, n, x, ids, weights);
}

int hs_moe_forward_cpu(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
		       const float *weights, float *y, int threads)
{
	const struct hs_moe_layer *l = moe_layer(m, layer);
	struct hs_ffn_job job = { 0 };
	int32_t *rids = NULL;
	float *rw = NULL;
	int rc = 0;

	if (!l)
		return -EINVAL;
	if (n < 0 || (ids && !weights))
		return hs__error(EINVAL, "hs_moe_forward_cpu: %s", n < 0 ? "negative token count" : "ids without weights");
	if (n)
		HS_NEED(y, -EINVAL);
	if (threads > 0 && (rc = hs__check_threads(threads, "hs_moe_forward_cpu")))
		return rc;
	if ((rc = check_inputs(l, n, x, ids ? weights : NULL)))
		return rc;
	if (!ids) {
		rids = malloc(sizeof *rids * (size_t)n * l->n_used);
		rw = malloc(sizeof *rw * (size_t)n * l->n_used);
		if (!rids || !rw) {
			rc = hs__error(ENOMEM, "hs_moe_forward_cpu: out of memory");
			goto out_free;
		}
		if ((rc = hs__moe_route(l, n, x, rids, rw)))
			goto out_free;
		ids = rids;
		weights = rw;
	}
	job.layer = l;
	job.ops = hs__kernels_best();
	job.n = n;
	job.x = x;
	job.ids = ids;
	job.weights = weights;
	job.y = y;
	job.scratch = aligned_alloc(64, (hs__ffn_scratch_bytes(l, n) + 63) & ~(size_t)63);
	if (!job.scratch) {
		rc = hs__error(ENOMEM, "hs_moe_forward_cpu: out of memory for %zu bytes of scratch",
			       hs__ffn_scratch_bytes(l, n));
		goto out_free;
	}
	memset(y, 0, sizeof *y * (size_t)n * l->n_embd);
	rc = hs__ffn_run_omp(&job, threads);
out_free:
	free(job.scratch);
	free(rids);
	free(rw);
	return rc;
}

const char *hs_cpu_kernels_name(void)
{
	return hs__kernels_best()->name;
}

