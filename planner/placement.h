/* Planner internals shared by planner.c (inputs, budgets, the search) and
 * placement.c (one candidate's placement and costs, the plan's figures). */
#ifndef HS_PLACEMENT_H
#define HS_PLACEMENT_H

#include "hotset.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)
#define ASSUME_DISK_GBPS 2.0 /* page-cache refills from an NVMe disk, for host experts over the RAM budget */
#define MIN_SLOTS_PER_K 2    /* a layer's cache needs >= 2k slots to help */
#define STAGING_PER_K 2      /* staging slots per expert of k: the runtime's, in every host layer */

/* What one planning call knows: the inputs, the rates per node, the hit curves. */
struct ctx {
	const struct hs_model_desc *m;
	const struct hs_profile *pf;
	const struct hs_profile_gpu *g; /* NULL: no GPU */
	struct hs_plan *out;
	int L, E, k;
	double S, P_e;                  /* bytes and parameters of one expert */
	double slot_bytes;              /* one packed expert in a device slot (hs__expert_pack_layout) */
	double ws_gpu_layer, ws_host_layer; /* device buffers of one MoE layer besides its slots (its slot
					       table; the step buffers are shared and in vram_fixed) */
	int staging;                    /* staging slots of a host layer (the runtime's 2k) */
	int cpu_node;                   /* profile index */
	double Br[HS_MAX_NODES];        /* node j's cores reading node j's memory */
	double Bc[HS_MAX_NODES];        /* CPU kernel on node j, on the experts' types */
	double Fc[HS_MAX_NODES];        /* CPU GFLOP/s on node j (as FLOP/s) */
	double Bd[HS_MAX_NODES], Fd[HS_MAX_NODES]; /* the same for the dense part's matrices */
	double Bp[HS_MAX_NODES];        /* pinned copies from node j */
	double Bg, Fg;                  /* GPU memory B/s, GPU FLOP/s */
	double *cum;                    /* [L][E + 1] cumulative routing share of the s hottest */
	int *order;                     /* layers in the order they go to the host */
	double vram_fixed, vram_budget;
	double ram_budget[HS_MAX_NODES];
};

/* One candidate: n host layers with their nodes and slots, and its costs. */
struct cand {
	int n_host;
	int host[HS_MAX_LAYERS];      /* 1 = host layer (index = MoE layer) */
	int node[HS_MAX_LAYERS];      /* profile node of a host layer */
	int slots[HS_MAX_LAYERS];
	double t_mode[4];             /* whole decode per mode */
	double t_best;
	enum hs_mode mode;
	double ram_need[HS_MAX_NODES];
	double thrash[HS_MAX_NODES];  /* share of a node's host experts over its budget */
	int ram_over, vram_over, cache_small, slots_left;
	double vram_used;
};

/* Builds candidate k with n host layers: assigns nodes, checks memory and
 * gives the VRAM left as cache slots to the most used experts of the host
 * layers (slots per layer need not be equal).  Returns 0, or -ENOMEM. */
int hs__plan_build(const struct ctx *c, const struct hs_plan_opts *o, int n, struct cand *k);
/* Writes the chosen candidate's placement, modes and predictions into c->out. */
void hs__plan_fill(const struct ctx *c, const struct hs_plan_opts *o, const struct cand *k);

#endif
