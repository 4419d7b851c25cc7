/* One MoE layer on a device and the CPU at the same time (see hybrid.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/kernels.h"
#include "cpu_kernels/router.h"
#include "planner/planner.h"
#include "base/error.h"
#include "runtime/hybrid.h"

static void *pinned(struct hs_device *d, size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n ? n : 1)) {
		hs__error(ENOMEM, "hybrid: no memory for %zu bytes", n);
		return NULL;
	}
	if (hs__device_pin(d, p, n ? n : 1, 0)) {
		free(p);
		return NULL;
	}
	return p;
}

static void unpinned(struct hs_device *d, void *p, size_t n)
{
	if (!p)
		return;
	hs__device_unpin(d, p, n ? n : 1);
	free(p);
}

void hs__step_bufs_free(struct hs_step_bufs *b)
{
	if (!b)
		return;
	const struct hs_dev_ops *o = b->d->ops;
	o->free(b->d->dev, b->dx);
	o->free(b->d->dev, b->dxq);
	o->free(b->d->dev, b->dids);
	o->free(b->d->dev, b->dw);
	o->free(b->d->dev, b->dy);
	o->free(b->d->dev, b->dscratch);
	unpinned(b->d, b->hx, b->hx_b);
	unpinned(b->d, b->hw, b->hw_b);
	unpinned(b->d, b->hy, b->hx_b);
	unpinned(b->d, b->hids, (size_t)(2 + b->n_lists) * b->hids_b);
	free(b->cscratch);
	free(b->ycpu);
	free(b->ids_cpu);
	free(b);
}

int hs__step_bufs_create(struct hs_device *d, const struct hs_moe_layer *l, int max_n, int streams,
			 struct hs_step_bufs **out)
{
	const struct hs_dev_ops *o = d->ops;
	const int D = l->n_embd, K = l->n_used, E = l->n_experts;
	struct hs_step_bufs *b = calloc(1, sizeof *b);
	int rc = 0;

	*out = NULL;
	if (!b)
		return hs__error(ENOMEM, "hybrid: out of memory");
	b->d = d;
	b->max_n = max_n;
	/* experts streamed in one step: staging slots are reused within a step
	 * (each upload waits for the launch that read the slot before), so up
	 * to every expert of the layer, each with its own id list and events */
	b->n_lists = streams ? (E < HS_MAX_STREAMED ? E : HS_MAX_STREAMED) : 0;
	b->hx_b = sizeof(float) * (size_t)max_n * D;
	b->hw_b = sizeof(float) * (size_t)max_n * K;
	b->hids_b = sizeof(int32_t) * (size_t)max_n * K;
	b->dxq_b = (size_t)max_n * (D / HS_QK) * sizeof(struct hs_block_q8_0);
	struct hs_dev_ffn f = { .arch = l->arch, .n_embd = D, .n_ff = l->n_ff, .n_experts = E,
				.n_used = K, .n = max_n };
	b->scratch_b = o->ffn_scratch_bytes(&f);
	if ((rc = o->alloc(d->dev, b->hx_b, &b->dx)) || (rc = o->alloc(d->dev, b->dxq_b, &b->dxq)) ||
	    (rc = o->alloc(d->dev, (size_t)(2 + b->n_lists) * b->hids_b, &b->dids)) ||
	    (rc = o->alloc(d->dev, b->hw_b, &b->dw)) || (rc = o->alloc(d->dev, b->hx_b, &b->dy)) ||
	    (rc = o->alloc(d->dev, b->scratch_b ? b->scratch_b : 1, &b->dscratch)))
		goto out_free;
	b->hx = pinned(d, b->hx_b);
	b->hw = pinned(d, b->hw_b);
	b->hy = pinned(d, b->hx_b);
	/* hits' ids, all streamed pairs' ids, then one list per streamed expert */
	b->hids = pinned(d, (size_t)(2 + b->n_lists) * b->hids_b);
	size_t cs = (hs__ffn_scratch_bytes(l, max_n) + 63) & ~(size_t)63;
	b->cscratch = aligned_alloc(64, cs ? cs : 64);
	b->ycpu = malloc(b->hx_b);
	b->ids_cpu = malloc(b->hids_b);
	if (!b->hx || !b->hw || !b->hy || !b->hids || !b->cscratch || !b->ycpu || !b->ids_cpu) {
		rc = -ENOMEM;
		goto out_free;
	}
	*out = b;
	return 0;
