/* CPU feature detection on x86 builds whose compiler produced AVX2 kernels. */
#include "config.h"

#include <cpuid.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/dense.h"

static struct hs_cpu_features features;
static int detected;

const struct hs_cpu_features *hs__cpu_features(void)
{
	/* Detection is idempotent, so a race between two first callers only
	 * writes the same values twice. */
	if (!__atomic_load_n(&detected, __ATOMIC_ACQUIRE)) {
		struct hs_cpu_features f = { 0 };
		const char *ref = getenv("HS_USE_REF");

		__builtin_cpu_init();
		f.avx2 = __builtin_cpu_supports("avx2") != 0;
		f.fma = __builtin_cpu_supports("fma") != 0;
		{
			/* GCC 12's __builtin_cpu_supports has no "f16c": ask CPUID leaf 1. */
			unsigned a, b, c, d;
			f.f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
		}
		f.avx2_built = 1;
		f.use_avx2 = f.avx2 && f.fma && f.f16c && !(ref && strcmp(ref, "1") == 0);
		/* libgcc's check includes the OS saving the ZMM registers (XCR0) */
		f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
			   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
		f.avx512_built = hs__dense_avx512() != NULL;
		f.use_avx512 = f.use_avx2 && f.avx512 && f.avx512_built;
		features = f;
		/* Said once, even when two first callers race. */
		if (!__atomic_exchange_n(&detected, 1, __ATOMIC_ACQ_REL))
			hs__log(HS_LOG_INFO, "CPU kernels: %s%s",
				f.use_avx2                  ? "AVX2 (the CPU has AVX2, FMA and F16C)"
				: f.avx2 && f.fma && f.f16c ? "scalar reference (HS_USE_REF=1)"
							    : "scalar reference (the CPU lacks AVX2, FMA or F16C)",
				f.use_avx512 ? "; dense ops: AVX-512 where it pays" : "");
	}
	return &features;
}
