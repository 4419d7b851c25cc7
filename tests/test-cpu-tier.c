/* Checks the choice of the CPU kernel tier: made-up machines (a Xeon with
 * AMX granted or refused by the kernel or the OS, AVX-512 state off, a
 * build without a tier, an AMD CPU without AVX-VNNI, no AVX at all) give the
 * expected tier and one line saying why a tier was refused; HOTSET_CPU_TIER
 * and HS_USE_REF; and on this machine, that detection runs cleanly: the
 * AMX permission request and the per-thread check answer without a crash
 * on the main thread and on another one (and refuse where the CPU has no
 * AMX), and hotset --version's build line names the tier that runs. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"
#include "cpu_kernels/kernels.h"
#include "hotset.h"
#include "tests/hs-test.h"

#define XCR0_AVX512 0xe7ull /* x87, SSE, AVX, opmask, ZMM halves, ZMM16-31 */
#define XCR0_AMX (XCR0_AVX512 | 0x60000ull)

/* A Sapphire Rapids-like CPU with everything enabled and granted. */
static struct hs_cpu_probe xeon(void)
{
	struct hs_cpu_probe p;
	memset(&p, 0, sizeof p);
	p.avx2 = p.fma = p.f16c = p.avx_vnni = 1;
	p.avx512f = p.avx512bw = p.avx512vl = p.avx512vnni = p.avx512vbmi = 1;
	p.amx_tile = p.amx_int8 = 1;
	p.xcr0 = XCR0_AMX;
	p.amx_perm = 0;
	p.built = (1u << HS_TIER_COUNT) - 1;
	return p;
}

static int choose(const struct hs_cpu_probe *p, const char *env, const char *ref, int *best, char *note)
{
	return hs__cpu_tier_choose(p, env, ref, best, note, 256);
}

static void test_made_up(void)
{
	struct hs_cpu_probe p = xeon();
	char note[256];
	int best, t;

	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_AMX && best == HS_TIER_AMX && !*note, "xeon: %s, note '%s'", hs__cpu_tier_name(t), note);

	p.amx_perm = -EPERM; /* the kernel said no */
	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_AVX512_VNNI && strstr(note, "amx refused") && strstr(note, "ARCH_REQ_XCOMP_PERM"),
	      "amx not granted: %s, note '%s'", hs__cpu_tier_name(t), note);

	p = xeon();
	p.xcr0 = XCR0_AVX512; /* the OS does not enable tile state */
	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_AVX512_VNNI && strstr(note, "amx refused") && strstr(note, "XCR0"),
	      "no tile state: %s, note '%s'", hs__cpu_tier_name(t), note);

	p = xeon();
	p.xcr0 = 0x7; /* AVX-512 state off too */
	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_AVX_VNNI && strstr(note, "avx512-vnni refused"), "no avx-512 state: %s, note '%s'",
	      hs__cpu_tier_name(t), note);

	p = xeon();
	p.built &= ~(1u << HS_TIER_AVX512_VNNI | 1u << HS_TIER_AMX); /* a build without them */
	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_AVX_VNNI && strstr(note, "avx512-vnni refused") && strstr(note, "build"),
	      "build without avx-512: %s, note '%s'", hs__cpu_tier_name(t), note);

	p = xeon();
	p.avx512vbmi = 0; /* AMX without VBMI (no such CPU): the AMX tier's decode needs it */
	t = choose(&p, "amx", NULL, &best, note);
	CHECK(t == HS_TIER_AVX512_VNNI && best == HS_TIER_AVX512_VNNI && strstr(note, "VBMI"),
	      "amx without vbmi: %s, note '%s'", hs__cpu_tier_name(t), note);

	/* an AMD Zen 4: AVX-512 VNNI, no AVX-VNNI, no AMX: nothing refused */
	p = xeon();
	p.avx_vnni = p.amx_tile = p.amx_int8 = 0;
	p.amx_perm = 1;
	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_AVX512_VNNI && !*note, "zen4: %s, note '%s'", hs__cpu_tier_name(t), note);
	t = choose(&p, "avx-vnni", NULL, &best, note);
	CHECK(t == HS_TIER_AVX2 && strstr(note, "not available") && strstr(note, "AVX-VNNI"),
	      "zen4 asked for avx-vnni: %s, note '%s'", hs__cpu_tier_name(t), note);
	t = choose(&p, "amx", NULL, &best, note);
	CHECK(t == HS_TIER_AVX512_VNNI && strstr(note, "not available"), "zen4 asked for amx: %s", hs__cpu_tier_name(t));

	/* no AVX at all, or the OS does not save YMM */
	memset(&p, 0, sizeof p);
	p.built = (1u << HS_TIER_COUNT) - 1;
	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_REF && best == HS_TIER_REF && !*note, "no avx: %s, note '%s'", hs__cpu_tier_name(t), note);
	p = xeon();
	p.xcr0 = 0x3;
	t = choose(&p, NULL, NULL, &best, note);
	CHECK(t == HS_TIER_REF && strstr(note, "avx2 refused"), "no ymm state: %s, note '%s'", hs__cpu_tier_name(t), note);

	/* the environment: a lower tier, the reference, nonsense */
	p = xeon();
	t = choose(&p, "avx2", NULL, &best, note);
	CHECK(t == HS_TIER_AVX2 && best == HS_TIER_AMX && strstr(note, "HOTSET_CPU_TIER=avx2"), "forced avx2: %s",
	      hs__cpu_tier_name(t));
	t = choose(&p, "ref", NULL, &best, note);
	CHECK(t == HS_TIER_REF, "forced ref: %s", hs__cpu_tier_name(t));
	t = choose(&p, "avx2", "1", &best, note);
	CHECK(t == HS_TIER_REF, "HS_USE_REF=1 wins: %s", hs__cpu_tier_name(t));
	t = choose(&p, NULL, "0", &best, note);
	CHECK(t == HS_TIER_AMX, "HS_USE_REF=0 changes nothing: %s", hs__cpu_tier_name(t));
	t = choose(&p, "avx1024", NULL, &best, note);
	CHECK(t == HS_TIER_AMX && strstr(note, "unknown tier"), "unknown tier: %s, note '%s'", hs__cpu_tier_name(t), note);
	for (int i = 0; i < HS_TIER_COUNT; i++)
		CHECK(hs__cpu_tier_from_name(hs__cpu_tier_name(i)) == i, "tier name %d", i);
}

