/* Replies parsed as they are generated (see hs_reply_parser_push() in
 * hotset.h).  Harmony is parsed at the token level: its markers are control
 * tokens.  ChatML's <think> and <tool_call> are parsed in the text, since a
 * vocabulary may have them as special tokens, as user-defined ones, or not
 * at all; text that might be the start of a marker is held back until the
 * next bytes say.  All text goes through one UTF-8 sink, finished whenever
 * the kind of text (or the tool call) changes, so a delta never carries
 * half a character.  Each tool call has an index; a ChatML call's block is
 * held until </tool_call> and then parsed, so that its deltas carry the
 * arguments as harmony's do and the function's name is known.  Qwen3.5 and
 * GLM-4.5 are parsed as ChatML is, their calls' blocks read in their own
 * forms (<function=N><parameter=K>V</parameter>..., and N<arg_key>K
 * </arg_key><arg_value>V</arg_value>...) into JSON arguments; Qwen3.5's
 * reply begins inside the reasoning its generation prompt opened. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "text/tokenizer.h"
#include "base/error.h"

#define MAX_HEADER 1024 /* harmony header text ("commentary to=functions.name json"; names may be any UTF-8) */
#define MAX_START 256  /* ChatML: white space waited through before deciding there is no <think> */

enum { H_HEADER, H_BODY, H_AFTER_END, H_RAW };           /* harmony */
enum { C_START, C_THINK, C_CONTENT, C_TOOL };            /* ChatML */

struct delta_at {
	enum hs_reply_kind kind;
	int tool; /* the tool call's index, -1 for other text */
	size_t off, len;
};

struct hs_reply_parser {
	const hs_tokenizer *t;
	enum hs_chat_format f;
	int stopped;
	int32_t stop[4];

	/* this call's text, its deltas, and what is handed out */
	struct hs_utf8_sink sink;
	enum hs_reply_kind sink_kind;
	int sink_tool;
	struct hs_buf out, handed;
	struct delta_at *d;
	int n_d, cap_d;
	struct hs_reply_delta *deltas;
	int cap_deltas;
	char **names; /* each tool call's function, NULL while unknown */
	int n_calls, cap_calls;

	/* harmony */
	int h;
	enum hs_reply_kind body;
	struct hs_buf header;
	int32_t id_channel, id_constrain, id_message, id_end, id_start;

	/* ChatML */
	int c, skip_nl;
	size_t nl_held;
	struct hs_buf hold, call; /* call: the open <tool_call> block's text */
};

/* ---- output ------------------------------------------------------------ */

/* The call's last delta is of this kind and tool call (a new one when it was not). */
static int open_delta(hs_reply_parser *p, enum hs_reply_kind kind, int tool)
{
	if (p->n_d && p->d[p->n_d - 1].kind == kind && p->d[p->n_d - 1].tool == tool)
		return 0;
	if (p->n_d == p->cap_d) {
		int cap = p->cap_d ? 2 * p->cap_d : 8;
		struct delta_at *q = realloc(p->d, (size_t)cap * sizeof *q);
		if (!q)
			return hs__error(ENOMEM, "reply: out of memory");
		p->d = q;
		p->cap_d = cap;
	}
	p->d[p->n_d++] = (struct delta_at){ kind, tool, p->out.len, 0 };
	return 0;
}

static void close_delta(hs_reply_parser *p)
{
	p->d[p->n_d - 1].len = p->out.len - p->d[p->n_d - 1].off;
}

/* A character cut short at the end of the previous kind's text ends there. */
static int finish_char(hs_reply_parser *p)
{
	int rc;

	if (!p->sink.n_pend)
		return 0;
	if ((rc = open_delta(p, p->sink_kind, p->sink_tool)) || (rc = hs__utf8_finish(&p->sink, &p->out)))
		return rc;
	close_delta(p);
	return 0;
}

/* Text of this kind; tool call text belongs to the latest call. */
static int emit(hs_reply_parser *p, enum hs_reply_kind kind, const void *s, size_t n)
{
	int rc, tool = kind == HS_REPLY_TOOL_CALL ? p->n_calls - 1 : -1;

	if (!n)
		return 0;
	if ((p->sink_kind != kind || p->sink_tool != tool) && (rc = finish_char(p)))
		return rc;
	if ((rc = open_delta(p, kind, tool)))
		return rc;
	p->sink_kind = kind;
	p->sink_tool = tool;
	rc = hs__utf8_feed(&p->sink, s, n, &p->out);
	close_delta(p);
	return rc;
}

