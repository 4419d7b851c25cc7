/* AVX2 + FMA + F16C inner loops of the dense ops, compiled with those flags
 * in a file of their own and used only when CPUID says the CPU has them
 * (hs__dense_best()).  Arithmetic in float; see each op's error bound in
 * tests/test-dense.c. */
#include "config.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_kernels/arch/x86/dense-x86.h"
#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/attention.h"

static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

/* Lane r of the result is the sum of the lanes of a[r]: eight dot
 * products finished in nine instructions. */
static inline __m256 hsum8(const __m256 *a)
{
	__m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
	__m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
	return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

/* e^x for x <= 88, 0 below -87 (also for -inf): 2^n * p(r) with
 * r = x - n ln 2 in [-ln2/2, ln2/2], p of degree 6 (relative error < 3e-7,
 * a few ulp). */
static inline __m256 exp256(__m256 x)
{
	const __m256 big = _mm256_set1_ps(88.0f), tiny = _mm256_set1_ps(-87.0f);
	__m256 zero_mask = _mm256_cmp_ps(x, tiny, _CMP_GE_OQ);
	x = _mm256_max_ps(_mm256_min_ps(x, big), tiny);
	__m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
				   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
	r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
	__m256 p = _mm256_set1_ps(1.0f / 720);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	__m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
	p = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
	return _mm256_and_ps(p, zero_mask);
}

/* ---- float matrix tiles ---------------------------------------------------- */

/* 8 values of a row at column c as f32 (type is a constant at each call). */
static inline __m256 load8(int type, const uint8_t *row, int c)
{
	if (type == HS_TYPE_F16)
		return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)c)));
	if (type == HS_TYPE_BF16)
		return _mm256_castsi256_ps(_mm256_slli_epi32(
			_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * (size_t)c))),
			16));
	return _mm256_loadu_ps((const float *)(const void *)row + c);
}

/* (clang-format cannot lay out _Pragma loops) */
/* clang-format off */
/* NR rows (1, 2 or 4) against NT tokens (1..4), accumulators in
 * registers; columns past the last multiple of 8 in a scalar tail. */
static inline __attribute__((always_inline)) void rows_tokens(int type, const uint8_t *w, size_t rb, int NR,
							       int ncols, const float *const *x, int NT,
							       float *const *out, int col)
{
	__m256 acc[4][4];
	int c = 0;

	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			acc[i][j] = _mm256_setzero_ps();
	for (; c + 8 <= ncols; c += 8) {
		__m256 wv[4];
		_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
			wv[i] = load8(type, w + i * rb, c);
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			__m256 xv = _mm256_loadu_ps(x[j] + c);
			_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
				acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
		}
	}
	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			float s = hsum(acc[i][j]);
			for (int cc = c; cc < ncols; cc++)
				s += hs__dense_elem(type, w + i * rb, cc) * x[j][cc];
			out[j][col + i] = s;
		}
}
/* clang-format on */

/* One row against one token (decode): four accumulators over 32 columns
 * a step, so the row is one sequential stream for the prefetchers. */
static inline __attribute__((always_inline)) float row_dot(int type, const uint8_t *w, int ncols, const float *x)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int c = 0;

	for (; c + 32 <= ncols; c += 32) {
		a0 = _mm256_fmadd_ps(load8(type, w, c), _mm256_loadu_ps(x + c), a0);
		a1 = _mm256_fmadd_ps(load8(type, w, c + 8), _mm256_loadu_ps(x + c + 8), a1);
		a2 = _mm256_fmadd_ps(load8(type, w, c + 16), _mm256_loadu_ps(x + c + 16), a2);
		a3 = _mm256_fmadd_ps(load8(type, w, c + 24), _mm256_loadu_ps(x + c + 24), a3);
	}
	for (; c + 8 <= ncols; c += 8)
		a0 = _mm256_fmadd_ps(load8(type, w, c), _mm256_loadu_ps(x + c), a0);
	float s = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	for (; c < ncols; c++)
		s += hs__dense_elem(type, w, c) * x[c];
	return s;
}

