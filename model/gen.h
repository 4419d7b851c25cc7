/* Synthetic model files: real shapes, random weights with realistic
 * scales, deterministic for a seed.  Whole models (attention, norms,
 * embeddings, output and a byte-level tokenizer with the architecture's
 * special tokens) unless moe_only asks for the MoE tensors alone.  Tests
 * and benchmarks make their models with this. */
#ifndef HS_GEN_H
#define HS_GEN_H

#include <stdint.h>

#include "model/gguf-write.h"

struct hs_gen_params {
	const char *arch;       /* "gpt-oss", "qwen3moe", "glm4moe" or "qwen35moe" */
	int n_layers, n_experts, n_used, n_embd, n_ff;
	int type;               /* ggml type of the expert matrices */
	uint64_t seed;
	const char *name;       /* general.name */
	/* the rest of a whole model; 0 = the architecture's default for this shape */
	int moe_only;           /* 1: routers and experts only (the MoE benchmarks' files) */
	int n_vocab;            /* token_embd rows (default 512; presets: the real vocabulary) */
	int n_head, n_head_kv, head_dim;
	int dense_type;         /* attention, token_embd and output: 0 = q8_0 (as in the published
				   gpt-oss-120b file), or HS_TYPE_F16 / HS_TYPE_BF16 */
	int swa_window;         /* gpt-oss: 0 = 128; -1 = none (no sliding layers) */
	int n_ctx;              /* context_length */
	int down_type;          /* ffn_down's own type, as llama-quantize's mixes give it (Q4_K_M: q6_K in
				   some layers); 0 = type */
	/* glm4moe and qwen35moe (presets: positional, so these stay last) */
	int n_dense_layers;     /* glm4moe: leading layers with a dense FFN instead of experts */
	int n_ff_dense;         /* their intermediate size (0: 4 x n_ff) */
	int n_shared;           /* shared experts of n_ff each in the MoE layers (qwen35moe: 0 or 1) */
	int qk_norm;            /* glm4moe: 1 = per-head q/k norms (GLM-4.5; GLM-4.5-Air has none) */
	float expert_scale;     /* expert_weights_scale (0: 1) */
	int n_rot;              /* rotary dimensions (0: glm4moe half a head, qwen35moe a quarter, else all) */
	/* qwen35moe's Gated DeltaNet layers: all but each full_attn_every-th (0: 4); key heads, value
	 * heads, head size, conv kernel (0: 16, 32, 128, 4) */
	int full_attn_every, ssm_nk, ssm_nv, ssm_dh, ssm_conv;
};

/* Preset shapes by name ("gpt-oss-120b", "gpt-oss-20b", "qwen3-30b-a3b",
 * "qwen3-235b-a22b", "glm-4.5-air", "glm-4.5", "qwen3.5-35b-a3b", "tiny"); NULL if unknown. */
const struct hs_gen_params *hs__gen_preset(const char *name);
/* Comma-separated preset names, for messages. */
const char *hs__gen_preset_names(void);

/* The planner's description of the model gen writes for p (model-desc.c;
 * what hs_model_desc_preset() gives for a preset): tests compare it with
 * the description of the file itself. */
struct hs_model_desc;
void hs__model_desc_from_gen(const struct hs_gen_params *p, struct hs_model_desc *out);

/* Checks the parameters: one clear message per bad value. */
int hs__gen_check(const struct hs_gen_params *p);
/* p with every 0 of the whole-model fields replaced by its default. */
struct hs_gen_params hs__gen_resolve(const struct hs_gen_params *p);
/* Bytes the file will have (approximately: headers excluded). */
uint64_t hs__gen_data_bytes(const struct hs_gen_params *p);
/* Writes the model to path through "<path>.part". */
int hs__gen_write(const struct hs_gen_params *p, const char *path, hs_gguf_progress_fn progress, void *ctx);
/* The same model split as llama-gguf-split --split-max-size max_bytes
 * splits it: prefix-00001-of-0000N.gguf ... (hs__gguf_w_write_split). */
int hs__gen_write_split(const struct hs_gen_params *p, const char *prefix, uint64_t max_bytes,
			hs_gguf_progress_fn progress, void *ctx);
/* How many shards that writes (or a negative errno). */
int hs__gen_shard_count(const struct hs_gen_params *p, uint64_t max_bytes);

/* The tensors gen writes, in file order, and the bytes of one row as gen
 * makes it: lets tests check a file against what gen meant to write. */
int hs__gen_n_tensors(const struct hs_gen_params *p);
const char *hs__gen_tensor_name(const struct hs_gen_params *p, int tensor, char *buf, int len);
/* Tensor `tensor`'s name (into buf), shape (ne[0] values a row) and ggml type. */
void hs__gen_tensor_info(const struct hs_gen_params *p, int tensor, char *buf, int len, uint64_t ne[3], int *type);
int hs__gen_rows(const struct hs_gen_params *p, int tensor, uint64_t row0, uint64_t n_rows, void *buf);

#endif
