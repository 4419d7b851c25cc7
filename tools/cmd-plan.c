/* `hotset plan`: where a model's experts go on a machine, and the speed and
 * memory that placement predicts, before anything is loaded. */
#include "config.h"

#include <dirent.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tools/tools.h"

#define GiB (1024.0 * 1024.0 * 1024.0)
#define MiB (1024.0 * 1024.0)

static void help(void)
{
	printf("usage: hotset plan [--model FILE | --preset NAME] [--profile FILE|NAME] [OPTIONS]\n\n"
	       "Decides where every expert lives (resident on the GPU, in host memory with GPU\n"
	       "cache slots, or host only), which NUMA node holds host experts, the decode and\n"
	       "prefill modes, and predicts tokens/s (the MoE part, then the whole model) and\n"
	       "VRAM/RAM use, with the bound that limits it.  Nothing is loaded; the model file\n"
	       "is only read for its shape.\n\n"
	       "  --model FILE       a GGUF model file\n"
	       "  --preset NAME      a known model: gpt-oss-120b, gpt-oss-20b, qwen3-30b-a3b,\n"
	       "                     qwen3-235b-a22b, glm-4.5-air, glm-4.5, qwen3.5-35b-a3b\n"
	       "                     (default gpt-oss-120b)\n"
	       "  --profile P        a profile JSON file, or the name of a shipped profile\n"
	       "                     (`--profile list` shows them); default: the one `hotset tune`\n"
	       "                     saved, else this machine's topology with assumed speeds\n"
	       "  --gpu N|none       which GPU of the profile (default 0; none = CPU only)\n"
	       "  --vram GIB         VRAM budget (default: the GPU's free memory - 0.25 GiB)\n"
	       "  --ram GIB          host memory budget for experts (default: available - margin)\n"
	       "  --ctx N            context length the KV cache is sized for (default 8192)\n"
	       "  --kv f16|q8_0      KV cache type (default f16)\n"
	       "  --ubatch N         prefill batch of the prediction (default 512)\n"
	       "  --host-layers N    put exactly the first N MoE layers on the host (like\n"
	       "                     llama.cpp's --n-cpu-moe) instead of searching\n"
	       "  --no-cache         no GPU cache slots\n"
	       "  --routing F.npy    routing statistics: float32 [MoE layers][experts], each\n"
	       "                     expert's share of its layer's routing slots\n"
	       "  --wait[=SECONDS]   then wait (default 600 s) until the plan's VRAM is free on\n"
	       "                     this machine's GPU; other processes are never touched\n"
	       "  --json             print the plan as JSON (docs/plan-json.md)\n"
	       "  -o FILE            also write the JSON to FILE\n"
	       "  -h, --help         this text\n\n"
	       "Units: GiB/MiB = 2^30/2^20 bytes; GB/s = 1e9 bytes/s.  Figures are predictions.\n");
}

static int file_exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Shipped profiles: $HOTSET_PROFILES, then the installed folder. */
static const char *profile_dirs[2];

static void set_dirs(void)
{
	profile_dirs[0] = getenv("HOTSET_PROFILES");
	profile_dirs[1] = HS_PROFILES_DIR;
}

static int list_profiles(void)
{
	char path[1024];
	struct hs_profile p;

	int listed = 0;

	set_dirs();
	for (int i = 0; i < 2; i++) {
		DIR *d = profile_dirs[i] && *profile_dirs[i] ? opendir(profile_dirs[i]) : NULL;
		struct dirent *e;
		if (!d)
			continue;
		listed++;
		printf("%s:\n", profile_dirs[i]);
		while ((e = readdir(d))) {
			size_t n = strlen(e->d_name);
			if (n < 6 || strcmp(e->d_name + n - 5, ".json"))
				continue;
			snprintf(path, sizeof path, "%s/%s", profile_dirs[i], e->d_name);
			if (hs_profile_load(path, &p) == 0)
				printf("  %-20.*s %s: %s\n", (int)(n - 5), e->d_name, p.source, p.machine);
		}
		closedir(d);
	}
	if (!listed) {
		/* An uninstalled build has no profile folder yet: say where to look. */
		fprintf(stderr, "hotset plan: no shipped profiles in %s (not installed?); set HOTSET_PROFILES to a folder "
				"of profiles, e.g. the source tree's profiles/\n",
			HS_PROFILES_DIR);
		return 1;
	}
	return 0;
}

