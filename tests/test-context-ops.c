/* Checks what a llama.h user expects beside decoding, on the CPU (bit for
 * bit, the same ubatch tiles on both sides of each comparison): a load
 * cancelled by the abort callback (every layer, the progress callback's
 * flag, the first context's dense weights) returns -ECANCELED and leaks
 * nothing (the sanitizer build checks); a decode cancelled between layers
 * or ubatches returns -ECANCELED with the batch undone, so running it again
 * gives the logits of a run never cancelled (on a sliding-window model
 * whose ring the batch overwrote: a rollback that only forgets cells fails
 * this); hs_context_seq_cp of a whole sequence and of a prefix equals
 * decoding it there, and is refused (-ENOTSUP) where a ring lost the
 * window; hs_context_seq_rm cuts the tail as a shorter run, refuses a cut
 * the ring cannot honour with nothing changed, and leaves a hole the next
 * token does not see; hs_runtime_set_threads changes the workers of a live
 * runtime and its contexts; bad arguments get -EINVAL. */
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
#define UB 4 /* ubatch: the window-32 model's ring is 36 cells */

static int32_t tok[N_TOK];
static int n_vocab;

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

/* ---- abort callbacks ----------------------------------------------------------- */

struct counter {
	int calls, fire_at; /* fire at the fire_at-th call (from 0); < 0: never */
	int flag;           /* set by the progress callback */
};

static int abort_count(void *ctx)
{
	struct counter *k = ctx;
	int n = k->calls++;
	return k->fire_at >= 0 && n >= k->fire_at;
}

static int abort_flag(void *ctx)
{
	return ((struct counter *)ctx)->flag;
}

static void progress_stop(const char *what, double f, void *ctx)
{
	(void)f;
	if (strstr(what, "layer 1"))
		((struct counter *)ctx)->flag = 1;
}

static hs_runtime *open_rt(const char *path, hs_abort_fn fn, void *ctx, int *rc)
{
	struct hs_runtime_opts o = {
		.device = "cpu", .q = -1, .max_tokens = 64, .threads = 1, .abort = fn, .abort_ctx = ctx
	};
	hs_runtime *rt = NULL;
	*rc = hs_runtime_open(path, &o, &rt);
	return rt;
}

static void check_load_abort(const char *path)
{
	int rc;
	for (int k = 0; k < 3; k++) {
		struct counter c = { 0, k, 0 };
		hs_runtime *rt = open_rt(path, abort_count, &c, &rc);
		CHECK(rc == -ECANCELED && !rt && strstr(hs_last_error(), "cancelled"), "abort at call %d: rc %d '%s'",
		      k, rc, hs_last_error());
		hs_runtime_close(rt);
	}
	/* a progress callback stops the load through the flag it sets */
	struct counter c = { 0, -1, 0 };
	struct hs_runtime_opts o = { .device = "cpu",
				     .q = -1,
				     .max_tokens = 64,
				     .threads = 1,
				     .progress = progress_stop,
				     .progress_ctx = &c,
				     .abort = abort_flag,
				     .abort_ctx = &c };
	hs_runtime *rt = NULL;
	rc = hs_runtime_open(path, &o, &rt);
	CHECK(rc == -ECANCELED && !rt && strstr(hs_last_error(), "layer 1"), "progress flag: rc %d '%s'", rc,
	      hs_last_error());
	hs_runtime_close(rt);
	/* never firing: asked once a layer at least, and the load goes through */
	struct counter never = { 0, -1, 0 };
	rt = open_rt(path, abort_count, &never, &rc);
	CHECK(rc == 0 && rt && never.calls >= hs_runtime_model_info(rt)->n_moe_layers, "%s (asked %d times)",
	      hs_last_error(), never.calls);
	if (!rt)
		return;
	never.fire_at = 0; /* armed for the dense weights of the first context */
	struct hs_context_opts co = { .n_ctx = 64 };
	hs_context *cx = NULL;
	rc = hs_context_create(rt, &co, &cx);
	CHECK(rc == -ECANCELED && !cx, "the first context's dense weights: rc %d '%s'", rc, hs_last_error());
	never.fire_at = -1;
	rc = hs_context_create(rt, &co, &cx);
	CHECK(rc == 0 && cx, "a context after a cancelled one: %s", hs_last_error());
	hs_context_free(cx);
	hs_runtime_close(rt);
}

/* ---- helpers -------------------------------------------------------------------- */

