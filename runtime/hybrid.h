/* One MoE layer split between a device and the CPU (DESIGN.md §4): the
 * device computes the experts in its slots (hits) and, in stream mode or for
 * the hybrid share q, misses it first copies into staging slots; the CPU
 * pool computes the other misses from host memory.  Each side gets the
 * routed ids with the other side's experts masked (-1), so neither reads a
 * byte of the other's experts.  The work runs as a task graph over the host,
 * CPU, GPU and copy lanes, and the outputs are added at the end. */
#ifndef HS_HYBRID_H
#define HS_HYBRID_H

#include <stdint.h>

#include "cpu_kernels/moe.h"
#include "hotset.h"
#include "device/device.h"
#include "runtime/graph.h"
#include "runtime/pool.h"

#define HS_MAX_STREAMED 256 /* experts streamed in one step at most */

struct hs_layer_stats {
	int pairs, hits, misses_cpu, misses_streamed; /* routed (token, expert) pairs */
	int experts_streamed;
	int staging_free;      /* staging slots no hit of this step needed */
	double q;              /* the share of misses this step streamed (asked for, or live) */
	uint64_t host_bytes;   /* expert bytes the CPU read */
	uint64_t pcie_bytes;   /* expert bytes copied to the device */
	double wall_s, busy_s[HS_N_LANES], overlap; /* the GPU lane's busy time is the device's
						       expert launches, timed with events */
};

/* The buffers one layer step uses and leaves free at its end: the
 * device's x, its Q8_0 copy, id lists, weights, y and FFN scratch; the
 * pinned host side of them; the CPU lane's scratch.  The layers of one
 * runtime run one after the other, so they share one set (the VRAM of a
 * set per layer is better spent on experts). */
struct hs_step_bufs {
	struct hs_device *d;
	int max_n, n_lists;
	size_t hx_b, hw_b, hids_b, dxq_b, scratch_b;
	void *dx, *dxq, *dids, *dw, *dy, *dscratch;
	float *hx, *hw, *hy;
	int32_t *hids;
	void *cscratch;
	float *ycpu;
	int32_t *ids_cpu;
};

/* A set for layers shaped like l, up to max_n tokens; streams: room for
 * the id lists of streamed experts.  Free with hs__step_bufs_free(). */
int hs__step_bufs_create(struct hs_device *d, const struct hs_moe_layer *l, int max_n, int streams,
			 struct hs_step_bufs **out);
void hs__step_bufs_free(struct hs_step_bufs *b);

struct hs_hybrid {
	const struct hs_moe_layer *l;   /* host view of the layer's experts */
	struct hs_device *d;
	hs_queue *qc, *qx;
	struct hs_pool *pool;
	struct hs_slots *slots;         /* n_cached slots, then n_staging for streamed experts */
	int n_cached, n_staging, next_staging;
	int n_lists;                    /* experts one step may stream (id lists and events for each) */
	struct hs_expert_pack pack;
	int direct;                     /* the host view is packed and pinned: copies come straight from it */
	double est_cpu_bps, est_copy_bps, est_gpu_bps; /* live estimates: expert bytes/s of the CPU, the
							   copies and the device (0 = none yet) */
	int max_n;
	/* device buffers for max_n tokens */
	void *dx, *dxq, *dids, *dw, *dy, *dscratch;
	/* pinned host buffers */
	float *hx, *hw, *hy;
	int32_t *hids;
	uint8_t *hpack;                 /* n_staging packed experts being streamed */
	size_t hx_b, hw_b, hids_b, hpack_b;
	/* CPU side */
	void *cscratch;
	float *ycpu;
	int32_t *ids_cpu;
	int *route;                     /* per expert: 0 cpu, 1 device (hit), 2 streamed this step */
	int *hit_slot;                  /* slots read by this step's hits */
	hs_event **ev;                  /* [2 (1 + n_staging)]: around each launch, for device busy time */
	struct hs_lanes *lanes;         /* the task graph's lane threads, kept for every step */
	struct hs_step_bufs *bufs;      /* where the buffers above come from */
	int own_bufs;                   /* 1: made for this layer alone (freed with it) */
};

/* Sets up the device side of layer l for batches of up to max_n tokens:
 * n_cached cache slots (filled by hs__hybrid_cache) and n_staging slots for
 * streaming.  pool runs the CPU side. */
int hs__hybrid_open(struct hs_hybrid *h, const struct hs_moe_layer *l, struct hs_device *d, struct hs_pool *pool,
		    int max_n, int n_cached, int n_staging);
/* The same with the step buffers of shared (made for this shape, max_n
 * and, when n_staging > 0, with streams); the caller frees them after
 * every layer that uses them. */
int hs__hybrid_open_shared(struct hs_hybrid *h, const struct hs_moe_layer *l, struct hs_device *d,
			   struct hs_pool *pool, int max_n, int n_cached, int n_staging, struct hs_step_bufs *shared);
void hs__hybrid_close(struct hs_hybrid *h);
/* Puts expert e into cache slot `slot` (from host memory, through pinned
 * staging). */
int hs__hybrid_cache(struct hs_hybrid *h, int slot, int expert);
/* The same, but when the host view is packed and pinned (h->direct) the
 * copy is queued and not waited for: the compute queue waits for it, the
 * caller does not (admissions off the critical path). */
int hs__hybrid_admit(struct hs_hybrid *h, int slot, int expert);
/* Whether the host view can be copied from directly (packed layout) and,
 * pinned by the caller, use it from now on. */
int hs__hybrid_can_direct(const struct hs_hybrid *h);

/* y[n][n_embd] = the layer's MoE output for x with the given routing (ids
 * NULL: the layer's router).  mode: HS_MODE_CPU_COMPUTE (misses on the CPU),
 * HS_MODE_PCIE_STREAM (misses streamed to the device), HS_MODE_HYBRID
 * (a share q of the missed experts streamed, the rest on the CPU; q < 0:
 * the cost model's share, hs__hybrid_share(), from live estimates of the
 * CPU's, the copies' and the device's speeds and this step's hits and
 * misses; 0.5 until every lane was seen). */
int hs__hybrid_forward(struct hs_hybrid *h, int n, const float *x, const int32_t *ids, const float *weights,
		       float *y, enum hs_mode mode, double q, struct hs_layer_stats *st);

/* The fused FFN's three steps on the pool (the job prepared). */
struct hs_ffn_job;
void hs__ffn_run_pool(struct hs_ffn_job *job, struct hs_pool *pool);

#endif
