/* AVX2 + FMA + F16C kernels, compiled with those flags in a file of their
 * own and used only when CPUID says the CPU has them (hs__kernels_best()).
 *
 * Weight blocks are turned into signed int8 (MXFP4 through a 16-entry
 * table shuffle), multiplied with Q8_0 activations by vpmaddubsw on
 * |w| and sign(x, w), summed to int32 and scaled per block in float.  Up to
 * four tokens share one decoded weight block (prefill reuse). */
#include "config.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>

#include "cpu_kernels/kernels.h"

static float e8m0_half[256]; /* 2^(e-128), filled once */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void fill_table(void)
{
	for (int e = 0; e < 256; e++)
		e8m0_half[e] = hs__e8m0_to_fp32_half((uint8_t)e);
}

static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static void quantize_q8_0_avx2(const float *x, struct hs_block_q8_0 *y, int n)
{
	const __m256 sign = _mm256_set1_ps(-0.0f);
	const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);

	for (int b = 0; b < n / HS_QK; b++) {
		const float *p = x + b * HS_QK;
		__m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
		__m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
		__m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
					 _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
		__m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
		m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
		m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
		float d = _mm_cvtss_f32(m4) / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
		__m256 s = _mm256_set1_ps(id);

		y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
		/* vcvtps2dq rounds half to even, as the reference's nearbyintf */
		__m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, s)), i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, s));
		__m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, s)), i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, s));
		__m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
		_mm256_storeu_si256((__m256i *)y[b].qs, _mm256_permutevar8x32_epi32(q, perm));
	}
}

/* Signed int8 weights of block b of a row. */
static inline __m256i load_w(int type, const uint8_t *row, int b, const __m256i table, float *scale)
{
	if (type == HS_TYPE_MXFP4) {
		const struct hs_block_mxfp4 *blk = (const struct hs_block_mxfp4 *)row + b;
		__m128i q = _mm_loadu_si128((const __m128i *)blk->qs);
		/* low lane: low nibbles (elements 0..15), high lane: high ones */
		__m256i qq = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
		*scale = e8m0_half[blk->e];
		return _mm256_shuffle_epi8(table, qq);
	}
	const struct hs_block_q8_0 *blk = (const struct hs_block_q8_0 *)row + b;
	*scale = _cvtsh_ss(blk->d);
	return _mm256_loadu_si256((const __m256i *)blk->qs);
}

#define MAX_BLOCKS 2048 /* 65536 columns, the largest row hotset accepts */

/* NR rows (1 or 2) against NT tokens (1..4).  NR and NT are constants in
 * each call, so the NR * NT accumulators stay in registers; the token's
 * block scales come converted to float (dx[j][b]) and each token block is
 * loaded once for both rows. */
static inline __attribute__((always_inline)) void rows_tokens(int type, const uint8_t *row, size_t row_bytes,
							       int NR, int nb, const struct hs_block_q8_0 *const *x,
							       const float (*dx)[MAX_BLOCKS], int NT, float *const *out,
							       int col)
{
	const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hs__mxfp4_values));
	const __m256i ones = _mm256_set1_epi16(1);
	__m256 acc[2][4];

	_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			acc[i][j] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		float sw[2];
		__m256i w[2], aw[2];
		_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++) {
			w[i] = load_w(type, row + i * row_bytes, b, table, &sw[i]);
			aw[i] = _mm256_sign_epi8(w[i], w[i]);
		}
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			__m256i xv = _mm256_loadu_si256((const __m256i *)x[j][b].qs);
			_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++) {
				__m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aw[i], _mm256_sign_epi8(xv, w[i])), ones);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(sw[i] * dx[j][b]), acc[i][j]);
			}
		}
	}
	_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			out[j][col + i] = hsum(acc[i][j]);
}

