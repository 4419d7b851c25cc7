/* Model knowledge by architecture: the table entries the kernels use
 * (gating, activation, biases), keyed by GGUF's general.architecture. */
#ifndef HS_ARCH_H
#define HS_ARCH_H

#include <stddef.h>

#include "cpu_kernels/moe.h"

extern const struct hs_moe_arch hs__arch_gpt_oss, hs__arch_qwen3moe;

/* Entry by GGUF architecture name (len bytes, not NUL-terminated), or NULL. */
const struct hs_moe_arch *hs__arch_find(const char *name, size_t len);

#endif
