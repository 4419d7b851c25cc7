/* The whole model's forward pass over one ubatch (forward.h), the same for
 * every backend: embeddings, then per layer RMSNorm, q/k/v, (q/k norm),
 * RoPE, the K/V write, attention per sequence, the output projection, the
 * pre-MoE norm, the router and the MoE layer on the hybrid runtime; then
 * the final norm and the logits of the rows that want them. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/moe.h"
#include "cpu_kernels/router.h"
#include "model/model.h"
#include "runtime/forward.h"
#include "runtime/pool.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct hs_step_mark hs__step_begin(const struct hs_fwd *f)
{
	struct hs_step_mark m = { now_s(), f->rt && f->rt->pool ? hs__pool_runs(f->rt->pool) : 0 };
	return m;
}

void hs__step_end(struct hs_fwd *f, int step, struct hs_step_mark m, double bytes)
{
	f->step_s[step] += now_s() - m.t;
	f->step_bytes[step] += bytes;
	f->step_runs[step] += (f->rt && f->rt->pool ? hs__pool_runs(f->rt->pool) : 0) - m.runs;
}

double hs__weight_bytes(const struct hs_weight *w)
{
	return w && w->data ? (double)w->rows * (double)w->row_bytes : 0;
}

/* The bytes of the distinct experts n tokens' ids route to (masked ids read nothing). */
static double expert_bytes(const struct hs_moe_layer *ml, int n, const int32_t *ids)
{
	uint64_t seen[HS_SEL_MAX_EXPERTS / 64] = { 0 };
	long distinct = 0;
	for (int i = 0; i < n * ml->n_used; i++) {
		const int e = ids[i];
		if (e < 0 || e >= ml->n_experts || e >= HS_SEL_MAX_EXPERTS || seen[e / 64] >> (e % 64) & 1)
			continue;
		seen[e / 64] |= 1ull << (e % 64);
		distinct++;
	}
	const double E = ml->n_embd, F = ml->n_ff;
	const double one = F * (double)hs__type_row_bytes(ml->type[HS_GATE], (uint64_t)ml->n_embd) +
			   F * (double)hs__type_row_bytes(ml->type[HS_UP], (uint64_t)ml->n_embd) +
			   E * (double)hs__type_row_bytes(ml->type[HS_DOWN], (uint64_t)ml->n_ff) +
			   (ml->gate_b ? 4 * (2 * F + E) : 0);
	return distinct * one;
}

static size_t align64(size_t b)
{
	return (b + 63) & ~(size_t)63;
}

/* ---- set up ----------------------------------------------------------------- */

static int kv_cells(const struct hs_fwd *f, int layer)
{
	const struct hs_hparams *hp = f->hp;
	if (f->w->layers[layer].q35.recurrent)
		return 0; /* a DeltaNet layer: a fixed state instead (fwd-qwen35.c) */
	if (!f->w->layers[layer].swa)
		return f->n_ctx;
	long ring = (long)hp->swa_window + f->ubatch;
	return ring < f->n_ctx ? (int)ring : f->n_ctx;
}

/* Scratch of the matrix products and of attention for up to `ubatch`
 * tokens: the larger of the two, sized once so the step allocates nothing. */
static size_t scratch_need(struct hs_fwd *f)
{
	const struct hs_whole *w = f->w;
	const struct hs_hparams *hp = f->hp;
	size_t need = f->be->matmul_scratch(f, w->output.type, hp->n_embd, f->ubatch);
	for (int l = 0; l < hp->n_layers; l++) {
		const struct hs_dense_layer *L = &w->layers[l];
		const struct hs_weight *m[7] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down };
		for (int i = 0; i < 7; i++) {
			if (!m[i]->data)
				continue; /* no dense FFN */
			size_t b = f->be->matmul_scratch(f, m[i]->type, m[i]->cols, f->ubatch);
			need = b > need ? b : need;
		}
	}
	for (int n = 1; n <= f->ubatch; n++) {
		size_t b = f->be->attn_scratch(f, n, f->n_ctx);
		need = b > need ? b : need;
	}
	size_t b = hs__q35_scratch(f);
	need = b > need ? b : need;
	return align64(need);
}

