// Dense ops of the whole model's forward pass on CUDA: matrix products
// with the dense weights, RMSNorm, NEOX RoPE from a per-ubatch table, the
// K/V write into F16 or Q8_0 cells, and the residual add (attention is in
// attention.cu).  The semantics are the CPU ops' (cpu_kernels/dense.h,
// attention.h).
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
//  - more tokens, block-type weights (Q8_0, MXFP4, the K-quants, IQ4_XS/NL,
//    Q4_0..Q5_1 on plain rows, quants.cuh): our own tile kernel, 64 rows x 32
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
#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_kernels/common.cuh"
#include "gpu_kernels/quants.cuh"
#include "gpu_kernels/flat.cuh"
#include "gpu_kernels/gpu-kernels.h"

#define GEMV_WARPS 4        // rows per GEMV block
#define TILE_ROWS 64
#define TILE_TOKENS 32
#define TILE_THREADS 256    // 16 x 16 threads of 4 rows x 2 tokens
#define NORM_THREADS 128

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

// scratch.h's hs__gpu_type_quantized, callable from device code: every
// block type takes Q8_0 activations
HD static inline int quantized(int type)
{
	return type_block(type);
}

// Row r's column block b against a Q8_0 activation block (xv words, scale
// xs); wv, ws, s, mn: the weight block as weight_block() decoded it.
struct wblock {
	int wv[8];
	float ws;          // Q8_0, MXFP4: the block's scale
	float s[2], mn[2]; // the other types: per-half scales and mins
};

HD static inline void weight_block(int type, const unsigned char *row, int b, struct wblock *w)
{
	if (type_split(type)) {
		int8_t q[QK];
		unpack32(type, row, b, q, w->s, w->mn);
		memcpy(w->wv, q, QK);
		return;
	}
	w->ws = block_words(type, row + (size_t)b * block_bytes(type), w->wv);
}

