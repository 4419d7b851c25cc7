/* Scalar reference twins of the tiers' kernels: the same quantized math
 * (Q8_0 activations, integer block dots, one float scale per block), in
 * plain loops; and the dispatch to the tier that runs.  A/B tests compare
 * the fast kernels with these. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"

static void quantize_q8_0_ref(const float *x, struct hs_block_q8_0 *y, int n)
{
	for (int b = 0; b < n / HS_QK; b++) {
		float amax = 0;
		for (int j = 0; j < HS_QK; j++)
			amax = fmaxf(amax, fabsf(x[b * HS_QK + j]));
		float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
		y[b].d = hs__fp32_to_fp16(d);
		for (int j = 0; j < HS_QK; j++)
			y[b].qs[j] = (int8_t)nearbyintf(x[b * HS_QK + j] * id); /* half to even, like vcvtps2dq */
	}
}

void hs__quantize_q8_k_ref(const float *x, struct hs_block_q8_0 *y, int n)
{
	const int n256 = n / 256 * 256;

	for (int i = 0; i < n256; i += 256) {
		float amax = 0;
		for (int j = 0; j < 256; j++)
			amax = fmaxf(amax, fabsf(x[i + j]));
		float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
		for (int j = 0; j < 256; j++) {
			y[(i + j) / HS_QK].d = hs__fp32_to_fp16(d);
			y[(i + j) / HS_QK].qs[j % HS_QK] = (int8_t)nearbyintf(x[i + j] * id);
		}
	}
	if (n256 < n)
		quantize_q8_0_ref(x + n256, y + n256 / HS_QK, n - n256);
}

static float dot_mxfp4(const struct hs_block_mxfp4 *w, const struct hs_block_q8_0 *x, int nb)
{
	float sum = 0;
	for (int b = 0; b < nb; b++) {
		int s = 0;
		for (int j = 0; j < HS_QK / 2; j++)
			s += hs__mxfp4_values[w[b].qs[j] & 0x0f] * x[b].qs[j] +
			     hs__mxfp4_values[w[b].qs[j] >> 4] * x[b].qs[j + HS_QK / 2];
		sum += hs__e8m0_to_fp32_half(w[b].e) * hs__fp16_to_fp32(x[b].d) * (float)s;
	}
	return sum;
}

static float dot_q8_0(const struct hs_block_q8_0 *w, const struct hs_block_q8_0 *x, int nb)
{
	float sum = 0;
	for (int b = 0; b < nb; b++) {
		int s = 0;
		for (int j = 0; j < HS_QK; j++)
			s += w[b].qs[j] * x[b].qs[j];
		sum += hs__fp16_to_fp32(w[b].d) * hs__fp16_to_fp32(x[b].d) * (float)s;
	}
	return sum;
}

/* Every other block type through its definition (hs__unpack32_ref):
 * per 16 values the integer dot and sum of the activations, then
 * dx * (s * dot - m * sum) in float, half by half. */
static float dot_unpacked(int type, const uint8_t *row, const struct hs_block_q8_0 *x, int nb)
{
	int8_t q[32];
	float s[2], m[2], sum = 0;
	for (int b = 0; b < nb; b++) {
		hs__unpack32_ref(type, row, b, q, s, m);
		float part = 0;
		for (int h = 0; h < 2; h++) {
			int dot = 0, xs = 0;
			for (int i = 16 * h; i < 16 * h + 16; i++) {
				dot += q[i] * x[b].qs[i];
				xs += x[b].qs[i];
			}
			part += s[h] * (float)dot - m[h] * (float)xs;
		}
		sum += hs__fp16_to_fp32(x[b].d) * part;
	}
	return sum;
}

float hs__dot_q8_ref(int type, const uint8_t *row, const struct hs_block_q8_0 *x, int ncols)
{
	switch (type) {
	case HS_TYPE_MXFP4: return dot_mxfp4((const void *)row, x, ncols / HS_QK);
	case HS_TYPE_Q8_0: return dot_q8_0((const void *)row, x, ncols / HS_QK);
	default: return dot_unpacked(type, row, x, ncols / HS_QK);
	}
}

static void tile_q_ref(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	for (int r = r0; r < r1; r++)
		for (int j = 0; j < nt; j++)
			out[j][r - r0] = hs__dot_q8_ref(type, w + (size_t)r * row_bytes, x[j], ncols);
}

/* The packed twin gathers each block back into its plain form (through
 * the layout's index math, repack.c) and sums in the plain twin's order,
 * so the two agree bit for bit on a matrix and its packed copy. */
static void tile_q_packed_ref(int type, const uint8_t *w, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	_Alignas(4) uint8_t blk[sizeof(struct hs_block_q8_0)];

	if (type != HS_TYPE_MXFP4 && type != HS_TYPE_Q8_0) { /* super-blocks: the row whole */
		uint8_t row[hs__type_row_bytes(type, (uint64_t)ncols)];
		for (int r = r0; r < r1; r++) {
			hs__packed_row(type, ncols, w, r, row);
			for (int j = 0; j < nt; j++)
				out[j][r - r0] = hs__dot_q8_ref(type, row, x[j], ncols);
		}
		return;
	}
	for (int r = r0; r < r1; r++) {
		for (int j = 0; j < nt; j++)
			out[j][r - r0] = 0;
		for (int b = 0; b < ncols / HS_QK; b++) {
			hs__packed_block(type, ncols, w, r, b, blk);
			for (int j = 0; j < nt; j++)
				out[j][r - r0] += type == HS_TYPE_MXFP4 ? dot_mxfp4((const void *)blk, x[j] + b, 1)
									: dot_q8_0((const void *)blk, x[j] + b, 1);
		}
	}
}

const struct hs_kernel_ops hs__kernels_ref = { "scalar reference", quantize_q8_0_ref, tile_q_ref, tile_q_packed_ref, NULL, 0, 0 };

int hs__kernel_type_quantized(int type)
{
	return hs__type_supported(type) && hs__type_block_values(type) > 1;
}

const struct hs_kernel_ops *hs__kernels_tier(int tier)
{
	char why[8];

	if (hs__cpu_tier_why(&hs__cpu_features()->probe, tier, why, sizeof why))
		return NULL;
	switch (tier) {
	case HS_TIER_REF: return &hs__kernels_ref;
	case HS_TIER_AVX2: return hs__kernels_avx2();
	case HS_TIER_AVX_VNNI: return hs__kernels_avx_vnni();
	case HS_TIER_AVX512_VNNI: return hs__kernels_avx512_vnni();
	case HS_TIER_AMX: return hs__kernels_amx();
	default: return NULL;
	}
}

const struct hs_kernel_ops *hs__kernels_best(void)
{
	const struct hs_kernel_ops *k = hs__kernels_tier(hs__cpu_features()->tier);
	return k ? k : &hs__kernels_ref;
}
