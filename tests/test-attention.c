/* A/B tests of attention over a KV cache against its double-precision
 * twin (plain two-pass softmax): decode and prefill, f16 and q8_0 cells,
 * GQA ratios 1/2/4/8, head_dim 64 and 128, sliding windows with the
 * boundary inside the batch, sinks, empty cells and cells of later
 * positions holding NaN (never to be used), ring-ordered cells, both cache
 * layouts, cell ranges split between threads; hand-made cases with known
 * answers; guard bytes after the output.
 *
 * Bound: normalised L2 error 5e-5 against the double twin, on every tier.
 * Scores are float dot products of head_dim terms (error about
 * sqrt(head_dim/8) u |q||k| scale, ~1e-7 absolute for unit-variance data);
 * e^x is a polynomial with relative error < 3e-7; the accumulator sums up
 * to n_cells weighted V rows in float, error growing like sqrt(n_cells) u
 * = 5.4e-6 at 8192 cells in practice.  V has mean 1 here so that the
 * output does not cancel to ~0 (which would inflate any normalised error).
 * q8_0 cells are the same numbers on both sides (the twin dequantizes the
 * same blocks), so the bound is the same.  Measured values are printed. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/attention.h"
#include "cpu_kernels/cpu-features.h"
#include "hotset.h"
#include "tests/dense-util.h"
#include "tests/hs-test.h"

static const struct hs_dense_ops *fast;
static int small;
static double worst;

struct acase {
	int n, n_head, n_head_kv, head_dim, n_cells, window, sinks, kv_type, n_split, head_major;
	int n_empty, n_future; /* empty cells and cells past every query (both hold NaN) */
};

/* Stores one head row of f32 values into a cell row of kv_type. */
static void put_row(int kv_type, const float *src, uint8_t *dst, int D)
{
	hs__quantize_row_ref(kv_type, src, dst, (size_t)D);
}

static void nan_row(int kv_type, uint8_t *dst, int D)
{
	const uint16_t qnan = 0x7e00;
	if (kv_type == HS_TYPE_F16)
		for (int i = 0; i < D; i++)
			memcpy(dst + 2 * i, &qnan, 2);
	else
		for (int b = 0; b < D / HS_QK; b++)
			memcpy(dst + b * sizeof(struct hs_block_q8_0), &qnan, 2); /* a NaN scale */
}

