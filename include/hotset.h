/* hotset: runs the Mixture-of-Experts layers of large language models across
 * CPU and GPU on one machine.  This is the one public header.
 *
 * Conventions: every call that can fail returns 0 or a negative errno
 * (-EINVAL bad input, -ENOMEM, -ENODEV no such device, -EIO bad file), or a
 * NULL pointer; hs_last_error() then holds a one-line message naming the thing
 * and the limit.  The library never exits and never prints.  A NULL handle
 * or out-pointer is -EINVAL (NULL from calls that return a pointer) with
 * such a message; hs_*_free(NULL) and hs_*_close(NULL) do nothing.
 */
#ifndef HOTSET_H
#define HOTSET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares is
 * its whole interface, and the only symbols libhotset exports. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
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

/* ---- CUDA presence ----------------------------------------------------- */

/* Number of usable CUDA devices: 0 when the library was built without CUDA,
 * when no driver is installed or when no device is present (all ordinary
 * cases, not errors).  hs_cuda_status() then says why in one line, e.g.
 * "no CUDA device (CUDA driver not found: cudaErrorInsufficientDriver)".
 * Never fails; the probe runs once and is cached. */
int hs_cuda_device_count(void);

/* One line describing the CUDA state found by hs_cuda_device_count().
 * Static string owned by the library. */
const char *hs_cuda_status(void);

/* ---- topology -------------------------------------------------------- */

typedef struct hs_topology hs_topology;

/* One NUMA node.  Arrays belong to the topology. */
struct hs_numa_node {
	int os_index;            /* the kernel's node number */
	uint64_t memory_bytes;   /* local memory as hwloc reports it */
	int n_cores;             /* physical cores in this node */
	int n_cpus;              /* processing units (hardware threads) */
	const int *cpus;         /* OS indices of those PUs, ascending */
};

/* One NVIDIA GPU found on the PCI bus (vendor 0x10de, class 0x0300 or
 * 0x0302; other vendors' display devices and NVSwitch chips are not GPUs). */
struct hs_gpu {
	char pci_bus_id[16];     /* "dddd:bb:dd.f", lower-case hex */
	uint16_t vendor_id, device_id, class_id;
	int n_numa_nodes;        /* nodes closest to the GPU (OS indices) */
	const int *numa_nodes;
	double link_gbps;        /* PCIe link bandwidth in GB/s as hwloc reports it; 0 = unknown */
	int pcie_gen;            /* generation the link implies, 0 = cannot be told */
	int pcie_width;          /* lane count the link implies, 0 = cannot be told */
	const char *pcie_candidates; /* every "genN xW" that matches link_gbps, "" if none */
	int cuda_index;          /* CUDA device index, -1 = unknown */
	const char *name;        /* model name when hwloc knows it, else "" */
};

/* Builds the topology of this machine (xml_path NULL) or of the hwloc XML
 * file xml_path (another machine's, e.g. from `lstopo machine.xml`).
 * On success *out is a new topology the caller frees with
 * hs_topology_free().  Errors: -EIO (missing or malformed file, or one over
 * 16 MiB: real exports are kB to a few MB), -ENOMEM, -EINVAL (a topology
 * with no NUMA node or no PU).  hwloc itself prints a banner on stderr for
 * some malformed XML files unless $HWLOC_HIDE_ERRORS is 2 (`hotset` sets it). */
int hs_topology_open(const char *xml_path, hs_topology **out);
void hs_topology_free(hs_topology *t);

/* Whether the topology describes the machine this process runs on. */
int hs_topology_is_this_system(const hs_topology *t);
/* Where it came from: "this machine" or the XML path.  Owned by t. */
const char *hs_topology_source(const hs_topology *t);

int hs_topology_n_nodes(const hs_topology *t);
/* Node i (0 <= i < n_nodes, ascending os_index); NULL if out of range.  Owned by t. */
const struct hs_numa_node *hs_topology_node(const hs_topology *t, int i);
int hs_topology_n_cores(const hs_topology *t);
int hs_topology_n_cpus(const hs_topology *t);
int hs_topology_n_gpus(const hs_topology *t);
/* GPU i in PCI bus order; NULL if out of range.  Owned by t. */
const struct hs_gpu *hs_topology_gpu(const hs_topology *t, int i);

/* The topology as JSON text (schema in docs/topology-json.md):
 * {"source", "this_system", "cores", "cpus",
 *  "nodes": [{"os_index", "memory_bytes", "cores", "cpus": [...]}],
 *  "gpus":  [{"pci_bus_id", "vendor_id", "device_id", "class_id", "name",
 *             "numa_nodes": [...], "link_gbps", "pcie_gen", "pcie_width",
 *             "pcie_candidates": [...], "cuda_index"}]}
 * Unknown values are null.  Returns a malloc'd string the caller frees, or
 * NULL on -ENOMEM. */
char *hs_topology_to_json(const hs_topology *t);

/* ---- models ------------------------------------------------------------ */

typedef struct hs_model hs_model;

/* The MoE part of a model file, as read from its GGUF metadata and tensors. */
struct hs_model_info {
	const char *arch;            /* "gpt-oss", "qwen3moe" or "glm4moe" */
	const char *name;            /* general.name, or "" */
	int n_layers;                /* {arch}.block_count */
	int n_moe_layers;            /* layers with expert tensors */
	int n_experts;               /* experts per layer */
	int n_used;                  /* experts per token */
	int n_embd;                  /* hidden size */
	int n_ff;                    /* an expert's intermediate size */
	int expert_type;             /* ggml type id of the first MoE layer's gate matrices */
	const char *expert_type_name; /* its name as ggml spells it: "mxfp4", "q8_0", "q4_K", "iq4_xs", ... */
	const char *expert_types;    /* every expert matrix's type: "q4_K" when all share one, else
					per part in layer order, e.g. "gate q4_K, up q4_K, down q4_K/q6_K" */
	int has_bias;                /* experts carry f32 biases */
	uint64_t expert_weight_bytes; /* gate + up + down matrices of one expert (the mean over the
					 MoE layers where llama-quantize's mixes give layers other types) */
	uint64_t expert_bias_bytes;  /* its three biases (0 without) */
	uint64_t layer_token_bytes;  /* n_used experts: what one token reads per layer */
	uint64_t layer_expert_bytes; /* all experts of one layer */
	uint64_t expert_bytes;       /* all experts of all layers */
	uint64_t router_bytes;       /* all routers (weights and biases) */
	uint64_t non_expert_bytes;   /* every other tensor, routers included */
	uint64_t file_bytes;
	/* The whole model (0 when the file holds only MoE layers, e.g. one
	 * written by an older `hotset gen`: it cannot run token to token). */
	int whole;
	int n_vocab;                 /* rows of token_embd */
	int n_head, n_head_kv, head_dim; /* attention: query heads, KV heads, per-head size */
	int n_ctx_train;             /* {arch}.context_length */
	int swa_window;              /* sliding window of the windowed layers (0 = none) */
	uint64_t dense_bytes;        /* attention and output weights: what a token reads besides
					its experts (routers, norms and token_embd not counted); with
					glm4moe also the dense FFN layers and the shared experts */
	/* glm4moe (0 elsewhere) */
	int n_nextn_layers;          /* MTP ("nextn") layers the file holds after the n_layers it runs:
					not loaded, not run (block_count = n_layers + these) */
	int n_dense_ffn_layers;      /* leading layers with a dense FFN instead of experts */
	int n_ff_dense;              /* their intermediate size */
	int n_ff_shared;             /* the shared expert's intermediate size (0 = none) */
	uint64_t shared_expert_bytes; /* all layers' shared experts (run for every token) */
	uint64_t dense_ffn_bytes;    /* all dense FFN layers */
	int n_recurrent_layers;      /* Gated DeltaNet layers (qwen35moe): a fixed state per sequence,
					which hs_context_seq_keep cannot cut back */
	uint64_t recurrent_state_bytes; /* their states for one sequence, all layers (f32) */
};

