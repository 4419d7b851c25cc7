/* The AVX-VNNI tier: the 256-bit kernels of kernels-256.h with the VEX
 * vpdpbusd (one instruction for four byte products and their sum into an
 * int32 lane, where AVX2 needs vpmaddubsw + vpmaddwd + vpaddd).  For CPUs
 * with AVX-VNNI but no AVX-512 (and those with both, when asked for with
 * HOTSET_CPU_TIER=avx-vnni). */
#include "config.h"

#include <immintrin.h>

static inline __m256i dpbusd256(__m256i a, __m256i u, __m256i s)
{
	return _mm256_dpbusd_avx_epi32(a, u, s);
}
#define X86_VNNI 1

#include "cpu_kernels/arch/x86/kernels-256.h"

static const struct hs_kernel_ops ops = { "AVX-VNNI", quantize_q8_0_256, tile_q_256, tile_q_packed_256, NULL, 0, 0 };

const struct hs_kernel_ops *hs__kernels_avx_vnni(void)
{
	pthread_once(&table_once, fill_table);
	return &ops;
}
