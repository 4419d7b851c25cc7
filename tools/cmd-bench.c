/* `hotset bench`: cpu-compute, pcie-stream, hybrid and the planner's
 * choice side by side on this machine, for decode and a prefill batch and
 * for several cache sizes, each measured next to the cost model's
 * prediction from rates measured in the same run. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include "base/jsonio.h"
#include "measure/calibrate.h"
#include "model/gen.h"
#include "tools/bench.h"
#include "tools/tools.h"

#define MAX_LIST 16

static void help(void)
{
	printf("usage: hotset bench [--model FILE | --preset NAME [--layers L] [--experts E]]\n"
	       "                    [--modes cpu,stream,hybrid,auto] [--batch 1,32] [--slots LIST]\n"
	       "                    [--policy lru|lfu|lfru|static] [--trace FILE | --skew NAME]\n"
	       "                    [--device cuda|sim] [--pcie GBPS] [--threads N] [--steps N]\n"
	       "                    [--warmup N] [--csv FILE] [--json] [--plot FILE]\n\n"
	       "Runs the MoE layers of a model in each mode on this machine and prints, for every\n"
	       "(mode, batch, slots): measured tokens/s of the MoE part (median of the steps, with\n"
	       "their range), the cost model's prediction from rates measured in the same run, and\n"
	       "their ratio; the share of experts found on the device (measured and predicted),\n"
	       "expert bytes per token read by the CPU and copied over PCIe, CPU and device busy\n"
	       "shares, overlap, and what bounds it. Ends with a verdict per batch size.\n\n"
	       "With no arguments: a gpt-oss-120b-shaped model (2 layers of 32 experts, MXFP4\n"
	       "2880 x 2880, k = 4) generated once into the cache directory, a trace with gpt-oss\n"
	       "skew, every mode, batch 1 and 32, slots 0, 8 and 16, on the GPU when there is one,\n"
	       "else on the sim device with copies held to %.0f GB/s (a PCIe 4.0 x16 link).\n\n"
	       "  --model FILE     a GGUF model (its MoE layers are run)\n"
	       "  --preset NAME    generate a model of this shape (gpt-oss-120b, gpt-oss-20b,\n"
	       "                   qwen3-30b-a3b, qwen3-235b-a22b, tiny); --layers L (default 2) and\n"
	       "                   --experts E (default: the preset's) make it smaller\n"
	       "  --modes LIST     modes to run (default cpu,stream,hybrid,auto; auto = the mode the\n"
	       "                   cost model picks for that batch and hit rate)\n"
	       "  --batch LIST     tokens per step (default 1,32)\n"
	       "  --slots LIST     device cache slots per layer (default 0,E/4,E/2)\n"
	       "  --policy P       cache policy (default lru; caches start with the trace's most\n"
	       "                   used experts, one admission per layer step)\n"
	       "  --trace FILE     route by a recorded trace (`hotset trace`) instead of a synthetic one\n"
	       "  --skew NAME      synthetic routing: gpt-oss (default: the top 14/128 of experts take\n"
	       "                   60%%, locality 0.3), flat (uniform), steep (the same top take 85%%)\n"
	       "  --device D       cuda or sim (default: cuda when a GPU answers, else sim)\n"
	       "  --pcie GBPS      sim: copy bandwidth (default %.0f; $HOTSET_SIM_PCIE_GBPS wins)\n"
	       "  --threads N      CPU workers (default: the cores of the node, less one per sim\n"
	       "                   device thread or for the thread that drives the GPU)\n"
	       "  --steps N        measured steps per case at batch 1 (default 32; larger batches\n"
	       "                   a quarter, at least 4)\n"
	       "  --warmup N       steps run first and not measured (default 2)\n"
	       "  --csv FILE       the rows as CSV      --json     the rows as JSON on stdout\n"
	       "  --plot FILE      a picture: tokens/s against slots and against batch size\n"
	       "                   (gnuplot when installed, else a self-contained SVG)\n"
	       "  -q, --quiet      no progress on stderr\n"
	       "  -h, --help       this text\n",
	       25.0, 25.0);
}

struct cfg {
	const char *model, *preset, *trace, *skew, *device, *policy, *csv, *plot;
	int layers, experts, threads, steps, warmup, json, quiet;
	double pcie;
	int modes[4], n_modes; /* indices into MODE_NAMES */
	int batch[MAX_LIST], n_batch;
	int slots[MAX_LIST], n_slots;
};

static const char *const MODE_NAMES[] = { "cpu", "stream", "hybrid", "auto" };

static int quiet;
static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	if (quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "1,8,32" -> ints in lo..hi */
static int parse_list(const char *flag, const char *s, int lo, int hi, int *out, int *n)
{
	char buf[256], *tok[MAX_LIST];
	int k;
	if (hs_cli_split_list("bench", flag, s, buf, sizeof buf, tok, MAX_LIST, &k))
		return 1;
	for (*n = 0; *n < k; (*n)++) {
		if (hs_cli_parse_int("bench", flag, tok[*n], lo, hi, &out[*n]))
			return 1;
		for (int i = 0; i < *n; i++)
			if (out[i] == out[*n])
				return hs_cli_fail("bench", "%s: %d given twice", flag, out[*n]);
	}
	return 0;
}

static int parse_modes(const char *s, struct cfg *c)
{
	char buf[128], *tok[4];
	int k;
	if (hs_cli_split_list("bench", "--modes", s, buf, sizeof buf, tok, 4, &k))
		return 1;
	c->n_modes = 0;
	for (int j = 0; j < k; j++) {
		int m = -1;
		for (int i = 0; i < 4; i++)
			if (!strcmp(tok[j], MODE_NAMES[i]))
				m = i;
		if (m < 0)
			return hs_cli_fail("bench", "--modes: '%s' is not cpu, stream, hybrid or auto", tok[j]);
		for (int i = 0; i < c->n_modes; i++)
			if (c->modes[i] == m)
				return hs_cli_fail("bench", "--modes: %s given twice", tok[j]);
		c->modes[c->n_modes++] = m;
	}
	return 0;
}

/* A new empty file in $TMPDIR (else /tmp); its path in buf, its fd or -1. */
static int temp_file(char *buf, size_t n)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(buf, n, "%s/hotset-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	return mkstemp(buf);
}

/* ---- the model ------------------------------------------------------------- */

struct gen_progress {
	double last;
};

static void gen_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct gen_progress *g = ctx;
	double t = now_s();
	if (t - g->last < 1 && done < total)
		return;
	g->last = t;
	note("\r  writing %.0f of %.0f MiB", done / 1048576.0, total / 1048576.0);
	if (done >= total)
		note("\n");
}

/* The generated model's path in the cache directory (made if missing),
 * else in $TMPDIR (*temp = 1: removed at the end). */
