/* Device benchmark: the expert kernels and copies of one device (cuda or
 * sim), each next to the device's own limit measured in the same run.
 *   decode  : fused FFN at 1 token, k = 4 of E gpt-oss-120b experts
 *             (MXFP4 2880 x 2880), GB/s of expert bytes / device-to-device
 *             copy bandwidth (reads + writes counted, the usual convention)
 *   prefill : 512 tokens, TFLOP/s
 *   h2d     : pinned host-to-device copies, GB/s / the PCIe link (hwloc)
 *   masked  : 1 of 4 experts unmasked: time / time with all 4 (ideal 0.25)
 *   matmul  : the dense products (2880 x 2880 F16, Q8_0 and MXFP4 weights)
 *             at 1 token (GB/s of weights / d2d) and 512 tokens (TFLOP/s),
 *             with the path each took (GEMV, tile kernel, cuBLAS) and
 *             where cuBLAS was found; run it again with HOTSET_CUBLAS=0 for
 *             the tile kernel on the F16 weights
 * Prints "key value" lines and a table; the sim device's figures are the
 * CPU's and say so. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_kernels/formats.h"
#include "model/arch.h"
#include "cpu_kernels/moe.h"
#include "hotset.h"
#include "device/device.h"
#include "device/device-cuda.h"

#define D 2880
#define F 2880
#define K 4

static struct hs_device *dev;
static const struct hs_dev_ops *O;
static hs_queue *q;

static int die(const char *what)
{
	fprintf(stderr, "bench-device: %s: %s\n", what, hs_last_error());
	exit(1);
}

static uint64_t rng = 42;
static uint32_t next(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(rng >> 33);
}

/* time of `reps` launches of fn between two events, in ms */
static float timed(int reps, int (*fn)(void *), void *ctx)
{
	hs_event *a, *b;
	float ms = 0;
	if (O->event_create(dev->dev, &a) || O->event_create(dev->dev, &b))
		die("events");
	if (fn(ctx) || O->queue_sync(q)) /* warm-up */
		die("warm-up");
	O->event_record(a, q);
	for (int i = 0; i < reps; i++)
		if (fn(ctx))
			die("launch");
	O->event_record(b, q);
	if (O->event_sync(b) || O->event_elapsed_ms(a, b, &ms))
		die("timing");
	O->event_destroy(a);
	O->event_destroy(b);
	return ms;
}

struct copy_ctx {
	void *dst;
	const void *src;
	size_t n;
	int h2d;
};
static int do_copy(void *p)
{
	struct copy_ctx *c = p;
	return c->h2d ? hs__dev_copy_h2d(dev, q, c->dst, c->src, c->n) : O->copy_d2d(q, c->dst, c->src, c->n);
}

struct ffn_ctx {
	struct hs_dev_ffn f;
	int32_t *ids_host; /* pinned, [n_sets][n * K] */
	void *ids_dev;     /* [n_sets][n * K] */
	int n_sets, set;
	int mask;          /* slots masked per token (decode masking test) */
};
static int do_ffn(void *p)
{
	struct ffn_ctx *c = p;
	c->f.ids = (const int32_t *)c->ids_dev + (size_t)(c->set++ % c->n_sets) * c->f.n * K;
	return O->ffn(q, &c->f);
}

static int do_matmul(void *p)
{
	return O->matmul(q, p);
}

/* Dense products of a D x F matrix of each type at 1 and 512 tokens, the
 * weights made from h (random bytes) with sane scales; prints a table row
 * each and the paths the launches took. */
