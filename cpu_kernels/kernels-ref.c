/* Scalar reference twins of the AVX2 kernels: the same quantized math
 * (Q8_0 activations, integer block dots, one float scale per block), in
 * plain loops.  A/B tests compare the fast kernels with these. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"

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

static void tile_q_ref(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	for (int r = r0; r < r1; r++)
		for (int j = 0; j < nt; j++)
			out[j][r - r0] = type == HS_TYPE_MXFP4
						 ? dot_mxfp4((const void *)(w + r * row_bytes), x[j], ncols / HS_QK)
						 : dot_q8_0((const void *)(w + r * row_bytes), x[j], ncols / HS_QK);
}

const struct hs_kernel_ops hs__kernels_ref = { "scalar reference", quantize_q8_0_ref, tile_q_ref };

int hs__kernel_type_quantized(int type)
{
	return type == HS_TYPE_MXFP4 || type == HS_TYPE_Q8_0;
}

const struct hs_kernel_ops *hs__kernels_best(void)
{
	const struct hs_kernel_ops *k = hs__cpu_features()->use_avx2 ? hs__kernels_avx2() : NULL;
	return k ? k : &hs__kernels_ref;
}
