/* Checks the hand-written pre-tokenizers against their patterns as Python's
 * `regex` module runs them: the pieces of our strings in many scripts and of
 * 4,500 random texts (about 1.2 MB, every code point of Unicode among them),
 * for the o200k and the qwen2 pattern; Qwen3.5's pattern (qwen2's with
 * combining marks in letter runs) on those strings and on 400 texts of marks
 * beside letters, digits, punctuation and spaces (tests/gen-qwen35-splits.py;
 * qwen2's pattern splits 294 of them otherwise); and the
 * generated class tables. */
#include "config.h"

#include <string.h>

#include "text/unicode.h"
#include "tests/tok-util.h"

typedef size_t (*split_fn)(const uint8_t *, size_t);

/* The byte lengths of the pieces, into a malloc'd array. */
static uint32_t *pieces(split_fn f, const char *s, size_t len, size_t *n)
{
	uint32_t *v = malloc((len + 1) * sizeof *v);
	size_t k = 0;

	for (size_t i = 0; i < len; k++) {
		size_t l = f((const uint8_t *)s + i, len - i);
		if (l == 0 || l > len - i) { /* a splitter must always make progress */
			CHECK(0, "piece of %zu bytes at %zu of %zu", l, i, len);
			break;
		}
		v[k] = (uint32_t)l;
		i += l;
	}
	*n = k;
	return v;
}

static void strings(void)
{
	json_t *all = tok_load_json("vocab/strings.json"), *row;
	size_t i, checked = 0;

	json_array_foreach(all, i, row) {
		const char *s = json_string_value(json_object_get(row, "text"));
		size_t len = json_string_length(json_object_get(row, "text"));
		for (int q = 0; q < 2; q++) {
			json_t *want = json_object_get(row, q ? "split_qwen2" : "split_o200k");
			size_t n, k;
			uint32_t *v;
			if (json_is_null(want))
				continue; /* a character whose class Unicode 17 changed */
			v = pieces(q ? hs__pretok_qwen2 : hs__pretok_o200k, s, len, &n);
			int same = n == json_array_size(want);
			for (k = 0; same && k < n; k++)
				same = v[k] == (uint32_t)json_integer_value(json_array_get(want, k));
			CHECK(same, "%s pieces of '%s': %zu, %zu expected", q ? "qwen2" : "o200k", s, n, json_array_size(want));
			if (!same) {
				fprintf(stderr, "  got:");
				for (k = 0; k < n; k++)
					fprintf(stderr, " %u", v[k]);
				fputc('\n', stderr);
			}
			checked++;
			free(v);
		}
	}
	printf("strings: %zu splits as Python's regex makes them\n", checked);
	json_decref(all);
}

static void random_texts(void)
{
	json_t *r = tok_load_json("vocab/random.json"), *exclude = json_object_get(r, "exclude"), *set;
	const char *name;
	size_t texts = 0, bytes = 0;

	json_object_foreach(json_object_get(r, "sets"), name, set) {
		json_t *cols = json_object_get(set, "columns"), *chunks = json_object_get(set, "chunks");
		for (size_t i = 0; i < json_array_size(chunks); i++) {
			json_t *row = json_array_get(chunks, i);
			size_t len;
			char *s = tok_random_text(set, exclude, i, &len);
			for (size_t c = 0; c < json_array_size(cols); c++) {
				const char *col = json_string_value(json_array_get(cols, c));
				split_fn f = !strcmp(col, "split_o200k") ? hs__pretok_o200k
					     : !strcmp(col, "split_qwen2") ? hs__pretok_qwen2 : NULL;
				size_t n;
				if (!f)
					continue; /* ids: tests/test-tokenizer.c */
				uint32_t *v = pieces(f, s, len, &n), h = tok_fnv(v, n);
				json_int_t want_n = json_integer_value(json_array_get(row, 1 + 2 * c));
				json_int_t want_h = json_integer_value(json_array_get(row, 2 + 2 * c));
				CHECK((json_int_t)n == want_n && h == (uint32_t)want_h,
				      "%s text %zu, %s: %zu pieces (hash %08x), regex made %lld (%08llx): '%s'", name, i, col,
				      n, h, want_n, (unsigned long long)want_h, s);
				free(v);
			}
			texts++;
			bytes += len;
			free(s);
		}
	}
	printf("random texts: %zu (%zu bytes), pieces as Python's regex cuts them\n", texts, bytes);
	json_decref(r);
}

