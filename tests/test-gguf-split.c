/* Checks split GGUF files as llama-gguf-split writes them: a gen model split
 * by the writer opens from its first and from a middle shard with every key
 * and every tensor's bytes of the unsplit file, each shard cut by
 * llama-gguf-split's rule; the real llama-gguf-split file of tests/data/oracle
 * re-split by the writer comes out byte for byte the same; a missing,
 * renamed, miscounted, foreign, truncated or duplicating shard is one line
 * naming that shard; a failed split write leaves no file. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "cpu_kernels/formats.h"
#include "hotset.h"
#include "model/gen.h"
#include "model/gguf-write.h"
#include "model/gguf.h"
#include "tests/hs-test.h"

static char dir[] = "/tmp/hs-split-XXXXXX";

static const struct hs_gen_params gp = { .arch = "gpt-oss", .n_layers = 2, .n_experts = 8, .n_used = 2,
					 .n_embd = 64, .n_ff = 128, .type = HS_TYPE_MXFP4, .seed = 5,
					 .name = "split" };

static char *at(const char *name)
{
	static char buf[8][1024];
	static int k;
	char *b = buf[k++ & 7];
	snprintf(b, sizeof buf[0], "%s/%s", dir, name);
	return b;
}

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *b = NULL;

	*n = 0;
	if (f && fstat(fileno(f), &st) == 0 && (b = malloc((size_t)st.st_size + 1)))
		*n = fread(b, 1, (size_t)st.st_size, f);
	if (f)
		fclose(f);
	return b;
}

static int spit(const char *path, const void *b, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(b, 1, n, f) == n;
	if (f)
		ok = fclose(f) == 0 && ok;
	return ok ? 0 : -1;
}

static int copy(const char *from, const char *to)
{
	size_t n;
	uint8_t *b = slurp(from, &n);
	int rc = b ? spit(to, b, n) : -1;
	free(b);
	return rc;
}

static uint64_t file_size(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int n_files(const char *d)
{
	DIR *dd = opendir(d);
	struct dirent *e;
	int n = 0;
	while (dd && (e = readdir(dd)))
		n += e->d_name[0] != '.';
	if (dd)
		closedir(dd);
	return n;
}

/* Bytes of a value as the file holds it (the kinds gen and llama.cpp write). */
static size_t value_len(const struct hs_gguf_kv *kv)
{
	static const size_t scalar[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };
	uint64_t n;

	if (kv->type == HS_GGUF_STRING) {
		memcpy(&n, kv->value, 8);
		return 8 + n;
	}
	if (kv->type != HS_GGUF_ARRAY)
		return scalar[kv->type];
	if (kv->arr_type != HS_GGUF_STRING)
		return 12 + kv->arr_n * scalar[kv->arr_type];
	size_t len = 12;
	for (uint64_t i = 0; i < kv->arr_n; i++) {
		memcpy(&n, kv->value + len, 8);
		len += 8 + n;
	}
	return len;
}

static int is_split_key(const struct hs_gguf_kv *kv)
{
	return kv->key.n >= 6 && memcmp(kv->key.p, "split.", 6) == 0;
}

static uint64_t padded(const struct hs_gguf_tensor *t)
{
	return (t->size + 31) / 32 * 32;
}

/* The whole file's keys and tensors in the split one; the split keys on
 * top; each tensor in its shard where its offset says; each shard cut as
 * llama-gguf-split cuts. */
