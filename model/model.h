/* Internal view of an opened model for the kernels and the runtime. */
#ifndef HS_MODEL_H
#define HS_MODEL_H

#include "hotset.h"
#include "cpu_kernels/moe.h"
#include "model/gguf.h"

/* The kernel view of MoE layer `layer`, or NULL if it is not one. */
const struct hs_moe_layer *hs__model_layer(const hs_model *m, int layer);
const struct hs_gguf *hs__model_gguf(const hs_model *m);
/* Bytes of one expert's three matrices in layer l (their types' rows). */
uint64_t hs__model_expert_weight_bytes(const struct hs_moe_layer *l);
/* The path the model was opened from. */
const char *hs__model_path(const hs_model *m);

#endif
