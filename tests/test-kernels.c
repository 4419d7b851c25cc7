/* A/B tests of the CPU kernels: every tier this CPU runs (AVX2, AVX-VNNI,
 * AVX-512 VNNI, AMX-INT8) against the scalar twins (same quantized math,
 * float rounding order only), on plain rows and on the row-interleaved
 * layout of the host copy, and against the double reference MoE, over
 * random inputs and awkward shapes; guard values after every output; NaN
 * checks; and proof that masked experts are never read: their weights sit
 * behind PROT_NONE pages, so a single read crashes.  With a tier name as
 * argument (tests/kernels-amx.sh) only that tier is tested, and the test
 * is skipped (77) where it does not run.
 *
 * Bounds, as normalised L2 error ||a - b|| / ||b||:
 *  - a tier vs scalar twin, one tile or mul_mat_id: 1e-5.  Both compute the
 *    same integer block dots and per-block float scales; only the order of
 *    float additions differs (8 lanes vs one sum, FMA), about 1e-7.  The
 *    twin on the packed layout equals the twin on plain rows bit for bit,
 *    and in every tier a token's outputs are the same bits alone as in a
 *    batch.
 *  - the same for the fused FFN: 1e-3.  h is quantized again before the down
 *    product, and a 1e-7 difference can move an h value across a rounding
 *    boundary: one step of its block (amax/127) in one element, seen as
 *    ~1e-4 in a 512-token, top-8 case.
 *  - mul_mat_id vs double reference: 3e-2.  Activations are rounded to Q8_0:
 *    each value moves by at most amax/254 of its block of 32, so the input
 *    error norm is at most sqrt(32)/254 = 2.2% of the block norm and, for
 *    Gaussian-like data, about 0.6% in practice; W maps it to the output
 *    with about the same relative size.
 *  - fused FFN vs double reference: 5e-2.  Two roundings (x, then h before
 *    the down product), each bounded as above and typically 0.5-1%, plus the
 *    activation's slope (up to ~2 for the gpt-oss clamp-sigmoid) on the
 *    first.  Measured values are printed. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"
#include "model/arch.h"
#include "hotset.h"
#include "tests/hs-test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double unif(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (rng >> 11) * 0x1.0p-53;
}
static float gauss(void)
{
	return (float)((unif() + unif() + unif() + unif() - 2.0) * 1.7320508);
}

static double rel_l2(const float *a, const float *b, size_t n, int *nan)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		if (isnan(a[i]) || isnan(b[i]))
			(*nan)++;
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define GUARD 16
static const uint32_t guard_bits = 0x7fc0dead;
static float *alloc_guarded(size_t n)
{
	float *p = malloc(sizeof *p * (n + GUARD));
	for (int i = 0; i < GUARD; i++)
		memcpy(&p[n + i], &guard_bits, 4);
	return p;
}
static int guard_ok(const float *p, size_t n)
{
	for (int i = 0; i < GUARD; i++)
		if (memcmp(&p[n + i], &guard_bits, 4) != 0)
			return 0;
	return 1;
}

/* ---- a random layer whose experts each start on a page boundary --------- */

struct region {
	uint8_t *base;
	size_t stride, len;
};

static size_t page;

static void region_alloc(struct region *r, int n_experts, size_t bytes)
{
	r->stride = (bytes + page - 1) / page * page;
	r->len = r->stride * n_experts;
	r->base = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->base == MAP_FAILED) {
		fprintf(stderr, "mmap failed\n");
		exit(1);
	}
}

static void fill_matrix(uint8_t *dst, int type, int rows, int cols)
{
	float *row = malloc(sizeof *row * cols);
	size_t rb = hs__type_row_bytes(type, (uint64_t)cols);
	for (int r = 0; r < rows; r++) {
		for (int c = 0; c < cols; c++)
			row[c] = gauss() / sqrtf((float)cols);
		hs__quantize_row_ref(type, row, dst + (size_t)r * rb, (size_t)cols);
	}
	free(row);
}

struct layer {
	struct hs_moe_layer l;  /* plain rows: the file's layout */
	struct hs_moe_layer lp; /* the same experts as packed blocks (the host
				   copy's layout), one per page run, in reverse
				   slot order */
	struct region g, u, d, pool;
	int32_t *slot_of;
	float *bias, *router, *router_b;
};

/* the down matrices' type when >= 0 (llama-quantize's mixes), else gate's */
static int down_type = -1;

