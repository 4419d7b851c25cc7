/* Checks the AMX-INT8 tier's data movement where no AMX is at hand: its
 * tiles (amx-body.h) run on a scalar model of the tile unit that faults
 * where the hardware would, and must match the scalar twins: the packed
 * tile for MXFP4 and Q8_0, the plain-row tile for the other eleven block
 * types, packed Q4_K's passes, over odd shapes, row sub-ranges, 1..70 tokens and rows longer
 * than one chunk of 64 blocks.  The model test needs AVX-512 (the tile's scaling is
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

/* nt random tokens of C values quantized (shared: a scale per 256 values)
 * into xq / xs, and their outputs: oa[j] of n floats, ob[j] of n and a
 * guard after them */
static void make_tokens(float *v, int C, int nt, int shared, int n, struct hs_block_q8_0 *xq,
			const struct hs_block_q8_0 **xs, float **oa, float **ob)
{
	for (int j = 0; j < nt; j++) {
		for (int i = 0; i < C; i++)
			v[i] = frand();
		if (shared)
			hs__quantize_q8_k_ref(v, xq + j * (C / HS_QK), C);
		else
			hs__kernels_ref.quantize_q8_0(v, xq + j * (C / HS_QK), C);
		xs[j] = xq + j * (C / HS_QK);
		oa[j] = malloc(sizeof(float) * n);
		ob[j] = malloc(sizeof(float) * (n + 1));
		ob[j][n] = 12345.0f; /* guard */
	}
}

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

	/* plain rows of the other block types: rows not a multiple of 16, row
	 * sub-ranges, 8..70 tokens, rows longer than a chunk of 64 blocks */
	static const int qtypes[] = { HS_TYPE_Q4_K, HS_TYPE_Q5_K, HS_TYPE_Q6_K, HS_TYPE_Q3_K, HS_TYPE_Q2_K, HS_TYPE_IQ4_XS,
				      HS_TYPE_IQ4_NL, HS_TYPE_Q4_0, HS_TYPE_Q4_1, HS_TYPE_Q5_0, HS_TYPE_Q5_1 };
	const int qcols[3] = { 256, 2304, 4096 }, qnts[5] = { 8, 16, 17, 33, 70 }, QR = 37;
	worst = 0;
	for (size_t t = 0; t < sizeof qtypes / sizeof qtypes[0]; t++)
		for (int c = 0; c < 3; c++) {
			const int C = qcols[c], nb = C / HS_QK, type = qtypes[t];
			const size_t rb = hs__type_row_bytes(type, C);
			uint8_t *w = malloc(rb * QR);
			float *v = malloc(sizeof *v * (size_t)C * QR);
			for (size_t i = 0; i < (size_t)C * QR; i++)
				v[i] = frand();
			hs__quantize_row_ref(type, v, w, (size_t)C * QR); /* valid blocks, sane scales */
			/* Q4_K and Q5_K also against tokens whose super-blocks share a
			 * scale (quantize_q8_k): the block scales go into the weights
			 * in 2 (Q5_K: 3) pieces and every product takes two blocks */
			const int q45 = type == HS_TYPE_Q4_K || type == HS_TYPE_Q5_K;
			for (int shared = 0; shared <= q45; shared++)
			for (int k = 0; k < 5; k++) {
				const int nt = qnts[k], r0 = k % 2 ? 5 : 0, r1 = k == 2 ? QR - 3 : QR;
				struct hs_block_q8_0 *xq = malloc(sizeof *xq * nb * nt);
				const struct hs_block_q8_0 *xs[70];
				float *oa[70], *ob[70];
				int products;
				make_tokens(v, C, nt, shared, r1 - r0, xq, xs, oa, ob);
				hs__kernels_ref.tile_q(type, w, rb, r0, r1, C, xs, nt, oa);
				int faults = hs__amx_model_tile_qx(type, w, rb, r0, r1, C, xs, nt, ob, &products);
				CHECK(faults == 0, "%s cols %d nt %d: %d faults", hs__type_name(type), C, nt, faults);
				/* products per 2 blocks */
				int per_pair = 2;
				if (type == HS_TYPE_Q6_K || type == HS_TYPE_Q3_K || type == HS_TYPE_Q2_K)
					per_pair = 4;
				else if (shared && type == HS_TYPE_Q5_K)
					per_pair = 3;
				CHECK(products == (nt + 15) / 16 * ((r1 - r0 + 15) / 16) * nb / 2 * per_pair,
				      "%s cols %d nt %d: %d tile products", hs__type_name(type), C, nt, products);
				CHECK(hs__amx_model_wide_products() == (shared ? products : 0),
				      "%s cols %d nt %d shared %d: %d of %d products two blocks deep", hs__type_name(type), C,
				      nt, shared, hs__amx_model_wide_products(), products);
				for (int j = 0; j < nt; j++) {
					double e = rel_l2(ob[j], oa[j], (size_t)(r1 - r0));
					CHECK(e <= 1e-5 && !isnan(e), "%s cols %d rows %d..%d nt %d token %d: error %.3g",
					      hs__type_name(type), C, r0, r1, nt, j, e);
					CHECK(ob[j][r1 - r0] == 12345.0f, "%s: wrote past the output", hs__type_name(type));
					worst = e > worst ? e : worst;
					free(oa[j]);
					free(ob[j]);
				}
				free(xq);
			}
			free(w);
			free(v);
		}
	printf("AMX tile of plain K-quant/IQ4/Q4_0..Q5_1 rows on the tile model vs the scalar twin: worst %.3g (bound 1e-5)\n",
	       worst);
	/* packed Q4_K (repack.h) read by the same passes: whole groups, tokens
	 * with a scale per 256 values, and a batch per 32 (gathered back to
	 * plain rows, no tile products) */
	const int pnts[4] = { 16, 17, 33, 70 }, PR = 48;
	worst = 0;
	for (int c = 0; c < 3; c++) {
		const int C = qcols[c], nb = C / HS_QK;
		const size_t rb = hs__type_row_bytes(HS_TYPE_Q4_K, C);
		uint8_t *w = malloc(rb * PR), *pw = malloc(rb * PR);
		float *v = malloc(sizeof *v * (size_t)C * PR);
		for (size_t i = 0; i < (size_t)C * PR; i++)
			v[i] = frand();
		hs__quantize_row_ref(HS_TYPE_Q4_K, v, w, (size_t)C * PR);
		hs__pack_matrix(HS_TYPE_Q4_K, PR, C, w, rb, pw);
		for (int k = 0; k < 4; k++) {
			const int nt = pnts[k], shared = k != 1, r0 = k == 2 ? 16 : 0, r1 = k == 3 ? 32 : PR;
			struct hs_block_q8_0 *xq = malloc(sizeof *xq * nb * nt);
			const struct hs_block_q8_0 *xs[70];
			float *oa[70], *ob[70];
			int products;
			make_tokens(v, C, nt, shared, r1 - r0, xq, xs, oa, ob);
			hs__kernels_ref.tile_q(HS_TYPE_Q4_K, w, rb, r0, r1, C, xs, nt, oa);
			int faults = hs__amx_model_tile_q4k_packed(pw, r0, r1, C, xs, nt, ob, &products);
			CHECK(faults == 0, "packed q4_K cols %d nt %d: %d faults", C, nt, faults);
			CHECK(products == (shared ? (nt + 15) / 16 * ((r1 - r0) / 16) * nb / 2 * 2 : 0),
			      "packed q4_K cols %d nt %d shared %d: %d tile products", C, nt, shared, products);
			for (int j = 0; j < nt; j++) {
				double e = rel_l2(ob[j], oa[j], (size_t)(r1 - r0));
				CHECK(e <= 1e-5 && !isnan(e), "packed q4_K cols %d rows %d..%d nt %d token %d: error %.3g", C,
				      r0, r1, nt, j, e);
				CHECK(ob[j][r1 - r0] == 12345.0f, "packed q4_K: wrote past the output");
				worst = e > worst ? e : worst;
				free(oa[j]);
				free(ob[j]);
			}
			free(xq);
		}
		free(w);
		free(pw);
		free(v);
	}
	printf("AMX tile of packed Q4_K on the tile model vs the scalar twin on plain rows: worst %.3g (bound 1e-5)\n",
	       worst);
	return hs_test_end();
}
