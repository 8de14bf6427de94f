/* SPDX-License-Identifier: BSD-2-Clause */
/* test_frame.c: SSE encoding. Every frame_event output is read back by a
 * small parser written after the WHATWG EventSource rules (sse_parse.h),
 * and what a browser would deliver (id, type, data) must equal the event with CRLF and
 * CR in the data turned into LF. Exact bytes are checked for the simple
 * shapes; reset, heartbeat, stream head and refusal frames too. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "hub/frame.h"
#include "sse_parse.h"

/* Encode, parse back, and compare with what a browser should deliver. */
static bool roundtrip(int64_t id, const char *type, size_t type_len, const char *data, size_t data_len)
{
	struct store_event ev = { .id = id,
				  .type = type,
				  .type_len = type_len,
				  .data = data,
				  .data_len = data_len,
				  .topic = "",
				  .public = true };
	struct chunk *c = frame_event(&ev);
	bool ok = c != NULL && c->refs == 1 &&
		  sse_frame_matches(c->data, c->len, id, type, type_len, data, data_len, stderr);
	chunk_unref(c);
	return ok;
}

static bool rt(const char *type, const char *data)
{
	return roundtrip(7, type, type ? strlen(type) : 0, data, data ? strlen(data) : 0);
}

/* frame_event's bytes equal want exactly. */
static bool frame_is(int64_t id, const char *type, const char *data, size_t data_len, const char *want)
{
	struct store_event ev = {
		.id = id, .type = type, .type_len = type ? strlen(type) : 0, .data = data, .data_len = data_len
	};
	struct chunk *c = frame_event(&ev);
	bool ok = c->len == strlen(want) && memcmp(c->data, want, c->len) == 0;
	if (!ok)
		fprintf(stderr, "  got %.*s  want %s\n", (int)c->len, c->data, want);
	chunk_unref(c);
	return ok;
}

static void test_exact_shapes(void)
{
	CHECK(frame_is(1, "msg", "hello", 5, "id: 1\nevent: msg\ndata: hello\n\n"));
	CHECK(frame_is(2, "t", "a\nb\nc", 5, "id: 2\nevent: t\ndata: a\ndata: b\ndata: c\n\n"));
	CHECK(frame_is(3, "t", "a\r\nb", 4, "id: 3\nevent: t\ndata: a\ndata: b\n\n"));
	CHECK(frame_is(4, "t", "a\rb", 3, "id: 4\nevent: t\ndata: a\ndata: b\n\n"));
	CHECK(frame_is(5, "t", "a\n", 2, "id: 5\nevent: t\ndata: a\ndata: \n\n"));
	CHECK(frame_is(6, "t", "", 0, "id: 6\nevent: t\ndata: \n\n"));
	CHECK(frame_is(6, "t", NULL, 0, "id: 6\nevent: t\ndata: \n\n"));
	CHECK(frame_is(7, "t", "\n", 1, "id: 7\nevent: t\ndata: \ndata: \n\n"));
	CHECK(frame_is(8, "t", "\r\n", 2, "id: 8\nevent: t\ndata: \ndata: \n\n"));
	CHECK(frame_is(9, "t", "\n\r", 2, "id: 9\nevent: t\ndata: \ndata: \ndata: \n\n"));
	CHECK(frame_is(10, "", "x", 1, "id: 10\nevent: message\ndata: x\n\n"));
	CHECK(frame_is(10, NULL, "x", 1, "id: 10\nevent: message\ndata: x\n\n"));
	CHECK(frame_is(11, "a\nb", "x", 1, "id: 11\nevent: a\ndata: x\n\n"));
	CHECK(frame_is(12, "\r\nb", "x", 1, "id: 12\nevent: message\ndata: x\n\n"));
	CHECK(frame_is(INT64_MAX, "t", "x", 1, "id: 9223372036854775807\nevent: t\ndata: x\n\n"));
	CHECK(frame_is(0, "t", "x", 1, "id: 0\nevent: t\ndata: x\n\n"));
	/* A leading space in the data survives: the parser drops only the one
	 * after "data:". */
	CHECK(frame_is(13, "t", " x", 2, "id: 13\nevent: t\ndata:  x\n\n"));

	/* type_len, not strlen, bounds the type. */
	struct store_event ev = { .id = 1, .type = "abcdef", .type_len = 3, .data = "z", .data_len = 1 };
	struct chunk *c = frame_event(&ev);
	CHECK(c->len == strlen("id: 1\nevent: abc\ndata: z\n\n") &&
	      memcmp(c->data, "id: 1\nevent: abc\ndata: z\n\n", c->len) == 0);
	chunk_unref(c);
	/* data_len bounds the data (bytes after it are not read). */
	ev = (struct store_event){ .id = 1, .type = "t", .type_len = 1, .data = "abc\ndef", .data_len = 4 };
	c = frame_event(&ev);
	CHECK(c->len == strlen("id: 1\nevent: t\ndata: abc\ndata: \n\n") &&
	      memcmp(c->data, "id: 1\nevent: t\ndata: abc\ndata: \n\n", c->len) == 0);
	chunk_unref(c);
}

