/* CUDA presence and device facts, for builds with CUDA: the probe that
 * matches CUDA devices to PCI objects of the topology, as hwloc's own CUDA
 * helpers would on this machine.  The runtime is linked statically, so this
 * code runs on machines without a driver: there the probe finds zero
 * devices and says why. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "base/error.h"
#include "topology/cuda-probe.h"

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

int hs__cuda_check_dev(int dev)
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
	int rc = hs__cuda_check_dev(dev);

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

int hs__cuda_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
	size_t f = 0, t = 0;
	cudaError_t e;
	int rc = hs__cuda_check_dev(dev);

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
	int rc = hs__cuda_check_dev(dev);

	if (rc)
		return rc;
	if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
		cudaGetLastError();
		return hs__error(EIO, "CUDA device %d: no properties", dev);
	}
	snprintf(buf, n, "%s", prop.name);
	return 0;
}
