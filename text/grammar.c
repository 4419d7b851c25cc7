/* GBNF grammars (llama.cpp's syntax) compiled to a pushdown matcher over the
 * UTF-8 bytes of tokens and over whole tokens, and the mask of the tokens
 * it allows next.
 *
 * The compiled grammar is a flat array of elements: each rule is a list of
 * alternatives, each alternative a run of elements (a character class, a
 * rule reference, a token, a negated token) closed by END.  A matcher stack
 * is a linked list of frames, each the position of the element to match
 * next; the top frame always names a terminal (class or token), an empty
 * stack (NULL) has matched root.  Frames are interned: (position, frame
 * below) has one frame, so equal stacks are equal pointers, a state (the set
 * of live stacks) is a small array of pointers, and what follows a frame's
 * terminal (its "next" set) is computed once and kept in the frame.  A rule
 * reference whose continuation is END pushes nothing (a tail call), so
 * right-recursive repetitions keep stacks flat.
 *
 * The mask walks the vocabulary in byte order (tokens sorted once per
 * tokenizer), reusing the state of the prefix a token shares with the one
 * before and skipping every token under a dead prefix; masks are cached by
 * state, because generation revisits the same states (inside a string,
 * between fields), so most tokens cost one lookup. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/grammar.h"

enum { GE_END, GE_CHARS, GE_RULE, GE_TOKEN, GE_NTOKEN };

struct gel {
	uint8_t kind, neg; /* neg: a negated class ([^...], and `.` with no ranges) */
	uint32_t a, n;     /* CHARS: ranges [a, a + n); RULE: the rule; TOKEN, NTOKEN: the id */
};
struct grange {
	uint32_t lo, hi;
};

/* limits that keep a hostile grammar's work proportional to its text */
#define MAX_ELEMS (1u << 20)  /* elements once repetitions are written out */
#define MAX_RULES (1u << 17)  /* rules, the generated ones too (a few hundred bytes each) */
#define MAX_REPEAT 10000
#define MAX_DEPTH 200        /* nesting of parentheses in the text */
#define MAX_FRAMES (1u << 20) /* interned frames of one grammar (48 bytes each) */
#define MAX_SET 4096          /* stacks alive at once */
#define N_CACHE 32            /* masks kept */

struct frame {
	uint32_t pos;
	uint32_t nx_off, nx_n; /* its next set in g->nx */
	uint8_t nx_done;
	struct frame *up, *hnext;
};

struct frame_chunk {
	struct frame_chunk *next;
	int used;
	struct frame f[1024];
};

/* a set of stacks with the character being assembled */
struct gset {
	struct frame **s;
	int n, cap;
	uint32_t cp;  /* bits of the character so far */
	uint8_t need; /* continuation bytes it still needs */
	uint8_t len;  /* the bytes of its UTF-8 form (its lead byte says) */
};

/* A state of the lazily built automaton over bytes: a set of stacks (its
 * pointers sorted, so equal sets are equal arrays) and the character being
 * assembled, with what each byte makes of it once asked. */
#define DS_UNKNOWN (-2)
#define DS_DEAD (-1)
#define MAX_DSTATES 8192 /* past this many the automaton starts again (1 KiB each) */
struct dstate {
	struct frame **s;
	int n;
	uint32_t cp;
	uint8_t need, len;
	uint64_t hash;
	int32_t hnext;
	int32_t next[256];
};

struct mask_entry {
	uint64_t key;   /* the automaton state's id + 1; 0: empty */
	uint64_t *bits;
	long used;      /* last use, for eviction */
};

/* the vocabulary's ordinary tokens by bytes, kept per tokenizer */
struct hs_tok_sorted {
	int32_t *ids;
	uint16_t *lcp; /* bytes shared with the token before (capped at 65535) */
	uint32_t *off; /* [n + 1]: token i's bytes are bytes[off[i] .. off[i + 1]) */
	uint8_t *bytes; /* the tokens' bytes in this order: the walk reads them in sequence */
	int n, max_len;
};

struct hs_grammar {
	const hs_tokenizer *t; /* NULL: the byte vocabulary */
	int n_vocab;
	int32_t eos, eot;
	struct gel *el;
	uint32_t n_el;
	struct grange *rg;
	uint32_t n_rg;
	uint32_t *alt0, *n_alt, *alts; /* rule r: alternatives alts[alt0[r] .. + n_alt[r]] (element indices) */
	uint32_t n_rules, root;
	uint8_t *named;    /* [n_vocab]: a token the grammar names (matched only as a token) */
	int any_tokens;    /* the grammar has token elements */
	const struct hs_tok_sorted *sorted;
	struct hs_tok_sorted own; /* the byte vocabulary's */
	/* interned frames */
	struct frame_chunk *chunks;
	struct frame **tab;
	uint32_t tab_mask, n_frames;
	struct frame **nx;
	uint32_t n_nx, cap_nx;
	int err; /* a limit was hit while matching: -ENOMEM / -E2BIG, sticky */
	/* the state */
	struct gset cur;
	int ended; /* an end token was accepted */
	/* scratch */
	struct gset *depth; /* per byte of a token in the walk */
	int n_depth;
	struct gset tmp, tmp3, nxs, acc;
	uint64_t *bits;
	struct mask_entry cache[N_CACHE];
	long clock, asked, hits;
	/* the automaton */
	struct dstate *ds;
	int32_t n_ds, cap_ds;
	int32_t *ds_tab;
	uint32_t ds_mask;
	int32_t *dwalk; /* per byte of a token in the walk: the state after its first d bytes */
};

/* ---- sets ----------------------------------------------------------------------- */

static int set_add(struct gset *z, struct frame *f)
{
	for (int i = 0; i < z->n; i++)
		if (z->s[i] == f)
			return 0;
	if (z->n == z->cap) {
		int cap = z->cap ? 2 * z->cap : 8;
		struct frame **p;
		if (cap > MAX_SET)
			return hs__error(E2BIG, "grammar: more than %d ways to read the text at once (too ambiguous)",
					 MAX_SET);
		p = realloc(z->s, (size_t)cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		z->s = p;
		z->cap = cap;
	}
	z->s[z->n++] = f;
	return 0;
}

static int set_copy(struct gset *d, const struct gset *s)
{
	if (d->cap < s->n) {
		struct frame **p = realloc(d->s, (size_t)s->n * sizeof *p);
		if (!p)
			return -ENOMEM;
		d->s = p;
		d->cap = s->n;
	}
	memcpy(d->s, s->s, (size_t)s->n * sizeof *d->s);
	d->n = s->n;
	d->cp = s->cp;
	d->need = s->need;
	d->len = s->len;
	return 0;
}

static void set_free(struct gset *z)
{
	free(z->s);
	memset(z, 0, sizeof *z);
}

/* ---- frames ------------------------------------------------------------------ */

static uint64_t frame_hash(uint32_t pos, const struct frame *up)
{
	uint64_t h = (uint64_t)pos * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)up * 0xBF58476D1CE4E5B9ull;
	return h ^ (h >> 29);
}

static struct frame *intern(hs_grammar *g, uint32_t pos, struct frame *up)
{
	uint64_t h = frame_hash(pos, up);
	struct frame *f;
	uint32_t i;

	for (f = g->tab ? g->tab[h & g->tab_mask] : NULL; f; f = f->hnext)
		if (f->pos == pos && f->up == up)
			return f;
	if (g->n_frames >= MAX_FRAMES) {
		g->err = hs__error(E2BIG, "grammar: the matcher's state passed %u frames (too deep or too ambiguous)",
				   MAX_FRAMES);
		return NULL;
	}
	if (!g->tab || g->n_frames >= g->tab_mask) { /* grow at load 1 */
		uint32_t m = g->tab ? 2 * g->tab_mask + 1 : 1023;
		struct frame **t = calloc((size_t)m + 1, sizeof *t);
		if (!t) {
			g->err = -ENOMEM;
			return NULL;
		}
		for (struct frame_chunk *c = g->chunks; c; c = c->next)
			for (int k = 0; k < c->used; k++) {
				struct frame *x = &c->f[k];
				uint32_t j = (uint32_t)frame_hash(x->pos, x->up) & m;
				x->hnext = t[j];
				t[j] = x;
			}
		free(g->tab);
		g->tab = t;
		g->tab_mask = m;
	}
	if (!g->chunks || g->chunks->used == (int)(sizeof g->chunks->f / sizeof g->chunks->f[0])) {
		struct frame_chunk *c = malloc(sizeof *c);
		if (!c) {
			g->err = -ENOMEM;
			return NULL;
		}
		c->used = 0;
		c->next = g->chunks;
		g->chunks = c;
	}
	f = &g->chunks->f[g->chunks->used++];
	*f = (struct frame){ .pos = pos, .up = up };
	i = (uint32_t)h & g->tab_mask;
	f->hnext = g->tab[i];
	g->tab[i] = f;
	g->n_frames++;
	return f;
}

