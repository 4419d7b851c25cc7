/* Host experts placed on a NUMA node: a MoE layer's experts copied from the
 * model file into memory bound to one node (numa-place.c). */
#ifndef HS_NUMA_PLACE_H
#define HS_NUMA_PLACE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels/moe.h"
#include "hotset.h"

/* A layer's experts (weights and biases) copied from the model file into
 * memory bound to one node, each packed like a device slot
 * (hs__expert_pack_layout), and the kernel view of that copy (router and
 * the rest still point into the model's mapping). */
struct hs_host_layer {
	struct hs_moe_layer l;
	uint8_t *mem;                 /* the experts, packed like device slots */
	size_t bytes;
	int32_t *identity;            /* slot_of of the view: expert e is block e */
	int os_node;
	uint64_t node_bytes[HS_MAX_NODES]; /* where the pages are, measured (sampled) */
};
int hs__host_layer_load(const hs_model *m, int layer, int os_node, struct hs_host_layer *out);
void hs__host_layer_free(struct hs_host_layer *h);

#endif
