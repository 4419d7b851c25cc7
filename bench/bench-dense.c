/* Benchmark of the dense CPU ops against this machine's memory read
 * bandwidth, measured in the same run: matrix-vector products (decode) on
 * gpt-oss-120b's dense shapes, GB/s of weights read, with enough copies of
 * each matrix cycled that they come from DRAM; matrix products at 512
 * tokens (prefill), GFLOP/s; attention decode over 1k and 8k cells (KV
 * caches cycled likewise) and prefill; the RoPE table and RMSNorm.
 *
 * usage: bench-dense [--quick] [--json] [--threads LIST] [--seconds S] [--only OP]
 * Every figure printed is a measurement on this machine. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench/bench-util.h"
#include "cpu_kernels/attention.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/repack.h"
#include "hotset.h"

static double secs = 1.0;
static size_t pool_bytes; /* copies cycled through, so reads come from DRAM (default: 4x the last-level cache) */
static FILE *o;
static json_t *cases;

/* Random bytes with valid block scales (Q8_0 d = 0.001) or small float
 * values, so that every sum stays finite. */
static void fill_weights(uint8_t *w, int type, size_t rows, int cols, size_t rb)
{
	for (size_t r = 0; r < rows; r++) {
		uint8_t *row = w + r * rb;
		for (size_t i = 0; i + 8 <= rb; i += 8) {
			uint64_t v = next();
			memcpy(row + i, &v, 8);
		}
		if (type == HS_TYPE_Q8_0)
			for (int b = 0; b < cols / HS_QK; b++) {
				uint16_t d = hs__fp32_to_fp16(0.001f);
				memcpy(row + b * sizeof(struct hs_block_q8_0), &d, 2);
			}
		else if (type == HS_TYPE_F16 || type == HS_TYPE_BF16)
			for (int c = 0; c < cols; c++) {
				float f = (float)((int)(next() % 2001) - 1000) * 1e-5f;
				uint16_t h = type == HS_TYPE_F16 ? hs__fp32_to_fp16(f) : hs__fp32_to_bf16(f);
				memcpy(row + 2 * c, &h, 2);
			}
		else if (type == HS_TYPE_F32)
			for (int c = 0; c < cols; c++) {
				float f = (float)((int)(next() % 2001) - 1000) * 1e-5f;
				memcpy(row + 4 * c, &f, 4);
			}
	}
}

static void record(const char *op, const char *shape, const char *type, const char *tier, int n, int threads, double ms,
		   double gbps, double gflops, double ratio)
{
	fprintf(o, "%-10s %-22s %-5s %-8s %5d %4d %9.3f %8.2f %9.1f %7.2f\n", op, shape, type, tier, n, threads, ms,
		gbps, gflops, ratio);
	fflush(o);
	json_array_append_new(cases,
			      json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f}", "op", op, "shape", shape,
					"type", type, "tier", tier, "n_tokens", n, "threads", threads, "ms_per_call",
					ms, "gbps", gbps, "gflops", gflops, "ratio_to_read", ratio));
}

/* ---- matrix products ----------------------------------------------------- */

struct mshape {
	const char *name;
	int rows, cols;
};