/* Makes the call's deltas: each text NUL-terminated, empty ones left out. */
static int hand_out(hs_reply_parser *p, int rc, const struct hs_reply_delta **deltas, int *n)
{
	int k = 0;

	*deltas = p->deltas;
	*n = 0;
	if (!rc && p->n_d > p->cap_deltas) {
		struct hs_reply_delta *q = realloc(p->deltas, (size_t)p->n_d * sizeof *q);
		if (!q)
			rc = hs__error(ENOMEM, "reply: out of memory");
		else
			p->deltas = q, p->cap_deltas = p->n_d;
	}
	p->handed.len = 0;
	for (int i = 0; !rc && i < p->n_d; i++)
		if (p->d[i].len && !(rc = hs__buf_put(&p->handed, p->out.p + p->d[i].off, p->d[i].len)))
			rc = hs__buf_put(&p->handed, "", 1);
	size_t off = 0;
	for (int i = 0; !rc && i < p->n_d; i++)
		if (p->d[i].len) {
			p->deltas[k++] = (struct hs_reply_delta){ p->d[i].kind, p->handed.p + off, p->d[i].len,
								  p->d[i].tool };
			off += p->d[i].len + 1;
		}
	p->out.len = 0;
	p->n_d = 0;
	*deltas = p->deltas;
	*n = rc ? 0 : k;
	return rc;
}

static int32_t find_id(const hs_tokenizer *t, const char *s)
{
	int32_t id = hs__tok_special(t, (const uint8_t *)s, strlen(s));
	return id >= 0 && hs__tok_is_control_type(t->tok[id].type) ? id : -1;
}

static int same(const uint8_t *s, size_t n, const char *lit)
{
	return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

static int is_stop(const hs_reply_parser *p, int32_t id)
{
	for (int i = 0; i < 4; i++)
		if (p->stop[i] == id && id >= 0)
			return 1;
	return 0;
}

/* A tool call begins; name (malloc'd, or NULL while unknown) is the parser's now. */
static int new_call(hs_reply_parser *p, char *name)
{
	if (p->n_calls == p->cap_calls) {
		int cap = p->cap_calls ? 2 * p->cap_calls : 4;
		char **q = realloc(p->names, (size_t)cap * sizeof *q);
		if (!q) {
			free(name);
			return hs__error(ENOMEM, "reply: out of memory");
		}
		p->names = q;
		p->cap_calls = cap;
	}
	p->names[p->n_calls++] = name;
	return 0;
}

/* ---- harmony ---------------------------------------------------------- */

static int harmony_raw(hs_reply_parser *p)
{
	/* the reply broke the format: what was held as header is content */
	int rc = 0;
	for (size_t i = 0; i < p->header.len && !rc; i++)
		if (p->header.p[i] != '\1' && p->header.p[i] != '\2')
			rc = emit(p, HS_REPLY_CONTENT, p->header.p + i, 1);
	p->header.len = 0;
	p->h = H_RAW;
	return rc;
}

/* The header is "[ to=R]\1channel[ to=R][ json]\2constraint": the
 * channel and a recipient decide what the message is. */
static int harmony_message(hs_reply_parser *p)
{
	const char *h = p->header.p ? p->header.p : "", *ch = memchr(h, '\1', p->header.len), *to = NULL;
	size_t n = p->header.len, cn = 0;

	for (size_t i = 0; i + 3 <= n; i++)
		if (memcmp(h + i, "to=", 3) == 0 && (i == 0 || h[i - 1] == ' ' || h[i - 1] == '\1')) {
			to = h + i + 3;
			break;
		}
	if (ch)
		for (ch++; ch + cn < h + n && ch[cn] != ' ' && ch[cn] != '\2' && ch[cn] != '\1';)
			cn++;
	if (to) {
		size_t tn = 0;
		while (to + tn < h + n && to[tn] != ' ' && to[tn] != '\1' && to[tn] != '\2')
			tn++;
		/* the recipient as valid UTF-8 (a broken byte becomes U+FFFD) */
		struct hs_utf8_sink sink = { { 0 }, 0 };
		struct hs_buf name = { 0 };
		int rc = hs__utf8_feed(&sink, (const uint8_t *)to, tn, &name);
		if (!rc)
			rc = hs__utf8_finish(&sink, &name);
		if (!rc)
			rc = hs__buf_put(&name, "", 1);
		if (rc) {
			free(name.p);
			return hs__error(ENOMEM, "reply: out of memory");
		}
		if ((rc = new_call(p, name.p)))
			return rc;
		p->body = HS_REPLY_TOOL_CALL;
	} else {
		p->body = ch && cn == 8 && memcmp(ch, "analysis", 8) == 0 ? HS_REPLY_REASONING : HS_REPLY_CONTENT;
	}
	p->header.len = 0;
	p->h = H_BODY;
	return 0;
}

/* Header text: ASCII names and punctuation of the format; any UTF-8 once a
 * recipient began ("to=": a function's name may be in any script). */
static int header_text_ok(const hs_reply_parser *p, const uint8_t *s, size_t n)
{
	const uint8_t *h = (const uint8_t *)p->header.p;
	size_t hn = p->header.len;
	int to = 0;

	for (size_t i = 0; i + 3 <= hn && !to; i++)
		to = memcmp(h + i, "to=", 3) == 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i], b1 = i >= 1 ? s[i - 1] : hn >= 1 ? h[hn - 1] : 0;
		uint8_t b2 = i >= 2 ? s[i - 2] : hn + i >= 2 ? h[hn + i - 2] : 0;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      (c && strchr(" ._=:/-", c)) || (c >= 0x80 && to)))
			return 0;
		to |= c == '=' && b1 == 'o' && b2 == 't';
	}
	return 1;
}

