/* Checks ggml's block formats bit for bit: fp16/bf16 conversions (all 65536
 * halves), hand-computed MXFP4 and Q8_0 blocks, quantize/dequantize round
 * trips with their error bounds, and the row sizes of real shapes. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "tests/hs-test.h"

static uint64_t rng = 88172645463325252ull;
static double uniform(void) /* [0, 1) */
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (rng >> 11) * 0x1.0p-53;
}

static void test_halves(void)
{
	int bad = 0;
	for (uint32_t h = 0; h < 65536; h++) {
		float f = hs__fp16_to_fp32((uint16_t)h);
		if (isnan(f))
			continue;
		if (hs__fp32_to_fp16(f) != h && bad++ < 5)
			CHECK(0, "fp16 %04x -> %g -> %04x", h, f, hs__fp32_to_fp16(f));
	}
	CHECK(bad == 0, "%d halves do not round-trip", bad);
	CHECK(hs__fp16_to_fp32(0x3c00) == 1.0f && hs__fp16_to_fp32(0xc000) == -2.0f, "fp16 1, -2");
	CHECK(hs__fp16_to_fp32(0x0001) == 0x1p-24f, "smallest subnormal");
	CHECK(hs__fp16_to_fp32(0x7bff) == 65504.0f, "largest half");
	CHECK(isinf(hs__fp16_to_fp32(0x7c00)) && isnan(hs__fp16_to_fp32(0x7e00)), "inf, nan");
	/* round to nearest even at the halfway points */
	CHECK(hs__fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00, "tie to even (down)");
	CHECK(hs__fp32_to_fp16(1.0f + 3 * 0x1p-11f) == 0x3c02, "tie to even (up)");
	CHECK(hs__fp32_to_fp16(65520.0f) == 0x7c00, "overflow to inf");
	CHECK(hs__fp32_to_fp16(0x1p-25f) == 0x0000 && hs__fp32_to_fp16(0x1.8p-25f) == 0x0001, "subnormal rounding");
	CHECK(isnan(hs__fp16_to_fp32(hs__fp32_to_fp16(NAN))), "NaN stays NaN");
	CHECK(hs__bf16_to_fp32(0x3f80) == 1.0f && hs__fp32_to_bf16(1.0f) == 0x3f80, "bf16 1");
	CHECK(hs__fp32_to_bf16(1.0f + 0x1p-8f) == 0x3f80 && hs__fp32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82, "bf16 ties");
	CHECK(isnan(hs__bf16_to_fp32(hs__fp32_to_bf16(NAN))), "bf16 NaN");
	CHECK(hs__e8m0_to_fp32_half(128) == 1.0f && hs__e8m0_to_fp32_half(0) == 0x1p-128f &&
	      hs__e8m0_to_fp32_half(1) == 0x1p-127f && hs__e8m0_to_fp32_half(254) == 0x1p126f, "E8M0 half scale");
}

static void test_hand_blocks(void)
{
	/* MXFP4: e = 130 -> scale 4.  Byte 0 = 0x71: element 0 is value[1] = 1,
	 * element 16 is value[7] = 12.  Byte 1 = 0xf8: element 1 is value[8]
	 * (negative zero) = 0, element 17 is value[15] = -12. */
	struct hs_block_mxfp4 m = { 130, { 0x71, 0xf8, 0x9a } };
	float y[32];

	hs__dequantize_row_ref(HS_TYPE_MXFP4, &m, y, 32);
	CHECK(y[0] == 4 && y[16] == 48 && y[1] == 0 && y[17] == -48, "mxfp4 %g %g %g %g", y[0], y[16], y[1], y[17]);
	CHECK(y[2] == -8 && y[18] == -4, "mxfp4 byte 2: %g %g", y[2], y[18]); /* 0x9a: lo 10 -> -2, hi 9 -> -1 */
	CHECK(y[3] == 0 && y[31] == 0, "zero bytes");

	/* Q8_0: d = 0.5 (fp16 0x3800), q = -128, 127, 3 */
	struct hs_block_q8_0 q = { 0x3800, { -128, 127, 3 } };
	hs__dequantize_row_ref(HS_TYPE_Q8_0, &q, y, 32);
	CHECK(y[0] == -64 && y[1] == 63.5f && y[2] == 1.5f && y[3] == 0, "q8_0 %g %g %g", y[0], y[1], y[2]);

	/* Byte layout: the exponent first, then the nibbles; 34-byte Q8_0 with
	 * the little-endian fp16 scale first. */
	uint8_t raw[17];
	memcpy(raw, &m, 17);
	CHECK(raw[0] == 130 && raw[1] == 0x71, "mxfp4 byte order");
	uint8_t rq[34];
	memcpy(rq, &q, 34);
	CHECK(rq[0] == 0x00 && rq[1] == 0x38 && (int8_t)rq[2] == -128, "q8_0 byte order");
}