/* Decode fast path for MXFP4 rows against one token.  The table gives the
 * nibble's value + 12, an unsigned byte (at most 24, so vpmaddubsw with
 * signed activations cannot saturate), which drops the two sign operations;
 * the 12 * sum(x) this adds per block is taken off in the integer lanes.
 * The token's block scale comes pre-broadcast, so one vmulps and one
 * vbroadcastss of the exponent's value make the block's scale vector. */
/* tscale[b]: the token's block scale in all lanes; tcorr[b]: 12 * sum(x)
 * of block b in lane 0 (both on the caller's stack, 64 bytes a block) */
static void prepare_token(const struct hs_block_q8_0 *x, int nb, __m256 *tscale, __m256i *tcorr)
{
	const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
	for (int b = 0; b < nb; b++) {
		__m256i xv = _mm256_loadu_si256((const __m256i *)x[b].qs);
		__m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, xv), ones16);
		__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
		s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
		tcorr[b] = _mm256_setr_epi32(12 * _mm_cvtsi128_si32(s4), 0, 0, 0, 0, 0, 0, 0);
		tscale[b] = _mm256_set1_ps(_cvtsh_ss(x[b].d));
	}
}

static void rows_mxfp4_one(const uint8_t *w, size_t row_bytes, int r0, int r1, int nb,
			   const struct hs_block_q8_0 *x, const __m256 *tscale, const __m256i *tcorr, float *out)
{
	static const int8_t plus12[16] = { 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0 };
	const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)plus12));
	const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);

	for (int r = r0; r < r1; r++) {
		const struct hs_block_mxfp4 *blk = (const struct hs_block_mxfp4 *)(w + (size_t)r * row_bytes);
		__m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
#define BLOCK(b, acc)                                                                                        \
	do {                                                                                                 \
		__m128i q = _mm_loadu_si128((const __m128i *)blk[b].qs);                                     \
		__m256i wu = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4)); \
		__m256i xv = _mm256_loadu_si256((const __m256i *)x[b].qs);                                   \
		__m256i p = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wu, xv), ones), tcorr[b]); \
		__m256 sc = _mm256_mul_ps(_mm256_broadcast_ss(&e8m0_half[blk[b].e]), tscale[b]);            \
		acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, acc);                                       \
	} while (0)
		/* two accumulators, so the FMA latency is not on the critical path */
		int b = 0;
		for (; b + 2 <= nb; b += 2) {
			BLOCK(b, acc0);
			BLOCK(b + 1, acc1);
		}
		if (b < nb)
			BLOCK(b, acc0);
#undef BLOCK
		out[r - r0] = hsum(_mm256_add_ps(acc0, acc1));
	}
}

/* Prefill tile for MXFP4, the unsigned form of rows_mxfp4_one for NR rows
 * and NT tokens: per block and row one shuffle and one exponent broadcast,
 * per block, row and token a multiply-add chain of six operations. */
static inline __attribute__((always_inline)) void rows_tokens_mxfp4(const uint8_t *row, size_t row_bytes, int NR,
								     int nb, const struct hs_block_q8_0 *const *x,
								     const __m256 *tscale, const __m256i *tcorr, int NT,
								     float *const *out, int col)
{
	static const int8_t plus12[16] = { 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0 };
	const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)plus12));
	const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
	__m256 acc[2][4];

	_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			acc[i][j] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		__m256i wu[2];
		__m256 sw[2];
		_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++) {
			const struct hs_block_mxfp4 *blk = (const struct hs_block_mxfp4 *)(row + i * row_bytes) + b;
			__m128i q = _mm_loadu_si128((const __m128i *)blk->qs);
			wu[i] = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
			sw[i] = _mm256_broadcast_ss(&e8m0_half[blk->e]);
		}
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			__m256i xv = _mm256_loadu_si256((const __m256i *)x[j][b].qs);
			_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++) {
				__m256i p = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wu[i], xv), ones),
							     tcorr[j * nb + b]);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(sw[i], tscale[j * nb + b]),
							    acc[i][j]);
			}
		}
	}
	_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			out[j][col + i] = hsum(acc[i][j]);
}