static void matmul_bench(uint8_t *h, double d2d)
{
	static const int types[] = { HS_TYPE_F16, HS_TYPE_Q8_0, HS_TYPE_MXFP4 };
	const int NT = strcmp(O->name, "sim") == 0 ? 64 : 512; /* the sim's products are the CPU's */
	void *dw, *dx, *dy, *scr;
	size_t sb = 0;
	char paths[128], blas[400];

	if (!O->matmul)
		return;
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		sb = O->matmul_scratch_bytes(types[i], F, NT) > sb ? O->matmul_scratch_bytes(types[i], F, NT) : sb;
	if (O->alloc(dev->dev, (size_t)D * F * 2, &dw) || O->alloc(dev->dev, sizeof(float) * NT * F, &dx) ||
	    O->alloc(dev->dev, sizeof(float) * NT * D, &dy) || O->alloc(dev->dev, sb ? sb : 1, &scr))
		die("matmul buffers");
	if (O->zero(q, dx, sizeof(float) * NT * F) || O->queue_sync(q))
		die("matmul inputs");
	int rc = hs__cuda_blas_status(blas, sizeof blas);
	printf("cublas %s\n", rc == 0 ? blas : rc == -ENOSYS ? "none (no CUDA in this build)" : blas);
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
		const int t = types[i];
		const size_t rb = hs__type_row_bytes(t, F), bb = hs__type_block_bytes(t);
		for (size_t r = 0; r < (size_t)D; r++) /* scales that keep values finite */
			for (size_t b = 0; b < rb; b += t == HS_TYPE_F16 ? 2 : bb) {
				uint8_t *blk = h + r * rb + b;
				if (t == HS_TYPE_F16 || t == HS_TYPE_Q8_0) /* f16 0.0625 .. 0.125 */
					blk[1] = 0x2c, blk[0] &= 0x7f;
				else
					blk[0] = (uint8_t)(118 + next() % 4);
			}
		if (hs__dev_copy_h2d(dev, q, dw, h, rb * D) || O->queue_sync(q))
			die("matmul weights");
		struct hs_dev_matmul m = { .type = t, .rows = D, .cols = F, .w = dw, .row_bytes = rb, .x = dx,
					   .x_stride = F, .y = dy, .y_stride = D, .scratch = scr };
		m.n = 1;
		const double ms1 = timed(64, do_matmul, &m) / 64;
		m.n = NT;
		const double msn = timed(8, do_matmul, &m) / 8;
		const double gbps = (double)rb * D / (ms1 * 1e6), tflops = 2.0 * D * F * NT / (msn * 1e9);
		printf("matmul_%s_1_gbps %.1f\nmatmul_%s_1_ratio_d2d %.3f\nmatmul_%s_%d_tflops %.3f\n", hs__type_name(t), gbps,
		       hs__type_name(t), gbps / d2d, hs__type_name(t), NT, tflops);
	}
	hs__cuda_matmul_paths(paths, sizeof paths);
	printf("matmul_paths %s\n", strcmp(O->name, "cuda") == 0 ? paths : "sim (the CPU's dense ops)");
	O->free(dev->dev, dw);
	O->free(dev->dev, dx);
	O->free(dev->dev, dy);
	O->free(dev->dev, scr);
}

