/* The two chat formats whose tool calls are XML-like: Qwen3.5's (ChatML
 * turns, the reasoning block opened by the generation prompt, calls as
 * <function=NAME><parameter=KEY>VALUE</parameter>) and GLM-4.5's (role
 * tokens, <think></think> in every assistant turn, calls as NAME
 * <arg_key>KEY</arg_key><arg_value>VALUE</arg_value>).  Each is written as
 * the model's own chat template renders it under Hugging Face's jinja2
 * (tests/data/chat/xml.json, tests/gen-chat-xml-data.py): the templates
 * strip text with Python's str.strip(), take a call's arguments as a
 * mapping and print its values with str() (Qwen3.5) or json.dumps (GLM). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat-tools.h"
#include "text/chat.h"
#include "base/error.h"

/* ---- Python's str.strip() and the <think> split -------------------------- */

/* The length of the whitespace character at s[0..n) as Python's
 * str.isspace() has it (ASCII \t\n\v\f\r, 0x1c-0x1f, space; U+0085, U+00A0,
 * U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000), else 0. */
static int space_len(const unsigned char *s, size_t n)
{
	if ((*s >= 9 && *s <= 13) || (*s >= 0x1c && *s <= 0x20))
		return 1;
	if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
		return 2;
	if (n < 3)
		return 0;
	unsigned c = (unsigned)(s[0] & 0x0f) << 12 | (unsigned)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
	if ((s[0] & 0xf0) != 0xe0 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
		return 0;
	return c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
			       c == 0x205f || c == 0x3000
		       ? 3
		       : 0;
}

/* The length of the whitespace character that ends s[0..n), else 0. */
static int last_space(const char *s, size_t n)
{
	for (size_t k = 1; k <= 3 && k <= n; k++)
		if (space_len((const unsigned char *)s + n - k, k) == (int)k)
			return (int)k;
	return 0;
}

struct str {
	const char *s;
	size_t n;
};

static struct str strip(struct str x)
{
	int k;
	while (x.n && (k = space_len((const unsigned char *)x.s, x.n)))
		x.s += k, x.n -= (size_t)k;
	while (x.n && (k = last_space(x.s, x.n)))
		x.n -= (size_t)k;
	return x;
}

static struct str lstrip_nl(struct str x)
{
	while (x.n && *x.s == '\n')
		x.s++, x.n--;
	return x;
}

static struct str rstrip_nl(struct str x)
{
	while (x.n && x.s[x.n - 1] == '\n')
		x.n--;
	return x;
}

static struct str of(const char *s)
{
	return (struct str){ s ? s : "", s ? strlen(s) : 0 };
}

static const char *find(struct str x, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= x.n; i++)
		if (memcmp(x.s + i, needle, k) == 0)
			return x.s + i;
	return NULL;
}

/* Reasoning written into the content, as both templates take it apart:
 * reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1]
 * .lstrip('\n'), content = content.split('</think>')[-1].lstrip('\n'). */
static void split_think(struct str *content, struct str *reasoning)
{
	const char *end = find(*content, "</think>");
	if (!end)
		return;
	struct str before = rstrip_nl((struct str){ content->s, (size_t)(end - content->s) });
	const char *open;
	while ((open = find(before, "<think>")))
		before = (struct str){ open + 7, before.n - (size_t)(open + 7 - before.s) };
	*reasoning = lstrip_nl(before);
	const char *last = end, *q;
	while ((q = find((struct str){ last + 8, content->n - (size_t)(last + 8 - content->s) }, "</think>")))
		last = q;
	*content = lstrip_nl((struct str){ last + 8, content->n - (size_t)(last + 8 - content->s) });
}

static void put_str(struct hs__chat_prompt *p, struct str x)
{
	put(p, x.s, x.n);
}

/* ---- tool calls ------------------------------------------------------------------ */

/* The arguments of message i's call as the templates get them: a JSON
 * object (NULL text: none). */
static int call_args(const struct hs_chat_message *x, int i, json_t **out)
{
	json_error_t je;

	*out = NULL;
	if (!x->arguments)
		return 0;
	json_t *a = json_loads(x->arguments, JSON_DECODE_ANY, &je);
	if (!a)
		return hs__error(EINVAL, "chat: message %d: the tool call's arguments are not JSON: %s", i, je.text);
	if (!json_is_object(a)) {
		json_decref(a);
		return hs__error(EINVAL, "chat: message %d: the tool call's arguments are not a JSON object (this "
				 "format writes each argument by name)", i);
	}
	*out = a;
	return 0;
}

/* The calls of the turn that message i starts: i and the same-turn
 * messages after it.  Returns the index past the last one. */
