/* The hybrid runtime's public face: a model loaded with the plan's
 * placement, each MoE layer a hybrid layer (device + CPU pool) or a CPU-only
 * layer, forward() per layer, reports.  See docs/runtime.md. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_kernels/kernels.h"
#include "cpu_kernels/router.h"
#include "hotset.h"
#include "base/error.h"
#include "base/log.h"
#include "runtime/hybrid.h"
#include "model/model.h"
#include "planner/planner.h"
#include "runtime/numa.h"
#include "runtime/numa-place.h"
#include "runtime/runtime.h"

void hs__runtime_say(hs_runtime *rt, const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line)
		n = sizeof line - 1;
	/* The description is also the log: its warnings (a layer left to the
	 * CPU, a device that failed) at warning level, the rest at debug. */
	if (!strncmp(line, "warning: ", 9))
		hs__log(HS_LOG_WARN, "runtime: %s", line + 9);
	else
		hs__log(HS_LOG_DEBUG, "runtime: %s", line);
	if (rt->desc_len + (size_t)n + 2 > rt->desc_cap) {
		size_t cap = rt->desc_cap ? 2 * rt->desc_cap + (size_t)n : 1024;
		char *d = realloc(rt->desc, cap);
		if (!d)
			return;
		rt->desc = d;
		rt->desc_cap = cap;
	}
	memcpy(rt->desc + rt->desc_len, line, (size_t)n);
	rt->desc_len += (size_t)n;
	rt->desc[rt->desc_len++] = '\n';
	rt->desc[rt->desc_len] = '\0';
}

static void progress(hs_runtime *rt, const char *what, double f)
{
	if (rt->o.progress)
		rt->o.progress(what, f, rt->o.progress_ctx);
}

const struct hs_model_info *hs_runtime_model_info(const hs_runtime *rt)
{
	HS_NEED(rt, NULL);
	return hs_model_info(rt->m);
}

const char *hs_runtime_describe(const hs_runtime *rt)
{
	HS_NEED(rt, NULL);
	return rt->desc ? rt->desc : "";
}

struct hs_runtime_opts hs_runtime_opts_default(void)
{
	/* ctx 0: 4096 (a context's default); the zeros a caller may leave are defaults */
	return (struct hs_runtime_opts){ .q = -1, .max_tokens = 512, .ctx = 0, .n_seq = 1, .admit_per_step = 1 };
}

/* The largest batch hs_runtime_opts.max_tokens may ask for (the CLI's
 * --ubatch stops at 8192; scratch grows with it). */
#define HS_RUNTIME_MAX_TOKENS 65536

/* The cache policies a runtime knows, as hs_runtime_opts and
 * hs_runtime_set_cache_policy() name them; NULL for another name. */
static const char *known_policy(const char *name)
{
	static const char *const known[] = { "lru", "lfu", "lfru", "static", "none" };
	for (int i = 0; name && i < 5; i++)
		if (strcmp(name, known[i]) == 0)
			return known[i];
	return NULL;
}

/* Every option is checked before anything loads, so that a value is
 * refused here with its limit rather than accepted and failing (or
 * starting 1000 workers) later. */
static int check_opts(const struct hs_runtime_opts *o, const char *device)
{
	int rc;

	if (device && strcmp(device, "cpu") && strcmp(device, "sim") && strcmp(device, "cuda"))
		return hs__error(EINVAL, "runtime: device '%s'%s is not one of cpu, sim, cuda", device,
				 o->device ? "" : " (from $HOTSET_DEVICE)");
	if ((unsigned)o->mode > HS_MODE_HYBRID)
		return hs__error(EINVAL, "runtime: mode %d (HS_MODE_NONE %d .. HS_MODE_HYBRID %d)", (int)o->mode,
				 HS_MODE_NONE, HS_MODE_HYBRID);
	if (!(o->q <= 1) || !isfinite(o->q)) /* NaN fails every comparison */
		return hs__error(EINVAL, "runtime: q %g: a share of 0..1, or negative for the plan's (auto)", o->q);
	if (o->max_tokens < 0 || o->max_tokens > HS_RUNTIME_MAX_TOKENS)
		return hs__error(EINVAL, "runtime: max_tokens %d (0: 512, at most %d)", o->max_tokens,
				 HS_RUNTIME_MAX_TOKENS);
	if (o->ctx < 0 || o->n_seq < 0 || o->n_seq > HS_MAX_SEQ)
		return hs__error(EINVAL, "runtime: ctx %d, n_seq %d (0: the defaults; n_seq at most %d)", o->ctx, o->n_seq,
				 HS_MAX_SEQ);
	if ((long)o->ctx * o->n_seq > (1l << 31) - 1)
		return hs__error(EINVAL, "runtime: %d sequences of %d positions exceed 2^31 cells", o->n_seq, o->ctx);
	if (o->kv_type != HS_KV_F16 && o->kv_type != HS_KV_Q8_0)
		return hs__error(EINVAL, "runtime: KV type %d (HS_KV_F16 or HS_KV_Q8_0)", (int)o->kv_type);
	if ((rc = hs__check_threads(o->threads, "runtime")))
		return rc;
	if (o->admit_per_step < 0)
		return hs__error(EINVAL, "runtime: admit_per_step %d (0 = a static cache, or more)", o->admit_per_step);
	if (o->cache_policy && !known_policy(o->cache_policy))
		return hs__error(EINVAL, "cache policy '%s': lru, lfu, lfru, static or none", o->cache_policy);
	if ((o->plan && (rc = hs__plan_check(o->plan))) || (o->profile && (rc = hs__profile_check(o->profile))))
		return rc;
	return 0;
}

