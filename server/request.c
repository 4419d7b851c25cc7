/* Requests in: a /v1/chat/completions or /v1/completions body checked
 * field by field into a request (a wrong type or value is a 400 naming the
 * field; unknown fields are ignored), its prompt rendered through the chat
 * format and tokenized, refused before any work when it cannot fit the
 * context. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

static int bad(struct srv_err *e, const char *param, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int bad(struct srv_err *e, const char *param, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	e->status = 400;
	e->body = hs_srv_error_json_v(400, "invalid_request_error", param, code, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---- request fields ------------------------------------------------------------- */

/* A field that is absent or null is left as it is. */
static int get_bool(json_t *o, const char *key, int *out, struct srv_err *e)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return bad(e, key, "invalid_type", "%s: true or false is needed", key);
	*out = json_is_true(v);
	return 0;
}

static int get_num(json_t *o, const char *key, double lo, double hi, float *out, struct srv_err *e)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return bad(e, key, "invalid_type", "%s: a number is needed", key);
	double d = json_number_value(v);
	if (!(d >= lo && d <= hi))
		return bad(e, key, "invalid_value", "%s: %g is outside %g..%g", key, d, lo, hi);
	*out = (float)d;
	return 0;
}

static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out, int *given,
		   struct srv_err *e)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v))
		return bad(e, key, "invalid_type", "%s: an integer is needed", key);
	long long x = json_integer_value(v);
	if (x < lo || x > hi)
		return bad(e, key, "invalid_value", "%s: %lld is outside %lld..%lld", key, x, lo, hi);
	*out = x;
	if (given)
		*given = 1;
	return 0;
}

static int get_stop(json_t *o, struct srv_req *r, struct srv_err *e)
{
	json_t *v = json_object_get(o, "stop");
	const int max = (int)(sizeof r->stop / sizeof r->stop[0]);

	if (!v || json_is_null(v))
		return 0;
	if (json_is_string(v)) {
		if (!json_string_length(v))
			return 0;
		if (json_string_length(v) > 256)
			return bad(e, "stop", "invalid_value", "stop: a string of %zu bytes (at most 256)",
				   json_string_length(v));
		return (r->stop[r->n_stop++] = strdup(json_string_value(v))) ? 0 : bad(e, "stop", NULL, "out of memory");
	}
	if (!json_is_array(v))
		return bad(e, "stop", "invalid_type", "stop: a string or an array of strings is needed");
	if ((int)json_array_size(v) > max)
		return bad(e, "stop", "invalid_value", "stop: %zu strings (at most %d)", json_array_size(v), max);
	size_t i;
	json_t *x;
	json_array_foreach(v, i, x) {
		if (!json_is_string(x))
			return bad(e, "stop", "invalid_type", "stop[%zu]: a string is needed", i);
		size_t n = json_string_length(x);
		if (n > 256)
			return bad(e, "stop", "invalid_value", "stop[%zu]: %zu bytes (at most 256)", i, n);
		if (n && strlen(json_string_value(x)) != n)
			return bad(e, "stop", "invalid_value", "stop[%zu]: contains U+0000", i);
		if (n && !(r->stop[r->n_stop++] = strdup(json_string_value(x))))
			return bad(e, "stop", NULL, "out of memory");
	}
	return 0;
}

/* A message's content: a string, null, or an array of {"type": "text",
 * "text": ...} parts (joined with newlines).  *out is malloc'd. */
