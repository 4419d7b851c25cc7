/* The pre-tokenizers, written out by hand from their patterns (text/unicode.h).
 * Each function answers where the regex, run leftmost-first with greedy
 * quantifiers and backtracking, ends its match at the start of the text; a
 * comment above each alternative gives the part of the pattern it stands for.
 * tests/test-pretok.c holds them to Python's `regex` on millions of random
 * characters.  Both patterns end with the same three whitespace alternatives,
 * and every character falls into some alternative, so there is always a
 * piece of at least one character. */
#include "config.h"

#include "text/unicode.h"

#define BIT(c) (1u << (c))
/* [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and [\p{Ll}\p{Lm}\p{Lo}\p{M}] */
#define SET_U (BIT(HS_UC_LU) | BIT(HS_UC_LO) | BIT(HS_UC_M))
#define SET_LW (BIT(HS_UC_LL) | BIT(HS_UC_LO) | BIT(HS_UC_M))
#define SET_L (BIT(HS_UC_LU) | BIT(HS_UC_LL) | BIT(HS_UC_LO))
#define SET_WS (BIT(HS_UC_WS) | BIT(HS_UC_CR) | BIT(HS_UC_LF))
/* [^\r\n\p{L}\p{N}]: the optional prefix before letters */
#define SET_PRE (BIT(HS_UC_WS) | BIT(HS_UC_M) | BIT(HS_UC_OTHER))
/* [^\s\p{L}\p{N}]: punctuation, symbols, marks, unassigned, bad bytes */
#define SET_P (BIT(HS_UC_M) | BIT(HS_UC_OTHER))
/* qwen35: [\p{L}\p{M}] (letters with their combining marks) and [^\s\p{L}\p{M}\p{N}] */
#define SET_LM (SET_L | BIT(HS_UC_M))
#define SET_P35 BIT(HS_UC_OTHER)

/* Class of the character at s[i] (i < n) and its length in *len. */
static inline int cls_at(const uint8_t *s, size_t n, size_t i, int *len)
{
	uint32_t cp;

	if (s[i] < 0x80) {
		*len = 1;
		return hs__uc_stage2[0][s[i]];
	}
	cp = hs__utf8_decode(s + i, n - i, len);
	return cp == HS_UTF8_BAD ? HS_UC_OTHER : hs__uc_class(cp);
}

static inline int lower_ascii(uint8_t c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)? at s[i]: under Unicode simple case folding
 * U+017F LATIN SMALL LETTER LONG S folds to s as well. */
static size_t contraction_ci(const uint8_t *s, size_t n, size_t i)
{
	if (i + 1 >= n || s[i] != '\'')
		return i;
	switch (lower_ascii(s[i + 1])) {
	case 's': case 't': case 'm': case 'd':
		return i + 2;
	case 'r': case 'v':
		return i + 2 < n && lower_ascii(s[i + 2]) == 'e' ? i + 3 : i;
	case 'l':
		return i + 2 < n && lower_ascii(s[i + 2]) == 'l' ? i + 3 : i;
	case 0xC5:
		return i + 2 < n && s[i + 2] == 0xBF ? i + 3 : i;
	}
	return i;
}

/* [U]*[Lw]+(?i:...)? from s[at]; 0 when it does not match.  U* greedy takes
 * the whole run of U; Lw+ then needs one Lw character: the one after the run
 * (an Ll, the only Lw outside U) or, backtracking, the last Lm/Lo/mark inside
 * the run, after which the run holds only Lu/Lt, so Lw+ ends there. */
static size_t o200k_lower_word(const uint8_t *s, size_t n, size_t at)
{
	size_t i = at, last_lw = 0;
	int len = 0, c = HS_UC_OTHER;

	while (i < n && (BIT(c = cls_at(s, n, i, &len)) & SET_U)) {
		i += len;
		if (BIT(c) & SET_LW)
			last_lw = i;
	}
	if (i < n && c == HS_UC_LL) {
		for (i += len; i < n && (BIT(cls_at(s, n, i, &len)) & SET_LW);)
			i += len;
		return contraction_ci(s, n, i);
	}
	return last_lw ? contraction_ci(s, n, last_lw) : 0;
}

/* [U]+[Lw]*(?i:...)? from s[at]; 0 when it does not match. */
static size_t o200k_upper_word(const uint8_t *s, size_t n, size_t at)
{
	size_t i = at;
	int len;

	while (i < n && (BIT(cls_at(s, n, i, &len)) & SET_U))
		i += len;
	if (i == at)
		return 0;
	while (i < n && (BIT(cls_at(s, n, i, &len)) & SET_LW))
		i += len;
	return contraction_ci(s, n, i);
}

/* The three whitespace alternatives at a white-space character:
 * \s*[\r\n]+ ends after the run's last CR/LF; else \s+(?!\S) takes the run
 * when the text ends there, or all but its last character; else \s+ (a run
 * of one before a non-space). */
