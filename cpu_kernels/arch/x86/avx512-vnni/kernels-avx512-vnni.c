/* The AVX-512 VNNI tier (AVX-512 F, BW, VL, VNNI).  Row-interleaved expert
 * tiles run on 512-bit registers: one load is a whole 16-row unit (16 rows
 * x 4 bytes, repack.h), one vpdpbusd multiplies it with 4 activation bytes
 * broadcast from memory, so a 16-row block group costs 4 (MXFP4) or 8
 * (Q8_0) loads and as many vpdpbusd per token pair of lanes, and one
 * vcvtdq2ps + vscalefps/vmulps + vfmadd for the block's scale.  Up to 8
 * tokens share each decoded weight register (prefill).  Plain Q8_0 rows
 * against 8 or more tokens (the dense products of prefill) put tokens in
 * the lanes instead (tile_q8_lanes), fewer tokens take rows8_q8_exact (the
 * same arithmetic per token, so a token's result does not depend on its
 * batch); MXFP4 plain-row tiles and quantization are the 256-bit kernels
 * with the EVEX vpdpbusd. */
#include "config.h"

#include <immintrin.h>

#include "cpu_kernels/arch/x86/avx512-vnni/avx512.h"

static inline __m256i dpbusd256(__m256i a, __m256i u, __m256i s)
{
	return _mm256_dpbusd_epi32(a, u, s);
}
#define X86_VNNI 1

#include "cpu_kernels/arch/x86/kernels-256.h"

#define TOKENS 8 /* tokens per pass over a group */
#define KQ_MAX_TOKENS 64 /* packed Q4_K: more tokens through plain rows (packed-512.h) */
/* (decode prefetches PREFETCH_AHEAD_512 bytes ahead, as kernels-256.h says) */

/* the row-interleaved tile twice: for every CPU of the tier, and with
 * VBMI's byte permutes (the AMX tier's, packed-512.h says why) */
#define PACKED_VBMI 0
#define PACKED_ATTR
#define PACKED_NAME hs__avx512_tile_q_packed
#include "cpu_kernels/arch/x86/avx512-vnni/packed-512.h"
#define PACKED_VBMI 1
#define PACKED_ATTR __attribute__((target("avx512vbmi")))
#define PACKED_NAME hs__avx512_tile_q_packed_vbmi
#include "cpu_kernels/arch/x86/avx512-vnni/packed-512.h"

/* ---- plain Q8_0 rows, tokens in the lanes -------------------------------------
 * For dense products (plain rows, not repacked) with many tokens: lane j
 * of a register is token j of a tile of 15; the 16th lane's activation
 * bytes are all 1, so that it sums the weights.  Per row and block, 8
 * vpdpbusd multiply the tokens' (x + 128) bytes, prepared once per tile
 * and block chunk, with 4 weight bytes broadcast straight from the row;
 * the 16th lane's sum(w) times 128 then comes off every lane, leaving
 * x . w exact in int32.  One vcvtdq2ps, one vmulps and one FMA per row and
 * block serve the 15 tokens. */
#define LANE_TOKENS 15
#define LANE_ROWS 4     /* rows sharing each prepared activation register */
#define LANE_CHUNK 64   /* blocks per prepared chunk: 64 x 512 bytes */
#define LANE_ROW_BLOCK 256 /* rows whose partial sums live on the stack between chunks */
#define LANES_MIN_TOKENS 8

static inline __attribute__((always_inline)) void lane_rows(const uint8_t *w, size_t row_bytes, int NR, int b0, int kb,
							     const int32_t *xs, const float *dxs, float *acc_mem,
							     int first)
{
	const __m512i last = _mm512_set1_epi32(LANE_TOKENS);
	__m512 acc[LANE_ROWS];

	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		acc[i] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_mem + 16 * i);
	for (int k = 0; k < kb; k++) {
		__m512i xv[8];
		_Pragma("GCC unroll 8") for (int u = 0; u < 8; u++)
			xv[u] = _mm512_loadu_si512((const void *)(xs + (k * 8 + u) * 16));
		const __m512 d = _mm512_loadu_ps(dxs + k * 16);
		_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++) {
			const struct hs_block_q8_0 *blk = (const struct hs_block_q8_0 *)(w + (size_t)i * row_bytes) + b0 + k;
			__m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
			_Pragma("GCC unroll 8") for (int u = 0; u < 8; u += 2) {
				a0 = _mm512_dpbusd_epi32(a0, xv[u], _mm512_set1_epi32(load32(blk->qs + 4 * u)));
				a1 = _mm512_dpbusd_epi32(a1, xv[u + 1], _mm512_set1_epi32(load32(blk->qs + 4 * u + 4)));
			}
			__m512i s = _mm512_add_epi32(a0, a1);
			/* lane 15 holds sum(w): 128 sum(w) off every lane */
			s = _mm512_sub_epi32(s, _mm512_slli_epi32(_mm512_permutexvar_epi32(last, s), 7));
			acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(_cvtsh_ss(blk->d))),
						 acc[i]);
		}
	}
	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		_mm512_storeu_ps(acc_mem + 16 * i, acc[i]);
}

static void tile_q8_lanes(const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			  const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK;
	_Alignas(64) int32_t xs[LANE_CHUNK * 8 * 16]; /* [block][unit][lane] */
	_Alignas(64) float dxs[LANE_CHUNK * 16];      /* [block][lane] */
	_Alignas(64) float acc[LANE_ROW_BLOCK * 16];  /* [row][lane] */

	for (int j0 = 0; j0 < nt; j0 += LANE_TOKENS) {
		const int jn = nt - j0 < LANE_TOKENS ? nt - j0 : LANE_TOKENS;
		for (int rb0 = r0; rb0 < r1; rb0 += LANE_ROW_BLOCK) {
			const int rn = r1 - rb0 < LANE_ROW_BLOCK ? r1 - rb0 : LANE_ROW_BLOCK;
			for (int b0 = 0; b0 < nb; b0 += LANE_CHUNK) {
				const int kb = nb - b0 < LANE_CHUNK ? nb - b0 : LANE_CHUNK;
				/* the tokens' bytes + 128 (xor 0x80), absent tokens 0 + 128
				 * with scale 0, and the all-ones lane */
				for (int k = 0; k < kb; k++) {
					for (int j = 0; j < 16; j++) {
						const int real = j < jn;
						for (int u = 0; u < 8; u++)
							xs[(k * 8 + u) * 16 + j] =
								j == LANE_TOKENS ? 0x01010101
								: real ? load32(x[j0 + j][b0 + k].qs + 4 * u) ^ (int32_t)0x80808080
								       : (int32_t)0x80808080;
						dxs[k * 16 + j] = real ? _cvtsh_ss(x[j0 + j][b0 + k].d) : 0.0f;
					}
				}
				int r = 0;
				for (; r + LANE_ROWS <= rn; r += LANE_ROWS)
					lane_rows(w + (size_t)(rb0 + r) * row_bytes, row_bytes, LANE_ROWS, b0, kb, xs, dxs,
						  acc + 16 * r, b0 == 0);
				for (; r < rn; r++)
					lane_rows(w + (size_t)(rb0 + r) * row_bytes, row_bytes, 1, b0, kb, xs, dxs, acc + 16 * r,
						  b0 == 0);
			}
			for (int r = 0; r < rn; r++)
				for (int j = 0; j < jn; j++)
					out[j0 + j][rb0 - r0 + r] = acc[16 * r + j];
		}
	}
}

/* The other block types (quants-256.h's) against 8 or more tokens, tokens
 * in the lanes as tile_q8_lanes has them: per row and 32-value block the
 * weights are decoded once into 32 signed bytes (their true integers: the
 * unsigned storage less the type's offset) on the stack, and 8 vpdpbusd
 * broadcast 4 of them each against the 15 tokens' (x + 128) bytes; the
 * 16th lane's sum(w) takes 128 sum(w) off.  The 16-value types keep the
 * block's halves (units 0-3, 4-7) in two accumulators for their two
 * scales.  Per block then: per half one convert and one FMA with
 * s x the tokens' dx, and the mins (m x the tokens' dx sum(x)) in one FMA:
 * about 1.3 instructions per block and token where the 256-bit tiles take
 * about 5. */
#define QL_CHUNK 64 /* blocks per prepared chunk (a multiple of a super-block's 8) */

