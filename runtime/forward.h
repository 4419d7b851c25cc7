/* The whole model's forward pass over one ubatch, written once against a
 * small backend interface with two implementations: the CPU (host memory,
 * the runtime's worker pool; fwd-cpu.c) and a device (device memory, the
 * device's queue; fwd-dev.c).  The MoE part of every layer goes through the
 * hybrid runtime on the host either way (hs__runtime_moe): the router's ids
 * decide what runs where, and the CPU lane needs the hidden state there.
 *
 * A context (context.c) owns one hs_fwd: the KV cache of its sequences and
 * the buffers of one ubatch, in the backend's memory. */
#ifndef HS_FORWARD_H
#define HS_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels/attention.h"
#include "cpu_kernels/dense.h"
#include "device/device.h"
#include "hotset.h"
#include "model/whole.h"
#include "planner/planner.h"
#include "runtime/runtime.h"

struct hs_fwd;

/* What a backend does.  Pointers named for the backend's memory (x, y,
 * cache, weights of `w`) are its own; `host` ones are host memory.  Ops may
 * run asynchronously; download() returns when the data is on the host. */
struct hs_fwd_be {
	const char *name;
	int reference;             /* the double-precision twins: the MoE part by hs__moe_forward_ref too */
	int (*alloc)(struct hs_fwd *f, size_t bytes, void **p);
	void (*free)(struct hs_fwd *f, void *p);
	int (*upload)(struct hs_fwd *f, void *dst, const void *host, size_t bytes);
	int (*download)(struct hs_fwd *f, void *host, const void *src, size_t bytes);
	/* scratch the matmul and attention ops need (the larger serves both) */
	size_t (*matmul_scratch)(struct hs_fwd *f, int type, int cols, int n);
	size_t (*attn_scratch)(struct hs_fwd *f, int n, int n_cells);
	/* y[t] = W x[t] (+ bias) for n tokens */
	int (*matmul)(struct hs_fwd *f, const struct hs_weight *w, const float *bias, int n, const float *x,
		      size_t x_stride, float *y, size_t y_stride);
	/* dense.h hs__rmsnorm (n tokens, n_head rows of dim each) */
	int (*rmsnorm)(struct hs_fwd *f, const float *x, size_t x_stride, float *y, size_t y_stride, int n, int n_head,
		       int dim, const float *w, float eps);
	/* dense.h hs__rope_apply with the ubatch's table cs [n][n_rot] */
	int (*rope)(struct hs_fwd *f, float *x, size_t x_stride, int n, int n_head, int head_dim, int n_rot,
		    const float *cs);
	/* attention.h hs__kv_store into cells[t]; and cell_pos[cells[t]] = pos[t] when cell_pos is not NULL */
	int (*kv_store)(struct hs_fwd *f, int type, const float *x, size_t x_stride, int n, int n_head_kv,
			int head_dim, const int32_t *cells, uint8_t *dst, size_t cell_bytes, size_t head_bytes,
			int32_t *cell_pos, const int32_t *pos);
	/* attention.h: the job's pointers are the backend's; dops, n_split and scratch are the backend's to set */
	int (*attention)(struct hs_fwd *f, struct hs_attn_job *job);
	/* y[i] += x[i], i < n */
	int (*add)(struct hs_fwd *f, float *y, const float *x, size_t n);
	/* dense.h hs__swiglu: g[i] = silu(g[i]) * u[i], i < n */
	int (*swiglu)(struct hs_fwd *f, float *g, const float *u, size_t n);
	/* device/device.h's deltanet op on the backend's memory; NULL: the host forms (fwd-qwen35.c) */
	int (*deltanet)(struct hs_fwd *f, const struct hs_dev_dn *d);
	/* waits for everything queued */
	int (*sync)(struct hs_fwd *f);
};

extern const struct hs_fwd_be hs__fwd_cpu, hs__fwd_dev, hs__fwd_ref;

/* The steps of the time breakdown (hs_context_stats), in hs_context_step_name's order. */
enum {
	HS_STEP_EMBED,     /* embeddings looked up, the ubatch's tables uploaded */
	HS_STEP_NORM,      /* every RMSNorm */
	HS_STEP_QKV,       /* the q, k, v products */
	HS_STEP_ROPE_KV,   /* rotations and the K/V write */
	HS_STEP_ATTN,      /* attention over the cache */
	HS_STEP_ATTN_OUT,  /* the output projection (and gated attention's gate), its residual add */
	HS_STEP_DELTANET,  /* qwen35moe's DeltaNet mixer, its products and residual add */
	HS_STEP_ROUTER,
	HS_STEP_EXPERTS,   /* the routed experts (the hybrid runtime) */
	HS_STEP_FFN,       /* dense FFNs and shared experts */
	HS_STEP_MOE_ADD,   /* the MoE output back to the backend, its residual add */
	HS_STEP_OUTPUT     /* the logits' product and download */
};
/* A step's start (time and pool dispatches so far) and end, adding its
 * time, dispatches and the bytes it read to f's breakdown. */