static void bench_matmul(const struct mshape *s, int type, const struct hs_dense_ops *dops, int n, int threads,
			 double read_bw)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)s->cols), mat = rb * (size_t)s->rows;
	const int copies = n == 1 && mat < pool_bytes ? (int)(pool_bytes / mat) : 1;
	uint8_t *w = hs__huge_alloc(mat * copies); /* as the runtime keeps dense weights */
	float *x = malloc(sizeof(float) * (size_t)n * s->cols), *y = malloc(sizeof(float) * (size_t)n * s->rows);
	size_t sb = hs__matmul_scratch_bytes(type, s->cols, n);
	void *scratch = sb ? aligned_alloc(64, sb) : NULL;
	double t_run = 0;
	int calls = 0;

	if (!w || !x || !y || (sb && !scratch)) {
		fprintf(stderr, "bench-dense: out of memory for %s\n", s->name);
		exit(1);
	}
	fill_weights(w, type, (size_t)s->rows * copies, s->cols, rb);
	/* the layout the runtime keeps the matrix in (runtime/fwd-cpu.c packs
	 * Q8_0 and MXFP4 at open): each copy packed from its plain rows */
	const int packed = hs__pack_supported(type, s->rows, s->cols);
	if (packed) {
		uint8_t *plain = malloc(mat);
		if (!plain) {
			fprintf(stderr, "bench-dense: out of memory for %s\n", s->name);
			exit(1);
		}
		for (int c = 0; c < copies; c++) {
			memcpy(plain, w + (size_t)c * mat, mat);
			hs__pack_matrix(type, s->rows, s->cols, plain, rb, w + (size_t)c * mat);
		}
		free(plain);
	}
	for (int i = 0; i < n * s->cols; i++)
		x[i] = (float)((int)(next() % 2001) - 1000) / 1000.0f;
	for (int step = -1; step < 3 || t_run < secs; step++) {
		struct hs_matmul_job j = { .ops = hs__kernels_best(),
					   .dops = dops,
					   .type = type,
					   .rows = s->rows,
					   .cols = s->cols,
					   .w = w + (size_t)((step + 1) % copies) * mat,
					   .row_bytes = rb,
					   .packed = packed,
					   .n = n,
					   .x = x,
					   .x_stride = (size_t)s->cols,
					   .y = y,
					   .y_stride = (size_t)s->rows,
					   .scratch = scratch };
		double t0 = now();
		hs__matmul_run_omp(&j, threads);
		if (step >= 0) {
			t_run += now() - t0;
			calls++;
		}
	}
	const double t = t_run / calls, gbps = (double)mat / t / 1e9, gflops = 2.0 * n * s->rows * s->cols / t / 1e9;
	record("matmul", s->name, hs__type_name(type),
	       hs__kernel_type_quantized(type) ? hs__kernels_best()->name : dops->name, n, threads, t * 1e3, gbps,
	       gflops, n == 1 ? gbps / read_bw : 0);
	free(w);
	free(x);
	free(y);
	free(scratch);
}

/* ---- attention ----------------------------------------------------------- */

static void bench_attention(int kv_type, const struct hs_dense_ops *dops, int n, int n_cells, int threads,
			    double read_bw)
{
	const int H = 64, KV = 8, D = 64;
	const size_t rb = hs__type_row_bytes(kv_type, D), cache = rb * KV * (size_t)n_cells;
	const int copies = n == 1 && 2 * cache < pool_bytes ? (int)(pool_bytes / (2 * cache)) : 1;
	uint8_t *k = aligned_alloc(64, cache * copies), *v = aligned_alloc(64, cache * copies);
	float *q = malloc(sizeof(float) * n * H * D), *out = malloc(sizeof(float) * n * H * D), sinks[64];
	int32_t *cell_pos = malloc(sizeof(int32_t) * n_cells), *q_pos = malloc(sizeof(int32_t) * n);
	const int split = hs__attn_pick_split(n, n_cells, threads);
	size_t sb = hs__attn_scratch_bytes(n, H, D, split);
	void *scratch = sb ? aligned_alloc(64, sb) : NULL;
	double t_run = 0, flops = 0;
	int calls = 0;

	fill_weights(k, kv_type, (size_t)n_cells * KV * copies, D, rb);
	fill_weights(v, kv_type, (size_t)n_cells * KV * copies, D, rb);
	for (int i = 0; i < n * H * D; i++)
		q[i] = (float)((int)(next() % 2001) - 1000) / 1000.0f;
	for (int i = 0; i < H; i++)
		sinks[i] = 0.5f;
	for (int c = 0; c < n_cells; c++)
		cell_pos[c] = c;
	for (int t = 0; t < n; t++)
		q_pos[t] = n_cells - n + t;
	for (int t = 0; t < n; t++)
		flops += 4.0 * H * D * (q_pos[t] + 1); /* q.k and p.v per visible cell */
	for (int step = -1; step < 3 || t_run < secs; step++) {
		const size_t off = (size_t)((step + 1) % copies) * cache;
		struct hs_attn_job j = { .dops = dops,
					 .n = n,
					 .n_head = H,
					 .n_head_kv = KV,
					 .head_dim = D,
					 .q = q,
					 .q_stride = (size_t)H * D,
					 .q_pos = q_pos,
					 .kv_type = kv_type,
					 .k = k + off,
					 .v = v + off,
					 .k_cell = rb * KV,
					 .k_head = rb,
					 .v_cell = rb * KV,
					 .v_head = rb,
					 .n_cells = n_cells,
					 .cell_pos = cell_pos,
					 .sinks = sinks,
					 .scale = 0.125f,
					 .out = out,
					 .out_stride = (size_t)H * D,
					 .n_split = split,
					 .scratch = scratch };
		double t0 = now();
		hs__attn_run_omp(&j, threads);
		if (step >= 0) {
			t_run += now() - t0;
			calls++;
		}
	}
	const double t = t_run / calls, gbps = 2.0 * cache / t / 1e9;
	char shape[32];
	snprintf(shape, sizeof shape, "64/8x64 %d cells", n_cells);
	record("attention", shape, hs__type_name(kv_type), dops->name, n, threads, t * 1e3, n == 1 ? gbps : 0,
	       flops / t / 1e9, n == 1 ? gbps / read_bw : 0);
	free(k);
	free(v);
	free(q);
	free(out);
	free(cell_pos);
	free(q_pos);
	free(scratch);
}

