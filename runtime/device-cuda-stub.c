/* CUDA entry points of a build without CUDA (--without-cuda or no nvcc):
 * there is never a device, and every device call says why. */
#include "config.h"

#include "runtime/device-cuda.h"
#include "runtime/device.h"
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

int hs__cuda_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
	(void)free_bytes; (void)total_bytes;
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}

int hs__cuda_name(int dev, char *buf, size_t n)
{
	(void)buf; (void)n;
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}

int hs__cuda_h2d_gbps(int dev, void *host, size_t bytes, int pinned, double *gbps)
{
	(void)host; (void)bytes; (void)pinned; (void)gbps;
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}

const struct hs_dev_ops *hs__dev_cuda_ops(void)
{
	return NULL;
}

int hs__cuda_ffn_emulate(const struct hs_dev_ffn *f, int tiled)
{
	(void)f; (void)tiled;
	return hs__error(ENOSYS, "CUDA kernel emulation: hotset was built without CUDA");
}

size_t hs__cuda_ffn_scratch_bytes(const struct hs_dev_ffn *f)
{
	(void)f;
	return 0;
}
