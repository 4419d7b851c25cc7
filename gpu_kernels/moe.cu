// Expert kernels: Q8_0 activation quantization and the fused expert FFN
// over (token, expert) pairs with masked ids (-1: that expert is never read).
// Experts come as packed blocks (the one layout of the host copy and the
// device slots) in one of two forms: experts whose matrices are all MXFP4
// or Q8_0 (or Q4_K, where the CPU tier packs it) row-interleaved
// (cpu_kernels/repack.h): rows in
// groups of 16; per column block a group's 16 scales, then its quant bytes
// in 4-byte units, 16 rows per unit; every other block type, and mixes
// (llama-quantize's Q4_K gate/up with a Q6_K down), as plain ggml rows, each
// matrix of its own type, decoded by quants.cuh.  Both forms go through the
// same thread decomposition below, only the decoding of a block differs.
//
// Two paths.  Decode (few pairs): a block of 4 warps computes one 16-row
// group of one pair: lane l of a warp takes row l % 16 and, with the other
// half-warp and the other warps, every 8th column block, so the 16 lanes of
// a half-warp read each 64-byte unit as 16 adjacent words; partial sums
// meet through a shuffle and shared memory.
// Prefill (many pairs): the pairs are grouped by expert on the device
// (count, scan, scatter), then each thread block computes a 64-row x 32-pair
// tile of one expert, every thread a 4 x 2 register tile, so each decoded
// weight block serves two pairs and each activation block four rows; the
// 32-value dot products are int8 dp4a.
//
// Every piece of arithmetic (block decoding, dot products, activation,
// quantization, the tile and grouping index math) is a __host__ __device__
// function, so hs__gpu_ffn_emulate() runs the very same code on the CPU for
// the tests of machines without a GPU.  What the emulation cannot check:
// launch geometry, warp shuffles and atomics.
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_kernels/common.cuh"
#include "gpu_kernels/quants.cuh"
#include "gpu_kernels/gpu-kernels.h"

#define PACK_ROWS 16     // rows per interleaved group (HS_PACK_ROWS)
#define WARPS 4          // decode: warps per block (one 16-row group)
#define SLOTS (2 * WARPS) // decode: threads sharing one row, each every SLOTS-th block
#define TILE_ROWS 64     // prefill tile: rows ...
#define TILE_PAIRS 32    // ... x pairs, 256 threads of 4 x 2 outputs
#define TILE_THREADS 256
#define PREFILL_MIN_PAIRS 64
#define CHECK_THREADS 256 // the one block of the check kernel

HD static inline size_t row_bytes(int type, int n)
{
	return type_row_bytes(type, n);
}

// The block group holding column block b of row r's group, in a packed
// matrix of ncols columns starting at m.
HD static inline const unsigned char *group_block(int type, const unsigned char *m, int ncols, int r, int b)
{
	return m + (size_t)(r / PACK_ROWS) * PACK_ROWS * row_bytes(type, ncols) + (size_t)b * PACK_ROWS * block_bytes(type);
}

// Row i (0..15) of block group gb as 32 int8 values, and its scale: MXFP4
// unit u holds values 4u..4u+3 in its low nibbles, 16+4u.. in its high ones.
HD static inline float unpack_packed(int type, const unsigned char *gb, int i, int8_t v[QK])
{
	if (type == TYPE_MXFP4) {
		for (int u = 0; u < 4; u++)
			for (int j = 0; j < 4; j++) {
				const unsigned char q = gb[PACK_ROWS + 64 * u + 4 * i + j];
				v[4 * u + j] = (int8_t)mxfp4_value(q & 15);
				v[16 + 4 * u + j] = (int8_t)mxfp4_value(q >> 4);
			}
		return ldexpf(1.0f, (int)gb[i] - 128);
	}
	for (int u = 0; u < 8; u++)
		memcpy(v + 4 * u, gb + 2 * PACK_ROWS + 64 * u + 4 * i, 4);
	return half_at(gb + 2 * i);
}

