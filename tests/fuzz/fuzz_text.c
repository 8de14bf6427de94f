/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_text.c: fuzz target for src/common/text.c. The whole input is checked by
 * both functions, and each answer is compared with a reference written a
 * different way:
 *   - text_utf8_valid against a decoder that rebuilds each code point and
 *     re-encodes it (valid exactly when the bytes round-trip and the code
 *     point is a Unicode scalar value);
 *   - text_json_escapes_nul against a two-state scanner over the same bytes;
 *   - text_distance, on two strings cut from the input (the first byte
 *     picks the cut and the limit), against the whole table computed
 *     without a limit, and against itself with the strings swapped;
 *     text_escape's output stays within its buffer and holds no control
 *     byte.
 * Inputs end at the driver's PROT_NONE page, so an over-read crashes.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "common/text.h"

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

/* Reference: the optimal-string-alignment distance from the whole table,
 * no row skipped and no early end. */
static size_t ref_distance(const char *a, const char *b)
{
	static size_t d[TEXT_DISTANCE_MAX + 1][TEXT_DISTANCE_MAX + 1];
	size_t na = strlen(a), nb = strlen(b);
	for (size_t i = 0; i <= na; i++) {
		for (size_t j = 0; j <= nb; j++) {
			if (i == 0 || j == 0) {
				d[i][j] = i + j;
				continue;
			}
			size_t best = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[na][nb];
}

static void check_distance(const uint8_t *data, size_t size)
{
	if (size < 1)
		return;
	char a[TEXT_DISTANCE_MAX + 9], b[TEXT_DISTANCE_MAX + 9];
	size_t limit = data[0] & 7, cut = 1 + (data[0] >> 3) * 3;
	size_t rest = size - 1, na = cut - 1 < rest ? cut - 1 : rest;
	na = na < sizeof(a) - 1 ? na : sizeof(a) - 1;
	size_t nb = rest - na < sizeof(b) - 1 ? rest - na : sizeof(b) - 1;
	memcpy(a, data + 1, na);
	a[na] = '\0';
	memcpy(b, data + 1 + na, nb);
	b[nb] = '\0';
	size_t got = text_distance(a, b, limit);
	FUZZ_ASSERT(got == text_distance(b, a, limit));
	if (strlen(a) > TEXT_DISTANCE_MAX || strlen(b) > TEXT_DISTANCE_MAX) {
		FUZZ_ASSERT(got == limit + 1);
	} else {
		size_t want = ref_distance(a, b);
		FUZZ_ASSERT(got == (want > limit ? limit + 1 : want));
	}
	char shown[24];
	text_escape(a, shown, sizeof(shown));
	FUZZ_ASSERT(strlen(shown) < sizeof(shown));
	for (const char *p = shown; *p; p++)
		FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
}

int fuzz_one(const uint8_t *data, size_t size)
{
	FUZZ_ASSERT(text_utf8_valid(data, size) == ref_utf8(data, size));
	FUZZ_ASSERT(text_json_escapes_nul((const char *)data, size) == ref_nul_escape((const char *)data, size));
	check_distance(data, size);
	return 0;
}
