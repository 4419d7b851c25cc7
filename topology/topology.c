/* The machine as hotset needs it: NUMA nodes with their memory and cores, and
 * the NVIDIA GPUs on the PCI bus with the nodes next to them and their link
 * speed.  Built with hwloc from this machine or from an hwloc XML export; the
 * only file of the project that includes hwloc. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <hwloc.h>

#include "hotset.h"
#include "topology/cuda-probe.h"
#include "topology/topology.h"
#include "base/error.h"
#include "base/log.h"

/* An hwloc export of a real machine is tens of kB (a DGX-2 with every PCI
 * device: 41 kB) and a few MB with every virtual function of a large box;
 * hwloc's parser takes minutes and gigabytes on a file of 100+ MB that
 * claims a million NUMA nodes, so larger files are refused before it runs. */
#define MAX_XML_BYTES (16 << 20)

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_CLASS_VGA 0x0300
#define PCI_CLASS_3D 0x0302

struct hs_topology {
	char *source;
	int this_system;
	int n_cores, n_cpus;
	int n_nodes;
	struct hs_numa_node *nodes;
	int n_gpus;
	struct hs_gpu *gpus;
};

void hs_topology_free(hs_topology *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_nodes; i++)
		free((void *)t->nodes[i].cpus);
	for (int i = 0; i < t->n_gpus; i++) {
		free((void *)t->gpus[i].numa_nodes);
		free((void *)t->gpus[i].pcie_candidates);
		free((void *)t->gpus[i].name);
	}
	free(t->nodes);
	free(t->gpus);
	free(t->source);
	free(t);
}

/* PCIe bandwidth per lane in GB/s as hwloc computes it (transfer rate times
 * line-code efficiency / 8): 8b/10b up to gen2, 128b/130b from gen3 on. */
static const double lane_gbps[] = { 0, 0.25, 0.5, 8.0 * 128 / 130 / 8, 16.0 * 128 / 130 / 8,
				    32.0 * 128 / 130 / 8, 64.0 * 128 / 130 / 8 };
static const int widths[] = { 1, 2, 4, 8, 16, 32 };

/* Every (generation, width) whose bandwidth matches `gbps` within 1%; a
 * single match sets *gen and *width, several leave them 0 (a 4 GB/s link is
 * gen1 x16 or gen2 x8: hwloc's number alone cannot tell). */
static char *pcie_candidates(double gbps, int *gen, int *width)
{
	char buf[160] = "";
	size_t len = 0;
	int n = 0;

	*gen = *width = 0;
	for (int g = 1; g < (int)(sizeof lane_gbps / sizeof lane_gbps[0]) && gbps > 0; g++)
		for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
			double v = lane_gbps[g] * widths[w];
			if (fabs(v - gbps) <= 0.01 * v) {
				len += snprintf(buf + len, sizeof buf - len, "%sgen%d x%d", n ? ", " : "", g, widths[w]);
				if (len >= sizeof buf)
					len = sizeof buf - 1;
				*gen = g;
				*width = widths[w];
				n++;
			}
		}
	if (n != 1)
		*gen = *width = 0;
	return strdup(buf);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

static int cmp_node(const void *a, const void *b)
{
	return cmp_int(&((const struct hs_numa_node *)a)->os_index, &((const struct hs_numa_node *)b)->os_index);
}

static int cmp_gpu(const void *a, const void *b)
{
	return strcmp(((const struct hs_gpu *)a)->pci_bus_id, ((const struct hs_gpu *)b)->pci_bus_id);
}

