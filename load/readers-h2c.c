/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-h2c.c: --h2c --streams-per-conn K: the N readers as HTTP/2
 * streams, K on each h2c connection (prior knowledge), on nghttp2's client
 * side, all on one epoll thread. The phases are the plain run's: open every
 * stream and wait for its opening frame, publish K events by INSERT (or
 * POST) --interval apart and time each to the last stream, herald's CPU
 * over the events. Every stream checks its ids as it reads them: each one
 * past the last plus one is a miss, one not past it a repeat or out of
 * order, so a stream is complete when it read exactly the published ids,
 * once each, in order (only this tool may write the log during a run).
 *
 * Ownership: h2c_run owns the connections (their sockets and nghttp2
 * sessions) and the streams' records, and frees them before it returns;
 * the events' records are the caller's (struct events). */
#include "readers.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define LINE_KEEP 32 /* the start of a line kept across DATA frames: enough for "id: N" */
#define READ_BUF (64 * 1024)

struct h2c_stream {
	long i; /* the reader's index in struct events */
	int32_t id;
	int status;
	uint8_t opened, closed;
	uint8_t linelen; /* bytes of the line so far in line[] (at most LINE_KEEP) */
	char line[LINE_KEEP];
	int64_t first_id, last_id;
	uint32_t seen, gaps, dups;
};

struct h2c_conn {
	struct h2c *x;
	int fd;
	nghttp2_session *ng;
	uint32_t armed; /* the epoll interest set */
	int dead;
};

struct h2c {
	const struct options *o;
	struct events *ev;
	struct h2c_conn *conns;
	long nconns;
	struct h2c_stream *st;
	long opened, closed_early;
	int64_t t_last_open;
	int ep;
	char first_error[200];
};

static void note_error(struct h2c *x, const char *fmt, const char *what)
{
	if (!x->first_error[0])
		snprintf(x->first_error, sizeof(x->first_error), fmt, what);
}

/* ---- nghttp2's callbacks ---------------------------------------------------- */

static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *user)
{
	struct h2c_conn *c = user;
	(void)ng;
	(void)flags;
	ssize_t w = send(c->fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w < 0 && (errno == EAGAIN || errno == EINTR))
		return NGHTTP2_ERR_WOULDBLOCK;
	if (w < 0) {
		note_error(c->x, "send: %s", strerror(errno));
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	}
	return w;
}

/* One whole line of stream st: its opening ("retry:") or an event's id. */
static void take_line(struct h2c *x, struct h2c_stream *st, const char *p, size_t n)
{
	if (n >= 6 && memcmp(p, "retry:", 6) == 0 && !st->opened) {
		st->opened = 1;
		x->opened++;
		x->t_last_open = tool_now_ns();
		return;
	}
	if (n < 5 || memcmp(p, "id: ", 4) != 0)
		return;
	char num[24];
	size_t k = MIN(n - 4, sizeof(num) - 1);
	memcpy(num, p + 4, k);
	num[k] = '\0';
	int64_t id = strtoll(num, NULL, 10);
	if (id <= 0)
		return;
	if (st->last_id == 0) {
		st->first_id = id;
	} else if (id <= st->last_id) {
		st->dups++;
		return;
	} else if (id > st->last_id + 1) {
		st->gaps += (uint32_t)(id - st->last_id - 1);
	}
	st->last_id = id;
	st->seen++;
	events_saw(x->ev, st->i, id, tool_now_ns());
}

static int on_data(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user)
{
	struct h2c_conn *c = user;
	(void)flags;
	struct h2c_stream *st = nghttp2_session_get_stream_user_data(ng, id);
	if (!st)
		return 0;
	const char *p = (const char *)data, *end = p + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t seg = (size_t)((nl ? nl : end) - p);
		size_t room = LINE_KEEP - st->linelen;
		size_t keep = MIN(seg, room);
		memcpy(st->line + st->linelen, p, keep);
		st->linelen = (uint8_t)(st->linelen + keep);
		if (!nl)
			break;
		take_line(c->x, st, st->line, st->linelen);
		st->linelen = 0;
		p = nl + 1;
	}
	return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
		     const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
	(void)flags;
	(void)user;
	struct h2c_stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
	if (st && namelen == 7 && memcmp(name, ":status", 7) == 0)
		st->status = (int)strtol((const char *)value, NULL, 10) * (valuelen == 3);
	return 0;
}

