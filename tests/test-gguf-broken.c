/* Checks that broken and hostile GGUF files give a clean one-line error,
 * never a crash or an out-of-bounds read: truncation at every byte of the
 * header, huge counts and lengths, offsets past the end, misalignment,
 * alignments too small for f32 values, overlapping tensor data, n_dims 5, unknown types, deep nesting, duplicate names and keys, and MoE
 * models with wrong expert shapes, types or missing tensors.  Run under
 * ASan in the sanitizer build.  With `--write-corpus DIR` it also writes
 * the fuzz seed corpus. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cpu_kernels/formats.h"
#include "hotset.h"
#include "model/gguf-write.h"
#include "model/gguf.h"
#include "tests/hs-test.h"

static char dir[] = "/tmp/hs-broken-XXXXXX";
static const char *corpus;
static int n_corpus;

static uint8_t *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b = NULL;
	long len;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	b = malloc(len ? len : 1);
	if (b && fread(b, 1, len, f) != (size_t)len) {
		free(b);
		b = NULL;
	}
	fclose(f);
	*n = (size_t)len;
	return b;
}

static void save_corpus(const void *buf, size_t n)
{
	char p[512];
	FILE *f;

	if (!corpus)
		return;
	snprintf(p, sizeof p, "%s/seed-%02d.gguf", corpus, n_corpus++);
	f = fopen(p, "wb");
	if (f) {
		fwrite(buf, 1, n, f);
		fclose(f);
	}
}

/* The parser must refuse buf with -EIO and one line naming `what`. */
static void expect_refused(const char *what, const void *buf, size_t n)
{
	struct hs_gguf *g = (struct hs_gguf *)1;
	/* A private copy of exactly n bytes, so ASan sees any read past it. */
	uint8_t *copy = malloc(n ? n : 1);
	int rc;

	memcpy(copy, buf, n);
	rc = hs__gguf_parse(copy, n, what, &g);
	CHECK(rc == -EIO, "%s: rc %d (%s)", what, rc, hs_last_error());
	CHECK(g == NULL, "%s: result on error", what);
	CHECK(strstr(hs_last_error(), what) && !strchr(hs_last_error(), '\n'), "%s: message '%s'", what, hs_last_error());
	free(copy);
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Position of a tensor info's n_dims field (just after its name). */
static size_t info_of(const uint8_t *b, size_t n, const char *name)
{
	size_t len = strlen(name);
	for (size_t i = 8; i + len < n; i++)
		if (memcmp(b + i, name, len) == 0 && b[i - 8] == len)
			return i + len;
	return 0;
}

static int fill_bytes(void *ctx, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	size_t rb = *(size_t *)ctx;
	(void)tensor;
	for (uint64_t r = 0; r < n_rows; r++)
		for (size_t i = 0; i < rb; i++)
			((uint8_t *)buf)[r * rb + i] = (uint8_t)(i % 4 == 3 ? 0x3c : (row0 + r + i) & 0xff);
	return 0;
}

/* A small valid file with arrays in its metadata and two tensors. */
static uint8_t *base_file(size_t *n)
{
	struct hs_gguf_writer *w = hs__gguf_writer_new();
	const char *toks[3] = { "<s>", "a", "bc" };
	int32_t ids[3] = { 1, 2, 3 };
	uint64_t ne_a[2] = { 64, 2 }, ne_b[3] = { 32, 2, 2 };
	size_t rb = 128;
	char path[128];
	uint8_t *b;

	snprintf(path, sizeof path, "%s/base.gguf", dir);
	hs__gguf_w_str(w, "general.architecture", "test");
	hs__gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 3);
	hs__gguf_w_arr_i32(w, "tokenizer.ggml.ids", ids, 3);
	hs__gguf_w_tensor(w, "alpha", 2, ne_a, HS_TYPE_F16);
	hs__gguf_w_tensor(w, "beta.weight", 3, ne_b, HS_TYPE_F32);
	CHECK(hs__gguf_w_write(w, path, fill_bytes, &rb, NULL, NULL) == 0, "base: %s", hs_last_error());
	hs__gguf_writer_free(w);
	b = slurp(path, n);
	unlink(path);
	return b;
}