static void check_same(const struct hs_gguf *w, const struct hs_gguf *s, int n_shards, uint64_t max, const char *what)
{
	uint64_t split_keys = 0, sum = 0, v;

	CHECK(s->n_shards == n_shards, "%s: %d shards, %d written", what, s->n_shards, n_shards);
	for (uint64_t i = 0; i < s->n_kv; i++)
		split_keys += is_split_key(&s->kv[i]);
	CHECK(split_keys == 3 && s->n_kv == w->n_kv + 3, "%s: %llu keys (%llu split.*), the whole file %llu", what,
	      (unsigned long long)s->n_kv, (unsigned long long)split_keys, (unsigned long long)w->n_kv);
	CHECK(hs__gguf_get_u64(s, "split.count", &v) == 0 && v == (uint64_t)n_shards, "%s: split.count", what);
	CHECK(hs__gguf_get_u64(s, "split.tensors.count", &v) == 0 && v == w->n_tensors, "%s: split.tensors.count", what);
	CHECK(hs__gguf_get_u64(s, "split.no", &v) == 0 && v == 0, "%s: the metadata is not the first shard's", what);
	for (uint64_t i = 0; i < w->n_kv; i++) {
		const struct hs_gguf_kv *a = &w->kv[i];
		char key[128];
		snprintf(key, sizeof key, "%.*s", (int)a->key.n, a->key.p);
		const struct hs_gguf_kv *b = hs__gguf_find_kv(s, key);
		CHECK(b && b->type == a->type && value_len(a) == value_len(b) && !memcmp(a->value, b->value, value_len(a)),
		      "%s: key %s differs", what, key);
	}
	CHECK(s->n_tensors == w->n_tensors, "%s: %llu tensors, the whole file %llu", what,
	      (unsigned long long)s->n_tensors, (unsigned long long)w->n_tensors);
	for (uint64_t i = 0; i < w->n_tensors && i < s->n_tensors; i++) {
		const struct hs_gguf_tensor *a = &w->tensors[i], *b = &s->tensors[i];
		CHECK(!strcmp(a->name, b->name) && a->type == b->type && a->n_dims == b->n_dims &&
			      !memcmp(a->ne, b->ne, sizeof a->ne) && a->size == b->size && !memcmp(a->data, b->data, a->size),
		      "%s: tensor %llu (%s) differs", what, (unsigned long long)i, a->name);
		CHECK(b->shard >= 0 && b->shard < s->n_shards && s->shards[b->shard].base + b->offset == b->data &&
			      b->offset % 32 == 0 && b->offset + b->size <= s->shards[b->shard].size,
		      "%s: %s at offset %llu of shard %d", what, b->name, (unsigned long long)b->offset, b->shard);
		const char *path = NULL;
		uint64_t off = 0;
		CHECK(hs__gguf_locate(s, b->data, b->size, &path, &off) == b->shard && off == b->offset &&
			      path == s->shards[b->shard].path,
		      "%s: locate %s", what, b->name);
		CHECK(i == 0 || b->shard == s->tensors[i - 1].shard || b->shard == s->tensors[i - 1].shard + 1,
		      "%s: %s out of shard order", what, b->name);
	}
	/* the cut: a shard's data is at most max unless it is one tensor, and
	 * the next shard's first tensor would have taken it past max */
	uint64_t k = 0;
	for (int sh = 0; sh < s->n_shards; sh++) {
		uint64_t bytes = 0, n = 0;
		for (; k < s->n_tensors && s->tensors[k].shard == sh; k++, n++)
			bytes += padded(&s->tensors[k]);
		CHECK(n == s->shards[sh].n_tensors && n > 0, "%s: shard %d holds %llu tensors", what, sh,
		      (unsigned long long)n);
		CHECK(bytes <= max || n == 1, "%s: shard %d has %llu data bytes, more than %llu", what, sh,
		      (unsigned long long)bytes, (unsigned long long)max);
		CHECK(k == s->n_tensors || bytes + padded(&s->tensors[k]) > max, "%s: shard %d was cut early", what, sh);
		CHECK(file_size(s->shards[sh].path) == s->shards[sh].size, "%s: shard %d size", what, sh);
		sum += s->shards[sh].size;
	}
	CHECK(s->size == sum, "%s: size %zu, the shards %llu", what, s->size, (unsigned long long)sum);
}

/* Opening `path` fails with one line that names `shard` and says `what`. */
static void expect_refused(const char *path, const char *shard, const char *what, const char *label)
{
	struct hs_gguf *g = NULL;
	int rc = hs__gguf_open(path, &g);
	const char *e = hs_last_error();
	CHECK(rc < 0 && !g, "%s: opened (rc %d)", label, rc);
	CHECK(rc >= 0 || (!strncmp(e, shard, strlen(shard)) && strstr(e, what) && !strchr(e, '\n')),
	      "%s: '%s' (wanted '%s: ...%s...')", label, e, shard, what);
	hs__gguf_close(g);
}

