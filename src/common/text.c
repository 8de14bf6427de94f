/* SPDX-License-Identifier: BSD-2-Clause */
/* text.c: UTF-8 validation, the JSON NUL-escape scan, names' characters,
 * the edit distance behind "did you mean", and escaping and quoting client
 * text in messages (see text.h). */
#include "common/text.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool text_utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;
	while (i < n) {
		unsigned char b = s[i];
		size_t len;
		uint32_t cp;
		if (b < 0x80) {
			i++;
			continue;
		} else if ((b & 0xe0) == 0xc0) {
			len = 2;
			cp = b & 0x1f;
		} else if ((b & 0xf0) == 0xe0) {
			len = 3;
			cp = b & 0x0f;
		} else if ((b & 0xf8) == 0xf0) {
			len = 4;
			cp = b & 0x07;
		} else {
			return false;
		}
		if (len > n - i)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

bool text_json_escapes_nul(const char *b, size_t n)
{
	bool in_string = false;
	for (size_t i = 0; i < n; i++) {
		if (!in_string) {
			in_string = b[i] == '"';
		} else if (b[i] == '"') {
			in_string = false;
		} else if (b[i] == '\\' && i + 1 < n) {
			if (b[i + 1] == 'u' && n - i >= 6 && memcmp(b + i + 2, "0000", 4) == 0)
				return true;
			i++; /* the escaped character */
		}
	}
	return false;
}

bool text_name_valid(const char *s, size_t n, bool slash)
{
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
			  ch == '_' || ch == '.' || ch == ':' || ch == '-' || (slash && ch == '/');
		if (!ok)
			return false;
	}
	return true;
}

static size_t min3(size_t a, size_t b, size_t c)
{
	size_t m = a < b ? a : b;
	return m < c ? m : c;
}

size_t text_distance(const char *a, const char *b, size_t limit)
{
	size_t na = strnlen(a, TEXT_DISTANCE_MAX + 1), nb = strnlen(b, TEXT_DISTANCE_MAX + 1);
	if (na > TEXT_DISTANCE_MAX || nb > TEXT_DISTANCE_MAX || (na > nb ? na - nb : nb - na) > limit)
		return limit + 1;
	/* Three rows of the table (Damerau's swaps need the one before the
	 * last): d[i][j] is the distance between a's first i bytes and b's
	 * first j. */
	size_t rows[3][TEXT_DISTANCE_MAX + 1];
	size_t *older = rows[0], *prev = rows[1], *cur = rows[2];
	for (size_t j = 0; j <= nb; j++)
		prev[j] = j;
	for (size_t i = 1; i <= na; i++) {
		cur[0] = i;
		size_t row_min = i;
		for (size_t j = 1; j <= nb; j++) {
			size_t d = min3(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]));
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && older[j - 2] + 1 < d)
				d = older[j - 2] + 1;
			cur[j] = d;
			row_min = d < row_min ? d : row_min;
		}
		if (row_min > limit)
			return limit + 1; /* no later row comes below its least */
		size_t *t = older;
		older = prev;
		prev = cur;
		cur = t;
	}
	return prev[nb] > limit ? limit + 1 : prev[nb];
}

const char *text_nearest(const char *word, const char *const *choices, size_t n)
{
	char lower[TEXT_DISTANCE_MAX + 1];
	size_t len = strnlen(word, TEXT_DISTANCE_MAX + 1);
	if (len == 0 || len > TEXT_DISTANCE_MAX)
		return NULL;
	for (size_t i = 0; i <= len; i++)
		lower[i] = (char)tolower((unsigned char)word[i]);
	const char *best = NULL;
	size_t best_d = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		size_t room = strlen(choices[i]) / 3;
		room = room < 1 ? 1 : room > 3 ? 3 : room;
		size_t d = text_distance(lower, choices[i], room);
		if (d <= room && d < best_d) {
			best = choices[i];
			best_d = d;
		}
	}
	return best;
}

const char *text_did_you_mean(const char *word, const char *const *choices, size_t n, const char *quote, char *buf,
			      size_t len)
{
	const char *near = text_nearest(word, choices, n);
	if (near)
		snprintf(buf, len, " (did you mean %s%s%s?)", quote, near, quote);
	else if (len)
		buf[0] = '\0';
	return buf;
}

const char *text_escape(const char *v, char *buf, size_t len)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		bool control = *p < 0x20 || *p == 0x7f, quoted = *p == '"' || *p == '\\';
		size_t need = control ? 4 : quoted ? 2 : 1;
		if (n + need + 1 > len)
			break;
		if (control)
			snprintf(buf + n, len - n, "\\x%02x", *p);
		else if (quoted)
			snprintf(buf + n, len - n, "\\%c", *p);
		else
			buf[n] = (char)*p;
		n += need;
	}
	buf[n] = '\0';
	return buf;
}

char *text_shown(const char *s, size_t n, char *buf, size_t len)
{
	size_t room = n < len ? n : len - 4, k = 0;
	for (size_t i = 0; i < room; i++)
		buf[k++] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\' ? s[i] : '?';
	if (room < n) {
		memcpy(buf + k, "...", 3);
		k += 3;
	}
	buf[k] = '\0';
	return buf;
}
