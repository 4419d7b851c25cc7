/* Synthetic MoE model files: real shapes, random weights with realistic
 * scales, deterministic for a seed.  Tests make their models with this. */
#ifndef HS_GEN_H
#define HS_GEN_H

#include <stdint.h>

#include "model/gguf-write.h"

struct hs_gen_params {
	const char *arch;       /* "gpt-oss" or "qwen3moe" */
	int n_layers, n_experts, n_used, n_embd, n_ff;
	int type;               /* ggml type of the expert matrices */
	uint64_t seed;
	const char *name;       /* general.name */
};

/* Preset shapes by name ("gpt-oss-120b", "gpt-oss-20b", "qwen3-30b-a3b",
 * "qwen3-235b-a22b", "tiny"); NULL if unknown. */
const struct hs_gen_params *hs__gen_preset(const char *name);
/* Comma-separated preset names, for messages. */
const char *hs__gen_preset_names(void);

/* Checks the parameters: one clear message per bad value. */
int hs__gen_check(const struct hs_gen_params *p);
/* Bytes the file will have (approximately: headers excluded). */
uint64_t hs__gen_data_bytes(const struct hs_gen_params *p);
/* Writes the model to path through "<path>.part". */
int hs__gen_write(const struct hs_gen_params *p, const char *path, hs_gguf_progress_fn progress, void *ctx);

/* The tensors gen writes, in file order, and the bytes of one row as gen
 * makes it: lets tests check a file against what gen meant to write. */
int hs__gen_n_tensors(const struct hs_gen_params *p);
const char *hs__gen_tensor_name(const struct hs_gen_params *p, int tensor, char *buf, int len);
int hs__gen_rows(const struct hs_gen_params *p, int tensor, uint64_t row0, uint64_t n_rows, void *buf);

#endif
