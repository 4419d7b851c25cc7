/* qwen35moe's parts of the forward pass (forward.h): the Gated DeltaNet
 * mixer with its per-sequence states, the sigmoid output gate of its full
 * attention layers and the gated shared expert.  Matrix products go
 * through the backend's matmul (weights in its memory); the convolution,
 * the delta rule and the element-wise steps run on the host, on the
 * runtime's pool (the reference backend: their double twins on this
 * thread).  A sequence's run of tokens in a ubatch goes through the delta
 * rule in chunks, a single token one step (cpu_kernels/deltanet.h: the same
 * numbers either way). */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu_kernels/deltanet.h"
#include "model/model.h"
#include "runtime/forward.h"
#include "runtime/pool.h"

struct hs_q35 {
	int n_dn;                  /* DeltaNet layers */
	int *dn_index;             /* [n_layers]: index among them, or -1 */
	int conv_ch, val, fs;      /* convolution channels, value width nv dh, widest shared expert */
	size_t conv_floats, ssm_floats; /* one sequence's states of one layer */
	float *conv_state, *ssm_state;  /* [n_seq][n_dn][...], host */
	/* backend buffers */
	float *qkv, *z, *beta, *alpha, *dout, *qg, *sg, *su;
	/* host buffers */
	float *hqkv, *hconv, *hz, *hbeta, *halpha, *hg, *hb, *hout, *hq, *hgate, *hqg, *hsg, *hsu, *hsd;
	float *dn_scratch;         /* hs__dn_scratch_floats(dh) per pool thread */
};

static size_t a64(size_t b)
{
	return (b + 63) & ~(size_t)63;
}

static float *hbuf(size_t floats)
{
	size_t b = a64(floats * sizeof(float) + 1);
	float *p = aligned_alloc(64, b);
	if (p)
		memset(p, 0, b);
	return p;
}

static int bbuf(struct hs_fwd *f, size_t floats, float **p)
{
	return f->be->alloc(f, a64(floats * sizeof(float) + 1), (void **)p);
}

int hs__q35_init(struct hs_fwd *f)
{
	const struct hs_hparams *hp = f->hp;
	const struct hs_whole *w = f->w;
	int any = 0, rc;

	for (int l = 0; l < hp->n_layers; l++)
		any |= w->layers[l].attn_gate || w->layers[l].q35.recurrent || w->layers[l].q35.sh_up.data != NULL;
	if (!any)
		return 0;
	struct hs_q35 *Q = calloc(1, sizeof *Q);
	if (!Q || !(Q->dn_index = malloc(sizeof *Q->dn_index * (size_t)hp->n_layers))) {
		free(Q);
		return hs__error(ENOMEM, "context: out of memory");
	}
	f->q35 = Q;
	for (int l = 0; l < hp->n_layers; l++) {
		const struct hs_q35_layer *L = &w->layers[l].q35;
		Q->dn_index[l] = L->recurrent ? Q->n_dn++ : -1;
		if (L->sh_up.data && L->sh_up.rows > Q->fs)
			Q->fs = L->sh_up.rows;
	}
	const size_t ub = (size_t)f->ubatch, d = (size_t)hp->n_embd, qd = (size_t)hp->n_head * hp->head_dim;
	Q->val = hp->ssm_nv * hp->ssm_dh;
	Q->conv_ch = 2 * hp->ssm_nk * hp->ssm_dh + Q->val;
	Q->conv_floats = Q->n_dn ? (size_t)(hp->ssm_conv - 1) * Q->conv_ch : 0;
	Q->ssm_floats = Q->n_dn ? (size_t)hp->ssm_nv * hp->ssm_dh * hp->ssm_dh : 0;
	const size_t conv = (size_t)Q->conv_ch, val = (size_t)Q->val, nv = (size_t)hp->ssm_nv, fs = (size_t)Q->fs;
	const size_t seqs = (size_t)f->n_seq * Q->n_dn;
	const int nth = hs__pool_size(f->rt->pool);
	if ((rc = bbuf(f, ub * conv, &Q->qkv)) || (rc = bbuf(f, ub * val, &Q->z)) || (rc = bbuf(f, ub * nv, &Q->beta)) ||
	    (rc = bbuf(f, ub * nv, &Q->alpha)) || (rc = bbuf(f, ub * val, &Q->dout)) ||
	    (rc = bbuf(f, ub * 2 * qd, &Q->qg)) || (rc = bbuf(f, ub * fs, &Q->sg)) || (rc = bbuf(f, ub * fs, &Q->su)))
		return rc;
	if (!(Q->conv_state = hbuf(seqs * Q->conv_floats)) || !(Q->ssm_state = hbuf(seqs * Q->ssm_floats)) ||
	    !(Q->hqkv = hbuf(ub * conv)) || !(Q->hconv = hbuf(ub * conv)) || !(Q->hz = hbuf(ub * val)) ||
	    !(Q->hbeta = hbuf(ub * nv)) || !(Q->halpha = hbuf(ub * nv)) || !(Q->hg = hbuf(ub * nv)) ||
	    !(Q->hb = hbuf(ub * nv)) || !(Q->hout = hbuf(ub * val)) || !(Q->hq = hbuf(ub * qd)) ||
	    !(Q->hgate = hbuf(ub * qd)) || !(Q->hqg = hbuf(ub * 2 * qd)) || !(Q->hsg = hbuf(ub * fs)) ||
	    !(Q->hsu = hbuf(ub * fs)) || !(Q->hsd = hbuf(ub * d)) ||
	    !(Q->dn_scratch = hbuf((size_t)(nth > 0 ? nth : 1) * (Q->n_dn ? hs__dn_scratch_floats(hp->ssm_dh) : 0))))
		return hs__error(ENOMEM, "context: out of memory for the DeltaNet states and buffers");
	f->kv_bytes += sizeof(float) * seqs * (Q->conv_floats + Q->ssm_floats);
	return 0;
}