/* Where one expert's pieces lie in the file (byte offset, length); in a
 * split model the offset is within the shard that holds the tensor.
 * Slices are not page aligned. */
struct hs_span {
	uint64_t offset, bytes;
};
struct hs_expert_layout {
	struct hs_span gate, up, down;            /* matrices */
	struct hs_span gate_bias, up_bias, down_bias; /* bytes 0 without biases */
};

/* Maps a GGUF model file and reads its MoE description.  Errors: -ENOENT,
 * -EIO (broken file, message names the field), -EINVAL (a GGUF that is not
 * a supported MoE model or whose expert tensors have the wrong shapes).
 * Free with hs_model_free(). */
int hs_model_open(const char *path, hs_model **out);
void hs_model_free(hs_model *m);
/* Owned by m. */
const struct hs_model_info *hs_model_info(const hs_model *m);
/* Whether layer is a MoE layer (0 <= layer < n_layers): 1 or 0; -EINVAL for a NULL m. */
int hs_model_layer_is_moe(const hs_model *m, int layer);
/* Layout of expert `expert` of MoE layer `layer`; -EINVAL out of range. */
int hs_model_expert_layout(const hs_model *m, int layer, int expert, struct hs_expert_layout *out);

/* Reference MoE forward of one layer (double accumulation; the oracle):
 * x[n][n_embd] -> y[n][n_embd], router, gating, experts and weighted sum
 * (no norm, no residual).  With ids and weights NULL the layer's router
 * chooses; otherwise ids[n][n_used] (-1 = skip, duplicates legal) and
 * weights[n][n_used] are used as given.  -EINVAL bad layer or id, -ENOMEM. */
int hs_moe_ref(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
	       const float *weights, float *y);
/* The same layer on the fastest CPU kernels this machine has (AVX2 with
 * Q8_0 activations; the scalar twins with HS_USE_REF=1), on `threads`
 * OpenMP threads (<= 0: OpenMP's default; at most 4 x the online CPUs).
 * Same arguments and errors as hs_moe_ref(); allocates its scratch per call. */
int hs_moe_forward_cpu(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
		       const float *weights, float *y, int threads);
/* The same layer on a device through the device layer: backend "sim" (the
 * CPU imitating a device), "cuda", or NULL ($HOTSET_DEVICE, else cuda when
 * a device answers, else sim).  Routes on the host, uploads the routed
 * experts (MXFP4 or Q8_0) into device slots, runs quantize + fused FFN
 * there.  desc (may be NULL) receives the device's description, e.g.
 * "sim (8.0 GiB, ...)": output made on the sim device must say so.
 * -ENODEV (no such device), -EINVAL (other expert types), -ENOMEM. */
int hs_moe_forward_device(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
			  const float *weights, float *y, const char *backend, char *desc, size_t desc_len);
/* Name of the kernel set hs_moe_forward_cpu() uses: the tier this CPU runs
 * ("AVX2", "AVX-VNNI", "AVX-512 VNNI", ...; $HOTSET_CPU_TIER can lower it)
 * or "scalar reference". */
const char *hs_cpu_kernels_name(void);

/* The router and gating alone: ids[n][n_used], weights[n][n_used]. */
int hs_moe_route_ref(const hs_model *m, int layer, int n, const float *x, int32_t *ids, float *weights);

/* ---- tokenizer and chat formats ----------------------------------------- */

/* A model's tokenizer, read from its GGUF file: byte-level BPE
 * (tokenizer.ggml.model "gpt2") with the pre-tokenizer "gpt-4o" (gpt-oss's
 * o200k, ids exactly as OpenAI's tiktoken gives them) or "qwen2" (Qwen2,
 * Qwen3).  Read-only once opened: any number of threads may use one
 * tokenizer at the same time. */
typedef struct hs_tokenizer hs_tokenizer;

/* Opens the tokenizer of a GGUF file, a whole model or a vocab-only file.
 * The tokenizer keeps its own copy of what it needs; the file is closed
 * before this returns.  Free *out with hs_tokenizer_free().  Errors: -ENOENT,
 * -EIO (a broken file or tokenizer array, the message names the key and the
 * limit), -EINVAL (a tokenizer model or pre-tokenizer hotset does not
 * implement, named in the message), -ENOMEM. */
int hs_tokenizer_open(const char *gguf_path, hs_tokenizer **out);
void hs_tokenizer_free(hs_tokenizer *t);

/* Number of token ids (valid ids are 0 .. n_vocab - 1). */
int hs_tokenizer_n_vocab(const hs_tokenizer *t);
/* Ids the file names (tokenizer.ggml.bos_token_id, eos_token_id,
 * eot_token_id); -1 when it names none.  Without an eot key, the chat
 * format's end of turn: <|return|> (harmony) or <|im_end|> (ChatML). */
int32_t hs_tokenizer_bos(const hs_tokenizer *t);
int32_t hs_tokenizer_eos(const hs_tokenizer *t);
int32_t hs_tokenizer_eot(const hs_tokenizer *t);
/* The id of the token whose text is exactly `text` (NUL-terminated), e.g.
 * "<|return|>" or "Hello"; -1 when no token has it, -EINVAL when t or text
 * is NULL (bos, eos and eot too give -EINVAL for a NULL t).  Special tokens are
 * found by their text, ordinary ones by their bytes. */
int32_t hs_tokenizer_find(const hs_tokenizer *t, const char *text);

/* Token types as GGUF stores them (tokenizer.ggml.token_type). */
enum hs_token_type {
	HS_TOKEN_NORMAL = 1, HS_TOKEN_UNKNOWN = 2, HS_TOKEN_CONTROL = 3,
	HS_TOKEN_USER_DEFINED = 4, HS_TOKEN_UNUSED = 5, HS_TOKEN_BYTE = 6,
};
/* The type of token id; -EINVAL when id is out of range. */
int hs_tokenizer_token_type(const hs_tokenizer *t, int32_t id);
/* 1 for a control token (types control, unknown, unused: no text of their
 * own, shown only when asked), 0 for others, -EINVAL out of range. */
int hs_tokenizer_is_control(const hs_tokenizer *t, int32_t id);

/* Static strings owned by t: general.architecture ("gpt-oss", "qwen3moe",
 * "" when absent) and the pre-tokenizer ("gpt-4o", "qwen2"). */
const char *hs_tokenizer_arch(const hs_tokenizer *t);
const char *hs_tokenizer_pre(const hs_tokenizer *t);
/* The file's own chat template (tokenizer.chat_template, Jinja text) or NULL
 * when it has none.  Owned by t.  hotset does not run it: the built-in
 * formats below are written in C. */
const char *hs_tokenizer_chat_template(const hs_tokenizer *t);

/* hs_tokenize() flags */
#define HS_TOK_PARSE_SPECIAL 1 /* control tokens' texts in the input become those tokens */
#define HS_TOK_ADD_BOS 2       /* begin with BOS when the file asks for it (add_bos_token) */

/* Encodes text[0..len) (UTF-8; need not be NUL-terminated) into ids: the
 * special tokens split out first (at each place the longest that matches;
 * user-defined tokens always, control tokens only with
 * HS_TOK_PARSE_SPECIAL), then the pre-tokenizer, then byte-level BPE.
 * Returns the number of ids the text needs and writes at most max_ids of them
 * to ids (ids may be NULL when max_ids is 0): when the result is larger than
 * max_ids, call again with a larger buffer.  len + 1 ids always suffice.
 * Bytes that are not well-formed UTF-8 are kept, each one a character of
 * its own (punctuation, for the pre-tokenizer) encoded by its byte tokens, so
 * decoding gives back the same bytes for any input.  -EINVAL when len is
 * more than INT_MAX - 1, max_ids is negative, or text (len > 0) or ids
 * (max_ids > 0) is NULL. */