/* Adds to z the stacks that matching from element pos, over the stack up,
 * can begin with: each with a terminal on top, or NULL when nothing is
 * left to match.  No left recursion (checked at compile) bounds it. */
static int expand(hs_grammar *g, uint32_t pos, struct frame *up, struct gset *z)
{
	for (;;) {
		const struct gel *e = &g->el[pos];
		if (e->kind == GE_END) {
			if (!up)
				return set_add(z, NULL);
			pos = up->pos;
			up = up->up;
			continue;
		}
		if (e->kind == GE_RULE) {
			struct frame *cont = up;
			int rc;
			if (g->el[pos + 1].kind != GE_END && !(cont = intern(g, pos + 1, up)))
				return g->err;
			for (uint32_t k = 0; k < g->n_alt[e->a]; k++)
				if ((rc = expand(g, g->alts[g->alt0[e->a] + k], cont, z)))
					return rc;
			return 0;
		}
		struct frame *f = intern(g, pos, up);
		return f ? set_add(z, f) : g->err;
	}
}

/* What follows f's terminal once it matched: its next set, computed once. */
static int frame_next(hs_grammar *g, struct frame *f, struct frame ***out, uint32_t *n)
{
	if (!f->nx_done) {
		int rc;
		g->nxs.n = 0;
		if ((rc = expand(g, f->pos + 1, f->up, &g->nxs)))
			return rc;
		if (g->n_nx + (uint32_t)g->nxs.n > g->cap_nx) {
			uint32_t cap = g->cap_nx ? g->cap_nx : 1024;
			struct frame **p;
			while (cap < g->n_nx + (uint32_t)g->nxs.n)
				cap *= 2;
			if (!(p = realloc(g->nx, (size_t)cap * sizeof *p)))
				return -ENOMEM;
			g->nx = p;
			g->cap_nx = cap;
		}
		if (g->nxs.n)
			memcpy(g->nx + g->n_nx, g->nxs.s, (size_t)g->nxs.n * sizeof *g->nx);
		f->nx_off = g->n_nx;
		f->nx_n = (uint32_t)g->nxs.n;
		g->n_nx += (uint32_t)g->nxs.n;
		f->nx_done = 1;
	}
	*out = g->nx + f->nx_off;
	*n = f->nx_n;
	return 0;
}

/* Adds to z what follows f's terminal. */
static int add_next(hs_grammar *g, struct frame *f, struct gset *z)
{
	struct frame **nx;
	uint32_t n;
	int rc = frame_next(g, f, &nx, &n);
	for (uint32_t k = 0; k < n && !rc; k++)
		rc = set_add(z, nx[k]);
	return rc;
}

/* ---- matching ------------------------------------------------------------------ */

static int class_has(const hs_grammar *g, const struct gel *e, uint32_t cp)
{
	int in = 0;
	for (uint32_t i = 0; i < e->n && !in; i++)
		in = cp >= g->rg[e->a + i].lo && cp <= g->rg[e->a + i].hi;
	return in != e->neg;
}

/* Whether the class can hold some character in [lo, hi] (for a character
 * still being assembled).  A negated class is taken to hold one unless a
 * single range of it covers all of [lo, hi]: at worst a dead end shows one
 * byte later. */
static int class_meets(const hs_grammar *g, const struct gel *e, uint32_t lo, uint32_t hi)
{
	for (uint32_t i = 0; i < e->n; i++) {
		const struct grange *r = &g->rg[e->a + i];
		if (!e->neg && r->lo <= hi && r->hi >= lo)
			return 1;
		if (e->neg && r->lo <= lo && r->hi >= hi)
			return 0;
	}
	return e->neg;
}

/* z = what set s becomes after byte b (z must not be s).  Only UTF-8 as
 * the standard has it passes: no overlong forms, surrogates or code points
 * past U+10FFFF, refused at the first byte that makes them so (a token of
 * overlong bytes could otherwise spell "analysis" to the grammar and
 * nothing to a reader). */
