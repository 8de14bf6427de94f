/* SPDX-License-Identifier: BSD-2-Clause */
/* http.h: a pure HTTP/1.1 request parser (bytes in, a request or a precise
 * error out; no I/O, no allocation), the response head record every
 * answer fills (http_head.c) and its HTTP/1.1 text.
 *
 * Parsed fields are slices of the caller's buffer: they stay valid only while
 * that buffer is unchanged. */
#ifndef HERALD_HTTP_H
#define HERALD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/chunk.h"

#define HTTP_MAX_HEADERS_HARD 128 /* array size; the configured limit is <= this */

struct http_slice {
	const char *p;
	size_t n;
};

enum http_method { HTTP_GET, HTTP_HEAD, HTTP_POST, HTTP_PUT, HTTP_DELETE, HTTP_OPTIONS, HTTP_PATCH, HTTP_OTHER };

struct http_header {
	struct http_slice name;
	struct http_slice value; /* leading/trailing spaces and tabs trimmed */
};

struct http_request {
	enum http_method method;
	struct http_slice method_name;
	struct http_slice target; /* as sent: path plus optional "?query" */
	struct http_slice path;   /* target up to '?' */
	struct http_slice query;  /* after '?', without it; n == 0 if none */
	int minor_version;        /* 0 or 1 (HTTP/1.0 or HTTP/1.1) */
	struct http_header headers[HTTP_MAX_HEADERS_HARD];
	size_t nheaders;
	int64_t content_length; /* -1 when absent */
	bool chunked;           /* Transfer-Encoding present (any value) */
	bool keep_alive;        /* from version and Connection header */
};

struct http_limits {
	size_t max_request_line; /* bytes of the request line, without CRLF */
	size_t max_header_bytes; /* bytes of the whole head, request line included */
	size_t max_headers;      /* header count, <= HTTP_MAX_HEADERS_HARD */
};

struct http_error {
	int status;          /* 400, 414, 431 or 505 */
	const char *message; /* static string naming the cause, e.g. "duplicate Content-Length header" */
};

/* Parse the head of one request at buf[0..len). Returns the head length (> 0)
 * when a whole head is present and valid, 0 when more bytes are needed (and
 * no limit is exceeded yet), or -1 with *err filled when the bytes can never
 * become a valid request: malformed request line or header (400), request
 * line over the limit (414), head over the size or count limit (431),
 * Content-Length invalid, negative, overflowing or sent twice with different
 * values (400), Content-Length together with Transfer-Encoding (400), a
 * version other than HTTP/1.0 or HTTP/1.1 (505). Accepts bare LF line ends;
 * rejects obsolete line folding, whitespace before the colon, control bytes
 * in values, and a missing Host on HTTP/1.1 (400). Whatever it returns,
 * req->method_name, target, path and query are set once a whole, well-formed
 * request line was read (for a refusal's log line); before that their n is 0. */
int http_parse_request(const char *buf, size_t len, const struct http_limits *lim, struct http_request *req,
		       struct http_error *err);

/* A request that came as fields, not text (an HTTP/2 stream's): set
 * what the parser takes from a request line, method and target given
 * (slices the caller keeps valid): method, path, query, HTTP/1.1. */
void http_request_line_set(struct http_request *req, struct http_slice method, struct http_slice target);

/* Judge such a request (its line set, its headers in place) by what the
 * parser refuses in a head, with the same statuses and messages: the
 * request line `method target HTTP/1.1` past max_request_line (414), the
 * head as HTTP/1.1 text past max_header_bytes or more than max_headers
 * fields (431), a method, target, header name or value with a byte the
 * parser refuses, a target not in origin form ("*" for OPTIONS only), no
 * Host, two, or one that is not host[:port] (400). Its Content-Length and
 * framing are the caller's, who knows the body whole. Returns 0, or -1
 * with *err. */
int http_request_check(const struct http_request *req, const struct http_limits *lim, struct http_error *err);

/* The short name a parse error's status is counted under in metrics:
 * "bad_request", "request_line_too_long", "header_too_large",
 * "http_version". */
const char *http_error_cause(int status);

/* Find a header by case-insensitive name; NULL when absent. */
const struct http_header *http_header_get(const struct http_request *req, const char *name);

/* Every header named name, values joined in order with "," (as RFC 9110
 * allows for list headers such as X-Forwarded-For, which a proxy chain may
 * send as several lines). Returns a new string owned by the caller with its
 * length in *len, or NULL when there is no such header. */
char *http_header_join(const struct http_request *req, const char *name, size_t *len);

/* The token of an "Authorization: Bearer <token>" header (scheme matched
 * without regard to case). Returns false when there is none. */
