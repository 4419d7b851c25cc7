/* Checks the CUDA expert kernels' arithmetic without a GPU: gpu_kernels/moe.cu
 * writes every computation as __host__ __device__ code, and
 * hs__gpu_ffn_emulate() runs it on the CPU exactly as the decode kernels
 * (8 threads per row of a 16-row group) and the prefill kernels (grouping
 * by expert, 64 x 32 tiles of 4 x 2 per thread) split it, reading experts
 * in the layout that hs__expert_pack writes (the host copy's): MXFP4 and
 * Q8_0 matrices row-interleaved (and Q4_K, on a CPU tier that packs it:
 * the AVX-512 ones), every other block type and
 * llama-quantize's mixes (Q4_K gate/up with a Q6_K down, ...) as plain
 * rows; a type per matrix in both.
 * Both paths against the double reference (5e-2: the activations and h
 * are quantized to Q8_0), against the CPU's reference kernels (1e-3: the
 * same integer dots and scales, only the float order differs, and h is
 * quantized again from floats that may differ in the last bit) and against
 * each other (1e-4), over odd shapes, 1..300 tokens, masked, duplicate and
 * all-masked ids, experts absent from the pool (slot -1); a routed expert
 * without a slot or an id outside the experts is the sim's -EINVAL (the
 * kernels' check, y left as it was), float experts and a wrong interleave
 * are refused.  Not
 * covered here: launch geometry, shuffles, atomics (bench/gpu-check.sh on
 * a GPU).  SKIP in a build without CUDA. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/kernels.h"
#include "cpu_kernels/repack.h"
#include "model/arch.h"
#include "hotset.h"
#include "device/device-cuda.h"
#include "device/device.h"
#include "tests/hs-test.h"
#include "tests/layer-util.h"

static double worst_ref, worst_cpu, worst_paths;

static void note(double *w, double e)
{
	*w = e > *w ? e : *w;
}

/* The CPU's fused FFN with the reference kernels over the same pool. */
static void cpu_ffn(const struct hs_moe_layer *l, const struct hs_expert_pack *pack, const uint8_t *pool,
		    const int32_t *slot_of, int n, const float *x, const int32_t *ids, const float *w, float *y)
{
	struct hs_moe_layer lp = *l;
	lp.gate = lp.up = lp.down = NULL;
	lp.gate_b = lp.up_b = lp.down_b = NULL;
	lp.pool = pool;
	lp.pool_stride = pack->bytes;
	lp.slot_of = slot_of;
	lp.pack = *pack;
	void *scratch = aligned_alloc(64, (hs__ffn_scratch_bytes(&lp, n) + 63) & ~(size_t)63);
	struct hs_ffn_job job = { .layer = &lp, .ops = &hs__kernels_ref, .n = n, .x = x, .ids = ids, .weights = w,
				  .y = y, .scratch = scratch };
	memset(y, 0, sizeof(float) * (size_t)n * l->n_embd);
	CHECK(scratch && hs__ffn_run_omp(&job, 1) == 0, "CPU fused FFN: %s", hs_last_error());
	free(scratch);
}

