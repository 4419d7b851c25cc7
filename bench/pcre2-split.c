/* The o200k pattern run by PCRE2 with its JIT: how fast a well-kept regex
 * library cuts the same text into pieces (hotset's pre-tokenizer is written
 * out by hand instead; bench/run-tokenizer.sh prints both).  \s is written as
 * the White_Space property, which PCRE2's \s with UCP lacks U+0085 of.
 * Built by bench/run-tokenizer.sh when libpcre2-8 is installed:
 * cc -O2 bench/pcre2-split.c $(pkg-config --cflags --libs libpcre2-8) */
#define _POSIX_C_SOURCE 200809L
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define WS "\\t-\\r\\x{85}\\p{Zs}\\x{2028}\\x{2029}"
static const char pattern[] =
	"[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
	"|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
	"|\\p{N}{1,3}| ?[^" WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" WS "]*[\\r\\n]+|[" WS "]+(?![^" WS "])|[" WS "]+";

int main(int argc, char **argv)
{
	int err, repeats = argc > 2 ? atoi(argv[2]) : 5;
	PCRE2_SIZE off;
	FILE *f = argc > 1 ? fopen(argv[1], "rb") : NULL;
	if (!f)
		return 2;
	fseek(f, 0, SEEK_END);
	size_t len = (size_t)ftell(f);
	rewind(f);
	char *text = malloc(len);
	if (fread(text, 1, len, f) != len)
		return 1;
	pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
	if (!re || pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) != 0)
		return 1;
	pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
	double best = 1e9;
	size_t pieces = 0;
	for (int r = 0; r < repeats; r++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		pieces = 0;
		for (PCRE2_SIZE pos = 0; pos < len;) {
			if (pcre2_jit_match(re, (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, md, NULL) < 0)
				break;
			PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
			pos = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
			pieces++;
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		double t = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
		if (t < best)
			best = t;
	}
	char ver[32];
	pcre2_config(PCRE2_CONFIG_VERSION, ver);
	printf("PCRE2 %s JIT split only       best %8.2f MB/s   (%d runs), %zu pieces\n", ver, (double)len / best / 1e6,
	       repeats, pieces);
	return 0;
}
