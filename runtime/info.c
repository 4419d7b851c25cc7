/* Version and build facts, and the public CUDA-presence calls. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

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
static char info[512];

static void make_info(void)
{
	const struct hs_cpu_features *f = hs__cpu_features();
	const struct hs_cpu_probe *p = &f->probe;
	char built[96] = "", has[128] = "";

	for (int t = HS_TIER_AVX2; t < HS_TIER_COUNT; t++)
		if (p->built & (1u << t))
			snprintf(built + strlen(built), sizeof built - strlen(built), " %s", hs__cpu_tier_name(t));
	snprintf(has, sizeof has, "%s%s%s%s%s%s%s%s%s%s", p->avx2 ? " avx2" : "", p->fma ? " fma" : "",
		 p->f16c ? " f16c" : "", p->avx_vnni ? " avx-vnni" : "", p->avx512f ? " avx512f" : "",
		 p->avx512bw ? " avx512bw" : "", p->avx512vl ? " avx512vl" : "", p->avx512vnni ? " avx512-vnni" : "",
		 p->avx512vbmi ? " avx512-vbmi" : "", p->amx_tile && p->amx_int8 ? " amx-tile amx-int8" : "");
	snprintf(info, sizeof info, "hwloc %s; CPU kernels: %s (tiers built:%s; CPU has%s); %s", hs__hwloc_version(),
		 hs__cpu_tier_name(f->tier), *built ? built : " none", *has ? has : " none of them", hs__cuda_build());
}

const char *hs_build_info(void)
{
	pthread_once(&info_once, make_info);
	return info;
}
