/* Checks the topology of the machine the test runs on: at least one NUMA
 * node and PU, every PU in exactly one node, GPUs (if any) with a bus id;
 * and the size benchmarks stream to read DRAM rather than its cache. */
#include "config.h"

#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "runtime/numa.h"
#include "tests/hs-test.h"

/* hs__past_cache_bytes: 4x the largest cache sysconf names, at least the
 * floor, at most an eighth of memory (unless the floor is more). */
static void check_past_cache(void)
{
	long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
	const size_t cache = (size_t)(l3 > l2 ? (l3 > 0 ? l3 : 0) : (l2 > 0 ? l2 : 0));
	const size_t mem = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE), cap = mem / 8;
	const size_t floors[] = { 0, 1, (size_t)256 << 20, (size_t)1 << 30, mem / 4 };
	for (int i = 0; i < 5; i++) {
		const size_t f = floors[i], b = hs__past_cache_bytes(f);
		const size_t want = 4 * cache < cap ? 4 * cache : cap;
		CHECK(b >= f && b >= want, "past_cache(%zu) = %zu, under the floor or 4 x %zu (cap %zu)", f, b, cache,
		      cap);
		CHECK(b == (f > want ? f : want), "past_cache(%zu) = %zu, not max(floor, min(4 x cache, memory / 8))", f,
		      b);
	}
}

int main(void)
{
	hs_topology *t = NULL;
	int rc = hs_topology_open(NULL, &t), pus = 0;

	CHECK(rc == 0, "open this machine: %s", hs_last_error());
	if (rc)
		return hs_test_end();
	CHECK(hs_topology_is_this_system(t), "this machine is not flagged as this system");
	CHECK(hs_topology_n_nodes(t) >= 1, "nodes %d", hs_topology_n_nodes(t));
	CHECK(hs_topology_n_cores(t) >= 1 && hs_topology_n_cpus(t) >= hs_topology_n_cores(t), "cores %d cpus %d",
	      hs_topology_n_cores(t), hs_topology_n_cpus(t));
	for (int i = 0; i < hs_topology_n_nodes(t); i++) {
		const struct hs_numa_node *n = hs_topology_node(t, i);
		pus += n->n_cpus;
		for (int k = 1; k < n->n_cpus; k++)
			CHECK(n->cpus[k - 1] < n->cpus[k], "node %d cpus not ascending", n->os_index);
		if (i)
			CHECK(hs_topology_node(t, i - 1)->os_index < n->os_index, "nodes not ascending");
	}
	/* Memory-only nodes are legal, so PUs are counted, not nodes with PUs. */
	CHECK(pus == hs_topology_n_cpus(t), "PUs in nodes %d, in machine %d", pus, hs_topology_n_cpus(t));
	for (int i = 0; i < hs_topology_n_gpus(t); i++)
		CHECK(strlen(hs_topology_gpu(t, i)->pci_bus_id) == 12, "bus id '%s'", hs_topology_gpu(t, i)->pci_bus_id);
	hs_topology_free(t);
	check_past_cache();
	return hs_test_end();
}
