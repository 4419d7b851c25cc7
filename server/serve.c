/* `hotset serve`: flags, start-up and a graceful stop.  The main thread
 * opens the tokenizer, starts the HTTP server and the scheduler (which
 * loads the model), then waits for SIGINT/SIGTERM: it stops accepting,
 * lets running requests finish within --grace seconds (a second signal
 * cancels them at once), and exits 0. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

static void help(void)
{
	printf("usage: hotset serve --model FILE [--host ADDR] [--port N] [--parallel N] [--ctx N]\n"
	       "                    [--kv f16|q8_0] [--plan FILE] [--api-key KEY] [--max-queue N]\n"
	       "                    [--device cpu|sim|cuda] [--mode M] [--ubatch N] [--threads N]\n"
	       "                    [--alias NAME] [--chat-format F] [--max-body BYTES] [--grace S]\n"
	       "                    [--vram-wait S] [--no-prompt-cache] [--max-conns N]\n"
	       "                    [--max-conns-per-client N] [--header-timeout S] [--body-timeout S] [-q]\n\n"
	       "Serves a whole model over HTTP with the OpenAI API (/v1/chat/completions,\n"
	       "/v1/completions, /v1/responses, /v1/models), Anthropic's (/v1/messages,\n"
	       "/v1/messages/count_tokens), /health, /metrics (Prometheus text) and a chat\n"
	       "page at /.  Up to --parallel requests decode together, one batch per step;\n"
	       "new prompts are prefilled in chunks of --ubatch tokens between steps.  A finished\n"
	       "request's KV cells stay with its sequence until another request needs it, so\n"
	       "a prompt that starts with an earlier prompt and answer (the next chat turn)\n"
	       "is prefilled from where they part.  A request may hold its reply to a JSON\n"
	       "schema (response_format), a GBNF grammar (grammar) or a forced tool call\n"
	       "(tool_choice required or a named function): docs/server.md.\n\n"
	       "  --model FILE     a whole GGUF model (gpt-oss, qwen3moe, qwen35moe, glm4moe)\n"
	       "  --host ADDR      address to listen on (default 127.0.0.1: this machine only)\n"
	       "  --port N         TCP port (default 8080; 0: any free port, printed at start)\n"
	       "  --parallel N     sequences decoded together (default 2), each with --ctx positions\n"
	       "  --ctx N          positions per sequence: prompt + answer (default 4096, at most\n"
	       "                   the model's context length)\n"
	       "  --kv T           KV cache type: f16 (default) or q8_0\n"
	       "  --plan FILE      a plan from `hotset plan -o` (default: planned now)\n"
	       "  --api-key KEY    require \"Authorization: Bearer KEY\" (or \"x-api-key: KEY\") on\n"
	       "                   /v1/* and /metrics (also $HOTSET_API_KEY)\n"
	       "  --max-queue N    requests that may wait for a sequence (default 64); past it: 503\n"
	       "                   with Retry-After\n"
	       "  --device D       cpu, sim or cuda (default: cuda when a device answers, else cpu)\n"
	       "  --mode M         where missed experts run: cpu, stream, hybrid or auto (the plan's)\n"
	       "  --ubatch N       tokens per forward step, and the prompt chunk (default 512)\n"
	       "  --threads N      CPU worker threads (default: the plan's)\n"
	       "  --alias NAME     the model's name in answers and /v1/models (default: the file name)\n"
	       "  --chat-format F  auto (the architecture's), harmony, chatml, qwen35, glm or raw\n"
	       "  --max-body B     largest request body in bytes (default 8388608); past it: 413\n"
	       "  --grace S        on SIGINT/SIGTERM, seconds running requests may take to finish\n"
	       "                   before they are cancelled (default 10)\n"
	       "  --vram-wait S    with a GPU, wait up to S seconds for the plan's memory to be free\n"
	       "                   before loading (default 600; 0: do not wait)\n"
	       "  --no-prompt-cache  free a finished request's KV cells (every prompt prefilled\n"
	       "                   whole); a request can ask the same with \"cache_prompt\": false\n"
	       "  --max-conns N    connections held at once (default --parallel + --max-queue + 64);\n"
	       "                   past it a new one is answered 503 with Retry-After and closed\n"
	       "  --max-conns-per-client N  the same from one client address (default half of\n"
	       "                   --max-conns; behind a proxy every client has its address)\n"
	       "  --header-timeout S  a request's head must arrive within S s of the connection\n"
	       "                   opening or the previous answer (default 30; slow bytes do not\n"
	       "                   extend it)\n"
	       "  --body-timeout S  its body within S s of its head (default 120)\n"
	       "  -q, --quiet      no progress and no messages on stderr\n"
	       "  -h, --help       this text\n");
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "hotset serve: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);

	if (end == s || *end || errno || v < lo || v > hi)
		return fail("%s %s: a whole number in %ld..%ld is needed", flag, s, lo, hi);
	*out = v;
	return 0;
}

static int parse_int(const char *flag, const char *s, long lo, long hi, int *out)
{
	long v;
	if (parse_long(flag, s, lo, hi, &v))
		return 1;
	*out = (int)v;
	return 0;
}

static int parse_secs(const char *flag, const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= 0 && v <= 86400))
		return fail("%s %s: seconds in 0..86400 are needed", flag, s);
	*out = v;
	return 0;
}

double hs_srv_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Request ids: a prefix and 24 letters and digits from a generator seeded
 * once from the clock and the process id (unique, not secret). */
