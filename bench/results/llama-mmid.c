/* llama-mmid: times llama.cpp's CPU mul_mat_id (ggml, built separately,
 * not part of hotset) on the gpt-oss-120b expert shape (MXFP4) or, with
 * --type, the Qwen3-30B-A3B one (2048 x 768, 8 of 128) in another block
 * type, for the side-by-side run of bench/run-llama-compare.sh.  hotset's own code, written
 * against ggml's public headers; it prints one line per case in the format
 * of bench-kernels' table.
 *
 * What it measures, and how it matches bench-kernels --ops mmid:
 *   - weights: 128 experts of 2880 x 2880 MXFP4 (as in ggml: [2880, 2880,
 *     128]), random bytes with E8M0 exponents 118..121 (other types: 8
 *     experts quantized by ggml from random values in [-1, 1], copied
 *     over the 128; speed does not depend on the values), in ggml's CPU_REPACK
 *     buffer (rows repacked at load into its mxfp4_8x8 layout) or, with
 *     --plain, a plain CPU buffer; the buffer's pages are advised to 2 MiB
 *     pages as hotset's host copy is;
 *   - each step: fresh ids for n tokens, 4 distinct of 128 per token, the
 *     experts of the last two steps avoided while enough others remain (the
 *     same rule and seed as bench-kernels), set with ggml_backend_tensor_set
 *     outside the timed part; timed: ggml_backend_graph_compute of one
 *     mul_mat_id (which quantizes the f32 activations to Q8_0 inside, as
 *     hotset's mul_mat_id step does);
 *   - GB/s = weight bytes of the distinct experts of each step / time;
 *     GFLOP/s = 2 x routed pairs x 2880 x 2880 / time; at least 3 steps and
 *     `seconds`, after one warm-up step.
 *
 * build: cc -O2 -I$LLAMA/ggml/include llama-mmid.c -L$BUILD/bin -lggml -lggml-base -lggml-cpu -Wl,-rpath,$BUILD/bin
 * usage: llama-mmid [--threads 1,2] [--ns 1,8,32,128,512] [--seconds S] [--plain] [--type q4_K] */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

enum { E = 128, BLOCK_BYTES = 17 };
static int D = 2880, F = 2880, K = 4; /* --type other than mxfp4: 2048, 768, 8 */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545f4914f6cdd1dull; /* bench-kernels' seed */
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* bench-kernels' expert rule: random top-k per token; experts used in the
 * last two steps avoided while at least 2 n k others remain */
static int last_used[E];
static int step_no = 10;

static void random_ids(int32_t *ids, int n)
{
	int recent = 0;
	step_no++;
	for (int e = 0; e < E; e++)
		recent += last_used[e] >= step_no - 2;
	int avoid = E - recent >= 2 * n * K;
	for (int t = 0; t < n; t++)
		for (int j = 0; j < K; j++) {
			int e, again;
			do {
				e = (int)(next() % (uint64_t)E);
				again = avoid && last_used[e] >= step_no - 2 && last_used[e] < step_no;
				for (int i = 0; i < j; i++)
					again |= ids[t * K + i] == e;
			} while (again);
			last_used[e] = step_no;
			ids[t * K + j] = e;
		}
}

static int distinct(const int32_t *ids, int m)
{
	char seen[E] = { 0 };
	int c = 0;
	for (int i = 0; i < m; i++)
		if (!seen[ids[i]]) {
			seen[ids[i]] = 1;
			c++;
		}
	return c;
}

static ggml_backend_buffer_type_t repack_buft(void)
{
	ggml_backend_reg_t reg = ggml_backend_cpu_reg();
	ggml_backend_dev_get_extra_bufts_t get =
		(ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg, "ggml_backend_dev_get_extra_bufts");
	if (!get)
		return NULL;
	for (ggml_backend_buffer_type_t *b = get(ggml_backend_reg_dev_get(reg, 0)); b && *b; b++)
		if (strcmp(ggml_backend_buft_name(*b), "CPU_REPACK") == 0)
			return *b;
	return NULL;
}

/* The repack buffer marks the tensors it has a layout for (extra is that
 * layout, chosen by type and shape); llama.cpp keeps the others in a plain
 * buffer.  Probed on a tensor of the weights' shape (its pages untouched). */
