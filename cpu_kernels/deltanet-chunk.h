/* The chunked delta rule (deltanet.h), written once for its float forms:
 * the file that includes this defines DN_CHUNK (the function's name) and
 * its inner loops as static inline functions, then includes it:
 *   float dn_dot(const float *a, const float *b, int n)
 *   void dn_axpy(float *y, float a, const float *x, int n)      y += a x
 *   void dn_scal(float *y, float a, int n)                      y *= a
 *   void dn_s0_row(const float *Si, const float *k, const float *q,
 *                  size_t stride, int m, int dk, float *W, float *WQ, int dv)
 *       W[t dv] = Si . k_t, WQ[t dv] = Si . q_t for t < m (k_t = k + t stride)
 *   void dn_state_row(float *Si, float eL, const float *c, size_t c_stride,
 *                     const float *k, size_t stride, int m, int dk)
 *       Si = eL Si + sum_{s<m} c[s c_stride] k_s
 * cpu_kernels/deltanet.c (portable) and arch/x86/deltanet-avx2.c include
 * it: the same steps, in another float order. */
void DN_CHUNK(const struct hs_dn_job *j, int ith, int nth)
{
	const int dk = j->dk, dv = j->dv, L = HS_DN_CHUNK;
	float *const sc = j->scratch + (size_t)ith * hs__dn_scratch_floats(dv);
	float *KK = sc, *QK = KK + L * L, *U = QK + L * L, *W = U + (size_t)L * dv, *WQ = W + (size_t)L * dv,
	      *G = WQ + (size_t)L * dv, *E = G + L;
	long lo, hi;
	hs__share(j->n_v_heads, ith, nth, &lo, &hi);
	for (long h = lo; h < hi; h++) {
		float *S = j->state + (size_t)h * dv * dk;
		const long kh = h % j->n_k_heads;
		for (int c0 = 0; c0 < j->n; c0 += L) {
			const int m = j->n - c0 < L ? j->n - c0 : L;
			const float *q0 = j->q + (size_t)c0 * j->qk_stride + kh * dk, *k0 = j->k + (size_t)c0 * j->qk_stride + kh * dk;
#define QT(t) (q0 + (size_t)(t) * j->qk_stride)
#define KT(t) (k0 + (size_t)(t) * j->qk_stride)
			float acc = 0;
			for (int t = 0; t < m; t++) {
				acc += j->g[(size_t)(c0 + t) * j->n_v_heads + h];
				G[t] = acc;
			}
			for (int t = 0; t < m; t++)
				for (int s = 0; s <= t; s++) {
					KK[t * L + s] = dn_dot(KT(t), KT(s), dk);
					QK[t * L + s] = dn_dot(QT(t), KT(s), dk);
				}
			/* S0 k_t and S0 q_t, row by row of S */
			for (int i = 0; i < dv; i++)
				dn_s0_row(S + (size_t)i * dk, k0, q0, j->qk_stride, m, dk, W + i, WQ + i, dv);
			/* the triangular solve for u, then the outputs */
			for (int t = 0; t < m; t++) {
				const float b = j->beta[(size_t)(c0 + t) * j->n_v_heads + h], et = expf(G[t]);
				const float *v = j->v + (size_t)(c0 + t) * j->v_stride + h * dv;
				float *u = U + (size_t)t * dv;
				for (int s = 0; s <= t; s++) /* e^{G_t - G_s}, once for both sums */
					E[s] = expf(G[t] - G[s]);
				for (int i = 0; i < dv; i++)
					u[i] = v[i] - et * W[(size_t)t * dv + i];
				for (int s = 0; s < t; s++)
					dn_axpy(u, -(E[s] * KK[t * L + s]), U + (size_t)s * dv, dv);
				dn_scal(u, b, dv);
				float *o = j->out + (size_t)(c0 + t) * j->out_stride + h * dv;
				for (int i = 0; i < dv; i++)
					o[i] = et * WQ[(size_t)t * dv + i];
				for (int s = 0; s <= t; s++)
					dn_axpy(o, E[s] * QK[t * L + s], U + (size_t)s * dv, dv);
				dn_scal(o, j->scale, dv);
			}
			/* the state at the chunk's end: c_s = e^{G_L - G_s} u_s[i] */
			const float eL = expf(G[m - 1]);
			for (int s = 0; s < m; s++)
				G[s] = expf(G[m - 1] - G[s]); /* G is not needed past here */
			for (int s = 0; s < m; s++)
				for (int i = 0; i < dv; i++)
					U[(size_t)s * dv + i] *= G[s];
			for (int i = 0; i < dv; i++)
				dn_state_row(S + (size_t)i * dk, eL, U + i, (size_t)dv, k0, j->qk_stride, m, dk);
#undef QT
#undef KT
		}
	}
}
