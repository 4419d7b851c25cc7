/* Constrained replies: what a request asks its reply to hold to
 * (response_format json_object / json_schema, llama-server's `grammar`, a
 * tool_choice that forces a call) as one grammar over the whole reply in
 * the model's own chat format, compiled for the request's sampler.
 *
 * The reply grammar's rule is `root`; what the client's schema or grammar
 * says is inside it, renamed with a prefix (hs_grammar_prefix), so that the
 * format's own parts (harmony's analysis message, ChatML's think block, the
 * tool-call wrapper, the stop token) and the client's rules cannot collide.
 * The reasoning before the answer stays free text: only control tokens the
 * grammar names can end it. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

/* a token element when the vocabulary has text as one token, else the
 * literal (a model file without the format's special tokens) */
static void tok_or_text(struct srv *s, struct sbuf *b, const char *text)
{
	if (hs_tokenizer_find(s->tok, text) >= 0) {
		hs_srv_sbuf_addf(b, " %s ", text);
		return;
	}
	hs_srv_sbuf_add(b, " \"", 2);
	for (const char *p = text; *p; p++) {
		if (*p == '"' || *p == '\\')
			hs_srv_sbuf_add(b, "\\", 1);
		hs_srv_sbuf_add(b, p, 1);
	}
	hs_srv_sbuf_add(b, "\" ", 2);
}

static void addz(struct sbuf *b, const char *s)
{
	hs_srv_sbuf_add(b, s, strlen(s));
}

/* the GBNF literal of s (a tool's name) */
static void literal(struct sbuf *b, const char *s)
{
	hs_srv_sbuf_add(b, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			hs_srv_sbuf_add(b, "\\", 1);
		if (*p < 0x20)
			hs_srv_sbuf_addf(b, "\\x%02x", *p);
		else
			hs_srv_sbuf_add(b, (const char *)p, 1);
	}
	hs_srv_sbuf_add(b, "\"", 1);
}

/* Appends schema (JSON) as GBNF with its rules prefixed; -1 with a 400. */
static int add_schema(struct sbuf *b, const json_t *schema, const char *prefix, const char *param,
		      struct srv_err *e)
{
	char *txt = json_dumps(schema, JSON_ENCODE_ANY), *g = NULL, *pg = NULL;
	int rc = -1;
	if (!txt)
		return hs_srv_fail(e, param, NULL, "out of memory"), -1;
	if (hs_json_schema_to_grammar(txt, &g))
		hs_srv_fail(e, param, "invalid_value", "%s: %s", param, hs_last_error());
	else if (hs_grammar_prefix(g, prefix, &pg))
		hs_srv_fail(e, param, NULL, "%s", hs_last_error());
	else {
		hs_srv_sbuf_addf(b, "%s\n", pg);
		rc = 0;
	}
	free(txt);
	free(g);
	free(pg);
	return rc;
}

/* Where the prompt leaves the reasoning block of a ChatML-like format:
 * 1 opened and not closed (the reply begins inside it), 0 closed (thinking
 * off: the reply is the answer), -1 neither (the model may open one). */
static int think_state(struct srv *s, const struct srv_req *r)
{
	const int32_t open = hs_tokenizer_find(s->tok, "<think>"), close = hs_tokenizer_find(s->tok, "</think>");
	const int32_t turn = hs_tokenizer_find(s->tok, "<|im_start|>");
	for (int i = r->n_prompt - 1; i >= 0 && i >= r->n_prompt - 64; i--) {
		if (open >= 0 && r->prompt[i] == open)
			return 1;
		if (close >= 0 && r->prompt[i] == close)
			return 0;
		if (turn >= 0 && r->prompt[i] == turn)
			break;
	}
	return -1;
}

/* The tools a forced call may use: all of them ("required") or the one
 * named; each "NAME" and its parameters' schema. */
