/* A/B tests of the dense ops (matrix products, embedding rows, RMSNorm,
 * RoPE, K/V write, router with each architecture's gating, glm4moe's
 * biased sigmoid choice too) against their double-precision twins over random
 * inputs and awkward shapes, on the fastest and the scalar tables, sliced
 * over 1 and 3 threads; NaN checks and guard bytes after every output, and
 * the gaps between strided rows must stay untouched.
 *
 * Bounds, as normalised L2 error ||fast - ref|| / ||ref|| (u = 2^-24, the
 * float rounding unit):
 *  - float matrix products (F32/F16/BF16 weights, f32 activations): 1e-5.
 *    The weights are the same numbers on both sides (dequantizing is
 *    exact); the fast tile sums in float over 8 or 16 lanes, a chain of
 *    m <= cols/8 + 4 additions per lane.  Rounding errors of such sums grow
 *    like sqrt(m) u in practice (worst case m u): sqrt(364) u = 1.1e-6 for
 *    2880 columns, relative to sum |w x|, which random data keeps within a
 *    few times |y|.
 *  - Q8_0/MXFP4 products against the double product of the Q8_0-rounded
 *    activations: 1e-5 (integer block dots are exact, one float scale per
 *    block, sums of cols/32 block terms in float); against the unrounded
 *    activations: 3e-2 (rounding to Q8_0 moves each value by at most
 *    amax/254 of its block, so the input error is at most sqrt(32)/254 =
 *    2.2% of the block norm, about 0.6% for Gaussian data, and W carries
 *    it to y with about the same relative size; checked where there are at
 *    least 64 outputs, since a single dot product can cancel).
 *  - embedding rows: bit for bit (f32 holds every value of every type).
 *  - RMSNorm: 1e-5.  Sum of squares in float over 32 lanes, relative error
 *    <= (dim/32 + 5) u = 5.7e-6 at dim 2880; the scale's error is half that,
 *    plus two roundings of the products.
 *  - RoPE: 1e-6.  cos and sin rounded once from double (u each), then two
 *    products and an add per value: about 3u of the pair's norm.
 *  - K/V write: bit for bit (the same F16C rounding and the same Q8_0
 *    quantizer, round half to even).
 *  - router: the same ids as the double reference wherever the gap between
 *    the k-th and (k+1)-th logit exceeds 1e-4 (float logits differ from the
 *    double ones by about sqrt(cols/8) u |logit| < 1e-5 here); weights 1e-5
 *    (softmax of k float values from logits off by < 1e-5).
 * Measured values are printed. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/attention.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/repack.h"
#include "cpu_kernels/router.h"
#include "model/arch.h"
#include "hotset.h"
#include "tests/dense-util.h"
#include "tests/hs-test.h"

static const struct hs_dense_ops *fast;
static const struct hs_kernel_ops *kfast;
static int small; /* sanitizer build: fewer and smaller cases */

/* y filled with this byte pattern (a NaN) before each run, so that the gaps
 * of strided rows can be checked afterwards */
#define SENTINEL 0x7f

static int gaps_ok(const float *y, int n, size_t stride, int rows)
{
	const uint8_t *b = (const uint8_t *)y;
	for (int t = 0; t < n; t++)
		for (size_t i = (size_t)t * stride + rows; i < (size_t)(t + 1) * stride && t + 1 < n; i++)
			for (int k = 0; k < 4; k++)
				if (b[i * 4 + k] != SENTINEL)
					return 0;
	return 1;
}

/* ---- matrix products ------------------------------------------------------- */

static double worst_mm_float, worst_mm_qtight, worst_mm_qloose;

static void run_mm(struct hs_matmul_job *j, const struct hs_dense_ops *d, const struct hs_kernel_ops *k, int threads)
{
	size_t bytes = hs__matmul_scratch_bytes(j->type, j->cols, j->n);
	j->dops = d;
	j->ops = k;
	j->scratch = bytes ? du_alloc(bytes) : NULL;
	memset(j->y, SENTINEL, sizeof(float) * ((size_t)(j->n - 1) * j->y_stride + j->rows));
	CHECK(hs__matmul_run_omp(j, threads) == 0, "matmul: %s", hs_last_error());
	if (bytes)
		CHECK(du_guard_ok(j->scratch, bytes), "matmul wrote past its scratch");
	free(j->scratch);
}

/* x rounded to Q8_0 and back, as the quantized path sees it */
static void q8_roundtrip(const float *x, float *xd, int n, size_t xs, int cols)
{
	struct hs_block_q8_0 *q = malloc(sizeof *q * (size_t)(cols / HS_QK));
	for (int t = 0; t < n; t++) {
		hs__kernels_ref.quantize_q8_0(x + (size_t)t * xs, q, cols);
		hs__dequantize_row_ref(HS_TYPE_Q8_0, q, xd + (size_t)t * xs, (size_t)cols);
	}
	free(q);
}

