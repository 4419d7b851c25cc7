/* The planner: model shape + machine profile + budgets (+ routing
 * statistics) -> where every expert lives, which mode each phase uses, and
 * the predicted speed and memory.  Pure code: no hardware is touched, so
 * it runs the same for this machine and for a profile of another one.
 * The cost model is DESIGN.md §5; docs/cost-model.md explains every figure. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "planner/planner.h"
#include "base/error.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

/* Figures the planner assumes when neither the profile nor the options give
 * them.  Each use is written into plan->assumptions. */
#define ASSUME_READ_GBPS 20.0      /* host read bandwidth of one node */
#define ASSUME_KERNEL_SHARE 0.8    /* CPU kernel speed / read bandwidth (the kernel target) */
#define ASSUME_CPU_GFLOPS_CORE 50.0 /* AVX2 expert GEMM per core at 512 tokens */
#define ASSUME_PCIE_SHARE 0.8      /* pinned copies / link bandwidth */
#define ASSUME_PCIE_GBPS 12.0      /* pinned copies when the link is unknown */
#define ASSUME_GPU_MEM_GBPS 500.0
#define ASSUME_GPU_TFLOPS 50.0
#define REMOTE_READ_SHARE 0.5      /* remote / local read bandwidth when unmeasured */
#define ASSUME_DISK_GBPS 2.0       /* page-cache refills from an NVMe disk, for host experts over the RAM budget */

/* Fixed costs of the cost model (see docs/cost-model.md). */
#define T_SYNC_S 25e-6             /* CPU<->GPU hand-off of one host layer (x up, y down, events) */
#define T_LAUNCH_S 5e-6            /* one GPU expert launch */
#define VRAM_MARGIN (256.0 * MiB)
#define VRAM_WORKSPACE (512.0 * MiB) /* attention and compute scratch of the non-expert part */
#define RAM_MARGIN_MIN (1.0 * GiB)
#define RAM_MARGIN_SHARE 0.05
#define STAGING_PER_K 2            /* staging slots per expert of k (the runtime's, and their VRAM; reused
				      within a step, so they do not limit how many experts are streamed) */
#define MIN_SLOTS_PER_K 2          /* a layer's cache needs >= 2k slots to help */
#define DEFAULT_TOP 14             /* default skew: the 14 most used of 128 ... */
#define DEFAULT_TOP_SHARE 0.54     /* ... take 54% of the slots (published 54-68%, low end) */

const char *hs_placement_name(enum hs_placement p)
{
	switch (p) {
	case HS_PLACEMENT_GPU: return "gpu";
	case HS_PLACEMENT_HOST: return "host";
	case HS_PLACEMENT_HOST_CACHE: return "host+cache";
	}
	return "?";
}

const char *hs_mode_name(enum hs_mode m)
{
	switch (m) {
	case HS_MODE_NONE: return "none";
	case HS_MODE_CPU_COMPUTE: return "cpu-compute";
	case HS_MODE_PCIE_STREAM: return "pcie-stream";
	case HS_MODE_HYBRID: return "hybrid";
	}
	return "?";
}

struct ctx {
	const struct hs_model_desc *m;
	const struct hs_profile *pf;
	const struct hs_profile_gpu *g; /* NULL: no GPU */
	struct hs_plan *out;
	int L, E, k;
	double S, P_e;                  /* bytes and parameters of one expert */
	double slot_bytes;
	int cpu_node;                   /* profile index */
	double Br[HS_MAX_NODES];        /* node j's cores reading node j's memory */
	double Bc[HS_MAX_NODES];        /* CPU kernel on node j */
	double Fc[HS_MAX_NODES];        /* CPU GFLOP/s on node j (as FLOP/s) */
	double Bp[HS_MAX_NODES];        /* pinned copies from node j */
	double Bg, Fg;                  /* GPU memory B/s, GPU FLOP/s */
	double *cum;                    /* [L][E + 1] cumulative routing share of the s hottest */
	int *order;                     /* layers in the order they go to the host */
	double vram_fixed, vram_budget;
	double ram_budget[HS_MAX_NODES];
};

static void assume(struct hs_plan *p, const char *fmt, double v)
{
	char buf[128];
	size_t n = strlen(p->assumptions);

	snprintf(buf, sizeof buf, fmt, v);
	if (strstr(p->assumptions, buf))
		return;
	snprintf(p->assumptions + n, sizeof p->assumptions - n, "%s%s", n ? "; " : "", buf);
}

