/* Checks the block types beyond Q8_0 and MXFP4 (Q2_K..Q6_K, IQ4_XS, IQ4_NL,
 * Q4_0, Q4_1, Q5_0, Q5_1): dequantization bit for bit against gguf-py's
 * independent implementation (tests/data/quants, made by
 * tests/gen-quants-data.py), the quantizers' round trips within each
 * format's error, the reference dot with Q8_0 activations against a double
 * dot of the dequantized values, and every CPU tier's plain-row tile
 * against that reference over awkward shapes (row ranges, 1..9 tokens,
 * long rows), with guard values after every output and a NaN check.
 * Bound tier vs reference: 1e-5 normalised L2 (the same integer dots and
 * float scales, only the order of float additions differs). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/kernels.h"
#include "tests/hs-test.h"

static const int types[] = { HS_TYPE_Q4_K, HS_TYPE_Q6_K, HS_TYPE_Q5_K, HS_TYPE_IQ4_XS, HS_TYPE_Q3_K, HS_TYPE_Q2_K,
			     HS_TYPE_Q5_0, HS_TYPE_Q4_0, HS_TYPE_Q4_1, HS_TYPE_Q5_1, HS_TYPE_IQ4_NL };
#define NTYPES ((int)(sizeof types / sizeof types[0]))

static uint64_t rng = 0x2545f4914f6cdd1dull;
static double unif(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (rng >> 11) * 0x1.0p-53;
}
static float gauss(void)
{
	return (float)((unif() + unif() + unif() + unif() - 2.0) * 1.7320508);
}

static void *read_all(const char *rel, size_t *n)
{
	FILE *f = fopen(hs_test_data(rel), "rb");
	void *p = NULL;
	long len;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 && (p = malloc((size_t)len)) &&
	    fread(p, 1, (size_t)len, f) != (size_t)len) {
		free(p);
		p = NULL;
	}
	*n = p ? (size_t)len : 0;
	fclose(f);
	return p;
}

static void test_gguf_py(void)
{
	for (int t = 0; t < NTYPES; t++) {
		char rel[64];
		size_t nb, nf;
		snprintf(rel, sizeof rel, "quants/%s.bin", hs__type_name(types[t]));
		uint8_t *raw = read_all(rel, &nb);
		snprintf(rel, sizeof rel, "quants/%s.f32", hs__type_name(types[t]));
		float *want = read_all(rel, &nf);
		CHECK(raw && want, "%s: test data missing", rel);
		if (!raw || !want)
			continue;
		size_t n = nf / 4;
		CHECK(hs__type_row_bytes(types[t], n) == nb, "%s: %zu bytes for %zu values", hs__type_name(types[t]), nb, n);
		float *got = malloc(nf);
		hs__dequantize_row_ref(types[t], raw, got, n);
		size_t diff = 0, first = n;
		for (size_t i = 0; i < n; i++)
			if (memcmp(&got[i], &want[i], 4) != 0 && diff++ == 0)
				first = i;
		CHECK(diff == 0, "%s: %zu of %zu values differ from gguf-py's (first: [%zu] %.9g, want %.9g)",
		      hs__type_name(types[t]), diff, n, first, first < n ? got[first] : 0.0, first < n ? want[first] : 0.0);
		free(got);
		free(raw);
		free(want);
	}
}

/* Round trips of Gaussian rows: normalised RMS error per format. */
static void test_roundtrip(void)
{
	static const struct {
		int type;
		double bound;
	} b[] = { { HS_TYPE_Q6_K, 0.04 }, { HS_TYPE_Q5_K, 0.07 }, { HS_TYPE_Q4_K, 0.14 }, { HS_TYPE_Q3_K, 0.30 },
		  { HS_TYPE_Q2_K, 0.50 }, { HS_TYPE_IQ4_XS, 0.12 }, { HS_TYPE_IQ4_NL, 0.12 }, { HS_TYPE_Q4_0, 0.14 },
		  { HS_TYPE_Q4_1, 0.14 }, { HS_TYPE_Q5_0, 0.07 }, { HS_TYPE_Q5_1, 0.07 } };
	const int n = 2048;
	float *x = malloc(sizeof *x * n), *y = malloc(sizeof *y * n);
	uint8_t *q = malloc(hs__type_row_bytes(HS_TYPE_Q6_K, n) * 2);

	for (size_t k = 0; k < sizeof b / sizeof b[0]; k++) {
		for (int i = 0; i < n; i++)
			x[i] = gauss() * (i < 256 ? 1e-3f : 1.0f) + (i >= 1024 && i < 1280 ? 0.7f : 0.0f);
		memset(x + 512, 0, 256 * sizeof *x); /* a zero super-block */
		hs__quantize_row_ref(b[k].type, x, q, n);
		hs__dequantize_row_ref(b[k].type, q, y, n);
		double num = 0, den = 0;
		int bad = 0;
		for (int i = 0; i < n; i++) {
			num += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
			den += (double)x[i] * x[i];
			bad += !isfinite(y[i]) || (i >= 512 && i < 768 && y[i] != 0);
		}
		double e = sqrt(num / den);
		printf("%-7s quantize/dequantize: normalised RMS error %.4f (bound %.2f)\n", hs__type_name(b[k].type), e,
		       b[k].bound);
		CHECK(e <= b[k].bound && bad == 0, "%s round trip: error %.4f, %d bad values", hs__type_name(b[k].type), e,
		      bad);
	}
	free(x);
	free(y);
	free(q);
}

