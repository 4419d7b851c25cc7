/* ggml block formats, bit for bit: type ids as in GGUF files, block sizes,
 * scalar reference conversions (dequantize to f32, quantize from f32). */
#ifndef HS_FORMATS_H
#define HS_FORMATS_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids (ggml.h enum ggml_type) of the types hotset computes with.
 * Other ggml types have names and block sizes below (so a file holding
 * them parses and the error names them) but no arithmetic. */
enum hs_type {
	HS_TYPE_F32 = 0,
	HS_TYPE_F16 = 1,
	HS_TYPE_Q4_0 = 2,
	HS_TYPE_Q4_1 = 3,
	HS_TYPE_Q5_0 = 6,
	HS_TYPE_Q5_1 = 7,
	HS_TYPE_Q8_0 = 8,
	HS_TYPE_Q2_K = 10,
	HS_TYPE_Q3_K = 11,
	HS_TYPE_Q4_K = 12,
	HS_TYPE_Q5_K = 13,
	HS_TYPE_Q6_K = 14,
	HS_TYPE_IQ4_NL = 20,
	HS_TYPE_IQ4_XS = 23,
	HS_TYPE_BF16 = 30,
	HS_TYPE_MXFP4 = 39,
};

#define HS_QK 32 /* values per block of Q8_0 and MXFP4 */

/* Q8_0: fp16 scale d, then 32 int8; value = d * q. 34 bytes. */
struct hs_block_q8_0 {
	uint16_t d;
	int8_t qs[HS_QK];
};

/* MXFP4: E8M0 exponent e, then 16 bytes; element j (0..15) is the low
 * nibble of byte j, element j+16 its high nibble; a nibble indexes
 * hs__mxfp4_values, scaled by 2^(e-128). 17 bytes. */
struct hs_block_mxfp4 {
	uint8_t e;
	uint8_t qs[HS_QK / 2];
};

/* The other blocks, as ggml-common.h lays them out (fp16 fields as
 * uint16_t).  Blocks of 32 values: nibble j of qs is value j (low) and
 * j + 16 (high); Q5 types take a fifth bit from qh (bit j of the
 * little-endian u32 for value j).  Values: Q4_0 d(q - 8), Q4_1 dq + m,
 * Q5_0 d(q - 16), Q5_1 dq + m, IQ4_NL d * hs__iq4nl_values[q]. */
struct hs_block_q4_0 { uint16_t d; uint8_t qs[16]; };
struct hs_block_q4_1 { uint16_t d, m; uint8_t qs[16]; };
struct hs_block_q5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; };
struct hs_block_q5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[16]; };
struct hs_block_iq4_nl { uint16_t d; uint8_t qs[16]; };

/* K-quants: super-blocks of HS_QK_K = 256 values in sub-blocks of 16 or 32
 * with their own scales (and mins), the scales quantized against the
 * super-block's d (and dmin).  Which bits sit where is spelled out once, in
 * hs__unpack32_ref() (quants.c), the definition every kernel is checked
 * against. */
