/* hotset/plan.h: the planner: model descriptions, options, plans and their
 * JSON.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_PLAN_H
#define HOTSET_PLAN_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

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
	/* the expert matrices' types over all MoE layers, most bytes first (a quantization
	 * mix has several, Q4_K_M: q4_K and q6_K): what the CPU kernel's speed is priced
	 * with (n_mix 0: all expert_type) */
	int n_mix;
	int mix_type[HS_MAX_MIX];
	uint64_t mix_bytes[HS_MAX_MIX]; /* weight bytes of that type (a type past the
					   HS_MAX_MIX-th counts with the last) */
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
	uint64_t recurrent_state_bytes; /* those states for one sequence (where the dense part runs) */
	/* its forward pass's buffers of the DeltaNet mixer and the gated attention (9 of them,
	 * in the same memory): floats per ubatch token */
	uint64_t recurrent_ubatch_floats;
};

/* Model descriptions of the known models (the shapes the `gen` presets
 * write, with the published file sizes for the non-expert bytes).
 * -EINVAL for an unknown name (message lists the names). */
int hs_model_desc_preset(const char *name, struct hs_model_desc *out);
/* The description of an opened model file. */
int hs_model_desc_from_model(const hs_model *m, struct hs_model_desc *out);

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

#endif /* HOTSET_PLAN_H */
