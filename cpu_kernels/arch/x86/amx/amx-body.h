/* The AMX-INT8 prefill tile over row-interleaved groups, written against
 * six tile operations that the including file defines:
 *   AMX_CONFIG(cfg)          load a tile configuration (struct amx_cfg *)
 *   AMX_LOAD(t, ptr, stride) load tile t, its rows `stride` bytes apart
 *   AMX_ZERO(t), AMX_STORE(t, ptr, stride), AMX_RELEASE()
 *   AMX_DPBSSD(c, a, b)      c += a . b, signed bytes, 4 per int32
 * kernels-amx.c maps them to the instructions; tests/test-amx-model.c to a
 * scalar model that also checks every shape rule the hardware enforces, so
 * the data movement is tested on CPUs without AMX.  The rest is AVX-512.
 *
 * Per block of 32 columns, one tile product makes the int32 dots of 16
 * tokens x 16 rows:
 *   A (tile 0): 16 tokens x 32 bytes, the tokens' Q8_0 values of the block
 *   B (tile 1): 8 rows x 64 bytes, row k4 holding values 4 k4 .. 4 k4 + 3 of
 *               the 16 weight rows, i.e. the layout's units (repack.h): a
 *               Q8_0 block group's units are B as they lie; MXFP4 units are
 *               decoded (signed table) into a 512-byte buffer, low nibbles
 *               as rows 0..3, high nibbles as rows 4..7
 *   C (tile 2): C[token][row] = sum over k of A[token][k] * B[k / 4][4 row + k % 4]
 * C is stored, and each token's 16 row dots are scaled by the rows' block
 * scales times the token's (one vcvtdq2ps and one FMA per token).  Blocks
 * go in chunks of CHUNK, whose A tiles are built once and serve every
 * group; out[] holds the sums between chunks. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "cpu_kernels/arch/x86/avx512-vnni/avx512.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"

/* tile numbers (literal digits: the intrinsics paste them into register names) */
#define TILE_A 0
#define TILE_B 1
#define TILE_C 2
#define AMX_TOKENS 16
#define CHUNK 64 /* blocks per A buffer: 64 x 512 bytes on the stack */

/* The 64-byte tile configuration (palette 1) */
struct amx_cfg {
	uint8_t palette, start_row, reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

static void amx_cfg_init(struct amx_cfg *c)
{
	memset(c, 0, sizeof *c);
	c->palette = 1;
	c->rows[TILE_A] = AMX_TOKENS;
	c->colsb[TILE_A] = HS_QK;
	c->rows[TILE_B] = HS_QK / 4;
	c->colsb[TILE_B] = 4 * HS_PACK_ROWS;
	c->rows[TILE_C] = AMX_TOKENS;
	c->colsb[TILE_C] = 4 * HS_PACK_ROWS;
}

/* One 16-row group over blocks [b0, b0 + kb): a holds the chunk's A tiles
 * (512 bytes a block), dx[j * CHUNK + k] token j's scale of block b0 + k.
 * first: start from zero, else from out[]. */
static void amx_group(int type, const uint8_t *g, int b0, int kb, const int8_t *a, const float *dx, int nt,
		      float *const *out, int col, int first)
{
	static const int8_t values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
	const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)values));
	const __m512i m4 = _mm512_set1_epi8(0x0f);
	const size_t gbb = hs__pack_group_block_bytes(type);
	_Alignas(64) int8_t bt[HS_QK / 4 * 64];
	_Alignas(64) int32_t ct[AMX_TOKENS * HS_PACK_ROWS];
	__m512 acc[AMX_TOKENS];

	for (int j = 0; j < AMX_TOKENS; j++)
		acc[j] = first || j >= nt ? _mm512_setzero_ps() : _mm512_loadu_ps(out[j] + col);
	for (int k = 0; k < kb; k++) {
		const uint8_t *bg = g + (size_t)(b0 + k) * gbb;
		const void *bsrc;
		__m512 ws;
		int mxfp4 = type == HS_TYPE_MXFP4;
		if (mxfp4) {
			for (int u = 0; u < 4; u++) {
				__m512i v = _mm512_loadu_si512((const void *)(bg + 16 + 64 * u));
				_mm512_store_si512((void *)(bt + 64 * u), _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4)));
				_mm512_store_si512((void *)(bt + 64 * (4 + u)),
						   _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)));
			}
			bsrc = bt;
			ws = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)bg))),
					   _mm512_set1_ps(128.0f));
		} else {
			bsrc = bg + 2 * HS_PACK_ROWS;
			ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)bg));
		}
		AMX_LOAD(TILE_A, a + (size_t)k * AMX_TOKENS * HS_QK, HS_QK);
		AMX_LOAD(TILE_B, bsrc, 4 * HS_PACK_ROWS);
		AMX_ZERO(TILE_C);
		AMX_DPBSSD(TILE_C, TILE_A, TILE_B);
		AMX_STORE(TILE_C, ct, 4 * HS_PACK_ROWS);
		for (int j = 0; j < AMX_TOKENS; j++) {
			const __m512 d = _mm512_set1_ps(dx[j * CHUNK + k]);
			const __m512 s = mxfp4 ? _mm512_scalef_ps(d, ws) : _mm512_mul_ps(ws, d);
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(ct + 16 * j))), s, acc[j]);
		}
	}
	for (int j = 0; j < nt; j++)
		_mm512_storeu_ps(out[j] + col, acc[j]);
}

