/* `hotset serve`: an OpenAI-compatible HTTP server over one runtime and
 * one context.  A client of hotset.h only (it is not part of libhotset).
 *
 * Threads: libmicrohttpd runs one thread per connection; those threads
 * parse and check requests (the tokenizer may be used from any thread),
 * put them in the queue and stream what the scheduler writes.  One
 * scheduler thread owns the runtime and the context (neither is
 * thread-safe): it loads the model, admits queued requests into free
 * sequences, decodes every running sequence in one hs_decode per step and
 * prefills new prompts in chunks between steps.  They meet under one
 * mutex (struct srv.mu); each request has its own condition variable. */
#ifndef HS_SERVER_H
#define HS_SERVER_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hotset.h"

/* A growing byte buffer; a failed allocation sets err and later appends
 * do nothing (checked once at the end). */
/* Tool calls kept from one reply; later ones are dropped. */
#define SRV_MAX_CALLS 16
#define SRV_TOP_LOGPROBS 20 /* top_logprobs at most, as OpenAI */

enum srv_api { SRV_API_OPENAI, SRV_API_MESSAGES /* Anthropic's /v1/messages */, SRV_API_RESPONSES /* /v1/responses */ };
#define SRV_MAX_ITEMS 16 /* Responses stream: output items kept for the final response */

/* One generated token's log-probability and its alternatives (logprobs). */
struct srv_lp {
	int32_t id;
	float lp;
	int content; /* its text went to the answer's content */
	int32_t top_id[SRV_TOP_LOGPROBS];
	float top_lp[SRV_TOP_LOGPROBS];
};

struct sbuf {
	char *p;
	size_t len, cap;
	int err;
};
void hs_srv_sbuf_add(struct sbuf *b, const char *s, size_t n);
void hs_srv_sbuf_addf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hs_srv_sbuf_free(struct sbuf *b);

struct srv_opts {
	const char *model, *host, *plan, *api_key, *device, *mode, *alias, *chat_format;
	int port, parallel, ctx, ubatch, threads, max_queue, quiet;
	int no_prompt_cache;  /* 1: a finished request's KV cells are freed, not kept for the next prompt */
	enum hs_kv_type kv;
	size_t max_body;
	double vram_wait_s, grace_s;
	int max_conns, max_conns_client; /* connections held at once, in all and from one address */
	double header_s, body_s;         /* a request's head, then its body, must arrive within these */
};

/* RQ_FORK: a choice of n > 1 waiting for the first choice's prompt, whose
 * KV cells it copies (hs_context_seq_cp) once they are computed */
enum req_state { RQ_QUEUED, RQ_PREFILL, RQ_FORK, RQ_DECODE, RQ_DONE };

/* One completion request.  The HTTP thread fills the first part and puts
 * it in the queue; the scheduler owns the middle part; `out`, `finished`,
 * `cancel` and `refs` are shared under srv.mu. */
