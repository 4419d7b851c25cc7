/* `hotset bench`'s inputs: the model (given, or generated once into the
 * cache directory) and the routing (a recorded or synthetic trace), with the
 * hit rates the cache policy gets on it replayed through the simulator. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gen.h"
#include "tools/bench.h"
#include "tools/tools.h"

/* ---- the model ------------------------------------------------------------- */

struct gen_progress {
	double last;
};

static void gen_progress(void *ctx, uint64_t done, uint64_t total)
{
	struct gen_progress *g = ctx;
	double t = hs_bench_now();
	if (t - g->last < 1 && done < total)
		return;
	g->last = t;
	hs_bench_note("\r  writing %.0f of %.0f MiB", done / 1048576.0, total / 1048576.0);
	if (done >= total)
		hs_bench_note("\n");
}

/* The generated model's path in the cache directory (made if missing),
 * else in $TMPDIR (*temp = 1: removed at the end). */
static void model_path(const struct hs_gen_params *p, const char *preset, char *buf, size_t n, int *temp)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME"), *tmp = getenv("TMPDIR");
	char dir[2048];
	*temp = 0;
	if (xdg && *xdg)
		snprintf(dir, sizeof dir, "%s/hotset", xdg);
	else if (home && *home)
		snprintf(dir, sizeof dir, "%s/.cache/hotset", home);
	else
		dir[0] = 0;
	if (dir[0]) {
		char parent[2048];
		snprintf(parent, sizeof parent, "%s", dir);
		char *slash = strrchr(parent, '/');
		if (slash)
			*slash = 0;
		mkdir(parent, 0755);
		mkdir(dir, 0755);
	}
	if (!dir[0] || access(dir, W_OK) != 0) {
		snprintf(dir, sizeof dir, "%s", tmp && *tmp ? tmp : "/tmp");
		*temp = 1;
	}
	if (*temp)
		snprintf(buf, n, "%s/hotset-bench-%ld-%s-L%d-E%d.gguf", dir, (long)getpid(), preset, p->n_layers,
			 p->n_experts);
	else
		snprintf(buf, n, "%s/bench-%s-L%d-E%d-s%llu.gguf", dir, preset, p->n_layers, p->n_experts,
			 (unsigned long long)p->seed);
}

int hs_bench_prepare_model(const struct bench_cfg *c, char *path, size_t n, int *temp, hs_model **m)
{
	*temp = 0;
	if (c->model) {
		snprintf(path, n, "%s", c->model);
		if (hs_model_open(path, m))
			return hs_cli_fail("bench", "%s", hs_last_error());
		return 0;
	}
	const char *preset = c->preset ? c->preset : "gpt-oss-120b";
	const struct hs_gen_params *pp = hs__gen_preset(preset);
	if (!pp)
		return hs_cli_fail("bench", "--preset '%s': one of %s", preset, hs__gen_preset_names());
	struct hs_gen_params p = *pp;
	p.n_layers = c->layers > 0 ? c->layers : 2;
	if (c->experts > 0)
		p.n_experts = c->experts;
	else if (!c->preset)
		p.n_experts = 32;
	p.name = "hotset bench";
	p.moe_only = 1; /* the MoE layers are what this bench measures */
	if (hs__gen_check(&p))
		return hs_cli_fail("bench", "%s", hs_last_error());
	model_path(&p, preset, path, n, temp);
	if (!*temp && hs_model_open(path, m) == 0) {
		const struct hs_model_info *in = hs_model_info(*m);
		if (in->n_moe_layers == p.n_layers && in->n_experts == p.n_experts && in->n_used == p.n_used &&
		    in->n_embd == p.n_embd && in->n_ff == p.n_ff) {
			hs_bench_note("model: %s (generated earlier, reused)\n", path);
			return 0;
		}
		hs_model_free(*m);
		*m = NULL;
	}
	hs_bench_note("model: generating %s (%.0f MiB, once)\n", path, hs__gen_data_bytes(&p) / 1048576.0);
	struct gen_progress g = { 0 };
	if (hs__gen_write(&p, path, hs_bench_quiet ? NULL : gen_progress, &g) || hs_model_open(path, m)) {
		if (*temp)
			unlink(path);
		return hs_cli_fail("bench", "%s", hs_last_error());
	}
	return 0;
}

/* ---- routing --------------------------------------------------------------- */

void hs_bench_routing_free(struct bench_routing *r)
{
	for (int l = 0; l < r->n_layers && r->rec; l++)
		free(r->rec[l]);
	free(r->rec);
	free(r->n_rec);
	free(r->block);
	free(r->freq);
	hs_trace_free(r->t);
}