static inline __attribute__((always_inline)) void lane_rows_qx(int type, const uint8_t *row, int b0, int kb,
								const int32_t *xs, const float *dxs, const float *xh,
								float *acc_mem, int first)
{
	const __m256i iq4 = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hs__iq4nl_values)),
					    _mm256_set1_epi8((char)qx_offset(type)));
	const __m512i last = _mm512_set1_epi32(LANE_TOKENS);
	const int uv = qx_unit_values(type) / HS_QK, halves = qx_halves(type), mins = qx_has_min(type) && !qx_offset(type);
	const size_t ub = hs__type_block_bytes(type);
	__m512 acc = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc_mem);

	for (int k0 = 0; k0 < kb; k0 += uv) {
		const int u = (b0 + k0) / uv;
		const uint8_t *blk = row + (size_t)u * ub;
		_Alignas(32) float sc[QX_MAX_UNIT] = { 0 }, mn[QX_MAX_UNIT] = { 0 }; /* (for the compiler) */
		_Alignas(32) int8_t wb[32];
		qx_unit_scales(type, blk, sc, mn);
		_Pragma("GCC unroll 8") for (int j = 0; j < uv; j++) {
			const int k = k0 + j;
			__m256i wv = qx_values(type, blk, j, iq4);
			if (qx_offset(type))
				wv = _mm256_sub_epi8(wv, _mm256_set1_epi8((char)qx_offset(type)));
			_mm256_store_si256((__m256i *)wb, wv);
			const __m512 d = _mm512_loadu_ps(dxs + k * 16);
			__m512i a0 = _mm512_setzero_si512(), a1 = _mm512_setzero_si512();
			_Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
				const __m512i xv = _mm512_loadu_si512((const void *)(xs + (k * 8 + q) * 16));
				if (q < 4)
					a0 = _mm512_dpbusd_epi32(a0, xv, _mm512_set1_epi32(load32(wb + 4 * q)));
				else
					a1 = _mm512_dpbusd_epi32(a1, xv, _mm512_set1_epi32(load32(wb + 4 * q)));
			}
			if (halves) {
				a0 = _mm512_sub_epi32(a0, _mm512_slli_epi32(_mm512_permutexvar_epi32(last, a0), 7));
				a1 = _mm512_sub_epi32(a1, _mm512_slli_epi32(_mm512_permutexvar_epi32(last, a1), 7));
				acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a0), _mm512_mul_ps(d, _mm512_set1_ps(sc[2 * j])), acc);
				acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1), _mm512_mul_ps(d, _mm512_set1_ps(sc[2 * j + 1])), acc);
				if (mins) { /* Q2_K: dx sum of each half, 32 floats a block */
					acc = _mm512_fnmadd_ps(_mm512_loadu_ps(xh + k * 32), _mm512_set1_ps(mn[2 * j]), acc);
					acc = _mm512_fnmadd_ps(_mm512_loadu_ps(xh + k * 32 + 16), _mm512_set1_ps(mn[2 * j + 1]), acc);
				}
			} else {
				__m512i a = _mm512_add_epi32(a0, a1);
				a = _mm512_sub_epi32(a, _mm512_slli_epi32(_mm512_permutexvar_epi32(last, a), 7));
				acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), _mm512_mul_ps(d, _mm512_set1_ps(sc[j])), acc);
				if (mins) /* dx sum of the block: the first 16 of its 32 */
					acc = _mm512_fnmadd_ps(_mm512_loadu_ps(xh + k * 32), _mm512_set1_ps(mn[j]), acc);
			}
		}
	}
	_mm512_storeu_ps(acc_mem, acc);
}

static inline __attribute__((always_inline)) void tile_qx_lanes(int type, const uint8_t *w, size_t row_bytes, int r0,
								   int r1, int ncols,
			  const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK;
	_Alignas(64) int32_t xs[QL_CHUNK * 8 * 16]; /* [block][unit][lane] */
	_Alignas(64) float dxs[QL_CHUNK * 16];      /* [block][lane] */
	_Alignas(64) float xh[QL_CHUNK * 32];       /* [block][half][lane]: dx sum(x); whole blocks in half 0 */
	_Alignas(64) float acc[LANE_ROW_BLOCK * 16]; /* [row][lane] */

	for (int j0 = 0; j0 < nt; j0 += LANE_TOKENS) {
		const int jn = nt - j0 < LANE_TOKENS ? nt - j0 : LANE_TOKENS;
		for (int rb0 = r0; rb0 < r1; rb0 += LANE_ROW_BLOCK) {
			const int rn = r1 - rb0 < LANE_ROW_BLOCK ? r1 - rb0 : LANE_ROW_BLOCK;
			for (int b0 = 0; b0 < nb; b0 += QL_CHUNK) {
				const int kb = nb - b0 < QL_CHUNK ? nb - b0 : QL_CHUNK;
				for (int k = 0; k < kb; k++)
					for (int j = 0; j < 16; j++) {
						const int real = j < jn;
						const struct hs_block_q8_0 *xb = real ? &x[j0 + j][b0 + k] : NULL;
						for (int q = 0; q < 8; q++)
							xs[(k * 8 + q) * 16 + j] = j == LANE_TOKENS ? 0x01010101
										   : real ? load32(xb->qs + 4 * q) ^ (int32_t)0x80808080
											  : (int32_t)0x80808080;
						float dx = real ? _cvtsh_ss(xb->d) : 0.0f, h0 = 0, h1 = 0;
						if (real) {
							int s0, s1;
							qx_half_sums(xb, &s0, &s1);
							h0 = (float)s0;
							h1 = (float)s1;
						}
						dxs[k * 16 + j] = dx;
						if (qx_halves(type)) {
							xh[k * 32 + j] = dx * h0;
							xh[k * 32 + 16 + j] = dx * h1;
						} else {
							xh[k * 32 + j] = dx * (h0 + h1);
						}
					}
				for (int r = 0; r < rn; r++)
					lane_rows_qx(type, w + (size_t)(rb0 + r) * row_bytes, b0, kb, xs, dxs, xh, acc + 16 * r,
						     b0 == 0);
			}
			for (int r = 0; r < rn; r++)
				for (int j = 0; j < jn; j++)
					out[j0 + j][rb0 - r0 + r] = acc[16 * r + j];
		}
	}
}

#define TILE_QX_LANES(TYPE) tile_qx_lanes(TYPE, w, row_bytes, r0, r1, ncols, x, nt, out)

/* The lanes for the types with a constant `type` each (the inner loops
 * specialise on it). */
static void tile_qx_lanes_any(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	switch (type) {
	case HS_TYPE_Q4_K: TILE_QX_LANES(HS_TYPE_Q4_K); break;
	case HS_TYPE_Q5_K: TILE_QX_LANES(HS_TYPE_Q5_K); break;
	case HS_TYPE_Q6_K: TILE_QX_LANES(HS_TYPE_Q6_K); break;
	case HS_TYPE_Q3_K: TILE_QX_LANES(HS_TYPE_Q3_K); break;
	case HS_TYPE_Q2_K: TILE_QX_LANES(HS_TYPE_Q2_K); break;
	case HS_TYPE_IQ4_XS: TILE_QX_LANES(HS_TYPE_IQ4_XS); break;
	case HS_TYPE_IQ4_NL: TILE_QX_LANES(HS_TYPE_IQ4_NL); break;
	case HS_TYPE_Q4_0: TILE_QX_LANES(HS_TYPE_Q4_0); break;
	case HS_TYPE_Q4_1: TILE_QX_LANES(HS_TYPE_Q4_1); break;
	case HS_TYPE_Q5_0: TILE_QX_LANES(HS_TYPE_Q5_0); break;
	case HS_TYPE_Q5_1: TILE_QX_LANES(HS_TYPE_Q5_1); break;
	default: break;
	}
}

/* Plain Q8_0 rows against fewer tokens than the lanes path takes (decode,
 * and the tokens left over from whole lane tiles), with the lanes path's
 * arithmetic per row and token: each block's dot summed exactly in int32,
 * then acc = fma(float(dot), dx * ws, acc) block after block; so a token's
 * result has the same bits whether it came in a batch of 1 or of 64 (the
 * forward pass's batched sequences rely on it).  8 rows at a time: their
 * 8 partial-sum registers meet in one by a horizontal-add tree. */
static inline __m256i row_block_dot(const struct hs_block_q8_0 *blk, __m256i xv)
{
	const __m256i w = _mm256_loadu_si256((const __m256i *)blk->qs);
	return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
}

static void rows8_q8_exact(const uint8_t *w, size_t row_bytes, int r0, int r1, int nb,
			   const struct hs_block_q8_0 *x, float *out)
{
	int r = r0;
	for (; r + 8 <= r1; r += 8) {
		__m256 acc = _mm256_setzero_ps();
		for (int b = 0; b < nb; b++) {
			const __m256i xv = _mm256_loadu_si256((const __m256i *)x[b].qs);
			__m256i v[8];
			uint16_t d[8];
			_Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) {
				const struct hs_block_q8_0 *blk = (const struct hs_block_q8_0 *)(w + (size_t)(r + i) * row_bytes) + b;
				v[i] = row_block_dot(blk, xv);
				d[i] = blk->d;
			}
			const __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
			const __m256i g2 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
			const __m256i tot = _mm256_add_epi32(_mm256_permute2x128_si256(g1, g2, 0x20),
							     _mm256_permute2x128_si256(g1, g2, 0x31));
			const __m256 ws = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
			acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(x[b].d)), ws), acc);
		}
		_mm256_storeu_ps(out + (r - r0), acc);
	}
	for (; r < r1; r++) {
		const struct hs_block_q8_0 *blk = (const struct hs_block_q8_0 *)(w + (size_t)r * row_bytes);
		__m128 acc = _mm_setzero_ps();
		for (int b = 0; b < nb; b++) {
			__m256i v = row_block_dot(blk + b, _mm256_loadu_si256((const __m256i *)x[b].qs));
			__m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
			s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
			s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
			acc = _mm_fmadd_ss(_mm_cvtepi32_ps(s), _mm_set_ss(_cvtsh_ss(x[b].d) * _cvtsh_ss(blk[b].d)), acc);
		}
		out[r - r0] = _mm_cvtss_f32(acc);
	}
}

/* ---- many tokens: 16 rows decoded once, rows in the lanes --------------
 * The lanes above decode a row's block again for every 15 tokens and pay a
 * load of the tokens' bytes and a broadcast of 4 weights per vpdpbusd.
 * Here 16 rows of QP_CHUNK blocks are decoded once and turned so one
 * register holds 4 values of the 16 rows (repack.h's unit, as the packed
 * MXFP4 / Q8_0 groups are read), each value + the type's bias (qp_bias);
 * every token of the call then takes 8 vpdpbusd a block with its 4 bytes
 * broadcast from memory, and per block one exact int32 correction (bias x
 * sum(x), per half for the 16-value types), one convert, one multiply by
 * the rows' scales, one FMA by the
 * token's dx and one for the mins: about 14 instructions per block and
 * token for 16 rows against 42 for 15 tokens of one row in the lanes. */
#define QP_CHUNK HS_QP_CHUNK   /* blocks decoded at a time: 8 KiB of values, a multiple of 8 */
#define QP_MAX_TOKENS 64       /* tokens prepared at a time */
#define QP_PREP_BYTES (192 << 10) /* their per-block scalars on the stack at most */
/* Fewest tokens for a pass: from 8 every type gains over the lanes now
 * that the decode is cheap (at 8-16 tokens an expert Q4_K +25%, Q6_K
 * +40-60%, Q5_K, IQ4_XS, Q2_K +10-20%, Zen 4). */
