// Launch helpers shared by the dense ops' .cu files: grid sizes, and
// element-wise ops run as one thread per item on the GPU or item by item
// on the CPU (the emulation the tests run).
#ifndef HS_FLAT_CUH
#define HS_FLAT_CUH

#include <cuda_runtime.h>

static unsigned blocks_for(long long total, int per)
{
	return (unsigned)((total + per - 1) / per);
}

// Element-wise ops: one thread per item i < total, ITEM(args, i) doing the
// work, launched or emulated item by item.
template <class A, void (*ITEM)(const A *, long long)> __global__ void hs_flat_kernel(A a, long long total)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < total)
		ITEM(&a, i);
}

template <class A, void (*ITEM)(const A *, long long)>
static cudaError_t flat_launch(const A *a, long long total, cudaStream_t stream)
{
	if (total <= 0)
		return cudaSuccess;
	hs_flat_kernel<A, ITEM><<<blocks_for(total, 256), 256, 0, stream>>>(*a, total);
	return cudaGetLastError();
}

template <class A, void (*ITEM)(const A *, long long)> static void flat_emulate(const A *a, long long total)
{
	for (long long i = 0; i < total; i++)
		ITEM(a, i);
}

#endif
