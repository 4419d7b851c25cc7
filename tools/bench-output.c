/* `hotset bench`'s outputs: the table and the verdict, CSV, JSON and the
 * plot (gnuplot when installed, else the built-in SVG of svg.c). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#include "base/jsonio.h"
#include "tools/bench.h"
#include "tools/tools.h"

/* ---- output ---------------------------------------------------------------- */

void hs_bench_print_table(const struct hs_bench_row *rows, int n, FILE *f)
{
	fprintf(f, "%-7s %-12s %5s %5s %9s %7s %9s %6s %5s %5s %8s %8s %5s %5s %5s %5s  %s\n", "mode", "ran", "batch",
		"slots", "tok/s", "range", "predicted", "ratio", "hit", "pred", "host/tok", "pcie/tok", "cpu", "gpu",
		"copy", "ovl", "bound (predicted)");
	for (int i = 0; i < n; i++) {
		const struct hs_bench_row *r = &rows[i];
		char range[16];
		snprintf(range, sizeof range, "+-%.0f%%", r->tok_s > 0 ? 50 * (r->tok_hi - r->tok_lo) / r->tok_s : 0);
		fprintf(f, "%-7s %-12s %5d %5d %9.1f %7s %9.1f %6.2f %4.0f%% %4.0f%% %6.1fMi %6.1fMi %4.0f%% %4.0f%% %4.0f%% %5.2f  %s\n",
			r->mode, r->ran, r->batch, r->slots, r->tok_s, range, r->pred_tok_s,
			r->pred_tok_s > 0 ? r->tok_s / r->pred_tok_s : 0, 100 * r->hit, 100 * r->hit_pred,
			r->host_bpt / 1048576, r->pcie_bpt / 1048576, 100 * r->cpu_busy, 100 * r->gpu_busy,
			100 * r->copy_busy, r->overlap, r->bound);
	}
}

/* per batch size: which mode wins at each slot count, and by how much over
 * the next one */
void hs_bench_verdict(const struct hs_bench_row *rows, int n, const struct bench_cfg *c, FILE *f)
{
	for (int b = 0; b < c->n_batch; b++) {
		const int B = c->batch[b];
		char line[1024];
		int len = snprintf(line, sizeof line, "verdict, %s (batch %d):", B == 1 ? "decode" : "prefill", B);
		for (int s = 0; s < c->n_slots; s++) {
			int best = -1, second = -1;
			for (int i = 0; i < n; i++) {
				if (rows[i].batch != B || rows[i].slots != c->slots[s] || !strcmp(rows[i].mode, "auto"))
					continue;
				if (best < 0 || rows[i].tok_s > rows[best].tok_s) {
					second = best;
					best = i;
				} else if (second < 0 || rows[i].tok_s > rows[second].tok_s) {
					second = i;
				}
			}
			if (best < 0 || len >= (int)sizeof line)
				continue;
			if (second >= 0)
				len += snprintf(line + len, sizeof line - len, "%s %d slots: %s, %.2fx %s", s ? ";" : "",
						c->slots[s], rows[best].mode, rows[best].tok_s / rows[second].tok_s,
						rows[second].mode);
			else
				len += snprintf(line + len, sizeof line - len, "%s %d slots: %s", s ? ";" : "", c->slots[s],
						rows[best].mode);
		}
		fprintf(f, "%s\n", line);
	}
}

int hs_bench_write_csv(const char *path, const struct hs_bench_row *rows, int n)
{
	char part[4096];
	snprintf(part, sizeof part, "%s.part", path);
	FILE *f = fopen(part, "w");
	if (!f)
		return hs_cli_fail("bench", "--csv %s: %s", path, strerror(errno));
	fprintf(f, "mode,ran,batch,slots,tok_s,tok_s_p25,tok_s_p75,predicted_tok_s,ratio,hit,hit_predicted,"
		   "host_bytes_per_token,pcie_bytes_per_token,cpu_busy,gpu_busy,copy_busy,overlap,q,bound\n");
	for (int i = 0; i < n; i++) {
		const struct hs_bench_row *r = &rows[i];
		fprintf(f, "%s,%s,%d,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.0f,%.0f,%.4f,%.4f,%.4f,%.4f,%.4f,%s\n", r->mode,
			r->ran, r->batch, r->slots, r->tok_s, r->tok_lo, r->tok_hi, r->pred_tok_s,
			r->pred_tok_s > 0 ? r->tok_s / r->pred_tok_s : 0, r->hit, r->hit_pred, r->host_bpt, r->pcie_bpt,
			r->cpu_busy, r->gpu_busy, r->copy_busy, r->overlap, r->q, r->bound);
	}
	int e = hs__finish_file(f, ferror(f) ? EIO : 0, part, path);
	if (e)
		return hs_cli_fail("bench", "--csv %s: write failed: %s", path, strerror(e));
	return 0;
}

static void print_rates_json(const struct hs__rates *rt, int slots, int last)
{
	printf("    { \"slots\": %d, \"host_read_gbps\": %.3f, \"cpu_kernel_gbps\": %.3f, \"cpu_gflops\": %.3f, "
	       "\"pcie_gbps\": %.3f, \"gpu_gbps\": %.3f, \"gpu_gflops\": %.3f, \"handoff_us\": %.1f, "
	       "\"step_us\": %.1f }%s\n",
	       slots, rt->read_Bps / 1e9, rt->cpu_Bps / 1e9, rt->cpu_flops / 1e9, rt->pcie_Bps / 1e9, rt->gpu_Bps / 1e9,
	       rt->gpu_flops / 1e9, rt->sync_s * 1e6, rt->step_s * 1e6, last ? "" : ",");
}

