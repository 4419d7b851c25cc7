// Dense ops of the whole model's forward pass on CUDA: matrix products
// with the dense weights, RMSNorm, NEOX RoPE from a per-ubatch table, the
// K/V write into F16 or Q8_0 cells, attention over the cache (decode split
// over the cells and merged, as flash-decoding does; prefill one item per
// token and KV head), and the residual add.  The semantics are the CPU ops'
// (cpu_kernels/dense.h, attention.h).
//
// Kept simple on purpose (nothing here has run on a GPU yet, so nothing is
// tuned): no shared-memory staging in the tiles, attention reads K/V rows
// once per query head of a group (from L1/L2 after the first).  Matrix
// products:
//  - up to HS_GPU_GEMV_MAX_TOKENS tokens (decode): one warp per weight row
//    reads the row once for all tokens (memory bound: that is the point);
//  - more tokens, F32/F16/BF16 weights: cuBLAS when it was found (F16/BF16
//    activations rounded to the weights' type, as llama.cpp's CUDA backend
//    does; F32 in f32 without TF32), else the tile kernel;
//  - more tokens, Q8_0/MXFP4 weights: our own tile kernel, 64 rows x 32
//    tokens per block, int8 dp4a on the Q8_0-quantized activations.  Not
//    dequantize-to-f16-then-cuBLAS: that needs the whole dequantized matrix
//    in scratch (1.1 GiB for gpt-oss's 201088 x 2880 output matrix) or a
//    chunking loop, rounds the activations to f16 instead of the Q8_0 the
//    CPU op uses (so the two backends would differ), and cannot be checked
//    by the emulation test; which one is faster on a given GPU is for
//    bench/gpu-check.sh to measure.
//
// Every piece of arithmetic is a __host__ __device__ function, and the
// *_emulate entries run the kernels' decomposition (lanes, warps, tiles,
// cell ranges) with it on the CPU; what they cannot check is launch
// geometry, shuffles and cuBLAS itself.
#include <cublas_v2.h>
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_kernels/common.cuh"
#include "gpu_kernels/gpu-kernels.h"

#define GEMV_WARPS 4        // rows per GEMV block
#define TILE_ROWS 64
#define TILE_TOKENS 32
#define TILE_THREADS 256    // 16 x 16 threads of 4 rows x 2 tokens
#define NORM_THREADS 128
#define ATTN_WARPS 4
#define ATTN_MAX_NV 16      // values per lane: head_dim up to 512

// ---- element access ----------------------------------------------------------

// Value c of a row of F32, F16 or BF16 (natural alignment).
HD static inline float elem_at(int type, const unsigned char *row, int c)
{
	if (type == TYPE_F32)
		return ((const float *)row)[c];
	unsigned short h = ((const unsigned short *)row)[c];
	return type == TYPE_F16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
}

// A quantized block as 8 words of 4 int8 values and its scale.  Q8_0 blocks
// (34 bytes) are read as 2-byte words: they are 2-byte aligned wherever a
// row of them starts at an even address.
HD static inline float block_words(int type, const unsigned char *blk, int w[8])
{
	if (type == TYPE_Q8_0) {
		const unsigned short *u = (const unsigned short *)blk;
		for (int j = 0; j < 8; j++)
			w[j] = (int)((unsigned)u[1 + 2 * j] | ((unsigned)u[2 + 2 * j] << 16));
		return half_bits_to_float(u[0]);
	}
	int8_t v[QK];
	float d = unpack_block(type, blk, v);
	memcpy(w, v, QK);
	return d;
}

HD static inline int dot_words(const int *a, const int *b)
{
	int s = 0;
#ifdef __CUDA_ARCH__
	for (int j = 0; j < 8; j++)
		s = __dp4a(a[j], b[j], s);
#else
	for (int j = 0; j < 8; j++)
		for (int k = 0; k < 4; k++)
			s += (int)(int8_t)(a[j] >> (8 * k)) * (int)(int8_t)(b[j] >> (8 * k));
#endif
	return s;
}

// ---- matrix products -----------------------------------------------------------