static int get_content(json_t *m, size_t idx, char **out, struct srv_err *e)
{
	json_t *c = json_object_get(m, "content");
	struct sbuf b = { 0 };
	size_t i;
	json_t *part;

	*out = NULL;
	if (!c || json_is_null(c))
		return 0;
	if (json_is_string(c)) {
		hs_srv_sbuf_add(&b, json_string_value(c), json_string_length(c));
	} else if (json_is_array(c)) {
		json_array_foreach(c, i, part) {
			const char *type = json_string_value(json_object_get(part, "type"));
			json_t *text = json_object_get(part, "text");
			if (!json_is_object(part) || !type) {
				hs_srv_sbuf_free(&b); /* the parts before this one */
				return bad(e, "messages", "invalid_type",
					   "messages[%zu].content[%zu]: an object with a \"type\" is needed", idx, i);
			}
			if (strcmp(type, "text") || !json_is_string(text)) {
				hs_srv_sbuf_free(&b);
				return bad(e, "messages", "invalid_value",
					   "messages[%zu].content[%zu]: only text parts are supported (type \"%s\")",
					   idx, i, type);
			}
			if (b.len)
				hs_srv_sbuf_add(&b, "\n", 1);
			hs_srv_sbuf_add(&b, json_string_value(text), json_string_length(text));
		}
	} else {
		return bad(e, "messages", "invalid_type", "messages[%zu].content: a string, null or an array of parts",
			   idx);
	}
	if (b.err) {
		hs_srv_sbuf_free(&b);
		return bad(e, "messages", NULL, "out of memory");
	}
	*out = b.p ? b.p : strdup("");
	return *out ? 0 : bad(e, "messages", NULL, "out of memory");
}

/* A string field: absent or null gives NULL; another type is a 400. */
static int get_str(json_t *o, const char *key, const char **out, struct srv_err *e, const char *param, const char *where,
		   size_t idx)
{
	json_t *v = json_object_get(o, key);
	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return where ? bad(e, param, "invalid_type", "%s[%zu].%s: a string is needed", where, idx, key)
			     : bad(e, param, "invalid_type", "%s: a string is needed", key);
	*out = json_string_value(v);
	return 0;
}

/* tools (OpenAI's array of {"type": "function", "function": {...}}) as
 * JSON text for the chat format, unless tool_choice is "none"; *out NULL
 * when there are none.  "required" or a named function render the tools as
 * "auto" does; the call is forced by the reply's grammar (constrain.c).
 * parallel_tool_calls is accepted. */
static int get_tools(json_t *root, char **out, struct srv_err *e)
{
	json_t *tools = json_object_get(root, "tools"), *choice = json_object_get(root, "tool_choice");
	json_t *par = json_object_get(root, "parallel_tool_calls");
	int render = 1;

	*out = NULL;
	if (par && !json_is_null(par) && !json_is_boolean(par))
		return bad(e, "parallel_tool_calls", "invalid_type", "parallel_tool_calls: true or false is needed");
	if (json_is_string(choice)) {
		const char *c = json_string_value(choice);
		if (strcmp(c, "none") && strcmp(c, "auto") && strcmp(c, "required"))
			return bad(e, "tool_choice", "invalid_value",
				   "tool_choice: '%s' is not none, auto, required or {\"type\": \"function\", ...}", c);
		render = strcmp(c, "none") != 0;
	} else if (json_is_object(choice)) {
		if (!json_is_string(json_object_get(choice, "type")))
			return bad(e, "tool_choice", "invalid_value", "tool_choice: an object needs a \"type\"");
	} else if (choice && !json_is_null(choice)) {
		return bad(e, "tool_choice", "invalid_type", "tool_choice: a string or an object is needed");
	}
	if (!tools || json_is_null(tools))
		return 0;
	if (!json_is_array(tools))
		return bad(e, "tools", "invalid_type",
			   "tools: an array of {\"type\": \"function\", \"function\": {\"name\", \"description\", "
			   "\"parameters\"}} is needed");
	if (!render || !json_array_size(tools))
		return 0;
	/* the chat format checks each tool; key order is kept */
	if (!(*out = json_dumps(tools, 0)))
		return bad(e, "tools", NULL, "out of memory");
	return 0;
}