static void test_roundtrips(void)
{
	CHECK(rt("msg", "hello"));
	CHECK(rt("msg", "line one\nline two"));
	CHECK(rt("msg", "line one\r\nline two\r\n"));
	CHECK(rt("msg", "a\rb\rc\r"));
	CHECK(rt("msg", "a\n\nb"));
	CHECK(rt("msg", "a\r\n\r\nb"));
	CHECK(rt("msg", "a\n\r\nb\r\r\n"));
	CHECK(rt("msg", "\n"));
	CHECK(rt("msg", "\n\n\n"));
	CHECK(rt("msg", "\r"));
	CHECK(rt("msg", "\r\r"));
	CHECK(rt("msg", "\r\n"));
	CHECK(rt("msg", "\r\n\r\n"));
	CHECK(rt("msg", "\n\r"));
	CHECK(rt("msg", ""));
	CHECK(rt("msg", NULL));
	CHECK(rt("msg", "trailing\n"));
	CHECK(rt("msg", "\nleading"));
	CHECK(rt("msg", "data: nested\n\nid: 99\nevent: evil\n\n"));
	CHECK(rt("msg", ": not a comment\n:also not"));
	CHECK(rt("msg", "  two leading spaces"));
	CHECK(rt("msg", "{\"json\": [1, 2, \"x:y\"]}"));
	CHECK(rt("msg", "caf\xc3\xa9 \xe2\x9c\x93 \xff\xfe"));
	CHECK(rt("", "x"));
	CHECK(rt(NULL, "x"));
	CHECK(rt("a\nb", "x"));
	CHECK(rt("a\rb", "x"));
	CHECK(rt("a\r\nb", "x"));
	CHECK(rt("\nb", "x"));
	CHECK(rt("\r", "x"));
	CHECK(rt("type.with:colon-and_more", "x"));
	CHECK(rt(" spaced", "x"));
	CHECK(roundtrip(INT64_MAX, "t", 1, "x", 1));
	CHECK(roundtrip(INT64_MIN, "t", 1, "x", 1));
	CHECK(roundtrip(-1, "t", 1, "x", 1));
	CHECK(roundtrip(1234567890123LL, "t", 1, "x", 1));

	/* NUL bytes inside the data are data. */
	CHECK(roundtrip(1, "t", 1, "a\0b\n\0", 5));

	/* A big payload with many lines of every ending. */
	size_t n = 200000;
	char *big = malloc(n);
	if (!big)
		abort();
	for (size_t i = 0; i < n; i++) {
		static const char pat[] = "abc\r\ndef\nghi\rjk\n\n\r\r";
		big[i] = pat[i % (sizeof(pat) - 1)];
	}
	CHECK(roundtrip(424242, "bulk", 4, big, n));
	memset(big, '\n', n);
	CHECK(roundtrip(1, "nl", 2, big, n));
	memset(big, '\r', n);
	CHECK(roundtrip(1, "cr", 2, big, n));
	for (size_t i = 0; i < n; i++)
		big[i] = i % 2 ? '\n' : '\r';
	CHECK(roundtrip(1, "crlf", 4, big, n));
	free(big);
}

