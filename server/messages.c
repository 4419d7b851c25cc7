/* The Anthropic Messages API in: a /v1/messages body (system, messages of
 * text, thinking, tool_use and tool_result blocks, tools with input_schema,
 * tool_choice, stop_sequences) rewritten as the chat completion it asks
 * for, then checked and rendered by request.c like any other.  What goes
 * out is api.c's (the message object and its stream of events).
 * Refused with a 400 naming the field: images and documents, server
 * tools (web search ...), a block type this server does not know. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const char *const text_only[] = { "text", NULL };

/* One Anthropic message as chat messages appended to out: a user's
 * tool_result blocks become tool messages (before its text), an
 * assistant's tool_use blocks its tool_calls and thinking its reasoning. */
static int add_message(json_t *out, json_t *m, size_t i, struct srv_err *e)
{
	const char *role = json_string_value(json_object_get(m, "role"));
	json_t *c = json_object_get(m, "content"), *b;
	size_t j;

	if (!json_is_object(m))
		return hs_srv_fail(e, "messages", "invalid_type", "messages[%zu]: an object is needed", i), -1;
	if (!role || (strcmp(role, "user") && strcmp(role, "assistant")))
		return hs_srv_fail(e, "messages", "invalid_value",
				   "messages[%zu].role: \"user\" or \"assistant\" is needed", i),
		       -1;
	const int asst = role[0] == 'a';
	if (json_is_string(c))
		return json_array_append_new(out, json_pack("{s:s, s:O}", "role", role, "content", c)) ? -1 : 0;
	if (!json_is_array(c))
		return hs_srv_fail(e, "messages", "invalid_type",
				   "messages[%zu].content: a string or an array of blocks is needed", i),
		       -1;
	json_t *text = json_array(), *calls = json_array(), *msg = json_pack("{s:s}", "role", role);
	struct sbuf think = { 0 };
	int rc = -1;
	if (!text || !calls || !msg)
		goto out;
	json_array_foreach(c, j, b) {
		const char *type = json_string_value(json_object_get(b, "type"));
		if (!json_is_object(b) || !type) {
			hs_srv_fail(e, "messages", "invalid_type",
				    "messages[%zu].content[%zu]: an object with a \"type\" is needed", i, j);
			goto out;
		}
		if (strcmp(type, "text") == 0) {
			json_t *t = json_object_get(b, "text");
			if (!json_is_string(t)) {
				hs_srv_fail(e, "messages", "invalid_type",
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
				hs_srv_fail(
					e, "messages", "invalid_type",
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
			char where[80];
			snprintf(where, sizeof where, "messages[%zu].content[%zu].content", i, j);
			json_t *t = hs_srv_join_text(json_object_get(b, "content"), text_only, "messages", where, e);
			if (!t || !json_is_string(id)) {
				json_decref(t);
				hs_srv_fail(e, "messages", "invalid_type",
					    "messages[%zu].content[%zu]: a tool_result needs a string tool_use_id", i,
					    j);
				goto out;
			}
			json_array_append_new(
				out, json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", id, "content", t));
		} else {
			hs_srv_fail(e, "messages", "not_supported",
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
	rc = think.err ? (hs_srv_fail(e, "messages", NULL, "out of memory"), -1) : 0;
out:
	json_decref(text);
	json_decref(calls);
	json_decref(msg);
	hs_srv_sbuf_free(&think);
	return rc;
}

/* The chat completion request a Messages body asks for (new reference). */
static json_t *to_chat(json_t *root, struct srv_err *e)
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
			return json_decref(chat), hs_srv_fail(e, "system", "invalid_type",
							      "system: a string or an array of text blocks is needed");
		json_t *t = hs_srv_join_text(v, text_only, "system", "system", e);
		if (!t)
			return json_decref(chat), NULL;
		json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", "system", "content", t));
	}
	v = json_object_get(root, "messages");
	if (!json_is_array(v))
		return json_decref(chat), hs_srv_fail(e, "messages", "invalid_type", "messages: an array is needed");
	if (!json_array_size(v))
		return json_decref(chat),
		       hs_srv_fail(e, "messages", "invalid_value", "messages: empty (at least one message is needed)");
	json_array_foreach(v, i, m)
		if (add_message(msgs, m, i, e))
			return json_decref(chat), NULL;
	v = json_object_get(root, "tools");
	if (v && !json_is_null(v) && hs_srv_convert_tools(chat, v, "custom", 1, "input_schema", e))
		return json_decref(chat), NULL;
	v = json_object_get(root, "tool_choice");
	if (v && !json_is_null(v)) {
		const char *type = json_string_value(json_object_get(v, "type"));
		json_t *name = json_object_get(v, "name");
		if (!type)
			return json_decref(chat), hs_srv_fail(e, "tool_choice", "invalid_type",
							      "tool_choice: an object with a \"type\" is needed");
		if (strcmp(type, "auto") == 0 || strcmp(type, "none") == 0)
			json_object_set_new(chat, "tool_choice", json_string(type));
		else if (strcmp(type, "any") == 0)
			json_object_set_new(chat, "tool_choice", json_string("required"));
		else if (strcmp(type, "tool") == 0 && json_is_string(name))
			json_object_set_new(chat, "tool_choice",
					    json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name));
		else
			return json_decref(chat), hs_srv_fail(e, "tool_choice", "not_supported",
							      "tool_choice: type \"%.40s\" (auto, any, tool with "
							      "a name, none) is not supported",
							      type);
	}
	return chat;
oom:
	json_decref(chat);
	json_decref(msgs);
	return hs_srv_fail(e, NULL, NULL, "out of memory");
}

struct srv_req *hs_srv_parse_messages(struct srv *s, const char *body, size_t len, int *status, char **err)
{
	return hs_srv_parse_other(s, body, len, to_chat, SRV_API_MESSAGES, "msg_", status, err);
}
