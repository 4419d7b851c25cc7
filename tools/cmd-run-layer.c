/* `hotset run-layer`: one MoE layer on hidden states from a .npy file. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset run-layer --model FILE --layer L --input X.npy --output Y.npy\n"
	       "                        [--ref | --device D | --mode M [--device D] [--plan P.json] [--q Q]]\n\n"
	       "Runs the MoE block of one layer (router, top-k, gating, experts, weighted sum; no\n"
	       "norm, no residual) on float32 hidden states [n, n_embd] read from X.npy and\n"
	       "writes float32 [n, n_embd] to Y.npy. Use it to check hotset against your own\n"
	       "NumPy or PyTorch implementation.\n\n"
	       "  --model FILE    GGUF model file\n"
	       "  --layer L       layer index (a layer with experts)\n"
	       "  --input X.npy   float32, shape (n, n_embd) or (n_embd,), C order\n"
	       "  --output Y.npy  written through Y.npy.part and a rename\n"
	       "  --ref           the double-precision reference path; without it the fastest\n"
	       "                  CPU kernels run (the tier `hotset --version` names, Q8_0\n"
	       "                  activations; HS_USE_REF=1 forces their scalar twins)\n"
	       "  --device D      run the experts on a device instead: sim (the CPU imitating\n"
	       "                  a device: same contract, for tests) or cuda (device 0)\n"
	       "  --mode M        run it in the hybrid runtime: cpu (host experts on the CPU),\n"
	       "                  stream (missed experts copied to the device), hybrid (a share\n"
	       "                  q streamed, the rest on the CPU) or auto (the plan's modes);\n"
	       "                  prints where the layer's experts were and what each lane did\n"
	       "  --plan P.json   the placement (`hotset plan -o`); default: planned now\n"
	       "  --q Q           hybrid: share of the missed experts streamed (0..1)\n"
	       "  --trace FILE    with --mode: record the layer's routing (see `hotset trace`)\n"
	       "  --replay FILE   with --mode: route by the trace's next record for the layer\n"
	       "  -h, --help      this text\n");
}

int hs_cmd_run_layer(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' }, { "layer", required_argument, NULL, 'l' },
		{ "input", required_argument, NULL, 'i' }, { "output", required_argument, NULL, 'o' },
		{ "ref", no_argument, NULL, 'r' },         { "device", required_argument, NULL, 'd' },
		{ "mode", required_argument, NULL, 'M' },  { "plan", required_argument, NULL, 'p' },
		{ "q", required_argument, NULL, 'q' },     { "trace", required_argument, NULL, 'T' },
		{ "replay", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *model = NULL, *in = NULL, *out = NULL, *layer_s = NULL, *device = NULL, *mode_s = NULL,
		   *plan = NULL, *trace = NULL, *replay = NULL;
	double q = -1;
	hs_runtime *rt = NULL;
	char desc[160] = "";
	int c, layer, rc = 1, ref = 0;
	int64_t rows, cols;
	float *x = NULL, *y = NULL;
	hs_model *m = NULL;
	struct timespec t0, t1;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 'm': model = optarg; break;
		case 'l': layer_s = optarg; break;
		case 'i': in = optarg; break;
		case 'o': out = optarg; break;
		case 'r': ref = 1; break;
		case 'd': device = optarg; break;
		case 'M': mode_s = optarg; break;
		case 'T': trace = optarg; break;
		case 'R': replay = optarg; break;
		case 'p': plan = optarg; break;
		case 'q':
			if (hs_cli_parse_num("run-layer", "--q", optarg, 0, 1, &q))
				return 1;
			break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("run-layer");
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset run-layer: unexpected argument '%s'\n", argv[optind]);
		return hs_cli_usage_error("run-layer");
	}
	if (!model || !layer_s || !in || !out)
		return hs_cli_fail("run-layer", "missing %s", !model ? "--model FILE" : !layer_s ? "--layer L"
							      : !in ? "--input X.npy" : "--output Y.npy");
	if (hs_cli_parse_int("run-layer", "--layer", layer_s, 0, 100000, &layer))
		return 1;
	if (device && !*device) /* the library would read '' as "choose for me" */
		return hs_cli_fail("run-layer", "--device '': give sim or cuda");
	/* where the results go is checked before the model is loaded */
	if (hs_cli_check_output("run-layer", "--output", out) ||
	    (trace && hs_cli_check_output("run-layer", "--trace", trace)))
		return 1;
	if (hs_model_open(model, &m) != 0)
		return hs_cli_fail("run-layer", "%s", hs_last_error());
	const struct hs_model_info *mi = hs_model_info(m);
	if (!hs_model_layer_is_moe(m, layer)) {
		hs_cli_fail("run-layer", "--layer %d: %s has %d layers and layer %d has no experts", layer, model,
			    mi->n_layers, layer);
		goto out_close;
	}
	if (hs_npy_read_f32(in, &x, &rows, &cols) != 0) {
		hs_cli_fail("run-layer", "%s", hs_last_error());
		goto out_close;
	}
	if (cols != mi->n_embd || rows < 1 || rows > (1 << 20)) {
		hs_cli_fail("run-layer", "%s: shape (%lld, %lld), but the model needs (n, %d) with 1 <= n <= %d", in,
			    (long long)rows, (long long)cols, mi->n_embd, 1 << 20);
		goto out_close;
	}
	if (hs__check_finite(x, (long)rows, (long)cols, in)) {
		hs_cli_fail("run-layer", "%s", hs_last_error());
		goto out_close;
	}
	y = malloc(sizeof *y * (size_t)rows * (size_t)cols);
	if (!y) {
		hs_cli_fail("run-layer", "out of memory");
		goto out_close;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (ref && (device || mode_s)) {
		hs_cli_fail("run-layer", "--ref runs the reference alone: no --device or --mode with it");
		goto out_close;
	}
	if ((plan || q >= 0 || trace || replay) && !mode_s) {
		hs_cli_fail("run-layer", "--plan, --q, --trace and --replay go with --mode");
		goto out_close;
	}
	if (mode_s) {
		static const struct {
			const char *name;
			enum hs_mode mode;
		} modes[] = { { "cpu", HS_MODE_CPU_COMPUTE }, { "stream", HS_MODE_PCIE_STREAM },
			      { "hybrid", HS_MODE_HYBRID }, { "auto", HS_MODE_NONE } };
		/* --mode without --device: a CUDA device, else sim (the library's NULL would be the CPU) */
		const char *rdev = device ? device : hs_cuda_device_count() > 0 ? "cuda" : "sim";
		struct hs_runtime_opts ro = { .device = rdev, .plan_path = plan, .trace_path = trace, .replay_path = replay, .mode = HS_MODE_NONE, .q = q,
					      .max_tokens = (int)rows, .admit_per_step = 1 };
		size_t i = 0;
		while (i < 4 && strcmp(modes[i].name, mode_s))
			i++;
		if (i == 4) {
			hs_cli_fail("run-layer", "--mode %s: cpu, stream, hybrid or auto", mode_s);
			goto out_close;
		}
		ro.mode = modes[i].mode;
		if (hs_runtime_open(model, &ro, &rt)) {
			hs_cli_fail("run-layer", "%s", hs_last_error());
			goto out_close;
		}
	}
	if ((ref      ? hs_moe_ref(m, layer, (int)rows, x, NULL, NULL, y)
	     : rt     ? hs_runtime_forward(rt, layer, (int)rows, x, NULL, NULL, y)
	     : device ? hs_moe_forward_device(m, layer, (int)rows, x, NULL, NULL, y, device, desc, sizeof desc)
		      : hs_moe_forward_cpu(m, layer, (int)rows, x, NULL, NULL, y, 0)) != 0) {
		hs_cli_fail("run-layer", "%s", hs_last_error());
		goto out_close;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (hs_npy_write_f32(out, y, rows, cols) != 0) {
		hs_cli_fail("run-layer", "%s", hs_last_error());
		goto out_close;
	}
	if (rt) {
		struct hs_layer_report r;
		hs_runtime_layer_report(rt, layer, &r);
		fputs(hs_runtime_describe(rt), stdout);
		printf("run-layer: layer %d, %lld tokens, mode %s: %ld pairs, %ld hits on the device, %ld misses on the "
		       "CPU, %ld streamed; %.1f MiB read from host memory, %.1f MiB copied to the device\n",
		       layer, (long long)rows, mode_s, r.pairs, r.hits, r.misses_cpu, r.misses_streamed,
		       r.host_bytes_read / 1048576.0, r.pcie_bytes / 1048576.0);
		printf("run-layer: lanes busy (ms): host %.2f, cpu %.2f, device %.2f, copy %.2f; layer %.2f ms\n",
		       1e3 * r.busy_s[0], 1e3 * r.busy_s[1], 1e3 * r.busy_s[2], 1e3 * r.busy_s[3], 1e3 * r.wall_s);
	} else if (device) /* what ran it is part of the result: sim output says "sim" */
		printf("run-layer: layer %d, %lld tokens on device %s\n", layer, (long long)rows, desc);
	if (hs_cli.verbose)
		fprintf(stderr, "run-layer: layer %d, %lld tokens, %s, %.3f s\n", layer, (long long)rows,
			ref ? "double-precision reference" : rt ? "hybrid runtime" : device ? desc : hs_cpu_kernels_name(),
			(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
	rc = 0;
out_close:
	hs_runtime_close(rt);
	/* the trace of a run whose output was not written is not kept either */
	if (rc && rt && trace)
		unlink(trace);
	free(x);
	free(y);
	hs_model_free(m);
	return rc;
}
