/* Checks Gated DeltaNet's kernels (cpu_kernels/deltanet.h) against their
 * double twins on random inputs over a grid of head counts, head sizes and
 * token counts (1, odd, a chunk, a chunk and one, several chunks): the
 * chunked delta rule (prefill) and the one-token step (decode) give the
 * same outputs and state as the double recurrence and as each other, also
 * when a sequence is cut into pieces that carry the state (a prefill
 * continued by decode steps, the steps continued by a chunk), with several
 * threads' shares; the causal convolution likewise, its state carried over
 * a cut.  Mutations tried: a decay applied after the update instead of
 * before, a key head h / ratio instead of h mod n_k_heads, the chunk's
 * state update without its decay: each fails here. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/dense.h"
#include "tests/hs-test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static double urand(void)
{
	rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
	return (double)(rng >> 11) / 9007199254740992.0;
}

/* max |a - b| over the RMS of b; NaN counts as failure (returns 1e9) */
static double rel_err(const float *a, const float *b, size_t n)
{
	double e = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isfinite(a[i]))
			return 1e9;
		double d = fabs((double)a[i] - b[i]);
		e = d > e ? d : e;
		r += (double)b[i] * b[i];
	}
	return e / sqrt(r / n + 1e-30);
}

struct inputs {
	int n, nk, nv, dh;
	float *qk, *v, *g, *beta; /* qk: [n][2 nk dh] (q heads then k heads, l2-normed) */
};

static void make_inputs(struct inputs *in)
{
	const int n = in->n, qkw = 2 * in->nk * in->dh;
	in->qk = malloc(sizeof(float) * n * qkw);
	in->v = malloc(sizeof(float) * n * in->nv * in->dh);
	in->g = malloc(sizeof(float) * n * in->nv);
	in->beta = malloc(sizeof(float) * n * in->nv);
	for (int t = 0; t < n; t++) {
		for (int h = 0; h < 2 * in->nk; h++) {
			float *x = in->qk + (size_t)t * qkw + (size_t)h * in->dh;
			double s = 0;
			for (int i = 0; i < in->dh; i++)
				x[i] = (float)(urand() * 2 - 1), s += (double)x[i] * x[i];
			for (int i = 0; i < in->dh; i++)
				x[i] = (float)(x[i] / sqrt(s));
		}
		for (int i = 0; i < in->nv * in->dh; i++)
			in->v[(size_t)t * in->nv * in->dh + i] = (float)(urand() * 2 - 1);
		for (int h = 0; h < in->nv; h++) {
			in->g[(size_t)t * in->nv + h] = (float)(-0.01 - 2.0 * urand() * urand());
			in->beta[(size_t)t * in->nv + h] = (float)(0.05 + 0.9 * urand());
		}
	}
}

static struct hs_dn_job job_for(const struct inputs *in, int t0, int n, float *state, float *out, float *scratch)
{
	const int qkw = 2 * in->nk * in->dh;
	return (struct hs_dn_job){ .n = n, .n_k_heads = in->nk, .n_v_heads = in->nv, .dk = in->dh, .dv = in->dh,
				   .q = in->qk + (size_t)t0 * qkw, .k = in->qk + (size_t)t0 * qkw + in->nk * in->dh,
				   .qk_stride = qkw, .v = in->v + (size_t)t0 * in->nv * in->dh,
				   .v_stride = (size_t)in->nv * in->dh, .g = in->g + (size_t)t0 * in->nv,
				   .beta = in->beta + (size_t)t0 * in->nv, .scale = 1.0f / sqrtf((float)in->dh),
				   .state = state, .out = out + (size_t)t0 * in->nv * in->dh,
				   .out_stride = (size_t)in->nv * in->dh, .scratch = scratch };
}

enum form { STEP, CHUNK };

/* the chunk form under test: each tier's (hs__dense_ref's portable one, AVX2's) */
static void (*chunk_fn)(const struct hs_dn_job *j, int ith, int nth);
static const char *chunk_name;

/* tokens [0, n) as pieces cut at `cut` (0: none), each piece in `form`
 * (the second piece in `form2`), over nth shares run one after another */
static void run(const struct inputs *in, enum form form, enum form form2, int cut, int nth, float *state, float *out,
		float *scratch)
{
	const int bounds[3] = { 0, cut > 0 ? cut : in->n, in->n };
	for (int p = 0; p < 2; p++) {
		if (bounds[p + 1] <= bounds[p])
			continue;
		struct hs_dn_job j = job_for(in, bounds[p], bounds[p + 1] - bounds[p], state, out, scratch);
		for (int ith = 0; ith < nth; ith++)
			(p == 0 ? form : form2) == STEP ? hs__dn_step(&j, ith, nth) : chunk_fn(&j, ith, nth);
	}
}

