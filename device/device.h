/* The device layer: one small contract the task graph drives, with two
 * implementations, CUDA (device-cuda.c + gpu_kernels/) and sim
 * (device-sim.c: the same semantics on the CPU, for tests and machines
 * without a GPU).  Like a backend vtable: a const ops table and an opaque
 * context per device.
 *
 * Semantics every backend keeps (and tests/test-device.c checks):
 *  - queues run their work in FIFO order, asynchronously to the caller;
 *  - an event records the point of a queue it was recorded on; a queue that
 *    waits on it runs nothing later until that point has run; event_sync
 *    blocks the caller the same way; event_query says 1 when reached;
 *  - errors of queued work are sticky on the queue and returned by
 *    queue_sync / event_sync; calls return 0 or -errno with a message;
 *  - a failed device allocation is -ENOMEM (the caller falls back);
 *  - host-to-device copies on the streaming path come from registered
 *    (pinned) host memory only: hs__dev_copy_h2d() refuses other memory. */
#ifndef HS_DEVICE_H
#define HS_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "cpu_kernels/moe.h"

typedef struct hs_dev hs_dev;     /* a backend's device context */
typedef struct hs_queue hs_queue; /* an in-order work queue (CUDA stream) */
typedef struct hs_event hs_event; /* a point in a queue */

/* One fused expert FFN launch: for every (token t, slot j) with
 * ids[t][j] >= 0, y[t] += weights[t][j] * expert(ids[t][j])(x[t]); masked
 * ids (-1) are skipped and their expert is never read; duplicate ids and
 * experts with no token are legal.  Expert e's packed block (gate, up, down,
 * biases as `pack` says) is at pool + slot_of[e] * pool_stride.  All
 * pointers are device pointers. */
struct hs_dev_ffn {
	const struct hs_moe_arch *arch;
	int n_embd, n_ff, n_experts, n_used;
	struct hs_expert_pack pack; /* the slots' layout, with the matrices' types */
	const uint8_t *pool;
	size_t pool_stride;
	const int32_t *slot_of;    /* [n_experts]; entries of masked experts are not read */
	int n;                     /* tokens */
	const void *xq;            /* [n][n_embd / 32] Q8_0 blocks, from the quantize op */
	const int32_t *ids;        /* [n][n_used] */
	const float *weights;      /* [n][n_used] */
	float *y;                  /* [n][n_embd], accumulated */
	void *scratch;             /* ffn_scratch_bytes() bytes of device memory */
};

/* ---- dense ops of the whole model's forward pass ------------------------------
 * The CPU kernels' ops (cpu_kernels/dense.h, attention.h) with device
 * pointers; the semantics are theirs.  A backend without them leaves the
 * pointers NULL and the dense part runs on the CPU. */
struct hs_dev_matmul {         /* y[t] = W x[t] (+ bias) */
	int type, rows, cols;
	const uint8_t *w;
	size_t row_bytes;
	const float *bias;         /* [rows] or NULL */
	int n;
	const float *x;
	size_t x_stride;           /* floats */
	float *y;
	size_t y_stride;
	void *scratch;             /* matmul_scratch_bytes(type, cols, n) */
};

struct hs_dev_norm {           /* RMSNorm of n tokens x n_head rows of dim values */
	const float *x;
	size_t x_stride;
	float *y;
	size_t y_stride;
	int n, n_head, dim;
	const float *w;            /* [dim] or NULL */
	float eps;
};

struct hs_dev_rope {           /* NEOX rotation with a table cs[n][n_rot] (cos, then sin) */
	float *x;
	size_t x_stride;
	int n, n_head, head_dim, n_rot;
	const float *cs;
};

struct hs_dev_kv_store {       /* K or V rows into cache cells; cell_pos[cells[t]] = pos[t] when set */
	int type;                  /* HS_TYPE_F16 or HS_TYPE_Q8_0 */
	const float *x;
	size_t x_stride;
	int n, n_head_kv, head_dim;
	const int32_t *cells;
	uint8_t *dst;
	size_t cell_bytes, head_bytes;
	int32_t *cell_pos;         /* or NULL */
	const int32_t *pos;
};

struct hs_dev_attn {           /* cpu_kernels/attention.h's job, device pointers */
	int n, n_head, n_head_kv, head_dim;
	const float *q;
	size_t q_stride;
	const int32_t *q_pos;
	int kv_type;
	const uint8_t *k, *v;
	size_t k_cell, k_head, v_cell, v_head;
	int n_cells;
	const int32_t *cell_pos;
	int window;
	const float *sinks;
	float scale;
	float *out;
	size_t out_stride;
	void *scratch;             /* attn_scratch_bytes(n, n_head, n_head_kv, head_dim, n_cells) */
};

