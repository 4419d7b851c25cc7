/* The scheduler thread: it loads the model (load.c), then runs continuous
 * batching over the context's sequences.  Each step: one hs_decode with the next
 * token of every running sequence, then one hs_decode with up to --ubatch
 * prompt tokens of newly admitted requests (oldest first), so running
 * streams keep flowing while a long prompt is read.  A sequence's KV cells
 * are freed (hs_context_seq_clear) as soon as its request ends. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

struct sched {
	struct srv *s;
	hs_runtime *rt;
	hs_context *ctx;
	struct srv_req *slot[HS_MAX_SEQ];
	/* what an idle sequence's KV cells hold (the prompt and answer of the
	 * request that ended there), for a prompt that starts alike */
	int32_t *kept[HS_MAX_SEQ];
	int n_kept[HS_MAX_SEQ];
	double kept_at[HS_MAX_SEQ];
	struct srv_req *active[HS_MAX_SEQ]; /* in admission order */
	int n_active;
	struct hs_token *batch;
	struct srv_req **who;
	int *take;
	double last_report;
};

/* ---- requests ------------------------------------------------------------- */

struct srv_req *hs_srv_req_new(void)
{
	struct srv_req *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	pthread_cond_init(&r->cv, NULL);
	r->slot = -1;
	r->refs = 1;
	r->n_choices = 1;
	return r;
}

/* What only the scheduler uses, freed when the request leaves it. */
static void req_release_private(struct srv_req *r)
{
	hs_sampler_free(r->smp);
	hs_grammar_free(r->grammar);
	r->grammar = NULL;
	hs_reply_parser_free(r->rp);
	hs_detok_free(r->dt);
	r->smp = NULL;
	r->rp = NULL;
	r->dt = NULL;
	hs_srv_sbuf_free(&r->content);
	hs_srv_sbuf_free(&r->reasoning);
	hs_srv_free_tools(r);
	free(r->lp);
	r->lp = NULL;
	for (int i = 0; i < r->n_items; i++)
		json_decref(r->items[i]);
	r->n_items = 0;
	json_decref(r->conv);
	r->conv = NULL;
	for (int i = 0; r->grammars && i < r->n_choices - 1; i++)
		hs_grammar_free(r->grammars[i]);
	free(r->grammars);
	r->grammars = NULL;
	json_decref(r->choice_obj);
	r->choice_obj = NULL;
	hs_srv_sbuf_free(&r->held);
	hs_srv_sbuf_free(&r->pend);
}

