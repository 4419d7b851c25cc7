/* The planner: model shape + machine profile + budgets (+ routing
 * statistics) -> where every expert lives, which mode each phase uses, and
 * the predicted speed and memory.  Pure code: no hardware is touched, so
 * it runs the same for this machine and for a profile of another one.
 * The cost model is DESIGN.md §5; docs/cost-model.md explains every figure.
 * This file: the inputs (rates with assumptions, hit curves, budgets) and
 * the search over counts of host layers; placement.c builds and prices one
 * candidate, cost.c prices one layer step. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "planner/placement.h"
#include "planner/planner.h"
#include "base/error.h"
#include "cpu_kernels/attention.h"
#include "cpu_kernels/dense.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/kernels.h"
#include "cpu_kernels/moe.h"
#include "gpu_kernels/scratch.h"

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

/* Margins and the default skew (see docs/cost-model.md). */
#define VRAM_MARGIN (256.0 * MiB)
/* What the device backend allocates besides the ops table's buffers, and
 * the runtime's figures the count follows (see the memory section). */
#define CUBLAS_WORKSPACE (32.0 * MiB) /* one cuBLAS handle's default workspace on Hopper (float-weight prefill) */
#define SIM_SPLIT_THREADS 16          /* device/device-sim-dense.c sizes attention scratch for this many threads */
#define MAX_STREAMED 256              /* runtime/hybrid.h HS_MAX_STREAMED: a host layer's streamed-id lists */
#define RAM_MARGIN_MIN (1.0 * GiB)
#define RAM_MARGIN_SHARE 0.05
#define DEFAULT_TOP 14             /* default skew: the 14 most used of 128 ... */
#define DEFAULT_TOP_SHARE 0.54     /* ... take 54% of the slots (published 54-68%, low end) */

/* A model description from a caller: what the planner reads stays inside it. */
static int model_desc_check(const struct hs_model_desc *m)
{
	if (!HS_STR_ENDED(m->name) || !HS_STR_ENDED(m->arch))
		return hs__error(EINVAL, "model description: name or arch is not NUL-terminated within its array");
	for (int i = 0; i < m->n_moe_layers && i < HS_MAX_LAYERS; i++)
		if (m->moe_layer[i] < 0)
			return hs__error(EINVAL, "model description: MoE layer %d has block index %d", i, m->moe_layer[i]);
	if (m->n_mix < 0 || m->n_mix > HS_MAX_MIX)
		return hs__error(EINVAL, "model description: n_mix %d (0..%d)", m->n_mix, HS_MAX_MIX);
	for (int i = 0; i < m->n_mix; i++)
		if (!hs__type_supported(m->mix_type[i]))
			return hs__error(EINVAL, "model description: mix_type[%d] %d is not a type hotset computes", i,
					 m->mix_type[i]);
	return 0;
}

struct hs_plan_opts hs_plan_opts_default(void)
{
	return (struct hs_plan_opts){ .gpu = 0, .ctx = 8192, .kv_type = HS_KV_F16, .ubatch = 512, .host_layers = -1,
				      .n_seq = 1 };
}

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

static void assume_text(struct hs_plan *p, const char *buf)
{
	size_t n = strlen(p->assumptions);

	if (strstr(p->assumptions, buf))
		return;
	snprintf(p->assumptions + n, sizeof p->assumptions - n, "%s%s", n ? "; " : "", buf);
}