static hs_context *new_ctx(hs_runtime *rt, int n_seq)
{
	struct hs_context_opts co = { .n_ctx = 128, .n_seq = n_seq, .n_ubatch = UB };
	hs_context *c = NULL;
	CHECK(hs_context_create(rt, &co, &c) == 0, "%s", hs_last_error());
	return c;
}

/* Tokens [from, to) of the prompt (shifted by `shift` mod n_vocab) into
 * seq as one batch. */
static int run(hs_context *c, int seq, int from, int to, int shift)
{
	static struct hs_token b[N_TOK];
	for (int i = from; i < to; i++)
		b[i - from] = (struct hs_token){ (tok[i] + shift) % n_vocab, i, seq, 0 };
	return hs_decode(c, to - from, b);
}

/* One token (prompt's at pos) into seq; its logits into out. */
static int step(hs_context *c, int seq, int pos, float *out)
{
	struct hs_token t = { tok[pos], pos, seq, 1 };
	int rc = hs_decode(c, 1, &t);
	if (!rc)
		memcpy(out, hs_context_logits(c, 0), sizeof *out * n_vocab);
	return rc;
}

/* The logits of position `at` after positions 0..at-1 in one batch. */
static void reference(hs_runtime *rt, int at, float *out)
{
	hs_context *c = new_ctx(rt, 1);
	CHECK(c && run(c, 0, 0, at, 0) == 0 && step(c, 0, at, out) == 0, "reference at %d: %s", at, hs_last_error());
	hs_context_free(c);
}

static int same(const float *a, const float *b)
{
	return memcmp(a, b, sizeof *a * n_vocab) == 0;
}

/* ---- decode abort --------------------------------------------------------------- */

static void check_decode_abort(hs_runtime *rt, const char *name)
{
	float *want = malloc(sizeof(float) * n_vocab), *got = malloc(sizeof(float) * n_vocab);
	hs_context *a = new_ctx(rt, 2);
	/* 0..39, then 40..59 in one batch (5 ubatches), then 60 */
	CHECK(a && run(a, 0, 0, 40, 0) == 0 && run(a, 0, 40, 60, 0) == 0 && step(a, 0, 60, want) == 0, "%s",
	      hs_last_error());
	hs_context_free(a);
	/* asked before each ubatch and each layer (5 a ubatch here): 0 before
	 * anything, 17 in the fourth ubatch (the ring writes of the first three
	 * have overwritten cells the window at 40 sees), 24 in the fifth */
	static const int fire[] = { 0, 3, 9, 17, 24 };
	for (size_t k = 0; k < sizeof fire / sizeof fire[0]; k++) {
		hs_context *c = new_ctx(rt, 2);
		struct counter cnt = { 0, fire[k], 0 };
		if (!c)
			break;
		CHECK(run(c, 0, 0, 40, 0) == 0 && run(c, 1, 0, 10, 3) == 0, "%s", hs_last_error());
		CHECK(hs_context_set_abort(c, abort_count, &cnt) == 0, "set_abort");
		/* seq 1 rides along: it must come back too */
		static struct hs_token b[30];
		for (int i = 0; i < 20; i++)
			b[i] = (struct hs_token){ tok[40 + i], 40 + i, 0, 0 };
		for (int i = 0; i < 10; i++)
			b[20 + i] = (struct hs_token){ tok[i], 10 + i, 1, 0 };
		int rc = hs_decode(c, 30, b);
		CHECK(rc == -ECANCELED && strstr(hs_last_error(), "cancelled"), "%s: abort at %d: rc %d '%s'", name,
		      fire[k], rc, hs_last_error());
		CHECK(hs_context_seq_pos(c, 0) == 40 && hs_context_seq_pos(c, 1) == 10,
		      "%s: abort at %d: sequences at %d and %d", name, fire[k], hs_context_seq_pos(c, 0),
		      hs_context_seq_pos(c, 1));
		CHECK(hs_context_set_abort(c, NULL, NULL) == 0, "set_abort NULL");
		CHECK(run(c, 0, 40, 60, 0) == 0 && step(c, 0, 60, got) == 0, "%s", hs_last_error());
		CHECK(same(got, want), "%s: abort at %d: the logits after running the batch again differ", name,
		      fire[k]);
		hs_context_free(c);
	}
	CHECK(hs_context_set_abort(NULL, abort_count, NULL) == -EINVAL, "set_abort(NULL)");
	free(want);
	free(got);
}

/* ---- seq_cp --------------------------------------------------------------------- */

