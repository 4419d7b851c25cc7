/* The forward pass's CPU backend: host memory, the weights read in place
 * from the model's mapping, every op split over the runtime's worker pool
 * as the kernels' (ith, nth) steps, synchronous. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu_kernels/repack.h"
#include "model/model.h"
#include "runtime/numa.h"
#include "runtime/forward.h"
#include "runtime/pool.h"

static int c_alloc(struct hs_fwd *f, size_t bytes, void **p)
{
	(void)f;
	*p = aligned_alloc(64, bytes);
	if (!*p)
		return hs__error(ENOMEM, "context: out of memory for %zu bytes", bytes);
	return 0;
}

static void c_free(struct hs_fwd *f, void *p)
{
	(void)f;
	free(p);
}

static int c_copy(struct hs_fwd *f, void *dst, const void *src, size_t bytes)
{
	(void)f;
	if (dst != src && bytes)
		memmove(dst, src, bytes);
	return 0;
}

static int c_sync(struct hs_fwd *f)
{
	(void)f;
	return 0;
}

/* ---- matrix products ---------------------------------------------------------- */

struct mm_ctx {
	struct hs_matmul_job *job;
	struct hs_pool *pool;
};

static void mm_steps(void *ctx, int ith, int nth)
{
	struct mm_ctx *c = ctx;
	if (c->job->xq) {
		hs__matmul_step_quantize(c->job, ith, nth);
		hs__pool_barrier(c->pool);
	}
	hs__matmul_step_mul(c->job, ith, nth);
}

static int c_matmul(struct hs_fwd *f, const struct hs_weight *w, const float *bias, int n, const float *x,
		    size_t x_stride, float *y, size_t y_stride)
{
	struct hs_matmul_job job = { .ops = hs__kernels_best(), .dops = hs__dense_best(), .type = w->type,
				     .rows = w->rows, .cols = w->cols, .w = w->data, .row_bytes = w->row_bytes,
				     .packed = w->packed,
				     .bias = bias, .n = n, .x = x, .x_stride = x_stride, .y = y, .y_stride = y_stride,
				     .scratch = f->scratch };
	int rc = hs__matmul_prepare(&job);
	if (rc)
		return rc;
	struct mm_ctx c = { &job, f->rt->pool };
	hs__pool_run(f->rt->pool, mm_steps, &c);
	return 0;
}

/* ---- one-step ops ------------------------------------------------------------- */

struct norm_ctx {
	const float *x, *w;
	float *y;
	size_t xs, ys;
	int n, n_head, dim;
	float eps;
};

static void norm_step(void *ctx, int ith, int nth)
{
	struct norm_ctx *c = ctx;
	hs__rmsnorm(hs__dense_best(), c->x, c->xs, c->y, c->ys, c->n, c->n_head, c->dim, c->w, c->eps, ith, nth);
}

static int c_rmsnorm(struct hs_fwd *f, const float *x, size_t x_stride, float *y, size_t y_stride, int n, int n_head,
		     int dim, const float *w, float eps)
{
	struct norm_ctx c = { x, w, y, x_stride, y_stride, n, n_head, dim, eps };
	hs__pool_run(f->rt->pool, norm_step, &c);
	return 0;
}

struct rope_ctx {
	float *x;
	size_t xs;
	int n, n_head, head_dim, n_rot;
	const float *cs;
};

static void rope_step(void *ctx, int ith, int nth)
{
	struct rope_ctx *c = ctx;
	hs__rope_apply(hs__dense_best(), c->n_rot, c->x, c->xs, c->n, c->n_head, c->head_dim, c->cs, ith, nth);
}

static int c_rope(struct hs_fwd *f, float *x, size_t x_stride, int n, int n_head, int head_dim, int n_rot,
		  const float *cs)
{
	struct rope_ctx c = { x, x_stride, n, n_head, head_dim, n_rot, cs };
	hs__pool_run(f->rt->pool, rope_step, &c);
	return 0;
}

struct kv_ctx {
	int type, n, n_head_kv, head_dim;
	const float *x;
	size_t xs, cell_bytes, head_bytes;
	const int32_t *cells;
	uint8_t *dst;
};

static void kv_step(void *ctx, int ith, int nth)
{
	struct kv_ctx *c = ctx;
	hs__kv_store(hs__kernels_best(), hs__dense_best(), c->type, c->x, c->xs, c->n, c->n_head_kv, c->head_dim, c->cells,
		    c->dst, c->cell_bytes, c->head_bytes, ith, nth);
}

