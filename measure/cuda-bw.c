/* Bandwidth measurements of a CUDA device for `hotset tune`: device memory
 * read (a reduction kernel) and host-to-device copies (pinned or
 * pageable).  CUDA builds only; cuda-bw-stub.c stands in otherwise. */
#include "config.h"

#include <stdio.h>

#include <cuda_runtime_api.h>

#include "base/error.h"
#include "gpu_kernels/gpu-kernels.h"
#include "measure/cuda-bw.h"
#include "topology/cuda-probe.h"

int hs__cuda_mem_read_gbps(int dev, size_t bytes, double *gbps)
{
	void *src = NULL;
	unsigned *out = NULL;
	cudaEvent_t t0 = NULL, t1 = NULL;
	float ms = 0;
	int rc = hs__cuda_check_dev(dev);
	cudaError_t e;

	if (rc)
		return rc;
	bytes &= ~(size_t)15;
	if (bytes < (1u << 20))
		return hs__error(EINVAL, "device bandwidth buffer of %zu bytes: at least 1 MiB", bytes);
	if ((e = cudaSetDevice(dev)) != cudaSuccess)
		goto out_cuda;
	if ((e = cudaMalloc(&src, bytes)) != cudaSuccess) {
		cudaGetLastError();
		return hs__error(ENOMEM, "CUDA device %d: cannot allocate %zu bytes", dev, bytes);
	}
	if ((e = cudaMalloc((void **)&out, sizeof *out * hs__gpu_read_blocks())) != cudaSuccess ||
	    (e = cudaMemset(src, 1, bytes)) != cudaSuccess ||
	    (e = cudaEventCreate(&t0)) != cudaSuccess ||
	    (e = cudaEventCreate(&t1)) != cudaSuccess)
		goto out_free;
	/* One warm-up pass, then the timed ones. */
	if ((e = hs__gpu_read_sum(src, bytes / 16, out, 0)) != cudaSuccess)
		goto out_free;
	cudaEventRecord(t0, 0);
	for (int i = 0; i < 5; i++)
		if ((e = hs__gpu_read_sum(src, bytes / 16, out, 0)) != cudaSuccess)
			goto out_free;
	cudaEventRecord(t1, 0);
	if ((e = cudaEventSynchronize(t1)) != cudaSuccess ||
	    (e = cudaEventElapsedTime(&ms, t0, t1)) != cudaSuccess)
		goto out_free;
	*gbps = ms > 0 ? 5.0 * (double)bytes / (ms * 1e6) : 0;
out_free:
	if (t0) cudaEventDestroy(t0);
	if (t1) cudaEventDestroy(t1);
	cudaFree(out);
	cudaFree(src);
	if (e == cudaSuccess)
		return 0;
out_cuda:
	cudaGetLastError();
	return hs__error(EIO, "CUDA device %d: %s", dev, cudaGetErrorString(e));
}

int hs__cuda_h2d_gbps(int dev, void *host, size_t bytes, int pinned, double *gbps)
{
	void *dst = NULL;
	cudaEvent_t t0 = NULL, t1 = NULL;
	cudaStream_t s = NULL;
	float ms = 0;
	int registered = 0, rc = hs__cuda_check_dev(dev);
	cudaError_t e;

	if (rc)
		return rc;
	if ((e = cudaSetDevice(dev)) != cudaSuccess)
		goto out_release;
	if ((e = cudaMalloc(&dst, bytes)) != cudaSuccess) {
		cudaGetLastError();
		return hs__error(ENOMEM, "CUDA device %d: cannot allocate %zu bytes for the copy test", dev, bytes);
	}
	/* pinned: the caller's pages (already on the node it chose) are
	 * page-locked in place, which does not move them */
	if (pinned) {
		if ((e = cudaHostRegister(host, bytes, cudaHostRegisterDefault)) != cudaSuccess)
			goto out_release;
		registered = 1;
	}
	if ((e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaEventCreate(&t0)) != cudaSuccess || (e = cudaEventCreate(&t1)) != cudaSuccess ||
	    (e = cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s)) != cudaSuccess ||
	    (e = cudaStreamSynchronize(s)) != cudaSuccess)
		goto out_release;
	cudaEventRecord(t0, s);
	for (int i = 0; i < 4; i++)
		if ((e = cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s)) != cudaSuccess)
			goto out_release;
	cudaEventRecord(t1, s);
	if ((e = cudaEventSynchronize(t1)) != cudaSuccess || (e = cudaEventElapsedTime(&ms, t0, t1)) != cudaSuccess)
		goto out_release;
	*gbps = ms > 0 ? 4.0 * (double)bytes / (ms * 1e6) : 0;
out_release:
	if (t0) cudaEventDestroy(t0);
	if (t1) cudaEventDestroy(t1);
	if (s) cudaStreamDestroy(s);
	if (registered) cudaHostUnregister(host);
	cudaFree(dst);
	if (e == cudaSuccess)
		return 0;
	cudaGetLastError();
	return hs__error(EIO, "CUDA device %d: %s copy test: %s", dev, pinned ? "pinned" : "pageable",
			 cudaGetErrorString(e));
}