static int step_byte(hs_grammar *g, const struct gset *s, uint8_t b, struct gset *z)
{
	static const uint32_t min_of_len[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	uint32_t cp = s->cp, lo, hi;
	uint8_t need = s->need, len = s->len;
	int rc;

	z->n = 0;
	if (!need) {
		if (b < 0x80)
			cp = b, len = 1;
		else if ((b & 0xE0) == 0xC0)
			cp = b & 0x1F, need = 1, len = 2;
		else if ((b & 0xF0) == 0xE0)
			cp = b & 0x0F, need = 2, len = 3;
		else if ((b & 0xF8) == 0xF0)
			cp = b & 0x07, need = 3, len = 4;
		else
			return 0; /* a continuation byte where a character begins */
	} else {
		if ((b & 0xC0) != 0x80)
			return 0;
		cp = cp << 6 | (b & 0x3F);
		need--;
	}
	/* the characters this prefix can still become */
	lo = cp << (6 * need);
	hi = lo | ((1u << (6 * need)) - 1);
	if (lo < min_of_len[len])
		lo = min_of_len[len];
	if (hi > 0x10FFFF)
		hi = 0x10FFFF;
	if (lo > hi || (lo >= 0xD800 && hi <= 0xDFFF))
		return 0;
	/* a whole character leaves nothing behind: states that differ only in
	 * the last character are one state (and one cache entry) */
	z->cp = need ? cp : 0;
	z->need = need;
	z->len = need ? len : 0;
	if (need) {
		for (int i = 0; i < s->n; i++) {
			struct frame *f = s->s[i];
			if (f && g->el[f->pos].kind == GE_CHARS && class_meets(g, &g->el[f->pos], lo, hi) &&
			    (rc = set_add(z, f)))
				return rc;
		}
		return 0;
	}
	for (int i = 0; i < s->n; i++) {
		struct frame *f = s->s[i];
		if (!f || g->el[f->pos].kind != GE_CHARS || !class_has(g, &g->el[f->pos], cp))
			continue;
		if ((rc = add_next(g, f, z)))
			return rc;
	}
	return 0;
}

static int is_control(const hs_grammar *g, int32_t id)
{
	if (!g->t)
		return id >= 256;
	return hs_tokenizer_is_control(g->t, id) == 1;
}

/* a token matched by its bytes (not a control token, not one the grammar names) */
static int is_text_token(const hs_grammar *g, int32_t id)
{
	return !is_control(g, id) && !g->named[id];
}

static void token_bytes(const hs_grammar *g, int32_t id, const uint8_t **p, size_t *n)
{
	static uint8_t bytes[256];
	if (!g->t) {
		if (!bytes[1])
			for (int i = 0; i < 256; i++)
				bytes[i] = (uint8_t)i;
		*p = bytes + id;
		*n = 1;
		return;
	}
	*p = g->t->pool + g->t->tok[id].off;
	*n = g->t->tok[id].len;
}

/* z = set s after the whole token id; z->n == 0 when refused.  Not the end
 * tokens' own rule (hs_grammar_accept has it).  z is not s, nor g's
 * scratch sets. */
static int step_token(hs_grammar *g, const struct gset *s, int32_t id, struct gset *z)
{
	int rc;
	z->n = 0;
	z->cp = 0;
	z->need = 0;
	z->len = 0;
	if (is_text_token(g, id)) {
		const uint8_t *p;
		size_t n;
		const struct gset *from = s;
		struct gset *buf[2] = { &g->tmp, &g->tmp3 };
		size_t i;
		token_bytes(g, id, &p, &n);
		for (i = 0; i < n; i++) {
			if ((rc = step_byte(g, from, p[i], buf[i & 1])))
				return rc;
			from = buf[i & 1];
			if (!from->n)
				break;
		}
		if (n && i == n && (rc = set_copy(z, from)))
			return rc;
	}
	if (s->need)
		return 0; /* a whole token cannot begin inside a character */
	for (int i = 0; i < s->n; i++) {
		struct frame *f = s->s[i];
		if (!f)
			continue;
		const struct gel *e = &g->el[f->pos];
		if (!((e->kind == GE_TOKEN && (int32_t)e->a == id) ||
		      (e->kind == GE_NTOKEN && (int32_t)e->a != id && !is_control(g, id))))
			continue;
		if ((rc = add_next(g, f, z)))
			return rc;
	}
	return 0;
}

static int set_has_end(const struct gset *s)
{
	if (s->need)
		return 0;
	for (int i = 0; i < s->n; i++)
		if (!s->s[i])
			return 1;
	return 0;
}

static int is_end_token(const hs_grammar *g, int32_t id)
{
	return id >= 0 && (id == g->eos || id == g->eot);
}

/* ---- the vocabulary in byte order ------------------------------------------------ */

static const hs_tokenizer *sort_tok;
static int cmp_tok(const void *a, const void *b)
{
	const struct hs_vocab_token *x = &sort_tok->tok[*(const int32_t *)a], *y = &sort_tok->tok[*(const int32_t *)b];
	size_t n = x->len < y->len ? x->len : y->len;
	int c = memcmp(sort_tok->pool + x->off, sort_tok->pool + y->off, n);
	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

static pthread_mutex_t sorted_lock = PTHREAD_MUTEX_INITIALIZER;

void hs__tok_sorted_free(struct hs_tok_sorted *s)
{
	if (!s)
		return;
	free(s->ids);
	free(s->lcp);
	free(s->off);
	free(s->bytes);
	free(s);
}

/* The tokenizer's ordinary tokens in byte order, built once (under a lock:
 * the server compiles grammars on several threads) and freed with it. */
static const struct hs_tok_sorted *tok_sorted(const hs_tokenizer *ct)
{
	hs_tokenizer *t = (hs_tokenizer *)ct; /* the cache is the tokenizer's, not its meaning */
	struct hs_tok_sorted *s;

	pthread_mutex_lock(&sorted_lock);
	if ((s = t->sorted)) {
		pthread_mutex_unlock(&sorted_lock);
		return s;
	}
	s = calloc(1, sizeof *s);
	if (s && (s->ids = malloc((size_t)t->n_vocab * sizeof *s->ids)) &&
	    (s->lcp = malloc((size_t)t->n_vocab * sizeof *s->lcp))) {
		for (int i = 0; i < t->n_vocab; i++)
			if (hs_tokenizer_is_control(t, i) == 0 && t->tok[i].len)
				s->ids[s->n++] = i;
		sort_tok = t;
		qsort(s->ids, (size_t)s->n, sizeof *s->ids, cmp_tok);
		for (int i = 0; i < s->n; i++) {
			const struct hs_vocab_token *x = &t->tok[s->ids[i]];
			size_t l = 0;
			if (i) {
				const struct hs_vocab_token *y = &t->tok[s->ids[i - 1]];
				while (l < x->len && l < y->len && t->pool[x->off + l] == t->pool[y->off + l])
					l++;
			}
			s->lcp[i] = (uint16_t)(l < 65535 ? l : 65535);
			if ((int)x->len > s->max_len)
				s->max_len = (int)x->len;
		}
		size_t total = 0;
		for (int i = 0; i < s->n; i++)
			total += t->tok[s->ids[i]].len;
		if ((s->off = malloc(((size_t)s->n + 1) * sizeof *s->off)) && (s->bytes = malloc(total ? total : 1))) {
			total = 0;
			for (int i = 0; i < s->n; i++) {
				const struct hs_vocab_token *x = &t->tok[s->ids[i]];
				s->off[i] = (uint32_t)total;
				memcpy(s->bytes + total, t->pool + x->off, x->len);
				total += x->len;
			}
			s->off[s->n] = (uint32_t)total;
			t->sorted = s;
		} else {
			hs__tok_sorted_free(s);
			s = NULL;
		}
	} else {
		hs__tok_sorted_free(s);
		s = NULL;
	}
	pthread_mutex_unlock(&sorted_lock);
	return s;
}

/* ---- the parser ------------------------------------------------------------------ */

struct pseq {
	struct gel *e;
	uint32_t n, cap;
};
struct prule {
	char *name;
	struct pseq *alt;
	uint32_t n_alt, cap_alt;
	int defined;
	const char *at; /* where it was first named */
};
struct parser {
	const char *src, *p;
	const hs_tokenizer *t;
	struct prule *r;
	uint32_t n_r, cap_r;
	struct grange *rg;
	uint32_t n_rg, cap_rg;
	uint32_t n_el; /* elements so far, for the limit */
	uint8_t *named;
	int n_vocab;
	int any_tokens;
	int depth;
	uint32_t *names, names_mask, n_names; /* user rules' ids + 1 by name */
};

static void where(const struct parser *ps, const char *at, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (const char *q = ps->src; q < at; q++) {
		if (*q == '\n') {
			++*line;
			*col = 1;
		} else {
			++*col;
		}
	}
}

static int perr(const struct parser *ps, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(const struct parser *ps, const char *at, const char *fmt, ...)
{
	char msg[256];
	int line, col;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	where(ps, at, &line, &col);
	return hs__error(EINVAL, "grammar: line %d, column %d: %s", line, col, msg);
}

static int is_word(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

/* Skips blanks and comments; newlines too when nl_ok (inside parentheses,
 * after ::= and |, as llama.cpp's parser does). */
static void skip_space(struct parser *ps, int nl_ok)
{
	for (;;) {
		char c = *ps->p;
		if (c == ' ' || c == '\t' || (nl_ok && (c == '\n' || c == '\r'))) {
			ps->p++;
		} else if (c == '#') {
			while (*ps->p && *ps->p != '\n' && *ps->p != '\r')
				ps->p++;
		} else {
			return;
		}
	}
}

static uint32_t name_hash(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static int rule_add(struct parser *ps, const char *name, size_t len, const char *at, uint32_t *out)
{
	if (ps->n_r >= MAX_RULES)
		return hs__error(E2BIG, "grammar: more than %u rules once groups and repetitions are written out",
				 MAX_RULES);
	if (ps->n_r == ps->cap_r) {
		uint32_t cap = ps->cap_r ? 2 * ps->cap_r : 16;
		struct prule *r = realloc(ps->r, (size_t)cap * sizeof *r);
		if (!r)
			return -ENOMEM;
		ps->r = r;
		ps->cap_r = cap;
	}
	struct prule *r = &ps->r[ps->n_r];
	memset(r, 0, sizeof *r);
	if (!(r->name = strndup(name, len)))
		return -ENOMEM;
	r->at = at;
	*out = ps->n_r++;
	return 0;
}

/* The rule of that name, added when new; names in a table of their own
 * (open addressing, grown at half load) so a long grammar costs its length. */
static int rule_id(struct parser *ps, const char *name, size_t len, const char *at, uint32_t *out)
{
	uint32_t h = name_hash(name, len), i;
	for (i = h & ps->names_mask; ps->names && ps->names[i]; i = (i + 1) & ps->names_mask) {
		const char *x = ps->r[ps->names[i] - 1].name;
		if (strlen(x) == len && memcmp(x, name, len) == 0) {
			*out = ps->names[i] - 1;
			return 0;
		}
	}
	if (!ps->names || 2 * (ps->n_names + 1) > ps->names_mask) {
		uint32_t m = ps->names ? 2 * ps->names_mask + 1 : 63;
		uint32_t *t = calloc((size_t)m + 1, sizeof *t);
		if (!t)
			return -ENOMEM;
		for (uint32_t k = 0; ps->names && k <= ps->names_mask; k++)
			if (ps->names[k]) {
				const char *x = ps->r[ps->names[k] - 1].name;
				uint32_t j = name_hash(x, strlen(x)) & m;
				while (t[j])
					j = (j + 1) & m;
				t[j] = ps->names[k];
			}
		free(ps->names);
		ps->names = t;
		ps->names_mask = m;
		for (i = h & m; t[i]; i = (i + 1) & m)
			;
	}
	int rc = rule_add(ps, name, len, at, out);
	if (rc)
		return rc;
	ps->names[i] = *out + 1;
	ps->n_names++;
	return 0;
}

/* a generated rule for a group or a repetition: "<parent>#<n>", a name no
 * grammar can write, so it is not looked up */
static int new_rule(struct parser *ps, uint32_t parent, uint32_t *out)
{
	char name[300];
	const char *base = ps->r[parent].name;
	size_t bl = strcspn(base, "#");
	snprintf(name, sizeof name, "%.*s#%u", (int)(bl < 200 ? bl : 200), base, ps->n_r);
	int rc = rule_add(ps, name, strlen(name), ps->p, out);
	if (rc)
		return rc;
	ps->r[*out].defined = 1;
	return 0;
}

static int seq_push(struct parser *ps, struct pseq *s, struct gel e)
{
	if (++ps->n_el > MAX_ELEMS)
		return hs__error(E2BIG, "grammar: more than %u elements once repetitions are written out", MAX_ELEMS);
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? 2 * s->cap : 8;
		struct gel *p = realloc(s->e, (size_t)cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		s->e = p;
		s->cap = cap;
	}
	s->e[s->n++] = e;
	return 0;
}

static struct pseq *rule_new_alt(struct parser *ps, uint32_t r)
{
	struct prule *x = &ps->r[r];
	if (x->n_alt == x->cap_alt) {
		uint32_t cap = x->cap_alt ? 2 * x->cap_alt : 4;
		struct pseq *a = realloc(x->alt, (size_t)cap * sizeof *a);
		if (!a)
			return NULL;
		x->alt = a;
		x->cap_alt = cap;
	}
	memset(&x->alt[x->n_alt], 0, sizeof x->alt[0]);
	return &x->alt[x->n_alt++];
}

static int add_range(struct parser *ps, uint32_t lo, uint32_t hi)
{
	if (ps->n_rg == ps->cap_rg) {
		uint32_t cap = ps->cap_rg ? 2 * ps->cap_rg : 64;
		struct grange *p = realloc(ps->rg, (size_t)cap * sizeof *p);
		if (!p)
			return -ENOMEM;
		ps->rg = p;
		ps->cap_rg = cap;
	}
	ps->rg[ps->n_rg++] = (struct grange){ lo, hi };
	return 0;
}

/* One character of a literal or class, with its escapes; UTF-8 decoded. */
static int parse_char(struct parser *ps, uint32_t *cp)
{
	const char *at = ps->p;
	unsigned char c = (unsigned char)*ps->p;
	if (!c)
		return perr(ps, at, "unexpected end of the grammar");
	if (c == '\\') {
		char e = ps->p[1];
		int nd = 0;
		ps->p += 2;
		switch (e) {
		case 'n': *cp = '\n'; return 0;
		case 't': *cp = '\t'; return 0;
		case 'r': *cp = '\r'; return 0;
		case '\\': case '"': case '[': case ']': case '-': case '^': *cp = (uint32_t)e; return 0;
		case 'x': nd = 2; break;
		case 'u': nd = 4; break;
		case 'U': nd = 8; break;
		default: return perr(ps, at, "unknown escape '\\%c'", e ? e : '0');
		}
		uint32_t v = 0;
		for (int i = 0; i < nd; i++, ps->p++) {
			char h = *ps->p;
			int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
			if (d < 0)
				return perr(ps, at, "escape \\%c needs %d hex digits", e, nd);
			v = v << 4 | (uint32_t)d;
		}
		if (v > 0x10FFFF)
			return perr(ps, at, "escape U+%X is past U+10FFFF", v);
		*cp = v;
		return 0;
	}
	int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
	if (!n)
		return perr(ps, at, "bytes that are not UTF-8");
	uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
	for (int i = 1; i < n; i++) {
		unsigned char k = (unsigned char)ps->p[i];
		if ((k & 0xC0) != 0x80)
			return perr(ps, at, "bytes that are not UTF-8");
		v = v << 6 | (k & 0x3Fu);
	}
	ps->p += n;
	*cp = v;
	return 0;
}

static int parse_alternatives(struct parser *ps, uint32_t rule, int nested);

/* a token element after '<' (and '!' when neg): <[id]> or <text> */
static int parse_token(struct parser *ps, struct pseq *s, int neg)
{
	const char *at = ps->p;
	int32_t id = -1;
	ps->p++; /* '<' */
	if (*ps->p == '[') {
		char *end;
		long v = strtol(ps->p + 1, &end, 10);
		if (end == ps->p + 1 || *end != ']' || end[1] != '>')
			return perr(ps, at, "a token id is written <[123]>");
		if (!ps->t && ps->n_vocab == 257)
			return perr(ps, at, "token elements need a tokenizer's vocabulary");
		if (v < 0 || v >= ps->n_vocab)
			return perr(ps, at, "token id %ld is outside the vocabulary of %d", v, ps->n_vocab);
		id = (int32_t)v;
		ps->p = end + 2;
	} else {
		const char *q = strchr(ps->p, '>');
		char buf[256];
		/* the text may itself hold '>' (<|end|> does not, </think> does not): take the shortest
		 * that names a token */
		while (q && (size_t)(q - ps->p) + 1 < sizeof buf) {
			size_t len = (size_t)(q - ps->p) + 1;
			memcpy(buf, ps->p - 1, len + 1);
			buf[len + 1] = 0;
			if (ps->t && (id = hs_tokenizer_find(ps->t, buf)) >= 0)
				break;
			q = strchr(q + 1, '>');
		}
		if (!ps->t)
			return perr(ps, at, "token elements need a tokenizer's vocabulary");
		if (id < 0) {
			const char *e = strchr(ps->p, '>');
			return perr(ps, at, "'%.*s' is not one token of this vocabulary", e ? (int)(e - ps->p + 2) : 20, ps->p - 1);
		}
		ps->p = q + 1;
	}
	ps->named[id] = 1;
	ps->any_tokens = 1;
	return seq_push(ps, s, (struct gel){ .kind = (uint8_t)(neg ? GE_NTOKEN : GE_TOKEN), .a = (uint32_t)id });
}

/* Appends to s what a repetition of s->e[from..] min to max times (max
 * UINT32_MAX: unbounded) is, as llama.cpp rewrites it: min copies, then
 * nested optional rules, or one right-recursive rule for the unbounded
 * tail. */
static int repeat(struct parser *ps, uint32_t rule, uint32_t *s_idx, uint32_t from, uint32_t min, uint32_t max)
{
	uint32_t a = *s_idx;
	struct gel *sym;
	uint32_t n_sym, tail = 0, i;
	int rc;

	/* the alternative is named by index: new rules below may move ps->r */
#define SEQ (&ps->r[rule].alt[a])
	n_sym = SEQ->n - from;
	if (!(sym = malloc((size_t)n_sym * sizeof *sym)))
		return -ENOMEM;
	memcpy(sym, SEQ->e + from, (size_t)n_sym * sizeof *sym);
	SEQ->n = from;
	ps->n_el -= n_sym;
	rc = 0;
	for (i = 0; i < min && !rc; i++)
		for (uint32_t k = 0; k < n_sym && !rc; k++)
			rc = seq_push(ps, SEQ, sym[k]);
	if (!rc && max != min) {
		/* unbounded: r ::= sym r | ; bounded: r_k ::= sym r_{k-1} | , innermost first */
		uint32_t prev = UINT32_MAX, count = max == UINT32_MAX ? 1 : max - min;
		for (i = 0; i < count && !rc; i++) {
			uint32_t r;
			struct pseq *alt;
			if ((rc = new_rule(ps, rule, &r)))
				break;
			if (!(alt = rule_new_alt(ps, r)) || !rule_new_alt(ps, r)) {
				rc = -ENOMEM;
				break;
			}
			alt = &ps->r[r].alt[0];
			for (uint32_t k = 0; k < n_sym && !rc; k++)
				rc = seq_push(ps, alt, sym[k]);
			if (!rc && (max == UINT32_MAX || prev != UINT32_MAX))
				rc = seq_push(ps, &ps->r[r].alt[0],
					      (struct gel){ .kind = GE_RULE, .a = max == UINT32_MAX ? r : prev });
			prev = r;
		}
		tail = prev;
		if (!rc)
			rc = seq_push(ps, SEQ, (struct gel){ .kind = GE_RULE, .a = tail });
	}
#undef SEQ
	free(sym);
	return rc;
}

static int parse_uint(struct parser *ps, uint32_t *v)
{
	const char *at = ps->p;
	unsigned long x = 0;
	if (*ps->p < '0' || *ps->p > '9')
		return perr(ps, at, "expected a number in {m,n}");
	while (*ps->p >= '0' && *ps->p <= '9') {
		x = x * 10 + (unsigned long)(*ps->p++ - '0');
		if (x > MAX_REPEAT)
			return perr(ps, at, "a repetition count above %d", MAX_REPEAT);
	}
	*v = (uint32_t)x;
	return 0;
}

/* One sequence (until '|', ')', or the line's end at the top level) into
 * alternative a of rule. */
static int parse_sequence(struct parser *ps, uint32_t rule, uint32_t a, int nested)
{
	uint32_t last = UINT32_MAX; /* where the last symbol began */
	int rc;
#define SEQ (&ps->r[rule].alt[a])
	for (;;) {
		const char *at = ps->p;
		char c = *ps->p;
		if (c == '"') {
			ps->p++;
			last = SEQ->n;
			while (*ps->p != '"') {
				uint32_t cp;
				if (!*ps->p || *ps->p == '\n')
					return perr(ps, at, "a literal without its closing '\"'");
				if ((rc = parse_char(ps, &cp)) || (rc = add_range(ps, cp, cp)) ||
				    (rc = seq_push(ps, SEQ, (struct gel){ .kind = GE_CHARS, .a = ps->n_rg - 1, .n = 1 })))
					return rc;
			}
			ps->p++;
		} else if (c == '[') {
			struct gel e = { .kind = GE_CHARS, .a = ps->n_rg };
			ps->p++;
			if (*ps->p == '^') {
				e.neg = 1;
				ps->p++;
			}
			while (*ps->p != ']') {
				uint32_t lo, hi;
				if (!*ps->p)
					return perr(ps, at, "a character class without its closing ']'");
				if ((rc = parse_char(ps, &lo)))
					return rc;
				hi = lo;
				if (ps->p[0] == '-' && ps->p[1] && ps->p[1] != ']') {
					ps->p++;
					if ((rc = parse_char(ps, &hi)))
						return rc;
					if (hi < lo)
						return perr(ps, at, "a range from U+%X down to U+%X", lo, hi);
				}
				if ((rc = add_range(ps, lo, hi)))
					return rc;
				e.n++;
			}
			ps->p++;
			last = SEQ->n;
			if ((rc = seq_push(ps, SEQ, e)))
				return rc;
		} else if (c == '.') {
			ps->p++;
			last = SEQ->n;
			if ((rc = seq_push(ps, SEQ, (struct gel){ .kind = GE_CHARS, .neg = 1 })))
				return rc;
		} else if (c == '<' || (c == '!' && ps->p[1] == '<')) {
			int neg = c == '!';
			ps->p += neg;
			last = SEQ->n;
			if ((rc = parse_token(ps, SEQ, neg)))
				return rc;
		} else if (is_word(c)) {
			const char *w = ps->p;
			uint32_t r;
			while (is_word(*ps->p))
				ps->p++;
			if ((rc = rule_id(ps, w, (size_t)(ps->p - w), w, &r)))
				return rc;
			last = SEQ->n;
			if ((rc = seq_push(ps, SEQ, (struct gel){ .kind = GE_RULE, .a = r })))
				return rc;
		} else if (c == '(') {
			uint32_t r;
			if (++ps->depth > MAX_DEPTH)
				return perr(ps, at, "parentheses nested deeper than %d", MAX_DEPTH);
			ps->p++;
			if ((rc = new_rule(ps, rule, &r)))
				return rc;
			skip_space(ps, 1);
			if ((rc = parse_alternatives(ps, r, 1)))
				return rc;
			if (*ps->p != ')')
				return perr(ps, at, "a '(' without its ')'");
			ps->p++;
			ps->depth--;
			last = SEQ->n;
			if ((rc = seq_push(ps, SEQ, (struct gel){ .kind = GE_RULE, .a = r })))
				return rc;
		} else if (c == '*' || c == '+' || c == '?' || c == '{') {
			uint32_t min = 0, max = UINT32_MAX;
			if (last == UINT32_MAX)
				return perr(ps, at, "'%c' with nothing before it to repeat", c);
			ps->p++;
			if (c == '+')
				min = 1;
			else if (c == '?')
				max = 1;
			else if (c == '{') {
				skip_space(ps, 0);
				if ((rc = parse_uint(ps, &min)))
					return rc;
				skip_space(ps, 0);
				max = min;
				if (*ps->p == ',') {
					ps->p++;
					skip_space(ps, 0);
					max = UINT32_MAX;
					if (*ps->p != '}' && (rc = parse_uint(ps, &max)))
						return rc;
					skip_space(ps, 0);
				}
				if (*ps->p != '}')
					return perr(ps, at, "expected '}' closing {m,n}");
				ps->p++;
				if (max < min)
					return perr(ps, at, "{%u,%u}: the most below the least", min, max);
			}
			if ((rc = repeat(ps, rule, &a, last, min, max)))
				return rc;
			last = UINT32_MAX; /* a repetition of a repetition needs parentheses */
		} else {
			break;
		}
		skip_space(ps, nested);
	}
#undef SEQ
	return 0;
}

static int parse_alternatives(struct parser *ps, uint32_t rule, int nested)
{
	int rc;
	for (;;) {
		if (!rule_new_alt(ps, rule))
			return -ENOMEM;
		if ((rc = parse_sequence(ps, rule, ps->r[rule].n_alt - 1, nested)))
			return rc;
		if (*ps->p != '|')
			return 0;
		ps->p++;
		skip_space(ps, 1);
	}
}

static int parse_all(struct parser *ps)
{
	int rc;
	for (;;) {
		skip_space(ps, 1);
		if (!*ps->p)
			return 0;
		const char *at = ps->p, *w = ps->p;
		uint32_t r;
		if (!is_word(*ps->p))
			return perr(ps, at, "expected a rule name");
		while (is_word(*ps->p))
			ps->p++;
		if ((rc = rule_id(ps, w, (size_t)(ps->p - w), w, &r)))
			return rc;
		if (ps->r[r].defined)
			return perr(ps, at, "rule '%s' is defined twice", ps->r[r].name);
		ps->r[r].defined = 1;
		skip_space(ps, 0);
		if (strncmp(ps->p, "::=", 3) != 0)
			return perr(ps, ps->p, "expected '::=' after '%s'", ps->r[r].name);
		ps->p += 3;
		skip_space(ps, 1);
		if ((rc = parse_alternatives(ps, r, 0)))
			return rc;
		if (*ps->p == ')')
			return perr(ps, ps->p, "a ')' without its '('");
		if (*ps->p && *ps->p != '\n' && *ps->p != '\r')
			return perr(ps, ps->p, "unexpected '%c'", *ps->p);
	}
}

/* ---- compiling ------------------------------------------------------------------ */

/* Left recursion (a rule that can reach itself before matching anything)
 * would make expand() loop: found by a depth-first walk of "may begin with". */
static int left_rec_visit(const hs_grammar *g, const uint8_t *nullable, uint8_t *color, uint32_t r,
			  uint32_t *culprit)
{
	color[r] = 1;
	for (uint32_t k = 0; k < g->n_alt[r]; k++)
		for (uint32_t pos = g->alts[g->alt0[r] + k]; g->el[pos].kind == GE_RULE; pos++) {
			uint32_t s = g->el[pos].a;
			if (color[s] == 1) {
				*culprit = s;
				return 1;
			}
			if (!color[s] && left_rec_visit(g, nullable, color, s, culprit))
				return 1;
			if (!nullable[s])
				break;
		}
	color[r] = 2;
	return 0;
}

static int check_left_recursion(const hs_grammar *g, const struct prule *pr)
{
	uint8_t *nullable = calloc(g->n_rules, 1), *color = calloc(g->n_rules, 1);
	int changed = 1, rc = 0;
	uint32_t culprit = 0;

	if (!nullable || !color) {
		free(nullable);
		free(color);
		return -ENOMEM;
	}
	while (changed) {
		changed = 0;
		for (uint32_t r = 0; r < g->n_rules; r++) {
			if (nullable[r])
				continue;
			for (uint32_t k = 0; k < g->n_alt[r] && !nullable[r]; k++) {
				uint32_t pos = g->alts[g->alt0[r] + k];
				while (g->el[pos].kind == GE_RULE && nullable[g->el[pos].a])
					pos++;
				if (g->el[pos].kind == GE_END)
					nullable[r] = 1, changed = 1;
			}
		}
	}
	/* the walk recurses once per rule on a chain: fine for grammars a person or the schema
	 * converter writes (thousands of rules at most along one chain) */
	for (uint32_t r = 0; r < g->n_rules && !rc; r++)
		if (!color[r] && left_rec_visit(g, nullable, color, r, &culprit))
			rc = hs__error(EINVAL, "grammar: rule '%s' is left-recursive (it can begin with itself)",
				       pr[culprit].name);
	free(nullable);
	free(color);
	return rc;
}

static void parser_free(struct parser *ps)
{
	for (uint32_t i = 0; i < ps->n_r; i++) {
		for (uint32_t k = 0; k < ps->r[i].n_alt; k++)
			free(ps->r[i].alt[k].e);
		free(ps->r[i].alt);
		free(ps->r[i].name);
	}
	free(ps->r);
	free(ps->rg);
	free(ps->names);
}

void hs_grammar_free(hs_grammar *g)
{
	if (!g)
		return;
	while (g->chunks) {
		struct frame_chunk *c = g->chunks;
		g->chunks = c->next;
		free(c);
	}
	free(g->tab);
	free(g->nx);
	free(g->el);
	free(g->rg);
	free(g->alt0);
	free(g->n_alt);
	free(g->alts);
	free(g->named);
	free(g->own.ids);
	free(g->own.lcp);
	free(g->own.off);
	free(g->own.bytes);
	set_free(&g->cur);
	set_free(&g->tmp);
	set_free(&g->tmp3);
	set_free(&g->nxs);
	set_free(&g->acc);
	for (int i = 0; i < g->n_depth; i++)
		set_free(&g->depth[i]);
	free(g->depth);
	free(g->bits);
	for (int i = 0; i < N_CACHE; i++) {
		free(g->cache[i].bits);
	}
	for (int32_t i = 0; i < g->n_ds; i++)
		free(g->ds[i].s);
	free(g->ds);
	free(g->ds_tab);
	free(g->dwalk);
	free(g);
}

static int grammar_start(hs_grammar *g)
{
	int rc;
	g->cur.n = 0;
	g->cur.cp = 0;
	g->cur.need = 0;
	g->cur.len = 0;
	g->ended = 0;
	/* root's alternatives over an empty stack */
	for (uint32_t k = 0; k < g->n_alt[g->root]; k++)
		if ((rc = expand(g, g->alts[g->alt0[g->root] + k], NULL, &g->cur)))
			return rc;
	return 0;
}

static int compile(const hs_tokenizer *t, int n_vocab, const char *gbnf, const char *start, hs_grammar **out)
{
	struct parser ps = { .src = gbnf, .p = gbnf, .t = t, .n_vocab = n_vocab };
	hs_grammar *g = NULL;
	int rc;
	uint32_t root = UINT32_MAX, n_alts = 0, n_el = 0;

	*out = NULL;
	if (!(ps.named = calloc((size_t)n_vocab, 1)))
		return -ENOMEM;
	if ((rc = parse_all(&ps)))
		goto fail;
	for (uint32_t i = 0; i < ps.n_r; i++) {
		if (!ps.r[i].defined) {
			rc = perr(&ps, ps.r[i].at, "rule '%s' is used but not defined", ps.r[i].name);
			goto fail;
		}
		if (strcmp(ps.r[i].name, start) == 0)
			root = i;
		n_alts += ps.r[i].n_alt;
		for (uint32_t k = 0; k < ps.r[i].n_alt; k++)
			n_el += ps.r[i].alt[k].n + 1;
	}
	if (root == UINT32_MAX) {
		rc = hs__error(EINVAL, "grammar: no rule named '%.64s' (where matching starts)", start);
		goto fail;
	}
	rc = -ENOMEM;
	if (!(g = calloc(1, sizeof *g)) || !(g->el = malloc(((size_t)n_el + 1) * sizeof *g->el)) ||
	    !(g->alt0 = malloc((size_t)ps.n_r * sizeof *g->alt0)) || !(g->n_alt = malloc((size_t)ps.n_r * sizeof *g->n_alt)) ||
	    !(g->alts = malloc(((size_t)n_alts + 1) * sizeof *g->alts)))
		goto fail;
	g->t = t;
	g->n_vocab = n_vocab;
	g->n_rules = ps.n_r;
	g->root = root;
	g->eos = t ? hs_tokenizer_eos(t) : 256;
	g->eot = t ? hs_tokenizer_eot(t) : -1;
	n_alts = 0;
	for (uint32_t i = 0; i < ps.n_r; i++) {
		g->alt0[i] = n_alts;
		g->n_alt[i] = ps.r[i].n_alt;
		for (uint32_t k = 0; k < ps.r[i].n_alt; k++) {
			g->alts[n_alts++] = g->n_el;
			if (ps.r[i].alt[k].n) /* an empty alternative has no array */
				memcpy(g->el + g->n_el, ps.r[i].alt[k].e, (size_t)ps.r[i].alt[k].n * sizeof *g->el);
			g->n_el += ps.r[i].alt[k].n;
			g->el[g->n_el++] = (struct gel){ .kind = GE_END };
		}
	}
	g->el[g->n_el] = (struct gel){ .kind = GE_END }; /* expand() may look one past a last RULE */
	g->rg = ps.rg;
	g->n_rg = ps.n_rg;
	ps.rg = NULL;
	g->named = ps.named;
	ps.named = NULL;
	g->any_tokens = ps.any_tokens;
	if ((rc = check_left_recursion(g, ps.r)))
		goto fail;
	if (t) {
		if (!(g->sorted = tok_sorted(t))) {
			rc = -ENOMEM;
			goto fail;
		}
	} else {
		rc = -ENOMEM;
		if (!(g->own.ids = malloc(256 * sizeof *g->own.ids)) || !(g->own.lcp = calloc(256, sizeof *g->own.lcp)))
			goto fail;
		if (!(g->own.off = malloc(257 * sizeof *g->own.off)) || !(g->own.bytes = malloc(256)))
			goto fail;
		for (int i = 0; i < 256; i++) {
			g->own.ids[i] = i;
			g->own.off[i] = (uint32_t)i;
			g->own.bytes[i] = (uint8_t)i;
		}
		g->own.off[256] = 256;
		g->own.n = 256;
		g->own.max_len = 1;
		g->sorted = &g->own;
	}
	rc = -ENOMEM;
	g->n_depth = g->sorted->max_len + 1;
	if (!(g->depth = calloc((size_t)g->n_depth, sizeof *g->depth)) ||
	    !(g->dwalk = malloc((size_t)g->n_depth * sizeof *g->dwalk)) ||
	    !(g->bits = malloc(((size_t)n_vocab + 63) / 64 * sizeof *g->bits)))
		goto fail;
	if ((rc = grammar_start(g)))
		goto fail;
	parser_free(&ps);
	*out = g;
	return 0;
fail:
	parser_free(&ps);
	free(ps.named);
	hs_grammar_free(g);
	return rc == -ENOMEM ? hs__error(ENOMEM, "grammar: out of memory") : rc;
}

int hs_grammar_new(const hs_tokenizer *t, const char *gbnf, hs_grammar **out)
{
	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(t, -EINVAL);
	HS_NEED(gbnf, -EINVAL);
	return compile(t, hs_tokenizer_n_vocab(t), gbnf, "root", out);
}

int hs__grammar_new_start(const hs_tokenizer *t, const char *gbnf, const char *start, hs_grammar **out)
{
	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(t, -EINVAL);
	HS_NEED(gbnf, -EINVAL);
	HS_NEED(start, -EINVAL);
	return compile(t, hs_tokenizer_n_vocab(t), gbnf, start, out);
}

int hs__grammar_new_bytes(const char *gbnf, hs_grammar **out)
{
	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(gbnf, -EINVAL);
	return compile(NULL, 257, gbnf, "root", out);
}

int hs_grammar_reset(hs_grammar *g)
{
	HS_NEED(g, -EINVAL);
	if (g->err)
		return g->err;
	return grammar_start(g);
}

int hs_grammar_done(const hs_grammar *g)
{
	HS_NEED(g, -EINVAL);
	return g->ended || set_has_end(&g->cur);
}

/* ---- advancing --------------------------------------------------------------------- */

int hs_grammar_accept(hs_grammar *g, int32_t id)
{
	int rc;
	HS_NEED(g, -EINVAL);
	if (id < 0 || id >= g->n_vocab)
		return hs__error(EINVAL, "grammar: token %d outside the vocabulary of %d", (int)id, g->n_vocab);
	if (g->err)
		return g->err;
	if (g->ended)
		return hs__error(EINVAL, "grammar: token %d after the end", (int)id);
	if ((rc = step_token(g, &g->cur, id, &g->acc)))
		return g->err = rc;
	if (!g->acc.n) {
		if (is_end_token(g, id) && set_has_end(&g->cur)) {
			g->ended = 1;
			return 0;
		}
		return hs__error(EINVAL, "grammar: token %d is not allowed here", (int)id);
	}
	if ((rc = set_copy(&g->cur, &g->acc)))
		return g->err = rc;
	return 0;
}

int hs__grammar_accept_text(hs_grammar *g, const char *s, size_t n)
{
	struct gset *a, *b;
	int rc;
	HS_NEED(g, -EINVAL);
	a = &g->acc;
	b = &g->tmp;
	HS_NEED(s || !n, -EINVAL);
	if (g->err)
		return g->err;
	if (g->ended)
		return n ? hs__error(EINVAL, "grammar: text after the end") : 0;
	if ((rc = set_copy(a, &g->cur)))
		return g->err = rc;
	for (size_t i = 0; i < n; i++) {
		if ((rc = step_byte(g, a, (uint8_t)s[i], b)))
			return g->err = rc;
		if (!b->n)
			return hs__error(EINVAL, "grammar: byte %zu (0x%02x) of the text is not allowed there", i,
					 (unsigned char)s[i]);
		struct gset *x = a;
		a = b;
		b = x;
	}
	return (rc = set_copy(&g->cur, a)) ? (g->err = rc) : 0;
}

/* ---- masks --------------------------------------------------------------------------- */

static uint64_t state_key(const struct gset *s)
{
	/* order-free: the same set reached two ways may list its stacks in two orders */
	uint64_t h = ((uint64_t)s->cp * 31 + s->need) * 7 + s->len + 1;
	for (int i = 0; i < s->n; i++) {
		uint64_t x = (uint64_t)(uintptr_t)s->s[i] * 0x9E3779B97F4A7C15ull;
		h += x ^ (x >> 32);
	}
	return h ? h : 1;
}

#define BIT_SET(b, i) ((b)[(i) >> 6] |= 1ull << ((i) & 63))

/* The mask of what the whole-token elements and the end allow. */
static void token_bits(const hs_grammar *g, const struct gset *s, uint64_t *bits)
{
	if (s->need)
		return;
	for (int i = 0; i < s->n; i++) {
		const struct frame *f = s->s[i];
		if (!f) {
			if (g->eos >= 0)
				BIT_SET(bits, g->eos);
			if (g->eot >= 0)
				BIT_SET(bits, g->eot);
			continue;
		}
		const struct gel *e = &g->el[f->pos];
		if (e->kind == GE_TOKEN)
			BIT_SET(bits, e->a);
		else if (e->kind == GE_NTOKEN)
			for (int32_t id = 0; id < g->n_vocab; id++)
				if (id != (int32_t)e->a && !is_control(g, id))
					BIT_SET(bits, id);
	}
}

/* ---- the automaton over bytes ------------------------------------------------------- */

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (struct frame *const *)a, y = (uintptr_t) * (struct frame *const *)b;
	return x < y ? -1 : x > y;
}

/* Drops every automaton state (and the masks cached by them): the frames
 * stay, the states are built again as they are met. */
static void ds_clear(hs_grammar *g)
{
	for (int32_t i = 0; i < g->n_ds; i++)
		free(g->ds[i].s);
	g->n_ds = 0;
	if (g->ds_tab)
		memset(g->ds_tab, 0xff, ((size_t)g->ds_mask + 1) * sizeof *g->ds_tab);
	for (int i = 0; i < N_CACHE; i++)
		g->cache[i].key = 0;
}

/* The id of the state of set z (sorted in place), made when new; -1 and
 * g->err when memory runs out. */
static int32_t ds_id(hs_grammar *g, struct gset *z)
{
	uint64_t h;
	int32_t id;

	if (z->n > 1)
		qsort(z->s, (size_t)z->n, sizeof *z->s, cmp_ptr);
	h = state_key(z);
	if (g->ds_tab)
		for (id = g->ds_tab[h & g->ds_mask]; id >= 0; id = g->ds[id].hnext) {
			const struct dstate *d = &g->ds[id];
			if (d->hash == h && d->n == z->n && d->cp == z->cp && d->need == z->need && d->len == z->len &&
			    (!z->n || memcmp(d->s, z->s, (size_t)z->n * sizeof *z->s) == 0))
				return id;
		}
	if (g->n_ds == g->cap_ds) {
		int32_t cap = g->cap_ds ? 2 * g->cap_ds : 64;
		struct dstate *p = realloc(g->ds, (size_t)cap * sizeof *p);
		if (!p)
			return g->err = -ENOMEM, -1;
		g->ds = p;
		g->cap_ds = cap;
	}
	if (!g->ds_tab || (uint32_t)g->n_ds >= g->ds_mask / 2) {
		uint32_t m = g->ds_tab ? 2 * g->ds_mask + 1 : 255;
		int32_t *t = malloc(((size_t)m + 1) * sizeof *t);
		if (!t)
			return g->err = -ENOMEM, -1;
		memset(t, 0xff, ((size_t)m + 1) * sizeof *t);
		for (int32_t i = 0; i < g->n_ds; i++) {
			uint32_t k = (uint32_t)g->ds[i].hash & m;
			g->ds[i].hnext = t[k];
			t[k] = i;
		}
		free(g->ds_tab);
		g->ds_tab = t;
		g->ds_mask = m;
	}
	struct dstate *d = &g->ds[g->n_ds];
	d->s = NULL;
	if (z->n && !(d->s = malloc((size_t)z->n * sizeof *d->s)))
		return g->err = -ENOMEM, -1;
	if (z->n)
		memcpy(d->s, z->s, (size_t)z->n * sizeof *z->s);
	d->n = z->n;
	d->cp = z->cp;
	d->need = z->need;
	d->len = z->len;
	d->hash = h;
	for (int b = 0; b < 256; b++)
		d->next[b] = DS_UNKNOWN;
	d->hnext = g->ds_tab[h & g->ds_mask];
	g->ds_tab[h & g->ds_mask] = g->n_ds;
	return g->n_ds++;
}

/* What state id becomes after byte b: DS_DEAD when refused, -3 on error
 * (g->err says). */
static int32_t ds_next(hs_grammar *g, int32_t id, uint8_t b)
{
	int32_t nx = g->ds[id].next[b];
	int rc;
	if (nx != DS_UNKNOWN)
		return nx;
	const struct dstate *d = &g->ds[id];
	struct gset view = { .s = d->s, .n = d->n, .cp = d->cp, .need = d->need, .len = d->len };
	if ((rc = step_byte(g, &view, b, &g->tmp)))
		return g->err = rc, -3;
	if (!g->tmp.n)
		nx = DS_DEAD;
	else if ((nx = ds_id(g, &g->tmp)) < 0)
		return -3;
	g->ds[id].next[b] = nx;
	return nx;
}

/* The walk: tokens in byte order, the automaton's state per byte of the
 * current token; dwalk[d] is the state after its first d bytes, valid for
 * d <= valid; a dead prefix skips every token under it. */
static int mask_walk(hs_grammar *g, int32_t start, uint64_t *bits)
{
	const struct hs_tok_sorted *so = g->sorted;
	int valid = 0;
	int any_chars = 0;

	for (int i = 0; i < g->cur.n; i++)
		any_chars |= g->cur.s[i] && g->el[g->cur.s[i]->pos].kind == GE_CHARS;
	if (!any_chars)
		return 0;
	g->dwalk[0] = start;
	for (int i = 0; i < so->n; i++) {
		int32_t st;
		const uint8_t *p = so->bytes + so->off[i];
		const size_t n = so->off[i + 1] - so->off[i];
		int d;
		if (so->lcp[i] < valid)
			valid = so->lcp[i];
		if (g->dwalk[valid] == DS_DEAD)
			continue;
		for (d = valid; d < (int)n; d++) {
			st = ds_next(g, g->dwalk[d], p[d]);
			if (st < DS_DEAD)
				return g->err;
			g->dwalk[d + 1] = st;
			if (st == DS_DEAD)
				break;
		}
		valid = d < (int)n ? d + 1 : (int)n;
		if (d == (int)n && !g->named[so->ids[i]])
			BIT_SET(bits, so->ids[i]);
	}
	return 0;
}

int hs__grammar_mask_bits(hs_grammar *g, uint64_t *bits)
{
	size_t nw;
	struct mask_entry *m, *victim;
	int32_t sid;
	int rc;

	HS_NEED(g, -EINVAL);
	HS_NEED(bits, -EINVAL);
	nw = ((size_t)g->n_vocab + 63) / 64;
	if (g->err)
		return g->err;
	g->asked++;
	if (g->ended) {
		memset(bits, 0, nw * sizeof *bits);
		return 0;
	}
	if (g->n_ds >= MAX_DSTATES)
		ds_clear(g);
	if ((rc = set_copy(&g->tmp3, &g->cur)))
		return g->err = rc;
	if ((sid = ds_id(g, &g->tmp3)) < 0)
		return g->err;
	/* the cache: by state id + 1 (0 = empty) */
	victim = &g->cache[0];
	for (int i = 0; i < N_CACHE; i++) {
		m = &g->cache[i];
		if (m->key == (uint64_t)sid + 1) {
			m->used = ++g->clock;
			g->hits++;
			memcpy(bits, m->bits, nw * sizeof *bits);
			return 0;
		}
		if (m->used < victim->used)
			victim = m;
	}
	memset(bits, 0, nw * sizeof *bits);
	if ((rc = mask_walk(g, sid, bits)))
		return g->err = rc;
	token_bits(g, &g->cur, bits);
	m = victim;
	if (!m->bits && !(m->bits = malloc(nw * sizeof *m->bits)))
		return 0; /* the mask is right; it is just not kept */
	m->key = (uint64_t)sid + 1;
	m->used = ++g->clock;
	memcpy(m->bits, bits, nw * sizeof *bits);
	return 0;
}

int hs__grammar_mask_ref(hs_grammar *g, uint64_t *bits)
{
	size_t nw;
	int rc;
	HS_NEED(g, -EINVAL);
	HS_NEED(bits, -EINVAL);
	nw = ((size_t)g->n_vocab + 63) / 64;
	memset(bits, 0, nw * sizeof *bits);
	if (g->err)
		return g->err;
	if (g->ended)
		return 0;
	for (int32_t id = 0; id < g->n_vocab; id++) {
		if (!g->t && id == 256) {
			if (set_has_end(&g->cur))
				BIT_SET(bits, id);
			continue;
		}
		if ((rc = step_token(g, &g->cur, id, &g->acc)))
			return g->err = rc;
		if (g->acc.n || (is_end_token(g, id) && set_has_end(&g->cur)))
			BIT_SET(bits, id);
	}
	return 0;
}

int hs_grammar_mask(hs_grammar *g, float *logits)
{
	int rc, n = 0;
	HS_NEED(g, -EINVAL);
	HS_NEED(logits, -EINVAL);
	if ((rc = hs__grammar_mask_bits(g, g->bits)))
		return rc;
	/* a word of 64 tokens at a time: all allowed (inside a string, most
	 * are) or none (between fields, most are not) costs no bit tests */
	for (int w = 0; w * 64 < g->n_vocab; w++) {
		const uint64_t b = g->bits[w];
		const int lo = w * 64, hi = lo + 64 < g->n_vocab ? lo + 64 : g->n_vocab;
		if (b == ~0ull && hi - lo == 64) {
			n += 64;
		} else if (!b) {
			for (int i = lo; i < hi; i++)
				logits[i] = -INFINITY;
		} else {
			for (int i = lo; i < hi; i++) {
				if (b >> (i - lo) & 1)
					n++;
				else
					logits[i] = -INFINITY;
			}
		}
	}
	return n;
}

void hs__grammar_cache_stats(const hs_grammar *g, long *asked, long *hits)
{
	if (asked)
		*asked = g ? g->asked : 0;
	if (hits)
		*hits = g ? g->hits : 0;
}

int hs__grammar_n_vocab(const hs_grammar *g)
{
	return g ? g->n_vocab : 0;
}

/* ---- combining grammars ------------------------------------------------------------ */

int hs_grammar_prefix(const char *gbnf, const char *prefix, char **out)
{
	struct hs_buf b = { 0 };
	const char *p = gbnf;
	size_t pl;
	int rc = 0;

	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(gbnf, -EINVAL);
	HS_NEED(prefix, -EINVAL);
	pl = strlen(prefix);
	for (size_t i = 0; i < pl; i++)
		if (!is_word(prefix[i]))
			return hs__error(EINVAL, "grammar prefix '%.40s': only letters, digits, '-' and '_'", prefix);
	/* lexically: words are rule names, except inside literals, classes,
	 * token elements, {m,n} counts and comments */
	while (*p && !rc) {
		const char *q = p;
		char c = *p;
		if (c == '"' || c == '[') {
			char close = c == '"' ? '"' : ']';
			for (q = p + 1; *q && *q != close; q++)
				if (*q == '\\' && q[1])
					q++;
			q += *q ? 1 : 0;
		} else if (c == '<' || (c == '!' && p[1] == '<')) {
			q = strchr(p, '>');
			q = q ? q + 1 : p + strlen(p);
		} else if (c == '{') {
			q = strchr(p, '}');
			q = q ? q + 1 : p + strlen(p);
		} else if (c == '#') {
			q = p + strcspn(p, "\r\n");
		} else if (is_word(c)) {
			while (is_word(*q))
				q++;
			rc = hs__buf_put(&b, prefix, pl);
		} else {
			q = p + 1;
		}
		if (!rc)
			rc = hs__buf_put(&b, p, (size_t)(q - p));
		p = q;
	}
	if (!rc)
		rc = hs__buf_put(&b, "", 1);
	if (rc) {
		free(b.p);
		return hs__error(ENOMEM, "grammar prefix: out of memory");
	}
	*out = b.p;
	return 0;
}
