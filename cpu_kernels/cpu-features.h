/* What the CPU offers and which kernel variants this build carries.  The
 * choice between a scalar reference and an AVX2 or AVX-512 kernel is made at
 * run time from these flags (and HS_USE_REF=1 forces the reference). */
#ifndef HS_CPU_FEATURES_H
#define HS_CPU_FEATURES_H

struct hs_cpu_features {
	int avx2, fma, f16c;   /* the CPU has them */
	int avx2_built;        /* this build carries AVX2 kernels */
	int use_avx2;          /* all of the above, and HS_USE_REF is not set */
	int avx512;            /* AVX-512 F, BW, VL and DQ, and the OS saves the ZMM state */
	int avx512_built;      /* this build carries AVX-512 kernels */
	int use_avx512;        /* use_avx2, avx512 and avx512_built */
};

/* Detected once, then cached; never fails. */
const struct hs_cpu_features *hs__cpu_features(void);

#endif
