/* The tokenizer's inside, shared by its files: text/tokenizer.c (loading
 * from GGUF, lookups), text/bpe.c (encoding), text/detok.c (decoding),
 * text/chat.c and text/reply.c (chat formats). */
#ifndef HS_TOKENIZER_H
#define HS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hotset.h"

struct hs_gguf;

enum hs_pre { HS_PRE_O200K, HS_PRE_QWEN2, HS_PRE_QWEN35, HS_PRE_GLM4 };

struct hs_vocab_token {
	uint32_t off, len; /* its bytes in the pool: decoded for ordinary tokens, the text for special ones */
	uint8_t type;      /* enum hs_token_type */
};

/* One BPE merge from the file's merges list: the pair (left, right)
 * becomes `merged`; lower rank (the index in the list) first. */
struct hs_merge {
	uint64_t key; /* (left + 1) << 32 | (right + 1); 0 marks an empty slot */
	uint32_t rank;
	int32_t merged;
};

/* A slot of the tables of ids by bytes (open addressing, linear probes):
 * the first 8 bytes of the token (zero-padded) and 24 bits of the hash with
 * the length, so that a token of up to 8 bytes, most of them, is found or
 * passed over without reading anything else. */
struct hs_tok_slot {
	uint64_t key8;
	uint32_t id1;    /* id + 1; 0 = empty */
	uint32_t fp_len; /* hash bits << 8 | min(length, 255) */
};

/* What merging two single bytes gives (every pair is looked up up front). */
struct hs_byte_pair {
	uint32_t rank; /* UINT32_MAX: they do not merge */
	int32_t merged;
};

struct hs_tokenizer {
	int n_vocab;
	enum hs_pre pre;
	char *arch, *pre_name, *chat_template;
	uint8_t *pool;
	struct hs_vocab_token *tok;
	int32_t bos, eos, eot, pad;
	int add_bos;
	/* o200k merges as tiktoken does: a whole piece that is a token is
	 * that token, and two neighbouring parts merge when their bytes
	 * together are a token, lowest id (= tiktoken's rank) first; the
	 * file's merges list is not read.  qwen2 merges as llama.cpp and
	 * Hugging Face do: only pairs in the merges list, by their index. */
	int tiktoken;

	/* ordinary tokens by their bytes */
	struct hs_tok_slot *by_bytes;
	uint32_t by_bytes_mask;
	int32_t byte_id[256];

	struct hs_merge *merges;
	uint32_t merges_mask;
	struct hs_byte_pair *byte_pairs; /* [first << 8 | second] */

	/* special tokens (control, unknown, user-defined) by their text */
	struct hs_tok_slot *specials;
	uint32_t specials_mask;
	uint32_t *special_lens;    /* distinct lengths, longest first */
	int n_special_lens;
	uint8_t first_any[32];     /* first bytes of all special tokens (bitmap) */
	uint8_t first_user[32];    /* first bytes of user-defined ones */
	int n_user;                /* user-defined tokens */
	int n_special;             /* all of them */
	struct hs_tok_sorted *sorted; /* the ordinary tokens in byte order, built by the first grammar (text/grammar.c) */
};

/* Builds a tokenizer from a parsed GGUF (the lead's model loader uses this
 * on a file it already has open); it copies what it keeps, so g may be
 * closed afterwards.  Same errors as hs_tokenizer_open(). */
/* Frees what tokenizer's sorted points to (text/grammar.c built it). */
struct hs_tok_sorted;
void hs__tok_sorted_free(struct hs_tok_sorted *s);
int hs__tokenizer_from_gguf(const struct hs_gguf *g, hs_tokenizer **out);

/* The first min(n, 8) bytes of p as a little-endian number, zero above:
 * reads nothing past p[n - 1]. */
