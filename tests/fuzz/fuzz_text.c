/* fuzz_text.c: fuzz target for src/text.c. The whole input is checked by
 * both functions, and each answer is compared with a reference written a
 * different way:
 *   - text_utf8_valid against a decoder that rebuilds each code point and
 *     re-encodes it (valid exactly when the bytes round-trip and the code
 *     point is a Unicode scalar value);
 *   - text_json_escapes_nul against a two-state scanner over the same bytes.
 * Inputs end at the driver's PROT_NONE page, so an over-read crashes.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "text.h"

/* Encode cp as UTF-8 into out; returns the length. */
static size_t encode(unsigned cp, unsigned char *out)
{
	if (cp < 0x80) {
		out[0] = (unsigned char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (unsigned char)(0xc0 | (cp >> 6));
		out[1] = (unsigned char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (unsigned char)(0xe0 | (cp >> 12));
		out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (unsigned char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | (cp >> 18));
	out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (unsigned char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Reference: take the sequence length from the count of leading one bits,
 * gather the bits, and require that re-encoding gives the same bytes. */
static bool ref_utf8(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned lead = s[i], ones = 0;
		while (ones < 8 && (lead & (0x80u >> ones)))
			ones++;
		size_t len = ones == 0 ? 1 : ones;
		if (ones == 1 || ones > 4 || i + len > n)
			return false;
		unsigned cp = ones == 0 ? lead : lead & (0xffu >> (ones + 1));
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] >> 6) != 2)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		unsigned char again[4];
		if (encode(cp, again) != len || memcmp(again, s + i, len) != 0)
			return false;
		i += len;
	}
	return true;
}

/* Reference: a scanner that remembers whether the previous byte opened an
 * escape, instead of stepping over it. */
static bool ref_nul_escape(const char *b, size_t n)
{
	bool in_string = false, escaped = false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!in_string) {
			if (c == '"')
				in_string = true;
			continue;
		}
		if (escaped) {
			escaped = false;
			if (c == 'u' && i + 4 < n && b[i + 1] == '0' && b[i + 2] == '0' && b[i + 3] == '0' &&
			    b[i + 4] == '0')
				return true;
			continue;
		}
		if (c == '\\')
			escaped = true;
		else if (c == '"')
			in_string = false;
	}
	return false;
}

int fuzz_one(const uint8_t *data, size_t size)
{
	FUZZ_ASSERT(text_utf8_valid(data, size) == ref_utf8(data, size));
	FUZZ_ASSERT(text_json_escapes_nul((const char *)data, size) == ref_nul_escape((const char *)data, size));
	return 0;
}