static void test_parser(void)
{
	size_t n;
	uint8_t *base = base_file(&n), *b;
	struct hs_gguf *g;

	if (!base) {
		CHECK(0, "no base file");
		return;
	}
	CHECK(hs__gguf_parse(base, n, "base", &g) == 0, "base parses: %s", hs_last_error());
	size_t data = g ? g->data_offset : n;
	hs__gguf_close(g);
	save_corpus(base, n);
	b = malloc(n);

	/* Every prefix: each byte of the header, and through the data. */
	for (size_t k = 0; k < n; k += k < data + 64 ? 1 : 61)
		expect_refused("prefix", base, k);
	save_corpus(base, data / 2);

#define MUTATE(label, stmt)                   \
	do {                                  \
		memcpy(b, base, n);           \
		stmt;                         \
		expect_refused(label, b, n);  \
		save_corpus(b, n);            \
	} while (0)

	MUTATE("bad magic", b[0] = 'X');
	MUTATE("version 1", put_u32(b + 4, 1));
	MUTATE("version 4", put_u32(b + 4, 4));
	MUTATE("big-endian version", put_u32(b + 4, 0x03000000));
	MUTATE("huge tensor count", put_u64(b + 8, 1ull << 62));
	MUTATE("huge metadata count", put_u64(b + 16, 1ull << 40));
	MUTATE("one metadata too many", put_u64(b + 16, 4));
	MUTATE("one tensor too many", put_u64(b + 8, 3));
	MUTATE("huge key length", put_u64(b + 24, 1ull << 63));
	/* key 0 is "general.architecture" (20 bytes): its type follows */
	MUTATE("unknown value type", put_u32(b + 24 + 8 + 20, 13));
	MUTATE("string past the end", put_u64(b + 24 + 8 + 20 + 4, n));
	{
		size_t arr = 24 + 8 + 20 + 4 + 8 + 4; /* key 1 */
		size_t at = arr + 8 + strlen("tokenizer.ggml.tokens") + 4;
		MUTATE("huge array count", put_u64(b + at + 4, 1ull << 61));
		MUTATE("array of unknown type", put_u32(b + at, 77));
	}
	size_t ia = info_of(base, n, "alpha"), ib = info_of(base, n, "beta.weight");
	CHECK(ia && ib, "tensor infos not found");
	if (ia && ib) {
		MUTATE("n_dims 5", put_u32(b + ia, 5));
		MUTATE("n_dims 0", put_u32(b + ia, 0));
		MUTATE("ggml type 99", put_u32(b + ia + 4 + 16, 99));
		MUTATE("ggml type 4", put_u32(b + ia + 4 + 16, 4)); /* q4_2: removed from ggml */
		MUTATE("misaligned offset", put_u64(b + ib + 4 + 24 + 4, 257));
		/* alpha holds [0, 256): beta on top of it, or on its last 32 bytes */
		MUTATE("overlap", put_u64(b + ib + 4 + 24 + 4, 0));
		MUTATE("overlap", put_u64(b + ib + 4 + 24 + 4, 224));
		MUTATE("offset past the end", put_u64(b + ib + 4 + 24 + 4, n));
		MUTATE("offset wraps", put_u64(b + ib + 4 + 24 + 4, ~0ull - 31));
		MUTATE("huge dimensions", put_u64(b + ib + 4, 1ull << 62); put_u64(b + ib + 12, 1ull << 62));
		MUTATE("rows past the end", put_u64(b + ib + 4 + 16, 1000));
		MUTATE("mxfp4 row of 48", put_u32(b + ib + 4 + 24, HS_TYPE_MXFP4); put_u64(b + ib + 4, 48));
		MUTATE("name past the end", put_u64(b + ia - 5 - 8, 1ull << 40));
		MUTATE("empty name", put_u64(b + ia - 5 - 8, 0));
	}
	free(b);
	free(base);
}

