/* Scalar reference code for ggml's block formats.  Slow and plain on purpose:
 * every fast kernel is checked against these. */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cpu_kernels/formats.h"

const int8_t hs__mxfp4_values[16] = { 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
const int8_t hs__iq4nl_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* Every ggml type: the ids GGUF files hold, ggml's names and block sizes
 * (ggml.c's type_traits); `ok` marks the ones hotset computes with. */
static const struct {
	int type;
	const char *name;
	size_t values, bytes;
	int ok;
} types[] = {
	{ HS_TYPE_F32, "f32", 1, 4, 1 },
	{ HS_TYPE_F16, "f16", 1, 2, 1 },
	{ HS_TYPE_Q4_0, "q4_0", 32, 18, 1 },
	{ HS_TYPE_Q4_1, "q4_1", 32, 20, 1 },
	{ HS_TYPE_Q5_0, "q5_0", 32, 22, 1 },
	{ HS_TYPE_Q5_1, "q5_1", 32, 24, 1 },
	{ HS_TYPE_Q8_0, "q8_0", HS_QK, sizeof(struct hs_block_q8_0), 1 },
	{ 9, "q8_1", 32, 36, 0 },
	{ HS_TYPE_Q2_K, "q2_K", 256, 84, 1 },
	{ HS_TYPE_Q3_K, "q3_K", 256, 110, 1 },
	{ HS_TYPE_Q4_K, "q4_K", 256, 144, 1 },
	{ HS_TYPE_Q5_K, "q5_K", 256, 176, 1 },
	{ HS_TYPE_Q6_K, "q6_K", 256, 210, 1 },
	{ 15, "q8_K", 256, 292, 0 },
	{ 16, "iq2_xxs", 256, 66, 0 },
	{ 17, "iq2_xs", 256, 74, 0 },
	{ 18, "iq3_xxs", 256, 98, 0 },
	{ 19, "iq1_s", 256, 50, 0 },
	{ HS_TYPE_IQ4_NL, "iq4_nl", 32, 18, 1 },
	{ 21, "iq3_s", 256, 110, 0 },
	{ 22, "iq2_s", 256, 82, 0 },
	{ HS_TYPE_IQ4_XS, "iq4_xs", 256, 136, 1 },
	{ 24, "i8", 1, 1, 0 },
	{ 25, "i16", 1, 2, 0 },
	{ 26, "i32", 1, 4, 0 },
	{ 27, "i64", 1, 8, 0 },
	{ 28, "f64", 1, 8, 0 },
	{ 29, "iq1_m", 256, 56, 0 },
	{ HS_TYPE_BF16, "bf16", 1, 2, 1 },
	{ 34, "tq1_0", 256, 54, 0 },
	{ 35, "tq2_0", 256, 66, 0 },
	{ HS_TYPE_MXFP4, "mxfp4", HS_QK, sizeof(struct hs_block_mxfp4), 1 },
	{ 40, "nvfp4", 64, 36, 0 },
};

static int find(int type)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (types[i].type == type)
			return (int)i;
	return -1;
}

const char *hs__type_name(int type)
{
	int i = find(type);
	return i < 0 ? NULL : types[i].name;
}

int hs__type_from_name(const char *name)
{
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (strcasecmp(types[i].name, name) == 0)
			return types[i].type;
	return -1;
}

int hs__type_supported(int type)
{
	int i = find(type);
	return i >= 0 && types[i].ok;
}

static char supported_names[256];

static void fill_supported_names(void)
{
	size_t at = 0;
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (types[i].ok)
			at += (size_t)snprintf(supported_names + at, sizeof supported_names - at, "%s%s", at ? ", " : "",
					       types[i].name);
}

const char *hs__type_supported_names(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, fill_supported_names);
	return supported_names;
}

size_t hs__type_block_values(int type)
{
	int i = find(type);
	return i < 0 ? 0 : types[i].values;
}

size_t hs__type_block_bytes(int type)
{
	int i = find(type);
	return i < 0 ? 0 : types[i].bytes;
}

size_t hs__type_row_bytes(int type, uint64_t n)
{
	int i = find(type);
	if (i < 0 || n % types[i].values || n / types[i].values > SIZE_MAX / types[i].bytes)
		return 0;
	return (size_t)(n / types[i].values) * types[i].bytes;
}

