/* SPDX-License-Identifier: BSD-2-Clause */
/* http.c: the HTTP/1.1 request-head parser and the refusal's body.
 *
 * The parser is one forward pass over buf[0..len) that never looks at a byte
 * at or past len, nor past max_header_bytes. Every refusal is decided at the
 * first byte that makes it certain, and from that byte and the ones before it
 * only; so feeding a request in pieces gives 0 ("need more") for every prefix
 * and then the same answer, success or the same status, as the whole input.
 * The order of the checks at one byte position is what keeps that promise:
 *
 *   byte index >= max_header_bytes             -> 431 (the head cannot fit)
 *   request-line content byte past the limit   -> 414
 *   first byte of a header line past the count -> 431
 *   otherwise the byte's syntax                -> 400
 *   at a line's LF: the line's meaning         -> 400 / 505
 *
 * Syntax accepted: optional empty lines before the request line (RFC 9112
 * 2.2), `method SP target SP HTTP/d.d` with single spaces, origin-form
 * targets of visible ASCII (or "*" for OPTIONS), header names of token
 * characters immediately followed by ':', values of HT, SP, visible ASCII
 * and obs-text, lines ended by CRLF or a bare LF. */
#include "http/http.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

/* RFC 9110 tchar: the characters of a method or a header name. */
static const unsigned char tchar[256] = {
	['0' ... '9'] = 1, ['A' ... 'Z'] = 1, ['a' ... 'z'] = 1, ['!'] = 1, ['#'] = 1, ['$'] = 1,
	['%'] = 1,         ['&'] = 1,         ['\''] = 1,        ['*'] = 1, ['+'] = 1, ['-'] = 1,
	['.'] = 1,         ['^'] = 1,         ['_'] = 1,         ['`'] = 1, ['|'] = 1, ['~'] = 1,
};

/* Bytes allowed inside a header value: HT, SP, VCHAR and obs-text. */
static const unsigned char vchar[256] = {
	['\t'] = 1,
	[' ' ... '~'] = 1,
	[0x80 ... 0xff] = 1,
};

static bool slice_eq(const char *p, size_t n, const char *lit)
{
	size_t ln = strlen(lit);
	return n == ln && memcmp(p, lit, n) == 0;
}

static bool slice_caseeq(const char *p, size_t n, const char *lit)
{
	size_t ln = strlen(lit);
	return n == ln && strncasecmp(p, lit, n) == 0;
}

static bool is_ows(char c)
{
	return c == ' ' || c == '\t';
}

static enum http_method method_of(const char *p, size_t n)
{
	static const struct {
		const char *name;
		enum http_method m;
	} known[] = {
		{ "GET", HTTP_GET },       { "HEAD", HTTP_HEAD },       { "POST", HTTP_POST },   { "PUT", HTTP_PUT },
		{ "DELETE", HTTP_DELETE }, { "OPTIONS", HTTP_OPTIONS }, { "PATCH", HTTP_PATCH },
	};
	for (size_t i = 0; i < ARRAY_LEN(known); i++)
		if (slice_eq(p, n, known[i].name))
			return known[i].m;
	return HTTP_OTHER;
}

/* Parse one Content-Length value: a comma-separated list of decimal numbers
 * that must all be equal (RFC 9110 8.6 lets a recipient accept "5, 5").
 * Returns 0 and *out, or -1 with *why naming the fault. */
static int parse_content_length(const char *p, size_t n, int64_t *out, const char **why)
{
	const char *e = p + n;
	int64_t first = -1;

	for (;;) {
		while (p < e && is_ows(*p))
			p++;
		if (p == e || !(*p >= '0' && *p <= '9')) {
			*why = "invalid Content-Length value";
			return -1;
		}
		int64_t v = 0;
		while (p < e && *p >= '0' && *p <= '9') {
			int d = *p - '0';
			if (v > (INT64_MAX - d) / 10) {
				*why = "Content-Length value too large";
				return -1;
			}
			v = v * 10 + d;
			p++;
		}
		while (p < e && is_ows(*p))
			p++;
		if (first >= 0 && v != first) {
			*why = "conflicting Content-Length values";
			return -1;
		}
		first = v;
		if (p == e)
			break;
		if (*p != ',') {
			*why = "invalid Content-Length value";
			return -1;
		}
		p++;
	}
	*out = first;
	return 0;
}

