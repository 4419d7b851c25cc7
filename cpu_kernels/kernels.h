/* CPU expert kernels: activation quantization, weight-row x activation
 * tiles, masked mul_mat_id and the fused expert FFN of one layer.
 *
 * Threading: every parallel step takes (ith, nth) and touches only its own
 * share, so any pool can run it (the OpenMP drivers below, or the runtime's
 * pinned pthreads later).  Nothing here allocates, creates threads or locks;
 * scratch memory comes from the caller, sized by hs__ffn_scratch_bytes(). */
#ifndef HS_KERNELS_H
#define HS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels/formats.h"
#include "cpu_kernels/moe.h"

/* One implementation of the inner loops: the scalar reference, or one CPU
 * tier (AVX2, AVX-VNNI, AVX-512 VNNI, AMX-INT8; see cpu-features.h). */
struct hs_kernel_ops {
	const char *name;
	/* x[n] -> Q8_0 blocks (n a multiple of 32), round half to even */
	void (*quantize_q8_0)(const float *x, struct hs_block_q8_0 *y, int n);
	/* out[j][r - r0] = row r of w . x[j] for rows [r0, r1), j < nt; plain
	 * ggml rows of ncols values of `type` (any block type: MXFP4, Q8_0, the
	 * K-quants, IQ4_XS/NL, Q4_0..Q5_1), row_bytes apart;
	 * x[j] is a Q8_0 row of ncols values.  The entry point of dense
	 * products and of experts read from the file's layout. */
	void (*tile_q)(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out);
	/* The same for a matrix in the row-interleaved layout (repack.h) that
	 * starts at w; r0 and r1 are multiples of HS_PACK_ROWS (16). */
	void (*tile_q_packed)(int type, const uint8_t *w, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out);
	/* Or NULL: x[n] -> Q8_0 blocks whose 8 blocks of every 256 values
	 * share one scale, the largest |x| of the 256 over 127 (ggml's Q8_K
	 * rounding; a tail short of 256 per block).  For the weight types in
	 * q8_k_types (bit 1 << type), whose tiles on this tier take a token's
	 * scale once per super-block where the 8 blocks' scales are equal
	 * (they check: any Q8_0 input gives the right product). */
	void (*quantize_q8_k)(const float *x, struct hs_block_q8_0 *y, int n);
	unsigned q8_k_types;
	/* Super-block types (bit 1 << type) whose tile_q_packed reads the
	 * row-interleaved layout at full speed, so that the host copy takes
	 * that layout for them on this tier (repack.h); every tier's
	 * tile_q_packed still reads any packed type right. */
	unsigned packed_types;
};

typedef void (*hs__tile_fn)(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			    const struct hs_block_q8_0 *const *x, int nt, float *const *out);
/* tile_q_packed through a plain-row tile: rows r0..r1 (whole groups) of a
 * packed matrix gathered back into plain rows on the stack, about 128 KiB
 * at a time, and handed to `plain`.  For the cases a tier's packed kernel
 * does not take itself (many tokens, where the gather is small beside the
 * products; a type it has no packed loop for). */
void hs__packed_tile_plain(hs__tile_fn plain, int type, const uint8_t *w, int r0, int r1, int ncols,
			   const struct hs_block_q8_0 *const *x, int nt, float *const *out);

/* Whether ops quantize activations for `type` weights with quantize_q8_k */
static inline int hs__q8_k_for(const struct hs_kernel_ops *ops, int type)
{
	return ops->quantize_q8_k && type >= 0 && type < 32 && (ops->q8_k_types >> type & 1u);
}

/* x[n] quantized for products with `type` weights on ops' tier */
static inline void hs__quantize_for(const struct hs_kernel_ops *ops, int type, const float *x, struct hs_block_q8_0 *y,
				    int n)
{
	if (hs__q8_k_for(ops, type))
		ops->quantize_q8_k(x, y, n);
	else
		ops->quantize_q8_0(x, y, n);
}

extern const struct hs_kernel_ops hs__kernels_ref;
/* Each tier's set, or NULL in a build whose compiler could not produce it
 * (the CPU may still lack it: hs__kernels_best() decides). */
const struct hs_kernel_ops *hs__kernels_avx2(void);
const struct hs_kernel_ops *hs__kernels_avx_vnni(void);
const struct hs_kernel_ops *hs__kernels_avx512_vnni(void);
const struct hs_kernel_ops *hs__kernels_amx(void);
/* The set of the tier this CPU runs (cpu-features.h: the fastest it offers,
 * or a lower one asked for by HOTSET_CPU_TIER; the reference with
 * HS_USE_REF=1). */
const struct hs_kernel_ops *hs__kernels_best(void);
/* The set of a given tier if this build has it and this CPU runs it, else
 * NULL (for A/B tests and benchmarks of every tier). */
const struct hs_kernel_ops *hs__kernels_tier(int tier);

