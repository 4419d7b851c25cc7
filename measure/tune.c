/* `hotset tune`: measures the facts the planner needs on this machine.
 * Per NUMA node: read bandwidth of its cores from every node's memory, the
 * CPU expert kernel's speed per thread count (MXFP4) and per expert type
 * (all cores); per CUDA device: memory,
 * copy bandwidths (pinned from every node, pageable) and device memory
 * bandwidth.  Threads are bound to the node they measure. */
#include "config.h"

#include <errno.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu_kernels/dense.h"
#include "cpu_kernels/formats.h"
#include "model/arch.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"
#include "cpu_kernels/moe.h"
#include "hotset.h"
#include "measure/calibrate.h"
#include "measure/cuda-bw.h"
#include "topology/cuda-probe.h"
#include "base/error.h"
#include "runtime/numa.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct tune {
	const hs_topology *t;
	hs_progress_fn progress;
	void *ctx;
	int step, steps;
};

static void say(struct tune *tu, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct tune *tu, const char *fmt, ...)
{
	char msg[160];
	va_list ap;

	if (tu->progress) { /* the fraction done before this step */
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		tu->progress(msg, tu->steps ? (double)tu->step / tu->steps : 0, tu->ctx);
	}
	tu->step++;
}

/* Every OpenMP thread of the next regions runs on node i's CPUs. */
static int bind_team(const struct hs_numa_node *n, int threads)
{
	int rc = 0;
#pragma omp parallel num_threads(threads) reduction(| : rc)
	rc |= hs__bind_thread(n->cpus, n->n_cpus) != 0;
	return rc ? -EIO : 0;
}

static void unbind_team(int threads)
{
#pragma omp parallel num_threads(threads)
	hs__unbind_thread();
}

/* Bytes per second of `threads` threads reading buf (each its own share),
 * best of reps passes, every other one prefetching into L2 ahead of its
 * loads (dense.h: which is faster depends on the machine).  The xor keeps
 * the loads; four accumulators keep them independent. */
static double read_bw(const uint64_t *buf, size_t words, int threads, int reps)
{
	const struct hs_dense_ops *dops = hs__dense_best(); /* its xor_read: the probe both ways (dense.h) */
	double best = 0;

	for (int r = 0; r < reps; r++) {
		uint64_t total = 0;
		double t0 = now_s();
#pragma omp parallel num_threads(threads) reduction(^ : total)
		{
			int ith = omp_get_thread_num(), nth = omp_get_num_threads();
			size_t lo = words * ith / nth / 16 * 16, hi = words * (ith + 1) / nth / 16 * 16;
			total ^= dops->xor_read(buf + lo, (hi - lo) * 8, r % 2 ? HS_READ_AHEAD : 0);
		}
		double t = now_s() - t0;
		if (total == 0x5eed) /* keeps the loop; practically never true */
			fputc(' ', stderr);
		if (t > 0 && (double)words * 8 / t > best)
			best = (double)words * 8 / t;
	}
	return best;
}

double hs__read_bandwidth(int threads, size_t bytes, int reps)
{
	bytes = (hs__past_cache_bytes(bytes) + 127) & ~(size_t)127;
	uint64_t *buf = hs__huge_alloc(bytes); /* the weights' kind of pages */
	if (!buf)
		return 0;
	memset(buf, 0x5a, bytes); /* places the pages */
	double b = read_bw(buf, bytes / 8, threads, reps);
	free(buf);
	return b;
}

/* ---- the CPU kernel on synthetic layers ---------------------------------- */

/* MXFP4: gpt-oss-120b's experts (the curve over thread counts); every other
 * type: Qwen3-30B-A3B's (2048 x 768, 8 of 128), whose sizes are multiples
 * of every block, as in the files people run with those types. */
#define KD 2880
#define KF 2880
#define KK 4
#define QD 2048
#define QF 768
#define QK 8

/* The types measured on the Qwen3 shape: every quantized expert type hotset
 * computes (the float types take a float path nobody picks for experts). */