static void ab_matmul(int type, int rows, int cols, int n, int bias, int pad)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols) + (size_t)pad * 4;
	const size_t xs = (size_t)cols + (size_t)pad, ys = (size_t)rows + (size_t)pad;
	const size_t ny = (size_t)(n - 1) * ys + rows;
	const int quant = hs__kernel_type_quantized(type);
	uint8_t *w = du_matrix(type, rows, cols, rb);
	float *x = du_alloc(sizeof(float) * n * xs), *xd = du_alloc(sizeof(float) * n * xs);
	float *b = du_alloc(sizeof(float) * rows), *y_ref = du_alloc(sizeof(float) * ny);
	float *y_q = du_alloc(sizeof(float) * ny), *y = du_alloc(sizeof(float) * ny);

	du_fill(x, n * xs, 0, 1);
	du_fill(b, rows, 0, 0.1f);
	struct hs_matmul_job j = { .type = type,
				   .rows = rows,
				   .cols = cols,
				   .w = w,
				   .row_bytes = rb,
				   .bias = bias ? b : NULL,
				   .n = n,
				   .x = x,
				   .x_stride = xs,
				   .y = y_ref,
				   .y_stride = ys };
	CHECK(hs__matmul_ref(&j) == 0, "matmul reference: %s", hs_last_error());
	if (quant) {
		q8_roundtrip(x, xd, n, xs, cols);
		j.x = xd;
		j.y = y_q;
		CHECK(hs__matmul_ref(&j) == 0, "matmul reference: %s", hs_last_error());
		j.x = x;
	}
	for (int pass = 0; pass < 2; pass++) {
		int nan = 0;
		j.y = y;
		if (pass == 0)
			run_mm(&j, fast, kfast, 3);
		else
			run_mm(&j, &hs__dense_ref, &hs__kernels_ref, 2);
		const char *set = pass ? "scalar" : fast->name;
		CHECK(gaps_ok(y, n, ys, rows) && du_guard_ok(y, sizeof(float) * ny), "matmul %s wrote outside its rows",
		      set);
		if (!quant) {
			double e = du_rel_l2_rows(y, y_ref, n, ys, rows, &nan);
			CHECK(e <= 1e-5 && !nan, "matmul %s %s %dx%d n%d: error %.3g (bound 1e-5), %d NaN", set,
			      hs__type_name(type), rows, cols, n, e, nan);
			worst_mm_float = e > worst_mm_float ? e : worst_mm_float;
		} else {
			double et = du_rel_l2_rows(y, y_q, n, ys, rows, &nan),
			       el = du_rel_l2_rows(y, y_ref, n, ys, rows, &nan);
			if ((long)rows * n < 64)
				el = 0; /* a few dot products can cancel: the 3e-2 holds over many */
			CHECK(et <= 1e-5 && el <= 3e-2 && !nan,
			      "matmul %s %s %dx%d n%d: %.3g against rounded x (bound 1e-5), %.3g against x (3e-2), %d NaN",
			      set, hs__type_name(type), rows, cols, n, et, el, nan);
			worst_mm_qtight = et > worst_mm_qtight ? et : worst_mm_qtight;
			worst_mm_qloose = el > worst_mm_qloose ? el : worst_mm_qloose;
		}
	}
	free(w);
	free(x);
	free(xd);
	free(b);
	free(y_ref);
	free(y_q);
	free(y);
}

/* The same product on a matrix in the row-interleaved layout (repack.h):
 * against the double twin on the plain rows with Q8_0-rounded activations,
 * every tier; and the twin reads the packed matrix as the plain one. */
static void ab_matmul_packed(int type, int rows, int cols, int n, int bias)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols), ny = (size_t)n * rows;
	uint8_t *w = du_matrix(type, rows, cols, rb), *wp = du_alloc(rb * rows);
	float *x = du_alloc(sizeof(float) * n * cols), *xd = du_alloc(sizeof(float) * n * cols);
	float *b = du_alloc(sizeof(float) * rows), *y_q = du_alloc(sizeof(float) * ny);
	float *y = du_alloc(sizeof(float) * ny), *y2 = du_alloc(sizeof(float) * ny);

	hs__pack_matrix(type, rows, cols, w, rb, wp);
	du_fill(x, (size_t)n * cols, 0, 1);
	du_fill(b, rows, 0, 0.1f);
	q8_roundtrip(x, xd, n, cols, cols);
	struct hs_matmul_job j = { .type = type, .rows = rows, .cols = cols, .w = w, .row_bytes = rb,
				   .bias = bias ? b : NULL, .n = n, .x = xd, .x_stride = cols, .y = y_q,
				   .y_stride = rows };
	CHECK(hs__matmul_ref(&j) == 0, "matmul reference: %s", hs_last_error());
	j.w = wp;
	j.packed = 1;
	j.y = y2;
	CHECK(hs__matmul_ref(&j) == 0 && memcmp(y2, y_q, sizeof(float) * ny) == 0,
	      "matmul reference reads the packed %s %dx%d differently", hs__type_name(type), rows, cols);
	j.x = x;
	for (int pass = 0; pass < 2; pass++) {
		int nan = 0;
		j.y = y;
		if (pass == 0)
			run_mm(&j, fast, kfast, 3);
		else
			run_mm(&j, &hs__dense_ref, &hs__kernels_ref, 2);
		double e = du_rel_l2_rows(y, y_q, n, rows, rows, &nan);
		CHECK(e <= 1e-5 && !nan, "packed matmul %s %s %dx%d n%d: %.3g against rounded x (bound 1e-5), %d NaN",
		      pass ? "scalar" : kfast->name, hs__type_name(type), rows, cols, n, e, nan);
		worst_mm_qtight = e > worst_mm_qtight ? e : worst_mm_qtight;
	}
	free(w);
	free(wp);
	free(x);
	free(xd);
	free(b);
	free(y_q);
	free(y);
	free(y2);
}

