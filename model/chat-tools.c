/* Tool definitions as the models' chat templates write them.  Qwen3's
 * template prints each tool with `tojson` (Hugging Face: Python's
 * json.dumps, ensure_ascii off); gpt-oss's turns each function's JSON schema
 * into a TypeScript-like type.  Both are rendered here by the templates'
 * rules, Jinja's whitespace and Python's truthiness included, so the bytes
 * match what the templates give (tests/data/chat/tools.json). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/chat-tools.h"
#include "base/error.h"

struct out {
	struct hs_buf *b;
	int err;
};

static void put(struct out *o, const char *s, size_t n)
{
	if (!o->err && n)
		o->err = hs__buf_put(o->b, s, n);
}

static void text(struct out *o, const char *s)
{
	put(o, s, strlen(s));
}

/* ---- JSON as Python writes it ------------------------------------------------ */

static void py_string(struct out *o, const char *s)
{
	text(o, "\"");
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];
		switch (c) {
		case '"': text(o, "\\\""); break;
		case '\\': text(o, "\\\\"); break;
		case '\n': text(o, "\\n"); break;
		case '\r': text(o, "\\r"); break;
		case '\t': text(o, "\\t"); break;
		case '\b': text(o, "\\b"); break;
		case '\f': text(o, "\\f"); break;
		default:
			if (c < 0x20) {
				snprintf(esc, sizeof esc, "\\u%04x", c);
				text(o, esc);
			} else {
				put(o, s, 1);
			}
		}
	}
	text(o, "\"");
}

/* Python's repr of a float: the shortest digits that read back to d, in
 * fixed notation when the exponent is -4..15, else d.ddde+XX. */