static float f32_from_bits(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint32_t bits_from_f32(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

float hs__fp16_to_fp32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;

	if (exp == 0x1f) /* inf or NaN */
		return f32_from_bits(sign | 0x7f800000u | (man << 13));
	if (exp == 0) /* zero or subnormal: man * 2^-24 */
		return sign ? -ldexpf((float)man, -24) : ldexpf((float)man, -24);
	return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t hs__fp32_to_fp16(float f)
{
	uint32_t u = bits_from_f32(f);
	uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
	uint32_t exp = (u >> 23) & 0xff, man = u & 0x7fffff;
	int e;

	if (exp == 0xff) /* inf, NaN (kept quiet and non-zero) */
		return sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0);
	e = (int)exp - 127 + 15;
	if (e >= 0x1f)
		return sign | 0x7c00;
	if (e <= 0) {
		/* subnormal half: shift the full mantissa, round to nearest even */
		if (e < -10)
			return sign;
		man |= 0x800000;
		int shift = 14 - e;
		uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return sign | (uint16_t)half;
	}
	uint32_t half = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
		half++; /* may carry into the exponent, up to inf: correct */
	return sign | (uint16_t)half;
}

float hs__bf16_to_fp32(uint16_t h)
{
	return f32_from_bits((uint32_t)h << 16);
}

uint16_t hs__fp32_to_bf16(float f)
{
	uint32_t u = bits_from_f32(f);

	if ((u & 0x7fffffff) > 0x7f800000) /* NaN: keep it quiet */
		return (uint16_t)((u >> 16) | 0x40);
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float hs__e8m0_to_fp32_half(uint8_t e)
{
	return ldexpf(1.0f, (int)e - 128);
}

static void dequant_q8_0(const struct hs_block_q8_0 *b, float *y, size_t nb)
{
	for (size_t i = 0; i < nb; i++) {
		float d = hs__fp16_to_fp32(b[i].d);
		for (int j = 0; j < HS_QK; j++)
			y[i * HS_QK + j] = d * b[i].qs[j];
	}
}

static void dequant_mxfp4(const struct hs_block_mxfp4 *b, float *y, size_t nb)
{
	for (size_t i = 0; i < nb; i++) {
		float d = hs__e8m0_to_fp32_half(b[i].e);
		for (int j = 0; j < HS_QK / 2; j++) {
			y[i * HS_QK + j] = d * hs__mxfp4_values[b[i].qs[j] & 0x0f];
			y[i * HS_QK + j + HS_QK / 2] = d * hs__mxfp4_values[b[i].qs[j] >> 4];
		}
	}
}

void hs__dequantize_row_ref(int type, const void *src, float *dst, size_t n)
{
	const uint16_t *h = src;

	switch (type) {
	case HS_TYPE_F32: memcpy(dst, src, n * sizeof(float)); break;
	case HS_TYPE_F16: for (size_t i = 0; i < n; i++) dst[i] = hs__fp16_to_fp32(h[i]); break;
	case HS_TYPE_BF16: for (size_t i = 0; i < n; i++) dst[i] = hs__bf16_to_fp32(h[i]); break;
	case HS_TYPE_Q8_0: dequant_q8_0(src, dst, n / HS_QK); break;
	case HS_TYPE_MXFP4: dequant_mxfp4(src, dst, n / HS_QK); break;
	default: hs__dequantize_row_other(type, src, dst, n); break;
	}
}

static void quant_q8_0(const float *x, struct hs_block_q8_0 *b, size_t nb)
{
	for (size_t i = 0; i < nb; i++) {
		float amax = 0;
		for (int j = 0; j < HS_QK; j++)
			amax = fmaxf(amax, fabsf(x[i * HS_QK + j]));
		float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
		b[i].d = hs__fp32_to_fp16(d);
		for (int j = 0; j < HS_QK; j++)
			b[i].qs[j] = (int8_t)roundf(x[i * HS_QK + j] * id);
	}
}

/* The nibble whose value times d is nearest to x.  x * (1/d) is exact in
 * double (d is a power of two), so comparing it with the midpoints between
 * neighbouring magnitudes {0,1,2,3,4,6,8,12} is exact; a tie goes to the
 * smaller magnitude, as ggml's first-best search does. */
static int mxfp4_nearest(float x, double inv_d)
{
	static const double mid[7] = { 0.5, 1.5, 2.5, 3.5, 5.0, 7.0, 10.0 };
	double m = fabs((double)x) * inv_d;
	int k = 0;

	while (k < 7 && m > mid[k])
		k++;
	return k && x < 0 ? k + 8 : k;
}

static void quant_mxfp4(const float *x, struct hs_block_mxfp4 *b, size_t nb)
{
	for (size_t i = 0; i < nb; i++) {
		float amax = 0;
		for (int j = 0; j < HS_QK; j++)
			amax = fmaxf(amax, fabsf(x[i * HS_QK + j]));
		/* The largest value (12 = 6 doubled) lands near amax; clamp the
		 * exponent byte to its range for tiny or huge blocks. */
		int e = amax > 0 ? (int)floorf(log2f(amax)) - 2 + 127 : 0;
		e = e < 0 ? 0 : e > 255 ? 255 : e;
		double inv_d = ldexp(1.0, 128 - e);
		b[i].e = (uint8_t)e;
		for (int j = 0; j < HS_QK / 2; j++)
			b[i].qs[j] = (uint8_t)(mxfp4_nearest(x[i * HS_QK + j], inv_d) |
					       mxfp4_nearest(x[i * HS_QK + j + HS_QK / 2], inv_d) << 4);
	}
}

void hs__quantize_row_ref(int type, const float *src, void *dst, size_t n)
{
	uint16_t *h = dst;

	switch (type) {
	case HS_TYPE_F32: memcpy(dst, src, n * sizeof(float)); break;
	case HS_TYPE_F16: for (size_t i = 0; i < n; i++) h[i] = hs__fp32_to_fp16(src[i]); break;
	case HS_TYPE_BF16: for (size_t i = 0; i < n; i++) h[i] = hs__fp32_to_bf16(src[i]); break;
	case HS_TYPE_Q8_0: quant_q8_0(src, dst, n / HS_QK); break;
	case HS_TYPE_MXFP4: quant_mxfp4(src, dst, n / HS_QK); break;
	default: hs__quantize_row_other(type, src, dst, n); break;
	}
}
