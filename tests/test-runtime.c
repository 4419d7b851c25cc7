/* Checks the hybrid runtime's public API on the llama.cpp-written tiny
 * gpt-oss model: a plan with host layers (made by the planner, saved and
 * loaded as JSON) loads host experts onto node 0 (verified by the kernel's
 * page-location query), every mode on the sim device matches the float64
 * NumPy outputs, planning now puts everything on the device, an unknown
 * device name is refused, a device that cannot be opened degrades to the
 * CPU with a warning and the same result, and bad
 * calls get clear errors (NaN or Inf in the inputs of every one-layer call
 * named by row and column). */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "tests/hs-test.h"
#include "tests/plan-util.h"
#include "tests/layer-util.h"

int main(void)
{
	const char *model = hs_test_data("models/gptoss-tiny-h256-e32.gguf");
	float *x = NULL, *ref[2] = { NULL, NULL }, y[4 * 256];
	int64_t r, c;
	char plan_path[64], name[64];
	hs_model *m;
	struct hs_model_desc md;
	struct hs_profile pf;
	static struct hs_plan plan;

	CHECK(hs_npy_read_f32(hs_test_data("models/x-h256-n4.npy"), &x, &r, &c) == 0 && r == 4 && c == 256, "x");
	for (int l = 0; l < 2; l++) {
		snprintf(name, sizeof name, "models/y-h256-n4-layer%d.npy", l);
		CHECK(hs_npy_read_f32(hs_test_data(name), &ref[l], &r, &c) == 0, "ref");
	}
	/* a plan with both layers on the host, no cache: made, saved, loaded */
	CHECK(hs_model_open(model, &m) == 0 && hs_model_desc_from_model(m, &md) == 0, "%s", hs_last_error());
	hs_model_free(m);
	hs_test_profile(&pf, 1ull << 33);
	struct hs_plan_opts po = { .gpu = 0, .ctx = 1024, .ubatch = 512, .host_layers = 2, .no_cache = 1 };
	CHECK(hs_plan_make(&md, &pf, &po, &plan) == 0, "%s", hs_last_error());
	snprintf(plan_path, sizeof plan_path, "/tmp/hs-test-plan-%d.json", (int)getpid());
	CHECK(hs_plan_save(&plan, plan_path) == 0, "%s", hs_last_error());

	static const enum hs_mode modes[] = { HS_MODE_CPU_COMPUTE, HS_MODE_PCIE_STREAM, HS_MODE_HYBRID, HS_MODE_NONE };
	for (int mi = 0; mi < 4; mi++) {
		struct hs_runtime_opts o = { .device = "sim", .plan_path = plan_path, .mode = modes[mi], .q = -1,
					     .max_tokens = 4, .admit_per_step = 1 };
		hs_runtime *rt = NULL;
		CHECK(hs_runtime_open(model, &o, &rt) == 0, "%s", hs_last_error());
		if (!rt)
			continue;
		for (int rep = 0; rep < 3; rep++)
			for (int l = 0; l < 2; l++) {
				CHECK(hs_runtime_forward(rt, l, 4, x, NULL, NULL, y) == 0, "%s", hs_last_error());
				double e = rel_l2(y, ref[l], 4 * 256);
				CHECK(e < 0.05, "mode %s layer %d step %d: rel L2 %.3g", hs_mode_name(modes[mi]), l, rep, e);
			}
		struct hs_layer_report rp;
		CHECK(hs_runtime_layer_report(rt, 1, &rp) == 0, "%s", hs_last_error());
		CHECK(rp.placement == HS_PLACEMENT_HOST && rp.os_node == 0 && rp.host_expert_bytes > 0, "placement");
		CHECK(rp.node_bytes[0] == rp.host_expert_bytes, "host experts measured on node 0: %llu of %llu",
		      (unsigned long long)rp.node_bytes[0], (unsigned long long)rp.host_expert_bytes);
		CHECK(rp.steps == 3 && rp.pairs == 3 * 16 && rp.pairs == rp.hits + rp.misses_cpu + rp.misses_streamed,
		      "report: %ld steps %ld pairs = %ld + %ld + %ld", rp.steps, rp.pairs, rp.hits, rp.misses_cpu,
		      rp.misses_streamed);
		if (modes[mi] == HS_MODE_CPU_COMPUTE)
			CHECK(rp.misses_streamed == 0 && rp.pcie_bytes == 0, "cpu mode streamed");
		if (modes[mi] == HS_MODE_PCIE_STREAM)
			CHECK(rp.misses_streamed > 0 && rp.pcie_bytes > 0, "stream mode did not stream");
		CHECK(strstr(hs_runtime_describe(rt), "device: sim") != NULL, "describe: %s", hs_runtime_describe(rt));
		CHECK(strstr(hs_runtime_describe(rt), "workers bound to node 0") != NULL, "describe: %s",
		      hs_runtime_describe(rt));
		CHECK(hs_runtime_forward(rt, 2, 4, x, NULL, NULL, y) == -EINVAL, "layer 2 accepted");
		/* the setters: another mode and policy for the next calls, still right */
		CHECK(hs_runtime_set_mode(rt, HS_MODE_PCIE_STREAM, 1) == 0 && hs_runtime_set_cache_policy(rt, "lfu", 1) == 0,
		      "%s", hs_last_error());
		CHECK(hs_runtime_forward(rt, 1, 4, x, NULL, NULL, y) == 0 && rel_l2(y, ref[1], 1024) < 0.05, "after set");
		CHECK(hs_runtime_set_cache_policy(rt, "mru", 1) == -EINVAL && hs_runtime_set_mode(rt, HS_MODE_HYBRID, 2) == -EINVAL,
		      "bad setters accepted");
		CHECK(hs_runtime_forward(rt, 0, 5, x, NULL, NULL, y) == -EINVAL, "5 tokens accepted (max 4)");
		hs_runtime_close(rt);
	}
	/* a cache of 8 slots per layer under each policy: random batches against
	 * the reference; none and static admit nothing, the others do */
	{
		static struct hs_plan cp;
		char cpath[64];
		hs_model *mm = NULL;
		hs_model_open(model, &mm);
		cp = plan;
		cp.total_slots = 0;
		for (int i = 0; i < cp.n_layers; i++) {
			cp.layers[i].placement = HS_PLACEMENT_HOST_CACHE;
			cp.layers[i].slots = 8;
			cp.total_slots += 8;
		}
		snprintf(cpath, sizeof cpath, "/tmp/hs-test-cplan-%d.json", (int)getpid());
		CHECK(hs_plan_save(&cp, cpath) == 0, "%s", hs_last_error());
		static const char *const pols[] = { "lru", "lfu", "lfru", "static", "none" };
		float *freq = malloc(sizeof *freq * 2 * 32), ref1[4 * 256], xr[4 * 256];
		for (int i = 0; i < 64; i++)
			freq[i] = (float)((i * 7) % 32);
		for (int pi = 0; pi < 5; pi++) {
			struct hs_runtime_opts co = { .device = "sim", .plan_path = cpath, .mode = HS_MODE_HYBRID, .q = 0.3,
						      .max_tokens = 4, .admit_per_step = 2, .cache_policy = pols[pi],
						      .routing_freq = pi == 3 ? freq : NULL };
			hs_runtime *crt = NULL;
			CHECK(hs_runtime_open(model, &co, &crt) == 0, "%s: %s", pols[pi], hs_last_error());
			if (!crt)
				continue;
			for (int step = 0; step < 12; step++)
				for (int l = 0; l < 2; l++) {
					for (int i = 0; i < 4 * 256; i++)
						xr[i] = x[i] * (float)(1 + ((step * 31 + i * 7) % 13) - 6) / 4.0f;
					CHECK(hs_runtime_forward(crt, l, 4, xr, NULL, NULL, y) == 0, "%s", hs_last_error());
					CHECK(hs_moe_ref(mm, l, 4, xr, NULL, NULL, ref1) == 0, "%s", hs_last_error());
					double e = rel_l2(y, ref1, 4 * 256);
					CHECK(e < 0.05, "policy %s step %d layer %d: rel L2 %.3g", pols[pi], step, l, e);
				}
			struct hs_layer_report rp;
			hs_runtime_layer_report(crt, 0, &rp);
			CHECK(rp.slots == 8, "slots %d", rp.slots);
			if (pi >= 3)
				CHECK(rp.admitted == 0, "%s admitted %ld", pols[pi], rp.admitted);
			else
				CHECK(rp.admitted > 0, "%s admitted nothing", pols[pi]);
			hs_runtime_close(crt);
		}
		/* a plan given in memory; reset puts the caches back as they started
		 * and zeroes the reports, so the same steps hit the same way again */
		{
			struct hs_runtime_opts ro = { .device = "sim", .plan = &cp, .mode = HS_MODE_CPU_COMPUTE,
						      .max_tokens = 4, .admit_per_step = 1, .routing_freq = freq,
						      .threads = 1 };
			hs_runtime *rrt = NULL;
			/* with one worker the device's threads are started on the other
			 * CPUs; the caller gets its own CPUs back */
			cpu_set_t before, after;
			CHECK(sched_getaffinity(0, sizeof before, &before) == 0, "affinity");
			CHECK(hs_runtime_open(model, &ro, &rrt) == 0, "plan in memory: %s", hs_last_error());
			CHECK(sched_getaffinity(0, sizeof after, &after) == 0 && CPU_EQUAL(&before, &after),
			      "the caller's CPUs changed: %d before, %d after", CPU_COUNT(&before), CPU_COUNT(&after));
			long hits[2] = { 0, 0 }, admitted[2] = { 0, 0 };
			for (int round = 0; round < 2 && rrt; round++) {
				for (int step = 0; step < 6; step++) {
					for (int i = 0; i < 4 * 256; i++)
						xr[i] = x[i] * (float)(1 + ((step * 17 + i * 5) % 11) - 5) / 4.0f;
					CHECK(hs_runtime_forward(rrt, 0, 4, xr, NULL, NULL, y) == 0, "%s", hs_last_error());
					/* admissions are asynchronous (an expert still on its way
					 * is a CPU miss): give the 100 KiB copy time to land so
					 * both rounds see the same cache */
					usleep(20000);
				}
				struct hs_layer_report rp;
				CHECK(hs_runtime_layer_report(rrt, 0, &rp) == 0 && rp.steps == 6 && rp.slots == 8,
				      "round %d: %ld steps, %d slots", round, rp.steps, rp.slots);
				hits[round] = rp.hits;
				admitted[round] = rp.admitted;
				CHECK(hs_runtime_reset(rrt) == 0, "%s", hs_last_error());
				CHECK(hs_runtime_layer_report(rrt, 0, &rp) == 0 && rp.steps == 0 && rp.pairs == 0 && rp.hits == 0 &&
					      rp.wall_s == 0 && rp.slots == 8 && rp.host_expert_bytes > 0,
				      "after reset: %ld steps %ld pairs", rp.steps, rp.pairs);
			}
			CHECK(admitted[0] > 0 && admitted[0] == admitted[1], "admissions %ld then %ld", admitted[0], admitted[1]);
			CHECK(hits[0] > 0 && hits[0] == hits[1], "hits %ld before the reset, %ld after", hits[0], hits[1]);
			hs_runtime_close(rrt);
		}
		struct hs_runtime_opts bad = { .device = "sim", .plan_path = cpath, .cache_policy = "mru" };
		hs_runtime *brt = NULL;
		CHECK(hs_runtime_open(model, &bad, &brt) == -EINVAL && strstr(hs_last_error(), "mru"), "%s", hs_last_error());
		free(freq);
		unlink(cpath);
		hs_model_free(mm);
	}
	/* planned now for the sim device: the tiny model fits, all resident */
	struct hs_runtime_opts o = { .device = "sim", .q = -1, .max_tokens = 4 };
	hs_runtime *rt = NULL;
	CHECK(hs_runtime_open(model, &o, &rt) == 0, "%s", hs_last_error());
	if (rt) {
		struct hs_layer_report rp;
		CHECK(hs_runtime_forward(rt, 0, 4, x, NULL, NULL, y) == 0 && rel_l2(y, ref[0], 1024) < 0.05, "plan-now");
		hs_runtime_layer_report(rt, 0, &rp);
		CHECK(rp.placement == HS_PLACEMENT_GPU && rp.hits == 16, "plan-now placement %s hits %ld",
		      hs_placement_name(rp.placement), rp.hits);
		hs_runtime_close(rt);
	}
	/* NaN or Inf in the inputs: refused by every one-layer call, with the place */
	{
		float xb[4 * 256], w[4 * 4];
		int32_t ids[4 * 4];
		hs_model *mm = NULL;
		CHECK(hs_model_open(model, &mm) == 0, "%s", hs_last_error());
		memcpy(xb, x, sizeof xb);
		xb[1 * 256 + 5] = NAN;
		const char *nan_at = "hidden states: row 1, column 5 is NaN";
		CHECK(hs_moe_ref(mm, 0, 4, xb, NULL, NULL, y) == -EINVAL && strstr(hs_last_error(), nan_at), "ref: %s",
		      hs_last_error());
		CHECK(hs_moe_route_ref(mm, 0, 4, xb, ids, w) == -EINVAL && strstr(hs_last_error(), nan_at), "route: %s",
		      hs_last_error());
		CHECK(hs_moe_forward_cpu(mm, 0, 4, xb, NULL, NULL, y, 1) == -EINVAL && strstr(hs_last_error(), nan_at),
		      "cpu: %s", hs_last_error());
		CHECK(hs_moe_forward_device(mm, 0, 4, xb, NULL, NULL, y, "sim", NULL, 0) == -EINVAL &&
			      strstr(hs_last_error(), nan_at),
		      "device: %s", hs_last_error());
		xb[1 * 256 + 5] = x[1 * 256 + 5];
		xb[3 * 256 + 255] = -INFINITY;
		struct hs_runtime_opts no = { .device = "sim", .q = -1, .max_tokens = 4 };
		hs_runtime *nrt = NULL;
		CHECK(hs_runtime_open(model, &no, &nrt) == 0, "%s", hs_last_error());
		if (nrt) {
			CHECK(hs_runtime_forward(nrt, 0, 4, xb, NULL, NULL, y) == -EINVAL &&
				      strstr(hs_last_error(), "hidden states: row 3, column 255 is -Inf"),
			      "runtime: %s", hs_last_error());
			hs_runtime_close(nrt);
		}
		/* the caller's gating weights too */
		CHECK(hs_moe_route_ref(mm, 0, 4, x, ids, w) == 0, "%s", hs_last_error());
		w[2 * 4 + 1] = INFINITY;
		CHECK(hs_moe_ref(mm, 0, 4, x, ids, w, y) == -EINVAL &&
			      strstr(hs_last_error(), "expert weights: row 2, column 1 is +Inf"),
		      "weights: %s", hs_last_error());
		hs_model_free(mm);
	}
	/* a device name hotset does not know is refused, naming the known ones */
	o.device = "tpu";
	o.plan_path = plan_path;
	rt = NULL;
	CHECK(hs_runtime_open(model, &o, &rt) == -EINVAL && !rt && strstr(hs_last_error(), "cpu, sim, cuda"), "%s",
	      hs_last_error());
	/* a known device that cannot be opened (no CUDA here): the CPU does
	 * everything, said in the description */
	if (hs_cuda_device_count() == 0) {
		o.device = "cuda";
		CHECK(hs_runtime_open(model, &o, &rt) == 0, "%s", hs_last_error());
		if (rt) {
			CHECK(strstr(hs_runtime_describe(rt), "warning: no device") != NULL, "describe: %s",
			      hs_runtime_describe(rt));
			CHECK(hs_runtime_forward(rt, 1, 4, x, NULL, NULL, y) == 0 && rel_l2(y, ref[1], 1024) < 0.05,
			      "cpu only");
			hs_runtime_close(rt);
		}
	}
	/* fault injection on the sim device: pinning refused, no device memory,
	 * the device lost after 3 expert launches.  Each degrades to the CPU
	 * with a warning line, and the output stays right. */
	static const struct {
		const char *var, *val, *said;
	} faults[] = {
		{ "HOTSET_SIM_FAIL_PIN", "1", "no device side" },
		{ "HOTSET_SIM_VRAM_GIB", "0.0001", "no device side" },
		{ "HOTSET_SIM_FAIL_FFN_AFTER", "3", "the device failed" },
	};
	for (size_t fi = 0; fi < sizeof faults / sizeof faults[0]; fi++) {
		struct hs_runtime_opts fo = { .device = "sim", .plan_path = plan_path, .mode = HS_MODE_HYBRID, .q = 0.5,
					      .max_tokens = 4 };
		hs_runtime *frt = NULL;
		setenv(faults[fi].var, faults[fi].val, 1);
		CHECK(hs_runtime_open(model, &fo, &frt) == 0, "%s: %s", faults[fi].var, hs_last_error());
		unsetenv(faults[fi].var);
		if (!frt)
			continue;
		for (int step = 0; step < 4; step++)
			for (int l = 0; l < 2; l++) {
				CHECK(hs_runtime_forward(frt, l, 4, x, NULL, NULL, y) == 0, "%s: %s", faults[fi].var,
				      hs_last_error());
				CHECK(rel_l2(y, ref[l], 1024) < 0.05, "%s step %d layer %d: wrong output", faults[fi].var, step,
				      l);
			}
		struct hs_layer_report rp;
		hs_runtime_layer_report(frt, 1, &rp);
		CHECK(rp.cpu_only, "%s: layer 1 not on the CPU", faults[fi].var);
		CHECK(strstr(hs_runtime_describe(frt), faults[fi].said) != NULL, "%s: description: %s", faults[fi].var,
		      hs_runtime_describe(frt));
		hs_runtime_close(frt);
	}

	/* a plan for another model's layers */
	plan.layers[1].layer = 7;
	hs_plan_save(&plan, plan_path);
	CHECK(hs_runtime_open(model, &o, &rt) == -EINVAL && strstr(hs_last_error(), "layer 7"), "%s", hs_last_error());
	unlink(plan_path);
	free(x);
	free(ref[0]);
	free(ref[1]);
	return hs_test_end();
}
