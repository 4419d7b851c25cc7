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
