/* text.c: UTF-8 validation, the JSON NUL-escape scan, names and quoting
 * client text in messages (see text.h). */
#include "text.h"

#include <stdint.h>
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
