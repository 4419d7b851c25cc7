/* Machine profiles: built from a topology, read from and written to JSON
 * (schema in docs/profile-json.md).  Measuring is in tune.c. */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "base/error.h"
#include "base/jsonio.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/kernels.h"
#include "planner/planner.h"

int hs__profile_check(const struct hs_profile *p)
{
	HS_NEED(p, -EINVAL);
	if (p->n_nodes < 0 || p->n_nodes > HS_MAX_NODES || p->n_gpus < 0 || p->n_gpus > HS_MAX_GPUS)
		return hs__error(EINVAL, "profile: %d nodes (0..%d), %d GPUs (0..%d)", p->n_nodes, HS_MAX_NODES, p->n_gpus,
				 HS_MAX_GPUS);
	if (!HS_STR_ENDED(p->machine) || !HS_STR_ENDED(p->source) || !HS_STR_ENDED(p->note) ||
	    !HS_STR_ENDED(p->created) || !HS_STR_ENDED(p->cpu_kernels))
		return hs__error(EINVAL, "profile: a text field is not NUL-terminated within its array");
	for (int i = 0; i < p->n_nodes; i++) {
		if (p->nodes[i].n_kernel < 0 || p->nodes[i].n_kernel > HS_MAX_KSPEED)
			return hs__error(EINVAL, "profile: node %d has %d kernel speeds (0..%d)", i, p->nodes[i].n_kernel,
					 HS_MAX_KSPEED);
		for (int j = 0; j < p->nodes[i].n_kernel; j++)
			if (!hs__kernel_type_quantized(hs__kspeed_type(&p->nodes[i].kernel[j])))
				return hs__error(EINVAL, "profile: node %d kernel speed %d: type %d is not a quantized type hotset computes",
						 i, j, p->nodes[i].kernel[j].type);
	}
	for (int i = 0; i < p->n_gpus; i++) {
		const struct hs_profile_gpu *g = &p->gpus[i];
		if (g->n_numa_nodes < 0 || g->n_numa_nodes > HS_MAX_NODES || !HS_STR_ENDED(g->name) ||
		    !HS_STR_ENDED(g->pci_bus_id))
			return hs__error(EINVAL, "profile: GPU %d: %d nodes (0..%d), or a name not NUL-terminated", i,
					 g->n_numa_nodes, HS_MAX_NODES);
	}
	return 0;
}

int hs__kspeed_type(const struct hs_kernel_speed *k)
{
	return k->type ? k->type : HS_TYPE_MXFP4;
}

int hs_profile_from_topology(const hs_topology *t, struct hs_profile *out)
{
	HS_NEED(out, -EINVAL);
	memset(out, 0, sizeof *out);
	HS_NEED(t, -EINVAL);
	snprintf(out->machine, sizeof out->machine, "%s", hs_topology_source(t));
	snprintf(out->source, sizeof out->source, "topology");
	snprintf(out->cpu_kernels, sizeof out->cpu_kernels, "%s", hs_cpu_kernels_name());
	int nn = hs_topology_n_nodes(t), ng = hs_topology_n_gpus(t);
	if (nn > HS_MAX_NODES)
		return hs__error(EINVAL, "topology %s has %d NUMA nodes, profiles hold at most %d",
				 hs_topology_source(t), nn, HS_MAX_NODES);
	out->n_nodes = nn;
	for (int i = 0; i < nn; i++) {
		const struct hs_numa_node *n = hs_topology_node(t, i);
		out->nodes[i].os_index = n->os_index;
		out->nodes[i].n_cores = n->n_cores;
		out->nodes[i].n_cpus = n->n_cpus;
		out->nodes[i].memory_bytes = n->memory_bytes;
	}
	out->n_gpus = ng < HS_MAX_GPUS ? ng : HS_MAX_GPUS;
	for (int i = 0; i < out->n_gpus; i++) {
		const struct hs_gpu *g = hs_topology_gpu(t, i);
		struct hs_profile_gpu *p = &out->gpus[i];
		snprintf(p->name, sizeof p->name, "%s", g->name);
		snprintf(p->pci_bus_id, sizeof p->pci_bus_id, "%s", g->pci_bus_id);
		p->cuda_index = g->cuda_index;
		p->n_numa_nodes = g->n_numa_nodes < HS_MAX_NODES ? g->n_numa_nodes : HS_MAX_NODES;
		for (int j = 0; j < p->n_numa_nodes; j++)
			p->numa_nodes[j] = g->numa_nodes[j];
		p->link_gbps = g->link_gbps;
		p->pcie_gen = g->pcie_gen;
		p->pcie_width = g->pcie_width;
	}
	return 0;
}