static void warn(struct hs_plan *p, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn(struct hs_plan *p, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (p->n_warnings >= HS_MAX_WARNINGS)
		return;
	struct hs_plan_warning *w = &p->warnings[p->n_warnings++];
	snprintf(w->code, sizeof w->code, "%s", code);
	va_start(ap, fmt);
	vsnprintf(w->message, sizeof w->message, fmt, ap);
	va_end(ap);
}

static int node_index(const struct hs_profile *pf, int os_index)
{
	for (int i = 0; i < pf->n_nodes; i++)
		if (pf->nodes[i].os_index == os_index)
			return i;
	return -1;
}

/* What a profile is named in messages: one made from a topology alone
 * (an hwloc file, or this machine unmeasured) is not a profile file. */
static const char *pf_kind(const struct hs_profile *pf)
{
	return strcmp(pf->source, "topology") == 0 ? "topology" : "profile";
}

/* The kernel speed point with the most threads not above `threads`. */
static const struct hs_kernel_speed *kernel_at(const struct hs_profile_node *n, int threads)
{
	const struct hs_kernel_speed *best = NULL;
	for (int i = 0; i < n->n_kernel; i++)
		if (n->kernel[i].threads <= threads && (!best || n->kernel[i].threads > best->threads))
			best = &n->kernel[i];
	return best;
}

/* Bandwidths and speeds for the cost model, with the assumptions named. */
static void figures(struct ctx *c)
{
	const struct hs_profile *pf = c->pf;
	struct hs_plan *p = c->out;

	for (int j = 0; j < pf->n_nodes; j++) {
		const struct hs_profile_node *n = &pf->nodes[j];
		int cores = n->n_cores > 0 ? n->n_cores : 1;
		c->Br[j] = n->read_gbps[j] * 1e9;
		if (c->Br[j] <= 0) {
			c->Br[j] = ASSUME_READ_GBPS * 1e9;
			assume(p, "host read bandwidth %.0f GB/s per node", ASSUME_READ_GBPS);
		}
		const struct hs_kernel_speed *ks = kernel_at(n, cores);
		c->Bc[j] = ks && ks->decode_gbps > 0 ? ks->decode_gbps * 1e9 : 0;
		if (c->Bc[j] <= 0) {
			c->Bc[j] = ASSUME_KERNEL_SHARE * c->Br[j];
			assume(p, "CPU kernel at %.2f of read bandwidth", ASSUME_KERNEL_SHARE);
		}
		if (c->Bc[j] > c->Br[j]) /* a kernel cannot read faster than memory */
			c->Bc[j] = c->Br[j];
		c->Fc[j] = ks && ks->prefill_gflops > 0 ? ks->prefill_gflops * 1e9 : 0;
		if (c->Fc[j] <= 0) {
			c->Fc[j] = ASSUME_CPU_GFLOPS_CORE * 1e9 * cores;
			assume(p, "CPU prefill %.0f GFLOP/s per core", ASSUME_CPU_GFLOPS_CORE);
		}
	}
	if (!c->g)
		return;
	for (int j = 0; j < pf->n_nodes; j++) {
		c->Bp[j] = c->g->h2d_pinned_gbps[j] * 1e9;
		if (c->Bp[j] > 0)
			continue;
		if (c->g->link_gbps > 0) {
			c->Bp[j] = ASSUME_PCIE_SHARE * c->g->link_gbps * 1e9;
			assume(p, "pinned copies at %.2f of the PCIe link", ASSUME_PCIE_SHARE);
		} else {
			c->Bp[j] = ASSUME_PCIE_GBPS * 1e9;
			assume(p, "pinned copies %.0f GB/s", ASSUME_PCIE_GBPS);
		}
		int local = 0;
		for (int i = 0; i < c->g->n_numa_nodes; i++)
			local |= c->g->numa_nodes[i] == pf->nodes[j].os_index;
		if (!local && c->g->n_numa_nodes > 0)
			c->Bp[j] *= REMOTE_READ_SHARE;
	}
	c->Bg = c->g->device_memory_gbps * 1e9;
	if (c->Bg <= 0) {
		c->Bg = ASSUME_GPU_MEM_GBPS * 1e9;
		assume(p, "GPU memory bandwidth %.0f GB/s", ASSUME_GPU_MEM_GBPS);
	}
	c->Fg = c->g->prefill_tflops * 1e12;
	if (c->Fg <= 0) {
		c->Fg = ASSUME_GPU_TFLOPS * 1e12;
		assume(p, "GPU expert GEMM %.0f TFLOP/s", ASSUME_GPU_TFLOPS);
	}
}

double hs__zipf_alpha(int n, int top_n, double share)
{
	double lo = 0, hi = 8;
	for (int it = 0; it < 60; it++) { /* bisection: the share grows with the exponent */
		double a = (lo + hi) / 2, top = 0, all = 0;
		for (int i = 0; i < n; i++) {
			double v = pow(i + 1.0, -a);
			all += v;
			top += i < top_n ? v : 0;
		}
		if (top / all < share)
			lo = a;
		else
			hi = a;
	}
	return (lo + hi) / 2;
}

static int cmp_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x < y) - (x > y);
}

/* Cumulative hit curves: cum[l][s] = share of layer l's routing slots that
 * go to its s most used experts (what s well-filled slots catch). */
static int curves(struct ctx *c, const struct hs_plan_opts *o)
{
	int L = c->L, E = c->E;
	double *f = malloc(sizeof *f * E);

	c->cum = malloc(sizeof *c->cum * (size_t)L * (E + 1));
	if (!f || !c->cum) {
		free(f);
		return hs__error(ENOMEM, "planner: no memory for %d x %d hit curves", L, E);
	}
	const double alpha = o->freq ? 1.0 : hs__zipf_alpha(128, DEFAULT_TOP, DEFAULT_TOP_SHARE);
	for (int l = 0; l < L; l++) {
		double sum = 0;
		for (int e = 0; e < E; e++) {
			f[e] = o->freq ? (double)o->freq[(size_t)l * E + e] : pow(e + 1.0, -alpha);
			if (!(f[e] >= 0)) /* negative or NaN */
				f[e] = 0;
			sum += f[e];
		}
		if (sum <= 0) { /* a layer never routed: count it as uniform */
			for (int e = 0; e < E; e++)
				f[e] = 1;
			sum = E;
		}
		qsort(f, E, sizeof *f, cmp_desc);
		double *cl = c->cum + (size_t)l * (E + 1);
		cl[0] = 0;
		for (int e = 0; e < E; e++)
			cl[e + 1] = cl[e] + f[e] / sum;
		cl[E] = 1;
	}
	free(f);
	return 0;
}

/* ---- per-layer costs ------------------------------------------------------ */

/* Distinct experts a batch of U tokens touches among n equally likely
 * ones with `per_token` picks each. */
static double touched(double n, double per_token, double U)
{
	if (n <= 0 || per_token <= 0)
		return 0;
	double p = per_token / n;
	if (p >= 1)
		return n;
	return n * (1 - pow(1 - p, U));
}

double hs__hybrid_share(double a, double g0, double g, double p)
{
	/* (1 - q) a falls with q, max(g0 + q g, q p) rises: they meet at the
	 * smaller of the two crossings */
	if (a <= g0 || a <= 0)
		return 0;
	double q1 = (a - g0) / (a + g), q2 = p > 0 ? a / (a + p) : 1;
	double q = fmin(q1, q2);
	return q < 0 ? 0 : q > 1 ? 1 : q;
}

/* x / rate, with rate <= 0 meaning "not measured, not limiting" (a
 * compute rate nobody measured at a batch) */