#define HS_QK_K 256
struct hs_block_q2_k { uint8_t scales[16]; uint8_t qs[64]; uint16_t d, dmin; };
struct hs_block_q3_k { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
struct hs_block_q4_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[128]; };
struct hs_block_q5_k { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
struct hs_block_q6_k { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
struct hs_block_iq4_xs { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };

_Static_assert(sizeof(struct hs_block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(struct hs_block_mxfp4) == 17, "MXFP4 block is 17 bytes");
_Static_assert(sizeof(struct hs_block_q4_0) == 18 && sizeof(struct hs_block_q4_1) == 20, "Q4_0, Q4_1");
_Static_assert(sizeof(struct hs_block_q5_0) == 22 && sizeof(struct hs_block_q5_1) == 24, "Q5_0, Q5_1");
_Static_assert(sizeof(struct hs_block_iq4_nl) == 18 && sizeof(struct hs_block_iq4_xs) == 136, "IQ4_NL, IQ4_XS");
_Static_assert(sizeof(struct hs_block_q2_k) == 84 && sizeof(struct hs_block_q3_k) == 110, "Q2_K, Q3_K");
_Static_assert(sizeof(struct hs_block_q4_k) == 144 && sizeof(struct hs_block_q5_k) == 176, "Q4_K, Q5_K");
_Static_assert(sizeof(struct hs_block_q6_k) == 210, "Q6_K");

/* ggml's kvalues_iq4nl: the 16 non-linear levels of IQ4_NL and IQ4_XS. */
extern const int8_t hs__iq4nl_values[16];

/* E2M1 values doubled, so that they are integers (the scale halves them). */
extern const int8_t hs__mxfp4_values[16];

/* Name of a ggml type id as ggml spells it ("q4_K", "iq4_xs", "mxfp4"...),
 * for every type ggml defines, or NULL for an unknown id. */
const char *hs__type_name(int type);
/* Type id for a name (any case), or -1. */
int hs__type_from_name(const char *name);
/* Whether hotset computes with the type (the enum above). */
int hs__type_supported(int type);
/* The supported types' names, comma-separated, for messages. */
const char *hs__type_supported_names(void);
/* Values per block (1 for float types) and bytes per block, for every
 * type ggml defines; 0 if unknown. */
size_t hs__type_block_values(int type);
size_t hs__type_block_bytes(int type);
/* Bytes of a row of n values (n a multiple of the block size), or 0 if n
 * does not fit the type. */
size_t hs__type_row_bytes(int type, uint64_t n);

float hs__fp16_to_fp32(uint16_t h);
uint16_t hs__fp32_to_fp16(float f);   /* round to nearest even, like F16C */
float hs__bf16_to_fp32(uint16_t h);
uint16_t hs__fp32_to_bf16(float f);   /* round to nearest even; NaN stays NaN */
float hs__e8m0_to_fp32_half(uint8_t e); /* 2^(e-128), exact, denormals included */

/* Reference conversions of one row of n values (n a multiple of the block
 * size for block types), for every supported type.  Dequantization is
 * ggml's arithmetic to the bit.  Quantizers: Q8_0 and MXFP4 follow ggml's
 * rules (Q8_0 scale amax/127, round to nearest; MXFP4 exponent
 * floor(log2(amax)) - 2 + 127, nearest of the 16 values); the others are
 * plain round-to-nearest quantizers (quants.c) that write valid blocks of
 * the format, without ggml's search for the best scales: they make test
 * models, never a user's file. */
void hs__dequantize_row_ref(int type, const void *src, float *dst, size_t n);
void hs__quantize_row_ref(int type, const float *src, void *dst, size_t n);

/* The 32 values of Q8_0-sized column block b (values 32b .. 32b + 31) of
 * a row of a block type other than Q8_0 and MXFP4, as small integers and
 * per-half affine scales: value i = s[i / 16] * q[i] - m[i / 16], in
 * float, exactly as ggml dequantizes it.  Every quantized dot product with
 * Q8_0 activations is defined by this split: per half h,
 * s[h] * sum(q x) - m[h] * sum(x) times the activation block's scale.
 * (The integer ranges: Q4_K 0..15, Q5_K 0..31, Q6_K -32..31, Q3_K -4..3,
 * Q2_K 0..3, IQ4 -127..113, Q4_0 -8..7, Q4_1 0..15, Q5_0 -16..15, Q5_1
 * 0..31.) */
void hs__unpack32_ref(int type, const void *row, int b, int8_t q[32], float s[2], float m[2]);

/* The scales and mins of scale unit u of such a row (super-block u of
 * the K-quants and IQ4_XS: 16 entries, one per 16 values; block u of the
 * 32-value types: 2 entries), as hs__unpack32_ref() gives them. */
void hs__unit_scales(int type, const void *row, int u, float *s, float *m);

/* The block types other than Q8_0 and MXFP4 (quants.c), for the two
 * functions above. */
void hs__dequantize_row_other(int type, const void *src, float *dst, size_t n);
void hs__quantize_row_other(int type, const float *src, void *dst, size_t n);

#endif