static int harmony_push(hs_reply_parser *p, int32_t id, const uint8_t *s, size_t n, int control)
{
	int rc;

	if (p->h == H_RAW)
		return control ? 0 : emit(p, HS_REPLY_CONTENT, s, n);
	if (p->h == H_HEADER) {
		if (id == p->id_message)
			return harmony_message(p);
		if (id == p->id_start) { /* the header begins again (a repeated <|start|>) */
			p->header.len = 0;
			return 0;
		}
		if ((id == p->id_channel || id == p->id_constrain || !control) && p->header.len + n + 1 <= MAX_HEADER &&
		    (control || header_text_ok(p, s, n)))
			return hs__buf_put(&p->header, id == p->id_channel ? "\1" : id == p->id_constrain ? "\2" : (const char *)s,
					   control ? 1 : n);
		if ((rc = harmony_raw(p)))
			return rc;
		return control ? 0 : emit(p, HS_REPLY_CONTENT, s, n);
	}
	if (id == p->id_start || id == p->id_channel) {
		/* a new message; a missing <|end|> or <|start|> before it is forgiven */
		p->h = H_HEADER;
		p->header.len = 0;
		return id == p->id_channel ? hs__buf_put(&p->header, "\1", 1) : 0;
	}
	if (p->h == H_BODY) {
		if (id == p->id_end) {
			p->h = H_AFTER_END;
			return 0;
		}
		return control ? 0 : emit(p, p->body, s, n);
	}
	/* after <|end|>: <|start|> (above) or a stop belongs here; text is taken
	 * as the next header, its <|start|> missing ("assistant<|channel|>...") */
	if (control)
		return 0;
	p->h = H_HEADER;
	p->header.len = 0;
	return harmony_push(p, id, s, n, control);
}

/* ---- ChatML ----------------------------------------------------------- */

static enum hs_reply_kind section_kind(int c)
{
	return c == C_THINK ? HS_REPLY_REASONING : c == C_TOOL ? HS_REPLY_TOOL_CALL : HS_REPLY_CONTENT;
}

/* Text of a section: a tool call's is held until its block ends. */
static int put(hs_reply_parser *p, enum hs_reply_kind kind, const char *s, size_t n)
{
	return kind == HS_REPLY_TOOL_CALL ? hs__buf_put(&p->call, s, n) : emit(p, kind, s, n);
}

/* ---- Qwen3.5's and GLM-4.5's call blocks ------------------------------------ */

struct cursor {
	const char *s, *end;
};

static void skip_space(struct cursor *c)
{
	while (c->s < c->end && strchr(" \t\r\n", *c->s))
		c->s++;
}

