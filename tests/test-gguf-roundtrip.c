/* Checks the GGUF writer against the reader: `gen` files of both
 * architectures and every expert type read back with the bytes gen meant to
 * write; every metadata type survives; the same seed gives the same file;
 * and the reference forward treats masked (-1) and duplicate ids right. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu_kernels/formats.h"
#include "hotset.h"
#include "model/gen.h"
#include "model/gguf-write.h"
#include "model/gguf.h"
#include "model/model.h"
#include "tests/hs-test.h"

static char dir[] = "/tmp/hs-rt-XXXXXX";

static void check_file_against_gen(const struct hs_gen_params *p, const char *path)
{
	struct hs_gguf *g;
	char name[96];
	int rc = hs__gguf_open(path, &g);

	CHECK(rc == 0, "%s: %s", path, hs_last_error());
	if (rc)
		return;
	CHECK(g->version == 3 && g->alignment == 32, "version %u alignment %u", g->version, g->alignment);
	CHECK((int)g->n_tensors == hs__gen_n_tensors(p), "tensors %llu", (unsigned long long)g->n_tensors);
	for (int t = 0; t < hs__gen_n_tensors(p); t++) {
		const struct hs_gguf_tensor *ti = hs__gguf_find_tensor(g, hs__gen_tensor_name(p, t, name, sizeof name));
		CHECK(ti != NULL, "tensor %s missing", name);
		if (!ti)
			continue;
		uint64_t rows = ti->ne[1] * ti->ne[2] * ti->ne[3];
		uint8_t *want = malloc(ti->size ? ti->size : 1);
		CHECK(want && hs__gen_rows(p, t, 0, rows, want) == 0, "regenerate %s", name);
		CHECK(want && memcmp(want, ti->data, ti->size) == 0, "%s: bytes differ from what gen makes", name);
		CHECK(ti->offset % 32 == 0, "%s misaligned", name);
		free(want);
	}
	hs__gguf_close(g);
}

static void test_gen_types(void)
{
	const char *archs[2] = { "gpt-oss", "qwen3moe" };
	int types[5] = { HS_TYPE_MXFP4, HS_TYPE_Q8_0, HS_TYPE_F16, HS_TYPE_BF16, HS_TYPE_F32 };
	char path[128];

	for (int a = 0; a < 2; a++)
		for (int t = 0; t < 5; t++) {
			struct hs_gen_params p = { .arch = archs[a], .n_layers = 2, .n_experts = 5, .n_used = 2, .n_embd = 64,
						 .n_ff = 96, .type = types[t], .seed = 7 + t, .name = "rt" };
			hs_model *m;
			snprintf(path, sizeof path, "%s/%s-%s.gguf", dir, archs[a], hs__type_name(types[t]));
			CHECK(hs__gen_write(&p, path, NULL, NULL) == 0, "gen %s: %s", path, hs_last_error());
			CHECK(access(path, F_OK) == 0, "%s missing", path);
			{
				char part[160];
				snprintf(part, sizeof part, "%s.part", path);
				CHECK(access(part, F_OK) != 0, "%s left behind", part);
			}
			check_file_against_gen(&p, path);
			int rc = hs_model_open(path, &m);
			CHECK(rc == 0, "model %s: %s", path, hs_last_error());
			if (rc)
				continue;
			const struct hs_model_info *in = hs_model_info(m);
			CHECK(strcmp(in->arch, archs[a]) == 0 && in->n_layers == 2 && in->n_experts == 5 && in->n_used == 2 &&
			      in->n_embd == 64 && in->n_ff == 96 && in->expert_type == types[t] && in->has_bias == (a == 0),
			      "%s: info differs", path);
			CHECK(in->expert_weight_bytes == 2 * 96 * hs__type_row_bytes(types[t], 64) + 64 * hs__type_row_bytes(types[t], 96),
			      "%s: expert bytes", path);

			/* Masked ids contribute nothing; a duplicate id counts twice;
			 * the forward is linear in the weights. */
			float x[3 * 64], y1[3 * 64], y2[3 * 64], y3[3 * 64];
			for (int i = 0; i < 3 * 64; i++)
				x[i] = sinf((float)i * 0.37f);
			int32_t masked[6] = { -1, -1, -1, -1, -1, -1 }, one[6] = { 3, -1, 0, -1, 4, -1 },
				dup[6] = { 3, 3, 0, 0, 4, 4 };
			float w1[6] = { 1, 0.5f, 1, 0.5f, 1, 0.5f }, wd[6] = { 0.25f, 0.75f, 0.5f, 0.5f, 0.9f, 0.1f };
			CHECK(hs_moe_ref(m, 1, 3, x, masked, w1, y1) == 0, "masked");
			int nonzero = 0;
			for (int i = 0; i < 3 * 64; i++)
				nonzero += y1[i] != 0;
			CHECK(nonzero == 0, "all-masked output has %d non-zeros", nonzero);
			CHECK(hs_moe_ref(m, 1, 3, x, one, w1, y2) == 0 && hs_moe_ref(m, 1, 3, x, dup, wd, y3) == 0, "dup");
			double err = 0, ref = 0;
			for (int i = 0; i < 3 * 64; i++) {
				err += fabs((double)y2[i] - y3[i]);
				ref += fabs((double)y2[i]);
			}
			CHECK(ref > 0 && err <= 1e-6 * ref, "%s: duplicate ids: %g vs %g", path, err, ref);
			int32_t bad[6] = { 5, 0, 0, 0, 0, 0 };
			CHECK(hs_moe_ref(m, 1, 3, x, bad, w1, y1) == -EINVAL, "id 5 of 5 experts accepted");
			hs_model_free(m);
			unlink(path);
		}
}