out_free:
	hs__step_bufs_free(b);
	return rc ? rc : hs__error(ENOMEM, "hybrid: out of memory");
}

void hs__hybrid_close(struct hs_hybrid *h)
{
	if (!h->d)
		return;
	const struct hs_dev_ops *o = h->d->ops;
	if (h->qc)
		o->queue_sync(h->qc);
	if (h->qx)
		o->queue_sync(h->qx);
	for (int i = 0; h->ev && i < 2 * (1 + h->n_lists); i++)
		if (h->ev[i])
			o->event_destroy(h->ev[i]);
	free(h->ev);
	hs__lanes_free(h->lanes);
	hs__slots_free(h->slots);
	unpinned(h->d, h->hpack, h->hpack_b);
	if (h->qc)
		o->queue_destroy(h->qc);
	if (h->qx)
		o->queue_destroy(h->qx);
	if (h->own_bufs)
		hs__step_bufs_free(h->bufs);
	free(h->route);
	free(h->hit_slot);
	memset(h, 0, sizeof *h);
}

int hs__hybrid_open(struct hs_hybrid *h, const struct hs_moe_layer *l, struct hs_device *d, struct hs_pool *pool,
		    int max_n, int n_cached, int n_staging)
{
	return hs__hybrid_open_shared(h, l, d, pool, max_n, n_cached, n_staging, NULL);
}

int hs__hybrid_open_shared(struct hs_hybrid *h, const struct hs_moe_layer *l, struct hs_device *d,
			   struct hs_pool *pool, int max_n, int n_cached, int n_staging, struct hs_step_bufs *shared)
{
	const struct hs_dev_ops *o = d->ops;
	const int E = l->n_experts;
	int rc;

	memset(h, 0, sizeof *h);
	if (max_n < 1 || n_cached < 0 || n_staging < 0 || n_cached + n_staging < 1 || n_cached + n_staging > E)
		return hs__error(EINVAL, "hybrid: %d tokens, %d cache + %d staging slots for %d experts", max_n, n_cached,
				 n_staging, E);
	const struct hs_expert_pack pk = hs__expert_pack_layout(l->type, l->n_embd, l->n_ff, l->arch->has_bias);
	if ((rc = o->ffn_takes(&pk, l->n_embd, l->n_ff)))
		return hs__error(EINVAL, "hybrid: %s", hs_last_error());
	if (shared && (shared->max_n < max_n || (n_staging > 0 && !shared->n_lists)))
		return hs__error(EINVAL, "hybrid: shared step buffers for %d tokens%s, the layer needs %d%s", shared->max_n,
				 shared->n_lists ? " with streams" : "", max_n, n_staging > 0 ? " with streams" : "");
	h->l = l;
	h->d = d;
	h->pool = pool;
	h->max_n = max_n;
	h->n_cached = n_cached;
	h->n_staging = n_staging;
	h->pack = pk;
	h->hpack_b = h->pack.bytes * (size_t)(n_staging > 0 ? n_staging : 1);
	if (shared) {
		h->bufs = shared;
	} else if ((rc = hs__step_bufs_create(d, l, max_n, n_staging > 0, &h->bufs))) {
		goto out_close;
	} else {
		h->own_bufs = 1;
	}
	struct hs_step_bufs *b = h->bufs;
	h->hx_b = b->hx_b;
	h->hw_b = b->hw_b;
	h->hids_b = b->hids_b;
	h->n_lists = n_staging > 0 ? b->n_lists : 0;
	h->dx = b->dx, h->dxq = b->dxq, h->dids = b->dids, h->dw = b->dw, h->dy = b->dy, h->dscratch = b->dscratch;
	h->hx = b->hx, h->hw = b->hw, h->hy = b->hy, h->hids = b->hids;
	h->cscratch = b->cscratch, h->ycpu = b->ycpu, h->ids_cpu = b->ids_cpu;
	if ((rc = o->queue_create(d->dev, &h->qc)) || (rc = o->queue_create(d->dev, &h->qx)) ||
	    (rc = hs__lanes_create(&h->lanes)))
		goto out_close;
	if ((rc = hs__slots_create(d, n_cached + n_staging, E, h->pack.bytes, h->qx, &h->slots)))
		goto out_close;
	if (!(h->ev = calloc((size_t)2 * (1 + h->n_lists), sizeof *h->ev))) {
		rc = hs__error(ENOMEM, "hybrid: out of memory");
		goto out_close;
	}
	for (int i = 0; i < 2 * (1 + h->n_lists); i++)
		if ((rc = o->event_create(d->dev, &h->ev[i])))
			goto out_close;
	h->hpack = pinned(d, h->hpack_b);
	h->route = malloc(sizeof *h->route * E);
	h->hit_slot = malloc(sizeof *h->hit_slot * (size_t)(n_cached + n_staging));
	if (!h->hpack || !h->route || !h->hit_slot) {
		rc = -ENOMEM;
		goto out_close;
	}
	return 0;
out_close:
	hs__hybrid_close(h);
	return rc ? rc : hs__error(ENOMEM, "hybrid: out of memory");
}

