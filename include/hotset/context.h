/* hotset/context.h: the whole model in contexts, batches, decoding, sequences,
 * state files, sampling.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_CONTEXT_H
#define HOTSET_CONTEXT_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

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
 * there.  Returns the positions kept: n, or 0 when a sliding-window layer's
 * ring (window + n_ubatch cells) no longer holds the positions the window
 * needs at n.  A model with recurrent layers (qwen35moe's DeltaNet states
 * hold no earlier position) goes back to the latest checkpoint at or below
 * n: the context keeps the states of each sequence at the end of its last
 * two calls that gave it more than one token (its prompts), so the result
 * is that checkpoint's position (0, the sequence emptied, when there is
 * none); the caller decodes from there.  -EINVAL. */
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

#define HS_CONTEXT_STEPS 12 /* the forward pass's steps in hs_context_stats */
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
	/* the same time step by step (hs_context_step_name(i)), the bytes of weights and cache
	 * each step's data hold that it read, and its CPU worker-pool dispatches (each one a
	 * wake-up and a wait for the slowest worker).  With the dense part on a device the steps'
	 * times are the host's (launches queue asynchronously); their sum is still the total. */
	double step_s[HS_CONTEXT_STEPS];
	double step_bytes[HS_CONTEXT_STEPS];
	long step_dispatches[HS_CONTEXT_STEPS];
};
int hs_context_stats(const hs_context *c, struct hs_context_stats *out);
/* The name of step i of hs_context_stats' breakdown ("q/k/v products", ...); NULL outside
 * 0..HS_CONTEXT_STEPS-1. */
const char *hs_context_step_name(int step);
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
/* -EINVAL (n_vocab < 1, NaN parameters), -ENOMEM.  Free with hs_sampler_free(). */
int hs_sampler_create(const struct hs_sampler_params *p, int n_vocab, hs_sampler **out);
void hs_sampler_free(hs_sampler *s);
/* The token drawn from logits[n_vocab] (NaN logits count as -inf); -EINVAL
 * when s or logits is NULL or no logit is above -inf (all NaN or -inf):
 * a negative result is an error, never a token. */
int32_t hs_sampler_sample(hs_sampler *s, const float *logits);
/* Constrains what s draws to grammar g (NULL: unconstrained again): each
 * hs_sampler_sample() masks the tokens g refuses (on a copy: logits stay as
 * they were) and advances g by the token drawn; -ENOENT from it when g
 * allows nothing.  g is the caller's, used in place (not copied), and must
 * outlive its use here; its state is not reset. */
int hs_sampler_set_grammar(hs_sampler *s, hs_grammar *g);

/* Log-probabilities of a row of logits[n_vocab] under its softmax at
 * temperature 1, before any sampler filtering (what OpenAI's `logprobs`
 * report; NaN counts as -inf): of `token` into *token_lp (token_lp may be
 * NULL), and of the n_top most likely tokens into top_ids[n_top] and
 * top_lps[n_top], best first, lower id first on ties (-inf for places past
 * the tokens above -inf).  The sum is taken in double.  Returns 0; -EINVAL
 * when logits is NULL, n_vocab < 1, token is outside [0, n_vocab), n_top is
 * outside [0, n_vocab], top_ids or top_lps is NULL with n_top > 0, or no
 * logit is above -inf. */
int hs_logprobs(const float *logits, int n_vocab, int32_t token, int n_top, float *token_lp, int32_t *top_ids,
		float *top_lps);

#endif /* HOTSET_CONTEXT_H */
