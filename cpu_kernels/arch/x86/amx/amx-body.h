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
 * experts read in the file's layout) against 8 or more tokens.  The roles
 * swap: A is 16 weight rows x the 32 values of one block, decoded once to
 * their true integers (hs__avx512_qx_decode16: the AVX-512 tier's
 * unpacking), B the block's 16 tokens in units (row k4: each token's values
 * 4 k4 .. 4 k4 + 3), built once per chunk for every row; C[row][token].
 * The 16-value types (Q6_K, Q3_K, Q2_K) take a product per half (A 16
 * bytes wide, B 4 rows) for their halves' scales.  Per row and block (or
 * half): one convert and one FMA over the 16 tokens with the row's scale
 * times the tokens' dx, and one FMA for the mins with the tokens' dx sum(x)
 * (value = s q - m).  The same integer dots and float scalings as the
 * scalar twin; only the order of the float additions differs. */
#define TILE_QA 3
#define TILE_QB 4
#define TILE_QC 5

static void amx_cfg_qx(struct amx_cfg *c, int halves)
{
	memset(c, 0, sizeof *c);
	c->palette = 1;
	c->rows[TILE_QA] = AMX_TOKENS;
	c->colsb[TILE_QA] = halves ? HS_QK / 2 : HS_QK;
	c->rows[TILE_QB] = halves ? HS_QK / 8 : HS_QK / 4;
	c->colsb[TILE_QB] = 4 * AMX_TOKENS;
	c->rows[TILE_QC] = 16;
	c->colsb[TILE_QC] = 4 * AMX_TOKENS;
}

/* Block k's tokens j0 .. j0 + jn - 1 (jn <= 16; the rest zeros with scale
 * 0) into tb (8 units of 64 bytes), dx and the sums xh (per half). */
static void amx_qx_tokens(const struct hs_block_q8_0 *const *x, int j0, int jn, int b, int8_t *tb, float *dx,
			  float *xh, int halves)
{
	for (int j = 0; j < AMX_TOKENS; j++) {
		const struct hs_block_q8_0 *xb = j < jn ? &x[j0 + j][b] : NULL;
		int sum[2] = { 0, 0 };
		for (int k4 = 0; k4 < HS_QK / 4; k4++) {
			int8_t *dst = tb + k4 * 4 * AMX_TOKENS + 4 * j;
			if (!xb) {
				memset(dst, 0, 4);
				continue;
			}
			memcpy(dst, xb->qs + 4 * k4, 4);
			sum[k4 >= HS_QK / 8] += xb->qs[4 * k4] + xb->qs[4 * k4 + 1] + xb->qs[4 * k4 + 2] + xb->qs[4 * k4 + 3];
		}
		const float d = xb ? _cvtsh_ss(xb->d) : 0.0f;
		dx[j] = d;
		xh[j] = d * (float)(halves ? sum[0] : sum[0] + sum[1]);
		xh[AMX_TOKENS + j] = d * (float)sum[1];
	}
}

/* Tokens in token tile t of a pass of jall tokens. */
static inline int amx_tile_tokens(int jall, int t)
{
	return jall - t * AMX_TOKENS < AMX_TOKENS ? jall - t * AMX_TOKENS : AMX_TOKENS;
}

