/* The tokenizer read from a GGUF file's tokenizer.ggml.* keys, and its
 * lookups.  The arrays come from an untrusted file: every string is read
 * through a cursor bounded by the file, every count and id is checked before
 * use, and all sizes are limited before anything is allocated. */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"
#include "text/unicode.h"
#include "base/error.h"
#include "model/gguf.h"

#define MAX_TOKENS (1 << 24)     /* n_vocab must fit an int32 id with room */
#define MAX_POOL (UINT32_MAX - 1) /* token bytes in all, 32-bit offsets */
#define MAX_TOKEN 65536           /* bytes of one token (real ones have at most a few hundred) */

/* ---- GGUF string arrays, walked once in order --------------------------- */

struct str_iter {
	const uint8_t *p, *end;
	const char *key;
};

static int str_array(const struct hs_gguf *g, const char *key, int required, uint64_t *n, struct str_iter *it)
{
	const struct hs_gguf_kv *kv = hs__gguf_find_kv(g, key);

	*n = 0;
	if (!kv)
		return required ? hs__error(EINVAL, "tokenizer: %s is missing", key) : 0;
	if (kv->type != HS_GGUF_ARRAY || kv->arr_type != HS_GGUF_STRING)
		return hs__error(EIO, "tokenizer: %s is %s, not an array of strings", key,
				 kv->type == HS_GGUF_ARRAY ? "an array of another type" : hs__gguf_vtype_name(kv->type));
	*n = kv->arr_n;
	it->p = kv->value + 12; /* element type u32, count u64 */
	it->end = g->shards[0].base + g->shards[0].size; /* the metadata's file (split: the first) */
	it->key = key;
	return 0;
}

static int str_next(struct str_iter *it, uint64_t i, const uint8_t **s, uint64_t *len)
{
	if (it->end - it->p < 8)
		return hs__error(EIO, "tokenizer: %s[%llu] lies past the end of the file", it->key, (unsigned long long)i);
	memcpy(len, it->p, 8);
	if (*len > (uint64_t)(it->end - it->p - 8))
		return hs__error(EIO, "tokenizer: %s[%llu] claims %llu bytes, more than the file holds", it->key,
				 (unsigned long long)i, (unsigned long long)*len);
	*s = it->p + 8;
	it->p += 8 + *len;
	return 0;
}

static int get_id(const struct hs_gguf *g, const char *key, int n_vocab, int32_t *id)
{
	uint64_t v;
	int rc = hs__gguf_get_u64(g, key, &v);

	*id = -1;
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return hs__error(EIO, "tokenizer: %s is not a token id (a non-negative integer)", key);
	if (v >= (uint64_t)n_vocab)
		return hs__error(EIO, "tokenizer: %s is %llu, out of range (n_vocab %d)", key, (unsigned long long)v,
				 n_vocab);
	*id = (int32_t)v;
	return 0;
}

static char *copy_str(const struct hs_gguf *g, const char *key, const char *dflt)
{
	struct hs_gguf_str s;

	if (hs__gguf_get_str(g, key, &s) != 0)
		return dflt ? strdup(dflt) : NULL;
	return strndup(s.p, s.n);
}

/* ---- hashing ---------------------------------------------------------- */

uint64_t hs__tok_hash_long(const uint8_t *p, size_t n)
{
	uint64_t h = 0x9E3779B97F4A7C15ull * (n + 1), w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 31;
	}
	h = (h ^ hs__tok_key8(p, n)) * 0x94D049BB133111EBull;
	h ^= h >> 29;
	h *= 0xBF58476D1CE4E5B9ull;
	return h ^ (h >> 32);
}

/* Tables of ids by bytes (struct hs_tok_slot), at most half full. */
static uint32_t table_mask(uint64_t n)
{
	uint64_t size = 16;

	while (size < 2 * n)
		size *= 2;
	return (uint32_t)(size - 1);
}

