/* Token sampling (see sample.h): candidate filtering in llama.cpp's default
 * order and a draw from a generator of hotset's own.  Probabilities in
 * double; the order of every sum is fixed by the algorithm, so a seed and
 * a logits row give one token everywhere. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/sample.h"
#include "base/error.h"

#define TOP_P_FIRST 256 /* top-p first looks at this many best candidates */

struct hs_sampler {
	struct hs_sample_params p;
	struct hs_rng rng;
	int n_vocab, n_cand;
	struct hs_token_prob *cand;
	void *grammar;  /* the caller's constraint (runtime/context.c masks with it) */
	float *masked;  /* n_vocab floats for the masked copy, made on first use */
};

/* ---- generator -------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void hs__rng_seed(struct hs_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t hs__rng_next(struct hs_rng *r)
{
	uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

double hs__rng_uniform(struct hs_rng *r)
{
	return (double)(hs__rng_next(r) >> 11) * 0x1.0p-53;
}

/* ---- candidates ---------------------------------------------------------------- */

/* The order of candidates: larger logit first, then lower id.  A total
 * order (ids differ), so selection and sorting give one answer. */
static int better(const struct hs_token_prob *a, const struct hs_token_prob *b)
{
	return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp(const void *a, const void *b)
{
	return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void swap(struct hs_token_prob *a, struct hs_token_prob *b)
{
	struct hs_token_prob t = *a;
	*a = *b;
	*b = t;
}

/* Moves the k best of c[0..n) into c[0..k) (in no order), 0 < k < n:
 * quickselect with a median-of-three pivot. */
static void select_best(struct hs_token_prob *c, int n, int k)
{
	int lo = 0, hi = n - 1;

	while (lo < hi) {
		const int mid = lo + (hi - lo) / 2;
		if (better(&c[mid], &c[lo]))
			swap(&c[mid], &c[lo]);
		if (better(&c[hi], &c[lo]))
			swap(&c[hi], &c[lo]);
		if (better(&c[mid], &c[hi]))
			swap(&c[mid], &c[hi]); /* c[hi] is now the median of the three */
		int store = lo;
		for (int i = lo; i < hi; i++)
			if (better(&c[i], &c[hi]))
				swap(&c[i], &c[store++]);
		swap(&c[store], &c[hi]);
		if (store == k || store == k - 1)
			return;
		if (store < k)
			lo = store + 1;
		else
			hi = store - 1;
	}
}

/* The n best of c[0..total) sorted into c[0..n). */
static void sort_best(struct hs_token_prob *c, int total, int n)
{
	if (n < total)
		select_best(c, total, n);
	qsort(c, (size_t)n, sizeof *c, cmp);
}

static float max_logit(const struct hs_token_prob *c, int n)
{
	float m = -INFINITY;
	for (int i = 0; i < n; i++)
		m = c[i].logit > m ? c[i].logit : m;
	return m;
}

/* Keeps the shortest best-first prefix whose probability (temperature 1,
 * over all n candidates) reaches p, sorted.  Returns its length. */
static int top_p(struct hs_token_prob *c, int n, int *sorted, double p)
{
	const float m = max_logit(c, n);
	double z = 0;
	int k = n;

	for (int i = 0; i < n; i++)
		z += exp((double)c[i].logit - m);
	if (!*sorted) {
		/* the best few usually reach p: sort those first */
		k = n > 4 * TOP_P_FIRST ? TOP_P_FIRST : n;
		sort_best(c, n, k);
	}
	*sorted = 1;
	for (;;) {
		double cum = 0;
		for (int i = 0; i < k; i++) {
			cum += exp((double)c[i].logit - m) / z;
			if (cum >= p)
				return i + 1;
		}
		if (k == n)
			return n;
		sort_best(c, n, n);
		k = n;
	}
}

/* Keeps the candidates whose logit is at least max + ln p (at least the
 * best one), in their order. */
static int min_p(struct hs_token_prob *c, int n, double p)
{
	const float m = max_logit(c, n);
	const double lim = m + log(p);
	int kept = 0, best = 0;

	for (int i = 0; i < n; i++) {
		if (better(&c[i], &c[best]))
			best = i;
		if (c[i].logit >= lim)
			c[kept++] = c[i];
	}
	if (!kept)
		c[kept++] = c[best];
	return kept;
}

int32_t hs__argmax(const float *x, int n)
{
	int32_t bi = 0;
	float bv = x[0];

	for (int i = 1; i < n; i++)
		if (x[i] > bv || (bv != bv && x[i] == x[i])) {
			bv = x[i];
			bi = i;
		}
	return bi;
}

struct hs_sampler *hs__sampler_create(const struct hs_sample_params *p, int n_vocab)
{
	struct hs_sampler *s;

	if (n_vocab < 1 || isnan(p->temp) || isnan(p->top_p) || isnan(p->min_p)) {
		hs__error(EINVAL, "sampler: vocabulary of %d (>= 1), temp %g, top_p %g, min_p %g (not NaN)", n_vocab,
			  p->temp, p->top_p, p->min_p);
		return NULL;
	}
	if (!(s = calloc(1, sizeof *s)) || !(s->cand = malloc(sizeof *s->cand * (size_t)n_vocab))) {
		free(s);
		hs__error(ENOMEM, "sampler: out of memory for %d candidates", n_vocab);
		return NULL;
	}
	s->p = *p;
	s->n_vocab = n_vocab;
	hs__rng_seed(&s->rng, p->seed);
	return s;
}

void hs__sampler_free(struct hs_sampler *s)
{
	if (s) {
		free(s->cand);
		free(s->masked);
	}
	free(s);
}

void **hs__sampler_grammar(struct hs_sampler *s)
{
	return &s->grammar;
}

float *hs__sampler_masked(struct hs_sampler *s)
{
	if (!s->masked)
		s->masked = malloc((size_t)s->n_vocab * sizeof *s->masked);
	return s->masked;
}

int hs__sampler_n_vocab(const struct hs_sampler *s)
{
	return s->n_vocab;
}

void hs__sampler_seed(struct hs_sampler *s, uint64_t seed)
{
	hs__rng_seed(&s->rng, seed);
}

int32_t hs__sampler_sample(struct hs_sampler *s, const float *logits)
{
	struct hs_token_prob *c = s->cand;
	int n = s->n_vocab, sorted = 0; /* sorted: c[0..n) best first */
	double z = 0, u, cum = 0;
	float m;

	if (!(s->p.temp > 0)) {
		const int32_t id = hs__argmax(logits, n);
		c[0] = (struct hs_token_prob){ id, logits[id], 1.0 };
		s->n_cand = 1;
		return id;
	}
	for (int i = 0; i < n; i++) /* a NaN logit counts as -inf: never drawn */
		c[i] = (struct hs_token_prob){ i, isnan(logits[i]) ? -INFINITY : logits[i], 0 };
	if (s->p.top_k > 0 && s->p.top_k < n) {
		sort_best(c, n, s->p.top_k);
		n = s->p.top_k;
		sorted = 1;
	}
	if (s->p.top_p < 1)
		n = top_p(c, n, &sorted, s->p.top_p);
	if (s->p.min_p > 0)
		n = min_p(c, n, s->p.min_p);
	m = max_logit(c, n);
	if (m == -INFINITY) { /* nothing finite to draw from: the first candidate */
		c[0].p = 1;
		s->n_cand = 1;
		return c[0].id;
	}
	for (int i = 0; i < n; i++)
		z += c[i].p = exp(((double)c[i].logit - m) / s->p.temp);
	u = hs__rng_uniform(&s->rng) * z;
	int pick = n - 1; /* when u is within rounding of z */
	for (int i = 0; i < n; i++) {
		cum += c[i].p;
		if (u < cum) {
			pick = i;
			break;
		}
	}
	for (int i = 0; i < n; i++)
		c[i].p /= z;
	s->n_cand = n;
	return c[pick].id;
}

const struct hs_token_prob *hs__sampler_candidates(const struct hs_sampler *s, int *n)
{
	*n = s->n_cand;
	return s->cand;
}

/* ---- log-probabilities ------------------------------------------------------- */

int hs__logprobs(const float *logits, int n, int32_t token, int n_top, float *token_lp, int32_t *top_ids,
		 float *top_lps)
{
	float m = -INFINITY;
	double z = 0;
	int k = 0;

	for (int i = 0; i < n; i++)
		if (logits[i] > m) /* NaN compares false: never the maximum */
			m = logits[i];
	if (m == -INFINITY)
		return -1;
	for (int i = 0; i < n; i++)
		if (logits[i] > -INFINITY)
			z += exp((double)logits[i] - m);
	const double lse = m + log(z);
	if (token_lp)
		*token_lp = logits[token] > -INFINITY ? (float)(logits[token] - lse) : -INFINITY;
	/* the n_top best by insertion: ids rise along the scan, so an equal
	 * value goes after those already kept */
	for (int i = 0; i < n && n_top > 0; i++) {
		const float v = logits[i] > -INFINITY ? logits[i] : -INFINITY;
		if (k == n_top && !(v > top_lps[k - 1]))
			continue;
		int j = k < n_top ? k++ : k - 1;
		for (; j > 0 && v > top_lps[j - 1]; j--) {
			top_lps[j] = top_lps[j - 1];
			top_ids[j] = top_ids[j - 1];
		}
		top_lps[j] = v;
		top_ids[j] = i;
	}
	for (int j = 0; j < k; j++)
		top_lps[j] = top_lps[j] > -INFINITY ? (float)(top_lps[j] - lse) : -INFINITY;
	return 0;
}
