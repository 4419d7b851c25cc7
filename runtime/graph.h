/* A small DAG executor for one layer's work.  Every task belongs to a lane
 * (host bookkeeping, the CPU pool, the GPU compute queue, the GPU copy
 * queue); each lane is one thread that runs its ready tasks one after the
 * other, so tasks on different lanes overlap.  A GPU task enqueues device
 * work and waits for its event inside run(), so its dependants start when
 * the device has finished it.  Per-lane busy time and the wall time give the
 * overlap efficiency. */
#ifndef HS_GRAPH_H
#define HS_GRAPH_H

enum hs_lane { HS_LANE_HOST, HS_LANE_CPU, HS_LANE_GPU, HS_LANE_COPY, HS_N_LANES };

#define HS_TASK_MAX_DEPS 8

struct hs_task {
	enum hs_lane lane;
	int (*run)(void *ctx);     /* 0 or -errno; NULL = nothing to do (a join point) */
	void *ctx;
	int n_deps;
	int deps[HS_TASK_MAX_DEPS]; /* indices of earlier tasks */
	const char *name;
	/* filled by the run */
	double t_start, t_end;     /* seconds from the graph's start */
	int rc;
};

struct hs_graph_stats {
	double wall_s;
	double busy_s[HS_N_LANES];
	double overlap;            /* sum of lane busy time / wall time (1 = no overlap) */
};

/* Lane threads that live across runs: one per non-host lane, waiting. */
struct hs_lanes;
int hs__lanes_create(struct hs_lanes **out);
void hs__lanes_free(struct hs_lanes *ls);
/* Runs the tasks on those threads (one run at a time per hs_lanes). */
int hs__graph_run_on(struct hs_lanes *ls, struct hs_task *tasks, int n, struct hs_graph_stats *stats);

/* Runs the tasks (deps must point to lower indices: a topological order).
 * Stops scheduling after the first failure; returns that task's rc (its
 * message in hs_last_error()), else 0.  -EINVAL for a bad dependency. */
int hs__graph_run(struct hs_task *tasks, int n, struct hs_graph_stats *stats); /* with lanes of its own */

const char *hs__lane_name(enum hs_lane lane);

#endif
