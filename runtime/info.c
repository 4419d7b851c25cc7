/* Version and build facts, and the public CUDA-presence calls. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>

#include "hotset.h"
#include "cpu_kernels/cpu-features.h"
#include "topology/cuda-probe.h"
#include "topology/topology.h"

const char *hs_version(void)
{
	return PACKAGE_VERSION;
}

int hs_cuda_device_count(void)
{
	return hs__cuda_probe();
}

const char *hs_cuda_status(void)
{
	return hs__cuda_probe_status();
}

static pthread_once_t info_once = PTHREAD_ONCE_INIT;
static char info[256];

static void make_info(void)
{
	const struct hs_cpu_features *f = hs__cpu_features();

	snprintf(info, sizeof info, "hwloc %s; AVX2 kernels: %s, CPU has%s%s%s%s, using %s; %s",
		 hs__hwloc_version(), f->avx2_built ? "built" : "not built",
		 f->avx2 ? " avx2" : "", f->fma ? " fma" : "", f->f16c ? " f16c" : "",
		 f->avx2 || f->fma || f->f16c ? "" : " none of avx2 fma f16c",
		 f->use_avx2 ? "AVX2" : "scalar reference", hs__cuda_build());
}

const char *hs_build_info(void)
{
	pthread_once(&info_once, make_info);
	return info;
}