static void test_round_trips(void)
{
	const int n = 32 * 40;
	float x[32 * 40], y[32 * 40];
	uint8_t buf[32 * 40 * 4];

	/* Values exactly on the MXFP4 grid with a block maximum of 12 d come
	 * back bit for bit. */
	for (int b = 0; b < 40; b++) {
		float d = ldexpf(1.0f, (b % 20) - 10);
		for (int j = 0; j < 32; j++)
			x[b * 32 + j] = d * hs__mxfp4_values[(j * 7 + b) % 16];
		x[b * 32 + 5] = (b & 1 ? -12 : 12) * d;
	}
	hs__quantize_row_ref(HS_TYPE_MXFP4, x, buf, n);
	hs__dequantize_row_ref(HS_TYPE_MXFP4, buf, y, n);
	CHECK(memcmp(x, y, sizeof x) == 0, "grid values do not round-trip through mxfp4");

	for (int trial = 0; trial < 50; trial++) {
		float scale = ldexpf(1.0f, (int)(uniform() * 40) - 20);
		for (int i = 0; i < n; i++)
			x[i] = (float)((uniform() * 2 - 1) * scale);
		if (trial == 0)
			memset(x, 0, 32 * sizeof *x); /* an all-zero block */
		hs__quantize_row_ref(HS_TYPE_MXFP4, x, buf, n);
		hs__dequantize_row_ref(HS_TYPE_MXFP4, buf, y, n);
		for (int b = 0; b < 40; b++) {
			float amax = 0, d = hs__e8m0_to_fp32_half(buf[b * 17]);
			for (int j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(x[b * 32 + j]));
			/* grid gaps are at most 4d (8 -> 12); above 12d values clip,
			 * and amax < 16d by the choice of the exponent */
			for (int j = 0; j < 32; j++) {
				float err = fabsf(x[b * 32 + j] - y[b * 32 + j]);
				CHECK(err <= 4 * d && amax < 16 * d + 1e-30f, "mxfp4 block %d: err %g, d %g, amax %g", b, err, d, amax);
				if (err > 4 * d)
					return;
			}
		}
		hs__quantize_row_ref(HS_TYPE_Q8_0, x, buf, n);
		hs__dequantize_row_ref(HS_TYPE_Q8_0, buf, y, n);
		for (int b = 0; b < 40; b++) {
			float amax = 0;
			for (int j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(x[b * 32 + j]));
			/* half a step, plus 127 times the fp16 rounding of d (absolute
			 * 2^-25 where d is a subnormal half) */
			float d = amax / 127, dr = fmaxf(d * 0x1p-11f, 0x1p-25f);
			float bound = d * 0.5f + 127 * dr + 1e-30f;
			for (int j = 0; j < 32; j++)
				CHECK(fabsf(x[b * 32 + j] - y[b * 32 + j]) <= bound, "q8_0 block %d: err %g bound %g", b,
				      fabsf(x[b * 32 + j] - y[b * 32 + j]), bound);
		}
		int types[3] = { HS_TYPE_F16, HS_TYPE_BF16, HS_TYPE_F32 };
		float rel[3] = { 0x1p-11f, 0x1p-8f, 0 };
		for (int t = 0; t < 3; t++) {
			hs__quantize_row_ref(types[t], x, buf, n);
			hs__dequantize_row_ref(types[t], buf, y, n);
			for (int i = 0; i < n; i++)
				if (!(t == 0 && fabsf(x[i]) >= 65504.0f) && !(fabsf(x[i] - y[i]) <= rel[t] * fabsf(x[i]) + (t == 0 ? 0x1p-25f : 0))) {
					CHECK(0, "%s: %g -> %g", hs__type_name(types[t]), x[i], y[i]);
					break;
				}
		}
	}
}

static void test_sizes(void)
{
	CHECK(hs__type_row_bytes(HS_TYPE_MXFP4, 2880) == 1530, "mxfp4 row of 2880");
	CHECK(hs__type_row_bytes(HS_TYPE_MXFP4, 2880) * 2880 == 4406400, "one 2880x2880 mxfp4 matrix");
	CHECK(hs__type_row_bytes(HS_TYPE_Q8_0, 2048) == 2176, "q8_0 row of 2048");
	CHECK(hs__type_row_bytes(HS_TYPE_MXFP4, 100) == 0, "row not a block multiple");
	CHECK(hs__type_row_bytes(99, 64) == 0 && hs__type_name(99) == NULL && hs__type_row_bytes(HS_TYPE_Q4_K, 100) == 0, "unknown type");
	CHECK(hs__type_from_name("mxfp4") == 39 && hs__type_from_name("q8_0") == 8 && hs__type_from_name("bf16") == 30 &&
	      hs__type_from_name("x") == -1, "names");
}

int main(void)
{
	test_halves();
	test_hand_blocks();
	test_round_trips();
	test_sizes();
	return hs_test_end();
}