static void check_rule(int nk, int nv, int dh, int n)
{
	struct inputs in = { .n = n, .nk = nk, .nv = nv, .dh = dh };
	make_inputs(&in);
	const size_t sf = (size_t)nv * dh * dh, of = (size_t)n * nv * dh;
	float *s0 = malloc(sizeof(float) * sf), *sref = malloc(sizeof(float) * sf), *s = malloc(sizeof(float) * sf);
	float *oref = malloc(sizeof(float) * of), *o = malloc(sizeof(float) * of);
	float *scratch = malloc(sizeof(float) * 3 * hs__dn_scratch_floats(dh));
	for (size_t i = 0; i < sf; i++)
		s0[i] = (float)(0.3 * (urand() * 2 - 1)); /* a state from earlier tokens */
	memcpy(sref, s0, sizeof(float) * sf);
	struct hs_dn_job jr = job_for(&in, 0, n, sref, oref, NULL);
	hs__dn_ref(&jr);
	static const struct {
		enum form a, b;
		int cut, nth;
		const char *what;
	} cases[] = { { STEP, STEP, 0, 1, "step" },
		      { CHUNK, CHUNK, 0, 1, "chunk" },
		      { CHUNK, CHUNK, 0, 3, "chunk, 3 threads" },
		      { STEP, STEP, 0, 2, "step, 2 threads" },
		      { CHUNK, STEP, -1, 1, "chunk then steps" },
		      { STEP, CHUNK, -2, 1, "steps then chunk" } };
	for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
		int cut = cases[k].cut == -1 ? n - 3 : cases[k].cut == -2 ? 5 : 0;
		if (cases[k].cut && (cut <= 0 || cut >= n))
			continue;
		memcpy(s, s0, sizeof(float) * sf);
		memset(o, 0xff, sizeof(float) * of); /* NaN until written */
		run(&in, cases[k].a, cases[k].b, cut, cases[k].nth, s, o, scratch);
		double eo = rel_err(o, oref, of), es = rel_err(s, sref, sf);
		CHECK(eo <= 2e-5 && es <= 2e-5,
		      "delta rule (%s) nk %d nv %d dh %d n %d, %s: output %.2g, state %.2g from the double recurrence",
		      chunk_name, nk, nv, dh, n, cases[k].what, eo, es);
	}
	/* the two float forms against each other (what a prefill and a decode of the same tokens give) */
	float *o2 = malloc(sizeof(float) * of);
	memcpy(s, s0, sizeof(float) * sf);
	run(&in, STEP, STEP, 0, 1, s, o, scratch);
	memcpy(s, s0, sizeof(float) * sf);
	run(&in, CHUNK, CHUNK, 0, 1, s, o2, scratch);
	double e = rel_err(o2, o, of);
	CHECK(e <= 2e-5, "delta rule (%s) nk %d nv %d dh %d n %d: chunked and step outputs differ by %.2g", chunk_name,
	      nk, nv, dh, n, e);
	free(o2);
	free(s0), free(sref), free(s), free(oref), free(o), free(scratch);
	free(in.qk), free(in.v), free(in.g), free(in.beta);
}

static void check_conv(int C, int kc, int n, int cut)
{
	float *w = malloc(sizeof(float) * C * kc), *x = malloc(sizeof(float) * n * C);
	float *st0 = malloc(sizeof(float) * (kc - 1) * C + 4), *st = malloc(sizeof(float) * (kc - 1) * C + 4);
	float *yr = malloc(sizeof(float) * n * C), *y = malloc(sizeof(float) * n * C);
	for (int i = 0; i < C * kc; i++)
		w[i] = (float)(urand() * 2 - 1);
	for (int i = 0; i < n * C; i++)
		x[i] = (float)(urand() * 2 - 1);
	for (int i = 0; i < (kc - 1) * C; i++)
		st0[i] = (float)(urand() * 2 - 1);
	memcpy(st, st0, sizeof(float) * (kc - 1) * C);
	float *str = malloc(sizeof(float) * (kc - 1) * C + 4);
	memcpy(str, st0, sizeof(float) * (kc - 1) * C);
	hs__dn_conv_ref(w, C, kc, str, n, x, C, yr, C);
	/* in two pieces on 2 threads' shares: the state carries the cut */
	for (int p = 0; p < 2; p++) {
		int a = p ? cut : 0, b = p ? n : cut;
		for (int ith = 0; ith < 2; ith++)
			hs__dn_conv(w, C, kc, st, b - a, x + (size_t)a * C, C, y + (size_t)a * C, C, ith, 2);
	}
	double ey = rel_err(y, yr, (size_t)n * C), es = rel_err(st, str, (size_t)(kc - 1) * C);
	CHECK(ey <= 1e-5 && es == 0, "conv C %d kc %d n %d cut %d: output %.2g, state %.2g", C, kc, n, cut, ey, es);
	free(w), free(x), free(st0), free(st), free(str), free(yr), free(y);
}

int main(void)
{
	/* head sizes: Qwen3.5's 128, and 20 and 72 for the AVX2 form's tails
	 * (not a multiple of 8; 64 in registers and 8 more) */
	static const int heads[][3] = { { 1, 1, 16 },  { 2, 4, 32 }, { 2, 6, 16 }, { 4, 8, 64 },
					{ 1, 2, 128 }, { 1, 3, 20 }, { 1, 2, 72 } };
	static const int ns[] = { 1, 7, HS_DN_CHUNK, HS_DN_CHUNK + 1, 2 * HS_DN_CHUNK + 9 };
	const struct hs_dense_ops *forms[2] = { &hs__dense_ref,
						hs__cpu_features()->use_avx2 ? hs__dense_avx2() : NULL };
	for (int f = 0; f < 2; f++) {
		if (!forms[f]) {
			printf("note: no AVX2 here: only the portable chunk form was checked\n");
			continue;
		}
		chunk_fn = forms[f]->dn_chunk, chunk_name = forms[f]->name;
		for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
			for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
				check_rule(heads[h][0], heads[h][1], heads[h][2], ns[i]);
	}
	check_conv(37, 4, 9, 1);
	check_conv(64, 4, 3, 2); /* fewer tokens than taps: the state shifts partly */
	check_conv(5, 2, 6, 3);
	check_conv(96, 4, 70, 69);
	printf("delta rule: step, chunk and their cuts match the double recurrence; conv too\n");
	return hs_test_end();
}
