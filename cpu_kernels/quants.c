/* The block types beyond Q8_0 and MXFP4 (the K-quants Q2_K..Q6_K, IQ4_XS,
 * IQ4_NL and the 32-value Q4_0, Q4_1, Q5_0, Q5_1), in plain scalar code:
 * where each bit of a block goes (hs__unpack32_ref, the one definition
 * the dequantizer, the reference dot products and every fast kernel's
 * tests rest on), and simple quantizers that write valid blocks for test
 * models.  The layouts are ggml-common.h's; the arithmetic of
 * dequantization is ggml-quants.c's dequantize_row_*, operation for
 * operation, so the floats are the same bits. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "cpu_kernels/formats.h"

/* Q4_K / Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12
 * packed bytes (ggml's get_scale_min_k4). */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *mn)
{
	if (j < 4) {
		*sc = q[j] & 63;
		*mn = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4);
		*mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

/* Q3_K: the 16 6-bit scales (each minus 32) from the 12 packed bytes. */
static void scales_q3_k(const uint8_t *p, int sc[16])
{
	for (int j = 0; j < 16; j++) {
		int lo = j < 8 ? p[j % 8] & 0xf : p[j % 8] >> 4;
		int hi = (p[8 + j % 4] >> (2 * (j / 4))) & 3;
		sc[j] = (lo | hi << 4) - 32;
	}
}

static float h2f(uint16_t h)
{
	return hs__fp16_to_fp32(h);
}

/* A block as its struct, copied out: rows in a file or a caller's buffer
 * need not be aligned for the structs' 16-bit fields. */
union any_block {
	struct hs_block_q2_k q2;
	struct hs_block_q3_k q3;
	struct hs_block_q6_k q6;
	struct hs_block_iq4_xs iq4;
	uint8_t raw[256];
};

static const union any_block *copy_block(union any_block *b, const uint8_t *src, size_t bytes)
{
	memcpy(b->raw, src, bytes);
	return b;
}

void hs__unit_scales(int type, const void *row, int u, float *s, float *m)
{
	const uint8_t *r = row;
	uint16_t d16, m16;
	int sc, mn;

	memset(m, 0, sizeof *m * (hs__type_block_values(type) == HS_QK_K ? 16 : 2));
	switch (type) {
	case HS_TYPE_Q4_0:
	case HS_TYPE_IQ4_NL:
	case HS_TYPE_Q5_0:
		memcpy(&d16, r + (size_t)u * hs__type_block_bytes(type), 2);
		s[0] = s[1] = h2f(d16);
		return;
	case HS_TYPE_Q4_1:
	case HS_TYPE_Q5_1: { /* value = d q + m = s q - (-m) */
		const uint8_t *blk = r + (size_t)u * hs__type_block_bytes(type);
		memcpy(&d16, blk, 2);
		memcpy(&m16, blk + 2, 2);
		s[0] = s[1] = h2f(d16);
		m[0] = m[1] = -h2f(m16);
		return;
	}
	case HS_TYPE_Q4_K:
	case HS_TYPE_Q5_K: {
		const uint8_t *blk = r + (size_t)u * hs__type_block_bytes(type);
		memcpy(&d16, blk, 2);
		memcpy(&m16, blk + 2, 2);
		const float d = h2f(d16), dmin = h2f(m16);
		for (int j = 0; j < 8; j++) {
			scale_min_k4(j, blk + 4, &sc, &mn);
			s[2 * j] = s[2 * j + 1] = d * (float)sc;
			m[2 * j] = m[2 * j + 1] = dmin * (float)mn;
		}
		return;
	}
	case HS_TYPE_Q6_K: {
		union any_block c;
		const struct hs_block_q6_k *blk = &copy_block(&c, r + (size_t)u * 210, 210)->q6;
		const float d = h2f(blk->d);
		for (int i = 0; i < 16; i++)
			s[i] = d * (float)blk->scales[i];
		return;
	}
	case HS_TYPE_Q3_K: {
		union any_block c;
		const struct hs_block_q3_k *blk = &copy_block(&c, r + (size_t)u * 110, 110)->q3;
		int v[16];
		scales_q3_k(blk->scales, v);
		const float d = h2f(blk->d);
		for (int i = 0; i < 16; i++)
			s[i] = d * (float)v[i];
		return;
	}
	case HS_TYPE_Q2_K: {
		union any_block c;
		const struct hs_block_q2_k *blk = &copy_block(&c, r + (size_t)u * 84, 84)->q2;
		const float d = h2f(blk->d), dmin = h2f(blk->dmin);
		for (int i = 0; i < 16; i++) {
			s[i] = d * (float)(blk->scales[i] & 0xf);
			m[i] = dmin * (float)(blk->scales[i] >> 4);
		}
		return;
	}
	case HS_TYPE_IQ4_XS: {
		union any_block c;
		const struct hs_block_iq4_xs *blk = &copy_block(&c, r + (size_t)u * 136, 136)->iq4;
		const float d = h2f(blk->d);
		for (int j = 0; j < 8; j++) {
			int ls = ((blk->scales_l[j / 2] >> (4 * (j % 2))) & 0xf) | (((blk->scales_h >> (2 * j)) & 3) << 4);
			s[2 * j] = s[2 * j + 1] = d * (float)(ls - 32);
		}
		return;
	}
	default:
		s[0] = s[1] = 0;
		return;
	}
}

/* The 32 integers of block b; the scales come from hs__unit_scales(). */
static void unpack_values(int type, const uint8_t *r, int b, int8_t q[32])
{
	const size_t bb = hs__type_block_bytes(type);
	const int j = b % 8, n = j / 4, k = j % 4;
	const uint8_t *blk = r + (size_t)(hs__type_block_values(type) == HS_QK_K ? b / 8 : b) * bb;

	switch (type) {
	case HS_TYPE_Q4_0:
	case HS_TYPE_IQ4_NL:
	case HS_TYPE_Q4_1: {
		const uint8_t *qs = blk + (type == HS_TYPE_Q4_1 ? 4 : 2);
		for (int l = 0; l < 16; l++) {
			int lo = qs[l] & 0xf, hi = qs[l] >> 4;
			if (type == HS_TYPE_IQ4_NL)
				q[l] = hs__iq4nl_values[lo], q[l + 16] = hs__iq4nl_values[hi];
			else if (type == HS_TYPE_Q4_0)
				q[l] = (int8_t)(lo - 8), q[l + 16] = (int8_t)(hi - 8);
			else
				q[l] = (int8_t)lo, q[l + 16] = (int8_t)hi;
		}
		return;
	}
	case HS_TYPE_Q5_0:
	case HS_TYPE_Q5_1: {
		const int one = type == HS_TYPE_Q5_1;
		uint32_t qh;
		memcpy(&qh, blk + (one ? 4 : 2), 4);
		const uint8_t *qs = blk + (one ? 8 : 6);
		for (int l = 0; l < 16; l++) {
			int lo = (qs[l] & 0xf) | (((qh >> l) & 1) << 4), hi = (qs[l] >> 4) | (((qh >> (l + 16)) & 1) << 4);
			q[l] = (int8_t)(one ? lo : lo - 16);
			q[l + 16] = (int8_t)(one ? hi : hi - 16);
		}
		return;
	}
	case HS_TYPE_Q4_K:
	case HS_TYPE_Q5_K: {
		/* sub-block j: values 64 (j / 2) + 0..31 are the low (j even) or
		 * high (j odd) nibbles of qs[32 (j / 2) ..], Q5_K's fifth bit is
		 * bit j of qh[l] */
		const int five = type == HS_TYPE_Q5_K;
		const uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16) + 32 * (j / 2);
		for (int l = 0; l < 32; l++) {
			int v = j % 2 ? qs[l] >> 4 : qs[l] & 0xf;
			if (five)
				v += (qh[l] >> j) & 1 ? 16 : 0;
			q[l] = (int8_t)v;
		}
		return;
	}
	case HS_TYPE_Q6_K: {
		/* half n = j / 4 of 128 values; quarter k = j % 4 of it:
		 * ql[64n + 32 (k & 1) + l] low (k < 2) or high nibble, and 2 bits
		 * of qh[32n + l] at shift 2k; minus 32 */
		union any_block c;
		const struct hs_block_q6_k *p = &copy_block(&c, blk, 210)->q6;
		for (int l = 0; l < 32; l++) {
			int lo = p->ql[64 * n + 32 * (k & 1) + l];
			lo = k < 2 ? lo & 0xf : lo >> 4;
			int hi = (p->qh[32 * n + l] >> (2 * k)) & 3;
			q[l] = (int8_t)((lo | hi << 4) - 32);
		}
		return;
	}
	case HS_TYPE_Q3_K: {
		/* 2 bits of qs[32n + l] at shift 2k; the third (set: +0, clear:
		 * -4) is bit 4n + k of hmask[l] */
		union any_block c;
		const struct hs_block_q3_k *p = &copy_block(&c, blk, 110)->q3;
		for (int l = 0; l < 32; l++) {
			int v = (p->qs[32 * n + l] >> (2 * k)) & 3;
			q[l] = (int8_t)(v - ((p->hmask[l] >> (4 * n + k)) & 1 ? 0 : 4));
		}
		return;
	}
	case HS_TYPE_Q2_K: {
		union any_block c;
		const struct hs_block_q2_k *p = &copy_block(&c, blk, 84)->q2;
		for (int l = 0; l < 32; l++)
			q[l] = (int8_t)((p->qs[32 * n + l] >> (2 * k)) & 3);
		return;
	}
	case HS_TYPE_IQ4_XS: {
		union any_block c;
		const struct hs_block_iq4_xs *p = &copy_block(&c, blk, 136)->iq4;
		for (int l = 0; l < 16; l++) {
			q[l] = hs__iq4nl_values[p->qs[16 * j + l] & 0xf];
			q[l + 16] = hs__iq4nl_values[p->qs[16 * j + l] >> 4];
		}
		return;
	}
	default:
		memset(q, 0, 32);
		return;
	}
}