static int c_kv_store(struct hs_fwd *f, int type, const float *x, size_t x_stride, int n, int n_head_kv, int head_dim,
		      const int32_t *cells, uint8_t *dst, size_t cell_bytes, size_t head_bytes, int32_t *cell_pos,
		      const int32_t *pos)
{
	struct kv_ctx c = { type, n, n_head_kv, head_dim, x, x_stride, cell_bytes, head_bytes, cells, dst };
	hs__pool_run(f->rt->pool, kv_step, &c);
	if (cell_pos)
		for (int t = 0; t < n; t++)
			cell_pos[cells[t]] = pos[t];
	return 0;
}

static size_t c_matmul_scratch(struct hs_fwd *f, int type, int cols, int n)
{
	(void)f;
	return hs__matmul_scratch_bytes(type, cols, n);
}

static size_t c_attn_scratch(struct hs_fwd *f, int n, int n_cells)
{
	int split = hs__attn_pick_split(n, n_cells, hs__pool_size(f->rt->pool));
	return hs__attn_scratch_bytes(n, f->hp->n_head, f->hp->head_dim, split);
}

struct attn_ctx {
	struct hs_attn_job *job;
	struct hs_pool *pool;
};

static void attn_steps(void *ctx, int ith, int nth)
{
	struct attn_ctx *c = ctx;
	hs__attn_step(c->job, ith, nth);
	if (c->job->n_split > 1) {
		hs__pool_barrier(c->pool);
		hs__attn_step_merge(c->job, ith, nth);
	}
}

static int c_attention(struct hs_fwd *f, struct hs_attn_job *job)
{
	const int nth = hs__pool_size(f->rt->pool);
	job->dops = hs__dense_best();
	job->n_split = hs__attn_pick_split(job->n, job->n_cells, nth);
	/* the scratch was sized for the workers of the context's creation
	 * (hs_runtime_set_threads may have added some since) */
	while (job->n_split > 1 &&
	       hs__attn_scratch_bytes(job->n, job->n_head, job->head_dim, job->n_split) > f->scratch_bytes)
		job->n_split--;
	job->scratch = f->scratch;
	int rc = hs__attn_prepare(job);
	if (rc)
		return rc;
	struct attn_ctx c = { job, f->rt->pool };
	hs__pool_run(f->rt->pool, attn_steps, &c);
	return 0;
}

struct add_ctx {
	float *y;
	const float *x;
	size_t n;
};

static void add_step(void *ctx, int ith, int nth)
{
	struct add_ctx *c = ctx;
	long lo, hi;
	hs__share((long)c->n, ith, nth, &lo, &hi);
	for (long i = lo; i < hi; i++)
		c->y[i] += c->x[i];
}

static int c_add(struct hs_fwd *f, float *y, const float *x, size_t n)
{
	struct add_ctx c = { y, x, n };
	if (n < 4096) /* not worth waking the workers */
		add_step(&c, 0, 1);
	else
		hs__pool_run(f->rt->pool, add_step, &c);
	return 0;
}

struct swiglu_ctx {
	float *g;
	const float *u;
	size_t n;
};

static void swiglu_step(void *ctx, int ith, int nth)
{
	struct swiglu_ctx *c = ctx;
	hs__swiglu(c->g, c->u, c->n, ith, nth);
}

static int c_swiglu(struct hs_fwd *f, float *g, const float *u, size_t n)
{
	struct swiglu_ctx c = { g, u, n };
	hs__pool_run(f->rt->pool, swiglu_step, &c);
	return 0;
}

const struct hs_fwd_be hs__fwd_cpu = {
	.name = "cpu",
	.alloc = c_alloc,
	.free = c_free,
	.upload = c_copy,
	.download = c_copy,
	.matmul_scratch = c_matmul_scratch,
	.attn_scratch = c_attn_scratch,
	.matmul = c_matmul,
	.rmsnorm = c_rmsnorm,
	.rope = c_rope,
	.kv_store = c_kv_store,
	.attention = c_attention,
	.add = c_add,
	.swiglu = c_swiglu,
	.sync = c_sync,
};

/* ---- the weights the CPU reads ----------------------------------------------------
 * Q8_0 and MXFP4 matrices (attention, output) repacked once into the
 * row-interleaved layout the expert kernels read (repack.h): the decode
 * product streams them at the speed the expert tiles reach (the plain-row
 * path is about half as fast per byte), and a token's outputs keep the same
 * bits alone or batched; Q4_K ones too on the tiers that pack it
 * (hs__pack_type: the AVX-512 ones, for the decode's speed; up to 8 tokens
 * alone or batched alike, as its plain rows are not).  The other quantized
 * types (the other K-quants, IQ4,
 * Q4_0..Q5_1) are copied as their rows lie: the file's pages are 4 KiB
 * ones, where the hardware prefetchers stop at every page and the TLB
 * misses, and a Q4_K_M file's output matrix alone is most of a generated
 * token's bytes.  Either copy is in memory on the plan's CPU node (2 MiB
 * pages where the kernel gives them); the file's pages are no longer
 * touched.  Float types are read in place. */

