/* RoPE, NEOX layout, with YaRN as ggml computes it (see dense.h for the
 * formulas).  Angles are computed in double from the position (ggml
 * accumulates theta by repeated float multiplication, which drifts by up
 * to ~1e-5 relative at large positions; hotset keeps the exact angle). */
#include "config.h"

#include <math.h>
#include <omp.h>

#include "cpu_kernels/dense.h"
#include "base/error.h"

/* The dimension index whose wavelength fits n_rot_turns turns in the
 * original context, in float as ggml has it, so floor and ceil land where
 * they land there. */
static float corr_dim(int n_rot, int n_ctx_orig, float turns, float base)
{
	return n_rot * logf(n_ctx_orig / (turns * 2 * (float)M_PI)) / (2 * logf(base));
}

int hs__rope_init(struct hs_rope *r, int n_rot, float freq_base, float freq_scale, float ext_factor, float attn_factor,
		  float beta_fast, float beta_slow, int n_ctx_orig)
{
	if (n_rot <= 0 || n_rot % 2 || n_rot > 1024)
		return hs__error(EINVAL, "rope: n_rot %d (even, 2..1024)", n_rot);
	if (!(freq_base > 1) || !(freq_scale > 0) || !isfinite(ext_factor) || !isfinite(attn_factor))
		return hs__error(EINVAL, "rope: freq_base %g (> 1), freq_scale %g (> 0), ext_factor %g, attn_factor %g",
				 freq_base, freq_scale, ext_factor, attn_factor);
	if (ext_factor != 0 && (n_ctx_orig <= 0 || !(beta_fast > 0) || !(beta_slow > 0)))
		return hs__error(EINVAL, "rope: YaRN needs n_ctx_orig %d > 0 and betas %g, %g > 0", n_ctx_orig,
				 beta_fast, beta_slow);
	r->n_rot = n_rot;
	r->freq_base = freq_base;
	r->freq_scale = freq_scale;
	r->ext_factor = ext_factor;
	r->attn_factor = attn_factor;
	r->corr_lo = r->corr_hi = 0;
	if (ext_factor != 0) {
		float lo = floorf(corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
		float hi = ceilf(corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
		r->corr_lo = lo > 0 ? lo : 0;
		r->corr_hi = hi < n_rot - 1 ? hi : (float)(n_rot - 1);
	}
	return 0;
}

/* Angle and magnitude of pair i at position pos, in double. */
static void angle(const struct hs_rope *r, int32_t pos, int i, double *theta, double *mag)
{
	const double extrap = (double)pos * pow((double)r->freq_base, -2.0 * i / r->n_rot);
	const double interp = r->freq_scale * extrap;

	*theta = interp;
	*mag = r->attn_factor;
	if (r->ext_factor != 0) {
		double span = r->corr_hi - r->corr_lo, y = (i - (double)r->corr_lo) / (span > 0.001 ? span : 0.001);
		double mix = (1 - (y < 0 ? 0 : y > 1 ? 1 : y)) * r->ext_factor;
		*theta = interp * (1 - mix) + extrap * mix;
		*mag *= 1 + 0.1 * log(1.0 / r->freq_scale);
	}
}

void hs__rope_fill(const struct hs_rope *r, int32_t pos, float *cs)
{
	const int h = r->n_rot / 2;
	for (int i = 0; i < h; i++) {
		double theta, mag;
		angle(r, pos, i, &theta, &mag);
		cs[i] = (float)(cos(theta) * mag);
		cs[h + i] = (float)(sin(theta) * mag);
	}
}

void hs__rope_fill_n(const struct hs_rope *r, int n, const int32_t *pos, float *cs, int ith, int nth)
{
	for (int t = ith; t < n; t += nth)
		hs__rope_fill(r, pos[t], cs + (size_t)t * r->n_rot);
}

void hs__rope_apply(const struct hs_dense_ops *dops, int n_rot, float *x, size_t x_stride, int n, int n_head,
		    int head_dim, const float *cs, int ith, int nth)
{
	long lo, hi;

	hs__share((long)n * n_head, ith, nth, &lo, &hi);
	for (long i = lo; i < hi; i++) {
		const size_t t = (size_t)(i / n_head), h = (size_t)(i % n_head);
		dops->rope_row(x + t * x_stride + h * head_dim, n_rot, cs + t * n_rot);
	}
}

void hs__rope_ref(const struct hs_rope *r, float *x, size_t x_stride, int n, int n_head, int head_dim,
		  const int32_t *pos)
{
	const int h2 = r->n_rot / 2;
	for (int t = 0; t < n; t++)
		for (int i = 0; i < h2; i++) {
			double theta, mag;
			angle(r, pos[t], i, &theta, &mag);
			const double c = cos(theta) * mag, s = sin(theta) * mag;
			for (int h = 0; h < n_head; h++) {
				float *p = x + (size_t)t * x_stride + (size_t)h * head_dim;
				const double x0 = p[i], x1 = p[i + h2];
				p[i] = (float)(x0 * c - x1 * s);
				p[i + h2] = (float)(x0 * s + x1 * c);
			}
		}
}

void hs__rope_apply_omp(const struct hs_dense_ops *dops, int n_rot, float *x, size_t x_stride, int n, int n_head,
			int head_dim, const float *cs, int nthreads)
{
#pragma omp parallel num_threads(nthreads > 0 ? nthreads : omp_get_max_threads())
	hs__rope_apply(dops, n_rot, x, x_stride, n, n_head, head_dim, cs, omp_get_thread_num(), omp_get_num_threads());
}

void hs__rope_fill_omp(const struct hs_rope *r, int n, const int32_t *pos, float *cs, int nthreads)
{
#pragma omp parallel num_threads(nthreads > 0 ? nthreads : omp_get_max_threads())
	hs__rope_fill_n(r, n, pos, cs, omp_get_thread_num(), omp_get_num_threads());
}
