/* Builds whose compiler has AVX2 but no AVX-512 intrinsics: no AVX-512
 * tier, the AVX2 one runs. */
#include "config.h"

#include <stddef.h>

#include "cpu_kernels/dense.h"

const struct hs_dense_ops *hs__dense_avx512(void)
{
	return NULL;
}
