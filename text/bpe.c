/* Encoding: special tokens split out, the pre-tokenizer, byte-level BPE.
 *
 * BPE starts from one part per byte (as tiktoken and Hugging Face do) and
 * repeatedly merges the neighbouring pair of lowest rank, the leftmost on a
 * tie.  Short pieces (nearly all) keep their parts in an array and scan it
 * for the lowest rank, quadratic but small; long ones use a heap of pairs
 * and a linked list, so a megabyte of one letter (one piece) takes
 * O(n log n), not O(n^2). */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/unicode.h"
#include "base/error.h"

#define SHORT_PIECE 128
#define NO_RANK UINT32_MAX

/* Where ids go: a caller's fixed buffer (grow == NULL: count past max, write
 * none beyond) or a growing array. */
struct sink {
	int32_t *ids;
	int max, n;
	int32_t **grow;
	int *cap;
	int err;
};

static void emit(struct sink *o, int32_t id)
{
	if (o->grow && o->n == o->max) {
		int cap = o->max ? 2 * o->max : 64;
		int32_t *p = o->err ? NULL : realloc(*o->grow, (size_t)cap * sizeof *p);
		if (!p) {
			o->err = -ENOMEM;
			return;
		}
		*o->grow = o->ids = p;
		*o->cap = o->max = cap;
	}
	if (o->n < o->max)
		o->ids[o->n] = id;
	o->n++;
}

/* The rank and result of merging the part [a, b) with the part [b, c). */
static uint32_t pair_rank(const hs_tokenizer *t, const uint8_t *s, size_t a, size_t c, int32_t left,
			  int32_t right, int32_t *merged)
{
	if (t->tiktoken) {
		/* tiktoken: the joined bytes' own rank, which is their id */
		int32_t id = hs__tok_by_bytes(t, s + a, c - a);
		*merged = id;
		return id < 0 ? NO_RANK : (uint32_t)id;
	}
	const struct hs_merge *m = hs__tok_merge(t, (uint32_t)left, (uint32_t)right);
	*merged = m ? m->merged : -1;
	return m ? m->rank : NO_RANK;
}

struct part {
	uint32_t start, rank; /* rank of merging with the next part */
	int32_t id, merged;
};

static int bpe_short(const hs_tokenizer *t, const uint8_t *s, size_t n, int32_t *out)
{
	struct part p[SHORT_PIECE + 1];
	size_t m = n;

	for (size_t i = 0; i < n; i++)
		p[i] = (struct part){ (uint32_t)i, NO_RANK, t->byte_id[s[i]], -1 };
	p[n].start = (uint32_t)n;
	for (size_t i = 0; i + 1 < m; i++) { /* two bytes: from the table of all byte pairs */
		const struct hs_byte_pair *bp = &t->byte_pairs[s[i] << 8 | s[i + 1]];
		p[i].rank = bp->rank;
		p[i].merged = bp->merged;
	}
	for (;;) {
		uint32_t best = NO_RANK;
		size_t b = 0;
		for (size_t i = 0; i + 1 < m; i++)
			if (p[i].rank < best) {
				best = p[i].rank;
				b = i;
			}
		if (best == NO_RANK)
			break;
		p[b].id = p[b].merged;
		memmove(&p[b + 1], &p[b + 2], (m - b - 1) * sizeof p[0]); /* the end marker moves too */
		m--;
		p[b].rank = NO_RANK;
		if (b + 1 < m)
			p[b].rank = pair_rank(t, s, p[b].start, p[b + 2].start, p[b].id, p[b + 1].id, &p[b].merged);
		if (b > 0)
			p[b - 1].rank = pair_rank(t, s, p[b - 1].start, p[b + 1].start, p[b - 1].id, p[b].id,
						  &p[b - 1].merged);
	}
	for (size_t i = 0; i < m; i++)
		out[i] = p[i].id;
	return (int)m;
}

/* ---- long pieces: a heap of candidate pairs over a linked list -------- */

struct cand {
	uint64_t key;     /* rank << 32 | left part's start: lowest rank, then leftmost */
	uint32_t right;   /* the right part when this was pushed */
	uint32_t end;     /* and where it ended: a pair is stale when either changed */
};

struct long_bpe {
	const hs_tokenizer *t;
	const uint8_t *s;
	uint32_t n;
	uint32_t *next, *prev; /* by a part's start; n = none */
	int32_t *id;
	struct cand *heap;
	size_t n_heap;
};

static void heap_push(struct long_bpe *L, struct cand c)
{
	size_t i = L->n_heap++;

	while (i > 0 && L->heap[(i - 1) / 2].key > c.key) {
		L->heap[i] = L->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	L->heap[i] = c;
}

static struct cand heap_pop(struct long_bpe *L)
{
	struct cand top = L->heap[0], last = L->heap[--L->n_heap];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= L->n_heap)
			break;
		if (c + 1 < L->n_heap && L->heap[c + 1].key < L->heap[c].key)
			c++;
		if (L->heap[c].key >= last.key)
			break;
		L->heap[i] = L->heap[c];
		i = c;
	}
	if (L->n_heap)
		L->heap[i] = last;
	return top;
}