bool http_bearer_token(const struct http_request *req, struct http_slice *tok);

/* The value of cookie name in the request's Cookie header(s) ("a=1; b=2",
 * RFC 6265; surrounding double quotes removed). Returns false when absent
 * or empty. */
bool http_cookie_get(const struct http_request *req, const char *name, struct http_slice *value);

/* Compare a presented token with a configured one in time that does not
 * depend on where they differ; false when none is configured. */
bool http_token_equal(struct http_slice given, const char *want);

/* Whether the request came through a proxy (X-Forwarded-For, Forwarded or
 * X-Real-IP present). */
bool http_forwarded(const struct http_request *req);

/* Walk a "a=1&b=2" query one parameter at a time: *pos starts at 0; each
 * call sets the raw name and value (empty when there is no '=') of the next
 * part, empty parts included, and returns false once none is left. */
bool http_query_next(struct http_slice query, size_t *pos, struct http_slice *name, struct http_slice *value);

/* Find a query parameter by exact name in a "a=1&b=2" string; percent-decoding
 * is not applied. Returns true and the raw value slice when present. */
bool http_query_get(struct http_slice query, const char *name, struct http_slice *value);

/* Decode %XX and '+' from src into dst (dst must hold src.n + 1 bytes).
 * Returns the decoded length, or -1 on a malformed escape or a NUL byte. */
long http_percent_decode(struct http_slice src, char *dst);

/* The same into a new string the caller frees (its length in *len unless
 * len is NULL), or NULL when src is malformed. */
char *http_percent_decode_dup(struct http_slice src, size_t *len);

/* The reason phrase for a status ("Not Found"); "Unknown" if none. */
const char *http_reason(int status);

/* A response head: the status and the fields in the order they are sent,
 * filled by whoever answers and rendered by the protocol it goes out on
 * (http_head_text for HTTP/1.1; HTTP/2 submits the fields as HEADERS).
 * The head owns copies of every name and value (http_head_add copies);
 * http_head_free frees them. Fields are kept as offsets into text, which
 * grows as fields are added. */
struct http_field {
	size_t name, namelen;   /* offset into text, length */
	size_t value, valuelen; /* likewise */
};
struct http_head {
	int status;
	bool keep_alive; /* the connection stays open after the response */
	char *text;      /* names and values, back to back */
	size_t text_len, text_cap;
	struct http_field *fields;
	size_t nfields, fields_cap;
};

/* An empty head with this status (no fields; keep_alive false). */
void http_head_init(struct http_head *h, int status);

/* The usual head of a whole response: Content-Type (when content_type is
 * not NULL), Content-Length: body_len (left out for 1xx, 204 and 304, which
 * carry no body, RFC 9110 8.6), and Connection: keep-alive or close. Fields
 * added after these follow them. */
void http_head_response(struct http_head *h, int status, const char *content_type, size_t body_len, bool keep_alive);

/* Add one field (name and value copied; value as given, without CRLF). */
void http_head_add(struct http_head *h, const char *name, const char *value);
void http_head_addn(struct http_head *h, const char *name, size_t namelen, const char *value, size_t valuelen);
void http_head_addf(struct http_head *h, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Add every field of src after h's (the status and keep_alive of src are
 * not looked at). src may be NULL. */
void http_head_append(struct http_head *h, const struct http_head *src);

/* Field i's name and value (pointers into h->text, valid until the next
 * add). */
struct http_slice http_head_name(const struct http_head *h, size_t i);
struct http_slice http_head_value(const struct http_head *h, size_t i);

/* The value of the first field named name (any case), or a slice with
 * p NULL. */
struct http_slice http_head_get(const struct http_head *h, const char *name);

void http_head_free(struct http_head *h);

/* The head as HTTP/1.1 text, `HTTP/1.1 SSS Reason`, each field a `Name:
 * value` line, an empty line, then body_len bytes of body (body may be
 * NULL when body_len is 0), in a new chunk (one reference, the caller's). */
struct chunk *http_head_text(const struct http_head *h, const char *body, size_t body_len);

/* Write s into dst as the inside of a JSON string; dst holds 6 * strlen(s)
 * bytes at least. Returns the bytes written (no NUL is added). */
size_t http_json_escape(const char *s, char *dst);

/* The standard refusal's body, {"error":"<message>","status":N} and a
 * newline (the message JSON-escaped; NULL: the reason phrase), as a new
 * string the caller frees, its length in *len; and its head
 * (http_head_response with application/json). */
char *http_error_body(int status, const char *message, size_t *len);
void http_head_error(struct http_head *h, int status, size_t body_len, bool keep_alive);

#endif
