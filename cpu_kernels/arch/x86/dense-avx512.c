/* AVX-512 (F, BW, VL, DQ) tier of the dense ops: the float matrix tile and
 * the attention block, where Zen 5's full-width FMA units do twice the
 * work per instruction and masked loads take the tails.  The other entries
 * are the AVX2 set's.
 * Compiled with those flags in a file of its own and used only when CPUID
 * and the OS say the CPU runs them (hs__dense_best()). */
#include "config.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "cpu_kernels/arch/x86/dense-x86.h"
#include "cpu_kernels/deltanet.h"
#include "cpu_kernels/attention.h"

/* 16 values of a row at column c, the first `keep` of them (mask) loaded
 * and the rest zero; type is a constant at each call. */
static inline __m512 load16(int type, const uint8_t *row, int c, __mmask16 keep)
{
	if (type == HS_TYPE_F16)
		return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(keep, row + 2 * (size_t)c));
	if (type == HS_TYPE_BF16) {
		const __m256i h = _mm256_maskz_loadu_epi16(keep, row + 2 * (size_t)c);
		return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
	}
	return _mm512_maskz_loadu_ps(keep, (const float *)(const void *)row + c);
}

/* (clang-format cannot lay out _Pragma loops) */
/* clang-format off */
/* NR rows (1..4) against NT tokens (1..4): up to 16 accumulators of 16
 * lanes, in registers. */
static inline __attribute__((always_inline)) void rows_tokens(int type, const uint8_t *w, size_t rb, int NR,
							       int ncols, const float *const *x, int NT,
							       float *const *out, int col)
{
	__m512 acc[4][4];
	int c = 0;

	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			acc[i][j] = _mm512_setzero_ps();
	for (; c < ncols; c += 16) {
		const __mmask16 keep = ncols - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ncols - c)) - 1);
		__m512 wv[4];
		_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
			wv[i] = load16(type, w + i * rb, c, keep);
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			__m512 xv = _mm512_maskz_loadu_ps(keep, x[j] + c);
			_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
				acc[i][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][j]);
		}
	}
	_Pragma("GCC unroll 4") for (int i = 0; i < NR; i++)
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
			out[j][col + i] = _mm512_reduce_add_ps(acc[i][j]);
}
/* clang-format on */

#define TILE_ROWS 4
#define TILE_F tile_tokens
#include "cpu_kernels/arch/x86/dense-tile.h"

/* Decode streams the weights from memory, where the AVX2 row loop keeps up
 * and the 512-bit one did not (2 threads: 46-53 GB/s against 49-59); the
 * 512-bit tile takes two or more tokens (F16 at 512 tokens: 200 GFLOP/s
 * on one thread against 98). */
static void tile_f_avx512(int type, const uint8_t *w, size_t rb, int r0, int r1, int ncols, const float *const *x,
			  int nt, float *const *out)
{
	if (nt == 1)
		hs__tile_f_avx2(type, w, rb, r0, r1, ncols, x, nt, out);
	else
		tile_tokens(type, w, rb, r0, r1, ncols, x, nt, out);
}

/* ---- attention ----------------------------------------------------------------- */

/* e^x as exp256 in the AVX2 file: 2^n p(r), degree 6, relative error
 * < 3e-7; 0 below -87 (and for -inf). */
static inline __m512 exp512(__m512 x)
{
	const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
	x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.0f)), _mm512_set1_ps(-87.0f));
	__m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
					_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
	__m512 p = _mm512_set1_ps(1.0f / 720);
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
	__m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
	return _mm512_maskz_mov_ps(keep, _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e)));
}

/* (clang-format cannot lay out _Pragma loops) */
/* clang-format off */
/* Lane r of the result is the sum of the lanes of a[r], r < 16: a tree of
 * 128-bit and in-lane shuffles (15 adds, 30 shuffles) and one permute. */