int hs__hybrid_can_direct(const struct hs_hybrid *h)
{
	const struct hs_moe_layer *l = h->l;
	return l->pool && l->pool_stride == h->pack.bytes && !memcmp(&l->pack, &h->pack, sizeof h->pack);
}

static const uint8_t *host_block(const struct hs_hybrid *h, int e)
{
	return h->l->pool + (size_t)h->l->slot_of[e] * h->l->pool_stride;
}

int hs__hybrid_admit(struct hs_hybrid *h, int slot, int expert)
{
	if (!h->direct)
		return hs__hybrid_cache(h, slot, expert);
	if (slot < 0 || slot >= h->n_cached || expert < 0 || expert >= h->l->n_experts)
		return hs__error(EINVAL, "hybrid: slot %d / expert %d", slot, expert);
	/* the compute queue does not wait for it: until the copy is in, the
	 * split counts the expert as a CPU miss (see in_flight) */
	return hs__slots_upload(h->slots, slot, expert, host_block(h, expert), h->qx, NULL);
}

/* Whether expert e sits in a slot whose upload is still on its way. */
static int in_flight(const struct hs_hybrid *h, int e)
{
	const int slot = h->slots->slot_of_host[e];
	return slot >= 0 && h->d->ops->event_query(h->slots->ready[slot]) != 1;
}

int hs__hybrid_cache(struct hs_hybrid *h, int slot, int expert)
{
	if (slot < 0 || slot >= h->n_cached)
		return hs__error(EINVAL, "hybrid: cache slot %d outside 0..%d", slot, h->n_cached - 1);
	if (expert < 0 || expert >= h->l->n_experts)
		return hs__error(EINVAL, "hybrid: expert %d outside 0..%d", expert, h->l->n_experts - 1);
	if (h->direct) {
		int rc = hs__slots_upload(h->slots, slot, expert, host_block(h, expert), h->qx, h->qc);
		return rc ? rc : h->d->ops->queue_sync(h->qx);
	}
	hs__expert_pack(h->l, expert, &h->pack, h->hpack);
	int rc = hs__slots_upload(h->slots, slot, expert, h->hpack, h->qx, h->qc);
	return rc ? rc : h->d->ops->queue_sync(h->qx);
}

/* ---- one forward step as a task graph ------------------------------------------ */

struct step {
	struct hs_hybrid *h;
	int n;
	const float *x;
	const int32_t *ids;
	const float *weights;
	float *y;
	enum hs_mode mode;
	double q;
	struct hs_layer_stats *st;
	int streamed[HS_MAX_STREAMED], stream_slot[HS_MAX_STREAMED];
	int n_streamed, n_cpu_pairs, n_hit_pairs, n_stream_pairs;
	int n_hit_slots;          /* slots in h->hit_slot */
	char timed[HS_MAX_STREAMED + 1]; /* launch k was bracketed by h->ev[2k], h->ev[2k + 1] */
	double device_s;          /* the device's time in expert launches */
	struct hs_ffn_job job;
};

static int cmp_desc_count(const void *a, const void *b)
{
	const int *x = a, *y = b; /* pairs (count, expert) */
	if (x[0] != y[0])
		return y[0] - x[0];
	return x[1] - y[1];
}

