/* The device layer's common part: choosing a backend, the pinned-memory
 * rule for streaming copies, and expert slots. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "topology/cuda-probe.h"
#include "device/device.h"
#include "base/error.h"
#include "base/log.h"

/* Largest registration: very large single registrations fail on recent
 * drivers, and smaller pieces let a partial failure be undone.  A copy must
 * not span two registrations (cudaMemcpyAsync refuses it or stages it), so
 * ranges of equal units (a layer's packed experts) are cut between units. */
#define PIN_CHUNK ((size_t)1 << 30)

int hs__device_open(const char *backend, int index, struct hs_device **out)
{
	const struct hs_dev_ops *ops = NULL;
	const char *why = "as asked";
	struct hs_device *d;
	int rc;

	*out = NULL;
	if ((!backend || !*backend) && (backend = getenv("HOTSET_DEVICE")) && *backend)
		why = "as $HOTSET_DEVICE asks";
	if (!backend || !*backend) {
		int cuda = hs__cuda_probe() > 0 && hs__dev_cuda_ops();
		backend = cuda ? "cuda" : "sim";
		why = cuda ? "a CUDA device answered" : hs__cuda_probe_status();
	}
	if (strcmp(backend, "sim") == 0)
		ops = &hs__dev_sim_ops;
	else if (strcmp(backend, "cuda") == 0) {
		ops = hs__dev_cuda_ops();
		if (!ops)
			return hs__error(ENODEV, "device cuda: hotset was built without CUDA");
	} else
		return hs__error(ENODEV, "device '%s': unknown (sim or cuda)", backend);
	d = calloc(1, sizeof *d);
	if (!d)
		return hs__error(ENOMEM, "device: out of memory");
	d->ops = ops;
	d->pin_chunk = PIN_CHUNK;
	if ((rc = ops->open(index, &d->dev))) {
		free(d);
		return rc;
	}
	hs__log(HS_LOG_INFO, "device: %s %d opened, %s; %s", backend, index, ops->describe(d->dev), why);
	*out = d;
	return 0;
}

void hs__device_close(struct hs_device *d)
{
	if (!d)
		return;
	d->ops->close(d->dev);
	free(d->pinned);
	free(d);
}

/* The registrations of a range: pieces of `piece` bytes from its start, the
 * last one shorter. */
static size_t piece_len(const struct hs_pinned *r, size_t off)
{
	const size_t left = (size_t)(r->hi - r->lo) - off;
	return left < r->piece ? left : r->piece;
}

static void unregister_pieces(struct hs_device *d, const struct hs_pinned *r, size_t upto)
{
	for (size_t u = 0; u < upto; u += r->piece)
		d->ops->host_unregister(d->dev, (void *)(r->lo + u), piece_len(r, u));
}

int hs__device_pin_units(struct hs_device *d, void *ptr, size_t bytes, size_t unit, int read_only)
{
	uint8_t *p = ptr;
	size_t done = 0;
	int rc = 0;

	if (!d || !ptr)
		return hs__error(EINVAL, "pin: no device or no memory");
	if (!bytes)
		return 0;
	if (!unit || (uintptr_t)p + bytes < (uintptr_t)p)
		return hs__error(EINVAL, "pin: [%p, +%zu) in units of %zu bytes", ptr, bytes, unit);
	if (hs__device_is_pinned(d, ptr, 1) || hs__device_is_pinned(d, p + bytes - 1, 1))
		return hs__error(EINVAL, "pin: [%p, +%zu) overlaps memory that is already pinned", ptr, bytes);
	if (d->n_pinned == d->cap_pinned) {
		int cap = d->cap_pinned ? 2 * d->cap_pinned : 16;
		struct hs_pinned *n = realloc(d->pinned, sizeof *n * cap);
		if (!n)
			return hs__error(ENOMEM, "pin: out of memory");
		d->pinned = n;
		d->cap_pinned = cap;
	}
	const size_t chunk = d->pin_chunk ? d->pin_chunk : PIN_CHUNK;
	/* whole units per piece: no unit crosses a registration boundary */
	struct hs_pinned r = { p, p + bytes, unit >= chunk ? unit : chunk - chunk % unit };
	for (; done < bytes; done += r.piece)
		if ((rc = d->ops->host_register(d->dev, p + done, piece_len(&r, done), read_only)))
			break;
	if (rc) { /* undo the pieces that were pinned */
		unregister_pieces(d, &r, done);
		return rc;
	}
	d->pinned[d->n_pinned++] = r;
	return 0;
}

int hs__device_pin(struct hs_device *d, void *ptr, size_t bytes, int read_only)
{
	return hs__device_pin_units(d, ptr, bytes, 1, read_only);
}