#define QP_MIN_TOKENS 8

/* Tokens a pass may prepare for nb blocks (a multiple of 8), 0 when fewer
 * than QP_MIN_TOKENS would fit (very long rows: the lanes take those). */
static inline int qp_pass_tokens(int nb)
{
	int t = QP_PREP_BYTES / (nb * 5 * (int)sizeof(float));
	t = t > QP_MAX_TOKENS ? QP_MAX_TOKENS : t / 8 * 8;
	return t >= QP_MIN_TOKENS ? t : 0;
}

/* 32 bytes of each of 16 rows (p[r]) as 8 registers, unit q (bytes
 * 4q..4q+3) of row r in lane r: an 8 x 8 dword transpose in each 256-bit
 * half (rows 0-7, 8-15). */
static inline __attribute__((always_inline)) void qp_turn_rows(const uint8_t *const *p, __m512i *u)
{
	__m512i z[8], t[8], v[8];
	const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
	_Pragma("GCC unroll 8") for (int i = 0; i < 8; i++)
		z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)p[i])),
					  _mm256_loadu_si256((const __m256i *)p[i + 8]), 1);
	_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
		t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
	}
	_Pragma("GCC unroll 2") for (int i = 0; i < 2; i++) { /* rows 4i .. 4i + 3 */
		v[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);     /* units 0, 4 */
		v[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]); /* 1, 5 */
		v[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]); /* 2, 6 */
		v[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]); /* 3, 7 */
	}
	_Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
		u[q] = _mm512_permutex2var_epi64(v[q], lo, v[4 + q]);
		u[q + 4] = _mm512_permutex2var_epi64(v[q], hi, v[4 + q]);
	}
}

/* Rows 0..15 of block k (row-major, 32 bytes a row) as 8 registers, unit q
 * (values 4q..4q+3) of row r in lane r, each byte + 128. */
static inline void qp_turn(const int8_t *wq, __m512i *u)
{
	const uint8_t *p[16];
	for (int r = 0; r < 16; r++)
		p[r] = (const uint8_t *)wq + 32 * r;
	qp_turn_rows(p, u);
	for (int q = 0; q < 8; q++)
		u[q] = _mm512_xor_si512(u[q], _mm512_set1_epi8((char)0x80));
}

/* Byte each decoded weight register adds to a value, which the int32
 * correction (bias x sum(x)) takes off: the direct decoders below keep
 * Q4_K's and Q5_K's values as they are and Q6_K's 6-bit values before
 * their - 32; decode16 + qp_turn hold the true value + 128. */
static inline int qp_bias(int type)
{
	return type == HS_TYPE_Q4_K || type == HS_TYPE_Q5_K ? 0 : type == HS_TYPE_Q6_K ? 32 : 128;
}

/* The rows of a 16-row group (past nr: the last again, whose sums are not
 * written) and their offsets from the group's first row. */
static inline void qp_rows(const uint8_t *w, size_t row_bytes, int rg, int nr, const uint8_t **row, int32_t *off)
{
	for (int r = 0; r < 16; r++) {
		off[r] = (int32_t)((size_t)(r < nr ? r : nr - 1) * row_bytes);
		row[r] = w + (size_t)rg * row_bytes + off[r];
	}
}

/* Q4_K and Q5_K straight from 16 rows into what decode16 + qp_turn make,
 * without the row-major stop: the 32 quant bytes of two blocks (low
 * nibbles block 2i, high ones 2i + 1) turned once, each nibble masked out
 * as it is (Q5_K: its high bit, from the 32 high-bit bytes turned once a
 * super-block, joined in the same op);
 * the rows' 6-bit scales and mins decoded 16 lanes at a time from four
 * gathered words.  kb is a multiple of 8 (whole super-blocks). */
/* Bit b of each byte of h moved to bit 4, the rest cleared (a 16-bit
 * shift by at most 4 keeps the bit in its byte). */
static inline __m512i q5_bit(__m512i h, int b)
{
	return _mm512_and_si512(b <= 4 ? _mm512_slli_epi16(h, 4 - b) : _mm512_srli_epi16(h, b - 4),
				_mm512_set1_epi8(0x10));
}

static inline __attribute__((always_inline)) void qp_decode_q45k(int five, const uint8_t *w, size_t row_bytes, int rg,
								  int nr, int c0, int kb, __m512i *wt, float *sc,
								  float *mn, uint8_t *si, uint8_t *mi, float *dd,
								  float *dm)
{
	const size_t bb = five ? 176 : 144, qs = five ? 48 : 16; /* block bytes, where the nibbles start */
	const uint8_t *row[16];
	int32_t off[16];
	qp_rows(w, row_bytes, rg, nr, row, off);
	const __m512i vo = _mm512_loadu_si512((const void *)off), b6 = _mm512_set1_epi32(63);
	const __m512i f4 = _mm512_set1_epi32(15), t2 = _mm512_set1_epi32(3), m4 = _mm512_set1_epi8(0x0f);
	for (int s = 0; s < kb / 8; s++) {
		const size_t sb = (size_t)(c0 / 8 + s) * bb; /* the super-block's bytes in each row */
		const uint8_t *b0 = row[0] - off[0] + sb;
		const __m512i g0 = _mm512_i32gather_epi32(vo, b0, 1), g1 = _mm512_i32gather_epi32(vo, b0 + 4, 1);
		const __m512i g2 = _mm512_i32gather_epi32(vo, b0 + 8, 1), g3 = _mm512_i32gather_epi32(vo, b0 + 12, 1);
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g0));
		const __m512 dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g0, 16)));
		if (dd) { /* the integer form (hs__avx512_q45k_decode_int) */
			_mm512_store_ps(dd + 16 * s, d);
			_mm512_store_ps(dm + 16 * s, dmin);
		}
		_Pragma("GCC unroll 8") for (int j = 0; j < 8; j++) {
			__m512i a, m;
			if (j < 4) {
				a = _mm512_and_si512(_mm512_srli_epi32(g1, 8 * j), b6);
				m = _mm512_and_si512(_mm512_srli_epi32(g2, 8 * j), b6);
			} else {
				const int k = 8 * (j - 4);
				a = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(g3, k), f4),
						    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(g1, k + 6), t2), 4));
				m = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(g3, k + 4), f4),
						    _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(g2, k + 6), t2), 4));
			}
			if (si) {
				_mm_store_si128((__m128i *)(si + (8 * s + j) * 16), _mm512_cvtepi32_epi8(a));
				_mm_store_si128((__m128i *)(mi + (8 * s + j) * 16), _mm512_cvtepi32_epi8(m));
			} else {
				_mm512_store_ps(sc + (8 * s + j) * 32, _mm512_mul_ps(d, _mm512_cvtepi32_ps(a)));
				_mm512_store_ps(mn + (8 * s + j) * 32, _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(m)));
			}
		}
		const uint8_t *p[16];
		__m512i h[8];
		if (five) {
			for (int r = 0; r < 16; r++)
				p[r] = row[r] + sb + 16;
			qp_turn_rows(p, h);
		}
		_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
			__m512i u[8];
			for (int r = 0; r < 16; r++)
				p[r] = row[r] + sb + qs + 32 * i;
			qp_turn_rows(p, u);
			__m512i *lo = wt + 8 * (8 * s + 2 * i), *hi = lo + 8;
			_Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
				if (five) { /* (A & B) | C: ternary 0xea */
					lo[q] = _mm512_ternarylogic_epi32(u[q], m4, q5_bit(h[q], 2 * i), 0xea);
					hi[q] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(u[q], 4), m4, q5_bit(h[q], 2 * i + 1),
									  0xea);
				} else {
					lo[q] = _mm512_and_si512(u[q], m4);
					hi[q] = _mm512_and_si512(_mm512_srli_epi16(u[q], 4), m4);
				}
			}
		}
	}
}

/* IQ4_XS likewise: two blocks' 16 bytes a row turned at once, each nibble
 * looked up (value + 128) in one shuffle; the 6-bit scales (4 low bits in
 * scales_l, 2 high in scales_h) from two gathered words, 16 rows at a time. */
static void qp_decode_iq4xs(const uint8_t *w, size_t row_bytes, int rg, int nr, int c0, int kb, __m512i *wt,
			    float *sc)
{
	const uint8_t *row[16];
	int32_t off[16];
	qp_rows(w, row_bytes, rg, nr, row, off);
	const __m512i vo = _mm512_loadu_si512((const void *)off), m4 = _mm512_set1_epi8(0x0f);
	const __m512i lut = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)hs__iq4nl_values)),
					    _mm512_set1_epi8((char)0x80));
	const __m512i f4 = _mm512_set1_epi32(15), t2 = _mm512_set1_epi32(3), b32 = _mm512_set1_epi32(32);
	for (int s = 0; s < kb / 8; s++) {
		const size_t sb = (size_t)(c0 / 8 + s) * 136; /* the super-block's bytes in each row */
		const uint8_t *b0 = row[0] - off[0] + sb;
		const __m512i g0 = _mm512_i32gather_epi32(vo, b0, 1), g1 = _mm512_i32gather_epi32(vo, b0 + 4, 1);
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g0));
		for (int j = 0; j < 8; j++) {
			const __m512i ls = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(g1, 4 * j), f4),
							   _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(g0, 16 + 2 * j), t2), 4));
			_mm512_store_ps(sc + (8 * s + j) * 32, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(ls, b32))));
		}
		for (int i = 0; i < 4; i++) {
			const uint8_t *p[16];
			__m512i u[8];
			for (int r = 0; r < 16; r++)
				p[r] = row[r] + sb + 8 + 32 * i;
			qp_turn_rows(p, u);
			__m512i *o = wt + 8 * (8 * s + 2 * i);
			for (int q = 0; q < 4; q++) /* block 2i: units q of u[q]; block 2i + 1: of u[q + 4] */
				for (int k = 0; k < 2; k++) {
					const __m512i v = u[q + 4 * k];
					o[8 * k + q] = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
					o[8 * k + q + 4] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
				}
		}
	}
}

