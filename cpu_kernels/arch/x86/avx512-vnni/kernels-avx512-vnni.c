/* The AVX-512 VNNI tier (AVX-512 F, BW, VL, VNNI).  Row-interleaved expert
 * tiles run on 512-bit registers: one load is a whole 16-row unit (16 rows
 * x 4 bytes, repack.h), one vpdpbusd multiplies it with 4 activation bytes
 * broadcast from memory, so a 16-row block group costs 4 (MXFP4) or 8
 * (Q8_0) loads and as many vpdpbusd per token pair of lanes, and one
 * vcvtdq2ps + vscalefps/vmulps + vfmadd for the block's scale.  Up to 8
 * tokens share each decoded weight register (prefill).  Plain-row tiles and
 * quantization are the 256-bit kernels with the EVEX vpdpbusd. */
#include "config.h"

#include <immintrin.h>

#include "cpu_kernels/arch/x86/avx512-vnni/avx512.h"

static inline __m256i dpbusd256(__m256i a, __m256i u, __m256i s)
{
	return _mm256_dpbusd_epi32(a, u, s);
}
#define X86_VNNI 1

#include "cpu_kernels/arch/x86/kernels-256.h"

#define TOKENS 8 /* tokens per pass over a group */

/* A 16-row group against NT (1..8) tokens over nb block groups.  Two int32
 * chains per token while registers allow (NT <= 4), so the dependent
 * vpdpbusd of one block form two chains of four.  MXFP4: units decoded
 * (value + 12), low nibbles with the token's bytes 4u.., high ones with
 * 16 + 4u..; Q8_0: units as w + 128 (xor 0x80). */
static inline __attribute__((always_inline)) void packed_512(int type, const uint8_t *g, int nb,
							      const struct hs_block_q8_0 *const *x, const float *dx,
							      const int32_t *corr, int NT, float *const *out, int col)
{
	const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)plus12));
	const __m512i m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
	const size_t gbb = HS_PACK_ROWS * hs__type_block_bytes(type);
	__m512 acc[TOKENS];

	_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++)
		acc[j] = _mm512_setzero_ps();
	for (int b = 0; b < nb; b++) {
		const uint8_t *bg = g + (size_t)b * gbb;
		__m512i a0[TOKENS], a1[TOKENS];
		__m512 ws;
		_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
			a0[j] = _mm512_set1_epi32(corr[j * nb + b]);
			a1[j] = _mm512_setzero_si512();
		}
		if (type == HS_TYPE_MXFP4) {
			_Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
				__m512i v = _mm512_loadu_si512((const void *)(bg + 16 + 64 * u));
				__m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
				__m512i hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
				_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
					const uint8_t *xq = (const uint8_t *)x[j][b].qs;
					__m512i xh = _mm512_set1_epi32(load32(xq + 16 + 4 * u));
					a0[j] = _mm512_dpbusd_epi32(a0[j], lo, _mm512_set1_epi32(load32(xq + 4 * u)));
					if (NT <= 4)
						a1[j] = _mm512_dpbusd_epi32(a1[j], hi, xh);
					else
						a0[j] = _mm512_dpbusd_epi32(a0[j], hi, xh);
				}
			}
			/* e - 128 as float: vscalefps then makes 2^(e - 128) * dx exactly */
			ws = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)bg))),
					   _mm512_set1_ps(128.0f));
		} else {
			_Pragma("GCC unroll 8") for (int u = 0; u < 8; u++) {
				__m512i w = _mm512_xor_si512(_mm512_loadu_si512((const void *)(bg + 32 + 64 * u)), flip);
				_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
					__m512i xb = _mm512_set1_epi32(load32((const uint8_t *)x[j][b].qs + 4 * u));
					if (NT <= 4 && (u & 1))
						a1[j] = _mm512_dpbusd_epi32(a1[j], w, xb);
					else
						a0[j] = _mm512_dpbusd_epi32(a0[j], w, xb);
				}
			}
			ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)bg));
		}
		_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
			const __m512i s = NT <= 4 ? _mm512_add_epi32(a0[j], a1[j]) : a0[j];
			const __m512 d = _mm512_set1_ps(dx[j * nb + b]);
			const __m512 sc = type == HS_TYPE_MXFP4 ? _mm512_scalef_ps(d, ws) : _mm512_mul_ps(ws, d);
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[j]);
		}
	}
	_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++)
		_mm512_storeu_ps(out[j] + col, acc[j]);
}

#define PACKED_512(NT)                                                                                        \
	do {                                                                                                  \
		for (int g = r0 / HS_PACK_ROWS; g < r1 / HS_PACK_ROWS; g++) {                               \
			const uint8_t *gp = w + (size_t)g * gstride;                                          \
			if (type == HS_TYPE_MXFP4)                                                              \
				packed_512(HS_TYPE_MXFP4, gp, nb, x + j0, dx, corr, NT, out + j0, g * HS_PACK_ROWS - r0); \
			else                                                                                    \
				packed_512(HS_TYPE_Q8_0, gp, nb, x + j0, dx, corr, NT, out + j0, g * HS_PACK_ROWS - r0); \
		}                                                                                               \
	} while (0)

void hs__avx512_tile_q_packed(int type, const uint8_t *w, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK;
	const size_t gstride = HS_PACK_ROWS * hs__type_row_bytes(type, (uint64_t)ncols);
	/* TOKENS tokens' scales and corrections: at most 128 KiB */
	float dx[TOKENS * nb];
	int32_t corr[TOKENS * nb];

	for (int j0 = 0; j0 < nt; j0 += TOKENS) {
		int jn = nt - j0 < TOKENS ? nt - j0 : TOKENS;
		prepare_tokens(packed_offset(type), x + j0, jn, nb, dx, corr);
		switch (jn) {
		case 8: PACKED_512(8); break;
		case 7: PACKED_512(7); break;
		case 6: PACKED_512(6); break;
		case 5: PACKED_512(5); break;
		case 4: PACKED_512(4); break;
		case 3: PACKED_512(3); break;
		case 2: PACKED_512(2); break;
		default: PACKED_512(1); break;
		}
	}
}

static const struct hs_kernel_ops ops = { "AVX-512 VNNI", quantize_q8_0_256, tile_q_256, hs__avx512_tile_q_packed };

const struct hs_kernel_ops *hs__kernels_avx512_vnni(void)
{
	pthread_once(&table_once, fill_table);
	return &ops;
}
