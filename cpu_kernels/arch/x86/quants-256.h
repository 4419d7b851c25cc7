/* Plain-row tiles of the block types beyond MXFP4 and Q8_0 (the K-quants,
 * IQ4_XS, IQ4_NL, Q4_0, Q4_1, Q5_0, Q5_1) against Q8_0 activations, for
 * the 256-bit tiers (included by kernels-256.h, so compiled with each
 * tier's flags and its dpbusd256).
 *
 * Per Q8_0-sized block of 32 weights: the block's bytes become 32 small
 * integers in one register, in the activations' order (quants.c's
 * hs__unpack32_ref is the definition), and one byte dot gives 8 int32
 * lanes, lanes 0-3 the first 16 values and 4-7 the second, so the two
 * half scales of the 16-value types (Q6_K, Q3_K, Q2_K) are one vector.
 * Unsigned integers (Q4_K, Q5_K, Q2_K, Q4_1, Q5_1: at most 31) go straight
 * into vpdpbusd / vpmaddubsw with the signed activations; signed ones
 * (Q6_K, Q3_K, IQ4, Q4_0, Q5_0) through |w| and sign(x, w) (pairs stay
 * within int16: 2 x 127 x 127).  Mins (m * sum(x) per half) use sums of
 * the activations prepared once per token.  Scales are decoded once per
 * super-block of 256 values (per block for the 32-value types). */

/* Signed types go into the byte dots as their unsigned storage, q + off
 * (Q6_K: 0..63), and off * s * sum(x) is taken off with the mins: no sign
 * operations per token.  The IQ4 levels + 128 (1..241) need VNNI's int32
 * lanes: vpmaddubsw's int16 pairs would saturate (2 x 241 x 127), so the
 * AVX2 tier takes them signed, through |w| and sign(x, w). */
static inline int qx_offset(int type)
{
	switch (type) {
	case HS_TYPE_Q6_K: return 32;
	case HS_TYPE_Q3_K: return 4;
	case HS_TYPE_Q4_0: return 8;
	case HS_TYPE_Q5_0: return 16;
	case HS_TYPE_IQ4_XS:
	case HS_TYPE_IQ4_NL: return X86_VNNI ? 128 : 0;
	default: return 0;
	}
}

/* The types of this file with a mins term (value = s q - m, or the offset's). */
static inline int qx_has_min(int type)
{
	return type == HS_TYPE_Q4_K || type == HS_TYPE_Q5_K || type == HS_TYPE_Q2_K || type == HS_TYPE_Q4_1 ||
	       type == HS_TYPE_Q5_1 || qx_offset(type);
}

static inline int qx_signed(int type)
{
	return (type == HS_TYPE_IQ4_XS || type == HS_TYPE_IQ4_NL) && !qx_offset(type);
}

/* Values per scale-decoding unit: a super-block, or one 32-value block. */
static inline int qx_unit_values(int type)
{
	return type == HS_TYPE_Q4_K || type == HS_TYPE_Q5_K || type == HS_TYPE_Q6_K || type == HS_TYPE_Q3_K ||
			       type == HS_TYPE_Q2_K || type == HS_TYPE_IQ4_XS
		       ? HS_QK_K
		       : HS_QK;
}

/* 32 bytes whose bit `bit` (0..7) is bit i of the 32-bit mask m, as 0x10
 * where set and 0 where not: the fifth bits of Q5_0 / Q5_1. */
static inline __m256i qx_bits_to_0x10(uint32_t m)
{
	const __m256i shuf = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
						0x0303030303030303);
	const __m256i bitm = _mm256_set1_epi64x((long long)0x7fbfdfeff7fbfdfeull);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), shuf);
	v = _mm256_or_si256(v, bitm);                     /* all ones where the bit is set */
	v = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1));
	return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Nibbles of 16 bytes: low ones in the lower lane (values 0..15), high ones
 * in the upper (16..31). */
static inline __m256i qx_nibbles16(const uint8_t *p)
{
	__m128i q = _mm_loadu_si128((const __m128i *)p);
	return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0f));
}

/* Block j (0..7 of a super-block, 0 of a 32-value unit) of unit blk as 32
 * integers in the activations' order. */