int hs_bench_routing_load(const char *path, const char *shown, hs_model *m, struct bench_routing *r)
{
	const struct hs_model_info *in = hs_model_info(m);
	int n_records, E, k;
	memset(r, 0, sizeof *r);
	if (hs_trace_load(path, &r->t))
		return hs_cli_fail("bench", "%s", hs_last_error());
	hs_trace_info(r->t, &n_records, &E, &k);
	if (E != in->n_experts || k != in->n_used)
		return hs_cli_fail("bench", "trace %s: %d experts, %d per token; the model has %d and %d", shown, E, k,
				   in->n_experts, in->n_used);
	r->E = E;
	r->k = k;
	r->n_layers = in->n_moe_layers;
	r->block = calloc(r->n_layers, sizeof *r->block);
	r->rec = calloc(r->n_layers, sizeof *r->rec);
	r->n_rec = calloc(r->n_layers, sizeof *r->n_rec);
	r->freq = calloc((size_t)r->n_layers * E, sizeof *r->freq);
	if (!r->block || !r->rec || !r->n_rec || !r->freq)
		return hs_cli_fail("bench", "out of memory");
	for (int b = 0, l = 0; b < in->n_layers; b++)
		if (hs_model_layer_is_moe(m, b))
			r->block[l++] = b;
	r->tokens = 1 << 30;
	for (int l = 0; l < r->n_layers; l++) {
		if (!(r->rec[l] = malloc(sizeof(int) * (n_records > 0 ? n_records : 1))))
			return hs_cli_fail("bench", "out of memory");
		double pairs = 0;
		for (int i = 0; i < n_records; i++) {
			int step, layer, n;
			const int32_t *ids;
			const float *w;
			hs_trace_record(r->t, i, &step, &layer, &n, &ids, &w);
			if (layer != r->block[l])
				continue;
			r->rec[l][r->n_rec[l]++] = i;
			if (n < r->tokens)
				r->tokens = n;
			for (int p = 0; p < n * k; p++)
				if (ids[p] >= 0) {
					r->freq[(size_t)l * E + ids[p]]++;
					pairs++;
				}
		}
		if (!r->n_rec[l])
			return hs_cli_fail("bench", "trace %s: no records for layer %d", shown, r->block[l]);
		for (int e = 0; e < E; e++)
			r->freq[(size_t)l * E + e] /= (float)(pairs > 0 ? pairs : 1);
	}
	return 0;
}

/* The routing of MoE layer l at step s for a batch of B tokens: the
 * tokens of consecutive records from record s * ceil(B / T) (wrapping). */
void hs_bench_routing_step(const struct bench_routing *r, int l, int s, int B, int32_t *ids, float *w)
{
	const int per = (B + r->tokens - 1) / r->tokens;
	int got = 0;
	for (int j = 0; got < B; j++) {
		int step, layer, n;
		const int32_t *ri;
		const float *rw;
		hs_trace_record(r->t, r->rec[l][((long)s * per + j) % r->n_rec[l]], &step, &layer, &n, &ri, &rw);
		int take = n < B - got ? n : B - got;
		memcpy(ids + (size_t)got * r->k, ri, sizeof(int32_t) * (size_t)take * r->k);
		memcpy(w + (size_t)got * r->k, rw, sizeof(float) * (size_t)take * r->k);
		got += take;
	}
}

struct bench_hits hs_bench_predicted_hits(const struct bench_routing *r, int l, int B, int slots, const char *policy, int warm,
				  int steps, int stream)
{
	struct bench_hits out = { 0, 0 };
	enum hs_cache_policy p = !strcmp(policy, "lfu")	   ? HS_CACHE_LFU
				 : !strcmp(policy, "lfru")   ? HS_CACHE_LFRU
				 : !strcmp(policy, "static") ? HS_CACHE_STATIC
							     : HS_CACHE_LRU;
	int cap = 1;
	if (stream) {
		slots += 2 * r->k;
		p = HS_CACHE_LRU;
		cap = -1;
	}
	if (slots <= 0)
		return out;
	if (slots > r->E)
		slots = r->E;
	const int n = warm + steps, P = B * r->k;
	int *off = malloc(sizeof(int) * (n + 1)), *pairs = malloc(sizeof(int) * (size_t)n * P);
	int32_t *ex = malloc(sizeof(int32_t) * (size_t)n * P), *ids = malloc(sizeof(int32_t) * P);
	float *w = malloc(sizeof(float) * P);
	int *cnt = calloc(r->E, sizeof(int));
	if (!off || !pairs || !ex || !ids || !w || !cnt)
		goto out_free;
	off[0] = 0;
	for (int s = 0; s < n; s++) {
		hs_bench_routing_step(r, l, s, B, ids, w);
		memset(cnt, 0, sizeof(int) * r->E);
		for (int i = 0; i < P; i++)
			if (ids[i] >= 0 && ids[i] < r->E)
				cnt[ids[i]]++;
		off[s + 1] = off[s];
		for (int e = 0; e < r->E; e++)
			if (cnt[e]) {
				ex[off[s + 1]] = e;
				pairs[off[s + 1]++] = cnt[e];
			}
	}
	struct hs_cache_result a, b;
	const float *freq = stream && slots == 2 * r->k ? NULL : r->freq + (size_t)l * r->E;
	if (hs_cache_simulate(p, r->E, slots, cap, warm, off, ex, pairs, freq, &a) == 0 &&
	    hs_cache_simulate(p, r->E, slots, cap, n, off, ex, pairs, freq, &b) == 0 && b.accesses > a.accesses) {
		out.h = (double)(b.hits - a.hits) / (double)(b.accesses - a.accesses);
		out.adm = stream ? 0 : (double)(b.admissions - a.admissions) / steps;
	}
out_free:
	free(off);
	free(pairs);
	free(ex);
	free(ids);
	free(w);
	free(cnt);
	return out;
}
