/* The device contract (device/device.h) on CUDA: streams, events, device
 * memory, pinned host memory, the expert kernels and the whole model's
 * dense ops of gpu_kernels/ (cuBLAS, when it is found at run time, for the
 * float-weight products of prefill).  CUDA builds only; device-cuda-stub.c
 * stands in otherwise. */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "base/error.h"
#include "base/log.h"
#include "cpu_kernels/attention.h"
#include "cpu_kernels/dense.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/moe.h"
#include "cpu_kernels/repack.h"
#include "device/device-cuda.h"
#include "device/device.h"
#include "gpu_kernels/gpu-kernels.h"
#include "topology/cuda-probe.h"

struct hs_dev {
	int index;
	char desc[160];
};

struct hs_queue {
	int dev;
	cudaStream_t s;
	cudaEvent_t done;          /* blocking-sync event: queue_sync sleeps instead of spinning */
	void *blas;                /* cuBLAS handle, made at the first product that wants it */
	int blas_tried;
	int *verdict;              /* device: the last expert launch's check */
	unsigned long long *report; /* mapped host memory: the first fault of an expert launch */
	unsigned long long *report_dev; /* its device address */
};

struct hs_event {
	int dev;
	cudaEvent_t e;
	int recorded;
	hs_queue *q;               /* where it was last recorded: its faults come back from event_sync */
};

/* Which matrix-product path the launches took, for the reports (-v, the
 * benchmarks): GEMV, tile kernel, cuBLAS. */
static unsigned long long mm_paths[3];

static int cuda_fail(cudaError_t e, const char *what, int dev)
{
	cudaGetLastError(); /* clear a non-sticky error */
	return hs__error(e == cudaErrorMemoryAllocation ? ENOMEM : EIO, "CUDA device %d: %s: %s", dev, what,
			 cudaGetErrorString(e));
}

static int dev_open(int index, hs_dev **out)
{
	char name[96] = "?";
	uint64_t f = 0, t = 0;
	int rc = hs__cuda_check_dev(index);
	hs_dev *d;

	*out = NULL;
	if (rc)
		return rc;
	/* The lane threads wait in syncs while the CPU computes the misses: a
	 * waiting thread sleeps on a primitive instead of spinning on a core.
	 * Flags set on an active primary context replace the old ones
	 * (CUDA >= 12); a refusal only costs CPU time, so it is logged. */
	cudaError_t fe = cudaSetDevice(index);
	if (fe == cudaSuccess)
		fe = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync);
	if (fe != cudaSuccess) {
		hs__log(HS_LOG_INFO, "cuda %d: blocking sync not set (%s); waits spin", index, cudaGetErrorString(fe));
		cudaGetLastError();
	}
	hs__cuda_name(index, name, sizeof name);
	hs__cuda_mem_info(index, &f, &t);
	if (!(d = calloc(1, sizeof *d)))
		return hs__error(ENOMEM, "CUDA device: out of memory");
	d->index = index;
	snprintf(d->desc, sizeof d->desc, "cuda %d: %s (%.1f GiB)", index, name, t / 1073741824.0);
	*out = d;
	return 0;
}

static void dev_close(hs_dev *d)
{
	free(d);
}

static const char *dev_describe(hs_dev *d)
{
	return d->desc;
}

static int dev_mem_info(hs_dev *d, uint64_t *f, uint64_t *t)
{
	return hs__cuda_mem_info(d->index, f, t);
}

static int dev_alloc(hs_dev *d, size_t bytes, void **ptr)
{
	cudaError_t e;
	*ptr = NULL;
	if ((e = cudaSetDevice(d->index)) != cudaSuccess || (e = cudaMalloc(ptr, bytes)) != cudaSuccess) {
		*ptr = NULL;
		cudaGetLastError();
		return hs__error(ENOMEM, "CUDA device %d: cannot allocate %zu bytes: %s", d->index, bytes,
				 cudaGetErrorString(e));
	}
	return 0;
}

static void dev_free(hs_dev *d, void *ptr)
{
	if (ptr) {
		cudaSetDevice(d->index);
		cudaFree(ptr);
	}
}

