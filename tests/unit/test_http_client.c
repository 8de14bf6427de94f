/* SPDX-License-Identifier: BSD-2-Clause */
/* test_http_client.c: the outbound client (src/net/http_client.c) against
 * a small HTTP/1.1 server on loopback run by the same loop: a response
 * with its headers and body (to an address and to a name), a POST's body sent, a body over the cap
 * refused (with and without Content-Length), a server that never answers
 * (the request's time), a closed port, more requests than a host may
 * have connections (the rest wait, their time running), a cancelled request (never
 * answered), a client freed with requests out, a scheme other than http;
 * and the pure helpers (the URL check, Cache-Control's max-age). ASan's
 * leak check at exit covers the client's records. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "common/loop.h"
#include "loop_spin.h"
#include "net/http_client.h"

#define MAX_PEERS 64

struct peer {
	int fd;
	char buf[8192];
	size_t len;
};

static struct loop *lp;
static int listen_fd;
static int port;
static struct peer peers[MAX_PEERS];

static void peer_close(struct peer *p)
{
	loop_unwatch(lp, p->fd);
	close(p->fd);
	p->fd = -1;
}

static void reply(struct peer *p, const char *head, const char *body, size_t len)
{
	char text[512];
	int n = snprintf(text, sizeof(text), "%s\r\n\r\n", head);
	if (send(p->fd, text, (size_t)n, MSG_NOSIGNAL) < 0 || (len && send(p->fd, body, len, MSG_NOSIGNAL) < 0))
		perror("send");
	peer_close(p);
}

/* Answer by the request's path once its head (and a POST's body) is in. */
static void on_peer(void *arg, uint32_t events)
{
	struct peer *p = arg;
	(void)events;
	ssize_t n = recv(p->fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len, 0);
	if (n <= 0) {
		peer_close(p);
		return;
	}
	p->len += (size_t)n;
	p->buf[p->len] = '\0';
	char *end = strstr(p->buf, "\r\n\r\n");
	if (!end)
		return;
	const char *cl = strcasestr(p->buf, "\r\nContent-Length:");
	size_t want = cl ? (size_t)atol(cl + 17) : 0;
	size_t have = p->len - (size_t)(end + 4 - p->buf);
	if (have < want)
		return;
	static char big[4000];
	memset(big, 'x', sizeof(big));
	if (strncmp(p->buf, "GET /ok ", 8) == 0) {
		reply(p,
		      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nCache-Control: public, max-age=300\r\n"
		      "Content-Length: 11\r\nConnection: close",
		      "{\"keys\":[]}", 11);
	} else if (strncmp(p->buf, "POST /echo ", 11) == 0) {
		char body[64];
		int m = snprintf(body, sizeof(body), "%zu %.5s", have, end + 4);
		char head[128];
		snprintf(head, sizeof(head), "HTTP/1.1 201 Created\r\nContent-Length: %d\r\nConnection: close", m);
		reply(p, head, body, (size_t)m);
	} else if (strncmp(p->buf, "GET /big ", 9) == 0) {
		reply(p, "HTTP/1.1 200 OK\r\nContent-Length: 4000\r\nConnection: close", big, sizeof(big));
	} else if (strncmp(p->buf, "GET /big-unsaid ", 16) == 0) {
		reply(p, "HTTP/1.1 200 OK\r\nConnection: close", big, sizeof(big));
	} else if (strncmp(p->buf, "GET /missing ", 13) == 0) {
		reply(p, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close", NULL, 0);
	}
	/* /slow: never answered; the socket stays until the client goes. */
}

static int accepted_total;

static void on_accept(void *arg, uint32_t events)
{
	(void)arg;
	(void)events;
	int fd;
	while ((fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
		accepted_total++;
		struct peer *p = NULL;
		for (size_t i = 0; i < MAX_PEERS && !p; i++)
			if (peers[i].fd < 0)
				p = &peers[i];
		if (!p) {
			close(fd);
			continue;
		}
		p->fd = fd;
		p->len = 0;
		loop_watch(lp, fd, EPOLLIN, on_peer, p);
	}
}

static int listen_any(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		perror("listen");
		exit(1);
	}
	port = ntohs(sa.sin_port);
	return fd;
}

/* One answer, as the callback saw it. */
struct seen {
	int calls;
	int status;
	char error[256];
	char body[8192];
	size_t len;
	char type[64], cache[64];
};

static void on_done(void *arg, const struct http_client_response *r)
{
	struct seen *s = arg;
	const char *t = http_response_header(r, "content-type"), *cc = http_response_header(r, "Cache-Control");
	s->calls++;
	s->status = r->status;
	snprintf(s->error, sizeof(s->error), "%s", r->error);
	s->len = r->len;
	memcpy(s->body, r->body, r->len < sizeof(s->body) ? r->len + 1 : 0);
	snprintf(s->type, sizeof(s->type), "%s", t ? t : "(none)");
	snprintf(s->cache, sizeof(s->cache), "%s", cc ? cc : "(none)");
	loop_stop(lp);
}

/* Run the loop until s is answered or ms pass. */
static void wait_for(struct seen *s, uint64_t ms)
{
	struct loop_timer t = { 0 };
	loop_timer_start(lp, &t, ms, loop_spin_stop, lp);
	while (!s->calls && loop_timer_active(&t))
		loop_run(lp);
	loop_timer_stop(lp, &t);
}

static struct http_call *get(struct http_client *c, const char *path, struct http_client_request *base, struct seen *s)
{
	char url[128], err[256];
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	struct http_client_request req = base ? *base : (struct http_client_request){ 0 };
	req.url = url;
	memset(s, 0, sizeof(*s));
	struct http_call *call = http_client_request(c, &req, on_done, s, err, sizeof(err));
	if (!call)
		fprintf(stderr, "request %s: %s\n", path, err);
	return call;
}

static void test_requests(struct http_client *c)
{
	struct seen s;
	CHECK(get(c, "/ok", NULL, &s) != NULL);
	CHECK_EQ_INT(http_client_pending(c), 1);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.calls, 1);
	CHECK_EQ_INT(s.status, 200);
	CHECK(strcmp(s.body, "{\"keys\":[]}") == 0);
	CHECK_EQ_INT(s.len, 11);
	CHECK(strcmp(s.type, "application/json") == 0);
	CHECK(strcmp(s.cache, "public, max-age=300") == 0);
	CHECK_EQ_INT(http_client_pending(c), 0);

	/* A name, resolved off the loop (libcurl's resolver thread, whose
	 * wake-up comes through the same socket callback). */
	char url[128], err[256];
	snprintf(url, sizeof(url), "http://localhost:%d/ok", port);
	struct http_client_request named = { .url = url };
	memset(&s, 0, sizeof(s));
	CHECK(http_client_request(c, &named, on_done, &s, err, sizeof(err)) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, 200);

	/* Not 2xx is still an answer. */
	CHECK(get(c, "/missing", NULL, &s) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, 404);
	CHECK(strcmp(s.cache, "(none)") == 0);

	const char *hdrs[] = { "Content-Type: text/plain", "X-Test: 1" };
	struct http_client_request post = {
		.method = "POST", .headers = hdrs, .nheaders = 2, .body = "hello", .body_len = 5
	};
	CHECK(get(c, "/echo", &post, &s) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, 201);
	CHECK(strcmp(s.body, "5 hello") == 0);
}

