/* CPU features on builds without AVX2 kernels (other CPUs or compilers):
 * every kernel runs its scalar reference. */
#include "config.h"

#include "base/log.h"
#include "cpu_kernels/cpu-features.h"

static const struct hs_cpu_features none = { 0, 0, 0, 0, 0, 0, 0, 0 };

const struct hs_cpu_features *hs__cpu_features(void)
{
	static int said;

	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		hs__log(HS_LOG_INFO, "CPU kernels: scalar reference (this build has no AVX2 kernels)");
	return &none;
}

#include "cpu_kernels/kernels.h"

const struct hs_kernel_ops *hs__kernels_avx2(void)
{
	return NULL;
}

#include "cpu_kernels/dense.h"

const struct hs_dense_ops *hs__dense_avx2(void)
{
	return NULL;
}

const struct hs_dense_ops *hs__dense_avx512(void)
{
	return NULL;
}