HD static inline float wblock_dot(int type, const struct wblock *w, const int xv[8], float xs)
{
	if (type_split(type))
		return dot_split_words(w->wv, w->s, w->mn, xv, xs);
	return (float)dot_words(w->wv, xv) * w->ws * xs;
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
		const int nb = a->cols / QK;
		for (int b = lane; b < nb; b += 32) {
			struct wblock wb;
			int xv[8];
			weight_block(a->type, row, b, &wb);
			for (int t = 0; t < HS_GPU_GEMV_MAX_TOKENS; t++) { // constant trip count: acc stays in registers
				if (t >= a->n)
					break;
				const float xs = block_words(TYPE_Q8_0, m->xq + t * m->xq_row + (size_t)b * Q8_BYTES, xv);
				acc[t] += wblock_dot(a->type, &wb, xv, xs);
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
		const int nb = a->cols / QK;
		for (int b = 0; b < nb; b++) {
			int xv[2][8];
			struct wblock wb;
			float xs[2] = { 0, 0 };
			for (int j = 0; j < 2; j++)
				if (toks[j] < a->n)
					xs[j] = block_words(TYPE_Q8_0, m->xq + toks[j] * m->xq_row + (size_t)b * Q8_BYTES, xv[j]);
			UNROLL
			for (int i = 0; i < 4; i++) {
				if (rows[i] >= a->rows)
					continue;
				weight_block(a->type, w_row(a, rows[i]), b, &wb);
				UNROLL
				for (int j = 0; j < 2; j++)
					if (toks[j] < a->n)
						acc[i][j] += wblock_dot(a->type, &wb, xv[j], xs[j]);
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

extern "C" enum hs_gpu_mm_path hs__gpu_matmul_path(int type, int n, int have_blas)
{
	if (n <= HS_GPU_GEMV_MAX_TOKENS)
		return HS_GPU_MM_GEMV;
	return !hs__gpu_type_quantized(type) && have_blas ? HS_GPU_MM_BLAS : HS_GPU_MM_TILE;
}

static enum hs_gpu_mm_path mm_pick(const struct hs_gpu_matmul *a, int have_blas)
{
	return hs__gpu_matmul_path(a->type, a->n, have_blas);
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
	char why[400];             // why it is not used, or where it was found
	decltype(&cublasCreate_v2) create;
	decltype(&cublasDestroy_v2) destroy;
	decltype(&cublasSetStream_v2) set_stream;
	gemm_checked gemm;
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

// Opens dir/name (dir NULL: the loader's search path), after the cuBLASLt
// it needs from the same folder (a Python package's libcublas may not find
// it on its own); 0 when it has the entries hotset calls.
static int blas_try(const char *dir, const char *name, const char *lt)
{
	char path[1024];
	if (dir) {
		snprintf(path, sizeof path, "%s/%s", dir, lt);
		dlopen(path, RTLD_NOW | RTLD_LOCAL); // a failure shows in the next dlopen
		snprintf(path, sizeof path, "%s/%s", dir, name);
	} else {
		snprintf(path, sizeof path, "%s", name);
	}
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *e = dlerror();
		snprintf(blas.why, sizeof blas.why, "%.390s", e ? e : path);
		return -1;
	}
	blas.create = (decltype(blas.create))dlsym(lib, "cublasCreate_v2");
	blas.destroy = (decltype(blas.destroy))dlsym(lib, "cublasDestroy_v2");
	blas.set_stream = (decltype(blas.set_stream))dlsym(lib, "cublasSetStream_v2");
	blas.gemm = (decltype(blas.gemm))dlsym(lib, "cublasGemmEx");
	if (!blas.create || !blas.destroy || !blas.set_stream || !blas.gemm) {
		snprintf(blas.why, sizeof blas.why, "%.300s lacks cublasGemmEx or its companions", path);
		dlclose(lib);
		return -1;
	}
	Dl_info info;
	blas.lib = lib;
	snprintf(blas.why, sizeof blas.why, "%.390s",
		 dladdr((void *)blas.create, &info) && info.dli_fname ? info.dli_fname : path);
	return 0;
}

// The folders Python packages put cuBLAS in: nvidia/cu<major>/lib (CUDA 13
// wheels) or nvidia/cublas/lib (CUDA 12 wheels), under the site-packages of
// an active virtual environment, conda, the system's Pythons, ~/.local and
// /opt/*/.venv (where images keep a framework's environment).
static int blas_try_python(const char *name, const char *lt, int major)
{
	static const char *const roots[] = { "$VIRTUAL_ENV", "$CONDA_PREFIX", "$HOME/.local", "/usr/local", "/usr",
					     "/opt/*/.venv", "/opt/conda" };
	char pat[1024];
	for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
		const char *root = roots[i];
		if (root[0] == '$' && !((root = getenv(root + 1)) && *root))
			continue;
		for (int sub = 0; sub < 2; sub++) {
			if (sub == 0)
				snprintf(pat, sizeof pat, "%s/lib/python3*/*-packages/nvidia/cu%d/lib", root, major);
			else
				snprintf(pat, sizeof pat, "%s/lib/python3*/*-packages/nvidia/cublas/lib", root);
			glob_t g;
			if (glob(pat, 0, NULL, &g) == 0) {
				for (size_t k = 0; k < g.gl_pathc; k++)
					if (blas_try(g.gl_pathv[k], name, lt) == 0) {
						globfree(&g);
						return 0;
					}
				globfree(&g);
			}
		}
	}
	return -1;
}

static void blas_open(void)
{
	const char *env = getenv("HOTSET_CUBLAS");
	const int major = CUDART_VERSION / 1000;
	char name[64], lt[64];
	snprintf(name, sizeof name, "libcublas.so.%d", major);
	snprintf(lt, sizeof lt, "libcublasLt.so.%d", major);
	if (env && strcmp(env, "0") == 0) {
		snprintf(blas.why, sizeof blas.why, "turned off by HOTSET_CUBLAS=0");
		return;
	}
	if (env && strchr(env, '/')) { // a file named: that one or none
		char dir[1024];
		const char *slash = strrchr(env, '/');
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - env), env);
		if (blas_try(*dir ? dir : "/", slash + 1, lt)) {
			char e[400];
			memcpy(e, blas.why, sizeof e);
			snprintf(blas.why, sizeof blas.why, "HOTSET_CUBLAS=%.100s: %.280s", env, e);
		}
		return;
	}
#ifdef HS_CUDA_LIBDIR
	if (blas_try(HS_CUDA_LIBDIR, name, lt) == 0)
		return;
#endif
	if (blas_try(NULL, name, lt) == 0 || blas_try_python(name, lt, major) == 0)
		return;
	snprintf(blas.why, sizeof blas.why,
		 "%s not found (the toolkit's lib folder, the loader's path, a Python package's nvidia/cu%d/lib; "
		 "HOTSET_CUBLAS=/path/to/%s names one)", name, major, name);
}

extern "C" int hs__gpu_blas_load(char *why, size_t why_len)
{
	pthread_once(&blas_once, blas_open);
	if (why && why_len)
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

// ---- g = silu(g) * u (a dense FFN's SwiGLU) -------------------------------------------

struct swiglu_args {
	float *g;
	const float *u;
};

HD static inline void swiglu_item(const struct swiglu_args *a, long long i)
{
	const float g = a->g[i];
	a->g[i] = g / (1.0f + expf(-g)) * a->u[i];
}

extern "C" cudaError_t hs__gpu_swiglu(float *g, const float *u, size_t n, cudaStream_t stream)
{
	const struct swiglu_args a = { g, u };
	return flat_launch<struct swiglu_args, swiglu_item>(&a, (long long)n, stream);
}

extern "C" void hs__gpu_swiglu_emulate(float *g, const float *u, size_t n)
{
	const struct swiglu_args a = { g, u };
	flat_emulate<struct swiglu_args, swiglu_item>(&a, (long long)n);
}
