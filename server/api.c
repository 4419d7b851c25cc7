/* The OpenAI API's JSON out (requests in are request.c's): stream chunks,
 * whole completions, errors, /v1/models and /metrics. */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

/* ---- byte buffers --------------------------------------------------------- */

void hs_srv_sbuf_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->err || !n)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->err = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void hs_srv_sbuf_addf(struct sbuf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->err = 1;
	} else if ((size_t)n < sizeof tmp) {
		hs_srv_sbuf_add(b, tmp, (size_t)n);
	} else { /* longer than the stack buffer: formatted again into the heap, never cut */
		char *big = malloc((size_t)n + 1);
		if (!big) {
			b->err = 1;
			return;
		}
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		hs_srv_sbuf_add(b, big, (size_t)n);
		free(big);
	}
}

void hs_srv_sbuf_free(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/* ---- errors ------------------------------------------------------------------ */

/* Length of the UTF-8 character at p (n bytes left), 0 when the bytes are
 * not one (overlong, surrogate, past U+10FFFF, cut short). */
static size_t utf8_char(const unsigned char *p, size_t n)
{
	unsigned c = p[0];
	size_t k = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!k || k > n)
		return 0;
	for (size_t i = 1; i < k; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] >= 0xa0) || (c == 0xf0 && p[1] < 0x90) ||
	    (c == 0xf4 && p[1] >= 0x90))
		return 0;
	return k;
}

/* Whether the n bytes at p are the start of one character, cut short. */
static int cut_short(const unsigned char *p, size_t n)
{
	size_t k = p[0] >= 0xc2 && p[0] <= 0xdf ? 2 : p[0] >= 0xe0 && p[0] <= 0xef ? 3 : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : 0;
	if (!k || n >= k)
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return 1;
}

/* s as a JSON string (quotes included) at out[*o], never past cap - 1:
 * control characters escaped, bytes that are not UTF-8 as U+FFFD, cut
 * on a character boundary when it does not fit. */
static void put_json_string(char *out, size_t cap, size_t *o, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), i = 0;

	if (*o + 2 >= cap)
		return;
	out[(*o)++] = '"';
	while (i < n) {
		char tmp[8];
		size_t k = utf8_char(p + i, n - i), w;
		if (k == 1 && (p[i] < 0x20 || p[i] == '"' || p[i] == '\\')) {
			w = p[i] == '"' || p[i] == '\\' ? (size_t)snprintf(tmp, sizeof tmp, "\\%c", p[i])
							: (size_t)snprintf(tmp, sizeof tmp, "\\u%04x", p[i]);
		} else if (k) {
			memcpy(tmp, p + i, k);
			w = k;
		} else if (cut_short(p + i, n - i)) {
			break; /* a character cut at the end (by an earlier length cap): dropped */
		} else {
			memcpy(tmp, "\xef\xbf\xbd", 3); /* U+FFFD for one bad byte */
			w = 3;
			k = 1;
		}
		if (*o + w + 2 > cap) /* room for this, the closing quote and the NUL */
			break;
		memcpy(out + *o, tmp, w);
		*o += w;
		i += k;
	}
	out[(*o)++] = '"';
	out[*o] = 0;
}

static void put_raw(char *out, size_t cap, size_t *o, const char *s)
{
	size_t n = strlen(s);
	if (*o + n + 1 > cap)
		n = cap - 1 - *o;
	memcpy(out + *o, s, n);
	*o += n;
	out[*o] = 0;
}

size_t hs_srv_error_json_buf(char *buf, size_t cap, int status, const char *type, const char *param,
			     const char *code, const char *msg)
{
	char tail[96];
	size_t o = 0;

	/* the fields after the message are short: keep their room first */
	size_t room = cap - 160 - (param ? strlen(param) : 0) - (code ? strlen(code) : 0);
	buf[0] = 0;
	put_raw(buf, cap, &o, "{\"error\":{\"message\":");
	put_json_string(buf, room < cap ? room : cap, &o, msg);
	put_raw(buf, cap, &o, ",\"type\":");
	put_json_string(buf, cap, &o, type ? type : "server_error");
	put_raw(buf, cap, &o, ",\"param\":");
	if (param)
		put_json_string(buf, cap, &o, param);
	else
		put_raw(buf, cap, &o, "null");
	put_raw(buf, cap, &o, ",\"code\":");
	if (code)
		put_json_string(buf, cap, &o, code);
	else
		put_raw(buf, cap, &o, "null");
	snprintf(tail, sizeof tail, ",\"status\":%d}}", status);
	put_raw(buf, cap, &o, tail);
	return o;
}

char *hs_srv_error_json_v(int status, const char *type, const char *param, const char *code, const char *fmt,
			  va_list ap)
{
	char msg[1024], body[4096];
	int m = vsnprintf(msg, sizeof msg, fmt, ap);
	if (m >= (int)sizeof msg) { /* cut: drop a character the cut split */
		size_t j = strlen(msg);
		while (j > 0 && ((unsigned char)msg[j - 1] & 0xc0) == 0x80)
			j--;
		if (j > 0 && (unsigned char)msg[j - 1] >= 0xc0 && !utf8_char((unsigned char *)msg + j - 1, strlen(msg) - j + 1))
			msg[j - 1] = 0;
	}
	size_t n = hs_srv_error_json_buf(body, sizeof body, status, type, param, code, msg);
	char *s = malloc(n + 1);
	if (s)
		memcpy(s, body, n + 1);
	return s;
}

char *hs_srv_error_json(int status, const char *type, const char *param, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = hs_srv_error_json_v(status, type, param, code, fmt, ap);
	va_end(ap);
	return s;
}

/* ---- answers ------------------------------------------------------------------- */

/* The fields every chunk and answer begins with. */
static json_t *head(struct srv *s, struct srv_req *r, const char *object)
{
	return json_pack("{s:s, s:s, s:I, s:s, s:s}", "id", r->id, "object", object, "created", (json_int_t)r->created,
			 "model", s->model_name, "system_fingerprint", s->fingerprint);
}

/* j (taken; NULL when building it failed) into the request's output:
 * with `event`, as a server-sent event (a name, or "" for an unnamed
 * one), else as a whole answer. */