int hs__device_unpin(struct hs_device *d, void *ptr, size_t bytes)
{
	uint8_t *p = ptr;
	for (int i = 0; d && i < d->n_pinned; i++) {
		if (d->pinned[i].lo != p || d->pinned[i].hi != p + bytes)
			continue;
		const struct hs_pinned r = d->pinned[i];
		int rc = 0;
		for (size_t u = 0; u < bytes; u += r.piece) {
			int e = d->ops->host_unregister(d->dev, p + u, piece_len(&r, u));
			rc = rc ? rc : e;
		}
		d->pinned[i] = d->pinned[--d->n_pinned];
		return rc;
	}
	return hs__error(EINVAL, "unpin: [%p, +%zu) was not pinned as one range", ptr, bytes);
}

/* Index of the pinned range that holds [p, p + bytes), -1 if none. */
static int range_of(const struct hs_device *d, const uint8_t *p, size_t bytes)
{
	for (int i = 0; d && i < d->n_pinned; i++)
		if (p >= d->pinned[i].lo && p + bytes <= d->pinned[i].hi && p + bytes >= p)
			return i;
	return -1;
}

int hs__device_is_pinned(const struct hs_device *d, const void *ptr, size_t bytes)
{
	const uint8_t *p = ptr;
	const int i = range_of(d, p, bytes);
	if (i < 0)
		return 0;
	const struct hs_pinned *r = &d->pinned[i];
	/* inside one registration, not only one range */
	return bytes == 0 || (size_t)(p - r->lo) / r->piece == (size_t)(p + bytes - 1 - r->lo) / r->piece;
}

int hs__dev_copy_h2d(struct hs_device *d, hs_queue *q, void *dst, const void *src, size_t bytes)
{
	if (!hs__device_is_pinned(d, src, bytes))
		return hs__error(EINVAL, "copy to the device: source [%p, +%zu) is %s", src, bytes,
				 range_of(d, src, bytes) >= 0 ? "pinned but spans two registrations"
							      : "not pinned host memory");
	return d->ops->copy_h2d(q, dst, src, bytes);
}

/* ---- expert slots ----------------------------------------------------------- */

void hs__slots_free(struct hs_slots *s)
{
	if (!s)
		return;
	const struct hs_dev_ops *o = s->d->ops;
	for (int i = 0; s->ready && i < s->n_slots; i++) {
		if (s->ready[i])
			o->event_destroy(s->ready[i]);
		if (s->released[i])
			o->event_destroy(s->released[i]);
	}
	if (s->consts) {
		hs__device_unpin(s->d, s->consts, sizeof *s->consts * (size_t)(s->n_slots + 1));
		free(s->consts);
	}
	o->free(s->d->dev, s->pool);
	o->free(s->d->dev, s->slot_of);
	free(s->slot_of_host);
	free(s->expert_in);
	free(s->ready);
	free(s->released);
	free(s->released_valid);
	free(s);
}

int hs__slots_create(struct hs_device *d, int n_slots, int n_experts, size_t slot_bytes, hs_queue *q,
		    struct hs_slots **out)
{
	const struct hs_dev_ops *o = d->ops;
	struct hs_slots *s = calloc(1, sizeof *s);
	int rc;

	*out = NULL;
	if (!s)
		return hs__error(ENOMEM, "slots: out of memory");
	if (n_slots <= 0 || n_experts <= 0 || slot_bytes == 0 || (size_t)n_slots > SIZE_MAX / slot_bytes) {
		free(s);
		return hs__error(EINVAL, "slots: %d slots of %zu bytes for %d experts", n_slots, slot_bytes, n_experts);
	}
	s->d = d;
	s->n_slots = n_slots;
	s->n_experts = n_experts;
	s->slot_bytes = slot_bytes;
	s->slot_of_host = malloc(sizeof *s->slot_of_host * n_experts);
	s->expert_in = malloc(sizeof *s->expert_in * n_slots);
	s->ready = calloc(n_slots, sizeof *s->ready);
	s->released = calloc(n_slots, sizeof *s->released);
	s->released_valid = calloc(n_slots, sizeof *s->released_valid);
	/* constant sources for table updates: a value stays valid while its
	 * asynchronous 4-byte copy is in flight */
	if (posix_memalign((void **)&s->consts, 64, sizeof *s->consts * (size_t)(n_slots + 1)))
		s->consts = NULL;
	if (!s->slot_of_host || !s->expert_in || !s->ready || !s->released || !s->released_valid || !s->consts) {
		free(s->consts);
		s->consts = NULL;
		hs__slots_free(s);
		return hs__error(ENOMEM, "slots: out of memory");
	}
	for (int i = 0; i < n_slots; i++) {
		s->consts[i] = i;
		s->expert_in[i] = -1;
	}
	s->consts[n_slots] = -1;
	for (int e = 0; e < n_experts; e++)
		s->slot_of_host[e] = -1;
	if ((rc = hs__device_pin(d, s->consts, sizeof *s->consts * (size_t)(n_slots + 1), 0))) {
		free(s->consts);
		s->consts = NULL;
		goto out_free;
	}
	if ((rc = o->alloc(d->dev, (size_t)n_slots * slot_bytes, (void **)&s->pool)) ||
	    (rc = o->alloc(d->dev, sizeof(int32_t) * n_experts, (void **)&s->slot_of)))
		goto out_free;
	for (int i = 0; i < n_slots; i++)
		if ((rc = o->event_create(d->dev, &s->ready[i])) || (rc = o->event_create(d->dev, &s->released[i])))
			goto out_free;
	/* the table starts empty: every entry -1 */
	for (int e = 0; e < n_experts; e++)
		if ((rc = hs__dev_copy_h2d(d, q, s->slot_of + e, &s->consts[n_slots], sizeof(int32_t))))
			goto out_free;
	if ((rc = o->queue_sync(q)))
		goto out_free;
	*out = s;
	return 0;
out_free:
	hs__slots_free(s);
	return rc;
}