void hs__q35_free(struct hs_fwd *f)
{
	struct hs_q35 *Q = f->q35;
	if (!Q)
		return;
	float *b[] = { Q->qkv, Q->z, Q->beta, Q->alpha, Q->dout, Q->qg, Q->sg, Q->su };
	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
		if (b[i])
			f->be->free(f, b[i]);
	float *h[] = { Q->conv_state, Q->ssm_state, Q->hqkv, Q->hconv, Q->hz,  Q->hbeta, Q->halpha, Q->hg, Q->hb,
		       Q->hout,       Q->hq,        Q->hgate, Q->hqg,  Q->hsg, Q->hsu,   Q->hsd,    Q->dn_scratch };
	for (size_t i = 0; i < sizeof h / sizeof h[0]; i++)
		free(h[i]);
	free(Q->dn_index);
	free(Q);
	f->q35 = NULL;
}

size_t hs__q35_scratch(struct hs_fwd *f)
{
	size_t need = 0;
	for (int l = 0; l < f->hp->n_layers; l++) {
		struct hs_weight *m[8];
		int n = hs__q35_matrices((struct hs_dense_layer *)&f->w->layers[l], m);
		for (int i = 0; i < n; i++) {
			size_t b = f->be->matmul_scratch(f, m[i]->type, m[i]->cols, f->ubatch);
			need = b > need ? b : need;
		}
	}
	return need;
}

void hs__q35_forget(struct hs_fwd *f, int seq)
{
	struct hs_q35 *Q = f->q35;
	if (!Q || !Q->n_dn)
		return;
	memset(Q->conv_state + (size_t)seq * Q->n_dn * Q->conv_floats, 0, sizeof(float) * Q->n_dn * Q->conv_floats);
	memset(Q->ssm_state + (size_t)seq * Q->n_dn * Q->ssm_floats, 0, sizeof(float) * Q->n_dn * Q->ssm_floats);
}

size_t hs__q35_state_floats(const struct hs_fwd *f)
{
	const struct hs_q35 *Q = f->q35;
	return Q && Q->n_dn ? (size_t)Q->n_dn * (Q->conv_floats + Q->ssm_floats) : 0;
}

