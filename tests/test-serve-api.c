/* Checks that tool calls in a model's reply come out of `hotset serve`'s
 * answer (server/api.c) as OpenAI tool_calls: Qwen3 <tool_call> blocks with
 * the name and arguments inside (one, two with text between, more than the
 * cap), and a harmony call to functions.NAME on the commentary channel, each
 * as the function's name and its arguments as a JSON string, content null
 * when there is none; whole, and streamed as chunks that accumulate (the
 * way the openai Python client does) into the same calls. */
#include "config.h"

#include <errno.h>

#include "server/server.h"
#include "tests/tok-util.h"

/* serve.c's, which this test does not link: distinct ids */
/* serve.c's clock (store.c's ages): time does not pass here */
double hs_srv_now(void)
{
	return 0;
}

void hs_srv_random_id(struct srv *s, const char *prefix, char *buf, size_t n)
{
	static int k;
	(void)s;
	snprintf(buf, n, "%s%d", prefix, k++);
}

/* The streamed chunks' delta.tool_calls folded into one message, as the
 * openai client accumulates them: an entry per index, in order; a new
 * index brings id, type and the name, later chunks for it only argument
 * text (strings are concatenated, so a repeated id or name would show). */
static json_t *accumulate(const char *sse, json_t *msg)
{
	json_t *calls = json_array();
	for (const char *line = sse; line && (line = strstr(line, "data: ")); line += 6) {
		const char *end = strstr(line, "\n\n");
		json_t *x = end ? json_loadb(line + 6, (size_t)(end - line - 6), 0, NULL) : NULL;
		json_t *d = json_object_get(json_array_get(json_object_get(x, "choices"), 0), "delta"), *item;
		const char *c = json_string_value(json_object_get(d, "content"));
		size_t k;
		if (c && *c) {
			const char *had = json_string_value(json_object_get(msg, "content"));
			char *both = NULL;
			CHECK(asprintf(&both, "%s%s", had ? had : "", c) > 0, "content");
			json_object_set_new(msg, "content", json_string(both));
			free(both);
		}
		json_array_foreach(json_object_get(d, "tool_calls"), k, item) {
			json_t *ix = json_object_get(item, "index"), *fn = json_object_get(item, "function");
			const char *args = json_string_value(json_object_get(fn, "arguments"));
			size_t i = (size_t)json_integer_value(ix);
			CHECK(json_is_integer(ix) && i <= json_array_size(calls) && args,
			      "chunk item without index/arguments");
			if (i == json_array_size(calls)) {
				CHECK(json_is_string(json_object_get(item, "id")) &&
				      json_is_string(json_object_get(fn, "name")) &&
				      strcmp(json_string_value(json_object_get(item, "type")), "function") == 0,
				      "call %zu: first chunk without id, type or name", i);
				json_array_append(calls, item);
			} else {
				json_t *acc = json_object_get(json_array_get(calls, i), "function");
				char *both = NULL;
				CHECK(!json_object_get(item, "id") && !json_object_get(fn, "name"),
				      "call %zu: id or name again (the client would concatenate them)", i);
				const char *had = json_string_value(json_object_get(acc, "arguments"));
				CHECK(asprintf(&both, "%s%s", had, args) > 0, "arguments");
				json_object_set_new(acc, "arguments", json_string(both));
				free(both);
			}
		}
		json_decref(x);
	}
	if (json_array_size(calls))
		json_object_set(msg, "tool_calls", calls);
	json_decref(calls);
	return msg;
}

/* The reply (text with special tokens) through the parser into a request,
 * as the scheduler passes it on; then the answer's message (streamed: the
 * chunks accumulated into one). */
