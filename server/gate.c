/* The gate: one thread in front of libmicrohttpd that accepts every
 * connection, as a careful reverse proxy would.
 *
 * * Caps: at most --max-conns connections at once, --max-conns-per-client
 *   from one address; past either a new connection is answered 503 with
 *   Retry-After at once and closed (never a silent close).
 * * The first request's head is peeked (MSG_PEEK: libmicrohttpd still
 *   reads every byte) and checked (head.c); a bad one is answered
 *   400/413/431/501/505 at once, a good one handed to libmicrohttpd
 *   (MHD_add_connection).
 * * Deadlines that slow bytes do not move: a head must be in within
 *   --header-timeout of the connection opening or the previous answer, a
 *   body within --body-timeout of its head.  Past one the client gets 408
 *   and the socket is shut down (libmicrohttpd then closes it).
 * Refused and cut connections are closed lingering: their answer sent, the
 * write side shut, what the client still sends read and dropped for up to
 * 2 s, so that its kernel does not reset the connection over the answer. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "server/server.h"

#define LINGER_MAX 64  /* refused connections drained at once; past it they are closed at once */
#define LINGER_S 2.0

enum gate_state { G_FREE, G_HEAD, G_MHD, G_LINGER };

struct gate_conn {
	int fd;
	enum gate_state state;
	enum gate_phase phase; /* G_MHD: which deadline runs */
	int started;           /* G_MHD: libmicrohttpd's notice came (the fd is its own until closed) */
	int answered;          /* G_MHD: the gate wrote the answer (hs_srv_gate_answer): no 408 after it */
	double deadline;       /* 0: none */
	struct sockaddr_storage addr;
	socklen_t alen;
};

struct gate {
	struct srv *s;
	struct MHD_Daemon *d;
	int lfd, wake[2];
	int stop, quiesce, n_linger;
	pthread_t th;
	pthread_mutex_t mu;
	int n;
	struct gate_conn *c;
	struct pollfd *pfd;
	int *pidx;
	char head[SRV_HEAD_MAX];
};

