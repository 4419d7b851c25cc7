/* Sampling: the generator against published test vectors (splitmix64,
 * xoshiro256**); greedy equals argmax (lowest id on ties); top-k = 1 equals
 * greedy; a seed repeats its tokens; top-k, top-p and min-p keep exactly
 * the tokens their definitions say on hand-made rows (also past the
 * 256-candidate first look of top-p); and draws follow the filtered
 * distribution (chi-square over 200,000 draws of a fixed seed, so the
 * outcome is deterministic, against the 1e-6 critical value). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/sample.h"
#include "hotset.h"
#include "tests/dense-util.h"
#include "tests/hs-test.h"

static void test_rng(void)
{
	/* splitmix64 from 1234567 and xoshiro256** from {1, 2, 3, 4}: the
	 * first outputs published with the algorithms */
	const uint64_t sm[4] = { 6457827717110365317ull, 3203168211198807973ull, 9817491932198370423ull,
				 4593380528125082431ull };
	const uint64_t xo[4] = { 11520, 0, 1509978240, 1215971899390074240ull };
	struct hs_rng r;

	hs__rng_seed(&r, 1234567);
	CHECK(memcmp(r.s, sm, sizeof sm) == 0, "splitmix64 seeding differs from its test vector");
	r = (struct hs_rng){ { 1, 2, 3, 4 } };
	for (int i = 0; i < 4; i++) {
		uint64_t v = hs__rng_next(&r);
		CHECK(v == xo[i], "xoshiro256** output %d: %llu, expected %llu", i, (unsigned long long)v,
		      (unsigned long long)xo[i]);
	}
	double lo = 1, hi = 0;
	for (int i = 0; i < 100000; i++) {
		double u = hs__rng_uniform(&r);
		lo = u < lo ? u : lo;
		hi = u > hi ? u : hi;
	}
	CHECK(lo >= 0 && lo < 1e-3 && hi < 1 && hi > 1 - 1e-3, "uniform draws span [%g, %g]", lo, hi);
}

static int32_t sample_once(const struct hs_sample_params *p, const float *logits, int n)
{
	struct hs_sampler *s = hs__sampler_create(p, n);
	int32_t id = s ? hs__sampler_sample(s, logits) : -1;
	hs__sampler_free(s);
	return id;
}

static void test_greedy(void)
{
	const int n = 201088;
	float *x = malloc(sizeof *x * n);
	struct hs_sample_params g = { .temp = 0, .seed = 1 },
				k1 = { .temp = 0.8f, .top_k = 1, .top_p = 0.95f, .min_p = 0.05f, .seed = 7 };

	for (int trial = 0; trial < 4; trial++) {
		du_fill(x, n, 0, 3);
		int32_t want = 0;
		for (int i = 1; i < n; i++)
			want = x[i] > x[want] ? i : want;
		if (trial == 1) { /* a tie: the lower id wins */
			x[n - 5] = x[want];
			x[3] = x[want];
			want = 3;
		}
		if (trial == 2)
			x[0] = NAN; /* never the answer */
		g.temp = trial == 3 ? -1.0f : 0.0f;
		CHECK(hs__argmax(x, n) == want, "argmax %d, expected %d", hs__argmax(x, n), want);
		CHECK(sample_once(&g, x, n) == want, "greedy sample differs from argmax");
		CHECK(trial == 2 || sample_once(&k1, x, n) == want, "top-k 1 differs from greedy");
	}
	free(x);
}

static void test_seeds(void)
{
	const int n = 1000;
	float *x = malloc(sizeof *x * n);
	struct hs_sample_params p = { .temp = 1.2f, .top_k = 0, .top_p = 1, .min_p = 0, .seed = 12345 };
	int32_t a[200], b[200], c[200];

	du_fill(x, n, 0, 1);
	for (int pass = 0; pass < 3; pass++) {
		p.seed = pass == 2 ? 54321 : 12345;
		struct hs_sampler *s = hs__sampler_create(&p, n);
		int32_t *o = pass == 0 ? a : pass == 1 ? b : c;
		for (int i = 0; i < 200; i++)
			o[i] = hs__sampler_sample(s, x);
		if (pass == 1) { /* reseeding restarts the sequence */
			hs__sampler_seed(s, 12345);
			int same = 1;
			for (int i = 0; i < 200; i++)
				same &= hs__sampler_sample(s, x) == a[i];
			CHECK(same, "reseeding did not repeat the tokens");
		}
		hs__sampler_free(s);
	}
	CHECK(memcmp(a, b, sizeof a) == 0, "the same seed gave different tokens");
	CHECK(memcmp(a, c, sizeof a) != 0, "two seeds gave the same 200 tokens");
	free(x);
}

