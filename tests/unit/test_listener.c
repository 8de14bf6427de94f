/* SPDX-License-Identifier: BSD-2-Clause */
/* test_listener.c: the listener on a real loop and real loopback sockets.
 * A TCP listener's accepted connections have TCP_NODELAY, set once on the
 * listening socket and inherited (Linux), whether herald opened the socket
 * or it was opened elsewhere without the option (as systemd's are), and
 * the request they send is handled. */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "conn_fixture.h"
#include "net/conn.h"
#include "http/http.h"
#include "net/listener.h"
#include "common/util.h"

struct fx {
	struct loop *lp;
	struct config cfg;
	struct metrics m;
	struct conn_pool *pool;
	struct listeners set;
	struct loop_timer guard;
	int nodelay; /* of the connection that sent the request; -1 none yet */
};

static void on_request(void *owner, struct conn *c, const struct http_request *req, const char *body, size_t n)
{
	struct fx *f = owner;
	(void)req, (void)body, (void)n;
	int v = 0;
	socklen_t len = sizeof(v);
	CHECK(getsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &v, &len) == 0);
	f->nodelay = v;
	{
		struct http_head h;
		http_head_response(&h, 200, "text/plain", 2, false);
		conn_respond(c, &h, "ok", 2);
		http_head_free(&h);
	}
	loop_stop(f->lp);
}

static void give_up(void *arg)
{
	struct fx *f = arg;
	fprintf(stderr, "  gave up waiting for the request\n");
	loop_stop(f->lp);
}

/* Serve one request from a client of the listening socket lfd (bound to
 * 127.0.0.1) and say whether its connection had TCP_NODELAY. */
static int nodelay_of_one(int lfd)
{
	struct fx f;
	memset(&f, 0, sizeof(f));
	f.nodelay = -1;
	f.lp = loop_new();
	fixture_config(&f.cfg);
	struct conn_hooks hooks = { .owner = &f, .request = on_request, .expect_continue = fixture_no_continue };
	f.pool = conn_pool_new(f.lp, &f.cfg, &f.m, &hooks);
	f.set = (struct listeners){ .lp = f.lp, .pool = f.pool, .m = &f.m };
	f.set.ls = xcalloc(1, sizeof(*f.set.ls));
	f.set.ls[0].fd = lfd;
	f.set.ls[0].set = &f.set;
	f.set.n = 1;
	CHECK(listeners_start(&f.set) == 0);

	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	CHECK(getsockname(lfd, (struct sockaddr *)&sa, &len) == 0);
	int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(connect(cfd, (struct sockaddr *)&sa, len) == 0);
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK(write(cfd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1));
	loop_timer_start(f.lp, &f.guard, 5000, give_up, &f);
	CHECK(loop_run(f.lp) == 0);
	loop_timer_stop(f.lp, &f.guard);
	close(cfd);
	conn_pool_free(f.pool);
	listeners_close(&f.set);
	listeners_free(&f.set);
	loop_free(f.lp);
	return f.nodelay;
}

/* A listening socket on 127.0.0.1, port chosen by the kernel, without
 * TCP_NODELAY of its own. */
static int plain_listener(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	CHECK(listen(fd, 16) == 0);
	return fd;
}

int main(void)
{
	CHECK_EQ_INT(nodelay_of_one(plain_listener()), 1);
	return check_done("test_listener");
}
