/* `hotset run`: a whole model, token ids (or text, through the model's
 * tokenizer) in, generated tokens out, with timings a llama.cpp user can
 * read side by side.  A client of hotset.h only. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tools/tools.h"

static void help(void)
{
	printf("usage: hotset run --model FILE (--tokens IDS | --prompt TEXT | --chat TEXT) [-n N] [--reasoning E]\n"
	       "                  [--ctx N] [--kv f16|q8_0] [--ubatch N] [--temp T] [--top-k K] [--top-p P]\n"
	       "                  [--min-p P] [--seed S] [--device cpu|sim|cuda] [--mode M] [--plan FILE]\n"
	       "                  [--threads N] [--logits FILE] [--ignore-eos] [--json] [-q]\n\n"
	       "Runs the whole model: the prompt in ubatches, then N generated tokens, printed\n"
	       "as they come; then timings (load, prompt eval, eval) and where the experts ran.\n\n"
	       "  --model FILE    a whole gpt-oss or Qwen3-MoE GGUF model\n"
	       "  --tokens IDS    the prompt as token ids, separated by spaces or commas\n"
	       "  --prompt TEXT   the prompt as text, through the model's tokenizer (special\n"
	       "                  tokens such as <|start|> are parsed)\n"
	       "  --chat TEXT     one user turn through the model's chat format (harmony for\n"
	       "                  gpt-oss, ChatML for Qwen3, Qwen3.5's and GLM-4.5's own);\n"
	       "                  the reply's reasoning and answer are printed apart, and it\n"
	       "                  stops at the format's end of reply\n"
	       "  --reasoning E   harmony's reasoning effort: low, medium (default) or high\n"
	       "  --ignore-eos    generate all N tokens even past the end of the reply\n"
	       "  -n N            tokens to generate (default 32; 0: only the prompt)\n"
	       "  --ctx N         positions of the context (default 4096)\n"
	       "  --kv T          KV cache type: f16 (default) or q8_0\n"
	       "  --ubatch N      prompt tokens per forward step (default 512)\n"
	       "  --temp T        temperature (default 0: greedy)\n"
	       "  --top-k K       keep the K most likely tokens (default 0: off)\n"
	       "  --top-p P       keep the most likely tokens up to probability P (default 1: off)\n"
	       "  --min-p P       keep tokens at least P times as likely as the best (default 0: off)\n"
	       "  --seed S        the sampler's seed (default 1)\n"
	       "  --device D      cpu (no device), sim (the CPU imitating a device) or cuda;\n"
	       "                  default: cuda when a device answers, else cpu\n"
	       "  --mode M        where missed experts run: cpu, stream, hybrid or auto (the plan's)\n"
	       "  --plan FILE     a plan from `hotset plan -o` (default: planned now)\n"
	       "  --threads N     CPU worker threads (default: the plan's)\n"
	       "  --logits FILE   write the logits of every prompt position as float32 .npy\n"
	       "                  [n_prompt, n_vocab] (with -n 0 nothing is generated)\n"
	       "  --json          print one JSON object (tokens, text, timings) instead\n"
	       "  -q, --quiet     no progress and no timings on stderr\n"
	       "  -h, --help      this text\n");
}

static volatile sig_atomic_t stop;

static void on_sigint(int sig)
{
	(void)sig;
	stop = 1;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "1 2,3" -> ids; one line naming the bad item otherwise. */
static int parse_ids(const char *s, int32_t **out, int *n)
{
	int cap = 16, k = 0;
	int32_t *ids = malloc(sizeof *ids * cap);

	if (!ids)
		return hs_cli_fail("run", "out of memory");
	for (const char *p = s; *p;) {
		while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n')
			p++;
		if (!*p)
			break;
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || errno || v < 0 || v > 0x7fffffff || (*end && *end != ' ' && *end != ',' &&
								      *end != '\t' && *end != '\n')) {
			free(ids);
			return hs_cli_fail("run", "--tokens: '%.*s' is not a token id (0..2147483647)",
					   (int)strcspn(p, " ,\t\n"), p);
		}
		if (k == cap) {
			int32_t *g = realloc(ids, sizeof *ids * (cap *= 2));
			if (!g) {
				free(ids);
				return hs_cli_fail("run", "out of memory");
			}
			ids = g;
		}
		ids[k++] = (int32_t)v;
		p = end;
	}
	if (k == 0) {
		free(ids);
		return hs_cli_fail("run", "--tokens: no token ids given");
	}
	*out = ids;
	*n = k;
	return 0;
}