/* c begins with lit: consumed, 1; else 0 */
static int take(struct cursor *c, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(c->end - c->s) < n || memcmp(c->s, lit, n) != 0)
		return 0;
	c->s += n;
	return 1;
}

/* The text up to lit (not included), lit consumed; NULL when lit never comes. */
static const char *until(struct cursor *c, const char *lit, size_t *len)
{
	size_t n = strlen(lit);
	for (const char *q = c->s; q + n <= c->end; q++)
		if (memcmp(q, lit, n) == 0) {
			const char *start = c->s;
			*len = (size_t)(q - start);
			c->s = q + n;
			return start;
		}
	return NULL;
}

/* An argument's value: JSON when it is JSON text (the formats write numbers,
 * booleans, null, arrays and objects so), Python's True, False and None
 * where the format prints values with str() (Qwen3.5), else the string. */
static json_t *arg_value(const char *s, size_t n, int python)
{
	json_t *v = json_loadb(s, n, JSON_DECODE_ANY, NULL);
	if (v)
		return v;
	if (python && n == 4 && memcmp(s, "True", 4) == 0)
		return json_true();
	if (python && n == 5 && memcmp(s, "False", 5) == 0)
		return json_false();
	if (python && n == 4 && memcmp(s, "None", 4) == 0)
		return json_null();
	return json_stringn(s, n);
}

/* A block in Qwen3.5's form (qwen35 = 1) or GLM-4.5's: its function's name
 * (malloc'd) and arguments; 0 when the block is not in the form. */
static int xml_call(const char *s, size_t n, int qwen35, char **name, json_t **args)
{
	struct cursor c = { s, s + n };
	const char *k, *v;
	size_t kn, vn;

	*name = NULL;
	*args = json_object();
	if (!*args)
		return 0;
	skip_space(&c);
	if (qwen35) {
		if (!take(&c, "<function=") || !(k = until(&c, ">", &kn)) || !kn)
			goto bad;
	} else {
		k = c.s;
		while (c.s < c.end && *c.s != '\n' && !(c.end - c.s >= 9 && memcmp(c.s, "<arg_key>", 9) == 0))
			c.s++;
		kn = (size_t)(c.s - k);
		while (kn && strchr(" \t\r", k[kn - 1]))
			kn--;
		if (!kn)
			goto bad;
	}
	if (!(*name = strndup(k, kn)))
		goto bad;
	for (;;) {
		skip_space(&c);
		if (qwen35 ? take(&c, "</function>") : c.s == c.end)
			break;
		if (qwen35 ? !take(&c, "<parameter=") || !(k = until(&c, ">", &kn))
			   : !take(&c, "<arg_key>") || !(k = until(&c, "</arg_key>", &kn)))
			goto bad;
		if (!qwen35) {
			skip_space(&c);
			if (!take(&c, "<arg_value>"))
				goto bad;
		}
		if (!(v = until(&c, qwen35 ? "</parameter>" : "</arg_value>", &vn)))
			goto bad;
		if (qwen35 && vn && *v == '\n') /* the newlines the format puts around a value */
			v++, vn--;
		if (qwen35 && vn && v[vn - 1] == '\n')
			vn--;
		char *key = strndup(k, kn);
		json_t *val = arg_value(v, vn, qwen35);
		int rc = key && val ? json_object_set_new(*args, key, val) : -1;
		free(key);
		if (rc)
			goto bad;
	}
	skip_space(&c);
	if (c.s == c.end)
		return 1;
bad:
	free(*name);
	*name = NULL;
	json_decref(*args);
	*args = NULL;
	return 0;
}

/* A <tool_call> block ended (or the reply did inside one).  {"name": N,
 * "arguments": A} names the call N and hands out A as JSON text (a string
 * A as it is, "{}" when there is none); any other text is handed out as it
 * is, a call without a name. */