static inline __attribute__((always_inline)) __m256i qx_values(int type, const uint8_t *blk, int j,
							       const __m256i iq4)
{
	const __m256i m4 = _mm256_set1_epi8(0x0f), m3 = _mm256_set1_epi8(3);
	const int n = j / 4, k = j % 4;
	switch (type) {
	case HS_TYPE_Q4_K:
	case HS_TYPE_Q5_K: {
		const int five = type == HS_TYPE_Q5_K;
		__m256i q = _mm256_loadu_si256((const __m256i *)(blk + (five ? 48 : 16) + 32 * (j / 2)));
		q = j % 2 ? _mm256_and_si256(_mm256_srli_epi16(q, 4), m4) : _mm256_and_si256(q, m4);
		if (five) { /* bit j of the high-bit bytes moved to bit 4 (within each byte) */
			__m256i h = _mm256_loadu_si256((const __m256i *)(blk + 16));
			h = j <= 4 ? _mm256_slli_epi16(h, 4 - j) : _mm256_srli_epi16(h, j - 4);
			q = _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(0x10)));
		}
		return q;
	}
	case HS_TYPE_Q6_K: {
		__m256i lo = _mm256_loadu_si256((const __m256i *)(blk + 64 * n + 32 * (k & 1)));
		lo = k < 2 ? _mm256_and_si256(lo, m4) : _mm256_and_si256(_mm256_srli_epi16(lo, 4), m4);
		/* bits 2k, 2k + 1 of the high-bit bytes moved to bits 4, 5 (within each byte) */
		__m256i hi = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * n));
		hi = k <= 2 ? _mm256_slli_epi16(hi, 4 - 2 * k) : _mm256_srli_epi16(hi, 2 * k - 4);
		return _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi8(0x30))); /* + 32 */
	}
	case HS_TYPE_Q3_K: {
		__m256i q = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * n));
		q = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * k)), m3);
		/* the high bit, bit 4n + k of the hmask byte, moved to bit 2 (a
		 * 16-bit shift by at most 5 keeps each byte's bits in the byte) */
		__m256i h = _mm256_loadu_si256((const __m256i *)blk);
		const int sh = 4 * n + k - 2;
		h = sh >= 0 ? _mm256_srli_epi16(h, sh) : _mm256_slli_epi16(h, -sh);
		return _mm256_or_si256(q, _mm256_and_si256(h, _mm256_set1_epi8(4))); /* + 4 */
	}
	case HS_TYPE_Q2_K: {
		__m256i q = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * n));
		return _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * k)), m3);
	}
	case HS_TYPE_IQ4_XS:
		return _mm256_shuffle_epi8(iq4, qx_nibbles16(blk + 8 + 16 * j));
	case HS_TYPE_IQ4_NL:
		return _mm256_shuffle_epi8(iq4, qx_nibbles16(blk + 2));
	case HS_TYPE_Q4_0:
		return qx_nibbles16(blk + 2); /* + 8 */
	case HS_TYPE_Q4_1:
		return qx_nibbles16(blk + 4);
	case HS_TYPE_Q5_0:
	case HS_TYPE_Q5_1: {
		const int one = type == HS_TYPE_Q5_1;
		uint32_t qh;
		memcpy(&qh, blk + (one ? 4 : 2), 4);
		__m256i q = _mm256_or_si256(qx_nibbles16(blk + (one ? 8 : 6)), qx_bits_to_0x10(qh));
		return q; /* Q5_0: + 16 */
	}
	default:
		return _mm256_setzero_si256();
	}
}

/* The scales (and mins) of one unit, the values hs__unit_scales() gives,
 * for a type known at compile time: no table look-ups, nothing but the
 * bits.  Types with 16-value sub-blocks (qx_halves) write 16 entries, one
 * per 16 values; the others one per sub-block of 32 (8 for a super-block,
 * 1 for a 32-value block).  s and m: 32-byte aligned. */
/* A Q4_K or Q5_K super-block's 12 bytes of 6-bit scales and mins
 * rearranged in 32-bit words (as ggml's kernels do) into 8 scale bytes,
 * then 8 min bytes. */
static inline void qx_k45_bytes(const uint8_t *blk, uint32_t u[4])
{
	memcpy(u, blk + 4, 12);
	u[3] = ((u[2] >> 4) & 0x0f0f0f0f) | (((u[1] >> 6) & 0x03030303) << 4);
	const uint32_t mins_lo = u[1] & 0x3f3f3f3f;
	u[1] = (u[2] & 0x0f0f0f0f) | (((u[0] >> 6) & 0x03030303) << 4);
	u[2] = mins_lo;
	u[0] &= 0x3f3f3f3f;
}