static inline __m512 hsum16(const __m512 *a)
{
	__m512 b[8], c[4], d0, d1, e;
	_Pragma("GCC unroll 8") for (int i = 0; i < 8; i++) /* quarters 0, 1: a[2i]; 2, 3: a[2i + 1] */
		b[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
				     _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xee));
	_Pragma("GCC unroll 4") for (int j = 0; j < 4; j++) /* quarter q: four partial sums of a[4j + q] */
		c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * j], b[2 * j + 1], 0x88),
				     _mm512_shuffle_f32x4(b[2 * j], b[2 * j + 1], 0xdd));
	d0 = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], 0x88), _mm512_shuffle_ps(c[0], c[1], 0xdd));
	d1 = _mm512_add_ps(_mm512_shuffle_ps(c[2], c[3], 0x88), _mm512_shuffle_ps(c[2], c[3], 0xdd));
	e = _mm512_add_ps(_mm512_shuffle_ps(d0, d1, 0x88), _mm512_shuffle_ps(d0, d1, 0xdd));
	/* lane 4q + j of e holds a[q + 4j] */
	return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), e);
}
/* clang-format on */

/* The first `len` (<= 16) lanes of a mask. */
static inline __mmask16 lanes(int len)
{
	return len >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << len) - 1);
}

/* One K or V row (F16, or Q8_0 blocks) to f32; D a multiple of 8. */
static inline __attribute__((always_inline)) void kv_row(int kv_type, const uint8_t *src, float *dst, int D)
{
	int d = 0;

	if (kv_type == HS_TYPE_Q8_0) {
		for (int b = 0; b < D / HS_QK; b++) {
			const struct hs_block_q8_0 *blk = (const struct hs_block_q8_0 *)(const void *)src + b;
			const __m512 scale = _mm512_set1_ps(_cvtsh_ss(blk->d));
			for (int k = 0; k < HS_QK; k += 16) {
				const __m128i q = _mm_loadu_si128((const __m128i *)(const void *)(blk->qs + k));
				_mm512_storeu_ps(dst + b * HS_QK + k,
						 _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), scale));
			}
		}
		return;
	}
	for (; d + 16 <= D; d += 16)
		_mm512_storeu_ps(dst + d,
				 _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * d))));
	if (d < D) /* the last 8 */
		_mm256_storeu_ps(dst + d,
				 _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(src + 2 * d))));
}

/* (clang-format cannot lay out _Pragma loops) */
/* clang-format off */
/* As the AVX2 block (dense-avx2.c), 16 lanes wide: K and V rows of the
 * block's cells converted to f32 once for all g query heads; per head the
 * scores of 16 cells at a time (16 accumulators, one transposing sum),
 * the online softmax update, then V accumulated into o 64 values (4
 * registers, two cells at a time) at a time.  head_dim a multiple of 8 (the last 8 masked). */
