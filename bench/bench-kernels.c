/* Benchmark of the CPU expert kernels against this machine's own memory read
 * bandwidth, measured in the same run.  Experts are chosen at random from
 * 128 per step, so their weights come from DRAM, not cache.  Experts are
 * in the host copy's layout (packed blocks, matrices row-interleaved) unless
 * --layout plain; every case runs once per tier in --tiers, one after the
 * other, so tiers are compared within the same minute.
 *
 * usage: bench-kernels [--quick] [--json] [--threads LIST] [--seconds S]
 *                      [--tiers LIST] [--layout packed|plain] [--ns LIST]
 *                      [--shapes gpt-oss,qwen3] [--ops ffn,mmid] [--no-masked]
 * Every figure printed is a measurement on this machine. */
#include "config.h"

#include <getopt.h>
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <jansson.h>

#include "bench/bench-util.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"
#include "model/arch.h"
#include "hotset.h"

/* ---- expert shapes ----------------------------------------------------- */
struct shape {
	const char *name;
	const struct hs_moe_arch *arch;
	int type, D, F, E, K;
};

struct bench_layer {
	struct hs_moe_layer l;  /* plain rows in mem, or packed blocks in pool */
	uint8_t *mem, *pool;
	int32_t *slot_of;
	size_t expert_bytes;    /* weight bytes of one expert (matrices only) */
	int copies;             /* packed: copies of the E experts in pool, one a step */
};

/* Random but valid weights: any nibble is a valid MXFP4 value; exponents
 * and fp16 scales are kept small so sums stay finite. */
static void fill(uint8_t *p, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = next();
		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)next();
}

/* Byte offsets of a block's fp16 scale fields (ggml-common.h), so random
 * bytes elsewhere make a block of sane values (random halves would be NaN
 * or inf now and then). */
static int half_fields(int type, int off[2])
{
	switch (type) {
	case HS_TYPE_Q4_K: case HS_TYPE_Q5_K: case HS_TYPE_Q4_1: case HS_TYPE_Q5_1: off[0] = 0, off[1] = 2; return 2;
	case HS_TYPE_Q2_K: off[0] = 80, off[1] = 82; return 2;
	case HS_TYPE_Q3_K: off[0] = 108; return 1;
	case HS_TYPE_Q6_K: off[0] = 208; return 1;
	default: off[0] = 0; return 1; /* Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS */
	}
}

static void fix_scales(uint8_t *m, int type, size_t rows, size_t cols)
{
	size_t rb = hs__type_row_bytes(type, cols), bb = hs__type_block_bytes(type), bv = hs__type_block_values(type);
	int off[2], nh = half_fields(type, off);
	for (size_t r = 0; r < rows; r++)
		for (size_t b = 0; b < cols / bv; b++) {
			uint8_t *blk = m + r * rb + b * bb;
			if (type == HS_TYPE_MXFP4) {
				blk[0] = (uint8_t)(118 + next() % 4);
				continue;
			}
			for (int h = 0; h < nh; h++) {
				uint16_t d = hs__fp32_to_fp16(0.001f);
				memcpy(blk + off[h], &d, 2);
			}
		}
}

/* The layer's experts as plain rows, then (packed) repacked one by one
 * into packed blocks, as the runtime's host copy holds them, and the plain
 * rows freed. */
static int make_layer(struct bench_layer *b, const struct shape *s, int packed)
{
	size_t gs = (size_t)s->F * hs__type_row_bytes(s->type, s->D), ds = (size_t)s->D * hs__type_row_bytes(s->type, s->F);
	memset(b, 0, sizeof *b);
	b->expert_bytes = 2 * gs + ds;
	b->mem = malloc(b->expert_bytes * s->E);
	if (!b->mem)
		return -1;
	fill(b->mem, b->expert_bytes * s->E);
	hs__moe_layer_flat(&b->l, s->arch, s->type, s->D, s->F, s->E, s->K, b->mem, NULL);
	for (int e = 0; e < s->E; e++) {
		fix_scales(b->mem + e * gs, s->type, s->F, s->D);
		fix_scales(b->mem + gs * s->E + e * gs, s->type, s->F, s->D);
		fix_scales(b->mem + 2 * gs * s->E + e * ds, s->type, s->D, s->F);
	}
	if (!packed)
		return 0;
	const struct hs_expert_pack pack = hs__expert_pack_layout1(s->type, s->D, s->F, s->arch->has_bias);
	/* on 2 MiB pages where the kernel gives them, as the runtime's host
	 * copy (runtime/numa.c); copies of the experts, a step's from the next
	 * copy, so that decode reads come from DRAM past even a large
	 * last-level cache (with one copy, Qwen3-shaped layers sat in a Xeon
	 * VM's 480 MiB L3 and read 20% faster than a model's weights can) */
	const size_t set = pack.bytes * (size_t)s->E;
	b->copies = (int)((hs__past_cache_bytes(set) + set - 1) / set);
	b->pool = hs__huge_alloc(set * (size_t)b->copies);
	b->slot_of = malloc(sizeof *b->slot_of * s->E);
	if (!b->pool || !b->slot_of)
		return -1;
	for (int e = 0; e < s->E; e++) {
		b->slot_of[e] = e;
		hs__expert_pack(&b->l, e, &pack, b->pool + (size_t)e * pack.bytes);
	}
	for (int c = 1; c < b->copies; c++)
		memcpy(b->pool + (size_t)c * set, b->pool, set);
	free(b->mem);
	b->mem = NULL;
	b->l.gate = b->l.up = b->l.down = NULL;
	b->l.pool = b->pool;
	b->l.pool_stride = pack.bytes;
	b->l.slot_of = b->slot_of;
	b->l.pack = pack;
	return 0;
}