/* host: route, decide which misses are streamed, split the ids */
static int t_split(void *ctx)
{
	struct step *s = ctx;
	struct hs_hybrid *h = s->h;
	const struct hs_moe_layer *l = h->l;
	const int K = l->n_used, E = l->n_experts, P = s->n * K;
	int rc;

	memcpy(h->hx, s->x, sizeof(float) * (size_t)s->n * l->n_embd);
	if (s->ids) {
		memcpy(h->hids, s->ids, sizeof(int32_t) * P);
		memcpy(h->hw, s->weights, sizeof(float) * P);
	} else if ((rc = hs__moe_route(l, s->n, s->x, h->hids, h->hw))) {
		return rc;
	}
	int *count = calloc(E, 2 * sizeof(int));
	if (!count)
		return hs__error(ENOMEM, "hybrid: out of memory");
	for (int p = 0; p < P; p++) {
		int e = h->hids[p];
		if (e < -1 || e >= E) {
			free(count);
			return hs__error(EINVAL, "hybrid: id %d outside -1..%d", e, E - 1);
		}
		if (e >= 0)
			count[2 * e]++;
	}
	int n_missed = 0;
	for (int e = 0; e < E; e++) {
		/* a hit: cached or still staged, and its copy is in */
		h->route[e] = count[2 * e] && h->slots->slot_of_host[e] >= 0 && !in_flight(h, e);
		if (count[2 * e] && !h->route[e] && h->slots->slot_of_host[e] >= 0) {
			h->route[e] = 3; /* on its way into a slot: the CPU's (it cannot be streamed too) */
			continue;
		}
		if (count[2 * e] && !h->route[e]) {
			count[2 * n_missed] = count[2 * e];
			count[2 * n_missed + 1] = e;
			n_missed++;
		}
	}
	/* streamed: the missed experts with the most pairs first (most work per
	 * byte copied); as many as the mode asks and the staging slots hold */
	qsort(count, n_missed, 2 * sizeof(int), cmp_desc_count);
	if (s->mode == HS_MODE_HYBRID && s->q < 0) { /* live: the planner's split with this step's counts */
		int n_hit = 0;
		for (int e = 0; e < E; e++)
			n_hit += h->route[e] == 1;
		double mb = (double)n_missed * h->pack.bytes, hb = (double)n_hit * h->pack.bytes;
		if (h->est_cpu_bps > 0 && h->est_copy_bps > 0 && h->est_gpu_bps > 0)
			s->q = hs__hybrid_share(mb / h->est_cpu_bps, hb / h->est_gpu_bps, mb / h->est_gpu_bps,
						mb / h->est_copy_bps);
		else
			s->q = 0.5; /* until every lane has been seen once */
	}
	int want = s->mode == HS_MODE_PCIE_STREAM ? n_missed
		   : s->mode == HS_MODE_HYBRID	   ? (int)(s->q * n_missed + 0.5)
						   : 0;
	/* a staging slot whose expert is a hit this step must keep it */
	int free_staging = 0;
	for (int sl = h->n_cached; sl < h->n_cached + h->n_staging; sl++) {
		int e = h->slots->expert_in[sl];
		free_staging += e < 0 || h->route[e] == 0;
	}
	/* copies from the packed host copy reuse a free staging slot as soon
	 * as the launch before has read it; through the pinned staging buffer
	 * (h->hpack, one block per slot) one expert per free slot */
	const int can = h->direct ? (free_staging > 0 ? h->n_lists : 0) : free_staging;
	if (want > can)
		want = can;
	/* copied busiest last: the staging slots keep the experts streamed last
	 * (reused within the step), and the busiest are the likeliest hits of
	 * the next step */
	s->n_streamed = want;
	for (int i = 0; i < want; i++) {
		s->streamed[want - 1 - i] = count[2 * i + 1];
		h->route[count[2 * i + 1]] = 2;
	}
	free(count);
	s->n_cpu_pairs = s->n_hit_pairs = s->n_stream_pairs = 0;
	memset(s->st, 0, sizeof *s->st);
	int32_t *stream_ids = h->hids + h->hids_b / sizeof(int32_t);
	for (int p = 0; p < P; p++) {
		int e = h->hids[p];
		h->ids_cpu[p] = stream_ids[p] = -1;
		if (e < 0)
			continue;
		s->st->pairs++;
		if (h->route[e] == 1) { /* a hit: only the device's first launch reads it */
			s->n_hit_pairs++;
			s->st->hits++;
		} else if (h->route[e] == 2) { /* streamed: the device's second launch */
			stream_ids[p] = e;
			h->hids[p] = -1;
			s->n_stream_pairs++;
			s->st->misses_streamed++;
		} else { /* the CPU's: both device launches mask it */
			h->ids_cpu[p] = e;
			h->hids[p] = -1;
			s->n_cpu_pairs++;
			s->st->misses_cpu++;
		}
	}
	/* the slots the hits are read from, released after the first launch */
	s->n_hit_slots = 0;
	for (int e = 0; e < E; e++)
		if (h->route[e] == 1)
			h->hit_slot[s->n_hit_slots++] = h->slots->slot_of_host[e];
	s->st->experts_streamed = s->n_streamed;
	s->st->staging_free = free_staging;
	s->st->pcie_bytes = (uint64_t)s->n_streamed * h->pack.bytes;
	return 0;
}

