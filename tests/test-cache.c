/* Checks the expert cache policies on a hand-worked sequence (every hit
 * and admission counted by hand in the comments) and, on random traces of
 * one routed expert set per step, that no policy beats the offline optimum
 * (Belady) and that bad input is refused. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "tests/hs-test.h"

static uint64_t rng = 12345;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

static void hand_worked(void)
{
	/* 4 experts, 2 slots, one expert per step: 0 1 2 0 1 3 0 */
	const int off[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
	const int32_t seq[7] = { 0, 1, 2, 0, 1, 3, 0 };
	const int pairs[7] = { 1, 1, 1, 1, 1, 1, 1 };
	const float freq[4] = { 3, 2, 1, 1 };
	static const struct {
		enum hs_cache_policy p;
		long hits, admissions;
	} want[] = {
		/* LRU: {0} {0,1} {1,2} {2,0} {0,1} {1,3}; 0 at the end misses: no hit, 7 admissions */
		{ HS_CACHE_LRU, 0, 7 },
		/* LFU (ties: the lower id goes): 2 evicts 0, 0 evicts 1, 1 evicts 2, 3 evicts 0, 0 evicts 1 */
		{ HS_CACHE_LFU, 0, 7 },
		/* static {0, 1}: steps 0 1 3 4 6 hit, nothing admitted */
		{ HS_CACHE_STATIC, 5, 0 },
		/* Belady keeps the 2 needed soonest: {0} {0,1}; after step 2 {0 (next 3), 1 (next
		 * 4)} beat 2 (never); after step 5, 0 (next 6) and 1 over 3 (both never: the
		 * cached one stays): hits at steps 3, 4, 6; admissions 0 and 1 */
		{ HS_CACHE_BELADY, 3, 2 },
		{ HS_CACHE_NONE, 0, 0 },
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
		struct hs_cache_result r;
		const float *f = want[i].p == HS_CACHE_STATIC ? freq : NULL; /* the others start cold */
		CHECK(hs_cache_simulate(want[i].p, 4, 2, -1, 7, off, seq, pairs, f, &r) == 0, "%s", hs_last_error());
		CHECK(r.accesses == 7 && r.hits == want[i].hits && r.admissions == want[i].admissions,
		      "%s: %ld hits %ld admissions (want %ld, %ld)", hs_cache_policy_name(want[i].p), r.hits, r.admissions,
		      want[i].hits, want[i].admissions);
	}
	/* one admission per step at most: LRU with a cap of 0 never caches */
	struct hs_cache_result r;
	CHECK(hs_cache_simulate(HS_CACHE_LRU, 4, 2, 0, 7, off, seq, pairs, NULL, &r) == 0 && r.hits == 0 &&
		      r.admissions == 0,
	      "cap 0");
	CHECK(hs_cache_simulate(HS_CACHE_STATIC, 4, 2, -1, 7, off, seq, pairs, NULL, &r) == -EINVAL, "static without freq");
	const int32_t twice[2] = { 1, 1 };
	const int off2[2] = { 0, 2 };
	CHECK(hs_cache_simulate(HS_CACHE_LRU, 4, 2, -1, 1, off2, twice, pairs, NULL, &r) == -EINVAL, "duplicate in a step");
	const int32_t out_of[1] = { 4 };
	CHECK(hs_cache_simulate(HS_CACHE_LRU, 4, 2, -1, 1, off, out_of, pairs, NULL, &r) == -EINVAL, "expert 4 of 4");
}

