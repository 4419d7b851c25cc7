/* HTTP through libmicrohttpd, one thread per connection, behind the gate
 * (gate.c: connection caps, the first head checked, deadlines): routes,
 * the API key, the body cap and the memory bodies may hold, answers and
 * Server-Sent Events.  GET answers keep the connection when the client
 * asks; POST answers close it, so every body is read behind a head the
 * gate checked.  A connection's
 * thread waits for its request's output (condition variable, 200 ms at a
 * time) and looks at its socket meanwhile: a client that hung up cancels
 * its request, which frees its sequence at the scheduler's next step. */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server/server.h"

/* the order of api.c's route_names (the metrics' labels) */
enum route { R_ROOT, R_HEALTH, R_MODELS, R_CHAT, R_COMPL, R_METRICS, R_OTHER, R_MESSAGES, R_COUNT, R_RESPONSES };

static const struct {
	const char *path;
	enum route route;
	int post, auth;
} routes[] = {
	{ "/", R_ROOT, 0, 0 },
	{ "/index.html", R_ROOT, 0, 0 },
	{ "/health", R_HEALTH, 0, 0 },
	{ "/v1/health", R_HEALTH, 0, 0 },
	{ "/v1/models", R_MODELS, 0, 1 },
	{ "/models", R_MODELS, 0, 1 },
	{ "/v1/chat/completions", R_CHAT, 1, 1 },
	{ "/chat/completions", R_CHAT, 1, 1 },
	{ "/v1/completions", R_COMPL, 1, 1 },
	{ "/completions", R_COMPL, 1, 1 },
	{ "/metrics", R_METRICS, 0, 1 },
	{ "/v1/messages", R_MESSAGES, 1, 1 },
	{ "/v1/messages/count_tokens", R_COUNT, 1, 1 },
	{ "/v1/responses", R_RESPONSES, 1, 1 },
	{ "/responses", R_RESPONSES, 1, 1 },
};

struct srv_http {
	struct MHD_Daemon *d;
	struct gate *g;
};

/* the one server's (its notices and handler know only the srv) */
static struct gate *the_gate;

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* One HTTP request (MHD's con_cls). */
struct conn {
	struct srv *s;
	struct gate_conn *gc;
	int r; /* index in routes[], -1: unknown path */
	int post;
	struct sbuf body;
	size_t held;         /* bytes of srv.body_held this request holds */
	int later;           /* answered at the last call: 0, or the status (200 for a GET route) */
	char later_msg[300];
	int raw;             /* answered by the gate while the body arrived: drop the rest, then close */
	size_t discarded;
	struct srv_req *req; /* one reference while set */
	int fd;
};

static void release_body(struct conn *k);

/* The reader of a streamed answer (its own reference on the request). */
struct stream {
	struct srv *s;
	struct srv_req *req;
	int fd;
};

static int code_index(int code)
{
	for (int i = 0; i < SRV_N_CODES - 1; i++)
		if (hs_srv_http_codes[i] == code)
			return i;
	return SRV_N_CODES - 1;
}

static void count_route(struct srv *s, int r, int code)
{
	int route = r < 0 ? R_OTHER : (int)routes[r].route;
	pthread_mutex_lock(&s->mu);
	s->m.http[route][code_index(code)]++;
	pthread_mutex_unlock(&s->mu);
}

static void count(struct srv *s, struct conn *k, int code)
{
	count_route(s, k->r, code);
}

static int route_of(const char *path, size_t n)
{
	for (int i = 0; i < (int)(sizeof routes / sizeof routes[0]); i++)
		if (strlen(routes[i].path) == n && memcmp(path, routes[i].path, n) == 0)
			return i;
	return -1;
}

void hs_srv_http_count(struct srv *s, const char *target, size_t len, int code)
{
	const char *q = target ? memchr(target, '?', len) : NULL;
	count_route(s, target ? route_of(target, q ? (size_t)(q - target) : len) : -1, code);
}

/* Seconds until the server is gone, for a 503 while it stops. */
static int stop_retry(struct srv *s)
{
	pthread_mutex_lock(&s->mu);
	double left = s->stop_deadline - hs_srv_now();
	pthread_mutex_unlock(&s->mu);
	return left > 1 ? (int)left + 1 : 1;
}

/* Whether the client closed its side (or the socket broke). */
static int client_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };
	if (fd < 0)
		return 0;
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void common_headers(struct MHD_Response *resp)
{
	MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
	MHD_add_response_header(resp, "Server", "hotset");
}