static void make_layer(struct layer *L, const struct hs_moe_arch *arch, int type, int D, int F, int E, int K)
{
	const int dt = down_type >= 0 ? down_type : type;
	memset(L, 0, sizeof *L);
	region_alloc(&L->g, E, (size_t)F * hs__type_row_bytes(type, D));
	region_alloc(&L->u, E, (size_t)F * hs__type_row_bytes(type, D));
	region_alloc(&L->d, E, (size_t)D * hs__type_row_bytes(dt, F));
	for (int e = 0; e < E; e++) {
		fill_matrix(L->g.base + e * L->g.stride, type, F, D);
		fill_matrix(L->u.base + e * L->u.stride, type, F, D);
		fill_matrix(L->d.base + e * L->d.stride, dt, D, F);
	}
	L->router = malloc(sizeof(float) * D * E);
	for (int i = 0; i < D * E; i++)
		L->router[i] = gauss() / sqrtf((float)D);
	struct hs_moe_layer *l = &L->l;
	l->arch = arch;
	l->n_embd = D;
	l->n_ff = F;
	l->n_experts = E;
	l->n_used = K;
	l->type[HS_GATE] = l->type[HS_UP] = type;
	l->type[HS_DOWN] = dt;
	l->gate = L->g.base;
	l->up = L->u.base;
	l->down = L->d.base;
	l->gate_stride = L->g.stride;
	l->up_stride = L->u.stride;
	l->down_stride = L->d.stride;
	l->router_type = HS_TYPE_F32;
	l->router = (const uint8_t *)L->router;
	if (arch->has_bias) {
		L->bias = malloc(sizeof(float) * (2 * F + D) * E);
		for (int i = 0; i < (2 * F + D) * E; i++)
			L->bias[i] = 0.05f * gauss();
		L->router_b = malloc(sizeof(float) * E);
		for (int i = 0; i < E; i++)
			L->router_b[i] = 0.1f * gauss();
		l->gate_b = L->bias;
		l->up_b = L->bias + F * E;
		l->down_b = L->bias + 2 * F * E;
		l->router_b = L->router_b;
	}
	const struct hs_expert_pack pack = hs__expert_pack_layout(l->type, D, F, arch->has_bias);
	region_alloc(&L->pool, E, pack.bytes);
	L->slot_of = malloc(sizeof *L->slot_of * E);
	for (int e = 0; e < E; e++) {
		L->slot_of[e] = E - 1 - e;
		hs__expert_pack(l, e, &pack, L->pool.base + L->slot_of[e] * L->pool.stride);
	}
	L->lp = *l;
	L->lp.gate = L->lp.up = L->lp.down = NULL;
	L->lp.gate_b = L->lp.up_b = L->lp.down_b = NULL;
	L->lp.pool = L->pool.base;
	L->lp.pool_stride = L->pool.stride;
	L->lp.slot_of = L->slot_of;
	L->lp.pack = pack;
}

static void free_layer(struct layer *L)
{
	munmap(L->g.base, L->g.len);
	munmap(L->u.base, L->u.len);
	munmap(L->d.base, L->d.len);
	munmap(L->pool.base, L->pool.len);
	free(L->slot_of);
	free(L->bias);
	free(L->router);
	free(L->router_b);
}

/* Expert e's three matrices unreadable (or readable again). */
static void protect_expert(struct layer *L, int e, int prot)
{
	mprotect(L->g.base + e * L->g.stride, L->g.stride, prot);
	mprotect(L->u.base + e * L->u.stride, L->u.stride, prot);
	mprotect(L->d.base + e * L->d.stride, L->d.stride, prot);
	mprotect(L->pool.base + L->slot_of[e] * L->pool.stride, L->pool.stride, prot);
}

static int run_ffn(const struct hs_kernel_ops *ops, const struct hs_moe_layer *l, int n, const float *x,
		   const int32_t *ids, const float *w, float *y, int threads)
{
	struct hs_ffn_job job = { .layer = l, .ops = ops, .n = n, .x = x, .ids = ids, .weights = w, .y = y };
	size_t bytes = (hs__ffn_scratch_bytes(l, n) + 63) & ~(size_t)63;
	job.scratch = aligned_alloc(64, bytes);
	memset(y, 0, sizeof *y * (size_t)n * l->n_embd);
	int rc = hs__ffn_run_omp(&job, threads);
	free(job.scratch);
	return rc;
}

