/* The cost model's rates, measured with a model's own layer on this
 * machine's CPU (the worker pool the runtime uses) and device (its copy
 * and kernel ops, timed with its events), so `hotset bench` can set
 * predictions beside measurements taken in the same run. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels/kernels.h"
#include "cpu_kernels/moe.h"
#include "measure/calibrate.h"
#include "base/error.h"
#include "runtime/hybrid.h"
#include "model/model.h"
#include "runtime/numa.h"
#include "runtime/numa-place.h"
#include "runtime/pool.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The median of n timings: the rates are set beside medians of steps, and
 * a noisy neighbour should move neither more than the other. */
static double median(double *t, int n)
{
	qsort(t, n, sizeof *t, cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static uint64_t rng_next(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* ids[n][k]: decode (n = 1) walks through the layer k experts at a time so
 * that no pass finds its experts in the CPU caches; a batch draws k
 * distinct experts per token */
static void make_ids(int32_t *ids, int n, int k, int E, int pass, uint64_t *s)
{
	for (int t = 0; t < n; t++)
		for (int j = 0; j < k; j++) {
			int e, dup;
			if (n == 1) {
				ids[j] = (pass * k + j) % E;
				continue;
			}
			do {
				e = (int)(rng_next(s) % (uint64_t)E);
				dup = 0;
				for (int i = 0; i < j; i++)
					dup |= ids[t * k + i] == e;
			} while (dup);
			ids[t * k + j] = e;
		}
}

static void progress_say(hs_progress_fn p, void *ctx, const char *what, double f)
{
	if (p)
		p(what, f, ctx);
}

/* the CPU kernel on the pool: seconds of one pass at n tokens */
static int calibrate_layer(const struct hs_moe_layer *l, struct hs_device *d, int threads, int batch,
			   hs_progress_fn progress, void *ctx, struct hs__rates *out);

/* ---- the runtime's own fixed cost of a layer step -------------------------- */

static void noop_job(void *ctx, int ith, int nth)
{
	(void)ctx;
	(void)ith;
	(void)nth;
}

static int noop_task(void *ctx)
{
	(void)ctx;
	return 0;
}

static int pool_task(void *ctx)
{
	hs__pool_run(ctx, noop_job, NULL);
	return 0;
}

/* A layer step's task graph with nothing to do in it (the hybrid layer's
 * shape: split, device launches, copies, the pool, combine): the thread
 * hand-offs every step pays, whatever the experts cost. */
static int step_overhead(struct hs_pool *pool, double *secs)
{
	struct hs_lanes *lanes;
	double times[32];
	int rc = hs__lanes_create(&lanes);
	if (rc)
		return rc;
	for (int i = -2; i < 32 && !rc; i++) {
		struct hs_task t[6] = {
			{ .lane = HS_LANE_HOST, .run = noop_task },
			{ .lane = HS_LANE_GPU, .run = noop_task, .n_deps = 1, .deps = { 0 } },
			{ .lane = HS_LANE_COPY, .run = noop_task, .n_deps = 1, .deps = { 1 } },
			{ .lane = HS_LANE_GPU, .run = noop_task, .n_deps = 1, .deps = { 2 } },
			{ .lane = HS_LANE_CPU, .run = pool_task, .ctx = pool, .n_deps = 1, .deps = { 0 } },
			{ .lane = HS_LANE_HOST, .run = noop_task, .n_deps = 2, .deps = { 3, 4 } },
		};
		struct hs_graph_stats gs;
		double t0 = now_s();
		rc = hs__graph_run_on(lanes, t, 6, &gs);
		if (i >= 0)
			times[i] = now_s() - t0;
	}
	hs__lanes_free(lanes);
	if (!rc)
		*secs = median(times, 32);
	return rc;
}

static int cpu_time(const struct hs_moe_layer *l, struct hs_pool *pool, int n, int passes, double *secs)
{
	const int k = l->n_used;
	float *x = malloc(sizeof(float) * (size_t)n * l->n_embd), *y = malloc(sizeof(float) * (size_t)n * l->n_embd);
	float *w = malloc(sizeof(float) * (size_t)n * k);
	int32_t *ids = malloc(sizeof(int32_t) * (size_t)n * k);
	void *scratch = aligned_alloc(64, (hs__ffn_scratch_bytes(l, n) + 63) & ~(size_t)63);
	uint64_t s = 11;
	int rc = 0;

	if (!x || !y || !w || !ids || !scratch) {
		rc = hs__error(ENOMEM, "calibrate: out of memory");
		goto out_free;
	}
	for (size_t i = 0; i < (size_t)n * l->n_embd; i++)
		x[i] = (float)((int)(rng_next(&s) % 200) - 100) / 100.0f;
	for (int i = 0; i < n * k; i++)
		w[i] = 1.0f / (float)k;
	double times[64];
	if (passes > 64)
		passes = 64;
	for (int p = -1; p < passes; p++) { /* pass -1 warms up */
		make_ids(ids, n, k, l->n_experts, p + 1, &s);
		struct hs_ffn_job job = { .layer = l, .ops = hs__kernels_best(), .n = n, .x = x, .ids = ids,
					  .weights = w, .y = y, .scratch = scratch };
		if ((rc = hs__ffn_prepare(&job)))
			goto out_free;
		double t0 = now_s();
		hs__ffn_run_pool(&job, pool);
		if (p >= 0)
			times[p] = now_s() - t0;
	}
	*secs = median(times, passes);
out_free:
	free(x);
	free(y);
	free(w);
	free(ids);
	free(scratch);
	return rc;
}

/* The device side: the layer's experts copied into slots (timed: the
 * copy rate), then its kernel at 1 and at `batch` tokens. */
static int device_rates(const struct hs_moe_layer *l, struct hs_device *d, int batch, struct hs__rates *r)
{
	const struct hs_dev_ops *o = d->ops;
	const int E = l->n_experts, k = l->n_used, D = l->n_embd;
	const struct hs_expert_pack pack = hs__expert_pack_layout(l->type, D, l->n_ff, l->gate_b != NULL);
	const int max_n = batch > 1 ? batch : 1, sets = 8;
	hs_queue *q = NULL;
	hs_event *ev[2] = { NULL, NULL };
	struct hs_slots *slots = NULL;
	uint8_t *host = NULL;
	size_t host_b = (size_t)E * pack.bytes, ids_b = sizeof(int32_t) * (size_t)max_n * k * sets;
	if (host_b < 2 * sizeof(float) * (size_t)max_n * D) /* x and y use it after the uploads */
		host_b = 2 * sizeof(float) * (size_t)max_n * D;
	void *dx = NULL, *dxq = NULL, *dids = NULL, *dw = NULL, *dy = NULL, *scr = NULL;
	int32_t *ids = NULL;
	float *hw = NULL, ms = 0;
	uint64_t s = 5;
	int rc, pinned = 0;

	if ((rc = o->queue_create(d->dev, &q)) || (rc = o->event_create(d->dev, &ev[0])) ||
	    (rc = o->event_create(d->dev, &ev[1])))
		goto out_release;
	if (posix_memalign((void **)&host, 4096, host_b + ids_b + sizeof(float) * (size_t)max_n * k)) {
		rc = hs__error(ENOMEM, "calibrate: out of memory for %zu bytes of packed experts", host_b);
		goto out_release;
	}
	for (int e = 0; e < E; e++)
		hs__expert_pack(l, e, &pack, host + (size_t)e * pack.bytes);
	ids = (int32_t *)(host + host_b);
	hw = (float *)(host + host_b + ids_b);
	if ((rc = hs__device_pin(d, host, host_b + ids_b + sizeof(float) * (size_t)max_n * k, 0)))
		goto out_release;
	pinned = 1;
	if ((rc = hs__slots_create(d, E, E, pack.bytes, q, &slots)))
		goto out_release;
	/* copies: every expert into its slot (a pass to warm up), then each
	 * expert's copy timed on its own */
	double times[64];
	int nt = 0;
	for (int e = 0; e < E && !rc; e++)
		rc = hs__slots_upload(slots, e, e, host + (size_t)e * pack.bytes, q, q);
	for (int e = 0; e < E && nt < 64 && !rc; e++) {
		if ((rc = o->event_record(ev[0], q)) ||
		    (rc = hs__slots_upload(slots, e, e, host + (size_t)e * pack.bytes, q, q)) ||
		    (rc = o->event_record(ev[1], q)) || (rc = o->event_sync(ev[1])) ||
		    (rc = o->event_elapsed_ms(ev[0], ev[1], &ms)))
			break;
		times[nt++] = ms / 1e3;
	}
	if (rc || (rc = o->queue_sync(q)))
		goto out_release;
	double tc = median(times, nt);
	r->pcie_Bps = tc > 0 ? (double)pack.bytes / tc : 0;

	struct hs_dev_ffn f = { .arch = l->arch, .n_embd = D, .n_ff = l->n_ff, .n_experts = E,
				.n_used = k, .pack = pack, .pool = slots->pool, .pool_stride = pack.bytes,
				.slot_of = slots->slot_of, .n = max_n };
	if ((rc = o->alloc(d->dev, sizeof(float) * (size_t)max_n * D, &dx)) ||
	    (rc = o->alloc(d->dev, (size_t)max_n * (D / 32) * 34, &dxq)) || (rc = o->alloc(d->dev, ids_b, &dids)) ||
	    (rc = o->alloc(d->dev, sizeof(float) * (size_t)max_n * k, &dw)) ||
	    (rc = o->alloc(d->dev, sizeof(float) * (size_t)max_n * D, &dy)) ||
	    (rc = o->alloc(d->dev, o->ffn_scratch_bytes(&f), &scr)))
		goto out_release;
	for (int i = 0; i < max_n * k; i++)
		hw[i] = 1.0f / (float)k;
	/* activations like real ones (kernels may skip all-zero blocks): the
	 * packed experts' pinned buffer is free again after the uploads */
	float *hx = (float *)host, *hy = hx + (size_t)max_n * D;
	for (size_t i = 0; i < (size_t)max_n * D; i++)
		hx[i] = (float)((int)(rng_next(&s) % 2001) - 1000) / 1000.0f;
	if ((rc = hs__dev_copy_h2d(d, q, dx, hx, sizeof(float) * (size_t)max_n * D)) || (rc = o->queue_sync(q)) ||
	    (rc = hs__dev_copy_h2d(d, q, dw, hw, sizeof(float) * (size_t)max_n * k)) ||
	    (rc = o->zero(q, dy, sizeof(float) * (size_t)max_n * D)) || (rc = o->quantize(q, dx, max_n, D, dxq)))
		goto out_release;
	f.xq = dxq;
	f.weights = dw;
	f.y = dy;
	f.scratch = scr;
	/* the hand-off of a layer step without its experts: what the runtime
	 * queues around its launches (x, weights and ids up, y zeroed, x
	 * quantized, events, y down), timed from the host */
	{
		const int reps = 16;
		nt = 0;
		for (int i = 0; i < reps && !rc; i++) {
			double t0 = now_s();
			if ((rc = hs__dev_copy_h2d(d, q, dx, hx, sizeof(float) * D)) ||
			    (rc = hs__dev_copy_h2d(d, q, dw, hw, sizeof(float) * k)) ||
			    (rc = o->zero(q, dy, sizeof(float) * D)) || (rc = o->quantize(q, dx, 1, D, dxq)) ||
			    (rc = hs__dev_copy_h2d(d, q, dids, ids, sizeof(int32_t) * k)) ||
			    (rc = o->event_record(ev[0], q)) || (rc = o->event_record(ev[1], q)) ||
			    (rc = o->copy_d2h(q, hy, dy, sizeof(float) * D)) || (rc = o->queue_sync(q)))
				break;
			times[nt++] = now_s() - t0;
		}
		if (rc)
			goto out_release;
		r->sync_s = median(times, nt);
	}
	for (int phase = 0; phase < 2; phase++) { /* 1 token, then the batch */
		const int n = phase ? max_n : 1, reps = phase ? 5 : 4 * sets;
		for (int st = 0; st < sets; st++)
			make_ids(ids + (size_t)st * n * k, n, k, E, st, &s);
		f.n = n;
		if ((rc = hs__dev_copy_h2d(d, q, dids, ids, sizeof(int32_t) * (size_t)n * k * sets)))
			goto out_release;
		f.ids = dids; /* warm-up */
		if ((rc = o->ffn(q, &f)))
			goto out_release;
		nt = 0;
		for (int i = 0; i < reps; i++) { /* each launch timed on its own */
			f.ids = (const int32_t *)dids + (size_t)(i % sets) * n * k;
			if ((rc = o->event_record(ev[0], q)) || (rc = o->ffn(q, &f)) || (rc = o->event_record(ev[1], q)) ||
			    (rc = o->event_sync(ev[1])) || (rc = o->event_elapsed_ms(ev[0], ev[1], &ms)))
				goto out_release;
			times[nt++] = ms / 1e3;
		}
		double t = median(times, nt);
		if (t <= 0)
			t = 1e-9;
		if (phase == 0)
			r->gpu_Bps = k * (double)pack.bytes / t;
		else
			r->gpu_flops = 2.0 * 3 * (double)D * l->n_ff * n * k / t;
	}
	if (batch <= 1)
		r->gpu_flops = 0;
	rc = o->queue_sync(q);
out_release:
	if (q)
		o->queue_sync(q);
	void *bufs[] = { dx, dxq, dids, dw, dy, scr };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		if (bufs[i])
			o->free(d->dev, bufs[i]);
	if (slots)
		hs__slots_free(slots);
	for (int i = 0; i < 2; i++)
		if (ev[i])
			o->event_destroy(ev[i]);
	if (q)
		o->queue_destroy(q);
	if (pinned)
		hs__device_unpin(d, host, host_b + ids_b + sizeof(float) * (size_t)max_n * k);
	free(host);
	return rc;
}

int hs__calibrate(const hs_model *m, int layer, int os_node, struct hs_device *d, int threads, int batch,
		  hs_progress_fn progress, void *ctx, struct hs__rates *out)
{
	struct hs_host_layer hl;
	int rc;

	memset(out, 0, sizeof *out);
	/* the layer's experts where the runtime keeps them: a packed copy in
	 * the node's memory (large pages), not the file's mapping */
	progress_say(progress, ctx, "host copy of the layer's experts", 0);
	if ((rc = hs__host_layer_load(m, layer, os_node, &hl)))
		return rc;
	rc = calibrate_layer(&hl.l, d, threads, batch, progress, ctx, out);
	hs__host_layer_free(&hl);
	return rc;
}

static int calibrate_layer(const struct hs_moe_layer *l, struct hs_device *d, int threads, int batch,
			   hs_progress_fn progress, void *ctx, struct hs__rates *out)
{
	struct hs_pool *pool = NULL;
	int rc;

	if (threads < 1)
		threads = 1;
	progress_say(progress, ctx, "host memory read bandwidth", 0);
	out->read_Bps = hs__read_bandwidth(threads, (size_t)256 << 20, 4);
	if (out->read_Bps <= 0)
		return hs__error(ENOMEM, "calibrate: out of memory for the read-bandwidth buffer");
	/* as the runtime makes it: without a device the caller runs a slice */
	if ((rc = hs__pool_create(threads, NULL, 0, d == NULL, &pool)))
		return rc;
	const struct hs_expert_pack pack = hs__expert_pack_layout(l->type, l->n_embd, l->n_ff, l->gate_b != NULL);
	double t1 = 0, tb = 0;
	progress_say(progress, ctx, "task graph hand-offs", 0.1);
	if ((rc = step_overhead(pool, &out->step_s))) {
		hs__pool_free(pool);
		return rc;
	}
	progress_say(progress, ctx, "CPU expert kernel, 1 token", 0.2);
	rc = cpu_time(l, pool, 1, 4 * l->n_experts / l->n_used, &t1);
	if (!rc && batch > 1) {
		progress_say(progress, ctx, "CPU expert kernel, batch", 0.4);
		rc = cpu_time(l, pool, batch, 5, &tb);
	}
	hs__pool_free(pool);
	if (rc)
		return rc;
	out->cpu_Bps = l->n_used * (double)pack.bytes / (t1 > 0 ? t1 : 1e-9);
	out->cpu_flops = batch > 1 ? 2.0 * 3 * (double)l->n_embd * l->n_ff * batch * l->n_used / (tb > 0 ? tb : 1e-9) : 0;
	if (!d)
		return 0;
	progress_say(progress, ctx, "device copies and expert kernel", 0.6);
	if ((rc = device_rates(l, d, batch, out)))
		return rc;
	out->gpu = 1;
	progress_say(progress, ctx, "calibrated", 1);
	return 0;
}