int hs_tokenize(const hs_tokenizer *t, const char *text, size_t len, int flags, int32_t *ids, int max_ids);

/* The bytes of token id: what it stands for in the text, which may be part
 * of a UTF-8 character.  A control token gives its text (e.g.
 * "<|channel|>") when render_special is set, else nothing.  Writes at most n
 * bytes to buf (no NUL) and returns the full length; -EINVAL naming the id
 * and n_vocab when id is out of range. */
int hs_token_bytes(const hs_tokenizer *t, int32_t id, int render_special, char *buf, size_t n);

/* A streaming detokenizer: ids go in one at a time, and only whole, valid
 * UTF-8 comes out.  The bytes of a character split across tokens wait for
 * the token that completes it; bytes that can never become a valid
 * character come out as U+FFFD (one per maximal invalid sequence, as
 * Python's errors="replace" does), so nothing is lost and nothing invalid
 * leaves.  Uses t, which must outlive it.  Free with hs_detok_free(). */
typedef struct hs_detok hs_detok;
int hs_detok_new(const hs_tokenizer *t, int render_special, hs_detok **out);
void hs_detok_free(hs_detok *d);
/* Pushes one id; *text (NUL-terminated, owned by d, valid until the next
 * call on d) receives the *len bytes of text that became complete, possibly
 * none.  -EINVAL naming the id and n_vocab when id is out of range (nothing
 * changes). */
int hs_detok_push(hs_detok *d, int32_t id, const char **text, size_t *len);
/* Ends the text: a character still waiting for bytes comes out as U+FFFD.
 * The detokenizer can then start again. */
int hs_detok_flush(hs_detok *d, const char **text, size_t *len);
/* Detokenizes a whole sequence: *text is malloc'd (the caller frees it),
 * NUL-terminated valid UTF-8 of *len bytes (len may be NULL). */
int hs_detokenize(const hs_tokenizer *t, const int32_t *ids, int n, int render_special, char **text, size_t *len);

/* Chat formats written in C.  AUTO picks the architecture's own format:
 * gpt-oss -> HARMONY, qwen2/qwen3/qwen3moe -> CHATML, and for other
 * architectures the one whose special tokens the vocabulary has, else RAW
 * (messages' contents one after another, replies are plain content). */
enum hs_chat_format { HS_CHAT_AUTO = 0, HS_CHAT_HARMONY = 1, HS_CHAT_CHATML = 2, HS_CHAT_RAW = 3 };
/* "auto", "harmony", "chatml", "raw" (static strings) */
const char *hs_chat_format_name(enum hs_chat_format f);
/* The format named "harmony", "chatml", "raw" or "auto"; -EINVAL otherwise. */
int hs_chat_format_parse(const char *name, enum hs_chat_format *out);
/* What AUTO means for this tokenizer: never AUTO, except as the error
 * value for a NULL t (with a message). */
enum hs_chat_format hs_chat_format_of(const hs_tokenizer *t);

/* One message of a conversation.  The strings belong to the caller. */
struct hs_chat_message {
	const char *role;      /* "system", "developer", "user", "assistant", "tool" */
	const char *content;   /* its text (NULL = ""); an assistant's text beside its tool call is
				  harmony's preamble (commentary) and ChatML's text before <tool_call> */
	const char *reasoning; /* an assistant's reasoning, or NULL.  Both formats drop it from
				  history as the models expect: harmony keeps it only where no
				  later final answer follows (the tool calls in progress) and at
				  the end of a conversation rendered for training, ChatML only
				  after the last user turn */
	const char *tool_name; /* an assistant message: the function it calls; a tool message: the
				  function whose result it holds (NULL: the latest call's); NULL
				  otherwise.  A turn that called several functions is one assistant
				  message per call, in order, the first with the turn's text and
				  reasoning: ChatML writes them as one turn, harmony as one
				  message each */
	const char *arguments; /* an assistant's tool call: its arguments, JSON text (NULL = "{}") */
};

/* Options of hs_chat_render(); all zeros mean the defaults. */
struct hs_chat_opts {
	enum hs_chat_format format;   /* AUTO: hs_chat_format_of(t) */
	const char *reasoning_effort; /* harmony: "low", "medium" (NULL) or "high" */
	int no_thinking;              /* ChatML: 1 = thinking off (the empty think block) */
	const char *date;             /* harmony's "Current date: "; NULL = today (UTC), YYYY-MM-DD */
	const char *model_identity;   /* harmony; NULL = gpt-oss's default identity line */
	const char *knowledge_cutoff; /* harmony; NULL = "2024-06" as gpt-oss's template says */
	int no_generation_prompt;     /* 1: do not end with the opening of the assistant's turn */
	const char *tools_json;       /* the functions the model may call: a JSON array of OpenAI tool
					 objects {"type": "function", "function": {"name", "description",
					 "parameters": <JSON schema>}}; NULL or "[]" = none.  Harmony
					 writes them into the developer message as TypeScript-like
					 types ("namespace functions"), ChatML as Qwen3's "# Tools"
					 block of JSON lines in the system message; RAW ignores them */
};
/* The defaults (all zeros: opts NULL means the same). */
struct hs_chat_opts hs_chat_opts_default(void);

/* Renders a conversation as the prompt text the model was trained on
 * (harmony: as openai-harmony renders it, docs/text.md has the mapping:
 * system message with identity, knowledge cutoff, date, reasoning effort
 * and channels; the first system or developer message as developer
 * instructions beside the tools; ... ; ending with "<|start|>assistant").  *prompt is
 * malloc'd and NUL-terminated, the caller frees it; tokenize it with
 * HS_TOK_PARSE_SPECIAL, or use hs_chat_tokenize().  t may be NULL when
 * opts->format is not AUTO.  -EINVAL for an unknown role, a tool message
 * without tool_name, a bad reasoning effort, or tools_json that is not JSON
 * or holds a tool without a function name (named, with the tool's index);
 * -ENOMEM. */
int hs_chat_render(const hs_tokenizer *t, const struct hs_chat_message *msgs, int n_msgs,
		   const struct hs_chat_opts *opts, char **prompt);
/* The same conversation as ids, where only the format's own special tokens
 * are special: text in a message that looks like a special token (e.g. a
 * user typing "<|end|>") stays text.  Otherwise the same ids as rendering and
 * tokenizing with HS_TOK_PARSE_SPECIAL.  *ids is malloc'd (the caller frees
 * it), *n_ids its count. */
int hs_chat_tokenize(const hs_tokenizer *t, const struct hs_chat_message *msgs, int n_msgs,
		     const struct hs_chat_opts *opts, int32_t **ids, int *n_ids);

/* A model's reply, parsed as it is generated: one id at a time in, pieces of
 * text out, each tagged with what it is.  Harmony: the analysis channel is
 * reasoning, final (and commentary without a recipient) is content, a
 * message to a recipient (" to=functions.x", the name any UTF-8) is a tool
 * call, its text the arguments; the markers <|channel|>, <|message|>,
 * <|end|>, <|start|>assistant are consumed (a header after <|end|> whose
 * <|start|> is missing too); the reply stops at <|return|> or
 * <|call|> (so a harmony reply holds at most one call in practice; each
 * message to a recipient is one).  ChatML: <think>...</think> is reasoning
 * (newlines next to the markers trimmed), each <tool_call>...</tool_call> a
 * tool call, the rest (text between the calls too) content; it stops at
 * <|im_end|> or <|endoftext|>.  A ChatML call comes out whole when its block
 * ends: {"name": N, "arguments": A} is the call of N, its text A as compact
 * JSON (A itself when it is a string, "{}" when absent); a block that is not
 * a JSON object with a string "name" is a call without a name, its text the
 * block's.
 * RAW: all content, stops at eot.  Every format also stops at the file's
 * eos and at <|endoftext|>.  A reply that does not follow its
 * format (small or random models write anything) comes out as plain content,
 * never as an error; control tokens in it are dropped and bytes that are not
 * UTF-8 come out as U+FFFD: every delta is valid UTF-8. */
