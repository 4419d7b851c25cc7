/* The row and token loops of the float matrix tile, shared by the SIMD
 * tiers.  A tier's file defines, before including this,
 *   rows_tokens(type, w, row_bytes, NR, ncols, x, NT, out, col): NR rows
 *     (1, 2 or 4) against NT tokens (1..4), out[j][col + i];
 *   TILE_ROWS: rows per call (2 or 4, by register count);
 *   TILE_F: the name of the function to define, tile_f's signature (the
 *     tier's tile_f entry sends decode, one token, its own way).
 * TILE_ROWS rows go against four tokens at a time, so each converted
 * weight vector serves four tokens and each token vector TILE_ROWS rows. */
#ifndef HS_DENSE_TILE_H
#define HS_DENSE_TILE_H

#define ROWS_TOKENS(T, NR, NT)                                                                           \
	do {                                                                                             \
		int r = r0;                                                                              \
		for (; r + NR <= r1; r += NR)                                                            \
			rows_tokens(T, w + (size_t)r * rb, rb, NR, ncols, x + j0, NT, out + j0, r - r0); \
		for (; r < r1; r++)                                                                      \
			rows_tokens(T, w + (size_t)r * rb, rb, 1, ncols, x + j0, NT, out + j0, r - r0);  \
	} while (0)

static inline __attribute__((always_inline)) void tile_type(int T, const uint8_t *w, size_t rb, int r0, int r1,
							    int ncols, const float *const *x, int nt, float *const *out)
{
	for (int j0 = 0; j0 < nt; j0 += 4) {
		switch (nt - j0 < 4 ? nt - j0 : 4) {
		case 4: ROWS_TOKENS(T, TILE_ROWS, 4); break;
		case 3: ROWS_TOKENS(T, TILE_ROWS, 3); break;
		case 2: ROWS_TOKENS(T, TILE_ROWS, 2); break;
		default: ROWS_TOKENS(T, TILE_ROWS, 1); break;
		}
	}
}

static void TILE_F(int type, const uint8_t *w, size_t rb, int r0, int r1, int ncols, const float *const *x, int nt,
		   float *const *out)
{
	switch (type) {
	case HS_TYPE_F16: tile_type(HS_TYPE_F16, w, rb, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_BF16: tile_type(HS_TYPE_BF16, w, rb, r0, r1, ncols, x, nt, out); break;
	default: tile_type(HS_TYPE_F32, w, rb, r0, r1, ncols, x, nt, out); break;
	}
}

#endif
