/* The `hotset` command: global options, then one subcommand. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/device-cuda.h"
#include "tools/tools.h"

struct hs_cli hs_cli;

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "topo", hs_cmd_topo, "show NUMA nodes, cores and NVIDIA GPUs with their PCIe links" },
	{ "model", hs_cmd_model, "show a GGUF model's MoE shape and what its experts weigh" },
	{ "gen", hs_cmd_gen, "write a synthetic model file with real shapes" },
	{ "run", hs_cmd_run, "run a whole model: a prompt in, generated tokens out, with timings" },
	{ "run-layer", hs_cmd_run_layer, "run one MoE layer on hidden states from a .npy file" },
	{ "tune", hs_cmd_tune, "measure this machine (bandwidths, kernel and copy speeds) into a profile" },
	{ "plan", hs_cmd_plan, "place a model's experts on GPU / host and predict speed and memory" },
	{ "bench", hs_cmd_bench, "compare cpu-compute, pcie-stream and hybrid here, measured against predicted" },
	{ "trace", hs_cmd_trace, "routing traces: generate, statistics and cache hit rates, project a plan" },
	{ "tokenize", hs_cmd_tokenize, "encode a text with a GGUF file's tokenizer: ids and pieces" },
	{ "serve", hs_cmd_serve, "an OpenAI-compatible HTTP server: streaming, parallel requests, a chat page" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: hotset [--topology FILE] [-v | -vv] SUBCOMMAND [OPTIONS]\n"
		   "       hotset --version | --help\n\n"
		   "Runs the Mixture-of-Experts layers of large models across CPU and GPU.\n\n"
		   "subcommands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-10s  %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\nglobal options:\n"
		   "  --topology FILE  use this hwloc XML topology instead of this machine's\n"
		   "                   (also $HOTSET_TOPOLOGY)\n"
		   "  -v, --verbose    say what the library chose on stderr (CPU kernels, device,\n"
		   "                   topology, layers left to the CPU); twice (-vv) for debug\n"
		   "                   messages too\n"
		   "  --version        print the version and how hotset was built\n"
		   "  -h, --help       this text; `hotset SUBCOMMAND --help` for each subcommand\n");
}

int hs_cli_fail(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "hotset %s: ", sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

int hs_cli_usage_error(const char *sub)
{
	fprintf(stderr, "Try 'hotset %s --help'.\n", sub);
	return 2;
}

int hs_cli_parse_int(const char *sub, const char *flag, const char *s, long lo, long hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < lo || v > hi)
		return hs_cli_fail(sub, "%s %s: a whole number in %ld..%ld is needed", flag, s, lo, hi);
	*out = (int)v;
	return 0;
}

int hs_cli_parse_num(const char *sub, const char *flag, const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= lo && v <= hi))
		return hs_cli_fail(sub, "%s %s: a number in %g..%g is needed", flag, s, lo, hi);
	*out = v;
	return 0;
}

int hs_cli_split_list(const char *sub, const char *flag, const char *s, char *buf, size_t n, char **items, int max,
		      int *count)
{
	int k = 0;

	if (strlen(s) >= n)
		return hs_cli_fail(sub, "%s: a list of %zu characters (at most %zu)", flag, strlen(s), n - 1);
	memcpy(buf, s, strlen(s) + 1);
	/* strtok would skip empty items: "1,,2" and "cpu," are refused instead */
	for (char *p = buf;; k++) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = 0;
		if (!*p)
			return hs_cli_fail(sub, "%s %s: item %d is empty", flag, s, k + 1);
		if (k == max)
			return hs_cli_fail(sub, "%s %s: more than %d items", flag, s, max);
		items[k] = p;
		if (!comma)
			break;
		p = comma + 1;
	}
	*count = k + 1;
	return 0;
}

int hs_cli_check_output(const char *sub, const char *flag, const char *path)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!*path)
		return hs_cli_fail(sub, "%s '': an empty file name", flag);
	if (slash && !slash[1])
		return hs_cli_fail(sub, "%s %s: names a folder, not a file", flag, path);
	if (strlen(path) >= sizeof dir)
		return hs_cli_fail(sub, "%s: a path of %zu bytes (at most %zu)", flag, strlen(path), sizeof dir - 1);
	if (slash)
		snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
	else
		snprintf(dir, sizeof dir, ".");
	if (stat(dir, &st) != 0)
		return hs_cli_fail(sub, "%s %s: folder %s: %s (folders are not created)", flag, path, dir,
				   strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return hs_cli_fail(sub, "%s %s: %s is not a folder", flag, path, dir);
	if (access(dir, W_OK | X_OK) != 0)
		return hs_cli_fail(sub, "%s %s: cannot write in folder %s: %s", flag, path, dir, strerror(errno));
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return hs_cli_fail(sub, "%s %s: is a folder", flag, path);
	return 0;
}

int hs_cli_open_topology(const char *sub, hs_topology **t)
{
	int rc = hs_topology_open(hs_cli.topology, t);

	if (rc)
		return hs_cli_fail(sub, "%s", hs_last_error());
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, version = 0;

	/* Over a file-size limit (ulimit -f) a write fails with EFBIG and says
	 * so in one line; by default the signal would kill the command first. */
	signal(SIGXFSZ, SIG_IGN);
	/* hwloc prints a banner of its own for some malformed XML files (then
	 * refuses them): the command's one line is enough.  2 hides hwloc's
	 * "critical" messages too (1 does not); a value the user set wins. */
	setenv("HWLOC_HIDE_ERRORS", "2", 0);
	hs_cli.topology = getenv("HOTSET_TOPOLOGY");
	if (hs_cli.topology && !*hs_cli.topology)
		hs_cli.topology = NULL;
	/* "+" stops at the subcommand, whose own flags follow it. */
	while ((c = getopt_long(argc, argv, "+vh", opts, NULL)) != -1) {
		switch (c) {
		case 't': hs_cli.topology = optarg; break;
		case 'v': hs_cli.verbose++; break;
		case 'V': version = 1; break;
		case 'h': usage(stdout); return 0;
		default: fprintf(stderr, "Try 'hotset --help'.\n"); return 2;
		}
	}
	/* The library is silent by default; -v lets its messages through. */
	if (hs_cli.verbose)
		hs_log_set(hs_cli.verbose >= 2 ? HS_LOG_DEBUG : HS_LOG_INFO, NULL, NULL);
	if (version) {
		char blas[400];
		int rc = hs__cuda_blas_status(blas, sizeof blas);
		printf("hotset %s\n%s\n%s\n", hs_version(), hs_build_info(), hs_cuda_status());
		/* which path the CUDA prefill products of float weights take */
		if (rc == 0)
			printf("cuBLAS: %s (float-weight products of more than 8 tokens; HOTSET_CUBLAS=0: the tile kernel)\n",
			       blas);
		else if (rc != -ENOSYS)
			printf("cuBLAS: not used: %s; the tile kernel takes every product\n", blas);
		return 0;
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (strcmp(argv[optind], commands[i].name) == 0) {
			char **sub_argv = argv + optind;
			int sub_argc = argc - optind;
			optind = 0; /* 0 re-initialises getopt for the subcommand */
			return commands[i].run(sub_argc, sub_argv);
		}
	fprintf(stderr, "hotset: unknown subcommand '%s'. Try 'hotset --help'.\n", argv[optind]);
	return 2;
}
