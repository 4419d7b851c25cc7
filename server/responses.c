/* OpenAI's Responses API in: a /v1/responses body (instructions, input as
 * a string or items: messages, function_call, function_call_output,
 * reasoning; tools as flat function definitions; tool_choice;
 * max_output_tokens; reasoning.effort) rewritten as the chat completion it
 * asks for, then checked and rendered by request.c.  What goes out is
 * api.c's (the response object and its stream of events).  Refused with a
 * 400 naming the field: built-in tools (web search, file search ...),
 * non-text content, a previous_response_id store.c does not hold. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

static const char *const text_parts[] = { "input_text", "output_text", "text", NULL };

/* A message's content (or a call's output): a string, or input_text and
 * output_text parts joined by newlines. */
static json_t *item_text(json_t *c, size_t i, struct srv_err *e)
{
	char where[48];
	snprintf(where, sizeof where, "input[%zu].content", i);
	return hs_srv_join_text(c, text_parts, "input", where, e);
}

/* The text of a reasoning item: its content's reasoning_text, else its
 * summary's summary_text. */
static void reasoning_text(json_t *it, struct sbuf *b)
{
	const char *keys[2] = { "content", "summary" };
	for (int k = 0; k < 2 && !b->len; k++) {
		size_t j;
		json_t *p;
		json_array_foreach(json_object_get(it, keys[k]), j, p) {
			const char *t = json_string_value(json_object_get(p, "text"));
			if (t)
				hs_srv_sbuf_add(b, t, strlen(t));
		}
	}
}

/* The input items as chat messages: consecutive assistant items (reasoning,
 * text, function calls) become one assistant message. */
static int add_items(json_t *msgs, json_t *input, struct srv_err *e)
{
	json_t *asst = NULL, *it;
	struct sbuf think = { 0 };
	size_t i;

	json_array_foreach(input, i, it) {
		const char *type = json_string_value(json_object_get(it, "type"));
		const char *role = json_string_value(json_object_get(it, "role"));
		if (!json_is_object(it)) {
			hs_srv_fail(e, "input", "invalid_type", "input[%zu]: an object is needed", i);
			goto bad;
		}
		if (!type)
			type = "message";
		const int is_asst = (strcmp(type, "message") == 0 && role && strcmp(role, "assistant") == 0) ||
				    strcmp(type, "function_call") == 0 || strcmp(type, "reasoning") == 0;
		if (!is_asst && asst) { /* the assistant's turn ends */
			if (think.len)
				json_object_set_new(asst, "reasoning_content", json_stringn(think.p, think.len));
			json_array_append_new(msgs, asst);
			asst = NULL;
			think.len = 0;
		}
		if (is_asst && !asst && !(asst = json_pack("{s:s, s:s}", "role", "assistant", "content", ""))) {
			hs_srv_fail(e, "input", NULL, "out of memory");
			goto bad;
		}
		if (strcmp(type, "message") == 0) {
			json_t *t = item_text(json_object_get(it, "content"), i, e);
			if (!t)
				goto bad;
			if (!role || (strcmp(role, "user") && strcmp(role, "system") && strcmp(role, "developer") &&
				      strcmp(role, "assistant"))) {
				json_decref(t);
				hs_srv_fail(e, "input", "invalid_value",
					    "input[%zu].role: user, system, developer or assistant is needed", i);
				goto bad;
			}
			if (asst)
				json_object_set_new(asst, "content", t);
			else
				json_array_append_new(msgs, json_pack("{s:s, s:o}", "role", role, "content", t));
		} else if (strcmp(type, "reasoning") == 0) {
			reasoning_text(it, &think);
		} else if (strcmp(type, "function_call") == 0) {
			json_t *name = json_object_get(it, "name"), *args = json_object_get(it, "arguments");
			json_t *id = json_object_get(it, "call_id");
			if (!json_is_string(name) || !json_is_string(id) || (args && !json_is_string(args))) {
				hs_srv_fail(e, "input", "invalid_type",
					    "input[%zu]: a function_call needs a string name, call_id and arguments",
					    i);
				goto bad;
			}
			json_t *calls = json_object_get(asst, "tool_calls");
			if (!calls) {
				calls = json_array();
				json_object_set_new(asst, "tool_calls", calls);
			}
			json_array_append_new(calls, json_pack("{s:O, s:s, s:{s:O, s:s}}", "id", id, "type", "function",
							       "function", "name", name, "arguments",
							       args ? json_string_value(args) : "{}"));
		} else if (strcmp(type, "function_call_output") == 0) {
			json_t *id = json_object_get(it, "call_id"), *out = json_object_get(it, "output");
			json_t *t = json_is_string(out) ? json_incref(out) : item_text(out, i, e);
			if (!t || !json_is_string(id)) {
				json_decref(t);
				hs_srv_fail(e, "input", "invalid_type",
					    "input[%zu]: a function_call_output needs a string call_id and output", i);
				goto bad;
			}
			json_array_append_new(
				msgs, json_pack("{s:s, s:O, s:o}", "role", "tool", "tool_call_id", id, "content", t));
		} else {
			hs_srv_fail(e, "input", "not_supported", "input[%zu]: item type \"%.40s\" is not supported", i,
				    type);
			goto bad;
		}
	}
	if (asst) {
		if (think.len)
			json_object_set_new(asst, "reasoning_content", json_stringn(think.p, think.len));
		json_array_append_new(msgs, asst);
	}
	hs_srv_sbuf_free(&think);
	return 0;
bad:
	json_decref(asst);
	hs_srv_sbuf_free(&think);
	return -1;
}