static const char *reason(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 431: return "Request Header Fields Too Large";
	case 501: return "Not Implemented";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

size_t hs_srv_gate_format(char *buf, size_t cap, int status, const char *body, size_t len, int retry_after)
{
	char ra[40] = "";
	if (retry_after > 0)
		snprintf(ra, sizeof ra, "Retry-After: %d\r\n", retry_after);
	int n = snprintf(buf, cap,
			 "HTTP/1.1 %d %s\r\nServer: hotset\r\nAccess-Control-Allow-Origin: *\r\n"
			 "Content-Type: application/json; charset=utf-8\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
			 status, reason(status), len, ra);
	if (n < 0 || (size_t)n + len > cap)
		return 0;
	memcpy(buf + n, body, len);
	return (size_t)n + len;
}

static double now(void)
{
	return hs_srv_now();
}

/* One write of a small answer on a fresh socket (its send buffer is empty). */
static void send_answer(int fd, int status, const char *type, const char *code, const char *msg, int retry_after)
{
	char body[2048], out[2600];
	size_t n = hs_srv_error_json_buf(body, sizeof body, status, type, NULL, code, msg);
	size_t m = hs_srv_gate_format(out, sizeof out, status, body, n, retry_after);
	if (m && send(fd, out, m, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		/* the client is gone already: nothing to tell it */
	}
}

static struct gate_conn *free_slot(struct gate *g)
{
	for (int i = 0; i < g->n; i++)
		if (g->c[i].state == G_FREE)
			return &g->c[i];
	return NULL;
}

/* Closes fd after its answer: lingering when a slot is free. */
static void linger(struct gate *g, struct gate_conn *c, int fd)
{
	shutdown(fd, SHUT_WR);
	if (!c && g->n_linger < LINGER_MAX)
		c = free_slot(g);
	if (!c || (c->state != G_LINGER && g->n_linger >= LINGER_MAX)) {
		close(fd);
		if (c)
			c->state = G_FREE;
		return;
	}
	if (c->state != G_LINGER)
		g->n_linger++;
	c->fd = fd;
	c->state = G_LINGER;
	c->deadline = now() + LINGER_S;
}

static int same_addr(const struct gate_conn *a, const struct sockaddr_storage *b)
{
	if (a->addr.ss_family != b->ss_family)
		return 0;
	if (b->ss_family == AF_INET)
		return !memcmp(&((const struct sockaddr_in *)&a->addr)->sin_addr, &((const struct sockaddr_in *)b)->sin_addr,
			       sizeof(struct in_addr));
	if (b->ss_family == AF_INET6)
		return !memcmp(&((const struct sockaddr_in6 *)&a->addr)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr));
	return 1;
}

/* A new connection: within the caps it waits for its head, else 503. */
static void admit(struct gate *g, int fd, const struct sockaddr_storage *sa, socklen_t sl)
{
	struct srv *s = g->s;
	int total = 0, same = 0;
	char msg[160];

	for (int i = 0; i < g->n; i++)
		if (g->c[i].state == G_HEAD || g->c[i].state == G_MHD) {
			total++;
			same += same_addr(&g->c[i], sa);
		}
	if (total >= s->o.max_conns || same >= s->o.max_conns_client) {
		if (total >= s->o.max_conns)
			snprintf(msg, sizeof msg, "the server holds %d connections (--max-conns %d): retry later", total,
				 s->o.max_conns);
		else
			snprintf(msg, sizeof msg,
				 "this client holds %d connections (--max-conns-per-client %d): retry later", same,
				 s->o.max_conns_client);
		pthread_mutex_lock(&s->mu);
		int after = hs_srv_retry_after(s); /* as for a full queue: when a sequence is likely free */
		pthread_mutex_unlock(&s->mu);
		send_answer(fd, 503, "unavailable_error", "too_many_connections", msg, after);
		hs_srv_http_count(s, NULL, 0, 503);
		linger(g, NULL, fd);
		return;
	}
	struct gate_conn *c = free_slot(g);
	if (!c) { /* cannot happen: slots are --max-conns + the lingering ones */
		close(fd);
		return;
	}
	*c = (struct gate_conn){ .fd = fd, .state = G_HEAD, .deadline = now() + s->o.header_s, .alen = sl };
	memcpy(&c->addr, sa, sl);
}

/* Bytes arrived on a connection whose first head is not complete yet
 * (or its client shut its side: `ended`). */
static void peek_head(struct gate *g, struct gate_conn *c, int ended)
{
	struct srv_head h;
	ssize_t n = recv(c->fd, g->head, sizeof g->head, MSG_PEEK | MSG_DONTWAIT);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return;
	if (n <= 0) { /* closed before a request */
		close(c->fd);
		c->state = G_FREE;
		return;
	}
	if (hs_srv_head_check(g->head, (size_t)n, g->s->o.max_body, &h)) {
		const char *code = h.status == 413 ? "body_too_large" : h.status == 501 ? "not_implemented" : "bad_request";
		send_answer(c->fd, h.status, "invalid_request_error", code, h.msg, 0);
		hs_srv_http_count(g->s, h.target_len ? g->head + h.target_off : NULL, h.target_len, h.status);
		linger(g, c, c->fd);
		return;
	}
	if (!h.head_len) {
		if (ended) { /* no more bytes will come: the head stays unfinished */
			close(c->fd);
			c->state = G_FREE;
			return;
		}
		/* peeked bytes stay readable: poll says "readable" again only
		 * once more than these have arrived (or the client ends) */
		int low = (int)n + 1;
		setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &low, sizeof low);
		return;
	}
	int one = 1;
	setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
	/* a good head: libmicrohttpd takes the connection (and reads it) */
	c->state = G_MHD;
	c->started = 0;
	c->phase = GATE_IDLE;
	c->deadline = now() + g->s->o.header_s; /* the same deadline: MHD reads the head next */
	pthread_mutex_unlock(&g->mu);
	enum MHD_Result ok = MHD_add_connection(g->d, c->fd, (struct sockaddr *)&c->addr, c->alen);
	pthread_mutex_lock(&g->mu);
	if (ok != MHD_YES) /* MHD closed it */
		c->state = G_FREE;
}

