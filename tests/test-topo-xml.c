/* Checks topology facts read from real machines' hwloc XML exports (GPU to
 * NUMA node mapping, which PCI devices count as GPUs, node memory, link
 * speed, CUDA index from an OS device) and that broken files fail cleanly. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "hotset.h"
#include "tests/hs-test.h"

static hs_topology *open_xml(const char *name)
{
	hs_topology *t = NULL;
	int rc = hs_topology_open(hs_test_data(name), &t);

	CHECK(rc == 0 && t, "%s: rc %d: %s", name, rc, hs_last_error());
	return t;
}

static const struct hs_gpu *find_gpu(const hs_topology *t, const char *bus)
{
	for (int i = 0; i < hs_topology_n_gpus(t); i++)
		if (strcmp(hs_topology_gpu(t, i)->pci_bus_id, bus) == 0)
			return hs_topology_gpu(t, i);
	return NULL;
}

static void expect_gpu(const hs_topology *t, const char *bus, int node, double gbps, int cuda)
{
	const struct hs_gpu *g = find_gpu(t, bus);

	CHECK(g != NULL, "GPU %s missing", bus);
	if (!g)
		return;
	CHECK(g->vendor_id == 0x10de, "%s vendor %04x", bus, g->vendor_id);
	CHECK(g->n_numa_nodes == 1 && g->numa_nodes[0] == node, "%s: %d nodes, first %d, want node %d", bus,
	      g->n_numa_nodes, g->n_numa_nodes ? g->numa_nodes[0] : -1, node);
	CHECK(g->link_gbps > gbps - 0.01 && g->link_gbps < gbps + 0.01, "%s link %.3f want %.3f", bus,
	      g->link_gbps, gbps);
	CHECK(g->cuda_index == cuda, "%s cuda index %d want %d", bus, g->cuda_index, cuda);
}

static void test_24em64t(void)
{
	hs_topology *t = open_xml("topologies/24em64t-2n6c2t-pci.xml");

	if (!t)
		return;
	CHECK(!hs_topology_is_this_system(t), "an export is not this system");
	CHECK(hs_topology_n_nodes(t) == 2, "nodes %d", hs_topology_n_nodes(t));
	CHECK(hs_topology_node(t, 0)->memory_bytes == 19316633600ull, "node 0 memory %llu",
	      (unsigned long long)hs_topology_node(t, 0)->memory_bytes);
	CHECK(hs_topology_node(t, 1)->memory_bytes == 19327348736ull, "node 1 memory %llu",
	      (unsigned long long)hs_topology_node(t, 1)->memory_bytes);
	CHECK(hs_topology_n_cpus(t) == 24 && hs_topology_n_cores(t) == 12, "cpus %d cores %d",
	      hs_topology_n_cpus(t), hs_topology_n_cores(t));
	/* cpuset 0x00555555: node 0 holds the even PUs 0..22. */
	CHECK(hs_topology_node(t, 0)->n_cpus == 12 && hs_topology_node(t, 0)->cpus[1] == 2 &&
	      hs_topology_node(t, 0)->n_cores == 6, "node 0 cpus");
	/* Three NVIDIA 3D controllers; the ATI VGA at 01:03.0 is not a GPU. */
	CHECK(hs_topology_n_gpus(t) == 3, "gpus %d", hs_topology_n_gpus(t));
	CHECK(find_gpu(t, "0000:01:03.0") == NULL, "AMD VGA listed as GPU");
	expect_gpu(t, "0000:06:00.0", 0, 4.0, -1);
	/* hwloc meets 14:00.0 before 11:00.0; the list is in bus order. */
	CHECK(hs_topology_n_gpus(t) == 3 && strcmp(hs_topology_gpu(t, 1)->pci_bus_id, "0000:11:00.0") == 0 &&
	      strcmp(hs_topology_gpu(t, 2)->pci_bus_id, "0000:14:00.0") == 0, "GPUs not in bus order");
	expect_gpu(t, "0000:11:00.0", 1, 4.0, -1);
	expect_gpu(t, "0000:14:00.0", 1, 4.0, -1);
	/* 4 GB/s is gen1 x16 or gen2 x8: both are listed and neither is chosen. */
	const struct hs_gpu *g = find_gpu(t, "0000:06:00.0");
	if (g) {
		CHECK(g->pcie_gen == 0 && g->pcie_width == 0, "ambiguous link resolved to gen%d x%d", g->pcie_gen,
		      g->pcie_width);
		CHECK(strstr(g->pcie_candidates, "gen1 x16") && strstr(g->pcie_candidates, "gen2 x8"),
		      "candidates '%s'", g->pcie_candidates);
	}
	hs_topology_free(t);
}

