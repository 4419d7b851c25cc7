/* Hybrid layer benchmark on the sim device: one gpt-oss-120b-shaped layer
 * (MXFP4 2880 x 2880, E experts, k = 4), the device's copies throttled to a
 * PCIe-like bandwidth, the CPU side on a pool of worker threads.  For a range
 * of hit rates (experts cached on the device) it runs decode steps in cpu,
 * stream and hybrid modes and prints the layer's wall time, its busiest
 * lane, their ratio (overlap: 1.0 = the layer takes no longer than its
 * busiest lane) and tokens/s.  Measurements of this machine's CPU standing
 * in for a device: what they show is the overlap, not GPU speed.
 * usage: bench-hybrid [PCIE_GBPS] [WORKERS] [STEPS] */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "model/arch.h"
#include "hotset.h"
#include "runtime/hybrid.h"

#define D 2880
#define F 2880
#define E 32
#define K 4

static uint64_t rng = 7;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

int main(int argc, char **argv)
{
	double gbps = argc > 1 ? atof(argv[1]) : 12;
	int workers = argc > 2 ? atoi(argv[2]) : 2, steps = argc > 3 ? atoi(argv[3]) : 12;
	struct hs_moe_layer l;
	struct hs_device *d;
	struct hs_pool *pool;

	if (gbps <= 0 || workers < 1 || steps < 1) {
		fprintf(stderr, "usage: bench-hybrid [PCIE_GBPS] [WORKERS] [STEPS]\n");
		return 2;
	}
	size_t bytes = hs__moe_layer_flat(&l, &hs__arch_gpt_oss, HS_TYPE_MXFP4, D, F, E, K, NULL, NULL);
	uint8_t *w = malloc(bytes);
	if (!w)
		return 1;
	for (size_t i = 0; i < bytes; i++)
		w[i] = (uint8_t)next();
	hs__moe_layer_flat(&l, &hs__arch_gpt_oss, HS_TYPE_MXFP4, D, F, E, K, w, NULL);
	for (size_t r = 0; r < bytes; r += 17) /* small exponents: finite sums */
		w[r] = (uint8_t)(118 + next() % 4);
	if (hs__device_open("sim", 0, &d) || hs__pool_create(workers, NULL, 0, 0, &pool)) {
		fprintf(stderr, "bench-hybrid: %s\n", hs_last_error());
		return 1;
	}
	hs__sim_set_link(d->dev, gbps, 10);
	printf("# hybrid layer on the %s; CPU pool of %d workers; %d experts of %.2f MiB, k = %d\n",
	       d->ops->describe(d->dev), workers, E, (double)hs__expert_pack_layout1(HS_TYPE_MXFP4, D, F, 0).bytes / 1048576,
	       K);
	printf("%-8s %-12s %9s %9s %9s %7s %8s %8s\n", "hit", "mode", "wall ms", "busiest", "lane", "ratio", "tok/s",
	       "streamed");
	float x[D], y[D], wt[K];
	int32_t ids[K];
	for (int i = 0; i < D; i++)
		x[i] = (float)((int)(next() % 200) - 100) / 100.0f;
	for (int j = 0; j < K; j++)
		wt[j] = 0.25f;
	static const int cached_list[] = { 0, 8, 16, 24 };
	for (size_t ci = 0; ci < sizeof cached_list / sizeof cached_list[0]; ci++) {
		const int n_cached = cached_list[ci];
		struct hs_hybrid h;
		if (hs__hybrid_open(&h, &l, d, pool, 1, n_cached > 0 ? n_cached : 0, 4)) {
			fprintf(stderr, "bench-hybrid: %s\n", hs_last_error());
			return 1;
		}
		for (int s = 0; s < n_cached; s++)
			hs__hybrid_cache(&h, s, s);
		static const struct {
			enum hs_mode m;
			double q;
		} modes[] = { { HS_MODE_CPU_COMPUTE, 0 }, { HS_MODE_PCIE_STREAM, 1 }, { HS_MODE_HYBRID, 0.35 } };
		for (size_t mi = 0; mi < sizeof modes / sizeof modes[0]; mi++) {
			double wall = 0, busiest = 0;
			int lane = 0, streamed = 0;
			double busy[HS_N_LANES] = { 0 };
			for (int s = -1; s < steps; s++) {
				/* k distinct experts: a share n_cached / E of them cached on average */
				for (int j = 0; j < K; j++) {
					int e, dup;
					do {
						e = (int)(next() % E);
						dup = 0;
						for (int i = 0; i < j; i++)
							dup |= ids[i] == e;
					} while (dup);
					ids[j] = e;
				}
				struct hs_layer_stats st;
				if (hs__hybrid_forward(&h, 1, x, ids, wt, y, modes[mi].m, modes[mi].q, &st)) {
					fprintf(stderr, "bench-hybrid: %s\n", hs_last_error());
					return 1;
				}
				if (s < 0)
					continue; /* warm-up */
				wall += st.wall_s;
				streamed += st.experts_streamed;
				for (int ln = 0; ln < HS_N_LANES; ln++)
					busy[ln] += st.busy_s[ln];
			}
			for (int ln = 0; ln < HS_N_LANES; ln++)
				if (busy[ln] > busiest) {
					busiest = busy[ln];
					lane = ln;
				}
			printf("%-8.2f %-12s %9.2f %9.2f %9s %7.2f %8.1f %8.1f\n", (double)n_cached / E,
			       modes[mi].m == HS_MODE_HYBRID ? "hybrid" : hs_mode_name(modes[mi].m), 1e3 * wall / steps,
			       1e3 * busiest / steps, hs__lane_name((enum hs_lane)lane), wall / busiest, steps / wall,
			       (double)streamed / steps);
		}
		hs__hybrid_close(&h);
	}
	printf("(measurements; ratio = layer wall time / busiest lane; streamed = experts copied per step)\n");
	hs__pool_free(pool);
	hs__device_close(d);
	free(w);
	return 0;
}
