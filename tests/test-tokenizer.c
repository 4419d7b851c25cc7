/* Checks the tokenizer against other implementations' ids: OpenAI tiktoken on
 * gpt-oss's vocabulary (the shared oracle strings, our own strings in many
 * scripts, 4,500 random texts) and Hugging Face tokenizers on the tiny
 * Qwen3-MoE file (qwen2 pre-tokenizer and merges list); decode(encode(s)) == s
 * for valid and invalid UTF-8; long pieces finish; the API's edges. */
#include "config.h"

#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "hotset.h"
#include "model/gguf-write.h"
#include "text/tokenizer.h"
#include "tests/tok-util.h"

static hs_tokenizer *o200k, *qwen;

/* Encodes and checks the result against ids[] (a JSON array); prints both on a mismatch. */
static void check_ids(hs_tokenizer *t, const char *what, const char *text, size_t len, int flags, json_t *want)
{
	int32_t *ids = malloc((len + 2) * sizeof *ids);
	int n = hs_tokenize(t, text, len, flags, ids, (int)len + 2), same = n == (int)json_array_size(want);

	for (int i = 0; same && i < n; i++)
		same = ids[i] == json_integer_value(json_array_get(want, (size_t)i));
	CHECK(same, "%s: '%.*s': %d ids, %zu expected", what, (int)(len > 80 ? 80 : len), text, n, json_array_size(want));
	if (!same) {
		fprintf(stderr, "  got:");
		for (int i = 0; i < n && i < 40; i++)
			fprintf(stderr, " %d", ids[i]);
		fprintf(stderr, "\n  want:");
		for (size_t i = 0; i < json_array_size(want) && i < 40; i++)
			fprintf(stderr, " %lld", json_integer_value(json_array_get(want, i)));
		fputc('\n', stderr);
	}
	free(ids);
}

/* decode(encode(text)) gives back the bytes, with and without special parsing */
static void check_round_trip(hs_tokenizer *t, const char *text, size_t len)
{
	for (int flags = 0; flags <= HS_TOK_PARSE_SPECIAL; flags += HS_TOK_PARSE_SPECIAL) {
		int32_t *ids = malloc((len + 1) * sizeof *ids);
		int n = hs_tokenize(t, text, len, flags, ids, (int)len + 1);
		size_t got = 0;
		int ok = n >= 0;
		/* raw bytes of every token, concatenated (no UTF-8 repair) */
		for (int i = 0; ok && i < n; i++) {
			char piece[256];
			int m = hs_token_bytes(t, ids[i], 1, piece, sizeof piece);
			ok = m >= 0 && m <= (int)sizeof piece && got + (size_t)m <= len && memcmp(text + got, piece, (size_t)m) == 0;
			got += (size_t)m;
		}
		CHECK(ok && got == len, "round trip (flags %d) of '%.*s'", flags, (int)(len > 60 ? 60 : len), text);
		free(ids);
	}
}

static void strings_file(const char *rel, const char *plain_key, const char *special_key, hs_tokenizer *t)
{
	json_t *all = tok_load_json(rel);
	size_t i;
	json_t *row;

	json_array_foreach(all, i, row) {
		json_t *text = json_object_get(row, "text");
		const char *s = json_string_value(text);
		size_t len = json_string_length(text);
		check_ids(t, plain_key, s, len, 0, json_object_get(row, plain_key));
		check_ids(t, special_key, s, len, HS_TOK_PARSE_SPECIAL, json_object_get(row, special_key));
		check_round_trip(t, s, len);
	}
	printf("%s: %zu strings (%s, %s)\n", rel, json_array_size(all), plain_key, special_key);
	json_decref(all);
}

/* The random texts: ids hashed as the generator hashed tiktoken's and
 * Hugging Face's. */
