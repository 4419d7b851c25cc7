/* The sim device's dense ops: each is queued (hs__sim_call) and runs the
 * CPU kernels of cpu_kernels/dense.h and attention.h on the queue's thread
 * with the device's CPU threads, over "device" memory that is host memory. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

#include "base/error.h"
#include "cpu_kernels/attention.h"
#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/dense.h"
#include "device/sim.h"

/* The attention split for the sim's threads, capped so that the scratch
 * sized without knowing them is always enough. */
#define SPLIT_THREADS_MAX 16

static int split_threads(int threads)
{
	return threads < SPLIT_THREADS_MAX ? threads : SPLIT_THREADS_MAX;
}

static struct hs_kernel_ops sim_ops;
static pthread_once_t sim_once = PTHREAD_ONCE_INIT;

static void sim_ops_init(void)
{
	sim_ops = *hs__kernels_best();
	sim_ops.quantize_q8_k = NULL;
	sim_ops.q8_k_types = 0;
}

const struct hs_kernel_ops *hs__sim_kernels(void)
{
	pthread_once(&sim_once, sim_ops_init);
	return &sim_ops;
}

size_t hs__sim_matmul_scratch_bytes(int type, int cols, int n)
{
	return hs__matmul_scratch_bytes(type, cols, n);
}

static int run_matmul(const void *args, int threads)
{
	const struct hs_dev_matmul *m = args;
	struct hs_matmul_job job = { .ops = hs__sim_kernels(), .dops = hs__dense_best(), .type = m->type,
				     .rows = m->rows, .cols = m->cols, .w = m->w, .row_bytes = m->row_bytes,
				     .bias = m->bias, .n = m->n, .x = m->x, .x_stride = m->x_stride, .y = m->y,
				     .y_stride = m->y_stride, .scratch = m->scratch };
	return hs__matmul_run_omp(&job, threads);
}

int hs__sim_matmul(hs_queue *q, const struct hs_dev_matmul *m)
{
	return hs__sim_call(q, run_matmul, m, sizeof *m);
}

static int run_rmsnorm(const void *args, int threads)
{
	const struct hs_dev_norm *r = args;
	hs__rmsnorm_omp(hs__dense_best(), r->x, r->x_stride, r->y, r->y_stride, r->n, r->n_head, r->dim, r->w, r->eps,
		       threads);
	return 0;
}

int hs__sim_rmsnorm(hs_queue *q, const struct hs_dev_norm *r)
{
	return hs__sim_call(q, run_rmsnorm, r, sizeof *r);
}

static int run_rope(const void *args, int threads)
{
	const struct hs_dev_rope *r = args;
	hs__rope_apply_omp(hs__dense_best(), r->n_rot, r->x, r->x_stride, r->n, r->n_head, r->head_dim, r->cs, threads);
	return 0;
}

int hs__sim_rope(hs_queue *q, const struct hs_dev_rope *r)
{
	return hs__sim_call(q, run_rope, r, sizeof *r);
}

static int run_kv_store(const void *args, int threads)
{
	const struct hs_dev_kv_store *s = args;
#pragma omp parallel num_threads(threads)
	hs__kv_store(hs__sim_kernels(), hs__dense_best(), s->type, s->x, s->x_stride, s->n, s->n_head_kv, s->head_dim,
		    s->cells, s->dst, s->cell_bytes, s->head_bytes, omp_get_thread_num(), omp_get_num_threads());
	if (s->cell_pos)
		for (int t = 0; t < s->n; t++)
			s->cell_pos[s->cells[t]] = s->pos[t];
	return 0;
}

int hs__sim_kv_store(hs_queue *q, const struct hs_dev_kv_store *s)
{
	return hs__sim_call(q, run_kv_store, s, sizeof *s);
}

size_t hs__sim_attn_scratch_bytes(int n, int n_head, int n_head_kv, int head_dim, int n_cells)
{
	(void)n_head_kv;
	return hs__attn_scratch_bytes(n, n_head, head_dim, hs__attn_pick_split(n, n_cells, SPLIT_THREADS_MAX));
}

