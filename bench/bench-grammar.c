/* What a grammar costs per generated token at gpt-oss's 201,088-token
 * vocabulary, one core: the mask (hs_grammar_mask on a logits row) and the
 * advance (hs_grammar_accept) while a realistic reply is replayed token by
 * token: a JSON document from a JSON Schema, and a harmony reply (reasoning
 * text, then that JSON in the final channel).  Reported per token as mean,
 * median, 99th percentile and worst, with the mask cache's hit rate, the
 * first (cold) mask of each grammar, against the machine's own floor for a
 * mask (one pass writing the row) and against a decode step at 30 tokens/s
 * (33.3 ms).  Measurements.
 * usage: bench-grammar VOCAB.gguf [REPEATS (default 3)] */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hotset.h"
#include "text/grammar.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static const char *schema =
	"{\"type\": \"object\", \"additionalProperties\": false,"
	" \"required\": [\"name\", \"city\", \"age\", \"tags\", \"items\"],"
	" \"properties\": {"
	"  \"name\": {\"type\": \"string\"}, \"city\": {\"type\": \"string\"},"
	"  \"age\": {\"type\": \"integer\"}, \"email\": {\"type\": [\"string\", \"null\"]},"
	"  \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}},"
	"  \"items\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"additionalProperties\": false,"
	"    \"required\": [\"sku\", \"qty\", \"price\"], \"properties\": {"
	"     \"sku\": {\"type\": \"string\"}, \"qty\": {\"type\": \"integer\"}, \"price\": {\"type\": \"number\"},"
	"     \"note\": {\"type\": \"string\"}}}}}}";

static const char *document =
	"{\"name\": \"Ada Lovelace\", \"city\": \"London, United Kingdom\", \"age\": 36, \"email\": null, "
	"\"tags\": [\"mathematics\", \"analytical engine\", \"poetry of science\", \"notes\"], "
	"\"items\": [{\"sku\": \"AE-0001\", \"qty\": 2, \"price\": 1843.25, \"note\": \"Note G, with the "
	"Bernoulli numbers worked through step by step\"}, {\"sku\": \"DE-0042\", \"qty\": 1, \"price\": 99.5}, "
	"{\"sku\": \"BB-7\", \"qty\": 12, \"price\": 0.75, \"note\": \"spare punched cards for the mill and the "
	"store\"}]}";

static const char *reasoning =
	"The user wants a JSON object describing Ada Lovelace with her city, age and a list of items. "
	"I should follow the schema exactly: name, city, age, tags and items are required; email may be "
	"null. Let me list a few items with prices and notes, keeping the numbers plausible.";

/* Replays ids through g, timing mask + accept per token. */
static int replay(hs_grammar *g, const int32_t *ids, int n, float *row, int nv, double *t, double *cold)
{
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < nv; k++)
			row[k] = 0;
		double t0 = now();
		int allowed = hs_grammar_mask(g, row);
		if (allowed <= 0 || row[ids[i]] != 0) {
			fprintf(stderr, "bench-grammar: token %d of the replay (id %d) not allowed: %s\n", i, ids[i],
				allowed < 0 ? hs_last_error() : "masked");
			return -1;
		}
		if (hs_grammar_accept(g, ids[i])) {
			fprintf(stderr, "bench-grammar: accept: %s\n", hs_last_error());
			return -1;
		}
		t[i] = now() - t0;
		if (i == 0 && cold)
			*cold = t[i];
	}
	return 0;
}

static void report(const char *what, double *t, int n, long asked, long hits, double cold, double floor_ms)
{
	double sum = 0;
	for (int i = 0; i < n; i++)
		sum += t[i];
	qsort(t, (size_t)n, sizeof *t, cmp_d);
	const double mean = sum / n * 1e3;
	printf("%s: %d tokens: mask+accept mean %.3f ms, median %.3f, p99 %.3f, worst %.3f ms; first (cold) %.3f ms; "
	       "cache hits %ld/%ld; mean %.1fx the write floor, %.2f%% of a 33.3 ms decode step\n",
	       what, n, mean, t[n / 2] * 1e3, t[(int)(n * 0.99)] * 1e3, t[n - 1] * 1e3, cold * 1e3, hits, asked,
	       mean / floor_ms, mean / 33.3 * 100);
}

