/* Checks the streaming detokenizer: what comes out is always valid UTF-8,
 * never half a character and never a lost one; bytes that cannot become
 * UTF-8 come out as U+FFFD exactly as Python's errors="replace" gives them
 * (fixed cases, and random token streams against a reference decoder written
 * here from the Unicode standard's table of well-formed sequences); control
 * tokens only when asked; bad ids are refused with the id and n_vocab named. */
#include "config.h"

#include <errno.h>

#include "hotset.h"
#include "tests/tok-util.h"

static hs_tokenizer *tk;

/* Table 3-7 of the Unicode standard: the well-formed byte sequences. */
static int ref_seq_len(const uint8_t *s, size_t n, size_t *bad_len)
{
	static const struct { uint8_t lo0, hi0, lo1, hi1; int len; } rows[] = {
		{ 0x00, 0x7F, 0, 0, 1 },       { 0xC2, 0xDF, 0x80, 0xBF, 2 }, { 0xE0, 0xE0, 0xA0, 0xBF, 3 },
		{ 0xE1, 0xEC, 0x80, 0xBF, 3 }, { 0xED, 0xED, 0x80, 0x9F, 3 }, { 0xEE, 0xEF, 0x80, 0xBF, 3 },
		{ 0xF0, 0xF0, 0x90, 0xBF, 4 }, { 0xF1, 0xF3, 0x80, 0xBF, 4 }, { 0xF4, 0xF4, 0x80, 0x8F, 4 },
	};
	for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
		if (s[0] < rows[r].lo0 || s[0] > rows[r].hi0)
			continue;
		size_t k = 1;
		if (rows[r].len > 1 && k < n && s[1] >= rows[r].lo1 && s[1] <= rows[r].hi1)
			for (k = 2; k < (size_t)rows[r].len && k < n && s[k] >= 0x80 && s[k] <= 0xBF;)
				k++;
		if (k == (size_t)rows[r].len)
			return rows[r].len;
		*bad_len = k; /* the maximal subpart */
		return 0;
	}
	*bad_len = 1;
	return 0;
}

/* bytes -> text with one U+FFFD per maximal subpart */
static char *ref_decode(const uint8_t *s, size_t n, size_t *out_len)
{
	char *o = malloc(3 * n + 1);
	size_t k = 0;

	for (size_t i = 0; i < n;) {
		size_t bad = 0;
		int len = ref_seq_len(s + i, n - i, &bad);
		if (len) {
			memcpy(o + k, s + i, (size_t)len);
			k += (size_t)len;
			i += (size_t)len;
		} else {
			memcpy(o + k, "\xEF\xBF\xBD", 3);
			k += 3;
			i += bad;
		}
	}
	*out_len = k;
	return o;
}

static int valid_utf8(const char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t bad;
		int len = ref_seq_len((const uint8_t *)s + i, n - i, &bad);
		if (!len)
			return 0;
		i += (size_t)len;
	}
	return 1;
}

/* The byte token of each byte (the vocabulary has one per byte). */
static int32_t byte_token(uint8_t b)
{
	int32_t id;
	CHECK(hs_tokenize(tk, (const char *)&b, 1, 0, &id, 1) == 1, "byte %02x is one token", b);
	return id;
}

/* Streams ids through a detokenizer; the concatenated output in *out. */
static size_t stream(const int32_t *ids, int n, int render, char *out, size_t cap, int per_push_check)
{
	hs_detok *d;
	const char *t;
	size_t len, k = 0;

	CHECK(hs_detok_new(tk, render, &d) == 0, "detok_new");
	for (int i = 0; i < n; i++) {
		CHECK(hs_detok_push(d, ids[i], &t, &len) == 0, "push %d", ids[i]);
		CHECK(strlen(t) == len || memchr(t, 0, len), "NUL-terminated");
		if (per_push_check)
			CHECK(valid_utf8(t, len), "push %d gave invalid UTF-8", i);
		CHECK(k + len <= cap, "output fits");
		memcpy(out + k, t, len);
		k += len;
	}
	CHECK(hs_detok_flush(d, &t, &len) == 0, "flush");
	memcpy(out + k, t, len);
	k += len;
	hs_detok_free(d);
	return k;
}

