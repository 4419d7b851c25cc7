/* CUDA presence, device facts and measurements, for builds with CUDA.  The
 * runtime is linked statically, so this code runs on machines without a
 * driver: there the probe finds zero devices and says why. */
#include "config.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gpu_kernels/gpu-kernels.h"
#include "runtime/device-cuda.h"
#include "runtime/error.h"

static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static int probe_count;
static char probe_status[512];

static void probe(void)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		const char *why = e == cudaErrorInsufficientDriver ? "CUDA driver not found"
				: e == cudaErrorNoDevice ? "no device present"
				: "CUDA runtime error";
		snprintf(probe_status, sizeof probe_status, "no CUDA device (%s: %s)", why,
			 cudaGetErrorName(e));
		cudaGetLastError(); /* clear the sticky error for later calls */
		probe_count = 0;
		return;
	}
	probe_count = n;
	int len = snprintf(probe_status, sizeof probe_status, "%d CUDA device%s", n, n == 1 ? "" : "s");
	for (int i = 0; i < n && len < (int)sizeof probe_status; i++) {
		struct cudaDeviceProp p;
		if (cudaGetDeviceProperties(&p, i) != cudaSuccess)
			continue;
		len += snprintf(probe_status + len, sizeof probe_status - len, "%s %d: %s (sm_%d%d, %.1f GiB)",
				i ? ";" : ":", i, p.name, p.major, p.minor,
				(double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
	}
}

int hs__cuda_probe(void)
{
	pthread_once(&probe_once, probe);
	return probe_count;
}

const char *hs__cuda_probe_status(void)
{
	pthread_once(&probe_once, probe);
	return probe_status;
}

const char *hs__cuda_build(void)
{
	return "CUDA " HS_CUDA_VERSION " (sm " HS_CUDA_ARCHS ")";
}

static int check_dev(int dev)
{
	if (dev < 0 || dev >= hs__cuda_probe())
		return hs__error(ENODEV, "CUDA device %d: not present (%d device%s; %s)", dev,
				 hs__cuda_probe(), hs__cuda_probe() == 1 ? "" : "s", hs__cuda_probe_status());
	return 0;
}

int hs__cuda_pci_bus_id(int dev, char *buf, size_t n)
{
	char raw[32];
	unsigned dom, bus, d, fn;
	int rc = check_dev(dev);

	if (rc)
		return rc;
	if (cudaDeviceGetPCIBusId(raw, sizeof raw, dev) != cudaSuccess)
		return hs__error(ENODEV, "CUDA device %d: no PCI bus id (%s)", dev,
				 cudaGetErrorName(cudaGetLastError()));
	/* CUDA writes "0000:65:00.0" in upper case, sometimes with an 8-digit domain. */
	if (sscanf(raw, "%x:%x:%x.%x", &dom, &bus, &d, &fn) != 4)
		return hs__error(EIO, "CUDA device %d: unreadable PCI bus id '%s'", dev, raw);
	if (snprintf(buf, n, "%04x:%02x:%02x.%x", dom & 0xffff, bus, d, fn) >= (int)n)
		return hs__error(EINVAL, "PCI bus id buffer of %zu bytes is too small", n);
	return 0;
}

int hs__cuda_mem_read_gbps(int dev, size_t bytes, double *gbps)
{
	void *src = NULL;
	unsigned *out = NULL;
	cudaEvent_t t0 = NULL, t1 = NULL;
	float ms = 0;
	int rc = check_dev(dev);
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

int hs__cuda_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
	size_t f = 0, t = 0;
	cudaError_t e;
	int rc = check_dev(dev);

	if (rc)
		return rc;
	if ((e = cudaSetDevice(dev)) != cudaSuccess || (e = cudaMemGetInfo(&f, &t)) != cudaSuccess) {
		cudaGetLastError();
		return hs__error(EIO, "CUDA device %d: cannot read its memory: %s", dev, cudaGetErrorString(e));
	}
	*free_bytes = f;
	*total_bytes = t;
	return 0;
}

int hs__cuda_name(int dev, char *buf, size_t n)
{
	struct cudaDeviceProp prop;
	int rc = check_dev(dev);

	if (rc)
		return rc;
	if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
		cudaGetLastError();
		return hs__error(EIO, "CUDA device %d: no properties", dev);
	}
	snprintf(buf, n, "%s", prop.name);
	return 0;
}

int hs__cuda_h2d_gbps(int dev, void *host, size_t bytes, int pinned, double *gbps)
{
	void *dst = NULL;
	cudaEvent_t t0 = NULL, t1 = NULL;
	cudaStream_t s = NULL;
	float ms = 0;
	int registered = 0, rc = check_dev(dev);
	cudaError_t e;

	if (rc)
		return rc;
	if ((e = cudaSetDevice(dev)) != cudaSuccess)
		goto out;
	if ((e = cudaMalloc(&dst, bytes)) != cudaSuccess) {
		cudaGetLastError();
		return hs__error(ENOMEM, "CUDA device %d: cannot allocate %zu bytes for the copy test", dev, bytes);
	}
	/* pinned: the caller's pages (already on the node it chose) are
	 * page-locked in place, which does not move them */
	if (pinned) {
		if ((e = cudaHostRegister(host, bytes, cudaHostRegisterDefault)) != cudaSuccess)
			goto out;
		registered = 1;
	}
	if ((e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaEventCreate(&t0)) != cudaSuccess || (e = cudaEventCreate(&t1)) != cudaSuccess ||
	    (e = cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s)) != cudaSuccess ||
	    (e = cudaStreamSynchronize(s)) != cudaSuccess)
		goto out;
	cudaEventRecord(t0, s);
	for (int i = 0; i < 4; i++)
		if ((e = cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, s)) != cudaSuccess)
			goto out;
	cudaEventRecord(t1, s);
	if ((e = cudaEventSynchronize(t1)) != cudaSuccess || (e = cudaEventElapsedTime(&ms, t0, t1)) != cudaSuccess)
		goto out;
	*gbps = ms > 0 ? 4.0 * (double)bytes / (ms * 1e6) : 0;
out:
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