/* Patches the value of `key` (a uint16 or int32) in a file's bytes. */
static int patch_key(uint8_t *b, size_t n, const char *key, uint32_t v)
{
	size_t kl = strlen(key);
	for (size_t p = 8; p + kl + 4 + 4 <= n; p++) {
		uint64_t len;
		memcpy(&len, b + p - 8, 8);
		if (len == kl && !memcmp(b + p, key, kl)) {
			uint32_t type;
			memcpy(&type, b + p + kl, 4);
			memcpy(b + p + kl + 4, &v, type == HS_GGUF_UINT16 ? 2 : 4);
			return 0;
		}
	}
	return -1;
}

static void test_broken(const char *prefix, int n)
{
	char name[8][1024], sub[1100];
	size_t len;
	uint8_t *b;
	struct hs_gguf *g;

	for (int i = 0; i < n && i < 8; i++)
		hs__gguf_split_path(name[i], sizeof name[i], prefix, i, n);
	/* a missing shard, from the first and from another */
	snprintf(sub, sizeof sub, "%s.away", name[n - 1]);
	CHECK(rename(name[n - 1], sub) == 0, "move away");
	expect_refused(name[0], name[n - 1], ": missing (split.count", "missing last shard");
	expect_refused(name[1], name[n - 1], ": missing (split.count", "missing last shard, from shard 2");
	/* the last shard under the name of the one before it (and that one gone) */
	snprintf(sub, sizeof sub, "%s.away", name[n - 2]);
	CHECK(rename(name[n - 2], sub) == 0, "move away");
	snprintf(sub, sizeof sub, "%s.away", name[n - 1]);
	CHECK(copy(sub, name[n - 2]) == 0, "rename");
	expect_refused(name[0], name[n - 2], "but the name says shard", "renamed shard");
	expect_refused(name[n - 2], name[n - 2], "not the one its name says", "opened from a renamed shard");
	CHECK(rename(sub, name[n - 1]) == 0, "move back");
	snprintf(sub, sizeof sub, "%s.away", name[n - 2]);
	CHECK(rename(sub, name[n - 2]) == 0, "move back");
	CHECK(hs__gguf_open(name[0], &g) == 0, "%s", hs_last_error());
	hs__gguf_close(g);

	/* split.count disagreeing, split.tensors.count of another model,
	 * split.no of another shard: each in shard 2, then put back */
	b = slurp(name[1], &len);
	static const struct {
		const char *key;
		uint32_t v;
		const char *what;
	} pk[] = { { "split.count", 7, "split.count 7, but" },
		   { "split.tensors.count", 99, "split.tensors.count 99, but" },
		   { "split.no", 0, "split.no 0 (shard 1), but the name says shard 2" } };
	for (size_t i = 0; b && i < sizeof pk / sizeof pk[0]; i++) {
		uint8_t *c = malloc(len);
		memcpy(c, b, len);
		CHECK(patch_key(c, len, pk[i].key, pk[i].v) == 0 && spit(name[1], c, len) == 0, "patch %s", pk[i].key);
		expect_refused(name[0], name[1], pk[i].what, pk[i].key);
		free(c);
	}
	/* a truncated shard: the parser names it */
	CHECK(b && spit(name[1], b, len / 2) == 0, "truncate");
	expect_refused(name[0], name[1], "past the end of the file", "truncated shard");
	expect_refused(name[1], name[1], "past the end of the file", "truncated shard, opened");
	CHECK(b && spit(name[1], b, len) == 0, "put back");
	free(b);

	/* a tensor of shard 2 renamed to one of shard 1 (same length): the union
	 * has the count, but one name twice */
	CHECK(hs__gguf_open(name[0], &g) == 0, "%s", hs_last_error());
	if (g) {
		const struct hs_gguf_tensor *t2 = NULL, *t1 = NULL;
		for (uint64_t i = 0; i < g->n_tensors && !t1; i++)
			for (uint64_t j = 0; j < g->n_tensors && g->tensors[i].shard == 1 && !t1; j++)
				if (g->tensors[j].shard == 0 && strlen(g->tensors[j].name) == strlen(g->tensors[i].name)) {
					t2 = &g->tensors[i];
					t1 = &g->tensors[j];
				}
		char from[256], to[256];
		snprintf(from, sizeof from, "%s", t2 ? t2->name : "");
		snprintf(to, sizeof to, "%s", t1 ? t1->name : "");
		hs__gguf_close(g);
		b = slurp(name[1], &len);
		uint8_t *c = b ? malloc(len) : NULL;
		size_t fl = strlen(from), p = 0;
		if (c)
			memcpy(c, b, len);
		while (c && fl && p + fl <= len && memcmp(c + p, from, fl))
			p++;
		CHECK(c && t1 && p + fl <= len, "no tensor name to rename");
		if (c && fl && p + fl <= len) {
			memcpy(c + p, to, fl);
			CHECK(spit(name[1], c, len) == 0, "write");
			char what[1400];
			snprintf(what, sizeof what, "tensor '%s' is in %s too", to, name[0]);
			expect_refused(name[0], name[1], what, "duplicate tensor");
			CHECK(spit(name[1], b, len) == 0, "put back");
		}
		free(c);
		free(b);
	}

	/* a shard of another model (one more layer) under this one's name */
	struct hs_gen_params other = gp;
	other.n_layers = 3;
	other.seed = 9;
	uint64_t max = 1;
	while (max < (1ull << 30) && hs__gen_shard_count(&other, max) > n)
		max += max / 64 + 1;
	CHECK(hs__gen_shard_count(&other, max) == n, "no size splits the other model into %d", n);
	CHECK(hs__gen_write_split(&other, at("other"), max, NULL, NULL) == 0, "%s", hs_last_error());
	char oname[1024];
	hs__gguf_split_path(oname, sizeof oname, at("other"), 1, n);
	b = slurp(name[1], &len);
	CHECK(copy(oname, name[1]) == 0, "copy");
	expect_refused(name[0], name[1], "a shard of another model", "shard of another model");
	CHECK(b && spit(name[1], b, len) == 0, "put back");
	free(b);
	for (int i = 0; i < n; i++) {
		hs__gguf_split_path(oname, sizeof oname, at("other"), i, n);
		unlink(oname);
	}

	/* the split keys without a shard's name; split.no out of range */
	CHECK(copy(name[0], at("plain.gguf")) == 0, "copy");
	expect_refused(at("plain.gguf"), at("plain.gguf"), "so the other shards cannot be found", "no shard name");
	unlink(at("plain.gguf"));
	b = slurp(name[0], &len);
	if (b) {
		CHECK(patch_key(b, len, "split.no", 40) == 0 && spit(at("bad.gguf"), b, len) == 0, "patch");
		expect_refused(at("bad.gguf"), at("bad.gguf"), "split.no 40, but split.count is", "split.no out of range");
		unlink(at("bad.gguf"));
	}
	free(b);
}