static void free_layer(struct bench_layer *b)
{
	free(b->mem);
	free(b->pool);
	free(b->slot_of);
}

/* Random top-k per token.  With few pairs per step, experts used in the
 * last two steps are avoided, so that a step never finds its weights still
 * in the last-level cache (32 MiB on many servers, several experts). */
static int last_used[4096];
static int step_no = 10; /* last_used 0 counts as long ago */

static void random_ids(int32_t *ids, float *w, int n, int k, int E)
{
	int recent = 0;

	step_no++;
	for (int e = 0; e < E; e++)
		recent += last_used[e] >= step_no - 2;
	/* avoid only while plenty of other experts remain (a large batch just
	 * before may have used them all) */
	int avoid = E - recent >= 2 * n * k;
	for (int t = 0; t < n; t++)
		for (int j = 0; j < k; j++) {
			int e, again;
			do {
				e = (int)(next() % (uint64_t)E);
				again = avoid && last_used[e] >= step_no - 2 && last_used[e] < step_no;
				for (int i = 0; i < j; i++)
					again |= ids[t * k + i] == e;
			} while (again);
			last_used[e] = step_no;
			ids[t * k + j] = e;
			w[t * k + j] = 1.0f / k;
		}
}

/* Distinct experts among the unmasked ids: the weight bytes one step reads. */
static int distinct(const int32_t *ids, int m, int E)
{
	char seen[4096] = { 0 };
	int c = 0;
	for (int i = 0; i < m; i++)
		if (ids[i] >= 0 && ids[i] < E && !seen[ids[i]]) {
			seen[ids[i]] = 1;
			c++;
		}
	return c;
}

struct result {
	double seconds, gbps, gflops;
	int steps;
};

/* Runs steps of the fused FFN (or gate mul_mat_id alone) with fresh random
 * experts each step, for at least `secs` and 3 steps, after one warm-up. */
