/* The tokenizer's inside, shared by its files: model/tokenizer.c (loading
 * from GGUF, lookups), model/bpe.c (encoding), model/detok.c (decoding),
 * model/chat.c and model/reply.c (chat formats). */
#ifndef HS_TOKENIZER_H
#define HS_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "hotset.h"

struct hs_gguf;

enum hs_pre { HS_PRE_O200K, HS_PRE_QWEN2 };

struct hs_token {
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

struct hs_tokenizer {
	int n_vocab;
	enum hs_pre pre;
	char *arch, *pre_name, *chat_template;
	uint8_t *pool;
	struct hs_token *tok;
	int32_t bos, eos, eot, pad;
	int add_bos;
	/* o200k merges as tiktoken does: a whole piece that is a token is
	 * that token, and two neighbouring parts merge when their bytes
	 * together are a token, lowest id (= tiktoken's rank) first; the
	 * file's merges list is not read.  qwen2 merges as llama.cpp and
	 * Hugging Face do: only pairs in the merges list, by their index. */
	int tiktoken;

	/* ordinary tokens by their bytes: slot = id + 1 (0 empty), with 32
	 * bits of the hash beside it to skip most wrong slots unread */
	uint64_t *by_bytes;
	uint32_t by_bytes_mask;
	int32_t byte_id[256];

	struct hs_merge *merges;
	uint32_t merges_mask;

	/* special tokens (control, unknown, user-defined) by their text */
	uint64_t *specials;
	uint32_t specials_mask;
	uint32_t *special_lens;    /* distinct lengths, longest first */
	int n_special_lens;
	uint8_t first_any[32];     /* first bytes of all special tokens (bitmap) */
	uint8_t first_user[32];    /* first bytes of user-defined ones */
	int n_user;                /* user-defined tokens */
	int n_special;             /* all of them */
};

/* Builds a tokenizer from a parsed GGUF (the lead's model loader uses this
 * on a file it already has open); it copies what it keeps, so g may be
 * closed afterwards.  Same errors as hs_tokenizer_open(). */
int hs__tokenizer_from_gguf(const struct hs_gguf *g, hs_tokenizer **out);

uint64_t hs__tok_hash(const uint8_t *p, size_t n);
/* The ordinary token with exactly these bytes, or -1. */
int32_t hs__tok_by_bytes(const hs_tokenizer *t, const uint8_t *p, size_t n);
/* The special token with exactly this text, or -1. */
int32_t hs__tok_special(const hs_tokenizer *t, const uint8_t *p, size_t n);
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
