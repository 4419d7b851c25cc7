/* Gated DeltaNet's chunked delta rule (deltanet.h) with AVX2 FMA: the
 * steps of the portable form (both are cpu_kernels/deltanet-chunk.h) with
 * the inner loops as 8-wide FMA loops, so that a Qwen3.5 prefill does not
 * wait on the compiler's scalar dot products (it may not reorder their
 * sums).  Only the order of the float additions differs.  Register
 * blocking where data is reused: S0 k_t and S0 q_t take one row of S
 * against 4 tokens' keys and queries (8 sums per load of S); the state
 * update keeps 64 values of a row of S in registers over the chunk. */
#include "config.h"

#include <immintrin.h>
#include <math.h>

#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/dense.h"

static inline float hsum8(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

static inline float dn_dot(const float *a, const float *b, int n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
	int c = 0;
	for (; c + 16 <= n; c += 16) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + c + 8), _mm256_loadu_ps(b + c + 8), s1);
	}
	for (; c + 8 <= n; c += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + c), _mm256_loadu_ps(b + c), s0);
	float s = hsum8(_mm256_add_ps(s0, s1));
	for (; c < n; c++)
		s += a[c] * b[c];
	return s;
}

/* y += a x over n values */
static inline void dn_axpy(float *y, float a, const float *x, int n)
{
	const __m256 av = _mm256_set1_ps(a);
	int c = 0;
	for (; c + 8 <= n; c += 8)
		_mm256_storeu_ps(y + c, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + c), _mm256_loadu_ps(y + c)));
	for (; c < n; c++)
		y[c] += a * x[c];
}

/* y = a y over n values */
static inline void dn_scal(float *y, float a, int n)
{
	const __m256 av = _mm256_set1_ps(a);
	int c = 0;
	for (; c + 8 <= n; c += 8)
		_mm256_storeu_ps(y + c, _mm256_mul_ps(av, _mm256_loadu_ps(y + c)));
	for (; c < n; c++)
		y[c] *= a;
}

/* W[t dv] = Si . k_t and WQ[t dv] = Si . q_t, 4 tokens at a time: 8 sums
 * per load of Si */
static inline void dn_s0_row(const float *Si, const float *k, const float *q, size_t stride, int m, int dk, float *W,
			     float *WQ, int dv)
{
	int t = 0;
	for (; t + 4 <= m; t += 4) {
		const float *kt = k + (size_t)t * stride, *qt = q + (size_t)t * stride;
		__m256 ak[4], aq[4];
		for (int u = 0; u < 4; u++)
			ak[u] = aq[u] = _mm256_setzero_ps();
		int c = 0;
		for (; c + 8 <= dk; c += 8) {
			const __m256 s = _mm256_loadu_ps(Si + c);
			for (int u = 0; u < 4; u++) {
				ak[u] = _mm256_fmadd_ps(s, _mm256_loadu_ps(kt + (size_t)u * stride + c), ak[u]);
				aq[u] = _mm256_fmadd_ps(s, _mm256_loadu_ps(qt + (size_t)u * stride + c), aq[u]);
			}
		}
		for (int u = 0; u < 4; u++) {
			float sk = hsum8(ak[u]), sq = hsum8(aq[u]);
			for (int cc = c; cc < dk; cc++)
				sk += Si[cc] * kt[(size_t)u * stride + cc], sq += Si[cc] * qt[(size_t)u * stride + cc];
			W[(size_t)(t + u) * dv] = sk, WQ[(size_t)(t + u) * dv] = sq;
		}
	}
	for (; t < m; t++) {
		W[(size_t)t * dv] = dn_dot(Si, k + (size_t)t * stride, dk);
		WQ[(size_t)t * dv] = dn_dot(Si, q + (size_t)t * stride, dk);
	}
}

/* Si = eL Si + sum_s c_s k_s: 64 values of the row in registers over the
 * chunk's tokens */
static inline void dn_state_row(float *Si, float eL, const float *c, size_t c_stride, const float *k, size_t stride,
				int m, int dk)
{
	int x = 0;
	for (; x + 64 <= dk; x += 64) {
		__m256 a[8];
		for (int r = 0; r < 8; r++)
			a[r] = _mm256_mul_ps(_mm256_set1_ps(eL), _mm256_loadu_ps(Si + x + 8 * r));
		for (int s = 0; s < m; s++) {
			const __m256 cf = _mm256_set1_ps(c[(size_t)s * c_stride]);
			const float *ks = k + (size_t)s * stride + x;
			for (int r = 0; r < 8; r++)
				a[r] = _mm256_fmadd_ps(cf, _mm256_loadu_ps(ks + 8 * r), a[r]);
		}
		for (int r = 0; r < 8; r++)
			_mm256_storeu_ps(Si + x + 8 * r, a[r]);
	}
	if (x < dk) { /* the rest of the row (dk not a multiple of 64) */
		dn_scal(Si + x, eL, dk - x);
		for (int s = 0; s < m; s++)
			dn_axpy(Si + x, c[(size_t)s * c_stride], k + (size_t)s * stride + x, dk - x);
	}
}

#define DN_CHUNK hs__dn_chunk_avx2
#include "cpu_kernels/deltanet-chunk.h"