static double per(double x, double rate)
{
	return rate > 0 ? x / rate : 0;
}

void hs__layer_cost(const struct hs__rates *r, const struct hs__layer_step *w, struct hs__cost *out)
{
	const double T_sync = r->sync_s > 0 ? r->sync_s : T_SYNC_S;
	const double pairs = w->U * w->k, h = w->h < 0 ? 0 : w->h > 1 ? 1 : w->h;
	/* distinct experts read: the misses from host memory, the hits from the device */
	const double Dm = touched(w->E - w->slots, w->k * (1 - h), w->U);
	const double Dh = touched(w->slots, w->k * h, w->U);
	/* each lane: the longer of reading its experts and computing its pairs */
	const double a = fmax(Dm * w->S / r->cpu_Bps, per(w->flop_pair * pairs * (1 - h), r->cpu_flops)) + w->disk_s;
	memset(out, 0, sizeof *out);
	out->miss_experts = Dm;
	out->hit_experts = Dh;
	if (!r->gpu) {
		out->t[HS_MODE_CPU_COMPUTE] = a + r->step_s;
		out->t[HS_MODE_PCIE_STREAM] = out->t[HS_MODE_HYBRID] = INFINITY;
		out->bound[HS_MODE_CPU_COMPUTE] = "CPU compute";
		return;
	}
	const double g0 = fmax(Dh * w->S / r->gpu_Bps, per(w->flop_pair * pairs * h, r->gpu_flops));
	const double g = fmax(Dm * w->S / r->gpu_Bps, per(w->flop_pair * pairs * (1 - h), r->gpu_flops));
	const double p = Dm * w->S / r->pcie_Bps + w->disk_s;
	/* a streamed expert is computed right behind its copy: the last one's
	 * compute (or the first one's copy) is not hidden */
	const double tail = Dm > 0 ? fmin(g, p) / fmax(Dm, 1) : 0;

	/* admissions: copies on the copy lane in every mode */
	const double adm = w->admit_experts * w->S / r->pcie_Bps;
	/* a device on one shared core (the sim) runs its copies and kernels in turn */
	const int serial = r->device_cores == 1;
	/* the hand-off (x up, y down, events) when the device has work: it
	 * delays the device side, the CPU works meanwhile */
	const double sync0 = Dh > 0 ? T_sync : 0;
	const double dev0 = serial ? sync0 + g0 + adm : fmax(sync0 + g0, adm);
	out->t[HS_MODE_CPU_COMPUTE] = fmax(a, dev0);
	out->bound[HS_MODE_CPU_COMPUTE] = a >= dev0 ? "CPU compute" : serial || sync0 + g0 >= adm ? "GPU" : "PCIe";

	/* at most max_streamed experts a step (when the staging slots are all
	 * taken by hits, none); the others stay on the CPU, in stream mode too */
	const double qmax = w->max_streamed < 0			    ? 0
			    : w->max_streamed > 0 && Dm > w->max_streamed ? w->max_streamed / Dm
									  : 1;
	/* hybrid: the best of the balanced share (which ignores the tail) and
	 * the two ends; the CPU and the copies read the same DRAM, so together
	 * they cannot pass its read bandwidth (stream mode is q = qmax) */
	const double dram = Dm * w->S / r->read_Bps;
	const double q_bal = serial ? hs__hybrid_share(a, g0 + adm, g + p, 0) : hs__hybrid_share(a, g0, g, p);
	const double qs[4] = { qmax, fmin(q_bal, qmax), 0, qmax };
	out->t[HS_MODE_HYBRID] = INFINITY;
	for (int i = 0; i < 4; i++) {
		const double q = qs[i], cpu = (1 - q) * a;
		const double sync = Dh > 0 || q > 0 ? T_sync : 0;
		double gpu = sync + g0 + q * g + (q > 0 && g >= p ? tail : 0);
		double copy = adm + q * p + (q > 0 && g < p ? tail : 0);
		if (serial)
			gpu = copy = sync + g0 + q * g + adm + q * p;
		const double th = fmax(fmax(cpu, gpu), fmax(copy, q < 1 ? dram : 0));
		const char *bound = th == dram && dram > 0 && q < 1 ? "host bandwidth"
				    : th == cpu		       ? (q > 0 ? "CPU compute + PCIe" : "CPU compute")
				    : serial		       ? "device (one shared core)"
				    : th == copy	       ? "PCIe"
							       : "GPU";
		if (i == 0) { /* stream mode */
			out->t[HS_MODE_PCIE_STREAM] = th;
			out->bound[HS_MODE_PCIE_STREAM] = bound;
			continue;
		}
		if (th >= out->t[HS_MODE_HYBRID])
			continue;
		out->q = q;
		out->t[HS_MODE_HYBRID] = th;
		out->bound[HS_MODE_HYBRID] = bound;
	}
	for (int m = HS_MODE_CPU_COMPUTE; m <= HS_MODE_HYBRID; m++)
		out->t[m] += r->step_s;
}

static struct hs__rates rates_of(const struct ctx *c, int j)
{
	struct hs__rates r = { .cpu_Bps = c->Bc[j], .cpu_flops = c->Fc[j], .read_Bps = c->Br[j], .gpu = c->g != NULL };
	if (c->g) {
		r.pcie_Bps = c->Bp[j];
		r.gpu_Bps = c->Bg;
		r.gpu_flops = c->Fg;
	}
	return r;
}

/* Costs of a host layer on node j for U tokens with hit rate h.  A share
 * `thrash` of the node's host experts is over its RAM budget: the page
 * cache evicts them, so that share of the reads comes from disk. */
static void host_cost(const struct ctx *c, int j, double h, int slots, double U, double thrash, struct hs__cost *r)
{
	struct hs__rates rt = rates_of(c, j);
	struct hs__layer_step w = { .S = c->S, .flop_pair = 2 * c->P_e, .E = c->E, .k = c->k, .slots = slots,
				    .h = h, .U = U };
	if (thrash > 0)
		w.disk_s = touched(c->E - slots, c->k * (1 - h), U) * c->S * thrash / (ASSUME_DISK_GBPS * 1e9);
	hs__layer_cost(&rt, &w, r);
}