// Q4_K super-block sb of row r of a packed matrix (repack.h: the 16 rows'
// d, then dmin, then 12 planes of scale bytes, then 32 units of 16 rows x 4
// qs bytes) as the plain block at blk, as far as 32-value block j needs it:
// the 16 header bytes and qs bytes 32 (j / 2) .. + 31 (units 8 (j / 2) ..).
HD static inline void packed_q4k_block(const unsigned char *m, int ncols, int r, int sb, int j, unsigned char *blk)
{
	const unsigned char *gb = group_block(TYPE_Q4_K, m, ncols, r, 0) + (size_t)sb * PACK_ROWS * 144;
	const int i = r % PACK_ROWS;
	for (int k = 0; k < 2; k++) {
		blk[k] = gb[2 * i + k];
		blk[2 + k] = gb[32 + 2 * i + k];
	}
	for (int k = 0; k < 12; k++)
		blk[4 + k] = gb[64 + 16 * k + i];
	for (int u = 8 * (j / 2); u < 8 * (j / 2) + 8; u++)
		memcpy(blk + 16 + 4 * u, gb + 256 + 64 * u + 4 * i, 4);
}

// A weight block decoded: 32 int8 values and the block's scale s[0]
// (MXFP4, Q8_0), or per-half scales and mins (the other types).
struct wblk {
	int8_t v[QK];
	float s[2], mn[2];
};

// Row r's column block b of a matrix of ncols columns at m: row-interleaved
// (packed) or a plain ggml row.
HD static inline void weight_block(int type, int packed, const unsigned char *m, int ncols, int r, int b,
				   struct wblk *w)
{
	if (packed && type == TYPE_Q4_K) {
		unsigned char blk[144];
		packed_q4k_block(m, ncols, r, b / 8, b % 8, blk);
		unpack32(type, blk, b % 8, w->v, w->s, w->mn);
		return;
	}
	if (packed) {
		w->s[0] = unpack_packed(type, group_block(type, m, ncols, r, b), r % PACK_ROWS, w->v);
		return;
	}
	const unsigned char *row = m + (size_t)r * row_bytes(type, ncols);
	if (type_split(type))
		unpack32(type, row, b, w->v, w->s, w->mn);
	else
		w->s[0] = unpack_block(type, row + (size_t)b * block_bytes(type), w->v);
}

// A decoded block against one Q8_0 activation block x.
HD static inline float wblk_dot(int type, const struct wblk *w, const unsigned char *x)
{
	if (!type_split(type))
		return (float)dot32(w->v, (const int8_t *)(x + 2)) * w->s[0] * half_at(x);
	int wv[8], xv[8];
	memcpy(wv, w->v, QK);
	memcpy(xv, x + 2, QK);
	return dot_split_words(wv, w->s, w->mn, xv, half_at(x));
}

// Row r's block b against one Q8_0 activation block.
HD static inline float dot_block(int type, int packed, const unsigned char *m, int ncols, int r, int b,
				 const unsigned char *x)
{
	struct wblk w;
	weight_block(type, packed, m, ncols, r, b, &w);
	return wblk_dot(type, &w, x);
}

// What decode thread `slot` (0..SLOTS-1) adds to row r's dot product: the
// blocks slot, slot + SLOTS, ...
HD static inline float slot_partial(int type, int packed, const unsigned char *m, int ncols, int r, int slot,
				    const unsigned char *x)
{
	float acc = 0;
	for (int b = slot; b < ncols / QK; b += SLOTS)
		acc += dot_block(type, packed, m, ncols, r, b, x + (size_t)b * Q8_BYTES);
	return acc;
}

// The decode kernels' sum of the SLOTS partials, in their order: the two
// half-warps of each warp (shuffle), then warp by warp (shared memory).
HD static inline float slots_sum(const float part[SLOTS])
{
	float s = 0;
	for (int w = 0; w < WARPS; w++)
		s += part[2 * w] + part[2 * w + 1];
	return s;
}

HD static inline float act(int kind, float g, float u)
{
	if (kind == 0) {
		g = fminf(g, 7.0f);
		u = fmaxf(fminf(u, 7.0f), -7.0f);
		return g / (1.0f + expf(-1.702f * g)) * (u + 1.0f);
	}
	return g / (1.0f + expf(-g)) * u;
}

HD static inline const unsigned char *expert_base(const struct hs_gpu_ffn *a, int e)
{
	return a->pool + (size_t)a->slot_of[e] * a->stride;
}