/* Adds id unless a token with the same bytes is there (the first id wins). */
static void table_add(const hs_tokenizer *t, struct hs_tok_slot *tab, uint32_t mask, int32_t id)
{
	const struct hs_vocab_token *k = &t->tok[id];
	const uint8_t *p = t->pool + k->off;
	uint64_t k8 = hs__tok_key8(p, k->len), h = hs__tok_hash(p, k->len, k8);

	if (hs__tok_table_find(t, tab, mask, p, k->len) >= 0)
		return;
	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask)
		if (!tab[i].id1) {
			tab[i] = (struct hs_tok_slot){ k8, (uint32_t)id + 1,
						       (uint32_t)(h >> 40) << 8 | (k->len < 255 ? k->len : 255) };
			return;
		}
}

static uint64_t merge_key(uint32_t left, uint32_t right)
{
	return (uint64_t)(left + 1) << 32 | (right + 1);
}

static uint32_t mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xFF51AFD7ED558CCDull;
	k ^= k >> 33;
	return (uint32_t)k;
}

const struct hs_merge *hs__tok_merge(const hs_tokenizer *t, uint32_t left, uint32_t right)
{
	uint64_t key = merge_key(left, right);

	if (!t->merges)
		return NULL;
	for (uint32_t i = mix64(key) & t->merges_mask;; i = (i + 1) & t->merges_mask) {
		if (t->merges[i].key == key)
			return &t->merges[i];
		if (!t->merges[i].key)
			return NULL;
	}
}

/* ---- byte-level text (GPT-2's bytes_to_unicode) ------------------------- */

/* Code point -> byte for the 256 code points that stand for bytes: the
 * printable bytes stand for themselves, the other 68 for U+0100 onwards in
 * order; -1 for every other code point. */
static void byte_level_map(int16_t map[324])
{
	int k = 0;

	for (int i = 0; i < 324; i++)
		map[i] = -1;
	for (int b = 0; b < 256; b++) {
		int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
		map[printable ? b : 256 + k++] = (int16_t)b;
	}
}

/* Decodes byte-level text into out (at most n bytes); -1 when a character
 * stands for no byte. */
static long byte_level_decode(const int16_t map[324], const uint8_t *s, size_t n, uint8_t *out)
{
	size_t o = 0;
	int len;

	for (size_t i = 0; i < n; i += len) {
		uint32_t cp = hs__utf8_decode(s + i, n - i, &len);
		if (cp >= 324 || map[cp] < 0)
			return -1;
		out[o++] = (uint8_t)map[cp];
	}
	return (long)o;
}

/* ---- loading ---------------------------------------------------------- */