static void random_texts(void)
{
	json_t *r = tok_load_json("vocab/random.json"), *exclude = json_object_get(r, "exclude");
	const char *name;
	json_t *set;
	size_t total = 0, texts = 0;

	json_object_foreach(json_object_get(r, "sets"), name, set) {
		json_t *cols = json_object_get(set, "columns"), *chunks = json_object_get(set, "chunks");
		size_t step = tok_sanitized() ? 7 : 1;
		for (size_t i = 0; i < json_array_size(chunks); i += step) {
			json_t *row = json_array_get(chunks, i);
			size_t len;
			char *s = tok_random_text(set, exclude, i, &len);
			CHECK((json_int_t)len == json_integer_value(json_array_get(row, 0)),
			      "%s text %zu: %zu bytes, the generator made %lld", name, i, len,
			      json_integer_value(json_array_get(row, 0)));
			for (size_t c = 0; c < json_array_size(cols); c++) {
				const char *col = json_string_value(json_array_get(cols, c));
				hs_tokenizer *t = strncmp(col, "o200k", 5) == 0 ? o200k : strncmp(col, "qwen", 4) == 0 ? qwen : NULL;
				if (!t)
					continue; /* splits: tests/test-pretok.c */
				int flags = strstr(col, "special") ? HS_TOK_PARSE_SPECIAL : 0;
				int32_t *ids = malloc((len + 1) * sizeof *ids);
				int n = hs_tokenize(t, s, len, flags, ids, (int)len + 1);
				uint32_t h = n >= 0 ? tok_fnv((const uint32_t *)ids, (size_t)n) : 0;
				json_int_t want_n = json_integer_value(json_array_get(row, 1 + 2 * c));
				json_int_t want_h = json_integer_value(json_array_get(row, 2 + 2 * c));
				CHECK(n == want_n && h == (uint32_t)want_h, "%s text %zu, %s: %d ids (hash %08x), want %lld (%08llx): '%s'",
				      name, i, col, n, h, want_n, (unsigned long long)want_h, s);
				free(ids);
			}
			check_round_trip(o200k, s, len);
			total += len;
			texts++;
			free(s);
		}
	}
	printf("random texts: %zu (%zu bytes), ids as tiktoken and Hugging Face give\n", texts, total);
	json_decref(r);
}

/* Bytes that are not UTF-8 are kept: each a character of the "other"
 * class, encoded by its byte tokens, decoded back exactly. */
static void invalid_utf8(void)
{
	static const char *const cases[] = { "a\xff" "b", "\xc3", "\xc3(", "\xe2\x82", "\xed\xa0\x80 surrogate",
					     "\xf4\x90\x80\x80", "\xc0\xaf overlong", " \x80\x80\x80 abc",
					     "\xf0\x9f\x98 cut emoji", "abc\xe4\xb8" };
	uint64_t seed = 7;

	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		check_round_trip(o200k, cases[i], strlen(cases[i]));
		check_round_trip(qwen, cases[i], strlen(cases[i]));
	}
	/* "a\xffb": the bad byte is one piece of its own, between a and b */
	int32_t ids[8];
	int n = hs_tokenize(o200k, "a\xff" "b", 3, 0, ids, 8);
	CHECK(n == 3 && ids[0] == hs_tokenizer_find(o200k, "a") && ids[2] == hs_tokenizer_find(o200k, "b"),
	      "a\\xffb: %d ids", n);
	/* random bytes: never a failure, always the same bytes back */
	for (int k = 0; k < (tok_sanitized() ? 200 : 2000); k++) {
		char buf[64];
		size_t len = tok_splitmix(&seed) % sizeof buf;
		for (size_t j = 0; j < len; j++)
			buf[j] = (char)tok_splitmix(&seed);
		check_round_trip(o200k, buf, len);
		check_round_trip(qwen, buf, len);
	}
}

/* One piece of a megabyte (a run of one letter, of digits pairs, of CJK)
 * must not take quadratic time; it must also decode back. */