/* The fill callback: a byte per tensor, failing at tensor *fail_at. */
static int fill_fail(void *ctx, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	(void)row0;
	if (tensor == *(int *)ctx)
		return hs__error(EIO, "tensor %d: fill failed", tensor);
	memset(buf, tensor, n_rows * 256);
	return 0;
}

/* A write that fails in a later shard leaves none of them, nor a .part. */
static void test_write_failure(void)
{
	struct hs_gguf_writer *w = hs__gguf_writer_new();
	const uint64_t ne[1] = { 64 }; /* f32: 256 bytes, 3 a shard of 768 */
	int before = n_files(dir), fail_at = 11;
	char name[32];

	for (int t = 0; w && t < 12; t++) {
		snprintf(name, sizeof name, "t%d", t);
		CHECK(hs__gguf_w_tensor(w, name, 1, ne, HS_TYPE_F32) == t, "tensor");
	}
	CHECK(w && hs__gguf_w_str(w, "general.architecture", "gpt-oss") == 0, "key");
	if (!w)
		return;
	CHECK(hs__gguf_w_shard_count(w, 3 * 256) == 4 && hs__gguf_w_shard_count(w, 3 * 256 - 1) == 6 &&
		      hs__gguf_w_shard_count(w, 1) == 12,
	      "shard counts %d %d %d", hs__gguf_w_shard_count(w, 3 * 256), hs__gguf_w_shard_count(w, 3 * 256 - 1),
	      hs__gguf_w_shard_count(w, 1));
	CHECK(hs__gguf_w_write_split(w, at("fail"), 3 * 256, fill_fail, &fail_at, NULL, NULL) == -EIO, "write did not fail");
	CHECK(n_files(dir) == before, "a failed split write left %d files", n_files(dir) - before);
	fail_at = -1;
	CHECK(hs__gguf_w_write_split(w, at("fail"), 3 * 256, fill_fail, &fail_at, NULL, NULL) == 0, "%s", hs_last_error());
	CHECK(n_files(dir) == before + 4, "%d files for 4 shards", n_files(dir) - before);
	for (int i = 0; i < 4; i++) {
		char p[1024];
		hs__gguf_split_path(p, sizeof p, at("fail"), i, 4);
		CHECK(unlink(p) == 0, "%s missing", p);
	}
	/* a folder that is not there: nothing written, a clean error */
	CHECK(hs__gguf_w_write_split(w, at("nope/x"), 3 * 256, fill_fail, &fail_at, NULL, NULL) == -EIO &&
		      strstr(hs_last_error(), "cannot create"),
	      "%s", hs_last_error());
	hs__gguf_writer_free(w);
}