static inline __attribute__((always_inline)) void qx_unit_scales(int type, const uint8_t *blk, float *s, float *m)
{
	uint16_t h0, h1;
	memcpy(&h0, blk, 2);
	switch (type) {
	case HS_TYPE_Q4_K:
	case HS_TYPE_Q5_K: {
		uint32_t u[4];
		memcpy(&h1, blk + 2, 2);
		qx_k45_bytes(blk, u);
		const __m256i b8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)u));
		const __m256i m8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(u + 2)));
		_mm256_store_ps(s, _mm256_mul_ps(_mm256_cvtepi32_ps(b8), _mm256_set1_ps(_cvtsh_ss(h0))));
		_mm256_store_ps(m, _mm256_mul_ps(_mm256_cvtepi32_ps(m8), _mm256_set1_ps(_cvtsh_ss(h1))));
		return;
	}
	case HS_TYPE_Q6_K: {
		memcpy(&h0, blk + 208, 2);
		const __m256 d = _mm256_set1_ps(_cvtsh_ss(h0));
		const __m128i sc = _mm_loadu_si128((const __m128i *)(blk + 192));
		_mm256_store_ps(s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
		_mm256_store_ps(s + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
		return;
	}
	case HS_TYPE_Q3_K: {
		/* low 4 bits: bytes 0..7, low nibbles then high; the top 2: byte
		 * j % 4 of bytes 8..11 at shift 2 (j / 4), one 32-bit lane per j / 4 */
		uint32_t h4;
		uint64_t l8;
		memcpy(&h0, blk + 108, 2);
		memcpy(&l8, blk + 96, 8);
		memcpy(&h4, blk + 104, 4);
		const __m128i v = _mm_cvtsi64_si128((long long)l8), m4 = _mm_set1_epi8(0x0f);
		const __m128i lo = _mm_unpacklo_epi64(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
		const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)h4), _mm_setr_epi32(0, 2, 4, 6)),
						 _mm_set1_epi8(3));
		const __m128i sc = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
		const __m256 d = _mm256_set1_ps(_cvtsh_ss(h0));
		_mm256_store_ps(s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc))));
		_mm256_store_ps(s + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(sc, 8)))));
		return;
	}
	case HS_TYPE_Q2_K: {
		memcpy(&h0, blk + 80, 2);
		memcpy(&h1, blk + 82, 2);
		const __m256 d = _mm256_set1_ps(_cvtsh_ss(h0)), dmin = _mm256_set1_ps(_cvtsh_ss(h1));
		const __m128i v = _mm_loadu_si128((const __m128i *)blk), m4 = _mm_set1_epi8(0x0f);
		const __m128i sc = _mm_and_si128(v, m4), mn = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
		_mm256_store_ps(s, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sc))));
		_mm256_store_ps(s + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sc, 8)))));
		_mm256_store_ps(m, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(mn))));
		_mm256_store_ps(m + 8, _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(mn, 8)))));
		return;
	}
	case HS_TYPE_IQ4_XS: {
		/* ls_j: nibble j of the 4 bytes scales_l, and bits 2j, 2j + 1 of
		 * scales_h on top */
		uint32_t sl;
		uint16_t sh;
		memcpy(&sh, blk + 2, 2);
		memcpy(&sl, blk + 4, 4);
		const __m128i v = _mm_cvtsi32_si128((int)sl), m4 = _mm_set1_epi8(0x0f);
		const __m128i nib = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
		const __m256i hi = _mm256_and_si256(
			_mm256_srlv_epi32(_mm256_set1_epi32(sh), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
			_mm256_set1_epi32(3));
		const __m256i ls = _mm256_or_si256(_mm256_cvtepu8_epi32(nib), _mm256_slli_epi32(hi, 4));
		_mm256_store_ps(s, _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(h0)),
						 _mm256_cvtepi32_ps(_mm256_sub_epi32(ls, _mm256_set1_epi32(32)))));
		return;
	}
	case HS_TYPE_Q4_1:
	case HS_TYPE_Q5_1:
		memcpy(&h1, blk + 2, 2);
		s[0] = _cvtsh_ss(h0);
		m[0] = -_cvtsh_ss(h1);
		return;
	default: /* Q4_0, Q5_0, IQ4_NL */
		s[0] = _cvtsh_ss(h0);
		return;
	}
}

/* Types whose two halves of a 32-value block share their scale and min
 * (sub-blocks of 32): one broadcast per block.  The others (Q6_K, Q3_K,
 * Q2_K: sub-blocks of 16) take a two-valued scale vector. */
static inline int qx_halves(int type)
{
	return type == HS_TYPE_Q6_K || type == HS_TYPE_Q3_K || type == HS_TYPE_Q2_K;
}

/* Per token, prepared once per call for every block b (all scaled by the
 * block's dx): d1[b] = dx; d2[2b + h] = dx per half (16-value types);
 * x1[b] = dx sum(x) (32-value mins), x2[2b + h] = dx sum(half) (Q2_K). */
struct qx_tok {
	float *d1, *d2, *x1, *x2;
};

/* The sums of a Q8_0 block's two 16-value halves (as ints). */
static inline void qx_half_sums(const struct hs_block_q8_0 *xb, int *h0, int *h1)
{
	/* 8 lanes of 4-byte sums: lanes 0-3 the first half, 4-7 the second */
	const __m256i xv = _mm256_loadu_si256((const __m256i *)xb->qs);
	__m256i s8 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), _mm256_set1_epi16(1));
	__m128i lo = _mm_hadd_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
	lo = _mm_hadd_epi32(lo, lo); /* half 0, half 1, ... */
	*h0 = _mm_cvtsi128_si32(lo);
	*h1 = _mm_extract_epi32(lo, 1);
}

static void qx_prepare(int type, const struct hs_block_q8_0 *x, int nb, struct qx_tok t)
{
	const int halves = qx_halves(type), mins = qx_has_min(type);
	for (int b = 0; b < nb; b++) {
		const float dx = _cvtsh_ss(x[b].d);
		t.d1[b] = dx;
		if (halves && t.d2)
			t.d2[2 * b] = t.d2[2 * b + 1] = dx;
		if (!mins)
			continue;
		int h0, h1;
		qx_half_sums(&x[b], &h0, &h1);
		if (halves) {
			t.x2[2 * b] = dx * (float)h0;
			t.x2[2 * b + 1] = dx * (float)h1;
		} else {
			t.x1[b] = dx * (float)(h0 + h1);
		}
	}
}