/* ---- tests --------------------------------------------------------------- */

/* the tiers under test; each test computes its references once and runs
 * every tier against them */
static const struct hs_kernel_ops *tiers[HS_TIER_COUNT], *fast;
static int ntiers;
#define FOR_TIERS for (int ti_ = 0; ti_ < ntiers && (fast = tiers[ti_]); ti_++)

static void test_quantize(void)
{
	const int n = 32 * 97;
	float *x = malloc(sizeof *x * n);
	struct hs_block_q8_0 *a = malloc(sizeof *a * (n / 32)), *b = malloc(sizeof *b * (n / 32));

	for (int i = 0; i < n; i++)
		x[i] = gauss() * ldexpf(1.0f, (i / 32) % 30 - 15);
	memset(x + 64, 0, 32 * sizeof *x); /* a zero block */
	x[100] = 1e-30f;                   /* a tiny value in a block of its own scale */
	hs__kernels_ref.quantize_q8_0(x, a, n);
	FOR_TIERS {
		fast->quantize_q8_0(x, b, n);
		CHECK(memcmp(a, b, sizeof *a * (n / 32)) == 0, "%s quantize_q8_0 differs from the scalar twin", fast->name);
	}
	/* a scale per 256 values (the tail of 97 blocks: one per block) */
	hs__quantize_q8_k_ref(x, a, n);
	for (int b8 = 0; b8 < 96; b8++)
		CHECK(a[b8].d == a[b8 & ~7].d, "quantize_q8_k: block %d has a scale of its own", b8);
	for (int g = 0; g < 12; g++) { /* the largest |x| of the 256 is +-127 */
		int m = 0;
		for (int i = 0; i < 256; i++)
			m = abs(a[8 * g + i / 32].qs[i % 32]) > m ? abs(a[8 * g + i / 32].qs[i % 32]) : m;
		CHECK(m == 127, "quantize_q8_k: super-block %d's largest value is %d, not 127", g, m);
	}
	FOR_TIERS {
		if (!fast->quantize_q8_k)
			continue;
		fast->quantize_q8_k(x, b, n);
		CHECK(memcmp(a, b, sizeof *a * (n / 32)) == 0, "%s quantize_q8_k differs from the scalar twin", fast->name);
	}
	free(x);
	free(a);
	free(b);
}

/* Plain and packed tiles of every type the layout takes against the twins:
 * rows 0..R of a random matrix, sub-ranges of them, 1..33 tokens; the
 * packed twin must equal the plain twin bit for bit, and the packed matrix
 * give back each plain row.  Q4_K's tokens mostly with a scale per 256
 * values (the AVX-512 tiers' packed loop, AMX tiles from 16 tokens), every
 * fourth count and 17 per 32 (the gather back to plain rows); Q4_K packs on
 * every tier here, whichever
 * hs__pack_type() picks for the host copy. */
