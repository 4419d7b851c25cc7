/* CUDA bandwidth measurements of a build without CUDA: there is no device
 * to measure. */
#include "config.h"

#include "base/error.h"
#include "measure/cuda-bw.h"

int hs__cuda_mem_read_gbps(int dev, size_t bytes, double *gbps)
{
	(void)bytes; (void)gbps;
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}

int hs__cuda_h2d_gbps(int dev, void *host, size_t bytes, int pinned, double *gbps)
{
	(void)host; (void)bytes; (void)pinned; (void)gbps;
	return hs__error(ENODEV, "CUDA device %d: hotset was built without CUDA", dev);
}
