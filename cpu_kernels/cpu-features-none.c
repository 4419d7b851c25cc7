/* CPU features on builds without AVX2 kernels (other CPUs or compilers):
 * every kernel runs its scalar reference. */
#include "config.h"

#include "cpu_kernels/cpu-features.h"

static const struct hs_cpu_features none = { 0, 0, 0, 0, 0 };

const struct hs_cpu_features *hs__cpu_features(void)
{
	return &none;
}

#include "cpu_kernels/kernels.h"

const struct hs_kernel_ops *hs__kernels_avx2(void)
{
	return NULL;
}
