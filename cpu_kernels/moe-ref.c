/* Reference MoE forward: dequantize one row at a time, dot products and
 * accumulation in double.  Slow and plain: the oracle for the fast kernels. */
#include "config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/formats.h"
#include "cpu_kernels/moe.h"
#include "cpu_kernels/repack.h"
#include "base/error.h"

/* The k largest entries of v, best first; ties go to the lower index. */
static void topk(const double *v, int n, int k, int32_t *ids)
{
	for (int j = 0; j < k; j++) {
		int best = -1;
		for (int e = 0; e < n; e++) {
			int taken = 0;
			for (int i = 0; i < j && !taken; i++)
				taken = ids[i] == e;
			if (!taken && (best < 0 || v[e] > v[best]))
				best = e;
		}
		ids[j] = best;
	}
}

void hs__gating_topk_softmax(const double *logits, int n_experts, int k, int32_t *ids, float *weights)
{
	double max, sum = 0;

	topk(logits, n_experts, k, ids);
	max = logits[ids[0]];
	for (int j = 0; j < k; j++)
		sum += exp(logits[ids[j]] - max);
	for (int j = 0; j < k; j++)
		weights[j] = (float)(exp(logits[ids[j]] - max) / sum);
}

void hs__gating_sel(const struct hs_moe_layer *l, const double *logits, int32_t *ids, float *weights)
{
	const int n = l->n_experts, k = l->n_used;
	double p[HS_SEL_MAX_EXPERTS], pick[HS_SEL_MAX_EXPERTS], max = logits[0], sum = 0;

	for (int e = 1; e < n; e++)
		max = logits[e] > max ? logits[e] : max;
	for (int e = 0; e < n; e++) {
		p[e] = l->sel.softmax ? exp(logits[e] - max) : 1 / (1 + exp(-logits[e]));
		sum += p[e];
	}
	for (int e = 0; e < n; e++) {
		if (l->sel.softmax)
			p[e] /= sum;
		pick[e] = p[e] + (l->sel.bias ? l->sel.bias[e] : 0);
	}
	topk(pick, n, k, ids);
	sum = 0;
	for (int j = 0; j < k; j++)
		sum += p[ids[j]];
	const double div = l->sel.norm ? (sum > 0x1p-14 ? sum : 0x1p-14) : 1;
	for (int j = 0; j < k; j++)
		weights[j] = (float)(p[ids[j]] / div * l->sel.scale);
}

double hs__act_gpt_oss(double g, double u)
{
	g = g > 7 ? 7 : g;
	u = u > 7 ? 7 : u < -7 ? -7 : u;
	return g / (1 + exp(-1.702 * g)) * (u + 1);
}

double hs__act_silu_mul(double g, double u)
{
	return g / (1 + exp(-g)) * u;
}

float hs__act_gpt_oss_f(float g, float u)
{
	g = g > 7 ? 7 : g;
	u = u > 7 ? 7 : u < -7 ? -7 : u;
	return g / (1 + expf(-1.702f * g)) * (u + 1);
}

float hs__act_silu_mul_f(float g, float u)
{
	return g / (1 + expf(-g)) * u;
}