struct srv_req {
	/* ---- set before it is queued, read-only after */
	int chat, stream, include_usage, return_tokens, ignore_eos;
	enum srv_api api;     /* the shape of the answer */
	int cache_prompt;     /* may start from a finished request's cells (default 1) */
	int lp_on, lp_top;    /* logprobs asked; alternatives per token */
	int32_t *prompt;
	int n_prompt, max_tokens;
	struct hs_sampler_params sp;
	char *stop[16];
	int n_stop;
	char id[48];
	long long created;
	double t_queued;
	int n_choices;        /* n: the choices asked (1: none but this) */
	hs_grammar **grammars; /* n > 1 with a grammar: choices 1..n-1's own (n - 1), until admitted */
	/* ---- the scheduler's */
	/* n > 1: the first choice leads (the HTTP side's request: its `out`
	 * gets every choice's output); the others are made at admission, each
	 * with its own sampler and grammar, and hold a reference to it */
	struct srv_req *lead;   /* a choice of n > 1 after the first: the first, else NULL */
	struct srv_req **group; /* the lead's: its n choices in order (group[0] is itself) */
	int choice;             /* this choice's index */
	int forked;             /* its prompt's cells were copied from the lead's, not computed */
	json_t *choice_obj;     /* n > 1, not streamed: this choice of the answer, once it ends */
	enum req_state state;
	int slot, n_past, n_gen;
	int n_cached;         /* prompt tokens whose KV cells an earlier request left */
	int ckpt_at;          /* recurrent models: the prefill pauses here (the last turn's start),
				 where the context checkpoints the states for the next turn (0: none) */
	int32_t last, *gen;
	hs_sampler *smp;
	hs_grammar *grammar;  /* what the reply must hold to (constrain.c), or NULL */
	hs_reply_parser *rp;
	hs_detok *dt;
	struct sbuf content, reasoning, held; /* held: content kept back while a stop string may start */
	struct sbuf tool[SRV_MAX_CALLS];      /* each tool call's arguments */
	int tool_head[SRV_MAX_CALLS];         /* streamed: its first chunk (id, name) is out */
	size_t tool_sent[SRV_MAX_CALLS];      /* streamed: argument bytes out */
	int n_tool;                           /* calls in tool[] (the parser's indexes below the cap) */
	struct srv_lp *lp;    /* logprobs: one per generated token (lp_n of lp_cap); */
	int lp_n, lp_cap;     /* from lp_pend on, not yet known to be content or not; */
	int lp_pend, lp_sent; /* lp_sent..lp_pend-1 go in the next streamed chunk */
	long lp_chars;        /* completions: characters of the content tokens so far (text_offset) */
	struct sbuf pend;     /* written this step, handed to `out` under srv.mu after it */
	int role_sent, stopped_by_string;
	int stop_hit;         /* the stop string that ended it (stopped_by_string) */
	int block, n_blocks;  /* Messages/Responses stream: the open block's or item's kind (0: none,
				 1 reasoning, 2 text, 3 a Messages tool_use), blocks or items so far */
	size_t item_off;      /* Responses stream: where the open item's text starts in content/reasoning */
	long seq_no;          /* Responses stream: the next event's sequence_number */
	json_t *items[SRV_MAX_ITEMS]; /* Responses stream: the closed items, for the final response */
	json_t *conv;         /* Responses: the conversation so far, kept with the answer when it ends */
	int n_items;
	int fin, fin_status;  /* ended (the HTTP side learns it after the step) */
	const char *reason;   /* finish_reason */
	double t_prompt0, t_prompt1, t_end;
	struct srv_req *next; /* queue link */
	/* ---- shared under srv.mu */
	struct sbuf out;      /* stream: SSE bytes not yet sent; else the whole body once finished */
	size_t out_sent;
	int finished, status; /* status: the HTTP status of a non-streamed answer */
	int cancel;           /* the client went away: the scheduler drops it */
	int refs;
	pthread_cond_t cv;
};

enum srv_state { SRV_LOADING, SRV_WAITING_VRAM, SRV_READY, SRV_FAILED, SRV_STOPPED };

/* Counters for /metrics (under srv.mu). */
#define SRV_N_ROUTES 10
#define SRV_N_CODES 16
extern const int hs_srv_http_codes[SRV_N_CODES]; /* the statuses counted; 0: other */
struct srv_metrics {
	long http[SRV_N_ROUTES][SRV_N_CODES];
	long prompt_tokens, completion_tokens, prompt_tokens_cached;
	long prompt_tokens_forked; /* n > 1: prompt tokens whose cells a choice copied from the first */
	long finished_stop, finished_length, finished_tool, cancelled, failed;
	/* a snapshot the scheduler refreshes after each step */
	long kv_cells_used, kv_cells_total; /* used: by running requests */
	long kv_cells_cached;               /* kept by idle sequences for a prompt that starts alike */
	uint64_t kv_bytes;
	long ctx_prompt_tokens, ctx_decode_tokens;
	double ctx_prompt_s, ctx_decode_s;
	double moe_hit_share;
	long moe_pairs;
	int busy;
	double service_s_avg; /* mean time a request holds a slot (Retry-After) */
};

struct srv {
	struct srv_opts o;
	hs_tokenizer *tok;
	enum hs_chat_format fmt;
	int32_t eos, eot;
	int n_vocab, n_ctx;
	char model_name[256];
	char *model_meta;       /* /v1/models "meta" object as JSON text, once loaded */
	pthread_mutex_t mu;
	pthread_cond_t sched_cv; /* wakes the scheduler: new request, cancel, stop */
	pthread_cond_t state_cv; /* the main thread waits here for load / end */
	enum srv_state state;
	char state_msg[256];     /* loading / VRAM wait progress, or the load error */
	struct srv_req *q_head, *q_tail;
	int q_len;
	int stopping;            /* 1: drain (finish running requests), 2: cancel them now */
	double stop_deadline;
	int closing;             /* the HTTP side stops waiting */
	size_t body_held;        /* request body bytes held by connections (at most 4 x --max-body) */
	int http_active;         /* requests the HTTP side holds */
	struct srv_metrics m;
	long long started;
	char fingerprint[64];
};

