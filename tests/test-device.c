/* Checks the device contract on one backend ($HS_TEST_DEVICE: sim by
 * default, cuda when a device exists, else SKIP): the fused expert FFN
 * against the double reference over a shape grid (1, 7, 512 tokens, masked
 * and duplicate ids, zero-token experts, n_ff != n_embd, MXFP4 and Q8_0,
 * both architectures, a Q4_K/Q6_K mix on plain rows), slot upload and reuse ordering under a slow queue
 * (with a control that shows the test would catch a reuse too early), event
 * ordering, sticky queue errors, -ENOMEM on an oversized allocation, and
 * pinned copies that round-trip bytes exactly. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "model/arch.h"
#include "cpu_kernels/kernels.h"
#include "hotset.h"
#include "topology/cuda-probe.h"
#include "device/device.h"
#include "tests/device-util.h"
#include "tests/hs-test.h"
#include "tests/layer-util.h"

static struct hs_device *dev;
static const struct hs_dev_ops *O;
static hs_queue *qc, *qx; /* compute and copy queues */
static int is_sim;
/* The slot test's control overwrites a slot while a queue reads it, on
 * purpose: ThreadSanitizer rightly reports that race, so its build runs
 * the real case only. */
#if defined(__SANITIZE_THREAD__)
static const int under_tsan = 1;
#else
static const int under_tsan = 0;
#endif

/* pinned host memory of n bytes (freed with unpin_free) */
static void *pinned(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n ? n : 1))
		return NULL;
	if (hs__device_pin(dev, p, n ? n : 1, 0)) {
		fprintf(stderr, "pin: %s\n", hs_last_error());
		free(p);
		return NULL;
	}
	return p;
}
static void unpin_free(void *p, size_t n)
{
	if (!p)
		return;
	hs__device_unpin(dev, p, n ? n : 1);
	free(p);
}

/* The device FFN of one batch against the reference; experts not routed by
 * any token are left out of the device entirely (slot -1): reading one
 * would fail or fault. */
