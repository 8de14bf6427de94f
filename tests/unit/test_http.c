/* SPDX-License-Identifier: BSD-2-Clause */
/* test_http.c: the request parser (happy paths, every refusal, limits,
 * incremental feeding, inputs ending at a PROT_NONE guard page) and the
 * query, percent-decoding and response-formatting helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"
#include "guard.h"
#include "http/http.h"

/* Every parse reads its input from the end of this arena, right before an
 * inaccessible page, so reading one byte past len faults. */
static const struct http_limits deflim = { 8192, 16384, 64 };
static struct http_request req;
static struct http_error err;

static int parse_n(const char *s, size_t n, const struct http_limits *lim)
{
	err.status = 0;
	err.message = NULL;
	return http_parse_request(guarded(s, n), n, lim, &req, &err);
}

static int parse(const char *s)
{
	return parse_n(s, strlen(s), &deflim);
}

static bool slice_is(struct http_slice sl, const char *s)
{
	return sl.n == strlen(s) && memcmp(sl.p, s, sl.n) == 0;
}

/* A refusal with the given status and a message; fed in pieces, every
 * prefix is 0 until the first refusal, and from there on the same refusal. */
#define EXPECT_ERR(s, st)                                          \
	do {                                                       \
		int r_ = parse(s);                                 \
		CHECK_EQ_INT(r_, -1);                              \
		CHECK_EQ_INT(err.status, (st));                    \
		CHECK(err.message != NULL && *err.message);        \
		if (r_ != -1 || err.status != (st))                \
			fprintf(stderr, "  input: %s\n", (s));     \
		CHECK(prefixes_consistent(s, strlen(s), &deflim)); \
	} while (0)

/* A whole head, consistent when fed in pieces. */
#define EXPECT_OK(s)                                                                                                \
	do {                                                                                                        \
		int r_ = parse(s);                                                                                  \
		CHECK_EQ_INT(r_, (int)strlen(s));                                                                   \
		if (r_ != (int)strlen(s))                                                                           \
			fprintf(stderr, "  input: %s (%d: %s)\n", (s), err.status, err.message ? err.message : ""); \
		CHECK(prefixes_consistent(s, strlen(s), &deflim));                                                  \
	} while (0)

/* Feed every prefix of s (each placed before the guard page) and check the
 * answers are 0 up to some length and then all equal to the whole input's
 * answer (same head length, or -1 with the same status). */
static bool prefixes_consistent(const char *s, size_t n, const struct http_limits *lim)
{
	int full = parse_n(s, n, lim);
	int full_status = err.status;
	size_t full_head = full > 0 ? (size_t)full : 0;
	bool decided = false;
	for (size_t k = 0; k <= n; k++) {
		int r = parse_n(s, k, lim);
		if (r == 0) {
			if (decided)
				return false;
			continue;
		}
		decided = true;
		if (r != full)
			return false;
		if (r < 0 && err.status != full_status)
			return false;
		if (r > 0 && k < full_head)
			return false;
	}
	return true;
}