static void test_dgx2(void)
{
	hs_topology *t = open_xml("topologies/nvidiaDGX2.xml");
	int per_node[2] = { 0, 0 };

	if (!t)
		return;
	CHECK(hs_topology_n_nodes(t) == 2, "nodes %d", hs_topology_n_nodes(t));
	CHECK(hs_topology_node(t, 0)->memory_bytes == 810234351616ull, "node 0 memory");
	/* 16 V100s; the 11 NVSwitches (class 0680) are not GPUs. */
	CHECK(hs_topology_n_gpus(t) == 16, "gpus %d", hs_topology_n_gpus(t));
	for (int i = 0; i < hs_topology_n_gpus(t); i++) {
		const struct hs_gpu *g = hs_topology_gpu(t, i);
		CHECK(g->class_id == 0x0302 && g->device_id == 0x1db8, "%s class %04x device %04x", g->pci_bus_id,
		      g->class_id, g->device_id);
		CHECK(g->n_numa_nodes == 1, "%s nodes %d", g->pci_bus_id, g->n_numa_nodes);
		if (g->n_numa_nodes == 1 && g->numa_nodes[0] >= 0 && g->numa_nodes[0] < 2)
			per_node[g->numa_nodes[0]]++;
		CHECK(g->link_gbps > 15.7 && g->link_gbps < 15.8, "%s link %.3f", g->pci_bus_id, g->link_gbps);
		CHECK(strstr(g->pcie_candidates, "gen3 x16") != NULL, "candidates '%s'", g->pcie_candidates);
		if (i > 0)
			CHECK(strcmp(hs_topology_gpu(t, i - 1)->pci_bus_id, g->pci_bus_id) < 0, "PCI order");
	}
	CHECK(per_node[0] == 8 && per_node[1] == 8, "per node %d %d", per_node[0], per_node[1]);
	hs_topology_free(t);
}

static void test_wholeio(void)
{
	hs_topology *t = open_xml("topologies/32em64t-2n8c2t-pci-wholeio.xml");

	if (!t)
		return;
	CHECK(hs_topology_n_gpus(t) == 3, "gpus %d", hs_topology_n_gpus(t));
	CHECK(hs_topology_node(t, 1)->memory_bytes == 34359738368ull, "node 1 memory");
	/* Unknown link speed stays 0; the export names 84:00.0's CUDA device cuda0. */
	expect_gpu(t, "0000:03:00.0", 0, 0, -1);
	expect_gpu(t, "0000:83:00.0", 1, 0, -1);
	expect_gpu(t, "0000:84:00.0", 1, 0, 0);
	CHECK(find_gpu(t, "0000:84:00.1") == NULL, "AMD VGA at 84:00.1 listed as GPU");
	if (find_gpu(t, "0000:03:00.0"))
		CHECK(find_gpu(t, "0000:03:00.0")->pcie_candidates[0] == '\0', "candidates for unknown link");
	hs_topology_free(t);
}

static void test_no_gpu(void)
{
	hs_topology *t = open_xml("topologies/16intel64-manyVFs.xml");

	if (!t)
		return;
	CHECK(hs_topology_n_nodes(t) == 2 && hs_topology_n_gpus(t) == 0, "nodes %d gpus %d",
	      hs_topology_n_nodes(t), hs_topology_n_gpus(t));
	CHECK(hs_topology_node(t, 0)->memory_bytes == 68682809344ull, "node 0 memory");
	CHECK(hs_topology_gpu(t, 0) == NULL && hs_topology_node(t, 2) == NULL, "out-of-range access");
	hs_topology_free(t);
}