static void test_tiles(void)
{
	/* 16416 columns (513 blocks) takes the 256-bit MXFP4 prefill tile's
	 * fallback for rows longer than its stack arrays cover, and the AMX
	 * tile's chunking of blocks (64 at a time) */
	const int types[3] = { HS_TYPE_MXFP4, HS_TYPE_Q8_0, HS_TYPE_Q4_K };
	const int cols[3][5] = { { 32, 96, 224, 2880, 16416 },
				 { 32, 96, 224, 2880, 16416 },
				 { 256, 768, 2304, 2816, 16384 } };
	const int nts[11] = { 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33 };
	const int R = 80;
	enum { MAXT = 33 };

	for (int t = 0; t < 3; t++)
		for (int c = 0; c < 5; c++) {
			const int C = cols[t][c], kq = types[t] == HS_TYPE_Q4_K;
			size_t rb = hs__type_row_bytes(types[t], C);
			uint8_t *w = malloc(rb * R), *pw = malloc(rb * R), *row = malloc(rb);
			int bad_rows = 0;
			fill_matrix(w, types[t], R, C);
			if (types[t] == HS_TYPE_MXFP4) /* row 11: every value +6 (the
							  256-bit tiers' largest byte, 24),
							  against tokens 2 and 5 (all +127,
							  all -127): int16 sums taken over
							  too many units overflow here */
				for (int b = 0; b < C / 32; b++)
					memset(w + 11 * rb + 17 * (size_t)b + 1, 0x77, 16);
			if (kq) /* row 11: every value 15, against the same tokens: the
				   packed loop's int16 sums of 4 units at their largest */
				for (int b = 0; b < C / 256; b++)
					memset(w + 11 * rb + 144 * (size_t)b + 16, 0xff, 128);
			hs__pack_matrix(types[t], R, C, w, rb, pw);
			for (int r = 0; r < R; r++) {
				hs__packed_row(types[t], C, pw, r, row);
				bad_rows += memcmp(row, w + (size_t)r * rb, rb) != 0;
			}
			CHECK(bad_rows == 0, "%s cols %d: %d rows differ after packing and reading back", hs__type_name(types[t]),
			      C, bad_rows);
			for (int k = 0; k < 11; k++) {
				const int nt = nts[k];
				if (C > 3000 && nt > 9 && nt != 17)
					continue; /* long rows: enough to see each path once */
				struct hs_block_q8_0 *xq = malloc(sizeof *xq * (C / 32) * nt);
				const struct hs_block_q8_0 *xs[MAXT];
				float *oa[MAXT], *ob[MAXT], *op[MAXT], *oq[MAXT], *xrow = malloc(sizeof *xrow * C);
				/* plain: any rows; packed: whole groups of 16 */
				const int r0 = k % 3, r1 = R - (k % 2), p0 = 16 * (k % 2), p1 = R - 16 * (k % 3 == 1);
				int nan = 0;
				for (int j = 0; j < nt; j++) {
					for (int i = 0; i < C; i++)
						xrow[i] = j == 2 ? 1.0f : j == 5 ? -1.0f : gauss();
					if (kq && k % 4 != 3 && k != 9)
						hs__quantize_q8_k_ref(xrow, xq + j * (C / 32), C);
					else
						hs__kernels_ref.quantize_q8_0(xrow, xq + j * (C / 32), C);
					xs[j] = xq + j * (C / 32);
					oa[j] = alloc_guarded(r1 - r0);
					ob[j] = alloc_guarded(r1 - r0);
					op[j] = alloc_guarded(p1 - p0);
					oq[j] = alloc_guarded(p1 - p0);
				}
				hs__kernels_ref.tile_q(types[t], w, rb, r0, r1, C, xs, nt, oa);
				hs__kernels_ref.tile_q_packed(types[t], pw, p0, p1, C, xs, nt, op);
				for (int j = 0; j < nt; j++) {
					const int lo = p0 > r0 ? p0 : r0, hi = p1 < r1 ? p1 : r1;
					CHECK(memcmp(op[j] + (lo - p0), oa[j] + (lo - r0), sizeof(float) * (hi - lo)) == 0,
					      "packed twin %s cols %d nt %d token %d differs from the plain twin",
					      hs__type_name(types[t]), C, nt, j);
				}
				FOR_TIERS {
					fast->tile_q(types[t], w, rb, r0, r1, C, xs, nt, ob);
					fast->tile_q_packed(types[t], pw, p0, p1, C, xs, nt, oq);
					for (int j = 0; j < nt; j++) {
						double e = rel_l2(ob[j], oa[j], r1 - r0, &nan);
						CHECK(e <= 1e-5 && !nan, "%s: tile %s cols %d nt %d token %d: error %.3g nan %d",
						      fast->name, hs__type_name(types[t]), C, nt, j, e, nan);
						/* (Q4_K: 64 super-blocks against the all-equal
						 * tokens 2 and 5 cancel to 2e-5 in float, plain
						 * rows too) */
						e = rel_l2(oq[j], op[j], p1 - p0, &nan);
						CHECK(e <= (kq ? 1e-4 : 1e-5) && !nan,
						      "%s: packed tile %s cols %d rows %d..%d nt %d token %d: error %.3g nan %d",
						      fast->name, hs__type_name(types[t]), C, p0, p1, nt, j, e, nan);
						CHECK(guard_ok(oa[j], r1 - r0) && guard_ok(ob[j], r1 - r0) &&
							      guard_ok(op[j], p1 - p0) && guard_ok(oq[j], p1 - p0),
						      "%s: tile wrote past its output", fast->name);
					}
					/* a token alone gives the same bits as in the batch (the
					 * forward pass's batched sequences rely on it); plain MXFP4
					 * rows past 512 blocks take a fallback that does not */
					for (int j = 0; j < nt; j += nt > 1 ? nt - 1 : 1) {
						float *one = alloc_guarded(r1 - r0 > p1 - p0 ? r1 - r0 : p1 - p0);
						fast->tile_q(types[t], w, rb, r0, r1, C, xs + j, 1, &one);
						/* (Q4_K's plain rows: one token and a batch take
						 * different loops; so its packed tiles but in the
						 * tiers' packed loop, up to 8 tokens) */
						CHECK(memcmp(one, ob[j], sizeof(float) * (r1 - r0)) == 0 || kq ||
							      (types[t] == HS_TYPE_MXFP4 && C > 16384),
						      "%s: tile %s cols %d: token %d of %d differs from the token alone", fast->name,
						      hs__type_name(types[t]), C, j, nt);
						fast->tile_q_packed(types[t], pw, p0, p1, C, xs + j, 1, &one);
						CHECK(memcmp(one, oq[j], sizeof(float) * (p1 - p0)) == 0 ||
							      (kq && (nt > 8 || k % 4 == 3 || k == 9 ||
								      !(fast->packed_types >> HS_TYPE_Q4_K & 1u))),
						      "%s: packed tile %s cols %d: token %d of %d differs from the token alone",
						      fast->name, hs__type_name(types[t]), C, j, nt);
						free(one);
					}
				}
				for (int j = 0; j < nt; j++) {
					free(oa[j]);
					free(ob[j]);
					free(op[j]);
					free(oq[j]);
				}
				free(xq);
				free(xrow);
			}
			free(w);
			free(pw);
			free(row);
		}
}

