/* Checks per-sequence state files on the CPU: a sequence of a
 * sliding-window model (its ring wrapped) saved, loaded into another
 * sequence of a new context, continues with logits equal bit for bit to the
 * original's continuation, and its tokens come back; into a context with
 * another ubatch (another ring size) it continues within 1e-5, and on the
 * sim device (cells in device memory) within 1e-5 too; a file is
 * refused in one line, with the target sequence unchanged, when it comes
 * from another model or KV type, needs a larger context, is truncated at
 * any of several points, has trailing bytes, another magic, a newer
 * version, a section kind this version does not read, positions out of
 * order, a NaN in a K row or a token outside the vocabulary; saving leaves
 * no file on a failure and no .part on success; bad arguments get -EINVAL. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "tests/hs-test.h"

#define N_TOK 200
#define N_SAVED 60
#define HEADER 64

static int32_t tok[N_TOK];
static int n_vocab;
static char dir[4096];

static int read_tokens(const char *name)
{
	char rel[256];
	snprintf(rel, sizeof rel, "oracle/%s.tokens.txt", name);
	FILE *fp = fopen(hs_test_data(rel), "r");
	int n = 0;
	if (!fp)
		return -1;
	while (n < N_TOK && fscanf(fp, "%d", &tok[n]) == 1)
		n++;
	fclose(fp);
	return n == N_TOK ? 0 : -1;
}

static const char *model(const char *name)
{
	static char path[4][4096];
	static int k;
	char rel[256];
	snprintf(rel, sizeof rel, "oracle/%s.gguf", name);
	snprintf(path[k & 3], sizeof path[0], "%s", hs_test_data(rel));
	return path[k++ & 3];
}

static hs_runtime *open_rt(const char *path)
{
	struct hs_runtime_opts o = { .device = "cpu", .q = -1, .max_tokens = 64, .threads = 1 };
	hs_runtime *rt = NULL;
	CHECK(hs_runtime_open(path, &o, &rt) == 0, "%s", hs_last_error());
	return rt;
}

static hs_context *new_ctx(hs_runtime *rt, int n_ctx, int n_ubatch, enum hs_kv_type kv)
{
	struct hs_context_opts co = { .n_ctx = n_ctx, .n_seq = 2, .n_ubatch = n_ubatch, .kv_type = kv };
	hs_context *c = NULL;
	CHECK(rt && hs_context_create(rt, &co, &c) == 0, "%s", hs_last_error());
	return c;
}

static int run(hs_context *c, int seq, int from, int to)
{
	static struct hs_token b[N_TOK];
	for (int i = from; i < to; i++)
		b[i - from] = (struct hs_token){ tok[i], i, seq, 0 };
	return hs_decode(c, to - from, b);
}

/* Positions N_SAVED.. N_SAVED+2 one at a time; their logits into out[3][n_vocab]. */
static int go_on(hs_context *c, int seq, float *out)
{
	for (int i = 0; i < 3; i++) {
		struct hs_token t = { tok[N_SAVED + i], N_SAVED + i, seq, 1 };
		int rc = hs_decode(c, 1, &t);
		if (rc)
			return rc;
		memcpy(out + (size_t)i * n_vocab, hs_context_logits(c, 0), sizeof *out * n_vocab);
	}
	return 0;
}

static char *path_in(const char *name)
{
	static char p[8][4200];
	static int k;
	char *b = p[k++ & 7];
	snprintf(b, sizeof p[0], "%s/%s", dir, name);
	return b;
}

static long read_all(const char *path, unsigned char **buf)
{
	FILE *fp = fopen(path, "rb");
	long n = -1;
	if (fp && fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
	    (*buf = malloc(n + 1)) && fread(*buf, 1, n, fp) != (size_t)n)
		n = -1;
	if (fp)
		fclose(fp);
	return n;
}

static void write_all(const char *path, const unsigned char *buf, long n)
{
	FILE *fp = fopen(path, "wb");
	CHECK(fp && fwrite(buf, 1, n, fp) == (size_t)n, "cannot write %s", path);
	if (fp)
		fclose(fp);
}