static int load_profile(const char *arg, struct hs_profile *p, char *used, size_t n)
{
	char path[1024];

	set_dirs();
	if (arg && (strchr(arg, '/') || file_exists(arg))) {
		snprintf(used, n, "%s", arg);
		return hs_profile_load(arg, p);
	}
	if (arg) {
		for (int i = 0; i < 2; i++) {
			if (!profile_dirs[i] || !*profile_dirs[i])
				continue;
			snprintf(path, sizeof path, "%s/%s.json", profile_dirs[i], arg);
			if (file_exists(path)) {
				snprintf(used, n, "%s", path);
				return hs_profile_load(path, p);
			}
		}
		/* Neither a file nor a shipped name: say both were tried. */
		hs_cli_fail("plan", "--profile %s: no such file, and no shipped profile of that name "
				    "(`hotset plan --profile list` shows them)",
			    arg);
		return 2;
	}
	return 1; /* no --profile: the caller decides */
}

/* --topology with --profile: plan for the topology's machine.  When the
 * profile describes another machine, its rates are put on the topology's
 * nodes and GPUs, and one line says so. */
static int on_topology(struct hs_profile *pf, char *name, size_t n)
{
	struct hs_profile *mixed = malloc(sizeof *mixed);
	hs_topology *t;
	int rc;

	if (!mixed)
		return hs_cli_fail("plan", "out of memory");
	if (hs_cli_open_topology("plan", &t)) {
		free(mixed);
		return 1;
	}
	rc = hs_profile_on_topology(pf, t, mixed);
	if (rc < 0) {
		hs_cli_fail("plan", "%s", hs_last_error());
	} else if (rc == 1) {
		fprintf(stderr,
			"hotset plan: note: topology %s (%d NUMA node%s, %d cores, %d GPU%s) and profile %s "
			"(%d node%s, %d GPU%s) describe different machines: planning with the topology's nodes and "
			"GPUs and the profile's rates\n",
			hs_topology_source(t), mixed->n_nodes, mixed->n_nodes == 1 ? "" : "s", hs_topology_n_cores(t),
			mixed->n_gpus, mixed->n_gpus == 1 ? "" : "s", name, pf->n_nodes, pf->n_nodes == 1 ? "" : "s",
			pf->n_gpus, pf->n_gpus == 1 ? "" : "s");
		size_t len = strlen(name);
		snprintf(name + len, n - len, "'s rates on the topology of %s", hs_topology_source(t));
		snprintf(mixed->machine, sizeof mixed->machine, "%s", hs_topology_source(t));
		*pf = *mixed;
		rc = 0;
	}
	hs_topology_free(t);
	free(mixed);
	return rc;
}

static void layer_line(const struct hs_plan *p, int a, int b)
{
	const struct hs_plan_layer *l = &p->layers[a];
	char range[32], nodes[32] = "";

	if (a == b)
		snprintf(range, sizeof range, "%d", l->layer);
	else
		snprintf(range, sizeof range, "%d-%d", l->layer, p->layers[b].layer);
	if (l->n_numa_nodes)
		snprintf(nodes, sizeof nodes, "node %d", l->numa_nodes[0]);
	if (l->placement == HS_PLACEMENT_GPU)
		printf("  layers %-8s %s\n", range, hs_placement_name(l->placement));
	else
		printf("  layers %-8s %-11s %-7s %4d slots/layer, hit %3.0f%%\n", range, hs_placement_name(l->placement), nodes,
		       l->slots, 100 * l->hit_rate);
}

