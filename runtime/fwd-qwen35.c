/* qwen35moe's parts of the forward pass (forward.h): the Gated DeltaNet
 * mixer with its per-sequence states, the sigmoid output gate of its full
 * attention layers and the gated shared expert.  Matrix products go
 * through the backend's matmul (weights in its memory).  The mixer
 * (convolution, prep, delta rule, gated norm) runs where the backend's
 * memory is: a device backend's deltanet op on the device, the CPU
 * backend's forms on the runtime's pool, the reference backend's double
 * twins on this thread; the states live in the backend's memory.  A
 * sequence's run of tokens in a ubatch goes through the delta rule in
 * chunks on the CPU, a single token one step (cpu_kernels/deltanet.h: the
 * same numbers either way).  The output gate and the shared expert's gate
 * stay on the host. */
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
	/* backend buffers */
	float *conv_state, *ssm_state;  /* [n_seq][n_dn][...] */
	float *qkv, *conv, *z, *beta, *alpha, *g, *b, *dout, *qg, *sg, *su;
	/* host buffers */
	float *zeros;              /* max(conv_floats, ssm_floats), for forgetting */
	float *hq, *hgate, *hqg, *hsg, *hsu, *hsd;
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
	if ((rc = bbuf(f, seqs * Q->conv_floats, &Q->conv_state)) || (rc = bbuf(f, seqs * Q->ssm_floats, &Q->ssm_state)) ||
	    (rc = bbuf(f, ub * conv, &Q->qkv)) || (rc = bbuf(f, ub * conv, &Q->conv)) || (rc = bbuf(f, ub * val, &Q->z)) ||
	    (rc = bbuf(f, ub * nv, &Q->beta)) || (rc = bbuf(f, ub * nv, &Q->alpha)) || (rc = bbuf(f, ub * nv, &Q->g)) ||
	    (rc = bbuf(f, ub * nv, &Q->b)) || (rc = bbuf(f, ub * val, &Q->dout)) ||
	    (rc = bbuf(f, ub * 2 * qd, &Q->qg)) || (rc = bbuf(f, ub * fs, &Q->sg)) || (rc = bbuf(f, ub * fs, &Q->su)))
		return rc;
	const size_t most = Q->conv_floats > Q->ssm_floats ? Q->conv_floats : Q->ssm_floats;
	if (!(Q->zeros = hbuf(most)) || !(Q->hq = hbuf(ub * qd)) || !(Q->hgate = hbuf(ub * qd)) ||
	    !(Q->hqg = hbuf(ub * 2 * qd)) || !(Q->hsg = hbuf(ub * fs)) || !(Q->hsu = hbuf(ub * fs)) ||
	    !(Q->hsd = hbuf(ub * d)) ||
	    !(Q->dn_scratch = hbuf((size_t)(nth > 0 ? nth : 1) * (Q->n_dn ? hs__dn_scratch_floats(hp->ssm_dh) : 0))))
		return hs__error(ENOMEM, "context: out of memory for the DeltaNet buffers");
	for (int s = 0; s < f->n_seq; s++)
		if ((rc = hs__q35_forget(f, s)))
			return rc;
	f->kv_bytes += sizeof(float) * seqs * (Q->conv_floats + Q->ssm_floats);
	return 0;
}

