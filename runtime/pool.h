/* The CPU worker pool: one pthread per core of the plan's node(s), each
 * bound to its core, running the CPU kernels' (ith, nth) slices.  Workers
 * spin briefly for the next job, then sleep on a condition variable.  The
 * thread that drives the GPU queues is not a worker, so the pool never
 * oversubscribes the cores it is given (give it the node's cores minus one
 * when the driver shares the node).  OpenMP stays out of this path: the
 * kernels' steps are plain functions the pool calls. */
#ifndef HS_POOL_H
#define HS_POOL_H

struct hs_pool;

/* n_workers threads; worker i is bound to cpus[i % n_cpus] (n_cpus 0:
 * unbound).  -ENOMEM, -EAGAIN (no thread). */
int hs__pool_create(int n_workers, const int *cpus, int n_cpus, struct hs_pool **out);
void hs__pool_free(struct hs_pool *p);
int hs__pool_size(const struct hs_pool *p);

/* Runs fn(ctx, ith, nth) on every worker and returns when all are done.
 * One job at a time per pool (callers serialise). */
void hs__pool_run(struct hs_pool *p, void (*fn)(void *ctx, int ith, int nth), void *ctx);

/* Inside fn: every worker waits here until all have arrived. */
void hs__pool_barrier(struct hs_pool *p);

/* Busy seconds of the pool's jobs since it was created (wall time of
 * hs__pool_run calls). */
double hs__pool_busy_s(const struct hs_pool *p);

#endif