static void attend_block(const struct hs_attn_tile *t, const int *idx, int nv, int B, float *kf, float *vf,
			 float *sc)
{
	const int D = t->head_dim, nv16 = (nv + 15) & ~15;
	const __m512 scale = _mm512_set1_ps(t->scale), ninf = _mm512_set1_ps(-INFINITY);

	for (int r = 0; r < nv; r++) {
		kv_row(t->kv_type, t->k + (size_t)idx[r] * t->k_cell, kf + (size_t)r * D, D);
		kv_row(t->kv_type, t->v + (size_t)idx[r] * t->v_cell, vf + (size_t)r * D, D);
	}
	if (nv16 > nv)
		memset(kf + (size_t)nv * D, 0, sizeof(float) * D * (nv16 - nv));
	for (int i = 0; i < t->g; i++) {
		const float *q = t->q + (size_t)i * D;
		float *s = sc + (size_t)i * B, *o = t->o + (size_t)i * D;
		__m512 mv = ninf;
		for (int c16 = 0; c16 < nv16; c16 += 16) {
			__m512 acc[16];
			_Pragma("GCC unroll 16") for (int r = 0; r < 16; r++)
				acc[r] = _mm512_setzero_ps();
			int d = 0;
			for (; d + 16 <= D; d += 16) {
				const __m512 qv = _mm512_loadu_ps(q + d);
				_Pragma("GCC unroll 16") for (int r = 0; r < 16; r++)
					acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(kf + (size_t)(c16 + r) * D + d), qv, acc[r]);
			}
			if (d < D) { /* the last 8 */
				const __m512 qv = _mm512_maskz_loadu_ps(0xff, q + d);
				_Pragma("GCC unroll 16") for (int r = 0; r < 16; r++)
					acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(0xff, kf + (size_t)(c16 + r) * D + d), qv, acc[r]);
			}
			/* lanes past nv (padding) get -inf */
			const __m512 sv = _mm512_mask_mul_ps(ninf, lanes(nv - c16), hsum16(acc), scale);
			mv = _mm512_max_ps(mv, sv);
			_mm512_storeu_ps(s + c16, sv);
		}
		const float mb = _mm512_reduce_max_ps(mv), m_new = mb > t->m[i] ? mb : t->m[i];
		const float alpha = t->m[i] == -INFINITY ? 0.0f : expf(t->m[i] - m_new);
		const __m512 mn = _mm512_set1_ps(m_new);
		__m512 lsum = _mm512_setzero_ps();
		for (int c16 = 0; c16 < nv16; c16 += 16) {
			__m512 p = exp512(_mm512_sub_ps(_mm512_loadu_ps(s + c16), mn));
			lsum = _mm512_add_ps(lsum, p);
			_mm512_storeu_ps(s + c16, p);
		}
		t->l[i] = t->l[i] * alpha + _mm512_reduce_add_ps(lsum);
		t->m[i] = m_new;
		const __m512 av = _mm512_set1_ps(alpha);
		int d = 0;
		for (; d + 64 <= D; d += 64) {
			/* two cells at a time into two sets: eight FMA chains */
			__m512 ov[4], ow[4];
			_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
				ov[k] = _mm512_mul_ps(_mm512_loadu_ps(o + d + 16 * k), av);
				ow[k] = _mm512_setzero_ps();
			}
			int r = 0;
			for (; r + 2 <= nv; r += 2) {
				const __m512 p0 = _mm512_set1_ps(s[r]), p1 = _mm512_set1_ps(s[r + 1]);
				const float *v0 = vf + (size_t)r * D + d, *v1 = v0 + D;
				_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) {
					ov[k] = _mm512_fmadd_ps(_mm512_loadu_ps(v0 + 16 * k), p0, ov[k]);
					ow[k] = _mm512_fmadd_ps(_mm512_loadu_ps(v1 + 16 * k), p1, ow[k]);
				}
			}
			if (r < nv) {
				const __m512 p0 = _mm512_set1_ps(s[r]);
				_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
					ov[k] = _mm512_fmadd_ps(_mm512_loadu_ps(vf + (size_t)r * D + d + 16 * k), p0, ov[k]);
			}
			_Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)
				_mm512_storeu_ps(o + d + 16 * k, _mm512_add_ps(ov[k], ow[k]));
		}
		for (; d < D; d += 16) {
			const __mmask16 m = lanes(D - d);
			__m512 ov = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + d), av);
			for (int r = 0; r < nv; r++)
				ov = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, vf + (size_t)r * D + d), _mm512_set1_ps(s[r]), ov);
			_mm512_mask_storeu_ps(o + d, m, ov);
		}
	}
}
/* clang-format on */

#define ATTEND hs__attend_avx512_blocks
#define ATTEND_B(D) ((HS_ATTN_BLOCK_VALUES / (D) < 32 ? HS_ATTN_BLOCK_VALUES / (D) : 32) & ~15)
#include "cpu_kernels/arch/x86/dense-attend.h"

/* Heads over 256 values leave fewer than 16 cells per block: the AVX2
 * attend takes them. */
static void attend_avx512(const struct hs_attn_tile *t)
{
	if (t->head_dim > HS_ATTN_BLOCK_VALUES / 16)
		hs__attend_avx2(t);
	else
		hs__attend_avx512_blocks(t);
}

