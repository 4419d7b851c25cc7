/* Routing traces: for each step, layer and token the k chosen expert ids
 * and weights, in the binary format of docs/trace-format.md (little-endian;
 * this code assumes a little-endian host, as hotset's x86-64 target is),
 * written through "<path>.part" and a rename, read with every field
 * checked. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hotset.h"
#include "planner/planner.h"
#include "base/error.h"
#include "base/jsonio.h"

#define MAGIC "HSTRACE"
/* Limits of the format (docs/trace-format.md).  Readers do work in
 * proportion to experts x records and experts x layers (`trace stats`
 * replays every layer's cache per slot count), so a small file must not
 * declare a huge expert count or thousands of layers: today's MoE models
 * have at most a few hundred experts and layers. */
#define MAX_EXPERTS 4096
#define MAX_LAYER 4095
#define MAX_USED 64
#define MAX_TOKENS (1 << 20)

struct hs_trace_writer {
	FILE *f;
	char *path, *tmp;
	int n_experts, n_used;
	long records;
};

struct rec {
	int step, layer, n;
	size_t at; /* index of its first id in ids/weights */
};

struct hs_trace {
	int n_experts, n_used, n_records;
	struct rec *recs;
	int32_t *ids;
	float *weights;
};

int hs_trace_writer_open(const char *path, int n_experts, int n_used, hs_trace_writer **out)
{
	hs_trace_writer *w;
	uint32_t head[8] = { 0 };

	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(path, -EINVAL);
	if (n_experts < 1 || n_experts > MAX_EXPERTS || n_used < 1 || n_used > MAX_USED || n_used > n_experts)
		return hs__error(EINVAL, "trace %s: %d experts, %d used (1..%d, 1..%d)", path, n_experts, n_used,
				 MAX_EXPERTS, MAX_USED);
	w = calloc(1, sizeof *w);
	if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(strlen(path) + 6))) {
		if (w)
			free(w->path);
		free(w);
		return hs__error(ENOMEM, "trace %s: out of memory", path);
	}
	sprintf(w->tmp, "%s.part", path);
	w->f = fopen(w->tmp, "wb");
	if (!w->f) {
		int e = errno;
		free(w->path);
		free(w->tmp);
		free(w);
		return hs__error(EIO, "trace %s: cannot create: %s", path, strerror(e));
	}
	w->n_experts = n_experts;
	w->n_used = n_used;
	memcpy(head, MAGIC, 8);
	head[2] = 1;
	head[3] = (uint32_t)n_experts;
	head[4] = (uint32_t)n_used;
	if (fwrite(head, sizeof head, 1, w->f) != 1) {
		int e = errno;
		hs_trace_writer_close(w, 0);
		return hs__error(EIO, "trace %s: write failed: %s", path, strerror(e));
	}
	*out = w;
	return 0;
}

int hs_trace_writer_add(hs_trace_writer *w, int step, int layer, int n_tokens, const int32_t *ids, const float *weights)
{
	HS_NEED(w, -EINVAL);
	HS_NEED(ids, -EINVAL);
	HS_NEED(weights, -EINVAL);
	uint32_t rh[4] = { (uint32_t)step, (uint32_t)layer, (uint32_t)n_tokens, 0 };
	size_t m = (size_t)n_tokens * w->n_used;

	if (step < 0 || layer < 0 || layer > MAX_LAYER || n_tokens < 1 || n_tokens > MAX_TOKENS)
		return hs__error(EINVAL, "trace %s: record step %d, layer %d (0..%d), %d tokens (1..%d)", w->path, step,
				 layer, MAX_LAYER, n_tokens, MAX_TOKENS);
	for (size_t i = 0; i < m; i++)
		if (ids[i] < -1 || ids[i] >= w->n_experts)
			return hs__error(EINVAL, "trace %s: id %d outside -1..%d", w->path, ids[i], w->n_experts - 1);
	if (fwrite(rh, sizeof rh, 1, w->f) != 1 || fwrite(ids, sizeof *ids, m, w->f) != m ||
	    fwrite(weights, sizeof *weights, m, w->f) != m)
		return hs__error(EIO, "trace %s: write failed: %s", w->path, strerror(errno));
	w->records++;
	return 0;
}