static void test_matmul(void)
{
	const int types[5] = { HS_TYPE_F32, HS_TYPE_F16, HS_TYPE_BF16, HS_TYPE_Q8_0, HS_TYPE_MXFP4 };
	const int fshape[5][2] = { { 1, 7 }, { 5, 36 }, { 70, 100 }, { 129, 256 }, { 33, 2880 } };
	const int qshape[5][2] = { { 1, 32 }, { 5, 64 }, { 70, 96 }, { 129, 256 }, { 33, 2880 } };
	const int ns[6] = { 1, 2, 5, 64, 70, 130 };

	for (int t = 0; t < 5; t++)
		for (int s = 0; s < 5; s++)
			for (int k = 0; k < 6; k++) {
				const int(*sh)[2] = hs__kernel_type_quantized(types[t]) ? qshape : fshape;
				if (small && (k % 2 || s == 4))
					continue;
				ab_matmul(types[t], sh[s][0], sh[s][1], ns[k], (s + k) % 2, (s * k) % 3);
			}
	/* packed matrices: rows in groups of 16, decode and prefill */
	static const int pshape[4][2] = { { 16, 32 }, { 48, 96 }, { 1024, 256 }, { 64, 2880 } };
	for (int t = 3; t < 5; t++)
		for (int s2 = 0; s2 < 4; s2++)
			for (int k = 0; k < 6; k++)
				if (!small || (k % 2 == 0 && s2 < 3))
					ab_matmul_packed(types[t], pshape[s2][0], pshape[s2][1], ns[k], k % 2);
	struct hs_matmul_job badp = { .type = HS_TYPE_Q8_0, .rows = 20, .cols = 64, .row_bytes = 68, .n = 1, .packed = 1 };
	CHECK(hs__matmul_prepare(&badp) == -EINVAL, "matmul accepted a packed matrix of 20 rows");
	/* a decode-sized product over many rows (row blocks split unevenly) */
	ab_matmul(HS_TYPE_F16, 1001, 64, 1, 1, 0);
	ab_matmul(HS_TYPE_Q8_0, 1001, 64, 1, 0, 1);
	printf("matmul: worst error float %.3g (bound 1e-5); quantized %.3g against rounded x (1e-5), %.3g against x "
	       "(3e-2)\n",
	       worst_mm_float, worst_mm_qtight, worst_mm_qloose);

	/* bad jobs are refused with a message */
	struct hs_matmul_job bad = { .type = HS_TYPE_Q8_0, .rows = 4, .cols = 40, .row_bytes = 64, .n = 1 };
	CHECK(hs__matmul_prepare(&bad) == -EINVAL, "matmul accepted 40 columns of Q8_0");
	bad = (struct hs_matmul_job){ .type = HS_TYPE_F16, .rows = 4, .cols = 40, .row_bytes = 60, .n = 1 };
	CHECK(hs__matmul_prepare(&bad) == -EINVAL, "matmul accepted row_bytes under a row");
}

/* ---- embedding rows --------------------------------------------------------- */

static void test_get_rows(void)
{
	const int types[5] = { HS_TYPE_F32, HS_TYPE_F16, HS_TYPE_BF16, HS_TYPE_Q8_0, HS_TYPE_MXFP4 };
	const int ns[3] = { 1, 7, 33 }, rows = 50;

	for (int t = 0; t < 5; t++)
		for (int c = 0; c < 2; c++)
			for (int k = 0; k < 3; k++) {
				const int q = hs__kernel_type_quantized(types[t]),
					  cols = c   ? 2880
						 : q ? 32
						     : 7,
					  n = ns[k];
				const size_t rb = hs__type_row_bytes(types[t], (uint64_t)cols), ys = (size_t)cols + 3;
				const size_t ny = (size_t)(n - 1) * ys + cols;
				uint8_t *w = du_matrix(types[t], rows, cols, rb);
				float *a = du_alloc(sizeof(float) * ny), *b = du_alloc(sizeof(float) * ny);
				int32_t ids[33];
				for (int i = 0; i < n; i++)
					ids[i] = i == 0 ? rows - 1 : i == 1 ? 0 : (int32_t)(du_unif() * rows);
				memset(a, SENTINEL, sizeof(float) * ny);
				memset(b, SENTINEL, sizeof(float) * ny);
				hs__get_rows_ref(types[t], w, rb, cols, n, ids, a, ys);
				hs__get_rows_omp(fast, types[t], w, rb, cols, n, ids, b, ys, 3);
				CHECK(memcmp(a, b, sizeof(float) * ny) == 0,
				      "get_rows %s cols %d n %d differs from the reference", hs__type_name(types[t]),
				      cols, n);
				CHECK(gaps_ok(b, n, ys, cols) && du_guard_ok(b, sizeof(float) * ny),
				      "get_rows wrote outside its rows");
				free(w);
				free(a);
				free(b);
			}
}