// 0 when pair p is masked or can be computed, else its fault's code: the
// contract the sim keeps (an id outside the experts, or a routed expert
// without a slot, which the runtime never hands over, is -EINVAL and reads
// nothing; without the check a kernel would read at pool - stride).
HD static inline unsigned long long pair_fault(const struct hs_gpu_ffn *a, int p)
{
	const int e = a->ids[p];
	if (e == -1)
		return 0;
	if (e < -1 || e >= a->n_experts)
		return HS_GPU_FAULT(HS_GPU_FAULT_ID, e);
	return a->slot_of[e] < 0 ? HS_GPU_FAULT(HS_GPU_FAULT_SLOT, e) : 0;
}

// The check of thread tid of CHECK_THREADS: the first fault among pairs
// tid, tid + CHECK_THREADS, ...
HD static inline unsigned long long check_thread(const struct hs_gpu_ffn *a, int pairs, int tid)
{
	for (int p = tid; p < pairs; p += CHECK_THREADS) {
		const unsigned long long f = pair_fault(a, p);
		if (f)
			return f;
	}
	return 0;
}

HD static inline const unsigned char *x_of_pair(const struct hs_gpu_ffn *a, int p)
{
	return (const unsigned char *)a->xq + (size_t)(p / a->n_used) * (a->n_embd / QK) * Q8_BYTES;
}

HD static inline const unsigned char *hq_of_pair(const struct hs_gpu_ffn *a, int p)
{
	return (const unsigned char *)a->hq + (size_t)p * (a->n_ff / QK) * Q8_BYTES;
}

// h[p][r] from the gate and up sums of row r
HD static inline void finish_gate_up(const struct hs_gpu_ffn *a, const unsigned char *base, int p, int r, float g,
				     float u)
{
	if (a->off_gate_b) {
		g += ((const float *)(base + a->off_gate_b))[r];
		u += ((const float *)(base + a->off_up_b))[r];
	}
	a->h[(size_t)p * a->n_ff + r] = act(a->act, g, u);
}

// the weighted contribution of down row r of pair p
HD static inline float finish_down(const struct hs_gpu_ffn *a, const unsigned char *base, int p, int r, float v)
{
	if (a->off_down_b)
		v += ((const float *)(base + a->off_down_b))[r];
	return a->weights[p] * v;
}

// ---- the prefill tile: one thread's 4 rows x 2 pairs ------------------------

struct tile_pos {
	int e;            // expert
	int row0;         // first row of the block's tile
	int first, count; // the expert's pairs in the grouped list
	int pt;           // pair tile index
};

// gate/up of thread tid (0..255) of the tile; list = pair indices grouped by expert
HD static inline void tile_gate_up(const struct hs_gpu_ffn *a, const int *list, struct tile_pos t, int tid)
{
	const int tr = tid / 16, tp = tid % 16, nb = a->n_embd / QK;
	const unsigned char *base = expert_base(a, t.e);
	int rows[4], pairs[2];
	float g[4][2] = { { 0 } }, u[4][2] = { { 0 } };
	for (int i = 0; i < 4; i++)
		rows[i] = t.row0 + tr * 4 + i;
	for (int j = 0; j < 2; j++) {
		int k = t.pt * TILE_PAIRS + tp * 2 + j;
		pairs[j] = k < t.count ? list[t.first + k] : -1;
	}
	if (pairs[0] < 0 && pairs[1] < 0)
		return;
	for (int b = 0; b < nb; b++) {
		const unsigned char *xb[2];
		for (int j = 0; j < 2; j++)
			xb[j] = pairs[j] >= 0 ? x_of_pair(a, pairs[j]) + (size_t)b * Q8_BYTES : NULL;
		UNROLL
		for (int i = 0; i < 4; i++) {
			if (rows[i] >= a->n_ff)
				continue;
			struct wblk wg, wu;
			weight_block(a->type[0], a->packed, base + a->off_gate, a->n_embd, rows[i], b, &wg);
			weight_block(a->type[1], a->packed, base + a->off_up, a->n_embd, rows[i], b, &wu);
			UNROLL
			for (int j = 0; j < 2; j++) {
				if (!xb[j])
					continue;
				g[i][j] += wblk_dot(a->type[0], &wg, xb[j]);
				u[i][j] += wblk_dot(a->type[1], &wu, xb[j]);
			}
		}
	}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			if (rows[i] < a->n_ff && pairs[j] >= 0)
				finish_gate_up(a, base, pairs[j], rows[i], g[i][j], u[i][j]);
}

