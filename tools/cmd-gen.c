/* `hotset gen`: write a synthetic model file with real shapes. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cpu_kernels/formats.h"
#include "model/gen.h"
#include "model/gguf-write.h"
#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset gen [--preset NAME] [--arch gpt-oss|qwen3moe|glm4moe] [--layers L]\n"
	       "                  [--experts E] [--used K] [--embd D] [--ff F] [--type T] [--down-type T]\n"
	       "                  [--vocab V] [--heads H] [--kv-heads H] [--head-dim D] [--window W]\n"
	       "                  [--dense-layers N] [--dense-ff F] [--shared-experts N] [--qk-norm]\n"
	       "                  [--full-attn-every N]\n"
	       "                  [--dense-type T] [--moe-only] [--seed S] [--name TEXT]\n"
	       "                  [--split-max-size N] -o FILE\n\n"
	       "Writes a GGUF v3 file of a whole model (attention, norms, embeddings, output, the\n"
	       "routers and experts, and a byte-level tokenizer with the architecture's special\n"
	       "tokens) and the metadata llama.cpp's readers need, filled with random weights of\n"
	       "realistic scale (the same seed gives the same file). The file is streamed to\n"
	       "FILE.part and renamed at the end, so an interrupted run leaves no half file.\n"
	       "With --split-max-size the model is split as llama-gguf-split --split-max-size\n"
	       "splits it: FILE is the prefix (a trailing .gguf is dropped) of the shards\n"
	       "FILE-00001-of-0000N.gguf ..., which hotset and llama.cpp open from the first.\n\n"
	       "  --preset NAME   real shapes: %s;\n"
	       "                  flags given with it override it (--layers 2 makes a small file)\n"
	       "  --arch A        gpt-oss (experts with biases), qwen3moe, glm4moe (sigmoid\n"
	       "                  routing with a bias, a shared expert, leading dense layers) or\n"
	       "                  qwen35moe (Gated DeltaNet layers beside gated attention)\n"
	       "  --layers L      layers              --experts E   experts per layer\n"
	       "  --used K        experts per token   --embd D      hidden size\n"
	       "  --ff F          expert intermediate size\n"
	       "  --type T        expert matrix type (default mxfp4 for gpt-oss, else q8_0):\n"
	       "                  %s; the K-quants and iq4_xs need\n"
	       "                  --embd and --ff multiples of 256 (their quantizer is a plain\n"
	       "                  round-to-nearest one, not llama-quantize's search: for tests)\n"
	       "  --down-type T   the down matrices' own type, as llama-quantize's mixes give them\n"
	       "                  (Q4_K_M: --type q4_K --down-type q6_K)\n"
	       "  --vocab V       vocabulary size (default 512; presets: the real one)\n"
	       "  --heads H       query heads         --kv-heads H  KV heads (GQA)\n"
	       "  --head-dim D    values per head (default 64)\n"
	       "  --window W      gpt-oss sliding window of the even layers (default 128; 0: none)\n"
	       "  --dense-layers N  glm4moe: the first N layers have a dense FFN (default 0)\n"
	       "  --dense-ff F    glm4moe: its intermediate size (default 4 x --ff)\n"
	       "  --shared-experts N  glm4moe, qwen35moe: shared experts of --ff each (default 0;\n"
	       "                  qwen35moe: 0 or 1)\n"
	       "  --full-attn-every N  qwen35moe: attention in every N-th layer, DeltaNet in the\n"
	       "                  others (default 4; DeltaNet heads: 16 key, 32 value, of 128)\n"
	       "  --qk-norm       glm4moe: per-head q/k norms (GLM-4.5 has them, the Air none)\n"
	       "  --dense-type T  attention, embeddings and output, any type above but f32 (default\n"
	       "                  q8_0, as in the published\n"
	       "                  gpt-oss-120b file; norms, biases, sinks and routers are f32)\n"
	       "  --moe-only      routers and experts only (files for the MoE-layer benchmarks)\n"
	       "  --seed S        random seed (default 1)\n"
	       "  --name TEXT     general.name (default: the preset or \"hotset gen\")\n"
	       "  --split-max-size N  shards of at most N bytes of tensor data each (N, NM = N x 10^6,\n"
	       "                  NG = N x 10^9, as llama-gguf-split counts; a tensor is never cut)\n"
	       "  -o, --output F  the file to write (split: the shards' prefix)\n"
	       "  -q, --quiet     no progress output\n"
	       "  -h, --help      this text\n",
	       hs__gen_preset_names(), hs__type_supported_names());
}

static const char *part_path; /* unlinked if the run is interrupted */
static char **part_paths;      /* the same for each shard of a split file */
static int n_part_paths;

