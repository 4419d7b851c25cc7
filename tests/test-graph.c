/* Checks the CPU worker pool (every slice runs once per job, the barrier
 * holds every worker until all arrive, jobs back to back) and the DAG
 * executor (lane threads kept across runs, and fresh ones) on random graphs
 * over the four lanes with random delays: every
 * task runs exactly once, after all its dependencies, lanes stay FIFO, a
 * failure stops its dependants and comes back with its message, bad
 * dependencies are refused.  Also run under ThreadSanitizer. */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hotset.h"
#include "base/error.h"
#include "runtime/graph.h"
#include "runtime/pool.h"
#include "tests/hs-test.h"

/* ---- pool ----------------------------------------------------------------- */

struct slices {
	struct hs_pool *p;
	atomic_int hits[64];
	atomic_int phase1, wrong;
	int n_items;
};

static void slice_job(void *ctx, int ith, int nth)
{
	struct slices *s = ctx;
	for (int i = s->n_items * ith / nth; i < s->n_items * (ith + 1) / nth; i++)
		atomic_fetch_add(&s->hits[i], 1);
	atomic_fetch_add(&s->phase1, 1);
	hs__pool_barrier(s->p);
	/* after the barrier every worker has finished phase 1 */
	if (atomic_load(&s->phase1) != nth)
		atomic_fetch_add(&s->wrong, 1);
	hs__pool_barrier(s->p);
}

static void pool_tests(void)
{
	static const int sizes[] = { 1, 2, 3, 5 };
	/* each size with its own threads, and with the caller running slice 0 */
	const size_t ns = sizeof sizes / sizeof sizes[0];
	for (size_t c = 0; c < 2 * ns; c++) {
		struct hs_pool *p;
		int cpus[1] = { 0 };
		const size_t k = c % ns;
		const int joins = c >= ns;
		CHECK(hs__pool_create(sizes[k], cpus, 1, joins, &p) == 0, "%s", hs_last_error());
		if (!p)
			continue;
		CHECK(hs__pool_size(p) == sizes[k], "size");
		for (int job = 0; job < 200; job++) {
			struct slices s = { .p = p, .n_items = 1 + job % 64 };
			for (int i = 0; i < 64; i++)
				atomic_init(&s.hits[i], 0);
			atomic_init(&s.phase1, 0);
			atomic_init(&s.wrong, 0);
			hs__pool_run(p, slice_job, &s);
			for (int i = 0; i < 64; i++)
				CHECK(atomic_load(&s.hits[i]) == (i < s.n_items), "pool %d (caller joins %d) job %d: item %d ran %d times",
				      sizes[k], joins, job, i, atomic_load(&s.hits[i]));
			CHECK(atomic_load(&s.wrong) == 0, "pool %d job %d: barrier let a worker through early", sizes[k],
			      job);
			if (job % 50 == 49) { /* long enough for workers to go to sleep */
				struct timespec ts = { 0, 3000000 };
				nanosleep(&ts, NULL);
			}
		}
		hs__pool_free(p);
	}
	struct hs_pool *p;
	CHECK(hs__pool_create(0, NULL, 0, 1, &p) == -EINVAL, "0 workers accepted");
}

/* ---- graph ------------------------------------------------------------------ */

static uint64_t rng = 99;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

struct node {
	atomic_int *clock;
	int stamp;       /* order in which it ran */
	int runs;
	int delay_us;
	int fail;
};

static int node_run(void *ctx)
{
	struct node *n = ctx;
	if (n->delay_us) {
		struct timespec ts = { 0, n->delay_us * 1000L };
		nanosleep(&ts, NULL);
	}
	n->stamp = atomic_fetch_add(n->clock, 1);
	n->runs++;
	if (n->fail)
		return hs__error(EIO, "task failed on purpose");
	return 0;
}

static void graph_tests(void)
{
	struct hs_lanes *lanes;
	CHECK(hs__lanes_create(&lanes) == 0, "%s", hs_last_error());
	for (int g = 0; g < 150; g++) {
		int n = 1 + (int)(next() % 40), fail_at = g % 5 == 4 ? (int)(next() % (uint32_t)n) : -1;
		struct hs_task *t = calloc(n, sizeof *t);
		struct node *nd = calloc(n, sizeof *nd);
		atomic_int clock;
		atomic_init(&clock, 0);
		for (int i = 0; i < n; i++) {
			nd[i] = (struct node){ &clock, -1, 0, (int)(next() % 4) * 100, i == fail_at };
			t[i].lane = (enum hs_lane)(next() % HS_N_LANES);
			t[i].run = next() % 8 ? node_run : NULL;
			t[i].ctx = &nd[i];
			t[i].n_deps = i ? (int)(next() % 4) : 0;
			for (int d = 0; d < t[i].n_deps; d++)
				t[i].deps[d] = (int)(next() % (uint32_t)i);
			if (!t[i].run && i == fail_at)
				t[i].run = node_run;
		}
		struct hs_graph_stats st;
		/* odd graphs on lane threads kept across runs, even ones on fresh threads */
		int rc = g % 2 ? hs__graph_run_on(lanes, t, n, &st) : hs__graph_run(t, n, &st);
		if (fail_at < 0) {
			CHECK(rc == 0, "graph %d: %s", g, hs_last_error());
			CHECK(st.wall_s >= 0 && st.overlap >= 0, "stats");
		} else {
			CHECK(rc == -EIO && strstr(hs_last_error(), "on purpose"), "graph %d: rc %d '%s'", g, rc,
			      hs_last_error());
		}
		/* which tasks must not have run: dependants (transitively) of the failure */
		int *tainted = calloc(n, sizeof *tainted);
		for (int i = 0; i < n; i++) {
			tainted[i] = i == fail_at;
			for (int d = 0; d < t[i].n_deps; d++)
				tainted[i] |= tainted[t[i].deps[d]] && t[i].deps[d] != i;
		}
		for (int i = 0; i < n; i++) {
			if (t[i].run != node_run)
				continue;
			if (fail_at < 0)
				CHECK(nd[i].runs == 1, "graph %d task %d ran %d times", g, i, nd[i].runs);
			if (tainted[i] && i != fail_at)
				CHECK(nd[i].runs == 0, "graph %d: task %d ran after its dependency failed", g, i);
			if (nd[i].runs != 1)
				continue;
			for (int d = 0; d < t[i].n_deps; d++) {
				int j = t[i].deps[d];
				if (t[j].run == node_run)
					CHECK(nd[j].runs == 1 && nd[j].stamp < nd[i].stamp, "graph %d: task %d ran before its dependency %d",
					      g, i, j);
			}
			for (int j = 0; j < i; j++) /* lanes are FIFO */
				if (t[j].lane == t[i].lane && t[j].run == node_run && nd[j].runs == 1)
					CHECK(nd[j].stamp < nd[i].stamp, "graph %d: lane %s ran %d before %d", g,
					      hs__lane_name(t[i].lane), i, j);
		}
		free(tainted);
		free(t);
		free(nd);
	}
	struct hs_task bad[2] = { { .lane = HS_LANE_CPU }, { .lane = HS_LANE_GPU, .n_deps = 1, .deps = { 1 } } };
	CHECK(hs__graph_run(bad, 2, NULL) == -EINVAL, "a self dependency was accepted");
	CHECK(hs__graph_run_on(lanes, bad, 2, NULL) == -EINVAL, "a self dependency was accepted (kept lanes)");
	hs__lanes_free(lanes);
}

int main(void)
{
	pool_tests();
	graph_tests();
	return hs_test_end();
}
