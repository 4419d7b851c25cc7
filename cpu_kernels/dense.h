/* Dense CPU ops of the whole-model forward pass (gpt-oss, Qwen3-MoE):
 * matrix products with the dense weights, embedding rows, RMSNorm and RoPE
 * (NEOX, with YaRN).  Attention and the K/V write are in attention.h, the
 * router in router.h, sampling in sample.h.
 *
 * Each op has a scalar double-precision `_ref` twin (whole op, one thread,
 * plain loops: the oracle) and a fast version built on an inner-loop table
 * (struct hs_dense_ops: scalar, AVX2 or AVX-512, chosen at run time).  Fast
 * ops take (ith, nth) and touch only their own share, so any pool can run
 * them; nothing inside allocates, starts threads or locks.  Scratch comes
 * from the caller, sized by the op's *_scratch_bytes(), 64-byte aligned.
 *
 * Layout words used below: a "row" is n values of one type, contiguous; a
 * "stride" is the distance between consecutive tokens' rows, in floats for
 * float arrays and in bytes for weight and cache rows. */
#ifndef HS_DENSE_H
#define HS_DENSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu_kernels/kernels.h"

struct hs_attn_tile;
struct hs_attn_span;
struct hs_dn_job;

/* Inner loops of one instruction tier.  The scalar set (hs__dense_ref)
 * computes in double where it is arithmetic; the SIMD sets in float (see
 * each op's bound in its test). */
/* The read probe's prefetch distance.  On the 2-core Xeon VM a plain
 * stream of 32-byte loads read 26-27.5 GB/s on 2 cores (13-14 on one),
 * the same loop prefetching into L2 2-3 KiB ahead 31-33 (16-17): without
 * it the probe called a sixth of the memory's bandwidth missing (1 KiB
 * ahead 29-30, 4-16 KiB 28.5-29.5; docs/kernels.md). */
#define HS_READ_AHEAD 3072

struct hs_dense_ops {
	const char *name;
	/* out[j][r - r0] = row r of w . x[j] for rows [r0, r1), j < nt; rows of
	 * ncols values of type F32, F16 or BF16, row_bytes apart; x[j] f32. */
	void (*tile_f)(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols, const float *const *x,
		       int nt, float *const *out);
	/* n values of a row of any hotset type to f32 (exact for every type). */
	void (*dequant_row)(int type, const void *src, float *dst, int n);
	/* y = x / sqrt(mean(x^2) + eps) * w over n values (w NULL: no weight);
	 * y may be x. */
	void (*rmsnorm_row)(const float *x, float *y, int n, const float *w, float eps);
	/* x[i], x[i + n_rot/2] rotated by (cs[i], cs[n_rot/2 + i]) = (cos, sin)
	 * for i < n_rot/2, in place. */
	void (*rope_row)(float *x, int n_rot, const float *cs);
	/* f32 -> f16, round to nearest even. */
	void (*to_f16)(const float *x, uint16_t *y, int n);
	/* One attention work item (attention.h): g query heads of one token
	 * against the visible cells of [c0, c1) of one KV head. */
	void (*attend)(const struct hs_attn_tile *t);
	/* Several query tokens of prefill against one KV head's cells at once
	 * (attention.h), so each cell's K and V rows are converted once for
	 * all of them; NULL in a set without it (attend per token then). */
	void (*attend_span)(const struct hs_attn_span *s);
	/* Gated DeltaNet's chunked delta rule, thread ith's share (deltanet.h). */
	void (*dn_chunk)(const struct hs_dn_job *j, int ith, int nth);
	/* Every 8-byte word of p XORed together (p 32-byte aligned, bytes a
	 * multiple of 128): the read-bandwidth probe's loop (measure/).  With
	 * ahead > 0 it also prefetches into L2 that many bytes ahead of its
	 * loads, never past p + bytes: the probe tries both (HS_READ_AHEAD)
	 * and keeps the faster, so that it finds the memory's limit, not one
	 * loop's. */
	uint64_t (*xor_read)(const void *p, size_t bytes, size_t ahead);
};

extern const struct hs_dense_ops hs__dense_ref;
/* The AVX2 / AVX-512 sets, or NULL in a build without them. */
const struct hs_dense_ops *hs__dense_avx2(void);
const struct hs_dense_ops *hs__dense_avx512(void);
/* The fastest set this CPU runs (hs__dense_ref when HS_USE_REF=1). */
const struct hs_dense_ops *hs__dense_best(void);

