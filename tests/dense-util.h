/* Helpers shared by the dense-op tests: a seeded generator, normalised
 * error with a NaN count, and outputs followed by guard values that a write
 * past the end would change. */
#ifndef HS_DENSE_UTIL_H
#define HS_DENSE_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"

static uint64_t du_state = 0x9e3779b97f4a7c15ull;

static inline double du_unif(void)
{
	du_state ^= du_state << 13;
	du_state ^= du_state >> 7;
	du_state ^= du_state << 17;
	return (du_state >> 11) * 0x1.0p-53;
}

/* Roughly N(0, 1): a sum of four uniforms, scaled. */
static inline float du_gauss(void)
{
	return (float)((du_unif() + du_unif() + du_unif() + du_unif() - 2.0) * 1.7320508);
}

static inline void du_fill(float *x, size_t n, float mean, float sd)
{
	for (size_t i = 0; i < n; i++)
		x[i] = mean + sd * du_gauss();
}

/* ||a - b|| / ||b|| over n values; NaNs in either are counted. */
static inline double du_rel_l2(const float *a, const float *b, size_t n, int *nan)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		if (isnan(a[i]) || isnan(b[i]))
			(*nan)++;
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The same over n rows of len values, stride apart in both arrays. */
static inline double du_rel_l2_rows(const float *a, const float *b, int n, size_t stride, int len, int *nan)
{
	double num = 0, den = 0;
	for (int t = 0; t < n; t++)
		for (int i = 0; i < len; i++) {
			const double x = a[(size_t)t * stride + i], y = b[(size_t)t * stride + i];
			if (isnan(x) || isnan(y))
				(*nan)++;
			num += (x - y) * (x - y);
			den += y * y;
		}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define DU_GUARD 64 /* bytes */
static const uint8_t du_guard_byte = 0xa5;

/* n bytes followed by DU_GUARD guard bytes, 64-byte aligned. */
static inline void *du_alloc(size_t n)
{
	uint8_t *p = aligned_alloc(64, (n + DU_GUARD + 63) & ~(size_t)63);
	if (!p)
		abort();
	memset(p + n, du_guard_byte, DU_GUARD);
	return p;
}

static inline int du_guard_ok(const void *p, size_t n)
{
	const uint8_t *b = (const uint8_t *)p + n;
	for (int i = 0; i < DU_GUARD; i++)
		if (b[i] != du_guard_byte)
			return 0;
	return 1;
}

/* rows x cols of `type` with values ~ N(0, 1/cols), row_bytes apart. */
static inline uint8_t *du_matrix(int type, int rows, int cols, size_t row_bytes)
{
	uint8_t *w = du_alloc((size_t)rows * row_bytes);
	float *row = malloc(sizeof *row * (size_t)cols);
	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < cols; c++)
			row[c] = du_gauss() / sqrtf((float)cols);
		hs__quantize_row_ref(type, row, w + (size_t)r * row_bytes, (size_t)cols);
	}
	free(row);
	return w;
}

/* Scaled down under sanitizers (about 10x slower there). */
static inline int du_sanitized(void)
{
	const char *s = getenv("HS_SANITIZER_BUILD");
	return s && strcmp(s, "yes") == 0;
}

#endif
