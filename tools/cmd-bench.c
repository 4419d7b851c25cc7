/* `hotset bench`: cpu-compute, pcie-stream, hybrid and the planner's
 * choice side by side on this machine, for decode and a prefill batch and
 * for several cache sizes, each measured next to the cost model's
 * prediction from rates measured in the same run.  This file: the flags,
 * one measured case and the run; bench-inputs.c makes the model and the
 * routing, bench-output.c writes the table, CSV, JSON and plot. */
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
	       "shares, overlap, and what bounds it. Ends with a verdict per batch size.\n"
	       "`hotset bench --e2e` measures the whole model instead (pp and tg tokens/s as\n"
	       "llama-bench does; `hotset bench --e2e --help`).\n\n"
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

const char *const hs_bench_mode_names[4] = { "cpu", "stream", "hybrid", "auto" };

int hs_bench_quiet;
void hs_bench_note(const char *fmt, ...)
{
	if (hs_bench_quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fflush(stderr);
}

double hs_bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "1,8,32" -> ints in lo..hi */
static int parse_list(const char *flag, const char *s, int lo, int hi, int *out, int *n)
{
	char buf[256], *tok[HS_BENCH_MAX_LIST];
	int k;
	if (hs_cli_split_list("bench", flag, s, buf, sizeof buf, tok, HS_BENCH_MAX_LIST, &k))
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

static int parse_modes(const char *s, struct bench_cfg *c)
{
	char buf[128], *tok[4];
	int k;
	if (hs_cli_split_list("bench", "--modes", s, buf, sizeof buf, tok, 4, &k))
		return 1;
	c->n_modes = 0;
	for (int j = 0; j < k; j++) {
		int m = -1;
		for (int i = 0; i < 4; i++)
			if (!strcmp(tok[j], hs_bench_mode_names[i]))
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
int hs_bench_temp_file(char *buf, size_t n)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(buf, n, "%s/hotset-bench-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	return mkstemp(buf);
}

/* ---- one case -------------------------------------------------------------- */

/* measured steps of a case: batches over 1 take longer, a quarter (at least 4) */
static int batch_steps(const struct bench_cfg *c, int B)
{
	if (B == 1)
		return c->steps;
	return c->steps / 4 > 4 ? c->steps / 4 : c->steps < 4 ? c->steps : 4;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int run_case(struct bench_run *u, hs_runtime *rt, int mode, int B, int slots, struct hs_bench_row *row)
{
	const struct bench_cfg *c = u->c;
	const struct bench_routing *r = u->r;
	const int L = r->n_layers, steps = batch_steps(c, B), warm = c->warmup;
	struct hs__cost cost[HS_MAX_LAYERS];
	double t_mode[4] = { 0 };

	memset(row, 0, sizeof *row);
	snprintf(row->mode, sizeof row->mode, "%s", hs_bench_mode_names[mode]);
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
		struct bench_hits hc = hs_bench_predicted_hits(r, l, B, slots, c->policy, warm, steps, 0);
		w.h = hc.h;
		w.admit_experts = hc.adm;
		hs__layer_cost(&u->rates, &w, &cost[l]);
		for (int md = HS_MODE_CPU_COMPUTE; md <= HS_MODE_HYBRID; md++)
			t_mode[md] += cost[l].t[md];
		/* stream: the staging slots hold the experts streamed last */
		struct bench_hits hs = hs_bench_predicted_hits(r, l, B, slots, c->policy, warm, steps, 1);
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
		double t0 = hs_bench_now();
		for (int l = 0; l < L; l++) {
			hs_bench_routing_step(r, l, s, B, u->ids, u->w);
			if (hs_runtime_forward(rt, r->block[l], B, u->x, u->ids, u->w, u->y)) {
				free(t);
				return hs_cli_fail("bench", "layer %d: %s", r->block[l], hs_last_error());
			}
		}
		if (s >= warm)
			t[s - warm] = hs_bench_now() - t0;
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

/* ---- the command ------------------------------------------------------------ */

static void calib_progress(const char *what, double f, void *ctx)
{
	(void)ctx;
	(void)f;
	hs_bench_note("  %s\n", what);
}

int hs_cmd_bench(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (strcmp(argv[i], "--e2e") == 0)
			return hs_cmd_bench_e2e(argc, argv);
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
	struct bench_cfg c = { .policy = "lru", .skew = "gpt-oss", .steps = 32, .warmup = 2, .pcie = 25,
			 .modes = { 0, 1, 2, 3 }, .n_modes = 4, .batch = { 1, 32 }, .n_batch = 2 };
	int ch, given_slots = 0, rc = 1, temp_model = 0;
	char model_file[4096] = "", trace_file[4096] = "";
	hs_model *m = NULL;
	hs_runtime *rt = NULL;
	struct bench_routing r = { 0 };
	struct hs_bench_row *rows = NULL;
	struct hs_plan *plan = NULL;
	struct bench_run u = { 0 };

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
	hs_bench_quiet = c.quiet;
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
	if (hs_bench_prepare_model(&c, model_file, sizeof model_file, &temp_model, &m))
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
		if (hs_bench_routing_load(c.trace, c.trace, m, &r))
			goto out_close;
	} else {
		int fd = hs_bench_temp_file(trace_file, sizeof trace_file);
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
		if (hs_bench_routing_load(trace_file, "(generated)", m, &r))
			goto out_close;
		hs_bench_note("routing: synthetic, %s skew (the top %d of %d experts take %.0f%% of the pairs, locality %.1f)\n",
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
	hs_bench_note("calibrating: this machine's rates for layer %d's experts (%d CPU thread%s, %s)\n", moe0, threads,
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
		       model_file, in->n_moe_layers, E, K, in->n_embd, in->n_ff, in->expert_types,
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
	double t_start = hs_bench_now();
	for (int s = 0; s < c.n_slots; s++) {
		if (s > 0) { /* the rates again: this machine's speed drifts */
			hs_bench_note("calibrating again\n");
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
		hs_bench_note("loading: %d slots per layer\n", c.slots[s]);
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
				hs_bench_note("[%d/%d] %-6s batch %-3d slots %-3d ... ", done + 1, n_rows, hs_bench_mode_names[c.modes[mi]],
				     c.batch[b], c.slots[s]);
				if (run_case(&u, rt, c.modes[mi], c.batch[b], c.slots[s], row))
					goto out_close;
				hs_bench_note("%.1f tok/s (predicted %.1f), %.0f s so far\n", row->tok_s, row->pred_tok_s,
				     hs_bench_now() - t_start);
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
		hs_bench_print_json(rows, n_rows, machine, &u, dev_desc);
	} else {
		printf("\n");
		for (int g = 0; g < c.n_slots; g++) {
			const struct hs__rates *gr = &u.group[g];
			/* FLOP rates are measured at the largest batch, none when it is 1 */
			char cf[48] = "", gf[48] = "";
			if (max_b > 1) {
				snprintf(cf, sizeof cf, " and %.1f GFLOP/s at %d", gr->cpu_flops / 1e9, max_b);
				snprintf(gf, sizeof gf, " and %.1f GFLOP/s", gr->gpu_flops / 1e9);
			}
			printf("rates before the %d-slot cases (measured%s): host read %.1f GB/s, CPU kernel %.1f GB/s at 1 "
			       "token%s, copies %.1f GB/s, device kernel %.1f GB/s%s, hand-off %.0f us, step %.0f us\n",
			       c.slots[g], sim ? ", sim" : "", gr->read_Bps / 1e9, gr->cpu_Bps / 1e9, cf, gr->pcie_Bps / 1e9,
			       gr->gpu_Bps / 1e9, gf, gr->sync_s * 1e6, gr->step_s * 1e6);
		}
		printf("\n");
		hs_bench_print_table(rows, n_rows, stdout);
		printf("(tok/s: tokens per second of the MoE part, measured; ratio = measured / predicted; hit: share of\n"
		       " (token, expert) pairs on the device, measured and predicted by replaying the routing through\n"
		       " the cache policy; host/tok, pcie/tok: expert MiB per token read by the CPU and copied; cpu, gpu,\n"
		       " copy: lane busy share of the layers' time; ovl: the lanes' busy time / wall time)\n");
		hs_bench_verdict(rows, n_rows, &c, stdout);
	}
	if (c.csv && hs_bench_write_csv(c.csv, rows, n_rows))
		goto out_close;
	if (c.plot) {
		char title[256];
		/* the model bench generates is named "hotset bench" itself */
		const char *name = !in->name[0] || strncmp(in->name, "hotset bench", 12) == 0 ? "generated model" : in->name;
		snprintf(title, sizeof title, "hotset bench: %s, %s%s", name, dev_desc, sim ? " (sim)" : "");
		if (hs_bench_plot(c.plot, title, rows, n_rows, &c))
			goto out_close;
		hs_bench_note("plot: %s\n", c.plot);
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
	hs_bench_routing_free(&r);
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

