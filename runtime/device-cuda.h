/* The parts of the CUDA backend the rest of the library sees.  Declared
 * without CUDA types, so callers need no CUDA headers; implemented by
 * device-cuda.c in CUDA builds and by device-cuda-stub.c otherwise. */
#ifndef HS_DEVICE_CUDA_H
#define HS_DEVICE_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* Number of usable devices (0 with no driver or no device); cached. */
int hs__cuda_probe(void);
/* One line saying what the probe found. */
const char *hs__cuda_probe_status(void);
/* "CUDA 13.0 (sm 75 80 86 89 90)" or "CUDA: not built". */
const char *hs__cuda_build(void);
/* PCI bus id of CUDA device dev, normalised to "dddd:bb:dd.f" lower case. */
int hs__cuda_pci_bus_id(int dev, char *buf, size_t n);
/* Device memory read bandwidth of device dev in GB/s, measured with a
 * buffer of `bytes` (a reduction kernel reading each byte once). */
int hs__cuda_mem_read_gbps(int dev, size_t bytes, double *gbps);

/* Free and total memory of device dev. */
int hs__cuda_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes);
/* Its marketing name ("NVIDIA H200"). */
int hs__cuda_name(int dev, char *buf, size_t n);
/* Host-to-device copy bandwidth in GB/s from the caller's buffer (pinned:
 * page-locked in place for the test, then released). */
int hs__cuda_h2d_gbps(int dev, void *host, size_t bytes, int pinned, double *gbps);

/* The CUDA expert kernels' arithmetic run on the CPU over host memory
 * (gpu_kernels/moe.cu, hs__gpu_ffn_emulate): f as for a launch, but every
 * pointer a host pointer.  -ENOSYS in a build without CUDA. */
struct hs_dev_ffn;
int hs__cuda_ffn_emulate(const struct hs_dev_ffn *f, int tiled);
size_t hs__cuda_ffn_scratch_bytes(const struct hs_dev_ffn *f);

#endif
