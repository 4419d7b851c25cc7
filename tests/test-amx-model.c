/* Checks the AMX-INT8 tier's data movement where no AMX is at hand: its
 * tile (amx-body.h) runs on a scalar model of the tile unit that faults
 * where the hardware would, and must match the packed scalar twin for both
 * types, odd shapes, row sub-ranges, 1..16 tokens and rows longer than one
 * chunk of 64 blocks.  The model test needs AVX-512 (the tile's scaling is
 * AVX-512 code): SKIP on CPUs without it.  (tests/kernels-amx.sh runs the
 * real tier where the CPU has AMX.) */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"
#include "tests/amx-model.h"
#include "tests/hs-test.h"
#include "tests/layer-util.h"

int main(void)
{
	const int types[2] = { HS_TYPE_MXFP4, HS_TYPE_Q8_0 }, cols[5] = { 32, 96, 2080, 2880, 4128 };
	/* up to 70 tokens: several token tiles, a partial one, two passes of 64 */
	const int nts[8] = { 1, 5, 8, 15, 16, 33, 64, 70 }, R = 48;
	char why[160];
	double worst = 0;

	if (hs__cpu_tier_why(&hs__cpu_features()->probe, HS_TIER_AVX512_VNNI, why, sizeof why))
		SKIP("the AMX model runs AVX-512 code: %s", why);
	for (int t = 0; t < 2; t++)
		for (int c = 0; c < 5; c++) {
			const int C = cols[c], nb = C / HS_QK;
			const size_t rb = hs__type_row_bytes(types[t], C);
			uint8_t *w = malloc(rb * R), *pw = malloc(rb * R);
			fill_matrix(w, types[t], R, C);
			hs__pack_matrix(types[t], R, C, w, rb, pw);
			for (int k = 0; k < 8; k++) {
				const int nt = nts[k], r0 = 16 * (k % 2), r1 = R - 16 * (k == 3);
				struct hs_block_q8_0 *xq = malloc(sizeof *xq * nb * nt);
				const struct hs_block_q8_0 *xs[70];
				float *oa[70], *ob[70], *xrow = malloc(sizeof *xrow * C);
				int products;
				for (int j = 0; j < nt; j++) {
					for (int i = 0; i < C; i++)
						xrow[i] = frand();
					hs__kernels_ref.quantize_q8_0(xrow, xq + j * nb, C);
					xs[j] = xq + j * nb;
					oa[j] = malloc(sizeof(float) * (r1 - r0));
					ob[j] = malloc(sizeof(float) * (r1 - r0 + 1));
					ob[j][r1 - r0] = 12345.0f; /* guard */
				}
				hs__kernels_ref.tile_q_packed(types[t], pw, r0, r1, C, xs, nt, oa);
				int faults = hs__amx_model_tile(types[t], pw, r0, r1, C, xs, nt, ob, &products);
				CHECK(faults == 0, "%s cols %d nt %d: %d faults", hs__type_name(types[t]), C, nt, faults);
				const int tiles = (nt + 15) / 16; /* whole passes of 64 tokens: 4 tiles each */
				CHECK(products == tiles * (r1 - r0) / 16 * nb,
				      "%s cols %d nt %d: %d tile products for %d token tiles x %d groups x %d blocks",
				      hs__type_name(types[t]), C, nt, products, tiles, (r1 - r0) / 16, nb);
				for (int j = 0; j < nt; j++) {
					double e = rel_l2(ob[j], oa[j], (size_t)(r1 - r0));
					CHECK(e <= 1e-5 && !isnan(e), "%s cols %d rows %d..%d nt %d token %d: error %.3g",
					      hs__type_name(types[t]), C, r0, r1, nt, j, e);
					CHECK(ob[j][r1 - r0] == 12345.0f, "wrote past the output");
					worst = e > worst ? e : worst;
					free(oa[j]);
					free(ob[j]);
				}
				free(xq);
				free(xrow);
			}
			free(w);
			free(pw);
		}
	printf("AMX tile on the tile model vs the packed scalar twin: worst normalised error %.3g (bound 1e-5)\n", worst);
	return hs_test_end();
}
