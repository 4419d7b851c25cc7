/* The forward pass's reference backend: every op is its double-precision
 * `_ref` twin on the calling thread, weights dequantized, activations never
 * quantized, the KV cache in f32, and the MoE part by the reference MoE
 * forward (forward.c asks `reference`).  Slow and plain: the float path the
 * logits tests hold against an independent float64 implementation. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/forward.h"

static int r_alloc(struct hs_fwd *f, size_t bytes, void **p)
{
	(void)f;
	*p = aligned_alloc(64, bytes);
	if (!*p)
		return hs__error(ENOMEM, "context: out of memory for %zu bytes", bytes);
	return 0;
}

static void r_free(struct hs_fwd *f, void *p)
{
	(void)f;
	free(p);
}

static int r_copy(struct hs_fwd *f, void *dst, const void *src, size_t bytes)
{
	(void)f;
	if (dst != src && bytes)
		memmove(dst, src, bytes);
	return 0;
}

static int r_sync(struct hs_fwd *f)
{
	(void)f;
	return 0;
}

static size_t r_no_scratch(struct hs_fwd *f, int a, int b, int c)
{
	(void)f, (void)a, (void)b, (void)c;
	return 0;
}

static size_t r_no_attn_scratch(struct hs_fwd *f, int a, int b)
{
	(void)f, (void)a, (void)b;
	return 0;
}

static int r_matmul(struct hs_fwd *f, const struct hs_weight *w, const float *bias, int n, const float *x,
		    size_t x_stride, float *y, size_t y_stride)
{
	(void)f;
	struct hs_matmul_job job = { .type = w->type, .rows = w->rows, .cols = w->cols, .w = w->data,
				     .row_bytes = w->row_bytes, .bias = bias, .n = n, .x = x, .x_stride = x_stride,
				     .y = y, .y_stride = y_stride };
	return hs__matmul_ref(&job);
}

static int r_rmsnorm(struct hs_fwd *f, const float *x, size_t x_stride, float *y, size_t y_stride, int n, int n_head,
		     int dim, const float *w, float eps)
{
	(void)f;
	hs__rmsnorm_ref(x, x_stride, y, y_stride, n, n_head, dim, w, eps);
	return 0;
}

/* The angles from the positions themselves, not the ubatch's float table. */
static int r_rope(struct hs_fwd *f, float *x, size_t x_stride, int n, int n_head, int head_dim, int n_rot,
		  const float *cs)
{
	(void)cs, (void)n_rot;
	hs__rope_ref(&f->rope, x, x_stride, n, n_head, head_dim, f->hpos);
	return 0;
}

static int r_kv_store(struct hs_fwd *f, int type, const float *x, size_t x_stride, int n, int n_head_kv, int head_dim,
		      const int32_t *cells, uint8_t *dst, size_t cell_bytes, size_t head_bytes, int32_t *cell_pos,
		      const int32_t *pos)
{
	(void)f;
	if (type != HS_TYPE_F32)
		return hs__error(EINVAL, "reference KV cache: f32 only");
	for (int t = 0; t < n; t++)
		for (int h = 0; h < n_head_kv; h++)
			memcpy(dst + (size_t)cells[t] * cell_bytes + (size_t)h * head_bytes,
			       x + (size_t)t * x_stride + (size_t)h * head_dim, sizeof(float) * head_dim);
	if (cell_pos)
		for (int t = 0; t < n; t++)
			cell_pos[cells[t]] = pos[t];
	return 0;
}

static int r_attention(struct hs_fwd *f, struct hs_attn_job *job)
{
	(void)f;
	job->dops = &hs__dense_ref;
	job->n_split = 1;
	return hs__attention_ref(job);
}

static int r_add(struct hs_fwd *f, float *y, const float *x, size_t n)
{
	(void)f;
	for (size_t i = 0; i < n; i++)
		y[i] = (float)((double)y[i] + x[i]);
	return 0;
}

static int r_swiglu(struct hs_fwd *f, float *g, const float *u, size_t n)
{
	(void)f;
	hs__swiglu_ref(g, u, n);
	return 0;
}

const struct hs_fwd_be hs__fwd_ref = {
	.name = "ref",
	.reference = 1,
	.alloc = r_alloc,
	.free = r_free,
	.upload = r_copy,
	.download = r_copy,
	.matmul_scratch = r_no_scratch,
	.attn_scratch = r_no_attn_scratch,
	.matmul = r_matmul,
	.rmsnorm = r_rmsnorm,
	.rope = r_rope,
	.kv_store = r_kv_store,
	.attention = r_attention,
	.add = r_add,
	.swiglu = r_swiglu,
	.sync = r_sync,
};
