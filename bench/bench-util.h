/* Pieces shared by the CPU benchmarks: a clock, a seeded generator, and
 * the machine's memory read bandwidth measured in the same run (the limit
 * the kernels' GB/s are compared with).  Built only where AVX2 kernels
 * are. */
#ifndef HS_BENCH_UTIL_H
#define HS_BENCH_UTIL_H

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cpu_kernels/dense.h"
#include "runtime/numa.h"

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x2545f4914f6cdd1dull; /* next()'s state */
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Memory read bandwidth: every thread streams words lo..hi of buf with
 * the library's read probe (dense.h), prefetching ahead into L2 or not. */
static uint64_t read_share(const uint64_t *buf, size_t lo, size_t hi, size_t ahead)
{
	return hs__dense_best()->xor_read(buf + lo, (hi - lo) * 8, ahead);
}

/* Two patterns, each with and without the probe's prefetch, the best
 * counts: each thread streams one contiguous half of the buffer; or, like
 * the kernels, the buffer is read in 4 MiB pieces in a shuffled order,
 * each piece split between the threads. */
static double read_gbps(const uint64_t *buf, size_t words, int threads)
{
	const size_t piece = (4u << 20) / 8, n_pieces = words / piece;
	size_t order[1024];
	double best = 0;

	for (size_t i = 0; i < n_pieces && i < 1024; i++)
		order[i] = i;
	for (size_t i = n_pieces - 1; i > 0; i--) {
		size_t j = next() % (i + 1), t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	for (int rep = 0; rep < 8; rep++) {
		uint64_t total = 0;
		double t0 = now();
#pragma omp parallel num_threads(threads) reduction(^ : total)
		{
			int ith = omp_get_thread_num(), nth = omp_get_num_threads();
			const size_t ahead = rep / 2 % 2 ? HS_READ_AHEAD : 0;
			if (rep % 2 == 0) {
				size_t lo = words * ith / nth / 16 * 16, hi = words * (ith + 1) / nth / 16 * 16;
				total ^= read_share(buf, lo, hi, ahead);
			} else {
				for (size_t p = 0; p < n_pieces && p < 1024; p++) {
					const uint64_t *b = buf + order[p] * piece;
					total ^= read_share(b, piece * ith / nth / 16 * 16,
							    piece * (ith + 1) / nth / 16 * 16, ahead);
				}
			}
		}
		double t = now() - t0;
		if (total == 42) /* keeps the reads; practically never true */
			fprintf(stderr, " ");
		double bytes =
			rep % 2 == 0 ? (double)words * 8 : (double)(n_pieces < 1024 ? n_pieces : 1024) * piece * 8;
		if (bytes / t / 1e9 > best)
			best = bytes / t / 1e9;
	}
	return best;
}

/* "1,2,4" into thr (at most 8 counts); returns how many (0: none). */
static int parse_threads(char *arg, int *thr)
{
	int n = 0;
	for (char *tok = strtok(arg, ","); tok && n < 8; tok = strtok(NULL, ","))
		if (atoi(tok) > 0)
			thr[n++] = atoi(tok);
	return n;
}

/* The read bandwidth over `bytes` for each of nthr thread counts into
 * read[], a line each on o, and rb["count"] in JSON.  -1 when the buffer
 * cannot be had. */
static int measure_read(size_t bytes, const int *thr, int nthr, double *read, FILE *o, json_t *rb)
{
	const size_t words = bytes / 8;
	uint64_t *buf = hs__huge_alloc(words * 8); /* the weights' kind of pages */

	if (!buf)
		return -1;
	for (size_t i = 0; i < words; i++)
		buf[i] = i * 0x9e3779b97f4a7c15ull;
	for (int t = 0; t < nthr; t++) {
		char key[16];
		read[t] = read_gbps(buf, words, thr[t]);
		snprintf(key, sizeof key, "%d", thr[t]);
		json_object_set_new(rb, key, json_real(read[t]));
		fprintf(o, "memory read bandwidth, %d thread%s: %.1f GB/s (measured, %zu MiB)\n", thr[t],
			thr[t] > 1 ? "s" : "", read[t], bytes >> 20);
	}
	free(buf);
	return 0;
}

#endif