/* ---- RMSNorm ------------------------------------------------------------------ */

static void test_rmsnorm(void)
{
	const int cases[8][3] = { { 1, 1, 2880 }, { 7, 1, 1 },   { 5, 1, 37 },   { 3, 8, 64 },
				  { 33, 64, 64 }, { 2, 4, 128 }, { 1, 1, 4101 }, { 130, 1, 256 } };
	double worst = 0;

	for (int c = 0; c < 8; c++) {
		const int n = cases[c][0], nh = cases[c][1], dim = cases[c][2], rowlen = nh * dim;
		const size_t xs = (size_t)rowlen + (c % 3), nx = (size_t)(n - 1) * xs + rowlen;
		for (int v = 0; v < 4; v++) { /* in place or not, weight or not */
			float *x = du_alloc(sizeof(float) * nx), *w = du_alloc(sizeof(float) * dim);
			float *a = du_alloc(sizeof(float) * nx), *b = du_alloc(sizeof(float) * nx);
			int nan = 0;
			du_fill(x, nx, 0.3f, 2.0f);
			du_fill(w, dim, 1, 0.2f);
			const float *wp = v & 1 ? w : NULL, eps = v & 2 ? 1e-6f : 1e-5f;
			memset(a, SENTINEL, sizeof(float) * nx);
			hs__rmsnorm_ref(x, xs, a, xs, n, nh, dim, wp, eps);
			if (v & 2) {
				memcpy(b, x, sizeof(float) * nx); /* in place */
				hs__rmsnorm_omp(fast, b, xs, b, xs, n, nh, dim, wp, eps, 3);
			} else {
				memset(b, SENTINEL, sizeof(float) * nx);
				hs__rmsnorm_omp(fast, x, xs, b, xs, n, nh, dim, wp, eps, 3);
				CHECK(gaps_ok(b, n, xs, rowlen), "rmsnorm wrote between rows");
			}
			double e = du_rel_l2_rows(b, a, n, xs, rowlen, &nan);
			CHECK(e <= 1e-5 && !nan, "rmsnorm n%d heads %d dim %d case %d: error %.3g (bound 1e-5), %d NaN",
			      n, nh, dim, v, e, nan);
			CHECK(du_guard_ok(b, sizeof(float) * nx), "rmsnorm wrote past y");
			worst = e > worst ? e : worst;
			free(x);
			free(w);
			free(a);
			free(b);
		}
	}
	/* the definition on a hand-made row: x = (3, 4), mean square 12.5 */
	float x[2] = { 3, 4 }, y[2], w[2] = { 1, 2 };
	hs__rmsnorm(fast, x, 2, y, 2, 1, 1, 2, w, 0, 0, 1);
	CHECK(fabs(y[0] - 3 / sqrt(12.5)) < 1e-6 && fabs(y[1] - 8 / sqrt(12.5)) < 1e-6, "rmsnorm of (3, 4): %g %g",
	      y[0], y[1]);
	printf("rmsnorm: worst error %.3g (bound 1e-5)\n", worst);
}

/* ---- the read-bandwidth probe's loop --------------------------------------------- */

/* Every word counts once: the XOR of random words, 128-byte multiples from
 * 128 bytes to 64 KiB (the probe cuts its threads' shares to those). */
static void test_xor_read(void)
{
	const size_t most = 65536;
	uint64_t *w = aligned_alloc(64, most);
	uint64_t s = 0x2545f4914f6cdd1dull;
	for (size_t i = 0; i < most / 8; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		w[i] = s;
	}
	for (size_t bytes = 128; bytes <= most; bytes = bytes * 3 / 256 * 128 + 128) {
		uint64_t want = 0;
		for (size_t i = 0; i < bytes / 8; i++)
			want ^= w[i];
		/* with and without the prefetch, its distance short of, inside and past the buffer */
		static const size_t aheads[] = { 0, 64, HS_READ_AHEAD, 1 << 20 };
		for (int k = 0; k < 4; k++) {
			const uint64_t a = hs__dense_ref.xor_read(w, bytes, aheads[k]),
				       b = fast->xor_read(w, bytes, aheads[k]);
			CHECK(a == want && b == want,
			      "xor_read of %zu bytes, %zu ahead: %s %016llx, reference %016llx, want %016llx", bytes,
			      aheads[k], fast->name, (unsigned long long)b, (unsigned long long)a,
			      (unsigned long long)want);
		}
	}
	free(w);
}

/* ---- RoPE -------------------------------------------------------------------------- */

/* ggml's way, written from its definition: theta accumulated by float
 * multiplication, the ramp on the pair index, cos and sin in float. */