static int load_tokens(const struct hs_gguf *g, hs_tokenizer *t)
{
	const struct hs_gguf_kv *types = hs__gguf_find_kv(g, "tokenizer.ggml.token_type");
	struct str_iter it;
	uint64_t n, pool_len = 0;
	int16_t map[324];
	int rc;

	if ((rc = str_array(g, "tokenizer.ggml.tokens", 1, &n, &it)))
		return rc;
	if (n < 1 || n > MAX_TOKENS)
		return hs__error(EIO, "tokenizer: tokenizer.ggml.tokens has %llu tokens (1..%d allowed)",
				 (unsigned long long)n, MAX_TOKENS);
	if (types && (types->type != HS_GGUF_ARRAY ||
		      (types->arr_type != HS_GGUF_INT32 && types->arr_type != HS_GGUF_UINT32) || types->arr_n != n))
		return hs__error(EIO, "tokenizer: tokenizer.ggml.token_type must be an array of %llu int32 "
				 "(one per token)", (unsigned long long)n);
	/* first pass: the texts' total length bounds the pool (decoding
	 * byte-level text never makes it longer) */
	struct str_iter first = it;
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *s;
		uint64_t len;
		if ((rc = str_next(&first, i, &s, &len)))
			return rc;
		if (len > MAX_TOKEN)
			return hs__error(EIO, "tokenizer: token %llu is %llu bytes long (at most %d)", (unsigned long long)i,
					 (unsigned long long)len, MAX_TOKEN);
		pool_len += len;
	}
	if (pool_len > MAX_POOL)
		return hs__error(EIO, "tokenizer: the tokens' texts are too long in all (%llu bytes)",
				 (unsigned long long)pool_len);
	t->n_vocab = (int)n;
	t->tok = calloc(n, sizeof *t->tok);
	t->pool = malloc(pool_len ? pool_len : 1);
	if (!t->tok || !t->pool)
		return hs__error(ENOMEM, "tokenizer: out of memory for %llu tokens", (unsigned long long)n);
	pool_len = 0;
	byte_level_map(map);
	for (uint64_t i = 0; i < n; i++) {
		struct hs_vocab_token *k = &t->tok[i];
		const uint8_t *s;
		uint64_t len;
		int32_t type = HS_TOKEN_NORMAL;
		long dec;

		if ((rc = str_next(&it, i, &s, &len)))
			return rc;
		if (types) {
			memcpy(&type, types->value + 12 + 4 * i, 4);
			if (type == 0) /* llama.cpp's "undefined": an ordinary token */
				type = HS_TOKEN_NORMAL;
			if (type < 1 || type > 6)
				return hs__error(EIO, "tokenizer: token %llu has type %d (1..6 are defined)",
						 (unsigned long long)i, type);
		}
		k->type = (uint8_t)type;
		k->off = (uint32_t)pool_len;
		dec = -1;
		if (type == HS_TOKEN_BYTE && len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' &&
		    isxdigit(s[3]) && isxdigit(s[4])) { /* "<0xAB>", as SentencePiece writes byte tokens */
			char hex[3] = { (char)s[3], (char)s[4], 0 };
			t->pool[pool_len] = (uint8_t)strtol(hex, NULL, 16);
			dec = 1;
		}
		if (dec < 0 && (type == HS_TOKEN_NORMAL || type == HS_TOKEN_BYTE))
			dec = byte_level_decode(map, s, len, t->pool + pool_len);
		if (dec < 0) { /* special tokens, and text that is not byte-level: as written */
			memcpy(t->pool + pool_len, s, len);
			dec = (long)len;
		}
		k->len = (uint32_t)dec;
		pool_len += (uint64_t)dec;
	}
	return 0;
}

static int build_tables(hs_tokenizer *t)
{
	uint32_t n_lens = 0, cap_lens = 0;
	int n_ordinary = 0;

	for (int i = 0; i < t->n_vocab; i++) {
		int ty = t->tok[i].type;
		if (ty == HS_TOKEN_NORMAL || ty == HS_TOKEN_BYTE)
			n_ordinary++;
		else if (ty != HS_TOKEN_UNUSED && t->tok[i].len)
			t->n_special++;
	}
	t->by_bytes_mask = table_mask((uint64_t)n_ordinary);
	t->specials_mask = table_mask((uint64_t)t->n_special);
	t->by_bytes = calloc((size_t)t->by_bytes_mask + 1, sizeof *t->by_bytes);
	t->specials = calloc((size_t)t->specials_mask + 1, sizeof *t->specials);
	if (!t->by_bytes || !t->specials)
		return hs__error(ENOMEM, "tokenizer: out of memory");
	for (int i = 0; i < 256; i++)
		t->byte_id[i] = -1;
	for (int i = 0; i < t->n_vocab; i++) {
		const struct hs_vocab_token *k = &t->tok[i];
		if (k->type == HS_TOKEN_NORMAL || k->type == HS_TOKEN_BYTE) {
			table_add(t, t->by_bytes, t->by_bytes_mask, i);
			if (k->len == 1 && t->byte_id[t->pool[k->off]] < 0)
				t->byte_id[t->pool[k->off]] = i;
			continue;
		}
		if (k->type == HS_TOKEN_UNUSED || !k->len)
			continue;
		table_add(t, t->specials, t->specials_mask, i);
		uint8_t first = t->pool[k->off];
		t->first_any[first >> 3] |= (uint8_t)(1u << (first & 7));
		if (k->type == HS_TOKEN_USER_DEFINED) {
			t->first_user[first >> 3] |= (uint8_t)(1u << (first & 7));
			t->n_user++;
		}
		uint32_t j = 0;
		while (j < n_lens && t->special_lens[j] != k->len)
			j++;
		if (j == n_lens) {
			if (n_lens == cap_lens) {
				uint32_t *p = realloc(t->special_lens, (cap_lens = cap_lens ? 2 * cap_lens : 16) * sizeof *p);
				if (!p)
					return hs__error(ENOMEM, "tokenizer: out of memory");
				t->special_lens = p;
			}
			/* keep them longest first */
			for (j = n_lens; j > 0 && t->special_lens[j - 1] < k->len; j--)
				t->special_lens[j] = t->special_lens[j - 1];
			t->special_lens[j] = k->len;
			n_lens++;
		}
	}
	t->n_special_lens = (int)n_lens;
	for (int b = 0; b < 256; b++)
		if (t->byte_id[b] < 0)
			return hs__error(EINVAL, "tokenizer: byte 0x%02x has no token (a byte-level BPE vocabulary "
					 "needs all 256)", b);
	return 0;
}

