/* libFuzzer target for the tokenizer and the chat formats: any bytes are
 * encoded (both vocabularies of tests/data, with and without special
 * parsing) and must decode back to themselves; read as token ids, they go
 * through the streaming detokenizer and the reply parser of every format,
 * which must give valid UTF-8 and no error; as a user message they are
 * rendered and tokenized, and as tool definitions rendered or refused.  Built and run by tests/fuzz/run.sh, which sets
 * HS_DATA to tests/data. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "text/unicode.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hs_tokenizer *tk[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const char *const files[2] = { "vocab/gptoss-o200k-harmony-vocab.gguf",
					      "oracle/qwen3moe-l3-h256-e16k4-q8.gguf" };
	const char *dir = getenv("HS_DATA");
	char path[4096];

	(void)argc;
	(void)argv;
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/data", files[i]);
		if (hs_tokenizer_open(path, &tk[i]) != 0) {
			fprintf(stderr, "fuzz-tokenizer: %s (set HS_DATA to tests/data)\n", hs_last_error());
			abort();
		}
	}
	return 0;
}

static void check_utf8(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		int len;
		if (hs__utf8_decode((const uint8_t *)s + i, n - i, &len) == HS_UTF8_BAD)
			abort(); /* invalid UTF-8 left the library */
		i += (size_t)len;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	int32_t *ids = malloc((size + 1) * sizeof *ids);

	for (int v = 0; v < 2; v++) {
		hs_tokenizer *t = tk[v];
		int nv = hs_tokenizer_n_vocab(t);
		for (int flags = 0; flags <= HS_TOK_PARSE_SPECIAL; flags += HS_TOK_PARSE_SPECIAL) {
			int n = hs_tokenize(t, text, size, flags, ids, (int)size + 1);
			size_t at = 0;
			if (n < 0 || n > (int)size + 1)
				abort();
			for (int i = 0; i < n; i++) { /* the bytes come back exactly */
				char piece[512];
				int m = hs_token_bytes(t, ids[i], 1, piece, sizeof piece);
				if (m < 0 || m > (int)sizeof piece || at + (size_t)m > size || memcmp(piece, data + at, (size_t)m))
					abort();
				at += (size_t)m;
			}
			if (at != size)
				abort();
		}
		/* the input's bytes as ids, two bytes each */
		int n = (int)(size / 2);
		for (int i = 0; i < n; i++)
			ids[i] = (int32_t)((data[2 * i] | data[2 * i + 1] << 8) % nv);
		char *out;
		size_t len;
		if (hs_detokenize(t, ids, n, size & 1, &out, &len) != 0)
			abort();
		check_utf8(out, len);
		free(out);
		for (int f = HS_CHAT_HARMONY; f <= HS_CHAT_GLM; f++) {
			hs_reply_parser *p;
			const struct hs_reply_delta *d;
			int nd, rc = 0;
			if (hs_reply_parser_new(t, (enum hs_chat_format)f, &p) != 0)
				abort();
			for (int i = 0; i <= n && rc == 0; i++) {
				rc = i < n ? hs_reply_parser_push(p, ids[i], &d, &nd) : hs_reply_parser_finish(p, &d, &nd);
				if (rc < 0)
					abort();
				for (int k = 0; rc == 0 && k < nd; k++)
					check_utf8(d[k].text, d[k].len);
			}
			hs_reply_parser_free(p);
		}
		/* the input as a user message (up to its first NUL) */
		char *msg = strndup(text, size);
		struct hs_chat_message m[2] = { { .role = "system", .content = "s" }, { .role = "user", .content = msg } };
		struct hs_chat_opts o = { .date = "2025-01-01" };
		int32_t *cids;
		int nc;
		if (hs_chat_tokenize(t, m, 2, &o, &cids, &nc) != 0)
			abort();
		free(cids);
		/* and as tool definitions (a request's `tools`): rendered, or
		 * refused with -EINVAL, never anything else */
		o.tools_json = msg;
		int rc = hs_chat_tokenize(t, m, 2, &o, &cids, &nc);
		if (rc == 0)
			free(cids);
		else if (rc != -EINVAL)
			abort();
		free(msg);
	}
	free(ids);
	return 0;
}