/* The candidate ids after filtering, sorted ascending into ids; returns
 * their count. */
static int kept(const struct hs_sample_params *p, const float *logits, int n, int32_t *ids)
{
	struct hs_sampler *s = hs__sampler_create(p, n);
	int m;
	hs__sampler_sample(s, logits);
	const struct hs_token_prob *c = hs__sampler_candidates(s, &m);
	for (int i = 0; i < m; i++)
		ids[i] = c[i].id;
	hs__sampler_free(s);
	for (int i = 1; i < m; i++) /* insertion sort */
		for (int j = i; j > 0 && ids[j] < ids[j - 1]; j--) {
			int32_t t = ids[j];
			ids[j] = ids[j - 1];
			ids[j - 1] = t;
		}
	return m;
}

static void test_filters(void)
{
	/* probabilities at temperature 1: 0.5, 0.25, 0.125, 0.0625, 0.0625
	 * (ids scrambled) */
	const float l[5] = { logf(0.0625f), logf(0.25f), logf(0.5f), logf(0.0625f), logf(0.125f) };
	struct hs_sample_params p = { .temp = 1, .top_p = 1, .seed = 3 };
	int32_t ids[5000];

	p.top_p = 0.7f; /* 0.5 + 0.25 reach it */
	CHECK(kept(&p, l, 5, ids) == 2 && ids[0] == 1 && ids[1] == 2, "top-p 0.7 kept %d", kept(&p, l, 5, ids));
	p.top_p = 0.8f; /* needs the third */
	CHECK(kept(&p, l, 5, ids) == 3 && ids[2] == 4, "top-p 0.8 kept %d", kept(&p, l, 5, ids));
	p.top_p = 1;
	p.min_p = 0.2f; /* p >= 0.1 */
	CHECK(kept(&p, l, 5, ids) == 3 && ids[0] == 1 && ids[1] == 2 && ids[2] == 4, "min-p 0.2 kept %d",
	      kept(&p, l, 5, ids));
	p.min_p = 0.13f; /* p >= 0.065: 0.0625 is out */
	CHECK(kept(&p, l, 5, ids) == 3, "min-p 0.13 kept %d", kept(&p, l, 5, ids));
	p.min_p = 0.12f; /* p >= 0.06: all */
	CHECK(kept(&p, l, 5, ids) == 5, "min-p 0.12 kept %d", kept(&p, l, 5, ids));
	p.min_p = 0;
	p.top_k = 3;
	CHECK(kept(&p, l, 5, ids) == 3 && ids[0] == 1 && ids[1] == 2 && ids[2] == 4, "top-k 3 kept the wrong tokens");
	p.top_k = 4; /* the two 0.0625 tie: the lower id, 0, is kept */
	CHECK(kept(&p, l, 5, ids) == 4 && ids[0] == 0, "top-k 4 kept %d (first %d)", kept(&p, l, 5, ids), ids[0]);
	/* top-k then top-p: top-p sees the softmax of the 3 left (4/7, 2/7, 1/7) */
	p.top_k = 3;
	p.top_p = 0.8f;
	CHECK(kept(&p, l, 5, ids) == 2, "top-k 3 then top-p 0.8 kept %d", kept(&p, l, 5, ids));
	p.top_p = 0.9f;
	CHECK(kept(&p, l, 5, ids) == 3, "top-k 3 then top-p 0.9 kept %d", kept(&p, l, 5, ids));

	/* a large flat row: top-p needs more than the first 256 looked at */
	const int n = 5000;
	float *flat = malloc(sizeof *flat * n);
	for (int i = 0; i < n; i++)
		flat[i] = 0.25f;
	p = (struct hs_sample_params){ .temp = 1, .top_p = 0.8999f, .seed = 5 };
	CHECK(kept(&p, flat, n, ids) == 4500 && ids[0] == 0 && ids[4499] == 4499,
	      "flat top-p kept %d (ids 0..4499 expected)", kept(&p, flat, n, ids));
	/* a peaked large row: the first 256 suffice */
	for (int i = 0; i < n; i++)
		flat[i] = i == 4321 ? 30.0f : i % 7 == 0 ? 15.0f : 0.0f; /* p(4321) = 0.9997 */
	p.top_p = 0.5f;
	CHECK(kept(&p, flat, n, ids) == 1 && ids[0] == 4321, "peaked top-p kept %d", kept(&p, flat, n, ids));
	free(flat);
}

