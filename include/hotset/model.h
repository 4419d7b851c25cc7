/* hotset/model.h: a GGUF model file: what it holds and where its experts
 * lie.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_MODEL_H
#define HOTSET_MODEL_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

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

#endif /* HOTSET_MODEL_H */
