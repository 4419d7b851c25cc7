/* Checks that a tool call in a model's reply comes out of `hotset serve`'s
 * answer (server/api.c) as OpenAI tool_calls: a Qwen3 <tool_call> with its
 * name and arguments inside, and a harmony call to functions.NAME on the
 * commentary channel, each as the function's name and its arguments as a
 * JSON string, content null, whole and streamed. */
#include "config.h"

#include <errno.h>

#include "server/server.h"
#include "tests/tok-util.h"

/* serve.c's, which this test does not link */
void hs_srv_random_id(struct srv *s, const char *prefix, char *buf, size_t n)
{
	(void)s;
	snprintf(buf, n, "%s0", prefix);
}

/* The reply (text with special tokens) through the parser into a request,
 * as the scheduler passes it on, then the answer's JSON. */
static json_t *answer(hs_tokenizer *t, enum hs_chat_format f, const char *reply, int stream)
{
	static struct srv s = { .model_name = "m", .fingerprint = "fp" };
	struct srv_req r = { .chat = 1, .stream = stream };
	const struct hs_reply_delta *d;
	int32_t ids[256];
	int n = hs_tokenize(t, reply, strlen(reply), HS_TOK_PARSE_SPECIAL, ids, 256), nd, rc = 0;

	CHECK(n > 0 && n <= 256 && hs_reply_parser_new(t, f, &r.rp) == 0, "parser");
	for (int i = 0; i <= n && rc == 0; i++) {
		rc = i < n ? hs_reply_parser_push(r.rp, ids[i], &d, &nd) : hs_reply_parser_finish(r.rp, &d, &nd);
		for (int k = 0; rc == 0 && k < nd; k++)
			if (d[k].kind == HS_REPLY_TOOL_CALL)
				hs_srv_sbuf_add(&r.tool, d[k].text, d[k].len);
			else
				hs_srv_emit_delta(&s, &r, d[k].kind, d[k].text, d[k].len);
	}
	if (rc == 1)
		CHECK(hs_reply_parser_finish(r.rp, &d, &nd) == 0 && nd == 0, "finish after the stop");
	CHECK(r.tool.len, "no tool call in '%s'", reply);
	hs_srv_emit_finish(&s, &r, "tool_calls");
	json_t *j = NULL;
	if (!stream) {
		j = json_loads(r.pend.p ? r.pend.p : "", 0, NULL);
	} else { /* the chunk holding tool_calls */
		for (char *line = r.pend.p; line && !j; line = strstr(line + 1, "data: ")) {
			char *end = strstr(line, "\n\n");
			json_t *x = end ? json_loadb(line + 6, (size_t)(end - line - 6), 0, NULL) : NULL;
			json_t *c = json_array_get(json_object_get(x, "choices"), 0);
			if (json_object_get(json_object_get(c, "delta"), "tool_calls"))
				j = x;
			else
				json_decref(x);
		}
		CHECK(r.pend.p && strstr(r.pend.p, "\"finish_reason\":\"tool_calls\""), "stream finish: %s", r.pend.p);
	}
	CHECK(j, "answer not JSON: %s", r.pend.p);
	hs_reply_parser_free(r.rp);
	hs_srv_sbuf_free(&r.tool);
	hs_srv_sbuf_free(&r.content);
	hs_srv_sbuf_free(&r.reasoning);
	hs_srv_sbuf_free(&r.pend);
	return j;
}

static void expect_call(json_t *j, int stream, const char *name, const char *args, const char *what)
{
	json_t *c = json_array_get(json_object_get(j, "choices"), 0);
	json_t *m = json_object_get(c, stream ? "delta" : "message");
	json_t *fn = json_object_get(json_array_get(json_object_get(m, "tool_calls"), 0), "function");
	const char *a = json_string_value(json_object_get(fn, "arguments"));
	json_t *got = a ? json_loads(a, 0, NULL) : NULL, *want = json_loads(args, 0, NULL);

	CHECK(fn && json_is_string(json_object_get(fn, "name")) &&
	      strcmp(json_string_value(json_object_get(fn, "name")), name) == 0, "%s: name", what);
	CHECK(got && want && json_equal(got, want), "%s: arguments %s, want %s", what, a ? a : "(none)", args);
	if (!stream) {
		CHECK(json_is_null(json_object_get(m, "content")), "%s: content not null", what);
		CHECK(strcmp(json_string_value(json_object_get(c, "finish_reason")), "tool_calls") == 0, "%s: finish", what);
	}
	json_decref(got);
	json_decref(want);
	json_decref(j);
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
	static const char *const h = "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
				     "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
				     "{\"location\":\"Paris\",\"days\":2}<|call|>";
	for (int stream = 0; stream < 2; stream++) {
		expect_call(answer(qwen, HS_CHAT_CHATML, q, stream), stream, "get_weather",
			    "{\"location\": \"Paris\", \"days\": 2}", stream ? "qwen3 streamed" : "qwen3");
		expect_call(answer(o200k, HS_CHAT_HARMONY, h, stream), stream, "get_weather",
			    "{\"location\": \"Paris\", \"days\": 2}", stream ? "harmony streamed" : "harmony");
	}
	hs_tokenizer_free(o200k);
	hs_tokenizer_free(qwen);
	return hs_test_end();
}
