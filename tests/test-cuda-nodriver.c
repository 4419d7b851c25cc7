/* Checks that a CUDA build runs where there is no GPU or driver: the probe
 * reports zero devices with a reason instead of failing, and the device
 * calls refuse cleanly.  Skipped in builds without CUDA. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "hotset.h"
#include "tests/hs-test.h"

int main(void)
{
	int n = hs_cuda_device_count();
	const char *info = hs_build_info();

	if (strstr(info, "CUDA: not built"))
		SKIP("this build has no CUDA (%s)", info);
	CHECK(strstr(info, "CUDA 1") != NULL, "build info '%s' names no CUDA version", info);
	CHECK(n >= 0, "device count %d", n);
	if (n > 0)
		SKIP("%d CUDA device(s) present: the no-driver path cannot be exercised here (%s)", n,
		     hs_cuda_status());
	CHECK(strncmp(hs_cuda_status(), "no CUDA device (", 16) == 0, "status '%s'", hs_cuda_status());
	/* The probe is cached and stable. */
	CHECK(hs_cuda_device_count() == 0, "second probe differs");
	/* The whole topology still loads on the CPU side. */
	{
		hs_topology *t = NULL;
		CHECK(hs_topology_open(NULL, &t) == 0, "topology: %s", hs_last_error());
		if (t)
			for (int i = 0; i < hs_topology_n_gpus(t); i++)
				CHECK(hs_topology_gpu(t, i)->cuda_index == -1, "cuda index with no driver");
		hs_topology_free(t);
	}
	printf("CUDA build without a device: %s\n", hs_cuda_status());
	return hs_test_end();
}
