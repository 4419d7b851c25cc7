/* Sampling of one token from a row of logits, as llama.cpp's default chain
 * does it: top-k, top-p, min-p, temperature, then a draw (greedy when the
 * temperature is 0).  A seeded generator of hotset's own (xoshiro256**
 * seeded through splitmix64), so a seed gives the same tokens on every
 * machine for the same logits.
 *
 * The steps, on the candidates left by the step before:
 *  top-k (k > 0): the k largest logits (ties: lower token id first);
 *  top-p (p < 1): by probability (softmax of the logits, temperature 1),
 *    the shortest prefix whose sum reaches p, at least one token;
 *  min-p (p > 0): the tokens whose probability is at least p times the
 *    largest (logit >= max + ln p);
 *  temperature t > 0: probabilities softmax(logit / t) over what is left,
 *    and a draw; t <= 0: the largest logit (lowest id on ties).
 * Internal API; the public one wraps it. */
#ifndef HS_SAMPLE_H
#define HS_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

struct hs_sample_params {
	float temp;  /* <= 0: greedy */
	int top_k;   /* <= 0: off */
	float top_p; /* >= 1: off */
	float min_p; /* <= 0: off */
	uint64_t seed;
};

/* xoshiro256**, seeded by splitmix64 from one 64-bit seed. */
struct hs_rng {
	uint64_t s[4];
};
void hs__rng_seed(struct hs_rng *r, uint64_t seed);
uint64_t hs__rng_next(struct hs_rng *r);
double hs__rng_uniform(struct hs_rng *r); /* [0, 1), 53 bits */

/* A candidate token after filtering: id and its final probability. */
struct hs_token_prob {
	int32_t id;
	float logit;
	double p;
};

/* Sampler: the parameters, the generator, and a candidate buffer for a
 * vocabulary of n_vocab.  Create allocates (NULL and -EINVAL / -ENOMEM on
 * error: n_vocab < 1, top_p or min_p NaN); sample does not. */
struct hs_sampler;
struct hs_sampler *hs__sampler_create(const struct hs_sample_params *p, int n_vocab);
void hs__sampler_free(struct hs_sampler *s);
/* The vocabulary it was made for. */
int hs__sampler_n_vocab(const struct hs_sampler *s);
/* Where the sampler keeps its grammar (opaque here: runtime/context.c uses
 * it), and a row of n_vocab floats for the masked copy of the logits
 * (NULL when it cannot be allocated). */
void **hs__sampler_grammar(struct hs_sampler *s);
float *hs__sampler_masked(struct hs_sampler *s);
/* Restarts the generator from a seed. */
void hs__sampler_seed(struct hs_sampler *s, uint64_t seed);
/* Reads logits[n_vocab]; returns the token.  Advances the generator by
 * one draw unless greedy.  NaN logits count as -inf; when no candidate has
 * a finite logit, the best-ranked one is returned without a draw. */
int32_t hs__sampler_sample(struct hs_sampler *s, const float *logits);
/* The candidates the last sample drew from, with their probabilities (for
 * tests and logprobs), in the order the draw walked them: best first when
 * top-k or top-p ran, else by token id; *n set to their count. */
const struct hs_token_prob *hs__sampler_candidates(const struct hs_sampler *s, int *n);

/* Log-probabilities under softmax(logits) at temperature 1, before any
 * filtering (what OpenAI's logprobs report; NaN counts as -inf): of token
 * into *token_lp (when token_lp is not NULL), and of the n_top most likely
 * tokens into top_ids/top_lps, best first, lower id first on ties (-inf for
 * places past the tokens above -inf).  The sum in double.  Returns 0, or -1
 * when no logit is above -inf. */
int hs__logprobs(const float *logits, int n, int32_t token, int n_top, float *token_lp, int32_t *top_ids,
		 float *top_lps);

/* Index of the largest value, lowest index on ties; NaN is never chosen
 * unless all are NaN (then 0). */
int32_t hs__argmax(const float *x, int n);

#endif
