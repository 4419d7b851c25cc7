/* Where the experts go for one count of host layers: each host layer's
 * NUMA node and cache slots (the VRAM left, given to the most used experts
 * first) and its costs per mode; then the plan's figures from the
 * candidate the search chose (planner.c runs the search). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "planner/placement.h"
#include "planner/planner.h"
#include "base/error.h"
#include "cpu_kernels/formats.h"

#define T_LAUNCH_S 5e-6 /* one GPU expert launch */

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
		w.disk_s = hs__touched(c->E - slots, c->k * (1 - h), U) * c->S * thrash / (ASSUME_DISK_GBPS * 1e9);
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
	double bytes = hs__touched(c->E, c->k, U) * c->S;
	return fmax(bytes / c->Bg, 2 * c->P_e * U * c->k / c->Fg) + T_LAUNCH_S;
}

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

int hs__plan_build(const struct ctx *c, const struct hs_plan_opts *o, int n, struct cand *k)
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

	/* VRAM: fixed part + resident layers' experts + each host layer's
	 * staging slots (the layers share their step buffers) */
	double host_extra = c->staging * c->slot_bytes + c->ws_host_layer - c->ws_gpu_layer;
	k->vram_used = c->g ? c->vram_fixed + (c->L - n) * c->E * c->slot_bytes + n * host_extra : 0;
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

/* Positions layer i attends to when it holds `pos` tokens. */
static double visible(const struct hs_model_desc *m, int i, double pos)
{
	if (m->full_attn_every > 0 && i % m->full_attn_every != m->full_attn_every - 1)
		return 0; /* a DeltaNet layer attends to nothing (its state is read instead) */
	int full = m->swa_window <= 0 || m->swa_every <= 0 || i % m->swa_every == m->swa_every - 1;
	return full ? pos : fmin(pos, m->swa_window);
}

/* The whole model's figures: the MoE part's times (t_dec for one token,
 * t_pre for a ubatch) plus the dense part where the forward pass runs it
 * (the GPU when the plan has one, else the CPU).  Decode reads every dense
 * matrix once and, at a context, the K and V of the positions each layer
 * sees; prefill is the larger of that read and the FLOPs of the ubatch's
 * projections and attention scores (the logits of its last token only, as
 * a prompt needs). */
static void whole_model(const struct ctx *c, struct hs_plan *p, double t_dec, double t_pre)
{
	const struct hs_model_desc *m = c->m;
	struct hs_plan_predicted *q = &p->predicted;

	if (!m->dense_device_bytes || m->n_head <= 0 || m->head_dim <= 0 || t_dec <= 0 || t_pre <= 0)
		return;
	const double B = c->g ? c->Bg : c->Bd[c->cpu_node], F = c->g ? c->Fg : c->Fd[c->cpu_node];
	if (B <= 0 || F <= 0)
		return;
	const double D = m->n_embd, Q = (double)m->n_head * m->head_dim, KV = (double)m->n_head_kv * m->head_dim;
	const double U = p->ubatch, dense = (double)m->dense_device_bytes;
	const int kvt = p->kv_type == HS_KV_Q8_0 ? HS_TYPE_Q8_0 : HS_TYPE_F16;
	const double cell = m->n_head_kv > 0 ? 2.0 * m->n_head_kv * (double)hs__type_row_bytes(kvt, (uint64_t)m->head_dim) : 0;
	double kv_ctx = 0, score_flops = 0;
	for (int i = 0; i < m->n_layers; i++) {
		kv_ctx += cell * visible(m, i, p->ctx);
		/* sum over the ubatch's positions t = 1..U of what each sees */
		const double w = visible(m, i, U), seen = w >= U ? U * (U + 1) / 2 : w * (w + 1) / 2 + (U - w) * w;
		score_flops += 4.0 * Q * seen;
	}
	const double proj_flops = 2.0 * U * m->n_layers * (D * (Q + 2 * KV) + Q * D) + 2.0 * U * (double)m->ffn_macs +
				  2.0 * D * m->n_vocab;
	q->dense_bytes_per_token = m->dense_device_bytes;
	q->kv_bytes_at_ctx = (uint64_t)llround(kv_ctx);
	q->dense_gbps = B / 1e9;
	/* DeltaNet states: read and written once a token, where the dense part runs (runtime/fwd-qwen35.c) */
	const double t_state = 2.0 * m->recurrent_state_bytes / B;
	q->model_decode_tok_s = 1.0 / (t_dec + dense / B + t_state);
	q->model_decode_ctx_tok_s = 1.0 / (t_dec + (dense + kv_ctx) / B + t_state);
	q->model_prefill_tok_s = U / (t_pre + fmax(dense / B, (proj_flops + score_flops) / F));
}

void hs__plan_fill(const struct ctx *c, const struct hs_plan_opts *o, const struct cand *k)
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
	whole_model(c, p, k->t_best, t_pre);
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

	/* as the runtime opens each host layer: its cache slots, then
	 * min(2k, E - slots) staging slots; every layer its slot table */
	double staging = 0, ws_layers = 0;
	for (int l = 0; l < c->L; l++) {
		const int st = k->host[l] ? (c->staging < c->E - k->slots[l] ? c->staging : c->E - k->slots[l]) : 0;
		staging += st;
		ws_layers += st > 0 ? c->ws_host_layer : c->ws_gpu_layer;
	}
	if (c->g) {
		p->memory.vram_slots = (uint64_t)(p->total_slots * c->slot_bytes);
		p->memory.vram_experts = (uint64_t)((c->L - k->n_host) * c->E * c->slot_bytes);
		p->memory.vram_staging = (uint64_t)(staging * c->slot_bytes);
		p->memory.vram_workspace += (uint64_t)ws_layers;
		p->memory.vram_bytes = p->memory.vram_nonexpert + p->memory.vram_kv + p->memory.vram_experts +
				       p->memory.vram_slots + p->memory.vram_staging + p->memory.vram_workspace;
	}
	p->memory.ram_bytes = 0;
	p->memory.n_nodes = c->pf->n_nodes;
	for (int j = 0; j < c->pf->n_nodes; j++) {
		p->memory.node_os_index[j] = c->pf->nodes[j].os_index;
		p->memory.ram_node_bytes[j] = (uint64_t)k->ram_need[j];
		p->memory.ram_bytes += (uint64_t)k->ram_need[j];
	}
}