/* Queues resp (MHD keeps its own reference) and counts the status. */
static enum MHD_Result queue(struct conn *k, struct MHD_Connection *c, int code, struct MHD_Response *resp)
{
	enum MHD_Result ret = MHD_queue_response(c, (unsigned)code, resp);
	MHD_destroy_response(resp);
	count(k->s, k, code);
	return ret;
}

/* 200 ms from now, for pthread_cond_timedwait */
static struct timespec soon(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 200 * 1000 * 1000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return ts;
}

static enum MHD_Result reply(struct conn *k, struct MHD_Connection *c, int code, const char *type, const char *body,
			     size_t len, int retry_after)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	char ra[16];

	if (!resp)
		return MHD_NO;
	common_headers(resp);
	if (type)
		MHD_add_response_header(resp, "Content-Type", type);
	if (retry_after > 0) {
		snprintf(ra, sizeof ra, "%d", retry_after);
		MHD_add_response_header(resp, "Retry-After", ra);
	}
	if (code == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer");
	if (k->post)
		MHD_add_response_header(resp, "Connection", "close");
	if (code == 405 && k->r >= 0)
		MHD_add_response_header(resp, "Allow", routes[k->r].post ? "POST, OPTIONS" : "GET, HEAD, OPTIONS");
	return queue(k, c, code, resp);
}

static const char ctype_json[] = "application/json; charset=utf-8";

static enum MHD_Result reply_json(struct conn *k, struct MHD_Connection *c, int code, char *body, int retry_after)
{
	if (!body)
		return reply(k, c, 500, "text/plain", "out of memory\n", 14, 0);
	enum MHD_Result ret = reply(k, c, code, ctype_json, body, strlen(body), retry_after);
	free(body);
	return ret;
}

/* An error answer: built on the stack, no allocation that could fail
 * into a 500 (libmicrohttpd copies it). */
static enum MHD_Result reply_error(struct conn *k, struct MHD_Connection *c, int code, const char *type,
				   const char *ecode, int retry_after, const char *msg)
{
	char body[2048];
	size_t n = hs_srv_error_json_buf(body, sizeof body, code, type, NULL, ecode, msg);
	return reply(k, c, code, ctype_json, body, n, retry_after);
}

