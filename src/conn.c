/* conn.c: one client connection: reading requests, queued output written
 * with writev once per loop pass, timeouts, and a deferred, lingering close.
 *
 * Output: every frame or response is a reference to a shared chunk in a
 * ring; conn_enqueue only queues and puts the connection on the server's
 * flush list, so a reader gets one writev per pass for everything queued to
 * it in that pass. EPOLLOUT is requested only while bytes are left over.
 *
 * Closing: after a refusal the response is flushed, the write side shut
 * down, and input drained for a moment before close, so the client reads
 * the response instead of a reset. The struct is freed at the end of the
 * pass, never inside a callback that may still use it. */
#include "conn.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "http.h"
#include "listener.h"
#include "log.h"
#include "publish.h"
#include "server.h"
#include "stream.h"
#include "tls.h"
#include "util.h"

#define IOV_BATCH 128
#define READ_BUDGET (64 * 1024)    /* bytes read per wakeup per connection */
#define OUTPUT_PAUSE (1024 * 1024) /* stop reading requests past this much queued output */
#define LINGER_MS 2000

static void on_io(void *arg, uint32_t events);
static void conn_process(struct conn *c);
static void schedule_flush(struct conn *c);

static ssize_t io_read(struct conn *c, void *buf, size_t len)
{
	if (c->tls)
		return tls_conn_read(c, buf, len);
	ssize_t n = read(c->fd, buf, len);
	return n < 0 ? -errno : n;
}

static ssize_t io_writev(struct conn *c, const struct iovec *iov, int n)
{
	if (c->tls)
		return tls_conn_writev(c, iov, n);
	ssize_t w = writev(c->fd, iov, n);
	return w < 0 ? -errno : w;
}

static uint32_t wanted_events(const struct conn *c)
{
	uint32_t ev = 0;
	switch (c->state) {
	case CONN_READING:
		/* After the client's EOF, input would only report EOF again. */
		if (c->qbytes < OUTPUT_PAUSE && !c->close_after_flush && !c->peer_eof)
			ev |= EPOLLIN | EPOLLRDHUP;
		break;
	case CONN_STREAMING:
	case CONN_LINGERING:
		ev |= EPOLLIN | EPOLLRDHUP;
		break;
	default:
		break;
	}
	if (c->qlen)
		ev |= EPOLLOUT;
	if (c->tls)
		ev = tls_conn_events(c, ev);
	return ev;
}

void conn_update_events(struct conn *c)
{
	if (c->state == CONN_CLOSED)
		return;
	uint32_t ev = wanted_events(c);
	if (ev != c->want) {
		c->want = ev;
		loop_modify(c->srv->lp, c->fd, ev);
	}
	/* Input OpenSSL already decrypted will not wake epoll: read it at the
	 * end of the pass (conn_pass_end). */
	if (c->tls && (ev & EPOLLIN) && tls_conn_pending(c))
		schedule_flush(c);
}

static void start_request_timer(struct conn *c);
static void on_timeout(void *arg);

/* Output is waiting for the client: the connection lives while the client
 * takes bytes, and closes once it has taken none for stall_timeout.
 * Returns true when it was closed. */
static bool send_stalled(struct conn *c)
{
	uint64_t now = loop_now(c->srv->lp), limit = (uint64_t)c->srv->cfg.stall_timeout_ms;
	if (now - c->last_progress >= limit) {
		log_info("closing connection from %s: no bytes of its %zu queued accepted for %llu ms", c->client,
			 c->qbytes, (unsigned long long)limit);
		conn_close(c, NULL);
		return true;
	}
	loop_timer_start(c->srv->lp, &c->timer, limit - (now - c->last_progress), on_timeout, c);
	return false;
}

static void on_timeout(void *arg)
{
	struct conn *c = arg;
	if (c->tls && tls_conn_handshaking(c)) {
		conn_close(c, "TLS handshake not complete within header_timeout");
	} else if (c->state == CONN_LINGERING) {
		conn_close(c, NULL);
	} else if (c->qlen && (c->state != CONN_STREAMING || c->close_after_flush)) {
		/* Output waits for the client (which may also have sent more
		 * requests, parked behind it): not idle, unless it has stopped
		 * reading. The hub times live streams itself. */
		send_stalled(c);
	} else if (c->state == CONN_STREAMING) {
		if (c->close_after_flush)
			conn_close(c, NULL);
	} else if (c->state == CONN_WAITING) {
		/* A handler holds the request (a publish waiting for its
		 * commit); check again later. */
		start_request_timer(c);
	} else if (c->state == CONN_READING && c->rlen == 0 && c->served) {
		conn_close(c, NULL); /* idle keep-alive connection */
	} else if (c->state == CONN_READING) {
		conn_refuse(c, 408,
			    c->rlen ? "request not complete within header_timeout" : "no request within header_timeout",
			    NULL);
	}
}

