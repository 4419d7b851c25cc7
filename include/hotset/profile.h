/* hotset/profile.h: machine profiles: measured or written rates of nodes and
 * GPUs.  Part of <hotset.h>: include that, not this file. */
#ifndef HOTSET_PROFILE_H
#define HOTSET_PROFILE_H
#ifndef HOTSET_H_INSIDE
#error "include <hotset.h>, which includes this header"
#endif

/* The CPU expert kernel's speed (the fused FFN) with `threads` threads on
 * one node, for experts of one type: MXFP4 on gpt-oss-120b's shape (2880 x
 * 2880, 4 of 128), every other type on Qwen3-30B-A3B's (2048 x 768, 8 of
 * 128).  Figures of 0 = not measured. */
struct hs_kernel_speed {
	int threads;
	int type;               /* ggml type id of the experts; 0 (F32, never measured) reads as
				   MXFP4, the one type of profiles written before types */
	double decode_gbps;     /* expert bytes per second at 1 token */
	double prefill_gflops;  /* at 512 tokens */
	double dense_gbps;      /* one large matrix of the type in plain rows (an attention or
				   output matrix) times one token, bytes per second */
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
	/* MXFP4 at ascending thread counts, then other types (`hotset tune`: with all cores) */
	struct hs_kernel_speed kernel[HS_MAX_KSPEED];
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

enum hs_tune_level { HS_TUNE_QUICK, HS_TUNE_DEFAULT, HS_TUNE_THOROUGH };

/* Measures this machine (t must describe this system): per node the read
 * bandwidth from every node, the CPU kernel's speed on MXFP4 experts per
 * thread count and on each of `types` with all the node's cores, and per
 * CUDA device its memory, copy and memory bandwidths.  types: NULL or
 * "all" = every quantized type hotset computes, "none" = MXFP4 only, else
 * ggml names separated by commas ("q4_K,q6_K").  Binds the calling thread
 * while it measures and restores it.  -EINVAL for a topology of another
 * machine or a type name hotset does not compute. */
int hs_profile_measure(const hs_topology *t, enum hs_tune_level level, const char *types, hs_progress_fn progress,
		       void *ctx, struct hs_profile *out);

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

#endif /* HOTSET_PROFILE_H */