void hs__q35_free(struct hs_fwd *f)
{
	struct hs_q35 *Q = f->q35;
	if (!Q)
		return;
	float *b[] = { Q->conv_state, Q->ssm_state, Q->qkv, Q->conv, Q->z,  Q->beta, Q->alpha,
		       Q->g,	      Q->b,	    Q->dout, Q->qg,   Q->sg, Q->su };
	for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
		if (b[i])
			f->be->free(f, b[i]);
	float *h[] = { Q->zeros, Q->hq, Q->hgate, Q->hqg, Q->hsg, Q->hsu, Q->hsd, Q->dn_scratch };
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

int hs__q35_forget(struct hs_fwd *f, int seq)
{
	struct hs_q35 *Q = f->q35;
	int rc = 0;
	if (!Q || !Q->n_dn)
		return 0;
	for (size_t l = 0; l < (size_t)Q->n_dn && !rc; l++) {
		const size_t si = (size_t)seq * Q->n_dn + l;
		if (!(rc = f->be->upload(f, Q->conv_state + si * Q->conv_floats, Q->zeros, sizeof(float) * Q->conv_floats)))
			rc = f->be->upload(f, Q->ssm_state + si * Q->ssm_floats, Q->zeros, sizeof(float) * Q->ssm_floats);
	}
	return rc;
}

size_t hs__q35_state_floats(const struct hs_fwd *f)
{
	const struct hs_q35 *Q = f->q35;
	return Q && Q->n_dn ? (size_t)Q->n_dn * (Q->conv_floats + Q->ssm_floats) : 0;
}

int hs__q35_state_copy(struct hs_fwd *f, int seq, float *buf, int save)
{
	struct hs_q35 *Q = f->q35;
	if (!Q || !Q->n_dn)
		return 0;
	const size_t nc = (size_t)Q->n_dn * Q->conv_floats, ns = (size_t)Q->n_dn * Q->ssm_floats;
	float *conv = Q->conv_state + (size_t)seq * nc, *ssm = Q->ssm_state + (size_t)seq * ns;
	int rc;
	if (save) {
		if (!(rc = f->be->download(f, buf, conv, sizeof(float) * nc)))
			rc = f->be->download(f, buf + nc, ssm, sizeof(float) * ns);
	} else if (!(rc = f->be->upload(f, conv, buf, sizeof(float) * nc))) {
		rc = f->be->upload(f, ssm, buf + nc, sizeof(float) * ns);
	}
	return rc;
}

/* ---- the DeltaNet mixer ------------------------------------------------------ */

struct dn_ctx {
	const struct hs_dev_dn *d; /* host memory */
	struct hs_pool *pool;
	struct hs_dn_job job;
};

static void dn_steps(void *ctx, int ith, int nth)
{
	struct dn_ctx *c = ctx;
	const struct hs_dev_dn *d = c->d;
	const int C = (2 * d->n_k_heads + d->n_v_heads) * d->head_dim;
	long lo, hi;

	hs__dn_conv(d->conv_w, C, d->kc, d->conv_state, d->n, d->qkv, C, d->conv, C, ith, nth);
	hs__pool_barrier(c->pool);
	hs__share(d->n, ith, nth, &lo, &hi);
	hs__dn_prep(d->conv, C, d->n_k_heads, d->head_dim, d->alpha, d->beta, d->dt_bias, d->a, d->n_v_heads, d->eps,
		    d->g, d->b, lo, hi);
	hs__pool_barrier(c->pool);
	if (d->n > 1)
		hs__dn_chunk(&c->job, ith, nth);
	else
		hs__dn_step(&c->job, ith, nth);
	hs__pool_barrier(c->pool);
	hs__share((long)d->n * d->n_v_heads, ith, nth, &lo, &hi);
	hs__dn_gnorm(d->out, d->z, d->head_dim, d->norm, d->eps, lo, hi);
}

static void dn_ref(struct dn_ctx *c)
{
	const struct hs_dev_dn *d = c->d;
	const int C = (2 * d->n_k_heads + d->n_v_heads) * d->head_dim;
	hs__dn_conv_ref(d->conv_w, C, d->kc, d->conv_state, d->n, d->qkv, C, d->conv, C);
	hs__dn_prep(d->conv, C, d->n_k_heads, d->head_dim, d->alpha, d->beta, d->dt_bias, d->a, d->n_v_heads, d->eps,
		    d->g, d->b, 0, d->n);
	hs__dn_ref(&c->job);
	hs__dn_gnorm(d->out, d->z, d->head_dim, d->norm, d->eps, 0, (long)d->n * d->n_v_heads);
}

int hs__q35_deltanet(struct hs_fwd *f, int l, int n, int n_groups, const int *g_start, const int32_t *seq)
{
	const struct hs_fwd_be *be = f->be;
	const struct hs_hparams *hp = f->hp;
	const struct hs_dense_layer *L = &f->w->layers[l];
	struct hs_q35 *Q = f->q35;
	const size_t d = hp->n_embd, C = Q->conv_ch, val = Q->val, nv = hp->ssm_nv, key = (size_t)hp->ssm_nk * hp->ssm_dh;
	const int li = Q->dn_index[l];
	int rc;

	if ((rc = be->rmsnorm(f, f->x, d, f->h, d, n, 1, hp->n_embd, L->attn_norm, hp->eps)) ||
	    (rc = be->matmul(f, &L->q35.qkv, NULL, n, f->h, d, Q->qkv, C)) ||
	    (rc = be->matmul(f, &L->q35.z, NULL, n, f->h, d, Q->z, val)) ||
	    (rc = be->matmul(f, &L->q35.beta, NULL, n, f->h, d, Q->beta, nv)) ||
	    (rc = be->matmul(f, &L->q35.alpha, NULL, n, f->h, d, Q->alpha, nv)))
		return rc;
	for (int g = 0; g < n_groups; g++) {
		const int a = g_start[g], m = g_start[g + 1] - a, s = seq[a];
		const size_t si = (size_t)s * Q->n_dn + li;
		/* the layer's vectors from f->w: the backend's copies */
		const struct hs_dev_dn dn = {
			.n = m, .n_k_heads = hp->ssm_nk, .n_v_heads = hp->ssm_nv, .head_dim = hp->ssm_dh, .kc = hp->ssm_conv,
			.conv_w = L->q35.conv, .dt_bias = L->q35.dt_bias, .a = L->q35.a, .norm = L->q35.norm, .eps = hp->eps,
			.qkv = Q->qkv + (size_t)a * C, .z = Q->z + (size_t)a * val, .alpha = Q->alpha + (size_t)a * nv,
			.beta = Q->beta + (size_t)a * nv, .conv_state = Q->conv_state + si * Q->conv_floats,
			.state = Q->ssm_state + si * Q->ssm_floats, .conv = Q->conv + (size_t)a * C,
			.g = Q->g + (size_t)a * nv, .b = Q->b + (size_t)a * nv, .out = Q->dout + (size_t)a * val
		};
		if (be->deltanet) {
			if ((rc = be->deltanet(f, &dn)))
				return rc;
			continue;
		}
		struct dn_ctx c = { .d = &dn, .pool = f->rt->pool };
		c.job = (struct hs_dn_job){ .n = m, .n_k_heads = hp->ssm_nk, .n_v_heads = hp->ssm_nv, .dk = hp->ssm_dh,
					    .dv = hp->ssm_dh, .q = dn.conv, .k = dn.conv + key, .qk_stride = C,
					    .v = dn.conv + 2 * key, .v_stride = C, .g = dn.g, .beta = dn.b,
					    .scale = 1.0f / sqrtf((float)hp->ssm_dh), .state = dn.state, .out = dn.out,
					    .out_stride = val, .scratch = Q->dn_scratch };
		if (be->reference)
			dn_ref(&c);
		else
			hs__pool_run(f->rt->pool, dn_steps, &c);
	}
	if ((rc = be->matmul(f, &L->q35.out, NULL, n, Q->dout, val, f->t, d)) || (rc = be->add(f, f->x, f->t, (size_t)n * d)))
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

double hs__q35_mixer_bytes(const struct hs_fwd *f, int l)
{
	const struct hs_q35_layer *L = &f->w->layers[l].q35;
	return hs__weight_bytes(&L->qkv) + hs__weight_bytes(&L->z) + hs__weight_bytes(&L->beta) +
	       hs__weight_bytes(&L->alpha) + hs__weight_bytes(&L->out);
}

double hs__q35_shared_bytes(const struct hs_fwd *f, int l)
{
	const struct hs_q35_layer *L = &f->w->layers[l].q35;
	return L->sh_up.data ? hs__weight_bytes(&L->sh_gate) + hs__weight_bytes(&L->sh_up) +
				       hs__weight_bytes(&L->sh_down) + 4.0 * f->hp->n_embd
			     : 0;
}
