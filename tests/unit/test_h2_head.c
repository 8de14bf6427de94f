/* SPDX-License-Identifier: BSD-2-Clause */
/* test_h2_head.c: HTTP/2 heads beside herald's records: response heads
 * taken apart (lowercased names, HTTP/1.1's own fields left out, split and
 * malformed heads), and request records made from fields and DATA (Host
 * from :authority, cookies joined, the body's own length, the limits). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h2/h2_head.h"

static bool field_is(const struct h2_field *f, const char *name, const char *value)
{
	return f->namelen == strlen(name) && memcmp(f->name, name, f->namelen) == 0 && f->valuelen == strlen(value) &&
	       memcmp(f->value, value, f->valuelen) == 0;
}

static void test_response_head(void)
{
	char head[] = "HTTP/1.1 200 OK\r\n"
		      "Content-Type: text/event-stream\r\n"
		      "Cache-Control: no-store\r\n"
		      "Connection: close\r\n"
		      "Transfer-Encoding: chunked\r\n"
		      "X-Accel-Buffering:  no \r\n"
		      "\r\n"
		      "retry: 3000\n";
	struct h2_field f[8];
	size_t n;
	int status;
	long hl = h2_head_parse(head, strlen(head), &status, f, 8, &n);
	CHECK_EQ_INT(hl, (long)(strstr(head, "retry:") - head));
	CHECK_EQ_INT(status, 200);
	CHECK_EQ_INT(n, 3);
	CHECK(field_is(&f[0], "content-type", "text/event-stream"));
	CHECK(field_is(&f[1], "cache-control", "no-store"));
	CHECK(field_is(&f[2], "x-accel-buffering", "no"));
	CHECK_EQ_INT(h2_head_end(head, strlen(head)), hl);
}

static void test_response_head_incomplete_and_malformed(void)
{
	struct h2_field f[2];
	size_t n;
	int status;
	char part[] = "HTTP/1.1 204 No Content\r\nX-A: 1\r\n";
	CHECK_EQ_INT(h2_head_parse(part, strlen(part), &status, f, 2, &n), 0);
	CHECK_EQ_INT(h2_head_end(part, strlen(part)), 0);
	char bad_status[] = "HTTP/1.1 2x0 OK\r\n\r\n";
	CHECK_EQ_INT(h2_head_parse(bad_status, strlen(bad_status), &status, f, 2, &n), -1);
	char not_http[] = "HTTX/1.1 200 OK\r\n\r\n";
	CHECK_EQ_INT(h2_head_parse(not_http, strlen(not_http), &status, f, 2, &n), -1);
	char no_colon[] = "HTTP/1.1 200 OK\r\nbroken\r\n\r\n";
	CHECK_EQ_INT(h2_head_parse(no_colon, strlen(no_colon), &status, f, 2, &n), -1);
	char too_many[] = "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
	CHECK_EQ_INT(h2_head_parse(too_many, strlen(too_many), &status, f, 2, &n), -1);
	char bare_lf[] = "HTTP/1.1 200 OK\r\nA: 1\nB: 2\r\n\r\n";
	CHECK_EQ_INT(h2_head_parse(bare_lf, strlen(bare_lf), &status, f, 2, &n), -1);
	char none[] = "HTTP/1.1 304 Not Modified\r\n\r\n";
	CHECK_EQ_INT(h2_head_parse(none, strlen(none), &status, f, 2, &n), (long)strlen(none));
	CHECK_EQ_INT(status, 304);
	CHECK_EQ_INT(n, 0);
}

static void field(struct h2_request *r, const char *name, const char *value)
{
	h2_request_field(r, name, strlen(name), value, strlen(value));
}

static bool header_is(const struct http_request *req, size_t i, const char *name, const char *value)
{
	const struct http_header *h = &req->headers[i];
	return i < req->nheaders && h->name.n == strlen(name) && memcmp(h->name.p, name, h->name.n) == 0 &&
	       h->value.n == strlen(value) && memcmp(h->value.p, value, h->value.n) == 0;
}

static bool slice_is(struct http_slice s, const char *text)
{
	return s.n == strlen(text) && memcmp(s.p, text, s.n) == 0;
}

static void test_request_record(void)
{
	struct h2_request r = { .head_limit = 4096, .body_limit = 64 };
	field(&r, ":method", "POST");
	field(&r, ":scheme", "https");
	field(&r, ":authority", "example.org");
	field(&r, ":path", "/api/events?x=1");
	field(&r, "content-type", "application/json");
	field(&r, "cookie", "a=1");
	field(&r, "host", "ignored.example");
	field(&r, "content-length", "999");
	field(&r, "expect", "100-continue");
	field(&r, "connection", "keep-alive");
	field(&r, "cookie", "b=2");
	h2_request_data(&r, "{\"a\":", 5);
	h2_request_data(&r, "1}", 2);
	struct http_request req;
	const char *body = NULL;
	size_t body_len = 0;
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &body_len), 0);
	CHECK(req.method == HTTP_POST && slice_is(req.method_name, "POST"));
	CHECK(slice_is(req.target, "/api/events?x=1") && slice_is(req.path, "/api/events") &&
	      slice_is(req.query, "x=1"));
	CHECK_EQ_INT(req.minor_version, 1);
	/* Host from :authority first, the fields in order, the crumbs as one
	 * cookie, the body's own length; no connection, expect or host field. */
	CHECK_EQ_INT(req.nheaders, 4);
	CHECK(header_is(&req, 0, "Host", "example.org"));
	CHECK(header_is(&req, 1, "content-type", "application/json"));
	CHECK(header_is(&req, 2, "Cookie", "a=1; b=2"));
	CHECK(header_is(&req, 3, "Content-Length", "7"));
	CHECK_EQ_INT(req.content_length, 7);
	CHECK(!req.chunked && !req.keep_alive);
	CHECK(body_len == 7 && memcmp(body, "{\"a\":1}", 7) == 0);
	CHECK(!h2_request_is_head(&r));
	h2_request_free(&r);

	/* Without :authority a host field is kept as it came; no body and no
	 * content-length: no length at all. */
	r = (struct h2_request){ .head_limit = 4096, .body_limit = 64 };
	field(&r, ":method", "GET");
	field(&r, ":path", "/x");
	field(&r, "host", "example.org:8080");
	field(&r, "x-padded", " \tv v\t ");
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &body_len), 0);
	CHECK_EQ_INT(req.nheaders, 2);
	CHECK(header_is(&req, 0, "host", "example.org:8080"));
	CHECK(header_is(&req, 1, "x-padded", "v v"));
	CHECK_EQ_INT(req.content_length, -1);
	CHECK(req.query.n == 0 && slice_is(req.path, "/x"));
	CHECK_EQ_INT(body_len, 0);
	h2_request_free(&r);
}