static void ffn_case(struct layer *L, int n, int mask_mode, int dup)
{
	const struct hs_moe_layer *l = &L->l;
	const int D = l->n_embd, F = l->n_ff, E = l->n_experts, K = l->n_used;
	struct hs_expert_pack pack = hs__expert_pack_layout(l->type, D, F, l->arch->has_bias);
	size_t xb = sizeof(float) * (size_t)n * D, ib = sizeof(int32_t) * (size_t)n * K;
	float *x = pinned(xb), *w = pinned(sizeof(float) * (size_t)n * K), *y = pinned(xb);
	int32_t *ids = pinned(ib);
	float *ref = malloc(xb);
	uint8_t *packed = pinned(pack.bytes);
	int *used = calloc(E, sizeof *used), n_used_experts = 0;
	struct hs_slots *slots = NULL;

	if (!x || !w || !y || !ids || !ref || !packed || !used) {
		CHECK(0, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < (size_t)n * D; i++)
		x[i] = frand();
	for (int t = 0; t < n; t++)
		for (int j = 0; j < K; j++) {
			int e = (int)(next() % (uint32_t)(E / 2)); /* half the experts get no token */
			if (dup && j > 0 && next() % 3 == 0)
				e = ids[t * K + j - 1]; /* duplicate within a token */
			if (mask_mode == 1 && next() % 3 == 0)
				e = -1;
			if (mask_mode == 2)
				e = -1; /* everything masked */
			ids[t * K + j] = e;
			w[t * K + j] = 0.2f + 0.6f * (float)(next() % 100) / 100.0f;
		}
	for (int i = 0; i < n * K; i++)
		if (ids[i] >= 0 && !used[ids[i]]++)
			n_used_experts++;
	CHECK(hs__moe_forward_ref(l, n, x, ids, w, ref) == 0, "reference: %s", hs_last_error());

	/* the routed experts go to slots 0, 1, ...: uploads through the pool */
	int rc = hs__slots_create(dev, n_used_experts > 0 ? n_used_experts : 1, E, pack.bytes, qx, &slots);
	CHECK(rc == 0, "slots: %s", hs_last_error());
	if (rc)
		goto out;
	int s = 0;
	for (int e = 0; e < E; e++) {
		if (!used[e])
			continue;
		hs__expert_pack(l, e, &pack, packed);
		CHECK(hs__slots_upload(slots, s++, e, packed, qx, qc) == 0, "upload: %s", hs_last_error());
		/* the packed buffer is reused: let the copy finish first */
		CHECK(O->queue_sync(qx) == 0, "%s", hs_last_error());
	}
	void *dx = NULL, *dxq = NULL, *dids = NULL, *dw = NULL, *dy = NULL, *scratch = NULL;
	struct hs_dev_ffn f = { .arch = l->arch, .n_embd = D, .n_ff = F, .n_experts = E, .n_used = K,
				.pack = pack, .pool = slots->pool, .pool_stride = pack.bytes, .slot_of = slots->slot_of,
				.n = n };
	size_t sb = O->ffn_scratch_bytes(&f);
	if (O->alloc(dev->dev, xb, &dx) || O->alloc(dev->dev, (size_t)n * (D / 32) * 34, &dxq) ||
	    O->alloc(dev->dev, ib, &dids) || O->alloc(dev->dev, sizeof(float) * (size_t)n * K, &dw) ||
	    O->alloc(dev->dev, xb, &dy) || O->alloc(dev->dev, sb ? sb : 1, &scratch)) {
		CHECK(0, "device alloc: %s", hs_last_error());
		goto out_dev;
	}
	f.xq = dxq;
	f.ids = dids;
	f.weights = dw;
	f.y = dy;
	f.scratch = scratch;
	CHECK(hs__dev_copy_h2d(dev, qc, dx, x, xb) == 0 && hs__dev_copy_h2d(dev, qc, dids, ids, ib) == 0 &&
		      hs__dev_copy_h2d(dev, qc, dw, w, sizeof(float) * (size_t)n * K) == 0 && O->zero(qc, dy, xb) == 0 &&
		      O->quantize(qc, dx, n, D, dxq) == 0 && O->ffn(qc, &f) == 0 && O->copy_d2h(qc, y, dy, xb) == 0,
	      "launch: %s", hs_last_error());
	CHECK(O->queue_sync(qc) == 0, "run: %s", hs_last_error());
	double err = rel_l2(y, ref, (size_t)n * D);
	/* MXFP4/Q8_0 weights against Q8_0 activations: the CPU kernel bound */
	CHECK(err < (mask_mode == 2 ? 1e-30 : 0.05), "%s %s D%d F%d E%d K%d n=%d mask %d dup %d: rel L2 %.3g",
	      l->arch->name, hs__type_name(l->type[HS_GATE]), D, F, E, K, n, mask_mode, dup, err);
out_dev:
	O->free(dev->dev, dx);
	O->free(dev->dev, dxq);
	O->free(dev->dev, dids);
	O->free(dev->dev, dw);
	O->free(dev->dev, dy);
	O->free(dev->dev, scratch);
out:
	hs__slots_free(slots);
	unpin_free(x, xb);
	unpin_free(w, sizeof(float) * (size_t)n * K);
	unpin_free(y, xb);
	unpin_free(ids, ib);
	unpin_free(packed, pack.bytes);
	free(ref);
	free(used);
}

static void ffn_grid(void)
{
	static const struct {
		const struct hs_moe_arch *arch;
		int type, D, F, E, K;
	} shapes[] = {
		{ &hs__arch_gpt_oss, HS_TYPE_MXFP4, 64, 96, 8, 4 },
		{ &hs__arch_gpt_oss, HS_TYPE_MXFP4, 256, 128, 16, 4 },
		{ &hs__arch_qwen3moe, HS_TYPE_Q8_0, 128, 64, 16, 8 },
		{ &hs__arch_qwen3moe, HS_TYPE_MXFP4, 96, 160, 8, 2 },
	};
	static const int ns[] = { 1, 7, 512 };
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		struct layer L;
		if (make_layer(&L, shapes[i].arch, shapes[i].type, shapes[i].D, shapes[i].F, shapes[i].E, shapes[i].K)) {
			CHECK(0, "out of memory");
			return;
		}
		for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
			for (int mask = 0; mask < 3; mask++)
				ffn_case(&L, ns[j], mask, mask == 1);
		free(L.w);
		free(L.b);
	}
	/* a K-quant mix as llama-quantize writes it (Q4_K gate/up, Q6_K down): plain rows in the slots */
	static const int q4km[3] = { HS_TYPE_Q4_K, HS_TYPE_Q4_K, HS_TYPE_Q6_K };
	struct layer L;
	if (make_layer3(&L, &hs__arch_qwen3moe, q4km, 256, 512, 8, 4)) {
		CHECK(0, "out of memory");
		return;
	}
	for (int j = 0; j < 2; j++)
		ffn_case(&L, ns[j], j, j);
	free(L.w);
	free(L.b);
}

