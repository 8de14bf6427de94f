/* SPDX-License-Identifier: BSD-2-Clause */
/* minimal-sse.c: the least an SSE server can do to open a stream, as a floor
 * for herald's opens. One epoll thread, like herald: accept4 until EAGAIN,
 * read each connection until the blank line that ends its request head
 * (nothing else is parsed), write one fixed answer (herald's own head and
 * opening frame, byte for byte), then keep the connection until the client
 * closes it. No database, no routing, no per-reader state beyond where the
 * head's end scan stands.
 *
 * It prints "minimal-sse: listening on 127.0.0.1:PORT (backlog B)" on stdout
 * once it accepts, and serves until SIGTERM or SIGINT. load/readers --opens
 * starts it beside herald and opens the same N readers against each. */
#include "tool.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char USAGE[] = "usage: load/minimal-sse [--listen 127.0.0.1:PORT] [--backlog B]\n";

/* What herald sends on a stream's opening (frame_stream_head with the
 * default retry_ms), so both servers write the same bytes. */
static const char ANSWER[] = "HTTP/1.1 200 OK\r\n"
			     "Content-Type: text/event-stream\r\n"
			     "Cache-Control: no-store\r\n"
			     "X-Accel-Buffering: no\r\n"
			     "Connection: close\r\n"
			     "\r\n"
			     "retry: 3000\n"
			     ": stream open\n\n";

/* Per descriptor: how much of "\r\n\r\n" the head's scan has matched, or
 * SENT once the answer is out. */
enum { SENT = 4 };

static volatile int stop_flag;

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "A minimal Server-Sent Events server: one epoll thread accepts, reads each\n"
	       "request up to the end of its head, writes herald's stream head and opening\n"
	       "frame, and holds the connection until the client closes it. The floor for\n"
	       "herald's opens (load/readers N --opens R measures both in one run). Prints\n"
	       "its port on stdout and serves until SIGTERM or SIGINT.\n"
	       "\n");
	tool_opt_help(t);
	printf("Exit status: 0 after a signal; 1 when it cannot listen; 2 usage.\n");
}

/* Feed bytes to the head scan of one connection; returns 1 at the head's end. */
static int scan_head(unsigned char *st, const char *p, size_t len)
{
	static const char END[] = "\r\n\r\n";
	for (size_t i = 0; i < len; i++) {
		if (p[i] == END[*st])
			(*st)++;
		else
			*st = p[i] == '\r' ? 1 : 0;
		if (*st == 4)
			return 1;
	}
	return 0;
}

/* Read what fd has; answer once the head is complete; close at EOF or on an
 * error. */
static void on_readable(int ep, int fd, unsigned char *st)
{
	char buf[4096];
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0)
			break;
		if (st[fd] == SENT)
			continue; /* a reader sends nothing more; drop it */
		if (scan_head(&st[fd], buf, (size_t)r)) {
			st[fd] = SENT;
			if (write(fd, ANSWER, sizeof(ANSWER) - 1) != (ssize_t)sizeof(ANSWER) - 1)
				break;
		}
	}
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	st[fd] = 0;
}

int main(int argc, char **argv)
{
	tool_usage("minimal-sse", USAGE);
	const char *listen_at = "127.0.0.1:0";
	long backlog = 0;
	const struct tool_opt t[] = {
		TOOL_STRING("--listen", &listen_at, "an address",
			    "  --listen ADDR   where to listen: 127.0.0.1:PORT or [::1]:PORT (default\n"
			    "                  127.0.0.1:0, a free port)\n"),
		TOOL_LONG("--backlog", &backlog, 1, 1L << 20, "a number",
			  "  --backlog B     listen backlog (default $BACKLOG or 1024, as the tools give herald)\n"),
		TOOL_HELP("  --help          this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(t, argc, argv, help);
	if (rc >= 0)
		return rc;
	/* tool_parse_addr wants a port to connect to; port 0 (any free one)
	 * is parsed as 1 and then cleared. */
	struct tool_addr a;
	char spec[160];
	size_t sl = strlen(listen_at);
	int any_port = sl > 2 && strcmp(listen_at + sl - 2, ":0") == 0;
	snprintf(spec, sizeof(spec), "%.*s%s", (int)(any_port ? sl - 1 : sl), listen_at, any_port ? "1" : "");
	if (tool_parse_addr(spec, &a) != 0 || a.family == AF_UNIX || a.path[0])
		return tool_usage_error("--listen wants 127.0.0.1:PORT or [::1]:PORT");
	if (any_port) {
		if (a.family == AF_INET)
			((struct sockaddr_in *)&a.sa)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&a.sa)->sin6_port = 0;
	}
	long soft = 0, hard = 0;
	tool_raise_nofile(&soft, &hard);
	tool_catch_signals(&stop_flag);

	int lfd = socket(a.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(lfd, (struct sockaddr *)&a.sa, a.len) != 0 || listen(lfd, tool_default_backlog(backlog)) != 0) {
		fprintf(stderr, "minimal-sse: cannot listen on %s: %s\n", listen_at, strerror(errno));
		return 1;
	}
	struct sockaddr_storage bound;
	socklen_t bl = sizeof(bound);
	getsockname(lfd, (struct sockaddr *)&bound, &bl);
	int port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
						     : ((struct sockaddr_in *)&bound)->sin_port);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event lev = { .events = EPOLLIN, .data.fd = lfd };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev) != 0) {
		fprintf(stderr, "minimal-sse: epoll: %s\n", strerror(errno));
		return 1;
	}
	/* Descriptors stay below the soft limit, so one byte each indexes them. */
	unsigned char *st = xcalloc((size_t)soft + 1, 1);
	printf("minimal-sse: listening on %s:%d (backlog %d)\n", a.family == AF_INET6 ? "[::1]" : "127.0.0.1", port,
	       tool_default_backlog(backlog));
	fflush(stdout);

	/* At most 128 events a pass, as herald takes, so the listener is
	 * served as often in a connect storm. */
	struct epoll_event evs[128];
	while (!stop_flag) {
		int k = epoll_wait(ep, evs, 128, -1);
		for (int j = 0; j < k; j++) {
			int fd = evs[j].data.fd;
			if (fd != lfd) {
				on_readable(ep, fd, st);
				continue;
			}
			for (;;) {
				int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (c < 0) {
					if (errno == EINTR || errno == ECONNABORTED)
						continue;
					break; /* EAGAIN, or out of descriptors until some close */
				}
				if (c > soft) {
					close(c);
					continue;
				}
				st[c] = 0;
				struct epoll_event ev = { .events = EPOLLIN, .data.fd = c };
				if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev) != 0)
					close(c);
			}
		}
	}
	free(st); /* the connections close with the process */
	close(ep);
	close(lfd);
	return 0;
}
