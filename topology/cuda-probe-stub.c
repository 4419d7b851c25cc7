/* The CUDA probe of a build without CUDA (--without-cuda or no nvcc): there
 * is never a device, and every question about one says why. */
#include "config.h"

#include "base/error.h"
#include "topology/cuda-probe.h"

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

int hs__cuda_check_dev(int dev)
{
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}

int hs__cuda_pci_bus_id(int dev, char *buf, size_t n)
{
	(void)buf; (void)n;
	return hs__cuda_check_dev(dev);
}

int hs__cuda_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
	(void)free_bytes; (void)total_bytes;
	return hs__cuda_check_dev(dev);
}

int hs__cuda_name(int dev, char *buf, size_t n)
{
	(void)buf; (void)n;
	return hs__cuda_check_dev(dev);
}
