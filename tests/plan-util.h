/* The machine profile the tests plan for: one node of 2 cores and 16 GiB,
 * one GPU of vram bytes next to it (published figures, nothing measured). */
#ifndef HS_PLAN_UTIL_H
#define HS_PLAN_UTIL_H

#include <stdio.h>
#include <string.h>

#include "hotset.h"

static inline void hs_test_profile(struct hs_profile *pf, uint64_t vram)
{
	memset(pf, 0, sizeof *pf);
	snprintf(pf->machine, sizeof pf->machine, "test box");
	snprintf(pf->source, sizeof pf->source, "published");
	pf->n_nodes = 1;
	pf->nodes[0] = (struct hs_profile_node){ .os_index = 0, .n_cores = 2, .memory_bytes = 1ull << 34 };
	pf->n_gpus = 1;
	pf->gpus[0].memory_total_bytes = pf->gpus[0].memory_free_bytes = vram;
	pf->gpus[0].n_numa_nodes = 1;
}

#endif
