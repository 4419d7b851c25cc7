/* The forward pass's device backend: the dense weights and the KV cache in
 * device memory, every dense op queued on one device queue (the device
 * layer's dense ops), host data through a pinned staging buffer.  The
 * first context of a runtime uploads the dense weights; later ones share
 * them (the runtime frees them). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu_kernels/formats.h"
#include "model/model.h"
#include "runtime/forward.h"

#define STAGING_BYTES ((size_t)16 << 20)

static int d_alloc(struct hs_fwd *f, size_t bytes, void **p)
{
	int rc = f->d->ops->alloc(f->d->dev, bytes, p);
	if (rc)
		return hs__error(-rc, "context: device memory for %zu bytes: %s", bytes, hs_last_error());
	return 0;
}

static void d_free(struct hs_fwd *f, void *p)
{
	if (p)
		f->d->ops->free(f->d->dev, p);
}

/* Host to device in staging-sized pieces; each piece is on the device
 * before the staging buffer takes the next. */
static int d_upload(struct hs_fwd *f, void *dst, const void *host, size_t bytes)
{
	const struct hs_dev_ops *o = f->d->ops;
	for (size_t off = 0; off < bytes; off += f->staging_bytes) {
		size_t b = bytes - off < f->staging_bytes ? bytes - off : f->staging_bytes;
		memcpy(f->staging, (const uint8_t *)host + off, b);
		int rc = hs__dev_copy_h2d(f->d, f->q_dev, (uint8_t *)dst + off, f->staging, b);
		if (rc || (rc = o->queue_sync(f->q_dev)))
			return rc;
	}
	return 0;
}

static int d_download(struct hs_fwd *f, void *host, const void *src, size_t bytes)
{
	const struct hs_dev_ops *o = f->d->ops;
	for (size_t off = 0; off < bytes; off += f->staging_bytes) {
		size_t b = bytes - off < f->staging_bytes ? bytes - off : f->staging_bytes;
		int rc = o->copy_d2h(f->q_dev, f->staging, (const uint8_t *)src + off, b);
		if (rc || (rc = o->queue_sync(f->q_dev)))
			return rc;
		memcpy((uint8_t *)host + off, f->staging, b);
	}
	return 0;
}

static int d_deltanet(struct hs_fwd *f, const struct hs_dev_dn *d)
{
	if (!f->d->ops->deltanet)
		return hs__error(ENOTSUP, "device %s has no DeltaNet op", f->d->ops->name);
	return f->d->ops->deltanet(f->q_dev, d);
}

static int d_sync(struct hs_fwd *f)
{
	return f->d->ops->queue_sync(f->q_dev);
}

static int d_matmul(struct hs_fwd *f, const struct hs_weight *w, const float *bias, int n, const float *x,
		    size_t x_stride, float *y, size_t y_stride)
{
	struct hs_dev_matmul m = { .type = w->type, .rows = w->rows, .cols = w->cols, .w = w->data,
				   .row_bytes = w->row_bytes, .bias = bias, .n = n, .x = x, .x_stride = x_stride,
				   .y = y, .y_stride = y_stride, .scratch = f->scratch };
	return f->d->ops->matmul(f->q_dev, &m);
}

static int d_rmsnorm(struct hs_fwd *f, const float *x, size_t x_stride, float *y, size_t y_stride, int n, int n_head,
		     int dim, const float *w, float eps)
{
	struct hs_dev_norm r = { x, x_stride, y, y_stride, n, n_head, dim, w, eps };
	return f->d->ops->rmsnorm(f->q_dev, &r);
}

static int d_rope(struct hs_fwd *f, float *x, size_t x_stride, int n, int n_head, int head_dim, int n_rot,
		  const float *cs)
{
	struct hs_dev_rope r = { x, x_stride, n, n_head, head_dim, n_rot, cs };
	return f->d->ops->rope(f->q_dev, &r);
}

static int d_kv_store(struct hs_fwd *f, int type, const float *x, size_t x_stride, int n, int n_head_kv, int head_dim,
		      const int32_t *cells, uint8_t *dst, size_t cell_bytes, size_t head_bytes, int32_t *cell_pos,
		      const int32_t *pos)
{
	struct hs_dev_kv_store s = { type, x, x_stride, n, n_head_kv, head_dim, cells, dst, cell_bytes, head_bytes,
				     cell_pos, pos };
	return f->d->ops->kv_store(f->q_dev, &s);
}