struct hs_step_mark {
	double t;
	long runs;
};
struct hs_step_mark hs__step_begin(const struct hs_fwd *f);
void hs__step_end(struct hs_fwd *f, int step, struct hs_step_mark m, double bytes);
/* The bytes of a matrix (0 when absent). */
double hs__weight_bytes(const struct hs_weight *w);

/* KV cache of one layer for all sequences: seq s, cell c, kv head h at
 * k + (s * n_cells + c) * cell_bytes + h * head_bytes.  Full-attention
 * layers have n_ctx cells and keep position p in cell p; sliding-window
 * layers keep a ring of window + ubatch cells (position p in cell p % n). */
struct hs_kv_layer {
	int n_cells;
	uint8_t *k, *v;
	int32_t *cell_pos;         /* [n_seq][n_cells], -1 = empty (backend memory) */
};

struct hs_fwd {
	hs_runtime *rt;
	const struct hs_fwd_be *be;
	const struct hs_whole *w;  /* weights in the backend's memory (the mapping on the CPU) */
	const struct hs_hparams *hp;
	struct hs_rope rope;
	int n_ctx, n_seq, ubatch, kv_type;
	size_t kv_row_bytes;       /* one head's K (or V) row */
	struct hs_kv_layer *kv;    /* [n_layers] */
	uint64_t kv_bytes;
	/* ubatch buffers, backend memory */
	float *x, *h, *q, *k, *v, *o, *t, *logits, *cs;
	float *fg, *fu;            /* a dense FFN's gate and up rows [ubatch][w->n_ff_max] (glm4moe; else NULL) */
	int32_t *pos, *cells_full, *cells_swa;
	void *scratch;             /* matmul / attention scratch */
	size_t scratch_bytes;
	/* host buffers */
	float *hh, *hy, *hx, *hcs;  /* hidden state for the MoE, its output, embeddings, rope table */
	int32_t *hpos, *hcells_full, *hcells_swa, *hids;
	float *hw;
	void *route_scratch;
	int max_logits;            /* rows of the logits buffer (HS_FWD_LOGITS_ROWS or the ubatch) */
	/* device backend */
	struct hs_device *d;
	hs_queue *q_dev;
	void *staging;             /* pinned host memory for uploads */
	size_t staging_bytes;
	/* time spent (seconds) */
	double t_attn, t_moe, t_other;
	/* by step (HS_STEP_*): seconds, bytes of weights and cache read, pool dispatches */
	double step_s[HS_CONTEXT_STEPS], step_bytes[HS_CONTEXT_STEPS];
	long step_runs[HS_CONTEXT_STEPS];
	/* asked before every layer of a ubatch: nonzero stops it with -ECANCELED */
	hs_abort_fn abort;
	void *abort_ctx;
	struct hs_q35 *q35;        /* qwen35moe's buffers and recurrent states (fwd-qwen35.c), or NULL */
};

/* One ubatch: n tokens (sorted by sequence, positions consecutive within
 * each), want[t] = 1 for the rows whose logits are wanted; the j-th of them
 * (in token order) is written to logits_rows[j] (n_vocab floats, host). */
int hs__fwd_ubatch(struct hs_fwd *f, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
		   const int *want, float *const *logits_rows);

/* Sets up the buffers and the KV cache (all cells empty).  -ENOMEM. */
int hs__fwd_init(struct hs_fwd *f);
void hs__fwd_free(struct hs_fwd *f);
/* Empties the cells of seq holding positions >= from (every layer). */
int hs__fwd_forget(struct hs_fwd *f, int seq, int from);
/* Empties the cells of seq holding positions in [lo, hi) (every layer). */
int hs__fwd_forget_range(struct hs_fwd *f, int seq, int lo, int hi);
/* Cells of the sliding layers' rings (window + ubatch, each the same), or
 * 0 when no layer keeps fewer cells than n_ctx: writing position p then
 * overwrites the position p - ring of the same sequence. */
