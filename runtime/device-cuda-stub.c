/* CUDA entry points of a build without CUDA (--without-cuda or no nvcc):
 * there is never a device, and every device call says why. */
#include "config.h"

#include "runtime/device-cuda.h"
#include "runtime/error.h"

int hs__cuda_probe(void)
{
	return 0;
}

const char *hs__cuda_probe_status(void)
{
	return "no CUDA device (hotset was built without CUDA)";
}

const char *hs__cuda_build(void)
{
	return "CUDA: not built";
}

int hs__cuda_pci_bus_id(int dev, char *buf, size_t n)
{
	(void)buf; (void)n;
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}

int hs__cuda_mem_read_gbps(int dev, size_t bytes, double *gbps)
{
	(void)bytes; (void)gbps;
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}