/* ---- attention of many tokens (prefill) -----------------------------------------
 * attend_block converts a block's K and V rows for one token and sums 16
 * scores with a transposing tree per head: on a Zen 4 core prefill ran at a
 * third of the FMA peak.  Here a block of 16 cells is converted once for
 * all the span's tokens, K turned so a register holds one value of the 16
 * cells: a head's 16 scores are then head_dim FMAs with the query value
 * broadcast (4 heads share each K load, two chains each) and no sums across
 * lanes; V is accumulated over the cells each token sees (its mask's bits),
 * so rows a token does not see never reach it.  head_dim 64 or 128 (the
 * models'); other widths go per token. */
#define SPAN_CELLS 16
#define SPAN_MAX_D 128

struct span_block {
	_Alignas(64) float kt[SPAN_MAX_D * SPAN_CELLS]; /* value d of cell r at kt[d * 16 + r] */
	_Alignas(64) float vf[SPAN_CELLS * SPAN_MAX_D]; /* cell r's V row at vf[r * D] */
	_Alignas(64) float kf[SPAN_CELLS * SPAN_MAX_D];
	__m512i pos; /* the cells' positions, INT32_MAX past the block's end */
};

/* The 16 scores of NH heads (from head j of token row q) into s[]. */
static inline __attribute__((always_inline)) void span_scores(const float *q, int D, int NH, const float *kt,
							       __m512 *s)
{
	__m512 a[4], b[4];
	_Pragma("GCC unroll 4") for (int h = 0; h < NH; h++)
		a[h] = b[h] = _mm512_setzero_ps();
	for (int d = 0; d < D; d += 2) {
		const __m512 k0 = _mm512_load_ps(kt + d * SPAN_CELLS), k1 = _mm512_load_ps(kt + (d + 1) * SPAN_CELLS);
		_Pragma("GCC unroll 4") for (int h = 0; h < NH; h++) {
			a[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * D + d]), k0, a[h]);
			b[h] = _mm512_fmadd_ps(_mm512_set1_ps(q[h * D + d + 1]), k1, b[h]);
		}
	}
	_Pragma("GCC unroll 4") for (int h = 0; h < NH; h++)
		s[h] = _mm512_add_ps(a[h], b[h]);
}

/* One head's online-softmax update from its 16 masked scores sv. */
static inline __attribute__((always_inline)) void span_update(__m512 sv, __mmask16 vis, int D, const float *vf,
							       float *m, float *l, float *o)
{
	_Alignas(64) float p[SPAN_CELLS];
	const float mb = _mm512_reduce_max_ps(sv), m_new = mb > *m ? mb : *m;
	const float alpha = *m == -INFINITY ? 0.0f : expf(*m - m_new);
	const __m512 pv = exp512(_mm512_sub_ps(sv, _mm512_set1_ps(m_new)));
	*l = *l * alpha + _mm512_reduce_add_ps(pv);
	*m = m_new;
	_mm512_store_ps(p, pv);
	const __m512 av = _mm512_set1_ps(alpha);
	__m512 ov[SPAN_MAX_D / 16];
	_Pragma("GCC unroll 8") for (int k = 0; k < D / 16; k++)
		ov[k] = _mm512_mul_ps(_mm512_loadu_ps(o + 16 * k), av);
	for (unsigned bits = vis; bits; bits &= bits - 1) {
		const int r = __builtin_ctz(bits);
		const __m512 pr = _mm512_set1_ps(p[r]);
		_Pragma("GCC unroll 8") for (int k = 0; k < D / 16; k++)
			ov[k] = _mm512_fmadd_ps(_mm512_load_ps(vf + r * D + 16 * k), pr, ov[k]);
	}
	_Pragma("GCC unroll 8") for (int k = 0; k < D / 16; k++)
		_mm512_storeu_ps(o + 16 * k, ov[k]);
}