// down rows of the tile: weighted values for y (the caller adds them)
HD static inline void tile_down(const struct hs_gpu_ffn *a, const int *list, struct tile_pos t, int tid,
				int out_pair[2], int out_row[4], float out[4][2])
{
	const int tr = tid / 16, tp = tid % 16, nb = a->n_ff / QK;
	const unsigned char *base = expert_base(a, t.e);
	for (int i = 0; i < 4; i++)
		out_row[i] = t.row0 + tr * 4 + i;
	for (int j = 0; j < 2; j++) {
		int k = t.pt * TILE_PAIRS + tp * 2 + j;
		out_pair[j] = k < t.count ? list[t.first + k] : -1;
	}
	float acc[4][2] = { { 0 } };
	if (out_pair[0] >= 0 || out_pair[1] >= 0)
		for (int b = 0; b < nb; b++) {
			UNROLL
			for (int i = 0; i < 4; i++) {
				if (out_row[i] >= a->n_embd)
					continue;
				struct wblk w;
				weight_block(a->type[2], a->packed, base + a->off_down, a->n_ff, out_row[i], b, &w);
				UNROLL
				for (int j = 0; j < 2; j++) {
					if (out_pair[j] < 0)
						continue;
					acc[i][j] += wblk_dot(a->type[2], &w, hq_of_pair(a, out_pair[j]) + (size_t)b * Q8_BYTES);
				}
			}
		}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			out[i][j] = out_row[i] < a->n_embd && out_pair[j] >= 0
					    ? finish_down(a, base, out_pair[j], out_row[i], acc[i][j])
					    : 0;
}

// ---- kernels -------------------------------------------------------------------

// skip: NULL, or a launch's verdict (a faulty launch computes nothing)
__global__ void hs_quantize_kernel(const float *x, int n_blocks_row, int n_cols, long long n_blocks, unsigned char *out,
				   const int *skip)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i >= n_blocks || (skip && *skip))
		return;
	long long row = i / n_blocks_row, b = i % n_blocks_row;
	quantize_block(x + row * n_cols + b * QK, out + i * Q8_BYTES);
}

static cudaError_t quantize(const float *x, int n_rows, int n_cols, void *xq, const int *skip, cudaStream_t stream)
{
	long long nb = (long long)n_rows * (n_cols / QK);
	if (nb == 0)
		return cudaSuccess;
	hs_quantize_kernel<<<(unsigned)((nb + 255) / 256), 256, 0, stream>>>(x, n_cols / QK, n_cols, nb,
									   (unsigned char *)xq, skip);
	return cudaGetLastError();
}

extern "C" cudaError_t hs__gpu_quantize_q8_0(const float *x, int n_rows, int n_cols, void *xq, cudaStream_t stream)
{
	return quantize(x, n_rows, n_cols, xq, NULL, stream);
}

// one block of CHECK_THREADS: the launch's verdict for the kernels after it,
// the first fault to the host
__global__ void hs_ffn_check_kernel(struct hs_gpu_ffn a, int pairs)
{
	__shared__ unsigned long long first;
	if (threadIdx.x == 0)
		first = 0;
	__syncthreads();
	const unsigned long long f = check_thread(&a, pairs, threadIdx.x);
	if (f)
		atomicCAS(&first, 0ull, f);
	__syncthreads();
	if (threadIdx.x == 0) {
		*a.verdict = first != 0;
		if (first && !*(volatile unsigned long long *)a.report)
			*(volatile unsigned long long *)a.report = first;
	}
}

