/* JSON Schema to GBNF: the grammar of the JSON texts a schema allows, for
 * constrained generation (OpenAI's structured outputs and tool arguments).
 *
 * Supported: true/{} (any value), type (one or a list), nullable, const and
 * enum (each value exactly: strings and names spelled as json_dumps writes
 * them, whitespace allowed inside arrays and objects), anyOf and oneOf (both
 * as "any of"), allOf (merged keyword by keyword, an anyOf inside
 * distributed), $ref to JSON pointers inside the schema ("#", "#/$defs/a",
 * "#/definitions/a" ...: each target one rule, so recursion terminates),
 * properties in their declared order with the required ones present and the
 * optional ones skippable, additionalProperties false / true / a schema
 * (other members after the declared ones, never with a declared name), items,
 * prefixItems (and the older array form of items with additionalItems),
 * minItems, maxItems, minLength and maxLength (in characters, an escape
 * being one), format date, time, date-time and uuid.
 *
 * Ignored, as clients send them and a grammar cannot compare numbers
 * cheaply: minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf,
 * uniqueItems, minProperties, maxProperties; other formats (a plain string),
 * minLength/maxLength beside a format, annotations (title, description,
 * examples, default ...) and unknown keywords.  enum and const win over the
 * other keywords of their schema but type (values of other types are
 * dropped).
 *
 * Refused with -EINVAL naming the keyword's path: pattern, patternProperties,
 * propertyNames, not, if/then/else, contains, dependencies,
 * dependentRequired, dependentSchemas, unevaluatedItems,
 * unevaluatedProperties but true, $dynamicRef, refs outside the document,
 * schemas that match nothing (false, a required property whose schema is
 * false, minItems over maxItems ...), allOf parts that cannot be merged, a
 * $ref loop that reads nothing (left recursion), more than MAX_DEPTH levels
 * of nesting, and schemas whose grammar would be over MAX_OUT bytes or whose
 * expansion takes over MAX_WORK steps (allOf over anyOf multiplies, so a
 * small schema could otherwise ask for a huge grammar).
 *
 * The grammar is for generating, so it is stricter than JSON where that
 * costs a client nothing: object members come in the declared order;
 * whitespace is one space, or a newline with up to 40 blanks, between
 * tokens, and none before or after the value (generation ends right after
 * it); integers have at most 16 digits, fractions 16 and exponents 2 (every
 * number stays finite as a double); strings never hold \u0000 (C parsers
 * cannot); and the names of additional members have one spelling (see
 * key_rule()). */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "text/grammar.h"
#include "text/tokenizer.h"
#include "base/error.h"

enum {
	MAX_DEPTH = 64,
	MAX_OUT = 1 << 20,
	MAX_WORK = 200000,
	/* counts beyond this are not spelled out as repetitions: a larger
	 * minimum is refused, a larger maximum is dropped (as if absent: the
	 * generation's token limit ends such a string or array first) */
	MAX_REP = 1000,
	NAME_LEN = 64,
};

/* ---- shared rules, emitted once each when used ------------------------------ */

enum {
	P_WS,
	P_VALUE,
	P_OBJECT,
	P_ARRAY,
	P_STRING,
	P_CHAR,
	P_ESC,
	P_HEX,
	P_NUMBER,
	P_INTEGER,
	P_BOOLEAN,
	P_NULL,
	P_DATE,
	P_TIME,
	P_DATE_S,
	P_TIME_S,
	P_DATE_TIME_S,
	P_UUID_S,
	P_KCHAR,
	P_CTL_ESC,
	N_PRIMS
};

#define B(p) (1u << (p))