void hs__q35_state_copy(struct hs_fwd *f, int seq, float *buf, int save)
{
	struct hs_q35 *Q = f->q35;
	if (!Q || !Q->n_dn)
		return;
	const size_t nc = (size_t)Q->n_dn * Q->conv_floats, ns = (size_t)Q->n_dn * Q->ssm_floats;
	float *conv = Q->conv_state + (size_t)seq * nc, *ssm = Q->ssm_state + (size_t)seq * ns;
	if (save) {
		memcpy(buf, conv, sizeof(float) * nc);
		memcpy(buf + nc, ssm, sizeof(float) * ns);
	} else {
		memcpy(conv, buf, sizeof(float) * nc);
		memcpy(ssm, buf + nc, sizeof(float) * ns);
	}
}

/* ---- the DeltaNet mixer ------------------------------------------------------ */

struct dn_ctx {
	const struct hs_hparams *hp;
	const struct hs_q35_layer *L; /* host vectors */
	struct hs_q35 *Q;
	struct hs_pool *pool;
	int a, m, ref;             /* tokens [a, a + m) of one sequence */
	float *conv_state;
	struct hs_dn_job job;
};

static double softplus(double x)
{
	return x > 20 ? x : log1p(exp(x)); /* ggml's threshold */
}

/* l2-normed q and k heads, the decay and beta of tokens [t0, t1) */
static void dn_prep(struct dn_ctx *c, long t0, long t1)
{
	const struct hs_hparams *hp = c->hp;
	const int dh = hp->ssm_dh, nv = hp->ssm_nv;
	for (long t = t0; t < t1; t++) {
		float *row = c->Q->hconv + (size_t)(c->a + t) * c->Q->conv_ch;
		for (int h = 0; h < 2 * hp->ssm_nk; h++) { /* q heads, then k heads */
			float *x = row + (size_t)h * dh;
			double s = 0;
			for (int i = 0; i < dh; i++)
				s += (double)x[i] * x[i];
			double r = sqrt(s);
			const double scale = 1.0 / (r > hp->eps ? r : hp->eps);
			for (int i = 0; i < dh; i++)
				x[i] = (float)(x[i] * scale);
		}
		const size_t o = (size_t)(c->a + t) * nv;
		for (int h = 0; h < nv; h++) {
			c->Q->hg[o + h] = (float)(softplus((double)c->Q->halpha[o + h] + c->L->dt_bias[h]) * c->L->a[h]);
			c->Q->hb[o + h] = (float)(1.0 / (1.0 + exp(-(double)c->Q->hbeta[o + h])));
		}
	}
}

/* out = rmsnorm(o) * ssm_norm * silu(z) for head rows [r0, r1) */
static void dn_norm(struct dn_ctx *c, long r0, long r1)
{
	const int dh = c->hp->ssm_dh;
	for (long r = r0; r < r1; r++) {
		const size_t off = (size_t)c->a * c->Q->val + (size_t)r * dh;
		float *o = c->Q->hout + off;
		const float *z = c->Q->hz + off;
		double s = 0;
		for (int i = 0; i < dh; i++)
			s += (double)o[i] * o[i];
		const double inv = 1.0 / sqrt(s / dh + c->hp->eps);
		for (int i = 0; i < dh; i++) {
			const double zi = z[i];
			o[i] = (float)(o[i] * inv * c->L->norm[i] * (zi / (1.0 + exp(-zi))));
		}
	}
}

static void dn_steps(void *ctx, int ith, int nth)
{
	struct dn_ctx *c = ctx;
	struct hs_q35 *Q = c->Q;
	const int C = Q->conv_ch;
	long lo, hi;

	hs__dn_conv(c->L->conv, C, c->hp->ssm_conv, c->conv_state, c->m, Q->hqkv + (size_t)c->a * C, C,
		    Q->hconv + (size_t)c->a * C, C, ith, nth);
	hs__pool_barrier(c->pool);
	hs__share(c->m, ith, nth, &lo, &hi);
	dn_prep(c, lo, hi);
	hs__pool_barrier(c->pool);
	if (c->m > 1)
		hs__dn_chunk(&c->job, ith, nth);
	else
		hs__dn_step(&c->job, ith, nth);
	hs__pool_barrier(c->pool);
	hs__share((long)c->m * c->hp->ssm_nv, ith, nth, &lo, &hi);
	dn_norm(c, lo, hi);
}

