/* The row-interleaved layout (see repack.h): packing plain rows, and
 * reading a plain row back out of a packed matrix. */
#include "config.h"

#include <string.h>

#include "cpu_kernels/formats.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"

/* A block type's plain block as the layout sees it: up to three header
 * fields (offset, bytes, bytes per element) that go into planes, then the
 * quant bytes from qs on, taken in 4-byte units. */
struct kind {
	int nf;
	struct {
		int off, len, width;
	} f[3];
	int qs, units;
};

static const struct kind *kind_of(int type)
{
	static const struct kind mxfp4 = { 1, { { 0, 1, 1 } }, 1, 4 };
	static const struct kind q8_0 = { 1, { { 0, 2, 2 } }, 2, 8 };
	static const struct kind q4_k = { 3, { { 0, 2, 2 }, { 2, 2, 2 }, { 4, 12, 1 } }, 16, 32 };
	switch (type) {
	case HS_TYPE_MXFP4: return &mxfp4;
	case HS_TYPE_Q8_0: return &q8_0;
	case HS_TYPE_Q4_K: return &q4_k;
	default: return NULL;
	}
}

/* The super-block types go into the layout only on a tier whose kernels
 * read them there at full speed (packed_types): on the others their plain
 * rows decode faster than a gather from the units would. */
int hs__pack_type(int type)
{
	if (type == HS_TYPE_MXFP4 || type == HS_TYPE_Q8_0)
		return 1;
	return kind_of(type) && type < 32 && (hs__kernels_best()->packed_types >> type & 1u);
}

int hs__pack_supported(int type, int rows, int cols)
{
	const size_t bv = hs__type_block_values(type);
	return hs__pack_type(type) && rows > 0 && cols > 0 && rows % HS_PACK_ROWS == 0 && bv &&
	       (size_t)cols % bv == 0;
}

size_t hs__pack_group_block_bytes(int type)
{
	return kind_of(type) ? HS_PACK_ROWS * hs__type_block_bytes(type) : 0;
}

/* Row i's plain block blk <-> its places in block group gb (to_group: blk
 * into gb, else back).  Field f's element e of row i lies at the field's
 * planes + (e * 16 + i) * width; unit u of row i at the units + 64 u + 4 i. */
static void move_block(const struct kind *k, uint8_t *gb, int i, uint8_t *blk, int to_group)
{
	size_t at = 0;
	for (int f = 0; f < k->nf; f++) {
		const int w = k->f[f].width;
		for (int e = 0; e < k->f[f].len / w; e++) {
			uint8_t *g = gb + at + ((size_t)e * HS_PACK_ROWS + (size_t)i) * (size_t)w;
			uint8_t *p = blk + k->f[f].off + e * w;
			for (int c = 0; c < w; c++) /* 1 or 2 bytes: no call to memcpy */
				(to_group ? g : p)[c] = (to_group ? p : g)[c];
		}
		at += (size_t)HS_PACK_ROWS * (size_t)k->f[f].len;
	}
	for (int u = 0; u < k->units; u++) {
		uint8_t *g = gb + at + (size_t)u * 4 * HS_PACK_ROWS + 4 * (size_t)i;
		uint8_t *p = blk + k->qs + 4 * u;
		memcpy(to_group ? g : p, to_group ? p : g, 4);
	}
}

void hs__pack_matrix(int type, int rows, int cols, const uint8_t *src, size_t src_row_bytes, uint8_t *dst)
{
	const struct kind *k = kind_of(type);
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols), bb = hs__type_block_bytes(type);
	const size_t gbb = hs__pack_group_block_bytes(type);
	const int nb = (int)((size_t)cols / hs__type_block_values(type));
	uint8_t blk[sizeof(struct hs_block_q6_k)];

	for (int r = 0; r < rows; r++) {
		uint8_t *g = dst + (size_t)(r / HS_PACK_ROWS) * HS_PACK_ROWS * rb;
		for (int b = 0; b < nb; b++) {
			memcpy(blk, src + (size_t)r * src_row_bytes + (size_t)b * bb, bb);
			move_block(k, g + (size_t)b * gbb, r % HS_PACK_ROWS, blk, 1);
		}
	}
}

void hs__packed_block(int type, int cols, const uint8_t *w, int r, int b, uint8_t *blk)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols);
	const uint8_t *gb = w + (size_t)(r / HS_PACK_ROWS) * HS_PACK_ROWS * rb + (size_t)b * hs__pack_group_block_bytes(type);

	/* move_block only reads the group when it writes blk */
	move_block(kind_of(type), (uint8_t *)(uintptr_t)gb, r % HS_PACK_ROWS, blk, 0);
}

void hs__packed_row(int type, int cols, const uint8_t *w, int r, uint8_t *row)
{
	const struct kind *k = kind_of(type);
	const size_t bb = hs__type_block_bytes(type), gbb = HS_PACK_ROWS * bb;
	const uint8_t *g = w + (size_t)(r / HS_PACK_ROWS) * HS_PACK_ROWS * hs__type_row_bytes(type, (uint64_t)cols);

	for (size_t b = 0; b < (size_t)cols / hs__type_block_values(type); b++)
		move_block(k, (uint8_t *)(uintptr_t)(g + b * gbb), r % HS_PACK_ROWS, row + b * bb, 0);
}

void hs__packed_tile_plain(hs__tile_fn plain, int type, const uint8_t *w, int r0, int r1, int ncols,
			   const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)ncols);
	/* rows a chunk: about 128 KiB of them, whole groups, at least one */
	const int step = rb * HS_PACK_ROWS >= (size_t)128 << 10 ? HS_PACK_ROWS
							     : (int)(((size_t)128 << 10) / (rb * HS_PACK_ROWS)) * HS_PACK_ROWS;
	const int rows = r1 - r0 < step ? r1 - r0 : step;
	uint8_t *buf = rows > 0 ? __builtin_alloca((size_t)rows * rb) : NULL;
	float *o[nt > 0 ? nt : 1];

	for (int c0 = r0; c0 < r1; c0 += step) {
		const int c1 = c0 + step < r1 ? c0 + step : r1;
		for (int r = c0; r < c1; r++)
			hs__packed_row(type, ncols, w, r, buf + (size_t)(r - c0) * rb);
		for (int j = 0; j < nt; j++)
			o[j] = out[j] + (c0 - r0);
		plain(type, buf, rb, 0, c1 - c0, ncols, x, nt, o);
	}
}
