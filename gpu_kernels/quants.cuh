// The block types beyond Q8_0 and MXFP4 (the K-quants Q2_K..Q6_K, IQ4_XS,
// IQ4_NL, Q4_0, Q4_1, Q5_0, Q5_1) on plain ggml rows, for the kernels of
// moe.cu and dense.cu.  Each Q8_0-sized column block b of a row decodes to
// 32 small integers q and per-16-value scales s[2] and mins m[2], value =
// s * q - m: the split hs__unpack32_ref() (cpu_kernels/quants.c) defines,
// written again here from ggml's block layouts because .cu files do not
// include the CPU's headers.  The float arithmetic of the scales (d * sc,
// f16 fields widened exactly) is the CPU's, so s and m are the same bits;
// the dot with a Q8_0 activation block is dx * sum over halves of
// (s_h * dot_h - m_h * sum_h(x)), in hs__dot_q8_ref()'s order.
//
// Kept byte-wise on purpose: rows of these types start wherever the file
// or the expert pack puts them (every block size is even, some are not a
// multiple of 4), and nothing here has run on a GPU to tell which wider
// loads pay.
#ifndef HS_GPU_QUANTS_CUH
#define HS_GPU_QUANTS_CUH

#include "gpu_kernels/common.cuh"

// ggml type ids (common.cuh has F32, F16, Q8_0, BF16, MXFP4)
#define TYPE_Q4_0 2
#define TYPE_Q4_1 3
#define TYPE_Q5_0 6
#define TYPE_Q5_1 7
#define TYPE_Q2_K 10
#define TYPE_Q3_K 11
#define TYPE_Q4_K 12
#define TYPE_Q5_K 13
#define TYPE_Q6_K 14
#define TYPE_IQ4_NL 20
#define TYPE_IQ4_XS 23

// A block type that decodes through unpack32 (not Q8_0, MXFP4 or a float type).
HD static inline int type_split(int type)
{
	switch (type) {
	case TYPE_Q4_0: case TYPE_Q4_1: case TYPE_Q5_0: case TYPE_Q5_1: case TYPE_IQ4_NL:
	case TYPE_Q2_K: case TYPE_Q3_K: case TYPE_Q4_K: case TYPE_Q5_K: case TYPE_Q6_K: case TYPE_IQ4_XS:
		return 1;
	default:
		return 0;
	}
}

// Every block type the kernels take with Q8_0 activations.
HD static inline int type_block(int type)
{
	return type == TYPE_Q8_0 || type == TYPE_MXFP4 || type_split(type);
}

// Values per block: 256 for the K-quants and IQ4_XS, else 32.
HD static inline int type_values(int type)
{
	return type >= TYPE_Q2_K && type <= TYPE_Q6_K ? 256 : type == TYPE_IQ4_XS ? 256 : QK;
}

HD static inline int type_bytes(int type)
{
	switch (type) {
	case TYPE_Q4_0: case TYPE_IQ4_NL: return 18;
	case TYPE_Q4_1: return 20;
	case TYPE_Q5_0: return 22;
	case TYPE_Q5_1: return 24;
	case TYPE_Q2_K: return 84;
	case TYPE_Q3_K: return 110;
	case TYPE_Q4_K: return 144;
	case TYPE_Q5_K: return 176;
	case TYPE_Q6_K: return 210;
	case TYPE_IQ4_XS: return 136;
	case TYPE_MXFP4: return MXFP4_BYTES;
	default: return Q8_BYTES;
	}
}

// Bytes of a plain row of n values (n a multiple of the block).
HD static inline size_t type_row_bytes(int type, int n)
{
	return (size_t)(n / type_values(type)) * type_bytes(type);
}

// ggml's kvalues_iq4nl { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13,
// 25, 38, 53, 69, 89, 113 } as the bytes of two 64-bit constants (low
// byte first), picked by a shift in registers rather than a local array.
HD static inline int iq4nl_value(int nibble)
{
	const unsigned long long half = nibble & 8 ? 0x7159453526190D01ull : 0xF6EADDCFBFAD9881ull;
	return (int)(int8_t)(unsigned char)(half >> (8 * (nibble & 7)));
}