/* A slot that kernels still read is not overwritten: with a slow compute
 * queue, the FFN over expert A in slot 0 is queued, the slot released, and
 * expert B uploaded into slot 0 at once.  The FFN must still see A.  The
 * control overwrites the slot with a raw copy that does not wait, and must
 * see B (sim only: it needs the slow queue). */
static void slot_reuse(void)
{
	struct layer L;
	const int D = 64, F = 64, E = 2, K = 1, n = 1;
	if (!is_sim || make_layer(&L, &hs__arch_qwen3moe, HS_TYPE_Q8_0, D, F, E, K))
		return;
	struct hs_expert_pack pack = hs__expert_pack_layout(L.l.type, D, F, 0);
	uint8_t *pa = pinned(pack.bytes), *pb = pinned(pack.bytes);
	float *x = pinned(sizeof(float) * D), *y = pinned(sizeof(float) * D), *w = pinned(sizeof(float));
	int32_t *ids = pinned(sizeof(int32_t));
	float refA[64], refB[64];
	struct hs_slots *s = NULL;
	void *dx, *dxq, *dids, *dw, *dy, *scr;

	for (int i = 0; i < D; i++)
		x[i] = frand();
	w[0] = 1;
	hs__expert_pack(&L.l, 0, &pack, pa);
	hs__expert_pack(&L.l, 1, &pack, pb);
	ids[0] = 0;
	hs__moe_forward_ref(&L.l, n, x, ids, w, refA);
	ids[0] = 1;
	hs__moe_forward_ref(&L.l, n, x, ids, w, refB);
	for (int control = 0; control < 1 + !under_tsan; control++) {
		CHECK(hs__slots_create(dev, 1, E, pack.bytes, qx, &s) == 0, "%s", hs_last_error());
		if (!s)
			break;
		struct hs_dev_ffn f = { .arch = L.l.arch, .n_embd = D, .n_ff = F, .n_experts = E,
					.n_used = K, .pack = pack, .pool = s->pool, .pool_stride = pack.bytes,
					.slot_of = s->slot_of, .n = n };
		O->alloc(dev->dev, sizeof(float) * D, &dx);
		O->alloc(dev->dev, 34 * (D / 32), &dxq);
		O->alloc(dev->dev, 4, &dids);
		O->alloc(dev->dev, 4, &dw);
		O->alloc(dev->dev, sizeof(float) * D, &dy);
		O->alloc(dev->dev, O->ffn_scratch_bytes(&f), &scr);
		f.xq = dxq, f.ids = dids, f.weights = dw, f.y = dy, f.scratch = scr;
		ids[0] = 0;
		hs__slots_upload(s, 0, 0, pa, qx, qc);
		hs__dev_copy_h2d(dev, qc, dx, x, sizeof(float) * D);
		hs__dev_copy_h2d(dev, qc, dids, ids, 4);
		hs__dev_copy_h2d(dev, qc, dw, w, 4);
		O->zero(qc, dy, sizeof(float) * D);
		O->quantize(qc, dx, 1, D, dxq);
		hs__sim_set_queue_delay(qc, 30000); /* every later item of qc waits 30 ms */
		O->ffn(qc, &f);
		hs__slots_release(s, 0, qc);
		O->copy_d2h(qc, y, dy, sizeof(float) * D);
		if (!control) {
			/* expert B takes the slot: the table entry for A goes to -1 and
			 * B's to 0 only after the FFN above has run */
			CHECK(hs__slots_upload(s, 0, 1, pb, qx, qc) == 0, "%s", hs_last_error());
		} else {
			hs__dev_copy_h2d(dev, qx, s->pool, pb, pack.bytes); /* no wait: wrong on purpose */
		}
		CHECK(O->queue_sync(qc) == 0 && O->queue_sync(qx) == 0, "%s", hs_last_error());
		hs__sim_set_queue_delay(qc, 0);
		double ea = rel_l2(y, refA, D), eb = rel_l2(y, refB, D);
		if (!control)
			CHECK(ea < 0.05 && eb > 0.2, "slot reused while read: error vs A %.3g, vs B %.3g", ea, eb);
		else
			CHECK(eb < 0.05, "control: the early overwrite should have been seen (vs B %.3g)", eb);
		O->free(dev->dev, dx);
		O->free(dev->dev, dxq);
		O->free(dev->dev, dids);
		O->free(dev->dev, dw);
		O->free(dev->dev, dy);
		O->free(dev->dev, scr);
		hs__slots_free(s);
		s = NULL;
	}
	unpin_free(pa, pack.bytes);
	unpin_free(pb, pack.bytes);
	unpin_free(x, sizeof(float) * D);
	unpin_free(y, sizeof(float) * D);
	unpin_free(w, sizeof(float));
	unpin_free(ids, sizeof(int32_t));
	free(L.w);
	free(L.b);
}