int hs__slots_upload(struct hs_slots *s, int slot, int expert, const void *src, hs_queue *copy_q,
		    hs_queue *compute_q)
{
	const struct hs_dev_ops *o = s->d->ops;
	int rc, old;

	if (slot < 0 || slot >= s->n_slots || expert < 0 || expert >= s->n_experts)
		return hs__error(EINVAL, "slots: slot %d / expert %d outside %d slots, %d experts", slot, expert,
				 s->n_slots, s->n_experts);
	if (s->slot_of_host[expert] >= 0 && s->slot_of_host[expert] != slot)
		return hs__error(EINVAL, "slots: expert %d is already in slot %d", expert, s->slot_of_host[expert]);
	if (s->released_valid[slot] && (rc = o->queue_wait(copy_q, s->released[slot])))
		return rc;
	old = s->expert_in[slot];
	if (old >= 0 && old != expert &&
	    (rc = hs__dev_copy_h2d(s->d, copy_q, s->slot_of + old, &s->consts[s->n_slots], sizeof(int32_t))))
		return rc;
	if ((rc = hs__dev_copy_h2d(s->d, copy_q, s->pool + (size_t)slot * s->slot_bytes, src, s->slot_bytes)) ||
	    (rc = hs__dev_copy_h2d(s->d, copy_q, s->slot_of + expert, &s->consts[slot], sizeof(int32_t))) ||
	    (rc = o->event_record(s->ready[slot], copy_q)) || (compute_q && (rc = o->queue_wait(compute_q, s->ready[slot]))))
		return rc;
	if (old >= 0)
		s->slot_of_host[old] = -1;
	s->slot_of_host[expert] = slot;
	s->expert_in[slot] = expert;
	return 0;
}

int hs__slots_evict(struct hs_slots *s, int slot, hs_queue *copy_q)
{
	if (slot < 0 || slot >= s->n_slots)
		return hs__error(EINVAL, "slots: slot %d outside %d", slot, s->n_slots);
	int old = s->expert_in[slot], rc;
	if (old < 0)
		return 0;
	if (s->released_valid[slot] && (rc = s->d->ops->queue_wait(copy_q, s->released[slot])))
		return rc;
	if ((rc = hs__dev_copy_h2d(s->d, copy_q, s->slot_of + old, &s->consts[s->n_slots], sizeof(int32_t))))
		return rc;
	s->slot_of_host[old] = -1;
	s->expert_in[slot] = -1;
	return 0;
}

int hs__slots_release(struct hs_slots *s, int slot, hs_queue *q)
{
	if (slot < 0 || slot >= s->n_slots)
		return hs__error(EINVAL, "slots: slot %d outside %d", slot, s->n_slots);
	int rc = s->d->ops->event_record(s->released[slot], q);
	if (!rc)
		s->released_valid[slot] = 1;
	return rc;
}

int hs__dev_dn_check(const struct hs_dev_dn *d)
{
	if (!d)
		return hs__error(EINVAL, "deltanet: no arguments");
	if (d->n < 0 || d->n_k_heads <= 0 || d->n_v_heads <= 0 || d->n_v_heads % d->n_k_heads || d->head_dim <= 0 ||
	    d->head_dim > HS_DEV_DN_MAX_DIM || d->kc < 1 || d->kc > HS_DEV_DN_MAX_KC)
		return hs__error(EINVAL,
				 "deltanet: %d tokens, %d key and %d value heads of %d, kernel %d (value heads a multiple "
				 "of the key heads, head size 1..%d, kernel 1..%d)",
				 d->n, d->n_k_heads, d->n_v_heads, d->head_dim, d->kc, HS_DEV_DN_MAX_DIM, HS_DEV_DN_MAX_KC);
	if (d->n && (!d->conv_w || !d->dt_bias || !d->a || !d->norm || !d->qkv || !d->z || !d->alpha || !d->beta ||
		     (d->kc > 1 && !d->conv_state) || !d->state || !d->conv || !d->g || !d->b || !d->out))
		return hs__error(EINVAL, "deltanet: a NULL buffer");
	if (d->conv == d->qkv)
		return hs__error(EINVAL, "deltanet: the convolution's output overlaps its input");
	return 0;
}