/* ---- small ops ------------------------------------------------------------- */

static void bench_small(const struct hs_dense_ops *dops, int threads)
{
	const int n = 512, D = 2880;
	float *x = malloc(sizeof(float) * n * D), *w = malloc(sizeof(float) * D), *cs = malloc(sizeof(float) * n * 64);
	int32_t pos[512];
	struct hs_rope r;
	double t0, t_rope, t_norm;

	for (int i = 0; i < n * D; i++)
		x[i] = (float)((int)(next() % 2001) - 1000) / 1000.0f;
	for (int i = 0; i < D; i++)
		w[i] = 1;
	for (int i = 0; i < n; i++)
		pos[i] = 100000 + i;
	hs__rope_init(&r, 64, 150000, 1.0f / 32, 1, 1, 32, 1, 4096);
	t0 = now();
	hs__rope_fill_omp(&r, n, pos, cs, threads);
	t_rope = now() - t0;
	hs__rmsnorm_omp(dops, x, D, x, D, n, 1, D, w, 1e-5f, threads); /* warm-up */
	t0 = now();
	hs__rmsnorm_omp(dops, x, D, x, D, n, 1, D, w, 1e-5f, threads);
	t_norm = now() - t0;
	record("rope-table", "512 positions x 32", "f32", "double", n, threads, t_rope * 1e3, 0, 0, 0);
	record("rmsnorm", "512 x 2880", "f32", dops->name, n, threads, t_norm * 1e3, 8.0 * n * D / t_norm / 1e9, 0, 0);
	free(x);
	free(w);
	free(cs);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'q' },         { "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' }, { "seconds", required_argument, NULL, 's' },
		{ "only", required_argument, NULL, 'o' },    { "pool", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 }
	};
	const char *only = "";
	int quick = 0, json = 0, c, thr[8] = { 1, 2 }, nthr = 2;
	const struct hs_cpu_features *f = hs__cpu_features();
	const struct hs_dense_ops *tiers[2] = { f->use_avx2 ? hs__dense_avx2() : NULL,
						f->use_avx512 ? hs__dense_avx512() : NULL };

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'q':
			quick = 1;
			secs = 0.3;
			pool_bytes = (size_t)256 << 20;
			break;
		case 'j': json = 1; break;
		case 'o': only = optarg; break;
		case 'p': pool_bytes = (size_t)atol(optarg) << 20; break;
		case 's': secs = atof(optarg); break;
		case 't':
			if (!(nthr = parse_threads(optarg, thr))) {
				fprintf(stderr, "bench-dense: --threads needs a list like 1,2\n");
				return 2;
			}
			break;
		case 'h':
			printf("usage: bench-dense [--quick] [--json] [--threads 1,2] [--seconds S] [--only matmul|attention|small] [--pool MiB]\n"
			       "Measures memory read bandwidth, then on gpt-oss-120b's dense shapes: matrix-vector\n"
			       "products (GB/s of weights against the read bandwidth), products at 512 tokens\n"
			       "(GFLOP/s), attention decode over 1k and 8k cells and prefill of 512 tokens, the\n"
			       "RoPE table and RMSNorm; every SIMD tier this CPU runs.  --pool: bytes of copies\n"
			       "cycled so that decode reads come from DRAM (default 512 MiB, 0: one copy, cached).\n");
			return 0;
		default: return 2;
		}
	}
	o = json ? stderr : stdout;
	cases = json_array();
	fprintf(o, "dense ops: %s; expert tiles: %s; %s\n", hs__dense_best()->name, hs__kernels_best()->name,
		hs_build_info());
	if (!tiers[0]) {
		fprintf(stderr, "bench-dense: this CPU has no AVX2; the benchmark measures the SIMD tiers\n");
		return 1;
	}
	double read[8];
	json_t *root = json_object(), *rb = json_object();
	if (!pool_bytes)
		pool_bytes = hs__past_cache_bytes((size_t)512 << 20);
	if (measure_read(quick ? (size_t)256 << 20 : hs__past_cache_bytes((size_t)1 << 30), thr, nthr, read, o, rb) != 0) {
		fprintf(stderr, "bench-dense: cannot allocate the read buffer\n");
		return 1;
	}

	fprintf(o, "\n%-10s %-22s %-5s %-8s %5s %4s %9s %8s %9s %7s\n", "op", "shape", "type", "tier", "n", "thr",
		"ms/call", "GB/s", "GFLOP/s", "ratio");
	const struct mshape q = { "attn q 4096x2880", 4096, 2880 }, kv = { "attn k/v 512x2880", 512, 2880 };
	const struct mshape router = { "router 128x2880", 128, 2880 }, out = { "output 201088x2880", 201088, 2880 };
	const int ftypes[3] = { HS_TYPE_F16, HS_TYPE_BF16, HS_TYPE_F32 };
	const int do_mm = !*only || !strcmp(only, "matmul"), do_att = !*only || !strcmp(only, "attention");
	for (int t = 0; t < nthr && do_mm; t++) {
		/* decode: weights streamed once per call */
		bench_matmul(&q, HS_TYPE_Q8_0, tiers[0], 1, thr[t], read[t]);
		bench_matmul(&kv, HS_TYPE_Q8_0, tiers[0], 1, thr[t], read[t]);
		if (!quick)
			bench_matmul(&out, HS_TYPE_Q8_0, tiers[0], 1, thr[t], read[t]);
		for (int i = 0; i < 2; i++)
			if (tiers[i]) {
				bench_matmul(&q, HS_TYPE_F16, tiers[i], 1, thr[t], read[t]);
				bench_matmul(&q, HS_TYPE_BF16, tiers[i], 1, thr[t], read[t]);
				bench_matmul(&router, HS_TYPE_F32, tiers[i], 1, thr[t], read[t]);
			}
	}
	for (int t = 0; t < nthr && do_mm; t++) {
		/* prefill: 512 tokens share every weight block */
		bench_matmul(&q, HS_TYPE_Q8_0, tiers[0], 512, thr[t], read[t]);
		for (int i = 0; i < 2; i++)
			for (int k = 0; k < 3 && tiers[i]; k++)
				if (!quick || k == 0)
					bench_matmul(k == 2 ? &router : &q, ftypes[k], tiers[i], 512, thr[t], read[t]);
	}
	for (int t = 0; t < nthr && do_att; t++)
		for (int i = 0; i < 2; i++)
			if (tiers[i]) {
				bench_attention(HS_TYPE_F16, tiers[i], 1, 1024, thr[t], read[t]);
				bench_attention(HS_TYPE_F16, tiers[i], 1, 8192, thr[t], read[t]);
				bench_attention(HS_TYPE_Q8_0, tiers[i], 1, 8192, thr[t], read[t]);
				bench_attention(HS_TYPE_F16, tiers[i], 512, 512, thr[t], read[t]);
			}
	for (int t = 0; t < nthr && (!*only || !strcmp(only, "small")); t++)
		bench_small(hs__dense_best(), thr[t]);
	fprintf(o,
		"\nGB/s: weight (or K and V) bytes read per call over its time; ratio: to the read bandwidth with\n"
		"the same threads. GFLOP/s: 2 per weight and token (attention: 4 per visible cell, head and value).\n");
	json_object_set_new(root, "read_gbps_by_threads", rb);
	json_object_set_new(root, "cases", cases);
	if (json) {
		char *s = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(5));
		printf("%s\n", s);
		free(s);
	}
	json_decref(root);
	return 0;
}