static void put(struct srv_req *r, const char *event, json_t *j)
{
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!t) {
		r->pend.err = 1;
		return;
	}
	if (event && *event)
		hs_srv_sbuf_addf(&r->pend, "event: %s\n", event);
	if (event)
		hs_srv_sbuf_add(&r->pend, "data: ", 6);
	hs_srv_sbuf_add(&r->pend, t, strlen(t));
	if (event)
		hs_srv_sbuf_add(&r->pend, "\n\n", 2);
	free(t);
}

static void sse(struct srv_req *r, json_t *j)
{
	put(r, "", j);
}

static void chunk(struct srv *s, struct srv_req *r, json_t *delta, json_t *logprobs, const char *reason)
{
	json_t *j = head(s, r, r->chat ? "chat.completion.chunk" : "text_completion");
	if (!logprobs)
		logprobs = json_null();
	json_t *c = r->chat ? json_pack("{s:i, s:o, s:o, s:s?}", "index", r->choice, "delta", delta, "logprobs", logprobs,
					"finish_reason", reason)
			    : json_pack("{s:i, s:o, s:o, s:s?}", "index", r->choice, "text", delta, "logprobs", logprobs,
					"finish_reason", reason);
	if (!j || !c) {
		json_decref(j);
		json_decref(c);
		r->pend.err = 1;
		return;
	}
	json_object_set_new(j, "choices", json_pack("[o]", c));
	sse(r, j);
}

/* ---- logprobs ---------------------------------------------------------------- */

/* A token's text for logprobs: its bytes as a string when they are whole
 * UTF-8, else "bytes:\xNN..." (as OpenAI writes a piece of a character);
 * with `bytes` not NULL, the byte values too. */
static json_t *lp_token(struct srv *s, int32_t id, json_t **bytes)
{
	char buf[256], esc[4 * sizeof buf + 8];
	int n = hs_token_bytes(s->tok, id, 1, buf, sizeof buf);
	if (n < 0)
		n = 0;
	if (n > (int)sizeof buf)
		n = (int)sizeof buf; /* no token of a real vocabulary is this long */
	if (bytes) {
		*bytes = json_array();
		for (int i = 0; *bytes && i < n; i++)
			json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
	}
	json_t *t = json_stringn(buf, (size_t)n);
	if (t)
		return t;
	int o = snprintf(esc, sizeof esc, "bytes:");
	for (int i = 0; i < n; i++)
		o += snprintf(esc + o, sizeof esc - (size_t)o, "\\x%02x", (unsigned char)buf[i]);
	return json_string(esc);
}

/* -inf (a token the model rules out) as OpenAI writes it: JSON has no infinity */
static double lp_value(float v)
{
	return v > -9999.0f ? (double)v : -9999.0;
}

/* The content tokens of entries from..to-1 as chat logprobs
 * ({"content": [...], "refusal": null}); NULL when there are none. */
static json_t *lp_chat(struct srv *s, struct srv_req *r, int from, int to)
{
	json_t *a = json_array();
	for (int i = from; a && i < to; i++) {
		const struct srv_lp *e = &r->lp[i];
		json_t *b = NULL, *tok, *top = json_array();
		if (!e->content) {
			json_decref(top);
			continue;
		}
		tok = lp_token(s, e->id, &b);
		for (int j = 0; top && j < r->lp_top; j++) {
			json_t *tb = NULL, *tt = lp_token(s, e->top_id[j], &tb);
			json_array_append_new(top, json_pack("{s:o, s:f, s:o}", "token", tt, "logprob",
							     lp_value(e->top_lp[j]), "bytes", tb));
		}
		json_array_append_new(a, json_pack("{s:o, s:f, s:o, s:o}", "token", tok, "logprob", lp_value(e->lp),
						    "bytes", b, "top_logprobs", top));
	}
	if (a && !json_array_size(a) && from < to && r->stream) {
		json_decref(a);
		return NULL;
	}
	return a ? json_pack("{s:o, s:n}", "content", a, "refusal") : NULL;
}

/* The same as a completion's logprobs, the older layout: tokens,
 * token_logprobs, top_logprobs (one object per token, text to logprob),
 * text_offset (characters into the completion's text). */
static json_t *lp_text(struct srv *s, struct srv_req *r, int from, int to)
{
	json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
	for (int i = from; toks && lps && tops && offs && i < to; i++) {
		const struct srv_lp *e = &r->lp[i];
		if (!e->content)
			continue;
		char buf[256]; /* the text the detokenizer gives (a control token's name is not in it) */
		int n = hs_token_bytes(s->tok, e->id, 0, buf, sizeof buf);
		json_array_append_new(toks, lp_token(s, e->id, NULL));
		json_array_append_new(lps, json_real(lp_value(e->lp)));
		json_array_append_new(offs, json_integer(r->lp_chars));
		for (int b = 0; b < n && b < (int)sizeof buf; b++)
			r->lp_chars += ((unsigned char)buf[b] & 0xc0) != 0x80; /* a character starts here */
		json_t *o = json_object();
		for (int j = 0; o && j < r->lp_top; j++) {
			json_t *tt = lp_token(s, e->top_id[j], NULL);
			if (tt && json_string_value(tt))
				json_object_set_new(o, json_string_value(tt), json_real(lp_value(e->top_lp[j])));
			json_decref(tt);
		}
		json_array_append_new(tops, o);
	}
	if (!toks || !lps || !tops || !offs || (!json_array_size(toks) && r->stream)) {
		json_decref(toks);
		json_decref(lps);
		json_decref(tops);
		json_decref(offs);
		return NULL;
	}
	return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
			 "text_offset", offs);
}

/* The logprobs a chunk carries: the content tokens resolved since the last
 * one (json null when none or not asked). */
static json_t *lp_next(struct srv *s, struct srv_req *r)
{
	json_t *j = NULL;
	if (r->lp_on && r->lp_sent < r->lp_pend)
		j = r->chat ? lp_chat(s, r, r->lp_sent, r->lp_pend) : lp_text(s, r, r->lp_sent, r->lp_pend);
	r->lp_sent = r->lp_pend;
	return j ? j : json_null();
}

/* ---- the Messages API (Anthropic) out ---------------------------------------------- */

/* One server-sent event as Anthropic names them. */
static void event(struct srv_req *r, const char *name, json_t *j)
{
	put(r, name, j);
}

static const char *stop_reason(const struct srv_req *r, const char *reason)
{
	if (r->stopped_by_string)
		return "stop_sequence";
	return strcmp(reason, "length") == 0 ? "max_tokens" : strcmp(reason, "tool_calls") == 0 ? "tool_use" : "end_turn";
}

