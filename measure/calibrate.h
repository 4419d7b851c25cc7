/* The cost model's rates measured on this machine for one model layer and
 * one device, in the same run as what they predict (`hotset bench`). */
#ifndef HS_CALIBRATE_H
#define HS_CALIBRATE_H

#include "hotset.h"
#include "planner/planner.h"
#include "device/device.h"

/* Best of `reps` passes of `threads` threads reading `bytes` (at least
 * 4x the last-level cache, hs__past_cache_bytes) of fresh memory; bytes/s
 * (tune.c's measurement). */
double hs__read_bandwidth(int threads, size_t bytes, int reps);

/* Measures, with MoE layer `layer` of m (its own experts, copied to node
 * os_node's memory as the runtime keeps them): host memory
 * read bandwidth and the CPU expert kernel with `threads` threads (bytes/s
 * at 1 token, FLOP/s at `batch` tokens), and on device d: pinned copies of
 * the layer's packed experts and the device's expert kernel at 1 and
 * `batch` tokens (timed with the device's events).  d NULL: no device
 * figures (out->gpu = 0).  progress may be NULL. */
int hs__calibrate(const hs_model *m, int layer, int os_node, struct hs_device *d, int threads, int batch,
		  hs_progress_fn progress, void *ctx, struct hs__rates *out);

#endif
