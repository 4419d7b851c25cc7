/* Gated DeltaNet's convolution and delta rule (deltanet.h): float forms
 * for one token at a time and for chunks, and the double twin. */
#include "config.h"

#include <math.h>

#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/dense.h"

static inline float silu_f(float x)
{
	return x / (1.0f + expf(-x));
}

void hs__dn_conv(const float *w, int C, int kc, float *state, int n, const float *x, size_t x_stride, float *y,
		 size_t y_stride, int ith, int nth)
{
	long lo, hi;
	hs__share(C, ith, nth, &lo, &hi);
	for (long c = lo; c < hi; c++) {
		const float *wc = w + (size_t)c * kc;
		for (int t = 0; t < n; t++) {
			float s = 0;
			for (int j = 0; j < kc; j++) {
				int tau = t - kc + 1 + j; /* input time; < 0: the state */
				s += wc[j] * (tau < 0 ? state[(size_t)(kc - 1 + tau) * C + c] : x[(size_t)tau * x_stride + c]);
			}
			y[(size_t)t * y_stride + c] = silu_f(s);
		}
		/* the last kc-1 inputs, oldest first */
		for (int j = 0; j < kc - 1; j++) {
			int tau = n - (kc - 1) + j;
			state[(size_t)j * C + c] = tau < 0 ? state[(size_t)(kc - 1 + tau) * C + c] : x[(size_t)tau * x_stride + c];
		}
	}
}

void hs__dn_conv_ref(const float *w, int C, int kc, float *state, int n, const float *x, size_t x_stride, float *y,
		     size_t y_stride)
{
	for (int c = 0; c < C; c++) {
		const float *wc = w + (size_t)c * kc;
		for (int t = 0; t < n; t++) {
			double s = 0;
			for (int j = 0; j < kc; j++) {
				int tau = t - kc + 1 + j;
				s += (double)wc[j] *
				     (tau < 0 ? state[(size_t)(kc - 1 + tau) * C + c] : x[(size_t)tau * x_stride + c]);
			}
			y[(size_t)t * y_stride + c] = (float)(s / (1.0 + exp(-s)));
		}
		for (int j = 0; j < kc - 1; j++) {
			int tau = n - (kc - 1) + j;
			state[(size_t)j * C + c] = tau < 0 ? state[(size_t)(kc - 1 + tau) * C + c] : x[(size_t)tau * x_stride + c];
		}
	}
}

static double softplus(double x)
{
	return x > 20 ? x : log1p(exp(x)); /* ggml's threshold */
}

void hs__dn_prep(float *x, size_t x_stride, int n_k, int dh, const float *alpha, const float *beta,
		 const float *dt_bias, const float *a, int n_v, float eps, float *g, float *b, long t0, long t1)
{
	for (long t = t0; t < t1; t++) {
		float *row = x + (size_t)t * x_stride;
		for (int h = 0; h < 2 * n_k; h++) { /* q heads, then k heads */
			float *v = row + (size_t)h * dh;
			double s = 0;
			for (int i = 0; i < dh; i++)
				s += (double)v[i] * v[i];
			const double r = sqrt(s), scale = 1.0 / (r > eps ? r : eps);
			for (int i = 0; i < dh; i++)
				v[i] = (float)(v[i] * scale);
		}
		const size_t o = (size_t)t * n_v;
		for (int h = 0; h < n_v; h++) {
			g[o + h] = (float)(softplus((double)alpha[o + h] + dt_bias[h]) * a[h]);
			b[o + h] = (float)(1.0 / (1.0 + exp(-(double)beta[o + h])));
		}
	}
}

void hs__dn_gnorm(float *o, const float *z, int dh, const float *w, float eps, long r0, long r1)
{
	for (long r = r0; r < r1; r++) {
		float *x = o + (size_t)r * dh;
		const float *zr = z + (size_t)r * dh;
		double s = 0;
		for (int i = 0; i < dh; i++)
			s += (double)x[i] * x[i];
		const double inv = 1.0 / sqrt(s / dh + eps);
		for (int i = 0; i < dh; i++) {
			const double zi = zr[i];
			x[i] = (float)(x[i] * inv * w[i] * (zi / (1.0 + exp(-zi))));
		}
	}
}

