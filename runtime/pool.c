/* The CPU worker pool (see pool.h).  A job is published by bumping a
 * generation counter; workers spin on it for a short while (a decode step
 * follows the last one within microseconds), then sleep on a condition
 * variable.  The barrier is sense-reversing on atomics. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "runtime/numa.h"
#include "runtime/pool.h"

/* How long a worker spins for the next job, and the caller for the end
 * of one, before sleeping on a condition variable.  A decode step's jobs
 * follow each other within microseconds, but the two sides of a job end
 * apart by more than a short spin (20000 rounds, 5-10 us, was less than
 * the imbalance of one expert FFN): the one that slept then cost a
 * wake-up, 40-55 us on a VM (a halted vCPU), at every norm of a token. */
#define SPIN_S 2e-3
#define SPIN_CHECK 1023 /* rounds between clock reads */

struct worker {
	struct hs_pool *p;
	pthread_t thread;
	int ith;
	int cpu; /* -1 = unbound */
};

struct hs_pool {
	int n;                  /* slices of a job */
	int joins;              /* slice 0 is the caller's: threads w[1..n-1] */
	struct worker *w;
	pthread_mutex_t mu;
	pthread_cond_t wake, done_cv;
	atomic_uint gen;        /* job generation; workers run a job when it changes */
	atomic_int remaining;   /* workers still in the current job */
	atomic_int stop;
	void (*fn)(void *ctx, int ith, int nth);
	void *ctx;
	atomic_int bar_count, bar_sense;
	double busy;
	long runs;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Whether a spin that began at the first call (*until 0) has lasted
 * SPIN_S.  Else it yields: where more threads than cores want to run
 * (tests side by side, another program) the spinner lets them; alone on
 * its core it returns at once. */
static int spun_out(double *until)
{
	const double t = now_s();
	if (*until == 0)
		*until = t + SPIN_S;
	if (t > *until)
		return 1;
	sched_yield();
	return 0;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct hs_pool *p = w->p;
	unsigned seen = 0;

	if (w->cpu >= 0)
		hs__bind_thread(&w->cpu, 1); /* best effort: an unbound worker still works */
	for (;;) {
		unsigned g;
		unsigned spins = 0;
		double until = 0;
		while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
		       !atomic_load_explicit(&p->stop, memory_order_acquire))
			if ((++spins & SPIN_CHECK) == 0 && spun_out(&until))
				break;
		if (g == seen && !atomic_load(&p->stop)) {
			pthread_mutex_lock(&p->mu);
			while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
				pthread_cond_wait(&p->wake, &p->mu);
			pthread_mutex_unlock(&p->mu);
		}
		if (g == seen) /* stop */
			break;
		seen = g;
		p->fn(p->ctx, w->ith, p->n);
		if (atomic_fetch_sub_explicit(&p->remaining, 1, memory_order_acq_rel) == 1) {
			pthread_mutex_lock(&p->mu);
			pthread_cond_signal(&p->done_cv);
			pthread_mutex_unlock(&p->mu);
		}
	}
	return NULL;
}

int hs__pool_create(int n_workers, const int *cpus, int n_cpus, int caller_joins, struct hs_pool **out)
{
	struct hs_pool *p;
	int rc = 0;

	*out = NULL;
	if (n_workers < 1 || n_workers > 4096)
		return hs__error(EINVAL, "pool: %d workers (1..4096)", n_workers);
	p = calloc(1, sizeof *p);
	if (!p || !(p->w = calloc(n_workers, sizeof *p->w))) {
		free(p);
		return hs__error(ENOMEM, "pool: out of memory");
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done_cv, NULL);
	atomic_init(&p->gen, 0);
	atomic_init(&p->remaining, 0);
	atomic_init(&p->stop, 0);
	atomic_init(&p->bar_count, 0);
	atomic_init(&p->bar_sense, 0);
	p->joins = caller_joins != 0;
	p->n = p->joins; /* what hs__pool_free joins on a failure: threads w[joins..n-1] */
	for (int i = p->joins; i < n_workers; i++) {
		p->w[i] = (struct worker){ p, 0, i, n_cpus > 0 ? cpus[i % n_cpus] : -1 };
		if ((rc = pthread_create(&p->w[i].thread, NULL, worker_main, &p->w[i]))) {
			hs__pool_free(p);
			return hs__error(EAGAIN, "pool: cannot start worker %d: %s", i, strerror(rc));
		}
		p->n = i + 1;
	}
	*out = p;
	return 0;
}

void hs__pool_free(struct hs_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	atomic_store(&p->stop, 1);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	for (int i = p->joins; i < p->n; i++)
		pthread_join(p->w[i].thread, NULL);
	pthread_cond_destroy(&p->wake);
	pthread_cond_destroy(&p->done_cv);
	pthread_mutex_destroy(&p->mu);
	free(p->w);
	free(p);
}

int hs__pool_size(const struct hs_pool *p)
{
	return p->n;
}

void hs__pool_run(struct hs_pool *p, void (*fn)(void *ctx, int ith, int nth), void *ctx)
{
	double t0 = now_s();

	p->fn = fn;
	p->ctx = ctx;
	if (p->n == p->joins) { /* the caller alone */
		fn(ctx, 0, 1);
		p->busy += now_s() - t0;
		p->runs++;
		return;
	}
	atomic_store_explicit(&p->remaining, p->n - p->joins, memory_order_relaxed);
	pthread_mutex_lock(&p->mu);
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	if (p->joins)
		fn(ctx, 0, p->n);
	/* the caller spins a little, then sleeps until the last worker signals */
	unsigned spins = 0;
	double until = 0;
	while (atomic_load_explicit(&p->remaining, memory_order_acquire) > 0)
		if ((++spins & SPIN_CHECK) == 0 && spun_out(&until))
			break;
	if (atomic_load_explicit(&p->remaining, memory_order_acquire) > 0) {
		pthread_mutex_lock(&p->mu);
		while (atomic_load(&p->remaining) > 0)
			pthread_cond_wait(&p->done_cv, &p->mu);
		pthread_mutex_unlock(&p->mu);
	}
	p->busy += now_s() - t0;
	p->runs++;
}

long hs__pool_runs(const struct hs_pool *p)
{
	return p->runs;
}

void hs__pool_barrier(struct hs_pool *p)
{
	int sense = atomic_load_explicit(&p->bar_sense, memory_order_acquire);
	if (atomic_fetch_add_explicit(&p->bar_count, 1, memory_order_acq_rel) == p->n - 1) {
		atomic_store_explicit(&p->bar_count, 0, memory_order_relaxed);
		atomic_store_explicit(&p->bar_sense, !sense, memory_order_release);
		return;
	}
	for (int spins = 0; atomic_load_explicit(&p->bar_sense, memory_order_acquire) == sense; spins++)
		if (spins > 1000)
			sched_yield(); /* more workers than free cores: let the others arrive */
}

double hs__pool_busy_s(const struct hs_pool *p)
{
	return p->busy;
}
