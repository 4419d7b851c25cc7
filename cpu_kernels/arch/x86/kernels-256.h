/* The 256-bit kernels, compiled once by each x86 tier that runs them, with
 * that tier's flags (avx2/, avx-vnni/, avx512-vnni/ include this file):
 * activation quantization, plain-row tiles (tile_q: dense products and
 * experts read from the file's layout) and row-interleaved tiles
 * (tile_q_packed: the host copy of experts).
 *
 * The including file defines, before including:
 *   X86_VNNI            1 when the tier has vpdpbusd (VEX or EVEX), else 0
 *   dpbusd256(a, u, s)  a + the dot of unsigned bytes u with signed bytes s,
 *                       4 bytes per int32 lane; without VNNI it is
 *                       vpmaddubsw + vpmaddwd, exact only while no pair of
 *                       products exceeds int16 (the MXFP4 paths: <= 24 x 127)
 *
 * Weight blocks become int8 (MXFP4 through a 16-entry table shuffle);
 * products with the Q8_0 activations are summed to int32 and scaled per
 * block in float.  MXFP4 uses the table of value + 12 (unsigned, at most
 * 24) so that one vpdpbusd (or vpmaddubsw) takes it with signed
 * activations; the 12 * sum(x) this adds per block is taken off in the
 * integer lanes.  Q8_0 with VNNI takes w + 128 (w xor 0x80) and
 * 128 * sum(x) off; Q8_0 without VNNI uses vpmaddubsw on |w| and
 * sign(x, w), whose pairs stay within int16. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"

static float e8m0_half[256]; /* 2^(e-128), filled once */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void fill_table(void)
{
	for (int e = 0; e < 256; e++)
		e8m0_half[e] = hs__e8m0_to_fp32_half((uint8_t)e);
}

static const int8_t plus12[16] = { 12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0 };

static inline float hsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline int32_t load32(const void *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

static void quantize_q8_0_256(const float *x, struct hs_block_q8_0 *y, int n)
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

/* sum(x) of a Q8_0 block */
static inline int block_sum(const struct hs_block_q8_0 *x)
{
	const __m256i xv = _mm256_loadu_si256((const __m256i *)x->qs);
	__m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), _mm256_set1_epi16(1));
	__m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
	s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
	return _mm_cvtsi128_si32(s4);
}

/* What a token block's integer dot must lose in a packed tile (one lane
 * per row, so the lane holds the whole offset dot): the offset the weights
 * were shifted by, times sum(x); 0 where the weights are used signed. */
static inline int packed_offset(int type)
{
	return type == HS_TYPE_MXFP4 ? 12 : X86_VNNI ? 128 : 0;
}

/* Per token and block: the scale in float, and -off * sum(x). */
static void prepare_tokens(int off, const struct hs_block_q8_0 *const *x, int nt, int nb, float *dx, int32_t *corr)
{
	for (int j = 0; j < nt; j++)
		for (int b = 0; b < nb; b++) {
			dx[j * nb + b] = _cvtsh_ss(x[j][b].d);
			corr[j * nb + b] = off ? -off * block_sum(&x[j][b]) : 0;
		}
}

/* ---- plain rows ------------------------------------------------------------ */

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

/* The integer block dot of signed weights w with activations xv, as 8
 * partial sums, through |w| and sign(x, w): no offset, since lanes holding
 * offset dots (w + 128) would cancel across the lanes only after they
 * were summed in float, which loses digits. */
static inline __m256i dot_signed(__m256i w, __m256i xv)
{
	if (X86_VNNI)
		return dpbusd256(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
	return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w)),
				 _mm256_set1_epi16(1));
}

#define MAX_BLOCKS 2048 /* 65536 columns, the largest row hotset accepts */

/* NR rows (1 or 2) against NT tokens (1..4).  NR and NT are constants in
 * each call, so the NR * NT accumulators stay in registers; the token's
 * block scales come converted to float (dx[j][b]) and each token block is
 * loaded once for both rows. */
static inline __attribute__((always_inline)) void rows_tokens(int type, const uint8_t *row, size_t row_bytes,
							       int NR, int nb, const struct hs_block_q8_0 *const *x,
							       const float *dx, int NT, float *const *out, int col)
{
	const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hs__mxfp4_values));
	__m256 acc[2][4];

	_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			acc[i][j] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		float sw[2];
		__m256i w[2];
		_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++)
			w[i] = load_w(type, row + i * row_bytes, b, table, &sw[i]);
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			__m256i xv = _mm256_loadu_si256((const __m256i *)x[j][b].qs);
			_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++) {
				__m256i p = dot_signed(w[i], xv);
				acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(sw[i] * dx[j * nb + b]),
							    acc[i][j]);
			}
		}
	}
	_Pragma("GCC unroll 2") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			out[j][col + i] = hsum(acc[i][j]);
}