static void on_signal(int sig)
{
	if (part_path)
		unlink(part_path);
	for (int i = 0; i < n_part_paths; i++)
		unlink(part_paths[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* "4M", "2G" as llama-gguf-split reads them (10^6, 10^9 bytes), or plain bytes. */
static int parse_size(const char *s, uint64_t *v)
{
	char *end;
	unsigned long long n;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	n = strtoull(s, &end, 10);
	uint64_t unit = !*end ? 1 : !strcmp(end, "M") ? 1000000 : !strcmp(end, "G") ? 1000000000 : 0;
	if (errno || !unit || n == 0 || n > (UINT64_MAX >> 2) / unit)
		return -1;
	*v = n * unit;
	return 0;
}

struct progress {
	int tty, last;
	double t0;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void show_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress *pr = ctx;
	int pct = total ? (int)(100 * done / total) : 100;
	double el = now() - pr->t0;

	if (pr->tty) {
		fprintf(stderr, "\rgen: %3d%%  %.2f of %.2f GB  %.0f MB/s ", pct, done / 1e9, total / 1e9,
			el > 0 ? done / 1e6 / el : 0);
		if (done == total)
			fputc('\n', stderr);
	} else if (pct / 10 > pr->last / 10 || done == total) {
		fprintf(stderr, "gen: %3d%%  %.2f of %.2f GB\n", pct, done / 1e9, total / 1e9);
	}
	pr->last = pct;
}

int hs_cmd_gen(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "preset", required_argument, NULL, 'P' }, { "arch", required_argument, NULL, 'a' },
		{ "layers", required_argument, NULL, 'L' }, { "experts", required_argument, NULL, 'E' },
		{ "used", required_argument, NULL, 'K' },   { "embd", required_argument, NULL, 'D' },
		{ "ff", required_argument, NULL, 'F' },     { "type", required_argument, NULL, 'T' },
		{ "seed", required_argument, NULL, 's' },   { "name", required_argument, NULL, 'n' },
		{ "output", required_argument, NULL, 'o' }, { "quiet", no_argument, NULL, 'q' },
		{ "vocab", required_argument, NULL, 'V' },  { "heads", required_argument, NULL, 'H' },
		{ "kv-heads", required_argument, NULL, 'G' }, { "head-dim", required_argument, NULL, 'Z' },
		{ "window", required_argument, NULL, 'W' }, { "dense-type", required_argument, NULL, 'Y' },
		{ "moe-only", no_argument, NULL, 'M' }, { "split-max-size", required_argument, NULL, 'S' },
		{ "down-type", required_argument, NULL, 'd' }, { "dense-layers", required_argument, NULL, 'l' },
		{ "dense-ff", required_argument, NULL, 'f' }, { "shared-experts", required_argument, NULL, 'x' },
		{ "qk-norm", no_argument, NULL, 'k' }, { "full-attn-every", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 },
	};
	int vocab = 0, heads = 0, kv_heads = 0, head_dim = 0, window = -1, dense_type = -1, moe_only = 0;
	int dense_layers = -1, dense_ff = 0, shared = -1, qk_norm = 0, attn_every = 0;
	struct hs_gen_params p = { 0 };
	int layers = 0, experts = 0, used = 0, embd = 0, ff = 0, type = -1, down_type = -1, quiet = 0, c, rc;
	const char *preset = NULL, *out = NULL, *arch = NULL, *name = NULL;
	unsigned long long seed = 1;
	uint64_t split_max = 0;

	while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'P': preset = optarg; break;
		case 'a': arch = optarg; break;
		case 'L': if (hs_cli_parse_int("gen", "--layers", optarg, 1, 1024, &layers)) return 1; break;
		case 'E': if (hs_cli_parse_int("gen", "--experts", optarg, 1, 4096, &experts)) return 1; break;
		case 'K': if (hs_cli_parse_int("gen", "--used", optarg, 1, 64, &used)) return 1; break;
		case 'D': if (hs_cli_parse_int("gen", "--embd", optarg, 1, 65536, &embd)) return 1; break;
		case 'F': if (hs_cli_parse_int("gen", "--ff", optarg, 1, 65536, &ff)) return 1; break;
		case 'T':
			type = hs__type_from_name(optarg);
			if (!hs__type_supported(type))
				return hs_cli_fail("gen", "--type %s: one of %s", optarg, hs__type_supported_names());
			break;
		case 'd':
			down_type = hs__type_from_name(optarg);
			if (!hs__type_supported(down_type) || down_type == HS_TYPE_F32)
				return hs_cli_fail("gen", "--down-type %s: one of %s but f32", optarg, hs__type_supported_names());
			break;
		case 's': {
			char *end;
			seed = strtoull(optarg, &end, 0);
			if (end == optarg || *end)
				return hs_cli_fail("gen", "--seed %s: a whole number is needed", optarg);
			break;
		}
		case 'V': if (hs_cli_parse_int("gen", "--vocab", optarg, 1, 1 << 20, &vocab)) return 1; break;
		case 'H': if (hs_cli_parse_int("gen", "--heads", optarg, 1, 256, &heads)) return 1; break;
		case 'G': if (hs_cli_parse_int("gen", "--kv-heads", optarg, 1, 256, &kv_heads)) return 1; break;
		case 'Z': if (hs_cli_parse_int("gen", "--head-dim", optarg, 1, 256, &head_dim)) return 1; break;
		case 'W': if (hs_cli_parse_int("gen", "--window", optarg, 0, 1 << 24, &window)) return 1; break;
		case 'Y':
			dense_type = hs__type_from_name(optarg);
			if (!hs__type_supported(dense_type) || dense_type == HS_TYPE_F32)
				return hs_cli_fail("gen", "--dense-type %s: one of %s but f32", optarg, hs__type_supported_names());
			break;
		case 'M': moe_only = 1; break;
		case 'l': if (hs_cli_parse_int("gen", "--dense-layers", optarg, 0, 1023, &dense_layers)) return 1; break;
		case 'f': if (hs_cli_parse_int("gen", "--dense-ff", optarg, 1, 65536, &dense_ff)) return 1; break;
		case 'x': if (hs_cli_parse_int("gen", "--shared-experts", optarg, 0, 8, &shared)) return 1; break;
		case 'k': qk_norm = 1; break;
		case 'r': if (hs_cli_parse_int("gen", "--full-attn-every", optarg, 1, 1024, &attn_every)) return 1; break;
		case 'S':
			if (parse_size(optarg, &split_max))
				return hs_cli_fail("gen", "--split-max-size %s: a positive size in bytes, or with M or G "
						   "(e.g. 500M, 2G)", optarg);
			break;
		case 'n': name = optarg; break;
		case 'o': out = optarg; break;
		case 'q': quiet = 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("gen");
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset gen: unexpected argument '%s'\n", argv[optind]);
		return hs_cli_usage_error("gen");
	}
	if (!out)
		return hs_cli_fail("gen", "no output file: give -o FILE");
	if (preset) {
		const struct hs_gen_params *pp = hs__gen_preset(preset);
		if (!pp)
			return hs_cli_fail("gen", "--preset %s: not one of %s", preset, hs__gen_preset_names());
		p = *pp;
	} else if (!arch || !layers || !experts || !used || !embd || !ff) {
		return hs_cli_fail("gen", "without --preset, give --arch, --layers, --experts, --used, --embd and --ff");
	}
	if (arch) p.arch = arch;
	if (layers) p.n_layers = layers;
	if (experts) p.n_experts = experts;
	if (used) p.n_used = used;
	if (embd) p.n_embd = embd;
	if (ff) p.n_ff = ff;
	if (type >= 0)
		p.type = type;
	else if (!preset || arch)
		p.type = p.arch && strcmp(p.arch, "gpt-oss") != 0 ? HS_TYPE_Q8_0 : HS_TYPE_MXFP4;
	if (vocab) p.n_vocab = vocab;
	if (heads) p.n_head = heads;
	if (kv_heads) p.n_head_kv = kv_heads;
	if (head_dim) p.head_dim = head_dim;
	if (window >= 0) p.swa_window = window ? window : -1; /* 0 in the params is the default */
	if (dense_type >= 0) p.dense_type = dense_type;
	if (down_type >= 0) p.down_type = down_type;
	if (dense_layers >= 0) p.n_dense_layers = dense_layers;
	if (dense_ff) p.n_ff_dense = dense_ff;
	if (shared >= 0) p.n_shared = shared;
	if (qk_norm) p.qk_norm = 1;
	if (attn_every) p.full_attn_every = attn_every;
	p.moe_only = moe_only;
	p.seed = seed;
	p.name = name ? name : preset ? preset : "hotset gen";
	if (hs__gen_check(&p))
		return hs_cli_fail("gen", "%s", hs_last_error());

	/* Refuse early rather than fill the disk and fail at 90%. */
	{
		uint64_t need = hs__gen_data_bytes(&p) + (1u << 20);
		char *dir = strdup(out), *slash = dir ? strrchr(dir, '/') : NULL;
		struct statvfs vfs;
		if (slash)
			*slash = '\0';
		if (dir && statvfs(slash ? (dir[0] ? dir : "/") : ".", &vfs) == 0 &&
		    (uint64_t)vfs.f_bavail * vfs.f_frsize < need) {
			free(dir);
			return hs_cli_fail("gen", "%s: needs %.2f GB, only %.2f GB free there", out, need / 1e9,
					   (double)vfs.f_bavail * vfs.f_frsize / 1e9);
		}
		free(dir);
	}

	/* split: -o is the prefix, as llama-gguf-split's output argument is;
	 * "model.gguf" names model-00001-of-0000N.gguf, not model.gguf-00001... */
	char *prefix = NULL, first[4096 + 32];
	int n_shards = 0;
	if (split_max) {
		size_t n = strlen(out);
		if (n > 4096)
			return hs_cli_fail("gen", "-o %.40s...: a prefix of at most 4096 bytes", out);
		prefix = strdup(out);
		if (!prefix)
			return hs_cli_fail("gen", "out of memory");
		if (n > 5 && !strcmp(prefix + n - 5, ".gguf"))
			prefix[n - 5] = '\0';
		n_shards = hs__gen_shard_count(&p, split_max);
		if (n_shards < 0) {
			free(prefix);
			return hs_cli_fail("gen", "%s", hs_last_error());
		}
		if (n_shards > 65535) {
			free(prefix);
			return hs_cli_fail("gen", "--split-max-size %llu: %d shards; split.count allows 65535",
					   (unsigned long long)split_max, n_shards);
		}
		part_paths = calloc((size_t)n_shards, sizeof *part_paths);
		for (int i = 0; part_paths && i < n_shards; i++) {
			char shard[sizeof first];
			hs__gguf_split_path(shard, sizeof shard, prefix, i, n_shards);
			if ((part_paths[i] = malloc(strlen(shard) + 6)))
				sprintf(part_paths[i], "%s.part", shard);
			n_part_paths = i + 1;
		}
		hs__gguf_split_path(first, sizeof first, prefix, 0, n_shards);
	}
	char *part = malloc(strlen(out) + 6);
	if (!part || (split_max && !part_paths)) {
		free(part);
		free(prefix);
		return hs_cli_fail("gen", "out of memory");
	}
	sprintf(part, "%s.part", out);
	part_path = split_max ? NULL : part;
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);

	if (!quiet)
		fprintf(stderr, "gen: %s%s, %d layers x %d experts (%d used), n_embd %d, n_ff %d, %s, seed %llu -> %s%s\n",
			p.arch, moe_only ? " (MoE only)" : "", p.n_layers, p.n_experts, p.n_used, p.n_embd, p.n_ff,
			hs__type_name(p.type), seed, split_max ? first : out, split_max ? " ..." : "");
	struct progress pr = { isatty(2), -1, now() };
	if (split_max)
		rc = hs__gen_write_split(&p, prefix, split_max, quiet ? NULL : show_progress, &pr);
	else
		rc = hs__gen_write(&p, out, quiet ? NULL : show_progress, &pr);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	part_path = NULL;
	free(part);
	for (int i = 0; i < n_part_paths; i++)
		free(part_paths[i]);
	free(part_paths);
	part_paths = NULL;
	n_part_paths = 0;
	free(prefix);
	if (rc)
		return hs_cli_fail("gen", "%s", hs_last_error());
	if (!quiet && split_max)
		fprintf(stderr, "gen: wrote %d shard%s, %s ... in %.1f s\n", n_shards, n_shards == 1 ? "" : "s", first,
			now() - pr.t0);
	else if (!quiet)
		fprintf(stderr, "gen: wrote %s in %.1f s\n", out, now() - pr.t0);
	return 0;
}