/* qwen35moe's Gated DeltaNet mixer of one sequence's n tokens, in order
 * (cpu_kernels/deltanet.h): the causal convolution of the in-projection
 * qkv with its state and SiLU into conv, hs__dn_prep's l2-normed q and k
 * heads and per-head decay g and beta b, the delta rule over the recurrent
 * state into out, then hs__dn_gnorm's gated norm of out with z.  Rows are
 * dense: C = (2 n_k_heads + n_v_heads) head_dim floats a token in qkv and
 * conv, n_v_heads head_dim in z and out, n_v_heads in alpha, beta, g, b.
 * One token or many give the same numbers up to float order (the CPU's
 * step and chunk forms). */
#define HS_DEV_DN_MAX_DIM 192 /* the CUDA kernel keeps a head's state in shared memory (147 KiB at 192) */
#define HS_DEV_DN_MAX_KC 8
struct hs_dev_dn {
	int n, n_k_heads, n_v_heads, head_dim, kc;
	const float *conv_w;       /* [C][kc] */
	const float *dt_bias, *a;  /* [n_v_heads] */
	const float *norm;         /* [head_dim] */
	float eps;
	const float *qkv, *z, *alpha, *beta;
	float *conv_state;         /* [kc - 1][C], updated */
	float *state;              /* [n_v_heads][head_dim][head_dim] (value row, key column), updated */
	float *conv, *g, *b;       /* work */
	float *out;
};

struct hs_dev_ops {
	const char *name;
	int (*open)(int index, hs_dev **out);
	void (*close)(hs_dev *d);
	const char *(*describe)(hs_dev *d); /* "sim (4.0 GiB, copies at 12.0 GB/s)", "NVIDIA H200" */
	int (*mem_info)(hs_dev *d, uint64_t *free_bytes, uint64_t *total_bytes);
	int (*alloc)(hs_dev *d, size_t bytes, void **ptr);
	void (*free)(hs_dev *d, void *ptr);
	int (*host_register)(hs_dev *d, void *ptr, size_t bytes, int read_only);
	int (*host_unregister)(hs_dev *d, void *ptr, size_t bytes);
	int (*queue_create)(hs_dev *d, hs_queue **out);
	void (*queue_destroy)(hs_queue *q);
	int (*queue_sync)(hs_queue *q);
	int (*copy_h2d)(hs_queue *q, void *dst, const void *src, size_t bytes);
	int (*copy_d2h)(hs_queue *q, void *dst, const void *src, size_t bytes);
	int (*copy_d2d)(hs_queue *q, void *dst, const void *src, size_t bytes);
	int (*zero)(hs_queue *q, void *dst, size_t bytes);
	int (*event_create)(hs_dev *d, hs_event **out);
	void (*event_destroy)(hs_event *e);
	int (*event_record)(hs_event *e, hs_queue *q);
	int (*queue_wait)(hs_queue *q, hs_event *e);
	int (*event_sync)(hs_event *e);
	int (*event_query)(hs_event *e);
	int (*event_elapsed_ms)(hs_event *start, hs_event *end, float *ms);
	/* x[n_rows][n_cols] f32 -> Q8_0 blocks (n_cols a multiple of 32) */
	int (*quantize)(hs_queue *q, const float *x, int n_rows, int n_cols, void *xq);
	/* 0 when ffn computes experts of this layout (its types, plain or
	 * row-interleaved rows), else -EINVAL saying what it takes: a layer
	 * the device cannot take stays on the CPU */
	int (*ffn_takes)(const struct hs_expert_pack *p, int n_embd, int n_ff);
	size_t (*ffn_scratch_bytes)(const struct hs_dev_ffn *f);
	int (*ffn)(hs_queue *q, const struct hs_dev_ffn *f);
	/* dense ops (NULL: none) */
	size_t (*matmul_scratch_bytes)(int type, int cols, int n);
	int (*matmul)(hs_queue *q, const struct hs_dev_matmul *m);
	int (*rmsnorm)(hs_queue *q, const struct hs_dev_norm *r);
	int (*rope)(hs_queue *q, const struct hs_dev_rope *r);
	int (*kv_store)(hs_queue *q, const struct hs_dev_kv_store *s);
	size_t (*attn_scratch_bytes)(int n, int n_head, int n_head_kv, int head_dim, int n_cells);
	int (*attention)(hs_queue *q, const struct hs_dev_attn *a);
	int (*add)(hs_queue *q, float *y, const float *x, size_t n); /* y += x */
	int (*swiglu)(hs_queue *q, float *g, const float *u, size_t n); /* g = silu(g) * u (dense.h hs__swiglu) */
	int (*deltanet)(hs_queue *q, const struct hs_dev_dn *d);       /* NULL: the mixer runs on the host */
};