static void print_text(const struct hs_plan *p, const struct hs_model_desc *m, const char *profile_name)
{
	const struct hs_plan_predicted *q = &p->predicted;
	const double lt = (double)m->expert_bytes * m->n_used; /* one layer-token */

	printf("plan (prediction): %s on %s\n", p->model, p->machine);
	printf("profile: %s (%s%s)\n", profile_name, p->profile_source,
	       strcmp(p->profile_source, "published") == 0 ? ": describes published figures, not measured here" :
	       strcmp(p->profile_source, "topology") == 0 ? ": no measurements, speeds assumed" : "");
	printf("model: %d MoE layers x %d experts (%d used), %.2f MiB per expert, %.2f MiB per layer-token\n",
	       m->n_moe_layers, m->n_experts, m->n_used, (double)m->expert_bytes / MiB, lt / MiB);
	if (m->ffn_ff)
		printf("       %d dense FFN layers; shared experts %.2f MiB in all (run for every token: with the dense part%s)\n",
		       m->n_layers - m->n_moe_layers, (double)m->shared_expert_bytes / MiB, p->gpu >= 0 ? ", on the GPU" : "");
	if (p->gpu >= 0)
		printf("budgets: VRAM %.2f GiB (GPU %d), RAM %.2f GiB for host experts\n",
		       p->memory.vram_budget / GiB, p->gpu, p->memory.ram_budget / GiB);
	else
		printf("budgets: no GPU, RAM %.2f GiB for host experts\n", p->memory.ram_budget / GiB);
	printf("\nplacement: %d layer%s resident on the GPU, %d host layer%s, %d cache slot%s\n", p->n_gpu_layers,
	       p->n_gpu_layers == 1 ? "" : "s", p->n_host_layers, p->n_host_layers == 1 ? "" : "s", p->total_slots,
	       p->total_slots == 1 ? "" : "s");
	for (int a = 0; a < p->n_layers;) {
		int b = a;
		while (b + 1 < p->n_layers && p->layers[b + 1].placement == p->layers[a].placement &&
		       p->layers[b + 1].slots == p->layers[a].slots &&
		       p->layers[b + 1].n_numa_nodes == p->layers[a].n_numa_nodes &&
		       (!p->layers[a].n_numa_nodes || p->layers[b + 1].numa_nodes[0] == p->layers[a].numa_nodes[0]))
			b++;
		layer_line(p, a, b);
		a = b + 1;
	}
	printf("hit rates: %s\n", p->routing);
	printf("CPU: %d threads, one per core of node %d\n", p->cpu_threads, p->cpu_node);
	printf("modes: decode %s", hs_mode_name(p->decode_mode));
	if (p->decode_mode == HS_MODE_HYBRID)
		printf(" (%.0f%% of misses streamed over PCIe)", 100 * p->decode_q);
	printf(", prefill of %d tokens %s", p->ubatch, hs_mode_name(p->prefill_mode));
	if (p->prefill_mode == HS_MODE_HYBRID)
		printf(" (%.0f%% of missed experts streamed)", 100 * p->prefill_q);
	printf("\n\nprediction, MoE part only (GB/s = 1e9 B/s, MiB = 2^20 B):\n");
	printf("  host expert bytes per token  %.2f MiB (%d host layers x %.2f MiB)\n",
	       (double)q->host_bytes_per_token / MiB, p->n_host_layers, lt / MiB);
	if (q->host_bytes_per_token) {
		printf("  after cache hits             %.2f MiB\n", (double)q->miss_bytes_per_token / MiB);
		printf("  host-read bound              %.1f tok/s (%.2f MiB at %.1f GB/s, cache cold)\n",
		       q->decode_host_bound_tok_s, (double)q->host_bytes_per_token / MiB, q->host_read_gbps);
	}
	printf("  decode                       %.1f tok/s, bound by %s\n", q->decode_tok_s, q->bound);
	if (q->host_bytes_per_token && p->gpu >= 0)
		printf("    by mode                    cpu-compute %.1f, pcie-stream %.1f, hybrid %.1f tok/s\n",
		       q->decode_cpu_tok_s, q->decode_stream_tok_s, q->decode_hybrid_tok_s);
	printf("  prefill (%d tokens)         %.0f tok/s\n", p->ubatch, q->prefill_tok_s);
	printf("  figures used                 host read %.1f, CPU kernel %.1f", q->host_read_gbps, q->cpu_kernel_gbps);
	if (p->gpu >= 0)
		printf(", PCIe %.1f, GPU memory %.0f", q->pcie_gbps, q->gpu_mem_gbps);
	printf(" GB/s\n");
	if (q->model_decode_tok_s > 0) {
		const double dense_ms = q->dense_bytes_per_token / (q->dense_gbps * 1e6);
		printf("\nprediction, whole model (the MoE part above, plus the dense part on the %s):\n",
		       p->gpu >= 0 ? "GPU" : "CPU");
		printf("  decode, empty context        %.1f tok/s (MoE %.1f ms + dense weights %.2f GiB at %.0f GB/s %.1f ms)\n",
		       q->model_decode_tok_s, 1e3 / q->decode_tok_s, q->dense_bytes_per_token / GiB, q->dense_gbps, dense_ms);
		char at[32];
		snprintf(at, sizeof at, "decode at %d tokens", p->ctx);
		printf("  %-28s %.1f tok/s (+ K and V %.2f GiB, %.1f ms)\n", at, q->model_decode_ctx_tok_s, q->kv_bytes_at_ctx / GiB, q->kv_bytes_at_ctx / (q->dense_gbps * 1e6));
		printf("  prefill (%d tokens)         %.0f tok/s\n", p->ubatch, q->model_prefill_tok_s);
	} else {
		printf("\nprediction, whole model: none (the file has MoE layers only)\n");
	}
	printf("\nmemory (prediction):\n");
	if (p->gpu >= 0)
		printf("  VRAM %.2f GiB of %.2f: non-expert %.2f, KV %.2f (%d tokens %s), experts %.2f, slots %.2f,\n"
		       "       staging %.2f, workspace %.2f\n",
		       p->memory.vram_bytes / GiB, p->memory.vram_budget / GiB, p->memory.vram_nonexpert / GiB,
		       p->memory.vram_kv / GiB, p->ctx, p->kv_type == HS_KV_Q8_0 ? "q8_0" : "f16",
		       p->memory.vram_experts / GiB, p->memory.vram_slots / GiB, p->memory.vram_staging / GiB,
		       p->memory.vram_workspace / GiB);
	if (p->gpu >= 0 && m->swa_window > 0 && m->swa_every > 0) {
		int slide = 0;
		for (int i = 0; i < m->n_layers; i++)
			slide += i % m->swa_every != m->swa_every - 1;
		long ring = (long)m->swa_window + p->ubatch < p->ctx ? (long)m->swa_window + p->ubatch : p->ctx;
		printf("       KV: %d of %d layers slide over %d positions and keep a ring of %ld cells (window +\n"
		       "       ubatch), the others %d\n",
		       slide, m->n_layers, m->swa_window, ring, p->ctx);
	}
	printf("  RAM  %.2f GiB of %.2f for host experts", p->memory.ram_bytes / GiB, p->memory.ram_budget / GiB);
	for (int j = 0; j < p->memory.n_nodes; j++)
		if (p->memory.ram_node_bytes[j])
			printf(", node %d %.2f", p->memory.node_os_index[j], p->memory.ram_node_bytes[j] / GiB);
	printf("\n");
	if (p->n_warnings) {
		printf("\nwarnings:\n");
		for (int i = 0; i < p->n_warnings; i++)
			printf("  [%s] %s\n", p->warnings[i].code, p->warnings[i].message);
	}
}