#define QX_MAX_UNIT 16 /* scales per unit: 256 / 16 */

/* Bytes of one scale-decoding unit (a super-block, or a 32-value block). */
static inline size_t qx_unit_bytes(int type)
{
	switch (type) {
	case HS_TYPE_Q4_K: return 144;
	case HS_TYPE_Q5_K: return 176;
	case HS_TYPE_Q6_K: return 210;
	case HS_TYPE_Q3_K: return 110;
	case HS_TYPE_Q2_K: return 84;
	case HS_TYPE_IQ4_XS: return 136;
	case HS_TYPE_Q4_1: return 20;
	case HS_TYPE_Q5_0: return 22;
	case HS_TYPE_Q5_1: return 24;
	default: return 18; /* Q4_0, IQ4_NL */
	}
}

/* The decode prefetch distance in bytes: as many values ahead as
 * q4k_bytes of Q4_K hold, whatever the type's bytes per value
 * (the work per value is about the same for all, so this is the same time
 * ahead).  On the Xeon VM a fixed 16 KiB was best for Q4_K and IQ4_XS and
 * 24 KiB for Q6_K (0.58 -> 0.70 of read), its 6.6 bits a value against 4.5. */
static inline size_t qx_prefetch_ahead(int type, size_t q4k_bytes)
{
	const size_t units = q4k_bytes / qx_unit_bytes(HS_TYPE_Q4_K) * (HS_QK_K / qx_unit_values(type));
	return units * qx_unit_bytes(type);
}

/* Rows r0..r1 against NT (1..4) tokens.  Per unit of 256 values (or one
 * block of 32): the row's scales once, then per token their products with
 * the token's block scales (one vector multiply for 8 blocks) and the mins
 * term (one FMA of 8 mins with 8 block sums); per block and token one byte
 * dot, one convert and one FMA. */
static inline __attribute__((always_inline)) void rows_qx(int type, const uint8_t *w, size_t row_bytes, int r0,
							   int r1, int nb, const struct hs_block_q8_0 *const *x,
							   const struct qx_tok *tk, int NT, float *const *out)
{
	const __m256i iq4 = _mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hs__iq4nl_values)),
					    _mm256_set1_epi8((char)qx_offset(type)));
	const int uv = qx_unit_values(type) / HS_QK, mins = qx_has_min(type), sgn = qx_signed(type);
	const int halves = qx_halves(type);
	const size_t ub = qx_unit_bytes(type);

	const uint8_t *end = w + (size_t)r1 * row_bytes; /* prefetches stay inside the call's rows */
	const size_t ahead = qx_prefetch_ahead(type, PREFETCH_AHEAD);
	for (int r = r0; r < r1; r++) {
		const uint8_t *row = w + (size_t)r * row_bytes;
		__m256 acc[4], acc2[4], macc[4];
		_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
			acc[t] = acc2[t] = macc[t] = _mm256_setzero_ps();
		for (int u = 0; u < nb / uv; u++) {
			_Alignas(32) float s[QX_MAX_UNIT], m[QX_MAX_UNIT], f[4][QX_MAX_UNIT];
			const uint8_t *blk = row + (size_t)u * ub;
			const int b0 = u * uv;
			/* decode streams each expert's rows once, from cold: a software
			 * prefetch `ahead` bytes ahead (qx_prefetch_ahead) keeps more
			 * of them in flight (the loads were the stalls) */
			if (NT == 1 && blk + ahead + ub <= end)
				for (size_t o = 0; o < ub; o += 64)
					_mm_prefetch((const char *)blk + ahead + o, _MM_HINT_T0);
			qx_unit_scales(type, blk, s, m);
			if (qx_offset(type)) { /* value = s (q + off) - off s */
				const __m256 off = _mm256_set1_ps((float)qx_offset(type));
				if (uv == 8) {
					_mm256_store_ps(m, _mm256_mul_ps(off, _mm256_load_ps(s)));
					if (halves)
						_mm256_store_ps(m + 8, _mm256_mul_ps(off, _mm256_load_ps(s + 8)));
				} else {
					m[0] = (float)qx_offset(type) * s[0];
				}
			}
			if (uv == 8) { /* a super-block: 8 blocks' products at once */
				_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
					if (halves) {
						_mm256_store_ps(f[t], _mm256_mul_ps(_mm256_load_ps(s), _mm256_loadu_ps(tk[t].d2 + 2 * b0)));
						_mm256_store_ps(f[t] + 8,
								_mm256_mul_ps(_mm256_load_ps(s + 8), _mm256_loadu_ps(tk[t].d2 + 2 * b0 + 8)));
						if (mins) {
							macc[t] = _mm256_fmadd_ps(_mm256_load_ps(m), _mm256_loadu_ps(tk[t].x2 + 2 * b0), macc[t]);
							macc[t] = _mm256_fmadd_ps(_mm256_load_ps(m + 8), _mm256_loadu_ps(tk[t].x2 + 2 * b0 + 8),
										  macc[t]);
						}
					} else {
						_mm256_store_ps(f[t], _mm256_mul_ps(_mm256_load_ps(s), _mm256_loadu_ps(tk[t].d1 + b0)));
						if (mins)
							macc[t] = _mm256_fmadd_ps(_mm256_load_ps(m), _mm256_loadu_ps(tk[t].x1 + b0), macc[t]);
					}
				}
			} else { /* one 32-value block */
				_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
					f[t][0] = s[0] * tk[t].d1[b0];
					if (mins)
						macc[t] = _mm256_add_ps(macc[t], _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, m[0] * tk[t].x1[b0]));
				}
			}
			/* unrolled: the bit positions of block j are constants */
			_Pragma("GCC unroll 8") for (int j = 0; j < uv; j++) {
				const int b = b0 + j;
				const __m256i wv = qx_values(type, blk, j, iq4);
				const __m256i wa = sgn ? _mm256_sign_epi8(wv, wv) : wv;
				_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {
					__m256i xv = _mm256_loadu_si256((const __m256i *)x[t][b].qs);
					if (sgn)
						xv = _mm256_sign_epi8(xv, wv);
					__m256i p = dpbusd256(_mm256_setzero_si256(), wa, xv);
					/* halves: lanes 0-3 take product 2j, 4-7 2j + 1, of the
					 * 8 in f[t] + 8 (j / 4) */
					const __m256 sv =
						halves ? _mm256_permutevar8x32_ps(
								 _mm256_load_ps(f[t] + 8 * (j / 4)),
								 _mm256_setr_epi32(2 * (j % 4), 2 * (j % 4), 2 * (j % 4), 2 * (j % 4),
										   2 * (j % 4) + 1, 2 * (j % 4) + 1, 2 * (j % 4) + 1,
										   2 * (j % 4) + 1))
						       : _mm256_broadcast_ss(&f[t][j]);
					/* two chains per token (even and odd blocks) */
					if (j % 2)
						acc2[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sv, acc2[t]);
					else
						acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), sv, acc[t]);
				}
			}
		}
		_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
			out[t][r - r0] = hsum(_mm256_add_ps(acc[t], acc2[t])) - hsum(macc[t]);
	}
}

