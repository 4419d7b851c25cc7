/* Grammars: GBNF as llama.cpp writes it parses (literals, classes, `.`,
 * groups, every repetition, comments, multi-line rules) and its errors name
 * line and column; texts are accepted or refused as the grammar says
 * (UTF-8 characters split across tokens included); the fast mask equals
 * the token-by-token reference on random walks over a byte vocabulary and
 * over gpt-oss's 201,088-token vocabulary; control tokens never pass unless
 * named, named tokens only where named, eos/eot only where the grammar may
 * end; and a sampler constrained by a grammar draws only what it allows.
 * Mutations tried, each fails here: class_has() ignoring [^...], the walk's
 * dead-prefix skip off by one, a two-byte UTF-8 lead taken as three, a
 * negated token element letting control tokens through. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hotset.h"
#include "text/grammar.h"
#include "tests/hs-test.h"
#include "tests/tok-util.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* 1 when grammar src accepts text whole (done after it), 0 when it refuses,
 * -1 when it does not compile */
static int matches(const char *src, const char *text)
{
	hs_grammar *g;
	int r;
	if (hs__grammar_new_bytes(src, &g))
		return -1;
	r = hs__grammar_accept_text(g, text, strlen(text)) == 0 && hs_grammar_done(g) == 1;
	hs_grammar_free(g);
	return r;
}

#define YES(src, text) CHECK(matches(src, text) == 1, "%s should accept \"%s\": %s", src, text, hs_last_error())
#define NO(src, text) CHECK(matches(src, text) == 0, "%s should refuse \"%s\"", src, text)

static void test_syntax(void)
{
	YES("root ::= \"abc\"", "abc");
	NO("root ::= \"abc\"", "ab");
	NO("root ::= \"abc\"", "abcd");
	YES("root ::= [a-c]+ \"!\"", "abcab!");
	NO("root ::= [a-c]+ \"!\"", "!");
	YES("root ::= [^a-c]*", "xyz");
	NO("root ::= [^a-c]*", "xay");
	YES("root ::= \"a\"{3}", "aaa");
	NO("root ::= \"a\"{3}", "aa");
	NO("root ::= \"a\"{3}", "aaaa");
	YES("root ::= \"a\"{2,}", "aaaaa");
	NO("root ::= \"a\"{2,}", "a");
	YES("root ::= \"ab\"{1,3}", "abab");
	NO("root ::= \"ab\"{1,3}", "abababab");
	YES("root ::= \"x\"{0,2} \"y\"", "y");
	YES("root ::= (\"a\" | \"b\" \"c\")* \"d\"", "abcad");
	NO("root ::= (\"a\" | \"b\" \"c\")* \"d\"", "abd");
	YES("root ::= \"a\"? \"b\"", "b");
	YES("root ::= . . .", "\xc3\xa9z\xe2\x82\xac"); /* three characters of 2, 1, 3 bytes */
	NO("root ::= . .", "\xe2\x82\xac");             /* one character */
	YES("root ::= [\\u00e0-\\u00ff]", "\xc3\xa9");
	NO("root ::= [\\u00e0-\\u00ff]", "\xc3\x80");
	YES("root ::= \"\\x41\\u00e9\\n\\t\\\\\\\"\"", "A\xc3\xa9\n\t\\\"");
	YES("root ::= \"\xe2\x82\xac\"", "\xe2\x82\xac");
	NO("root ::= .", "\x80"); /* not UTF-8 */
	NO("root ::= \"a\"", "\xc1\xa1");     /* overlong forms of "a" */
	NO("root ::= \"a\"", "\xe0\x81\xa1");
	NO("root ::= .", "\xed\xa0\x80");     /* a surrogate */
	NO("root ::= .", "\xf4\x90\x80\x80"); /* past U+10FFFF */
	YES("root ::= .", "\xf4\x8f\xbf\xbf");
	/* multi-line rules, comments, rules used before their definition */
	YES("# a comment\nroot ::=\n  item (\n    \",\" item\n  )* # trailing\nitem ::= [0-9]+\n", "1,22,333");
	YES("root ::= a | b\na ::= \"x\"\nb ::= \"y\" a", "yx");
	/* deep right recursion: a tail call must keep it flat */
	{
		char *s = malloc(20001);
		memset(s, 'a', 20000);
		s[20000] = 0;
		YES("root ::= \"a\" root | \"\"", s);
		free(s);
	}
	/* nested brackets: real recursion */
	YES("root ::= \"(\" root \")\" | \"\"", "((()))");
	NO("root ::= \"(\" root \")\" | \"\"", "(()");
}