/* Decode fast path for MXFP4 rows against one token: the unsigned table
 * (value + 12) drops the two sign operations; the token's block scale
 * comes pre-broadcast, so one vmulps and one vbroadcastss of the
 * exponent's value make the block's scale vector.  tscale[b]: the token's
 * block scale in all lanes; tcorr[b]: -12 * sum(x) of block b in lane 0
 * (both on the caller's stack, 64 bytes a block). */
static void prepare_token(const struct hs_block_q8_0 *x, int nb, __m256 *tscale, __m256i *tcorr)
{
	for (int b = 0; b < nb; b++) {
		tcorr[b] = _mm256_setr_epi32(-12 * block_sum(&x[b]), 0, 0, 0, 0, 0, 0, 0);
		tscale[b] = _mm256_set1_ps(_cvtsh_ss(x[b].d));
	}
}

static void rows_mxfp4_one(const uint8_t *w, size_t row_bytes, int r0, int r1, int nb,
			   const struct hs_block_q8_0 *x, const __m256 *tscale, const __m256i *tcorr, float *out)
{
	const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)plus12));
	const __m256i m4 = _mm256_set1_epi8(0x0f);

	for (int r = r0; r < r1; r++) {
		const struct hs_block_mxfp4 *blk = (const struct hs_block_mxfp4 *)(w + (size_t)r * row_bytes);
		/* one accumulator, as the prefill tile has: a token's result is
		 * then the same whatever the batch it came in */
		__m256 acc = _mm256_setzero_ps();
		for (int b = 0; b < nb; b++) {
			__m128i q = _mm_loadu_si128((const __m128i *)blk[b].qs);
			__m256i wu = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
			__m256i xv = _mm256_loadu_si256((const __m256i *)x[b].qs);
			__m256i p = dpbusd256(tcorr[b], wu, xv);
			__m256 sc = _mm256_mul_ps(_mm256_broadcast_ss(&e8m0_half[blk[b].e]), tscale[b]);
			acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sc, acc);
		}
		out[r - r0] = hsum(acc);
	}
}

/* Prefill tile for MXFP4, the unsigned form of rows_mxfp4_one for NR rows
 * and NT tokens: per block and row one shuffle and one exponent broadcast,
 * per block, row and token one dot and one FMA. */
static inline __attribute__((always_inline)) void rows_tokens_mxfp4(const uint8_t *row, size_t row_bytes, int NR,
								     int nb, const struct hs_block_q8_0 *const *x,
								     const __m256 *tscale, const __m256i *tcorr, int NT,
								     float *const *out, int col)
{
	const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)plus12));
	const __m256i m4 = _mm256_set1_epi8(0x0f);
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
				__m256i p = dpbusd256(tcorr[j * nb + b], wu[i], xv);
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

/* Decode streams the weights once: a software prefetch this far ahead
 * (never past the rows of the call, so no byte of another expert is
 * touched) keeps more of them in flight than the hardware prefetcher alone
 * (on the development VM, AMD EPYC, 1 thread: about 15-30% more GB/s).
 * How far is the CPU's (cpu-features.h: 4-8 KiB on AMD, 16 on a
 * far-memory Xeon).  The plain-row types (quants-256.h) go as many values ahead, not
 * bytes. */
#define PREFETCH_AHEAD hs__prefetch_ahead /* cpu-features.h: by vendor */
/* The 512-bit decode's distance: into L2 on Intel, where a few KiB are
 * enough (cpu-features.h), else as above. */
#define PREFETCH_AHEAD_512 (hs__prefetch_l2 ? hs__prefetch_ahead_l2 : hs__prefetch_ahead)

#include "cpu_kernels/arch/x86/quants-256.h"

#define ROWS_TOKENS(NT)                                                                                          \
	do {                                                                                                     \
		int r = r0;                                                                                      \
		for (; NT > 1 && r + 2 <= r1; r += 2)                                                            \
			rows_tokens(type, w + (size_t)r * row_bytes, row_bytes, 2, nb, x + j0, dx, NT, out + j0, r - r0); \
		for (; r < r1; r++)                                                                              \
			rows_tokens(type, w + (size_t)r * row_bytes, row_bytes, 1, nb, x + j0, dx, NT, out + j0, r - r0); \
	} while (0)

