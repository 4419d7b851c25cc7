/* What the CPU offers and which kernel variants this build carries.  The
 * choice between a scalar reference and an AVX2 kernel is made at run time
 * from these flags (and HS_USE_REF=1 forces the reference). */
#ifndef HS_CPU_FEATURES_H
#define HS_CPU_FEATURES_H

struct hs_cpu_features {
	int avx2, fma, f16c;   /* the CPU has them */
	int avx2_built;        /* this build carries AVX2 kernels */
	int use_avx2;          /* all of the above, and HS_USE_REF is not set */
};

/* Detected once, then cached; never fails. */
const struct hs_cpu_features *hs__cpu_features(void);

#endif