static void one_case(struct layer *L, int n, int mask_mode, int dup)
{
	const struct hs_moe_layer *l = &L->l;
	const int D = l->n_embd, F = l->n_ff, E = l->n_experts, K = l->n_used;
	const struct hs_expert_pack pack = hs__expert_pack_layout(l->type, D, F, l->arch->has_bias);
	float *x = malloc(sizeof *x * (size_t)n * D), *w = malloc(sizeof *w * (size_t)n * K);
	float *ref = malloc(sizeof *ref * (size_t)n * D), *cpu = malloc(sizeof *cpu * (size_t)n * D), *y[2];
	int32_t *ids = malloc(sizeof *ids * (size_t)n * K), *slot_of = malloc(sizeof *slot_of * E);
	struct hs_block_q8_0 *xq = malloc(sizeof *xq * (size_t)n * (D / HS_QK));
	uint8_t *pool = malloc(pack.bytes * (size_t)E);

	y[0] = calloc((size_t)n * D, sizeof(float));
	y[1] = calloc((size_t)n * D, sizeof(float));
	for (size_t i = 0; i < (size_t)n * D; i++)
		x[i] = frand();
	for (int t = 0; t < n; t++)
		for (int j = 0; j < K; j++) {
			int e = (int)(next() % (uint32_t)(E - 1)); /* the last expert never routed */
			if (dup && j > 0 && next() % 3 == 0)
				e = ids[t * K + j - 1];
			if ((mask_mode == 1 && next() % 3 == 0) || mask_mode == 2)
				e = -1;
			ids[t * K + j] = e;
			w[t * K + j] = 0.2f + 0.6f * (float)(next() % 100) / 100.0f;
		}
	/* experts sit in the pool in reverse order; the unrouted one is absent */
	for (int e = 0; e < E; e++) {
		slot_of[e] = e == E - 1 ? -1 : E - 2 - e;
		if (slot_of[e] >= 0)
			hs__expert_pack(l, e, &pack, pool + (size_t)slot_of[e] * pack.bytes);
	}
	for (int t = 0; t < n; t++)
		hs__kernels_best()->quantize_q8_0(x + (size_t)t * D, xq + (size_t)t * (D / HS_QK), D);
	CHECK(hs__moe_forward_ref(l, n, x, ids, w, ref) == 0, "%s", hs_last_error());
	cpu_ffn(l, &pack, pool, slot_of, n, x, ids, w, cpu);
	struct hs_dev_ffn f = { .arch = l->arch, .n_embd = D, .n_ff = F, .n_experts = E, .n_used = K,
				.pack = pack, .pool = pool, .pool_stride = pack.bytes, .slot_of = slot_of, .n = n,
				.xq = xq, .ids = ids, .weights = w };
	size_t sb = hs__cuda_ffn_scratch_bytes(&f) + 64;
	void *scratch = malloc(sb);
	int interleave = 1; /* the layout interleaves when every matrix is MXFP4 or Q8_0 (or Q4_K on this tier) */
	for (int i = 0; i < 3; i++)
		interleave &= l->type[i] == HS_TYPE_MXFP4 || l->type[i] == HS_TYPE_Q8_0 ||
			      (l->type[i] == HS_TYPE_Q4_K && hs__pack_type(HS_TYPE_Q4_K));
	CHECK(!!pack.packed_rows == interleave, "%s/%s/%s experts: packed_rows %zu", hs__type_name(l->type[HS_GATE]),
	      hs__type_name(l->type[HS_UP]), hs__type_name(l->type[HS_DOWN]), (size_t)pack.packed_rows);
	f.y = y[0];
	f.scratch = scratch;
	f.pack.packed_rows = 8;
	CHECK(hs__cuda_ffn_emulate(&f, 0) == -EINVAL, "8 rows per interleaved group accepted");
	f.pack.packed_rows = pack.packed_rows;
	if (!interleave) {
		f.pack.packed_rows = HS_PACK_ROWS;
		CHECK(hs__cuda_ffn_emulate(&f, 0) == -EINVAL, "row-interleaved %s experts accepted",
		      hs__type_name(l->type[HS_GATE]));
		f.pack.packed_rows = 0;
	}
	for (int tiled = 0; tiled < 2; tiled++) {
		f.y = y[tiled];
		f.scratch = scratch;
		memset(scratch, 0xff, sb); /* NaN: nothing may be left from the other path */
		CHECK(hs__cuda_ffn_emulate(&f, tiled) == 0, "%s", hs_last_error());
		const double err = rel_l2(y[tiled], ref, (size_t)n * D), ec = rel_l2(y[tiled], cpu, (size_t)n * D);
		CHECK(err < (mask_mode == 2 ? 1e-30 : 0.05) && ec <= 1e-3,
		      "%s %s/%s/%s D%d F%d E%d K%d n=%d mask %d dup %d %s: rel L2 %.3g (5e-2), %.3g against the CPU (1e-3)",
		      l->arch->name, hs__type_name(l->type[HS_GATE]), hs__type_name(l->type[HS_UP]),
		      hs__type_name(l->type[HS_DOWN]), D, F, E, K, n, mask_mode, dup, tiled ? "tiled" : "decode", err,
		      ec);
		note(&worst_ref, err);
		note(&worst_cpu, ec);
	}
	/* the two paths do the same sums in another order */
	double diff = rel_l2(y[1], y[0], (size_t)n * D);
	CHECK(diff < 1e-4 || mask_mode == 2, "decode and tiled paths differ by %.3g (n=%d)", diff, n);
	note(&worst_paths, diff);
	/* A routed expert without a slot, or an id outside the experts, is the
	 * sim's -EINVAL, not a read before the pool: the kernels' check finds
	 * it in the last pair too (past the check's 256 threads when n = 300)
	 * and the launch leaves y as it was. */
	if (mask_mode == 0) {
		const int last = n * K - 1;
		const int32_t keep = ids[last];
		static const char *const what[2] = { "has no slot", "outside" };
		float *y0 = malloc(sizeof(float) * (size_t)n * D);
		for (int bad = 0; bad < 2 && y0; bad++) {
			ids[last] = bad ? E : E - 1;
			for (int tiled = 0; tiled < 2; tiled++) {
				char want[32];
				f.y = y[tiled];
				memcpy(y0, y[tiled], sizeof(float) * (size_t)n * D);
				int rc = hs__cuda_ffn_emulate(&f, tiled);
				snprintf(want, sizeof want, bad ? "id %d " : "expert %d ", ids[last]);
				CHECK(rc == -EINVAL && strstr(hs_last_error(), want) && strstr(hs_last_error(), what[bad]),
				      "%s id %d in pair %d: rc %d, '%s'", bad ? "an out-of-range" : "an unslotted", ids[last],
				      last, rc, hs_last_error());
				CHECK(memcmp(y0, y[tiled], sizeof(float) * (size_t)n * D) == 0,
				      "a launch with a fault changed y (%s path)", tiled ? "tiled" : "decode");
			}
		}
		free(y0);
		ids[last] = keep;
	}
	free(scratch);
	free(cpu);
	free(x);
	free(w);
	free(ref);
	free(y[0]);
	free(y[1]);
	free(ids);
	free(slot_of);
	free(xq);
	free(pool);
}