static double gpu_decode(const struct ctx *c)
{
	return c->k * c->S / c->Bg + T_LAUNCH_S;
}

/* Prefill time of one host layer for U tokens; *mode and *q say the choice. */
static double host_prefill(const struct ctx *c, int j, double h, int slots, double U, enum hs_mode *mode,
			   double *q)
{
	struct hs__cost r;
	host_cost(c, j, h, slots, U, 0, &r);
	*mode = HS_MODE_CPU_COMPUTE;
	*q = 0;
	double best = r.t[HS_MODE_CPU_COMPUTE];
	if (r.t[HS_MODE_PCIE_STREAM] < best) {
		best = r.t[HS_MODE_PCIE_STREAM];
		*mode = HS_MODE_PCIE_STREAM;
		*q = 1;
	}
	if (r.t[HS_MODE_HYBRID] < best) {
		best = r.t[HS_MODE_HYBRID];
		*mode = HS_MODE_HYBRID;
		*q = r.q;
	}
	return best;
}

static double gpu_prefill(const struct ctx *c, double U)
{
	double bytes = touched(c->E, c->k, U) * c->S;
	return fmax(bytes / c->Bg, 2 * c->P_e * U * c->k / c->Fg) + T_LAUNCH_S;
}

/* ---- memory --------------------------------------------------------------- */

static double kv_bytes(const struct hs_model_desc *m, const struct hs_plan_opts *o)
{
	if (m->n_head_kv <= 0 || m->head_dim <= 0)
		return 0;
	double elem = o->kv_type == HS_KV_Q8_0 ? 34.0 / 32.0 : 2.0;
	double per_tok = 2.0 * m->n_head_kv * m->head_dim * elem; /* K and V */
	double total = 0;
	for (int i = 0; i < m->n_layers; i++) {
		int full = m->swa_window <= 0 || m->swa_every <= 0 || i % m->swa_every == m->swa_every - 1;
		double toks = full ? o->ctx : fmin(o->ctx, (double)m->swa_window + o->ubatch);
		total += per_tok * toks;
	}
	return total;
}

/* ---- one candidate: n host layers ---------------------------------------- */

struct cand {
	int n_host;
	int host[HS_MAX_LAYERS];      /* 1 = host layer (index = MoE layer) */
	int node[HS_MAX_LAYERS];      /* profile node of a host layer */
	int slots[HS_MAX_LAYERS];
	double t_mode[4];             /* whole decode per mode */
	double t_best;
	enum hs_mode mode;
	double ram_need[HS_MAX_NODES];
	double thrash[HS_MAX_NODES];  /* share of a node's host experts over its budget */
	int ram_over, vram_over, cache_small, slots_left;
	double vram_used;
};

static double layer_decode(const struct ctx *c, const struct cand *k, int l, enum hs_mode mode)
{
	if (!k->host[l])
		return gpu_decode(c);
	struct hs__cost r;
	host_cost(c, k->node[l], c->cum[(size_t)l * (c->E + 1) + k->slots[l]], k->slots[l], 1, k->thrash[k->node[l]],
		  &r);
	return r.t[mode];
}

static enum hs_mode best_mode(const struct ctx *c, const struct cand *k, double t[4])
{
	enum hs_mode best = HS_MODE_CPU_COMPUTE;
	t[0] = INFINITY;
	for (int md = HS_MODE_CPU_COMPUTE; md <= HS_MODE_HYBRID; md++) {
		t[md] = 0;
		for (int l = 0; l < c->L; l++)
			t[md] += layer_decode(c, k, l, md);
		if (t[md] < t[best])
			best = md;
	}
	return best;
}

struct slot_gain {
	double f;
	int l;
};

static int cmp_gain(const void *a, const void *b)
{
	const struct slot_gain *x = a, *y = b;
	if (x->f != y->f)
		return (x->f < y->f) - (x->f > y->f);
	return x->l - y->l;
}

/* Builds candidate k with n host layers: assigns nodes, checks memory and
 * gives the VRAM left as cache slots to the most used experts of the host
 * layers (slots per layer need not be equal).  Returns 0, or -ENOMEM. */