/* copy lane: streamed experts into staging slots */
static struct hs_dev_ffn device_ffn(struct step *s, const void *ids);

/* copy lane: each streamed expert into a staging slot, and its launch
 * queued right behind its copy, so the device computes expert i while
 * expert i + 1 is on the way (the hits' launch is already queued) */
static int t_stream(void *ctx)
{
	struct step *s = ctx;
	struct hs_hybrid *h = s->h;
	const struct hs_dev_ops *o = h->d->ops;
	const size_t P = (size_t)s->n * h->l->n_used, W = h->hids_b / sizeof(int32_t);
	const int32_t *all = h->hids + W;
	for (int i = 0; i < s->n_streamed; i++) {
		const int ex = s->streamed[i];
		const uint8_t *src = h->direct ? host_block(h, ex) : h->hpack + (size_t)i * h->pack.bytes;
		int slot, rc, e;
		do { /* the next staging slot that no hit of this step needs (one
			      streamed earlier in this step is free once its launch ran) */
			slot = h->n_cached + h->next_staging++ % h->n_staging;
			e = h->slots->expert_in[slot];
		} while (e >= 0 && h->route[e] == 1);
		if (!h->direct) /* packed into pinned staging first */
			hs__expert_pack(h->l, ex, &h->pack, h->hpack + (size_t)i * h->pack.bytes);
		if ((rc = hs__slots_upload(h->slots, slot, ex, src, h->qx, h->qc)))
			return rc;
		s->stream_slot[i] = slot;
		/* this expert's pairs alone, launched once its copy is in */
		int32_t *mine = h->hids + (size_t)(2 + i) * W;
		for (size_t p = 0; p < P; p++)
			mine[p] = all[p] == ex ? ex : -1;
		uint8_t *dmine = (uint8_t *)h->dids + (size_t)(2 + i) * h->hids_b;
		struct hs_dev_ffn f = device_ffn(s, dmine);
		if ((rc = hs__dev_copy_h2d(h->d, h->qc, dmine, mine, sizeof(int32_t) * P)) ||
		    (rc = o->event_record(h->ev[2 + 2 * i], h->qc)) || (rc = o->ffn(h->qc, &f)) ||
		    (rc = o->event_record(h->ev[3 + 2 * i], h->qc)) || (rc = hs__slots_release(h->slots, slot, h->qc)))
			return rc;
		s->timed[1 + i] = 1;
	}
	/* done when the copies are (the pinned staging is reused next step, and
	 * the time is the live copy-speed estimate) */
	return s->n_streamed ? o->queue_sync(h->qx) : 0;
}

static struct hs_dev_ffn device_ffn(struct step *s, const void *ids)
{
	struct hs_hybrid *h = s->h;
	const struct hs_moe_layer *l = h->l;
	struct hs_dev_ffn f = { .arch = l->arch, .n_embd = l->n_embd, .n_ff = l->n_ff,
				.n_experts = l->n_experts, .n_used = l->n_used, .pack = h->pack, .pool = h->slots->pool,
				.pool_stride = h->pack.bytes, .slot_of = h->slots->slot_of, .n = s->n, .xq = h->dxq,
				.ids = ids, .weights = h->dw, .y = h->dy, .scratch = h->dscratch };
	return f;
}