static json_t *msg_usage(const struct srv_req *r)
{
	return json_pack("{s:i, s:i, s:i, s:i}", "input_tokens", r->n_prompt, "output_tokens", r->n_gen,
			 "cache_read_input_tokens", r->n_cached, "cache_creation_input_tokens", 0);
}

/* Tool call i's name (harmony's recipient without "functions."). */
static const char *call_name(struct srv_req *r, int i)
{
	const char *name = r->rp ? hs_reply_parser_tool_name_at(r->rp, i) : NULL;
	if (name && strncmp(name, "functions.", 10) == 0)
		name += 10;
	return name ? name : "";
}

/* A tool call's input: its arguments when they are a JSON object, else
 * {"arguments": the text} (a model's broken call, kept rather than lost). */
static json_t *call_input(struct srv_req *r, int i)
{
	json_t *j = r->tool[i].len ? json_loadb(r->tool[i].p, r->tool[i].len, 0, NULL) : json_object();
	if (json_is_object(j))
		return j;
	json_decref(j);
	return json_pack("{s:s%}", "arguments", r->tool[i].p ? r->tool[i].p : "", r->tool[i].len);
}

static void block_stop(struct srv_req *r)
{
	if (r->block)
		event(r, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", r->n_blocks - 1));
	r->block = 0;
}

static void msg_delta(struct srv *s, struct srv_req *r, enum hs_reply_kind kind, const char *text, size_t len)
{
	if (!r->role_sent) {
		r->role_sent = 1;
		event(r, "message_start",
		      json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:[], s:n, s:n, s:{s:i, s:i}}}", "type", "message_start",
				"message", "id", r->id, "type", "message", "role", "assistant", "model", s->model_name,
				"content", "stop_reason", "stop_sequence", "usage", "input_tokens", r->n_prompt,
				"output_tokens", 0));
	}
	if (!len)
		return;
	const int think = kind == HS_REPLY_REASONING, want = think ? 1 : 2;
	if (r->block != want) {
		block_stop(r);
		event(r, "content_block_start",
		      think ? json_pack("{s:s, s:i, s:{s:s, s:s, s:s}}", "type", "content_block_start", "index", r->n_blocks,
					"content_block", "type", "thinking", "thinking", "", "signature", "")
			    : json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_start", "index", r->n_blocks,
					"content_block", "type", "text", "text", ""));
		r->n_blocks++;
		r->block = want;
	}
	event(r, "content_block_delta",
	      json_pack("{s:s, s:i, s:{s:s, s:s%}}", "type", "content_block_delta", "index", r->n_blocks - 1, "delta",
			"type", think ? "thinking_delta" : "text_delta", think ? "thinking" : "text", text, len));
}

static void msg_finish(struct srv *s, struct srv_req *r, const char *reason)
{
	const char *why = stop_reason(r, reason), *seq = r->stopped_by_string ? r->stop[r->stop_hit] : NULL;
	char id[48];

	if (r->stream) {
		msg_delta(s, r, HS_REPLY_CONTENT, "", 0); /* message_start, if nothing came before */
		block_stop(r);
		for (int i = 0; i < r->n_tool; i++) {
			if (r->tool_head[i]) /* streamed as it was written */
				continue;
			hs_srv_random_id(s, "toolu_", id, sizeof id);
			event(r, "content_block_start",
			      json_pack("{s:s, s:i, s:{s:s, s:s, s:s, s:{}}}", "type", "content_block_start", "index",
					r->n_blocks, "content_block", "type", "tool_use", "id", id, "name", call_name(r, i),
					"input"));
			json_t *in = call_input(r, i);
			char *t = in ? json_dumps(in, JSON_COMPACT) : NULL;
			json_decref(in);
			event(r, "content_block_delta",
			      json_pack("{s:s, s:i, s:{s:s, s:s}}", "type", "content_block_delta", "index", r->n_blocks,
					"delta", "type", "input_json_delta", "partial_json", t ? t : "{}"));
			free(t);
			event(r, "content_block_stop",
			      json_pack("{s:s, s:i}", "type", "content_block_stop", "index", r->n_blocks++));
		}
		event(r, "message_delta",
		      json_pack("{s:s, s:{s:s, s:s?}, s:o}", "type", "message_delta", "delta", "stop_reason", why,
				"stop_sequence", seq, "usage", msg_usage(r)));
		event(r, "message_stop", json_pack("{s:s}", "type", "message_stop"));
		return;
	}
	json_t *blocks = json_array();
	if (blocks && r->reasoning.len)
		json_array_append_new(blocks, json_pack("{s:s, s:s%, s:s}", "type", "thinking", "thinking", r->reasoning.p,
							r->reasoning.len, "signature", ""));
	if (blocks && (r->content.len || (!r->n_tool && !r->reasoning.len)))
		json_array_append_new(blocks, json_pack("{s:s, s:s%}", "type", "text", "text",
							r->content.p ? r->content.p : "", r->content.len));
	for (int i = 0; blocks && i < r->n_tool; i++) {
		hs_srv_random_id(s, "toolu_", id, sizeof id);
		json_array_append_new(blocks, json_pack("{s:s, s:s, s:s, s:o}", "type", "tool_use", "id", id, "name",
							call_name(r, i), "input", call_input(r, i)));
	}
	put(r, NULL, json_pack("{s:s, s:s, s:s, s:s, s:o, s:s, s:s?, s:o}", "id", r->id, "type", "message", "role",
			       "assistant", "model", s->model_name, "content", blocks, "stop_reason", why,
			       "stop_sequence", seq, "usage", msg_usage(r)));
}

/* ---- the Responses API (OpenAI) out ---------------------------------------------- */

/* An event of the Responses stream: its type and sequence number added. */
static void resp_event(struct srv_req *r, const char *type, json_t *j)
{
	if (j) {
		json_object_set_new(j, "type", json_string(type));
		json_object_set_new(j, "sequence_number", json_integer(r->seq_no++));
	}
	put(r, type, j);
}

/* Output item k's id: the response's own id with a prefix and k. */
static void item_id(const struct srv_req *r, int kind, int k, char *buf, size_t n)
{
	snprintf(buf, n, "%s_%s_%d", kind == 1 ? "rs" : kind == 2 ? "msg" : "fc", r->id + 5 /* after "resp_" */, k);
}