static void start_request_timer(struct conn *c)
{
	const struct config *cfg = &c->srv->cfg;
	if (c->qlen) {
		/* Output first: the request clock starts once it is written. */
		loop_timer_start(c->srv->lp, &c->timer, (uint64_t)cfg->stall_timeout_ms, on_timeout, c);
		return;
	}
	uint64_t ms = (uint64_t)(c->served && c->rlen == 0 ? cfg->keepalive_timeout_ms : cfg->header_timeout_ms);
	loop_timer_start(c->srv->lp, &c->timer, ms, on_timeout, c);
}

struct conn *conn_new(struct server *srv, struct listener *ls, int fd, const struct sockaddr *sa, socklen_t salen)
{
	struct conn *c = xcalloc(1, sizeof(*c));
	c->fd = fd;
	c->srv = srv;
	c->ls = ls;
	c->state = CONN_READING;
	c->peer_unix = sa->sa_family == AF_UNIX || salen <= sizeof(sa_family_t);
	addr_peer_text(sa, salen, c->peer, sizeof(c->peer), &c->peer_loopback);
	if (c->peer_unix) {
		snprintf(c->peer, sizeof(c->peer), "unix");
		c->peer_loopback = true;
	}
	snprintf(c->client, sizeof(c->client), "%s", c->peer);
	c->last_progress = loop_now(srv->lp);
	if (!c->peer_unix) {
		/* Output is already gathered into one writev per pass; Nagle would
		 * only hold back a response behind the client's delayed ACK. */
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	c->want = EPOLLIN | EPOLLRDHUP;
	if (ls && ls->tls && tls_conn_start(c, ls) < 0) {
		close(fd);
		free(c);
		return NULL;
	}
	if (c->tls)
		c->want = tls_conn_events(c, c->want);
	int r = loop_watch(srv->lp, fd, c->want, on_io, c);
	if (r < 0) {
		log_warn("epoll_ctl for a new connection: %s", strerror(-r));
		if (c->tls)
			tls_conn_free(c);
		close(fd);
		free(c);
		return NULL;
	}
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	srv->nconns++;
	start_request_timer(c);
	return c;
}

static void schedule_flush(struct conn *c)
{
	if (c->flush_scheduled)
		return;
	c->flush_scheduled = true;
	c->flush_next = c->srv->flush_list;
	c->srv->flush_list = c;
	server_schedule_pass_end(c->srv);
}

static void enqueue(struct conn *c, struct chunk *ch, int64_t id, bool droppable)
{
	if (c->state == CONN_CLOSED)
		return;
	if (c->qlen == c->qcap) {
		size_t ncap = c->qcap ? c->qcap * 2 : 8;
		struct outq_entry *nq = xmalloc(ncap * sizeof(*nq));
		for (size_t i = 0; i < c->qlen; i++)
			nq[i] = c->q[(c->qhead + i) % c->qcap];
		free(c->q);
		c->q = nq;
		c->qcap = ncap;
		c->qhead = 0;
	}
	if (c->qlen == 0)
		c->last_progress = loop_now(c->srv->lp);
	c->q[(c->qhead + c->qlen) % c->qcap] = (struct outq_entry){ chunk_ref(ch), 0, droppable, id };
	c->qlen++;
	c->qbytes += ch->len;
	schedule_flush(c);
}

void conn_enqueue(struct conn *c, struct chunk *ch, int64_t id)
{
	enqueue(c, ch, id, false);
}

void conn_enqueue_frame(struct conn *c, struct chunk *ch, int64_t id)
{
	enqueue(c, ch, id, true);
}

int64_t conn_drop_queue(struct conn *c)
{
	int64_t resume = c->written_id;
	size_t kept = 0;
	/* A frame half on the wire (or, with TLS, encrypted and waiting for
	 * the socket) must be finished, or the stream breaks. */
	bool first_committed = c->qlen && (c->q[c->qhead].off > 0 || (c->tls && tls_conn_write_pending(c)));
	for (size_t i = 0; i < c->qlen; i++) {
		struct outq_entry e = c->q[(c->qhead + i) % c->qcap];
		if (!e.droppable || (i == 0 && first_committed)) {
			/* Kept entries move up in order; ids only increase along
			 * the queue, so the last kept one is the resume point. */
			c->q[(c->qhead + kept) % c->qcap] = e;
			kept++;
			if (e.id > 0)
				resume = e.id;
			continue;
		}
		c->qbytes -= e.c->len - e.off;
		chunk_unref(e.c);
	}
	c->qlen = kept;
	return resume;
}

static void release_queue(struct conn *c)
{
	for (size_t i = 0; i < c->qlen; i++)
		chunk_unref(c->q[(c->qhead + i) % c->qcap].c);
	c->qlen = 0;
	c->qbytes = 0;
	free(c->q);
	c->q = NULL;
	c->qcap = 0;
}

/* Shut down our side and drain input for a moment before closing. */
static void start_linger(struct conn *c)
{
	if (c->tls)
		tls_conn_shutdown(c);
	shutdown(c->fd, SHUT_WR);
	c->state = CONN_LINGERING;
	loop_timer_start(c->srv->lp, &c->timer, LINGER_MS, on_timeout, c);
	conn_update_events(c);
}

void conn_flush(struct conn *c)
{
	struct server *srv = c->srv;
	while (c->qlen && c->state != CONN_CLOSED) {
		struct iovec iov[IOV_BATCH];
		int n = 0;
		size_t total = 0;
		for (size_t i = 0; i < c->qlen && n < IOV_BATCH; i++) {
			struct outq_entry *e = &c->q[(c->qhead + i) % c->qcap];
			iov[n].iov_base = e->c->data + e->off;
			iov[n].iov_len = e->c->len - e->off;
			total += iov[n].iov_len;
			n++;
		}
		ssize_t w = io_writev(c, iov, n);
		if (w == -EINTR)
			continue;
		if (w == -EAGAIN)
			break;
		if (w < 0) {
			conn_close(c, w == -EPIPE || w == -ECONNRESET ? NULL : "write failed");
			return;
		}
		srv->m.bytes_written += (uint64_t)w;
		c->last_progress = loop_now(srv->lp);
		size_t left = (size_t)w;
		c->qbytes -= left;
		while (left) {
			struct outq_entry *e = &c->q[c->qhead];
			size_t rest = e->c->len - e->off;
			if (left < rest) {
				e->off += (uint32_t)left;
				break;
			}
			left -= rest;
			if (e->id > 0)
				c->written_id = e->id;
			chunk_unref(e->c);
			c->qhead = (c->qhead + 1) % c->qcap;
			c->qlen--;
		}
		if ((size_t)w < total)
			break;
	}
	if (c->state == CONN_CLOSED)
		return;
	if (c->qlen == 0) {
		if (c->close_after_flush && c->state != CONN_LINGERING) {
			/* A stream's input was read and dropped all along, so
			 * there is nothing that could turn the close into a reset. */
			if (c->reader)
				conn_close(c, NULL);
			else
				start_linger(c);
			return;
		}
		if (c->reader)
			stream_on_drained(c);
	}
	if (c->state == CONN_READING && !c->close_after_flush) {
		/* Requests parked behind unwritten output can be parsed again. */
		if (c->rlen && c->qbytes < OUTPUT_PAUSE)
			c->reparse = true;
		/* The request clock restarts once the output is gone. */
		if (c->qlen == 0 && !c->in_handler)
			start_request_timer(c);
	}
	conn_update_events(c);
}

void conn_end_after_flush(struct conn *c)
{
	if (c->state == CONN_CLOSED || c->close_after_flush)
		return;
	c->close_after_flush = true;
	schedule_flush(c);
	loop_timer_start(c->srv->lp, &c->timer, (uint64_t)c->srv->cfg.stall_timeout_ms, on_timeout, c);
}

void conn_count_response(struct conn *c, int status)
{
	metrics_count_response(&c->srv->m, status);
}

void conn_respond(struct conn *c, int status, struct chunk *response, bool keep_alive)
{
	conn_count_response(c, status);
	conn_enqueue(c, response, 0);
	chunk_unref(response);
	c->pending = NULL;
	c->served = true;
	if (!keep_alive || c->srv->draining) {
		c->close_after_flush = true;
		c->state = CONN_WAITING;
		/* The response must be taken within stall_timeout. */
		loop_timer_start(c->srv->lp, &c->timer, (uint64_t)c->srv->cfg.stall_timeout_ms, on_timeout, c);
	} else {
		c->state = CONN_READING;
		c->reparse = c->rlen > 0;
		/* Inside the handler the request is still in the buffer; the
		 * timer starts once it is consumed (conn_process). */
		if (!c->in_handler)
			start_request_timer(c);
	}
	conn_update_events(c);
}

void conn_refuse(struct conn *c, int status, const char *message, const char *extra_headers)
{
	if (c->state == CONN_CLOSED || c->state == CONN_LINGERING)
		return;
	api_log_refusal(c, status, message);
	metrics_count_refusal(&c->srv->m, status, message);
	conn_respond(c, status, http_format_error(status, message, extra_headers, false), false);
}

static void consume(struct conn *c, size_t n)
{
	if (!c->rbuf)
		return; /* became a stream: the buffer is gone */
	memmove(c->rbuf, c->rbuf + n, c->rlen - n);
	c->rlen -= n;
}

static size_t read_cap(const struct conn *c)
{
	const struct config *cfg = &c->srv->cfg;
	return (size_t)(cfg->max_header_bytes + cfg->max_body) + 1;
}

/* Read what is there (up to a budget) into the request buffer. Returns 0,
 * or -1 when the connection was closed. */
static int fill(struct conn *c)
{
	size_t budget = READ_BUDGET, cap = read_cap(c);
	while (budget && !c->peer_eof) {
		if (c->rlen == c->rcap) {
			if (c->rcap >= cap)
				break;
			c->rcap = MIN(cap, c->rcap ? c->rcap * 2 : 4096);
			c->rbuf = xrealloc(c->rbuf, c->rcap);
		}
		size_t want = MIN(budget, c->rcap - c->rlen);
		ssize_t n = io_read(c, c->rbuf + c->rlen, want);
		if (n == -EINTR)
			continue;
		if (n == -EAGAIN)
			break;
		if (n < 0) {
			conn_close(c, n == -ECONNRESET ? NULL : "read failed");
			return -1;
		}
		if (n == 0) {
			c->peer_eof = true;
			break;
		}
		c->rlen += (size_t)n;
		budget -= (size_t)n;
	}
	return 0;
}

/* Input on a stream or a lingering connection is read and dropped. */
static void discard_input(struct conn *c)
{
	char buf[4096];
	for (int i = 0; i < 16; i++) {
		ssize_t n = io_read(c, buf, sizeof(buf));
		if (n == -EINTR)
			continue;
		if (n == -EAGAIN)
			return;
		if (n <= 0) {
			conn_close(c, NULL);
			return;
		}
	}
}

/* Remember "METHOD /path" of the request for log lines (control bytes
 * cannot occur: the parser refuses them). */
static void set_what(struct conn *c, const struct http_request *req)
{
	int pn = (int)MIN(req->path.n, 60);
	snprintf(c->what, sizeof(c->what), "%.*s %.*s%s", (int)MIN(req->method_name.n, 12), req->method_name.p, pn,
		 req->path.p, req->path.n > 60 ? "..." : "");
}

static void conn_process(struct conn *c)
{
	struct server *srv = c->srv;
	const struct config *cfg = &srv->cfg;
	struct http_limits lim = { (size_t)cfg->max_request_line, (size_t)cfg->max_header_bytes,
				   (size_t)cfg->max_headers };
	c->reparse = false;
	/* A client that sends requests but does not read the answers gets
	 * no more answers queued than OUTPUT_PAUSE: the rest of its requests
	 * wait in the buffer until the output drains (conn_flush). */
	while (c->state == CONN_READING && c->rlen > 0 && !c->close_after_flush && c->qbytes < OUTPUT_PAUSE) {
		struct http_request req;
		struct http_error err;
		int r = http_parse_request(c->rbuf, c->rlen, &lim, &req, &err);
		if (r < 0) {
			conn_refuse(c, err.status, err.message, NULL);
			return;
		}
		if (r == 0) {
			if (c->peer_eof)
				conn_close(c, NULL);
			return;
		}
		if (req.chunked) {
			conn_refuse(c, 411, "chunked request bodies are not accepted; send Content-Length", NULL);
			return;
		}
		if (req.content_length > cfg->max_body) {
			conn_refuse(c, 413, "request body larger than max_body", NULL);
			return;
		}
		size_t body = req.content_length > 0 ? (size_t)req.content_length : 0;
		if (c->rlen - (size_t)r < body) {
			if (c->peer_eof) {
				conn_close(c, NULL);
				return;
			}
			/* A client that asked to be told before sending the body
			 * (Expect: 100-continue) is told once, now that the head
			 * and its Content-Length have passed. */
			const struct http_header *ex = http_header_get(&req, "Expect");
			if (ex && !c->continued && c->rlen == (size_t)r && ex->value.n == 12 &&
			    strncasecmp(ex->value.p, "100-continue", 12) == 0 && req.minor_version == 1) {
				/* Only a request that will be taken is asked for its
				 * body: route and rights are checked first. */
				set_what(c, &req);
				if (!api_accepts_body(c, &req))
					return;
				static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
				struct chunk *ch = chunk_from(cont, sizeof(cont) - 1);
				conn_enqueue(c, ch, 0);
				chunk_unref(ch);
				c->continued = true;
			}
			return;
		}
		c->continued = false;
		srv->m.requests++;
		c->keep_alive = req.keep_alive && !srv->draining && !c->peer_eof;
		set_what(c, &req);
		c->in_handler = true;
		api_handle(c, &req, c->rbuf + r, body);
		c->in_handler = false;
		if (c->state == CONN_CLOSED)
			return;
		consume(c, (size_t)r + body);
		if (c->state == CONN_READING && !c->close_after_flush)
			start_request_timer(c);
	}
	if (c->state == CONN_READING && c->peer_eof && c->rlen == 0 && !c->qlen)
		conn_close(c, NULL);
}

static void on_io(void *arg, uint32_t events)
{
	struct conn *c = arg;
	if (c->tls) {
		events = tls_conn_on_io(c, events);
		if (!events || c->state == CONN_CLOSED)
			return;
	}
	if (events & EPOLLERR) {
		conn_close(c, NULL);
		return;
	}
	if (events & EPOLLOUT) {
		conn_flush(c);
		if (c->state == CONN_CLOSED)
			return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP)))
		return;
	switch (c->state) {
	case CONN_READING:
		if (fill(c) < 0)
			return;
		conn_process(c);
		if (c->state == CONN_READING && c->rlen > 0 && !loop_timer_active(&c->timer))
			start_request_timer(c);
		break;
	case CONN_STREAMING:
	case CONN_LINGERING:
		discard_input(c);
		break;
	default:
		break;
	}
	conn_update_events(c);
}