/* messages -> the prompt's ids through the chat format */
static int chat_prompt(struct srv *s, json_t *root, struct srv_req *r, struct srv_err *e)
{
	json_t *msgs = json_object_get(root, "messages");
	struct hs_chat_opts co = { .format = s->fmt };
	struct hs_chat_message *cm = NULL;
	char **texts = NULL, **argv = NULL, *tools = NULL;
	size_t n, i;
	json_t *m, *ids = NULL;
	int rc = -1;

	if (!msgs || json_is_null(msgs))
		return bad(e, "messages", "missing_field", "messages: missing (an array of {\"role\", \"content\"})");
	if (!json_is_array(msgs))
		return bad(e, "messages", "invalid_type", "messages: an array is needed");
	if (!(n = json_array_size(msgs)))
		return bad(e, "messages", "invalid_value", "messages: empty (at least one message is needed)");
	/* an assistant message with k tool calls becomes k chat messages (one
	 * turn of k calls in ChatML, k messages in harmony) */
	size_t n_out = 0, o = 0;
	json_array_foreach(msgs, i, m) {
		size_t k = json_array_size(json_object_get(m, "tool_calls"));
		n_out += k > 1 ? k : 1;
	}
	cm = calloc(n_out, sizeof *cm);
	texts = calloc(n_out, sizeof *texts);
	argv = calloc(n_out, sizeof *argv);
	if (!cm || !texts || !argv) {
		bad(e, NULL, NULL, "out of memory");
		goto out_free;
	}
	/* tool call id -> function name, of the calls seen so far (a tool
	 * message answers an earlier call): one hash lookup per message */
	ids = json_object();
	if (!ids) {
		bad(e, NULL, NULL, "out of memory");
		goto out_free;
	}
	json_array_foreach(msgs, i, m) {
		if (!json_is_object(m)) {
			bad(e, "messages", "invalid_type", "messages[%zu]: an object is needed", i);
			goto out_free;
		}
		json_t *rv = json_object_get(m, "role");
		const char *role = json_string_value(rv), *rsn, *rsn2, *call_id, *tname;
		if (!rv || json_is_null(rv)) {
			bad(e, "messages", "missing_field", "messages[%zu].role: missing (system, developer, user, assistant or tool)", i);
			goto out_free;
		}
		if (!role) {
			bad(e, "messages", "invalid_type", "messages[%zu].role: a string is needed", i);
			goto out_free;
		}
		if (get_str(m, "reasoning_content", &rsn, e, "messages", "messages", i) ||
		    get_str(m, "reasoning", &rsn2, e, "messages", "messages", i) ||
		    get_str(m, "tool_call_id", &call_id, e, "messages", "messages", i) ||
		    get_str(m, "name", &tname, e, "messages", "messages", i))
			goto out_free;
		if (get_content(m, i, &texts[o], e))
			goto out_free;
		cm[o].role = role;
		cm[o].content = texts[o];
		cm[o].reasoning = rsn ? rsn : rsn2;
		json_t *calls = json_object_get(m, "tool_calls"), *call;
		size_t k;
		if (calls && !json_is_null(calls) && !json_is_array(calls)) {
			bad(e, "messages", "invalid_type", "messages[%zu].tool_calls: an array is needed", i);
			goto out_free;
		}
		if (strcmp(role, "assistant") == 0 && json_array_size(calls)) {
			json_array_foreach(calls, k, call) {
				json_t *fn = json_object_get(call, "function");
				json_t *nv = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments");
				const char *name = json_string_value(nv), *cid;
				if (!json_is_object(call) || !json_is_object(fn)) {
					bad(e, "messages", "invalid_type",
					    "messages[%zu].tool_calls[%zu]: {\"function\": {\"name\", \"arguments\"}} is needed", i, k);
					goto out_free;
				}
				if (!nv || json_is_null(nv)) {
					bad(e, "messages", "invalid_value", "messages[%zu].tool_calls[%zu].function.name: missing",
					    i, k);
					goto out_free;
				}
				if (!name) {
					bad(e, "messages", "invalid_type",
					    "messages[%zu].tool_calls[%zu].function.name: a string is needed", i, k);
					goto out_free;
				}
				if (get_str(call, "id", &cid, e, "messages", "messages[].tool_calls", k))
					goto out_free;
				if (args && !json_is_null(args) && !json_is_string(args) && !json_is_object(args)) {
					bad(e, "messages", "invalid_type",
					    "messages[%zu].tool_calls[%zu].function.arguments: a JSON string (or an object) is needed",
					    i, k);
					goto out_free;
				}
				if (cid && json_object_set(ids, cid, nv)) {
					bad(e, NULL, NULL, "out of memory");
					goto out_free;
				}
				if (k > 0) /* the next call of the same turn: no text, no reasoning */
					cm[o] = (struct hs_chat_message){ .role = role };
				cm[o].tool_name = name;
				/* the arguments beside the turn's text (absent or null: the
				 * renderer writes "{}"; other types were refused above) */
				if ((json_is_string(args) || json_is_object(args)) &&
				    !(argv[o] = json_is_string(args) ? strdup(json_string_value(args))
								     : json_dumps(args, JSON_COMPACT))) {
					bad(e, NULL, NULL, "out of memory");
					goto out_free;
				}
				cm[o].arguments = argv[o];
				o++;
			}
			continue;
		}
		if (strcmp(role, "tool") == 0)
			cm[o].tool_name = tname ? tname : call_id ? json_string_value(json_object_get(ids, call_id)) : NULL;
		o++;
	}
	json_t *ev = json_object_get(root, "reasoning_effort");
	if (ev && !json_is_null(ev) && !json_is_string(ev)) {
		bad(e, "reasoning_effort", "invalid_type", "reasoning_effort: a string is needed (low, medium or high)");
		goto out_free;
	}
	const char *effort = json_string_value(ev), *kw_effort;
	json_t *kw = json_object_get(root, "chat_template_kwargs");
	if (kw && !json_is_null(kw) && !json_is_object(kw)) {
		bad(e, "chat_template_kwargs", "invalid_type", "chat_template_kwargs: an object is needed");
		goto out_free;
	}
	if (json_is_object(kw)) {
		int thinking = 1;
		if (get_str(kw, "reasoning_effort", &kw_effort, e, "chat_template_kwargs", NULL, 0) ||
		    get_bool(kw, "enable_thinking", &thinking, e))
			goto out_free;
		if (kw_effort)
			effort = kw_effort;
		co.no_thinking = !thinking;
	}
	co.reasoning_effort = effort;
	if (get_tools(root, &tools, e))
		goto out_free;
	co.tools_json = tools;
	if (hs_chat_tokenize(s->tok, cm, (int)o, &co, &r->prompt, &r->n_prompt)) {
		int in_tools = strncmp(hs_last_error(), "chat: tools", 11) == 0;
		if (in_tools) /* "tools[i]: ..." */
			bad(e, "tools", "invalid_value", "%s", hs_last_error() + 6);
		else if (strncmp(hs_last_error(), "chat: reasoning effort", 22) == 0)
			bad(e, "reasoning_effort", "invalid_value", "reasoning_effort: %s", hs_last_error() + 6);
		else
			bad(e, "messages", "invalid_value", "messages: %s", hs_last_error());
		goto out_free;
	}
	rc = 0;
out_free:
	json_decref(ids);
	free(tools);
	for (i = 0; texts && i < n_out; i++)
		free(texts[i]);
	for (i = 0; argv && i < n_out; i++)
		free(argv[i]);
	free(texts);
	free(argv);
	free(cm);
	return rc;
}