static void belady_bound(void)
{
	for (int trial = 0; trial < 300; trial++) {
		const int E = 4 + (int)(next() % 28), steps = 20 + (int)(next() % 200), k = 1 + (int)(next() % 4);
		const int slots = (int)(next() % (uint32_t)E);
		int *off = malloc(sizeof *off * (steps + 1)), *pairs = malloc(sizeof *pairs * steps * k);
		int32_t *ex = malloc(sizeof *ex * steps * k);
		float *freq = calloc(E, sizeof *freq);
		int hot = 1 + (int)(next() % (uint32_t)E);
		off[0] = 0;
		for (int s = 0; s < steps; s++) {
			int n = 0;
			for (int j = 0; j < k; j++) {
				/* skewed: mostly a hot subset */
				int e = next() % 4 ? (int)(next() % (uint32_t)hot) : (int)(next() % (uint32_t)E), dup = 0;
				for (int i = off[s]; i < off[s] + n; i++)
					dup |= ex[i] == e;
				if (dup)
					continue;
				ex[off[s] + n] = e;
				pairs[off[s] + n] = 1;
				freq[e] += 1;
				n++;
			}
			off[s + 1] = off[s] + n;
		}
		/* cold (no profile) and warm (started from the trace's own frequencies) */
		for (int warm = 0; warm < 2; warm++) {
			const float *f = warm ? freq : NULL;
			struct hs_cache_result opt, r;
			CHECK(hs_cache_simulate(HS_CACHE_BELADY, E, slots, -1, steps, off, ex, pairs, f, &opt) == 0, "%s",
			      hs_last_error());
			for (enum hs_cache_policy p = HS_CACHE_NONE; p < HS_CACHE_BELADY; p++) {
				if (p == HS_CACHE_STATIC && !warm)
					continue;
				CHECK(hs_cache_simulate(p, E, slots, -1, steps, off, ex, pairs, f, &r) == 0, "%s",
				      hs_last_error());
				CHECK(r.hits <= opt.hits, "trial %d (E %d slots %d k %d, %s): %s %ld hits beat Belady's %ld",
				      trial, E, slots, k, warm ? "warm" : "cold", hs_cache_policy_name(p), r.hits, opt.hits);
				CHECK(r.accesses == opt.accesses, "accesses differ");
			}
		}
		free(off);
		free(pairs);
		free(ex);
		free(freq);
	}
}

/* a trace written and read back is the same, record by record */
static void trace_roundtrip(void)
{
	char path[64];
	hs_trace_writer *w;
	hs_trace *t;
	int32_t ids[3 * 4], all[20][12];
	float wt[3 * 4];

	snprintf(path, sizeof path, "/tmp/hs-test-trace-%d.trace", (int)getpid());
	CHECK(hs_trace_writer_open(path, 16, 4, &w) == 0, "%s", hs_last_error());
	for (int r = 0; r < 20; r++) {
		for (int i = 0; i < 12; i++) {
			all[r][i] = ids[i] = (int)(next() % 17) - 1;
			wt[i] = (float)r + (float)i / 16;
		}
		CHECK(hs_trace_writer_add(w, r / 2, r % 2, 1 + r % 3, ids, wt) == 0, "%s", hs_last_error());
	}
	ids[0] = 16;
	CHECK(hs_trace_writer_add(w, 0, 0, 1, ids, wt) == -EINVAL, "id 16 of 16 written");
	CHECK(hs_trace_writer_close(w, 1) == 0, "%s", hs_last_error());
	CHECK(hs_trace_load(path, &t) == 0, "%s", hs_last_error());
	if (t) {
		int nr, E, K;
		hs_trace_info(t, &nr, &E, &K);
		CHECK(nr == 20 && E == 16 && K == 4, "%d records, %d experts, %d used", nr, E, K);
		for (int r = 0; r < nr; r++) {
			int step, layer, n;
			const int32_t *ri;
			const float *rw;
			hs_trace_record(t, r, &step, &layer, &n, &ri, &rw);
			CHECK(step == r / 2 && layer == r % 2 && n == 1 + r % 3, "record %d: %d %d %d", r, step, layer, n);
			for (int i = 0; i < n * 4; i++)
				CHECK(rw[i] == (float)r + (float)i / 16 && ri[i] == all[r][i], "record %d value %d", r, i);
		}
		hs_trace_free(t);
	}
	unlink(path);
}

int main(void)
{
	trace_roundtrip();
	hand_worked();
	belady_bound();
	return hs_test_end();
}