static int dev_host_register(hs_dev *d, void *ptr, size_t bytes, int read_only)
{
	unsigned flags = read_only ? cudaHostRegisterReadOnly : cudaHostRegisterDefault;
	cudaError_t e = cudaSetDevice(d->index);
	if (e == cudaSuccess)
		e = cudaHostRegister(ptr, bytes, flags);
	return e == cudaSuccess ? 0 : cuda_fail(e, "pinning host memory", d->index);
}

static int dev_host_unregister(hs_dev *d, void *ptr, size_t bytes)
{
	(void)bytes;
	cudaError_t e = cudaHostUnregister(ptr);
	return e == cudaSuccess ? 0 : cuda_fail(e, "unpinning host memory", d->index);
}

static void queue_free(hs_queue *q)
{
	if (q->done)
		cudaEventDestroy(q->done);
	if (q->verdict)
		cudaFree(q->verdict);
	if (q->report)
		cudaFreeHost(q->report);
	if (q->s)
		cudaStreamDestroy(q->s);
	free(q);
}

static int dev_queue_create(hs_dev *d, hs_queue **out)
{
	hs_queue *q = calloc(1, sizeof *q);
	cudaError_t e;
	*out = NULL;
	if (!q)
		return hs__error(ENOMEM, "CUDA queue: out of memory");
	q->dev = d->index;
	if ((e = cudaSetDevice(d->index)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&q->s, cudaStreamNonBlocking)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&q->done, cudaEventBlockingSync | cudaEventDisableTiming)) != cudaSuccess ||
	    (e = cudaMalloc((void **)&q->verdict, sizeof(int))) != cudaSuccess ||
	    (e = cudaHostAlloc((void **)&q->report, sizeof *q->report, cudaHostAllocMapped)) != cudaSuccess ||
	    (e = cudaHostGetDevicePointer((void **)&q->report_dev, q->report, 0)) != cudaSuccess) {
		int rc = cuda_fail(e, "creating a stream", d->index);
		queue_free(q);
		return rc;
	}
	*q->report = 0;
	*out = q;
	return 0;
}

static void dev_queue_destroy(hs_queue *q)
{
	if (!q)
		return;
	cudaStreamSynchronize(q->s);
	hs__gpu_blas_destroy(q->blas);
	queue_free(q);
}

/* The first fault an expert launch's check wrote since the last sync: the
 * sim's -EINVAL, reported once (after a sync, when the device has written it). */
static int take_fault(hs_queue *q)
{
	volatile unsigned long long *r = q->report;
	const unsigned long long code = *r;
	if (!code)
		return 0;
	*r = 0;
	const int v = HS_GPU_FAULT_VALUE(code);
	if (HS_GPU_FAULT_KIND(code) == HS_GPU_FAULT_ID)
		return hs__error(EINVAL, "CUDA ffn: id %d outside -1..n_experts-1 (the launch computed nothing)", v);
	return hs__error(EINVAL, "CUDA ffn: expert %d is routed but has no slot on the device (the launch computed nothing)", v);
}

static int dev_queue_sync(hs_queue *q)
{
	cudaError_t e = cudaEventRecord(q->done, q->s);
	if (e == cudaSuccess)
		e = cudaEventSynchronize(q->done);
	return e == cudaSuccess ? take_fault(q) : cuda_fail(e, "queued work", q->dev);
}

static int dev_copy(hs_queue *q, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
	cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "copy", q->dev);
}

static int dev_copy_h2d(hs_queue *q, void *dst, const void *src, size_t bytes)
{
	return dev_copy(q, dst, src, bytes, cudaMemcpyHostToDevice);
}

static int dev_copy_d2h(hs_queue *q, void *dst, const void *src, size_t bytes)
{
	return dev_copy(q, dst, src, bytes, cudaMemcpyDeviceToHost);
}

static int dev_copy_d2d(hs_queue *q, void *dst, const void *src, size_t bytes)
{
	return dev_copy(q, dst, src, bytes, cudaMemcpyDeviceToDevice);
}

static int dev_zero(hs_queue *q, void *dst, size_t bytes)
{
	cudaError_t e = cudaMemsetAsync(dst, 0, bytes, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "memset", q->dev);
}

