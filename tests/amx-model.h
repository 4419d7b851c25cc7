/* The AMX tile on a scalar model of the tile unit (tests/amx-model.c). */
#ifndef HS_TEST_AMX_MODEL_H
#define HS_TEST_AMX_MODEL_H

#include <stdint.h>

#include "cpu_kernels/formats.h"

/* amx_tile() of amx-body.h over the model; returns the number of faults
 * the hardware would have raised, *n_products the tile products made. */
int hs__amx_model_tile(int type, const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
		       int nt, float *const *out, int *n_products);

#endif