static void tile_q_256(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK;

	if (type != HS_TYPE_MXFP4 && type != HS_TYPE_Q8_0) {
		tile_qx_256(type, w, row_bytes, r0, r1, ncols, x, nt, out);
		return;
	}
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
	/* 4 tokens' scales: at most 32 KiB */
	float dx[4 * nb];
	for (int j0 = 0; j0 < nt; j0 += 4) {
		int jn = nt - j0 < 4 ? nt - j0 : 4;
		for (int j = 0; j < jn; j++)
			for (int b = 0; b < nb; b++)
				dx[j * nb + b] = _cvtsh_ss(x[j0 + j][b].d);
		switch (jn) {
		case 4: ROWS_TOKENS(4); break;
		case 3: ROWS_TOKENS(3); break;
		case 2: ROWS_TOKENS(2); break;
		default: ROWS_TOKENS(1); break;
		}
	}
}

/* ---- row-interleaved groups (repack.h) ----------------------------------------
 * One call computes NH 8-row halves of a 16-row group (half0, half0 + 1)
 * against NT tokens over all nb block groups: per block group and half, 4
 * (MXFP4) or 8 (Q8_0) loads of 8 rows x 4 bytes, each multiplied with a
 * broadcast of 4 activation bytes per token; one int32 lane per row, so
 * the block's scale is one vector multiply and one FMA for 8 rows. */

/* 2^(e - 128) of 8 E8M0 bytes, exact for every e: the exponent field
 * e << 23 is 2^(e - 127) for e = 1..254; halved, then e = 0 lifted to
 * 2^-128 and e = 255 (2^128 before halving, inf) capped at 2^127. */
static inline __m256 e8m0_half8(const uint8_t *e)
{
	__m256i v = _mm256_slli_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)e)), 23);
	__m256 f = _mm256_mul_ps(_mm256_castsi256_ps(v), _mm256_set1_ps(0.5f));
	return _mm256_min_ps(_mm256_max_ps(f, _mm256_set1_ps(0x1p-128f)), _mm256_set1_ps(0x1p127f));
}

/* The unit dots of one block group for one 8-row half hh, added to ai[j]
 * of NT tokens: MXFP4 units decoded (value + 12) and paired with the
 * token's bytes 4u.. (low nibbles) and 16 + 4u.. (high nibbles); Q8_0
 * units as w + 128 (VNNI) or |w| with sign(x, w). */
static inline __attribute__((always_inline)) void unit_dots_256(int type, const uint8_t *bg, int hh, int b,
								 const struct hs_block_q8_0 *const *x, int NT,
								 __m256i *ai)
{
	if (type == HS_TYPE_MXFP4) {
		const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)plus12));
		const __m256i m4 = _mm256_set1_epi8(0x0f);
		_Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
			__m256i v = _mm256_loadu_si256((const __m256i *)(bg + 16 + 64 * u + 32 * hh));
			__m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(v, m4));
			__m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
			_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
				const uint8_t *xq = (const uint8_t *)x[j][b].qs;
				const __m256i xl = _mm256_set1_epi32(load32(xq + 4 * u)), xh = _mm256_set1_epi32(load32(xq + 16 + 4 * u));
				if (X86_VNNI) {
					ai[j] = dpbusd256(ai[j], lo, xl);
					ai[j] = dpbusd256(ai[j], hi, xh);
				} else { /* two products per int16 lane: at most 2 x 2 x 24 x 127 */
					__m256i s = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
					ai[j] = _mm256_add_epi32(ai[j], _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
				}
			}
		}
		return;
	}
	_Pragma("GCC unroll 8") for (int u = 0; u < 8; u++) {
		__m256i w = _mm256_loadu_si256((const __m256i *)(bg + 32 + 64 * u + 32 * hh));
		__m256i wp = X86_VNNI ? _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)) : _mm256_sign_epi8(w, w);
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			__m256i xb = _mm256_set1_epi32(load32((const uint8_t *)x[j][b].qs + 4 * u));
			if (X86_VNNI)
				ai[j] = dpbusd256(ai[j], wp, xb);
			else
				ai[j] = _mm256_add_epi32(
					ai[j], _mm256_madd_epi16(_mm256_maddubs_epi16(wp, _mm256_sign_epi8(xb, w)), _mm256_set1_epi16(1)));
		}
	}
}