static const int typed[] = { HS_TYPE_Q8_0, HS_TYPE_Q6_K, HS_TYPE_Q5_K, HS_TYPE_Q4_K, HS_TYPE_Q3_K, HS_TYPE_Q2_K,
			     HS_TYPE_IQ4_XS, HS_TYPE_IQ4_NL, HS_TYPE_Q5_1, HS_TYPE_Q5_0, HS_TYPE_Q4_1, HS_TYPE_Q4_0 };
#define N_TYPED ((int)(sizeof typed / sizeof typed[0]))

#define SYNTH_MAX 1024 /* experts of a synthetic layer */

struct synth {
	struct hs_moe_layer l;  /* packed blocks in mem, as the runtime's host copy */
	uint8_t *mem;
	int32_t slot_of[SYNTH_MAX];
	int prefill_experts;    /* the experts prefill routes among: the model's count, not the pool's */
	size_t bytes, expert_bytes;
	int node;
};

/* Valid MXFP4 weights in the row-interleaved layout of the host copy
 * (cpu_kernels/repack.h): per block group of 16 rows, 16 small exponents
 * (so sums stay finite), then 256 bytes of random nibbles. */
static void synth_fill(uint8_t *p, size_t bytes, uint64_t *s)
{
	const size_t gbb = hs__pack_group_block_bytes(HS_TYPE_MXFP4);
	for (size_t g = 0; g + gbb <= bytes; g += gbb)
		for (size_t i = 0; i < gbb; i++) {
			*s = *s * 6364136223846793005ull + 1442695040888963407ull;
			p[g + i] = i < HS_PACK_ROWS ? (uint8_t)(118 + (*s >> 40) % 4) : (uint8_t)(*s >> 56);
		}
}

/* s->l: n experts of d x f, k used, one packed block each in s->mem. */
static void synth_pool(struct synth *s, const struct hs_moe_arch *arch, int type, int d, int f, int n, int k,
		       const struct hs_expert_pack *pack)
{
	hs__moe_layer_flat(&s->l, arch, type, d, f, n, k, NULL, NULL);
	s->l.pool = s->mem;
	s->l.pool_stride = pack->bytes;
	s->l.slot_of = s->slot_of;
	s->l.pack = *pack;
}

static int synth_make(struct synth *s, int os_node, int n_experts)
{
	const struct hs_expert_pack pack = hs__expert_pack_layout1(HS_TYPE_MXFP4, KD, KF, 1);
	size_t rin = hs__type_row_bytes(HS_TYPE_MXFP4, KD), rout = hs__type_row_bytes(HS_TYPE_MXFP4, KF);
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	memset(s, 0, sizeof *s);
	if (n_experts > (int)(sizeof s->slot_of / sizeof s->slot_of[0]))
		return -EINVAL;
	s->expert_bytes = 2 * (size_t)KF * rin + (size_t)KD * rout;
	s->bytes = pack.bytes * (size_t)n_experts;
	s->node = os_node;
	s->mem = hs__numa_alloc_on(os_node, s->bytes); /* zeroed: biases 0 */
	if (!s->mem)
		return -ENOMEM;
	for (int e = 0; e < n_experts; e++) {
		uint8_t *b = s->mem + (size_t)e * pack.bytes;
		if (e >= 8) /* copies of the first eight: the speed does not depend on the values */
			memcpy(b, s->mem + (size_t)(e % 8) * pack.bytes, pack.bytes);
		else {
			synth_fill(b + pack.gate, (size_t)KF * rin, &seed);
			synth_fill(b + pack.up, (size_t)KF * rin, &seed);
			synth_fill(b + pack.down, (size_t)KD * rout, &seed);
		}
		s->slot_of[e] = e;
	}
	synth_pool(s, &hs__arch_gpt_oss, HS_TYPE_MXFP4, KD, KF, n_experts, KK, &pack);
	s->prefill_experts = n_experts < 32 ? n_experts : 32; /* gpt-oss-20b's: 64 tokens an expert at 512 */
	return 0;
}