// scratch.h's hs__gpu_type_quantized, callable from device code
HD static inline int quantized(int type)
{
	return type == TYPE_Q8_0 || type == TYPE_MXFP4;
}

struct mm_ctx {
	struct hs_gpu_matmul a;
	const unsigned char *xq; // [n][cols / 32] Q8_0 blocks (quantized weights)
	size_t xq_row;           // bytes per token
};

HD static inline const unsigned char *w_row(const struct hs_gpu_matmul *a, int r)
{
	return a->w + (size_t)r * a->row_bytes;
}

// Lane `lane`'s part of rows r's products with every token (GEMV): the
// lane takes blocks (or values) lane, lane + 32, ...
HD static inline void gemv_lane(const struct mm_ctx *m, int r, int lane, float acc[HS_GPU_GEMV_MAX_TOKENS])
{
	const struct hs_gpu_matmul *a = &m->a;
	const unsigned char *row = w_row(a, r);
	for (int t = 0; t < HS_GPU_GEMV_MAX_TOKENS; t++)
		acc[t] = 0;
	if (quantized(a->type)) {
		const int nb = a->cols / QK, bb = block_bytes(a->type);
		for (int b = lane; b < nb; b += 32) {
			int wv[8], xv[8];
			const float ws = block_words(a->type, row + (size_t)b * bb, wv);
			for (int t = 0; t < HS_GPU_GEMV_MAX_TOKENS; t++) { // constant trip count: acc stays in registers
				if (t >= a->n)
					break;
				const float xs = block_words(TYPE_Q8_0, m->xq + t * m->xq_row + (size_t)b * Q8_BYTES, xv);
				acc[t] += (float)dot_words(wv, xv) * ws * xs;
			}
		}
		return;
	}
	for (int c = lane; c < a->cols; c += 32) {
		const float w = elem_at(a->type, row, c);
		for (int t = 0; t < HS_GPU_GEMV_MAX_TOKENS; t++) {
			if (t >= a->n)
				break;
			acc[t] += w * a->x[(size_t)t * a->x_stride + c];
		}
	}
}

HD static inline void put_y(const struct hs_gpu_matmul *a, int t, int r, float v)
{
	a->y[(size_t)t * a->y_stride + r] = v + (a->bias ? a->bias[r] : 0.0f);
}

// Thread tid (0..255) of the tile at (row0, tok0): 4 rows x 2 tokens.
HD static inline void tile_thread(const struct mm_ctx *m, int row0, int tok0, int tid)
{
	const struct hs_gpu_matmul *a = &m->a;
	const int tr = tid / 16, tp = tid % 16;
	int rows[4], toks[2];
	float acc[4][2] = { { 0 } };
	for (int i = 0; i < 4; i++)
		rows[i] = row0 + tr * 4 + i;
	for (int j = 0; j < 2; j++)
		toks[j] = tok0 + tp * 2 + j;
	if (rows[0] >= a->rows || toks[0] >= a->n)
		return;
	if (quantized(a->type)) {
		const int nb = a->cols / QK, bb = block_bytes(a->type);
		for (int b = 0; b < nb; b++) {
			int xv[2][8], wv[8];
			float xs[2] = { 0, 0 };
			for (int j = 0; j < 2; j++)
				if (toks[j] < a->n)
					xs[j] = block_words(TYPE_Q8_0, m->xq + toks[j] * m->xq_row + (size_t)b * Q8_BYTES, xv[j]);
			for (int i = 0; i < 4; i++) {
				if (rows[i] >= a->rows)
					continue;
				const float ws = block_words(a->type, w_row(a, rows[i]) + (size_t)b * bb, wv);
				for (int j = 0; j < 2; j++)
					if (toks[j] < a->n)
						acc[i][j] += (float)dot_words(wv, xv[j]) * ws * xs[j];
			}
		}
	} else {
		for (int c = 0; c < a->cols; c++) {
			float xv[2] = { 0, 0 };
			for (int j = 0; j < 2; j++)
				if (toks[j] < a->n)
					xv[j] = a->x[(size_t)toks[j] * a->x_stride + c];
			for (int i = 0; i < 4; i++) {
				if (rows[i] >= a->rows)
					continue;
				const float w = elem_at(a->type, w_row(a, rows[i]), c);
				acc[i][0] += w * xv[0];
				acc[i][1] += w * xv[1];
			}
		}
	}
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			if (rows[i] < a->rows && toks[j] < a->n)
				put_y(a, toks[j], rows[i], acc[i][j]);
}

