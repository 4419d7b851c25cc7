/* The sim device: the device contract on the CPU.  Device memory is host
 * memory (with a capacity, so -ENOMEM happens), each queue is a thread
 * running its work in FIFO order, events are real points in those queues,
 * copies can be throttled to a PCIe-like bandwidth and latency, and the
 * expert operations run the CPU kernels.  It is a test and demonstration
 * device: whatever reports it makes say "sim".
 *
 * Settings ($HOTSET_SIM_*): VRAM_GIB (capacity, default 8), PCIE_GBPS
 * (copy bandwidth in GB/s, default unlimited), PCIE_US (latency per copy),
 * THREADS (CPU threads of one expert launch, default 1).  Fault injection
 * for tests: FAIL_PIN=1 refuses every pinning, FAIL_FFN_AFTER=N lets N
 * expert launches run and fails every later one (a device lost mid-run),
 * FAIL_DENSE_AT=N fails the Nth dense op (counted from 1) and only it. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <sys/mman.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels/kernels.h"
#include "device/device.h"
#include "device/sim.h"
#include "hotset.h"
#include "base/error.h"

struct hs_dev {
	pthread_mutex_t mu;   /* guards everything below and every queue and event */
	pthread_cond_t cv;    /* broadcast on any progress */
	uint64_t total, used;
	double gbps, latency_s;
	int threads;
	int fail_pin;
	long fail_ffn_after, ffn_launches; /* -1: never */
	long fail_dense_at, dense_calls;   /* 0: never */
	char desc[96];
};

enum task_kind { T_COPY, T_ZERO, T_RECORD, T_WAIT, T_QUANTIZE, T_FFN, T_CALL };

struct task {
	enum task_kind kind;
	struct task *next;
	void *dst;
	const void *src;
	size_t bytes;
	hs_event *ev;
	uint64_t gen;
	int on_device;        /* a copy inside device memory: not over the link */
	int lost;             /* fault injection: this launch fails */
	int rows, cols;
	struct hs_dev_ffn ffn;
	int (*call)(const void *args, int threads); /* T_CALL: a dense op (device-sim-dense.c) */
	void *args;                                 /* its arguments, owned by the task */
};

struct hs_queue {
	hs_dev *d;
	pthread_t thread;
	struct task *head, *tail;
	uint64_t enqueued, done;
	int stop;
	int err;              /* sticky error of queued work, reported once */
	char msg[256];
	double delay_s;       /* tests: every task waits this long first */
	pthread_cond_t work;  /* its worker waits here for work (d->cv: for progress) */
};