/* Look through a Connection value's comma-separated tokens. */
static void scan_connection(const char *p, size_t n, bool *close, bool *keep)
{
	const char *e = p + n;
	while (p < e) {
		const char *c = memchr(p, ',', (size_t)(e - p));
		const char *te = c ? c : e;
		const char *ts = p;
		while (ts < te && is_ows(*ts))
			ts++;
		while (te > ts && is_ows(te[-1]))
			te--;
		if (slice_caseeq(ts, (size_t)(te - ts), "close"))
			*close = true;
		else if (slice_caseeq(ts, (size_t)(te - ts), "keep-alive"))
			*keep = true;
		if (!c)
			break;
		p = c + 1;
	}
}

#define FAIL(st, msg)                 \
	do {                          \
		err->status = (st);   \
		err->message = (msg); \
		return -1;            \
	} while (0)

/* Out of bytes before the head ended: 431 once the head can no longer fit,
 * else ask for more. */
#define NEED_MORE()                                                  \
	do {                                                         \
		if (len >= max_hb)                                   \
			FAIL(431, "request header block too large"); \
		return 0;                                            \
	} while (0)

enum rl_state { RL_METHOD, RL_TARGET0, RL_TARGET, RL_STAR, RL_VERSION };

/* RFC 9112 3.2: Host is uri-host [ ":" port ], or empty. uri-host is an
 * IP literal in brackets, or a reg-name (which covers IPv4): unreserved
 * characters, sub-delims and %XX. The port, if any, is at most 65535. */
static bool valid_host(const char *p, size_t n)
{
	size_t i = 0;
	if (n && p[0] == '[') {
		for (i = 1; i < n && p[i] != ']'; i++)
			if (!isxdigit((unsigned char)p[i]) && p[i] != ':' && p[i] != '.' && p[i] != 'v' && p[i] != 'V')
				return false;
		if (i == n || i == 1)
			return false;
		i++;
	} else {
		for (; i < n && p[i] != ':'; i++) {
			unsigned char ch = (unsigned char)p[i];
			if (ch == '%') {
				if (n - i < 3 || !isxdigit((unsigned char)p[i + 1]) ||
				    !isxdigit((unsigned char)p[i + 2]))
					return false;
				i += 2;
			} else if (!isalnum(ch) && !(ch && strchr("-._~!$&'()*+,;=", ch))) {
				return false;
			}
		}
	}
	if (i == n)
		return true;
	if (p[i] != ':')
		return false;
	unsigned long port = 0;
	for (i++; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return false;
		port = port * 10 + (unsigned long)(p[i] - '0');
		if (port > 65535)
			return false;
	}
	return true;
}

int http_parse_request(const char *buf, size_t len, const struct http_limits *lim, struct http_request *req,
		       struct http_error *err)
{
	static const struct http_limits defaults = { 8192, 16384, 64 };
	const unsigned char *b = (const unsigned char *)buf;
	if (!lim)
		lim = &defaults;
	size_t max_rl = lim->max_request_line;
	size_t max_hb = MIN(lim->max_header_bytes, (size_t)INT_MAX);
	size_t max_h = MIN(lim->max_headers, (size_t)HTTP_MAX_HEADERS_HARD);
	size_t end = MIN(len, max_hb); /* never look at b[end] or beyond */
	size_t i = 0;

	req->nheaders = 0;
	req->content_length = -1;
	req->chunked = false;
	req->keep_alive = false;
	req->query.p = NULL;
	req->query.n = 0;
	req->method_name.n = req->target.n = req->path.n = 0; /* no request line yet */

	/* Empty lines before the request line are skipped (a client may send
	 * a stray CRLF after a body); they count toward the head's size. */
	for (;;) {
		if (i == end)
			NEED_MORE();
		if (b[i] == '\n') {
			i++;
		} else if (b[i] == '\r') {
			if (i + 1 == end)
				NEED_MORE();
			if (b[i + 1] != '\n')
				FAIL(400, "bare CR before the request line");
			i += 2;
		} else {
			break;
		}
	}