static uint64_t rng = 0x1234567;
static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

/* Random data and types over an alphabet rich in line breaks. */
static void test_random(void)
{
	static const char alpha[] = { 'a', 'b', ' ', ':', '\r', '\n', '\r', '\n', '\0', (char)0xff, 'd', 'i' };
	char data[80], type[16];
	int bad = 0;
	for (int iter = 0; iter < 20000; iter++) {
		size_t dn = rnd32() % sizeof(data), tn = rnd32() % sizeof(type);
		for (size_t i = 0; i < dn; i++)
			data[i] = alpha[rnd32() % sizeof(alpha)];
		for (size_t i = 0; i < tn; i++)
			type[i] = alpha[rnd32() % sizeof(alpha)];
		int64_t id = (int64_t)(((uint64_t)rnd32() << 32) | rnd32());
		if (!roundtrip(id, type, tn, data, dn) && ++bad > 5)
			break;
	}
	CHECK_EQ_INT(bad, 0);
}

static void test_reset(void)
{
	struct chunk *c = frame_reset(42, "retention", 7);
	struct sse s;
	sse_parse(&s, c->data, c->len);
	CHECK_EQ_INT(s.nev, 1);
	CHECK(!s.pending);
	CHECK(sse_buf_is(&s.ev[0].id, "42", 2));
	CHECK(sse_buf_is(&s.ev[0].type, "reset", 5));
	const char *want = "{\"reason\":\"retention\",\"last_event_id\":7";
	CHECK(s.ev[0].data.n > strlen(want) && memcmp(s.ev[0].data.p, want, strlen(want)) == 0);
	CHECK(s.ev[0].data.n > 0 && s.ev[0].data.p[s.ev[0].data.n - 1] == '}');
	CHECK(memchr(s.ev[0].data.p, '\n', s.ev[0].data.n) == NULL);
	CHECK(c->len > 11 && memcmp(c->data, "id: 42\nevent: reset\ndata: {", 27) == 0);
	CHECK(c->data[c->len - 1] == '\n' && c->data[c->len - 2] == '\n');
	sse_free(&s);
	chunk_unref(c);

	c = frame_reset(INT64_MAX, "unknown_id", INT64_MAX);
	sse_parse(&s, c->data, c->len);
	CHECK_EQ_INT(s.nev, 1);
	CHECK(sse_buf_is(&s.ev[0].id, "9223372036854775807", 19));
	want = "{\"reason\":\"unknown_id\",\"last_event_id\":9223372036854775807";
	CHECK(s.ev[0].data.n > strlen(want) && memcmp(s.ev[0].data.p, want, strlen(want)) == 0);
	sse_free(&s);
	chunk_unref(c);
}

/* A long reason is framed whole. frame_reset once formatted into a 256-byte
 * stack buffer and copied snprintf's would-be length, reading past the
 * buffer for a reason over about 180 bytes; this guards that. It runs in a
 * child, so an ASan report there fails this check instead of the binary. */
static bool reset_long_reason_ok(void)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 2);
		char reason[400];
		memset(reason, 'r', sizeof(reason) - 1);
		reason[sizeof(reason) - 1] = '\0';
		struct chunk *c = frame_reset(5, reason, 4);
		struct sse s;
		sse_parse(&s, c->data, c->len);
		bool ok = s.nev == 1 && !s.pending && sse_buf_is(&s.ev[0].id, "5", 1) &&
			  s.ev[0].data.n > sizeof(reason) &&
			  memmem(s.ev[0].data.p, s.ev[0].data.n, reason, strlen(reason));
		_exit(ok ? 0 : 1);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid)
		return false;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_reset_long_reason(void)
{
	CHECK(reset_long_reason_ok());
}

