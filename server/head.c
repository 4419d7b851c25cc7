/* The head of a connection's first request, checked before libmicrohttpd
 * reads it (gate.c peeks at the bytes): the request line, each header
 * line, one Content-Length of digits, Transfer-Encoding chunked only and
 * never with a length, the length under --max-body.  What libmicrohttpd
 * 0.9.75 gets wrong there (a second Content-Length taken silently, a bad
 * one answered with two status lines, an unknown Transfer-Encoding or a
 * binary request line read until the idle timeout, a garbage request line
 * closed without a status line) is answered here at once, as nginx does.
 * A pure function over bytes: no sockets, no allocation. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "server/server.h"

/* RFC 9110 tchar: the bytes of a method or a header name */
static int tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int fail(struct srv_head *h, int status, const char *fmt, const char *arg, size_t n)
{
	char quoted[64];
	size_t k = 0;

	/* the offending bytes, printable ASCII only (the rest as '?'), at most 40 */
	for (size_t i = 0; arg && i < n && k < 40; i++)
		quoted[k++] = arg[i] >= 0x20 && arg[i] < 0x7f ? arg[i] : '?';
	quoted[k] = 0;
	h->status = status;
	snprintf(h->msg, sizeof h->msg, fmt, quoted);
	return status;
}

/* "  x  " -> "x": optional whitespace around a field value */
static void trim(const char **v, size_t *n)
{
	while (*n && (**v == ' ' || **v == '\t'))
		(*v)++, (*n)--;
	while (*n && ((*v)[*n - 1] == ' ' || (*v)[*n - 1] == '\t'))
		(*n)--;
}

/* One line without its end: the request line (first) or a header line. */
static int line(struct srv_head *h, const char *p, size_t n, int first, size_t max_body)
{
	if (first) {
		size_t i = 0, m, t0, t1;
		while (i < n && tchar((unsigned char)p[i]))
			i++;
		m = i;
		if (!m || i >= n || p[i] != ' ')
			return fail(h, 400, "the request line '%s' is not METHOD PATH HTTP/1.1", p, n);
		t0 = ++i;
		while (i < n && (unsigned char)p[i] > 0x20 && (unsigned char)p[i] < 0x7f)
			i++;
		t1 = i;
		if (t1 == t0 || i >= n || p[i] != ' ')
			return fail(h, 400, "the request line '%s' is not METHOD PATH HTTP/1.1", p, n);
		i++;
		if (n - i != 8 || memcmp(p + i, "HTTP/", 5) || p[i + 5] < '0' || p[i + 5] > '9' || p[i + 6] != '.' ||
		    p[i + 7] < '0' || p[i + 7] > '9')
			return fail(h, 400, "the request line '%s' is not METHOD PATH HTTP/1.1", p, n);
		if (p[i + 5] != '1')
			return fail(h, 505, "HTTP version '%s' is not supported (HTTP/1.0 and HTTP/1.1 are)", p + i, 8);
		h->method_len = m;
		h->target_off = t0;
		h->target_len = t1 - t0;
		return 0;
	}
	if (n && (p[0] == ' ' || p[0] == '\t'))
		return fail(h, 400, "a header line folded onto the next ('%s')", p, n);
	size_t c = 0;
	while (c < n && tchar((unsigned char)p[c]))
		c++;
	if (!c || c >= n || p[c] != ':')
		return fail(h, 400, "the header line '%s' is not NAME: VALUE", p, n);
	const char *v = p + c + 1;
	size_t vn = n - c - 1;
	for (size_t i = 0; i < vn; i++)
		if (((unsigned char)v[i] < 0x20 && v[i] != '\t') || v[i] == 0x7f)
			return fail(h, 400, "the header '%s' holds a control character", p, c);
	trim(&v, &vn);
	if (c == 14 && strncasecmp(p, "Content-Length", 14) == 0) {
		if (h->has_length)
			return fail(h, 400, "two Content-Length headers%s", "", 0);
		unsigned long long x = 0;
		if (!vn || vn > 18)
			return fail(h, 400, "Content-Length '%s' is not a number of bytes", v, vn);
		for (size_t i = 0; i < vn; i++) {
			if (v[i] < '0' || v[i] > '9')
				return fail(h, 400, "Content-Length '%s' is not a number of bytes", v, vn);
			x = x * 10 + (unsigned)(v[i] - '0');
		}
		h->has_length = 1;
		h->length = x;
	} else if (c == 17 && strncasecmp(p, "Transfer-Encoding", 17) == 0) {
		if (h->chunked || vn != 7 || strncasecmp(v, "chunked", 7))
			return fail(h, 501, "Transfer-Encoding '%s' is not supported (chunked alone is)", v, vn);
		h->chunked = 1;
	}
	if (h->has_length && h->chunked)
		return fail(h, 400, "Content-Length and Transfer-Encoding together%s", "", 0);
	if (h->has_length && h->length > max_body) {
		h->status = 413;
		snprintf(h->msg, sizeof h->msg, "the body is %llu bytes, more than %zu (--max-body)", h->length, max_body);
		return 413;
	}
	return 0;
}

int hs_srv_head_check(const char *buf, size_t n, size_t max_body, struct srv_head *h)
{
	size_t i = 0;
	int first = 1;

	memset(h, 0, sizeof *h);
	while (i < n && (buf[i] == '\r' || buf[i] == '\n')) /* empty lines before a request are allowed */
		i++;
	while (i < n) {
		const char *nl = memchr(buf + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - buf) : n, len = end - i;
		if (len && buf[i + len - 1] == '\r')
			len--;
		if (!nl) {
			/* an unfinished line: refuse bytes that no request line or header holds */
			for (size_t k = i; k < end; k++) {
				unsigned char c = (unsigned char)buf[k];
				if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f || (first && c >= 0x80))
					return fail(h, 400, "the request %s holds bytes that are not text",
						    first ? "line" : "head", 4);
			}
			return n >= SRV_HEAD_MAX ? fail(h, 431, "the request head is over 16384 bytes%s", "", 0) : 0;
		}
		if (!len && !first) { /* the blank line: the head is complete */
			h->head_len = end + 1;
			return 0;
		}
		int rc = line(h, buf + i, len, first, max_body);
		if (rc)
			return rc;
		first = 0;
		i = end + 1;
		if (i >= SRV_HEAD_MAX)
			return fail(h, 431, "the request head is over 16384 bytes%s", "", 0);
	}
	return n >= SRV_HEAD_MAX ? fail(h, 431, "the request head is over 16384 bytes%s", "", 0) : 0;
}
