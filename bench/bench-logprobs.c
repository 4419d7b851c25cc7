/* What logprobs cost per generated token: hs__logprobs() (log-softmax in
 * double, the top n) on a row of gpt-oss's 201,088 logits, against the
 * machine's own limit for that row in the same run (one pass that reads it
 * and sums it, from cache as the sampler finds it) and against a decode
 * step at 30 tokens/s (33.3 ms).  Measurements, one core.
 * usage: bench-logprobs [VOCAB (default 201088)] [REPS (default 300)] */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_kernels/sample.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const int n = argc > 1 ? atoi(argv[1]) : 201088, reps = argc > 2 ? atoi(argv[2]) : 300;
	float *x = n > 0 ? malloc(sizeof *x * (size_t)n) : NULL, lp = 0, top[20];
	int32_t ids[20];
	uint64_t s = 1;
	volatile float sink = 0;

	if (!x || reps < 1) {
		fprintf(stderr, "bench-logprobs: VOCAB and REPS must be positive\n");
		return 2;
	}
	for (int i = 0; i < n; i++) { /* logits spread as a model's are: most far below the best */
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((double)(s >> 40) / (double)(1 << 24) * 20 - 10);
	}
	double t0 = now();
	for (int r = 0; r < reps; r++) {
		float sum[16] = { 0 }; /* independent sums: the loads, not one add chain, set the pace */
		int i = 0;
		for (; i + 16 <= n; i += 16)
			for (int k = 0; k < 16; k++)
				sum[k] += x[i + k];
		for (; i < n; i++)
			sum[0] += x[i];
		for (int k = 0; k < 16; k++)
			sink += sum[k];
	}
	const double read_ms = (now() - t0) / reps * 1e3;
	printf("vocabulary %d, %d repetitions, one core\n", n, reps);
	printf("limit: one pass reading the row: %.4f ms\n", read_ms);
	static const int tops[] = { 0, 5, 20 };
	for (int k = 0; k < 3; k++) {
		t0 = now();
		for (int r = 0; r < reps; r++)
			hs__logprobs(x, n, r % n, tops[k], &lp, ids, top);
		const double ms = (now() - t0) / reps * 1e3;
		printf("logprobs, top %2d: %.4f ms per token (%.1fx the read pass; %.1f%% of a 33.3 ms decode step)\n",
		       tops[k], ms, ms / read_ms, ms / 33.333 * 100);
	}
	sink += lp;
	free(x);
	return 0;
}
