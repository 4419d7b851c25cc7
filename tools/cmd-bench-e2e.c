/* `hotset bench --e2e`: the whole model end to end, as llama-bench measures
 * it: pp (a prompt of N tokens in one ubatch) and tg (N tokens generated one
 * at a time from an empty context), tokens per second, per device and expert
 * mode, with where the time went and the decode's weight bytes per second
 * beside this machine's read bandwidth measured in the same run. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "measure/calibrate.h"
#include "model/gen.h"
#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset bench --e2e [--model FILE | --preset NAME] [--layers L] [--experts E] [--vocab V]\n"
	       "                    [--devices LIST] [--modes LIST] [--pp N] [--tg N] [--reps R] [--threads N] [-v] [-q]\n\n"
	       "Runs the whole model as llama-bench does: ppN is a prompt of N tokens in one ubatch,\n"
	       "tgN is N tokens generated one at a time from an empty context; tokens per second\n"
	       "(median and range over R repetitions, after a warm-up), where the time went\n"
	       "(attention with its projections, MoE, the rest), and the generation's weight bytes\n"
	       "per second beside this machine's read bandwidth, measured in the same run.\n\n"
	       "  --model FILE    a whole model file; default: a generated gpt-oss-120b-shaped model\n"
	       "                  (2 layers x 32 experts, kept in $XDG_CACHE_HOME/hotset)\n"
	       "  --preset NAME   the shape to generate (default gpt-oss-120b)\n"
	       "  --layers L      layers of the generated model (default 2)\n"
	       "  --experts E     experts per layer of the generated model (default 32)\n"
	       "  --vocab V       its vocabulary (default 1024)\n"
	       "  --devices LIST  cpu, sim, cuda, comma-separated (default: cuda when a device\n"
	       "                  answers, else cpu and sim)\n"
	       "  --modes LIST    expert modes on a device: cpu, stream, hybrid, auto (default auto)\n"
	       "  --pp N          prompt tokens (default 512)     --tg N   generated tokens (default 128)\n"
	       "  --reps R        repetitions (default 3)         --threads N  CPU workers\n"
	       "  -v, --verbose   after each row, where a generated token's time went step by step\n"
	       "                  (ms, share, weight and cache MB read, GB/s, worker-pool dispatches),\n"
	       "                  then the prompt's (ms, share, dispatches)\n"
	       "  -q, --quiet     no progress\n");
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct opts {
	const char *model, *preset, *devices, *modes;
	int layers, experts, vocab, pp, tg, reps, threads, quiet, verbose;
};

/* The generated model: made once, kept in the cache directory. */
static int model_file(const struct opts *o, char *path, size_t n)
{
	const struct hs_gen_params *pp = hs__gen_preset(o->preset);
	if (!pp)
		return hs_cli_fail("bench", "--preset %s: one of %s", o->preset, hs__gen_preset_names());
	struct hs_gen_params p = *pp;
	p.n_layers = o->layers;
	p.n_experts = o->experts;
	p.n_vocab = o->vocab;
	p.name = "hotset bench e2e";
	if (hs__gen_check(&p))
		return hs_cli_fail("bench", "%s", hs_last_error());
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char dir[3072];
	if (xdg && *xdg)
		snprintf(dir, sizeof dir, "%s/hotset", xdg);
	else
		snprintf(dir, sizeof dir, "%s/.cache/hotset", home && *home ? home : "/tmp");
	snprintf(path, n, "%s/e2e-%s-l%d-e%d-v%d.gguf", dir, o->preset, p.n_layers, p.n_experts, p.n_vocab);
	struct stat st;
	if (stat(path, &st) == 0)
		return 0;
	for (char *s = dir + 1; *s; s++) /* mkdir -p */
		if (*s == '/') {
			*s = 0;
			mkdir(dir, 0755);
			*s = '/';
		}
	if (mkdir(dir, 0755) && errno != EEXIST)
		return hs_cli_fail("bench", "%s: cannot create: %s", dir, strerror(errno));
	if (!o->quiet)
		fprintf(stderr, "bench: generating %s (%.0f MiB, once)\n", path, hs__gen_data_bytes(&p) / 1048576.0);
	if (hs__gen_write(&p, path, NULL, NULL))
		return hs_cli_fail("bench", "%s", hs_last_error());
	return 0;
}

struct result {
	double pp[64], tg[64];
	double attn, moe, other; /* tg shares */
	double hit;
	struct hs_context_stats st, pst; /* the last repetition's tg, and its pp */
};