#define ROWS_QX_NT(TYPE)                                                                                        \
	do {                                                                                                  \
		switch (jn) {                                                                                 \
		case 4: rows_qx(TYPE, w, row_bytes, r0, r1, nb, x + j0, tk, 4, out + j0); break;             \
		case 3: rows_qx(TYPE, w, row_bytes, r0, r1, nb, x + j0, tk, 3, out + j0); break;             \
		case 2: rows_qx(TYPE, w, row_bytes, r0, r1, nb, x + j0, tk, 2, out + j0); break;             \
		default: rows_qx(TYPE, w, row_bytes, r0, r1, nb, x + j0, tk, 1, out + j0); break;            \
		}                                                                                             \
	} while (0)

/* ---- many tokens: 8 rows decoded once, then row-interleaved dots ----------
 * rows_qx decodes a row's values again for every 4 tokens and turns each
 * block's int32 lanes of one row into floats.  With many tokens (prefill,
 * an expert's share of a ubatch) that is most of the work, so here 8 rows
 * of QXR_CHUNK blocks are decoded once into a scratch laid out as
 * repack.h's groups lay out Q8_0 units (8 rows instead of 16): per block,
 * 8 units of 8 rows x 4 values (the unsigned storage q + offset, or the
 * signed IQ4 values where the tier has no VNNI), and per block (and
 * 16-value half) the 8 rows' scales and mins as vectors.  Every token of a
 * pass is then taken against them: one byte dot per unit and token gives
 * 8 rows' int32 lanes, one float multiply-add per block scales 8 rows.
 * Without VNNI, byte products are added in int16 over as many units as
 * the type's largest value allows (qxr_units16) before they are widened.
 * The arithmetic is rows_qx's (an exact int32 dot per block or half,
 * scaled in float, the mins taken off with the token's block sums); only
 * the order of the float additions differs. */
#define QXR_MIN_TOKENS 8
#define QXR_CHUNK 64 /* blocks decoded at a time: 16 KiB of values, a multiple of 8 */
#define QXR_PASS 64  /* tokens prepared at a time: 48 KiB */

/* Units (of 4 values) whose byte products may be added in int16 before
 * vpmaddwd widens them: a unit's pair of products is at most 2 x vmax x 128,
 * so g units stay within int16 while g x 2 x vmax x 128 <= 32767.  A group
 * never crosses a 16-value half.  Constants per type (a loop here is not
 * folded by gcc, and the unit loops then stay rolled). */
static inline int qxr_units16(int type)
{
	if (X86_VNNI || qx_signed(type))
		return 1;
	switch (type) {
	case HS_TYPE_Q6_K: return 2; /* vmax 63: 32256 */
	case HS_TYPE_Q5_K:
	case HS_TYPE_Q5_0:
	case HS_TYPE_Q5_1: return 4; /* vmax 31: 31744 */
	case HS_TYPE_Q3_K:
	case HS_TYPE_Q2_K: return 4; /* vmax 7 or 3: a whole 16-value half */
	default: return 8;           /* 4-bit, vmax 15: 30720 */
	}
}