static void test_request_limits(void)
{
	/* A head past its limit: 431, and too_large says why. */
	struct h2_request r = { .head_limit = 64, .body_limit = 16 };
	struct http_request req;
	const char *body;
	size_t len;
	field(&r, ":method", "GET");
	field(&r, ":path", "/api/health");
	field(&r, "x-big", "0123456789012345678901234567890123456789012345678901234567890123456789");
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &len), 431);
	CHECK(r.too_large);
	h2_request_free(&r);

	/* More fields than a record holds: 431 too. */
	r = (struct h2_request){ .head_limit = 1 << 20, .body_limit = 16 };
	field(&r, ":method", "GET");
	field(&r, ":path", "/api/health");
	for (int i = 0; i < HTTP_MAX_HEADERS_HARD + 1; i++)
		field(&r, "x-a", "b");
	CHECK(r.too_many);
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &len), 431);
	h2_request_free(&r);
	/* As many as it holds, with :authority's Host on top: 431. */
	r = (struct h2_request){ .head_limit = 1 << 20, .body_limit = 16 };
	field(&r, ":method", "GET");
	field(&r, ":authority", "example.org");
	field(&r, ":path", "/api/health");
	for (int i = 0; i < HTTP_MAX_HEADERS_HARD; i++)
		field(&r, "x-a", "b");
	CHECK(!r.too_many);
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &len), 431);
	h2_request_free(&r);

	/* A body past its limit keeps its true length, for the 413. */
	r = (struct h2_request){ .head_limit = 4096, .body_limit = 4 };
	field(&r, ":method", "POST");
	field(&r, ":path", "/api/events");
	h2_request_data(&r, "0123456789", 10);
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &len), 0);
	CHECK_EQ_INT(req.content_length, 10);
	CHECK(header_is(&req, 0, "Content-Length", "10"));
	CHECK(len == 4 && memcmp(body, "0123", 4) == 0);
	h2_request_free(&r);

	/* No :path (CONNECT): nothing to hand on, and not a size problem. */
	r = (struct h2_request){ .head_limit = 4096, .body_limit = 4 };
	field(&r, ":method", "CONNECT");
	field(&r, ":authority", "x:443");
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &len), -1);
	CHECK(!r.too_large);
	h2_request_free(&r);

	r = (struct h2_request){ .head_limit = 4096, .body_limit = 4 };
	field(&r, ":method", "HEAD");
	field(&r, ":path", "/api/health");
	CHECK(h2_request_is_head(&r));
	CHECK_EQ_INT(h2_request_record(&r, &req, &body, &len), 0);
	CHECK(req.method == HTTP_HEAD && req.nheaders == 0);
	h2_request_free(&r);
}

static void test_request_held(void)
{
	/* held is every byte allocated for the request, counted as it grows
	 * (the session bounds what its incomplete requests hold with it). */
	struct h2_request r = { .head_limit = 4096, .body_limit = 4096 };
	field(&r, ":method", "GET");
	field(&r, ":path", "/x");
	CHECK_EQ_INT(r.held, 4 + 3);
	field(&r, "cookie", "a=1");
	field(&r, "x-a", "b");
	h2_request_data(&r, "0123", 4);
	CHECK_EQ_INT(r.held, 7 + r.cookie_cap + r.fields_cap + r.kept_cap * sizeof(*r.kept) + r.body_cap);
	/* Crumbs by the thousand: the cookie's room doubles (no copy of it
	 * per crumb) and never passes the limit. */
	for (int i = 0; i < 2000 && !r.too_large; i++)
		field(&r, "cookie", "k=v");
	CHECK(r.too_large);
	CHECK(r.cookie_cap <= r.head_limit + 2);
	CHECK_EQ_INT(r.held, 7 + r.cookie_cap + r.fields_cap + r.kept_cap * sizeof(*r.kept) + r.body_cap);
	/* Too large: nothing more is kept. */
	size_t held = r.held;
	field(&r, "x-b", "c");
	field(&r, ":authority", "example.org");
	CHECK_EQ_INT(r.held, held);
	h2_request_free(&r);
	CHECK_EQ_INT(r.held, 0);
}

int main(void)
{
	test_response_head();
	test_response_head_incomplete_and_malformed();
	test_request_record();
	test_request_limits();
	test_request_held();
	return check_done("test_h2_head");
}