void hs_srv_req_unref_locked(struct srv_req *r)
{
	if (--r->refs > 0)
		return;
	struct srv_req *lead = r->lead;
	req_release_private(r);
	free(r->group);
	free(r->prompt);
	free(r->gen);
	for (int i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	hs_srv_sbuf_free(&r->out);
	pthread_cond_destroy(&r->cv);
	free(r);
	if (lead) /* a choice of n > 1 held its lead */
		hs_srv_req_unref_locked(lead);
}

int hs_srv_retry_after(struct srv *s)
{
	/* the queue ahead, spread over the sequences, at the mean service time */
	double per = s->m.service_s_avg > 0 ? s->m.service_s_avg : 1;
	double t = ceil(per * (s->q_len + 1) / s->o.parallel);
	return t < 1 ? 1 : t > 60 ? 60 : (int)t;
}

int hs_srv_enqueue(struct srv *s, struct srv_req *r)
{
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	int free_slots = s->o.parallel - s->m.busy;
	if (s->stopping)
		rc = -ESHUTDOWN;
	else if (s->state != SRV_READY)
		rc = -EBUSY;
	else if (s->q_len + 1 > s->o.max_queue + (free_slots > 0 ? free_slots : 0))
		rc = -EAGAIN;
	if (!rc) {
		r->state = RQ_QUEUED;
		r->t_queued = hs_srv_now();
		r->refs++;
		r->next = NULL;
		if (s->q_tail)
			s->q_tail->next = r;
		else
			s->q_head = r;
		s->q_tail = r;
		s->q_len++;
		pthread_cond_signal(&s->sched_cv);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static struct srv_req *queue_pop_locked(struct srv *s)
{
	struct srv_req *r = s->q_head;
	if (!r)
		return NULL;
	s->q_head = r->next;
	if (!s->q_head)
		s->q_tail = NULL;
	s->q_len--;
	r->next = NULL;
	return r;
}

/* A request that never runs is answered with an error at once (and the
 * scheduler's reference dropped). */
static void answer_now_locked(struct srv *s, struct srv_req *r, int status, const char *type, const char *msg)
{
	hs_srv_emit_error(s, r, status, type, msg);
	hs_srv_sbuf_add(&r->out, r->pend.p, r->pend.len);
	r->pend.len = 0;
	r->finished = 1;
	r->status = status;
	s->m.failed++;
	pthread_cond_broadcast(&r->cv);
	hs_srv_req_unref_locked(r);
}

/* n > 1: choices 1..n-1 of lead, each a request of its own with the
 * lead's fields, the seed plus its index and its own grammar; each holds
 * a reference to the lead, whose `out` gets what it writes.  0 or -ENOMEM
 * (nothing made). */
static int make_choices_locked(struct srv_req *L)
{
	const int n = L->n_choices;
	if (!(L->group = calloc((size_t)n, sizeof *L->group)))
		return -ENOMEM;
	L->group[0] = L;
	for (int i = 1; i < n; i++) {
		struct srv_req *c = hs_srv_req_new();
		if (!c || !(c->prompt = malloc(sizeof *c->prompt * (size_t)L->n_prompt))) {
			free(c);
			goto fail;
		}
		c->chat = L->chat, c->stream = L->stream, c->include_usage = L->include_usage;
		c->return_tokens = L->return_tokens, c->ignore_eos = L->ignore_eos, c->api = L->api;
		c->lp_on = L->lp_on, c->lp_top = L->lp_top, c->max_tokens = L->max_tokens;
		memcpy(c->prompt, L->prompt, sizeof *c->prompt * (size_t)L->n_prompt);
		c->n_prompt = L->n_prompt;
		c->sp = L->sp;
		c->sp.seed = L->sp.seed + (uint64_t)i;
		memcpy(c->id, L->id, sizeof c->id);
		c->created = L->created;
		c->t_queued = L->t_queued;
		c->n_choices = n;
		c->choice = i;
		c->lead = L;
		L->refs++;
		L->group[i] = c;
		for (int k = 0; k < L->n_stop; k++)
			if ((c->stop[k] = strdup(L->stop[k])))
				c->n_stop++;
		if (c->n_stop < L->n_stop)
			goto fail;
		if (L->grammars) { /* its own matcher */
			c->grammar = L->grammars[i - 1];
			L->grammars[i - 1] = NULL;
		}
	}
	return 0;
fail:
	for (int i = 1; i < n && L->group[i]; i++)
		hs_srv_req_unref_locked(L->group[i]);
	free(L->group);
	L->group = NULL;
	return -ENOMEM;
}

/* Queued requests whose client left are dropped; while stopping, every
 * queued request is answered 503. */
static void reap_queue_locked(struct sched *k)
{
	struct srv *s = k->s;
	struct srv_req *keep = NULL, *tail = NULL, *r;
	int n = 0;

	while ((r = queue_pop_locked(s))) {
		if (r->cancel) {
			s->m.cancelled++;
			hs_srv_req_unref_locked(r);
		} else if (s->stopping) {
			answer_now_locked(s, r, 503, "unavailable_error", "the server is shutting down");
		} else {
			if (tail)
				tail->next = r;
			else
				keep = r;
			tail = r;
			n++;
		}
	}
	s->q_head = keep;
	s->q_tail = tail;
	s->q_len = n;
}

/* ---- sequences ------------------------------------------------------------------ */

/* A request leaves its sequence: the cells stay (with the tokens they hold)
 * when it ended well and prompt caching is on, else they are freed. */
static void release_slot(struct sched *k, struct srv_req *r, int keep)
{
	const int sl = r->slot, n_ctx = k->s->n_ctx;
	if (sl < 0 || k->slot[sl] != r)
		return;
	k->slot[sl] = NULL;
	k->n_kept[sl] = 0;
	int pos = hs_context_seq_pos(k->ctx, sl);
	if (keep && !k->s->o.no_prompt_cache && pos > 0 && pos <= r->n_prompt + r->n_gen &&
	    (k->kept[sl] || (k->kept[sl] = malloc(sizeof(int32_t) * (size_t)n_ctx)))) {
		/* positions 0..pos-1: the prompt, then the answer's tokens fed back */
		for (int i = 0; i < pos; i++)
			k->kept[sl][i] = i < r->n_prompt ? r->prompt[i] : r->gen[i - r->n_prompt];
		k->n_kept[sl] = pos;
		k->kept_at[sl] = hs_srv_now();
		return;
	}
	hs_context_seq_clear(k->ctx, sl);
}

/* Cells the running requests hold (and, in *cached, those idle sequences keep). */
static long cells_running(struct sched *k, long *cached)
{
	struct hs_context_stats st;
	long idle = 0;
	hs_context_stats(k->ctx, &st);
	for (int i = 0; i < st.n_seq; i++)
		if (!k->slot[i])
			idle += hs_context_seq_pos(k->ctx, i);
	*cached = idle;
	return st.kv_cells_used - idle;
}

/* A free sequence for r: the one whose kept tokens share the longest
 * start with r's prompt (at least one prompt token is left to compute: its
 * logits give the first answer token), else an empty one, else the one
 * idle the longest.  Returns the sequence; *keep = the positions to keep. */
static int pick_slot(struct sched *k, const struct srv_req *r, int *keep)
{
	const int n_seq = k->s->o.parallel;
	int best = -1, best_n = 0;

	*keep = 0;
	if (r->cache_prompt && !k->s->o.no_prompt_cache)
		for (int sl = 0; sl < n_seq; sl++) {
			if (k->slot[sl] || !k->n_kept[sl])
				continue;
			int n = 0, lim = k->n_kept[sl] < r->n_prompt - 1 ? k->n_kept[sl] : r->n_prompt - 1;
			while (n < lim && k->kept[sl][n] == r->prompt[n])
				n++;
			if (n > best_n)
				best = sl, best_n = n;
		}
	if (best >= 0) {
		*keep = best_n;
		return best;
	}
	for (int sl = 0; sl < n_seq; sl++) /* empty first: the kept ones may serve a later prompt */
		if (!k->slot[sl] && hs_context_seq_pos(k->ctx, sl) == 0)
			return sl;
	for (int sl = 0; sl < n_seq; sl++)
		if (!k->slot[sl] && (best < 0 || k->kept_at[sl] < k->kept_at[best]))
			best = sl;
	return best;
}

/* ---- generation ---------------------------------------------------------------- */

/* Longest suffix of text[0..n) that begins some stop string (a stop may be
 * starting there: keep it back). */
static size_t stop_prefix_tail(const struct srv_req *r, const char *text, size_t n)
{
	size_t best = 0;
	for (int i = 0; i < r->n_stop; i++) {
		size_t sl = strlen(r->stop[i]);
		for (size_t k = sl - 1 < n ? sl - 1 : n; k > best; k--)
			if (memcmp(text + n - k, r->stop[i], k) == 0) {
				best = k;
				break;
			}
	}
	return best;
}

/* Passes a piece of the reply on; content goes through the stop strings.
 * Returns 1 when a stop string ended the content. */
static int deliver(struct srv *s, struct srv_req *r, enum hs_reply_kind kind, int tool_index, const char *text,
		   size_t len)
{
	if (!len)
		return 0;
	if (kind == HS_REPLY_TOOL_CALL) { /* streamed as it comes, or whole at the end */
		hs_srv_add_tool(s, r, tool_index, text, len);
		return 0;
	}
	if (kind != HS_REPLY_CONTENT || !r->n_stop) {
		hs_srv_emit_delta(s, r, kind, text, len);
		return 0;
	}
	if (r->stopped_by_string)
		return 1;
	hs_srv_sbuf_add(&r->held, text, len);
	if (r->held.err)
		return 0;
	size_t cut = (size_t)-1;
	for (int i = 0; i < r->n_stop; i++) {
		const char *hit = memmem(r->held.p, r->held.len, r->stop[i], strlen(r->stop[i]));
		if (hit && (size_t)(hit - r->held.p) < cut) {
			cut = (size_t)(hit - r->held.p);
			r->stop_hit = i;
		}
	}
	if (cut != (size_t)-1) {
		hs_srv_emit_delta(s, r, kind, r->held.p, cut);
		r->held.len = 0;
		r->stopped_by_string = 1;
		return 1;
	}
	size_t keep = stop_prefix_tail(r, r->held.p, r->held.len), emit = r->held.len - keep;
	if (emit) {
		hs_srv_emit_delta(s, r, kind, r->held.p, emit);
		memmove(r->held.p, r->held.p + emit, keep);
		r->held.len = keep;
	}
	return 0;
}

/* Pending tokens up to end (not included): their text went to the content
 * (or not).  A chat format's own (control) tokens did not. */
static void lp_resolve_to(struct srv *s, struct srv_req *r, int end, int content)
{
	for (; r->lp_pend < end; r->lp_pend++) {
		struct srv_lp *e = &r->lp[r->lp_pend];
		e->content = content && (!r->rp || hs_tokenizer_is_control(s->tok, e->id) != 1);
	}
}

static void lp_resolve(struct srv *s, struct srv_req *r, int content)
{
	lp_resolve_to(s, r, r->lp_n, content);
}

/* Whether a piece of text ends with token id's own (a control token's
 * name counts: a "<think>" where no reasoning can start is text). */
static int lp_ends_with(struct srv *s, const struct hs_reply_delta *d, int32_t id)
{
	char b[256];
	int n = hs_token_bytes(s->tok, id, hs_tokenizer_is_control(s->tok, id) == 1, b, sizeof b);
	return n > 0 && n <= (int)sizeof b && d->len >= (size_t)n && !memcmp(d->text + d->len - n, b, (size_t)n);
}

/* The first pending token of a UTF-8 character not finished yet (lp_n when
 * the pending tokens end on a whole character): a control token between
 * the pieces of a character does not end it, so those stay pending. */
static int lp_open_char(struct srv *s, struct srv_req *r)
{
	int have = 0; /* bytes seen from the end */
	for (int i = r->lp_n - 1; i >= r->lp_pend && have < 4; i--) {
		char b[256];
		if (hs_tokenizer_is_control(s->tok, r->lp[i].id) == 1)
			continue;
		int n = hs_token_bytes(s->tok, r->lp[i].id, 0, b, sizeof b);
		if (n > (int)sizeof b)
			n = (int)sizeof b;
		for (int k = n - 1; k >= 0; k--, have++) {
			const unsigned char c = (unsigned char)b[k];
			if ((c & 0xc0) == 0x80 && have < 3)
				continue; /* a continuation byte: its lead is further back */
			const int need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
			return need > have + 1 ? i : r->lp_n; /* the lead byte and what follows it */
		}
	}
	return r->lp_n;
}
static void finish(struct sched *k, struct srv_req *r, const char *reason)
{
	struct srv *s = k->s;
	const struct hs_reply_delta *d;
	const char *text;
	size_t len;
	int nd = 0;

	if (r->state == RQ_DONE)
		return;
	if (r->rp && hs_reply_parser_finish(r->rp, &d, &nd) == 0)
		for (int i = 0; i < nd && !r->stopped_by_string; i++) {
			lp_resolve(s, r, d[i].kind == HS_REPLY_CONTENT);
			deliver(s, r, d[i].kind, d[i].tool_index, d[i].text, d[i].len);
		}
	lp_resolve(s, r, 0); /* what is left gave no text */
	if (r->dt && hs_detok_flush(r->dt, &text, &len) == 0)
		deliver(s, r, HS_REPLY_CONTENT, -1, text, len);
	if (r->stopped_by_string)
		reason = "stop";
	else if (r->held.len)
		hs_srv_emit_delta(s, r, HS_REPLY_CONTENT, r->held.p, r->held.len);
	r->held.len = 0;
	if (r->n_tool && strcmp(reason, "stop") == 0)
		reason = "tool_calls";
	r->t_end = hs_srv_now();
	hs_srv_emit_finish(s, r, reason);
	r->fin = 1;
	r->fin_status = 200;
	r->state = RQ_DONE;
	release_slot(k, r, 1);
	r->reason = reason;
}

static void mark_failed(struct sched *k, struct srv_req *r, int status)
{
	r->fin = 1;
	r->fin_status = status;
	r->state = RQ_DONE;
	r->t_end = hs_srv_now();
	release_slot(k, r, 0);
}

/* A request that cannot go on: an error object instead of the rest.  The
 * choices of n > 1 fail together (one answer, one error). */
static void fail_req(struct sched *k, struct srv_req *r, int status, const char *type, const char *msg)
{
	if (r->state == RQ_DONE)
		return;
	hs_srv_emit_error(k->s, r, status, type, msg);
	mark_failed(k, r, status);
	struct srv_req *L = r->lead ? r->lead : r;
	for (int i = 0; L->group && i < L->n_choices; i++) {
		struct srv_req *m = L->group[i];
		if (m == r)
			continue;
		m->pend.len = 0; /* nothing after the error's [DONE] */
		if (m->state != RQ_DONE)
			mark_failed(k, m, status);
		else if (m->fin_status == 200) /* its answer does not count */
			m->fin_status = status;
	}
}

/* One generated token: through the reply parser (chat) or the
 * detokenizer (completions), then the length limit. */
static void accept(struct sched *k, struct srv_req *r, int32_t id)
{
	struct srv *s = k->s;

	r->gen[r->n_gen++] = id;
	r->last = id;
	if (r->rp) {
		const struct hs_reply_delta *d;
		int nd = 0, rc = hs_reply_parser_push(r->rp, id, &d, &nd);
		/* logprobs: the earlier tokens the parser held gave the first
		 * piece's kind of text; this one, the last piece's when that
		 * ends with its text (else the parser holds it too); a control
		 * token with no text ends what was held, but for a character
		 * it splits */
		if (r->lp_n > r->lp_pend && r->lp[r->lp_n - 1].id == id) {
			if (nd) {
				lp_resolve_to(s, r, r->lp_n - 1, d[0].kind == HS_REPLY_CONTENT);
				if (lp_ends_with(s, &d[nd - 1], id)) {
					r->lp[r->lp_n - 1].content = d[nd - 1].kind == HS_REPLY_CONTENT;
					r->lp_pend = r->lp_n;
				}
			} else if (hs_tokenizer_is_control(s->tok, id) == 1) {
				lp_resolve_to(s, r, lp_open_char(s, r), 0);
			}
		}
		for (int i = 0; i < nd; i++) {
			if (deliver(s, r, d[i].kind, d[i].tool_index, d[i].text, d[i].len)) {
				finish(k, r, "stop");
				return;
			}
		}
		if (rc == 1) {
			finish(k, r, "stop");
			return;
		}
	} else {
		const char *text;
		size_t len;
		if (!r->ignore_eos && (id == s->eos || id == s->eot)) {
			lp_resolve(s, r, 0);
			finish(k, r, "stop");
			return;
		}
		lp_resolve(s, r, 1); /* a completion's every other token is its text */
		if (hs_detok_push(r->dt, id, &text, &len) == 0 && deliver(s, r, HS_REPLY_CONTENT, -1, text, len)) {
			finish(k, r, "stop");
			return;
		}
	}
	if (r->n_gen >= r->max_tokens)
		finish(k, r, "length");
}

/* A token drawn from a row of logits (and its logprobs when asked). */
static void accept_row(struct sched *k, struct srv_req *r, const float *row)
{
	char msg[320];
	if (r->state != RQ_DECODE) /* its group failed meanwhile */
		return;
	int32_t id = row ? hs_sampler_sample(r->smp, row) : -EINVAL;

	if (id >= 0 && r->lp_on) {
		if (r->lp_n == r->lp_cap) {
			int cap = r->lp_cap ? 2 * r->lp_cap : 64;
			struct srv_lp *p = realloc(r->lp, sizeof *p * (size_t)cap);
			if (!p) {
				fail_req(k, r, 500, "server_error", "out of memory for logprobs");
				return;
			}
			r->lp = p;
			r->lp_cap = cap;
		}
		struct srv_lp *e = &r->lp[r->lp_n];
		*e = (struct srv_lp){ .id = id };
		if (hs_logprobs(row, k->s->n_vocab, id, r->lp_top, &e->lp, e->top_id, e->top_lp) == 0)
			r->lp_n++;
	}
	if (id < 0) { /* a row with nothing to draw: a broken forward step */
		snprintf(msg, sizeof msg, "sampling failed: %s", hs_last_error());
		fail_req(k, r, 500, "server_error", msg);
		return;
	}
	accept(k, r, id);
}

/* The scheduler's own state of a newly admitted request. */
static int admit(struct sched *k, struct srv_req *r)
{
	struct srv *s = k->s;
	int keep, slot = pick_slot(k, r, &keep);

	r->slot = slot;
	k->slot[slot] = r;
	k->n_kept[slot] = 0;
	k->active[k->n_active++] = r;
	r->state = r->lead ? RQ_FORK : RQ_PREFILL; /* a later choice waits for the lead's prompt */
	r->n_gen = 0;
	/* the kept start of an earlier prompt and answer is not computed again
	 * (0 when a sliding window's ring has lost what it needs) */
	int kept = keep > 0 && !r->lead ? hs_context_seq_keep(k->ctx, slot, keep) : 0;
	if (kept <= 0) {
		kept = 0;
		if (hs_context_seq_pos(k->ctx, slot) != 0)
			hs_context_seq_clear(k->ctx, slot);
	}
	r->n_past = r->n_cached = kept;
	/* a model whose recurrent states hold no earlier position: the next
	 * turn's prompt shares this one up to its last turn's start, so the
	 * prefill ends a call there and the context checkpoints the states */
	r->ckpt_at = 0;
	if (hs_runtime_model_info(k->rt)->n_recurrent_layers && !r->lead) {
		const int32_t turn = hs_tokenizer_find(s->tok, "<|im_start|>");
		for (int t = r->n_prompt - 1; turn >= 0 && t > kept + 1; t--)
			if (r->prompt[t] == turn) {
				r->ckpt_at = t;
				break;
			}
	}
	if (!(r->gen = malloc(sizeof *r->gen * (size_t)r->max_tokens)) ||
	    hs_sampler_create(&r->sp, s->n_vocab, &r->smp) || hs_sampler_set_grammar(r->smp, r->grammar) ||
	    (r->chat ? hs_reply_parser_new(s->tok, s->fmt, &r->rp) ||
			       hs_reply_parser_set_prompt(r->rp, r->prompt, r->n_prompt) /* an opened <think>? */
		     : hs_detok_new(s->tok, 0, &r->dt))) {
		fail_req(k, r, 500, "server_error", "out of memory for a new request");
		return -ENOMEM;
	}
	return 0;
}

/* n > 1: the lead's prompt is computed; every waiting choice copies its
 * cells and draws its first token from the same logits.  A model whose
 * states cannot be copied (recurrent layers), or a copy refused, has the
 * choice compute the prompt itself. */
static void fork_choices(struct sched *k, struct srv_req *L, const float *row, double now)
{
	for (int i = 1; i < L->n_choices; i++) {
		struct srv_req *c = L->group[i];
		if (c->state != RQ_FORK)
			continue;
		if (hs_context_seq_cp(k->ctx, L->slot, c->slot, 0, L->n_prompt) == 0) {
			c->n_past = L->n_prompt;
			c->forked = 1;
			c->t_prompt0 = L->t_prompt0;
			c->t_prompt1 = now;
			c->state = RQ_DECODE;
			accept_row(k, c, row);
		} else {
			hs_context_seq_clear(k->ctx, c->slot);
			c->state = RQ_PREFILL;
		}
	}
}

static void fail_batch(struct sched *k, int n)
{
	char msg[512];
	snprintf(msg, sizeof msg, "decoding failed: %s", hs_last_error());
	for (int i = 0; i < n; i++)
		fail_req(k, k->who[i], 500, "server_error", msg);
}

static void step(struct sched *k)
{
	struct srv *s = k->s;
	int n = 0;

	/* every running sequence's next token, in one call */
	for (int i = 0; i < k->n_active; i++) {
		struct srv_req *r = k->active[i];
		if (r->state != RQ_DECODE)
			continue;
		k->batch[n] = (struct hs_token){ r->last, r->n_prompt + r->n_gen - 1, r->slot, 1 };
		k->who[n++] = r;
	}
	if (n) {
		if (hs_decode(k->ctx, n, k->batch))
			fail_batch(k, n);
		else
			for (int j = 0; j < n; j++)
				accept_row(k, k->who[j], hs_context_logits(k->ctx, j));
	}
	/* then up to a ubatch of prompt tokens, oldest request first */
	int m = 0, nw = 0, budget = s->o.ubatch;
	double now = hs_srv_now();
	for (int i = 0; i < k->n_active && budget > 0; i++) {
		struct srv_req *r = k->active[i];
		if (r->state != RQ_PREFILL)
			continue;
		const int end = r->ckpt_at > r->n_past ? r->ckpt_at : r->n_prompt;
		int take = end - r->n_past < budget ? end - r->n_past : budget;
		if (r->t_prompt0 == 0)
			r->t_prompt0 = now;
		for (int t = r->n_past; t < r->n_past + take; t++)
			k->batch[m++] = (struct hs_token){ r->prompt[t], t, r->slot, t == r->n_prompt - 1 };
		k->who[nw] = r;
		k->take[nw++] = take;
		budget -= take;
	}
	if (!m)
		return;
	if (hs_decode(k->ctx, m, k->batch)) {
		fail_batch(k, nw);
		return;
	}
	now = hs_srv_now();
	for (int i = 0, li = 0; i < nw; i++) {
		struct srv_req *r = k->who[i];
		r->n_past += k->take[i];
		if (r->n_past < r->n_prompt)
			continue;
		r->t_prompt1 = now;
		r->state = RQ_DECODE;
		const float *row = hs_context_logits(k->ctx, li++);
		if (r->group)
			fork_choices(k, r, row, now);
		accept_row(k, r, row);
	}
}

/* The MoE hit share over every layer so far. */
static void moe_share(struct sched *k, double *share, long *pairs)
{
	const struct hs_model_info *in = hs_runtime_model_info(k->rt);
	long p = 0, h = 0;
	for (int l = 0; l < in->n_layers; l++) {
		struct hs_layer_report rep;
		if (hs_runtime_layer_report(k->rt, l, &rep))
			continue;
		p += rep.pairs;
		h += rep.hits;
	}
	*share = p ? (double)h / p : 0;
	*pairs = p;
}

/* Whether r and, for n > 1, every choice of its answer ended. */
static int group_done(const struct srv_req *r)
{
	const struct srv_req *L = r->lead ? r->lead : r;
	if (!L->group)
		return r->fin;
	for (int i = 0; i < L->n_choices; i++)
		if (!L->group[i]->fin)
			return 0;
	return 1;
}

/* Hands what the step wrote to the HTTP side, drops finished requests and
 * refreshes the metrics snapshot. */
static void publish(struct sched *k)
{
	struct srv *s = k->s;
	struct hs_context_stats st;
	double share = 0;
	long pairs = 0;
	int refresh = hs_srv_now() - k->last_report > 0.25;

	hs_context_stats(k->ctx, &st);
	if (refresh) {
		moe_share(k, &share, &pairs);
		k->last_report = hs_srv_now();
	}
	pthread_mutex_lock(&s->mu);
	/* what each wrote goes to its answer (a choice's to its lead's); a
	 * lead whose choices all ended gets the end of the answer (whether
	 * each is done is known before the first leaves: a choice frees itself) */
	char done[HS_MAX_SEQ];
	for (int pass = 0; pass < 2; pass++)
	for (int i = 0; i < k->n_active; i++) {
		struct srv_req *r = k->active[i], *o = r->lead ? r->lead : r;
		if (!pass)
			done[i] = (char)group_done(r);
		else if (r->group && done[i] && r->fin_status == 200) /* after every choice's last chunk */
			hs_srv_emit_group_end(s, r);
		if (r->pend.len || r->pend.err) {
			hs_srv_sbuf_add(&o->out, r->pend.p, r->pend.len);
			if (r->pend.err)
				o->out.err = 1;
			r->pend.len = 0;
			pthread_cond_broadcast(&o->cv);
		}
	}
	int w = 0;
	for (int i = 0; i < k->n_active; i++) {
		struct srv_req *r = k->active[i];
		if (!done[i]) { /* a choice that ended waits for the others */
			k->active[w++] = r;
			continue;
		}
		r->finished = 1;
		r->status = r->fin_status;
		if (!r->forked) {
			s->m.prompt_tokens += r->n_past;
			s->m.prompt_tokens_cached += r->n_cached;
		} else {
			s->m.prompt_tokens_forked += r->n_past;
		}
		s->m.completion_tokens += r->n_gen;
		if (r->lead) /* the answer's end is counted once, by its lead */
			;
		else if (r->fin_status != 200)
			s->m.failed++;
		else if (strcmp(r->reason, "length") == 0)
			s->m.finished_length++;
		else if (strcmp(r->reason, "tool_calls") == 0)
			s->m.finished_tool++;
		else
			s->m.finished_stop++;
		if (r->t_prompt0 > 0 && !r->lead) {
			double held = r->t_end - r->t_prompt0;
			s->m.service_s_avg = s->m.service_s_avg > 0 ? 0.9 * s->m.service_s_avg + 0.1 * held : held;
		}
		s->m.busy--;
		pthread_cond_broadcast(&r->cv);
		req_release_private(r);
		hs_srv_req_unref_locked(r);
	}
	k->n_active = w;
	s->m.kv_cells_used = cells_running(k, &s->m.kv_cells_cached);
	s->m.ctx_prompt_tokens = st.prompt_tokens;
	s->m.ctx_decode_tokens = st.decode_tokens;
	s->m.ctx_prompt_s = st.prompt_s;
	s->m.ctx_decode_s = st.decode_s;
	if (refresh) {
		s->m.moe_hit_share = share;
		s->m.moe_pairs = pairs;
	}
	pthread_mutex_unlock(&s->mu);
}

/* Under srv.mu: cancelled running requests leave at once (their KV cells
 * are freed); past the stop deadline, the others end with an error. */
static void reap_active_locked(struct sched *k)
{
	struct srv *s = k->s;
	int cut = s->stopping == 2 || (s->stopping && hs_srv_now() >= s->stop_deadline);
	int w = 0;

	for (int i = 0; i < k->n_active; i++) {
		struct srv_req *r = k->active[i];
		const struct srv_req *L = r->lead ? r->lead : r;
		/* the choices of n > 1 leave together (an ended one waits for the rest) */
		if (L->cancel && (!r->fin || L->group)) {
			release_slot(k, r, 0);
			s->m.cancelled += !r->lead;
			*(r->forked ? &s->m.prompt_tokens_forked : &s->m.prompt_tokens) += r->n_past;
			s->m.completion_tokens += r->n_gen;
			s->m.busy--;
			req_release_private(r);
			hs_srv_req_unref_locked(r);
			continue;
		}
		if (cut && !r->fin)
			fail_req(k, r, 503, "unavailable_error", "the server is shutting down");
		k->active[w++] = r;
	}
	if (w < k->n_active) /* /metrics shows the freed cells at once */
		s->m.kv_cells_used = cells_running(k, &s->m.kv_cells_cached);
	k->n_active = w;
}

static void run(struct sched *k)
{
	struct srv *s = k->s;

	for (;;) {
		struct srv_req *fresh[HS_MAX_SEQ];
		int n_fresh = 0;

		int stopping;

		pthread_mutex_lock(&s->mu);
		for (;;) {
			reap_queue_locked(k);
			reap_active_locked(k);
			/* a request of n choices needs n sequences (n <= --parallel) */
			while (s->q_head && s->m.busy + s->q_head->n_choices <= s->o.parallel) {
				struct srv_req *r = queue_pop_locked(s);
				if (r->n_choices > 1 && make_choices_locked(r)) {
					answer_now_locked(s, r, 500, "server_error", "out of memory for the choices");
					continue;
				}
				fresh[n_fresh++] = r;
				s->m.busy += r->n_choices;
			}
			if (k->n_active + n_fresh > 0 || s->stopping)
				break;
			pthread_cond_wait(&s->sched_cv, &s->mu);
		}
		stopping = s->stopping;
		pthread_mutex_unlock(&s->mu);
		if (stopping && k->n_active + n_fresh == 0)
			break;
		for (int i = 0; i < n_fresh; i++) {
			admit(k, fresh[i]);
			for (int c = 1; fresh[i]->group && c < fresh[i]->n_choices; c++)
				admit(k, fresh[i]->group[c]);
		}
		step(k);
		publish(k);
	}
}

void *hs_srv_sched_main(void *arg)
{
	struct sched k = { .s = arg };
	struct srv *s = k.s;

	if (hs_srv_load(s, &k.rt, &k.ctx) == 0) {
		size_t nb = (size_t)(s->o.parallel > s->o.ubatch ? s->o.parallel : s->o.ubatch);
		k.batch = malloc(nb * sizeof *k.batch);
		k.who = malloc(nb * sizeof *k.who);
		k.take = malloc(nb * sizeof *k.take);
		if (!k.batch || !k.who || !k.take) {
			hs_srv_set_state(s, SRV_FAILED, "out of memory");
		} else {
			run(&k);
			hs_srv_set_state(s, SRV_STOPPED, "stopped");
		}
	}
	for (int i = 0; i < HS_MAX_SEQ; i++)
		free(k.kept[i]);
	hs_context_free(k.ctx);
	hs_runtime_close(k.rt);
	free(k.batch);
	free(k.who);
	free(k.take);
	return NULL;
}
