/* SPDX-License-Identifier: BSD-2-Clause */
/* rate-pub.c: load/rate's open-loop publisher. Each event is a POST of
 * {"data":"<scheduled send time, ns>","public":true} sent when its time
 * comes, whatever the answers to earlier ones are doing: requests are
 * pipelined on K keep-alive connections in turn, and what a socket does not
 * take at once waits in that connection's buffer (its size is reported, so
 * a server that stops reading shows). Answers arrive in order per
 * connection; each is counted as ok (2xx, its id kept) or an HTTP error. A
 * connection that fails counts what it had in flight as network errors and
 * is not reopened: the run says so instead of hiding it. */
#include "rate.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

int rate_pub_open(struct rate_pub *p, const struct tool_addr *addr, int k, int ep)
{
	memset(p, 0, sizeof(*p));
	p->addr = *addr;
	p->ep = ep;
	p->k = k;
	p->c = xcalloc((size_t)k, sizeof(*p->c));
	snprintf(p->host, sizeof(p->host), "%s", addr->family == AF_UNIX ? "localhost" : addr->text);
	for (int j = 0; j < k; j++)
		p->c[j].fd = -1;
	for (int j = 0; j < k; j++) {
		struct rate_pconn *pc = &p->c[j];
		/* Blocking connect (loopback, before any load), then non-blocking. */
		int fd = socket(addr->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (const struct sockaddr *)&addr->sa, addr->len) != 0) {
			fprintf(stderr, "rate: publisher connection to %s: %s\n", addr->text, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		int one = 1;
		if (addr->family != AF_UNIX)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
			close(fd);
			return -1;
		}
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX };
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			fprintf(stderr, "rate: epoll_ctl: %s\n", strerror(errno));
			close(fd);
			return -1;
		}
		pc->fd = fd;
	}
	return 0;
}

static void conn_fail(struct rate_pub *p, struct rate_pconn *pc, const char *why)
{
	if (pc->fd < 0)
		return;
	fprintf(stderr, "rate: publisher connection failed (%s); %ld requests in flight lost\n", why, pc->inflight);
	p->net_err += pc->inflight;
	pc->inflight = 0;
	close(pc->fd); /* closing removes it from epoll */
	pc->fd = -1;
	pc->outlen = pc->outoff = 0;
}

/* Write what the socket takes of pc's queued requests. */
static void flush_out(struct rate_pub *p, struct rate_pconn *pc)
{
	while (pc->fd >= 0 && pc->outoff < pc->outlen) {
		ssize_t w = write(pc->fd, pc->out + pc->outoff, pc->outlen - pc->outoff);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			break;
		if (w <= 0) {
			conn_fail(p, pc, strerror(errno));
			return;
		}
		pc->outoff += (size_t)w;
	}
	if (pc->outoff == pc->outlen)
		pc->outoff = pc->outlen = 0;
}

void rate_pub_send(struct rate_pub *p, int64_t stamp, int64_t now)
{
	p->sent++;
	if (now - stamp > p->max_lag_ns)
		p->max_lag_ns = now - stamp;
	struct rate_pconn *pc = NULL;
	for (int tries = 0; tries < p->k && !pc; tries++) {
		struct rate_pconn *cand = &p->c[p->next++ % p->k];
		if (cand->fd >= 0)
			pc = cand;
	}
	if (!pc) {
		p->net_err++;
		return;
	}
	char body[96], req[512];
	int bl = snprintf(body, sizeof(body), "{\"data\":\"%lld\",\"public\":true}", (long long)stamp);
	int rl = snprintf(req, sizeof(req),
			  "POST /api/events HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
			  "Content-Length: %d\r\n\r\n%s",
			  p->host, bl, body);
	if (pc->outlen + (size_t)rl > pc->outcap) {
		/* Move the unsent part to the front before growing. */
		if (pc->outoff) {
			memmove(pc->out, pc->out + pc->outoff, pc->outlen - pc->outoff);
			pc->outlen -= pc->outoff;
			pc->outoff = 0;
		}
		if (pc->outlen + (size_t)rl > pc->outcap) {
			pc->outcap = (pc->outlen + (size_t)rl) * 2;
			pc->out = xrealloc(pc->out, pc->outcap);
		}
	}
	memcpy(pc->out + pc->outlen, req, (size_t)rl);
	pc->outlen += (size_t)rl;
	pc->inflight++;
	long all = rate_pub_unanswered(p);
	if (all > p->max_inflight)
		p->max_inflight = all;
	flush_out(p, pc);
	size_t backlog = 0;
	for (int j = 0; j < p->k; j++)
		backlog += p->c[j].outlen - p->c[j].outoff;
	if (backlog > p->max_backlog)
		p->max_backlog = backlog;
}

/* Parse the complete answers in pc->in. */
static void parse_answers(struct rate_pub *p, struct rate_pconn *pc)
{
	size_t off = 0;
	for (;;) {
		char *head = pc->in + off;
		size_t avail = pc->inlen - off;
		char *end = memmem(head, avail, "\r\n\r\n", 4);
		if (!end)
			break;
		size_t hl = (size_t)(end - head) + 4;
		long clen = 0;
		for (char *l = head; l && l < end;) {
			char *nl = memchr(l, '\n', (size_t)(end - l));
			if (strncasecmp(l, "content-length:", 15) == 0)
				clen = strtol(l + 15, NULL, 10);
			l = nl ? nl + 1 : NULL;
		}
		if (clen < 0 || avail < hl + (size_t)clen)
			break;
		int status = avail > 12 && memcmp(head, "HTTP/1.", 7) == 0 ? atoi(head + 9) : 0;
		if (status >= 200 && status < 300) {
			p->ok++;
			/* {"id":N} */
			char *id = memmem(head + hl, (size_t)clen, "\"id\":", 5);
			if (id) {
				long long v = strtoll(id + 5, NULL, 10);
				if (v > p->max_id)
					p->max_id = v;
			}
		} else {
			p->http_err++;
		}
		if (pc->inflight > 0)
			pc->inflight--;
		off += hl + (size_t)clen;
	}
	memmove(pc->in, pc->in + off, pc->inlen - off);
	pc->inlen -= off;
}

void rate_pub_pump(void *arg)
{
	struct rate_pub *p = arg;
	for (int j = 0; j < p->k; j++) {
		struct rate_pconn *pc = &p->c[j];
		flush_out(p, pc);
		while (pc->fd >= 0) {
			if (pc->inlen == sizeof(pc->in)) {
				conn_fail(p, pc, "an answer larger than the buffer");
				break;
			}
			ssize_t r = read(pc->fd, pc->in + pc->inlen, sizeof(pc->in) - pc->inlen);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN)
				break;
			if (r <= 0) {
				conn_fail(p, pc, r == 0 ? "closed by the server" : strerror(errno));
				break;
			}
			pc->inlen += (size_t)r;
			parse_answers(p, pc);
		}
	}
}

long rate_pub_unanswered(const struct rate_pub *p)
{
	long n = 0;
	for (int j = 0; j < p->k; j++)
		n += p->c[j].inflight;
	return n;
}

void rate_pub_close(struct rate_pub *p)
{
	for (int j = 0; j < p->k && p->c; j++) {
		if (p->c[j].fd >= 0)
			close(p->c[j].fd);
		free(p->c[j].out);
	}
	free(p->c);
	p->c = NULL;
	p->k = 0;
}
