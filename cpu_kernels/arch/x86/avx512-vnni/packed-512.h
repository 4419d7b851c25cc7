/* The row-interleaved expert tile on 512-bit registers (repack.h's
 * layout: MXFP4 and Q8_0 in PACKED_GROUP, Q4_K in PACKED_KGROUP), included
 * twice by kernels-avx512-vnni.c: PACKED_NAME is the
 * function it defines, PACKED_ATTR its target attribute, PACKED_VBMI 1
 * decodes MXFP4 with AVX-512 VBMI's byte permutes.
 *
 * Why two: at one token the MXFP4 decode is half of a core's work per
 * byte, and memory only keeps up with the core while the work leaves it
 * time to have loads in flight.  VBMI's vpermb reads the low 6 bits of
 * each index byte, so with the 16 values repeated 4 times in the table a
 * unit's low nibbles need no mask, and vpmultishiftqb (a shuffle-port op,
 * where the mask and the shift both took the port the vpdpbusd need)
 * brings the high nibbles down: 3 ops for a unit's 128 values instead of
 * 5.  On the Xeon VM (Sapphire Rapids) one core's decode of 1 GiB went
 * from 0.79-0.80 to 0.84-0.86 of the read probe, and 0.85-0.87 with the
 * L1 prefetch below.  Every CPU with AMX has VBMI (the AMX tier asks for
 * both); the AVX-512 VNNI tier keeps the mask and shift (Cascade Lake has
 * no VBMI; Zen 4 has it but was not measured). */

#define PACKED_CAT2(a, b) a##b
#define PACKED_CAT(a, b) PACKED_CAT2(a, b)
#define PACKED_GROUP PACKED_CAT(PACKED_NAME, _group)
#define PACKED_KGROUP PACKED_CAT(PACKED_NAME, _kgroup)
#define PACKED_K PACKED_CAT(PACKED_NAME, _k)
#define PACKED_KPF PACKED_CAT(PACKED_NAME, _kpf)

/* A 16-row group against NT (1..8) tokens over nb block groups.  Two int32
 * chains per token while registers allow (NT <= 4), so the dependent
 * vpdpbusd of one block form two chains of four.  MXFP4: units decoded
 * (value + 12), low nibbles with the token's bytes 4u.., high ones with
 * 16 + 4u..; Q8_0: units as w + 128 (xor 0x80). */
static inline __attribute__((always_inline)) PACKED_ATTR void
PACKED_GROUP(int type, const uint8_t *g, int nb, const struct hs_block_q8_0 *const *x, const float *dx,
	     const int32_t *corr, int NT, float *const *out, int col, const uint8_t *end)
{
	const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)plus12));
	const __m512i m4 = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
	/* byte k of each quadword from bit 8k + 4: the high nibble in the
	 * low 4 bits (vpermb ignores the next byte's bits above them) */
	const __m512i high = _mm512_set1_epi64(0x3c342c241c140c04LL);
	/* a constant, so that the prefetches below unroll (a call per group to
	 * hs__type_block_bytes left a loop of them, a branch each line) */
	const size_t gbb = HS_PACK_ROWS * (type == HS_TYPE_MXFP4 ? sizeof(struct hs_block_mxfp4)
								  : sizeof(struct hs_block_q8_0)),
		     ahead = PREFETCH_AHEAD_512, near = hs__prefetch_near;
	__m512 acc[TOKENS];

	(void)m4;
	(void)high;
	_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++)
		acc[j] = _mm512_setzero_ps();
	for (int b = 0; b < nb; b++) {
		const uint8_t *bg = g + (size_t)b * gbb;
		__m512i a0[TOKENS], a1[TOKENS];
		__m512 ws;
		if (NT <= 2 && bg + ahead + gbb <= end) {
			if (hs__prefetch_l2) { /* cpu-features.h: into L2 on Intel, */
				_Pragma("GCC unroll 16") for (size_t o = 0; o < gbb; o += 64)
					_mm_prefetch((const char *)bg + ahead + o, _MM_HINT_T1);
				/* and from there into L1 a little ahead */
				if (near)
					_Pragma("GCC unroll 16") for (size_t o = 0; o < gbb; o += 64)
						_mm_prefetch((const char *)bg + near + o, _MM_HINT_T0);
			} else {
				_Pragma("GCC unroll 16") for (size_t o = 0; o < gbb; o += 64)
					_mm_prefetch((const char *)bg + ahead + o, _MM_HINT_T0);
			}
		}
		_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
			a0[j] = _mm512_set1_epi32(corr[j * nb + b]);
			a1[j] = _mm512_setzero_si512();
		}
		if (type == HS_TYPE_MXFP4) {
			_Pragma("GCC unroll 4") for (int u = 0; u < 4; u++) {
				__m512i v = _mm512_loadu_si512((const void *)(bg + 16 + 64 * u));
				/* one load into a register: gcc otherwise folds it into
				 * both the mask and the shift, two loads of each line */
				__asm__("" : "+v"(v));
				__m512i lo, hi;
#if PACKED_VBMI
				lo = _mm512_permutexvar_epi8(v, lut);
				hi = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(high, v), lut);
#else
				lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v, m4));
				hi = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