static void dn_ref(struct dn_ctx *c)
{
	struct hs_q35 *Q = c->Q;
	const int C = Q->conv_ch;
	hs__dn_conv_ref(c->L->conv, C, c->hp->ssm_conv, c->conv_state, c->m, Q->hqkv + (size_t)c->a * C, C,
			Q->hconv + (size_t)c->a * C, C);
	dn_prep(c, 0, c->m);
	hs__dn_ref(&c->job);
	dn_norm(c, 0, (long)c->m * c->hp->ssm_nv);
}

int hs__q35_deltanet(struct hs_fwd *f, int l, int n, int n_groups, const int *g_start, const int32_t *seq)
{
	const struct hs_fwd_be *be = f->be;
	const struct hs_hparams *hp = f->hp;
	const struct hs_dense_layer *L = &f->w->layers[l];
	const struct hs_q35_layer *HL = &hs__model_whole(f->rt->m)->layers[l].q35;
	struct hs_q35 *Q = f->q35;
	const size_t d = hp->n_embd, C = Q->conv_ch, val = Q->val, nv = hp->ssm_nv, key = (size_t)hp->ssm_nk * hp->ssm_dh;
	const int li = Q->dn_index[l];
	int rc;

	if ((rc = be->rmsnorm(f, f->x, d, f->h, d, n, 1, hp->n_embd, L->attn_norm, hp->eps)) ||
	    (rc = be->matmul(f, &L->q35.qkv, NULL, n, f->h, d, Q->qkv, C)) ||
	    (rc = be->matmul(f, &L->q35.z, NULL, n, f->h, d, Q->z, val)) ||
	    (rc = be->matmul(f, &L->q35.beta, NULL, n, f->h, d, Q->beta, nv)) ||
	    (rc = be->matmul(f, &L->q35.alpha, NULL, n, f->h, d, Q->alpha, nv)) ||
	    (rc = be->download(f, Q->hqkv, Q->qkv, sizeof(float) * n * C)) ||
	    (rc = be->download(f, Q->hz, Q->z, sizeof(float) * n * val)) ||
	    (rc = be->download(f, Q->hbeta, Q->beta, sizeof(float) * n * nv)) ||
	    (rc = be->download(f, Q->halpha, Q->alpha, sizeof(float) * n * nv)))
		return rc;
	for (int g = 0; g < n_groups; g++) {
		const int a = g_start[g], m = g_start[g + 1] - a, s = seq[a];
		const size_t si = (size_t)s * Q->n_dn + li;
		struct dn_ctx c = { .hp = hp, .L = HL, .Q = Q, .pool = f->rt->pool, .a = a, .m = m,
				    .conv_state = Q->conv_state + si * Q->conv_floats };
		c.job = (struct hs_dn_job){ .n = m, .n_k_heads = hp->ssm_nk, .n_v_heads = hp->ssm_nv, .dk = hp->ssm_dh,
					    .dv = hp->ssm_dh, .q = Q->hconv + (size_t)a * C, .k = Q->hconv + (size_t)a * C + key,
					    .qk_stride = C, .v = Q->hconv + (size_t)a * C + 2 * key, .v_stride = C,
					    .g = Q->hg + (size_t)a * nv, .beta = Q->hb + (size_t)a * nv,
					    .scale = 1.0f / sqrtf((float)hp->ssm_dh),
					    .state = Q->ssm_state + si * Q->ssm_floats, .out = Q->hout + (size_t)a * val,
					    .out_stride = val, .scratch = Q->dn_scratch };
		if (be->reference)
			dn_ref(&c);
		else
			hs__pool_run(f->rt->pool, dn_steps, &c);
	}
	if ((rc = be->upload(f, Q->dout, Q->hout, sizeof(float) * n * val)) ||
	    (rc = be->matmul(f, &L->q35.out, NULL, n, Q->dout, val, f->t, d)) || (rc = be->add(f, f->x, f->t, (size_t)n * d)))
		return rc;
	return 0;
}

