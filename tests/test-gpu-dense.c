/* Checks the CUDA dense ops (gpu_kernels/dense.cu) against the CPU ops'
 * double-precision twins over a grid of awkward shapes.  Built twice:
 *  - test-gpu-emu-dense: without a GPU, through hs__cuda_*_emulate, which
 *    run the kernels' own __host__ __device__ arithmetic in their lane,
 *    warp, tile and cell-range decomposition on the CPU; SKIP in a build
 *    without CUDA;
 *  - test-device-dense (HS_TEST_ON_DEVICE): the same cases through the ops
 *    table of the backend $HS_TEST_DEVICE (sim by default, cuda on a GPU:
 *    bench/gpu-check.sh), device memory and copies included: what the
 *    emulation cannot see (launch geometry, shuffles, cuBLAS).
 *
 * Bounds (normalised L2 error ||got - ref|| / ||ref||), those of
 * tests/test-dense.c and test-attention.c for the same arithmetic:
 *  - float-weight products with f32 activations (GEMV, tiles, F32 through
 *    cuBLAS): 1e-5;
 *  - block-type products (Q8_0, MXFP4, and on plain rows the K-quants,
 *    IQ4_XS/NL, Q4_0..Q5_1; activations quantized to Q8_0 as the CPU op
 *    does): 1e-5 against the double product of the rounded activations
 *    (the same integer dots and scales, only the float order differs), 3e-2
 *    against the unrounded ones (where there are 64 outputs or more);
 *    rows of the byte-read types at odd addresses give the same bits;
 *  - the cuBLAS path with F16/BF16 weights rounds the activations to that
 *    type (u = 2^-11, 2^-8 per value): 1e-3 and 8e-3 against the unrounded
 *    product, 1e-5 against the product of the rounded ones (emulation);
 *  - RMSNorm 1e-5, RoPE 1e-6 (the table rounded once from double, two
 *    products and an add), attention 5e-5 (online softmax in f32);
 *  - K/V write and y += x: bit for bit (the same f16 rounding and the same
 *    Q8_0 quantizer, round half to even);
 *  - SwiGLU g = silu(g) u (glm4moe's dense FFNs): 1e-6 against the double
 *    twin (one expf, a division and two products in float);
 *  - qwen35moe's DeltaNet mixer (convolution, prep, delta rule, gated
 *    norm) from nonzero states: output and delta-rule state 1e-4 against
 *    the double twins (a float recurrence over up to 70 tokens), the
 *    convolution state bit for bit (it is copied inputs), and one call per
 *    token against one call for all 1e-4 (the sim's step and chunk forms
 *    differ in float order); refused arguments write nothing.
 * Every output is followed by guard bytes; strided outputs' gaps, cells not
 * written and values past n_rot must keep what was there.
 *
 * Mutations of the CUDA arithmetic tried, each caught by the case named:
 * see docs/device.md. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/attention.h"
#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/dense.h"
#include "device/device-cuda.h"
#include "device/device.h"
#include "gpu_kernels/scratch.h"
#include "hotset.h"
#include "tests/dense-util.h"
#include "tests/device-util.h"
#include "tests/hs-test.h"

#define SENTINEL 0x7f /* a NaN pattern in the gaps of strided outputs */

static int small;
static double worst[16];
enum { W_MMF, W_MMQT, W_MMQL, W_MMKT, W_MMKL, W_BLAS16, W_BLAS16L, W_NORM, W_ROPE, W_ATTN, W_DN };

static void note(int k, double e)
{
	worst[k] = e > worst[k] ? e : worst[k];
}

/* ---- where the ops run: emulation, or a device's ops table ------------------ */

static const struct hs_dev_ops *O;     /* device mode */
static struct hs_device *dev;
static hs_queue *q;
static void *dptr[16];
static int n_dptr;

/* A device copy of bytes of host memory (NULL: NULL). */
static void *up(const void *h, size_t bytes)
{
	void *d = NULL;
	if (!h)
		return NULL;
	if (O->alloc(dev->dev, bytes ? bytes : 1, &d)) {
		CHECK(0, "device alloc of %zu bytes: %s", bytes, hs_last_error());
		exit(hs_test_end());
	}
	if (bytes)
		CHECK(O->copy_h2d(q, d, h, bytes) == 0, "upload: %s", hs_last_error());
	dptr[n_dptr++] = d;
	return d;
}

static void down(void *h, const void *d, size_t bytes)
{
	CHECK(O->queue_sync(q) == 0, "device op: %s", hs_last_error());
	if (bytes)
		CHECK(O->copy_d2h(q, h, d, bytes) == 0 && O->queue_sync(q) == 0, "download: %s", hs_last_error());
}

static void drop_all(void)
{
	for (int i = 0; i < n_dptr; i++)
		O->free(dev->dev, dptr[i]);
	n_dptr = 0;
}

#ifdef HS_TEST_ON_DEVICE
static const int on_device = 1;
#else
static const int on_device = 0;
#endif

/* ---- matrix products -------------------------------------------------------------- */

static void q8_roundtrip(const float *x, float *xd, int n, size_t xs, int cols)
{
	struct hs_block_q8_0 *b = malloc(sizeof *b * (size_t)(cols / HS_QK));
	for (int t = 0; t < n; t++) {
		hs__kernels_ref.quantize_q8_0(x + (size_t)t * xs, b, cols);
		hs__dequantize_row_ref(HS_TYPE_Q8_0, b, xd + (size_t)t * xs, (size_t)cols);
	}
	free(b);
}

/* x rounded to f16 or bf16 and back */
static void r16_roundtrip(int type, const float *x, float *xd, int n, size_t xs, int cols)
{
	for (int t = 0; t < n; t++)
		for (int c = 0; c < cols; c++) {
			const float v = x[(size_t)t * xs + c];
			xd[(size_t)t * xs + c] = type == HS_TYPE_F16 ? hs__fp16_to_fp32(hs__fp32_to_fp16(v))
								     : hs__bf16_to_fp32(hs__fp32_to_bf16(v));
		}
}

static int gaps_ok(const float *y, int n, size_t stride, int len)
{
	const uint8_t *b = (const uint8_t *)y;
	for (int t = 0; t + 1 < n; t++)
		for (size_t i = (size_t)t * stride + len; i < (size_t)(t + 1) * stride; i++)
			for (int k = 0; k < 4; k++)
				if (b[i * 4 + k] != SENTINEL)
					return 0;
	return 1;
}

static const char *path_name(int p)
{
	static const char *const names[] = { "auto", "gemv", "tile", "cublas" };
	return on_device ? O->name : names[p];
}