#endif
				_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
					const uint8_t *xq = (const uint8_t *)x[j][b].qs;
					__m512i xh = _mm512_set1_epi32(load32(xq + 16 + 4 * u));
					a0[j] = _mm512_dpbusd_epi32(a0[j], lo, _mm512_set1_epi32(load32(xq + 4 * u)));
					if (NT <= 4)
						a1[j] = _mm512_dpbusd_epi32(a1[j], hi, xh);
					else
						a0[j] = _mm512_dpbusd_epi32(a0[j], hi, xh);
				}
			}
			/* e - 128 as float: vscalefps then makes 2^(e - 128) * dx exactly */
			ws = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)bg))),
					   _mm512_set1_ps(128.0f));
		} else {
			_Pragma("GCC unroll 8") for (int u = 0; u < 8; u++) {
				__m512i w = _mm512_xor_si512(_mm512_loadu_si512((const void *)(bg + 32 + 64 * u)), flip);
				_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
					__m512i xb = _mm512_set1_epi32(load32((const uint8_t *)x[j][b].qs + 4 * u));
					if (NT <= 4 && (u & 1))
						a1[j] = _mm512_dpbusd_epi32(a1[j], w, xb);
					else
						a0[j] = _mm512_dpbusd_epi32(a0[j], w, xb);
				}
			}
			ws = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)bg));
		}
		_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++) {
			const __m512i s = NT <= 4 ? _mm512_add_epi32(a0[j], a1[j]) : a0[j];
			const __m512 d = _mm512_set1_ps(dx[j * nb + b]);
			const __m512 sc = type == HS_TYPE_MXFP4 ? _mm512_scalef_ps(d, ws) : _mm512_mul_ps(ws, d);
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc[j]);
		}
	}
	_Pragma("GCC unroll 8") for (int j = 0; j < NT; j++)
		_mm512_storeu_ps(out[j] + col, acc[j]);
}

/* One line's prefetch: ahead into L2 (Intel) and near into L1, or ahead
 * into L1 */
static inline __attribute__((always_inline)) void PACKED_KPF(const uint8_t *line, size_t ahead, size_t near)
{
	if (hs__prefetch_l2) {
		_mm_prefetch((const char *)line + ahead, _MM_HINT_T1);
		if (near)
			_mm_prefetch((const char *)line + near, _MM_HINT_T0);
	} else {
		_mm_prefetch((const char *)line + ahead, _MM_HINT_T0);
	}
}