void hs_runtime_close(hs_runtime *rt)
{
	if (!rt)
		return;
	for (int i = 0; rt->layers && i < rt->n_layers; i++) {
		struct rt_layer *L = &rt->layers[i];
		if (L->device)
			hs__hybrid_close(&L->h);
		if (L->pinned)
			hs__device_unpin(rt->d, L->host.mem, L->host.bytes);
		hs__host_layer_free(&L->host);
		free(L->last_used);
		free(L->count);
		free(L->score);
		free(L->score_at);
	}
	free(rt->layers);
	hs__step_bufs_free(rt->step_bufs);
	for (int i = 0; i < rt->n_dwhole_bufs; i++)
		rt->d->ops->free(rt->d->dev, rt->dwhole_bufs[i]);
	free(rt->dwhole_bufs);
	hs__whole_free(rt->dwhole);
	hs__numa_free(rt->cwhole_buf, rt->cwhole_bytes);
	hs__whole_free(rt->cwhole);
	if (rt->trace)
		hs_trace_writer_close(rt->trace, 1);
	hs_trace_free(rt->replay);
	free(rt->replay_next);
	hs__pool_free(rt->pool);
	free(rt->cpus);
	hs__device_close(rt->d);
	hs_model_free(rt->m);
	free(rt->cscratch);
	free(rt->desc);
	free(rt);
}

int hs__runtime_aborted(hs_runtime *rt, const char *what)
{
	if (rt->o.abort && rt->o.abort(rt->o.abort_ctx))
		return hs__error(ECANCELED, "runtime: %s cancelled by the abort callback", what);
	return 0;
}

/* The plan: from the file, or made now for this machine and device. */
static int get_plan(hs_runtime *rt)
{
	if (rt->o.plan) {
		rt->plan = *rt->o.plan;
		return 0;
	}
	if (rt->o.plan_path)
		return hs_plan_load(rt->o.plan_path, &rt->plan);
	struct hs_model_desc *md = calloc(1, sizeof *md);
	struct hs_profile *pf = calloc(1, sizeof *pf);
	hs_topology *t = NULL;
	int rc = -ENOMEM;
	if (!md || !pf)
		goto out_free;
	if ((rc = hs_model_desc_from_model(rt->m, md)))
		goto out_free;
	if (rt->o.profile) {
		*pf = *rt->o.profile;
	} else {
		if ((rc = hs_topology_open(NULL, &t)) || (rc = hs_profile_from_topology(t, pf)))
			goto out_free;
	}
	struct hs_plan_opts po = { .gpu = -1,
				   .ctx = rt->o.ctx > 0 ? rt->o.ctx : 4096,
				   .kv_type = rt->o.kv_type,
				   .n_seq = rt->o.n_seq > 0 ? rt->o.n_seq : 1,
				   .ubatch = rt->o.max_tokens,
				   .host_layers = -1 };
	if (rt->d) { /* plan for the device actually opened */
		uint64_t fr = 0, tot = 0;
		rt->d->ops->mem_info(rt->d->dev, &fr, &tot);
		if (pf->n_gpus == 0) {
			pf->n_gpus = 1;
			memset(&pf->gpus[0], 0, sizeof pf->gpus[0]);
			pf->gpus[0].cuda_index = -1;
		}
		snprintf(pf->gpus[0].name, sizeof pf->gpus[0].name, "%s", rt->d->ops->describe(rt->d->dev));
		pf->gpus[0].memory_total_bytes = tot;
		pf->gpus[0].memory_free_bytes = fr;
		po.gpu = 0;
	}
	rc = hs_plan_make(md, pf, &po, &rt->plan);
out_free:
	hs_topology_free(t);
	free(md);
	free(pf);
	return rc;
}

static int warm_fill(hs_runtime *rt, struct rt_layer *L);

