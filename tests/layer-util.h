/* Random MoE layers with valid weights, and the error measure, shared by
 * the device tests. */
#ifndef HS_TEST_LAYER_UTIL_H
#define HS_TEST_LAYER_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "cpu_kernels/moe.h"

static uint64_t rng = 0x853c49e6748fea9bull;
static inline uint32_t next(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}
static inline float frand(void)
{
	return (float)((int)(next() % 2001) - 1000) / 1000.0f;
}

/* A random layer with valid weights of the given type and architecture. */
struct layer {
	struct hs_moe_layer l;
	uint8_t *w;
	float *b;
};

static inline void fill_matrix(uint8_t *m, int type, int rows, int cols)
{
	size_t rb = hs__type_row_bytes(type, (uint64_t)cols), bb = hs__type_block_bytes(type);
	for (size_t i = 0; i < rb * rows; i++)
		m[i] = (uint8_t)next();
	for (int r = 0; r < rows; r++)
		for (int b = 0; b < cols / HS_QK; b++) {
			uint8_t *blk = m + r * rb + b * bb;
			if (type == HS_TYPE_MXFP4)
				blk[0] = (uint8_t)(120 + next() % 4);
			else {
				uint16_t d = hs__fp32_to_fp16(0.002f + 0.002f * (float)(next() % 8));
				memcpy(blk, &d, 2);
			}
		}
}

static inline int make_layer(struct layer *L, const struct hs_moe_arch *arch, int type, int D, int F, int E, int K)
{
	size_t gs = (size_t)F * hs__type_row_bytes(type, D), ds = (size_t)D * hs__type_row_bytes(type, F);
	memset(L, 0, sizeof *L);
	L->w = malloc((2 * gs + ds) * E);
	L->b = malloc(sizeof(float) * (size_t)E * (2 * F + D));
	if (!L->w || !L->b)
		return -1;
	for (int e = 0; e < E; e++) {
		fill_matrix(L->w + e * gs, type, F, D);
		fill_matrix(L->w + gs * E + e * gs, type, F, D);
		fill_matrix(L->w + 2 * gs * E + e * ds, type, D, F);
	}
	for (size_t i = 0; i < (size_t)E * (2 * F + D); i++)
		L->b[i] = 0.1f * frand();
	hs__moe_layer_flat(&L->l, arch, type, D, F, E, K, L->w, L->b);
	return 0;
}

/* The same with a type per matrix (gate, up, down), weights written by
 * hs__quantize_row_ref (valid blocks of every type: the K-quants' scales
 * sit where fill_matrix's noise would make them huge). */
static inline int make_layer3(struct layer *L, const struct hs_moe_arch *arch, const int type[3], int D, int F, int E,
			      int K)
{
	const int rows[3] = { F, F, D }, cols[3] = { D, D, F };
	size_t at = 0;
	float *row = malloc(sizeof(float) * (size_t)(D > F ? D : F));
	memset(L, 0, sizeof *L);
	const size_t bytes = hs__moe_layer_flat3(&L->l, arch, type, D, F, E, K, NULL, NULL);
	L->w = malloc(bytes);
	L->b = malloc(sizeof(float) * (size_t)E * (2 * F + D));
	if (!L->w || !L->b || !row) {
		free(row);
		return -1;
	}
	for (int m = 0; m < 3; m++) {
		const size_t rb = hs__type_row_bytes(type[m], (uint64_t)cols[m]);
		for (int r = 0; r < E * rows[m]; r++, at += rb) {
			for (int c = 0; c < cols[m]; c++)
				row[c] = frand() / sqrtf((float)cols[m]);
			hs__quantize_row_ref(type[m], row, L->w + at, (size_t)cols[m]);
		}
	}
	free(row);
	for (size_t i = 0; i < (size_t)E * (2 * F + D); i++)
		L->b[i] = 0.1f * frand();
	hs__moe_layer_flat3(&L->l, arch, type, D, F, E, K, L->w, L->b);
	return 0;
}

static inline double rel_l2(const float *a, const float *ref, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(a[i]))
			return INFINITY;
		num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
		den += (double)ref[i] * ref[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
