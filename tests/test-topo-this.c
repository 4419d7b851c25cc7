/* Checks the topology of the machine the test runs on: at least one NUMA
 * node and PU, every PU in exactly one node, GPUs (if any) with a bus id. */
#include "config.h"

#include <string.h>

#include "hotset.h"
#include "tests/hs-test.h"

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
	return hs_test_end();
}