static struct result run_case(const struct hs_kernel_ops *ops, struct bench_layer *b, const struct shape *s, int n,
			      int threads, int ffn, double secs, double mask_frac)
{
	const int k = s->K, P = n * k;
	float *x = malloc(sizeof *x * (size_t)n * s->D), *y = malloc(sizeof *y * (size_t)n * s->D);
	float *w = malloc(sizeof *w * P), *out = malloc(sizeof *out * (size_t)P * s->F);
	int32_t *ids = malloc(sizeof *ids * P);
	size_t scratch = ffn ? hs__ffn_scratch_bytes(&b->l, n) : hs__mmid_scratch_bytes(s->D, s->F, n, k, s->E);
	void *sc = aligned_alloc(64, (scratch + 63) & ~(size_t)63);
	struct result r = { 0, 0, 0, 0 };
	double bytes = 0, flops = 0, t_run = 0;
	size_t mat = (size_t)s->F * hs__type_row_bytes(s->type, s->D);

	for (int i = 0; i < n * s->D; i++)
		x[i] = (float)((int)(next() % 2001) - 1000) / 1000.0f;
	for (int step = -1; step < 3 || t_run < secs; step++) {
		random_ids(ids, w, n, k, s->E);
		const int copy = b->copies > 1 ? (step + 1) % b->copies : 0;
		for (int e = 0; b->slot_of && e < s->E; e++)
			b->slot_of[e] = copy * s->E + e;
		if (mask_frac > 0) /* mask the first share of the slots */
			for (int i = 0; i < (int)(P * mask_frac + 0.5); i++)
				ids[i] = -1;
		int active = 0;
		for (int i = 0; i < P; i++)
			active += ids[i] >= 0;
		double t0 = now();
		if (ffn) {
			struct hs_ffn_job j = { .layer = &b->l, .ops = ops, .n = n, .x = x, .ids = ids,
						.weights = w, .y = y, .scratch = sc };
			memset(y, 0, sizeof *y * (size_t)n * s->D);
			if (hs__ffn_run_omp(&j, threads) != 0) {
				fprintf(stderr, "bench-kernels: expert FFN: %s\n", hs_last_error());
				exit(1);
			}
		} else {
			/* the gate matrices: plain, or inside the packed blocks (where
			 * the type is not row-interleaved, plain rows there too) */
			struct hs_mmid_job j = { .ops = ops, .type = s->type, .rows = s->F, .cols = s->D,
						 .n_experts = s->E, .n = n, .k = k,
						 .packed = b->pool != NULL && hs__pack_supported(s->type, s->F, s->D),
						 .w = b->pool ? b->pool + (size_t)copy * s->E * b->l.pool_stride +
									b->l.pack.gate
							      : b->l.gate,
						 .stride = b->pool ? b->l.pool_stride : b->l.gate_stride,
						 .x = x, .ids = ids, .out = out, .scratch = sc };
			if (hs__mmid_run_omp(&j, threads) != 0) {
				fprintf(stderr, "bench-kernels: mul_mat_id: %s\n", hs_last_error());
				exit(1);
			}
		}
		double t = now() - t0;
		if (step < 0)
			continue; /* warm-up: thread start, page faults */
		t_run += t;
		r.steps++;
		bytes += (double)distinct(ids, P, s->E) * (ffn ? (double)b->expert_bytes : (double)mat);
		flops += 2.0 * active * (double)s->D * s->F * (ffn ? 3 : 1);
	}
	r.seconds = t_run / r.steps;
	r.gbps = bytes / t_run / 1e9;
	r.gflops = flops / t_run / 1e9;
	free(x);
	free(y);
	free(w);
	free(out);
	free(ids);
	free(sc);
	return r;
}

