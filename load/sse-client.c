/* SPDX-License-Identifier: BSD-2-Clause */
/* sse-client.c: the epoll client of load/readers, load/topics and
 * load/rate: N readers on one thread, so the client is never the
 * bottleneck.
 *
 * Reader state machine: CONNECTING (EPOLLOUT armed) -> HEAD (request sent,
 * collecting the header block) -> OPENING (status 200, waiting for the end of
 * the first frame) -> OPEN; any failure -> DEAD with its kind counted. The
 * byte stream is scanned line by line for "id: N" at line starts and blank
 * lines (frame ends); nothing else is parsed.
 *
 * TLS (--tls): after the connect, a HANDSHAKE state drives SSL_do_handshake
 * with epoll interest following WANT_READ/WANT_WRITE, in the same loop; then
 * reader I/O goes through conn_read()/conn_write() (sse-client-tls.c).
 *
 * Epoll tags: a reader's index, or UINT64_MAX for the socket whose
 * handler the tool registered (client->other: e.g. a POST publisher's). */
#include "sse-client.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define HEAD_MAX 16384

/* ---- opening and failing readers ----------------------------------------- */

static enum err_kind kind_of(struct client *c, int err)
{
	switch (err) {
	case ECONNREFUSED:
		return E_REFUSED;
	case ECONNRESET:
	case EPIPE:
	case ECONNABORTED:
		return E_RESET;
	case ETIMEDOUT:
		return E_TIMEOUT;
	case 0:
		return E_CLOSED;
	default:
		if (!c->c.first_other_errno)
			c->c.first_other_errno = err;
		return E_OTHER;
	}
}

/* Close r's socket and free its TLS state and header bytes; no counting. */
static void reader_close(struct reader *r)
{
	if (r->fd >= 0) {
		close(r->fd); /* closing removes it from epoll */
		r->fd = -1;
	}
	free(r->head);
	r->head = NULL;
	SSL_free(r->ssl);
	r->ssl = NULL;
}

/* Fail reader r with kind k; an open reader counts as closed after open.
 * With c->resume, an open reader whose stream ends, and a reconnect that
 * fails, wait (R_DOWN) for client_reconnect() instead. */
static void reader_fail(struct client *c, struct reader *r, enum err_kind k)
{
	if (r->state == R_DEAD || r->state == R_DOWN)
		return;
	if (c->resume && (r->state == R_OPEN || r->again)) {
		if (r->state == R_OPEN) {
			c->c.ended++;
			c->c.open--;
		} else {
			c->c.reconnect_errs[k]++;
			if (r->state >= R_CONNECTING)
				c->c.inflight--;
		}
		r->state = R_DOWN;
		c->c.down++;
		reader_close(r);
		return;
	}
	if (r->state == R_OPEN) {
		c->c.closed_after_open[k]++;
		c->c.open--;
	} else {
		c->c.errs[k]++;
		c->c.settled++;
		if (r->state >= R_CONNECTING)
			c->c.inflight--;
	}
	r->state = R_DEAD;
	reader_close(r);
}

