/* The CUDA backend of a build without CUDA (--without-cuda or no nvcc):
 * there is no ops table, and the kernel emulation says why. */
#include "config.h"

#include <stdio.h>

#include "base/error.h"
#include "device/device-cuda.h"
#include "device/device.h"

const struct hs_dev_ops *hs__dev_cuda_ops(void)
{
	return NULL;
}

static int no_cuda(void)
{
	return hs__error(ENOSYS, "CUDA kernel emulation: hotset was built without CUDA");
}

int hs__cuda_ffn_emulate(const struct hs_dev_ffn *f, int tiled)
{
	(void)f; (void)tiled;
	return no_cuda();
}

size_t hs__cuda_ffn_scratch_bytes(const struct hs_dev_ffn *f)
{
	(void)f;
	return 0;
}

int hs__cuda_matmul_emulate(const struct hs_dev_matmul *m, int path)
{
	(void)m; (void)path;
	return no_cuda();
}

int hs__cuda_rmsnorm_emulate(const struct hs_dev_norm *r)
{
	(void)r;
	return no_cuda();
}

int hs__cuda_rope_emulate(const struct hs_dev_rope *r)
{
	(void)r;
	return no_cuda();
}

int hs__cuda_kv_store_emulate(const struct hs_dev_kv_store *s)
{
	(void)s;
	return no_cuda();
}

int hs__cuda_attention_emulate(const struct hs_dev_attn *a, int n_split)
{
	(void)a; (void)n_split;
	return no_cuda();
}

int hs__cuda_add_emulate(float *y, const float *x, size_t n)
{
	(void)y; (void)x; (void)n;
	return no_cuda();
}

int hs__cuda_swiglu_emulate(float *g, const float *u, size_t n)
{
	(void)g; (void)u; (void)n;
	return no_cuda();
}

int hs__cuda_deltanet_emulate(const struct hs_dev_dn *d)
{
	(void)d;
	return no_cuda();
}

int hs__cuda_blas_status(char *why, size_t why_len)
{
	if (why && why_len)
		snprintf(why, why_len, "hotset was built without CUDA");
	return -ENOSYS;
}

void hs__cuda_matmul_paths(char *buf, size_t len)
{
	if (buf && len)
		snprintf(buf, len, "no CUDA products (hotset was built without CUDA)");
}
