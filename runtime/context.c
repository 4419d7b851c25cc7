/* Contexts: the public face of the whole model.  A batch is checked whole
 * before anything runs, cut into ubatches in batch order, each sorted by
 * sequence for attention, and a failure while computing rolls every
 * sequence back to where the call found it. */
#include "config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/log.h"
#include "cpu_kernels/sample.h"
#include "model/model.h"
#include "runtime/forward.h"
#include "runtime/seq-state.h"
#include "text/grammar.h"

struct hs_context {
	hs_runtime *rt;
	struct hs_fwd f;
	char dense_desc[128];
	int n_vocab;
	int32_t *next_pos;       /* [n_seq] */
	int32_t *pos_before;     /* [n_seq] during a call */
	/* [n_seq] positions below this may be missing from the sliding rings
	 * besides the ones every ring loses by itself (below next - ring): what
	 * a rollback, a cut or a copy could not keep (lost_below()) */
	int32_t *ring_lo;
	/* during a call: the ring cells of [n_seq][n_layers] that the batch
	 * overwrites while a rollback would still need them (snap_lo[s] >= 0) */
	struct hs_fwd_cells *snap;
	int32_t *snap_lo;
	hs_abort_fn abort;
	void *abort_ctx;
	/* qwen35moe: [n_seq][N_CKPT] copies of a sequence's recurrent states at
	 * the end of its latest prompts (calls that gave it more than one
	 * token), so that a prefix of what it holds can be kept; pos -1 = none */
	float **ckpt;
	int32_t *ckpt_pos;
	/* logits of the last call, in batch order */
	float *logits;
	int n_logits, cap_logits;
	/* one ubatch, sorted by sequence */
	int32_t *u_tok, *u_pos, *u_seq;
	int *u_want, *u_dst, *order;
	float **u_rows;          /* where each wanted row's logits go */
	/* statistics */
	long prompt_tokens, decode_tokens;
	double prompt_s, decode_s;
};

#define N_CKPT 2 /* recurrent checkpoints a sequence keeps */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void hs_context_free(hs_context *c)
{
	if (!c)
		return;
	if (c->f.be)
		hs__fwd_free(&c->f);
	if (c->f.be == &hs__fwd_dev)
		hs__fwd_dev_close(&c->f);
	c->rt->n_contexts--;
	free(c->next_pos);
	free(c->pos_before);
	free(c->ring_lo);
	if (c->snap)
		for (int i = 0; i < c->f.n_seq * c->f.hp->n_layers; i++)
			hs__fwd_cells_free(&c->snap[i]);
	free(c->snap);
	free(c->snap_lo);
	for (int i = 0; c->ckpt && i < c->f.n_seq * N_CKPT; i++)
		free(c->ckpt[i]);
	free(c->ckpt);
	free(c->ckpt_pos);
	free(c->logits);
	free(c->u_tok);
	free(c->u_pos);
	free(c->u_seq);
	free(c->u_want);
	free(c->u_dst);
	free(c->order);
	free(c->u_rows);
	free(c);
}