static void run_matmul(struct hs_dev_matmul *m, int path, size_t ny)
{
	const size_t sb = on_device ? O->matmul_scratch_bytes(m->type, m->cols, m->n)
				    : (size_t)m->n * m->cols * 2 + (size_t)m->n * (m->cols / 32) * 34 + 64;
	void *scratch = sb ? malloc(sb) : NULL;
	m->scratch = scratch;
	if (!on_device) {
		CHECK(hs__cuda_matmul_emulate(m, path) == 0, "%s", hs_last_error());
		free(scratch);
		return;
	}
	struct hs_dev_matmul d = *m;
	d.w = up(m->w, (size_t)m->rows * m->row_bytes);
	d.bias = up(m->bias, sizeof(float) * m->rows);
	d.x = up(m->x, sizeof(float) * ((size_t)(m->n - 1) * m->x_stride + m->cols));
	d.y = up(m->y, sizeof(float) * ny);
	d.scratch = sb ? up(scratch, sb) : NULL;
	CHECK(O->matmul(q, &d) == 0, "%s", hs_last_error());
	down(m->y, d.y, sizeof(float) * ny);
	drop_all();
	free(scratch);
}

static void ab_matmul(int type, int rows, int cols, int n, int bias, int pad, int path)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols) + (size_t)pad * 4;
	const size_t xs = (size_t)cols + (size_t)pad, ys = (size_t)rows + (size_t)pad;
	const size_t ny = (size_t)(n - 1) * ys + rows;
	const int quant = hs__gpu_type_quantized(type);
	/* on a device the float products of prefill may go through cuBLAS */
	const int r16 = (type == HS_TYPE_F16 || type == HS_TYPE_BF16) &&
			(path == 3 || (on_device && n > HS_GPU_GEMV_MAX_TOKENS));
	uint8_t *w = du_matrix(type, rows, cols, rb);
	float *x = du_alloc(sizeof(float) * n * xs), *xd = du_alloc(sizeof(float) * n * xs);
	float *b = du_alloc(sizeof(float) * rows), *y_ref = du_alloc(sizeof(float) * ny);
	float *y_r = du_alloc(sizeof(float) * ny), *y = du_alloc(sizeof(float) * ny);
	int nan = 0;

	du_fill(x, n * xs, 0, 1);
	du_fill(b, rows, 0, 0.1f);
	struct hs_matmul_job j = { .type = type, .rows = rows, .cols = cols, .w = w, .row_bytes = rb,
				   .bias = bias ? b : NULL, .n = n, .x = x, .x_stride = xs, .y = y_ref, .y_stride = ys };
	CHECK(hs__matmul_ref(&j) == 0, "matmul reference: %s", hs_last_error());
	if (quant || r16) {
		if (quant)
			q8_roundtrip(x, xd, n, xs, cols);
		else
			r16_roundtrip(type, x, xd, n, xs, cols);
		j.x = xd;
		j.y = y_r;
		CHECK(hs__matmul_ref(&j) == 0, "matmul reference: %s", hs_last_error());
	}
	memset(y, SENTINEL, sizeof(float) * ny);
	struct hs_dev_matmul m = { .type = type, .rows = rows, .cols = cols, .w = w, .row_bytes = rb,
				   .bias = bias ? b : NULL, .n = n, .x = x, .x_stride = xs, .y = y, .y_stride = ys };
	run_matmul(&m, path, ny);
	CHECK(gaps_ok(y, n, ys, rows) && du_guard_ok(y, sizeof(float) * ny), "matmul %s %s %dx%d n%d wrote outside its rows",
	      path_name(path), hs__type_name(type), rows, cols, n);
	const double e = du_rel_l2_rows(y, y_ref, n, ys, rows, &nan);
	const double er = quant || r16 ? du_rel_l2_rows(y, y_r, n, ys, rows, &nan) : 0;
	const int many = (long)rows * n >= 64; /* a few dot products can cancel: loose bounds hold over many */
	if (quant) {
		/* one or a few dots of the types with mins (s dot - m sum) can cancel
		 * to a small value whose float rounding is then a larger share of it
		 * (1.6e-5 seen for one Q5_1 dot of 32 in the sanitizer build) */
		CHECK(er <= (many ? 1e-5 : 1e-4) && (!many || e <= 3e-2) && !nan,
		      "matmul %s %s %dx%d n%d: %.3g against rounded x (%g), %.3g against x (3e-2), %d NaN",
		      path_name(path), hs__type_name(type), rows, cols, n, er, many ? 1e-5 : 1e-4, e, nan);
		const int split = type != HS_TYPE_Q8_0 && type != HS_TYPE_MXFP4; /* per-half scales and mins */
		note(split ? W_MMKT : W_MMQT, er);
		if (many)
			note(split ? W_MMKL : W_MMQL, e);
	} else if (r16) {
		const double loose = type == HS_TYPE_F16 ? 1e-3 : 8e-3;
		/* on a device the path is its own choice: the rounded product is the emulation's claim only */
		CHECK((on_device || er <= 1e-5) && (!many || e <= loose) && !nan,
		      "matmul %s %s %dx%d n%d: %.3g against rounded x (1e-5), %.3g against x (%g), %d NaN",
		      path_name(path), hs__type_name(type), rows, cols, n, er, e, loose, nan);
		if (!on_device)
			note(W_BLAS16, er);
		if (many)
			note(W_BLAS16L, e);
	} else {
		CHECK(e <= 1e-5 && !nan, "matmul %s %s %dx%d n%d: error %.3g (bound 1e-5), %d NaN", path_name(path),
		      hs__type_name(type), rows, cols, n, e, nan);
		note(W_MMF, e);
	}
	free(w);
	free(x);
	free(xd);
	free(b);
	free(y_ref);
	free(y_r);
	free(y);
}

