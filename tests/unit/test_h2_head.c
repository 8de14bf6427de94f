/* SPDX-License-Identifier: BSD-2-Clause */
/* test_h2_head.c: HTTP/2 heads beside herald's records: response head
 * records made into HEADERS fields (lowercased names, HTTP/1.1's own
 * fields left out, no cap), and request records made from fields and DATA (Host
 * from :authority, cookies joined, the body's own length, the limits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h2/h2_head.h"

static bool field_is(const struct h2_field *f, const char *name, const char *value)
{
	return f->namelen == strlen(name) && memcmp(f->name, name, f->namelen) == 0 && f->valuelen == strlen(value) &&
	       memcmp(f->value, value, f->valuelen) == 0;
}

/* A response head record becomes HEADERS fields: ":status" first, the
 * fields in order with lowercased names, HTTP/1.1's connection fields left
 * out, values as they are; however many fields and however long (the
 * text path's 64-field, 16 KiB caps are gone with the text). */
static void test_response_fields(void)
{
	struct http_head h;
	http_head_response(&h, 200, "text/event-stream", 12, false);
	http_head_add(&h, "Cache-Control", "no-store");
	http_head_add(&h, "Transfer-Encoding", "chunked");
	http_head_add(&h, "Keep-Alive", "timeout=5");
	http_head_add(&h, "X-Accel-Buffering", "no");
	http_head_add(&h, "Upgrade", "h2c");
	http_head_add(&h, "Proxy-Connection", "close");
	http_head_add(&h, "Link", "<https://a/.well-known/mercure>; rel=\"mercure\"");
	struct h2_fields f;
	h2_fields_make(&f, &h);
	CHECK_EQ_INT(f.n, 6);
	CHECK(field_is(&f.f[0], ":status", "200"));
	CHECK(field_is(&f.f[1], "content-type", "text/event-stream"));
	CHECK(field_is(&f.f[2], "content-length", "12"));
	CHECK(field_is(&f.f[3], "cache-control", "no-store"));
	CHECK(field_is(&f.f[4], "x-accel-buffering", "no"));
	CHECK(field_is(&f.f[5], "link", "<https://a/.well-known/mercure>; rel=\"mercure\""));
	h2_fields_free(&f);
	/* The record itself is untouched: HTTP/1.1 still says Cache-Control. */
	CHECK(h.text[h.fields[3].name] == 'C');
	http_head_free(&h);

	/* A bodyless status: no length; only the status when nothing else. */
	http_head_response(&h, 304, NULL, 0, true);
	h2_fields_make(&f, &h);
	CHECK_EQ_INT(f.n, 1);
	CHECK(field_is(&f.f[0], ":status", "304"));
	h2_fields_free(&f);
	http_head_free(&h);

	http_head_init(&h, 503);
	char name[32];
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "X-Field-%d", i);
		http_head_add(&h, name, "v");
	}
	char *big = malloc(20001);
	memset(big, 'q', 20000);
	big[20000] = '\0';
	http_head_add(&h, "WWW-Authenticate", big);
	h2_fields_make(&f, &h);
	CHECK_EQ_INT(f.n, 202);
	CHECK(field_is(&f.f[0], ":status", "503"));
	CHECK(field_is(&f.f[200], "x-field-199", "v"));
	CHECK(f.f[201].namelen == 16 && memcmp(f.f[201].name, "www-authenticate", 16) == 0 &&
	      f.f[201].valuelen == 20000);
	h2_fields_free(&f);
	http_head_free(&h);
	free(big);
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
	test_response_fields();
	test_request_record();
	test_request_limits();
	test_request_held();
	return check_done("test_h2_head");
}
