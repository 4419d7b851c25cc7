/* The parts of the CUDA backend the rest of the library sees, declared
 * without CUDA types; implemented by device-cuda.c in CUDA builds and by
 * device-cuda-stub.c otherwise. */
#ifndef HS_DEVICE_CUDA_H
#define HS_DEVICE_CUDA_H

#include <stddef.h>

/* The CUDA expert kernels' arithmetic run on the CPU over host memory
 * (gpu_kernels/moe.cu, hs__gpu_ffn_emulate): f as for a launch, but every
 * pointer a host pointer.  -ENOSYS in a build without CUDA. */
struct hs_dev_ffn;
int hs__cuda_ffn_emulate(const struct hs_dev_ffn *f, int tiled);
size_t hs__cuda_ffn_scratch_bytes(const struct hs_dev_ffn *f);

/* The CUDA dense ops' arithmetic on the CPU (gpu_kernels/dense.cu), every
 * pointer a host pointer, arguments checked as for a launch (-EINVAL).
 * matmul's path: 0 as a launch without cuBLAS picks, 1 the GEMV kernel
 * (at most 8 tokens), 2 the tile kernel, 3 what the cuBLAS path does to the
 * activations (rounded to the weights' 16-bit type; the product exact).
 * attention's n_split: 0 as a launch picks, else that many cell ranges
 * (scratch for them: n * n_head * n_split * (head_dim + 2) floats).
 * -ENOSYS in a build without CUDA. */
struct hs_dev_matmul;
struct hs_dev_norm;
struct hs_dev_rope;
struct hs_dev_kv_store;
struct hs_dev_attn;
int hs__cuda_matmul_emulate(const struct hs_dev_matmul *m, int path);
int hs__cuda_rmsnorm_emulate(const struct hs_dev_norm *r);
int hs__cuda_rope_emulate(const struct hs_dev_rope *r);
int hs__cuda_kv_store_emulate(const struct hs_dev_kv_store *s);
int hs__cuda_attention_emulate(const struct hs_dev_attn *a, int n_split);
int hs__cuda_add_emulate(float *y, const float *x, size_t n);
int hs__cuda_swiglu_emulate(float *g, const float *u, size_t n);
struct hs_dev_dn;
int hs__cuda_deltanet_emulate(const struct hs_dev_dn *d);

/* Whether cuBLAS can be used (it is opened at run time, not linked): 0
 * with the file it opened in why, or -ENOENT with the reason in why
 * (-ENOSYS without CUDA).  Opens it the first time. */
int hs__cuda_blas_status(char *why, size_t why_len);
/* How many matrix products of this process took each CUDA path, as one
 * line ("GEMV n, tile kernel n, cuBLAS n"). */
void hs__cuda_matmul_paths(char *buf, size_t len);

#endif