/* Constant-time comparison of the bearer token with the key. */
static int authorized(struct srv *s, struct MHD_Connection *c)
{
	if (!s->o.api_key)
		return 1;
	/* OpenAI's clients send "Authorization: Bearer KEY", Anthropic's "x-api-key: KEY" */
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	if (h && strncasecmp(h, "Bearer ", 7) == 0) {
		h += 7;
		while (*h == ' ')
			h++;
	} else if (!(h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"))) {
		return 0;
	}
	size_t a = strlen(h), b = strlen(s->o.api_key);
	unsigned diff = a != b;
	for (size_t i = 0; i < a; i++)
		diff |= (unsigned char)h[i] ^ (unsigned char)s->o.api_key[i % (b ? b : 1)];
	return diff == 0;
}

static enum MHD_Result health(struct conn *k, struct MHD_Connection *c)
{
	struct srv *s = k->s;
	char msg[300];

	pthread_mutex_lock(&s->mu);
	enum srv_state st = s->state;
	int stopping = s->stopping;
	snprintf(msg, sizeof msg, "%s", s->state_msg);
	pthread_mutex_unlock(&s->mu);
	if (stopping)
		return reply_error(k, c, 503, "unavailable_error", "shutting_down", stop_retry(s),
				   "the server is shutting down");
	if (st == SRV_READY) {
		static const char ok[] = "{\"status\":\"ok\"}";
		return reply(k, c, 200, ctype_json, ok, sizeof ok - 1, 0);
	}
	return reply_error(k, c, 503, "unavailable_error", st == SRV_WAITING_VRAM ? "waiting_for_vram" : "loading", 5,
			   *msg ? msg : "loading the model");
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;
	struct srv *s = st->s;
	struct srv_req *r = st->req;

	(void)pos;
	pthread_mutex_lock(&s->mu);
	for (;;) {
		size_t avail = r->out.len - r->out_sent;
		if (avail) {
			size_t n = avail < max ? avail : max;
			memcpy(buf, r->out.p + r->out_sent, n);
			r->out_sent += n;
			if (r->out_sent == r->out.len)
				r->out.len = r->out_sent = 0;
			pthread_mutex_unlock(&s->mu);
			return (ssize_t)n;
		}
		if (r->out.err || s->closing) {
			pthread_mutex_unlock(&s->mu);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		if (r->finished) {
			pthread_mutex_unlock(&s->mu);
			return MHD_CONTENT_READER_END_OF_STREAM;
		}
		struct timespec ts = soon();
		if (pthread_cond_timedwait(&r->cv, &s->mu, &ts) == ETIMEDOUT && client_gone(st->fd)) {
			r->cancel = 1;
			pthread_cond_signal(&s->sched_cv);
			pthread_mutex_unlock(&s->mu);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
	}
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	struct srv *s = st->s;

	pthread_mutex_lock(&s->mu);
	if (!st->req->finished) {
		st->req->cancel = 1;
		pthread_cond_signal(&s->sched_cv);
	}
	hs_srv_req_unref_locked(st->req);
	pthread_mutex_unlock(&s->mu);
	free(st);
}

static enum MHD_Result start_stream(struct conn *k, struct MHD_Connection *c)
{
	struct srv *s = k->s;
	struct stream *st = malloc(sizeof *st);

	if (!st)
		return MHD_NO;
	*st = (struct stream){ s, k->req, k->fd };
	pthread_mutex_lock(&s->mu);
	k->req->refs++;
	pthread_mutex_unlock(&s->mu);
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st,
								      stream_free);
	if (!resp) {
		stream_free(st);
		return MHD_NO;
	}
	common_headers(resp);
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	MHD_add_response_header(resp, "Connection", "close");
	return queue(k, c, 200, resp);
}

/* A non-streamed answer: wait for the whole of it, watching the socket. */
static enum MHD_Result wait_whole(struct conn *k, struct MHD_Connection *c)
{
	struct srv *s = k->s;
	struct srv_req *r = k->req;

	pthread_mutex_lock(&s->mu);
	while (!r->finished && !s->closing) {
		struct timespec ts = soon();
		if (pthread_cond_timedwait(&r->cv, &s->mu, &ts) == ETIMEDOUT && !r->finished) {
			pthread_mutex_unlock(&s->mu);
			int gone = client_gone(k->fd);
			pthread_mutex_lock(&s->mu);
			if (gone && !r->finished) {
				r->cancel = 1;
				pthread_cond_signal(&s->sched_cv);
				pthread_mutex_unlock(&s->mu);
				return MHD_NO; /* nobody to answer: close */
			}
		}
	}
	if (!r->finished || r->out.err) {
		pthread_mutex_unlock(&s->mu);
		return reply_error(k, c, r->finished ? 500 : 503, r->finished ? "server_error" : "unavailable_error",
				   NULL, r->finished ? 0 : 1, r->finished ? "out of memory" : "the server is shutting down");
	}
	char *body = r->out.p;
	size_t len = r->out.len;
	int status = r->status;
	r->out.p = NULL;
	r->out.len = r->out.cap = 0;
	pthread_mutex_unlock(&s->mu);
	enum MHD_Result ret = reply(k, c, status, ctype_json, body ? body : "", len, 0);
	free(body);
	return ret;
}

static enum MHD_Result completion(struct conn *k, struct MHD_Connection *c)
{
	struct srv *s = k->s;
	int status = 0;
	char *err = NULL;

	pthread_mutex_lock(&s->mu);
	enum srv_state st = s->state;
	int stopping = s->stopping;
	pthread_mutex_unlock(&s->mu);
	if (stopping)
		return reply_error(k, c, 503, "unavailable_error", "shutting_down", stop_retry(s),
				   "the server is shutting down");
	if (st != SRV_READY)
		return reply_error(k, c, 503, "unavailable_error", st == SRV_WAITING_VRAM ? "waiting_for_vram" : "loading",
				   5, "the model is loading");
	const enum route rt = routes[k->r].route;
	const char *body = k->body.p ? k->body.p : "";
	struct srv_req *r = rt == R_MESSAGES || rt == R_COUNT
				    ? hs_srv_parse_messages(s, body, k->body.len, &status, &err)
			    : rt == R_RESPONSES ? hs_srv_parse_responses(s, body, k->body.len, &status, &err)
						: hs_srv_parse_request(s, rt == R_CHAT, body, k->body.len, &status, &err);
	release_body(k); /* what a queued request holds is its prompt, not its body */
	if (!r) {
		if (!err)
			return reply_error(k, c, 500, "server_error", NULL, 0, "out of memory");
		return reply_json(k, c, status, err, 0);
	}
	if (rt == R_COUNT) { /* the prompt's length is all it asks */
		char t[64];
		snprintf(t, sizeof t, "{\"input_tokens\":%d}", r->n_prompt);
		pthread_mutex_lock(&s->mu);
		hs_srv_req_unref_locked(r);
		pthread_mutex_unlock(&s->mu);
		char *j = strdup(t);
		return j ? reply_json(k, c, 200, j, 0) : reply_error(k, c, 500, "server_error", NULL, 0, "out of memory");
	}
	k->req = r;
	if (r->stream && r->chat) { /* the role goes out at once: headers and a first event before the prompt is read */
		hs_srv_emit_delta(s, r, HS_REPLY_CONTENT, "", 0);
		hs_srv_sbuf_add(&r->out, r->pend.p, r->pend.len);
		r->out.err |= r->pend.err;
		r->pend.len = 0;
	}
	switch (hs_srv_enqueue(s, r)) {
	case 0: break;
	case -EAGAIN: {
		pthread_mutex_lock(&s->mu);
		int after = hs_srv_retry_after(s), q = s->q_len;
		pthread_mutex_unlock(&s->mu);
		char msg[160];
		snprintf(msg, sizeof msg, "all %d sequences are busy and %d requests wait (--max-queue %d): retry later",
			 s->o.parallel, q, s->o.max_queue);
		return reply_error(k, c, 503, "unavailable_error", "queue_full", after, msg);
	}
	case -EBUSY:
		return reply_error(k, c, 503, "unavailable_error", "loading", 5, "the model is loading");
	default:
		return reply_error(k, c, 503, "unavailable_error", "shutting_down", stop_retry(s),
				   "the server is shutting down");
	}
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	k->fd = ci ? ci->connect_fd : -1;
	return r->stream ? start_stream(k, c) : wait_whole(k, c);
}

static enum MHD_Result get(struct conn *k, struct MHD_Connection *c)
{
	switch (routes[k->r].route) {
	case R_ROOT: return reply(k, c, 200, "text/html; charset=utf-8", hs_srv_chat_page, hs_srv_chat_page_len, 0);
	case R_HEALTH: return health(k, c);
	case R_MODELS: return reply_json(k, c, 200, hs_srv_models_json(k->s), 0);
	case R_METRICS: {
		char *t = hs_srv_metrics_text(k->s);
		if (!t)
			return reply(k, c, 500, "text/plain", "out of memory\n", 14, 0);
		enum MHD_Result ret = reply(k, c, 200, "text/plain; version=0.0.4; charset=utf-8", t, strlen(t), 0);
		free(t);
		return ret;
	}
	default: return MHD_NO;
	}
}

/* Bodies held at once, over all connections, stay under 4 x --max-body:
 * parsing one costs a few times its size, so this bounds the memory of
 * requests being read whatever the number of connections. */
static int hold_body(struct conn *k, size_t n)
{
	struct srv *s = k->s;
	int ok;
	pthread_mutex_lock(&s->mu);
	ok = s->body_held + n <= 4 * s->o.max_body;
	if (ok) {
		s->body_held += n;
		k->held += n;
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

static void release_body(struct conn *k)
{
	pthread_mutex_lock(&k->s->mu);
	k->s->body_held -= k->held;
	pthread_mutex_unlock(&k->s->mu);
	k->held = 0;
	hs_srv_sbuf_free(&k->body);
}

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	(void)value;
	*(int *)cls += strcasecmp(key, "Content-Length") == 0;
	return MHD_YES;
}

/* Answered at the last call, once any body is read: a GET on a kept
 * connection gets its answer and the connection stays. */
static enum MHD_Result answer_later(struct conn *k, struct MHD_Connection *c)
{
	switch (k->later) {
	case 200: return get(k, c);
	case 204: {
		struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
		if (!resp)
			return MHD_NO;
		common_headers(resp);
		MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
		MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
		MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
		return queue(k, c, 204, resp);
	}
	case 401:
		return reply_error(k, c, 401, "authentication_error", "invalid_api_key", 0, k->later_msg);
	case 404: return reply_error(k, c, 404, "invalid_request_error", "not_found", 0, k->later_msg);
	case 405: return reply_error(k, c, 405, "invalid_request_error", "method_not_allowed", 0, k->later_msg);
	default: return reply_error(k, c, k->later, "invalid_request_error", "bad_request", 0, k->later_msg);
	}
}

/* The body grows to what it needs, never past --max-body (+ its NUL). */
static int add_body(struct conn *k, const char *p, size_t n)
{
	size_t max = k->s->o.max_body;
	if (k->body.len + n + 1 > k->body.cap) {
		size_t cap = k->body.cap ? k->body.cap * 2 : 16384;
		while (cap < k->body.len + n + 1)
			cap *= 2;
		if (cap > max + 1)
			cap = max + 1;
		char *q = realloc(k->body.p, cap);
		if (!q)
			return -1;
		k->body.p = q;
		k->body.cap = cap;
	}
	hs_srv_sbuf_add(&k->body, p, n);
	return k->body.err ? -1 : 0;
}

/* An answer while the body still arrives (libmicrohttpd cannot queue one
 * then): the gate writes it; the rest of the body is dropped. */
static enum MHD_Result answer_raw(struct conn *k, int code, const char *ecode, int retry_after, const char *msg)
{
	char body[1024];
	size_t n = hs_srv_error_json_buf(body, sizeof body, code, code == 503 ? "unavailable_error" : "invalid_request_error",
					 NULL, ecode, msg);
	k->raw = 1;
	release_body(k);
	count(k->s, k, code);
	return hs_srv_gate_answer(the_gate, k->gc, code, body, n, retry_after) ? MHD_NO : MHD_YES;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			       const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct srv *s = cls;
	struct conn *k = *con_cls;

	(void)version;
	if (!k) { /* headers are in */
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
		if (!(k = calloc(1, sizeof *k)))
			return MHD_NO;
		k->s = s;
		k->gc = ci ? ci->socket_context : NULL;
		k->r = route_of(url, strlen(url));
		k->fd = -1;
		*con_cls = k;
		pthread_mutex_lock(&s->mu);
		s->http_active++;
		pthread_mutex_unlock(&s->mu);
		k->post = strcmp(method, "POST") == 0;
		int get_ = !strcmp(method, "GET") || !strcmp(method, "HEAD"), lengths = 0;
		hs_srv_gate_phase(the_gate, k->gc, k->post ? GATE_BODY : GATE_ANSWER);
		MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, &lengths);
		if (lengths > 1) { /* the gate refuses it on a first request; this is a later one */
			k->post = 1; /* close after: the body's end is unknown */
			return reply_error(k, c, 400, "invalid_request_error", "bad_request", 0, "two Content-Length headers");
		}
		if (strcmp(method, "OPTIONS") == 0) { /* CORS preflight */
			k->later = 204;
		} else if (k->r < 0) {
			k->later = 404;
			snprintf(k->later_msg, sizeof k->later_msg,
				 "no route %.200s (see GET /v1/models, POST /v1/chat/completions)", url);
		} else if (routes[k->r].post ? !k->post : !get_) {
			k->later = 405;
			snprintf(k->later_msg, sizeof k->later_msg, "%.20s %s: use %s", method, routes[k->r].path,
				 routes[k->r].post ? "POST" : "GET");
		} else if (routes[k->r].auth && !authorized(s, c)) {
			k->later = 401;
			snprintf(k->later_msg, sizeof k->later_msg,
				 "a valid API key is needed: \"Authorization: Bearer KEY\" or \"x-api-key: KEY\"");
		} else if (!k->post) {
			k->later = 200;
		}
		if (k->later)
			return MHD_YES;
		const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
		unsigned long long n = cl ? strtoull(cl, NULL, 10) : 0;
		if (n > s->o.max_body) {
			char msg[160];
			snprintf(msg, sizeof msg, "the body is %.20s bytes, more than %zu (--max-body)", cl, s->o.max_body);
			return reply_error(k, c, 413, "invalid_request_error", "body_too_large", 0, msg);
		}
		if (!hold_body(k, (size_t)n))
			return reply_error(k, c, 503, "unavailable_error", "busy_reading", 1,
					   "other requests' bodies fill the memory for bodies (4 x --max-body): retry later");
		if (n && !(k->body.p = malloc((size_t)n + 1)))
			return reply_error(k, c, 500, "server_error", NULL, 0, "out of memory");
		k->body.cap = n ? (size_t)n + 1 : 0;
		return MHD_YES;
	}
	if (*upload_size) { /* a piece of the body (chunked bodies have no Content-Length) */
		size_t n = *upload_size;
		*upload_size = 0;
		if (k->raw || k->later) { /* answered, or answered at the end: read and drop */
			k->discarded += n;
			return k->later && k->discarded > k->s->o.max_body ? MHD_NO : MHD_YES;
		}
		if (k->body.len + n > s->o.max_body) {
			char msg[160];
			snprintf(msg, sizeof msg, "the body is more than %zu bytes (--max-body)", s->o.max_body);
			return answer_raw(k, 413, "body_too_large", 0, msg);
		}
		if (k->body.len + n > k->held && !hold_body(k, k->body.len + n - k->held))
			return answer_raw(k, 503, "busy_reading", 1,
					  "other requests' bodies fill the memory for bodies (4 x --max-body): retry later");
		return add_body(k, upload, n) ? MHD_NO : MHD_YES;
	}
	if (k->req) /* called again after the answer was queued */
		return MHD_YES;
	if (k->raw)
		return MHD_NO;
	hs_srv_gate_phase(the_gate, k->gc, GATE_ANSWER);
	if (k->later)
		return answer_later(k, c);
	return completion(k, c);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct srv *s = cls;
	struct conn *k = *con_cls;

	(void)c;
	(void)toe;
	if (!k)
		return;
	pthread_mutex_lock(&s->mu);
	if (k->req) {
		if (!k->req->finished) {
			k->req->cancel = 1;
			pthread_cond_signal(&s->sched_cv);
		}
		hs_srv_req_unref_locked(k->req);
	}
	s->http_active--;
	pthread_mutex_unlock(&s->mu);
	release_body(k);
	/* a kept connection: the next head has --header-timeout from now */
	hs_srv_gate_phase(the_gate, k->gc, GATE_IDLE);
	free(k);
	*con_cls = NULL;
}

static void notify(void *cls, struct MHD_Connection *c, void **socket_context, enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	(void)cls;
	hs_srv_gate_notify(the_gate, ci ? ci->connect_fd : -1, socket_context, code == MHD_CONNECTION_NOTIFY_CLOSED);
}

/* %XX decoded in the path, except %00: a path holding it matches no route. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *uri)
{
	char *w = uri;
	(void)cls;
	(void)c;
	for (const char *r = uri; *r;) {
		int hi, lo;
		if (r[0] == '%' && (hi = hexval(r[1])) >= 0 && (lo = hexval(r[2])) >= 0 && (hi | lo)) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = 0;
	return (size_t)(w - uri);
}

/* The listening socket, made here so that a busy port or a bad address
 * gets a clear message. */
static int listen_on(const char *host, int port, int *bound, int *v6)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE };
	struct addrinfo *ai = NULL;
	char ps[16];
	int fd = -1, one = 1;

	snprintf(ps, sizeof ps, "%d", port);
	int g = getaddrinfo(host, ps, &hints, &ai);
	if (g) {
		fprintf(stderr, "hotset serve: --host %s: %s\n", host, gai_strerror(g));
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 256)) {
		fprintf(stderr, "hotset serve: cannot listen on %s port %d: %s\n", host, port, strerror(errno));
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		return -1;
	}
	*v6 = ai->ai_family == AF_INET6;
	freeaddrinfo(ai);
	struct sockaddr_storage sa;
	socklen_t sl = sizeof sa;
	*bound = port;
	if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		*bound = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
							: ((struct sockaddr_in *)&sa)->sin_port);
	return fd;
}