void hs__unpack32_ref(int type, const void *row, int b, int8_t q[32], float s[2], float m[2])
{
	float us[16], um[16];
	const int k = hs__type_block_values(type) == HS_QK_K;

	hs__unit_scales(type, row, k ? b / 8 : b, us, um);
	unpack_values(type, row, b, q);
	for (int h = 0; h < 2; h++) {
		s[h] = us[(k ? 2 * (b % 8) : 0) + h];
		m[h] = um[(k ? 2 * (b % 8) : 0) + h];
	}
}

void hs__dequantize_row_other(int type, const void *src, float *dst, size_t n)
{
	int8_t q[32];
	float s[2], m[2];

	if (!hs__type_supported(type) || hs__type_block_values(type) == 1)
		return;
	for (size_t b = 0; b < n / 32; b++) {
		hs__unpack32_ref(type, src, (int)b, q, s, m);
		for (int i = 0; i < 32; i++)
			dst[32 * b + i] = s[i / 16] * (float)q[i] - m[i / 16];
	}
}

/* ---- quantizers for test models ------------------------------------------
 * Round to nearest with scales from each sub-block's range; valid blocks of
 * every format, errors within a step of the scale, not ggml's search. */

static int clampi(int v, int lo, int hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static int near(float v)
{
	return (int)lrintf(v);
}

/* The signed value of largest magnitude among n. */
static float signed_max(const float *x, int n)
{
	float mx = 0;
	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > fabsf(mx))
			mx = x[i];
	return mx;
}