static int turn_end(const struct hs_chat_message *m, int n, int i)
{
	int j = i + 1;
	while (same_turn(m, n, j))
		j++;
	return j;
}

/* One call in Qwen3.5's form; values as Python's str() prints them */
static int qwen35_call(struct hs__chat_prompt *p, const struct hs_chat_message *x, int i)
{
	json_t *args, *v;
	const char *key;
	int rc = call_args(x, i, &args);

	if (rc)
		return rc;
	special(p, "<tool_call>");
	text(p, "\n<function=");
	text(p, x->tool_name);
	text(p, ">\n");
	json_object_foreach(args, key, v) {
		text(p, "<parameter=");
		text(p, key);
		text(p, ">\n");
		if (!p->err)
			p->err = hs__py_str(&p->text, v);
		text(p, "\n</parameter>\n");
	}
	text(p, "</function>\n");
	special(p, "</tool_call>");
	json_decref(args);
	return 0;
}

/* One call in GLM-4.5's form; values that are not strings as JSON */
static int glm_call(struct hs__chat_prompt *p, const struct hs_chat_message *x, int i)
{
	json_t *args, *v;
	const char *key;
	int rc = call_args(x, i, &args);

	if (rc)
		return rc;
	text(p, "\n");
	special(p, "<tool_call>");
	text(p, x->tool_name);
	text(p, "\n");
	json_object_foreach(args, key, v) {
		special(p, "<arg_key>");
		text(p, key);
		special(p, "</arg_key>");
		text(p, "\n");
		special(p, "<arg_value>");
		if (json_is_string(v))
			put(p, json_string_value(v), json_string_length(v));
		else if (!p->err)
			p->err = hs__py_json(&p->text, v);
		special(p, "</arg_value>");
		text(p, "\n");
	}
	special(p, "</tool_call>");
	json_decref(args);
	return 0;
}

/* ---- Qwen3.5 ----------------------------------------------------------------------- */

static int is_system(const struct hs_chat_message *x)
{
	return is_role(x, "system") || is_role(x, "developer");
}

static void qwen35_tools(struct hs__chat_prompt *p, const json_t *tools)
{
	size_t i;
	json_t *tool;

	text(p, "system\n# Tools\n\nYou have access to the following functions:\n\n<tools>");
	json_array_foreach(tools, i, tool) {
		text(p, "\n");
		if (!p->err)
			p->err = hs__py_json(&p->text, tool);
	}
	text(p, "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n");
	special(p, "<tool_call>");
	text(p, "\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
		"<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\n"
		"multiple lines\n</parameter>\n</function>\n");
	special(p, "</tool_call>");
	text(p, "\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
		"<function=...></function> block must be nested within ");
	special(p, "<tool_call>");
	special(p, "</tool_call>");
	text(p, " XML tags\n- Required parameters MUST be specified\n- You may provide optional reasoning for your "
		"function call in natural language BEFORE the function call, but NOT after\n- If there is no function "
		"call available, answer the question like normal with your current knowledge and do not tell the "
		"user about function calls\n</IMPORTANT>");
}