/* Call i's call_id, the one its output item and the kept conversation give it. */
static void call_id(const struct srv_req *r, int i, char *buf, size_t n)
{
	snprintf(buf, n, "call_%s_%d", r->id + 5, i);
}

static json_t *resp_item(struct srv_req *r, int kind, int k, const char *text, size_t len, int tool, int done)
{
	char id[96], cid[48];
	item_id(r, kind, k, id, sizeof id);
	if (kind == 1)
		return json_pack("{s:s, s:s, s:[], s:[{s:s, s:s%}]}", "type", "reasoning", "id", id, "summary", "content",
				 "type", "reasoning_text", "text", text, len);
	if (kind == 2)
		return done ? json_pack("{s:s, s:s, s:s, s:s, s:[{s:s, s:s%, s:[]}]}", "type", "message", "id", id, "status",
					"completed", "role", "assistant", "content", "type", "output_text", "text", text, len,
					"annotations")
			    : json_pack("{s:s, s:s, s:s, s:s, s:[]}", "type", "message", "id", id, "status", "in_progress",
					"role", "assistant", "content");
	call_id(r, tool, cid, sizeof cid);
	return json_pack("{s:s, s:s, s:s, s:s, s:s%, s:s}", "type", "function_call", "id", id, "call_id", cid, "name",
			 call_name(r, tool), "arguments", done && r->tool[tool].p ? r->tool[tool].p : "",
			 done ? r->tool[tool].len : 0, "status", done ? "completed" : "in_progress");
}

/* The response object: its output items (NULL: none yet), status. */
static json_t *resp_obj(struct srv *s, struct srv_req *r, const char *status, json_t *output, const char *reason)
{
	json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:n, s:n, s:b, s:s, s:[], s:s}", "id", r->id, "object",
			      "response", "created_at", (json_int_t)r->created, "status", status, "model", s->model_name,
			      "output", output ? output : json_array(), "error", "previous_response_id",
			      "parallel_tool_calls", 1, "tool_choice", "auto", "tools", "truncation", "disabled");
	if (!j)
		return NULL;
	json_object_set_new(j, "incomplete_details",
			    reason && strcmp(reason, "length") == 0 ? json_pack("{s:s}", "reason", "max_output_tokens")
								    : json_null());
	if (reason)
		json_object_set_new(j, "usage",
				    json_pack("{s:i, s:{s:i}, s:i, s:{s:i}, s:i}", "input_tokens", r->n_prompt,
					      "input_tokens_details", "cached_tokens", r->n_cached, "output_tokens", r->n_gen,
					      "output_tokens_details", "reasoning_tokens", 0, "total_tokens",
					      r->n_prompt + r->n_gen));
	return j;
}

/* Closes the open output item of the stream (its done events). */
static void resp_close(struct srv_req *r)
{
	char id[96];
	const int k = r->n_blocks - 1;
	if (!r->block)
		return;
	const struct sbuf *b = r->block == 1 ? &r->reasoning : &r->content;
	const char *t = b->p ? b->p + r->item_off : "";
	const size_t n = b->len - r->item_off;
	item_id(r, r->block, k, id, sizeof id);
	if (r->block == 1) {
		resp_event(r, "response.reasoning_text.done",
			   json_pack("{s:s, s:i, s:i, s:s%}", "item_id", id, "output_index", k, "content_index", 0, "text", t, n));
	} else {
		resp_event(r, "response.output_text.done",
			   json_pack("{s:s, s:i, s:i, s:s%, s:[]}", "item_id", id, "output_index", k, "content_index", 0,
				     "text", t, n, "logprobs"));
		resp_event(r, "response.content_part.done",
			   json_pack("{s:s, s:i, s:i, s:{s:s, s:s%, s:[]}}", "item_id", id, "output_index", k, "content_index",
				     0, "part", "type", "output_text", "text", t, n, "annotations"));
	}
	json_t *item = resp_item(r, r->block, k, t, n, 0, 1);
	if (r->n_items < SRV_MAX_ITEMS) { /* kept for the final response */
		r->items[r->n_items++] = json_incref(item);
	}
	resp_event(r, "response.output_item.done", json_pack("{s:i, s:o}", "output_index", k, "item", item));
	r->block = 0;
}

static void resp_delta(struct srv *s, struct srv_req *r, enum hs_reply_kind kind, const char *text, size_t len)
{
	char id[96];
	if (!r->role_sent) {
		r->role_sent = 1;
		resp_event(r, "response.created", json_pack("{s:o}", "response", resp_obj(s, r, "in_progress", NULL, NULL)));
		resp_event(r, "response.in_progress",
			   json_pack("{s:o}", "response", resp_obj(s, r, "in_progress", NULL, NULL)));
	}
	if (!len)
		return;
	const int want = kind == HS_REPLY_REASONING ? 1 : 2;
	struct sbuf *b = want == 1 ? &r->reasoning : &r->content;
	if (r->block != want) {
		resp_close(r);
		r->block = want;
		r->item_off = b->len;
		const int k = r->n_blocks++;
		item_id(r, want, k, id, sizeof id);
		resp_event(r, "response.output_item.added",
			   json_pack("{s:i, s:o}", "output_index", k, "item",
				     want == 1 ? json_pack("{s:s, s:s, s:[], s:[]}", "type", "reasoning", "id", id, "summary",
							   "content")
					       : resp_item(r, 2, k, "", 0, 0, 0)));
		if (want == 2)
			resp_event(r, "response.content_part.added",
				   json_pack("{s:s, s:i, s:i, s:{s:s, s:s, s:[]}}", "item_id", id, "output_index", k,
					     "content_index", 0, "part", "type", "output_text", "text", "", "annotations"));
	}
	hs_srv_sbuf_add(b, text, len); /* the done events and the final response give the whole text */
	item_id(r, want, r->n_blocks - 1, id, sizeof id);
	if (want == 1)
		resp_event(r, "response.reasoning_text.delta",
			   json_pack("{s:s, s:i, s:i, s:s%}", "item_id", id, "output_index", r->n_blocks - 1,
				     "content_index", 0, "delta", text, len));
	else
		resp_event(r, "response.output_text.delta",
			   json_pack("{s:s, s:i, s:i, s:s%, s:[]}", "item_id", id, "output_index", r->n_blocks - 1,
				     "content_index", 0, "delta", text, len, "logprobs"));
}