int hs_context_create(hs_runtime *rt, const struct hs_context_opts *opts, hs_context **out)
{
	struct hs_context_opts o = { 0 };
	hs_context *c;
	int rc;

	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(rt, -EINVAL);
	const struct hs_whole *w = hs__model_whole(rt->m);
	if (opts)
		o = *opts;
	if (!w)
		return hs__error(EINVAL, "%s: not a whole model (its MoE layers run one by one: run-layer, bench)",
				 hs__model_whole_why(rt->m));
	/* every layer of a whole model has experts or a dense FFN (model.c) */
	if (o.n_ctx == 0)
		o.n_ctx = 4096 < w->hp.n_ctx_train ? 4096 : w->hp.n_ctx_train;
	if (o.n_seq == 0)
		o.n_seq = 1;
	if (o.n_ubatch == 0)
		o.n_ubatch = rt->o.max_tokens;
	if (o.n_ctx < 1 || o.n_ctx > w->hp.n_ctx_train)
		return hs__error(EINVAL, "context: n_ctx %d (1..%d, the model's context_length)", o.n_ctx,
				 w->hp.n_ctx_train);
	if (o.n_seq < 1 || o.n_seq > HS_MAX_SEQ)
		return hs__error(EINVAL, "context: %d sequences (1..%d)", o.n_seq, HS_MAX_SEQ);
	if ((long)o.n_ctx * o.n_seq > (1l << 31) - 1)
		return hs__error(EINVAL, "context: %d sequences of %d positions exceed 2^31 cells", o.n_seq, o.n_ctx);
	if (o.n_ubatch < 1 || o.n_ubatch > rt->o.max_tokens)
		return hs__error(EINVAL, "context: ubatch %d (1..%d, the runtime's max_tokens)", o.n_ubatch,
				 rt->o.max_tokens);
	if (o.kv_type != HS_KV_F16 && o.kv_type != HS_KV_Q8_0)
		return hs__error(EINVAL, "context: KV type %d (f16 or q8_0)", (int)o.kv_type);
	if (o.dense && strcmp(o.dense, "auto") && strcmp(o.dense, "cpu") && strcmp(o.dense, "ref"))
		return hs__error(EINVAL, "context: dense '%s' (auto, cpu or ref)", o.dense);
	if (!(c = calloc(1, sizeof *c)))
		return hs__error(ENOMEM, "context: out of memory");
	c->rt = rt;
	rt->n_contexts++;
	c->n_vocab = w->hp.n_vocab;
	struct hs_fwd *f = &c->f;
	f->rt = rt;
	f->hp = &w->hp;
	f->n_ctx = o.n_ctx;
	f->n_seq = o.n_seq;
	f->ubatch = o.n_ubatch;
	f->kv_type = o.kv_type == HS_KV_Q8_0 ? HS_TYPE_Q8_0 : HS_TYPE_F16;
	const struct hs_hparams *hp = &w->hp;
	/* gpt-oss's YaRN: ggml's rope with ext_factor 1 and the magnitude 1 + 0.1 ln(factor) (dense.h) */
	rc = hs__rope_init(&f->rope, hp->n_rot, hp->rope_base, 1.0f / hp->rope_factor, hp->rope_yarn ? 1.0f : 0.0f, 1.0f,
			  32.0f, 1.0f, hp->rope_yarn ? hp->rope_orig_ctx : hp->n_ctx_train);
	if (rc)
		goto out_free;
	int on_device = rt->d && rt->d->ops->matmul && !(o.dense && strcmp(o.dense, "auto"));
	/* The plan gave the device's memory out counting a KV cache of its ctx
	 * for the runtime's n_seq: a larger cache takes memory it gave to
	 * experts and slots.  A warning, not a refusal: a plan from a file does
	 * not record n_seq, and the allocation fails cleanly if it must. */
	const long planned = (long)rt->plan.ctx * (rt->o.n_seq > 0 ? rt->o.n_seq : 1);
	if (on_device && (long)o.n_ctx * o.n_seq > planned)
		hs__log(HS_LOG_WARN,
			"context: %d sequences of %d positions, but the runtime was planned for %ld KV positions "
			"(ctx %d x n_seq %d): device memory may run short",
			o.n_seq, o.n_ctx, planned, rt->plan.ctx, rt->o.n_seq > 0 ? rt->o.n_seq : 1);
	if (o.dense && strcmp(o.dense, "ref") == 0) {
		f->be = &hs__fwd_ref;
		f->w = w;
		f->kv_type = HS_TYPE_F32; /* the float path quantizes nothing */
		snprintf(c->dense_desc, sizeof c->dense_desc, "ref (double-precision reference)");
	} else if (on_device) {
		f->be = &hs__fwd_dev;
		if ((rc = hs__fwd_dev_open(f)))
			goto out_free;
		snprintf(c->dense_desc, sizeof c->dense_desc, "%s", rt->d->ops->describe(rt->d->dev));
	} else {
		f->be = &hs__fwd_cpu;
		if ((rc = hs__fwd_cpu_open(f)))
			goto out_free;
		snprintf(c->dense_desc, sizeof c->dense_desc, "cpu");
	}
	if ((rc = hs__fwd_init(f)))
		goto out_free;
	const size_t ub = (size_t)o.n_ubatch;
	c->next_pos = calloc(o.n_seq, sizeof *c->next_pos);
	c->pos_before = calloc(o.n_seq, sizeof *c->pos_before);
	c->ring_lo = calloc(o.n_seq, sizeof *c->ring_lo);
	c->snap = calloc((size_t)o.n_seq * hp->n_layers, sizeof *c->snap);
	c->snap_lo = malloc(o.n_seq * sizeof *c->snap_lo);
	c->u_tok = malloc(ub * sizeof *c->u_tok);
	c->u_pos = malloc(ub * sizeof *c->u_pos);
	c->u_seq = malloc(ub * sizeof *c->u_seq);
	c->u_want = malloc(ub * sizeof *c->u_want);
	c->u_dst = malloc(ub * sizeof *c->u_dst);
	c->order = malloc(ub * sizeof *c->order);
	c->u_rows = malloc(ub * sizeof *c->u_rows);
	if (!c->next_pos || !c->pos_before || !c->ring_lo || !c->snap || !c->snap_lo || !c->u_tok || !c->u_pos ||
	    !c->u_seq || !c->u_want || !c->u_dst || !c->order || !c->u_rows) {
		rc = hs__error(ENOMEM, "context: out of memory");
		goto out_free;
	}
	*out = c;
	return 0;
out_free:
	hs_context_free(c);
	return rc;
}

/* Every entry checked against the limits and its sequence's next position
 * before anything runs. */