/* Q6_K likewise: per 128 values the two 32-byte runs of low nibbles and the
 * run of high bit pairs turned once each, every block's 6-bit values (0..63,
 * their - 32 left to the correction) joined in one ternary op; the 16 int8
 * scales of each row from four gathered words, 16 lanes at a time. */
static void qp_decode_q6k(const uint8_t *w, size_t row_bytes, int rg, int nr, int c0, int kb, __m512i *wt,
			  float *sc)
{
	const uint8_t *row[16];
	int32_t off[16];
	qp_rows(w, row_bytes, rg, nr, row, off);
	const __m512i vo = _mm512_loadu_si512((const void *)off);
	const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
	for (int s = 0; s < kb / 8; s++) {
		const size_t sb = (size_t)(c0 / 8 + s) * 210; /* the super-block's bytes in each row */
		const uint8_t *b0 = row[0] - off[0] + sb;
		/* d: the high half of bytes 206..209 (a word at 208 would pass the block) */
		const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_i32gather_epi32(vo, b0 + 206, 1), 16)));
		for (int g = 0; g < 4; g++) {
			const __m512i sw = _mm512_i32gather_epi32(vo, b0 + 192 + 4 * g, 1);
			for (int b = 0; b < 4; b++) /* scale 4g + b: block 2g + b / 2, half b % 2 */
				_mm512_store_ps(sc + (16 * s + 4 * g + b) * 16,
						_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srai_epi32(
									 _mm512_slli_epi32(sw, 24 - 8 * b), 24))));
		}
		for (int n = 0; n < 2; n++) {
			const uint8_t *p[16];
			__m512i a[8], b[8], h[8];
			for (int r = 0; r < 16; r++)
				p[r] = row[r] + sb + 64 * n;
			qp_turn_rows(p, a);
			for (int r = 0; r < 16; r++)
				p[r] += 32;
			qp_turn_rows(p, b);
			for (int r = 0; r < 16; r++)
				p[r] = row[r] + sb + 128 + 32 * n;
			qp_turn_rows(p, h);
			__m512i *o = wt + 8 * (8 * s + 4 * n);
			for (int q = 0; q < 8; q++) { /* (A & B) | C: ternary 0xea */
				o[q] = _mm512_ternarylogic_epi32(a[q], m4, _mm512_and_si512(_mm512_slli_epi16(h[q], 4), m30), 0xea);
				o[8 + q] = _mm512_ternarylogic_epi32(b[q], m4, _mm512_and_si512(_mm512_slli_epi16(h[q], 2), m30), 0xea);
				o[16 + q] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(a[q], 4), m4, _mm512_and_si512(h[q], m30), 0xea);
				o[24 + q] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b[q], 4), m4,
								      _mm512_and_si512(_mm512_srli_epi16(h[q], 2), m30), 0xea);
			}
		}
	}
}

/* One block of a token (its 32 bytes at xq) against a decoded block of 16
 * rows (u: 8 units of 16 rows x 4 values): the first and the second 16
 * values' int32 sums, apart (the 16-value types scale them apart). */
static inline __attribute__((always_inline)) void qp_dot_halves(const __m512i *u, const int8_t *xq, __m512i *a0,
								 __m512i *a1)
{
	__m512i s0 = _mm512_setzero_si512(), s1 = _mm512_setzero_si512();
	_Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
		s0 = _mm512_dpbusd_epi32(s0, u[q], _mm512_set1_epi32(load32(xq + 4 * q)));
		s1 = _mm512_dpbusd_epi32(s1, u[q + 4], _mm512_set1_epi32(load32(xq + 16 + 4 * q)));
	}
	*a0 = s0;
	*a1 = s1;
}

/* NT tokens (x, their prepared scalars at column j of the pass) against
 * the kb decoded blocks of one 16-row group; acc[i] the rows' sums of
 * token i.  (w + bias) x sums to w x + bias sum(x): the prepared pc takes
 * the second term off in int32, so each block's dot is exact, as in rows_qx. */
static inline __attribute__((always_inline)) void qp_tokens(int halves, int mins, const __m512i *wt, const float *sc,
							     const float *mn, int kb, int c0, int pt, int j,
							     const struct hs_block_q8_0 *const *x, const float *pdx,
							     const int32_t *pc, const float *ps, int NT, __m512 *acc,
							     struct hs_qp_prefetch *pf)
{
	for (int k = 0; k < kb; k++) {
		const __m512i *u = wt + 8 * k;
		hs__qp_prefetch_some(pf);
		const int b = c0 + k;
		/* decode16's [block][half][row]: a second half only for the 16-value types */
		const __m512 s0 = _mm512_load_ps(sc + k * 32), s1 = halves ? _mm512_load_ps(sc + k * 32 + 16) : s0;
		const __m512 m0 = _mm512_load_ps(mn + k * 32), m1 = halves ? _mm512_load_ps(mn + k * 32 + 16) : m0;
		_Pragma("GCC unroll 8") for (int i = 0; i < NT; i++) {
			__m512i a0, a1;
			qp_dot_halves(u, x[j + i][b].qs, &a0, &a1);
			const __m512 dx = _mm512_set1_ps(pdx[(size_t)b * pt + j + i]);
			const int32_t *c = pc + ((size_t)b * 2) * pt + j + i;
			const float *sx = ps + ((size_t)b * 2) * pt + j + i;
			if (halves) {
				a0 = _mm512_sub_epi32(a0, _mm512_set1_epi32(c[0]));
				a1 = _mm512_sub_epi32(a1, _mm512_set1_epi32(c[pt]));
				acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a0), s0), dx, acc[i]);
				acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a1), s1), dx, acc[i]);
				if (mins) {
					acc[i] = _mm512_fnmadd_ps(m0, _mm512_set1_ps(sx[0]), acc[i]);
					acc[i] = _mm512_fnmadd_ps(m1, _mm512_set1_ps(sx[pt]), acc[i]);
				}
			} else {
				const __m512i a = _mm512_sub_epi32(_mm512_add_epi32(a0, a1), _mm512_set1_epi32(c[0]));
				acc[i] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a), s0), dx, acc[i]);
				if (mins)
					acc[i] = _mm512_fnmadd_ps(m0, _mm512_set1_ps(sx[0]), acc[i]);
			}
		}
	}
}

/* Q4_K against tokens whose 8 blocks of each super-block share a scale
 * (Q8_K, as this tier quantizes Q4_K's activations): a register's 16-value
 * sums (4 vpdpbusd: at most 16 x 15 x 128 < 2^15, so an int16 in its int32
 * lane) take their 6-bit block scale in one vpdpwssd into one int32 sum a
 * super-block, the mins 4 vpdpwssd of block-pair sums, and a super-block
 * ends in two converts and three float ops: 11 vector ops a block and token
 * against 14 on the float path (on a Zen 4 core 2.9 against 2.5 G vpdpbusd
 * a second, the same loops in cache).  si, mi, dd, dm as
 * hs__avx512_q45k_decode_int lays them out; pb[(b / 2) * pt + t] block b's
 * and b + 1's sums of x as two int16; pdx a super-block's scale at its first
 * block.  Tokens NT <= 4 keep two sums each (shorter chains). */
static inline __attribute__((always_inline)) void qp_tokens_q4i(const __m512i *wt, const uint8_t *si,
								 const uint8_t *mi, const float *dd, const float *dm,
								 int kb, int c0, int pt, int j,
								 const struct hs_block_q8_0 *const *x, const float *pdx,
								 const int32_t *pb, int NT, float *accm,
								 struct hs_qp_prefetch *pf)
{
	const int two = NT <= 4;
	for (int s = 0; s < kb / 8; s++) {
		__m512i S[8], T[8];
		_Pragma("GCC unroll 8") for (int i = 0; i < NT; i++)
			S[i] = T[i] = _mm512_setzero_si512();
		for (int jb = 0; jb < 8; jb++) {
			const int k = 8 * s + jb, b = c0 + k;
			const __m512i *u = wt + 8 * k;
			hs__qp_prefetch_some(pf);
			const __m512i sv = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(si + 16 * k)));
			_Pragma("GCC unroll 8") for (int i = 0; i < NT; i++) {
				__m512i a0, a1;
				qp_dot_halves(u, x[j + i][b].qs, &a0, &a1);
				S[i] = _mm512_dpwssd_epi32(S[i], a0, sv);
				if (two)
					T[i] = _mm512_dpwssd_epi32(T[i], a1, sv);
				else
					S[i] = _mm512_dpwssd_epi32(S[i], a1, sv);
			}
		}
		/* the mins of block pairs, lanes m(2p) | m(2p + 1) << 16 */
		__m512i mp[4];
		_Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
			const uint8_t *m = mi + 16 * (8 * s + 2 * p);
			mp[p] = _mm512_or_si512(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)m)),
						_mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(m + 16))), 16));
		}
		const __m512 d = _mm512_load_ps(dd + 16 * s), dmin = _mm512_load_ps(dm + 16 * s);
		const int b0 = c0 + 8 * s;
		_Pragma("GCC unroll 8") for (int i = 0; i < NT; i++) {
			const int32_t *bp = pb + (size_t)(b0 / 2) * pt + j + i;
			__m512i M = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp[0], _mm512_set1_epi32(bp[0]));
			_Pragma("GCC unroll 3") for (int p = 1; p < 4; p++)
				M = _mm512_dpwssd_epi32(M, mp[p], _mm512_set1_epi32(bp[(size_t)p * pt]));
			if (two)
				S[i] = _mm512_add_epi32(S[i], T[i]);
			const __m512 v = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(M), dmin,
							  _mm512_mul_ps(_mm512_cvtepi32_ps(S[i]), d));
			float *a = accm + 16 * (j + i);
			_mm512_store_ps(a, _mm512_fmadd_ps(v, _mm512_set1_ps(pdx[(size_t)b0 * pt + j + i]),
							   _mm512_load_ps(a)));
		}
	}
}

