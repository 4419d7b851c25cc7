/* hotset's row-interleaved layout of MXFP4, Q8_0 and Q4_K matrices: what
 * the host copy of the experts holds (repacked once at load), what is
 * streamed to device slots, and what the CPU and GPU expert kernels read.
 * Files keep plain ggml rows; the reference kernels read both.
 *
 * Rows go in groups of HS_PACK_ROWS (16).  A group holds its 16 rows' blocks
 * (super-blocks for Q4_K) column block by column block; the 16 blocks of
 * column block b form one block group:
 *   - the header fields of the 16 blocks, field by field, each in planes:
 *     element e of a field (width bytes) of row i at (e * 16 + i) * width
 *     from the field's start, so a plane holds one element of 16 rows
 *     (MXFP4: the E8M0 bytes; Q8_0: the fp16 d; Q4_K: the 16 d, the 16
 *     dmin, then 12 planes of 16 bytes, byte k of the 12 scale bytes), then
 *   - the quant bytes in 4-byte units, unit by unit, rows 0..15 in each
 *     (64 bytes a unit).  MXFP4 units u = 0..3 are bytes 4u..4u+3 of a
 *     block's qs: low nibbles values 4u..4u+3, high nibbles 16+4u..19+4u.
 *     Q8_0 units u = 0..7 are values 4u..4u+3.  Q4_K units u = 0..31 are
 *     bytes 4u..4u+3 of qs: low nibbles values 64(u/8) + 4(u%8).. (32-value
 *     block 2(u/8)), high nibbles 32 on (block 2(u/8) + 1).
 * A block group holds the bytes of the 16 plain blocks (272 for MXFP4, 544
 * for Q8_0, 2304 for Q4_K), only moved; so a packed matrix is as large as
 * the plain one and row group g starts at g * 16 * row_bytes.
 *
 * Why this shape: one 64-byte unit is 16 rows x 4 consecutive values, which
 * is what vpdpbusd multiplies with one broadcast of 4 activation bytes
 * (AVX-512: 16 rows in one register; AVX2 and AVX-VNNI: its two 32-byte
 * halves of 8 rows); the 16 rows' scales arrive in one load (Q4_K's 6-bit
 * ones in three, unpacked for 16 rows at once); and the 8 units
 * of a Q8_0 block group are, as they lie, an AMX B tile (8 rows of 64 bytes,
 * 4 bytes per column).  On the GPU, 16 lanes read one unit as 16 adjacent
 * words (coalesced) and each feeds it to dp4a.
 *
 * MXFP4 and Q8_0 always take the layout; Q4_K only where the CPU tier's
 * kernels read it at full speed (hs_kernel_ops.packed_types: the AVX-512
 * VNNI and AMX tiers), as its plain rows decode faster than a gather from
 * the units would elsewhere. */
#ifndef HS_REPACK_H
#define HS_REPACK_H

#include <stddef.h>
#include <stdint.h>

#define HS_PACK_ROWS 16

/* Whether matrices of this type take the packed layout in this process
 * (MXFP4, Q8_0; Q4_K on a tier that lists it in packed_types). */
int hs__pack_type(int type);
/* Whether a rows x cols matrix of this type takes the packed layout
 * (hs__pack_type, rows a multiple of 16, cols of the type's block). */
int hs__pack_supported(int type, int rows, int cols);
/* Bytes of one block group (272 MXFP4, 544 Q8_0, 2304 Q4_K); 0 for other
 * types. */
size_t hs__pack_group_block_bytes(int type);
/* rows x cols plain rows (src_row_bytes apart) -> the packed layout at dst
 * (rows * row_bytes bytes).  hs__pack_supported() must hold. */
void hs__pack_matrix(int type, int rows, int cols, const uint8_t *src, size_t src_row_bytes, uint8_t *dst);
/* Block b of row r of a packed matrix of cols columns, as its plain ggml
 * block (17, 34 or 144 bytes at blk). */
void hs__packed_block(int type, int cols, const uint8_t *w, int r, int b, uint8_t *blk);
/* Row r of a packed matrix as a plain ggml row (row_bytes at row). */
void hs__packed_row(int type, int cols, const uint8_t *w, int r, uint8_t *row);

#endif
