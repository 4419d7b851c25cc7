/* Tokenizer speed on one core: encoding a text file with a GGUF file's
 * tokenizer, the pre-tokenizer alone, and decoding; with the ids' count and
 * hash, so that a run beside another tokenizer can show the same ids.
 * usage: bench-tokenizer MODEL.gguf TEXT [REPEATS]   (bench/run-tokenizer.sh) */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hotset.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* best and median of r timings, as MB/s of n bytes */
static void report(const char *what, double *t, int r, size_t n)
{
	qsort(t, (size_t)r, sizeof *t, cmp_double);
	printf("%-28s best %8.2f MB/s   median %8.2f MB/s   (%d runs)\n", what, (double)n / t[0] / 1e6,
	       (double)n / t[r / 2] / 1e6, r);
}

int main(int argc, char **argv)
{
	int repeats = argc > 3 ? atoi(argv[3]) : 5, n_ids = 0;
	hs_tokenizer *tk;
	size_t len;
	double t0, *t;
	char *text;
	FILE *f;

	if (argc < 3 || repeats < 1) {
		fprintf(stderr, "usage: bench-tokenizer MODEL.gguf TEXT [REPEATS]\n");
		return 2;
	}
	f = fopen(argv[2], "rb");
	if (!f || fseek(f, 0, SEEK_END) || (long)(len = (size_t)ftell(f)) < 0) {
		fprintf(stderr, "bench-tokenizer: %s: cannot read\n", argv[2]);
		return 1;
	}
	rewind(f);
	text = malloc(len + 1);
	if (!text || fread(text, 1, len, f) != len)
		return 1;
	fclose(f);
	t0 = now();
	if (hs_tokenizer_open(argv[1], &tk)) {
		fprintf(stderr, "bench-tokenizer: %s\n", hs_last_error());
		return 1;
	}
	printf("tokenizer: %s (pre %s, %d tokens), opened in %.3f s\n", argv[1], hs_tokenizer_pre(tk),
	       hs_tokenizer_n_vocab(tk), now() - t0);
	printf("text: %s, %zu bytes\n", argv[2], len);
	t = malloc((size_t)repeats * sizeof *t);
	int32_t *ids = malloc((len + 1) * sizeof *ids);

	/* the pre-tokenizer alone */
	size_t (*split)(const uint8_t *, size_t) = tk->pre == HS_PRE_O200K ? hs__pretok_o200k : hs__pretok_qwen2;
	size_t pieces = 0;
	for (int r = 0; r < repeats; r++) {
		t0 = now();
		pieces = 0;
		for (size_t i = 0; i < len; pieces++)
			i += split((const uint8_t *)text + i, len - i);
		t[r] = now() - t0;
	}
	report("pre-tokenizer only", t, repeats, len);
	for (int r = 0; r < repeats; r++) {
		t0 = now();
		n_ids = hs_tokenize(tk, text, len, 0, ids, (int)len + 1);
		t[r] = now() - t0;
	}
	report("encode (hs_tokenize)", t, repeats, len);
	for (int r = 0; r < repeats; r++) {
		char *out;
		t0 = now();
		hs_detokenize(tk, ids, n_ids, 0, &out, NULL);
		t[r] = now() - t0;
		free(out);
	}
	report("decode (hs_detokenize)", t, repeats, len);
	/* FNV-1a 64 over the ids (32-bit little-endian), to compare with another tokenizer */
	uint64_t h = 0xCBF29CE484222325ull;
	for (int i = 0; i < n_ids; i++)
		for (int b = 0; b < 4; b++)
			h = (h ^ (((uint32_t)ids[i] >> (8 * b)) & 0xFF)) * 0x100000001B3ull;
	printf("ids: %d (%.3f bytes per id), %zu pieces, fnv64 %016llx\n", n_ids, (double)len / n_ids, pieces,
	       (unsigned long long)h);
	free(ids);
	free(t);
	free(text);
	hs_tokenizer_free(tk);
	return 0;
}