enum hs_reply_kind { HS_REPLY_CONTENT = 0, HS_REPLY_REASONING = 1, HS_REPLY_TOOL_CALL = 2 };
struct hs_reply_delta {
	enum hs_reply_kind kind;
	const char *text; /* valid UTF-8 (U+0000 included), NUL-terminated, owned by the parser */
	size_t len;
	int tool_index; /* HS_REPLY_TOOL_CALL: the call's index in the reply (0, 1, ...); else -1 */
};
typedef struct hs_reply_parser hs_reply_parser;
/* format AUTO: hs_chat_format_of(t).  t must outlive the parser. */
int hs_reply_parser_new(const hs_tokenizer *t, enum hs_chat_format format, hs_reply_parser **out);
void hs_reply_parser_free(hs_reply_parser *p);
/* Pushes one generated id.  *deltas receives *n_deltas pieces of text (0 or
 * more, in order; owned by p, valid until the next call on p).  Returns 1
 * when id is the format's stop token (it adds no text, and later pushes
 * return 1 with nothing), 0 otherwise; -EINVAL naming the id and n_vocab
 * for an id out of range. */
int hs_reply_parser_push(hs_reply_parser *p, int32_t id, const struct hs_reply_delta **deltas, int *n_deltas);
/* Ends the reply (after the stop, or when generation ended otherwise):
 * text held back while a marker might have been starting, and a character
 * cut short (as U+FFFD), come out. */
int hs_reply_parser_finish(hs_reply_parser *p, const struct hs_reply_delta **deltas, int *n_deltas);
/* The tool calls begun so far (a ChatML call begins at <tool_call>). */
int hs_reply_parser_tool_count(const hs_reply_parser *p);
/* The function of tool call index: harmony's recipient (e.g.
 * "functions.get_weather"), ChatML's "name" (known once its deltas came);
 * NULL when it has none or index is out of range.  Owned by p. */
const char *hs_reply_parser_tool_name_at(const hs_reply_parser *p, int index);
/* The latest tool call's function, or NULL (tool_name_at(count - 1)). */
const char *hs_reply_parser_tool_name(const hs_reply_parser *p);

/* A whole reply parsed at once (ids after the stop token are ignored).  Every
 * string is malloc'd and NUL-terminated ("" when empty, a call's name NULL
 * when it has none); free them with hs_reply_free().  The lengths count
 * bytes: a model may write U+0000, which is valid UTF-8 and stays in. */
struct hs_reply_call {
	char *name;      /* as hs_reply_parser_tool_name_at() */
	char *arguments; /* the call's text: its arguments as JSON text (see above) */
	size_t arguments_len;
};
struct hs_reply {
	char *content, *reasoning;
	size_t content_len, reasoning_len;
	struct hs_reply_call *calls; /* n_calls of them, in order; NULL when none */
	int n_calls;
	int32_t stop_id; /* the stop token that ended it, -1 when none came */
};
int hs_reply_parse(const hs_tokenizer *t, enum hs_chat_format format, const int32_t *ids, int n,
		   struct hs_reply *out);
void hs_reply_free(struct hs_reply *r);

/* ---- machine profiles --------------------------------------------------- */

/* Fixed limits of the plain-data structs below (no allocation, easy to copy). */
#define HS_MAX_NODES 16
#define HS_MAX_GPUS 16
#define HS_MAX_KSPEED 16
#define HS_MAX_LAYERS 256
#define HS_MAX_WARNINGS 24

/* The CPU expert kernel's speed with `threads` threads on one node:
 * MXFP4 2880 x 2880 experts, fused FFN (0 = not measured). */
struct hs_kernel_speed {
	int threads;
	double decode_gbps;     /* expert bytes per second at 1 token */
	double prefill_gflops;  /* at 512 tokens */
};

struct hs_profile_node {
	int os_index;
	int n_cores, n_cpus;
	uint64_t memory_bytes;     /* local memory */
	uint64_t available_bytes;  /* free for experts when measured (0 = unknown) */
	/* read_gbps[j]: threads on this node reading memory on profile node j,
	 * GB/s (1e9 B/s); 0 = unknown */
	double read_gbps[HS_MAX_NODES];
	int n_kernel;
	struct hs_kernel_speed kernel[HS_MAX_KSPEED];  /* ascending threads */
};

struct hs_profile_gpu {
	char name[64];
	char pci_bus_id[16];
	int cuda_index;               /* -1 = not a CUDA device on this machine */
	int n_numa_nodes;
	int numa_nodes[HS_MAX_NODES]; /* OS indices of the GPU-attached nodes */
	uint64_t memory_total_bytes, memory_free_bytes;
	double h2d_pinned_gbps[HS_MAX_NODES]; /* from pinned memory on profile node j */
	double h2d_pageable_gbps;
	double device_memory_gbps;    /* device memory read bandwidth */
	double prefill_tflops;        /* expert GEMM throughput (0 = unknown) */
	double link_gbps;             /* what hwloc reports for the PCIe link */
	int pcie_gen, pcie_width;
};

/* Facts about one machine: measured by hs_profile_measure(), or written by
 * hand for a machine one does not have.  All figures in GB/s are 1e9 B/s. */
struct hs_profile {
	char machine[128];
	char source[16];   /* "measured", "published" or "topology" (no measurements) */
	char note[1024];
	char created[32];  /* ISO 8601 UTC */
	char cpu_kernels[32];
	int n_nodes;
	struct hs_profile_node nodes[HS_MAX_NODES];
	int n_gpus;
	struct hs_profile_gpu gpus[HS_MAX_GPUS];
};

/* A profile with only what the topology says (nodes, cores, memory, GPUs
 * and their links); every bandwidth 0 = unknown.  source = "topology". */
int hs_profile_from_topology(const hs_topology *t, struct hs_profile *out);

/* The machine topology t describes, with the rates of a profile made for
 * another one (planning for a machine that has not been measured): t's NUMA
 * nodes, cores, memory and GPUs (bus ids, nodes, links), each with the
 * bandwidths and kernel speeds of the profile's node or GPU that stands for
 * it (same OS index or PCI bus id, else the same position, else the first),
 * and the profile's GPU memory sizes.  Reads and copies between nodes keep
 * their kind (local or remote); a kind the profile lacks stays 0 (unknown).
 * Returns 0 when both describe the same machine (*out = *rates), 1 when they
 * differ (*out mixes them as above), or a negative errno. */
int hs_profile_on_topology(const struct hs_profile *rates, const hs_topology *t, struct hs_profile *out);

/* Progress of long work: what is being done, fraction 0..1. */
typedef void (*hs_progress_fn)(const char *what, double fraction, void *ctx);

enum hs_tune_level { HS_TUNE_QUICK, HS_TUNE_DEFAULT, HS_TUNE_THOROUGH };

/* Measures this machine (t must describe this system): per node the read
 * bandwidth from every node, the CPU kernel's speed per thread count, and
 * per CUDA device its memory, copy and memory bandwidths.  Binds the
 * calling thread while it measures and restores it.  -EINVAL for a
 * topology of another machine. */
int hs_profile_measure(const hs_topology *t, enum hs_tune_level level, hs_progress_fn progress, void *ctx,
		       struct hs_profile *out);

/* Reads a profile JSON file (docs/profile-json.md).  -EIO with a message
 * naming the file, the field and the limit. */