static int dev_event_create(hs_dev *d, hs_event **out)
{
	hs_event *ev = calloc(1, sizeof *ev);
	cudaError_t e;
	*out = NULL;
	if (!ev)
		return hs__error(ENOMEM, "CUDA event: out of memory");
	ev->dev = d->index;
	/* blocking sync: a thread waiting in event_sync sleeps */
	if ((e = cudaSetDevice(d->index)) != cudaSuccess ||
	    (e = cudaEventCreateWithFlags(&ev->e, cudaEventBlockingSync)) != cudaSuccess) {
		free(ev);
		return cuda_fail(e, "creating an event", d->index);
	}
	*out = ev;
	return 0;
}

static void dev_event_destroy(hs_event *ev)
{
	if (!ev)
		return;
	cudaEventDestroy(ev->e);
	free(ev);
}

static int dev_event_record(hs_event *ev, hs_queue *q)
{
	cudaError_t e = cudaEventRecord(ev->e, q->s);
	ev->recorded = 1;
	ev->q = q;
	return e == cudaSuccess ? 0 : cuda_fail(e, "recording an event", q->dev);
}

static int dev_queue_wait(hs_queue *q, hs_event *ev)
{
	cudaError_t e = cudaStreamWaitEvent(q->s, ev->e, 0);
	return e == cudaSuccess ? 0 : cuda_fail(e, "waiting for an event", q->dev);
}

static int dev_event_sync(hs_event *ev)
{
	cudaError_t e = cudaEventSynchronize(ev->e);
	if (e != cudaSuccess)
		return cuda_fail(e, "event", ev->dev);
	return ev->q ? take_fault(ev->q) : 0;
}

static int dev_event_query(hs_event *ev)
{
	cudaError_t e = cudaEventQuery(ev->e);
	if (e == cudaSuccess)
		return 1;
	if (e == cudaErrorNotReady) {
		cudaGetLastError();
		return 0;
	}
	return cuda_fail(e, "event", ev->dev);
}

static int dev_event_elapsed(hs_event *a, hs_event *b, float *ms)
{
	cudaError_t e = cudaEventElapsedTime(ms, a->e, b->e);
	return e == cudaSuccess ? 0 : cuda_fail(e, "elapsed time", a->dev);
}

static int dev_quantize(hs_queue *q, const float *x, int n_rows, int n_cols, void *xq)
{
	if (n_cols % 32)
		return hs__error(EINVAL, "quantize: %d columns is not a multiple of 32", n_cols);
	cudaError_t e = hs__gpu_quantize_q8_0(x, n_rows, n_cols, xq, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "quantize kernel", q->dev);
}

static size_t dev_ffn_scratch(const struct hs_dev_ffn *f)
{
	return hs__gpu_ffn_scratch_bytes(f->n, f->n_used, f->n_ff, f->n_experts);
}

static struct hs_gpu_ffn gpu_args(const struct hs_dev_ffn *f)
{
	struct hs_gpu_ffn a = {
		.act = f->arch->act == HS_ACT_SWIGLU_OAI ? 0 : 1,
		.type = { (int)f->pack.type[HS_GATE], (int)f->pack.type[HS_UP], (int)f->pack.type[HS_DOWN] },
		.packed = f->pack.packed_rows != 0, .n_embd = f->n_embd, .n_ff = f->n_ff,
		.n_experts = f->n_experts, .n_used = f->n_used, .n = f->n, .off_gate = f->pack.gate,
		.off_up = f->pack.up, .off_down = f->pack.down, .off_gate_b = f->pack.gate_b, .off_up_b = f->pack.up_b,
		.off_down_b = f->pack.down_b, .pool = f->pool, .stride = f->pool_stride, .slot_of = f->slot_of,
		.xq = f->xq, .ids = f->ids, .weights = f->weights, .y = f->y,
	};
	return a;
}

/* Every block type on plain rows and MXFP4 / Q8_0 row-interleaved, each
 * matrix its own type (gpu_kernels/quants.cuh); float experts stay on the CPU. */