/* The head or the body of a request did not arrive in time. */
static void expire(struct gate *g, struct gate_conn *c)
{
	static const char msg[] = "the request did not arrive within --header-timeout (or its body within "
				  "--body-timeout)";
	switch (c->state) {
	case G_HEAD:
		send_answer(c->fd, 408, "invalid_request_error", "request_timeout", msg, 0);
		hs_srv_http_count(g->s, NULL, 0, 408);
		linger(g, c, c->fd);
		break;
	case G_LINGER:
		close(c->fd);
		c->state = G_FREE;
		g->n_linger--;
		break;
	case G_MHD:
		if (!c->started) { /* never taken (libmicrohttpd closed it): the fd is not ours to touch */
			c->state = G_FREE;
			break;
		}
		/* libmicrohttpd writes nothing while it reads a head or a body */
		if (c->phase == GATE_BODY && !c->answered) {
			send_answer(c->fd, 408, "invalid_request_error", "request_timeout", msg, 0);
			hs_srv_http_count(g->s, NULL, 0, 408);
		}
		shutdown(c->fd, SHUT_RDWR); /* MHD sees the end and closes (notify: closed) */
		c->deadline = 0;
		break;
	default: break;
	}
}

static void *gate_main(void *arg)
{
	struct gate *g = arg;

	pthread_mutex_lock(&g->mu);
	while (!g->stop) {
		int np = 0;
		double t = now(), next = t + 1;
		g->pfd[np++] = (struct pollfd){ .fd = g->wake[0], .events = POLLIN };
		if (g->lfd >= 0)
			g->pfd[np++] = (struct pollfd){ .fd = g->lfd, .events = POLLIN };
		for (int i = 0; i < g->n; i++) {
			struct gate_conn *c = &g->c[i];
			if (c->state == G_FREE)
				continue;
			if (c->deadline > 0 && c->deadline < next)
				next = c->deadline;
			if (c->state == G_HEAD || c->state == G_LINGER) {
				g->pidx[np] = i;
				g->pfd[np++] = (struct pollfd){ .fd = c->fd, .events = POLLIN | POLLRDHUP };
			}
		}
		int lfd = g->lfd;
		pthread_mutex_unlock(&g->mu);
		int wait_ms = next > t ? (int)((next - t) * 1000) + 1 : 0;
		int rc = poll(g->pfd, (nfds_t)np, wait_ms);
		pthread_mutex_lock(&g->mu);
		if (rc < 0 && errno != EINTR)
			break;
		if (g->stop)
			break;
		if (g->pfd[0].revents) {
			char b[64];
			while (read(g->wake[0], b, sizeof b) > 0) {
			}
		}
		int first = 1;
		if (lfd >= 0) {
			first = 2;
			if (g->pfd[1].revents & POLLIN && g->lfd >= 0) {
				for (int k = 0; k < 64; k++) {
					struct sockaddr_storage sa;
					socklen_t sl = sizeof sa;
					int fd = accept4(g->lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
					if (fd < 0)
						break;
					admit(g, fd, &sa, sl);
				}
			}
		}
		for (int p = first; p < np; p++) {
			struct gate_conn *c = &g->c[g->pidx[p]];
			if (!g->pfd[p].revents || c->fd != g->pfd[p].fd)
				continue;
			if (c->state == G_HEAD) {
				peek_head(g, c, !!(g->pfd[p].revents & (POLLRDHUP | POLLHUP | POLLERR)));
			} else if (c->state == G_LINGER) {
				char b[4096];
				ssize_t n = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
				if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
					close(c->fd);
					c->state = G_FREE;
					g->n_linger--;
				}
			}
		}
		t = now();
		for (int i = 0; i < g->n; i++)
			if (g->c[i].state != G_FREE && g->c[i].deadline > 0 && g->c[i].deadline <= t)
				expire(g, &g->c[i]);
	}
	pthread_mutex_unlock(&g->mu);
	return NULL;
}

static void wake(struct gate *g)
{
	if (write(g->wake[1], "x", 1) < 0) {
		/* the pipe is full: the thread wakes anyway */
	}
}