struct srv_http *hs_srv_http_start(struct srv *s, int *port)
{
	int v6 = 0, fd = listen_on(s->o.host, s->o.port, port, &v6);
	struct srv_http *h = calloc(1, sizeof *h);
	if (fd < 0 || !h) {
		if (fd >= 0)
			close(fd);
		free(h);
		return NULL;
	}
	/* the gate accepts; libmicrohttpd gets the connections it lets in */
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
			 MHD_USE_NO_LISTEN_SOCKET;
	/* above the gate's own caps (+ the lingering refusals): libmicrohttpd's own refusal is a silent close */
	unsigned limit = (unsigned)s->o.max_conns + 128;
	h->d = MHD_start_daemon(flags, 0, NULL, NULL, handler, s, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
				MHD_OPTION_NOTIFY_CONNECTION, notify, s, MHD_OPTION_UNESCAPE_CALLBACK, unescape, s,
				MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60,
				MHD_OPTION_THREAD_STACK_SIZE, (size_t)(1 << 20), MHD_OPTION_END);
	if (!h->d) {
		fprintf(stderr, "hotset serve: libmicrohttpd could not start on %s port %d\n", s->o.host, *port);
		close(fd);
		free(h);
		return NULL;
	}
	if (!(h->g = the_gate = hs_srv_gate_start(s, fd, h->d))) {
		fprintf(stderr, "hotset serve: cannot start the connection thread\n");
		MHD_stop_daemon(h->d);
		close(fd);
		free(h);
		return NULL;
	}
	return h;
}

void hs_srv_http_quiesce(struct srv_http *h)
{
	hs_srv_gate_quiesce(h->g);
}

void hs_srv_http_stop(struct srv_http *h)
{
	if (!h)
		return;
	hs_srv_gate_stop(h->g);
	MHD_stop_daemon(h->d);
	hs_srv_gate_free(h->g);
	the_gate = NULL;
	free(h);
}