/* Events: a queue that waits for an event runs nothing later until the
 * recorded point has run, even when the recording queue is slow. */
static void events(void)
{
	const size_t n = 1 << 20;
	uint8_t *h = pinned(n), *back = pinned(n);
	void *d1, *d2;
	hs_event *e0, *e1;

	CHECK(O->alloc(dev->dev, n, &d1) == 0 && O->alloc(dev->dev, n, &d2) == 0, "%s", hs_last_error());
	CHECK(O->event_create(dev->dev, &e0) == 0 && O->event_create(dev->dev, &e1) == 0, "%s", hs_last_error());
	memset(h, 0xab, n);
	CHECK(hs__dev_copy_h2d(dev, qc, d1, h, n) == 0, "%s", hs_last_error());
	CHECK(O->queue_sync(qc) == 0, "%s", hs_last_error());
	if (is_sim)
		hs__sim_set_queue_delay(qc, 20000);
	O->event_record(e0, qc);
	O->zero(qc, d1, n);   /* slow queue: d1 becomes zero later */
	O->event_record(e1, qc);
	O->queue_wait(qx, e1); /* the copy queue must not copy d1 before that */
	O->copy_d2h(qx, back, d1, n);
	if (is_sim)
		CHECK(O->event_query(e1) == 0, "event reached before its queue ran");
	CHECK(O->queue_sync(qx) == 0, "%s", hs_last_error());
	CHECK(O->event_query(e1) == 1, "event not reached after the waiting queue finished");
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += back[i] != 0;
	CHECK(bad == 0, "%zu bytes copied before the event they waited for", bad);
	float ms = -1;
	CHECK(O->event_sync(e1) == 0 && O->event_elapsed_ms(e0, e1, &ms) == 0 && ms >= 0, "elapsed %g: %s", ms,
	      hs_last_error());
	if (is_sim)
		hs__sim_set_queue_delay(qc, 0);
	O->event_destroy(e0);
	O->event_destroy(e1);
	O->free(dev->dev, d1);
	O->free(dev->dev, d2);
	unpin_free(h, n);
	unpin_free(back, n);
}

/* Bytes round-trip exactly; unpinned sources are refused; pins do not
 * overlap; an oversized allocation is -ENOMEM; a bad launch leaves a
 * sticky error on its queue. */