/* Keeps the conversation with this answer as an assistant message, its
 * calls under the call ids the answer gave them (store.c). */
static void resp_keep(struct srv_req *r)
{
	json_t *m = r->conv ? json_pack("{s:s, s:s%}", "role", "assistant", "content", r->content.p ? r->content.p : "",
					r->content.len)
			    : NULL;
	char cid[48];
	if (!m)
		return;
	if (r->reasoning.len)
		json_object_set_new(m, "reasoning_content", json_stringn(r->reasoning.p, r->reasoning.len));
	json_t *calls = r->n_tool ? json_array() : NULL;
	for (int i = 0; calls && i < r->n_tool; i++) {
		call_id(r, i, cid, sizeof cid);
		json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s%}}", "id", cid, "type", "function",
						       "function", "name", call_name(r, i), "arguments",
						       r->tool[i].p ? r->tool[i].p : "", r->tool[i].len));
	}
	if (calls)
		json_object_set_new(m, "tool_calls", calls);
	json_array_append_new(r->conv, m);
	hs_srv_store_put(r->id, r->conv);
}

static void resp_finish(struct srv *s, struct srv_req *r, const char *reason)
{
	const char *status = strcmp(reason, "length") == 0 ? "incomplete" : "completed";
	json_t *out = json_array();
	char id[96];

	resp_keep(r);

	if (!r->stream) {
		int k = 0;
		if (r->reasoning.len)
			json_array_append_new(out, resp_item(r, 1, k++, r->reasoning.p, r->reasoning.len, 0, 1));
		if (r->content.len || (!r->n_tool && !r->reasoning.len))
			json_array_append_new(out, resp_item(r, 2, k++, r->content.p ? r->content.p : "", r->content.len,
							     0, 1));
		for (int i = 0; i < r->n_tool; i++)
			json_array_append_new(out, resp_item(r, 3, k++, NULL, 0, i, 1));
		put(r, NULL, resp_obj(s, r, status, out, reason));
		return;
	}
	resp_delta(s, r, HS_REPLY_CONTENT, "", 0); /* response.created, if nothing came before */
	resp_close(r);
	for (int i = 0; i < r->n_items; i++)
		json_array_append_new(out, r->items[i]);
	r->n_items = 0;
	for (int i = 0; i < r->n_tool; i++) {
		const int k = r->n_blocks++;
		item_id(r, 3, k, id, sizeof id);
		resp_event(r, "response.output_item.added",
			   json_pack("{s:i, s:o}", "output_index", k, "item", resp_item(r, 3, k, NULL, 0, i, 0)));
		resp_event(r, "response.function_call_arguments.delta",
			   json_pack("{s:s, s:i, s:s%}", "item_id", id, "output_index", k, "delta",
				     r->tool[i].p ? r->tool[i].p : "", r->tool[i].len));
		resp_event(r, "response.function_call_arguments.done",
			   json_pack("{s:s, s:i, s:s%}", "item_id", id, "output_index", k, "arguments",
				     r->tool[i].p ? r->tool[i].p : "", r->tool[i].len));
		json_t *item = resp_item(r, 3, k, NULL, 0, i, 1);
		json_array_append(out, item);
		resp_event(r, "response.output_item.done", json_pack("{s:i, s:o}", "output_index", k, "item", item));
	}
	/* response.completed also when cut at max_output_tokens (the response
	 * says "incomplete"): the official client's stream helper waits for it */
	resp_event(r, "response.completed", json_pack("{s:o}", "response", resp_obj(s, r, status, out, reason)));
}

void hs_srv_emit_delta(struct srv *s, struct srv_req *r, enum hs_reply_kind kind, const char *text, size_t len)
{
	if (r->api == SRV_API_RESPONSES && r->stream) {
		resp_delta(s, r, kind, text, len);
		return;
	}
	if (!r->stream) {
		hs_srv_sbuf_add(kind == HS_REPLY_REASONING ? &r->reasoning : &r->content, text, len);
		return;
	}
	if (r->api == SRV_API_MESSAGES) {
		msg_delta(s, r, kind, text, len);
		return;
	}
	if (r->chat && !r->role_sent) {
		r->role_sent = 1;
		chunk(s, r, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL, NULL);
	}
	if (!len)
		return;
	json_t *t = json_stringn(text, len), *lp = kind == HS_REPLY_CONTENT ? lp_next(s, r) : NULL;
	if (r->chat)
		chunk(s, r, json_pack("{s:o}", kind == HS_REPLY_REASONING ? "reasoning_content" : "content", t), lp, NULL);
	else
		chunk(s, r, t, lp, NULL);
}

/* n_gen: the tokens of every choice (the prompt is read once) */
static json_t *usage_of(struct srv_req *r, int n_gen)
{
	return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", r->n_prompt, "completion_tokens", n_gen,
			 "total_tokens", r->n_prompt + n_gen, "prompt_tokens_details", "cached_tokens", r->n_cached);
}

static json_t *usage(struct srv_req *r)
{
	return usage_of(r, r->n_gen);
}

/* llama-server's "timings": wall time of this request's prompt chunks and
 * of its generation (shared with the other sequences of each step) */
static json_t *timings(struct srv_req *r)
{
	double pms = r->t_prompt1 > r->t_prompt0 ? (r->t_prompt1 - r->t_prompt0) * 1e3 : 0;
	double gms = r->t_end > r->t_prompt1 && r->t_prompt1 > 0 ? (r->t_end - r->t_prompt1) * 1e3 : 0;
	const int pn = r->n_prompt - r->n_cached; /* what was prefilled; cache_n came from an earlier request */
	return json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", r->n_cached, "prompt_n", pn,
			 "prompt_ms", pms, "prompt_per_token_ms", pn ? pms / pn : 0, "prompt_per_second",
			 pms > 0 ? pn * 1e3 / pms : 0, "predicted_n", r->n_gen, "predicted_ms", gms,
			 "predicted_per_token_ms", r->n_gen ? gms / r->n_gen : 0, "predicted_per_second",
			 gms > 0 ? r->n_gen * 1e3 / gms : 0);
}

/* ---- tool calls ------------------------------------------------------------- */