#define ROWS_TOKENS_MXFP4(NT)                                                                                 \
	do {                                                                                                  \
		int r = r0;                                                                                   \
		for (; r + 2 <= r1; r += 2)                                                                   \
			rows_tokens_mxfp4(w + (size_t)r * row_bytes, row_bytes, 2, nb, x + j0, tscale, tcorr, NT, \
					  out + j0, r - r0);                                                  \
		for (; r < r1; r++)                                                                           \
			rows_tokens_mxfp4(w + (size_t)r * row_bytes, row_bytes, 1, nb, x + j0, tscale, tcorr, NT, \
					  out + j0, r - r0);                                                  \
	} while (0)

/* Rows up to this many blocks take the unsigned MXFP4 prefill tile (its
 * per-token arrays, 4 x 64 bytes a block, live on the stack). */
#define MXFP4_TILE_MAX_BLOCKS 512

static void tile_mxfp4_prefill(const uint8_t *w, size_t row_bytes, int r0, int r1, int nb,
			       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	__m256 tscale[4 * nb];
	__m256i tcorr[4 * nb];

	for (int j0 = 0; j0 < nt; j0 += 4) {
		int jn = nt - j0 < 4 ? nt - j0 : 4;
		for (int j = 0; j < jn; j++)
			prepare_token(x[j0 + j], nb, tscale + j * nb, tcorr + j * nb);
		switch (jn) {
		case 4: ROWS_TOKENS_MXFP4(4); break;
		case 3: ROWS_TOKENS_MXFP4(3); break;
		case 2: ROWS_TOKENS_MXFP4(2); break;
		default: ROWS_TOKENS_MXFP4(1); break;
		}
	}
}

#define ROWS_TOKENS(NT)                                                                                          \
	do {                                                                                                     \
		int r = r0;                                                                                      \
		for (; NT > 1 && r + 2 <= r1; r += 2)                                                            \
			rows_tokens(type, w + (size_t)r * row_bytes, row_bytes, 2, nb, x + j0, dx, NT, out + j0, r - r0); \
		for (; r < r1; r++)                                                                              \
			rows_tokens(type, w + (size_t)r * row_bytes, row_bytes, 1, nb, x + j0, dx, NT, out + j0, r - r0); \
	} while (0)

static void tile_q_avx2(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK;
	float dx[4][MAX_BLOCKS];

	if (nt == 1 && type == HS_TYPE_MXFP4) {
		/* at most 128 KiB for the longest row hotset accepts; no heap */
		__m256 tscale[nb];
		__m256i tcorr[nb];
		prepare_token(x[0], nb, tscale, tcorr);
		rows_mxfp4_one(w, row_bytes, r0, r1, nb, x[0], tscale, tcorr, out[0]);
		return;
	}
	if (type == HS_TYPE_MXFP4 && nb <= MXFP4_TILE_MAX_BLOCKS) {
		tile_mxfp4_prefill(w, row_bytes, r0, r1, nb, x, nt, out);
		return;
	}
	for (int j0 = 0; j0 < nt; j0 += 4) {
		int jn = nt - j0 < 4 ? nt - j0 : 4;
		for (int j = 0; j < jn; j++)
			for (int b = 0; b < nb; b++)
				dx[j][b] = _cvtsh_ss(x[j0 + j][b].d);
		switch (jn) {
		case 4: ROWS_TOKENS(4); break;
		case 3: ROWS_TOKENS(3); break;
		case 2: ROWS_TOKENS(2); break;
		default: ROWS_TOKENS(1); break;
		}
	}
}

static const struct hs_kernel_ops avx2_ops = { "AVX2", quantize_q8_0_avx2, tile_q_avx2 };

const struct hs_kernel_ops *hs__kernels_avx2(void)
{
	pthread_once(&table_once, fill_table);
	return &avx2_ops;
}