/* rows [r0, r1) of a packed matrix against nt tokens, on tiles.  Up to
 * AMX_MAX_TILES token tiles have their A tiles built per chunk of blocks
 * (128 KiB of stack), and groups go in passes of AMX_GROUPS over those
 * token tiles, so that a group's weights stay in L2 between them.  The
 * configuration is loaded here and the tiles released at the end. */
#define AMX_MAX_TILES 4
#define AMX_GROUPS 8

static void amx_tile(int type, const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
		     int nt, float *const *out)
{
	const int nb = ncols / HS_QK, g1 = r1 / HS_PACK_ROWS;
	const size_t gstride = HS_PACK_ROWS * hs__type_row_bytes(type, (uint64_t)ncols);
	_Alignas(64) int8_t a[AMX_MAX_TILES][CHUNK * AMX_TOKENS * HS_QK];
	float dx[AMX_MAX_TILES][AMX_TOKENS * CHUNK];
	struct amx_cfg cfg;

	amx_cfg_init(&cfg);
	AMX_CONFIG(&cfg);
	for (int j00 = 0; j00 < nt; j00 += AMX_MAX_TILES * AMX_TOKENS) {
		const int jall = nt - j00 < AMX_MAX_TILES * AMX_TOKENS ? nt - j00 : AMX_MAX_TILES * AMX_TOKENS;
		const int tiles = (jall + AMX_TOKENS - 1) / AMX_TOKENS;
		for (int b0 = 0; b0 < nb; b0 += CHUNK) {
			const int kb = nb - b0 < CHUNK ? nb - b0 : CHUNK;
			for (int t = 0; t < tiles; t++)
				for (int k = 0; k < kb; k++)
					for (int j = 0; j < AMX_TOKENS; j++) {
						const int tok = t * AMX_TOKENS + j;
						int8_t *row = a[t] + ((size_t)k * AMX_TOKENS + j) * HS_QK;
						if (tok < jall) {
							memcpy(row, x[j00 + tok][b0 + k].qs, HS_QK);
							dx[t][j * CHUNK + k] = _cvtsh_ss(x[j00 + tok][b0 + k].d);
						} else {
							memset(row, 0, HS_QK);
							dx[t][j * CHUNK + k] = 0;
						}
					}
			for (int ga = r0 / HS_PACK_ROWS; ga < g1; ga += AMX_GROUPS)
				for (int t = 0; t < tiles; t++) {
					const int n_t = jall - t * AMX_TOKENS < AMX_TOKENS ? jall - t * AMX_TOKENS : AMX_TOKENS;
					for (int g = ga; g < g1 && g < ga + AMX_GROUPS; g++)
						amx_group(type, w + (size_t)g * gstride, b0, kb, a[t], dx[t], n_t,
							  out + j00 + t * AMX_TOKENS, g * HS_PACK_ROWS - r0, b0 == 0);
				}
		}
	}
	AMX_RELEASE();
}

/* ---- plain rows of the other block types ----------------------------------
 * The K-quants, IQ4_XS/NL and Q4_0..Q5_1 in plain rows (dense matrices,
 * experts read in the file's layout) against 8 or more tokens.  16 rows of
 * HS_QP_CHUNK blocks are decoded and turned once by the AVX-512 tier's
 * decoders (hs__avx512_qp_decode: a block's 8 units of 16 rows are B as
 * they lie, 8 rows x 64 bytes), true signed values but for Q6_K's + 32; A
 * is 16 tokens' 32 bytes of the block (copied once per pass for every
 * row), C[token][row].  The 16-value types (Q6_K, Q3_K, Q2_K) take a
 * product per half (A 16 bytes wide, B 4 rows) for their halves' scales.
 * Per token and block (or half): Q6_K's exact int32 correction (32 x
 * sum(x)), one convert, one multiply by the rows' scales, one FMA by the
 * token's dx and one for the mins (value = s q - m): the same integer dots
 * and float scalings as the scalar twin, only the order of the float
 * additions differs.
 * Tiles are not renamed: a product's store waits for it, and the next
 * product into the same C tile waits for the store.  So two sets of A, B
 * and C tiles alternate, and step s + 1's product is issued before step
 * s's result is stored and scaled, which the vector units do while the
 * tile unit works. */
#define QA0 0
#define QB0 1
#define QA1 6
#define QB1 7
#define QC0 2
#define QC1 3
#define QC2 4
#define QC3 5
#define QX_BATCH 4 /* products made before their results are stored */
#define AMX_QX_MAX_TOKENS 64
#define AMX_QX_PREP_BYTES (192 << 10) /* a pass's token bytes and scalars on the stack at most */

