/* The device contract (device/device.h) on CUDA: streams, events, device
 * memory, pinned host memory and the expert kernels of gpu_kernels/.  CUDA
 * builds only; device-cuda-stub.c stands in otherwise. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "base/error.h"
#include "cpu_kernels/formats.h"
#include "cpu_kernels/moe.h"
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
};

struct hs_event {
	int dev;
	cudaEvent_t e;
	int recorded;
};

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

static int dev_queue_create(hs_dev *d, hs_queue **out)
{
	hs_queue *q = calloc(1, sizeof *q);
	cudaError_t e;
	*out = NULL;
	if (!q)
		return hs__error(ENOMEM, "CUDA queue: out of memory");
	q->dev = d->index;
	if ((e = cudaSetDevice(d->index)) != cudaSuccess ||
	    (e = cudaStreamCreateWithFlags(&q->s, cudaStreamNonBlocking)) != cudaSuccess) {
		free(q);
		return cuda_fail(e, "creating a stream", d->index);
	}
	*out = q;
	return 0;
}

static void dev_queue_destroy(hs_queue *q)
{
	if (!q)
		return;
	cudaStreamSynchronize(q->s);
	cudaStreamDestroy(q->s);
	free(q);
}

static int dev_queue_sync(hs_queue *q)
{
	cudaError_t e = cudaStreamSynchronize(q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "queued work", q->dev);
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
	if ((e = cudaSetDevice(d->index)) != cudaSuccess || (e = cudaEventCreate(&ev->e)) != cudaSuccess) {
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
	return e == cudaSuccess ? 0 : cuda_fail(e, "event", ev->dev);
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
		.act = f->arch->act == HS_ACT_SWIGLU_OAI ? 0 : 1, .type = f->type, .n_embd = f->n_embd, .n_ff = f->n_ff,
		.n_experts = f->n_experts, .n_used = f->n_used, .n = f->n, .off_gate = f->pack.gate,
		.off_up = f->pack.up, .off_down = f->pack.down, .off_gate_b = f->pack.gate_b, .off_up_b = f->pack.up_b,
		.off_down_b = f->pack.down_b, .pool = f->pool, .stride = f->pool_stride, .slot_of = f->slot_of,
		.xq = f->xq, .ids = f->ids, .weights = f->weights, .y = f->y,
	};
	return a;
}

static int check_ffn(const struct hs_dev_ffn *f)
{
	if (f->type != HS_TYPE_MXFP4 && f->type != HS_TYPE_Q8_0)
		return hs__error(EINVAL, "ffn: expert type %d (the device takes MXFP4 and Q8_0)", f->type);
	if (f->n_embd % 32 || f->n_ff % 32)
		return hs__error(EINVAL, "ffn: n_embd %d and n_ff %d must be multiples of 32", f->n_embd, f->n_ff);
	return 0;
}

static int dev_ffn(hs_queue *q, const struct hs_dev_ffn *f)
{
	int rc = check_ffn(f);
	if (rc)
		return rc;
	struct hs_gpu_ffn a = gpu_args(f);
	cudaError_t e = hs__gpu_ffn(&a, f->scratch, q->s);
	return e == cudaSuccess ? 0 : cuda_fail(e, "ffn kernels", q->dev);
}

int hs__cuda_ffn_emulate(const struct hs_dev_ffn *f, int tiled)
{
	int rc = check_ffn(f);
	if (rc)
		return rc;
	struct hs_gpu_ffn a = gpu_args(f);
	if (hs__gpu_ffn_emulate(&a, f->scratch, tiled))
		return hs__error(EINVAL, "ffn emulation: an id outside -1..%d", f->n_experts - 1);
	return 0;
}

size_t hs__cuda_ffn_scratch_bytes(const struct hs_dev_ffn *f)
{
	return dev_ffn_scratch(f);
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
	.ffn_scratch_bytes = dev_ffn_scratch,
	.ffn = dev_ffn,
};

const struct hs_dev_ops *hs__dev_cuda_ops(void)
{
	return &cuda_ops;
}
