/* The topology as JSON for scripts (schema: docs/topology-json.md).  Kept
 * apart from topology.c so that it holds no hwloc calls. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hotset.h"
#include "base/error.h"

static json_t *int_array(const int *v, int n)
{
	json_t *a = json_array();
	for (int i = 0; a && i < n; i++)
		json_array_append_new(a, json_integer(v[i]));
	return a;
}

/* "gen3 x16, gen4 x8" -> ["gen3 x16", "gen4 x8"] */
static json_t *string_list(const char *s)
{
	json_t *a = json_array();
	while (a && s && *s) {
		const char *end = strstr(s, ", ");
		size_t len = end ? (size_t)(end - s) : strlen(s);
		json_array_append_new(a, json_stringn(s, len));
		s = end ? end + 2 : s + len;
	}
	return a;
}

static json_t *int_or_null(int v, int unknown)
{
	return v == unknown ? json_null() : json_integer(v);
}

char *hs_topology_to_json(const hs_topology *t)
{
	json_t *root = json_object(), *nodes = json_array(), *gpus = json_array();
	char *text = NULL;

	if (!t) {
		hs__null_arg(__func__, "t");
		goto out_decref;
	}
	if (!root || !nodes || !gpus)
		goto out_decref;
	json_object_set_new(root, "source", json_string(hs_topology_source(t)));
	json_object_set_new(root, "this_system", json_boolean(hs_topology_is_this_system(t)));
	json_object_set_new(root, "cores", json_integer(hs_topology_n_cores(t)));
	json_object_set_new(root, "cpus", json_integer(hs_topology_n_cpus(t)));
	for (int i = 0; i < hs_topology_n_nodes(t); i++) {
		const struct hs_numa_node *n = hs_topology_node(t, i);
		json_array_append_new(nodes, json_pack("{s:i, s:I, s:i, s:o}", "os_index", n->os_index,
						       "memory_bytes", (json_int_t)n->memory_bytes,
						       "cores", n->n_cores, "cpus", int_array(n->cpus, n->n_cpus)));
	}
	for (int i = 0; i < hs_topology_n_gpus(t); i++) {
		const struct hs_gpu *g = hs_topology_gpu(t, i);
		char vendor[8], device[8], class[8];

		snprintf(vendor, sizeof vendor, "%04x", g->vendor_id);
		snprintf(device, sizeof device, "%04x", g->device_id);
		snprintf(class, sizeof class, "%04x", g->class_id);
		json_array_append_new(gpus, json_pack(
			"{s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o}",
			"pci_bus_id", g->pci_bus_id, "vendor_id", vendor, "device_id", device,
			"class_id", class, "name", g->name,
			"numa_nodes", int_array(g->numa_nodes, g->n_numa_nodes),
			"link_gbps", g->link_gbps > 0 ? json_real(g->link_gbps) : json_null(),
			"pcie_gen", int_or_null(g->pcie_gen, 0),
			"pcie_width", int_or_null(g->pcie_width, 0),
			"pcie_candidates", string_list(g->pcie_candidates),
			"cuda_index", int_or_null(g->cuda_index, -1)));
	}
	json_object_set_new(root, "nodes", nodes);
	json_object_set_new(root, "gpus", gpus);
	nodes = gpus = NULL;
	text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
out_decref:
	json_decref(nodes);
	json_decref(gpus);
	json_decref(root);
	if (!text)
		hs__error(ENOMEM, "topology JSON: out of memory");
	return text;
}
