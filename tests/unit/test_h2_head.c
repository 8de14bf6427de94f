/* test_h2_head.c: HTTP/1.1 text to and from HTTP/2 fields: response heads
 * taken apart (lowercased names, HTTP/1.1's own fields left out, split and
 * malformed heads), and requests assembled from fields and DATA (Host from
 * :authority, cookies joined, the body's own length, the limits). */
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

static void test_request_assembled(void)
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
	field(&r, "cookie", "b=2");
	h2_request_data(&r, "{\"a\":", 5);
	h2_request_data(&r, "1}", 2);
	size_t len;
	char *text = h2_request_finish(&r, &len);
	const char want[] = "POST /api/events?x=1 HTTP/1.1\r\n"
			    "Host: example.org\r\n"
			    "content-type: application/json\r\n"
			    "Cookie: a=1; b=2\r\n"
			    "Connection: close\r\n"
			    "Content-Length: 7\r\n"
			    "\r\n"
			    "{\"a\":1}";
	CHECK(text != NULL);
	CHECK_EQ_INT(len, strlen(want));
	CHECK(text && memcmp(text, want, len) == 0);
	CHECK(!h2_request_is_head(&r));
	free(text);
	h2_request_free(&r);
}

static void test_request_limits(void)
{
	/* A head past its limit: NULL, and too_large says why. */
	struct h2_request r = { .head_limit = 64, .body_limit = 16 };
	field(&r, ":method", "GET");
	field(&r, ":path", "/api/health");
	field(&r, "x-big", "0123456789012345678901234567890123456789012345678901234567890123456789");
	size_t len;
	CHECK(h2_request_finish(&r, &len) == NULL);
	CHECK(r.too_large);
	h2_request_free(&r);

	/* A body past its limit keeps its true length, for the 413. */
	r = (struct h2_request){ .head_limit = 4096, .body_limit = 4 };
	field(&r, ":method", "POST");
	field(&r, ":path", "/api/events");
	h2_request_data(&r, "0123456789", 10);
	char *text = h2_request_finish(&r, &len);
	CHECK(text && strstr(text, "Content-Length: 10\r\n") != NULL);
	CHECK(text && len == (size_t)(strstr(text, "\r\n\r\n") - text) + 4 + 4);
	free(text);
	h2_request_free(&r);

	/* No :path (CONNECT): nothing to hand on, and not a size problem. */
	r = (struct h2_request){ .head_limit = 4096, .body_limit = 4 };
	field(&r, ":method", "CONNECT");
	field(&r, ":authority", "x:443");
	CHECK(h2_request_finish(&r, &len) == NULL);
	CHECK(!r.too_large);
	h2_request_free(&r);

	r = (struct h2_request){ .head_limit = 4096, .body_limit = 4 };
	field(&r, ":method", "HEAD");
	field(&r, ":path", "/api/health");
	CHECK(h2_request_is_head(&r));
	text = h2_request_finish(&r, &len);
	CHECK(text && strncmp(text, "HEAD /api/health HTTP/1.1\r\nConnection: close\r\n\r\n", len) == 0);
	free(text);
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
	CHECK_EQ_INT(r.held, 7 + r.cookie_cap + r.head_cap + r.body_cap);
	/* Crumbs by the thousand: the cookie's room doubles (no copy of it
	 * per crumb) and never passes the limit. */
	for (int i = 0; i < 2000 && !r.too_large; i++)
		field(&r, "cookie", "k=v");
	CHECK(r.too_large);
	CHECK(r.cookie_cap <= r.head_limit + 2);
	CHECK_EQ_INT(r.held, 7 + r.cookie_cap + r.head_cap + r.body_cap);
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
	test_request_assembled();
	test_request_limits();
	test_request_held();
	return check_done("test_h2_head");
}
