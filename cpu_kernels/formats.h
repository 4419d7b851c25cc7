/* ggml block formats, bit for bit: type ids as in GGUF files, block sizes,
 * scalar reference conversions (dequantize to f32, quantize from f32). */
#ifndef HS_FORMATS_H
#define HS_FORMATS_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids (ggml.h enum ggml_type) hotset knows. */
enum hs_type {
	HS_TYPE_F32 = 0,
	HS_TYPE_F16 = 1,
	HS_TYPE_Q8_0 = 8,
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

_Static_assert(sizeof(struct hs_block_q8_0) == 34, "Q8_0 block is 34 bytes");
_Static_assert(sizeof(struct hs_block_mxfp4) == 17, "MXFP4 block is 17 bytes");

/* E2M1 values doubled, so that they are integers (the scale halves them). */
extern const int8_t hs__mxfp4_values[16];

/* Known type?  Name ("mxfp4", "q8_0", "f16", "bf16", "f32") or NULL. */
const char *hs__type_name(int type);
/* Type id for a name, or -1. */
int hs__type_from_name(const char *name);
/* Values per block (1 for float types) and bytes per block; 0 if unknown. */
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
 * size for block types).  Quantizers follow ggml's rules: Q8_0 scale
 * amax/127, round to nearest; MXFP4 exponent floor(log2(amax)) - 2 + 127,
 * nearest of the 16 values. */
void hs__dequantize_row_ref(int type, const void *src, float *dst, size_t n);
void hs__quantize_row_ref(int type, const float *src, void *dst, size_t n);

#endif