/* All the copies lie in one buffer, each matrix 64-byte aligned, in the
 * order the forward pass reads them: a buffer of its own per matrix never
 * got 2 MiB pages for those under 2 MiB (gpt-oss's k and v, 1.5 MB), and
 * their decode products read on 4 KiB pages took 101-117 us where 60-66
 * would do. */
struct arena {
	uint8_t *base; /* NULL: only count the bytes */
	size_t used;
};

static void pack_weight(struct arena *a, struct hs_weight *w)
{
	const size_t natural = hs__type_row_bytes(w->type, (uint64_t)w->cols);
	const int pack = hs__pack_supported(w->type, w->rows, w->cols) && w->row_bytes == natural;
	if (!w->data || w->rows <= 0 || (!pack && !hs__kernel_type_quantized(w->type)))
		return;
	/* a copy ends at the last row's last byte (the stride may pad rows) */
	size_t bytes = pack ? (size_t)w->rows * w->row_bytes : (size_t)(w->rows - 1) * w->row_bytes + natural;
	uint8_t *p = a->base + a->used;
	a->used += (bytes + 63) & ~(size_t)63;
	if (!a->base)
		return;
	if (pack)
		hs__pack_matrix(w->type, w->rows, w->cols, w->data, w->row_bytes, p);
	else
		memcpy(p, w->data, bytes);
	w->data = p;
	w->packed = pack;
}

/* Every dense matrix of cw through pack_weight: counting (a->base NULL),
 * then copying with progress. */
static int pack_all(struct hs_fwd *f, struct hs_whole *cw, struct arena *a)
{
	hs_runtime *rt = f->rt;
	int rc;

	pack_weight(a, &cw->output);
	for (int l = 0; l < cw->hp.n_layers; l++) {
		struct hs_dense_layer *L = &cw->layers[l];
		if (a->base && rt->o.progress) {
			char what[64];
			snprintf(what, sizeof what, "dense layer %d repacked", l);
			rt->o.progress(what, (double)l / cw->hp.n_layers, rt->o.progress_ctx);
		}
		if (a->base && (rc = hs__runtime_aborted(rt, "repacking the dense weights")))
			return rc;
		struct hs_weight *ws[15] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down };
		/* then qwen35moe's DeltaNet and shared-expert matrices */
		const int nw = 7 + hs__q35_matrices(L, ws + 7);
		for (int k = 0; k < nw; k++)
			pack_weight(a, ws[k]); /* absent matrices (no data) are skipped */
	}
	return 0;
}

int hs__fwd_cpu_open(struct hs_fwd *f)
{
	hs_runtime *rt = f->rt;
	const struct hs_whole *hw = hs__model_whole(rt->m);
	int rc;

	if (rt->cwhole) {
		f->w = rt->cwhole;
		return 0;
	}
	struct hs_whole *cw = calloc(1, sizeof *cw);
	if (!cw || !(cw->layers = calloc(hw->hp.n_layers, sizeof *cw->layers))) {
		free(cw);
		return hs__error(ENOMEM, "context: out of memory");
	}
	struct hs_dense_layer *layers = cw->layers;
	*cw = *hw;
	cw->layers = layers;
	memcpy(cw->layers, hw->layers, sizeof *cw->layers * (size_t)hw->hp.n_layers);
	struct arena a = { NULL, 0 };
	if ((rc = pack_all(f, cw, &a)))
		goto out_free;
	/* a buffer left by an open that failed half way: nothing points into it */
	hs__numa_free(rt->cwhole_buf, rt->cwhole_bytes);
	rt->cwhole_buf = NULL;
	if (a.used) {
		/* the buffer starts on a 2 MiB boundary (the mapping may not) */
		const size_t huge = (size_t)2 << 20, bytes = a.used + huge;
		uint8_t *p = hs__numa_alloc_on(rt->plan.cpu_node, bytes);
		if (!p) {
			rc = -ENOMEM;
			goto out_free;
		}
		/* freed at the runtime's close, as is what a failure below leaves */
		rt->cwhole_buf = p;
		rt->cwhole_bytes = bytes;
		a = (struct arena){ p + ((huge - (uintptr_t)p % huge) % huge), 0 };
		if ((rc = pack_all(f, cw, &a)))
			goto out_free;
	}
	rt->cwhole = cw;
	f->w = cw;
	return 0;
out_free:
	hs__whole_free(cw);
	return rc;
}