static int forced_tools(json_t *root, json_t **list, struct srv_err *e)
{
	json_t *choice = json_object_get(root, "tool_choice"), *tools = json_object_get(root, "tools"), *t;
	const char *want = NULL;
	size_t i;

	*list = NULL;
	if (json_is_string(choice)) {
		if (strcmp(json_string_value(choice), "required"))
			return 0;
	} else if (json_is_object(choice)) {
		json_t *fn = json_object_get(choice, "function");
		want = json_string_value(json_object_get(fn, "name"));
		if (!want)
			want = json_string_value(json_object_get(choice, "name"));
		if (!want)
			return hs_srv_fail(e, "tool_choice", "invalid_value",
					   "tool_choice: {\"type\": \"function\", \"function\": {\"name\": ...}} names no function"),
			       -1;
	} else {
		return 0;
	}
	if (!json_array_size(tools))
		return hs_srv_fail(e, "tool_choice", "invalid_value", "tool_choice: a call is forced but there are no tools"),
		       -1;
	if (!(*list = json_array()))
		return hs_srv_fail(e, "tools", NULL, "out of memory"), -1;
	json_array_foreach(tools, i, t) {
		json_t *fn = json_object_get(t, "function");
		const char *name = json_string_value(json_object_get(fn, "name"));
		if (!name)
			continue; /* the chat format refuses it by name */
		if (!want || strcmp(want, name) == 0)
			json_array_append(*list, fn);
	}
	if (!json_array_size(*list)) {
		json_decref(*list);
		*list = NULL;
		return hs_srv_fail(e, "tool_choice", "invalid_value", "tool_choice: no tool named '%.80s' in tools", want),
		       -1;
	}
	return 0;
}

/* the schema of a function's parameters ({"type": "object"} when it has none) */
static json_t *params_of(json_t *fn)
{
	json_t *p = json_object_get(fn, "parameters");
	return p && json_is_object(p) ? json_incref(p) : json_pack("{s:s}", "type", "object");
}

/* A string property (an enum of strings too): its value is written as
 * plain text in the XML-like call formats, not as a JSON string. */
static int is_string_schema(json_t *p)
{
	const char *t = json_string_value(json_object_get(p, "type"));
	json_t *en = json_object_get(p, "enum"), *v;
	size_t i;
	if (json_is_array(en) && json_array_size(en)) {
		json_array_foreach(en, i, v)
			if (!json_is_string(v))
				return 0;
		return 1;
	}
	return t && strcmp(t, "string") == 0 && !json_object_get(p, "const");
}

/* The plain text of a string property: one of its enum's values, or text
 * without "</" (the closing tag's start) within its length limits. */
static void xml_text(struct sbuf *b, json_t *p)
{
	json_t *en = json_object_get(p, "enum"), *v;
	json_int_t lo = 0, hi = -1;
	size_t i;
	if (json_is_array(en) && json_array_size(en)) {
		addz(b, " (");
		json_array_foreach(en, i, v) {
			addz(b, i ? " | " : " ");
			literal(b, json_string_value(v));
		}
		addz(b, " )");
		return;
	}
	if (json_is_integer(json_object_get(p, "minLength")))
		lo = json_integer_value(json_object_get(p, "minLength"));
	if (json_is_integer(json_object_get(p, "maxLength")))
		hi = json_integer_value(json_object_get(p, "maxLength"));
	if (lo < 0 || lo > 10000)
		lo = 0;
	if (hi > 10000 || (hi >= 0 && hi < lo))
		hi = -1;
	if (!lo && hi < 0)
		addz(b, " hs-xtext");
	else if (hi < 0)
		hs_srv_sbuf_addf(b, " hs-xchar{%lld,}", (long long)lo);
	else
		hs_srv_sbuf_addf(b, " hs-xchar{%lld,%lld}", (long long)lo, (long long)hi);
}