static int on_close(nghttp2_session *ng, int32_t id, uint32_t code, void *user)
{
	struct h2c_conn *c = user;
	struct h2c_stream *st = nghttp2_session_get_stream_user_data(ng, id);
	if (!st || st->closed)
		return 0;
	st->closed = 1;
	c->x->closed_early++;
	char why[64];
	snprintf(why, sizeof(why), "status %d, error code %u", st->status, code);
	note_error(c->x, "a stream closed (%s)", why);
	return 0;
}

/* ---- the connections ------------------------------------------------------ */

static void arm(struct h2c_conn *c)
{
	uint32_t want = EPOLLIN | (nghttp2_session_want_write(c->ng) ? EPOLLOUT : 0);
	if (want != c->armed && !c->dead) {
		struct epoll_event e = { .events = want, .data.ptr = c };
		epoll_ctl(c->x->ep, EPOLL_CTL_MOD, c->fd, &e);
		c->armed = want;
	}
}

static void conn_fail(struct h2c_conn *c, const char *why)
{
	if (c->dead)
		return;
	note_error(c->x, "a connection failed: %s", why);
	c->dead = 1;
	epoll_ctl(c->x->ep, EPOLL_CTL_DEL, c->fd, NULL);
}

static void conn_io(struct h2c_conn *c, uint32_t events)
{
	static char buf[READ_BUF];
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		for (;;) {
			ssize_t r = recv(c->fd, buf, sizeof(buf), 0);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN)
				break;
			if (r <= 0) {
				conn_fail(c, r == 0 ? "closed by the server" : strerror(errno));
				return;
			}
			ssize_t k = nghttp2_session_mem_recv(c->ng, (const uint8_t *)buf, (size_t)r);
			if (k < 0) {
				conn_fail(c, nghttp2_strerror((int)k));
				return;
			}
			if ((size_t)r < sizeof(buf))
				break;
		}
	}
	int rv = nghttp2_session_send(c->ng);
	if (rv != 0) {
		conn_fail(c, nghttp2_strerror(rv));
		return;
	}
	arm(c);
}

/* Connect c and submit its streams [first, first + k). 0, or -1 after
 * noting why. */
static int conn_open(struct h2c *x, struct h2c_conn *c, const struct tool_addr *target, const char *path,
		     long first, long k, nghttp2_session_callbacks *cbs)
{
	c->x = x;
	c->fd = socket(target->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (const struct sockaddr *)&target->sa, target->len) != 0) {
		note_error(x, "connect: %s", strerror(errno));
		return -1;
	}
	int one = 1;
	if (target->family != AF_UNIX)
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (nghttp2_session_client_new(&c->ng, cbs, c) != 0) {
		note_error(x, "%s", "nghttp2_session_client_new failed");
		return -1;
	}
	/* Windows wide enough that no stream waits on one in a run. */
	nghttp2_settings_entry iv[] = { { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 24 },
					{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 } };
	nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, 2);
	nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, 1 << 30);
	const char *auth = target->family == AF_UNIX ? "localhost" : target->text;
	nghttp2_nv nv[] = {
		{ (uint8_t *)":method", (uint8_t *)"GET", 7, 3, NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)":scheme", (uint8_t *)"http", 7, 4, NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)":authority", (uint8_t *)auth, 10, strlen(auth), NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)":path", (uint8_t *)path, 5, strlen(path), NGHTTP2_NV_FLAG_NONE },
		{ (uint8_t *)"accept", (uint8_t *)"text/event-stream", 6, 17, NGHTTP2_NV_FLAG_NONE },
	};
	for (long j = first; j < first + k; j++) {
		int32_t id = nghttp2_submit_request(c->ng, NULL, nv, sizeof(nv) / sizeof(nv[0]), NULL, &x->st[j]);
		if (id < 0) {
			note_error(x, "nghttp2_submit_request: %s", nghttp2_strerror(id));
			return -1;
		}
		x->st[j].id = id;
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	struct epoll_event e = { .events = EPOLLIN | EPOLLOUT, .data.ptr = c };
	c->armed = e.events;
	epoll_ctl(x->ep, EPOLL_CTL_ADD, c->fd, &e);
	return 0;
}