static void test_same_seed(void)
{
	struct hs_gen_params p = { .arch = "gpt-oss", .n_layers = 1, .n_experts = 4, .n_used = 2, .n_embd = 64,
				  .n_ff = 64, .type = HS_TYPE_MXFP4, .seed = 42, .name = "seed" };
	char a[128], b[128];
	struct hs_gguf *ga, *gb;

	snprintf(a, sizeof a, "%s/a.gguf", dir);
	snprintf(b, sizeof b, "%s/b.gguf", dir);
	CHECK(hs__gen_write(&p, a, NULL, NULL) == 0 && hs__gen_write(&p, b, NULL, NULL) == 0, "gen");
	CHECK(hs__gguf_open(a, &ga) == 0 && hs__gguf_open(b, &gb) == 0, "open");
	CHECK(ga->size == gb->size && memcmp(ga->base, gb->base, ga->size) == 0, "same seed, different files");
	hs__gguf_close(gb);
	p.seed = 43;
	CHECK(hs__gen_write(&p, b, NULL, NULL) == 0 && hs__gguf_open(b, &gb) == 0, "gen 43");
	CHECK(ga->size == gb->size && memcmp(ga->base, gb->base, ga->size) != 0, "other seed, same file");
	hs__gguf_close(ga);
	hs__gguf_close(gb);
	unlink(a);
	unlink(b);
}

/* Tensor bytes that depend on the row and position. */
static int fill_pattern(void *ctx, int tensor, uint64_t row0, uint64_t n_rows, void *buf)
{
	size_t rb = *(size_t *)ctx;
	for (uint64_t r = 0; r < n_rows; r++)
		for (size_t i = 0; i < rb; i++)
			((uint8_t *)buf)[r * rb + i] = (uint8_t)((row0 + r) * 131 + i + tensor);
	return 0;
}