/* One forced call in Qwen3.5's form (<function=N><parameter=K>\nV\n</parameter>)
 * or GLM's (N\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>), parameters
 * in their declared order, the required ones always; a string value is text
 * without "</" in it, any other value JSON of its schema.  Rules t<i>-*. */
static int xml_call(struct srv *s, struct sbuf *b, json_t *fn, size_t i, struct srv_err *e)
{
	const char *name = json_string_value(json_object_get(fn, "name")), *key;
	json_t *params = params_of(fn), *props = json_object_get(params, "properties"), *req, *ps;
	int glm = s->fmt == HS_CHAT_GLM, rc = 0;
	size_t k = 0;

	if (!params)
		return hs_srv_fail(e, "tools", NULL, "out of memory"), -1;
	req = json_object_get(params, "required");
	tok_or_text(s, b, "<tool_call>");
	if (glm) {
		literal(b, name);
		addz(b, " \"\\n\"");
	} else {
		addz(b, " \"\\n<function=\" ");
		literal(b, name);
		addz(b, " \">\\n\"");
	}
	if (!json_is_object(props) || !json_object_size(props)) {
		/* no declared parameters: any names */
		if (glm) {
			addz(b, " (");
			tok_or_text(s, b, "<arg_key>");
			addz(b, "[a-zA-Z0-9_.-]+");
			tok_or_text(s, b, "</arg_key>");
			addz(b, "\"\\n\"");
			tok_or_text(s, b, "<arg_value>");
			addz(b, "hs-xtext");
			tok_or_text(s, b, "</arg_value>");
			addz(b, "\"\\n\" )*");
		} else {
			addz(b, " ( \"<parameter=\" [a-zA-Z0-9_.-]+ \">\\n\" hs-xtext \"\\n</parameter>\\n\" )*");
		}
	}
	json_object_foreach(props, key, ps) {
		int required = 0;
		size_t j;
		json_t *x;
		json_array_foreach(req, j, x)
			required |= json_is_string(x) && strcmp(json_string_value(x), key) == 0;
		hs_srv_sbuf_addf(b, " t%zu-p%zu", i, k);
		if (!required)
			addz(b, "?");
		k++;
	}
	if (!glm)
		addz(b, " \"</function>\\n\"");
	tok_or_text(s, b, "</tool_call>");
	addz(b, "\n");
	/* each parameter's rule */
	k = 0;
	json_object_foreach(props, key, ps) {
		char pre[48];
		snprintf(pre, sizeof pre, "t%zu-p%zu-", i, k);
		if (!is_string_schema(ps) && (rc = add_schema(b, ps, pre, "tools", e)))
			break;
		hs_srv_sbuf_addf(b, "t%zu-p%zu ::=", i, k);
		if (glm) {
			tok_or_text(s, b, "<arg_key>");
			literal(b, key);
			tok_or_text(s, b, "</arg_key>");
			addz(b, "\"\\n\"");
			tok_or_text(s, b, "<arg_value>");
		} else {
			addz(b, " \"<parameter=\" ");
			literal(b, key);
			addz(b, " \">\\n\" ");
		}
		if (is_string_schema(ps))
			xml_text(b, ps);
		else
			hs_srv_sbuf_addf(b, "%sroot", pre);
		if (glm) {
			tok_or_text(s, b, "</arg_value>");
			addz(b, "\"\\n\"\n");
		} else {
			addz(b, " \"\\n</parameter>\\n\"\n");
		}
		k++;
	}
	json_decref(params);
	return rc;
}