static void push_pair(struct long_bpe *L, uint32_t left)
{
	uint32_t right = L->next[left], end;
	int32_t merged;
	uint32_t rank;

	if (right >= L->n)
		return;
	end = L->next[right];
	rank = pair_rank(L->t, L->s, left, end, L->id[left], L->id[right], &merged);
	if (rank != NO_RANK)
		heap_push(L, (struct cand){ (uint64_t)rank << 32 | left, right, end });
}

static int bpe_long(const hs_tokenizer *t, const uint8_t *s, size_t n, struct sink *o)
{
	struct long_bpe L = { t, s, (uint32_t)n, NULL, NULL, NULL, NULL, 0 };
	int rc = 0;

	if (n >= UINT32_MAX / 4)
		return hs__error(EINVAL, "tokenize: a piece of %zu bytes is too long", n);
	L.next = malloc(n * sizeof *L.next);
	L.prev = malloc(n * sizeof *L.prev);
	L.id = malloc(n * sizeof *L.id);
	/* n pairs at first, then at most two new ones per merge (n - 1 merges) */
	L.heap = malloc(3 * n * sizeof *L.heap);
	if (!L.next || !L.prev || !L.id || !L.heap) {
		rc = hs__error(ENOMEM, "tokenize: out of memory for a piece of %zu bytes", n);
		goto out_free;
	}
	for (uint32_t i = 0; i < n; i++) {
		L.next[i] = i + 1;
		L.prev[i] = i ? i - 1 : L.n;
		L.id[i] = t->byte_id[s[i]];
	}
	for (uint32_t i = 0; i + 1 < n; i++)
		push_pair(&L, i);
	while (L.n_heap) {
		struct cand c = heap_pop(&L);
		uint32_t left = (uint32_t)c.key;
		int32_t merged;
		/* stale when the left part was absorbed, or either part grew */
		if (L.prev[left] == UINT32_MAX || L.next[left] != c.right || L.next[c.right] != c.end)
			continue;
		pair_rank(t, s, left, c.end, L.id[left], L.id[c.right], &merged);
		L.id[left] = merged;
		L.next[left] = c.end;
		if (c.end < L.n)
			L.prev[c.end] = left;
		L.prev[c.right] = UINT32_MAX; /* absorbed */
		push_pair(&L, left);
		if (L.prev[left] < L.n)
			push_pair(&L, L.prev[left]);
	}
	for (uint32_t i = 0; i < n; i = L.next[i])
		emit(o, L.id[i]);
out_free:
	free(L.next);
	free(L.prev);
	free(L.id);
	free(L.heap);
	return rc;
}

/* Long texts repeat their words: the merges of each piece that is not a
 * token itself are kept, for the length of one call, in a direct-mapped
 * cache of recent pieces (a piece is always merged the same way). */
#define CACHE_FROM 4096 /* texts shorter than this do not set one up */

struct piece_cache {
	struct cache_slot {
		const uint8_t *p; /* the piece in the caller's text */
		uint32_t len, at; /* its bytes; its ids at ids[at] */
		uint16_t n;
	} *slot;
	int32_t *ids;
	uint32_t mask, cap_ids, used; /* when the ids are used up, it starts again empty */
};

/* One slot per 64 bytes of text, 1,024 to 4,096 of them, 16 ids each (up to
 * 16,384 ran slower in one noisy run on the 10 MB corpus: the cache may crowd
 * the token tables out of the CPU's caches). */
static struct piece_cache *cache_new(size_t len)
{
	struct piece_cache *c = calloc(1, sizeof *c);
	uint32_t slots = 1024;

	while (slots < 4096 && slots < len / 64)
		slots *= 2;
	if (c && (c->slot = calloc(slots, sizeof *c->slot)) && (c->ids = malloc(16 * slots * sizeof *c->ids))) {
		c->mask = slots - 1;
		c->cap_ids = 16 * slots;
		return c;
	}
	if (c)
		free(c->slot);
	free(c);
	return NULL; /* no cache is no loss: it only saves time */
}

static void cache_free(struct piece_cache *c)
{
	if (c) {
		free(c->slot);
		free(c->ids);
		free(c);
	}
}