static void test_matmul(void)
{
	static const int types[] = { HS_TYPE_F32,  HS_TYPE_F16,  HS_TYPE_BF16, HS_TYPE_Q8_0,  HS_TYPE_MXFP4,
				     HS_TYPE_Q4_0, HS_TYPE_Q4_1, HS_TYPE_Q5_0, HS_TYPE_Q5_1,  HS_TYPE_IQ4_NL,
				     HS_TYPE_Q2_K, HS_TYPE_Q3_K, HS_TYPE_Q4_K, HS_TYPE_Q5_K,  HS_TYPE_Q6_K,
				     HS_TYPE_IQ4_XS };
	static const int fshape[5][2] = { { 1, 7 }, { 5, 36 }, { 70, 100 }, { 129, 256 }, { 33, 2880 } };
	static const int qshape[5][2] = { { 1, 32 }, { 5, 64 }, { 70, 96 }, { 129, 256 }, { 33, 2880 } };
	/* super-blocks of 256: one, two, three, and many (2816 = 11 x 256) */
	static const int kshape[5][2] = { { 1, 256 }, { 5, 512 }, { 70, 256 }, { 129, 768 }, { 33, 2816 } };
	static const int ns[7] = { 1, 2, 5, 8, 9, 33, 70 };
	const int nt = (int)(sizeof types / sizeof types[0]);

	for (int t = 0; t < nt; t++)
		for (int s = 0; s < 5; s++)
			for (int k = 0; k < 7; k++) {
				const int quant = hs__gpu_type_quantized(types[t]);
				const int(*sh)[2] = hs__type_block_values(types[t]) == 256 ? kshape : quant ? qshape : fshape;
				/* the types past MXFP4 share one decoder path each: fewer token counts */
				if ((small && (k % 2 || s == 4)) || (t > 4 && (k == 1 || k == 3)))
					continue;
				/* row padding comes in 4-byte steps: the rows stay aligned for every type */
				const int bias = (s + k) % 2, pad = (s * k) % 3;
				if (on_device) {
					ab_matmul(types[t], sh[s][0], sh[s][1], ns[k], bias, pad, 0);
					continue;
				}
				/* emulation: the launch's own choice, and each kernel on every size it takes */
				ab_matmul(types[t], sh[s][0], sh[s][1], ns[k], bias, pad, 0);
				if (ns[k] <= HS_GPU_GEMV_MAX_TOKENS) /* the tiles with a few tokens too */
					ab_matmul(types[t], sh[s][0], sh[s][1], ns[k], bias, pad, 2);
				if (!quant)
					ab_matmul(types[t], sh[s][0], sh[s][1], ns[k], bias, pad, 3);
			}
	/* decode-sized products over many rows; a prefill past one tile of tokens */
	ab_matmul(HS_TYPE_Q8_0, 1001, 64, 1, 1, 0, 0);
	ab_matmul(HS_TYPE_F16, 1001, 64, 1, 0, 1, 0);
	if (!small) {
		ab_matmul(HS_TYPE_Q8_0, 200, 2880, 100, 1, 0, 0);
		ab_matmul(HS_TYPE_BF16, 150, 640, 100, 0, 0, 0);
	}
	printf("matmul: worst error float %.3g (1e-5); q8_0/mxfp4 %.3g against rounded x (1e-5), %.3g against x (3e-2); "
	       "other block types %.3g against rounded x (1e-5), %.3g against x (3e-2)",
	       worst[W_MMF], worst[W_MMQT], worst[W_MMQL], worst[W_MMKT], worst[W_MMKL]);
	if (on_device)
		printf("; f16/bf16 prefill %.3g against x\n", worst[W_BLAS16L]);
	else
		printf("; cuBLAS path f16/bf16 %.3g against rounded x (1e-5), %.3g against x (1e-3 / 8e-3)\n",
		       worst[W_BLAS16], worst[W_BLAS16L]);

	if (on_device)
		return;
	/* bad jobs are refused, as the device would refuse them */
	uint8_t w[64] = { 0 };
	float x[64] = { 0 }, y[8];
	struct hs_dev_matmul m = { .type = HS_TYPE_Q8_0, .rows = 1, .cols = 40, .w = w, .row_bytes = 34, .n = 1,
				   .x = x, .y = y };
	CHECK(hs__cuda_matmul_emulate(&m, 0) == -EINVAL, "40 columns of q8_0 accepted");
	m.cols = 32;
	m.w = w + 1;
	CHECK(hs__cuda_matmul_emulate(&m, 0) == -EINVAL, "q8_0 rows at an odd address accepted");
	m.w = w;
	m.scratch = NULL;
	CHECK(hs__cuda_matmul_emulate(&m, 0) == -EINVAL, "q8_0 without scratch accepted");
	m.scratch = x;
	CHECK(hs__cuda_matmul_emulate(&m, 3) == -EINVAL, "the cuBLAS path with q8_0 weights accepted");
	m.type = HS_TYPE_F32;
	m.row_bytes = 130;
	CHECK(hs__cuda_matmul_emulate(&m, 0) == -EINVAL, "f32 rows 130 bytes apart accepted");
	m.type = HS_TYPE_Q4_K;
	m.row_bytes = 144;
	CHECK(hs__cuda_matmul_emulate(&m, 0) == -EINVAL, "32 columns of q4_K (a block of 256) accepted");
	m.cols = 256;
	CHECK(hs__cuda_matmul_emulate(&m, 3) == -EINVAL, "the cuBLAS path with q4_K weights accepted");
	m.type = 16; /* iq2_xxs: ggml has it, hotset does not compute with it */
	m.row_bytes = 66;
	CHECK(hs__cuda_matmul_emulate(&m, 0) == -EINVAL, "iq2_xxs weights accepted");
}

/* Rows of the byte-read block types at odd addresses and odd strides (a
 * row of Q5_0 is 22 bytes: a GGUF tensor may start 2 bytes past a 4-byte
 * boundary, a sliced one anywhere): the same results as aligned rows. */
static void test_matmul_unaligned(void)
{
	static const int types[] = { HS_TYPE_Q5_0, HS_TYPE_Q4_K, HS_TYPE_Q6_K, HS_TYPE_Q3_K, HS_TYPE_MXFP4 };
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		const int type = types[i], cols = 512, rows = 37, n = 3;
		const size_t rb = hs__type_row_bytes(type, cols) + 1;
		uint8_t *w = du_matrix(type, rows, cols, rb), *wo = du_alloc((size_t)rows * rb + 1);
		float *x = du_alloc(sizeof(float) * n * cols), *y0 = du_alloc(sizeof(float) * n * rows);
		float *y1 = du_alloc(sizeof(float) * n * rows);
		memcpy(wo + 1, w, (size_t)rows * rb);
		du_fill(x, (size_t)n * cols, 0, 1);
		for (int path = 1; path <= 2; path++) {
			struct hs_dev_matmul m = { .type = type, .rows = rows, .cols = cols, .w = w, .row_bytes = rb,
						   .n = n, .x = x, .x_stride = cols, .y = y0, .y_stride = rows };
			run_matmul(&m, path, (size_t)n * rows);
			m.w = wo + 1;
			m.y = y1;
			run_matmul(&m, path, (size_t)n * rows);
			CHECK(memcmp(y0, y1, sizeof(float) * n * rows) == 0, "matmul %s %s: rows at an odd address differ",
			      path_name(path), hs__type_name(type));
		}
		free(w);
		free(wo);
		free(x);
		free(y0);
		free(y1);
	}
}

/* ---- RMSNorm ------------------------------------------------------------------------ */