static void amx_cfg_qx(struct amx_cfg *c, int halves)
{
	static const int8_t as[2] = { QA0, QA1 }, bs[2] = { QB0, QB1 }, cs[4] = { QC0, QC1, QC2, QC3 };
	memset(c, 0, sizeof *c);
	c->palette = 1;
	for (int i = 0; i < 2; i++) {
		c->rows[as[i]] = AMX_TOKENS;
		c->colsb[as[i]] = halves ? HS_QK / 2 : HS_QK;
		c->rows[bs[i]] = halves ? HS_QK / 8 : HS_QK / 4;
		c->colsb[bs[i]] = 64;
	}
	for (int i = 0; i < 4; i++) {
		c->rows[cs[i]] = AMX_TOKENS;
		c->colsb[cs[i]] = 64;
	}
}

/* Tokens a pass prepares for nb blocks: a multiple of 16, at least 16 */
static inline int amx_qx_pass_tokens(int nb)
{
	int t = AMX_QX_PREP_BYTES / (nb * (HS_QK + 5 * (int)sizeof(float)));
	t = t > AMX_QX_MAX_TOKENS ? AMX_QX_MAX_TOKENS : t / AMX_TOKENS * AMX_TOKENS;
	return t >= AMX_TOKENS ? t : AMX_TOKENS;
}

/* the product of step s (block s / nh, half s % nh) of token tile t into tile set (A, B, C) */
#define QX_ISSUE(A, B, C, s)                                                                                       \
	do {                                                                                                       \
		const int k_ = (s) >> (nh - 1), h_ = (s) & (nh - 1);                                               \
		AMX_LOAD(A, ta + (((size_t)(c0 + k_) * tiles + t) * AMX_TOKENS) * HS_QK + (HS_QK / 2) * h_, HS_QK); \
		AMX_LOAD(B, wt + (size_t)k_ * 512 + 256 * h_, 64);                                                 \
		AMX_ZERO(C);                                                                                       \
		AMX_DPBSSD(C, A, B);                                                                               \
	} while (0)

/* C[token][row] of step s, stored in ct, into the 16 tokens' row sums */
static inline __attribute__((always_inline)) void amx_qx_scale(const int32_t *ct, int s, int nh, int c0, int t,
								int tiles, int bias, int mins, const float *pdx,
								const int32_t *pc, const float *ps, const float *sc,
								const float *mn, __m512 *acc)
{
	const int k = s >> (nh - 1), h = s & (nh - 1), b = c0 + k; /* nh is 1 or 2 */
	const __m512 sv = _mm512_load_ps(sc + (k * 2 + h) * 16), mv = _mm512_load_ps(mn + (k * 2 + h) * 16);
	const size_t o = (size_t)b * tiles * AMX_TOKENS + (size_t)t * AMX_TOKENS; /* [block][token] */
	const size_t oh = ((size_t)b * 2 + h) * tiles * AMX_TOKENS + (size_t)t * AMX_TOKENS;
	_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++) {
		__m512i a = _mm512_load_si512((const void *)(ct + 16 * j));
		if (bias)
			a = _mm512_sub_epi32(a, _mm512_set1_epi32(pc[oh + j]));
		acc[j] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(a), sv), _mm512_set1_ps(pdx[o + j]), acc[j]);
		if (mins)
			acc[j] = _mm512_fnmadd_ps(mv, _mm512_set1_ps(ps[oh + j]), acc[j]);
	}
}

/* The token tiles of one 16-row group's decoded chunk (steps = its blocks
 * x halves), their sums in accm.  BIAS and MINS are constants where it is
 * called, so the 16 tokens' sums stay in registers. */
static inline __attribute__((always_inline)) void amx_qx_tiles(int bias, int mins, int nh, int c0, int steps, int tiles,
								const int8_t *ta, const int8_t *wt, const float *pdx,
								const int32_t *pc, const float *ps, const float *sc,
								const float *mn, float *accm, int32_t (*ct)[AMX_TOKENS * 16],
								struct hs_qp_prefetch *pf)
{
	for (int t = 0; t < tiles; t++) {
		__m512 acc[AMX_TOKENS];
		_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++)
			acc[j] = _mm512_load_ps(accm + 16 * (t * AMX_TOKENS + j));
		/* steps s, s + 1 into tiles CA, CB; then stored and scaled */
#define QX_SET(s, CA, CB)                                      \
	do {                                                   \
		if ((s) < steps)                               \
			QX_ISSUE(QA0, QB0, CA, s);             \
		if ((s) + 1 < steps)                           \
			QX_ISSUE(QA1, QB1, CB, (s) + 1);       \
	} while (0)
#define QX_DRAIN(s, CA, CB, i)                                                                               \
	do {                                                                                                 \
		hs__qp_prefetch_some(pf);                                                                    \
		if ((s) < steps)                                                                             \
			AMX_STORE(CA, ct[i], 64);                                                            \
		if ((s) + 1 < steps)                                                                         \
			AMX_STORE(CB, ct[(i) + 1], 64);                                                      \
		if ((s) < steps)                                                                             \
			amx_qx_scale(ct[i], s, nh, c0, t, tiles, bias, mins, pdx, pc, ps, sc, mn, acc);      \
		if ((s) + 1 < steps)                                                                         \
			amx_qx_scale(ct[(i) + 1], (s) + 1, nh, c0, t, tiles, bias, mins, pdx, pc, ps, sc, mn, acc); \
	} while (0)
		QX_SET(0, QC0, QC1);
		for (int s0 = 0; s0 < steps; s0 += 4) {
			QX_SET(s0 + 2, QC2, QC3);
			QX_DRAIN(s0, QC0, QC1, 0);
			QX_SET(s0 + 4, QC0, QC1);
			QX_DRAIN(s0 + 2, QC2, QC3, 2);
		}
#undef QX_DRAIN
#undef QX_SET
		_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++)
			_mm512_store_ps(accm + 16 * (t * AMX_TOKENS + j), acc[j]);
	}
}

