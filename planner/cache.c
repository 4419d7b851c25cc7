/* Expert cache policies replayed over a routing sequence of one layer:
 * what hit rate a given number of GPU slots gets with LRU, LFU, LFRU
 * (frequency-weighted recency), a static set (the most used experts), no
 * cache, and the offline optimum (Belady: evict the expert needed furthest
 * in the future), which no policy can beat.  Pure code: the planner and
 * `hotset trace stats` use it; the runtime's admissions follow the same
 * rules.
 *
 * A step is the set of distinct experts one layer-step routes to, each with
 * its number of (token, expert) pairs; hits and accesses count pairs.  After
 * the step's hits, its misses are admitted (the busiest first), at most
 * admit_cap per step (-1: no cap), each replacing the policy's victim among
 * the experts this step did not use.  With expert frequencies (a saved
 * routing profile) every policy starts warm, holding the most frequent
 * experts; without, cold (empty). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "base/error.h"

#define LFRU_DECAY 0.9 /* per step: a use 7 steps ago weighs about half */

const char *hs_cache_policy_name(enum hs_cache_policy p)
{
	static const char *const names[] = { "none", "lru", "lfu", "lfru", "static", "belady" };
	return p >= HS_CACHE_NONE && p <= HS_CACHE_BELADY ? names[p] : "?";
}

struct sim {
	int E, slots, n_cached;
	int *in;          /* [E] 1 when cached */
	long *last;       /* [E] last step used (-1 never) */
	long *count;      /* [E] pairs so far */
	double *score;    /* [E] LFRU score */
	long *score_at;   /* [E] step the score was last decayed to */
	/* Belady: the steps using each expert (CSR) and a cursor per expert */
	int *occ_off, *occ_cur;
	long *occ;
	int *occ_pairs;   /* pairs of that use */
};

/* next step > s at which expert e is used, or LONG_MAX (s never decreases) */
static long next_use(struct sim *m, int e, long s)
{
	while (m->occ_cur[e] < m->occ_off[e + 1] && m->occ[m->occ_cur[e]] <= s)
		m->occ_cur[e]++;
	return m->occ_cur[e] < m->occ_off[e + 1] ? m->occ[m->occ_cur[e]] : 0x7fffffffffffffffL;
}

static int index_uses(struct sim *m, int n_steps, const int *off, const int32_t *experts, const int *pairs)
{
	const int total = n_steps ? off[n_steps] : 0;
	m->occ_off = calloc(m->E + 1, sizeof *m->occ_off);
	m->occ_cur = calloc(m->E, sizeof *m->occ_cur);
	m->occ = malloc(sizeof *m->occ * (total ? total : 1));
	m->occ_pairs = malloc(sizeof *m->occ_pairs * (total ? total : 1));
	if (!m->occ_off || !m->occ_cur || !m->occ || !m->occ_pairs)
		return hs__error(ENOMEM, "cache: out of memory");
	for (int i = 0; i < total; i++)
		if (experts[i] >= 0 && experts[i] < m->E)
			m->occ_off[experts[i] + 1]++;
	for (int e = 0; e < m->E; e++)
		m->occ_off[e + 1] += m->occ_off[e];
	for (int e = 0; e < m->E; e++)
		m->occ_cur[e] = m->occ_off[e];
	for (long s = 0; s < n_steps; s++) /* steps ascend, so each list is sorted */
		for (int i = off[s]; i < off[s + 1]; i++)
			if (experts[i] >= 0 && experts[i] < m->E) {
				m->occ_pairs[m->occ_cur[experts[i]]] = pairs[i];
				m->occ[m->occ_cur[experts[i]]++] = s;
			}
	for (int e = 0; e < m->E; e++)
		m->occ_cur[e] = m->occ_off[e];
	return 0;
}

static double lfru(struct sim *m, int e, long step)
{
	return m->score[e] * pow(LFRU_DECAY, (double)(step - m->score_at[e]));
}

/* the cached expert to evict (not used this step), or -1 */
static int victim(struct sim *m, enum hs_cache_policy p, const char *used_now, long step)
{
	int best = -1;
	double best_v = 0;
	for (int e = 0; e < m->E; e++) {
		if (!m->in[e] || used_now[e])
			continue;
		double v; /* smaller = evict first */
		switch (p) {
		case HS_CACHE_LRU: v = (double)m->last[e]; break;
		case HS_CACHE_LFU: v = (double)m->count[e]; break;
		case HS_CACHE_LFRU: v = lfru(m, e, step); break;
		case HS_CACHE_BELADY: v = -(double)next_use(m, e, step); break;
		default: return -1;
		}
		if (best < 0 || v < best_v) {
			best = e;
			best_v = v;
		}
	}
	return best;
}