static int encode_piece(const hs_tokenizer *t, const uint8_t *s, size_t n, struct sink *o, struct piece_cache *c)
{
	int32_t out[SHORT_PIECE];
	uint32_t k = 0;
	int m;

	if (n == 1) {
		emit(o, t->byte_id[s[0]]);
		return 0;
	}
	if (t->tiktoken) {
		int32_t id = hs__tok_by_bytes(t, s, n);
		if (id >= 0) {
			emit(o, id);
			return 0;
		}
	}
	if (n > SHORT_PIECE)
		return bpe_long(t, s, n, o);
	if (c) {
		k = (uint32_t)hs__tok_hash(s, n, hs__tok_key8(s, n)) & c->mask;
		if (c->slot[k].len == n && memcmp(c->slot[k].p, s, n) == 0) {
			for (int i = 0; i < c->slot[k].n; i++)
				emit(o, c->ids[c->slot[k].at + (uint32_t)i]);
			return 0;
		}
	}
	m = bpe_short(t, s, n, out);
	for (int i = 0; i < m; i++)
		emit(o, out[i]);
	if (c && c->used + (uint32_t)m > c->cap_ids) {
		memset(c->slot, 0, ((size_t)c->mask + 1) * sizeof *c->slot);
		c->used = 0;
	}
	if (c) {
		memcpy(c->ids + c->used, out, (size_t)m * sizeof *out);
		c->slot[k].p = s;
		c->slot[k].len = (uint32_t)n;
		c->slot[k].at = c->used;
		c->slot[k].n = (uint16_t)m;
		c->used += (uint32_t)m;
	}
	return 0;
}

static int encode_text(const hs_tokenizer *t, const uint8_t *s, size_t n, struct sink *o, struct piece_cache *c)
{
	size_t (*split)(const uint8_t *, size_t) = t->pre == HS_PRE_O200K    ? hs__pretok_o200k
						   : t->pre == HS_PRE_QWEN35 ? hs__pretok_qwen35
						   : t->pre == HS_PRE_GLM4   ? hs__pretok_glm4
									     : hs__pretok_qwen2;
	int rc;

	for (size_t i = 0, len; i < n; i += len) {
		len = split(s + i, n - i);
		if ((rc = encode_piece(t, s + i, len, o, c)))
			return rc;
	}
	return 0;
}

/* The first special token at or after s[from] that these flags split out:
 * its start (n when none), id and length.  Longest first at each place. */
static size_t find_special(const hs_tokenizer *t, const uint8_t *s, size_t from, size_t n, int flags, int32_t *id,
			   size_t *len)
{
	int parse = flags & HS_TOK_PARSE_SPECIAL;
	const uint8_t *first = parse ? t->first_any : t->first_user;

	if (!t->n_special || (!parse && !t->n_user))
		return n;
	for (size_t p = from; p < n; p++) {
		if (!(first[s[p] >> 3] & (1u << (s[p] & 7))))
			continue;
		for (int k = 0; k < t->n_special_lens; k++) {
			size_t L = t->special_lens[k];
			int32_t i;
			if (L > n - p || (i = hs__tok_special(t, s + p, L)) < 0)
				continue;
			if (!parse && t->tok[i].type != HS_TOKEN_USER_DEFINED)
				continue;
			*id = i;
			*len = L;
			return p;
		}
	}
	return n;
}

static int encode(const hs_tokenizer *t, const char *text, size_t len, int flags, struct sink *o)
{
	const uint8_t *s = (const uint8_t *)text;
	struct piece_cache *c = len >= CACHE_FROM ? cache_new(len) : NULL;
	size_t pos = 0;
	int rc = 0;

	if (len > INT_MAX - 1) {
		cache_free(c);
		return hs__error(EINVAL, "tokenize: a text of %zu bytes is longer than %d", len, INT_MAX - 1);
	}
	if ((flags & HS_TOK_ADD_BOS) && t->add_bos && t->bos >= 0)
		emit(o, t->bos);
	while (pos < len) {
		int32_t id = -1;
		size_t sp_len = 0, sp = find_special(t, s, pos, len, flags, &id, &sp_len);
		if ((rc = encode_text(t, s + pos, sp - pos, o, c)) || sp == len)
			break;
		emit(o, id);
		pos = sp + sp_len;
	}
	cache_free(c);
	return rc ? rc : o->err;
}

int hs_tokenize(const hs_tokenizer *t, const char *text, size_t len, int flags, int32_t *ids, int max_ids)
{
	HS_NEED(t, -EINVAL);
	if (len)
		HS_NEED(text, -EINVAL);
	if (max_ids < 0)
		return hs__error(EINVAL, "tokenize: max_ids %d is negative", max_ids);
	if (max_ids)
		HS_NEED(ids, -EINVAL);
	struct sink o = { ids, max_ids, 0, NULL, NULL, 0 };
	int rc = encode(t, len ? text : "", len, flags, &o);

	return rc ? rc : o.n;
}

int hs__tokenize_append(const hs_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids, int *n,
			int *cap)
{
	struct sink o = { *ids, *cap, *n, ids, cap, 0 };
	int rc = encode(t, text, len, flags, &o);

	if (!rc)
		*n = o.n;
	return rc;
}
