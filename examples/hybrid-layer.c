/* Example: run one MoE layer of a GGUF model through the hybrid runtime.
 *
 *   cc hybrid-layer.c $(pkg-config --cflags --libs hotset) -lm -o hybrid-layer
 *   ./hybrid-layer model.gguf LAYER [sim|cuda]
 *
 * Loads the model with a placement planned now for this machine (host
 * experts on the GPU's NUMA node), feeds the layer 4 tokens of made-up
 * hidden states, and prints the output's norm and what the layer did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <hotset.h>

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s MODEL.gguf LAYER [sim|cuda]\n", argv[0]);
		return 2;
	}
	int layer = atoi(argv[2]);
	struct hs_runtime_opts opts = {
		.device = argc > 3 ? argv[3] : NULL, /* NULL: a CUDA device if there is one, else the CPU */
		.mode = HS_MODE_NONE,                /* the plan's modes */
		.q = -1,                             /* the plan's streamed share */
		.max_tokens = 4,
		.admit_per_step = 1,
	};
	hs_runtime *rt;
	if (hs_runtime_open(argv[1], &opts, &rt)) {
		fprintf(stderr, "%s\n", hs_last_error()); /* one line: what and why */
		return 1;
	}
	fputs(hs_runtime_describe(rt), stdout);

	hs_model *m;
	if (hs_model_open(argv[1], &m)) {
		fprintf(stderr, "%s\n", hs_last_error());
		hs_runtime_close(rt);
		return 1;
	}
	const int d = hs_model_info(m)->n_embd;
	hs_model_free(m);
	float *x = malloc(sizeof *x * 4 * d), *y = malloc(sizeof *y * 4 * d);
	for (int i = 0; i < 4 * d; i++)
		x[i] = sinf(0.01f * (float)i);

	/* ids and weights NULL: the layer's own router picks the experts */
	if (hs_runtime_forward(rt, layer, 4, x, NULL, NULL, y)) {
		fprintf(stderr, "%s\n", hs_last_error());
		return 1;
	}
	double norm = 0;
	for (int i = 0; i < 4 * d; i++)
		norm += (double)y[i] * y[i];
	struct hs_layer_report r;
	hs_runtime_layer_report(rt, layer, &r);
	printf("layer %d: |y| = %.6g; %ld pairs: %ld on the device, %ld on the CPU, %ld streamed\n", layer, sqrt(norm),
	       r.pairs, r.hits, r.misses_cpu, r.misses_streamed);
	free(x);
	free(y);
	hs_runtime_close(rt);
	return 0;
}