struct hs_event {
	hs_dev *d;
	hs_queue *q;          /* where it was last recorded */
	uint64_t recorded, reached;
	double t;             /* when the last reached record ran */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_s(double s)
{
	if (s <= 0)
		return;
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static double env_num(const char *name, double def)
{
	const char *v = getenv(name);
	char *end;
	double x;
	if (!v || !*v)
		return def;
	x = strtod(v, &end);
	return end != v && !*end && x >= 0 ? x : def;
}

static void describe_update(hs_dev *d)
{
	char link[48];
	if (d->gbps > 0)
		snprintf(link, sizeof link, "%.1f GB/s + %.0f us", d->gbps, d->latency_s * 1e6);
	else
		snprintf(link, sizeof link, "unthrottled");
	snprintf(d->desc, sizeof d->desc, "sim (%.1f GiB, copies %s, %d CPU thread%s)", d->total / 1073741824.0, link,
		 d->threads, d->threads == 1 ? "" : "s");
}

static int sim_open(int index, hs_dev **out)
{
	hs_dev *d;

	if (index != 0)
		return hs__error(ENODEV, "sim device %d: there is one sim device, 0", index);
	d = calloc(1, sizeof *d);
	if (!d)
		return hs__error(ENOMEM, "sim device: out of memory");
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->total = (uint64_t)(env_num("HOTSET_SIM_VRAM_GIB", 8) * 1073741824.0);
	d->gbps = env_num("HOTSET_SIM_PCIE_GBPS", 0);
	d->latency_s = env_num("HOTSET_SIM_PCIE_US", 0) * 1e-6;
	d->threads = (int)env_num("HOTSET_SIM_THREADS", 1);
	d->fail_pin = env_num("HOTSET_SIM_FAIL_PIN", 0) > 0;
	d->fail_ffn_after = getenv("HOTSET_SIM_FAIL_FFN_AFTER") ? (long)env_num("HOTSET_SIM_FAIL_FFN_AFTER", -1) : -1;
	d->fail_dense_at = (long)env_num("HOTSET_SIM_FAIL_DENSE_AT", 0);
	if (d->threads < 1)
		d->threads = 1;
	describe_update(d);
	*out = d;
	return 0;
}

static void sim_close(hs_dev *d)
{
	if (!d)
		return;
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d);
}

static const char *sim_describe(hs_dev *d)
{
	return d->desc;
}

void hs__sim_set_link(hs_dev *d, double gbps, double latency_us)
{
	pthread_mutex_lock(&d->mu);
	d->gbps = gbps;
	d->latency_s = latency_us * 1e-6;
	describe_update(d);
	pthread_mutex_unlock(&d->mu);
}

void hs__sim_set_queue_delay(hs_queue *q, double delay_us)
{
	pthread_mutex_lock(&q->d->mu);
	q->delay_s = delay_us * 1e-6;
	pthread_mutex_unlock(&q->d->mu);
}

static int sim_mem_info(hs_dev *d, uint64_t *free_b, uint64_t *total_b)
{
	pthread_mutex_lock(&d->mu);
	*total_b = d->total;
	*free_b = d->total - d->used;
	pthread_mutex_unlock(&d->mu);
	return 0;
}

/* Each allocation carries its size 256 bytes before the address handed out. */
static int sim_alloc(hs_dev *d, size_t bytes, void **ptr)
{
	uint8_t *p = NULL;
	size_t need = ((bytes + 255) & ~(size_t)255) + 256;

	*ptr = NULL;
	pthread_mutex_lock(&d->mu);
	int fits = bytes <= d->total && need <= d->total - d->used;
	if (fits)
		d->used += need;
	pthread_mutex_unlock(&d->mu);
	if (!fits || posix_memalign((void **)&p, 256, need)) {
		if (fits) {
			pthread_mutex_lock(&d->mu);
			d->used -= need;
			pthread_mutex_unlock(&d->mu);
		}
		return hs__error(ENOMEM, "sim device: cannot allocate %zu bytes (%.2f of %.2f GiB in use)", bytes,
				 d->used / 1073741824.0, d->total / 1073741824.0);
	}
	memcpy(p, &need, sizeof need);
	*ptr = p + 256;
	/* large buffers (expert slots) on 2 MiB pages where the kernel allows:
	 * a GPU reads its memory without the host's TLB misses */
	const uintptr_t lo = ((uintptr_t)p + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1);
	const uintptr_t hi = ((uintptr_t)p + need) & ~(uintptr_t)((2u << 20) - 1);
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
	return 0;
}

static void sim_free(hs_dev *d, void *ptr)
{
	size_t need;
	if (!ptr)
		return;
	uint8_t *p = (uint8_t *)ptr - 256;
	memcpy(&need, p, sizeof need);
	pthread_mutex_lock(&d->mu);
	d->used -= need;
	pthread_mutex_unlock(&d->mu);
	free(p);
}

static int sim_host_register(hs_dev *d, void *ptr, size_t bytes, int read_only)
{
	(void)read_only;
	if (!ptr || !bytes)
		return hs__error(EINVAL, "sim device: cannot pin an empty range");
	if (d->fail_pin)
		return hs__error(EIO, "sim device: pinning %zu bytes refused (fault injection)", bytes);
	return 0; /* host memory is device memory here; the common layer keeps the ranges */
}

static int sim_host_unregister(hs_dev *d, void *ptr, size_t bytes)
{
	(void)d;
	(void)ptr;
	(void)bytes;
	return 0;
}

/* ---- queues ---------------------------------------------------------------- */

static void layer_of(const struct hs_dev_ffn *f, struct hs_moe_layer *l)
{
	memset(l, 0, sizeof *l);
	l->arch = f->arch;
	l->n_embd = f->n_embd;
	l->n_ff = f->n_ff;
	l->n_experts = f->n_experts;
	l->n_used = f->n_used;
	for (int i = 0; i < 3; i++)
		l->type[i] = (int)f->pack.type[i];
}

static int run_ffn(hs_dev *d, const struct hs_dev_ffn *f)
{
	struct hs_moe_layer l;
	int rc;

	layer_of(f, &l);
	l.pool = f->pool;
	l.pool_stride = f->pool_stride;
	l.slot_of = f->slot_of;
	l.pack = f->pack;
	for (int i = 0; i < f->n * f->n_used; i++) {
		int e = f->ids[i];
		if (e < -1 || e >= f->n_experts)
			return hs__error(EINVAL, "sim ffn: id %d outside -1..%d", e, f->n_experts - 1);
		if (e >= 0 && f->slot_of[e] < 0)
			return hs__error(EINVAL, "sim ffn: expert %d is routed but has no slot on the device", e);
	}
	struct hs_ffn_job job = { .layer = &l, .ops = hs__sim_kernels(), .n = f->n, .ids = f->ids,
				  .weights = f->weights, .y = f->y, .scratch = f->scratch };
	if ((rc = hs__ffn_prepare(&job)))
		return rc;
	/* the activations come quantized, as on the GPU */
	memcpy(job.xq, f->xq, (size_t)f->n * (f->n_embd / HS_QK) * sizeof(struct hs_block_q8_0));
	if (d->threads > 1) {
		job.x = NULL;
		struct hs_ffn_job j2 = job;
		/* hs__ffn_run_omp quantizes again from x: run the two later steps */
#pragma omp parallel num_threads(d->threads)
		{
			int ith = omp_get_thread_num(), nth = omp_get_num_threads();
			hs__ffn_step_gate_up(&j2, ith, nth);
#pragma omp barrier
			hs__ffn_step_down(&j2, ith, nth);
		}
		return 0;
	}
	hs__ffn_step_gate_up(&job, 0, 1);
	hs__ffn_step_down(&job, 0, 1);
	return 0;
}

static int run_task(hs_queue *q, struct task *t)
{
	hs_dev *d = q->d;
	double t0, need;

	switch (t->kind) {
	case T_COPY:
		t0 = now_s();
		pthread_mutex_lock(&d->mu);
		need = d->gbps > 0 && !t->on_device ? (double)t->bytes / (d->gbps * 1e9) + d->latency_s : 0;
		pthread_mutex_unlock(&d->mu);
		memcpy(t->dst, t->src, t->bytes);
		sleep_s(need - (now_s() - t0));
		return 0;
	case T_ZERO:
		memset(t->dst, 0, t->bytes);
		return 0;
	case T_CALL:
		if (t->lost)
			return hs__error(EIO, "sim device: dense op %ld failed (fault injection)", d->fail_dense_at);
		return t->call(t->args, d->threads);
	case T_RECORD:
		pthread_mutex_lock(&d->mu);
		if (t->gen > t->ev->reached) {
			t->ev->reached = t->gen;
			t->ev->t = now_s();
		}
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		return 0;
	case T_WAIT:
		pthread_mutex_lock(&d->mu);
		while (t->ev->reached < t->gen)
			pthread_cond_wait(&d->cv, &d->mu);
		pthread_mutex_unlock(&d->mu);
		return 0;
	case T_QUANTIZE: {
		const struct hs_kernel_ops *ops = hs__sim_kernels();
		const float *x = t->src;
		struct hs_block_q8_0 *y = t->dst;
		for (int r = 0; r < t->rows; r++)
			ops->quantize_q8_0(x + (size_t)r * t->cols, y + (size_t)r * (t->cols / HS_QK), t->cols);
		return 0;
	}
	case T_FFN:
		if (t->lost)
			return hs__error(EIO, "sim device: lost (fault injection after %ld expert launches)", d->fail_ffn_after);
		return run_ffn(d, &t->ffn);
	}
	return hs__error(EINVAL, "sim queue: unknown work item");
}

static void *worker(void *arg)
{
	hs_queue *q = arg;
	hs_dev *d = q->d;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (!q->head && !q->stop) /* its own signal: idle queues sleep through others' progress */
			pthread_cond_wait(&q->work, &d->mu);
		if (!q->head)
			break;
		struct task *t = q->head;
		q->head = t->next;
		if (!q->head)
			q->tail = NULL;
		double delay = q->delay_s;
		pthread_mutex_unlock(&d->mu);
		sleep_s(delay);
		int rc = run_task(q, t);
		pthread_mutex_lock(&d->mu);
		if (rc && !q->err) {
			q->err = rc;
			snprintf(q->msg, sizeof q->msg, "%s", hs_last_error());
		}
		q->done++;
		pthread_cond_broadcast(&d->cv);
		free(t->args);
		free(t);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

static int sim_queue_create(hs_dev *d, hs_queue **out)
{
	hs_queue *q = calloc(1, sizeof *q);
	int rc;

	*out = NULL;
	if (!q)
		return hs__error(ENOMEM, "sim queue: out of memory");
	q->d = d;
	pthread_cond_init(&q->work, NULL);
	if ((rc = pthread_create(&q->thread, NULL, worker, q))) {
		pthread_cond_destroy(&q->work);
		free(q);
		return hs__error(rc, "sim queue: cannot start its thread: %s", strerror(rc));
	}
	*out = q;
	return 0;
}

static void sim_queue_destroy(hs_queue *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->d->mu);
	q->stop = 1; /* the worker finishes what was queued, then leaves */
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->d->mu);
	pthread_join(q->thread, NULL);
	pthread_cond_destroy(&q->work);
	free(q);
}