static void run_case(const struct acase *c)
{
	const int D = c->head_dim, KV = c->n_head_kv, H = c->n_head, N = c->n_cells, n = c->n;
	const size_t rb = hs__type_row_bytes(c->kv_type, (uint64_t)D);
	const size_t k_cell = c->head_major ? rb : KV * rb, k_head = c->head_major ? rb * N : rb;
	const size_t qs = (size_t)H * D + 3, nout = (size_t)(n - 1) * qs + (size_t)H * D;
	uint8_t *k = du_alloc(rb * KV * N), *v = du_alloc(rb * KV * N);
	float *q = du_alloc(sizeof(float) * nout), *sinks = malloc(sizeof(float) * H);
	float *a = du_alloc(sizeof(float) * nout), *b = du_alloc(sizeof(float) * nout),
	      *row = malloc(sizeof(float) * D);
	int32_t *cell_pos = malloc(sizeof(int32_t) * N), *q_pos = malloc(sizeof(int32_t) * n);
	const int n_seq = N - c->n_empty - c->n_future; /* cells holding the sequence */
	const int P = n_seq > n ? n_seq + 17 : n;       /* positions so far; older ones fell out of the ring */

	/* the sequence's last n_seq positions, in ring order (cell = pos mod ring) */
	for (int i = 0; i < N; i++)
		cell_pos[i] = -2;
	for (int p = P - n_seq; p < P; p++)
		cell_pos[p % n_seq] = p;
	for (int i = n_seq; i < N; i++)
		cell_pos[i] = i - n_seq < c->n_empty ? -1 : P + 5 + i;
	/* scramble: swap the tail cells into the middle */
	for (int i = n_seq; i < N; i++) {
		int j = (int)(du_unif() * (i + 1));
		int32_t t = cell_pos[i];
		cell_pos[i] = cell_pos[j];
		cell_pos[j] = t;
	}
	for (int t = 0; t < n; t++)
		q_pos[t] = P - n + t;
	for (int i = 0; i < N; i++)
		for (int h = 0; h < KV; h++) {
			uint8_t *kr = k + (size_t)i * k_cell + (size_t)h * k_head,
				*vr = v + (size_t)i * k_cell + (size_t)h * k_head;
			if (cell_pos[i] < 0 || cell_pos[i] > P - 1) {
				nan_row(c->kv_type, kr, D);
				nan_row(c->kv_type, vr, D);
				continue;
			}
			du_fill(row, D, 0, 1);
			put_row(c->kv_type, row, kr, D);
			du_fill(row, D, 1, 1);
			put_row(c->kv_type, row, vr, D);
		}
	du_fill(q, nout, 0, 1);
	du_fill(sinks, H, 0, 2);
	struct hs_attn_job j = { .n = n,
				 .n_head = H,
				 .n_head_kv = KV,
				 .head_dim = D,
				 .q = q,
				 .q_stride = qs,
				 .q_pos = q_pos,
				 .kv_type = c->kv_type,
				 .k = k,
				 .v = v,
				 .k_cell = k_cell,
				 .k_head = k_head,
				 .v_cell = k_cell,
				 .v_head = k_head,
				 .n_cells = N,
				 .cell_pos = cell_pos,
				 .window = c->window,
				 .sinks = c->sinks ? sinks : NULL,
				 .scale = 1.0f / sqrtf((float)D),
				 .out_stride = qs };
	j.out = a;
	memset(a, 0, sizeof(float) * nout);
	CHECK(hs__attention_ref(&j) == 0, "attention reference: %s", hs_last_error());
	for (int pass = 0; pass < 2; pass++) {
		const int threads = pass ? 2 : 3;
		int nan = 0;
		j.dops = pass ? &hs__dense_ref : fast;
		j.n_split = c->n_split ? c->n_split : hs__attn_pick_split(n, N, threads);
		size_t sb = hs__attn_scratch_bytes(n, H, D, j.n_split);
		j.scratch = sb ? du_alloc(sb) : NULL;
		j.out = b;
		memset(b, 0x7f, sizeof(float) * nout);
		CHECK(hs__attn_run_omp(&j, threads) == 0, "attention: %s", hs_last_error());
		double e = du_rel_l2_rows(b, a, n, qs, H * D, &nan);
		CHECK(e <= 5e-5 && !nan,
		      "attention %s %s n%d heads %d/%d dim %d cells %d window %d sinks %d split %d: error %.3g (bound 5e-5), "
		      "%d NaN",
		      j.dops->name, hs__type_name(c->kv_type), n, H, KV, D, N, c->window, c->sinks, j.n_split, e, nan);
		CHECK(du_guard_ok(b, sizeof(float) * nout) && (!sb || du_guard_ok(j.scratch, sb)),
		      "attention wrote past its output or scratch");
		worst = e > worst ? e : worst;
		free(j.scratch);
	}
	free(k);
	free(v);
	free(q);
	free(sinks);
	free(a);
	free(b);
	free(row);
	free(cell_pos);
	free(q_pos);
}

static void test_grid(void)
{
	/* clang-format off */
	static const struct acase cases[] = {
		/* n  H  KV  D  cells win sink type split hm empty future */
		{ 1, 8, 1, 64, 1, 0, 0, HS_TYPE_F16, 0, 0, 0, 0 },          /* decode, the first token */
		{ 1, 64, 8, 64, 1024, 0, 1, HS_TYPE_F16, 0, 0, 3, 2 },     /* gpt-oss-120b heads, 1k cells */
		{ 1, 64, 8, 64, 8192, 0, 1, HS_TYPE_F16, 0, 1, 0, 0 },     /* decode at 8k */
		{ 1, 64, 8, 64, 8192, 128, 1, HS_TYPE_Q8_0, 4, 0, 9, 9 },  /* window over a long cache */
		{ 1, 32, 4, 128, 700, 0, 0, HS_TYPE_Q8_0, 0, 0, 1, 1 },    /* Qwen3-30B-A3B heads */
		{ 7, 8, 8, 64, 300, 0, 0, HS_TYPE_F16, 0, 1, 2, 3 },       /* GQA 1 */
		{ 7, 8, 4, 128, 100, 32, 1, HS_TYPE_F16, 0, 0, 0, 0 },     /* GQA 2, window */
		{ 33, 16, 4, 64, 250, 0, 1, HS_TYPE_Q8_0, 3, 0, 5, 5 },    /* GQA 4, split prefill */
		{ 40, 16, 2, 64, 72, 32, 1, HS_TYPE_F16, 0, 0, 0, 0 },     /* GQA 8, ring of window + ubatch */
		{ 130, 8, 1, 64, 200, 0, 0, HS_TYPE_F16, 0, 1, 4, 0 },     /* GQA 8, long prefill */
		{ 64, 8, 2, 128, 64, 0, 1, HS_TYPE_Q8_0, 0, 0, 0, 0 },     /* the whole prompt in one batch */
		{ 5, 6, 2, 64, 40, 3, 1, HS_TYPE_F16, 0, 1, 2, 2 },        /* a tiny window */
		{ 3, 4, 2, 8, 37, 0, 1, HS_TYPE_F16, 2, 0, 3, 1 },         /* head_dim 8 */
		/* spans of prefill tokens (attend_span): groups of 3 and 5 heads
		 * (4 at a time, then the rest), a window inside a span, a width
		 * the span kernel leaves to the per-token one */
		{ 20, 6, 2, 128, 90, 0, 1, HS_TYPE_F16, 0, 1, 3, 2 },      /* GQA 3 */
		{ 45, 5, 1, 64, 60, 9, 0, HS_TYPE_Q8_0, 0, 0, 2, 1 },      /* GQA 5, window 9 */
		{ 12, 4, 2, 96, 40, 0, 0, HS_TYPE_F16, 0, 0, 1, 1 },       /* head_dim 96 */
	};
	/* clang-format on */
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		if (small && cases[i].n_cells > 1024)
			continue;
		run_case(&cases[i]);
	}
	printf("attention (%s): worst error %.3g (bound 5e-5)\n", fast->name, worst);
}