static int run_attention(const void *args, int threads)
{
	const struct hs_dev_attn *a = args;
	struct hs_attn_job job = { .dops = hs__dense_best(), .n = a->n, .n_head = a->n_head, .n_head_kv = a->n_head_kv,
				   .head_dim = a->head_dim, .q = a->q, .q_stride = a->q_stride, .q_pos = a->q_pos,
				   .kv_type = a->kv_type, .k = a->k, .v = a->v, .k_cell = a->k_cell,
				   .k_head = a->k_head, .v_cell = a->v_cell, .v_head = a->v_head,
				   .n_cells = a->n_cells, .cell_pos = a->cell_pos, .window = a->window,
				   .sinks = a->sinks, .scale = a->scale, .out = a->out, .out_stride = a->out_stride,
				   .scratch = a->scratch };
	job.n_split = hs__attn_pick_split(a->n, a->n_cells, split_threads(threads));
	int rc = hs__attn_prepare(&job);
	return rc ? rc : hs__attn_run_omp(&job, threads);
}

int hs__sim_attention(hs_queue *q, const struct hs_dev_attn *a)
{
	return hs__sim_call(q, run_attention, a, sizeof *a);
}

struct add_args {
	float *y;
	const float *x;
	size_t n;
};

static int run_add(const void *args, int threads)
{
	const struct add_args *a = args;
	(void)threads;
	for (size_t i = 0; i < a->n; i++)
		a->y[i] += a->x[i];
	return 0;
}

int hs__sim_add(hs_queue *q, float *y, const float *x, size_t n)
{
	struct add_args a = { y, x, n };
	return hs__sim_call(q, run_add, &a, sizeof a);
}

struct swiglu_args {
	float *g;
	const float *u;
	size_t n;
};

static void swiglu_step(void *args, int ith, int nth)
{
	const struct swiglu_args *a = args;
	hs__swiglu(a->g, a->u, a->n, ith, nth);
}

static int run_swiglu(const void *args, int threads)
{
	hs__omp_steps((void *)args, swiglu_step, NULL, threads);
	return 0;
}

int hs__sim_swiglu(hs_queue *q, float *g, const float *u, size_t n)
{
	struct swiglu_args a = { g, u, n };
	return hs__sim_call(q, run_swiglu, &a, sizeof a);
}

/* One thread: the sim checks what the mixer computes, not its speed. */
static int run_deltanet(const void *args, int threads)
{
	const struct hs_dev_dn *d = args;
	const int dh = d->head_dim, nk = d->n_k_heads, nv = d->n_v_heads;
	const int C = (2 * nk + nv) * dh;
	float *scratch = NULL;
	(void)threads;
	if (d->n > 1 && !(scratch = malloc(sizeof(float) * hs__dn_scratch_floats(dh))))
		return hs__error(ENOMEM, "deltanet: out of memory for the chunk's scratch");
	hs__dn_conv(d->conv_w, C, d->kc, d->conv_state, d->n, d->qkv, (size_t)C, d->conv, (size_t)C, 0, 1);
	hs__dn_prep(d->conv, (size_t)C, nk, dh, d->alpha, d->beta, d->dt_bias, d->a, nv, d->eps, d->g, d->b, 0, d->n);
	const size_t key = (size_t)nk * dh;
	struct hs_dn_job j = { .n = d->n, .n_k_heads = nk, .n_v_heads = nv, .dk = dh, .dv = dh, .q = d->conv,
			       .k = d->conv + key, .qk_stride = (size_t)C, .v = d->conv + 2 * key, .v_stride = (size_t)C,
			       .g = d->g, .beta = d->b, .scale = 1.0f / sqrtf((float)dh), .state = d->state,
			       .out = d->out, .out_stride = (size_t)nv * dh, .scratch = scratch };
	if (d->n > 1)
		hs__dn_chunk(&j, 0, 1);
	else
		hs__dn_step(&j, 0, 1);
	hs__dn_gnorm(d->out, d->z, dh, d->norm, d->eps, 0, (long)d->n * nv);
	free(scratch);
	return 0;
}

int hs__sim_deltanet(hs_queue *q, const struct hs_dev_dn *d)
{
	int rc = hs__dev_dn_check(d);
	return rc ? rc : hs__sim_call(q, run_deltanet, d, sizeof *d);
}
