/* `hotset bench`'s table rows and the picture drawn from them. */
#ifndef HS_BENCH_H
#define HS_BENCH_H

#include <stdio.h>

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

/* An SVG picture: tokens/s against cache slots (one batch) and against
 * batch size (one slot count), measured solid, predicted dashed, one colour
 * per mode.  Written to path through "<path>.part". */
int hs_bench_svg(const char *path, const char *title, const struct hs_bench_row *rows, int n, int batch, int slots);

#endif