int hs__fwd_ring(const struct hs_fwd *f);
int hs__fwd_is_ring(const struct hs_fwd *f, int layer);
/* Bytes of one cell's K (or V): every KV head's row. */
size_t hs__fwd_cell_bytes(const struct hs_fwd *f);

/* Some cells of one layer and sequence in host memory, in ascending
 * position order: copies between sequences, rollbacks, state files. */
struct hs_fwd_cells {
	int n, cap, cap_rows; /* cells, room in pos and cell, room in k and v */
	int32_t *pos;         /* [n] the positions */
	int32_t *cell;        /* [n] the cells they were read from or go to */
	uint8_t *k, *v;       /* [n][hs__fwd_cell_bytes] */
};
/* The cells of seq in layer holding positions [lo, hi) into out (grown as
 * needed; out->n of them), their K and V rows too when rows is set.
 * -ENOMEM, a backend error. */
int hs__fwd_cells_get(struct hs_fwd *f, int layer, int seq, int lo, int hi, int rows, struct hs_fwd_cells *out);
/* Writes in's n cells (ascending positions, each < n_ctx) into seq's cells
 * of layer: position p into cell p (full layers) or p % ring; in a ring the
 * later of two positions sharing a cell stays. */
int hs__fwd_cells_put(struct hs_fwd *f, int layer, int seq, struct hs_fwd_cells *in);
/* Room for n cells (contents kept), their rows too when cell_bytes is not
 * 0; -ENOMEM. */
int hs__fwd_cells_reserve(struct hs_fwd_cells *c, int n, size_t cell_bytes);
void hs__fwd_cells_free(struct hs_fwd_cells *c);
/* The CPU backend's view of the weights: its Q8_0/MXFP4 matrices repacked
 * (made by the first context, kept by the runtime). */
int hs__fwd_cpu_open(struct hs_fwd *f);
/* The device backend: its queue and staging buffer, and the dense weights
 * on the device (uploaded by the first context, kept by the runtime). */
int hs__fwd_dev_open(struct hs_fwd *f);
void hs__fwd_dev_close(struct hs_fwd *f);

/* ---- qwen35moe (fwd-qwen35.c) -------------------------------------------------
 * Its Gated DeltaNet layers, the output gate of its attention layers and
 * its shared expert, over the same backend ops: the products and the
 * DeltaNet mixer (the backend's deltanet op, or the host forms on the CPU
 * backends) on the backend; the output gate and the shared expert's gate
 * on the host (downloaded and uploaded around them).  Each sequence has,
 * per DeltaNet layer, a convolution state and a delta-rule state in the
 * backend's memory: a fixed size whatever its length, and no way back to
 * an earlier position (hs__fwd_forget_exact says so).  forget and
 * state_copy are 0 or the backend's copy error. */
int hs__q35_init(struct hs_fwd *f);   /* nothing to do unless the model has DeltaNet layers */
void hs__q35_free(struct hs_fwd *f);
size_t hs__q35_scratch(struct hs_fwd *f); /* the backend scratch its products need */
int hs__q35_forget(struct hs_fwd *f, int seq); /* the sequence's states back to zero */
/* A sequence's states as one block of floats (a checkpoint): their count,
 * and a copy out of (save) or back into the context */
size_t hs__q35_state_floats(const struct hs_fwd *f);
int hs__q35_state_copy(struct hs_fwd *f, int seq, float *buf, int save);
/* Layer l's DeltaNet mixer: x += ssm_out(gated_norm(delta_rule(conv(qkv(rmsnorm(x)))))) */
int hs__q35_deltanet(struct hs_fwd *f, int l, int n, int n_groups, const int *g_start, const int32_t *seq);
/* Gated attention: wq wrote query and gate rows into hs__q35_qg(f) (2 n_head head_dim a token);
 * split_q moves the queries to f->q, gate_out multiplies f->o by sigmoid(gate). */
float *hs__q35_qg(struct hs_fwd *f);
int hs__q35_split_q(struct hs_fwd *f, int n);
int hs__q35_gate_out(struct hs_fwd *f, int n);
/* The shared expert of layer l on f->h (the pre-MoE norm), times its sigmoid gate, added to f->hy
 * (host), after the routed output there is scaled by expert_weights_scale. */
int hs__q35_shared(struct hs_fwd *f, int l, int n);
/* Bytes of layer l's DeltaNet matrices, and of its shared expert with its gate (breakdown). */
double hs__q35_mixer_bytes(const struct hs_fwd *f, int l);
double hs__q35_shared_bytes(const struct hs_fwd *f, int l);

#endif
