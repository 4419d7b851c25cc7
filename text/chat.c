/* Chat formats written in C: a conversation rendered as gpt-oss's harmony
 * template and Qwen3's ChatML template render it, tool definitions included
 * (chat-tools.c writes those; chat-xml.c has Qwen3.5's and GLM-4.5's
 * formats).  The prompt (chat.h) is built with the places of the format's
 * own special tokens recorded, so hs_chat_tokenize() can make those special
 * and nothing else. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/chat-tools.h"
#include "text/chat.h"
#include "text/tokenizer.h"
#include "base/error.h"

static const char *const format_names[] = { "auto", "harmony", "chatml", "raw", "qwen35", "glm" };
#define N_FORMATS 6

struct hs_chat_opts hs_chat_opts_default(void)
{
	return (struct hs_chat_opts){ .format = HS_CHAT_AUTO };
}

const char *hs_chat_format_name(enum hs_chat_format f)
{
	return (unsigned)f < N_FORMATS ? format_names[f] : "unknown";
}

int hs_chat_format_parse(const char *name, enum hs_chat_format *out)
{
	HS_NEED(name, -EINVAL);
	HS_NEED(out, -EINVAL);
	for (int i = 0; i < N_FORMATS; i++)
		if (strcmp(name, format_names[i]) == 0) {
			*out = (enum hs_chat_format)i;
			return 0;
		}
	return hs__error(EINVAL, "chat format '%s' is not one of auto, harmony, chatml, qwen35, glm, raw", name);
}

enum hs_chat_format hs_chat_format_of(const hs_tokenizer *t)
{
	HS_NEED(t, HS_CHAT_AUTO); /* the one value it never means */
	if (strcmp(t->arch, "gpt-oss") == 0)
		return HS_CHAT_HARMONY;
	if (strncmp(t->arch, "qwen35", 6) == 0)
		return HS_CHAT_QWEN35;
	if (strncmp(t->arch, "glm4", 4) == 0)
		return HS_CHAT_GLM;
	if (strncmp(t->arch, "qwen", 4) == 0)
		return HS_CHAT_CHATML;
	if (hs_tokenizer_find(t, "<|im_start|>") >= 0 && hs_tokenizer_find(t, "<|im_end|>") >= 0)
		return HS_CHAT_CHATML;
	if (hs_tokenizer_find(t, "<|start|>") >= 0 && hs_tokenizer_find(t, "<|channel|>") >= 0 &&
	    hs_tokenizer_find(t, "<|message|>") >= 0)
		return HS_CHAT_HARMONY;
	return HS_CHAT_RAW;
}

/* Where a special token was recorded (chat.h has the rest) */
void hs__chat_mark(struct hs__chat_prompt *p, size_t n, int32_t id)
{
	if (p->err)
		return;
	if (p->n_sp == p->cap_sp) {
		int cap = p->cap_sp ? 2 * p->cap_sp : 32;
		struct hs__chat_span *q = realloc(p->sp, (size_t)cap * sizeof *q);
		if (!q) {
			p->err = hs__error(ENOMEM, "chat: out of memory");
			return;
		}
		p->sp = q;
		p->cap_sp = cap;
	}
	p->sp[p->n_sp++] = (struct hs__chat_span){ p->text.len, n, id };
}

/* The text before and after are tokenized apart (openai-harmony encodes
 * each part of a header on its own). */
static void cut(struct hs__chat_prompt *p)
{
	hs__chat_mark(p, 0, -1);
}

static int check_roles(const struct hs_chat_message *msgs, int n)
{
	static const char *const roles[] = { "system", "developer", "user", "assistant", "tool" };

	for (int i = 0; i < n; i++) {
		int ok = 0;
		for (int k = 0; k < 5; k++)
			ok |= is_role(&msgs[i], roles[k]);
		if (!ok)
			return hs__error(EINVAL, "chat: message %d has role '%s' (system, developer, user, assistant, "
					 "tool are known)", i, msgs[i].role ? msgs[i].role : "(null)");
	}
	return 0;
}

/* ---- harmony (gpt-oss) ----------------------------------------------- */

/* Messages as openai-harmony renders them (its Message: author, recipient,
 * channel, content type, text); docs/text.md has the mapping from
 * hs_chat_message and tests/gen-chat-harmony-data.py the same in Python. */

static void harmony_function(struct hs__chat_prompt *p, const char *name)
{
	if (strncmp(name, "functions.", 10) != 0)
		text(p, "functions.");
	text(p, name);
}

/* <|start|>author[ to=recipient]<|channel|>channel[ <|constrain|>json]<|message|>:
 * the assistant's, its call to a function (call), a function's result (tool) */
