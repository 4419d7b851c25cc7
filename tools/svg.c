/* `hotset bench --plot` without gnuplot: a self-contained SVG with two
 * panels, written by hand (no dependency). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/jsonio.h"
#include "tools/bench.h"

static const char *const MODES[] = { "cpu", "stream", "hybrid", "auto" };
static const char *const COLOURS[] = { "#1f77b4", "#d62728", "#2ca02c", "#9467bd" };

struct panel {
	double x0, y0, w, h;     /* plot area in SVG units */
	double xmin, xmax, ymax;
	int logx;
};

static double px(const struct panel *p, double x)
{
	double a = p->logx ? log2(x) : x, lo = p->logx ? log2(p->xmin) : p->xmin, hi = p->logx ? log2(p->xmax) : p->xmax;
	return p->x0 + (hi > lo ? (a - lo) / (hi - lo) : 0.5) * p->w;
}

static double py(const struct panel *p, double y)
{
	return p->y0 + p->h - (p->ymax > 0 ? y / p->ymax : 0) * p->h;
}

static double nice_max(double v)
{
	if (v <= 0)
		return 1;
	double e = pow(10, floor(log10(v))), m = v / e;
	return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * e;
}

/* one panel: x = slots (by_batch 0) or batch (by_batch 1) */
static void draw(FILE *f, const struct hs_bench_row *r, int n, int by_batch, int fixed, double x0, const char *xlabel,
		 const char *title)
{
	struct panel p = { x0 + 60, 50, 340, 260, INFINITY, -INFINITY, 0, by_batch };
	int any = 0;
	for (int i = 0; i < n; i++) {
		if ((by_batch ? r[i].slots : r[i].batch) != fixed)
			continue;
		double x = by_batch ? r[i].batch : r[i].slots;
		p.xmin = fmin(p.xmin, x);
		p.xmax = fmax(p.xmax, x);
		p.ymax = fmax(p.ymax, fmax(r[i].tok_s, r[i].pred_tok_s));
		any = 1;
	}
	fprintf(f, "<text x=\"%.0f\" y=\"30\" font-size=\"14\">%s</text>\n", x0 + 60, title);
	if (!any) {
		fprintf(f, "<text x=\"%.0f\" y=\"180\" font-size=\"12\">(no rows)</text>\n", x0 + 120);
		return;
	}
	p.ymax = nice_max(p.ymax * 1.05);
	fprintf(f, "<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#444\"/>\n", p.x0,
		p.y0, p.w, p.h);
	for (int t = 0; t <= 5; t++) { /* y grid */
		double y = p.ymax * t / 5;
		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"end\">%g</text>\n",
			p.x0, py(&p, y), p.x0 + p.w, py(&p, y), p.x0 - 4, py(&p, y) + 3, y);
	}
	/* x ticks: the values present */
	double seen[64];
	int ns = 0;
	for (int i = 0; i < n && ns < 64; i++) {
		if ((by_batch ? r[i].slots : r[i].batch) != fixed)
			continue;
		double x = by_batch ? r[i].batch : r[i].slots;
		int dup = 0;
		for (int j = 0; j < ns; j++)
			dup |= seen[j] == x;
		if (dup)
			continue;
		seen[ns++] = x;
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"10\" text-anchor=\"middle\">%g</text>\n", px(&p, x),
			p.y0 + p.h + 14, x);
	}
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", p.x0 + p.w / 2,
		p.y0 + p.h + 32, xlabel);
	fprintf(f,
		"<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\" "
		"transform=\"rotate(-90 %.1f %.1f)\">tokens/s</text>\n",
		x0 + 18, p.y0 + p.h / 2, x0 + 18, p.y0 + p.h / 2);
	for (int m = 0; m < 4; m++) {
		for (int pred = 0; pred < 2; pred++) {
			int first = 1;
			fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", COLOURS[m],
				pred ? " stroke-dasharray=\"5,4\"" : "");
			double last = -INFINITY;
			for (;;) { /* ascending x without sorting the rows */
				double best = INFINITY;
				int at = -1;
				for (int i = 0; i < n; i++) {
					if (strcmp(r[i].mode, MODES[m]) || (by_batch ? r[i].slots : r[i].batch) != fixed)
						continue;
					double x = by_batch ? r[i].batch : r[i].slots;
					if (x > last && x < best) {
						best = x;
						at = i;
					}
				}
				if (at < 0)
					break;
				last = best;
				fprintf(f, "%s%.1f,%.1f", first ? "" : " ", px(&p, best),
					py(&p, pred ? r[at].pred_tok_s : r[at].tok_s));
				first = 0;
			}
			fprintf(f, "\"/>\n");
			if (pred)
				continue;
			for (int i = 0; i < n; i++) /* the measured points */
				if (!strcmp(r[i].mode, MODES[m]) && (by_batch ? r[i].slots : r[i].batch) == fixed)
					fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
						px(&p, by_batch ? r[i].batch : r[i].slots), py(&p, r[i].tok_s), COLOURS[m]);
		}
	}
}

int hs_bench_svg(const char *path, const char *title, const struct hs_bench_row *rows, int n, int batch, int slots)
{
	char part[4096];
	if (snprintf(part, sizeof part, "%s.part", path) >= (int)sizeof part)
		return -ENAMETOOLONG;
	FILE *f = fopen(part, "w");
	if (!f)
		return -errno;
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" height=\"420\" "
		   "font-family=\"sans-serif\">\n<rect width=\"900\" height=\"420\" fill=\"white\"/>\n");
	fprintf(f, "<text x=\"450\" y=\"16\" font-size=\"13\" text-anchor=\"middle\">");
	for (const char *c = title; *c; c++) /* the title is the only free text */
		if (*c == '<')
			fputs("&lt;", f);
		else if (*c == '&')
			fputs("&amp;", f);
		else
			fputc(*c, f);
	fprintf(f, "</text>\n");
	char t1[64], t2[64];
	snprintf(t1, sizeof t1, "batch %d: against cache slots", batch);
	snprintf(t2, sizeof t2, "%d slots: against batch size", slots);
	draw(f, rows, n, 0, batch, 0, "GPU cache slots per layer", t1);
	draw(f, rows, n, 1, slots, 450, "batch (tokens, log scale)", t2);
	for (int m = 0; m < 4; m++)
		fprintf(f,
			"<line x1=\"%d\" y1=\"395\" x2=\"%d\" y2=\"395\" stroke=\"%s\" stroke-width=\"2\"/>"
			"<text x=\"%d\" y=\"399\" font-size=\"11\">%s</text>\n",
			60 + 120 * m, 85 + 120 * m, COLOURS[m], 90 + 120 * m, MODES[m]);
	fprintf(f, "<text x=\"560\" y=\"399\" font-size=\"11\">solid with dots: measured; dashed: predicted</text>\n"
		   "</svg>\n");
	return -hs__finish_file(f, ferror(f) ? EIO : 0, part, path);
}