/* Q4_K: a 16-row group against NT (1..4) tokens over nsb super-blocks, the
 * tokens with one scale per 256 values (the tier's quantize_q8_k): ds the
 * token's scale of super-block u at [j * nsb + u], bs the byte sums of its
 * 32-value blocks at [(j * nsb + u) * 8 + s].  Per super-block the 16 rows'
 * 6-bit scales and mins are unpacked at once (three loads of the 12 planes,
 * a few masks and shifts, onto the stack as bytes), so that scale s of the
 * 16 rows is one vpmovzxbd: int32 lanes with the scale in the low word.
 * Units hold block 2p's values in their low nibbles and 2p + 1's in their
 * high ones; four units' vpdpbusd sums (at most 4 x 4 x 15 x 128, an int16)
 * go times their block's scale into one int32 sum by one vpdpwssd; the mins
 * times the token's block sums likewise into another; a super-block ends in
 * two converts and two FMAs by d d_x and dmin d_x.  About 16 vector ops a
 * row and super-block at one token, where the plain rows take about 35
 * (docs/kernels.md). */
static inline __attribute__((always_inline)) PACKED_ATTR void
PACKED_KGROUP(const uint8_t *g, int nsb, const struct hs_block_q8_0 *const *x, const float *ds, const int32_t *bs,
	      int NT, float *const *out, int col, const uint8_t *end)
{
	const size_t gbb = HS_PACK_ROWS * sizeof(struct hs_block_q4_k), ahead = PREFETCH_AHEAD_512,
		     near = hs__prefetch_near;
	const __m512i m4 = _mm512_set1_epi8(0x0f), m63 = _mm512_set1_epi8(63), m30 = _mm512_set1_epi8(0x30);
	const __m512i lut = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
	const __m512i high = _mm512_set1_epi64(0x3c342c241c140c04LL);
	__m512 acc[4];

	(void)lut;
	(void)high;
	_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
		acc[j] = _mm512_setzero_ps();
	for (int u = 0; u < nsb; u++) {
		const uint8_t *bg = g + (size_t)u * gbb;
		_Alignas(64) uint8_t sm[256]; /* scales 0-7, then mins 0-7: 16 rows' bytes each */
		__m512i ai[4], mi[4];
		/* as the 32-value types' groups, but a line at a time beside the
		 * loads (below): 72 prefetches in a burst a super-block held the
		 * stream at the speed of the plain rows, 0.7 of read */
		const int pf = NT <= 2 && bg + ahead + gbb <= end;
		if (pf)
			_Pragma("GCC unroll 4") for (size_t o = 0; o < 256; o += 64)
				PACKED_KPF(bg + o, ahead, near);
		{ /* planes k of the 12 scale bytes: A = 0-3, B = 4-7, C = 8-11 */
			const __m512i A = _mm512_loadu_si512((const void *)(bg + 64));
			const __m512i B = _mm512_loadu_si512((const void *)(bg + 128));
			const __m512i C = _mm512_loadu_si512((const void *)(bg + 192));
			_mm512_store_si512((void *)sm, _mm512_and_si512(A, m63));
			_mm512_store_si512((void *)(sm + 64),
					   _mm512_or_si512(_mm512_and_si512(C, m4),
							   _mm512_and_si512(_mm512_srli_epi16(A, 2), m30)));
			_mm512_store_si512((void *)(sm + 128), _mm512_and_si512(B, m63));
			_mm512_store_si512((void *)(sm + 192),
					   _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(C, 4), m4),
							   _mm512_and_si512(_mm512_srli_epi16(B, 2), m30)));
		}
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			ai[j] = _mm512_setzero_si512();
			mi[j] = _mm512_setzero_si512();
		}
		_Pragma("GCC unroll 4") for (int p = 0; p < 4; p++) {
			const __m512i s0 = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(sm + 32 * p)));
			const __m512i s1 = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(sm + 32 * p + 16)));
			_Pragma("GCC unroll 2") for (int h = 0; h < 2; h++) {
				__m512i p0[4], p1[4];
				_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
					p0[j] = _mm512_setzero_si512();
					p1[j] = _mm512_setzero_si512();
				}
				_Pragma("GCC unroll 4") for (int q = 0; q < 4; q++) {
					const int un = 8 * p + 4 * h + q;
					if (pf)
						PACKED_KPF(bg + 256 + 64 * un, ahead, near);
					__m512i v = _mm512_loadu_si512((const void *)(bg + 256 + 64 * un)), lo, hi;
					__asm__("" : "+v"(v));
#if PACKED_VBMI
					lo = _mm512_permutexvar_epi8(v, lut);
					hi = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(high, v), lut);