static int fill_nodes(hs_topology *t, hwloc_topology_t h)
{
	int n = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_NUMANODE);
	int n_pu = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PU);
	int n_core = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_CORE);

	if (n <= 0 || n_pu <= 0)
		return hs__error(EINVAL, "%s: topology has %d NUMA nodes and %d PUs (at least 1 of each needed)",
				 t->source, n, n_pu);
	t->nodes = calloc(n, sizeof *t->nodes);
	if (!t->nodes)
		return hs__error(ENOMEM, "topology: out of memory");
	t->n_nodes = n;
	t->n_cpus = n_pu;
	/* A topology without Core objects (some exports) counts each PU as a core. */
	t->n_cores = n_core > 0 ? n_core : n_pu;
	for (int i = 0; i < n; i++) {
		hwloc_obj_t o = hwloc_get_obj_by_type(h, HWLOC_OBJ_NUMANODE, i);
		struct hs_numa_node *nd = &t->nodes[i];
		int *cpus = calloc(n_pu, sizeof *cpus);
		int k = 0, cores = 0;

		if (!cpus)
			return hs__error(ENOMEM, "topology: out of memory");
		nd->os_index = (int)o->os_index;
		nd->memory_bytes = o->attr ? o->attr->numanode.local_memory : 0;
		for (int p = 0; p < n_pu; p++) {
			hwloc_obj_t pu = hwloc_get_obj_by_type(h, HWLOC_OBJ_PU, p);
			if (o->cpuset && hwloc_bitmap_isset(o->cpuset, pu->os_index))
				cpus[k++] = (int)pu->os_index;
		}
		for (int c = 0; c < n_core; c++) {
			hwloc_obj_t core = hwloc_get_obj_by_type(h, HWLOC_OBJ_CORE, c);
			if (o->cpuset && hwloc_bitmap_intersects(o->cpuset, core->cpuset))
				cores++;
		}
		qsort(cpus, k, sizeof *cpus, cmp_int);
		nd->cpus = cpus;
		nd->n_cpus = k;
		nd->n_cores = n_core > 0 ? cores : k;
	}
	qsort(t->nodes, n, sizeof *t->nodes, cmp_node);
	return 0;
}

/* MemTotal of /proc/meminfo in bytes, or 0 ($HOTSET_MEMINFO names
 * another file: the tests' hot-added VM). */
static uint64_t system_memory(void)
{
	const char *path = getenv("HOTSET_MEMINFO");
	FILE *f = fopen(path && *path ? path : "/proc/meminfo", "r");
	char line[256];
	unsigned long long kb = 0;
	int found = 0;

	if (!f)
		return 0;
	while (!found && fgets(line, sizeof line, f))
		found = sscanf(line, "MemTotal: %llu kB", &kb) == 1;
	fclose(f);
	return found ? (uint64_t)kb * 1024 : 0;
}

/* On VMs whose memory is added while they run, the nodes' MemTotal lags
 * the system's (seen: node 0 7.3 GB minutes after boot, /proc/meminfo 24.7
 * GB): a plan on the nodes' figures would call a model that fits
 * thrashing.  When the nodes add up to less than the system has, each
 * node's memory is scaled up to its share of the system's, and -v says so. */
static void fix_node_memory(hs_topology *t)
{
	uint64_t sum = 0, sys = system_memory();

	for (int i = 0; i < t->n_nodes; i++)
		sum += t->nodes[i].memory_bytes;
	if (!sys || !sum || sum >= sys - sys / 50) /* within 2%: the kernel's own reservations */
		return;
	hs__log(HS_LOG_INFO, "NUMA nodes report %.1f GiB of memory, the system %.1f GiB (memory added while running, "
			     "as on VMs): planning with the system's",
		sum / 1073741824.0, sys / 1073741824.0);
	for (int i = 0; i < t->n_nodes; i++)
		t->nodes[i].memory_bytes = (uint64_t)((double)t->nodes[i].memory_bytes * ((double)sys / (double)sum));
}

static int is_nvidia_gpu(hwloc_obj_t o)
{
	return o->attr->pcidev.vendor_id == PCI_VENDOR_NVIDIA &&
	       (o->attr->pcidev.class_id == PCI_CLASS_VGA || o->attr->pcidev.class_id == PCI_CLASS_3D);
}

/* The CUDA index an XML export recorded as an OS device "cudaN" below the
 * PCI device, or -1. */
static int cuda_index_from_osdev(hwloc_obj_t pci)
{
	for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
		int idx;
		char tail;
		if (c->type == HWLOC_OBJ_OS_DEVICE && c->name &&
		    sscanf(c->name, "cuda%d%c", &idx, &tail) == 1 && idx >= 0)
			return idx;
	}
	return -1;
}

