// Device memory read-bandwidth kernel: every thread streams 16-byte words
// with a grid-stride loop and folds them into one word, so the timing is the
// read traffic alone (one 4-byte store per block at the end).
#include "gpu_kernels/gpu-kernels.h"

#define HS_READ_BLOCKS 1024
#define HS_READ_THREADS 256

__global__ void hs_read_sum_kernel(const uint4 *src, size_t n, unsigned *out)
{
	__shared__ unsigned part[HS_READ_THREADS];
	unsigned acc = 0;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		uint4 v = __ldg(src + i);
		acc ^= v.x ^ v.y ^ v.z ^ v.w;
	}
	part[threadIdx.x] = acc;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if ((int)threadIdx.x < s)
			part[threadIdx.x] ^= part[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		out[blockIdx.x] = part[0];
}

extern "C" int hs__gpu_read_blocks(void)
{
	return HS_READ_BLOCKS;
}

extern "C" cudaError_t hs__gpu_read_sum(const void *src, size_t n_words, unsigned *out, cudaStream_t stream)
{
	hs_read_sum_kernel<<<HS_READ_BLOCKS, HS_READ_THREADS, 0, stream>>>((const uint4 *)src, n_words, out);
	return cudaGetLastError();
}
