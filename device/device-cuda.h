/* The parts of the CUDA backend the rest of the library sees, declared
 * without CUDA types; implemented by device-cuda.c in CUDA builds and by
 * device-cuda-stub.c otherwise. */
#ifndef HS_DEVICE_CUDA_H
#define HS_DEVICE_CUDA_H

#include <stddef.h>

/* The CUDA expert kernels' arithmetic run on the CPU over host memory
 * (gpu_kernels/moe.cu, hs__gpu_ffn_emulate): f as for a launch, but every
 * pointer a host pointer.  -ENOSYS in a build without CUDA. */
struct hs_dev_ffn;
int hs__cuda_ffn_emulate(const struct hs_dev_ffn *f, int tiled);
size_t hs__cuda_ffn_scratch_bytes(const struct hs_dev_ffn *f);

#endif