static void ggml_style_cs(int n_rot, float base, float freq_scale, float ext, float lo, float hi, int32_t pos,
			  float *cs)
{
	const float theta_scale = powf(base, -2.0f / n_rot);
	float theta = (float)pos, mscale = 1.0f;
	if (ext != 0)
		mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
	for (int i = 0; i < n_rot / 2; i++) {
		float interp = freq_scale * theta, th = interp;
		if (ext != 0) {
			float y = (i - lo) / fmaxf(0.001f, hi - lo);
			float mix = (1 - fminf(1, fmaxf(0, y))) * ext;
			th = interp * (1 - mix) + theta * mix;
		}
		cs[i] = cosf(th) * mscale;
		cs[n_rot / 2 + i] = sinf(th) * mscale;
		theta *= theta_scale;
	}
}

static void test_rope_params(void)
{
	struct hs_rope r;
	float cs[128], gg[128];
	const double mag = 1 + 0.1 * log(32.0), base = 150000;

	/* gpt-oss: 64 dims, base 150000, YaRN factor 32 over 4096 positions */
	CHECK(hs__rope_init(&r, 64, 150000, 1.0f / 32, 1, 1, 32, 1, 4096) == 0, "rope init: %s", hs_last_error());
	CHECK(r.corr_lo == 8 && r.corr_hi == 18, "gpt-oss YaRN ramp bounds %g, %g (8, 18 expected)", r.corr_lo,
	      r.corr_hi);
	hs__rope_fill(&r, 0, cs);
	for (int i = 0; i < 32; i++)
		CHECK(fabs(cs[i] - mag) < 1e-6 && cs[32 + i] == 0, "position 0, pair %d: cos %g (%g), sin %g", i, cs[i],
		      mag, cs[32 + i]);
	const int32_t p = 3000;
	hs__rope_fill(&r, p, cs);
	for (int i = 0; i < 32; i++) {
		const double extrap = p * pow(base, -2.0 * i / 64), interp = extrap / 32;
		const double mix = i <= 8 ? 1 : i >= 18 ? 0 : 1 - (i - 8) / 10.0;
		const double th = interp * (1 - mix) + extrap * mix;
		CHECK(fabs(cs[i] - cos(th) * mag) < 1e-6 && fabs(cs[32 + i] - sin(th) * mag) < 1e-6,
		      "gpt-oss position %d pair %d: (%g, %g), expected (%g, %g)", p, i, cs[i], cs[32 + i],
		      cos(th) * mag, sin(th) * mag);
	}
	/* against ggml's float recurrence: its theta drifts by about i u theta,
	 * at most ~2.5e-4 rad here, times the magnitude 1.35 */
	for (int32_t q = 0; q <= 4096; q += 512) {
		hs__rope_fill(&r, q, cs);
		ggml_style_cs(64, 150000, 1.0f / 32, 1, 8, 18, q, gg);
		for (int i = 0; i < 64; i++)
			CHECK(fabsf(cs[i] - gg[i]) < 1e-3, "position %d value %d: %g, ggml's way %g", q, i, cs[i],
			      gg[i]);
	}
	/* Qwen3: 128 dims, base 1e6, no scaling */
	CHECK(hs__rope_init(&r, 128, 1e6f, 1, 0, 1, 32, 1, 0) == 0, "rope init: %s", hs_last_error());
	hs__rope_fill(&r, 77, cs);
	for (int i = 0; i < 64; i++) {
		const double th = 77 * pow(1e6, -2.0 * i / 128);
		CHECK(fabs(cs[i] - cos(th)) < 1e-6 && fabs(cs[64 + i] - sin(th)) < 1e-6, "qwen3 pair %d: (%g, %g)", i,
		      cs[i], cs[64 + i]);
	}
	CHECK(hs__rope_init(&r, 63, 1e4f, 1, 0, 1, 32, 1, 0) == -EINVAL, "rope accepted an odd n_rot");
}

