/* Checks the planner's VRAM count against what the device backend really
 * allocates: for whole models (the oracle files: gpt-oss with sliding
 * windows and sinks, Qwen3-MoE, GLM-4.5 MoE with a dense FFN layer and
 * shared experts on the device, Qwen3.5 MoE with its DeltaNet states and
 * buffers on the device) under several context lengths, KV types,
 * ubatch sizes, sequence counts and placements, a runtime and one context
 * are opened on the sim device with the plan, and the sim's used memory
 * must equal the plan's vram_bytes plus the sim's bookkeeping (256 bytes
 * per allocation, hs__plan_device_buffers() of them) within 64 KiB.  Also:
 * a preset's dense-part description matches the file `gen` writes for it,
 * and the CUDA count differs from the sim's only by the kernels' scratch. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/device.h"
#include "hotset.h"
#include "model/gen.h"
#include "planner/planner.h"
#include "runtime/runtime.h"
#include "tests/hs-test.h"
#include "tests/plan-util.h"

#define TOLERANCE (64.0 * 1024) /* bytes: what the count may miss in all */

static struct hs_profile pf;

static uint64_t sim_used(hs_runtime *rt)
{
	uint64_t fr = 0, tot = 0;
	rt->d->ops->mem_info(rt->d->dev, &fr, &tot);
	return tot - fr;
}

static void one(const char *path, const struct hs_model_desc *md, int ctx, enum hs_kv_type kv, int ubatch, int n_seq,
		int host_layers)
{
	struct hs_plan_opts o = { .gpu = 0, .ctx = ctx, .kv_type = kv, .ubatch = ubatch, .host_layers = host_layers,
				  .n_seq = n_seq, .device_sim = 1 };
	static struct hs_plan plan;
	char what[160];
	snprintf(what, sizeof what, "%s ctx %d %s ubatch %d seqs %d host layers %d", strrchr(path, '/') + 1, ctx,
		 kv == HS_KV_Q8_0 ? "q8_0" : "f16", ubatch, n_seq, host_layers);
	if (hs_plan_make(md, &pf, &o, &plan)) {
		CHECK(0, "%s: plan: %s", what, hs_last_error());
		return;
	}
	struct hs_runtime_opts ro = { .device = "sim", .plan = &plan, .q = -1, .max_tokens = ubatch };
	hs_runtime *rt = NULL;
	hs_context *c = NULL;
	if (hs_runtime_open(path, &ro, &rt)) {
		CHECK(0, "%s: runtime: %s", what, hs_last_error());
		return;
	}
	const uint64_t after_rt = sim_used(rt);
	struct hs_context_opts co = { .n_ctx = ctx, .n_seq = n_seq, .n_ubatch = ubatch,
				      .kv_type = kv };
	CHECK(hs_context_create(rt, &co, &c) == 0, "%s: context: %s", what, hs_last_error());
	const uint64_t used = sim_used(rt);
	const double book = 256.0 * hs__plan_device_buffers(md, &o);
	const double diff = (double)used - book - (double)plan.memory.vram_bytes;
	printf("%-64s sim used %10llu (runtime %10llu), planned %10llu + bookkeeping %7.0f: %+.0f B\n", what,
	       (unsigned long long)used, (unsigned long long)after_rt, (unsigned long long)plan.memory.vram_bytes, book,
	       diff);
	CHECK(fabs(diff) <= TOLERANCE, "%s: the sim allocated %llu bytes, the plan counts %llu + %.0f of bookkeeping "
	      "(%+.0f, %.0f allowed)", what, (unsigned long long)used, (unsigned long long)plan.memory.vram_bytes, book,
	      diff, TOLERANCE);
	uint64_t parts = plan.memory.vram_nonexpert + plan.memory.vram_kv + plan.memory.vram_experts +
			 plan.memory.vram_slots + plan.memory.vram_staging + plan.memory.vram_workspace;
	CHECK(parts == plan.memory.vram_bytes, "%s: parts %llu, total %llu", what, (unsigned long long)parts,
	      (unsigned long long)plan.memory.vram_bytes);
	hs_context_free(c);
	hs_runtime_close(rt);
}

/* What the planner counts for a preset is what the file gen writes for it
 * holds: each preset's architecture (dense layers, shared experts, q/k
 * norms, DeltaNet layers included) at a small size, its file opened and
 * described, field for field. */
