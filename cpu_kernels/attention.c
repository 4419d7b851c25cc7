/* Attention over a KV cache (driver, merge of cell ranges, the double
 * reference) and the K/V write.  The inner loop is dops->attend. */
#include "config.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/attention.h"
#include "base/error.h"

#define MAX_HEAD_DIM HS_ATTN_MAX_HEAD_DIM
#define SPLIT_MIN_CELLS 256
/* Cells an item takes through all KV heads before moving on: their K and V
 * rows (64 KiB for 8 f16 heads of 64) stay in the L1/L2 caches while every
 * head reads them, whatever the cache's layout; the next chunk's rows are
 * prefetched meanwhile, one KV head's rows before that head's work on this
 * chunk (without it, decode over 8k cells of a [cell][head][dim] cache ran
 * 1.8 times slower from DRAM than from the L3 cache: one head's rows are
 * strided, and the hardware prefetchers did not follow; with it, as fast). */
#define CHUNK_CELLS 32

/* Asks for the K and V rows of KV head h in cells [c0, c1).  Inlined: GCC
 * takes a function holding only prefetches for one without effects and
 * drops its calls. */
static inline __attribute__((always_inline)) void prefetch_cells(const struct hs_attn_job *j, int h, int c0, int c1,
								 size_t row_bytes)
{
	for (int c = c0; c < c1; c++) {
		const uint8_t *k = j->k + (size_t)c * j->k_cell + (size_t)h * j->k_head;
		const uint8_t *v = j->v + (size_t)c * j->v_cell + (size_t)h * j->v_head;
		for (size_t b = 0; b < row_bytes; b += 64) {
			__builtin_prefetch(k + b);
			__builtin_prefetch(v + b);
		}
		__builtin_prefetch(k + row_bytes - 1);
		__builtin_prefetch(v + row_bytes - 1);
	}
}

int hs__attn_pick_split(int n, int n_cells, int nth)
{
	long s, cap = n_cells / SPLIT_MIN_CELLS;

	if (nth <= 1 || n <= 0 || n >= 2L * nth || cap <= 1)
		return 1;
	s = (2L * nth + n - 1) / n;
	return (int)(s < cap ? s : cap);
}

static size_t part_floats(int head_dim)
{
	return (size_t)head_dim + 2; /* m, l, o[head_dim] */
}

size_t hs__attn_scratch_bytes(int n, int n_head, int head_dim, int n_split)
{
	if (n_split <= 1 || n <= 0)
		return 0;
	return ((size_t)n * n_head * n_split * part_floats(head_dim) * sizeof(float) + 63) & ~(size_t)63;
}

/* ref: for the double twin, which also reads an f32 cache (the forward
 * pass's float path keeps one) */
static int attn_check(const struct hs_attn_job *j, int ref)
{
	if (j->kv_type != HS_TYPE_F16 && j->kv_type != HS_TYPE_Q8_0 && !(ref && j->kv_type == HS_TYPE_F32))
		return hs__error(EINVAL, "attention: KV type %s (f16 or q8_0)",
				 hs__type_name(j->kv_type) ? hs__type_name(j->kv_type) : "unknown");
	if (j->head_dim <= 0 || j->head_dim > MAX_HEAD_DIM || j->head_dim % (j->kv_type == HS_TYPE_Q8_0 ? HS_QK : 8))
		return hs__error(EINVAL, "attention: head_dim %d (a multiple of %d, at most %d)", j->head_dim,
				 j->kv_type == HS_TYPE_Q8_0 ? HS_QK : 8, MAX_HEAD_DIM);
	if (j->n_head_kv <= 0 || j->n_head <= 0 || j->n_head % j->n_head_kv)
		return hs__error(EINVAL, "attention: %d query heads over %d KV heads (a multiple)", j->n_head,
				 j->n_head_kv);
	if (j->n_head / j->n_head_kv > HS_ATTN_MAX_GROUP || j->n_head > HS_ATTN_MAX_HEADS ||
	    (long)j->n_head * j->head_dim > HS_ATTN_MAX_VALUES)
		return hs__error(EINVAL,
				 "attention: %d query heads (%d per KV head) of %d values (at most %d heads, %d per KV "
				 "head, %d values)",
				 j->n_head, j->n_head / j->n_head_kv, j->head_dim, HS_ATTN_MAX_HEADS, HS_ATTN_MAX_GROUP,
				 HS_ATTN_MAX_VALUES);
	if (j->n < 0 || j->n_cells < 0 || j->window < 0)
		return hs__error(EINVAL, "attention: %d tokens, %d cells, window %d (none negative)", j->n, j->n_cells,
				 j->window);
	return 0;
}