static int setup_layer(hs_runtime *rt, int li)
{
	struct rt_layer *L = &rt->layers[li];
	const struct hs_moe_layer *ml = hs__model_layer(rt->m, li);
	const int E = ml->n_experts, K = ml->n_used;
	int rc;

	L->view = ml;
	L->rep.layer = li;
	L->rep.placement = L->plan.placement;
	L->rep.os_node = -1;
	if (L->plan.placement != HS_PLACEMENT_GPU) {
		/* host experts on the plan's node; the model mapping if that fails */
		int node = L->plan.n_numa_nodes ? L->plan.numa_nodes[0] : 0;
		if ((rc = hs__host_layer_load(rt->m, li, node, &L->host)) == 0) {
			L->view = &L->host.l;
			L->rep.os_node = node;
			L->rep.host_expert_bytes = L->host.bytes;
			memcpy(L->rep.node_bytes, L->host.node_bytes, sizeof L->rep.node_bytes);
		} else {
			hs__runtime_say(rt, "warning: layer %d: host experts stay in the file mapping (%s)", li, hs_last_error());
		}
	}
	if (!rt->d)
		return 0;
	int n_cached = L->plan.placement == HS_PLACEMENT_GPU ? E : L->plan.slots;
	int n_staging = L->plan.placement == HS_PLACEMENT_GPU ? 0 : (2 * K < E - n_cached ? 2 * K : E - n_cached);
	if (n_cached > E - n_staging)
		n_cached = E - n_staging;
	if (n_cached + n_staging < 1)
		return 0;
	if (!rt->step_bufs && (rc = hs__step_bufs_create(rt->d, L->view, rt->o.max_tokens, 1, &rt->step_bufs))) {
		hs__runtime_say(rt, "warning: layer %d: no device side (%s); the CPU computes all its experts", li,
				hs_last_error());
		L->rep.cpu_only = 1;
		return 0;
	}
	rc = hs__hybrid_open_shared(&L->h, L->view, rt->d, rt->pool, rt->o.max_tokens, n_cached, n_staging,
				    rt->step_bufs);
	if (rc == -ENOMEM && L->plan.placement == HS_PLACEMENT_GPU) {
		/* not all resident: keep it on the host with what fits as cache */
		hs__runtime_say(rt, "warning: layer %d: the device cannot hold all %d experts (%s); it runs from host memory", li, E,
		    hs_last_error());
		return 0;
	}
	if (rc) {
		hs__runtime_say(rt, "warning: layer %d: no device side (%s); the CPU computes all its experts", li, hs_last_error());
		L->rep.cpu_only = 1;
		return 0;
	}
	L->device = 1;
	L->rep.slots = n_cached;
	/* host experts packed like slots: pin them and copy straight from them
	 * (registered between experts: one expert's copy stays in one piece) */
	if (L->host.mem && hs__hybrid_can_direct(&L->h)) {
		if (hs__device_pin_units(rt->d, L->host.mem, L->host.bytes, L->h.pack.bytes, 0) == 0) {
			L->pinned = 1;
			L->h.direct = 1;
		} else {
			hs__runtime_say(rt, "warning: layer %d: host experts not pinned (%s); streamed experts go through a staging copy",
			    li, hs_last_error());
		}
	}
	L->last_used = calloc(n_cached > 0 ? n_cached : 1, sizeof *L->last_used);
	L->count = calloc(E, sizeof *L->count);
	L->score = calloc(E, sizeof *L->score);
	L->score_at = calloc(E, sizeof *L->score_at);
	if (!L->last_used || !L->count || !L->score || !L->score_at)
		return hs__error(ENOMEM, "runtime: out of memory");
	return warm_fill(rt, L);
}

/* Resident layers: every expert uploaded.  Cache layers: the most used
 * experts of the routing profile, else the first ones, until admissions
 * replace them by use. */
static int warm_fill(hs_runtime *rt, struct rt_layer *L)
{
	const int E = L->view->n_experts, n_cached = L->h.n_cached;
	const float *freq = rt->o.routing_freq ? rt->o.routing_freq + (size_t)L->moe_index * E : NULL;
	char *taken = calloc(E, 1);
	int rc = 0;
	if (!taken)
		return hs__error(ENOMEM, "runtime: out of memory");
	for (int s = 0; s < n_cached && !rc; s++) {
		int e = s;
		if (freq && L->plan.placement != HS_PLACEMENT_GPU) {
			e = -1;
			for (int j = 0; j < E; j++)
				if (!taken[j] && (e < 0 || freq[j] > freq[e]))
					e = j;
		}
		taken[e] = 1;
		rc = hs__hybrid_cache(&L->h, s, e);
	}
	free(taken);
	return rc;
}

