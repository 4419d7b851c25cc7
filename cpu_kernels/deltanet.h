/* Gated DeltaNet (Qwen3.5 / Qwen3.6 MoE's linear-attention layers): the
 * short causal convolution with its state and the gated delta rule with its
 * recurrent state, as llama.cpp runs GGUF `qwen35moe` files.
 *
 * The delta rule per value head, state S (dv x dk, zero at a sequence's
 * start), for each token t with query q_t, key k_t (both dk, l2-normed),
 * value v_t (dv), log-decay g_t <= 0 and beta_t in (0, 1):
 *   S *= exp(g_t);  u_t = beta_t (v_t - S k_t);  S += u_t k_t^T;
 *   o_t = scale * S q_t.
 * Two float forms of the same numbers: one token at a time (decode), and in
 * chunks of HS_DN_CHUNK tokens (prefill): with G_t the decay summed over the
 * chunk up to t and S0 the state at the chunk's start,
 *   u_t = beta_t (v_t - e^{G_t} S0 k_t - sum_{s<t} e^{G_t - G_s} (k_s.k_t) u_s)
 *   o_t = scale (e^{G_t} S0 q_t + sum_{s<=t} e^{G_t - G_s} (k_s.q_t) u_s)
 *   S   = e^{G_L} S0 + sum_s e^{G_L - G_s} u_s k_s^T
 * (a triangular solve and matrix products instead of L state updates: S is
 * read and written once per chunk).  The `_ref` twin runs the recurrence in
 * double.  Value head h reads key head h mod n_k_heads (llama.cpp repeats
 * the key heads).  Fast forms split the value heads over (ith, nth); the
 * convolution splits its channels.  Nothing inside allocates. */
#ifndef HS_DELTANET_H
#define HS_DELTANET_H

#include <stddef.h>

#define HS_DN_CHUNK 64

/* Causal depthwise convolution of n tokens of C channels (x_stride floats
 * apart) with w [C][kc] (tap kc-1 on the newest token), then SiLU:
 *   y[t][c] = silu(sum_j w[c][j] in[t - kc + 1 + j][c]),
 * where in[<0] comes from state [kc-1][C] (oldest first); state becomes the
 * last kc-1 inputs.  y must not overlap x.  Channels split over threads. */
void hs__dn_conv(const float *w, int C, int kc, float *state, int n, const float *x, size_t x_stride, float *y,
		 size_t y_stride, int ith, int nth);
void hs__dn_conv_ref(const float *w, int C, int kc, float *state, int n, const float *x, size_t x_stride, float *y,
		     size_t y_stride);

/* Between the convolution and the delta rule, for tokens [t0, t1) of rows
 * x (x_stride floats apart, q heads then k heads of dh values at the
 * start): each q and k head scaled in place by 1 / max(|head|, eps), and
 * per value head h of n_v values the log-decay and the beta
 *   g[t][h] = softplus(alpha[t][h] + dt_bias[h]) * a[h],
 *   b[t][h] = sigmoid(beta[t][h])
 * (alpha, beta, g and b rows n_v floats apart).  Double inside. */
void hs__dn_prep(float *x, size_t x_stride, int n_k, int dh, const float *alpha, const float *beta,
		 const float *dt_bias, const float *a, int n_v, float eps, float *g, float *b, long t0, long t1);
/* The gated norm of the output over head rows [r0, r1) of dh values (row
 * r at o + r dh: the heads of a token follow each other, then the next
 * token's), z laid out as o:
 *   o = o / sqrt(mean(o^2) + eps) * w * silu(z).  Double inside. */
void hs__dn_gnorm(float *o, const float *z, int dh, const float *w, float eps, long r0, long r1);

struct hs_dn_job {
	int n;                     /* tokens, of one sequence, in order */
	int n_k_heads, n_v_heads, dk, dv;
	const float *q, *k;        /* token t, key head h: q + t * qk_stride + h * dk */
	size_t qk_stride;
	const float *v;            /* value head h: v + t * v_stride + h * dv */
	size_t v_stride;
	const float *g, *beta;     /* [n][n_v_heads] */
	float scale;
	float *state;              /* [n_v_heads][dv][dk], updated */
	float *out;                /* value head h: out + t * out_stride + h * dv */
	size_t out_stride;
	float *scratch;            /* chunk form: hs__dn_scratch_floats(dv) floats per thread */
};

size_t hs__dn_scratch_floats(int dv);
/* One token after another. */
void hs__dn_step(const struct hs_dn_job *j, int ith, int nth);
/* In chunks of HS_DN_CHUNK; thread ith uses scratch + ith * hs__dn_scratch_floats(dv).
 * The fastest form this CPU runs (hs__dense_best()'s dn_chunk): the portable
 * one (_c) or the AVX2 one, the same steps in another float order. */
void hs__dn_chunk(const struct hs_dn_job *j, int ith, int nth);
void hs__dn_chunk_c(const struct hs_dn_job *j, int ith, int nth); /* deltanet-chunk.h */
void hs__dn_chunk_avx2(const struct hs_dn_job *j, int ith, int nth);
/* The recurrence in double, one thread (state read and written as float). */
void hs__dn_ref(const struct hs_dn_job *j);

#endif