static void tables(void)
{
	/* the ASCII fast path reads block 0 directly */
	CHECK(hs__uc_stage1[0] == 0, "stage1[0] = %d", hs__uc_stage1[0]);
	CHECK(strcmp(hs__uc_version, "16.0.0") == 0, "Unicode %s", hs__uc_version);
	CHECK(hs__uc_class('A') == HS_UC_LU && hs__uc_class('a') == HS_UC_LL && hs__uc_class('5') == HS_UC_N &&
	      hs__uc_class(' ') == HS_UC_WS && hs__uc_class('\r') == HS_UC_CR && hs__uc_class('\n') == HS_UC_LF &&
	      hs__uc_class('!') == HS_UC_OTHER, "ASCII classes");
	CHECK(hs__uc_class(0x01C5) == HS_UC_LU && hs__uc_class(0x02B0) == HS_UC_LO && hs__uc_class(0x4E2D) == HS_UC_LO &&
	      hs__uc_class(0x0301) == HS_UC_M && hs__uc_class(0x2167) == HS_UC_N && hs__uc_class(0x0085) == HS_UC_WS &&
	      hs__uc_class(0x3000) == HS_UC_WS && hs__uc_class(0x180E) == HS_UC_OTHER &&
	      hs__uc_class(0x0295) == HS_UC_LL && hs__uc_class(0x105C0) == HS_UC_LO &&
	      hs__uc_class(0x323B0) == HS_UC_OTHER && hs__uc_class(0x110000) == HS_UC_OTHER,
	      "classes of Lt, Lm, Lo, Mn, Nl, NEL, ideographic space, U+180E, ʕ (Ll since 16.0), Todhri (16.0), "
	      "CJK Ext J (17.0)");
	/* UTF-8 decoding: every form Unicode forbids is one bad byte */
	static const struct { const char *s; uint32_t cp; int len; } dec[] = {
		{ "\x7f", 0x7F, 1 }, { "\xc2\x80", 0x80, 2 }, { "\xdf\xbf", 0x7FF, 2 }, { "\xe0\xa0\x80", 0x800, 3 },
		{ "\xed\x9f\xbf", 0xD7FF, 3 }, { "\xee\x80\x80", 0xE000, 3 }, { "\xf0\x90\x80\x80", 0x10000, 4 },
		{ "\xf4\x8f\xbf\xbf", 0x10FFFF, 4 }, { "\xc0\x80", HS_UTF8_BAD, 1 }, { "\xc1\xbf", HS_UTF8_BAD, 1 },
		{ "\xe0\x9f\xbf", HS_UTF8_BAD, 1 }, { "\xed\xa0\x80", HS_UTF8_BAD, 1 }, { "\xf0\x8f\xbf\xbf", HS_UTF8_BAD, 1 },
		{ "\xf4\x90\x80\x80", HS_UTF8_BAD, 1 }, { "\xf5\x80\x80\x80", HS_UTF8_BAD, 1 }, { "\x80", HS_UTF8_BAD, 1 },
		{ "\xe2\x82", HS_UTF8_BAD, 1 },
	};
	for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) {
		int len;
		uint32_t cp = hs__utf8_decode((const uint8_t *)dec[i].s, strlen(dec[i].s), &len);
		CHECK(cp == dec[i].cp && len == dec[i].len, "decode case %zu: %x/%d", i, cp, len);
	}
	CHECK(hs__utf8_prefix((const uint8_t *)"\xe2\x82", 2) == 2 && hs__utf8_prefix((const uint8_t *)"\xe2(", 2) == 1 &&
	      hs__utf8_prefix((const uint8_t *)"\xed\xa0", 2) == 1 && hs__utf8_prefix((const uint8_t *)"\xff", 1) == 0,
	      "maximal subparts");
}

/* The splits of a pattern that differs from qwen2's (file: texts and the
 * byte lengths of the pieces Python's regex cuts them into): every text as
 * there, and at least min_differ of them unlike qwen2's split. */
static void splits_like_regex(const char *file, split_fn fn, const char *name, size_t min_checked,
			      size_t min_differ)
{
	json_t *all = tok_load_json(file), *row;
	size_t i, checked = 0, differ = 0;

	json_array_foreach(all, i, row) {
		const char *s = json_string_value(json_object_get(row, "text"));
		size_t len = json_string_length(json_object_get(row, "text")), n, n2, k;
		json_t *want = json_object_get(row, "split");
		uint32_t *v = pieces(fn, s, len, &n), *v2 = pieces(hs__pretok_qwen2, s, len, &n2);
		int same = n == json_array_size(want);
		for (k = 0; same && k < n; k++)
			same = v[k] == (uint32_t)json_integer_value(json_array_get(want, k));
		CHECK(same, "%s pieces of '%s': %zu, %zu expected", name, s, n, json_array_size(want));
		differ += n != n2 || memcmp(v, v2, sizeof *v * n) != 0;
		checked++;
		free(v);
		free(v2);
	}
	CHECK(checked > min_checked && differ > min_differ, "%s: %zu texts, %zu split otherwise than qwen2", name, checked,
	      differ);
	printf("%s: %zu splits as Python's regex makes them (%zu of them unlike qwen2's)\n", name, checked, differ);
	json_decref(all);
}

int main(void)
{
	tables();
	strings();
	random_texts();
	/* Qwen3.5's: combining marks (tests/gen-qwen35-splits.py); GLM-4's:
	 * digit runs of up to three (tests/gen-glm4-splits.py) */
	splits_like_regex("vocab/qwen35-splits.json", hs__pretok_qwen35, "qwen35", 500, 50);
	splits_like_regex("vocab/glm4-splits.json", hs__pretok_glm4, "glm4", 400, 100);
	return hs_test_end();
}
