/* One MoE layer on a device (sim or CUDA) through the device contract:
 * route on the host, upload the routed experts into slots, quantize and
 * run the fused FFN there, bring the output back.  The hybrid runtime
 * splits a layer between this path and the CPU; this is the device lane
 * alone, used by `hotset run-layer --device` and the device tests. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "hotset.h"
#include "device/device.h"
#include "base/error.h"
#include "cpu_kernels/router.h"
#include "model/model.h"

struct pinned_buf {
	void *p;
	size_t n;
};

static void *pin_alloc(struct hs_device *d, struct pinned_buf *b, size_t n)
{
	b->n = n ? n : 1;
	b->p = NULL;
	if (posix_memalign(&b->p, 4096, b->n)) {
		b->p = NULL;
		hs__error(ENOMEM, "device forward: no memory for %zu bytes", b->n);
		return NULL;
	}
	if (hs__device_pin(d, b->p, b->n, 0)) {
		free(b->p);
		b->p = NULL;
		return NULL;
	}
	return b->p;
}

static void pin_free(struct hs_device *d, struct pinned_buf *b)
{
	if (!b->p)
		return;
	hs__device_unpin(d, b->p, b->n);
	free(b->p);
	b->p = NULL;
}

int hs_moe_forward_device(const hs_model *m, int layer, int n, const float *x, const int32_t *ids_in,
			  const float *weights_in, float *y, const char *backend, char *desc, size_t desc_len)
{
	const struct hs_moe_layer *l = hs__model_layer(m, layer);
	struct hs_device *d = NULL;
	hs_queue *qc = NULL, *qx = NULL;
	struct hs_slots *slots = NULL;
	struct pinned_buf bx = { 0 }, bids = { 0 }, bw = { 0 }, by = { 0 }, bpack = { 0 };
	void *dx = NULL, *dxq = NULL, *dids = NULL, *dw = NULL, *dy = NULL, *scratch = NULL;
	int *slot_for = NULL, rc;

	HS_NEED(m, -EINVAL);
	if (!l)
		return hs__error(EINVAL, "layer %d has no experts", layer);
	if (n < 1)
		return hs__error(EINVAL, "device forward: %d tokens", n);
	HS_NEED(x, -EINVAL);
	HS_NEED(y, -EINVAL);
	if (ids_in && !weights_in)
		return hs__error(EINVAL, "device forward: ids without weights");
	if ((rc = hs__check_finite(x, n, l->n_embd, "hidden states")) ||
	    (ids_in && (rc = hs__check_finite(weights_in, n, l->n_used, "expert weights"))))
		return rc;
	const int D = l->n_embd, F = l->n_ff, E = l->n_experts, K = l->n_used;
	const size_t xb = sizeof(float) * (size_t)n * D, ib = sizeof(int32_t) * (size_t)n * K;
	const struct hs_expert_pack pack = hs__expert_pack_layout(l->type, D, F, l->arch->has_bias);

	if ((rc = hs__device_open(backend, 0, &d)))
		return rc;
	if (desc && desc_len)
		snprintf(desc, desc_len, "%s", d->ops->describe(d->dev));
	const struct hs_dev_ops *o = d->ops;
	if ((rc = o->ffn_takes(&pack, D, F))) {
		rc = hs__error(EINVAL, "layer %d: %s", layer, hs_last_error());
		goto out_release;
	}
	if ((rc = o->queue_create(d->dev, &qc)) || (rc = o->queue_create(d->dev, &qx)))
		goto out_release;
	float *hx = pin_alloc(d, &bx, xb), *hw = pin_alloc(d, &bw, sizeof(float) * (size_t)n * K);
	float *hy = pin_alloc(d, &by, xb);
	int32_t *hids = pin_alloc(d, &bids, ib);
	slot_for = malloc(sizeof *slot_for * E);
	if (!hx || !hw || !hy || !hids || !slot_for) {
		rc = -ENOMEM;
		goto out_release;
	}
	memcpy(hx, x, xb);
	if (ids_in) {
		memcpy(hids, ids_in, ib);
		memcpy(hw, weights_in, sizeof(float) * (size_t)n * K);
	} else if ((rc = hs__moe_route(l, n, x, hids, hw))) {
		goto out_release;
	}
	/* one slot per routed expert; the others stay on the host, unread */
	int n_slots = 0;
	for (int e = 0; e < E; e++)
		slot_for[e] = -1;
	for (int i = 0; i < n * K; i++) {
		if (hids[i] < -1 || hids[i] >= E) {
			rc = hs__error(EINVAL, "device forward: id %d outside -1..%d", hids[i], E - 1);
			goto out_release;
		}
		if (hids[i] >= 0 && slot_for[hids[i]] < 0)
			slot_for[hids[i]] = n_slots++;
	}
	if ((rc = hs__slots_create(d, n_slots ? n_slots : 1, E, pack.bytes, qx, &slots)))
		goto out_release;
	uint8_t *hp = pin_alloc(d, &bpack, pack.bytes * (size_t)(n_slots ? n_slots : 1));
	if (!hp) {
		rc = -ENOMEM;
		goto out_release;
	}
	for (int e = 0; e < E; e++) {
		if (slot_for[e] < 0)
			continue;
		uint8_t *src = hp + (size_t)slot_for[e] * pack.bytes;
		hs__expert_pack(l, e, &pack, src);
		if ((rc = hs__slots_upload(slots, slot_for[e], e, src, qx, qc)))
			goto out_release;
	}
	struct hs_dev_ffn f = { .arch = l->arch, .n_embd = D, .n_ff = F, .n_experts = E,
				.n_used = K, .pack = pack, .pool = slots->pool, .pool_stride = pack.bytes,
				.slot_of = slots->slot_of, .n = n };
	size_t sb = o->ffn_scratch_bytes(&f);
	if ((rc = o->alloc(d->dev, xb, &dx)) || (rc = o->alloc(d->dev, (size_t)n * (D / HS_QK) * 34, &dxq)) ||
	    (rc = o->alloc(d->dev, ib, &dids)) || (rc = o->alloc(d->dev, sizeof(float) * (size_t)n * K, &dw)) ||
	    (rc = o->alloc(d->dev, xb, &dy)) || (rc = o->alloc(d->dev, sb ? sb : 1, &scratch)))
		goto out_release;
	f.xq = dxq;
	f.ids = dids;
	f.weights = dw;
	f.y = dy;
	f.scratch = scratch;
	if ((rc = hs__dev_copy_h2d(d, qc, dx, hx, xb)) || (rc = hs__dev_copy_h2d(d, qc, dids, hids, ib)) ||
	    (rc = hs__dev_copy_h2d(d, qc, dw, hw, sizeof(float) * (size_t)n * K)) || (rc = o->zero(qc, dy, xb)) ||
	    (rc = o->quantize(qc, dx, n, D, dxq)) || (rc = o->ffn(qc, &f)) || (rc = o->copy_d2h(qc, hy, dy, xb)) ||
	    (rc = o->queue_sync(qc)))
		goto out_release;
	memcpy(y, hy, xb);
out_release:
	if (qx)
		o->queue_sync(qx);
	if (qc)
		o->queue_sync(qc);
	if (d) {
		o->free(d->dev, dx);
		o->free(d->dev, dxq);
		o->free(d->dev, dids);
		o->free(d->dev, dw);
		o->free(d->dev, dy);
		o->free(d->dev, scratch);
		hs__slots_free(slots);
		pin_free(d, &bx);
		pin_free(d, &bw);
		pin_free(d, &by);
		pin_free(d, &bids);
		pin_free(d, &bpack);
		if (qc)
			o->queue_destroy(qc);
		if (qx)
			o->queue_destroy(qx);
		hs__device_close(d);
	}
	free(slot_for);
	return rc;
}