/* Whether every token's super-blocks share one scale over their 8 blocks. */
static int qp_q8k_shared(const struct hs_block_q8_0 *const *x, int nt, int nb)
{
	for (int t = 0; t < nt; t++)
		for (int b = 0; b < nb; b++)
			if (x[t][b].d != x[t][b & ~7].d)
				return 0;
	return 1;
}

void hs__avx512_qp_prefetch_plan(struct hs_qp_prefetch *pf, int type, const uint8_t *w, size_t row_bytes, int rg,
				  int r1, int c0, int kb, int slots)
{
	const size_t cb = hs__type_row_bytes(type, (uint64_t)c0 * HS_QK),
		     ce = hs__type_row_bytes(type, (uint64_t)(c0 + kb) * HS_QK);
	pf->base = (const char *)w + (size_t)(rg + 16) * row_bytes + cb;
	pf->row_bytes = row_bytes;
	pf->span = ce - cb;
	pf->rows = r1 - rg - 16 < 0 ? 0 : r1 - rg - 16 < 16 ? r1 - rg - 16 : 16;
	pf->lines = (int)((ce - cb + 63) / 64) + 1; /* + 1: a row's chunk may straddle one more line */
	pf->r = pf->l = 0;
	const int n = pf->rows * pf->lines;
	pf->per = slots > 0 ? (n + slots - 1) / slots : n;
}

int hs__avx512_qp_decode(int type, const uint8_t *w, size_t row_bytes, int rg, int r1, int c0, int kb, void *wtv,
			 float *sc, float *mn)
{
	__m512i *wt = wtv;
	const int nr = r1 - rg < 16 ? r1 - rg : 16;
	if (type == HS_TYPE_Q4_K) {
		qp_decode_q45k(0, w, row_bytes, rg, nr, c0, kb, wt, sc, mn, NULL, NULL, NULL, NULL);
	} else if (type == HS_TYPE_Q5_K) {
		qp_decode_q45k(1, w, row_bytes, rg, nr, c0, kb, wt, sc, mn, NULL, NULL, NULL, NULL);
	} else if (type == HS_TYPE_IQ4_XS) {
		qp_decode_iq4xs(w, row_bytes, rg, nr, c0, kb, wt, sc);
	} else if (type == HS_TYPE_Q6_K) {
		qp_decode_q6k(w, row_bytes, rg, nr, c0, kb, wt, sc);
	} else {
		_Alignas(64) int8_t wq[QP_CHUNK * 16 * 32];
		hs__avx512_qx_decode16(type, w, row_bytes, rg, nr, c0, kb, wq, sc, mn);
		for (int k = 0; k < kb; k++)
			qp_turn(wq + (size_t)k * 16 * 32, wt + 8 * k);
	}
	return qp_bias(type);
}

void hs__avx512_q45k_decode_int(int five, const uint8_t *w, size_t row_bytes, int rg, int r1, int c0, int kb, void *wt,
				uint8_t *si, uint8_t *mi, float *dd, float *dm)
{
	const int nr = r1 - rg < 16 ? r1 - rg : 16;
	if (five)
		qp_decode_q45k(1, w, row_bytes, rg, nr, c0, kb, wt, NULL, NULL, si, mi, dd, dm);
	else
		qp_decode_q45k(0, w, row_bytes, rg, nr, c0, kb, wt, NULL, NULL, si, mi, dd, dm);
}

void hs__avx512_q4k_decode_packed(const uint8_t *w, int ncols, int rg, int c0, int kb, void *wtv, uint8_t *si,
				  uint8_t *mi, float *dd, float *dm)
{
	const size_t gbb = HS_PACK_ROWS * sizeof(struct hs_block_q4_k);
	const uint8_t *g = w + (size_t)(rg / HS_PACK_ROWS) * HS_PACK_ROWS * hs__type_row_bytes(HS_TYPE_Q4_K, (uint64_t)ncols);
	const __m512i m4 = _mm512_set1_epi8(0x0f), m63 = _mm512_set1_epi8(63), m30 = _mm512_set1_epi8(0x30);
	__m512i *wt = wtv;

	for (int s = 0; s < kb / 8; s++) {
		const uint8_t *bg = g + (size_t)(c0 / 8 + s) * gbb;
		_mm512_store_ps(dd + 16 * s, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)bg)));
		_mm512_store_ps(dm + 16 * s, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(bg + 32))));
		/* the 12 scale planes as packed-512.h's PACKED_KGROUP unpacks them */
		const __m512i A = _mm512_loadu_si512((const void *)(bg + 64));
		const __m512i B = _mm512_loadu_si512((const void *)(bg + 128));
		const __m512i C = _mm512_loadu_si512((const void *)(bg + 192));
		_mm512_store_si512((void *)(si + 128 * s), _mm512_and_si512(A, m63));
		_mm512_store_si512((void *)(si + 128 * s + 64),
				   _mm512_or_si512(_mm512_and_si512(C, m4), _mm512_and_si512(_mm512_srli_epi16(A, 2), m30)));
		_mm512_store_si512((void *)(mi + 128 * s), _mm512_and_si512(B, m63));
		_mm512_store_si512((void *)(mi + 128 * s + 64),
				   _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(C, 4), m4),
						   _mm512_and_si512(_mm512_srli_epi16(B, 2), m30)));
		/* unit 8i + q: block 2i's values 4q.. in its low nibbles, 2i + 1's
		 * in its high ones, 16 rows x 4 bytes as wt's units are */
		_Pragma("GCC unroll 4") for (int i = 0; i < 4; i++) {
			__m512i *lo = wt + 8 * (8 * s + 2 * i), *hi = lo + 8;
			_Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) {
				const __m512i v = _mm512_loadu_si512((const void *)(bg + 256 + 64 * (8 * i + q)));
				lo[q] = _mm512_and_si512(v, m4);
				hi[q] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
			}
		}
	}
}

/* The 8 blocks of each 256 values share the scale of the largest |x|, as
 * ggml's Q8_K (the same steps as hs__quantize_q8_k_ref, so the same bytes);
 * a tail short of 256 values per block. */
void hs__avx512_quantize_q8_k(const float *x, struct hs_block_q8_0 *y, int n)
{
	const int n256 = n / 256 * 256;

	for (int i = 0; i < n256; i += 256) {
		__m512 m = _mm512_abs_ps(_mm512_loadu_ps(x + i));
		for (int k = 16; k < 256; k += 16)
			m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i + k)));
		const float d = _mm512_reduce_max_ps(m) / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
		const __m512 s = _mm512_set1_ps(id);
		const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
		for (int b = 0; b < 8; b++) {
			struct hs_block_q8_0 *yb = y + i / HS_QK + b;
			const float *p = x + i + b * HS_QK;
			/* vcvtps2dq rounds half to even, as the reference's nearbyintf */
			const __m512i i0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(p), s));
			const __m512i i1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(p + 16), s));
			yb->d = dh;
			_mm_storeu_si128((__m128i *)yb->qs, _mm512_cvtsepi32_epi8(i0));
			_mm_storeu_si128((__m128i *)(yb->qs + 16), _mm512_cvtsepi32_epi8(i1));
		}
	}
	if (n256 < n)
		quantize_q8_0_256(x + n256, y + n256 / HS_QK, n - n256);
}