/* two grammars in one text through hs_grammar_prefix() */
static void test_prefix(void)
{
	char *a = NULL, *b = NULL, *all;
	const char *ga = "root ::= item{2} # two items\nitem ::= [a-z] \"<root>\"",
		   *gb = "root ::= [0-9]+ (\"-\" root)?";
	CHECK(hs_grammar_prefix(ga, "a-", &a) == 0 && hs_grammar_prefix(gb, "b_", &b) == 0, "%s", hs_last_error());
	if (!a || !b)
		return;
	CHECK(strcmp(a, "a-root ::= a-item{2} # two items\na-item ::= [a-z] \"<root>\"") == 0, "prefixed: %s", a);
	all = malloc(strlen(a) + strlen(b) + 64);
	sprintf(all, "%s\n%s\nroot ::= a-root \"=\" b_root", a, b);
	YES(all, "x<root>y<root>=12-3");
	NO(all, "x<root>=12");
	free(all);
	free(a);
	free(b);
}

static void refused(const char *src, const char *want)
{
	hs_grammar *g = (hs_grammar *)1;
	int rc = hs__grammar_new_bytes(src, &g);
	CHECK(rc == -EINVAL || rc == -E2BIG, "\"%.80s\" should not compile (rc %d)", src, rc);
	CHECK(g == NULL, "out not NULL after a refusal");
	CHECK(strstr(hs_last_error(), want), "\"%.80s\": message \"%s\" lacks \"%s\"", src, hs_last_error(), want);
	if (rc == 0)
		hs_grammar_free(g);
}

static void test_errors(void)
{
	refused("root ::= \"abc", "line 1, column 10");
	refused("root ::= x", "rule 'x' is used but not defined");
	refused("a ::= \"x\"", "no rule named 'root'");
	refused("root ::= root \"x\" | \"y\"", "left-recursive");
	refused("root ::= a\na ::= b? root\nb ::= \"x\"", "left-recursive");
	refused("root ::= (\"\")*", "left-recursive");
	refused("root ::= \"a\"\nroot ::= \"b\"", "defined twice");
	refused("root ::= [b-a]", "range");
	refused("root ::= \"a\"{5,2}", "{5,2}");
	refused("root ::= \"a\"{100000}", "repetition count above");
	refused("root ::= * \"a\"", "nothing before it");
	refused("root ::= (\"a\"", "'(' without its ')'");
	refused("root ::= \"a\" )", "')' without its '('");
	refused("root ::= \"\\q\"", "unknown escape");
	refused("root ::= <[5]>", "tokenizer");
	refused("root \"a\"", "expected '::='");
	refused("\n\n  root ::= [a", "line 3, column 12");
	/* grammars that grow past the limits once written out (their work is
	 * bounded, not their text's length times the counts): 500 optional
	 * repetitions of up to 10,000 (a rule each), 200 of exactly 9,999 */
	{
		char *src = malloc(500 * 16 + 16), *p = src;
		p += sprintf(p, "root ::=");
		for (int i = 0; i < 500; i++)
			p += sprintf(p, " \"ab\"{0,9999}");
		refused(src, "rules once groups and repetitions are written out");
		p = src + sprintf(src, "root ::=");
		for (int i = 0; i < 200; i++)
			p += sprintf(p, " \"ab\"{9999}");
		refused(src, "elements once repetitions are written out");
		free(src);
	}
}