// x[t] rounded to the weights' 16-bit type, [n][cols] (the cuBLAS path)
HD static inline unsigned short x_to_16(int type, float v)
{
	return type == TYPE_F16 ? float_to_half_bits(v) : float_to_bf16_bits(v);
}

__global__ void hs_mm_quantize_kernel(const float *x, size_t x_stride, int nb, long long total, unsigned char *xq)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i >= total)
		return;
	long long t = i / nb, b = i % nb;
	quantize_block(x + t * x_stride + b * QK, xq + i * Q8_BYTES);
}

// the row warp w of GEMV block bx computes
HD static inline int gemv_row(int bx, int w)
{
	return bx * GEMV_WARPS + w;
}

// the first row and token of tile block (bx, by)
HD static inline void tile_origin(int bx, int by, int *row0, int *tok0)
{
	*row0 = bx * TILE_ROWS;
	*tok0 = by * TILE_TOKENS;
}

__global__ void hs_gemv_kernel(struct mm_ctx m)
{
	const int lane = threadIdx.x % 32, r = gemv_row(blockIdx.x, threadIdx.x / 32);
	if (r >= m.a.rows)
		return;
	float acc[HS_GPU_GEMV_MAX_TOKENS];
	gemv_lane(&m, r, lane, acc);
	for (int t = 0; t < HS_GPU_GEMV_MAX_TOKENS; t++) {
		if (t >= m.a.n) // the same on every lane: the shuffles see the whole warp
			break;
		float v = warp_sum(acc[t]);
		if (lane == 0)
			put_y(&m.a, t, r, v);
	}
}

__global__ void hs_mm_tile_kernel(struct mm_ctx m)
{
	int row0, tok0;
	tile_origin(blockIdx.x, blockIdx.y, &row0, &tok0);
	tile_thread(&m, row0, tok0, threadIdx.x);
}

__global__ void hs_x16_kernel(const float *x, size_t x_stride, int cols, long long total, int type, unsigned short *out)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < total)
		out[i] = x_to_16(type, x[(i / cols) * x_stride + i % cols]);
}

__global__ void hs_bias_kernel(float *y, size_t y_stride, int rows, long long total, const float *bias)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < total)
		y[(i / rows) * y_stride + i % rows] += bias[i % rows];
}

static unsigned blocks_for(long long total, int per)
{
	return (unsigned)((total + per - 1) / per);
}

// Element-wise ops: one thread per item i < total, ITEM(args, i) doing the
// work, launched or emulated item by item.
template <class A, void (*ITEM)(const A *, long long)> __global__ void hs_flat_kernel(A a, long long total)
{
	long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
	if (i < total)
		ITEM(&a, i);
}

template <class A, void (*ITEM)(const A *, long long)>
static cudaError_t flat_launch(const A *a, long long total, cudaStream_t stream)
{
	if (total <= 0)
		return cudaSuccess;
	hs_flat_kernel<A, ITEM><<<blocks_for(total, 256), 256, 0, stream>>>(*a, total);
	return cudaGetLastError();
}

template <class A, void (*ITEM)(const A *, long long)> static void flat_emulate(const A *a, long long total)
{
	for (long long i = 0; i < total; i++)
		ITEM(a, i);
}

extern "C" size_t hs__gpu_matmul_scratch_bytes(int type, int cols, int n)
{
	return hs__gpu_matmul_scratch_size(type, cols, n);
}

static struct mm_ctx mm_setup(const struct hs_gpu_matmul *a, void *scratch)
{
	struct mm_ctx m;
	m.a = *a;
	m.xq = (const unsigned char *)scratch;
	m.xq_row = (size_t)(a->cols / QK) * Q8_BYTES;
	return m;
}