static int d_attention(struct hs_fwd *f, struct hs_attn_job *j)
{
	struct hs_dev_attn a = { .n = j->n, .n_head = j->n_head, .n_head_kv = j->n_head_kv, .head_dim = j->head_dim,
				 .q = j->q, .q_stride = j->q_stride, .q_pos = j->q_pos, .kv_type = j->kv_type,
				 .k = j->k, .v = j->v, .k_cell = j->k_cell, .k_head = j->k_head, .v_cell = j->v_cell,
				 .v_head = j->v_head, .n_cells = j->n_cells, .cell_pos = j->cell_pos,
				 .window = j->window, .sinks = j->sinks, .scale = j->scale, .out = j->out,
				 .out_stride = j->out_stride, .scratch = f->scratch };
	return f->d->ops->attention(f->q_dev, &a);
}

static int d_add(struct hs_fwd *f, float *y, const float *x, size_t n)
{
	return f->d->ops->add(f->q_dev, y, x, n);
}

static int d_swiglu(struct hs_fwd *f, float *g, const float *u, size_t n)
{
	if (!f->d->ops->swiglu)
		return hs__error(ENOTSUP, "device %s: no swiglu op (a dense FFN)", f->d->ops->name);
	return f->d->ops->swiglu(f->q_dev, g, u, n);
}

static size_t d_matmul_scratch(struct hs_fwd *f, int type, int cols, int n)
{
	return f->d->ops->matmul_scratch_bytes(type, cols, n);
}

static size_t d_attn_scratch(struct hs_fwd *f, int n, int n_cells)
{
	return f->d->ops->attn_scratch_bytes(n, f->hp->n_head, f->hp->n_head_kv, f->hp->head_dim, n_cells);
}

const struct hs_fwd_be hs__fwd_dev = {
	.name = "device",
	.alloc = d_alloc,
	.free = d_free,
	.upload = d_upload,
	.download = d_download,
	.matmul_scratch = d_matmul_scratch,
	.attn_scratch = d_attn_scratch,
	.matmul = d_matmul,
	.rmsnorm = d_rmsnorm,
	.rope = d_rope,
	.kv_store = d_kv_store,
	.attention = d_attention,
	.add = d_add,
	.swiglu = d_swiglu,
	.deltanet = d_deltanet,
	.sync = d_sync,
};

/* ---- the dense weights on the device ---------------------------------------------- */

/* A copy of `bytes` host bytes in a new device buffer (kept in the runtime's list). */
static int put(struct hs_fwd *f, const void *host, size_t bytes, const void **dev)
{
	hs_runtime *rt = f->rt;
	void *p;
	int rc;

	*dev = NULL;
	if (!host)
		return 0;
	void **bufs = realloc(rt->dwhole_bufs, sizeof *bufs * (size_t)(rt->n_dwhole_bufs + 1));
	if (!bufs)
		return hs__error(ENOMEM, "context: out of memory");
	rt->dwhole_bufs = bufs;
	if ((rc = d_alloc(f, bytes, &p)))
		return rc;
	rt->dwhole_bufs[rt->n_dwhole_bufs++] = p;
	if ((rc = d_upload(f, p, host, bytes)))
		return rc;
	*dev = p;
	return 0;
}

static int put_weight(struct hs_fwd *f, struct hs_weight *w)
{
	const void *p;
	int rc = put(f, w->data, (size_t)w->rows * w->row_bytes, &p);
	w->data = p;
	return rc;
}

static int put_vec(struct hs_fwd *f, const float **v, int n)
{
	const void *p;
	int rc = put(f, *v, sizeof(float) * (size_t)n, &p);
	*v = p;
	return rc;
}

