/* Grammars inside the library: GBNF (as llama.cpp writes it) compiled to a
 * pushdown matcher over bytes and whole tokens (text/grammar.c), and JSON
 * Schema turned into GBNF (text/json-schema.c).  The public half is in
 * include/hotset/text.h (hs_grammar_*, hs_json_schema_to_grammar). */
#ifndef HS_GRAMMAR_H
#define HS_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "text/tokenizer.h"

/* A grammar over a vocabulary of 256 one-byte tokens (id = the byte) and
 * one end token, id 256, that is allowed where the grammar may end: what the
 * tests and the JSON-schema test walk with, no tokenizer needed.  Token
 * elements (<[id]>, <text>) are refused in such a grammar.  Same errors as
 * hs_grammar_new(). */
int hs__grammar_new_bytes(const char *gbnf, hs_grammar **out);

/* hs_grammar_new() starting at rule `start` instead of root: how the
 * server wraps a user's grammar (or a schema's) in the chat format's reply,
 * its own rules beside the user's, whose root they name. */
int hs__grammar_new_start(const hs_tokenizer *t, const char *gbnf, const char *start, hs_grammar **out);

/* Advances the state by raw text, as if tokens with these bytes were
 * sampled; 0, or -EINVAL when the grammar refuses some byte (the state is
 * then as before the call). */
int hs__grammar_accept_text(hs_grammar *g, const char *s, size_t n);

/* The mask of allowed tokens into bits[(n_vocab + 63) / 64] (bit id set =
 * allowed), by walking the whole vocabulary token by token through the
 * matcher: the slow reference twin of the trie walk hs_grammar_mask() uses. */
int hs__grammar_mask_ref(hs_grammar *g, uint64_t *bits);
/* The same mask by the fast walk (sorted tokens, shared prefixes, states
 * cached): what hs_grammar_mask() applies. */
int hs__grammar_mask_bits(hs_grammar *g, uint64_t *bits);

/* The vocabulary's size (257 for the byte vocabulary). */
int hs__grammar_n_vocab(const hs_grammar *g);

/* Counters of the mask cache, for benchmarks: masks asked, masks found. */
void hs__grammar_cache_stats(const hs_grammar *g, long *asked, long *hits);

#endif