#define TILE_ROWS 2
#define TILE_F tile_tokens
#include "cpu_kernels/arch/x86/dense-tile.h"

/* Decode: one row at a time, one sequential stream each (with four rows
 * interleaved, F16 rows streamed from DRAM at 15-21 GB/s, one at a time
 * 36-39). */
void hs__tile_f_avx2(int type, const uint8_t *w, size_t rb, int r0, int r1, int ncols, const float *const *x, int nt,
		     float *const *out)
{
	if (nt > 1) {
		tile_tokens(type, w, rb, r0, r1, ncols, x, nt, out);
		return;
	}
	for (int r = r0; r < r1; r++)
		out[0][r - r0] = type == HS_TYPE_F16    ? row_dot(HS_TYPE_F16, w + (size_t)r * rb, ncols, x[0])
				 : type == HS_TYPE_BF16 ? row_dot(HS_TYPE_BF16, w + (size_t)r * rb, ncols, x[0])
							: row_dot(HS_TYPE_F32, w + (size_t)r * rb, ncols, x[0]);
}

/* ---- rows ---------------------------------------------------------------------- */

/* n values (a multiple of 32) of Q8_0 blocks to f32. */
static inline __attribute__((always_inline)) void q8_row(const void *src, float *dst, int n)
{
	for (int b = 0; b < n / HS_QK; b++) {
		const struct hs_block_q8_0 *blk = (const struct hs_block_q8_0 *)src + b;
		const __m256 d = _mm256_set1_ps(_cvtsh_ss(blk->d));
		for (int k = 0; k < HS_QK; k += 8) {
			__m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(blk->qs + k)));
			_mm256_storeu_ps(dst + b * HS_QK + k, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
		}
	}
}

void hs__dequant_row_avx2(int type, const void *src, float *dst, int n)
{
	const uint8_t *s = src;
	int i = 0;

	switch (type) {
	case HS_TYPE_F16:
	case HS_TYPE_BF16:
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(dst + i, load8(type, s, i));
		for (; i < n; i++)
			dst[i] = hs__dense_elem(type, s, i);
		break;
	case HS_TYPE_Q8_0: q8_row(src, dst, n); break;
	default: hs__dequantize_row_ref(type, src, dst, (size_t)n); break;
	}
}

void hs__rmsnorm_row_avx2(const float *x, float *y, int n, const float *w, float eps)
{
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int i = 0;

	for (; i + 32 <= n; i += 32) {
		__m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
		__m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
		a0 = _mm256_fmadd_ps(v0, v0, a0);
		a1 = _mm256_fmadd_ps(v1, v1, a1);
		a2 = _mm256_fmadd_ps(v2, v2, a2);
		a3 = _mm256_fmadd_ps(v3, v3, a3);
	}
	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);
		a0 = _mm256_fmadd_ps(v, v, a0);
	}
	double ss = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
	for (; i < n; i++)
		ss += (double)x[i] * x[i];
	const float scale = (float)(1.0 / sqrt(ss / n + eps));
	const __m256 sv = _mm256_set1_ps(scale);
	for (i = 0; i + 8 <= n; i += 8) {
		__m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), sv);
		_mm256_storeu_ps(y + i, w ? _mm256_mul_ps(v, _mm256_loadu_ps(w + i)) : v);
	}
	for (; i < n; i++)
		y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void hs__rope_row_avx2(float *x, int n_rot, const float *cs)
{
	const int h = n_rot / 2;
	int i = 0;

	for (; i + 8 <= h; i += 8) {
		__m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + h + i);
		__m256 c = _mm256_loadu_ps(cs + i), s = _mm256_loadu_ps(cs + h + i);
		_mm256_storeu_ps(x + i, _mm256_fmsub_ps(x0, c, _mm256_mul_ps(x1, s)));
		_mm256_storeu_ps(x + h + i, _mm256_fmadd_ps(x0, s, _mm256_mul_ps(x1, c)));
	}
	for (; i < h; i++) {
		float x0 = x[i], x1 = x[h + i];
		x[i] = x0 * cs[i] - x1 * cs[h + i];
		x[h + i] = x0 * cs[h + i] + x1 * cs[i];
	}
}