void hs_srv_free_tools(struct srv_req *r)
{
	for (int i = 0; i < SRV_MAX_CALLS; i++) {
		hs_srv_sbuf_free(&r->tool[i]);
		r->tool_head[i] = 0;
		r->tool_sent[i] = 0;
	}
	r->n_tool = 0;
}

/* Tool call i as an OpenAI tool_calls entry: the parser names the function
 * (harmony's recipient "functions.NAME", ChatML's "name"; "" when it has
 * none) and its text is the arguments.  Streamed (index >= 0): the call's
 * first chunk has index, id, type, the name and arguments ""; args_only
 * gives the next one, the arguments under the same index. */
static json_t *tool_call(struct srv *s, struct srv_req *r, int i, int index, int args_only)
{
	const char *name = r->rp ? hs_reply_parser_tool_name_at(r->rp, i) : NULL;
	const char *args = r->tool[i].p ? r->tool[i].p : "";
	char id[48];

	if (args_only) /* the arguments not streamed yet */
		return json_pack("{s:i, s:{s:s%}}", "index", index, "function", "arguments", args + r->tool_sent[i],
				 r->tool[i].len - r->tool_sent[i]);
	if (name && strncmp(name, "functions.", 10) == 0)
		name += 10;
	hs_srv_random_id(s, "call_", id, sizeof id);
	if (index >= 0)
		return json_pack("{s:i, s:s, s:s, s:{s:s, s:s}}", "index", index, "id", id, "type", "function", "function",
				 "name", name ? name : "", "arguments", "");
	return json_pack("{s:s, s:s, s:{s:s, s:s%}}", "id", id, "type", "function", "function", "name",
			 name ? name : "", "arguments", args, r->tool[i].len);
}

/* Streams what call i has that was not sent: its head once the parser
 * knows its name (or at the end: last), then its new argument text. */
static void stream_call(struct srv *s, struct srv_req *r, int i, int last)
{
	if (!r->tool_head[i]) {
		if (!last && !(r->rp && hs_reply_parser_tool_name_at(r->rp, i)))
			return;
		chunk(s, r, json_pack("{s:[o]}", "tool_calls", tool_call(s, r, i, i, 0)), NULL, NULL);
		r->tool_head[i] = 1;
	}
	if (r->tool[i].len > r->tool_sent[i]) {
		chunk(s, r, json_pack("{s:[o]}", "tool_calls", tool_call(s, r, i, i, 1)), NULL, NULL);
		r->tool_sent[i] = r->tool[i].len;
	}
}

/* Messages: call i's tool_use block opens once its name is known and its
 * text begins as a JSON object does; its input then streams as
 * input_json_delta as it is written.  A call whose text begins otherwise
 * comes whole at the end (msg_finish), its input call_input()'s. */
static void msg_stream_call(struct srv *s, struct srv_req *r, int i)
{
	char id[48];
	if (!r->tool_head[i]) {
		size_t k = 0;
		while (k < r->tool[i].len && strchr(" \t\r\n", r->tool[i].p[k]))
			k++;
		if (!(r->rp && hs_reply_parser_tool_name_at(r->rp, i)) || k == r->tool[i].len || r->tool[i].p[k] != '{')
			return;
		msg_delta(s, r, HS_REPLY_CONTENT, "", 0); /* message_start, if nothing came before */
		block_stop(r);
		hs_srv_random_id(s, "toolu_", id, sizeof id);
		event(r, "content_block_start",
		      json_pack("{s:s, s:i, s:{s:s, s:s, s:s, s:{}}}", "type", "content_block_start", "index", r->n_blocks,
				"content_block", "type", "tool_use", "id", id, "name", call_name(r, i), "input"));
		r->n_blocks++;
		r->block = 3; /* a tool_use block: any other text closes it */
		r->tool_head[i] = 1;
	}
	if (r->block == 3 && r->tool[i].len > r->tool_sent[i]) {
		event(r, "content_block_delta",
		      json_pack("{s:s, s:i, s:{s:s, s:s%}}", "type", "content_block_delta", "index", r->n_blocks - 1, "delta",
				"type", "input_json_delta", "partial_json", r->tool[i].p + r->tool_sent[i],
				r->tool[i].len - r->tool_sent[i]));
		r->tool_sent[i] = r->tool[i].len;
	}
}

void hs_srv_add_tool(struct srv *s, struct srv_req *r, int index, const char *text, size_t len)
{
	if (index < 0 || index >= SRV_MAX_CALLS)
		return;
	hs_srv_sbuf_add(&r->tool[index], text, len);
	if (r->n_tool < index + 1)
		r->n_tool = index + 1;
	/* OpenAI and Messages stream each call as it is written: the head,
	 * then argument text (the Responses API sends its items whole) */
	if (r->stream && r->chat && r->api == SRV_API_OPENAI && !r->tool[index].err) {
		if (!r->role_sent)
			hs_srv_emit_delta(s, r, HS_REPLY_CONTENT, "", 0);
		stream_call(s, r, index, 0);
	} else if (r->stream && r->api == SRV_API_MESSAGES && !r->tool[index].err) {
		msg_stream_call(s, r, index);
	}
}

/* All calls, for a whole answer's message. */
static json_t *tool_calls(struct srv *s, struct srv_req *r)
{
	json_t *a = json_array();
	for (int i = 0; a && i < r->n_tool; i++)
		json_array_append_new(a, tool_call(s, r, i, -1, 0));
	return a;
}