static json_t *answer(hs_tokenizer *t, enum hs_chat_format f, const char *reply, int stream)
{
	static struct srv s = { .model_name = "m", .fingerprint = "fp" };
	struct srv_req r = { .chat = 1, .stream = stream };
	const struct hs_reply_delta *d;
	static int32_t ids[4096];
	int n = hs_tokenize(t, reply, strlen(reply), HS_TOK_PARSE_SPECIAL, ids, 4096), nd, rc = 0;

	CHECK(n > 0 && n <= 4096 && hs_reply_parser_new(t, f, &r.rp) == 0, "parser");
	for (int i = 0; i <= n && rc == 0; i++) {
		rc = i < n ? hs_reply_parser_push(r.rp, ids[i], &d, &nd) : hs_reply_parser_finish(r.rp, &d, &nd);
		for (int k = 0; rc == 0 && k < nd; k++)
			if (d[k].kind == HS_REPLY_TOOL_CALL)
				hs_srv_add_tool(&s, &r, d[k].tool_index, d[k].text, d[k].len);
			else
				hs_srv_emit_delta(&s, &r, d[k].kind, d[k].text, d[k].len);
	}
	if (rc == 1)
		CHECK(hs_reply_parser_finish(r.rp, &d, &nd) == 0 && nd == 0, "finish after the stop");
	CHECK(r.n_tool, "no tool call in '%s'", reply);
	/* streamed as they came: every call's head is out before the end */
	if (stream)
		for (int i = 0; i < r.n_tool; i++) {
			char idx[48];
			snprintf(idx, sizeof idx, "\"tool_calls\":[{\"index\":%d,\"id\"", i);
			CHECK(r.pend.p && strstr(r.pend.p, idx), "call %d not streamed before the end: %s", i, r.pend.p);
		}
	hs_srv_emit_finish(&s, &r, "tool_calls");
	json_t *m = NULL;
	if (!stream) {
		json_t *j = json_loads(r.pend.p ? r.pend.p : "", 0, NULL);
		json_t *c = json_array_get(json_object_get(j, "choices"), 0);
		CHECK(j && strcmp(json_string_value(json_object_get(c, "finish_reason")), "tool_calls") == 0,
		      "finish: %s", r.pend.p);
		m = json_incref(json_object_get(c, "message"));
		json_decref(j);
	} else {
		m = accumulate(r.pend.p, json_pack("{s:n}", "content"));
		CHECK(r.pend.p && strstr(r.pend.p, "\"finish_reason\":\"tool_calls\""), "stream finish: %s", r.pend.p);
	}
	CHECK(m, "answer not JSON: %s", r.pend.p);
	hs_reply_parser_free(r.rp);
	hs_srv_free_tools(&r);
	hs_srv_sbuf_free(&r.content);
	hs_srv_sbuf_free(&r.reasoning);
	hs_srv_sbuf_free(&r.pend);
	return m;
}

/* The message's content (NULL: null) and n calls names[i](args[i]), ids distinct. */
static void expect_calls(json_t *m, const char *content, int n, const char *const *names, const char *const *args,
			 const char *what)
{
	json_t *calls = json_object_get(m, "tool_calls"), *c = json_object_get(m, "content");

	CHECK(content ? json_is_string(c) && strcmp(json_string_value(c), content) == 0 : json_is_null(c),
	      "%s: content %s", what, json_is_string(c) ? json_string_value(c) : "null");
	CHECK(json_array_size(calls) == (size_t)n, "%s: %zu calls, want %d", what, json_array_size(calls), n);
	for (int i = 0; i < n && (size_t)i < json_array_size(calls); i++) {
		json_t *call = json_array_get(calls, i), *fn = json_object_get(call, "function");
		const char *name = json_string_value(json_object_get(fn, "name"));
		const char *a = json_string_value(json_object_get(fn, "arguments"));
		const char *id = json_string_value(json_object_get(call, "id"));
		json_t *got = a ? json_loads(a, JSON_DECODE_ANY, NULL) : NULL;
		json_t *want = json_loads(args[i], JSON_DECODE_ANY, NULL);
		CHECK(name && strcmp(name, names[i]) == 0, "%s: call %d name %s, want %s", what, i, name, names[i]);
		CHECK(got && want && json_equal(got, want), "%s: call %d arguments %s, want %s", what, i, a ? a : "(none)",
		      args[i]);
		CHECK(id && strncmp(id, "call_", 5) == 0 &&
			      strcmp(json_string_value(json_object_get(call, "type")), "function") == 0,
		      "%s: call %d id/type", what, i);
		for (int k = 0; k < i; k++)
			CHECK(strcmp(id, json_string_value(json_object_get(json_array_get(calls, k), "id"))) != 0,
			      "%s: calls %d and %d share id %s", what, k, i, id);
		json_decref(got);
		json_decref(want);
	}
	json_decref(m);
}