/* The merges list ("left right" in byte-level text), for the qwen2 kind. */
static int load_merges(const struct hs_gguf *g, hs_tokenizer *t)
{
	struct str_iter it;
	uint64_t n;
	int16_t map[324];
	uint8_t *buf = NULL;
	size_t buf_cap = 0;
	int rc;

	if ((rc = str_array(g, "tokenizer.ggml.merges", 0, &n, &it)) || n == 0)
		return rc;
	if (n > UINT32_MAX / 4)
		return hs__error(EIO, "tokenizer: %llu merges is too many", (unsigned long long)n);
	t->merges_mask = table_mask(n);
	t->merges = calloc((size_t)t->merges_mask + 1, sizeof *t->merges);
	if (!t->merges)
		return hs__error(ENOMEM, "tokenizer: out of memory for %llu merges", (unsigned long long)n);
	byte_level_map(map);
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *s, *sp;
		uint64_t len;
		long a, b;
		int32_t l, r, m;

		if ((rc = str_next(&it, i, &s, &len)))
			break;
		/* llama.cpp splits at the first space after the first byte */
		sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
		if (!sp) {
			rc = hs__error(EIO, "tokenizer: merge %llu has no space between its two parts",
				       (unsigned long long)i);
			break;
		}
		if (len > buf_cap) {
			free(buf);
			buf = malloc(buf_cap = len * 2);
			if (!buf) {
				rc = hs__error(ENOMEM, "tokenizer: out of memory");
				break;
			}
		}
		a = byte_level_decode(map, s, (size_t)(sp - s), buf);
		b = a < 0 ? -1 : byte_level_decode(map, sp + 1, (size_t)(s + len - sp - 1), buf + a);
		if (b < 0) /* text that stands for no bytes: no token has it */
			continue;
		l = hs__tok_by_bytes(t, buf, (size_t)a);
		r = hs__tok_by_bytes(t, buf + a, (size_t)b);
		m = hs__tok_by_bytes(t, buf, (size_t)(a + b));
		if (l < 0 || r < 0 || m < 0) /* a merge to or from no token cannot be used */
			continue;
		uint64_t key = merge_key((uint32_t)l, (uint32_t)r);
		for (uint32_t k = mix64(key) & t->merges_mask;; k = (k + 1) & t->merges_mask) {
			if (t->merges[k].key == key)
				break; /* a repeated pair keeps its first rank */
			if (!t->merges[k].key) {
				t->merges[k] = (struct hs_merge){ key, (uint32_t)i, m };
				break;
			}
		}
	}
	free(buf);
	return rc;
}