static void model_path(const struct hs_gen_params *p, const char *preset, char *buf, size_t n, int *temp)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME"), *tmp = getenv("TMPDIR");
	char dir[2048];
	*temp = 0;
	if (xdg && *xdg)
		snprintf(dir, sizeof dir, "%s/hotset", xdg);
	else if (home && *home)
		snprintf(dir, sizeof dir, "%s/.cache/hotset", home);
	else
		dir[0] = 0;
	if (dir[0]) {
		char parent[2048];
		snprintf(parent, sizeof parent, "%s", dir);
		char *slash = strrchr(parent, '/');
		if (slash)
			*slash = 0;
		mkdir(parent, 0755);
		mkdir(dir, 0755);
	}
	if (!dir[0] || access(dir, W_OK) != 0) {
		snprintf(dir, sizeof dir, "%s", tmp && *tmp ? tmp : "/tmp");
		*temp = 1;
	}
	if (*temp)
		snprintf(buf, n, "%s/hotset-bench-%ld-%s-L%d-E%d.gguf", dir, (long)getpid(), preset, p->n_layers,
			 p->n_experts);
	else
		snprintf(buf, n, "%s/bench-%s-L%d-E%d-s%llu.gguf", dir, preset, p->n_layers, p->n_experts,
			 (unsigned long long)p->seed);
}

static int prepare_model(const struct cfg *c, char *path, size_t n, int *temp, hs_model **m)
{
	*temp = 0;
	if (c->model) {
		snprintf(path, n, "%s", c->model);
		if (hs_model_open(path, m))
			return hs_cli_fail("bench", "%s", hs_last_error());
		return 0;
	}
	const char *preset = c->preset ? c->preset : "gpt-oss-120b";
	const struct hs_gen_params *pp = hs__gen_preset(preset);
	if (!pp)
		return hs_cli_fail("bench", "--preset '%s': one of %s", preset, hs__gen_preset_names());
	struct hs_gen_params p = *pp;
	p.n_layers = c->layers > 0 ? c->layers : 2;
	if (c->experts > 0)
		p.n_experts = c->experts;
	else if (!c->preset)
		p.n_experts = 32;
	p.name = "hotset bench";
	if (hs__gen_check(&p))
		return hs_cli_fail("bench", "%s", hs_last_error());
	model_path(&p, preset, path, n, temp);
	if (!*temp && hs_model_open(path, m) == 0) {
		const struct hs_model_info *in = hs_model_info(*m);
		if (in->n_moe_layers == p.n_layers && in->n_experts == p.n_experts && in->n_used == p.n_used &&
		    in->n_embd == p.n_embd && in->n_ff == p.n_ff) {
			note("model: %s (generated earlier, reused)\n", path);
			return 0;
		}
		hs_model_free(*m);
		*m = NULL;
	}
	note("model: generating %s (%.0f MiB, once)\n", path, hs__gen_data_bytes(&p) / 1048576.0);
	struct gen_progress g = { 0 };
	if (hs__gen_write(&p, path, quiet ? NULL : gen_progress, &g) || hs_model_open(path, m)) {
		if (*temp)
			unlink(path);
		return hs_cli_fail("bench", "%s", hs_last_error());
	}
	return 0;
}

/* ---- routing --------------------------------------------------------------- */

struct routing {
	hs_trace *t;
	int n_layers;          /* MoE layers of the model */
	int *block;            /* [n_layers] block index of each */
	int **rec;             /* [n_layers][n_rec[l]] record indices in order */
	int *n_rec;
	int tokens;            /* tokens per record (the smallest) */
	float *freq;           /* [n_layers][E] share of pairs */
	int E, k;
};

static void routing_free(struct routing *r)
{
	for (int l = 0; l < r->n_layers && r->rec; l++)
		free(r->rec[l]);
	free(r->rec);
	free(r->n_rec);
	free(r->block);
	free(r->freq);
	hs_trace_free(r->t);
}

static int routing_load(const char *path, const char *shown, hs_model *m, struct routing *r)
{
	const struct hs_model_info *in = hs_model_info(m);
	int n_records, E, k;
	memset(r, 0, sizeof *r);
	if (hs_trace_load(path, &r->t))
		return hs_cli_fail("bench", "%s", hs_last_error());
	hs_trace_info(r->t, &n_records, &E, &k);
	if (E != in->n_experts || k != in->n_used)
		return hs_cli_fail("bench", "trace %s: %d experts, %d per token; the model has %d and %d", shown, E, k,
				   in->n_experts, in->n_used);
	r->E = E;
	r->k = k;
	r->n_layers = in->n_moe_layers;
	r->block = calloc(r->n_layers, sizeof *r->block);
	r->rec = calloc(r->n_layers, sizeof *r->rec);
	r->n_rec = calloc(r->n_layers, sizeof *r->n_rec);
	r->freq = calloc((size_t)r->n_layers * E, sizeof *r->freq);
	if (!r->block || !r->rec || !r->n_rec || !r->freq)
		return hs_cli_fail("bench", "out of memory");
	for (int b = 0, l = 0; b < in->n_layers; b++)
		if (hs_model_layer_is_moe(m, b))
			r->block[l++] = b;
	r->tokens = 1 << 30;
	for (int l = 0; l < r->n_layers; l++) {
		if (!(r->rec[l] = malloc(sizeof(int) * (n_records > 0 ? n_records : 1))))
			return hs_cli_fail("bench", "out of memory");
		double pairs = 0;
		for (int i = 0; i < n_records; i++) {
			int step, layer, n;
			const int32_t *ids;
			const float *w;
			hs_trace_record(r->t, i, &step, &layer, &n, &ids, &w);
			if (layer != r->block[l])
				continue;
			r->rec[l][r->n_rec[l]++] = i;
			if (n < r->tokens)
				r->tokens = n;
			for (int p = 0; p < n * k; p++)
				if (ids[p] >= 0) {
					r->freq[(size_t)l * E + ids[p]]++;
					pairs++;
				}
		}
		if (!r->n_rec[l])
			return hs_cli_fail("bench", "trace %s: no records for layer %d", shown, r->block[l]);
		for (int e = 0; e < E; e++)
			r->freq[(size_t)l * E + e] /= (float)(pairs > 0 ? pairs : 1);
	}
	return 0;
}

/* The routing of MoE layer l at step s for a batch of B tokens: the
 * tokens of consecutive records from record s * ceil(B / T) (wrapping). */
static void routing_step(const struct routing *r, int l, int s, int B, int32_t *ids, float *w)
{
	const int per = (B + r->tokens - 1) / r->tokens;
	int got = 0;
	for (int j = 0; got < B; j++) {
		int step, layer, n;
		const int32_t *ri;
		const float *rw;
		hs_trace_record(r->t, r->rec[l][((long)s * per + j) % r->n_rec[l]], &step, &layer, &n, &ri, &rw);
		int take = n < B - got ? n : B - got;
		memcpy(ids + (size_t)got * r->k, ri, sizeof(int32_t) * (size_t)take * r->k);
		memcpy(w + (size_t)got * r->k, rw, sizeof(float) * (size_t)take * r->k);
		got += take;
	}
}