static void progress(const char *what, double f, void *ctx)
{
	(void)ctx;
	if (isatty(2))
		fprintf(stderr, "\rload: %3.0f%% %-40s", 100 * f, what);
	if (f >= 1 && isatty(2))
		fputc('\n', stderr);
}

struct run_opts {
	const char *model, *tokens, *prompt, *chat, *device, *mode, *plan, *logits, *reasoning;
	int n_gen, ctx, ubatch, threads, json, quiet, ignore_eos;
	enum hs_kv_type kv;
	struct hs_sampler_params sp;
};

/* The MoE split over every MoE layer: hit share, CPU-read and copied
 * expert bytes per token. */
static void moe_split(hs_runtime *rt, int n_layers, long tokens, double *hit, double *cpu_b, double *pcie_b)
{
	long pairs = 0, hits = 0;
	double host = 0, pcie = 0;
	for (int l = 0; l < n_layers; l++) {
		struct hs_layer_report r;
		if (hs_runtime_layer_report(rt, l, &r))
			continue;
		pairs += r.pairs;
		hits += r.hits;
		host += (double)r.host_bytes_read;
		pcie += (double)r.pcie_bytes;
	}
	*hit = pairs ? (double)hits / pairs : 0;
	*cpu_b = tokens ? host / tokens : 0;
	*pcie_b = tokens ? pcie / tokens : 0;
}

/* Where generated text goes: the detokenizer (--prompt) or the chat
 * format's reply parser (--chat), printed as it comes and kept for --json. */
struct text_out {
	hs_tokenizer *tk;
	hs_detok *dt;
	hs_reply_parser *rp;
	int json, kind;   /* the kind of the last delta printed, -1 none */
	json_t *parts[3]; /* content, reasoning, tool call: strings for --json */
};

static void emit(struct text_out *t, int kind, const char *text, size_t len)
{
	static const char *const head[] = { "--- answer ---\n", "--- reasoning ---\n", "--- tool call ---\n" };
	if (!len)
		return;
	if (t->json) {
		const char *old = json_string_value(t->parts[kind]);
		size_t ol = json_string_length(t->parts[kind]);
		char *cat = malloc(ol + len + 1);
		if (!cat)
			return;
		memcpy(cat, old, ol);
		memcpy(cat + ol, text, len);
		json_string_setn_nocheck(t->parts[kind], cat, ol + len);
		free(cat);
		return;
	}
	if (t->rp && kind != t->kind)
		printf("%s%s", t->kind >= 0 ? "\n" : "", head[kind]);
	t->kind = kind;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
}

/* One generated id through the text path; 1 when it ends the reply. */
static int text_push(struct text_out *t, int32_t id)
{
	const char *s;
	size_t n;
	if (t->rp) {
		const struct hs_reply_delta *d;
		int nd, end = hs_reply_parser_push(t->rp, id, &d, &nd);
		for (int k = 0; k < nd; k++)
			emit(t, d[k].kind, d[k].text, d[k].len);
		return end == 1;
	}
	if (id == hs_tokenizer_eos(t->tk) || id == hs_tokenizer_eot(t->tk))
		return 1;
	if (hs_detok_push(t->dt, id, &s, &n) == 0)
		emit(t, HS_REPLY_CONTENT, s, n);
	return 0;
}

static void text_finish(struct text_out *t)
{
	const char *s;
	size_t n;
	if (t->rp) {
		const struct hs_reply_delta *d;
		int nd;
		if (hs_reply_parser_finish(t->rp, &d, &nd) == 0)
			for (int k = 0; k < nd; k++)
				emit(t, d[k].kind, d[k].text, d[k].len);
	} else if (t->dt && hs_detok_flush(t->dt, &s, &n) == 0) {
		emit(t, HS_REPLY_CONTENT, s, n);
	}
}