static const struct prim {
	const char *name, *body;
	unsigned deps;
} prims[N_PRIMS] = {
	/* bounded so that a model cannot loop in whitespace */
	[P_WS] = { "ws", "( \" \" | \"\\n\" [ \\t]{0,40} )?", 0 },
	[P_VALUE] = { "value", "object | array | string | number | boolean | null",
		      B(P_OBJECT) | B(P_ARRAY) | B(P_STRING) | B(P_NUMBER) | B(P_BOOLEAN) | B(P_NULL) },
	[P_OBJECT] = { "object",
		       "\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\"",
		       B(P_WS) | B(P_STRING) | B(P_VALUE) },
	[P_ARRAY] = { "array", "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"", B(P_WS) | B(P_VALUE) },
	[P_STRING] = { "string", "\"\\\"\" char* \"\\\"\"", B(P_CHAR) },
	[P_CHAR] = { "char", "[^\"\\\\\\x00-\\x1f] | \"\\\\\" esc", B(P_ESC) },
	/* \u escapes of surrogates only as a high-low pair (a lone one is
	 * refused by strict parsers) and no \u0000 (C parsers, jansson and so
	 * hotset's own among them, cannot hold it) */
	[P_ESC] = { "esc",
		    "[\"\\\\/bfnrt] | \"u\" ( \"00\" ( \"0\" [1-9a-fA-F] | [1-9a-fA-F] hex ) | \"0\" [1-9a-fA-F] hex{2} | "
		    "[1-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2} | [dD] [89abAB] hex{2} \"\\\\u\" [dD] [c-fC-F] hex{2} )",
		    B(P_HEX) },
	[P_HEX] = { "hex", "[0-9a-fA-F]", 0 },
	[P_NUMBER] = { "number", "integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )?", B(P_INTEGER) },
	[P_INTEGER] = { "integer", "\"-\"? ( \"0\" | [1-9] [0-9]{0,15} )", 0 },
	[P_BOOLEAN] = { "boolean", "\"true\" | \"false\"", 0 },
	[P_NULL] = { "null", "\"null\"", 0 },
	/* the shapes of RFC 3339 (any day 01-31 in any month) */
	[P_DATE] = { "date",
		     "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"3\" [01] )",
		     0 },
	[P_TIME] = { "time",
		     "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" ( [0-5] [0-9] | \"60\" ) ( \".\" [0-9]{1,9} )? "
		     "( \"Z\" | [+-] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
		     0 },
	[P_DATE_S] = { "date-string", "\"\\\"\" date \"\\\"\"", B(P_DATE) },
	[P_TIME_S] = { "time-string", "\"\\\"\" time \"\\\"\"", B(P_TIME) },
	[P_DATE_TIME_S] = { "date-time-string", "\"\\\"\" date \"T\" time \"\\\"\"", B(P_DATE) | B(P_TIME) },
	[P_UUID_S] = { "uuid-string", "\"\\\"\" hex{8} \"-\" hex{4} \"-\" hex{4} \"-\" hex{4} \"-\" hex{12} \"\\\"\"",
		       B(P_HEX) },
	/* the characters of additional property names, one spelling each */
	[P_KCHAR] = { "kchar", "[^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\bfnrt] | ctl-esc", B(P_CTL_ESC) },
	/* \u00XX for the controls without a short escape (\u0000 left out) */
	[P_CTL_ESC] = { "ctl-esc", "\"\\\\u00\" ( \"0\" [1-7bBeEfF] | \"1\" hex )", B(P_HEX) },
};

/* ---- the converter's state ---------------------------------------------------- */

/* One rule per $ref target (and the root). */
struct def {
	char name[NAME_LEN];
	char *path; /* the $ref as written: errors inside it name it */
	json_t *schema;
	/* the defs this one's grammar can begin with, before any character:
	 * a cycle among these is left recursion */
	int *first;
	int n_first, cap_first;
};

struct conv {
	json_t *doc;
	json_t *names; /* rule names taken (a set) */
	json_t *refs;  /* $ref text -> index into defs */
	json_t *paths; /* "%p" of a schema merged out of its place -> its path */
	json_t *keep;  /* schemas made here, alive until the end */
	struct def *defs;
	int n_defs, cap_defs, cur;
	int guard; /* > 0: inside an object or array of the current def */
	int depth;
	long work;
	unsigned need;
	unsigned long serial;
	struct hs_buf rules, path;
	struct hs_buf root_body;
	int err;
};

/* not expressible in a grammar (pattern: no regular expressions yet) */
#define REFUSED_KW                                                                                        \
	"not if then else patternProperties propertyNames contains minContains maxContains dependencies " \
	"dependentRequired dependentSchemas unevaluatedItems $dynamicRef $recursiveRef"

enum { T_NULL = 1, T_BOOL = 2, T_INT = 4, T_NUM = 8, T_STR = 16, T_ARR = 32, T_OBJ = 64, T_ALL = 127 };

static const struct {
	const char *name;
	unsigned mask;
} types[] = {
	{ "null", T_NULL },  { "boolean", T_BOOL }, { "integer", T_INT }, { "number", T_NUM | T_INT },
	{ "string", T_STR }, { "array", T_ARR },    { "object", T_OBJ },
};

/* Keywords that constrain a value and are handled (or refused) here,
 * space-separated; everything else is an annotation or ignored. */
static const char constraining_kw[] =
	"type enum const properties required additionalProperties items prefixItems additionalItems minItems maxItems "
	"minLength maxLength format pattern anyOf oneOf allOf $ref unevaluatedProperties " REFUSED_KW;
static const char object_kw[] = "properties required additionalProperties";
static const char array_kw[] = "items prefixItems additionalItems minItems maxItems";
static const char string_kw[] = "minLength maxLength format pattern";

#define N_OF(a) (sizeof(a) / sizeof(a)[0])

static int in_words(const char *k, const char *words)
{
	size_t n = strlen(k);

	for (const char *p = words; n && (p = strstr(p, k)); p++)
		if ((p == words || p[-1] == ' ') && (p[n] == ' ' || !p[n]))
			return 1;
	return 0;
}

/* s's first keyword among words, NULL when none */
static const char *has_any(json_t *s, const char *words)
{
	const char *k;
	json_t *v;

	json_object_foreach(s, k, v) {
		if (in_words(k, words))
			return k;
	}
	return NULL;
}

/* Whether s constrains values by some keyword other than skip. */
static int constraining(json_t *s, const char *skip)
{
	const char *k;
	json_t *v;

	json_object_foreach(s, k, v) {
		if ((!skip || strcmp(k, skip)) && in_words(k, constraining_kw) &&
		    !(!strcmp(k, "unevaluatedProperties") && json_is_true(v)))
			return 1;
	}
	return 0;
}

/* ---- output and errors -------------------------------------------------------- */

static void nomem(struct conv *c)
{
	if (!c->err)
		c->err = hs__error(ENOMEM, "json schema: out of memory");
}

static void fail(struct conv *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct conv *c, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (c->err)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	c->err = hs__error(EINVAL, "json schema: %s: %s", c->path.p ? c->path.p : "#", msg);
}

static void put(struct conv *c, struct hs_buf *b, const char *s, size_t n)
{
	if (c->err || !n)
		return;
	if (b->len + n > MAX_OUT) {
		fail(c, "the grammar would be over %d bytes", MAX_OUT);
		return;
	}
	if (hs__buf_put(b, s, n))
		nomem(c);
}

static void puts_(struct conv *c, struct hs_buf *b, const char *s)
{
	put(c, b, s, strlen(s));
}

static void putf(struct conv *c, struct hs_buf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void putf(struct conv *c, struct hs_buf *b, const char *fmt, ...)
{
	char t[128];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(t, sizeof t, fmt, ap);
	va_end(ap);
	put(c, b, t, n < (int)sizeof t ? (size_t)n : sizeof t - 1);
}

/* A user's string in a message: short, one line. */
static const char *shown(const char *s, char buf[48])
{
	size_t n = 0;

	for (; *s && n < 40; s++)
		buf[n++] = (unsigned char)*s < 0x20 ? '?' : *s;
	if (*s) {
		memcpy(buf + n, "...", 3);
		n += 3;
	}
	buf[n] = '\0';
	return buf;
}

/* A GBNF literal of the bytes s (UTF-8: the matcher reads characters). */
static void lit(struct conv *c, struct hs_buf *b, const char *s, size_t n)
{
	size_t run = 0;

	put(c, b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		char esc[8];

		if (ch >= 0x20 && ch != 0x7f && ch != '"' && ch != '\\')
			continue;
		put(c, b, s + run, i - run);
		run = i + 1;
		if (ch == '"' || ch == '\\')
			snprintf(esc, sizeof esc, "\\%c", ch);
		else if (ch == '\n')
			strcpy(esc, "\\n");
		else if (ch == '\t')
			strcpy(esc, "\\t");
		else if (ch == '\r')
			strcpy(esc, "\\r");
		else
			snprintf(esc, sizeof esc, "\\x%02x", ch);
		puts_(c, b, esc);
	}
	put(c, b, s + run, n - run);
	put(c, b, "\"", 1);
}

static void need(struct conv *c, int p);

/* A JSON value exactly (enum, const): scalars as their compact text, arrays
 * and objects element by element with whitespace where JSON allows it, so
 * that an indented instance matches too. */
static void lit_value(struct conv *c, struct hs_buf *b, json_t *v)
{
	if (json_is_array(v) || json_is_object(v)) {
		int obj = json_is_object(v);
		size_t i = 0;
		const char *k;
		json_t *x;

		need(c, P_WS);
		puts_(c, b, obj ? "\"{\" ws" : "\"[\" ws");
		if (obj) {
			json_object_foreach(v, k, x) {
				json_t *ks = json_string(k);
				puts_(c, b, i++ ? " \",\" ws " : " ");
				if (!ks)
					nomem(c);
				else
					lit_value(c, b, ks);
				json_decref(ks);
				puts_(c, b, " ws \":\" ws ");
				lit_value(c, b, x);
				puts_(c, b, " ws");
			}
		} else {
			json_array_foreach(v, i, x) {
				puts_(c, b, i ? " \",\" ws " : " ");
				lit_value(c, b, x);
				puts_(c, b, " ws");
			}
		}
		puts_(c, b, obj ? " \"}\"" : " \"]\"");
		return;
	}
	/* 15 digits give back a decimal of up to 15 digits as written */
	char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));

	if (!t) {
		nomem(c);
		return;
	}
	lit(c, b, t, strlen(t));
	free(t);
}

static void need(struct conv *c, int p)
{
	c->need |= B(p);
}

static void prim(struct conv *c, struct hs_buf *e, int p)
{
	need(c, p);
	puts_(c, e, prims[p].name);
}

/* ---- paths ---------------------------------------------------------------- */

/* A JSON-pointer segment: ~ and / escaped, control bytes as %XX (one line). */
static void seg_put(struct conv *c, struct hs_buf *b, const char *seg)
{
	put(c, b, "/", 1);
	for (; *seg; seg++) {
		unsigned char ch = (unsigned char)*seg;
		if (ch == '~')
			puts_(c, b, "~0");
		else if (ch == '/')
			puts_(c, b, "~1");
		else if (ch < 0x20)
			putf(c, b, "%%%02X", ch);
		else
			put(c, b, seg, 1);
	}
}

static size_t push(struct conv *c, const char *seg)
{
	size_t mark = c->path.len;
	seg_put(c, &c->path, seg);
	return mark;
}

static size_t push_i(struct conv *c, size_t i)
{
	char t[24];
	snprintf(t, sizeof t, "%zu", i);
	return push(c, t);
}

static void pop(struct conv *c, size_t mark)
{
	if (c->path.p && mark <= c->path.len) {
		c->path.len = mark;
		c->path.p[mark] = '\0';
	}
}

static void set_path(struct conv *c, const char *p)
{
	c->path.len = 0;
	if (c->path.p)
		c->path.p[0] = '\0';
	puts_(c, &c->path, p);
}

static void ptrkey(const json_t *s, char key[32])
{
	snprintf(key, 32, "%p", (const void *)s);
}

/* Remembers where a schema was written before it moves into a merged one. */
static void record(struct conv *c, json_t *v, const char *base, const char *seg, const char *seg2)
{
	struct hs_buf b = { 0 };
	char key[32];

	if (c->err || !json_is_object(v))
		return;
	ptrkey(v, key);
	if (json_object_get(c->paths, key))
		return;
	puts_(c, &b, base);
	if (seg)
		seg_put(c, &b, seg);
	if (seg2)
		seg_put(c, &b, seg2);
	if (!c->err && json_object_set_new(c->paths, key, json_string(b.p)))
		nomem(c);
	free(b.p);
}

static const char *path_of(struct conv *c, json_t *v)
{
	char key[32];
	ptrkey(v, key);
	return json_string_value(json_object_get(c->paths, key));
}

/* Errors inside a schema that was merged out of its place name its own path. */
struct saved {
	char *p;
	size_t len;
};

static void enter(struct conv *c, json_t *s, struct saved *sv)
{
	const char *at = path_of(c, s);

	sv->p = NULL;
	sv->len = c->path.len;
	if (!at || c->err)
		return;
	if (!(sv->p = strdup(c->path.p))) {
		nomem(c);
		return;
	}
	set_path(c, at);
}

static void leave(struct conv *c, struct saved *sv)
{
	if (sv->p) {
		set_path(c, sv->p);
		free(sv->p);
	} else {
		pop(c, sv->len);
	}
}

/* ---- names, rules, definitions --------------------------------------------- */

/* A fresh rule name from a hint (a property, a definition): [a-zA-Z0-9-]. */
static void new_name(struct conv *c, const char *hint, char name[NAME_LEN])
{
	size_t n = 0;

	for (const char *p = hint ? hint : ""; *p && n < 40; p++) {
		char ch = *p;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
			name[n++] = ch;
		else if (n && name[n - 1] != '-')
			name[n++] = '-';
	}
	while (n && name[n - 1] == '-')
		n--;
	if (!n)
		name[n++] = 'r';
	name[n] = '\0';
	while (json_object_get(c->names, name))
		snprintf(name + n, NAME_LEN - n, "-%lu", ++c->serial);
	if (json_object_set_new(c->names, name, json_null()))
		nomem(c);
}

static void add_rule(struct conv *c, const char *name, const struct hs_buf *body)
{
	puts_(c, &c->rules, name);
	puts_(c, &c->rules, " ::= ");
	put(c, &c->rules, body->p, body->len);
	puts_(c, &c->rules, "\n");
}

/* body as one element of a sequence: grouped when it is several */
static void wrap(struct conv *c, struct hs_buf *e, const struct hs_buf *body, int several, int top)
{
	if (several && !top)
		puts_(c, e, "( ");
	put(c, e, body->p, body->len);
	if (several && !top)
		puts_(c, e, " )");
}

/* body as its own rule (or the current rule's body at top) */
static void as_rule(struct conv *c, struct hs_buf *e, const struct hs_buf *body, const char *name, int top)
{
	if (top) {
		put(c, e, body->p, body->len);
		return;
	}
	add_rule(c, name, body);
	puts_(c, e, name);
}

static int add_def(struct conv *c, const char *hint, const char *path, json_t *schema)
{
	if (c->n_defs == c->cap_defs) {
		int cap = c->cap_defs ? 2 * c->cap_defs : 16;
		struct def *d = realloc(c->defs, sizeof *d * cap);
		if (!d) {
			nomem(c);
			return -1;
		}
		c->defs = d;
		c->cap_defs = cap;
	}
	struct def *d = &c->defs[c->n_defs];
	memset(d, 0, sizeof *d);
	if (!(d->path = strdup(path))) {
		nomem(c);
		return -1;
	}
	d->schema = schema;
	if (c->n_defs == 0)
		strcpy(d->name, "root");
	else
		new_name(c, hint, d->name);
	return c->n_defs++;
}

static void add_first(struct conv *c, int from, int to)
{
	struct def *d = &c->defs[from];

	for (int i = 0; i < d->n_first; i++)
		if (d->first[i] == to)
			return;
	if (d->n_first == d->cap_first) {
		int cap = d->cap_first ? 2 * d->cap_first : 4;
		int *f = realloc(d->first, sizeof *f * cap);
		if (!f) {
			nomem(c);
			return;
		}
		d->first = f;
		d->cap_first = cap;
	}
	d->first[d->n_first++] = to;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* The schema a "#..." reference points at (URI-decoded, then a JSON pointer),
 * NULL when there is none; *last gets its last segment (for a rule name). */
static json_t *resolve(struct conv *c, const char *ref, struct hs_buf *last)
{
	json_t *at = c->doc;
	const char *p = ref + 1;

	if (ref[0] != '#')
		return NULL;
	while (*p == '/' && at) {
		last->len = 0;
		for (p++; *p && *p != '/'; p++) {
			char ch = *p;
			if (ch == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
				ch = (char)(hexval(p[1]) * 16 + hexval(p[2]));
				p += 2;
			}
			put(c, last, &ch, 1);
		}
		if (c->err)
			return NULL;
		/* ~1 is "/" and ~0 is "~", undone in that order (RFC 6901) */
		size_t n = 0;
		char *s = last->p ? last->p : "";
		for (size_t i = 0; i < last->len; i++) {
			if (s[i] == '~' && i + 1 < last->len && (s[i + 1] == '0' || s[i + 1] == '1')) {
				s[n++] = s[i + 1] == '0' ? '~' : '/';
				i++;
			} else {
				s[n++] = s[i];
			}
		}
		last->len = n;
		if (last->p)
			last->p[n] = '\0';
		if (strlen(s) != n)
			return NULL;
		if (json_is_object(at)) {
			at = json_object_get(at, s);
		} else if (json_is_array(at)) {
			char *end;
			unsigned long i = strtoul(s, &end, 10);
			at = n && *end == '\0' && s[0] >= '0' && s[0] <= '9' && (n == 1 || s[0] != '0')
				     ? json_array_get(at, i)
				     : NULL;
		} else {
			at = NULL;
		}
	}
	return *p ? NULL : at;
}

/* ---- schemas ---------------------------------------------------------------- */

static void gen(struct conv *c, json_t *s, struct hs_buf *e, const char *hint, int top);

static json_t *keep(struct conv *c, json_t *v)
{
	if (!v || json_array_append_new(c->keep, v)) {
		nomem(c);
		return NULL;
	}
	return v;
}

static json_t *without(struct conv *c, json_t *s, const char *k1, const char *k2)
{
	json_t *r = keep(c, json_copy(s));

	if (r) {
		json_object_del(r, k1);
		if (k2)
			json_object_del(r, k2);
	}
	return r;
}

static unsigned type_bit(struct conv *c, json_t *t)
{
	char buf[48];

	if (!json_is_string(t)) {
		fail(c, "a type must be a string");
		return 0;
	}
	for (size_t i = 0; i < N_OF(types); i++)
		if (!strcmp(json_string_value(t), types[i].name))
			return types[i].mask;
	fail(c, "unknown type \"%s\"", shown(json_string_value(t), buf));
	return 0;
}

/* The types s allows by its "type" (T_ALL without one). */
static unsigned type_mask(struct conv *c, json_t *s, int *typed)
{
	json_t *t = json_object_get(s, "type");
	unsigned m = 0;

	*typed = t != NULL;
	if (!t)
		return T_ALL;
	size_t mark = push(c, "type");
	if (json_is_array(t)) {
		if (!json_array_size(t))
			fail(c, "an empty list of types matches nothing");
		for (size_t i = 0; i < json_array_size(t) && !c->err; i++) {
			size_t m2 = push_i(c, i);
			m |= type_bit(c, json_array_get(t, i));
			pop(c, m2);
		}
	} else {
		m = type_bit(c, t);
	}
	pop(c, mark);
	return m;
}

static unsigned value_bit(json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_NULL: return T_NULL;
	case JSON_TRUE:
	case JSON_FALSE: return T_BOOL;
	case JSON_INTEGER: return T_INT;
	case JSON_REAL: return T_NUM;
	case JSON_STRING: return T_STR;
	case JSON_ARRAY: return T_ARR;
	default: return T_OBJ;
	}
}

/* A count keyword (minLength ...): -1 when absent, else a non-negative integer. */
static long long count_kw(struct conv *c, json_t *s, const char *key)
{
	json_t *v = json_object_get(s, key);
	double d = json_number_value(v);

	if (!v)
		return -1;
	if (json_is_integer(v) && json_integer_value(v) >= 0)
		return json_integer_value(v);
	if (json_is_real(v) && d >= 0 && d < 1e18 && d == (double)(long long)d)
		return (long long)d;
	size_t mark = push(c, key);
	fail(c, "must be a non-negative integer");
	pop(c, mark);
	return -1;
}

/* The repetition suffix for lo..hi times (hi < 0: no limit); hi == 0 is
 * the caller's. */
static void rep(struct conv *c, struct hs_buf *e, long long lo, long long hi)
{
	if (hi < 0) {
		if (lo == 0)
			puts_(c, e, "*");
		else if (lo == 1)
			puts_(c, e, "+");
		else
			putf(c, e, "{%lld,}", lo);
	} else if (lo == hi) {
		if (lo != 1)
			putf(c, e, "{%lld}", lo);
	} else if (lo == 0 && hi == 1) {
		puts_(c, e, "?");
	} else {
		putf(c, e, "{%lld,%lld}", lo, hi);
	}
}

/* Bounds of a count pair: lo over MAX_REP is refused, hi over it dropped. */
static int bounds(struct conv *c, json_t *s, const char *kmin, const char *kmax, long long *lo, long long *hi)
{
	*lo = count_kw(c, s, kmin);
	*hi = count_kw(c, s, kmax);
	if (*lo < 0)
		*lo = 0;
	if (c->err)
		return -1;
	if (*hi >= 0 && *lo > *hi) {
		fail(c, "%s %lld is over %s %lld", kmin, *lo, kmax, *hi);
		return -1;
	}
	if (*lo > MAX_REP) {
		size_t mark = push(c, kmin);
		fail(c, "over %d is not supported", MAX_REP);
		pop(c, mark);
		return -1;
	}
	if (*hi > MAX_REP)
		*hi = -1;
	return 0;
}

static void gen_string(struct conv *c, json_t *s, struct hs_buf *e, int top)
{
	const char *fmt = json_string_value(json_object_get(s, "format"));
	long long lo, hi;

	if (json_object_get(s, "pattern")) {
		size_t mark = push(c, "pattern");
		fail(c, "not supported");
		pop(c, mark);
		return;
	}
	if (fmt) {
		static const struct {
			const char *name;
			int prim;
		} fmts[] = {
			{ "date", P_DATE_S }, { "time", P_TIME_S }, { "date-time", P_DATE_TIME_S }, { "uuid", P_UUID_S }
		};
		for (size_t i = 0; i < N_OF(fmts); i++)
			if (!strcmp(fmt, fmts[i].name)) {
				prim(c, e, fmts[i].prim);
				return;
			}
	}
	if (bounds(c, s, "minLength", "maxLength", &lo, &hi))
		return;
	if (lo == 0 && hi < 0) {
		prim(c, e, P_STRING);
		return;
	}
	struct hs_buf b = { 0 };
	puts_(c, &b, "\"\\\"\"");
	if (hi != 0) {
		need(c, P_CHAR);
		puts_(c, &b, " char");
		rep(c, &b, lo, hi);
	}
	puts_(c, &b, " \"\\\"\"");
	wrap(c, e, &b, 1, top);
	free(b.p);
}

/* One element of an array, its path below the array's. */
static void gen_child(struct conv *c, json_t *s, const char *seg, const char *seg2, size_t idx, struct hs_buf *e,
		      const char *hint)
{
	size_t mark = push(c, seg);

	if (seg2)
		push(c, seg2);
	else if (idx != (size_t)-1)
		push_i(c, idx);
	c->guard++;
	if (s)
		gen(c, s, e, hint, 0);
	else
		prim(c, e, P_VALUE);
	c->guard--;
	pop(c, mark);
}

static void gen_array(struct conv *c, json_t *s, struct hs_buf *e, const char *hint, int top)
{
	json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
	const char *items_kw = "items", *prefix_kw = "prefixItems";
	char name[NAME_LEN], h[NAME_LEN + 32];
	long long lo, hi;

	if (json_is_array(items)) { /* draft 4 to 2019-09 tuples */
		prefix = items;
		prefix_kw = "items";
		items = json_object_get(s, "additionalItems");
		items_kw = "additionalItems";
	}
	if (prefix && !json_is_array(prefix)) {
		size_t mark = push(c, prefix_kw);
		fail(c, "must be a list of schemas");
		pop(c, mark);
		return;
	}
	if (bounds(c, s, "minItems", "maxItems", &lo, &hi))
		return;
	size_t k = json_array_size(prefix);
	for (size_t i = 0; i < k; i++)
		if (json_is_false(json_array_get(prefix, i))) {
			k = i; /* no element can be there, nor after */
			if (hi < 0 || hi > (long long)i)
				hi = (long long)i;
		}
	if (json_is_false(items) && (hi < 0 || hi > (long long)k))
		hi = (long long)k;
	if (hi >= 0 && lo > hi) {
		fail(c, "minItems %lld is over the %lld elements the array may have", lo, hi);
		return;
	}
	if (hi >= 0 && (long long)k > hi)
		k = (size_t)hi;
	if (!top)
		new_name(c, hint, name);
	else
		snprintf(name, sizeof name, "%s", hint);
	need(c, P_WS);

	struct hs_buf b = { 0 }, it = { 0 }, tail = { 0 };
	int extra = hi < 0 || hi > (long long)k; /* elements after the prefix */
	if (extra)
		gen_child(c, json_is_object(items) ? items : NULL, items_kw, NULL, (size_t)-1, &it, "item");
	if (k == 0) {
		puts_(c, &b, "\"[\" ws ");
		if (extra && lo == 0) {
			puts_(c, &b, "( ");
			put(c, &b, it.p, it.len);
			puts_(c, &b, " ws");
			if (hi != 1) {
				puts_(c, &b, " ( \",\" ws ");
				put(c, &b, it.p, it.len);
				puts_(c, &b, " ws )");
				rep(c, &b, 0, hi < 0 ? -1 : hi - 1);
			}
			puts_(c, &b, " )? ");
		} else if (extra) {
			put(c, &b, it.p, it.len);
			puts_(c, &b, " ws ");
			if (hi != 1) {
				puts_(c, &b, "( \",\" ws ");
				put(c, &b, it.p, it.len);
				puts_(c, &b, " ws )");
				rep(c, &b, lo - 1, hi < 0 ? -1 : hi - 1);
				puts_(c, &b, " ");
			}
		}
		puts_(c, &b, "\"]\"");
	} else {
		/* the prefix's elements, each after the ones before it: the
		 * first lo present, the rest a chain of optional rules */
		struct hs_buf *el = calloc(k, sizeof *el);
		if (!el)
			nomem(c);
		for (size_t i = 0; i < k && el && !c->err; i++) {
			if (i)
				puts_(c, &el[i], "\",\" ws ");
			gen_child(c, json_array_get(prefix, i), prefix_kw, NULL, i, &el[i], "item");
			puts_(c, &el[i], " ws");
		}
		if (extra) {
			long long tlo = lo > (long long)k ? lo - (long long)k : 0;
			long long thi = hi < 0 ? -1 : hi - (long long)k;
			puts_(c, &tail, "( \",\" ws ");
			put(c, &tail, it.p, it.len);
			puts_(c, &tail, " ws )");
			rep(c, &tail, tlo, thi);
		}
		puts_(c, &b, "\"[\" ws ");
		size_t req = lo < (long long)k ? (size_t)lo : k;
		for (size_t i = 0; i < req && el; i++) {
			put(c, &b, el[i].p, el[i].len);
			puts_(c, &b, " ");
		}
		if (req == k) {
			put(c, &b, tail.p, tail.len);
			if (tail.len)
				puts_(c, &b, " ");
		} else if (el) {
			char next[NAME_LEN] = "";
			for (size_t i = k; i-- > req && !c->err;) {
				struct hs_buf r = { 0 };
				char rn[NAME_LEN];
				snprintf(h, sizeof h, "%s-%zu", name, i);
				new_name(c, h, rn);
				put(c, &r, el[i].p, el[i].len);
				if (i + 1 < k) {
					puts_(c, &r, " ");
					puts_(c, &r, next);
					puts_(c, &r, "?");
				} else if (tail.len) {
					puts_(c, &r, " ");
					put(c, &r, tail.p, tail.len);
				}
				add_rule(c, rn, &r);
				free(r.p);
				strcpy(next, rn);
			}
			puts_(c, &b, next);
			puts_(c, &b, "? ");
		}
		puts_(c, &b, "\"]\"");
		for (size_t i = 0; i < k && el; i++)
			free(el[i].p);
		free(el);
	}
	if (!c->err)
		as_rule(c, e, &b, name, top);
	free(b.p);
	free(it.p);
	free(tail.p);
}

/* ---- objects ---------------------------------------------------------------- */

struct prop {
	const char *key;
	json_t *schema; /* NULL: any value */
	int required;
	const char *seg, *seg2; /* its path below the object's */
	struct hs_buf kv;       /* "\"key\"" ws ":" ws value ws */
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static size_t utf8_len(unsigned char ch)
{
	return ch < 0xc0 ? 1 : ch < 0xe0 ? 2 : ch < 0xf0 ? 3 : 4;
}

/* The names of additional properties: any JSON string but the declared
 * names, so that a declared property can neither come twice nor escape its
 * schema as an additional one.  For that each character of such a name has
 * one spelling (kchar: raw, or \" \\ \b \f \n \r \t, or \u00XX for the other
 * controls; no \/ and no \u escapes of other characters), so that names
 * differ exactly when their spellings do.  A trie of the declared names, one
 * rule per node (a work list, no recursion: names may be long): there the
 * name may end (unless a declared one ends there), go on with a character no
 * declared name has there (then anything), or follow the declared names.
 * out gets what follows the opening quote. */
struct knode {
	size_t lo, hi, d;
	char name[NAME_LEN];
};

static uint32_t utf8_cp(const unsigned char *s, size_t n)
{
	uint32_t v = n == 1 ? s[0] : n == 2 ? s[0] & 0x1fu : n == 3 ? s[0] & 0x0fu : s[0] & 0x07u;
	for (size_t i = 1; i < n; i++)
		v = v << 6 | (s[i] & 0x3fu);
	return v;
}

/* the short escape letter of cp, 0 when it has none */
static char short_esc(uint32_t cp)
{
	switch (cp) {
	case '"': return '"';
	case '\\': return '\\';
	case 8: return 'b';
	case 12: return 'f';
	case '\n': return 'n';
	case '\r': return 'r';
	case '\t': return 't';
	default: return 0;
	}
}

/* cp as kchar spells it */
static void spell(struct conv *c, struct hs_buf *b, uint32_t cp, const char *raw, size_t n)
{
	char t[8];

	if (short_esc(cp)) {
		t[0] = '\\';
		t[1] = short_esc(cp);
		lit(c, b, t, 2);
	} else if (cp < 0x20) {
		const char *hx = "0123456789abcdef";
		snprintf(t, sizeof t, "\\u00%c", hx[cp >> 4]);
		lit(c, b, t, 5);
		if ((cp & 15) < 10)
			putf(c, b, " \"%c\"", hx[cp & 15]);
		else
			putf(c, b, " [%c%c]", hx[cp & 15], hx[cp & 15] - 'a' + 'A');
	} else {
		lit(c, b, raw, n);
	}
}

static void key_rule(struct conv *c, const char **keys, int n, const char *base, char out[NAME_LEN])
{
	struct knode *st = NULL;
	size_t ns = 0, cap = 0;
	char h[NAME_LEN + 32];

	qsort(keys, n, sizeof *keys, cmp_str); /* UTF-8 in byte order: by code points */
	need(c, P_KCHAR);
	snprintf(h, sizeof h, "%s-key", base);
	new_name(c, h, out);
	for (struct knode cur = { 0, (size_t)n, 0, "" }; !c->err;) {
		struct hs_buf b = { 0 }, cls = { 0 }, kids = { 0 };
		char shorts[8] = "";
		int ctl[32] = { 0 }, n_ctl = 0;
		if (!cur.name[0])
			strcpy(cur.name, out);
		int terminal = cur.lo < cur.hi && strlen(keys[cur.lo]) == cur.d;
		if (!terminal)
			puts_(c, &b, "\"\\\"\" | ");
		puts_(c, &cls, "[^\"\\\\\\x00-\\x1f");
		for (size_t i = cur.lo + terminal; i < cur.hi && !c->err;) {
			const char *k = keys[i];
			size_t cl = utf8_len((unsigned char)k[cur.d]), j = i + 1;
			uint32_t cp = utf8_cp((const unsigned char *)k + cur.d, cl);
			while (j < cur.hi && !strncmp(keys[j] + cur.d, k + cur.d, cl))
				j++;
			if (short_esc(cp))
				shorts[strlen(shorts)] = short_esc(cp);
			else if (cp < 0x20)
				ctl[cp] = 1, n_ctl++;
			else if (cp == ']' || cp == '^' || cp == '-' || cp == '[')
				putf(c, &cls, "\\x%02x", cp);
			else
				put(c, &cls, k + cur.d, cl);
			if (ns == cap) {
				size_t nc = cap ? 2 * cap : 16;
				struct knode *t = realloc(st, sizeof *t * nc);
				if (!t) {
					nomem(c);
					break;
				}
				st = t;
				cap = nc;
			}
			struct knode *kid = &st[ns++];
			kid->lo = i;
			kid->hi = j;
			kid->d = cur.d + cl;
			snprintf(h, sizeof h, "%s-key", base);
			new_name(c, h, kid->name);
			puts_(c, &kids, " | ");
			spell(c, &kids, cp, k + cur.d, cl);
			puts_(c, &kids, " ");
			puts_(c, &kids, kid->name);
			i = j;
		}
		/* a character no declared name has here, then anything */
		put(c, &b, cls.p, cls.len);
		puts_(c, &b, "] kchar* \"\\\"\"");
		struct hs_buf se = { 0 };
		for (const char *e = "\"\\bfnrt"; *e; e++)
			if (!strchr(shorts, *e))
				putf(c, &se, *e == '\\' ? "\\\\" : "%c", *e);
		if (se.len) {
			puts_(c, &b, " | \"\\\\\" [");
			put(c, &b, se.p, se.len);
			puts_(c, &b, "] kchar* \"\\\"\"");
		}
		if (!n_ctl) {
			puts_(c, &b, " | ctl-esc kchar* \"\\\"\"");
		} else {
			int first = 1;
			for (uint32_t cp = 1; cp < 0x20; cp++)
				if (!ctl[cp] && !short_esc(cp)) {
					puts_(c, &b, first ? " | ( " : " | ");
					spell(c, &b, cp, NULL, 0);
					first = 0;
				}
			if (!first)
				puts_(c, &b, " ) kchar* \"\\\"\"");
		}
		put(c, &b, kids.p, kids.len);
		add_rule(c, cur.name, &b);
		free(b.p);
		free(cls.p);
		free(kids.p);
		free(se.p);
		if (!ns)
			break;
		cur = st[--ns];
	}
	free(st);
}

static int has_false(json_t *props)
{
	const char *k;
	json_t *v;

	json_object_foreach(props, k, v) {
		if (json_is_false(v))
			return 1;
	}
	return 0;
}

static void gen_object(struct conv *c, json_t *s, struct hs_buf *e, const char *hint, int top)
{
	json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
	json_t *ap = json_object_get(s, "additionalProperties"), *reqset = NULL;
	struct prop *p = NULL;
	struct hs_buf b = { 0 }, kva = { 0 }, star = { 0 };
	char name[NAME_LEN], h[NAME_LEN + 32], buf[48];
	const char *k;
	json_t *v;
	int n = 0;
	size_t mark;

	if (props && !json_is_object(props)) {
		mark = push(c, "properties");
		fail(c, "must be an object");
		pop(c, mark);
		return;
	}
	if (req && !json_is_array(req)) {
		mark = push(c, "required");
		fail(c, "must be a list of names");
		pop(c, mark);
		return;
	}
	if (ap && !json_is_object(ap) && !json_is_boolean(ap)) {
		mark = push(c, "additionalProperties");
		fail(c, "must be a schema");
		pop(c, mark);
		return;
	}
	if (!(reqset = json_object())) {
		nomem(c);
		return;
	}
	for (size_t i = 0; i < json_array_size(req) && !c->err; i++) {
		json_t *r = json_array_get(req, i);
		if (!json_is_string(r)) {
			mark = push(c, "required");
			push_i(c, i);
			fail(c, "must be a string");
			pop(c, mark);
		} else if (json_object_set_new(reqset, json_string_value(r), json_null())) {
			nomem(c);
		}
	}
	if (c->err)
		goto out;
	if (!(p = calloc(json_object_size(props) + json_object_size(reqset) + 1, sizeof *p))) {
		nomem(c);
		goto out;
	}
	json_object_foreach(props, k, v) {
		int r = json_object_get(reqset, k) != NULL;
		if (json_is_false(v)) {
			if (r) {
				mark = push(c, "properties");
				push(c, k);
				fail(c, "required, but its schema is false");
				pop(c, mark);
			}
			continue;
		}
		p[n++] = (struct prop){ k, v, r, "properties", k, { 0 } };
	}
	/* required names without a schema of their own take additionalProperties' */
	json_object_foreach(reqset, k, v) {
		if (json_object_get(props, k))
			continue;
		if (json_is_false(ap)) {
			mark = push(c, "required");
			fail(c, "\"%s\" is required, but not in properties and additionalProperties is false",
			     shown(k, buf));
			pop(c, mark);
		}
		p[n++] = (struct prop){ k, json_is_object(ap) ? ap : NULL, 1, "additionalProperties", NULL, { 0 } };
	}
	if (c->err)
		goto out;
	if (!top)
		new_name(c, hint, name);
	else
		snprintf(name, sizeof name, "%s", hint);
	int extra = !json_is_false(ap);
	if (n == 0 && extra && !json_is_object(ap) && !has_false(props)) {
		prim(c, e, P_OBJECT);
		goto out;
	}
	need(c, P_WS);
	for (int i = 0; i < n && !c->err; i++) {
		json_t *ks = json_string(p[i].key);
		if (!ks) {
			nomem(c);
			break;
		}
		lit_value(c, &p[i].kv, ks);
		json_decref(ks);
		puts_(c, &p[i].kv, " ws \":\" ws ");
		gen_child(c, p[i].schema, p[i].seg, p[i].seg2, (size_t)-1, &p[i].kv, p[i].key);
		puts_(c, &p[i].kv, " ws");
	}
	if (extra) {
		char kname[NAME_LEN];
		/* the names declared, those whose schema is false among them */
		const char **names = malloc(sizeof *names * (json_object_size(props) + n + 1));
		int nn = 0;
		if (!names)
			nomem(c);
		json_object_foreach(props, k, v) {
			if (names && json_is_false(v))
				names[nn++] = k;
		}
		for (int i = 0; i < n && names; i++)
			names[nn++] = p[i].key;
		if (nn && names) {
			key_rule(c, names, nn, name, kname);
			puts_(c, &kva, "\"\\\"\" ");
			puts_(c, &kva, kname);
		} else {
			prim(c, &kva, P_STRING);
		}
		free(names);
		puts_(c, &kva, " ws \":\" ws ");
		snprintf(h, sizeof h, "%s-extra", name);
		gen_child(c, json_is_object(ap) ? ap : NULL, "additionalProperties", NULL, (size_t)-1, &kva, h);
		puts_(c, &kva, " ws");
		puts_(c, &star, "( \",\" ws ");
		put(c, &star, kva.p, kva.len);
		puts_(c, &star, " )*");
	}

	/* Members in the declared order, a comma before each but the first.
	 * Until the first required member r, any of them may be the first
	 * present: one alternative per candidate j, member j then the rest
	 * after it, each with its comma (required ones bare, optional ones
	 * under ?).  Those rests are shared through a chain of rules
	 * (rest_k ::= member_k rest_k+1), which keeps the grammar linear in
	 * the number of members. */
	int r = 0;
	while (r < n && !p[r].required)
		r++;
	int n_alt = r < n ? r + 1 : n, na = 0;
	struct hs_buf alts = { 0 }, *alt = NULL;
	if (n_alt && !(alt = calloc(n_alt, sizeof *alt)))
		nomem(c);
	char nxt[NAME_LEN] = "";
	struct hs_buf t = { 0 };
	for (int i = n_alt > 1 ? n_alt : 1; i < n && alt; i++) {
		if (t.len)
			puts_(c, &t, " ");
		puts_(c, &t, p[i].required ? "\",\" ws " : "( \",\" ws ");
		put(c, &t, p[i].kv.p, p[i].kv.len);
		if (!p[i].required)
			puts_(c, &t, " )?");
	}
	if (star.len && alt) {
		if (t.len)
			puts_(c, &t, " ");
		put(c, &t, star.p, star.len);
	}
	if (n_alt == 1) {
		put(c, &alt[0], p[0].kv.p, p[0].kv.len);
		if (t.len) {
			puts_(c, &alt[0], " ");
			put(c, &alt[0], t.p, t.len);
		}
	} else if (n_alt > 1) {
		if (t.len) {
			snprintf(h, sizeof h, "%s-rest", name);
			new_name(c, h, nxt);
			add_rule(c, nxt, &t);
		}
		for (int k2 = n_alt - 1; k2 >= 0 && !c->err; k2--) {
			put(c, &alt[k2], p[k2].kv.p, p[k2].kv.len);
			if (nxt[0]) {
				puts_(c, &alt[k2], " ");
				puts_(c, &alt[k2], nxt);
			}
			if (k2 == 0)
				break;
			struct hs_buf rb = { 0 };
			puts_(c, &rb, p[k2].required ? "\",\" ws " : "( \",\" ws ");
			put(c, &rb, p[k2].kv.p, p[k2].kv.len);
			if (!p[k2].required)
				puts_(c, &rb, " )?");
			if (nxt[0]) {
				puts_(c, &rb, " ");
				puts_(c, &rb, nxt);
			}
			snprintf(h, sizeof h, "%s-rest", name);
			new_name(c, h, nxt);
			add_rule(c, nxt, &rb);
			free(rb.p);
		}
	}
	for (int i = 0; i < n_alt && alt; i++) {
		if (na++)
			puts_(c, &alts, " | ");
		put(c, &alts, alt[i].p, alt[i].len);
	}
	if (r == n && extra) {
		if (na++)
			puts_(c, &alts, " | ");
		put(c, &alts, kva.p, kva.len);
		puts_(c, &alts, " ");
		put(c, &alts, star.p, star.len);
	}
	int opt = r == n;
	puts_(c, &b, "\"{\" ws ");
	if (na == 1 && !opt) {
		put(c, &b, alts.p, alts.len);
		puts_(c, &b, " ");
	} else if (na) {
		puts_(c, &b, "( ");
		put(c, &b, alts.p, alts.len);
		puts_(c, &b, opt ? " )? " : " ) ");
	}
	puts_(c, &b, "\"}\"");
	if (!c->err)
		as_rule(c, e, &b, name, top);
	for (int i = 0; i < n_alt && alt; i++)
		free(alt[i].p);
	free(alt);
	free(alts.p);
	free(t.p);
out:
	for (int i = 0; i < n && p; i++)
		free(p[i].kv.p);
	free(p);
	free(b.p);
	free(kva.p);
	free(star.p);
	json_decref(reqset);
}

/* ---- allOf: one schema out of several --------------------------------------- */

/* The parts of s that must all hold, into out: nested allOf and $ref
 * followed, true dropped, each part remembering its path. */
static void flatten(struct conv *c, json_t *s, json_t *out, int depth)
{
	struct saved sv;
	char buf[48];

	if (c->err)
		return;
	if (++c->work > MAX_WORK) {
		fail(c, "too complex: over %d steps to expand", MAX_WORK);
		return;
	}
	if (depth > MAX_DEPTH) {
		fail(c, "allOf and $ref nested more than %d deep", MAX_DEPTH);
		return;
	}
	if (json_is_true(s))
		return;
	enter(c, s, &sv);
	json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf"), *rest = s;
	if (json_is_false(s))
		fail(c, "false: no value matches it");
	else if (!json_is_object(s))
		fail(c, "a schema must be an object, true or false");
	else if (ref || all)
		rest = without(c, s, "$ref", "allOf");
	if (ref && !c->err) {
		size_t mark = push(c, "$ref");
		struct hs_buf last = { 0 };
		const char *r = json_string_value(ref);
		json_t *target = r ? resolve(c, r, &last) : NULL;
		free(last.p);
		if (!r)
			fail(c, "must be a string");
		else if (r[0] != '#')
			fail(c, "\"%s\": only references inside the schema (\"#...\") are supported", shown(r, buf));
		else if (!target)
			fail(c, "\"%s\" is not in the schema", shown(r, buf));
		pop(c, mark);
		if (!c->err) {
			char *here = strdup(c->path.p);
			if (!here)
				nomem(c);
			set_path(c, r);
			flatten(c, target, out, depth + 1);
			if (here)
				set_path(c, here);
			free(here);
		}
	}
	if (all && !c->err) {
		size_t mark = push(c, "allOf");
		if (!json_is_array(all) || !json_array_size(all))
			fail(c, "must be a non-empty list of schemas");
		for (size_t i = 0; i < json_array_size(all) && !c->err; i++) {
			size_t m2 = push_i(c, i);
			flatten(c, json_array_get(all, i), out, depth + 1);
			pop(c, m2);
		}
		pop(c, mark);
	}
	if (!c->err && rest && constraining(rest, NULL)) {
		record(c, rest, c->path.p, NULL, NULL);
		if (json_array_append(out, rest))
			nomem(c);
	}
	leave(c, &sv);
}

static const char *part_path(struct conv *c, json_t *b)
{
	const char *p = path_of(c, b);
	return p ? p : c->path.p;
}

/* One schema that holds where all the parts in br hold.  An anyOf in a part
 * is distributed (allOf [A, anyOf [B, C]] is anyOf [allOf [A, B], allOf [A,
 * C]]); otherwise keyword by keyword: types intersect, counts tighten, enums
 * intersect, and each property's schema is the allOf of what every part
 * says of it (its own schema there, else that part's additionalProperties),
 * which is exact. */
static json_t *merge_list(struct conv *c, json_t *br)
{
	size_t n = json_array_size(br);
	char num[24], buf[48];
	const char *k;
	json_t *v;

	for (size_t i = 0; i < n; i++) {
		json_t *b = json_array_get(br, i);
		const char *kw = json_object_get(b, "anyOf") ? "anyOf" : json_object_get(b, "oneOf") ? "oneOf" : NULL;
		if (!kw)
			continue;
		json_t *alts = json_object_get(b, kw), *res = keep(c, json_object()), *list = NULL;
		const char *bp = part_path(c, b);
		json_t *rest = without(c, b, kw, NULL);
		if (!res || !rest || !(list = json_array()) || json_object_set_new(res, "anyOf", list)) {
			nomem(c);
			return NULL;
		}
		record(c, rest, bp, NULL, NULL);
		if (!json_is_array(alts) || !json_array_size(alts)) {
			struct saved sv;
			enter(c, b, &sv);
			size_t mark = push(c, kw);
			fail(c, "must be a non-empty list of schemas");
			pop(c, mark);
			leave(c, &sv);
			return NULL;
		}
		for (size_t j = 0; j < json_array_size(alts) && !c->err; j++) {
			json_t *alt = json_array_get(alts, j), *parts = json_array(), *o = json_object();
			snprintf(num, sizeof num, "%zu", j);
			record(c, alt, bp, kw, num);
			c->work += (long)n;
			if (!parts || !o) {
				json_decref(parts);
				json_decref(o);
				nomem(c);
				break;
			}
			if (json_object_set_new(o, "allOf", parts)) {
				json_decref(o);
				nomem(c);
				break;
			}
			if (json_array_append_new(list, o)) {
				nomem(c);
				break;
			}
			for (size_t m = 0; m < n; m++) {
				json_t *x = m == i ? rest : json_array_get(br, m);
				if ((m != i || constraining(rest, NULL)) && json_array_append(parts, x))
					nomem(c);
			}
			if (json_array_append(parts, alt))
				nomem(c);
		}
		if (c->work > MAX_WORK)
			fail(c, "too complex: over %d steps to expand", MAX_WORK);
		return c->err ? NULL : res;
	}
	if (n == 0)
		return json_true();
	if (n == 1)
		return json_array_get(br, 0);

	json_t *m = keep(c, json_object());
	json_t *order = json_object(), *req = json_array(), *enumv = NULL, *arr_part = NULL;
	unsigned tmask = T_ALL;
	int typed = 0, has_obj = 0, n_arr = 0, tuple = 0;
	if (!m || !order || !req) {
		nomem(c);
		goto out;
	}
	record(c, m, c->path.p, NULL, NULL);
	for (size_t i = 0; i < n && !c->err; i++) {
		json_t *b = json_array_get(br, i);
		struct saved sv;
		int bt;
		enter(c, b, &sv);
		unsigned bm = type_mask(c, b, &bt);
		if (bt) {
			if (json_is_true(json_object_get(b, "nullable")))
				bm |= T_NULL;
			tmask &= bm;
			typed = 1;
		}
		json_object_foreach(b, k, v) {
			if (c->err || !in_words(k, constraining_kw) || !strcmp(k, "type"))
				continue;
			size_t mark = push(c, k);
			if (!strcmp(k, "properties") || !strcmp(k, "additionalProperties")) {
				has_obj = 1;
			} else if (!strcmp(k, "required")) {
				has_obj = 1;
				for (size_t j = 0; json_is_array(v) && j < json_array_size(v); j++)
					if (!json_is_string(json_array_get(v, j)))
						fail(c, "must be a list of names");
					else if (!json_object_get(order, json_string_value(json_array_get(v, j))) &&
						 (json_object_set_new(order, json_string_value(json_array_get(v, j)),
								      json_null()) ||
						  json_array_append(req, json_array_get(v, j))))
						nomem(c);
				if (!json_is_array(v))
					fail(c, "must be a list of names");
			} else if (!strcmp(k, "items") || !strcmp(k, "prefixItems") || !strcmp(k, "additionalItems")) {
				tuple |= !strcmp(k, "prefixItems") || json_is_array(v);
				if (arr_part != b)
					n_arr++;
				arr_part = b;
			} else if (!strcmp(k, "minItems") || !strcmp(k, "minLength") || !strcmp(k, "maxItems") ||
				   !strcmp(k, "maxLength")) {
				pop(c, mark);
				long long x = count_kw(c, b, k), y = count_kw(c, m, k);
				mark = push(c, k);
				int is_min = !strncmp(k, "min", 3);
				if (y >= 0 && (is_min ? y > x : y < x))
					x = y;
				if (!c->err && json_object_set_new(m, k, json_integer(x)))
					nomem(c);
			} else if (!strcmp(k, "enum") || !strcmp(k, "const")) {
				json_t *vals = !strcmp(k, "const") ? NULL : v;
				if (vals && !json_is_array(vals)) {
					fail(c, "must be a list of values");
				} else if (!enumv) {
					if (!(enumv = json_array()))
						nomem(c);
					for (size_t j = 0; j < (vals ? json_array_size(vals) : 1) && enumv; j++)
						if (json_array_append(enumv, vals ? json_array_get(vals, j) : v))
							nomem(c);
				} else {
					for (size_t j = json_array_size(enumv); j-- > 0;) {
						json_t *x = json_array_get(enumv, j);
						int found = 0;
						for (size_t q = 0; q < (vals ? json_array_size(vals) : 1) && !found;
						     q++)
							found = json_equal(x, vals ? json_array_get(vals, q) : v);
						c->work += vals ? (long)json_array_size(vals) : 1;
						if (!found)
							json_array_remove(enumv, j);
					}
				}
			} else {
				json_t *had = json_object_get(m, k);
				if (had && !json_equal(had, v))
					fail(c, "allOf: parts with different %s are not supported", k);
				else if (json_object_set(m, k, v))
					nomem(c);
			}
			pop(c, mark);
		}
		leave(c, &sv);
	}
	if (c->err)
		goto out;
	if (c->work > MAX_WORK) {
		fail(c, "too complex: over %d steps to expand", MAX_WORK);
		goto out;
	}
	if (typed) {
		json_t *tl = json_array();
		if (!tmask)
			fail(c, "allOf: no type is allowed by every part");
		if (!tl || json_object_set_new(m, "type", tl))
			nomem(c);
		for (size_t i = 0; i < N_OF(types) && !c->err; i++)
			if ((tmask & types[i].mask) == types[i].mask && !(types[i].mask == T_INT && (tmask & T_NUM)) &&
			    json_array_append_new(tl, json_string(types[i].name)))
				nomem(c);
	}
	if (enumv) {
		if (!json_array_size(enumv))
			fail(c, "allOf: no value is in every part's enum");
		else if (json_object_set(m, "enum", enumv))
			nomem(c);
	}
	if (n_arr == 1) {
		const char *ak[] = { "items", "prefixItems", "additionalItems" };
		for (size_t i = 0; i < N_OF(ak); i++)
			if ((v = json_object_get(arr_part, ak[i]))) {
				record(c, v, part_path(c, arr_part), ak[i], NULL);
				if (json_object_set(m, ak[i], v))
					nomem(c);
			}
	} else if (n_arr > 1 && tuple) {
		fail(c, "allOf: parts with prefixItems (tuples) and other items are not supported");
	} else if (n_arr > 1) {
		json_t *list = json_array(), *o = keep(c, json_object());
		int none = 0;
		if (!o)
			json_decref(list);
		else if (!list || json_object_set_new(o, "allOf", list))
			nomem(c);
		for (size_t i = 0; i < n && !c->err; i++) {
			json_t *b = json_array_get(br, i), *it = json_object_get(b, "items");
			if (!it)
				continue;
			none |= json_is_false(it);
			record(c, it, part_path(c, b), "items", NULL);
			if (json_array_append(list, it))
				nomem(c);
		}
		if (!c->err && json_object_set(m, "items", none ? json_false() : o))
			nomem(c);
	}
	if (has_obj && !c->err) {
		json_t *props = json_object(), *aps = json_array(), *seen = json_object();
		int ap_false = 0;
		/* (set_new takes props even when it fails) */
		if (!props || !aps || !seen || json_object_set_new(m, "properties", props) ||
		    json_object_set(m, "required", req)) {
			if (!aps || !seen)
				json_decref(props);
			json_decref(aps);
			json_decref(seen);
			nomem(c);
			goto out;
		}
		for (size_t i = 0; i < n && !c->err; i++) {
			json_t *b = json_array_get(br, i), *ap = json_object_get(b, "additionalProperties");
			ap_false |= json_is_false(ap);
			if (json_is_object(ap)) {
				record(c, ap, part_path(c, b), "additionalProperties", NULL);
				if (json_array_append(aps, ap))
					nomem(c);
			}
		}
		for (size_t i = 0; i < n && !c->err; i++) {
			json_t *bp = json_object_get(json_array_get(br, i), "properties");
			json_object_foreach(bp, k, v) {
				if (c->err || json_object_get(seen, k))
					continue;
				if (json_object_set_new(seen, k, json_null())) {
					nomem(c);
					break;
				}
				json_t *parts = json_array();
				int dropped = 0;
				if (!parts) {
					nomem(c);
					break;
				}
				for (size_t j = 0; j < n && !c->err; j++) {
					json_t *b = json_array_get(br, j),
					       *ps = json_object_get(json_object_get(b, "properties"), k);
					json_t *ap = json_object_get(b, "additionalProperties");
					c->work++;
					if (ps) {
						dropped |= json_is_false(ps);
						record(c, ps, part_path(c, b), "properties", k);
						if (json_is_object(ps) && json_array_append(parts, ps))
							nomem(c);
					} else if (json_is_false(ap)) {
						dropped = 1;
					} else if (json_is_object(ap) && json_array_append(parts, ap)) {
						nomem(c);
					}
				}
				if (dropped && json_object_get(order, k)) {
					fail(c, "allOf: \"%s\" is required, but a part does not allow it",
					     shown(k, buf));
				} else if (dropped) {
					/* false, not absent: no other member may take the name */
					if (json_object_set(props, k, json_false()))
						nomem(c);
				} else {
					json_t *val = json_array_size(parts) == 0 ? json_true()
						      : json_array_size(parts) == 1
							      ? json_incref(json_array_get(parts, 0))
							      : json_object();
					if (json_is_object(val) && json_array_size(parts) > 1 &&
					    json_object_set(val, "allOf", parts))
						nomem(c);
					if (!val || json_object_set_new(props, k, val))
						nomem(c);
				}
				json_decref(parts);
			}
		}
		if (ap_false) {
			if (json_object_set(m, "additionalProperties", json_false()))
				nomem(c);
		} else if (json_array_size(aps) == 1) {
			if (json_object_set(m, "additionalProperties", json_array_get(aps, 0)))
				nomem(c);
		} else if (json_array_size(aps) > 1) {
			json_t *o = keep(c, json_object());
			if (o && (json_object_set(o, "allOf", aps) || json_object_set(m, "additionalProperties", o)))
				nomem(c);
		}
		json_decref(aps);
		json_decref(seen);
	}
out:
	json_decref(order);
	json_decref(req);
	json_decref(enumv);
	return c->err ? NULL : m;
}

static json_t *merge(struct conv *c, json_t *s)
{
	json_t *br = keep(c, json_array());

	if (br)
		flatten(c, s, br, 0);
	return c->err ? NULL : merge_list(c, br);
}

/* ---- the dispatch ------------------------------------------------------------ */

static void gen_ref(struct conv *c, json_t *ref, struct hs_buf *e)
{
	size_t mark = push(c, "$ref");
	const char *r = json_string_value(ref);
	char buf[48];
	int idx = -1;

	if (!r) {
		fail(c, "must be a string");
	} else if (json_object_get(c->refs, r)) {
		idx = (int)json_integer_value(json_object_get(c->refs, r));
	} else if (r[0] != '#') {
		fail(c, "\"%s\": only references inside the schema (\"#...\") are supported", shown(r, buf));
	} else {
		struct hs_buf last = { 0 };
		json_t *target = resolve(c, r, &last);
		if (!target)
			fail(c, "\"%s\" is not in the schema", shown(r, buf));
		else
			idx = add_def(c, last.p ? last.p : "def", r, target);
		free(last.p);
		if (idx >= 0 && json_object_set_new(c->refs, r, json_integer(idx)))
			nomem(c);
	}
	pop(c, mark);
	if (c->err || idx < 0)
		return;
	if (!c->guard)
		add_first(c, c->cur, idx);
	puts_(c, e, c->defs[idx].name);
}

static void gen_any(struct conv *c, json_t *list, const char *kw, struct hs_buf *e, const char *hint, int top)
{
	size_t mark = push(c, kw);
	struct hs_buf b = { 0 };
	int n = 0;

	if (!json_is_array(list) || !json_array_size(list))
		fail(c, "must be a non-empty list of schemas");
	for (size_t i = 0; i < json_array_size(list) && !c->err; i++) {
		json_t *x = json_array_get(list, i);
		if (json_is_false(x))
			continue;
		size_t m2 = push_i(c, i);
		if (n++)
			puts_(c, &b, " | ");
		gen(c, x, &b, hint, 0);
		pop(c, m2);
	}
	if (!n)
		fail(c, "no branch can match");
	pop(c, mark);
	wrap(c, e, &b, n > 1, top);
	free(b.p);
}

static void gen_enum(struct conv *c, json_t *s, unsigned mask, struct hs_buf *e, int top)
{
	json_t *cst = json_object_get(s, "const"), *en = json_object_get(s, "enum");
	size_t mark = push(c, cst ? "const" : "enum");
	size_t cnt = cst ? 1 : json_array_size(en);
	json_t *seen = json_object();
	struct hs_buf b = { 0 };
	int n = 0;

	if (!seen)
		nomem(c);
	if (!cst && !json_is_array(en))
		fail(c, "must be a list of values");
	c->work += (long)cnt;
	for (size_t i = 0; i < cnt && !c->err; i++) {
		json_t *v = cst ? cst : json_array_get(en, i);
		if (!(value_bit(v) & mask))
			continue;
		char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
		if (!t) {
			nomem(c);
			break;
		}
		if (!json_object_get(seen, t)) {
			if (json_object_set_new(seen, t, json_null()))
				nomem(c);
			if (n++)
				puts_(c, &b, " | ");
			lit_value(c, &b, v);
		}
		free(t);
	}
	if (!n)
		fail(c, cnt ? "no value is of the type allowed" : "an empty enum matches nothing");
	pop(c, mark);
	wrap(c, e, &b, n > 1, top);
	free(b.p);
	json_decref(seen);
}

static void gen_in(struct conv *c, json_t *s, struct hs_buf *e, const char *hint, int top)
{
	if (json_is_true(s)) {
		prim(c, e, P_VALUE);
		return;
	}
	if (json_is_false(s)) {
		fail(c, "false: no value matches it");
		return;
	}
	if (!json_is_object(s)) {
		fail(c, "a schema must be an object, true or false");
		return;
	}
	json_t *u = json_object_get(s, "unevaluatedProperties");
	const char *no = has_any(s, REFUSED_KW);
	if (no || (u && !json_is_true(u))) {
		push(c, no ? no : "unevaluatedProperties");
		fail(c, "not supported");
		return;
	}
	if (json_is_true(json_object_get(s, "nullable"))) {
		json_t *rest = without(c, s, "nullable", NULL);
		struct hs_buf b = { 0 };
		if (rest)
			gen(c, rest, &b, hint, 0);
		puts_(c, &b, " | ");
		prim(c, &b, P_NULL);
		wrap(c, e, &b, 1, top);
		free(b.p);
		return;
	}
	json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf");
	const char *any_kw = json_object_get(s, "anyOf") ? "anyOf" : json_object_get(s, "oneOf") ? "oneOf" : NULL;
	json_t *any = any_kw ? json_object_get(s, any_kw) : NULL;
	if (all || (ref && constraining(s, "$ref")) || (any && constraining(s, any_kw))) {
		json_t *m = merge(c, s);
		if (m)
			gen(c, m, e, hint, top);
		return;
	}
	if (ref) {
		gen_ref(c, ref, e);
		return;
	}
	if (any) {
		gen_any(c, any, any_kw, e, hint, top);
		return;
	}
	int typed;
	unsigned mask = type_mask(c, s, &typed);
	if (c->err)
		return;
	if (json_object_get(s, "const") || json_object_get(s, "enum")) {
		gen_enum(c, s, mask, e, top);
		return;
	}
	if (!typed) {
		/* no type: the one its keywords are about */
		mask = 0;
		if (has_any(s, object_kw))
			mask |= T_OBJ;
		if (has_any(s, array_kw))
			mask |= T_ARR;
		if (has_any(s, string_kw))
			mask |= T_STR;
		if (!mask) {
			prim(c, e, P_VALUE);
			return;
		}
	}
	if (mask & T_NUM)
		mask &= ~(unsigned)T_INT;
	int n = __builtin_popcount(mask), k = 0, one = top && n == 1;
	struct hs_buf b = { 0 };
	static const struct {
		unsigned bit;
		int prim;
	} simple[] = { { T_NULL, P_NULL }, { T_BOOL, P_BOOLEAN }, { T_INT, P_INTEGER }, { T_NUM, P_NUMBER } };
	for (size_t i = 0; i < N_OF(simple); i++)
		if (mask & simple[i].bit) {
			if (k++)
				puts_(c, &b, " | ");
			prim(c, &b, simple[i].prim);
		}
	if (mask & T_STR) {
		if (k++)
			puts_(c, &b, " | ");
		gen_string(c, s, &b, one);
	}
	if (mask & T_ARR) {
		if (k++)
			puts_(c, &b, " | ");
		gen_array(c, s, &b, hint, one);
	}
	if (mask & T_OBJ) {
		if (k++)
			puts_(c, &b, " | ");
		gen_object(c, s, &b, hint, one);
	}
	wrap(c, e, &b, n > 1, top);
	free(b.p);
}

static void gen(struct conv *c, json_t *s, struct hs_buf *e, const char *hint, int top)
{
	struct saved sv;

	if (c->err)
		return;
	if (++c->work > MAX_WORK) {
		fail(c, "too complex: over %d steps to expand", MAX_WORK);
		return;
	}
	if (c->depth >= MAX_DEPTH) {
		fail(c, "nested more than %d deep", MAX_DEPTH);
		return;
	}
	enter(c, s, &sv);
	c->depth++;
	gen_in(c, s, e, hint, top);
	c->depth--;
	if (!c->err)
		leave(c, &sv);
	else
		free(sv.p);
}

/* A cycle among the refs a rule can begin with is left recursion: the
 * matcher would loop, so it is refused here, naming a def on the cycle. */
static void check_loops(struct conv *c)
{
	int n = c->n_defs;
	unsigned char *color = calloc(n, 1);
	int *st = malloc(sizeof *st * 2 * n);
	char buf[48];

	if (!color || !st)
		nomem(c);
	for (int s0 = 0; s0 < n && !c->err; s0++) {
		if (color[s0])
			continue;
		int sp = 1;
		st[0] = s0;
		st[1] = 0;
		color[s0] = 1;
		while (sp && !c->err) {
			int u = st[2 * (sp - 1)], *ei = &st[2 * (sp - 1) + 1];
			if (*ei < c->defs[u].n_first) {
				int w = c->defs[u].first[(*ei)++];
				if (color[w] == 1) {
					set_path(c, c->defs[w].path);
					fail(c, "a $ref loop that reads nothing (left recursion), through \"%s\"",
					     shown(c->defs[u].path, buf));
				} else if (!color[w]) {
					color[w] = 1;
					st[2 * sp] = w;
					st[2 * sp + 1] = 0;
					sp++;
				}
			} else {
				color[u] = 2;
				sp--;
			}
		}
	}
	free(color);
	free(st);
}

int hs_json_schema_to_grammar(const char *schema_json, char **gbnf)
{
	struct conv c = { 0 };
	struct hs_buf out = { 0 };
	json_error_t je;

	HS_NEED(gbnf, -EINVAL);
	*gbnf = NULL;
	HS_NEED(schema_json, -EINVAL);
	if (!(c.doc = json_loads(schema_json, JSON_DECODE_ANY, &je)))
		return hs__error(EINVAL, "json schema: not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
	c.names = json_object();
	c.refs = json_object();
	c.paths = json_object();
	c.keep = json_array();
	if (!c.names || !c.refs || !c.paths || !c.keep)
		nomem(&c);
	set_path(&c, "#");
	for (int i = 0; i < N_PRIMS && !c.err; i++)
		if (json_object_set_new(c.names, prims[i].name, json_null()))
			nomem(&c);
	if (!c.err && json_object_set_new(c.names, "root", json_null()))
		nomem(&c);
	if (!c.err && add_def(&c, "root", "#", c.doc) == 0 && json_object_set_new(c.refs, "#", json_integer(0)))
		nomem(&c);
	/* each def's rule; generating one may add more */
	for (int i = 0; i < c.n_defs && !c.err; i++) {
		struct hs_buf body = { 0 };
		char name[NAME_LEN];
		strcpy(name, c.defs[i].name);
		c.cur = i;
		c.guard = 0;
		c.depth = 0;
		set_path(&c, c.defs[i].path);
		gen(&c, c.defs[i].schema, &body, name, 1);
		if (i == 0)
			c.root_body = body;
		else
			add_rule(&c, name, &body);
		if (i)
			free(body.p);
	}
	if (!c.err)
		check_loops(&c);
	if (!c.err) {
		unsigned need = c.need, was;
		do {
			was = need;
			for (int i = 0; i < N_PRIMS; i++)
				if (need & B(i))
					need |= prims[i].deps;
		} while (need != was);
		set_path(&c, "#");
		puts_(&c, &out, "root ::= ");
		put(&c, &out, c.root_body.p, c.root_body.len);
		puts_(&c, &out, "\n");
		put(&c, &out, c.rules.p, c.rules.len);
		for (int i = 0; i < N_PRIMS; i++)
			if (need & B(i)) {
				puts_(&c, &out, prims[i].name);
				puts_(&c, &out, " ::= ");
				puts_(&c, &out, prims[i].body);
				puts_(&c, &out, "\n");
			}
	}
	if (!c.err) {
		*gbnf = out.p;
		out.p = NULL;
	}
	free(out.p);
	for (int i = 0; i < c.n_defs; i++) {
		free(c.defs[i].path);
		free(c.defs[i].first);
	}
	free(c.defs);
	free(c.rules.p);
	free(c.path.p);
	free(c.root_body.p);
	json_decref(c.doc);
	json_decref(c.names);
	json_decref(c.refs);
	json_decref(c.paths);
	json_decref(c.keep);
	return c.err;
}
