/* `hotset tune`: measure this machine into a profile the planner reads. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cpu_kernels/formats.h"
#include "planner/planner.h"
#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset tune [-o FILE] [--quick | --thorough] [--types LIST] [-q]\n\n"
	       "Measures this machine and saves a profile (JSON, docs/profile-json.md) that\n"
	       "`hotset plan` reads: per NUMA node the read bandwidth of its cores from each\n"
	       "node's memory, the CPU expert kernel's speed (GB/s at 1 token, GFLOP/s at 512\n"
	       "tokens) on MXFP4 2880 x 2880 experts per thread count and on each other expert\n"
	       "type (2048 x 768 experts) with all cores, the memory available now; per CUDA\n"
	       "GPU its free and total memory, pinned copy bandwidth from each node, pageable\n"
	       "copy bandwidth and device memory bandwidth, next to hwloc's view of its PCIe\n"
	       "link.  Takes about a minute by default.\n\n"
	       "  -o FILE      where to save (default $XDG_CACHE_HOME/hotset/profile.json)\n"
	       "  --quick      smaller buffers, shorter runs, all cores only\n"
	       "  --thorough   larger buffers, longer runs, thread counts 1, 2, 4, ... cores\n"
	       "  --types LIST the expert types besides MXFP4: all (default), none, or ggml\n"
	       "               names separated by commas (q4_K,q6_K: a Q4_K_M file's); a model\n"
	       "               of a type the profile lacks is planned at MXFP4's speed\n"
	       "  -q, --quiet  no progress lines\n"
	       "  -h, --help   this text\n");
}

struct progress {
	int quiet;
	double t0;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void show(const char *what, double f, void *ctx)
{
	struct progress *p = ctx;
	if (!p->quiet)
		fprintf(stderr, "tune: %3.0f%%  %5.1f s  %s\n", 100 * f, now_s() - p->t0, what);
}

int hs_cmd_tune(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "quick", no_argument, NULL, 'Q' }, { "thorough", no_argument, NULL, 'T' },
		{ "types", required_argument, NULL, 'Y' }, { "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	enum hs_tune_level level = HS_TUNE_DEFAULT;
	struct progress pr = { 0, now_s() };
	const char *out = NULL, *types = NULL;
	char def[1024];
	int c, rc = 1;
	hs_topology *t = NULL;
	struct hs_profile *p = calloc(1, sizeof *p);

	if (!p)
		return hs_cli_fail("tune", "out of memory");
	optind = 0; /* re-initialises getopt (argument permutation too) */
	while ((c = getopt_long(argc, argv, "o:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case 'Q': level = HS_TUNE_QUICK; break;
		case 'T': level = HS_TUNE_THOROUGH; break;
		case 'Y': types = optarg; break;
		case 'q': pr.quiet = 1; break;
		case 'h': help(); free(p); return 0;
		default: free(p); return hs_cli_usage_error("tune");
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset tune: unexpected argument '%s'\n", argv[optind]);
		free(p);
		return hs_cli_usage_error("tune");
	}
	if (hs_cli.topology) {
		free(p);
		return hs_cli_fail("tune", "--topology %s: tune measures this machine only (write a profile by hand "
				   "for another one, see docs/profile-json.md)", hs_cli.topology);
	}
	if (!out) {
		if (hs_profile_default_path(def, sizeof def)) {
			hs_cli_fail("tune", "%s", hs_last_error());
			goto out_free;
		}
		out = def;
		/* the default folder is made (its parent, the cache folder, too); a
		 * folder given with -o must exist */
		for (char *s = strchr(def + 1, '/'); s; s = strchr(s + 1, '/')) {
			*s = 0;
			mkdir(def, 0755); /* a failure shows in the check below */
			*s = '/';
		}
	}
	/* before the seconds of measuring, not after */
	if (hs_cli_check_output("tune", out == def ? "profile" : "-o", out))
		goto out_free;
	if (hs_topology_open(NULL, &t) || hs_profile_measure(t, level, types, show, &pr, p) || hs_profile_save(p, out)) {
		hs_cli_fail("tune", "%s", hs_last_error());
		goto out_free;
	}
	printf("profile of %s (measured, %.0f s)\n", p->machine, now_s() - pr.t0);
	for (int i = 0; i < p->n_nodes; i++) {
		const struct hs_profile_node *n = &p->nodes[i];
		printf("node %d: %d cores, %.1f of %.1f GiB available; read GB/s:", n->os_index, n->n_cores,
		       n->available_bytes / 1073741824.0, n->memory_bytes / 1073741824.0);
		for (int j = 0; j < p->n_nodes; j++)
			printf(" from node %d %.1f", p->nodes[j].os_index, n->read_gbps[j]);
		printf("\n");
		for (int k = 0; k < n->n_kernel; k++) {
			const struct hs_kernel_speed *ks = &n->kernel[k];
			const double rd = n->read_gbps[i] > 0 ? n->read_gbps[i] : 0;
			printf("  CPU kernel (%s), %-6s %d thread%s: %5.1f GB/s at 1 token (%.2f of local read), "
			       "%4.0f GFLOP/s at 512",
			       p->cpu_kernels, hs__type_name(hs__kspeed_type(ks)), ks->threads,
			       ks->threads == 1 ? "" : "s", ks->decode_gbps, rd > 0 ? ks->decode_gbps / rd : 0,
			       ks->prefill_gflops);
			if (ks->dense_gbps > 0)
				printf("; dense rows %5.1f GB/s (%.2f)", ks->dense_gbps, rd > 0 ? ks->dense_gbps / rd : 0);
			printf("\n");
		}
	}
	for (int i = 0; i < p->n_gpus; i++) {
		const struct hs_profile_gpu *g = &p->gpus[i];
		printf("gpu %d: %s %s, cuda %d, link %.2f GB/s (hwloc)", i, g->pci_bus_id, g->name, g->cuda_index,
		       g->link_gbps);
		if (g->cuda_index >= 0) {
			printf(", %.1f of %.1f GiB free, device memory %.0f GB/s, pageable %.1f GB/s, pinned:",
			       g->memory_free_bytes / 1073741824.0, g->memory_total_bytes / 1073741824.0,
			       g->device_memory_gbps, g->h2d_pageable_gbps);
			for (int j = 0; j < p->n_nodes; j++)
				printf(" node %d %.1f", p->nodes[j].os_index, g->h2d_pinned_gbps[j]);
		} else {
			printf(", not measured (%s)", hs_cuda_status());
		}
		printf("\n");
	}
	printf("saved: %s\n", out);
	rc = 0;
out_free:
	hs_topology_free(t);
	free(p);
	return rc;
}
