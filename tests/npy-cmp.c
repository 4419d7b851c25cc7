/* Test helper, not a test: `npy-cmp A.npy B.npy MAX` exits 0 when both are
 * float32 arrays of one shape, without NaN, and ||A-B|| / ||B|| <= MAX. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hotset.h"

int main(int argc, char **argv)
{
	float *a, *b;
	int64_t ra, ca, rb, cb;
	double num = 0, den = 0, max;

	if (argc != 4) {
		fprintf(stderr, "usage: npy-cmp A.npy B.npy MAX_REL_L2\n");
		return 2;
	}
	max = atof(argv[3]);
	if (hs_npy_read_f32(argv[1], &a, &ra, &ca) || hs_npy_read_f32(argv[2], &b, &rb, &cb)) {
		fprintf(stderr, "npy-cmp: %s\n", hs_last_error());
		return 1;
	}
	if (ra != rb || ca != cb) {
		fprintf(stderr, "npy-cmp: shapes (%lld, %lld) and (%lld, %lld) differ\n", (long long)ra, (long long)ca,
			(long long)rb, (long long)cb);
		return 1;
	}
	for (int64_t i = 0; i < ra * ca; i++) {
		if (isnan(a[i]) || isnan(b[i])) {
			fprintf(stderr, "npy-cmp: NaN at %lld\n", (long long)i);
			return 1;
		}
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	double rel = den > 0 ? sqrt(num / den) : sqrt(num);
	printf("relative L2 error %.3g (limit %.3g)\n", rel, max);
	free(a);
	free(b);
	return rel <= max ? 0 : 1;
}
