/* Planner internals other folders use (pure functions). */
#ifndef HS_PLANNER_H
#define HS_PLANNER_H

#include "hotset.h"

/* Rows of logits a context computes at once (runtime/forward.c keeps a
 * buffer of this many; a whole ubatch of gpt-oss's vocabulary would be
 * 393 MiB). */
#define HS_LOGITS_ROWS 32

/* The Zipf exponent a for which the top_n of n items (weights (i+1)^-a)
 * take `share` of the total: the default skew and `trace gen` use it. */
double hs__zipf_alpha(int n, int top_n, double share);

/* The cost model of one host layer (DESIGN.md §5), shared by the planner,
 * `trace project`, `hotset bench` and the runtime's live hybrid share. */
struct hs__rates {
	double cpu_Bps, cpu_flops; /* CPU expert kernel: expert bytes/s at 1 token, FLOP/s at a batch
				      (a FLOP rate <= 0: unmeasured, not counted) */
	double read_Bps;           /* host memory read bandwidth */
	double pcie_Bps;           /* pinned host-to-device copies */
	double gpu_Bps, gpu_flops; /* device expert kernel: bytes/s, FLOP/s */
	int gpu;                   /* 0: no device, every expert on the CPU */
	double step_s;             /* the host's fixed cost of a layer step (its task graph's thread
				      hand-offs; 0 = none counted) */
	double sync_s;             /* the fixed cost of a layer step with a device (x up, y down, events);
				      0 = the model's default, 25 us */
	int device_cores;          /* 0: the device computes and copies on its own engines; n > 0: on n
				      host cores it shares between its kernels and its copies (the sim
				      device; 1 core runs them one after the other) */
};

/* One step of a host layer: U tokens pick k of E experts each; `slots` of
 * them are cached on the device and take a share h of the (token, expert)
 * pairs; S bytes per expert, flop_pair FLOPs per pair; disk_s seconds of
 * page-cache refills for the misses (0 = none).  Stream mode streams as
 * many misses as max_streamed allows and computes the rest on the CPU. */
struct hs__layer_step {
	double S, flop_pair;
	int E, k, slots;
	double h, U, disk_s;
	int max_streamed;  /* experts streamed per step at most (0 = no limit; < 0 = none: every
			      staging slot holds a hit of the step) */
	double admit_experts; /* cache admissions per step: copies that share the copy lane */
};

struct hs__cost {
	double t[4];             /* seconds by mode (index = enum hs_mode; 0 unused) */
	const char *bound[4];    /* what limits each mode */
	double q;                /* hybrid: share of missed experts streamed */
	double miss_experts, hit_experts; /* distinct experts read from host and device memory */
};

/* Each lane takes the longer of reading its experts and computing its
 * pairs; cpu-compute = max(CPU, device hits), pcie-stream = max(device
 * hits + misses, copies) + the pipeline's tail, hybrid = the share q that
 * lets the CPU and the device side finish together, held to host memory's
 * read bandwidth.  A fixed hand-off cost is added with a device. */
void hs__layer_cost(const struct hs__rates *r, const struct hs__layer_step *w, struct hs__cost *out);

/* Distinct experts a batch of U tokens touches among n equally likely
 * ones with `per_token` picks each. */
double hs__touched(double n, double per_token, double U);

/* The hybrid share q in [0, 1] minimising max((1-q) a, g0 + q g, q p):
 * a = CPU time of all misses, g0 = device time of the hits, g = device
 * time of all misses, p = copy time of all misses. */
double hs__hybrid_share(double a, double g0, double g, double p);

/* Device allocations a runtime and one context make under these options
 * (the sim adds 256 bytes of bookkeeping to each; tests/test-vram.c). */
int hs__plan_device_buffers(const struct hs_model_desc *m, const struct hs_plan_opts *o);

/* A plan or profile a caller hands in: every count
 * within its struct's arrays, every enum known, every string ended inside
 * its array, so that nothing reads past the struct.  0, or -EINVAL naming
 * the field and the limit. */
int hs__plan_check(const struct hs_plan *p);
int hs__profile_check(const struct hs_profile *p);
/* The expert type a kernel speed point was measured with (0 reads as MXFP4). */
int hs__kspeed_type(const struct hs_kernel_speed *k);

/* Whether the char array a (of sizeof a bytes) holds its NUL. */
#define HS_STR_ENDED(a) (memchr((a), 0, sizeof(a)) != NULL)

#endif