struct gate *hs_srv_gate_start(struct srv *s, int lfd, struct MHD_Daemon *d)
{
	struct gate *g = calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->s = s;
	g->d = d;
	g->lfd = lfd;
	g->n = s->o.max_conns + LINGER_MAX;
	g->c = calloc((size_t)g->n, sizeof *g->c);
	g->pfd = calloc((size_t)g->n + 2, sizeof *g->pfd);
	g->pidx = calloc((size_t)g->n + 2, sizeof *g->pidx);
	g->wake[0] = g->wake[1] = -1;
	pthread_mutex_init(&g->mu, NULL);
	fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);
	if (!g->c || !g->pfd || !g->pidx || pipe2(g->wake, O_NONBLOCK | O_CLOEXEC) ||
	    pthread_create(&g->th, NULL, gate_main, g)) {
		hs_srv_gate_free(g);
		return NULL;
	}
	return g;
}

void hs_srv_gate_quiesce(struct gate *g)
{
	pthread_mutex_lock(&g->mu);
	if (g->lfd >= 0)
		close(g->lfd);
	g->lfd = -1;
	pthread_mutex_unlock(&g->mu);
	wake(g);
}

void hs_srv_gate_stop(struct gate *g)
{
	pthread_mutex_lock(&g->mu);
	g->stop = 1;
	pthread_mutex_unlock(&g->mu);
	wake(g);
	pthread_join(g->th, NULL);
	if (g->lfd >= 0)
		close(g->lfd);
	g->lfd = -1;
	for (int i = 0; i < g->n; i++)
		if (g->c[i].state == G_HEAD || g->c[i].state == G_LINGER) {
			close(g->c[i].fd);
			g->c[i].state = G_FREE;
		}
}

/* The memory itself is freed after libmicrohttpd stopped (its notices use it). */
void hs_srv_gate_free(struct gate *g)
{
	if (!g)
		return;
	pthread_mutex_destroy(&g->mu);
	for (int i = 0; i < 2; i++)
		if (g->wake[i] >= 0)
			close(g->wake[i]);
	free(g->c);
	free(g->pfd);
	free(g->pidx);
	free(g);
}

void hs_srv_gate_notify(struct gate *g, int fd, void **socket_context, int closed)
{
	pthread_mutex_lock(&g->mu);
	if (closed) {
		struct gate_conn *c = *socket_context;
		if (c && c->state == G_MHD)
			c->state = G_FREE;
		*socket_context = NULL;
	} else {
		for (int i = 0; i < g->n; i++)
			if (g->c[i].state == G_MHD && g->c[i].fd == fd && !g->c[i].started) {
				g->c[i].started = 1;
				*socket_context = &g->c[i];
			}
	}
	pthread_mutex_unlock(&g->mu);
}

void hs_srv_gate_phase(struct gate *g, struct gate_conn *c, enum gate_phase ph)
{
	if (!c)
		return;
	pthread_mutex_lock(&g->mu);
	if (c->state == G_MHD && !c->answered) {
		c->phase = ph;
		c->deadline = ph == GATE_ANSWER ? 0 : now() + (ph == GATE_BODY ? g->s->o.body_s : g->s->o.header_s);
	}
	pthread_mutex_unlock(&g->mu);
	wake(g); /* the nearest deadline may have changed */
}

int hs_srv_gate_answer(struct gate *g, struct gate_conn *c, int status, const char *body, size_t len,
		       int retry_after)
{
	char out[4600];
	size_t m = hs_srv_gate_format(out, sizeof out, status, body, len, retry_after);
	int rc = -1;

	if (!c || !m)
		return -1;
	pthread_mutex_lock(&g->mu);
	if (c->state == G_MHD && c->phase == GATE_BODY) {
		rc = send(c->fd, out, m, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)m ? 0 : -1;
		shutdown(c->fd, SHUT_WR);
		/* the rest of the body is read and dropped for a while, as a lingering close */
		c->answered = 1;
		c->deadline = now() + LINGER_S;
	}
	pthread_mutex_unlock(&g->mu);
	wake(g);
	return rc;
}
