/* Character classes and UTF-8 for the tokenizer (tables generated from the
 * Unicode Character Database by text/gen-unicode-tables.py; the version is
 * hs__uc_version). */
#ifndef HS_UNICODE_H
#define HS_UNICODE_H

#include <stddef.h>
#include <stdint.h>

/* What the pre-tokenizer patterns ask of a character.  Lu+Lt, Lm+Lo, all marks
 * and all numbers are one class each: neither pattern tells their members
 * apart.  WS is the White_Space property less CR and LF. */
enum hs_uc_class {
	HS_UC_OTHER = 0, HS_UC_LU = 1, HS_UC_LL = 2, HS_UC_LO = 3, HS_UC_M = 4,
	HS_UC_N = 5, HS_UC_WS = 6, HS_UC_CR = 7, HS_UC_LF = 8,
};

extern const char hs__uc_version[];
extern const uint8_t hs__uc_stage1[0x110000 >> 7];
extern const uint8_t hs__uc_stage2[][128];

static inline int hs__uc_class(uint32_t cp)
{
	return cp < 0x110000 ? hs__uc_stage2[hs__uc_stage1[cp >> 7]][cp & 127] : HS_UC_OTHER;
}

/* Decodes the character at s[0..n) (n >= 1): returns its code point and sets
 * *len to its byte count.  A byte that does not start a well-formed sequence
 * (stray continuation, overlong form, surrogate, past U+10FFFF, cut short)
 * is returned as HS_UTF8_BAD with *len = 1. */
#define HS_UTF8_BAD 0xFFFFFFFFu
static inline uint32_t hs__utf8_decode(const uint8_t *s, size_t n, int *len)
{
	uint32_t c = s[0];

	if (c < 0x80) {
		*len = 1;
		return c;
	}
	*len = 1;
	if (c < 0xC2 || c > 0xF4)
		return HS_UTF8_BAD;
	if (c < 0xE0) {
		if (n < 2 || (s[1] & 0xC0) != 0x80)
			return HS_UTF8_BAD;
		*len = 2;
		return (c & 0x1F) << 6 | (s[1] & 0x3F);
	}
	if (c < 0xF0) {
		/* E0 needs A0..BF (no overlong), ED needs 80..9F (no surrogates) */
		uint8_t lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
		if (n < 3 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80)
			return HS_UTF8_BAD;
		*len = 3;
		return (c & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
	}
	/* F0 needs 90..BF (no overlong), F4 needs 80..8F (<= U+10FFFF) */
	uint8_t lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	if (n < 4 || s[1] < lo || s[1] > hi || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
		return HS_UTF8_BAD;
	*len = 4;
	return (c & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
}

/* For s[0..n) (n >= 1) that hs__utf8_decode() called bad: the length of its
 * longest prefix that is the start of some well-formed character (0 when
 * s[0] can start none).  When that is all n bytes, more bytes may still
 * complete the character; otherwise those bytes are one "maximal subpart"
 * that becomes one U+FFFD. */
int hs__utf8_prefix(const uint8_t *s, size_t n);

/* Writes c (<= U+10FFFF, not a surrogate) as UTF-8 into out[4]; returns the
 * byte count. */
int hs__utf8_encode(uint32_t c, uint8_t *out);

/* The pre-tokenizers: the length in bytes of the piece that starts at s[0]
 * of the text s[0..n) (n >= 1), as the pattern (leftmost-first alternation,
 * greedy, backtracking) would match there.  A byte that is not well-formed
 * UTF-8 counts as one character of class OTHER. */
size_t hs__pretok_o200k(const uint8_t *s, size_t n);
size_t hs__pretok_qwen2(const uint8_t *s, size_t n);
size_t hs__pretok_qwen35(const uint8_t *s, size_t n);
size_t hs__pretok_glm4(const uint8_t *s, size_t n);

#endif