static void long_pieces(void)
{
	size_t len = tok_sanitized() ? 100000 : 1 << 20;
	static const char *const units[] = { "a", "ab", "\xe4\xb8\xad", " ", "\n", "!" };
	char *s = malloc(len + 4);

	for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
		size_t ul = strlen(units[u]), n = 0;
		while (n + ul <= len)
			memcpy(s + n, units[u], ul), n += ul;
		for (int t = 0; t < 2; t++) {
			struct timespec a, b;
			clock_gettime(CLOCK_MONOTONIC, &a);
			check_round_trip(t ? qwen : o200k, s, n);
			clock_gettime(CLOCK_MONOTONIC, &b);
			/* reported, not asserted: tests hold no timing limits */
			printf("%s: %zu bytes of '%s' encoded and checked in %.3f s\n", t ? "qwen2" : "o200k", n,
			       units[u][0] == '\n' ? "\\n" : units[u],
			       (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
		}
	}
	free(s);
}

static void api_edges(void)
{
	int32_t ids[4];
	const char *text = "Hello world, hello tokens";
	int n = hs_tokenize(o200k, text, strlen(text), 0, NULL, 0), m;

	/* the count is the same whatever the buffer, and only max_ids are written */
	CHECK(n == 5, "'%s': %d ids", text, n);
	ids[2] = -7;
	m = hs_tokenize(o200k, text, strlen(text), 0, ids, 2);
	CHECK(m == n && ids[0] == 13225 && ids[1] == 2375 && ids[2] == -7, "short buffer: %d, ids %d %d %d", m, ids[0],
	      ids[1], ids[2]);
	CHECK(hs_tokenize(o200k, "", 0, 0, ids, 4) == 0, "empty text");
	CHECK(hs_tokenize(o200k, text, (size_t)1 << 31, 0, NULL, 0) == -EINVAL, "2 GiB text accepted");
	/* ids of the file's specials and types */
	CHECK(hs_tokenizer_n_vocab(o200k) == 201088, "n_vocab %d", hs_tokenizer_n_vocab(o200k));
	CHECK(hs_tokenizer_bos(o200k) == 199998 && hs_tokenizer_eos(o200k) == 200002, "bos/eos %d %d",
	      hs_tokenizer_bos(o200k), hs_tokenizer_eos(o200k));
	CHECK(hs_tokenizer_eot(o200k) == 200002, "eot %d (<|return|>)", hs_tokenizer_eot(o200k));
	CHECK(hs_tokenizer_find(o200k, "<|call|>") == 200012 && hs_tokenizer_find(o200k, "<|channel|>") == 200005,
	      "find specials");
	CHECK(hs_tokenizer_find(o200k, " Hello") == 32949 && hs_tokenizer_find(o200k, "<|nope|>") == -1 &&
	      hs_tokenizer_find(o200k, "") == -1, "find ordinary");
	CHECK(hs_tokenizer_is_control(o200k, 200006) == 1 && hs_tokenizer_is_control(o200k, 13225) == 0,
	      "is_control");
	CHECK(hs_tokenizer_token_type(o200k, 201088) == -EINVAL && strstr(hs_last_error(), "201088") &&
	      strstr(hs_last_error(), "n_vocab 201088"), "bad id message: %s", hs_last_error());
	CHECK(hs_tokenizer_token_type(o200k, -1) == -EINVAL, "id -1");
	CHECK(strcmp(hs_tokenizer_arch(o200k), "gpt-oss") == 0 && strcmp(hs_tokenizer_pre(o200k), "gpt-4o") == 0,
	      "arch %s pre %s", hs_tokenizer_arch(o200k), hs_tokenizer_pre(o200k));
	CHECK(hs_tokenizer_chat_template(o200k) == NULL, "the vocab file has no template");
	CHECK(strcmp(hs_tokenizer_pre(qwen), "qwen2") == 0 && hs_tokenizer_eot(qwen) == 319, "qwen eot %d",
	      hs_tokenizer_eot(qwen));
	/* add_bos is false in both files: HS_TOK_ADD_BOS adds nothing */
	CHECK(hs_tokenize(o200k, "Hi", 2, HS_TOK_ADD_BOS, ids, 4) == 1, "add_bos honoured");
	o200k->add_bos = 1;
	CHECK(hs_tokenize(o200k, "Hi", 2, HS_TOK_ADD_BOS, ids, 4) == 2 && ids[0] == 199998, "add_bos set: BOS first");
	o200k->add_bos = 0;
	/* token bytes: control tokens only when asked; byte tokens partial UTF-8 */
	char buf[32];
	CHECK(hs_token_bytes(o200k, 200006, 0, buf, sizeof buf) == 0, "<|start|> hidden");
	CHECK(hs_token_bytes(o200k, 200006, 1, buf, sizeof buf) == 9 && memcmp(buf, "<|start|>", 9) == 0,
	      "<|start|> rendered");
	CHECK(hs_token_bytes(o200k, hs_tokenize(o200k, "\xc3", 1, 0, ids, 4) == 1 ? ids[0] : 0, 0, buf, 4) == 1 &&
	      (uint8_t)buf[0] == 0xC3, "byte token 0xC3");
	CHECK(hs_token_bytes(o200k, 201088, 1, buf, 4) == -EINVAL, "hs_token_bytes bad id");
	/* user typed special text stays text without HS_TOK_PARSE_SPECIAL */
	CHECK(hs_tokenize(o200k, "<|end|>", 7, 0, ids, 4) > 1 && hs_tokenize(o200k, "<|end|>", 7, HS_TOK_PARSE_SPECIAL,
									     ids, 4) == 1, "special parsing");
}

/* ---- tokenizer files written here, good and broken ------------------- */

enum {
	FLAW_OK, FLAW_MODEL, FLAW_PRE, FLAW_NO_MODEL, FLAW_TYPES_LEN, FLAW_TYPE_9, FLAW_BOS, FLAW_NO_BYTE, FLAW_TOKENS_INT,
	FLAW_HUGE, FLAW_MERGE
};

/* GPT-2's byte-level text of one byte, as UTF-8 */
static void byte_text(int b, char out[4])
{
	int k = 0, cp = -1;
	for (int x = 0; x < 256 && cp < 0; x++) {
		int printable = (x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
		if (x == b)
			cp = printable ? x : 256 + k;
		k += !printable;
	}
	uint8_t u[4];
	int n = hs__utf8_encode((uint32_t)cp, u);
	memcpy(out, u, (size_t)n);
	out[n] = '\0';
}

static int write_tokenizer(const char *path, int flaw)
{
	static char text[256][4];
	const char *tokens[264], *merges[3] = { "h e", "l l", "he ll" };
	char *huge = NULL;
	int32_t types[264];
	int n = 0, rc;
	struct hs_gguf_writer *w = hs__gguf_writer_new();

	for (int b = 0; b < 256; b++) {
		byte_text(b, text[b]);
		tokens[n] = text[b];
		types[n++] = 1;
	}
	tokens[n] = "he", types[n++] = 1;
	tokens[n] = "ll", types[n++] = 1;
	tokens[n] = "hell", types[n++] = 1;
	tokens[n] = "<|end|>", types[n++] = 3;
	tokens[n] = "<tag>", types[n++] = 4;
	if (flaw == FLAW_NO_BYTE)
		tokens['A'] = "not a byte";
	if (flaw == FLAW_TYPE_9)
		types[5] = 9;
	if (flaw == FLAW_HUGE) {
		huge = malloc(70001);
		memset(huge, 'x', 70000);
		huge[70000] = '\0';
		tokens[n - 1] = huge;
	}
	if (flaw == FLAW_MERGE)
		merges[1] = "ll";
	hs__gguf_w_str(w, "general.architecture", "qwen3moe");
	if (flaw != FLAW_NO_MODEL)
		hs__gguf_w_str(w, "tokenizer.ggml.model", flaw == FLAW_MODEL ? "llama" : "gpt2");
	hs__gguf_w_str(w, "tokenizer.ggml.pre", flaw == FLAW_PRE ? "llama3" : "qwen2");
	if (flaw == FLAW_TOKENS_INT)
		hs__gguf_w_arr_i32(w, "tokenizer.ggml.tokens", types, (uint64_t)n);
	else
		hs__gguf_w_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
	hs__gguf_w_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)(flaw == FLAW_TYPES_LEN ? n - 1 : n));
	hs__gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, 3);
	hs__gguf_w_u32(w, "tokenizer.ggml.bos_token_id", flaw == FLAW_BOS ? (uint32_t)n : 259);
	rc = hs__gguf_w_write(w, path, NULL, NULL, NULL, NULL);
	hs__gguf_writer_free(w);
	free(huge);
	return rc;
}