static void range(const float *x, int n, float *lo, float *hi)
{
	*lo = *hi = x[0];
	for (int i = 1; i < n; i++) {
		*lo = fminf(*lo, x[i]);
		*hi = fmaxf(*hi, x[i]);
	}
}

/* Nearest of the 16 IQ4_NL levels to v (in units of the scale). */
static int iq4_nearest(float v)
{
	int best = 0;
	for (int k = 1; k < 16; k++)
		if (fabsf(v - hs__iq4nl_values[k]) < fabsf(v - hs__iq4nl_values[best]))
			best = k;
	return best;
}

/* 32-value blocks: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL (ggml's own rules for
 * the first four: d = max / -8 (-16), or (max - min) / 15 (31)). */
static void quant32(int type, const float *x, uint8_t *blk)
{
	const int bits = type == HS_TYPE_Q5_0 || type == HS_TYPE_Q5_1 ? 5 : 4;
	const int affine = type == HS_TYPE_Q4_1 || type == HS_TYPE_Q5_1;
	const int top = (1 << bits) - 1;
	float d, mn = 0, lo, hi;
	int q[32];
	uint32_t qh = 0;

	if (affine) {
		range(x, 32, &lo, &hi);
		d = (hi - lo) / (float)top;
		mn = lo;
	} else if (type == HS_TYPE_IQ4_NL) {
		d = signed_max(x, 32) / -127.0f;
	} else {
		d = signed_max(x, 32) / (float)-(1 << (bits - 1));
	}
	const float id = d != 0 ? 1.0f / d : 0.0f;
	for (int i = 0; i < 32; i++) {
		if (type == HS_TYPE_IQ4_NL)
			q[i] = iq4_nearest(x[i] * id);
		else if (affine)
			q[i] = clampi(near((x[i] - mn) * id), 0, top);
		else
			q[i] = clampi(near(x[i] * id) + (1 << (bits - 1)), 0, top);
	}
	uint16_t hd = hs__fp32_to_fp16(d), hm = hs__fp32_to_fp16(mn);
	memcpy(blk, &hd, 2);
	uint8_t *p = blk + 2;
	if (affine) {
		memcpy(p, &hm, 2);
		p += 2;
	}
	if (bits == 5) {
		for (int i = 0; i < 32; i++)
			qh |= (uint32_t)(q[i] >> 4 & 1) << i;
		memcpy(p, &qh, 4);
		p += 4;
	}
	for (int j = 0; j < 16; j++)
		p[j] = (uint8_t)((q[j] & 0xf) | (q[j + 16] & 0xf) << 4);
}