/* ---- a profile's rates on another machine's topology ----------------------- */

static int same_machine(const struct hs_profile *a, const struct hs_profile *t)
{
	if (a->n_nodes != t->n_nodes || a->n_gpus != t->n_gpus)
		return 0;
	for (int i = 0; i < t->n_nodes; i++)
		if (a->nodes[i].os_index != t->nodes[i].os_index || a->nodes[i].n_cores != t->nodes[i].n_cores)
			return 0;
	for (int i = 0; i < t->n_gpus; i++)
		if (a->gpus[i].pci_bus_id[0] && strcmp(a->gpus[i].pci_bus_id, t->gpus[i].pci_bus_id))
			return 0;
	return 1;
}

/* The profile node that stands for topology node i: the same OS index, else
 * the same position, else the first. */
static int rate_node(const struct hs_profile *r, const struct hs_profile *t, int i)
{
	for (int j = 0; j < r->n_nodes; j++)
		if (r->nodes[j].os_index == t->nodes[i].os_index)
			return j;
	return i < r->n_nodes ? i : 0;
}

static int gpu_is_local(const struct hs_profile_gpu *g, int os_index)
{
	for (int i = 0; i < g->n_numa_nodes; i++)
		if (g->numa_nodes[i] == os_index)
			return 1;
	return 0;
}

/* A rate the profile measured between node pairs of one kind: reading or
 * copying from a node near the reader (local) or from a far one. */
static double pair_rate(const struct hs_profile *r, const double *v, int near_node, int local,
			const struct hs_profile_gpu *g)
{
	for (int j = 0; j < r->n_nodes; j++) {
		int is_local = g ? gpu_is_local(g, r->nodes[j].os_index) || g->n_numa_nodes == 0 : j == near_node;
		if (is_local == local && v[j] > 0)
			return v[j];
	}
	return 0;
}

