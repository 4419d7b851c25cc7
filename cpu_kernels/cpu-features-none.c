/* CPU features on builds without x86 kernels (other CPUs or compilers):
 * nothing is probed and every kernel runs its scalar reference (a tier
 * asked for in HOTSET_CPU_TIER is reported as not available). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/log.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/dense.h"

static struct hs_cpu_features features;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void detect(void)
{
	features.probe.built = 1u << HS_TIER_REF;
	features.probe.amx_perm = 1;
	features.tier = hs__cpu_tier_choose(&features.probe, getenv("HOTSET_CPU_TIER"), getenv("HS_USE_REF"),
					    &features.best, features.note, sizeof features.note);
	/* one line: the tier, and why a faster one was refused or what
	 * HOTSET_CPU_TIER changed */
	hs__log(HS_LOG_INFO, "CPU kernels: %s%s%s (this build has no x86 kernels)", hs__cpu_tier_name(features.tier),
		*features.note ? "; " : "", features.note);
}

const struct hs_cpu_features *hs__cpu_features(void)
{
	pthread_once(&once, detect);
	return &features;
}

int hs__amx_request(void)
{
	return -ENOSYS;
}

int hs__amx_thread_ok(void)
{
	return 0;
}

/* the dense ops' x86 sets are not built either */
const struct hs_dense_ops *hs__dense_avx2(void)
{
	return NULL;
}

const struct hs_dense_ops *hs__dense_avx512(void)
{
	return NULL;
}