int hs__attn_prepare(struct hs_attn_job *job)
{
	int rc = attn_check(job, 0);

	if (rc)
		return rc;
	if (job->n_split < 1)
		job->n_split = 1;
	if (job->n_split > 1 && job->n_cells < job->n_split)
		job->n_split = job->n_cells > 0 ? job->n_cells : 1;
	job->part = job->n_split > 1 ? job->scratch : NULL;
	if (job->n_split > 1 && !job->scratch)
		return hs__error(EINVAL, "attention: %d cell ranges need scratch", job->n_split);
	return 0;
}

/* Positions a query at position p sees: [lo, p]. */
static int32_t pos_lo(const struct hs_attn_job *j, int32_t p)
{
	int64_t lo = j->window > 0 ? (int64_t)p - j->window + 1 : 0;
	return lo < 0 ? 0 : (int32_t)lo;
}

/* Work estimate of one item: the cells it may see. */
static uint64_t item_cost(const struct hs_attn_job *j, int t)
{
	int64_t vis = (int64_t)j->q_pos[t] - pos_lo(j, j->q_pos[t]) + 1;
	if (vis > j->n_cells)
		vis = j->n_cells;
	return (uint64_t)(vis > 0 ? vis : 0) + 16; /* + the item's fixed cost */
}

/* The softmax's end for one head from S partial states (m, l, o) `stride`
 * floats apart, with the sink when there is one. */
static void finish(const float *m, const float *l, const float *o, int S, size_t stride, const float *sink, int D,
		   float *out)
{
	float M = sink ? *sink : -INFINITY, L = 0;

	for (int s = 0; s < S; s++)
		M = fmaxf(M, m[s * stride]);
	for (int d = 0; d < D; d++)
		out[d] = 0;
	if (M == -INFINITY)
		return; /* nothing visible and no sink */
	for (int s = 0; s < S; s++) {
		if (m[s * stride] == -INFINITY)
			continue;
		const float a = expf(m[s * stride] - M);
		L += a * l[s * stride];
		for (int d = 0; d < D; d++)
			out[d] += a * o[s * stride + d];
	}
	if (sink)
		L += expf(*sink - M);
	const float inv = L > 0 ? 1.0f / L : 0.0f;
	for (int d = 0; d < D; d++)
		out[d] *= inv;
}

void hs__attend_span_tokens(const struct hs_attn_span *t, void (*attend)(const struct hs_attn_tile *))
{
	for (int i = 0; i < t->n; i++) {
		const struct hs_attn_tile tile = {
			.g = t->g,
			.head_dim = t->head_dim,
			.kv_type = t->kv_type,
			.q = t->q + (size_t)i * t->q_stride,
			.scale = t->scale,
			.k = t->k,
			.v = t->v,
			.k_cell = t->k_cell,
			.v_cell = t->v_cell,
			.cell_pos = t->cell_pos,
			.c0 = t->c0,
			.c1 = t->c1,
			.pos_lo = t->pos_lo[i],
			.pos_hi = t->pos_hi[i],
			.m = t->m + (size_t)i * t->g,
			.l = t->l + (size_t)i * t->g,
			.o = t->o + (size_t)i * t->g * t->head_dim,
		};
		attend(&tile);
	}
}

/* The thread of an item of cost w after *c of the total: the one whose
 * share of the total holds its middle. */
static int item_owner(uint64_t *c, uint64_t w, uint64_t total, int nth)
{
	const int owner = total ? (int)((2 * *c + w) * (uint64_t)nth / (2 * total)) : 0;
	*c += w;
	return owner >= nth ? nth - 1 : owner;
}