/* One pass: nt (<= QP_MAX_TOKENS) tokens, every 16-row group of r0..r1. */
static void tile_qp_pass(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int nb,
			 const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int flags = hs__avx512_qx_flags(type), halves = flags & HS_QX_HALVES, mins = flags & HS_QX_MINS;
	const int pt = nt, bias = qp_bias(type); /* the prepared scalars: [block][half][token] */
	const int q4i = type == HS_TYPE_Q4_K && qp_q8k_shared(x, nt, nb); /* qp_tokens_q4i */
	float pdx[(size_t)nb * pt], ps[(size_t)nb * 2 * pt];
	int32_t pc[(size_t)nb * 2 * pt], pb[(size_t)(nb + 1) / 2 * pt]; /* (nb + 1: a VLA of 0 is undefined) */
	_Alignas(64) float sc[QP_CHUNK * 32], mn[QP_CHUNK * 32];
	_Alignas(64) uint8_t si[QP_CHUNK * 16], mi[QP_CHUNK * 16];
	_Alignas(64) float dd[QP_CHUNK / 8 * 16], dm[QP_CHUNK / 8 * 16];
	_Alignas(64) float accm[QP_MAX_TOKENS * 16];
	__m512i wt[QP_CHUNK * 8];
	struct hs_qp_prefetch pf;

	for (int t = 0; t < nt; t++)
		for (int b = 0, hp = 0; b < nb; b++) {
			const struct hs_block_q8_0 *xb = &x[t][b];
			int h0, h1;
			qx_half_sums(xb, &h0, &h1);
			const float dx = _cvtsh_ss(xb->d);
			pdx[(size_t)b * pt + t] = dx;
			pc[(size_t)b * 2 * pt + t] = bias * (halves ? h0 : h0 + h1);
			pc[((size_t)b * 2 + 1) * pt + t] = bias * h1;
			ps[(size_t)b * 2 * pt + t] = dx * (float)(halves ? h0 : h0 + h1);
			ps[((size_t)b * 2 + 1) * pt + t] = dx * (float)h1;
			if (q4i && (b & 1)) /* block b - 1's sum and b's; |sum| <= 32 x 128: int16s */
				pb[(size_t)(b / 2) * pt + t] = (int32_t)((uint32_t)(uint16_t)hp | (uint32_t)(h0 + h1) << 16);
			hp = h0 + h1;
		}
	for (int rg = r0; rg < r1; rg += 16) {
		const int nr = r1 - rg < 16 ? r1 - rg : 16;
		memset(accm, 0, sizeof(float) * 16 * (size_t)nt);
		for (int c0 = 0; c0 < nb; c0 += QP_CHUNK) {
			const int kb = nb - c0 < QP_CHUNK ? nb - c0 : QP_CHUNK;
			/* the next group's chunk, spread over this one's token passes */
			hs__avx512_qp_prefetch_plan(&pf, type, w, row_bytes, rg, r1, c0, kb,
						    kb * (nt / 8 + (nt % 8 >= 4) + (nt % 4 >= 2) + (nt % 2)));
			if (q4i)
				hs__avx512_q45k_decode_int(0, w, row_bytes, rg, r1, c0, kb, wt, si, mi, dd, dm);
			else
				hs__avx512_qp_decode(type, w, row_bytes, rg, r1, c0, kb, wt, sc, mn);
			for (int j = 0, tn; j < nt; j += tn) {
				/* 8 tokens at a time, the rest by 4, 2 and 1: each an
				 * unrolled body (one at a time, the rest was a tenth of
				 * the time on experts of about 32 tokens) */
				tn = nt - j >= 8 ? 8 : nt - j >= 4 ? 4 : nt - j >= 2 ? 2 : 1;
#define QP_BY_TOKENS(F)                 \
	switch (tn) {                   \
	case 8: F(8); break;            \
	case 4: F(4); break;            \
	case 2: F(2); break;            \
	default: F(1); break;           \
	}
#define QP_Q4I(N) qp_tokens_q4i(wt, si, mi, dd, dm, kb, c0, pt, j, x, pdx, pb, N, accm, &pf)
#define QP_TOKENS(H, M, N) qp_tokens(H, M, wt, sc, mn, kb, c0, pt, j, x, pdx, pc, ps, N, acc, &pf)
#define QP_FLAGS(N) (halves ? mins ? QP_TOKENS(1, 1, N) : QP_TOKENS(1, 0, N) \
			    : mins ? QP_TOKENS(0, 1, N) : QP_TOKENS(0, 0, N))
				if (q4i) {
					QP_BY_TOKENS(QP_Q4I)
					continue;
				}
				__m512 acc[8];
				for (int i = 0; i < tn; i++)
					acc[i] = _mm512_load_ps(accm + 16 * (j + i));
				QP_BY_TOKENS(QP_FLAGS)
				for (int i = 0; i < tn; i++)
					_mm512_store_ps(accm + 16 * (j + i), acc[i]);
#undef QP_FLAGS
#undef QP_TOKENS
#undef QP_Q4I
#undef QP_BY_TOKENS
			}
		}
		const __mmask16 live = (__mmask16)((1u << nr) - 1); /* (a plain copy loop became rep movsq) */
		for (int t = 0; t < nt; t++)
			_mm512_mask_storeu_ps(out[t] + rg - r0, live, _mm512_load_ps(accm + 16 * t));
	}
}

/* All tokens in passes; 0 when the rows are too long for a pass (the
 * caller takes another path). */
static int tile_qp(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		   const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK, pass = qp_pass_tokens(nb);
	if (!pass)
		return 0;
	for (int j = 0; j < nt; j += pass)
		tile_qp_pass(type, w, row_bytes, r0, r1, nb, x + j, nt - j < pass ? nt - j : pass, out + j);
	return 1;
}

/* ---- one token (decode) of Q4_K, Q5_K, Q6_K, IQ4_XS: 512-bit rows ----------
 * The 256-bit rows (rows_qx) take one 32-value block a register: a byte
 * dot, a convert, a broadcast scale and an FMA for every 32 values.  Here a
 * super-block's weights are four 64-byte registers as the bytes lie (a
 * nibble mask or shift each, no shuffling), and the token's bytes are put
 * once a call in the order those registers hold the values (qx1_order), so
 * one vpdpbusd covers 64 values and its 16 lanes fall into whole 32-value
 * blocks (16-value halves for Q6_K) whose scales one permute places: half
 * the vector work per byte of the 256-bit rows.  The prefetch goes into L2
 * on Intel, as the packed decode's (with T0 this kernel was no faster than
 * the 256-bit rows there).  On a 2-core Xeon, fused FFN at 1 token, GB/s
 * over read, 1 and 2 threads: Q4_K 0.77-0.80 -> 0.88-0.97, Q5_K 0.74-0.77
 * -> 0.89-0.92, Q6_K 0.78-0.83 -> 0.85-0.89, IQ4_XS 0.72-0.78 -> 0.89-0.99
 * (docs/kernels.md). */
static inline int qx1_type(int type)
{
	return type == HS_TYPE_Q4_K || type == HS_TYPE_Q5_K || type == HS_TYPE_Q6_K || type == HS_TYPE_IQ4_XS;
}

/* The token's bytes, per super-block, in the order of qx1_weights's four
 * registers: blocks 0 2 1 3 4 6 5 7 (Q4_K, Q5_K: a register's low 32 bytes
 * are one block's low nibbles, its high 32 the block two on); as they are
 * (Q6_K); 16-byte halves 0a 1a 2a 3a 0b 1b 2b 3b, then blocks 4-7 alike
 * (IQ4_XS: low nibbles of 64 bytes are the first halves of 4 blocks). */
static void qx1_order(int type, const struct hs_block_q8_0 *x, int nb, int8_t *xq)
{
	static const int k45[8] = { 0, 2, 1, 3, 4, 6, 5, 7 };
	for (int u = 0; u < nb / 8; u++) {
		const struct hs_block_q8_0 *xb = x + 8 * u;
		int8_t *o = xq + 256 * u;
		for (int j = 0; j < 8; j++)
			if (type == HS_TYPE_IQ4_XS) {
				memcpy(o + 128 * (j / 4) + 16 * (j % 4), xb[j].qs, 16);
				memcpy(o + 128 * (j / 4) + 64 + 16 * (j % 4), xb[j].qs + 16, 16);
			} else {
				memcpy(o + 32 * j, xb[type == HS_TYPE_Q6_K ? j : k45[j]].qs, 32);
			}
	}
}

/* Shift counts for the low and the high 32 bytes of a register. */
static inline __m512i qx1_counts(int lo, int hi)
{
	return _mm512_inserti64x4(_mm512_set1_epi16((short)lo), _mm256_set1_epi16((short)hi), 1);
}

/* A super-block's 256 values (+ the offset qx_offset names) in four
 * registers, in qx1_order's order.  The high bits (Q5_K's fifth, Q6_K's
 * fifth and sixth) move into place with a 16-bit shift of the high-bit
 * bytes copied to both halves, by a count per half; a 16-bit shift by at
 * most 4 keeps each byte's bits in the byte (as qx_values). */
static inline __attribute__((always_inline)) void qx1_weights(int type, const uint8_t *blk, __m512i W[4],
							       const __m512i iq4)
{
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	switch (type) {
	case HS_TYPE_Q4_K:
	case HS_TYPE_Q5_K: {
		const uint8_t *qs = blk + (type == HS_TYPE_Q5_K ? 48 : 16);
		for (int h = 0; h < 2; h++) {
			const __m512i q = _mm512_loadu_si512(qs + 64 * h);
			W[2 * h] = _mm512_and_si512(q, m4);
			W[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
		}
		if (type == HS_TYPE_Q5_K) { /* bit j of the high-bit bytes to bit 4, block j */
			const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
			const __m512i m10 = _mm512_set1_epi8(0x10);
			W[0] = _mm512_or_si512(W[0], _mm512_and_si512(_mm512_sllv_epi16(H, qx1_counts(4, 2)), m10));
			W[1] = _mm512_or_si512(W[1], _mm512_and_si512(_mm512_sllv_epi16(H, qx1_counts(3, 1)), m10));
			W[2] = _mm512_or_si512(W[2], _mm512_and_si512(_mm512_srlv_epi16(H, qx1_counts(0, 2)), m10));
			W[3] = _mm512_or_si512(W[3], _mm512_and_si512(_mm512_srlv_epi16(H, qx1_counts(1, 3)), m10));
		}
		return;
	}
	case HS_TYPE_Q6_K: { /* blocks 4n + k: bits 2k, 2k + 1 of the high-bit bytes to bits 4, 5 */
		const __m512i m30 = _mm512_set1_epi8(0x30);
		for (int n = 0; n < 2; n++) {
			const __m512i q = _mm512_loadu_si512(blk + 64 * n);
			const __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n)));
			W[2 * n] = _mm512_or_si512(_mm512_and_si512(q, m4),
						   _mm512_and_si512(_mm512_sllv_epi16(H, qx1_counts(4, 2)), m30));
			W[2 * n + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(q, 4), m4),
						       _mm512_and_si512(_mm512_srlv_epi16(H, qx1_counts(0, 2)), m30));
		}
		return;
	}
	default: /* IQ4_XS */
		for (int h = 0; h < 2; h++) {
			const __m512i q = _mm512_loadu_si512(blk + 8 + 64 * h);
			W[2 * h] = _mm512_shuffle_epi8(iq4, _mm512_and_si512(q, m4));
			W[2 * h + 1] = _mm512_shuffle_epi8(iq4, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
		}
		return;
	}
}

/* A token quantized with one scale per 256 values (the AMX tier's
 * quantize_q8_k for Q4_K and Q5_K, kernels.h): d[u] that scale for
 * super-block u, bsum[b] the sum of block b's bytes.  Then a super-block's
 * 6-bit scales and mins can stay integers: each register's 16 lanes of
 * 4-value products (at most 4 x 31 x 128, an int16) times their block's
 * scale by one vpdpwssd into one int32 sum, and one convert and one FMA by
 * d d_x per super-block, where the float path takes a convert, a permute
 * and an FMA per register and the scales' converts and multiplies. */
struct qx1_shared {
	float *d;
	int16_t *bsum, *hsum; /* hsum[2 b + h]: the sum of half h of block b */
};