static int push(hs_queue *q, struct task *t)
{
	struct task *n = malloc(sizeof *n);
	if (!n)
		return hs__error(ENOMEM, "sim queue: out of memory");
	*n = *t;
	n->next = NULL;
	pthread_mutex_lock(&q->d->mu);
	if (n->kind == T_RECORD) { /* the point recorded is the one at enqueue time */
		n->gen = ++n->ev->recorded;
		n->ev->q = q;
	} else if (n->kind == T_WAIT) {
		n->gen = n->ev->recorded;
	}
	if (q->tail)
		q->tail->next = n;
	else
		q->head = n;
	q->tail = n;
	q->enqueued++;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->d->mu);
	return 0;
}

int hs__sim_call(hs_queue *q, int (*fn)(const void *args, int threads), const void *args, size_t size)
{
	void *copy = malloc(size);
	if (!copy)
		return hs__error(ENOMEM, "sim queue: out of memory");
	memcpy(copy, args, size);
	pthread_mutex_lock(&q->d->mu);
	int lost = ++q->d->dense_calls == q->d->fail_dense_at;
	pthread_mutex_unlock(&q->d->mu);
	int rc = push(q, &(struct task){ .kind = T_CALL, .call = fn, .args = copy, .lost = lost });
	if (rc)
		free(copy);
	return rc;
}

