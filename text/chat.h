/* The prompt a chat format builds (chat.c: harmony, ChatML and the entry
 * points; chat-xml.c: Qwen3.5 and GLM-4.5): its text, with the places of
 * the format's own special tokens recorded, so hs_chat_tokenize() can make
 * those special and nothing else. */
#ifndef HS_CHAT_H
#define HS_CHAT_H

#include <string.h>

#include <jansson.h>

#include "text/tokenizer.h"

struct hs__chat_span {
	size_t off, len;
	int32_t id; /* -1: only a cut, the text on either side tokenized apart */
};

struct hs__chat_prompt {
	const hs_tokenizer *t; /* may be NULL: rendering only */
	struct hs_buf text;
	struct hs__chat_span *sp;
	int n_sp, cap_sp;
	int err; /* the first error; later appends do nothing */
};

/* Records n bytes at the end of the text as special token id. */
void hs__chat_mark(struct hs__chat_prompt *p, size_t n, int32_t id);

/* The formats of chat-xml.c (tools NULL: none). */
int hs__chat_qwen35(struct hs__chat_prompt *p, const struct hs_chat_message *m, int n, const struct hs_chat_opts *o,
		    const json_t *tools);
int hs__chat_glm(struct hs__chat_prompt *p, const struct hs_chat_message *m, int n, const struct hs_chat_opts *o,
		 const json_t *tools);

static inline void put(struct hs__chat_prompt *p, const char *s, size_t n)
{
	if (!p->err)
		p->err = hs__buf_put(&p->text, s, n);
}

static inline void text(struct hs__chat_prompt *p, const char *s)
{
	put(p, s ? s : "", s ? strlen(s) : 0);
}

/* A special token of the format: recorded where the vocabulary has it as a
 * special token (else it stays text, as a tokenizer would see it). */
static inline void special(struct hs__chat_prompt *p, const char *s)
{
	size_t n = strlen(s);
	int32_t id = p->t ? hs__tok_special(p->t, (const uint8_t *)s, n) : -1;

	if (id >= 0)
		hs__chat_mark(p, n, id);
	put(p, s, n);
}

static inline int is_role(const struct hs_chat_message *m, const char *role)
{
	return m->role && strcmp(m->role, role) == 0;
}

static inline int nonempty(const char *s)
{
	return s && *s;
}

/* Whether message i is the next call of the turn before it: consecutive
 * assistant messages with tool calls are one turn, the later ones without
 * text or reasoning of their own. */
static inline int same_turn(const struct hs_chat_message *m, int n, int i)
{
	return i > 0 && i < n && is_role(&m[i], "assistant") && m[i].tool_name && !nonempty(m[i].content) &&
	       !nonempty(m[i].reasoning) && is_role(&m[i - 1], "assistant") && m[i - 1].tool_name;
}

static inline int starts_ends(const char *s, const char *a, const char *b)
{
	size_t n = strlen(s), na = strlen(a), nb = strlen(b);
	return n >= na + nb && strncmp(s, a, na) == 0 && strcmp(s + n - nb, b) == 0;
}

#endif