int hs_profile_on_topology(const struct hs_profile *rates, const hs_topology *t, struct hs_profile *out)
{
	int rc;

	HS_NEED(out, -EINVAL);
	HS_NEED(t, -EINVAL);
	if ((rc = hs__profile_check(rates)))
		return rc;
	struct hs_profile *tp = malloc(sizeof *tp);
	if (!tp)
		return hs__error(ENOMEM, "profile: out of memory");
	if ((rc = hs_profile_from_topology(t, tp))) {
		free(tp);
		return rc;
	}
	if (same_machine(rates, tp)) {
		*out = *rates;
		free(tp);
		return 0;
	}
	/* Nodes and GPUs as the topology has them (memory too: what was free on
	 * the profile's machine says nothing about this one), each with the
	 * figures of the profile's node or GPU that stands for it.  A read or
	 * copy between nodes keeps its kind: local figures for local pairs,
	 * remote ones (when the profile has any) for remote pairs. */
	for (int i = 0; i < tp->n_nodes; i++) {
		const struct hs_profile_node *rn = &rates->nodes[rate_node(rates, tp, i)];
		struct hs_profile_node *n = &tp->nodes[i];
		int ri = (int)(rn - rates->nodes);
		for (int j = 0; j < tp->n_nodes; j++)
			n->read_gbps[j] = j == i ? rn->read_gbps[ri] : pair_rate(rates, rn->read_gbps, ri, 0, NULL);
		n->n_kernel = rn->n_kernel;
		memcpy(n->kernel, rn->kernel, sizeof n->kernel);
	}
	for (int i = 0; i < tp->n_gpus && rates->n_gpus > 0; i++) {
		const struct hs_profile_gpu *rg = &rates->gpus[i < rates->n_gpus ? i : 0];
		for (int k = 0; k < rates->n_gpus; k++)
			if (rates->gpus[k].pci_bus_id[0] && !strcmp(rates->gpus[k].pci_bus_id, tp->gpus[i].pci_bus_id))
				rg = &rates->gpus[k];
		struct hs_profile_gpu *g = &tp->gpus[i];
		if (!g->name[0])
			snprintf(g->name, sizeof g->name, "%s", rg->name);
		g->memory_total_bytes = rg->memory_total_bytes;
		g->memory_free_bytes = rg->memory_free_bytes;
		g->h2d_pageable_gbps = rg->h2d_pageable_gbps;
		g->device_memory_gbps = rg->device_memory_gbps;
		g->prefill_tflops = rg->prefill_tflops;
		if (g->link_gbps <= 0) {
			g->link_gbps = rg->link_gbps;
			g->pcie_gen = rg->pcie_gen;
			g->pcie_width = rg->pcie_width;
		}
		for (int j = 0; j < tp->n_nodes; j++)
			g->h2d_pinned_gbps[j] =
				pair_rate(rates, rg->h2d_pinned_gbps, -1,
					  gpu_is_local(g, tp->nodes[j].os_index) || !g->n_numa_nodes, rg);
	}
	snprintf(tp->source, sizeof tp->source, "%s", rates->source);
	snprintf(tp->cpu_kernels, sizeof tp->cpu_kernels, "%s", rates->cpu_kernels);
	snprintf(tp->created, sizeof tp->created, "%s", rates->created);
	snprintf(tp->note, sizeof tp->note,
		 "NUMA nodes, cores, memory and GPUs from the topology %s; rates from the %s profile '%.600s'",
		 hs_topology_source(t), rates->source, rates->machine);
	*out = *tp;
	free(tp);
	return 1;
}

/* ---- JSON ---------------------------------------------------------------- */

static json_t *node_gbps(const double *v, const struct hs_profile *p)
{
	json_t *a = json_array();
	for (int j = 0; j < p->n_nodes; j++)
		if (v[j] > 0)
			json_array_append_new(a, json_pack("{s:i, s:f}", "node", p->nodes[j].os_index, "gbps", v[j]));
	return a;
}

char *hs_profile_to_json(const struct hs_profile *p)
{
	if (hs__profile_check(p))
		return NULL;
	json_t *root = json_object(), *nodes = json_array(), *gpus = json_array();

	json_object_set_new(root, "hotset_profile", json_integer(1));
	json_object_set_new(root, "machine", json_string(p->machine));
	json_object_set_new(root, "source", json_string(p->source));
	json_object_set_new(root, "note", json_string(p->note));
	json_object_set_new(root, "created", json_string(p->created));
	json_object_set_new(root, "cpu_kernels", json_string(p->cpu_kernels));
	for (int i = 0; i < p->n_nodes; i++) {
		const struct hs_profile_node *n = &p->nodes[i];
		json_t *k = json_array();
		for (int j = 0; j < n->n_kernel; j++)
			json_array_append_new(k, json_pack("{s:i, s:s, s:f, s:f, s:f}", "threads", n->kernel[j].threads,
							   "type", hs__type_name(hs__kspeed_type(&n->kernel[j])),
							   "decode_gbps", n->kernel[j].decode_gbps, "prefill_gflops",
							   n->kernel[j].prefill_gflops, "dense_gbps", n->kernel[j].dense_gbps));
		json_array_append_new(nodes, json_pack("{s:i, s:i, s:i, s:I, s:I, s:o, s:o}", "os_index", n->os_index,
						       "cores", n->n_cores, "cpus", n->n_cpus, "memory_bytes",
						       (json_int_t)n->memory_bytes, "available_bytes",
						       (json_int_t)n->available_bytes, "read_gbps",
						       node_gbps(n->read_gbps, p), "kernel", k));
	}
	for (int i = 0; i < p->n_gpus; i++) {
		const struct hs_profile_gpu *g = &p->gpus[i];
		json_t *nn = json_array();
		for (int j = 0; j < g->n_numa_nodes; j++)
			json_array_append_new(nn, json_integer(g->numa_nodes[j]));
		json_array_append_new(
			gpus, json_pack("{s:s, s:s, s:i, s:o, s:I, s:I, s:o, s:f, s:f, s:f, s:f, s:i, s:i}", "name",
					g->name, "pci_bus_id", g->pci_bus_id, "cuda_index", g->cuda_index, "numa_nodes",
					nn, "memory_total_bytes", (json_int_t)g->memory_total_bytes,
					"memory_free_bytes", (json_int_t)g->memory_free_bytes, "h2d_pinned_gbps",
					node_gbps(g->h2d_pinned_gbps, p), "h2d_pageable_gbps", g->h2d_pageable_gbps,
					"device_memory_gbps", g->device_memory_gbps, "prefill_tflops",
					g->prefill_tflops, "link_gbps", g->link_gbps, "pcie_gen", g->pcie_gen,
					"pcie_width", g->pcie_width));
	}
	json_object_set_new(root, "nodes", nodes);
	json_object_set_new(root, "gpus", gpus);
	char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
	json_decref(root);
	return s;
}