/* GPU lane, first launch: the hits, while the copy lane streams */
static int t_gpu_hits(void *ctx)
{
	struct step *s = ctx;
	struct hs_hybrid *h = s->h;
	const struct hs_dev_ops *o = h->d->ops;
	const struct hs_moe_layer *l = h->l;
	const size_t xb = sizeof(float) * (size_t)s->n * l->n_embd, P = (size_t)s->n * l->n_used;
	int rc;

	if (!s->n_hit_pairs && !s->n_stream_pairs)
		return 0;
	if ((rc = hs__dev_copy_h2d(h->d, h->qc, h->dx, h->hx, xb)) ||
	    (rc = hs__dev_copy_h2d(h->d, h->qc, h->dw, h->hw, sizeof(float) * P)) || (rc = o->zero(h->qc, h->dy, xb)) ||
	    (rc = o->quantize(h->qc, h->dx, s->n, l->n_embd, h->dxq)))
		return rc;
	if (!s->n_hit_pairs)
		return 0;
	struct hs_dev_ffn f = device_ffn(s, h->dids);
	if ((rc = hs__dev_copy_h2d(h->d, h->qc, h->dids, h->hids, sizeof(int32_t) * P)) ||
	    (rc = o->event_record(h->ev[0], h->qc)) || (rc = o->ffn(h->qc, &f)) ||
	    (rc = o->event_record(h->ev[1], h->qc)))
		return rc;
	s->timed[0] = 1;
	/* the slots this launch reads are not reused before it has finished */
	for (int i = 0; i < s->n_hit_slots; i++)
		if ((rc = hs__slots_release(h->slots, h->hit_slot[i], h->qc)))
			return rc;
	return 0;
}

/* GPU lane, last: the output comes back once every launch has run */
static int t_gpu_done(void *ctx)
{
	struct step *s = ctx;
	struct hs_hybrid *h = s->h;
	const struct hs_dev_ops *o = h->d->ops;
	const size_t xb = sizeof(float) * (size_t)s->n * h->l->n_embd;
	int rc;

	if (!s->n_hit_pairs && !s->n_stream_pairs) {
		memset(h->hy, 0, xb);
		return 0;
	}
	if ((rc = o->copy_d2h(h->qc, h->hy, h->dy, xb)) || (rc = o->queue_sync(h->qc)))
		return rc;
	s->device_s = 0;
	for (int k = 0; k <= s->n_streamed; k++) {
		float ms = 0;
		if (s->timed[k] && o->event_elapsed_ms(h->ev[2 * k], h->ev[2 * k + 1], &ms) == 0)
			s->device_s += ms / 1e3;
	}
	return 0;
}

struct cpu_ctx {
	struct hs_ffn_job *job;
	struct hs_pool *pool;
};

static void cpu_steps(void *ctx, int ith, int nth)
{
	struct cpu_ctx *c = ctx;
	hs__ffn_step_quantize(c->job, ith, nth);
	hs__pool_barrier(c->pool);
	hs__ffn_step_gate_up(c->job, ith, nth);
	hs__pool_barrier(c->pool);
	hs__ffn_step_down(c->job, ith, nth);
}

void hs__ffn_run_pool(struct hs_ffn_job *job, struct hs_pool *pool)
{
	struct cpu_ctx c = { job, pool };
	hs__pool_run(pool, cpu_steps, &c);
}

/* CPU lane: misses from host memory on the pool */
static int t_cpu(void *ctx)
{
	struct step *s = ctx;
	struct hs_hybrid *h = s->h;
	const struct hs_moe_layer *l = h->l;
	int rc;

	memset(h->ycpu, 0, sizeof(float) * (size_t)s->n * l->n_embd);
	if (!s->n_cpu_pairs)
		return 0;
	s->job = (struct hs_ffn_job){ .layer = l, .ops = hs__kernels_best(), .n = s->n, .x = s->x, .ids = h->ids_cpu,
				      .weights = h->hw, .y = h->ycpu, .scratch = h->cscratch };
	if ((rc = hs__ffn_prepare(&s->job)))
		return rc;
	s->st->host_bytes = (uint64_t)s->job.n_active * h->pack.bytes;
	hs__ffn_run_pool(&s->job, h->pool);
	return 0;
}

/* host: the two partial outputs added */
static int t_combine(void *ctx)
{
	struct step *s = ctx;
	const size_t n = (size_t)s->n * s->h->l->n_embd;
	for (size_t i = 0; i < n; i++)
		s->y[i] = s->h->ycpu[i] + s->h->hy[i];
	return 0;
}