static int check_batch(hs_context *c, int n, const struct hs_token *b)
{
	if (n < 1 || !b)
		return hs__error(EINVAL, "decode: %d entries (at least 1)", n);
	memcpy(c->pos_before, c->next_pos, sizeof *c->next_pos * (size_t)c->f.n_seq);
	int32_t *next = c->pos_before; /* used as the running next position, then restored */
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		const struct hs_token *e = &b[i];
		if (e->id < 0 || e->id >= c->n_vocab)
			rc = hs__error(EINVAL, "decode: entry %d: token id %d outside the vocabulary (0..%d)", i, e->id,
				       c->n_vocab - 1);
		else if (e->seq < 0 || e->seq >= c->f.n_seq)
			rc = hs__error(EINVAL, "decode: entry %d: sequence %d (0..%d)", i, e->seq, c->f.n_seq - 1);
		else if (e->pos != next[e->seq])
			rc = hs__error(EINVAL, "decode: entry %d: position %d, but sequence %d continues at %d", i, e->pos,
				       e->seq, next[e->seq]);
		else if (e->pos >= c->f.n_ctx)
			rc = hs__error(EINVAL, "decode: entry %d: position %d reaches the context of %d positions", i,
				       e->pos, c->f.n_ctx);
		else
			next[e->seq]++;
	}
	memcpy(c->pos_before, c->next_pos, sizeof *c->next_pos * (size_t)c->f.n_seq);
	return rc;
}

static int grow_logits(hs_context *c, int rows)
{
	if (rows <= c->cap_logits)
		return 0;
	float *p = realloc(c->logits, sizeof *p * (size_t)rows * c->n_vocab);
	if (!p)
		return hs__error(ENOMEM, "decode: no memory for %d rows of logits", rows);
	c->logits = p;
	c->cap_logits = rows;
	return 0;
}

/* One ubatch of entries [a, b): sorted by sequence (stable, so positions
 * stay in order), run, logits scattered back to batch order. */
static int run_ubatch(hs_context *c, const struct hs_token *batch, int a, int b, int first_logit)
{
	const int n = b - a;
	int k = 0, multi = 0;

	for (int s = 0, seen = 0; seen < n; s++) { /* counting sort by sequence */
		int count = 0;
		for (int i = a; i < b; i++)
			if (batch[i].seq == s)
				c->order[k++] = i, count++;
		seen += count;
		multi |= count > 1;
	}
	for (int i = a, j = first_logit; i < b; i++)
		if (batch[i].logits)
			c->u_dst[i - a] = j++;
	for (int t = 0, j = 0; t < n; t++) {
		const struct hs_token *e = &batch[c->order[t]];
		c->u_tok[t] = e->id;
		c->u_pos[t] = e->pos;
		c->u_seq[t] = e->seq;
		c->u_want[t] = e->logits != 0;
		if (e->logits) /* its row of the call's logits, in batch order */
			c->u_rows[j++] = c->logits + (size_t)c->u_dst[c->order[t] - a] * c->n_vocab;
	}
	double t0 = now_s();
	int rc = hs__fwd_ubatch(&c->f, n, c->u_tok, c->u_pos, c->u_seq, c->u_want, c->u_rows);
	if (rc)
		return rc;
	double dt = now_s() - t0;
	if (multi) {
		c->prompt_tokens += n;
		c->prompt_s += dt;
	} else {
		c->decode_tokens += n;
		c->decode_s += dt;
	}
	for (int t = 0; t < n; t++)
		c->next_pos[c->u_seq[t]] = c->u_pos[t] + 1;
	return 0;
}

/* Positions of seq below this may be missing from a sliding ring. */
static int lost_below(const hs_context *c, int seq)
{
	const int ring = hs__fwd_ring(&c->f);
	const int implicit = ring ? c->next_pos[seq] - ring : 0;
	return c->ring_lo[seq] > implicit ? c->ring_lo[seq] : implicit;
}

/* Whether a sequence whose rings may miss positions below `lost` can go on
 * from position `at`: its window there (the positions before at that the
 * next token sees) is held. */
static int window_held(const hs_context *c, int lost, int at)
{
	if (!hs__fwd_ring(&c->f))
		return 1;
	int need = at - c->f.hp->swa_window + 1;
	need = need > 0 ? need : 0;
	return need >= at || need >= lost;
}

static int window_refused(const hs_context *c, const char *what, int seq, int at, int lost)
{
	int need = at - c->f.hp->swa_window + 1;
	return hs__error(ENOTSUP,
			 "%s: sequence %d cannot go on from position %d: its sliding-window layers' rings (%d cells) "
			 "no longer hold positions %d..%d that the window there sees",
			 what, seq, at, hs__fwd_ring(&c->f), need > 0 ? need : 0, lost - 1);
}

/* Before a batch: the ring cells each sequence's tokens will overwrite
 * while a rollback to its old position would still need them (the window
 * at that position).  Only batches that hold more than n_ubatch + 1 tokens
 * of one sequence overwrite those; decode steps take nothing. */
static int snap_take(hs_context *c, int n, const struct hs_token *b)
{
	const int ring = hs__fwd_ring(&c->f), L = c->f.hp->n_layers;
	int count[HS_MAX_SEQ] = { 0 }, rc = 0;

	for (int s = 0; s < c->f.n_seq; s++)
		c->snap_lo[s] = -1;
	if (!ring)
		return 0;
	for (int i = 0; i < n; i++)
		count[b[i].seq]++;
	for (int s = 0; s < c->f.n_seq && !rc; s++) {
		const int pb = c->next_pos[s];
		int lo = pb - c->f.hp->swa_window + 1, hi = pb + count[s] - ring; /* writes overwrite < hi */
		lo = lo > 0 ? lo : 0;
		hi = hi < pb ? hi : pb;
		if (!count[s] || hi <= lo)
			continue;
		c->snap_lo[s] = lo;
		for (int l = 0; l < L && !rc; l++)
			if (hs__fwd_is_ring(&c->f, l))
				rc = hs__fwd_cells_get(&c->f, l, s, lo, hi, 1, &c->snap[s * L + l]);
	}
	return rc;
}