int hs_runtime_reset(hs_runtime *rt)
{
	HS_NEED(rt, -EINVAL);
	for (int li = 0; li < rt->n_layers; li++) {
		struct rt_layer *L = &rt->layers[li];
		if (!L->moe)
			continue;
		struct hs_layer_report keep = L->rep;
		memset(&L->rep, 0, sizeof L->rep);
		L->rep.layer = keep.layer;
		L->rep.placement = keep.placement;
		L->rep.slots = keep.slots;
		L->rep.cpu_only = keep.cpu_only;
		L->rep.os_node = keep.os_node;
		L->rep.host_expert_bytes = keep.host_expert_bytes;
		memcpy(L->rep.node_bytes, keep.node_bytes, sizeof keep.node_bytes);
		if (!L->device)
			continue;
		const int E = L->view->n_experts;
		memset(L->last_used, 0, sizeof *L->last_used * (size_t)(L->h.n_cached > 0 ? L->h.n_cached : 1));
		memset(L->count, 0, sizeof *L->count * (size_t)E);
		memset(L->score, 0, sizeof *L->score * (size_t)E);
		memset(L->score_at, 0, sizeof *L->score_at * (size_t)E);
		int rc = 0;
		for (int sl = 0; sl < L->h.slots->n_slots && !rc; sl++) /* staging too: it counts as hits */
			rc = hs__slots_evict(L->h.slots, sl, L->h.qx);
		if (!rc)
			rc = L->h.d->ops->queue_sync(L->h.qx);
		if (!rc)
			rc = warm_fill(rt, L);
		if (rc)
			return rc;
	}
	return 0;
}