/* Known answers: one visible cell gives its V row (times 1 / (1 + e^(sink
 * - s)) with a sink); no visible cell gives zeros, sink or not. */
static void test_known(void)
{
	const int D = 64;
	uint16_t k[2][64], v[2][64];
	float q[64], out[64], sink = 0.5f;
	int32_t cell_pos[2] = { 0, 5 }, qp = 3;
	double s = 0;

	for (int i = 0; i < D; i++) {
		q[i] = du_gauss();
		k[0][i] = hs__fp32_to_fp16(du_gauss());
		v[0][i] = hs__fp32_to_fp16((float)i);
		k[1][i] = v[1][i] = 0x7e00; /* position 5 is after the query: never read */
		s += (double)q[i] * hs__fp16_to_fp32(k[0][i]);
	}
	s /= 8;
	for (int with_sink = 0; with_sink < 2; with_sink++) {
		struct hs_attn_job j = { .dops = fast,
					 .n = 1,
					 .n_head = 1,
					 .n_head_kv = 1,
					 .head_dim = D,
					 .q = q,
					 .q_stride = D,
					 .q_pos = &qp,
					 .kv_type = HS_TYPE_F16,
					 .k = (uint8_t *)k,
					 .v = (uint8_t *)v,
					 .k_cell = 128,
					 .v_cell = 128,
					 .n_cells = 2,
					 .cell_pos = cell_pos,
					 .sinks = with_sink ? &sink : NULL,
					 .scale = 0.125f,
					 .out = out,
					 .out_stride = D };
		const double f = with_sink ? 1 / (1 + exp(sink - s)) : 1;
		CHECK(hs__attn_run_omp(&j, 1) == 0, "attention: %s", hs_last_error());
		for (int i = 0; i < D; i++)
			CHECK(fabs(out[i] - i * f) <= 1e-5 * (i + 1), "one cell, sink %d: out[%d] = %g, expected %g",
			      with_sink, i, out[i], i * f);
		qp = -1; /* sees nothing */
		j.q_pos = &qp;
		CHECK(hs__attn_run_omp(&j, 1) == 0, "attention: %s", hs_last_error());
		for (int i = 0; i < D; i++)
			CHECK(out[i] == 0, "nothing visible, sink %d: out[%d] = %g", with_sink, i, out[i]);
		qp = 3;
	}
	/* the window: position 5 with window 2 sees positions 4 and 5 only */
	struct hs_attn_job bad = {
		.dops = fast, .n = 1, .n_head = 6, .n_head_kv = 4, .head_dim = 64, .kv_type = HS_TYPE_F16
	};
	CHECK(hs__attn_prepare(&bad) == -EINVAL, "attention accepted 6 query heads over 4 KV heads");
	bad.n_head = 4;
	bad.head_dim = 48;
	bad.kv_type = HS_TYPE_Q8_0;
	CHECK(hs__attn_prepare(&bad) == -EINVAL, "attention accepted head_dim 48 with q8_0 cells");
	bad.kv_type = HS_TYPE_BF16;
	bad.head_dim = 64;
	CHECK(hs__attn_prepare(&bad) == -EINVAL, "attention accepted bf16 cells");
}

int main(void)
{
	const struct hs_cpu_features *f = hs__cpu_features();
	const struct hs_dense_ops *tiers[3] = { f->use_avx2 ? hs__dense_avx2() : NULL,
						f->use_avx512 ? hs__dense_avx512() : NULL, &hs__dense_ref };

	small = du_sanitized();
	for (int i = 0; i < 3; i++) {
		if (!tiers[i] || (i == 2 && (tiers[0] || tiers[1])))
			continue; /* the scalar set runs as the twin in every case anyway */
		fast = tiers[i];
		worst = 0;
		test_grid();
		test_known();
	}
	return hs_test_end();
}