/* A Qwen3-shaped layer of `type` in the host copy's layout, at least
 * `bytes` of experts (so decode walks past the last-level cache): one
 * expert quantized from random values, packed as the runtime packs it, and
 * copied into every slot (the kernels' speed does not depend on the
 * values). */
static int synth_make_typed(struct synth *s, int os_node, int type, size_t bytes)
{
	const struct hs_expert_pack pack = hs__expert_pack_layout1(type, QD, QF, 0);
	struct hs_moe_layer one;
	size_t wb = hs__moe_layer_flat(&one, &hs__arch_qwen3moe, type, QD, QF, 1, QK, NULL, NULL);
	float *v = malloc(sizeof *v * (size_t)QD * QF);
	uint8_t *w = malloc(wb);
	uint64_t r = 0x9e3779b97f4a7c15ull;
	int n = (int)((bytes + pack.bytes - 1) / pack.bytes + QK - 1) / QK * QK;

	memset(s, 0, sizeof *s);
	if (n < 4 * QK)
		n = 4 * QK;
	if (n > (int)(sizeof s->slot_of / sizeof s->slot_of[0]))
		n = (int)(sizeof s->slot_of / sizeof s->slot_of[0]);
	if (!v || !w) {
		free(v);
		free(w);
		return -ENOMEM;
	}
	for (size_t i = 0; i < (size_t)QD * QF; i++) { /* the scale of trained weights */
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		v[i] = (float)((int)(r >> 53) - 1024) / 1024.0f * 0.05f;
	}
	hs__moe_layer_flat(&one, &hs__arch_qwen3moe, type, QD, QF, 1, QK, w, NULL);
	/* gate and up are QF rows of QD values, down QD rows of QF: the same count */
	hs__quantize_row_ref(type, v, w, (size_t)QD * QF);
	hs__quantize_row_ref(type, v, w + one.up_stride, (size_t)QD * QF);
	hs__quantize_row_ref(type, v, w + 2 * one.up_stride, (size_t)QD * QF);
	s->expert_bytes = one.gate_stride + one.up_stride + one.down_stride;
	s->bytes = pack.bytes * (size_t)n;
	s->node = os_node;
	s->mem = hs__numa_alloc_on(os_node, s->bytes);
	if (s->mem) {
		hs__expert_pack(&one, 0, &pack, s->mem);
		for (int e = 0; e < n; e++) {
			if (e)
				memcpy(s->mem + (size_t)e * pack.bytes, s->mem, pack.bytes);
			s->slot_of[e] = e;
		}
	}
	free(v);
	free(w);
	if (!s->mem)
		return -ENOMEM;
	synth_pool(s, &hs__arch_qwen3moe, type, QD, QF, n, QK, &pack);
	s->prefill_experts = n < 128 ? n : 128; /* Qwen3-30B-A3B's: 32 tokens an expert at 512 */
	return 0;
}

/* Decode: steps of one token with K experts, walking through the experts
 * in order so that no step finds its weights in the cache.  Prefill: 512
 * tokens with random ids among the model's count of experts (its tokens
 * per expert set the tiles' fill).  Returns bytes/s and FLOP/s. */