/* The JSON form carries the same facts, in the documented keys. */
static void test_json(void)
{
	hs_topology *t = open_xml("topologies/24em64t-2n6c2t-pci.xml");
	json_error_t err;
	json_t *j, *g;
	char *s;

	if (!t)
		return;
	s = hs_topology_to_json(t);
	CHECK(s != NULL, "to_json: %s", hs_last_error());
	j = s ? json_loads(s, 0, &err) : NULL;
	CHECK(j != NULL, "JSON does not parse: %s", s ? err.text : "");
	if (j) {
		CHECK(json_array_size(json_object_get(j, "nodes")) == 2, "nodes");
		CHECK(json_integer_value(json_object_get(json_array_get(json_object_get(j, "nodes"), 1),
							 "memory_bytes")) == 19327348736ll, "memory_bytes");
		CHECK(json_array_size(json_object_get(j, "gpus")) == 3, "gpus");
		g = json_array_get(json_object_get(j, "gpus"), 0);
		CHECK(strcmp(json_string_value(json_object_get(g, "pci_bus_id")), "0000:06:00.0") == 0, "bus id");
		CHECK(json_integer_value(json_array_get(json_object_get(g, "numa_nodes"), 0)) == 0, "numa");
		CHECK(json_is_null(json_object_get(g, "cuda_index")), "cuda_index not null");
		CHECK(json_is_null(json_object_get(g, "pcie_gen")), "pcie_gen not null");
		CHECK(json_real_value(json_object_get(g, "link_gbps")) > 3.99, "link_gbps");
		CHECK(json_array_size(json_object_get(g, "pcie_candidates")) == 2, "candidates");
		json_decref(j);
	}
	free(s);
	hs_topology_free(t);
}

static void expect_broken(const char *path, const char *content, size_t len)
{
	hs_topology *t = (hs_topology *)1;
	int rc;

	if (content) {
		FILE *f = fopen(path, "wb");
		CHECK(f != NULL, "cannot write %s", path);
		if (!f)
			return;
		fwrite(content, 1, len, f);
		fclose(f);
	}
	rc = hs_topology_open(path, &t);
	CHECK(rc == -EIO || rc == -EINVAL, "%s: rc %d", path, rc);
	CHECK(t == NULL, "%s: topology returned on error", path);
	CHECK(strstr(hs_last_error(), path) != NULL, "%s: message '%s' does not name the file", path,
	      hs_last_error());
	CHECK(strchr(hs_last_error(), '\n') == NULL, "message is not one line");
	if (content)
		unlink(path);
}

static void test_broken(void)
{
	char tmpl[] = "/tmp/hs-topo-XXXXXX";
	char path[64], *good = NULL;
	long len;
	FILE *f = fopen(hs_test_data("topologies/24em64t-2n6c2t-pci.xml"), "rb");

	CHECK(mkdtemp(tmpl) != NULL, "mkdtemp");
	CHECK(f != NULL, "open XML");
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	good = malloc(len);
	CHECK(good && fread(good, 1, len, f) == (size_t)len, "read XML");
	fclose(f);
	snprintf(path, sizeof path, "%s/missing.xml", tmpl);
	expect_broken(path, NULL, 0);
	expect_broken(tmpl, NULL, 0); /* a directory */
	snprintf(path, sizeof path, "%s/empty.xml", tmpl);
	expect_broken(path, "", 0);
	snprintf(path, sizeof path, "%s/garbage.xml", tmpl);
	expect_broken(path, "this is not XML \x01\x02\xff", 19);
	snprintf(path, sizeof path, "%s/other.xml", tmpl);
	expect_broken(path, "<?xml version=\"1.0\"?>\n<html><body/></html>\n", 43);
	/* Cut at several places, mid-tag included. */
	for (int i = 1; i < 8 && good; i++) {
		snprintf(path, sizeof path, "%s/cut%d.xml", tmpl, i);
		expect_broken(path, good, (size_t)(len * i / 8));
	}
	free(good);
	rmdir(tmpl);
}

int main(void)
{
	test_24em64t();
	test_dgx2();
	test_wholeio();
	test_no_gpu();
	test_json();
	test_broken();
	return hs_test_end();
}
