/* Drivers of the dense ops: matrix products (quantized through
 * hs_kernel_ops.tile_q, float through hs_dense_ops.tile_f), embedding rows
 * and RMSNorm, each sliced by (ith, nth), with their double-precision
 * whole-op twins and OpenMP drivers. */
#include "config.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/dense.h"
#include "cpu_kernels/moe.h"
#include "cpu_kernels/repack.h"
#include "base/error.h"

#define CHUNK 64 /* tokens per tile call (pointer arrays on the stack) */

static size_t align64(size_t x)
{
	return (x + 63) & ~(size_t)63;
}

/* ---- matrix products ----------------------------------------------------- */

static int quantized(int type)
{
	return hs__kernel_type_quantized(type);
}

size_t hs__matmul_scratch_bytes(int type, int cols, int n)
{
	if (!quantized(type) || cols <= 0 || n <= 0)
		return 0;
	return align64((size_t)n * (size_t)(cols / HS_QK) * sizeof(struct hs_block_q8_0));
}

static int matmul_check(const struct hs_matmul_job *j)
{
	size_t rb;

	if (!hs__type_name(j->type))
		return hs__error(EINVAL, "matmul: weight type %d unknown", j->type);
	if (j->rows < 0 || j->cols <= 0 || j->n < 0)
		return hs__error(EINVAL, "matmul: %d rows, %d cols, %d tokens (cols > 0, rows and tokens >= 0)",
				 j->rows, j->cols, j->n);
	rb = hs__type_row_bytes(j->type, (uint64_t)j->cols);
	if (!rb)
		return hs__error(EINVAL, "matmul: %d cols is not a multiple of %s's block of %zu", j->cols,
				 hs__type_name(j->type), hs__type_block_values(j->type));
	if (j->row_bytes < rb)
		return hs__error(EINVAL, "matmul: row_bytes %zu under the %zu bytes of a row", j->row_bytes, rb);
	if (j->packed && (!hs__pack_supported(j->type, j->rows, j->cols) || j->row_bytes != rb))
		return hs__error(EINVAL, "matmul: a packed %s matrix of %d x %d, rows %zu bytes apart (Q8_0 or MXFP4, "
				 "rows a multiple of %d, no gaps)",
				 hs__type_name(j->type), j->rows, j->cols, j->row_bytes, HS_PACK_ROWS);
	if (j->n > 1 && (j->x_stride < (size_t)j->cols || j->y_stride < (size_t)j->rows))
		return hs__error(EINVAL, "matmul: token strides %zu (x) and %zu (y) under a row", j->x_stride,
				 j->y_stride);
	return 0;
}

int hs__matmul_prepare(struct hs_matmul_job *job)
{
	int rc = matmul_check(job);

	if (rc)
		return rc;
	job->xq = quantized(job->type) && job->n > 0 ? job->scratch : NULL;
	if (job->xq && !job->scratch)
		return hs__error(EINVAL, "matmul: %s weights need scratch", hs__type_name(job->type));
	return 0;
}

void hs__matmul_step_quantize(struct hs_matmul_job *job, int ith, int nth)
{
	const int nb = job->cols / HS_QK;

	if (!job->xq)
		return;
	for (int t = ith; t < job->n; t += nth)
		hs__quantize_for(job->ops, job->type, job->x + (size_t)t * job->x_stride, job->xq + (size_t)t * nb,
				 job->cols);
}

/* Rows per work item.  Decode: about eight items per thread (an even
 * share), 16 to 256 rows each, so that a long matrix (201088 output rows)
 * is not cut into thousands of calls that each redo the token's per-call
 * setup.  Prefill: a block of 64 rows (64 rows of 2880 Q8_0 values are
 * 196 KB) stays in the L2 cache while a chunk of tokens uses it. */
static int row_block(int n, int rows, int nth)
{
	int rb;

	if (n > 1)
		return 64;
	rb = rows / (8 * nth) / 16 * 16;
	return rb < 16 ? 16 : rb > 256 ? 256 : rb;
}

void hs__matmul_step_mul(struct hs_matmul_job *job, int ith, int nth)
{
	const int RB = row_block(job->n, job->rows, nth), nrb = (job->rows + RB - 1) / RB;
	const int ntc = (job->n + CHUNK - 1) / CHUNK, nbq = job->cols / HS_QK;
	const struct hs_block_q8_0 *xs[CHUNK];
	const float *xf[CHUNK];
	float *out[CHUNK];
	long lo, hi;

	hs__share((long)nrb * ntc, ith, nth, &lo, &hi);
	for (long it = lo; it < hi; it++) {
		const int b = (int)(it / ntc), c = (int)(it % ntc);
		const int r0 = b * RB, r1 = r0 + RB < job->rows ? r0 + RB : job->rows;
		const int t0 = c * CHUNK, m = job->n - t0 < CHUNK ? job->n - t0 : CHUNK;
		for (int j = 0; j < m; j++) {
			out[j] = job->y + (size_t)(t0 + j) * job->y_stride + r0;
			xf[j] = job->x + (size_t)(t0 + j) * job->x_stride;
			if (job->xq)
				xs[j] = job->xq + (size_t)(t0 + j) * nbq;
		}
		if (job->xq && job->packed)
			job->ops->tile_q_packed(job->type, job->w, r0, r1, job->cols, xs, m, out);
		else if (job->xq)
			job->ops->tile_q(job->type, job->w, job->row_bytes, r0, r1, job->cols, xs, m, out);
		else
			job->dops->tile_f(job->type, job->w, job->row_bytes, r0, r1, job->cols, xf, m, out);
		if (job->bias)
			for (int j = 0; j < m; j++)
				for (int r = r0; r < r1; r++)
					out[j][r - r0] += job->bias[r];
	}
}

