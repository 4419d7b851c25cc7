/* Checks the CUDA expert kernels' arithmetic without a GPU: gpu_kernels/moe.cu
 * writes every computation as __host__ __device__ code, and
 * hs__gpu_ffn_emulate() runs it on the CPU exactly as the decode kernels
 * (8 threads per row of a 16-row group) and the prefill kernels (grouping
 * by expert, 64 x 32 tiles of 4 x 2 per thread) split it, reading experts
 * in the row-interleaved layout that hs__expert_pack writes (the host
 * copy's).  Both paths against the double reference and against each
 * other, over odd shapes, 1..300 tokens, masked, duplicate and all-masked
 * ids, experts absent from the pool (slot -1); a pack of plain rows is
 * refused.  Not covered here:
 * launch geometry, shuffles, atomics (bench/gpu-check.sh on a GPU).  SKIP
 * in a build without CUDA. */
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

static void one_case(struct layer *L, int n, int mask_mode, int dup)
{
	const struct hs_moe_layer *l = &L->l;
	const int D = l->n_embd, F = l->n_ff, E = l->n_experts, K = l->n_used;
	const struct hs_expert_pack pack = hs__expert_pack_layout(l->type, D, F, l->arch->has_bias);
	float *x = malloc(sizeof *x * (size_t)n * D), *w = malloc(sizeof *w * (size_t)n * K);
	float *ref = malloc(sizeof *ref * (size_t)n * D), *y[2];
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
	struct hs_dev_ffn f = { .arch = l->arch, .n_embd = D, .n_ff = F, .n_experts = E, .n_used = K,
				.pack = pack, .pool = pool, .pool_stride = pack.bytes, .slot_of = slot_of, .n = n,
				.xq = xq, .ids = ids, .weights = w };
	size_t sb = hs__cuda_ffn_scratch_bytes(&f) + 64;
	void *scratch = malloc(sb);
	CHECK(pack.packed_rows == HS_PACK_ROWS, "%s experts are not packed row-interleaved", hs__type_name(l->type[HS_GATE]));
	f.pack.packed_rows = 0;
	f.y = y[0];
	f.scratch = scratch;
	CHECK(hs__cuda_ffn_emulate(&f, 0) == -EINVAL, "plain rows accepted by the device kernels");
	f.pack.packed_rows = pack.packed_rows;
	for (int tiled = 0; tiled < 2; tiled++) {
		f.y = y[tiled];
		f.scratch = scratch;
		memset(scratch, 0xff, sb); /* NaN: nothing may be left from the other path */
		CHECK(hs__cuda_ffn_emulate(&f, tiled) == 0, "%s", hs_last_error());
		double err = rel_l2(y[tiled], ref, (size_t)n * D);
		CHECK(err < (mask_mode == 2 ? 1e-30 : 0.05), "%s %s D%d F%d E%d K%d n=%d mask %d dup %d %s: rel L2 %.3g",
		      l->arch->name, hs__type_name(l->type[HS_GATE]), D, F, E, K, n, mask_mode, dup,
		      tiled ? "tiled" : "decode", err);
	}
	/* the two paths do the same sums in another order */
	double diff = rel_l2(y[1], y[0], (size_t)n * D);
	CHECK(diff < 1e-4 || mask_mode == 2, "decode and tiled paths differ by %.3g (n=%d)", diff, n);
	free(scratch);
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
	return hs_test_end();
}