/* The real llama-gguf-split output (4M): joined and written again by the
 * writer with the same limit, every shard comes out byte for byte. */
struct copy_ctx {
	const struct hs_gguf *g;
};

static int fill_copy(void *ctx, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	const struct hs_gguf_tensor *t = &((struct copy_ctx *)ctx)->g->tensors[tensor];
	const uint64_t row = t->size / (t->ne[1] * t->ne[2] * t->ne[3]);
	memcpy(buf, t->data + row0 * row, n_rows * row);
	return 0;
}

static void test_oracle(void)
{
	const char *first = hs_test_data("oracle/gptoss-l4-h256-e16k4-q8-split-00001-of-00003.gguf");
	struct hs_gguf *g = NULL;
	struct hs_gguf_writer *w = hs__gguf_writer_new();
	int rc = hs__gguf_open(first, &g);

	CHECK(rc == 0, "%s", hs_last_error());
	if (rc || !w) {
		hs__gguf_writer_free(w);
		return;
	}
	CHECK(g->n_shards == 3 && g->n_tensors == 79 && g->shards[0].n_tensors == 37 && g->shards[1].n_tensors == 37 &&
		      g->shards[2].n_tensors == 5,
	      "oracle: %d shards, %llu tensors", g->n_shards, (unsigned long long)g->n_tensors);
	for (uint64_t i = 0; i < g->n_kv && !rc; i++) {
		const struct hs_gguf_kv *kv = &g->kv[i];
		char key[256];
		snprintf(key, sizeof key, "%.*s", (int)kv->key.n, kv->key.p);
		if (!is_split_key(kv))
			rc = hs__gguf_w_raw(w, key, kv->type, kv->value, value_len(kv));
	}
	for (uint64_t i = 0; i < g->n_tensors && !rc; i++)
		rc = hs__gguf_w_tensor(w, g->tensors[i].name, g->tensors[i].n_dims, g->tensors[i].ne, g->tensors[i].type) < 0;
	struct copy_ctx cc = { g };
	CHECK(!rc && hs__gguf_w_shard_count(w, 4000000) == 3, "the writer cuts the oracle into %d shards",
	      hs__gguf_w_shard_count(w, 4000000));
	CHECK(!rc && hs__gguf_w_write_split(w, at("oracle"), 4000000, fill_copy, &cc, NULL, NULL) == 0, "%s",
	      hs_last_error());
	for (int i = 0; i < 3; i++) {
		char mine[1024];
		size_t na, nb;
		hs__gguf_split_path(mine, sizeof mine, at("oracle"), i, 3);
		uint8_t *a = slurp(mine, &na), *b = slurp(g->shards[i].path, &nb);
		CHECK(a && b && na == nb && !memcmp(a, b, na), "shard %d: %zu bytes written, llama-gguf-split's %zu%s", i + 1,
		      na, nb, a && b && na == nb ? " (bytes differ)" : "");
		free(a);
		free(b);
		unlink(mine);
	}
	hs__gguf_writer_free(w);
	hs__gguf_close(g);
}

