/* What the AVX-512 VNNI tier lends the AMX tier (built only where both
 * are): its row-interleaved tile, for the token counts and threads where
 * tiles do not run. */
#ifndef HS_X86_AVX512_H
#define HS_X86_AVX512_H

#include <stdint.h>

#include "cpu_kernels/kernels.h"

void hs__avx512_tile_q_packed(int type, const uint8_t *w, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out);

#endif
