/* The whole model beyond the experts: hyperparameters and the dense tensors
 * (attention, norms, embeddings, output) of a gpt-oss or Qwen3-MoE GGUF, as
 * the forward pass reads them.  Described at hs_model_open; a file that
 * holds only MoE layers (an older `hotset gen` file) has no whole view, and
 * hs__model_whole_why() says what is missing. */
#ifndef HS_WHOLE_H
#define HS_WHOLE_H

#include <stddef.h>
#include <stdint.h>

#include "hotset.h"

/* A matrix as the kernels read it: `rows` rows of `cols` values of `type`
 * (a ggml type id), row_bytes apart, in the model's mapping. */
struct hs_weight {
	int type;
	int rows, cols;
	size_t row_bytes;
	const uint8_t *data;
	const char *name;          /* the tensor's name, owned by the model */
	int packed;                /* data is in the row-interleaved layout (cpu_kernels/repack.h): a
				      copy the CPU backend made; the file's rows are plain */
};

struct hs_hparams {
	int n_vocab, n_embd, n_layers;
	int n_head, n_head_kv, head_dim;   /* query heads, KV heads (GQA), per-head size */
	int n_rot;                 /* dimensions RoPE rotates (head_dim unless the file says) */
	int n_ctx_train;           /* {arch}.context_length */
	float eps;                 /* RMSNorm epsilon */
	float rope_base;           /* rope.freq_base */
	int rope_yarn;             /* rope.scaling.type yarn */
	float rope_factor;         /* rope.scaling.factor (1 = none) */
	int rope_orig_ctx;         /* rope.scaling.original_context_length */
	int swa_window;            /* attention.sliding_window (0 = none) */
	/* qwen35moe: Gated DeltaNet layers (ssm.*) and the expert scale */
	int n_recurrent;           /* DeltaNet layers (0 for the other architectures) */
	int ssm_conv;              /* ssm.conv_kernel: taps of the causal convolution */
	int ssm_nk, ssm_nv, ssm_dh; /* key heads (group_count), value heads (time_step_rank), head size (state_size) */
	float expert_scale;        /* expert_weights_scale: the routed output's factor (1 = none) */
};

/* A qwen35moe layer's tensors beyond hs_dense_layer's: the DeltaNet mixer
 * (recurrent layers; their wq..wo are empty) and the shared expert (every
 * layer).  Vectors are f32 in the mapping. */
struct hs_q35_layer {
	int recurrent;
	struct hs_weight qkv;      /* attn_qkv: [2 nk dh + nv dh] rows */
	struct hs_weight z;        /* attn_gate: [nv dh] rows, the output gate */
	struct hs_weight beta, alpha; /* ssm_beta, ssm_alpha: [nv] rows */
	struct hs_weight out;      /* ssm_out: [n_embd] rows of nv dh */
	const float *conv;         /* ssm_conv1d [conv channels][ssm_conv] */
	const float *dt_bias, *a;  /* ssm_dt.bias, ssm_a [nv] */
	const float *norm;         /* ssm_norm [dh] */
	struct hs_weight sh_gate, sh_up, sh_down; /* the shared expert (data NULL without one) */
	const float *sh_inp;       /* ffn_gate_inp_shexp [n_embd]: its sigmoid gate */
};

struct hs_dense_layer {
	const float *attn_norm;    /* [n_embd] */
	struct hs_weight wq, wk, wv, wo;
	const float *bq, *bk, *bv, *bo; /* biases (gpt-oss) or NULL */
	const float *sinks;        /* [n_head] sink logits (gpt-oss) or NULL */
	const float *q_norm, *k_norm; /* [head_dim] per-head norms (qwen3moe) or NULL */
	const float *ffn_norm;     /* [n_embd] the pre-MoE norm */
	int swa;                   /* 1: this layer sees only the last swa_window positions */
	/* glm4moe: a SwiGLU FFN, down(silu(gate h) * up h), on the pre-MoE norm's
	 * output: the layer's whole FFN when ffn_dense (a leading dense layer,
	 * no experts), else the shared expert beside the routed ones; rows 0 =
	 * none */
	struct hs_weight ffn_gate, ffn_up, ffn_down;
	int ffn_dense;
	int attn_gate;             /* qwen35moe: wq gives per head head_dim query rows, then head_dim
				      output-gate rows (o *= sigmoid(gate) before wo) */
	struct hs_q35_layer q35;
};

/* The forward pass's qwen35moe buffers per ubatch token, in floats (runtime/fwd-qwen35.c
 * allocates them): the in-projection and the convolution's output (conv channels each), the
 * output gate z and the mixer's output (value width), beta, alpha, decay and beta's sigmoid
 * (value heads), the query and gate rows (2 q_dim).  The shared expert's gate and up rows
 * are the planner's dense-FFN buffers (hs_model_desc's ffn_ff). */
static inline uint64_t hs__q35_ubatch_floats(int conv_ch, int val, int nv, int q_dim)
{
	return 2 * (uint64_t)conv_ch + 2 * (uint64_t)val + 4 * (uint64_t)nv + 2 * (uint64_t)q_dim;
}

/* The DeltaNet states of one sequence, all layers: f32 conv and delta-rule states. */
uint64_t hs__whole_state_bytes(const struct hs_hparams *hp);
/* The matrices of L's hs_q35_layer that are present, into out[8]; their count. */
int hs__q35_matrices(struct hs_dense_layer *L, struct hs_weight **out);

struct hs_whole {
	struct hs_hparams hp;
	struct hs_weight tok_embd;  /* [n_vocab] rows of n_embd */
	const float *output_norm;   /* [n_embd] */
	struct hs_weight output;    /* [n_vocab] rows of n_embd (token_embd when the file has none) */
	struct hs_dense_layer *layers; /* [n_layers] */
	uint64_t dense_bytes;       /* every tensor but the experts, routers and token_embd */
	int n_ff_max;               /* the widest dense FFN or shared expert (0 = none) */
	int n_dense_ffn, n_ff_dense, n_ff_shared; /* glm4moe: leading dense layers, their and the shared expert's ff */
	uint64_t shared_bytes, dense_ffn_bytes;   /* the shared experts', the dense FFN layers' matrices */
};

/* Describes the dense part of m's file; NULL when the file is not a whole
 * model (the reason then from hs__model_whole_why()).  Owned by m. */
const struct hs_whole *hs__model_whole(const hs_model *m);
const char *hs__model_whole_why(const hs_model *m);

/* Called by hs_model_open: fills *out (allocating layers) or writes the
 * reason into why.  0 either way unless memory runs out. */
struct hs_gguf;
int hs__whole_describe(const struct hs_gguf *g, const char *arch, const char *path, int n_layers, int n_embd,
		       struct hs_whole **out, char *why, size_t why_len);
void hs__whole_free(struct hs_whole *w);

#endif