int hs__chat_qwen35(struct hs__chat_prompt *p, const struct hs_chat_message *m, int n, const struct hs_chat_opts *o,
		    const json_t *tools)
{
	int last_query = -1, rc;

	if (!n)
		return hs__error(EINVAL, "chat: qwen35: no messages (the format needs a user message)");
	if (tools) {
		special(p, "<|im_start|>");
		qwen35_tools(p, tools);
		struct str c = strip(of(is_system(&m[0]) ? m[0].content : NULL));
		if (c.n) {
			text(p, "\n\n");
			put_str(p, c);
		}
		special(p, "<|im_end|>");
		text(p, "\n");
	} else if (is_system(&m[0])) {
		special(p, "<|im_start|>");
		text(p, "system\n");
		put_str(p, strip(of(m[0].content)));
		special(p, "<|im_end|>");
		text(p, "\n");
	}
	/* reasoning is written only after the last user turn that is not tool responses */
	for (int i = n - 1; i >= 0 && last_query < 0; i--) {
		struct str c = strip(of(m[i].content));
		char *z = is_role(&m[i], "user") ? strndup(c.s, c.n) : NULL;
		if (z && !starts_ends(z, "<tool_response>", "</tool_response>"))
			last_query = i;
		free(z);
	}
	if (last_query < 0)
		return hs__error(EINVAL, "chat: qwen35: no user message that is not tool responses (the format needs one)");
	for (int i = 0; i < n; i++) {
		const struct hs_chat_message *x = &m[i];
		struct str c = strip(of(x->content));
		if (is_system(x)) {
			if (i)
				return hs__error(EINVAL, "chat: qwen35: message %d: a system message after the first (the "
						 "format allows one, at the beginning)", i);
		} else if (is_role(x, "user")) {
			special(p, "<|im_start|>");
			text(p, "user\n");
			put_str(p, c);
			special(p, "<|im_end|>");
			text(p, "\n");
		} else if (is_role(x, "assistant")) {
			struct str r = of(x->reasoning);
			if (!x->reasoning)
				split_think(&c, &r);
			r = strip(r);
			special(p, "<|im_start|>");
			text(p, "assistant\n");
			if (i > last_query) {
				special(p, "<think>");
				text(p, "\n");
				put_str(p, r);
				text(p, "\n");
				special(p, "</think>");
				text(p, "\n\n");
			}
			put_str(p, c);
			int end = x->tool_name ? turn_end(m, n, i) : i + 1;
			for (int j = i; x->tool_name && j < end; j++) {
				text(p, j > i ? "\n" : strip(c).n ? "\n\n" : "");
				if ((rc = qwen35_call(p, &m[j], j)))
					return rc;
			}
			special(p, "<|im_end|>");
			text(p, "\n");
			i = end - 1;
		} else if (is_role(x, "tool")) {
			if (i > 0 && !is_role(&m[i - 1], "tool")) {
				special(p, "<|im_start|>");
				text(p, "user");
			}
			text(p, "\n");
			special(p, "<tool_response>");
			text(p, "\n");
			put_str(p, c);
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
		special(p, "<think>");
		text(p, "\n");
		if (o->no_thinking) {
			text(p, "\n");
			special(p, "</think>");
			text(p, "\n\n");
		}
	}
	return 0;
}

/* ---- GLM-4.5 ------------------------------------------------------------------------- */

int hs__chat_glm(struct hs__chat_prompt *p, const struct hs_chat_message *m, int n, const struct hs_chat_opts *o,
		 const json_t *tools)
{
	int last_user = -1, rc;

	special(p, "[gMASK]");
	special(p, "<sop>");
	if (tools) {
		size_t k;
		json_t *tool;
		special(p, "<|system|>");
		text(p, "\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
			"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n");
		json_array_foreach(tools, k, tool) {
			if (!p->err)
				p->err = hs__py_json(&p->text, tool);
			text(p, "\n");
		}
		text(p, "</tools>\n\nFor each function call, output the function name and arguments within the "
			"following XML format:\n");
		special(p, "<tool_call>");
		text(p, "{function-name}\n");
		for (int a = 1; a <= 2; a++) {
			special(p, "<arg_key>");
			text(p, a == 1 ? "{arg-key-1}" : "{arg-key-2}");
			special(p, "</arg_key>");
			text(p, "\n");
			special(p, "<arg_value>");
			text(p, a == 1 ? "{arg-value-1}" : "{arg-value-2}");
			special(p, "</arg_value>");
			text(p, "\n");
		}
		text(p, "...\n");
		special(p, "</tool_call>");
	}
	for (int i = 0; i < n; i++)
		if (is_role(&m[i], "user"))
			last_user = i;
	for (int i = 0; i < n; i++) {
		const struct hs_chat_message *x = &m[i];
		struct str c = of(x->content);
		if (is_role(x, "user")) {
			special(p, "<|user|>");
			text(p, "\n");
			put_str(p, c);
			if (o->no_thinking && !(c.n >= 8 && memcmp(c.s + c.n - 8, "/nothink", 8) == 0))
				text(p, "/nothink");
		} else if (is_role(x, "assistant")) {
			struct str r = of(x->reasoning);
			if (!x->reasoning)
				split_think(&c, &r);
			special(p, "<|assistant|>");
			text(p, "\n");
			special(p, "<think>");
			if (i > last_user)
				put_str(p, strip(r));
			special(p, "</think>");
			if (strip(c).n) {
				text(p, "\n");
				put_str(p, strip(c));
			}
			int end = x->tool_name ? turn_end(m, n, i) : i + 1;
			for (int j = i; x->tool_name && j < end; j++)
				if ((rc = glm_call(p, &m[j], j)))
					return rc;
			i = end - 1;
		} else if (is_role(x, "tool")) {
			if (i == 0 || !is_role(&m[i - 1], "tool"))
				special(p, "<|observation|>");
			text(p, "\n");
			special(p, "<tool_response>");
			text(p, "\n");
			put_str(p, c);
			text(p, "\n");
			special(p, "</tool_response>");
		} else if (is_system(x)) {
			special(p, "<|system|>");
			text(p, "\n");
			put_str(p, c);
		}
	}
	if (!o->no_generation_prompt) {
		special(p, "<|assistant|>");
		if (o->no_thinking) {
			text(p, "\n");
			special(p, "<think>");
			special(p, "</think>");
		}
	}
	return 0;
}