static int falloc(struct hs_fwd *f, size_t bytes, void *p)
{
	return f->be->alloc(f, align64(bytes ? bytes : 1), (void **)p);
}

static void *halloc(size_t bytes)
{
	void *p = aligned_alloc(64, align64(bytes ? bytes : 1));
	if (p)
		memset(p, 0, align64(bytes ? bytes : 1));
	return p;
}

int hs__fwd_init(struct hs_fwd *f)
{
	const struct hs_hparams *hp = f->hp;
	const size_t ub = (size_t)f->ubatch, d = (size_t)hp->n_embd, qd = (size_t)hp->n_head * hp->head_dim,
		     kvd = (size_t)hp->n_head_kv * hp->head_dim;
	int rc;

	f->kv_row_bytes = hs__type_row_bytes(f->kv_type, (uint64_t)hp->head_dim);
	if (!f->kv_row_bytes)
		return hs__error(EINVAL, "KV cache %s: a head of %d values does not fit its blocks of %zu",
				 hs__type_name(f->kv_type), hp->head_dim, hs__type_block_values(f->kv_type));
	f->max_logits = f->ubatch < HS_LOGITS_ROWS ? f->ubatch : HS_LOGITS_ROWS;
	if (!(f->kv = calloc(hp->n_layers, sizeof *f->kv)))
		return hs__error(ENOMEM, "context: out of memory");
	const size_t cell_bytes = (size_t)hp->n_head_kv * f->kv_row_bytes;
	for (int l = 0; l < hp->n_layers; l++) {
		struct hs_kv_layer *K = &f->kv[l];
		K->n_cells = kv_cells(f, l);
		size_t cells = (size_t)f->n_seq * K->n_cells;
		if ((rc = falloc(f, cells * cell_bytes, &K->k)) || (rc = falloc(f, cells * cell_bytes, &K->v)) ||
		    (rc = falloc(f, cells * sizeof(int32_t), &K->cell_pos)))
			return rc;
		f->kv_bytes += 2 * cells * cell_bytes;
	}
	f->scratch_bytes = scratch_need(f);
	if ((rc = falloc(f, ub * d * 4, &f->x)) || (rc = falloc(f, ub * d * 4, &f->h)) ||
	    (rc = falloc(f, ub * qd * 4, &f->q)) || (rc = falloc(f, ub * kvd * 4, &f->k)) ||
	    (rc = falloc(f, ub * kvd * 4, &f->v)) || (rc = falloc(f, ub * qd * 4, &f->o)) ||
	    (rc = falloc(f, ub * d * 4, &f->t)) || (rc = falloc(f, (size_t)f->max_logits * hp->n_vocab * 4, &f->logits)) ||
	    (rc = falloc(f, ub * hp->n_rot * 4, &f->cs)) || (rc = falloc(f, ub * 4, &f->pos)) ||
	    (rc = falloc(f, ub * 4, &f->cells_full)) || (rc = falloc(f, ub * 4, &f->cells_swa)) ||
	    (rc = falloc(f, f->scratch_bytes, &f->scratch)))
		return rc;
	const size_t ff = (size_t)f->w->n_ff_max;
	if (ff && ((rc = falloc(f, ub * ff * 4, &f->fg)) || (rc = falloc(f, ub * ff * 4, &f->fu))))
		return rc;
	int n_used = hs_model_info(f->rt->m)->n_used;
	const struct hs_moe_layer *ml = NULL;
	for (int l = 0; l < hp->n_layers && !ml; l++)
		ml = hs__model_layer(f->rt->m, l);
	if (!(f->hh = halloc(ub * d * 4)) || !(f->hy = halloc(ub * d * 4)) || !(f->hx = halloc(ub * d * 4)) ||
	    !(f->hcs = halloc(ub * hp->n_rot * 4)) || !(f->hpos = halloc(ub * 4)) || !(f->hcells_full = halloc(ub * 4)) ||
	    !(f->hcells_swa = halloc(ub * 4)) || !(f->hids = halloc(ub * n_used * 4)) ||
	    !(f->hw = halloc(ub * n_used * 4)) || !(f->route_scratch = halloc(hs__route_scratch_bytes(ml, f->ubatch))))
		return hs__error(ENOMEM, "context: out of memory for the ubatch buffers");
	if ((rc = hs__q35_init(f)))
		return rc;
	for (int s = 0; s < f->n_seq; s++)
		if ((rc = hs__fwd_forget(f, s, 0)))
			return rc;
	return 0;
}

