/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-publish.c: the publisher of load/readers. By INSERT into the
 * herald database (as another process would), or by POST over one keep-alive
 * connection whose answers are read in the readers' epoll loop (tag
 * UINT64_MAX, handled by pub_readable), so a publish never waits for its
 * answer. Each publish records its t0/t1 in struct events and, once known,
 * hands the event's id to events_id_known().
 *
 * A peer (--peer nchan) numbers its messages its own way ("id: TIME:TAG"),
 * so there the publisher numbers them: peer_base (drawn per run, so a
 * message another run left in the peer's buffer matches nothing) plus the
 * sequence number. That id is known when the POST is sent, travels as the
 * first word of the body, and comes back as the frame's data line
 * (pub_frame). A Mercure publish (--mercure) is numbered the same way: its
 * subscribers see the update's id, a urn:uuid herald makes, and the
 * publisher's number in the data line. */
#include "readers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

void pub_init(struct publisher *p, struct events *ev, const char *token)
{
	memset(p, 0, sizeof(*p));
	p->ev = ev;
	p->ep = -1;
	p->token = token;
	p->fd = -1;
	snprintf(p->run_tag, sizeof(p->run_tag), "%lx", (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16));
	p->peer_base =
		(int64_t)(((unsigned long)time(NULL) ^ ((unsigned long)getpid() << 12)) % 1000000000UL) * 1000000;
}

int pub_db_open(struct publisher *p, const char *path)
{
	if (sqlite3_open_v2(path, &p->db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "readers: cannot open %s: %s\n", path, p->db ? sqlite3_errmsg(p->db) : "?");
		return -1;
	}
	sqlite3_busy_timeout(p->db, 5000);
	if (sqlite3_prepare_v2(p->db, "INSERT INTO events(type, topic, data, public) VALUES ('load', 'load', ?1, 1)",
			       -1, &p->ins, NULL) != SQLITE_OK) {
		fprintf(stderr, "readers: %s has no usable events table: %s\n", path, sqlite3_errmsg(p->db));
		return -1;
	}
	return 0;
}

void pub_close(struct publisher *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	sqlite3_finalize(p->ins);
	sqlite3_close(p->db);
	p->ins = NULL;
	p->db = NULL;
}

int pub_connect(struct publisher *p)
{
	p->fd = socket(p->addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->fd < 0)
		return -1;
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(p->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(p->fd, (struct sockaddr *)&p->addr.sa, p->addr.len) != 0) {
		fprintf(stderr, "readers: cannot connect to %s to publish: %s\n", p->addr.text, strerror(errno));
		close(p->fd);
		p->fd = -1;
		return -1;
	}
	p->in_len = 0;
	p->nwait = 0;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = UINT64_MAX };
	epoll_ctl(p->ep, EPOLL_CTL_ADD, p->fd, &ev);
	return 0;
}

static void pub_drop(struct publisher *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	for (int j = 0; j < p->nwait; j++) {
		p->ev->failed[p->waiting[j]] = 1;
		fprintf(stderr, "readers: publish of event %ld got no answer (connection closed)\n", p->waiting[j] + 1);
	}
	p->nwait = 0;
}

