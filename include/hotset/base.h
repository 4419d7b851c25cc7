/* hotset/base.h: errors, build facts, logging, the handles and the values
 * every part uses.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_BASE_H
#define HOTSET_BASE_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* ---- errors and build facts ------------------------------------------- */

/* The message of the last failed call on this thread ("" if none).  The
 * string belongs to the library and stays valid until the next failing call
 * on the same thread. */
const char *hs_last_error(void);

/* A static description of a negative errno code returned by hotset. */
const char *hs_strerror(int err);

/* Library version, e.g. "0.1.0".  Static string. */
const char *hs_version(void);

/* One line describing how this library was built and what this CPU offers,
 * with the CPU kernel tier that runs, e.g. "hwloc 2.9.0; CPU kernels:
 * avx512-vnni (tiers built: avx2 avx-vnni avx512-vnni amx; CPU has avx2 fma
 * f16c avx-vnni avx512f avx512bw avx512vl avx512-vnni); CUDA 13.0 (sm 75 80
 * 86 89 90)".  A faster tier refused (the OS or the kernel did not enable
 * its state, the build lacks it) or a tier asked for with HOTSET_CPU_TIER
 * is said once in the log at HS_LOG_INFO.  Static string owned by the
 * library. */
const char *hs_build_info(void);

/* ---- logging ------------------------------------------------------------- */

/* The library is silent unless asked: messages at `level` or more urgent
 * go to fn (one line, no newline, valid during the call; calls may come
 * from the library's own threads), or to stderr as "hotset: <level>: ..."
 * when fn is NULL.  HS_LOG_NONE (the default) silences it.  Set it before
 * other calls; it is process-wide. */
enum hs_log_level { HS_LOG_NONE, HS_LOG_ERROR, HS_LOG_WARN, HS_LOG_INFO, HS_LOG_DEBUG };
typedef void (*hs_log_fn)(enum hs_log_level level, const char *message, void *ctx);
void hs_log_set(enum hs_log_level level, hs_log_fn fn, void *ctx);
/* "error", "warning", "info", "debug" or "none".  Static string. */
const char *hs_log_level_name(enum hs_log_level level);

/* ---- the handles ----------------------------------------------------------- */

/* Opaque types: created by the calls that name them, freed by their
 * hs_*_free() or hs_*_close(). */
typedef struct hs_model hs_model;               /* a GGUF model file, mapped (model.h) */
typedef struct hs_runtime hs_runtime;           /* a model loaded across CPU and GPU (runtime.h) */
typedef struct hs_context hs_context;           /* KV cache and sequences over a runtime (context.h) */
typedef struct hs_sampler hs_sampler;           /* picks tokens from logits (context.h) */
typedef struct hs_tokenizer hs_tokenizer;       /* text to ids and back (text.h) */
typedef struct hs_detok hs_detok;               /* streaming ids to UTF-8 (text.h) */
typedef struct hs_reply_parser hs_reply_parser; /* a reply as content, reasoning, tool calls (text.h) */
typedef struct hs_grammar hs_grammar;           /* a compiled grammar and its matcher (text.h) */
typedef struct hs_topology hs_topology;         /* NUMA nodes, cores, GPUs (topology.h) */
typedef struct hs_trace hs_trace;               /* recorded routing (trace.h) */
typedef struct hs_trace_writer hs_trace_writer;

/* Structs passed by pointer before their header (plan.h, profile.h). */
struct hs_plan;
struct hs_profile;

/* ---- values several headers share ------------------------------------------ */

/* Fixed limits of the plain-data structs (profile.h, plan.h, runtime.h):
 * arrays of these sizes, no allocation, easy to copy. */
#define HS_MAX_NODES 16
#define HS_MAX_GPUS 16
#define HS_MAX_KSPEED 32
#define HS_MAX_MIX 4
#define HS_MAX_LAYERS 256
#define HS_MAX_WARNINGS 24
#define HS_MAX_SEQ 256

/* KV cache types, where an expert lives, and how a host layer's experts
 * are computed (docs/planner.md). */
enum hs_kv_type { HS_KV_F16, HS_KV_Q8_0 };
enum hs_placement { HS_PLACEMENT_GPU, HS_PLACEMENT_HOST, HS_PLACEMENT_HOST_CACHE };
enum hs_mode { HS_MODE_NONE, HS_MODE_CPU_COMPUTE, HS_MODE_PCIE_STREAM, HS_MODE_HYBRID };

/* Progress of long work: what is being done, fraction 0..1. */
typedef void (*hs_progress_fn)(const char *what, double fraction, void *ctx);

/* Asked during long work (loading a runtime, a context's first weights, a
 * decode between layers): nonzero stops it, and the call returns
 * -ECANCELED with nothing half-done.  ctx is the caller's.  A progress
 * callback that wants to stop sets a flag its abort callback returns. */
typedef int (*hs_abort_fn)(void *ctx);

#endif /* HOTSET_BASE_H */