/* One pass of nt (<= amx_qx_pass_tokens) tokens over rows r0 .. r1. */
static void amx_qx_pass(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int nb,
			const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int flags = hs__avx512_qx_flags(type), halves = flags & HS_QX_HALVES, mins = flags & HS_QX_MINS;
	const int nh = 1 + !!halves, tiles = (nt + AMX_TOKENS - 1) / AMX_TOKENS, pt = tiles * AMX_TOKENS;
	/* per block and token: its 32 bytes (A rows, zeros past nt), dx, and
	 * per half the exact int32 correction and dx sum(x) */
	_Alignas(64) int8_t ta[(size_t)nb * pt * HS_QK];
	float pdx[(size_t)nb * pt], ps[(size_t)nb * 2 * pt];
	int32_t pc[(size_t)nb * 2 * pt];
	_Alignas(64) int8_t wt[HS_QP_CHUNK * 512];
	_Alignas(64) float sc[HS_QP_CHUNK * 32], mn[HS_QP_CHUNK * 32];
	_Alignas(64) int32_t ct[QX_BATCH][AMX_TOKENS * 16];
	_Alignas(64) float accm[AMX_QX_MAX_TOKENS * 16];
	struct hs_qp_prefetch pf;
	const int bias = type == HS_TYPE_Q6_K ? 32 : 0; /* what the decoded bytes hold beyond the value, below */

	for (int b = 0; b < nb; b++)
		for (int j = 0; j < pt; j++) {
			const size_t o = (size_t)b * pt + j, oh = (size_t)b * 2 * pt + j;
			int8_t *row = ta + o * HS_QK;
			if (j >= nt) {
				memset(row, 0, HS_QK);
				pdx[o] = ps[oh] = ps[oh + pt] = 0;
				pc[oh] = pc[oh + pt] = 0;
				continue;
			}
			const struct hs_block_q8_0 *xb = &x[j][b];
			/* the halves' sums: 8 lanes of 4-byte sums, lanes 0-3 the first half */
			const __m256i xv = _mm256_loadu_si256((const __m256i *)xb->qs);
			_mm256_store_si256((__m256i *)row, xv);
			const __m256i s8 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), _mm256_set1_epi16(1));
			__m128i hs = _mm_hadd_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
			hs = _mm_hadd_epi32(hs, hs);
			const int h0 = _mm_cvtsi128_si32(hs), h1 = _mm_extract_epi32(hs, 1);
			const float dx = _cvtsh_ss(xb->d);
			pdx[o] = dx;
			pc[oh] = bias * (halves ? h0 : h0 + h1);
			pc[oh + pt] = bias * h1;
			ps[oh] = dx * (float)(halves ? h0 : h0 + h1);
			ps[oh + pt] = dx * (float)h1;
		}
	for (int rg = r0; rg < r1; rg += 16) {
		const int nr = r1 - rg < 16 ? r1 - rg : 16;
		memset(accm, 0, sizeof(float) * 16 * (size_t)pt);
		for (int c0 = 0; c0 < nb; c0 += HS_QP_CHUNK) {
			const int kb = nb - c0 < HS_QP_CHUNK ? nb - c0 : HS_QP_CHUNK, steps = kb * nh;
			/* the next group's chunk, spread over this one's products */
			hs__avx512_qp_prefetch_plan(&pf, type, w, row_bytes, rg, r1, c0, kb, tiles * ((steps + 1) / 2));
			if (hs__avx512_qp_decode(type, w, row_bytes, rg, r1, c0, kb, wt, sc, mn) == 128)
				for (int i = 0; i < kb * 8; i++) /* value + 128 -> the signed value */
					_mm512_store_si512((void *)(wt + 64 * i),
							   _mm512_xor_si512(_mm512_load_si512((const void *)(wt + 64 * i)),
									    _mm512_set1_epi8((char)0x80)));
			/* the token tiles, on a body for each combination of the flags */
			if (bias)
				amx_qx_tiles(1, 0, nh, c0, steps, tiles, ta, wt, pdx, pc, ps, sc, mn, accm, ct, &pf);
			else if (mins)
				amx_qx_tiles(0, 1, nh, c0, steps, tiles, ta, wt, pdx, pc, ps, sc, mn, accm, ct, &pf);
			else
				amx_qx_tiles(0, 0, nh, c0, steps, tiles, ta, wt, pdx, pc, ps, sc, mn, accm, ct, &pf);
		}
		const __mmask16 live = (__mmask16)((1u << nr) - 1);
		for (int j = 0; j < nt; j++)
			_mm512_mask_storeu_ps(out[j] + rg - r0, live, _mm512_load_ps(accm + 16 * j));
	}
}