/* Weight types the quantized (Q8_0 activation) path takes: every block
 * type; others (F16, BF16, F32) take a float path that dequantizes rows.
 * Q8_0 activations (a scale per 32 values) for the K-quants too, where
 * ggml rounds them to Q8_K (a scale per 256), but for the types a tier
 * names in q8_k_types (the AVX-512 VNNI and AMX tiers' Q4_K, Q5_K and Q6_K), which get ggml's scale per
 * 256: never less accurate than ggml. */
int hs__kernel_type_quantized(int type);
/* The scalar twin of quantize_q8_k */
void hs__quantize_q8_k_ref(const float *x, struct hs_block_q8_0 *y, int n);
/* The reference dot of one plain row of ncols values with a Q8_0 row (the
 * definition tile_q's fast versions are tested against). */
float hs__dot_q8_ref(int type, const uint8_t *row, const struct hs_block_q8_0 *x, int ncols);

/* ---- masked mul_mat_id and the fused FFN ----------------------------------
 * A job describes one layer's CPU share: n tokens, ids[n][k] (-1 = skip:
 * that expert is never read), weights[n][k].  hs__ffn_prepare() groups the
 * (token, slot) pairs by expert in scratch, single-threaded and cheap; the
 * steps then run on nth threads with a barrier between them. */
struct hs_ffn_job {
	const struct hs_moe_layer *layer;
	const struct hs_kernel_ops *ops;
	int n;                 /* tokens */
	const float *x;        /* [n][n_embd] */
	const int32_t *ids;    /* [n][n_used] */
	const float *weights;  /* [n][n_used] */
	float *y;              /* [n][n_embd]: the weighted sum is added here */
	void *scratch;         /* hs__ffn_scratch_bytes(layer, n) bytes, 64-aligned */
	/* filled by prepare */
	int n_pairs, n_active; /* routed pairs that are not masked; experts with tokens */
	int *expert_of;        /* [n_active] expert id */
	int *first;            /* [n_active + 1] start of each expert's pairs */
	int *pair_token;       /* [n_pairs] token of each pair, grouped by expert */
	float *pair_weight;    /* [n_pairs] */
	struct hs_block_q8_0 *xq; /* [n][n_embd / 32] */
	float *g, *u;          /* [n_pairs][n_ff] gate, up; h overwrites g */
	struct hs_block_q8_0 *hq; /* [n_pairs][n_ff / 32] */
	float *out;            /* [n_pairs][n_embd] per-pair down output */
	uint64_t *cost_prefix; /* [n_active + 1] work of the gate/up step, for splitting */
};

size_t hs__ffn_scratch_bytes(const struct hs_moe_layer *l, int n);
/* -EINVAL for an id outside [-1, E).  ids with -1 are skipped. */
int hs__ffn_prepare(struct hs_ffn_job *job);
/* step 1: quantize the tokens' activations */
void hs__ffn_step_quantize(struct hs_ffn_job *job, int ith, int nth);
/* step 2: gate and up products, activation, quantize h */
void hs__ffn_step_gate_up(struct hs_ffn_job *job, int ith, int nth);
/* step 3: down product, bias, weighted accumulation into y (threads own
 * disjoint row ranges of y, so no two write the same element) */
void hs__ffn_step_down(struct hs_ffn_job *job, int ith, int nth);
/* All steps on nthreads OpenMP threads (<= 0: OpenMP's default). */
int hs__ffn_run_omp(struct hs_ffn_job *job, int nthreads);

/* mul_mat_id alone: out[p][rows] = W[expert of pair p] . x[token of p] for
 * every unmasked pair, grouped by expert so each weight block is read once
 * per group.  `w` holds E matrices of `rows` rows x `cols` values, `stride`
 * bytes apart (plain rows, or row-interleaved when packed is set); out is
 * [n][k][rows] (a masked slot's row is left as it was). */
struct hs_mmid_job {
	const struct hs_kernel_ops *ops;
	int type, rows, cols, n_experts, n, k;
	int packed;
	const uint8_t *w;
	size_t stride;
	const float *x;        /* [n][cols] */
	const int32_t *ids;    /* [n][k] */
	float *out;            /* [n][k][rows] */
	void *scratch;         /* hs__mmid_scratch_bytes() */
	int n_active, *expert_of, *first, *pair_slot; /* by prepare; pair_slot = t * k + slot */
	struct hs_block_q8_0 *xq;
};
size_t hs__mmid_scratch_bytes(int cols, int rows, int n, int k, int n_experts);
int hs__mmid_prepare(struct hs_mmid_job *job);
void hs__mmid_step_quantize(struct hs_mmid_job *job, int ith, int nth);
void hs__mmid_step_mul(struct hs_mmid_job *job, int ith, int nth);
int hs__mmid_run_omp(struct hs_mmid_job *job, int nthreads);

#endif
