/* Checks every function of include/hotset.h with NULL and bad values: a
 * NULL handle or out-pointer is -EINVAL (NULL from pointer calls) with a
 * fresh message, *_free(NULL) and *_close(NULL) do nothing, bad options
 * are refused at open (device names, modes, q, counts, threads, NaN),
 * sampling a row with nothing finite is an error, and the *_opts_default()
 * structs are the documented defaults and work as given.  tests/api-coverage.sh
 * fails when a declared function is not called here. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hotset.h"
#include "tests/hs-test.h"
#include "tests/plan-util.h"

/* A message no call writes: a check sees whether the call wrote its own. */
static void mark(void)
{
	enum hs_chat_format f;
	(void)hs_chat_format_parse("api-test-mark", &f);
}

static int fresh(void)
{
	return hs_last_error()[0] && !strstr(hs_last_error(), "api-test-mark");
}

/* call must give -EINVAL (an int, or a double for hs_plan_project) and say why */
#define BAD(call)                                                                                        \
	do {                                                                                             \
		mark();                                                                                  \
		long rc_ = (long)(call);                                                                 \
		CHECK(rc_ == -EINVAL && fresh(), "%s -> %ld (%s)", #call, rc_, hs_last_error());         \
	} while (0)
/* call must give NULL and say why */
#define BAD_PTR(call)                                                                                    \
	do {                                                                                             \
		mark();                                                                                  \
		const void *p_ = (const void *)(call);                                                   \
		CHECK(p_ == NULL && fresh(), "%s -> %p (%s)", #call, p_, hs_last_error());               \
	} while (0)
/* call must succeed (0) */
#define OK(call) CHECK((call) == 0, "%s: %s", #call, hs_last_error())

static int fake_vram(int device, uint64_t *free_b, uint64_t *total_b, void *ctx)
{
	(void)device, (void)ctx;
	*free_b = *total_b = 1ull << 30;
	return 0;
}

static char last_warn[512];
static void log_fn(enum hs_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level == HS_LOG_WARN)
		snprintf(last_warn, sizeof last_warn, "%s", msg);
}

static void test_static(void)
{
	/* no arguments, or static strings for any value */
	CHECK(hs_last_error() != NULL && hs_strerror(-EINVAL) && hs_strerror(1) && hs_strerror(-99999), "strerror");
	CHECK(hs_version() && hs_build_info() && hs_cuda_status() && hs_cpu_kernels_name(), "static strings");
	CHECK(hs_cuda_device_count() >= 0, "cuda count");
	CHECK(hs_log_level_name((enum hs_log_level)99) && hs_mode_name((enum hs_mode)99) &&
		      hs_placement_name((enum hs_placement)-1) && hs_cache_policy_name((enum hs_cache_policy)99) &&
		      hs_chat_format_name((enum hs_chat_format)99),
	      "names of unknown values are strings");
	hs_log_set((enum hs_log_level)99, NULL, NULL); /* clamped, not stored as is */
	hs_log_set(HS_LOG_NONE, NULL, NULL);
}

static void test_topology(void)
{
	hs_topology *t = NULL;

	BAD(hs_topology_open(NULL, NULL));
	OK(hs_topology_open(hs_test_data("topologies/24em64t-2n6c2t-pci.xml"), &t));
	hs_topology_free(NULL);
	BAD(hs_topology_is_this_system(NULL));
	BAD_PTR(hs_topology_source(NULL));
	BAD(hs_topology_n_nodes(NULL));
	BAD(hs_topology_n_cores(NULL));
	BAD(hs_topology_n_cpus(NULL));
	BAD(hs_topology_n_gpus(NULL));
	BAD_PTR(hs_topology_node(NULL, 0));
	BAD_PTR(hs_topology_gpu(NULL, 0));
	BAD_PTR(hs_topology_to_json(NULL));
	if (t) {
		BAD_PTR(hs_topology_node(t, -1));
		BAD_PTR(hs_topology_node(t, hs_topology_n_nodes(t)));
		BAD_PTR(hs_topology_gpu(t, INT_MAX));
	}
	struct hs_profile pf;
	BAD(hs_profile_from_topology(NULL, &pf));
	BAD(hs_profile_from_topology(t, NULL));
	BAD(hs_profile_on_topology(NULL, t, &pf));
	hs_test_profile(&pf, 1ull << 33);
	struct hs_profile *out = malloc(sizeof *out);
	BAD(hs_profile_on_topology(&pf, NULL, out));
	BAD(hs_profile_on_topology(&pf, t, NULL));
	BAD(hs_profile_measure(NULL, HS_TUNE_QUICK, NULL, NULL, NULL, out));
	BAD(hs_profile_measure(t, HS_TUNE_QUICK, NULL, NULL, NULL, NULL));
	hs_topology *here = NULL;
	if (hs_topology_open(NULL, &here))
		here = NULL;
	if (here) { /* refused before measuring anything */
		BAD(hs_profile_measure(here, (enum hs_tune_level)7, NULL, NULL, NULL, out));
		BAD(hs_profile_measure(here, HS_TUNE_QUICK, "q4_K,q9_K", NULL, NULL, out));
		BAD(hs_profile_measure(here, HS_TUNE_QUICK, "f16", NULL, NULL, out));
		BAD(hs_profile_measure(here, HS_TUNE_QUICK, "q4_K_a_name_far_longer_than_any_type_name_is", NULL, NULL, out));
	}
	hs_topology_free(here);
	free(out);
	hs_topology_free(t);
}

static void test_model(void)
{
	const char *tiny = hs_test_data("models/gptoss-tiny-h256-e32.gguf");
	hs_model *m = NULL;
	float x[4 * 256] = { 0 }, y[4 * 256], w[4 * 4];
	int32_t ids[4 * 4];
	struct hs_expert_layout lay;

	BAD(hs_model_open(tiny, NULL));
	BAD(hs_model_open(NULL, &m));
	CHECK(m == NULL, "out not cleared");
	hs_model_free(NULL);
	BAD_PTR(hs_model_info(NULL));
	BAD(hs_model_layer_is_moe(NULL, 0));
	BAD(hs_model_expert_layout(NULL, 0, 0, &lay));
	BAD(hs_moe_ref(NULL, 0, 4, x, NULL, NULL, y));
	BAD(hs_moe_route_ref(NULL, 0, 4, x, ids, w));
	BAD(hs_moe_forward_cpu(NULL, 0, 4, x, NULL, NULL, y, 1));
	BAD(hs_moe_forward_device(NULL, 0, 4, x, NULL, NULL, y, "sim", NULL, 0));
	OK(hs_model_open(tiny, &m));
	if (!m)
		return;
	BAD(hs_model_expert_layout(m, 0, 0, NULL));
	BAD(hs_model_expert_layout(m, 0, -1, &lay));
	BAD(hs_model_expert_layout(m, 99, 0, &lay));
	CHECK(hs_model_layer_is_moe(m, -1) == 0 && hs_model_layer_is_moe(m, 0) == 1, "layer_is_moe");
	BAD(hs_moe_ref(m, 0, 4, NULL, NULL, NULL, y));
	BAD(hs_moe_ref(m, 0, 4, x, NULL, NULL, NULL));
	BAD(hs_moe_ref(m, 0, 4, x, ids, NULL, y));
	BAD(hs_moe_ref(m, 0, -1, x, NULL, NULL, y));
	BAD(hs_moe_route_ref(m, 0, 4, x, NULL, w));
	BAD(hs_moe_route_ref(m, 0, 4, x, ids, NULL));
	BAD(hs_moe_forward_cpu(m, 0, 4, x, NULL, NULL, NULL, 1));
	BAD(hs_moe_forward_cpu(m, 0, 4, NULL, NULL, NULL, y, 1));
	BAD(hs_moe_forward_cpu(m, 0, 4, x, NULL, NULL, y, 4 * (int)sysconf(_SC_NPROCESSORS_ONLN) + 1));
	BAD(hs_moe_forward_device(m, 0, 4, NULL, NULL, NULL, y, "sim", NULL, 0));
	BAD(hs_moe_forward_device(m, 0, 4, x, NULL, NULL, NULL, "sim", NULL, 0));
	BAD(hs_moe_forward_device(m, 0, 4, x, ids, NULL, y, "sim", NULL, 0));
	struct hs_model_desc md;
	BAD(hs_model_desc_from_model(NULL, &md));
	BAD(hs_model_desc_from_model(m, NULL));
	BAD(hs_model_desc_preset(NULL, &md));
	BAD(hs_model_desc_preset("gpt-oss-120b", NULL));
	hs_model_free(m);
}

static void test_npy(void)
{
	float *data = NULL, v[2] = { 1, 2 };
	int64_t r, c;
	char path[64];

	snprintf(path, sizeof path, "/tmp/hs-test-api-%d.npy", (int)getpid());
	BAD(hs_npy_read_f32(NULL, &data, &r, &c));
	BAD(hs_npy_read_f32(hs_test_data("models/x-h256-n4.npy"), NULL, &r, &c));
	BAD(hs_npy_read_f32(hs_test_data("models/x-h256-n4.npy"), &data, NULL, &c));
	BAD(hs_npy_read_f32(hs_test_data("models/x-h256-n4.npy"), &data, &r, NULL));
	CHECK(data == NULL, "data not cleared");
	BAD(hs_npy_write_f32(NULL, v, 1, 2));
	BAD(hs_npy_write_f32(path, NULL, 1, 2));
	BAD(hs_npy_write_f32(path, v, INT64_MAX / 2, 8)); /* rows x cols x 4 past 2^63 */
	BAD(hs_npy_write_f32(path, v, -1, 2));
	CHECK(access(path, F_OK) != 0, "a refused write left %s", path);
}

static void test_text(void)
{
	const char *vocab = hs_test_data("vocab/gptoss-o200k-harmony-vocab.gguf");
	hs_tokenizer *t = NULL;
	int32_t ids[8];
	char buf[8], *text = NULL;
	size_t len;
	const char *tp;

	BAD(hs_tokenizer_open(vocab, NULL));
	BAD(hs_tokenizer_open(NULL, &t));
	hs_tokenizer_free(NULL);
	BAD(hs_tokenizer_n_vocab(NULL));
	BAD(hs_tokenizer_bos(NULL));
	BAD(hs_tokenizer_eos(NULL));
	BAD(hs_tokenizer_eot(NULL));
	BAD(hs_tokenizer_find(NULL, "a"));
	BAD(hs_tokenizer_token_type(NULL, 0));
	BAD(hs_tokenizer_is_control(NULL, 0));
	BAD_PTR(hs_tokenizer_arch(NULL));
	BAD_PTR(hs_tokenizer_pre(NULL));
	BAD_PTR(hs_tokenizer_chat_template(NULL));
	BAD(hs_tokenize(NULL, "a", 1, 0, ids, 8));
	BAD(hs_token_bytes(NULL, 0, 0, buf, sizeof buf));
	hs_detok *d = NULL;
	BAD(hs_detok_new(NULL, 0, &d));
	hs_detok_free(NULL);
	BAD(hs_detok_push(NULL, 0, &tp, &len));
	BAD(hs_detok_flush(NULL, &tp, &len));
	BAD(hs_detokenize(NULL, ids, 1, 0, &text, &len));
	CHECK(hs_chat_format_of(NULL) == HS_CHAT_AUTO && fresh(), "format_of(NULL): %s", hs_last_error());
	BAD(hs_chat_format_parse(NULL, &(enum hs_chat_format){ 0 }));
	BAD(hs_chat_format_parse("raw", NULL));
	BAD(hs_chat_format_parse("Harmony", &(enum hs_chat_format){ 0 }));
	hs_reply_parser *rp = NULL;
	const struct hs_reply_delta *dl;
	int nd;
	BAD(hs_reply_parser_new(NULL, HS_CHAT_RAW, &rp));
	hs_reply_parser_free(NULL);
	BAD(hs_reply_parser_push(NULL, 0, &dl, &nd));
	BAD(hs_reply_parser_finish(NULL, &dl, &nd));
	BAD(hs_reply_parser_set_prompt(NULL, ids, 1));
	BAD(hs_reply_parser_tool_count(NULL));
	BAD_PTR(hs_reply_parser_tool_name_at(NULL, 0));
	BAD_PTR(hs_reply_parser_tool_name(NULL));
	hs_reply_free(NULL);
	struct hs_reply reply;
	BAD(hs_reply_parse(NULL, HS_CHAT_RAW, ids, 1, &reply));

	OK(hs_tokenizer_open(vocab, &t));
	if (!t)
		return;
	const int nv = hs_tokenizer_n_vocab(t);
	BAD(hs_tokenizer_find(t, NULL));
	BAD(hs_tokenizer_token_type(t, -1));
	BAD(hs_tokenizer_is_control(t, nv));
	BAD(hs_tokenize(t, NULL, 3, 0, ids, 8));
	BAD(hs_tokenize(t, "abc", 3, 0, NULL, 8));
	BAD(hs_tokenize(t, "abc", 3, 0, ids, -1));
	CHECK(hs_tokenize(t, NULL, 0, 0, NULL, 0) == 0, "the empty text: %s", hs_last_error());
	BAD(hs_token_bytes(t, nv, 0, buf, sizeof buf));
	BAD(hs_detok_new(t, 0, NULL));
	OK(hs_detok_new(t, 0, &d));
	if (d) {
		BAD(hs_detok_push(d, 0, NULL, &len));
		BAD(hs_detok_push(d, 0, &tp, NULL));
		BAD(hs_detok_push(d, -1, &tp, &len));
		BAD(hs_detok_flush(d, NULL, &len));
		BAD(hs_detok_flush(d, &tp, NULL));
		hs_detok_free(d);
	}
	BAD(hs_detokenize(t, ids, 1, 0, NULL, &len));
	BAD(hs_detokenize(t, NULL, 1, 0, &text, &len));
	BAD(hs_detokenize(t, ids, -1, 0, &text, &len));
	ids[0] = nv;
	BAD(hs_detokenize(t, ids, 1, 0, &text, &len));
	CHECK(text == NULL, "text not cleared");

	const struct hs_chat_message msg = { .role = "user", .content = "hi" }, bad_role = { .role = "robot" };
	struct hs_chat_opts co = hs_chat_opts_default();
	char *prompt = NULL;
	int32_t *cids = NULL;
	int n_cids = 0;
	BAD(hs_chat_render(t, &msg, 1, &co, NULL));
	BAD(hs_chat_render(t, NULL, 1, &co, &prompt));
	BAD(hs_chat_render(t, &bad_role, 1, &co, &prompt));
	BAD(hs_chat_render(NULL, &msg, 1, &co, &prompt)); /* AUTO needs the tokenizer */
	co.format = (enum hs_chat_format)9;
	BAD(hs_chat_render(t, &msg, 1, &co, &prompt));
	co = hs_chat_opts_default();
	co.reasoning_effort = "extreme";
	BAD(hs_chat_render(t, &msg, 1, &co, &prompt));
	co = hs_chat_opts_default();
	BAD(hs_chat_tokenize(t, &msg, 1, &co, NULL, &n_cids));
	BAD(hs_chat_tokenize(t, &msg, 1, &co, &cids, NULL));
	BAD(hs_chat_tokenize(NULL, &msg, 1, &co, &cids, &n_cids));
	/* the defaults render: harmony for gpt-oss's vocabulary, as opts NULL does */
	char *with_null = NULL;
	OK(hs_chat_render(t, &msg, 1, &co, &prompt));
	OK(hs_chat_render(t, &msg, 1, NULL, &with_null));
	CHECK(prompt && with_null && strstr(prompt, "<|start|>assistant") && strcmp(prompt, with_null) == 0,
	      "default chat opts: %s", prompt ? prompt : "(none)");
	free(prompt);
	free(with_null);

	BAD(hs_reply_parser_new(t, HS_CHAT_RAW, NULL));
	BAD(hs_reply_parser_new(t, (enum hs_chat_format)9, &rp));
	OK(hs_reply_parser_new(t, HS_CHAT_AUTO, &rp));
	if (rp) {
		BAD(hs_reply_parser_push(rp, 0, NULL, &nd));
		BAD(hs_reply_parser_push(rp, 0, &dl, NULL));
		BAD(hs_reply_parser_push(rp, nv, &dl, &nd));
		BAD(hs_reply_parser_finish(rp, NULL, &nd));
		BAD(hs_reply_parser_finish(rp, &dl, NULL));
		BAD(hs_reply_parser_set_prompt(rp, NULL, 1));
		BAD(hs_reply_parser_set_prompt(rp, ids, -1));
		int32_t bad_id = nv;
		BAD(hs_reply_parser_set_prompt(rp, &bad_id, 1));
		CHECK(hs_reply_parser_tool_count(rp) == 0 && hs_reply_parser_tool_name_at(rp, -1) == NULL &&
			      hs_reply_parser_tool_name(rp) == NULL,
		      "no calls");
		hs_reply_parser_free(rp);
	}
	BAD(hs_reply_parse(t, HS_CHAT_RAW, ids, 1, NULL));
	BAD(hs_reply_parse(t, HS_CHAT_RAW, NULL, 1, &reply));
	BAD(hs_reply_parse(t, HS_CHAT_RAW, ids, -1, &reply));
	hs_reply_free(&reply); /* what a refused parse left is freeable */

	/* grammars */
	hs_grammar *gr = NULL;
	char *gbnf = NULL;
	float lg[4];
	BAD(hs_grammar_new(NULL, "root ::= \"a\"", &gr));
	BAD(hs_grammar_new(t, NULL, &gr));
	BAD(hs_grammar_new(t, "root ::= \"a\"", NULL));
	BAD(hs_grammar_new(t, "root ::= (", &gr));
	CHECK(gr == NULL, "grammar out not cleared");
	hs_grammar_free(NULL);
	BAD(hs_grammar_reset(NULL));
	BAD(hs_grammar_accept(NULL, 0));
	BAD(hs_grammar_mask(NULL, lg));
	BAD(hs_grammar_done(NULL));
	BAD(hs_grammar_prefix(NULL, "p-", &gbnf));
	BAD(hs_grammar_prefix("root ::= \"a\"", NULL, &gbnf));
	BAD(hs_grammar_prefix("root ::= \"a\"", "p-", NULL));
	BAD(hs_grammar_prefix("root ::= \"a\"", "p ", &gbnf));
	BAD(hs_json_schema_to_grammar(NULL, &gbnf));
	BAD(hs_json_schema_to_grammar("{}", NULL));
	BAD(hs_json_schema_to_grammar("{\"type\": 5}", &gbnf));
	CHECK(gbnf == NULL, "gbnf out not cleared");
	OK(hs_grammar_new(t, "root ::= \"a\"", &gr));
	if (gr) {
		BAD(hs_grammar_mask(gr, NULL));
		BAD(hs_grammar_accept(gr, -1));
		BAD(hs_grammar_accept(gr, nv));
		OK(hs_grammar_reset(gr));
		hs_sampler *gs = NULL;
		OK(hs_sampler_create(NULL, 16, &gs));
		BAD(hs_sampler_set_grammar(NULL, gr));
		BAD(hs_sampler_set_grammar(gs, gr)); /* 16 tokens against the vocabulary's */
		OK(hs_sampler_set_grammar(gs, NULL));
		hs_sampler_free(gs);
		hs_grammar_free(gr);
	}
	hs_tokenizer_free(t);
}

static void test_plan(void)
{
	struct hs_model_desc md;
	struct hs_profile pf;
	static struct hs_plan plan, bad;
	struct hs_plan_opts o;
	char path[64];

	snprintf(path, sizeof path, "/tmp/hs-test-api-%d.json", (int)getpid());
	OK(hs_model_desc_preset("gpt-oss-20b", &md));
	hs_test_profile(&pf, 1ull << 34);
	BAD(hs_plan_make(NULL, &pf, NULL, &plan));
	BAD(hs_plan_make(&md, NULL, NULL, &plan));
	BAD(hs_plan_make(&md, &pf, NULL, NULL));
	/* opts NULL: the defaults, the same plan as hs_plan_opts_default() */
	o = hs_plan_opts_default();
	CHECK(o.gpu == 0 && o.ctx == 8192 && o.ubatch == 512 && o.host_layers == -1 && o.n_seq == 1 &&
		      o.kv_type == HS_KV_F16,
	      "plan defaults");
	OK(hs_plan_make(&md, &pf, NULL, &plan));
	OK(hs_plan_make(&md, &pf, &o, &bad));
	CHECK(plan.gpu == 0 && plan.ctx == 8192 && plan.n_layers == bad.n_layers &&
		      plan.n_host_layers == bad.n_host_layers,
	      "opts NULL is the defaults");
	/* a profile without a GPU: the defaults (and a zero struct's gpu) plan for the CPU */
	struct hs_profile cpu_only = pf;
	cpu_only.n_gpus = 0;
	OK(hs_plan_make(&md, &cpu_only, &o, &bad));
	CHECK(bad.gpu == -1 && bad.n_gpu_layers == 0, "defaults without a GPU: gpu %d", bad.gpu);
	o.gpu = -2;
	BAD(hs_plan_make(&md, &pf, &o, &bad));
	o = hs_plan_opts_default();
	o.kv_type = (enum hs_kv_type)5;
	BAD(hs_plan_make(&md, &pf, &o, &bad));
	o = hs_plan_opts_default();
	o.n_seq = HS_MAX_SEQ + 1;
	BAD(hs_plan_make(&md, &pf, &o, &bad));
	o = hs_plan_opts_default();
	o.host_layers = -5;
	BAD(hs_plan_make(&md, &pf, &o, &bad));
	struct hs_model_desc bad_md = md;
	memset(bad_md.name, 'x', sizeof bad_md.name);
	BAD(hs_plan_make(&bad_md, &pf, NULL, &bad));
	struct hs_profile bad_pf = pf;
	bad_pf.n_gpus = HS_MAX_GPUS + 1;
	BAD(hs_plan_make(&md, &bad_pf, NULL, &bad));
	bad_pf = pf;
	bad_pf.nodes[0].n_kernel = -1;
	BAD(hs_plan_make(&md, &bad_pf, NULL, &bad));

	/* a plan with counts outside its arrays is refused by every call */
	bad = plan;
	bad.n_layers = HS_MAX_LAYERS + 1;
	double hit[HS_MAX_LAYERS] = { 0 };
	BAD_PTR(hs_plan_to_json(NULL));
	BAD_PTR(hs_plan_to_json(&bad));
	BAD(hs_plan_save(&bad, path));
	BAD(hs_plan_save(&plan, NULL));
	BAD(hs_plan_save(NULL, path));
	BAD(hs_plan_project(&bad, hit));
	BAD(hs_plan_project(NULL, hit));
	BAD(hs_plan_project(&plan, NULL));
	CHECK(hs_plan_project(&plan, hit) > 0, "a good plan projects");
	bad = plan;
	bad.decode_mode = (enum hs_mode)9;
	BAD(hs_plan_save(&bad, path));
	bad = plan;
	bad.layers[0].n_numa_nodes = 3;
	BAD_PTR(hs_plan_to_json(&bad));
	CHECK(access(path, F_OK) != 0, "a refused save left %s", path);
	BAD(hs_plan_from_json(NULL, &bad));
	BAD(hs_plan_from_json("{}", NULL));
	BAD(hs_plan_load(NULL, &bad));
	BAD(hs_plan_load(path, NULL));

	BAD_PTR(hs_profile_to_json(NULL));
	bad_pf = pf;
	bad_pf.n_nodes = -1;
	BAD_PTR(hs_profile_to_json(&bad_pf));
	BAD(hs_profile_save(&bad_pf, path));
	bad_pf = pf;
	memset(bad_pf.note, 'x', sizeof bad_pf.note);
	BAD(hs_profile_save(&bad_pf, path));
	BAD(hs_profile_save(&pf, NULL));
	BAD(hs_profile_load(NULL, &bad_pf));
	BAD(hs_profile_load(path, NULL));
	char buf[8];
	BAD(hs_profile_default_path(NULL, 64));
	CHECK(hs_profile_default_path(buf, 0) == -ENAMETOOLONG, "a buffer of 0 bytes");
	CHECK(access(path, F_OK) != 0, "a refused save left %s", path);

	struct hs_cache_result cr;
	int off[2] = { 0, 1 }, pairs[1] = { 1 };
	int32_t ex[1] = { 0 };
	BAD(hs_cache_simulate(HS_CACHE_LRU, 8, 2, 1, 1, off, ex, pairs, NULL, NULL));
	BAD(hs_cache_simulate(HS_CACHE_LRU, 8, 2, 1, 1, NULL, ex, pairs, NULL, &cr));
	BAD(hs_cache_simulate(HS_CACHE_LRU, 8, 2, 1, 1, off, NULL, pairs, NULL, &cr));
	BAD(hs_cache_simulate(HS_CACHE_LRU, 8, 2, 1, 1, off, ex, NULL, NULL, &cr));
	BAD(hs_cache_simulate((enum hs_cache_policy)42, 8, 2, 1, 1, off, ex, pairs, NULL, &cr));

	BAD(hs_vram_wait(0, 1, NAN, 1, fake_vram, NULL, NULL, NULL));
	BAD(hs_vram_wait(0, 1, -1, 1, fake_vram, NULL, NULL, NULL));
	BAD(hs_vram_wait(-1, 1, 1, 1, fake_vram, NULL, NULL, NULL));
	OK(hs_vram_wait(0, 1, 0, 1, fake_vram, NULL, NULL, NULL));
}

static void test_trace(void)
{
	char path[64], csv[80];
	hs_trace_writer *w = NULL;
	hs_trace *t = NULL;
	int32_t ids[2] = { 0, 1 };
	float wt[2] = { 0.5f, 0.5f };
	int a, b, c;
	const int32_t *ri;
	const float *rw;

	snprintf(path, sizeof path, "/tmp/hs-test-api-%d.trace", (int)getpid());
	snprintf(csv, sizeof csv, "%s.csv", path);
	BAD(hs_trace_writer_open(NULL, 8, 2, &w));
	BAD(hs_trace_writer_open(path, 8, 2, NULL));
	BAD(hs_trace_writer_open(path, 8, 9, &w));
	BAD(hs_trace_writer_add(NULL, 0, 0, 1, ids, wt));
	CHECK(hs_trace_writer_close(NULL, 1) == 0, "close(NULL)");
	OK(hs_trace_writer_open(path, 8, 2, &w));
	if (w) {
		BAD(hs_trace_writer_add(w, 0, 0, 1, NULL, wt));
		BAD(hs_trace_writer_add(w, 0, 0, 1, ids, NULL));
		BAD(hs_trace_writer_add(w, -1, 0, 1, ids, wt));
		OK(hs_trace_writer_add(w, 0, 0, 1, ids, wt));
		OK(hs_trace_writer_close(w, 1));
	}
	BAD(hs_trace_load(NULL, &t));
	BAD(hs_trace_load(path, NULL));
	hs_trace_free(NULL);
	mark();
	a = b = c = 7;
	hs_trace_info(NULL, &a, &b, &c);
	CHECK(a == 0 && b == 0 && c == 0 && fresh(), "info(NULL): %d %d %d", a, b, c);
	BAD(hs_trace_record(NULL, 0, &a, &b, &c, &ri, &rw));
	BAD(hs_trace_write_csv(NULL, csv));
	BAD(hs_trace_generate(NULL, 1, 8, 2, 1, 1, 1, 0.5, 0, 1));
	BAD(hs_trace_generate(path, 1, 8, 2, 1, 1, 1, NAN, 0, 1));
	OK(hs_trace_load(path, &t));
	if (t) {
		hs_trace_info(t, NULL, &b, NULL); /* any out-pointer may be NULL */
		CHECK(b == 8, "info experts %d", b);
		BAD(hs_trace_record(t, 0, NULL, &b, &c, &ri, &rw));
		BAD(hs_trace_record(t, 0, &a, &b, &c, NULL, &rw));
		BAD(hs_trace_record(t, 1, &a, &b, &c, &ri, &rw));
		BAD(hs_trace_write_csv(t, NULL));
		hs_trace_free(t);
	}
	unlink(path);
	CHECK(access(csv, F_OK) != 0, "a refused csv left %s", csv);
}

/* The runtime with one option bad: refused at open, nothing returned. */
static void bad_open(const char *model, struct hs_runtime_opts o, const char *what, const char *says)
{
	hs_runtime *rt = (hs_runtime *)&o; /* not NULL: open must clear it */
	mark();
	int rc = hs_runtime_open(model, &o, &rt);
	CHECK(rc == -EINVAL && rt == NULL && fresh() && strstr(hs_last_error(), says), "%s: %d, %s", what, rc,
	      hs_last_error());
	if (rc == 0)
		hs_runtime_close(rt);
}

static void test_runtime(void)
{
	const char *tiny = hs_test_data("models/gptoss-tiny-h256-e32.gguf");
	const char *whole = hs_test_data("oracle/gptoss-l4-h192-swa32-q8.gguf");
	const struct hs_runtime_opts def = hs_runtime_opts_default();
	struct hs_runtime_opts o;
	hs_runtime *rt = NULL;
	float x[4 * 256] = { 0 }, y[4 * 256];
	struct hs_layer_report rep;

	CHECK(def.device == NULL && def.q == -1 && def.max_tokens == 512 && def.n_seq == 1 && def.admit_per_step == 1 &&
		      def.mode == HS_MODE_NONE && def.threads == 0,
	      "runtime defaults");
	BAD(hs_runtime_open(tiny, &def, NULL));
	BAD(hs_runtime_open(NULL, &def, &rt));
	hs_runtime_close(NULL);
	BAD(hs_runtime_forward(NULL, 0, 4, x, NULL, NULL, y));
	BAD(hs_runtime_layer_report(NULL, 0, &rep));
	BAD(hs_runtime_set_mode(NULL, HS_MODE_NONE, -1));
	BAD(hs_runtime_set_cache_policy(NULL, "lru", 1));
	BAD(hs_runtime_reset(NULL));
	BAD_PTR(hs_runtime_model_info(NULL));
	BAD_PTR(hs_runtime_describe(NULL));
	BAD(hs_runtime_set_threads(NULL, 1));
	BAD(hs_runtime_threads(NULL));

	o = def, o.device = "bogus";
	bad_open(tiny, o, "device bogus", "cpu, sim, cuda");
	o = def, o.device = "CPU";
	bad_open(tiny, o, "device CPU", "cpu, sim, cuda");
	o = def, o.mode = (enum hs_mode)99;
	bad_open(tiny, o, "mode 99", "mode 99");
	o = def, o.q = 7;
	bad_open(tiny, o, "q 7", "q 7");
	o = def, o.q = NAN;
	bad_open(tiny, o, "q NaN", "q nan");
	o = def, o.q = -INFINITY;
	bad_open(tiny, o, "q -inf", "q -inf");
	o = def, o.ctx = -1;
	bad_open(tiny, o, "ctx -1", "ctx -1");
	o = def, o.n_seq = 100000;
	bad_open(tiny, o, "n_seq 100000", "n_seq 100000");
	o = def, o.admit_per_step = -7;
	bad_open(tiny, o, "admit -7", "admit_per_step -7");
	o = def, o.threads = 4 * (int)sysconf(_SC_NPROCESSORS_ONLN) + 1;
	bad_open(tiny, o, "threads over 4 x CPUs", "online CPUs");
	o = def, o.threads = -1;
	bad_open(tiny, o, "threads -1", "-1 threads");
	o = def, o.max_tokens = -1;
	bad_open(tiny, o, "max_tokens -1", "max_tokens -1");
	o = def, o.max_tokens = 1 << 20;
	bad_open(tiny, o, "max_tokens 2^20", "at most 65536");
	o = def, o.kv_type = (enum hs_kv_type)3;
	bad_open(tiny, o, "kv type 3", "KV type 3");
	o = def, o.cache_policy = "mru";
	bad_open(tiny, o, "policy mru", "mru");
	o = def, o.ctx = 1 << 30;
	bad_open(whole, o, "ctx over context_length", "context_length");
	static struct hs_plan bad_plan;
	bad_plan.n_layers = -3;
	o = def, o.plan = &bad_plan;
	bad_open(tiny, o, "plan with -3 layers", "-3 layers");
	static struct hs_profile bad_pf;
	bad_pf.n_nodes = HS_MAX_NODES + 1;
	o = def, o.profile = &bad_pf;
	bad_open(tiny, o, "profile of 17 nodes", "nodes");
	/* device NULL reads $HOTSET_DEVICE, which is checked the same way */
	const char *env = getenv("HOTSET_DEVICE");
	char *saved = env ? strdup(env) : NULL;
	setenv("HOTSET_DEVICE", "gpu", 1);
	bad_open(tiny, def, "$HOTSET_DEVICE gpu", "from $HOTSET_DEVICE");
	if (saved) {
		setenv("HOTSET_DEVICE", saved, 1);
		free(saved);
	} else {
		unsetenv("HOTSET_DEVICE");
	}

	/* the defaults open; device NULL is the CPU when no CUDA device answers */
	OK(hs_runtime_open(tiny, NULL, &rt));
	if (!rt)
		return;
	if (!getenv("HOTSET_DEVICE") && hs_cuda_device_count() == 0)
		CHECK(strstr(hs_runtime_describe(rt), "device: none (cpu)") != NULL, "device NULL: %s",
		      hs_runtime_describe(rt));
	CHECK(hs_runtime_model_info(rt) != NULL, "model info");
	BAD(hs_runtime_forward(rt, 0, 4, NULL, NULL, NULL, y));
	BAD(hs_runtime_forward(rt, 0, 4, x, NULL, NULL, NULL));
	BAD(hs_runtime_forward(rt, 0, 0, x, NULL, NULL, y));
	BAD(hs_runtime_forward(rt, 0, 513, x, NULL, NULL, y));
	BAD(hs_runtime_forward(rt, -1, 4, x, NULL, NULL, y));
	BAD(hs_runtime_layer_report(rt, 0, NULL));
	BAD(hs_runtime_layer_report(rt, 99, &rep));
	BAD(hs_runtime_set_mode(rt, HS_MODE_HYBRID, NAN));
	BAD(hs_runtime_set_mode(rt, HS_MODE_HYBRID, 1.5));
	BAD(hs_runtime_set_mode(rt, (enum hs_mode)-1, -1));
	OK(hs_runtime_set_mode(rt, HS_MODE_HYBRID, 0.25));
	BAD(hs_runtime_set_cache_policy(rt, NULL, 1));
	BAD(hs_runtime_set_cache_policy(rt, "lru", -1));
	OK(hs_runtime_set_cache_policy(rt, "lfu", 0));
	OK(hs_runtime_reset(rt));
	BAD(hs_runtime_set_threads(rt, 0));
	BAD(hs_runtime_set_threads(rt, -3));
	BAD(hs_runtime_set_threads(rt, 1 << 20));
	OK(hs_runtime_set_threads(rt, 1));
	CHECK(hs_runtime_threads(rt) == 1, "threads after set: %d", hs_runtime_threads(rt));
	OK(hs_runtime_forward(rt, 0, 4, x, NULL, NULL, y));
	hs_runtime_close(rt);
}

static void test_context(void)
{
	const char *whole = hs_test_data("oracle/gptoss-l4-h192-swa32-q8.gguf");
	struct hs_runtime_opts o = hs_runtime_opts_default();
	const struct hs_context_opts cdef = hs_context_opts_default();
	struct hs_context_opts co;
	hs_runtime *rt = NULL;
	hs_context *c = NULL;
	struct hs_context_stats st;
	struct hs_token tok = { 0, 0, 0, 1 };

	CHECK(cdef.n_ctx == 0 && cdef.n_seq == 1 && cdef.kv_type == HS_KV_F16 && cdef.n_ubatch == 0 && !cdef.dense,
	      "context defaults");
	BAD(hs_context_create(NULL, &cdef, &c));
	hs_context_free(NULL);
	BAD(hs_decode(NULL, 1, &tok));
	BAD_PTR(hs_context_logits(NULL, 0));
	BAD(hs_context_n_logits(NULL));
	BAD(hs_context_seq_pos(NULL, 0));
	BAD(hs_context_seq_clear(NULL, 0));
	BAD(hs_context_seq_keep(NULL, 0, 0));
	BAD(hs_context_stats(NULL, &st));
	hs_context_stats_reset(NULL);
	BAD(hs_context_seq_rm(NULL, 0, 0, 1));
	BAD(hs_context_seq_cp(NULL, 0, 1, 0, 1));
	BAD(hs_context_seq_save(NULL, 0, "/tmp/hs-test-api.state", NULL, 0));
	BAD(hs_context_seq_load(NULL, 0, "/tmp/hs-test-api.state", NULL, 0, NULL));
	BAD(hs_context_set_abort(NULL, NULL, NULL));

	/* on the sim device (the dense part and the KV cache in its memory),
	 * planned for 64 positions of one sequence */
	o.device = "sim";
	o.ctx = 64;
	o.max_tokens = 8;
	OK(hs_runtime_open(whole, &o, &rt));
	if (!rt)
		return;
	BAD(hs_context_create(rt, &cdef, NULL));
	co = cdef, co.n_ctx = -1;
	BAD(hs_context_create(rt, &co, &c));
	co = cdef, co.n_seq = HS_MAX_SEQ + 1;
	BAD(hs_context_create(rt, &co, &c));
	co = cdef, co.n_ubatch = 9;
	BAD(hs_context_create(rt, &co, &c));
	co = cdef, co.kv_type = (enum hs_kv_type)2;
	BAD(hs_context_create(rt, &co, &c));
	co = cdef, co.dense = "gpu";
	BAD(hs_context_create(rt, &co, &c));
	hs_log_set(HS_LOG_WARN, log_fn, NULL);
	/* within the plan: no warning */
	last_warn[0] = 0;
	co = cdef, co.n_ctx = 64;
	OK(hs_context_create(rt, &co, &c));
	CHECK(last_warn[0] == 0, "a planned context warned: %s", last_warn);
	hs_context_free(c);
	c = NULL;
	/* more than planned: said through the log */
	co = cdef, co.n_ctx = 128, co.n_seq = 2;
	OK(hs_context_create(rt, &co, &c));
	CHECK(strstr(last_warn, "planned for 64 KV positions") != NULL, "no warning: '%s'", last_warn);
	hs_log_set(HS_LOG_NONE, NULL, NULL);
	if (c) {
		BAD(hs_decode(c, 1, NULL));
		BAD(hs_decode(c, 0, &tok));
		BAD(hs_context_seq_pos(c, 2));
		BAD(hs_context_seq_clear(c, -1));
		BAD(hs_context_seq_keep(c, 0, 1));
		BAD(hs_context_stats(c, NULL));
		BAD(hs_context_seq_rm(c, 2, 0, 1));
		BAD(hs_context_seq_rm(c, 0, 1, 0));
		BAD(hs_context_seq_cp(c, 0, 0, 0, 1));
		BAD(hs_context_seq_cp(c, 0, 5, 0, 1));
		BAD(hs_context_seq_save(c, 0, NULL, NULL, 0));
		BAD(hs_context_seq_save(c, 9, "/tmp/hs-test-api.state", NULL, 0));
		BAD(hs_context_seq_load(c, 0, NULL, NULL, 0, NULL));
		CHECK(hs_context_seq_load(c, 0, "/nonexistent/hs-state", NULL, 0, NULL) < 0, "load of a missing file");
		OK(hs_context_set_abort(c, NULL, NULL));
		/* logits are counted among the entries that asked for them */
		struct hs_token b[3] = { { 1, 0, 0, 0 }, { 2, 1, 0, 1 }, { 3, 0, 1, 0 } };
		OK(hs_decode(c, 3, b));
		CHECK(hs_context_n_logits(c) == 1 && hs_context_logits(c, 0) != NULL, "one row of logits");
		BAD_PTR(hs_context_logits(c, 1));
		BAD_PTR(hs_context_logits(c, -1));
		OK(hs_context_stats(c, &st));
		/* the step breakdown: named, a part of the total time, bytes where weights were read */
		double steps = 0;
		int named = 1, idx[4] = { -1, -1, -1, -1 };
		static const char *const want[4] = { "q/k/v products", "experts", "logits", "norms" };
		for (int i = 0; i < HS_CONTEXT_STEPS; i++) {
			const char *nm = hs_context_step_name(i);
			named &= nm != NULL && st.step_s[i] >= 0 && st.step_bytes[i] >= 0 && st.step_dispatches[i] >= 0;
			steps += st.step_s[i];
			for (int k = 0; nm && k < 4; k++)
				if (strcmp(nm, want[k]) == 0)
					idx[k] = i;
		}
		CHECK(named && !hs_context_step_name(-1) && !hs_context_step_name(HS_CONTEXT_STEPS), "step names");
		CHECK(idx[0] >= 0 && idx[1] >= 0 && idx[2] >= 0 && idx[3] >= 0, "steps q/k/v, experts, logits, norms named");
		CHECK(steps > 0 && steps <= st.attn_s + st.moe_s + st.other_s + 1e-9, "steps %.3g s of %.3g", steps,
		      st.attn_s + st.moe_s + st.other_s);
		if (idx[0] >= 0 && idx[1] >= 0 && idx[2] >= 0 && idx[3] >= 0)
			CHECK(st.step_bytes[idx[0]] > 0 && st.step_bytes[idx[1]] > 0 && st.step_bytes[idx[2]] > 0 &&
				      (st.step_dispatches[idx[3]] > 0) == (strcmp(st.dense, "cpu") == 0),
			      "bytes of q/k/v %.0f, experts %.0f, logits %.0f; norm dispatches %ld (pool work only with the "
			      "dense part on the CPU)", st.step_bytes[idx[0]],
			      st.step_bytes[idx[1]], st.step_bytes[idx[2]], idx[3] >= 0 ? st.step_dispatches[idx[3]] : 0);
		hs_context_stats_reset(c);
		OK(hs_context_stats(c, &st));
		double left = 0;
		for (int i = 0; i < HS_CONTEXT_STEPS; i++)
			left += st.step_s[i] + st.step_bytes[i] + (double)st.step_dispatches[i];
		CHECK(left == 0, "the breakdown after a reset: %g", left);

		hs_sampler *s = NULL;
		const int nv = hs_runtime_model_info(rt)->n_vocab;
		const struct hs_sampler_params sd = hs_sampler_params_default();
		CHECK(sd.temperature == 0 && sd.top_k == 0 && sd.top_p == 1 && sd.min_p == 0, "sampler defaults");
		OK(hs_sampler_create(&sd, nv, &s));
		if (s) {
			const float *row = hs_context_logits(c, 0);
			int best = 0;
			for (int i = 1; i < nv; i++)
				if (row[i] > row[best])
					best = i;
			CHECK(hs_sampler_sample(s, row) == best, "the defaults are greedy");
			hs_sampler_free(s);
		}
		hs_context_free(c);
	}
	hs_runtime_close(rt);
}

static void test_sampler(void)
{
	hs_sampler *s = NULL;
	float row[16];
	const struct hs_sampler_params hot = { .temperature = 0.8f, .top_p = 1, .seed = 3 };

	BAD(hs_sampler_create(&hot, 16, NULL));
	hs_sampler_free(NULL);
	BAD(hs_sampler_sample(NULL, row));
	for (int greedy = 0; greedy < 2; greedy++) {
		struct hs_sampler_params p = greedy ? hs_sampler_params_default() : hot;
		OK(hs_sampler_create(&p, 16, &s));
		if (!s)
			continue;
		BAD(hs_sampler_sample(s, NULL));
		for (int i = 0; i < 16; i++)
			row[i] = NAN;
		BAD(hs_sampler_sample(s, row));
		for (int i = 0; i < 16; i++)
			row[i] = i % 2 ? -INFINITY : NAN;
		BAD(hs_sampler_sample(s, row));
		row[11] = 1.5f; /* the one finite logit */
		CHECK(hs_sampler_sample(s, row) == 11, "%s: the finite logit", greedy ? "greedy" : "sampled");
		hs_sampler_free(s);
		s = NULL;
	}
	struct hs_sampler_params nan_p = hot;
	nan_p.top_p = NAN;
	BAD(hs_sampler_create(&nan_p, 16, &s));
	BAD(hs_sampler_create(&hot, 0, &s));

	/* logprobs: every bad argument refused, a row with one finite logit */
	float lp = 1, top_lp[3];
	int32_t top_id[3];
	BAD(hs_logprobs(NULL, 16, 0, 0, &lp, NULL, NULL));
	BAD(hs_logprobs(row, 0, 0, 0, &lp, NULL, NULL));
	BAD(hs_logprobs(row, 16, -1, 0, &lp, NULL, NULL));
	BAD(hs_logprobs(row, 16, 16, 0, &lp, NULL, NULL));
	BAD(hs_logprobs(row, 16, 0, -1, &lp, top_id, top_lp));
	BAD(hs_logprobs(row, 16, 0, 17, &lp, top_id, top_lp));
	BAD(hs_logprobs(row, 16, 0, 3, &lp, NULL, top_lp));
	BAD(hs_logprobs(row, 16, 0, 3, &lp, top_id, NULL));
	for (int i = 0; i < 16; i++)
		row[i] = NAN;
	BAD(hs_logprobs(row, 16, 0, 0, &lp, NULL, NULL));
	row[5] = 2;
	OK(hs_logprobs(row, 16, 5, 3, &lp, top_id, top_lp));
	CHECK(lp == 0 && top_id[0] == 5 && top_lp[0] == 0 && top_lp[1] == -INFINITY && top_id[1] == 0 &&
		      top_id[2] == 1,
	      "logprobs of one finite logit: %g, top %d %g, %d %g", lp, top_id[0], top_lp[0], top_id[1], top_lp[1]);
	OK(hs_logprobs(row, 16, 0, 0, NULL, NULL, NULL));
}

int main(void)
{
	test_static();
	test_topology();
	test_model();
	test_npy();
	test_text();
	test_plan();
	test_trace();
	test_runtime();
	test_context();
	test_sampler();
	return hs_test_end();
}