static inline uint64_t hs__tok_key8(const uint8_t *p, size_t n)
{
	uint64_t k = 0;
	uint32_t a, b;

	if (n >= 8) {
		memcpy(&k, p, 8);
	} else if (n >= 4) {
		memcpy(&a, p, 4);
		memcpy(&b, p + n - 4, 4);
		k = a | (uint64_t)b << (8 * (n - 4));
	} else if (n) {
		k = p[0] | (uint64_t)p[n / 2] << (8 * (n / 2)) | (uint64_t)p[n - 1] << (8 * (n - 1));
	}
	return k;
}

/* The hash of p[0..n); key8 = hs__tok_key8(p, n). */
uint64_t hs__tok_hash_long(const uint8_t *p, size_t n);
static inline uint64_t hs__tok_hash(const uint8_t *p, size_t n, uint64_t key8)
{
	uint64_t h;

	if (n > 8)
		return hs__tok_hash_long(p, n);
	h = (key8 ^ (0x9E3779B97F4A7C15ull * (n + 1))) * 0xBF58476D1CE4E5B9ull;
	h ^= h >> 31;
	h *= 0x94D049BB133111EBull;
	return h ^ (h >> 29);
}

static inline int32_t hs__tok_table_find(const hs_tokenizer *t, const struct hs_tok_slot *tab, uint32_t mask,
					 const uint8_t *p, size_t n)
{
	uint64_t k8 = hs__tok_key8(p, n), h = hs__tok_hash(p, n, k8);
	uint32_t fl = (uint32_t)(h >> 40) << 8 | (uint32_t)(n < 255 ? n : 255);

	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		const struct hs_tok_slot *s = &tab[i];
		if (!s->id1)
			return -1;
		if (s->fp_len == fl && s->key8 == k8) {
			const struct hs_vocab_token *k = &t->tok[s->id1 - 1];
			if (n <= 8 || (k->len == n && memcmp(t->pool + k->off + 8, p + 8, n - 8) == 0))
				return (int32_t)(s->id1 - 1);
		}
	}
}

/* The ordinary token with exactly these bytes, or -1. */
static inline int32_t hs__tok_by_bytes(const hs_tokenizer *t, const uint8_t *p, size_t n)
{
	return hs__tok_table_find(t, t->by_bytes, t->by_bytes_mask, p, n);
}

/* The special token with exactly this text, or -1. */
static inline int32_t hs__tok_special(const hs_tokenizer *t, const uint8_t *p, size_t n)
{
	return t->n_special ? hs__tok_table_find(t, t->specials, t->specials_mask, p, n) : -1;
}
/* The merge of the pair, or NULL. */
const struct hs_merge *hs__tok_merge(const hs_tokenizer *t, uint32_t left, uint32_t right);

static inline int hs__tok_is_control_type(int type)
{
	return type == HS_TOKEN_CONTROL || type == HS_TOKEN_UNKNOWN || type == HS_TOKEN_UNUSED;
}

/* -EINVAL with "token id X is out of range (n_vocab N)" */
int hs__tok_bad_id(const hs_tokenizer *t, int32_t id);

/* Encodes like hs_tokenize() but appends to a growing array (*ids, *n, *cap
 * owned by the caller, realloc'd here).  The chat formats use it. */
int hs__tokenize_append(const hs_tokenizer *t, const char *text, size_t len, int flags, int32_t **ids,
			int *n, int *cap);

/* UTF-8 assembly shared by the detokenizer and the reply parser: bytes in,
 * valid UTF-8 appended to a growing buffer. */
struct hs_utf8_sink {
	uint8_t pend[4];
	int n_pend;
};
struct hs_buf {
	char *p;
	size_t len, cap;
};
int hs__buf_put(struct hs_buf *b, const void *p, size_t n);
/* Feeds n bytes; complete characters (and U+FFFD for bad ones) go to out. */
int hs__utf8_feed(struct hs_utf8_sink *s, const uint8_t *p, size_t n, struct hs_buf *out);
/* A character still waiting becomes U+FFFD. */
int hs__utf8_finish(struct hs_utf8_sink *s, struct hs_buf *out);

#endif