/* What the cache gets on the measured steps (after `warm`), by replaying
 * the same routing through the cache simulator: the share of pairs that
 * hit, and admissions per step.  stream: the runtime's staging slots keep
 * the experts streamed last (a hot one stays while it is hit), so they
 * act as 2k more slots that take every miss. */
struct hits {
	double h, adm;
};

static struct hits predicted_hits(const struct routing *r, int l, int B, int slots, const char *policy, int warm,
				  int steps, int stream)
{
	struct hits out = { 0, 0 };
	enum hs_cache_policy p = !strcmp(policy, "lfu")	   ? HS_CACHE_LFU
				 : !strcmp(policy, "lfru")   ? HS_CACHE_LFRU
				 : !strcmp(policy, "static") ? HS_CACHE_STATIC
							     : HS_CACHE_LRU;
	int cap = 1;
	if (stream) {
		slots += 2 * r->k;
		p = HS_CACHE_LRU;
		cap = -1;
	}
	if (slots <= 0)
		return out;
	if (slots > r->E)
		slots = r->E;
	const int n = warm + steps, P = B * r->k;
	int *off = malloc(sizeof(int) * (n + 1)), *pairs = malloc(sizeof(int) * (size_t)n * P);
	int32_t *ex = malloc(sizeof(int32_t) * (size_t)n * P), *ids = malloc(sizeof(int32_t) * P);
	float *w = malloc(sizeof(float) * P);
	int *cnt = calloc(r->E, sizeof(int));
	if (!off || !pairs || !ex || !ids || !w || !cnt)
		goto out_free;
	off[0] = 0;
	for (int s = 0; s < n; s++) {
		routing_step(r, l, s, B, ids, w);
		memset(cnt, 0, sizeof(int) * r->E);
		for (int i = 0; i < P; i++)
			if (ids[i] >= 0 && ids[i] < r->E)
				cnt[ids[i]]++;
		off[s + 1] = off[s];
		for (int e = 0; e < r->E; e++)
			if (cnt[e]) {
				ex[off[s + 1]] = e;
				pairs[off[s + 1]++] = cnt[e];
			}
	}
	struct hs_cache_result a, b;
	const float *freq = stream && slots == 2 * r->k ? NULL : r->freq + (size_t)l * r->E;
	if (hs_cache_simulate(p, r->E, slots, cap, warm, off, ex, pairs, freq, &a) == 0 &&
	    hs_cache_simulate(p, r->E, slots, cap, n, off, ex, pairs, freq, &b) == 0 && b.accesses > a.accesses) {
		out.h = (double)(b.hits - a.hits) / (double)(b.accesses - a.accesses);
		out.adm = stream ? 0 : (double)(b.admissions - a.admissions) / steps;
	}
out_free:
	free(off);
	free(pairs);
	free(ex);
	free(ids);
	free(w);
	free(cnt);
	return out;
}

/* ---- one case -------------------------------------------------------------- */

/* measured steps of a case: batches over 1 take longer, a quarter (at least 4) */
static int batch_steps(const struct cfg *c, int B)
{
	if (B == 1)
		return c->steps;
	return c->steps / 4 > 4 ? c->steps / 4 : c->steps < 4 ? c->steps : 4;
}