#else
					lo = _mm512_and_si512(v, m4);
					hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
#endif
					_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
						const struct hs_block_q8_0 *xb = x[j] + 8 * u + 2 * p;
						p0[j] = _mm512_dpbusd_epi32(p0[j], lo,
									    _mm512_set1_epi32(load32(xb[0].qs + 16 * h + 4 * q)));
						p1[j] = _mm512_dpbusd_epi32(p1[j], hi,
									    _mm512_set1_epi32(load32(xb[1].qs + 16 * h + 4 * q)));
					}
				}
				_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
					ai[j] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(ai[j], p0[j], s0), p1[j], s1);
			}
		}
		_Pragma("GCC unroll 8") for (int s = 0; s < 8; s++) {
			const __m512i ms = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(sm + 128 + 16 * s)));
			_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
				mi[j] = _mm512_dpwssd_epi32(mi[j], ms, _mm512_set1_epi32(bs[((size_t)j * nsb + u) * 8 + s]));
		}
		const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)bg));
		const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(bg + 32)));
		_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++) {
			const __m512 dx = _mm512_set1_ps(ds[(size_t)j * nsb + u]);
			acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[j]), _mm512_mul_ps(d, dx), acc[j]);
			acc[j] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mi[j]), _mm512_mul_ps(dm, dx), acc[j]);
		}
	}
	_Pragma("GCC unroll 4") for (int j = 0; j < NT; j++)
		_mm512_storeu_ps(out[j] + col, acc[j]);
}

/* Q4_K rows r0..r1 of a packed matrix against nt tokens: up to 8 tokens
 * whose super-blocks each have one scale in PACKED_KGROUP (4 at a time),
 * others through the plain rows (hs__packed_tile_plain) */
static PACKED_ATTR void PACKED_K(const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
				 int nt, float *const *out)
{
	const int nsb = ncols / HS_QK_K;
	const size_t gstride = HS_PACK_ROWS * hs__type_row_bytes(HS_TYPE_Q4_K, (uint64_t)ncols);
	const uint8_t *end = w + (size_t)(r1 / HS_PACK_ROWS) * gstride;
	float ds[nt <= KQ_MAX_TOKENS ? nt * nsb : 1];
	int32_t bs[nt <= KQ_MAX_TOKENS ? nt * nsb * 8 : 1];
	int shared = nt <= KQ_MAX_TOKENS;

	for (int j = 0; j < nt && shared; j++)
		for (int u = 0; u < nsb && shared; u++) {
			const struct hs_block_q8_0 *xb = x[j] + 8 * u;
			for (int s = 0; s < 8; s++) {
				int32_t sum = 0;
				for (int i = 0; i < HS_QK; i++)
					sum += xb[s].qs[i];
				bs[((size_t)j * nsb + u) * 8 + s] = sum;
				shared &= xb[s].d == xb[0].d;
			}
			ds[(size_t)j * nsb + u] = _cvtsh_ss(xb[0].d);
		}
	if (!shared) {
		hs__packed_tile_plain(hs__avx512_tile_q, HS_TYPE_Q4_K, w, r0, r1, ncols, x, nt, out);
		return;
	}
	for (int ga = r0 / HS_PACK_ROWS; ga < r1 / HS_PACK_ROWS; ga++) {
		const uint8_t *gp = w + (size_t)ga * gstride;
		const int col = ga * HS_PACK_ROWS - r0;
		for (int j0 = 0; j0 < nt; j0 += 4) {
			const int jn = nt - j0 < 4 ? nt - j0 : 4;
			const float *d = ds + (size_t)j0 * nsb;
			const int32_t *b = bs + (size_t)j0 * nsb * 8;
			switch (jn) {
			case 4: PACKED_KGROUP(gp, nsb, x + j0, d, b, 4, out + j0, col, end); break;
			case 3: PACKED_KGROUP(gp, nsb, x + j0, d, b, 3, out + j0, col, end); break;
			case 2: PACKED_KGROUP(gp, nsb, x + j0, d, b, 2, out + j0, col, end); break;
			default: PACKED_KGROUP(gp, nsb, x + j0, d, b, 1, out + j0, col, end); break;
			}
		}
	}
}