static void memory_rules(void)
{
	const size_t n = (3 << 20) + 17;
	uint8_t *a = pinned(n), *b = pinned(n), *plain = malloc(n);
	void *d = NULL, *huge = NULL;
	uint64_t fr = 0, tot = 0;

	for (size_t i = 0; i < n; i++)
		a[i] = (uint8_t)next();
	CHECK(O->alloc(dev->dev, n, &d) == 0, "%s", hs_last_error());
	CHECK(hs__dev_copy_h2d(dev, qx, d, a, n) == 0 && O->copy_d2h(qx, b, d, n) == 0 && O->queue_sync(qx) == 0, "%s",
	      hs_last_error());
	CHECK(memcmp(a, b, n) == 0, "bytes changed on the way");
	CHECK(hs__dev_copy_h2d(dev, qx, d, plain, n) == -EINVAL && strstr(hs_last_error(), "not pinned"), "%s",
	      hs_last_error());
	CHECK(hs__dev_copy_h2d(dev, qx, d, a + 1, n) == -EINVAL, "a copy past the pinned range was taken");
	CHECK(hs__device_pin(dev, a + 100, 10, 0) == -EINVAL, "overlapping pin accepted");
	CHECK(hs__device_unpin(dev, a, 10) == -EINVAL, "unpin of a range never pinned accepted");
	CHECK(O->mem_info(dev->dev, &fr, &tot) == 0 && fr <= tot && tot > 0, "mem_info");
	CHECK(O->alloc(dev->dev, (size_t)tot + ((size_t)1 << 30), &huge) == -ENOMEM && huge == NULL,
	      "oversized allocation: %s", hs_last_error());
	/* A launch the device refuses when it runs (the ids are device memory:
	 * sim checks them at run time, CUDA's kernels check them first): an id
	 * outside the experts, a routed expert without a slot.  The error comes
	 * back from queue_sync, once, naming the id. */
	{
		int32_t *hv = pinned(sizeof(int32_t) * 8);
		void *dv = NULL;
		static const int32_t cases[2][8] = { { 9, 9, 9, 9, 0, 0, 0, 0 }, { 0, 1, 2, 3, 0, 0, -1, 0 } };
		static const char *const want[2] = { "id 9", "expert 2" };
		CHECK(hv && O->alloc(dev->dev, sizeof(int32_t) * 8, &dv) == 0, "%s", hs_last_error());
		for (int k = 0; k < 2 && hv && dv; k++) {
			memcpy(hv, cases[k], sizeof cases[k]);
			CHECK(hs__dev_copy_h2d(dev, qc, dv, hv, sizeof(int32_t) * 8) == 0 && O->queue_sync(qc) == 0, "%s",
			      hs_last_error());
			struct hs_dev_ffn f = { .arch = &hs__arch_qwen3moe, .n_embd = 32, .n_ff = 32,
						.n_experts = 4, .n_used = 4, .n = 1, .ids = dv,
						.slot_of = (int32_t *)dv + 4,
						.pack = hs__expert_pack_layout1(HS_TYPE_Q8_0, 32, 32, 0) };
			CHECK(O->ffn(qc, &f) == 0, "launch refused early: %s", hs_last_error());
			int rc = O->queue_sync(qc);
			CHECK(rc == -EINVAL && strstr(hs_last_error(), want[k]), "sticky error: rc %d, '%s' (want '%s')", rc,
			      hs_last_error(), want[k]);
			CHECK(O->queue_sync(qc) == 0, "the error was reported twice");
		}
		if (dv)
			O->free(dev->dev, dv);
		unpin_free(hv, sizeof(int32_t) * 8);
	}
	O->free(dev->dev, d);
	unpin_free(a, n);
	unpin_free(b, n);
	free(plain);
}

/* Pinned ranges of equal units (a layer's packed experts) are registered in
 * pieces of whole units: every unit's copy lies in one registration, a copy
 * across two is refused (cudaMemcpyAsync would refuse or stage it), and a
 * range pinned byte-wise (the old rule) is cut inside a unit: the control
 * that shows the check sees the cut.  Small pieces stand in for 1 GiB. */