/* Draws with top-k, top-p, min-p and a temperature against the
 * distribution the definitions give, computed here in double. */
static void test_distribution(void)
{
	const float l[10] = { 2.0f, -1.0f, 1.5f, 0.5f, 1.2f, -3.0f, 1.0f, 0.0f, -0.5f, -2.0f };
	const struct hs_sample_params p = { .temp = 0.7f, .top_k = 8, .top_p = 0.9f, .min_p = 0.05f, .seed = 2024 };
	const int draws = 200000;
	int order[10], keep = 8, count[10] = { 0 };
	double prob[10] = { 0 }, z = 0, cum = 0, chi2 = 0;

	for (int i = 0; i < 10; i++)
		order[i] = i;
	for (int i = 1; i < 10; i++) /* best first */
		for (int j = i; j > 0 && l[order[j]] > l[order[j - 1]]; j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < keep; i++)
		z += exp(l[order[i]] - l[order[0]]);
	for (int i = 0; i < keep; i++) {
		cum += exp(l[order[i]] - l[order[0]]) / z;
		if (cum >= p.top_p) {
			keep = i + 1;
			break;
		}
	}
	for (int i = 0; i < keep; i++)
		if (exp(l[order[i]] - l[order[0]]) < p.min_p) {
			keep = i;
			break;
		}
	z = 0;
	for (int i = 0; i < keep; i++)
		z += prob[order[i]] = exp((l[order[i]] - l[order[0]]) / p.temp);
	for (int i = 0; i < 10; i++)
		prob[i] /= z;

	struct hs_sampler *s = hs__sampler_create(&p, 10);
	for (int i = 0; i < draws; i++)
		count[hs__sampler_sample(s, l)]++;
	hs__sampler_free(s);
	for (int i = 0; i < 10; i++) {
		if (prob[i] == 0) {
			CHECK(count[i] == 0, "token %d (filtered out) drawn %d times", i, count[i]);
			continue;
		}
		double e = prob[i] * draws;
		chi2 += (count[i] - e) * (count[i] - e) / e;
	}
	/* top-k keeps 8, top-p 0.9 of their softmax (0.343, 0.551, 0.705,
	 * 0.831, 0.908 cumulated) keeps 5, min-p keeps those 5.  With 4 degrees
	 * of freedom chi2 exceeds 33.4 with probability 1e-6 (e^(-x/2) (1 + x/2))
	 * when the draws follow prob. */
	CHECK(keep == 5, "expected 5 tokens to survive the filters, the computation here says %d", keep);
	CHECK(chi2 < 33.4, "draws against the filtered distribution: chi-square %.1f over %d tokens (limit 33.4)", chi2,
	      keep);
	printf("sampling: chi-square %.2f with %d degrees of freedom over %d draws (limit 33.4)\n", chi2, keep - 1,
	       draws);
}

static void test_errors(void)
{
	/* NaN logits are never drawn; all -inf still gives a token */
	const float nanrow[4] = { NAN, 1.0f, NAN, 0.5f }, dead[3] = { -INFINITY, -INFINITY, -INFINITY };
	struct hs_sample_params d = { .temp = 1, .top_p = 1, .seed = 9 };
	struct hs_sampler *s = hs__sampler_create(&d, 4);
	for (int i = 0; i < 1000; i++) {
		int32_t id = hs__sampler_sample(s, nanrow);
		CHECK(id == 1 || id == 3, "a NaN logit was drawn (token %d)", id);
	}
	hs__sampler_free(s);
	CHECK(sample_once(&d, dead, 3) == 0, "all -inf: token %d, expected 0", sample_once(&d, dead, 3));

	struct hs_sample_params p = { .temp = 1, .top_p = NAN };
	CHECK(hs__sampler_create(&p, 10) == NULL, "a NaN top_p was accepted");
	p.top_p = 1;
	CHECK(hs__sampler_create(&p, 0) == NULL, "an empty vocabulary was accepted");
}

