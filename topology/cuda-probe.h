/* CUDA presence and device facts, declared without CUDA types so callers
 * need no CUDA headers; implemented by cuda-probe.c in CUDA builds and by
 * cuda-probe-stub.c otherwise. */
#ifndef HS_CUDA_PROBE_H
#define HS_CUDA_PROBE_H

#include <stddef.h>
#include <stdint.h>

/* Number of usable devices (0 with no driver or no device); cached. */
int hs__cuda_probe(void);
/* One line saying what the probe found. */
const char *hs__cuda_probe_status(void);
/* "CUDA 13.0 (sm 75 80 86 89 90)" or "CUDA: not built". */
const char *hs__cuda_build(void);
/* 0 when dev is a device the probe found, else -ENODEV with the reason. */
int hs__cuda_check_dev(int dev);
/* PCI bus id of CUDA device dev, normalised to "dddd:bb:dd.f" lower case. */
int hs__cuda_pci_bus_id(int dev, char *buf, size_t n);
/* Free and total memory of device dev. */
int hs__cuda_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes);
/* Its marketing name ("NVIDIA H200"). */
int hs__cuda_name(int dev, char *buf, size_t n);

#endif
