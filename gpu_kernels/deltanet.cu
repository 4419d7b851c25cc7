// qwen35moe's Gated DeltaNet mixer on CUDA (device/device.h, struct
// hs_dev_dn): four launches on the queue,
//  - the causal convolution: one thread per channel walks the tokens, the
//    kernel's taps and the channel's state in its own reads and writes;
//  - the prep (cpu_kernels/deltanet.h hs__dn_prep): one thread per q or k
//    head of a token scales it to unit length, one per value head of a
//    token makes its decay and beta;
//  - the delta rule: one block per value head holds the head's state in
//    shared memory for the whole run (read and written once per call), a
//    thread per value row; each token's key and query are staged in shared
//    memory, then every thread decays its row, takes its dot with the key,
//    adds its share of the update and its dot with the query.  The
//    recurrence for one token and for many alike: the chunked form of the
//    CPU (matrix products) pays off on tensor cores, which nothing here has
//    been measured on yet;
//  - the gated norm: one block per head row, as the RMSNorm kernel.
// The state sits column-major in shared memory (S[key][value row]), so the
// threads of a warp read consecutive words.  Everything that is arithmetic
// is __host__ __device__ and hs__gpu_deltanet_emulate runs it in the
// kernels' decomposition on the CPU.
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "gpu_kernels/common.cuh"
#include "gpu_kernels/flat.cuh"
#include "gpu_kernels/gpu-kernels.h"

#define GNORM_THREADS 128

HD static inline int dn_channels(const struct hs_gpu_dn *a)
{
	return (2 * a->n_k + a->n_v) * a->dh;
}

HD static inline float dn_silu(float x)
{
	return x / (1.0f + expf(-x));
}

// ---- convolution: channel c, all tokens, then its state --------------------------

HD static inline void dn_conv_item(const struct hs_gpu_dn *a, long long c)
{
	const int C = dn_channels(a), kc = a->kc;
	const float *w = a->conv_w + (size_t)c * kc;
	float *st = a->conv_state;
	for (int t = 0; t < a->n; t++) {
		float s = 0;
		for (int j = 0; j < kc; j++) {
			const int tau = t - kc + 1 + j; // input time; < 0: the state
			s += w[j] * (tau < 0 ? st[(size_t)(kc - 1 + tau) * C + c] : a->qkv[(size_t)tau * C + c]);
		}
		a->conv[(size_t)t * C + c] = dn_silu(s);
	}
	// the last kc-1 inputs, oldest first; slot j reads slot n + j >= j of
	// the old state, not yet overwritten in this order
	for (int j = 0; j < kc - 1; j++) {
		const int tau = a->n - (kc - 1) + j;
		st[(size_t)j * C + c] = tau < 0 ? st[(size_t)(kc - 1 + tau) * C + c] : a->qkv[(size_t)tau * C + c];
	}
}

// ---- prep: unit q and k heads, decay and beta ------------------------------------

HD static inline void dn_prep_item(const struct hs_gpu_dn *a, long long i)
{
	const int per = 2 * a->n_k + a->n_v;
	const int t = (int)(i / per), r = (int)(i % per);
	if (r < 2 * a->n_k) {
		float *x = a->conv + (size_t)t * dn_channels(a) + (size_t)r * a->dh;
		float s = 0;
		for (int k = 0; k < a->dh; k++)
			s += x[k] * x[k];
		const float len = sqrtf(s), scale = 1.0f / (len > a->eps ? len : a->eps);
		for (int k = 0; k < a->dh; k++)
			x[k] *= scale;
	} else {
		const int h = r - 2 * a->n_k;
		const size_t o = (size_t)t * a->n_v + h;
		const float x = a->alpha[o] + a->dt_bias[h];
		a->g[o] = (x > 20.0f ? x : log1pf(expf(x))) * a->a[h]; // ggml's softplus threshold
		a->b[o] = 1.0f / (1.0f + expf(-a->beta[o]));
	}
}

// ---- the delta rule ----------------------------------------------------------------

