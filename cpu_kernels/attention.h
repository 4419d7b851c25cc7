/* Attention of n query tokens over one sequence's KV cache cells, and the
 * write of new K/V rows into cells.  Decode (n = 1) and prefill use the same
 * job.  See dense.h for the conventions (ops tables, slicing, scratch).
 *
 * The math, per token t and query head h (kv head h / (n_head / n_head_kv),
 * so consecutive query heads share a KV head, as ggml broadcasts them):
 *   cell c is visible iff cell_pos[c] >= 0, cell_pos[c] <= q_pos[t] and,
 *   with a window w > 0, q_pos[t] - cell_pos[c] < w;
 *   s_c = scale * q . K_c over visible cells;
 *   m = max(max_c s_c, sink_h), Z = sum_c e^(s_c - m) + e^(sink_h - m)
 *   (sink terms only with sinks; a sink is a logit, not scaled);
 *   out = sum_c e^(s_c - m) V_c / Z; out = 0 when nothing is visible and
 *   there is no sink.
 * The fast version keeps an online softmax in f32 (double in the scalar
 * set and in the reference). */
#ifndef HS_ATTENTION_H
#define HS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels/dense.h"

#define HS_ATTN_MAX_GROUP 64     /* query heads per KV head */
#define HS_ATTN_MAX_HEADS 256    /* query heads */
#define HS_ATTN_MAX_VALUES 16384 /* query heads x head_dim (the step's 64 KiB of state) */
#define HS_ATTN_MAX_HEAD_DIM 512
#define HS_ATTN_BLOCK_VALUES 4096 /* cells x head_dim a SIMD attend converts at once (16 KiB) */

/* K/V cells: the row of cell c and KV head h (head_dim values of kv_type,
 * F16 or Q8_0 with 32-value blocks along head_dim) starts at
 * k + c * k_cell + h * k_head (bytes), V likewise.  Any layout fits:
 * [cell][head][dim] (k_head = row bytes, k_cell = n_head_kv * row bytes, as
 * llama.cpp's cache; fast here too, the next cells are prefetched) or
 * [head][cell][dim].  Rows must be 2-byte aligned (F16 values, Q8_0 scales). */
struct hs_attn_job {
	const struct hs_dense_ops *dops;
	int n, n_head, n_head_kv, head_dim;
	const float *q; /* token t, head h at q + t * q_stride + h * head_dim (roped) */
	size_t q_stride;
	const int32_t *q_pos; /* [n] positions of the query tokens */
	int kv_type;          /* HS_TYPE_F16 or HS_TYPE_Q8_0 */
	const uint8_t *k, *v;
	size_t k_cell, k_head, v_cell, v_head;
	int n_cells;
	const int32_t *cell_pos; /* [n_cells] position held by each cell, -1 = empty */
	int window;              /* sliding window in positions, 0 = none */
	const float *sinks;      /* [n_head] sink logits, or NULL */
	float scale;             /* usually 1 / sqrt(head_dim) */
	float *out;              /* token t, head h at out + t * out_stride + h * head_dim */
	size_t out_stride;
	int n_split;   /* cell ranges per token; 0 or 1 = one (hs__attn_pick_split) */
	void *scratch; /* hs__attn_scratch_bytes(n, n_head, head_dim, n_split) */
	float *part;   /* by prepare: partial results when n_split > 1 */
};

/* A good n_split for nth threads: 1 when the tokens keep every thread
 * busy (n >= 2 nth), else enough cell ranges (each >= 256 cells) for about
 * two items per thread.  Decode needs it. */
int hs__attn_pick_split(int n, int n_cells, int nth);
/* 0 when n_split <= 1; else n_split partial (max, sum, head_dim values)
 * per token and query head. */
size_t hs__attn_scratch_bytes(int n, int n_head, int head_dim, int n_split);
/* Checks the job (kv_type; head_dim a multiple of 8 (32 for Q8_0), at
 * most 512; n_head a multiple of n_head_kv, at most 256 query heads, 64
 * per KV head and 16384 values in all; n, n_cells, window >= 0) and carves
 * the scratch.  -EINVAL. */
