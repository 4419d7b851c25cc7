/* Masked mul_mat_id and the fused expert FFN on the CPU, built on the
 * kernel ops (reference or a CPU tier).  Pairs are grouped by expert so
 * that each weight row block is read once per group of tokens; masked pairs
 * (id -1) never enter a group, so their experts' memory is never touched.
 * Experts in the row-interleaved layout (a packed host copy) go through
 * tile_q_packed, plain rows through tile_q. */
#include "config.h"

#include <omp.h>
#include <string.h>

#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"
#include "base/error.h"

#define ROWS_PER_ITEM 64 /* gate/up rows per work item; a multiple of 32 (and of HS_PACK_ROWS) */
#define CHUNK 64         /* tokens per tile call (pointer arrays on the stack) */
#define MERGE_TOKENS 4   /* an expert's tokens up to which a thread's items are one call */
#define FCHUNK 256       /* values per dequantized piece in the float path */

static size_t align64(size_t x)
{
	return (x + 63) & ~(size_t)63;
}

/* Carves the next `bytes` of scratch. */
static void *carve(uint8_t **p, size_t bytes)
{
	void *r = *p;
	*p += align64(bytes);
	return r;
}

size_t hs__ffn_scratch_bytes(const struct hs_moe_layer *l, int n)
{
	size_t E = (size_t)l->n_experts, P = (size_t)n * l->n_used, D = l->n_embd, F = l->n_ff;

	return align64(E * sizeof(int)) + align64((E + 1) * sizeof(int)) + align64(P * sizeof(int)) +
	       align64(P * sizeof(float)) + align64((E + 1) * sizeof(uint64_t)) +
	       align64((size_t)n * (D / HS_QK) * sizeof(struct hs_block_q8_0)) + 2 * align64(P * F * sizeof(float)) +
	       align64(P * (F / HS_QK) * sizeof(struct hs_block_q8_0)) + align64(P * D * sizeof(float));
}

/* Counting sort of the unmasked (token, slot) pairs by expert, stable.
 * first (n_experts + 1 ints) ends as the start of each active expert's
 * pairs, first[n_active] = the number of pairs; pair_slot[i] = t * k + slot. */
static int group(const int32_t *ids, int n, int k, int n_experts, int *first, int *expert_of, int *n_active,
		 int *pair_slot, int *n_pairs)
{
	memset(first, 0, sizeof *first * (n_experts + 1));
	for (int i = 0; i < n * k; i++) {
		if (ids[i] < -1 || ids[i] >= n_experts)
			return hs__error(EINVAL, "expert id %d at token %d slot %d (-1 or 0..%d allowed)", ids[i], i / k,
					 i % k, n_experts - 1);
		if (ids[i] >= 0)
			first[ids[i] + 1]++;
	}
	*n_active = 0;
	for (int e = 0; e < n_experts; e++) {
		if (first[e + 1])
			expert_of[(*n_active)++] = e;
		first[e + 1] += first[e]; /* first[e] = start of expert e */
	}
	*n_pairs = first[n_experts];
	for (int i = 0; i < n * k; i++)
		if (ids[i] >= 0)
			pair_slot[first[ids[i]]++] = i;
	/* first[e] is now the end of e, the start of e + 1: shift back */
	for (int e = n_experts; e > 0; e--)
		first[e] = first[e - 1];
	first[0] = 0;
	/* keep the active experts only; expert_of[a] >= a, so reads stay ahead of writes */
	for (int a = 0; a < *n_active; a++)
		first[a] = first[expert_of[a]];
	first[*n_active] = *n_pairs;
	return 0;
}

int hs__ffn_prepare(struct hs_ffn_job *job)
{
	const struct hs_moe_layer *l = job->layer;
	size_t P = (size_t)job->n * l->n_used, F = l->n_ff, D = l->n_embd;
	uint8_t *p = job->scratch;
	int rc;

	job->expert_of = carve(&p, l->n_experts * sizeof(int));
	job->first = carve(&p, (l->n_experts + 1) * sizeof(int));
	job->pair_token = carve(&p, P * sizeof(int));
	job->pair_weight = carve(&p, P * sizeof(float));
	job->cost_prefix = carve(&p, (l->n_experts + 1) * sizeof(uint64_t));
	job->xq = carve(&p, (size_t)job->n * (D / HS_QK) * sizeof(struct hs_block_q8_0));
	job->g = carve(&p, P * F * sizeof(float));
	job->u = carve(&p, P * F * sizeof(float));
	job->hq = carve(&p, P * (F / HS_QK) * sizeof(struct hs_block_q8_0));
	job->out = carve(&p, P * D * sizeof(float));
	rc = group(job->ids, job->n, l->n_used, l->n_experts, job->first, job->expert_of, &job->n_active,
		   job->pair_token, &job->n_pairs);
	if (rc)
		return rc;
	job->cost_prefix[0] = 0;
	for (int a = 0; a < job->n_active; a++)
		job->cost_prefix[a + 1] = job->cost_prefix[a] + (uint64_t)(job->first[a + 1] - job->first[a]);
	for (int i = 0; i < job->n_pairs; i++) {
		int slot = job->pair_token[i];
		job->pair_weight[i] = job->weights[slot];
		job->pair_token[i] = slot / l->n_used;
	}
	return 0;
}