static size_t whitespace(const uint8_t *s, size_t n)
{
	size_t i = 0, last_nl = 0, last_start = 0;
	int len, c, k = 0;

	while (i < n && (BIT(c = cls_at(s, n, i, &len)) & SET_WS)) {
		last_start = i;
		i += len;
		k++;
		if (c == HS_UC_CR || c == HS_UC_LF)
			last_nl = i;
	}
	if (last_nl)
		return last_nl;
	if (i == n || k < 2)
		return i;
	return last_start;
}

/* ` ?[^\s\p{L}\p{N}]+` (the class `set`) then a tail of `[\r\n/]*` (o200k)
 * or `[\r\n]*` (qwen2, qwen35); 0 when it does not match. */
static size_t punct(const uint8_t *s, size_t n, int c0, int slash, unsigned set)
{
	size_t i;
	int len;

	if (s[0] == ' ' && n > 1 && (BIT(cls_at(s, n, 1, &len)) & set))
		i = 1;
	else if (BIT(c0) & set)
		i = 0;
	else
		return 0;
	while (i < n && (BIT(cls_at(s, n, i, &len)) & set))
		i += len;
	while (i < n && (s[i] == '\r' || s[i] == '\n' || (slash && s[i] == '/')))
		i++;
	return i;
}

/* [^\r\n\p{L}\p{N}]?[U]*[Lw]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |[^\r\n\p{L}\p{N}]?[U]+[Lw]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
 * |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
size_t hs__pretok_o200k(const uint8_t *s, size_t n)
{
	int l0, len, c0 = cls_at(s, n, 0, &l0);
	int pre = (BIT(c0) & SET_PRE) && (size_t)l0 < n;
	size_t e;

	/* each letter alternative tries the prefix first, then none */
	if (pre && (e = o200k_lower_word(s, n, l0)))
		return e;
	if ((BIT(c0) & (SET_U | SET_LW)) && (e = o200k_lower_word(s, n, 0)))
		return e;
	if (pre && (e = o200k_upper_word(s, n, l0)))
		return e;
	if ((BIT(c0) & SET_U) && (e = o200k_upper_word(s, n, 0)))
		return e;
	if (c0 == HS_UC_N) {
		e = l0;
		for (int k = 1; k < 3 && e < n && cls_at(s, n, e, &len) == HS_UC_N; k++)
			e += len;
		return e;
	}
	if ((e = punct(s, n, c0, 1, SET_P)))
		return e;
	if (BIT(c0) & SET_WS)
		return whitespace(s, n);
	return l0; /* not reached: every class is covered above */
}

/* qwen2's pattern with its letter class `letters`, punctuation class
 * `punctuation` and runs of at most `digits` digits */
static size_t qwen_split(const uint8_t *s, size_t n, unsigned letters, unsigned punctuation, int digits)
{
	int l0, len, c0 = cls_at(s, n, 0, &l0);
	size_t e;

	if (s[0] == '\'' && n > 1) {
		/* the case-insensitive helper without its long-s fold */
		e = s[1] == 0xC5 ? 0 : contraction_ci(s, n, 0);
		if (e)
			return e;
	}
	if ((BIT(c0) & SET_PRE) && (size_t)l0 < n && (BIT(cls_at(s, n, l0, &len)) & letters))
		e = l0 + len;
	else if (BIT(c0) & letters)
		e = l0;
	else
		e = 0;
	if (e) {
		while (e < n && (BIT(cls_at(s, n, e, &len)) & letters))
			e += len;
		return e;
	}
	if (c0 == HS_UC_N) {
		e = (size_t)l0;
		for (int k = 1; k < digits && e < n && cls_at(s, n, e, &len) == HS_UC_N; k++)
			e += (size_t)len;
		return e;
	}
	if ((e = punct(s, n, c0, 0, punctuation)))
		return e;
	if (BIT(c0) & SET_WS)
		return whitespace(s, n);
	return l0;
}

/* (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])
 * |[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
size_t hs__pretok_qwen2(const uint8_t *s, size_t n)
{
	return qwen_split(s, n, SET_L, SET_P, 1);
}

/* GLM-4's (llama.cpp's "glm4", "chatglm-bpe"; Llama 3's regex): qwen2's with
 * \p{N}{1,3}:
 * (?:'[sS]|...|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
size_t hs__pretok_glm4(const uint8_t *s, size_t n)
{
	return qwen_split(s, n, SET_L, SET_P, 3);
}

/* Qwen3.5's: qwen2's with combining marks in the letter runs and out of the
 * punctuation runs:
 * (?:'[sS]|...|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}
 * | ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
size_t hs__pretok_qwen35(const uint8_t *s, size_t n)
{
	return qwen_split(s, n, SET_LM, SET_P35, 1);
}
