/* extern "C" launchers of the CUDA kernels; included only by
 * device/device-cuda.c and the .cu files. */
#ifndef HS_GPU_KERNELS_H
#define HS_GPU_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

#include "gpu_kernels/scratch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads n_words 16-byte words of src once and writes a per-block checksum to
 * out[0..n_blocks) (n_blocks = hs__gpu_read_blocks()), so the reads cannot be
 * optimised away.  Used to measure device memory read bandwidth. */
cudaError_t hs__gpu_read_sum(const void *src, size_t n_words, unsigned *out, cudaStream_t stream);
int hs__gpu_read_blocks(void);

/* x[n_rows][n_cols] f32 -> ggml Q8_0 blocks (34 bytes: fp16 scale, 32
 * int8), scale = max|x| / 127, values rounded to nearest. */
cudaError_t hs__gpu_quantize_q8_0(const float *x, int n_rows, int n_cols, void *xq, cudaStream_t stream);

/* One fused expert FFN launch (see device/device.h, struct hs_dev_ffn):
 * expert e of a routed pair p = t * n_used + j is the packed block at
 * pool + slot_of[e] * stride, its matrices row-interleaved in groups of 16
 * (cpu_kernels/repack.h; MXFP4 or Q8_0) or plain ggml rows (every block
 * type), each matrix of its own type; masked pairs (ids -1) read nothing of
 * any expert.  An id outside -1..n_experts-1 or a routed expert without a
 * slot (slot_of -1) is a fault, as on the sim: a check kernel finds it
 * first, the launch then computes nothing, and the fault's code goes to
 * *report (host memory the device writes; sticky until the host clears
 * it).  Fewer than 64 pairs take the decode kernels, more the grouped,
 * tiled prefill kernels. */
struct hs_gpu_ffn {
	int act;                   /* 0: gpt-oss clamp/sigmoid(1.702 g)(u + 1); 1: silu(g) u */
	int type[3];               /* gate, up, down: ggml ids of block types */
	int packed;                /* 1: row-interleaved (every type 39 MXFP4 or 8 Q8_0); 0: plain rows */
	int n_embd, n_ff, n_experts, n_used, n;
	size_t off_gate, off_up, off_down, off_gate_b, off_up_b, off_down_b; /* bias offsets 0 = none */
	const unsigned char *pool;
	size_t stride;
	const int *slot_of;
	const void *xq;
	const int *ids;
	const float *weights;
	float *y;
	float *h;                  /* set from the scratch by the launcher */
	void *hq;
	int *verdict;              /* device int: 1 when this launch's check found a fault */
	unsigned long long *report; /* the first fault's code (0: none), see hs__gpu_ffn_fault */
};
/* A fault's code: its kind and the id it is about. */
#define HS_GPU_FAULT_ID 1ull   /* an id outside -1..n_experts-1 */
#define HS_GPU_FAULT_SLOT 2ull /* a routed expert without a slot */
#define HS_GPU_FAULT(kind, id) ((kind) << 32 | (unsigned)(id))
#define HS_GPU_FAULT_KIND(code) ((code) >> 32)
#define HS_GPU_FAULT_VALUE(code) ((int)(unsigned)((code) & 0xffffffffull))
/* Device scratch one launch of n tokens needs (scratch.h's formula). */
size_t hs__gpu_ffn_scratch_bytes(int n, int n_used, int n_ff, int n_experts);
cudaError_t hs__gpu_ffn(const struct hs_gpu_ffn *a, void *scratch, cudaStream_t stream);
/* The same arithmetic on the CPU over host memory (tiled 0: the decode
 * kernels' code, 1: the prefill path's grouping and tiles), verdict and
 * report host pointers: the check as the kernel does it, then the kernels'
 * work; -EINVAL (nothing computed) when it found a fault, its code in
 * *report.  For tests on machines without a GPU. */
int hs__gpu_ffn_emulate(const struct hs_gpu_ffn *a, void *scratch, int tiled);

/* ---- dense ops of the whole model (dense.cu) ---------------------------------
 * The semantics are the CPU ops' (cpu_kernels/dense.h, attention.h; see
 * device/device.h); every pointer is a device pointer, except in the
 * *_emulate entries, which run the kernels' arithmetic on the CPU over host
 * memory (tests on machines without a GPU).  Arguments are checked by the
 * caller (device/device-cuda.c). */

/* y[t] = W x[t] (+ bias) for t < n.  Block-type weights (Q8_0, MXFP4, the
 * K-quants Q2_K..Q6_K, IQ4_XS, IQ4_NL, Q4_0..Q5_1; plain ggml rows): x
 * quantized to Q8_0 first (as the CPU op), int8 dot products.
 * F32/F16/BF16: f32 activations in the GEMV and tile kernels; through
 * cuBLAS, F16/BF16 activations are rounded to the weights' type first
 * (llama.cpp's CUDA backend does the same).  w and row_bytes 4-byte
 * aligned for F32, 2 for F16, BF16 and Q8_0 (read as 16-bit words), any
 * for the other block types (read as bytes). */
struct hs_gpu_matmul {
	int type, rows, cols;
	const unsigned char *w;
	size_t row_bytes;
	const float *bias;
	int n;
	const float *x;
	size_t x_stride;
	float *y;
	size_t y_stride;
};
enum hs_gpu_mm_path {
	HS_GPU_MM_AUTO,  /* GEMV up to HS_GPU_GEMV_MAX_TOKENS tokens, else cuBLAS (float weights, when given) or tiles */
	HS_GPU_MM_GEMV,  /* one warp per row, all tokens (at most HS_GPU_GEMV_MAX_TOKENS) */
	HS_GPU_MM_TILE,  /* 64 rows x 32 tokens per block */
	HS_GPU_MM_BLAS   /* cuBLAS (float weights); emulated as the rounding of x, then an exact product */
};
size_t hs__gpu_matmul_scratch_bytes(int type, int cols, int n);
/* The path a launch of n tokens takes (have_blas: a cuBLAS handle given). */
enum hs_gpu_mm_path hs__gpu_matmul_path(int type, int n, int have_blas);
/* blas: a handle from hs__gpu_blas_create(), or NULL for the own kernels.
 * A cuBLAS failure returns cudaErrorUnknown with its status in *blas_status. */