static void ab_rmsnorm(int n, int nh, int dim, int with_w, int in_place, int pad)
{
	const size_t st = (size_t)nh * dim + pad, ny = (size_t)(n - 1) * st + (size_t)nh * dim;
	float *x = du_alloc(sizeof(float) * ny), *ref = du_alloc(sizeof(float) * ny), *y = du_alloc(sizeof(float) * ny);
	float *w = du_alloc(sizeof(float) * dim);
	int nan = 0;

	du_fill(x, ny, 0.3f, 2);
	du_fill(w, dim, 1, 0.2f);
	hs__rmsnorm_ref(x, st, ref, st, n, nh, dim, with_w ? w : NULL, 1e-5f);
	if (in_place)
		memcpy(y, x, sizeof(float) * ny);
	else
		memset(y, SENTINEL, sizeof(float) * ny);
	struct hs_dev_norm r = { in_place ? y : x, st, y, st, n, nh, dim, with_w ? w : NULL, 1e-5f };
	if (!on_device) {
		CHECK(hs__cuda_rmsnorm_emulate(&r) == 0, "%s", hs_last_error());
	} else {
		struct hs_dev_norm d = r;
		d.y = up(y, sizeof(float) * ny);
		d.x = in_place ? d.y : up(x, sizeof(float) * ny);
		d.w = up(r.w, sizeof(float) * dim);
		CHECK(O->rmsnorm(q, &d) == 0, "%s", hs_last_error());
		down(y, d.y, sizeof(float) * ny);
		drop_all();
	}
	const double e = du_rel_l2_rows(y, ref, n, st, nh * dim, &nan);
	CHECK(e <= 1e-5 && !nan && du_guard_ok(y, sizeof(float) * ny) && (in_place || gaps_ok(y, n, st, nh * dim)),
	      "rmsnorm n%d heads %d dim %d w %d in place %d: error %.3g (1e-5), %d NaN, or a write outside", n, nh, dim,
	      with_w, in_place, e, nan);
	note(W_NORM, e);
	free(x);
	free(ref);
	free(y);
	free(w);
}

static void test_rmsnorm(void)
{
	static const int ns[3] = { 1, 3, 17 }, dims[5] = { 1, 7, 64, 100, 2880 };
	for (int a = 0; a < 3; a++)
		for (int b = 0; b < 5; b++)
			for (int nh = 1; nh <= 4; nh += 3)
				ab_rmsnorm(ns[a], nh, dims[b], (a + b) % 2, (a + nh) % 2, b % 2);
	printf("rmsnorm: worst error %.3g (1e-5)\n", worst[W_NORM]);
}

/* ---- RoPE --------------------------------------------------------------------------------- */

static void ab_rope(const struct hs_rope *rp, int n, int nh, int D, int pad)
{
	const size_t st = (size_t)nh * D + pad, nx = (size_t)(n - 1) * st + (size_t)nh * D;
	float *x = du_alloc(sizeof(float) * nx), *ref = du_alloc(sizeof(float) * nx);
	float *cs = du_alloc(sizeof(float) * n * rp->n_rot);
	int32_t *pos = malloc(sizeof *pos * n);
	int nan = 0, rest_ok = 1;

	du_fill(x, nx, 0, 1);
	memcpy(ref, x, sizeof(float) * nx);
	for (int t = 0; t < n; t++) {
		pos[t] = t == 0 ? 0 : (int32_t)(du_unif() * 100000);
		hs__rope_fill(rp, pos[t], cs + (size_t)t * rp->n_rot);
	}
	hs__rope_ref(rp, ref, st, n, nh, D, pos);
	float *y = du_alloc(sizeof(float) * nx);
	memcpy(y, x, sizeof(float) * nx);
	struct hs_dev_rope r = { y, st, n, nh, D, rp->n_rot, cs };
	if (!on_device) {
		CHECK(hs__cuda_rope_emulate(&r) == 0, "%s", hs_last_error());
	} else {
		struct hs_dev_rope d = r;
		d.x = up(y, sizeof(float) * nx);
		d.cs = up(cs, sizeof(float) * n * rp->n_rot);
		CHECK(O->rope(q, &d) == 0, "%s", hs_last_error());
		down(y, d.x, sizeof(float) * nx);
		drop_all();
	}
	for (int t = 0; t < n; t++)
		for (int h = 0; h < nh; h++)
			for (int i = rp->n_rot; i < D; i++) {
				const size_t k = (size_t)t * st + (size_t)h * D + i;
				rest_ok &= memcmp(&y[k], &x[k], 4) == 0;
			}
	for (int t = 0; t + 1 < n; t++)
		for (size_t k = (size_t)t * st + (size_t)nh * D; k < (size_t)(t + 1) * st; k++)
			rest_ok &= memcmp(&y[k], &x[k], 4) == 0;
	const double e = du_rel_l2_rows(y, ref, n, st, nh * D, &nan);
	CHECK(e <= 1e-6 && !nan && rest_ok && du_guard_ok(y, sizeof(float) * nx),
	      "rope n_rot %d head_dim %d heads %d n %d: error %.3g (1e-6), %d NaN, values past n_rot kept %d", rp->n_rot,
	      D, nh, n, e, nan, rest_ok);
	note(W_ROPE, e);
	free(x);
	free(ref);
	free(cs);
	free(pos);
	free(y);
}

static void test_rope(void)
{
	struct hs_rope yarn, plain, part;
	/* gpt-oss's YaRN, Qwen3's plain rope, and a partial rotation */
	CHECK(hs__rope_init(&yarn, 64, 150000, 1.0f / 32, 1, 1, 32, 1, 4096) == 0, "%s", hs_last_error());
	CHECK(hs__rope_init(&plain, 128, 1000000, 1, 0, 1, 32, 1, 40960) == 0, "%s", hs_last_error());
	CHECK(hs__rope_init(&part, 32, 10000, 1, 0, 1, 32, 1, 4096) == 0, "%s", hs_last_error());
	static const int ns[3] = { 1, 5, 33 };
	for (int a = 0; a < 3; a++) {
		ab_rope(&yarn, ns[a], 8, 64, a % 2);
		ab_rope(&plain, ns[a], 3, 128, 0);
		ab_rope(&part, ns[a], 2, 80, 1);
	}
	printf("rope: worst error %.3g (1e-6)\n", worst[W_ROPE]);
}

/* ---- K/V write ------------------------------------------------------------------------------- */