/* pairs of expert e's next use (after next_use() moved its cursor), 0 if none */
static int next_pairs(const struct sim *m, int e)
{
	return m->occ_cur[e] < m->occ_off[e + 1] ? m->occ_pairs[m->occ_cur[e]] : 0;
}

struct cand {
	long next; /* the next step that uses it */
	int pairs; /* and its pairs then */
	int e, cached;
};

/* sooner first; on a tie the one with more pairs then, cached ones (no
 * upload), then by expert number */
static int cmp_cand(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	if (x->next != y->next)
		return x->next < y->next ? -1 : 1;
	if (x->pairs != y->pairs)
		return y->pairs - x->pairs;
	if (x->cached != y->cached)
		return y->cached - x->cached;
	return (x->e > y->e) - (x->e < y->e);
}

struct ranked {
	float f;
	int e;
};

/* more frequent first (NaN last), ties by expert number */
static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	int xn = isnan(x->f), yn = isnan(y->f);
	if (xn != yn)
		return xn - yn;
	if (!xn && x->f != y->f)
		return x->f > y->f ? -1 : 1;
	return (x->e > y->e) - (x->e < y->e);
}

/* Belady after step s: of the cached experts and the step's, keep the
 * `slots` needed soonest (cached ones win ties, saving uploads); at most
 * cap of them new.  Unlike the online policies it may drop an expert the
 * step used, which only widens its choice: no policy that obeys the
 * stricter rule can beat it.  Returns the admissions. */
static int belady_step(struct sim *m, long s, int cap, const int *off, const int32_t *experts)
{
	const size_t E = (size_t)(m->E > 0 ? m->E : 1);
	struct cand *cand = malloc(sizeof *cand * (E + (size_t)(off[s + 1] - off[s])));
	char *want = calloc(E, 1);
	int n = 0, admitted = 0;
	if (!cand || !want) {
		free(cand);
		free(want);
		return 0; /* no memory: the cache stays as it is */
	}
	for (int e = 0; e < m->E; e++)
		if (m->in[e])
			cand[n++] = (struct cand){ next_use(m, e, s), next_pairs(m, e), e, 1 };
	for (int i = off[s]; i < off[s + 1]; i++)
		if (!m->in[experts[i]])
			cand[n++] = (struct cand){ next_use(m, experts[i], s), next_pairs(m, experts[i]), experts[i], 0 };
	/* the `slots` with the smallest next use first (a sort, not a scan
	 * per slot: with thousands of slots that was seconds per step) */
	qsort(cand, (size_t)n, sizeof *cand, cmp_cand);
	int keep = n < m->slots ? n : m->slots;
	for (int k = 0; k < keep; k++) {
		int e = cand[k].e;
		if (!m->in[e]) {
			if (cap >= 0 && admitted >= cap)
				continue;
			admitted++;
		}
		want[e] = 1;
	}
	/* a capped admission keeps a cached expert in its place */
	int held = 0;
	for (int e = 0; e < m->E; e++)
		held += want[e];
	for (int k = keep; k < n && held < m->slots; k++)
		if (m->in[cand[k].e] && !want[cand[k].e]) {
			want[cand[k].e] = 1;
			held++;
		}
	m->n_cached = 0;
	for (int e = 0; e < m->E; e++) {
		m->in[e] = want[e];
		m->n_cached += want[e];
	}
	free(want);
	free(cand);
	return admitted;
}