static void pin_pieces(void)
{
	const size_t unit = 10000, units = 20, chunk = (size_t)64 << 10; /* 6 units a piece */
	const size_t bytes = unit * units, piece = chunk - chunk % unit;
	const size_t saved = dev->pin_chunk;
	uint8_t *h = NULL, *back = malloc(unit);
	void *d = NULL;

	CHECK(posix_memalign((void **)&h, 4096, bytes) == 0 && back && O->alloc(dev->dev, bytes, &d) == 0, "%s",
	      hs_last_error());
	if (!h || !back || !d)
		goto out_free;
	for (size_t i = 0; i < bytes; i++)
		h[i] = (uint8_t)next();
	dev->pin_chunk = chunk;
	CHECK(hs__device_pin_units(dev, h, bytes, unit, 0) == 0, "pin in units: %s", hs_last_error());
	for (size_t u = 0; u < units; u++) {
		int rc = hs__dev_copy_h2d(dev, qx, (uint8_t *)d + u * unit, h + u * unit, unit);
		CHECK(rc == 0, "unit %zu of %zu (pieces of %zu bytes): %s", u, units, piece, hs_last_error());
	}
	CHECK(O->copy_d2h(qx, back, (uint8_t *)d + 7 * unit, unit) == 0 && O->queue_sync(qx) == 0 &&
		      memcmp(back, h + 7 * unit, unit) == 0,
	      "unit 7 changed on the way: %s", hs_last_error());
	/* units 5 and 6 meet at the first piece's end; 4 and 5 inside it */
	CHECK(hs__dev_copy_h2d(dev, qx, d, h + 5 * unit, 2 * unit) == -EINVAL &&
		      strstr(hs_last_error(), "two registrations"),
	      "a copy across two registrations taken: '%s'", hs_last_error());
	CHECK(hs__dev_copy_h2d(dev, qx, d, h + 4 * unit, 2 * unit) == 0, "%s", hs_last_error());
	CHECK(O->queue_sync(qx) == 0, "%s", hs_last_error());
	CHECK(hs__device_unpin(dev, h, bytes) == 0, "%s", hs_last_error());
	/* the control: byte-wise pieces of 64 KiB cut unit 6 (60000..70000) */
	CHECK(hs__device_pin(dev, h, bytes, 0) == 0, "%s", hs_last_error());
	CHECK(hs__dev_copy_h2d(dev, qx, d, h + 6 * unit, unit) == -EINVAL,
	      "byte-wise pieces: a unit across 64 KiB accepted (the check would miss the cut)");
	CHECK(O->queue_sync(qx) == 0 && hs__device_unpin(dev, h, bytes) == 0, "%s", hs_last_error());
	CHECK(hs__device_pin_units(dev, h, bytes, 0, 0) == -EINVAL, "units of 0 bytes accepted");
out_free:
	dev->pin_chunk = saved;
	O->free(dev->dev, d);
	free(h);
	free(back);
}

/* Evicting a slot: its expert is no longer found, on the host mirror and
 * in the device table; an upload nobody waits for (compute_q NULL) says
 * when it is in through its `ready` event. */
static void evict(void)
{
	const size_t sb = 4096;
	struct hs_slots *s = NULL;
	uint8_t *src = pinned(sb);
	int32_t *table = pinned(sizeof(int32_t) * 4);
	CHECK(hs__slots_create(dev, 2, 4, sb, qx, &s) == 0, "%s", hs_last_error());
	if (!s)
		return;
	memset(src, 7, sb);
	CHECK(hs__slots_upload(s, 0, 2, src, qx, NULL) == 0, "%s", hs_last_error());
	CHECK(O->event_sync(s->ready[0]) == 0 && O->event_query(s->ready[0]) == 1, "ready after the upload");
	CHECK(s->slot_of_host[2] == 0 && s->expert_in[0] == 2, "uploaded: table %d, slot holds %d", s->slot_of_host[2],
	      s->expert_in[0]);
	CHECK(hs__slots_evict(s, 0, qx) == 0, "%s", hs_last_error());
	CHECK(s->slot_of_host[2] == -1 && s->expert_in[0] == -1, "evicted: table %d, slot holds %d", s->slot_of_host[2],
	      s->expert_in[0]);
	CHECK(O->copy_d2h(qx, table, s->slot_of, sizeof(int32_t) * 4) == 0 && O->queue_sync(qx) == 0, "%s",
	      hs_last_error());
	CHECK(table[2] == -1, "device table still points expert 2 at slot %d", table[2]);
	CHECK(hs__slots_evict(s, 0, qx) == 0, "evicting an empty slot");
	CHECK(hs__slots_evict(s, 2, qx) == -EINVAL, "slot 2 of 2 accepted");
	/* the expert may go to another slot now */
	CHECK(hs__slots_upload(s, 1, 2, src, qx, qc) == 0 && O->queue_sync(qx) == 0 && O->queue_sync(qc) == 0, "%s",
	      hs_last_error());
	CHECK(s->slot_of_host[2] == 1, "re-uploaded to slot %d", s->slot_of_host[2]);
	hs__slots_free(s);
	unpin_free(src, sb);
	unpin_free(table, sizeof(int32_t) * 4);
}

int main(void)
{
	dev = hs_test_device();
	O = dev->ops;
	is_sim = strcmp(O->name, "sim") == 0;
	if (O->queue_create(dev->dev, &qc) || O->queue_create(dev->dev, &qx)) {
		fprintf(stderr, "queues: %s\n", hs_last_error());
		return 1;
	}
	memory_rules();
	pin_pieces();
	events();
	slot_reuse();
	evict();
	ffn_grid();
	O->queue_destroy(qc);
	O->queue_destroy(qx);
	hs__device_close(dev);
	return hs_test_end();
}