static int build(const struct ctx *c, const struct hs_plan_opts *o, int n, struct cand *k)
{
	const double LE = c->E * c->S;
	memset(k, 0, sizeof *k);
	k->n_host = n;
	for (int i = 0; i < n; i++)
		k->host[c->order[i]] = 1;

	/* host experts: the CPU node first, then the others by read bandwidth
	 * from that node (whole layers; a layer is never split) */
	double left[HS_MAX_NODES];
	for (int j = 0; j < c->pf->n_nodes; j++)
		left[j] = c->ram_budget[j];
	for (int i = 0; i < n; i++) {
		int l = c->order[i], best = c->cpu_node;
		if (left[best] < LE) {
			for (int j = 0; j < c->pf->n_nodes; j++)
				if (j != c->cpu_node && left[j] >= LE &&
				    (best == c->cpu_node || left[best] < LE ||
				     c->pf->nodes[c->cpu_node].read_gbps[j] > c->pf->nodes[c->cpu_node].read_gbps[best]))
					best = j;
		}
		if (left[best] < LE) { /* nowhere: stays on the CPU node, over budget */
			best = c->cpu_node;
			k->ram_over = 1;
		}
		left[best] -= LE;
		k->node[l] = best;
		k->ram_need[best] += LE;
	}
	/* over the budget the pages of host experts get evicted and read back
	 * from disk; a layer sweep over a set larger than memory misses on
	 * every page (the LRU cliff), so every read of that node is priced at
	 * disk speed: pessimistic, and never chosen while anything fits */
	for (int j = 0; j < c->pf->n_nodes; j++)
		if (k->ram_need[j] > c->ram_budget[j])
			k->thrash[j] = 1;

	/* VRAM: fixed part + resident layers + staging for streamed experts */
	double staging = c->g && n > 0 ? (double)STAGING_PER_K * c->k * c->slot_bytes : 0;
	k->vram_used = c->g ? c->vram_fixed + (c->L - n) * c->E * c->slot_bytes + staging : 0;
	if (c->g && k->vram_used > c->vram_budget)
		k->vram_over = 1;

	/* cache slots: every (layer, rank) pair by its routing share, the
	 * largest first, as many as the VRAM left holds */
	int max_slots = 0;
	if (c->g && !k->vram_over && n > 0 && !o->no_cache)
		max_slots = (int)fmin((c->vram_budget - k->vram_used) / c->slot_bytes, (double)n * c->E);
	k->slots_left = max_slots;
	if (max_slots > 0) {
		struct slot_gain *gs = malloc(sizeof *gs * (size_t)n * c->E);
		if (!gs)
			return hs__error(ENOMEM, "planner: no memory for the slot search");
		int ng = 0;
		for (int i = 0; i < n; i++) {
			int l = c->order[i];
			const double *cl = c->cum + (size_t)l * (c->E + 1);
			for (int e = 0; e < c->E; e++)
				gs[ng++] = (struct slot_gain){ cl[e + 1] - cl[e], l };
		}
		qsort(gs, ng, sizeof *gs, cmp_gain);
		for (int i = 0; i < max_slots && i < ng; i++)
			k->slots[gs[i].l]++;
		free(gs);
	}
	/* per layer keep the best slot count up to what it was given: below 2k
	 * slots a cache churns more than it saves, and past the point where the
	 * GPU side becomes the longer one more slots only add time */
	for (int l = 0; l < c->L; l++) {
		if (!k->host[l] || k->slots[l] == 0)
			continue;
		int given = k->slots[l], best_s = 0;
		double best_t = INFINITY;
		for (int s = 0; s <= given; s++) {
			if (s > 0 && s < MIN_SLOTS_PER_K * c->k)
				continue;
			struct hs__cost r;
			host_cost(c, k->node[l], c->cum[(size_t)l * (c->E + 1) + s], s, 1, k->thrash[k->node[l]], &r);
			double t = fmin(r.t[HS_MODE_CPU_COMPUTE], r.t[HS_MODE_HYBRID]);
			if (t < best_t - 1e-12) {
				best_t = t;
				best_s = s;
			}
		}
		if (best_s == 0 && given > 0)
			k->cache_small = 1;
		k->slots[l] = best_s;
		k->slots_left -= best_s;
	}
	k->mode = best_mode(c, k, k->t_mode);
	k->t_best = k->t_mode[k->mode];
	return 0;
}

/* ---- the plan ------------------------------------------------------------ */

static void fill_plan(const struct ctx *c, const struct hs_plan_opts *o, const struct cand *k)
{
	struct hs_plan *p = c->out;
	const struct hs_model_desc *m = c->m;
	double U = o->ubatch, t_pre = 0, q_pre_sum = 0, host_b = 0, miss_b = 0, gpu_b = 0;
	int n_pre_hyb = 0, pre_modes[4] = { 0 };

	p->n_layers = c->L;
	p->n_host_layers = k->n_host;
	p->n_gpu_layers = c->L - k->n_host;
	p->total_slots = 0;
	for (int l = 0; l < c->L; l++) {
		struct hs_plan_layer *pl = &p->layers[l];
		memset(pl, 0, sizeof *pl);
		pl->layer = m->moe_layer[l];
		if (!k->host[l]) {
			pl->placement = HS_PLACEMENT_GPU;
			pl->hit_rate = 1;
			pl->decode_ms = gpu_decode(c) * 1e3;
			pl->prefill_ms = gpu_prefill(c, U) * 1e3;
			gpu_b += c->k * c->S;
			continue;
		}
		pl->placement = k->slots[l] > 0 ? HS_PLACEMENT_HOST_CACHE : HS_PLACEMENT_HOST;
		pl->slots = k->slots[l];
		p->total_slots += k->slots[l];
		pl->n_numa_nodes = 1;
		pl->numa_nodes[0] = c->pf->nodes[k->node[l]].os_index;
		pl->hit_rate = c->g ? c->cum[(size_t)l * (c->E + 1) + k->slots[l]] : 0;
		pl->decode_ms = layer_decode(c, k, l, k->mode) * 1e3;
		enum hs_mode pm;
		double q;
		double tp = host_prefill(c, k->node[l], pl->hit_rate, k->slots[l], U, &pm, &q);
		pl->prefill_ms = tp * 1e3;
		pre_modes[pm]++;
		if (pm == HS_MODE_HYBRID) {
			q_pre_sum += q;
			n_pre_hyb++;
		}
		host_b += c->k * c->S;
		miss_b += c->k * c->S * (1 - pl->hit_rate);
		gpu_b += c->k * c->S * pl->hit_rate;
	}
	for (int l = 0; l < c->L; l++)
		t_pre += p->layers[l].prefill_ms / 1e3;

	p->decode_mode = k->n_host > 0 ? k->mode : HS_MODE_NONE;
	if (p->decode_mode == HS_MODE_HYBRID) {
		struct hs__cost r;
		host_cost(c, c->cpu_node, 0, 0, 1, 0, &r);
		p->decode_q = r.q;
	}
	p->prefill_mode = HS_MODE_NONE;
	for (int md = HS_MODE_CPU_COMPUTE; md <= HS_MODE_HYBRID; md++)
		if (pre_modes[md] > (p->prefill_mode ? pre_modes[p->prefill_mode] : 0))
			p->prefill_mode = md;
	p->prefill_q = n_pre_hyb ? q_pre_sum / n_pre_hyb : p->prefill_mode == HS_MODE_PCIE_STREAM;

	p->predicted.decode_tok_s = 1.0 / k->t_best;
	p->predicted.decode_cpu_tok_s = k->n_host ? 1.0 / k->t_mode[HS_MODE_CPU_COMPUTE] : 0;
	p->predicted.decode_stream_tok_s = k->n_host && c->g ? 1.0 / k->t_mode[HS_MODE_PCIE_STREAM] : 0;
	p->predicted.decode_hybrid_tok_s = k->n_host && c->g ? 1.0 / k->t_mode[HS_MODE_HYBRID] : 0;
	p->predicted.prefill_tok_s = U / t_pre;
	p->predicted.host_bytes_per_token = (uint64_t)llround(host_b);
	p->predicted.miss_bytes_per_token = (uint64_t)llround(miss_b);
	p->predicted.gpu_bytes_per_token = (uint64_t)llround(gpu_b);
	p->predicted.host_read_gbps = c->Br[c->cpu_node] / 1e9;
	p->predicted.expert_bytes = (uint64_t)c->S;
	p->predicted.n_experts = c->E;
	p->predicted.n_used = c->k;
	p->predicted.decode_host_bound_tok_s = host_b > 0 ? c->Br[c->cpu_node] / host_b : 0;
	p->predicted.cpu_kernel_gbps = c->Bc[c->cpu_node] / 1e9;
	p->predicted.pcie_gbps = c->g ? c->Bp[c->cpu_node] / 1e9 : 0;
	p->predicted.gpu_mem_gbps = c->g ? c->Bg / 1e9 : 0;
	double t_gpu_side = 0, t_host_side = 0;
	for (int l = 0; l < c->L; l++)
		*(k->host[l] ? &t_host_side : &t_gpu_side) += p->layers[l].decode_ms;
	if (k->n_host == 0)
		snprintf(p->predicted.bound, sizeof p->predicted.bound, "GPU memory bandwidth");
	else if (t_host_side < t_gpu_side)
		snprintf(p->predicted.bound, sizeof p->predicted.bound, "GPU side (resident layers)");
	else if (p->decode_mode == HS_MODE_HYBRID && c->Bc[c->cpu_node] + c->Bp[c->cpu_node] >= c->Br[c->cpu_node])
		snprintf(p->predicted.bound, sizeof p->predicted.bound, "host memory read bandwidth");
	else if (p->decode_mode == HS_MODE_PCIE_STREAM)
		snprintf(p->predicted.bound, sizeof p->predicted.bound, "PCIe copies");
	else if (p->decode_mode == HS_MODE_HYBRID)
		snprintf(p->predicted.bound, sizeof p->predicted.bound, "CPU kernel + PCIe copies");
	else
		snprintf(p->predicted.bound, sizeof p->predicted.bound, "CPU expert kernel");

	p->memory.vram_slots = (uint64_t)(p->total_slots * c->slot_bytes);
	p->memory.vram_bytes = c->g ? (uint64_t)k->vram_used + p->memory.vram_slots : 0;
	p->memory.vram_experts = c->g ? (uint64_t)((c->L - k->n_host) * c->E * c->slot_bytes) : 0;
	p->memory.vram_staging = c->g && k->n_host > 0 ? (uint64_t)(STAGING_PER_K * c->k * c->slot_bytes) : 0;
	p->memory.ram_bytes = 0;
	p->memory.n_nodes = c->pf->n_nodes;
	for (int j = 0; j < c->pf->n_nodes; j++) {
		p->memory.node_os_index[j] = c->pf->nodes[j].os_index;
		p->memory.ram_node_bytes[j] = (uint64_t)k->ram_need[j];
		p->memory.ram_bytes += (uint64_t)k->ram_need[j];
	}
}