/* NH halves (half0, half0 + 1) of the 16-row group at g against NT tokens;
 * end: where the call's rows end */
static inline __attribute__((always_inline)) void packed_256(int type, const uint8_t *g, int half0, int NH, int nb,
							      const struct hs_block_q8_0 *const *x, const float *dx,
							      const int32_t *corr, int NT, float *const *out, int col,
							      const uint8_t *end)
{
	/* a constant (not hs__type_block_bytes()), so the prefetches below
	 * unroll: a loop there cost 6-8% of a Zen 3 core's decode */
	const size_t gbb = HS_PACK_ROWS * (type == HS_TYPE_MXFP4 ? sizeof(struct hs_block_mxfp4)
								: sizeof(struct hs_block_q8_0));
	__m256 acc[2][4];

	_Pragma("GCC unroll 2") for (int h = 0; h < NH; h++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			acc[h][j] = _mm256_setzero_ps();
	for (int b = 0; b < nb; b++) {
		const uint8_t *bg = g + (size_t)b * gbb;
		if (NT == 1 && bg + PREFETCH_AHEAD + gbb <= end)
			_Pragma("GCC unroll 16") for (size_t o = 0; o < gbb; o += 64)
				_mm_prefetch((const char *)bg + PREFETCH_AHEAD + o, _MM_HINT_T0);
		_Pragma("GCC unroll 2") for (int h = 0; h < NH; h++) {
			const int hh = half0 + h;
			__m256i ai[4];
			_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
				ai[j] = _mm256_set1_epi32(corr[j * nb + b]);
			unit_dots_256(type, bg, hh, b, x, NT, ai);
			const __m256 ws = type == HS_TYPE_MXFP4 ? e8m0_half8(bg + 8 * hh)
								: _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bg + 16 * hh)));
			_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
				acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[j]),
							    _mm256_mul_ps(ws, _mm256_set1_ps(dx[j * nb + b])), acc[h][j]);
		}
	}
	_Pragma("GCC unroll 2") for (int h = 0; h < NH; h++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			_mm256_storeu_ps(out[j] + col + 8 * (half0 + h), acc[h][j]);
}

#define PACKED_256(TYPE, NT)                                                                              \
	do {                                                                                               \
		for (int g = ga; g < gz; g++) {                                                            \
			const uint8_t *gp = w + (size_t)g * gstride;                                       \
			const int col = g * HS_PACK_ROWS - r0;                                               \
			if (NT == 1) /* both halves at once: two independent chains */                      \
				packed_256(TYPE, gp, 0, 2, nb, x + j0, d, c, 1, out + j0, col, end);         \
			else                                                                                 \
				for (int h = 0; h < 2; h++)                                                  \
					packed_256(TYPE, gp, h, 1, nb, x + j0, d, c, NT, out + j0, col, end); \
		}                                                                                            \
	} while (0)
#define PACKED_256_TYPES(NT)                               \
	do {                                               \
		if (type == HS_TYPE_MXFP4)                 \
			PACKED_256(HS_TYPE_MXFP4, NT);     \
		else                                       \
			PACKED_256(HS_TYPE_Q8_0, NT);      \
	} while (0)

/* ---- many tokens on packed MXFP4 without VNNI: 8 rows decoded once -------
 * packed_256 decodes each unit's nibbles again for every 4 tokens and
 * widens each pair of byte products to int32 at once; without vpdpbusd
 * that is most of its work.  Here the 8 rows of a half are decoded once
 * per pass of tokens into a scratch of int8 values (value + 12), 8 units
 * of 8 rows x 4 bytes a block, unit k paired with the token's bytes
 * 4k..4k + 3 (units 0-3 the low nibbles of the packed units, 4-7 the high
 * ones), and every token of the pass is taken against it: one byte dot and
 * one int16 add per unit and token, widened once per 4 units (4 x 2 x 24 x
 * 127 stays within int16).  Each block's int32 lanes are exact and scaled
 * and added in the same order as packed_256, so a token gets the same bits
 * here as alone.  On a 2-core Zen 3 (AVX2) the expert FFN gained 1.1-1.2x
 * at 16 and 64 tokens an expert (kernels.md).  The VNNI tiers keep
 * packed_256: their dot is one instruction, and no VNNI CPU was here to
 * measure a change on. */
