/* AVX-512 (F, BW, VL, DQ) tier of the dense ops: the float matrix tile,
 * where Zen 5's full-width FMA units double the prefill rate and masked
 * loads take the column tails.  The other entries are the AVX2 set's.
 * Compiled with those flags in a file of its own and used only when CPUID
 * and the OS say the CPU runs them (hs__dense_best()). */
#include "config.h"

#include <immintrin.h>
#include <pthread.h>

#include "cpu_kernels/dense.h"

/* 16 values of a row at column c, the first `keep` of them (mask) loaded
 * and the rest zero; type is a constant at each call. */
static inline __m512 load16(int type, const uint8_t *row, int c, __mmask16 keep)
{
	if (type == HS_TYPE_F16)
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(keep, row + 2 * (size_t)c));
	if (type == HS_TYPE_BF16)
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(keep, row + 2 * (size_t)c)), 16));
	return _mm512_maskz_loadu_ps(keep, (const float *)(const void *)row + c);
}

/* NR rows (1..4) against NT tokens (1..4): up to 16 accumulators of 16
 * lanes, in registers. */
static inline __attribute__((always_inline)) void rows_tokens(int type, const uint8_t *w, size_t rb, int NR,
							       int ncols, const float *const *x, int NT,
							       float *const *out, int col)
{
	__m512 acc[4][4];
	int c = 0;

	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			acc[i][j] = _mm512_setzero_ps();
	for (; c < ncols; c += 16) {
		const __mmask16 keep = ncols - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ncols - c)) - 1);
		__m512 wv[4];
		_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
			wv[i] = load16(type, w + i * rb, c, keep);
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			__m512 xv = _mm512_maskz_loadu_ps(keep, x[j] + c);
			_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
				acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
		}
	}
	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			out[j][col + i] = _mm512_reduce_add_ps(acc[i][j]);
}

/* One row against one token (decode): four accumulators over 64 columns
 * a step, so the row is one sequential stream for the prefetchers. */
static inline __attribute__((always_inline)) float row_dot(int type, const uint8_t *w, int ncols, const float *x)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	int c = 0;

	for (; c + 64 <= ncols; c += 64) {
		a0 = _mm512_fmadd_ps(load16(type, w, c, 0xffff), _mm512_loadu_ps(x + c), a0);
		a1 = _mm512_fmadd_ps(load16(type, w, c + 16, 0xffff), _mm512_loadu_ps(x + c + 16), a1);
		a2 = _mm512_fmadd_ps(load16(type, w, c + 32, 0xffff), _mm512_loadu_ps(x + c + 32), a2);
		a3 = _mm512_fmadd_ps(load16(type, w, c + 48, 0xffff), _mm512_loadu_ps(x + c + 48), a3);
	}
	for (; c < ncols; c += 16) {
		const __mmask16 keep = ncols - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ncols - c)) - 1);
		a0 = _mm512_fmadd_ps(load16(type, w, c, keep), _mm512_maskz_loadu_ps(keep, x + c), a0);
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

#define TILE_ROWS 4
#define TILE_F tile_f_avx512
#include "cpu_kernels/arch/x86/dense-tile.h"

static struct hs_dense_ops avx512_ops;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
	avx512_ops = *hs__dense_avx2();
	avx512_ops.name = "AVX-512";
	avx512_ops.tile_f = tile_f_avx512;
}

const struct hs_dense_ops *hs__dense_avx512(void)
{
	pthread_once(&once, init);
	return &avx512_ops;
}
