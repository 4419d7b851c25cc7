/* The Anthropic Messages API in: a /v1/messages body (system, messages of
 * text, thinking, tool_use and tool_result blocks, tools with input_schema,
 * tool_choice, stop_sequences) rewritten as the chat completion it asks
 * for, then checked and rendered by request.c like any other.  What goes
 * out is api.c's (the message object and its stream of events).
 * Refused with a 400 naming the field: images and documents, server
 * tools (web search ...), a block type this server does not know. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

struct merr {
	int status;
	char *body;
};

/* A 400 naming param; its code as request.c's: invalid_type, invalid_value,
 * not_supported, invalid_json (NULL: out of memory). */
static json_t *fail(struct merr *e, const char *param, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static json_t *fail(struct merr *e, const char *param, const char *code, const char *fmt, ...)
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

/* A tool_result's content: a string, or text blocks joined by newlines. */
static json_t *result_text(json_t *c, size_t i, size_t j, struct merr *e)
{
	size_t k;
	json_t *b;
	if (!c || json_is_null(c))
		return json_string("");
	if (json_is_string(c))
		return json_incref(c), c;
	if (!json_is_array(c))
		return fail(e, "messages", "invalid_type",
			    "messages[%zu].content[%zu].content: a string or an array of text blocks", i, j);
	struct sbuf t = { 0 };
	json_array_foreach(c, k, b)
	{
		const char *type = json_string_value(json_object_get(b, "type"));
		json_t *tx = json_object_get(b, "text");
		if (!type || strcmp(type, "text") || !json_is_string(tx)) {
			hs_srv_sbuf_free(&t);
			return fail(e, "messages", "not_supported",
				    "messages[%zu].content[%zu].content[%zu]: only text blocks are supported", i, j, k);
		}
		if (t.len)
			hs_srv_sbuf_add(&t, "\n", 1);
		hs_srv_sbuf_add(&t, json_string_value(tx), json_string_length(tx));
	}
	json_t *s = t.err ? NULL : json_stringn(t.p ? t.p : "", t.len);
	hs_srv_sbuf_free(&t);
	return s ? s : fail(e, "messages", NULL, "out of memory");
}

/* One Anthropic message as chat messages appended to out: a user's
 * tool_result blocks become tool messages (before its text), an
 * assistant's tool_use blocks its tool_calls and thinking its reasoning. */
static int add_message(json_t *out, json_t *m, size_t i, struct merr *e)
{
	const char *role = json_string_value(json_object_get(m, "role"));
	json_t *c = json_object_get(m, "content"), *b;
	size_t j;

	if (!json_is_object(m))
		return fail(e, "messages", "invalid_type", "messages[%zu]: an object is needed", i), -1;
	if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
		return fail(e, "messages", "invalid_value", "messages[%zu].role: \"user\" or \"assistant\" is needed",
			    i),
		       -1;
	const int asst = role[0] == 'a';
	if (json_is_string(c))
		return json_array_append_new(out, json_pack("{s:s, s:O}", "role", role, "content", c)) ? -1 : 0;
	if (!json_is_array(c))
		return fail(e, "messages", "invalid_type",
			    "messages[%zu].content: a string or an array of blocks is needed", i),
		       -1;
	json_t *text = json_array(), *calls = json_array(), *msg = json_pack("{s:s}", "role", role);
	struct sbuf think = { 0 };
	int rc = -1;
	if (!text || !calls || !msg)
		goto out;
	json_array_foreach(c, j, b)
	{
		const char *type = json_string_value(json_object_get(b, "type"));
		if (!json_is_object(b) || !type) {
			fail(e, "messages", "invalid_type",
			     "messages[%zu].content[%zu]: an object with a \"type\" is needed", i, j);
			goto out;
		}
		if (strcmp(type, "text") == 0) {
			json_t *t = json_object_get(b, "text");
			if (!json_is_string(t)) {
				fail(e, "messages", "invalid_type",
				     "messages[%zu].content[%zu].text: a string is needed", i, j);
				goto out;
			}
			json_array_append_new(text, json_pack("{s:s, s:O}", "type", "text", "text", t));
		} else if (asst && strcmp(type, "thinking") == 0) {
			const char *t = json_string_value(json_object_get(b, "thinking"));
			if (t)
				hs_srv_sbuf_add(&think, t, strlen(t));
		} else if (asst && strcmp(type, "redacted_thinking") == 0) {
			/* encrypted by another server: nothing to render */
		} else if (asst && strcmp(type, "tool_use") == 0) {
			json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name"),
			       *in = json_object_get(b, "input");
			if (!json_is_string(name) || (id && !json_is_string(id)) || (in && !json_is_object(in))) {
				fail(e, "messages", "invalid_type",
				     "messages[%zu].content[%zu]: a tool_use needs a string name and id and an object input",
				     i, j);
				goto out;
			}
			char *args = in ? json_dumps(in, JSON_COMPACT) : NULL;
			json_array_append_new(calls,
					      json_pack("{s:O?, s:s, s:{s:O, s:s}}", "id", id, "type", "function",
							"function", "name", name, "arguments", args ? args : "{}"));
			free(args);
		} else if (!asst && strcmp(type, "tool_result") == 0) {
			json_t *id = json_object_get(b, "tool_use_id");
			json_t *t = result_text(json_object_get(b, "content"), i, j, e);
			if (!t || !json_is_string(id)) {
				json_decref(t);
				fail(e, "messages", "invalid_type",
				     "messages[%zu].content[%zu]: a tool_result needs a string tool_use_id", i, j);
				goto out;
			}
			json_array_append_new(
				out, json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", id, "content", t));
		} else {
			fail(e, "messages", "not_supported",
			     "messages[%zu].content[%zu]: block type \"%.40s\" is not supported%s", i, j, type,
			     strcmp(type, "image") == 0 || strcmp(type, "document") == 0 ? " (text only)" : "");
			goto out;
		}
	}
	/* a user turn of tool results only adds no user message */
	if (json_array_size(text) || asst || !json_array_size(c)) {
		json_object_set(msg, "content", text);
		if (think.len)
			json_object_set_new(msg, "reasoning_content", json_stringn(think.p, think.len));
		if (json_array_size(calls))
			json_object_set(msg, "tool_calls", calls);
		json_array_append(out, msg);
	}
	rc = think.err ? (fail(e, "messages", NULL, "out of memory"), -1) : 0;
out:
	json_decref(text);
	json_decref(calls);
	json_decref(msg);
	hs_srv_sbuf_free(&think);
	return rc;
}

/* The chat completion request a Messages body asks for (new reference). */
static json_t *to_chat(json_t *root, struct merr *e)
{
	json_t *chat = json_object(), *msgs = json_array(), *v;
	size_t i;
	json_t *m;

	if (!chat || !msgs)
		goto oom;
	json_object_set_new(chat, "messages", msgs);
	/* fields of the same name and meaning (seed: hotset's, as on chat) */
	static const char *const same[] = { "model", "max_tokens", "temperature", "top_p", "top_k", "stream", "seed" };
	for (size_t k = 0; k < sizeof same / sizeof *same; k++)
		if ((v = json_object_get(root, same[k])))
			json_object_set(chat, same[k], v);
	if ((v = json_object_get(root, "stop_sequences")) && !json_is_null(v))
		json_object_set(chat, "stop", v);
	v = json_object_get(root, "system");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v) && !json_is_array(v))
			return json_decref(chat), fail(e, "system", "invalid_type",
						       "system: a string or an array of text blocks is needed");
		json_t *t = result_text(v, 0, 0, e);
		if (!t)
			return json_decref(chat), NULL;
		json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "system", "content", t));
	}
	v = json_object_get(root, "messages");
	if (!json_is_array(v))
		return json_decref(chat), fail(e, "messages", "invalid_type", "messages: an array is needed");
	if (!json_array_size(v))
		return json_decref(chat),
		       fail(e, "messages", "invalid_value", "messages: empty (at least one message is needed)");
	json_array_foreach(v, i, m) if (add_message(msgs, m, i, e)) return json_decref(chat), NULL;
	v = json_object_get(root, "tools");
	if (v && !json_is_null(v)) {
		json_t *tools = json_array(), *t;
		if (!json_is_array(v) || !tools)
			return json_decref(tools), json_decref(chat),
			       fail(e, "tools", "invalid_type", "tools: an array is needed");
		json_object_set_new(chat, "tools", tools);
		json_array_foreach(v, i, t)
		{
			const char *type = json_string_value(json_object_get(t, "type"));
			json_t *name = json_object_get(t, "name"), *desc = json_object_get(t, "description");
			json_t *schema = json_object_get(t, "input_schema");
			if (type && strcmp(type, "custom"))
				return json_decref(chat),
				       fail(e, "tools", "not_supported",
					    "tools[%zu]: server tool \"%.40s\" is not supported", i, type);
			if (!json_is_string(name) || (desc && !json_is_string(desc) && !json_is_null(desc)) ||
			    (schema && !json_is_object(schema)))
				return json_decref(chat),
				       fail(e, "tools", "invalid_type",
					    "tools[%zu]: a string name and an object input_schema are needed", i);
			json_t *fn = json_pack("{s:O}", "name", name);
			if (fn && json_is_string(desc))
				json_object_set(fn, "description", desc);
			if (fn && schema)
				json_object_set(fn, "parameters", schema);
			json_array_append_new(tools, json_pack("{s:s, s:o}", "type", "function", "function", fn));
		}
	}
	v = json_object_get(root, "tool_choice");
	if (v && !json_is_null(v)) {
		const char *type = json_string_value(json_object_get(v, "type"));
		json_t *name = json_object_get(v, "name");
		if (!type)
			return json_decref(chat), fail(e, "tool_choice", "invalid_type",
						       "tool_choice: an object with a \"type\" is needed");
		if (strcmp(type, "auto") == 0 || strcmp(type, "none") == 0)
			json_object_set_new(chat, "tool_choice", json_string(type));
		else if (strcmp(type, "any") == 0)
			json_object_set_new(chat, "tool_choice", json_string("required"));
		else if (strcmp(type, "tool") == 0 && json_is_string(name))
			json_object_set_new(chat, "tool_choice",
					    json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name));
		else
			return json_decref(chat), fail(e, "tool_choice", "not_supported",
						       "tool_choice: type \"%.40s\" (auto, any, tool with "
						       "a name, none) is not supported",
						       type);
	}
	return chat;
oom:
	json_decref(chat);
	json_decref(msgs);
	return fail(e, NULL, NULL, "out of memory");
}

struct srv_req *hs_srv_parse_messages(struct srv *s, int count_only, const char *body, size_t len, int *status,
				      char **err)
{
	struct merr e = { 0 };
	json_error_t je;
	json_t *root = json_loadb(body, len, 0, &je), *chat = NULL;
	struct srv_req *r = NULL;

	if (!root)
		fail(&e, NULL, "invalid_json", "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line,
		     je.column);
	else if (!json_is_object(root))
		fail(&e, NULL, "invalid_json", "the body must be a JSON object");
	else if ((chat = to_chat(root, &e))) {
		if (count_only) /* count_tokens: the prompt only */
			json_object_del(chat, "stream");
		r = hs_srv_parse_json(s, 1, chat, status, err);
		if (r) {
			r->api = SRV_API_MESSAGES;
			hs_srv_random_id(s, "msg_", r->id, sizeof r->id);
		}
		json_decref(chat);
		json_decref(root);
		return r;
	}
	json_decref(root);
	*status = e.status ? e.status : 500;
	*err = e.body;
	return NULL;
}