/* ---- Q4_K and Q5_K against tokens whose super-blocks share a scale ------
 * Where each token's 8 blocks of a super-block have one scale (the tier's
 * quantize_q8_k writes them so, as ggml's Q8_K), a row's 6-bit block scales
 * s can go into the weights: B holds q (s & 7) and q (s >> 3), at most 105
 * (a signed byte), each made from the decoded q by one 16-bit multiply;
 * a super-block is then 4 products of 64 values (2 blocks)
 * into each of two C tiles, and C_lo + 8 C_hi = sum over the blocks of
 * s (q . x) exactly.  The float work is once per super-block and token: the
 * mins' sum_b m_b sum(x_b) in int32 by 4 vpdpwssd on 16-bit pairs, two
 * converts, d C - dmin M, times the token's scale.  The per-block tile
 * above makes a product of 32 values a block (the tile unit takes as long
 * as for 64) and a convert, a multiply and two FMAs per block and token,
 * which bound it. */
#define K4_A0 0
#define K4_A1 7
#define K4_BL 1
#define K4_BH 6
#define K4_CL0 2
#define K4_CH0 3
#define K4_CL1 4
#define K4_CH1 5
#define K4_CHUNK 16 /* blocks decoded at once (HS_QP_CHUNK): 2 super-blocks */

static void amx_cfg_q4k(struct amx_cfg *c)
{
	memset(c, 0, sizeof *c);
	c->palette = 1;
	for (int t = 0; t < 8; t++) {
		c->rows[t] = AMX_TOKENS;
		c->colsb[t] = 64;
	}
}

/* The 4 products of super-block sl of the chunk (pairs of blocks) for
 * token tile t into C tiles (cl, ch); tile numbers are literals */
#define K4_ISSUE(CL, CH, t, sl)                                                                              \
	do {                                                                                                 \
		AMX_ZERO(CL);                                                                                \
		AMX_ZERO(CH);                                                                                \
		for (int p_ = 0; p_ < 4; p_++) {                                                             \
			const size_t pair_ = (size_t)c0 / 2 + 4 * (sl) + p_;                                 \
			const int8_t *a_ = ta + (pair_ * tiles + (t)) * AMX_TOKENS * 64;                     \
			const int8_t *bl_ = bl + (size_t)(8 * (sl) + 2 * p_) * 512;                           \
			const int8_t *bh_ = bh + (size_t)(8 * (sl) + 2 * p_) * 512;                           \
			if (p_ & 1) {                                                                        \
				AMX_LOAD(K4_A1, a_, 64);                                                     \
				AMX_LOAD(K4_BL, bl_, 64);                                                    \
				AMX_DPBSSD(CL, K4_A1, K4_BL);                                                \
				AMX_LOAD(K4_BH, bh_, 64);                                                    \
				AMX_DPBSSD(CH, K4_A1, K4_BH);                                                \
			} else {                                                                             \
				AMX_LOAD(K4_A0, a_, 64);                                                     \
				AMX_LOAD(K4_BL, bl_, 64);                                                    \
				AMX_DPBSSD(CL, K4_A0, K4_BL);                                                \
				AMX_LOAD(K4_BH, bh_, 64);                                                    \
				AMX_DPBSSD(CH, K4_A0, K4_BH);                                                \
			}                                                                                    \
		}                                                                                            \
	} while (0)

/* Q5_K (q < 32): three pieces of s, 2 bits each (q x 3 <= 93), into three
 * C tiles; one A and one B tile, reloaded for each product (a load into a
 * tile an issued product reads did not slow the tile unit on the Xeon VM),
 * so that two sets of three C tiles alternate */
#define K5_A 0
#define K5_B 1
#define K5_ISSUE(C0, C1, C2, t, sl)                                                                          \
	do {                                                                                                 \
		AMX_ZERO(C0);                                                                                \
		AMX_ZERO(C1);                                                                                \
		AMX_ZERO(C2);                                                                                \
		for (int p_ = 0; p_ < 4; p_++) {                                                             \
			const size_t pair_ = (size_t)c0 / 2 + 4 * (sl) + p_;                                 \
			const size_t bo_ = (size_t)(8 * (sl) + 2 * p_) * 512;                                 \
			AMX_LOAD(K5_A, ta + (pair_ * tiles + (t)) * AMX_TOKENS * 64, 64);                     \
			AMX_LOAD(K5_B, bp[0] + bo_, 64);                                                     \
			AMX_DPBSSD(C0, K5_A, K5_B);                                                          \
			AMX_LOAD(K5_B, bp[1] + bo_, 64);                                                     \
			AMX_DPBSSD(C1, K5_A, K5_B);                                                          \
			AMX_LOAD(K5_B, bp[2] + bo_, 64);                                                     \
			AMX_DPBSSD(C2, K5_A, K5_B);                                                          \
		}                                                                                            \
	} while (0)

