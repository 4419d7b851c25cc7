/* `hotset trace`: synthetic routing traces, their statistics (skew, reuse,
 * cache hit rates per policy against the Belady bound), CSV export, and a
 * plan's speed projected from a trace's real hit rates. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset trace gen [--preset NAME | --layers L --experts E --used K] [--steps S] [--tokens T]\n"
	       "                        [--top N --share X] [--locality P] [--seed S] -o FILE\n"
	       "       hotset trace stats FILE [--slots N,N,...] [--top N]\n"
	       "       hotset trace csv FILE -o OUT.csv\n"
	       "       hotset trace project --plan P.json FILE [--policy lru|lfu|lfru|static|belady]\n\n"
	       "Routing traces hold, per step, layer and token, the k chosen experts and their\n"
	       "weights (docs/trace-format.md); the runtime records them (hs_runtime_opts.trace_path).\n"
	       "  gen      a synthetic trace: per layer a Zipf popularity whose N most used experts\n"
	       "           take the share X of the slots (default: gpt-oss-120b's published 14 of\n"
	       "           128 at 0.60), and with probability P a token reuses an expert of the\n"
	       "           layer's previous step (temporal locality, default 0.3)\n"
	       "  stats    per layer: share of the top N experts, mean reuse distance; hit rates of\n"
	       "           LRU, LFU, LFRU, static (the trace's own most used: an oracle) and the\n"
	       "           Belady bound for a range of slots per layer\n"
	       "  csv      step,layer,token,slot,expert,weight\n"
	       "  project  the plan's decode tokens/s with the hit rates its slots get on this\n"
	       "           trace (a projection, with the plan's own figures)\n");
}

struct layer_seq {
	int layer;
	int n_steps, cap_steps, n_items, cap_items;
	int *off, *pairs;
	int32_t *experts;
	float *freq;
};

/* One record -> one step of its layer: distinct experts with pair counts. */
static int add_step(struct layer_seq *L, int E, int n, int k, const int32_t *ids)
{
	if (L->n_steps + 2 > L->cap_steps) {
		L->cap_steps = L->cap_steps ? 2 * L->cap_steps : 64;
		int *o = realloc(L->off, sizeof *o * L->cap_steps);
		if (!o)
			return -1;
		L->off = o;
	}
	if (L->n_items + n * k > L->cap_items) {
		while (L->n_items + n * k > L->cap_items)
			L->cap_items = L->cap_items ? 2 * L->cap_items : 1024;
		int32_t *e = realloc(L->experts, sizeof *e * L->cap_items);
		if (e)
			L->experts = e;
		int *p = realloc(L->pairs, sizeof *p * L->cap_items);
		if (p)
			L->pairs = p;
		if (!e || !p)
			return -1;
	}
	if (!L->freq && !(L->freq = calloc(E, sizeof *L->freq)))
		return -1;
	if (L->n_steps == 0)
		L->off[0] = 0;
	int start = L->n_items;
	for (int i = 0; i < n * k; i++) {
		int e = ids[i], j;
		if (e < 0)
			continue;
		L->freq[e] += 1;
		for (j = start; j < L->n_items && L->experts[j] != e; j++)
			;
		if (j < L->n_items) {
			L->pairs[j]++;
		} else {
			L->experts[L->n_items] = e;
			L->pairs[L->n_items++] = 1;
		}
	}
	L->off[++L->n_steps] = L->n_items;
	return 0;
}

static int load_layers(const char *sub, const char *path, struct layer_seq **out, int *n_out, int *E, int *K)
{
	hs_trace *t;
	int nr, n_layers = 0;
	struct layer_seq *ls = NULL;

	if (hs_trace_load(path, &t))
		return hs_cli_fail(sub, "%s", hs_last_error());
	hs_trace_info(t, &nr, E, K);
	for (int r = 0; r < nr; r++) {
		int step, layer, n;
		const int32_t *ids;
		const float *w;
		hs_trace_record(t, r, &step, &layer, &n, &ids, &w);
		int i = 0;
		while (i < n_layers && ls[i].layer != layer)
			i++;
		if (i == n_layers) {
			struct layer_seq *g = realloc(ls, sizeof *g * (n_layers + 1));
			if (!g)
				goto oom_free;
			ls = g;
			memset(&ls[n_layers], 0, sizeof ls[n_layers]);
			ls[n_layers++].layer = layer;
		}
		if (add_step(&ls[i], *E, n, *K, ids))
			goto oom_free;
	}
	hs_trace_free(t);
	*out = ls;
	*n_out = n_layers;
	return 0;
oom_free:
	hs_trace_free(t);
	return hs_cli_fail(sub, "out of memory");
}