static int dev_ffn_takes(const struct hs_expert_pack *p, int n_embd, int n_ff)
{
	static const char *const what[3] = { "gate", "up", "down" };
	for (int i = 0; i < 3; i++) {
		const int t = (int)p->type[i];
		const int cols = i == HS_DOWN ? n_ff : n_embd;
		if (!hs__gpu_type_quantized(t))
			return hs__error(EINVAL, "ffn: %s experts' %s matrices (the CUDA kernels take block types: %s)",
					 hs__type_name(t) ? hs__type_name(t) : "unknown", what[i], hs__type_supported_names());
		if (cols % 32 || !hs__type_row_bytes(t, (uint64_t)cols))
			return hs__error(EINVAL, "ffn: %s rows of %d values (n_embd %d, n_ff %d) are not whole %s blocks of %zu",
					 what[i], cols, n_embd, n_ff, hs__type_name(t), hs__type_block_values(t));
	}
	if (p->packed_rows == HS_PACK_ROWS) {
		for (int i = 0; i < 3; i++)
			if (p->type[i] != HS_TYPE_MXFP4 && p->type[i] != HS_TYPE_Q8_0 && p->type[i] != HS_TYPE_Q4_K)
				return hs__error(EINVAL, "ffn: row-interleaved %s matrices of %s (MXFP4, Q8_0 or Q4_K only)",
						 what[i], hs__type_name((int)p->type[i]));
	} else if (p->packed_rows) {
		return hs__error(EINVAL, "ffn: %zu rows per interleaved group (the CUDA kernels read %d, or plain rows)",
				 (size_t)p->packed_rows, HS_PACK_ROWS);
	}
	return 0;
}

static int check_ffn(const struct hs_dev_ffn *f)
{
	return dev_ffn_takes(&f->pack, f->n_embd, f->n_ff);
}

static int dev_ffn(hs_queue *q, const struct hs_dev_ffn *f)
{
	int rc = check_ffn(f);
	if (rc)
		return rc;
	struct hs_gpu_ffn a = gpu_args(f);
	a.verdict = q->verdict;
	a.report = q->report_dev;
	cudaError_t e = hs__gpu_ffn(&a, f->scratch, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "ffn kernels", q->dev);
}

int hs__cuda_ffn_emulate(const struct hs_dev_ffn *f, int tiled)
{
	int rc = check_ffn(f);
	if (rc)
		return rc;
	struct hs_gpu_ffn a = gpu_args(f);
	int verdict = 0;
	unsigned long long report = 0;
	a.verdict = &verdict;
	a.report = &report;
	rc = hs__gpu_ffn_emulate(&a, f->scratch, tiled);
	if (rc && report) { /* the message a sync of the queue would give */
		struct hs_queue q = { .report = &report };
		return take_fault(&q);
	}
	return rc ? hs__error(EINVAL, "ffn emulation: a fault without a code") : 0;
}

size_t hs__cuda_ffn_scratch_bytes(const struct hs_dev_ffn *f)
{
	return dev_ffn_scratch(f);
}

/* ---- dense ops ------------------------------------------------------------------------
 * Checked here as the CPU ops check their jobs, plus what the kernels' loads
 * need: F32 weight rows at 4-byte aligned addresses, F16, BF16 and Q8_0
 * rows and F16 cells at 2-byte aligned ones, as device allocations and GGUF
 * rows give them; the other block types are read byte by byte. */

_Static_assert(HS_GPU_MM_GEMV == 1 && HS_GPU_MM_TILE == 2 && HS_GPU_MM_BLAS == 3,
	       "device-cuda.h documents the matmul paths as 1, 2, 3");

static int aligned(const void *p, size_t a)
{
	return (uintptr_t)p % a == 0;
}

/* The CPU op's checks (cpu_kernels/dense.c), then what the kernels add:
 * the types they take, aligned rows, scratch for F16/BF16 through cuBLAS. */
static int check_matmul(const struct hs_dev_matmul *m)
{
	const int t = m->type;
	const size_t al = t == HS_TYPE_F32 ? 4 : t == HS_TYPE_F16 || t == HS_TYPE_BF16 || t == HS_TYPE_Q8_0 ? 2 : 1;
	struct hs_matmul_job job = { .type = m->type, .rows = m->rows, .cols = m->cols, .row_bytes = m->row_bytes,
				     .n = m->n, .x_stride = m->x_stride, .y_stride = m->y_stride, .scratch = m->scratch };
	int rc;

	if (!hs__type_supported(t))
		return hs__error(EINVAL, "matmul: weight type %d (the CUDA device takes %s)", t,
				 hs__type_supported_names());
	if ((rc = hs__matmul_prepare(&job)))
		return rc;
	if (m->row_bytes % al || !aligned(m->w, al))
		return hs__error(EINVAL, "matmul: %s rows must start at multiples of %zu bytes (row_bytes %zu)",
				 hs__type_name(m->type), al, m->row_bytes);
	if (!m->scratch && hs__gpu_matmul_scratch_bytes(m->type, m->cols, m->n))
		return hs__error(EINVAL, "matmul: %s weights of %d tokens need scratch", hs__type_name(m->type), m->n);
	return 0;
}