static void ab_kv_store(int type, int n, int nkv, int D, int with_pos, int head_major)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)D) + 2; /* + a gap, kept even */
	const int n_cells = 2 * n + 3;
	const size_t head_bytes = head_major ? rb * n_cells : rb, cell_bytes = head_major ? rb : rb * nkv + 4;
	const size_t bytes = head_major ? head_bytes * nkv : cell_bytes * n_cells;
	const size_t xs = (size_t)nkv * D + 3;
	float *x = du_alloc(sizeof(float) * n * xs);
	uint8_t *want = du_alloc(bytes), *got = du_alloc(bytes);
	int32_t *cells = malloc(sizeof *cells * n), *pos = malloc(sizeof *pos * n);
	int32_t *cp_want = malloc(sizeof *cp_want * n_cells), *cp_got = malloc(sizeof *cp_got * n_cells);

	du_fill(x, n * xs, 0, 2);
	/* ties: with amax 127 a Q8_0 block's scale is 1, and 2.5, -3.5 round
	 * to even (2, -4); 1 + 2^-11 and 1 + 3 * 2^-11 lie halfway between
	 * f16 values and round to even (1, 1 + 2^-9) */
	x[0] = 127;
	x[1] = 2.5f;
	x[2] = -3.5f;
	x[3] = 1 + 0x1p-11f;
	x[4] = 1 + 3 * 0x1p-11f;
	for (int c = 0; c < n_cells; c++)
		cp_want[c] = cp_got[c] = -1;
	/* distinct cells in a scrambled order */
	for (int t = 0; t < n; t++) {
		cells[t] = (int32_t)((t * 7 + 3) % n_cells);
		pos[t] = 1000 + t;
	}
	memset(want, 0x5a, bytes);
	memset(got, 0x5a, bytes);
	hs__kv_store(&hs__kernels_ref, &hs__dense_ref, type, x, xs, n, nkv, D, cells, want, cell_bytes, head_bytes, 0, 1);
	if (with_pos)
		for (int t = 0; t < n; t++)
			cp_want[cells[t]] = pos[t];
	struct hs_dev_kv_store s = { type, x, xs, n, nkv, D, cells, got, cell_bytes, head_bytes,
				     with_pos ? cp_got : NULL, with_pos ? pos : NULL };
	if (!on_device) {
		CHECK(hs__cuda_kv_store_emulate(&s) == 0, "%s", hs_last_error());
	} else {
		struct hs_dev_kv_store d = s;
		d.x = up(x, sizeof(float) * n * xs);
		d.cells = up(cells, sizeof *cells * n);
		d.dst = up(got, bytes);
		d.cell_pos = with_pos ? up(cp_got, sizeof *cp_got * n_cells) : NULL;
		d.pos = with_pos ? up(pos, sizeof *pos * n) : NULL;
		CHECK(O->kv_store(q, &d) == 0, "%s", hs_last_error());
		down(got, d.dst, bytes);
		if (with_pos)
			down(cp_got, d.cell_pos, sizeof *cp_got * n_cells);
		drop_all();
	}
	CHECK(memcmp(got, want, bytes) == 0 && du_guard_ok(got, bytes), "kv_store %s n%d heads %d dim %d %s: bytes differ",
	      hs__type_name(type), n, nkv, D, head_major ? "[head][cell]" : "[cell][head]");
	CHECK(memcmp(cp_got, cp_want, sizeof *cp_got * n_cells) == 0, "kv_store: cell positions differ");
	free(x);
	free(want);
	free(got);
	free(cells);
	free(pos);
	free(cp_want);
	free(cp_got);
}

static void test_kv_store(void)
{
	static const int ns[3] = { 1, 7, 40 };
	for (int a = 0; a < 3; a++)
		for (int hm = 0; hm < 2; hm++) {
			ab_kv_store(HS_TYPE_F16, ns[a], 3, 40, 1, hm);
			ab_kv_store(HS_TYPE_F16, ns[a], 8, 64, hm, hm);
			ab_kv_store(HS_TYPE_Q8_0, ns[a], 1, 32, 1, hm);
			ab_kv_store(HS_TYPE_Q8_0, ns[a], 8, 96, !hm, hm);
		}
	printf("kv_store: bit for bit\n");
}

/* ---- attention ------------------------------------------------------------------------------ */

struct attn_case {
	int n, nh, nkv, D, kv_type, n_cells, window, sinks, n_split, ring, head_major, filled;
};

static void ab_attention(const struct attn_case *c)
{
	const int D = c->D;
	const size_t rb = hs__type_row_bytes(c->kv_type, (uint64_t)D);
	const size_t k_head = c->head_major ? rb * (size_t)(c->n_cells ? c->n_cells : 1) : rb;
	const size_t k_cell = c->head_major ? rb : rb * c->nkv;
	const size_t kv_bytes = c->head_major ? k_head * c->nkv : k_cell * (size_t)(c->n_cells ? c->n_cells : 1);
	const size_t qs = (size_t)c->nh * D + 4, no = (size_t)(c->n - 1) * qs + (size_t)c->nh * D;
	float *qv = du_alloc(sizeof(float) * c->n * qs), *kvx = du_alloc(sizeof(float) * c->nkv * D);
	float *sinks = du_alloc(sizeof(float) * c->nh), *ref = du_alloc(sizeof(float) * no), *out = du_alloc(sizeof(float) * no);
	uint8_t *k = du_alloc(kv_bytes), *v = du_alloc(kv_bytes);
	int32_t *cell_pos = malloc(sizeof(int32_t) * (c->n_cells + 1)), *q_pos = malloc(sizeof(int32_t) * c->n);
	int nan = 0;

	du_fill(qv, c->n * qs, 0, 1);
	du_fill(sinks, c->nh, 0, 2);
	memset(k, 0, kv_bytes);
	memset(v, 0, kv_bytes);
	/* positions: the sequence holds `filled` positions; a full layer keeps p
	 * in cell p, a ring p in cell p % n_cells (the newest win); some cells
	 * empty, and queries are the last n positions */
	for (int cc = 0; cc < c->n_cells; cc++)
		cell_pos[cc] = -1;
	for (int p = 0; p < c->filled && c->n_cells > 0; p++) {
		const int cell = c->ring ? p % c->n_cells : p;
		if (cell >= c->n_cells || (p % 11) == 5)
			continue; /* a cell not written */
		cell_pos[cell] = p;
		for (int kind = 0; kind < 2; kind++) {
			du_fill(kvx, (size_t)c->nkv * D, 0, 1);
			hs__kv_store(&hs__kernels_ref, &hs__dense_ref, c->kv_type, kvx, (size_t)c->nkv * D, 1, c->nkv, D,
				     &cell, kind ? v : k, k_cell, k_head, 0, 1);
		}
	}
	for (int t = 0; t < c->n; t++)
		q_pos[t] = c->filled - c->n + t;
	struct hs_attn_job j = { .n = c->n, .n_head = c->nh, .n_head_kv = c->nkv, .head_dim = D, .q = qv, .q_stride = qs,
				 .q_pos = q_pos, .kv_type = c->kv_type, .k = k, .v = v, .k_cell = k_cell,
				 .k_head = k_head, .v_cell = k_cell, .v_head = k_head, .n_cells = c->n_cells,
				 .cell_pos = cell_pos, .window = c->window, .sinks = c->sinks ? sinks : NULL,
				 .scale = 1.0f / sqrtf((float)D), .out = ref, .out_stride = qs };
	CHECK(hs__attention_ref(&j) == 0, "attention reference: %s", hs_last_error());
	memset(out, SENTINEL, sizeof(float) * no);
	struct hs_dev_attn a = { .n = c->n, .n_head = c->nh, .n_head_kv = c->nkv, .head_dim = D, .q = qv, .q_stride = qs,
				 .q_pos = q_pos, .kv_type = c->kv_type, .k = k, .v = v, .k_cell = k_cell,
				 .k_head = k_head, .v_cell = k_cell, .v_head = k_head, .n_cells = c->n_cells,
				 .cell_pos = cell_pos, .window = c->window, .sinks = j.sinks, .scale = j.scale,
				 .out = out, .out_stride = qs };
	if (!on_device) {
		const int s = c->n_split > 0 ? c->n_split : 64;
		const size_t sb = sizeof(float) * (size_t)c->n * c->nh * s * (D + 2);
		a.scratch = malloc(sb);
		memset(a.scratch, 0xff, sb);
		CHECK(hs__cuda_attention_emulate(&a, c->n_split) == 0, "%s", hs_last_error());
		free(a.scratch);
	} else {
		const size_t sb = O->attn_scratch_bytes(c->n, c->nh, c->nkv, D, c->n_cells);
		struct hs_dev_attn d = a;
		d.q = up(qv, sizeof(float) * c->n * qs);
		d.q_pos = up(q_pos, sizeof(int32_t) * c->n);
		d.k = up(k, kv_bytes);
		d.v = up(v, kv_bytes);
		d.cell_pos = up(cell_pos, sizeof(int32_t) * (c->n_cells + 1));
		d.sinks = up(a.sinks, sizeof(float) * c->nh);
		d.out = up(out, sizeof(float) * no);
		d.scratch = NULL;
		if (sb) {
			void *p = NULL;
			CHECK(O->alloc(dev->dev, sb, &p) == 0, "%s", hs_last_error());
			dptr[n_dptr++] = p;
			d.scratch = p;
		}
		CHECK(O->attention(q, &d) == 0, "%s", hs_last_error());
		down(out, d.out, sizeof(float) * no);
		drop_all();
	}
	const double e = du_rel_l2_rows(out, ref, c->n, qs, c->nh * D, &nan);
	CHECK(e <= 5e-5 && !nan && gaps_ok(out, c->n, qs, c->nh * D) && du_guard_ok(out, sizeof(float) * no),
	      "attention %s n%d heads %d/%d dim %d cells %d (%s, %d filled) window %d sinks %d split %d: error %.3g "
	      "(5e-5), %d NaN, or a write outside",
	      hs__type_name(c->kv_type), c->n, c->nh, c->nkv, D, c->n_cells, c->ring ? "ring" : "full", c->filled,
	      c->window, c->sinks, c->n_split, e, nan);
	note(W_ATTN, e);
	free(qv);
	free(kvx);
	free(sinks);
	free(ref);
	free(out);
	free(k);
	free(v);
	free(cell_pos);
	free(q_pos);
}

