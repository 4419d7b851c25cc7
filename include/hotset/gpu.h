/* hotset/gpu.h: CUDA presence and waiting for GPU memory another process
 * holds.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_GPU_H
#define HOTSET_GPU_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* ---- CUDA presence ----------------------------------------------------- */

/* Number of usable CUDA devices: 0 when the library was built without CUDA,
 * when no driver is installed or when no device is present (all ordinary
 * cases, not errors).  hs_cuda_status() then says why in one line, e.g.
 * "no CUDA device (CUDA driver not found: cudaErrorInsufficientDriver)".
 * Never fails; the probe runs once and is cached. */
int hs_cuda_device_count(void);

/* One line describing the CUDA state found by hs_cuda_device_count().
 * Static string owned by the library. */
const char *hs_cuda_status(void);

/* ---- sharing the GPU ------------------------------------------------------ */

/* Reports a device's free and total memory (the real one asks CUDA; tests
 * pass a fake). */
typedef int (*hs_vram_reporter)(int device, uint64_t *free_bytes, uint64_t *total_bytes, void *ctx);

/* Waits until `budget` bytes of device memory are free, polling every
 * poll_ms (others' processes may hold it; they are never signalled), with
 * progress messages through progress (may be NULL).  reporter NULL = CUDA.
 * 0 when the memory is free; -ETIMEDOUT after timeout_s seconds with a
 * message saying how much was free; -EINVAL when budget exceeds the total,
 * device is negative or timeout_s is negative or NaN. */
int hs_vram_wait(int device, uint64_t budget, double timeout_s, int poll_ms, hs_vram_reporter reporter,
		 void *reporter_ctx, hs_progress_fn progress, void *progress_ctx);

#endif /* HOTSET_GPU_H */