/* random walk over the byte vocabulary, fast mask against reference */
static void walk_bytes(const char *src, int steps)
{
	hs_grammar *g;
	uint64_t a[5], b[5];
	char text[4096];
	int n = 0;
	if (hs__grammar_new_bytes(src, &g)) {
		CHECK(0, "%s: %s", src, hs_last_error());
		return;
	}
	for (int s = 0; s < steps; s++) {
		int allowed[257], k = 0;
		CHECK(hs__grammar_mask_bits(g, a) == 0, "mask: %s", hs_last_error());
		CHECK(hs__grammar_mask_ref(g, b) == 0, "mask_ref: %s", hs_last_error());
		CHECK(memcmp(a, b, sizeof a) == 0, "%s after \"%.*s\": fast and reference masks differ", src, n, text);
		for (int i = 0; i < 257; i++)
			if (b[i >> 6] >> (i & 63) & 1)
				allowed[k++] = i;
		if (!k)
			break;
		int id = allowed[rnd((uint32_t)k)];
		if (id == 256 && k > 1 && rnd(4)) /* end late */
			id = allowed[rnd((uint32_t)k - 1)];
		CHECK(hs_grammar_accept(g, id) == 0, "an allowed byte %d refused: %s", id, hs_last_error());
		if (id == 256) {
			CHECK(hs_grammar_done(g) == 1, "ended but not done");
			hs_grammar_reset(g);
			n = 0;
			continue;
		}
		if (n < (int)sizeof text)
			text[n++] = (char)id;
	}
	hs_grammar_free(g);
}

static const char *json_gbnf =
	"root   ::= object\n"
	"value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
	"object ::= \"{\" ws ( string \":\" ws value (\",\" ws string \":\" ws value)* )? \"}\" ws\n"
	"array  ::= \"[\" ws ( value (\",\" ws value)* )? \"]\" ws\n"
	"string ::= \"\\\"\" ( [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) )* \"\\\"\" ws\n"
	"number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]{1,15})? ws\n"
	"ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

static void test_walks(void)
{
	walk_bytes(json_gbnf, 3000);
	walk_bytes("root ::= ([a-z]+ \" \")* \"\\u00e9\\u20ac\"{1,3} [^\\x00-\\x7f]*", 600);
	walk_bytes("root ::= \"(\" root \")\" root | \"\"", 600);
	YES(json_gbnf, "{\"a\": [1, 2.5e3, \"x\\u00e9\", {\"b\": null}], \"c\":true}");
	NO(json_gbnf, "{\"a\": [1, 2,]}");
	NO(json_gbnf, "{\"a\" 1}");
}

/* ---- gpt-oss's vocabulary ------------------------------------------------------ */

static int allowed_bit(const uint64_t *bits, int id)
{
	return bits[id >> 6] >> (id & 63) & 1;
}