	/* The request line. */
	size_t rl = i, mend = 0, t0 = 0, tend = 0, v0 = 0;
	enum rl_state st = RL_METHOD;
	for (;; i++) {
		if (i == end)
			NEED_MORE();
		unsigned char c = b[i];
		if (c == '\n')
			break;
		if (c == '\r') {
			if (i + 1 == end)
				NEED_MORE();
			if (b[i + 1] != '\n')
				FAIL(400, "bare CR in the request line");
			break;
		}
		if (i - rl >= max_rl)
			FAIL(414, "request line too long");
		switch (st) {
		case RL_METHOD:
			if (c == ' ') {
				if (i == rl)
					FAIL(400, "empty method");
				mend = i;
				st = RL_TARGET0;
			} else if (!tchar[c]) {
				FAIL(400, "invalid character in method");
			}
			break;
		case RL_TARGET0:
			t0 = i;
			if (c == '/')
				st = RL_TARGET;
			else if (c == '*')
				st = RL_STAR;
			else if (c == ' ')
				FAIL(400, "empty request target");
			else if (c > ' ' && c < 0x7f)
				FAIL(400, "request target not in origin form");
			else
				FAIL(400, "invalid character in request target");
			break;
		case RL_TARGET:
			if (c == ' ') {
				tend = i;
				v0 = i + 1;
				st = RL_VERSION;
			} else if (c <= ' ' || c >= 0x7f) {
				FAIL(400, "invalid character in request target");
			}
			break;
		case RL_STAR:
			if (c != ' ')
				FAIL(400, "request target not in origin form");
			tend = i;
			v0 = i + 1;
			st = RL_VERSION;
			break;
		case RL_VERSION: {
			size_t k = i - v0;
			bool ok;
			if (k < 5)
				ok = c == (unsigned char)"HTTP/"[k];
			else if (k == 6)
				ok = c == '.';
			else
				ok = k < 8 && c >= '0' && c <= '9';
			if (!ok)
				FAIL(400, "malformed HTTP version");
			break;
		}
		}
	}
	if (st != RL_VERSION || i - v0 != 8)
		FAIL(400, "malformed request line");
	/* Method and target are set before anything else can fail, so that a
	 * refusal of this head can name them. */
	req->method_name.p = buf + rl;
	req->method_name.n = mend - rl;
	req->method = method_of(req->method_name.p, req->method_name.n);
	req->target.p = buf + t0;
	req->target.n = tend - t0;
	const char *q = memchr(req->target.p, '?', req->target.n);
	req->path.p = req->target.p;
	req->path.n = q ? (size_t)(q - req->target.p) : req->target.n;
	if (q) {
		req->query.p = q + 1;
		req->query.n = req->target.n - req->path.n - 1;
	}
	if (b[v0 + 5] != '1' || b[v0 + 7] > '1')
		FAIL(505, "HTTP version not supported");
	req->minor_version = b[v0 + 7] - '0';
	if (b[t0] == '*' && req->method != HTTP_OPTIONS)
		FAIL(400, "asterisk request target is only for OPTIONS");
	i += b[i] == '\r' ? 2 : 1;

