/* The row-interleaved layout (see repack.h): packing plain rows, and
 * reading a plain row back out of a packed matrix. */
#include "config.h"

#include <string.h>

#include "cpu_kernels/formats.h"
#include "cpu_kernels/repack.h"

/* Scale bytes and 4-byte units of one plain block; 0 units for types the
 * layout does not take. */
static int scale_bytes(int type)
{
	return type == HS_TYPE_Q8_0 ? 2 : 1;
}

static int units(int type)
{
	return type == HS_TYPE_MXFP4 ? 4 : type == HS_TYPE_Q8_0 ? 8 : 0;
}

int hs__pack_supported(int type, int rows, int cols)
{
	return units(type) && rows > 0 && cols > 0 && rows % HS_PACK_ROWS == 0 && cols % HS_QK == 0;
}

size_t hs__pack_group_block_bytes(int type)
{
	return units(type) ? HS_PACK_ROWS * hs__type_block_bytes(type) : 0;
}

/* Where row i's scale and the start of its unit 0 lie in a block group;
 * unit u then follows 64 bytes further per unit. */
static size_t scale_at(int type, int i)
{
	return (size_t)i * scale_bytes(type);
}

static size_t unit_at(int type, int i)
{
	return (size_t)HS_PACK_ROWS * scale_bytes(type) + 4 * (size_t)i;
}

void hs__pack_matrix(int type, int rows, int cols, const uint8_t *src, size_t src_row_bytes, uint8_t *dst)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols), bb = hs__type_block_bytes(type);
	const size_t gbb = hs__pack_group_block_bytes(type);
	const int nb = cols / HS_QK;

	for (int r = 0; r < rows; r++) {
		uint8_t *g = dst + (size_t)(r / HS_PACK_ROWS) * HS_PACK_ROWS * rb;
		const int i = r % HS_PACK_ROWS, sb = scale_bytes(type);
		for (int b = 0; b < nb; b++) {
			const uint8_t *blk = src + (size_t)r * src_row_bytes + (size_t)b * bb;
			uint8_t *gb = g + (size_t)b * gbb;
			memcpy(gb + scale_at(type, i), blk, (size_t)sb);
			for (int u = 0; u < units(type); u++)
				memcpy(gb + unit_at(type, i) + (size_t)u * 4 * HS_PACK_ROWS, blk + sb + 4 * u, 4);
		}
	}
}

void hs__packed_block(int type, int cols, const uint8_t *w, int r, int b, uint8_t *blk)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols);
	const uint8_t *gb = w + (size_t)(r / HS_PACK_ROWS) * HS_PACK_ROWS * rb + (size_t)b * hs__pack_group_block_bytes(type);
	const int i = r % HS_PACK_ROWS, sb = scale_bytes(type);

	memcpy(blk, gb + scale_at(type, i), (size_t)sb);
	for (int u = 0; u < units(type); u++)
		memcpy(blk + sb + 4 * u, gb + unit_at(type, i) + (size_t)u * 4 * HS_PACK_ROWS, 4);
}

void hs__packed_row(int type, int cols, const uint8_t *w, int r, uint8_t *row)
{
	const size_t bb = hs__type_block_bytes(type);

	for (int b = 0; b < cols / HS_QK; b++)
		hs__packed_block(type, cols, w, r, b, row + (size_t)b * bb);
}