static int fill_gpus(hs_topology *t, hwloc_topology_t h)
{
	hwloc_obj_t o = NULL;
	int n = 0;

	while ((o = hwloc_get_next_pcidev(h, o)))
		n += is_nvidia_gpu(o);
	if (n == 0)
		return 0;
	t->gpus = calloc(n, sizeof *t->gpus);
	if (!t->gpus)
		return hs__error(ENOMEM, "topology: out of memory");
	while ((o = hwloc_get_next_pcidev(h, o))) {
		struct hs_gpu *g;
		struct hwloc_pcidev_attr_s *a = &o->attr->pcidev;
		hwloc_obj_t anc;
		const char *name;
		int *nodes, k = 0;

		if (!is_nvidia_gpu(o))
			continue;
		g = &t->gpus[t->n_gpus++];
		snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%04x:%02x:%02x.%x",
			 a->domain & 0xffffu, a->bus, a->dev, a->func);
		g->vendor_id = a->vendor_id;
		g->device_id = a->device_id;
		g->class_id = a->class_id;
		g->link_gbps = a->linkspeed > 0 ? a->linkspeed : 0;
		g->pcie_candidates = pcie_candidates(g->link_gbps, &g->pcie_gen, &g->pcie_width);
		name = hwloc_obj_get_info_by_name(o, "PCIDevice");
		g->name = strdup(name ? name : "");
		g->cuda_index = cuda_index_from_osdev(o);
		nodes = calloc(t->n_nodes, sizeof *nodes);
		if (!nodes || !g->pcie_candidates || !g->name) {
			free(nodes);
			return hs__error(ENOMEM, "topology: out of memory");
		}
		/* The nodes of the first non-I/O ancestor are the GPU's local
		 * ones; with no locality information that is the whole machine. */
		anc = hwloc_get_non_io_ancestor_obj(h, o);
		for (int i = 0; i < t->n_nodes; i++)
			if (!anc || !anc->nodeset || hwloc_bitmap_isset(anc->nodeset, t->nodes[i].os_index))
				nodes[k++] = t->nodes[i].os_index;
		g->numa_nodes = nodes;
		g->n_numa_nodes = k;
	}
	/* hwloc walks the tree by host bridge; users think in bus order. */
	qsort(t->gpus, t->n_gpus, sizeof *t->gpus, cmp_gpu);
	return 0;
}

/* On this machine, a CUDA device's index is the one whose PCI bus id
 * matches; the runtime knows better than an exported file. */
static void match_cuda(hs_topology *t)
{
	int n = hs__cuda_probe();

	for (int d = 0; d < n; d++) {
		char id[16];
		if (hs__cuda_pci_bus_id(d, id, sizeof id) != 0)
			continue;
		for (int i = 0; i < t->n_gpus; i++)
			if (strcmp(t->gpus[i].pci_bus_id, id) == 0)
				t->gpus[i].cuda_index = d;
	}
}

/* hwloc 2.9 dereferences a missing complete_cpuset or complete_nodeset of
 * an object that has the plain set (a null pointer when it inserts the
 * object), where it refuses a missing cpuset cleanly.  Its own exports always
 * write both, so an object with one and not the other is refused here. */
static int has_attr(const char *tag, const char *name)
{
	char pat[40];
	snprintf(pat, sizeof pat, " %s=\"", name);
	return strstr(tag, pat) != NULL;
}

static int xml_objects_complete(const char *xml, size_t n, const char *path)
{
	static const char *const pairs[][2] = { { "cpuset", "complete_cpuset" }, { "nodeset", "complete_nodeset" } };
	char tag[4096];

	for (const char *p = xml; (p = strstr(p, "<object")) && (size_t)(p - xml) < n; p++) {
		const char *end = strchr(p, '>');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		if (len >= sizeof tag) /* no object tag of an export is that long: only look at the start */
			len = sizeof tag - 1;
		memcpy(tag, p, len);
		tag[len] = 0;
		for (int k = 0; k < 2; k++)
			if (has_attr(tag, pairs[k][0]) && !has_attr(tag, pairs[k][1]))
				return hs__error(EIO, "topology file %s: the object at byte %zu has a %s but no %s", path,
						 (size_t)(p - xml), pairs[k][0], pairs[k][1]);
	}
	return 0;
}

/* The whole file, read here so that its size is checked on the bytes hwloc
 * will parse (not on a stat that a growing file could outrun). */
static int read_xml(const char *path, char **buf, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	size_t n;

	*buf = NULL;
	if (!f)
		return hs__error(EIO, "topology file %s: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return hs__error(EIO, "topology file %s: not a regular file", path);
	}
	if (st.st_size > MAX_XML_BYTES) {
		fclose(f);
		return hs__error(EIO, "topology file %s: %lld bytes, more than the %d MiB limit for an hwloc export", path,
				 (long long)st.st_size, MAX_XML_BYTES >> 20);
	}
	*buf = malloc(MAX_XML_BYTES + 1);
	if (!*buf) {
		fclose(f);
		return hs__error(ENOMEM, "topology file %s: out of memory", path);
	}
	n = fread(*buf, 1, MAX_XML_BYTES + 1, f);
	int bad = ferror(f);
	fclose(f);
	if (bad || n > MAX_XML_BYTES) {
		free(*buf);
		*buf = NULL;
		return hs__error(EIO, "topology file %s: %s", path,
				 bad ? "read error" : "grew past the limit for an hwloc export while being read");
	}
	(*buf)[n] = '\0'; /* hwloc reads it as its own exports come: a string and its NUL */
	*len = n + 1;
	int rc = xml_objects_complete(*buf, n, path);
	if (rc) {
		free(*buf);
		*buf = NULL;
	}
	return rc;
}

