/* `hotset tune`: measures the facts the planner needs on this machine.
 * Per NUMA node: read bandwidth of its cores from every node's memory and
 * the CPU expert kernel's speed per thread count; per CUDA device: memory,
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
 * best of reps passes.  The xor keeps the loads; four accumulators keep
 * them independent. */
static double read_bw(const uint64_t *buf, size_t words, int threads, int reps)
{
	const struct hs_dense_ops *dops = hs__dense_best(); /* the widest loads this CPU has */
	double best = 0;

	for (int r = 0; r < reps; r++) {
		uint64_t total = 0;
		double t0 = now_s();
#pragma omp parallel num_threads(threads) reduction(^ : total)
		{
			int ith = omp_get_thread_num(), nth = omp_get_num_threads();
			size_t lo = words * ith / nth / 16 * 16, hi = words * (ith + 1) / nth / 16 * 16;
			total ^= dops->xor_read(buf + lo, (hi - lo) * 8);
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
	bytes = (bytes + 127) & ~(size_t)127;
	uint64_t *buf = aligned_alloc(64, bytes);
	if (!buf)
		return 0;
	memset(buf, 0x5a, bytes); /* places the pages */
	double b = read_bw(buf, bytes / 8, threads, reps);
	free(buf);
	return b;
}

/* ---- the CPU kernel on a synthetic gpt-oss-120b layer ------------------- */

#define KD 2880
#define KF 2880
#define KK 4

struct synth {
	struct hs_moe_layer l;  /* packed blocks in mem, as the runtime's host copy */
	uint8_t *mem;
	int32_t slot_of[512];
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
		synth_fill(b + pack.gate, (size_t)KF * rin, &seed);
		synth_fill(b + pack.up, (size_t)KF * rin, &seed);
		synth_fill(b + pack.down, (size_t)KD * rout, &seed);
		s->slot_of[e] = e;
	}
	hs__moe_layer_flat(&s->l, &hs__arch_gpt_oss, HS_TYPE_MXFP4, KD, KF, n_experts, KK, NULL, NULL);
	s->l.pool = s->mem;
	s->l.pool_stride = pack.bytes;
	s->l.slot_of = s->slot_of;
	s->l.pack = pack;
	return 0;
}

/* Decode: steps of one token with KK experts, walking through the experts
 * in order so that no step finds its weights in the cache.  Prefill: 512
 * tokens with random ids.  Returns bytes/s and FLOP/s. */
static int kernel_speed(struct synth *s, int threads, double secs, struct hs_kernel_speed *out)
{
	const int E = s->l.n_experts, NP = 512;
	float *x = malloc(sizeof *x * (size_t)NP * KD), *y = malloc(sizeof *y * (size_t)NP * KD);
	float *w = malloc(sizeof *w * NP * KK);
	int32_t *ids = malloc(sizeof *ids * NP * KK);
	size_t scratch = hs__ffn_scratch_bytes(&s->l, NP);
	void *sc = aligned_alloc(64, (scratch + 63) & ~(size_t)63);
	uint64_t r = 12345;
	int rc = 0;

	if (!x || !y || !w || !ids || !sc) {
		rc = hs__error(ENOMEM, "tune: no memory for the kernel test");
		goto out_free;
	}
	for (int i = 0; i < NP * KD; i++) {
		r = r * 6364136223846793005ull + 1;
		x[i] = (float)((int)(r >> 53) - 512) / 512.0f;
	}
	for (int i = 0; i < NP * KK; i++)
		w[i] = 0.25f;
	out->threads = threads;
	for (int phase = 0; phase < 2; phase++) {
		int n = phase ? NP : 1;
		double t_run = 0, work = 0;
		for (int step = -1; step < 3 || t_run < secs; step++) {
			for (int tok = 0; tok < n; tok++)
				for (int j = 0; j < KK; j++) {
					r = r * 6364136223846793005ull + 1442695040888963407ull;
					/* decode: experts step*KK.. in turn; prefill: random, distinct per token */
					int e = phase ? (int)((r >> 33) % (uint64_t)(E / KK)) * KK + j
						      : ((step + 1) * KK + j) % E;
					ids[tok * KK + j] = e;
				}
			struct hs_ffn_job job = { .layer = &s->l, .ops = hs__kernels_best(), .n = n, .x = x,
						  .ids = ids, .weights = w, .y = y, .scratch = sc };
			memset(y, 0, sizeof *y * (size_t)n * KD);
			double t0 = now_s();
			if ((rc = hs__ffn_run_omp(&job, threads)))
				goto out_free;
			double t = now_s() - t0;
			if (step < 0)
				continue; /* warm-up: thread start, page faults */
			t_run += t;
			work += phase ? 2.0 * 3 * KD * KF * (double)n * KK : (double)KK * s->expert_bytes;
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

int hs_profile_measure(const hs_topology *t, enum hs_tune_level level, hs_progress_fn progress, void *ctx,
		       struct hs_profile *p)
{
	struct tune tu = { t, progress, ctx, 0, 0 };
	size_t bytes = level == HS_TUNE_QUICK ? 128u << 20 : level == HS_TUNE_DEFAULT ? 512u << 20 : 1024u << 20;
	double ksecs = level == HS_TUNE_QUICK ? 0.3 : level == HS_TUNE_DEFAULT ? 1.0 : 3.0;
	int n_exp = level == HS_TUNE_QUICK ? 16 : 32; /* 211-422 MB: far past any cache */
	int rc;

	HS_NEED(t, -EINVAL);
	HS_NEED(p, -EINVAL);
	if ((unsigned)level > HS_TUNE_THOROUGH)
		return hs__error(EINVAL, "tune: level %d (HS_TUNE_QUICK %d .. HS_TUNE_THOROUGH %d)", (int)level,
				 HS_TUNE_QUICK, HS_TUNE_THOROUGH);
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
		tu.steps += p->n_nodes + c;
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
		}
		unbind_team(threads);
	}
	if (!rc)
		rc = measure_gpus(&tu, p, bytes / 2);
	hs__unbind_thread();
	return rc;
}