void hs_srv_random_id(struct srv *s, const char *prefix, char *buf, size_t n)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	static uint64_t state, counter;
	char tail[25];

	pthread_mutex_lock(&s->mu);
	if (!state) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		state = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32) ^ 1;
	}
	uint64_t x = state, c = ++counter;
	for (int i = 0; i < 24; i++) {
		/* splitmix64 of the state and the counter: distinct for each id */
		uint64_t z = (x += 0x9e3779b97f4a7c15u) ^ c;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
		tail[i] = abc[(z ^ (z >> 31)) % (sizeof abc - 1)];
	}
	state = x;
	pthread_mutex_unlock(&s->mu);
	tail[24] = 0;
	snprintf(buf, n, "%s%s", prefix, tail);
}

/* The model's name: --alias, else the file name without folders. */
static void model_name(struct srv *s)
{
	const char *base = strrchr(s->o.model, '/');
	snprintf(s->model_name, sizeof s->model_name, "%s", s->o.alias ? s->o.alias : base ? base + 1 : s->o.model);
}

static int wait_state(struct srv *s, const sigset_t *sigs, int *signalled)
{
	const struct timespec tick = { 0, 200 * 1000 * 1000 };
	for (;;) {
		pthread_mutex_lock(&s->mu);
		enum srv_state st = s->state;
		pthread_mutex_unlock(&s->mu);
		if (st == SRV_FAILED || st == SRV_STOPPED)
			return st;
		int sig = sigtimedwait(sigs, NULL, &tick);
		if (sig > 0) {
			*signalled = sig;
			return st;
		}
	}
}

static int srv_loaded(struct srv *s)
{
	pthread_mutex_lock(&s->mu);
	int loaded = s->state != SRV_LOADING && s->state != SRV_WAITING_VRAM;
	pthread_mutex_unlock(&s->mu);
	return loaded;
}