static void text_free(struct text_out *t)
{
	hs_reply_parser_free(t->rp);
	hs_detok_free(t->dt);
	hs_tokenizer_free(t->tk);
	for (int k = 0; k < 3; k++)
		json_decref(t->parts[k]);
}

/* The prompt's ids: given, or the text (or one chat turn) tokenized. */
static int prompt_ids(const struct run_opts *o, struct text_out *t, int32_t **ids, int *n)
{
	if (o->tokens)
		return parse_ids(o->tokens, ids, n);
	if (hs_tokenizer_open(o->model, &t->tk))
		return hs_cli_fail("run", "%s", hs_last_error());
	if (o->chat) {
		struct hs_chat_message m = { .role = "user", .content = o->chat };
		struct hs_chat_opts co = { .reasoning_effort = o->reasoning };
		if (hs_chat_tokenize(t->tk, &m, 1, &co, ids, n) || hs_reply_parser_new(t->tk, HS_CHAT_AUTO, &t->rp) ||
		    hs_reply_parser_set_prompt(t->rp, *ids, *n))
			return hs_cli_fail("run", "%s", hs_last_error());
		return 0;
	}
	size_t len = strlen(o->prompt);
	int need = hs_tokenize(t->tk, o->prompt, len, HS_TOK_PARSE_SPECIAL | HS_TOK_ADD_BOS, NULL, 0);
	if (need < 0 || !(*ids = malloc(sizeof **ids * (size_t)(need > 0 ? need : 1))))
		return hs_cli_fail("run", "%s", need < 0 ? hs_last_error() : "out of memory");
	*n = hs_tokenize(t->tk, o->prompt, len, HS_TOK_PARSE_SPECIAL | HS_TOK_ADD_BOS, *ids, need);
	if (*n < 1)
		return hs_cli_fail("run", "--prompt: the text gives no tokens");
	if (hs_detok_new(t->tk, 0, &t->dt))
		return hs_cli_fail("run", "%s", hs_last_error());
	return 0;
}