int hs_plan_make(const struct hs_model_desc *m, const struct hs_profile *pf, const struct hs_plan_opts *opts,
		 struct hs_plan *p)
{
	struct hs_plan_opts o = *opts;
	struct ctx c;
	int rc = 0;

	memset(p, 0, sizeof *p);
	memset(&c, 0, sizeof c);
	if (o.ctx <= 0)
		o.ctx = 8192;
	if (o.ubatch <= 0)
		o.ubatch = 512;
	if (m->n_moe_layers <= 0 || m->n_moe_layers > HS_MAX_LAYERS || m->n_experts <= 0 || m->n_used <= 0 ||
	    m->n_used > m->n_experts || m->expert_bytes == 0)
		return hs__error(EINVAL, "model '%s' has no usable MoE shape (%d MoE layers, %d experts, %d used)",
				 m->name, m->n_moe_layers, m->n_experts, m->n_used);
	if (pf->n_nodes <= 0 || pf->n_nodes > HS_MAX_NODES)
		return hs__error(EINVAL, "%s '%s' has %d NUMA nodes (1..%d)", pf_kind(pf), pf->machine, pf->n_nodes,
				 HS_MAX_NODES);
	if (o.gpu >= pf->n_gpus)
		return hs__error(EINVAL, "GPU %d is not in %s '%s' (it has %d)", o.gpu, pf_kind(pf), pf->machine,
				 pf->n_gpus);
	if (o.freq && (o.freq_layers != m->n_moe_layers || o.freq_experts != m->n_experts))
		return hs__error(EINVAL, "routing table is %d x %d, the model has %d MoE layers x %d experts",
				 o.freq_layers, o.freq_experts, m->n_moe_layers, m->n_experts);
	if (o.host_layers > m->n_moe_layers)
		return hs__error(EINVAL, "%d host layers asked, the model has %d MoE layers", o.host_layers,
				 m->n_moe_layers);

	c.m = m;
	c.pf = pf;
	c.out = p;
	c.g = o.gpu >= 0 ? &pf->gpus[o.gpu] : NULL;
	c.L = m->n_moe_layers;
	c.E = m->n_experts;
	c.k = m->n_used;
	c.S = (double)m->expert_bytes;
	c.P_e = 3.0 * m->n_embd * m->n_ff;
	c.slot_bytes = ceil(c.S / 256.0) * 256.0; /* device allocations are 256-byte aligned */
	snprintf(p->model, sizeof p->model, "%s", m->name);
	snprintf(p->machine, sizeof p->machine, "%s", pf->machine);
	snprintf(p->profile_source, sizeof p->profile_source, "%s", pf->source);
	p->gpu = o.gpu;
	p->ctx = o.ctx;
	p->ubatch = o.ubatch;
	p->kv_type = o.kv_type;