/* qx_k45_bytes in vector registers (its scalar shifts and masks, and the
 * trip through memory, were a quarter of this kernel's instructions): the
 * 8 scales in bytes 0-7, the 8 mins in 8-15.  Scale j < 4 is q[j] & 63,
 * j >= 4 q[j + 4] & 15 | (q[j - 4] >> 6) << 4; min j < 4 q[j + 4] & 63, j >= 4
 * q[j + 4] >> 4 | (q[j] >> 6) << 4 (q: the 12 bytes at 4). */
static inline __m128i qx1_k45_scales(const uint8_t *blk)
{
	const __m128i q = _mm_loadu_si128((const __m128i *)(blk + 4)); /* 4 more bytes of the block */
	const __m128i a = _mm_shuffle_epi8(q, _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11));
	const __m128i b = _mm_shuffle_epi8(q, _mm_setr_epi8(-128, -128, -128, -128, 0, 1, 2, 3, -128, -128, -128, -128, 4,
							    5, 6, 7));
	const __m128i m1 = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0);
	const __m128i m2 = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15);
	return _mm_or_si128(_mm_or_si128(_mm_and_si128(a, m1), _mm_and_si128(_mm_srli_epi16(a, 4), m2)),
			    _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30)));
}

/* 1 and sh filled when every super-block's 8 blocks share their scale. */
static int qx1_share(const struct hs_block_q8_0 *x, int nb, struct qx1_shared *sh)
{
	for (int u = 0; u < nb / 8; u++) {
		for (int j = 1; j < 8; j++)
			if (x[8 * u + j].d != x[8 * u].d)
				return 0;
		sh->d[u] = _cvtsh_ss(x[8 * u].d);
	}
	for (int b = 0; b < nb; b++) {
		int h0, h1;
		qx_half_sums(&x[b], &h0, &h1);
		sh->bsum[b] = (int16_t)(h0 + h1);
		sh->hsum[2 * b] = (int16_t)h0;
		sh->hsum[2 * b + 1] = (int16_t)h1;
	}
	return 1;
}

/* Rows r0..r1 against one token: xq from qx1_order, tk from qx_prepare.
 * Per super-block: the scales (qx_unit_scales) times the token's block
 * scales in one multiply, the mins in one FMA (two for Q6_K's 16), then per
 * register a vpdpbusd, a convert, a permute of the scales and an FMA (IQ4_XS:
 * a block's two halves share a scale, so two registers share one). */
static inline __attribute__((always_inline)) void rows_qx1(int type, const uint8_t *w, size_t row_bytes, int r0,
							    int r1, int nb, const int8_t *xq, const struct qx_tok *tk,
							    const struct qx1_shared *sh, float *out)
{
	const __m512i iq4 = _mm512_broadcast_i32x4(_mm_add_epi8(_mm_loadu_si128((const __m128i *)hs__iq4nl_values),
								 _mm_set1_epi8((char)qx_offset(type))));
	const int halves = qx_halves(type), iq = type == HS_TYPE_IQ4_XS;
	const size_t ub = qx_unit_bytes(type), ahead = qx_prefetch_ahead(type, PREFETCH_AHEAD_512);
	const uint8_t *end = w + (size_t)r1 * row_bytes; /* prefetches stay inside the call's rows */
	/* the scale of each lane, register z: Q4_K/Q5_K blocks (0|2) (1|3) (4|6)
	 * (5|7); Q6_K halves 4z + lane / 4; IQ4_XS (z = 0, 2) blocks 2z + lane / 4 */
	__m512i idx[4];
	for (int z = 0; z < 4; z++) {
		static const int b45[4][2] = { { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 } };
		const __m512i l4 = _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
		idx[z] = halves ? _mm512_add_epi32(l4, _mm512_set1_epi32(4 * z))
			 : iq	? _mm512_add_epi32(l4, _mm512_set1_epi32(2 * z))
				: _mm512_inserti64x4(_mm512_set1_epi32(b45[z][0]), _mm256_set1_epi32(b45[z][1]), 1);
	}
	/* shared: int32 lane i of register z holds the byte of its block's
	 * scale (bytes 1-3 zero: vpshufb's 0x80) */
	__m512i sidx[4], widx[4];
	for (int z = 0; z < 4; z++) { /* Q6_K: word 2i of register z the scale of its half 4z + i / 4 */
		_Alignas(64) int16_t wi[32] = { 0 };
		for (int i = 0; i < 16; i++)
			wi[2 * i] = (int16_t)(4 * z + i / 4);
		widx[z] = _mm512_load_si512(wi);
	}
	for (int z = 0; z < 4; z++) {
		static const int b45[4][2] = { { 0, 2 }, { 1, 3 }, { 4, 6 }, { 5, 7 } };
		sidx[z] = _mm512_inserti64x4(_mm512_set1_epi32((int)0x80808000u | b45[z][0]),
					     _mm256_set1_epi32((int)0x80808000u | b45[z][1]), 1);
	}
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w + (size_t)r * row_bytes;
		__m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), macc = _mm512_setzero_ps();
		__m128 macc4 = _mm_setzero_ps();
		for (int u = 0; u < nb / 8; u++) {
			_Alignas(64) float s[QX_MAX_UNIT], m[QX_MAX_UNIT];
			const uint8_t *blk = row + (size_t)u * ub;
			const int8_t *xu = xq + 256 * u;
			const int b0 = 8 * u;
			if (blk + ahead + ub <= end) { /* as rows_qx; T1 on Intel (cpu-features.h) */
				if (hs__prefetch_l2)
					for (size_t o = 0; o < ub; o += 64)
						_mm_prefetch((const char *)blk + ahead + o, _MM_HINT_T1);
				else
					for (size_t o = 0; o < ub; o += 64)
						_mm_prefetch((const char *)blk + ahead + o, _MM_HINT_T0);
			}
			if (sh && type == HS_TYPE_Q6_K) { /* against one scale per 256: qx1_shared */
				const __m256i S16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
				const __m512i S = _mm512_castsi256_si512(S16);
				/* the offset's part, 32 s_h sum_h, taken from the int32 sum first */
				const __m256i mi = _mm256_madd_epi16(S16, _mm256_loadu_si256((const __m256i *)(sh->hsum + 2 * b0)));
				__m512i W[4], ai = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(),
											    _mm256_slli_epi32(mi, 5)));
				uint16_t hd;
				memcpy(&hd, blk + 208, 2);
				qx1_weights(type, blk, W, iq4);
				_Pragma("GCC unroll 4") for (int z = 0; z < 4; z++) {
					const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), W[z],
									      _mm512_loadu_si512(xu + 64 * z));
					ai = _mm512_dpwssd_epi32(ai, p, _mm512_maskz_permutexvar_epi16(0x55555555, widx[z], S));
				}
				const __m512 dd = _mm512_set1_ps(_cvtsh_ss(hd) * sh->d[u]);
				if (u % 2)
					acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), dd, acc1);
				else
					acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), dd, acc0);
				continue;
			}
			if (sh) { /* Q4_K, Q5_K against one scale per 256: qx1_shared */
				const __m128i sm16 = qx1_k45_scales(blk);
				const __m512i S4 = _mm512_broadcast_i32x4(sm16);
				/* d d_x and dmin d_x */
				const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)load32(blk))),
							     _mm_set1_ps(sh->d[u]));
				const __m128i mi = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(sm16, 8)),
								  _mm_loadu_si128((const __m128i *)(sh->bsum + b0)));
				macc4 = _mm_fmadd_ps(_mm_cvtepi32_ps(mi), _mm_permute_ps(dd, 0x55), macc4);
				__m512i W[4], ai = _mm512_setzero_si512();
				qx1_weights(type, blk, W, iq4);
				_Pragma("GCC unroll 4") for (int z = 0; z < 4; z++) {
					const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), W[z],
									      _mm512_loadu_si512(xu + 64 * z));
					ai = _mm512_dpwssd_epi32(ai, p, _mm512_shuffle_epi8(S4, sidx[z]));
				}
				if (u % 2) /* two chains */
					acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_broadcastss_ps(dd), acc1);
				else
					acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_broadcastss_ps(dd), acc0);
				continue;
			}
			qx_unit_scales(type, blk, s, m);
			__m512 f;
			if (halves) { /* Q6_K: 16 scales, the offset 32 through the mins */
				const __m512 s16 = _mm512_load_ps(s);
				f = _mm512_mul_ps(s16, _mm512_loadu_ps(tk->d2 + 2 * b0));
				macc = _mm512_fmadd_ps(_mm512_mul_ps(s16, _mm512_set1_ps((float)qx_offset(type))),
						       _mm512_loadu_ps(tk->x2 + 2 * b0), macc);
			} else {
				const __m256 s8 = _mm256_load_ps(s);
				const __m256 m8 = iq ? _mm256_mul_ps(s8, _mm256_set1_ps((float)qx_offset(type))) : _mm256_load_ps(m);
				f = _mm512_zextps256_ps512(_mm256_mul_ps(s8, _mm256_loadu_ps(tk->d1 + b0)));
				macc = _mm512_fmadd_ps(_mm512_zextps256_ps512(m8),
						       _mm512_zextps256_ps512(_mm256_loadu_ps(tk->x1 + b0)), macc);
			}
			__m512i W[4];
			qx1_weights(type, blk, W, iq4);
			if (iq) {
				const __m512i p0 = _mm512_dpbusd_epi32(
					_mm512_dpbusd_epi32(_mm512_setzero_si512(), W[0], _mm512_loadu_si512(xu)), W[1],
					_mm512_loadu_si512(xu + 64));
				const __m512i p1 = _mm512_dpbusd_epi32(
					_mm512_dpbusd_epi32(_mm512_setzero_si512(), W[2], _mm512_loadu_si512(xu + 128)),
					W[3], _mm512_loadu_si512(xu + 192));
				acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), _mm512_permutexvar_ps(idx[0], f), acc0);
				acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), _mm512_permutexvar_ps(idx[2], f), acc1);
				continue;
			}
			_Pragma("GCC unroll 4") for (int z = 0; z < 4; z++) {
				const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), W[z],
								      _mm512_loadu_si512(xu + 64 * z));
				if (z % 2) /* two chains */
					acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx[z], f), acc1);
				else
					acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_permutexvar_ps(idx[z], f), acc0);
			}
		}
		if (sh && type != HS_TYPE_Q6_K) {
			macc4 = _mm_add_ps(macc4, _mm_movehl_ps(macc4, macc4));
			macc4 = _mm_add_ss(macc4, _mm_movehdup_ps(macc4));
			out[r - r0] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - _mm_cvtss_f32(macc4);
		} else {
			out[r - r0] = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) - _mm512_reduce_add_ps(macc);
		}
	}
}