int hs__attn_prepare(struct hs_attn_job *job);
/* Work items are (token, cell range): one pass over the range's visible
 * cells for all heads, 32 cells at a time through every KV head (the
 * query heads of a KV head together), so K and V are read once per token,
 * not once per query head, and each 32-cell piece stays in cache while
 * every KV head reads it, whatever the layout; the next piece is
 * prefetched.  Prefill (n >= 8, one range) with dops->attend_span takes
 * items of up to 32 consecutive tokens instead, one KV head at a time, so
 * each cell's K and V rows are converted once per item, not per token.
 * Items go to threads by an estimate of their visible cells,
 * so causal prefill spreads evenly.
 * With n_split <= 1 step writes out; else partials, and step_merge (after
 * a barrier, on every thread) combines them and writes out, (token, head)
 * rows split over threads.  Reads q, q_pos, cell_pos, sinks and K/V rows
 * of visible cells only (other cells are at most prefetched: garbage or
 * NaN there never reaches the result). */
void hs__attn_step(struct hs_attn_job *job, int ith, int nth);
void hs__attn_step_merge(struct hs_attn_job *job, int ith, int nth);
int hs__attn_run_omp(struct hs_attn_job *job, int nthreads);
/* The same in double, with a plain (two-pass) softmax; it also reads
 * F32 cells (the float path of the forward pass).  -EINVAL, -ENOMEM. */
int hs__attention_ref(const struct hs_attn_job *job);

/* One piece of work as the inner loop sees it (dops->attend): the g query
 * heads q + i * head_dim (i < g) of one token against the cells of
 * [c0, c1) of one KV head whose positions lie in [pos_lo, pos_hi].  It
 * updates the unnormalised online-softmax state of those heads: m[i] = max
 * of the scaled scores so far (-inf: none yet), l[i] = sum e^(s - m),
 * o[i * head_dim ...] = sum e^(s - m) V; start it at (-inf, 0, 0). */
struct hs_attn_tile {
	int g, head_dim, kv_type;
	const float *q;
	float scale;
	const uint8_t *k, *v; /* already at the KV head */
	size_t k_cell, v_cell;
	const int32_t *cell_pos;
	int c0, c1;
	int32_t pos_lo, pos_hi;
	float *m, *l, *o;
};

/* The same for n query tokens at once (dops->attend_span, prefill): token
 * i's g heads at q + i * q_stride + j * head_dim see the cells of [c0, c1)
 * whose positions lie in [pos_lo[i], pos_hi[i]]; their state is m[i * g +
 * j], l[i * g + j], o[(i * g + j) * head_dim ...], as a tile's. */
struct hs_attn_span {
	int n, g, head_dim, kv_type;
	const float *q;
	size_t q_stride;
	float scale;
	const uint8_t *k, *v; /* already at the KV head */
	size_t k_cell, v_cell;
	const int32_t *cell_pos;
	int c0, c1;
	const int32_t *pos_lo, *pos_hi;
	float *m, *l, *o;
};

/* A span one token at a time through a tile's attend (the span kernels'
 * way for head widths they do not take). */
void hs__attend_span_tokens(const struct hs_attn_span *t, void (*attend)(const struct hs_attn_tile *));

/* ---- K/V write -----------------------------------------------------------
 * For each token t < n and KV head h < n_head_kv: the head_dim floats at
 * x + t * x_stride + h * head_dim are stored, as `type` (F16, or Q8_0
 * quantized with ops->quantize_q8_0, round half to even), at
 * dst + cells[t] * cell_bytes + h * head_bytes.  Use it once for K (after
 * RoPE) and once for V; the caller sets cell_pos.  (token, head) rows split
 * over threads. */
void hs__kv_store(const struct hs_kernel_ops *ops, const struct hs_dense_ops *dops, int type, const float *x,
		  size_t x_stride, int n, int n_head_kv, int head_dim, const int32_t *cells, uint8_t *dst,
		  size_t cell_bytes, size_t head_bytes, int ith, int nth);
void hs__kv_store_omp(const struct hs_kernel_ops *ops, const struct hs_dense_ops *dops, int type, const float *x,
		      size_t x_stride, int n, int n_head_kv, int head_dim, const int32_t *cells, uint8_t *dst,
		      size_t cell_bytes, size_t head_bytes, int nthreads);

#endif