/* Start connecting reader i (R_NEW or R_RETRY); failures are counted. */
static void reader_connect(struct client *c, long i)
{
	struct reader *r = &c->r[i];
	if (r->state == R_NEW) {
		r->t_start = tool_now_ns();
		c->c.inflight++;
	}
	r->state = R_CONNECTING;
	r->fd = socket(c->target.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->fd < 0) {
		reader_fail(c, r, kind_of(c, errno));
		return;
	}
	if ((c->sources > 1 || c->source_first) && c->target.family == AF_INET) {
		/* Spread over 127.0.0.x (or from source_first on); the port is
		 * picked at connect time so that each source address has its own
		 * ephemeral range. */
		int one = 1;
		setsockopt(r->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		struct sockaddr_in src = { .sin_family = AF_INET };
		uint32_t first = c->source_first ? c->source_first : 0x7f000001u;
		src.sin_addr.s_addr = htonl(first + (uint32_t)(i % (c->sources > 1 ? c->sources : 1)));
		if (bind(r->fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
			reader_fail(c, r, kind_of(c, errno));
			return;
		}
	}
	int rc = connect(r->fd, (struct sockaddr *)&c->target.sa, c->target.len);
	if (rc != 0 && errno == EAGAIN && c->target.family == AF_UNIX) {
		/* A full unix listener queue refuses instead of queueing us:
		 * back off and try again, as a blocking client would wait. */
		close(r->fd);
		r->fd = -1;
		r->state = R_RETRY;
		c->c.retry++;
		return;
	}
	if (rc != 0 && errno != EINPROGRESS) {
		reader_fail(c, r, kind_of(c, errno));
		return;
	}
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = (uint64_t)i };
	if (epoll_ctl(c->ep, EPOLL_CTL_ADD, r->fd, &ev) != 0)
		reader_fail(c, r, kind_of(c, errno));
}

static void send_request(struct client *c, long i);

/* Drive the TLS handshake; epoll interest follows what it waits for. */
static void on_handshake(struct client *c, long i)
{
	struct reader *r = &c->r[i];
	ERR_clear_error();
	int rc = SSL_do_handshake(r->ssl);
	if (rc == 1) {
		send_request(c, i);
		return;
	}
	int saved = errno;
	int e = SSL_get_error(r->ssl, rc);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		struct epoll_event ev = { .events = e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT,
					  .data.u64 = (uint64_t)i };
		if (epoll_ctl(c->ep, EPOLL_CTL_MOD, r->fd, &ev) != 0)
			reader_fail(c, r, kind_of(c, errno));
		return;
	}
	errno = saved;
	tls_note_error(c->tls, "handshake");
	reader_fail(c, r, e == SSL_ERROR_SYSCALL ? kind_of(c, saved ? saved : ECONNRESET) : E_OTHER);
}

static void on_writable(struct client *c, long i)
{
	struct reader *r = &c->r[i];
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
		soerr = errno;
	if (soerr) {
		reader_fail(c, r, kind_of(c, soerr));
		return;
	}
	if (c->tls->ctx && !r->ssl) {
		r->ssl = SSL_new(c->tls->ctx);
		if (!r->ssl || SSL_set_fd(r->ssl, r->fd) != 1) {
			tls_note_error(c->tls, "SSL_new");
			reader_fail(c, r, E_OTHER);
			return;
		}
		SSL_set_connect_state(r->ssl);
		r->state = R_HANDSHAKE;
		on_handshake(c, i);
		return;
	}
	send_request(c, i);
}

/* Send the stream request and wait for the head; a reconnect names the
 * last id it read in Last-Event-ID, as a browser does. */
static void send_request(struct client *c, long i)
{
	struct reader *r = &c->r[i];
	const char *req = c->request;
	size_t len = c->request_len;
	if (c->request_for)
		req = c->request_for(c->hook_arg, i, &len);
	char again[sizeof(c->request) + 64];
	if (c->resume && !c->no_last_id && r->last_id > 0 && len >= 2) {
		/* The request ends with its blank line: the header goes before it. */
		int w = snprintf(again, sizeof(again), "%.*sLast-Event-ID: %lld\r\n\r\n", (int)(len - 2), req,
				 (long long)r->last_id);
		req = again;
		len = (size_t)w;
	}
	ssize_t w = conn_write(c->tls, r, req, len);
	if (w != (ssize_t)len) {
		reader_fail(c, r, w < 0 ? kind_of(c, errno) : E_OTHER);
		return;
	}
	r->state = R_HEAD;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)i };
	if (epoll_ctl(c->ep, EPOLL_CTL_MOD, r->fd, &ev) != 0)
		reader_fail(c, r, kind_of(c, errno));
}

/* One more id read by r (client->track): counted as the next, a gap or a
 * repeat. */
void ids_check(struct reader *r, int64_t id)
{
	if (r->seen == 0) {
		r->first_id = id;
	} else if (id <= r->last_id) {
		r->dups++;
		return; /* the last id stays the newest one read */
	} else if (id != r->last_id + 1) {
		r->gaps += (uint32_t)(id - r->last_id - 1);
	}
	r->seen++;
	r->last_id = id;
}

/* ---- the stream scanner -------------------------------------------------- */