int hs_runtime_open(const char *model_path, const struct hs_runtime_opts *opts, hs_runtime **out)
{
	struct hs_runtime_opts def = hs_runtime_opts_default();
	int rc;

	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(model_path, -EINVAL);
	if (!opts)
		opts = &def;
	/* NULL: what `hotset run` does, with $HOTSET_DEVICE first (docs/device.md) */
	const char *want = opts->device ? opts->device : getenv("HOTSET_DEVICE");
	if (want && !*want)
		want = NULL;
	if ((rc = check_opts(opts, want)))
		return rc;
	hs_runtime *rt = calloc(1, sizeof *rt);
	if (!rt)
		return hs__error(ENOMEM, "runtime: out of memory");
	rt->o = *opts;
	if (rt->o.max_tokens == 0)
		rt->o.max_tokens = 512;
	if (!want)
		want = hs_cuda_device_count() > 0 ? "cuda" : "cpu";
	if ((rc = hs_model_open(model_path, &rt->m)))
		goto out_close;
	const struct hs_model_info *in = hs_model_info(rt->m);
	if (in->whole && rt->o.ctx > in->n_ctx_train) {
		rc = hs__error(EINVAL, "runtime: ctx %d is more than %s's context_length %d", rt->o.ctx, model_path,
			       in->n_ctx_train);
		goto out_close;
	}
	if (strcmp(want, "cpu") == 0) {
		hs__runtime_say(rt, "device: none (cpu): every expert runs on the CPU");
		rt->d = NULL;
	} else if (hs__device_open(want, 0, &rt->d)) {
		hs__runtime_say(rt, "warning: no device (%s): every expert runs on the CPU", hs_last_error());
		rt->d = NULL;
	} else {
		hs__runtime_say(rt, "device: %s", rt->d->ops->describe(rt->d->dev));
	}
	if ((rc = get_plan(rt)))
		goto out_close;
	if (strcmp(rt->plan.model, in->name[0] ? in->name : "model") != 0 && (rt->o.plan_path || rt->o.plan))
		hs__runtime_say(rt, "note: the plan was made for '%s', the model is '%s'", rt->plan.model, in->name);
	int threads = rt->o.threads > 0 ? rt->o.threads : rt->plan.cpu_threads > 0 ? rt->plan.cpu_threads : 1;
	if (threads > hs__max_threads()) { /* a plan made for a larger machine */
		hs__runtime_say(rt, "note: the plan's %d CPU threads are more than this machine takes; %d run", threads,
				hs__max_threads());
		threads = hs__max_threads();
	}
	/* workers bound to the cores of the plan's CPU node, one per core */
	int free_cpus[4096];
	int n_free = 0;
	{
		hs_topology *t = NULL;
		int cpus[4096], n_cpus = 0;
		if (hs_topology_open(NULL, &t) == 0) {
			for (int i = 0; i < hs_topology_n_nodes(t); i++) {
				const struct hs_numa_node *nd = hs_topology_node(t, i);
				if (nd->os_index != rt->plan.cpu_node)
					continue;
				for (int c = 0; c < nd->n_cpus && n_cpus < 4096; c++)
					cpus[n_cpus++] = nd->cpus[c];
			}
			hs_topology_free(t);
		}
		if (!n_cpus)
			hs__runtime_say(rt, "warning: node %d is not on this machine: CPU workers are not bound", rt->plan.cpu_node);
		else
			hs__runtime_say(rt, "CPU: %d workers bound to node %d's CPUs%s", threads, rt->plan.cpu_node,
					rt->d ? "" : " (the first is the calling thread, not bound)");
		/* without a device no thread drives one: the caller runs a slice (pool.h) */
		if ((rc = hs__pool_create(threads, cpus, n_cpus, rt->d == NULL, &rt->pool)))
			goto out_close;
		/* kept for hs_runtime_set_threads() */
		if (n_cpus && !(rt->cpus = malloc(sizeof *rt->cpus * n_cpus))) {
			rc = hs__error(ENOMEM, "runtime: out of memory");
			goto out_close;
		}
		if (n_cpus)
			memcpy(rt->cpus, cpus, sizeof *rt->cpus * n_cpus);
		rt->n_cpus = n_cpus;
		for (int c = threads; c < n_cpus; c++) /* what the workers leave */
			free_cpus[n_free++] = cpus[c];
	}
	rt->n_layers = in->n_layers;
	rt->layers = calloc(rt->n_layers, sizeof *rt->layers);
	if (!rt->layers) {
		rc = hs__error(ENOMEM, "runtime: out of memory");
		goto out_close;
	}
	for (int i = 0; i < rt->plan.n_layers; i++) {
		int b = rt->plan.layers[i].layer;
		if (b < 0 || b >= rt->n_layers || !hs_model_layer_is_moe(rt->m, b)) {
			rc = hs__error(EINVAL, "plan: layer %d is not a MoE layer of %s", b, model_path);
			goto out_close;
		}
		rt->layers[b].plan = rt->plan.layers[i];
		rt->layers[b].moe = 1;
		rt->layers[b].moe_index = i;
	}
	/* The lane threads and the device's queue threads start while the layers
	 * are set up and inherit this thread's CPUs: hold it to the CPUs the
	 * workers leave, so the threads that drive the device do not land on a
	 * worker's core (the scheduler wakes a thread next to its waker, and a
	 * worker pinned there then shares its core) */
	cpu_set_t saved;
	int restore = n_free > 0 && sched_getaffinity(0, sizeof saved, &saved) == 0 &&
		      hs__bind_thread(free_cpus, n_free) == 0;
	for (int li = 0; li < rt->n_layers && !rc; li++) {
		if (!hs_model_layer_is_moe(rt->m, li))
			continue;
		if (!rt->layers[li].moe) {
			rc = hs__error(EINVAL, "plan: it does not place MoE layer %d of %s", li, model_path);
			break;
		}
		char what[64];
		snprintf(what, sizeof what, "loading layer %d", li);
		progress(rt, what, (double)li / rt->n_layers);
		if ((rc = hs__runtime_aborted(rt, what)) || (rc = setup_layer(rt, li)))
			break;
		struct rt_layer *L = &rt->layers[li];
		if (L->rep.os_node >= 0)
			hs__runtime_say(rt, "layer %d: %s, %d slots%s; host experts %.1f MiB placed on node %d (measured there: %.1f MiB)",
			    li, hs_placement_name(L->plan.placement), L->rep.slots, L->device ? "" : " (CPU only)",
			    L->rep.host_expert_bytes / 1048576.0, L->rep.os_node,
			    L->rep.node_bytes[L->rep.os_node < HS_MAX_NODES ? L->rep.os_node : 0] / 1048576.0);
		else
			hs__runtime_say(rt, "layer %d: %s, %d slots%s", li, hs_placement_name(L->plan.placement), L->rep.slots,
			    L->device ? "" : " (CPU only)");
	}
	if (restore)
		sched_setaffinity(0, sizeof saved, &saved);
	if (rc)
		goto out_close;
	if (rt->o.trace_path) {
		int E = 0, K = 0;
		for (int li = 0; li < rt->n_layers && !E; li++)
			if (rt->layers[li].moe) {
				E = hs__model_layer(rt->m, li)->n_experts;
				K = hs__model_layer(rt->m, li)->n_used;
			}
		if ((rc = hs_trace_writer_open(rt->o.trace_path, E, K, &rt->trace)))
			goto out_close;
		hs__runtime_say(rt, "recording routing to %s", rt->o.trace_path);
	}
	if (rt->o.replay_path) {
		int nr, E, K;
		if ((rc = hs_trace_load(rt->o.replay_path, &rt->replay)))
			goto out_close;
		hs_trace_info(rt->replay, &nr, &E, &K);
		for (int li = 0; li < rt->n_layers; li++)
			if (rt->layers[li].moe &&
			    (E != hs__model_layer(rt->m, li)->n_experts || K != hs__model_layer(rt->m, li)->n_used)) {
				rc = hs__error(EINVAL, "replay %s: %d experts, %d used; layer %d has %d and %d",
					       rt->o.replay_path, E, K, li, hs__model_layer(rt->m, li)->n_experts,
					       hs__model_layer(rt->m, li)->n_used);
				goto out_close;
			}
		if (!(rt->replay_next = calloc(rt->n_layers, sizeof *rt->replay_next))) {
			rc = hs__error(ENOMEM, "runtime: out of memory");
			goto out_close;
		}
		hs__runtime_say(rt, "routing replayed from %s (%d records)", rt->o.replay_path, nr);
	}
	progress(rt, "loaded", 1.0);
	*out = rt;
	return 0;
out_close:
	if (rt->trace) { /* a runtime that never ran leaves no trace file */
		hs_trace_writer_close(rt->trace, 0);
		rt->trace = NULL;
	}
	hs_runtime_close(rt);
	return rc;
}