static void test_attention(void)
{
	static const int heads[6][3] = { { 4, 4, 64 }, { 8, 2, 64 }, { 64, 8, 64 }, { 6, 1, 40 }, { 4, 2, 128 },
					 { 2, 1, 512 } };
	static const int ns[3] = { 1, 5, 40 }, cells[5] = { 0, 1, 37, 300, 700 }, splits[3] = { 0, 1, 3 };
	int k = 0;
	for (int h = 0; h < 6; h++)
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 5; b++) {
				k++;
				if ((small && k % 3) || (heads[h][0] == 64 && b == 4 && a == 2))
					continue;
				struct attn_case c = { .n = ns[a], .nh = heads[h][0], .nkv = heads[h][1], .D = heads[h][2] };
				c.kv_type = heads[h][2] % 32 == 0 && k % 2 ? HS_TYPE_Q8_0 : HS_TYPE_F16;
				c.n_cells = cells[b];
				c.ring = k % 3 == 1;
				c.head_major = k % 4 == 2;
				c.window = k % 5 < 2 ? 0 : 16;
				c.sinks = k % 2 == 0 || h == 0;
				c.n_split = on_device ? 0 : splits[k % 3];
				/* full layers hold positions 0..filled-1 in their cells; rings wrap */
				c.filled = c.ring ? c.n_cells + 25 : (c.n_cells > c.n ? c.n_cells - (k % 7) : c.n);
				if (c.filled < c.n)
					c.filled = c.n;
				ab_attention(&c);
			}
	/* decode with one split per few cells; a token that sees nothing (no sink: zeros) */
	struct attn_case d = { 1, 8, 2, 64, HS_TYPE_F16, 700, 0, 1, on_device ? 0 : 11, 0, 0, 700 };
	ab_attention(&d);
	struct attn_case z = { 1, 4, 4, 64, HS_TYPE_F16, 37, 0, 0, on_device ? 0 : 3, 0, 0, 1 };
	ab_attention(&z);
	printf("attention: worst error %.3g (5e-5)\n", worst[W_ATTN]);
}

/* ---- y += x ---------------------------------------------------------------------------------- */

static void test_add(void)
{
	const size_t n = 1000;
	float *x = du_alloc(sizeof(float) * n), *y = du_alloc(sizeof(float) * n), *want = du_alloc(sizeof(float) * n);
	du_fill(x, n, 0, 1);
	du_fill(y, n, 0, 1);
	for (size_t i = 0; i < n; i++)
		want[i] = y[i] + x[i];
	if (!on_device) {
		CHECK(hs__cuda_add_emulate(y, x, n - 1) == 0, "%s", hs_last_error());
	} else {
		float *dy = up(y, sizeof(float) * n), *dx = up(x, sizeof(float) * n);
		CHECK(O->add(q, dy, dx, n - 1) == 0, "%s", hs_last_error());
		down(y, dy, sizeof(float) * n);
		drop_all();
	}
	want[n - 1] = y[n - 1]; /* past n: untouched */
	CHECK(memcmp(y, want, sizeof(float) * (n - 1)) == 0 && du_guard_ok(y, sizeof(float) * n), "add differs");
	free(x);
	free(y);
	free(want);
}

/* ---- g = silu(g) * u ----------------------------------------------------------------------- */

static void test_swiglu(void)
{
	const size_t n = 3001;
	float *g = du_alloc(sizeof(float) * n), *u = du_alloc(sizeof(float) * n), *want = du_alloc(sizeof(float) * n);
	du_fill(g, n, 0, 4); /* far into both tails of the sigmoid */
	du_fill(u, n, 0, 1);
	memcpy(want, g, sizeof(float) * n);
	hs__swiglu_ref(want, u, n - 1);
	if (!on_device) {
		CHECK(hs__cuda_swiglu_emulate(g, u, n - 1) == 0, "%s", hs_last_error());
	} else {
		float *dg = up(g, sizeof(float) * n), *du = up(u, sizeof(float) * n);
		CHECK(O->swiglu && O->swiglu(q, dg, du, n - 1) == 0, "%s", hs_last_error());
		down(g, dg, sizeof(float) * n);
		drop_all();
	}
	int nan = 0;
	double e = du_rel_l2(g, want, n - 1, &nan);
	CHECK(e <= 1e-6 && !nan && g[n - 1] == want[n - 1] && du_guard_ok(g, sizeof(float) * n),
	      "swiglu: error %.3g (1e-6), %d NaN, past n kept %d", e, nan, g[n - 1] == want[n - 1]);
	printf("swiglu: error %.3g (1e-6)\n", e);
	free(g);
	free(u);
	free(want);
}