/* Rows rg..rg + 7, blocks c0..c0 + kb - 1 (whole units) into the scratch:
 * v[block][unit][row] 4 bytes each, sc and mn [block][half][row]. */
static inline __attribute__((always_inline)) void qxr_decode(int type, const uint8_t *w, size_t row_bytes, int rg,
							     int c0, int kb, const __m256i iq4, uint8_t *v, float *sc,
							     float *mn)
{
	const int uv = qx_unit_values(type) / HS_QK, halves = qx_halves(type), mins = qx_has_min(type);
	const size_t ub = qx_unit_bytes(type);
	const uint8_t *rows = w + (size_t)rg * row_bytes;

	for (int u = c0 / uv; u < (c0 + kb) / uv; u++) {
		const int b0 = u * uv - c0;
		for (int r = 0; r < 8; r++) {
			_Alignas(32) float s[QX_MAX_UNIT], m[QX_MAX_UNIT];
			const uint8_t *blk = rows + (size_t)r * row_bytes + (size_t)u * ub;
			qx_unit_scales(type, blk, s, m);
			for (int j = 0; j < uv; j++)
				for (int h = 0; h < 1 + halves; h++) {
					const int i = halves ? 2 * j + h : j;
					sc[((b0 + j) * 2 + h) * 8 + r] = s[i];
					if (mins)
						mn[((b0 + j) * 2 + h) * 8 + r] =
							qx_offset(type) ? (float)qx_offset(type) * s[i] : m[i];
				}
		}
		_Pragma("GCC unroll 8") for (int j = 0; j < uv; j++)
		{
			__m256i q[8];
			_Pragma("GCC unroll 8") for (int r = 0; r < 8; r++) q[r] =
				qx_values(type, rows + (size_t)r * row_bytes + (size_t)u * ub, j, iq4);
			/* 8 rows x 8 words -> 8 units x 8 rows */
			const __m256i t0 = _mm256_unpacklo_epi32(q[0], q[1]), t1 = _mm256_unpackhi_epi32(q[0], q[1]);
			const __m256i t2 = _mm256_unpacklo_epi32(q[2], q[3]), t3 = _mm256_unpackhi_epi32(q[2], q[3]);
			const __m256i t4 = _mm256_unpacklo_epi32(q[4], q[5]), t5 = _mm256_unpackhi_epi32(q[4], q[5]);
			const __m256i t6 = _mm256_unpacklo_epi32(q[6], q[7]), t7 = _mm256_unpackhi_epi32(q[6], q[7]);
			const __m256i s0 = _mm256_unpacklo_epi64(t0, t2), s1 = _mm256_unpackhi_epi64(t0, t2);
			const __m256i s2 = _mm256_unpacklo_epi64(t1, t3), s3 = _mm256_unpackhi_epi64(t1, t3);
			const __m256i s4 = _mm256_unpacklo_epi64(t4, t6), s5 = _mm256_unpackhi_epi64(t4, t6);
			const __m256i s6 = _mm256_unpacklo_epi64(t5, t7), s7 = _mm256_unpackhi_epi64(t5, t7);
			__m256i *o = (__m256i *)(v + (size_t)(b0 + j) * 256);
			_mm256_store_si256(o + 0, _mm256_permute2x128_si256(s0, s4, 0x20));
			_mm256_store_si256(o + 1, _mm256_permute2x128_si256(s1, s5, 0x20));
			_mm256_store_si256(o + 2, _mm256_permute2x128_si256(s2, s6, 0x20));
			_mm256_store_si256(o + 3, _mm256_permute2x128_si256(s3, s7, 0x20));
			_mm256_store_si256(o + 4, _mm256_permute2x128_si256(s0, s4, 0x31));
			_mm256_store_si256(o + 5, _mm256_permute2x128_si256(s1, s5, 0x31));
			_mm256_store_si256(o + 6, _mm256_permute2x128_si256(s2, s6, 0x31));
			_mm256_store_si256(o + 7, _mm256_permute2x128_si256(s3, s7, 0x31));
		}
	}
}

/* The 8 decoded rows against NT (1..4) tokens over kb blocks: out[t][col..col + 7]
 * set (add: added to).  td[t][b]: the token's block scale; tx[t][2b + h]
 * (16-value halves) or tx[t][b]: its scale times the sum of its values. */