static void wait_progress(const char *what, double f, void *ctx)
{
	(void)f;
	(void)ctx;
	fprintf(stderr, "plan: %s\n", what);
}

int hs_cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },  { "preset", required_argument, NULL, 'P' },
		{ "profile", required_argument, NULL, 'p' }, { "gpu", required_argument, NULL, 'g' },
		{ "vram", required_argument, NULL, 'V' },   { "ram", required_argument, NULL, 'R' },
		{ "ctx", required_argument, NULL, 'c' },    { "kv", required_argument, NULL, 'k' },
		{ "ubatch", required_argument, NULL, 'u' }, { "host-layers", required_argument, NULL, 'H' },
		{ "no-cache", no_argument, NULL, 'N' },     { "routing", required_argument, NULL, 'r' },
		{ "wait", optional_argument, NULL, 'w' },   { "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	const char *model = NULL, *preset = NULL, *profile_arg = NULL, *routing = NULL, *out_path = NULL;
	struct hs_plan_opts o = { .gpu = 0, .ctx = 8192, .kv_type = HS_KV_F16, .ubatch = 512, .host_layers = -1 };
	int json = 0, gpu_set = 0, wait = 0, c, rc = 1;
	double v, wait_s = 600;
	struct hs_model_desc *m = calloc(1, sizeof *m);
	struct hs_profile *pf = calloc(1, sizeof *pf);
	struct hs_plan *plan = calloc(1, sizeof *plan);
	float *freq = NULL;
	char profile_name[1024] = "";
	hs_model *mf = NULL;

	if (!m || !pf || !plan) {
		rc = hs_cli_fail("plan", "out of memory");
		goto out_free;
	}
	optind = 0; /* re-initialises getopt (argument permutation too) */
	while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 'P': preset = optarg; break;
		case 'p': profile_arg = optarg; break;
		case 'g':
			gpu_set = 1;
			if (strcmp(optarg, "none") == 0)
				o.gpu = -1;
			else if (hs_cli_parse_int("plan", "--gpu", optarg, 0, HS_MAX_GPUS - 1, &o.gpu))
				goto out_free;
			break;
		case 'V':
			if (hs_cli_parse_num("plan", "--vram", optarg, 0.01, 1 << 20, &v))
				goto out_free;
			o.vram_bytes = (uint64_t)(v * GiB);
			break;
		case 'R':
			if (hs_cli_parse_num("plan", "--ram", optarg, 0.01, 1 << 24, &v))
				goto out_free;
			o.ram_bytes = (uint64_t)(v * GiB);
			break;
		case 'c': if (hs_cli_parse_int("plan", "--ctx", optarg, 1, 1 << 24, &o.ctx)) goto out_free; break;
		case 'u': if (hs_cli_parse_int("plan", "--ubatch", optarg, 1, 1 << 16, &o.ubatch)) goto out_free; break;
		case 'H':
			if (hs_cli_parse_int("plan", "--host-layers", optarg, 0, HS_MAX_LAYERS, &o.host_layers))
				goto out_free;
			break;
		case 'k':
			if (strcmp(optarg, "f16") == 0)
				o.kv_type = HS_KV_F16;
			else if (strcmp(optarg, "q8_0") == 0)
				o.kv_type = HS_KV_Q8_0;
			else {
				hs_cli_fail("plan", "--kv %s: f16 or q8_0", optarg);
				goto out_free;
			}
			break;
		case 'N': o.no_cache = 1; break;
		case 'r': routing = optarg; break;
		case 'w':
			wait = 1;
			if (optarg && hs_cli_parse_num("plan", "--wait", optarg, 0, 86400 * 7, &wait_s))
				goto out_free;
			break;
		case 'j': json = 1; break;
		case 'o': out_path = optarg; break;
		case 'h': help(); rc = 0; goto out_free;
		default: rc = hs_cli_usage_error("plan"); goto out_free;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset plan: unexpected argument '%s'\n", argv[optind]);
		rc = hs_cli_usage_error("plan");
		goto out_free;
	}
	if (profile_arg && strcmp(profile_arg, "list") == 0) {
		rc = list_profiles();
		goto out_free;
	}
	if (model && preset) {
		hs_cli_fail("plan", "give --model or --preset, not both");
		goto out_free;
	}

	/* the model */
	if (model) {
		if (hs_model_open(model, &mf) || hs_model_desc_from_model(mf, m)) {
			hs_cli_fail("plan", "%s", hs_last_error());
			goto out_free;
		}
	} else if (hs_model_desc_preset(preset ? preset : "gpt-oss-120b", m)) {
		hs_cli_fail("plan", "--preset: %s", hs_last_error());
		goto out_free;
	}

	/* the machine */
	int lp = load_profile(profile_arg, pf, profile_name, sizeof profile_name);
	if (lp < 0 || lp == 2) {
		if (lp < 0)
			hs_cli_fail("plan", "%s", hs_last_error());
		goto out_free;
	}
	if (lp == 0 && hs_cli.topology && (rc = on_topology(pf, profile_name, sizeof profile_name)) != 0) {
		rc = 1;
		goto out_free;
	}
	rc = 1;
	if (lp > 0) {
		char def[1024];
		if (!hs_cli.topology && hs_profile_default_path(def, sizeof def) == 0 && file_exists(def)) {
			if (hs_profile_load(def, pf)) {
				hs_cli_fail("plan", "%s (run `hotset tune` again)", hs_last_error());
				goto out_free;
			}
			snprintf(profile_name, sizeof profile_name, "%s", def);
		} else {
			hs_topology *t;
			if (hs_cli_open_topology("plan", &t))
				goto out_free;
			int e = hs_profile_from_topology(t, pf);
			snprintf(profile_name, sizeof profile_name, "topology of %s%s", hs_topology_source(t),
				 hs_topology_is_this_system(t) ? " (run `hotset tune` to measure it)" : "");
			hs_topology_free(t);
			if (e) {
				hs_cli_fail("plan", "%s", hs_last_error());
				goto out_free;
			}
		}
	}
	if (!gpu_set && pf->n_gpus == 0)
		o.gpu = -1;
	if (gpu_set && o.gpu == 0 && pf->n_gpus == 0) { /* the planner would plan for the CPU */
		hs_cli_fail("plan", "--gpu 0: the profile has no GPU (--gpu none plans for the CPU)");
		goto out_free;
	}

	if (routing) {
		int64_t rows, cols;
		if (hs_npy_read_f32(routing, &freq, &rows, &cols)) {
			hs_cli_fail("plan", "--routing: %s", hs_last_error());
			goto out_free;
		}
		o.freq = freq;
		o.freq_layers = (int)rows;
		o.freq_experts = (int)cols;
	}
	if (hs_plan_make(m, pf, &o, plan)) {
		hs_cli_fail("plan", "%s", hs_last_error());
		goto out_free;
	}
	char *js = hs_plan_to_json(plan);
	if (!js) {
		hs_cli_fail("plan", "out of memory");
		goto out_free;
	}
	if (json)
		printf("%s\n", js);
	else
		print_text(plan, m, profile_name);
	if (out_path && hs_plan_save(plan, out_path)) {
		free(js);
		hs_cli_fail("plan", "-o: %s", hs_last_error());
		goto out_free;
	}
	free(js);

	if (wait) {
		int dev = plan->gpu >= 0 ? pf->gpus[plan->gpu].cuda_index : -1;
		if (dev < 0 || strcmp(pf->source, "measured") != 0) {
			hs_cli_fail("plan", "--wait needs a GPU of this machine in a measured profile (run `hotset tune`)");
			goto out_free;
		}
		if (hs_vram_wait(dev, plan->memory.vram_bytes, wait_s, 1000, NULL, NULL, wait_progress, NULL)) {
			hs_cli_fail("plan", "%s", hs_last_error());
			goto out_free;
		}
	}
	rc = 0;
out_free:
	hs_model_free(mf);
	free(freq);
	free(m);
	free(pf);
	free(plan);
	return rc;
}
