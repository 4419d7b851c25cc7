/* Checks one MoE layer split between the sim device and the CPU pool, the
 * way the runtime runs it: experts cached on the device are hits, the
 * others are computed by the CPU (cpu mode), copied into staging slots and
 * computed on the device (stream mode), or split by a share q (hybrid).
 * Every mode matches the double reference over several steps (staging slots
 * reused, stale staged experts counted as hits); the host copies of the
 * cached experts sit behind PROT_NONE pages, so a CPU read of an expert the
 * device owns crashes the test; the statistics add up. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hotset.h"
#include "model/arch.h"
#include "runtime/hybrid.h"
#include "tests/hs-test.h"
#include "tests/layer-util.h"

#define PAGE 4096

/* A layer whose experts each start on a page and fill whole pages. */
struct paged {
	struct hs_moe_layer l;
	uint8_t *gate, *up, *down;
	size_t gs, ds; /* padded strides */
	float *b;
};

static size_t pad(size_t n)
{
	return (n + PAGE - 1) & ~(size_t)(PAGE - 1);
}

static int make_paged(struct paged *P, const struct hs_moe_arch *arch, int type, int D, int F, int E, int K)
{
	struct layer L;
	if (make_layer(&L, arch, type, D, F, E, K))
		return -1;
	memset(P, 0, sizeof *P);
	P->l = L.l;
	size_t gs = L.l.gate_stride, ds = L.l.down_stride;
	P->gs = pad(gs);
	P->ds = pad(ds);
	P->gate = mmap(NULL, P->gs * E, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	P->up = mmap(NULL, P->gs * E, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	P->down = mmap(NULL, P->ds * E, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (P->gate == MAP_FAILED || P->up == MAP_FAILED || P->down == MAP_FAILED)
		return -1;
	for (int e = 0; e < E; e++) {
		memcpy(P->gate + e * P->gs, L.l.gate + e * gs, gs);
		memcpy(P->up + e * P->gs, L.l.up + e * gs, gs);
		memcpy(P->down + e * P->ds, L.l.down + e * ds, ds);
	}
	P->l.gate = P->gate;
	P->l.up = P->up;
	P->l.down = P->down;
	P->l.gate_stride = P->l.up_stride = P->gs;
	P->l.down_stride = P->ds;
	P->b = L.b; /* biases stay where make_layer put them */
	free(L.w);
	return 0;
}

static void protect(struct paged *P, int e, int prot)
{
	mprotect(P->gate + e * P->gs, P->gs, prot);
	mprotect(P->up + e * P->gs, P->gs, prot);
	mprotect(P->down + e * P->ds, P->ds, prot);
}

static void free_paged(struct paged *P)
{
	munmap(P->gate, P->gs * P->l.n_experts);
	munmap(P->up, P->gs * P->l.n_experts);
	munmap(P->down, P->ds * P->l.n_experts);
	free(P->b);
}

static void run_shape(struct hs_device *d, struct hs_pool *pool, const struct hs_moe_arch *arch, int type, int D, int F,
		      int E, int K)
{
	struct paged P;
	struct hs_hybrid h;
	const int max_n = 64, n_cached = 4, n_staging = 6;

	if (make_paged(&P, arch, type, D, F, E, K)) {
		CHECK(0, "out of memory");
		return;
	}
	CHECK(hs__hybrid_open(&h, &P.l, d, pool, max_n, n_cached, n_staging) == 0, "%s", hs_last_error());
	if (!h.d)
		return;
	for (int s = 0; s < n_cached; s++) /* experts 0..3 live on the device */
		CHECK(hs__hybrid_cache(&h, s, s) == 0, "%s", hs_last_error());
	for (int e = 0; e < n_cached; e++)
		protect(&P, e, PROT_NONE); /* the CPU must never read them now */

	float *x = malloc(sizeof *x * max_n * D), *w = malloc(sizeof *w * max_n * K);
	float *y = malloc(sizeof *y * max_n * D), *ref = malloc(sizeof *ref * max_n * D);
	int32_t *ids = malloc(sizeof *ids * max_n * K);
	static const struct {
		enum hs_mode mode;
		double q;
	} modes[] = { { HS_MODE_CPU_COMPUTE, 0 }, { HS_MODE_PCIE_STREAM, 1 }, { HS_MODE_HYBRID, 0.5 }, { HS_MODE_HYBRID, 0 } };
	for (int step = 0; step < 24; step++) {
		const int n = step % 3 == 0 ? 1 : step % 3 == 1 ? 7 : max_n;
		const int m = step % 4;
		for (int i = 0; i < n * D; i++)
			x[i] = frand();
		for (int t = 0; t < n; t++)
			for (int j = 0; j < K; j++) {
				int e = (int)(next() % (uint32_t)E);
				if (next() % 7 == 0)
					e = -1;
				ids[t * K + j] = e;
				w[t * K + j] = 0.25f + 0.5f * (float)(next() % 100) / 100.0f;
			}
		/* the reference reads every routed expert: open the cached ones for it */
		for (int e = 0; e < n_cached; e++)
			protect(&P, e, PROT_READ);
		CHECK(hs__moe_forward_ref(&P.l, n, x, ids, w, ref) == 0, "%s", hs_last_error());
		for (int e = 0; e < n_cached; e++)
			protect(&P, e, PROT_NONE);
		struct hs_layer_stats st;
		int rc = hs__hybrid_forward(&h, n, x, ids, w, y, modes[m].mode, modes[m].q, &st);
		CHECK(rc == 0, "step %d: %s", step, hs_last_error());
		double err = rel_l2(y, ref, (size_t)n * D);
		CHECK(err < 0.05, "%s D%d E%d K%d step %d n=%d %s q=%.1f: rel L2 %.3g", arch->name, D, E, K, step, n,
		      hs_mode_name(modes[m].mode), modes[m].q, err);
		CHECK(st.pairs == st.hits + st.misses_cpu + st.misses_streamed, "pairs %d != %d + %d + %d", st.pairs, st.hits,
		      st.misses_cpu, st.misses_streamed);
		if (modes[m].mode == HS_MODE_CPU_COMPUTE || modes[m].q == 0)
			CHECK(st.misses_streamed == 0 && st.experts_streamed == 0, "step %d: streamed in %s", step,
			      hs_mode_name(modes[m].mode));
		/* stream mode leaves misses to the CPU only when no staging slot was free */
		if (modes[m].mode == HS_MODE_PCIE_STREAM && st.misses_cpu)
			CHECK(st.experts_streamed == st.staging_free, "stream mode: %d misses on the CPU, %d of %d free slots used",
			      st.misses_cpu, st.experts_streamed, st.staging_free);
		CHECK(st.wall_s > 0 && st.overlap > 0, "stats: wall %g overlap %g", st.wall_s, st.overlap);
	}
	/* slow queues: every device and copy item waits 3 ms first, so the CPU
	 * lane finishes long before; nothing may be lost or reordered */
	hs__sim_set_queue_delay(h.qc, 3000);
	hs__sim_set_queue_delay(h.qx, 3000);
	for (int step = 0; step < 4; step++) {
		const int n = 7;
		for (int i = 0; i < n * D; i++)
			x[i] = frand();
		for (int t = 0; t < n; t++)
			for (int j = 0; j < K; j++) {
				ids[t * K + j] = (int)(next() % (uint32_t)E);
				w[t * K + j] = 0.5f;
			}
		for (int e = 0; e < n_cached; e++)
			protect(&P, e, PROT_READ);
		hs__moe_forward_ref(&P.l, n, x, ids, w, ref);
		for (int e = 0; e < n_cached; e++)
			protect(&P, e, PROT_NONE);
		CHECK(hs__hybrid_forward(&h, n, x, ids, w, y, step % 2 ? HS_MODE_HYBRID : HS_MODE_PCIE_STREAM, 0.5, NULL) == 0,
		      "%s", hs_last_error());
		CHECK(rel_l2(y, ref, (size_t)n * D) < 0.05, "slow queues, step %d: wrong output", step);
	}
	hs__sim_set_queue_delay(h.qc, 0);
	hs__sim_set_queue_delay(h.qx, 0);
	/* bad input */
	CHECK(hs__hybrid_forward(&h, max_n + 1, x, ids, w, y, HS_MODE_HYBRID, 0.5, NULL) == -EINVAL, "too many tokens");
	CHECK(hs__hybrid_forward(&h, 1, x, ids, NULL, y, HS_MODE_HYBRID, 0.5, NULL) == -EINVAL, "ids without weights");
	CHECK(hs__hybrid_forward(&h, 1, x, ids, w, y, HS_MODE_HYBRID, 1.5, NULL) == -EINVAL, "q 1.5");
	ids[0] = E;
	CHECK(hs__hybrid_forward(&h, 1, x, ids, w, y, HS_MODE_CPU_COMPUTE, 0, NULL) == -EINVAL &&
		      strstr(hs_last_error(), "outside"),
	      "bad id: %s", hs_last_error());
	hs__hybrid_close(&h);
	for (int e = 0; e < n_cached; e++)
		protect(&P, e, PROT_READ | PROT_WRITE);
	free_paged(&P);
	free(x);
	free(w);
	free(y);
	free(ref);
	free(ids);
}

/* Admissions do not hold up the device: the compute queue does not wait
 * for an admission's copy, and until the copy is in, the split gives the
 * admitted expert to the CPU (the right output either way); once the copy
 * is in, it is a hit. */
static void admission_in_flight(struct hs_device *d, struct hs_pool *pool)
{
	struct paged P;
	struct hs_hybrid h;
	const int D = 128, F = 64, E = 16, K = 4, n_cached = 4, n_staging = 8;

	if (make_paged(&P, &hs__arch_qwen3moe, HS_TYPE_Q8_0, D, F, E, K)) {
		CHECK(0, "out of memory");
		return;
	}
	/* the host view packed like slots and pinned: admissions copy from it */
	struct hs_expert_pack pack = hs__expert_pack_layout1(HS_TYPE_Q8_0, D, F, 0);
	uint8_t *packed = NULL;
	int32_t ident[16];
	CHECK(posix_memalign((void **)&packed, 4096, pack.bytes * E) == 0, "out of memory");
	if (!packed)
		return;
	for (int e = 0; e < E; e++) {
		hs__expert_pack(&P.l, e, &pack, packed + (size_t)e * pack.bytes);
		ident[e] = e;
	}
	struct hs_moe_layer v = P.l;
	v.pool = packed;
	v.pool_stride = pack.bytes;
	v.slot_of = ident;
	v.pack = pack;
	CHECK(hs__hybrid_open(&h, &v, d, pool, 4, n_cached, n_staging) == 0, "%s", hs_last_error());
	CHECK(hs__hybrid_can_direct(&h) && hs__device_pin(d, packed, pack.bytes * E, 0) == 0, "direct copies");
	h.direct = 1;
	for (int sl = 0; sl < n_cached; sl++)
		CHECK(hs__hybrid_cache(&h, sl, sl) == 0, "%s", hs_last_error());
	float x[128], y[128], ref[128], w[4] = { 0.4f, 0.3f, 0.2f, 0.1f };
	int32_t ids[4] = { 9, 1, 2, 3 }; /* expert 9 is being admitted; 1-3 are cached */
	for (int i = 0; i < D; i++)
		x[i] = frand();
	CHECK(hs__moe_forward_ref(&P.l, 1, x, ids, w, ref) == 0, "%s", hs_last_error());
	hs__sim_set_queue_delay(h.qx, 50000); /* the copy queue: 50 ms before each item */
	CHECK(hs__hybrid_admit(&h, 0, 9) == 0, "%s", hs_last_error());
	struct hs_layer_stats st;
	CHECK(hs__hybrid_forward(&h, 1, x, ids, w, y, HS_MODE_CPU_COMPUTE, 0, &st) == 0, "%s", hs_last_error());
	CHECK(st.hits == 3 && st.misses_cpu == 1, "in flight: %d hits, %d on the CPU (want 3 and 1)", st.hits,
	      st.misses_cpu);
	CHECK(rel_l2(y, ref, D) < 0.05, "in flight: wrong output");
	hs__sim_set_queue_delay(h.qx, 0);
	CHECK(h.d->ops->queue_sync(h.qx) == 0, "%s", hs_last_error());
	CHECK(hs__hybrid_forward(&h, 1, x, ids, w, y, HS_MODE_CPU_COMPUTE, 0, &st) == 0, "%s", hs_last_error());
	CHECK(st.hits == 4 && st.misses_cpu == 0, "after the copy: %d hits (want 4)", st.hits);
	CHECK(rel_l2(y, ref, D) < 0.05, "after the copy: wrong output");
	/* stream mode copies straight from the packed host copy: 12 missed
	 * experts go through 8 staging slots in one step, each slot reused once
	 * the launch before has read it; none is left to the CPU */
	float xb[4 * 128], yb[4 * 128], refb[4 * 128], wb[16];
	int32_t idb[16];
	for (int i = 0; i < 4 * D; i++)
		xb[i] = frand();
	for (int t = 0; t < 4; t++)
		for (int j = 0; j < 4; j++) {
			idb[t * 4 + j] = (4 * t + j) % 16; /* every expert once: 9, 1, 2, 3 hit */
			wb[t * 4 + j] = 0.25f;
		}
	CHECK(hs__moe_forward_ref(&P.l, 4, xb, idb, wb, refb) == 0, "%s", hs_last_error());
	CHECK(hs__hybrid_forward(&h, 4, xb, idb, wb, yb, HS_MODE_PCIE_STREAM, 1, &st) == 0, "%s", hs_last_error());
	CHECK(st.experts_streamed == 12 && st.misses_cpu == 0 && st.hits == 4,
	      "stream: %d experts streamed, %d pairs on the CPU, %d hits (want 12, 0, 4)", st.experts_streamed,
	      st.misses_cpu, st.hits);
	CHECK(rel_l2(yb, refb, (size_t)4 * D) < 0.05, "stream through reused staging slots: wrong output");
	/* the same under a slow compute queue, staging emptied first (else
	 * the experts streamed above would be hits): a reused slot must wait
	 * for the launch that reads it */
	for (int sl = n_cached; sl < n_cached + n_staging; sl++)
		CHECK(hs__slots_evict(h.slots, sl, h.qx) == 0, "%s", hs_last_error());
	CHECK(h.d->ops->queue_sync(h.qx) == 0, "%s", hs_last_error());
	hs__sim_set_queue_delay(h.qc, 2000);
	CHECK(hs__hybrid_forward(&h, 4, xb, idb, wb, yb, HS_MODE_PCIE_STREAM, 1, &st) == 0, "%s", hs_last_error());
	hs__sim_set_queue_delay(h.qc, 0);
	CHECK(st.experts_streamed == 12, "slow queue: %d streamed (want 12)", st.experts_streamed);
	CHECK(rel_l2(yb, refb, (size_t)4 * D) < 0.05, "slow queue: a staging slot was overwritten while read");
	hs__hybrid_close(&h);
	hs__device_unpin(d, packed, pack.bytes * E);
	free(packed);
	free_paged(&P);
}

int main(void)
{
	struct hs_device *d;
	struct hs_pool *pool;

	if (hs__device_open("sim", 0, &d)) {
		fprintf(stderr, "%s\n", hs_last_error());
		return 1;
	}
	if (hs__pool_create(2, NULL, 0, 0, &pool)) {
		fprintf(stderr, "%s\n", hs_last_error());
		return 1;
	}
	run_shape(d, pool, &hs__arch_gpt_oss, HS_TYPE_MXFP4, 256, 128, 16, 4);
	run_shape(d, pool, &hs__arch_qwen3moe, HS_TYPE_Q8_0, 128, 64, 16, 8);
	admission_in_flight(d, pool);
	hs__pool_free(pool);
	hs__device_close(d);
	return hs_test_end();
}
