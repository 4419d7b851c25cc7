// Attention over the KV cache on CUDA, with the semantics of the CPU op
// (cpu_kernels/attention.h): GQA, sinks in the max and the denominator
// only, a sliding window, causal by cell positions.  Decode is split over
// the cells and merged, as flash-decoding does; prefill runs one item per
// token and KV head.  As in dense.cu, the arithmetic is in __host__
// __device__ functions that the *_emulate entry runs on the CPU.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_kernels/common.cuh"
#include "gpu_kernels/flat.cuh"
#include "gpu_kernels/gpu-kernels.h"

#define ATTN_WARPS 4
#define ATTN_MAX_NV 16      // values per lane: head_dim up to 512

// ---- attention -----------------------------------------------------------------------
// Block (token t, range s) x KV head hk: ATTN_WARPS warps, warp w takes the
// group's query heads w, w + ATTN_WARPS, ...; lane holds dims lane + 32 i
// (i < NV) of q and of the running output.  For each visible cell of the
// range: score = scale * q . K (lane parts summed over the warp), then the
// online softmax update.  One range: the sink and the normalisation at the
// end; several: partial states (m, l, o) to the scratch and a merge.

struct attn_ctx {
	struct hs_gpu_attn a;
	int n_split;
	float *part; // [n][n_head][n_split][head_dim + 2]
};

HD static inline float kv_value(int kv_type, const unsigned char *row, int d)
{
	if (kv_type == TYPE_Q8_0) {
		const unsigned char *blk = row + (size_t)(d / QK) * Q8_BYTES;
		return half_at(blk) * (float)(int8_t)blk[2 + d % QK];
	}
	return half_bits_to_float(((const unsigned short *)row)[d]);
}

HD static inline int attn_visible(int cp, int p, int window)
{
	return cp >= 0 && cp <= p && (window <= 0 || (long long)p - cp < window);
}

// the cell range [*c0, *c1) of range s
HD static inline void attn_range(const struct attn_ctx *c, int s, int *c0, int *c1)
{
	*c0 = (int)((long long)s * c->a.n_cells / c->n_split);
	*c1 = (int)((long long)(s + 1) * c->a.n_cells / c->n_split);
}

// A lane's running state for one query head.
template <int NV> struct attn_lane {
	float q[NV], o[NV];
	float m, l;
};

template <int NV> HD static inline void attn_lane_start(const struct attn_ctx *c, int t, int h, int lane, attn_lane<NV> *st)
{
	const float *q = c->a.q + (size_t)t * c->a.q_stride + (size_t)h * c->a.head_dim;
	for (int i = 0; i < NV; i++) {
		const int d = lane + 32 * i;
		st->q[i] = d < c->a.head_dim ? q[d] : 0.0f;
		st->o[i] = 0;
	}
	st->m = -INFINITY;
	st->l = 0;
}

template <int NV> HD static inline float attn_lane_dot(const struct attn_ctx *c, const attn_lane<NV> *st, int cell, int hk, int lane)
{
	const unsigned char *k = c->a.k + (size_t)cell * c->a.k_cell + (size_t)hk * c->a.k_head;
	float s = 0;
	for (int i = 0; i < NV; i++) {
		const int d = lane + 32 * i;
		if (d < c->a.head_dim)
			s += st->q[i] * kv_value(c->a.kv_type, k, d);
	}
	return s;
}

// the online softmax step with the cell's score (every lane has it)
template <int NV> HD static inline void attn_lane_update(const struct attn_ctx *c, attn_lane<NV> *st, float score, int cell, int hk, int lane)
{
	const unsigned char *v = c->a.v + (size_t)cell * c->a.v_cell + (size_t)hk * c->a.v_head;
	float corr = 1.0f, p = 1.0f;
	if (score > st->m) {
		corr = expf(st->m - score); // 0 on the first visible cell
		st->m = score;
	} else {
		p = expf(score - st->m);
	}
	st->l = st->l * corr + p;
	for (int i = 0; i < NV; i++) {
		const int d = lane + 32 * i;
		if (d < c->a.head_dim)
			st->o[i] = st->o[i] * corr + p * kv_value(c->a.kv_type, v, d);
	}
}