int main(void)
{
	struct hs_gguf *whole = NULL, *from1 = NULL, *from2 = NULL;
	char first[1024], middle[1024];

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	CHECK(hs__gen_write(&gp, at("whole.gguf"), NULL, NULL) == 0, "%s", hs_last_error());
	CHECK(hs__gguf_open(at("whole.gguf"), &whole) == 0, "%s", hs_last_error());
	if (!whole)
		return hs_test_end();
	CHECK(whole->n_shards == 1 && whole->size == file_size(at("whole.gguf")) && whole->tensors[0].shard == 0,
	      "a plain file: %d shards", whole->n_shards);
	/* about a quarter of the data a shard: 4 or 5 shards, layers straddle them */
	uint64_t data = 0;
	for (uint64_t i = 0; i < whole->n_tensors; i++)
		data += padded(&whole->tensors[i]);
	const uint64_t max = data / 4;
	const int n = hs__gen_shard_count(&gp, max);
	CHECK(n >= 4 && n <= 8, "%d shards", n);
	CHECK(hs__gen_write_split(&gp, at("m"), max, NULL, NULL) == 0, "%s", hs_last_error());
	CHECK(n_files(dir) == 1 + n, "%d files for %d shards and the whole file", n_files(dir), n);
	hs__gguf_split_path(first, sizeof first, at("m"), 0, n);
	hs__gguf_split_path(middle, sizeof middle, at("m"), n / 2, n);
	CHECK(hs__gguf_open(first, &from1) == 0, "%s", hs_last_error());
	CHECK(hs__gguf_open(middle, &from2) == 0, "%s", hs_last_error());
	if (from1)
		check_same(whole, from1, n, max, "from the first shard");
	if (from2)
		check_same(whole, from2, n, max, "from a middle shard");
	if (from1 && from2)
		CHECK(!strcmp(from1->shards[0].path, from2->shards[0].path), "metadata from %s", from2->shards[0].path);
	hs__gguf_close(from1);
	hs__gguf_close(from2);
	/* the model reads the same from any shard: its file bytes are all shards' */
	hs_model *m = NULL;
	CHECK(hs_model_open(middle, &m) == 0, "%s", hs_last_error());
	if (m) {
		CHECK(hs_model_info(m)->file_bytes > whole->size && hs_model_info(m)->n_layers == 2, "file bytes %llu",
		      (unsigned long long)hs_model_info(m)->file_bytes);
		hs_model_free(m);
	}
	/* a buffer parse is one file: the split keys are not followed */
	{
		size_t len;
		uint8_t *b = slurp(first, &len);
		struct hs_gguf *g = NULL;
		CHECK(b && hs__gguf_parse(b, len, "buffer", &g) == 0 && g->n_shards == 1 &&
			      g->n_tensors < whole->n_tensors,
		      "parse of one shard: %s", hs_last_error());
		hs__gguf_close(g);
		free(b);
	}
	hs__gguf_close(whole);

	test_broken(at("m"), n);
	test_write_failure();
	test_oracle();

	for (int i = 0; i < n; i++) {
		hs__gguf_split_path(first, sizeof first, at("m"), i, n);
		unlink(first);
	}
	unlink(at("whole.gguf"));
	CHECK(n_files(dir) == 0, "%d files left in %s", n_files(dir), dir);
	rmdir(dir);
	return hs_test_end();
}
