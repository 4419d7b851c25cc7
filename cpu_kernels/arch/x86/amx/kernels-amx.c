/* The AMX-INT8 tier: prefill tiles of row-interleaved experts and of plain
 * rows of the one-scale-a-block quant types on the tile unit (amx-body.h),
 * everything else from the AVX-512 VNNI tier.  The tier
 * is chosen only where CPUID, XCR0 bits 17/18 and the kernel's grant of the
 * tile data state all say yes (cpu-features.h); besides, every call checks
 * that its own thread may run tiles (hs__amx_thread_ok asks the kernel once
 * per thread) and takes the AVX-512 path where it may not, and each call
 * loads its tile configuration before the first tile instruction, since
 * the configuration belongs to the thread. */
#include "config.h"

#include <immintrin.h>
#include <pthread.h>

#include "cpu_kernels/arch/x86/avx512-vnni/avx512.h"
#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"

#define AMX_CONFIG(cfg) _tile_loadconfig(cfg)
#define AMX_LOAD(t, p, stride) _tile_loadd(t, p, stride)
#define AMX_ZERO(t) _tile_zero(t)
#define AMX_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#define AMX_STORE(t, p, stride) _tile_stored(t, p, stride)
#define AMX_RELEASE() _tile_release()

#include "cpu_kernels/arch/x86/amx/amx-body.h"

/* Below this many tokens a tile product (16 tokens wide) does more work
 * than AVX-512 VNNI does for the tokens there are.  A prediction from
 * instruction counts (about 90 vector instructions per 16-row block group
 * on tiles against 12 per token on AVX-512): not measured, as no machine
 * with AMX was at hand. */
#define AMX_MIN_TOKENS 8

static void tile_q_amx(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out);
/* Packed Q4_K (repack.h) from this many tokens on tiles (amx_tile_q4k_packed),
 * fewer in the AVX-512 tier's packed loop */
#define AMX_PACKED_K_MIN_TOKENS 16

static void tile_q_packed_amx(int type, const uint8_t *w, int r0, int r1, int ncols,
			      const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	if (type != HS_TYPE_MXFP4 && type != HS_TYPE_Q8_0) { /* Q4_K */
		if (nt < AMX_PACKED_K_MIN_TOKENS || type != HS_TYPE_Q4_K || !hs__amx_thread_ok())
			hs__avx512_tile_q_packed_vbmi(type, w, r0, r1, ncols, x, nt, out);
		else
			amx_tile_q4k_packed(w, r0, r1, ncols, x, nt, out, tile_q_amx);
		return;
	}
	if (nt < AMX_MIN_TOKENS || !hs__amx_thread_ok()) {
		hs__avx512_tile_q_packed_vbmi(type, w, r0, r1, ncols, x, nt, out);
		return;
	}
	/* whole tiles of 16 tokens, and a last one of AMX_MIN_TOKENS or more,
	 * on tiles; a smaller rest on AVX-512 */
	const int on_tiles = nt % AMX_TOKENS >= AMX_MIN_TOKENS ? nt : nt / AMX_TOKENS * AMX_TOKENS;
	amx_tile(type, w, r0, r1, ncols, x, on_tiles, out);
	if (on_tiles < nt)
		hs__avx512_tile_q_packed_vbmi(type, w, r0, r1, ncols, x + on_tiles, nt - on_tiles, out + on_tiles);
}

/* Plain rows of the types with one scale a block (Q4_K, Q5_K, IQ4_XS/NL,
 * Q4_0..Q5_1) on tiles from AMX_QX_MIN_TOKENS tokens on (amx_tile_qx, all
 * of them: a last partial tile costs less than decoding the rows again for
 * the rest); fewer tokens, the 16-value types, MXFP4 and Q8_0 rows and
 * refused threads the AVX-512 tier's way.  Both decode 16 rows once a
 * pass; the tiles save the dot products but not the decode, so they pay
 * only where enough token tiles share it.  On the 2-core Xeon VM, fused
 * FFN on the Qwen3 shape, 1 thread, AMX / AVX-512 GFLOP/s at 64 tokens an
 * expert: Q4_K 174 / 149, IQ4_XS 181 / 148, Q5_K 166 / 137, Q4_0 147 /
 * 134; on tiles at 8 tokens 5-15% slower, and Q6_K (two products a block,
 * for the halves' scales) 3-8% slower at 64 (docs/kernels.md).  From 24
 * rather than 48: at 512 tokens (32 an expert, a prompt's usual share) the
 * fused FFN went x1.03-1.13 by type, at 256 (16) unchanged. */
#define AMX_QX_MIN_TOKENS 24
/* Q4_K against activations with a scale per 256 values (amx_q4k_pass)
 * from one whole token tile: fused FFN on the Qwen3 shape at 256 tokens (16
 * an expert), 1 thread, 176 -> 181-185 GFLOP/s, 2 threads within the noise;
 * from 8 the 128-token case (8 an expert) lost 5-8% (docs/kernels.md) */
#define AMX_Q4K_MIN_TOKENS 16

static void tile_q_amx(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
		       const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int flags = hs__avx512_qx_flags(type);
	if (type == HS_TYPE_Q4_K && nt >= AMX_Q4K_MIN_TOKENS && nt < AMX_QX_MIN_TOKENS && hs__amx_thread_ok() &&
	    amx_q4k_shared(x, nt, ncols / HS_QK)) {
		amx_tile_qx(type, w, row_bytes, r0, r1, ncols, x, nt, out);
		return;
	}
	if (nt < AMX_QX_MIN_TOKENS || flags < 0 || (flags & HS_QX_HALVES) || !hs__amx_thread_ok()) {
		hs__avx512_tile_q(type, w, row_bytes, r0, r1, ncols, x, nt, out);
		return;
	}
	amx_tile_qx(type, w, row_bytes, r0, r1, ncols, x, nt, out);
}

/* Q4_K's and Q5_K's activations with a scale per 256 values, as ggml's
 * Q8_K: the tile then applies the block scales in integers (amx_q4k_pass;
 * on the 2-core Xeon VM the fused FFN at 32 and 64 tokens an expert went
 * x1.37-1.46 for Q4_K, x1.02-1.10 for Q5_K, whose scales take three
 * products a pair of blocks; Q5_K from 24 tokens, as at 16 it lost 1-6%;
 * docs/kernels.md); Q6_K's too, for the one-token rows (rows_qx1's
 * integer scales: the fused FFN at 1 token 0.60-0.64 -> 0.72-0.75 of read),
 * its tiles taking the per-block path as before */
static struct hs_kernel_ops ops = { "AMX-INT8",
				    NULL,
				    tile_q_amx,
				    tile_q_packed_amx,
				    hs__avx512_quantize_q8_k,
				    1u << HS_TYPE_Q4_K | 1u << HS_TYPE_Q5_K | 1u << HS_TYPE_Q6_K,
				    1u << HS_TYPE_Q4_K };
static pthread_once_t ops_once = PTHREAD_ONCE_INIT;

/* quantization is the AVX-512 tier's */
static void fill_ops(void)
{
	ops.quantize_q8_0 = hs__kernels_avx512_vnni()->quantize_q8_0;
}

const struct hs_kernel_ops *hs__kernels_amx(void)
{
	pthread_once(&ops_once, fill_ops);
	return &ops;
}