static void test_limits(struct http_client *c)
{
	struct seen s;
	struct http_client_request capped = { .max_response = 1000 };
	CHECK(get(c, "/big", &capped, &s) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, -EMSGSIZE);
	CHECK_EQ_INT(s.len, 0);
	CHECK(get(c, "/big-unsaid", &capped, &s) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, -EMSGSIZE);
	CHECK(strstr(s.error, "cap") != NULL);
	/* At the cap exactly is fine. */
	capped.max_response = 4000;
	CHECK(get(c, "/big-unsaid", &capped, &s) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, 200);
	CHECK_EQ_INT(s.len, 4000);

	struct http_client_request quick = { .timeout_ms = 200 };
	CHECK(get(c, "/slow", &quick, &s) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, -ETIMEDOUT);
	CHECK(s.error[0] != '\0');
}

static void test_refused_and_cancelled(struct http_client *c)
{
	struct seen s;
	char url[64], err[256];
	/* A port nobody listens on: the listener's, closed for a moment. */
	int fd = listen_any();
	int closed = port;
	close(fd);
	port = closed;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/ok", closed);
	memset(&s, 0, sizeof(s));
	struct http_client_request req = { .url = url };
	CHECK(http_client_request(c, &req, on_done, &s, err, sizeof(err)) != NULL);
	wait_for(&s, 5000);
	CHECK_EQ_INT(s.status, -ECONNREFUSED);

	req.url = "ftp://127.0.0.1/x";
	CHECK(http_client_request(c, &req, on_done, &s, err, sizeof(err)) == NULL);
	CHECK(strstr(err, "http") != NULL);
}

static void test_cancel(struct http_client *c, int server_port)
{
	struct seen s;
	port = server_port;
	struct http_call *call = get(c, "/slow", NULL, &s);
	CHECK(call != NULL);
	loop_spin(lp, 50); /* connected and sent */
	http_client_cancel(call);
	CHECK_EQ_INT(http_client_pending(c), 0);
	loop_spin(lp, 50);
	CHECK_EQ_INT(s.calls, 0);
}

/* More requests to one host than it may have connections: the rest wait
 * for one, their time running. */