	/* the node whose cores compute host experts: next to the GPU */
	c.cpu_node = 0;
	if (c.g && c.g->n_numa_nodes > 0) {
		int j = node_index(pf, c.g->numa_nodes[0]);
		if (j >= 0)
			c.cpu_node = j;
	} else if (!c.g) {
		for (int j = 1; j < pf->n_nodes; j++)
			if (pf->nodes[j].available_bytes > pf->nodes[c.cpu_node].available_bytes)
				c.cpu_node = j;
	}
	p->cpu_node = pf->nodes[c.cpu_node].os_index;
	p->cpu_threads = pf->nodes[c.cpu_node].n_cores > 0 ? pf->nodes[c.cpu_node].n_cores : 1;
	figures(&c);

	/* budgets */
	double ram_total = 0;
	for (int j = 0; j < pf->n_nodes; j++) {
		const struct hs_profile_node *n = &pf->nodes[j];
		double avail = n->available_bytes ? (double)n->available_bytes : (double)n->memory_bytes;
		if (!n->available_bytes)
			assume(p, "available memory = node memory (%.0f GiB kept free)", RAM_MARGIN_MIN / GiB);
		double margin = fmax(RAM_MARGIN_MIN, RAM_MARGIN_SHARE * (double)n->memory_bytes);
		c.ram_budget[j] = fmax(0, avail - margin);
		ram_total += c.ram_budget[j];
	}
	if (o.ram_bytes) {
		/* the user's budget replaces the profile's: the CPU node takes what
		 * its memory allows, the rest goes to the other nodes in order */
		double left = (double)o.ram_bytes;
		int first = 1;
		ram_total = 0;
		for (int jj = -1; jj < pf->n_nodes; jj++) {
			int j = jj < 0 ? c.cpu_node : jj;
			if (jj >= 0 && j == c.cpu_node)
				continue;
			double cap = fmax(0, (double)pf->nodes[j].memory_bytes - RAM_MARGIN_MIN);
			c.ram_budget[j] = first && cap <= 0 ? left : fmin(left, cap);
			left -= c.ram_budget[j];
			ram_total += c.ram_budget[j];
			first = 0;
		}
		c.ram_budget[c.cpu_node] += left; /* more than the nodes hold: the user knows */
		ram_total += left;
	}
	p->memory.ram_budget = (uint64_t)ram_total;

	p->memory.vram_nonexpert = c.g ? m->nonexpert_bytes : 0;
	p->memory.vram_kv = c.g ? (uint64_t)kv_bytes(m, &o) : 0;
	p->memory.vram_workspace =
		c.g ? (uint64_t)(VRAM_WORKSPACE + (double)o.ubatch * (m->n_embd * 4.0 * 4 + c.k * m->n_ff * 4.0 * 3)) : 0;
	c.vram_fixed = (double)(p->memory.vram_nonexpert + p->memory.vram_kv + p->memory.vram_workspace);
	if (c.g) {
		if (o.vram_bytes)
			c.vram_budget = (double)o.vram_bytes;
		else {
			double free_b = c.g->memory_free_bytes ? (double)c.g->memory_free_bytes
							       : (double)c.g->memory_total_bytes;
			if (free_b <= 0)
				return hs__error(EINVAL, "%s '%s' does not say how much memory GPU %d has; give --vram",
						 pf_kind(pf), pf->machine, o.gpu);
			c.vram_budget = fmax(0, free_b - VRAM_MARGIN);
		}
		p->memory.vram_budget = (uint64_t)c.vram_budget;
		if (c.vram_fixed > c.vram_budget)
			return hs__error(EINVAL,
					 "the non-expert part needs %.2f GiB of VRAM (weights %.2f, KV %.2f at %d "
					 "tokens, workspace %.2f), the budget is %.2f GiB",
					 c.vram_fixed / GiB, (double)m->nonexpert_bytes / GiB,
					 (double)p->memory.vram_kv / GiB, o.ctx, (double)p->memory.vram_workspace / GiB,
					 c.vram_budget / GiB);
	}

	if ((rc = curves(&c, &o)))
		return rc;
	if (o.freq)
		snprintf(p->routing, sizeof p->routing, "routing statistics given (%d layers x %d experts)", c.L, c.E);
	else
		snprintf(p->routing, sizeof p->routing, "default skew: the %d most used of 128 experts take %.0f%% of the slots",
			 DEFAULT_TOP, 100 * DEFAULT_TOP_SHARE);
	c.order = malloc(sizeof *c.order * c.L);
	struct cand *best = malloc(sizeof *best), *k = malloc(sizeof *k);
	if (!c.order || !best || !k) {
		rc = hs__error(ENOMEM, "planner: no memory");
		goto out_free;
	}
	/* which layers go to the host first: with routing statistics the most
	 * skewed ones (their slots catch the most); without, the first layers
	 * (like llama.cpp's --n-cpu-moe) */
	for (int l = 0; l < c.L; l++)
		c.order[l] = l;
	if (o.freq) {
		int probe = c.E / 8 > 0 ? c.E / 8 : 1;
		for (int i = 1; i < c.L; i++) /* stable insertion sort by hit at E/8 slots */
			for (int j = i; j > 0; j--) {
				double a = c.cum[(size_t)c.order[j] * (c.E + 1) + probe];
				double b = c.cum[(size_t)c.order[j - 1] * (c.E + 1) + probe];
				if (a <= b)
					break;
				int t = c.order[j];
				c.order[j] = c.order[j - 1];
				c.order[j - 1] = t;
			}
	}