static double dot(const float *a, const float *b, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

static double dot_d(const float *a, const double *b, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += (double)a[i] * b[i];
	return s;
}

int hs__moe_route_ref(const struct hs_moe_layer *l, int n, const float *x, int32_t *ids, float *weights)
{
	size_t rb = hs__type_row_bytes(l->router_type, (uint64_t)l->n_embd);
	float *row = malloc(sizeof *row * l->n_embd);
	double *logits = malloc(sizeof *logits * l->n_experts);

	if (!row || !logits) {
		free(row);
		free(logits);
		return hs__error(ENOMEM, "router: out of memory");
	}
	for (int t = 0; t < n; t++) {
		for (int e = 0; e < l->n_experts; e++) {
			hs__dequantize_row_ref(l->router_type, l->router + (size_t)e * rb, row, l->n_embd);
			logits[e] = dot(row, x + (size_t)t * l->n_embd, l->n_embd) + (l->router_b ? l->router_b[e] : 0);
		}
		if (l->arch->gating_sel)
			l->arch->gating_sel(l, logits, ids + (size_t)t * l->n_used, weights + (size_t)t * l->n_used);
		else
			l->arch->gating(logits, l->n_experts, l->n_used, ids + (size_t)t * l->n_used,
					weights + (size_t)t * l->n_used);
	}
	free(row);
	free(logits);
	return 0;
}

/* Row r (cols values) of matrix m, plain rows rb apart or packed, in float;
 * plain is room for one row's bytes. */
static void expert_row(int type, const uint8_t *m, size_t rb, int packed, int r, int cols, uint8_t *plain, float *row)
{
	if (packed) {
		hs__packed_row(type, cols, m, r, plain);
		m = plain;
		r = 0;
	}
	hs__dequantize_row_ref(type, m + (size_t)r * rb, row, (size_t)cols);
}

int hs__moe_forward_ref(const struct hs_moe_layer *l, int n, const float *x, const int32_t *ids_in,
			const float *w_in, float *y)
{
	const int D = l->n_embd, F = l->n_ff, K = l->n_used;
	size_t rb_g = hs__type_row_bytes(l->type[HS_GATE], (uint64_t)D), rb_u = hs__type_row_bytes(l->type[HS_UP], (uint64_t)D);
	size_t rb_ff = hs__type_row_bytes(l->type[HS_DOWN], (uint64_t)F), rb_in = rb_g > rb_u ? rb_g : rb_u;
	int32_t *ids = NULL;
	float *wts = NULL, *row = malloc(sizeof *row * (D > F ? D : F));
	uint8_t *plain = malloc(rb_in > rb_ff ? rb_in : rb_ff); /* a row out of a packed matrix */
	double *h = malloc(sizeof *h * F), *acc = malloc(sizeof *acc * D);
	int rc = 0;

	if (!row || !plain || !h || !acc) {
		rc = hs__error(ENOMEM, "reference MoE: out of memory");
		goto out_free;
	}
	if (!ids_in) {
		ids = malloc(sizeof *ids * (size_t)n * K);
		wts = malloc(sizeof *wts * (size_t)n * K);
		if (!ids || !wts) {
			rc = hs__error(ENOMEM, "reference MoE: out of memory");
			goto out_free;
		}
		if ((rc = hs__moe_route_ref(l, n, x, ids, wts)))
			goto out_free;
		ids_in = ids;
		w_in = wts;
	}
	for (size_t i = 0; i < (size_t)n * K; i++)
		if (ids_in[i] < -1 || ids_in[i] >= l->n_experts) {
			rc = hs__error(EINVAL, "expert id %d at token %zu slot %zu (-1 or 0..%d allowed)", ids_in[i],
				       i / K, i % K, l->n_experts - 1);
			goto out_free;
		}
	for (int t = 0; t < n; t++) {
		const float *xt = x + (size_t)t * D;
		for (int d = 0; d < D; d++)
			acc[d] = 0;
		for (int k = 0; k < K; k++) {
			int e = ids_in[(size_t)t * K + k];
			double w = w_in[(size_t)t * K + k];
			if (e < 0)
				continue;
			const struct hs_expert_view ev = hs__expert(l, e);
			const uint8_t *G = ev.gate, *U = ev.up, *Dn = ev.down;
			for (int r = 0; r < F; r++) {
				double g, u;
				expert_row(l->type[HS_GATE], G, rb_g, ev.packed, r, D, plain, row);
				g = dot(row, xt, D) + (ev.gate_b ? ev.gate_b[r] : 0);
				expert_row(l->type[HS_UP], U, rb_u, ev.packed, r, D, plain, row);
				u = dot(row, xt, D) + (ev.up_b ? ev.up_b[r] : 0);
				h[r] = l->arch->activation(g, u);
			}
			for (int r = 0; r < D; r++) {
				expert_row(l->type[HS_DOWN], Dn, rb_ff, ev.packed, r, F, plain, row);
				acc[r] += w * (dot_d(row, h, F) + (ev.down_b ? ev.down_b[r] : 0));
			}
		}
		for (int d = 0; d < D; d++)
			y[(size_t)t * D + d] = (float)acc[d];
	}
out_free:
	free(ids);
	free(wts);
	free(row);
	free(plain);
	free(h);
	free(acc);
	return rc;
}

struct hs_expert_pack hs__expert_pack_layout(const int type[3], int n_embd, int n_ff, int has_bias)
{
	struct hs_expert_pack p;
	size_t at = 0, gate = (size_t)n_ff * hs__type_row_bytes(type[HS_GATE], (uint64_t)n_embd);
	size_t up = (size_t)n_ff * hs__type_row_bytes(type[HS_UP], (uint64_t)n_embd);
	size_t out = (size_t)n_embd * hs__type_row_bytes(type[HS_DOWN], (uint64_t)n_ff);
#define HS_PACK_NEXT(field, bytes) (p.field = at, at = (at + (bytes) + 255) & ~(size_t)255)
	memset(&p, 0, sizeof p);
	for (int i = 0; i < 3; i++)
		p.type[i] = (size_t)type[i];
	HS_PACK_NEXT(gate, gate);
	HS_PACK_NEXT(up, up);
	HS_PACK_NEXT(down, out);
	if (has_bias) {
		HS_PACK_NEXT(gate_b, 4 * (size_t)n_ff);
		HS_PACK_NEXT(up_b, 4 * (size_t)n_ff);
		HS_PACK_NEXT(down_b, 4 * (size_t)n_embd);
	}
#undef HS_PACK_NEXT
	if (hs__pack_supported(type[HS_GATE], n_ff, n_embd) && hs__pack_supported(type[HS_UP], n_ff, n_embd) &&
	    hs__pack_supported(type[HS_DOWN], n_embd, n_ff))
		p.packed_rows = HS_PACK_ROWS;
	/* slack: the GPU reads rows with 16-byte loads that may pass a row's
	 * end by up to 15 bytes, also after the last section */
	p.bytes = at + 256;
	return p;
}

struct hs_expert_pack hs__expert_pack_layout1(int type, int n_embd, int n_ff, int has_bias)
{
	const int t3[3] = { type, type, type };
	return hs__expert_pack_layout(t3, n_embd, n_ff, has_bias);
}

/* A rows x cols matrix from src (plain rows or packed) to dst (plain or
 * packed); the same layout on both sides is one copy. */
static void copy_matrix(int type, int rows, int cols, const uint8_t *src, int src_packed, uint8_t *dst,
			int dst_packed)
{
	const size_t rb = hs__type_row_bytes(type, (uint64_t)cols);

	if (src_packed == dst_packed)
		memcpy(dst, src, rb * (size_t)rows);
	else if (dst_packed)
		hs__pack_matrix(type, rows, cols, src, rb, dst);
	else
		for (int r = 0; r < rows; r++)
			hs__packed_row(type, cols, src, r, dst + (size_t)r * rb);
}

void hs__expert_pack(const struct hs_moe_layer *l, int e, const struct hs_expert_pack *p, uint8_t *dst)
{
	const struct hs_expert_view v = hs__expert(l, e);
	const int D = l->n_embd, F = l->n_ff, packed = p->packed_rows != 0;

	memset(dst, 0, p->bytes);
	copy_matrix(l->type[HS_GATE], F, D, v.gate, v.packed, dst + p->gate, packed);
	copy_matrix(l->type[HS_UP], F, D, v.up, v.packed, dst + p->up, packed);
	copy_matrix(l->type[HS_DOWN], D, F, v.down, v.packed, dst + p->down, packed);
	if (p->gate_b && v.gate_b) {
		memcpy(dst + p->gate_b, v.gate_b, 4 * (size_t)l->n_ff);
		memcpy(dst + p->up_b, v.up_b, 4 * (size_t)l->n_ff);
		memcpy(dst + p->down_b, v.down_b, 4 * (size_t)l->n_embd);
	}
}

size_t hs__moe_layer_flat(struct hs_moe_layer *l, const struct hs_moe_arch *arch, int type, int n_embd, int n_ff,
			  int n_experts, int n_used, const uint8_t *w, const float *b)
{
	const int t3[3] = { type, type, type };
	return hs__moe_layer_flat3(l, arch, t3, n_embd, n_ff, n_experts, n_used, w, b);
}

size_t hs__moe_layer_flat3(struct hs_moe_layer *l, const struct hs_moe_arch *arch, const int type[3], int n_embd,
			   int n_ff, int n_experts, int n_used, const uint8_t *w, const float *b)
{
	size_t gs = (size_t)n_ff * hs__type_row_bytes(type[HS_GATE], (uint64_t)n_embd);
	size_t us = (size_t)n_ff * hs__type_row_bytes(type[HS_UP], (uint64_t)n_embd);
	size_t ds = (size_t)n_embd * hs__type_row_bytes(type[HS_DOWN], (uint64_t)n_ff);

	memset(l, 0, sizeof *l);
	l->arch = arch;
	l->n_embd = n_embd;
	l->n_ff = n_ff;
	l->n_experts = n_experts;
	l->n_used = n_used;
	for (int i = 0; i < 3; i++)
		l->type[i] = type[i];
	l->gate_stride = gs;
	l->up_stride = us;
	l->down_stride = ds;
	if (w) {
		l->gate = w;
		l->up = w + gs * n_experts;
		l->down = w + (gs + us) * n_experts;
	}
	if (b && arch->has_bias) {
		l->gate_b = b;
		l->up_b = b + (size_t)n_experts * n_ff;
		l->down_b = b + (size_t)2 * n_experts * n_ff;
	}
	return (gs + us + ds) * (size_t)n_experts;
}