/* prompt: a string, token ids, or an array holding one of those */
static int text_prompt(struct srv *s, json_t *root, struct srv_req *r, struct srv_err *e)
{
	json_t *p = json_object_get(root, "prompt");

	if (!p || json_is_null(p))
		return bad(e, "prompt", "missing_field", "prompt: missing (a string or an array of token ids)");
	if (json_is_array(p) && json_array_size(p) == 1 && !json_is_integer(json_array_get(p, 0)))
		p = json_array_get(p, 0);
	if (json_is_string(p)) {
		size_t len = json_string_length(p);
		if (len > (size_t)0x7ffffff0)
			return bad(e, "prompt", "invalid_value", "prompt: too long");
		int cap = (int)len + 2;
		if (!(r->prompt = malloc(sizeof *r->prompt * (size_t)cap)))
			return bad(e, "prompt", NULL, "out of memory");
		int n = hs_tokenize(s->tok, json_string_value(p), len, HS_TOK_PARSE_SPECIAL | HS_TOK_ADD_BOS,
				    r->prompt, cap);
		if (n < 0 || n > cap)
			return bad(e, "prompt", "invalid_value", "prompt: %s", n < 0 ? hs_last_error() : "tokenizer");
		r->n_prompt = n;
	} else if (json_is_array(p)) {
		size_t n = json_array_size(p), i;
		json_t *x;
		if (n > (size_t)0x7ffffff0)
			return bad(e, "prompt", "invalid_value", "prompt: too long");
		if (n && !(r->prompt = malloc(sizeof *r->prompt * n)))
			return bad(e, "prompt", NULL, "out of memory");
		json_array_foreach(p, i, x) {
			if (!json_is_integer(x))
				return bad(e, "prompt", "invalid_type",
					   "prompt[%zu]: a token id is needed (one prompt per request: a string or "
					   "an array of ids)",
					   i);
			json_int_t id = json_integer_value(x);
			if (id < 0 || id >= s->n_vocab)
				return bad(e, "prompt", "invalid_value", "prompt[%zu]: token id %lld outside 0..%d", i,
					   (long long)id, s->n_vocab - 1);
			r->prompt[i] = (int32_t)id;
		}
		r->n_prompt = (int)n;
	} else {
		return bad(e, "prompt", "invalid_type", "prompt: a string or an array of token ids is needed");
	}
	if (!r->n_prompt)
		return bad(e, "prompt", "invalid_value", "prompt: empty (no tokens)");
	return 0;
}