/* Prefill through dops->attend_span: items of up to `span` consecutive
 * tokens (their state for one KV head at a time fits the step's arrays),
 * each KV head's cells read once per item. */
static void attn_step_spans(struct hs_attn_job *job, int span, int ith, int nth)
{
	const int H = job->n_head, KV = job->n_head_kv, G = H / KV, D = job->head_dim;
	const size_t rb = hs__type_row_bytes(job->kv_type, (uint64_t)D);
	float m[HS_ATTN_MAX_HEADS], l[HS_ATTN_MAX_HEADS], o[HS_ATTN_MAX_VALUES];
	int32_t lo[HS_ATTN_MAX_HEADS], hi[HS_ATTN_MAX_HEADS];
	uint64_t total = 0, c = 0;

	for (int t = 0; t < job->n; t++)
		total += item_cost(job, t);
	for (int t0 = 0; t0 < job->n; t0 += span) {
		const int tn = job->n - t0 < span ? job->n - t0 : span;
		uint64_t w = 0;
		for (int i = 0; i < tn; i++)
			w += item_cost(job, t0 + i);
		if (item_owner(&c, w, total, nth) != ith)
			continue;
		for (int i = 0; i < tn; i++) {
			lo[i] = pos_lo(job, job->q_pos[t0 + i]);
			hi[i] = job->q_pos[t0 + i];
		}
		for (int h = 0; h < KV; h++) {
			for (int i = 0; i < tn * G; i++) {
				m[i] = -INFINITY;
				l[i] = 0;
			}
			memset(o, 0, sizeof(float) * (size_t)tn * G * D);
			for (int cc = 0; cc < job->n_cells; cc += CHUNK_CELLS) {
				const int ce = cc + CHUNK_CELLS < job->n_cells ? cc + CHUNK_CELLS : job->n_cells;
				prefetch_cells(job, h, ce, ce + CHUNK_CELLS < job->n_cells ? ce + CHUNK_CELLS : job->n_cells,
					       rb);
				const struct hs_attn_span sp = {
					.n = tn,
					.g = G,
					.head_dim = D,
					.kv_type = job->kv_type,
					.q = job->q + (size_t)t0 * job->q_stride + (size_t)h * G * D,
					.q_stride = job->q_stride,
					.scale = job->scale,
					.k = job->k + (size_t)h * job->k_head,
					.v = job->v + (size_t)h * job->v_head,
					.k_cell = job->k_cell,
					.v_cell = job->v_cell,
					.cell_pos = job->cell_pos,
					.c0 = cc,
					.c1 = ce,
					.pos_lo = lo,
					.pos_hi = hi,
					.m = m,
					.l = l,
					.o = o,
				};
				job->dops->attend_span(&sp);
			}
			for (int i = 0; i < tn; i++)
				for (int j = 0; j < G; j++) {
					const int head = h * G + j;
					finish(&m[i * G + j], &l[i * G + j], o + ((size_t)i * G + j) * D, 1, 0,
					       job->sinks ? &job->sinks[head] : NULL, D,
					       job->out + (size_t)(t0 + i) * job->out_stride + (size_t)head * D);
				}
		}
	}
}

/* Tokens a span item takes: as many as one KV head's state for them fits
 * the step's arrays, at most 32; 0 (per token) without attend_span, for
 * fewer than SPAN_MIN_TOKENS tokens or with cell ranges. */
#define SPAN_MIN_TOKENS 8
static int span_tokens(const struct hs_attn_job *job)
{
	const int G = job->n_head / job->n_head_kv;
	int span = HS_ATTN_MAX_VALUES / (G * job->head_dim);

	if (!job->dops->attend_span || job->n < SPAN_MIN_TOKENS || job->n_split > 1)
		return 0;
	span = span < HS_ATTN_MAX_HEADS / G ? span : HS_ATTN_MAX_HEADS / G;
	span = span < 32 ? span : 32;
	return span >= 2 ? span : 0;
}