void hs__fwd_free(struct hs_fwd *f)
{
	if (f->kv)
		for (int l = 0; l < f->hp->n_layers; l++) {
			f->be->free(f, f->kv[l].k);
			f->be->free(f, f->kv[l].v);
			f->be->free(f, f->kv[l].cell_pos);
		}
	free(f->kv);
	hs__q35_free(f);
	void *bufs[] = { f->x, f->h, f->q, f->k, f->v, f->o, f->t, f->logits, f->cs, f->pos, f->cells_full,
			 f->cells_swa, f->scratch, f->fg, f->fu };
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		f->be->free(f, bufs[i]);
	void *hbufs[] = { f->hh, f->hy, f->hx, f->hcs, f->hpos, f->hcells_full, f->hcells_swa, f->hids, f->hw,
			  f->route_scratch };
	for (size_t i = 0; i < sizeof hbufs / sizeof hbufs[0]; i++)
		free(hbufs[i]);
}

int hs__fwd_forget(struct hs_fwd *f, int seq, int from)
{
	return hs__fwd_forget_range(f, seq, from <= 0 ? INT32_MIN : from, INT32_MAX);
}

int hs__fwd_forget_range(struct hs_fwd *f, int seq, int lo, int hi)
{
	int32_t *tmp = NULL;
	int cap = 0, rc = 0;

	if (lo <= 0) /* from the start: the recurrent states start over (partial cuts are refused above) */
		rc = hs__q35_forget(f, seq);
	for (int l = 0; l < f->hp->n_layers && !rc; l++) {
		struct hs_kv_layer *K = &f->kv[l];
		if (!K->n_cells)
			continue;
		if (K->n_cells > cap) {
			free(tmp);
			cap = K->n_cells;
			if (!(tmp = malloc(sizeof *tmp * (size_t)cap)))
				return hs__error(ENOMEM, "context: out of memory");
		}
		int32_t *cp = K->cell_pos + (size_t)seq * K->n_cells;
		/* the cells' positions live in backend memory: read, clear, write back */
		if ((rc = f->be->download(f, tmp, cp, sizeof *tmp * (size_t)K->n_cells)))
			break;
		for (int c = 0; c < K->n_cells; c++)
			if (tmp[c] >= lo && tmp[c] < hi)
				tmp[c] = -1;
		rc = f->be->upload(f, cp, tmp, sizeof *tmp * (size_t)K->n_cells);
	}
	free(tmp);
	return rc;
}

int hs__fwd_ring(const struct hs_fwd *f)
{
	for (int l = 0; l < f->hp->n_layers; l++)
		if (f->w->layers[l].swa && f->kv[l].n_cells < f->n_ctx)
			return f->kv[l].n_cells; /* kv_cells(): every sliding layer has the same */
	return 0;
}

int hs__fwd_is_ring(const struct hs_fwd *f, int layer)
{
	return f->w->layers[layer].swa && f->kv[layer].n_cells < f->n_ctx;
}

size_t hs__fwd_cell_bytes(const struct hs_fwd *f)
{
	return (size_t)f->hp->n_head_kv * f->kv_row_bytes;
}

void hs__fwd_cells_free(struct hs_fwd_cells *c)
{
	free(c->pos);
	free(c->cell);
	free(c->k);
	free(c->v);
	memset(c, 0, sizeof *c);
}

