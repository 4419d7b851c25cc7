/* Contexts: the public face of the whole model.  A batch is checked whole
 * before anything runs, cut into ubatches in batch order, each sorted by
 * sequence for attention, and a failure while computing rolls every
 * sequence back to where the call found it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "cpu_kernels/sample.h"
#include "model/model.h"
#include "runtime/forward.h"

struct hs_context {
	hs_runtime *rt;
	struct hs_fwd f;
	char dense_desc[128];
	int n_vocab;
	int32_t *next_pos;       /* [n_seq] */
	int32_t *pos_before;     /* [n_seq] during a call */
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
	const struct hs_model_info *in = hs_model_info(rt->m);
	const struct hs_whole *w = hs__model_whole(rt->m);
	hs_context *c;
	int rc;

	*out = NULL;
	if (opts)
		o = *opts;
	if (!w)
		return hs__error(EINVAL, "%s: not a whole model (its MoE layers run one by one: run-layer, bench)",
				 hs__model_whole_why(rt->m));
	for (int l = 0; l < in->n_layers; l++)
		if (!hs_model_layer_is_moe(rt->m, l))
			return hs__error(EINVAL, "%s: layer %d has no experts; hotset runs models whose every layer is MoE",
					 hs__model_path(rt->m), l);
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
	c->u_tok = malloc(ub * sizeof *c->u_tok);
	c->u_pos = malloc(ub * sizeof *c->u_pos);
	c->u_seq = malloc(ub * sizeof *c->u_seq);
	c->u_want = malloc(ub * sizeof *c->u_want);
	c->u_dst = malloc(ub * sizeof *c->u_dst);
	c->order = malloc(ub * sizeof *c->order);
	c->u_rows = malloc(ub * sizeof *c->u_rows);
	if (!c->next_pos || !c->pos_before || !c->u_tok || !c->u_pos || !c->u_seq || !c->u_want || !c->u_dst ||
	    !c->order || !c->u_rows) {
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

int hs_decode(hs_context *c, int n, const struct hs_token *batch)
{
	int rc = check_batch(c, n, batch), want = 0;

	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		want += batch[i].logits != 0;
	if ((rc = grow_logits(c, want)))
		return rc;
	c->n_logits = 0;
	int ran = 0; /* entries of the ubatches run, the failed one too */
	for (int a = 0, done_logits = 0; a < n; a += c->f.ubatch) {
		int b = a + c->f.ubatch < n ? a + c->f.ubatch : n;
		ran = b;
		if ((rc = run_ubatch(c, batch, a, b, done_logits)))
			break;
		for (int i = a; i < b; i++)
			done_logits += batch[i].logits != 0;
	}
	if (rc) { /* roll back: the cells this call wrote are forgotten */
		char msg[512];
		int n_emptied = 0, emptied = -1;
		snprintf(msg, sizeof msg, "%s", hs_last_error());
		int written[HS_MAX_SEQ] = { 0 };
		char touched[HS_MAX_SEQ] = { 0 };
		for (int i = 0; i < n; i++)
			touched[batch[i].seq] = 1;
		for (int i = 0; i < ran; i++)
			written[batch[i].seq]++;
		for (int s = 0; s < c->f.n_seq; s++)
			if (touched[s]) {
				/* a sliding layer's ring lost what the window still needs:
				 * the sequence cannot come back, so it starts over */
				int from = hs__fwd_forget_exact(&c->f, c->pos_before[s], written[s]) ? c->pos_before[s] : 0;
				hs__fwd_forget(&c->f, s, from);
				c->next_pos[s] = from;
				if (from == 0 && c->pos_before[s] > 0)
					n_emptied++, emptied = s;
			}
		if (n_emptied)
			hs__error(-rc, "%s; sequence %d%s emptied: %s", msg, emptied, n_emptied > 1 ? " and others" : "",
				  c->f.hp->n_recurrent ? "its recurrent (DeltaNet) state had taken tokens of this call in"
						       : "more than n_ubatch + 1 of its tokens had run, over sliding-window "
							 "cells its window still needed");
		else
			hs__error(-rc, "%s", msg);
		return rc;
	}
	c->n_logits = want;
	return 0;
}

const float *hs_context_logits(const hs_context *c, int i)
{
	if (i < 0 || i >= c->n_logits)
		return NULL;
	return c->logits + (size_t)i * c->n_vocab;
}

int hs_context_n_logits(const hs_context *c)
{
	return c->n_logits;
}

int hs_context_seq_pos(const hs_context *c, int seq)
{
	if (seq < 0 || seq >= c->f.n_seq)
		return hs__error(EINVAL, "sequence %d (0..%d)", seq, c->f.n_seq - 1);
	return c->next_pos[seq];
}

int hs_context_seq_clear(hs_context *c, int seq)
{
	if (seq < 0 || seq >= c->f.n_seq)
		return hs__error(EINVAL, "sequence %d (0..%d)", seq, c->f.n_seq - 1);
	int rc = hs__fwd_forget(&c->f, seq, 0);
	if (rc)
		return rc;
	c->next_pos[seq] = 0;
	return 0;
}

int hs_context_seq_keep(hs_context *c, int seq, int n)
{
	if (seq < 0 || seq >= c->f.n_seq)
		return hs__error(EINVAL, "sequence %d (0..%d)", seq, c->f.n_seq - 1);
	if (n < 0 || n > c->next_pos[seq])
		return hs__error(EINVAL, "sequence %d: keep %d positions (0..%d, what it holds)", seq, n,
				 c->next_pos[seq]);
	if (n == c->next_pos[seq])
		return n;
	/* positions n.. were written after n: exact when no ring wrapped over
	 * what position n's window sees */
	const int from = hs__fwd_forget_exact(&c->f, n, c->next_pos[seq] - n) ? n : 0;
	int rc = hs__fwd_forget(&c->f, seq, from);
	if (rc)
		return rc;
	c->next_pos[seq] = from;
	return from;
}

int hs_context_stats(const hs_context *c, struct hs_context_stats *o)
{
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
	return 0;
}

void hs_context_stats_reset(hs_context *c)
{
	c->prompt_tokens = c->decode_tokens = 0;
	c->prompt_s = c->decode_s = 0;
	c->f.t_attn = c->f.t_moe = c->f.t_other = 0;
}

/* ---- sampling ------------------------------------------------------------------ */

int hs_sampler_create(const struct hs_sampler_params *p, int n_vocab, hs_sampler **out)
{
	struct hs_sample_params sp = { 0 };

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
	*out = hs__sampler_create(&sp, n_vocab);
	return *out ? 0 : -(errno ? errno : EINVAL);
}

void hs_sampler_free(hs_sampler *s)
{
	hs__sampler_free(s);
}

int32_t hs_sampler_sample(hs_sampler *s, const float *logits)
{
	return hs__sampler_sample(s, logits);
}