static inline __attribute__((always_inline)) void
qxr_tokens(int type, const uint8_t *v, const float *sc, const float *mn, int kb, const struct hs_block_q8_0 *const *x,
	   int c0, const float *td, const float *tx, int NT, float *const *out, int col, int add)
{
	const int halves = qx_halves(type), mins = qx_has_min(type), sgn = qx_signed(type), g16 = qxr_units16(type);
	const int upr = halves ? 4 : 8; /* units per scale */
	const __m256i ones = _mm256_set1_epi16(1);
	const struct hs_block_q8_0 *xt[4];
	__m256 acc[4];

	_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
	{
		xt[t] = x[t] + c0;
		acc[t] = add ? _mm256_loadu_ps(out[t] + col) : _mm256_setzero_ps();
	}
	for (int b = 0; b < kb; b++) {
		const uint8_t *vb = v + (size_t)b * 256;
		_Pragma("GCC unroll 2") for (int h = 0; h < 1 + halves; h++)
		{
			__m256i ai[4];
			_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) ai[t] = _mm256_setzero_si256();
			_Pragma("GCC unroll 8") for (int u0 = h * upr; u0 < (h + 1) * upr; u0 += g16)
			{
				__m256i s16[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(),
						   _mm256_setzero_si256(),
						   _mm256_setzero_si256() }; /* set at u0 (this quiets gcc) */
				_Pragma("GCC unroll 8") for (int u = u0; u < u0 + g16; u++)
				{
					const __m256i wv = _mm256_load_si256((const __m256i *)(vb + 32 * u));
					const __m256i wa = sgn ? _mm256_sign_epi8(wv, wv) : wv;
					_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++)
					{
						__m256i xb = _mm256_set1_epi32(load32(xt[t][b].qs + 4 * u));
						if (sgn)
							xb = _mm256_sign_epi8(xb, wv);
						if (g16 == 1)
							ai[t] = dpbusd256(ai[t], wa, xb);
						else if (u == u0)
							s16[t] = _mm256_maddubs_epi16(wa, xb);
						else
							s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(wa, xb));
					}
					/* unit by unit: gcc otherwise loads every unit first
					 * and spills the sums */
					if (g16 > 1)
						__asm__ volatile(""
								 : "+x"(s16[0]), "+x"(s16[1]), "+x"(s16[2]),
								   "+x"(s16[3]));
				}
				if (g16 > 1)
					_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) ai[t] =
						_mm256_add_epi32(ai[t], _mm256_madd_epi16(s16[t], ones));
			}
			const __m256 sv = _mm256_load_ps(sc + (b * 2 + h) * 8);
			_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] =
				_mm256_fmadd_ps(_mm256_cvtepi32_ps(ai[t]),
						_mm256_mul_ps(sv, _mm256_broadcast_ss(td + t * QXR_CHUNK + b)), acc[t]);
			if (mins) {
				const __m256 mv = _mm256_load_ps(mn + (b * 2 + h) * 8);
				_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) acc[t] = _mm256_fnmadd_ps(
					mv, _mm256_broadcast_ss(tx + t * 2 * QXR_CHUNK + (halves ? 2 * b + h : b)),
					acc[t]);
			}
		}
	}
	_Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) _mm256_storeu_ps(out[t] + col, acc[t]);
}

static void tile_qx_rows_256(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			     const struct hs_block_q8_0 *const *x, int nt, float *const *out);

#define QXR_TOKENS(TYPE, NT)                                                                                           \
	qxr_tokens(TYPE, v, sc, mn, kb, x + p0 + j0, c0, td + (size_t)j0 * QXR_CHUNK, tx + (size_t)j0 * 2 * QXR_CHUNK, \
		   NT, out + p0 + j0, rg - r0, c0 > 0)

static inline __attribute__((always_inline)) void tile_qxr(int type, const uint8_t *w, size_t row_bytes, int r0, int r1,
							   int ncols, const struct hs_block_q8_0 *const *x, int nt,
							   float *const *out)
{
	const __m256i iq4 =
		_mm256_add_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)hs__iq4nl_values)),
				_mm256_set1_epi8((char)qx_offset(type)));
	const int nb = ncols / HS_QK, rend = r0 + (r1 - r0) / 8 * 8, halves = qx_halves(type);
	_Alignas(32) uint8_t v[QXR_CHUNK * 256];
	_Alignas(32) float sc[QXR_CHUNK * 16], mn[QXR_CHUNK * 16];
	_Alignas(32) float td[QXR_PASS * QXR_CHUNK], tx[QXR_PASS * 2 * QXR_CHUNK];

	for (int p0 = 0; p0 < nt; p0 += QXR_PASS) {
		const int pn = nt - p0 < QXR_PASS ? nt - p0 : QXR_PASS;
		for (int c0 = 0; c0 < nb; c0 += QXR_CHUNK) {
			const int kb = nb - c0 < QXR_CHUNK ? nb - c0 : QXR_CHUNK;
			for (int t = 0; t < pn; t++) {
				struct qx_tok tk = { td + (size_t)t * QXR_CHUNK, NULL, NULL, NULL };
				if (halves)
					tk.x2 = tx + (size_t)t * 2 * QXR_CHUNK;
				else
					tk.x1 = tx + (size_t)t * 2 * QXR_CHUNK;
				qx_prepare(type, x[p0 + t] + c0, kb, tk);
			}
			for (int rg = r0; rg < rend; rg += 8) {
				/* the next group's chunk into L2 while this one is worked:
				 * 8 short row streams the hardware prefetchers miss */
				const size_t cb = (size_t)c0 / (qx_unit_values(type) / HS_QK) * qx_unit_bytes(type),
					     ce = (size_t)(c0 + kb) / (qx_unit_values(type) / HS_QK) * qx_unit_bytes(type);
				for (int r = rg + 8; r < rg + 16 && r < rend; r++)
					for (size_t o = cb; o < ce; o += 64)
						_mm_prefetch((const char *)w + (size_t)r * row_bytes + o, _MM_HINT_T1);
				qxr_decode(type, w, row_bytes, rg, c0, kb, iq4, v, sc, mn);
				for (int j0 = 0; j0 < pn; j0 += 4) {
					switch (pn - j0 < 4 ? pn - j0 : 4) {
					case 4: QXR_TOKENS(type, 4); break;
					case 3: QXR_TOKENS(type, 3); break;
					case 2: QXR_TOKENS(type, 2); break;
					default: QXR_TOKENS(type, 1); break;
					}
				}
			}
		}
	}
	if (rend < r1) { /* the rows past the last 8: one row at a time */
		float *o[nt];
		for (int t = 0; t < nt; t++)
			o[t] = out[t] + (rend - r0);
		tile_qx_rows_256(type, w, row_bytes, rend, r1, ncols, x, nt, o);
	}
}

