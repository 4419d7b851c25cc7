/* The outer loop of a SIMD attend, shared by the tiers: the visible cells
 * of [c0, c1) are gathered into blocks of up to B, and each block goes to
 * the tier's attend_block(t, idx, nv, B, kf, vf, sc) with f32 scratch for
 * B rows of K and V and the g x B scores.  Define before including:
 * ATTEND (the function's name) and ATTEND_B(head_dim) (cells per block,
 * at most 32, a multiple of the tier's score group). */
#ifndef HS_DENSE_ATTEND_H
#define HS_DENSE_ATTEND_H

/* not static: the AVX-512 tier falls back on the AVX2 one */
void ATTEND(const struct hs_attn_tile *t);
void ATTEND(const struct hs_attn_tile *t)
{
	const int B = ATTEND_B(t->head_dim);
	float kf[HS_ATTN_BLOCK_VALUES], vf[HS_ATTN_BLOCK_VALUES], sc[HS_ATTN_MAX_GROUP * 32];
	int idx[32], nv = 0;

	for (int c = t->c0; c < t->c1; c++) {
		const int32_t p = t->cell_pos[c];
		if (p >= t->pos_lo && p <= t->pos_hi)
			idx[nv++] = c;
		if (nv == B) {
			attend_block(t, idx, nv, B, kf, vf, sc);
			nv = 0;
		}
	}
	if (nv)
		attend_block(t, idx, nv, B, kf, vf, sc);
}

#endif
