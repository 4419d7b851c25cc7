/* Placing memory and threads on NUMA nodes (libnuma; the only file that
 * includes numa.h is numa.c). */
#ifndef HS_NUMA_H
#define HS_NUMA_H

#include <stddef.h>
#include <stdint.h>

#include "hotset.h"

/* bytes of memory bound to node os_node (pages are placed on first touch;
 * the caller touches them from any thread).  NULL with a message. */
void *hs__numa_alloc_on(int os_node, size_t bytes);
void hs__numa_free(void *p, size_t bytes);
/* bytes on 2 MiB pages where the kernel gives them (as hs__numa_alloc_on's),
 * on no particular node (placed on first touch); free() them.  For the read
 * buffers whose bandwidth is set beside weights on such pages: 4 KiB pages
 * read a fifth slower on a Xeon VM.  NULL when out of memory. */
void *hs__huge_alloc(size_t bytes);
/* Bytes a buffer must span so that streaming through it again and again
 * reads DRAM rather than the last-level cache: 4x the largest CPU cache
 * (a Xeon VM reports a 480 MiB L3, and a matrix product cycling through
 * 512 MiB of weights ran 8% faster there than through 2 GiB), at least
 * `floor`, at most an eighth of the machine's memory. */
size_t hs__past_cache_bytes(size_t floor);

/* Memory of node os_node free for new data now: MemAvailable on a
 * one-node machine, else the node's free memory. */
int hs__numa_available(int os_node, uint64_t *bytes);

/* Binds the calling thread to the given CPUs (OS indices). */
int hs__bind_thread(const int *cpus, int n);
/* Binds it to every CPU again. */
int hs__unbind_thread(void);

/* Where the pages of [p, p + bytes) live: bytes per node (sampled), by
 * node number. */
int hs__numa_where(const void *p, size_t bytes, uint64_t *node_bytes, int max_nodes);

#endif