int hs_profile_load(const char *path, struct hs_profile *out);
/* Writes it (through "<path>.part" and a rename); the folder must exist. */
int hs_profile_save(const struct hs_profile *p, const char *path);
/* JSON text; malloc'd, the caller frees it; NULL on -ENOMEM. */
char *hs_profile_to_json(const struct hs_profile *p);
/* Where `hotset tune` saves by default: $XDG_CACHE_HOME/hotset/profile.json
 * or ~/.cache/hotset/profile.json.  Writes into buf; -ENAMETOOLONG. */
int hs_profile_default_path(char *buf, size_t n);

/* ---- planning ------------------------------------------------------------ */

/* What the planner needs to know about a model. */
struct hs_model_desc {
	char name[64];
	char arch[16];
	int n_layers;             /* transformer blocks */
	int n_moe_layers;         /* MoE layers (the planner places these) */
	int moe_layer[HS_MAX_LAYERS]; /* block index of each MoE layer */
	int n_experts, n_used, n_embd, n_ff;
	int expert_type;
	uint64_t expert_bytes;    /* one expert: weights + biases (the mean over the MoE layers where
				     a quantization mix gives layers other types) */
	int slot_types[3];        /* ggml types of gate, up and down in the layer with the largest
				     experts: what a device cache slot must hold (0s: expert_type) */
	uint64_t nonexpert_bytes; /* every other tensor (kept on the GPU) */
	uint64_t file_bytes;
	int n_head_kv, head_dim;  /* 0 = unknown: no KV cache is counted */
	int swa_window;           /* sliding window of the SWA layers (0 = none) */
	int swa_every;            /* every swa_every-th layer uses full attention
				     (gpt-oss: 2, the others slide); 0 = none */
	/* the whole model's dense part, as the forward pass keeps it on a device
	 * (0 for files of MoE layers only: nonexpert_bytes is counted then) */
	int n_head, n_vocab, n_rot;
	int dense_type, output_type;  /* ggml types of the attention and output matrices */
	uint64_t dense_device_bytes;  /* attention, norms, biases, sinks and output (token_embd and
					 the routers stay on the host), each tensor rounded up to 256
					 bytes as its own device allocation */
	int dense_device_tensors;     /* how many tensors that is */
	/* dense SwiGLU FFNs beside the attention (glm4moe's leading dense layers and shared
	   experts: in dense_device_bytes, on the device with the attention, run for every token) */
	int ffn_ff;                   /* the widest one's intermediate size (0 = none) */
	int ffn_gate_type, ffn_down_type; /* its gate/up and down matrices' ggml types */
	uint64_t ffn_macs;            /* multiply-adds per token of all of them */
	uint64_t shared_expert_bytes; /* the shared experts' part of dense_device_bytes */
	/* qwen35moe: only every full_attn_every-th layer (i % n == n - 1) has attention and a KV
	 * cache, the others are Gated DeltaNet layers with a fixed state per sequence
	 * (0 = every layer has attention) */
	int full_attn_every;
	uint64_t recurrent_state_bytes; /* those states for one sequence (host memory) */
};

/* Model descriptions of the known models (the shapes the `gen` presets
 * write, with the published file sizes for the non-expert bytes).
 * -EINVAL for an unknown name (message lists the names). */
int hs_model_desc_preset(const char *name, struct hs_model_desc *out);
/* The description of an opened model file. */
int hs_model_desc_from_model(const hs_model *m, struct hs_model_desc *out);

enum hs_kv_type { HS_KV_F16, HS_KV_Q8_0 };
enum hs_placement { HS_PLACEMENT_GPU, HS_PLACEMENT_HOST, HS_PLACEMENT_HOST_CACHE };
enum hs_mode { HS_MODE_NONE, HS_MODE_CPU_COMPUTE, HS_MODE_PCIE_STREAM, HS_MODE_HYBRID };

struct hs_plan_opts {
	int gpu;                  /* profile GPU index; -1 = plan without a GPU */
	uint64_t vram_bytes;      /* 0 = the GPU's free memory minus a margin */
	uint64_t ram_bytes;       /* 0 = the nodes' available memory minus a margin */
	int ctx;                  /* context length for the KV cache (default 8192) */
	enum hs_kv_type kv_type;
	int ubatch;               /* prefill batch of the prediction (default 512) */
	int host_layers;          /* -1 = search; n = exactly the first n MoE layers on the host */
	int no_cache;             /* 1 = no GPU cache slots */
	int n_seq;                /* sequences of a context (their KV caches; 0 = 1) */
	int device_sim;           /* 1: count the sim device's scratch (its kernels are the CPU's);
				     0: the CUDA kernels' */
	/* routing statistics: freq[l * n_experts + e] = share of layer l's
	 * routing slots that go to expert e (rows need not be normalised);
	 * NULL = the default skew (14 of 128 experts take 54% of the slots) */
	const float *freq;
	int freq_layers, freq_experts;
};
/* The defaults: GPU 0 (none when the profile has no GPU, as `hotset plan`
 * without --gpu), ctx 8192, f16 KV, ubatch 512, the host layers searched,
 * one sequence.  A zero struct differs in host_layers (0: every layer on
 * the GPU); the others' zeros mean these defaults. */
struct hs_plan_opts hs_plan_opts_default(void);

struct hs_plan_layer {
	int layer;                /* block index */
	enum hs_placement placement;
	int slots;                /* GPU cache slots (host+cache) */
	int n_numa_nodes;
	int numa_nodes[2];        /* OS indices of the nodes holding its host experts */
	double hit_rate;          /* expected share of routed experts found on the GPU */
	double decode_ms, prefill_ms; /* predicted time of this layer's experts */
};

struct hs_plan_warning {
	char code[32];
	char message[256];
};

struct hs_plan {
	char model[64];
	char machine[128];
	char profile_source[16];
	int gpu;                  /* profile GPU index or -1 */
	int n_layers;
	struct hs_plan_layer layers[HS_MAX_LAYERS];
	int n_host_layers, n_gpu_layers, total_slots;
	int cpu_node;             /* OS index of the node whose cores compute host experts */
	int cpu_threads;
	enum hs_mode decode_mode, prefill_mode;
	double decode_q, prefill_q; /* share of misses streamed (hybrid) */
	int ctx, ubatch;
	enum hs_kv_type kv_type;
	struct hs_plan_predicted {
		double decode_tok_s;            /* the whole MoE part, chosen mode */
		double decode_host_bound_tok_s; /* host read bandwidth / host_bytes_per_token */
		double decode_cpu_tok_s, decode_stream_tok_s, decode_hybrid_tok_s; /* per mode */
		double prefill_tok_s;           /* at ubatch tokens */
		uint64_t host_bytes_per_token;  /* routed bytes of host experts, cache cold */
		uint64_t miss_bytes_per_token;  /* the same after expected cache hits */
		uint64_t gpu_bytes_per_token;   /* expert bytes the GPU reads per token */
		double host_read_gbps, cpu_kernel_gbps, pcie_gbps, gpu_mem_gbps; /* the figures used */
		uint64_t expert_bytes;          /* one expert, and the routing shape, for projections */
		int n_experts, n_used;          /* (0 in plans written before they were recorded) */
		char bound[48];                 /* what limits decode */
		/* The whole model: the MoE part above plus the dense part (attention
		 * and output matrices, read once a step where the plan puts them: the
		 * GPU, else the CPU) and attention over the KV cache.  0 when the
		 * model has no dense part (a file of MoE layers only). */
		double model_decode_tok_s;      /* one sequence at an empty context */
		double model_decode_ctx_tok_s;  /* the same with ctx tokens already in the cache */
		double model_prefill_tok_s;     /* a ubatch prompt from an empty context */
		uint64_t dense_bytes_per_token; /* dense weights a step reads */
		uint64_t kv_bytes_at_ctx;       /* K and V a token reads at ctx */
		double dense_gbps;              /* the read rate used for both */
	} predicted;
	struct hs_plan_memory {
		uint64_t vram_bytes, vram_budget, ram_bytes, ram_budget;
		/* VRAM as the device backend allocates it, each buffer rounded up to 256 bytes: the
		 * dense weights, the KV cache (K, V and cell positions; sliding-window layers a ring of
		 * window + ubatch cells), the experts of GPU layers, the cache and staging slots of host
		 * layers, and the workspace (the forward pass's ubatch buffers, logits and scratch,
		 * every MoE layer's device buffers and FFN scratch, cuBLAS's workspace) */
		uint64_t vram_nonexpert, vram_kv, vram_experts, vram_slots, vram_staging, vram_workspace;
		int n_nodes;                           /* the profile's nodes, in its order */
		int node_os_index[HS_MAX_NODES];
		uint64_t ram_node_bytes[HS_MAX_NODES]; /* host experts per node */
	} memory;
	int n_warnings;
	struct hs_plan_warning warnings[HS_MAX_WARNINGS];
	char assumptions[512];    /* figures the profile lacked and the planner assumed */
	char routing[96];         /* where the hit rates come from */
};