static void free_layers(struct layer_seq *ls, int n)
{
	for (int i = 0; i < n; i++) {
		free(ls[i].off);
		free(ls[i].pairs);
		free(ls[i].experts);
		free(ls[i].freq);
	}
	free(ls);
}

static int cmp_float_desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return (x < y) - (x > y);
}

static double hit_rate(enum hs_cache_policy p, const struct layer_seq *L, int E, int slots)
{
	struct hs_cache_result r;
	int warm = p == HS_CACHE_STATIC || p == HS_CACHE_BELADY;
	if (hs_cache_simulate(p, E, slots, -1, L->n_steps, L->off, L->experts, L->pairs, warm ? L->freq : NULL, &r) ||
	    !r.accesses)
		return 0;
	return (double)r.hits / r.accesses;
}

static int cmd_stats(int argc, char **argv)
{
	const char *path = NULL, *slots_s = NULL;
	int top = 0, c, E, K, n_layers;
	static const struct option opts[] = { { "slots", required_argument, NULL, 's' },
					      { "top", required_argument, NULL, 't' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	optind = 0; /* re-initialises getopt (argument permutation too) */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's': slots_s = optarg; break;
		case 't': if (hs_cli_parse_int("trace stats", "--top", optarg, 1, 65536, &top)) return 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("trace");
		}
	}
	if (optind + 1 != argc)
		return hs_cli_fail("trace stats", "give one trace file");
	path = argv[optind];
	struct layer_seq *ls;
	if (load_layers("trace stats", path, &ls, &n_layers, &E, &K))
		return 1;
	int slots[16], n_slots = 0;
	if (slots_s) {
		char buf[256], *tok[16];
		int k;
		if (hs_cli_split_list("trace stats", "--slots", slots_s, buf, sizeof buf, tok, 16, &k)) {
			free_layers(ls, n_layers);
			return 1;
		}
		for (; n_slots < k; n_slots++)
			if (hs_cli_parse_int("trace stats", "--slots", tok[n_slots], 0, E, &slots[n_slots])) {
				free_layers(ls, n_layers);
				return 1;
			}
	} else {
		for (int d = 16; d >= 2; d /= 2)
			slots[n_slots++] = E / d > 0 ? E / d : 1;
	}
	if (!top)
		top = (E * 14 + 64) / 128 > 0 ? (E * 14 + 64) / 128 : 1;
	printf("trace %s: %d layers, %d experts, %d used per token\n\n", path, n_layers, E, K);
	printf("layer  steps    pairs  top-%d share  mean reuse distance (steps)\n", top);
	float *f = malloc(sizeof *f * E);
	for (int i = 0; i < n_layers && f; i++) {
		const struct layer_seq *L = &ls[i];
		double all = 0, share = 0, dist = 0;
		long gaps = 0;
		memcpy(f, L->freq, sizeof *f * E);
		qsort(f, E, sizeof *f, cmp_float_desc);
		for (int e = 0; e < E; e++) {
			all += f[e];
			share += e < top ? f[e] : 0;
		}
		long *last = malloc(sizeof *last * E);
		for (int e = 0; last && e < E; e++)
			last[e] = -1;
		for (int s = 0; last && s < L->n_steps; s++)
			for (int j = L->off[s]; j < L->off[s + 1]; j++) {
				int e = L->experts[j];
				if (last[e] >= 0) {
					dist += s - last[e];
					gaps++;
				}
				last[e] = s;
			}
		free(last);
		printf("%5d %6d %8.0f  %11.3f  %8.2f\n", L->layer, L->n_steps, all, all > 0 ? share / all : 0,
		       gaps ? dist / gaps : 0);
	}
	free(f);
	printf("\nhit rate (pairs found in the cache), all layers, slots per layer:\n%-26s", "policy");
	for (int j = 0; j < n_slots; j++)
		printf(" %7d", slots[j]);
	printf("\n");
	static const enum hs_cache_policy pol[] = { HS_CACHE_LRU, HS_CACHE_LFU, HS_CACHE_LFRU, HS_CACHE_STATIC,
						    HS_CACHE_BELADY };
	static const char *const label[] = { "lru", "lfu", "lfru", "static (the trace's own top)", "belady (bound)" };
	for (int pi = 0; pi < 5; pi++) {
		printf("%-26s", label[pi]);
		for (int j = 0; j < n_slots; j++) {
			double h = 0;
			for (int i = 0; i < n_layers; i++)
				h += hit_rate(pol[pi], &ls[i], E, slots[j]);
			printf(" %7.3f", n_layers ? h / n_layers : 0);
		}
		printf("\n");
	}
	printf("(static and belady start from the trace's own counts; lru, lfu and lfru start empty)\n");
	free_layers(ls, n_layers);
	return 0;
}

