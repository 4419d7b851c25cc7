/* Stands in for the AVX-VNNI tier in builds whose compiler could not produce
 * it (or that are not for x86): the tier is then never chosen. */
#include "config.h"

#include <stddef.h>

#include "cpu_kernels/kernels.h"

const struct hs_kernel_ops *hs__kernels_avx_vnni(void)
{
	return NULL;
}