/* The chat completion request a Responses body asks for (new reference). */
static json_t *to_chat(json_t *root, struct srv_err *e)
{
	json_t *chat = json_object(), *msgs = json_array(), *v;

	if (!chat || !msgs) {
		json_decref(chat);
		json_decref(msgs);
		return hs_srv_fail(e, NULL, NULL, "out of memory");
	}
	json_object_set_new(chat, "messages", msgs);
	static const char *const same[] = { "model", "temperature", "top_p", "stream", "seed", "parallel_tool_calls" };
	for (size_t k = 0; k < sizeof same / sizeof *same; k++)
		if ((v = json_object_get(root, same[k])))
			json_object_set(chat, same[k], v);
	if ((v = json_object_get(root, "max_output_tokens")) && !json_is_null(v)) {
		if (!json_is_integer(v))
			return json_decref(chat), hs_srv_fail(e, "max_output_tokens", "invalid_type",
							      "max_output_tokens: an integer is needed");
		if (json_integer_value(v) < 1)
			return json_decref(chat),
			       hs_srv_fail(e, "max_output_tokens", "invalid_value",
					   "max_output_tokens: %lld is less than 1", (long long)json_integer_value(v));
		json_object_set(chat, "max_tokens", v);
	}
	v = json_object_get(root, "reasoning");
	if (v && !json_is_null(v)) {
		json_t *effort = json_object_get(v, "effort");
		if (!json_is_object(v) || (effort && !json_is_null(effort) && !json_is_string(effort)))
			return json_decref(chat), hs_srv_fail(e, "reasoning", "invalid_type",
							      "reasoning: an object with a string effort is needed");
		if (json_is_string(effort))
			json_object_set(chat, "reasoning_effort", effort);
	}
	v = json_object_get(root, "instructions");
	if (v && !json_is_null(v)) {
		if (!json_is_string(v))
			return json_decref(chat),
			       hs_srv_fail(e, "instructions", "invalid_type", "instructions: a string is needed");
		json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", v));
	}
	/* where the conversation a later request may continue starts: after
	 * the instructions, which a later request does not inherit
	 * (request.c's hs_srv_parse_other reads this key, the chat parser
	 * ignores it) */
	json_object_set_new(chat, "hotset_conv_from", json_integer((json_int_t)json_array_size(msgs)));
	v = json_object_get(root, "previous_response_id");
	if (v && !json_is_null(v)) {
		json_t *prev = json_is_string(v) ? hs_srv_store_get(json_string_value(v)) : NULL;
		if (!json_is_string(v))
			return json_decref(chat), hs_srv_fail(e, "previous_response_id", "invalid_type",
							      "previous_response_id: a string is needed");
		if (!prev)
			return json_decref(chat),
			       hs_srv_fail(e, "previous_response_id", "invalid_value",
					   "previous_response_id: no response '%.60s' is kept (the last 32, for 10 minutes)",
					   json_string_value(v));
		json_array_extend(msgs, prev);
		json_decref(prev);
	}
	v = json_object_get(root, "input");
	if (json_is_string(v)) {
		json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", v));
	} else if (json_is_array(v)) {
		if (add_items(msgs, v, e))
			return json_decref(chat), NULL;
	} else {
		return json_decref(chat),
		       hs_srv_fail(e, "input", "invalid_type", "input: a string or an array of items is needed");
	}
	if (!json_array_size(msgs))
		return json_decref(chat),
		       hs_srv_fail(e, "input", "invalid_value", "input: empty (at least one item is needed)");
	v = json_object_get(root, "tools");
	if (v && !json_is_null(v) && hs_srv_convert_tools(chat, v, "function", 0, "parameters", e))
		return json_decref(chat), NULL;
	v = json_object_get(root, "tool_choice");
	if (json_is_string(v)) {
		json_object_set(chat, "tool_choice", v);
	} else if (json_is_object(v)) {
		json_t *name = json_object_get(v, "name");
		if (!json_is_string(name))
			return json_decref(chat),
			       hs_srv_fail(e, "tool_choice", "not_supported",
					   "tool_choice: a string or {\"type\": \"function\", \"name\"} is needed");
		json_object_set_new(chat, "tool_choice",
				    json_pack("{s:s, s:{s:O}}", "type", "function", "function", "name", name));
	} else if (v && !json_is_null(v)) {
		return json_decref(chat),
		       hs_srv_fail(e, "tool_choice", "invalid_type", "tool_choice: a string or an object is needed");
	}
	/* structured output: text.format {type: json_schema, name, schema,
	 * strict} is chat's response_format {type: json_schema, json_schema:
	 * {name, schema, strict}}; json_object and text as they are */
	v = json_object_get(root, "text");
	if (v && !json_is_null(v)) {
		json_t *f = json_object_get(v, "format");
		const char *type = json_string_value(json_object_get(f, "type"));
		if (!json_is_object(v) || (f && !json_is_null(f) && !type))
			return json_decref(chat),
			       hs_srv_fail(e, "text", "invalid_type", "text: {\"format\": {\"type\": ...}} is needed");
		if (type && strcmp(type, "json_schema") == 0)
			json_object_set_new(chat, "response_format",
					    json_pack("{s:s, s:{s:O*, s:O*, s:O*}}", "type", "json_schema", "json_schema", "name",
						      json_object_get(f, "name"), "schema", json_object_get(f, "schema"),
						      "strict", json_object_get(f, "strict")));
		else if (type)
			json_object_set_new(chat, "response_format", json_pack("{s:s}", "type", type));
	}
	return chat;
}

struct srv_req *hs_srv_parse_responses(struct srv *s, const char *body, size_t len, int *status, char **err)
{
	return hs_srv_parse_other(s, body, len, to_chat, SRV_API_RESPONSES, "resp_", status, err);
}