static void check_seq_cp(hs_runtime *rt, const char *name, int swa)
{
	float *want = malloc(sizeof(float) * n_vocab), *got = malloc(sizeof(float) * n_vocab);
	hs_context *c = new_ctx(rt, 3);
	if (!c)
		goto out_free;
	reference(rt, 40, want);
	CHECK(run(c, 0, 0, 40, 0) == 0, "%s", hs_last_error());
	CHECK(hs_context_seq_cp(c, 0, 1, -1, -1) == 0 && hs_context_seq_pos(c, 1) == 40, "%s: cp: %s", name,
	      hs_last_error());
	CHECK(step(c, 1, 40, got) == 0 && same(got, want), "%s: the copy's next logits differ from a run", name);
	CHECK(step(c, 0, 40, got) == 0 && same(got, want), "%s: the source changed", name);
	/* a prefix: the ring (36 cells) of a 41-position source holds 5.., the
	 * window at 36 sees 5..35; at 20 it would need 0..19 */
	reference(rt, 36, want);
	CHECK(hs_context_seq_clear(c, 2) == 0, "clear");
	CHECK(hs_context_seq_cp(c, 0, 2, 0, 36) == 0 && hs_context_seq_pos(c, 2) == 36, "%s: prefix cp: %s", name,
	      hs_last_error());
	CHECK(step(c, 2, 36, got) == 0 && same(got, want), "%s: the prefix copy's logits differ from a run", name);
	hs_context_seq_clear(c, 2);
	int rc = hs_context_seq_cp(c, 0, 2, 0, 20);
	if (swa)
		CHECK(rc == -ENOTSUP && hs_context_seq_pos(c, 2) == 0 && strstr(hs_last_error(), "ring"),
		      "%s: a prefix the ring lost: rc %d '%s'", name, rc, hs_last_error());
	else
		CHECK(rc == 0 && hs_context_seq_pos(c, 2) == 20, "%s: a prefix without a window: %s", name,
		      hs_last_error());
	/* refused, nothing changed */
	int p0 = hs_context_seq_pos(c, 0), p1 = hs_context_seq_pos(c, 1);
	CHECK(hs_context_seq_cp(c, 0, 1, -1, -1) == -EINVAL, "cp into a sequence that holds those positions");
	CHECK(hs_context_seq_cp(c, 0, 0, -1, -1) == -EINVAL, "cp onto itself");
	CHECK(hs_context_seq_cp(c, 0, 3, -1, -1) == -EINVAL && hs_context_seq_cp(c, -1, 1, -1, -1) == -EINVAL,
	      "cp of a bad sequence");
	CHECK(hs_context_seq_cp(c, 0, 2, 10, 5) == -EINVAL, "cp of a range that ends before it starts");
	CHECK(hs_context_seq_cp(NULL, 0, 1, -1, -1) == -EINVAL, "cp(NULL)");
	CHECK(hs_context_seq_pos(c, 0) == p0 && hs_context_seq_pos(c, 1) == p1, "a refused cp changed a sequence");
	hs_context_free(c);
out_free:
	free(want);
	free(got);
}

/* ---- seq_rm --------------------------------------------------------------------- */

static void check_seq_rm(hs_runtime *rt, const char *name, int swa)
{
	float *want = malloc(sizeof(float) * n_vocab), *got = malloc(sizeof(float) * n_vocab);
	hs_context *c = new_ctx(rt, 1);
	if (!c)
		goto out_free;
	/* the tail: as a run of the shorter prompt */
	reference(rt, 36, want);
	CHECK(run(c, 0, 0, 40, 0) == 0, "%s", hs_last_error());
	CHECK(hs_context_seq_rm(c, 0, 36, -1) == 0 && hs_context_seq_pos(c, 0) == 36, "%s: rm tail: %s", name,
	      hs_last_error());
	CHECK(step(c, 0, 36, got) == 0 && same(got, want), "%s: after cutting the tail the logits differ", name);
	/* nothing there, an empty range: no change */
	CHECK(hs_context_seq_rm(c, 0, 50, 60) == 0 && hs_context_seq_rm(c, 0, 5, 5) == 0 &&
		      hs_context_seq_pos(c, 0) == 37,
	      "%s: rm of nothing", name);
	/* a cut the ring cannot honour: 0..79 held, the ring keeps 44.. */
	reference(rt, 80, want);
	hs_context_seq_clear(c, 0);
	CHECK(run(c, 0, 0, 80, 0) == 0, "%s", hs_last_error());
	int rc = hs_context_seq_rm(c, 0, 20, -1);
	if (swa) {
		CHECK(rc == -ENOTSUP && hs_context_seq_pos(c, 0) == 80 && strstr(hs_last_error(), "ring"),
		      "%s: rm over a lost ring: rc %d '%s'", name, rc, hs_last_error());
		CHECK(step(c, 0, 80, got) == 0 && same(got, want), "%s: a refused rm changed the sequence", name);
	} else {
		CHECK(rc == 0 && hs_context_seq_pos(c, 0) == 20, "%s: rm without a window: %s", name, hs_last_error());
	}
	/* a hole inside the window: the position stays, the next token sees less */
	reference(rt, 40, want);
	hs_context_seq_clear(c, 0);
	CHECK(run(c, 0, 0, 40, 0) == 0, "%s", hs_last_error());
	CHECK(hs_context_seq_rm(c, 0, 30, 33) == 0 && hs_context_seq_pos(c, 0) == 40, "%s: rm hole: %s", name,
	      hs_last_error());
	CHECK(step(c, 0, 40, got) == 0 && !same(got, want), "%s: the hole changed nothing", name);
	CHECK(hs_context_seq_rm(c, 1, 0, -1) == -EINVAL && hs_context_seq_rm(c, 0, 9, 3) == -EINVAL &&
		      hs_context_seq_rm(NULL, 0, 0, -1) == -EINVAL,
	      "bad rm arguments accepted");
	CHECK(hs_context_seq_pos(c, 0) == 41, "a refused rm changed the position");
	hs_context_free(c);
out_free:
	free(want);
	free(got);
}