static void walk_vocab(const hs_tokenizer *t, const char *src, int steps, const char *must_reach)
{
	int nv = hs_tokenizer_n_vocab(t), nw = (nv + 63) / 64;
	uint64_t *a = malloc((size_t)nw * 8), *b = malloc((size_t)nw * 8);
	int *allowed = malloc((size_t)nv * sizeof *allowed);
	int32_t ids[512];
	int n_ids = 0, reached = 0;
	hs_grammar *g;

	if (hs_grammar_new(t, src, &g)) {
		CHECK(0, "%s: %s", src, hs_last_error());
		goto out;
	}
	for (int s = 0; s < steps; s++) {
		int k = 0;
		CHECK(hs__grammar_mask_bits(g, a) == 0, "mask: %s", hs_last_error());
		CHECK(hs__grammar_mask_ref(g, b) == 0, "mask_ref: %s", hs_last_error());
		if (memcmp(a, b, (size_t)nw * 8)) {
			int first = -1;
			for (int i = 0; i < nv && first < 0; i++)
				if (allowed_bit(a, i) != allowed_bit(b, i))
					first = i;
			CHECK(0, "step %d: masks differ first at token %d (fast %d, reference %d)", s, first,
			      allowed_bit(a, first), allowed_bit(b, first));
			break;
		}
		for (int i = 0; i < nv; i++) {
			if (!allowed_bit(b, i))
				continue;
			allowed[k++] = i;
			/* a control token only where the grammar names it, or the end */
			if (hs_tokenizer_is_control(t, i) == 1 && i != hs_tokenizer_eos(t) && i != hs_tokenizer_eot(t) &&
			    !strstr(src, "<|"))
				CHECK(0, "control token %d allowed by a grammar that names none", i);
		}
		if (!k)
			break;
		/* prefer long tokens now and then: they cross rule boundaries */
		int id = allowed[rnd((uint32_t)k)];
		CHECK(hs_grammar_accept(g, id) == 0, "an allowed token %d refused: %s", id, hs_last_error());
		if (n_ids < 512)
			ids[n_ids++] = id;
		if (hs_grammar_done(g) == 1 && !reached) {
			char *txt;
			if (hs_detokenize(t, ids, n_ids, 1, &txt, NULL) == 0) {
				reached = !must_reach || strstr(txt, must_reach) != NULL;
				free(txt);
			}
		}
		if (hs_grammar_done(g) == 1 && rnd(3) == 0) {
			hs_grammar_reset(g);
			n_ids = 0;
		}
	}
	long asked, hits;
	hs__grammar_cache_stats(g, &asked, &hits);
	fprintf(stderr, "  %-40.40s %d steps, mask cache %ld/%ld\n", src, steps, hits, asked);
	hs_grammar_free(g);
out:
	free(a);
	free(b);
	free(allowed);
}

static void test_vocab(void)
{
	hs_tokenizer *t;
	hs_grammar *g;
	int32_t end, ret, ids[64];
	int n;

	if (hs_tokenizer_open(hs_test_data(VOCAB_GGUF), &t)) {
		CHECK(0, "%s: %s", VOCAB_GGUF, hs_last_error());
		return;
	}
	end = hs_tokenizer_find(t, "<|end|>");
	ret = hs_tokenizer_find(t, "<|return|>");
	CHECK(end >= 0 && ret >= 0, "the vocabulary lacks <|end|> or <|return|>");

	/* a grammar naming no token: no control token ever; the end where it may end */
	CHECK(hs_grammar_new(t, "root ::= \"hi\" \" there\"?", &g) == 0, "%s", hs_last_error());
	{
		int nv = hs_tokenizer_n_vocab(t);
		float *lg = calloc((size_t)nv, sizeof *lg);
		int k = hs_grammar_mask(g, lg);
		CHECK(k > 0 && lg[end] == -INFINITY && lg[ret] == -INFINITY, "control tokens allowed at the start (%d)", k);
		n = hs_tokenize(t, "hi", 2, 0, ids, 64);
		for (int i = 0; i < n; i++)
			CHECK(hs_grammar_accept(g, ids[i]) == 0, "\"hi\" refused: %s", hs_last_error());
		CHECK(hs_grammar_done(g) == 1, "\"hi\" not done");
		memset(lg, 0, (size_t)nv * sizeof *lg);
		k = hs_grammar_mask(g, lg);
		if (hs_tokenizer_eos(t) >= 0)
			CHECK(lg[hs_tokenizer_eos(t)] == 0, "eos not allowed where the grammar may end");
		CHECK(hs_grammar_accept(g, end) != 0 || end == hs_tokenizer_eot(t) || end == hs_tokenizer_eos(t),
		      "<|end|> accepted as text");
		free(lg);
	}
	hs_grammar_free(g);

	/* a named control token, matched only as itself; its text is not the token */
	CHECK(hs_grammar_new(t, "root ::= \"a\" <|end|> \"b\"", &g) == 0, "%s", hs_last_error());
	n = hs_tokenize(t, "a", 1, 0, ids, 64);
	CHECK(n == 1 && hs_grammar_accept(g, ids[0]) == 0, "\"a\" refused");
	n = hs_tokenize(t, "<|end|>", 7, 0, ids, 64); /* as text: several ordinary tokens */
	CHECK(n > 1 && hs_grammar_accept(g, ids[0]) != 0, "the text \"<|end|>\" accepted where the token is");
	CHECK(hs_grammar_accept(g, end) == 0, "<|end|> refused where named: %s", hs_last_error());
	hs_grammar_free(g);
	{
		hs_grammar *x = (hs_grammar *)1;
		CHECK(hs_grammar_new(t, "root ::= <not a token>", &x) == -EINVAL && !x &&
			      strstr(hs_last_error(), "not one token"),
		      "a token text that is no token: %s", hs_last_error());
		CHECK(hs_grammar_new(t, "root ::= <[999999]>", &x) == -EINVAL && strstr(hs_last_error(), "outside"),
		      "a token id out of range: %s", hs_last_error());
	}

	walk_vocab(t, json_gbnf, 40, NULL);
	walk_vocab(t,
		   "root ::= (\"<|channel|>\"? ) <|channel|> \"analysis\" <|message|> [^]* <|end|> <|start|> \"assistant\" "
		   "<|channel|> \"final\" <|message|> \"{\\\"x\\\": \" [0-9]{1,3} \"}\" <|return|>",
		   1, NULL); /* compiles with a class [^] of no ranges: any character */
	walk_vocab(t,
		   "root ::= (<|channel|> \"analysis\" <|message|> think <|end|> <|start|> \"assistant\")? "
		   "<|channel|> \"final\" <|message|> \"{\\\"x\\\": \" [0-9]{1,3} \"}\" <|return|>\n"
		   "think ::= [a-z .]{0,12}",
		   60, NULL);
	walk_vocab(t, "root ::= \"caf\\u00e9 \" ( [\\u4e00-\\u9fff] | \"\\u20ac\" )+", 30, NULL);
	walk_vocab(t, "root ::= !<|end|>{2} \"!\"", 10, NULL);
	hs_tokenizer_free(t);
}