static int take_error(hs_queue *q)
{
	/* called with the lock held */
	int err = q->err;
	char msg[256];
	if (!err)
		return 0;
	memcpy(msg, q->msg, sizeof msg);
	q->err = 0;
	pthread_mutex_unlock(&q->d->mu);
	hs__error(-err, "%s", msg);
	pthread_mutex_lock(&q->d->mu);
	return err;
}

static int sim_queue_sync(hs_queue *q)
{
	pthread_mutex_lock(&q->d->mu);
	uint64_t target = q->enqueued;
	while (q->done < target)
		pthread_cond_wait(&q->d->cv, &q->d->mu);
	int err = take_error(q);
	pthread_mutex_unlock(&q->d->mu);
	return err;
}

static int sim_copy(hs_queue *q, void *dst, const void *src, size_t bytes)
{
	return push(q, &(struct task){ .kind = T_COPY, .dst = dst, .src = src, .bytes = bytes });
}

/* device to device: memory bandwidth, not the link */
static int sim_copy_d2d(hs_queue *q, void *dst, const void *src, size_t bytes)
{
	return push(q, &(struct task){ .kind = T_COPY, .dst = dst, .src = src, .bytes = bytes, .on_device = 1 });
}

static int sim_zero(hs_queue *q, void *dst, size_t bytes)
{
	return push(q, &(struct task){ .kind = T_ZERO, .dst = dst, .bytes = bytes });
}

static int sim_event_create(hs_dev *d, hs_event **out)
{
	hs_event *e = calloc(1, sizeof *e);
	*out = e;
	if (!e)
		return hs__error(ENOMEM, "sim event: out of memory");
	e->d = d;
	return 0;
}

static void sim_event_destroy(hs_event *e)
{
	free(e);
}

static int sim_event_record(hs_event *e, hs_queue *q)
{
	return push(q, &(struct task){ .kind = T_RECORD, .ev = e });
}

static int sim_queue_wait(hs_queue *q, hs_event *e)
{
	return push(q, &(struct task){ .kind = T_WAIT, .ev = e });
}

static int sim_event_sync(hs_event *e)
{
	int err = 0;
	pthread_mutex_lock(&e->d->mu);
	uint64_t gen = e->recorded;
	while (e->reached < gen)
		pthread_cond_wait(&e->d->cv, &e->d->mu);
	if (e->q)
		err = take_error(e->q);
	pthread_mutex_unlock(&e->d->mu);
	return err;
}