// Token t's key and query of value head h (key head h mod n_k) into shared
// k and q, thread tid of nthr.
HD static inline void dn_stage(const struct hs_gpu_dn *a, int h, int t, float *k, float *q, int tid, int nthr)
{
	const float *row = a->conv + (size_t)t * dn_channels(a);
	const int kh = h % a->n_k;
	for (int j = tid; j < a->dh; j += nthr) {
		q[j] = row[(size_t)kh * a->dh + j];
		k[j] = row[(size_t)(a->n_k + kh) * a->dh + j];
	}
}

// Value row i of a head for one token: S *= e^g; u = b (v - S k); S += u k^T;
// returns scale S q.  S column-major: S[j * dh + i].
HD static inline float dn_row(float *S, int dh, const float *k, const float *q, int i, float v, float decay,
			      float beta, float scale)
{
	float ks = 0;
	for (int j = 0; j < dh; j++) {
		const float s = S[(size_t)j * dh + i] * decay;
		S[(size_t)j * dh + i] = s;
		ks += s * k[j];
	}
	const float u = beta * (v - ks);
	float o = 0;
	for (int j = 0; j < dh; j++) {
		const float s = S[(size_t)j * dh + i] + u * k[j];
		S[(size_t)j * dh + i] = s;
		o += s * q[j];
	}
	return scale * o;
}

// Thread tid's share of token t for value head h, after dn_stage.
HD static inline void dn_token(const struct hs_gpu_dn *a, float *S, const float *k, const float *q, int h, int t, int i)
{
	if (i >= a->dh)
		return;
	const size_t o = (size_t)t * a->n_v + h;
	const float v = a->conv[(size_t)t * dn_channels(a) + (size_t)(2 * a->n_k + h) * a->dh + i];
	a->out[(size_t)t * a->n_v * a->dh + (size_t)h * a->dh + i] =
		dn_row(S, a->dh, k, q, i, v, expf(a->g[o]), a->b[o], 1.0f / sqrtf((float)a->dh));
}

// The head's state between global memory (row-major: value row, key
// column) and shared memory (column-major), thread tid of nthr.
HD static inline void dn_state_move(float *global, float *S, int dh, int to_shared, int tid, int nthr)
{
	for (int e = tid; e < dh * dh; e += nthr) {
		const int i = e / dh, j = e % dh;
		if (to_shared)
			S[(size_t)j * dh + i] = global[e];
		else
			global[e] = S[(size_t)j * dh + i];
	}
}

static size_t dn_shared_bytes(int dh)
{
	return sizeof(float) * ((size_t)dh * dh + 2 * (size_t)dh);
}

static int dn_threads(int dh)
{
	return (dh + 31) / 32 * 32;
}

__global__ void hs_dn_rule_kernel(struct hs_gpu_dn a)
{
	extern __shared__ float sh[];
	const int h = blockIdx.x, tid = threadIdx.x, nthr = blockDim.x;
	float *S = sh, *k = sh + (size_t)a.dh * a.dh, *q = k + a.dh;
	float *state = a.state + (size_t)h * a.dh * a.dh;
	dn_state_move(state, S, a.dh, 1, tid, nthr);
	for (int t = 0; t < a.n; t++) {
		dn_stage(&a, h, t, k, q, tid, nthr);
		__syncthreads(); // the state and this token's key and query in place
		dn_token(&a, S, k, q, h, t, tid);
		__syncthreads(); // every row done before the next token's key overwrites this one
	}
	dn_state_move(state, S, a.dh, 0, tid, nthr);
}

// ---- the gated norm ------------------------------------------------------------------

HD static inline float dn_gnorm_part(const float *x, int dh, int tid, int nthr)
{
	float s = 0;
	for (int i = tid; i < dh; i += nthr)
		s += x[i] * x[i];
	return s;
}

HD static inline void dn_gnorm_apply(float *x, const float *z, int dh, const float *w, float inv, int tid, int nthr)
{
	for (int i = tid; i < dh; i += nthr)
		x[i] = x[i] * inv * w[i] * dn_silu(z[i]);
}