static void test_heartbeat(void)
{
	struct chunk *c = frame_heartbeat();
	CHECK(c->len == 6 && memcmp(c->data, ": hb\n\n", 6) == 0);
	CHECK_EQ_INT(c->refs, 1);
	struct sse s;
	sse_parse(&s, c->data, c->len);
	CHECK_EQ_INT(s.nev, 0);
	CHECK_EQ_INT(s.ncomments, 1);
	CHECK(!s.pending);
	sse_free(&s);
	chunk_unref(c);
}

/* The stream's head and opening frame as HTTP/1.1 sends them. */
static struct chunk *stream_head(int64_t retry_ms, const char *name, const char *value)
{
	struct http_head h;
	frame_stream_head(&h);
	if (name)
		http_head_add(&h, name, value);
	char open[64];
	size_t n = frame_stream_open(retry_ms, open, sizeof(open));
	struct chunk *c = http_head_text(&h, open, n);
	http_head_free(&h);
	return c;
}

/* A refusal event stream as HTTP/1.1 sends it. */
static struct chunk *refusal(int status, int64_t retry_ms, int64_t id, const char *cause, const char *name,
			     const char *value)
{
	struct http_head h;
	size_t n;
	char *body = frame_refusal(&h, status, retry_ms, id, cause, &n);
	if (name)
		http_head_add(&h, name, value);
	struct chunk *c = http_head_text(&h, body, n);
	http_head_free(&h);
	free(body);
	return c;
}

static void test_stream_head(void)
{
	struct chunk *c = stream_head(3000, NULL, NULL);
	CHECK_EQ_INT(c->refs, 1);
	const char *p = c->data;
	size_t n = c->len;
	const char *end = memmem(p, n, "\r\n\r\n", 4);
	CHECK(end != NULL);
	if (!end) {
		chunk_unref(c);
		return;
	}
	size_t head = (size_t)(end - p) + 4;
	CHECK(n > 17 && memcmp(p, "HTTP/1.1 200 OK\r\n", 17) == 0);
	CHECK(memmem(p, head, "\r\nContent-Type: text/event-stream\r\n", 35) != NULL);
	CHECK(memmem(p, head, "\r\nCache-Control: no-store\r\n", 27) != NULL);
	CHECK(memmem(p, head, "\r\nX-Accel-Buffering: no\r\n", 25) != NULL);
	CHECK(memmem(p, head, "Content-Length", 14) == NULL);
	CHECK(memmem(p, head, "Content-Encoding", 16) == NULL);
	CHECK(memmem(p, head, "Transfer-Encoding", 17) == NULL);
	/* Every head line ends in CRLF, no bare LF. */
	for (size_t i = 0; i < head; i++)
		if (p[i] == '\n' && (i == 0 || p[i - 1] != '\r')) {
			CHECK(!"bare LF in the head");
			break;
		}
	/* The body opening frame, exactly as the contract spells it. */
	const char *body = p + head;
	size_t bn = n - head;
	CHECK(bn == strlen("retry: 3000\n: stream open\n\n") &&
	      memcmp(body, "retry: 3000\n: stream open\n\n", bn) == 0);
	struct sse s;
	sse_parse(&s, body, bn);
	CHECK_EQ_INT(s.retry, 3000);
	CHECK_EQ_INT(s.nev, 0);
	CHECK_EQ_INT(s.ncomments, 1);
	sse_free(&s);
	chunk_unref(c);

	c = stream_head(0, NULL, NULL);
	CHECK(memmem(c->data, c->len, "\r\n\r\nretry: 0\n: stream open\n\n", 28) != NULL);
	chunk_unref(c);
	c = stream_head(3600000, NULL, NULL);
	CHECK(memmem(c->data, c->len, "\r\n\r\nretry: 3600000\n: stream open\n\n", 34) != NULL);
	chunk_unref(c);
	/* Extra header lines go in the head, before the blank line. */
	c = stream_head(5, "Access-Control-Allow-Origin", "*");
	CHECK(memmem(c->data, c->len, "Connection: close\r\nAccess-Control-Allow-Origin: *\r\n\r\nretry: 5\n", 62) !=
	      NULL);
	chunk_unref(c);
}