static int cpu_forward(hs_runtime *rt, struct rt_layer *L, int n, const float *x, const int32_t *ids,
		       const float *weights, float *y)
{
	const struct hs_moe_layer *l = L->view;
	int32_t *rid = NULL;
	float *rw = NULL;
	int rc;
	size_t need = (hs__ffn_scratch_bytes(l, n) + 63) & ~(size_t)63;

	if (need > rt->cscratch_b) {
		free(rt->cscratch);
		rt->cscratch = aligned_alloc(64, need);
		rt->cscratch_b = rt->cscratch ? need : 0;
		if (!rt->cscratch)
			return hs__error(ENOMEM, "runtime: no memory for CPU scratch");
	}
	if (!ids) {
		rid = malloc(sizeof *rid * (size_t)n * l->n_used);
		rw = malloc(sizeof *rw * (size_t)n * l->n_used);
		if (!rid || !rw || (rc = hs__moe_route(l, n, x, rid, rw)) != 0) {
			free(rid);
			free(rw);
			return rid && rw ? rc : hs__error(ENOMEM, "runtime: out of memory");
		}
		ids = rid;
		weights = rw;
	}
	struct hs_ffn_job job = { .layer = l, .ops = hs__kernels_best(), .n = n, .x = x, .ids = ids, .weights = weights,
				  .y = y, .scratch = rt->cscratch };
	memset(y, 0, sizeof *y * (size_t)n * l->n_embd);
	if (!(rc = hs__ffn_prepare(&job))) {
		hs__ffn_run_pool(&job, rt->pool);
		L->rep.pairs += job.n_pairs;
		L->rep.misses_cpu += job.n_pairs;
		L->rep.host_bytes_read += (uint64_t)job.n_active * hs__expert_pack_layout(l->type, l->n_embd, l->n_ff, 0).bytes;
	}
	free(rid);
	free(rw);
	return rc;
}

/* Admission after a step: up to admit_per_step missed experts with the
 * most pairs replace the policy's victim among the slots this step did not
 * hit: LRU the least recently hit, LFU the fewest pairs so far, LFRU the
 * lowest recency-weighted pairs.  Static and none admit nothing. */
#define LFRU_DECAY 0.9

static double lfru_now(const struct rt_layer *L, int e, long step)
{
	double s = L->score[e];
	for (long t = L->score_at[e]; t < step && s > 0; t++)
		s *= LFRU_DECAY;
	return s;
}

static void admit(hs_runtime *rt, struct rt_layer *L, int n, long step)
{
	struct hs_hybrid *h = &L->h;
	const int E = L->view->n_experts, P = n * L->view->n_used;
	const char *pol = rt->o.cache_policy ? rt->o.cache_policy : "lru";
	const int32_t *hit_ids = h->hids, *stream_ids = h->hids + h->hids_b / sizeof(int32_t);

	/* what this step routed, wherever it ran: pairs per expert */
	for (int p = 0; p < P; p++) {
		int e = hit_ids[p] >= 0 ? hit_ids[p] : stream_ids[p] >= 0 ? stream_ids[p] : h->ids_cpu[p];
		if (e < 0)
			continue;
		L->count[e]++;
		L->score[e] = lfru_now(L, e, step) + 1;
		L->score_at[e] = step;
	}
	for (int s = 0; s < h->n_cached; s++) {
		int e = h->slots->expert_in[s];
		if (e >= 0 && h->route[e] == 1)
			L->last_used[s] = (int)step;
	}
	if (!rt->o.admit_per_step || h->n_cached == 0 || !strcmp(pol, "static") || !strcmp(pol, "none"))
		return;
	for (int a = 0; a < rt->o.admit_per_step; a++) {
		int best = -1, best_count = 0;
		for (int e = 0; e < E; e++) {
			if (h->route[e] == 1 || h->slots->slot_of_host[e] >= 0)
				continue;
			int c = 0;
			for (int p = 0; p < P; p++)
				c += h->ids_cpu[p] == e;
			if (c > best_count) {
				best_count = c;
				best = e;
			}
		}
		if (best < 0)
			return;
		int victim = -1;
		double vv = 0;
		for (int s = 0; s < h->n_cached; s++) {
			int e = h->slots->expert_in[s];
			if (L->last_used[s] == (int)step && step > 0)
				continue; /* hit this step */
			double v = !strcmp(pol, "lfu")	 ? (double)(e >= 0 ? L->count[e] : -1)
				   : !strcmp(pol, "lfru") ? (e >= 0 ? lfru_now(L, e, step) : -1)
							  : (double)L->last_used[s];
			if (victim < 0 || v < vv) {
				victim = s;
				vv = v;
			}
		}
		if (victim < 0 || hs__hybrid_admit(h, victim, best))
			return; /* nothing cold to replace, or the upload failed: keep the cache as it is */
		L->last_used[victim] = (int)step;
		L->rep.admitted++;
		for (int p = 0; p < P; p++) /* counted once */
			if (h->ids_cpu[p] == best)
				h->ids_cpu[p] = -1;
	}
}