/* ids for n tokens: top-k distinct from E, with some duplicates and masked
 * slots when asked. */
static void make_ids(int32_t *ids, float *w, int n, int k, int E, int dups, int masked)
{
	for (int t = 0; t < n; t++) {
		float s = 0;
		for (int j = 0; j < k; j++) {
			int e, again;
			do {
				e = (int)(unif() * E);
				again = 0;
				for (int i = 0; i < j; i++)
					again |= ids[t * k + i] == e;
			} while (again && k <= E);
			ids[t * k + j] = e;
			w[t * k + j] = (float)(0.1 + unif());
			s += w[t * k + j];
		}
		for (int j = 0; j < k; j++)
			w[t * k + j] /= s;
		if (dups && k > 1 && t % 3 == 0)
			ids[t * k + 1] = ids[t * k];
		if (masked && t % 2 == 1)
			ids[t * k + (t % k)] = -1;
	}
}

static double worst_ffn_err;

/* The fused FFN of a tier on plain rows and on the packed host-copy layout,
 * against the scalar twin (which gives the same bits on both layouts) and
 * the double reference. */
static void ab_ffn(const struct hs_moe_arch *arch, int type, int D, int F, int E, int K, int n, int dups,
		   int masked_all)
{
	struct layer L;
	float *x = malloc(sizeof *x * n * D), *w = malloc(sizeof *w * n * K);
	int32_t *ids = malloc(sizeof *ids * n * K);
	const int quant = hs__kernel_type_quantized(type);
	float *y_fast = alloc_guarded((size_t)n * D), *y_ref = alloc_guarded((size_t)n * D),
	      *y_refp = alloc_guarded((size_t)n * D), *y_dbl = alloc_guarded((size_t)n * D);
	int nan = 0;

	make_layer(&L, arch, type, D, F, E, K);
	for (int i = 0; i < n * D; i++)
		x[i] = gauss();
	make_ids(ids, w, n, K, E, dups, !masked_all);
	if (masked_all)
		for (int i = 0; i < n * K; i++)
			ids[i] = -1;
	CHECK(run_ffn(&hs__kernels_ref, &L.l, n, x, ids, w, y_ref, 1) == 0, "ref ffn");
	CHECK(run_ffn(&hs__kernels_ref, &L.lp, n, x, ids, w, y_refp, 1) == 0, "ref ffn, packed");
	CHECK(memcmp(y_ref, y_refp, sizeof *y_ref * n * D) == 0, "%s %s D%d F%d K%d n%d: the twin differs on packed experts",
	      arch->name, hs__type_name(type), D, F, K, n);
	CHECK(hs__moe_forward_ref(&L.l, n, x, ids, w, y_dbl) == 0, "double ref");
	/* float types keep plain rows in packed blocks too: one run says it all */
	FOR_TIERS for (int packed = 0; packed < 1 + quant; packed++) {
		/* a tier that quantizes some types' activations with a scale per
		 * 256 values has the twin quantize them so too */
		struct hs_kernel_ops twin = hs__kernels_ref;
		twin.quantize_q8_k = hs__quantize_q8_k_ref;
		twin.q8_k_types = fast->quantize_q8_k ? fast->q8_k_types : 0;
		const float *want = twin.q8_k_types ? y_refp : y_ref; /* y_refp is free after the memcmp above */
		if (twin.q8_k_types && packed == 0)
			CHECK(run_ffn(&twin, &L.l, n, x, ids, w, y_refp, 1) == 0, "ref ffn, 256-value scales");
		/* two threads on the first tier (the split is the same for all) */
		CHECK(run_ffn(fast, packed ? &L.lp : &L.l, n, x, ids, w, y_fast, ti_ ? 1 : 2) == 0, "fast ffn: %s",
		      hs_last_error());
		double e_ab = rel_l2(y_fast, want, (size_t)n * D, &nan);
		double e_dbl = rel_l2(y_fast, y_dbl, (size_t)n * D, &nan);
		CHECK(!nan, "NaN in outputs");
		CHECK(guard_ok(y_fast, (size_t)n * D) && guard_ok(y_ref, (size_t)n * D), "ffn wrote past y");
		CHECK(e_ab <= (quant ? 1e-3 : 1e-5), "%s: %s %s %s D%d F%d E%d K%d n%d: fast vs scalar twin %.3g", fast->name,
		      arch->name, hs__type_name(type), packed ? "packed" : "plain", D, F, E, K, n, e_ab);
		CHECK(e_dbl <= (quant ? 5e-2 : 1e-5), "%s: %s %s %s D%d F%d E%d K%d n%d: vs double reference %.3g",
		      fast->name, arch->name, hs__type_name(type), packed ? "packed" : "plain", D, F, E, K, n, e_dbl);
		if (masked_all) {
			int nz = 0;
			for (int i = 0; i < n * D; i++)
				nz += y_fast[i] != 0;
			CHECK(nz == 0, "all masked: %d non-zero outputs", nz);
		}
		if (quant && e_dbl > worst_ffn_err)
			worst_ffn_err = e_dbl;
	}
	free_layer(&L);
	free(x);
	free(w);
	free(ids);
	free(y_fast);
	free(y_ref);
	free(y_refp);
	free(y_dbl);
}