HD static inline unsigned u16_at(const unsigned char *p)
{
	return (unsigned)p[0] | ((unsigned)p[1] << 8);
}

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j (ggml's get_scale_min_k4)
HD static inline void scale_min_k4(int j, const unsigned char *q, int *sc, int *mn)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*mn = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// Q3_K: 6-bit scale i (0..15) of the 12 packed bytes, minus 32
HD static inline int scale_q3_k(const unsigned char *p, int i)
{
	const int lo = i < 8 ? p[i % 8] & 0xf : p[i % 8] >> 4;
	const int hi = (p[8 + i % 4] >> (2 * (i / 4))) & 3;
	return (lo | hi << 4) - 32;
}

// Column block b of a plain row of a type_split() type: q[32], s[2], m[2]
// as hs__unpack32_ref() gives them.
HD static inline void unpack32(int type, const unsigned char *row, int b, int8_t q[QK], float s[2], float m[2])
{
	const int j = b % 8, n = j / 4, k = j % 4;
	const unsigned char *blk = row + (size_t)(type_values(type) == 256 ? b / 8 : b) * type_bytes(type);

	m[0] = m[1] = 0;
	switch (type) {
	case TYPE_Q4_0:
	case TYPE_Q4_1:
	case TYPE_IQ4_NL: {
		const unsigned char *qs = blk + (type == TYPE_Q4_1 ? 4 : 2);
		s[0] = s[1] = half_at(blk);
		if (type == TYPE_Q4_1) // value = d q + min = s q - (-min)
			m[0] = m[1] = -half_at(blk + 2);
		for (int l = 0; l < 16; l++) {
			const int lo = qs[l] & 0xf, hi = qs[l] >> 4;
			if (type == TYPE_IQ4_NL) {
				q[l] = (int8_t)iq4nl_value(lo);
				q[l + 16] = (int8_t)iq4nl_value(hi);
			} else {
				const int off = type == TYPE_Q4_0 ? 8 : 0;
				q[l] = (int8_t)(lo - off);
				q[l + 16] = (int8_t)(hi - off);
			}
		}
		return;
	}
	case TYPE_Q5_0:
	case TYPE_Q5_1: {
		const int one = type == TYPE_Q5_1, off = one ? 0 : 16;
		const unsigned char *h = blk + (one ? 4 : 2), *qs = blk + (one ? 8 : 6);
		const unsigned qh = (unsigned)h[0] | (unsigned)h[1] << 8 | (unsigned)h[2] << 16 | (unsigned)h[3] << 24;
		s[0] = s[1] = half_at(blk);
		if (one)
			m[0] = m[1] = -half_at(blk + 2);
		for (int l = 0; l < 16; l++) {
			const int lo = (qs[l] & 0xf) | (int)((qh >> l) & 1) << 4;
			const int hi = (qs[l] >> 4) | (int)((qh >> (l + 16)) & 1) << 4;
			q[l] = (int8_t)(lo - off);
			q[l + 16] = (int8_t)(hi - off);
		}
		return;
	}
	case TYPE_Q4_K:
	case TYPE_Q5_K: {
		// d, dmin, 12 scale bytes; Q5_K: qh[32]; qs[128]: sub-block j is the
		// low (j even) or high (j odd) nibbles of qs[32 (j / 2) ..]
		const int five = type == TYPE_Q5_K;
		const unsigned char *qh = blk + 16, *qs = blk + (five ? 48 : 16) + 32 * (j / 2);
		int sc, mn;
		scale_min_k4(j, blk + 4, &sc, &mn);
		s[0] = s[1] = half_at(blk) * (float)sc;
		m[0] = m[1] = half_at(blk + 2) * (float)mn;
		for (int l = 0; l < 32; l++) {
			int v = j % 2 ? qs[l] >> 4 : qs[l] & 0xf;
			if (five && ((qh[l] >> j) & 1))
				v += 16;
			q[l] = (int8_t)v;
		}
		return;
	}
	case TYPE_Q6_K: {
		// ql[128], qh[64], int8 scales[16], d
		const unsigned char *ql = blk + 64 * n + 32 * (k & 1), *qh = blk + 128 + 32 * n;
		const float d = half_at(blk + 208);
		s[0] = d * (float)(int8_t)blk[192 + 2 * j];
		s[1] = d * (float)(int8_t)blk[192 + 2 * j + 1];
		for (int l = 0; l < 32; l++) {
			const int lo = k < 2 ? ql[l] & 0xf : ql[l] >> 4, hi = (qh[l] >> (2 * k)) & 3;
			q[l] = (int8_t)((lo | hi << 4) - 32);
		}
		return;
	}
	case TYPE_Q3_K: {
		// hmask[32], qs[64], scales[12], d; the third bit set: +0, clear: -4
		const unsigned char *hm = blk, *qs = blk + 32 + 32 * n;
		const float d = half_at(blk + 108);
		s[0] = d * (float)scale_q3_k(blk + 96, 2 * j);
		s[1] = d * (float)scale_q3_k(blk + 96, 2 * j + 1);
		for (int l = 0; l < 32; l++) {
			const int v = (qs[l] >> (2 * k)) & 3;
			q[l] = (int8_t)(v - ((hm[l] >> (4 * n + k)) & 1 ? 0 : 4));
		}
		return;
	}
	case TYPE_Q2_K: {
		// scales[16] (4-bit scale, 4-bit min), qs[64], d, dmin
		const unsigned char *qs = blk + 16 + 32 * n;
		const float d = half_at(blk + 80), dmin = half_at(blk + 82);
		for (int h = 0; h < 2; h++) {
			s[h] = d * (float)(blk[2 * j + h] & 0xf);
			m[h] = dmin * (float)(blk[2 * j + h] >> 4);
		}
		for (int l = 0; l < 32; l++)
			q[l] = (int8_t)((qs[l] >> (2 * k)) & 3);
		return;
	}
	case TYPE_IQ4_XS: {
		// d, scales_h (2 bits per sub-block), scales_l[4] (4 bits), qs[128]
		const unsigned sh = u16_at(blk + 2);
		const int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 0xf) | (int)((sh >> (2 * j)) & 3) << 4;
		const unsigned char *qs = blk + 8 + 16 * j;
		s[0] = s[1] = half_at(blk) * (float)(ls - 32);
		for (int l = 0; l < 16; l++) {
			q[l] = (int8_t)iq4nl_value(qs[l] & 0xf);
			q[l + 16] = (int8_t)iq4nl_value(qs[l] >> 4);
		}
		return;
	}
	default:
		s[0] = s[1] = 0;
		memset(q, 0, QK);
		return;
	}
}