static uint64_t random_seed(struct srv *s)
{
	char id[40];
	uint64_t h = 1469598103934665603u;
	hs_srv_random_id(s, "", id, sizeof id);
	for (const char *p = id; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211u;
	return h;
}

static int get_model(json_t *root, struct srv_err *e)
{
	const char *model;
	return get_str(root, "model", &model, e, "model", NULL, 0);
}

/* logprobs as OpenAI asks for them: chat, `logprobs` true and
 * `top_logprobs` 0..20 (which needs logprobs true); completions, `logprobs`
 * 0..20, the number of alternatives besides the chosen token. */
static int get_logprobs(json_t *root, int chat, struct srv_req *r, struct srv_err *e)
{
	json_t *lp = json_object_get(root, "logprobs");
	long long top = 0;
	int top_given = 0;

	if (chat) {
		if (get_bool(root, "logprobs", &r->lp_on, e) ||
		    get_int(root, "top_logprobs", 0, SRV_TOP_LOGPROBS, &top, &top_given, e))
			return -1;
		if (top_given && !r->lp_on)
			return bad(e, "top_logprobs", "invalid_value", "top_logprobs: needs \"logprobs\": true");
	} else if (lp && !json_is_null(lp)) {
		if (json_is_boolean(lp)) /* what the chat API takes: alternatives none */
			r->lp_on = json_is_true(lp);
		else if (get_int(root, "logprobs", 0, SRV_TOP_LOGPROBS, &top, &top_given, e))
			return -1;
		else
			r->lp_on = 1;
	}
	r->lp_top = (int)top;
	return 0;
}

static int parse_fields(struct srv *s, int chat, json_t *root, struct srv_req *r, struct srv_err *e)
{
	long long v = 0, seed = 0;
	int given = 0, seed_given = 0;
	json_t *so = json_object_get(root, "stream_options");

	r->chat = chat;
	r->cache_prompt = 1;
	if (get_model(root, e) || get_logprobs(root, chat, r, e))
		return -1;
	r->sp = (struct hs_sampler_params){ .temperature = 1, .top_k = 0, .top_p = 1, .min_p = 0 };
	if (get_bool(root, "stream", &r->stream, e) || get_bool(root, "ignore_eos", &r->ignore_eos, e) ||
	    get_bool(root, "return_tokens", &r->return_tokens, e) || get_bool(root, "cache_prompt", &r->cache_prompt, e))
		return -1;
	if (so && !json_is_null(so)) {
		if (!json_is_object(so))
			return bad(e, "stream_options", "invalid_type", "stream_options: an object is needed");
		if (get_bool(so, "include_usage", &r->include_usage, e))
			return -1;
	}
	if (get_num(root, "temperature", 0, 100, &r->sp.temperature, e) || get_num(root, "top_p", 0, 1, &r->sp.top_p, e) ||
	    get_num(root, "min_p", 0, 1, &r->sp.min_p, e))
		return -1;
	if (get_int(root, "top_k", -1, 1 << 30, &v, &given, e))
		return -1;
	r->sp.top_k = given && v > 0 ? (int)v : 0;
	if (get_int(root, "seed", INT64_MIN, INT64_MAX, &seed, &seed_given, e))
		return -1;
	r->sp.seed = seed_given ? (uint64_t)seed : random_seed(s);
	given = 0;
	if (get_int(root, "n", 1, 128, &v, &given, e))
		return -1;
	r->n_choices = given ? (int)v : 1;
	if (r->n_choices > s->o.parallel) /* every choice decodes in a sequence of its own */
		return bad(e, "n", "invalid_value", "n = %d choices need as many sequences; this server runs %d (--parallel)",
			   r->n_choices, s->o.parallel);
	if (get_stop(root, r, e))
		return -1;
	if (chat ? chat_prompt(s, root, r, e) : text_prompt(s, root, r, e))
		return -1;
	/* the answer's length: max_completion_tokens (the newer name) wins */
	long long max = 0;
	int max_given = 0;
	if (get_int(root, "max_tokens", 1, 1 << 30, &max, &max_given, e) ||
	    get_int(root, "max_completion_tokens", 1, 1 << 30, &max, &max_given, e))
		return -1;
	if (r->n_prompt >= s->n_ctx)
		return bad(e, chat ? "messages" : "prompt", "context_length_exceeded",
			   "the prompt is %d tokens, the context holds %d per sequence (--ctx): no room for an answer",
			   r->n_prompt, s->n_ctx);
	if (max_given && r->n_prompt + max > s->n_ctx)
		return bad(e, "max_tokens", "context_length_exceeded",
			   "%d prompt tokens + %lld max_tokens = %lld exceed the context of %d per sequence (--ctx)",
			   r->n_prompt, max, r->n_prompt + max, s->n_ctx);
	r->max_tokens = max_given ? (int)max : s->n_ctx - r->n_prompt;
	/* what the reply must hold to, compiled against the prompt's end; each
	 * choice of n > 1 follows its own copy (a matcher holds its state) */
	if (hs_srv_constrain(s, root, r, e))
		return -1;
	if (r->grammar && r->n_choices > 1) {
		hs_grammar *first = r->grammar;
		if (!(r->grammars = calloc((size_t)r->n_choices - 1, sizeof *r->grammars)))
			return bad(e, NULL, NULL, "out of memory");
		for (int i = 0; i < r->n_choices - 1; i++) {
			r->grammar = NULL;
			int rc = hs_srv_constrain(s, root, r, e);
			r->grammars[i] = r->grammar;
			if (rc) {
				r->grammar = first;
				return -1;
			}
		}
		r->grammar = first;
	}
	return 0;
}

struct srv_req *hs_srv_parse_json(struct srv *s, int chat, json_t *root, int *status, char **err)
{
	struct srv_err e = { 0 };
	struct srv_req *r = NULL;

	if (!json_is_object(root)) {
		bad(&e, NULL, "invalid_json", "the body must be a JSON object");
		goto out_fail;
	}
	if (!(r = hs_srv_req_new())) {
		bad(&e, NULL, NULL, "out of memory");
		goto out_fail;
	}
	if (parse_fields(s, chat, root, r, &e))
		goto out_fail;
	hs_srv_random_id(s, chat ? "chatcmpl-" : "cmpl-", r->id, sizeof r->id);
	r->created = (long long)time(NULL);
	return r;
out_fail:
	if (r) {
		pthread_mutex_lock(&s->mu);
		hs_srv_req_unref_locked(r);
		pthread_mutex_unlock(&s->mu);
	}
	*status = e.status ? e.status : 500;
	*err = e.body;
	return NULL;
}

/* ---- bodies of other APIs (messages.c, responses.c) ----------------------------- */

json_t *hs_srv_fail(struct srv_err *e, const char *param, const char *code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (!e->body) {
		e->status = 400;
		e->body = hs_srv_error_json_v(400, "invalid_request_error", param, code, fmt, ap);
	}
	va_end(ap);
	return NULL;
}

json_t *hs_srv_join_text(json_t *c, const char *const *types, const char *param, const char *where, struct srv_err *e)
{
	size_t k;
	json_t *b;
	if (!c || json_is_null(c))
		return json_string("");
	if (json_is_string(c))
		return json_incref(c), c;
	if (!json_is_array(c))
		return hs_srv_fail(e, param, "invalid_type", "%s: a string or an array of text parts is needed", where);
	struct sbuf t = { 0 };
	json_array_foreach(c, k, b) {
		const char *type = json_string_value(json_object_get(b, "type"));
		json_t *tx = json_object_get(b, "text");
		int ok = 0;
		for (int i = 0; type && types[i] && !ok; i++)
			ok = strcmp(type, types[i]) == 0;
		if (!ok || !json_is_string(tx)) {
			hs_srv_sbuf_free(&t);
			return hs_srv_fail(e, param, "not_supported", "%s[%zu]: only %s parts with a text are supported (type \"%.40s\")",
					   where, k, types[0], type ? type : "");
		}
		if (t.len)
			hs_srv_sbuf_add(&t, "\n", 1);
		hs_srv_sbuf_add(&t, json_string_value(tx), json_string_length(tx));
	}
	json_t *r = t.err ? NULL : json_stringn(t.p ? t.p : "", t.len);
	hs_srv_sbuf_free(&t);
	return r ? r : hs_srv_fail(e, param, NULL, "out of memory");
}

int hs_srv_convert_tools(json_t *chat, json_t *v, const char *type_needed, int type_optional, const char *schema_key,
			 struct srv_err *e)
{
	json_t *tools = json_array(), *t;
	size_t i;

	if (!tools)
		return hs_srv_fail(e, "tools", NULL, "out of memory"), -1;
	json_object_set_new(chat, "tools", tools);
	if (!json_is_array(v))
		return hs_srv_fail(e, "tools", "invalid_type", "tools: an array is needed"), -1;
	json_array_foreach(v, i, t) {
		const char *type = json_string_value(json_object_get(t, "type"));
		json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
		json_t *params = json_object_get(t, schema_key);
		if (type ? strcmp(type, type_needed) != 0 : !type_optional)
			return hs_srv_fail(e, "tools", "not_supported",
					   "tools[%zu]: tool type \"%.40s\" is not supported (%s only)", i, type ? type : "",
					   type_needed),
			       -1;
		if (!json_is_string(name) || (desc && !json_is_string(desc) && !json_is_null(desc)) ||
		    (params && !json_is_object(params) && !json_is_null(params)))
			return hs_srv_fail(e, "tools", "invalid_type", "tools[%zu]: a string name and an object %s are needed",
					   i, schema_key),
			       -1;
		json_t *fn = json_pack("{s:O}", "name", name);
		if (fn && json_is_string(desc))
			json_object_set(fn, "description", desc);
		if (fn && json_is_object(params))
			json_object_set(fn, "parameters", params);
		json_array_append_new(tools, json_pack("{s:s, s:o}", "type", "function", "function", fn));
	}
	return 0;
}

struct srv_req *hs_srv_parse_other(struct srv *s, const char *body, size_t len,
				   json_t *(*to_chat)(json_t *root, struct srv_err *e), enum srv_api api,
				   const char *id_prefix, int *status, char **err)
{
	struct srv_err e = { 0 };
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *chat = NULL;
	struct srv_req *r = NULL;

	if (!root)
		hs_srv_fail(&e, NULL, "invalid_json", "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
			    je.column);
	else if (!json_is_object(root))
		hs_srv_fail(&e, NULL, "invalid_json", "the body must be a JSON object");
	else if ((chat = to_chat(root, &e))) {
		r = hs_srv_parse_json(s, 1, chat, status, err);
		json_t *from = json_object_get(chat, "hotset_conv_from"), *msgs = json_object_get(chat, "messages");
		if (r) {
			r->api = api;
			hs_srv_random_id(s, id_prefix, r->id, sizeof r->id);
		}
		/* the conversation to keep when it ends (store.c) */
		if (r && json_is_integer(from) && (r->conv = json_array()))
			for (size_t i = (size_t)json_integer_value(from); i < json_array_size(msgs); i++)
				json_array_append(r->conv, json_array_get(msgs, i));
		json_decref(chat);
		json_decref(root);
		return r;
	}
	json_decref(root);
	*status = e.status ? e.status : 500;
	*err = e.body;
	return NULL;
}

struct srv_req *hs_srv_parse_request(struct srv *s, int chat, const char *body, size_t len, int *status, char **err)
{
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je);

	if (!root) {
		struct srv_err e = { 0 };
		bad(&e, NULL, "invalid_json", "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
		    je.column);
		*status = e.status ? e.status : 500;
		*err = e.body;
		return NULL;
	}
	struct srv_req *r = hs_srv_parse_json(s, chat, root, status, err);
	json_decref(root);
	return r;
}