/* ---- matrix products: y[t][r] = W[r] . x[t] (+ bias[r]) ------------------
 * W: `rows` rows of `cols` values of `type` (F32, F16, BF16, Q8_0, MXFP4),
 * row_bytes apart.  x: n tokens of cols floats, x_stride apart; y: n
 * tokens of rows floats, y_stride apart (y must not overlap x).
 *
 * Q8_0 and MXFP4 weights: the activations are quantized to Q8_0 once
 * (step_quantize, into scratch) and the products run on ops->tile_q, the
 * precision llama.cpp's CPU backend has.  F32/F16/BF16 weights: activations
 * stay f32 (dops->tile_f), more accurate than llama.cpp (which rounds them
 * to f16).
 *
 * Slicing: step_mul cuts the rows into blocks and the tokens into chunks of
 * up to 64; a thread takes a contiguous run of (row block, token chunk)
 * items in row-block-major order, so every weight block is read from memory
 * once and reused from cache by every token of the chunk (prefill: blocks
 * of 64 rows).  Decode (n = 1) streams the weights, one sequential stream
 * per row; about 8 blocks per thread, so threads get near-equal row counts.
 * The caller runs step_quantize on every thread, a barrier, step_mul on
 * every thread (or hs__matmul_run_omp). */
struct hs_matmul_job {
	const struct hs_kernel_ops *ops; /* tile_q, quantize_q8_0 */
	const struct hs_dense_ops *dops; /* tile_f */
	int type, rows, cols;
	const uint8_t *w;
	size_t row_bytes;
	int packed;        /* w is in the row-interleaved layout (repack.h; Q8_0, MXFP4 or Q4_K,
			      rows a multiple of 16): the products run on ops->tile_q_packed */
	const float *bias; /* [rows] or NULL */
	int n;
	const float *x;
	size_t x_stride;
	float *y;
	size_t y_stride;
	void *scratch;            /* hs__matmul_scratch_bytes(type, cols, n) */
	struct hs_block_q8_0 *xq; /* by prepare: [n][cols / 32] or NULL */
};

size_t hs__matmul_scratch_bytes(int type, int cols, int n);
/* Checks the job (type, cols a multiple of the block, row_bytes, n >= 0,
 * strides) and carves the scratch; single-threaded, cheap.  -EINVAL. */
int hs__matmul_prepare(struct hs_matmul_job *job);
/* Quantizes x for Q8_0/MXFP4 weights (tokens split over threads). */
void hs__matmul_step_quantize(struct hs_matmul_job *job, int ith, int nth);
/* The products and the bias; after a barrier following step_quantize. */
void hs__matmul_step_mul(struct hs_matmul_job *job, int ith, int nth);
/* prepare + both steps on nthreads OpenMP threads (<= 0: OpenMP's default). */
int hs__matmul_run_omp(struct hs_matmul_job *job, int nthreads);
/* The same product in double: rows dequantized, activations as given (not
 * quantized), y rounded once.  -EINVAL, -ENOMEM. */
int hs__matmul_ref(const struct hs_matmul_job *job);

/* ---- embedding rows -------------------------------------------------------
 * y[t] = row ids[t] of W as f32 (exact) for t in [0, n); ids must be in
 * [0, rows): the caller checks token ids.  Tokens split over threads. */
void hs__get_rows(const struct hs_dense_ops *dops, int type, const uint8_t *w, size_t row_bytes, int cols, int n,
		  const int32_t *ids, float *y, size_t y_stride, int ith, int nth);
void hs__get_rows_ref(int type, const uint8_t *w, size_t row_bytes, int cols, int n, const int32_t *ids, float *y,
		      size_t y_stride);

/* ---- RMSNorm ----------------------------------------------------------------
 * For each token t < n and head h < n_head: the dim values at
 * x + t * x_stride + h * dim become y = x / sqrt(mean(x^2) + eps) * w
 * (w [dim] shared by all heads, or NULL) at y + t * y_stride + h * dim.
 * n_head = 1 is the plain norm over the hidden state; the per-head form is
 * Qwen3's q/k norm over head_dim.  In place when y == x.  The n * n_head
 * rows are split into contiguous runs over threads. */
void hs__rmsnorm(const struct hs_dense_ops *dops, const float *x, size_t x_stride, float *y, size_t y_stride, int n,
		 int n_head, int dim, const float *w, float eps, int ith, int nth);
void hs__rmsnorm_ref(const float *x, size_t x_stride, float *y, size_t y_stride, int n, int n_head, int dim,
		     const float *w, float eps);

