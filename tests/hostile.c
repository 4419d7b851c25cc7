/* Runs the `hotset` command on a few hundred hostile inputs made from valid
 * ones (truncations, bit flips, huge declared counts, wrong types and values)
 * for each file kind it reads: GGUF, .npy, plan JSON, profile JSON, trace and
 * hwloc XML; split GGUF models (llama-gguf-split's shards) with one shard
 * broken or missing, opened from it and from the first.  Each run must end
 * with status 0, 1 or 2 (never a signal, never
 * a sanitizer's report), within a time limit; a refused input must get
 * exactly one line on stderr and leave no output file (nor a .part) behind.
 * The mutations come from a fixed seed, so a failure reproduces; with -v the
 * driver prints every case, with --keep DIR it keeps the failing inputs, and
 * --seed N draws another set (for hunting, not for `make check`). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/hs-test.h"

static const char *hotset, *top;
static char dir[] = "/tmp/hs-hostile-XXXXXX";
static const char *keep_dir;
static int verbose, time_limit = 20, n_cases, n_refused, n_kept;
/* a GGUF case is written to case_base.gguf and the command opens it, or
 * open_path (a split model's other shard) when set */
static const char *case_base = "case", *open_path;
static uint64_t rng = 0x9e3779b97f4a7c15ull; /* fixed: a failure reproduces */

static uint64_t next(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t below(size_t n)
{
	return n ? (size_t)(next() % n) : 0;
}

/* A path in the work folder; a ring of buffers, enough for one case's
 * command line and its checks (keep a path longer than that: strdup). */
static char *path_of(const char *name)
{
	static char buf[32][512];
	static int k;
	char *b = buf[k++ & 31];
	snprintf(b, sizeof buf[0], "%s/%s", dir, name);
	return b;
}

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	struct stat st;

	if (!f || fstat(fileno(f), &st) != 0) {
		if (f)
			fclose(f);
		return NULL;
	}
	b = malloc((size_t)st.st_size + 1);
	*n = b ? fread(b, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	return b;
}

static int spit(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(b, 1, n, f) == n;
	if (f)
		ok = (fclose(f) == 0) && ok;
	return ok ? 0 : -1;
}

static int exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

/* Runs argv (NULL-terminated) with stdout to /dev/null and stderr to a file;
 * returns the wait status. */
static int run(char *const argv[], const char *err_path)
{
	pid_t pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY), err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(nul, 1);
		dup2(err, 2);
		alarm((unsigned)time_limit); /* kept across exec: unbounded work ends in SIGALRM */
		execv(argv[0], argv);
		_exit(127);
	}
	int st = 0;
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return pid > 0 ? st : -1;
}

static int setup_cmd(const char *what, char *const argv[])
{
	int st = run(argv, path_of("setup.err"));
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		size_t n = 0;
		char *e = (char *)slurp(path_of("setup.err"), &n);
		if (e)
			e[n] = 0;
		fprintf(stderr, "setup %s failed: %s\n", what, e ? e : "?");
		free(e);
		return -1;
	}
	return 0;
}

/* ---- one case ------------------------------------------------------------- */

enum kind { GGUF, NPY, PLAN, PROFILE, TRACE, XML, N_KINDS };
static const char *const kind_name[] = { "gguf", "npy", "plan", "profile", "trace", "xml" };
static const char *const ext[] = { "gguf", "npy", "json", "json", "trace", "xml" };

/* The command that reads a file of this kind (variant v picks among a few)
 * and the output it would write (NULL: none). */