void hs_srv_emit_finish(struct srv *s, struct srv_req *r, const char *reason)
{
	if (r->api == SRV_API_MESSAGES) {
		msg_finish(s, r, reason);
		return;
	}
	if (r->api == SRV_API_RESPONSES) {
		resp_finish(s, r, reason);
		return;
	}
	if (r->stream) {
		if (r->chat && !r->role_sent)
			hs_srv_emit_delta(s, r, HS_REPLY_CONTENT, "", 0);
		/* what the calls hold that was not streamed yet */
		for (int i = 0; r->chat && i < r->n_tool; i++)
			stream_call(s, r, i, 1);
		/* the last choice chunk carries finish_reason (and timings) */
		json_t *j = head(s, r, r->chat ? "chat.completion.chunk" : "text_completion");
		json_t *c = r->chat ? json_pack("{s:i, s:{}, s:o, s:s}", "index", r->choice, "delta", "logprobs", lp_next(s, r),
						"finish_reason", reason)
				    : json_pack("{s:i, s:s, s:o, s:s}", "index", r->choice, "text", "", "logprobs", lp_next(s, r),
						"finish_reason", reason);
		if (j && c) {
			json_object_set_new(j, "choices", json_pack("[o]", c));
			json_object_set_new(j, "timings", timings(r));
			if (r->return_tokens) {
				json_t *ids = json_array();
				for (int i = 0; i < r->n_gen; i++)
					json_array_append_new(ids, json_integer(r->gen[i]));
				json_object_set_new(j, "tokens", ids);
			}
			sse(r, j);
		} else {
			json_decref(j);
			json_decref(c);
			r->pend.err = 1;
		}
		if (r->n_choices > 1) /* the lead ends the stream once all ended */
			return;
		if (r->include_usage) {
			json_t *u = head(s, r, r->chat ? "chat.completion.chunk" : "text_completion");
			if (u) {
				json_object_set_new(u, "choices", json_array());
				json_object_set_new(u, "usage", usage(r));
			}
			sse(r, u);
		}
		hs_srv_sbuf_add(&r->pend, "data: [DONE]\n\n", 14);
		return;
	}
	json_t *j = head(s, r, r->chat ? "chat.completion" : "text_completion"), *c;
	if (r->chat) {
		json_t *msg = json_pack("{s:s}", "role", "assistant");
		if (msg) {
			json_object_set_new(msg, "content", r->n_tool && !r->content.len ? json_null()
							    : json_stringn(r->content.p ? r->content.p : "",
									   r->content.len));
			if (r->reasoning.len)
				json_object_set_new(msg, "reasoning_content",
						    json_stringn(r->reasoning.p, r->reasoning.len));
			if (r->n_tool)
				json_object_set_new(msg, "tool_calls", tool_calls(s, r));
		}
		c = json_pack("{s:i, s:o, s:o, s:s}", "index", r->choice, "message", msg, "logprobs",
			      r->lp_on ? lp_chat(s, r, 0, r->lp_n) : json_null(), "finish_reason", reason);
	} else {
		c = json_pack("{s:i, s:s%, s:o, s:s}", "index", r->choice, "text", r->content.p ? r->content.p : "",
			      r->content.len, "logprobs", r->lp_on ? lp_text(s, r, 0, r->lp_n) : json_null(),
			      "finish_reason", reason);
	}
	if (c && r->return_tokens) {
		json_t *ids = json_array();
		for (int i = 0; i < r->n_gen; i++)
			json_array_append_new(ids, json_integer(r->gen[i]));
		json_object_set_new(c, "tokens", ids);
	}
	if (r->n_choices > 1) { /* kept for the lead's answer */
		json_decref(j);
		if (!c)
			r->pend.err = 1;
		r->choice_obj = c;
		return;
	}
	if (j && c) {
		json_object_set_new(j, "choices", json_pack("[o]", c));
		json_object_set_new(j, "usage", usage(r));
		json_object_set_new(j, "timings", timings(r));
	} else {
		json_decref(c);
		json_decref(j);
		j = NULL;
	}
	put(r, NULL, j);
}

void hs_srv_emit_group_end(struct srv *s, struct srv_req *L)
{
	int n_gen = 0;
	for (int i = 0; i < L->n_choices; i++)
		n_gen += L->group[i]->n_gen;
	if (L->stream) {
		if (L->include_usage) {
			json_t *u = head(s, L, L->chat ? "chat.completion.chunk" : "text_completion");
			if (u) {
				json_object_set_new(u, "choices", json_array());
				json_object_set_new(u, "usage", usage_of(L, n_gen));
			}
			sse(L, u);
		}
		hs_srv_sbuf_add(&L->pend, "data: [DONE]\n\n", 14);
		return;
	}
	json_t *j = head(s, L, L->chat ? "chat.completion" : "text_completion"), *cs = json_array();
	for (int i = 0; i < L->n_choices && cs; i++) {
		struct srv_req *c = L->group[i];
		if (!c->choice_obj || json_array_append_new(cs, c->choice_obj)) {
			json_decref(cs);
			cs = NULL;
		}
		c->choice_obj = NULL;
	}
	if (j && cs) {
		json_object_set_new(j, "choices", cs);
		json_object_set_new(j, "usage", usage_of(L, n_gen));
		json_object_set_new(j, "timings", timings(L));
	} else {
		json_decref(cs);
		json_decref(j);
		j = NULL;
	}
	put(L, NULL, j);
}

void hs_srv_emit_error(struct srv *s, struct srv_req *r, int status, const char *type, const char *msg)
{
	(void)s;
	char *e = hs_srv_error_json(status, type, NULL, NULL, "%s", msg);
	if (!e) {
		r->pend.err = 1;
		return;
	}
	if (r->stream && r->api == SRV_API_RESPONSES) {
		resp_event(r, "error", json_pack("{s:s, s:s, s:n}", "code", status >= 500 ? "server_error" : "invalid_request",
						 "message", msg, "param"));
	} else if (r->stream && r->api == SRV_API_MESSAGES) { /* Anthropic's error event */
		json_t *j = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "type",
				      status == 503 ? "overloaded_error" : status >= 500 ? "api_error" : "invalid_request_error",
				      "message", msg);
		event(r, "error", j);
	} else if (r->stream) {
		hs_srv_sbuf_add(&r->pend, "data: ", 6);
		hs_srv_sbuf_add(&r->pend, e, strlen(e));
		hs_srv_sbuf_add(&r->pend, "\n\ndata: [DONE]\n\n", 16);
	} else {
		r->pend.len = 0;
		hs_srv_sbuf_add(&r->pend, e, strlen(e));
	}
	free(e);
}

char *hs_srv_models_json(struct srv *s)
{
	pthread_mutex_lock(&s->mu);
	json_t *meta = s->model_meta ? json_loads(s->model_meta, 0, NULL) : json_null();
	pthread_mutex_unlock(&s->mu);
	json_t *j = json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:o}]}", "object", "list", "data", "id", s->model_name,
			      "object", "model", "created", (json_int_t)s->started, "owned_by", "hotset", "meta",
			      meta ? meta : json_null());
	char *t = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return t;
}

/* ---- /metrics ---------------------------------------------------------------------- */

