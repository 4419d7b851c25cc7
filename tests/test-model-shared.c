/* Checks that hotset reads a gpt-oss GGUF written by another implementation
 * (llama.cpp's gguf writer): metadata, shapes, per-expert byte ranges, and
 * the reference MoE output of layers 0 and 1 against an independent float64
 * NumPy implementation (relative L2 error < 1e-5). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "tests/hs-test.h"

static double rel_l2(const float *a, const float *b, size_t n)
{
	double num = 0, den = 0;
	for (size_t i = 0; i < n; i++) {
		num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
		den += (double)b[i] * b[i];
	}
	return sqrt(num / den);
}

int main(void)
{
	hs_model *m = NULL;
	int rc = hs_model_open(hs_test_data("models/gptoss-tiny-h256-e32.gguf"), &m);
	float *x = NULL;
	int64_t rows, cols;

	CHECK(rc == 0, "open: %s", hs_last_error());
	if (rc)
		return hs_test_end();
	const struct hs_model_info *in = hs_model_info(m);
	CHECK(strcmp(in->arch, "gpt-oss") == 0, "arch %s", in->arch);
	CHECK(in->n_layers == 2 && in->n_moe_layers == 2, "layers %d/%d", in->n_layers, in->n_moe_layers);
	CHECK(in->n_experts == 32 && in->n_used == 4, "experts %d used %d", in->n_experts, in->n_used);
	CHECK(in->n_embd == 256 && in->n_ff == 256, "embd %d ff %d", in->n_embd, in->n_ff);
	CHECK(in->expert_type == 39 && strcmp(in->expert_type_name, "mxfp4") == 0 && in->has_bias, "type");
	CHECK(in->expert_weight_bytes == 3 * 256 * 256 / 32 * 17, "expert bytes %llu",
	      (unsigned long long)in->expert_weight_bytes);
	CHECK(in->expert_bias_bytes == 3 * 256 * 4, "bias bytes");
	CHECK(in->non_expert_bytes > 0 && in->router_bytes == 2 * (256 * 32 * 4 + 32 * 4), "router %llu",
	      (unsigned long long)in->router_bytes);
	CHECK(!hs_model_layer_is_moe(m, 2) && !hs_model_layer_is_moe(m, -1), "layer range");

	/* Experts are equal slices, back to back, inside the file. */
	struct hs_expert_layout a, b;
	CHECK(hs_model_expert_layout(m, 1, 0, &a) == 0 && hs_model_expert_layout(m, 1, 31, &b) == 0, "layout");
	CHECK(a.gate.bytes == 256 * 256 / 32 * 17 && b.gate.offset == a.gate.offset + 31 * a.gate.bytes, "gate slices");
	CHECK(a.down_bias.bytes == 256 * 4 && b.down_bias.offset == a.down_bias.offset + 31 * 1024, "bias slices");
	CHECK(b.down.offset + b.down.bytes <= in->file_bytes, "inside the file");
	CHECK(hs_model_expert_layout(m, 1, 32, &a) == -EINVAL, "expert out of range");

	rc = hs_npy_read_f32(hs_test_data("models/x-h256-n4.npy"), &x, &rows, &cols);
	CHECK(rc == 0 && rows == 4 && cols == 256, "x.npy: %s", hs_last_error());
	for (int layer = 0; layer < 2 && x; layer++) {
		char name[64];
		float *want = NULL, y[4 * 256];
		int64_t r2, c2;
		int32_t ids[16];
		float w[16];

		snprintf(name, sizeof name, "models/y-h256-n4-layer%d.npy", layer);
		CHECK(hs_npy_read_f32(hs_test_data(name), &want, &r2, &c2) == 0, "%s", hs_last_error());
		CHECK(hs_moe_ref(m, layer, 4, x, NULL, NULL, y) == 0, "ref: %s", hs_last_error());
		if (want) {
			double e = rel_l2(y, want, 4 * 256);
			CHECK(e < 1e-5, "layer %d: relative L2 error %.3g", layer, e);
			printf("layer %d: relative L2 error %.3g against the float64 NumPy reference\n", layer, e);
		}
		/* The routed form equals the form given the router's own choice. */
		float y2[4 * 256];
		CHECK(hs_moe_route_ref(m, layer, 4, x, ids, w) == 0, "route");
		for (int t = 0; t < 4; t++) {
			float s = 0;
			for (int k = 0; k < 4; k++) {
				s += w[t * 4 + k];
				CHECK(ids[t * 4 + k] >= 0 && ids[t * 4 + k] < 32, "id");
				for (int j = 0; j < k; j++)
					CHECK(ids[t * 4 + j] != ids[t * 4 + k], "duplicate routed id");
			}
			CHECK(fabsf(s - 1) < 1e-6f, "weights sum %g", s);
		}
		CHECK(hs_moe_ref(m, layer, 4, x, ids, w, y2) == 0 && memcmp(y, y2, sizeof y) == 0, "ids form differs");
		free(want);
	}
	free(x);
	hs_model_free(m);
	return hs_test_end();
}
