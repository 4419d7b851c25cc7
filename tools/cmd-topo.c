/* `hotset topo`: the machine as the planner sees it. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset topo [--topology FILE] [--json]\n\n"
	       "Shows the NUMA nodes (memory, cores, CPUs) and the NVIDIA GPUs (PCI bus id,\n"
	       "nearest NUMA node, PCIe link as hwloc reports it, CUDA index) of this machine\n"
	       "or of an hwloc XML export of another machine.\n\n"
	       "  --topology FILE  read this hwloc XML file (also $HOTSET_TOPOLOGY)\n"
	       "  --json           print JSON instead of a table (schema: docs/topology-json.md)\n"
	       "  -h, --help       this text\n");
}

/* "0-3,8-11" style list of PU numbers. */
static void print_ranges(const int *v, int n)
{
	for (int i = 0; i < n;) {
		int j = i;
		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		printf("%s%d", i ? "," : "", v[i]);
		if (j > i)
			printf("-%d", v[j]);
		i = j + 1;
	}
}

static void print_table(const hs_topology *t)
{
	printf("topology: %s%s\n", hs_topology_source(t),
	       hs_topology_is_this_system(t) ? "" : " (another machine's export)");
	printf("%d NUMA node%s, %d cores, %d CPUs\n\n", hs_topology_n_nodes(t),
	       hs_topology_n_nodes(t) == 1 ? "" : "s", hs_topology_n_cores(t), hs_topology_n_cpus(t));
	printf("%-5s %12s %6s  %s\n", "node", "memory", "cores", "cpus");
	for (int i = 0; i < hs_topology_n_nodes(t); i++) {
		const struct hs_numa_node *n = hs_topology_node(t, i);
		printf("%-5d %8.1f GiB %6d  ", n->os_index, (double)n->memory_bytes / (1u << 30), n->n_cores);
		print_ranges(n->cpus, n->n_cpus);
		printf("\n");
	}
	printf("\n");
	if (hs_topology_n_gpus(t) == 0) {
		printf("no NVIDIA GPU on the PCI bus\n");
		return;
	}
	printf("%-14s %-9s %-6s %-12s %-34s %s\n", "gpu", "id", "node", "link", "pcie", "cuda");
	for (int i = 0; i < hs_topology_n_gpus(t); i++) {
		const struct hs_gpu *g = hs_topology_gpu(t, i);
		char nodes[64] = "", link[32] = "unknown", cuda[16] = "-", id[16];
		int len = 0;

		for (int k = 0; k < g->n_numa_nodes && len < (int)sizeof nodes - 12; k++)
			len += snprintf(nodes + len, sizeof nodes - len, "%s%d", k ? "," : "", g->numa_nodes[k]);
		if (g->link_gbps > 0)
			snprintf(link, sizeof link, "%.2f GB/s", g->link_gbps);
		if (g->cuda_index >= 0)
			snprintf(cuda, sizeof cuda, "%d", g->cuda_index);
		snprintf(id, sizeof id, "%04x:%04x", g->vendor_id, g->device_id);
		printf("%-14s %-9s %-6s %-12s %-34s %s%s%s\n", g->pci_bus_id, id, nodes, link,
		       g->pcie_candidates[0] ? g->pcie_candidates : "-", cuda, g->name[0] ? "  " : "", g->name);
	}
}

int hs_cmd_topo(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "topology", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int c, json = 0, rc;
	hs_topology *t;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 't': hs_cli.topology = optarg; break;
		case 'j': json = 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("topo");
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset topo: unexpected argument '%s'\n", argv[optind]);
		return hs_cli_usage_error("topo");
	}
	if ((rc = hs_cli_open_topology("topo", &t)) != 0)
		return rc;
	if (json) {
		char *s = hs_topology_to_json(t);
		if (!s) {
			hs_topology_free(t);
			return hs_cli_fail("topo", "%s", hs_last_error());
		}
		printf("%s\n", s);
		free(s);
	} else {
		print_table(t);
		if (hs_topology_is_this_system(t))
			printf("\nCUDA: %s\n", hs_cuda_status());
	}
	hs_topology_free(t);
	return 0;
}