static int cmd_gen(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "preset", required_argument, NULL, 'P' }, { "layers", required_argument, NULL, 'L' },
		{ "experts", required_argument, NULL, 'E' }, { "used", required_argument, NULL, 'K' },
		{ "steps", required_argument, NULL, 'S' }, { "tokens", required_argument, NULL, 'T' },
		{ "top", required_argument, NULL, 't' },   { "share", required_argument, NULL, 's' },
		{ "locality", required_argument, NULL, 'l' }, { "seed", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },        { NULL, 0, NULL, 0 },
	};
	int layers = 36, experts = 128, used = 4, steps = 256, tokens = 1, top = 14, c;
	double share = 0.60, locality = 0.3, seed = 1;
	const char *out = NULL;
	struct hs_model_desc md;

	optind = 0; /* re-initialises getopt (argument permutation too) */
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'P':
			if (hs_model_desc_preset(optarg, &md))
				return hs_cli_fail("trace gen", "--preset: %s", hs_last_error());
			layers = md.n_moe_layers;
			experts = md.n_experts;
			used = md.n_used;
			top = (experts * 14 + 64) / 128 > 0 ? (experts * 14 + 64) / 128 : 1;
			break;
		case 'L': if (hs_cli_parse_int("trace gen", "--layers", optarg, 1, 4096, &layers)) return 1; break;
		case 'E': if (hs_cli_parse_int("trace gen", "--experts", optarg, 2, 4096, &experts)) return 1; break;
		case 'K': if (hs_cli_parse_int("trace gen", "--used", optarg, 1, 64, &used)) return 1; break;
		case 'S': if (hs_cli_parse_int("trace gen", "--steps", optarg, 1, 1 << 24, &steps)) return 1; break;
		case 'T': if (hs_cli_parse_int("trace gen", "--tokens", optarg, 1, 1 << 16, &tokens)) return 1; break;
		case 't': if (hs_cli_parse_int("trace gen", "--top", optarg, 1, 65535, &top)) return 1; break;
		case 's': if (hs_cli_parse_num("trace gen", "--share", optarg, 0, 1, &share)) return 1; break;
		case 'l': if (hs_cli_parse_num("trace gen", "--locality", optarg, 0, 1, &locality)) return 1; break;
		case 'r': if (hs_cli_parse_num("trace gen", "--seed", optarg, 0, 1e18, &seed)) return 1; break;
		case 'o': out = optarg; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("trace");
		}
	}
	if (!out)
		return hs_cli_fail("trace gen", "missing -o FILE");
	if (optind < argc)
		return hs_cli_fail("trace gen", "unexpected argument '%s'", argv[optind]);
	if (used > experts)
		return hs_cli_fail("trace gen", "--used %d is more than --experts %d", used, experts);
	if (hs_trace_generate(out, layers, experts, used, steps, tokens, top, share, locality, (uint64_t)seed))
		return hs_cli_fail("trace gen", "%s", hs_last_error());
	printf("trace: %s (%d layers x %d steps x %d tokens, %d of %d experts, top %d take %.2f, locality %.2f)\n", out,
	       layers, steps, tokens, used, experts, top, share, locality);
	return 0;
}

