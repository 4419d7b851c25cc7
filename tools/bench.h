/* The pieces of `hotset bench` (cmd-bench.c, bench-inputs.c,
 * bench-output.c, svg.c): its settings, inputs, table rows and outputs. */
#ifndef HS_BENCH_H
#define HS_BENCH_H

#include <stdio.h>

#include "hotset.h"
#include "planner/planner.h"

struct hs_bench_row {
	char mode[8];         /* cpu, stream, hybrid or auto, as asked */
	char ran[16];         /* the mode that ran (auto: the planner's choice) */
	int batch, slots;
	double tok_s, tok_lo, tok_hi;  /* median and quartiles of the measured steps */
	double pred_tok_s;             /* the cost model's */
	double hit, hit_pred;          /* share of (token, expert) pairs on the device */
	double host_bpt, pcie_bpt;     /* expert bytes per token: CPU-read, copied */
	double cpu_busy, gpu_busy, copy_busy; /* shares of the layers' wall time */
	double overlap;                /* lane busy time / wall time */
	double q;                      /* streamed share of misses (hybrid, auto) */
	char bound[32];
};

/* ---- what the pieces of `hotset bench` share ----------------------------------- */

#define HS_BENCH_MAX_LIST 16

/* The command's settings. */
struct bench_cfg {
	const char *model, *preset, *trace, *skew, *device, *policy, *csv, *plot;
	int layers, experts, threads, steps, warmup, json, quiet;
	double pcie;
	int modes[4], n_modes; /* indices into hs_bench_mode_names */
	int batch[HS_BENCH_MAX_LIST], n_batch;
	int slots[HS_BENCH_MAX_LIST], n_slots;
};

extern const char *const hs_bench_mode_names[4]; /* cpu, stream, hybrid, auto */

/* Progress on stderr unless hs_bench_quiet (-q). */
extern int hs_bench_quiet;
void hs_bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
double hs_bench_now(void);
/* A new empty file in $TMPDIR (else /tmp); its path in buf, its fd or -1. */
int hs_bench_temp_file(char *buf, size_t n);

/* The model: --model, or the preset generated once into the cache directory
 * (else into $TMPDIR: *temp = 1, removed at the end); 1 after one line. */
int hs_bench_prepare_model(const struct bench_cfg *c, char *path, size_t n, int *temp, hs_model **m);

/* The routing of each MoE layer, from a trace. */
struct bench_routing {
	hs_trace *t;
	int n_layers;          /* MoE layers of the model */
	int *block;            /* [n_layers] block index of each */
	int **rec;             /* [n_layers][n_rec[l]] record indices in order */
	int *n_rec;
	int tokens;            /* tokens per record (the smallest) */
	float *freq;           /* [n_layers][E] share of pairs */
	int E, k;
};
int hs_bench_routing_load(const char *path, const char *shown, hs_model *m, struct bench_routing *r);
void hs_bench_routing_free(struct bench_routing *r);
/* The routing of MoE layer l at step s for a batch of B tokens: the
 * tokens of consecutive records from record s * ceil(B / T) (wrapping). */
void hs_bench_routing_step(const struct bench_routing *r, int l, int s, int B, int32_t *ids, float *w);
/* What the cache gets on the measured steps (after `warm`), by replaying
 * the same routing through the cache simulator: the share of pairs that
 * hit, and admissions per step.  stream: the runtime's staging slots keep
 * the experts streamed last (a hot one stays while it is hit), so they
 * act as 2k more slots that take every miss. */
struct bench_hits {
	double h, adm;
};
struct bench_hits hs_bench_predicted_hits(const struct bench_routing *r, int l, int B, int slots, const char *policy,
					  int warm, int steps, int stream);

/* One run of the bench: its settings, model, routing and rates. */
struct bench_run {
	const struct bench_cfg *c;
	hs_model *m;
	const struct bench_routing *r;
	struct hs__rates rates;            /* the current slot group's */
	struct hs__rates group[HS_BENCH_MAX_LIST];  /* measured before each slot group */
	struct hs__layer_step shape;
	float *x, *y, *w;
	int32_t *ids;
};

void hs_bench_print_table(const struct hs_bench_row *rows, int n, FILE *f);
/* Per batch size: which mode wins at each slot count, and by how much. */
void hs_bench_verdict(const struct hs_bench_row *rows, int n, const struct bench_cfg *c, FILE *f);
int hs_bench_write_csv(const char *path, const struct hs_bench_row *rows, int n);
void hs_bench_print_json(const struct hs_bench_row *rows, int n, const char *machine, const struct bench_run *u,
			 const char *device);
/* gnuplot when it is installed (SVG or PNG by the file's ending), else the
 * built-in SVG; 1 after one line. */
int hs_bench_plot(const char *path, const char *title, const struct hs_bench_row *rows, int n,
		  const struct bench_cfg *c);

/* An SVG picture: tokens/s against cache slots (one batch) and against
 * batch size (one slot count), measured solid, predicted dashed, one colour
 * per mode.  Written to path through "<path>.part". */
int hs_bench_svg(const char *path, const char *title, const struct hs_bench_row *rows, int n, int batch, int slots);

#endif