int hs_profile_save(const struct hs_profile *p, const char *path)
{
	int rc;

	HS_NEED(path, -EINVAL);
	if ((rc = hs__profile_check(p)))
		return rc;
	char *s = hs_profile_to_json(p);
	if (!s)
		return hs__error(ENOMEM, "profile: no memory for the JSON text");
	struct hs_piece piece = { s, strlen(s) };
	rc = hs__write_file_atomic(path, &piece, 1, 0);
	free(s);
	return rc;
}

/* {"node": os_index, "gbps": x} list -> v[profile node index] */
static int read_node_gbps(struct hs_json_in *in, json_t *a, const char *field, const struct hs_profile *p,
			  double *v)
{
	if (!a)
		return 0;
	if (!json_is_array(a))
		return hs__json_bad(in, field, "is not an array");
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *e = json_array_get(a, i);
		int node;
		double g;
		int rc = hs__json_int(in, e, "node", field, 0, INT_MAX, 1, &node);
		if (!rc)
			rc = hs__json_num(in, e, "gbps", field, 0, 1e5, 1, &g);
		if (rc)
			return rc;
		int j = 0;
		while (j < p->n_nodes && p->nodes[j].os_index != node)
			j++;
		if (j == p->n_nodes)
			return hs__json_bad(in, field, "names node %d, which is not in \"nodes\"", node);
		v[j] = g;
	}
	return 0;
}