int main(int argc, char **argv)
{
	const char *backend = argc > 1 ? argv[1] : NULL;
	int E = argc > 2 ? atoi(argv[2]) : 32;
	hs_topology *topo = NULL;
	double link = 0;

	if (argc > 3 || E < 8 || E > 128) {
		fprintf(stderr, "usage: bench-device [sim|cuda] [EXPERTS 8..128]\n");
		return 2;
	}
	if (hs__device_open(backend, 0, &dev))
		die("device");
	O = dev->ops;
	if (O->queue_create(dev->dev, &q))
		die("queue");
	printf("device %s\n", O->describe(dev->dev));
	if (strcmp(O->name, "cuda") == 0 && hs_topology_open(NULL, &topo) == 0) {
		for (int i = 0; i < hs_topology_n_gpus(topo); i++)
			if (hs_topology_gpu(topo, i)->cuda_index == 0)
				link = hs_topology_gpu(topo, i)->link_gbps;
		hs_topology_free(topo);
	}

	/* limits of this device: device-to-device copies and pinned uploads */
	const size_t nb = (size_t)256 << 20;
	void *d1, *d2;
	uint8_t *h;
	if (O->alloc(dev->dev, nb, &d1) || O->alloc(dev->dev, nb, &d2))
		die("alloc");
	if (posix_memalign((void **)&h, 4096, nb) || hs__device_pin(dev, h, nb, 0))
		die("pinned buffer");
	memset(h, 1, nb);
	struct copy_ctx cd = { d2, d1, nb, 0 }, ch = { d1, h, nb, 1 };
	double d2d = 2.0 * nb * 5 / (timed(5, do_copy, &cd) * 1e6); /* read + write */
	double h2d = (double)nb * 5 / (timed(5, do_copy, &ch) * 1e6);
	printf("d2d_gbps %.1f\nh2d_pinned_gbps %.2f\nlink_gbps %.2f\n", d2d, h2d, link);

	/* a resident gpt-oss-120b-shaped layer of E experts */
	struct hs_expert_pack pack = hs__expert_pack_layout1(HS_TYPE_MXFP4, D, F, 1);
	struct hs_slots *s;
	if (hs__slots_create(dev, E, E, pack.bytes, q, &s))
		die("slots");
	for (size_t i = 0; i < nb; i++)
		h[i] = (uint8_t)next();
	for (int e = 0; e < E; e++) {
		uint8_t *blk = h + (size_t)(e % 8) * pack.bytes; /* 8 random packs, reused */
		const size_t sec[3] = { pack.gate, pack.up, pack.down };
		for (int k = 0; k < 3; k++) /* small exponents in every 17-byte block */
			for (size_t r = 0; r < (size_t)D * (F / 32) * 17; r += 17)
				blk[sec[k] + r] = (uint8_t)(118 + next() % 4);
		for (size_t i = pack.gate_b; i < pack.bytes; i += 4)
			memset(blk + i, 0, 4);
		if (hs__slots_upload(s, e, e, blk, q, q) || O->queue_sync(q))
			die("upload");
	}
	const int NP = 512, sets = 16;
	int32_t *ids = NULL;
	float *w;
	void *dx, *dxq, *dids, *dw, *dy, *scr;
	if (posix_memalign((void **)&ids, 4096, sizeof(int32_t) * NP * K * sets) ||
	    hs__device_pin(dev, ids, sizeof(int32_t) * NP * K * sets, 0))
		die("ids");
	w = (float *)h; /* weights: the start of the pinned buffer */
	for (int i = 0; i < NP * K; i++)
		w[i] = 0.25f;
	struct ffn_ctx c = { .f = { .arch = &hs__arch_gpt_oss, .n_embd = D, .n_ff = F,
				    .n_experts = E, .n_used = K, .pack = pack, .pool = s->pool,
				    .pool_stride = pack.bytes, .slot_of = s->slot_of, .n = NP } };
	size_t sb = O->ffn_scratch_bytes(&c.f);
	if (O->alloc(dev->dev, sizeof(float) * NP * D, &dx) || O->alloc(dev->dev, (size_t)NP * (D / 32) * 34, &dxq) ||
	    O->alloc(dev->dev, sizeof(int32_t) * NP * K * sets, &dids) || O->alloc(dev->dev, sizeof(float) * NP * K, &dw) ||
	    O->alloc(dev->dev, sizeof(float) * NP * D, &dy) || O->alloc(dev->dev, sb, &scr))
		die("alloc");
	if (O->zero(q, dx, sizeof(float) * NP * D) || hs__dev_copy_h2d(dev, q, dw, w, sizeof(float) * NP * K) ||
	    O->zero(q, dy, sizeof(float) * NP * D) || O->quantize(q, dx, NP, D, dxq) || O->queue_sync(q))
		die("inputs");
	c.f.xq = dxq;
	c.f.weights = dw;
	c.f.y = dy;
	c.f.scratch = scr;
	c.ids_dev = dids;
	c.n_sets = sets;

	double res[3];
	for (int mode = 0; mode < 3; mode++) { /* decode, decode 3 of 4 masked, prefill */
		int n = mode == 2 ? NP : 1;
		for (int st = 0; st < sets; st++)
			for (int t = 0; t < n; t++) {
				/* decode: 4 distinct experts per set, sets walk through the layer */
				for (int j = 0; j < K; j++)
					ids[(size_t)st * n * K + t * K + j] =
						mode == 2 ? (int)(next() % (uint32_t)E) : (st * K + j) % E;
				if (mode == 1)
					for (int j = 1; j < K; j++)
						ids[(size_t)st * n * K + t * K + j] = -1;
			}
		if (hs__dev_copy_h2d(dev, q, dids, ids, sizeof(int32_t) * (size_t)n * K * sets) || O->queue_sync(q))
			die("ids");
		c.f.n = n;
		c.set = 0;
		int reps = mode == 2 ? 8 : 64;
		res[mode] = timed(reps, do_ffn, &c) / reps; /* ms per launch */
	}
	double dec_gbps = K * (double)pack.bytes / (res[0] * 1e6);
	double pre_tflops = 2.0 * 3 * D * F * (double)NP * K / (res[2] * 1e9);
	printf("decode_ms %.4f\ndecode_gbps %.1f\ndecode_ratio_d2d %.3f\n", res[0], dec_gbps, dec_gbps / d2d);
	printf("masked_1of4_ratio %.3f\n", res[1] / res[0]);
	printf("prefill_ms %.3f\nprefill_tflops %.3f\n", res[2], pre_tflops);
	printf("\n%-28s %12s %12s %8s\n", "measurement", "value", "limit", "ratio");
	printf("%-28s %9.1f GB/s %7.1f GB/s %8.2f\n", "decode (1 token, 4 experts)", dec_gbps, d2d, dec_gbps / d2d);
	printf("%-28s %7.2f TFLOP/s %12s %8s\n", "prefill (512 tokens)", pre_tflops, "-", "-");
	printf("%-28s %9.2f GB/s %7.2f GB/s %8s\n", "pinned H2D", h2d, link, link > 0 ? "" : "(no link)");
	if (link > 0)
		printf("%-28s %31.2f\n", "  pinned H2D / link", h2d / link);
	printf("%-28s %12.3f %12s %8s\n", "masked 1 of 4: time ratio", res[1] / res[0], "0.25 ideal", "");
	matmul_bench(h, d2d);
	if (strcmp(O->name, "sim") == 0)
		printf("(sim device: these are the CPU's figures behind the device contract, not a GPU's)\n");
	return 0;
}