int hs_cache_simulate(enum hs_cache_policy p, int n_experts, int slots, int admit_cap, int n_steps, const int *off,
		      const int32_t *experts, const int *pairs, const float *freq, struct hs_cache_result *out)
{
	struct sim m;
	char *used_now = NULL;
	int rc = 0;

	HS_NEED(out, -EINVAL);
	memset(out, 0, sizeof *out);
	if (n_steps > 0) {
		HS_NEED(off, -EINVAL);
		HS_NEED(experts, -EINVAL);
		HS_NEED(pairs, -EINVAL);
	}
	if (n_experts < 1 || slots < 0 || n_steps < 0 || p < HS_CACHE_NONE || p > HS_CACHE_BELADY)
		return hs__error(EINVAL, "cache: policy %d, %d experts, %d slots, %d steps", p, n_experts, slots, n_steps);
	if (p == HS_CACHE_STATIC && !freq)
		return hs__error(EINVAL, "cache: the static policy needs expert frequencies");
	memset(&m, 0, sizeof m);
	m.E = n_experts;
	m.slots = slots < n_experts ? slots : n_experts;
	m.in = calloc(n_experts, sizeof *m.in);
	m.last = malloc(sizeof *m.last * n_experts);
	m.count = calloc(n_experts, sizeof *m.count);
	m.score = calloc(n_experts, sizeof *m.score);
	m.score_at = calloc(n_experts, sizeof *m.score_at);
	used_now = calloc(n_experts, 1);
	if (!m.in || !m.last || !m.count || !m.score || !m.score_at || !used_now) {
		rc = hs__error(ENOMEM, "cache: out of memory");
		goto out_free;
	}
	for (int e = 0; e < n_experts; e++)
		m.last[e] = -1;
	for (long s = 0; s < n_steps; s++)
		if (off[s] > off[s + 1] || off[s] < 0) {
			rc = hs__error(EINVAL, "cache: step %ld has a negative length", s);
			goto out_free;
		}
	if (p == HS_CACHE_BELADY && (rc = index_uses(&m, n_steps, off, experts, pairs)))
		goto out_free;
	if (freq && p != HS_CACHE_NONE) { /* warm start: the `slots` most frequent (static keeps them) */
		struct ranked *r = malloc(sizeof *r * (size_t)n_experts);
		if (!r) {
			rc = hs__error(ENOMEM, "cache: out of memory");
			goto out_free;
		}
		for (int e = 0; e < n_experts; e++)
			r[e] = (struct ranked){ freq[e], e };
		qsort(r, (size_t)n_experts, sizeof *r, cmp_ranked);
		for (int k = 0; k < m.slots; k++)
			m.in[r[k].e] = 1;
		free(r);
		m.n_cached = m.slots;
	}
	for (long s = 0; s < n_steps; s++) {
		for (int i = off[s]; i < off[s + 1]; i++) {
			int e = experts[i];
			if (e < 0 || e >= n_experts || used_now[e]) {
				rc = hs__error(EINVAL, "cache: step %ld lists expert %d %s", s, e,
					       e < 0 || e >= n_experts ? "outside the layer" : "twice");
				goto out_free;
			}
			used_now[e] = 1;
			out->accesses += pairs[i];
			if (m.in[e])
				out->hits += pairs[i];
		}
		/* admissions: the step's misses, busiest first */
		int admitted = 0;
		if (p == HS_CACHE_BELADY && m.slots > 0)
			out->admissions += belady_step(&m, s, admit_cap, off, experts);
		for (; p != HS_CACHE_BELADY;) {
			if (p == HS_CACHE_NONE || p == HS_CACHE_STATIC || m.slots == 0 ||
			    (admit_cap >= 0 && admitted >= admit_cap))
				break;
			/* the candidate: the busiest miss; for Belady the one needed soonest */
			int pick = -1;
			for (int i = off[s]; i < off[s + 1]; i++) {
				if (m.in[experts[i]])
					continue;
				if (pick < 0)
					pick = i;
				else if (p == HS_CACHE_BELADY ? next_use(&m, experts[i], s) < next_use(&m, experts[pick], s)
							      : pairs[i] > pairs[pick])
					pick = i;
			}
			if (pick < 0)
				break;
			int e = experts[pick];
			if (m.n_cached == m.slots) {
				int v = victim(&m, p, used_now, s);
				if (v < 0)
					break; /* every cached expert is in use this step */
				if (p == HS_CACHE_BELADY && next_use(&m, v, s) < next_use(&m, e, s)) {
					m.in[e] = -1; /* not worth admitting: mark so it is not picked again */
					continue;
				}
				m.in[v] = 0;
				m.n_cached--;
			}
			m.in[e] = 1;
			m.n_cached++;
			admitted++;
			out->admissions++;
		}
		/* bookkeeping after the step */
		for (int i = off[s]; i < off[s + 1]; i++) {
			int e = experts[i];
			if (m.in[e] < 0)
				m.in[e] = 0;
			used_now[e] = 0;
			m.last[e] = s;
			m.count[e] += pairs[i];
			m.score[e] = lfru(&m, e, s) + pairs[i];
			m.score_at[e] = s;
		}
	}
out_free:
	free(m.in);
	free(m.last);
	free(m.count);
	free(m.score);
	free(m.score_at);
	free(used_now);
	free(m.occ_off);
	free(m.occ_cur);
	free(m.occ);
	free(m.occ_pairs);
	return rc;
}