// decode, grid (n_ff / 16 groups, pairs), WARPS warps: thread (warp w, lane
// l) takes row l % 16 of the block's group and blocks slot, slot + SLOTS,
// ... where slot = 2 w + l / 16
__global__ void hs_gate_up_kernel(struct hs_gpu_ffn a)
{
	__shared__ float part[2][WARPS][PACK_ROWS];
	const int p = blockIdx.y, e = a.ids[p], w = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int i = lane % PACK_ROWS, slot = 2 * w + lane / PACK_ROWS, r = blockIdx.x * PACK_ROWS + i;
	if (*a.verdict || e < 0) // a faulty launch, or masked: this expert is never read
		return;
	const unsigned char *base = expert_base(&a, e), *x = x_of_pair(&a, p);
	float g = slot_partial(a.type[0], a.packed, base + a.off_gate, a.n_embd, r, slot, x);
	float u = slot_partial(a.type[1], a.packed, base + a.off_up, a.n_embd, r, slot, x);
	g += __shfl_down_sync(0xffffffffu, g, PACK_ROWS);
	u += __shfl_down_sync(0xffffffffu, u, PACK_ROWS);
	if (lane < PACK_ROWS) {
		part[0][w][i] = g;
		part[1][w][i] = u;
	}
	__syncthreads();
	if (threadIdx.x < PACK_ROWS) {
		float gs = 0, us = 0;
		for (int k = 0; k < WARPS; k++) {
			gs += part[0][k][i];
			us += part[1][k][i];
		}
		finish_gate_up(&a, base, p, r, gs, us);
	}
}

// decode, grid (n_embd / 16 groups, pairs)
__global__ void hs_down_kernel(struct hs_gpu_ffn a)
{
	__shared__ float part[WARPS][PACK_ROWS];
	const int p = blockIdx.y, e = a.ids[p], w = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int i = lane % PACK_ROWS, slot = 2 * w + lane / PACK_ROWS, r = blockIdx.x * PACK_ROWS + i;
	if (*a.verdict || e < 0)
		return;
	const unsigned char *base = expert_base(&a, e);
	float v = slot_partial(a.type[2], a.packed, base + a.off_down, a.n_ff, r, slot, hq_of_pair(&a, p));
	v += __shfl_down_sync(0xffffffffu, v, PACK_ROWS);
	if (lane < PACK_ROWS)
		part[w][i] = v;
	__syncthreads();
	if (threadIdx.x < PACK_ROWS) {
		float s = 0;
		for (int k = 0; k < WARPS; k++)
			s += part[k][i];
		atomicAdd(a.y + (size_t)(p / a.n_used) * a.n_embd + r, finish_down(&a, base, p, r, s));
	}
}

// grouping: counts[e] = pairs of expert e; first[e] its start; list = pairs by expert
__global__ void hs_count_kernel(const int *ids, int pairs, int *counts, const int *verdict)
{
	int p = blockIdx.x * blockDim.x + threadIdx.x;
	if (p < pairs && !*verdict && ids[p] >= 0)
		atomicAdd(counts + ids[p], 1);
}

__global__ void hs_scan_kernel(const int *counts, int n_experts, int *first, int *cursor)
{
	if (threadIdx.x == 0 && blockIdx.x == 0) {
		int s = 0;
		for (int e = 0; e < n_experts; e++) {
			first[e] = cursor[e] = s;
			s += counts[e];
		}
		first[n_experts] = s;
	}
}

__global__ void hs_scatter_kernel(const int *ids, int pairs, int *cursor, int *list, const int *verdict)
{
	int p = blockIdx.x * blockDim.x + threadIdx.x;
	if (p < pairs && !*verdict && ids[p] >= 0)
		list[atomicAdd(cursor + ids[p], 1)] = p;
}

// prefill, grid (row tiles, experts, pair tiles)
__global__ void __launch_bounds__(TILE_THREADS, 2) hs_tile_gate_up_kernel(struct hs_gpu_ffn a, const int *first, const int *list)
{
	if (*a.verdict)
		return;
	const int e = blockIdx.y, count = first[e + 1] - first[e];
	if ((int)blockIdx.z * TILE_PAIRS >= count)
		return; // no pairs here: no expert byte is read
	struct tile_pos t = { e, (int)blockIdx.x * TILE_ROWS, first[e], count, (int)blockIdx.z };
	tile_gate_up(&a, list, t, threadIdx.x);
}

__global__ void __launch_bounds__(TILE_THREADS, 2) hs_tile_down_kernel(struct hs_gpu_ffn a, const int *first, const int *list)
{
	if (*a.verdict)
		return;
	const int e = blockIdx.y, count = first[e + 1] - first[e];
	if ((int)blockIdx.z * TILE_PAIRS >= count)
		return;
	struct tile_pos t = { e, (int)blockIdx.x * TILE_ROWS, first[e], count, (int)blockIdx.z };
	int pr[2], rw[4];
	float out[4][2];
	tile_down(&a, list, t, threadIdx.x, pr, rw, out);
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			if (pr[j] >= 0 && rw[i] < a.n_embd)
				atomicAdd(a.y + (size_t)(pr[j] / a.n_used) * a.n_embd + rw[i], out[i][j]);
}