static enum hs_gpu_mm_path mm_pick(const struct hs_gpu_matmul *a, int have_blas)
{
	if (a->n <= HS_GPU_GEMV_MAX_TOKENS)
		return HS_GPU_MM_GEMV;
	return !hs__gpu_type_quantized(a->type) && have_blas ? HS_GPU_MM_BLAS : HS_GPU_MM_TILE;
}

// ---- cuBLAS, found at run time ------------------------------------------------------

// cublasGemmEx as libcublas exports it (the header adds a C++ overload);
// the cast checks the signature against the header without referencing
// the symbol, which would link libcublas
typedef cublasStatus_t (*gemm_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
				  const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
				  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
typedef decltype(static_cast<gemm_fn>(&cublasGemmEx)) gemm_checked;

static struct {
	void *lib;
	char why[200];
	decltype(&cublasCreate_v2) create;
	decltype(&cublasDestroy_v2) destroy;
	decltype(&cublasSetStream_v2) set_stream;
	gemm_checked gemm;
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

static void blas_open(void)
{
	const char *env = getenv("HOTSET_CUBLAS");
	char name[64], path[512];
	if (env && strcmp(env, "0") == 0) {
		snprintf(blas.why, sizeof blas.why, "turned off by HOTSET_CUBLAS=0");
		return;
	}
	snprintf(name, sizeof name, "libcublas.so.%d", CUDART_VERSION / 1000);
#ifdef HS_CUDA_LIBDIR
	snprintf(path, sizeof path, "%s/%s", HS_CUDA_LIBDIR, name);
	blas.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
#else
	(void)path;
#endif
	if (!blas.lib)
		blas.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!blas.lib) {
		const char *e = dlerror();
		snprintf(blas.why, sizeof blas.why, "%s not found (%s)", name, e ? e : "?");
		return;
	}
	blas.create = (decltype(blas.create))dlsym(blas.lib, "cublasCreate_v2");
	blas.destroy = (decltype(blas.destroy))dlsym(blas.lib, "cublasDestroy_v2");
	blas.set_stream = (decltype(blas.set_stream))dlsym(blas.lib, "cublasSetStream_v2");
	blas.gemm = (decltype(blas.gemm))dlsym(blas.lib, "cublasGemmEx");
	if (!blas.create || !blas.destroy || !blas.set_stream || !blas.gemm) {
		snprintf(blas.why, sizeof blas.why, "%s lacks cublasGemmEx or its companions", name);
		dlclose(blas.lib);
		blas.lib = NULL;
	}
}

extern "C" int hs__gpu_blas_load(char *why, size_t why_len)
{
	pthread_once(&blas_once, blas_open);
	if (!blas.lib && why && why_len)
		snprintf(why, why_len, "%s", blas.why);
	return blas.lib ? 0 : -ENOENT;
}

extern "C" int hs__gpu_blas_create(void **handle)
{
	*handle = NULL;
	if (hs__gpu_blas_load(NULL, 0))
		return (int)CUBLAS_STATUS_NOT_INITIALIZED;
	cublasHandle_t h;
	cublasStatus_t st = blas.create(&h);
	if (st == CUBLAS_STATUS_SUCCESS)
		*handle = h;
	return (int)st;
}

extern "C" void hs__gpu_blas_destroy(void *handle)
{
	if (handle && blas.lib)
		blas.destroy((cublasHandle_t)handle);
}

// y = W x through cuBLAS: column-major, W (row_bytes apart) is the
// transpose of a cols x rows matrix, x a cols x n one, y rows x n.
static cudaError_t mm_blas(const struct hs_gpu_matmul *a, void *scratch, cublasHandle_t h, int *status,
			   cudaStream_t stream)
{
	const float one = 1.0f, zero = 0.0f;
	const int esz = a->type == TYPE_F32 ? 4 : 2;
	const void *b = a->x;
	int ldb = (int)a->x_stride;
	cudaDataType_t t = a->type == TYPE_F32 ? CUDA_R_32F : a->type == TYPE_F16 ? CUDA_R_16F : CUDA_R_16BF;
	cudaError_t e;
	if (a->type != TYPE_F32) {
		long long total = (long long)a->n * a->cols;
		hs_x16_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(a->x, a->x_stride, a->cols, total, a->type,
									(unsigned short *)scratch);
		if ((e = cudaGetLastError()) != cudaSuccess)
			return e;
		b = scratch;
		ldb = a->cols;
	}
	cublasStatus_t st = blas.set_stream(h, stream);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = blas.gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, a->rows, a->n, a->cols, &one, a->w, t,
			       (int)(a->row_bytes / esz), b, t, ldb, &zero, a->y, CUDA_R_32F, (int)a->y_stride,
			       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (st != CUBLAS_STATUS_SUCCESS) {
		*status = (int)st;
		return cudaErrorUnknown;
	}
	if (a->bias) {
		long long total = (long long)a->n * a->rows;
		hs_bias_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(a->y, a->y_stride, a->rows, total, a->bias);
	}
	return cudaGetLastError();
}

extern "C" cudaError_t hs__gpu_matmul(const struct hs_gpu_matmul *a, void *scratch, void *blas_handle,
				      int *blas_status, cudaStream_t stream)
{
	if (a->n <= 0 || a->rows <= 0)
		return cudaSuccess;
	struct mm_ctx m = mm_setup(a, scratch);
	const enum hs_gpu_mm_path p = mm_pick(a, blas_handle != NULL);
	cudaError_t e;
	if (p == HS_GPU_MM_BLAS)
		return mm_blas(a, scratch, (cublasHandle_t)blas_handle, blas_status, stream);
	if (hs__gpu_type_quantized(a->type)) {
		const int nb = a->cols / QK;
		const long long total = (long long)a->n * nb;
		hs_mm_quantize_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(a->x, a->x_stride, nb, total,
										   (unsigned char *)scratch);
		if ((e = cudaGetLastError()) != cudaSuccess)
			return e;
	}
	if (p == HS_GPU_MM_GEMV) {
		hs_gemv_kernel<<<blocks_for(a->rows, GEMV_WARPS), GEMV_WARPS * 32, 0, stream>>>(m);
	} else {
		dim3 g(blocks_for(a->rows, TILE_ROWS), blocks_for(a->n, TILE_TOKENS));
		hs_mm_tile_kernel<<<g, TILE_THREADS, 0, stream>>>(m);
	}
	return cudaGetLastError();
}

extern "C" void hs__gpu_matmul_emulate(const struct hs_gpu_matmul *a, void *scratch, enum hs_gpu_mm_path path)
{
	if (a->n <= 0 || a->rows <= 0)
		return;
	struct mm_ctx m = mm_setup(a, scratch);
	if (path == HS_GPU_MM_AUTO)
		path = mm_pick(a, 0);
	if (path == HS_GPU_MM_GEMV && a->n > HS_GPU_GEMV_MAX_TOKENS)
		path = HS_GPU_MM_TILE;
	if (path == HS_GPU_MM_BLAS) {
		// what the cuBLAS path changes: the activations in the weights'
		// 16-bit type; the product itself (cuBLAS's) taken as exact
		for (int t = 0; t < a->n; t++) {
			unsigned short *x16 = (unsigned short *)scratch + (size_t)t * a->cols;
			for (int c = 0; c < a->cols; c++)
				x16[c] = a->type == TYPE_F32 ? 0 : x_to_16(a->type, a->x[(size_t)t * a->x_stride + c]);
			for (int r = 0; r < a->rows; r++) {
				double s = 0;
				for (int c = 0; c < a->cols; c++) {
					const float xv = a->type == TYPE_F32 ? a->x[(size_t)t * a->x_stride + c]
									     : a->type == TYPE_F16 ? half_bits_to_float(x16[c])
												   : bf16_bits_to_float(x16[c]);
					s += (double)elem_at(a->type, w_row(a, r), c) * xv;
				}
				put_y(a, t, r, (float)s);
			}
		}
		return;
	}
	if (hs__gpu_type_quantized(a->type)) {
		const int nb = a->cols / QK;
		for (long long i = 0; i < (long long)a->n * nb; i++)
			quantize_block(a->x + (i / nb) * a->x_stride + (i % nb) * QK, (unsigned char *)scratch + i * Q8_BYTES);
	}
	// the launches' grids, block by block
	if (path == HS_GPU_MM_GEMV) {
		for (int bx = 0; bx < (int)blocks_for(a->rows, GEMV_WARPS); bx++)
			for (int w = 0; w < GEMV_WARPS; w++) {
				const int r = gemv_row(bx, w);
				if (r >= a->rows)
					continue;
				float sum[HS_GPU_GEMV_MAX_TOKENS] = { 0 }, acc[HS_GPU_GEMV_MAX_TOKENS];
				for (int lane = 0; lane < 32; lane++) {
					gemv_lane(&m, r, lane, acc);
					for (int t = 0; t < a->n; t++)
						sum[t] += acc[t];
				}
				for (int t = 0; t < a->n; t++)
					put_y(a, t, r, sum[t]);
			}
		return;
	}
	for (int bx = 0; bx < (int)blocks_for(a->rows, TILE_ROWS); bx++)
		for (int by = 0; by < (int)blocks_for(a->n, TILE_TOKENS); by++) {
			int row0, tok0;
			tile_origin(bx, by, &row0, &tok0);
			for (int tid = 0; tid < TILE_THREADS; tid++)
				tile_thread(&m, row0, tok0, tid);
		}
}

// ---- RMSNorm --------------------------------------------------------------------

HD static inline const float *norm_x(const struct hs_gpu_norm *a, int row)
{
	return a->x + (size_t)(row / a->n_head) * a->x_stride + (size_t)(row % a->n_head) * a->dim;
}

HD static inline float *norm_y(const struct hs_gpu_norm *a, int row)
{
	return a->y + (size_t)(row / a->n_head) * a->y_stride + (size_t)(row % a->n_head) * a->dim;
}

// thread tid of nthr's share of a row's sum of squares
HD static inline float norm_part(const float *x, int dim, int tid, int nthr)
{
	float s = 0;
	for (int i = tid; i < dim; i += nthr)
		s += x[i] * x[i];
	return s;
}

HD static inline float norm_scale(float sumsq, int dim, float eps)
{
	return 1.0f / sqrtf(sumsq / (float)dim + eps);
}

HD static inline void norm_apply(const float *x, float *y, int dim, const float *w, float scale, int tid, int nthr)
{
	for (int i = tid; i < dim; i += nthr)
		y[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

__global__ void hs_rmsnorm_kernel(struct hs_gpu_norm a)
{
	__shared__ float part[NORM_THREADS / 32];
	const int row = blockIdx.x, tid = threadIdx.x;
	const float *x = norm_x(&a, row);
	float s = warp_sum(norm_part(x, a.dim, tid, NORM_THREADS));
	if (tid % 32 == 0)
		part[tid / 32] = s;
	__syncthreads();
	s = 0;
	for (int w = 0; w < NORM_THREADS / 32; w++)
		s += part[w];
	norm_apply(x, norm_y(&a, row), a.dim, a.w, norm_scale(s, a.dim, a.eps), tid, NORM_THREADS);
}

extern "C" cudaError_t hs__gpu_rmsnorm(const struct hs_gpu_norm *a, cudaStream_t stream)
{
	long long rows = (long long)a->n * a->n_head;
	if (rows <= 0)
		return cudaSuccess;
	hs_rmsnorm_kernel<<<(unsigned)rows, NORM_THREADS, 0, stream>>>(*a);
	return cudaGetLastError();
}

extern "C" void hs__gpu_rmsnorm_emulate(const struct hs_gpu_norm *a)
{
	for (int row = 0; row < a->n * a->n_head; row++) {
		const float *x = norm_x(a, row);
		float s = 0;
		for (int tid = 0; tid < NORM_THREADS; tid++)
			s += norm_part(x, a->dim, tid, NORM_THREADS);
		const float scale = norm_scale(s, a->dim, a->eps);
		for (int tid = 0; tid < NORM_THREADS; tid++)
			norm_apply(x, norm_y(a, row), a->dim, a->w, scale, tid, NORM_THREADS);
	}
}

// ---- RoPE -----------------------------------------------------------------------

// pair i of item (t, h) of the flat index
HD static inline void rope_pair(const struct hs_gpu_rope *a, long long i)
{
	const int half = a->n_rot / 2;
	const long long th = i / half;
	const int p = (int)(i % half), t = (int)(th / a->n_head), h = (int)(th % a->n_head);
	float *x = a->x + (size_t)t * a->x_stride + (size_t)h * a->head_dim;
	const float *cs = a->cs + (size_t)t * a->n_rot;
	const float c = cs[p], s = cs[half + p], x0 = x[p], x1 = x[p + half];
	x[p] = x0 * c - x1 * s;
	x[p + half] = x0 * s + x1 * c;
}

static long long rope_total(const struct hs_gpu_rope *a)
{
	return (long long)a->n * a->n_head * (a->n_rot / 2);
}

extern "C" cudaError_t hs__gpu_rope(const struct hs_gpu_rope *a, cudaStream_t stream)
{
	return flat_launch<struct hs_gpu_rope, rope_pair>(a, rope_total(a), stream);
}

extern "C" void hs__gpu_rope_emulate(const struct hs_gpu_rope *a)
{
	flat_emulate<struct hs_gpu_rope, rope_pair>(a, rope_total(a));
}

// ---- K/V write ---------------------------------------------------------------------

// item i: one value (F16) or one 32-value block (Q8_0) of token t, head h
HD static inline void kv_item(const struct hs_gpu_kv_store *a, long long i)
{
	const int per = a->type == TYPE_Q8_0 ? a->head_dim / QK : a->head_dim;
	const long long th = i / per;
	const int j = (int)(i % per), t = (int)(th / a->n_head_kv), h = (int)(th % a->n_head_kv);
	const float *src = a->x + (size_t)t * a->x_stride + (size_t)h * a->head_dim;
	unsigned char *dst = a->dst + (size_t)a->cells[t] * a->cell_bytes + (size_t)h * a->head_bytes;
	if (a->type == TYPE_Q8_0)
		quantize_block(src + (size_t)j * QK, dst + (size_t)j * Q8_BYTES);
	else
		((unsigned short *)dst)[j] = float_to_half_bits(src[j]);
	if (a->cell_pos && h == 0 && j == 0)
		a->cell_pos[a->cells[t]] = a->pos[t];
}

static long long kv_total(const struct hs_gpu_kv_store *a)
{
	return (long long)a->n * a->n_head_kv * (a->type == TYPE_Q8_0 ? a->head_dim / QK : a->head_dim);
}

extern "C" cudaError_t hs__gpu_kv_store(const struct hs_gpu_kv_store *a, cudaStream_t stream)
{
	return flat_launch<struct hs_gpu_kv_store, kv_item>(a, kv_total(a), stream);
}

extern "C" void hs__gpu_kv_store_emulate(const struct hs_gpu_kv_store *a)
{
	flat_emulate<struct hs_gpu_kv_store, kv_item>(a, kv_total(a));
}

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

// ---- y += x --------------------------------------------------------------------------

struct add_args {
	float *y;
	const float *x;
};

HD static inline void add_item(const struct add_args *a, long long i)
{
	a->y[i] += a->x[i];
}

extern "C" cudaError_t hs__gpu_add(float *y, const float *x, size_t n, cudaStream_t stream)
{
	const struct add_args a = { y, x };
	return flat_launch<struct add_args, add_item>(&a, (long long)n, stream);
}

extern "C" void hs__gpu_add_emulate(float *y, const float *x, size_t n)
{
	const struct add_args a = { y, x };
	flat_emulate<struct add_args, add_item>(&a, (long long)n);
}