/* The first merges of every piece, two single bytes, from one table. */
static int byte_pairs(hs_tokenizer *t)
{
	t->byte_pairs = malloc(65536 * sizeof *t->byte_pairs);
	if (!t->byte_pairs)
		return hs__error(ENOMEM, "tokenizer: out of memory");
	for (int a = 0; a < 256; a++)
		for (int b = 0; b < 256; b++) {
			struct hs_byte_pair *bp = &t->byte_pairs[a << 8 | b];
			uint8_t two[2] = { (uint8_t)a, (uint8_t)b };
			const struct hs_merge *m;
			if (t->tiktoken) { /* the two bytes' own rank, their id */
				bp->merged = hs__tok_by_bytes(t, two, 2);
				bp->rank = bp->merged < 0 ? UINT32_MAX : (uint32_t)bp->merged;
			} else {
				m = hs__tok_merge(t, (uint32_t)t->byte_id[a], (uint32_t)t->byte_id[b]);
				bp->merged = m ? m->merged : -1;
				bp->rank = m ? m->rank : UINT32_MAX;
			}
		}
	return 0;
}

void hs_tokenizer_free(hs_tokenizer *t)
{
	if (!t)
		return;
	free(t->arch);
	free(t->pre_name);
	free(t->chat_template);
	free(t->pool);
	free(t->tok);
	free(t->by_bytes);
	free(t->specials);
	free(t->special_lens);
	free(t->merges);
	free(t->byte_pairs);
	hs__tok_sorted_free(t->sorted);
	free(t);
}

int hs__tokenizer_from_gguf(const struct hs_gguf *g, hs_tokenizer **out)
{
	struct hs_gguf_str model, pre;
	hs_tokenizer *t;
	int rc;

	*out = NULL;
	if ((rc = hs__gguf_get_str(g, "tokenizer.ggml.model", &model)))
		return rc == -ENOENT ? hs__error(EINVAL, "tokenizer: the file has no tokenizer (tokenizer.ggml.model)")
				     : rc;
	if (model.n != 4 || memcmp(model.p, "gpt2", 4) != 0)
		return hs__error(EINVAL, "tokenizer: tokenizer.ggml.model is '%.*s'; hotset reads 'gpt2' (byte-level BPE)",
				 (int)(model.n > 40 ? 40 : model.n), model.p);
	if ((rc = hs__gguf_get_str(g, "tokenizer.ggml.pre", &pre)))
		return rc == -ENOENT ? hs__error(EINVAL, "tokenizer: tokenizer.ggml.pre is missing; hotset reads "
						 "'gpt-4o', 'qwen2', 'qwen35' and 'glm4'") : rc;
	t = calloc(1, sizeof *t);
	if (!t)
		return hs__error(ENOMEM, "tokenizer: out of memory");
	if (pre.n == 6 && memcmp(pre.p, "gpt-4o", 6) == 0) {
		t->pre = HS_PRE_O200K;
		t->tiktoken = 1;
	} else if (pre.n == 5 && memcmp(pre.p, "qwen2", 5) == 0) {
		t->pre = HS_PRE_QWEN2;
	} else if (pre.n == 6 && memcmp(pre.p, "qwen35", 6) == 0) {
		t->pre = HS_PRE_QWEN35;
	} else if ((pre.n == 4 && memcmp(pre.p, "glm4", 4) == 0) || (pre.n == 11 && memcmp(pre.p, "chatglm-bpe", 11) == 0)) {
		t->pre = HS_PRE_GLM4;
	} else {
		rc = hs__error(EINVAL, "tokenizer: pre-tokenizer '%.*s' is not one hotset implements ('gpt-4o', 'qwen2', "
				       "'qwen35', 'glm4')",
			       (int)(pre.n > 40 ? 40 : pre.n), pre.p);
		goto out_free;
	}
	t->pre_name = strndup(pre.p, pre.n);
	t->arch = copy_str(g, "general.architecture", "");
	t->chat_template = copy_str(g, "tokenizer.chat_template", NULL);
	if (!t->pre_name || !t->arch) {
		rc = hs__error(ENOMEM, "tokenizer: out of memory");
		goto out_free;
	}
	if ((rc = load_tokens(g, t)) || (rc = build_tables(t)) || (!t->tiktoken && (rc = load_merges(g, t))) ||
	    (rc = byte_pairs(t)))
		goto out_free;
	if ((rc = get_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos)) ||
	    (rc = get_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos)) ||
	    (rc = get_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot)) ||
	    (rc = get_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad)))
		goto out_free;
	const struct hs_gguf_kv *ab = hs__gguf_find_kv(g, "tokenizer.ggml.add_bos_token");
	if (ab && ab->type == HS_GGUF_BOOL)
		t->add_bos = ab->value[0] != 0;
	if (t->eot < 0) {
		enum hs_chat_format f = hs_chat_format_of(t);
		t->eot = hs_tokenizer_find(t, f == HS_CHAT_HARMONY                      ? "<|return|>"
					      : f == HS_CHAT_CHATML || f == HS_CHAT_QWEN35 ? "<|im_end|>"
					      : f == HS_CHAT_GLM                          ? "<|user|>"
										  : "");
	}
	*out = t;
	return 0;