// One range's state: the output itself (with the sink), or a partial.
template <int NV> HD static inline void attn_lane_end(const struct attn_ctx *c, const attn_lane<NV> *st, int t, int h, int s, int lane)
{
	const int D = c->a.head_dim;
	if (c->n_split > 1) {
		float *p = c->part + (((size_t)t * c->a.n_head + h) * c->n_split + s) * ((size_t)D + 2);
		if (lane == 0) {
			p[0] = st->m;
			p[1] = st->l;
		}
		for (int i = 0; i < NV; i++)
			if (lane + 32 * i < D)
				p[2 + lane + 32 * i] = st->o[i];
		return;
	}
	float *out = c->a.out + (size_t)t * c->a.out_stride + (size_t)h * D;
	const float M = c->a.sinks ? fmaxf(st->m, c->a.sinks[h]) : st->m;
	float a = 0, L = 0;
	if (M != -INFINITY) {
		if (st->m != -INFINITY) {
			a = expf(st->m - M);
			L = a * st->l;
		}
		if (c->a.sinks)
			L += expf(c->a.sinks[h] - M);
	}
	const float inv = L > 0 ? 1.0f / L : 0.0f;
	for (int i = 0; i < NV; i++)
		if (lane + 32 * i < D)
			out[lane + 32 * i] = a * st->o[i] * inv;
}

// lane's dims of the merge of n_split partials of (t, h)
HD static inline void attn_merge_lane(const struct attn_ctx *c, int t, int h, int lane)
{
	const int D = c->a.head_dim, S = c->n_split;
	const size_t pf = (size_t)D + 2;
	const float *p = c->part + ((size_t)t * c->a.n_head + h) * S * pf;
	float *out = c->a.out + (size_t)t * c->a.out_stride + (size_t)h * D;
	float M = c->a.sinks ? c->a.sinks[h] : -INFINITY, L = 0;
	for (int s = 0; s < S; s++)
		M = fmaxf(M, p[s * pf]);
	for (int d = lane; d < D; d += 32)
		out[d] = 0;
	if (M == -INFINITY)
		return; // nothing visible and no sink
	for (int s = 0; s < S; s++) {
		if (p[s * pf] == -INFINITY)
			continue;
		const float a = expf(p[s * pf] - M);
		L += a * p[s * pf + 1];
		for (int d = lane; d < D; d += 32)
			out[d] += a * p[s * pf + 2 + d];
	}
	if (c->a.sinks)
		L += expf(c->a.sinks[h] - M);
	const float inv = L > 0 ? 1.0f / L : 0.0f;
	for (int d = lane; d < D; d += 32)
		out[d] *= inv;
}

// Block (bx, hk)'s token and cell range; the query head of the group's
// j-th head (consecutive query heads share a KV head, as ggml broadcasts).
HD static inline void attn_block(const struct attn_ctx *c, int bx, int *t, int *s)
{
	*t = bx / c->n_split;
	*s = bx % c->n_split;
}

HD static inline int attn_head(const struct attn_ctx *c, int hk, int j)
{
	return hk * (c->a.n_head / c->a.n_head_kv) + j;
}

template <int NV> __global__ void hs_attn_kernel(struct attn_ctx c)
{
	const int hk = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, G = c.a.n_head / c.a.n_head_kv;
	int t, s, c0, c1;
	attn_block(&c, blockIdx.x, &t, &s);
	attn_range(&c, s, &c0, &c1);
	const int pos = c.a.q_pos[t];
	for (int j = w; j < G; j += ATTN_WARPS) {
		const int h = attn_head(&c, hk, j);
		attn_lane<NV> st;
		attn_lane_start<NV>(&c, t, h, lane, &st);
		for (int cell = c0; cell < c1; cell++) {
			if (!attn_visible(c.a.cell_pos[cell], pos, c.a.window))
				continue;
			const float score = warp_allsum(attn_lane_dot<NV>(&c, &st, cell, hk, lane)) * c.a.scale;
			attn_lane_update<NV>(&c, &st, score, cell, hk, lane);
		}
		attn_lane_end<NV>(&c, &st, t, h, s, lane);
	}
}

__global__ void hs_attn_merge_kernel(struct attn_ctx c)
{
	const int i = blockIdx.x * ATTN_WARPS + threadIdx.x / 32;
	if (i < c.a.n * c.a.n_head)
		attn_merge_lane(&c, i / c.a.n_head, i % c.a.n_head, threadIdx.x % 32);
}

extern "C" size_t hs__gpu_attn_scratch_bytes(int n, int n_head, int n_head_kv, int head_dim, int n_cells)
{
	return hs__gpu_attn_scratch_size(n, n_head, n_head_kv, head_dim, n_cells);
}