	/* Header lines, up to the empty line. */
	unsigned hosts = 0;
	bool conn_close = false, conn_keep = false;
	for (;;) {
		if (i == end)
			NEED_MORE();
		if (b[i] == '\n') {
			i++;
			break;
		}
		if (b[i] == '\r') {
			if (i + 1 == end)
				NEED_MORE();
			if (b[i + 1] != '\n')
				FAIL(400, "bare CR in the header block");
			i += 2;
			break;
		}
		if (req->nheaders >= max_h)
			FAIL(431, "too many header fields");
		if (b[i] == ' ' || b[i] == '\t')
			FAIL(400, "obsolete line folding in header");

		size_t n0 = i;
		while (tchar[b[i]]) {
			if (++i == end)
				NEED_MORE();
		}
		if (b[i] != ':') {
			if (b[i] == ' ' || b[i] == '\t')
				FAIL(400, "whitespace before colon in header");
			FAIL(400, "invalid character in header name");
		}
		if (i == n0)
			FAIL(400, "empty header name");
		size_t n1 = i++;

		/* The value, trimmed of spaces and tabs at both ends. */
		size_t vs = 0, ve = 0;
		bool seen = false;
		for (;; i++) {
			if (i == end)
				NEED_MORE();
			unsigned char c = b[i];
			if (c == '\n')
				break;
			if (c == '\r') {
				if (i + 1 == end)
					NEED_MORE();
				if (b[i + 1] != '\n')
					FAIL(400, "bare CR in header value");
				break;
			}
			if (!vchar[c])
				FAIL(400, "control character in header value");
			if (c != ' ' && c != '\t') {
				if (!seen)
					vs = i;
				seen = true;
				ve = i + 1;
			}
		}
		if (!seen)
			vs = ve = i;

		struct http_header *h = &req->headers[req->nheaders++];
		h->name.p = buf + n0;
		h->name.n = n1 - n0;
		h->value.p = buf + vs;
		h->value.n = ve - vs;
		i += b[i] == '\r' ? 2 : 1;

		if (slice_caseeq(h->name.p, h->name.n, "Content-Length")) {
			int64_t v;
			const char *why;
			if (parse_content_length(h->value.p, h->value.n, &v, &why) < 0)
				FAIL(400, why);
			if (req->content_length >= 0 && req->content_length != v)
				FAIL(400, "conflicting Content-Length headers");
			if (req->chunked)
				FAIL(400, "both Content-Length and Transfer-Encoding");
			req->content_length = v;
		} else if (slice_caseeq(h->name.p, h->name.n, "Transfer-Encoding")) {
			if (req->content_length >= 0)
				FAIL(400, "both Content-Length and Transfer-Encoding");
			req->chunked = true;
		} else if (slice_caseeq(h->name.p, h->name.n, "Host")) {
			if (hosts++)
				FAIL(400, "more than one Host header");
			if (!valid_host(h->value.p, h->value.n))
				FAIL(400, "the Host header is not a valid host[:port]");
		} else if (slice_caseeq(h->name.p, h->name.n, "Connection")) {
			scan_connection(h->value.p, h->value.n, &conn_close, &conn_keep);
		}
	}

	if (req->minor_version == 1 && hosts == 0)
		FAIL(400, "missing Host header");
	if (req->minor_version == 1)
		req->keep_alive = !conn_close;
	else
		req->keep_alive = conn_keep && !conn_close;
	return (int)i;
}

void http_request_line_set(struct http_request *req, struct http_slice method, struct http_slice target)
{
	req->method_name = method;
	req->method = method_of(method.p, method.n);
	req->minor_version = 1;
	req->target = target;
	const char *q = target.n ? memchr(target.p, '?', target.n) : NULL;
	req->path.p = target.p;
	req->path.n = q ? (size_t)(q - target.p) : target.n;
	req->query.p = q ? q + 1 : NULL;
	req->query.n = q ? target.n - req->path.n - 1 : 0;
}

/* Whether every byte of p is in the table. */
static bool all_in(const unsigned char *table, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!table[(unsigned char)p[i]])
			return false;
	return true;
}

int http_request_check(const struct http_request *req, const struct http_limits *lim, struct http_error *err)
{
	size_t max_hb = MIN(lim->max_header_bytes, (size_t)INT_MAX);
	size_t max_h = MIN(lim->max_headers, (size_t)HTTP_MAX_HEADERS_HARD);
	/* The sizes the head would have as HTTP/1.1 text: `method SP target
	 * SP HTTP/1.1` CRLF, `name: value` CRLF per field, CRLF. The parser
	 * meets the request line's limit first unless the head's own is
	 * smaller. */
	size_t line = req->method_name.n + 1 + req->target.n + 9, head = line + 2, past_count = 0;
	for (size_t i = 0; i < req->nheaders; i++) {
		if (i == max_h)
			past_count = head; /* where the line over the count begins */
		head += req->headers[i].name.n + 2 + req->headers[i].value.n + 2;
	}
	head += 2;
	if (line > lim->max_request_line && lim->max_request_line < max_hb)
		FAIL(414, "request line too long");
	if (req->nheaders > max_h && past_count < max_hb)
		FAIL(431, "too many header fields");
	if (head > max_hb)
		FAIL(431, "request header block too large");
	if (!req->method_name.n)
		FAIL(400, "empty method");
	if (!all_in(tchar, req->method_name.p, req->method_name.n))
		FAIL(400, "invalid character in method");
	if (!req->target.n)
		FAIL(400, "empty request target");
	for (size_t i = 0; i < req->target.n; i++) {
		unsigned char c = (unsigned char)req->target.p[i];
		if (c <= ' ' || c >= 0x7f)
			FAIL(400, "invalid character in request target");
	}
	if (req->target.p[0] == '*') {
		if (req->target.n != 1)
			FAIL(400, "request target not in origin form");
		if (req->method != HTTP_OPTIONS)
			FAIL(400, "asterisk request target is only for OPTIONS");
	} else if (req->target.p[0] != '/') {
		FAIL(400, "request target not in origin form");
	}
	unsigned hosts = 0;
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];
		if (!h->name.n)
			FAIL(400, "empty header name");
		if (!all_in(tchar, h->name.p, h->name.n))
			FAIL(400, "invalid character in header name");
		if (!all_in(vchar, h->value.p, h->value.n))
			FAIL(400, "control character in header value");
		if (slice_caseeq(h->name.p, h->name.n, "Host")) {
			if (hosts++)
				FAIL(400, "more than one Host header");
			if (!valid_host(h->value.p, h->value.n))
				FAIL(400, "the Host header is not a valid host[:port]");
		}
	}
	if (req->minor_version == 1 && hosts == 0)
		FAIL(400, "missing Host header");
	return 0;
}