/* Row r0..r1 of a float-typed (F16, BF16, F32) matrix against float
 * vectors: dequantize pieces of a row on the stack, dot in double. */
static void tile_f(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		   const float *const *x, int nt, float *const *out)
{
	float buf[FCHUNK];
	size_t vb = hs__type_row_bytes(type, 1);

	for (int r = r0; r < r1; r++)
		for (int j = 0; j < nt; j++) {
			double s = 0;
			for (int c = 0; c < ncols; c += FCHUNK) {
				int m = ncols - c < FCHUNK ? ncols - c : FCHUNK;
				hs__dequantize_row_ref(type, w + (size_t)r * row_bytes + (size_t)c * vb, buf, (size_t)m);
				for (int i = 0; i < m; i++)
					s += (double)buf[i] * x[j][c + i];
			}
			out[j][r - r0] = (float)s;
		}
}

/* Does work item `item` of cumulative cost [c, c + w) of `total` belong
 * to thread ith of nth?  Items go to the thread whose share holds their
 * middle, so threads get contiguous runs of about equal cost. */
static int mine(uint64_t c, uint64_t w, uint64_t total, int ith, int nth)
{
	uint64_t mid2 = 2 * c + w; /* twice the middle */
	int owner = total ? (int)((mid2 * (uint64_t)nth) / (2 * total)) : 0;
	return (owner >= nth ? nth - 1 : owner) == ith;
}

void hs__ffn_step_quantize(struct hs_ffn_job *job, int ith, int nth)
{
	const int D = job->layer->n_embd, tg = job->layer->type[HS_GATE], tu = job->layer->type[HS_UP];

	if (!hs__kernel_type_quantized(tg) && !hs__kernel_type_quantized(tu))
		return;
	/* one quantization for both: a shared scale a super-block where either
	 * takes it (exact for the other too) */
	for (int t = ith; t < job->n; t += nth)
		hs__quantize_for(job->ops, hs__q8_k_for(job->ops, tg) ? tg : tu, job->x + (size_t)t * D,
				 job->xq + (size_t)t * (D / HS_QK), D);
}