int main(int argc, char **argv)
{
	hs_tokenizer *tok;
	char *json_gbnf = NULL, *harmony = NULL;
	int reps = argc > 2 ? atoi(argv[2]) : 3;

	if (argc < 2 || reps < 1) {
		fprintf(stderr, "usage: bench-grammar VOCAB.gguf [REPEATS]\n");
		return 2;
	}
	if (hs_tokenizer_open(argv[1], &tok) || hs_json_schema_to_grammar(schema, &json_gbnf)) {
		fprintf(stderr, "bench-grammar: %s\n", hs_last_error());
		return 1;
	}
	const int nv = hs_tokenizer_n_vocab(tok);
	float *row = malloc((size_t)nv * sizeof *row);
	int32_t *ids = malloc(8192 * sizeof *ids);
	double *t = malloc(8192 * reps * sizeof *t);
	volatile float sink = 0;

	/* the floor: one pass writing the row (what any mask must do) */
	double t0 = now();
	for (int r = 0; r < 200; r++) {
		for (int k = 0; k < nv; k++)
			row[k] = (float)(k & r);
		sink += row[r];
	}
	const double floor_ms = (now() - t0) / 200 * 1e3;
	printf("vocabulary %d, one core; floor: one pass writing the row %.4f ms\n", nv, floor_ms);

	/* harmony: reasoning free, then the schema's JSON in the final channel;
	 * the reply's rule beside the schema's, starting there */
	size_t hl = strlen(json_gbnf) + 512;
	harmony = malloc(hl);
	snprintf(harmony, hl,
		 "%s\nhs-reply ::= ( <|channel|> \"analysis\" <|message|> [^]* <|end|> <|start|> \"assistant\" )? "
		 "<|channel|> \"final\" <|message|> root <|return|>\n",
		 json_gbnf);
	for (int which = 0; which < 2; which++) {
		static char text[8192];
		const char *src = which ? harmony : json_gbnf, *start = which ? "hs-reply" : "root";
		int n;
		hs_grammar *g, *g2;
		if (which)
			snprintf(text, sizeof text, "<|channel|>analysis<|message|>%s<|end|><|start|>assistant<|channel|>"
				 "final<|message|>%s<|return|>", reasoning, document);
		else
			snprintf(text, sizeof text, "%s", document);
		n = hs_tokenize(tok, text, strlen(text), HS_TOK_PARSE_SPECIAL, ids, 8192);
		if (n <= 0 || hs__grammar_new_start(tok, src, start, &g) || hs__grammar_new_start(tok, src, start, &g2)) {
			fprintf(stderr, "bench-grammar: %s\n", hs_last_error());
			return 1;
		}
		double cold = 0, c;
		for (int r = 0; r < reps; r++) {
			hs_grammar_reset(g);
			if (replay(g, ids, n, row, nv, t + (size_t)r * n, r ? NULL : &cold))
				return 1;
		}
		/* a fresh grammar: nothing cached at the start */
		double *t2 = malloc((size_t)n * sizeof *t2);
		replay(g2, ids, n, row, nv, t2, &c);
		long a2, h2;
		hs__grammar_cache_stats(g2, &a2, &h2);
		report(which ? "harmony reply, fresh grammar" : "JSON schema document, fresh grammar", t2, n, a2, h2, c,
		       floor_ms);
		long asked, hits;
		hs__grammar_cache_stats(g, &asked, &hits);
		report(which ? "harmony reply, grammar reused" : "JSON schema document, grammar reused", t, n * reps,
		       asked, hits, cold, floor_ms);
		free(t2);
		hs_grammar_free(g2);
		hs_grammar_free(g);
	}
	free(harmony);
	free(json_gbnf);
	free(row);
	free(ids);
	free(t);
	hs_tokenizer_free(tok);
	return sink == 12345.f;
}