__global__ void hs_dn_gnorm_kernel(struct hs_gpu_dn a)
{
	__shared__ float part[GNORM_THREADS / 32];
	const int tid = threadIdx.x;
	float *x = a.out + (size_t)blockIdx.x * a.dh;
	float s = warp_sum(dn_gnorm_part(x, a.dh, tid, GNORM_THREADS));
	if (tid % 32 == 0)
		part[tid / 32] = s;
	__syncthreads(); // every partial sum in, and every read of x done
	s = 0;
	for (int w = 0; w < GNORM_THREADS / 32; w++)
		s += part[w];
	dn_gnorm_apply(x, a.z + (size_t)blockIdx.x * a.dh, a.dh, a.norm, 1.0f / sqrtf(s / (float)a.dh + a.eps), tid,
		       GNORM_THREADS);
}

// ---- launch and emulation --------------------------------------------------------------

extern "C" size_t hs__gpu_deltanet_shared_bytes(int head_dim)
{
	return dn_shared_bytes(head_dim);
}

extern "C" cudaError_t hs__gpu_deltanet(const struct hs_gpu_dn *a, cudaStream_t stream)
{
	if (a->n <= 0)
		return cudaSuccess;
	cudaError_t e = flat_launch<struct hs_gpu_dn, dn_conv_item>(a, dn_channels(a), stream);
	if (e != cudaSuccess ||
	    (e = flat_launch<struct hs_gpu_dn, dn_prep_item>(a, (long long)a->n * (2 * a->n_k + a->n_v), stream)) !=
		    cudaSuccess)
		return e;
	const size_t shm = dn_shared_bytes(a->dh);
	if (shm > 48 * 1024 && (e = cudaFuncSetAttribute(hs_dn_rule_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
							  (int)shm)) != cudaSuccess)
		return e;
	hs_dn_rule_kernel<<<(unsigned)a->n_v, (unsigned)dn_threads(a->dh), shm, stream>>>(*a);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	hs_dn_gnorm_kernel<<<(unsigned)((long long)a->n * a->n_v), GNORM_THREADS, 0, stream>>>(*a);
	return cudaGetLastError();
}

extern "C" int hs__gpu_deltanet_emulate(const struct hs_gpu_dn *a)
{
	if (a->n <= 0)
		return 0;
	float *sh = (float *)malloc(dn_shared_bytes(a->dh));
	if (!sh)
		return -ENOMEM;
	flat_emulate<struct hs_gpu_dn, dn_conv_item>(a, dn_channels(a));
	flat_emulate<struct hs_gpu_dn, dn_prep_item>(a, (long long)a->n * (2 * a->n_k + a->n_v));
	const int nthr = dn_threads(a->dh);
	float *S = sh, *k = sh + (size_t)a->dh * a->dh, *q = k + a->dh;
	for (int h = 0; h < a->n_v; h++) {
		float *state = a->state + (size_t)h * a->dh * a->dh;
		for (int tid = 0; tid < nthr; tid++)
			dn_state_move(state, S, a->dh, 1, tid, nthr);
		for (int t = 0; t < a->n; t++) {
			for (int tid = 0; tid < nthr; tid++)
				dn_stage(a, h, t, k, q, tid, nthr);
			for (int tid = 0; tid < nthr; tid++)
				dn_token(a, S, k, q, h, t, tid);
		}
		for (int tid = 0; tid < nthr; tid++)
			dn_state_move(state, S, a->dh, 0, tid, nthr);
	}
	for (long long r = 0; r < (long long)a->n * a->n_v; r++) {
		float *x = a->out + (size_t)r * a->dh;
		float s = 0;
		for (int tid = 0; tid < GNORM_THREADS; tid++)
			s += dn_gnorm_part(x, a->dh, tid, GNORM_THREADS);
		const float inv = 1.0f / sqrtf(s / (float)a->dh + a->eps);
		for (int tid = 0; tid < GNORM_THREADS; tid++)
			dn_gnorm_apply(x, a->z + (size_t)r * a->dh, a->dh, a->norm, inv, tid, GNORM_THREADS);
	}
	free(sh);
	return 0;
}
