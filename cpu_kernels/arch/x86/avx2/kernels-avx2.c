/* The AVX2 tier (AVX2 + FMA + F16C), the floor of the x86 tiers: the
 * 256-bit kernels of kernels-256.h with vpmaddubsw + vpmaddwd for the byte
 * dots.  Compiled with those flags in a file of its own and used only when
 * CPUID says the CPU has them (cpu-features.h). */
#include "config.h"

#include <immintrin.h>

/* valid while no pair of byte products passes int16 (kernels-256.h keeps
 * that) */
static inline __m256i dpbusd256(__m256i a, __m256i u, __m256i s)
{
	return _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}
#define X86_VNNI 0

#include "cpu_kernels/arch/x86/kernels-256.h"

static const struct hs_kernel_ops ops = { "AVX2", quantize_q8_0_256, tile_q_256, tile_q_packed_256, NULL, 0, 0 };

const struct hs_kernel_ops *hs__kernels_avx2(void)
{
	pthread_once(&table_once, fill_table);
	return &ops;
}
