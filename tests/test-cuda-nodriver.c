/* Checks that a CUDA build runs where there is no GPU or driver: the probe
 * reports zero devices with a reason instead of failing, and the device
 * calls refuse cleanly; cuBLAS is not linked (it is not in the process
 * until the first lookup, which works or says why).  Skipped in builds
 * without CUDA. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "device/device-cuda.h"
#include "hotset.h"
#include "tests/hs-test.h"

/* Whether a library whose file name holds `name` is mapped into this process. */
static int mapped(const char *name)
{
	char line[4096];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		return -1;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

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
	/* cuBLAS: opened at run time only */
	{
		char why[256] = "";
		CHECK(mapped("libcublas") == 0, "libcublas is in the process before anything asked for it");
		int rc = hs__cuda_blas_status(why, sizeof why);
		CHECK(rc == 0 || (rc == -ENOENT && why[0]), "cuBLAS lookup: %d '%s'", rc, why);
		CHECK(mapped("libcublas") == (rc == 0), "cuBLAS %s but %smapped", rc ? "absent" : "found",
		      mapped("libcublas") ? "" : "not ");
		printf("cuBLAS: %s\n", rc == 0 ? "found (opened at run time)" : why);
	}
	printf("CUDA build without a device: %s\n", hs_cuda_status());
	return hs_test_end();
}
