/* hotset/topology.h: NUMA nodes, cores and GPUs as hwloc finds them.  Part
 * of <hotset.h>: include that, not this file. */
#ifndef HOTSET_TOPOLOGY_H
#define HOTSET_TOPOLOGY_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* One NUMA node.  Arrays belong to the topology. */
struct hs_numa_node {
	int os_index;            /* the kernel's node number */
	uint64_t memory_bytes;   /* local memory as hwloc reports it */
	int n_cores;             /* physical cores in this node */
	int n_cpus;              /* processing units (hardware threads) */
	const int *cpus;         /* OS indices of those PUs, ascending */
};

/* One NVIDIA GPU found on the PCI bus (vendor 0x10de, class 0x0300 or
 * 0x0302; other vendors' display devices and NVSwitch chips are not GPUs). */
struct hs_gpu {
	char pci_bus_id[16];     /* "dddd:bb:dd.f", lower-case hex */
	uint16_t vendor_id, device_id, class_id;
	int n_numa_nodes;        /* nodes closest to the GPU (OS indices) */
	const int *numa_nodes;
	double link_gbps;        /* PCIe link bandwidth in GB/s as hwloc reports it; 0 = unknown */
	int pcie_gen;            /* generation the link implies, 0 = cannot be told */
	int pcie_width;          /* lane count the link implies, 0 = cannot be told */
	const char *pcie_candidates; /* every "genN xW" that matches link_gbps, "" if none */
	int cuda_index;          /* CUDA device index, -1 = unknown */
	const char *name;        /* model name when hwloc knows it, else "" */
};

/* Builds the topology of this machine (xml_path NULL) or of the hwloc XML
 * file xml_path (another machine's, e.g. from `lstopo machine.xml`).
 * On success *out is a new topology the caller frees with
 * hs_topology_free().  Errors: -EIO (missing or malformed file, or one over
 * 16 MiB: real exports are kB to a few MB), -ENOMEM, -EINVAL (a topology
 * with no NUMA node or no PU).  hwloc itself prints a banner on stderr for
 * some malformed XML files unless $HWLOC_HIDE_ERRORS is 2 (`hotset` sets it). */
int hs_topology_open(const char *xml_path, hs_topology **out);
void hs_topology_free(hs_topology *t);

/* Whether the topology describes the machine this process runs on. */
int hs_topology_is_this_system(const hs_topology *t);
/* Where it came from: "this machine" or the XML path.  Owned by t. */
const char *hs_topology_source(const hs_topology *t);

int hs_topology_n_nodes(const hs_topology *t);
/* Node i (0 <= i < n_nodes, ascending os_index); NULL if out of range.  Owned by t. */
const struct hs_numa_node *hs_topology_node(const hs_topology *t, int i);
int hs_topology_n_cores(const hs_topology *t);
int hs_topology_n_cpus(const hs_topology *t);
int hs_topology_n_gpus(const hs_topology *t);
/* GPU i in PCI bus order; NULL if out of range.  Owned by t. */
const struct hs_gpu *hs_topology_gpu(const hs_topology *t, int i);

/* The topology as JSON text (schema in docs/topology-json.md):
 * {"source", "this_system", "cores", "cpus",
 *  "nodes": [{"os_index", "memory_bytes", "cores", "cpus": [...]}],
 *  "gpus":  [{"pci_bus_id", "vendor_id", "device_id", "class_id", "name",
 *             "numa_nodes": [...], "link_gbps", "pcie_gen", "pcie_width",
 *             "pcie_candidates": [...], "cuda_index"}]}
 * Unknown values are null.  Returns a malloc'd string the caller frees, or
 * NULL on -ENOMEM. */
char *hs_topology_to_json(const hs_topology *t);

#endif /* HOTSET_TOPOLOGY_H */