static void harmony_header(struct hs__chat_prompt *p, const char *tool, const char *call, const char *channel)
{
	special(p, "<|start|>");
	if (tool)
		harmony_function(p, tool);
	else
		text(p, "assistant");
	if (tool || call) {
		cut(p);
		text(p, " to=");
		if (tool)
			text(p, "assistant");
		else
			harmony_function(p, call);
	}
	special(p, "<|channel|>");
	text(p, channel);
	if (call) {
		cut(p);
		text(p, " ");
		special(p, "<|constrain|>");
		text(p, "json");
	}
	special(p, "<|message|>");
}

static void harmony_text(struct hs__chat_prompt *p, const char *channel, const char *s)
{
	harmony_header(p, NULL, NULL, channel);
	text(p, s);
	special(p, "<|end|>");
}

static int harmony(struct hs__chat_prompt *p, const struct hs_chat_message *m, int n, const struct hs_chat_opts *o,
		   const json_t *tools)
{
	const char *effort = o->reasoning_effort ? o->reasoning_effort : "medium", *last_tool = NULL;
	char today[32];
	int first = 0, last_final = -1;

	if (strcmp(effort, "low") && strcmp(effort, "medium") && strcmp(effort, "high"))
		return hs__error(EINVAL, "chat: reasoning effort '%s' is not low, medium or high", effort);
	if (!o->date) {
		time_t now = time(NULL);
		struct tm tm;
		gmtime_r(&now, &tm);
		strftime(today, sizeof today, "%Y-%m-%d", &tm);
	}
	special(p, "<|start|>");
	text(p, "system");
	special(p, "<|message|>");
	text(p, o->model_identity ? o->model_identity : "You are ChatGPT, a large language model trained by OpenAI.");
	text(p, "\nKnowledge cutoff: ");
	text(p, o->knowledge_cutoff ? o->knowledge_cutoff : "2024-06");
	text(p, "\nCurrent date: ");
	text(p, o->date ? o->date : today);
	text(p, "\n\nReasoning: ");
	text(p, effort);
	text(p, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every message.");
	if (tools)
		text(p, "\nCalls to these tools must go to the commentary channel: 'functions'.");
	special(p, "<|end|>");
	/* the first message, when system or developer, is the developer's
	 * instructions; the developer message also holds the tools */
	const char *instr = NULL;
	if (n && (is_role(&m[0], "system") || is_role(&m[0], "developer"))) {
		first = 1;
		instr = nonempty(m[0].content) ? m[0].content : NULL;
	}
	if (instr || tools) {
		special(p, "<|start|>");
		text(p, "developer");
		special(p, "<|message|>");
		if (instr) {
			text(p, "# Instructions\n\n");
			text(p, instr);
			text(p, tools ? "\n\n" : "");
		}
		if (tools && !p->err)
			p->err = hs__chat_tools_typescript(&p->text, tools);
		special(p, "<|end|>");
	}
	/* reasoning is dropped where a final answer follows it: the model sees
	 * only the chain of tool calls in progress (one pass, then a compare) */
	for (int i = first; i < n; i++)
		if (is_role(&m[i], "assistant") && !m[i].tool_name)
			last_final = i;
	for (int i = first; i < n; i++) {
		const struct hs_chat_message *x = &m[i];
		if (is_role(x, "user")) {
			special(p, "<|start|>");
			text(p, "user");
			special(p, "<|message|>");
			text(p, x->content);
			special(p, "<|end|>");
		} else if (is_role(x, "assistant") && x->tool_name) {
			if (nonempty(x->reasoning) && i > last_final)
				harmony_text(p, "analysis", x->reasoning);
			if (nonempty(x->content)) /* a preamble: text for the user before the call */
				harmony_text(p, "commentary", x->content);
			harmony_header(p, NULL, x->tool_name, "commentary");
			text(p, x->arguments ? x->arguments : "{}");
			special(p, "<|call|>");
			last_tool = x->tool_name;
		} else if (is_role(x, "assistant")) {
			int training_end = i == n - 1 && o->no_generation_prompt;
			if (training_end && nonempty(x->reasoning))
				harmony_text(p, "analysis", x->reasoning);
			harmony_header(p, NULL, NULL, "final");
			text(p, x->content);
			special(p, training_end ? "<|return|>" : "<|end|>");
			last_tool = NULL;
		} else if (is_role(x, "tool")) {
			const char *name = nonempty(x->tool_name) ? x->tool_name : last_tool;
			if (!name)
				return hs__error(EINVAL, "chat: tool message %d names no function and follows no tool call", i);
			harmony_header(p, name, NULL, "commentary");
			text(p, x->content);
			special(p, "<|end|>");
		}
		/* later system and developer messages are left out */
	}
	if (!o->no_generation_prompt) {
		special(p, "<|start|>");
		text(p, "assistant");
	}
	return 0;
}

/* ---- ChatML (Qwen3) --------------------------------------------------- */

/* s[0..n) without the newlines at its ends (lead, trail select which) */
static void put_trimmed(struct hs__chat_prompt *p, const char *s, size_t n, int lead, int trail)
{
	while (lead && n && *s == '\n')
		s++, n--;
	while (trail && n && s[n - 1] == '\n')
		n--;
	put(p, s, n);
}

/* Qwen3's tools block of the system message: one JSON object a line */
static void chatml_tools(struct hs__chat_prompt *p, const json_t *tools)
{
	size_t i;
	json_t *tool;

	text(p, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
		"You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
	json_array_foreach(tools, i, tool) {
		text(p, "\n");
		if (!p->err)
			p->err = hs__py_json(&p->text, tool);
	}
	text(p, "\n</tools>\n\nFor each function call, return a json object with function name and arguments within ");
	special(p, "<tool_call>");
	special(p, "</tool_call>");
	text(p, " XML tags:\n");
	special(p, "<tool_call>");
	text(p, "\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n");
	special(p, "</tool_call>");
}

/* An assistant message's tool call, as Qwen3's template writes it. */
static void chatml_call(struct hs__chat_prompt *p, const struct hs_chat_message *x)
{
	special(p, "<tool_call>");
	text(p, "\n{\"name\": \"");
	text(p, x->tool_name);
	text(p, "\", \"arguments\": ");
	text(p, x->arguments ? x->arguments : "{}");
	text(p, "}\n");
	special(p, "</tool_call>");
}

static int chatml(struct hs__chat_prompt *p, const struct hs_chat_message *m, int n, const struct hs_chat_opts *o,
		  const json_t *tools)
{
	int last_query = n - 1, first = 0;

	if (n && (is_role(&m[0], "system") || is_role(&m[0], "developer"))) {
		special(p, "<|im_start|>");
		text(p, "system\n");
		text(p, m[0].content);
		if (tools) {
			text(p, "\n\n");
			chatml_tools(p, tools);
		}
		special(p, "<|im_end|>");
		text(p, "\n");
		first = 1;
	} else if (tools) {
		special(p, "<|im_start|>");
		text(p, "system\n");
		chatml_tools(p, tools);
		special(p, "<|im_end|>");
		text(p, "\n");
	}
	/* reasoning is kept only after the last user turn that is not a tool response */
	for (int i = n - 1; i >= 0; i--)
		if (is_role(&m[i], "user") &&
		    !starts_ends(m[i].content ? m[i].content : "", "<tool_response>", "</tool_response>")) {
			last_query = i;
			break;
		}
	for (int i = first; i < n; i++) {
		const struct hs_chat_message *x = &m[i];
		const char *c = x->content ? x->content : "";
		if (is_role(x, "user") || is_role(x, "system") || is_role(x, "developer")) {
			special(p, "<|im_start|>");
			text(p, is_role(x, "user") ? "user\n" : "system\n");
			text(p, c);
			special(p, "<|im_end|>");
			text(p, "\n");
		} else if (i > first && same_turn(m, n, i)) {
			/* the same turn's next call: Qwen3's template writes the calls of
			 * one message one after another, a newline between */
			text(p, "\n");
			chatml_call(p, x);
			if (!same_turn(m, n, i + 1)) {
				special(p, "<|im_end|>");
				text(p, "\n");
			}
		} else if (is_role(x, "assistant")) {
			const char *r = x->reasoning ? x->reasoning : "", *end = strstr(c, "</think>");
			size_t rn = strlen(r);
			int split = !x->reasoning && end;
			if (split) { /* reasoning written into the content, as the template splits it */
				const char *open = NULL;
				for (const char *q = c; (q = strstr(q, "<think>")) && q < end; q += 7)
					open = q + 7;
				r = open ? open : c;
				rn = (size_t)(end - r);
				while (rn && r[rn - 1] == '\n')
					rn--;
				while (rn && *r == '\n')
					r++, rn--;
				for (const char *q = end; (q = strstr(q + 1, "</think>"));)
					end = q;
				c = end + 8;
			}
			special(p, "<|im_start|>");
			text(p, "assistant\n");
			if (i > last_query && (i == n - 1 || rn)) {
				special(p, "<think>");
				text(p, "\n");
				put_trimmed(p, r, rn, 1, 1);
				text(p, "\n");
				special(p, "</think>");
				text(p, "\n\n");
				put_trimmed(p, c, strlen(c), 1, 0);
			} else {
				put_trimmed(p, c, strlen(c), split, 0);
			}
			if (x->tool_name) {
				/* a newline between the text (as the template sees it) and the call */
				const char *t = c;
				while (split && *t == '\n')
					t++;
				text(p, *t ? "\n" : "");
				chatml_call(p, x);
			}
			if (!x->tool_name || !same_turn(m, n, i + 1)) {
				special(p, "<|im_end|>");
				text(p, "\n");
			}
		} else if (is_role(x, "tool")) {
			if (i == 0 || !is_role(&m[i - 1], "tool")) {
				special(p, "<|im_start|>");
				text(p, "user");
			}
			text(p, "\n");
			special(p, "<tool_response>");
			text(p, "\n");
			text(p, c);
			text(p, "\n");
			special(p, "</tool_response>");
			if (i == n - 1 || !is_role(&m[i + 1], "tool")) {
				special(p, "<|im_end|>");
				text(p, "\n");
			}
		}
	}
	if (!o->no_generation_prompt) {
		special(p, "<|im_start|>");
		text(p, "assistant\n");
		if (o->no_thinking) {
			special(p, "<think>");
			text(p, "\n\n");
			special(p, "</think>");
			text(p, "\n\n");
		}
	}
	return 0;
}

static int render(const hs_tokenizer *t, const struct hs_chat_message *msgs, int n, const struct hs_chat_opts *opts,
		  struct hs__chat_prompt *p)
{
	static const struct hs_chat_opts defaults;
	const struct hs_chat_opts *o = opts ? opts : &defaults;
	enum hs_chat_format f = o->format;
	json_t *tools = NULL;
	int rc;

	memset(p, 0, sizeof *p);
	p->t = t;
	if (n < 0 || (n && !msgs))
		return hs__error(EINVAL, "chat: %d messages", n);
	if (f == HS_CHAT_AUTO) {
		if (!t)
			return hs__error(EINVAL, "chat: format auto needs the tokenizer");
		f = hs_chat_format_of(t);
	}
	if ((rc = check_roles(msgs, n)) || (rc = hs__chat_tools_load(o->tools_json, &tools)))
		return rc;
	text(p, "");
	switch (f) {
	case HS_CHAT_HARMONY: rc = harmony(p, msgs, n, o, tools); break;
	case HS_CHAT_CHATML: rc = chatml(p, msgs, n, o, tools); break;
	case HS_CHAT_QWEN35: rc = hs__chat_qwen35(p, msgs, n, o, tools); break;
	case HS_CHAT_GLM: rc = hs__chat_glm(p, msgs, n, o, tools); break;
	case HS_CHAT_RAW:
		for (int i = 0; i < n; i++)
			text(p, msgs[i].content);
		rc = 0;
		break;
	default: rc = hs__error(EINVAL, "chat: format %d is not a chat format", (int)f);
	}
	json_decref(tools);
	return rc ? rc : p->err;
}

int hs_chat_render(const hs_tokenizer *t, const struct hs_chat_message *msgs, int n_msgs,
		   const struct hs_chat_opts *opts, char **prompt)
{
	struct hs__chat_prompt p;

	HS_NEED(prompt, -EINVAL);
	*prompt = NULL;
	int rc = render(t, msgs, n_msgs, opts, &p);

	free(p.sp);
	*prompt = rc ? NULL : p.text.p;
	if (rc)
		free(p.text.p);
	return rc;
}

int hs_chat_tokenize(const hs_tokenizer *t, const struct hs_chat_message *msgs, int n_msgs,
		     const struct hs_chat_opts *opts, int32_t **ids, int *n_ids)
{
	struct hs__chat_prompt p;
	int rc, n = 0, cap = 0;
	int32_t *v = NULL;
	size_t pos = 0;

	HS_NEED(ids, -EINVAL);
	HS_NEED(n_ids, -EINVAL);
	*ids = NULL;
	*n_ids = 0;
	if (!t)
		return hs__error(EINVAL, "chat: tokenizing needs the tokenizer");
	rc = render(t, msgs, n_msgs, opts, &p);
	/* text between the format's specials is encoded without parsing
	 * special text: a message cannot smuggle control tokens in */
	for (int i = 0; !rc && i <= p.n_sp; i++) {
		size_t end = i < p.n_sp ? p.sp[i].off : p.text.len;
		rc = hs__tokenize_append(t, p.text.p + pos, end - pos, 0, &v, &n, &cap);
		pos = end;
		if (!rc && i < p.n_sp && p.sp[i].id >= 0) {
			rc = hs__tokenize_append(t, p.text.p + end, p.sp[i].len, HS_TOK_PARSE_SPECIAL, &v, &n, &cap);
			pos = end + p.sp[i].len;
		}
	}
	free(p.sp);
	free(p.text.p);
	if (rc) {
		free(v);
		return rc;
	}
	*ids = v;
	*n_ids = n;
	return 0;
}