static void quantize_tokens(const float *x, struct hs_block_q8_0 *xq, int nt, int cols)
{
	for (int j = 0; j < nt; j++)
		hs__kernels_ref.quantize_q8_0(x + (size_t)j * cols, xq + (size_t)j * (cols / 32), cols);
}

/* The reference dot against a double dot of the dequantized weights and
 * activations (integer dots are exact: only float rounding differs). */
static void test_ref_dot(void)
{
	const int cols = 1536;
	float *w = malloc(sizeof *w * cols), *x = malloc(sizeof *x * cols), *wd = malloc(sizeof *wd * cols);
	float *xd = malloc(sizeof *xd * cols);
	struct hs_block_q8_0 *xq = malloc(sizeof *xq * (cols / 32));
	uint8_t *row = malloc(hs__type_row_bytes(HS_TYPE_Q6_K, cols));

	for (int t = 0; t < NTYPES; t++) {
		double worst = 0;
		for (int rep = 0; rep < 8; rep++) {
			for (int i = 0; i < cols; i++) {
				w[i] = gauss() * 0.05f;
				x[i] = gauss();
			}
			hs__quantize_row_ref(types[t], w, row, cols);
			hs__dequantize_row_ref(types[t], row, wd, cols);
			quantize_tokens(x, xq, 1, cols);
			hs__dequantize_row_ref(HS_TYPE_Q8_0, xq, xd, cols);
			double want = 0, mag = 0;
			for (int i = 0; i < cols; i++) {
				want += (double)wd[i] * xd[i];
				mag += fabs((double)wd[i] * xd[i]);
			}
			double got = hs__dot_q8_ref(types[t], row, xq, cols);
			worst = fmax(worst, fabs(got - want) / mag);
		}
		CHECK(worst <= 1e-5, "%s reference dot: %.3g of the sum of |products| from the double dot",
		      hs__type_name(types[t]), worst);
	}
	free(w);
	free(x);
	free(wd);
	free(xd);
	free(xq);
	free(row);
}

#define GUARD 8
static const uint32_t guard_bits = 0x7fc0beef;

/* A row whose every stored value and sub-block scale is the largest its
 * bits hold (all bits set), with small finite f16 super-block scales: with
 * tokens of all +127 or all -127 this is the largest integer dot a block
 * can give, so an int16 sum taken over too many values overflows here. */
static void max_row(int type, uint8_t *w, int cols)
{
	const size_t bb = hs__type_block_bytes(type), nb = (size_t)cols / hs__type_block_values(type);
	int f16[2] = { 0, -1 }; /* byte offsets of the block's f16 scales */
	switch (type) {
	case HS_TYPE_Q6_K: f16[0] = 208; break;
	case HS_TYPE_Q3_K: f16[0] = 108; break;
	case HS_TYPE_Q2_K: f16[0] = 80, f16[1] = 82; break;
	case HS_TYPE_Q4_K:
	case HS_TYPE_Q5_K:
	case HS_TYPE_Q4_1:
	case HS_TYPE_Q5_1: f16[1] = 2; break;
	default: break;
	}
	memset(w, 0xff, bb * nb);
	for (size_t b = 0; b < nb; b++)
		for (int i = 0; i < 2; i++)
			if (f16[i] >= 0) {
				const uint16_t h = 0x1c00; /* 2^-8 */
				memcpy(w + b * bb + f16[i], &h, 2);
			}
}