/* Files the writer makes but the parser must refuse. */
static void test_written(void)
{
	struct hs_gguf_writer *w;
	uint64_t ne[1] = { 32 };
	size_t rb = 128, n;
	char path[128];
	uint8_t *b;

	snprintf(path, sizeof path, "%s/w.gguf", dir);
	struct {
		const char *label;
		int what;
	} cases[] = { { "duplicate tensor", 0 }, { "duplicate key", 1 },       { "alignment 0", 2 },
		      { "alignment 3", 3 },      { "alignment as string", 4 }, { "deep nesting", 5 },
		      { "alignment 1", 6 },      { "alignment 2", 7 } };
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		w = hs__gguf_writer_new();
		hs__gguf_w_str(w, "general.architecture", "test");
		switch (cases[c].what) {
		case 0: hs__gguf_w_tensor(w, "t", 1, ne, HS_TYPE_F32); hs__gguf_w_tensor(w, "t", 1, ne, HS_TYPE_F32); break;
		case 1: hs__gguf_w_u32(w, "k", 1); hs__gguf_w_u32(w, "k", 2); break;
		case 2: hs__gguf_w_u32(w, "general.alignment", 0); break;
		case 3: hs__gguf_w_u32(w, "general.alignment", 3); break;
		case 4: hs__gguf_w_str(w, "general.alignment", "32"); break;
		/* powers of two, but f32 tensors would sit at odd addresses */
		case 6: hs__gguf_w_u32(w, "general.alignment", 1); hs__gguf_w_tensor(w, "t", 1, ne, HS_TYPE_F32); break;
		case 7: hs__gguf_w_u32(w, "general.alignment", 2); break;
		case 5: {
			/* array of array of ... of one uint8, 6 deep */
			uint8_t raw[6 * 12 + 1], *p = raw;
			for (int d = 0; d < 6; d++, p += 12) {
				put_u32(p, d < 5 ? HS_GGUF_ARRAY : HS_GGUF_UINT8);
				put_u64(p + 4, 1);
			}
			*p = 7;
			hs__gguf_w_raw(w, "nested", HS_GGUF_ARRAY, raw, sizeof raw);
			break;
		}
		}
		CHECK(hs__gguf_w_write(w, path, fill_bytes, &rb, NULL, NULL) == 0, "%s: write", cases[c].label);
		hs__gguf_writer_free(w);
		b = slurp(path, &n);
		if (b) {
			expect_refused(cases[c].label, b, n);
			save_corpus(b, n);
		}
		free(b);
		unlink(path);
	}
}

/* MoE descriptions the model reader must refuse with -EINVAL. */
struct shape_case {
	const char *label;
	int gate_ff_extra, down_swapped, up_type, drop, used, arch_llama, flat_gate;
};