/* The file with bytes [at, at + n) replaced (or cut to `cut` bytes, or
 * with a byte appended) must be refused with want and leave seq 0 of c at
 * 5 positions. */
static void refused(hs_context *c, const unsigned char *good, long size, const char *what, long at, const void *bytes,
		    int n, long cut, int want)
{
	unsigned char *b = malloc(size + 1);
	memcpy(b, good, size);
	if (bytes)
		memcpy(b + at, bytes, n);
	long len = cut >= 0 ? cut : size;
	if (cut == -2) /* a trailing byte */
		b[size] = 0, len = size + 1;
	const char *p = path_in("bad.state");
	write_all(p, b, len);
	int rc = hs_context_seq_load(c, 0, p, NULL, 0, NULL);
	CHECK(rc == want && !strchr(hs_last_error(), '\n') && strstr(hs_last_error(), p), "%s: rc %d (want %d) '%s'",
	      what, rc, want, hs_last_error());
	CHECK(hs_context_seq_pos(c, 0) == 5, "%s: the refused load changed the sequence (at %d)", what,
	      hs_context_seq_pos(c, 0));
	free(b);
}

int main(void)
{
	const char *name = "gptoss-l4-h192-swa32-q8";
	if (read_tokens(name))
		SKIP("%s: no tokens file under $HS_DATA", name);
	const char *tmp = getenv("TMPDIR");
	snprintf(dir, sizeof dir, "%s/hs-seq-state-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		SKIP("no temporary folder");
	hs_runtime *rt = open_rt(model(name));
	if (!rt)
		return hs_test_end();
	n_vocab = hs_runtime_model_info(rt)->n_vocab;
	float *want = malloc(sizeof(float) * 3 * n_vocab), *got = malloc(sizeof(float) * 3 * n_vocab);
	int32_t back[N_TOK];
	int n_back = -1;
	char *saved = strdup(path_in("seq.state")), *bare = strdup(path_in("bare.state"));

	/* the original: 0..59 in ubatches of 4 (the ring of 36 cells wrapped), saved, then 60..62 */
	hs_context *a = new_ctx(rt, 128, 4, HS_KV_F16);
	CHECK(a && run(a, 0, 0, N_SAVED) == 0, "%s", hs_last_error());
	CHECK(hs_context_seq_save(a, 0, saved, tok, N_SAVED) == 0, "save: %s", hs_last_error());
	CHECK(access(path_in("seq.state.part"), F_OK) != 0, "a .part is left after saving");
	CHECK(hs_context_seq_save(a, 0, bare, NULL, 0) == 0, "save without tokens: %s", hs_last_error());
	CHECK(go_on(a, 0, want) == 0, "%s", hs_last_error());
	/* save errors: nothing written */
	CHECK(hs_context_seq_save(a, 0, path_in("no/such/dir/x.state"), NULL, 0) == -EIO &&
		      access(path_in("no/such/dir/x.state"), F_OK) != 0,
	      "save into a missing folder: '%s'", hs_last_error());
	CHECK(hs_context_seq_save(a, 0, path_in("x.state"), tok, 7) == -EINVAL && access(path_in("x.state"), F_OK) != 0,
	      "save with a token count that is not the sequence's");
	CHECK(hs_context_seq_save(a, 2, path_in("x.state"), NULL, 0) == -EINVAL &&
		      hs_context_seq_save(a, 0, NULL, NULL, 0) == -EINVAL &&
		      hs_context_seq_save(NULL, 0, path_in("x.state"), NULL, 0) == -EINVAL,
	      "bad save arguments accepted");
	hs_context_free(a);

	/* a new context, another sequence: the same continuation, bit for bit */
	hs_context *b = new_ctx(rt, 128, 4, HS_KV_F16);
	int rc = b ? hs_context_seq_load(b, 1, saved, back, N_TOK, &n_back) : -1;
	CHECK(rc == N_SAVED && n_back == N_SAVED && !memcmp(back, tok, sizeof *tok * N_SAVED) &&
		      hs_context_seq_pos(b, 1) == N_SAVED,
	      "load: rc %d, %d tokens: %s", rc, n_back, hs_last_error());
	CHECK(b && go_on(b, 1, got) == 0 && !memcmp(got, want, sizeof(float) * 3 * n_vocab),
	      "after save and load the logits differ from the original's");
	/* the file without tokens; tokens not asked for */
	CHECK(b && hs_context_seq_load(b, 1, bare, back, N_TOK, &n_back) == N_SAVED && n_back == 0,
	      "load without tokens: %s", hs_last_error());
	CHECK(b && hs_context_seq_load(b, 1, saved, NULL, 0, NULL) == N_SAVED, "load, no tokens asked: %s",
	      hs_last_error());
	CHECK(b && hs_context_seq_load(b, 1, saved, back, 10, &n_back) == -EINVAL && strstr(hs_last_error(), "room"),
	      "tokens over cap: '%s'", hs_last_error());

	/* another ubatch: another ring size, the same cells where it matters */
	hs_context *u = new_ctx(rt, 128, 8, HS_KV_F16);
	CHECK(u && hs_context_seq_load(u, 0, saved, NULL, 0, NULL) == N_SAVED && go_on(u, 0, got) == 0,
	      "load into ubatch 8: %s", hs_last_error());
	double worst = 0;
	for (int i = 0; u && i < 3; i++) {
		double num = 0, den = 0;
		for (int j = 0; j < n_vocab; j++) {
			double d = (double)got[(size_t)i * n_vocab + j] - want[(size_t)i * n_vocab + j];
			num += d * d;
			den += (double)want[(size_t)i * n_vocab + j] * want[(size_t)i * n_vocab + j];
		}
		worst = fmax(worst, sqrt(num / den));
	}
	CHECK(worst <= 1e-5, "load into another ring size: relative difference %.3g", worst);
	hs_context_free(u);

	/* on the sim device the cells live in device memory: the same round trip */
	{
		struct hs_runtime_opts so = { .device = "sim", .q = -1, .max_tokens = 64, .threads = 1 };
		hs_runtime *srt = NULL;
		CHECK(hs_runtime_open(model(name), &so, &srt) == 0, "sim: %s", hs_last_error());
		hs_context *s1 = new_ctx(srt, 128, 4, HS_KV_F16), *s2 = new_ctx(srt, 128, 4, HS_KV_F16);
		const char *sp = path_in("sim.state");
		CHECK(s1 && s2 && run(s1, 0, 0, N_SAVED) == 0 && hs_context_seq_save(s1, 0, sp, NULL, 0) == 0 &&
			      go_on(s1, 0, want) == 0 && hs_context_seq_load(s2, 1, sp, NULL, 0, NULL) == N_SAVED &&
			      go_on(s2, 1, got) == 0,
		      "sim: %s", hs_last_error());
		double num = 0, den = 0;
		for (size_t j = 0; s1 && s2 && j < (size_t)3 * n_vocab; j++) {
			num += ((double)got[j] - want[j]) * ((double)got[j] - want[j]);
			den += (double)want[j] * want[j];
		}
		CHECK(den > 0 && sqrt(num / den) <= 1e-5, "sim: after save and load the logits differ by %.3g",
		      den > 0 ? sqrt(num / den) : -1.0);
		hs_context_free(s1);
		hs_context_free(s2);
		hs_runtime_close(srt);
		unlink(sp);
	}

	/* refusals, the target sequence unchanged */
	if (b) {
		hs_context_seq_clear(b, 0);
		CHECK(run(b, 0, 0, 5) == 0, "%s", hs_last_error());
		CHECK(hs_context_seq_load(b, 0, path_in("missing.state"), NULL, 0, NULL) == -ENOENT, "a missing file");
		CHECK(hs_context_seq_load(b, 0, saved, NULL, -1, NULL) == -EINVAL &&
			      hs_context_seq_load(b, 2, saved, NULL, 0, NULL) == -EINVAL &&
			      hs_context_seq_load(b, 0, NULL, NULL, 0, NULL) == -EINVAL &&
			      hs_context_seq_load(NULL, 0, saved, NULL, 0, NULL) == -EINVAL,
		      "bad load arguments accepted");
		unsigned char *good = NULL;
		long size = read_all(saved, &good);
		CHECK(size > HEADER + 4 * N_SAVED, "the state file has %ld bytes", size);
		const long sec = HEADER + 4 * N_SAVED; /* the first section: kind, layer, bytes, n, positions */
		if (size > sec + 64) {
			const long cuts[] = {
				0, 10, HEADER - 1, HEADER, sec - 1, sec + 15, sec + 19, size / 2, size - 1
			};
			for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
				char what[64];
				snprintf(what, sizeof what, "cut at %ld of %ld bytes", cuts[k], size);
				refused(b, good, size, what, 0, NULL, 0, cuts[k], -EIO);
			}
			refused(b, good, size, "a trailing byte", 0, NULL, 0, -2, -EIO);
			refused(b, good, size, "another magic", 0, "HSSEQSX", 7, -1, -EIO);
			uint32_t v2 = 2, kind2 = 2;
			refused(b, good, size, "version 2", 8, &v2, 4, -1, -ENOTSUP);
			refused(b, good, size, "another model id", 16, "\x01\x02", 2, -1, -EINVAL);
			refused(b, good, size, "a recurrent-state section", sec, &kind2, 4, -1, -ENOTSUP);
			int32_t n_cells, p[2];
			memcpy(&n_cells, good + sec + 16, 4);
			memcpy(p, good + sec + 20, 8);
			int32_t swapped[2] = { p[1], p[0] }, bad_id = n_vocab;
			refused(b, good, size, "positions out of order", sec + 20, swapped, 8, -1, -EIO);
			refused(b, good, size, "a token outside the vocabulary", HEADER + 4, &bad_id, 4, -1, -EIO);
			refused(b, good, size, "a NaN in a K row", sec + 20 + 4L * n_cells, "\x00\x7e", 2, -1, -EIO);
			int32_t huge = 1 << 30;
			refused(b, good, size, "a huge cell count", sec + 16, &huge, 4, -1, -EIO);
		}
		free(good);
		/* a context too small, another KV type, other models */
		hs_context *small = new_ctx(rt, 32, 4, HS_KV_F16), *q8 = new_ctx(rt, 128, 4, HS_KV_Q8_0);
		CHECK(small && hs_context_seq_load(small, 0, saved, NULL, 0, NULL) == -EINVAL &&
			      strstr(hs_last_error(), "n_ctx"),
		      "into n_ctx 32: '%s'", hs_last_error());
		CHECK(q8 && hs_context_seq_load(q8, 0, saved, NULL, 0, NULL) == -EINVAL &&
			      strstr(hs_last_error(), "KV"),
		      "into a q8_0 cache: '%s'", hs_last_error());
		hs_context_free(small);
		hs_context_free(q8);
		static const char *const others[] = { "gptoss-l4-h256-e16k4-q8-split-00001-of-00003",
						      "qwen3moe-l3-h256-e16k4-q8" };
		for (size_t k = 0; k < 2; k++) {
			hs_runtime *ro = open_rt(model(others[k]));
			hs_context *co = new_ctx(ro, 128, 4, HS_KV_F16);
			rc = co ? hs_context_seq_load(co, 0, saved, NULL, 0, NULL) : 0;
			CHECK(rc == -EINVAL && strstr(hs_last_error(), "another model") &&
				      hs_context_seq_pos(co, 0) == 0,
			      "a file of %s into %s: rc %d '%s'", name, others[k], rc, hs_last_error());
			hs_context_free(co);
			hs_runtime_close(ro);
		}
		CHECK(hs_context_seq_pos(b, 0) == 5, "refusals changed the sequence");
		/* an empty sequence round-trips too */
		hs_context_seq_clear(b, 0);
		CHECK(hs_context_seq_save(b, 0, bare, NULL, 0) == 0 &&
			      hs_context_seq_load(b, 1, bare, NULL, 0, NULL) == 0 && hs_context_seq_pos(b, 1) == 0,
		      "an empty sequence: %s", hs_last_error());
	}
	hs_context_free(b);
	hs_runtime_close(rt);
	free(want);
	free(got);
	free(saved);
	free(bare);
	const char *files[] = { "seq.state", "bare.state", "bad.state" };
	for (size_t k = 0; k < 3; k++)
		unlink(path_in(files[k]));
	rmdir(dir);
	return hs_test_end();
}