int hs_trace_writer_close(hs_trace_writer *w, int keep)
{
	int rc = 0;
	if (!w)
		return 0;
	int e = hs__finish_file(w->f, 0, w->tmp, keep ? w->path : NULL);
	if (e && keep)
		rc = hs__error(EIO, "trace %s: could not be finished: %s", w->path, strerror(e));
	free(w->path);
	free(w->tmp);
	free(w);
	return rc;
}

void hs_trace_free(hs_trace *t)
{
	if (!t)
		return;
	free(t->recs);
	free(t->ids);
	free(t->weights);
	free(t);
}

int hs_trace_load(const char *path, hs_trace **out)
{
	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(path, -EINVAL);
	FILE *f = fopen(path, "rb");
	uint32_t head[8], rh[4];
	hs_trace *t = NULL;
	size_t cap_r = 0, cap_i = 0, n_ids = 0;
	struct stat st;
	int rc = 0;

	if (!f)
		return hs__error(errno == ENOENT ? ENOENT : EIO, "trace %s: cannot open: %s", path, strerror(errno));
	if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
		fclose(f);
		return hs__error(EIO, "trace %s: not a regular file", path);
	}
	if (fread(head, sizeof head, 1, f) != 1 || memcmp(head, MAGIC, 8) != 0) {
		fclose(f);
		return hs__error(EIO, "trace %s: not a hotset trace (no %s header)", path, MAGIC);
	}
	if (head[2] != 1 || head[3] < 1 || head[3] > MAX_EXPERTS || head[4] < 1 || head[4] > MAX_USED ||
	    head[4] > head[3]) {
		fclose(f);
		return hs__error(EIO, "trace %s: version %u, %u experts, %u used (version 1, 1..%d experts, 1..%d used)",
				 path, head[2], head[3], head[4], MAX_EXPERTS, MAX_USED);
	}
	if (head[5] || head[6] || head[7]) {
		fclose(f);
		return hs__error(EIO, "trace %s: header bytes 20..31 are reserved and must be zero", path);
	}
	t = calloc(1, sizeof *t);
	if (!t) {
		fclose(f);
		return hs__error(ENOMEM, "trace %s: out of memory", path);
	}
	t->n_experts = (int)head[3];
	t->n_used = (int)head[4];
	for (;;) {
		long at = ftell(f);
		size_t got = fread(rh, sizeof rh, 1, f);
		if (got != 1) {
			if (!feof(f) || ftell(f) != at)
				rc = hs__error(EIO, "trace %s: record header at byte %ld is cut short", path, at);
			break;
		}
		if (rh[2] < 1 || rh[2] > MAX_TOKENS || rh[0] > 0x7fffffff || rh[1] > MAX_LAYER) {
			rc = hs__error(EIO, "trace %s: record at byte %ld: step %u, layer %u (0..%d), %u tokens (1..%d)", path,
				       at, rh[0], rh[1], MAX_LAYER, rh[2], MAX_TOKENS);
			break;
		}
		if (rh[3] != 0) {
			rc = hs__error(EIO, "trace %s: record at byte %ld: its reserved field is %u, not zero", path, at, rh[3]);
			break;
		}
		size_t m = (size_t)rh[2] * t->n_used;
		/* memory follows the bytes that are there, not the count declared */
		if ((uint64_t)m * 8 > (uint64_t)st.st_size - (uint64_t)at - sizeof rh) {
			rc = hs__error(EIO, "trace %s: record at byte %ld is cut short (%u tokens x %d need %llu bytes, %lld left)",
				       path, at, rh[2], t->n_used, (unsigned long long)m * 8,
				       (long long)st.st_size - at - (long long)sizeof rh);
			break;
		}
		if (t->n_records == (int)cap_r) {
			cap_r = cap_r ? 2 * cap_r : 64;
			struct rec *r = realloc(t->recs, sizeof *r * cap_r);
			if (!r) {
				rc = hs__error(ENOMEM, "trace %s: out of memory", path);
				break;
			}
			t->recs = r;
		}
		if (n_ids + m > cap_i) {
			while (n_ids + m > cap_i)
				cap_i = cap_i ? 2 * cap_i : 4096;
			int32_t *ni = realloc(t->ids, sizeof *ni * cap_i);
			if (ni)
				t->ids = ni;
			float *nw = realloc(t->weights, sizeof *nw * cap_i);
			if (nw)
				t->weights = nw;
			if (!ni || !nw) {
				rc = hs__error(ENOMEM, "trace %s: out of memory", path);
				break;
			}
		}
		if (fread(t->ids + n_ids, sizeof(int32_t), m, f) != m || fread(t->weights + n_ids, sizeof(float), m, f) != m) {
			rc = hs__error(EIO, "trace %s: record at byte %ld is cut short", path, at);
			break;
		}
		for (size_t i = 0; i < m; i++)
			if (t->ids[n_ids + i] < -1 || t->ids[n_ids + i] >= t->n_experts || !isfinite(t->weights[n_ids + i])) {
				rc = hs__error(EIO, "trace %s: record at byte %ld: id %d or weight %g out of range", path, at,
					       t->ids[n_ids + i], t->weights[n_ids + i]);
				break;
			}
		if (rc)
			break;
		t->recs[t->n_records++] = (struct rec){ (int)rh[0], (int)rh[1], (int)rh[2], n_ids };
		n_ids += m;
	}
	fclose(f);
	if (rc) {
		hs_trace_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void hs_trace_info(const hs_trace *t, int *n_records, int *n_experts, int *n_used)
{
	if (!t)
		hs__null_arg(__func__, "t");
	if (n_records)
		*n_records = t ? t->n_records : 0;
	if (n_experts)
		*n_experts = t ? t->n_experts : 0;
	if (n_used)
		*n_used = t ? t->n_used : 0;
}

int hs_trace_record(const hs_trace *t, int i, int *step, int *layer, int *n_tokens, const int32_t **ids,
		    const float **weights)
{
	HS_NEED(t, -EINVAL);
	HS_NEED(step, -EINVAL);
	HS_NEED(layer, -EINVAL);
	HS_NEED(n_tokens, -EINVAL);
	HS_NEED(ids, -EINVAL);
	HS_NEED(weights, -EINVAL);
	if (i < 0 || i >= t->n_records)
		return hs__error(EINVAL, "trace: record %d of %d", i, t->n_records);
	*step = t->recs[i].step;
	*layer = t->recs[i].layer;
	*n_tokens = t->recs[i].n;
	*ids = t->ids + t->recs[i].at;
	*weights = t->weights + t->recs[i].at;
	return 0;
}

int hs_trace_write_csv(const hs_trace *t, const char *path)
{
	HS_NEED(t, -EINVAL);
	HS_NEED(path, -EINVAL);
	char *tmp = malloc(strlen(path) + 6);
	FILE *f;
	int ok = 1;

	if (!tmp)
		return hs__error(ENOMEM, "csv %s: out of memory", path);
	sprintf(tmp, "%s.part", path);
	if (!(f = fopen(tmp, "w"))) {
		int e = errno;
		free(tmp);
		return hs__error(EIO, "csv %s: cannot create: %s", path, strerror(e));
	}
	int e = 0;
	ok = fprintf(f, "step,layer,token,slot,expert,weight\n") > 0;
	for (int r = 0; r < t->n_records && ok; r++) {
		const struct rec *c = &t->recs[r];
		for (int tok = 0; tok < c->n && ok; tok++)
			for (int j = 0; j < t->n_used && ok; j++) {
				size_t i = c->at + (size_t)tok * t->n_used + j;
				ok = fprintf(f, "%d,%d,%d,%d,%d,%.9g\n", c->step, c->layer, tok, j, t->ids[i], t->weights[i]) > 0;
			}
	}
	if (!ok)
		e = errno ? errno : EIO;
	if ((e = hs__finish_file(f, e, tmp, path))) {
		free(tmp);
		return hs__error(EIO, "csv %s: write failed: %s", path, strerror(e));
	}
	free(tmp);
	return 0;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double unit(uint64_t *s)
{
	return (double)(splitmix(s) >> 11) / 9007199254740992.0;
}

int hs_trace_generate(const char *path, int n_layers, int n_experts, int n_used, int steps, int tokens, int top_n,
		      double top_share, double locality, uint64_t seed)
{
	hs_trace_writer *w = NULL;
	int rc;

	HS_NEED(path, -EINVAL);
	if (n_layers < 1 || n_layers > 4096 || steps < 1 || tokens < 1 || tokens > MAX_TOKENS || top_n < 1 ||
	    top_n >= n_experts || !(top_share > (double)top_n / n_experts && top_share < 1) || !(locality >= 0 && locality <= 1))
		return hs__error(EINVAL,
				 "trace gen: %d layers, %d steps, %d tokens, top %d taking %.2f (more than uniform, below 1), "
				 "locality %.2f (0..1)",
				 n_layers, steps, tokens, top_n, top_share, locality);
	if ((rc = hs_trace_writer_open(path, n_experts, n_used, &w)))
		return rc;
	const double alpha = hs__zipf_alpha(n_experts, top_n, top_share);
	double *cdf = malloc(sizeof *cdf * n_experts);
	int *perm = malloc(sizeof *perm * (size_t)n_layers * n_experts);
	int32_t *ids = malloc(sizeof *ids * (size_t)tokens * n_used), *prev = malloc(sizeof *prev * (size_t)n_layers * tokens * n_used);
	float *wt = malloc(sizeof *wt * (size_t)tokens * n_used);
	if (!cdf || !perm || !ids || !prev || !wt) {
		rc = hs__error(ENOMEM, "trace gen: out of memory");
		goto out_close;
	}
	double sum = 0;
	for (int i = 0; i < n_experts; i++)
		cdf[i] = sum += pow(i + 1.0, -alpha);
	for (int i = 0; i < n_experts; i++)
		cdf[i] /= sum;
	for (int l = 0; l < n_layers; l++) { /* a different hot set per layer */
		int *p = perm + (size_t)l * n_experts;
		for (int i = 0; i < n_experts; i++)
			p[i] = i;
		for (int i = n_experts - 1; i > 0; i--) {
			int j = (int)(splitmix(&seed) % (uint64_t)(i + 1)), t = p[i];
			p[i] = p[j];
			p[j] = t;
		}
	}
	for (size_t i = 0; i < (size_t)n_layers * tokens * n_used; i++)
		prev[i] = -1;
	for (int s = 0; s < steps; s++)
		for (int l = 0; l < n_layers; l++) {
			int32_t *pv = prev + (size_t)l * tokens * n_used;
			for (int t = 0; t < tokens; t++) {
				double wsum = 0;
				for (int j = 0; j < n_used; j++) {
					int e, dup;
					do {
						if (s > 0 && unit(&seed) < locality) /* reuse one of the previous step's */
							e = pv[splitmix(&seed) % (uint64_t)(tokens * n_used)];
						else {
							double u = unit(&seed);
							int k = 0;
							while (k < n_experts - 1 && cdf[k] < u)
								k++;
							e = perm[(size_t)l * n_experts + k];
						}
						dup = e < 0;
						for (int i = 0; i < j && !dup; i++)
							dup = ids[t * n_used + i] == e;
					} while (dup);
					ids[t * n_used + j] = e;
					wt[t * n_used + j] = (float)(0.1 + unit(&seed));
					wsum += wt[t * n_used + j];
				}
				for (int j = 0; j < n_used; j++)
					wt[t * n_used + j] = (float)(wt[t * n_used + j] / wsum);
			}
			if ((rc = hs_trace_writer_add(w, s, l, tokens, ids, wt)))
				goto out_close;
			memcpy(pv, ids, sizeof *ids * (size_t)tokens * n_used);
		}
out_close:
	free(cdf);
	free(perm);
	free(ids);
	free(prev);
	free(wt);
	int rc2 = hs_trace_writer_close(w, rc == 0);
	return rc ? rc : rc2;
}