static struct attn_ctx attn_setup(const struct hs_gpu_attn *a, void *scratch, int n_split)
{
	struct attn_ctx c;
	c.a = *a;
	c.n_split = n_split > 0 ? n_split : hs__gpu_attn_split(a->n, a->n_head_kv, a->n_cells);
	c.part = (float *)scratch;
	return c;
}

// values per lane: the smallest instantiated NV that holds head_dim
static int attn_nv(int head_dim)
{
	const int need = (head_dim + 31) / 32;
	return need <= 2 ? 2 : need <= 4 ? 4 : need <= 8 ? 8 : 16;
}

template <int NV> static void attn_emulate(const struct attn_ctx *c);

// the kernel (or its emulation) with the smallest NV that holds head_dim
template <int NV> static void attn_run(const struct attn_ctx *c, cudaStream_t stream, int emulate)
{
	if (emulate) {
		attn_emulate<NV>(c);
		return;
	}
	dim3 g((unsigned)(c->a.n * c->n_split), (unsigned)c->a.n_head_kv);
	hs_attn_kernel<NV><<<g, ATTN_WARPS * 32, 0, stream>>>(*c);
}

static void attn_dispatch(const struct attn_ctx *c, cudaStream_t stream, int emulate)
{
	switch (attn_nv(c->a.head_dim)) {
	case 2: attn_run<2>(c, stream, emulate); break;
	case 4: attn_run<4>(c, stream, emulate); break;
	case 8: attn_run<8>(c, stream, emulate); break;
	default: attn_run<ATTN_MAX_NV>(c, stream, emulate); break;
	}
}

extern "C" cudaError_t hs__gpu_attention(const struct hs_gpu_attn *a, void *scratch, cudaStream_t stream)
{
	if (a->n <= 0)
		return cudaSuccess;
	struct attn_ctx c = attn_setup(a, scratch, 0);
	attn_dispatch(&c, stream, 0);
	cudaError_t e = cudaGetLastError();
	if (e != cudaSuccess || c.n_split <= 1)
		return e;
	hs_attn_merge_kernel<<<blocks_for((long long)a->n * a->n_head, ATTN_WARPS), ATTN_WARPS * 32, 0, stream>>>(c);
	return cudaGetLastError();
}

// The kernel's work, block by block, warp by warp, the 32 lanes in step.
template <int NV> static void attn_emulate(const struct attn_ctx *c)
{
	const int G = c->a.n_head / c->a.n_head_kv;
	attn_lane<NV> st[32];
	for (int b = 0; b < c->a.n * c->n_split; b++)
		for (int hk = 0; hk < c->a.n_head_kv; hk++) {
			int t, s, c0, c1;
			attn_block(c, b, &t, &s);
			attn_range(c, s, &c0, &c1);
			const int pos = c->a.q_pos[t];
			for (int w = 0; w < ATTN_WARPS; w++)
				for (int j = w; j < G; j += ATTN_WARPS) {
					const int h = attn_head(c, hk, j);
					for (int lane = 0; lane < 32; lane++)
						attn_lane_start<NV>(c, t, h, lane, &st[lane]);
					for (int cell = c0; cell < c1; cell++) {
						if (!attn_visible(c->a.cell_pos[cell], pos, c->a.window))
							continue;
						float score = 0;
						for (int lane = 0; lane < 32; lane++)
							score += attn_lane_dot<NV>(c, &st[lane], cell, hk, lane);
						score *= c->a.scale;
						for (int lane = 0; lane < 32; lane++)
							attn_lane_update<NV>(c, &st[lane], score, cell, hk, lane);
					}
					for (int lane = 0; lane < 32; lane++)
						attn_lane_end<NV>(c, &st[lane], t, h, s, lane);
				}
		}
	if (c->n_split > 1)
		for (int i = 0; i < c->a.n * c->a.n_head; i++)
			for (int lane = 0; lane < 32; lane++)
				attn_merge_lane(c, i / c->a.n_head, i % c->a.n_head, lane);
}

extern "C" void hs__gpu_attention_emulate(const struct hs_gpu_attn *a, void *scratch, int n_split)
{
	if (a->n <= 0)
		return;
	struct attn_ctx c = attn_setup(a, scratch, n_split);
	attn_dispatch(&c, 0, 1);
}

