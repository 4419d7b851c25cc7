/* hotset/runtime.h: loading a model across CPU and GPU: options, the MoE
 * layer call, reports.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_RUNTIME_H
#define HOTSET_RUNTIME_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

struct hs_runtime_opts {
	const char *device;        /* "cpu" (no device: everything on the CPU), "sim", "cuda", or NULL
				      ($HOTSET_DEVICE, else cuda if a device answers, else cpu: what
				      `hotset run` does); another name is refused */
	const char *plan_path;     /* a plan JSON from `hotset plan -o`; NULL = plan now */
	const struct hs_plan *plan; /* or a plan in memory (copied at open); wins over plan_path */
	const char *trace_path;    /* record every forward()'s routing here (NULL: no trace) */
	const char *replay_path;   /* a trace whose routing replaces the router (ids NULL in forward);
				      each layer takes its records in order */
	const struct hs_profile *profile; /* for planning now; NULL = this machine's topology */
	enum hs_mode mode;         /* HS_MODE_NONE = the plan's modes; else forced for every host layer */
	double q;                  /* hybrid: share of missed experts streamed, 0..1; < 0 (auto, the
				      default: -1) = the plan's, or with a forced hybrid mode the cost
				      model's share from live estimates of the CPU, copy and device
				      speeds and each step's hits and misses.  0 is not the default */
	int max_tokens;            /* the largest batch forward() gets (0: 512; at most 65536) */
	/* The contexts it will serve, for a plan made now (their KV cache's device
	 * memory): ctx tokens (0: 4096, as a context's; at most the model's context_length)
	 * of kv_type for n_seq sequences (0: 1; at most HS_MAX_SEQ); the prediction's
	 * prefill batch is max_tokens. */
	int ctx, n_seq;
	enum hs_kv_type kv_type;
	int threads;               /* CPU workers (0: the plan's; at most 4 x the online CPUs) */
	int admit_per_step;        /* cache admissions per layer step (default 1; 0 = static cache,
				      so a zero here is not the default) */
	const char *cache_policy;  /* "lru" (NULL), "lfu", "lfru", "static" or "none" */
	const float *routing_freq; /* optional [MoE layers][experts] routing profile: caches start
				      with each layer's most used experts (static keeps them) */
	hs_progress_fn progress;   /* loading progress, may be NULL */
	void *progress_ctx;
	/* asked before every layer is loaded (right after its progress report) and
	 * by hs_context_create() while it loads the dense weights; NULL: never */
	hs_abort_fn abort;
	void *abort_ctx;
};
/* The defaults, what opts NULL means: device NULL, q -1, max_tokens 512,
 * n_seq 1, admit_per_step 1, the rest zero. */
struct hs_runtime_opts hs_runtime_opts_default(void);

/* What one layer did over all forward() calls so far. */
struct hs_layer_report {
	int layer;
	enum hs_placement placement;
	int slots;
	int cpu_only;              /* no device side (degraded or planned without a GPU) */
	int os_node;               /* node of its host experts, -1 = none */
	uint64_t host_expert_bytes;        /* host copy of its experts */
	uint64_t node_bytes[HS_MAX_NODES]; /* where those pages are, by node number (measured) */
	long steps, pairs, hits, misses_cpu, misses_streamed, admitted;
	uint64_t host_bytes_read, pcie_bytes;
	double wall_s, busy_s[4];  /* lanes: host, cpu, gpu, copy */
};

/* Ownership and threads: the runtime owns everything it loads; the caller
 * owns x, ids, weights and y of each call.  One thread at a time may call
 * a runtime (internally it runs its own lane and worker threads); separate
 * runtimes are independent.
 *
 * Loads a model for hybrid execution: host experts read into memory on the
 * plan's node, resident experts uploaded, cache and staging slots set up.
 * Every option is checked before anything loads: an unknown device name,
 * mode or KV type, q NaN or above 1, a count outside its range above, a
 * plan or profile whose counts leave their arrays is -EINVAL naming the
 * field and its limit.  A known device that cannot be opened, or holds
 * less than planned, degrades layers to the CPU with a warning line in
 * hs_runtime_describe() (and the log); never aborts.  Free with
 * hs_runtime_close(). */
int hs_runtime_open(const char *model_path, const struct hs_runtime_opts *opts, hs_runtime **out);
void hs_runtime_close(hs_runtime *rt);
/* One MoE layer (block index) for n tokens: y = the layer's MoE output
 * (ids/weights NULL: its router).  Not thread-safe: one caller at a time. */
int hs_runtime_forward(hs_runtime *rt, int layer, int n, const float *x, const int32_t *ids, const float *weights,
		       float *y);
/* Report of a layer; -EINVAL if it is not a MoE layer. */
int hs_runtime_layer_report(const hs_runtime *rt, int layer, struct hs_layer_report *out);
/* Changes the mode (HS_MODE_NONE: the plan's) and hybrid share (q 0..1;
 * q < 0: the plan's or live) for later forward() calls.  -EINVAL for an
 * unknown mode or q NaN or above 1 (nothing changes). */
int hs_runtime_set_mode(hs_runtime *rt, enum hs_mode mode, double q);
/* Changes the cache policy ("lru", "lfu", "lfru", "static", "none") and
 * the admissions per layer step (0 or more) for later calls. */
int hs_runtime_set_cache_policy(hs_runtime *rt, const char *policy, int admit_per_step);
/* Changes the CPU workers to n threads (1 .. the CPUs online), bound as at
 * open to the plan's node's CPUs, for later calls and the contexts over
 * rt.  Not while a call on rt or one of its contexts runs.  -EINVAL,
 * -EAGAIN (a thread could not start: the old workers stay). */
int hs_runtime_set_threads(hs_runtime *rt, int n);
/* The number of CPU workers; -EINVAL when rt is NULL. */
int hs_runtime_threads(const hs_runtime *rt);
/* Puts every cache back as it was at open (the routing profile's most
 * used experts, else the first ones) and zeroes the layer reports, so
 * runs that follow start alike. */
int hs_runtime_reset(hs_runtime *rt);
/* The model the runtime runs; owned by rt. */
const struct hs_model_info *hs_runtime_model_info(const hs_runtime *rt);
/* Lines saying what was loaded where and what was lost; owned by rt. */
const char *hs_runtime_describe(const hs_runtime *rt);

#endif /* HOTSET_RUNTIME_H */