static inline __attribute__((always_inline)) void span_heads(const struct hs_attn_span *t, const struct span_block *b,
							      int i, __mmask16 vis, int D)
{
	const __m512 scale = _mm512_set1_ps(t->scale), ninf = _mm512_set1_ps(-INFINITY);
	const float *q = t->q + (size_t)i * t->q_stride;
	for (int j = 0; j < t->g; j += 4) {
		__m512 s[4];
		const int nh = t->g - j < 4 ? t->g - j : 4;
		switch (nh) {
		case 4: span_scores(q + (size_t)j * D, D, 4, b->kt, s); break;
		case 3: span_scores(q + (size_t)j * D, D, 3, b->kt, s); break;
		case 2: span_scores(q + (size_t)j * D, D, 2, b->kt, s); break;
		default: span_scores(q + (size_t)j * D, D, 1, b->kt, s); break;
		}
		for (int h = 0; h < nh; h++) {
			const size_t st = (size_t)i * t->g + j + h;
			span_update(_mm512_mask_mul_ps(ninf, vis, s[h], scale), vis, D, b->vf, t->m + st, t->l + st,
				    t->o + st * D);
		}
	}
}

static void span_block(const struct hs_attn_span *t, const int *idx, int nv, struct span_block *b)
{
	const int D = t->head_dim;
	_Alignas(64) int32_t pos[SPAN_CELLS];

	for (int r = 0; r < SPAN_CELLS; r++) {
		if (r < nv) {
			kv_row(t->kv_type, t->k + (size_t)idx[r] * t->k_cell, b->kf + r * D, D);
			kv_row(t->kv_type, t->v + (size_t)idx[r] * t->v_cell, b->vf + r * D, D);
			pos[r] = t->cell_pos[idx[r]];
		} else {
			memset(b->kf + r * D, 0, sizeof(float) * (size_t)D);
			memset(b->vf + r * D, 0, sizeof(float) * (size_t)D);
			pos[r] = INT32_MAX;
		}
	}
	const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
						_mm512_set1_epi32(D));
	for (int d = 0; d < D; d++)
		_mm512_store_ps(b->kt + d * SPAN_CELLS, _mm512_i32gather_ps(rows, b->kf + d, 4));
	b->pos = _mm512_load_si512(pos);
	for (int i = 0; i < t->n; i++) {
		const __mmask16 vis = _mm512_cmp_epi32_mask(b->pos, _mm512_set1_epi32(t->pos_lo[i]), _MM_CMPINT_NLT) &
				      _mm512_cmp_epi32_mask(b->pos, _mm512_set1_epi32(t->pos_hi[i]), _MM_CMPINT_LE);
		if (!vis)
			continue;
		if (D == 64)
			span_heads(t, b, i, vis, 64);
		else
			span_heads(t, b, i, vis, 128);
	}
}

static void attend_span_avx512(const struct hs_attn_span *t)
{
	if (t->head_dim != 64 && t->head_dim != 128) {
		hs__attend_span_tokens(t, attend_avx512);
		return;
	}
	int32_t lo = INT32_MAX, hi = INT32_MIN;
	for (int i = 0; i < t->n; i++) {
		lo = t->pos_lo[i] < lo ? t->pos_lo[i] : lo;
		hi = t->pos_hi[i] > hi ? t->pos_hi[i] : hi;
	}
	struct span_block b;
	int idx[SPAN_CELLS], nv = 0;
	for (int c = t->c0; c < t->c1; c++) {
		const int32_t p = t->cell_pos[c];
		if (p >= lo && p <= hi && p >= 0)
			idx[nv++] = c;
		if (nv == SPAN_CELLS) {
			span_block(t, idx, nv, &b);
			nv = 0;
		}
	}
	if (nv)
		span_block(t, idx, nv, &b);
}

/* the entries without an AVX-512 version are the AVX2 set's */
static const struct hs_dense_ops avx512_ops = {
	"AVX-512",         tile_f_avx512,   hs__dequant_row_avx2, hs__rmsnorm_row_avx2,
	hs__rope_row_avx2, hs__to_f16_avx2, attend_avx512, attend_span_avx512, hs__dn_chunk_avx2,
	hs__xor_read_avx2,
};

const struct hs_dense_ops *hs__dense_avx512(void)
{
	return &avx512_ops;
}
