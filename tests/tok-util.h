/* Helpers of the tokenizer tests: the random texts of tests/data/vocab/random.json
 * (the generator of tests/gen-tokenizer-data.py, step for step), the hash the
 * oracles' results are kept as, and the test files' paths. */
#ifndef HS_TOK_UTIL_H
#define HS_TOK_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "text/unicode.h"
#include "tests/hs-test.h"

#define VOCAB_GGUF "vocab/gptoss-o200k-harmony-vocab.gguf"
#define QWEN_GGUF "oracle/qwen3moe-l3-h256-e16k4-q8.gguf"

static inline json_t *tok_load_json(const char *rel)
{
	json_error_t e;
	json_t *j = json_load_file(hs_test_data(rel), 0, &e);

	if (!j) {
		fprintf(stderr, "FAIL: %s: %s (line %d)\n", rel, e.text, e.line);
		exit(1);
	}
	return j;
}

/* FNV-1a 64 over 32-bit little-endian values, low 32 bits */
static inline uint32_t tok_fnv(const uint32_t *v, size_t n)
{
	uint64_t h = 0xCBF29CE484222325ull;

	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 4; b++)
			h = (h ^ ((v[i] >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
	return (uint32_t)h;
}

static inline uint64_t tok_splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static inline int tok_in_ranges(uint32_t cp, json_t *ranges)
{
	size_t lo = 0, hi = json_array_size(ranges);

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		json_t *r = json_array_get(ranges, mid);
		if ((uint32_t)json_integer_value(json_array_get(r, 1)) < cp)
			lo = mid + 1;
		else if ((uint32_t)json_integer_value(json_array_get(r, 0)) > cp)
			hi = mid;
		else
			return 1;
	}
	return 0;
}

/* Random text i of a set of random.json into buf (malloc'd), its length in *len. */
static inline char *tok_random_text(json_t *set, json_t *exclude, size_t i, size_t *len)
{
	json_t *pools = json_object_get(set, "pools");
	uint64_t s = (uint64_t)json_integer_value(json_object_get(set, "seed")) * 1000003u + i, total = 0;
	uint64_t items = 1 + tok_splitmix(&s) % (uint64_t)json_integer_value(json_object_get(set, "max_items"));
	size_t cap = 64, n = 0;
	char *buf = malloc(cap);

	for (size_t k = 0; k < json_array_size(pools); k++)
		total += (uint64_t)json_integer_value(json_object_get(json_array_get(pools, k), "w"));
	for (uint64_t it = 0; it < items; it++) {
		uint64_t r = tok_splitmix(&s) % total;
		json_t *p = NULL, *strs, *ranges;
		for (size_t k = 0; k < json_array_size(pools); k++) {
			p = json_array_get(pools, k);
			uint64_t w = (uint64_t)json_integer_value(json_object_get(p, "w"));
			if (r < w)
				break;
			r -= w;
		}
		uint8_t tmp[4];
		const char *add;
		size_t add_len;
		if ((strs = json_object_get(p, "strings"))) {
			json_t *str = json_array_get(strs, tok_splitmix(&s) % json_array_size(strs));
			add = json_string_value(str);
			add_len = json_string_length(str);
		} else {
			uint64_t size = 0, k;
			uint32_t cp = 0;
			ranges = json_object_get(p, "ranges");
			for (size_t j = 0; j < json_array_size(ranges); j++) {
				json_t *rg = json_array_get(ranges, j);
				size += (uint64_t)(json_integer_value(json_array_get(rg, 1)) -
						   json_integer_value(json_array_get(rg, 0)) + 1);
			}
			do {
				k = tok_splitmix(&s) % size;
				for (size_t j = 0; j < json_array_size(ranges); j++) {
					json_t *rg = json_array_get(ranges, j);
					uint64_t lo = (uint64_t)json_integer_value(json_array_get(rg, 0));
					uint64_t hi = (uint64_t)json_integer_value(json_array_get(rg, 1));
					if (k <= hi - lo) {
						cp = (uint32_t)(lo + k);
						break;
					}
					k -= hi - lo + 1;
				}
			} while (tok_in_ranges(cp, exclude));
			add_len = (size_t)hs__utf8_encode(cp, tmp);
			add = (const char *)tmp;
		}
		while (n + add_len + 1 > cap)
			buf = realloc(buf, cap *= 2);
		memcpy(buf + n, add, add_len);
		n += add_len;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Whether this build runs under the sanitizers (tests do less work there). */
static inline int tok_sanitized(void)
{
	const char *s = getenv("HS_SANITIZER_BUILD");
	return s && *s;
}

#endif