static int cmd_csv(int argc, char **argv)
{
	const char *out = NULL;
	int c;
	hs_trace *t;

	optind = 0; /* re-initialises getopt (argument permutation too) */
	while ((c = getopt(argc, argv, "o:h")) != -1) {
		if (c == 'o')
			out = optarg;
		else if (c == 'h') {
			help();
			return 0;
		} else
			return hs_cli_usage_error("trace");
	}
	if (!out || optind + 1 != argc)
		return hs_cli_fail("trace csv", "give one trace file and -o OUT.csv");
	if (hs_trace_load(argv[optind], &t))
		return hs_cli_fail("trace csv", "%s", hs_last_error());
	int rc = hs_trace_write_csv(t, out);
	hs_trace_free(t);
	return rc ? hs_cli_fail("trace csv", "%s", hs_last_error()) : 0;
}

static int cmd_project(int argc, char **argv)
{
	static const struct option opts[] = { { "plan", required_argument, NULL, 'p' },
					      { "policy", required_argument, NULL, 'P' },
					      { "help", no_argument, NULL, 'h' },
					      { NULL, 0, NULL, 0 } };
	const char *plan_path = NULL, *pol_s = "lru";
	enum hs_cache_policy pol = HS_CACHE_LRU;
	int c, E, K, n_layers;

	optind = 0; /* re-initialises getopt (argument permutation too) */
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'p': plan_path = optarg; break;
		case 'P': pol_s = optarg; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("trace");
		}
	}
	int found = 0;
	for (enum hs_cache_policy p = HS_CACHE_NONE; p <= HS_CACHE_BELADY; p++)
		if (strcmp(hs_cache_policy_name(p), pol_s) == 0) {
			pol = p;
			found = 1;
		}
	if (!found)
		return hs_cli_fail("trace project", "--policy %s: none, lru, lfu, lfru, static or belady", pol_s);
	if (!plan_path || optind + 1 != argc)
		return hs_cli_fail("trace project", "give --plan P.json and one trace file");
	struct hs_plan *plan = calloc(1, sizeof *plan);
	if (!plan)
		return hs_cli_fail("trace project", "out of memory");
	if (hs_plan_load(plan_path, plan)) {
		free(plan);
		return hs_cli_fail("trace project", "%s", hs_last_error());
	}
	struct layer_seq *ls;
	if (load_layers("trace project", argv[optind], &ls, &n_layers, &E, &K)) {
		free(plan);
		return 1;
	}
	double hit[HS_MAX_LAYERS];
	int missing = 0;
	for (int i = 0; i < plan->n_layers; i++) {
		hit[i] = 0;
		if (plan->layers[i].placement == HS_PLACEMENT_GPU)
			continue;
		int j = 0;
		while (j < n_layers && ls[j].layer != plan->layers[i].layer)
			j++;
		if (j == n_layers) {
			missing++;
			continue;
		}
		hit[i] = plan->layers[i].slots ? hit_rate(pol, &ls[j], E, plan->layers[i].slots) : 0;
	}
	printf("projection (not a measurement): plan %s with %s hit rates from %s\n", plan_path,
	       hs_cache_policy_name(pol), argv[optind]);
	for (int i = 0; i < plan->n_layers; i++)
		if (plan->layers[i].placement != HS_PLACEMENT_GPU)
			printf("  layer %3d: %4d slots, hit %.3f (plan assumed %.3f)\n", plan->layers[i].layer,
			       plan->layers[i].slots, hit[i], plan->layers[i].hit_rate);
	if (missing)
		printf("  %d host layers are not in the trace: counted with no hits\n", missing);
	printf("decode: %.1f tok/s projected from the trace, %.1f tok/s predicted by the plan (%s)\n",
	       hs_plan_project(plan, hit), plan->predicted.decode_tok_s, plan->routing);
	free_layers(ls, n_layers);
	free(plan);
	return 0;
}

int hs_cmd_trace(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		help();
		return argc < 2 ? hs_cli_usage_error("trace") : 0;
	}
	if (strcmp(argv[1], "gen") == 0)
		return cmd_gen(argc - 1, argv + 1);
	if (strcmp(argv[1], "stats") == 0)
		return cmd_stats(argc - 1, argv + 1);
	if (strcmp(argv[1], "csv") == 0)
		return cmd_csv(argc - 1, argv + 1);
	if (strcmp(argv[1], "project") == 0)
		return cmd_project(argc - 1, argv + 1);
	fprintf(stderr, "hotset trace: unknown action '%s' (gen, stats, csv, project)\n", argv[1]);
	return hs_cli_usage_error("trace");
}