extern "C" size_t hs__gpu_ffn_scratch_bytes(int n, int n_used, int n_ff, int n_experts)
{
	return hs__gpu_ffn_scratch_size(n, n_used, n_ff, n_experts);
}

// carves h, hq and the grouping arrays out of the scratch
static void carve(struct hs_gpu_ffn *a, void *scratch, int pairs, int **counts, int **first, int **cursor, int **list)
{
	size_t h = ((size_t)pairs * a->n_ff * sizeof(float) + 255) & ~(size_t)255;
	size_t hq = ((size_t)pairs * (a->n_ff / QK) * Q8_BYTES + 255) & ~(size_t)255;
	a->h = (float *)scratch;
	a->hq = (unsigned char *)scratch + h;
	*counts = (int *)((unsigned char *)scratch + h + hq);
	*first = *counts + a->n_experts;
	*cursor = *first + a->n_experts + 1;
	*list = *cursor + a->n_experts;
}

extern "C" cudaError_t hs__gpu_ffn(const struct hs_gpu_ffn *in, void *scratch, cudaStream_t stream)
{
	struct hs_gpu_ffn a = *in;
	const int pairs = a.n * a.n_used;
	int *counts, *first, *cursor, *list;
	cudaError_t e;
	if (pairs == 0)
		return cudaSuccess;
	carve(&a, scratch, pairs, &counts, &first, &cursor, &list);
	hs_ffn_check_kernel<<<1, CHECK_THREADS, 0, stream>>>(a, pairs);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	if (pairs < PREFILL_MIN_PAIRS) {
		dim3 g1(a.n_ff / PACK_ROWS, pairs), g2(a.n_embd / PACK_ROWS, pairs);
		hs_gate_up_kernel<<<g1, WARPS * 32, 0, stream>>>(a);
		if ((e = cudaGetLastError()) != cudaSuccess)
			return e;
		if ((e = quantize(a.h, pairs, a.n_ff, a.hq, a.verdict, stream)) != cudaSuccess)
			return e;
		hs_down_kernel<<<g2, WARPS * 32, 0, stream>>>(a);
		return cudaGetLastError();
	}
	if (pairs / TILE_PAIRS + 1 > 65535)
		return cudaErrorInvalidConfiguration; // grid.z: the caller splits larger batches
	const unsigned gp = (pairs + 255) / 256;
	if ((e = cudaMemsetAsync(counts, 0, sizeof(int) * a.n_experts, stream)) != cudaSuccess)
		return e;
	hs_count_kernel<<<gp, 256, 0, stream>>>(a.ids, pairs, counts, a.verdict);
	hs_scan_kernel<<<1, 32, 0, stream>>>(counts, a.n_experts, first, cursor);
	hs_scatter_kernel<<<gp, 256, 0, stream>>>(a.ids, pairs, cursor, list, a.verdict);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	// any one expert has at most `pairs` pairs: tiles past its count return at once
	dim3 t1((a.n_ff + TILE_ROWS - 1) / TILE_ROWS, a.n_experts, (pairs + TILE_PAIRS - 1) / TILE_PAIRS);
	dim3 t2((a.n_embd + TILE_ROWS - 1) / TILE_ROWS, a.n_experts, (pairs + TILE_PAIRS - 1) / TILE_PAIRS);
	hs_tile_gate_up_kernel<<<t1, TILE_THREADS, 0, stream>>>(a, first, list);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	if ((e = quantize(a.h, pairs, a.n_ff, a.hq, a.verdict, stream)) != cudaSuccess)
		return e;
	hs_tile_down_kernel<<<t2, TILE_THREADS, 0, stream>>>(a, first, list);
	return cudaGetLastError();
}

// ---- the same code on the CPU ---------------------------------------------------