static int layer_forward(hs_runtime *rt, struct rt_layer *L, int n, const float *x, const int32_t *ids,
			 const float *weights, float *y);

int hs_runtime_forward(hs_runtime *rt, int layer, int n, const float *x, const int32_t *ids, const float *weights,
		       float *y)
{
	HS_NEED(rt, -EINVAL);
	HS_NEED(x, -EINVAL);
	HS_NEED(y, -EINVAL);
	if (ids && !weights)
		return hs__error(EINVAL, "forward: ids without weights");
	if (layer < 0 || layer >= rt->n_layers || !rt->layers[layer].moe)
		return hs__error(EINVAL, "forward: layer %d is not a MoE layer (0..%d)", layer, rt->n_layers - 1);
	if (n < 1 || n > rt->o.max_tokens)
		return hs__error(EINVAL, "forward: %d tokens; the runtime was opened for 1..%d", n, rt->o.max_tokens);
	struct rt_layer *L = &rt->layers[layer];
	int32_t *rid = NULL;
	float *rw = NULL;
	int rc;
	/* NaN or Inf would come out as NaN without a word */
	if ((rc = hs__check_finite(x, n, L->view->n_embd, "hidden states")) ||
	    (ids && weights && (rc = hs__check_finite(weights, n, L->view->n_used, "expert weights"))))
		return rc;
	if (rt->replay && !ids) { /* the trace's next record for this layer routes */
		int nr, E, K, step, lay, nt;
		const int32_t *tid;
		const float *tw;
		hs_trace_info(rt->replay, &nr, &E, &K);
		int i = rt->replay_next[layer];
		for (; i < nr; i++) {
			hs_trace_record(rt->replay, i, &step, &lay, &nt, &tid, &tw);
			if (lay == layer)
				break;
		}
		if (i == nr)
			return hs__error(ERANGE, "replay %s: no more records for layer %d", rt->o.replay_path, layer);
		if (nt != n)
			return hs__error(EINVAL, "replay %s: record %d of layer %d has %d tokens, forward got %d",
					 rt->o.replay_path, i, layer, nt, n);
		rt->replay_next[layer] = i + 1;
		ids = tid;
		weights = tw;
	}
	if (rt->trace && !ids) { /* route here, so that the trace records the routing */
		rid = malloc(sizeof *rid * (size_t)n * L->view->n_used);
		rw = malloc(sizeof *rw * (size_t)n * L->view->n_used);
		if (!rid || !rw || (rc = hs__moe_route(L->view, n, x, rid, rw))) {
			free(rid);
			free(rw);
			return rid && rw ? rc : hs__error(ENOMEM, "runtime: out of memory");
		}
		ids = rid;
		weights = rw;
	}
	rc = hs__runtime_moe(rt, layer, n, x, ids, weights, y);
	free(rid);
	free(rw);
	return rc;
}

int hs__runtime_moe(hs_runtime *rt, int layer, int n, const float *x, const int32_t *ids, const float *weights,
		    float *y)
{
	struct rt_layer *L = &rt->layers[layer];

	if (rt->trace && ids) {
		/* a step is one pass over the layers: it advances at the first MoE layer */
		int first = 0;
		while (!rt->layers[first].moe)
			first++;
		if (layer == first)
			rt->trace_step++;
		int rc = hs_trace_writer_add(rt->trace, (int)rt->trace_step, layer, n, ids, weights);
		if (rc)
			return rc;
	}
	return layer_forward(rt, L, n, x, ids, weights, y);
}

