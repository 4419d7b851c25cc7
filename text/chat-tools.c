/* Tool definitions as the models' chat templates write them.  Qwen3's
 * template prints each tool with `tojson` (Hugging Face: Python's
 * json.dumps, ensure_ascii off), so that is written here byte for byte
 * (tests/data/chat/tools.json).  gpt-oss's harmony turns each function's
 * JSON schema into a TypeScript-like type as openai-harmony does (the
 * library that defines the format; tests/data/chat/harmony.json). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat-tools.h"
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

/* The shortest digits of d (finite, not 0) that read back to d: *nd
 * digits, no trailing zeros, d = 0.digits x 10^(exp+1); returns 1 when d < 0. */
static int shortest_digits(double d, char digits[24], int *nd, int *exp)
{
	char e[40];
	int prec;

	for (prec = 1; prec < 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, d);
		if (strtod(e, NULL) == d)
			break;
	}
	snprintf(e, sizeof e, "%.*e", prec - 1, d);
	const char *q = e + (*e == '-');
	*nd = 0;
	for (; *q && *q != 'e'; q++)
		if (*q != '.')
			digits[(*nd)++] = *q;
	*exp = atoi(q + 1);
	while (*nd > 1 && digits[*nd - 1] == '0')
		(*nd)--;
	return *e == '-';
}

/* Python's repr of a float: the shortest digits that read back to d, in
 * fixed notation when the exponent is -4..15, else d.ddde+XX. */
static void py_float(struct out *o, double d)
{
	char buf[64], digits[24];
	int nd, exp;
	size_t n = 0;

	if (d == 0) {
		text(o, signbit(d) ? "-0.0" : "0.0");
		return;
	}
	if (!isfinite(d)) { /* json.dumps' names; JSON text cannot hold these */
		text(o, isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
		return;
	}
	if (shortest_digits(d, digits, &nd, &exp))
		buf[n++] = '-';
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

/* serde_json's Display of a float (the ryu crate's spelling): the shortest
 * digits that read back, fixed notation for 1e-5 <= |d| < 1e16 (a whole
 * number with ".0"), else d.ddde-7 / 1e16, no '+' and no padding. */
static void serde_float(struct out *o, double d)
{
	char buf[64], digits[24];
	int nd, exp, kk;
	size_t n = 0;

	if (d == 0 || !isfinite(d)) { /* (JSON text holds no Inf or NaN) */
		text(o, signbit(d) ? "-0.0" : "0.0");
		return;
	}
	if (shortest_digits(d, digits, &nd, &exp))
		buf[n++] = '-';
	kk = exp + 1; /* 10^(kk-1) <= |d| < 10^kk */
	if (kk >= nd && kk <= 16) {
		for (int i = 0; i < kk; i++)
			buf[n++] = i < nd ? digits[i] : '0';
		buf[n++] = '.';
		buf[n++] = '0';
	} else if (kk > 0 && kk <= 16) {
		for (int i = 0; i < nd; i++) {
			if (i == kk)
				buf[n++] = '.';
			buf[n++] = digits[i];
		}
	} else if (kk > -5 && kk <= 0) {
		buf[n++] = '0';
		buf[n++] = '.';
		for (int i = 0; i < -kk; i++)
			buf[n++] = '0';
		for (int i = 0; i < nd; i++)
			buf[n++] = digits[i];
	} else {
		buf[n++] = digits[0];
		if (nd > 1)
			buf[n++] = '.';
		for (int i = 1; i < nd; i++)
			buf[n++] = digits[i];
		n += (size_t)snprintf(buf + n, sizeof buf - n, "e%d", kk - 1);
	}
	put(o, buf, n);
}

/* JSON text of v, keys in their order: as Python's json.dumps writes it
 * (", " and ": ", floats as repr) or, serde, as serde_json's Display
 * (compact, floats as the ryu crate writes them) */
static void json_text(struct out *o, const json_t *v, int serde)
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
			text(o, i++ ? serde ? "," : ", " : "");
			py_string(o, key);
			text(o, serde ? ":" : ": ");
			json_text(o, x, serde);
		}
		text(o, "}");
		break;
	case JSON_ARRAY:
		text(o, "[");
		json_array_foreach(v, i, x) {
			text(o, i ? serde ? "," : ", " : "");
			json_text(o, x, serde);
		}
		text(o, "]");
		break;
	case JSON_STRING: py_string(o, json_string_value(v)); break;
	case JSON_INTEGER:
		snprintf(num, sizeof num, "%lld", (long long)json_integer_value(v));
		text(o, num);
		break;
	case JSON_REAL:
		if (serde)
			serde_float(o, json_real_value(v));
		else
			py_float(o, json_real_value(v));
		break;
	case JSON_TRUE: text(o, "true"); break;
	case JSON_FALSE: text(o, "false"); break;
	case JSON_NULL: text(o, "null"); break;
	}
}

int hs__py_json(struct hs_buf *b, const json_t *v)
{
	struct out o = { b, 0 };
	json_text(&o, v, 0);
	return o.err;
}