/* Publish event k; its t0 is taken just before the insert or the send. */
void publish(struct publisher *p, long k)
{
	char data[128];
	snprintf(data, sizeof(data), "readers seq=%ld run=%s", k + 1, p->run_tag);
	p->ev->published = k + 1;
	if (p->db) {
		sqlite3_bind_text(p->ins, 1, data, -1, SQLITE_TRANSIENT);
		p->ev->t0[k] = tool_now_ns();
		int rc = sqlite3_step(p->ins);
		p->ev->t1[k] = tool_now_ns();
		sqlite3_reset(p->ins);
		if (rc != SQLITE_DONE) {
			fprintf(stderr, "readers: insert of event %ld failed: %s\n", k + 1, sqlite3_errmsg(p->db));
			p->ev->failed[k] = 1;
			return;
		}
		events_id_known(p->ev, k, sqlite3_last_insert_rowid(p->db));
		return;
	}
	char body[256], req[1024];
	int bl;
	if (p->peer)
		bl = snprintf(body, sizeof(body), "%lld run=%s", (long long)(p->peer_base + k + 1), p->run_tag);
	else if (p->mercure) /* public (no "private"); '+' and %3D decode to ' ' and '=' */
		bl = snprintf(body, sizeof(body), "topic=load&type=load&data=%lld+run%%3D%s",
			      (long long)(p->peer_base + k + 1), p->run_tag);
	else
		bl = snprintf(body, sizeof(body),
			      "{\"type\":\"load\",\"topic\":\"load\",\"data\":\"%s\",\"public\":true}", data);
	char auth[300] = "";
	if (p->token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", p->token);
	int rl = snprintf(req, sizeof(req),
			  "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\n"
			  "Content-Length: %d\r\n%s\r\n%s",
			  p->addr.path[0] ? p->addr.path
			  : p->mercure    ? "/.well-known/mercure"
					  : "/api/events",
			  p->addr.family == AF_UNIX ? "localhost" : p->addr.text,
			  p->peer      ? "text/plain"
			  : p->mercure ? "application/x-www-form-urlencoded"
				       : "application/json",
			  bl, auth, body);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (p->fd < 0 && pub_connect(p) != 0)
			break;
		p->ev->t0[k] = tool_now_ns();
		if (write(p->fd, req, (size_t)rl) == rl) {
			if (p->nwait < (int)(sizeof(p->waiting) / sizeof(p->waiting[0])))
				p->waiting[p->nwait++] = k;
			if (p->peer || p->mercure)
				events_id_known(p->ev, k, p->peer_base + k + 1);
			return;
		}
		pub_drop(p); /* the server closed the idle keep-alive: reconnect once */
	}
	fprintf(stderr, "readers: POST of event %ld failed\n", k + 1);
	p->ev->failed[k] = 1;
}

/* Read POST answers: "HTTP/1.1 201 ...", Content-Length, {"id":N}; a
 * peer's "201 Created" or "202 Accepted" (no subscriber, or some) with a text
 * body; the Mercure hub's 200 with the update's id as text. */
void pub_readable(void *arg)
{
	struct publisher *p = arg;
	if (p->fd < 0)
		return;
	ssize_t got = read(p->fd, p->in + p->in_len, sizeof(p->in) - 1 - p->in_len);
	if (got <= 0) {
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		pub_drop(p);
		return;
	}
	p->in_len += (size_t)got;
	p->in[p->in_len] = '\0';
	for (;;) {
		char *e = strstr(p->in, "\r\n\r\n");
		if (!e)
			break;
		size_t hl = (size_t)(e + 4 - p->in);
		long clen = 0;
		for (char *h = p->in; h && h < e; h = strchr(h, '\n'), h = h ? h + 1 : NULL)
			if (strncasecmp(h, "content-length:", 15) == 0)
				clen = strtol(h + 15, NULL, 10);
		if (clen < 0 || hl + (size_t)clen > sizeof(p->in) - 1) {
			pub_drop(p);
			return;
		}
		if (p->in_len < hl + (size_t)clen)
			break;
		int status = atoi(p->in + 9);
		char saved = p->in[hl + (size_t)clen];
		p->in[hl + (size_t)clen] = '\0';
		double idv = 0;
		long k = p->nwait > 0 ? p->waiting[0] : -1;
		if (p->nwait > 0)
			memmove(p->waiting, p->waiting + 1, (size_t)--p->nwait * sizeof(p->waiting[0]));
		if (k >= 0) {
			p->ev->t1[k] = tool_now_ns();
			if ((p->peer && (status == 201 || status == 202)) || (p->mercure && status == 200)) {
				/* its id was known when it was sent */
			} else if (!p->peer && !p->mercure && status == 201 &&
				   tool_json_number(p->in + hl, "id", &idv) == 0 && idv > 0) {
				events_id_known(p->ev, k, (int64_t)idv);
			} else {
				p->ev->failed[k] = 1;
				fprintf(stderr, "readers: POST of event %ld answered %d: %.200s\n", k + 1, status,
					p->in + hl);
			}
		}
		p->in[hl + (size_t)clen] = saved;
		size_t used = hl + (size_t)clen;
		memmove(p->in, p->in + used, p->in_len - used + 1);
		p->in_len -= used;
	}
	if (p->in_len >= sizeof(p->in) - 1)
		pub_drop(p);
}

void pub_frame(void *arg, long i, int64_t id, int64_t stamp, int64_t now)
{
	struct publisher *p = arg;
	(void)id;
	if (stamp > 0)
		events_saw(p->ev, i, stamp, now);
}