static void test_ffn_grid(void)
{
	const struct hs_moe_arch *archs[2] = { &hs__arch_gpt_oss, &hs__arch_qwen3moe };
	const int types[4] = { HS_TYPE_MXFP4, HS_TYPE_Q8_0, HS_TYPE_F16, HS_TYPE_BF16 };
	const int shapes[3][2] = { { 64, 96 }, { 224, 160 }, { 96, 288 } };
	const int ks[4] = { 1, 3, 4, 8 }, ns[3] = { 1, 7, 33 };

	for (int a = 0; a < 2; a++)
		for (int t = 0; t < 4; t++)
			for (int s = 0; s < 3; s++)
				for (int k = 0; k < 4; k++) {
					int n = ns[(s + k) % 3];
					ab_ffn(archs[a], types[t], shapes[s][0], shapes[s][1], 16, ks[k], n, k % 2, 0);
				}
	/* one prefill-sized batch, all ids masked, and top-8 of 8 */
	ab_ffn(&hs__arch_gpt_oss, HS_TYPE_MXFP4, 96, 64, 16, 4, 512, 1, 0);
	ab_ffn(&hs__arch_qwen3moe, HS_TYPE_Q8_0, 64, 96, 12, 8, 512, 0, 0);
	ab_ffn(&hs__arch_gpt_oss, HS_TYPE_MXFP4, 64, 64, 8, 4, 5, 0, 1);
	ab_ffn(&hs__arch_qwen3moe, HS_TYPE_MXFP4, 64, 64, 8, 8, 3, 0, 0);
	/* the types of llama-quantize's files, down in its own type as in Q4_K_M
	 * (q4_K with q6_K), Q3_K_M, GLM's fallbacks (q5_0 / q8_0 downs) */
	static const int mix[][2] = { { HS_TYPE_Q4_K, HS_TYPE_Q6_K }, { HS_TYPE_Q4_K, HS_TYPE_Q4_K },
				      { HS_TYPE_Q5_K, HS_TYPE_Q6_K }, { HS_TYPE_Q6_K, HS_TYPE_Q6_K },
				      { HS_TYPE_IQ4_XS, HS_TYPE_IQ4_XS }, { HS_TYPE_Q3_K, HS_TYPE_Q5_K },
				      { HS_TYPE_Q2_K, HS_TYPE_Q3_K }, { HS_TYPE_Q4_K, HS_TYPE_Q5_0 },
				      { HS_TYPE_Q4_K, HS_TYPE_Q8_0 }, { HS_TYPE_Q4_0, HS_TYPE_Q4_1 },
				      { HS_TYPE_Q5_1, HS_TYPE_IQ4_NL } };
	for (size_t i = 0; i < sizeof mix / sizeof mix[0]; i++) {
		const int D = hs__type_block_values(mix[i][0]) == 256 ? 256 : 96;
		const int F = hs__type_block_values(mix[i][1]) == 256 ? 512 : 160;
		down_type = mix[i][1];
		ab_ffn(i % 2 ? &hs__arch_gpt_oss : &hs__arch_qwen3moe, mix[i][0], D, F, 16, 4, i % 3 ? 7 : 33, i % 2, 0);
	}
	down_type = -1;
	printf("fused FFN vs double reference, all tiers: worst normalised error %.3g (bound 5e-2)\n", worst_ffn_err);
}