static int end_call(hs_reply_parser *p)
{
	json_t *j = NULL, *name = NULL, *args = NULL;
	char *a = NULL, *xml_name = NULL;
	int rc = 0;

	if (p->f == HS_CHAT_QWEN35 || p->f == HS_CHAT_GLM) {
		if (xml_call(p->call.p, p->call.len, p->f == HS_CHAT_QWEN35, &xml_name, &args)) {
			a = json_dumps(args, JSON_COMPACT);
			p->names[p->n_calls - 1] = xml_name;
			rc = a ? emit(p, HS_REPLY_TOOL_CALL, a, strlen(a)) : hs__error(ENOMEM, "reply: out of memory");
		} else {
			rc = emit(p, HS_REPLY_TOOL_CALL, p->call.p, p->call.len);
		}
		free(a);
		json_decref(args);
		p->call.len = 0;
		return rc ? rc : finish_char(p);
	}
	j = p->call.len ? json_loadb(p->call.p, p->call.len, 0, NULL) : NULL;
	name = json_object_get(j, "name");
	args = json_object_get(j, "arguments");
	if (json_is_string(name)) {
		a = !args ? strdup("{}")
		    : json_is_string(args) ? strdup(json_string_value(args))
					   : json_dumps(args, JSON_COMPACT | JSON_ENCODE_ANY);
		p->names[p->n_calls - 1] = strdup(json_string_value(name));
		if (!a || !p->names[p->n_calls - 1])
			rc = hs__error(ENOMEM, "reply: out of memory");
		else
			rc = emit(p, HS_REPLY_TOOL_CALL, a, strlen(a));
	} else {
		rc = emit(p, HS_REPLY_TOOL_CALL, p->call.p, p->call.len);
	}
	free(a);
	json_decref(j);
	p->call.len = 0;
	return rc ? rc : finish_char(p);
}

/* Text of the current section: newlines right after its opening marker are
 * dropped, newlines at its end wait to see whether the closing marker
 * comes next (then they are dropped too). */
static int section_text(hs_reply_parser *p, const char *s, size_t n)
{
	enum hs_reply_kind kind = section_kind(p->c);
	size_t k = n;
	int rc = 0;

	if (p->skip_nl) {
		while (n && *s == '\n')
			s++, n--;
		if (!n)
			return 0;
		p->skip_nl = 0;
		k = n;
	}
	while (k && s[k - 1] == '\n')
		k--;
	if (k) {
		for (; p->nl_held && !rc; p->nl_held--)
			rc = put(p, kind, "\n", 1);
		if (!rc)
			rc = put(p, kind, s, k);
	}
	p->nl_held += n - k;
	return rc;
}

static const char *section_end(int c)
{
	return c == C_THINK ? "</think>" : c == C_TOOL ? "</tool_call>" : "<tool_call>";
}

static int chatml_scan(hs_reply_parser *p)
{
	int rc;

	for (;;) {
		char *h = p->hold.p;
		size_t n = p->hold.len, i = 0;
		if (!n)
			return 0;
		if (p->c == C_START) {
			while (i < n && strchr(" \t\r\n", h[i]))
				i++;
			if (i == n) {
				if (n <= MAX_START)
					return 0;
				p->c = C_CONTENT;
				continue;
			}
			if (n - i >= 7 && memcmp(h + i, "<think>", 7) == 0) {
				memmove(h, h + i + 7, n - i - 7);
				p->hold.len = n - i - 7;
				p->c = C_THINK;
				p->skip_nl = 1;
				continue;
			}
			if (n - i < 7 && memcmp(h + i, "<think>", n - i) == 0)
				return 0; /* maybe <think> */
			p->c = C_CONTENT;
			continue;
		}
		const char *m = section_end(p->c);
		size_t mn = strlen(m), at = n, keep = 0;
		for (size_t j = 0; j + mn <= n; j++)
			if (memcmp(h + j, m, mn) == 0) {
				at = j;
				break;
			}
		if (at == n) /* keep the longest tail that may begin the marker */
			for (keep = mn - 1 < n ? mn - 1 : n; keep && memcmp(h + n - keep, m, keep) != 0; keep--)
				;
		if ((rc = section_text(p, h, at == n ? n - keep : at)))
			return rc;
		if (at == n) {
			memmove(h, h + n - keep, keep);
			p->hold.len = keep;
			return 0;
		}
		/* the marker: the section ends, the next one begins */
		p->nl_held = 0;
		if ((rc = p->c == C_CONTENT ? new_call(p, NULL) : p->c == C_TOOL ? end_call(p) : 0))
			return rc;
		p->c = p->c == C_CONTENT ? C_TOOL : C_CONTENT;
		p->skip_nl = 1;
		memmove(h, h + at + mn, n - at - mn);
		p->hold.len = n - at - mn;
	}
}

