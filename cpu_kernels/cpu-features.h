/* Which CPU kernel tier runs, decided in one place.
 *
 * Tiers, slowest first: the scalar reference, AVX2 (+FMA, F16C), AVX-VNNI
 * (VEX vpdpbusd on 256-bit registers), AVX-512 VNNI (F, BW, VL, VNNI on
 * 512-bit registers), AMX-INT8 (tiles for prefill, AVX-512 VNNI for the
 * rest).  A tier runs when this build carries it, CPUID says the CPU has
 * it, XGETBV says the OS saves its registers and, for AMX, the kernel
 * granted this process the tile data state (arch_prctl
 * ARCH_REQ_XCOMP_PERM); each AMX thread checks again before its first tile
 * instruction (hs__amx_thread_ok).  HOTSET_CPU_TIER=ref|avx2|avx-vnni|
 * avx512-vnni|amx asks for a lower tier (A/B runs, tests); HS_USE_REF=1
 * forces the reference.  The dense ops' float sets (dense.h: AVX2, AVX-512
 * F/BW/VL/DQ) follow the same choice (use_avx2, use_avx512). */
#ifndef HS_CPU_FEATURES_H
#define HS_CPU_FEATURES_H

#include <stddef.h>

enum hs_cpu_tier {
	HS_TIER_REF,
	HS_TIER_AVX2,
	HS_TIER_AVX_VNNI,
	HS_TIER_AVX512_VNNI,
	HS_TIER_AMX,
	HS_TIER_COUNT
};

/* What CPUID, XGETBV and the kernel said, kept raw so that the choice
 * (hs__cpu_tier_choose) can be tested with made-up machines. */
struct hs_cpu_probe {
	int avx2, fma, f16c, avx_vnni;
	int avx512f, avx512bw, avx512vl, avx512vnni, avx512dq, avx512vbmi;
	int amx_tile, amx_int8;
	int amd;                 /* CPUID's vendor is AuthenticAMD */
	int family;              /* CPUID's family, the extended one added (0x19: Zen 3 and 4) */
	unsigned long long xcr0; /* 0 when the OS does not offer XGETBV */
	int amx_perm;            /* arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA): 0 granted,
				    -errno refused, 1 not asked (no AMX in CPU or XCR0) */
	unsigned built;          /* bit t set: this build carries tier t */
};

struct hs_cpu_features {
	struct hs_cpu_probe probe;
	int tier;        /* the tier that runs */
	int best;        /* the fastest tier this CPU and build could run */
	char note[256];  /* why a faster tier was refused, or a forced one not
			    taken; "" when nothing was (for the CLI's -v) */
	/* the dense ops' sets (dense.h), from the same choice: AVX2 where the
	 * tier is AVX2 or above; AVX-512 (F/BW/VL/DQ, no VNNI needed) where the
	 * CPU, the OS and the build have it, unless HOTSET_CPU_TIER asked for a
	 * tier below AVX-512 VNNI */
	int use_avx2, use_avx512, avx512_built;
};

/* How far ahead of the weights being read the decode kernels prefetch
 * (bytes; kernels-256.h's PREFETCH_AHEAD), set with the features: 4 KiB on
 * AMD family 0x19 (Zen 3, Zen 4), 8 KiB on other AMD, 16 KiB elsewhere
 * (Intel's 512-bit decode prefetches into L2 at hs__prefetch_ahead_l2).
 * Measured: on a Xeon VM (Sapphire Rapids, a core reads 13 GB/s) 16 KiB
 * beat 8 with T0 (MXFP4 decode 0.66 -> 0.78 of read on one core); on a Zen 4 EPYC
 * VM (a core reads 28 GB/s) one thread's decode took 10-21% less time at
 * 4 KiB than at 16 (3-9% less than at 8); Zen 5 had been tuned at 8 KiB. */
extern size_t hs__prefetch_ahead;
/* 1: the packed decode and the 512-bit one-token K-quant rows (AVX-512
 * tier) prefetch into L2 (T1) rather than L1 (T0); set on Intel.  On the Xeon VM one core's MXFP4 decode went from
 * 8.3-9.0 to 9.8-10.0 GB/s and two cores' from 12.3-17.7 to 18.2-19.9
 * (a T0 prefetch holds one of the few L1 fill buffers until its line
 * arrives; the L2 has many more misses in flight).  AMD keeps T0: not
 * measured there.  The 256-bit plain-row decode keeps T0 everywhere: T1
 * moved it -6..+10% by type on the Xeon, nothing clear; the 512-bit rows
 * were no faster than it with T0 and x1.07-1.29 with T1 (docs/kernels.md). */
extern int hs__prefetch_l2;
/* How far ahead the prefetches into L2 go (the 512-bit decode on Intel,
 * where hs__prefetch_l2 is set): 3 KiB, about what one core has in flight
 * at its bandwidth (13-16 GB/s x ~150 ns), not 16 KiB (why farther is
 * slower is a guess: more misses than the L2 can track, so some prefetches
 * are dropped and their lines come late, on demand).  On the Xeon VM,
 * one product streaming 1 GiB of packed MXFP4: 1 KiB 0.78 of read, 2 KiB
 * 0.84-0.87, 3 KiB 0.85, 4 KiB 0.85, 16 KiB 0.81-0.83 (1 and 2 threads);
 * bench-kernels' fused FFN at 1 token from DRAM: Q4_K, Q5_K, Q6_K 0.58-0.61
 * -> 0.60-0.67 at 3 KiB; the 24-layer gpt-oss file's decode 0.71-0.77 ->
 * 0.74-0.83 of read at 2 KiB in 6 of 7 alternating pairs (ratios to the
 * old read probe, which read ~15% low; docs/kernels.md). */
extern size_t hs__prefetch_ahead_l2;
/* Where that is set, the 512-bit row-interleaved decode also prefetches
 * this far ahead into L1 (0: not): 512 bytes on Intel.  On the Xeon VM
 * one core's MXFP4 decode of 1 GiB went from 0.79-0.80 to 0.82 of the read
 * probe (256 to 1024 bytes alike; with packed-512.h's VBMI decode 0.84-0.86
 * -> 0.85-0.87): the L2 prefetches bring the lines close, these hide the
 * L2's latency from the loads. */
extern size_t hs__prefetch_near;

/* Detected once, then cached; never fails. */
const struct hs_cpu_features *hs__cpu_features(void);

/* The tier a probe and the environment's values (NULL: unset) give; the
 * fastest available one is stored in *best; note gets one line when a
 * tier the CPU has was refused or the asked-for one could not run, else
 * "".  Pure: no probing, no environment reads. */
int hs__cpu_tier_choose(const struct hs_cpu_probe *p, const char *tier_env, const char *use_ref_env, int *best,
			char *note, size_t note_len);

/* 0 when tier runs on p, else 1 and one line saying why not. */
int hs__cpu_tier_why(const struct hs_cpu_probe *p, int tier, char *why, size_t len);

/* "ref", "avx2", "avx-vnni", "avx512-vnni", "amx" (the names
 * HOTSET_CPU_TIER takes), and back (-1 if unknown). */
const char *hs__cpu_tier_name(int tier);
int hs__cpu_tier_from_name(const char *name);

/* Asks the kernel for the AMX tile data state for this process; 0 when
 * granted, -errno else (-ENOSYS on builds and CPUs without the request). */
int hs__amx_request(void);
/* Whether this thread may run tile instructions: the first call on each
 * thread asks the kernel (hs__amx_request) and checks the granted set;
 * later calls return the cached answer. */
int hs__amx_thread_ok(void);

#endif