static int has_repack(ggml_backend_buffer_type_t buft, enum ggml_type type)
{
	struct ggml_init_params p = { ggml_tensor_overhead() * 2, NULL, true };
	struct ggml_context *ctx = ggml_init(p);
	struct ggml_tensor *t = ggml_new_tensor_3d(ctx, type, D, F, E);
	ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
	int yes = b && t->extra;
	if (b)
		ggml_backend_buffer_free(b);
	ggml_free(ctx);
	return yes;
}

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
	static const struct option opts[] = { { "threads", required_argument, NULL, 't' },
					      { "ns", required_argument, NULL, 'n' },
					      { "seconds", required_argument, NULL, 's' },
					      { "plain", no_argument, NULL, 'p' },
					      { "type", required_argument, NULL, 'y' },
					      { NULL, 0, NULL, 0 } };
	int thr[8] = { 1, 2 }, nthr = 2, ns[16] = { 1, 8, 32, 128, 512 }, nn = 5, plain = 0, c;
	double secs = 1.0;
	enum ggml_type type = GGML_TYPE_MXFP4;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': nthr = int_list(optarg, thr, 8); break;
		case 'n': nn = int_list(optarg, ns, 16); break;
		case 's': secs = atof(optarg); break;
		case 'p': plain = 1; break;
		case 'y':
			for (c = 0; c < GGML_TYPE_COUNT; c++)
				if (ggml_get_type_traits(c)->type_name && strcmp(ggml_get_type_traits(c)->type_name, optarg) == 0 &&
				    ggml_get_type_traits(c)->blck_size > 1)
					break;
			if (c == GGML_TYPE_COUNT) {
				fprintf(stderr, "llama-mmid: --type %s: not a ggml block type\n", optarg);
				return 2;
			}
			type = (enum ggml_type)c;
			break;
		default: return 2;
		}
	}
	ggml_backend_buffer_type_t buft = plain ? ggml_backend_cpu_buffer_type() : repack_buft();
	if (!buft) {
		fprintf(stderr, "llama-mmid: this ggml build has no CPU_REPACK buffer type\n");
		return 1;
	}

	/* weights */
	struct ggml_init_params wp = { ggml_tensor_overhead() * 4, NULL, true };
	struct ggml_context *wctx = ggml_init(wp);
	if (type != GGML_TYPE_MXFP4) {
		D = 2048;
		F = 768;
		K = 8;
	}
	const char *shape = type == GGML_TYPE_MXFP4 ? "gpt-oss-120b 2880x2880" : "qwen3-30b-a3b 2048x768";
	struct ggml_tensor *as = ggml_new_tensor_3d(wctx, type, D, F, E);
	if (!plain && !has_repack(buft, type)) {
		plain = 1;
		buft = ggml_backend_cpu_buffer_type();
	}
	ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
	if (!wbuf) {
		fprintf(stderr, "llama-mmid: cannot allocate the weights\n");
		return 1;
	}
	madvise(ggml_backend_buffer_get_base(wbuf), ggml_backend_buffer_get_size(wbuf), MADV_HUGEPAGE);
	const size_t bytes = ggml_nbytes(as), expert_bytes = bytes / E;
	uint8_t *host = malloc(bytes);
	for (size_t i = 0; i + 8 <= bytes; i += 8) {
		uint64_t v = next();
		memcpy(host + i, &v, 8);
	}
	if (type == GGML_TYPE_MXFP4) {
		for (size_t b = 0; b < bytes / BLOCK_BYTES; b++)
			host[b * BLOCK_BYTES] = (uint8_t)(118 + next() % 4);
	} else {
		float *f = malloc(sizeof(float) * (size_t)D * F);
		for (int e = 0; e < 8; e++) {
			for (size_t i = 0; i < (size_t)D * F; i++)
				f[i] = (float)((int)(next() % 2001) - 1000) / 1000.0f;
			ggml_quantize_chunk(type, f, host + e * expert_bytes, 0, F, D, NULL);
		}
		for (int e = 8; e < E; e++)
			memcpy(host + e * expert_bytes, host + (e % 8) * expert_bytes, expert_bytes);
		free(f);
	}
	ggml_backend_tensor_set(as, host, 0, bytes); /* the repack happens here */
	free(host);

	ggml_backend_t be = ggml_backend_cpu_init();
	printf("llama.cpp ggml %s, CPU buffer %s, weights %s\n", ggml_version(), ggml_backend_buft_name(buft),
	       plain ? "plain rows" : "repacked at load (CPU_REPACK, where ggml has a layout for the type)");
	for (int ni = 0; ni < nn; ni++) {
		const int n = ns[ni];
		struct ggml_init_params gp = { ggml_tensor_overhead() * 8 + ggml_graph_overhead(), NULL, true };
		struct ggml_context *gctx = ggml_init(gp);
		struct ggml_tensor *x = ggml_new_tensor_3d(gctx, GGML_TYPE_F32, D, 1, n);
		struct ggml_tensor *ids = ggml_new_tensor_2d(gctx, GGML_TYPE_I32, K, n);
		struct ggml_tensor *out = ggml_mul_mat_id(gctx, as, x, ids);
		struct ggml_cgraph *g = ggml_new_graph(gctx);
		ggml_build_forward_expand(g, out);
		ggml_backend_buffer_t gbuf = ggml_backend_alloc_ctx_tensors(gctx, be);
		float *xv = malloc(sizeof(float) * D * n);
		int32_t *iv = malloc(sizeof(int32_t) * K * n);
		for (int i = 0; i < D * n; i++)
			xv[i] = (float)((int)(next() % 2001) - 1000) / 1000.0f;
		ggml_backend_tensor_set(x, xv, 0, sizeof(float) * D * n);
		for (int t = 0; t < nthr; t++) {
			double t_run = 0, wbytes = 0;
			int steps = 0;
			ggml_backend_cpu_set_n_threads(be, thr[t]);
			for (int step = -1; step < 3 || t_run < secs; step++) {
				random_ids(iv, n);
				ggml_backend_tensor_set(ids, iv, 0, sizeof(int32_t) * K * n);
				double t0 = now();
				ggml_backend_graph_compute(be, g);
				double dt = now() - t0;
				if (step < 0)
					continue;
				t_run += dt;
				steps++;
				wbytes += (double)distinct(iv, K * n) * expert_bytes;
			}
			printf("%-24s %-5s %-6s %5d %4d %-13s %9.2f %8.2f %9.1f\n", shape, ggml_type_name(type), "mmid", n,
			       thr[t], plain ? "llama-plain" : "llama-repack", t_run / steps * 1e3, wbytes / t_run / 1e9,
			       2.0 * K * n * (double)D * F * steps / t_run / 1e9);
			fflush(stdout);
		}
		ggml_backend_buffer_free(gbuf);
		ggml_free(gctx);
		free(xv);
		free(iv);
	}
	ggml_backend_free(be);
	ggml_backend_buffer_free(wbuf);
	ggml_free(wctx);
	return 0;
}