static int run(const struct run_opts *o)
{
	struct hs_runtime_opts ro = { 0 };
	hs_runtime *rt = NULL;
	hs_context *ctx = NULL;
	hs_sampler *smp = NULL;
	int32_t *prompt = NULL, *gen = NULL;
	struct hs_token *batch = NULL;
	float *all_logits = NULL;
	int n_prompt = 0, n_done = 0, rc = 1, ended = 0;
	double t0 = now_s(), t_load;
	struct text_out text = { .json = o->json, .kind = -1 };

	for (int k = 0; k < 3; k++)
		text.parts[k] = json_string("");
	if (prompt_ids(o, &text, &prompt, &n_prompt))
		goto out;
	ro.device = o->device ? o->device : hs_cuda_device_count() > 0 ? "cuda" : "cpu";
	ro.plan_path = o->plan;
	ro.q = -1;
	ro.max_tokens = o->ubatch;
	ro.ctx = o->ctx;
	ro.kv_type = o->kv;
	ro.threads = o->threads;
	ro.progress = o->quiet ? NULL : progress;
	if (o->mode) {
		static const struct { const char *name; enum hs_mode m; } modes[] = {
			{ "auto", HS_MODE_NONE }, { "cpu", HS_MODE_CPU_COMPUTE }, { "stream", HS_MODE_PCIE_STREAM },
			{ "hybrid", HS_MODE_HYBRID } };
		size_t i = 0;
		while (i < 4 && strcmp(modes[i].name, o->mode))
			i++;
		if (i == 4) {
			hs_cli_fail("run", "--mode %s: one of auto, cpu, stream, hybrid", o->mode);
			goto out;
		}
		ro.mode = modes[i].m;
	}
	if (hs_runtime_open(o->model, &ro, &rt)) {
		hs_cli_fail("run", "%s", hs_last_error());
		goto out;
	}
	struct hs_context_opts co = { .n_ctx = o->ctx, .kv_type = o->kv, .n_seq = 1, .n_ubatch = o->ubatch };
	if (hs_context_create(rt, &co, &ctx)) {
		hs_cli_fail("run", "%s", hs_last_error());
		goto out;
	}
	struct hs_context_stats st;
	hs_context_stats(ctx, &st);
	const int n_vocab = hs_runtime_model_info(rt)->n_vocab;
	t_load = now_s() - t0;
	if (!o->quiet && hs_cli.verbose)
		fprintf(stderr, "%s", hs_runtime_describe(rt));
	if (n_prompt + o->n_gen > st.n_ctx) {
		hs_cli_fail("run", "%d prompt tokens + %d to generate exceed the context of %d (--ctx)", n_prompt, o->n_gen,
			    st.n_ctx);
		goto out;
	}
	if (hs_sampler_create(&o->sp, n_vocab, &smp)) {
		hs_cli_fail("run", "%s", hs_last_error());
		goto out;
	}
	batch = malloc(sizeof *batch * (size_t)n_prompt);
	gen = malloc(sizeof *gen * (size_t)(o->n_gen + 1));
	if (!batch || !gen) {
		hs_cli_fail("run", "out of memory");
		goto out;
	}
	for (int i = 0; i < n_prompt; i++)
		batch[i] = (struct hs_token){ prompt[i], i, 0, o->logits || i == n_prompt - 1 };
	signal(SIGINT, on_sigint);
	if (hs_decode(ctx, n_prompt, batch)) {
		hs_cli_fail("run", "%s", hs_last_error());
		goto out;
	}
	/* The prompt's share of the context's counters: a one-token prompt is a
	 * one-token batch, which the context counts as decoding. */
	struct hs_context_stats sp;
	hs_context_stats(ctx, &sp);
	const long p_tokens = sp.prompt_tokens + sp.decode_tokens;
	const double p_s = sp.prompt_s + sp.decode_s;
	if (o->logits) {
		if (!(all_logits = malloc(sizeof *all_logits * (size_t)n_prompt * n_vocab))) {
			hs_cli_fail("run", "out of memory for %d rows of logits", n_prompt);
			goto out;
		}
		for (int i = 0; i < n_prompt; i++)
			memcpy(all_logits + (size_t)i * n_vocab, hs_context_logits(ctx, i), sizeof(float) * n_vocab);
		if (hs_npy_write_f32(o->logits, all_logits, n_prompt, n_vocab)) {
			hs_cli_fail("run", "%s", hs_last_error());
			goto out;
		}
	}
	const float *last = hs_context_logits(ctx, hs_context_n_logits(ctx) - 1);
	while (n_done < o->n_gen && !stop) {
		int32_t id = hs_sampler_sample(smp, last);
		gen[n_done++] = id;
		if (text.tk) {
			if (text_push(&text, id) && !o->ignore_eos) {
				ended = 1;
				break;
			}
		} else if (!o->json) {
			printf("%s%d", n_done > 1 ? " " : "", id);
			fflush(stdout);
		}
		if (n_done == o->n_gen)
			break;
		struct hs_token t = { id, n_prompt + n_done - 1, 0, 1 };
		if (hs_decode(ctx, 1, &t)) {
			hs_cli_fail("run", "%s", hs_last_error());
			goto out;
		}
		last = hs_context_logits(ctx, 0);
	}
	if (text.tk)
		text_finish(&text);
	if (!o->json && n_done) {
		printf("\n");
		fflush(stdout);
	}
	signal(SIGINT, SIG_DFL);
	hs_context_stats(ctx, &st);
	const long e_tokens = st.prompt_tokens + st.decode_tokens - p_tokens;
	const double e_s = st.prompt_s + st.decode_s - p_s;
	double hit, cpu_b, pcie_b;
	moe_split(rt, hs_runtime_model_info(rt)->n_layers, st.prompt_tokens + st.decode_tokens, &hit, &cpu_b, &pcie_b);
	if (o->json) {
		json_t *ids = json_array();
		for (int i = 0; i < n_done; i++)
			json_array_append_new(ids, json_integer(gen[i]));
		json_t *j = json_pack("{s:o, s:i, s:f, s:i, s:f, s:i, s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s, s:b, s:s}",
				      "tokens", ids, "prompt_tokens", n_prompt, "load_ms", t_load * 1e3,
				      "prompt_eval_tokens", (int)p_tokens, "prompt_eval_ms", p_s * 1e3,
				      "eval_tokens", (int)e_tokens, "eval_ms", e_s * 1e3,
				      "attention_s", st.attn_s, "moe_s", st.moe_s, "other_s", st.other_s,
				      "moe_hit_share", hit, "cpu_expert_bytes_per_token", cpu_b,
				      "copied_expert_bytes_per_token", pcie_b, "dense", st.dense, "interrupted", (int)stop,
				      "stop", stop ? "interrupted" : ended ? "eos" : "length");
		if (j && text.tk) {
			json_object_set(j, "content", text.parts[HS_REPLY_CONTENT]);
			if (o->chat) {
				json_object_set(j, "reasoning", text.parts[HS_REPLY_REASONING]);
				json_object_set(j, "tool_call", text.parts[HS_REPLY_TOOL_CALL]);
			}
		}
		char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
		json_decref(j);
		if (!s) {
			hs_cli_fail("run", "out of memory");
			goto out;
		}
		printf("%s\n", s);
		free(s);
	}
	if (!o->quiet) {
		if (stop)
			fprintf(stderr, "run: interrupted after %d generated tokens\n", n_done);
		struct rusage ru;
		double peak = getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss / 1024.0 : 0; /* Linux: KiB */
		fprintf(stderr, "load time = %10.2f ms\n", t_load * 1e3);
		fprintf(stderr, "prompt eval time = %10.2f ms / %5ld tokens (%8.2f ms per token, %8.2f tokens per second)\n",
			p_s * 1e3, p_tokens, p_tokens ? p_s * 1e3 / p_tokens : 0, p_s > 0 ? p_tokens / p_s : 0);
		fprintf(stderr, "eval time = %10.2f ms / %5ld runs   (%8.2f ms per token, %8.2f tokens per second)\n",
			e_s * 1e3, e_tokens, e_tokens ? e_s * 1e3 / e_tokens : 0, e_s > 0 ? e_tokens / e_s : 0);
		fprintf(stderr, "peak RSS = %.0f MiB (the most this process held in memory: host experts, the mapped\n"
				"           file's touched pages, caches)\n", peak);
		double all = st.attn_s + st.moe_s + st.other_s;
		fprintf(stderr, "time: attention %.0f%%, MoE %.0f%%, other %.0f%% (dense part on %s)\n",
			all > 0 ? 100 * st.attn_s / all : 0, all > 0 ? 100 * st.moe_s / all : 0,
			all > 0 ? 100 * st.other_s / all : 0, st.dense);
		fprintf(stderr, "MoE: %.1f%% of routed experts hit on the device; per token %.1f MiB of experts read by the "
				"CPU, %.1f MiB copied\n",
			100 * hit, cpu_b / 1048576.0, pcie_b / 1048576.0);
	}
	rc = 0;
out:
	free(all_logits);
	free(batch);
	free(gen);
	free(prompt);
	text_free(&text);
	hs_sampler_free(smp);
	hs_context_free(ctx);
	hs_runtime_close(rt);
	return rc;
}