/* ---- qwen35moe's DeltaNet mixer ------------------------------------------------------------ */

struct dn_bufs {
	float *conv_w, *dt_bias, *a, *norm, *qkv, *z, *alpha, *beta, *conv_state, *state, *conv, *g, *b, *out;
};

static void dn_alloc(struct dn_bufs *B, int n, int nk, int nv, int dh, int kc)
{
	const size_t C = (size_t)(2 * nk + nv) * dh, val = (size_t)nv * dh, m = n ? (size_t)n : 1;
	B->conv_w = du_alloc(sizeof(float) * C * kc);
	B->dt_bias = du_alloc(sizeof(float) * nv);
	B->a = du_alloc(sizeof(float) * nv);
	B->norm = du_alloc(sizeof(float) * dh);
	B->qkv = du_alloc(sizeof(float) * m * C);
	B->z = du_alloc(sizeof(float) * m * val);
	B->alpha = du_alloc(sizeof(float) * m * nv);
	B->beta = du_alloc(sizeof(float) * m * nv);
	B->conv_state = du_alloc(sizeof(float) * C * (size_t)(kc > 1 ? kc - 1 : 1));
	B->state = du_alloc(sizeof(float) * val * dh);
	B->conv = du_alloc(sizeof(float) * m * C);
	B->g = du_alloc(sizeof(float) * m * nv);
	B->b = du_alloc(sizeof(float) * m * nv);
	B->out = du_alloc(sizeof(float) * m * val);
}

static void dn_release(struct dn_bufs *B)
{
	float *p[] = { B->conv_w, B->dt_bias, B->a, B->norm, B->qkv, B->z, B->alpha,
		       B->beta,	  B->conv_state, B->state, B->conv, B->g, B->b, B->out };
	for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
		free(p[i]);
}

static struct hs_dev_dn dn_args(const struct dn_bufs *B, int n, int nk, int nv, int dh, int kc)
{
	struct hs_dev_dn d = { .n = n, .n_k_heads = nk, .n_v_heads = nv, .head_dim = dh, .kc = kc,
			       .conv_w = B->conv_w, .dt_bias = B->dt_bias, .a = B->a, .norm = B->norm, .eps = 1e-6f,
			       .qkv = B->qkv, .z = B->z, .alpha = B->alpha, .beta = B->beta,
			       .conv_state = B->conv_state, .state = B->state, .conv = B->conv, .g = B->g, .b = B->b,
			       .out = B->out };
	return d;
}

/* The op on tokens [t0, t0 + n) of the buffers: emulated, or on the device
 * (the states copied there and back). */
static int dn_run(const struct dn_bufs *B, int t0, int n, int nk, int nv, int dh, int kc)
{
	const size_t C = (size_t)(2 * nk + nv) * dh, val = (size_t)nv * dh;
	struct hs_dev_dn d = dn_args(B, n, nk, nv, dh, kc);
	d.qkv += (size_t)t0 * C, d.z += (size_t)t0 * val, d.alpha += (size_t)t0 * nv, d.beta += (size_t)t0 * nv;
	d.conv += (size_t)t0 * C, d.g += (size_t)t0 * nv, d.b += (size_t)t0 * nv, d.out += (size_t)t0 * val;
	if (!on_device)
		return hs__cuda_deltanet_emulate(&d);
	const size_t m = n ? (size_t)n : 1, cs = C * (size_t)(kc > 1 ? kc - 1 : 1), ss = val * dh;
	struct hs_dev_dn e = d;
	e.conv_w = up(d.conv_w, sizeof(float) * C * kc);
	e.dt_bias = up(d.dt_bias, sizeof(float) * nv);
	e.a = up(d.a, sizeof(float) * nv);
	e.norm = up(d.norm, sizeof(float) * dh);
	e.qkv = up(d.qkv, sizeof(float) * m * C);
	e.z = up(d.z, sizeof(float) * m * val);
	e.alpha = up(d.alpha, sizeof(float) * m * nv);
	e.beta = up(d.beta, sizeof(float) * m * nv);
	e.conv_state = up(d.conv_state, sizeof(float) * cs);
	e.state = up(d.state, sizeof(float) * ss);
	e.conv = up(d.conv, sizeof(float) * m * C);
	e.g = up(d.g, sizeof(float) * m * nv);
	e.b = up(d.b, sizeof(float) * m * nv);
	e.out = up(d.out, sizeof(float) * m * val);
	int rc = O->deltanet(q, &e);
	if (!rc) {
		down(d.conv_state, e.conv_state, sizeof(float) * cs);
		down(d.state, e.state, sizeof(float) * ss);
		down(d.out, e.out, sizeof(float) * m * val);
	}
	drop_all();
	return rc;
}

/* Against the double twins (convolution, prep, recurrence, then the gated
 * norm), from nonzero states: the output and both states; then the same
 * tokens one call per token (decode) against one call for all. */