/* C_lo, C_hi of super-block sl of the chunk (sb of the row) and token
 * tile t, stored in ct, into the 16 tokens' row sums; bs from the chunk's
 * first pair */
static inline __attribute__((always_inline)) void amx_q4k_scale(int five, const int32_t (*ct)[AMX_TOKENS * 16], int sb,
								 int sl, int t, int tiles, const float *D,
								 const int32_t *bs, const __m512i *mp, const float *dd,
								 const float *dm, __m512 *acc)
{
	const __m512 dv = _mm512_load_ps(dd + 16 * sl), mv = _mm512_load_ps(dm + 16 * sl);
	const __m512i m0 = mp[4 * sl], m1 = mp[4 * sl + 1], m2 = mp[4 * sl + 2], m3 = mp[4 * sl + 3];
	const size_t o = ((size_t)sb * tiles + t) * AMX_TOKENS, ob = ((size_t)sl * 4 * tiles + t) * AMX_TOKENS,
		     step = (size_t)tiles * AMX_TOKENS;
	_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++) {
		__m512i v = _mm512_add_epi32(_mm512_load_si512((const void *)(ct[0] + 16 * j)),
					     _mm512_slli_epi32(_mm512_load_si512((const void *)(ct[1] + 16 * j)), five ? 2 : 3));
		if (five)
			v = _mm512_add_epi32(v, _mm512_slli_epi32(_mm512_load_si512((const void *)(ct[2] + 16 * j)), 4));
		__m512i m = _mm512_madd_epi16(m0, _mm512_set1_epi32(bs[ob + j]));
		m = _mm512_dpwssd_epi32(m, m1, _mm512_set1_epi32(bs[ob + step + j]));
		m = _mm512_dpwssd_epi32(m, m2, _mm512_set1_epi32(bs[ob + 2 * step + j]));
		m = _mm512_dpwssd_epi32(m, m3, _mm512_set1_epi32(bs[ob + 3 * step + j]));
		const __m512 r = _mm512_fnmadd_ps(mv, _mm512_cvtepi32_ps(m), _mm512_mul_ps(dv, _mm512_cvtepi32_ps(v)));
		acc[j] = _mm512_fmadd_ps(r, _mm512_set1_ps(D[o + j]), acc[j]);
	}
}

/* Whether each of the nt tokens' super-blocks (nb blocks) has one scale */
static inline int amx_q4k_shared(const struct hs_block_q8_0 *const *x, int nt, int nb)
{
	for (int j = 0; j < nt; j++)
		for (int b = 0; b < nb; b++)
			if (x[j][b].d != x[j][b & ~7].d)
				return 0;
	return 1;
}

/* One pass of nt (<= amx_qx_pass_tokens) tokens over Q4_K (five: Q5_K)
 * rows r0 .. r1, or 0 (nothing done) where a token's super-block has blocks
 * of unequal scales.  The configuration of amx_cfg_q4k is loaded.  packed:
 * w is a packed Q4_K matrix (repack.h; row_bytes unused, r0 and r1 whole
 * groups), decoded by hs__avx512_q4k_decode_packed, and the next group's
 * chunk, one run of bytes, prefetched as one row. */