/* ---- gated attention ------------------------------------------------------------ */

float *hs__q35_qg(struct hs_fwd *f)
{
	return f->q35->qg;
}

int hs__q35_split_q(struct hs_fwd *f, int n)
{
	struct hs_q35 *Q = f->q35;
	const int D = f->hp->head_dim, nh = f->hp->n_head;
	const size_t qd = (size_t)nh * D;
	int rc = f->be->download(f, Q->hqg, Q->qg, sizeof(float) * n * 2 * qd);
	if (rc)
		return rc;
	for (int t = 0; t < n; t++)
		for (int h = 0; h < nh; h++) {
			const float *src = Q->hqg + (size_t)t * 2 * qd + (size_t)h * 2 * D;
			memcpy(Q->hq + t * qd + (size_t)h * D, src, sizeof(float) * D);
			memcpy(Q->hgate + t * qd + (size_t)h * D, src + D, sizeof(float) * D);
		}
	return f->be->upload(f, f->q, Q->hq, sizeof(float) * n * qd);
}

int hs__q35_gate_out(struct hs_fwd *f, int n)
{
	struct hs_q35 *Q = f->q35;
	const size_t all = (size_t)n * f->hp->n_head * f->hp->head_dim;
	int rc = f->be->download(f, Q->hq, f->o, sizeof(float) * all);
	if (rc)
		return rc;
	for (size_t i = 0; i < all; i++)
		Q->hq[i] = (float)(Q->hq[i] / (1.0 + exp(-(double)Q->hgate[i])));
	return f->be->upload(f, f->o, Q->hq, sizeof(float) * all);
}

/* ---- the shared expert ---------------------------------------------------------- */

int hs__q35_shared(struct hs_fwd *f, int l, int n)
{
	const struct hs_fwd_be *be = f->be;
	const struct hs_hparams *hp = f->hp;
	const struct hs_q35_layer *L = &f->w->layers[l].q35;
	const struct hs_q35_layer *HL = &hs__model_whole(f->rt->m)->layers[l].q35;
	struct hs_q35 *Q = f->q35;
	const size_t d = hp->n_embd;
	int rc;

	if (hp->expert_scale != 1)
		for (size_t i = 0; i < (size_t)n * d; i++)
			f->hy[i] *= hp->expert_scale;
	if (!Q || !L->sh_up.data)
		return 0;
	const size_t fs = (size_t)L->sh_up.rows;
	if ((rc = be->matmul(f, &L->sh_gate, NULL, n, f->h, d, Q->sg, fs)) ||
	    (rc = be->matmul(f, &L->sh_up, NULL, n, f->h, d, Q->su, fs)) ||
	    (rc = be->download(f, Q->hsg, Q->sg, sizeof(float) * n * fs)) ||
	    (rc = be->download(f, Q->hsu, Q->su, sizeof(float) * n * fs)))
		return rc;
	for (size_t i = 0; i < (size_t)n * fs; i++) {
		const double g = Q->hsg[i];
		Q->hsg[i] = (float)(g / (1.0 + exp(-g)) * Q->hsu[i]);
	}
	if ((rc = be->upload(f, Q->sg, Q->hsg, sizeof(float) * n * fs)) ||
	    (rc = be->matmul(f, &L->sh_down, NULL, n, Q->sg, fs, f->t, d)) ||
	    (rc = be->download(f, Q->hsd, f->t, sizeof(float) * n * d)))
		return rc;
	for (int t = 0; t < n; t++) {
		double s = 0;
		for (size_t i = 0; i < d; i++)
			s += (double)f->hh[t * d + i] * HL->sh_inp[i];
		const float gate = (float)(1.0 / (1.0 + exp(-s)));
		for (size_t i = 0; i < d; i++)
			f->hy[t * d + i] += gate * Q->hsd[t * d + i];
	}
	return 0;
}
