/* Benchmark of the CPU expert kernels against this machine's own memory read
 * bandwidth, measured in the same run.  Experts are chosen at random from
 * 128 per step, so their weights come from DRAM, not cache.
 *
 * usage: bench-kernels [--quick] [--json] [--threads LIST] [--seconds S]
 * Every figure printed is a measurement on this machine. */
#include "config.h"

#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench/bench-util.h"
#include "cpu_kernels/kernels.h"
#include "model/arch.h"
#include "hotset.h"

/* ---- expert shapes ----------------------------------------------------- */
struct shape {
	const char *name;
	const struct hs_moe_arch *arch;
	int type, D, F, E, K;
};

struct bench_layer {
	struct hs_moe_layer l;
	uint8_t *mem;
	size_t expert_bytes;
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

static void fix_scales(uint8_t *m, int type, size_t rows, size_t cols)
{
	size_t rb = hs__type_row_bytes(type, cols), bb = hs__type_block_bytes(type);
	for (size_t r = 0; r < rows; r++)
		for (size_t b = 0; b < cols / HS_QK; b++) {
			uint8_t *blk = m + r * rb + b * bb;
			if (type == HS_TYPE_MXFP4)
				blk[0] = (uint8_t)(118 + next() % 4);
			else {
				uint16_t d = hs__fp32_to_fp16(0.001f);
				memcpy(blk, &d, 2);
			}
		}
}

static int make_layer(struct bench_layer *b, const struct shape *s)
{
	size_t gs = (size_t)s->F * hs__type_row_bytes(s->type, s->D), ds = (size_t)s->D * hs__type_row_bytes(s->type, s->F);
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
	return 0;
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
static struct result run_case(struct bench_layer *b, const struct shape *s, int n, int threads, int ffn,
			      double secs, double mask_frac)
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
		if (mask_frac > 0) /* mask the first share of the slots */
			for (int i = 0; i < (int)(P * mask_frac + 0.5); i++)
				ids[i] = -1;
		int active = 0;
		for (int i = 0; i < P; i++)
			active += ids[i] >= 0;
		double t0 = now();
		if (ffn) {
			struct hs_ffn_job j = { .layer = &b->l, .ops = hs__kernels_best(), .n = n, .x = x, .ids = ids,
						.weights = w, .y = y, .scratch = sc };
			memset(y, 0, sizeof *y * (size_t)n * s->D);
			hs__ffn_run_omp(&j, threads);
		} else {
			struct hs_mmid_job j = { .ops = hs__kernels_best(), .type = s->type, .rows = s->F, .cols = s->D,
						 .n_experts = s->E, .n = n, .k = k, .w = b->l.gate, .stride = b->l.gate_stride,
						 .x = x, .ids = ids, .out = out, .scratch = sc };
			hs__mmid_run_omp(&j, threads);
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

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "quick", no_argument, NULL, 'q' },   { "json", no_argument, NULL, 'j' },
					      { "threads", required_argument, NULL, 't' }, { "seconds", required_argument, NULL, 's' },
					      { "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 } };
	int quick = 0, json = 0, c, thr[8] = { 1, 2 }, nthr = 2;
	double secs = 1.0;
	const int ns_full[5] = { 1, 8, 32, 128, 512 }, ns_quick[3] = { 1, 32, 512 };

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
		case 'h':
			printf("usage: bench-kernels [--quick] [--json] [--threads 1,2] [--seconds S]\n"
			       "Measures memory read bandwidth, then the fused expert FFN and mul_mat_id on the\n"
			       "gpt-oss-120b (2880x2880 MXFP4, 4 of 128) and Qwen3-30B-A3B (2048x768 Q8_0, 8 of\n"
			       "128) expert shapes for n = 1, 8, 32, 128, 512 tokens, and the masked-skip scaling.\n");
			return 0;
		default: return 2;
		}
	}
	const struct shape shapes[2] = {
		{ "gpt-oss-120b 2880x2880", &hs__arch_gpt_oss, HS_TYPE_MXFP4, 2880, 2880, 128, 4 },
		{ "qwen3-30b-a3b 2048x768", &hs__arch_qwen3moe, HS_TYPE_Q8_0, 2048, 768, 128, 8 },
	};
	const int *ns = quick ? ns_quick : ns_full, nn = quick ? 3 : 5;
	json_t *root = json_object(), *cases = json_array(), *masked = json_array(), *rb = json_object();
	FILE *o = json ? stderr : stdout; /* the table goes to stderr with --json */

	fprintf(o, "kernels: %s; %s\n", hs__kernels_best()->name, hs_build_info());
	if (!__builtin_cpu_supports("avx2")) {
		fprintf(stderr, "bench-kernels: this CPU has no AVX2; the benchmark measures the AVX2 kernels\n");
		return 1;
	}
	/* (a) read bandwidth over 1 GiB */
	double read[8];
	if (measure_read((size_t)1 << 30, thr, nthr, read, o, rb) != 0) {
		fprintf(stderr, "bench-kernels: cannot allocate 1 GiB\n");
		return 1;
	}
	json_object_set_new(root, "read_gbps_by_threads", rb);
	json_object_set_new(root, "read_gbps", json_real(read[nthr - 1]));

	fprintf(o, "\n%-24s %-5s %-6s %5s %4s %9s %8s %9s %7s\n", "shape", "type", "op", "n", "thr", "ms/step", "GB/s",
		"GFLOP/s", "ratio");
	for (int si = 0; si < 2; si++) {
		struct bench_layer b;
		if (make_layer(&b, &shapes[si]) != 0) {
			fprintf(stderr, "bench-kernels: out of memory for %s\n", shapes[si].name);
			return 1;
		}
		for (int op = 0; op < 2; op++)
			for (int ni = 0; ni < nn; ni++)
				for (int t = 0; t < nthr; t++) {
					struct result r = run_case(&b, &shapes[si], ns[ni], thr[t], op == 0, secs, 0);
					double ratio = r.gbps / read[t];
					fprintf(o, "%-24s %-5s %-6s %5d %4d %9.2f %8.2f %9.1f %7.2f\n", shapes[si].name,
						hs__type_name(shapes[si].type), op == 0 ? "ffn" : "mmid", ns[ni], thr[t],
						r.seconds * 1e3, r.gbps, r.gflops, ratio);
					fflush(o);
					json_array_append_new(cases, json_pack("{s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f}",
						"shape", shapes[si].name, "type", hs__type_name(shapes[si].type),
						"op", op == 0 ? "ffn" : "mul_mat_id", "n_tokens", ns[ni], "threads", thr[t],
						"ms_per_step", r.seconds * 1e3, "gbps", r.gbps, "gflops", r.gflops,
						"ratio_to_read", ratio));
				}
		if (si == 0) {
			/* masked skip: decode, 4 of 128, a share of the slots masked */
			double t_full = 0;
			fprintf(o, "\nmasked skip (%s ffn, n = 1, %d threads): time against all unmasked\n", shapes[0].name,
				thr[nthr - 1]);
			for (int m = 0; m < 4; m++) {
				double frac = m * 0.25;
				struct result r = run_case(&b, &shapes[0], 1, thr[nthr - 1], 1, secs, frac);
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
		free(b.mem);
	}
	json_object_set_new(root, "cases", cases);
	json_object_set_new(root, "masked", masked);
	if (json) {
		char *s = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(5));
		printf("%s\n", s);
		free(s);
	}
	json_decref(root);
	return 0;
}