static inline __attribute__((always_inline)) int amx_q4k_pass(int five, int packed, const uint8_t *w,
								size_t row_bytes, int r0, int r1, int nb,
								const struct hs_block_q8_0 *const *x, int nt,
								float *const *out)
{
	const int tiles = (nt + AMX_TOKENS - 1) / AMX_TOKENS, pt = tiles * AMX_TOKENS, nsb = nb / 8;

	if (!amx_q4k_shared(x, nt, nb))
		return 0;
	/* per pair of blocks and token tile: the 16 tokens' 64 bytes (A); per
	 * super-block and token its scale; per pair and token the two blocks'
	 * sums as 16-bit halves */
	_Alignas(64) int8_t ta[(size_t)nb / 2 * pt * 64];
	float D[(size_t)nsb * pt];
	int32_t bs[(size_t)nb / 2 * pt];
	_Alignas(64) int8_t wt[K4_CHUNK * 512], bq[3][K4_CHUNK * 512];
	int8_t *const bl = bq[0], *const bh = bq[1];
	const int8_t *const bp[3] = { bq[0], bq[1], bq[2] };
	_Alignas(64) uint8_t si[K4_CHUNK * 16], mi[K4_CHUNK * 16];
	_Alignas(64) float dd[K4_CHUNK / 8 * 16], dm[K4_CHUNK / 8 * 16];
	_Alignas(64) int32_t ct[3][AMX_TOKENS * 16];
	_Alignas(64) float accm[AMX_QX_MAX_TOKENS * 16];
	__m512i mp[K4_CHUNK / 2];
	struct hs_qp_prefetch pf;

	for (int j = 0; j < pt; j++) {
		for (int sb = 0; sb < nsb; sb++)
			D[(size_t)sb * pt + j] = j < nt ? _cvtsh_ss(x[j][8 * sb].d) : 0;
		for (int pr = 0; pr < nb / 2; pr++) {
			int8_t *row = ta + ((size_t)pr * pt + j) * 64;
			if (j >= nt) {
				memset(row, 0, 64);
				bs[(size_t)pr * pt + j] = 0;
				continue;
			}
			const __m256i x0 = _mm256_loadu_si256((const __m256i *)x[j][2 * pr].qs);
			const __m256i x1 = _mm256_loadu_si256((const __m256i *)x[j][2 * pr + 1].qs);
			_mm256_store_si256((__m256i *)row, x0);
			_mm256_store_si256((__m256i *)(row + 32), x1);
			/* lanes 0-3 block 2 pr's sums of 4 bytes x 2, 4-7 the next's */
			const __m256i s8 = _mm256_madd_epi16(
				_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_permute2x128_si256(x0, x1, 0x20)),
				_mm256_set1_epi16(1));
			const __m256i s9 = _mm256_madd_epi16(
				_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_permute2x128_si256(x0, x1, 0x31)),
				_mm256_set1_epi16(1));
			__m256i hs = _mm256_add_epi32(s8, s9); /* lanes 0-3 block 2 pr, 4-7 2 pr + 1 */
			hs = _mm256_hadd_epi32(hs, hs);
			hs = _mm256_hadd_epi32(hs, hs);
			const int s0 = _mm256_extract_epi32(hs, 0), s1 = _mm256_extract_epi32(hs, 4);
			bs[(size_t)pr * pt + j] = (int32_t)((uint32_t)(uint16_t)s0 | (uint32_t)(uint16_t)s1 << 16);
		}
	}
	for (int rg = r0; rg < r1; rg += 16) {
		const int nr = r1 - rg < 16 ? r1 - rg : 16;
		memset(accm, 0, sizeof(float) * 16 * (size_t)pt);
		for (int c0 = 0; c0 < nb; c0 += K4_CHUNK) {
			const int kb = nb - c0 < K4_CHUNK ? nb - c0 : K4_CHUNK, nsl = kb / 8, steps = tiles * nsl;
			if (packed) {
				const size_t gbb = HS_PACK_ROWS * sizeof(struct hs_block_q4_k);
				pf = (struct hs_qp_prefetch){ (const char *)w + (size_t)(rg / HS_PACK_ROWS + 1) * nb / 8 * gbb +
								       (size_t)c0 / 8 * gbb,
							       0,
							       (size_t)kb / 8 * gbb,
							       rg + 16 < r1,
							       kb / 8 * (int)(gbb / 64),
							       (kb / 8 * (int)(gbb / 64) + steps - 1) / steps,
							       0,
							       0 };
				hs__avx512_q4k_decode_packed(w, nb * HS_QK, rg, c0, kb, wt, si, mi, dd, dm);
			} else {
				hs__avx512_qp_prefetch_plan(&pf, five ? HS_TYPE_Q5_K : HS_TYPE_Q4_K, w, row_bytes, rg, r1, c0,
							    kb, steps);
				hs__avx512_q45k_decode_int(five, w, row_bytes, rg, r1, c0, kb, wt, si, mi, dd, dm);
			}
			for (int k = 0; k < kb; k++) {
				/* the pieces of s of the 16 rows in both 16-bit halves of
				 * their lanes: a 16-bit multiply of two bytes q0 + 256 q1
				 * by one makes both bytes' products, none past 105, so no
				 * carry crosses into the high byte */
				const __m512i sv = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(si + 16 * k)));
				if (five) { /* 2-bit pieces: q x 3 <= 93 */
					__m512i sp[3];
					for (int i = 0; i < 3; i++) {
						const __m512i a = _mm512_and_si512(_mm512_srli_epi32(sv, 2 * i), _mm512_set1_epi32(3));
						sp[i] = _mm512_or_si512(a, _mm512_slli_epi32(a, 16));
					}
					for (int u = 0; u < 8; u++) {
						const __m512i q = _mm512_load_si512((const void *)(wt + 512 * k + 64 * u));
						for (int i = 0; i < 3; i++)
							_mm512_store_si512((void *)(bq[i] + 512 * k + 64 * u),
									   _mm512_mullo_epi16(q, sp[i]));
					}
					continue;
				}
				/* Q4_K: s & 7 and s >> 3, q x 7 <= 105 */
				const __m512i slo = _mm512_and_si512(sv, _mm512_set1_epi32(7)), shi = _mm512_srli_epi32(sv, 3);
				const __m512i sl2 = _mm512_or_si512(slo, _mm512_slli_epi32(slo, 16));
				const __m512i sh2 = _mm512_or_si512(shi, _mm512_slli_epi32(shi, 16));
				for (int u = 0; u < 8; u++) {
					const __m512i q = _mm512_load_si512((const void *)(wt + 512 * k + 64 * u));
					_mm512_store_si512((void *)(bl + 512 * k + 64 * u), _mm512_mullo_epi16(q, sl2));
					_mm512_store_si512((void *)(bh + 512 * k + 64 * u), _mm512_mullo_epi16(q, sh2));
				}
			}
			for (int i = 0; i < kb / 2; i++) { /* mins of blocks 2i, 2i + 1 as 16-bit pairs */
				const __m512i a = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(mi + 32 * i)));
				const __m512i b = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(mi + 32 * i + 16)));
				mp[i] = _mm512_or_si512(a, _mm512_slli_epi32(b, 16));
			}
			/* step i = (tile i / nsl, super-block i % nsl): issued into
			 * one pair of C tiles while the step before, in the other
			 * pair, is stored and scaled */
			__m512 acc[AMX_TOKENS];
			int held = -1;
			_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++)
				acc[j] = _mm512_setzero_ps(); /* loaded before use; for the compiler */
			for (int i = 0; i <= steps; i++) {
				if (i < steps) {
					if (five && (i & 1))
						K5_ISSUE(5, 6, 7, i / nsl, i % nsl);
					else if (five)
						K5_ISSUE(2, 3, 4, i / nsl, i % nsl);
					else if (i & 1)
						K4_ISSUE(K4_CL1, K4_CH1, i / nsl, i % nsl);
					else
						K4_ISSUE(K4_CL0, K4_CH0, i / nsl, i % nsl);
				}
				if (i == 0)
					continue;
				const int s = i - 1, t = s / nsl, sl = s % nsl;
				hs__qp_prefetch_some(&pf);
				if (five && (s & 1)) {
					AMX_STORE(5, ct[0], 64);
					AMX_STORE(6, ct[1], 64);
					AMX_STORE(7, ct[2], 64);
				} else if (five) {
					AMX_STORE(2, ct[0], 64);
					AMX_STORE(3, ct[1], 64);
					AMX_STORE(4, ct[2], 64);
				} else if (s & 1) {
					AMX_STORE(K4_CL1, ct[0], 64);
					AMX_STORE(K4_CH1, ct[1], 64);
				} else {
					AMX_STORE(K4_CL0, ct[0], 64);
					AMX_STORE(K4_CH0, ct[1], 64);
				}
				if (t != held) {
					if (held >= 0)
						_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++)
							_mm512_store_ps(accm + 16 * (held * AMX_TOKENS + j), acc[j]);
					_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++)
						acc[j] = _mm512_load_ps(accm + 16 * (t * AMX_TOKENS + j));
					held = t;
				}
				amx_q4k_scale(five, ct, c0 / 8 + sl, sl, t, tiles, D, bs + (size_t)c0 / 2 * pt, mp, dd, dm,
					      acc);
			}
			if (held >= 0)
				_Pragma("GCC unroll 16") for (int j = 0; j < AMX_TOKENS; j++)
					_mm512_store_ps(accm + 16 * (held * AMX_TOKENS + j), acc[j]);
		}
		const __mmask16 live = (__mmask16)((1u << nr) - 1);
		for (int j = 0; j < nt; j++)
			_mm512_mask_storeu_ps(out[j] + rg - r0, live, _mm512_load_ps(accm + 16 * j));
	}
	return 1;
}

