/* The CUDA backend of a build without CUDA (--without-cuda or no nvcc):
 * there is no ops table, and the kernel emulation says why. */
#include "config.h"

#include "base/error.h"
#include "device/device-cuda.h"
#include "device/device.h"

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