void hs__to_f16_avx2(const float *x, uint16_t *y, int n)
{
	int i = 0;
	for (; i + 8 <= n; i += 8)
		_mm_storeu_si128(
			(__m128i *)(void *)(y + i),
			_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
	for (; i < n; i++)
		y[i] = hs__fp32_to_fp16(x[i]);
}

/* ---- attention ----------------------------------------------------------------- */

/* (clang-format cannot lay out _Pragma loops) */
/* clang-format off */
/* Visible cells are gathered into blocks of B (a multiple of 8) and their
 * K and V rows converted to f32 once, for all g query heads.  Per head:
 * scores of 8 cells at a time (8 accumulators, one transposing sum), the
 * online softmax update, then V accumulated into o 64 values (8
 * registers) at a time. */
static void attend_block(const struct hs_attn_tile *t, const int *idx, int nv, int B, float *kf, float *vf,
			 float *sc)
{
	const int D = t->head_dim, nv8 = (nv + 7) & ~7;
	const __m256 scale = _mm256_set1_ps(t->scale), ninf = _mm256_set1_ps(-INFINITY);

	/* the type test outside the loops: one conversion per value, no calls */
	if (t->kv_type == HS_TYPE_F16)
		for (int r = 0; r < nv; r++) {
			const uint8_t *kr = t->k + (size_t)idx[r] * t->k_cell, *vr = t->v + (size_t)idx[r] * t->v_cell;
			for (int d = 0; d < D; d += 8) {
				_mm256_storeu_ps(kf + (size_t)r * D + d, load8(HS_TYPE_F16, kr, d));
				_mm256_storeu_ps(vf + (size_t)r * D + d, load8(HS_TYPE_F16, vr, d));
			}
		}
	else
		for (int r = 0; r < nv; r++) {
			q8_row(t->k + (size_t)idx[r] * t->k_cell, kf + (size_t)r * D, D);
			q8_row(t->v + (size_t)idx[r] * t->v_cell, vf + (size_t)r * D, D);
		}
	if (nv8 > nv)
		memset(kf + (size_t)nv * D, 0, sizeof(float) * D * (nv8 - nv));
	for (int i = 0; i < t->g; i++) {
		const float *q = t->q + (size_t)i * D;
		float *s = sc + (size_t)i * B, *o = t->o + (size_t)i * D;
		for (int c8 = 0; c8 < nv8; c8 += 8) {
			__m256 acc[8];
			for (int r = 0; r < 8; r++)
				acc[r] = _mm256_setzero_ps();
			for (int d = 0; d < D; d += 8) {
				const __m256 qv = _mm256_loadu_ps(q + d);
				_Pragma("GCC unroll 8") for (int r = 0; r < 8; r++)
					acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(kf + (size_t)(c8 + r) * D + d), qv, acc[r]);
			}
			__m256 sv = _mm256_mul_ps(hsum8(acc), scale);
			if (c8 + 8 > nv) { /* padding lanes of the last group */
				__m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
				sv = _mm256_blendv_ps(sv, ninf, _mm256_cmp_ps(lane, _mm256_set1_ps((float)(nv - c8)), _CMP_GE_OQ));
			}
			_mm256_storeu_ps(s + c8, sv);
		}
		__m256 mv = ninf;
		for (int c8 = 0; c8 < nv8; c8 += 8)
			mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + c8));
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		const float mb = _mm_cvtss_f32(m4), m_new = mb > t->m[i] ? mb : t->m[i];
		const float alpha = t->m[i] == -INFINITY ? 0.0f : expf(t->m[i] - m_new);
		const __m256 mn = _mm256_set1_ps(m_new);
		__m256 lsum = _mm256_setzero_ps();
		for (int c8 = 0; c8 < nv8; c8 += 8) {
			__m256 p = exp256(_mm256_sub_ps(_mm256_loadu_ps(s + c8), mn));
			lsum = _mm256_add_ps(lsum, p);
			_mm256_storeu_ps(s + c8, p);
		}
		t->l[i] = t->l[i] * alpha + hsum(lsum);
		t->m[i] = m_new;
		const __m256 av = _mm256_set1_ps(alpha);
		int d = 0;
		for (; d + 64 <= D; d += 64) {
			__m256 ov[8];
			_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
				ov[k] = _mm256_mul_ps(_mm256_loadu_ps(o + d + 8 * k), av);
			for (int r = 0; r < nv; r++) {
				const __m256 p = _mm256_broadcast_ss(s + r);
				const float *vr = vf + (size_t)r * D + d;
				_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
					ov[k] = _mm256_fmadd_ps(_mm256_loadu_ps(vr + 8 * k), p, ov[k]);
			}
			_Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)
				_mm256_storeu_ps(o + d + 8 * k, ov[k]);
		}
		for (; d < D; d += 8) {
			__m256 ov = _mm256_mul_ps(_mm256_loadu_ps(o + d), av);
			for (int r = 0; r < nv; r++)
				ov = _mm256_fmadd_ps(_mm256_loadu_ps(vf + (size_t)r * D + d), _mm256_broadcast_ss(s + r), ov);
			_mm256_storeu_ps(o + d, ov);
		}
	}
}
/* clang-format on */