static void amx_tile_qx(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK, flags = hs__avx512_qx_flags(type);
	const int halves = flags & HS_QX_HALVES, mins = flags & HS_QX_MINS, nh = 1 + halves;
	_Alignas(64) int8_t tb[AMX_MAX_TILES][CHUNK * HS_QK * AMX_TOKENS]; /* [block][k4][token][4] */
	_Alignas(64) int8_t wq[CHUNK * 16 * HS_QK];                        /* [block][row][value] */
	_Alignas(64) float sc[CHUNK * 2 * 16], mn[CHUNK * 2 * 16];
	_Alignas(64) float dx[AMX_MAX_TILES][CHUNK * AMX_TOKENS], xh[AMX_MAX_TILES][CHUNK * 2 * AMX_TOKENS];
	_Alignas(64) int32_t ct[16 * AMX_TOKENS];
	_Alignas(64) float at[16 * AMX_TOKENS];
	struct amx_cfg cfg;

	amx_cfg_qx(&cfg, halves);
	AMX_CONFIG(&cfg);
	/* up to AMX_MAX_TILES token tiles share each decoded group of rows */
	for (int j00 = 0; j00 < nt; j00 += AMX_MAX_TILES * AMX_TOKENS) {
		const int jall = nt - j00 < AMX_MAX_TILES * AMX_TOKENS ? nt - j00 : AMX_MAX_TILES * AMX_TOKENS;
		const int tiles = (jall + AMX_TOKENS - 1) / AMX_TOKENS;
		for (int b0 = 0; b0 < nb; b0 += CHUNK) {
			const int kb = nb - b0 < CHUNK ? nb - b0 : CHUNK;
			for (int t = 0; t < tiles; t++) {
				const int jn = amx_tile_tokens(jall, t);
				for (int k = 0; k < kb; k++)
					amx_qx_tokens(x, j00 + t * AMX_TOKENS, jn, b0 + k, tb[t] + (size_t)k * HS_QK * AMX_TOKENS,
						      dx[t] + k * AMX_TOKENS, xh[t] + k * 2 * AMX_TOKENS, halves);
			}
			for (int r = r0; r < r1; r += 16) {
				const int nr = r1 - r < 16 ? r1 - r : 16;
				hs__avx512_qx_decode16(type, w, row_bytes, r, nr, b0, kb, wq, sc, mn);
				for (int t = 0; t < tiles; t++) {
					const int j0 = j00 + t * AMX_TOKENS;
					const int jn = amx_tile_tokens(jall, t);
					__m512 acc[16];
					/* the sums of the chunks before, kept in out[token][row] */
					for (int i = 0; i < 16; i++)
						for (int j = 0; j < AMX_TOKENS; j++)
							at[16 * i + j] = b0 && i < nr && j < jn ? out[j0 + j][r - r0 + i] : 0.0f;
					for (int i = 0; i < 16; i++)
						acc[i] = _mm512_load_ps(at + 16 * i);
					for (int k = 0; k < kb; k++)
						for (int h = 0; h < nh; h++) {
							AMX_LOAD(TILE_QA, wq + (size_t)k * 16 * HS_QK + (HS_QK / 2) * h, HS_QK);
							AMX_LOAD(TILE_QB,
								 tb[t] + ((size_t)k * HS_QK / 4 + (HS_QK / 8) * h) * 4 * AMX_TOKENS,
								 4 * AMX_TOKENS);
							AMX_ZERO(TILE_QC);
							AMX_DPBSSD(TILE_QC, TILE_QA, TILE_QB);
							AMX_STORE(TILE_QC, ct, 4 * AMX_TOKENS);
							const __m512 d = _mm512_load_ps(dx[t] + k * AMX_TOKENS);
							const __m512 xs = _mm512_load_ps(xh[t] + (k * 2 + h) * AMX_TOKENS);
							const float *s = sc + (k * 2 + h) * 16, *m = mn + (k * 2 + h) * 16;
							for (int i = 0; i < 16; i++) {
								const __m512 c =
									_mm512_cvtepi32_ps(_mm512_load_si512((const void *)(ct + 16 * i)));
								acc[i] = _mm512_fmadd_ps(c, _mm512_mul_ps(d, _mm512_set1_ps(s[i])), acc[i]);
								if (mins)
									acc[i] = _mm512_fnmadd_ps(xs, _mm512_set1_ps(m[i]), acc[i]);
							}
						}
					for (int i = 0; i < 16; i++)
						_mm512_store_ps(at + 16 * i, acc[i]);
					for (int i = 0; i < nr; i++)
						for (int j = 0; j < jn; j++)
							out[j0 + j][r - r0 + i] = at[16 * i + j];
				}
			}
		}
	}
	AMX_RELEASE();
}
