/* libFuzzer target for the HTTP request path of `hotset serve`, without
 * sockets: any bytes are (1) a request head for the gate's check
 * (server/head.c), whose answer must be "unfinished", a complete head
 * within the bytes, or a status with a message; (2) a /v1/chat/completions,
 * /v1/completions, /v1/messages or /v1/responses body for request.c,
 * messages.c and responses.c (JSON, fields, chat format, tokenizer over the
 * gpt-oss vocabulary of tests/data), which must give a request or a 400
 * whose body is JSON naming the same status; (3) an error
 * message, whose JSON (server/api.c) must parse.  Built and run by
 * tests/fuzz/run.sh, which sets HS_DATA to tests/data. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct srv s;

/* What request.c needs of the scheduler and the command (sched.c and
 * serve.c pull in the runtime): a request's life without a scheduler. */
struct srv_req *hs_srv_req_new(void)
{
	struct srv_req *r = calloc(1, sizeof *r);
	if (r)
		r->refs = 1;
	return r;
}

void hs_srv_req_unref_locked(struct srv_req *r)
{
	if (--r->refs > 0)
		return;
	free(r->prompt);
	for (int i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	json_decref(r->conv); /* a Responses request's conversation (sched.c frees it there) */
	hs_grammar_free(r->grammar);
	for (int i = 0; r->grammars && i < r->n_choices - 1; i++) /* n > 1: the other choices' */
		hs_grammar_free(r->grammars[i]);
	free(r->grammars);
	free(r);
}

/* serve.c's clock (store.c's ages): time does not pass here */
double hs_srv_now(void)
{
	return 0;
}

void hs_srv_random_id(struct srv *sv, const char *prefix, char *buf, size_t n)
{
	(void)sv;
	snprintf(buf, n, "%sfuzz", prefix);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("HS_DATA");
	char path[4096];

	(void)argc;
	(void)argv;
	snprintf(path, sizeof path, "%s/vocab/gptoss-o200k-harmony-vocab.gguf", dir ? dir : "tests/data");
	if (hs_tokenizer_open(path, &s.tok) != 0) {
		fprintf(stderr, "fuzz-http: %s (set HS_DATA to tests/data)\n", hs_last_error());
		abort();
	}
	pthread_mutex_init(&s.mu, NULL);
	s.fmt = HS_CHAT_HARMONY;
	s.n_vocab = hs_tokenizer_n_vocab(s.tok);
	s.n_ctx = 4096;
	s.o.max_body = 1 << 20;
	s.o.parallel = 4; /* n up to 4 */
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct srv_head h;

	/* (1) the head */
	int st = hs_srv_head_check(p, size, s.o.max_body, &h);
	if (st && (st < 400 || st > 505 || !h.msg[0]))
		abort();
	if (!st && (h.head_len > size || (h.head_len && h.target_off + h.target_len > size)))
		abort();

	/* (2) the body, by its length modulo 4: a chat completion, a
	 * completion, a Messages or a Responses request */
	int status = 0;
	char *err = NULL;
	struct srv_req *r = size % 4 == 2   ? hs_srv_parse_messages(&s, p, size, &status, &err)
			    : size % 4 == 3 ? hs_srv_parse_responses(&s, p, size, &status, &err)
					    : hs_srv_parse_request(&s, (int)(size & 1), p, size, &status, &err);
	if (r) {
		if (r->n_prompt <= 0 || r->n_prompt >= s.n_ctx || err)
			abort();
		hs_srv_req_unref_locked(r);
	} else {
		json_t *j = err ? json_loads(err, 0, NULL) : NULL;
		if (!j || json_integer_value(json_object_get(json_object_get(j, "error"), "status")) != status)
			abort();
		json_decref(j);
		free(err);
	}

	/* (3) the bytes as an error message: JSON that parses, whatever they are */
	char msg[1024], body[2048];
	size_t n = size < sizeof msg - 1 ? size : sizeof msg - 1;
	memcpy(msg, p, n);
	msg[n] = 0;
	size_t len = hs_srv_error_json_buf(body, sizeof body, 400, "invalid_request_error", "x", NULL, msg);
	json_t *j = json_loadb(body, len, 0, NULL);
	if (!j)
		abort();
	json_decref(j);
	return 0;
}