void conn_close(struct conn *c, const char *why)
{
	struct server *srv = c->srv;
	if (c->state == CONN_CLOSED)
		return;
	if (why)
		log_debug("closing connection from %s: %s", c->client, why);
	if (c->reader)
		stream_closed(c);
	if (c->pending)
		publish_cancel(c);
	c->state = CONN_CLOSED;
	loop_timer_stop(srv->lp, &c->timer);
	loop_unwatch(srv->lp, c->fd);
	if (c->tls)
		tls_conn_free(c);
	close(c->fd);
	c->fd = -1;
	release_queue(c);
	free(c->rbuf);
	c->rbuf = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	srv->nconns--;
	c->next = srv->graveyard;
	srv->graveyard = c;
	server_schedule_pass_end(srv);
}

void conn_pass_end(struct server *srv)
{
	struct conn *list = srv->flush_list;
	srv->flush_list = NULL;
	uint64_t t0 = list ? clock_mono_ns() : 0;
	while (list) {
		struct conn *c = list;
		list = c->flush_next;
		c->flush_scheduled = false;
		if (c->state == CONN_CLOSED)
			continue;
		conn_flush(c);
		if (c->state == CONN_READING && c->reparse) {
			conn_process(c);
			conn_update_events(c);
		}
		if (c->tls && c->state != CONN_CLOSED && (c->want & EPOLLIN) && tls_conn_pending(c))
			on_io(c, EPOLLIN);
	}
	if (t0)
		metrics_observe(&srv->m.flush_seconds, clock_mono_ns() - t0);
	/* Free what was closed, unless it went back on a flush list. */
	struct conn **pp = &srv->graveyard;
	while (*pp) {
		struct conn *c = *pp;
		if (c->flush_scheduled) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		free(c);
	}
}
