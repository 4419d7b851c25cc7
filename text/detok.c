/* Decoding: a token's bytes, and the streaming detokenizer that lets only
 * whole, valid UTF-8 out. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/unicode.h"
#include "base/error.h"

int hs__buf_put(struct hs_buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *q = realloc(b->p, cap);
		if (!q)
			return hs__error(ENOMEM, "detokenize: out of memory");
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */

/* Valid characters are copied; a maximal invalid subpart becomes one U+FFFD;
 * a character cut short at the end waits in s->pend for more bytes. */
static int utf8_run(struct hs_utf8_sink *s, const uint8_t *p, size_t n, struct hs_buf *out)
{
	size_t i = 0, run = 0; /* p[run..i) is valid and not yet copied */
	int len, rc;

	while (i < n) {
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		if (hs__utf8_decode(p + i, n - i, &len) != HS_UTF8_BAD) {
			i += (size_t)len;
			continue;
		}
		if ((rc = hs__buf_put(out, p + run, i - run)))
			return rc;
		int k = hs__utf8_prefix(p + i, n - i);
		if ((size_t)k == n - i) { /* cut short: wait for the rest */
			memcpy(s->pend, p + i, (size_t)k);
			s->n_pend = k;
			return 0;
		}
		if ((rc = hs__buf_put(out, replacement, 3)))
			return rc;
		i += k ? (size_t)k : 1;
		run = i;
	}
	return hs__buf_put(out, p + run, i - run);
}

int hs__utf8_feed(struct hs_utf8_sink *s, const uint8_t *p, size_t n, struct hs_buf *out)
{
	int rc;

	if (s->n_pend && n) {
		/* finish the waiting character with up to 3 new bytes first */
		uint8_t tmp[8];
		size_t take = n < 3 ? n : 3, m = (size_t)s->n_pend;
		int len;
		memcpy(tmp, s->pend, m);
		memcpy(tmp + m, p, take);
		s->n_pend = 0;
		if (hs__utf8_decode(tmp, m + take, &len) != HS_UTF8_BAD) {
			/* complete: it used len - m of the new bytes */
			if ((rc = hs__buf_put(out, tmp, (size_t)len)))
				return rc;
			p += (size_t)len - m;
			n -= (size_t)len - m;
		} else {
			int k = hs__utf8_prefix(tmp, m + take);
			if ((size_t)k == m + take) { /* still short (take < needed) */
				memcpy(s->pend, tmp, (size_t)k);
				s->n_pend = k;
				return 0;
			}
			/* broken: the waiting bytes (and any new ones that
			 * continued them) are one bad sequence */
			if ((rc = hs__buf_put(out, replacement, 3)))
				return rc;
			p += (size_t)k - m;
			n -= (size_t)k - m;
		}
	}
	return utf8_run(s, p, n, out);
}

int hs__utf8_finish(struct hs_utf8_sink *s, struct hs_buf *out)
{
	if (!s->n_pend)
		return 0;
	s->n_pend = 0;
	return hs__buf_put(out, replacement, 3);
}

/* ---- token bytes ------------------------------------------------------ */

static const uint8_t *token_bytes(const hs_tokenizer *t, int32_t id, int render_special, size_t *len)
{
	const struct hs_vocab_token *k = &t->tok[id];

	*len = hs__tok_is_control_type(k->type) && !render_special ? 0 : k->len;
	return t->pool + k->off;
}

int hs_token_bytes(const hs_tokenizer *t, int32_t id, int render_special, char *buf, size_t n)
{
	const uint8_t *p;
	size_t len;

	HS_NEED(t, -EINVAL);
	if (id < 0 || id >= t->n_vocab)
		return hs__tok_bad_id(t, id);
	p = token_bytes(t, id, render_special, &len);
	if (buf && n)
		memcpy(buf, p, len < n ? len : n);
	return (int)len;
}

/* ---- the streaming detokenizer --------------------------------------- */

struct hs_detok {
	const hs_tokenizer *t;
	int render_special;
	struct hs_utf8_sink sink;
	struct hs_buf out;
};

int hs_detok_new(const hs_tokenizer *t, int render_special, hs_detok **out)
{
	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(t, -EINVAL);
	hs_detok *d = calloc(1, sizeof *d);
	if (!d || hs__buf_put(&d->out, "", 0)) {
		free(d);
		return hs__error(ENOMEM, "detokenize: out of memory");
	}
	d->t = t;
	d->render_special = render_special;
	*out = d;
	return 0;
}

void hs_detok_free(hs_detok *d)
{
	if (d) {
		free(d->out.p);
		free(d);
	}
}

int hs_detok_push(hs_detok *d, int32_t id, const char **text, size_t *len)
{
	const uint8_t *p;
	size_t n;
	int rc;

	HS_NEED(d, -EINVAL);
	HS_NEED(text, -EINVAL);
	HS_NEED(len, -EINVAL);
	d->out.len = 0;
	d->out.p[0] = '\0';
	*text = d->out.p;
	*len = 0;
	if (id < 0 || id >= d->t->n_vocab)
		return hs__tok_bad_id(d->t, id);
	p = token_bytes(d->t, id, d->render_special, &n);
	rc = hs__utf8_feed(&d->sink, p, n, &d->out);
	*text = d->out.p;
	*len = d->out.len;
	return rc;
}

int hs_detok_flush(hs_detok *d, const char **text, size_t *len)
{
	int rc;

	HS_NEED(d, -EINVAL);
	HS_NEED(text, -EINVAL);
	HS_NEED(len, -EINVAL);
	d->out.len = 0;
	d->out.p[0] = '\0';
	rc = hs__utf8_finish(&d->sink, &d->out);
	*text = d->out.p;
	*len = d->out.len;
	return rc;
}

int hs_detokenize(const hs_tokenizer *t, const int32_t *ids, int n, int render_special, char **text, size_t *len)
{
	struct hs_utf8_sink sink = { { 0 }, 0 };
	struct hs_buf out = { NULL, 0, 0 };

	HS_NEED(text, -EINVAL);
	*text = NULL;
	HS_NEED(t, -EINVAL);
	if (n < 0)
		return hs__error(EINVAL, "detokenize: n %d is negative", n);
	if (n)
		HS_NEED(ids, -EINVAL);
	int rc = hs__buf_put(&out, "", 0);
	for (int i = 0; i < n && !rc; i++) {
		const uint8_t *p;
		size_t m;
		if (ids[i] < 0 || ids[i] >= t->n_vocab) {
			rc = hs__tok_bad_id(t, ids[i]);
			break;
		}
		p = token_bytes(t, ids[i], render_special, &m);
		rc = hs__utf8_feed(&sink, p, m, &out);
	}
	if (!rc)
		rc = hs__utf8_finish(&sink, &out);
	if (rc) {
		free(out.p);
		return rc;
	}
	*text = out.p;
	if (len)
		*len = out.len;
	return 0;
}