static void py_float(struct out *o, double d)
{
	char e[40], buf[64], digits[24];
	int prec, nd = 0, exp;

	if (d == 0) {
		text(o, signbit(d) ? "-0.0" : "0.0");
		return;
	}
	if (!isfinite(d)) { /* json.dumps' names; JSON text cannot hold these */
		text(o, isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
		return;
	}
	for (prec = 1; prec < 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, d);
		if (strtod(e, NULL) == d)
			break;
	}
	snprintf(e, sizeof e, "%.*e", prec - 1, d);
	const char *q = e;
	size_t n = 0;
	if (*q == '-')
		buf[n++] = *q++;
	for (; *q && *q != 'e'; q++)
		if (*q != '.')
			digits[nd++] = *q;
	exp = atoi(q + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	if (exp >= -4 && exp < 16) {
		if (exp < 0) {
			n += (size_t)snprintf(buf + n, sizeof buf - n, "0.%.*s%.*s", -exp - 1, "0000", nd, digits);
		} else {
			for (int i = 0; i <= exp; i++)
				buf[n++] = i < nd ? digits[i] : '0';
			buf[n++] = '.';
			if (nd > exp + 1)
				for (int i = exp + 1; i < nd; i++)
					buf[n++] = digits[i];
			else
				buf[n++] = '0';
		}
	} else {
		buf[n++] = digits[0];
		if (nd > 1) {
			buf[n++] = '.';
			for (int i = 1; i < nd; i++)
				buf[n++] = digits[i];
		}
		n += (size_t)snprintf(buf + n, sizeof buf - n, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
	}
	put(o, buf, n);
}

static void py_json(struct out *o, const json_t *v)
{
	char num[32];
	const char *key;
	json_t *x;
	size_t i;

	switch (json_typeof(v)) {
	case JSON_OBJECT:
		text(o, "{");
		i = 0;
		json_object_foreach((json_t *)v, key, x) {
			text(o, i++ ? ", " : "");
			py_string(o, key);
			text(o, ": ");
			py_json(o, x);
		}
		text(o, "}");
		break;
	case JSON_ARRAY:
		text(o, "[");
		json_array_foreach(v, i, x) {
			text(o, i ? ", " : "");
			py_json(o, x);
		}
		text(o, "]");
		break;
	case JSON_STRING: py_string(o, json_string_value(v)); break;
	case JSON_INTEGER:
		snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
		text(o, num);
		break;
	case JSON_REAL: py_float(o, json_real_value(v)); break;
	case JSON_TRUE: text(o, "true"); break;
	case JSON_FALSE: text(o, "false"); break;
	case JSON_NULL: text(o, "null"); break;
	}
}

int hs__py_json(struct hs_buf *b, const json_t *v)
{
	struct out o = { b, 0 };
	py_json(&o, v);
	return o.err;
}

int hs__py_json_string(struct hs_buf *b, const char *s)
{
	struct out o = { b, 0 };
	py_string(&o, s ? s : "");
	return o.err;
}

/* str(v) as Jinja prints a value and its join filter joins them: strings
 * bare, True/False/None.  (Lists and dicts come out as JSON, where Python
 * would write its repr.) */
static void py_str(struct out *o, const json_t *v)
{
	if (json_is_string(v))
		text(o, json_string_value(v));
	else if (json_is_boolean(v))
		text(o, json_is_true(v) ? "True" : "False");
	else if (json_is_null(v))
		text(o, "None");
	else
		py_json(o, v);
}

static void py_join(struct out *o, const json_t *list, const char *sep)
{
	size_t i;
	json_t *x;
	json_array_foreach(list, i, x) {
		text(o, i ? sep : "");
		py_str(o, x);
	}
}

/* ---- the template's view of a schema ------------------------------------------------ */

/* spec.key, NULL when spec is not an object or has no such key (undefined) */
static json_t *get(const json_t *spec, const char *key)
{
	return json_is_object(spec) ? json_object_get(spec, key) : NULL;
}

/* Python's truth of a value; undefined is false */
static int truthy(const json_t *v)
{
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_OBJECT: return json_object_size(v) > 0;
	case JSON_ARRAY: return json_array_size(v) > 0;
	case JSON_STRING: return json_string_length(v) > 0;
	case JSON_INTEGER: return json_integer_value(v) != 0;
	case JSON_REAL: return json_real_value(v) != 0;
	case JSON_TRUE: return 1;
	default: return 0;
	}
}

static int is(const json_t *v, const char *s)
{
	return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

/* `name not in (required or [])`: a list's items, a string's substrings,
 * an object's keys, as Python's `in` */
static int optional(const json_t *required, const char *name)
{
	size_t i;
	json_t *x;
	if (!truthy(required))
		return 1;
	if (json_is_string(required))
		return !strstr(json_string_value(required), name);
	if (json_is_object(required))
		return !json_object_get(required, name);
	json_array_foreach(required, i, x)
		if (is(x, name))
			return 0;
	return 1;
}

static size_t utf8_chars(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

/* render_typescript_type(spec) of gpt-oss's template */
static void ts_type(struct out *o, const json_t *spec)
{
	json_t *type = get(spec, "type"), *x;
	size_t i;

	if (is(type, "array")) {
		json_t *items = get(spec, "items"), *it = get(items, "type");
		if (!truthy(items))
			text(o, "any[]");
		else if (is(it, "string"))
			text(o, "string[]");
		else if (is(it, "number") || is(it, "integer"))
			text(o, "number[]");
		else if (is(it, "boolean"))
			text(o, "boolean[]");
		else {
			/* the item type, unless it is long or a union of objects */
			struct hs_buf inner = { 0 };
			struct out io = { &inner, 0 };
			ts_type(&io, items);
			if (io.err)
				o->err = io.err;
			else if (inner.len && !strcmp(inner.p, "object | object"))
				text(o, "any[]");
			else if (utf8_chars(inner.p, inner.len) > 50)
				text(o, "any[]");
			else {
				put(o, inner.p, inner.len);
				text(o, "[]");
			}
			free(inner.p);
		}
		if (truthy(get(spec, "nullable")))
			text(o, " | null");
	} else if (json_is_array(type) && json_array_size(type)) {
		py_join(o, type, " | ");
	} else if (truthy(get(spec, "oneOf"))) {
		/* (the template's check for object variants sets a variable inside
		 * its loop, which Jinja forgets after it: every oneOf is this) */
		json_t *variants = get(spec, "oneOf");
		json_array_foreach(variants, i, x) {
			ts_type(o, x);
			if (truthy(get(x, "description"))) {
				text(o, "// ");
				py_str(o, get(x, "description"));
			}
			if (get(x, "default")) {
				text(o, "                    // default: ");
				py_json(o, get(x, "default"));
			}
			if (i + 1 < json_array_size(variants))
				text(o, " | \n");
		}
	} else if (is(type, "string")) {
		if (truthy(get(spec, "enum")) && json_is_array(get(spec, "enum"))) {
			text(o, "\"");
			py_join(o, get(spec, "enum"), "\" | \"");
			text(o, "\"");
		} else {
			text(o, "string");
			if (truthy(get(spec, "nullable")))
				text(o, " | null");
		}
	} else if (is(type, "number") || is(type, "integer")) {
		text(o, "number");
	} else if (is(type, "boolean")) {
		text(o, "boolean");
	} else if (is(type, "object")) {
		json_t *props = get(spec, "properties"), *req = get(spec, "required");
		const char *name;
		if (!truthy(props) || !json_is_object(props)) {
			text(o, "object");
			return;
		}
		/* each property's type on its own line, indented as the template's source */
		text(o, "{\n");
		i = 0;
		json_object_foreach(props, name, x) {
			text(o, i++ ? ", " : "");
			text(o, name);
			text(o, optional(req, name) ? "?: \n                " : ": \n                ");
			ts_type(o, x);
		}
		text(o, "}");
	} else {
		text(o, "any");
	}
}

int hs__chat_tools_typescript(struct hs_buf *b, const json_t *tools)
{
	struct out o = { b, 0 };
	size_t i;
	json_t *tool;

	text(&o, "## functions\n\nnamespace functions {\n\n");
	json_array_foreach(tools, i, tool) {
		json_t *fn = get(tool, "function"), *params = get(fn, "parameters"), *desc = get(fn, "description");
		json_t *props = get(params, "properties"), *spec;
		const char *name;
		if (desc) { /* the template fails on a tool without one; it is left out here */
			text(&o, "// ");
			py_str(&o, desc);
			text(&o, "\n");
		}
		text(&o, "type ");
		text(&o, json_string_value(get(fn, "name")));
		if (!truthy(params) || !truthy(props) || !json_is_object(props)) {
			text(&o, " = () => any;\n\n");
			continue;
		}
		text(&o, " = (_: {\n");
		json_object_foreach(props, name, spec) {
			json_t *dflt = get(spec, "default");
			if (truthy(get(spec, "description"))) {
				text(&o, "// ");
				py_str(&o, get(spec, "description"));
				text(&o, "\n");
			}
			text(&o, name);
			text(&o, optional(get(params, "required"), name) ? "?: " : ": ");
			ts_type(&o, spec);
			/* the default as it is where the template adds it to a string
			 * (enum, oneOf), else as JSON */
			if (dflt && (truthy(get(spec, "enum")) || truthy(get(spec, "oneOf")))) {
				text(&o, truthy(get(spec, "enum")) ? ", // default: " : "// default: ");
				py_str(&o, dflt);
			} else if (dflt) {
				text(&o, ", // default: ");
				py_json(&o, dflt);
			}
			text(&o, ",\n");
		}
		text(&o, "}) => any;\n\n");
	}
	text(&o, "} // namespace functions");
	return o.err;
}

/* ---- the request's tools ------------------------------------------------------------ */

int hs__chat_tools_load(const char *tools_json, json_t **tools)
{
	json_error_t je;
	json_t *t, *x;
	size_t i;

	*tools = NULL;
	if (!tools_json)
		return 0;
	if (!(t = json_loads(tools_json, 0, &je)))
		return hs__error(EINVAL, "chat: tools: not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
	if (!json_is_array(t)) {
		json_decref(t);
		return hs__error(EINVAL, "chat: tools: an array of {\"type\": \"function\", \"function\": {...}} is needed");
	}
	json_array_foreach(t, i, x) {
		json_t *type = get(x, "type"), *fn = get(x, "function"), *name = get(fn, "name");
		json_t *desc = get(fn, "description"), *params = get(fn, "parameters");
		const char *why = NULL;
		if (!json_is_object(x))
			why = "not an object";
		else if (type && !is(type, "function"))
			why = "\"type\" is not \"function\"";
		else if (!json_is_object(fn))
			why = "no \"function\" object";
		else if (!json_is_string(name) || !json_string_length(name))
			why = "\"function\".\"name\" is missing or not a string";
		else if (desc && !json_is_string(desc))
			why = "\"function\".\"description\" is not a string";
		else if (params && !json_is_object(params) && !json_is_null(params))
			why = "\"function\".\"parameters\" is not an object";
		if (why) {
			json_decref(t);
			return hs__error(EINVAL, "chat: tools[%zu]: %s", i, why);
		}
	}
	if (!json_array_size(t)) {
		json_decref(t);
		return 0;
	}
	*tools = t;
	return 0;
}