static void snap_free(hs_context *c)
{
	const int L = c->f.hp->n_layers;
	for (int s = 0; s < c->f.n_seq; s++)
		if (c->snap_lo[s] >= 0) {
			for (int l = 0; l < L; l++)
				hs__fwd_cells_free(&c->snap[s * L + l]);
			c->snap_lo[s] = -1;
		}
}

/* ---- recurrent checkpoints (qwen35moe) ---------------------------------------- */

/* Forgets the sequence's checkpoints above position p (all: p = -1). */
static void ckpt_drop_above(hs_context *c, int seq, int p)
{
	for (int k = 0; c->ckpt_pos && k < N_CKPT; k++)
		if (c->ckpt_pos[seq * N_CKPT + k] > p)
			c->ckpt_pos[seq * N_CKPT + k] = -1;
}

/* After a call: each sequence it gave more than one token keeps its states
 * at its new position, in place of its oldest checkpoint.  Out of memory
 * only means no checkpoint (a later keep starts over). */
static void ckpt_take(hs_context *c, int n, const struct hs_token *batch)
{
	const size_t floats = hs__q35_state_floats(&c->f);
	int got[HS_MAX_SEQ] = { 0 };

	if (!floats)
		return;
	if (!c->ckpt) {
		c->ckpt = calloc((size_t)c->f.n_seq * N_CKPT, sizeof *c->ckpt);
		c->ckpt_pos = malloc(sizeof *c->ckpt_pos * (size_t)c->f.n_seq * N_CKPT);
		if (!c->ckpt || !c->ckpt_pos) {
			free(c->ckpt), free(c->ckpt_pos);
			c->ckpt = NULL, c->ckpt_pos = NULL;
			return;
		}
		for (int i = 0; i < c->f.n_seq * N_CKPT; i++)
			c->ckpt_pos[i] = -1;
	}
	for (int i = 0; i < n; i++)
		got[batch[i].seq]++;
	for (int s = 0; s < c->f.n_seq; s++) {
		if (got[s] < 2)
			continue;
		int k = 0, *pos = c->ckpt_pos + s * N_CKPT;
		for (int j = 1; j < N_CKPT; j++) /* a free one, else the lowest position */
			if (pos[k] >= 0 && (pos[j] < 0 || pos[j] < pos[k]))
				k = j;
		float **buf = &c->ckpt[s * N_CKPT + k];
		if (!*buf && !(*buf = malloc(sizeof(float) * floats)))
			continue;
		if (hs__q35_state_copy(&c->f, s, *buf, 1) == 0)
			pos[k] = c->next_pos[s];
	}
}

/* The sequence's states put back to its latest checkpoint at or below n:
 * its position, or 0 when it has none (the states are zero then); a
 * negative errno when the backend's copy failed. */
static int ckpt_restore(hs_context *c, int seq, int n)
{
	int best = -1;
	for (int k = 0; c->ckpt_pos && k < N_CKPT; k++) {
		const int p = c->ckpt_pos[seq * N_CKPT + k];
		if (p > 0 && p <= n && (best < 0 || p > c->ckpt_pos[seq * N_CKPT + best]))
			best = k;
	}
	int rc = best < 0 ? hs__q35_forget(&c->f, seq) : hs__q35_state_copy(&c->f, seq, c->ckpt[seq * N_CKPT + best], 0);
	return rc ? rc : best < 0 ? 0 : c->ckpt_pos[seq * N_CKPT + best];
}

/* A failed or cancelled call: every sequence it touched forgets the cells
 * from its old position on and gets back the ring cells it overwrote.
 * Only when that fails too is a sequence emptied; the message says so. */