static int serve(struct srv *s)
{
	sigset_t sigs;
	pthread_t sched;
	struct srv_http *d = NULL;
	int port = s->o.port, rc = 1, sig = 0;

	/* Signals go to this thread only (sigtimedwait below); the HTTP and
	 * scheduler threads inherit the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (hs_tokenizer_open(s->o.model, &s->tok))
		return fail("%s", hs_last_error());
	if (s->o.chat_format) {
		if (hs_chat_format_parse(s->o.chat_format, &s->fmt)) {
			fail("--chat-format %s: auto, harmony, chatml, qwen35, glm or raw", s->o.chat_format);
			goto out_free;
		}
	}
	if (s->fmt == HS_CHAT_AUTO)
		s->fmt = hs_chat_format_of(s->tok);
	s->eos = hs_tokenizer_eos(s->tok);
	s->eot = hs_tokenizer_eot(s->tok);
	s->n_vocab = hs_tokenizer_n_vocab(s->tok);
	model_name(s);
	snprintf(s->fingerprint, sizeof s->fingerprint, "hotset-%s", hs_version());
	s->started = (long long)time(NULL);

	if (!(d = hs_srv_http_start(s, &port)))
		goto out_free;
	printf("hotset serve: listening on http://%s%s%s:%d (model %s, %d sequences, chat format %s)\n",
	       strchr(s->o.host, ':') ? "[" : "", s->o.host, strchr(s->o.host, ':') ? "]" : "", port, s->model_name,
	       s->o.parallel, hs_chat_format_name(s->fmt));
	fflush(stdout);
	if (pthread_create(&sched, NULL, hs_srv_sched_main, s)) {
		fail("cannot start the scheduler thread");
		goto out_stop;
	}
	int st = wait_state(s, &sigs, &sig);
	if (st == SRV_FAILED) {
		fail("%s", s->state_msg);
		pthread_join(sched, NULL);
		goto out_stop;
	}
	/* a signal (or the scheduler stopped by itself): drain */
	if (!s->o.quiet && sig)
		fprintf(stderr, "hotset serve: %s: no new requests; running ones get %.0f s to finish\n",
			strsignal(sig), s->o.grace_s);
	hs_srv_http_quiesce(d);
	pthread_mutex_lock(&s->mu);
	s->stopping = 1;
	s->stop_deadline = hs_srv_now() + s->o.grace_s;
	pthread_cond_signal(&s->sched_cv);
	pthread_mutex_unlock(&s->mu);
	/* a second signal cancels at once; the scheduler ends by itself at the deadline */
	for (;;) {
		const struct timespec tick = { 0, 100 * 1000 * 1000 };
		pthread_mutex_lock(&s->mu);
		int done = s->state == SRV_STOPPED || s->state == SRV_FAILED;
		pthread_mutex_unlock(&s->mu);
		if (done)
			break;
		if (hs_srv_now() > s->stop_deadline + 1 && !srv_loaded(s)) {
			/* hs_runtime_open cannot be interrupted: do not wait for it */
			fprintf(stderr, "hotset serve: stopped while loading the model\n");
			fflush(NULL);
			_exit(0);
		}
		if (sigtimedwait(&sigs, NULL, &tick) > 0) {
			pthread_mutex_lock(&s->mu);
			s->stopping = 2;
			pthread_cond_signal(&s->sched_cv);
			pthread_mutex_unlock(&s->mu);
		}
	}
	pthread_join(sched, NULL);
	/* answers already written may still be on their way: give the HTTP
	 * side a moment to send them before connections are closed */
	for (double t0 = hs_srv_now(); hs_srv_now() - t0 < 2;) {
		pthread_mutex_lock(&s->mu);
		int busy = s->http_active;
		pthread_mutex_unlock(&s->mu);
		if (!busy)
			break;
		usleep(10000);
	}
	rc = 0;
	if (!s->o.quiet)
		fprintf(stderr, "hotset serve: stopped\n");
out_stop:
	pthread_mutex_lock(&s->mu);
	s->closing = 1;
	pthread_mutex_unlock(&s->mu);
	hs_srv_http_stop(d);
out_free:
	hs_tokenizer_free(s->tok);
	free(s->model_meta);
	return rc;
}