/* Q4_K / Q5_K: per sub-block of 32 a scale (hi - lo) / top and a min -lo
 * (lo <= 0), both as 6-bit multiples of the super-block's d and dmin. */
static void quant_q45_k(int five, const float *x, uint8_t *blk)
{
	const int top = five ? 31 : 15;
	float sc[8], mn[8], dmax = 0, mmax = 0;
	int isc[8], imn[8];

	for (int j = 0; j < 8; j++) {
		float lo, hi;
		range(x + 32 * j, 32, &lo, &hi);
		lo = fminf(lo, 0);
		sc[j] = (hi - lo) / (float)top;
		mn[j] = -lo;
		dmax = fmaxf(dmax, sc[j]);
		mmax = fmaxf(mmax, mn[j]);
	}
	uint16_t hd = hs__fp32_to_fp16(dmax / 63), hdm = hs__fp32_to_fp16(mmax / 63);
	const float d = hs__fp16_to_fp32(hd), dmin = hs__fp16_to_fp32(hdm);
	for (int j = 0; j < 8; j++) {
		isc[j] = d > 0 ? clampi(near(sc[j] / d), 0, 63) : 0;
		imn[j] = dmin > 0 ? clampi(near(mn[j] / dmin), 0, 63) : 0;
	}
	memset(blk, 0, five ? 176 : 144);
	memcpy(blk, &hd, 2);
	memcpy(blk + 2, &hdm, 2);
	uint8_t *s = blk + 4;
	for (int j = 0; j < 8; j++) {
		if (j < 4) {
			s[j] = (uint8_t)(isc[j] & 63);
			s[j + 4] = (uint8_t)(imn[j] & 63);
		} else {
			s[j + 4] = (uint8_t)((isc[j] & 0xf) | (imn[j] & 0xf) << 4);
			s[j - 4] |= (uint8_t)((isc[j] >> 4) << 6);
			s[j] |= (uint8_t)((imn[j] >> 4) << 6);
		}
	}
	uint8_t *qh = blk + 16, *qs = blk + (five ? 48 : 16);
	for (int j = 0; j < 8; j++) {
		const float step = d * (float)isc[j], off = dmin * (float)imn[j];
		for (int l = 0; l < 32; l++) {
			int v = step > 0 ? clampi(near((x[32 * j + l] + off) / step), 0, top) : 0;
			qs[32 * (j / 2) + l] |= (uint8_t)((v & 0xf) << (4 * (j % 2)));
			if (five && v > 15)
				qh[l] |= (uint8_t)(1u << j);
		}
	}
}