/* The planner: searches placements with the cost model (DESIGN.md §5) and
 * fills *out.  Pure: no hardware is touched.  opts NULL: the defaults.
 * -EINVAL with a message for impossible input (no memory left for the
 * non-expert part, a GPU index the profile lacks, a frequency table of the
 * wrong shape, an unknown KV type, counts outside the structs' arrays). */
int hs_plan_make(const struct hs_model_desc *model, const struct hs_profile *profile,
		 const struct hs_plan_opts *opts, struct hs_plan *out);
/* The plan as JSON (docs/plan-json.md); malloc'd, NULL on -ENOMEM or for a
 * NULL or malformed plan (counts outside its arrays, unknown enums). */
char *hs_plan_to_json(const struct hs_plan *p);
/* Reads that JSON back: -EIO with a message naming the field. */
int hs_plan_from_json(const char *text, struct hs_plan *out);
/* The same with a file (written through "<path>.part" and a rename). */
int hs_plan_save(const struct hs_plan *p, const char *path);
int hs_plan_load(const char *path, struct hs_plan *out);
const char *hs_placement_name(enum hs_placement p);
const char *hs_mode_name(enum hs_mode m);

/* ---- the hybrid runtime ------------------------------------------------------ */

typedef struct hs_runtime hs_runtime;

/* Asked during long work (loading a runtime, a context's first weights, a
 * decode between layers): nonzero stops it, and the call returns
 * -ECANCELED with nothing half-done.  ctx is the caller's.  A progress
 * callback that wants to stop sets a flag its abort callback returns. */
typedef int (*hs_abort_fn)(void *ctx);

struct hs_runtime_opts {
	const char *device;        /* "cpu" (no device: everything on the CPU), "sim", "cuda", or NULL
				      ($HOTSET_DEVICE, else cuda if a device answers, else cpu: what
				      `hotset run` does); another name is refused */
	const char *plan_path;     /* a plan JSON from `hotset plan -o`; NULL = plan now */
	const struct hs_plan *plan; /* or a plan in memory (copied at open); wins over plan_path */
	const char *trace_path;    /* record every forward()'s routing here (NULL: no trace) */
	const char *replay_path;   /* a trace whose routing replaces the router (ids NULL in forward);
				      each layer takes its records in order */
	const struct hs_profile *profile; /* for planning now; NULL = this machine's topology */
	enum hs_mode mode;         /* HS_MODE_NONE = the plan's modes; else forced for every host layer */
	double q;                  /* hybrid: share of missed experts streamed, 0..1; < 0 (auto, the
				      default: -1) = the plan's, or with a forced hybrid mode the cost
				      model's share from live estimates of the CPU, copy and device
				      speeds and each step's hits and misses.  0 is not the default */
	int max_tokens;            /* the largest batch forward() gets (0: 512; at most 65536) */
	/* The contexts it will serve, for a plan made now (their KV cache's device
	 * memory): ctx tokens (0: 4096, as a context's; at most the model's context_length)
	 * of kv_type for n_seq sequences (0: 1; at most HS_MAX_SEQ); the prediction's
	 * prefill batch is max_tokens. */
	int ctx, n_seq;
	enum hs_kv_type kv_type;
	int threads;               /* CPU workers (0: the plan's; at most 4 x the online CPUs) */
	int admit_per_step;        /* cache admissions per layer step (default 1; 0 = static cache,
				      so a zero here is not the default) */
	const char *cache_policy;  /* "lru" (NULL), "lfu", "lfru", "static" or "none" */
	const float *routing_freq; /* optional [MoE layers][experts] routing profile: caches start
				      with each layer's most used experts (static keeps them) */
	hs_progress_fn progress;   /* loading progress, may be NULL */
	void *progress_ctx;
	/* asked before every layer is loaded (right after its progress report) and
	 * by hs_context_create() while it loads the dense weights; NULL: never */
	hs_abort_fn abort;
	void *abort_ctx;
};
/* The defaults, what opts NULL means: device NULL, q -1, max_tokens 512,
 * n_seq 1, admit_per_step 1, the rest zero. */
struct hs_runtime_opts hs_runtime_opts_default(void);

/* What one layer did over all forward() calls so far. */
struct hs_layer_report {
	int layer;
	enum hs_placement placement;
	int slots;
	int cpu_only;              /* no device side (degraded or planned without a GPU) */
	int os_node;               /* node of its host experts, -1 = none */
	uint64_t host_expert_bytes;        /* host copy of its experts */
	uint64_t node_bytes[HS_MAX_NODES]; /* where those pages are, by node number (measured) */
	long steps, pairs, hits, misses_cpu, misses_streamed, admitted;
	uint64_t host_bytes_read, pcie_bytes;
	double wall_s, busy_s[4];  /* lanes: host, cpu, gpu, copy */
};

/* Ownership and threads: the runtime owns everything it loads; the caller
 * owns x, ids, weights and y of each call.  One thread at a time may call
 * a runtime (internally it runs its own lane and worker threads); separate
 * runtimes are independent.
 *
 * Loads a model for hybrid execution: host experts read into memory on the
 * plan's node, resident experts uploaded, cache and staging slots set up.
 * Every option is checked before anything loads: an unknown device name,
 * mode or KV type, q NaN or above 1, a count outside its range above, a
 * plan or profile whose counts leave their arrays is -EINVAL naming the
 * field and its limit.  A known device that cannot be opened, or holds
 * less than planned, degrades layers to the CPU with a warning line in
 * hs_runtime_describe() (and the log); never aborts.  Free with
 * hs_runtime_close(). */
int hs_runtime_open(const char *model_path, const struct hs_runtime_opts *opts, hs_runtime **out);
void hs_runtime_close(hs_runtime *rt);
/* One MoE layer (block index) for n tokens: y = the layer's MoE output
 * (ids/weights NULL: its router).  Not thread-safe: one caller at a time. */
int hs_runtime_forward(hs_runtime *rt, int layer, int n, const float *x, const int32_t *ids, const float *weights,
		       float *y);
/* Report of a layer; -EINVAL if it is not a MoE layer. */
int hs_runtime_layer_report(const hs_runtime *rt, int layer, struct hs_layer_report *out);
/* Changes the mode (HS_MODE_NONE: the plan's) and hybrid share (q 0..1;
 * q < 0: the plan's or live) for later forward() calls.  -EINVAL for an
 * unknown mode or q NaN or above 1 (nothing changes). */
int hs_runtime_set_mode(hs_runtime *rt, enum hs_mode mode, double q);
/* Changes the cache policy ("lru", "lfu", "lfru", "static", "none") and
 * the admissions per layer step (0 or more) for later calls. */