static void test_host_connections(struct http_client *c, int server_port)
{
	static struct seen s[12];
	port = server_port;
	http_client_set_host_connections(c, 4);
	int before = accepted_total;
	struct http_client_request quick = { .timeout_ms = 300 };
	for (size_t i = 0; i < 12; i++)
		CHECK(get(c, "/slow", &quick, &s[i]) != NULL);
	/* Before any time runs out, four are connected. (Afterwards one
	 * waiting may take a freed connection just before its own time is
	 * found out.) */
	loop_spin(lp, 150);
	CHECK_EQ_INT(accepted_total - before, 4);
	struct loop_timer t = { 0 };
	loop_timer_start(lp, &t, 5000, loop_spin_stop, lp);
	while (http_client_pending(c) && loop_timer_active(&t))
		loop_run(lp);
	loop_timer_stop(lp, &t);
	CHECK_EQ_INT(http_client_pending(c), 0);
	for (size_t i = 0; i < 12; i++)
		CHECK_EQ_INT(s[i].status, -ETIMEDOUT);
	http_client_set_host_connections(c, HTTP_CLIENT_HOST_CONNECTIONS);
}

static void test_pure(void)
{
	CHECK(http_client_url_check("https://idp.example/.well-known/jwks.json", true) == NULL);
	CHECK(http_client_url_check("HTTPS://idp.example:8443/jwks", true) == NULL);
	CHECK(http_client_url_check("http://127.0.0.1:9000/jwks", true) == NULL);
	CHECK(http_client_url_check("http://127.9.9.9/jwks", true) == NULL);
	CHECK(http_client_url_check("http://[::1]:9000/jwks", true) == NULL);
	CHECK(http_client_url_check("http://localhost/jwks", true) == NULL);
	CHECK(http_client_url_check("http://idp.example/jwks", false) == NULL);
	CHECK(strstr(http_client_url_check("http://idp.example/jwks", true), "loopback") != NULL);
	CHECK(strstr(http_client_url_check("http://128.0.0.1/jwks", true), "loopback") != NULL);
	CHECK(strstr(http_client_url_check("http://[::2]/jwks", true), "loopback") != NULL);
	CHECK(http_client_url_check("ftp://idp.example/jwks", true) != NULL);
	CHECK(http_client_url_check("/etc/jwks.json", true) != NULL);
	CHECK(http_client_url_check("https:///jwks", true) != NULL);
	CHECK(http_client_url_check("https://u:p@idp.example/jwks", true) != NULL);
	CHECK(http_client_url_check("https://idp.example:0/jwks", true) != NULL);
	CHECK(http_client_url_check("https://idp.example:99999/jwks", true) != NULL);
	CHECK(http_client_url_check("https://idp.example:/jwks", true) != NULL);
	CHECK(http_client_url_check("https://idp example/jwks", true) != NULL);
	CHECK(http_client_url_check("https://[::1/jwks", true) != NULL);

	CHECK_EQ_INT(http_cache_max_age("max-age=300"), 300);
	CHECK_EQ_INT(http_cache_max_age("public, max-age=60, must-revalidate"), 60);
	CHECK_EQ_INT(http_cache_max_age("Public,MAX-AGE=\"90\""), 90);
	CHECK_EQ_INT(http_cache_max_age("s-maxage=5"), -1);
	CHECK_EQ_INT(http_cache_max_age("no-store"), -1);
	CHECK_EQ_INT(http_cache_max_age("max-age=x"), -1);
	CHECK_EQ_INT(http_cache_max_age(NULL), -1);
	CHECK(http_cache_max_age("max-age=99999999999999999999999") > 0);
}

int main(void)
{
	if (http_client_global_init() < 0)
		return 1;
	for (size_t i = 0; i < MAX_PEERS; i++)
		peers[i].fd = -1;
	lp = loop_new();
	listen_fd = listen_any();
	int server_port = port;
	loop_watch(lp, listen_fd, EPOLLIN, on_accept, NULL);
	struct http_client *c = http_client_new(lp);
	CHECK(c != NULL);
	test_requests(c);
	test_limits(c);
	test_refused_and_cancelled(c);
	test_cancel(c, server_port);
	test_host_connections(c, server_port);
	/* Freed with a request out: no callback, nothing left behind. */
	struct seen s;
	CHECK(get(c, "/slow", NULL, &s) != NULL);
	loop_spin(lp, 20);
	http_client_free(c);
	loop_spin(lp, 20);
	CHECK_EQ_INT(s.calls, 0);
	test_pure();
	for (size_t i = 0; i < MAX_PEERS; i++)
		if (peers[i].fd >= 0)
			peer_close(&peers[i]);
	loop_unwatch(lp, listen_fd);
	close(listen_fd);
	loop_free(lp);
	http_client_global_cleanup();
	return check_done("test_http_client");
}