/* serve.c */
int hs_cmd_serve(int argc, char **argv);
double hs_srv_now(void);
void hs_srv_random_id(struct srv *s, const char *prefix, char *buf, size_t n);

/* load.c: waits for GPU memory, opens the runtime and the context
 * (state READY), or sets state FAILED/STOPPED with the message. */
int hs_srv_load(struct srv *s, hs_runtime **rt, hs_context **ctx);
void hs_srv_set_state(struct srv *s, enum srv_state st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* sched.c: the scheduler thread (loads the model first) */
void *hs_srv_sched_main(void *arg);
/* Puts r in the queue; 0, or -EAGAIN when the queue is full, -ESHUTDOWN
 * while stopping, -EBUSY while loading.  Takes a reference for the
 * scheduler on success.  Called without srv.mu held. */
int hs_srv_enqueue(struct srv *s, struct srv_req *r);
/* Drops one reference (under srv.mu); frees r at zero. */
void hs_srv_req_unref_locked(struct srv_req *r);
struct srv_req *hs_srv_req_new(void);
/* Seconds a client should wait before retrying (queue full). */
int hs_srv_retry_after(struct srv *s);

/* api.c: JSON out */
/* An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}. */
char *hs_srv_error_json(int status, const char *type, const char *param, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
char *hs_srv_error_json_v(int status, const char *type, const char *param, const char *code, const char *fmt,
			  va_list ap);
/* The error body into buf (cap bytes, at least 256): the message cut on a
 * character boundary, bytes that are not UTF-8 as U+FFFD; allocates
 * nothing.  Returns its length. */
size_t hs_srv_error_json_buf(char *buf, size_t cap, int status, const char *type, const char *param,
			     const char *code, const char *msg);
/* request.c: requests in.  Parses and checks a /v1/chat/completions (chat = 1) or /v1/completions
 * body into a new request; on bad input returns NULL with *status (400)
 * and *err (an error body, malloc'd). */
struct srv_req *hs_srv_parse_request(struct srv *s, int chat, const char *body, size_t len, int *status, char **err);
/* The same from a parsed body (root is the caller's). */
struct srv_req *hs_srv_parse_json(struct srv *s, int chat, json_t *root, int *status, char **err);
/* A body of another API rewritten as a chat request: its errors (the
 * first one wins, a 400 naming param with request.c's codes; NULL code:
 * out of memory). */
struct srv_err {
	int status;
	char *body;
};
/* The grammar the request's reply must follow, when it asks for one
 * (response_format json_object / json_schema, `grammar`, `json_schema`,
 * tool_choice "required" or a named function): compiled into r->grammar
 * for the chat format, after the prompt (its end says whether the reply
 * begins inside a think block).  0, or -1 with a 400 in e. */
int hs_srv_constrain(struct srv *s, json_t *root, struct srv_req *r, struct srv_err *e);
json_t *hs_srv_fail(struct srv_err *e, const char *param, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Text joined by newlines (new reference): c a string (or null: ""), or an
 * array of parts whose "type" is one of types (NULL-terminated) and whose
 * "text" is a string; else NULL with a 400 naming where. */
json_t *hs_srv_join_text(json_t *c, const char *const *types, const char *param, const char *where, struct srv_err *e);
/* Tools of another API ({"type", "name", "description", schema_key}) as
 * chat's, set on chat: type must be type_needed (or absent, with
 * type_optional).  0, or -1 with a 400 naming tools[i]. */
int hs_srv_convert_tools(json_t *chat, json_t *v, const char *type_needed, int type_optional, const char *schema_key,
			 struct srv_err *e);
/* Parses body, rewrites it with to_chat, checks it as a chat request and
 * marks it as answered in api's shape (its id: id_prefix + random). */
struct srv_req *hs_srv_parse_other(struct srv *s, const char *body, size_t len,
				   json_t *(*to_chat)(json_t *root, struct srv_err *e), enum srv_api api,
				   const char *id_prefix, int *status, char **err);
/* messages.c: a /v1/messages body (Anthropic) as the chat request it asks
 * for, answered in that API's shape; for /v1/messages/count_tokens too. */
struct srv_req *hs_srv_parse_messages(struct srv *s, const char *body, size_t len, int *status, char **err);
/* store.c: finished Responses for previous_response_id (the last 32, for
 * 10 minutes): put takes a copy of conv; get gives a new reference or NULL. */
void hs_srv_store_put(const char *id, json_t *conv);
json_t *hs_srv_store_get(const char *id);
void hs_srv_store_clear(void);
/* responses.c: a /v1/responses body (OpenAI's Responses API) the same way. */
struct srv_req *hs_srv_parse_responses(struct srv *s, const char *body, size_t len, int *status, char **err);
/* The JSON texts the scheduler writes: stream chunks and whole answers. */
void hs_srv_emit_delta(struct srv *s, struct srv_req *r, enum hs_reply_kind kind, const char *text, size_t len);
/* Text of tool call index (the parser's tool_index): kept for the end; a
 * call at index SRV_MAX_CALLS or beyond is dropped. */
void hs_srv_add_tool(struct srv *s, struct srv_req *r, int index, const char *text, size_t len);
void hs_srv_free_tools(struct srv_req *r);
void hs_srv_emit_finish(struct srv *s, struct srv_req *r, const char *reason);
void hs_srv_emit_error(struct srv *s, struct srv_req *r, int status, const char *type, const char *msg);
/* n > 1: the lead's answer once every choice ended well (the choices in
 * one body, or the stream's usage and [DONE]); usage sums the choices'
 * tokens, the prompt counted once. */
void hs_srv_emit_group_end(struct srv *s, struct srv_req *lead);
char *hs_srv_models_json(struct srv *s);
char *hs_srv_metrics_text(struct srv *s);

/* head.c: a request head (bytes peeked from the socket) checked before
 * libmicrohttpd reads it.  Returns 0 with head_len 0 while it is
 * unfinished and could still be good, 0 with head_len set when complete
 * and good, or the status to answer (400, 413, 431, 501, 505) with msg. */
#define SRV_HEAD_MAX 16384
struct srv_head {
	size_t head_len, method_len, target_off, target_len;
	int has_length, chunked, status;
	unsigned long long length;
	char msg[160];
};
int hs_srv_head_check(const char *buf, size_t n, size_t max_body, struct srv_head *h);

/* gate.c: the accept loop in front of libmicrohttpd: connection caps,
 * the first request head checked (head.c), deadlines a trickle does not
 * move.  A connection's phase says which deadline runs. */
struct MHD_Daemon;
enum gate_phase { GATE_IDLE, GATE_BODY, GATE_ANSWER };
struct gate;
struct gate_conn;
struct gate *hs_srv_gate_start(struct srv *s, int lfd, struct MHD_Daemon *d);
void hs_srv_gate_quiesce(struct gate *g); /* stops accepting, closes the listening socket */
void hs_srv_gate_stop(struct gate *g);    /* ends the thread, closes what it still holds */
void hs_srv_gate_free(struct gate *g);    /* after libmicrohttpd stopped */
/* libmicrohttpd's connection notices (MHD_OPTION_NOTIFY_CONNECTION) */
void hs_srv_gate_notify(struct gate *g, int fd, void **socket_context, int closed);
void hs_srv_gate_phase(struct gate *g, struct gate_conn *c, enum gate_phase ph);
/* Writes a whole answer to the client itself (libmicrohttpd is reading
 * the body and writes nothing) and stops the connection's input: for a
 * body that turns out too large while it arrives.  0, or -1 when gone. */
int hs_srv_gate_answer(struct gate *g, struct gate_conn *c, int status, const char *body, size_t len,
		       int retry_after);
/* An HTTP answer with a JSON body into buf (status line to body),
 * Connection: close; its length. */
size_t hs_srv_gate_format(char *buf, size_t cap, int status, const char *body, size_t len, int retry_after);

/* http.c */
struct srv_http;
struct srv_http *hs_srv_http_start(struct srv *s, int *port);
void hs_srv_http_quiesce(struct srv_http *h);
void hs_srv_http_stop(struct srv_http *h);
/* counts an answer the gate gave (route from the request target) */
void hs_srv_http_count(struct srv *s, const char *target, size_t len, int code);

/* the chat page (chat-page.c, made from server/chat.html at build time) */
extern const char hs_srv_chat_page[];
extern const size_t hs_srv_chat_page_len;

#endif