#define PACKED_512(NT)                                                                                        \
	do {                                                                                                  \
		for (int g = ga; g < gz; g++) {                                                               \
			const uint8_t *gp = w + (size_t)g * gstride;                                          \
			if (type == HS_TYPE_MXFP4)                                                              \
				PACKED_GROUP(HS_TYPE_MXFP4, gp, nb, x + j0, d, c, NT, out + j0, g * HS_PACK_ROWS - r0, \
					     end);                                                            \
			else                                                                                    \
				PACKED_GROUP(HS_TYPE_Q8_0, gp, nb, x + j0, d, c, NT, out + j0, g * HS_PACK_ROWS - r0, \
					     end);                                                            \
		}                                                                                               \
	} while (0)

PACKED_ATTR void PACKED_NAME(int type, const uint8_t *w, int r0, int r1, int ncols, const struct hs_block_q8_0 *const *x,
			     int nt, float *const *out)
{
	if (type != HS_TYPE_MXFP4 && type != HS_TYPE_Q8_0) {
		if (type == HS_TYPE_Q4_K)
			PACKED_K(w, r0, r1, ncols, x, nt, out);
		else
			hs__packed_tile_plain(hs__avx512_tile_q, type, w, r0, r1, ncols, x, nt, out);
		return;
	}
	const int nb = ncols / HS_QK, all = nt * nb <= PREP_ALL;
	const size_t gstride = HS_PACK_ROWS * hs__type_row_bytes(type, (uint64_t)ncols);
	const uint8_t *end = w + (size_t)(r1 / HS_PACK_ROWS) * gstride;
	/* every token's, or TOKENS tokens', scales and corrections: at most 128 KiB */
	float dx[(all ? nt : TOKENS) * nb];
	int32_t corr[(all ? nt : TOKENS) * nb];

	if (all)
		prepare_tokens(packed_offset(type), x, nt, nb, dx, corr);
	/* a few groups per pass over the token tiles: their weights stay in L2 */
	for (int ga = r0 / HS_PACK_ROWS; ga < r1 / HS_PACK_ROWS; ga += GROUPS_PER_PASS) {
		const int gz = ga + GROUPS_PER_PASS < r1 / HS_PACK_ROWS ? ga + GROUPS_PER_PASS : r1 / HS_PACK_ROWS;
		for (int j0 = 0; j0 < nt; j0 += TOKENS) {
			const int jn = nt - j0 < TOKENS ? nt - j0 : TOKENS;
			const float *d = all ? dx + (size_t)j0 * nb : dx;
			const int32_t *c = all ? corr + (size_t)j0 * nb : corr;
			if (!all)
				prepare_tokens(packed_offset(type), x + j0, jn, nb, dx, corr);
			switch (jn) {
			case 8: PACKED_512(8); break;
			case 7: PACKED_512(7); break;
			case 6: PACKED_512(6); break;
			case 5: PACKED_512(5); break;
			case 4: PACKED_512(4); break;
			case 3: PACKED_512(3); break;
			case 2: PACKED_512(2); break;
			default: PACKED_512(1); break;
			}
		}
	}
}

#undef PACKED_512
#undef PACKED_GROUP
#undef PACKED_KGROUP
#undef PACKED_K
#undef PACKED_KPF
#undef PACKED_CAT
#undef PACKED_CAT2
#undef PACKED_NAME
#undef PACKED_ATTR
#undef PACKED_VBMI