static void preset_matches_file(void)
{
	static const char *const names[] = { "tiny", "gpt-oss-20b", "qwen3-30b-a3b", "glm-4.5-air", "glm-4.5",
					     "qwen3.5-35b-a3b" };
	char path[64];
	snprintf(path, sizeof path, "/tmp/hs-test-vram-%d.gguf", (int)getpid());
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
		struct hs_gen_params g = *hs__gen_preset(names[k]);
		hs_model *m = NULL;
		struct hs_model_desc a, b;
		if (k) { /* the shape kept, the size cut */
			g.n_layers = 4, g.n_experts = 8, g.n_used = 2, g.n_embd = 256, g.n_ff = 256, g.n_vocab = 512;
			g.n_head = 4, g.n_head_kv = 2, g.head_dim = 64, g.n_rot = 0, g.n_ctx = 4096;
			g.n_ff_dense = g.n_ff_dense ? 512 : 0, g.ssm_nk = g.ssm_nk ? 2 : 0, g.ssm_nv = g.ssm_nv ? 4 : 0;
			g.ssm_dh = g.ssm_dh ? 32 : 0, g.full_attn_every = g.full_attn_every ? 2 : 0;
		}
		CHECK(hs__gen_write(&g, path, NULL, NULL) == 0, "gen %s: %s", names[k], hs_last_error());
		CHECK(hs_model_open(path, &m) == 0 && hs_model_desc_from_model(m, &a) == 0, "%s", hs_last_error());
		hs__model_desc_from_gen(&g, &b);
		int same_layers = a.n_moe_layers == b.n_moe_layers;
		for (int i = 0; same_layers && i < a.n_moe_layers; i++)
			same_layers = a.moe_layer[i] == b.moe_layer[i];
		CHECK(a.dense_device_bytes == b.dense_device_bytes && a.dense_device_tensors == b.dense_device_tensors &&
			      a.n_head == b.n_head && a.n_vocab == b.n_vocab && a.n_rot == b.n_rot &&
			      a.dense_type == b.dense_type && a.n_head_kv == b.n_head_kv && a.head_dim == b.head_dim &&
			      a.swa_window == b.swa_window && a.expert_bytes == b.expert_bytes && same_layers &&
			      a.ffn_ff == b.ffn_ff && a.ffn_macs == b.ffn_macs && a.shared_expert_bytes == b.shared_expert_bytes &&
			      a.full_attn_every == b.full_attn_every && a.recurrent_state_bytes == b.recurrent_state_bytes &&
			      a.recurrent_ubatch_floats == b.recurrent_ubatch_floats,
		      "%s: the file: %llu dense bytes in %d tensors, %d MoE layers, ffn %d / %llu MACs, shared %llu, attention "
		      "every %d, state %llu; the preset: %llu in %d, %d, %d / %llu, %llu, %d, %llu", names[k],
		      (unsigned long long)a.dense_device_bytes, a.dense_device_tensors, a.n_moe_layers, a.ffn_ff,
		      (unsigned long long)a.ffn_macs, (unsigned long long)a.shared_expert_bytes, a.full_attn_every,
		      (unsigned long long)a.recurrent_state_bytes, (unsigned long long)b.dense_device_bytes,
		      b.dense_device_tensors, b.n_moe_layers, b.ffn_ff, (unsigned long long)b.ffn_macs,
		      (unsigned long long)b.shared_expert_bytes, b.full_attn_every, (unsigned long long)b.recurrent_state_bytes);
		hs_model_free(m);
		unlink(path);
	}
}

int main(void)
{
	static const char *const files[] = { "oracle/gptoss-l2-h256-swa128-f16.gguf", "oracle/gptoss-l4-h192-swa32-q8.gguf",
					     "oracle/qwen3moe-l3-h256-e16k4-q8.gguf", "oracle/glm4moe-l4-h256-d1-e16k4-q8.gguf",
					     "oracle/qwen35moe-l8-h256-fa4-e16k4-q8.gguf" };
	hs_test_profile(&pf, 4ull << 30);
	for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
		const char *path = hs_test_data(files[f]);
		hs_model *m = NULL;
		struct hs_model_desc md;
		if (hs_model_open(path, &m) || hs_model_desc_from_model(m, &md)) {
			CHECK(0, "%s: %s", path, hs_last_error());
			continue;
		}
		hs_model_free(m);
		CHECK(md.dense_device_bytes > 0 && md.n_vocab > 0, "%s: no dense part described", path);
		/* every layer resident; some host layers (cache and staging slots); all host */
		one(path, &md, 256, HS_KV_F16, 64, 1, 0);
		one(path, &md, 1000, HS_KV_Q8_0, 7, 2, 1);
		one(path, &md, 300, HS_KV_F16, 200, 3, md.n_moe_layers);
		one(path, &md, 4096, HS_KV_Q8_0, 1, 1, md.n_moe_layers / 2);

		/* CUDA's count: the same buffers, other scratch; never less than the
		 * dense part, the KV cache and the experts */
		struct hs_plan_opts o = { .gpu = 0, .ctx = 256, .ubatch = 64, .host_layers = 0 };
		static struct hs_plan cu, sim;
		CHECK(hs_plan_make(&md, &pf, &o, &cu) == 0, "%s", hs_last_error());
		o.device_sim = 1;
		CHECK(hs_plan_make(&md, &pf, &o, &sim) == 0, "%s", hs_last_error());
		CHECK(cu.memory.vram_nonexpert == sim.memory.vram_nonexpert && cu.memory.vram_kv == sim.memory.vram_kv &&
			      cu.memory.vram_experts == sim.memory.vram_experts &&
			      cu.memory.vram_workspace != sim.memory.vram_workspace,
		      "%s: CUDA and sim counts differ outside the workspace (or not at all)", path);
	}
	preset_matches_file();
	return hs_test_end();
}