static void test_rope_ab(void)
{
	/* n_rot, head_dim, heads, n, YaRN */
	const int cases[6][5] = { { 64, 64, 8, 1, 1 }, { 64, 64, 6, 33, 1 }, { 128, 128, 4, 7, 0 },
				  { 32, 64, 3, 5, 0 }, { 36, 40, 2, 9, 1 },  { 80, 80, 1, 130, 0 } };
	double worst = 0;

	for (int c = 0; c < 6; c++) {
		const int n_rot = cases[c][0], D = cases[c][1], nh = cases[c][2], n = cases[c][3];
		const size_t xs = (size_t)nh * D + 5, nx = (size_t)(n - 1) * xs + (size_t)nh * D;
		struct hs_rope r;
		float *x = du_alloc(sizeof(float) * nx), *a = du_alloc(sizeof(float) * nx),
		      *b = du_alloc(sizeof(float) * nx);
		float *cs = du_alloc(sizeof(float) * n * n_rot);
		int32_t *pos = malloc(sizeof *pos * n);
		int nan = 0;
		if (cases[c][4])
			hs__rope_init(&r, n_rot, 150000, 1.0f / 32, 1, 1, 32, 1, 4096);
		else
			hs__rope_init(&r, n_rot, 1e6f, 1, 0, 1, 32, 1, 0);
		for (int t = 0; t < n; t++) /* window edges, the YaRN context, far positions */
			pos[t] = t == 0   ? 4095
				 : t == 1 ? 4096
				 : t == 2 ? 127
				 : t == 3 ? 0
					  : (int32_t)(du_unif() * 200000);
		du_fill(x, nx, 0, 1);
		memcpy(a, x, sizeof(float) * nx);
		memcpy(b, x, sizeof(float) * nx);
		hs__rope_ref(&r, a, xs, n, nh, D, pos);
		hs__rope_fill_omp(&r, n, pos, cs, 3);
		hs__rope_apply_omp(fast, n_rot, b, xs, n, nh, D, cs, 3);
		double e = du_rel_l2_rows(b, a, n, xs, nh * D, &nan);
		CHECK(e <= 1e-6 && !nan, "rope n_rot %d head_dim %d heads %d n %d: error %.3g (bound 1e-6)", n_rot, D,
		      nh, n, e);
		int same = 1; /* dims past n_rot and the gaps between tokens are untouched */
		for (int t = 0; t < n; t++)
			for (int h = 0; h < nh; h++)
				for (int d = n_rot; d < D; d++)
					same &= b[(size_t)t * xs + (size_t)h * D + d] ==
						x[(size_t)t * xs + (size_t)h * D + d];
		for (int t = 0; t + 1 < n; t++)
			for (size_t i = (size_t)t * xs + (size_t)nh * D; i < (size_t)(t + 1) * xs; i++)
				same &= b[i] == x[i];
		CHECK(same && du_guard_ok(b, sizeof(float) * nx) && du_guard_ok(cs, sizeof(float) * n * n_rot),
		      "rope changed values it must not");
		worst = e > worst ? e : worst;
		free(x);
		free(a);
		free(b);
		free(cs);
		free(pos);
	}
	printf("rope: worst error %.3g (bound 1e-6)\n", worst);
}

/* ---- K/V write ---------------------------------------------------------------- */

static void test_kv_store(void)
{
	const int shapes[3][2] = { { 1, 64 }, { 2, 128 }, { 8, 64 } }, ns[3] = { 1, 7, 33 };

	for (int type = 0; type < 2; type++)
		for (int s = 0; s < 3; s++)
			for (int k = 0; k < 3; k++) {
				const int kt = type ? HS_TYPE_Q8_0 : HS_TYPE_F16, kvh = shapes[s][0], D = shapes[s][1];
				const int n = ns[k], n_cells = n + 5;
				const size_t rb = hs__type_row_bytes(kt, (uint64_t)D), cell = kvh * rb + 6;
				const size_t xs = (size_t)kvh * D + 3, total = cell * n_cells;
				float *x = du_alloc(sizeof(float) * n * xs);
				uint8_t *dst = du_alloc(total), *want = malloc(total);
				int32_t *cells = malloc(sizeof *cells * n);
				du_fill(x, n * xs, 0, 3);
				for (int t = 0; t < n; t++) /* distinct cells, in a scrambled order */
					cells[t] = (int32_t)((t * 7 + 3) % n_cells);
				memset(dst, 0x5a, total);
				memset(want, 0x5a, total);
				for (int t = 0; t < n; t++)
					for (int h = 0; h < kvh; h++) {
						const float *src = x + (size_t)t * xs + (size_t)h * D;
						uint8_t *d = want + (size_t)cells[t] * cell + (size_t)h * rb;
						if (kt == HS_TYPE_Q8_0)
							hs__kernels_ref.quantize_q8_0(
								src, (struct hs_block_q8_0 *)(void *)d, D);
						else
							for (int i = 0; i < D; i++) {
								uint16_t v = hs__fp32_to_fp16(src[i]);
								memcpy(d + 2 * i, &v, 2);
							}
					}
				hs__kv_store_omp(kfast, fast, kt, x, xs, n, kvh, D, cells, dst, cell, rb, 3);
				CHECK(memcmp(dst, want, total) == 0 && du_guard_ok(dst, total),
				      "kv store %s heads %d dim %d n %d: cells differ from the reference",
				      hs__type_name(kt), kvh, D, n);
				free(x);
				free(dst);
				free(want);
				free(cells);
			}
}

/* ---- router ---------------------------------------------------------------------- */