#define ATTEND hs__attend_avx2
#define ATTEND_B(D) ((HS_ATTN_BLOCK_VALUES / (D) < 32 ? HS_ATTN_BLOCK_VALUES / (D) : 32) & ~7)
#include "cpu_kernels/arch/x86/dense-attend.h"

uint64_t hs__xor_read_avx2(const void *p, size_t bytes, size_t ahead)
{
	const __m256i *v = p;
	const size_t n = bytes / 32, stop = ahead && ahead < bytes ? (bytes - ahead) / 32 : 0;
	__m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
	size_t i = 0;
	/* while the prefetches stay inside: two lines ahead each 128 bytes */
	for (; i + 4 <= stop; i += 4) {
		_mm_prefetch((const char *)(v + i) + ahead, _MM_HINT_T1);
		_mm_prefetch((const char *)(v + i) + ahead + 64, _MM_HINT_T1);
		a = _mm256_xor_si256(a, _mm256_load_si256(v + i));
		b = _mm256_xor_si256(b, _mm256_load_si256(v + i + 1));
		c = _mm256_xor_si256(c, _mm256_load_si256(v + i + 2));
		d = _mm256_xor_si256(d, _mm256_load_si256(v + i + 3));
	}
	for (; i < n; i += 4) {
		a = _mm256_xor_si256(a, _mm256_load_si256(v + i));
		b = _mm256_xor_si256(b, _mm256_load_si256(v + i + 1));
		c = _mm256_xor_si256(c, _mm256_load_si256(v + i + 2));
		d = _mm256_xor_si256(d, _mm256_load_si256(v + i + 3));
	}
	a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
	return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 1) ^
	       (uint64_t)_mm256_extract_epi64(a, 2) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}

static const struct hs_dense_ops avx2_ops = {
	"AVX2",          hs__tile_f_avx2, hs__dequant_row_avx2, hs__rmsnorm_row_avx2, hs__rope_row_avx2,
	hs__to_f16_avx2, hs__attend_avx2, NULL, hs__dn_chunk_avx2,    hs__xor_read_avx2
};

const struct hs_dense_ops *hs__dense_avx2(void)
{
	return &avx2_ops;
}
