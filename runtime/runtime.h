/* The runtime's insides, shared by its files: runtime.c (open, the MoE
 * layers, reports), weights.c (the dense part on the device), forward.c
 * and context.c (the whole model).  Not part of the public API. */
#ifndef HS_RUNTIME_H
#define HS_RUNTIME_H

#include "hotset.h"
#include "model/whole.h"
#include "runtime/hybrid.h"
#include "runtime/numa-place.h"

struct rt_layer {
	int moe;                      /* 1 for MoE layers */
	struct hs_plan_layer plan;
	struct hs_host_layer host;    /* host copy of the experts (host layers) */
	const struct hs_moe_layer *view; /* what the CPU reads: the host copy or the model mapping */
	int device;                   /* 1 = a hybrid layer on the device */
	struct hs_hybrid h;
	int *last_used;               /* [slots] step a cache slot was last hit */
	long *count;                  /* [experts] pairs routed so far (LFU) */
	double *score;                /* [experts] recency-weighted pairs (LFRU) */
	long *score_at;               /* [experts] step the score was decayed to */
	int moe_index;                /* its row in the routing profile */
	int pinned;                   /* host.mem is pinned for DMA */
	struct hs_layer_report rep;
};

struct hs_runtime {
	hs_model *m;
	struct hs_device *d;
	struct hs_pool *pool;
	int *cpus, n_cpus;              /* the CPUs the workers are bound to (none: unbound) */
	struct hs_step_bufs *step_bufs; /* shared by the layers' device sides (they run one at a time) */
	struct hs_plan plan;
	struct hs_runtime_opts o;
	int n_layers;
	struct rt_layer *layers;
	void *cscratch;               /* CPU-only layers */
	size_t cscratch_b;
	char *desc;
	size_t desc_len, desc_cap;
	hs_trace_writer *trace;
	long trace_step;
	hs_trace *replay;
	int *replay_next;             /* per layer: the next trace record to look at */
	/* the whole model (loaded by the first context) */
	const struct hs_whole *whole;  /* host view in the model's mapping */
	struct hs_whole *dwhole;       /* the same on the device (dense weights in device memory), or NULL */
	void **dwhole_bufs;            /* device buffers behind dwhole */
	int n_dwhole_bufs;
	struct hs_whole *cwhole;       /* the CPU backend's view: Q8_0/MXFP4 matrices repacked, or NULL */
	void *cwhole_buf;              /* the host buffer behind cwhole (NUMA-placed) or NULL, and its size */
	size_t cwhole_bytes;
	int n_contexts;
};

/* One MoE layer (block index) for n tokens with the given routing: the
 * runtime's placement, mode and cache, as hs_runtime_forward without its
 * checks, tracing or replay.  y is overwritten. */
int hs__runtime_moe(hs_runtime *rt, int layer, int n, const float *x, const int32_t *ids, const float *weights,
		    float *y);
/* -ECANCELED naming `what` when the abort callback of the runtime's
 * options asks to stop, else 0. */
int hs__runtime_aborted(hs_runtime *rt, const char *what);
/* Appends a line to hs_runtime_describe(). */
void hs__runtime_say(hs_runtime *rt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));


#endif
