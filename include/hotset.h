/* hotset: runs the Mixture-of-Experts layers of large language models across
 * CPU and GPU on one machine.  This is the one public header.
 *
 * Conventions: every call that can fail returns 0 or a negative errno
 * (-EINVAL bad input, -ENOMEM, -ENODEV no such device, -EIO bad file), or a
 * NULL pointer; hs_last_error() then holds a one-line message naming the thing
 * and the limit.  The library never exits and never prints.
 */
#ifndef HOTSET_H
#define HOTSET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
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
 * e.g. "hwloc 2.9.0; AVX2 kernels: built, CPU has avx2 fma f16c; CUDA 13.0
 * (sm 75 80 86 89 90)".  Static string owned by the library. */
const char *hs_build_info(void);

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
 * hs_topology_free().  Errors: -EIO (missing or malformed file), -ENOMEM,
 * -EINVAL (a topology with no NUMA node or no PU). */
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
	const char *arch;            /* "gpt-oss" or "qwen3moe" */
	const char *name;            /* general.name, or "" */
	int n_layers;                /* {arch}.block_count */
	int n_moe_layers;            /* layers with expert tensors */
	int n_experts;               /* experts per layer */
	int n_used;                  /* experts per token */
	int n_embd;                  /* hidden size */
	int n_ff;                    /* an expert's intermediate size */
	int expert_type;             /* ggml type id of the expert matrices */
	const char *expert_type_name; /* "mxfp4", "q8_0", "f16", "bf16", "f32" */
	int has_bias;                /* experts carry f32 biases */
	uint64_t expert_weight_bytes; /* gate + up + down matrices of one expert */
	uint64_t expert_bias_bytes;  /* its three biases (0 without) */
	uint64_t layer_token_bytes;  /* n_used experts: what one token reads per layer */
	uint64_t layer_expert_bytes; /* all experts of one layer */
	uint64_t expert_bytes;       /* all experts of all layers */
	uint64_t router_bytes;       /* all routers (weights and biases) */
	uint64_t non_expert_bytes;   /* every other tensor, routers included */
	uint64_t file_bytes;
};

/* Where one expert's pieces lie in the file (byte offset, length).  Slices
 * are not page aligned. */
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
/* Whether layer is a MoE layer (0 <= layer < n_layers). */
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
 * OpenMP threads (<= 0: OpenMP's default).  Same arguments and errors as
 * hs_moe_ref(); allocates its scratch per call. */
int hs_moe_forward_cpu(const hs_model *m, int layer, int n, const float *x, const int32_t *ids,
		       const float *weights, float *y, int threads);
/* Name of the kernel set hs_moe_forward_cpu() uses: "AVX2" or "scalar reference". */
const char *hs_cpu_kernels_name(void);

/* The router and gating alone: ids[n][n_used], weights[n][n_used]. */
int hs_moe_route_ref(const hs_model *m, int layer, int n, const float *x, int32_t *ids, float *weights);

/* ---- arrays (.npy files, float32, C order) ------------------------------ */

/* Reads a float32 .npy file of shape (rows, cols) or (cols,) (one row).
 * *data is malloc'd, the caller frees it.  -EIO with a message naming the
 * file and what is wrong (dtype, order, shape, truncated, trailing bytes). */
int hs_npy_read_f32(const char *path, float **data, int64_t *rows, int64_t *cols);
/* Writes float32 [rows][cols] to path (through "<path>.part" and a rename). */
int hs_npy_write_f32(const char *path, const float *data, int64_t rows, int64_t cols);

#ifdef __cplusplus
}
#endif
#endif /* HOTSET_H */