static int parse_profile(struct hs_json_in *in, json_t *root, struct hs_profile *p)
{
	json_t *nodes, *gpus;
	int rc, ver;

	memset(p, 0, sizeof *p);
	if (!json_is_object(root))
		return hs__json_bad(in, "(top)", "is not a JSON object");
	if ((rc = hs__json_int(in, root, "hotset_profile", "", 1, 1, 1, &ver)) ||
	    (rc = hs__json_str(in, root, "machine", "", p->machine, sizeof p->machine, 1)) ||
	    (rc = hs__json_str(in, root, "source", "", p->source, sizeof p->source, 1)) ||
	    (rc = hs__json_str(in, root, "note", "", p->note, sizeof p->note, 0)) ||
	    (rc = hs__json_str(in, root, "created", "", p->created, sizeof p->created, 0)) ||
	    (rc = hs__json_str(in, root, "cpu_kernels", "", p->cpu_kernels, sizeof p->cpu_kernels, 0)))
		return rc;
	if (strcmp(p->source, "measured") && strcmp(p->source, "published") && strcmp(p->source, "topology"))
		return hs__json_bad(in, "source", "is '%s' (measured, published or topology)", p->source);
	nodes = json_object_get(root, "nodes");
	if (!json_is_array(nodes) || json_array_size(nodes) < 1 || json_array_size(nodes) > HS_MAX_NODES)
		return hs__json_bad(in, "nodes", "must be an array of 1..%d nodes", HS_MAX_NODES);
	p->n_nodes = (int)json_array_size(nodes);
	for (int i = 0; i < p->n_nodes; i++) {
		json_t *n = json_array_get(nodes, i);
		struct hs_profile_node *pn = &p->nodes[i];
		if ((rc = hs__json_int(in, n, "os_index", "nodes[]", 0, 4095, 1, &pn->os_index)) ||
		    (rc = hs__json_int(in, n, "cores", "nodes[]", 1, 1 << 16, 1, &pn->n_cores)) ||
		    (rc = hs__json_int(in, n, "cpus", "nodes[]", 0, 1 << 16, 0, &pn->n_cpus)) ||
		    (rc = hs__json_u64(in, n, "memory_bytes", "nodes[]", 1, &pn->memory_bytes)) ||
		    (rc = hs__json_u64(in, n, "available_bytes", "nodes[]", 0, &pn->available_bytes)))
			return rc;
		if (pn->available_bytes > pn->memory_bytes)
			return hs__json_bad(in, "nodes[].available_bytes", "of node %d exceeds its memory_bytes",
					    pn->os_index);
		for (int j = 0; j < i; j++)
			if (p->nodes[j].os_index == pn->os_index)
				return hs__json_bad(in, "nodes[].os_index", "%d appears twice", pn->os_index);
	}
	for (int i = 0; i < p->n_nodes; i++) {
		json_t *n = json_array_get(nodes, i), *k = json_object_get(n, "kernel");
		struct hs_profile_node *pn = &p->nodes[i];
		if ((rc = read_node_gbps(in, json_object_get(n, "read_gbps"), "nodes[].read_gbps", p, pn->read_gbps)))
			return rc;
		if (k && (!json_is_array(k) || json_array_size(k) > HS_MAX_KSPEED))
			return hs__json_bad(in, "nodes[].kernel", "must be an array of at most %d points", HS_MAX_KSPEED);
		pn->n_kernel = k ? (int)json_array_size(k) : 0;
		for (int j = 0; j < pn->n_kernel; j++) {
			json_t *e = json_array_get(k, j);
			struct hs_kernel_speed *ks = &pn->kernel[j];
			char type[16] = "mxfp4";
			if ((rc = hs__json_int(in, e, "threads", "nodes[].kernel[]", 1, 1 << 16, 1, &ks->threads)) ||
			    (rc = hs__json_str(in, e, "type", "nodes[].kernel[]", type, sizeof type, 0)) ||
			    (rc = hs__json_num(in, e, "decode_gbps", "nodes[].kernel[]", 0, 1e5, 0, &ks->decode_gbps)) ||
			    (rc = hs__json_num(in, e, "prefill_gflops", "nodes[].kernel[]", 0, 1e7, 0,
					       &ks->prefill_gflops)) ||
			    (rc = hs__json_num(in, e, "dense_gbps", "nodes[].kernel[]", 0, 1e5, 0, &ks->dense_gbps)))
				return rc;
			ks->type = hs__type_from_name(type);
			if (!hs__kernel_type_quantized(ks->type))
				return hs__json_bad(in, "nodes[].kernel[].type", "\"%s\" is not a quantized type hotset computes (%s)",
						    type, "mxfp4, q8_0, q2_K .. q6_K, iq4_xs, iq4_nl, q4_0, q4_1, q5_0, q5_1");
			for (int m = 0; m < j; m++)
				if (pn->kernel[m].threads == ks->threads && pn->kernel[m].type == ks->type)
					return hs__json_bad(in, "nodes[].kernel[]", "%s with %d threads appears twice",
							    hs__type_name(ks->type), ks->threads);
		}
	}
	gpus = json_object_get(root, "gpus");
	if (gpus && (!json_is_array(gpus) || json_array_size(gpus) > HS_MAX_GPUS))
		return hs__json_bad(in, "gpus", "must be an array of at most %d GPUs", HS_MAX_GPUS);
	p->n_gpus = gpus ? (int)json_array_size(gpus) : 0;
	for (int i = 0; i < p->n_gpus; i++) {
		json_t *g = json_array_get(gpus, i), *nn;
		struct hs_profile_gpu *pg = &p->gpus[i];
		pg->cuda_index = -1;
		if ((rc = hs__json_str(in, g, "name", "gpus[]", pg->name, sizeof pg->name, 0)) ||
		    (rc = hs__json_str(in, g, "pci_bus_id", "gpus[]", pg->pci_bus_id, sizeof pg->pci_bus_id, 0)) ||
		    (rc = hs__json_int(in, g, "cuda_index", "gpus[]", -1, 1024, 0, &pg->cuda_index)) ||
		    (rc = hs__json_u64(in, g, "memory_total_bytes", "gpus[]", 1, &pg->memory_total_bytes)) ||
		    (rc = hs__json_u64(in, g, "memory_free_bytes", "gpus[]", 0, &pg->memory_free_bytes)) ||
		    (rc = hs__json_num(in, g, "h2d_pageable_gbps", "gpus[]", 0, 1e4, 0, &pg->h2d_pageable_gbps)) ||
		    (rc = hs__json_num(in, g, "device_memory_gbps", "gpus[]", 0, 1e5, 0, &pg->device_memory_gbps)) ||
		    (rc = hs__json_num(in, g, "prefill_tflops", "gpus[]", 0, 1e5, 0, &pg->prefill_tflops)) ||
		    (rc = hs__json_num(in, g, "link_gbps", "gpus[]", 0, 1e4, 0, &pg->link_gbps)) ||
		    (rc = hs__json_int(in, g, "pcie_gen", "gpus[]", 0, 16, 0, &pg->pcie_gen)) ||
		    (rc = hs__json_int(in, g, "pcie_width", "gpus[]", 0, 32, 0, &pg->pcie_width)) ||
		    (rc = read_node_gbps(in, json_object_get(g, "h2d_pinned_gbps"), "gpus[].h2d_pinned_gbps", p,
					 pg->h2d_pinned_gbps)))
			return rc;
		if (pg->memory_free_bytes > pg->memory_total_bytes)
			return hs__json_bad(in, "gpus[].memory_free_bytes", "exceeds memory_total_bytes");
		nn = json_object_get(g, "numa_nodes");
		if (nn && (!json_is_array(nn) || json_array_size(nn) > HS_MAX_NODES))
			return hs__json_bad(in, "gpus[].numa_nodes", "must be an array of node numbers");
		pg->n_numa_nodes = nn ? (int)json_array_size(nn) : 0;
		for (int j = 0; j < pg->n_numa_nodes; j++) {
			json_t *v = json_array_get(nn, j);
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4095)
				return hs__json_bad(in, "gpus[].numa_nodes", "holds something that is not a node number");
			pg->numa_nodes[j] = (int)json_integer_value(v);
		}
	}
	return 0;
}

int hs_profile_load(const char *path, struct hs_profile *out)
{
	struct hs_json_in in;
	json_t *root;

	HS_NEED(path, -EINVAL);
	HS_NEED(out, -EINVAL);
	int rc = hs__json_load(path, "profile", &in, &root);

	if (rc)
		return rc;
	rc = parse_profile(&in, root, out);
	json_decref(root);
	return rc;
}

int hs_profile_default_path(char *buf, size_t n)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int len;

	HS_NEED(buf, -EINVAL);
	if (n == 0)
		return hs__error(ENAMETOOLONG, "profile path: a buffer of 0 bytes");
	if (xdg && *xdg)
		len = snprintf(buf, n, "%s/hotset/profile.json", xdg);
	else if (home && *home)
		len = snprintf(buf, n, "%s/.cache/hotset/profile.json", home);
	else
		return hs__error(ENOENT, "neither $XDG_CACHE_HOME nor $HOME is set: give a profile path");
	if (len < 0 || (size_t)len >= n)
		return hs__error(ENAMETOOLONG, "profile path is longer than %zu bytes", n - 1);
	return 0;
}