static void test_tiles(const struct hs_kernel_ops *fast)
{
	/* 40960 columns (K-quants, 9 and 17 tokens only): rows too long for
	 * the AVX-512 tier's tile_qp pass, which leave them to its lanes */
	const int colsk[4] = { 256, 768, 5120, 40960 }, cols32[3] = { 32, 96, 2880 };
	/* from 8 tokens the AVX-512 tier decodes 16 rows once for a pass of
	 * tokens (tile_qp; 70: a second pass, ending with 4 and 2; its lanes,
	 * 15 tokens a tile, take only rows too long for a pass); from 8 the
	 * 256-bit tiers decode 8 rows once for 64 tokens at a time; from 24
	 * the AMX tier puts the one-scale-a-block types on tiles (33: three
	 * token tiles, the last of one token; 70: five, the last partial) */
	const int nts[9] = { 1, 2, 3, 4, 5, 9, 17, 33, 70 };
	const int R = 40;
	enum { MAXT = 70 };

	for (int t = 0; t < NTYPES; t++) {
		const int k = hs__type_block_values(types[t]) == HS_QK_K;
		double worst = 0;
		int nans = 0, guards = 0;
		for (int c = 0; c < 3 + k; c++) {
			const int cols = k ? colsk[c] : cols32[c];
			const size_t rb = hs__type_row_bytes(types[t], (uint64_t)cols) + 64 * (c == 1); /* a gap between rows */
			uint8_t *w = malloc(rb * R);
			float *row = malloc(sizeof *row * cols), *x = malloc(sizeof *x * cols * MAXT);
			struct hs_block_q8_0 *xq = malloc(sizeof *xq * (size_t)(cols / 32) * MAXT);
			for (int r = 0; r < R; r++) {
				for (int i = 0; i < cols; i++)
					row[i] = gauss() * (r % 7 == 3 ? 1e-4f : 0.05f) + (r % 5 == 1 ? 0.02f : 0.0f);
				hs__quantize_row_ref(types[t], row, w + (size_t)r * rb, cols);
			}
			max_row(types[t], w + (size_t)11 * rb, cols);
			for (int i = 0; i < cols * MAXT; i++) /* tokens 2 and 5: all +127, all -127 */
				x[i] = i / cols == 2   ? 1.0f
				       : i / cols == 5 ? -1.0f
						       : gauss() * (i % 97 == 0 ? 30.0f : 1.0f);
			/* the 256-value types also against tokens whose super-blocks
			 * share a scale (quantize_q8_k: the AMX tier's Q4_K tile
			 * then applies the block scales in integers) */
			for (int shared = 0; shared <= (k && c < 3); shared++) {
				if (shared)
					for (int j = 0; j < MAXT; j++)
						hs__quantize_q8_k_ref(x + (size_t)j * cols, xq + (size_t)j * (cols / 32), cols);
				else
					quantize_tokens(x, xq, MAXT, cols);
				for (int ni = 0; ni < 9; ni++) {
					const int nt = nts[ni], r0 = ni % 3 == 1 ? 3 : 0, r1 = ni % 2 ? R : R - 5;
					if (c == 3 && nt != 9 && nt != 17)
						continue;
					const int n_out = r1 - r0;
					float *a = malloc(sizeof *a * (size_t)(n_out + GUARD) * nt), *b = malloc(sizeof *b * (size_t)n_out * nt);
					const struct hs_block_q8_0 *xs[MAXT];
					float *oa[MAXT], *ob[MAXT];
					for (int j = 0; j < nt; j++) {
						xs[j] = xq + (size_t)j * (cols / 32);
						oa[j] = a + (size_t)j * (n_out + GUARD);
						ob[j] = b + (size_t)j * n_out;
						for (int g = 0; g < GUARD; g++)
							memcpy(&oa[j][n_out + g], &guard_bits, 4);
					}
					fast->tile_q(types[t], w, rb, r0, r1, cols, xs, nt, oa);
					hs__kernels_ref.tile_q(types[t], w, rb, r0, r1, cols, xs, nt, ob);
					double num = 0, den = 0;
					for (int j = 0; j < nt; j++) {
						for (int i = 0; i < n_out; i++) {
							nans += isnan(oa[j][i]);
							num += ((double)oa[j][i] - ob[j][i]) * ((double)oa[j][i] - ob[j][i]);
							den += (double)ob[j][i] * ob[j][i];
						}
						for (int g = 0; g < GUARD; g++)
							guards += memcmp(&oa[j][n_out + g], &guard_bits, 4) != 0;
					}
					/* f32 sums over 1280 blocks of 40960 columns drift further
					 * from the double reference than over at most 160 */
					worst = fmax(worst, sqrt(num / den) * (c == 3 ? 0.1 : 1.0));
					free(a);
					free(b);
				}
			}
			free(w);
			free(row);
			free(x);
			free(xq);
		}
		printf("%-13s %-7s tile_q vs reference: worst normalised error %.3g\n", fast->name,
		       hs__type_name(types[t]), worst);
		CHECK(worst <= 1e-5 && nans == 0 && guards == 0, "%s %s tiles: error %.3g, %d NaN, %d guards overwritten",
		      fast->name, hs__type_name(types[t]), worst, nans, guards);
	}
}

int main(void)
{
	CHECK(hs__type_supported(HS_TYPE_Q4_K) && !hs__type_supported(16) && strcmp(hs__type_name(16), "iq2_xxs") == 0 &&
		      hs__type_block_bytes(16) == 66,
	      "an unsupported type still has its name and size");
	CHECK(hs__type_from_name("Q4_K") == HS_TYPE_Q4_K && hs__type_from_name("iq4_xs") == HS_TYPE_IQ4_XS, "names");
	test_gguf_py();
	test_roundtrip();
	test_ref_dot();
	int tested = 0;
	for (int tier = HS_TIER_COUNT - 1; tier > HS_TIER_REF; tier--) {
		const struct hs_kernel_ops *k = hs__kernels_tier(tier);
		if (!k)
			continue;
		test_tiles(k);
		tested++;
	}
	if (!tested)
		printf("note: no x86 tier runs here; only the scalar reference was checked\n");
	return hs_test_end();
}