static void loop_once(struct h2c *x, int timeout_ms)
{
	struct epoll_event evs[256];
	int n = epoll_wait(x->ep, evs, 256, timeout_ms);
	for (int i = 0; i < n; i++) {
		struct h2c_conn *c = evs[i].data.ptr;
		if (!c->dead)
			conn_io(c, evs[i].events);
	}
}

static struct cpu_mark mark(pid_t pid)
{
	struct cpu_mark m = { .t = tool_now_s() };
	if (pid > 0)
		m.ok = tool_cpu_ticks(pid, 1, &m.ticks) == 0;
	return m;
}

static double cpu_ms(struct cpu_mark a, struct cpu_mark b)
{
	return a.ok && b.ok ? (double)(b.ticks - a.ticks) / (double)procstat_clk_tck() * 1e3 : NAN;
}

int h2c_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, struct publisher *pub,
	    volatile int *stop)
{
	struct events *ev = pub->ev;
	struct h2c x = { .o = o, .ev = ev };
	long k = o->streams_per_conn;
	x.nconns = (o->n + k - 1) / k;
	x.st = xcalloc((size_t)o->n, sizeof(*x.st));
	x.conns = xcalloc((size_t)x.nconns, sizeof(*x.conns));
	for (long i = 0; i < o->n; i++)
		x.st[i].i = i;
	x.ep = epoll_create1(EPOLL_CLOEXEC);
	pid_t pid = h->pid ? h->pid : (pid_t)o->pid;
	nghttp2_session_callbacks *cbs;
	nghttp2_session_callbacks_new(&cbs);
	nghttp2_session_callbacks_set_send_callback(cbs, on_send);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
	nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_close);
	const char *path = o->path ? o->path : (target->path[0] ? target->path : "/api/events/stream");
	long rss_before = pid ? tool_rss_kb(pid, 1) : -1;

	/* open */
	fprintf(stderr, "readers: opening %ld h2c streams, %ld a connection, over %ld connections to %s\n", o->n, k,
		x.nconns, target->text);
	int64_t t0 = tool_now_ns();
	long made = 0;
	for (long c = 0; c < x.nconns && !*stop; c++) {
		long first = c * k, cnt = MIN(k, o->n - first);
		if (conn_open(&x, &x.conns[c], target, path, first, cnt, cbs) != 0)
			break;
		made++;
		conn_io(&x.conns[c], EPOLLOUT);
	}
	int64_t deadline = t0 + (int64_t)(o->open_timeout * 1e9);
	while (made == x.nconns && x.opened + x.closed_early < o->n && !*stop && tool_now_ns() < deadline)
		loop_once(&x, 10);
	double open_s = x.opened ? (double)(x.t_last_open - t0) / 1e9 : NAN;
	long rss_open = pid ? tool_rss_kb(pid, 1) : -1;
	fprintf(stderr, "readers: %ld of %ld streams open in %.3f s\n", x.opened, o->n, open_s);

	/* events */
	struct cpu_mark a = mark(pid), b = a;
	if (x.opened == o->n && !*stop) {
		if (o->publish && pub->fd < 0)
			pub_connect(pub);
		int64_t step = (int64_t)(o->interval * 1e9), t_ev = tool_now_ns(), until = 0;
		a = mark(pid);
		long next = 0;
		for (;;) {
			if (*stop)
				break;
			int64_t now = tool_now_ns();
			if (next < ev->k && now >= t_ev + next * step) {
				publish(pub, next++);
				if (next == ev->k)
					until = tool_now_ns() + (int64_t)(o->event_timeout * 1e9);
				continue;
			}
			long done = 0;
			for (long e = 0; e < next; e++)
				done += ev->failed[e] || (ev->id[e] && ev->got[e] >= x.opened);
			if (next == ev->k && (done == ev->k || now > until))
				break;
			loop_once(&x, 5);
		}
		b = mark(pid);
	}

	/* the verdict */
	long complete = 0, gaps = 0, dups = 0, behind = 0, failed = 0;
	int64_t first = ev->k ? ev->id[0] : 0, last = ev->k ? ev->id[ev->k - 1] : 0;
	for (long e = 0; e < ev->k; e++)
		failed += ev->failed[e];
	for (long i = 0; i < o->n; i++) {
		struct h2c_stream *s = &x.st[i];
		gaps += s->gaps;
		dups += s->dups;
		if (s->last_id != last)
			behind++;
		if (s->opened && !s->gaps && !s->dups && s->seen == (uint32_t)ev->k && s->first_id == first &&
		    s->last_id == last)
			complete++;
	}
	double *lat = xcalloc((size_t)(ev->k ? ev->k : 1), sizeof(double));
	long nlat = 0;
	for (long e = 0; e < ev->k; e++)
		if (!ev->failed[e] && ev->got[e] >= x.opened && x.opened)
			lat[nlat++] = ms(events_last_arrival(ev, e) - ev->t0[e]);
	tool_sort_doubles(lat, (size_t)nlat);
	double p50 = nlat ? tool_percentile(lat, (size_t)nlat, 50) : NAN, worst = nlat ? lat[nlat - 1] : NAN;
	double cpu_ev = ev->k ? cpu_ms(a, b) / (double)ev->k : NAN;
	double rss_per = rss_before >= 0 && rss_open >= 0 && x.opened ? (double)(rss_open - rss_before) / x.opened
									: NAN;

	for (long c = 0; c < x.nconns; c++) {
		if (x.conns[c].ng)
			nghttp2_session_del(x.conns[c].ng);
		if (x.conns[c].fd > 0)
			close(x.conns[c].fd);
	}
	nghttp2_session_callbacks_del(cbs);
	close(x.ep);
	int herald_exit = 0;
	if (!o->server)
		herald_exit = tool_herald_stop(h, o->keep);

	printf("| streams | connections | streams per connection | opened | open time | event to the last stream "
	       "(p50, worst) | herald CPU per event | herald RSS per stream |\n");
	printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
	printf("| %ld | %ld | %ld | %ld | %.3f s | %.1f ms, %.1f ms | %.1f ms | %.2f KiB |\n", o->n, x.nconns, k,
	       x.opened, open_s, p50, worst, cpu_ev, rss_per);
	printf("\n%ld of %ld streams read every one of the %ld events once and in order (%ld ids missed, %ld "
	       "repeated or out of order, %ld streams not at the last id).\n",
	       complete, o->n, ev->k, gaps, dups, behind);
	if (x.first_error[0])
		printf("First error: %s\n", x.first_error);
	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_bool("h2c", 1);
	tool_json_int("readers", o->n);
	tool_json_int("connections", x.nconns);
	tool_json_int("streams_per_conn", k);
	tool_json_int("opened", x.opened);
	tool_json_num("open_s", open_s);
	tool_json_int("events", ev->k);
	tool_json_int("events_failed", failed);
	tool_json_int("complete", complete);
	tool_json_int("gaps", gaps);
	tool_json_int("dups", dups);
	tool_json_int("behind", behind);
	tool_json_num("event_p50_ms", p50);
	tool_json_num("event_max_ms", worst);
	tool_json_num("cpu_ms_per_event", cpu_ev);
	tool_json_num("rss_per_reader_kb", rss_per);
	tool_json_int("herald_exit", herald_exit);
	if (x.first_error[0])
		tool_json_text("first_error", x.first_error);
	tool_json_close();
	free(lat);
	free(x.st);
	free(x.conns);
	return complete == o->n && !*stop && !failed ? 0 : 1;
}