/* mul_mat_id alone, plain and packed experts, against the twin and a
 * double dot of the dequantized rows. */
static void test_mmid(int type)
{
	const int E = 6, R = 112, C = 224, n = 9, K = 3;
	const size_t rb = hs__type_row_bytes(type, C);
	struct region reg, preg;
	float *x = malloc(sizeof *x * n * C), wt[n * K];
	int32_t ids[n * K];
	float *oa = alloc_guarded(n * K * R), *ob = alloc_guarded(n * K * R), *od = malloc(sizeof *od * n * K * R);
	float *row = malloc(sizeof *row * C);
	int nan = 0;

	region_alloc(&reg, E, (size_t)R * rb);
	region_alloc(&preg, E, (size_t)R * rb);
	for (int e = 0; e < E; e++) {
		fill_matrix(reg.base + e * reg.stride, type, R, C);
		hs__pack_matrix(type, R, C, reg.base + e * reg.stride, rb, preg.base + e * preg.stride);
	}
	for (int i = 0; i < n * C; i++)
		x[i] = gauss();
	make_ids(ids, wt, n, K, E, 1, 1);
	memset(od, 0, sizeof *od * n * K * R);
	for (int s = 0; s < n * K; s++) {
		if (ids[s] < 0)
			continue;
		for (int r = 0; r < R; r++) {
			double acc = 0;
			hs__dequantize_row_ref(type, reg.base + ids[s] * reg.stride + r * rb, row, C);
			for (int c = 0; c < C; c++)
				acc += (double)row[c] * x[(s / K) * C + c];
			od[s * R + r] = (float)acc;
		}
	}
	FOR_TIERS for (int packed = 0; packed < 2; packed++) {
		memset(oa, 0, sizeof *oa * n * K * R);
		memset(ob, 0, sizeof *ob * n * K * R);
		for (int pass = 0; pass < 2; pass++) {
			struct hs_mmid_job j = { .ops = pass ? fast : &hs__kernels_ref, .type = type, .rows = R, .cols = C,
						 .n_experts = E, .n = n, .k = K, .packed = packed,
						 .w = packed ? preg.base : reg.base, .stride = reg.stride, .x = x, .ids = ids,
						 .out = pass ? ob : oa };
			j.scratch = malloc(hs__mmid_scratch_bytes(C, R, n, K, E));
			CHECK(hs__mmid_run_omp(&j, 2) == 0, "mmid: %s", hs_last_error());
			free(j.scratch);
		}
		double e_ab = rel_l2(ob, oa, n * K * R, &nan), e_d = rel_l2(ob, od, n * K * R, &nan);
		CHECK(e_ab <= 1e-5 && e_d <= 3e-2 && !nan, "%s: mul_mat_id %s %s: fast vs twin %.3g, vs double %.3g",
		      fast->name, hs__type_name(type), packed ? "packed" : "plain", e_ab, e_d);
		CHECK(guard_ok(oa, n * K * R) && guard_ok(ob, n * K * R), "mul_mat_id wrote past out");
		printf("%s: mul_mat_id %s %s vs double reference: normalised error %.3g (bound 3e-2)\n", fast->name,
		       hs__type_name(type), packed ? "packed" : "plain", e_d);
	}
	munmap(reg.base, reg.len);
	munmap(preg.base, preg.len);
	free(x);
	free(oa);
	free(ob);
	free(od);
	free(row);
}