static const char *mode_label(const char *device, enum hs_mode m)
{
	return strcmp(device, "cpu") == 0 ? "-" : m == HS_MODE_NONE ? "auto" : hs_mode_name(m);
}

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static int measure(const struct opts *o, const char *model, const char *device, enum hs_mode mode,
		   struct result *r)
{
	struct hs_runtime_opts ro = { .device = device, .mode = mode, .q = -1, .max_tokens = o->pp,
				      .threads = o->threads };
	hs_runtime *rt = NULL;
	hs_context *c = NULL;
	struct hs_token *b = NULL;
	int rc = 1;
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	if (hs_runtime_open(model, &ro, &rt)) {
		hs_cli_fail("bench", "%s", hs_last_error());
		goto out;
	}
	const int V = hs_runtime_model_info(rt)->n_vocab;
	struct hs_context_opts co = { .n_ctx = (o->pp > o->tg ? o->pp : o->tg) + 8, .n_ubatch = o->pp };
	if (hs_context_create(rt, &co, &c) || !(b = malloc(sizeof *b * (size_t)o->pp))) {
		hs_cli_fail("bench", "%s", b ? hs_last_error() : "out of memory");
		goto out;
	}
	for (int rep = -1; rep < o->reps; rep++) { /* rep -1: the warm-up */
		if (!o->quiet && isatty(2))
			fprintf(stderr, "\rbench: %s %-6s %s %d/%d ", device, mode_label(device, mode),
				rep < 0 ? "warm-up" : "run", rep + 1, o->reps);
		hs_context_seq_clear(c, 0);
		if (rep == o->reps - 1)
			hs_context_stats_reset(c);
		for (int i = 0; i < o->pp; i++)
			b[i] = (struct hs_token){ (int32_t)(rng_next(&seed) % (uint64_t)V), i, 0, i == o->pp - 1 };
		double t0 = now_s();
		if (hs_decode(c, o->pp, b)) {
			hs_cli_fail("bench", "pp: %s", hs_last_error());
			goto out;
		}
		double t_pp = now_s() - t0;
		hs_context_seq_clear(c, 0);
		if (rep == o->reps - 1) {
			hs_context_stats(c, &r->pst);
			hs_context_stats_reset(c);
		}
		t0 = now_s();
		for (int i = 0; i < o->tg; i++) {
			struct hs_token t = { (int32_t)(rng_next(&seed) % (uint64_t)V), i, 0, 1 };
			if (hs_decode(c, 1, &t)) {
				hs_cli_fail("bench", "tg: %s", hs_last_error());
				goto out;
			}
		}
		double t_tg = now_s() - t0;
		if (rep >= 0) {
			r->pp[rep] = o->pp / t_pp;
			r->tg[rep] = o->tg / t_tg;
		}
	}
	struct hs_context_stats st;
	hs_context_stats(c, &st);
	double all = st.attn_s + st.moe_s + st.other_s;
	r->attn = all > 0 ? st.attn_s / all : 0;
	r->moe = all > 0 ? st.moe_s / all : 0;
	r->other = all > 0 ? st.other_s / all : 0;
	r->st = st;
	long pairs = 0, hits = 0;
	for (int l = 0; l < hs_runtime_model_info(rt)->n_layers; l++) {
		struct hs_layer_report lr;
		if (hs_runtime_layer_report(rt, l, &lr) == 0)
			pairs += lr.pairs, hits += lr.hits;
	}
	r->hit = pairs ? (double)hits / pairs : 0;
	rc = 0;
out:
	if (!o->quiet && isatty(2))
		fprintf(stderr, "\r%60s\r", "");
	free(b);
	hs_context_free(c);
	hs_runtime_close(rt);
	return rc;
}

/* A generated token's time step by step (the last repetition's tg). */
static void print_steps(const struct hs_context_stats *st, int tokens, double read_gbps)
{
	if (read_gbps <= 0) { /* the prompt: one ubatch of `tokens`, where compute rules, not bytes */
		double all = 0;
		for (int i = 0; i < HS_CONTEXT_STEPS; i++)
			all += st->step_s[i];
		if (all <= 0)
			return;
		printf("  %-26s %9s %7s %11s\n", "pp step", "ms/prompt", "share", "dispatches");
		for (int i = 0; i < HS_CONTEXT_STEPS; i++)
			if (st->step_s[i] > 0 || st->step_dispatches[i])
				printf("  %-26s %9.2f %6.1f%% %11ld\n", hs_context_step_name(i), 1e3 * st->step_s[i],
				       100 * st->step_s[i] / all, (long)st->step_dispatches[i]);
		printf("  %-26s %9.2f %6.1f%% %11s  (%d tokens)\n", "all", 1e3 * all, 100.0, "", tokens);
		return;
	}
	double all = 0, bytes = 0;
	long runs = 0;
	for (int i = 0; i < HS_CONTEXT_STEPS; i++)
		all += st->step_s[i], bytes += st->step_bytes[i], runs += st->step_dispatches[i];
	if (all <= 0)
		return;
	printf("  %-26s %9s %7s %10s %8s %8s %11s\n", "tg step", "ms/token", "share", "MB/token", "GB/s", "of read",
	       "dispatches");
	for (int i = 0; i < HS_CONTEXT_STEPS; i++) {
		if (st->step_s[i] <= 0 && st->step_dispatches[i] == 0)
			continue;
		const double gbps = st->step_s[i] > 0 ? st->step_bytes[i] / st->step_s[i] / 1e9 : 0;
		printf("  %-26s %9.3f %6.1f%% %10.2f %8.1f %8.2f %11.1f\n", hs_context_step_name(i),
		       1e3 * st->step_s[i] / tokens, 100 * st->step_s[i] / all, st->step_bytes[i] / tokens / 1048576.0,
		       gbps, gbps / read_gbps, (double)st->step_dispatches[i] / tokens);
	}
	printf("  %-26s %9.3f %6.1f%% %10.2f %8.1f %8.2f %11.1f\n", "all", 1e3 * all / tokens, 100.0,
	       bytes / tokens / 1048576.0, bytes / all / 1e9, bytes / all / 1e9 / read_gbps, (double)runs / tokens);
}

