/* Polite sharing of a GPU: wait until others have freed enough memory.
 * Only reads free memory; never signals, kills or renices anyone. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "hotset.h"
#include "topology/cuda-probe.h"
#include "base/error.h"

static int cuda_reporter(int device, uint64_t *free_bytes, uint64_t *total_bytes, void *ctx)
{
	(void)ctx;
	return hs__cuda_mem_info(device, free_bytes, total_bytes);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int hs_vram_wait(int device, uint64_t budget, double timeout_s, int poll_ms, hs_vram_reporter reporter,
		 void *reporter_ctx, hs_progress_fn progress, void *progress_ctx)
{
	const double GiB = 1024.0 * 1024 * 1024;
	uint64_t free_b = 0, total_b = 0, first_free = 0;
	double t0 = now_s();
	char msg[160];
	int rc;

	if (!reporter)
		reporter = cuda_reporter;
	if (poll_ms <= 0)
		poll_ms = 1000;
	if (!(timeout_s >= 0)) /* NaN too: it would never time out */
		return hs__error(EINVAL, "VRAM wait: timeout %g s (0 or more)", timeout_s);
	if (device < 0)
		return hs__error(EINVAL, "VRAM wait: device %d is negative", device);
	for (int polls = 0;; polls++) {
		if ((rc = reporter(device, &free_b, &total_b, reporter_ctx)))
			return rc;
		if (budget > total_b)
			return hs__error(EINVAL, "VRAM wait: GPU %d has %.2f GiB in all, the plan needs %.2f GiB", device,
					 total_b / GiB, budget / GiB);
		if (polls == 0)
			first_free = free_b;
		if (free_b >= budget) {
			if (progress && polls > 0) {
				snprintf(msg, sizeof msg, "GPU %d: %.2f GiB free, the plan's %.2f GiB fit", device,
					 free_b / GiB, budget / GiB);
				progress(msg, 1.0, progress_ctx);
			}
			return 0;
		}
		double waited = now_s() - t0;
		if (waited >= timeout_s)
			return hs__error(ETIMEDOUT,
					 "VRAM wait: GPU %d still has only %.2f GiB free after %.0f s (the plan needs "
					 "%.2f GiB; other processes hold %.2f GiB)",
					 device, free_b / GiB, waited, budget / GiB, (total_b - free_b) / GiB);
		if (progress) {
			/* the fraction is how much of the shortfall seen at the start is gone */
			double gap0 = (double)budget - (double)first_free, gap = (double)budget - (double)free_b;
			snprintf(msg, sizeof msg, "GPU %d: %.2f of %.2f GiB free, waiting for %.2f GiB (%.0f s of %.0f s)",
				 device, free_b / GiB, total_b / GiB, budget / GiB, waited, timeout_s);
			progress(msg, gap0 > 0 && gap < gap0 ? 1 - gap / gap0 : 0, progress_ctx);
		}
		double left = timeout_s - waited, step = poll_ms / 1000.0;
		if (step > left)
			step = left;
		struct timespec ts = { (time_t)step, (long)((step - (double)(time_t)step) * 1e9) };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
}