int hs_cmd_serve(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "model", required_argument, NULL, 'm' },    { "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' },     { "parallel", required_argument, NULL, 'P' },
		{ "ctx", required_argument, NULL, 'C' },      { "kv", required_argument, NULL, 'k' },
		{ "plan", required_argument, NULL, 'L' },     { "api-key", required_argument, NULL, 'a' },
		{ "max-queue", required_argument, NULL, 'Q' }, { "device", required_argument, NULL, 'd' },
		{ "mode", required_argument, NULL, 'M' },     { "ubatch", required_argument, NULL, 'u' },
		{ "threads", required_argument, NULL, 'j' },  { "alias", required_argument, NULL, 'A' },
		{ "chat-format", required_argument, NULL, 'F' }, { "max-body", required_argument, NULL, 'B' },
		{ "grace", required_argument, NULL, 'g' },    { "vram-wait", required_argument, NULL, 'W' },
		{ "no-prompt-cache", no_argument, NULL, 'N' },
		{ "max-conns", required_argument, NULL, 'c' }, { "max-conns-per-client", required_argument, NULL, 'e' },
		{ "header-timeout", required_argument, NULL, 't' }, { "body-timeout", required_argument, NULL, 'b' },
		{ "quiet", no_argument, NULL, 'q' },          { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct srv s; /* one server per process: the signal mask and the page are process-wide */
	long body;
	int c, api_key_flag = 0;

	memset(&s, 0, sizeof s);
	s.o = (struct srv_opts){ .host = "127.0.0.1", .port = 8080, .parallel = 2, .ubatch = 512, .max_queue = 64,
				 .kv = HS_KV_F16, .max_body = 8 << 20, .vram_wait_s = 600, .grace_s = 10,
				 .header_s = 30, .body_s = 120 };
	s.o.api_key = getenv("HOTSET_API_KEY");
	while ((c = getopt_long(argc, argv, "qh", opts, NULL)) != -1) {
		switch (c) {
		case 'm': s.o.model = optarg; break;
		case 'H': s.o.host = optarg; break;
		case 'N': s.o.no_prompt_cache = 1; break;
		case 'p': if (parse_int("--port", optarg, 0, 65535, &s.o.port)) return 1; break;
		case 'P': if (parse_int("--parallel", optarg, 1, HS_MAX_SEQ, &s.o.parallel)) return 1; break;
		case 'C': if (parse_int("--ctx", optarg, 1, 1 << 24, &s.o.ctx)) return 1; break;
		case 'Q': if (parse_int("--max-queue", optarg, 0, 1 << 20, &s.o.max_queue)) return 1; break;
		case 'u': if (parse_int("--ubatch", optarg, 1, 8192, &s.o.ubatch)) return 1; break;
		case 'j': if (parse_int("--threads", optarg, 1, 4096, &s.o.threads)) return 1; break;
		case 'B':
			if (parse_long("--max-body", optarg, 1024, 1l << 30, &body))
				return 1;
			s.o.max_body = (size_t)body;
			break;
		case 'g': if (parse_secs("--grace", optarg, &s.o.grace_s)) return 1; break;
		case 'W': if (parse_secs("--vram-wait", optarg, &s.o.vram_wait_s)) return 1; break;
		case 'k':
			if (strcmp(optarg, "f16") == 0)
				s.o.kv = HS_KV_F16;
			else if (strcmp(optarg, "q8_0") == 0)
				s.o.kv = HS_KV_Q8_0;
			else
				return fail("--kv %s: f16 or q8_0", optarg);
			break;
		case 'd':
			if (strcmp(optarg, "cpu") && strcmp(optarg, "sim") && strcmp(optarg, "cuda"))
				return fail("--device '%s': cpu, sim or cuda", optarg);
			s.o.device = optarg;
			break;
		case 'M':
			if (strcmp(optarg, "auto") && strcmp(optarg, "cpu") && strcmp(optarg, "stream") &&
			    strcmp(optarg, "hybrid"))
				return fail("--mode %s: one of auto, cpu, stream, hybrid", optarg);
			s.o.mode = optarg;
			break;
		case 'L': s.o.plan = optarg; break;
		case 'a': s.o.api_key = optarg; api_key_flag = 1; break;
		case 'c': if (parse_int("--max-conns", optarg, 1, 4096, &s.o.max_conns)) return 1; break;
		case 'e': if (parse_int("--max-conns-per-client", optarg, 1, 4096, &s.o.max_conns_client)) return 1; break;
		case 't':
			if (parse_secs("--header-timeout", optarg, &s.o.header_s) || s.o.header_s <= 0)
				return s.o.header_s <= 0 ? fail("--header-timeout %s: more than 0 s is needed", optarg) : 1;
			break;
		case 'b':
			if (parse_secs("--body-timeout", optarg, &s.o.body_s) || s.o.body_s <= 0)
				return s.o.body_s <= 0 ? fail("--body-timeout %s: more than 0 s is needed", optarg) : 1;
			break;
		case 'A': s.o.alias = optarg; break;
		case 'F': s.o.chat_format = optarg; break;
		case 'q': s.o.quiet = 1; break;
		case 'h': help(); return 0;
		default: fprintf(stderr, "Try 'hotset serve --help'.\n"); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "hotset serve: unexpected argument '%s'\nTry 'hotset serve --help'.\n", argv[optind]);
		return 2;
	}
	if (!s.o.model)
		return fail("no model: give --model FILE");
	/* an empty key (an unset variable in a script) would let everyone in */
	if (s.o.api_key && !*s.o.api_key)
		return fail("%s is empty: give a key, or leave it out to serve without one",
			    api_key_flag ? "--api-key" : "$HOTSET_API_KEY");
	if (!s.o.max_conns)
		s.o.max_conns = s.o.parallel + s.o.max_queue + 64 < 4096 ? s.o.parallel + s.o.max_queue + 64 : 4096;
	if (!s.o.max_conns_client)
		s.o.max_conns_client = s.o.max_conns / 2 > 8 ? s.o.max_conns / 2 : 8;
	if (s.o.max_conns_client > s.o.max_conns)
		s.o.max_conns_client = s.o.max_conns;
	if (!*s.o.host)
		return fail("--host '': an address is needed (127.0.0.1, ::1, 0.0.0.0 ...)");
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.sched_cv, NULL);
	pthread_cond_init(&s.state_cv, NULL);
	int rc = serve(&s);
	hs_srv_store_clear();
	pthread_cond_destroy(&s.state_cv);
	pthread_cond_destroy(&s.sched_cv);
	pthread_mutex_destroy(&s.mu);
	return rc;
}