static struct hs_gpu_matmul mm_args(const struct hs_dev_matmul *m)
{
	struct hs_gpu_matmul a = { .type = m->type, .rows = m->rows, .cols = m->cols, .w = m->w,
				   .row_bytes = m->row_bytes, .bias = m->bias, .n = m->n, .x = m->x,
				   .x_stride = m->x_stride, .y = m->y, .y_stride = m->y_stride };
	return a;
}

static size_t dev_matmul_scratch(int type, int cols, int n)
{
	return hs__gpu_matmul_scratch_bytes(type, cols, n);
}

/* The queue's cuBLAS handle, made once; NULL (own kernels) when cuBLAS is
 * absent or cannot start. */
static void *queue_blas(hs_queue *q)
{
	if (!q->blas_tried) {
		char what[400];
		int st = -1;
		q->blas_tried = 1;
		if (hs__gpu_blas_load(what, sizeof what) == 0 && cudaSetDevice(q->dev) == cudaSuccess &&
		    (st = hs__gpu_blas_create(&q->blas)) != 0)
			snprintf(what, sizeof what, "cublasCreate failed (status %d)", st);
		hs__log(HS_LOG_INFO, "cuda %d: prefill products of float weights: %s (%s)", q->dev,
			q->blas ? "cuBLAS" : "own tile kernel", what);
	}
	return q->blas;
}

static int dev_matmul(hs_queue *q, const struct hs_dev_matmul *m)
{
	int rc = check_matmul(m), status = 0;
	if (rc)
		return rc;
	struct hs_gpu_matmul a = mm_args(m);
	const int float_w = m->type == HS_TYPE_F32 || m->type == HS_TYPE_F16 || m->type == HS_TYPE_BF16;
	void *blas = float_w && m->n > HS_GPU_GEMV_MAX_TOKENS ? queue_blas(q) : NULL;
	const enum hs_gpu_mm_path path = hs__gpu_matmul_path(m->type, m->n, blas != NULL);
	if (m->n > 0 && m->rows > 0)
		__atomic_add_fetch(&mm_paths[path - HS_GPU_MM_GEMV], 1, __ATOMIC_RELAXED);
	cudaError_t e = hs__gpu_matmul(&a, m->scratch, blas, &status, q->s);
	if (e == cudaErrorUnknown && status)
		return hs__error(EIO, "CUDA device %d: cuBLAS GEMM (%d x %d x %d %s): status %d", q->dev, m->rows,
				 m->cols, m->n, hs__type_name(m->type), status);
	return e == cudaSuccess ? 0 : cuda_fail(e, "matmul kernels", q->dev);
}

int hs__cuda_matmul_emulate(const struct hs_dev_matmul *m, int path)
{
	int rc = check_matmul(m);
	if (rc)
		return rc;
	if (path < HS_GPU_MM_AUTO || path > HS_GPU_MM_BLAS)
		return hs__error(EINVAL, "matmul emulation: path %d (0..3)", path);
	if (path == HS_GPU_MM_BLAS && hs__gpu_type_quantized(m->type))
		return hs__error(EINVAL, "matmul emulation: the cuBLAS path takes float weights, not %s",
				 hs__type_name(m->type));
	if (path == HS_GPU_MM_BLAS && m->type != HS_TYPE_F32 && m->n > 0 && !m->scratch)
		return hs__error(EINVAL, "matmul emulation: the cuBLAS path needs scratch");
	struct hs_gpu_matmul a = mm_args(m);
	hs__gpu_matmul_emulate(&a, m->scratch, (enum hs_gpu_mm_path)path);
	return 0;
}