	/* the search: every count of host layers the budgets allow */
	int found = 0, lo = 0, hi = c.L;
	if (!c.g)
		lo = c.L; /* without a GPU every expert is a host expert */
	if (o.host_layers >= 0)
		lo = hi = c.g ? o.host_layers : c.L;
	for (int pass = 0; pass < 2 && !found; pass++) {
		/* pass 0: plans within both budgets; pass 1 (none was): plans
		 * within the VRAM, RAM overflow priced as disk reads and warned */
		for (int n = lo; n <= hi; n++) {
			if ((rc = build(&c, &o, n, k)))
				goto out_free;
			int feasible = pass == 0 ? !k->vram_over && !k->ram_over : !k->vram_over;
			if (o.host_layers >= 0 || !c.g)
				feasible = 1; /* forced: report what it costs */
			if (!feasible)
				continue;
			if (!found || k->t_best < best->t_best * (1 - 1e-9)) {
				*best = *k;
				found = 1;
			}
		}
	}
	if (!found) { /* not even all-host fits the VRAM (staging): say so */
		if ((rc = build(&c, &o, c.L, k)))
			goto out_free;
		*best = *k;
	}
	if (best->ram_over)
		assume(p, "page-cache refills from disk at %.0f GB/s for experts over the RAM budget", ASSUME_DISK_GBPS);
	fill_plan(&c, &o, best);

	/* warnings, each with its numbers */
	if (best->vram_over)
		warn(p, "vram_over",
		     "VRAM: %d resident layers need %.2f GiB, the budget is %.2f GiB: loading would fail",
		     c.L - best->n_host, best->vram_used / GiB, c.vram_budget / GiB);
	if (best->ram_over || (double)p->memory.ram_bytes > ram_total)
		warn(p, "ram_over",
		     "host experts need %.2f GiB, the RAM budget is %.2f GiB: the page cache will thrash, "
		     "reading experts from disk on every token",
		     (double)p->memory.ram_bytes / GiB, ram_total / GiB);
	if (c.g && best->n_host == 0)
		warn(p, "all_on_gpu", "every expert fits in VRAM (%.2f of %.2f GiB): no host experts, no cache",
		     (double)p->memory.vram_bytes / GiB, c.vram_budget / GiB);
	if (c.g && best->n_host > 0 && p->total_slots == 0 && !o.no_cache)
		warn(p, "cache_small",
		     "no cache: the %.0f MiB of VRAM left hold %d slots for %d host layers; a layer's cache needs "
		     "at least %d (2 x experts per token) to help, smaller ones churn",
		     fmax(0, c.vram_budget - best->vram_used) / MiB, best->slots_left > 0 ? best->slots_left : 0,
		     best->n_host, MIN_SLOTS_PER_K * c.k);
	if (!c.g)
		warn(p, "no_gpu", "planned without a GPU: every expert is computed by the CPU");
	if (c.g) {
		double pin = c.g->h2d_pinned_gbps[c.cpu_node];
		if (c.g->link_gbps > 0 && c.g->link_gbps < 15.0)
			warn(p, "pcie_slow",
			     "the GPU's PCIe link is %.2f GB/s as hwloc reports it (gen%d x%d); gen3 x16 gives "
			     "15.75: check the slot (hwloc can also read low while the GPU idles)",
			     c.g->link_gbps, c.g->pcie_gen, c.g->pcie_width);
		else if (pin > 0 && c.g->link_gbps > 0 && pin < 0.6 * c.g->link_gbps)
			warn(p, "pcie_slow", "pinned copies reach %.1f GB/s on a %.2f GB/s link (%.0f%%)", pin,
			     c.g->link_gbps, 100 * pin / c.g->link_gbps);
	}
	int split = 0;
	for (int j = 0; j < pf->n_nodes; j++)
		if (j != c.cpu_node && p->memory.ram_node_bytes[j] > 0)
			split = j + 1;
	if (split) {
		int j = split - 1;
		warn(p, "numa_split",
		     "node %d cannot hold every host expert (budget %.1f GiB): %.1f GiB go to node %d, "
		     "computed by its own cores; %s",
		     p->cpu_node, c.ram_budget[c.cpu_node] / GiB, (double)p->memory.ram_node_bytes[j] / GiB,
		     pf->nodes[j].os_index,
		     c.g ? "the GPU's copies from there cross the socket link" : "their partial sums cross the socket link");
	}
	if (p->assumptions[0])
		warn(p, "assumed", "the profile lacks some figures; assumed: %.200s", p->assumptions);

out_free:
	free(c.cum);
	free(c.order);
	free(best);
	free(k);
	return rc;
}

double hs_plan_project(const struct hs_plan *p, const double *hit_rate)
{
	const struct hs_plan_predicted *f = &p->predicted;
	const double kS = p->n_host_layers ? (double)f->host_bytes_per_token / p->n_host_layers : 0;
	const double Bc = f->cpu_kernel_gbps * 1e9, Bp = f->pcie_gbps * 1e9, Br = f->host_read_gbps * 1e9;
	const double Bg = f->gpu_mem_gbps * 1e9;
	const struct hs__rates r = { .cpu_Bps = Bc > 0 ? Bc : 1, .cpu_flops = 0, .read_Bps = Br > 0 ? Br : 1,
				     .pcie_Bps = Bp > 0 ? Bp : 1, .gpu_Bps = Bg > 0 ? Bg : 1, .gpu_flops = 0,
				     .gpu = p->gpu >= 0 && Bp > 0 && Bg > 0 };
	/* the expert shape when the plan records it; else one expert of k S
	 * bytes among very many (decode reads the same bytes, the pipeline
	 * tail is counted whole) */
	const int known = f->expert_bytes > 0 && f->n_used > 0 && f->n_experts > 0;
	double t = 0;

	for (int i = 0; i < p->n_layers; i++) {
		if (p->layers[i].placement == HS_PLACEMENT_GPU) {
			t += p->layers[i].decode_ms / 1e3;
			continue;
		}
		struct hs__layer_step w = { .S = known ? (double)f->expert_bytes : kS, .E = known ? f->n_experts : 1 << 30,
					    .k = known ? f->n_used : 1, .slots = p->layers[i].slots, .h = hit_rate[i],
					    .U = 1 };
		struct hs__cost c;
		hs__layer_cost(&r, &w, &c);
		enum hs_mode m = p->decode_mode == HS_MODE_NONE ? HS_MODE_CPU_COMPUTE : p->decode_mode;
		t += c.t[r.gpu ? m : HS_MODE_CPU_COMPUTE];
	}
	return t > 0 ? 1 / t : 0;
}