int hs_topology_open(const char *xml_path, hs_topology **out)
{
	hwloc_topology_t h;
	hs_topology *t;
	char *xml = NULL;
	size_t xml_len = 0;
	int rc;

	HS_NEED(out, -EINVAL);
	*out = NULL;
	if (xml_path && (rc = read_xml(xml_path, &xml, &xml_len)))
		return rc;
	t = calloc(1, sizeof *t);
	if (!t) {
		free(xml);
		return hs__error(ENOMEM, "topology: out of memory");
	}
	t->source = strdup(xml_path ? xml_path : "this machine");
	if (!t->source) {
		free(t);
		free(xml);
		return hs__error(ENOMEM, "topology: out of memory");
	}
	if (hwloc_topology_init(&h) != 0) {
		rc = hs__error(ENOMEM, "topology: hwloc_topology_init failed");
		goto out_free;
	}
	/* Without this filter hwloc drops the PCI devices, from XML files too. */
	hwloc_topology_set_io_types_filter(h, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
	if (xml && hwloc_topology_set_xmlbuffer(h, xml, (int)xml_len) != 0) {
		rc = hs__error(EIO, "topology file %s: hwloc cannot use it as XML (%s)", xml_path, strerror(errno));
		goto out_destroy;
	}
	if (hwloc_topology_load(h) != 0) {
		rc = hs__error(EIO, "topology %s: not a valid hwloc XML topology (%s)", t->source, strerror(errno));
		goto out_destroy;
	}
	free(xml); /* hwloc has its own copy of what it needs */
	xml = NULL;
	t->this_system = hwloc_topology_is_thissystem(h);
	if ((rc = fill_nodes(t, h)) != 0 || (rc = fill_gpus(t, h)) != 0)
		goto out_destroy;
	if (!xml_path) {
		match_cuda(t);
		fix_node_memory(t);
	}
	hwloc_topology_destroy(h);
	hs__log(HS_LOG_DEBUG, "topology: %s%s: %d NUMA node%s, %d cores, %d NVIDIA GPU%s", t->source,
		t->this_system ? "" : " (another machine's export)", t->n_nodes, t->n_nodes == 1 ? "" : "s", t->n_cores,
		t->n_gpus, t->n_gpus == 1 ? "" : "s");
	*out = t;
	return 0;

out_destroy:
	hwloc_topology_destroy(h);
out_free:
	hs_topology_free(t);
	free(xml);
	return rc;
}

int hs_topology_is_this_system(const hs_topology *t)
{
	HS_NEED(t, -EINVAL);
	return t->this_system;
}

const char *hs_topology_source(const hs_topology *t)
{
	HS_NEED(t, NULL);
	return t->source;
}

int hs_topology_n_nodes(const hs_topology *t)
{
	HS_NEED(t, -EINVAL);
	return t->n_nodes;
}

int hs_topology_n_cores(const hs_topology *t)
{
	HS_NEED(t, -EINVAL);
	return t->n_cores;
}

int hs_topology_n_cpus(const hs_topology *t)
{
	HS_NEED(t, -EINVAL);
	return t->n_cpus;
}

int hs_topology_n_gpus(const hs_topology *t)
{
	HS_NEED(t, -EINVAL);
	return t->n_gpus;
}

const struct hs_numa_node *hs_topology_node(const hs_topology *t, int i)
{
	HS_NEED(t, NULL);
	if (i < 0 || i >= t->n_nodes) {
		hs__error(EINVAL, "topology: node %d out of range (%d nodes)", i, t->n_nodes);
		return NULL;
	}
	return &t->nodes[i];
}

const struct hs_gpu *hs_topology_gpu(const hs_topology *t, int i)
{
	HS_NEED(t, NULL);
	if (i < 0 || i >= t->n_gpus) {
		hs__error(EINVAL, "topology: GPU %d out of range (%d GPUs)", i, t->n_gpus);
		return NULL;
	}
	return &t->gpus[i];
}

const char *hs__hwloc_version(void)
{
	return HWLOC_VERSION;
}