static int kernel_speed(struct synth *s, int threads, double secs, struct hs_kernel_speed *out)
{
	const int E = s->l.n_experts, NP = 512, K = s->l.n_used, D = s->l.n_embd, F = s->l.n_ff;
	float *x = malloc(sizeof *x * (size_t)NP * D), *y = malloc(sizeof *y * (size_t)NP * D);
	float *w = malloc(sizeof *w * NP * K);
	int32_t *ids = malloc(sizeof *ids * NP * K);
	size_t scratch = hs__ffn_scratch_bytes(&s->l, NP);
	void *sc = aligned_alloc(64, (scratch + 63) & ~(size_t)63);
	uint64_t r = 12345;
	int rc = 0;

	if (!x || !y || !w || !ids || !sc) {
		rc = hs__error(ENOMEM, "tune: no memory for the kernel test");
		goto out_free;
	}
	for (int i = 0; i < NP * D; i++) {
		r = r * 6364136223846793005ull + 1;
		x[i] = (float)((int)(r >> 53) - 512) / 512.0f;
	}
	for (int i = 0; i < NP * K; i++)
		w[i] = 0.25f;
	out->threads = threads;
	out->type = s->l.pack.type[0];
	for (int phase = 0; phase < 2; phase++) {
		int n = phase ? NP : 1;
		double t_run = 0, work = 0;
		for (int step = -1; step < 3 || t_run < secs; step++) {
			for (int tok = 0; tok < n; tok++)
				for (int j = 0; j < K; j++) {
					r = r * 6364136223846793005ull + 1442695040888963407ull;
					/* decode: experts step*K.. in turn; prefill: random, distinct per token */
					int e = phase ? (int)((r >> 33) % (uint64_t)(s->prefill_experts / K)) * K + j
						      : ((step + 1) * K + j) % E;
					ids[tok * K + j] = e;
				}
			struct hs_ffn_job job = { .layer = &s->l, .ops = hs__kernels_best(), .n = n, .x = x,
						  .ids = ids, .weights = w, .y = y, .scratch = sc };
			memset(y, 0, sizeof *y * (size_t)n * D);
			double t0 = now_s();
			if ((rc = hs__ffn_run_omp(&job, threads)))
				goto out_free;
			double t = now_s() - t0;
			if (step < 0)
				continue; /* warm-up: thread start, page faults */
			t_run += t;
			work += phase ? 2.0 * 3 * D * F * (double)n * K : (double)K * s->expert_bytes;
		}
		if (phase)
			out->prefill_gflops = work / t_run / 1e9;
		else
			out->decode_gbps = work / t_run / 1e9;
	}
out_free:
	free(x);
	free(y);
	free(w);
	free(ids);
	free(sc);
	return rc;
}

/* A dense matrix-vector product of `type`, as the attention and output
 * matrices run at decode (MXFP4 and Q8_0 in the row-interleaved layout the
 * runtime repacks them into, the others in plain rows): rows of QD values
 * filling `bytes` (one block of rows quantized from random values, copied),
 * one token, bytes of the matrix per second. */
static int dense_speed(int type, int os_node, int threads, size_t bytes, double secs, double *gbps)
{
	const int rows_q = 64;
	const size_t rb = hs__type_row_bytes(type, QD);
	const int rows = (int)(bytes / rb / rows_q * rows_q);
	const size_t wb = (size_t)rows * rb;
	uint8_t *w = hs__numa_alloc_on(os_node, wb);
	float *v = malloc(sizeof *v * (size_t)rows_q * QD), x[QD];
	float *y = malloc(sizeof *y * (size_t)rows);
	uint8_t *plain = malloc((size_t)rows_q * rb);
	size_t scratch = hs__matmul_scratch_bytes(type, QD, 1);
	void *sc = aligned_alloc(64, (scratch + 63) & ~(size_t)63);
	uint64_t r = 0x2545f4914f6cdd1dull;
	int rc = 0;

	if (!w || !v || !y || !plain || !sc) {
		rc = hs__error(ENOMEM, "tune: no memory for the dense product test");
		goto out;
	}
	for (int i = 0; i < rows_q * QD; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		v[i] = (float)((int)(r >> 53) - 1024) / 1024.0f * 0.05f;
		if (i < QD)
			x[i] = (float)((int)(r >> 43) % 2001 - 1000) / 1000.0f;
	}
	/* a packed matrix's row groups lie one after the other: the packed
	 * block of rows, copied, is the packed matrix of the copies */
	const int packed = hs__pack_supported(type, rows, QD);
	hs__quantize_row_ref(type, v, packed ? plain : w, (size_t)rows_q * QD);
	if (packed)
		hs__pack_matrix(type, rows_q, QD, plain, rb, w);
	for (int i = rows_q; i < rows; i += rows_q)
		memcpy(w + (size_t)i * rb, w, (size_t)rows_q * rb);
	double t_run = 0;
	int runs = 0;
	for (int step = -1; step < 3 || t_run < secs; step++) {
		struct hs_matmul_job job = { .ops = hs__kernels_best(), .dops = hs__dense_best(), .type = type,
					     .rows = rows, .cols = QD, .w = w, .row_bytes = rb, .packed = packed, .n = 1, .x = x,
					     .x_stride = QD, .y = y, .y_stride = (size_t)rows, .scratch = sc };
		double t0 = now_s();
		if ((rc = hs__matmul_run_omp(&job, threads)))
			goto out;
		if (step >= 0) { /* the first: thread start, page faults */
			t_run += now_s() - t0;
			runs++;
		}
	}
	*gbps = (double)wb * runs / t_run / 1e9;
out:
	if (w)
		hs__numa_free(w, wb);
	free(v);
	free(y);
	free(plain);
	free(sc);
	return rc;
}