/* Masked experts' matrices (plain, and their packed blocks) are PROT_NONE:
 * any read of them would crash this test.  The outputs must equal a run
 * where those experts were readable but masked all the same. */
static void test_masked_never_read(void)
{
	const int E = 8, K = 4, D = 96, F = 64;
	const int on_gpu[4] = { 1, 3, 5, 6 };
	struct layer L;
	float x[40 * 96], w[40 * 4], y1[40 * 96], y2[40 * 96];
	int32_t ids[40 * 4];
	int nan = 0;

	make_layer(&L, &hs__arch_gpt_oss, HS_TYPE_MXFP4, D, F, E, K);
	FOR_TIERS for (int n = 1; n <= 40; n += 39) {
		for (int i = 0; i < n * D; i++)
			x[i] = gauss();
		make_ids(ids, w, n, K, E, 0, 0);
		for (int i = 0; i < n * K; i++)
			for (int g = 0; g < 4; g++)
				if (ids[i] == on_gpu[g])
					ids[i] = -1;
		CHECK(run_ffn(fast, &L.l, n, x, ids, w, y1, 2) == 0, "open run");
		for (int g = 0; g < 4; g++)
			protect_expert(&L, on_gpu[g], PROT_NONE);
		CHECK(run_ffn(fast, &L.l, n, x, ids, w, y2, 2) == 0, "guarded run");
		CHECK(rel_l2(y2, y1, (size_t)n * D, &nan) <= 1e-5 && !nan, "masked runs differ");
		CHECK(run_ffn(fast, &L.lp, n, x, ids, w, y2, 2) == 0, "guarded run, packed");
		CHECK(rel_l2(y2, y1, (size_t)n * D, &nan) <= 1e-5 && !nan, "masked runs differ (packed)");
		CHECK(run_ffn(&hs__kernels_ref, &L.lp, n, x, ids, w, y2, 2) == 0, "guarded scalar run, packed");
		CHECK(run_ffn(&hs__kernels_ref, &L.l, n, x, ids, w, y2, 2) == 0, "guarded scalar run");
		for (int g = 0; g < 4; g++)
			protect_expert(&L, on_gpu[g], PROT_READ | PROT_WRITE);
	}
	free_layer(&L);
	printf("masked experts behind PROT_NONE pages (plain and packed): never read\n");
}

int main(int argc, char **argv)
{
	const struct hs_cpu_features *f = hs__cpu_features();
	char why[160];

	page = (size_t)sysconf(_SC_PAGESIZE);
	if (argc > 1) { /* one tier by name */
		int t = hs__cpu_tier_from_name(argv[1]);
		if (t < 0) {
			fprintf(stderr, "test-kernels: no tier %s\n", argv[1]);
			return 2;
		}
		if (!(tiers[0] = hs__kernels_tier(t))) {
			hs__cpu_tier_why(&f->probe, t, why, sizeof why);
			SKIP("the %s tier does not run here: %s", argv[1], why);
		}
		ntiers = 1;
	} else {
		for (int t = HS_TIER_COUNT - 1; t > HS_TIER_REF; t--) {
			if ((tiers[ntiers] = hs__kernels_tier(t))) {
				ntiers++;
				continue;
			}
			hs__cpu_tier_why(&f->probe, t, why, sizeof why);
			printf("tier %s: not tested here (%s)\n", hs__cpu_tier_name(t), why);
		}
		if (!ntiers) {
			printf("note: no x86 tier here, the scalar set is compared with itself\n");
			tiers[ntiers++] = &hs__kernels_ref;
		}
	}
	printf("tiers under test:");
	for (int i = 0; i < ntiers; i++)
		printf(" %s", tiers[i]->name);
	printf(" (twin: %s)\n", hs__kernels_ref.name);
	test_quantize();
	test_tiles();
	test_ffn_grid();
	test_mmid(HS_TYPE_MXFP4);
	test_mmid(HS_TYPE_Q8_0);
	test_masked_never_read();
	return hs_test_end();
}
