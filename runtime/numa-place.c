/* Host experts placed on a NUMA node: a layer's expert tensors are read
 * from the file (a split model: from the shard that holds each tensor)
 * with large pread()s into anonymous memory bound to the node
 * (a file mapping would put page-cache pages wherever the faulting thread
 * runs, or leave them where an earlier reader cached them), the file's
 * page cache for those ranges is dropped afterwards, and the placement is
 * verified by asking the kernel where sampled pages live (move_pages with
 * no target nodes only queries). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/repack.h"
#include "base/error.h"
#include "model/model.h"
#include "runtime/numa.h"
#include "runtime/numa-place.h"

#define READ_CHUNK ((size_t)64 << 20)
#define MAX_SAMPLES 4096

static int read_range(int fd, const char *path, uint64_t off, size_t n, uint8_t *dst)
{
	size_t done = 0;
	while (done < n) {
		size_t want = n - done < READ_CHUNK ? n - done : READ_CHUNK;
		ssize_t r = pread(fd, dst + done, want, (off_t)(off + done));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return hs__error(EIO, "%s: read of %zu bytes at offset %llu failed: %s", path, want,
					 (unsigned long long)(off + done), r < 0 ? strerror(errno) : "end of file");
		done += (size_t)r;
	}
	/* these bytes now live in node memory: the page cache copy is not needed */
	posix_fadvise(fd, (off_t)off, (off_t)n, POSIX_FADV_DONTNEED);
	return 0;
}

int hs__numa_where(const void *p, size_t bytes, uint64_t *node_bytes, int max_nodes)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t pages = (bytes + (size_t)page - 1) / (size_t)page, step = pages / MAX_SAMPLES + 1, n = 0;
	void *addr[MAX_SAMPLES + 1];
	int status[MAX_SAMPLES + 1];

	memset(node_bytes, 0, sizeof *node_bytes * max_nodes);
	if (!bytes)
		return 0;
	for (size_t i = 0; i < pages && n <= MAX_SAMPLES; i += step)
		addr[n++] = (uint8_t *)((uintptr_t)p & ~(uintptr_t)(page - 1)) + i * (size_t)page;
	if (numa_available() < 0) { /* no NUMA in this kernel: everything is node 0 */
		node_bytes[0] = bytes;
		return 0;
	}
	if (move_pages(0, (unsigned long)n, addr, NULL, status, 0) != 0)
		return hs__error(EIO, "move_pages (query): %s", strerror(errno));
	int counted = 0;
	uint64_t per[HS_MAX_NODES] = { 0 };
	for (size_t i = 0; i < n; i++)
		if (status[i] >= 0 && status[i] < max_nodes && status[i] < HS_MAX_NODES) {
			per[status[i]]++;
			counted++;
		}
	for (int j = 0; j < max_nodes && j < HS_MAX_NODES; j++)
		node_bytes[j] = counted ? (uint64_t)((double)bytes * per[j] / n) : 0;
	return 0;
}

