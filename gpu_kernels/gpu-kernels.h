/* extern "C" launchers of the CUDA kernels; included only by
 * device/device-cuda.c and the .cu files. */
#ifndef HS_GPU_KERNELS_H
#define HS_GPU_KERNELS_H

#include <stddef.h>
#include <cuda_runtime_api.h>

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
 * pool + slot_of[e] * stride; masked pairs (ids -1) read nothing of any
 * expert.  Fewer than 64 pairs take the decode kernels, more the grouped,
 * tiled prefill kernels. */
struct hs_gpu_ffn {
	int act;                   /* 0: gpt-oss clamp/sigmoid(1.702 g)(u + 1); 1: silu(g) u */
	int type;                  /* 39 MXFP4, 8 Q8_0 (ggml ids) */
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
};
/* Device scratch one launch of n tokens needs. */
size_t hs__gpu_ffn_scratch_bytes(int n, int n_used, int n_ff, int n_experts);
cudaError_t hs__gpu_ffn(const struct hs_gpu_ffn *a, void *scratch, cudaStream_t stream);
/* The same arithmetic on the CPU over host memory (tiled 0: the decode
 * kernels' code, 1: the prefill path's grouping and tiles); -EINVAL for an
 * id out of range.  For tests on machines without a GPU. */
int hs__gpu_ffn_emulate(const struct hs_gpu_ffn *a, void *scratch, int tiled);

#ifdef __cplusplus
}
#endif
#endif
