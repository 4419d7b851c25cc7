/* The CPU worker pool: one pthread per core of the plan's node(s), each
 * bound to its core, running the CPU kernels' (ith, nth) slices.  Workers
 * spin briefly for the next job, then sleep on a condition variable.  The
 * thread that drives the GPU queues is not a worker, so the pool never
 * oversubscribes the cores it is given (give it the node's cores minus one
 * when the driver shares the node).  Without a GPU there is nothing to
 * drive, and a caller waiting beside a worker on every core would take
 * their cores from them (on 2 cores a small job's dispatch cost 28 us
 * instead of 3): a pool made with caller_joins runs slice 0 on the calling
 * thread and has one thread fewer.  OpenMP stays out of this path: the
 * kernels' steps are plain functions the pool calls. */
#ifndef HS_POOL_H
#define HS_POOL_H

struct hs_pool;

/* n_workers slices a job; worker i is bound to cpus[i % n_cpus] (n_cpus 0:
 * unbound).  caller_joins: slice 0 runs on the thread that calls
 * hs__pool_run (not bound: it is the caller's), n_workers - 1 threads are
 * made.  -ENOMEM, -EAGAIN (no thread). */
int hs__pool_create(int n_workers, const int *cpus, int n_cpus, int caller_joins, struct hs_pool **out);
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
/* Jobs run so far (hs__pool_run calls), for the forward pass's breakdown. */
long hs__pool_runs(const struct hs_pool *p);

#endif