const struct http_header *http_header_get(const struct http_request *req, const char *name)
{
	for (size_t i = 0; i < req->nheaders; i++)
		if (slice_caseeq(req->headers[i].name.p, req->headers[i].name.n, name))
			return &req->headers[i];
	return NULL;
}

char *http_header_join(const struct http_request *req, const char *name, size_t *len)
{
	size_t total = 0, count = 0;
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];
		if (slice_caseeq(h->name.p, h->name.n, name)) {
			total += h->value.n + 1;
			count++;
		}
	}
	if (!count)
		return NULL;
	char *out = xmalloc(total + 1), *p = out;
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];
		if (!slice_caseeq(h->name.p, h->name.n, name))
			continue;
		if (p != out)
			*p++ = ',';
		memcpy(p, h->value.p, h->value.n);
		p += h->value.n;
	}
	*p = '\0';
	*len = (size_t)(p - out);
	return out;
}

bool http_bearer_token(const struct http_request *req, struct http_slice *tok)
{
	const struct http_header *h = http_header_get(req, "Authorization");
	if (!h || h->value.n <= 7 || strncasecmp(h->value.p, "Bearer ", 7) != 0)
		return false;
	tok->p = h->value.p + 7;
	tok->n = h->value.n - 7;
	while (tok->n && tok->p[0] == ' ') {
		tok->p++;
		tok->n--;
	}
	return tok->n > 0;
}

bool http_cookie_get(const struct http_request *req, const char *name, struct http_slice *value)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];
		if (!slice_caseeq(h->name.p, h->name.n, "Cookie"))
			continue;
		const char *p = h->value.p, *e = p + h->value.n;
		while (p < e) {
			while (p < e && (*p == ' ' || *p == '\t' || *p == ';'))
				p++;
			const char *pair = p;
			while (p < e && *p != ';')
				p++;
			const char *eq = memchr(pair, '=', (size_t)(p - pair));
			if (!eq || (size_t)(eq - pair) != nl || memcmp(pair, name, nl) != 0)
				continue;
			const char *v = eq + 1, *ve = p;
			while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
				ve--;
			if (ve - v >= 2 && *v == '"' && ve[-1] == '"') {
				v++;
				ve--;
			}
			if (ve == v)
				return false;
			value->p = v;
			value->n = (size_t)(ve - v);
			return true;
		}
	}
	return false;
}

bool http_token_equal(struct http_slice given, const char *want)
{
	size_t wn = strlen(want);
	if (!wn || given.n != wn)
		return false;
	unsigned char diff = 0;
	for (size_t i = 0; i < wn; i++)
		diff |= (unsigned char)(given.p[i] ^ want[i]);
	return diff == 0;
}

bool http_forwarded(const struct http_request *req)
{
	return http_header_get(req, "X-Forwarded-For") || http_header_get(req, "Forwarded") ||
	       http_header_get(req, "X-Real-IP");
}