static int roll_back(hs_context *c, int rc, int n, const struct hs_token *batch, int ran)
{
	char msg[512];
	int written[HS_MAX_SEQ] = { 0 }, n_emptied = 0, n_recurrent = 0, emptied = -1;
	char touched[HS_MAX_SEQ] = { 0 };
	const int ring = hs__fwd_ring(&c->f), L = c->f.hp->n_layers;

	snprintf(msg, sizeof msg, "%s", hs_last_error());
	for (int i = 0; i < n; i++)
		touched[batch[i].seq] = 1;
	for (int i = 0; i < ran; i++)
		written[batch[i].seq]++;
	for (int s = 0; s < c->f.n_seq; s++) {
		if (!touched[s])
			continue;
		const int pb = c->pos_before[s];
		int lost = ring ? pb + written[s] - ring : 0, err = hs__fwd_forget(&c->f, s, pb);
		if (c->snap_lo[s] >= 0) {
			for (int l = 0; l < L && !err; l++)
				if (hs__fwd_is_ring(&c->f, l))
					err = hs__fwd_cells_put(&c->f, l, s, &c->snap[s * L + l]);
			lost = lost < c->snap_lo[s] ? lost : c->snap_lo[s];
		}
		c->ring_lo[s] = c->ring_lo[s] > lost ? c->ring_lo[s] : lost;
		c->next_pos[s] = pb;
		/* a recurrent (DeltaNet) state that took tokens of this call holds no
		 * earlier position to go back to */
		const int recurrent = c->f.hp->n_recurrent && written[s] > 0;
		if (recurrent && pb > 0)
			n_recurrent++;
		if (err || recurrent) {
			hs__fwd_forget(&c->f, s, 0);
			ckpt_drop_above(c, s, -1);
			c->next_pos[s] = c->ring_lo[s] = 0;
			if (pb > 0)
				n_emptied++, emptied = s;
		}
	}
	snap_free(c);
	if (n_emptied)
		return hs__error(-rc, "%s; sequence %d%s emptied: %s", msg, emptied, n_emptied > 1 ? " and others" : "",
				 n_recurrent ? "its recurrent (DeltaNet) state had taken tokens of this call"
					     : "its cells could not be put back");
	return hs__error(-rc, "%s", msg);
}

int hs_decode(hs_context *c, int n, const struct hs_token *batch)
{
	HS_NEED(c, -EINVAL);
	int rc = check_batch(c, n, batch), want = 0;

	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		want += batch[i].logits != 0;
	if ((rc = grow_logits(c, want)))
		return rc;
	c->n_logits = 0;
	if ((rc = snap_take(c, n, batch))) {
		snap_free(c);
		return rc;
	}
	c->f.abort = c->abort;
	c->f.abort_ctx = c->abort_ctx;
	int ran = 0; /* entries of the ubatches run, the failed one too */
	for (int a = 0, done_logits = 0; a < n; a += c->f.ubatch) {
		int b = a + c->f.ubatch < n ? a + c->f.ubatch : n;
		if (c->abort && c->abort(c->abort_ctx)) {
			rc = hs__error(ECANCELED, "decode: cancelled by the abort callback (before entry %d)", a);
			break;
		}
		ran = b;
		if ((rc = run_ubatch(c, batch, a, b, done_logits)))
			break;
		for (int i = a; i < b; i++)
			done_logits += batch[i].logits != 0;
	}
	if (rc)
		return roll_back(c, rc, n, batch, ran);
	snap_free(c);
	ckpt_take(c, n, batch);
	c->n_logits = want;
	return 0;
}

const float *hs_context_logits(const hs_context *c, int i)
{
	HS_NEED(c, NULL);
	if (i < 0 || i >= c->n_logits) {
		hs__error(EINVAL, "logits: entry %d; the last decode asked for %d rows (0..%d)", i, c->n_logits,
			  c->n_logits - 1);
		return NULL;
	}
	return c->logits + (size_t)i * c->n_vocab;
}

int hs_context_n_logits(const hs_context *c)
{
	HS_NEED(c, -EINVAL);
	return c->n_logits;
}

int hs_context_seq_pos(const hs_context *c, int seq)
{
	HS_NEED(c, -EINVAL);
	if (seq < 0 || seq >= c->f.n_seq)
		return hs__error(EINVAL, "sequence %d (0..%d)", seq, c->f.n_seq - 1);
	return c->next_pos[seq];
}

int hs_context_seq_clear(hs_context *c, int seq)
{
	HS_NEED(c, -EINVAL);
	if (seq < 0 || seq >= c->f.n_seq)
		return hs__error(EINVAL, "sequence %d (0..%d)", seq, c->f.n_seq - 1);
	int rc = hs__fwd_forget(&c->f, seq, 0);
	if (rc)
		return rc;
	ckpt_drop_above(c, seq, -1);
	c->next_pos[seq] = c->ring_lo[seq] = 0;
	return 0;
}

int hs_context_seq_keep(hs_context *c, int seq, int n)
{
	HS_NEED(c, -EINVAL);
	if (seq < 0 || seq >= c->f.n_seq)
		return hs__error(EINVAL, "sequence %d (0..%d)", seq, c->f.n_seq - 1);
	if (n < 0 || n > c->next_pos[seq])
		return hs__error(EINVAL, "sequence %d: keep %d positions (0..%d, what it holds)", seq, n,
				 c->next_pos[seq]);
	if (n == c->next_pos[seq])
		return n;
	/* exact when no ring wrapped over what position n's window sees; a
	 * recurrent (DeltaNet) state goes back to its latest checkpoint at or
	 * below n, or starts over */
	const int lost = lost_below(c, seq);
	const int from = c->f.hp->n_recurrent ? ckpt_restore(c, seq, n) : window_held(c, lost, n) ? n : 0;
	if (from < 0) { /* states half restored: the whole sequence goes; the copy's error is the answer */
		(void)hs_context_seq_clear(c, seq);
		return from;
	}
	int rc = hs__fwd_forget(&c->f, seq, from);
	if (rc)
		return rc;
	ckpt_drop_above(c, seq, from);
	c->next_pos[seq] = from;
	c->ring_lo[seq] = from ? lost : 0;
	return from;
}