static void line_done(struct client *c, long i, const char *line, size_t len, int64_t now)
{
	struct reader *r = &c->r[i];
	if (len && line[len - 1] == '\r')
		len--;
	if (len == 0) {
		if (c->frame && r->frame_id) {
			c->frame(c->frame_arg, i, r->frame_id, r->frame_stamp, now);
			r->frame_id = r->frame_stamp = 0;
		}
		if (r->state == R_OPENING && r->again) {
			r->state = R_OPEN;
			c->c.t_last_reopen = now;
			c->c.open++;
			c->c.reopened++;
			c->c.inflight--;
		} else if (r->state == R_OPENING) {
			r->state = R_OPEN;
			r->t_open = now;
			c->c.t_last_open = now;
			c->c.open++;
			c->c.opened++;
			c->c.settled++;
			c->c.inflight--;
		}
		return;
	}
	size_t p;
	int is_data = 0;
	if (len == 4 && memcmp(line, ": hb", 4) == 0) {
		c->c.heartbeats++; /* herald's heartbeat comment */
		return;
	}
	if (len >= 4 && memcmp(line, "id:", 3) == 0)
		p = 3;
	else if (c->frame && len >= 6 && memcmp(line, "data:", 5) == 0 && !r->frame_stamp)
		p = 5, is_data = 1;
	else
		return;
	if (p < len && line[p] == ' ')
		p++;
	int64_t v = 0;
	size_t digits = 0;
	for (; p < len && isdigit((unsigned char)line[p]) && digits < 19; p++, digits++)
		v = v * 10 + (line[p] - '0');
	if (!digits) {
		/* An id that is no number (a Mercure publisher's, a urn:uuid)
		 * still ends its frame in client->frame, which knows the event
		 * by its data line. */
		if (!is_data && c->frame)
			r->frame_id = -1;
		return;
	}
	if (is_data) {
		r->frame_stamp = v;
		return;
	}
	if (c->track)
		ids_check(r, v);
	if (c->frame)
		r->frame_id = v;
	else if (c->saw)
		c->saw(c->hook_arg, i, v, now);
	else
		events_saw(c->ev, i, v, now);
}

/* Split stream bytes into lines; a line's start that is cut by the end of a
 * read is kept in part[] (only its first bytes matter). */