/* ---- threads -------------------------------------------------------------------- */

static void check_threads(hs_runtime *rt)
{
	float *one = malloc(sizeof(float) * n_vocab), *two = malloc(sizeof(float) * n_vocab);
	hs_context *c = new_ctx(rt, 1);
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	int n = online >= 2 ? 2 : 1;
	if (!c)
		goto out_free;
	CHECK(hs_runtime_threads(rt) == 1, "threads %d at open (asked 1)", hs_runtime_threads(rt));
	CHECK(run(c, 0, 0, 40, 0) == 0 && step(c, 0, 40, one) == 0, "%s", hs_last_error());
	CHECK(hs_runtime_set_threads(rt, 0) == -EINVAL && hs_runtime_set_threads(rt, (int)online + 1) == -EINVAL &&
		      hs_runtime_set_threads(NULL, 1) == -EINVAL && hs_runtime_threads(NULL) == -EINVAL,
	      "bad thread counts accepted");
	CHECK(hs_runtime_threads(rt) == 1, "a refused count changed the workers");
	CHECK(hs_runtime_set_threads(rt, n) == 0 && hs_runtime_threads(rt) == n, "set_threads %d: %s", n,
	      hs_last_error());
	hs_context_seq_clear(c, 0);
	CHECK(run(c, 0, 0, 40, 0) == 0 && step(c, 0, 40, two) == 0, "%s", hs_last_error());
	double num = 0, den = 0;
	for (int j = 0; j < n_vocab; j++) {
		num += ((double)one[j] - two[j]) * ((double)one[j] - two[j]);
		den += (double)one[j] * one[j];
	}
	CHECK(sqrt(num / den) <= 1e-5, "%d workers: the logits moved by %.3g", n, sqrt(num / den));
	CHECK(hs_runtime_set_threads(rt, 1) == 0 && hs_runtime_threads(rt) == 1, "back to 1: %s", hs_last_error());
	hs_context_free(c);
out_free:
	free(one);
	free(two);
}

int main(void)
{
	static const struct {
		const char *name;
		int swa;
	} models[] = { { "gptoss-l4-h192-swa32-q8", 1 }, { "qwen3moe-l3-h256-e16k4-q8", 0 } };
	for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
		char rel[256];
		int rc;
		snprintf(rel, sizeof rel, "oracle/%s.gguf", models[m].name);
		const char *path = hs_test_data(rel);
		if (read_tokens(models[m].name))
			SKIP("%s: no tokens file under $HS_DATA", models[m].name);
		if (m == 0)
			check_load_abort(path);
		hs_runtime *rt = open_rt(path, NULL, NULL, &rc);
		CHECK(rc == 0, "%s", hs_last_error());
		if (!rt)
			continue;
		n_vocab = hs_runtime_model_info(rt)->n_vocab;
		if (m == 0)
			check_decode_abort(rt, models[m].name);
		check_seq_cp(rt, models[m].name, models[m].swa);
		check_seq_rm(rt, models[m].name, models[m].swa);
		if (m == 0)
			check_threads(rt);
		hs_runtime_close(rt);
	}
	return hs_test_end();
}