/* A sampler constrained by a grammar draws only what it allows, on random
 * logits; its text then matches. */
static void test_sampler(void)
{
	hs_grammar *g;
	hs_sampler *s;
	struct hs_sampler_params p = hs_sampler_params_default();
	float lg[257];
	char text[512];
	int n = 0;

	p.temperature = 1;
	p.seed = 7;
	CHECK(hs__grammar_new_bytes(json_gbnf, &g) == 0, "%s", hs_last_error());
	CHECK(hs_sampler_create(&p, 257, &s) == 0, "%s", hs_last_error());
	CHECK(hs_sampler_set_grammar(s, g) == 0, "%s", hs_last_error());
	for (int step = 0; step < 400; step++) {
		for (int i = 0; i < 257; i++)
			lg[i] = (float)rnd(1000) / 100.0f;
		if (step > 100) /* then close what is open, and end once it may */
			lg['"'] = lg['}'] = lg[']'] = lg[256] = 30.0f;
		else
			lg[256] = -30.0f;
		float keep = lg[5];
		int32_t id = hs_sampler_sample(s, lg);
		CHECK(lg[5] == keep, "the sampler changed the caller's logits");
		CHECK(id >= 0, "sample failed: %s", hs_last_error());
		if (id < 0 || id == 256)
			break;
		if (n < (int)sizeof text - 1)
			text[n++] = (char)id;
	}
	text[n] = 0;
	CHECK(hs_grammar_done(g) == 1, "the walk did not end: \"%s\"", text);
	CHECK(matches(json_gbnf, text) == 1, "sampled text does not match: \"%s\"", text);
	/* a grammar that allows nothing more: -ENOENT, not a token */
	CHECK(hs_sampler_sample(s, lg) == -ENOENT, "a sample after the end: %s", hs_last_error());
	CHECK(hs_sampler_set_grammar(s, NULL) == 0, "removing the grammar");
	CHECK(hs_sampler_sample(s, lg) >= 0, "unconstrained again");
	hs_sampler_free(s);
	hs_grammar_free(g);
}

int main(void)
{
	test_syntax();
	test_errors();
	test_prefix();
	test_walks();
	test_vocab();
	test_sampler();
	return hs_test_end();
}