struct run {
	const struct cfg *c;
	hs_model *m;
	const struct routing *r;
	struct hs__rates rates;            /* the current slot group's */
	struct hs__rates group[MAX_LIST];  /* measured before each slot group */
	struct hs__layer_step shape;
	float *x, *y, *w;
	int32_t *ids;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int run_case(struct run *u, hs_runtime *rt, int mode, int B, int slots, struct hs_bench_row *row)
{
	const struct cfg *c = u->c;
	const struct routing *r = u->r;
	const int L = r->n_layers, steps = batch_steps(c, B), warm = c->warmup;
	struct hs__cost cost[HS_MAX_LAYERS];
	double t_mode[4] = { 0 };

	memset(row, 0, sizeof *row);
	snprintf(row->mode, sizeof row->mode, "%s", MODE_NAMES[mode]);
	row->batch = B;
	row->slots = slots;
	/* the prediction, layer by layer, at the hit rate the policy gets (in
	 * stream mode with the staging slots too) */
	struct hs__cost cost_s[HS_MAX_LAYERS];
	double t_stream = 0, h_stream = 0, h_hybrid_add = 0;
	for (int l = 0; l < L; l++) {
		struct hs__layer_step w = u->shape;
		w.slots = slots;
		w.U = B;
		struct hits hc = predicted_hits(r, l, B, slots, c->policy, warm, steps, 0);
		w.h = hc.h;
		w.admit_experts = hc.adm;
		hs__layer_cost(&u->rates, &w, &cost[l]);
		for (int md = HS_MODE_CPU_COMPUTE; md <= HS_MODE_HYBRID; md++)
			t_mode[md] += cost[l].t[md];
		/* stream: the staging slots hold the experts streamed last */
		struct hits hs = predicted_hits(r, l, B, slots, c->policy, warm, steps, 1);
		struct hs__layer_step ws = w;
		ws.h = hs.h;
		ws.slots = slots + 2 * r->k < r->E ? slots + 2 * r->k : r->E;
		ws.admit_experts = 0;
		hs__layer_cost(&u->rates, &ws, &cost_s[l]);
		/* a staging slot whose expert is hit this step is not free for
		 * streaming; the free ones are reused within the step, but when
		 * none is free the misses all go to the CPU */
		const double staged_hits = cost_s[l].hit_experts - cost[l].hit_experts;
		if (2 * r->k - staged_hits < 0.5) {
			ws.max_streamed = -1;
			hs__layer_cost(&u->rates, &ws, &cost_s[l]);
		}
		t_stream += cost_s[l].t[HS_MODE_PCIE_STREAM];
		h_stream += hs.h / L;
		/* hybrid: its streamed share q of the misses stays in staging too */
		const double q = cost[l].q;
		if (q > 0) {
			struct hs__layer_step wh = w;
			wh.h = hc.h + q * (hs.h - hc.h);
			wh.slots = slots + (int)(q * 2 * r->k + 0.5);
			struct hs__cost ch;
			hs__layer_cost(&u->rates, &wh, &ch);
			t_mode[HS_MODE_HYBRID] += ch.t[HS_MODE_HYBRID] - cost[l].t[HS_MODE_HYBRID];
			h_hybrid_add += (wh.h - hc.h) / L;
			cost[l].t[HS_MODE_HYBRID] = ch.t[HS_MODE_HYBRID];
			cost[l].bound[HS_MODE_HYBRID] = ch.bound[HS_MODE_HYBRID];
		}
		row->hit_pred += hc.h / L;
	}
	t_mode[HS_MODE_PCIE_STREAM] = t_stream;
	static const enum hs_mode asked[3] = { HS_MODE_CPU_COMPUTE, HS_MODE_PCIE_STREAM, HS_MODE_HYBRID };
	enum hs_mode md = mode < 3 ? asked[mode] : HS_MODE_CPU_COMPUTE;
	if (mode == 3) /* auto: the mode the cost model finds fastest here */
		for (int k = HS_MODE_PCIE_STREAM; k <= HS_MODE_HYBRID; k++)
			if (t_mode[k] < t_mode[md])
				md = (enum hs_mode)k;
	if (md == HS_MODE_PCIE_STREAM) {
		row->hit_pred = h_stream;
		memcpy(cost, cost_s, sizeof(struct hs__cost) * L);
	} else if (md == HS_MODE_HYBRID) {
		row->hit_pred += h_hybrid_add;
	}
	double q = md == HS_MODE_PCIE_STREAM ? 1 : md == HS_MODE_CPU_COMPUTE ? 0 : -1;
	if (mode == 3 && md == HS_MODE_HYBRID) { /* the planner's share, averaged over the layers */
		q = 0;
		for (int l = 0; l < L; l++)
			q += cost[l].q / L;
	}
	snprintf(row->ran, sizeof row->ran, "%s", hs_mode_name(md));
	row->pred_tok_s = t_mode[md] > 0 ? B / t_mode[md] : 0;
	/* the bound: the layer with the longest predicted time */
	int worst = 0;
	for (int l = 1; l < L; l++)
		if (cost[l].t[md] > cost[worst].t[md])
			worst = l;
	snprintf(row->bound, sizeof row->bound, "%s", cost[worst].bound[md] ? cost[worst].bound[md] : "?");

	if (hs_runtime_reset(rt) || hs_runtime_set_cache_policy(rt, c->policy, 1) || hs_runtime_set_mode(rt, md, q))
		return hs_cli_fail("bench", "%s", hs_last_error());
	double *t = malloc(sizeof(double) * steps);
	struct hs_layer_report before[HS_MAX_LAYERS], after;
	if (!t)
		return hs_cli_fail("bench", "out of memory");
	for (int s = 0; s < warm + steps; s++) {
		if (s == warm)
			for (int l = 0; l < L; l++)
				hs_runtime_layer_report(rt, r->block[l], &before[l]);
		double t0 = now_s();
		for (int l = 0; l < L; l++) {
			routing_step(r, l, s, B, u->ids, u->w);
			if (hs_runtime_forward(rt, r->block[l], B, u->x, u->ids, u->w, u->y)) {
				free(t);
				return hs_cli_fail("bench", "layer %d: %s", r->block[l], hs_last_error());
			}
		}
		if (s >= warm)
			t[s - warm] = now_s() - t0;
	}
	qsort(t, steps, sizeof *t, cmp_double);
	/* the median, and the middle half of the steps for the spread */
	double med = steps % 2 ? t[steps / 2] : (t[steps / 2 - 1] + t[steps / 2]) / 2;
	row->tok_s = B / med;
	row->tok_lo = B / t[(3 * steps) / 4 < steps ? (3 * steps) / 4 : steps - 1];
	row->tok_hi = B / t[steps / 4];
	free(t);
	double wall = 0, busy[4] = { 0 }, pairs = 0, hits = 0, hostb = 0, pcieb = 0, streamed = 0, missed = 0;
	for (int l = 0; l < L; l++) {
		hs_runtime_layer_report(rt, r->block[l], &after);
		wall += after.wall_s - before[l].wall_s;
		for (int i = 0; i < 4; i++)
			busy[i] += after.busy_s[i] - before[l].busy_s[i];
		pairs += (double)(after.pairs - before[l].pairs);
		hits += (double)(after.hits - before[l].hits);
		hostb += (double)(after.host_bytes_read - before[l].host_bytes_read);
		pcieb += (double)(after.pcie_bytes - before[l].pcie_bytes);
		streamed += (double)(after.misses_streamed - before[l].misses_streamed);
		missed += (double)(after.misses_streamed - before[l].misses_streamed + after.misses_cpu -
				   before[l].misses_cpu);
	}
	const double tokens = (double)steps * B;
	row->hit = pairs > 0 ? hits / pairs : 0;
	row->host_bpt = hostb / tokens;
	row->pcie_bpt = pcieb / tokens;
	row->cpu_busy = wall > 0 ? busy[1] / wall : 0;
	row->gpu_busy = wall > 0 ? busy[2] / wall : 0;
	row->copy_busy = wall > 0 ? busy[3] / wall : 0;
	row->overlap = wall > 0 ? (busy[0] + busy[1] + busy[2] + busy[3]) / wall : 0;
	row->q = missed > 0 ? streamed / missed : 0;
	return 0;
}

/* ---- output ---------------------------------------------------------------- */

static void print_table(const struct hs_bench_row *rows, int n, FILE *f)
{
	fprintf(f, "%-7s %-12s %5s %5s %9s %7s %9s %6s %5s %5s %8s %8s %5s %5s %5s %5s  %s\n", "mode", "ran", "batch",
		"slots", "tok/s", "range", "predicted", "ratio", "hit", "pred", "host/tok", "pcie/tok", "cpu", "gpu",
		"copy", "ovl", "bound (predicted)");
	for (int i = 0; i < n; i++) {
		const struct hs_bench_row *r = &rows[i];
		char range[16];
		snprintf(range, sizeof range, "+-%.0f%%", r->tok_s > 0 ? 50 * (r->tok_hi - r->tok_lo) / r->tok_s : 0);
		fprintf(f, "%-7s %-12s %5d %5d %9.1f %7s %9.1f %6.2f %4.0f%% %4.0f%% %6.1fMi %6.1fMi %4.0f%% %4.0f%% %4.0f%% %5.2f  %s\n",
			r->mode, r->ran, r->batch, r->slots, r->tok_s, range, r->pred_tok_s,
			r->pred_tok_s > 0 ? r->tok_s / r->pred_tok_s : 0, 100 * r->hit, 100 * r->hit_pred,
			r->host_bpt / 1048576, r->pcie_bpt / 1048576, 100 * r->cpu_busy, 100 * r->gpu_busy,
			100 * r->copy_busy, r->overlap, r->bound);
	}
}

/* per batch size: which mode wins at each slot count, and by how much over
 * the next one */
static void verdict(const struct hs_bench_row *rows, int n, const struct cfg *c, FILE *f)
{
	for (int b = 0; b < c->n_batch; b++) {
		const int B = c->batch[b];
		char line[1024];
		int len = snprintf(line, sizeof line, "verdict, %s (batch %d):", B == 1 ? "decode" : "prefill", B);
		for (int s = 0; s < c->n_slots; s++) {
			int best = -1, second = -1;
			for (int i = 0; i < n; i++) {
				if (rows[i].batch != B || rows[i].slots != c->slots[s] || !strcmp(rows[i].mode, "auto"))
					continue;
				if (best < 0 || rows[i].tok_s > rows[best].tok_s) {
					second = best;
					best = i;
				} else if (second < 0 || rows[i].tok_s > rows[second].tok_s) {
					second = i;
				}
			}
			if (best < 0 || len >= (int)sizeof line)
				continue;
			if (second >= 0)
				len += snprintf(line + len, sizeof line - len, "%s %d slots: %s, %.2fx %s", s ? ";" : "",
						c->slots[s], rows[best].mode, rows[best].tok_s / rows[second].tok_s,
						rows[second].mode);
			else
				len += snprintf(line + len, sizeof line - len, "%s %d slots: %s", s ? ";" : "", c->slots[s],
						rows[best].mode);
		}
		fprintf(f, "%s\n", line);
	}
}

static int write_csv(const char *path, const struct hs_bench_row *rows, int n)
{
	char part[4096];
	snprintf(part, sizeof part, "%s.part", path);
	FILE *f = fopen(part, "w");
	if (!f)
		return hs_cli_fail("bench", "--csv %s: %s", path, strerror(errno));
	fprintf(f, "mode,ran,batch,slots,tok_s,tok_s_p25,tok_s_p75,predicted_tok_s,ratio,hit,hit_predicted,"
		   "host_bytes_per_token,pcie_bytes_per_token,cpu_busy,gpu_busy,copy_busy,overlap,q,bound\n");
	for (int i = 0; i < n; i++) {
		const struct hs_bench_row *r = &rows[i];
		fprintf(f, "%s,%s,%d,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.0f,%.0f,%.4f,%.4f,%.4f,%.4f,%.4f,%s\n", r->mode,
			r->ran, r->batch, r->slots, r->tok_s, r->tok_lo, r->tok_hi, r->pred_tok_s,
			r->pred_tok_s > 0 ? r->tok_s / r->pred_tok_s : 0, r->hit, r->hit_pred, r->host_bpt, r->pcie_bpt,
			r->cpu_busy, r->gpu_busy, r->copy_busy, r->overlap, r->q, r->bound);
	}
	int e = hs__finish_file(f, ferror(f) ? EIO : 0, part, path);
	if (e)
		return hs_cli_fail("bench", "--csv %s: write failed: %s", path, strerror(e));
	return 0;
}

static void print_rates_json(const struct hs__rates *rt, int slots, int last)
{
	printf("    { \"slots\": %d, \"host_read_gbps\": %.3f, \"cpu_kernel_gbps\": %.3f, \"cpu_gflops\": %.3f, "
	       "\"pcie_gbps\": %.3f, \"gpu_gbps\": %.3f, \"gpu_gflops\": %.3f, \"handoff_us\": %.1f, "
	       "\"step_us\": %.1f }%s\n",
	       slots, rt->read_Bps / 1e9, rt->cpu_Bps / 1e9, rt->cpu_flops / 1e9, rt->pcie_Bps / 1e9, rt->gpu_Bps / 1e9,
	       rt->gpu_flops / 1e9, rt->sync_s * 1e6, rt->step_s * 1e6, last ? "" : ",");
}

static void print_json(const struct hs_bench_row *rows, int n, const char *machine, const struct run *u,
		       const char *device)
{
	const struct cfg *c = u->c;
	printf("{\n  \"hotset_bench\": 1,\n  \"label\": \"measurements, with the cost model's predictions\",\n");
	printf("  \"machine\": \"%s\",\n  \"device\": \"%s\",\n", machine, device);
	printf("  \"rates\": [\n");
	for (int g = 0; g < c->n_slots; g++)
		print_rates_json(&u->group[g], c->slots[g], g + 1 == c->n_slots);
	printf("  ],\n");
	printf("  \"rows\": [\n");
	for (int i = 0; i < n; i++) {
		const struct hs_bench_row *r = &rows[i];
		printf("    { \"mode\": \"%s\", \"ran\": \"%s\", \"batch\": %d, \"slots\": %d, \"tok_s\": %.3f, "
		       "\"tok_s_p25\": %.3f, \"tok_s_p75\": %.3f, \"predicted_tok_s\": %.3f, \"hit\": %.4f, "
		       "\"hit_predicted\": %.4f, \"host_bytes_per_token\": %.0f, \"pcie_bytes_per_token\": %.0f, "
		       "\"cpu_busy\": %.4f, \"gpu_busy\": %.4f, \"copy_busy\": %.4f, \"overlap\": %.4f, \"q\": %.4f, "
		       "\"bound\": \"%s\" }%s\n",
		       r->mode, r->ran, r->batch, r->slots, r->tok_s, r->tok_lo, r->tok_hi, r->pred_tok_s, r->hit,
		       r->hit_pred, r->host_bpt, r->pcie_bpt, r->cpu_busy, r->gpu_busy, r->copy_busy, r->overlap, r->q,
		       r->bound, i + 1 < n ? "," : "");
	}
	printf("  ]\n}\n");
}

/* A gnuplot single-quoted string: quotes doubled, control characters out
 * (the title comes from the model file). */
static void gp_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("''", f);
		else
			fputc((unsigned char)*s < 32 ? ' ' : *s, f);
	fputc('\'', f);
}