static int sim_event_query(hs_event *e)
{
	pthread_mutex_lock(&e->d->mu);
	int r = e->reached >= e->recorded;
	pthread_mutex_unlock(&e->d->mu);
	return r;
}

static int sim_event_elapsed(hs_event *a, hs_event *b, float *ms)
{
	pthread_mutex_lock(&a->d->mu);
	int ok = a->recorded && b->recorded && a->reached >= a->recorded && b->reached >= b->recorded;
	double t = b->t - a->t;
	pthread_mutex_unlock(&a->d->mu);
	if (!ok)
		return hs__error(EBUSY, "sim event: elapsed time of events not both reached");
	*ms = (float)(t * 1e3);
	return 0;
}

static int sim_quantize(hs_queue *q, const float *x, int n_rows, int n_cols, void *xq)
{
	if (n_cols % HS_QK)
		return hs__error(EINVAL, "quantize: %d columns is not a multiple of %d", n_cols, HS_QK);
	return push(q, &(struct task){ .kind = T_QUANTIZE, .src = x, .dst = xq, .rows = n_rows, .cols = n_cols });
}


static size_t sim_ffn_scratch(const struct hs_dev_ffn *f)
{
	struct hs_moe_layer l;
	layer_of(f, &l);
	return hs__ffn_scratch_bytes(&l, f->n);
}

/* The CPU kernels with Q8_0 activations: every block type, plain or
 * row-interleaved (float types would need the activations unquantized). */
static int sim_ffn_takes(const struct hs_expert_pack *p, int n_embd, int n_ff)
{
	for (int i = 0; i < 3; i++)
		if (!hs__kernel_type_quantized((int)p->type[i]))
			return hs__error(EINVAL, "ffn: %s experts (the sim device takes block types: %s)",
					 hs__type_name((int)p->type[i]) ? hs__type_name((int)p->type[i]) : "unknown",
					 hs__type_supported_names());
	if (n_embd % HS_QK || n_ff % HS_QK)
		return hs__error(EINVAL, "ffn: n_embd %d and n_ff %d must be multiples of %d", n_embd, n_ff, HS_QK);
	return 0;
}

static int sim_ffn(hs_queue *q, const struct hs_dev_ffn *f)
{
	int rc = sim_ffn_takes(&f->pack, f->n_embd, f->n_ff);
	if (rc)
		return rc;
	hs_dev *d = q->d;
	pthread_mutex_lock(&d->mu);
	int lost = d->fail_ffn_after >= 0 && d->ffn_launches++ >= d->fail_ffn_after;
	pthread_mutex_unlock(&d->mu);
	return push(q, &(struct task){ .kind = T_FFN, .ffn = *f, .lost = lost });
}

const struct hs_dev_ops hs__dev_sim_ops = {
	.name = "sim",
	.open = sim_open,
	.close = sim_close,
	.describe = sim_describe,
	.mem_info = sim_mem_info,
	.alloc = sim_alloc,
	.free = sim_free,
	.host_register = sim_host_register,
	.host_unregister = sim_host_unregister,
	.queue_create = sim_queue_create,
	.queue_destroy = sim_queue_destroy,
	.queue_sync = sim_queue_sync,
	.copy_h2d = sim_copy,
	.copy_d2h = sim_copy,
	.copy_d2d = sim_copy_d2d,
	.zero = sim_zero,
	.event_create = sim_event_create,
	.event_destroy = sim_event_destroy,
	.event_record = sim_event_record,
	.queue_wait = sim_queue_wait,
	.event_sync = sim_event_sync,
	.event_query = sim_event_query,
	.event_elapsed_ms = sim_event_elapsed,
	.quantize = sim_quantize,
	.ffn_takes = sim_ffn_takes,
	.ffn_scratch_bytes = sim_ffn_scratch,
	.ffn = sim_ffn,
	.matmul_scratch_bytes = hs__sim_matmul_scratch_bytes,
	.matmul = hs__sim_matmul,
	.rmsnorm = hs__sim_rmsnorm,
	.rope = hs__sim_rope,
	.kv_store = hs__sim_kv_store,
	.attn_scratch_bytes = hs__sim_attn_scratch_bytes,
	.attention = hs__sim_attention,
	.add = hs__sim_add,
	.swiglu = hs__sim_swiglu,
	.deltanet = hs__sim_deltanet,
};
