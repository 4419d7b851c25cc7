/* UTF-8 helpers of the tokenizer and detokenizer (decoding is inline in
 * text/unicode.h). */
#include "config.h"

#include "text/unicode.h"

int hs__utf8_prefix(const uint8_t *s, size_t n)
{
	uint8_t c = s[0], lo = 0x80, hi = 0xBF;
	int need, k;

	if (c < 0xC2 || c > 0xF4)
		return 0;
	need = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
	/* the second byte's range is narrower after E0, ED, F0 and F4 */
	if (c == 0xE0)
		lo = 0xA0;
	else if (c == 0xED)
		hi = 0x9F;
	else if (c == 0xF0)
		lo = 0x90;
	else if (c == 0xF4)
		hi = 0x8F;
	for (k = 1; k < need && (size_t)k < n; k++) {
		if (s[k] < lo || s[k] > hi)
			break;
		lo = 0x80;
		hi = 0xBF;
	}
	return k;
}

int hs__utf8_encode(uint32_t c, uint8_t *out)
{
	if (c < 0x80) {
		out[0] = (uint8_t)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (uint8_t)(0xC0 | c >> 6);
		out[1] = (uint8_t)(0x80 | (c & 0x3F));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (uint8_t)(0xE0 | c >> 12);
		out[1] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
		out[2] = (uint8_t)(0x80 | (c & 0x3F));
		return 3;
	}
	out[0] = (uint8_t)(0xF0 | c >> 18);
	out[1] = (uint8_t)(0x80 | (c >> 12 & 0x3F));
	out[2] = (uint8_t)(0x80 | (c >> 6 & 0x3F));
	out[3] = (uint8_t)(0x80 | (c & 0x3F));
	return 4;
}
