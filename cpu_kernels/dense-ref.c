/* The scalar inner loops of the dense ops (hs__dense_ref), arithmetic in
 * double: what a build without AVX2 runs, and what HS_USE_REF=1 selects.
 * Also the choice of the fastest table for this CPU. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/attention.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/dense.h"

#define FCHUNK 256 /* values per dequantized piece of a row */

static void tile_f_ref(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols, const float *const *x,
		       int nt, float *const *out)
{
	float buf[FCHUNK];
	const size_t vb = hs__type_row_bytes(type, 1);

	for (int r = r0; r < r1; r++)
		for (int j = 0; j < nt; j++) {
			double s = 0;
			for (int c = 0; c < ncols; c += FCHUNK) {
				int m = ncols - c < FCHUNK ? ncols - c : FCHUNK;
				hs__dequantize_row_ref(type, w + (size_t)r * row_bytes + (size_t)c * vb, buf,
						       (size_t)m);
				for (int i = 0; i < m; i++)
					s += (double)buf[i] * x[j][c + i];
			}
			out[j][r - r0] = (float)s;
		}
}

static void dequant_row_ref(int type, const void *src, float *dst, int n)
{
	hs__dequantize_row_ref(type, src, dst, (size_t)n);
}

static void rmsnorm_row_ref(const float *x, float *y, int n, const float *w, float eps)
{
	double ss = 0;
	for (int i = 0; i < n; i++)
		ss += (double)x[i] * x[i];
	const double scale = 1.0 / sqrt(ss / n + eps);
	for (int i = 0; i < n; i++)
		y[i] = (float)(x[i] * scale * (w ? w[i] : 1.0));
}

static void rope_row_ref(float *x, int n_rot, const float *cs)
{
	const int h = n_rot / 2;
	for (int i = 0; i < h; i++) {
		double x0 = x[i], x1 = x[i + h], c = cs[i], s = cs[h + i];
		x[i] = (float)(x0 * c - x1 * s);
		x[i + h] = (float)(x0 * s + x1 * c);
	}
}

static void to_f16_ref(const float *x, uint16_t *y, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = hs__fp32_to_fp16(x[i]);
}

/* One head at a time, the online softmax continued in double over the
 * visible cells of [c0, c1). */
static void attend_ref(const struct hs_attn_tile *t)
{
	const int D = t->head_dim;
	float kr[512], vr[512];
	double o[512];

	for (int i = 0; i < t->g; i++) {
		const float *q = t->q + (size_t)i * D;
		double m = t->m[i], l = t->l[i];
		for (int d = 0; d < D; d++)
			o[d] = t->o[(size_t)i * D + d];
		for (int c = t->c0; c < t->c1; c++) {
			const int32_t p = t->cell_pos[c];
			if (p < t->pos_lo || p > t->pos_hi)
				continue;
			hs__dequantize_row_ref(t->kv_type, t->k + (size_t)c * t->k_cell, kr, (size_t)D);
			double s = 0;
			for (int d = 0; d < D; d++)
				s += (double)q[d] * kr[d];
			s *= t->scale;
			if (s > m) {
				const double a = exp(m - s); /* 0 on the first visible cell */
				l *= a;
				for (int d = 0; d < D; d++)
					o[d] *= a;
				m = s;
			}
			const double e = exp(s - m);
			hs__dequantize_row_ref(t->kv_type, t->v + (size_t)c * t->v_cell, vr, (size_t)D);
			l += e;
			for (int d = 0; d < D; d++)
				o[d] += e * vr[d];
		}
		t->m[i] = (float)m;
		t->l[i] = (float)l;
		for (int d = 0; d < D; d++)
			t->o[(size_t)i * D + d] = (float)o[d];
	}
}

static uint64_t xor_read_ref(const void *p, size_t bytes, size_t ahead)
{
	const uint64_t *w = p;
	const size_t stop = ahead < bytes ? (bytes - ahead) / 8 : 0; /* prefetches stay inside */
	uint64_t a = 0, b = 0, c = 0, d = 0; /* four streams: loads in flight, not one chain */
	for (size_t i = 0; i < bytes / 8; i += 4) {
		if (ahead && i % 8 == 0 && i < stop)
			__builtin_prefetch((const char *)(w + i) + ahead, 0, 2); /* 2: into L2 */
		a ^= w[i];
		b ^= w[i + 1];
		c ^= w[i + 2];
		d ^= w[i + 3];
	}
	return a ^ b ^ c ^ d;
}

const struct hs_dense_ops hs__dense_ref = { "scalar reference", tile_f_ref, dequant_row_ref, rmsnorm_row_ref,
					    rope_row_ref,       to_f16_ref, attend_ref, NULL, hs__dn_chunk_c,
					    xor_read_ref };

const struct hs_dense_ops *hs__dense_best(void)
{
	const struct hs_cpu_features *f = hs__cpu_features();
	const struct hs_dense_ops *d = f->use_avx512 ? hs__dense_avx512() : NULL;

	if (!d && f->use_avx2)
		d = hs__dense_avx2();
	return d ? d : &hs__dense_ref;
}
