/* CPU feature detection on x86 builds: CPUID, XGETBV and the kernel's AMX
 * permission, read once; the tier is chosen by cpu-tier.c. */
#include "config.h"

#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/dense.h"
#include "cpu_kernels/kernels.h"

#define ARCH_GET_XCOMP_PERM_ 0x1022 /* asm/prctl.h, spelled out for older headers */
#define ARCH_REQ_XCOMP_PERM_ 0x1023
#define XFEATURE_XTILEDATA 18

static struct hs_cpu_features features;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static unsigned long long xgetbv0(void)
{
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (unsigned long long)hi << 32 | lo;
}

int hs__amx_request(void)
{
#ifdef SYS_arch_prctl
	unsigned long granted = 0;

	if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA) != 0)
		return -errno;
	if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM_, &granted) != 0)
		return -errno;
	return granted & (1ul << XFEATURE_XTILEDATA) ? 0 : -EPERM;
#else
	return -ENOSYS;
#endif
}

static void probe(struct hs_cpu_probe *p)
{
	unsigned a, b, c, d;

	memset(p, 0, sizeof *p);
	if (__get_cpuid(0, &a, &b, &c, &d))
		p->amd = b == 0x68747541 && d == 0x69746e65 && c == 0x444d4163; /* "Auth" "enti" "cAMD" */
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return;
	const int base_family = (int)((a >> 8) & 0xf);
	p->family = base_family + (base_family == 0xf ? (int)((a >> 20) & 0xff) : 0);
	p->fma = (c >> 12) & 1;
	p->f16c = (c >> 29) & 1;
	if ((c >> 27) & 1) /* OSXSAVE: XGETBV may be used */
		p->xcr0 = xgetbv0();
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		p->avx2 = (b >> 5) & 1;
		p->avx512f = (b >> 16) & 1;
		p->avx512bw = (b >> 30) & 1;
		p->avx512vl = (b >> 31) & 1;
		p->avx512dq = (b >> 17) & 1;
		p->avx512vnni = (c >> 11) & 1;
		p->avx512vbmi = (c >> 1) & 1;
		p->amx_tile = (d >> 24) & 1;
		p->amx_int8 = (d >> 25) & 1;
		if (a >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d))
			p->avx_vnni = (a >> 4) & 1;
	}
	/* ask for the tile data state only where it could be granted */
	p->amx_perm = p->amx_tile && p->amx_int8 && (p->xcr0 & 0x60000) == 0x60000 ? hs__amx_request() : 1;
	p->built = 1u << HS_TIER_REF | (hs__kernels_avx2() ? 1u << HS_TIER_AVX2 : 0) |
		   (hs__kernels_avx_vnni() ? 1u << HS_TIER_AVX_VNNI : 0) |
		   (hs__kernels_avx512_vnni() ? 1u << HS_TIER_AVX512_VNNI : 0) | (hs__kernels_amx() ? 1u << HS_TIER_AMX : 0);
}

static void detect(void)
{
	probe(&features.probe);
	features.tier = hs__cpu_tier_choose(&features.probe, getenv("HOTSET_CPU_TIER"), getenv("HS_USE_REF"),
					    &features.best, features.note, sizeof features.note);
	/* the dense ops' AVX-512 set needs F/BW/VL/DQ, not VNNI: it runs on
	 * such CPUs (Skylake-X) too, unless HOTSET_CPU_TIER asked for a tier
	 * below AVX-512 */
	const struct hs_cpu_probe *p = &features.probe;
	const int dense512 = p->avx512f && p->avx512bw && p->avx512vl && p->avx512dq && (p->xcr0 & 0xe6) == 0xe6;
	features.avx512_built = hs__dense_avx512() != NULL;
	hs__prefetch_ahead = p->amd ? p->family == 0x19 ? 4096 : 8192 : 16384;
	hs__prefetch_l2 = !p->amd;
	hs__prefetch_near = hs__prefetch_l2 ? 512 : 0;
	features.use_avx2 = features.tier >= HS_TIER_AVX2;
	features.use_avx512 = features.use_avx2 && dense512 && features.avx512_built &&
			      (features.tier == features.best || features.tier >= HS_TIER_AVX512_VNNI);
	/* one line: the tier, and why a faster one was refused or what
	 * HOTSET_CPU_TIER changed */
	char l2[64] = "";
	if (hs__prefetch_l2)
		snprintf(l2, sizeof l2, " (512-bit: into L2, %zu KiB ahead)", hs__prefetch_ahead_l2 >> 10);
	hs__log(HS_LOG_INFO, "CPU kernels: %s%s%s; dense ops: %s; decode prefetch %zu KiB ahead%s",
		hs__cpu_tier_name(features.tier), *features.note ? "; " : "", features.note,
		features.use_avx512 ? "AVX-512 where it pays" : features.use_avx2 ? "AVX2" : "scalar reference",
		hs__prefetch_ahead >> 10, l2);
}

const struct hs_cpu_features *hs__cpu_features(void)
{
	pthread_once(&once, detect);
	return &features;
}

int hs__amx_thread_ok(void)
{
	/* 0 not asked on this thread, 1 granted, -1 refused */
	static _Thread_local int state;

	if (!state)
		state = hs__cpu_features()->best == HS_TIER_AMX && hs__amx_request() == 0 ? 1 : -1;
	return state == 1;
}