/* The body of a refusal response: what follows the head's blank line. */
static const char *refusal_body(const struct chunk *c, size_t *n)
{
	const char *end = memmem(c->data, c->len, "\r\n\r\n", 4);
	if (!end)
		return NULL;
	*n = c->len - (size_t)(end + 4 - c->data);
	return end + 4;
}

/* The refusal an EventSource survives is one event named "refused" (a
 * page's onmessage never sees it), with the id to resume from and, as data,
 * the JSON other clients get as the body. Clients that record an id only
 * from an event they dispatch need the data line to take the id at all. */
static void test_refusal(void)
{
	struct chunk *c = refusal(429, 4321, 17, "too many streams (per_address_limit)", "X-A", "b");
	CHECK_EQ_INT(c->refs, 1);
	CHECK(c->len > 17 && memcmp(c->data, "HTTP/1.1 200 OK\r\n", 17) == 0);
	CHECK(memmem(c->data, c->len, "\r\nContent-Type: text/event-stream\r\n", 35) != NULL);
	CHECK(memmem(c->data, c->len, "\r\nX-Refused-Status: 429\r\n", 25) != NULL);
	CHECK(memmem(c->data, c->len, "\r\nX-A: b\r\n", 10) != NULL);
	size_t bn = 0;
	const char *body = refusal_body(c, &bn);
	static const char want[] = "retry: 4321\nid: 17\nevent: refused\n"
				   "data: {\"error\":\"too many streams (per_address_limit)\",\"status\":429}\n\n";
	CHECK(body && bn == strlen(want) && memcmp(body, want, bn) == 0);
	if (body && (bn != strlen(want) || memcmp(body, want, bn) != 0))
		fprintf(stderr, "  got %.*s  want %s\n", (int)bn, body, want);
	char clen[64];
	snprintf(clen, sizeof(clen), "\r\nContent-Length: %zu\r\n", bn);
	CHECK(memmem(c->data, c->len, clen, strlen(clen)) != NULL);
	struct sse s;
	sse_parse(&s, body ? body : "", bn);
	CHECK_EQ_INT(s.retry, 4321);
	CHECK_EQ_INT(s.nev, 1);
	CHECK(!s.pending && s.nunknown == 0);
	if (s.nev == 1) {
		CHECK(sse_buf_is(&s.ev[0].id, "17", 2));
		CHECK(sse_buf_is(&s.ev[0].type, "refused", 7));
	}
	sse_free(&s);
	chunk_unref(c);

	/* A cause with quotes and line breaks stays inside the one data line. */
	c = refusal(503, 2500, 0, "a \"b\"\nc\\", NULL, NULL);
	body = refusal_body(c, &bn);
	sse_parse(&s, body ? body : "", bn);
	CHECK_EQ_INT(s.nev, 1);
	static const char json[] = "{\"error\":\"a \\\"b\\\"\\u000ac\\\\\",\"status\":503}";
	CHECK(s.nev == 1 && sse_buf_is(&s.ev[0].id, "0", 1) && sse_buf_is(&s.ev[0].data, json, strlen(json)));
	CHECK(!s.pending && s.nunknown == 0);
	sse_free(&s);
	chunk_unref(c);

	/* No resume point: no id line, so the client keeps the id it has. */
	c = refusal(503, 3000, -1, "full", NULL, NULL);
	body = refusal_body(c, &bn);
	CHECK(body && memmem(body, bn, "id:", 3) == NULL);
	sse_parse(&s, body ? body : "", bn);
	CHECK(s.nev == 1 && s.ev[0].id.n == 0 && sse_buf_is(&s.ev[0].type, "refused", 7));
	sse_free(&s);
	chunk_unref(c);

	/* A long cause is framed whole. */
	char cause[3000];
	memset(cause, 'x', sizeof(cause) - 1);
	cause[sizeof(cause) - 1] = '\0';
	c = refusal(429, 5000, 9, cause, NULL, NULL);
	body = refusal_body(c, &bn);
	sse_parse(&s, body ? body : "", bn);
	CHECK(s.nev == 1 && !s.pending && s.ev[0].data.n == strlen(cause) + 25);
	sse_free(&s);
	chunk_unref(c);
}