static void test_metadata(void)
{
	struct hs_gguf_writer *w = hs__gguf_writer_new();
	const char *strs[3] = { "a", "", "ccc" };
	int32_t ints[4] = { -1, 0, 7, 1 << 30 };
	uint64_t ne[2] = { 64, 3 }, u;
	size_t rb = 128;
	char path[128];
	struct hs_gguf *g;
	struct hs_gguf_str s;
	float f;
	int16_t i16 = -5;

	snprintf(path, sizeof path, "%s/meta.gguf", dir);
	CHECK(hs__gguf_w_u32(w, "k.u32", 4000000000u) == 0 && hs__gguf_w_u64(w, "k.u64", 1ull << 40) == 0 &&
	      hs__gguf_w_f32(w, "k.f32", 1.5f) == 0 && hs__gguf_w_bool(w, "k.bool", 1) == 0 &&
	      hs__gguf_w_str(w, "k.str", "hello") == 0 && hs__gguf_w_arr_str(w, "k.astr", strs, 3) == 0 &&
	      hs__gguf_w_arr_i32(w, "k.ai32", ints, 4) == 0 && hs__gguf_w_raw(w, "k.i16", HS_GGUF_INT16, &i16, 2) == 0,
	      "writing metadata");
	CHECK(hs__gguf_w_tensor(w, "t", 2, ne, HS_TYPE_F16) == 0, "tensor t");
	CHECK(hs__gguf_w_tensor(w, "bad", 1, (uint64_t[]){ 48 }, HS_TYPE_MXFP4) == -EINVAL, "48 values in mxfp4 accepted");
	CHECK(hs__gguf_w_write(w, path, fill_pattern, &rb, NULL, NULL) == 0, "write: %s", hs_last_error());
	hs__gguf_writer_free(w);
	if (hs__gguf_open(path, &g) != 0) {
		CHECK(0, "open %s: %s", path, hs_last_error());
		return;
	}
	CHECK(g->n_kv == 8 && g->n_tensors == 1, "counts %llu %llu", (unsigned long long)g->n_kv,
	      (unsigned long long)g->n_tensors);
	CHECK(hs__gguf_get_u64(g, "k.u32", &u) == 0 && u == 4000000000u, "u32");
	CHECK(hs__gguf_get_u64(g, "k.u64", &u) == 0 && u == 1ull << 40, "u64");
	CHECK(hs__gguf_get_f32(g, "k.f32", &f) == 0 && f == 1.5f, "f32");
	CHECK(hs__gguf_get_str(g, "k.str", &s) == 0 && s.n == 5 && memcmp(s.p, "hello", 5) == 0, "str");
	CHECK(hs__gguf_get_u64(g, "k.i16", &u) == -EINVAL, "negative int16 read as u64");
	CHECK(hs__gguf_get_u64(g, "k.str", &u) == -EINVAL && hs__gguf_get_u64(g, "nope", &u) == -ENOENT, "types");
	const struct hs_gguf_kv *kv = hs__gguf_find_kv(g, "k.bool");
	CHECK(kv && kv->type == HS_GGUF_BOOL && kv->value[0] == 1, "bool");
	kv = hs__gguf_find_kv(g, "k.astr");
	CHECK(kv && kv->arr_type == HS_GGUF_STRING && kv->arr_n == 3, "string array");
	if (kv) {
		CHECK(hs__gguf_get_arr_str(kv, 2, &s) == 0 && s.n == 3 && memcmp(s.p, "ccc", 3) == 0, "astr[2]");
		CHECK(hs__gguf_get_arr_str(kv, 1, &s) == 0 && s.n == 0, "astr[1]");
		CHECK(hs__gguf_get_arr_str(kv, 3, &s) == -EINVAL, "astr[3]");
	}
	kv = hs__gguf_find_kv(g, "k.ai32");
	CHECK(kv && kv->arr_type == HS_GGUF_INT32 && kv->arr_n == 4 && memcmp(kv->value + 12, ints, 16) == 0, "i32 array");
	const struct hs_gguf_tensor *t = hs__gguf_find_tensor(g, "t");
	CHECK(t && t->type == HS_TYPE_F16 && t->ne[0] == 64 && t->ne[1] == 3 && t->size == 384, "tensor info");
	if (t) {
		uint8_t want[384];
		fill_pattern(&rb, 0, 0, 3, want);
		CHECK(memcmp(want, t->data, 384) == 0, "tensor bytes");
	}
	hs__gguf_close(g);
	unlink(path);
}

int main(void)
{
	CHECK(mkdtemp(dir) != NULL, "mkdtemp");
	test_gen_types();
	test_same_seed();
	test_metadata();
	rmdir(dir);
	return hs_test_end();
}