#define MXS_MIN_TOKENS 8 /* fewer: packed_256 (its decode per 4 tokens costs little) */
#define MXS_CHUNK 64	 /* blocks decoded at a time: 16 KiB of values */
#define MXS_PASS 64	 /* tokens prepared at a time: 32 KiB of scales and corrections */

/* Half hh of the group at g, blocks c0..c0 + kb - 1, into v (256 bytes a
 * block) and ws (the 8 rows' scales, 8 floats a block). */
static void mxs_decode(const uint8_t *g, int hh, int c0, int kb, uint8_t *v, float *ws)
{
	const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)plus12));
	const __m256i m4 = _mm256_set1_epi8(0x0f);
	const size_t gbb = HS_PACK_ROWS * sizeof(struct hs_block_mxfp4);

	for (int b = 0; b < kb; b++) {
		const uint8_t *bg = g + (size_t)(c0 + b) * gbb;
		__m256i *o = (__m256i *)(v + (size_t)b * 256);
		_mm256_store_ps(ws + 8 * b, e8m0_half8(bg + 8 * hh));
		_Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
			const __m256i q = _mm256_loadu_si256((const __m256i *)(bg + 16 + 64 * u + 32 * hh));
			_mm256_store_si256(o + u, _mm256_shuffle_epi8(lut, _mm256_and_si256(q, m4)));
			_mm256_store_si256(o + 4 + u, _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4)));
		}
	}
}

/* The decoded half against NT (1..4) tokens over kb blocks: out[t][col..col
 * + 7] set, or carried on from the chunk before (add).  dx[t * MXS_CHUNK +
 * b], corr[...]: the token's block scale and -12 sum(x). */
static inline __attribute__((always_inline)) void mxs_tokens(const uint8_t *v, const float *ws, int kb,
							     const struct hs_block_q8_0 *const *x, int c0,
							     const float *dx, const int32_t *corr, int NT,
							     float *const *out, int col, int add)
{
	const __m256i ones = _mm256_set1_epi16(1);
	__m256 acc[4];

	_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
		acc[t] = add ? _mm256_loadu_ps(out[t] + col) : _mm256_setzero_ps();
	for (int b = 0; b < kb; b++) {
		const uint8_t *vb = v + (size_t)b * 256;
		__m256i ai[4];
		_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) ai[t] = _mm256_set1_epi32(corr[t * MXS_CHUNK + b]);
		_Pragma("GCC unroll 2") for (int u0 = 0; u0 < 8; u0 += 4)
		{
			__m256i s16[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
					   _mm256_setzero_si256() };
			_Pragma("GCC unroll 4") for (int u = u0; u < u0 + 4; u++)
			{
				const __m256i wv = _mm256_load_si256((const __m256i *)(vb + 32 * u));
				_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
				{
					const __m256i xb = _mm256_set1_epi32(load32(x[t][c0 + b].qs + 4 * u));
					s16[t] = u == u0 ? _mm256_maddubs_epi16(wv, xb)
							 : _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(wv, xb));
				}
				/* unit by unit: gcc otherwise loads every unit first and
				 * spills the sums */
				__asm__ volatile("" : "+x"(s16[0]), "+x"(s16[1]), "+x"(s16[2]), "+x"(s16[3]));
			}
			_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) ai[t] =
				_mm256_add_epi32(ai[t], _mm256_madd_epi16(s16[t], ones));
		}
		const __m256 sv = _mm256_load_ps(ws + 8 * b);
		_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] =
			_mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[t]), _mm256_mul_ps(sv, _mm256_set1_ps(dx[t * MXS_CHUNK + b])),
					acc[t]);
	}
	_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) _mm256_storeu_ps(out[t] + col, acc[t]);
}

#define MXS_TOKENS(NT)                                                                                       \
	mxs_tokens(v, ws, kb, x + p0 + j0, c0, dx + (size_t)j0 * MXS_CHUNK, corr + (size_t)j0 * MXS_CHUNK, NT, \
		   out + p0 + j0, col, c0 > 0)

