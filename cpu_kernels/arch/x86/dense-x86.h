/* The x86 tiers' entry points that the AVX-512 table shares with the AVX2
 * one (compiled with AVX2 flags in dense-avx2.c).  The AVX-512 table is a
 * static constant so that asking whether the build carries it runs no
 * AVX-512 instruction. */
#ifndef HS_DENSE_X86_H
#define HS_DENSE_X86_H

#include <stdint.h>

struct hs_attn_tile;

void hs__tile_f_avx2(int type, const uint8_t *w, size_t row_bytes, int r0, int r1, int ncols, const float *const *x,
		     int nt, float *const *out);
void hs__dequant_row_avx2(int type, const void *src, float *dst, int n);
void hs__rmsnorm_row_avx2(const float *x, float *y, int n, const float *w, float eps);
void hs__rope_row_avx2(float *x, int n_rot, const float *cs);
void hs__to_f16_avx2(const float *x, uint16_t *y, int n);
void hs__attend_avx2(const struct hs_attn_tile *t);
uint64_t hs__xor_read_avx2(const void *p, size_t bytes, size_t ahead);

#endif