static int chatml_finish(hs_reply_parser *p)
{
	int rc = 0;

	if (p->c == C_START)
		p->c = C_CONTENT;
	if (p->hold.len)
		rc = section_text(p, p->hold.p, p->hold.len);
	p->hold.len = 0;
	for (; p->nl_held && !rc; p->nl_held--)
		rc = put(p, section_kind(p->c), "\n", 1);
	if (!rc && p->c == C_TOOL)
		rc = end_call(p);
	p->c = C_CONTENT;
	return rc;
}

/* ---- the parser ------------------------------------------------------- */

int hs_reply_parser_new(const hs_tokenizer *t, enum hs_chat_format format, hs_reply_parser **out)
{
	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(t, -EINVAL);
	hs_reply_parser *p = calloc(1, sizeof *p);
	if (!p)
		return hs__error(ENOMEM, "reply: out of memory");
	p->t = t;
	p->f = format == HS_CHAT_AUTO ? hs_chat_format_of(t) : format;
	if (p->f != HS_CHAT_HARMONY && p->f != HS_CHAT_CHATML && p->f != HS_CHAT_RAW && p->f != HS_CHAT_QWEN35 &&
	    p->f != HS_CHAT_GLM) {
		free(p);
		return hs__error(EINVAL, "reply: format %d is not a chat format", (int)format);
	}
	p->stop[0] = t->eos;
	p->stop[1] = find_id(t, "<|endoftext|>");
	if (p->f == HS_CHAT_HARMONY) {
		p->stop[2] = find_id(t, "<|return|>");
		p->stop[3] = find_id(t, "<|call|>");
		p->id_channel = find_id(t, "<|channel|>");
		p->id_constrain = find_id(t, "<|constrain|>");
		p->id_message = find_id(t, "<|message|>");
		p->id_end = find_id(t, "<|end|>");
		p->id_start = find_id(t, "<|start|>");
		/* the prompt ended with <|start|>assistant: a header comes first */
		p->h = H_HEADER;
	} else if (p->f == HS_CHAT_GLM) {
		p->stop[2] = find_id(t, "<|user|>"); /* the next turn, or the tools' answer */
		p->stop[3] = find_id(t, "<|observation|>");
	} else {
		p->stop[2] = p->f == HS_CHAT_RAW ? t->eot : find_id(t, "<|im_end|>");
		p->stop[3] = -1;
	}
	if (p->f == HS_CHAT_QWEN35) { /* its generation prompt opened the reasoning */
		p->c = C_THINK;
		p->skip_nl = 1;
	}
	p->sink_tool = -1;
	if (hs__buf_put(&p->out, "", 0) || hs__buf_put(&p->handed, "", 0)) {
		hs_reply_parser_free(p);
		return hs__error(ENOMEM, "reply: out of memory");
	}
	*out = p;
	return 0;
}

void hs_reply_parser_free(hs_reply_parser *p)
{
	if (!p)
		return;
	free(p->out.p);
	free(p->handed.p);
	free(p->header.p);
	free(p->hold.p);
	free(p->call.p);
	free(p->d);
	free(p->deltas);
	for (int i = 0; i < p->n_calls; i++)
		free(p->names[i]);
	free(p->names);
	free(p);
}

int hs_reply_parser_push(hs_reply_parser *p, int32_t id, const struct hs_reply_delta **deltas, int *n_deltas)
{
	const struct hs_vocab_token *k;
	const uint8_t *s;
	int control, rc = 0;

	HS_NEED(p, -EINVAL);
	HS_NEED(deltas, -EINVAL);
	HS_NEED(n_deltas, -EINVAL);
	*deltas = p->deltas;
	*n_deltas = 0;
	if (id < 0 || id >= p->t->n_vocab)
		return hs__tok_bad_id(p->t, id);
	if (p->stopped)
		return 1;
	if (is_stop(p, id)) {
		p->stopped = 1;
		return 1;
	}
	k = &p->t->tok[id];
	s = p->t->pool + k->off;
	control = hs__tok_is_control_type(k->type);
	if (p->f == HS_CHAT_HARMONY) {
		rc = harmony_push(p, id, s, k->len, control);
	} else if (p->f == HS_CHAT_CHATML || p->f == HS_CHAT_QWEN35 || p->f == HS_CHAT_GLM) {
		/* the formats' markers count whatever their type; other control tokens are dropped */
		int marker = control && (same(s, k->len, "<think>") || same(s, k->len, "</think>") ||
					 same(s, k->len, "<tool_call>") || same(s, k->len, "</tool_call>") ||
					 (p->f == HS_CHAT_GLM && p->c == C_TOOL && k->len > 8 &&
					  (memcmp(s, "<arg_", 5) == 0 || memcmp(s, "</arg_", 6) == 0)));
		if (!control || marker)
			rc = hs__buf_put(&p->hold, s, k->len);
		if (!rc)
			rc = chatml_scan(p);
	} else if (!control) {
		rc = emit(p, HS_REPLY_CONTENT, s, k->len);
	}
	return hand_out(p, rc, deltas, n_deltas);
}