/* median, and the range as "lo-hi" */
static double summary(double *v, int n, double *lo, double *hi)
{
	qsort(v, n, sizeof *v, cmp_d);
	*lo = v[0];
	*hi = v[n - 1];
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int hs_cmd_bench_e2e(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "e2e", no_argument, NULL, 'e' },          { "model", required_argument, NULL, 'm' },
		{ "preset", required_argument, NULL, 'P' }, { "layers", required_argument, NULL, 'L' },
		{ "experts", required_argument, NULL, 'E' }, { "vocab", required_argument, NULL, 'V' },
		{ "devices", required_argument, NULL, 'd' }, { "modes", required_argument, NULL, 'M' },
		{ "pp", required_argument, NULL, 'p' },     { "tg", required_argument, NULL, 't' },
		{ "reps", required_argument, NULL, 'r' },   { "threads", required_argument, NULL, 'j' },
		{ "quiet", no_argument, NULL, 'q' },        { "help", no_argument, NULL, 'h' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .preset = "gpt-oss-120b", .layers = 2, .experts = 32, .vocab = 1024, .modes = "auto",
			  .pp = 512, .tg = 128, .reps = 3 };
	char path[4096];
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "qvh", lopts, NULL)) != -1) {
		switch (c) {
		case 'e': break;
		case 'm': o.model = optarg; break;
		case 'P': o.preset = optarg; break;
		case 'L': if (hs_cli_parse_int("bench", "--layers", optarg, 1, 1024, &o.layers)) return 1; break;
		case 'E': if (hs_cli_parse_int("bench", "--experts", optarg, 1, 4096, &o.experts)) return 1; break;
		case 'V': if (hs_cli_parse_int("bench", "--vocab", optarg, 300, 1 << 20, &o.vocab)) return 1; break;
		case 'd': o.devices = optarg; break;
		case 'M': o.modes = optarg; break;
		case 'p': if (hs_cli_parse_int("bench", "--pp", optarg, 1, 8192, &o.pp)) return 1; break;
		case 't': if (hs_cli_parse_int("bench", "--tg", optarg, 1, 8192, &o.tg)) return 1; break;
		case 'r': if (hs_cli_parse_int("bench", "--reps", optarg, 1, 64, &o.reps)) return 1; break;
		case 'j': if (hs_cli_parse_int("bench", "--threads", optarg, 1, 4096, &o.threads)) return 1; break;
		case 'q': o.quiet = 1; break;
		case 'v': o.verbose = 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("bench");
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset bench: unexpected argument '%s'\n", argv[optind]);
		return hs_cli_usage_error("bench");
	}
	const char *devices = o.devices ? o.devices : hs_cuda_device_count() > 0 ? "cuda" : "cpu,sim";
	struct {
		const char *dev;
		enum hs_mode mode;
	} runs[32];
	int n_runs = 0;
	char dbuf[256], mbuf[256];
	snprintf(dbuf, sizeof dbuf, "%s", devices);
	for (char *save = NULL, *d = strtok_r(dbuf, ",", &save); d; d = strtok_r(NULL, ",", &save)) {
		if (strcmp(d, "cpu") && strcmp(d, "sim") && strcmp(d, "cuda"))
			return hs_cli_fail("bench", "--devices: '%s' is not cpu, sim or cuda", d);
		snprintf(mbuf, sizeof mbuf, "%s", strcmp(d, "cpu") ? o.modes : "cpu");
		for (char *s2 = NULL, *m = strtok_r(mbuf, ",", &s2); m && n_runs < 32; m = strtok_r(NULL, ",", &s2)) {
			enum hs_mode mode = !strcmp(m, "cpu") ? HS_MODE_CPU_COMPUTE
					    : !strcmp(m, "stream") ? HS_MODE_PCIE_STREAM
					    : !strcmp(m, "hybrid") ? HS_MODE_HYBRID
					    : !strcmp(m, "auto") ? HS_MODE_NONE : -1;
			if ((int)mode < 0)
				return hs_cli_fail("bench", "--modes: '%s' is not cpu, stream, hybrid or auto", m);
			runs[n_runs].dev = strcmp(d, "cpu") == 0 ? "cpu" : strcmp(d, "sim") == 0 ? "sim" : "cuda";
			runs[n_runs++].mode = mode;
		}
	}
	if (!n_runs)
		return hs_cli_fail("bench", "--devices / --modes: nothing to run");
	if (o.model)
		snprintf(path, sizeof path, "%s", o.model);
	else if (model_file(&o, path, sizeof path))
		return 1;
	hs_model *m;
	if (hs_model_open(path, &m))
		return hs_cli_fail("bench", "%s", hs_last_error());
	struct hs_model_info in = *hs_model_info(m);
	char name[128], types[224];
	snprintf(name, sizeof name, "%s", in.name);
	snprintf(types, sizeof types, "%s", in.expert_types);
	in.name = name;
	in.expert_types = types;
	hs_model_free(m);
	if (!in.whole)
		return hs_cli_fail("bench", "%s: not a whole model (--e2e runs token to token)", path);
	/* the machine's limit, measured now: read bandwidth with the workers' thread count */
	int threads = o.threads > 0 ? o.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	double read_gbps = hs__read_bandwidth(threads, (size_t)1 << 30, 6) / 1e9;
	const double token_bytes = (double)in.layer_token_bytes * in.n_moe_layers + (double)in.dense_bytes;

	printf("# hotset bench --e2e: the whole model, measured (tokens per second; median [range] of %d runs)\n",
	       o.reps);
	printf("build: %s\n", hs_build_info());
	printf("model: %s (%s), %d layers x %d experts (%d used), n_embd %d, vocab %d, experts %s, %.0f MiB\n", path,
	       in.name, in.n_layers, in.n_experts, in.n_used, in.n_embd, in.n_vocab, in.expert_types,
	       in.file_bytes / 1048576.0);
	printf("weights a generated token reads: %.1f MiB (%d experts x %d layer%s %.1f MiB + attention and output "
	       "%.1f MiB)\n",
	       token_bytes / 1048576.0, in.n_used, in.n_moe_layers, in.n_moe_layers == 1 ? "" : "s",
	       (double)in.layer_token_bytes * in.n_moe_layers / 1048576.0, in.dense_bytes / 1048576.0);
	printf("read bandwidth of this machine (measured now, %d threads): %.1f GB/s\n", threads, read_gbps);
	printf("\n%-6s %-7s %16s %22s %9s %9s %22s %7s\n", "device", "mode", "pp tok/s", "tg tok/s", "tg GB/s",
	       "of read", "tg: attn / MoE / rest", "MoE hit");
	for (int k = 0; k < n_runs; k++) {
		struct result r;
		memset(&r, 0, sizeof r);
		if (measure(&o, path, runs[k].dev, runs[k].mode, &r))
			return 1;
		double plo, phi, tlo, thi;
		double pp = summary(r.pp, o.reps, &plo, &phi), tg = summary(r.tg, o.reps, &tlo, &thi);
		char ppb[48], tgb[48], sh[48];
		snprintf(ppb, sizeof ppb, "%.1f [%.0f-%.0f]", pp, plo, phi);
		snprintf(tgb, sizeof tgb, "%.2f [%.1f-%.1f]", tg, tlo, thi);
		snprintf(sh, sizeof sh, "%.0f%% / %.0f%% / %.0f%%", 100 * r.attn, 100 * r.moe, 100 * r.other);
		printf("%-6s %-7s %16s %22s %9.2f %9.2f %22s %6.0f%%\n", runs[k].dev, mode_label(runs[k].dev, runs[k].mode),
		       ppb, tgb, tg * token_bytes / 1e9,
		       tg * token_bytes / 1e9 / read_gbps, sh, 100 * r.hit);
		if (o.verbose) {
			print_steps(&r.st, o.tg, read_gbps);
			print_steps(&r.pst, o.pp, 0);
		}
		fflush(stdout);
	}
	printf("\npp: prompt of %d tokens in one ubatch; tg: %d tokens one at a time from an empty context.\n", o.pp,
	       o.tg);
	printf("tg GB/s: weights a generated token reads x tg tok/s; 'of read' divides it by the read bandwidth.\n");
	if (strstr(devices, "sim"))
		printf("sim is the CPU imitating a device (its threads share this machine's cores and memory): its rows\n"
		       "test the device path, they do not predict a GPU.\n");
	return 0;
}
