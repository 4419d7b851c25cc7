/* hotset/moe.h: one MoE layer alone (reference, CPU, device) and expert
 * cache simulation.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_MOE_H
#define HOTSET_MOE_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* Reference MoE forward of one layer (double accumulation; the oracle):
 * x[n][n_embd] -> y[n][n_embd], router, gating, experts and weighted sum
 * (no norm, no residual).  With ids and weights NULL the layer's router
 * chooses; otherwise ids[n][n_used] (-1 = skip, duplicates legal) and
 * weights[n][n_used] are used as given.  -EINVAL bad layer or id, -ENOMEM. */
int hs_moe_ref(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
	       const float *weights, float *y);
/* The same layer on the fastest CPU kernels this machine has (AVX2 with
 * Q8_0 activations; the scalar twins with HS_USE_REF=1), on `threads`
 * OpenMP threads (<= 0: OpenMP's default; at most 4 x the online CPUs).
 * Same arguments and errors as hs_moe_ref(); allocates its scratch per call. */
int hs_moe_forward_cpu(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
		       const float *weights, float *y, int threads);
/* The same layer on a device through the device layer: backend "sim" (the
 * CPU imitating a device), "cuda", or NULL ($HOTSET_DEVICE, else cuda when
 * a device answers, else sim).  Routes on the host, uploads the routed
 * experts (MXFP4 or Q8_0) into device slots, runs quantize + fused FFN
 * there.  desc (may be NULL) receives the device's description, e.g.
 * "sim (8.0 GiB, ...)": output made on the sim device must say so.
 * -ENODEV (no such device), -EINVAL (other expert types), -ENOMEM. */
int hs_moe_forward_device(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
			  const float *weights, float *y, const char *backend, char *desc, size_t desc_len);
/* Name of the kernel set hs_moe_forward_cpu() uses: the tier this CPU runs
 * ("AVX2", "AVX-VNNI", "AVX-512 VNNI", ...; $HOTSET_CPU_TIER can lower it)
 * or "scalar reference". */
const char *hs_cpu_kernels_name(void);

/* The router and gating alone: ids[n][n_used], weights[n][n_used]. */
int hs_moe_route_ref(const hs_model *m, int layer, int n, const float *x, int32_t *ids, float *weights);

/* ---- expert cache policies ------------------------------------------------------ */

enum hs_cache_policy { HS_CACHE_NONE, HS_CACHE_LRU, HS_CACHE_LFU, HS_CACHE_LFRU, HS_CACHE_STATIC, HS_CACHE_BELADY };

struct hs_cache_result {
	long accesses, hits;       /* (token, expert) pairs */
	long admissions;           /* uploads into the cache */
};

/* Replays one layer's routing through a cache of `slots` experts: step s
 * uses the distinct experts experts[off[s] .. off[s + 1]) with pairs[i]
 * (token, expert) pairs each.  Misses are admitted after the step, busiest
 * first, at most admit_cap per step (-1: no cap).  With freq (a routing
 * profile) every policy starts warm with the `slots` experts of largest
 * freq[e], and STATIC keeps them; without, policies start empty (STATIC
 * needs freq).  BELADY is the offline bound from the same start: after each
 * step it keeps the experts needed soonest, even dropping one the step used
 * (the online policies may not), so no policy beats it.  -EINVAL for an expert outside the layer or
 * listed twice in a step. */
int hs_cache_simulate(enum hs_cache_policy p, int n_experts, int slots, int admit_cap, int n_steps, const int *off,
		      const int32_t *experts, const int *pairs, const float *freq, struct hs_cache_result *out);
const char *hs_cache_policy_name(enum hs_cache_policy p);

#endif /* HOTSET_MOE_H */