static __attribute__((unused)) void tile_mxfp4_scratch(const uint8_t *w, int r0, int r1, int ncols,
						       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK;
	const size_t gbb = HS_PACK_ROWS * sizeof(struct hs_block_mxfp4), gstride = (size_t)nb * gbb;
	_Alignas(32) uint8_t v[MXS_CHUNK * 256];
	_Alignas(32) float ws[MXS_CHUNK * 8], dx[MXS_PASS * MXS_CHUNK];
	int32_t corr[MXS_PASS * MXS_CHUNK];

	for (int p0 = 0; p0 < nt; p0 += MXS_PASS) {
		const int pn = nt - p0 < MXS_PASS ? nt - p0 : MXS_PASS;
		for (int c0 = 0; c0 < nb; c0 += MXS_CHUNK) {
			const int kb = nb - c0 < MXS_CHUNK ? nb - c0 : MXS_CHUNK;
			for (int t = 0; t < pn; t++)
				for (int b = 0; b < kb; b++) {
					dx[t * MXS_CHUNK + b] = _cvtsh_ss(x[p0 + t][c0 + b].d);
					corr[t * MXS_CHUNK + b] = -12 * block_sum(&x[p0 + t][c0 + b]);
				}
			for (int g = r0 / HS_PACK_ROWS; g < r1 / HS_PACK_ROWS; g++) {
				const uint8_t *gp = w + (size_t)g * gstride;
				/* the next group's chunk into L2 while this one is worked */
				if (g + 1 < r1 / HS_PACK_ROWS)
					for (size_t o = (size_t)c0 * gbb; o < (size_t)(c0 + kb) * gbb; o += 64)
						_mm_prefetch((const char *)gp + gstride + o, _MM_HINT_T1);
				for (int hh = 0; hh < 2; hh++) {
					const int col = g * HS_PACK_ROWS - r0 + 8 * hh;
					mxs_decode(gp, hh, c0, kb, v, ws);
					for (int j0 = 0; j0 < pn; j0 += 4) {
						switch (pn - j0 < 4 ? pn - j0 : 4) {
						case 4: MXS_TOKENS(4); break;
						case 3: MXS_TOKENS(3); break;
						case 2: MXS_TOKENS(2); break;
						default: MXS_TOKENS(1); break;
						}
					}
				}
			}
		}
	}
}

/* Tokens whose per-block scales and corrections are prepared once per call
 * (entries of tokens x blocks; 64 KiB of stack), and groups taken per pass
 * over the token tiles, so that their weights stay in L2 between tiles
 * (8 x 16 rows of 2880 MXFP4 values: 196 KiB). */
#define PREP_ALL 8192
#define GROUPS_PER_PASS 8

/* (the AVX-512 tier has a 512-bit one of its own) */
static __attribute__((unused)) void tile_q_packed_256(int type, const uint8_t *w, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	if (type != HS_TYPE_MXFP4 && type != HS_TYPE_Q8_0) { /* no packed loop here (repack.h) */
		hs__packed_tile_plain(tile_q_256, type, w, r0, r1, ncols, x, nt, out);
		return;
	}
	if (!X86_VNNI && type == HS_TYPE_MXFP4 && nt >= MXS_MIN_TOKENS) {
		tile_mxfp4_scratch(w, r0, r1, ncols, x, nt, out);
		return;
	}
	const int nb = ncols / HS_QK, all = nt * nb <= PREP_ALL;
	const size_t gstride = HS_PACK_ROWS * hs__type_row_bytes(type, (uint64_t)ncols);
	const uint8_t *end = w + (size_t)(r1 / HS_PACK_ROWS) * gstride;
	/* every token's, or 4 tokens', scales and corrections: at most 64 KiB */
	float dx[(all ? nt : 4) * nb];
	int32_t corr[(all ? nt : 4) * nb];

	if (all)
		prepare_tokens(packed_offset(type), x, nt, nb, dx, corr);
	for (int ga = r0 / HS_PACK_ROWS; ga < r1 / HS_PACK_ROWS; ga += GROUPS_PER_PASS) {
		const int gz = ga + GROUPS_PER_PASS < r1 / HS_PACK_ROWS ? ga + GROUPS_PER_PASS : r1 / HS_PACK_ROWS;
		for (int j0 = 0; j0 < nt; j0 += 4) {
			const int jn = nt - j0 < 4 ? nt - j0 : 4;
			const float *d = all ? dx + (size_t)j0 * nb : dx;
			const int32_t *c = all ? corr + (size_t)j0 * nb : corr;
			if (!all)
				prepare_tokens(packed_offset(type), x + j0, jn, nb, dx, corr);
			switch (jn) {
			case 4: PACKED_256_TYPES(4); break;
			case 3: PACKED_256_TYPES(3); break;
			case 2: PACKED_256_TYPES(2); break;
			default: PACKED_256_TYPES(1); break;
			}
		}
	}
}