static void test_simple_get(void)
{
	const char *s = "GET /api/events/stream?topic=a,b&last_event_id=7 HTTP/1.1\r\n"
			"Host: localhost:8199\r\n"
			"Accept:   text/event-stream  \r\n"
			"X-Empty:\r\n"
			"X-Blank: \t \r\n"
			"\r\n";
	CHECK_EQ_INT(parse(s), (int)strlen(s));
	CHECK_EQ_INT(req.method, HTTP_GET);
	CHECK(slice_is(req.method_name, "GET"));
	CHECK(slice_is(req.target, "/api/events/stream?topic=a,b&last_event_id=7"));
	CHECK(slice_is(req.path, "/api/events/stream"));
	CHECK(slice_is(req.query, "topic=a,b&last_event_id=7"));
	CHECK_EQ_INT(req.minor_version, 1);
	CHECK_EQ_INT(req.nheaders, 4);
	CHECK(slice_is(req.headers[0].name, "Host"));
	CHECK(slice_is(req.headers[0].value, "localhost:8199"));
	CHECK(slice_is(req.headers[1].value, "text/event-stream"));
	CHECK(slice_is(req.headers[2].name, "X-Empty"));
	CHECK_EQ_INT(req.headers[2].value.n, 0);
	CHECK_EQ_INT(req.headers[3].value.n, 0);
	CHECK_EQ_INT(req.content_length, -1);
	CHECK(!req.chunked);
	CHECK(req.keep_alive);

	const struct http_header *h = http_header_get(&req, "accept");
	CHECK(h != NULL && slice_is(h->value, "text/event-stream"));
	CHECK(http_header_get(&req, "HOST") == &req.headers[0]);
	CHECK(http_header_get(&req, "Accep") == NULL);
	CHECK(http_header_get(&req, "Content-Length") == NULL);

	/* No query: an empty slice. */
	CHECK(parse("GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	CHECK(slice_is(req.path, "/api/health"));
	CHECK_EQ_INT(req.query.n, 0);
	/* An empty query after '?'. */
	CHECK(parse("GET /a? HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	CHECK(slice_is(req.path, "/a"));
	CHECK(slice_is(req.target, "/a?"));
	CHECK_EQ_INT(req.query.n, 0);
	CHECK(parse("GET /?x=1?y HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	CHECK(slice_is(req.path, "/"));
	CHECK(slice_is(req.query, "x=1?y"));
}

static void test_post_and_pipeline(void)
{
	const char *s = "POST /api/events HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			"Content-Length: 13\r\n\r\n{\"data\":\"hi\"}";
	size_t head = strlen(s) - 13;
	CHECK_EQ_INT(parse(s), (int)head);
	CHECK_EQ_INT(req.method, HTTP_POST);
	CHECK_EQ_INT(req.content_length, 13);
	CHECK(!req.chunked);

	/* Two requests in one buffer: the first head, then from its end the
	 * second. */
	const char *two = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: y\r\nConnection: close\r\n\r\n";
	int r1 = parse(two);
	CHECK_EQ_INT(r1, 28);
	CHECK(slice_is(req.path, "/a"));
	CHECK(req.keep_alive);
	int r2 = parse(two + r1);
	CHECK_EQ_INT(r2, (int)strlen(two) - r1);
	CHECK(slice_is(req.path, "/b"));
	CHECK(!req.keep_alive);

	/* A second head incomplete after the first whole one. */
	CHECK_EQ_INT(parse("GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HT"), 28);

	/* Content-Length zero, repeated with the same value, a list of equal
	 * values, leading zeros. */
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n") > 0);
	CHECK_EQ_INT(req.content_length, 0);
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n") > 0);
	CHECK_EQ_INT(req.content_length, 5);
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5 , 5,5\r\n\r\n") > 0);
	CHECK_EQ_INT(req.content_length, 5);
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 007\r\n\r\n") > 0);
	CHECK_EQ_INT(req.content_length, 7);
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9223372036854775807\r\n\r\n") > 0);
	CHECK_EQ_INT(req.content_length, INT64_MAX);

	/* Transfer-Encoding of any value marks the request chunked. */
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n") > 0);
	CHECK(req.chunked);
	CHECK_EQ_INT(req.content_length, -1);
	CHECK(parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n") > 0);
	CHECK(req.chunked);
}

static void test_line_ends_and_versions(void)
{
	EXPECT_OK("GET / HTTP/1.1\nHost: x\n\n");
	CHECK_EQ_INT(req.nheaders, 1);
	CHECK(slice_is(req.headers[0].value, "x"));
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\n\r\n");
	EXPECT_OK("GET / HTTP/1.1\nHost: x\r\n\n");
	/* Empty lines before the request line are skipped and counted. */
	EXPECT_OK("\r\n\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
	CHECK(slice_is(req.method_name, "GET"));

	/* HTTP/1.0: Host optional, keep-alive only on request. */
	EXPECT_OK("GET / HTTP/1.0\r\n\r\n");
	CHECK_EQ_INT(req.minor_version, 0);
	CHECK(!req.keep_alive);
	EXPECT_OK("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	CHECK(req.keep_alive);
	EXPECT_OK("GET / HTTP/1.0\r\nConnection: Upgrade, Keep-Alive\r\n\r\n");
	CHECK(req.keep_alive);
	EXPECT_OK("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n");
	CHECK(!req.keep_alive);
	EXPECT_OK("GET / HTTP/1.0\r\nConnection: keep-alives\r\n\r\n");
	CHECK(!req.keep_alive);

	/* HTTP/1.1: keep-alive unless close is among the tokens. */
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	CHECK(!req.keep_alive);
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\r\nConnection: te,  CLOSE \r\n\r\n");
	CHECK(!req.keep_alive);
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\r\nconnection: x\r\nConnection: Close\r\n\r\n");
	CHECK(!req.keep_alive);
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\r\nConnection: closed\r\n\r\n");
	CHECK(req.keep_alive);
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n");
	CHECK(req.keep_alive);
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\r\nX-Connection: close\r\n\r\n");
	CHECK(req.keep_alive);

	/* An empty Host is allowed (no authority in an origin-form target). */
	EXPECT_OK("GET / HTTP/1.1\r\nHost:\r\n\r\n");

	/* Header values may carry obs-text and tabs inside. */
	EXPECT_OK("GET / HTTP/1.1\r\nHost: x\r\nX-Name: caf\xc3\xa9\tau lait\r\n\r\n");
	CHECK(slice_is(req.headers[1].value, "caf\xc3\xa9\tau lait"));
}

static void test_methods(void)
{
	static const struct {
		const char *line;
		enum http_method m;
	} cases[] = {
		{ "GET / HTTP/1.0\r\n\r\n", HTTP_GET },        { "HEAD / HTTP/1.0\r\n\r\n", HTTP_HEAD },
		{ "POST / HTTP/1.0\r\n\r\n", HTTP_POST },      { "PUT / HTTP/1.0\r\n\r\n", HTTP_PUT },
		{ "DELETE / HTTP/1.0\r\n\r\n", HTTP_DELETE },  { "OPTIONS / HTTP/1.0\r\n\r\n", HTTP_OPTIONS },
		{ "PATCH / HTTP/1.0\r\n\r\n", HTTP_PATCH },    { "PURGE / HTTP/1.0\r\n\r\n", HTTP_OTHER },
		{ "get / HTTP/1.0\r\n\r\n", HTTP_OTHER },      { "GETS / HTTP/1.0\r\n\r\n", HTTP_OTHER },
		{ "M-SEARCH / HTTP/1.0\r\n\r\n", HTTP_OTHER }, { "OPTIONS * HTTP/1.0\r\n\r\n", HTTP_OPTIONS },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_EQ_INT(parse(cases[i].line), (int)strlen(cases[i].line));
		CHECK_EQ_INT(req.method, cases[i].m);
	}
	EXPECT_OK("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
	CHECK(slice_is(req.target, "*"));
	CHECK(slice_is(req.path, "*"));
	CHECK(slice_is(req.method_name, "OPTIONS"));
}

static void test_bad_request_line(void)
{
	EXPECT_ERR("GET http://example.com/ HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET x HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("OPTIONS *x HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET  / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR(" GET / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1 \r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET /  HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET /\tHTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET\t/ HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTXP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / http/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1x\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.10\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/11.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/2\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1,1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET /\r\n\r\n", 400);
	EXPECT_ERR("GET\r\n\r\n", 400);
	EXPECT_ERR("GET \r\n\r\n", 400);
	EXPECT_ERR("G@T / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("G(T / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET /a\x7f HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET /a\x01 HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\rHost: x\r\n\r\n", 400);
	EXPECT_ERR("GET /a\rb HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("\rGET / HTTP/1.1\r\nHost: x\r\n\r\n", 400);
	EXPECT_ERR("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400); /* a TLS ClientHello */

	/* NUL anywhere in the request line. */
	static const char nul_line[] = "GET /a\0b HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK_EQ_INT(parse_n(nul_line, sizeof(nul_line) - 1, &deflim), -1);
	CHECK_EQ_INT(err.status, 400);
	static const char nul_method[] = "G\0T / HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK_EQ_INT(parse_n(nul_method, sizeof(nul_method) - 1, &deflim), -1);
	CHECK_EQ_INT(err.status, 400);
	static const char nul_version[] = "GET / HTTP/1.\0\r\nHost: x\r\n\r\n";
	CHECK_EQ_INT(parse_n(nul_version, sizeof(nul_version) - 1, &deflim), -1);
	CHECK_EQ_INT(err.status, 400);
	static const char nul_first[] = "\0GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK_EQ_INT(parse_n(nul_first, sizeof(nul_first) - 1, &deflim), -1);
	CHECK_EQ_INT(err.status, 400);
}

static void test_versions_505(void)
{
	EXPECT_ERR("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505);
	EXPECT_ERR("GET / HTTP/0.9\r\nHost: x\r\n\r\n", 505);
	EXPECT_ERR("GET / HTTP/1.2\r\nHost: x\r\n\r\n", 505);
	EXPECT_ERR("GET / HTTP/1.9\r\n\r\n", 505);
	EXPECT_ERR("GET / HTTP/3.0\r\nHost: x\r\n\r\n", 505);
	EXPECT_ERR("GET / HTTP/9.9\n", 505);
	/* The HTTP/2 connection preface. */
	EXPECT_ERR("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505);
}

/* Once a whole request line is read, its method and path are there
 * whatever the answer (a refusal's log line names them); before, none. */
static void test_request_line_named(void)
{
	static const struct http_limits small = { 64, 128, 2 };
	char big[256];
	snprintf(big, sizeof(big), "GET /a?q=1 HTTP/1.1\r\nHost: x\r\nX-Big: %0120d\r\n\r\n", 0);
	const char *const named[] = {
		big,                                                  /* 431, size */
		"GET /a HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n\r\n", /* 431, count */
		"GET /a HTTP/1.2\r\nHost: x\r\n\r\n",                 /* 505 */
		"GET /a HTTP/1.1\r\n\r\n",                            /* 400, no Host */
		"GET /a HTTP/1.1\r\nHost: x\r\n",                     /* 0, head not whole */
		"GET /a HTTP/1.1\r\nHost: x\r\n\r\n",                 /* whole */
	};
	static const int answers[] = { -1, -1, -1, -1, 0, 28 };
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		memset(&req, 0, sizeof(req));
		CHECK_EQ_INT(parse_n(named[i], strlen(named[i]), &small), answers[i]);
		CHECK(slice_is(req.method_name, "GET") && slice_is(req.path, "/a"));
	}
	/* A line not yet whole, a malformed one, or one over its limit: none,
	 * and nothing is left of the parse before. */
	static const char long_line[] =
		"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n";
	const char *const unnamed[] = { "GET /a HTTP/1.", "G@T /a HTTP/1.1\r\nHost: x\r\n\r\n", long_line };
	for (size_t i = 0; i < sizeof(unnamed) / sizeof(unnamed[0]); i++) {
		parse_n(named[5], strlen(named[5]), &small);
		parse_n(unnamed[i], strlen(unnamed[i]), &small);
		CHECK(req.method_name.n == 0 && req.path.n == 0);
	}
}

static void test_bad_headers(void)
{
	EXPECT_ERR("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost\t: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\n: v\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX(y): z\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX/y: z\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n folded\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\r\n\tfolded\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\n Host: x\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7f\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x1b[31m\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\n\rX\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: x\r\nX-\xc3\xa9: a\r\n\r\n", 400);

	static const char nul_value[] = "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\n\r\n";
	CHECK_EQ_INT(parse_n(nul_value, sizeof(nul_value) - 1, &deflim), -1);
	CHECK_EQ_INT(err.status, 400);
	static const char nul_name[] = "GET / HTTP/1.1\r\nHost: x\r\nX\0A: a\r\n\r\n";
	CHECK_EQ_INT(parse_n(nul_name, sizeof(nul_name) - 1, &deflim), -1);
	CHECK_EQ_INT(err.status, 400);
	static const char nul_start[] = "GET / HTTP/1.1\r\nHost: x\r\n\0\r\n\r\n";
	CHECK_EQ_INT(parse_n(nul_start, sizeof(nul_start) - 1, &deflim), -1);
	CHECK_EQ_INT(err.status, 400);

	/* Host: required on 1.1, at most once. */
	EXPECT_ERR("GET / HTTP/1.1\r\n\r\n", 400);
	CHECK(strstr(err.message, "Host") != NULL);
	EXPECT_ERR("GET / HTTP/1.1\r\nX-Host: a\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400);
	EXPECT_ERR("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400);
}

static void test_content_length(void)
{
	const char *bad[] = {
		"-1",
		"+1",
		"1a",
		"a",
		"",
		" ",
		"1 2",
		"1.0",
		"0x10",
		"1,2",
		"1,",
		",1",
		"1,,1",
		"5, 6",
		"99999999999999999999",
		"9223372036854775808",
		"18446744073709551616",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char s[256];
		snprintf(s, sizeof(s), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %s\r\n\r\n", bad[i]);
		EXPECT_ERR(s, 400);
	}
	EXPECT_ERR("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400);
	EXPECT_ERR("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5,6\r\n\r\n", 400);
	EXPECT_ERR("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
	EXPECT_ERR("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400);
	EXPECT_ERR("POST / HTTP/1.1\r\nHost: x\r\ntransfer-encoding: identity\r\ncontent-length: 0\r\n\r\n", 400);
	EXPECT_ERR("POST / HTTP/1.0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
}

/* Limits: request line, head size, header count, and 0 only while nothing
 * can be exceeded yet. */
static void test_limits(void)
{
	static char big[40000];
	struct http_limits small = { 32, 128, 3 };
	int r;

	/* Request line exactly at the limit: fine; one byte more: 414, whether
	 * complete or still arriving. */
	memset(big, 0, sizeof(big));
	strcpy(big, "GET /");
	memset(big + 5, 'a', 32 - 5 - 9);
	strcat(big, " HTTP/1.1\r\nHost: x\r\n\r\n");
	CHECK_EQ_INT(parse_n(big, strlen(big), &small), (int)strlen(big));
	CHECK(prefixes_consistent(big, strlen(big), &small));

	memset(big, 0, sizeof(big));
	strcpy(big, "GET /");
	memset(big + 5, 'a', 32 - 5 - 8);
	strcat(big, " HTTP/1.1\r\nHost: x\r\n\r\n");
	CHECK_EQ_INT(parse_n(big, strlen(big), &small), -1);
	CHECK_EQ_INT(err.status, 414);
	CHECK(prefixes_consistent(big, strlen(big), &small));
	/* Incomplete: 32 bytes of line are no verdict, 33 are. */
	CHECK_EQ_INT(parse_n(big, 32, &small), 0);
	CHECK_EQ_INT(parse_n(big, 33, &small), -1);
	CHECK_EQ_INT(err.status, 414);
	/* A CR at the limit may still be the end of the line. */
	CHECK_EQ_INT(parse_n("GET /aaaaaaaaaaaaaaaaaa HTTP/1.1\r", 33, &small), 0);

	/* With the default limits: 8192 fine, 8193 refused, also without any
	 * line end yet. */
	memset(big, 0, sizeof(big));
	strcpy(big, "GET /");
	memset(big + 5, 'a', 8192 - 5 - 9);
	strcat(big, " HTTP/1.1\r\nHost: x\r\n\r\n");
	CHECK_EQ_INT(parse(big), (int)strlen(big));
	memset(big, 0, sizeof(big));
	strcpy(big, "GET /");
	memset(big + 5, 'a', 9000);
	CHECK_EQ_INT(parse(big), -1);
	CHECK_EQ_INT(err.status, 414);
	strcat(big, " HTTP/1.1\r\nHost: x\r\n\r\n");
	CHECK_EQ_INT(parse(big), -1);
	CHECK_EQ_INT(err.status, 414);
	/* A long run with no space at all (a method that never ends). */
	memset(big, 0, sizeof(big));
	memset(big, 'A', 8193);
	CHECK_EQ_INT(parse(big), -1);
	CHECK_EQ_INT(err.status, 414);
	CHECK_EQ_INT(parse_n(big, 8192, &deflim), 0);

	/* Head size: exactly the limit is fine, one byte more is 431. */
	const char *h128 = "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ";
	memset(big, 0, sizeof(big));
	strcpy(big, h128);
	memset(big + strlen(h128), 'p', 128 - strlen(h128) - 4);
	strcat(big, "\r\n\r\n");
	CHECK_EQ_INT(strlen(big), 128);
	CHECK_EQ_INT(parse_n(big, 128, &small), 128);
	CHECK(prefixes_consistent(big, 128, &small));
	memset(big, 0, sizeof(big));
	strcpy(big, h128);
	memset(big + strlen(h128), 'p', 128 - strlen(h128) - 3);
	strcat(big, "\r\n\r\n");
	CHECK_EQ_INT(parse_n(big, 129, &small), -1);
	CHECK_EQ_INT(err.status, 431);
	CHECK(prefixes_consistent(big, 129, &small));
	/* Incomplete head: 127 bytes can still end at 128; 128 cannot. */
	CHECK_EQ_INT(parse_n(big, 127, &small), 0);
	CHECK_EQ_INT(parse_n(big, 128, &small), -1);
	CHECK_EQ_INT(err.status, 431);
	/* Bytes past the head (a body) do not count. */
	memset(big, 0, sizeof(big));
	strcpy(big, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n");
	r = (int)strlen(big);
	memset(big + r, 'b', 1000);
	CHECK_EQ_INT(parse_n(big, (size_t)r + 1000, &small), r);

	/* Default head limit: 16384 bytes; a lone endless header is 431. */
	memset(big, 0, sizeof(big));
	strcpy(big, "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ");
	memset(big + strlen(big), 'p', 20000);
	CHECK_EQ_INT(parse(big), -1);
	CHECK_EQ_INT(err.status, 431);
	CHECK_EQ_INT(parse_n(big, 16383, &deflim), 0);
	CHECK_EQ_INT(parse_n(big, 16384, &deflim), -1);
	CHECK_EQ_INT(err.status, 431);
	strcat(big, "\r\n\r\n");
	CHECK_EQ_INT(parse(big), -1);
	CHECK_EQ_INT(err.status, 431);
	/* Many short headers adding up past the limit. */
	memset(big, 0, sizeof(big));
	strcpy(big, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < 60; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "X-%02d: %0300d\r\n", i, i);
	strcat(big, "\r\n");
	CHECK_EQ_INT(parse(big), -1);
	CHECK_EQ_INT(err.status, 431);
	/* Empty lines before the request line count toward the head. */
	memset(big, 0, sizeof(big));
	for (int i = 0; i < 70; i++)
		strcat(big, "\r\n");
	CHECK_EQ_INT(parse_n(big, strlen(big), &small), -1);
	CHECK_EQ_INT(err.status, 431);
	CHECK_EQ_INT(parse_n(big, 126, &small), 0);

	/* Header count: 3 fine, a 4th refused as soon as it starts. */
	const char *three = "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n\r\n";
	CHECK_EQ_INT(parse_n(three, strlen(three), &small), (int)strlen(three));
	CHECK(prefixes_consistent(three, strlen(three), &small));
	const char *four = "GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
	CHECK_EQ_INT(parse_n(four, strlen(four), &small), -1);
	CHECK_EQ_INT(err.status, 431);
	CHECK(prefixes_consistent(four, strlen(four), &small));
	size_t at_c = (size_t)(strstr(four, "C:") - four);
	CHECK_EQ_INT(parse_n(four, at_c, &small), 0);
	CHECK_EQ_INT(parse_n(four, at_c + 1, &small), -1);
	CHECK_EQ_INT(err.status, 431);
	/* ...but a CR there may still be the blank line. */
	CHECK_EQ_INT(parse_n("GET / HTTP/1.1\r\nHost: x\r\nA: 1\r\nB: 2\r\n\r", 38, &small), 0);

	/* Default count limit: 64 headers fine, 65 refused. */
	memset(big, 0, sizeof(big));
	strcpy(big, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < 63; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "X-%d: v\r\n", i);
	strcat(big, "\r\n");
	CHECK_EQ_INT(parse(big), (int)strlen(big));
	CHECK_EQ_INT(req.nheaders, 64);
	big[strlen(big) - 2] = 0;
	strcat(big, "X-last: v\r\n\r\n");
	CHECK_EQ_INT(parse(big), -1);
	CHECK_EQ_INT(err.status, 431);

	/* A configured count over the array size is capped to it. */
	struct http_limits huge = { 8192, 65536, 100000 };
	memset(big, 0, sizeof(big));
	strcpy(big, "GET / HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < HTTP_MAX_HEADERS_HARD; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big), "X-%d: v\r\n", i);
	strcat(big, "\r\n");
	CHECK_EQ_INT(parse_n(big, strlen(big), &huge), -1);
	CHECK_EQ_INT(err.status, 431);

	/* Need more: short, but nothing exceeded. */
	CHECK_EQ_INT(parse(""), 0);
	CHECK_EQ_INT(parse("G"), 0);
	CHECK_EQ_INT(parse("\r"), 0);
	CHECK_EQ_INT(parse("\r\n"), 0);
	CHECK_EQ_INT(parse("GET / HTTP/1.1"), 0);
	CHECK_EQ_INT(parse("GET / HTTP/1.1\r"), 0);
	CHECK_EQ_INT(parse("GET / HTTP/1.1\r\nHost: x\r\n"), 0);
	CHECK_EQ_INT(parse("GET / HTTP/1.1\r\nHost: x\r\n\r"), 0);
	CHECK_EQ_INT(parse("GET / HTTP/1.1\r\nHost"), 0);

	/* A NULL limits pointer means the defaults. */
	CHECK_EQ_INT(http_parse_request(guarded("GET / HTTP/1.0\r\n\r\n", 18), 18, NULL, &req, &err), 18);
}

/* Every prefix of valid requests is 0 and the whole is its head length;
 * invalid ones go from 0 to one fixed refusal. Each prefix sits at the
 * guard page. */
static const char *const corpus[] = {
	"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	("GET /api/events/stream?topic=news&token=abc HTTP/1.1\r\nHost: 127.0.0.1:8199\r\nAccept: "
	 "text/event-stream\r\nLast-Event-ID: 42\r\nUser-Agent: curl/8.0\r\n\r\n"),
	"POST /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Length: 2\r\n\r\n{}",
	"GET / HTTP/1.0\n\n",
	"\r\nGET / HTTP/1.1\nHost: x\r\n\n",
	"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
	"DELETE /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nX: \t\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
	"GET / HTTP/1.1\r\n\r\n",
	"GET / HTTP/2.0\r\n\r\n",
	"GET / HTXP/1.1\r\n\r\n",
	"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
	"GET / HTTP/1.1\r\nHost : x\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\x01\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	"GET / HTTP/1.1\r\nHost: x\r",
	"GET / HTTP/1.1\r\nHost: x\rz",
	"GET / HTTP/1.1\r\nHost: x\r\n\r",
	"GET",
	"",
};

static void test_incremental_and_guard(void)
{
	for (size_t i = 0; i < sizeof(corpus) / sizeof(corpus[0]); i++) {
		const char *s = corpus[i];
		size_t n = strlen(s);
		CHECK(prefixes_consistent(s, n, &deflim));
		struct http_limits tiny = { 16, 40, 2 };
		CHECK(prefixes_consistent(s, n, &tiny));
	}
	/* Valid requests: every strict prefix of the head is 0. */
	for (size_t i = 0; i < 9; i++) {
		const char *s = corpus[i];
		int whole = parse_n(s, strlen(s), &deflim);
		CHECK(whole > 0);
		for (int k = 0; k < whole; k++)
			CHECK_EQ_INT(parse_n(s, (size_t)k, &deflim), 0);
		CHECK_EQ_INT(parse_n(s, (size_t)whole, &deflim), whole);
	}
	/* Slices point into the guarded copy, inside the head. */
	const char *s = corpus[1];
	size_t n = strlen(s);
	int head = parse_n(s, n, &deflim);
	CHECK(head > 0);
	const char *lo = arena_end - n, *hi = lo + (head > 0 ? head : 0);
	CHECK(req.target.p >= lo && req.target.p + req.target.n <= hi);
	for (size_t i = 0; i < req.nheaders; i++) {
		CHECK(req.headers[i].name.p >= lo && req.headers[i].name.p + req.headers[i].name.n <= hi);
		CHECK(req.headers[i].value.p >= lo && req.headers[i].value.p + req.headers[i].value.n <= hi);
	}
}

static void test_query(void)
{
	struct http_slice q = { "topic=a,b&last_event_id=7&flag&empty=&x=1=2&topic=second", 0 };
	struct http_slice v;
	q.n = strlen(q.p);
	CHECK(http_query_get(q, "topic", &v) && slice_is(v, "a,b"));
	CHECK(http_query_get(q, "last_event_id", &v) && slice_is(v, "7"));
	CHECK(http_query_get(q, "flag", &v) && v.n == 0);
	CHECK(http_query_get(q, "empty", &v) && v.n == 0);
	CHECK(http_query_get(q, "x", &v) && slice_is(v, "1=2"));
	CHECK(!http_query_get(q, "top", &v));
	CHECK(!http_query_get(q, "topics", &v));
	CHECK(!http_query_get(q, "a", &v));
	CHECK(!http_query_get(q, "", &v));
	struct http_slice none = { NULL, 0 };
	CHECK(!http_query_get(none, "topic", &v));
	struct http_slice amp = { "&&a=1&", 6 };
	CHECK(http_query_get(amp, "a", &v) && slice_is(v, "1"));
	CHECK(http_query_get(amp, "", &v) && v.n == 0);
	/* Names are raw: no decoding before the comparison. */
	struct http_slice enc = { "t%6Fpic=x", 9 };
	CHECK(!http_query_get(enc, "topic", &v));
	/* The slice bounds the search even if more bytes follow. */
	struct http_slice cut = { "a=1&b=2", 3 };
	CHECK(http_query_get(cut, "a", &v) && slice_is(v, "1"));
	CHECK(!http_query_get(cut, "b", &v));

	/* Parsed from a request, then decoded. */
	CHECK(parse("GET /s?topic=caf%C3%A9+bar&token=a%2Bb HTTP/1.1\r\nHost: x\r\n\r\n") > 0);
	CHECK(http_query_get(req.query, "topic", &v));
	char buf[64];
	CHECK_EQ_INT(http_percent_decode(v, buf), 9);
	CHECK(strcmp(buf, "caf\xc3\xa9 bar") == 0);
	CHECK(http_query_get(req.query, "token", &v));
	CHECK_EQ_INT(http_percent_decode(v, buf), 3);
	CHECK(strcmp(buf, "a+b") == 0);
}

static long decode(const char *s, char *out)
{
	struct http_slice sl = { s, strlen(s) };
	return http_percent_decode(sl, out);
}

static void test_percent_decode(void)
{
	char out[64];
	CHECK_EQ_INT(decode("", out), 0);
	CHECK(out[0] == '\0');
	CHECK_EQ_INT(decode("plain", out), 5);
	CHECK(strcmp(out, "plain") == 0);
	CHECK_EQ_INT(decode("a%20b+c", out), 5);
	CHECK(strcmp(out, "a b c") == 0);
	CHECK_EQ_INT(decode("%41%4a%4A%7e", out), 4);
	CHECK(strcmp(out, "AJJ~") == 0);
	CHECK_EQ_INT(decode("%25%2B", out), 2);
	CHECK(strcmp(out, "%+") == 0);
	CHECK_EQ_INT(decode("%ff", out), 1);
	CHECK((unsigned char)out[0] == 0xff);
	CHECK_EQ_INT(decode("%", out), -1);
	CHECK_EQ_INT(decode("%4", out), -1);
	CHECK_EQ_INT(decode("a%4", out), -1);
	CHECK_EQ_INT(decode("%zz", out), -1);
	CHECK_EQ_INT(decode("%4g", out), -1);
	CHECK_EQ_INT(decode("%g4", out), -1);
	CHECK_EQ_INT(decode("%%41", out), -1);
	CHECK_EQ_INT(decode("%00", out), -1);
	CHECK_EQ_INT(decode("a%00b", out), -1);
	struct http_slice nul = { "a\0b", 3 };
	CHECK_EQ_INT(http_percent_decode(nul, out), -1);
	/* A '%' whose hex digits lie beyond the slice is malformed. */
	struct http_slice cut = { "ab%41", 4 };
	CHECK_EQ_INT(http_percent_decode(cut, out), -1);

	/* The escape check never reads past the slice: place it at the guard. */
	const char *g = guarded("x%4", 3);
	struct http_slice gs = { g, 3 };
	CHECK_EQ_INT(http_percent_decode(gs, out), -1);
	g = guarded("x%41", 4);
	gs.p = g;
	gs.n = 4;
	CHECK_EQ_INT(http_percent_decode(gs, out), 2);
	CHECK(strcmp(out, "xA") == 0);
}

static void test_reasons(void)
{
	static const struct {
		int status;
		const char *reason;
	} r[] = {
		{ 200, "OK" },
		{ 201, "Created" },
		{ 204, "No Content" },
		{ 400, "Bad Request" },
		{ 401, "Unauthorized" },
		{ 403, "Forbidden" },
		{ 404, "Not Found" },
		{ 405, "Method Not Allowed" },
		{ 408, "Request Timeout" },
		{ 411, "Length Required" },
		{ 413, "Content Too Large" },
		{ 414, "URI Too Long" },
		{ 429, "Too Many Requests" },
		{ 431, "Request Header Fields Too Large" },
		{ 500, "Internal Server Error" },
		{ 501, "Not Implemented" },
		{ 503, "Service Unavailable" },
		{ 505, "HTTP Version Not Supported" },
	};
	for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
		CHECK(strcmp(http_reason(r[i].status), r[i].reason) == 0);
	CHECK(strcmp(http_reason(299), "Unknown") == 0);
	CHECK(strcmp(http_reason(0), "Unknown") == 0);
	CHECK(strcmp(http_reason(-1), "Unknown") == 0);
}

static bool slice_eq_str(struct http_slice s, const char *want)
{
	return s.p && s.n == strlen(want) && memcmp(s.p, want, s.n) == 0;
}

static bool chunk_is(const struct chunk *c, const char *s)
{
	size_t n = strlen(s);
	if (c->len == n && memcmp(c->data, s, n) == 0)
		return true;
	fprintf(stderr, "  chunk: %.*s\n  want:  %s\n", (int)c->len, c->data, s);
	return false;
}

/* Add the fields of "Name: value\r\n" lines (NULL: none), spaces around
 * values trimmed, a line without a colon skipped: the tests' shorthand. */
static void add_lines(struct http_head *h, const char *lines)
{
	for (const char *p = lines; p && *p;) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);
		const char *next = eol ? eol + 1 : p + n;
		if (n && p[n - 1] == '\r')
			n--;
		const char *colon = memchr(p, ':', n);
		if (colon && colon > p) {
			const char *v = colon + 1, *end = p + n;
			while (v < end && (*v == ' ' || *v == '\t'))
				v++;
			while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
				end--;
			http_head_addn(h, p, (size_t)(colon - p), v, (size_t)(end - v));
		}
		p = next;
	}
}

/* A whole response as HTTP/1.1 text: the usual head, fields, body. */
static struct chunk *format(int status, const char *type, const char *lines, const char *body, size_t len, bool keep)
{
	struct http_head h;
	http_head_response(&h, status, type, len, keep);
	add_lines(&h, lines);
	struct chunk *c = http_head_text(&h, body, len);
	http_head_free(&h);
	return c;
}

/* The standard refusal as HTTP/1.1 text. */
static struct chunk *format_error(int status, const char *message, const char *lines, bool keep)
{
	size_t len;
	char *body = http_error_body(status, message, &len);
	struct http_head h;
	http_head_error(&h, status, len, keep);
	add_lines(&h, lines);
	struct chunk *c = http_head_text(&h, body, len);
	http_head_free(&h);
	free(body);
	return c;
}

static void test_format(void)
{
	struct chunk *c = format(200, "application/json", NULL, "{\"status\":\"ok\"}", 15, true);
	CHECK(chunk_is(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
			  "Connection: keep-alive\r\n\r\n{\"status\":\"ok\"}"));
	CHECK_EQ_INT(c->refs, 1);
	chunk_unref(c);

	c = format(201, "application/json", "X-A: 1\r\nX-B: 2\r\n", "{\"id\":1}", 8, false);
	CHECK(chunk_is(c, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 8\r\n"
			  "Connection: close\r\nX-A: 1\r\nX-B: 2\r\n\r\n{\"id\":1}"));
	chunk_unref(c);

	/* The body's bytes are copied as given, NULs included. */
	c = format(200, "application/octet-stream", "", "a\0b", 3, true);
	CHECK_EQ_INT(c->len, strlen("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 3\r\n"
				    "Connection: keep-alive\r\n\r\n") +
				     3);
	CHECK(memcmp(c->data + c->len - 3, "a\0b", 3) == 0);
	chunk_unref(c);

	/* Empty body; no Content-Type when none is given; 204 has no length. */
	c = format(404, NULL, NULL, NULL, 0, true);
	CHECK(chunk_is(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n"));
	chunk_unref(c);
	c = format(204, NULL, NULL, "", 0, true);
	CHECK(chunk_is(c, "HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n"));
	chunk_unref(c);

	/* A head with no fields at all: 100 Continue. */
	struct http_head h;
	http_head_init(&h, 100);
	c = http_head_text(&h, NULL, 0);
	CHECK(chunk_is(c, "HTTP/1.1 100 Continue\r\n\r\n"));
	chunk_unref(c);

	c = format_error(404, "no such path", NULL, true);
	CHECK(chunk_is(c, "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 38\r\n"
			  "Connection: keep-alive\r\n\r\n{\"error\":\"no such path\",\"status\":404}\n"));
	chunk_unref(c);

	c = format_error(429, "too many streams", "Retry-After: 5\r\n", false);
	CHECK(chunk_is(c,
		       "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Length: 42\r\n"
		       "Connection: close\r\nRetry-After: 5\r\n\r\n{\"error\":\"too many streams\",\"status\":429}\n"));
	chunk_unref(c);

	c = format_error(400, "bad \"x\" \\ y\n\x01", NULL, false);
	const char *body = "{\"error\":\"bad \\\"x\\\" \\\\ y\\n\\u0001\",\"status\":400}\n";
	CHECK(c->len > strlen(body) && memcmp(c->data + c->len - strlen(body), body, strlen(body)) == 0);
	char cl[64];
	snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", strlen(body));
	CHECK(memmem(c->data, c->len, cl, strlen(cl)) != NULL);
	chunk_unref(c);

	/* Every refusal the parser can give formats to a parseable response. */
	int statuses[] = { 400, 401, 403, 404, 405, 408, 411, 413, 414, 429, 431, 500, 501, 503, 505 };
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		c = format_error(statuses[i], "cause", NULL, false);
		char want[128];
		snprintf(want, sizeof(want), "HTTP/1.1 %d %s\r\n", statuses[i], http_reason(statuses[i]));
		CHECK(c->len > strlen(want) && memcmp(c->data, want, strlen(want)) == 0);
		snprintf(want, sizeof(want), "\r\n\r\n{\"error\":\"cause\",\"status\":%d}\n", statuses[i]);
		CHECK(memmem(c->data, c->len, want, strlen(want)) != NULL);
		chunk_unref(c);
	}
}

/* The record keeps its own copies, in order, however many fields and
 * however long (no cap): the text has each as `Name: value`, and lookups
 * ignore case; another head's fields are appended in order. */
static void test_head_record(void)
{
	struct http_head h;
	http_head_init(&h, 200);
	char name[32], value[32];
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "X-F%d", i);
		snprintf(value, sizeof(value), "v%d", i);
		http_head_add(&h, name, value); /* the caller's buffers change after */
	}
	char *big = malloc(40000);
	memset(big, 'b', 39999);
	big[39999] = '\0';
	http_head_add(&h, "X-Big", big);
	http_head_addf(&h, "X-Fmt", "%d-%s", 7, "x");
	CHECK_EQ_INT(h.nfields, 302);
	CHECK(slice_eq_str(http_head_get(&h, "x-f299"), "v299"));
	CHECK(slice_eq_str(http_head_get(&h, "X-FMT"), "7-x"));
	CHECK(http_head_get(&h, "X-None").p == NULL);
	CHECK(http_head_value(&h, 300).n == 39999);
	struct chunk *c = http_head_text(&h, "z", 1);
	CHECK(memmem(c->data, c->len, "\r\nX-F0: v0\r\nX-F1: v1\r\n", 22) != NULL);
	CHECK(memmem(c->data, c->len, "\r\nX-F299: v299\r\nX-Big: bbb", 26) != NULL);
	CHECK(c->len > 12 && memcmp(c->data + c->len - 12, "X-Fmt: 7-x\r\n", 12) != 0);
	CHECK(c->len > 15 && memcmp(c->data + c->len - 15, "X-Fmt: 7-x\r\n\r\nz", 15) == 0);
	chunk_unref(c);
	free(big);

	struct http_head l;
	http_head_init(&l, 0);
	add_lines(&l, "A:  1 \r\nbroken\r\nB:2\nC: x: y\r\n");
	CHECK_EQ_INT(l.nfields, 3);
	CHECK(slice_eq_str(http_head_get(&l, "a"), "1"));
	CHECK(slice_eq_str(http_head_get(&l, "b"), "2"));
	CHECK(slice_eq_str(http_head_get(&l, "c"), "x: y"));
	add_lines(&l, NULL);
	http_head_append(&h, &l);
	CHECK_EQ_INT(h.nfields, 305);
	CHECK(slice_eq_str(http_head_name(&h, 304), "C"));
	http_head_free(&l);
	http_head_free(&h);
	CHECK_EQ_INT(h.nfields, 0);
}

/* A record built without text (as HTTP/2 builds one) is held to the
 * parser's limits: for heads written out canonically (`Name: value`,
 * CRLF), http_request_check of the record and http_parse_request of the
 * text give the same answer, status and message, under every limit near
 * the head's own sizes; and the bytes the parser refuses in a head are
 * refused in a record, with its messages. */
static void test_record_check(void)
{
	static const char *heads[] = {
		"GET /api/events/stream?topic=a HTTP/1.1\r\nHost: example.org\r\nAccept: text/event-stream\r\n"
		"Cookie: a=1; b=2\r\n\r\n",
		"POST /api/events HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nX-A: 1\r\nX-B: 2\r\n"
		"Content-Length: 7\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: h:80\r\n\r\n",
	};
	for (size_t k = 0; k < sizeof(heads) / sizeof(heads[0]); k++) {
		const char *text = heads[k];
		size_t len = strlen(text);
		static struct http_request rec;
		struct http_error e2;
		CHECK(http_parse_request(text, len, &deflim, &rec, &e2) == (int)len);
		CHECK_EQ_INT(http_request_check(&rec, &deflim, &e2), 0);
		size_t line = (size_t)(strstr(text, "\r\n") - text);
		for (size_t rl = line - 2; rl <= line + 1; rl++) {
			for (size_t hb = len - 2; hb <= len + 1; hb++) {
				for (size_t nh = rec.nheaders - 1; nh <= rec.nheaders; nh++) {
					struct http_limits lim = { rl, hb, nh };
					int a = parse_n(text, len, &lim);
					int b = http_request_check(&rec, &lim, &e2);
					CHECK_EQ_INT(a > 0 ? 0 : a == 0 ? -2 : err.status, b == 0 ? 0 : e2.status);
					if (a < 0 && b < 0)
						CHECK(strcmp(err.message, e2.message) == 0);
				}
			}
		}
	}

	/* Bytes and forms the parser refuses, in a record. */
	static struct http_request rec;
	struct http_error e2;
	const char *ok = "GET /x HTTP/1.1\r\nHost: h\r\nX-A: v\r\n\r\n";
	struct {
		const char *field; /* which part to replace: m(ethod), t(arget), n(ame), v(alue), h(ost) */
		const char *with;
		const char *message;
	} bad[] = {
		{ "m", "G T", "invalid character in method" },
		{ "m", "", "empty method" },
		{ "t", "/a b", "invalid character in request target" },
		{ "t", "/a\x7f", "invalid character in request target" },
		{ "t", "x", "request target not in origin form" },
		{ "t", "*", "asterisk request target is only for OPTIONS" },
		{ "t", "", "empty request target" },
		{ "n", "X A", "invalid character in header name" },
		{ "n", "", "empty header name" },
		{ "v", "a\x01z", "control character in header value" },
		{ "h", "a/b", "the Host header is not a valid host[:port]" },
		{ "h", "-", NULL },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(http_parse_request(ok, strlen(ok), &deflim, &rec, &e2) > 0);
		struct http_slice w = { bad[i].with, strlen(bad[i].with) };
		switch (bad[i].field[0]) {
		case 'm':
			http_request_line_set(&rec, w, rec.target);
			break;
		case 't':
			http_request_line_set(&rec, rec.method_name, w);
			break;
		case 'n':
			rec.headers[1].name = w;
			break;
		case 'v':
			rec.headers[1].value = w;
			break;
		case 'h':
			rec.headers[0].value = w;
			break;
		}
		int r = http_request_check(&rec, &deflim, &e2);
		if (!bad[i].message) {
			CHECK_EQ_INT(r, 0);
			continue;
		}
		CHECK_EQ_INT(r, -1);
		CHECK_EQ_INT(e2.status, 400);
		CHECK(strcmp(e2.message, bad[i].message) == 0);
	}
	/* Host missing, or twice. */
	CHECK(http_parse_request(ok, strlen(ok), &deflim, &rec, &e2) > 0);
	rec.headers[0].name = (struct http_slice){ "X-B", 3 };
	CHECK_EQ_INT(http_request_check(&rec, &deflim, &e2), -1);
	CHECK(strcmp(e2.message, "missing Host header") == 0);
	rec.headers[0].name = (struct http_slice){ "host", 4 };
	rec.headers[1] = rec.headers[0];
	CHECK_EQ_INT(http_request_check(&rec, &deflim, &e2), -1);
	CHECK(strcmp(e2.message, "more than one Host header") == 0);
	/* The line set from a method and a target. */
	http_request_line_set(&rec, (struct http_slice){ "DELETE", 6 }, (struct http_slice){ "/a?b=c", 6 });
	CHECK(rec.method == HTTP_DELETE && rec.minor_version == 1);
	CHECK(rec.path.n == 2 && memcmp(rec.path.p, "/a", 2) == 0 && rec.query.n == 3 &&
	      memcmp(rec.query.p, "b=c", 3) == 0);
}

int main(void)
{
	arena_init();
	test_simple_get();
	test_post_and_pipeline();
	test_line_ends_and_versions();
	test_methods();
	test_bad_request_line();
	test_versions_505();
	test_request_line_named();
	test_bad_headers();
	test_content_length();
	test_limits();
	test_incremental_and_guard();
	test_query();
	test_percent_decode();
	test_reasons();
	test_format();
	test_head_record();
	test_record_check();
	return check_done("http");
}
