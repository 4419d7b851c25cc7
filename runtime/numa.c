/* NUMA placement with libnuma; thread binding with the scheduler. */
#include "config.h"

#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"
#include "runtime/numa.h"

void *hs__numa_alloc_on(int os_node, size_t bytes)
{
	void *p;

	if (numa_available() < 0) { /* no NUMA support in the kernel: one node */
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			p = NULL;
	} else {
		p = numa_alloc_onnode(bytes, os_node);
	}
	if (!p)
		hs__error(ENOMEM, "cannot allocate %zu bytes on NUMA node %d", bytes, os_node);
	else /* expert weights are streamed: 2 MiB pages spare the TLB and let the
		prefetchers run past 4 KiB boundaries (a hint; ignored without THP) */
		madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

void *hs__huge_alloc(size_t bytes)
{
	const size_t huge = (size_t)2 << 20, n = bytes ? (bytes + huge - 1) & ~(huge - 1) : huge;
	void *p = aligned_alloc(huge, n);
	if (p)
		madvise(p, n, MADV_HUGEPAGE);
	return p;
}

size_t hs__past_cache_bytes(size_t floor)
{
	long llc = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	size_t want = 4 * (size_t)(llc > l2 ? (llc > 0 ? llc : 0) : (l2 > 0 ? l2 : 0));
	size_t cap = pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 8 : want;
	if (want > cap)
		want = cap;
	return want > floor ? want : floor;
}

void hs__numa_free(void *p, size_t bytes)
{
	if (!p)
		return;
	if (numa_available() < 0)
		munmap(p, bytes);
	else
		numa_free(p, bytes);
}

static int meminfo_available(uint64_t *bytes)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb;
	int found = 0;

	if (!f)
		return hs__error(EIO, "/proc/meminfo: %s", strerror(errno));
	while (!found && fgets(line, sizeof line, f))
		found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
	fclose(f);
	if (!found)
		return hs__error(EIO, "/proc/meminfo has no MemAvailable line");
	*bytes = (uint64_t)kb * 1024;
	return 0;
}

int hs__numa_available(int os_node, uint64_t *bytes)
{
	long long free_b = 0;

	if (numa_available() < 0 || numa_num_configured_nodes() <= 1)
		return meminfo_available(bytes);
	if (numa_node_size64(os_node, &free_b) < 0)
		return hs__error(EIO, "NUMA node %d: cannot read its memory size", os_node);
	*bytes = (uint64_t)free_b;
	return 0;
}

int hs__bind_thread(const int *cpus, int n)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	for (int i = 0; i < n; i++)
		if (cpus[i] >= 0 && cpus[i] < CPU_SETSIZE)
			CPU_SET(cpus[i], &set);
	int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	if (rc)
		return hs__error(rc, "cannot bind a thread to %d CPUs: %s", n, strerror(rc));
	return 0;
}

int hs__unbind_thread(void)
{
	cpu_set_t set;
	long n = sysconf(_SC_NPROCESSORS_CONF);

	CPU_ZERO(&set);
	for (long i = 0; i < n && i < CPU_SETSIZE; i++)
		CPU_SET(i, &set);
	int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
	if (rc)
		return hs__error(rc, "cannot unbind a thread: %s", strerror(rc));
	return 0;
}