/* Runs gnuplot on the script (no shell: paths and the title stay data);
 * 0 when it ran and succeeded, -ENOENT when it is not installed. */
static int run_gnuplot(const char *script)
{
	char *const args[] = { "gnuplot", (char *)script, NULL };
	pid_t pid;
	int st;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -rc;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* gnuplot when it is installed (SVG or PNG by the file's ending), else the
 * built-in SVG */
static int plot(const char *path, const char *title, const struct hs_bench_row *rows, int n, const struct cfg *c)
{
	const int B = c->batch[0], S = c->slots[c->n_slots - 1];
	const char *dot = strrchr(path, '.');
	const int png = dot && !strcmp(dot, ".png");
	char dat[4096], gp[4100], part[4100];
	snprintf(part, sizeof part, "%s.part", path);
	int fd = temp_file(dat, sizeof dat), rc = -ENOENT;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (f) {
		for (int m = 0; m < 4; m++) /* blocks: by slots then by batch, per mode */
			for (int by = 0; by < 2; by++) {
				fprintf(f, "# %s %s\n", MODE_NAMES[m], by ? "batch" : "slots");
				for (int i = 0; i < n; i++)
					if (!strcmp(rows[i].mode, MODE_NAMES[m]) && (by ? rows[i].slots == S : rows[i].batch == B))
						fprintf(f, "%d %.3f %.3f\n", by ? rows[i].batch : rows[i].slots, rows[i].tok_s,
							rows[i].pred_tok_s);
				fprintf(f, "\n\n");
			}
		fclose(f);
		snprintf(gp, sizeof gp, "%s.gp", dat);
		FILE *g = fopen(gp, "w");
		if (g) {
			fprintf(g, "set terminal %s size 900,420\nset output ", png ? "pngcairo" : "svg");
			gp_string(g, part);
			fprintf(g, "\nset multiplot layout 1,2 title ");
			gp_string(g, title);
			fprintf(g, "\nset key bottom\nset ylabel 'tokens/s'\n");
			for (int by = 0; by < 2; by++) {
				if (by)
					fprintf(g, "set logscale x 2\nset xlabel 'batch, %d slots (dashed: predicted)'\n", S);
				else
					fprintf(g, "set xlabel 'GPU cache slots, batch %d (dashed: predicted)'\n", B);
				fprintf(g, "plot for [m=0:3] ");
				gp_string(g, dat);
				fprintf(g, " index 2*m+%d using 1:2 with linespoints lc m+1 title word('cpu stream hybrid auto', m+1), "
					   "for [m=0:3] ", by);
				gp_string(g, dat);
				fprintf(g, " index 2*m+%d using 1:3 with lines dt 2 lc m+1 notitle\n", by);
			}
			fprintf(g, "unset multiplot\n");
			rc = fclose(g) ? -EIO : run_gnuplot(gp);
			unlink(gp);
		}
		unlink(dat);
	}
	if (rc == 0 && rename(part, path) == 0)
		return 0;
	unlink(part);
	if (rc != -ENOENT)
		note("plot: gnuplot failed; writing the built-in SVG instead\n");
	if (png)
		return hs_cli_fail("bench", "--plot %s: PNG needs gnuplot, which %s; use a .svg name", path,
				   rc == -ENOENT ? "is not installed" : "failed");
	rc = hs_bench_svg(path, title, rows, n, B, S);
	if (rc)
		return hs_cli_fail("bench", "--plot %s: %s", path, strerror(-rc));
	return 0;
}

/* ---- the command ------------------------------------------------------------ */

static void calib_progress(const char *what, double f, void *ctx)
{
	(void)ctx;
	(void)f;
	note("  %s\n", what);
}

int hs_cmd_bench(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },  { "preset", required_argument, NULL, 'P' },
		{ "layers", required_argument, NULL, 'L' }, { "experts", required_argument, NULL, 'E' },
		{ "modes", required_argument, NULL, 'M' },  { "batch", required_argument, NULL, 'b' },
		{ "slots", required_argument, NULL, 's' },  { "policy", required_argument, NULL, 'p' },
		{ "trace", required_argument, NULL, 't' },  { "skew", required_argument, NULL, 'k' },
		{ "device", required_argument, NULL, 'd' }, { "pcie", required_argument, NULL, 'g' },
		{ "threads", required_argument, NULL, 'T' }, { "steps", required_argument, NULL, 'S' },
		{ "warmup", required_argument, NULL, 'W' }, { "csv", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },         { "plot", required_argument, NULL, 'o' },
		{ "quiet", no_argument, NULL, 'q' },        { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct cfg c = { .policy = "lru", .skew = "gpt-oss", .steps = 32, .warmup = 2, .pcie = 25,
			 .modes = { 0, 1, 2, 3 }, .n_modes = 4, .batch = { 1, 32 }, .n_batch = 2 };
	int ch, given_slots = 0, rc = 1, temp_model = 0;
	char model_file[4096] = "", trace_file[4096] = "";
	hs_model *m = NULL;
	hs_runtime *rt = NULL;
	struct routing r = { 0 };
	struct hs_bench_row *rows = NULL;
	struct hs_plan *plan = NULL;
	struct run u = { 0 };

	optind = 0;
	while ((ch = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (ch) {
		case 'm': c.model = optarg; break;
		case 'P': c.preset = optarg; break;
		case 'L': if (hs_cli_parse_int("bench", "--layers", optarg, 1, HS_MAX_LAYERS, &c.layers)) return 1; break;
		case 'E': if (hs_cli_parse_int("bench", "--experts", optarg, 2, 1024, &c.experts)) return 1; break;
		case 'M': if (parse_modes(optarg, &c)) return 1; break;
		case 'b': if (parse_list("--batch", optarg, 1, 512, c.batch, &c.n_batch)) return 1; break;
		case 's':
			if (parse_list("--slots", optarg, 0, 1024, c.slots, &c.n_slots))
				return 1;
			given_slots = 1;
			break;
		case 'p': c.policy = optarg; break;
		case 't': c.trace = optarg; break;
		case 'k': c.skew = optarg; break;
		case 'd': c.device = optarg; break;
		case 'g': if (hs_cli_parse_num("bench", "--pcie", optarg, 0.1, 1000, &c.pcie)) return 1; break;
		case 'T': if (hs_cli_parse_int("bench", "--threads", optarg, 1, 4096, &c.threads)) return 1; break;
		case 'S': if (hs_cli_parse_int("bench", "--steps", optarg, 1, 100000, &c.steps)) return 1; break;
		case 'W': if (hs_cli_parse_int("bench", "--warmup", optarg, 0, 100000, &c.warmup)) return 1; break;
		case 'c': c.csv = optarg; break;
		case 'j': c.json = 1; break;
		case 'o': c.plot = optarg; break;
		case 'q': c.quiet = 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("bench");
		}
	}
	quiet = c.quiet;
	if (optind < argc)
		return hs_cli_fail("bench", "unexpected argument '%s'", argv[optind]);
	if (c.model && (c.preset || c.layers || c.experts))
		return hs_cli_fail("bench", "--model and --preset/--layers/--experts exclude each other");
	if (strcmp(c.policy, "lru") && strcmp(c.policy, "lfu") && strcmp(c.policy, "lfru") && strcmp(c.policy, "static"))
		return hs_cli_fail("bench", "--policy '%s': lru, lfu, lfru or static", c.policy);
	double top_share, locality;
	if (!strcmp(c.skew, "gpt-oss"))
		top_share = 0.60, locality = 0.3;
	else if (!strcmp(c.skew, "steep"))
		top_share = 0.85, locality = 0.3;
	else if (!strcmp(c.skew, "flat"))
		top_share = -1, locality = 0;
	else
		return hs_cli_fail("bench", "--skew '%s': gpt-oss, flat or steep", c.skew);
	if (c.device && !*c.device)
		return hs_cli_fail("bench", "--device '': give cuda or sim");
	if (c.device && strcmp(c.device, "sim") && strcmp(c.device, "cuda"))
		return hs_cli_fail("bench", "--device '%s': cuda or sim", c.device);
	/* the outputs can be written: checked before a minute of measuring */
	if ((c.csv && hs_cli_check_output("bench", "--csv", c.csv)) ||
	    (c.plot && hs_cli_check_output("bench", "--plot", c.plot)))
		return 1;
	const char *device = c.device ? c.device : hs_cuda_device_count() > 0 ? "cuda" : "sim";
	const int sim = !strcmp(device, "sim");
	if (sim) { /* the sim's copies held to a PCIe-like link, unless the caller chose */
		char v[32];
		snprintf(v, sizeof v, "%g", c.pcie);
		setenv("HOTSET_SIM_PCIE_GBPS", v, 0); /* no added latency: a sleep that short lasts ~80 us here */
	}

	/* the device first: a missing GPU is said before a model is generated */
	struct hs_device *d = NULL;
	if (hs__device_open(device, 0, &d))
		return hs_cli_fail("bench", "device %s: %s", device, hs_last_error());
	/* the model */
	if (prepare_model(&c, model_file, sizeof model_file, &temp_model, &m))
		goto out_close;
	const struct hs_model_info *in = hs_model_info(m);
	const int E = in->n_experts, K = in->n_used, max_slots = E - 2 * K;
	if (max_slots < 0)
		goto bad_shape;
	if (!given_slots) {
		c.n_slots = 0;
		c.slots[c.n_slots++] = 0;
		if (max_slots >= E / 4 && E / 4 >= 2 * K)
			c.slots[c.n_slots++] = E / 4;
		if (max_slots >= E / 2 && E / 2 > E / 4 && E / 2 >= 2 * K)
			c.slots[c.n_slots++] = E / 2;
	}
	for (int i = 0; i < c.n_slots; i++)
		if (c.slots[i] > max_slots) {
			hs_cli_fail("bench", "--slots %d: at most %d for %d experts (2 x %d stay for streaming)", c.slots[i],
				    max_slots, E, K);
			goto out_close;
		}
	int max_b = 1;
	for (int i = 0; i < c.n_batch; i++)
		max_b = c.batch[i] > max_b ? c.batch[i] : max_b;

	/* the routing */
	if (c.trace) {
		if (routing_load(c.trace, c.trace, m, &r))
			goto out_close;
	} else {
		int fd = temp_file(trace_file, sizeof trace_file);
		if (fd < 0) {
			hs_cli_fail("bench", "temporary trace %s: %s", trace_file, strerror(errno));
			trace_file[0] = 0;
			goto out_close;
		}
		close(fd);
		int top = (E * 14 + 64) / 128 > 0 ? (E * 14 + 64) / 128 : 1;
		double share = top_share < 0 ? (double)top / E : top_share;
		if (hs_trace_generate(trace_file, in->n_moe_layers, E, K, c.warmup + c.steps, max_b, top, share, locality,
				      1)) {
			hs_cli_fail("bench", "%s", hs_last_error());
			goto out_close;
		}
		if (routing_load(trace_file, "(generated)", m, &r))
			goto out_close;
		note("routing: synthetic, %s skew (the top %d of %d experts take %.0f%% of the pairs, locality %.1f)\n",
		     c.skew, top, E, 100 * share, locality);
	}

	/* this machine's threads and rates */
	hs_topology *topo = NULL;
	int cores = 1, node = 0;
	if (hs_topology_open(NULL, &topo) == 0) {
		const struct hs_numa_node *nd = hs_topology_node(topo, 0);
		for (int g = 0; !sim && g < hs_topology_n_gpus(topo); g++) /* the GPU's node */
			if (hs_topology_gpu(topo, g)->cuda_index == 0 && hs_topology_gpu(topo, g)->n_numa_nodes > 0)
				for (int i = 0; i < hs_topology_n_nodes(topo); i++)
					if (hs_topology_node(topo, i)->os_index == hs_topology_gpu(topo, g)->numa_nodes[0])
						nd = hs_topology_node(topo, i);
		if (nd) {
			cores = nd->n_cores > 0 ? nd->n_cores : 1;
			node = nd->os_index;
		}
		hs_topology_free(topo);
	}
	char dev_desc[160];
	snprintf(dev_desc, sizeof dev_desc, "%s", d->ops->describe(d->dev));
	int dev_threads = sim ? atoi(getenv("HOTSET_SIM_THREADS") ? getenv("HOTSET_SIM_THREADS") : "1") : 1;
	if (dev_threads < 1)
		dev_threads = 1;
	const int threads = c.threads ? c.threads : cores - dev_threads > 0 ? cores - dev_threads : 1;
	const int moe0 = r.block[0];
	note("calibrating: this machine's rates for layer %d's experts (%d CPU thread%s, %s)\n", moe0, threads,
	     threads == 1 ? "" : "s", dev_desc);
	int crc = hs__calibrate(m, moe0, node, d, threads, max_b, calib_progress, NULL, &u.group[0]);
	hs__device_close(d);
	d = NULL;
	if (crc) {
		hs_cli_fail("bench", "calibration: %s", hs_last_error());
		goto out_close;
	}
	u.c = &c;
	u.m = m;
	u.r = &r;
	/* the sim's kernels and copies run on the cores the workers leave */
	const int device_cores = sim ? (cores - threads > 0 ? cores - threads : 1) : 0;
	u.shape = (struct hs__layer_step){ .S = (double)(in->expert_weight_bytes + in->expert_bias_bytes),
					   .flop_pair = 2.0 * 3 * in->n_embd * in->n_ff, .E = E, .k = K };
	u.x = malloc(sizeof(float) * (size_t)max_b * in->n_embd);
	u.y = malloc(sizeof(float) * (size_t)max_b * in->n_embd);
	u.w = malloc(sizeof(float) * (size_t)max_b * K);
	u.ids = malloc(sizeof(int32_t) * (size_t)max_b * K);
	const int n_rows = c.n_modes * c.n_batch * c.n_slots;
	rows = calloc(n_rows, sizeof *rows);
	plan = calloc(1, sizeof *plan);
	if (!u.x || !u.y || !u.w || !u.ids || !rows || !plan) {
		hs_cli_fail("bench", "out of memory");
		goto out_close;
	}
	uint64_t sd = 3;
	for (size_t i = 0; i < (size_t)max_b * in->n_embd; i++) {
		sd = sd * 6364136223846793005ull + 1442695040888963407ull;
		u.x[i] = (float)((int)((sd >> 33) % 2001) - 1000) / 1000.0f;
	}

	char machine[256];
	{
		char host[64] = "";
		gethostname(host, sizeof host - 1);
		snprintf(machine, sizeof machine, "%s, %d core%s on node %d, %s CPU kernels", host, cores,
			 cores == 1 ? "" : "s", node, hs_cpu_kernels_name());
	}
	if (!c.json) {
		printf("hotset bench (measurements; \"predicted\" = the cost model with the rates below)\n");
		printf("machine: %s\n", machine);
		printf("device:  %s%s\n", dev_desc, sim ? "  [sim: the device is threads of this CPU]" : "");
		printf("model:   %s: %d MoE layers x %d experts (%d per token), %d x %d %s, %.2f MiB per expert\n",
		       model_file, in->n_moe_layers, E, K, in->n_embd, in->n_ff, in->expert_type_name,
		       u.shape.S / 1048576);
		printf("routing: %s; cache policy %s, 1 admission per layer step, warm start from the routing\n",
		       c.trace ? c.trace : "synthetic", c.policy);
		printf("steps:   %d warm-up (not measured) + %d measured per case (%d for batches over 1); the median "
		       "is shown, +- half the spread of the middle half of the steps\n",
		       c.warmup, c.steps, batch_steps(&c, 2));
		printf("rates:   measured again just before each slot count's cases, so a prediction and its\n"
		       "         measurement are minutes apart at most (listed above the table)\n");
		fflush(stdout);
	}

	int done = 0;
	double t_start = now_s();
	for (int s = 0; s < c.n_slots; s++) {
		if (s > 0) { /* the rates again: this machine's speed drifts */
			note("calibrating again\n");
			if (hs__device_open(device, 0, &d) ||
			    hs__calibrate(m, moe0, node, d, threads, max_b, calib_progress, NULL, &u.group[s])) {
				hs_cli_fail("bench", "calibration: %s", hs_last_error());
				goto out_close;
			}
			hs__device_close(d);
			d = NULL;
		}
		u.rates = u.group[s];
		u.rates.device_cores = device_cores;
		/* every MoE layer on the host with these slots, on the chosen node */
		memset(plan, 0, sizeof *plan);
		snprintf(plan->model, sizeof plan->model, "%s", in->name[0] ? in->name : "model");
		snprintf(plan->machine, sizeof plan->machine, "%.127s", machine);
		snprintf(plan->profile_source, sizeof plan->profile_source, "measured");
		plan->gpu = 0;
		plan->n_layers = in->n_moe_layers;
		for (int l = 0; l < plan->n_layers; l++) {
			struct hs_plan_layer *pl = &plan->layers[l];
			pl->layer = r.block[l];
			pl->placement = c.slots[s] ? HS_PLACEMENT_HOST_CACHE : HS_PLACEMENT_HOST;
			pl->slots = c.slots[s];
			pl->n_numa_nodes = 1;
			pl->numa_nodes[0] = node;
		}
		plan->n_host_layers = plan->n_layers;
		plan->total_slots = c.slots[s] * plan->n_layers;
		plan->cpu_node = node;
		plan->cpu_threads = threads;
		plan->decode_mode = plan->prefill_mode = HS_MODE_CPU_COMPUTE;
		plan->ctx = 8192;
		plan->ubatch = max_b;
		struct hs_runtime_opts o = { .device = device, .plan = plan, .q = -1, .max_tokens = max_b,
					     .threads = threads, .admit_per_step = 1, .cache_policy = c.policy,
					     .routing_freq = r.freq };
		note("loading: %d slots per layer\n", c.slots[s]);
		if (hs_runtime_open(model_file, &o, &rt)) {
			hs_cli_fail("bench", "%s", hs_last_error());
			goto out_close;
		}
		const char *desc = hs_runtime_describe(rt);
		for (const char *p = desc; p && *p;) { /* the runtime's warnings: what was lost */
			const char *nl = strchr(p, '\n');
			int len = nl ? (int)(nl - p) : (int)strlen(p);
			if (!strncmp(p, "warning", 7))
				fprintf(stderr, "hotset bench: %.*s\n", len, p);
			p = nl ? nl + 1 : NULL;
		}
		for (int b = 0; b < c.n_batch; b++)
			for (int mi = 0; mi < c.n_modes; mi++) {
				struct hs_bench_row *row = &rows[done];
				note("[%d/%d] %-6s batch %-3d slots %-3d ... ", done + 1, n_rows, MODE_NAMES[c.modes[mi]],
				     c.batch[b], c.slots[s]);
				if (run_case(&u, rt, c.modes[mi], c.batch[b], c.slots[s], row))
					goto out_close;
				note("%.1f tok/s (predicted %.1f), %.0f s so far\n", row->tok_s, row->pred_tok_s,
				     now_s() - t_start);
				done++;
			}
		hs_runtime_close(rt);
		rt = NULL;
	}
	/* rows in reading order: by batch, then slots, then mode */
	struct hs_bench_row *sorted = calloc(n_rows, sizeof *sorted);
	if (!sorted) {
		hs_cli_fail("bench", "out of memory");
		goto out_close;
	}
	int k = 0;
	for (int b = 0; b < c.n_batch; b++)
		for (int i = 0; i < n_rows; i++)
			if (rows[i].batch == c.batch[b])
				sorted[k++] = rows[i];
	free(rows);
	rows = sorted;
	if (c.json) {
		print_json(rows, n_rows, machine, &u, dev_desc);
	} else {
		printf("\n");
		for (int g = 0; g < c.n_slots; g++) {
			const struct hs__rates *gr = &u.group[g];
			printf("rates before the %d-slot cases (measured%s): host read %.1f GB/s, CPU kernel %.1f GB/s at 1 "
			       "token and %.1f GFLOP/s at %d, copies %.1f GB/s, device kernel %.1f GB/s and %.1f GFLOP/s, "
			       "hand-off %.0f us, step %.0f us\n",
			       c.slots[g], sim ? ", sim" : "", gr->read_Bps / 1e9, gr->cpu_Bps / 1e9, gr->cpu_flops / 1e9, max_b,
			       gr->pcie_Bps / 1e9, gr->gpu_Bps / 1e9, gr->gpu_flops / 1e9, gr->sync_s * 1e6, gr->step_s * 1e6);
		}
		printf("\n");
		print_table(rows, n_rows, stdout);
		printf("(tok/s: tokens per second of the MoE part, measured; ratio = measured / predicted; hit: share of\n"
		       " (token, expert) pairs on the device, measured and predicted by replaying the routing through\n"
		       " the cache policy; host/tok, pcie/tok: expert MiB per token read by the CPU and copied; cpu, gpu,\n"
		       " copy: lane busy share of the layers' time; ovl: the lanes' busy time / wall time)\n");
		verdict(rows, n_rows, &c, stdout);
	}
	if (c.csv && write_csv(c.csv, rows, n_rows))
		goto out_close;
	if (c.plot) {
		char title[256];
		snprintf(title, sizeof title, "hotset bench: %s, %s%s", in->name[0] ? in->name : "model", dev_desc,
			 sim ? " (sim)" : "");
		if (plot(c.plot, title, rows, n_rows, &c))
			goto out_close;
		note("plot: %s\n", c.plot);
	}
	rc = 0;
	goto out_close;
bad_shape:
	hs_cli_fail("bench", "%s: %d experts with %d per token leave no room for a cache and staging slots",
		    model_file, in->n_experts, in->n_used);
out_close:
	if (d)
		hs__device_close(d);
	if (rt)
		hs_runtime_close(rt);
	routing_free(&r);
	if (trace_file[0])
		unlink(trace_file);
	hs_model_free(m);
	if (temp_model)
		unlink(model_file);
	free(u.x);
	free(u.y);
	free(u.w);
	free(u.ids);
	free(rows);
	free(plan);
	return rc;
}