static int command(enum kind k, int v, const char *f, char **argv, const char **out)
{
	int n = 0;
	static char H[512];
	snprintf(H, sizeof H, "%s", hotset);
	const char *model = path_of("seed.gguf"), *x = path_of("seed.npy"), *y = path_of("out.npy");
	const char *js = path_of("out.json"), *csv = path_of("out.csv");
#define A(s) (argv[n++] = (char *)(s))
	A(H);
	*out = NULL;
	switch (k) {
	case GGUF:
		if (open_path)
			f = open_path;
		if (v % 2 == 0) {
			A("model"); A(f);
		} else {
			A("run-layer"); A("--model"); A(f); A("--layer"); A("0"); A("--input"); A(x); A("--output"); A(y);
			*out = y;
		}
		break;
	case NPY:
		A("run-layer"); A("--model"); A(model); A("--layer"); A("0"); A("--input"); A(f); A("--output"); A(y);
		*out = y;
		break;
	case PLAN:
		if (v % 2 == 0) {
			A("run-layer"); A("--model"); A(model); A("--layer"); A("0"); A("--input"); A(x); A("--output");
			A(y); A("--mode"); A("cpu"); A("--device"); A("sim"); A("--plan"); A(f);
			*out = y;
		} else {
			A("trace"); A("project"); A("--plan"); A(f); A(path_of("seed.trace"));
		}
		break;
	case PROFILE:
		A("plan"); A("--preset"); A(v % 2 ? "gpt-oss-20b" : "qwen3-30b-a3b"); A("--profile"); A(f); A("-o"); A(js);
		*out = js;
		break;
	case TRACE:
		if (v % 3 == 0) {
			A("trace"); A("stats"); A(f);
		} else if (v % 3 == 1) {
			A("trace"); A("csv"); A(f); A("-o"); A(csv);
			*out = csv;
		} else {
			A("run-layer"); A("--model"); A(model); A("--layer"); A("0"); A("--input"); A(path_of("seed2.npy"));
			A("--output"); A(y); A("--mode"); A("cpu"); A("--device"); A("sim"); A("--replay"); A(f);
			*out = y;
		}
		break;
	case XML:
		A("--topology"); A(f);
		if (v % 2 == 0) {
			A("topo");
		} else {
			A("plan"); A("--preset"); A("gpt-oss-20b"); A("--vram"); A("4"); A("-o"); A(js);
			*out = js;
		}
		break;
	default: break;
	}
#undef A
	argv[n] = NULL;
	return n;
}

static void keep(const char *label, const uint8_t *b, size_t n, enum kind k)
{
	char p[1024];
	if (!keep_dir)
		return;
	mkdir(keep_dir, 0755);
	snprintf(p, sizeof p, "%s/case-%03d-%s.%s", keep_dir, n_cases, label, ext[k]);
	for (char *s = p + strlen(keep_dir) + 1; *s; s++)
		if (*s == ' ' || *s == '/')
			*s = '_';
	spit(p, b, n);
	n_kept++;
}