/* Gated DeltaNet layers keep one state per sequence, the sum of all its
 * tokens: no part of it can be cut, copied or stored (yet) */
static int recurrent_refused(const hs_context *c, const char *what, int seq)
{
	return hs__error(ENOTSUP,
			 "%s: sequence %d: this model's %d Gated DeltaNet layers hold a recurrent state per "
			 "sequence, which cannot be cut, copied or saved (only the whole sequence cleared)",
			 what, seq, c->f.hp->n_recurrent);
}

static int bad_seq(const hs_context *c, const char *what, int seq)
{
	return hs__error(EINVAL, "%s: sequence %d (0..%d)", what, seq, c->f.n_seq - 1);
}

/* p0 < 0 means 0, p1 < 0 the end (INT_MAX); -EINVAL for p0 > p1. */
static int range_of(const char *what, int *p0, int *p1)
{
	const int a = *p0, b = *p1;
	*p0 = a < 0 ? 0 : a;
	*p1 = b < 0 ? INT_MAX : b;
	if (*p0 > *p1)
		return hs__error(EINVAL, "%s: positions [%d, %d): the range ends before it starts", what, a, b);
	return 0;
}

int hs_context_seq_rm(hs_context *c, int seq, int p0, int p1)
{
	int rc;

	if (!c)
		return hs__error(EINVAL, "seq_rm: no context (NULL)");
	if (seq < 0 || seq >= c->f.n_seq)
		return bad_seq(c, "seq_rm", seq);
	if ((rc = range_of("seq_rm", &p0, &p1)))
		return rc;
	const int next = c->next_pos[seq];
	if (p0 >= next || p0 == p1)
		return 0; /* it holds nothing there */
	if (c->f.hp->n_recurrent && (p0 > 0 || p1 < next))
		return recurrent_refused(c, "seq_rm", seq);
	/* a hole: later tokens do not see those positions */
	if (p1 < next)
		return hs__fwd_forget_range(&c->f, seq, p0, p1);
	const int lost = lost_below(c, seq);
	if (!window_held(c, lost, p0))
		return window_refused(c, "seq_rm", seq, p0, lost);
	if ((rc = hs__fwd_forget_range(&c->f, seq, p0, INT_MAX)))
		return rc;
	ckpt_drop_above(c, seq, p0 ? p0 : -1);
	c->next_pos[seq] = p0;
	c->ring_lo[seq] = p0 ? lost : 0;
	return 0;
}

/* Positions copied at a time: bounds the host buffer, not the work. */
#define CP_CHUNK 4096

int hs_context_seq_cp(hs_context *c, int src, int dst, int p0, int p1)
{
	struct hs_fwd_cells cells = { 0 };
	int rc;

	if (!c)
		return hs__error(EINVAL, "seq_cp: no context (NULL)");
	if (src < 0 || src >= c->f.n_seq)
		return bad_seq(c, "seq_cp", src);
	if (dst < 0 || dst >= c->f.n_seq)
		return bad_seq(c, "seq_cp", dst);
	if (src == dst)
		return hs__error(EINVAL, "seq_cp: source and destination are both sequence %d", src);
	if ((rc = range_of("seq_cp", &p0, &p1)))
		return rc;
	p1 = p1 < c->next_pos[src] ? p1 : c->next_pos[src]; /* src holds nothing past its end */
	if (p0 >= p1)
		return 0;
	if (c->f.hp->n_recurrent)
		return recurrent_refused(c, "seq_cp", src);
	if (c->next_pos[dst] > p0)
		return hs__error(EINVAL,
				 "seq_cp: sequence %d holds positions %d..%d, at or past %d where the copy starts "
				 "(seq_rm them first)",
				 dst, p0, c->next_pos[dst] - 1, p0);
	/* dst goes on from p1: the window there comes from src's rings from p0
	 * on, and from dst's own below p0 */
	const int ring = hs__fwd_ring(&c->f), w = c->f.hp->swa_window;
	const int need = p1 - w + 1 > 0 ? p1 - w + 1 : 0, lost_src = lost_below(c, src), lost_dst = lost_below(c, dst);
	if (ring && need < p1 && (need > p0 ? need : p0) < lost_src)
		return window_refused(c, "seq_cp", src, p1, lost_src);
	if (ring && need < p0 && need < lost_dst)
		return window_refused(c, "seq_cp", dst, p1, lost_dst);
	for (int l = 0; l < c->f.hp->n_layers && !rc; l++) {
		/* a ring keeps the last `ring` positions only */
		int lo = hs__fwd_is_ring(&c->f, l) && p1 - ring > p0 ? p1 - ring : p0;
		for (int a = lo; a < p1 && !rc; a += CP_CHUNK) {
			int b = p1 - a > CP_CHUNK ? a + CP_CHUNK : p1;
			if (!(rc = hs__fwd_cells_get(&c->f, l, src, a, b, 1, &cells)))
				rc = hs__fwd_cells_put(&c->f, l, dst, &cells);
		}
	}
	hs__fwd_cells_free(&cells);
	if (rc) { /* dst has some of the copy: it cannot be told from what it held */
		char msg[400];
		snprintf(msg, sizeof msg, "%s", hs_last_error());
		hs__fwd_forget(&c->f, dst, 0);
		c->next_pos[dst] = c->ring_lo[dst] = 0;
		return hs__error(-rc, "seq_cp: %s; sequence %d emptied", msg, dst);
	}
	int lost = lost_dst > (ring ? p1 - ring : 0) ? lost_dst : (ring ? p1 - ring : 0);
	lost = lost_src > p0 && lost_src > lost ? lost_src : lost; /* what src had lost of the copy */
	c->next_pos[dst] = p1;
	c->ring_lo[dst] = lost;
	return 0;
}