int main(void)
{
	static const struct {
		const struct hs_moe_arch *arch;
		int type, D, F, E, K;
	} shapes[] = {
		{ &hs__arch_gpt_oss, HS_TYPE_MXFP4, 64, 96, 8, 4 },
		{ &hs__arch_gpt_oss, HS_TYPE_MXFP4, 256, 160, 16, 4 },
		{ &hs__arch_qwen3moe, HS_TYPE_Q8_0, 128, 64, 16, 8 },
		{ &hs__arch_qwen3moe, HS_TYPE_MXFP4, 96, 224, 8, 2 },
	};
	static const int ns[] = { 1, 7, 33, 300 };
	/* llama-quantize's mixes (gate/up, down), as test-kernels has them;
	 * D and F multiples of 256 where a matrix has 256-value blocks */
	static const int mix[][2] = { { HS_TYPE_Q4_K, HS_TYPE_Q4_K }, { HS_TYPE_Q4_K, HS_TYPE_Q6_K },
				      { HS_TYPE_Q5_K, HS_TYPE_Q5_K },
				      { HS_TYPE_Q6_K, HS_TYPE_Q6_K }, { HS_TYPE_IQ4_XS, HS_TYPE_IQ4_XS },
				      { HS_TYPE_Q3_K, HS_TYPE_Q5_K }, { HS_TYPE_Q2_K, HS_TYPE_Q3_K },
				      { HS_TYPE_Q4_K, HS_TYPE_Q5_0 }, { HS_TYPE_Q4_K, HS_TYPE_Q8_0 },
				      { HS_TYPE_Q4_0, HS_TYPE_Q4_1 }, { HS_TYPE_Q5_1, HS_TYPE_IQ4_NL },
				      { HS_TYPE_Q8_0, HS_TYPE_MXFP4 }, { HS_TYPE_Q4_0, HS_TYPE_MXFP4 } };
	struct hs_dev_ffn probe = { 0 };

	if (hs__cuda_ffn_emulate(&probe, 0) == -ENOSYS)
		SKIP("%s", hs_last_error());
	for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
		struct layer L;
		if (make_layer(&L, shapes[i].arch, shapes[i].type, shapes[i].D, shapes[i].F, shapes[i].E, shapes[i].K)) {
			CHECK(0, "out of memory");
			break;
		}
		for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
			for (int mask = 0; mask < 3; mask++)
				one_case(&L, ns[j], mask, mask == 1);
		free(L.w);
		free(L.b);
	}
	for (size_t i = 0; i < sizeof mix / sizeof mix[0]; i++) {
		const int t3[3] = { mix[i][0], mix[i][0], mix[i][1] };
		const int D = hs__type_block_values(t3[0]) == 256 ? 256 : 96;
		const int F = hs__type_block_values(t3[2]) == 256 ? 512 : 160;
		struct layer L;
		if (make_layer3(&L, i % 2 ? &hs__arch_gpt_oss : &hs__arch_qwen3moe, t3, D, F, 8, 4)) {
			CHECK(0, "out of memory");
			break;
		}
		/* decode and prefill sizes; a masked and duplicated batch */
		one_case(&L, 1 + (int)(i % 3) * 3, 0, 0);
		one_case(&L, 33, 1, 1);
		if (i % 4 == 0)
			one_case(&L, 100, 0, 1);
		free(L.w);
		free(L.b);
	}
	/* float experts stay on the CPU */
	struct hs_dev_ffn f = probe;
	f.arch = &hs__arch_qwen3moe;
	f.n_embd = f.n_ff = 64;
	f.n_experts = 2;
	f.n_used = 1;
	f.pack = hs__expert_pack_layout1(HS_TYPE_F16, 64, 64, 0);
	CHECK(hs__cuda_ffn_emulate(&f, 0) == -EINVAL, "f16 experts accepted");
	printf("ffn: worst error %.3g against the double reference (5e-2), %.3g against the CPU kernels (1e-3), "
	       "%.3g between the paths (1e-4)\n",
	       worst_ref, worst_cpu, worst_paths);
	return hs_test_end();
}