int hs__fwd_cells_reserve(struct hs_fwd_cells *c, int n, size_t cell_bytes)
{
	if (n > c->cap) {
		int32_t *p = realloc(c->pos, sizeof *p * (size_t)n);
		if (p)
			c->pos = p;
		int32_t *q = p ? realloc(c->cell, sizeof *q * (size_t)n) : NULL;
		if (!q)
			return hs__error(ENOMEM, "context: no memory for %d KV cells", n);
		c->cell = q;
		c->cap = n;
	}
	if (cell_bytes && n > c->cap_rows) {
		uint8_t *k = realloc(c->k, cell_bytes * (size_t)n);
		if (k)
			c->k = k;
		uint8_t *v = k ? realloc(c->v, cell_bytes * (size_t)n) : NULL;
		if (!v)
			return hs__error(ENOMEM, "context: no memory for %d KV cells", n);
		c->v = v;
		c->cap_rows = n;
	}
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* The cells' K and V rows between host memory and the backend, a run of
 * consecutive cells per call (a ring's positions, sorted, are at most two). */
static int cells_move(struct hs_fwd *f, int layer, int seq, struct hs_fwd_cells *c, int to_backend)
{
	const struct hs_kv_layer *K = &f->kv[layer];
	const size_t cb = hs__fwd_cell_bytes(f), base = (size_t)seq * K->n_cells;
	int rc = 0;

	for (int i = 0, j; i < c->n && !rc; i = j) {
		for (j = i + 1; j < c->n && c->cell[j] == c->cell[j - 1] + 1;)
			j++;
		uint8_t *bk = K->k + (base + c->cell[i]) * cb, *bv = K->v + (base + c->cell[i]) * cb;
		size_t off = (size_t)i * cb, bytes = (size_t)(j - i) * cb;
		if (to_backend && !(rc = f->be->upload(f, bk, c->k + off, bytes)))
			rc = f->be->upload(f, bv, c->v + off, bytes);
		else if (!to_backend && !(rc = f->be->download(f, c->k + off, bk, bytes)))
			rc = f->be->download(f, c->v + off, bv, bytes);
	}
	return rc;
}

int hs__fwd_cells_get(struct hs_fwd *f, int layer, int seq, int lo, int hi, int rows, struct hs_fwd_cells *out)
{
	const struct hs_kv_layer *K = &f->kv[layer];
	int32_t *pos = malloc(sizeof *pos * (size_t)K->n_cells);
	int64_t *key = malloc(sizeof *key * (size_t)K->n_cells);
	int rc;

	out->n = 0;
	if (!pos || !key) {
		rc = hs__error(ENOMEM, "context: out of memory");
		goto out_free;
	}
	if ((rc = f->be->download(f, pos, K->cell_pos + (size_t)seq * K->n_cells, sizeof *pos * (size_t)K->n_cells)))
		goto out_free;
	int n = 0;
	for (int c = 0; c < K->n_cells; c++)
		n += pos[c] >= lo && pos[c] < hi;
	if ((rc = hs__fwd_cells_reserve(out, n, rows ? hs__fwd_cell_bytes(f) : 0)))
		goto out_free;
	for (int c = 0; c < K->n_cells; c++)
		if (pos[c] >= lo && pos[c] < hi)
			key[out->n++] = (int64_t)pos[c] << 32 | c;
	qsort(key, out->n, sizeof *key, cmp_i64); /* position order */
	for (int i = 0; i < out->n; i++) {
		out->pos[i] = (int32_t)(key[i] >> 32);
		out->cell[i] = (int32_t)(key[i] & 0xffffffff);
	}
	rc = rows ? cells_move(f, layer, seq, out, 0) : 0;
out_free:
	free(pos);
	free(key);
	if (rc)
		out->n = 0;
	return rc;
}

int hs__fwd_cells_put(struct hs_fwd *f, int layer, int seq, struct hs_fwd_cells *in)
{
	const struct hs_kv_layer *K = &f->kv[layer];
	int32_t *pos = malloc(sizeof *pos * (size_t)K->n_cells);
	int rc;

	if (!pos)
		return hs__error(ENOMEM, "context: out of memory");
	for (int i = 0; i < in->n; i++) {
		HS_ASSERT(in->pos[i] >= 0 && in->pos[i] < f->n_ctx && (i == 0 || in->pos[i] > in->pos[i - 1]));
		in->cell[i] = in->pos[i] % K->n_cells; /* a full layer's position p is cell p */
	}
	/* ascending positions: in a ring the later of two that share a cell wins */
	if ((rc = cells_move(f, layer, seq, in, 1)))
		goto out_free;
	int32_t *cp = K->cell_pos + (size_t)seq * K->n_cells;
	if ((rc = f->be->download(f, pos, cp, sizeof *pos * (size_t)K->n_cells)))
		goto out_free;
	for (int i = 0; i < in->n; i++)
		pos[in->cell[i]] = in->pos[i];
	rc = f->be->upload(f, cp, pos, sizeof *pos * (size_t)K->n_cells);
out_free:
	free(pos);
	return rc;
}

/* ---- the router on the host ------------------------------------------------- */

struct route_ctx {
	struct hs_route_job *job;
	struct hs_pool *pool;
};

static void route_steps(void *ctx, int ith, int nth)
{
	struct route_ctx *c = ctx;
	hs__route_step_logits(c->job, ith, nth);
	hs__pool_barrier(c->pool);
	hs__route_step_gate(c->job, ith, nth);
}

static int route(struct hs_fwd *f, int layer, int n)
{
	struct hs_route_job job = { .layer = hs__model_layer(f->rt->m, layer), .dops = hs__dense_best(), .n = n,
				    .x = f->hh, .x_stride = (size_t)f->hp->n_embd, .ids = f->hids, .weights = f->hw,
				    .scratch = f->route_scratch };
	int rc = hs__route_prepare(&job);
	if (rc)
		return rc;
	struct route_ctx c = { &job, f->rt->pool };
	hs__pool_run(f->rt->pool, route_steps, &c);
	return 0;
}

/* ---- one ubatch ------------------------------------------------------------- */

static int layer_attention(struct hs_fwd *f, int l, int n, int n_groups, const int *g_start, const int32_t *seq)
{
	const struct hs_fwd_be *be = f->be;
	const struct hs_hparams *hp = f->hp;
	const struct hs_dense_layer *L = &f->w->layers[l];
	const struct hs_kv_layer *K = &f->kv[l];
	const size_t d = hp->n_embd, qd = (size_t)hp->n_head * hp->head_dim, kvd = (size_t)hp->n_head_kv * hp->head_dim;
	const size_t cell_bytes = (size_t)hp->n_head_kv * f->kv_row_bytes;
	const int32_t *cells = L->swa ? f->cells_swa : f->cells_full;
	int rc;

	struct hs_step_mark m = hs__step_begin(f);
	if ((rc = be->rmsnorm(f, f->x, d, f->h, d, n, 1, hp->n_embd, L->attn_norm, hp->eps)))
		return rc;
	hs__step_end(f, HS_STEP_NORM, m, 0);
	m = hs__step_begin(f);
	if ((rc = be->matmul(f, &L->wq, L->bq, n, f->h, d, L->attn_gate ? hs__q35_qg(f) : f->q,
			     L->attn_gate ? 2 * qd : qd)) ||
	    (L->attn_gate && (rc = hs__q35_split_q(f, n))) ||
	    (rc = be->matmul(f, &L->wk, L->bk, n, f->h, d, f->k, kvd)) ||
	    (rc = be->matmul(f, &L->wv, L->bv, n, f->h, d, f->v, kvd)))
		return rc;
	hs__step_end(f, HS_STEP_QKV, m, hs__weight_bytes(&L->wq) + hs__weight_bytes(&L->wk) + hs__weight_bytes(&L->wv));
	m = hs__step_begin(f);
	if (L->q_norm && ((rc = be->rmsnorm(f, f->q, qd, f->q, qd, n, hp->n_head, hp->head_dim, L->q_norm, hp->eps)) ||
			  (rc = be->rmsnorm(f, f->k, kvd, f->k, kvd, n, hp->n_head_kv, hp->head_dim, L->k_norm, hp->eps))))
		return rc;
	hs__step_end(f, HS_STEP_NORM, m, 0);
	m = hs__step_begin(f);
	if ((rc = be->rope(f, f->q, qd, n, hp->n_head, hp->head_dim, hp->n_rot, f->cs)) ||
	    (rc = be->rope(f, f->k, kvd, n, hp->n_head_kv, hp->head_dim, hp->n_rot, f->cs)) ||
	    (rc = be->kv_store(f, f->kv_type, f->k, kvd, n, hp->n_head_kv, hp->head_dim, cells, K->k, cell_bytes,
			       f->kv_row_bytes, K->cell_pos, f->pos)) ||
	    (rc = be->kv_store(f, f->kv_type, f->v, kvd, n, hp->n_head_kv, hp->head_dim, cells, K->v, cell_bytes,
			       f->kv_row_bytes, NULL, NULL)))
		return rc;
	hs__step_end(f, HS_STEP_ROPE_KV, m, 0);
	m = hs__step_begin(f);
	double kv_read = 0;
	for (int g = 0; g < n_groups; g++) {
		const int a = g_start[g], b = g_start[g + 1], s = seq[a];
		const size_t base = (size_t)s * K->n_cells;
		/* a full layer keeps position p in cell p: nothing past the last query's position is visible */
		int scan = L->swa ? K->n_cells : f->hpos[b - 1] + 1;
		struct hs_attn_job job = { .n = b - a, .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
					   .head_dim = hp->head_dim, .q = f->q + a * qd, .q_stride = qd,
					   .q_pos = f->pos + a, .kv_type = f->kv_type, .k = K->k + base * cell_bytes,
					   .v = K->v + base * cell_bytes, .k_cell = cell_bytes, .k_head = f->kv_row_bytes,
					   .v_cell = cell_bytes, .v_head = f->kv_row_bytes,
					   .n_cells = scan < K->n_cells ? scan : K->n_cells, .cell_pos = K->cell_pos + base,
					   .window = L->swa ? hp->swa_window : 0, .sinks = L->sinks,
					   .scale = 1.0f / sqrtf((float)hp->head_dim), .out = f->o + a * qd,
					   .out_stride = qd };
		if ((rc = be->attention(f, &job)))
			return rc;
		kv_read += 2.0 * job.n_cells * cell_bytes;
	}
	hs__step_end(f, HS_STEP_ATTN, m, kv_read);
	m = hs__step_begin(f);
	if ((L->attn_gate && (rc = hs__q35_gate_out(f, n))) || (rc = be->matmul(f, &L->wo, L->bo, n, f->o, qd, f->t, d)) ||
	    (rc = be->add(f, f->x, f->t, (size_t)n * d)))
		return rc;
	hs__step_end(f, HS_STEP_ATTN_OUT, m, hs__weight_bytes(&L->wo));
	return 0;
}

/* x += down(silu(gate h) * up h): a dense FFN layer's whole FFN, or the
 * shared expert beside the routed ones (glm4moe), in the backend. */
static int layer_ffn(struct hs_fwd *f, const struct hs_dense_layer *L, int n)
{
	const struct hs_fwd_be *be = f->be;
	const size_t d = f->hp->n_embd, ff = (size_t)L->ffn_gate.rows;
	int rc;

	struct hs_step_mark m = hs__step_begin(f);
	if ((rc = be->matmul(f, &L->ffn_gate, NULL, n, f->h, d, f->fg, ff)) ||
	    (rc = be->matmul(f, &L->ffn_up, NULL, n, f->h, d, f->fu, ff)) ||
	    (rc = be->swiglu(f, f->fg, f->fu, (size_t)n * ff)) ||
	    (rc = be->matmul(f, &L->ffn_down, NULL, n, f->fg, ff, f->t, d)) ||
	    (rc = be->add(f, f->x, f->t, (size_t)n * d)))
		return rc;
	hs__step_end(f, HS_STEP_FFN, m,
		     hs__weight_bytes(&L->ffn_gate) + hs__weight_bytes(&L->ffn_up) + hs__weight_bytes(&L->ffn_down));
	return 0;
}

static int layer_moe(struct hs_fwd *f, int l, int n)
{
	const struct hs_fwd_be *be = f->be;
	const struct hs_hparams *hp = f->hp;
	const struct hs_dense_layer *L = &f->w->layers[l];
	const size_t d = hp->n_embd;
	int rc;

	struct hs_step_mark m = hs__step_begin(f);
	if ((rc = be->rmsnorm(f, f->x, d, f->h, d, n, 1, hp->n_embd, L->ffn_norm, hp->eps)))
		return rc;
	hs__step_end(f, HS_STEP_NORM, m, 0);
	if (L->ffn_dense)
		return layer_ffn(f, L, n);
	m = hs__step_begin(f);
	if ((rc = be->download(f, f->hh, f->h, sizeof(float) * n * d)))
		return rc;
	hs__step_end(f, HS_STEP_MOE_ADD, m, 0);
	if (L->ffn_gate.data && (rc = layer_ffn(f, L, n))) /* the shared expert: x += its output */
		return rc;
	const struct hs_moe_layer *ml = hs__model_layer(f->rt->m, l);
	if (be->reference) { /* the oracle's MoE: routed and computed in double */
		if ((rc = hs__moe_route_ref(ml, n, f->hh, f->hids, f->hw)) ||
		    (rc = hs__moe_forward_ref(ml, n, f->hh, f->hids, f->hw, f->hy)))
			return rc;
	} else {
		m = hs__step_begin(f);
		if ((rc = route(f, l, n)))
			return rc;
		hs__step_end(f, HS_STEP_ROUTER, m,
			     (double)ml->n_experts * (double)hs__type_row_bytes(ml->router_type, (uint64_t)ml->n_embd));
		m = hs__step_begin(f);
		if ((rc = hs__runtime_moe(f->rt, l, n, f->hh, f->hids, f->hw, f->hy)))
			return rc;
		hs__step_end(f, HS_STEP_EXPERTS, m, expert_bytes(ml, n, f->hids));
	}
	m = hs__step_begin(f);
	if (f->q35 && (rc = hs__q35_shared(f, l, n)))
		return rc;
	hs__step_end(f, HS_STEP_FFN, m, f->q35 ? hs__q35_shared_bytes(f, l) : 0);
	m = hs__step_begin(f);
	if ((rc = be->upload(f, f->t, f->hy, sizeof(float) * n * d)) || (rc = be->add(f, f->x, f->t, (size_t)n * d)))
		return rc;
	hs__step_end(f, HS_STEP_MOE_ADD, m, 0);
	return 0;
}

int hs__fwd_ubatch(struct hs_fwd *f, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
		   const int *want, float *const *logits_rows)
{
	const struct hs_fwd_be *be = f->be;
	const struct hs_hparams *hp = f->hp;
	const struct hs_whole *hw = hs__model_whole(f->rt->m); /* host view: embeddings are looked up here */
	const size_t d = hp->n_embd;
	int g_start[HS_MAX_SEQ + 1], n_groups = 0, rc;
	double t0 = now_s(), t1;

	HS_ASSERT(n >= 1 && n <= f->ubatch);
	for (int t = 0; t < n; t++) {
		if (t == 0 || seq[t] != seq[t - 1]) {
			HS_ASSERT(n_groups < HS_MAX_SEQ);
			g_start[n_groups++] = t;
		}
		f->hpos[t] = pos[t];
		f->hcells_full[t] = seq[t] * f->n_ctx + pos[t];
		f->hcells_swa[t] = -1;
	}
	g_start[n_groups] = n;
	for (int l = 0; l < hp->n_layers; l++) /* every sliding layer has the same ring */
		if (f->w->layers[l].swa) {
			const int nc = f->kv[l].n_cells;
			for (int t = 0; t < n; t++)
				f->hcells_swa[t] = seq[t] * nc + pos[t] % nc;
			break;
		}
	hs__get_rows(hs__dense_best(), hw->tok_embd.type, hw->tok_embd.data, hw->tok_embd.row_bytes, hp->n_embd, n, tokens,
		    f->hx, d, 0, 1);
	for (int t = 0; t < n; t++)
		hs__rope_fill(&f->rope, pos[t], f->hcs + (size_t)t * hp->n_rot);
	if ((rc = be->upload(f, f->x, f->hx, sizeof(float) * n * d)) ||
	    (rc = be->upload(f, f->cs, f->hcs, sizeof(float) * n * hp->n_rot)) ||
	    (rc = be->upload(f, f->pos, f->hpos, sizeof(int32_t) * n)) ||
	    (rc = be->upload(f, f->cells_full, f->hcells_full, sizeof(int32_t) * n)) ||
	    (rc = be->upload(f, f->cells_swa, f->hcells_swa, sizeof(int32_t) * n)))
		return rc;
	t1 = now_s();
	f->t_other += t1 - t0;
	f->step_s[HS_STEP_EMBED] += t1 - t0;
	f->step_bytes[HS_STEP_EMBED] += (double)n * hw->tok_embd.row_bytes;
	for (int l = 0; l < hp->n_layers; l++) {
		if (f->abort && f->abort(f->abort_ctx))
			return hs__error(ECANCELED, "decode: cancelled by the abort callback (before layer %d)", l);
		double a = now_s();
		struct hs_step_mark m = hs__step_begin(f);
		if (f->w->layers[l].q35.recurrent) {
			if ((rc = hs__q35_deltanet(f, l, n, n_groups, g_start, seq)))
				return rc;
			hs__step_end(f, HS_STEP_DELTANET, m, hs__q35_mixer_bytes(f, l));
		} else if ((rc = layer_attention(f, l, n, n_groups, g_start, seq))) {
			return rc;
		}
		m = hs__step_begin(f);
		if ((rc = be->sync(f)))
			return rc;
		hs__step_end(f, HS_STEP_ATTN_OUT, m, 0);
		double b = now_s();
		if ((rc = layer_moe(f, l, n)))
			return rc;
		f->t_attn += b - a;
		f->t_moe += now_s() - b;
	}
	t0 = now_s();
	/* logits of the wanted rows: runs of consecutive ones through the
	 * output matrix together, at most max_logits rows at a time */
	int j = 0;
	struct hs_step_mark m = hs__step_begin(f);
	if ((rc = be->rmsnorm(f, f->x, d, f->h, d, n, 1, hp->n_embd, f->w->output_norm, hp->eps)))
		return rc;
	hs__step_end(f, HS_STEP_NORM, m, 0);
	m = hs__step_begin(f);
	double out_bytes = 0;
	for (int t = 0; t < n;) {
		if (!want[t]) {
			t++;
			continue;
		}
		int rows = 1;
		while (t + rows < n && want[t + rows] && rows < f->max_logits)
			rows++;
		if ((rc = be->matmul(f, &f->w->output, NULL, rows, f->h + (size_t)t * d, d, f->logits, hp->n_vocab)))
			return rc;
		out_bytes += hs__weight_bytes(&f->w->output);
		for (int i = 0; i < rows; i++, j++)
			if ((rc = be->download(f, logits_rows[j], f->logits + (size_t)i * hp->n_vocab,
					       sizeof(float) * hp->n_vocab)))
				return rc;
		t += rows;
	}
	hs__step_end(f, HS_STEP_OUTPUT, m, out_bytes);
	f->t_other += now_s() - t0;
	return 0;
}