/* A comma-separated list of positive ints into v (at most max); count. */
static int int_list(char *arg, int *v, int max)
{
	int n = 0;
	for (char *tok = strtok(arg, ","); tok && n < max; tok = strtok(NULL, ","))
		if (atoi(tok) > 0)
			v[n++] = atoi(tok);
	return n;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },	     { "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' }, { "seconds", required_argument, NULL, 's' },
		{ "tiers", required_argument, NULL, 'T' },   { "layout", required_argument, NULL, 'L' },
		{ "ns", required_argument, NULL, 'n' },	     { "shapes", required_argument, NULL, 'S' },
		{ "no-masked", no_argument, NULL, 'M' },     { "ops", required_argument, NULL, 'O' },
		{ "types", required_argument, NULL, 'Y' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int quick = 0, json = 0, c, thr[8] = { 1, 2 }, nthr = 2, packed = 1, ns[16], nn = 0, masked_on = 1;
	int shape_on[2] = { 1, 1 }, op_on[2] = { 1, 1 }, qtypes[16], nq = 0;
	double secs = 1.0;
	const struct hs_kernel_ops *tiers[HS_TIER_COUNT];
	int ntiers = 0, tier_id[HS_TIER_COUNT];

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'q': quick = 1; secs = 0.3; break;
		case 'j': json = 1; break;
		case 's': secs = atof(optarg); break;
		case 't':
			if (!(nthr = parse_threads(optarg, thr))) {
				fprintf(stderr, "bench-kernels: --threads needs a list like 1,2\n");
				return 2;
			}
			break;
		case 'n':
			if (!(nn = int_list(optarg, ns, 16))) {
				fprintf(stderr, "bench-kernels: --ns needs a list like 1,32,512\n");
				return 2;
			}
			break;
		case 'T':
			for (char *tok = strtok(optarg, ","); tok && ntiers < HS_TIER_COUNT; tok = strtok(NULL, ",")) {
				int t = hs__cpu_tier_from_name(tok);
				char why[160] = "no such tier";
				tier_id[ntiers] = t;
				if (t < 0 || !(tiers[ntiers] = hs__kernels_tier(t))) {
					if (t >= 0)
						hs__cpu_tier_why(&hs__cpu_features()->probe, t, why, sizeof why);
					fprintf(stderr, "bench-kernels: tier %s does not run here: %s\n", tok, why);
					return 2;
				}
				ntiers++;
			}
			break;
		case 'L':
			if (strcmp(optarg, "packed") && strcmp(optarg, "plain")) {
				fprintf(stderr, "bench-kernels: --layout packed or plain\n");
				return 2;
			}
			packed = strcmp(optarg, "packed") == 0;
			break;
		case 'Y':
			for (char *tok = strtok(optarg, ","); tok && nq < 16; tok = strtok(NULL, ",")) {
				qtypes[nq] = hs__type_from_name(tok);
				if (!hs__kernel_type_quantized(qtypes[nq])) {
					fprintf(stderr, "bench-kernels: --types: %s is not a block type hotset computes (%s)\n", tok,
						hs__type_supported_names());
					return 2;
				}
				nq++;
			}
			break;
		case 'S':
			shape_on[0] = strstr(optarg, "gpt-oss") != NULL;
			shape_on[1] = strstr(optarg, "qwen3") != NULL;
			break;
		case 'M': masked_on = 0; break;
		case 'O':
			op_on[0] = strstr(optarg, "ffn") != NULL;
			op_on[1] = strstr(optarg, "mmid") != NULL;
			break;
		case 'h':
			printf("usage: bench-kernels [--quick] [--json] [--threads 1,2] [--seconds S] [--tiers LIST]\n"
			       "                     [--layout packed|plain] [--ns 1,8,32,128,512] [--shapes gpt-oss,qwen3]\n"
			       "                     [--types q4_K,q6_K,iq4_xs,...]\n"
			       "                     [--ops ffn,mmid] [--no-masked]\n"
			       "Measures memory read bandwidth, then the fused expert FFN and mul_mat_id on the\n"
			       "gpt-oss-120b (2880x2880 MXFP4, 4 of 128) and Qwen3-30B-A3B (2048x768 Q8_0, 8 of\n"
			       "128) expert shapes for n = 1, 8, 32, 128, 512 tokens, and the masked-skip scaling.\n"
			       "Experts are in the host copy's layout (row-interleaved) unless --layout plain.\n"
			       "--tiers runs every case on each listed CPU tier (ref, avx2, avx-vnni,\n"
			       "avx512-vnni, amx) back to back; by default the tier this machine runs.\n"
			       "--types runs the Qwen3-30B-A3B shape in each listed block type instead of Q8_0\n"
			       "(Q4_K row-interleaved on the AVX-512 tiers; the other K-quants and 32-value types keep\n"
			       "plain rows in the host copy).\n");
			return 0;
		default: return 2;
		}
	}
	/* --types: the Qwen3 shape once per type (its files come as K-quants) */
	struct shape shapes[18] = {
		{ "gpt-oss-120b 2880x2880", &hs__arch_gpt_oss, HS_TYPE_MXFP4, 2880, 2880, 128, 4 },
		{ "qwen3-30b-a3b 2048x768", &hs__arch_qwen3moe, HS_TYPE_Q8_0, 2048, 768, 128, 8 },
	};
	int n_shapes = 2, shape_on_all[18] = { shape_on[0], shape_on[1] };
	for (int i = 0; i < nq; i++) {
		shapes[n_shapes] = shapes[1];
		shapes[n_shapes].type = qtypes[i];
		shape_on_all[n_shapes++] = 1;
	}
	if (nq)
		shape_on_all[1] = 0;
	static const int ns_full[5] = { 1, 8, 32, 128, 512 }, ns_quick[3] = { 1, 32, 512 };
	if (!nn) {
		nn = quick ? 3 : 5;
		memcpy(ns, quick ? ns_quick : ns_full, sizeof(int) * nn);
	}
	if (!ntiers) {
		tier_id[ntiers] = hs__cpu_features()->tier;
		tiers[ntiers++] = hs__kernels_best();
	}
	json_t *root = json_object(), *cases = json_array(), *masked = json_array(), *rb = json_object();
	FILE *o = json ? stderr : stdout; /* the table goes to stderr with --json */

	fprintf(o, "kernels: %s; %s\n", hs__kernels_best()->name, hs_build_info());
	if (*hs__cpu_features()->note)
		fprintf(o, "%s\n", hs__cpu_features()->note);
	fprintf(o, "tiers measured:");
	for (int i = 0; i < ntiers; i++)
		fprintf(o, " %s", tiers[i]->name);
	fprintf(o, "; experts: %s\n", packed ? "host-copy layout (packed blocks, rows interleaved)" : "plain ggml rows");
	if (!__builtin_cpu_supports("avx2")) {
		fprintf(stderr, "bench-kernels: this CPU has no AVX2; the read test needs it\n");
		return 1;
	}
	/* (a) read bandwidth over 1 GiB or 4x the last-level cache, and the
	 * buffer kept to measure it again before each n */
	size_t words = hs__past_cache_bytes((size_t)1 << 30) / 8;
	double read[8];
	if (measure_read(words * 8, thr, nthr, read, o, rb) != 0) {
		fprintf(stderr, "bench-kernels: cannot allocate %zu MiB for the read test\n", words * 8 >> 20);
		return 1;
	}
	uint64_t *buf = hs__huge_alloc(words * 8);
	if (!buf) {
		fprintf(stderr, "bench-kernels: cannot allocate %zu MiB for the read test\n", words * 8 >> 20);
		return 1;
	}
	for (size_t i = 0; i < words; i++)
		buf[i] = i * 0x9e3779b97f4a7c15ull;
	json_object_set_new(root, "read_gbps_by_threads", rb);
	json_object_set_new(root, "read_gbps", json_real(read[nthr - 1]));
	json_object_set_new(root, "layout", json_string(packed ? "packed" : "plain"));

	fprintf(o, "\nratio = GB/s of expert weights / the read bandwidth with the same threads, measured again\n"
		   "just before each n (column 'read'); this machine's speed drifts by the minute\n");
	fprintf(o, "\n%-24s %-5s %-6s %5s %4s %-13s %9s %8s %9s %6s %7s\n", "shape", "type", "op", "n", "thr", "tier",
		"ms/step", "GB/s", "GFLOP/s", "read", "ratio");
	for (int si = 0; si < n_shapes; si++) {
		struct bench_layer b;
		if (!shape_on_all[si])
			continue;
		if (make_layer(&b, &shapes[si], packed) != 0) {
			fprintf(stderr, "bench-kernels: out of memory for %s\n", shapes[si].name);
			return 1;
		}
		for (int op = 0; op < 2; op++)
			for (int ni = 0; ni < nn && op_on[op]; ni++)
				for (int t = 0; t < nthr; t++) {
					read[t] = read_gbps(buf, words, thr[t]);
					for (int ti = 0; ti < ntiers; ti++) {
						struct result r = run_case(tiers[ti], &b, &shapes[si], ns[ni], thr[t], op == 0, secs, 0);
						double ratio = r.gbps / read[t];
						fprintf(o, "%-24s %-5s %-6s %5d %4d %-13s %9.2f %8.2f %9.1f %6.1f %7.2f\n", shapes[si].name,
							hs__type_name(shapes[si].type), op == 0 ? "ffn" : "mmid", ns[ni], thr[t],
							hs__cpu_tier_name(tier_id[ti]), r.seconds * 1e3, r.gbps, r.gflops, read[t], ratio);
						fflush(o);
						json_array_append_new(cases, json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:f, s:f, s:f, s:f, s:f}",
							"shape", shapes[si].name, "type", hs__type_name(shapes[si].type),
							"op", op == 0 ? "ffn" : "mul_mat_id", "n_tokens", ns[ni], "threads", thr[t],
							"tier", hs__cpu_tier_name(tier_id[ti]), "ms_per_step", r.seconds * 1e3, "gbps", r.gbps,
							"gflops", r.gflops, "read_gbps", read[t], "ratio_to_read", ratio));
					}
				}
		if (si == 0 && masked_on) {
			/* masked skip: decode, 4 of 128, a share of the slots masked */
			double t_full = 0;
			fprintf(o, "\nmasked skip (%s ffn, n = 1, %d threads, %s): time against all unmasked\n", shapes[0].name,
				thr[nthr - 1], tiers[0]->name);
			for (int m = 0; m < 4; m++) {
				double frac = m * 0.25;
				struct result r = run_case(tiers[0], &b, &shapes[0], 1, thr[nthr - 1], 1, secs, frac);
				if (m == 0)
					t_full = r.seconds;
				fprintf(o, "  unmasked %3.0f%%: %7.2f ms/step, time ratio %.3f (proportional: %.2f)\n",
					(1 - frac) * 100, r.seconds * 1e3, r.seconds / t_full, 1 - frac);
				json_array_append_new(masked, json_pack("{s:f, s:f, s:f}", "unmasked_fraction", 1 - frac,
									"ms_per_step", r.seconds * 1e3, "time_ratio",
									r.seconds / t_full));
			}
			fprintf(o, "\n");
		}
		free_layer(&b);
	}
	free(buf);
	json_object_set_new(root, "cases", cases);
	json_object_set_new(root, "masked", masked);
	if (json) {
		char *str = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(5));
		printf("%s\n", str);
		free(str);
	}
	json_decref(root);
	return 0;
}