static void test_gating(void)
{
	const float l[6] = { 1, 3, 3, 2, 3, -1 };
	int32_t ids[4];
	float w[4];

	hs__gating_topk_softmax_f(l, 6, 2, ids, w);
	CHECK(ids[0] == 1 && ids[1] == 2 && fabsf(w[0] - 0.5f) < 1e-7f, "ties: ids %d %d (1 2), w %g", ids[0], ids[1],
	      w[0]);
	hs__gating_topk_softmax_f(l, 6, 4, ids, w);
	CHECK(ids[0] == 1 && ids[1] == 2 && ids[2] == 4 && ids[3] == 3, "ties, k 4: ids %d %d %d %d (1 2 4 3)", ids[0],
	      ids[1], ids[2], ids[3]);
	/* qwen3moe's definition (softmax over all, top-k, renormalised) */
	float lg[16];
	double z = 0, p[16], zk = 0;
	du_fill(lg, 16, 0, 2);
	for (int e = 0; e < 16; e++)
		z += p[e] = exp(lg[e]);
	hs__gating_topk_softmax_f(lg, 16, 4, ids, w);
	for (int j = 0; j < 4; j++)
		zk += p[ids[j]] / z;
	for (int j = 0; j < 4; j++)
		CHECK(fabs(w[j] - p[ids[j]] / z / zk) < 1e-6, "renormalised softmax weight %d: %g against %g", j, w[j],
		      p[ids[j]] / z / zk);
	for (int e = 0; e < 16; e++) {
		int in = 0;
		for (int j = 0; j < 4; j++)
			in |= ids[j] == e;
		CHECK(in || lg[e] <= lg[ids[3]], "expert %d (logit %g) left out of the top 4", e, lg[e]);
	}
}

/* glm4moe's gating by its definition (llama.cpp's build_moe_ffn): the bias
 * picks, the unbiased scores weigh; normalised (sum clamped at 2^-14) and
 * scaled; softmax scores when the file says so; both precisions. */
static void test_gating_sel(void)
{
	const float lg[4] = { 0, 0, 2, 1 }, bias[4] = { 3, 0, 0, 0 };
	const double lgd[4] = { 0, 0, 2, 1 };
	struct hs_moe_layer l = { .arch = &hs__arch_glm4moe, .n_experts = 4, .n_used = 2,
				  .sel = { .bias = bias, .norm = 0, .scale = 2.5f } };
	const double s0 = 0.5, s2 = 1 / (1 + exp(-2.0));
	int32_t ids[2];
	float w[2];

	for (int prec = 0; prec < 2; prec++) {
		for (int norm = 0; norm < 2; norm++) {
			l.sel.norm = norm;
			if (prec)
				hs__gating_sel(&l, lgd, ids, w);
			else
				hs__gating_sel_f(&l, lg, ids, w);
			/* picks: 0.5 + 3, 0.5, 0.88, 0.73: experts 0 and 2; weighed 0.5 and 0.88 */
			const double d = norm ? s0 + s2 : 1;
			CHECK(ids[0] == 0 && ids[1] == 2 && fabs(w[0] - 2.5 * s0 / d) < 1e-6 && fabs(w[1] - 2.5 * s2 / d) < 1e-6,
			      "sigmoid gating (%s, norm %d): ids %d %d (0 2), weights %g %g (%g %g)", prec ? "double" : "float",
			      norm, ids[0], ids[1], w[0], w[1], 2.5 * s0 / d, 2.5 * s2 / d);
		}
		/* every score far below zero: the sum is clamped, not divided by ~0 */
		const float lo[4] = { -40, -41, -42, -43 };
		const double lod[4] = { -40, -41, -42, -43 };
		l.sel = (struct hs_moe_sel){ .norm = 1, .scale = 1 };
		if (prec)
			hs__gating_sel(&l, lod, ids, w);
		else
			hs__gating_sel_f(&l, lo, ids, w);
		CHECK(ids[0] == 0 && ids[1] == 1 && isfinite(w[0]) && w[0] < 1e-9f, "clamped sum: ids %d %d, weight %g",
		      ids[0], ids[1], w[0]);
		/* softmax scores (expert_gating_func 1), bias on expert 3 */
		const float b3[4] = { 0, 0, 0, 1 };
		l.sel = (struct hs_moe_sel){ .bias = b3, .softmax = 1, .norm = 0, .scale = 1 };
		if (prec)
			hs__gating_sel(&l, lgd, ids, w);
		else
			hs__gating_sel_f(&l, lg, ids, w);
		double z = 2 + exp(2.0) + exp(1.0);
		CHECK(ids[0] == 3 && ids[1] == 2 && fabs(w[0] - exp(1.0) / z) < 1e-6 && fabs(w[1] - exp(2.0) / z) < 1e-6,
		      "softmax gating with a bias: ids %d %d (3 2), weights %g %g", ids[0], ids[1], w[0], w[1]);
		l.sel = (struct hs_moe_sel){ .bias = bias, .norm = 0, .scale = 2.5f };
	}
}