static int upload_whole(struct hs_fwd *f)
{
	hs_runtime *rt = f->rt;
	const struct hs_whole *hw = hs__model_whole(rt->m);
	const struct hs_hparams *hp = &hw->hp;
	const int q = hp->n_head * hp->head_dim, kv = hp->n_head_kv * hp->head_dim;
	struct hs_whole *dw = calloc(1, sizeof *dw);
	int rc;

	if (!dw || !(dw->layers = calloc(hp->n_layers, sizeof *dw->layers))) {
		free(dw);
		return hs__error(ENOMEM, "context: out of memory");
	}
	struct hs_dense_layer *layers = dw->layers;
	*dw = *hw; /* every pointer into the file replaced below, but tok_embd (read on the host) */
	dw->layers = layers;
	/* what is uploaded before a failure stays in the runtime's list, freed at its close */
	if ((rc = put_vec(f, &dw->output_norm, hp->n_embd)) || (rc = put_weight(f, &dw->output)))
		goto out_free;
	for (int l = 0; l < hp->n_layers; l++) {
		struct hs_dense_layer *L = &dw->layers[l];
		*L = hw->layers[l];
		if (rt->o.progress) {
			char what[64];
			snprintf(what, sizeof what, "dense layer %d to the device", l);
			rt->o.progress(what, (double)l / hp->n_layers, rt->o.progress_ctx);
		}
		if ((rc = hs__runtime_aborted(rt, "uploading the dense weights")) ||
		    (rc = put_vec(f, &L->attn_norm, hp->n_embd)) || (rc = put_vec(f, &L->ffn_norm, hp->n_embd)) ||
		    (rc = put_weight(f, &L->wq)) || (rc = put_weight(f, &L->wk)) || (rc = put_weight(f, &L->wv)) ||
		    (rc = put_weight(f, &L->wo)) || (rc = put_vec(f, &L->bq, q)) || (rc = put_vec(f, &L->bk, kv)) ||
		    (rc = put_vec(f, &L->bv, kv)) || (rc = put_vec(f, &L->bo, hp->n_embd)) ||
		    (rc = put_vec(f, &L->sinks, hp->n_head)) || (rc = put_vec(f, &L->q_norm, hp->head_dim)) ||
		    (rc = put_vec(f, &L->k_norm, hp->head_dim)) || (rc = put_weight(f, &L->ffn_gate)) ||
		    (rc = put_weight(f, &L->ffn_up)) || (rc = put_weight(f, &L->ffn_down)))
			goto out_free;
		struct hs_q35_layer *Q = &L->q35; /* qwen35moe's DeltaNet vectors (NULL elsewhere: nothing put) */
		const int conv_ch = (2 * hp->ssm_nk + hp->ssm_nv) * hp->ssm_dh;
		if ((rc = put_vec(f, &Q->conv, conv_ch * hp->ssm_conv)) || (rc = put_vec(f, &Q->dt_bias, hp->ssm_nv)) ||
		    (rc = put_vec(f, &Q->a, hp->ssm_nv)) || (rc = put_vec(f, &Q->norm, hp->ssm_dh)))
			goto out_free;
		struct hs_weight *extra[8]; /* qwen35moe's DeltaNet and shared-expert matrices */
		for (int k = 0, ne = hs__q35_matrices(L, extra); k < ne; k++)
			if ((rc = put_weight(f, extra[k])))
				goto out_free;
	}
	hs__runtime_say(rt, "dense weights on the device: %.1f MiB", hw->dense_bytes / 1048576.0);
	rt->dwhole = dw;
	return 0;
out_free:
	hs__whole_free(dw);
	return rc;
}

int hs__fwd_dev_open(struct hs_fwd *f)
{
	hs_runtime *rt = f->rt;
	int rc;

	f->d = rt->d;
	f->staging_bytes = STAGING_BYTES;
	if (!(f->staging = aligned_alloc(4096, f->staging_bytes)))
		return hs__error(ENOMEM, "context: out of memory for the staging buffer");
	if ((rc = hs__device_pin(f->d, f->staging, f->staging_bytes, 0))) {
		free(f->staging);
		f->staging = NULL;
		return rc;
	}
	if ((rc = f->d->ops->queue_create(f->d->dev, &f->q_dev)))
		return rc;
	if (!rt->dwhole && (rc = upload_whole(f)))
		return rc;
	f->w = rt->dwhole;
	return 0;
}

void hs__fwd_dev_close(struct hs_fwd *f)
{
	if (f->q_dev)
		f->d->ops->queue_destroy(f->q_dev);
	if (f->staging) {
		hs__device_unpin(f->d, f->staging, f->staging_bytes);
		free(f->staging);
	}
}