void hs__ffn_step_gate_up(struct hs_ffn_job *job, int ith, int nth)
{
	const struct hs_moe_layer *l = job->layer;
	const int tg = l->type[HS_GATE], tu = l->type[HS_UP], td = l->type[HS_DOWN];
	const int qg = hs__kernel_type_quantized(tg), qu = hs__kernel_type_quantized(tu);
	const int qd = hs__kernel_type_quantized(td);
	/* h quantized for down with a scale per 256 values takes items of
	 * whole super-blocks */
	const int rpi = hs__q8_k_for(job->ops, td) && l->n_ff % 256 == 0 ? 256 : ROWS_PER_ITEM;
	const int D = l->n_embd, F = l->n_ff, nrb = (F + rpi - 1) / rpi;
	const size_t rbg = hs__type_row_bytes(tg, (uint64_t)D), rbu = hs__type_row_bytes(tu, (uint64_t)D);
	const uint64_t total = job->cost_prefix[job->n_active] * (uint64_t)nrb;
	const struct hs_block_q8_0 *xs[CHUNK];
	const float *xf[CHUNK];
	float *go[CHUNK], *uo[CHUNK];

	for (int a = 0; a < job->n_active; a++) {
		const int e = job->expert_of[a], p0 = job->first[a], np = job->first[a + 1] - p0;
		const struct hs_expert_view ev = hs__expert(l, e);
		const uint8_t *G = ev.gate, *U = ev.up;
		for (int b = 0; b < nrb; b++) {
			uint64_t c = job->cost_prefix[a] * (uint64_t)nrb + (uint64_t)b * (uint64_t)np;
			if (!mine(c, (uint64_t)np, total, ith, nth))
				continue;
			/* a few tokens (decode): this thread's run of items of the
			 * expert in one call, so the kernels' prefetch, which stays
			 * inside a call's rows, starts cold once a run, not once
			 * every 64 rows (MXFP4 at 1 token, one Xeon core: 0.92 ->
			 * 0.96-0.99 of read; K-quants within the noise) */
			int b1 = b + 1;
			if (np <= MERGE_TOKENS)
				while (b1 < nrb && mine(c + (uint64_t)(b1 - b) * (uint64_t)np, (uint64_t)np, total, ith, nth))
					b1++;
			const int r0 = b * rpi, r1 = b1 * rpi < F ? b1 * rpi : F;
			b = b1 - 1;
			for (int c0 = 0; c0 < np; c0 += CHUNK) {
				int m = np - c0 < CHUNK ? np - c0 : CHUNK;
				for (int j = 0; j < m; j++) {
					int p = p0 + c0 + j, t = job->pair_token[p];
					xs[j] = job->xq + (size_t)t * (D / HS_QK);
					xf[j] = job->x + (size_t)t * D;
					go[j] = job->g + (size_t)p * F + r0;
					uo[j] = job->u + (size_t)p * F + r0;
				}
				if (ev.packed) { /* all three of types the layout takes (repack.h) */
					job->ops->tile_q_packed(tg, G, r0, r1, D, xs, m, go);
					job->ops->tile_q_packed(tu, U, r0, r1, D, xs, m, uo);
				} else {
					if (qg)
						job->ops->tile_q(tg, G, rbg, r0, r1, D, xs, m, go);
					else
						tile_f(tg, G, rbg, r0, r1, D, xf, m, go);
					if (qu)
						job->ops->tile_q(tu, U, rbu, r0, r1, D, xs, m, uo);
					else
						tile_f(tu, U, rbu, r0, r1, D, xf, m, uo);
				}
				for (int j = 0; j < m; j++) {
					const int p = p0 + c0 + j;
					float *h = go[j];
					for (int r = r0; r < r1; r++) {
						float gv = h[r - r0] + (ev.gate_b ? ev.gate_b[r] : 0);
						float uv = uo[j][r - r0] + (ev.up_b ? ev.up_b[r] : 0);
						h[r - r0] = l->arch->activation_f(gv, uv);
					}
					if (qd)
						hs__quantize_for(job->ops, td, h, job->hq + (size_t)p * (F / HS_QK) + r0 / HS_QK,
								 r1 - r0);
				}
			}
		}
	}
}

void hs__ffn_step_down(struct hs_ffn_job *job, int ith, int nth)
{
	const struct hs_moe_layer *l = job->layer;
	const int D = l->n_embd, F = l->n_ff, nb = (D + HS_QK - 1) / HS_QK;
	const int lo = (int)((int64_t)nb * ith / nth) * HS_QK, hi0 = (int)((int64_t)nb * (ith + 1) / nth) * HS_QK;
	const int hi = hi0 < D ? hi0 : D;
	const int td = l->type[HS_DOWN], quant = hs__kernel_type_quantized(td);
	const size_t rb = hs__type_row_bytes(td, (uint64_t)F);
	const struct hs_block_q8_0 *hs[CHUNK];
	const float *hf[CHUNK];
	float *oo[CHUNK];

	if (lo >= hi)
		return;
	for (int a = 0; a < job->n_active; a++) {
		const int e = job->expert_of[a], p0 = job->first[a], np = job->first[a + 1] - p0;
		const struct hs_expert_view ev = hs__expert(l, e);
		const uint8_t *W = ev.down;
		for (int c0 = 0; c0 < np; c0 += CHUNK) {
			int m = np - c0 < CHUNK ? np - c0 : CHUNK;
			for (int j = 0; j < m; j++) {
				int p = p0 + c0 + j;
				hs[j] = job->hq + (size_t)p * (F / HS_QK);
				hf[j] = job->g + (size_t)p * F;
				oo[j] = job->out + (size_t)p * D + lo;
			}
			if (quant && ev.packed)
				job->ops->tile_q_packed(td, W, lo, hi, F, hs, m, oo);
			else if (quant)
				job->ops->tile_q(td, W, rb, lo, hi, F, hs, m, oo);
			else
				tile_f(td, W, rb, lo, hi, F, hf, m, oo);
			for (int j = 0; j < m; j++) {
				const int p = p0 + c0 + j;
				float *y = job->y + (size_t)job->pair_token[p] * D, w = job->pair_weight[p];
				const float *bd = ev.down_b;
				for (int r = lo; r < hi; r++)
					y[r] += w * (oo[j][r - lo] + (bd ? bd[r] : 0));
			}
		}
	}
}

int hs__ffn_run_omp(struct hs_ffn_job *job, int nthreads)
{
	int rc = hs__ffn_prepare(job);

	if (rc)
		return rc;
	if (nthreads <= 0)
		nthreads = omp_get_max_threads();
#pragma omp parallel num_threads(nthreads)
	{
		int ith = omp_get_thread_num(), nth = omp_get_num_threads();
		hs__ffn_step_quantize(job, ith, nth);
#pragma omp barrier
		hs__ffn_step_gate_up(job, ith, nth);
#pragma omp barrier
		hs__ffn_step_down(job, ith, nth);
	}
	return 0;
}