static void ab_deltanet(int n, int nk, int nv, int dh, int kc)
{
	const size_t C = (size_t)(2 * nk + nv) * dh, val = (size_t)nv * dh, m = n ? (size_t)n : 1;
	const size_t cs = C * (size_t)(kc > 1 ? kc - 1 : 1), ss = val * dh;
	struct dn_bufs B, R;
	dn_alloc(&B, n, nk, nv, dh, kc);
	dn_alloc(&R, n, nk, nv, dh, kc);
	du_fill(B.conv_w, C * kc, 0, 0.5f);
	du_fill(B.dt_bias, nv, 0, 0.5f);
	for (int h = 0; h < nv; h++)
		B.a[h] = -expf(du_gauss()); /* -exp(A_log): decays in (0, 1) */
	du_fill(B.norm, dh, 1, 0.2f);
	du_fill(B.qkv, m * C, 0, 1);
	du_fill(B.z, m * val, 0, 2);
	du_fill(B.alpha, m * nv, 0, 2);
	du_fill(B.beta, m * nv, 0, 2);
	du_fill(B.conv_state, cs, 0, 1);
	du_fill(B.state, ss, 0, 0.1f);
	du_fill(B.out, m * val, 0, 1);
	float *cs0 = malloc(sizeof(float) * cs), *ss0 = malloc(sizeof(float) * ss);
	memcpy(cs0, B.conv_state, sizeof(float) * cs);
	memcpy(ss0, B.state, sizeof(float) * ss);

	/* the reference on copies */
	memcpy(R.conv_w, B.conv_w, sizeof(float) * C * kc);
	memcpy(R.dt_bias, B.dt_bias, sizeof(float) * nv);
	memcpy(R.a, B.a, sizeof(float) * nv);
	memcpy(R.norm, B.norm, sizeof(float) * dh);
	memcpy(R.qkv, B.qkv, sizeof(float) * m * C);
	memcpy(R.z, B.z, sizeof(float) * m * val);
	memcpy(R.alpha, B.alpha, sizeof(float) * m * nv);
	memcpy(R.beta, B.beta, sizeof(float) * m * nv);
	memcpy(R.conv_state, cs0, sizeof(float) * cs);
	memcpy(R.state, ss0, sizeof(float) * ss);
	memcpy(R.out, B.out, sizeof(float) * m * val);
	hs__dn_conv_ref(R.conv_w, (int)C, kc, R.conv_state, n, R.qkv, C, R.conv, C);
	hs__dn_prep(R.conv, C, nk, dh, R.alpha, R.beta, R.dt_bias, R.a, nv, 1e-6f, R.g, R.b, 0, n);
	const size_t key = (size_t)nk * dh;
	struct hs_dn_job j = { .n = n, .n_k_heads = nk, .n_v_heads = nv, .dk = dh, .dv = dh, .q = R.conv,
			       .k = R.conv + key, .qk_stride = C, .v = R.conv + 2 * key, .v_stride = C, .g = R.g,
			       .beta = R.b, .scale = 1.0f / sqrtf((float)dh), .state = R.state, .out = R.out,
			       .out_stride = val };
	hs__dn_ref(&j);
	hs__dn_gnorm(R.out, R.z, dh, R.norm, 1e-6f, 0, (long)n * nv);

	CHECK(dn_run(&B, 0, n, nk, nv, dh, kc) == 0, "deltanet %d tokens: %s", n, hs_last_error());
	int nan = 0;
	const double eo = n ? du_rel_l2(B.out, R.out, (size_t)n * val, &nan) : 0;
	const double es = du_rel_l2(B.state, R.state, ss, &nan);
	const int conv_same = memcmp(B.conv_state, R.conv_state, sizeof(float) * cs) == 0;
	note(W_DN, eo > es ? eo : es);
	CHECK(eo <= 1e-4 && es <= 1e-4 && conv_same && !nan && du_guard_ok(B.out, sizeof(float) * m * val) &&
		      du_guard_ok(B.state, sizeof(float) * ss) && (n || memcmp(B.state, ss0, sizeof(float) * ss) == 0),
	      "deltanet %d tokens, %d/%d heads of %d, kernel %d: output %.3g, state %.3g (1e-4), conv state %s, %d NaN",
	      n, nk, nv, dh, kc, eo, es, conv_same ? "equal" : "differs", nan);

	/* one token a call from the same states: the decode path */
	if (n > 1) {
		float *whole = malloc(sizeof(float) * m * val), *wstate = malloc(sizeof(float) * ss);
		memcpy(whole, B.out, sizeof(float) * m * val);
		memcpy(wstate, B.state, sizeof(float) * ss);
		memcpy(B.conv_state, cs0, sizeof(float) * cs);
		memcpy(B.state, ss0, sizeof(float) * ss);
		for (int t = 0; t < n; t++)
			CHECK(dn_run(&B, t, 1, nk, nv, dh, kc) == 0, "deltanet token %d: %s", t, hs_last_error());
		const double ed = du_rel_l2(B.out, whole, (size_t)n * val, &nan), eds = du_rel_l2(B.state, wstate, ss, &nan);
		note(W_DN, ed > eds ? ed : eds);
		CHECK(ed <= 1e-4 && eds <= 1e-4 && !nan,
		      "deltanet %d tokens one at a time vs together: output %.3g, state %.3g (1e-4)", n, ed, eds);
		free(whole);
		free(wstate);
	}
	free(cs0);
	free(ss0);
	dn_release(&B);
	dn_release(&R);
}

static void test_deltanet(void)
{
	if (on_device && !O->deltanet) {
		printf("deltanet: device %s has none\n", O->name);
		return;
	}
	/* tokens, key heads, value heads, head size, kernel: Qwen3.5's 128 and
	 * 4, odd sizes for the thread tails, no taps of the past (kernel 1),
	 * fewer tokens than the state holds, and none */
	static const int cases[][5] = { { 1, 1, 1, 8, 4 },    { 7, 2, 4, 20, 4 }, { 70, 1, 2, 72, 3 },
					{ 2, 2, 2, 33, 4 },   { 64, 2, 2, 32, 1 }, { 5, 1, 2, 128, 4 },
					{ 0, 1, 1, 16, 4 } };
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const int *c = cases[i];
		if (small && c[3] > 64)
			continue;
		ab_deltanet(c[0], c[1], c[2], c[3], c[4]);
	}
	/* arguments refused, nothing written */
	struct dn_bufs B;
	dn_alloc(&B, 1, 2, 3, 8, 4);
	du_fill(B.out, 3 * 8, 0, 1);
	float keep[24];
	memcpy(keep, B.out, sizeof keep);
	struct hs_dev_dn d = dn_args(&B, 1, 2, 3, 8, 4);
	int rc = on_device ? O->deltanet(q, &d) : hs__cuda_deltanet_emulate(&d);
	CHECK(rc == -EINVAL && strstr(hs_last_error(), "value heads"), "3 value heads over 2 key heads: %d %s", rc,
	      hs_last_error());
	d.n_v_heads = 2, d.head_dim = HS_DEV_DN_MAX_DIM + 1;
	rc = on_device ? O->deltanet(q, &d) : hs__cuda_deltanet_emulate(&d);
	CHECK(rc == -EINVAL, "head size %d: %d", HS_DEV_DN_MAX_DIM + 1, rc);
	d.head_dim = 8, d.state = NULL;
	rc = on_device ? O->deltanet(q, &d) : hs__cuda_deltanet_emulate(&d);
	CHECK(rc == -EINVAL && strstr(hs_last_error(), "NULL"), "no state: %d %s", rc, hs_last_error());
	CHECK(memcmp(keep, B.out, sizeof keep) == 0, "a refused call wrote its output");
	dn_release(&B);
	printf("deltanet: worst error %.3g (1e-4)\n", worst[W_DN]);
}

int main(void)
{
	small = du_sanitized();
	if (on_device) {
		dev = hs_test_device();
		O = dev->ops;
		if (!O->matmul)
			SKIP("device %s has no dense ops", O->name);
		if (O->queue_create(dev->dev, &q))
			SKIP("queue: %s", hs_last_error());
	} else {
		float y = 0, x = 1;
		if (hs__cuda_add_emulate(&y, &x, 1) == -ENOSYS)
			SKIP("%s", hs_last_error());
	}
	test_matmul();
	test_matmul_unaligned();
	test_rmsnorm();
	test_rope();
	test_kv_store();
	test_attention();
	test_add();
	test_swiglu();
	test_deltanet();
	if (on_device) {
		O->queue_destroy(q);
		hs__device_close(dev);
	}
	return hs_test_end();
}