static void ab_router(const struct hs_moe_arch *arch, int rtype, int D, int E, int K, int n, int *near_ties)
{
	const size_t rb = hs__type_row_bytes(rtype, (uint64_t)D);
	uint8_t *w = du_matrix(rtype, E, D, rb);
	float *b = malloc(sizeof(float) * E), *x = malloc(sizeof(float) * n * D), *lg = malloc(sizeof(float) * n * E);
	int32_t *ia = malloc(sizeof(int32_t) * n * K), *ib = du_alloc(sizeof(int32_t) * n * K);
	float *wa = malloc(sizeof(float) * n * K), *wb = du_alloc(sizeof(float) * n * K);
	struct hs_moe_layer l = { .arch = arch,
				  .n_embd = D,
				  .n_experts = E,
				  .n_used = K,
				  .router_type = rtype,
				  .router = w,
				  .router_b = arch->has_bias ? b : NULL };
	if (arch->gating_sel) /* glm4moe: the bias picks; weights normalised, scaled as GLM-4.5's 2.5 */
		l.sel = (struct hs_moe_sel){ .bias = b, .norm = 1, .scale = 2.5f };

	du_fill(b, E, 0, 0.5f);
	du_fill(x, (size_t)n * D, 0, 1);
	CHECK(hs__moe_route_ref(&l, n, x, ia, wa) == 0, "reference router: %s", hs_last_error());
	struct hs_matmul_job mj = { .type = rtype,
				    .rows = E,
				    .cols = D,
				    .w = w,
				    .row_bytes = rb,
				    .bias = l.router_b,
				    .n = n,
				    .x = x,
				    .x_stride = D,
				    .y = lg,
				    .y_stride = E };
	hs__matmul_ref(&mj);
	if (arch->gating_sel) /* the choice is made on sigmoid scores + bias: the gaps are there */
		for (int i = 0; i < n * E; i++)
			lg[i] = 1 / (1 + expf(-lg[i])) + b[i % E];
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 0) {
			struct hs_route_job j = { .layer = &l, .dops = fast, .n = n, .x = x, .ids = ib, .weights = wb };
			j.scratch = du_alloc(hs__route_scratch_bytes(&l, n));
			CHECK(hs__route_run_omp(&j, 3) == 0, "router: %s", hs_last_error());
			free(j.scratch);
		} else {
			CHECK(hs__moe_route(&l, n, x, ib, wb) == 0, "router: %s", hs_last_error());
		}
		CHECK(du_guard_ok(ib, sizeof(int32_t) * n * K) && du_guard_ok(wb, sizeof(float) * n * K),
		      "router wrote past its outputs");
		for (int t = 0; t < n; t++) {
			/* the smallest gap around and inside the top k decides what must match */
			float s[512];
			memcpy(s, lg + (size_t)t * E, sizeof(float) * E);
			double gap = INFINITY;
			for (int j = 0; j <= K && j < E; j++) {
				int bi = j;
				for (int e = j + 1; e < E; e++)
					bi = s[e] > s[bi] ? e : bi;
				float tmp = s[j];
				s[j] = s[bi];
				s[bi] = tmp;
				if (j > 0)
					gap = fmin(gap, (double)s[j - 1] - s[j]);
			}
			if (gap <= 1e-4) {
				(*near_ties)++;
				continue;
			}
			for (int j = 0; j < K; j++) {
				const size_t i = (size_t)t * K + j;
				CHECK(ia[i] == ib[i] && fabsf(wa[i] - wb[i]) <= 1e-5f,
				      "router %s %s D%d E%d K%d token %d slot %d: id %d weight %g, reference %d %g",
				      arch->name, hs__type_name(rtype), D, E, K, t, j, ib[i], wb[i], ia[i], wa[i]);
			}
		}
	}
	free(w);
	free(b);
	free(x);
	free(lg);
	free(ia);
	free(ib);
	free(wa);
	free(wb);
}

static void test_router(void)
{
	const int types[3] = { HS_TYPE_F32, HS_TYPE_F16, HS_TYPE_BF16 };
	int near_ties = 0;

	for (int t = 0; t < 3; t++) {
		ab_router(&hs__arch_gpt_oss, types[t], 2880, 128, 4, small ? 3 : 40, &near_ties);
		ab_router(&hs__arch_qwen3moe, types[t], 64, 32, 8, 7, &near_ties);
		ab_router(&hs__arch_qwen3moe, types[t], 256, 128, 8, 1, &near_ties);
	}
	ab_router(&hs__arch_gpt_oss, HS_TYPE_F32, 96, 16, 16, 5, &near_ties); /* k = all experts */
	ab_router(&hs__arch_glm4moe, HS_TYPE_F32, 256, 128, 8, 9, &near_ties);
	ab_router(&hs__arch_glm4moe, HS_TYPE_F32, 64, 16, 4, 3, &near_ties);
	printf("router: ids and weights match the double reference (%d token%s skipped as near-ties)\n", near_ties,
	       near_ties == 1 ? "" : "s");
}

int main(void)
{
	const struct hs_cpu_features *f = hs__cpu_features();
	const struct hs_dense_ops *tiers[2] = { f->use_avx2 ? hs__dense_avx2() : NULL,
						f->use_avx512 ? hs__dense_avx512() : NULL };
	int ran = 0;

	kfast = hs__kernels_best();
	small = du_sanitized();
	for (int i = 0; i < 2 || !ran; i++) {
		fast = i < 2 ? tiers[i] : &hs__dense_ref;
		if (!fast)
			continue;
		ran++;
		printf("dense ops under test: %s (twin: %s); expert tiles: %s\n", fast->name, hs__dense_ref.name,
		       kfast->name);
		test_matmul();
		test_get_rows();
		test_rmsnorm();
		test_rope_params();
		test_rope_ab();
		test_kv_store();
		test_router();
		test_xor_read();
	}
	test_gating();
	test_gating_sel();
	return hs_test_end();
}
