/* The choice of the CPU kernel tier from a probe (cpu-features.h), kept
 * apart from the probing so that tests can feed it made-up machines. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "cpu_kernels/cpu-features.h"

size_t hs__prefetch_ahead = 16384;
size_t hs__prefetch_ahead_l2 = 3072;
int hs__prefetch_l2;
size_t hs__prefetch_near;

static const char *const names[HS_TIER_COUNT] = { "ref", "avx2", "avx-vnni", "avx512-vnni", "amx" };

const char *hs__cpu_tier_name(int tier)
{
	return tier >= 0 && tier < HS_TIER_COUNT ? names[tier] : "?";
}

int hs__cpu_tier_from_name(const char *name)
{
	for (int t = 0; t < HS_TIER_COUNT; t++)
		if (strcmp(name, names[t]) == 0)
			return t;
	return -1;
}

/* XCR0 state components the OS must save for a tier's registers. */
#define XCR0_AVX 0x6ull       /* SSE, AVX (YMM upper halves) */
#define XCR0_AVX512 0xe0ull   /* opmask, ZMM upper halves, ZMM16-31 */
#define XCR0_AMX 0x60000ull   /* XTILECFG (17), XTILEDATA (18) */

enum { AVAILABLE, CPU_LACKS, REFUSED };

/* Whether tier t runs on p: AVAILABLE; CPU_LACKS (the CPU does not have
 * it, or the lower tier it builds on is missing: nothing was refused);
 * REFUSED (the CPU has it, but the OS, the kernel or the build said no).
 * why[] says which, unless AVAILABLE. */
static int check(const struct hs_cpu_probe *p, int t, char *why, size_t len)
{
	const char *lacks = NULL;
	int cpu, os, c;

	why[0] = '\0';
	switch (t) {
	case HS_TIER_REF: return AVAILABLE;
	case HS_TIER_AVX2:
		cpu = p->avx2 && p->fma && p->f16c;
		lacks = "AVX2, FMA or F16C";
		os = (p->xcr0 & XCR0_AVX) == XCR0_AVX;
		break;
	case HS_TIER_AVX_VNNI:
	case HS_TIER_AVX512_VNNI:
		if ((c = check(p, HS_TIER_AVX2, why, len)) != AVAILABLE)
			return c == REFUSED ? CPU_LACKS : c;
		cpu = t == HS_TIER_AVX_VNNI ? p->avx_vnni : p->avx512f && p->avx512bw && p->avx512vl && p->avx512vnni;
		lacks = t == HS_TIER_AVX_VNNI ? "AVX-VNNI" : "AVX-512 F, BW, VL or VNNI";
		os = t == HS_TIER_AVX_VNNI || (p->xcr0 & XCR0_AVX512) == XCR0_AVX512;
		break;
	case HS_TIER_AMX:
		if ((c = check(p, HS_TIER_AVX512_VNNI, why, len)) != AVAILABLE)
			return c == REFUSED ? CPU_LACKS : c;
		/* VBMI: the tier's one-token MXFP4 decode (packed-512.h); every
		 * CPU with AMX has it */
		cpu = p->amx_tile && p->amx_int8 && p->avx512vbmi;
		lacks = "AMX-TILE, AMX-INT8 or AVX-512 VBMI";
		if (cpu && (p->xcr0 & XCR0_AMX) != XCR0_AMX) {
			snprintf(why, len, "the OS does not enable the tile state (XCR0 %#llx lacks bits 17, 18)", p->xcr0);
			return REFUSED;
		}
		if (cpu && p->amx_perm != 0) {
			snprintf(why, len, "the kernel did not grant the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM: %s)",
				 p->amx_perm == 1 ? "not asked" : strerror(-p->amx_perm));
			return REFUSED;
		}
		os = 1;
		break;
	default: snprintf(why, len, "no such tier"); return CPU_LACKS;
	}
	if (!cpu) {
		snprintf(why, len, "the CPU lacks %s", lacks);
		return CPU_LACKS;
	}
	if (!os) {
		snprintf(why, len, "the OS does not save its registers (XCR0 %#llx)", p->xcr0);
		return REFUSED;
	}
	if (!(p->built & (1u << t))) {
		snprintf(why, len, "this build does not carry it (its compiler lacked the flags at configure time)");
		return REFUSED;
	}
	return AVAILABLE;
}

int hs__cpu_tier_why(const struct hs_cpu_probe *p, int tier, char *why, size_t len)
{
	return check(p, tier, why, len) != AVAILABLE;
}

int hs__cpu_tier_choose(const struct hs_cpu_probe *p, const char *tier_env, const char *use_ref_env, int *best,
			char *note, size_t note_len)
{
	char why[160];
	int b = HS_TIER_REF, refused = -1;

	note[0] = '\0';
	for (int t = HS_TIER_COUNT - 1; t > HS_TIER_REF; t--) {
		int c = check(p, t, why, sizeof why);
		if (c == AVAILABLE) {
			b = t;
			break;
		}
		if (c == REFUSED && refused < 0) {
			refused = t;
			snprintf(note, note_len, "CPU kernels: %s refused: %s", names[t], why);
		}
	}
	*best = b;
	if (use_ref_env && strcmp(use_ref_env, "1") == 0)
		return HS_TIER_REF;
	if (!tier_env || !*tier_env)
		return b;
	int want = hs__cpu_tier_from_name(tier_env);
	if (want < 0) {
		snprintf(note, note_len, "HOTSET_CPU_TIER=%s: unknown tier (ref, avx2, avx-vnni, avx512-vnni, amx); running %s",
			 tier_env, names[b]);
		return b;
	}
	/* the asked-for tier, or the fastest available one below it */
	char why_want[160];
	int t = want;
	check(p, want, why_want, sizeof why_want);
	while (t > HS_TIER_REF && check(p, t, why, sizeof why) != AVAILABLE)
		t--;
	if (t == want && t < b)
		snprintf(note, note_len, "HOTSET_CPU_TIER=%s: running %s (the fastest here is %s)", tier_env, names[t],
			 names[b]);
	else if (t == want)
		snprintf(note, note_len, "HOTSET_CPU_TIER=%s: running %s", tier_env, names[t]);
	else
		snprintf(note, note_len, "HOTSET_CPU_TIER=%s: not available here (%s); running %s", tier_env, why_want,
			 names[t]);
	return t;
}