int hs_srv_constrain(struct srv *s, json_t *root, struct srv_req *r, struct srv_err *e)
{
	json_t *rf = json_object_get(root, "response_format"), *gr = json_object_get(root, "grammar");
	json_t *js = json_object_get(root, "json_schema"), *calls = NULL, *schema = NULL;
	struct sbuf b = { 0 };
	const char *body = NULL; /* the rule the answer is */
	int rc = -1;

	if (rf && json_is_null(rf))
		rf = NULL;
	if (gr && json_is_null(gr))
		gr = NULL;
	if (js && json_is_null(js))
		js = NULL;
	if (rf) {
		const char *type = json_string_value(json_object_get(rf, "type"));
		if (!json_is_object(rf) || !type)
			return hs_srv_fail(e, "response_format", "invalid_type",
					   "response_format: an object with a \"type\" is needed"),
			       -1;
		if (strcmp(type, "text") == 0) {
			rf = NULL;
		} else if (strcmp(type, "json_object") == 0) {
			schema = json_pack("{s:s}", "type", "object");
		} else if (strcmp(type, "json_schema") == 0) {
			json_t *w = json_object_get(rf, "json_schema");
			/* OpenAI's {json_schema: {name, schema, strict}}; llama-server also takes {schema} */
			schema = json_object_get(json_is_object(w) ? w : rf, "schema");
			if (!json_is_object(schema) && !json_is_boolean(schema))
				return hs_srv_fail(e, "response_format", "invalid_value",
						   "response_format: json_schema needs {\"json_schema\": {\"name\", \"schema\": {...}}}"),
				       -1;
			json_incref(schema);
		} else {
			return hs_srv_fail(e, "response_format", "invalid_value",
					   "response_format: type '%.60s' is not text, json_object or json_schema", type),
			       -1;
		}
	}
	if (js) {
		if (schema) {
			json_decref(schema);
			return hs_srv_fail(e, "json_schema", "invalid_value", "json_schema and response_format: give one"), -1;
		}
		schema = json_incref(js);
	}
	if (gr && !json_is_string(gr)) {
		json_decref(schema);
		return hs_srv_fail(e, "grammar", "invalid_type", "grammar: GBNF text (a string) is needed"), -1;
	}
	if (gr && schema) {
		json_decref(schema);
		return hs_srv_fail(e, "grammar", "invalid_value", "grammar and a JSON schema (response_format): give one"), -1;
	}
	if (forced_tools(root, &calls, e)) {
		json_decref(schema);
		return -1;
	}
	if (calls && (schema || gr)) {
		hs_srv_fail(e, "tool_choice", "invalid_value",
			    "tool_choice forces a call, and %s constrains the answer: give one", gr ? "grammar" : "response_format");
		goto out;
	}
	if (!calls && !schema && !gr)
		return 0;
	if (calls && s->fmt == HS_CHAT_RAW) {
		hs_srv_fail(e, "tool_choice", "not_supported",
			    "tool_choice: the raw chat format has no tool calls to force; use \"auto\"");
		goto out;
	}
	if (!r->chat && calls) {
		hs_srv_fail(e, "tool_choice", "invalid_value", "tool_choice: completions have no tools");
		goto out;
	}

	/* the client's part */
	if (gr) {
		char *pg = NULL;
		if (hs_grammar_prefix(json_string_value(gr), "u-", &pg)) {
			hs_srv_fail(e, "grammar", "invalid_value", "grammar: %s", hs_last_error());
			goto out;
		}
		hs_srv_sbuf_addf(&b, "%s\n", pg);
		free(pg);
		body = "u-root";
	} else if (schema) {
		if (add_schema(&b, schema, "s-", "response_format", e))
			goto out;
		body = "s-root";
	} else {
		size_t i;
		json_t *fn;
		if (s->fmt == HS_CHAT_QWEN35 || s->fmt == HS_CHAT_GLM) {
			addz(&b, "hs-call ::=");
			json_array_foreach(calls, i, fn)
				hs_srv_sbuf_addf(&b, "%s t%zu-call", i ? " |" : "", i);
			addz(&b, "\nhs-xchar ::= [^<] | \"<\" [^/]\nhs-xtext ::= hs-xchar*\n");
			json_array_foreach(calls, i, fn) {
				hs_srv_sbuf_addf(&b, "t%zu-call ::=", i);
				if (xml_call(s, &b, fn, i, e))
					goto out;
			}
			body = "hs-call";
			goto wrap;
		}
		addz(&b, "hs-call ::=");
		json_array_foreach(calls, i, fn) {
			const char *name = json_string_value(json_object_get(fn, "name"));
			addz(&b, i ? " | " : " ");
			if (s->fmt == HS_CHAT_HARMONY) {
				/* <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS<|call|> */
				literal(&b, name);
				addz(&b, " \" \"");
				tok_or_text(s, &b, "<|constrain|>");
				hs_srv_sbuf_addf(&b, "\"json\" <|message|> t%zu-root <|call|>", i);
			} else {
				/* <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call> */
				tok_or_text(s, &b, "<tool_call>");
				addz(&b, "\"\\n{\\\"name\\\": \\\"\" ");
				literal(&b, name);
				addz(&b, " \"\\\", \\\"arguments\\\": \" ");
				hs_srv_sbuf_addf(&b, "t%zu-root \"}\\n\"", i);
				tok_or_text(s, &b, "</tool_call>");
			}
		}
		addz(&b, "\n");
		json_array_foreach(calls, i, fn) {
			char pre[32];
			json_t *p = params_of(fn);
			snprintf(pre, sizeof pre, "t%zu-", i);
			if (!p || add_schema(&b, p, pre, "tools", e)) {
				json_decref(p);
				if (!e->body)
					hs_srv_fail(e, "tools", NULL, "out of memory");
				goto out;
			}
			json_decref(p);
		}
		body = "hs-call";
	}

wrap:
	/* the reply around it, in the chat format; completions continue a text:
	 * the answer alone */
	addz(&b, "hs-free ::= [^]*\nhs-ws ::= [ \\t\\n]{0,8}\nroot ::=");
	switch (r->chat ? s->fmt : HS_CHAT_RAW) {
	case HS_CHAT_HARMONY:
		/* an analysis message (free), then the final message, or a call */
		addz(&b, " ( <|channel|> \"analysis\" <|message|> hs-free <|end|> <|start|> \"assistant\" )? <|channel|>");
		if (calls)
			hs_srv_sbuf_addf(&b, " \"commentary to=functions.\" %s\n", body);
		else
			hs_srv_sbuf_addf(&b, " \"final\" <|message|> %s <|return|>\n", body);
		break;
	case HS_CHAT_CHATML:
	case HS_CHAT_QWEN35:
	case HS_CHAT_GLM: {
		int th = think_state(s, r);
		if (th == 1) {
			addz(&b, " hs-free");
			tok_or_text(s, &b, "</think>");
		} else if (th == -1) {
			addz(&b, " (");
			tok_or_text(s, &b, "<think>");
			addz(&b, "hs-free");
			tok_or_text(s, &b, "</think>");
			addz(&b, ")?");
		}
		hs_srv_sbuf_addf(&b, " hs-ws %s", body);
		const char *end = s->fmt == HS_CHAT_GLM ? "<|user|>" : "<|im_end|>";
		if (hs_tokenizer_find(s->tok, end) >= 0)
			hs_srv_sbuf_addf(&b, " hs-ws %s", end);
		addz(&b, "\n");
		break;
	}
	default: /* raw, completions: the answer alone, then the file's end token */
		hs_srv_sbuf_addf(&b, " %s\n", body);
		break;
	}
	if (b.err) {
		hs_srv_fail(e, NULL, NULL, "out of memory");
		goto out;
	}
	if (hs_grammar_new(s->tok, b.p, &r->grammar)) {
		hs_srv_fail(e, gr ? "grammar" : calls ? "tools" : "response_format", "invalid_value", "%s: %s",
			    gr ? "grammar" : calls ? "tools" : "response_format", hs_last_error());
		goto out;
	}
	rc = 0;
out:
	hs_srv_sbuf_free(&b);
	json_decref(schema);
	json_decref(calls);
	return rc;
}