/* The test parser itself, on a stream with the awkward cases. */
static void test_parser_self(void)
{
	const char *st = ":c\r\nid: 1\r\nevent: a\rdata:x\ndata\n\nid\ndata: y\n\nevent: z\n\ndata: tail";
	struct sse s;
	sse_parse(&s, st, strlen(st));
	CHECK_EQ_INT(s.nev, 2);
	CHECK(sse_buf_is(&s.ev[0].id, "1", 1) && sse_buf_is(&s.ev[0].type, "a", 1) &&
	      sse_buf_is(&s.ev[0].data, "x\n", 2));
	CHECK(sse_buf_is(&s.ev[1].id, "", 0) && sse_buf_is(&s.ev[1].type, "message", 7) &&
	      sse_buf_is(&s.ev[1].data, "y", 1));
	CHECK(s.pending);
	CHECK_EQ_INT(s.ncomments, 1);
	sse_free(&s);

	/* The frame check accepts the right frame and refuses near misses. */
	const char *f = "id: 1\nevent: t\ndata: a\ndata: \n\n";
	size_t fn = strlen(f);
	CHECK(sse_frame_matches(f, fn, 1, "t", 1, "a\n", 2, NULL));
	CHECK(sse_frame_matches(f, fn, 1, "t", 1, "a\r\n", 3, NULL));
	CHECK(sse_frame_matches(f, fn, 1, "t\rx", 3, "a\r", 2, NULL));
	CHECK(!sse_frame_matches(f, fn, 1, "t", 1, "a", 1, NULL));
	CHECK(!sse_frame_matches(f, fn, 2, "t", 1, "a\n", 2, NULL));
	CHECK(!sse_frame_matches(f, fn, 1, "u", 1, "a\n", 2, NULL));
	CHECK(!sse_frame_matches(f, fn - 1, 1, "t", 1, "a\n", 2, NULL));
#define FM(frame, id, type, data) \
	sse_frame_matches(frame, strlen(frame), id, type, strlen(type), data, strlen(data), NULL)
	CHECK(!FM("id: 1\nevent: t\ndata: a\n\n\n", 1, "t", "a"));
	CHECK(FM("id: 1\nevent: message\ndata: a\n\n", 1, "", "a"));
	CHECK(FM("id: 1\ndata: a\n\n", 1, "", "a"));
	CHECK(!FM("id: 1\ndata: a\n\nid: 1\ndata: a\n\n", 1, "", "a"));
	CHECK(!FM("id: 1\nxx: y\ndata: a\n\n", 1, "", "a"));
	CHECK(!FM(": c\nid: 1\ndata: a\n\n", 1, "", "a"));
	CHECK(!FM("id: 1\ndata: a\n", 1, "", "a"));
#undef FM
}

/* A row whose frame would pass FRAME_MAX_BYTES (or 4 GiB, past a 32-bit
 * length) is sent as a small too_large event that keeps its id. */
static void test_too_large(void)
{
	size_t n = FRAME_MAX_BYTES / 7 + 1; /* every byte a line break: 7 bytes each framed */
	char *data = malloc(n);
	if (!data)
		return;
	memset(data, '\n', n);
	struct store_event ev = { .id = 77, .type = "t", .type_len = 1, .data = data, .data_len = n };
	struct chunk *c = frame_event(&ev);
	CHECK(c->len < 256);
	CHECK(c->len > 30 && memcmp(c->data, "id: 77\nevent: too_large\ndata: {\"id\":77,", 36) == 0);
	chunk_unref(c);
	/* Just under the limit it is sent whole. */
	ev.data_len = 1000;
	c = frame_event(&ev);
	CHECK(c->len == strlen("id: 77\nevent: t\n") + 1001 * 7 + 1);
	chunk_unref(c);
	free(data);
}

int main(void)
{
	test_too_large();
	test_parser_self();
	test_exact_shapes();
	test_roundtrips();
	test_random();
	test_reset();
	test_reset_long_reason();
	test_heartbeat();
	test_stream_head();
	test_refusal();
	return check_done("test_frame");
}
