/* The cost model of one host layer (DESIGN.md §5, docs/cost-model.md): the
 * seconds of a layer step in each mode from measured or assumed rates, and
 * a plan's speed with other hit rates.  Pure code, shared by the planner,
 * `trace project`, `hotset bench` and the runtime's live hybrid share. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "hotset.h"
#include "base/error.h"
#include "planner/planner.h"

#define T_SYNC_S 25e-6 /* CPU<->GPU hand-off of one host layer (x up, y down, events) */

double hs__touched(double n, double per_token, double U)
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
	const double Dm = hs__touched(w->E - w->slots, w->k * (1 - h), w->U);
	const double Dh = hs__touched(w->slots, w->k * h, w->U);
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

double hs_plan_project(const struct hs_plan *p, const double *hit_rate)
{
	int rc = hs__plan_check(p);
	if (rc)
		return rc;
	if (!hit_rate)
		return hs__null_arg(__func__, "hit_rate");
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
