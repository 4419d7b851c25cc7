/* extern "C" launchers of the CUDA kernels; included only by
 * runtime/device-cuda*.c and the .cu files. */
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

#ifdef __cplusplus
}
#endif
#endif