static int check_norm(const struct hs_dev_norm *r)
{
	if (r->n < 0 || r->n_head < 1 || r->dim < 1)
		return hs__error(EINVAL, "rmsnorm: %d tokens, %d heads of %d values", r->n, r->n_head, r->dim);
	if (r->n > 1 && (r->x_stride < (size_t)r->n_head * r->dim || r->y_stride < (size_t)r->n_head * r->dim))
		return hs__error(EINVAL, "rmsnorm: token strides %zu, %zu under %d x %d values", r->x_stride, r->y_stride,
				 r->n_head, r->dim);
	return 0;
}

static struct hs_gpu_norm norm_args(const struct hs_dev_norm *r)
{
	struct hs_gpu_norm a = { r->x, r->x_stride, r->y, r->y_stride, r->n, r->n_head, r->dim, r->w, r->eps };
	return a;
}

static int dev_rmsnorm(hs_queue *q, const struct hs_dev_norm *r)
{
	int rc = check_norm(r);
	if (rc)
		return rc;
	struct hs_gpu_norm a = norm_args(r);
	cudaError_t e = hs__gpu_rmsnorm(&a, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "rmsnorm kernel", q->dev);
}

int hs__cuda_rmsnorm_emulate(const struct hs_dev_norm *r)
{
	int rc = check_norm(r);
	if (rc)
		return rc;
	struct hs_gpu_norm a = norm_args(r);
	hs__gpu_rmsnorm_emulate(&a);
	return 0;
}

static int check_rope(const struct hs_dev_rope *r)
{
	if (r->n < 0 || r->n_head < 1 || r->n_rot < 2 || r->n_rot % 2 || r->n_rot > r->head_dim)
		return hs__error(EINVAL, "rope: %d tokens, %d heads, n_rot %d of head_dim %d (even, 2..head_dim)", r->n,
				 r->n_head, r->n_rot, r->head_dim);
	if (r->n > 1 && r->x_stride < (size_t)r->n_head * r->head_dim)
		return hs__error(EINVAL, "rope: token stride %zu under %d x %d values", r->x_stride, r->n_head,
				 r->head_dim);
	return 0;
}

static struct hs_gpu_rope rope_args(const struct hs_dev_rope *r)
{
	struct hs_gpu_rope a = { r->x, r->x_stride, r->n, r->n_head, r->head_dim, r->n_rot, r->cs };
	return a;
}

static int dev_rope(hs_queue *q, const struct hs_dev_rope *r)
{
	int rc = check_rope(r);
	if (rc)
		return rc;
	struct hs_gpu_rope a = rope_args(r);
	cudaError_t e = hs__gpu_rope(&a, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "rope kernel", q->dev);
}

int hs__cuda_rope_emulate(const struct hs_dev_rope *r)
{
	int rc = check_rope(r);
	if (rc)
		return rc;
	struct hs_gpu_rope a = rope_args(r);
	hs__gpu_rope_emulate(&a);
	return 0;
}

static int check_kv_store(const struct hs_dev_kv_store *s)
{
	if (s->type != HS_TYPE_F16 && s->type != HS_TYPE_Q8_0)
		return hs__error(EINVAL, "kv_store: cell type %d (f16 or q8_0)", s->type);
	if (s->n < 0 || s->n_head_kv < 1 || s->head_dim < 1 || (s->type == HS_TYPE_Q8_0 && s->head_dim % HS_QK))
		return hs__error(EINVAL, "kv_store: %d tokens, %d heads of %d values (q8_0: a multiple of %d)", s->n,
				 s->n_head_kv, s->head_dim, HS_QK);
	const size_t rb = hs__type_row_bytes(s->type, (uint64_t)s->head_dim);
	if (s->cell_bytes < rb || (s->n_head_kv > 1 && s->head_bytes < rb))
		return hs__error(EINVAL, "kv_store: cells %zu and heads %zu bytes apart, rows of %zu bytes", s->cell_bytes,
				 s->head_bytes, rb);
	if (s->type == HS_TYPE_F16 && (!aligned(s->dst, 2) || s->cell_bytes % 2 || s->head_bytes % 2))
		return hs__error(EINVAL, "kv_store: f16 cells must start at even addresses");
	if (s->cell_pos && !s->pos)
		return hs__error(EINVAL, "kv_store: cell_pos without positions");
	return 0;
}