int hs_context_seq_save(hs_context *c, int seq, const char *path, const int32_t *tokens, int n_tokens)
{
	if (!c || !path)
		return hs__error(EINVAL, "seq_save: no %s (NULL)", c ? "path" : "context");
	if (seq < 0 || seq >= c->f.n_seq)
		return bad_seq(c, "seq_save", seq);
	if (n_tokens < 0 || (n_tokens && !tokens) || (n_tokens && n_tokens != c->next_pos[seq]))
		return hs__error(EINVAL,
				 "seq_save: %d tokens%s; sequence %d holds %d positions (0 or that many tokens)",
				 n_tokens, n_tokens && !tokens ? " but no array" : "", seq, c->next_pos[seq]);
	if (c->f.hp->n_recurrent)
		return recurrent_refused(c, "seq_save", seq);
	for (int i = 0; i < n_tokens; i++)
		if (tokens[i] < 0 || tokens[i] >= c->n_vocab)
			return hs__error(EINVAL, "seq_save: token %d is id %d, outside the vocabulary (0..%d)", i,
					 tokens[i], c->n_vocab - 1);
	struct hs_seq_head h = { .n_pos = c->next_pos[seq], .lost_below = lost_below(c, seq), .n_tokens = n_tokens };
	h.lost_below = h.lost_below > 0 ? h.lost_below : 0;
	return hs__seq_state_save(&c->f, seq, &h, tokens, path);
}

int hs_context_seq_load(hs_context *c, int seq, const char *path, int32_t *tokens, int cap, int *n_tokens)
{
	struct hs_seq_head h;

	if (n_tokens)
		*n_tokens = 0;
	if (!c || !path)
		return hs__error(EINVAL, "seq_load: no %s (NULL)", c ? "path" : "context");
	if (seq < 0 || seq >= c->f.n_seq)
		return bad_seq(c, "seq_load", seq);
	if (cap < 0 || (cap && !tokens))
		return hs__error(EINVAL, "seq_load: room for %d tokens%s", cap, cap > 0 ? " but no array" : "");
	if (c->f.hp->n_recurrent)
		return recurrent_refused(c, "seq_load", seq);
	int emptied = 0, rc = hs__seq_state_load(&c->f, seq, path, &h, tokens, tokens ? cap : 0, &emptied);
	if (emptied) /* checked whole, then the backend failed while the cells went in */
		c->next_pos[seq] = c->ring_lo[seq] = 0;
	if (rc)
		return rc;
	c->next_pos[seq] = h.n_pos;
	c->ring_lo[seq] = h.lost_below;
	if (n_tokens)
		*n_tokens = h.n_tokens;
	return h.n_pos;
}

int hs_context_set_abort(hs_context *c, hs_abort_fn fn, void *ctx)
{
	if (!c)
		return hs__error(EINVAL, "set_abort: no context (NULL)");
	c->abort = fn;
	c->abort_ctx = ctx;
	return 0;
}

int hs_context_stats(const hs_context *c, struct hs_context_stats *o)
{
	HS_NEED(c, -EINVAL);
	HS_NEED(o, -EINVAL);
	memset(o, 0, sizeof *o);
	o->n_ctx = c->f.n_ctx;
	o->n_seq = c->f.n_seq;
	o->n_ubatch = c->f.ubatch;
	o->kv_type = c->f.kv_type == HS_TYPE_Q8_0 ? HS_KV_Q8_0 : HS_KV_F16;
	o->dense = c->dense_desc;
	o->kv_bytes = c->f.kv_bytes;
	for (int s = 0; s < c->f.n_seq; s++)
		o->kv_cells_used += c->next_pos[s];
	o->kv_cells_total = (long)c->f.n_seq * c->f.n_ctx;
	o->prompt_tokens = c->prompt_tokens;
	o->decode_tokens = c->decode_tokens;
	o->prompt_s = c->prompt_s;
	o->decode_s = c->decode_s;
	o->attn_s = c->f.t_attn;
	o->moe_s = c->f.t_moe;
	o->other_s = c->f.t_other;
	for (int i = 0; i < HS_CONTEXT_STEPS; i++) {
		o->step_s[i] = c->f.step_s[i];
		o->step_bytes[i] = c->f.step_bytes[i];
		o->step_dispatches[i] = c->f.step_runs[i];
	}
	return 0;
}

