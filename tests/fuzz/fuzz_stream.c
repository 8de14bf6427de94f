/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_stream.c: fuzz target for stream_params_parse in src/api/stream.c, the
 * parsing of a stream request's query (topic=, last_event_id=, token=) and
 * its Last-Event-ID and Authorization headers. The input is a request head,
 * parsed by http_parse_request under the server's default limits; a head
 * that parses is handed to stream_params_parse. Invariants:
 *   - success: the resume point is -1 exactly when neither a non-empty
 *     Last-Event-ID header nor a last_event_id parameter was given, and
 *     otherwise the digits of the one that wins (the header) read as a
 *     number; at most READER_MAX_TOPICS topics, each non-empty, at most 128
 *     bytes, of A-Za-z0-9 _ . : / - (a '*' only as a whole last segment,
 *     after a '/' or alone);
 *     freeing leaves the struct empty;
 *   - refusal: a reason, no topics, no token, no resume point.
 * Leaks and over-reads are the sanitizers' (and the driver's guard page's).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "http/http.h"
#include "api/stream.h"

static const struct http_limits limits = { 8192, 16384, 64 }; /* the server's defaults */

/* The number that the decimal digits of s denote, or -2 when s is not all
 * digits or does not fit an int64_t. Written apart from stream.c's. */
static int64_t decimal(struct http_slice s)
{
	int64_t v = 0;
	if (s.n == 0)
		return -2;
	for (size_t i = 0; i < s.n; i++) {
		if (s.p[i] < '0' || s.p[i] > '9')
			return -2;
		int d = s.p[i] - '0';
		if (v > (INT64_MAX - d) / 10)
			return -2;
		v = v * 10 + d;
	}
	return v;
}

static bool topic_byte(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
	       c == ':' || c == '/' || c == '-';
}

/* A topic as the stream accepts it: the plain bytes, and a '*' only as the
 * whole last segment ("*" alone, or after a '/'). */
static bool topic_ok(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > 128)
		return false;
	if (t[0] == '$') { /* herald's own topics: "$" then a pattern that is not "*" */
		t++;
		n--;
		if (n == 0 || t[0] == '*' || t[0] == '/')
			return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (topic_byte(t[i]))
			continue;
		if (t[i] == '*' && i == n - 1 && (i == 0 || t[i - 1] == '/'))
			continue;
		return false;
	}
	return true;
}

/* The resume point a successful parse must report: the non-empty header
 * wins over the query parameter; -1 when neither is there. */
static int64_t expected_resume(const struct http_request *req)
{
	const struct http_header *h = http_header_get(req, "Last-Event-ID");
	struct http_slice v;
	if (h && h->value.n)
		return decimal(h->value);
	if (http_query_get(req->query, "last_event_id", &v))
		return decimal(v);
	return -1;
}

static void check_params(const struct http_request *req)
{
	struct stream_params p;
	memset(&p, 0xa5, sizeof(p)); /* the parser must set every field */
	const char *why = stream_params_parse(req, &p);
	if (why) {
		FUZZ_ASSERT(why[0]);
		FUZZ_ASSERT(p.ntopics == 0 && p.token == NULL && p.resume == -1);
		return;
	}
	int64_t want = expected_resume(req);
	FUZZ_ASSERT(want != -2); /* a malformed id must have been refused */
	FUZZ_ASSERT(p.resume == want);
	FUZZ_ASSERT(p.ntopics <= READER_MAX_TOPICS);
	for (size_t i = 0; i < p.ntopics; i++)
		FUZZ_ASSERT(p.topics[i] && topic_ok(p.topics[i]));
	stream_params_free(&p);
	FUZZ_ASSERT(p.ntopics == 0 && p.token == NULL && p.resume == -1);
}

int fuzz_one(const uint8_t *data, size_t size)
{
	static struct http_request req;
	struct http_error err = { 0, NULL };
	if (http_parse_request((const char *)data, size, &limits, &req, &err) > 0)
		check_params(&req);
	return 0;
}