void hs__attn_step(struct hs_attn_job *job, int ith, int nth)
{
	const int H = job->n_head, KV = job->n_head_kv, G = H / KV, D = job->head_dim, S = job->n_split;
	const int span = span_tokens(job);
	if (span) {
		attn_step_spans(job, span, ith, nth);
		return;
	}
	const long n_items = (long)job->n * S;
	const size_t rb = hs__type_row_bytes(job->kv_type, (uint64_t)D);
	float m[HS_ATTN_MAX_HEADS], l[HS_ATTN_MAX_HEADS], o[HS_ATTN_MAX_VALUES];
	uint64_t total = 0, c = 0;

	for (int t = 0; t < job->n; t++)
		total += item_cost(job, t);
	for (long it = 0; it < n_items; it++) {
		const int t = (int)(it / S), s = (int)(it % S);
		const uint64_t w = (item_cost(job, t) + S - 1) / S;
		if (item_owner(&c, w, total, nth) != ith)
			continue;
		const int c0 = (int)((long)s * job->n_cells / S), c1 = (int)((long)(s + 1) * job->n_cells / S);
		for (int i = 0; i < H; i++) {
			m[i] = -INFINITY;
			l[i] = 0;
		}
		memset(o, 0, sizeof(float) * (size_t)H * D);
		for (int cc = c0; cc < c1; cc += CHUNK_CELLS) {
			const int ce = cc + CHUNK_CELLS < c1 ? cc + CHUNK_CELLS : c1;
			for (int h = 0; h < KV; h++) {
				prefetch_cells(job, h, ce, ce + CHUNK_CELLS < c1 ? ce + CHUNK_CELLS : c1, rb);
				const struct hs_attn_tile tile = {
					.g = G,
					.head_dim = D,
					.kv_type = job->kv_type,
					.q = job->q + (size_t)t * job->q_stride + (size_t)h * G * D,
					.scale = job->scale,
					.k = job->k + (size_t)h * job->k_head,
					.v = job->v + (size_t)h * job->v_head,
					.k_cell = job->k_cell,
					.v_cell = job->v_cell,
					.cell_pos = job->cell_pos,
					.c0 = cc,
					.c1 = ce,
					.pos_lo = pos_lo(job, job->q_pos[t]),
					.pos_hi = job->q_pos[t],
					.m = m + h * G,
					.l = l + h * G,
					.o = o + (size_t)h * G * D,
				};
				job->dops->attend(&tile);
			}
		}
		for (int head = 0; head < H; head++) {
			if (S == 1) {
				finish(&m[head], &l[head], o + (size_t)head * D, 1, 0,
				       job->sinks ? &job->sinks[head] : NULL, D,
				       job->out + (size_t)t * job->out_stride + (size_t)head * D);
				continue;
			}
			float *p = job->part + (((size_t)t * H + head) * S + s) * part_floats(D);
			p[0] = m[head];
			p[1] = l[head];
			memcpy(p + 2, o + (size_t)head * D, sizeof(float) * D);
		}
	}
}

void hs__attn_step_merge(struct hs_attn_job *job, int ith, int nth)
{
	const int S = job->n_split, D = job->head_dim;
	const size_t pf = part_floats(D);
	long lo, hi;

	if (S <= 1)
		return;
	hs__share((long)job->n * job->n_head, ith, nth, &lo, &hi);
	for (long i = lo; i < hi; i++) {
		const int t = (int)(i / job->n_head), head = (int)(i % job->n_head);
		const float *p = job->part + (size_t)i * S * pf;
		finish(p, p + 1, p + 2, S, pf, job->sinks ? &job->sinks[head] : NULL, D,
		       job->out + (size_t)t * job->out_stride + (size_t)head * D);
	}
}

static void attn_step(void *job, int ith, int nth)
{
	hs__attn_step(job, ith, nth);
}

static void attn_merge(void *job, int ith, int nth)
{
	hs__attn_step_merge(job, ith, nth);
}

int hs__attn_run_omp(struct hs_attn_job *job, int nthreads)
{
	int rc = hs__attn_prepare(job);

	if (!rc)
		hs__omp_steps(job, attn_step, job->n_split > 1 ? attn_merge : NULL, nthreads);
	return rc;
}