cudaError_t hs__gpu_matmul(const struct hs_gpu_matmul *a, void *scratch, void *blas, int *blas_status,
			   cudaStream_t stream);
void hs__gpu_matmul_emulate(const struct hs_gpu_matmul *a, void *scratch, enum hs_gpu_mm_path path);

/* cuBLAS, opened at run time (dlopen of libcublas.so.<CUDA major>), so that
 * a binary runs where it is absent: 0 when usable, with the file opened in
 * why, else -ENOENT with the reason in why.  Looked for in the toolkit's lib
 * folder, the loader's path, then Python packages (nvidia/cu<major>/lib);
 * HOTSET_CUBLAS=0 turns it off, HOTSET_CUBLAS=/path/libcublas.so.N names
 * the file. */
int hs__gpu_blas_load(char *why, size_t why_len);
/* A handle for the current device; 0 or cuBLAS's status. */
int hs__gpu_blas_create(void **handle);
void hs__gpu_blas_destroy(void *handle);

/* RMSNorm of n tokens x n_head rows of dim values (y may be x). */
struct hs_gpu_norm {
	const float *x;
	size_t x_stride;
	float *y;
	size_t y_stride;
	int n, n_head, dim;
	const float *w;
	float eps;
};
cudaError_t hs__gpu_rmsnorm(const struct hs_gpu_norm *a, cudaStream_t stream);
void hs__gpu_rmsnorm_emulate(const struct hs_gpu_norm *a);

/* NEOX RoPE in place with the table cs[n][n_rot] (cos, then sin). */
struct hs_gpu_rope {
	float *x;
	size_t x_stride;
	int n, n_head, head_dim, n_rot;
	const float *cs;
};
cudaError_t hs__gpu_rope(const struct hs_gpu_rope *a, cudaStream_t stream);
void hs__gpu_rope_emulate(const struct hs_gpu_rope *a);

/* K or V rows into cache cells as F16 (round to nearest even) or Q8_0;
 * cell_pos[cells[t]] = pos[t] when cell_pos is set. */
struct hs_gpu_kv_store {
	int type;
	const float *x;
	size_t x_stride;
	int n, n_head_kv, head_dim;
	const int *cells;
	unsigned char *dst;
	size_t cell_bytes, head_bytes;
	int *cell_pos;
	const int *pos;
};
cudaError_t hs__gpu_kv_store(const struct hs_gpu_kv_store *a, cudaStream_t stream);
void hs__gpu_kv_store_emulate(const struct hs_gpu_kv_store *a);

/* Attention of n query tokens over n_cells cache cells (attention.h's
 * semantics: GQA, causal by cell positions, sliding window, sinks in the
 * max and the denominator).  Work items are (token, KV head, cell range),
 * hs__gpu_attn_split() ranges; with more than one, partial states go to the
 * scratch and a merge kernel combines them. */
struct hs_gpu_attn {
	int n, n_head, n_head_kv, head_dim;
	const float *q;
	size_t q_stride;
	const int *q_pos;
	int kv_type;
	const unsigned char *k, *v;
	size_t k_cell, k_head, v_cell, v_head;
	int n_cells;
	const int *cell_pos;
	int window;
	const float *sinks;
	float scale;
	float *out;
	size_t out_stride;
};
size_t hs__gpu_attn_scratch_bytes(int n, int n_head, int n_head_kv, int head_dim, int n_cells);
cudaError_t hs__gpu_attention(const struct hs_gpu_attn *a, void *scratch, cudaStream_t stream);
/* n_split 0: as the launcher picks; else that many ranges (scratch for them). */
void hs__gpu_attention_emulate(const struct hs_gpu_attn *a, void *scratch, int n_split);

/* y[i] += x[i] for i < n */
cudaError_t hs__gpu_add(float *y, const float *x, size_t n, cudaStream_t stream);
void hs__gpu_add_emulate(float *y, const float *x, size_t n);
/* g[i] = silu(g[i]) * u[i] for i < n */
cudaError_t hs__gpu_swiglu(float *g, const float *u, size_t n, cudaStream_t stream);
void hs__gpu_swiglu_emulate(float *g, const float *u, size_t n);

/* qwen35moe's Gated DeltaNet mixer of one sequence's n tokens
 * (deltanet.cu; device/device.h struct hs_dev_dn has the semantics and
 * the layouts): the convolution, the prep, the delta rule with a head's
 * state in hs__gpu_deltanet_shared_bytes(dh) of shared memory, the gated
 * norm.  The emulation is -ENOMEM when its shared-memory stand-in cannot
 * be allocated. */
struct hs_gpu_dn {
	int n, n_k, n_v, dh, kc;
	const float *conv_w, *dt_bias, *a, *norm;
	float eps;
	const float *qkv, *z, *alpha, *beta;
	float *conv_state, *state, *conv, *g, *b, *out;
};
size_t hs__gpu_deltanet_shared_bytes(int head_dim);
cudaError_t hs__gpu_deltanet(const struct hs_gpu_dn *a, cudaStream_t stream);
int hs__gpu_deltanet_emulate(const struct hs_gpu_dn *a);

#ifdef __cplusplus
}
#endif
#endif
