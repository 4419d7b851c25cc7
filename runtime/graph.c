/* The DAG executor (see graph.h): one thread per non-host lane, kept alive
 * between runs (a layer step is far too short to start threads for); the
 * calling thread runs the host lane itself.  A lane takes its tasks in
 * index order, waiting for each one's dependencies, which keeps every lane
 * FIFO like a device queue and makes the schedule reproducible. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hotset.h"
#include "base/error.h"
#include "runtime/graph.h"

struct run {
	struct hs_task *t;
	int n;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int *done;          /* per task: 1 when finished */
	int failed;         /* first failing task + 1 */
	char msg[256];
	double t0;
	double busy[HS_N_LANES];
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

const char *hs__lane_name(enum hs_lane lane)
{
	static const char *const names[] = { "host", "cpu", "gpu", "copy" };
	return lane >= 0 && lane < HS_N_LANES ? names[lane] : "?";
}

static void run_lane(struct run *r, enum hs_lane lane)
{
	for (int i = 0; i < r->n; i++) {
		struct hs_task *t = &r->t[i];
		if (t->lane != lane)
			continue;
		pthread_mutex_lock(&r->mu);
		for (;;) {
			int ready = 1;
			for (int d = 0; d < t->n_deps; d++)
				ready &= r->done[t->deps[d]];
			if (ready || r->failed)
				break;
			pthread_cond_wait(&r->cv, &r->mu);
		}
		int stop = r->failed;
		pthread_mutex_unlock(&r->mu);
		if (stop)
			return;
		double a = now_s();
		int rc = t->run ? t->run(t->ctx) : 0;
		double b = now_s();
		pthread_mutex_lock(&r->mu);
		t->t_start = a - r->t0;
		t->t_end = b - r->t0;
		t->rc = rc;
		r->busy[lane] += b - a;
		r->done[i] = 1;
		if (rc && !r->failed) {
			r->failed = i + 1;
			snprintf(r->msg, sizeof r->msg, "%s", hs_last_error());
		}
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		if (rc)
			return;
	}
}

/* ---- persistent lane threads ---------------------------------------------- */

struct hs_lanes {
	pthread_t th[HS_N_LANES];
	int n_started;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	unsigned gen;
	int stop, pending;
	struct run *cur;
};

struct lane_arg {
	struct hs_lanes *ls;
	enum hs_lane lane;
};

static void *lane_main(void *arg)
{
	struct lane_arg *la = arg;
	struct hs_lanes *ls = la->ls;
	unsigned seen = 0;

	pthread_mutex_lock(&ls->mu);
	for (;;) {
		while (ls->gen == seen && !ls->stop)
			pthread_cond_wait(&ls->go, &ls->mu);
		if (ls->stop)
			break;
		seen = ls->gen;
		struct run *r = ls->cur;
		pthread_mutex_unlock(&ls->mu);
		run_lane(r, la->lane);
		pthread_mutex_lock(&ls->mu);
		if (--ls->pending == 0)
			pthread_cond_signal(&ls->done);
	}
	pthread_mutex_unlock(&ls->mu);
	free(la);
	return NULL;
}

void hs__lanes_free(struct hs_lanes *ls)
{
	if (!ls)
		return;
	pthread_mutex_lock(&ls->mu);
	ls->stop = 1;
	pthread_cond_broadcast(&ls->go);
	pthread_mutex_unlock(&ls->mu);
	for (int i = 0; i < ls->n_started; i++)
		pthread_join(ls->th[i], NULL);
	pthread_cond_destroy(&ls->go);
	pthread_cond_destroy(&ls->done);
	pthread_mutex_destroy(&ls->mu);
	free(ls);
}

int hs__lanes_create(struct hs_lanes **out)
{
	struct hs_lanes *ls = calloc(1, sizeof *ls);

	*out = NULL;
	if (!ls)
		return hs__error(ENOMEM, "graph: out of memory");
	pthread_mutex_init(&ls->mu, NULL);
	pthread_cond_init(&ls->go, NULL);
	pthread_cond_init(&ls->done, NULL);
	for (int l = HS_LANE_HOST + 1; l < HS_N_LANES; l++) {
		struct lane_arg *la = malloc(sizeof *la);
		if (la)
			*la = (struct lane_arg){ ls, (enum hs_lane)l };
		int rc = la ? pthread_create(&ls->th[ls->n_started], NULL, lane_main, la) : ENOMEM;
		if (rc) {
			free(la);
			hs__lanes_free(ls);
			return hs__error(EAGAIN, "graph: cannot start a lane thread: %s", strerror(rc));
		}
		ls->n_started++;
	}
	*out = ls;
	return 0;
}

int hs__graph_run_on(struct hs_lanes *ls, struct hs_task *tasks, int n, struct hs_graph_stats *stats)
{
	struct run r;
	int rc = 0;

	for (int i = 0; i < n; i++) {
		if (tasks[i].lane < 0 || tasks[i].lane >= HS_N_LANES || tasks[i].n_deps < 0 ||
		    tasks[i].n_deps > HS_TASK_MAX_DEPS)
			return hs__error(EINVAL, "graph: task %d has lane %d and %d dependencies", i, tasks[i].lane,
					 tasks[i].n_deps);
		for (int d = 0; d < tasks[i].n_deps; d++)
			if (tasks[i].deps[d] < 0 || tasks[i].deps[d] >= i)
				return hs__error(EINVAL, "graph: task %d depends on %d (dependencies come first)", i,
						 tasks[i].deps[d]);
		tasks[i].t_start = tasks[i].t_end = 0;
		tasks[i].rc = 0;
	}
	memset(&r, 0, sizeof r);
	r.t = tasks;
	r.n = n;
	r.done = calloc(n > 0 ? n : 1, sizeof *r.done);
	if (!r.done)
		return hs__error(ENOMEM, "graph: out of memory");
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	r.t0 = now_s();
	/* wake the lanes; the caller is the host lane */
	pthread_mutex_lock(&ls->mu);
	ls->cur = &r;
	ls->pending = ls->n_started;
	ls->gen++;
	pthread_cond_broadcast(&ls->go);
	pthread_mutex_unlock(&ls->mu);
	run_lane(&r, HS_LANE_HOST);
	pthread_mutex_lock(&ls->mu);
	while (ls->pending > 0)
		pthread_cond_wait(&ls->done, &ls->mu);
	ls->cur = NULL;
	pthread_mutex_unlock(&ls->mu);
	double wall = now_s() - r.t0;
	if (stats) {
		double sum = 0;
		stats->wall_s = wall;
		for (int l = 0; l < HS_N_LANES; l++) {
			stats->busy_s[l] = r.busy[l];
			sum += r.busy[l];
		}
		stats->overlap = wall > 0 ? sum / wall : 0;
	}
	if (r.failed)
		rc = hs__error(-tasks[r.failed - 1].rc, "%s", r.msg);
	for (int i = 0; i < n && !r.failed; i++)
		if (!r.done[i])
			rc = hs__error(EDEADLK, "graph: task %d never ran", i);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	free(r.done);
	return rc;
}

int hs__graph_run(struct hs_task *tasks, int n, struct hs_graph_stats *stats)
{
	struct hs_lanes *ls;
	int rc = hs__lanes_create(&ls);
	if (rc)
		return rc;
	rc = hs__graph_run_on(ls, tasks, n, stats);
	hs__lanes_free(ls);
	return rc;
}