int hs__attention_ref(const struct hs_attn_job *job)
{
	const int D = job->head_dim;
	int rc = attn_check(job, 1);
	double *s = NULL, *acc = NULL;
	float *row = NULL;

	if (rc)
		return rc;
	s = malloc(sizeof *s * (size_t)(job->n_cells + 1));
	acc = malloc(sizeof *acc * (size_t)D);
	row = malloc(sizeof *row * (size_t)D);
	if (!s || !acc || !row) {
		rc = hs__error(ENOMEM, "attention reference: out of memory");
		goto out_free;
	}
	for (int t = 0; t < job->n; t++)
		for (int h = 0; h < job->n_head; h++) {
			const int hk = h / (job->n_head / job->n_head_kv);
			const float *q = job->q + (size_t)t * job->q_stride + (size_t)h * D;
			const int64_t p = job->q_pos[t];
			double mx = job->sinks ? job->sinks[h] : -INFINITY, z = 0;
			for (int c = 0; c < job->n_cells; c++) {
				const int64_t cp = job->cell_pos[c];
				s[c] = -INFINITY;
				if (cp < 0 || cp > p || (job->window > 0 && p - cp >= job->window))
					continue;
				hs__dequantize_row_ref(job->kv_type,
						       job->k + (size_t)c * job->k_cell + (size_t)hk * job->k_head, row,
						       (size_t)D);
				double dot = 0;
				for (int d = 0; d < D; d++)
					dot += (double)q[d] * row[d];
				s[c] = dot * job->scale;
				mx = s[c] > mx ? s[c] : mx;
			}
			for (int d = 0; d < D; d++)
				acc[d] = 0;
			if (mx != -INFINITY) {
				if (job->sinks)
					z += exp(job->sinks[h] - mx);
				for (int c = 0; c < job->n_cells; c++) {
					if (s[c] == -INFINITY)
						continue;
					const double e = exp(s[c] - mx);
					z += e;
					hs__dequantize_row_ref(job->kv_type,
							       job->v + (size_t)c * job->v_cell +
								       (size_t)hk * job->v_head,
							       row, (size_t)D);
					for (int d = 0; d < D; d++)
						acc[d] += e * row[d];
				}
			}
			float *out = job->out + (size_t)t * job->out_stride + (size_t)h * D;
			for (int d = 0; d < D; d++)
				out[d] = z > 0 ? (float)(acc[d] / z) : 0.0f;
		}
out_free:
	free(s);
	free(acc);
	free(row);
	return rc;
}

void hs__kv_store(const struct hs_kernel_ops *ops, const struct hs_dense_ops *dops, int type, const float *x,
		  size_t x_stride, int n, int n_head_kv, int head_dim, const int32_t *cells, uint8_t *dst,
		  size_t cell_bytes, size_t head_bytes, int ith, int nth)
{
	long lo, hi;

	hs__share((long)n * n_head_kv, ith, nth, &lo, &hi);
	for (long i = lo; i < hi; i++) {
		const int t = (int)(i / n_head_kv), h = (int)(i % n_head_kv);
		const float *src = x + (size_t)t * x_stride + (size_t)h * head_dim;
		uint8_t *d = dst + (size_t)cells[t] * cell_bytes + (size_t)h * head_bytes;
		if (type == HS_TYPE_Q8_0)
			ops->quantize_q8_0(src, (struct hs_block_q8_0 *)(void *)d, head_dim);
		else
			dops->to_f16(src, (uint16_t *)(void *)d, head_dim);
	}
}

void hs__kv_store_omp(const struct hs_kernel_ops *ops, const struct hs_dense_ops *dops, int type, const float *x,
		      size_t x_stride, int n, int n_head_kv, int head_dim, const int32_t *cells, uint8_t *dst,
		      size_t cell_bytes, size_t head_bytes, int nthreads)
{
#pragma omp parallel num_threads(nthreads > 0 ? nthreads : omp_get_max_threads())
	hs__kv_store(ops, dops, type, x, x_stride, n, n_head_kv, head_dim, cells, dst, cell_bytes, head_bytes,
		     omp_get_thread_num(), omp_get_num_threads());
}