static inline float dot_f(const float *a, const float *b, int n)
{
	float s = 0;
	for (int i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

size_t hs__dn_scratch_floats(int dv)
{
	const size_t L = HS_DN_CHUNK;
	return 2 * L * L + 3 * L * (size_t)dv + 2 * L;
}

void hs__dn_step(const struct hs_dn_job *j, int ith, int nth)
{
	const int dk = j->dk, dv = j->dv;
	long lo, hi;
	hs__share(j->n_v_heads, ith, nth, &lo, &hi);
	for (long h = lo; h < hi; h++) {
		float *S = j->state + (size_t)h * dv * dk;
		const long kh = h % j->n_k_heads;
		for (int t = 0; t < j->n; t++) {
			const float *q = j->q + t * j->qk_stride + kh * dk, *k = j->k + t * j->qk_stride + kh * dk;
			const float *v = j->v + t * j->v_stride + h * dv;
			const float a = expf(j->g[(size_t)t * j->n_v_heads + h]), b = j->beta[(size_t)t * j->n_v_heads + h];
			float *o = j->out + t * j->out_stride + h * dv;
			/* each row of S is its own recurrence */
			for (int i = 0; i < dv; i++) {
				float *Si = S + (size_t)i * dk;
				float kv = 0;
				for (int c = 0; c < dk; c++) {
					Si[c] *= a;
					kv += Si[c] * k[c];
				}
				const float u = b * (v[i] - kv);
				float oq = 0;
				for (int c = 0; c < dk; c++) {
					Si[c] += u * k[c];
					oq += Si[c] * q[c];
				}
				o[i] = j->scale * oq;
			}
		}
	}
}

void hs__dn_chunk(const struct hs_dn_job *j, int ith, int nth)
{
	hs__dense_best()->dn_chunk(j, ith, nth);
}

/* the portable chunk form's inner loops (deltanet-chunk.h) */
static inline float dn_dot(const float *a, const float *b, int n)
{
	return dot_f(a, b, n);
}

static inline void dn_axpy(float *y, float a, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		y[i] += a * x[i];
}

static inline void dn_scal(float *y, float a, int n)
{
	for (int i = 0; i < n; i++)
		y[i] *= a;
}

static inline void dn_s0_row(const float *Si, const float *k, const float *q, size_t stride, int m, int dk, float *W,
			     float *WQ, int dv)
{
	for (int t = 0; t < m; t++) {
		W[(size_t)t * dv] = dot_f(Si, k + (size_t)t * stride, dk);
		WQ[(size_t)t * dv] = dot_f(Si, q + (size_t)t * stride, dk);
	}
}

static inline void dn_state_row(float *Si, float eL, const float *c, size_t c_stride, const float *k, size_t stride,
				int m, int dk)
{
	dn_scal(Si, eL, dk);
	for (int s = 0; s < m; s++)
		dn_axpy(Si, c[(size_t)s * c_stride], k + (size_t)s * stride, dk);
}

#define DN_CHUNK hs__dn_chunk_c
#include "cpu_kernels/deltanet-chunk.h"

void hs__dn_ref(const struct hs_dn_job *j)
{
	const int dk = j->dk, dv = j->dv;
	for (int h = 0; h < j->n_v_heads; h++) {
		float *S = j->state + (size_t)h * dv * dk;
		const int kh = h % j->n_k_heads;
		for (int i = 0; i < dv; i++) {
			double Si[1024];
			float *Sf = S + (size_t)i * dk;
			for (int c = 0; c < dk; c++)
				Si[c] = Sf[c];
			for (int t = 0; t < j->n; t++) {
				const float *q = j->q + t * j->qk_stride + kh * dk, *k = j->k + t * j->qk_stride + kh * dk;
				const double a = exp((double)j->g[(size_t)t * j->n_v_heads + h]),
					     b = j->beta[(size_t)t * j->n_v_heads + h];
				double kv = 0, oq = 0;
				for (int c = 0; c < dk; c++) {
					Si[c] *= a;
					kv += Si[c] * k[c];
				}
				const double u = b * (j->v[t * j->v_stride + (size_t)h * dv + i] - kv);
				for (int c = 0; c < dk; c++) {
					Si[c] += u * k[c];
					oq += Si[c] * q[c];
				}
				j->out[t * j->out_stride + (size_t)h * dv + i] = (float)(j->scale * oq);
			}
			for (int c = 0; c < dk; c++)
				Sf[c] = (float)Si[c];
		}
	}
}