int hs__hybrid_forward(struct hs_hybrid *h, int n, const float *x, const int32_t *ids, const float *weights,
		       float *y, enum hs_mode mode, double q, struct hs_layer_stats *st)
{
	struct hs_layer_stats local;
	struct step s;
	struct hs_graph_stats gs;

	if (n < 1 || n > h->max_n)
		return hs__error(EINVAL, "hybrid: %d tokens, this layer was set up for 1..%d", n, h->max_n);
	if ((ids == NULL) != (weights == NULL))
		return hs__error(EINVAL, "hybrid: give both ids and weights, or neither");
	if (mode != HS_MODE_CPU_COMPUTE && mode != HS_MODE_PCIE_STREAM && mode != HS_MODE_HYBRID)
		return hs__error(EINVAL, "hybrid: mode %s", hs_mode_name(mode));
	if (!(q <= 1) || (q < 0 && mode != HS_MODE_HYBRID))
		return hs__error(EINVAL, "hybrid: streamed share %g outside 0..1", q);
	memset(&s, 0, sizeof s);
	s = (struct step){ .h = h, .n = n, .x = x, .ids = ids, .weights = weights, .y = y, .mode = mode, .q = q,
			   .st = st ? st : &local };
	/* 0 split; 1 the hits' launch (queued, not waited for); 2 the streamed
	 * experts, each copied then launched (after 1: the output is zeroed and
	 * the activations quantized by then); 3 the output back, after the
	 * device ran everything; 4 the CPU's misses after the split; 5 combine */
	struct hs_task t[6] = {
		{ .lane = HS_LANE_HOST, .run = t_split, .ctx = &s, .name = "split" },
		{ .lane = HS_LANE_GPU, .run = t_gpu_hits, .ctx = &s, .n_deps = 1, .deps = { 0 }, .name = "device hits" },
		{ .lane = HS_LANE_COPY, .run = t_stream, .ctx = &s, .n_deps = 1, .deps = { 1 }, .name = "stream" },
		{ .lane = HS_LANE_GPU, .run = t_gpu_done, .ctx = &s, .n_deps = 1, .deps = { 2 }, .name = "device done" },
		{ .lane = HS_LANE_CPU, .run = t_cpu, .ctx = &s, .n_deps = 1, .deps = { 0 }, .name = "cpu misses" },
		{ .lane = HS_LANE_HOST, .run = t_combine, .ctx = &s, .n_deps = 2, .deps = { 3, 4 }, .name = "combine" },
	};
	int rc = hs__graph_run_on(h->lanes, t, 6, &gs);
	/* live speed estimates (exponential average) from what the lanes did */
	if (!rc && t[4].t_end > t[4].t_start && s.st->host_bytes) {
		double b = s.st->host_bytes / (t[4].t_end - t[4].t_start);
		h->est_cpu_bps = h->est_cpu_bps > 0 ? 0.8 * h->est_cpu_bps + 0.2 * b : b;
	}
	if (!rc && t[2].t_end > t[2].t_start && s.st->pcie_bytes) {
		double b = s.st->pcie_bytes / (t[2].t_end - t[2].t_start);
		h->est_copy_bps = h->est_copy_bps > 0 ? 0.8 * h->est_copy_bps + 0.2 * b : b;
	}
	const double dev_b = (double)(s.st->experts_streamed + s.n_hit_slots) * h->pack.bytes;
	if (!rc && s.device_s > 0 && dev_b > 0) {
		double b = dev_b / s.device_s;
		h->est_gpu_bps = h->est_gpu_bps > 0 ? 0.8 * h->est_gpu_bps + 0.2 * b : b;
	}
	s.st->q = s.q;
	s.st->wall_s = gs.wall_s;
	memcpy(s.st->busy_s, gs.busy_s, sizeof gs.busy_s);
	/* the GPU lane thread mostly queues and waits: its busy time is what the
	 * device spent in the launches */
	s.st->busy_s[HS_LANE_GPU] = s.device_s;
	double sum = 0;
	for (int i = 0; i < HS_N_LANES; i++)
		sum += s.st->busy_s[i];
	s.st->overlap = gs.wall_s > 0 ? sum / gs.wall_s : 0;
	return rc;
}
