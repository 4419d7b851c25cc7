/* Device scratch the CUDA kernels need, and the launch choices it depends
 * on, in plain C without CUDA headers: the launchers (.cu) size their
 * scratch with these, and the planner counts VRAM with the same formulas in
 * every build.  Type ids are ggml's (0 F32, 1 F16, 30 BF16, the block
 * types below): this folder does not include cpu_kernels/. */
#ifndef HS_GPU_SCRATCH_H
#define HS_GPU_SCRATCH_H

#include <stddef.h>

/* Matrix products of up to this many tokens run as matrix-vector products
 * (each weight row read once for all of them); more as tiles or cuBLAS. */
#define HS_GPU_GEMV_MAX_TOKENS 8
/* Attention: (token, KV head) items are split over the cells until about
 * this many work items exist, each range at least HS_GPU_ATTN_MIN_CELLS
 * cells (flash-decoding); prefill ubatches have items enough. */
#define HS_GPU_ATTN_ITEMS 512
#define HS_GPU_ATTN_MIN_CELLS 64

static inline size_t hs__gpu_align256(size_t b)
{
	return (b + 255) & ~(size_t)255;
}

/* The block types the kernels take with Q8_0 activations: Q4_0 2, Q4_1 3,
 * Q5_0 6, Q5_1 7, Q8_0 8, Q2_K..Q6_K 10..14, IQ4_NL 20, IQ4_XS 23, MXFP4 39. */
static inline int hs__gpu_type_quantized(int type)
{
	switch (type) {
	case 2: case 3: case 6: case 7: case 8: case 10: case 11: case 12: case 13: case 14: case 20: case 23: case 39:
		return 1;
	default:
		return 0;
	}
}

/* Block-type weights: the activations quantized to Q8_0 blocks
 * (34 bytes per 32 values).  F16 and BF16 weights past the GEMV size: the
 * activations as f16 or bf16 for cuBLAS (counted whether or not cuBLAS is
 * found).  F32: none. */
static inline size_t hs__gpu_matmul_scratch_size(int type, int cols, int n)
{
	if (cols <= 0 || n <= 0)
		return 0;
	if (hs__gpu_type_quantized(type))
		return hs__gpu_align256((size_t)n * (size_t)(cols / 32) * 34);
	if ((type == 1 || type == 30) && n > HS_GPU_GEMV_MAX_TOKENS)
		return hs__gpu_align256((size_t)n * (size_t)cols * 2);
	return 0;
}

/* Cell ranges per (token, KV head); never fewer for more cells, so scratch
 * sized for n_ctx cells serves every shorter scan. */
static inline int hs__gpu_attn_split(int n, int n_head_kv, int n_cells)
{
	long items = (long)n * n_head_kv, cap = n_cells / HS_GPU_ATTN_MIN_CELLS, s;

	if (items <= 0 || items >= HS_GPU_ATTN_ITEMS || cap <= 1)
		return 1;
	s = (HS_GPU_ATTN_ITEMS + items - 1) / items;
	return (int)(s < cap ? s : cap);
}

/* One partial state (m, l, o[head_dim]) per token, query head and range. */
static inline size_t hs__gpu_attn_scratch_size(int n, int n_head, int n_head_kv, int head_dim, int n_cells)
{
	int s = hs__gpu_attn_split(n, n_head_kv, n_cells);

	if (s <= 1 || n <= 0)
		return 0;
	return hs__gpu_align256((size_t)n * n_head * s * ((size_t)head_dim + 2) * sizeof(float));
}

/* The fused expert FFN (moe.cu): h and its Q8_0 copy for every routed pair,
 * then the grouping arrays. */
static inline size_t hs__gpu_ffn_scratch_size(int n, int n_used, int n_ff, int n_experts)
{
	size_t pairs = (size_t)n * n_used;
	size_t h = hs__gpu_align256(pairs * n_ff * sizeof(float));
	size_t hq = hs__gpu_align256(pairs * (n_ff / 32) * 34);
	size_t grouping = sizeof(int) * (3 * (size_t)n_experts + 1 + pairs);
	return h + hq + grouping;
}

#endif