/* Q6_K: int8 scales per 16 values (max / -32), against d = max|scale| / 127. */
static void quant_q6_k(const float *x, struct hs_block_q6_k *blk)
{
	float sc[16], amax = 0;
	for (int j = 0; j < 16; j++) {
		sc[j] = signed_max(x + 16 * j, 16) / -32.0f;
		amax = fmaxf(amax, fabsf(sc[j]));
	}
	memset(blk, 0, sizeof *blk);
	blk->d = hs__fp32_to_fp16(amax / 127);
	const float d = hs__fp16_to_fp32(blk->d);
	for (int j = 0; j < 16; j++)
		blk->scales[j] = (int8_t)(d > 0 ? clampi(near(sc[j] / d), -128, 127) : 0);
	for (int i = 0; i < 256; i++) {
		const int j = i / 32 % 8, n = j / 4, k = j % 4, l = i % 32;
		const float step = d * (float)blk->scales[i / 16];
		int v = step != 0 ? clampi(near(x[i] / step), -32, 31) + 32 : 32;
		blk->ql[64 * n + 32 * (k & 1) + l] |= (uint8_t)((v & 0xf) << (k < 2 ? 0 : 4));
		blk->qh[32 * n + l] |= (uint8_t)((v >> 4) << (2 * k));
	}
}

/* Q3_K: 6-bit signed scales per 16 values (max / -4), against d = max|scale| / 31. */
static void quant_q3_k(const float *x, struct hs_block_q3_k *blk)
{
	float sc[16], amax = 0;
	int isc[16];
	for (int j = 0; j < 16; j++) {
		sc[j] = signed_max(x + 16 * j, 16) / -4.0f;
		amax = fmaxf(amax, fabsf(sc[j]));
	}
	memset(blk, 0, sizeof *blk);
	blk->d = hs__fp32_to_fp16(amax / 31);
	const float d = hs__fp16_to_fp32(blk->d);
	for (int j = 0; j < 16; j++) {
		isc[j] = d > 0 ? clampi(near(sc[j] / d), -32, 31) : 0;
		int u = isc[j] + 32;
		blk->scales[j % 8] |= (uint8_t)((u & 0xf) << (j < 8 ? 0 : 4));
		blk->scales[8 + j % 4] |= (uint8_t)((u >> 4) << (2 * (j / 4)));
	}
	for (int i = 0; i < 256; i++) {
		const int j = i / 32 % 8, n = j / 4, k = j % 4, l = i % 32;
		const float step = d * (float)isc[i / 16];
		int v = step != 0 ? clampi(near(x[i] / step), -4, 3) + 4 : 4;
		blk->qs[32 * n + l] |= (uint8_t)((v & 3) << (2 * k));
		if (v & 4)
			blk->hmask[l] |= (uint8_t)(1u << (4 * n + k));
	}
}