// The dot of 4 words of 4 int8 values each, and the sum of b's 16 values.
HD static inline void dot16_words(const int *a, const int *b, int *dot, int *sum)
{
	int d = 0, s = 0;
#ifdef __CUDA_ARCH__
	for (int j = 0; j < 4; j++) {
		d = __dp4a(a[j], b[j], d);
		s = __dp4a(0x01010101, b[j], s);
	}
#else
	for (int j = 0; j < 4; j++)
		for (int k = 0; k < 4; k++) {
			const int x = (int8_t)(b[j] >> (8 * k));
			d += (int)(int8_t)(a[j] >> (8 * k)) * x;
			s += x;
		}
#endif
	*dot = d;
	*sum = s;
}

// A decoded block (8 words of q) against a Q8_0 activation block (8 words
// of values, scale dx): dx * sum over halves of (s_h dot_h - m_h sum_h),
// hs__dot_q8_ref()'s order.
HD static inline float dot_split_words(const int w[8], const float s[2], const float m[2], const int x[8], float dx)
{
	float part = 0;
	for (int h = 0; h < 2; h++) {
		int dot, sum;
		dot16_words(w + 4 * h, x + 4 * h, &dot, &sum);
		part += s[h] * (float)dot - m[h] * (float)sum;
	}
	return dx * part;
}

#endif