int hs__host_layer_load(const hs_model *m, int layer, int os_node, struct hs_host_layer *out)
{
	const struct hs_moe_layer *l = hs__model_layer(m, layer);
	const struct hs_gguf *g = hs__model_gguf(m);
	int *fd = NULL, rc = 0; /* one per shard, opened when a tensor first needs it */

	memset(out, 0, sizeof *out);
	if (!l)
		return hs__error(EINVAL, "layer %d has no experts", layer);
	/* the host copy is packed like a device slot (gate, up, down, biases
	 * per expert; MXFP4, Q8_0 (and on the AVX-512 tiers Q4_K) matrices
	 * row-interleaved, repacked here once), so a streamed or admitted expert is copied straight from it,
	 * and the CPU kernels read it through the same view */
	const int E = l->n_experts;
	const struct hs_expert_pack pack = hs__expert_pack_layout(l->type, l->n_embd, l->n_ff, l->arch->has_bias);
	const size_t F = (size_t)l->n_ff, D = (size_t)l->n_embd;
	const size_t big = l->gate_stride > l->down_stride ? l->gate_stride : l->down_stride;
	uint8_t *plain = NULL; /* one matrix as the file has it, before repacking */
	out->bytes = pack.bytes * (size_t)E;
	out->mem = hs__numa_alloc_on(os_node, out->bytes);
	out->identity = malloc(sizeof *out->identity * E);
	if (pack.packed_rows)
		plain = malloc(big > l->up_stride ? big : l->up_stride);
	fd = malloc(sizeof *fd * (size_t)g->n_shards);
	if (!out->mem || !out->identity || (pack.packed_rows && !plain) || !fd) {
		rc = hs__error(ENOMEM, "layer %d: no memory for its host experts", layer);
		goto out_free;
	}
	out->os_node = os_node;
	for (int s = 0; s < g->n_shards; s++)
		fd[s] = -1;
	for (int e = 0; e < E && !rc; e++) {
		uint8_t *blk = out->mem + (size_t)e * pack.bytes;
		const struct {
			const void *src;
			size_t n, at;
			int rows, cols; /* of a matrix (0 for biases) */
		} part[6] = {
			{ l->gate + (size_t)e * l->gate_stride, l->gate_stride, pack.gate, (int)F, (int)D },
			{ l->up + (size_t)e * l->up_stride, l->up_stride, pack.up, (int)F, (int)D },
			{ l->down + (size_t)e * l->down_stride, l->down_stride, pack.down, (int)D, (int)F },
			{ l->gate_b ? l->gate_b + (size_t)e * F : NULL, F * 4, pack.gate_b, 0, 0 },
			{ l->up_b ? l->up_b + (size_t)e * F : NULL, F * 4, pack.up_b, 0, 0 },
			{ l->down_b ? l->down_b + (size_t)e * D : NULL, D * 4, pack.down_b, 0, 0 },
		};
		memset(blk, 0, pack.bytes);
		for (int i = 0; i < 6 && !rc; i++) {
			if (!part[i].src || (i >= 3 && !part[i].at))
				continue;
			const int repack = pack.packed_rows && part[i].rows;
			const char *path = NULL;
			uint64_t off = 0;
			int s = hs__gguf_locate(g, part[i].src, part[i].n, &path, &off);
			if (s < 0) {
				rc = s;
				break;
			}
			if (fd[s] < 0 && (fd[s] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
				rc = hs__error(EIO, "%s: cannot open to place layer %d: %s", path, layer, strerror(errno));
				break;
			}
			rc = read_range(fd[s], path, off, part[i].n, repack ? plain : blk + part[i].at);
			if (!rc && repack) /* parts 0..2 are gate, up, down */
				hs__pack_matrix(l->type[i], part[i].rows, part[i].cols, plain,
						hs__type_row_bytes(l->type[i], (uint64_t)part[i].cols), blk + part[i].at);
		}
		out->identity[e] = e;
	}
	for (int s = 0; s < g->n_shards; s++)
		if (fd[s] >= 0)
			close(fd[s]);
	free(fd);
	fd = NULL;
	free(plain);
	plain = NULL;
	if (rc)
		goto out_free;
	out->l = *l;
	out->l.gate = out->l.up = out->l.down = NULL;
	out->l.gate_b = out->l.up_b = out->l.down_b = NULL;
	out->l.pool = out->mem;
	out->l.pool_stride = pack.bytes;
	out->l.slot_of = out->identity;
	out->l.pack = pack;
	if ((rc = hs__numa_where(out->mem, out->bytes, out->node_bytes, HS_MAX_NODES)))
		goto out_free;
	return 0;
out_free:
	free(fd);
	free(plain);
	hs__host_layer_free(out);
	return rc;
}

void hs__host_layer_free(struct hs_host_layer *h)
{
	if (h->mem)
		hs__numa_free(h->mem, h->bytes);
	free(h->identity);
	memset(h, 0, sizeof *h);
}