static void fixed_cases(void)
{
	static const struct { const char *in, *out; } cases[] = {
		{ "\xe2\x82\xac", "\xe2\x82\xac" }, { "a\xff" "b", "a\xef\xbf\xbd" "b" }, { "\xe2\x82(", "\xef\xbf\xbd(" },
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, { "\xf0\x9f\x98", "\xef\xbf\xbd" },
		{ "\xf0\x9f\x98" "A", "\xef\xbf\xbd" "A" }, { "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xe0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf0\x9f\x98\x80\x80", "\xf0\x9f\x98\x80\xef\xbf\xbd" },
	};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		int32_t ids[8];
		char out[64];
		int n = (int)strlen(cases[c].in);
		for (int i = 0; i < n; i++) /* one byte per token: the hardest way in */
			ids[i] = byte_token((uint8_t)cases[c].in[i]);
		size_t k = stream(ids, n, 0, out, sizeof out, 1);
		CHECK(k == strlen(cases[c].out) && memcmp(out, cases[c].out, k) == 0, "case %zu: %zu bytes out", c, k);
		char *whole;
		size_t wl;
		CHECK(hs_detokenize(tk, ids, n, 0, &whole, &wl) == 0 && wl == k && memcmp(whole, out, k) == 0,
		      "case %zu: hs_detokenize differs", c);
		free(whole);
	}
	/* a character split over two tokens comes out whole, with the second */
	hs_detok *d;
	const char *t;
	size_t len;
	hs_detok_new(tk, 0, &d);
	hs_detok_push(d, byte_token(0xC3), &t, &len);
	CHECK(len == 0, "half of é held back");
	hs_detok_push(d, byte_token(0xA9), &t, &len);
	CHECK(len == 2 && memcmp(t, "\xc3\xa9", 2) == 0, "é whole");
	/* a bad id changes nothing and says which and the limit */
	hs_detok_push(d, byte_token(0xE4), &t, &len);
	CHECK(hs_detok_push(d, 999999, &t, &len) == -EINVAL && len == 0, "bad id refused");
	CHECK(strstr(hs_last_error(), "999999") && strstr(hs_last_error(), "n_vocab 201088"), "message: %s",
	      hs_last_error());
	hs_detok_push(d, byte_token(0xB8), &t, &len);
	hs_detok_push(d, byte_token(0xAD), &t, &len);
	CHECK(len == 3 && memcmp(t, "\xe4\xb8\xad", 3) == 0, "中 after a refused id");
	hs_detok_flush(d, &t, &len);
	CHECK(len == 0, "nothing left");
	hs_detok_free(d);
	/* control tokens: text only when asked */
	int32_t ids[3] = { 200006, 1428, 200008 };
	char out[64];
	CHECK(stream(ids, 3, 0, out, sizeof out, 1) == 4 && memcmp(out, "user", 4) == 0, "specials hidden");
	CHECK(stream(ids, 3, 1, out, sizeof out, 1) == 24 && memcmp(out, "<|start|>user<|message|>", 24) == 0,
	      "specials shown");
}

/* Random streams of byte tokens, multi-byte tokens and control tokens. */
static void random_streams(void)
{
	uint64_t seed = 11;
	int rounds = tok_sanitized() ? 300 : 3000;
	int32_t byte_ids[256];

	for (int b = 0; b < 256; b++)
		byte_ids[b] = byte_token((uint8_t)b);
	for (int r = 0; r < rounds; r++) {
		int n = 1 + (int)(tok_splitmix(&seed) % 40), render = r & 1;
		int32_t ids[40];
		uint8_t bytes[40 * 160];
		size_t nb = 0;
		for (int i = 0; i < n; i++) {
			uint64_t x = tok_splitmix(&seed);
			if (x % 4 == 0) /* continuation and lead bytes most often */
				ids[i] = byte_ids[0x80 + (x >> 8) % 0x78];
			else if (x % 4 == 1)
				ids[i] = byte_ids[(x >> 8) % 256];
			else if (x % 8 == 2)
				ids[i] = 199998 + (int32_t)((x >> 8) % 1090); /* control */
			else
				ids[i] = (int32_t)((x >> 8) % 199998);
			char piece[256];
			int m = hs_token_bytes(tk, ids[i], render, piece, sizeof piece);
			memcpy(bytes + nb, piece, (size_t)m);
			nb += (size_t)m;
		}
		size_t want_len, got_len;
		char *want = ref_decode(bytes, nb, &want_len), got[3 * sizeof bytes];
		got_len = stream(ids, n, render, got, sizeof got, 1);
		CHECK(got_len == want_len && memcmp(got, want, got_len) == 0, "round %d: %zu bytes, reference %zu", r,
		      got_len, want_len);
		free(want);
	}
	printf("random streams: %d, each as Python's errors=\"replace\" decodes its bytes\n", rounds);
}

int main(void)
{
	if (hs_tokenizer_open(hs_test_data(VOCAB_GGUF), &tk)) {
		fprintf(stderr, "FAIL: %s\n", hs_last_error());
		return 1;
	}
	fixed_cases();
	random_streams();
	hs_tokenizer_free(tk);
	return hs_test_end();
}