const char *http_error_cause(int status)
{
	switch (status) {
	case 414:
		return "request_line_too_long";
	case 431:
		return "header_too_large";
	case 505:
		return "http_version";
	default:
		return "bad_request";
	}
}

bool http_query_next(struct http_slice query, size_t *pos, struct http_slice *name, struct http_slice *value)
{
	if (*pos >= query.n)
		return false; /* done, or no query (query.p may be NULL: no offset from it) */
	const char *p = query.p + *pos, *e = query.p + query.n;
	const char *amp = memchr(p, '&', (size_t)(e - p));
	const char *se = amp ? amp : e;
	const char *eq = memchr(p, '=', (size_t)(se - p));
	*name = (struct http_slice){ p, (size_t)((eq ? eq : se) - p) };
	*value = eq ? (struct http_slice){ eq + 1, (size_t)(se - eq - 1) } : (struct http_slice){ se, 0 };
	*pos = amp ? (size_t)(amp + 1 - query.p) : query.n;
	return true;
}

bool http_query_get(struct http_slice query, const char *name, struct http_slice *value)
{
	size_t nl = strlen(name), pos = 0;
	struct http_slice k, v;
	while (http_query_next(query, &pos, &k, &v))
		if (k.n == nl && memcmp(k.p, name, nl) == 0) {
			*value = v;
			return true;
		}
	return false;
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

long http_percent_decode(struct http_slice src, char *dst)
{
	size_t o = 0;
	for (size_t i = 0; i < src.n; i++) {
		unsigned char c = (unsigned char)src.p[i];
		if (c == '%') {
			if (src.n - i < 3)
				return -1;
			int hi = hexval((unsigned char)src.p[i + 1]), lo = hexval((unsigned char)src.p[i + 2]);
			if (hi < 0 || lo < 0)
				return -1;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		} else if (c == '+') {
			c = ' ';
		}
		if (c == 0)
			return -1;
		dst[o++] = (char)c;
	}
	dst[o] = '\0';
	return (long)o;
}

char *http_percent_decode_dup(struct http_slice src, size_t *len)
{
	char *out = xmalloc(src.n + 1);
	long n = http_percent_decode(src, out);
	if (n < 0) {
		free(out);
		return NULL;
	}
	if (len)
		*len = (size_t)n;
	return out;
}

const char *http_reason(int status)
{
	switch (status) {
	case 100:
		return "Continue";
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 204:
		return "No Content";
	case 304:
		return "Not Modified";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 408:
		return "Request Timeout";
	case 411:
		return "Length Required";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 415:
		return "Unsupported Media Type";
	case 422:
		return "Unprocessable Content";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 501:
		return "Not Implemented";
	case 503:
		return "Service Unavailable";
	case 505:
		return "HTTP Version Not Supported";
	default:
		return "Unknown";
	}
}

static char *put(char *w, const char *s, size_t n)
{
	if (n)
		memcpy(w, s, n);
	return w + n;
}

size_t http_json_escape(const char *s, char *dst)
{
	static const char hex[] = "0123456789abcdef";
	char *w = dst;
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			*w++ = '\\';
			*w++ = (char)c;
		} else if (c == '\n') {
			*w++ = '\\';
			*w++ = 'n';
		} else if (c == '\r') {
			*w++ = '\\';
			*w++ = 'r';
		} else if (c == '\t') {
			*w++ = '\\';
			*w++ = 't';
		} else if (c < 0x20 || c == 0x7f) {
			w = put(w, "\\u00", 4);
			*w++ = hex[c >> 4];
			*w++ = hex[c & 15];
		} else {
			*w++ = (char)c;
		}
	}
	return (size_t)(w - dst);
}

char *http_error_body(int status, const char *message, size_t *len)
{
	if (!message)
		message = http_reason(status);
	size_t mn = strlen(message);
	char *body = xmalloc(6 * mn + 64);
	char *w = body;
	w = put(w, "{\"error\":\"", 10);
	w += http_json_escape(message, w);
	w += sprintf(w, "\",\"status\":%d}\n", status);
	*len = (size_t)(w - body);
	return body;
}

void http_head_error(struct http_head *h, int status, size_t body_len, bool keep_alive)
{
	http_head_response(h, status, "application/json", body_len, keep_alive);
}