static void scan(struct client *c, long i, const char *p, size_t len, int64_t now)
{
	struct reader *r = &c->r[i];
	const char *end = p + len;
	while (p < end && r->state != R_DEAD) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t take = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (r->midline || !nl) {
			size_t room = PART_MAX - r->partlen;
			size_t n = take < room ? take : room;
			memcpy(r->part + r->partlen, p, n);
			r->partlen = (uint8_t)(r->partlen + n);
			if (!nl) {
				r->midline = 1;
				return;
			}
			line_done(c, i, r->part, r->partlen, now);
			r->midline = 0;
			r->partlen = 0;
		} else {
			line_done(c, i, p, take, now);
		}
		p = nl + 1;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Feed the body bytes after the header block, undoing chunked encoding when
 * the server used it. */
static void feed(struct client *c, long i, const char *p, size_t len, int64_t now)
{
	struct reader *r = &c->r[i];
	if (!r->chunked) {
		scan(c, i, p, len, now);
		return;
	}
	while (len > 0 && r->state != R_DEAD) {
		switch (r->cstate) {
		case CH_SIZE: {
			int v = hexval(*p);
			if (v >= 0) {
				r->chunk_left = r->chunk_left * 16 + (uint32_t)v;
			} else if (*p == '\n') {
				r->cstate = r->chunk_left ? CH_DATA : CH_DONE;
			} else {
				r->cstate = CH_SIZE_LINE;
			}
			p++;
			len--;
			break;
		}
		case CH_SIZE_LINE:
			if (*p == '\n')
				r->cstate = r->chunk_left ? CH_DATA : CH_DONE;
			p++;
			len--;
			break;
		case CH_DATA: {
			size_t take = len < r->chunk_left ? len : r->chunk_left;
			scan(c, i, p, take, now);
			p += take;
			len -= take;
			r->chunk_left -= (uint32_t)take;
			if (r->chunk_left == 0)
				r->cstate = CH_DATA_END;
			break;
		}
		case CH_DATA_END:
			if (*p == '\n') {
				r->cstate = CH_SIZE;
				r->chunk_left = 0;
			}
			p++;
			len--;
			break;
		default:
			return;
		}
	}
}

/* Parse a complete header block; returns 0 when the stream may go on. */
static int head_done(struct client *c, long i, const char *h, size_t len)
{
	struct reader *r = &c->r[i];
	int status = 0;
	if (len > 12 && memcmp(h, "HTTP/1.", 7) == 0 && h[8] == ' ' && isdigit((unsigned char)h[9]) &&
	    isdigit((unsigned char)h[10]) && isdigit((unsigned char)h[11]))
		status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
	/* herald answers a refused EventSource with a 200 stream that ends
	 * at once; X-Refused-Status names the refusal. */
	for (const char *p = h; status == 200 && p && p < h + len;) {
		const char *nl = memchr(p, '\n', (size_t)(h + len - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(h + len - p);
		if (ll > 17 && strncasecmp(p, "x-refused-status:", 17) == 0) {
			int refused = atoi(p + 17);
			status = refused > 0 ? refused : 0;
		}
		p = nl ? nl + 1 : NULL;
	}
	if (status != 200) {
		c->c.non200[status > 0 && status < 600 ? status : 0]++;
		reader_fail(c, r, E_NON200);
		return -1;
	}
	/* Transfer-Encoding: chunked, case-insensitively. */
	for (const char *p = h; p && p < h + len;) {
		const char *nl = memchr(p, '\n', (size_t)(h + len - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(h + len - p);
		if (ll > 18 && strncasecmp(p, "transfer-encoding:", 18) == 0) {
			for (size_t j = 18; j + 7 <= ll; j++)
				if (strncasecmp(p + j, "chunked", 7) == 0)
					r->chunked = 1;
		}
		p = nl ? nl + 1 : NULL;
	}
	r->state = R_OPENING;
	return 0;
}

static const char *find_head_end(const char *p, size_t len)
{
	for (size_t j = 0; j + 3 < len; j++) {
		const char *c = memchr(p + j, '\r', len - j);
		if (!c)
			return NULL;
		j = (size_t)(c - p);
		if (j + 3 < len && c[1] == '\n' && c[2] == '\r' && c[3] == '\n')
			return c + 4;
	}
	return NULL;
}

static void read_once(struct client *c, long i);

/* Read what is there; with TLS, also what OpenSSL has decrypted already,
 * which epoll cannot report. */
static void on_readable(struct client *c, long i)
{
	struct reader *r = &c->r[i];
	do
		read_once(c, i);
	while (r->state != R_DEAD && r->ssl && SSL_pending(r->ssl) > 0);
}

static void read_once(struct client *c, long i)
{
	struct reader *r = &c->r[i];
	ssize_t got = conn_read(c->tls, r, c->rbuf, sizeof(c->rbuf));
	if (got <= 0) {
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		reader_fail(c, r, got == 0 ? E_CLOSED : kind_of(c, errno));
		return;
	}
	int64_t now = tool_now_ns();
	const char *p = c->rbuf;
	size_t len = (size_t)got;
	if (r->state == R_HEAD) {
		if (!r->head) {
			const char *e = find_head_end(p, len);
			if (e) {
				/* The usual case: the whole head in one read, no copy. */
				if (head_done(c, i, p, (size_t)(e - p)) != 0)
					return;
				len -= (size_t)(e - p);
				p = e;
			} else {
				r->head = xmalloc(HEAD_MAX);
				r->headlen = 0;
			}
		}
		if (r->head) {
			size_t room = HEAD_MAX - r->headlen;
			if (len > room) {
				reader_fail(c, r, E_OTHER);
				return;
			}
			memcpy(r->head + r->headlen, p, len);
			size_t old = r->headlen;
			r->headlen += (uint32_t)len;
			size_t from = old > 3 ? old - 3 : 0;
			const char *e = find_head_end(r->head + from, r->headlen - from);
			if (!e)
				return;
			size_t hl = (size_t)(e - r->head);
			if (head_done(c, i, r->head, hl) != 0)
				return;
			/* Body bytes that followed the head in this read. */
			size_t body_from_here = r->headlen - hl;
			p = c->rbuf + (size_t)got - body_from_here;
			len = body_from_here;
			free(r->head);
			r->head = NULL;
		}
	}
	if (len)
		feed(c, i, p, len, now);
}

/* ---- the loop ------------------------------------------------------------ */

void client_loop_once(struct client *c, int timeout_ms)
{
	int k = epoll_wait(c->ep, c->evbuf, (int)(sizeof(c->evbuf) / sizeof(c->evbuf[0])), timeout_ms);
	for (int j = 0; j < k; j++) {
		uint64_t tag = c->evbuf[j].data.u64;
		if (tag == UINT64_MAX) {
			if (c->other)
				c->other(c->other_arg);
			continue;
		}
		long i = (long)tag;
		struct reader *r = &c->r[i];
		if (r->state == R_DEAD)
			continue;
		if (r->state == R_CONNECTING)
			on_writable(c, i);
		else if (r->state == R_HANDSHAKE)
			on_handshake(c, i);
		else
			on_readable(c, i);
	}
}

long client_reconnect(struct client *c)
{
	int started = 0;
	for (long i = 0; i < c->n && c->c.down > 0 && started < 256; i++) {
		struct reader *r = &c->r[i];
		if (r->state != R_DOWN)
			continue;
		c->c.down--;
		/* A new response: no head, chunk or line carried over. */
		r->again = 1;
		r->chunked = 0;
		r->cstate = CH_SIZE;
		r->chunk_left = 0;
		r->midline = 0;
		r->partlen = 0;
		r->t_start = tool_now_ns();
		c->c.inflight++;
		reader_connect(c, i);
		started++;
	}
	return c->c.down;
}

/* ---- the client ------------------------------------------------------------ */

struct client *client_new(long n, const struct tool_addr *target, long sources, const char *request, struct tls *tls,
			  struct events *ev)
{
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		fprintf(stderr, "readers: epoll_create1: %s\n", strerror(errno));
		return NULL;
	}
	struct client *c = xcalloc(1, sizeof(*c));
	c->ep = ep;
	c->n = n;
	c->r = xcalloc((size_t)n, sizeof(*c->r));
	for (long i = 0; i < n; i++)
		c->r[i].fd = -1;
	c->target = *target;
	c->sources = sources;
	c->request_len = (size_t)snprintf(c->request, sizeof(c->request), "%s", request);
	c->tls = tls;
	c->ev = ev;
	return c;
}

void client_close(struct client *c)
{
	for (long i = 0; i < c->n; i++)
		reader_close(&c->r[i]);
	if (c->ep >= 0)
		close(c->ep);
	c->ep = -1;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	client_close(c);
	free(c->r);
	free(c);
}

int client_connect_more(struct client *c, long ramp)
{
	/* Start connects in batches so answers are read in between. */
	int started = 0;
	while (c->next_connect < c->n && started < 256 && (ramp == 0 || c->c.inflight < ramp)) {
		reader_connect(c, c->next_connect++);
		started++;
	}
	/* Unix listeners that were full: try those again. */
	if (c->c.retry > 0) {
		c->c.retry = 0;
		for (long i = 0; i < c->next_connect; i++)
			if (c->r[i].state == R_RETRY)
				reader_connect(c, i);
	}
	return c->next_connect < c->n && (ramp == 0 || c->c.inflight < ramp);
}

void client_give_up(struct client *c)
{
	for (long i = 0; i < c->n; i++) {
		struct reader *r = &c->r[i];
		if (r->state == R_NEW || r->state == R_RETRY) {
			c->c.errs[E_TIMEOUT]++;
			c->c.settled++;
			if (r->state == R_RETRY)
				c->c.inflight--;
			r->state = R_DEAD;
		} else if (r->state >= R_CONNECTING && r->state < R_OPEN) {
			reader_fail(c, r, E_TIMEOUT);
		}
	}
}