int hs__py_str(struct hs_buf *b, const json_t *v)
{
	struct out o = { b, 0 };
	if (json_is_string(v))
		put(&o, json_string_value(v), json_string_length(v));
	else
		text(&o, json_is_true(v) ? "True" : json_is_false(v) ? "False" : json_is_null(v) ? "None" : "");
	if (!json_is_string(v) && !json_is_boolean(v) && !json_is_null(v))
		json_text(&o, v, 0);
	return o.err;
}

/* ---- harmony: JSON schemas as openai-harmony writes them ------------------------ */

/* spec.key, NULL when spec is not an object or has no such key */
static json_t *get(const json_t *spec, const char *key)
{
	return json_is_object(spec) ? json_object_get(spec, key) : NULL;
}

static int is(const json_t *v, const char *s)
{
	return json_is_string(v) && strcmp(json_string_value(v), s) == 0;
}

static void spaces(struct out *o, int n)
{
	static const char sp[] = "                                ";
	for (; n > 0; n -= 32)
		put(o, sp, n < 32 ? (size_t)n : 32);
}

/* indent, then the parts */
static void line(struct out *o, int indent, const char *a, const char *b, const char *c)
{
	spaces(o, indent);
	text(o, a);
	text(o, b);
	text(o, c);
}

static int is_enum(const json_t *spec)
{
	return json_array_size(get(spec, "enum")) > 0;
}

static const char *str_of(const json_t *spec, const char *key)
{
	return json_string_value(get(spec, key));
}

/* A default in a comment: a string in quotes as it is (not escaped); one
 * of an enum bare where enum_bare, else as JSON; other values as JSON. */
static void default_value(struct out *o, const json_t *d, const json_t *spec, int enum_bare)
{
	if (json_is_string(d) && !is_enum(spec)) {
		text(o, "\"");
		text(o, json_string_value(d));
		text(o, "\"");
	} else if (json_is_string(d) && enum_bare) {
		text(o, json_string_value(d));
	} else {
		json_text(o, d, 1);
	}
}

static void ts_type(struct out *o, const json_t *spec, int indent);

/* a variant's or property's type, " | null" added where it is nullable
 * and the type does not say null already */
static void ts_nullable(struct out *o, const json_t *spec, int indent)
{
	struct hs_buf t = { 0 };
	struct out to = { &t, 0 };

	ts_type(&to, spec, indent);
	if (!to.err && (to.err = hs__buf_put(&t, "", 1)) == 0) {
		put(o, t.p, t.len - 1);
		if (json_is_true(get(spec, "nullable")) && !strstr(t.p, "null"))
			text(o, " | null");
	}
	if (to.err && !o->err)
		o->err = to.err;
	free(t.p);
}

/* the comments after a oneOf variant: a description (NULL: none) and its default */
static void variant_comments(struct out *o, const json_t *v, const char *desc, int enum_bare)
{
	json_t *d = get(v, "default");

	if (desc) {
		text(o, " // ");
		text(o, desc);
	}
	if (d) {
		text(o, desc ? " default: " : " // default: ");
		default_value(o, d, v, enum_bare);
	}
}

/* a property whose schema is a oneOf: comments above, one variant a line;
 * a description the same as the first variant's is written once */
static void ts_one_of_property(struct out *o, const char *key, const json_t *val, int req, int indent)
{
	json_t *variants = get(val, "oneOf"), *v, *d = get(val, "default");
	const char *pdesc = str_of(val, "description"), *first = str_of(json_array_get(variants, 0), "description");
	int above = pdesc && !(first && strcmp(pdesc, first) == 0);
	size_t i;

	if (above)
		line(o, indent, "// ", pdesc, "\n");
	if (d) {
		line(o, indent, "// default: ", "", "");
		default_value(o, d, val, 1);
		text(o, "\n");
	}
	line(o, indent, key, req ? "" : "?", ":\n");
	json_array_foreach(variants, i, v) {
		const char *vd = str_of(v, "description");
		line(o, indent, " | ", "", "");
		ts_nullable(o, v, indent + 3);
		variant_comments(o, v, (i == 0 && above) || (vd && pdesc && strcmp(vd, pdesc) == 0) ? NULL : vd, 1);
		text(o, "\n");
	}
	line(o, indent, ",\n", "", "");
}