extern "C" int hs__gpu_ffn_emulate(const struct hs_gpu_ffn *in, void *scratch, int tiled)
{
	struct hs_gpu_ffn a = *in;
	const int pairs = a.n * a.n_used, E = a.n_experts;
	int *counts, *first, *cursor, *list;

	if (pairs == 0)
		return 0;
	carve(&a, scratch, pairs, &counts, &first, &cursor, &list);
	// the check kernel's threads; the first fault any of them finds (the
	// kernel's atomicCAS takes whichever thread comes first)
	unsigned long long fault = 0;
	for (int tid = 0; tid < CHECK_THREADS && !fault; tid++)
		fault = check_thread(&a, pairs, tid);
	*a.verdict = fault != 0;
	if (fault && !*a.report)
		*a.report = fault;
	if (*a.verdict)
		return -EINVAL; // the kernels after the check compute nothing
	if (!tiled) {
		// each thread's partial, summed in the kernels' order
		float part[SLOTS];
		for (int p = 0; p < pairs; p++) {
			int e = a.ids[p];
			if (e < 0)
				continue;
			const unsigned char *base = expert_base(&a, e), *x = x_of_pair(&a, p);
			for (int r = 0; r < a.n_ff; r++) {
				float g, u;
				for (int slot = 0; slot < SLOTS; slot++)
					part[slot] = slot_partial(a.type[0], a.packed, base + a.off_gate, a.n_embd, r, slot, x);
				g = slots_sum(part);
				for (int slot = 0; slot < SLOTS; slot++)
					part[slot] = slot_partial(a.type[1], a.packed, base + a.off_up, a.n_embd, r, slot, x);
				u = slots_sum(part);
				finish_gate_up(&a, base, p, r, g, u);
			}
		}
		for (long long i = 0; i < (long long)pairs * (a.n_ff / QK); i++)
			quantize_block(a.h + i * QK, (unsigned char *)a.hq + i * Q8_BYTES);
		for (int p = 0; p < pairs; p++) {
			int e = a.ids[p];
			if (e < 0)
				continue;
			const unsigned char *base = expert_base(&a, e);
			for (int r = 0; r < a.n_embd; r++) {
				for (int slot = 0; slot < SLOTS; slot++)
					part[slot] = slot_partial(a.type[2], a.packed, base + a.off_down, a.n_ff, r, slot,
								  hq_of_pair(&a, p));
				a.y[(size_t)(p / a.n_used) * a.n_embd + r] += finish_down(&a, base, p, r, slots_sum(part));
			}
		}
		return 0;
	}
	// grouping as the count / scan / scatter kernels do it
	memset(counts, 0, sizeof(int) * E);
	for (int p = 0; p < pairs; p++)
		if (a.ids[p] >= 0)
			counts[a.ids[p]]++;
	int s = 0;
	for (int e = 0; e < E; e++) {
		first[e] = cursor[e] = s;
		s += counts[e];
	}
	first[E] = s;
	for (int p = 0; p < pairs; p++)
		if (a.ids[p] >= 0)
			list[cursor[a.ids[p]]++] = p;
	const int pt_max = (pairs + TILE_PAIRS - 1) / TILE_PAIRS;
	for (int e = 0; e < E; e++)
		for (int pt = 0; pt < pt_max; pt++) {
			int count = first[e + 1] - first[e];
			if (pt * TILE_PAIRS >= count)
				continue;
			for (int rt = 0; rt * TILE_ROWS < a.n_ff; rt++)
				for (int tid = 0; tid < TILE_THREADS; tid++)
					tile_gate_up(&a, list, (struct tile_pos){ e, rt * TILE_ROWS, first[e], count, pt }, tid);
		}
	for (long long i = 0; i < (long long)pairs * (a.n_ff / QK); i++)
		quantize_block(a.h + i * QK, (unsigned char *)a.hq + i * Q8_BYTES);
	for (int e = 0; e < E; e++)
		for (int pt = 0; pt < pt_max; pt++) {
			int count = first[e + 1] - first[e];
			if (pt * TILE_PAIRS >= count)
				continue;
			for (int rt = 0; rt * TILE_ROWS < a.n_embd; rt++)
				for (int tid = 0; tid < TILE_THREADS; tid++) {
					int pr[2], rw[4];
					float out[4][2];
					tile_down(&a, list, (struct tile_pos){ e, rt * TILE_ROWS, first[e], count, pt }, tid, pr,
						  rw, out);
					for (int i = 0; i < 4; i++)
						for (int j = 0; j < 2; j++)
							if (pr[j] >= 0 && rw[i] < a.n_embd)
								a.y[(size_t)(pr[j] / a.n_used) * a.n_embd + rw[i]] += out[i][j];
				}
		}
	return 0;
}
