// Helpers the .cu files share: ggml block layouts, f16/bf16 conversion,
// the Q8_0 quantizer, int8 dot products and warp reductions.  Everything
// that is arithmetic is __host__ __device__, so the emulation entries run
// the very code the kernels run (see moe.cu, dense.cu).
#ifndef HS_GPU_COMMON_CUH
#define HS_GPU_COMMON_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define HD __host__ __device__
// A loop the device compiler must unroll: register tiles indexed by its
// counter otherwise live in local memory (ptxas: a stack frame); the host
// compiler does not know the pragma.
#ifdef __CUDA_ARCH__
#define UNROLL _Pragma("unroll")
#else
#define UNROLL
#endif
#define QK 32
#define MXFP4_BYTES 17
#define Q8_BYTES 34
// ggml type ids
#define TYPE_F32 0
#define TYPE_F16 1
#define TYPE_Q8_0 8
#define TYPE_BF16 30
#define TYPE_MXFP4 39

// ggml's kvalues_mxfp4: twice the e2m1 values { 0, 1, 2, 3, 4, 6, 8, 12 },
// negated when bit 3 is set, paired with a scale of 2^(e-128).  The
// magnitudes are nibbles of one 32-bit constant: a shift and a mask in
// registers, where an array would be a stack store and load per value
// (local memory: ptxas reported a 16-byte stack frame for the table).
HD static inline int mxfp4_value(int nibble)
{
	const int mag = (int)((0xC8643210u >> (4 * (nibble & 7))) & 15u);
	return nibble & 8 ? -mag : mag;
}

HD static inline float half_bits_to_float(unsigned short v)
{
	return __half2float(__ushort_as_half(v));
}

HD static inline float half_at(const unsigned char *p)
{
	return half_bits_to_float((unsigned short)(p[0] | (p[1] << 8)));
}

HD static inline float bf16_bits_to_float(unsigned short v)
{
	unsigned u = (unsigned)v << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

// f32 -> f16 bits, round to nearest even (as F16C and ggml)
HD static inline unsigned short float_to_half_bits(float x)
{
	return __half_as_ushort(__float2half_rn(x));
}

// f32 -> bf16 bits, round to nearest even; NaN stays a (quiet) NaN
HD static inline unsigned short float_to_bf16_bits(float x)
{
	unsigned u;
	memcpy(&u, &x, 4);
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (unsigned short)((u >> 16) | 0x40);
	return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// A weight block as 32 int8 values and its scale (Q8_0 or MXFP4).
HD static inline float unpack_block(int type, const unsigned char *w, int8_t v[QK])
{
	if (type == TYPE_MXFP4) {
		for (int j = 0; j < 16; j++) {
			v[j] = (int8_t)mxfp4_value(w[1 + j] & 15);
			v[j + 16] = (int8_t)mxfp4_value(w[1 + j] >> 4);
		}
		return ldexpf(1.0f, (int)w[0] - 128);
	}
	memcpy(v, w + 2, QK);
	return half_at(w);
}

HD static inline int dot32(const int8_t *a, const int8_t *b)
{
	int s = 0;
#ifdef __CUDA_ARCH__
	for (int j = 0; j < QK; j += 4) {
		int x, y;
		memcpy(&x, a + j, 4);
		memcpy(&y, b + j, 4);
		s = __dp4a(x, y, s);
	}
#else
	for (int j = 0; j < QK; j++)
		s += a[j] * b[j];
#endif
	return s;
}

HD static inline int block_bytes(int type)
{
	return type == TYPE_MXFP4 ? MXFP4_BYTES : Q8_BYTES;
}

// ggml's Q8_0 quantizer: d = amax / 127 stored as f16, values rounded to
// nearest even of v / d (the CPU's quantize_q8_0 rounds the same way).
HD static inline void quantize_block(const float *v, unsigned char *o)
{
	float amax = 0;
	for (int j = 0; j < QK; j++)
		amax = fmaxf(amax, fabsf(v[j]));
	float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
	unsigned short hd = float_to_half_bits(d);
	o[0] = (unsigned char)(hd & 0xff);
	o[1] = (unsigned char)(hd >> 8);
	for (int j = 0; j < QK; j++)
		((signed char *)o)[2 + j] = (signed char)rintf(v[j] * id);
}

#ifdef __CUDACC__
__device__ static inline float warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_down_sync(0xffffffffu, v, o);
	return v;
}

// the sum on every lane (butterfly)
__device__ static inline float warp_allsum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}
#endif

#endif