/* store.c keeps a conversation a random model wrote a NUL into: it comes
 * back (jansson refuses \u0000 unless asked) with U+FFFD in its place, and
 * a backslash followed by "u0000" as text stays as it was. */
static void store_nul(void)
{
	json_t *conv = json_pack("[{s:s, s:s%}, {s:s, s:s}]", "role", "assistant", "content", "a\0b", (size_t)3,
				 "role", "user", "content", "\\u0000 \\\\u0000");
	hs_srv_store_put("resp_nul", conv);
	json_decref(conv);
	json_t *got = hs_srv_store_get("resp_nul");
	const char *c0 = json_string_value(json_object_get(json_array_get(got, 0), "content"));
	const char *c1 = json_string_value(json_object_get(json_array_get(got, 1), "content"));
	CHECK(got && c0 && strcmp(c0, "a\xef\xbf\xbd" "b") == 0, "stored NUL: %s", c0 ? c0 : "(not kept)");
	CHECK(c1 && strcmp(c1, "\\u0000 \\\\u0000") == 0, "stored backslash text: %s", c1 ? c1 : "(not kept)");
	json_decref(got);
	hs_srv_store_clear();
}

int main(void)
{
	hs_tokenizer *o200k, *qwen;

	if (hs_tokenizer_open(hs_test_data(VOCAB_GGUF), &o200k) || hs_tokenizer_open(hs_test_data(QWEN_GGUF), &qwen)) {
		fprintf(stderr, "FAIL: %s\n", hs_last_error());
		return 1;
	}
	static const char *const q = "<think>\nWeather.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", "
				     "\"arguments\": {\"location\": \"Paris\", \"days\": 2}}\n</tool_call><|im_end|>";
	static const char *const q2 = "Both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": "
				      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
				      "{\"tz\": \"CET\"}}\n</tool_call><|im_end|>";
	static const char *const h = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
				     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
				     "{\"location\":\"Paris\",\"days\":2}<|call|>";
	static const char *const weather = "{\"location\": \"Paris\", \"days\": 2}";
	/* more calls than the server keeps: the first SRV_MAX_CALLS */
	char many[4096] = "";
	const char *many_names[SRV_MAX_CALLS], *many_args[SRV_MAX_CALLS];
	char many_text[SRV_MAX_CALLS][32];
	for (int i = 0; i < SRV_MAX_CALLS + 3; i++) {
		snprintf(many + strlen(many), sizeof many - strlen(many),
			 "<tool_call>{\"name\": \"f\", \"arguments\": {\"i\": %d}}</tool_call>", i);
		if (i < SRV_MAX_CALLS) {
			snprintf(many_text[i], sizeof many_text[i], "{\"i\": %d}", i);
			many_names[i] = "f";
			many_args[i] = many_text[i];
		}
	}
	for (int stream = 0; stream < 2; stream++) {
		const char *what = stream ? " streamed" : "";
		char w[64];
		snprintf(w, sizeof w, "qwen3%s", what);
		expect_calls(answer(qwen, HS_CHAT_CHATML, q, stream), NULL, 1, (const char *[]){ "get_weather" },
			     (const char *[]){ weather }, w);
		snprintf(w, sizeof w, "harmony%s", what);
		expect_calls(answer(o200k, HS_CHAT_HARMONY, h, stream), NULL, 1, (const char *[]){ "get_weather" },
			     (const char *[]){ weather }, w);
		snprintf(w, sizeof w, "qwen3 two calls%s", what);
		expect_calls(answer(qwen, HS_CHAT_CHATML, q2, stream), "Both.", 2,
			     (const char *[]){ "get_weather", "get_time" },
			     (const char *[]){ "{\"location\": \"Paris\"}", "{\"tz\": \"CET\"}" }, w);
		snprintf(w, sizeof w, "qwen3 %d calls%s", SRV_MAX_CALLS + 3, what);
		expect_calls(answer(qwen, HS_CHAT_CHATML, many, stream), NULL, SRV_MAX_CALLS, many_names, many_args, w);
	}
	store_nul();
	hs_tokenizer_free(o200k);
	hs_tokenizer_free(qwen);
	return hs_test_end();
}
