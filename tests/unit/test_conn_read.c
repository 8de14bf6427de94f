/* SPDX-License-Identifier: BSD-2-Clause */
/* test_conn_read.c: how a connection reads its requests, on a real loop and
 * real socketpairs. A request that arrives whole, at accept or later, is
 * handled with no buffer left behind on the connection (the pool lends one
 * for the wake-up); a request that arrives in parts keeps its first part in
 * a buffer of its own while another connection's request is read and
 * handled in between; pipelined requests are answered in order; a request
 * larger than the lent buffer (a big publish body) arrives intact; a
 * connection that becomes a stream holds no request buffer. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "conn_fixture.h"
#include "net/conn.h"
#include "http/http.h"
#include "net/transport_plain.h"
#include "common/util.h"

#define MAX_SEEN 8

struct fx {
	struct loop *lp;
	struct config cfg;
	struct metrics m;
	struct conn_pool *pool;
	struct loop_timer guard;
	/* What the handler saw, in order. */
	char path[MAX_SEEN][64];
	size_t body_len[MAX_SEEN];
	bool body_ok[MAX_SEEN];
	bool streams[MAX_SEEN];
	size_t nseen, want;
};

/* "GET /s" becomes a stream; anything else is answered with keep-alive.
 * A body must be the byte pattern the test wrote ('a' + i % 26). */
static void on_request(void *owner, struct conn *c, const struct http_request *req, const char *body, size_t n)
{
	struct fx *f = owner;
	size_t i = f->nseen++;
	if (i < MAX_SEEN) {
		snprintf(f->path[i], sizeof(f->path[i]), "%.*s", (int)req->path.n, req->path.p);
		f->body_len[i] = n;
		f->body_ok[i] = true;
		for (size_t k = 0; k < n; k++)
			f->body_ok[i] = f->body_ok[i] && body[k] == (char)('a' + k % 26);
		f->streams[i] = req->path.n == 2 && memcmp(req->path.p, "/s", 2) == 0;
	}
	if (i < MAX_SEEN && f->streams[i])
		conn_become_stream(c);
	else {
		struct http_head h;
		http_head_response(&h, 200, "text/plain", 2, true);
		conn_respond(c, &h, "ok", 2);
		http_head_free(&h);
	}
	if (f->nseen >= f->want)
		loop_stop(f->lp);
}

static void give_up(void *arg)
{
	struct fx *f = arg;
	fprintf(stderr, "  gave up waiting: %zu of %zu requests seen\n", f->nseen, f->want);
	loop_stop(f->lp);
}

static void setup(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	f->lp = loop_new();
	fixture_config(&f->cfg);
	struct conn_hooks hooks = { .owner = f, .request = on_request, .expect_continue = fixture_no_continue };
	f->pool = conn_pool_new(f->lp, &f->cfg, &f->m, &hooks);
}

static void teardown(struct fx *f)
{
	conn_pool_free(f->pool);
	loop_free(f->lp);
}

/* A connection whose client end the test keeps in *peer. */
static struct conn *connect_one(struct fx *f, int *peer)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	*peer = sv[1];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct conn *c = conn_new(f->pool, sv[0], (struct sockaddr *)&sa, sizeof(sa_family_t), &transport_plain, NULL);
	CHECK(c != NULL);
	return c;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		CHECK(w > 0);
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Run the loop until want requests in all were handled (at most 5 s). */
static void run_until(struct fx *f, size_t want)
{
	f->want = want;
	if (f->nseen >= want)
		return;
	loop_timer_start(f->lp, &f->guard, 5000, give_up, f);
	CHECK(loop_run(f->lp) == 0);
	loop_timer_stop(f->lp, &f->guard);
	CHECK_EQ_INT(f->nseen, want);
}

/* A buffer of the connection's own, beyond the one lent for a wake-up. */
static bool holds_buffer(const struct conn *c)
{
	return c->rbuf != NULL || c->rcap != 0;
}