static struct hs_gpu_kv_store kv_args(const struct hs_dev_kv_store *s)
{
	struct hs_gpu_kv_store a = { s->type, s->x, s->x_stride, s->n, s->n_head_kv, s->head_dim, s->cells, s->dst,
				     s->cell_bytes, s->head_bytes, s->cell_pos, s->pos };
	return a;
}

static int dev_kv_store(hs_queue *q, const struct hs_dev_kv_store *s)
{
	int rc = check_kv_store(s);
	if (rc)
		return rc;
	struct hs_gpu_kv_store a = kv_args(s);
	cudaError_t e = hs__gpu_kv_store(&a, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "kv_store kernel", q->dev);
}

int hs__cuda_kv_store_emulate(const struct hs_dev_kv_store *s)
{
	int rc = check_kv_store(s);
	if (rc)
		return rc;
	struct hs_gpu_kv_store a = kv_args(s);
	hs__gpu_kv_store_emulate(&a);
	return 0;
}

/* attention.h's checks (the sim's ops have the same limits: one model runs
 * on both), then aligned F16 cells. */
static int check_attn(const struct hs_dev_attn *a)
{
	struct hs_attn_job job = { .n = a->n, .n_head = a->n_head, .n_head_kv = a->n_head_kv, .head_dim = a->head_dim,
				   .kv_type = a->kv_type, .n_cells = a->n_cells, .window = a->window, .n_split = 1 };
	int rc = hs__attn_prepare(&job);
	if (rc)
		return rc;
	if (a->kv_type == HS_TYPE_F16 && (!aligned(a->k, 2) || !aligned(a->v, 2) || a->k_cell % 2 || a->k_head % 2 ||
					  a->v_cell % 2 || a->v_head % 2))
		return hs__error(EINVAL, "attention: f16 cells must start at even addresses");
	return 0;
}

static struct hs_gpu_attn attn_args(const struct hs_dev_attn *a)
{
	struct hs_gpu_attn g = { .n = a->n, .n_head = a->n_head, .n_head_kv = a->n_head_kv, .head_dim = a->head_dim,
				 .q = a->q, .q_stride = a->q_stride, .q_pos = a->q_pos, .kv_type = a->kv_type,
				 .k = a->k, .v = a->v, .k_cell = a->k_cell, .k_head = a->k_head, .v_cell = a->v_cell,
				 .v_head = a->v_head, .n_cells = a->n_cells, .cell_pos = a->cell_pos,
				 .window = a->window, .sinks = a->sinks, .scale = a->scale, .out = a->out,
				 .out_stride = a->out_stride };
	return g;
}

static size_t dev_attn_scratch(int n, int n_head, int n_head_kv, int head_dim, int n_cells)
{
	return hs__gpu_attn_scratch_bytes(n, n_head, n_head_kv, head_dim, n_cells);
}

static int dev_attention(hs_queue *q, const struct hs_dev_attn *a)
{
	int rc = check_attn(a);
	if (rc)
		return rc;
	if (!a->scratch && dev_attn_scratch(a->n, a->n_head, a->n_head_kv, a->head_dim, a->n_cells))
		return hs__error(EINVAL, "attention: %d cells in ranges need scratch", a->n_cells);
	struct hs_gpu_attn g = attn_args(a);
	cudaError_t e = hs__gpu_attention(&g, a->scratch, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "attention kernels", q->dev);
}

int hs__cuda_attention_emulate(const struct hs_dev_attn *a, int n_split)
{
	int rc = check_attn(a);
	if (rc)
		return rc;
	if (n_split < 0 || (n_split > 1 && !a->scratch) ||
	    (n_split == 0 && !a->scratch && dev_attn_scratch(a->n, a->n_head, a->n_head_kv, a->head_dim, a->n_cells)))
		return hs__error(EINVAL, "attention emulation: %d ranges without scratch", n_split);
	struct hs_gpu_attn g = attn_args(a);
	hs__gpu_attention_emulate(&g, a->scratch, n_split);
	return 0;
}

static int dev_add(hs_queue *q, float *y, const float *x, size_t n)
{
	cudaError_t e = hs__gpu_add(y, x, n, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "add kernel", q->dev);
}

int hs__cuda_add_emulate(float *y, const float *x, size_t n)
{
	hs__gpu_add_emulate(y, x, n);
	return 0;
}

static int dev_swiglu(hs_queue *q, float *g, const float *u, size_t n)
{
	cudaError_t e = hs__gpu_swiglu(g, u, n, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "swiglu kernel", q->dev);
}

