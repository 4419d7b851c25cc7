/* The sim device's parts in other files: device-sim.c queues a call of a
 * dense op (device-sim-dense.c), which runs on the queue's thread with the
 * device's CPU threads. */
#ifndef HS_SIM_H
#define HS_SIM_H

#include <stddef.h>

#include "cpu_kernels/kernels.h"
#include "device/device.h"

/* Queues fn(copy of args, threads) on q; its nonzero return is the queue's
 * sticky error. */
int hs__sim_call(hs_queue *q, int (*fn)(const void *args, int threads), const void *args, size_t size);

/* The CPU tier's kernels as the sim device runs them: activations in Q8_0
 * with a scale per 32 values, as the CUDA device quantizes them (no
 * quantize_q8_k), so that the sim stays the device's arithmetic. */
const struct hs_kernel_ops *hs__sim_kernels(void);

size_t hs__sim_matmul_scratch_bytes(int type, int cols, int n);
int hs__sim_matmul(hs_queue *q, const struct hs_dev_matmul *m);
int hs__sim_rmsnorm(hs_queue *q, const struct hs_dev_norm *r);
int hs__sim_rope(hs_queue *q, const struct hs_dev_rope *r);
int hs__sim_kv_store(hs_queue *q, const struct hs_dev_kv_store *s);
size_t hs__sim_attn_scratch_bytes(int n, int n_head, int n_head_kv, int head_dim, int n_cells);
int hs__sim_attention(hs_queue *q, const struct hs_dev_attn *a);
int hs__sim_add(hs_queue *q, float *y, const float *x, size_t n);
int hs__sim_swiglu(hs_queue *q, float *g, const float *u, size_t n);
int hs__sim_deltanet(hs_queue *q, const struct hs_dev_dn *d);

#endif
