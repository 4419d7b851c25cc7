/* The AMX tile on a scalar model of the tile unit (tests/amx-model.c). */
#ifndef HS_TEST_AMX_MODEL_H
#define HS_TEST_AMX_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels/formats.h"

/* amx_tile() of amx-body.h over the model; returns the number of faults
 * the hardware would have raised, *n_products the tile products made. */
int hs__amx_model_tile(int type, const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
		       int nt, float *const *out, int *n_products);
/* amx_tile_qx() (plain rows of the K-quants, IQ4, Q4_0..Q5_1) likewise. */
int hs__amx_model_tile_qx(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			  const struct hs_block_q8_0 *const *x, int nt, float *const *out, int *n_products);

/* amx_tile_q4k_packed() (a packed Q4_K matrix, repack.h; whole groups)
 * likewise, with the scalar twin's plain-row tile for the passes it gathers
 * back to plain rows */
int hs__amx_model_tile_q4k_packed(const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
				  int nt, float *const *out, int *n_products);

/* Of the last call's products, those 64 bytes deep (two blocks) */
int hs__amx_model_wide_products(void);

#endif
