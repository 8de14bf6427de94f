/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_h2.c: fuzz target for herald's side of an HTTP/2 session
 * (src/h2/h2_session.c, src/h2/h2_head.c): the input, after the client preface,
 * is what a client sends on a socket (frames, well formed or not). A real
 * loop, connection pool and session serve it over a socketpair: the
 * connection sees the preface and hands the socket over, nghttp2 takes the
 * frames apart into the session's callbacks, each whole request becomes a
 * connection whose handler here answers it (a short response, or for
 * /s a stream of a few frames ended after they are written), and the
 * client's end is read and dropped. Then the client goes away. Invariants:
 *   - the session and every stream's connection are gone once the client
 *     has gone and what it sent is served (no connection, no session
 *     left);
 *   - nothing leaks (the sanitizers), no over-read (the guard page). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/chunk.h"
#include "core/config.h"
#include "net/conn.h"
#include "fuzz.h"
#include "h2/h2_session.h"
#include "http/http.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "net/transport_plain.h"

static void stop(void *arg)
{
	loop_stop(arg);
}

/* One pass of the loop (its deferred work included). */
static void pass(struct loop *lp)
{
	loop_defer(lp, stop, lp);
	loop_run(lp);
}

static void on_request(void *owner, struct conn *c, const struct http_request *req, const char *body, size_t body_len)
{
	(void)owner;
	(void)body;
	if (req->path.n == 2 && memcmp(req->path.p, "/s", 2) == 0) {
		struct http_head h;
		http_head_init(&h, 200);
		http_head_add(&h, "Content-Type", "text/event-stream");
		conn_become_stream(c);
		conn_send_head(c, &h, ": open\n\n", 8);
		http_head_free(&h);
		struct chunk *ch;
		for (int i = 1; i <= 3; i++) {
			ch = chunk_from("id: 1\ndata: x\n\n", 15);
			conn_enqueue_frame(c, ch, i);
			chunk_unref(ch);
		}
		conn_end_after_flush(c);
		return;
	}
	char text[64];
	int n = snprintf(text, sizeof(text), "{\"len\":%zu}\n", body_len);
	struct http_head h;
	http_head_response(&h, 200, "application/json", (size_t)n, false);
	conn_respond(c, &h, text, (size_t)n);
	http_head_free(&h);
}

static bool no_continue(void *owner, struct conn *c, const struct http_request *req)
{
	(void)owner, (void)c, (void)req;
	return false;
}

static void drain(int fd)
{
	char buf[65536];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

int fuzz_one(const uint8_t *data, size_t size)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	struct config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.header_timeout_ms = cfg.keepalive_timeout_ms = cfg.stall_timeout_ms = 10000;
	cfg.max_request_line = 8192;
	cfg.max_header_bytes = 16384;
	cfg.max_headers = 64;
	cfg.max_body = 65536;
	cfg.http2 = true;
	cfg.http2_max_streams = 100;
	struct metrics m;
	memset(&m, 0, sizeof(m));
	struct loop *lp = loop_new();
	FUZZ_ASSERT(lp);
	struct conn_hooks hooks = { .request = on_request, .expect_continue = no_continue };
	struct conn_pool *pool = conn_pool_new(lp, &cfg, &m, &hooks);
	struct h2_server *h2 = h2_server_new(lp, &cfg, &m, pool);
	struct conn_takeover t = h2_server_takeover(h2);
	conn_pool_set_takeover(pool, &t);

	int sv[2];
	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	int big = 1 << 20;
	setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	struct sockaddr_storage ss = { .ss_family = AF_UNIX };
	FUZZ_ASSERT(write(sv[1], preface, sizeof(preface) - 1) == (ssize_t)(sizeof(preface) - 1));
	/* The client's bytes, as much as the socket takes; then it goes. */
	size_t off = 0;
	while (off < size) {
		ssize_t w = write(sv[1], data + off, size - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	conn_new(pool, sv[0], (struct sockaddr *)&ss, sizeof(sa_family_t), &transport_plain, NULL);
	for (int i = 0; i < 8; i++) {
		pass(lp);
		drain(sv[1]);
	}
	shutdown(sv[1], SHUT_WR);
	/* What the client sent is served first, at most 64 KiB of decoded
	 * header fields a pass, which an input can make 4 KiB a byte (HPACK
	 * references): so up to size / 16 passes more. */
	for (size_t i = 0; i < 64 + size / 16 && (conn_pool_count(pool) || h2_server_sessions(h2)); i++) {
		pass(lp);
		drain(sv[1]);
	}
	FUZZ_ASSERT(h2_server_sessions(h2) == 0);
	FUZZ_ASSERT(conn_pool_count(pool) == 0);
	close(sv[1]);
	h2_server_free(h2);
	conn_pool_free(pool);
	loop_free(lp);
	return 0;
}