int hs_runtime_set_cache_policy(hs_runtime *rt, const char *policy, int admit_per_step);
/* Changes the CPU workers to n threads (1 .. the CPUs online), bound as at
 * open to the plan's node's CPUs, for later calls and the contexts over
 * rt.  Not while a call on rt or one of its contexts runs.  -EINVAL,
 * -EAGAIN (a thread could not start: the old workers stay). */
int hs_runtime_set_threads(hs_runtime *rt, int n);
/* The number of CPU workers; -EINVAL when rt is NULL. */
int hs_runtime_threads(const hs_runtime *rt);
/* Puts every cache back as it was at open (the routing profile's most
 * used experts, else the first ones) and zeroes the layer reports, so
 * runs that follow start alike. */
int hs_runtime_reset(hs_runtime *rt);
/* The model the runtime runs; owned by rt. */
const struct hs_model_info *hs_runtime_model_info(const hs_runtime *rt);
/* Lines saying what was loaded where and what was lost; owned by rt. */
const char *hs_runtime_describe(const hs_runtime *rt);

/* ---- the whole model: contexts, decoding, sampling --------------------------- */

#define HS_MAX_SEQ 256

typedef struct hs_context hs_context;

struct hs_context_opts {
	int n_ctx;                 /* positions per sequence (0: 4096; at most the model's context_length) */
	enum hs_kv_type kv_type;   /* HS_KV_F16 (default) or HS_KV_Q8_0 */
	int n_seq;                 /* sequences (0: 1; at most HS_MAX_SEQ) */
	int n_ubatch;              /* tokens one forward step takes (0: the runtime's max_tokens, which
				      is also the most allowed) */
	const char *dense;         /* where attention and the other dense ops run: NULL or "auto" (the
				      runtime's device when its backend has them, else the CPU), "cpu",
				      or "ref": the double-precision reference of every op, experts
				      included, nothing quantized (f32 KV cache): slow, for checking */
};
/* The defaults (zeros and n_seq 1: opts NULL or a zero struct mean the same). */
struct hs_context_opts hs_context_opts_default(void);

/* A context over a runtime opened on a whole model (hs_model_info's
 * `whole`): the KV cache of n_seq sequences, in device memory when the
 * dense part runs there.  The first context loads the dense weights (onto
 * the device when they run there); the runtime must outlive its contexts.
 * One thread at a time may use a context or its runtime.  -EINVAL (not a
 * whole model, bad options: the message names the limit), -ENOMEM.  A KV
 * cache in device memory of more positions (n_ctx x n_seq) than the
 * runtime's plan counted (its ctx x the runtime's n_seq) is allowed, with a
 * warning through the log (HS_LOG_WARN): the memory it takes was given to
 * experts and slots, and may run short.  Free with hs_context_free(). */
int hs_context_create(hs_runtime *rt, const struct hs_context_opts *opts, hs_context **out);
void hs_context_free(hs_context *c);

/* One entry of a batch: token id at position pos of sequence seq; logits
 * != 0 asks for its logits. */
struct hs_token {
	int32_t id, pos, seq, logits;
};

/* Runs the model over n entries (any mix of sequences; a sequence's
 * entries must continue it: positions hs_context_seq_pos(), +1, +2, ...
 * in batch order).  Longer batches are cut into ubatches.  Errors: -EINVAL
 * for a bad entry (token id outside the vocabulary, sequence outside
 * 0..n_seq-1, a position that does not continue its sequence or reaches
 * n_ctx), with the entry's index in the message; nothing is changed then.
 * A failure while computing (-ENOMEM, a device error) or a cancel
 * (-ECANCELED, hs_context_set_abort()) leaves every sequence as it was
 * before the call: the cells it wrote are freed, and the sliding-window
 * ring cells it overwrote are put back (copied first when a sequence gets
 * more than n_ubatch + 1 tokens); only if putting them back fails too is
 * such a sequence emptied (hs_context_seq_pos() 0), and the message says
 * so. */
int hs_decode(hs_context *c, int n, const struct hs_token *batch);
/* Logits of the i-th entry that asked for them (logits != 0) in the last
 * hs_decode, counted in batch order among those entries only: i = 0 is the
 * first entry with logits set, whatever its place in the batch, and
 * 0 <= i < hs_context_n_logits().  n_vocab floats owned by c, valid until
 * the next hs_decode; NULL (with a message) when i is out of range. */
const float *hs_context_logits(const hs_context *c, int i);
/* How many entries of the last hs_decode asked for logits. */
int hs_context_n_logits(const hs_context *c);
/* The next position of sequence seq (the tokens it holds); -EINVAL. */
int hs_context_seq_pos(const hs_context *c, int seq);
/* Empties sequence seq: its KV cells are free and its next position is 0. */
int hs_context_seq_clear(hs_context *c, int seq);
/* Keeps the first n positions of sequence seq (0 <= n <= its position) and
 * frees the rest, so that a prompt sharing those n tokens continues from
 * n.  Returns the positions kept: n, or 0 when a sliding-window layer's
 * ring (window + n_ubatch cells) no longer holds the positions the window
 * needs at n, or when the model has recurrent layers (qwen35moe's DeltaNet
 * state holds no earlier position) and n is below the position (the
 * sequence is emptied then); -EINVAL. */
int hs_context_seq_keep(hs_context *c, int seq, int n);

/* As llama.h's memory calls, for a cache that keeps each sequence's cells
 * apart.  Ranges are positions [p0, p1); p0 < 0 means 0, p1 < 0 means the
 * sequence's end.  What sliding-window layers cannot do: their ring of
 * window + n_ubatch cells keeps only the latest positions, so a cut that
 * would make a sequence continue from a position whose window the ring no
 * longer holds is refused with -ENOTSUP and changes nothing.
 *
 * Removes seq's positions [p0, p1).  A range reaching the end cuts the
 * sequence back (its next position becomes p0); one inside it leaves a hole
 * that later tokens do not see (the next position stays; positions are not
 * shifted).  -EINVAL (bad sequence or range), -ENOTSUP (above). */
int hs_context_seq_rm(hs_context *c, int seq, int p0, int p1);
/* Models with recurrent layers (qwen35moe): seq_rm of anything but the
 * whole sequence, seq_cp, seq_save and seq_load are -ENOTSUP (one state per
 * sequence, the sum of all its tokens, that cannot be cut or copied yet). */
/* Copies src's cells of positions [p0, p1) into dst, which then continues
 * at p1 (a prompt decoded once, shared by several sequences).  dst must
 * hold no position >= p0 (seq_rm or seq_clear it first): -EINVAL
 * otherwise, as for src == dst or a bad range; -ENOTSUP (above). */
int hs_context_seq_cp(hs_context *c, int src, int dst, int p0, int p1);

/* Per-sequence state on disk (a prompt cache): the sequence's KV cells of
 * every attention layer, its next position and, when tokens is not NULL,
 * the n_tokens (= hs_context_seq_pos()) token ids it holds.  The file
 * (docs/library.md: versioned sections, room for the recurrent states of
 * other layer kinds) is written through "<path>.part" and a rename. */
int hs_context_seq_save(hs_context *c, int seq, const char *path, const int32_t *tokens, int n_tokens);
/* Replaces sequence seq with the state of a file that hs_context_seq_save()
 * wrote for the same model (a hash of its tensors' names, shapes, types and
 * first bytes, and its sizes) and KV type; decoding then continues as it
 * would have in the saved context.  The file is checked whole before seq
 * changes: -EIO (not a hotset state file, truncated, malformed, the message
 * names the field), -EINVAL (another model or KV type, more positions than
 * this context's n_ctx, tokens that do not fit cap), -ENOTSUP (a newer
 * version or a section kind this library does not read).  tokens (may be
 * NULL) receives up to cap ids, *n_tokens (may be NULL) how many the file
 * holds (0 when it holds none).  Returns the sequence's next position. */