int hs_reply_parser_finish(hs_reply_parser *p, const struct hs_reply_delta **deltas, int *n_deltas)
{
	int rc = 0;

	HS_NEED(p, -EINVAL);
	HS_NEED(deltas, -EINVAL);
	HS_NEED(n_deltas, -EINVAL);
	if (p->f == HS_CHAT_CHATML || p->f == HS_CHAT_QWEN35 || p->f == HS_CHAT_GLM)
		rc = chatml_finish(p);
	else if (p->f == HS_CHAT_HARMONY && p->h == H_HEADER && p->header.len)
		rc = harmony_raw(p);
	if (!rc)
		rc = finish_char(p);
	return hand_out(p, rc, deltas, n_deltas);
}

/* The last occurrence of needle in s, or NULL */
static const char *last_of(const char *s, const char *needle)
{
	const char *last = NULL;
	for (const char *q = s; (q = strstr(q, needle)); q++)
		last = q;
	return last;
}

int hs_reply_parser_set_prompt(hs_reply_parser *p, const int32_t *ids, int n)
{
	struct hs_buf tail = { 0 };
	int rc = 0, from = n > 64 ? n - 64 : 0;

	HS_NEED(p, -EINVAL);
	if (n < 0 || (n && !ids))
		return hs__error(EINVAL, "reply: a prompt of %d ids%s", n, n && !ids ? " at NULL" : "");
	if (p->n_calls || p->c != (p->f == HS_CHAT_QWEN35 ? C_THINK : C_START) || p->hold.len || p->stopped)
		return hs__error(EINVAL, "reply: the prompt is set before the reply's first id");
	for (int i = 0; i < n; i++)
		if (ids[i] < 0 || ids[i] >= p->t->n_vocab)
			return hs__tok_bad_id(p->t, ids[i]);
	if (p->f != HS_CHAT_CHATML && p->f != HS_CHAT_QWEN35 && p->f != HS_CHAT_GLM)
		return 0;
	for (int i = from; i < n && !rc; i++) {
		const struct hs_vocab_token *k = &p->t->tok[ids[i]];
		rc = hs__buf_put(&tail, p->t->pool + k->off, k->len);
	}
	if (!rc)
		rc = hs__buf_put(&tail, "", 1);
	if (rc) {
		free(tail.p);
		return rc;
	}
	/* the last turn's opening, then whether a <think> there is still open */
	const char *chatml = last_of(tail.p, "<|im_start|>"), *glm = last_of(tail.p, "<|assistant|>");
	const char *turn = chatml && (!glm || chatml > glm) ? chatml : glm ? glm : tail.p;
	const char *open = last_of(turn, "<think>"), *close = last_of(turn, "</think>");
	int thinking = open && (!close || close < open);
	p->c = thinking ? C_THINK : C_START;
	p->skip_nl = thinking;
	free(tail.p);
	return 0;
}

int hs_reply_parser_tool_count(const hs_reply_parser *p)
{
	HS_NEED(p, -EINVAL);
	return p->n_calls;
}

const char *hs_reply_parser_tool_name_at(const hs_reply_parser *p, int index)
{
	HS_NEED(p, NULL);
	return index >= 0 && index < p->n_calls ? p->names[index] : NULL;
}

const char *hs_reply_parser_tool_name(const hs_reply_parser *p)
{
	HS_NEED(p, NULL);
	return hs_reply_parser_tool_name_at(p, p->n_calls - 1);
}

/* ---- a whole reply ---------------------------------------------------- */