static void test_models(void)
{
	const int D = 64, F = 32, E = 4;
	const struct shape_case cases[] = {
		{ "valid", 0, 0, HS_TYPE_MXFP4, -1, 2, 0, 0 },
		{ "gate n_ff differs", 32, 0, HS_TYPE_MXFP4, -1, 2, 0, 0 },
		{ "down not transposed", 0, 1, HS_TYPE_MXFP4, -1, 2, 0, 0 },
		{ "valid: up in its own type", 0, 0, HS_TYPE_Q8_0, -1, 2, 0, 0 },
		{ "q8_1 expert matrices (ggml's, not computed)", 0, 0, 9, -1, 2, 0, 0 },
		{ "missing down", 0, 0, HS_TYPE_MXFP4, 3, 2, 0, 0 },
		{ "missing bias", 0, 0, HS_TYPE_MXFP4, 5, 2, 0, 0 },
		{ "missing router", 0, 0, HS_TYPE_MXFP4, 0, 2, 0, 0 },
		{ "used above experts", 0, 0, HS_TYPE_MXFP4, -1, 5, 0, 0 },
		{ "unknown architecture", 0, 0, HS_TYPE_MXFP4, -1, 2, 1, 0 },
		{ "2-d expert tensor", 0, 0, HS_TYPE_MXFP4, -1, 2, 0, 1 },
	};
	char path[128];
	size_t rb = 8192;

	snprintf(path, sizeof path, "%s/model.gguf", dir);
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		const struct shape_case *k = &cases[c];
		struct hs_gguf_writer *w = hs__gguf_writer_new();
		const char *arch = k->arch_llama ? "llama" : "gpt-oss";
		char key[64];
		hs_model *m = NULL;

		hs__gguf_w_str(w, "general.architecture", arch);
		snprintf(key, sizeof key, "%s.block_count", arch);
		hs__gguf_w_u32(w, key, 1);
		snprintf(key, sizeof key, "%s.expert_count", arch);
		hs__gguf_w_u32(w, key, E);
		snprintf(key, sizeof key, "%s.expert_used_count", arch);
		hs__gguf_w_u32(w, key, (uint32_t)k->used);
		snprintf(key, sizeof key, "%s.embedding_length", arch);
		hs__gguf_w_u32(w, key, D);
		struct {
			const char *name;
			int nd;
			uint64_t ne[3];
			int type;
		} t[8] = {
			{ "blk.0.ffn_gate_inp.weight", 2, { D, E }, HS_TYPE_F32 },
			{ "blk.0.ffn_gate_exps.weight", 3, { D, F + k->gate_ff_extra, E }, HS_TYPE_MXFP4 },
			{ "blk.0.ffn_up_exps.weight", 3, { D, F, E }, k->up_type },
			{ "blk.0.ffn_down_exps.weight", 3, { k->down_swapped ? D : F, k->down_swapped ? F : D, E }, HS_TYPE_MXFP4 },
			{ "blk.0.ffn_gate_inp.bias", 1, { E }, HS_TYPE_F32 },
			{ "blk.0.ffn_gate_exps.bias", 2, { F, E }, HS_TYPE_F32 },
			{ "blk.0.ffn_up_exps.bias", 2, { F, E }, HS_TYPE_F32 },
			{ "blk.0.ffn_down_exps.bias", 2, { D, E }, HS_TYPE_F32 },
		};
		if (k->flat_gate) {
			t[1].nd = 2;
			t[1].ne[1] = (uint64_t)F * E;
		}
		for (int i = 0; i < 8; i++)
			if (i != k->drop)
				hs__gguf_w_tensor(w, t[i].name, t[i].nd, t[i].ne, t[i].type);
		CHECK(hs__gguf_w_write(w, path, fill_bytes, &rb, NULL, NULL) == 0, "%s: write %s", k->label, hs_last_error());
		hs__gguf_writer_free(w);
		int rc = hs_model_open(path, &m);
		if (strncmp(k->label, "valid", 5) == 0) {
			CHECK(rc == 0, "valid model refused: %s", hs_last_error());
			if (rc == 0 && corpus) {
				size_t n;
				uint8_t *b = slurp(path, &n);
				if (b)
					save_corpus(b, n);
				free(b);
			}
		} else {
			CHECK(rc == -EINVAL && m == NULL, "%s: rc %d", k->label, rc);
			CHECK(strstr(hs_last_error(), path) && !strchr(hs_last_error(), '\n'), "%s: message '%s'", k->label,
			      hs_last_error());
		}
		if (hs_test_failures == 0 && getenv("HS_TEST_VERBOSE"))
			printf("%-22s %s\n", k->label, c ? hs_last_error() : "ok");
		hs_model_free(m);
		unlink(path);
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
		corpus = argv[2];
		mkdir(corpus, 0755);
	}
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	test_parser();
	test_written();
	test_models();
	rmdir(dir);
	return hs_test_end();
}