/* ---- mul_mat_id alone ---------------------------------------------------- */

size_t hs__mmid_scratch_bytes(int cols, int rows, int n, int k, int n_experts)
{
	(void)rows;
	return align64((size_t)n_experts * sizeof(int)) + align64((size_t)(n_experts + 1) * sizeof(int)) +
	       align64((size_t)n * k * sizeof(int)) + align64((size_t)n * (cols / HS_QK) * sizeof(struct hs_block_q8_0));
}

int hs__mmid_prepare(struct hs_mmid_job *job)
{
	uint8_t *p = job->scratch;
	int n_pairs;

	if (job->packed && !hs__pack_supported(job->type, job->rows, job->cols))
		return hs__error(EINVAL, "mul_mat_id: %s %d x %d cannot be row-interleaved (MXFP4 or Q8_0, rows a multiple of %d)",
				 hs__type_name(job->type), job->rows, job->cols, HS_PACK_ROWS);
	job->expert_of = carve(&p, (size_t)job->n_experts * sizeof(int));
	job->first = carve(&p, (size_t)(job->n_experts + 1) * sizeof(int));
	job->pair_slot = carve(&p, (size_t)job->n * job->k * sizeof(int));
	job->xq = carve(&p, (size_t)job->n * (job->cols / HS_QK) * sizeof(struct hs_block_q8_0));
	return group(job->ids, job->n, job->k, job->n_experts, job->first, job->expert_of, &job->n_active,
		     job->pair_slot, &n_pairs);
}

void hs__mmid_step_quantize(struct hs_mmid_job *job, int ith, int nth)
{
	if (!hs__kernel_type_quantized(job->type))
		return;
	for (int t = ith; t < job->n; t += nth)
		job->ops->quantize_q8_0(job->x + (size_t)t * job->cols, job->xq + (size_t)t * (job->cols / HS_QK),
					job->cols);
}

void hs__mmid_step_mul(struct hs_mmid_job *job, int ith, int nth)
{
	const int nrb = (job->rows + ROWS_PER_ITEM - 1) / ROWS_PER_ITEM, nbc = job->cols / HS_QK;
	const size_t rb = hs__type_row_bytes(job->type, (uint64_t)job->cols);
	const uint64_t total = (uint64_t)job->first[job->n_active] * (uint64_t)nrb;
	const struct hs_block_q8_0 *xs[CHUNK];
	const float *xf[CHUNK];
	float *oo[CHUNK];
	uint64_t c = 0;

	for (int a = 0; a < job->n_active; a++) {
		const int e = job->expert_of[a], p0 = job->first[a], np = job->first[a + 1] - p0;
		const uint8_t *W = job->w + (size_t)e * job->stride;
		for (int b = 0; b < nrb; b++, c += (uint64_t)np) {
			if (!mine(c, (uint64_t)np, total, ith, nth))
				continue;
			const int r0 = b * ROWS_PER_ITEM, r1 = r0 + ROWS_PER_ITEM < job->rows ? r0 + ROWS_PER_ITEM : job->rows;
			for (int c0 = 0; c0 < np; c0 += CHUNK) {
				int m = np - c0 < CHUNK ? np - c0 : CHUNK;
				for (int j = 0; j < m; j++) {
					int slot = job->pair_slot[p0 + c0 + j], t = slot / job->k;
					xs[j] = job->xq + (size_t)t * nbc;
					xf[j] = job->x + (size_t)t * job->cols;
					oo[j] = job->out + (size_t)slot * job->rows + r0;
				}
				if (hs__kernel_type_quantized(job->type) && job->packed)
					job->ops->tile_q_packed(job->type, W, r0, r1, job->cols, xs, m, oo);
				else if (hs__kernel_type_quantized(job->type))
					job->ops->tile_q(job->type, W, rb, r0, r1, job->cols, xs, m, oo);
				else
					tile_f(job->type, W, rb, r0, r1, job->cols, xf, m, oo);
			}
		}
	}
}

int hs__mmid_run_omp(struct hs_mmid_job *job, int nthreads)
{
	int rc = hs__mmid_prepare(job);

	if (rc)
		return rc;
	if (nthreads <= 0)
		nthreads = omp_get_max_threads();
#pragma omp parallel num_threads(nthreads)
	{
		int ith = omp_get_thread_num(), nth = omp_get_num_threads();
		hs__mmid_step_quantize(job, ith, nth);
#pragma omp barrier
		hs__mmid_step_mul(job, ith, nth);
	}
	return 0;
}