static void tokenizer_files(void)
{
	static const struct { int flaw, err; const char *says; } cases[] = {
		{ FLAW_MODEL, -EINVAL, "'llama'" }, { FLAW_PRE, -EINVAL, "'llama3'" }, { FLAW_NO_MODEL, -EINVAL, "no tokenizer" },
		{ FLAW_TYPES_LEN, -EIO, "token_type" }, { FLAW_TYPE_9, -EIO, "type 9" }, { FLAW_BOS, -EIO, "bos_token_id" },
		{ FLAW_NO_BYTE, -EINVAL, "byte 0x41" }, { FLAW_TOKENS_INT, -EIO, "not an array of strings" },
		{ FLAW_HUGE, -EIO, "70000 bytes" }, { FLAW_MERGE, -EIO, "merge 1" },
	};
	char dir[] = "/tmp/hs-tok-XXXXXX", path[64];
	hs_tokenizer *t;
	int32_t ids[16];

	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(path, sizeof path, "%s/t.gguf", dir);
	CHECK(write_tokenizer(path, FLAW_OK) == 0 && hs_tokenizer_open(path, &t) == 0, "good file: %s", hs_last_error());
	if (!hs_test_failures) {
		/* merges "h e", "l l", "he ll": hello = hell + o; <tag> is user-defined, split without asking */
		int n = hs_tokenize(t, "hello<tag><|end|>", 17, 0, ids, 16);
		CHECK(n > 3 && ids[0] == 258 && ids[1] == 'o' && ids[2] == 260, "hello<tag>: %d ids: %d %d %d", n,
		      ids[0], ids[1], ids[2]);
		CHECK(hs_tokenize(t, "<|end|>", 7, HS_TOK_PARSE_SPECIAL, ids, 16) == 1 && ids[0] == 259, "<|end|> special");
		CHECK(hs_tokenizer_bos(t) == 259 && hs_tokenizer_eos(t) == -1, "bos %d eos %d", hs_tokenizer_bos(t),
		      hs_tokenizer_eos(t));
		hs_tokenizer_free(t);
	}
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		t = NULL;
		CHECK(write_tokenizer(path, cases[i].flaw) == 0, "write case %zu", i);
		int rc = hs_tokenizer_open(path, &t);
		CHECK(rc == cases[i].err && !t && strstr(hs_last_error(), cases[i].says) && strstr(hs_last_error(), path),
		      "case %zu: %d, want %d saying \"%s\": %s", i, rc, cases[i].err, cases[i].says, hs_last_error());
		hs_tokenizer_free(t);
	}
	unlink(path);
	rmdir(dir);
	CHECK(hs_tokenizer_open(hs_test_data("no/such.gguf"), &t) == -ENOENT && !t, "missing file");
	CHECK(hs_tokenizer_open(hs_test_data("topologies/README.md"), &t) == -EIO && !t, "not a GGUF: %s",
	      hs_last_error());
}

int main(void)
{
	int rc;

	if ((rc = hs_tokenizer_open(hs_test_data(VOCAB_GGUF), &o200k)) ||
	    (rc = hs_tokenizer_open(hs_test_data(QWEN_GGUF), &qwen))) {
		fprintf(stderr, "FAIL: %s\n", hs_last_error());
		return 1;
	}
	strings_file("vocab/o200k-strings.json", "ids", "ids_special", o200k);
	strings_file("vocab/strings.json", "o200k", "o200k_special", o200k);
	strings_file("vocab/strings.json", "qwen_tiny", "qwen_tiny_special", qwen);
	random_texts();
	invalid_utf8();
	long_pieces();
	api_edges();
	tokenizer_files();
	hs_tokenizer_free(o200k);
	hs_tokenizer_free(qwen);
	return hs_test_end();
}