static void amx_tile_qx(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK, pass = amx_qx_pass_tokens(nb);
	struct amx_cfg cfg, cfg4;
	int loaded = 0; /* 1: cfg, 4: cfg4 */

	amx_cfg_qx(&cfg, hs__avx512_qx_flags(type) & HS_QX_HALVES);
	amx_cfg_q4k(&cfg4);
	for (int j = 0; j < nt; j += pass) {
		const int n = nt - j < pass ? nt - j : pass;
		if (type == HS_TYPE_Q4_K || type == HS_TYPE_Q5_K) {
			if (loaded != 4)
				AMX_CONFIG(&cfg4);
			loaded = 4;
			if (type == HS_TYPE_Q4_K ? amx_q4k_pass(0, 0, w, row_bytes, r0, r1, nb, x + j, n, out + j)
						 : amx_q4k_pass(1, 0, w, row_bytes, r0, r1, nb, x + j, n, out + j))
				continue;
		}
		if (loaded != 1)
			AMX_CONFIG(&cfg);
		loaded = 1;
		amx_qx_pass(type, w, row_bytes, r0, r1, nb, x + j, n, out + j);
	}
	AMX_RELEASE();
}

/* Packed Q4_K (repack.h) on tiles: amx_q4k_pass reading the groups, and a
 * pass whose tokens do not have a scale per 256 values through the plain
 * rows gathered back (`plain`: the tier's plain-row tile). */
static void amx_tile_q4k_packed(const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
				int nt, float *const *out, hs__tile_fn plain)
{
	const int nb = ncols / HS_QK, pass = amx_qx_pass_tokens(nb);
	struct amx_cfg cfg4;
	int loaded = 0;

	amx_cfg_q4k(&cfg4);
	for (int j = 0; j < nt; j += pass) {
		const int n = nt - j < pass ? nt - j : pass;
		if (!loaded)
			AMX_CONFIG(&cfg4);
		loaded = 1;
		if (!amx_q4k_pass(0, 1, w, 0, r0, r1, nb, x + j, n, out + j)) {
			AMX_RELEASE();
			loaded = 0;
			hs__packed_tile_plain(plain, HS_TYPE_Q4_K, w, r0, r1, ncols, x + j, n, out + j);
		}
	}
	if (loaded)
		AMX_RELEASE();
}