static void one_case(enum kind k, const char *label, const uint8_t *b, size_t n)
{
	char f[600], *argv[32], part[700];
	const char *out;
	size_t en = 0;

	snprintf(f, sizeof f, "%s.%s", path_of(case_base), ext[k]);
	if (spit(f, b, n)) {
		CHECK(0, "cannot write %s", f);
		return;
	}
	int argc = command(k, n_cases, f, argv, &out);
	(void)argc;
	int st = run(argv, path_of("case.err"));
	char *err = (char *)slurp(path_of("case.err"), &en);
	int lines = 0;
	for (size_t i = 0; err && i < en; i++)
		lines += err[i] == '\n';
	if (err)
		err[en] = 0;
	const char *bad = NULL;
	char why[800];
	if (WIFSIGNALED(st)) {
		snprintf(why, sizeof why, "killed by signal %d%s", WTERMSIG(st),
			 WTERMSIG(st) == SIGALRM ? " (ran past the time limit)" : "");
		bad = why;
	} else if (!WIFEXITED(st) || WEXITSTATUS(st) > 2) {
		snprintf(why, sizeof why, "exit status %d", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		bad = why;
	} else if (WEXITSTATUS(st) != 0 && !strcmp(label, "the valid seed")) {
		bad = "the valid seed was refused";
	} else if (WEXITSTATUS(st) != 0) {
		n_refused++;
		snprintf(part, sizeof part, "%s.part", out ? out : "");
		if (lines != 1 || (en && err[en - 1] != '\n')) {
			snprintf(why, sizeof why, "%d lines on stderr", lines);
			bad = why;
		} else if (out && (exists(out) || exists(part))) {
			snprintf(why, sizeof why, "refused, but left %s", exists(out) ? out : part);
			bad = why;
		}
	}
	n_cases++;
	if (verbose || bad) {
		fprintf(bad ? stderr : stdout, "%s %-7s %-28s %-5s", bad ? "FAIL" : "ok  ", kind_name[k], label,
			WIFEXITED(st) ? (WEXITSTATUS(st) ? "refused" : "read") : "signal");
		for (int i = 1; argv[i]; i++)
			fprintf(bad ? stderr : stdout, " %s", argv[i]);
		fprintf(bad ? stderr : stdout, "\n     %s%s%.600s", bad ? bad : "", bad ? "\n     " : "", err ? err : "");
		if (!err || !en || err[en - 1] != '\n')
			fputc('\n', bad ? stderr : stdout);
	}
	if (bad) {
		hs_test_failures++;
		keep(label, b, n, k);
	}
	free(err);
	if (out) {
		unlink(out);
		unlink(part);
	}
}

/* ---- mutations ------------------------------------------------------------- */

static uint8_t *copy_of(const uint8_t *b, size_t n, size_t extra)
{
	uint8_t *c = malloc(n + extra + 1);
	memcpy(c, b, n);
	return c;
}

/* Cuts: the empty file, each of the first bytes of the header, then some. */
static void truncations(enum kind k, const uint8_t *b, size_t n, int count)
{
	char label[64];
	for (int i = 0; i < count; i++) {
		size_t at = i < count / 2 ? below(n < 64 ? n : 64) : below(n);
		snprintf(label, sizeof label, "cut at %zu", at);
		one_case(k, label, b, at);
	}
}

/* Bit flips, most in the header (where the counts and offsets are). */
static void bit_flips(enum kind k, const uint8_t *b, size_t n, size_t header, int count)
{
	char label[64];
	for (int i = 0; i < count; i++) {
		uint8_t *c = copy_of(b, n, 0);
		size_t at = i % 3 ? below(header < n ? header : n) : below(n);
		int bit = (int)below(8);
		c[at] ^= (uint8_t)(1u << bit);
		snprintf(label, sizeof label, "bit %d of byte %zu", bit, at);
		one_case(k, label, c, n);
		free(c);
	}
}

/* Huge or negative counts written over 4- and 8-byte fields of the header. */
static void huge_fields(enum kind k, const uint8_t *b, size_t n, size_t header, const size_t *fields, int n_fields,
			int count)
{
	static const uint64_t vals[] = { 0xffffffffffffffffull, 0x7fffffffffffffffull, 0x8000000000000000ull,
					 0xffffffffull, 0x7fffffffull, 0x80000000ull, 0x10000ull, 0 };
	char label[64];
	for (int i = 0; i < count; i++) {
		size_t at = i < n_fields ? fields[i] : below(header < n ? header : n) & ~(size_t)3;
		int w = i % 2 ? 4 : 8;
		if (at + (size_t)w > n)
			continue;
		uint8_t *c = copy_of(b, n, 0);
		uint64_t v = vals[below(sizeof vals / sizeof vals[0])];
		memcpy(c + at, &v, (size_t)w);
		snprintf(label, sizeof label, "%d bytes at %zu = %#llx", w, at, (unsigned long long)(w == 4 ? (uint32_t)v : v));
		one_case(k, label, c, n);
		free(c);
	}
}

/* Text: a token replaced by a value of another type or range. */
static void text_swaps(enum kind k, const uint8_t *b, size_t n, const char *const *from, int n_from,
		       const char *const *to, int n_to, int count)
{
	char label[96];
	for (int i = 0; i < count; i++) {
		const char *a = from[below((size_t)n_from)], *r = to[below((size_t)n_to)];
		size_t la = strlen(a), lr = strlen(r), hits = 0;
		for (size_t p = 0; p + la <= n; p++)
			hits += memcmp(b + p, a, la) == 0;
		if (!hits)
			continue;
		size_t pick = below(hits), p = 0;
		for (;; p++)
			if (memcmp(b + p, a, la) == 0 && pick-- == 0)
				break;
		uint8_t *c = malloc(n - la + lr + 1);
		memcpy(c, b, p);
		memcpy(c + p, r, lr);
		memcpy(c + p + lr, b + p + la, n - p - la);
		snprintf(label, sizeof label, "'%.20s' -> '%.20s'", a, r);
		one_case(k, label, c, n - la + lr);
		free(c);
	}
}

/* JSON: any number, string or literal replaced by one of another type. */
static void json_swaps(enum kind k, const uint8_t *b, size_t n, int count)
{
	static const char *const to[] = { "\"x\"", "[]", "{}", "null", "true", "-1", "0", "1e999", "-1e999",
					   "18446744073709551616", "9223372036854775807", "2147483648", "0.5",
					   "\"\"", "[1, 2]", "NaN", "\"\\u0000\"" };
	char label[96];
	for (int i = 0; i < count; i++) {
		/* a value: after a ':' or inside an array, up to ',', '}' or ']' */
		size_t p = below(n), tries = 0;
		while (tries++ < n && !(b[p] == ':' || b[p] == '['))
			p = (p + 1) % n;
		if (tries >= n)
			return;
		size_t s = p + 1;
		while (s < n && (b[s] == ' ' || b[s] == '\n'))
			s++;
		if (s >= n || b[s] == '{' || b[s] == '[')
			continue; /* containers: left to truncation and bit flips */
		size_t e = s;
		if (b[s] == '"') {
			for (e = s + 1; e < n && b[e] != '"'; e += b[e] == '\\' ? 2 : 1)
				;
			e++;
		} else
			while (e < n && b[e] != ',' && b[e] != '}' && b[e] != ']' && b[e] != '\n')
				e++;
		if (e > n)
			continue;
		const char *r = to[below(sizeof to / sizeof to[0])];
		size_t lr = strlen(r);
		uint8_t *c = malloc(n - (e - s) + lr + 1);
		memcpy(c, b, s);
		memcpy(c + s, r, lr);
		memcpy(c + s + lr, b + e, n - e);
		snprintf(label, sizeof label, "value at %zu -> %s", s, r);
		one_case(k, label, c, n - (e - s) + lr);
		free(c);
	}
}

/* ---- the seeds ------------------------------------------------------------- */

static int write_npy(const char *path, int rows, int cols, float fill)
{
	char h[128];
	int len = snprintf(h, sizeof h, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
	while ((10 + len + 1) % 64)
		h[len++] = ' ';
	h[len++] = '\n';
	size_t n = 10 + (size_t)len + sizeof(float) * (size_t)rows * cols;
	uint8_t *b = malloc(n);
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (uint8_t)(len & 255);
	b[9] = (uint8_t)(len >> 8);
	memcpy(b + 10, h, (size_t)len);
	for (int i = 0; i < rows * cols; i++) {
		float v = fill * (float)((i * 37) % 17 - 8) / 8.0f;
		memcpy(b + 10 + len + 4 * (size_t)i, &v, 4);
	}
	int rc = spit(path, b, n);
	free(b);
	return rc;
}

static int make_seeds(void)
{
	char prof[1024];
	snprintf(prof, sizeof prof, "%s/profiles/a6000-48g-pcie3.json", top);
	char *gen[] = { (char *)hotset, "gen", "-q", "--arch", "gpt-oss", "--layers", "1", "--experts", "4", "--used", "2",
			"--embd", "64", "--ff", "64", "-o", path_of("seed.gguf"), NULL };
	char *plan[] = { (char *)hotset, "plan", "--model", path_of("seed.gguf"), "--profile", prof, "--host-layers", "1",
			 "-o", path_of("seed.json"), NULL };
	char *trace[] = { (char *)hotset, "trace", "gen", "--layers", "1", "--experts", "4", "--used", "2", "--top", "1",
			  "--share", "0.5", "--steps", "4", "--tokens", "2", "-o", path_of("seed.trace"), NULL };
	/* the same model in shards of at most 50,000 data bytes: 3 of them */
	char *split[] = { (char *)hotset, "gen", "-q", "--arch", "gpt-oss", "--layers", "1", "--experts", "4", "--used", "2",
			  "--embd", "64", "--ff", "64", "--split-max-size", "50000", "-o", path_of("sp"), NULL };
	if (write_npy(path_of("seed.npy"), 3, 64, 1.0f) || write_npy(path_of("seed2.npy"), 2, 64, 0.5f))
		return -1;
	return setup_cmd("gen", gen) || setup_cmd("plan", plan) || setup_cmd("trace gen", trace) ||
	       setup_cmd("gen split", split) ? -1 : 0;
}

/* Split models: shard 2 of 3 broken (cut, flipped, huge counts, another
 * shard's bytes), opened from itself and from shard 1; the last shard
 * missing.  The other shards stay valid; shard 2 is put back after. */
static void split_cases(int scale)
{
	char base[3][64], *first = strdup(path_of("sp-00001-of-00003.gguf"));
	uint8_t *b[3] = { NULL, NULL, NULL };
	size_t n[3];

	for (int i = 0; i < 3; i++) {
		snprintf(base[i], sizeof base[i], "sp-%05d-of-00003", i + 1);
		char name[80];
		snprintf(name, sizeof name, "%s.gguf", base[i]);
		b[i] = slurp(path_of(name), &n[i]);
		if (!b[i] || !n[i]) {
			CHECK(0, "split seed %s unreadable (did gen cut it into 3 shards?)", name);
			goto out_free;
		}
	}
	case_base = base[0];
	one_case(GGUF, "the valid seed", b[0], n[0]); /* the split model from its first shard: read */
	case_base = base[1];
	for (int from = 0; from < 2; from++) {
		static const size_t fields[] = { 8, 16, 24, 4 };
		open_path = from ? first : NULL;
		truncations(GGUF, b[1], n[1], 8 / scale);
		bit_flips(GGUF, b[1], n[1], 256, 12 / scale);
		huge_fields(GGUF, b[1], n[1], 256, fields, 4, 6 / scale);
		one_case(GGUF, "shard 3 as shard 2", b[2], n[2]);
		one_case(GGUF, "shard 1 as shard 2", b[0], n[0]);
	}
	spit(path_of("sp-00002-of-00003.gguf"), b[1], n[1]);
	/* the last shard missing, from the first and from shard 2 */
	unlink(path_of("sp-00003-of-00003.gguf"));
	open_path = first;
	one_case(GGUF, "last shard missing", b[1], n[1]);
	open_path = NULL;
	one_case(GGUF, "last shard missing", b[1], n[1]);
	spit(path_of("sp-00003-of-00003.gguf"), b[2], n[2]);
	case_base = "case";
out_free:
	for (int i = 0; i < 3; i++)
		free(b[i]);
	free(first);
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-v"))
			verbose = 1;
		else if (!strcmp(argv[i], "--keep") && i + 1 < argc)
			keep_dir = argv[++i];
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng += strtoull(argv[++i], NULL, 0) * 0x2545f4914f6cdd1dull;
		else {
			fprintf(stderr, "usage: hostile [-v] [--keep DIR] [--seed N]\n");
			return 2;
		}
	}
	hotset = getenv("HOTSET");
	top = getenv("top_srcdir");
	if (!hotset || !top)
		SKIP("run through make check ($HOTSET and $top_srcdir name the command and the sources)");
	/* under the sanitizers every run is several times slower: fewer cases */
	const char *san = getenv("HS_SANITIZER_BUILD");
	const int scale = san && !strcmp(san, "yes") ? 2 : 1;
	if (scale > 1)
		time_limit = 60;
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	if (make_seeds()) {
		CHECK(0, "the seeds could not be made");
		return hs_test_end();
	}
	char xml_seed[1024], prof_seed[1024];
	snprintf(xml_seed, sizeof xml_seed, "%s/tests/data/topologies/24em64t-2n6c2t-pci.xml", top);
	snprintf(prof_seed, sizeof prof_seed, "%s/profiles/dual-ddr5-1gpu.json", top);
	char *seed_path[N_KINDS] = { strdup(path_of("seed.gguf")), strdup(path_of("seed.npy")),
				     strdup(path_of("seed.json")), strdup(prof_seed),
				     strdup(path_of("seed.trace")), strdup(xml_seed) };
	uint8_t *seed[N_KINDS];
	size_t size[N_KINDS];
	for (int k = 0; k < N_KINDS; k++) {
		seed[k] = slurp(seed_path[k], &size[k]);
		if (!seed[k] || !size[k]) {
			CHECK(0, "seed %s unreadable", seed_path[k]);
			return hs_test_end();
		}
		one_case((enum kind)k, "the valid seed", seed[k], size[k]); /* must be read */
	}
	const int T = 12 / scale, F = 24 / scale, H = 12 / scale, S = 20 / scale;

	/* GGUF: the header's counts at 8 and 16, the first key's length at 24 */
	static const size_t gguf_fields[] = { 8, 16, 24, 4 };
	truncations(GGUF, seed[GGUF], size[GGUF], T);
	bit_flips(GGUF, seed[GGUF], size[GGUF], 1024, F);
	huge_fields(GGUF, seed[GGUF], size[GGUF], 1024, gguf_fields, 4, H);
	{
		static const char *const from[] = { "gpt-oss", "blk.0.ffn_down_exps.weight", "expert_count" };
		static const char *const to[] = { "llama", "blk.0.ffn_down_exps.weighx", "expert_coun" };
		text_swaps(GGUF, seed[GGUF], size[GGUF], from, 3, to, 3, 4 / scale);
	}

	split_cases(scale);

	/* npy: the header's length (8), its dict, then the data */
	static const size_t npy_fields[] = { 8, 6 };
	truncations(NPY, seed[NPY], size[NPY], T);
	bit_flips(NPY, seed[NPY], size[NPY], 128, F / 2);
	huge_fields(NPY, seed[NPY], size[NPY], 10, npy_fields, 2, 2);
	{
		static const char *const from[] = { "'<f4'", "False", "(3, 64)", "'shape'", "}" };
		static const char *const to[] = { "'<f8'", "'>f4'", "'|u1'", "True", "(3, 64, 1)", "(99999999999, 64)",
						  "(-3, 64)", "(3,)", "()", "'shapes'", "", "(3, 0)", "(0, 64)" };
		text_swaps(NPY, seed[NPY], size[NPY], from, 5, to, 13, S);
	}
	{ /* values that are not finite */
		uint8_t *c = copy_of(seed[NPY], size[NPY], 0);
		static const uint32_t nan = 0x7fc00000u, inf = 0xff800000u;
		memcpy(c + size[NPY] - 4 * 70, &nan, 4);
		one_case(NPY, "NaN in row 1", c, size[NPY]);
		memcpy(c + size[NPY] - 4 * 70, &inf, 4);
		one_case(NPY, "-Inf in row 1", c, size[NPY]);
		free(c);
	}

	/* plan and profile JSON: wrong types and ranges, cuts, flips */
	truncations(PLAN, seed[PLAN], size[PLAN], T);
	bit_flips(PLAN, seed[PLAN], size[PLAN], size[PLAN], F / 2);
	json_swaps(PLAN, seed[PLAN], size[PLAN], S * 2);
	truncations(PROFILE, seed[PROFILE], size[PROFILE], T / 2);
	bit_flips(PROFILE, seed[PROFILE], size[PROFILE], size[PROFILE], F / 2);
	json_swaps(PROFILE, seed[PROFILE], size[PROFILE], S * 2);

	/* trace: experts and k at 12 and 16, reserved bytes, the first record's
	 * step, layer, token count and reserved field, ids */
	static const size_t trace_fields[] = { 12, 16, 20, 40, 36, 44, 48, 52 };
	truncations(TRACE, seed[TRACE], size[TRACE], T);
	bit_flips(TRACE, seed[TRACE], size[TRACE], 64, F);
	huge_fields(TRACE, seed[TRACE], size[TRACE], 64, trace_fields, 8, H + 4);

	/* hwloc XML: values out of range, other types, broken structure */
	truncations(XML, seed[XML], size[XML], T / 2);
	bit_flips(XML, seed[XML], size[XML], size[XML], F / 2);
	{
		static const char *const from[] = { "os_index=\"1\"", "local_memory=\"", "type=\"NUMANode\"", "cpuset=\"0x",
						    "nodeset=\"0x00000002\"", "</object>", "linkspeed=\"", "type=\"PCIDev\"",
						    "pci_type=\"", " complete_nodeset=\"" };
		static const char *const to[] = { "os_index=\"0\"", "local_memory=\"-", "type=\"Nope\"",
						  "cpuset=\"0xffffffffffffffffffffffffffffffffffff", "nodeset=\"0x0\"", "",
						  "linkspeed=\"99999999999999999999", "type=\"Package\"", "pci_type=\"zz",
						  "os_index=\"4294967295\"", "local_memory=\"99999999999999999999999",
						  " other_nodeset=\"" };
		text_swaps(XML, seed[XML], size[XML], from, 10, to, 12, S);
	}

	printf("%d hostile inputs: %d refused with one line, %d read as valid; %d failed\n", n_cases, n_refused,
	       n_cases - n_refused, hs_test_failures);
	if (n_kept)
		printf("failing inputs kept in %s\n", keep_dir);
	for (int k = 0; k < N_KINDS; k++) {
		free(seed[k]);
		free(seed_path[k]);
	}
	char *rm[] = { "/bin/rm", "-rf", dir, NULL };
	run(rm, "/dev/null");
	return hs_test_end();
}