const char *hs_context_step_name(int step)
{
	static const char *const names[HS_CONTEXT_STEPS] = {
		"embeddings", "norms", "q/k/v products", "rope, KV write", "attention", "attention output",
		"DeltaNet mixer", "router", "experts", "dense FFN, shared expert", "MoE in/out", "logits"
	};
	return step >= 0 && step < HS_CONTEXT_STEPS ? names[step] : NULL;
}

void hs_context_stats_reset(hs_context *c)
{
	if (!c)
		return;
	c->prompt_tokens = c->decode_tokens = 0;
	c->prompt_s = c->decode_s = 0;
	c->f.t_attn = c->f.t_moe = c->f.t_other = 0;
	memset(c->f.step_s, 0, sizeof c->f.step_s);
	memset(c->f.step_bytes, 0, sizeof c->f.step_bytes);
	memset(c->f.step_runs, 0, sizeof c->f.step_runs);
}

/* ---- sampling ------------------------------------------------------------------ */

int hs_sampler_create(const struct hs_sampler_params *p, int n_vocab, hs_sampler **out)
{
	struct hs_sample_params sp = { 0 };

	HS_NEED(out, -EINVAL);
	*out = NULL;
	if (p) {
		sp.temp = p->temperature;
		sp.top_k = p->top_k;
		sp.top_p = p->top_p;
		sp.min_p = p->min_p;
		sp.seed = p->seed;
	} else {
		sp.top_p = 1;
	}
	errno = 0; /* a failed allocation sets ENOMEM; a refused parameter leaves 0 */
	*out = hs__sampler_create(&sp, n_vocab);
	return *out ? 0 : -(errno ? errno : EINVAL);
}

void hs_sampler_free(hs_sampler *s)
{
	hs__sampler_free(s);
}

struct hs_sampler_params hs_sampler_params_default(void)
{
	return (struct hs_sampler_params){ .temperature = 0, .top_k = 0, .top_p = 1, .min_p = 0, .seed = 0 };
}

struct hs_context_opts hs_context_opts_default(void)
{
	/* n_ctx 0: 4096, or the model's context_length when that is less */
	return (struct hs_context_opts){ .n_ctx = 0, .kv_type = HS_KV_F16, .n_seq = 1, .n_ubatch = 0, .dense = NULL };
}

int32_t hs_sampler_sample(hs_sampler *s, const float *logits)
{
	HS_NEED(s, -EINVAL);
	HS_NEED(logits, -EINVAL);
	const int n = hs__sampler_n_vocab(s);
	hs_grammar *g = *hs__sampler_grammar(s);
	int32_t id;
	int rc;
	if (g) {
		float *m = hs__sampler_masked(s);
		if (!m)
			return hs__error(ENOMEM, "sampler: no memory for the masked logits");
		memcpy(m, logits, (size_t)n * sizeof *m);
		if ((rc = hs_grammar_mask(g, m)) < 0)
			return rc;
		if (rc == 0)
			return hs__error(ENOENT, "sampler: the grammar allows no token here");
		logits = m;
	}
	/* a row with nothing to draw (all NaN or -inf: a broken forward or a
	 * mask that left nothing) is an error, not token 0 */
	int any = 0;
	for (int i = 0; i < n && !any; i++)
		any = logits[i] > -INFINITY;
	if (!any)
		return hs__error(EINVAL, "sampler: no logit of the %d is above -inf (all NaN or -inf%s)", n,
				 g ? " where the grammar allows" : "");
	id = hs__sampler_sample(s, logits);
	if (g && id >= 0 && (rc = hs_grammar_accept(g, id)))
		return rc;
	return id;
}

int hs_sampler_set_grammar(hs_sampler *s, hs_grammar *g)
{
	HS_NEED(s, -EINVAL);
	if (g && hs__grammar_n_vocab(g) != hs__sampler_n_vocab(s))
		return hs__error(EINVAL, "sampler: a grammar over %d tokens for a sampler over %d",
				 hs__grammar_n_vocab(g), hs__sampler_n_vocab(s));
	*hs__sampler_grammar(s) = g;
	return 0;
}

int hs_logprobs(const float *logits, int n_vocab, int32_t token, int n_top, float *token_lp, int32_t *top_ids,
		float *top_lps)
{
	HS_NEED(logits, -EINVAL);
	if (n_vocab < 1 || token < 0 || token >= n_vocab)
		return hs__error(EINVAL, "logprobs: token %d outside the vocabulary of %d", (int)token, n_vocab);
	if (n_top < 0 || n_top > n_vocab)
		return hs__error(EINVAL, "logprobs: %d top tokens asked of a vocabulary of %d", n_top, n_vocab);
	if (n_top > 0 && (!top_ids || !top_lps))
		return hs__error(EINVAL, "logprobs: %d top tokens asked with no array for them", n_top);
	if (hs__logprobs(logits, n_vocab, token, n_top, token_lp, top_ids, top_lps))
		return hs__error(EINVAL, "logprobs: no logit of the %d is above -inf (all NaN or -inf)", n_vocab);
	return 0;
}