static void tile_qxr_any(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			 const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	switch (type) {
	case HS_TYPE_Q4_K: tile_qxr(HS_TYPE_Q4_K, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q5_K: tile_qxr(HS_TYPE_Q5_K, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q6_K: tile_qxr(HS_TYPE_Q6_K, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q3_K: tile_qxr(HS_TYPE_Q3_K, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q2_K: tile_qxr(HS_TYPE_Q2_K, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_IQ4_XS: tile_qxr(HS_TYPE_IQ4_XS, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_IQ4_NL: tile_qxr(HS_TYPE_IQ4_NL, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q4_0: tile_qxr(HS_TYPE_Q4_0, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q4_1: tile_qxr(HS_TYPE_Q4_1, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q5_0: tile_qxr(HS_TYPE_Q5_0, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	case HS_TYPE_Q5_1: tile_qxr(HS_TYPE_Q5_1, w, row_bytes, r0, r1, ncols, x, nt, out); break;
	default: break;
	}
}

static void tile_qx_256(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	if (nt >= QXR_MIN_TOKENS && r1 - r0 >= 8) {
		tile_qxr_any(type, w, row_bytes, r0, r1, ncols, x, nt, out);
		return;
	}
	tile_qx_rows_256(type, w, row_bytes, r0, r1, ncols, x, nt, out);
}

/* One row at a time (rows_qx), 4 tokens at a time. */
static void tile_qx_rows_256(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols,
			     const struct hs_block_q8_0 *const *x, int nt, float *const *out)
{
	const int nb = ncols / HS_QK, halves = qx_halves(type), mins = qx_has_min(type);
	/* 4 tokens' prepared scales and sums: at most 4 x 2048 x 5 floats (160 KiB)
	 * for the 65536 columns hotset accepts; 10 KiB for a 4096-wide row */
	const int per = nb * (1 + (halves ? 2 : 0) + (mins ? (halves ? 2 : 1) : 0));
	float buf[4 * per];
	struct qx_tok tk[4];

	for (int j = 0; j < 4; j++) {
		float *p = buf + j * per;
		tk[j].d1 = p;
		p += nb;
		tk[j].d2 = halves ? p : NULL;
		p += halves ? 2 * nb : 0;
		tk[j].x1 = mins && !halves ? p : NULL;
		tk[j].x2 = mins && halves ? p : NULL;
	}
	for (int j0 = 0; j0 < nt; j0 += 4) {
		const int jn = nt - j0 < 4 ? nt - j0 : 4;
		for (int j = 0; j < jn; j++)
			qx_prepare(type, x[j0 + j], nb, tk[j]);
		switch (type) {
		case HS_TYPE_Q4_K: ROWS_QX_NT(HS_TYPE_Q4_K); break;
		case HS_TYPE_Q5_K: ROWS_QX_NT(HS_TYPE_Q5_K); break;
		case HS_TYPE_Q6_K: ROWS_QX_NT(HS_TYPE_Q6_K); break;
		case HS_TYPE_Q3_K: ROWS_QX_NT(HS_TYPE_Q3_K); break;
		case HS_TYPE_Q2_K: ROWS_QX_NT(HS_TYPE_Q2_K); break;
		case HS_TYPE_IQ4_XS: ROWS_QX_NT(HS_TYPE_IQ4_XS); break;
		case HS_TYPE_IQ4_NL: ROWS_QX_NT(HS_TYPE_IQ4_NL); break;
		case HS_TYPE_Q4_0: ROWS_QX_NT(HS_TYPE_Q4_0); break;
		case HS_TYPE_Q4_1: ROWS_QX_NT(HS_TYPE_Q4_1); break;
		case HS_TYPE_Q5_0: ROWS_QX_NT(HS_TYPE_Q5_0); break;
		case HS_TYPE_Q5_1: ROWS_QX_NT(HS_TYPE_Q5_1); break;
		default: break;
		}
	}
}
