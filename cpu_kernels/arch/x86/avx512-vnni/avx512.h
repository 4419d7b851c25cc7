/* What the AVX-512 VNNI tier lends the AMX tier (built only where both
 * are): its tiles, for the token counts, types and threads where AMX tiles
 * do not run, and the decoding of 16 plain rows the AMX tile reads. */
#ifndef HS_X86_AVX512_H
#define HS_X86_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#include "cpu_kernels/kernels.h"

void hs__avx512_tile_q_packed(int type, const uint8_t *w, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out);
/* The same with AVX-512 VBMI's byte permutes for MXFP4 (packed-512.h):
 * only where the CPU has VBMI, as every CPU with AMX does. */
void hs__avx512_tile_q_packed_vbmi(int type, const uint8_t *w, int r0, int r1, int ncols,
				   const struct hs_block_q8_0 *const *x, int nt, float *const *out);
/* The tile a plain-row matrix of the other block types (the K-quants, IQ4,
 * Q4_0..Q5_1) takes where tiles do not run. */
void hs__avx512_tile_q(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out);
/* Rows r .. r + nr - 1 (nr <= 16) of such a matrix, 32-value blocks b0 ..
 * b0 + kb - 1 (b0 at a scale unit's start), decoded row by row for the
 * types hs__avx512_qp_decode has no direct decoder for:
 * wq[(k * 16 + row) * 32 + i] the true integer of value i of block b0 + k
 * (int8), sc[(k * 2 + h) * 16 + row] the scale of half h (the 16-value
 * types' two, else h = 0), mn the same for the mins (value = s q - m; 0
 * where the type has none); rows past nr are zeros. */
void hs__avx512_qx_decode16(int type, const uint8_t *w, size_t row_bytes, int r, int nr, int b0, int kb, int8_t *wq,
			    float *sc, float *mn);
/* Rows rg .. rg + 15 of such a matrix (rows from r1 on: the last row
 * again, its sums to be dropped), blocks c0 .. c0 + kb - 1 (kb <=
 * HS_QP_CHUNK, whole scale units), decoded and turned as the AVX-512 tile
 * of many tokens reads them: wt (64-byte aligned, kb x 512 bytes) holds
 * per block 8 units of 64 bytes, unit q lane r the bytes of values 4q ..
 * 4q + 3 of row r, each the value + the returned bias (0, 32 for Q6_K,
 * 128); sc and mn as hs__avx512_qx_decode16 lays them out (32 floats a
 * block). */
#define HS_QP_CHUNK 16
int hs__avx512_qp_decode(int type, const uint8_t *w, size_t row_bytes, int rg, int r1, int c0, int kb, void *wt,
			 float *sc, float *mn);
/* Q4_K (five: Q5_K) rows as hs__avx512_qp_decode decodes them (wt: the
 * 4-bit (5-bit) values, kb a multiple of 8), but the scales and mins as
 * integers: si[k * 16 + r]
 * and mi[k * 16 + r] the 6-bit scale and min of block c0 + k of row rg +
 * r, dd[s * 16 + r] and dm[s * 16 + r] the d and dmin of its super-block s
 * (all 16-byte / 64-byte aligned). */
void hs__avx512_q45k_decode_int(int five, const uint8_t *w, size_t row_bytes, int rg, int r1, int c0, int kb, void *wt,
				uint8_t *si, uint8_t *mi, float *dd, float *dm);
/* The same from a packed Q4_K matrix (repack.h) of ncols columns: rows rg
 * .. rg + 15 (a whole group), blocks c0 .. c0 + kb - 1 (whole
 * super-blocks); the units are wt's as they lie, the scale planes unpacked
 * for 16 rows at once. */
void hs__avx512_q4k_decode_packed(const uint8_t *w, int ncols, int rg, int c0, int kb, void *wt, uint8_t *si,
				  uint8_t *mi, float *dd, float *dm);
/* The tier's quantize_q8_k (kernels.h) */
void hs__avx512_quantize_q8_k(const float *x, struct hs_block_q8_0 *y, int n);
/* The 16 rows after a group are 16 short streams the hardware
 * prefetchers miss, so the tiles prefetch the next group's chunk into L2
 * while they work on this one: a plan of its cache lines, issued per
 * `per` at a time from `slots` places in the work, not all at once (a
 * burst of 80 prefetches waits for fill buffers: a quarter of the decode's
 * time on Q4_K experts of 32 tokens, Xeon). */
struct hs_qp_prefetch {
	const char *base; /* the first row's first byte of the chunk */
	size_t row_bytes, span; /* the chunk's bytes in a row */
	int rows, lines, per;   /* lines a row, issued per call */
	int r, l;               /* the next to issue */
};
void hs__avx512_qp_prefetch_plan(struct hs_qp_prefetch *pf, int type, const uint8_t *w, size_t row_bytes, int rg,
				  int r1, int c0, int kb, int slots);
static inline void hs__qp_prefetch_some(struct hs_qp_prefetch *pf)
{
	for (int q = 0; q < pf->per && pf->r < pf->rows; q++) {
		/* the chunk's last byte for the last line, as rows need not start on a line */
		const size_t o = (size_t)pf->l * 64 < pf->span ? (size_t)pf->l * 64 : pf->span - 1;
		_mm_prefetch(pf->base + (size_t)pf->r * pf->row_bytes + o, _MM_HINT_T1);
		if (++pf->l == pf->lines) {
			pf->l = 0;
			pf->r++;
		}
	}
}

/* What hs__avx512_qx_decode16 gives for a type: HS_QX_HALVES (two
 * scales a block), HS_QX_MINS (mins not all zero); -1 for a type it does
 * not decode (MXFP4, Q8_0, the float types). */
#define HS_QX_HALVES 1
#define HS_QX_MINS 2
int hs__avx512_qx_flags(int type);

#endif