static int layer_forward(hs_runtime *rt, struct rt_layer *L, int n, const float *x, const int32_t *ids,
			 const float *weights, float *y)
{
	L->rep.steps++;
	if (!L->device)
		return cpu_forward(rt, L, n, x, ids, weights, y);
	/* the mode: forced, or the plan's for this batch size */
	enum hs_mode mode = rt->o.mode;
	double q = rt->o.q;
	int decode = n < rt->plan.ubatch / 16 + 1;
	if (mode == HS_MODE_NONE) {
		mode = decode ? rt->plan.decode_mode : rt->plan.prefill_mode;
		if (q < 0)
			q = decode ? rt->plan.decode_q : rt->plan.prefill_q;
	}
	if (mode == HS_MODE_NONE)
		mode = HS_MODE_CPU_COMPUTE; /* a resident layer: every expert is a hit */
	if (q < 0 && mode != HS_MODE_HYBRID) /* hybrid without a q: from the live estimates */
		q = mode == HS_MODE_PCIE_STREAM ? 1 : 0;
	struct hs_layer_stats st;
	int rc = hs__hybrid_forward(&L->h, n, x, ids, weights, y, mode, q, &st);
	if (rc == -EINVAL)
		return rc; /* the caller's input */
	if (rc) { /* the device failed: this layer continues on the CPU */
		hs__runtime_say(rt, "warning: layer %d: the device failed (%s); its experts run on the CPU from now on",
		    L->rep.layer, hs_last_error());
		hs__hybrid_close(&L->h);
		L->device = 0;
		L->rep.cpu_only = 1;
		return cpu_forward(rt, L, n, x, ids, weights, y);
	}
	L->rep.pairs += st.pairs;
	L->rep.hits += st.hits;
	L->rep.misses_cpu += st.misses_cpu;
	L->rep.misses_streamed += st.misses_streamed;
	L->rep.host_bytes_read += st.host_bytes;
	L->rep.pcie_bytes += st.pcie_bytes;
	L->rep.wall_s += st.wall_s;
	for (int i = 0; i < 4; i++)
		L->rep.busy_s[i] += st.busy_s[i];
	admit(rt, L, n, L->rep.steps);
	return 0;
}

int hs_runtime_layer_report(const hs_runtime *rt, int layer, struct hs_layer_report *out)
{
	HS_NEED(rt, -EINVAL);
	HS_NEED(out, -EINVAL);
	if (layer < 0 || layer >= rt->n_layers || !rt->layers[layer].moe)
		return hs__error(EINVAL, "report: layer %d is not a MoE layer", layer);
	*out = rt->layers[layer].rep;
	return 0;
}

int hs_runtime_set_mode(hs_runtime *rt, enum hs_mode mode, double q)
{
	HS_NEED(rt, -EINVAL);
	if ((unsigned)mode > HS_MODE_HYBRID || !(q <= 1) || !isfinite(q))
		return hs__error(EINVAL, "runtime: mode %d with q %g (modes %d..%d; q 0..1, or negative for auto)",
				 (int)mode, q, HS_MODE_NONE, HS_MODE_HYBRID);
	rt->o.mode = mode;
	rt->o.q = q;
	return 0;
}

int hs_runtime_set_threads(hs_runtime *rt, int n)
{
	struct hs_pool *p;
	int rc;

	if (!rt)
		return hs__error(EINVAL, "set_threads: no runtime (NULL)");
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	online = online > 0 ? online : 1;
	if (n < 1 || n > online)
		return hs__error(EINVAL, "set_threads: %d threads (1..%ld, the CPUs online)", n, online);
	if (n == hs__pool_size(rt->pool))
		return 0;
	if ((rc = hs__pool_create(n, rt->cpus, rt->n_cpus, rt->d == NULL, &p)))
		return rc;
	/* the layers' CPU sides run on the runtime's pool; nothing runs now */
	for (int l = 0; l < rt->n_layers; l++)
		if (rt->layers[l].h.pool == rt->pool)
			rt->layers[l].h.pool = p;
	hs__pool_free(rt->pool);
	rt->pool = p;
	hs__runtime_say(rt, "CPU: %d workers from now on", n);
	return 0;
}

int hs_runtime_threads(const hs_runtime *rt)
{
	if (!rt)
		return hs__error(EINVAL, "threads: no runtime (NULL)");
	return hs__pool_size(rt->pool);
}

int hs_runtime_set_cache_policy(hs_runtime *rt, const char *policy, int admit_per_step)
{
	HS_NEED(rt, -EINVAL);
	const char *known = known_policy(policy);
	if (!known)
		return hs__error(EINVAL, "cache policy '%s': lru, lfu, lfru, static or none", policy ? policy : "(null)");
	if (admit_per_step < 0)
		return hs__error(EINVAL, "cache: admit_per_step %d (0 = a static cache, or more)", admit_per_step);
	rt->o.cache_policy = known;
	rt->o.admit_per_step = admit_per_step;
	return 0;
}