static const char *const route_names[SRV_N_ROUTES] = {
	"/", "/health", "/v1/models", "/v1/chat/completions", "/v1/completions", "/metrics", "other", "/v1/messages",
	"/v1/messages/count_tokens", "/v1/responses"
};
const int hs_srv_http_codes[SRV_N_CODES] = { 200, 204, 400, 401, 404, 405, 408, 413, 431, 500, 501, 503, 505 };

static void metric(struct sbuf *b, const char *name, const char *type, const char *help, double v)
{
	hs_srv_sbuf_addf(b, "# HELP hotset_%s %s\n# TYPE hotset_%s %s\nhotset_%s %.10g\n", name, help, name, type, name, v);
}

/* Resident memory of this process in bytes (0 when /proc cannot say). */
static double rss_bytes(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long size = 0, res = 0;
	if (!f)
		return 0;
	if (fscanf(f, "%lu %lu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return (double)res * 4096;
}

/* The sanitizer runtimes define this; in other builds it is NULL. */
extern size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

/* Bytes the process's allocations hold now (allocated and not freed): the
 * sanitizer's own count in a sanitizer build (its allocator replaces
 * glibc's, and resident memory there also holds the tool's shadow and
 * stacks), else glibc's; 0 where neither can say. */
static double heap_bytes(void)
{
	if (__sanitizer_get_current_allocated_bytes)
		return (double)__sanitizer_get_current_allocated_bytes();
#ifdef HAVE_MALLINFO2
	struct mallinfo2 mi = mallinfo2();
	return (double)(mi.uordblks + mi.hblkhd);
#else
	return 0;
#endif
}

char *hs_srv_metrics_text(struct srv *s)
{
	struct sbuf b = { 0 };
	struct srv_metrics m;

	pthread_mutex_lock(&s->mu);
	m = s->m;
	int q = s->q_len, ready = s->state == SRV_READY;
	pthread_mutex_unlock(&s->mu);

	hs_srv_sbuf_addf(&b, "# HELP hotset_http_requests_total HTTP requests answered, by route and status.\n"
			  "# TYPE hotset_http_requests_total counter\n");
	for (int i = 0; i < SRV_N_ROUTES; i++)
		for (int c = 0; c < SRV_N_CODES; c++)
			if (m.http[i][c])
				hs_srv_sbuf_addf(&b, "hotset_http_requests_total{route=\"%s\",code=\"%d\"} %ld\n",
					      route_names[i], hs_srv_http_codes[c], m.http[i][c]);
	hs_srv_sbuf_addf(&b, "# HELP hotset_requests_finished_total Completions ended, by how.\n"
			  "# TYPE hotset_requests_finished_total counter\n"
			  "hotset_requests_finished_total{reason=\"stop\"} %ld\n"
			  "hotset_requests_finished_total{reason=\"length\"} %ld\n"
			  "hotset_requests_finished_total{reason=\"tool_calls\"} %ld\n"
			  "hotset_requests_finished_total{reason=\"cancelled\"} %ld\n"
			  "hotset_requests_finished_total{reason=\"error\"} %ld\n",
		      m.finished_stop, m.finished_length, m.finished_tool, m.cancelled, m.failed);
	metric(&b, "prompt_tokens_total", "counter", "Prompt tokens read (requests that ended).",
	       (double)m.prompt_tokens);
	metric(&b, "prompt_tokens_cached_total", "counter",
	       "Prompt tokens not prefilled: an earlier request's KV cells held them (requests that ended).",
	       (double)m.prompt_tokens_cached);
	metric(&b, "prompt_tokens_forked_total", "counter",
	       "Prompt tokens not prefilled: the choices of n > 1 after the first copied the first's KV cells.",
	       (double)m.prompt_tokens_forked);
	metric(&b, "completion_tokens_total", "counter", "Tokens generated (requests that ended).",
	       (double)m.completion_tokens);
	metric(&b, "requests_running", "gauge", "Sequences held by running requests (n choices hold n).", m.busy);
	metric(&b, "requests_queued", "gauge", "Requests waiting for a sequence.", q);
	metric(&b, "queue_limit", "gauge", "Requests that may wait (--max-queue).", s->o.max_queue);
	metric(&b, "sequences", "gauge", "Sequences decoded together (--parallel).", s->o.parallel);
	metric(&b, "prefill_tokens_seconds", "gauge", "Prompt tokens per second over the forward steps so far.",
	       m.ctx_prompt_s > 0 ? m.ctx_prompt_tokens / m.ctx_prompt_s : 0);
	metric(&b, "decode_tokens_seconds", "gauge",
	       "Generated tokens per second over the decode steps so far (all sequences together).",
	       m.ctx_decode_s > 0 ? m.ctx_decode_tokens / m.ctx_decode_s : 0);
	metric(&b, "prefill_tokens_total", "counter", "Tokens in prompt forward steps.", (double)m.ctx_prompt_tokens);
	metric(&b, "prefill_seconds_total", "counter", "Seconds in prompt forward steps.", m.ctx_prompt_s);
	metric(&b, "decode_tokens_total", "counter", "Tokens in decode forward steps.", (double)m.ctx_decode_tokens);
	metric(&b, "decode_seconds_total", "counter", "Seconds in decode forward steps.", m.ctx_decode_s);
	metric(&b, "moe_hit_share", "gauge", "Share of routed experts computed on the device (0 without one).",
	       m.moe_hit_share);
	metric(&b, "moe_routed_pairs_total", "counter", "Routed (token, expert) pairs.", (double)m.moe_pairs);
	metric(&b, "kv_cells_used", "gauge", "KV cache positions held by running requests, summed over sequences.",
	       (double)m.kv_cells_used);
	metric(&b, "kv_cells_cached", "gauge",
	       "KV cache positions finished requests left in idle sequences for prompts that start alike.",
	       (double)m.kv_cells_cached);
	metric(&b, "kv_cells_total", "gauge", "KV cache positions in all (sequences x context).",
	       (double)m.kv_cells_total);
	metric(&b, "kv_cache_bytes", "gauge", "Memory of the KV cache.", (double)m.kv_bytes);
	metric(&b, "ready", "gauge", "1 once the model is loaded.", ready);
	metric(&b, "process_resident_memory_bytes", "gauge", "Resident memory of the server process.", rss_bytes());
	metric(&b, "heap_bytes", "gauge", "Heap memory the server's allocations hold now (allocated, not freed).",
	       heap_bytes());
	if (b.err) {
		hs_srv_sbuf_free(&b);
		return NULL;
	}
	return b.p;
}
