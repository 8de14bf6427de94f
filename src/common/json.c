/* SPDX-License-Identifier: BSD-2-Clause */
/* json.c: the JSON reader (json.h). json_parse walks the text once, with a
 * bit per open container (object or array) instead of recursion, so depth
 * costs 250 bytes of stack and nothing is allocated. The readers step over
 * text json_parse accepted and so check nothing again. Where the text leaves
 * a choice, the answers are those of SQLite's JSON functions, which read
 * these texts before this module did: a lone surrogate escape is decoded to
 * its three-byte form, and a number is written anew by SQLite's own
 * formatting (sqlite3_snprintf "%!.15g"). */
#include "common/json.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"

static bool is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static const char *skip_space(const char *p, const char *end)
{
	while (p < end && is_space((unsigned char)*p))
		p++;
	return p;
}

static int hex_digit(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c |= 0x20;
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The four hex digits at p, or -1. */
static int hex4(const char *p)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		int d = hex_digit((unsigned char)p[i]);
		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/* ---- checking --------------------------------------------------------- */

/* The string whose opening quote is at p: returns the byte after its
 * closing quote, or NULL. Sets *nul on a \u0000 escape. */
static const char *scan_string(const char *p, const char *end, bool *nul)
{
	const char *start = ++p;
	bool wide = false; /* bytes above ASCII, checked as UTF-8 at the end */
	while (p < end) {
		unsigned char c = (unsigned char)*p;
		if (c == '"') {
			if (wide && !text_utf8_valid((const unsigned char *)start, (size_t)(p - start)))
				return NULL;
			return p + 1;
		}
		if (c < 0x20)
			return NULL;
		if (c >= 0x80) {
			wide = true;
			p++;
		} else if (c != '\\') {
			p++;
		} else if (end - p < 2) {
			return NULL;
		} else if (p[1] == 'u') {
			if (end - p < 6 || hex4(p + 2) < 0)
				return NULL;
			if (memcmp(p + 2, "0000", 4) == 0)
				*nul = true;
			p += 6;
		} else if (p[1] && strchr("\"\\/bfnrt", p[1])) {
			p += 2;
		} else {
			return NULL;
		}
	}
	return NULL;
}

static const char *scan_digits(const char *p, const char *end)
{
	while (p < end && *p >= '0' && *p <= '9')
		p++;
	return p;
}

/* The number at p: returns the byte after it, or NULL; *real when it has
 * a fraction or an exponent. */
static const char *scan_number(const char *p, const char *end, bool *real)
{
	const char *q;
	*real = false;
	if (p < end && *p == '-')
		p++;
	if (p < end && *p == '0')
		p++;
	else if ((q = scan_digits(p, end)) != p)
		p = q;
	else
		return NULL;
	if (p < end && *p == '.') {
		*real = true;
		if ((q = scan_digits(p + 1, end)) == p + 1)
			return NULL;
		p = q;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		*real = true;
		p++;
		if (p < end && (*p == '+' || *p == '-'))
			p++;
		if ((q = scan_digits(p, end)) == p)
			return NULL;
		p = q;
	}
	return p;
}

/* One scalar (not a container) at p: returns the byte after it, or NULL,
 * with its type in *type. */
static const char *scan_scalar(const char *p, const char *end, enum json_type *type, bool *nul)
{
	static const struct {
		const char *word;
		size_t len;
		enum json_type type;
	} words[] = { { "true", 4, JSON_TRUE }, { "false", 5, JSON_FALSE }, { "null", 4, JSON_NULL } };
	if (*p == '"') {
		*type = JSON_STRING;
		return scan_string(p, end, nul);
	}
	for (size_t i = 0; i < ARRAY_LEN(words); i++)
		if (*p == words[i].word[0]) {
			*type = words[i].type;
			return (size_t)(end - p) >= words[i].len && memcmp(p, words[i].word, words[i].len) == 0
				       ? p + words[i].len
				       : NULL;
		}
	bool real;
	p = scan_number(p, end, &real);
	*type = real ? JSON_REAL : JSON_INTEGER;
	return p;
}

/* Whether text is one JSON value; *root is set when it is. Walks values and
 * punctuation in turn: after a value comes a comma, the close of the
 * innermost container, or (at depth 0) the end. */
static bool well_formed(const char *text, size_t n, struct json_value *root, bool *nul)
{
	unsigned char objects[JSON_MAX_DEPTH / 8 + 1] = { 0 }; /* bit d: the container at depth d is an object */
	const char *p = text, *end = text + n;
	size_t depth = 0;
	p = skip_space(p, end);
	root->p = p;
	for (;;) {
		/* A value is due at p (after a member's colon for an object). */
		if (p >= end)
			return false;
		if (*p == '{' || *p == '[') {
			bool obj = *p == '{';
			if (depth == 0)
				root->type = obj ? JSON_OBJECT : JSON_ARRAY;
			if (depth == JSON_MAX_DEPTH)
				return false;
			unsigned char bit = (unsigned char)(1u << depth % 8);
			objects[depth / 8] = obj ? objects[depth / 8] | bit : objects[depth / 8] & ~bit;
			depth++;
			p = skip_space(p + 1, end);
			if (p < end && *p == (obj ? '}' : ']')) {
				p++;
				depth--;
			} else if (obj) {
				goto member_name;
			} else {
				continue;
			}
		} else {
			enum json_type type;
			p = scan_scalar(p, end, &type, nul);
			if (!p)
				return false;
			if (depth == 0)
				root->type = type;
		}
	after_value:
		if (depth == 0) {
			root->n = (size_t)(p - root->p);
			return skip_space(p, end) == end;
		}
		p = skip_space(p, end);
		bool in_object = objects[(depth - 1) / 8] >> (depth - 1) % 8 & 1;
		if (p < end && *p == (in_object ? '}' : ']')) {
			p++;
			depth--;
			goto after_value;
		}
		if (p >= end || *p != ',')
			return false;
		p = skip_space(p + 1, end);
		if (!in_object)
			continue;
	member_name:
		if (p >= end || *p != '"' || !(p = scan_string(p, end, nul)))
			return false;
		p = skip_space(p, end);
		if (p >= end || *p != ':')
			return false;
		p = skip_space(p + 1, end);
	}
}

int json_parse(const char *text, size_t n, struct json_value *root)
{
	struct json_value v;
	bool nul = false, ok = well_formed(text, n, &v, &nul);
	if (ok && !nul) {
		*root = v;
		return JSON_OK;
	}
	/* Refused: name the first cause in the order json.h gives. A text
	 * that parsed is UTF-8 without NUL bytes, so only \u0000 is left. */
	if (ok)
		return JSON_NUL_ESCAPE;
	if (!text_utf8_valid((const unsigned char *)text, n))
		return JSON_NOT_UTF8;
	if (memchr(text, '\0', n))
		return JSON_NUL_BYTE;
	if (text_json_escapes_nul(text, n))
		return JSON_NUL_ESCAPE;
	return JSON_NOT_JSON;
}

/* ---- reading ---------------------------------------------------------- */

/* The byte after the checked string whose opening quote is at p. */
static const char *skip_string(const char *p)
{
	for (p++; *p != '"'; p++)
		if (*p == '\\')
			p++;
	return p + 1;
}

/* The checked value at p, which ends by end: its type and extent. */
static void value_at(const char *p, const char *end, struct json_value *v)
{
	const char *q = p;
	v->p = p;
	switch (*p) {
	case '"':
		v->type = JSON_STRING;
		q = skip_string(p);
		break;
	case '{':
	case '[': {
		v->type = *p == '{' ? JSON_OBJECT : JSON_ARRAY;
		size_t depth = 0;
		do {
			if (*q == '"') {
				q = skip_string(q);
				continue;
			}
			if (*q == '{' || *q == '[')
				depth++;
			else if (*q == '}' || *q == ']')
				depth--;
			q++;
		} while (depth);
		break;
	}
	case 't':
		v->type = JSON_TRUE;
		q = p + 4;
		break;
	case 'f':
		v->type = JSON_FALSE;
		q = p + 5;
		break;
	case 'n':
		v->type = JSON_NULL;
		q = p + 4;
		break;
	default: {
		bool real = false;
		while (q < end && *q && strchr("0123456789+-.eE", *q)) {
			real |= *q == '.' || *q == 'e' || *q == 'E';
			q++;
		}
		v->type = real ? JSON_REAL : JSON_INTEGER;
	}
	}
	v->n = (size_t)(q - p);
}

void json_iter_start(struct json_iter *it, const struct json_value *container)
{
	bool ok = container->type == JSON_OBJECT || container->type == JSON_ARRAY;
	it->p = ok ? container->p + 1 : container->p;
	it->end = ok ? container->p + container->n - 1 : container->p;
	it->object = container->type == JSON_OBJECT;
}

bool json_iter_next(struct json_iter *it, struct json_value *key, struct json_value *value)
{
	const char *p = skip_space(it->p, it->end);
	if (p < it->end && *p == ',')
		p = skip_space(p + 1, it->end);
	if (p >= it->end)
		return false;
	if (it->object) {
		struct json_value name = { JSON_STRING, p, 0 };
		p = skip_string(p);
		name.n = (size_t)(p - name.p);
		if (key)
			*key = name;
		p = skip_space(skip_space(p, it->end) + 1, it->end); /* the colon */
	}
	value_at(p, it->end, value);
	it->p = value->p + value->n;
	return true;
}

bool json_member(const struct json_value *object, const char *name, size_t len, struct json_value *out)
{
	struct json_iter it;
	struct json_value key;
	if (object->type != JSON_OBJECT)
		return false;
	json_iter_start(&it, object);
	while (json_iter_next(&it, &key, out))
		if (key.n == len + 2 && memcmp(key.p + 1, name, len) == 0)
			return true;
	return false;
}

bool json_int64(const struct json_value *v, int64_t *out)
{
	if (v->type != JSON_INTEGER)
		return false;
	const char *p = v->p, *end = v->p + v->n;
	bool neg = *p == '-';
	uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, m = 0;
	for (p += neg; p < end; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (m > (limit - d) / 10)
			return false;
		m = m * 10 + d;
	}
	*out = neg ? (int64_t)(0 - m) : (int64_t)m;
	return true;
}

double json_double(const struct json_value *v)
{
	char buf[64], *text = buf;
	if (v->type != JSON_INTEGER && v->type != JSON_REAL)
		return 0;
	if (v->n >= sizeof(buf))
		text = xmalloc(v->n + 1);
	memcpy(text, v->p, v->n);
	text[v->n] = '\0';
	double d = strtod(text, NULL);
	if (text != buf)
		free(text);
	return d;
}

/* ---- strings ---------------------------------------------------------- */

/* Decode the character at s[*i] of a checked string's text (s[0..n) with
 * its quotes) into out (4 bytes at most): returns its length and moves *i
 * past it. A high surrogate escape followed at once by a low one is one
 * character; any other surrogate escape is written as if it were one. */
static size_t decode_char(const char *s, size_t n, size_t *i, char *out)
{
	unsigned char c = (unsigned char)s[*i];
	if (c != '\\') {
		out[0] = (char)c;
		*i += 1;
		return 1;
	}
	c = (unsigned char)s[*i + 1];
	*i += 2;
	if (c != 'u') {
		static const char from[] = "bfnrt", to[] = "\b\f\n\r\t";
		const char *k = strchr(from, c);
		out[0] = k ? to[k - from] : (char)c;
		return 1;
	}
	unsigned cp = (unsigned)hex4(s + *i);
	*i += 4;
	if (cp >= 0xd800 && cp <= 0xdbff && *i + 7 <= n && s[*i] == '\\' && s[*i + 1] == 'u') {
		unsigned lo = (unsigned)hex4(s + *i + 2);
		if (lo >= 0xdc00 && lo <= 0xdfff) {
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			*i += 6;
		}
	}
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12);
		out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | cp >> 18);
	out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