void hs_bench_print_json(const struct hs_bench_row *rows, int n, const char *machine, const struct bench_run *u,
		       const char *device)
{
	const struct bench_cfg *c = u->c;
	printf("{\n  \"hotset_bench\": 1,\n  \"label\": \"measurements, with the cost model's predictions\",\n");
	printf("  \"machine\": \"%s\",\n  \"device\": \"%s\",\n", machine, device);
	printf("  \"rates\": [\n");
	for (int g = 0; g < c->n_slots; g++)
		print_rates_json(&u->group[g], c->slots[g], g + 1 == c->n_slots);
	printf("  ],\n");
	printf("  \"rows\": [\n");
	for (int i = 0; i < n; i++) {
		const struct hs_bench_row *r = &rows[i];
		printf("    { \"mode\": \"%s\", \"ran\": \"%s\", \"batch\": %d, \"slots\": %d, \"tok_s\": %.3f, "
		       "\"tok_s_p25\": %.3f, \"tok_s_p75\": %.3f, \"predicted_tok_s\": %.3f, \"hit\": %.4f, "
		       "\"hit_predicted\": %.4f, \"host_bytes_per_token\": %.0f, \"pcie_bytes_per_token\": %.0f, "
		       "\"cpu_busy\": %.4f, \"gpu_busy\": %.4f, \"copy_busy\": %.4f, \"overlap\": %.4f, \"q\": %.4f, "
		       "\"bound\": \"%s\" }%s\n",
		       r->mode, r->ran, r->batch, r->slots, r->tok_s, r->tok_lo, r->tok_hi, r->pred_tok_s, r->hit,
		       r->hit_pred, r->host_bpt, r->pcie_bpt, r->cpu_busy, r->gpu_busy, r->copy_busy, r->overlap, r->q,
		       r->bound, i + 1 < n ? "," : "");
	}
	printf("  ]\n}\n");
}

/* A gnuplot single-quoted string: quotes doubled, control characters out
 * (the title comes from the model file). */
static void gp_string(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("''", f);
		else
			fputc((unsigned char)*s < 32 ? ' ' : *s, f);
	fputc('\'', f);
}

/* Runs gnuplot on the script (no shell: paths and the title stay data);
 * 0 when it ran and succeeded, -ENOENT when it is not installed. */
static int run_gnuplot(const char *script)
{
	char *const args[] = { "gnuplot", (char *)script, NULL };
	pid_t pid;
	int st;
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	int rc = posix_spawnp(&pid, "gnuplot", &fa, NULL, args, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc)
		return -rc;
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* gnuplot when it is installed (SVG or PNG by the file's ending), else the
 * built-in SVG */
int hs_bench_plot(const char *path, const char *title, const struct hs_bench_row *rows, int n, const struct bench_cfg *c)
{
	const int B = c->batch[0], S = c->slots[c->n_slots - 1];
	const char *dot = strrchr(path, '.');
	const int png = dot && !strcmp(dot, ".png");
	char dat[4096], gp[4100], part[4100];
	snprintf(part, sizeof part, "%s.part", path);
	int fd = hs_bench_temp_file(dat, sizeof dat), rc = -ENOENT;
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (f) {
		for (int m = 0; m < 4; m++) /* blocks: by slots then by batch, per mode */
			for (int by = 0; by < 2; by++) {
				fprintf(f, "# %s %s\n", hs_bench_mode_names[m], by ? "batch" : "slots");
				for (int i = 0; i < n; i++)
					if (!strcmp(rows[i].mode, hs_bench_mode_names[m]) && (by ? rows[i].slots == S : rows[i].batch == B))
						fprintf(f, "%d %.3f %.3f\n", by ? rows[i].batch : rows[i].slots, rows[i].tok_s,
							rows[i].pred_tok_s);
				fprintf(f, "\n\n");
			}
		fclose(f);
		snprintf(gp, sizeof gp, "%s.gp", dat);
		FILE *g = fopen(gp, "w");
		if (g) {
			fprintf(g, "set terminal %s size 900,420\nset output ", png ? "pngcairo" : "svg");
			gp_string(g, part);
			fprintf(g, "\nset multiplot layout 1,2 title ");
			gp_string(g, title);
			fprintf(g, "\nset key bottom\nset ylabel 'tokens/s'\n");
			for (int by = 0; by < 2; by++) {
				if (by)
					fprintf(g, "set logscale x 2\nset xlabel 'batch, %d slots (dashed: predicted)'\n", S);
				else
					fprintf(g, "set xlabel 'GPU cache slots, batch %d (dashed: predicted)'\n", B);
				fprintf(g, "plot for [m=0:3] ");
				gp_string(g, dat);
				fprintf(g, " index 2*m+%d using 1:2 with linespoints lc m+1 title word('cpu stream hybrid auto', m+1), "
					   "for [m=0:3] ", by);
				gp_string(g, dat);
				fprintf(g, " index 2*m+%d using 1:3 with lines dt 2 lc m+1 notitle\n", by);
			}
			fprintf(g, "unset multiplot\n");
			rc = fclose(g) ? -EIO : run_gnuplot(gp);
			unlink(gp);
		}
		unlink(dat);
	}
	if (rc == 0 && rename(part, path) == 0)
		return 0;
	unlink(part);
	if (rc != -ENOENT)
		hs_bench_note("plot: gnuplot failed; writing the built-in SVG instead\n");
	if (png)
		return hs_cli_fail("bench", "--plot %s: PNG needs gnuplot, which %s; use a .svg name", path,
				   rc == -ENOENT ? "is not installed" : "failed");
	rc = hs_bench_svg(path, title, rows, n, B, S);
	if (rc)
		return hs_cli_fail("bench", "--plot %s: %s", path, strerror(-rc));
	return 0;
}