static void test_whole_at_accept(void)
{
	struct fx f;
	setup(&f);
	int peer;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	static const char req[] = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
	send_all(sv[1], req, sizeof(req) - 1);
	peer = sv[1];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct conn *c = conn_new(f.pool, sv[0], (struct sockaddr *)&sa, sizeof(sa_family_t), &transport_plain, NULL);
	CHECK(c != NULL);
	/* Handled inside conn_new (the read at accept), answered, kept alive. */
	CHECK_EQ_INT(f.nseen, 1);
	CHECK(strcmp(f.path[0], "/a") == 0);
	CHECK(c->state == CONN_READING);
	CHECK(!holds_buffer(c));
	/* A second request later, through the loop, the same way. */
	static const char req2[] = "GET /b HTTP/1.1\r\nHost: x\r\n\r\n";
	send_all(peer, req2, sizeof(req2) - 1);
	run_until(&f, 2);
	CHECK(strcmp(f.path[1], "/b") == 0);
	CHECK(!holds_buffer(c));
	/* A stream: no request buffer either. */
	static const char req3[] = "GET /s HTTP/1.1\r\nHost: x\r\n\r\n";
	send_all(peer, req3, sizeof(req3) - 1);
	run_until(&f, 3);
	CHECK(c->state == CONN_STREAMING);
	CHECK(!holds_buffer(c));
	close(peer);
	teardown(&f);
}

static void test_parts_interleaved(void)
{
	struct fx f;
	setup(&f);
	int p1, p2;
	struct conn *c1 = connect_one(&f, &p1);
	struct conn *c2 = connect_one(&f, &p2);
	static const char a1[] = "GET /one HTTP/1.1\r\nHo", a2[] = "st: x\r\n\r\n";
	static const char b1[] = "GET /two HTTP/1.1\r\nHost: x\r\n", b2[] = "\r\n";
	send_all(p1, a1, sizeof(a1) - 1);
	send_all(p2, b1, sizeof(b1) - 1);
	/* Both partial requests are read (each keeps its own part), then a
	 * whole one on a third connection is read and handled in between. */
	int p3;
	struct conn *c3 = connect_one(&f, &p3);
	static const char whole[] = "GET /three HTTP/1.1\r\nHost: x\r\n\r\n";
	send_all(p3, whole, sizeof(whole) - 1);
	run_until(&f, 1);
	CHECK(strcmp(f.path[0], "/three") == 0);
	CHECK(!holds_buffer(c3));
	send_all(p2, b2, sizeof(b2) - 1);
	run_until(&f, 2);
	CHECK(strcmp(f.path[1], "/two") == 0);
	send_all(p1, a2, sizeof(a2) - 1);
	run_until(&f, 3);
	CHECK(strcmp(f.path[2], "/one") == 0);
	CHECK(!holds_buffer(c1) && !holds_buffer(c2));
	close(p1), close(p2), close(p3);
	teardown(&f);
}

static void test_pipelined(void)
{
	struct fx f;
	setup(&f);
	int peer;
	struct conn *c = connect_one(&f, &peer);
	static const char reqs[] = "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
				   "GET /2 HTTP/1.1\r\nHost: x\r\n\r\n"
				   "GET /3 HTTP/1.1\r\nHost: x\r\n\r\nGET /4 HT";
	send_all(peer, reqs, sizeof(reqs) - 1);
	run_until(&f, 3);
	CHECK(strcmp(f.path[0], "/1") == 0 && strcmp(f.path[1], "/2") == 0 && strcmp(f.path[2], "/3") == 0);
	/* The start of the fourth waits in the connection's own buffer. */
	CHECK(holds_buffer(c));
	static const char rest[] = "TP/1.1\r\nHost: x\r\n\r\n";
	send_all(peer, rest, sizeof(rest) - 1);
	run_until(&f, 4);
	CHECK(strcmp(f.path[3], "/4") == 0);
	CHECK(!holds_buffer(c));
	close(peer);
	teardown(&f);
}

static void test_large_body(void)
{
	struct fx f;
	setup(&f);
	int peer;
	struct conn *c = connect_one(&f, &peer);
	size_t n = 40000; /* more than the lent buffer holds */
	char head[128];
	int hn = snprintf(head, sizeof(head), "POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", n);
	char *body = xmalloc(n);
	for (size_t k = 0; k < n; k++)
		body[k] = (char)('a' + k % 26);
	send_all(peer, head, (size_t)hn);
	send_all(peer, body, n);
	run_until(&f, 1);
	CHECK(strcmp(f.path[0], "/p") == 0);
	CHECK_EQ_INT(f.body_len[0], n);
	CHECK(f.body_ok[0]);
	CHECK(!holds_buffer(c));
	free(body);
	close(peer);
	teardown(&f);
}

int main(void)
{
	test_whole_at_accept();
	test_parts_interleaved();
	test_pipelined();
	test_large_body();
	return check_done("test_conn_read");
}