bool json_string_is(const struct json_value *s, const char *want, size_t len)
{
	if (s->type != JSON_STRING)
		return false;
	size_t i = 1, k = 0, last = s->n - 1;
	while (i < last) {
		char ch[4];
		size_t m = decode_char(s->p, s->n, &i, ch);
		if (m > len - k || memcmp(ch, want + k, m) != 0)
			return false;
		k += m;
	}
	return k == len;
}

char *json_string_dup(const struct json_value *s, size_t *len)
{
	/* Decoding never lengthens: an escape of 6 bytes gives at most 3. */
	char *out = xmalloc(s->type == JSON_STRING ? s->n - 1 : 1);
	size_t i = 1, k = 0;
	while (s->type == JSON_STRING && i < s->n - 1)
		k += decode_char(s->p, s->n, &i, out + k);
	out[k] = '\0';
	*len = k;
	return out;
}

/* ---- writing ---------------------------------------------------------- */

char *json_compact(const struct json_value *v, size_t *len)
{
	int64_t i;
	char *out;
	if (v->type == JSON_INTEGER || v->type == JSON_REAL) {
		char num[64];
		if (json_int64(v, &i))
			sqlite3_snprintf(sizeof(num), num, "%lld", (long long)i);
		else
			sqlite3_snprintf(sizeof(num), num, "%!.15g", json_double(v));
		*len = strlen(num);
		return xstrndup(num, *len);
	}
	out = xmalloc(v->n + 1);
	size_t k = 0;
	for (const char *p = v->p, *end = v->p + v->n; p < end;) {
		if (*p == '"') {
			const char *q = skip_string(p);
			memcpy(out + k, p, (size_t)(q - p));
			k += (size_t)(q - p);
			p = q;
		} else if (is_space((unsigned char)*p)) {
			p++;
		} else {
			out[k++] = *p++;
		}
	}
	out[k] = '\0';
	*len = k;
	return out;
}