int hs_context_seq_load(hs_context *c, int seq, const char *path, int32_t *tokens, int cap, int *n_tokens);

/* Asked between ubatches and before every layer of hs_decode(): nonzero
 * stops it; hs_decode() then returns -ECANCELED with the batch undone
 * (every sequence as before the call, the cells it wrote free).  fn NULL
 * removes it.  -EINVAL when c is NULL. */
int hs_context_set_abort(hs_context *c, hs_abort_fn fn, void *ctx);

struct hs_context_stats {
	int n_ctx, n_seq, n_ubatch;
	enum hs_kv_type kv_type;
	const char *dense;         /* where the dense part runs: "cpu" or the device's description */
	uint64_t kv_bytes;         /* the KV cache's memory */
	long kv_cells_used;        /* positions held, summed over sequences */
	long kv_cells_total;       /* n_seq * n_ctx */
	/* since creation or hs_context_stats_reset(): ubatches holding more
	 * than one token of a sequence count as prompt, the others as decode */
	long prompt_tokens, decode_tokens;
	double prompt_s, decode_s;
	double attn_s, moe_s, other_s; /* where the time went (attention incl. its projections,
					  router + experts, the rest) */
};
int hs_context_stats(const hs_context *c, struct hs_context_stats *out);
void hs_context_stats_reset(hs_context *c);

/* Sampling a token from a row of logits: top-k, top-p, min-p, temperature,
 * then a draw from a generator seeded by `seed` (the same tokens on every
 * machine for the same logits and seed); temperature <= 0 is greedy (the
 * largest logit, lowest id on ties). */
struct hs_sampler_params {
	float temperature;         /* <= 0: greedy */
	int top_k;                 /* <= 0: off */
	float top_p;               /* >= 1: off */
	float min_p;               /* <= 0: off */
	uint64_t seed;
};
/* The defaults (what p NULL means): greedy, top_p 1, the rest off.  A zero
 * struct differs in top_p (0: only the best token is kept). */
struct hs_sampler_params hs_sampler_params_default(void);
typedef struct hs_sampler hs_sampler;
/* -EINVAL (n_vocab < 1, NaN parameters), -ENOMEM.  Free with hs_sampler_free(). */
int hs_sampler_create(const struct hs_sampler_params *p, int n_vocab, hs_sampler **out);
void hs_sampler_free(hs_sampler *s);
/* The token drawn from logits[n_vocab] (NaN logits count as -inf); -EINVAL
 * when s or logits is NULL or no logit is above -inf (all NaN or -inf):
 * a negative result is an error, never a token. */
int32_t hs_sampler_sample(hs_sampler *s, const float *logits);

/* ---- expert cache policies ------------------------------------------------------ */

enum hs_cache_policy { HS_CACHE_NONE, HS_CACHE_LRU, HS_CACHE_LFU, HS_CACHE_LFRU, HS_CACHE_STATIC, HS_CACHE_BELADY };

struct hs_cache_result {
	long accesses, hits;       /* (token, expert) pairs */
	long admissions;           /* uploads into the cache */
};

/* Replays one layer's routing through a cache of `slots` experts: step s
 * uses the distinct experts experts[off[s] .. off[s + 1]) with pairs[i]
 * (token, expert) pairs each.  Misses are admitted after the step, busiest
 * first, at most admit_cap per step (-1: no cap).  With freq (a routing
 * profile) every policy starts warm with the `slots` experts of largest
 * freq[e], and STATIC keeps them; without, policies start empty (STATIC
 * needs freq).  BELADY is the offline bound from the same start: after each
 * step it keeps the experts needed soonest, even dropping one the step used
 * (the online policies may not), so no policy beats it.  -EINVAL for an expert outside the layer or
 * listed twice in a step. */
int hs_cache_simulate(enum hs_cache_policy p, int n_experts, int slots, int admit_cap, int n_steps, const int *off,
		      const int32_t *experts, const int *pairs, const float *freq, struct hs_cache_result *out);
const char *hs_cache_policy_name(enum hs_cache_policy p);

/* ---- routing traces (docs/trace-format.md) ------------------------------------------ */

typedef struct hs_trace hs_trace;
typedef struct hs_trace_writer hs_trace_writer;

/* Writes to "<path>.part"; close with keep = 1 renames it to path, keep = 0
 * deletes it (nothing half-written is left). */
int hs_trace_writer_open(const char *path, int n_experts, int n_used, hs_trace_writer **out);
/* One record: ids[n_tokens][n_used] (-1 = none) and their weights. */
int hs_trace_writer_add(hs_trace_writer *w, int step, int layer, int n_tokens, const int32_t *ids,
			const float *weights);
int hs_trace_writer_close(hs_trace_writer *w, int keep);
/* Reads a whole trace; -EIO naming the byte offset of a broken record. */
int hs_trace_load(const char *path, hs_trace **out);
void hs_trace_free(hs_trace *t);
/* Any out-pointer may be NULL; a NULL t gives zeros (and a message). */
void hs_trace_info(const hs_trace *t, int *n_records, int *n_experts, int *n_used);
/* Record i; the arrays are owned by t. */
int hs_trace_record(const hs_trace *t, int i, int *step, int *layer, int *n_tokens, const int32_t **ids,
		    const float **weights);
/* step,layer,token,slot,expert,weight per line, through "<path>.part". */
int hs_trace_write_csv(const hs_trace *t, const char *path);
/* A synthetic trace: n_layers layers of n_experts (n_used per token), each
 * layer's popularity a Zipf curve whose top_n experts take top_share of the
 * slots (a different hot set per layer), and with probability `locality`
 * a token reuses an expert of the layer's previous step. */
int hs_trace_generate(const char *path, int n_layers, int n_experts, int n_used, int steps, int tokens, int top_n,
		      double top_share, double locality, uint64_t seed);

/* Predicted decode tokens/s of a plan's MoE part when its host layers hit
 * their GPU copies at hit_rate[i] (one per plan layer; GPU layers ignore
 * theirs), with the plan's own figures and decode mode.  Pure.  A negative
 * errno (-EINVAL) for a NULL or malformed plan or a NULL hit_rate. */
double hs_plan_project(const struct hs_plan *p, const double *hit_rate);

/* ---- sharing the GPU ------------------------------------------------------ */

/* Reports a device's free and total memory (the real one asks CUDA; tests
 * pass a fake). */
typedef int (*hs_vram_reporter)(int device, uint64_t *free_bytes, uint64_t *total_bytes, void *ctx);

/* Waits until `budget` bytes of device memory are free, polling every
 * poll_ms (others' processes may hold it; they are never signalled), with
 * progress messages through progress (may be NULL).  reporter NULL = CUDA.
 * 0 when the memory is free; -ETIMEDOUT after timeout_s seconds with a
 * message saying how much was free; -EINVAL when budget exceeds the total,
 * device is negative or timeout_s is negative or NaN. */
int hs_vram_wait(int device, uint64_t budget, double timeout_s, int poll_ms, hs_vram_reporter reporter,
		 void *reporter_ctx, hs_progress_fn progress, void *progress_ctx);

/* ---- arrays (.npy files, float32, C order) ------------------------------ */

/* Reads a float32 .npy file of shape (rows, cols) or (cols,) (one row).
 * *data is malloc'd, the caller frees it.  -EIO with a message naming the
 * file and what is wrong (dtype, order, shape, truncated, trailing bytes). */
int hs_npy_read_f32(const char *path, float **data, int64_t *rows, int64_t *cols);
/* Writes float32 [rows][cols] to path (through "<path>.part" and a rename). */
int hs_npy_write_f32(const char *path, const float *data, int64_t rows, int64_t cols);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif /* HOTSET_H */
