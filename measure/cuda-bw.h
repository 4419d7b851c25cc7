/* Bandwidth measurements of a CUDA device (cuda-bw.c, or cuda-bw-stub.c in
 * builds without CUDA), declared without CUDA types. */
#ifndef HS_CUDA_BW_H
#define HS_CUDA_BW_H

#include <stddef.h>

/* Device memory read bandwidth of device dev in GB/s, measured with a
 * buffer of `bytes` (a reduction kernel reading each byte once). */
int hs__cuda_mem_read_gbps(int dev, size_t bytes, double *gbps);
/* Host-to-device copy bandwidth in GB/s from the caller's buffer (pinned:
 * page-locked in place for the test, then released). */
int hs__cuda_h2d_gbps(int dev, void *host, size_t bytes, int pinned, double *gbps);

#endif