/* ---- RoPE, NEOX layout (dims i and i + n_rot/2 rotate together) ----------
 * As ggml's rope for a position p and pair i < n_rot/2:
 *   theta_extrap = p * freq_base^(-2i / n_rot), theta_interp = freq_scale * theta_extrap
 *   ext_factor = 0: theta = theta_interp, magnitude attn_factor
 *   else: mix = ext_factor * (1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)),
 *         theta = theta_interp * (1 - mix) + theta_extrap * mix,
 *         magnitude attn_factor * (1 + 0.1 ln(1 / freq_scale))
 *   (lo, hi) = (max(0, floor(c(beta_fast))), min(n_rot - 1, ceil(c(beta_slow)))),
 *   c(b) = n_rot ln(n_ctx_orig / (2 pi b)) / (2 ln freq_base), in float as ggml.
 * x[i] and x[i + n_rot/2] become x0 cos - x1 sin and x0 sin + x1 cos
 * (cos and sin times the magnitude); dims from n_rot on are left alone.
 *
 * gpt-oss (rope.scaling.type yarn): freq_scale = 1 / factor, ext_factor 1,
 * attn_factor 1 (llama.cpp's context computes a YaRN attn_factor and then
 * cancels it against the factor ggml's rope applies, so what reaches cos and
 * sin is 1 + 0.1 ln(factor), times rope.scaling.attn_factor when a file
 * sets it), beta_fast 32, beta_slow 1, n_ctx_orig =
 * rope.scaling.original_context_length.  Qwen3 without scaling:
 * freq_scale 1, ext_factor 0, attn_factor 1. */
struct hs_rope {
	int n_rot;
	float freq_base, freq_scale, ext_factor, attn_factor;
	float corr_lo, corr_hi; /* the ramp bounds, by hs__rope_init */
};
/* Fills r; -EINVAL unless n_rot is even and > 0, freq_base > 1,
 * freq_scale > 0. */
int hs__rope_init(struct hs_rope *r, int n_rot, float freq_base, float freq_scale, float ext_factor, float attn_factor,
		  float beta_fast, float beta_slow, int n_ctx_orig);
/* cs[0 .. n_rot/2) = cos, cs[n_rot/2 .. n_rot) = sin (magnitude included)
 * for one position, computed in double and rounded once.  Fill a table of
 * n tokens once per ubatch and apply it to q and k of every layer. */
void hs__rope_fill(const struct hs_rope *r, int32_t pos, float *cs);
/* cs[t * n_rot ...] for t < n, tokens split over threads. */
void hs__rope_fill_n(const struct hs_rope *r, int n, const int32_t *pos, float *cs, int ith, int nth);
/* Rotates, in place, the n_head heads (head_dim floats apart, the first
 * n_rot dims of each) of n tokens (x_stride apart) with token t's table
 * cs + t * n_rot.  The n * n_head head rows are split over threads. */
void hs__rope_apply(const struct hs_dense_ops *dops, int n_rot, float *x, size_t x_stride, int n, int n_head,
		    int head_dim, const float *cs, int ith, int nth);
/* The whole rotation in double, angles from pos directly. */
void hs__rope_ref(const struct hs_rope *r, float *x, size_t x_stride, int n, int n_head, int head_dim,
		  const int32_t *pos);

/* ---- SwiGLU of a dense FFN (glm4moe's dense layers and shared experts) ----
 * g[i] = silu(g[i]) * u[i] for i < n (moe.h's hs__act_silu_mul_f), the
 * items split into contiguous runs over threads. */
void hs__swiglu(float *g, const float *u, size_t n, int ith, int nth);
/* The same in double (hs__act_silu_mul), rounded once. */
void hs__swiglu_ref(float *g, const float *u, size_t n);

/* ---- OpenMP drivers of the single-step ops (tests, benchmarks) ----------- */
void hs__get_rows_omp(const struct hs_dense_ops *dops, int type, const uint8_t *w, size_t row_bytes, int cols, int n,
		      const int32_t *ids, float *y, size_t y_stride, int nthreads);
void hs__rmsnorm_omp(const struct hs_dense_ops *dops, const float *x, size_t x_stride, float *y, size_t y_stride, int n,
		     int n_head, int dim, const float *w, float eps, int nthreads);
void hs__rope_apply_omp(const struct hs_dense_ops *dops, int n_rot, float *x, size_t x_stride, int n, int n_head,
			int head_dim, const float *cs, int nthreads);
void hs__rope_fill_omp(const struct hs_rope *r, int n, const int32_t *pos, float *cs, int nthreads);

/* Runs a(job, ith, nth), a barrier, then b(job, ith, nth) when b is not
 * NULL, on nthreads OpenMP threads (<= 0: OpenMP's default). */
void hs__omp_steps(void *job, void (*a)(void *, int, int), void (*b)(void *, int, int), int nthreads);

/* Value c of a row of type F32, F16 or BF16 (the SIMD loops' tails). */
static inline float hs__dense_elem(int type, const uint8_t *row, int c)
{
	uint16_t h;
	float f;

	if (type == HS_TYPE_F32) {
		memcpy(&f, row + 4 * (size_t)c, 4);
		return f;
	}
	memcpy(&h, row + 2 * (size_t)c, 2);
	return type == HS_TYPE_F16 ? hs__fp16_to_fp32(h) : hs__bf16_to_fp32(h);
}

/* Contiguous share [*lo, *hi) of `total` items for thread ith of nth. */
static inline void hs__share(long total, int ith, int nth, long *lo, long *hi)
{
	*lo = total * ith / nth;
	*hi = total * (ith + 1) / nth;
}

#endif