static void *thread_ok(void *arg)
{
	*(int *)arg = hs__amx_thread_ok();
	return NULL;
}

static void test_this_machine(void)
{
	const struct hs_cpu_features *f = hs__cpu_features();
	char why[160], want[64];
	int other = -1;
	pthread_t th;

	printf("this CPU: tier %s (fastest %s)%s%s\n", hs__cpu_tier_name(f->tier), hs__cpu_tier_name(f->best),
	       *f->note ? "; " : "", f->note);
	if (!getenv("HOTSET_CPU_TIER") && !getenv("HS_USE_REF"))
		CHECK(f->tier == f->best, "no environment, yet tier %d below the fastest %d", f->tier, f->best);
	CHECK(hs__kernels_tier(f->tier) == hs__kernels_best(), "the kernels that run are not the tier's");
	snprintf(want, sizeof want, "CPU kernels: %s ", hs__cpu_tier_name(f->tier));
	CHECK(strstr(hs_build_info(), want) != NULL, "build info '%s' lacks '%s'", hs_build_info(), want);
	for (int t = 0; t < HS_TIER_COUNT; t++) {
		int no = hs__cpu_tier_why(&f->probe, t, why, sizeof why);
		CHECK(no == (hs__kernels_tier(t) == NULL), "tier %s: why and kernels disagree", hs__cpu_tier_name(t));
		printf("  %-12s %s\n", hs__cpu_tier_name(t), no ? why : "runs here");
	}
	/* AMX: the permission request and the per-thread check answer cleanly */
	int req = hs__amx_request(), here = hs__amx_thread_ok();
	CHECK(pthread_create(&th, NULL, thread_ok, &other) == 0, "pthread_create");
	pthread_join(th, NULL);
	printf("  arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA): %s; tiles allowed on this thread %d, another %d\n",
	       req ? strerror(-req) : "granted", here, other);
	CHECK(here == other, "AMX allowed on one thread (%d) and not another (%d)", here, other);
	if (!(f->probe.amx_tile && f->probe.amx_int8)) {
		CHECK(req != 0, "the kernel granted tile data on a CPU without AMX");
		CHECK(f->probe.amx_perm == 1, "asked for tile data on a CPU without AMX (%d)", f->probe.amx_perm);
		CHECK(!here && f->tier != HS_TIER_AMX, "AMX chosen on a CPU without it");
	} else {
		CHECK(here == (f->best == HS_TIER_AMX), "tiles allowed %d but the AMX tier %s", here,
		      f->best == HS_TIER_AMX ? "chosen" : "refused");
	}
}

int main(void)
{
	test_made_up();
	test_this_machine();
	return hs_test_end();
}
