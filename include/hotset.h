/* hotset: runs Mixture-of-Experts language models across CPU and GPU on one
 * machine.  This is the public header: it includes the parts below, in the
 * order a reader needs them.
 *
 * Conventions: every call that can fail returns 0 or a negative errno
 * (-EINVAL bad input, -ENOMEM, -ENODEV no such device, -EIO bad file), or a
 * NULL pointer; hs_last_error() then holds a one-line message naming the thing
 * and the limit.  The library never exits and never prints.  A NULL handle
 * or out-pointer is -EINVAL (NULL from calls that return a pointer) with
 * such a message; hs_*_free(NULL) and hs_*_close(NULL) do nothing.
 *
 * Text generation in brief (examples/generate.c is this, whole and checked;
 * docs/library.md says more):
 *
 *   hs_runtime *rt;  hs_context *c;  hs_tokenizer *tk;  hs_sampler *smp;
 *   hs_runtime_open("model.gguf", NULL, &rt);     // plan, load experts where the plan puts them
 *   hs_context_create(rt, NULL, &c);              // KV cache, dense weights
 *   hs_tokenizer_open("model.gguf", &tk);
 *   struct hs_chat_message m = { .role = "user", .content = "Hi" };
 *   int32_t *ids;  int n;
 *   hs_chat_tokenize(tk, &m, 1, NULL, &ids, &n);  // the model's own chat format
 *   // batch[i] = { ids[i], .pos = i, .seq = 0, .logits = i == n - 1 }
 *   hs_decode(c, n, batch);
 *   hs_sampler_create(NULL, hs_runtime_model_info(rt)->n_vocab, &smp);
 *   int32_t id = hs_sampler_sample(smp, hs_context_logits(c, 0));
 *   // until hs_tokenizer_eot(tk): hs_detok_push() the id, hs_decode() it at
 *   // position n, n + 1, ...; then free ids and every handle
 *
 * Every call returns its error code; check each one. */
#ifndef HOTSET_H
#define HOTSET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what these headers declare
 * is its whole interface, and the only symbols libhotset exports. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

#define HOTSET_H_INSIDE
/* errors, version, logging, the handles, shared limits and enums */
#include "hotset/base.h"
/* text generation */
#include "hotset/model.h"   /* a GGUF file: hs_model_open, what it holds */
#include "hotset/runtime.h" /* hs_runtime_open: the model loaded across CPU and GPU */
#include "hotset/context.h" /* hs_context_create, hs_decode, sequences, state files, the sampler */
#include "hotset/text.h"    /* tokenizer, detokenizer, chat formats, reply parser */
/* one MoE layer at a time (examples/hybrid-layer.c) */
#include "hotset/moe.h"     /* hs_moe_ref, hs_moe_forward_cpu/_device, cache simulation */
/* the planner and the machine */
#include "hotset/plan.h"     /* hs_plan_make: where every expert lives, predicted speed */
#include "hotset/profile.h"  /* measured or written machine rates */
#include "hotset/topology.h" /* NUMA nodes, cores, GPUs (hwloc) */
#include "hotset/trace.h"    /* routing traces */
#include "hotset/gpu.h"      /* CUDA presence, waiting for GPU memory */
#include "hotset/npy.h"      /* float32 .npy files */
#undef HOTSET_H_INSIDE

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* HOTSET_H */