/* The arguments of a deltanet op checked as every backend takes them:
 * 0, or -EINVAL with a message naming the bad one. */
int hs__dev_dn_check(const struct hs_dev_dn *d);

/* The backends: sim always; CUDA in CUDA builds, else NULL. */
extern const struct hs_dev_ops hs__dev_sim_ops;
const struct hs_dev_ops *hs__dev_cuda_ops(void);

/* sim only, for tests: throttle copies, slow a queue down (every item
 * waits delay_us before it runs). */
void hs__sim_set_link(hs_dev *d, double gbps, double latency_us);
void hs__sim_set_queue_delay(hs_queue *q, double delay_us);

/* ---- a device with the common rules on top ------------------------------- */

struct hs_pinned {
	const uint8_t *lo, *hi;
	size_t piece;            /* registered in pieces of this many bytes from lo */
};

struct hs_device {
	const struct hs_dev_ops *ops;
	hs_dev *dev;
	int n_pinned, cap_pinned;
	struct hs_pinned *pinned;
	size_t pin_chunk;        /* largest registration (1 GiB; tests make it small) */
};

/* Opens backend "sim" or "cuda" (NULL: $HOTSET_DEVICE, else cuda when a
 * device answers, else sim) device index.  -ENODEV with the reason. */
int hs__device_open(const char *backend, int index, struct hs_device **out);
void hs__device_close(struct hs_device *d);
/* Pins [ptr, ptr + bytes) for DMA (in registrations of at most pin_chunk
 * bytes); read_only for read-only mappings.  Unpin with the same range.
 * _units: the range is units of `unit` bytes from ptr (a layer's packed
 * experts), each copied on its own: no unit crosses a registration. */
int hs__device_pin(struct hs_device *d, void *ptr, size_t bytes, int read_only);
int hs__device_pin_units(struct hs_device *d, void *ptr, size_t bytes, size_t unit, int read_only);
int hs__device_unpin(struct hs_device *d, void *ptr, size_t bytes);
/* Whether [ptr, ptr + bytes) lies inside one registration of a pinned
 * range (a DMA copy cannot span two). */
int hs__device_is_pinned(const struct hs_device *d, const void *ptr, size_t bytes);
/* A host-to-device copy from pinned memory only (-EINVAL otherwise: a
 * pageable copy would stage and serialise). */
int hs__dev_copy_h2d(struct hs_device *d, hs_queue *q, void *dst, const void *src, size_t bytes);

/* ---- expert slots --------------------------------------------------------- */

/* A pool of equal device buffers, each holding one packed expert, with the
 * device-side table slot_of[E] (-1 = not here) kernels read experts through.
 * Uploads run on a copy queue; a slot is not overwritten before the kernels
 * that read it have finished (hs__slots_release records that point). */
struct hs_slots {
	struct hs_device *d;
	int n_slots, n_experts;
	size_t slot_bytes;
	uint8_t *pool;           /* device: n_slots * slot_bytes */
	int32_t *slot_of;        /* device: [n_experts] */
	int32_t *slot_of_host;   /* host mirror */
	int32_t *expert_in;      /* host: [n_slots], -1 = empty */
	int32_t *consts;         /* pinned host: 0, 1, ..., n_slots - 1, then -1 */
	hs_event **ready, **released;
	int *released_valid;
};

/* -ENOMEM when the pool does not fit (the caller falls back). */
int hs__slots_create(struct hs_device *d, int n_slots, int n_experts, size_t slot_bytes, hs_queue *q,
		    struct hs_slots **out);
void hs__slots_free(struct hs_slots *s);
/* Uploads expert `expert` (packed, at pinned host memory src) into slot:
 * copy_q first waits until the slot's last readers are done, evicts the
 * expert that was there (its table entry becomes -1), copies, points the
 * table at the slot and records `ready`; compute_q waits for it (NULL:
 * nothing waits; the caller checks `ready` before it launches kernels that
 * read the expert). */
int hs__slots_upload(struct hs_slots *s, int slot, int expert, const void *src, hs_queue *copy_q,
		    hs_queue *compute_q);
/* Empties slot (after its last readers): its expert is no longer found. */
int hs__slots_evict(struct hs_slots *s, int slot, hs_queue *copy_q);
/* After launching kernels on q that read slot: they must finish before the
 * slot is reused. */
int hs__slots_release(struct hs_slots *s, int slot, hs_queue *q);

#endif