static void assume(struct hs_plan *p, const char *fmt, double v)
{
	char buf[128];

	snprintf(buf, sizeof buf, fmt, v);
	assume_text(p, buf);
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

/* The kernel speed point of `type` with the most threads not above
 * `threads`; NULL when the profile has none. */
static const struct hs_kernel_speed *kernel_at(const struct hs_profile_node *n, int threads, int type)
{
	const struct hs_kernel_speed *best = NULL;
	for (int i = 0; i < n->n_kernel; i++)
		if (hs__kspeed_type(&n->kernel[i]) == type && n->kernel[i].threads <= threads &&
		    (!best || n->kernel[i].threads > best->threads))
			best = &n->kernel[i];
	return best;
}

/* A point's bytes/s at 1 token: the expert FFN's, or for dense matrices
 * the dense product's where measured (else the expert FFN's). */
static double point_Bps(const struct hs_kernel_speed *k, int dense)
{
	if (!k)
		return 0;
	return (dense && k->dense_gbps > 0 ? k->dense_gbps : k->decode_gbps) * 1e9;
}

/* Node j's CPU kernel on matrices of `type` (experts, or dense matrices),
 * bytes/s at 1 token (*B) and FLOP/s on a batch (*F): the profile's figure
 * for the type; a type it lacks (or a float type, never measured) takes
 * MXFP4's, named as an assumption; neither: a share of the read bandwidth
 * and a rate per core. */
static void type_rate(struct ctx *c, int j, int type, int dense, double *B, double *F)
{
	const struct hs_profile_node *n = &c->pf->nodes[j];
	struct hs_plan *p = c->out;
	const int cores = n->n_cores > 0 ? n->n_cores : 1;
	const struct hs_kernel_speed *ks = kernel_at(n, cores, type), *mx = kernel_at(n, cores, HS_TYPE_MXFP4);
	char buf[128];

	*B = point_Bps(ks, dense);
	*F = ks && ks->prefill_gflops > 0 ? ks->prefill_gflops * 1e9 : 0;
	if ((*B <= 0 || *F <= 0) && type != HS_TYPE_MXFP4 && mx && (mx->decode_gbps > 0 || mx->prefill_gflops > 0)) {
		snprintf(buf, sizeof buf, "CPU kernel on %s at MXFP4's speed", hs__type_name(type));
		assume_text(p, buf);
		if (*B <= 0)
			*B = point_Bps(mx, dense);
		if (*F <= 0)
			*F = mx->prefill_gflops * 1e9;
	}
	if (*B <= 0) {
		*B = ASSUME_KERNEL_SHARE * c->Br[j];
		assume(p, "CPU kernel at %.2f of read bandwidth", ASSUME_KERNEL_SHARE);
	}
	if (*B > c->Br[j]) /* a kernel cannot read faster than memory */
		*B = c->Br[j];
	if (*F <= 0) {
		*F = ASSUME_CPU_GFLOPS_CORE * 1e9 * cores;
		assume(p, "CPU prefill %.0f GFLOP/s per core", ASSUME_CPU_GFLOPS_CORE);
	}
}

/* Rates of a mix of types: the bytes of each type at that type's rate,
 * times added (*B); its values (one multiply-add per token each) at its
 * FLOP rate likewise (*F).  0 when nothing is given. */
static void mix_rate(struct ctx *c, int j, int dense, int n, const int *type, const double *bytes, double *B,
		     double *F)
{
	double tb = 0, tf = 0, all_b = 0, all_v = 0;
	for (int i = 0; i < n; i++) {
		if (!(bytes[i] > 0) || !hs__type_supported(type[i]))
			continue;
		double b, f, v = bytes[i] * (double)hs__type_block_values(type[i]) / (double)hs__type_block_bytes(type[i]);
		type_rate(c, j, type[i], dense, &b, &f);
		tb += bytes[i] / b;
		tf += v / f;
		all_b += bytes[i];
		all_v += v;
	}
	*B = tb > 0 ? all_b / tb : 0;
	*F = tf > 0 ? all_v / tf : 0;
}

/* Bandwidths and speeds for the cost model, with the assumptions named:
 * the CPU kernel's rates for the experts' types (weighted by their bytes)
 * and for the dense matrices' (the attention's and the output's). */
static void figures(struct ctx *c)
{
	const struct hs_profile *pf = c->pf;
	const struct hs_model_desc *m = c->m;
	struct hs_plan *p = c->out;

	for (int j = 0; j < pf->n_nodes; j++) {
		const struct hs_profile_node *n = &pf->nodes[j];
		c->Br[j] = n->read_gbps[j] * 1e9;
		if (c->Br[j] <= 0) {
			c->Br[j] = ASSUME_READ_GBPS * 1e9;
			assume(p, "host read bandwidth %.0f GB/s per node", ASSUME_READ_GBPS);
		}
		int types[HS_MAX_MIX] = { m->expert_type };
		double bytes[HS_MAX_MIX] = { 1 };
		for (int i = 0; i < m->n_mix; i++) {
			types[i] = m->mix_type[i];
			bytes[i] = (double)m->mix_bytes[i];
		}
		mix_rate(c, j, 0, m->n_mix ? m->n_mix : 1, types, bytes, &c->Bc[j], &c->Fc[j]);
		if (c->Bc[j] <= 0) /* an expert type hotset does not know: MXFP4's rates */
			type_rate(c, j, HS_TYPE_MXFP4, 0, &c->Bc[j], &c->Fc[j]);
		/* the dense part: the output matrix in its type, the rest in the attention's */
		const double out_b = hs__type_supported(m->output_type) && m->n_vocab > 0
					     ? (double)m->n_vocab * (double)hs__type_row_bytes(m->output_type, (uint64_t)m->n_embd)
					     : 0;
		const int dt[2] = { m->dense_type, m->output_type };
		const double db[2] = { fmax((double)m->dense_device_bytes - out_b, 0), out_b };
		mix_rate(c, j, 1, 2, dt, db, &c->Bd[j], &c->Fd[j]);
		if (c->Bd[j] <= 0) { /* no dense part described */
			c->Bd[j] = c->Bc[j];
			c->Fd[j] = c->Fc[j];
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

/* ---- memory --------------------------------------------------------------- */

/* Counted as the device backend allocates: every buffer of the forward
 * pass (runtime/forward.c, fwd-dev.c), of each MoE layer's device side
 * (runtime/hybrid.c, device/device.c's slots) and of the KV cache, each
 * rounded up to 256 bytes (device allocations' alignment), with the scratch
 * sizes of the backend's kernels: CUDA's (gpu_kernels/scratch.h) or the
 * sim's (the CPU kernels').  tests/test-vram.c holds this against what a
 * context on the sim device really allocates. */

static double dev_buf(double bytes)
{
	return ceil(fmax(bytes, 1) / 256.0) * 256.0;
}

static size_t mm_scratch(const struct hs_plan_opts *o, int type, int cols, int n)
{
	return o->device_sim ? hs__matmul_scratch_bytes(type, cols, n) : hs__gpu_matmul_scratch_size(type, cols, n);
}

static size_t attn_scratch(const struct hs_model_desc *m, const struct hs_plan_opts *o, int n)
{
	if (o->device_sim)
		return hs__attn_scratch_bytes(n, m->n_head, m->head_dim, hs__attn_pick_split(n, o->ctx, SIM_SPLIT_THREADS));
	return hs__gpu_attn_scratch_size(n, m->n_head, m->n_head_kv, m->head_dim, o->ctx);
}

static int float_type(int t)
{
	return t == HS_TYPE_F32 || t == HS_TYPE_F16 || t == HS_TYPE_BF16;
}

/* K and V of every layer and sequence, and the cells' positions; sliding
 * window layers keep a ring of window + ubatch cells. */
static double kv_bytes(const struct hs_model_desc *m, const struct hs_plan_opts *o, int *nbuf)
{
	if (m->n_head_kv <= 0 || m->head_dim <= 0)
		return 0;
	const int type = o->kv_type == HS_KV_Q8_0 ? HS_TYPE_Q8_0 : HS_TYPE_F16;
	const double cell = (double)m->n_head_kv * (double)hs__type_row_bytes(type, (uint64_t)m->head_dim);
	double total = 0;
	for (int i = 0; i < m->n_layers; i++) {
		if (m->full_attn_every > 0 && i % m->full_attn_every != m->full_attn_every - 1)
			continue; /* a DeltaNet layer: no KV cache */
		int full = m->swa_window <= 0 || m->swa_every <= 0 || i % m->swa_every == m->swa_every - 1;
		double cells = (double)o->n_seq * (full ? o->ctx : fmin(o->ctx, (double)m->swa_window + o->ubatch));
		total += 2 * dev_buf(cells * cell) + dev_buf(cells * 4);
		*nbuf += 3;
	}
	if (m->recurrent_state_bytes) { /* the DeltaNet states: conv and delta rule, every sequence */
		total += dev_buf((double)o->n_seq * m->recurrent_state_bytes) + 256;
		*nbuf += 2;
	}
	return total;
}

/* One context's ubatch buffers (x, h, q, k, v, o, t, logits, the rope
 * table, positions, cells) and its scratch, the larger of the matrix
 * products' and attention's over every ubatch size. */
static double fwd_bytes(const struct hs_model_desc *m, const struct hs_plan_opts *o, int *nbuf)
{
	if (!m->dense_device_bytes)
		return 0;
	const int U = o->ubatch, qd = m->n_head * m->head_dim;
	const double d = m->n_embd, kvd = (double)m->n_head_kv * m->head_dim;
	double b = 3 * dev_buf(4.0 * U * d) + 2 * dev_buf(4.0 * U * qd) + 2 * dev_buf(4.0 * U * kvd) +
		   dev_buf(4.0 * (U < HS_LOGITS_ROWS ? U : HS_LOGITS_ROWS) * m->n_vocab) + dev_buf(4.0 * U * m->n_rot) + 3 * dev_buf(4.0 * U);
	size_t s = mm_scratch(o, m->output_type, m->n_embd, U), t;
	if ((t = mm_scratch(o, m->dense_type, m->n_embd, U)) > s)
		s = t;
	if ((t = mm_scratch(o, m->dense_type, qd, U)) > s)
		s = t;
	for (int n = 1; n <= U; n++)
		if ((t = attn_scratch(m, o, n)) > s)
			s = t;
	if (m->ffn_ff > 0) { /* a dense FFN's gate and up rows, its products' scratch */
		b += 2 * dev_buf(4.0 * U * m->ffn_ff);
		*nbuf += 2;
		if ((t = mm_scratch(o, m->ffn_gate_type, m->n_embd, U)) > s)
			s = t;
		if ((t = mm_scratch(o, m->ffn_down_type, m->ffn_ff, U)) > s)
			s = t;
	}
	if (m->recurrent_ubatch_floats) { /* qwen35moe's 9 buffers (whole.h hs__q35_ubatch_floats) */
		b += dev_buf(4.0 * U * (double)m->recurrent_ubatch_floats) + 8 * 256;
		*nbuf += 9;
	}
	b += dev_buf((double)((s + 63) & ~(size_t)63));
	*nbuf += 13;
	if (!o->device_sim && (float_type(m->dense_type) || float_type(m->output_type)))
		b += CUBLAS_WORKSPACE; /* allocated by cuBLAS, not through the ops table */
	return b;
}

/* The step buffers the runtime's MoE layers share (they run one at a
 * time): x, its Q8_0 copy, the id lists (one more per streamable expert),
 * weights, y and the FFN scratch. */
static double step_ws(const struct hs_model_desc *m, const struct hs_plan_opts *o)
{
	const double U = o->ubatch, D = m->n_embd, K = m->n_used, E = m->n_experts;
	const double lists = fmin(E, MAX_STREAMED);
	size_t ffn;
	if (o->device_sim) {
		struct hs_moe_layer l;
		memset(&l, 0, sizeof l);
		l.n_embd = m->n_embd, l.n_ff = m->n_ff, l.n_experts = m->n_experts, l.n_used = m->n_used;
		ffn = hs__ffn_scratch_bytes(&l, o->ubatch);
	} else {
		ffn = hs__gpu_ffn_scratch_size(o->ubatch, m->n_used, m->n_ff, m->n_experts);
	}
	return 2 * dev_buf(4 * U * D) + dev_buf(U * (D / HS_QK) * sizeof(struct hs_block_q8_0)) +
	       dev_buf((2 + lists) * U * K * 4) + dev_buf(U * K * 4) + dev_buf((double)ffn);
}

/* One MoE layer's device buffers besides its slot pool: the slot table. */
static double layer_ws(const struct hs_model_desc *m)
{
	return dev_buf(4.0 * m->n_experts);
}

int hs__plan_device_buffers(const struct hs_model_desc *m, const struct hs_plan_opts *opts)
{
	struct hs_plan_opts o = *opts;
	int n = 0;
	if (o.n_seq <= 0)
		o.n_seq = 1;
	kv_bytes(m, &o, &n);
	fwd_bytes(m, &o, &n);
	/* the shared step buffers (6), each layer's slot pool and slot table */
	return n + m->dense_device_tensors + 6 + 2 * m->n_moe_layers;
}

int hs_plan_make(const struct hs_model_desc *m, const struct hs_profile *pf, const struct hs_plan_opts *opts,
		 struct hs_plan *p)
{
	int rc = 0;

	HS_NEED(p, -EINVAL);
	memset(p, 0, sizeof *p);
	HS_NEED(m, -EINVAL);
	HS_NEED(pf, -EINVAL);
	if ((rc = model_desc_check(m)) || (rc = hs__profile_check(pf)))
		return rc;
	struct hs_plan_opts o = opts ? *opts : hs_plan_opts_default();
	struct ctx c;

	memset(&c, 0, sizeof c);
	/* gpu 0, the default, on a machine without one: plan for the CPU, as
	 * `hotset plan` does when --gpu is not given */
	if (o.gpu == 0 && pf->n_gpus == 0)
		o.gpu = -1;
	if (o.gpu < -1 || (unsigned)o.kv_type > HS_KV_Q8_0 || o.host_layers < -1 || o.ctx < 0 || o.ubatch < 0 ||
	    o.n_seq < 0 || o.n_seq > HS_MAX_SEQ || (o.freq && (o.freq_layers < 0 || o.freq_experts < 0)))
		return hs__error(EINVAL, "plan: gpu %d (-1 or a profile GPU), KV type %d (0..%d), host layers %d (-1 or "
				 ">= 0), ctx %d, ubatch %d (>= 0), n_seq %d (0..%d)",
				 o.gpu, (int)o.kv_type, HS_KV_Q8_0, o.host_layers, o.ctx, o.ubatch, o.n_seq, HS_MAX_SEQ);
	if ((long)o.ctx * (o.n_seq > 0 ? o.n_seq : 1) > (1l << 31) - 1)
		return hs__error(EINVAL, "plan: %d sequences of %d positions exceed 2^31 cells", o.n_seq, o.ctx);
	if (o.ctx <= 0)
		o.ctx = 8192;
	if (o.ubatch <= 0)
		o.ubatch = 512;
	if (o.n_seq <= 0)
		o.n_seq = 1;
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
	/* a slot holds the largest layer's expert (mixes differ by layer) */
	const int st[3] = { m->slot_types[0] ? m->slot_types[0] : m->expert_type,
			    m->slot_types[1] ? m->slot_types[1] : m->expert_type,
			    m->slot_types[2] ? m->slot_types[2] : m->expert_type };
	c.slot_bytes = (double)hs__expert_pack_layout(st, m->n_embd, m->n_ff, strcmp(m->arch, "gpt-oss") == 0).bytes;
	c.staging = STAGING_PER_K * c.k < c.E ? STAGING_PER_K * c.k : c.E;
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

	int nbuf = 0;
	c.ws_gpu_layer = c.ws_host_layer = layer_ws(m);
	/* the dense part as the forward pass keeps it on the device; a file
	 * of MoE layers alone: every other tensor, as before */
	p->memory.vram_nonexpert = c.g ? (m->dense_device_bytes ? m->dense_device_bytes : m->nonexpert_bytes) : 0;
	p->memory.vram_kv = c.g ? (uint64_t)kv_bytes(m, &o, &nbuf) : 0;
	/* the forward pass's and the layers' shared step buffers (+ each layer's slot table, in hs__plan_fill) */
	p->memory.vram_workspace = c.g ? (uint64_t)(fwd_bytes(m, &o, &nbuf) + step_ws(m, &o)) : 0;
	c.vram_fixed = (double)(p->memory.vram_nonexpert + p->memory.vram_kv + p->memory.vram_workspace) +
		       c.L * c.ws_gpu_layer;
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
					 c.vram_fixed / GiB, (double)p->memory.vram_nonexpert / GiB,
					 (double)p->memory.vram_kv / GiB, o.ctx,
					 (c.vram_fixed - p->memory.vram_nonexpert - p->memory.vram_kv) / GiB,
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
			if ((rc = hs__plan_build(&c, &o, n, k)))
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
		if ((rc = hs__plan_build(&c, &o, c.L, k)))
			goto out_free;
		*best = *k;
	}
	if (best->ram_over)
		assume(p, "page-cache refills from disk at %.0f GB/s for experts over the RAM budget", ASSUME_DISK_GBPS);
	hs__plan_fill(&c, &o, best);

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