void hs_reply_free(struct hs_reply *r)
{
	if (!r)
		return;
	free(r->content);
	free(r->reasoning);
	for (int i = 0; i < r->n_calls; i++) {
		free(r->calls[i].name);
		free(r->calls[i].arguments);
	}
	free(r->calls);
	memset(r, 0, sizeof *r);
}

/* Content and reasoning into parts[0..1], each tool call's text into calls[index]. */
static int collect(struct hs_buf parts[2], struct hs_buf **calls, int *n_calls, const struct hs_reply_delta *d,
		   int n)
{
	int rc = 0;

	for (int i = 0; i < n && !rc; i++) {
		if (d[i].kind != HS_REPLY_TOOL_CALL) {
			rc = hs__buf_put(&parts[d[i].kind], d[i].text, d[i].len);
			continue;
		}
		if (d[i].tool_index >= *n_calls) {
			struct hs_buf *q = realloc(*calls, (size_t)(d[i].tool_index + 1) * sizeof *q);
			if (!q)
				return hs__error(ENOMEM, "reply: out of memory");
			memset(q + *n_calls, 0, (size_t)(d[i].tool_index + 1 - *n_calls) * sizeof *q);
			*calls = q;
			*n_calls = d[i].tool_index + 1;
		}
		rc = hs__buf_put(&(*calls)[d[i].tool_index], d[i].text, d[i].len);
	}
	return rc;
}

/* The parser's calls, each with its name and its text ("" when it had none). */
static int take_calls(const hs_reply_parser *p, struct hs_buf *bufs, int n_bufs, struct hs_reply *out)
{
	int n = hs_reply_parser_tool_count(p);

	if (n <= 0) /* p is the caller's own parser: never NULL here */
		return 0;
	if (!(out->calls = calloc((size_t)n, sizeof *out->calls)))
		return hs__error(ENOMEM, "reply: out of memory");
	out->n_calls = n;
	for (int i = 0; i < n; i++) {
		struct hs_reply_call *c = &out->calls[i];
		const char *name = hs_reply_parser_tool_name_at(p, i);
		if (i < n_bufs && bufs[i].p) {
			c->arguments = bufs[i].p;
			c->arguments_len = bufs[i].len;
			bufs[i].p = NULL;
		} else {
			c->arguments = strdup("");
		}
		if (!c->arguments || (name && !(c->name = strdup(name))))
			return hs__error(ENOMEM, "reply: out of memory");
	}
	return 0;
}

int hs_reply_parse(const hs_tokenizer *t, enum hs_chat_format format, const int32_t *ids, int n,
		   struct hs_reply *out)
{
	struct hs_buf parts[2] = { { NULL, 0, 0 }, { NULL, 0, 0 } }, *calls = NULL;
	const struct hs_reply_delta *d;
	hs_reply_parser *p;
	int rc, nd, n_calls = 0;

	HS_NEED(out, -EINVAL);
	memset(out, 0, sizeof *out);
	out->stop_id = -1;
	if (n < 0)
		return hs__error(EINVAL, "reply: n %d is negative", n);
	if (n)
		HS_NEED(ids, -EINVAL);
	if ((rc = hs_reply_parser_new(t, format, &p)))
		return rc;
	for (int k = 0; k < 2 && !rc; k++)
		rc = hs__buf_put(&parts[k], "", 0);
	for (int i = 0; i < n && !rc; i++) {
		rc = hs_reply_parser_push(p, ids[i], &d, &nd);
		if (rc == 1) {
			out->stop_id = ids[i];
			rc = 0;
			break;
		}
		if (!rc)
			rc = collect(parts, &calls, &n_calls, d, nd);
	}
	if (!rc && !(rc = hs_reply_parser_finish(p, &d, &nd)))
		rc = collect(parts, &calls, &n_calls, d, nd);
	if (!rc)
		rc = take_calls(p, calls, n_calls, out);
	hs_reply_parser_free(p);
	for (int i = 0; i < n_calls; i++)
		free(calls[i].p);
	free(calls);
	out->content = parts[HS_REPLY_CONTENT].p;
	out->reasoning = parts[HS_REPLY_REASONING].p;
	out->content_len = parts[HS_REPLY_CONTENT].len;
	out->reasoning_len = parts[HS_REPLY_REASONING].len;
	if (rc)
		hs_reply_free(out);
	return rc;
}