int hs_cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },  { "tokens", required_argument, NULL, 't' },
		{ "prompt", required_argument, NULL, 'p' }, { "chat", required_argument, NULL, 'c' },
		{ "ctx", required_argument, NULL, 'C' },    { "kv", required_argument, NULL, 'k' },
		{ "ubatch", required_argument, NULL, 'u' }, { "temp", required_argument, NULL, 'T' },
		{ "top-k", required_argument, NULL, 'K' },  { "top-p", required_argument, NULL, 'P' },
		{ "min-p", required_argument, NULL, 'N' },  { "seed", required_argument, NULL, 's' },
		{ "device", required_argument, NULL, 'd' }, { "mode", required_argument, NULL, 'M' },
		{ "plan", required_argument, NULL, 'L' },   { "threads", required_argument, NULL, 'j' },
		{ "logits", required_argument, NULL, 'l' }, { "json", no_argument, NULL, 'J' },
		{ "reasoning", required_argument, NULL, 'R' }, { "ignore-eos", no_argument, NULL, 'I' },
		{ "quiet", no_argument, NULL, 'q' },        { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o = { .n_gen = 32, .ctx = 0, .ubatch = 512, .kv = HS_KV_F16,
			      .sp = { .temperature = 0, .top_k = 0, .top_p = 1, .min_p = 0, .seed = 1 } };
	double v;
	int c;

	while ((c = getopt_long(argc, argv, "n:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'm': o.model = optarg; break;
		case 't': o.tokens = optarg; break;
		case 'p': o.prompt = optarg; break;
		case 'c': o.chat = optarg; break;
		case 'n': if (hs_cli_parse_int("run", "-n", optarg, 0, 1 << 24, &o.n_gen)) return 1; break;
		case 'C': if (hs_cli_parse_int("run", "--ctx", optarg, 1, 1 << 24, &o.ctx)) return 1; break;
		case 'u': if (hs_cli_parse_int("run", "--ubatch", optarg, 1, 8192, &o.ubatch)) return 1; break;
		case 'j': if (hs_cli_parse_int("run", "--threads", optarg, 1, 4096, &o.threads)) return 1; break;
		case 'K': if (hs_cli_parse_int("run", "--top-k", optarg, 0, 1 << 24, &o.sp.top_k)) return 1; break;
		case 'k':
			if (strcmp(optarg, "f16") == 0)
				o.kv = HS_KV_F16;
			else if (strcmp(optarg, "q8_0") == 0)
				o.kv = HS_KV_Q8_0;
			else
				return hs_cli_fail("run", "--kv %s: f16 or q8_0", optarg);
			break;
		case 'T':
			if (hs_cli_parse_num("run", "--temp", optarg, 0, 100, &v)) return 1;
			o.sp.temperature = (float)v;
			break;
		case 'P':
			if (hs_cli_parse_num("run", "--top-p", optarg, 0, 1, &v)) return 1;
			o.sp.top_p = (float)v;
			break;
		case 'N':
			if (hs_cli_parse_num("run", "--min-p", optarg, 0, 1, &v)) return 1;
			o.sp.min_p = (float)v;
			break;
		case 's': {
			char *end;
			errno = 0;
			unsigned long long s = strtoull(optarg, &end, 0);
			if (end == optarg || *end || errno || optarg[0] == '-')
				return hs_cli_fail("run", "--seed %s: a whole number 0..2^64-1 is needed", optarg);
			o.sp.seed = s;
			break;
		}
		case 'd':
			if (strcmp(optarg, "cpu") && strcmp(optarg, "sim") && strcmp(optarg, "cuda"))
				return hs_cli_fail("run", "--device '%s': cpu, sim or cuda", optarg);
			o.device = optarg;
			break;
		case 'M': o.mode = optarg; break;
		case 'L': o.plan = optarg; break;
		case 'l': o.logits = optarg; break;
		case 'J': o.json = 1; break;
		case 'R':
			if (strcmp(optarg, "low") && strcmp(optarg, "medium") && strcmp(optarg, "high"))
				return hs_cli_fail("run", "--reasoning %s: low, medium or high", optarg);
			o.reasoning = optarg;
			break;
		case 'I': o.ignore_eos = 1; break;
		case 'q': o.quiet = 1; break;
		case 'h': help(); return 0;
		default: return hs_cli_usage_error("run");
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset run: unexpected argument '%s'\n", argv[optind]);
		return hs_cli_usage_error("run");
	}
	if (!o.model)
		return hs_cli_fail("run", "no model: give --model FILE");
	if (!!o.tokens + !!o.prompt + !!o.chat != 1)
		return hs_cli_fail("run", "give exactly one of --tokens, --prompt and --chat");
	return run(&o);
}