static void ts_object(struct out *o, const json_t *spec, int indent)
{
	json_t *props = get(spec, "properties"), *req = get(spec, "required"), *val, *x;
	json_t *required = json_object();
	const char *desc = str_of(spec, "description"), *key;
	size_t i;

	if (!required) {
		o->err = o->err ? o->err : hs__error(ENOMEM, "chat: out of memory");
		return;
	}
	/* the required names as a set: a lookup per property, not a scan */
	json_array_foreach(req, i, x)
		if (json_is_string(x))
			json_object_set(required, json_string_value(x), json_true());
	if (desc)
		line(o, indent, "// ", desc, "\n");
	text(o, "{\n");
	json_object_foreach(props, key, val) {
		int is_req = json_object_get(required, key) != NULL;
		json_t *examples = get(val, "examples"), *one_of = get(val, "oneOf"), *d;
		const char *title = str_of(val, "title"), *pd = str_of(val, "description");
		if (title) {
			line(o, indent, "// ", title, "\n");
			line(o, indent, "//\n", "", "");
		}
		if (!one_of && pd)
			line(o, indent, "// ", pd, "\n");
		if (json_array_size(examples)) {
			line(o, indent, "// Examples:\n", "", "");
			json_array_foreach(examples, i, x)
				if (json_is_string(x))
					line(o, indent, "// - \"", json_string_value(x), "\"\n");
		}
		if (json_is_array(one_of)) {
			ts_one_of_property(o, key, val, is_req, indent);
			continue;
		}
		line(o, indent, key, is_req ? "" : "?", ": ");
		ts_nullable(o, val, indent + 4);
		text(o, ",");
		if (!one_of && (d = get(val, "default"))) {
			text(o, " // default: ");
			default_value(o, d, val, 1);
		}
		text(o, "\n");
	}
	spaces(o, indent);
	text(o, "}");
	json_decref(required);
}

/* json_schema_to_typescript of openai-harmony (src/encoding.rs, v0.0.8) */
static void ts_type(struct out *o, const json_t *spec, int indent)
{
	json_t *one_of = get(spec, "oneOf"), *type = get(spec, "type"), *x;
	size_t i;
	int n = 0;

	if (json_is_array(one_of)) {
		json_array_foreach(one_of, i, x) {
			text(o, "\n");
			line(o, indent, " | ", "", "");
			ts_nullable(o, x, indent + 3);
			variant_comments(o, x, str_of(x, "description"), 0);
		}
		return;
	}
	if (json_is_array(type)) {
		json_array_foreach(type, i, x)
			if (json_is_string(x)) {
				text(o, n++ ? " | " : "");
				text(o, is(x, "integer") ? "number" : json_string_value(x));
			}
		if (n)
			return;
	}
	if (is(type, "object")) {
		ts_object(o, spec, indent);
	} else if (is(type, "string")) {
		json_array_foreach(get(spec, "enum"), i, x)
			if (json_is_string(x)) {
				text(o, n++ ? " | \"" : "\"");
				text(o, json_string_value(x));
				text(o, "\"");
			}
		if (!n)
			text(o, "string");
	} else if (is(type, "number") || is(type, "integer")) {
		text(o, "number");
	} else if (is(type, "boolean")) {
		text(o, "boolean");
	} else if (is(type, "array")) {
		if (get(spec, "items")) {
			ts_type(o, get(spec, "items"), indent);
			text(o, "[]");
		} else {
			text(o, "Array<any>");
		}
	} else {
		text(o, "any");
	}
}

/* each line of s (as Rust's str::lines: "\n" or "\r\n" ends one, a last
 * empty one is not a line) after "// " */
static void comment_lines(struct out *o, const char *s)
{
	while (*s) {
		const char *nl = strchr(s, '\n'), *end = nl ? nl : s + strlen(s);
		size_t n = (size_t)(end - s);
		if (nl && n && s[n - 1] == '\r')
			n--;
		text(o, "// ");
		put(o, s, n);
		text(o, "\n");
		s = nl ? nl + 1 : end;
	}
}

int hs__chat_tools_typescript(struct hs_buf *b, const json_t *tools)
{
	struct out o = { b, 0 };
	size_t i;
	json_t *tool;

	text(&o, "# Tools\n\n## functions\n\nnamespace functions {\n\n");
	json_array_foreach(tools, i, tool) {
		json_t *fn = get(tool, "function"), *params = get(fn, "parameters");
		comment_lines(&o, str_of(fn, "description") ? str_of(fn, "description") : "");
		text(&o, "type ");
		text(&o, str_of(fn, "name"));
		if (params && !json_is_null(params)) {
			text(&o, " = (_: ");
			ts_type(&o, params, 0);
			text(&o, ") => any;\n\n");
		} else {
			text(&o, " = () => any;\n\n");
		}
	}
	text(&o, "} // namespace functions");
	return o.err;
}

/* ---- the request's tools ------------------------------------------------------------ */

/* Nesting allowed in a function's parameters: harmony indents each level,
 * so a schema nested d deep renders to O(d^2) bytes; real ones nest a few. */
#define MAX_DEPTH 64
#define HS__STR2(x) #x
#define HS__STR(x) HS__STR2(x)

static int too_deep(const json_t *v, int left)
{
	const char *key;
	json_t *x;
	size_t i;

	if (!json_is_object(v) && !json_is_array(v))
		return 0;
	if (left == 0)
		return 1;
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
			if (too_deep(x, left - 1))
				return 1;
		return 0;
	}
	json_object_foreach((json_t *)v, key, x)
		if (too_deep(x, left - 1))
			return 1;
	return 0;
}

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
		else if (params && too_deep(params, MAX_DEPTH))
			why = "\"function\".\"parameters\" nests objects and arrays deeper than " HS__STR(MAX_DEPTH);
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