void hs__omp_steps(void *job, void (*a)(void *, int, int), void (*b)(void *, int, int), int nthreads)
{
#pragma omp parallel num_threads(nthreads > 0 ? nthreads : omp_get_max_threads())
	{
		int ith = omp_get_thread_num(), nth = omp_get_num_threads();
		a(job, ith, nth);
		if (b) {
#pragma omp barrier
			b(job, ith, nth);
		}
	}
}

static void mm_quantize(void *job, int ith, int nth)
{
	hs__matmul_step_quantize(job, ith, nth);
}

static void mm_mul(void *job, int ith, int nth)
{
	hs__matmul_step_mul(job, ith, nth);
}

int hs__matmul_run_omp(struct hs_matmul_job *job, int nthreads)
{
	int rc = hs__matmul_prepare(job);

	if (!rc)
		hs__omp_steps(job, mm_quantize, mm_mul, nthreads);
	return rc;
}

int hs__matmul_ref(const struct hs_matmul_job *job)
{
	int rc = matmul_check(job);
	float *row;

	if (rc)
		return rc;
	uint8_t *plain = job->packed ? malloc(job->row_bytes) : NULL;
	if (!(row = malloc(sizeof *row * (size_t)job->cols)) || (job->packed && !plain)) {
		free(row);
		return hs__error(ENOMEM, "matmul reference: out of memory");
	}
	for (int r = 0; r < job->rows; r++) {
		if (job->packed) /* the row as the file had it */
			hs__packed_row(job->type, job->cols, job->w, r, plain);
		hs__dequantize_row_ref(job->type, job->packed ? plain : job->w + (size_t)r * job->row_bytes, row,
				       (size_t)job->cols);
		for (int t = 0; t < job->n; t++) {
			const float *x = job->x + (size_t)t * job->x_stride;
			double s = job->bias ? job->bias[r] : 0;
			for (int c = 0; c < job->cols; c++)
				s += (double)row[c] * x[c];
			job->y[(size_t)t * job->y_stride + r] = (float)s;
		}
	}
	free(row);
	free(plain);
	return 0;
}

/* ---- embedding rows ----------------------------------------------------- */

void hs__get_rows(const struct hs_dense_ops *dops, int type, const uint8_t *w, size_t row_bytes, int cols, int n,
		  const int32_t *ids, float *y, size_t y_stride, int ith, int nth)
{
	for (int t = ith; t < n; t += nth)
		dops->dequant_row(type, w + (size_t)ids[t] * row_bytes, y + (size_t)t * y_stride, cols);
}

void hs__get_rows_ref(int type, const uint8_t *w, size_t row_bytes, int cols, int n, const int32_t *ids, float *y,
		      size_t y_stride)
{
	for (int t = 0; t < n; t++)
		hs__dequantize_row_ref(type, w + (size_t)ids[t] * row_bytes, y + (size_t)t * y_stride, (size_t)cols);
}

void hs__get_rows_omp(const struct hs_dense_ops *dops, int type, const uint8_t *w, size_t row_bytes, int cols, int n,
		      const int32_t *ids, float *y, size_t y_stride, int nthreads)
{
#pragma omp parallel num_threads(nthreads > 0 ? nthreads : omp_get_max_threads())
	hs__get_rows(dops, type, w, row_bytes, cols, n, ids, y, y_stride, omp_get_thread_num(), omp_get_num_threads());
}

/* ---- SwiGLU ------------------------------------------------------------------- */

void hs__swiglu(float *g, const float *u, size_t n, int ith, int nth)
{
	long lo, hi;

	hs__share((long)n, ith, nth, &lo, &hi);
	for (long i = lo; i < hi; i++)
		g[i] = hs__act_silu_mul_f(g[i], u[i]);
}

void hs__swiglu_ref(float *g, const float *u, size_t n)
{
	for (size_t i = 0; i < n; i++)
		g[i] = (float)hs__act_silu_mul(g[i], u[i]);
}

/* ---- RMSNorm ----------------------------------------------------------------- */

void hs__rmsnorm(const struct hs_dense_ops *dops, const float *x, size_t x_stride, float *y, size_t y_stride, int n,
		 int n_head, int dim, const float *w, float eps, int ith, int nth)
{
	long lo, hi;

	hs__share((long)n * n_head, ith, nth, &lo, &hi);
	for (long i = lo; i < hi; i++) {
		const size_t t = (size_t)(i / n_head), h = (size_t)(i % n_head);
		dops->rmsnorm_row(x + t * x_stride + h * dim, y + t * y_stride + h * dim, dim, w, eps);
	}
}

/* The scalar table's row function is already the double-precision math. */
void hs__rmsnorm_ref(const float *x, size_t x_stride, float *y, size_t y_stride, int n, int n_head, int dim,
		     const float *w, float eps)
{
	hs__rmsnorm(&hs__dense_ref, x, x_stride, y, y_stride, n, n_head, dim, w, eps, 0, 1);
}

void hs__rmsnorm_omp(const struct hs_dense_ops *dops, const float *x, size_t x_stride, float *y, size_t y_stride, int n,
		     int n_head, int dim, const float *w, float eps, int nthreads)
{
#pragma omp parallel num_threads(nthreads > 0 ? nthreads : omp_get_max_threads())
	hs__rmsnorm(dops, x, x_stride, y, y_stride, n, n_head, dim, w, eps, omp_get_thread_num(),
		    omp_get_num_threads());
}