/* Q2_K: per 16 values a 4-bit scale (hi - lo) / 3 and min -lo (lo <= 0). */
static void quant_q2_k(const float *x, struct hs_block_q2_k *blk)
{
	float sc[16], mn[16], dmax = 0, mmax = 0;
	for (int j = 0; j < 16; j++) {
		float lo, hi;
		range(x + 16 * j, 16, &lo, &hi);
		lo = fminf(lo, 0);
		sc[j] = (hi - lo) / 3;
		mn[j] = -lo;
		dmax = fmaxf(dmax, sc[j]);
		mmax = fmaxf(mmax, mn[j]);
	}
	memset(blk, 0, sizeof *blk);
	blk->d = hs__fp32_to_fp16(dmax / 15);
	blk->dmin = hs__fp32_to_fp16(mmax / 15);
	const float d = hs__fp16_to_fp32(blk->d), dmin = hs__fp16_to_fp32(blk->dmin);
	for (int j = 0; j < 16; j++) {
		int is = d > 0 ? clampi(near(sc[j] / d), 0, 15) : 0, im = dmin > 0 ? clampi(near(mn[j] / dmin), 0, 15) : 0;
		blk->scales[j] = (uint8_t)(is | im << 4);
	}
	for (int i = 0; i < 256; i++) {
		const int j = i / 32 % 8, n = j / 4, k = j % 4, l = i % 32;
		const uint8_t s = blk->scales[i / 16];
		const float step = d * (float)(s & 0xf), off = dmin * (float)(s >> 4);
		int v = step > 0 ? clampi(near((x[i] + off) / step), 0, 3) : 0;
		blk->qs[32 * n + l] |= (uint8_t)(v << (2 * k));
	}
}

/* IQ4_XS: per 32 values a 6-bit signed scale (max / -127) against d =
 * max|scale| / 32, values the nearest IQ4_NL level. */
static void quant_iq4_xs(const float *x, struct hs_block_iq4_xs *blk)
{
	float sc[8], amax = 0;
	for (int j = 0; j < 8; j++) {
		sc[j] = signed_max(x + 32 * j, 32) / -127.0f;
		amax = fmaxf(amax, fabsf(sc[j]));
	}
	memset(blk, 0, sizeof *blk);
	blk->d = hs__fp32_to_fp16(amax / 32);
	const float d = hs__fp16_to_fp32(blk->d);
	for (int j = 0; j < 8; j++) {
		int ls = d > 0 ? clampi(near(sc[j] / d), -32, 31) : 0;
		int u = ls + 32;
		blk->scales_l[j / 2] |= (uint8_t)((u & 0xf) << (4 * (j % 2)));
		blk->scales_h |= (uint16_t)((u >> 4) << (2 * j));
		const float step = d * (float)ls, id = step != 0 ? 1.0f / step : 0.0f;
		for (int l = 0; l < 16; l++) {
			int lo = iq4_nearest(x[32 * j + l] * id), hi = iq4_nearest(x[32 * j + l + 16] * id);
			blk->qs[16 * j + l] = (uint8_t)(lo | hi << 4);
		}
	}
}

void hs__quantize_row_other(int type, const float *src, void *dst, size_t n)
{
	uint8_t *o = dst;
	const size_t bv = hs__type_block_values(type), bb = hs__type_block_bytes(type);

	if (!hs__type_supported(type) || bv == 1)
		return;
	for (size_t b = 0; b < n / bv; b++) {
		const float *x = src + b * bv;
		uint8_t *blk = o + b * bb;
		union any_block c; /* built aligned, then copied to where the row is */
		switch (type) {
		case HS_TYPE_Q4_K: quant_q45_k(0, x, blk); continue;
		case HS_TYPE_Q5_K: quant_q45_k(1, x, blk); continue;
		case HS_TYPE_Q6_K: quant_q6_k(x, &c.q6); break;
		case HS_TYPE_Q3_K: quant_q3_k(x, &c.q3); break;
		case HS_TYPE_Q2_K: quant_q2_k(x, &c.q2); break;
		case HS_TYPE_IQ4_XS: quant_iq4_xs(x, &c.iq4); break;
		default: quant32(type, x, blk); continue;
		}
		memcpy(blk, c.raw, bb);
	}
}