out_free:
	hs_tokenizer_free(t);
	return rc;
}

int hs_tokenizer_open(const char *gguf_path, hs_tokenizer **out)
{
	struct hs_gguf *g;
	int rc;

	HS_NEED(out, -EINVAL);
	*out = NULL;
	HS_NEED(gguf_path, -EINVAL);
	if ((rc = hs__gguf_open(gguf_path, &g)))
		return rc;
	rc = hs__tokenizer_from_gguf(g, out);
	hs__gguf_close(g);
	if (rc && rc != -ENOMEM) { /* name the file in the message */
		char msg[400];
		snprintf(msg, sizeof msg, "%s", hs_last_error());
		rc = hs__error(-rc, "%s: %s", gguf_path, msg);
	}
	return rc;
}

/* ---- queries ---------------------------------------------------------- */

int hs__tok_bad_id(const hs_tokenizer *t, int32_t id)
{
	return hs__error(EINVAL, "token id %ld is out of range (n_vocab %d)", (long)id, t->n_vocab);
}

int hs_tokenizer_n_vocab(const hs_tokenizer *t)
{
	HS_NEED(t, -EINVAL);
	return t->n_vocab;
}

int32_t hs_tokenizer_bos(const hs_tokenizer *t)
{
	HS_NEED(t, -EINVAL);
	return t->bos;
}

int32_t hs_tokenizer_eos(const hs_tokenizer *t)
{
	HS_NEED(t, -EINVAL);
	return t->eos;
}

int32_t hs_tokenizer_eot(const hs_tokenizer *t)
{
	HS_NEED(t, -EINVAL);
	return t->eot;
}

int32_t hs_tokenizer_find(const hs_tokenizer *t, const char *text)
{
	int32_t id;

	HS_NEED(t, -EINVAL);
	HS_NEED(text, -EINVAL);
	size_t n = strlen(text);
	if (!n)
		return -1;
	id = hs__tok_special(t, (const uint8_t *)text, n);
	return id >= 0 ? id : hs__tok_by_bytes(t, (const uint8_t *)text, n);
}

int hs_tokenizer_token_type(const hs_tokenizer *t, int32_t id)
{
	HS_NEED(t, -EINVAL);
	if (id < 0 || id >= t->n_vocab)
		return hs__tok_bad_id(t, id);
	return t->tok[id].type;
}

int hs_tokenizer_is_control(const hs_tokenizer *t, int32_t id)
{
	HS_NEED(t, -EINVAL);
	if (id < 0 || id >= t->n_vocab)
		return hs__tok_bad_id(t, id);
	return hs__tok_is_control_type(t->tok[id].type);
}

const char *hs_tokenizer_arch(const hs_tokenizer *t)
{
	HS_NEED(t, NULL);
	return t->arch;
}

const char *hs_tokenizer_pre(const hs_tokenizer *t)
{
	HS_NEED(t, NULL);
	return t->pre_name;
}

const char *hs_tokenizer_chat_template(const hs_tokenizer *t)
{
	HS_NEED(t, NULL);
	return t->chat_template;
}