/* logprobs against a reference in long double over a full sort, on rows
 * with ties, -inf, NaN and one huge logit, over awkward sizes */
static int by_value(const void *a, const void *b)
{
	const long double *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] > y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : 1;
}

static void test_logprobs(void)
{
	const int sizes[] = { 1, 2, 3, 7, 31, 300, 4097, 201088 };
	uint64_t seed = 11;
	for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
		const int n = sizes[si], n_top = n < 20 ? n : 20;
		float *x = malloc(sizeof *x * n), lp, top[20];
		long double *ref = malloc(sizeof *ref * 2 * n);
		int32_t ids[20];
		for (int kind = 0; kind < 4; kind++) {
			long double m = -INFINITY, z = 0;
			for (int i = 0; i < n; i++) {
				uint64_t r = (seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33;
				x[i] = (float)((double)(r % 20000) / 1000 - 10);
				if (kind == 1) /* ties: a few values only */
					x[i] = (float)(r % 4);
				if (kind == 2 && r % 5 == 0)
					x[i] = r % 2 ? -INFINITY : NAN;
			}
			if (kind == 3)
				x[n / 2] = 1e30f; /* one token takes it all */
			if (kind == 2)
				x[0] = 0.5f; /* at least one finite */
			for (int i = 0; i < n; i++) {
				ref[2 * i] = x[i] > -INFINITY ? (long double)x[i] : -INFINITY;
				ref[2 * i + 1] = i;
				if (ref[2 * i] > m)
					m = ref[2 * i];
			}
			for (int i = 0; i < n; i++)
				if (ref[2 * i] > -INFINITY)
					z += expl(ref[2 * i] - m);
			const long double lse = m + logl(z);
			const int tok = (int)(seed % (uint64_t)n);
			CHECK(hs__logprobs(x, n, tok, n_top, &lp, ids, top) == 0, "n %d kind %d: refused", n, kind);
			const long double want = ref[2 * tok] > -INFINITY ? ref[2 * tok] - lse : -INFINITY;
			CHECK(want == -INFINITY ? lp == -INFINITY : fabsl(lp - want) <= 1e-6L * (1 + fabsl(want)),
			      "n %d kind %d: logprob of %d %.9g, reference %.9Lg", n, kind, tok, lp, want);
			qsort(ref, (size_t)n, 2 * sizeof *ref, by_value);
			long double sum = 0;
			for (int j = 0; j < n_top; j++) {
				const long double w = ref[2 * j] > -INFINITY ? ref[2 * j] - lse : -INFINITY;
				CHECK(ids[j] == (int32_t)ref[2 * j + 1], "n %d kind %d: top %d is %d, reference %d", n, kind, j,
				      ids[j], (int)ref[2 * j + 1]);
				CHECK(w == -INFINITY ? top[j] == -INFINITY : fabsl(top[j] - w) <= 1e-6L * (1 + fabsl(w)),
				      "n %d kind %d: top %d logprob %.9g, reference %.9Lg", n, kind, j, top[j], w);
				sum += expl((long double)top[j]);
			}
			CHECK(sum <= 1 + 1e-5L && (n_top < n || fabsl(sum - 1) < 1e-5L),
			      "n %d kind %d: the top %d's probabilities sum to %.9Lg", n, kind, n_top, sum);
		}
		for (int i = 0; i < n; i++)
			x[i] = i % 2 ? -INFINITY : NAN;
		CHECK(hs__logprobs(x, n, 0, 0, &lp, ids, top) == -1, "n %d: a row with nothing above -inf", n);
		free(x);
		free(ref);
	}
}

int main(void)
{
	test_logprobs();
	test_rng();
	test_greedy();
	test_seeds();
	test_filters();
	test_distribution();
	test_errors();
	return hs_test_end();
}
