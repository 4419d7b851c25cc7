/* The device a device test runs on: backend $HS_TEST_DEVICE (sim by
 * default), index 0; SKIP (exit 77) with the reason when it cannot open. */
#ifndef HS_DEVICE_UTIL_H
#define HS_DEVICE_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "hotset.h"
#include "tests/hs-test.h"
#include "topology/cuda-probe.h"

static inline struct hs_device *hs_test_device(void)
{
	struct hs_device *d = NULL;
	const char *backend = getenv("HS_TEST_DEVICE");
	if (!backend || !*backend)
		backend = "sim";
	if (strcmp(backend, "cuda") == 0 && hs__cuda_probe() == 0)
		SKIP("no CUDA device: %s", hs__cuda_probe_status());
	if (hs__device_open(backend, 0, &d))
		SKIP("device %s: %s", backend, hs_last_error());
	printf("device: %s\n", d->ops->describe(d->dev));
	return d;
}

#endif
