/* hotset's row-interleaved layout of MXFP4 and Q8_0 matrices: what the host
 * copy of the experts holds (repacked once at load), what is streamed to
 * device slots, and what the CPU and GPU expert kernels read.  Files keep
 * plain ggml rows; the reference kernels read both.
 *
 * Rows go in groups of HS_PACK_ROWS (16).  A group holds its 16 rows' blocks
 * column block by column block; the 16 blocks of column block b form one
 * block group:
 *   - the 16 scales, rows in order (MXFP4: E8M0 bytes; Q8_0: fp16 d), then
 *   - the quant bytes in 4-byte units, unit by unit, rows 0..15 in each
 *     (64 bytes a unit).  MXFP4 units u = 0..3 are bytes 4u..4u+3 of a
 *     block's qs: low nibbles values 4u..4u+3, high nibbles 16+4u..19+4u.
 *     Q8_0 units u = 0..7 are values 4u..4u+3.
 * A block group holds the bytes of the 16 plain blocks (272 for MXFP4, 544
 * for Q8_0), only moved; so a packed matrix is as large as the plain one and
 * row group g starts at g * 16 * row_bytes.
 *
 * Why this shape: one 64-byte unit is 16 rows x 4 consecutive values, which
 * is what vpdpbusd multiplies with one broadcast of 4 activation bytes
 * (AVX-512: 16 rows in one register; AVX2 and AVX-VNNI: its two 32-byte
 * halves of 8 rows); the 16 rows' scales arrive in one load; and the 8 units
 * of a Q8_0 block group are, as they lie, an AMX B tile (8 rows of 64 bytes,
 * 4 bytes per column).  On the GPU, 16 lanes read one unit as 16 adjacent
 * words (coalesced) and each feeds it to dp4a. */
#ifndef HS_REPACK_H
#define HS_REPACK_H

#include <stddef.h>
#include <stdint.h>

#define HS_PACK_ROWS 16

/* Whether a rows x cols matrix of this type can take the packed layout
 * (MXFP4 or Q8_0, rows a multiple of 16, cols of 32). */
int hs__pack_supported(int type, int rows, int cols);
/* Bytes of one block group (272 MXFP4, 544 Q8_0); 0 for other types. */
size_t hs__pack_group_block_bytes(int type);
/* rows x cols plain rows (src_row_bytes apart) -> the packed layout at dst
 * (rows * row_bytes bytes).  hs__pack_supported() must hold. */
void hs__pack_matrix(int type, int rows, int cols, const uint8_t *src, size_t src_row_bytes, uint8_t *dst);
/* Block b of row r of a packed matrix of cols columns, as its plain ggml
 * block (17 or 34 bytes at blk). */
void hs__packed_block(int type, int cols, const uint8_t *w, int r, int b, uint8_t *blk);
/* Row r of a packed matrix as a plain ggml row (row_bytes at row). */
void hs__packed_row(int type, int cols, const uint8_t *w, int r, uint8_t *row);

#endif