#define ROWS_QX1(TYPE, SH) rows_qx1(TYPE, w, row_bytes, r0, r1, nb, xq, &tk, SH, out)

static void tile_qx1(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		     const struct hs_block_q8_0 *x, float *out)
{
	const int nb = ncols / HS_QK, halves = qx_halves(type);
	/* the token's bytes and its prepared sums: at most 64 KiB and 40 KiB
	 * for the 65536 columns hotset accepts */
	_Alignas(64) int8_t xq[(size_t)nb * 32];
	float d[nb * (halves ? 5 : 2)];
	struct qx_tok tk = { d, halves ? d + nb : NULL, halves ? NULL : d + nb, halves ? d + 3 * nb : NULL };
	_Alignas(16) int16_t bsum[nb], hsum[2 * nb];
	float dsb[nb / 8 + 1];
	struct qx1_shared sh = { dsb, bsum, hsum };
	qx1_order(type, x, nb, xq);
	if (type != HS_TYPE_IQ4_XS && qx1_share(x, nb, &sh)) {
		if (type == HS_TYPE_Q4_K)
			ROWS_QX1(HS_TYPE_Q4_K, &sh);
		else if (type == HS_TYPE_Q5_K)
			ROWS_QX1(HS_TYPE_Q5_K, &sh);
		else
			ROWS_QX1(HS_TYPE_Q6_K, &sh);
		return;
	}
	qx_prepare(type, x, nb, tk);
	switch (type) {
	case HS_TYPE_Q4_K: ROWS_QX1(HS_TYPE_Q4_K, NULL); break;
	case HS_TYPE_Q5_K: ROWS_QX1(HS_TYPE_Q5_K, NULL); break;
	case HS_TYPE_Q6_K: ROWS_QX1(HS_TYPE_Q6_K, NULL); break;
	default: ROWS_QX1(HS_TYPE_IQ4_XS, NULL); break;
	}
}

static void tile_q_512(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	if (nt == 1 && qx1_type(type)) {
		tile_qx1(type, w, row_bytes, r0, r1, ncols, x[0], out[0]);
		return;
	}
	if (type != HS_TYPE_Q8_0 && type != HS_TYPE_MXFP4 && nt >= QP_MIN_TOKENS &&
	    tile_qp(type, w, row_bytes, r0, r1, ncols, x, nt, out))
		return;
	if (type != HS_TYPE_Q8_0 && type != HS_TYPE_MXFP4 && nt >= LANES_MIN_TOKENS) {
		/* whole lane tiles, and a last one of 8 or more; the rest 256-bit */
		const int lanes = nt % LANE_TOKENS >= LANES_MIN_TOKENS ? nt : nt / LANE_TOKENS * LANE_TOKENS;
		tile_qx_lanes_any(type, w, row_bytes, r0, r1, ncols, x, lanes, out);
		if (lanes < nt)
			tile_q_256(type, w, row_bytes, r0, r1, ncols, x + lanes, nt - lanes, out + lanes);
		return;
	}
	if (type != HS_TYPE_Q8_0) {
		tile_q_256(type, w, row_bytes, r0, r1, ncols, x, nt, out);
		return;
	}
	/* tokens that go in lanes: whole tiles, and a last one of 8 or more */
	int lanes = 0;
	if (nt >= LANES_MIN_TOKENS)
		lanes = nt % LANE_TOKENS >= LANES_MIN_TOKENS ? nt : nt / LANE_TOKENS * LANE_TOKENS;
	if (lanes)
		tile_q8_lanes(w, row_bytes, r0, r1, ncols, x, lanes, out);
	for (int j = lanes; j < nt; j++)
		rows8_q8_exact(w, row_bytes, r0, r1, ncols / HS_QK, x[j], out[j]);
}

void hs__avx512_tile_q(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	tile_q_512(type, w, row_bytes, r0, r1, ncols, x, nt, out);
}

int hs__avx512_qx_flags(int type)
{
	if (type == HS_TYPE_MXFP4 || type == HS_TYPE_Q8_0 || !hs__kernel_type_quantized(type))
		return -1;
	return (qx_halves(type) ? HS_QX_HALVES : 0) | (qx_has_min(type) && !qx_offset(type) ? HS_QX_MINS : 0);
}

/* One row's blocks for hs__avx512_qx_decode16, for a type known at compile
 * time (qx_values and qx_unit_scales specialise on it). */
static inline __attribute__((always_inline)) void qx_decode_row(int type, const uint8_t *row, int ri, int b0, int kb,
								 int8_t *wq, float *sc, float *mn)
{
	const __m256i iq4 = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hs__iq4nl_values)),
					    _mm256_set1_epi8((char)qx_offset(type)));
	const int uv = qx_unit_values(type) / HS_QK, halves = qx_halves(type);
	const int mins = qx_has_min(type) && !qx_offset(type);
	const size_t ub = qx_unit_bytes(type);

	for (int k0 = 0; k0 < kb; k0 += uv) {
		const uint8_t *blk = row + (size_t)((b0 + k0) / uv) * ub;
		_Alignas(32) float s[QX_MAX_UNIT] = { 0 }, m[QX_MAX_UNIT] = { 0 };
		qx_unit_scales(type, blk, s, m);
		_Pragma("GCC unroll 8") for (int j = 0; j < uv; j++) { /* kb is a multiple of uv */
			const int k = k0 + j;
			__m256i wv = qx_values(type, blk, j, iq4);
			if (qx_offset(type))
				wv = _mm256_sub_epi8(wv, _mm256_set1_epi8((char)qx_offset(type)));
			_mm256_storeu_si256((__m256i *)(wq + ((size_t)k * 16 + ri) * 32), wv);
			for (int h = 0; h < 1 + halves; h++) {
				sc[(k * 2 + h) * 16 + ri] = s[halves ? 2 * j + h : j];
				mn[(k * 2 + h) * 16 + ri] = mins ? m[halves ? 2 * j + h : j] : 0.0f;
			}
		}
	}
}

#define QX_DECODE_ROW(TYPE) qx_decode_row(TYPE, row, ri, b0, kb, wq, sc, mn)

void hs__avx512_qx_decode16(int type, const uint8_t *w, size_t row_bytes, int r, int nr, int b0, int kb, int8_t *wq,
			    float *sc, float *mn)
{
	for (int ri = 0; ri < 16; ri++) {
		if (ri >= nr) { /* rows past the matrix: zeros, which the tile multiplies harmlessly */
			for (int k = 0; k < kb; k++) {
				memset(wq + ((size_t)k * 16 + ri) * 32, 0, 32);
				sc[(k * 2) * 16 + ri] = sc[(k * 2 + 1) * 16 + ri] = 0;
				mn[(k * 2) * 16 + ri] = mn[(k * 2 + 1) * 16 + ri] = 0;
			}
			continue;
		}
		const uint8_t *row = w + (size_t)(r + ri) * row_bytes;
		switch (type) {
		case HS_TYPE_Q4_K: QX_DECODE_ROW(HS_TYPE_Q4_K); break;
		case HS_TYPE_Q5_K: QX_DECODE_ROW(HS_TYPE_Q5_K); break;
		case HS_TYPE_Q6_K: QX_DECODE_ROW(HS_TYPE_Q6_K); break;
		case HS_TYPE_Q3_K: QX_DECODE_ROW(HS_TYPE_Q3_K); break;
		case HS_TYPE_Q2_K: QX_DECODE_ROW(HS_TYPE_Q2_K); break;
		case HS_TYPE_IQ4_XS: QX_DECODE_ROW(HS_TYPE_IQ4_XS); break;
		case HS_TYPE_IQ4_NL: QX_DECODE_ROW(HS_TYPE_IQ4_NL); break;
		case HS_TYPE_Q4_0: QX_DECODE_ROW(HS_TYPE_Q4_0); break;
		case HS_TYPE_Q4_1: QX_DECODE_ROW(HS_TYPE_Q4_1); break;
		case HS_TYPE_Q5_0: QX_DECODE_ROW(HS_TYPE_Q5_0); break;
		case HS_TYPE_Q5_1: QX_DECODE_ROW(HS_TYPE_Q5_1); break;
		default: break;
		}
	}
}

/* Q4_K's, Q5_K's and Q6_K's activations with a scale per 256 values (as
 * ggml's Q8_K): the one-token rows then apply the block scales in integers
 * (rows_qx1); the 16-row passes take any Q8_0 input.  Q4_K experts and
 * matrices row-interleaved (packed-512.h's PACKED_K) */
static const struct hs_kernel_ops ops = { "AVX-512 VNNI",
					  quantize_q8_0_256,
					  tile_q_512,
					  hs__avx512_tile_q_packed,
					  hs__avx512_quantize_q8_k,
					  1u << HS_TYPE_Q4_K | 1u << HS_TYPE_Q5_K | 1u << HS_TYPE_Q6_K,
					  1u << HS_TYPE_Q4_K };
const struct hs_kernel_ops *hs__kernels_avx512_vnni(void)
{
	pthread_once(&table_once, fill_table);
	return &ops;
}