int hs__cuda_swiglu_emulate(float *g, const float *u, size_t n)
{
	hs__gpu_swiglu_emulate(g, u, n);
	return 0;
}

static struct hs_gpu_dn dn_args(const struct hs_dev_dn *d)
{
	struct hs_gpu_dn a = { .n = d->n, .n_k = d->n_k_heads, .n_v = d->n_v_heads, .dh = d->head_dim, .kc = d->kc,
			       .conv_w = d->conv_w, .dt_bias = d->dt_bias, .a = d->a, .norm = d->norm, .eps = d->eps,
			       .qkv = d->qkv, .z = d->z, .alpha = d->alpha, .beta = d->beta,
			       .conv_state = d->conv_state, .state = d->state, .conv = d->conv, .g = d->g, .b = d->b,
			       .out = d->out };
	return a;
}

static int dev_deltanet(hs_queue *q, const struct hs_dev_dn *d)
{
	int rc = hs__dev_dn_check(d), optin = 0;
	if (rc)
		return rc;
	const size_t shm = hs__gpu_deltanet_shared_bytes(d->head_dim);
	cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, q->dev);
	if (e != cudaSuccess)
		return cuda_fail(e, "shared memory per block", q->dev);
	if (shm > (size_t)optin)
		return hs__error(EINVAL, "deltanet: a head of %d values needs %zu bytes of shared memory, this GPU gives %d",
				 d->head_dim, shm, optin);
	struct hs_gpu_dn a = dn_args(d);
	e = hs__gpu_deltanet(&a, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "deltanet kernels", q->dev);
}

int hs__cuda_deltanet_emulate(const struct hs_dev_dn *d)
{
	int rc = hs__dev_dn_check(d);
	if (rc)
		return rc;
	struct hs_gpu_dn a = dn_args(d);
	if ((rc = hs__gpu_deltanet_emulate(&a)))
		return hs__error(-rc, "deltanet emulation: out of memory");
	return 0;
}

int hs__cuda_blas_status(char *why, size_t why_len)
{
	return hs__gpu_blas_load(why, why_len);
}

void hs__cuda_matmul_paths(char *buf, size_t len)
{
	snprintf(buf, len, "GEMV %llu, tile kernel %llu, cuBLAS %llu",
		 __atomic_load_n(&mm_paths[0], __ATOMIC_RELAXED), __atomic_load_n(&mm_paths[1], __ATOMIC_RELAXED),
		 __atomic_load_n(&mm_paths[2], __ATOMIC_RELAXED));
}

static const struct hs_dev_ops cuda_ops = {
	.name = "cuda",
	.open = dev_open,
	.close = dev_close,
	.describe = dev_describe,
	.mem_info = dev_mem_info,
	.alloc = dev_alloc,
	.free = dev_free,
	.host_register = dev_host_register,
	.host_unregister = dev_host_unregister,
	.queue_create = dev_queue_create,
	.queue_destroy = dev_queue_destroy,
	.queue_sync = dev_queue_sync,
	.copy_h2d = dev_copy_h2d,
	.copy_d2h = dev_copy_d2h,
	.copy_d2d = dev_copy_d2d,
	.zero = dev_zero,
	.event_create = dev_event_create,
	.event_destroy = dev_event_destroy,
	.event_record = dev_event_record,
	.queue_wait = dev_queue_wait,
	.event_sync = dev_event_sync,
	.event_query = dev_event_query,
	.event_elapsed_ms = dev_event_elapsed,
	.quantize = dev_quantize,
	.ffn_takes = dev_ffn_takes,
	.ffn_scratch_bytes = dev_ffn_scratch,
	.ffn = dev_ffn,
	.matmul_scratch_bytes = dev_matmul_scratch,
	.matmul = dev_matmul,
	.rmsnorm = dev_rmsnorm,
	.rope = dev_rope,
	.kv_store = dev_kv_store,
	.attn_scratch_bytes = dev_attn_scratch,
	.attention = dev_attention,
	.add = dev_add,
	.swiglu = dev_swiglu,
	.deltanet = dev_deltanet,
};

const struct hs_dev_ops *hs__dev_cuda_ops(void)
{
	return &cuda_ops;
}