/* ---- GPUs ------------------------------------------------------------------ */

static int measure_gpus(struct tune *tu, struct hs_profile *p, size_t bytes)
{
	int n = hs__cuda_probe();

	for (int d = 0; d < n; d++) {
		char bus[16] = "", name[64] = "";
		int gi = -1;
		hs__cuda_pci_bus_id(d, bus, sizeof bus);
		for (int i = 0; i < p->n_gpus; i++)
			if (strcmp(p->gpus[i].pci_bus_id, bus) == 0)
				gi = i;
		if (gi < 0) { /* a device hwloc did not list: keep what CUDA says */
			if (p->n_gpus >= HS_MAX_GPUS)
				continue;
			gi = p->n_gpus++;
			memset(&p->gpus[gi], 0, sizeof p->gpus[gi]);
			snprintf(p->gpus[gi].pci_bus_id, sizeof p->gpus[gi].pci_bus_id, "%s", bus);
		}
		struct hs_profile_gpu *g = &p->gpus[gi];
		g->cuda_index = d;
		if (!hs__cuda_name(d, name, sizeof name))
			snprintf(g->name, sizeof g->name, "%s", name);
		say(tu, "GPU %d (%s): memory and device bandwidth", d, g->name);
		if (hs__cuda_mem_info(d, &g->memory_free_bytes, &g->memory_total_bytes) ||
		    hs__cuda_mem_read_gbps(d, 4 * bytes, &g->device_memory_gbps))
			return -EIO;
		for (int j = 0; j < p->n_nodes; j++) {
			say(tu, "GPU %d: pinned copies from node %d", d, p->nodes[j].os_index);
			uint8_t *h = hs__numa_alloc_on(p->nodes[j].os_index, bytes);
			if (!h)
				return -ENOMEM;
			memset(h, 1, bytes); /* places the pages */
			int rc = hs__cuda_h2d_gbps(d, h, bytes, 1, &g->h2d_pinned_gbps[j]);
			if (!rc && (g->n_numa_nodes == 0 || g->numa_nodes[0] == p->nodes[j].os_index))
				rc = hs__cuda_h2d_gbps(d, h, bytes, 0, &g->h2d_pageable_gbps);
			hs__numa_free(h, bytes);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* ---- the profile ------------------------------------------------------------ */

static void machine_name(char *buf, size_t n)
{
	char host[64] = "?", model[96] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");

	gethostname(host, sizeof host - 1);
	if (f) {
		char line[256];
		while (fgets(line, sizeof line, f))
			if (strncmp(line, "model name", 10) == 0) {
				char *c = strchr(line, ':');
				if (c) {
					c += 1 + (c[1] == ' ');
					c[strcspn(c, "\n")] = 0;
					snprintf(model, sizeof model, "%s", c);
				}
				break;
			}
		fclose(f);
	}
	snprintf(buf, n, "%.40s (%.80s)", host, model[0] ? model : "unknown CPU");
}

/* The types a `types` argument of hs_profile_measure names, in typed[]'s
 * order; their count, or -EINVAL naming the first name it does not know. */
static int parse_types(const char *types, int out[N_TYPED])
{
	int n = 0, want[N_TYPED] = { 0 };

	if (!types || strcmp(types, "all") == 0) {
		memcpy(out, typed, sizeof typed);
		return N_TYPED;
	}
	if (strcmp(types, "none") == 0)
		return 0;
	for (const char *c = types; *c;) {
		size_t len = strcspn(c, ",");
		char name[16];
		int k = -1, ty;
		snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), c);
		ty = len < sizeof name ? hs__type_from_name(name) : -1;
		for (int i = 0; i < N_TYPED; i++)
			if (typed[i] == ty)
				k = i;
		if (k < 0 && ty != HS_TYPE_MXFP4)
			return hs__error(EINVAL,
					 "tune: type '%.*s' is not one the CPU kernels are measured on (all, none, or of: "
					 "mxfp4, q8_0, q6_K, q5_K, q4_K, q3_K, q2_K, iq4_xs, iq4_nl, q5_1, q5_0, q4_1, q4_0)",
					 (int)(len < 40 ? len : 40), c);
		if (k >= 0)
			want[k] = 1; /* mxfp4: its curve is always measured */
		c += len + (c[len] == ',');
	}
	for (int i = 0; i < N_TYPED; i++)
		if (want[i])
			out[n++] = typed[i];
	return n;
}

int hs_profile_measure(const hs_topology *t, enum hs_tune_level level, const char *types, hs_progress_fn progress,
		       void *ctx, struct hs_profile *p)
{
	struct tune tu = { t, progress, ctx, 0, 0 };
	/* read buffers, the typed layers and the dense matrices span 4x the
	 * last-level cache (default and thorough; quick keeps its small
	 * buffers): a stream that part of the cache holds reads faster than
	 * the weights of a whole model can */
	size_t bytes = level == HS_TUNE_QUICK	  ? 128u << 20
		       : level == HS_TUNE_DEFAULT ? hs__past_cache_bytes(512u << 20)
						  : hs__past_cache_bytes(1024u << 20);
	double ksecs = level == HS_TUNE_QUICK ? 0.3 : level == HS_TUNE_DEFAULT ? 1.0 : 3.0;
	const size_t mx_expert = hs__expert_pack_layout1(HS_TYPE_MXFP4, KD, KF, 1).bytes;
	int n_exp = level == HS_TUNE_QUICK ? 16 : (int)((bytes + mx_expert - 1) / mx_expert);
	int rc;

	HS_NEED(t, -EINVAL);
	HS_NEED(p, -EINVAL);
	if ((unsigned)level > HS_TUNE_THOROUGH)
		return hs__error(EINVAL, "tune: level %d (HS_TUNE_QUICK %d .. HS_TUNE_THOROUGH %d)", (int)level,
				 HS_TUNE_QUICK, HS_TUNE_THOROUGH);
	const size_t typed_bytes = bytes > (256u << 20) ? bytes : 256u << 20;
	if (n_exp < 32)
		n_exp = 32;
	if (n_exp > SYNTH_MAX)
		n_exp = SYNTH_MAX;
	int ty[N_TYPED], n_ty = parse_types(types, ty);
	if (n_ty < 0)
		return n_ty;
	if (!hs_topology_is_this_system(t))
		return hs__error(EINVAL, "tune: the topology is %s, not this machine: tune measures only this machine",
				 hs_topology_source(t));
	if ((rc = hs_profile_from_topology(t, p)))
		return rc;
	snprintf(p->source, sizeof p->source, "measured");
	machine_name(p->machine, sizeof p->machine);
	time_t now = time(NULL);
	strftime(p->created, sizeof p->created, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
	snprintf(p->note, sizeof p->note, "measured by hotset %s tune (%s)", hs_version(),
		 level == HS_TUNE_QUICK ? "quick" : level == HS_TUNE_DEFAULT ? "default" : "thorough");

	/* the thread counts of the kernel curve on each node */
	int counts[HS_MAX_NODES][HS_MAX_KSPEED], n_counts[HS_MAX_NODES];
	for (int i = 0; i < p->n_nodes; i++) {
		int cores = p->nodes[i].n_cores > 0 ? p->nodes[i].n_cores : 1, c = 0;
		if (level == HS_TUNE_QUICK)
			counts[i][c++] = cores;
		else if (level == HS_TUNE_DEFAULT) {
			counts[i][c++] = 1;
			if (cores > 1)
				counts[i][c++] = cores;
		} else {
			for (int th = 1; th < cores && c < HS_MAX_KSPEED - 1; th *= 2)
				counts[i][c++] = th;
			counts[i][c++] = cores;
		}
		n_counts[i] = c;
		tu.steps += p->n_nodes + c + n_ty;
	}
	tu.steps += hs__cuda_probe() * (1 + p->n_nodes);

	for (int i = 0; i < p->n_nodes && !rc; i++) {
		const struct hs_numa_node *node = hs_topology_node(t, i);
		int threads = p->nodes[i].n_cores > 0 ? p->nodes[i].n_cores : 1;
		if ((rc = hs__numa_available(node->os_index, &p->nodes[i].available_bytes)))
			break;
		if (p->nodes[i].available_bytes > p->nodes[i].memory_bytes)
			p->nodes[i].available_bytes = p->nodes[i].memory_bytes;
		if ((rc = bind_team(node, threads)))
			break;
		for (int j = 0; j < p->n_nodes; j++) {
			say(&tu, "node %d: read bandwidth from node %d's memory", node->os_index, p->nodes[j].os_index);
			uint64_t *buf = hs__numa_alloc_on(p->nodes[j].os_index, bytes);
			if (!buf) {
				rc = -ENOMEM;
				break;
			}
			memset(buf, 0x5a, bytes); /* places the pages */
			p->nodes[i].read_gbps[j] = read_bw(buf, bytes / 8, threads, 6) / 1e9;
			hs__numa_free(buf, bytes);
		}
		struct synth s;
		if (!rc && !(rc = synth_make(&s, node->os_index, n_exp))) {
			for (int c = 0; c < n_counts[i] && !rc; c++) {
				say(&tu, "node %d: CPU expert kernel, %d thread%s", node->os_index, counts[i][c],
				    counts[i][c] == 1 ? "" : "s");
				rc = bind_team(node, counts[i][c]);
				if (!rc)
					rc = kernel_speed(&s, counts[i][c], ksecs, &p->nodes[i].kernel[c]);
			}
			p->nodes[i].n_kernel = n_counts[i];
			hs__numa_free(s.mem, s.bytes);
			if (!rc) /* the dense product with all cores, as for the other types */
				rc = dense_speed(HS_TYPE_MXFP4, node->os_index, threads, typed_bytes,
						 ksecs, &p->nodes[i].kernel[n_counts[i] - 1].dense_gbps);
		}
		/* the other types with all the node's cores: what the planner prices a
		 * model of that type with (the MXFP4 curve says how it scales) */
		for (int k = 0; k < n_ty && !rc && p->nodes[i].n_kernel < HS_MAX_KSPEED; k++) {
			say(&tu, "node %d: CPU expert kernel, %s, %d thread%s", node->os_index, hs__type_name(ty[k]),
			    threads, threads == 1 ? "" : "s");
			if ((rc = bind_team(node, threads)) ||
			    (rc = synth_make_typed(&s, node->os_index, ty[k], typed_bytes)))
				break;
			struct hs_kernel_speed *ks = &p->nodes[i].kernel[p->nodes[i].n_kernel];
			rc = kernel_speed(&s, threads, ksecs, ks);
			hs__numa_free(s.mem, s.bytes);
			if (!rc)
				rc = dense_speed(ty[k], node->os_index, threads, typed_bytes,
						 ksecs, &ks->dense_gbps);
			p->nodes[i].n_kernel += !rc;
		}
		unbind_team(threads);
	}
	if (!rc)
		rc = measure_gpus(&tu, p, bytes / 2);
	hs__unbind_thread();
	return rc;
}
