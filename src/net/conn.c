/* SPDX-License-Identifier: BSD-2-Clause */
/* conn.c: client connections: reading requests, queued output written
 * with writev once per loop pass, timeouts, and a deferred, lingering close.
 *
 * Output: every frame or response is a reference to a shared chunk in a
 * ring (outq.c); conn_enqueue only queues and puts the connection on the
 * pool's flush list, so a plain reader gets one writev per pass for
 * everything queued to it in that pass (a TLS one gets one SSL_write per
 * chunk, still in one pass). EPOLLOUT is requested only while bytes are
 * left over.
 *
 * Transport: every read, write and interest change goes through the
 * connection's transport table (transport.h), picked by whoever accepted
 * the socket; nothing here knows which one it is.
 *
 * Stream rounds: an event frame for a stream goes on the pool's stream
 * list instead, written in a "stream round" at a pass end. A round runs at
 * once when the last one ended long enough ago (an event after a quiet
 * spell leaves in the pass it came in); otherwise a timer holds the list
 * until then, so that while events keep coming each reader's frames gather
 * and leave in one writev. "Long enough" is STREAM_GAP_FACTOR times what the
 * last round took, at most STREAM_GAP_MS: a few readers are written to
 * almost at once, while rounds over thousands of readers, each a writev,
 * take at most about 1 / (1 + STREAM_GAP_FACTOR) of the loop's time however
 * fast events come. The system call, not the bytes, is most of a
 * delivery's cost (the receiver's side of loopback TCP runs inside it), so
 * frames per writev is what CPU per delivery follows. A stream whose queue
 * already holds STREAM_BATCH_BYTES (a catch-up page) is written at the pass
 * end as before, and one whose socket is full waits for EPOLLOUT, which
 * writes everything.
 *
 * Closing: after a refusal the response is flushed, the write side shut
 * down, and input drained for a moment before close, so the client reads
 * the response instead of a reset. The struct is freed at the end of the
 * pass, never inside a callback that may still use it. */
#include "net/conn.h"

#include "net/conn_private.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/log.h"
#include "net/send_batch.h"
#include "common/util.h"

#define IOV_BATCH 128
#define READ_BUDGET (64 * 1024)    /* bytes read per wakeup per connection */
#define READ_BUF_SIZE (16 * 1024)  /* the pool's lent request buffer */
#define OUTPUT_PAUSE (1024 * 1024) /* stop reading requests past this much queued output */
#define LINGER_MS 2000
#define STREAM_BATCH_BYTES 4096 /* a queue this full is a batch already */
/* A write of many small frames up to this size is copied into one buffer
 * first: the kernel's copy from many short iovecs cost far more (7% of the
 * server's time at 1,000 events/s to 1,000 readers) than one memcpy of
 * frames still in the cache. */
#define GATHER_BYTES 8192
/* A drained output ring of at most this many entries is released: most
 * readers are idle most of the time, and the next frame allocates one
 * again (one malloc beside a writev). A larger one means a busy reader,
 * whose ring would only be grown again entry by entry: it is kept. */
#define RING_RELEASE_CAP 4
static void on_io(void *arg, uint32_t events);
static void conn_process(struct conn *c);
void take_record(struct conn *c, const struct http_request *req, const char *body, size_t body_len);
static void schedule_flush(struct conn *c);

static uint32_t wanted_events(const struct conn *c)
{
	uint32_t ev = 0;
	switch (c->state) {
	case CONN_READING:
		/* After the client's EOF, input would only report EOF again. */
		if (c->out.bytes < OUTPUT_PAUSE && !c->close_after_flush && !c->peer_eof)
			ev |= EPOLLIN | EPOLLRDHUP;
		break;
	case CONN_STREAMING:
	case CONN_LINGERING:
		ev |= EPOLLIN | EPOLLRDHUP;
		break;
	case CONN_WAITING: /* input stays paused; a hang-up is watched after conn_wait_hangup */
		ev |= c->wait_hangup ? EPOLLRDHUP : 0;
		break;
	default:
		break;
	}
	/* Output the pass's flush has not tried yet needs no EPOLLOUT: the
	 * flush writes it and arms EPOLLOUT only for what the socket did not
	 * take. Arming it here would cost a stream two epoll_ctl calls per
	 * open (armed with its head, disarmed once that is written). */
	if (c->out.len && !c->flush_scheduled)
		ev |= EPOLLOUT;
	return transport_events(&c->tp, ev);
}

void conn_update_events(struct conn *c)
{
	if (c->state == CONN_CLOSED)
		return;
	if (c->state == CONN_WAITING && c->flush_scheduled)
		return; /* the pass end's flush does it (conn_wait) */
	uint32_t ev = wanted_events(c);
	if (ev != c->want) {
		c->want = ev;
		loop_modify(c->pool->lp, c->fd, ev);
	}
	/* Input a transport already holds (decrypted by TLS) will not wake
	 * epoll: read it at the end of the pass (pass_end). */
	if ((ev & EPOLLIN) && transport_input_pending(&c->tp))
		schedule_flush(c);
}

void start_request_timer(struct conn *c);
static void on_timeout(void *arg);

/* Output is waiting for the client: the connection lives while the client
 * takes bytes, and closes once it has taken none for stall_timeout. */
static void send_stalled(struct conn *c)
{
	uint64_t now = loop_now(c->pool->lp), limit = (uint64_t)c->pool->cfg->stall_timeout_ms;
	if (now - c->last_progress >= limit) {
		log_info("closing connection from %s: no bytes of its %zu queued accepted for %llu ms", conn_client(c),
			 c->out.bytes, (unsigned long long)limit);
		conn_close(c, NULL);
		return;
	}
	loop_timer_start(c->pool->lp, &c->timer, limit - (now - c->last_progress), on_timeout, c);
}

static int fill(struct conn *c);
static void return_read_buffer(struct conn *c);
static void drop_read_buffer(struct conn *c);

/* header_timeout is up for c, but its request may be whole in the socket:
 * a loop pass takes at most 128 wake-ups and runs the due timers after
 * them, so under a flood of wake-ups (accepts, readers' sockets taking
 * bytes again) a connection's may wait in epoll's ready list behind the
 * pass in which its timer comes due. The client has sent its request in
 * time; herald has not looked. Read what is there first, and only a
 * request that is still not whole is late. Returns whether c was dealt
 * with (its request answered, refused for what it is, handed on, or the
 * connection closed); false leaves c as it was for the 408. */
static bool read_before_refusing(struct conn *c)
{
	if (c->fd < 0 || c->peer_eof)
		return false;
	uint64_t requests = c->pool->m->requests;
	size_t queued = c->out.len;
	if (fill(c) < 0)
		return true;
	conn_process(c);
	return_read_buffer(c);
	if (c->state == CONN_CLOSED)
		return true;
	if (!c->rlen)
		drop_read_buffer(c);
	bool dealt = c->state != CONN_READING || c->pool->m->requests != requests || c->out.len != queued ||
		     c->close_after_flush;
	if (dealt)
		conn_update_events(c);
	return dealt;
}

static void on_timeout(void *arg)
{
	struct conn *c = arg;
	const char *not_ready = transport_not_ready(&c->tp);
	if (not_ready) {
		conn_close(c, not_ready);
	} else if (c->state == CONN_LINGERING) {
		conn_close(c, NULL);
	} else if (c->out.len && (c->state != CONN_STREAMING || c->close_after_flush)) {
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
		if (read_before_refusing(c))
			return;
		conn_refuse(c, 408, "header_timeout",
			    c->rlen ? "request not complete within header_timeout" : "no request within header_timeout",
			    NULL);
	}
}

void start_request_timer(struct conn *c)
{
	const struct config *cfg = c->pool->cfg;
	if (c->out.len) {
		/* Output first: the request clock starts once it is written. */
		loop_timer_start(c->pool->lp, &c->timer, (uint64_t)cfg->stall_timeout_ms, on_timeout, c);
		return;
	}
	uint64_t ms = (uint64_t)(c->served && c->rlen == 0 ? cfg->keepalive_timeout_ms : cfg->header_timeout_ms);
	loop_timer_start(c->pool->lp, &c->timer, ms, on_timeout, c);
}

void pass_end(void *arg);


struct conn *conn_new(struct conn_pool *p, int fd, const struct sockaddr *sa, socklen_t salen,
		      const struct transport_ops *ops, void *ctx)
{
	char peer[64];
	bool peer_loopback = false;
	bool peer_unix = sa->sa_family == AF_UNIX || salen <= sizeof(sa_family_t);
	addr_peer_text(sa, salen, peer, sizeof(peer), &peer_loopback);
	if (peer_unix) {
		snprintf(peer, sizeof(peer), "unix");
		peer_loopback = true;
	}
	struct conn *c = conn_alloc(p, peer);
	c->fd = fd;
	c->tp.ops = ops;
	c->tp.fd = fd;
	c->peer_unix = peer_unix;
	c->peer_loopback = peer_loopback;
	if (ops->open && ops->open(&c->tp, ctx, c->peer) < 0) {
		close(fd);
		conn_free_record(c);
		return NULL;
	}
	c->want = transport_events(&c->tp, EPOLLIN | EPOLLRDHUP);
	int r = loop_watch(p->lp, fd, c->want, on_io, c);
	if (r < 0) {
		log_warn("epoll_ctl for a new connection: %s", strerror(-r));
		transport_free(&c->tp);
		close(fd);
		conn_free_record(c);
		return NULL;
	}
	pool_add(p, c);
	/* A client writes its request as soon as its connect completes, which
	 * in a burst of connects is long before we accept it: read it now
	 * rather than after a trip through epoll, where a connection would
	 * wait its turn among 128 events a pass, behind every pass's fan-out,
	 * and a storm of reconnects could outwait header_timeout (408) in
	 * the queue. Nothing there yet costs one read that finds EAGAIN.
	 * A transport with a handshake starts with its own wake-ups. */
	if (ops->ready_at_accept)
		on_io(c, EPOLLIN);
	return c;
}

void conn_wake(struct conn *c, uint32_t events)
{
	if (c->state != CONN_CLOSED)
		on_io(c, events);
}

static void schedule_pass_end(struct conn_pool *p)
{
	if (!p->pass_end_scheduled) {
		p->pass_end_scheduled = true;
		loop_defer(p->lp, pass_end, p);
	}
}

static void schedule_flush(struct conn *c)
{
	if (c->flush_scheduled)
		return;
	c->flush_scheduled = true;
	c->flush_next = c->pool->flush_list;
	c->pool->flush_list = c;
	schedule_pass_end(c->pool);
}

/* Hold c's event frames for the next stream round. */
static void schedule_stream(struct conn *c)
{
	if (c->stream_scheduled || c->flush_scheduled)
		return;
	/* A full socket: EPOLLOUT will write the whole queue. (Where the
	 * transport adjusts the interest, EPOLLOUT may be its own.) */
	if (transport_events_exact(&c->tp) && (c->want & EPOLLOUT))
		return;
	c->stream_scheduled = true;
	c->stream_next = c->pool->stream_list;
	c->pool->stream_list = c;
	schedule_pass_end(c->pool);
}

static void enqueue(struct conn *c, struct chunk *ch, int64_t id, bool droppable)
{
	if (c->state == CONN_CLOSED)
		return;
	if (c->out.len == 0)
		c->last_progress = loop_now(c->pool->lp);
	outq_push(&c->out, ch, id, droppable);
	if (droppable && c->state == CONN_STREAMING && c->out.bytes < STREAM_BATCH_BYTES)
		schedule_stream(c);
	else
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
	/* With TLS, a record of the head may be encrypted and waiting for the
	 * socket: those bytes are committed even if none was written. */
	return outq_drop(&c->out, transport_output_pending(&c->tp));
}

void conn_set_resume_point(struct conn *c, int64_t id)
{
	c->out.written_id = id;
}

/* Shut down our side and drain input for a moment before closing. */
static void start_linger(struct conn *c)
{
	transport_shutdown(&c->tp);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_WR);
	c->state = CONN_LINGERING;
	loop_timer_start(c->pool->lp, &c->timer, LINGER_MS, on_timeout, c);
	conn_update_events(c);
}

/* Copy the n pieces of iov into buf (room for all of them) and make iov
 * one piece pointing there. Returns 1. */
static int gather_iov(struct iovec *iov, int n, char *buf)
{
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
		at += iov[i].iov_len;
	}
	iov[0] = (struct iovec){ buf, at };
	return 1;
}

/* The socket took w bytes of c's queue. */
static void took(struct conn *c, size_t w)
{
	struct conn_pool *p = c->pool;
	p->m->bytes_written += w;
	c->last_progress = loop_now(p->lp);
	outq_consume(&c->out, w);
}

static void close_after_write_error(struct conn *c, ssize_t w)
{
	conn_close(c, w == -EPIPE || w == -ECONNRESET ? NULL : "write failed");
}

/* Take the result of one write of total bytes from c's queue: w bytes
 * taken, or -errno. Returns whether the socket may take more now. */
static bool take_write(struct conn *c, ssize_t w, size_t total)
{
	c->pool->writes++;
	if (w == -EAGAIN)
		return false;
	if (w < 0) {
		close_after_write_error(c, w);
		return false;
	}
	took(c, (size_t)w);
	return (size_t)w == total;
}

/* After c's writes: the close it waited for, the drained hook, its read
 * side and epoll interest. */
static void flush_done(struct conn *c)
{
	if (c->state == CONN_CLOSED)
		return;
	if (c->out.len == 0) {
		if (c->close_after_flush && c->state != CONN_LINGERING) {
			/* A stream's input was read and dropped all along, so
			 * there is nothing that could turn the close into a reset. */
			if (c->state == CONN_STREAMING)
				conn_close(c, NULL);
			else
				start_linger(c);
			return;
		}
		if (c->user && c->user->drained)
			c->user->drained(c, c->user_data);
		if (c->state == CONN_CLOSED)
			return;
		if (c->out.len == 0 && c->out.cap <= RING_RELEASE_CAP)
			outq_free(&c->out); /* keeps the resume point */
	}
	if (c->state == CONN_READING && !c->close_after_flush) {
		/* Requests parked behind unwritten output can be parsed again. */
		if (c->rlen && c->out.bytes < OUTPUT_PAUSE)
			c->reparse = true;
		/* The request clock restarts once the output is gone. */
		if (c->out.len == 0 && !c->in_handler)
			start_request_timer(c);
	}
	conn_update_events(c);
}

/* Write what the socket takes now; arm EPOLLOUT for the rest. */
static void conn_flush(struct conn *c)
{
	while (c->out.len && c->state != CONN_CLOSED) {
		struct iovec iov[IOV_BATCH];
		size_t total;
		int n = outq_iov(&c->out, iov, IOV_BATCH, &total);
		char gather[GATHER_BYTES];
		if (n > 1 && total <= sizeof(gather))
			n = gather_iov(iov, n, gather);
		ssize_t w = transport_writev(&c->tp, iov, n);
		if (w == -EINTR)
			continue;
		if (!take_write(c, w, total))
			break;
	}
	flush_done(c);
}

/* The gathered connections give up what their transports took, once the
 * gatherer's sends have run (and what the sockets did not take is the
 * gatherer's own copy). */
static void take_gathered(struct conn_pool *p)
{
	for (size_t i = 0; i < p->ngathered; i++) {
		struct gathered *g = &p->gathered[i];
		p->writes++;
		if (g->w > 0 && g->c->state != CONN_CLOSED)
			took(g->c, (size_t)g->w);
	}
}

/* Then each acts on it, as after a write of its own. */
static void act_gathered(struct conn_pool *p)
{
	size_t n = p->ngathered;
	p->ngathered = 0;
	for (size_t i = 0; i < n; i++) {
		struct gathered g = p->gathered[i];
		struct conn *c = g.c;
		c->stream_scheduled = false;
		if (c->state == CONN_CLOSED)
			continue;
		if (g.w == -ENOTSUP) {
			if (c->out.len)
				conn_flush(c);
		} else if (g.w < 0 && g.w != -EAGAIN) {
			close_after_write_error(c, g.w);
		} else if (g.w >= 0 && (size_t)g.w == g.total && c->out.len) {
			conn_flush(c); /* more than one gather's worth: the rest now */
		} else {
			flush_done(c);
		}
	}
}

/* Run the pool's batch of sends and take their results in two steps:
 * first every connection's queue gives up what its socket took, and only
 * then does any of them act on it (close, the drained hook, what is left),
 * since acting may queue to or drop from another connection of the same
 * run, whose queue must already be in step with its socket. Gathered sends
 * go to the gatherer before any queue gives up a byte: what their sockets
 * did not take points into those queues. */
static void run_batch(struct conn_pool *p)
{
	unsigned n = send_batch_run(p->batch);
	for (unsigned i = 0; i < n; i++) {
		ssize_t w;
		size_t total;
		if (!send_batch_gathered(p->batch, i))
			continue;
		void *tag = send_batch_result(p->batch, i, &w, &total);
		p->gatherer.sent(p->gatherer.arg, tag, w);
	}
	for (unsigned i = 0; i < n; i++) {
		ssize_t w;
		size_t total;
		if (send_batch_gathered(p->batch, i))
			continue;
		struct conn *c = send_batch_result(p->batch, i, &w, &total);
		p->writes++;
		if (c->state == CONN_CLOSED)
			continue;
		/* Sealed records: the transport holds what the socket did not
		 * take, and says what of the plaintext went. */
		if (transport_seals(&c->tp))
			w = transport_sealed(&c->tp, w);
		if (w > 0)
			took(c, (size_t)w);
	}
	take_gathered(p);
	for (unsigned i = 0; i < n; i++) {
		ssize_t w;
		size_t total;
		if (send_batch_gathered(p->batch, i))
			continue;
		struct conn *c = send_batch_result(p->batch, i, &w, &total);
		if (c->state == CONN_CLOSED)
			continue;
		if (w < 0 && w != -EAGAIN)
			close_after_write_error(c, w);
		else if (w >= 0 && (size_t)w == total && c->out.len)
			conn_flush(c); /* more than one send's worth: the rest now */
		else
			flush_done(c);
	}
	act_gathered(p);
}

/* The round's connections whose transport gathers (list, linked by
 * stream_next, still scheduled): each one's queue handed to its transport,
 * then the gatherer's sends queued in the batch with what the round left
 * there (or written, without one), run, and the results taken as a batch's
 * are. Between the first gather and the results nothing runs a hook, so
 * every queue stays as its transport saw it. */
static void gather_round(struct conn_pool *p, struct conn *list)
{
	while (list) {
		struct conn *c = list;
		list = c->stream_next;
		/* A batch run during the walk may have set off hooks that
		 * closed it or emptied its queue. */
		if (c->state == CONN_CLOSED || !c->out.len) {
			c->stream_scheduled = false;
			continue;
		}
		if (p->ngathered == p->gathered_cap) {
			p->gathered_cap = p->gathered_cap ? 2 * p->gathered_cap : 64;
			p->gathered = xrealloc(p->gathered, p->gathered_cap * sizeof(*p->gathered));
		}
		struct gathered *g = &p->gathered[p->ngathered++];
		*g = (struct gathered){ .c = c };
		struct iovec iov[IOV_BATCH];
		int n = outq_iov(&c->out, iov, IOV_BATCH, &g->total);
		g->w = transport_gather(&c->tp, iov, n);
	}
	p->gatherer.send(p->gatherer.arg, p->batch);
	if (p->batch) {
		run_batch(p);
	} else {
		take_gathered(p);
		act_gathered(p);
	}
}

/* Queue a send of records c's transport seals from the first bytes of its
 * queue (iov, n pieces, total bytes; at most GATHER_BYTES of them, so that
 * many readers share the batch's buffer); where it cannot, run the batch
 * and write c now. Records sealed and not queued are held by the
 * transport and go first on that write. */
static void batch_seal(struct conn_pool *p, struct conn *c, const struct iovec *iov, int n, size_t total)
{
	size_t plain = total < GATHER_BYTES ? total : GATHER_BYTES, wire = 0;
	size_t room = transport_seal_room(&c->tp, plain);
	void *buf = room && send_batch_has_room(p->batch, room) ? send_batch_buffer(p->batch, room) : NULL;
	if (buf && transport_seal(&c->tp, iov, n, plain, buf, &wire) > 0) {
		struct iovec w = { buf, wire };
		if (send_batch_add(p->batch, c->tp.fd, &w, 1, wire, c) == SEND_BATCH_QUEUED) {
			p->m->batched_sends++;
			p->m->batched_sealed_sends++;
			return;
		}
		transport_sealed(&c->tp, -EAGAIN);
	}
	run_batch(p);
	if (c->state != CONN_CLOSED && c->out.len)
		conn_flush(c);
}

/* Queue c's output (a plain socket's) as one send of the pool's batch, or
 * write it now where there is no batch or it cannot carry it. A write of its own may set
 * off hooks that drop another reader's queue, which must not happen while
 * the batch holds sends of bytes from queues: the batch runs first. */
static void batch_flush(struct conn_pool *p, struct conn *c)
{
	if (!p->batch) {
		conn_flush(c);
		return;
	}
	bool seal = !transport_plain_send(&c->tp);
	if (!send_batch_has_room(p->batch, seal ? transport_seal_room(&c->tp, GATHER_BYTES) : GATHER_BYTES)) {
		run_batch(p);
		/* What that run set off may have written or closed c. */
		if (c->state == CONN_CLOSED || !c->out.len)
			return;
	}
	struct iovec iov[IOV_BATCH];
	size_t total;
	int n = outq_iov(&c->out, iov, IOV_BATCH, &total);
	if (seal) {
		batch_seal(p, c, iov, n, total);
		return;
	}
	if (n > 1 && total <= GATHER_BYTES)
		n = gather_iov(iov, n, send_batch_buffer(p->batch, total));
	if (send_batch_add(p->batch, c->tp.fd, iov, n, total, c) == SEND_BATCH_QUEUED) {
		p->m->batched_sends++;
		return;
	}
	run_batch(p);
	if (c->state != CONN_CLOSED && c->out.len)
		conn_flush(c);
}

void conn_end_after_flush(struct conn *c)
{
	if (c->state == CONN_CLOSED || c->close_after_flush)
		return;
	c->close_after_flush = true;
	schedule_flush(c);
	loop_timer_start(c->pool->lp, &c->timer, (uint64_t)c->pool->cfg->stall_timeout_ms, on_timeout, c);
}

static size_t read_cap(const struct conn *c)
{
	const struct config *cfg = c->pool->cfg;
	return (size_t)(cfg->max_header_bytes + cfg->max_body) + 1;
}

/* A request that arrives whole (nearly every one: a stream's GET, a small
 * publish) is read into one buffer the pool lends for the length of a
 * wake-up, and a connection keeps a buffer of its own only while a request
 * is incomplete or a pipelined one waits. A buffer per connection, taken at
 * accept and freed once the request had become a stream, left the heap
 * with a hole per stream among the stream's own small blocks, which a
 * burst of accepts never filled again: about 700 bytes per reader. */
static void take_read_buffer(struct conn *c)
{
	struct conn_pool *p = c->pool;
	if (c->rbuf || p->read_buf_lent)
		return;
	if (!p->read_buf)
		p->read_buf = xmalloc(READ_BUF_SIZE);
	c->rbuf = p->read_buf;
	c->rcap = MIN((size_t)READ_BUF_SIZE, read_cap(c));
	c->rbuf_lent = p->read_buf_lent = true;
}

/* Give the lent buffer back, keeping what is left of it (an incomplete or
 * pipelined request) in a buffer of the connection's own. */
static void return_read_buffer(struct conn *c)
{
	if (!c->rbuf_lent)
		return;
	char *lent = c->rbuf;
	c->rbuf_lent = c->pool->read_buf_lent = false;
	c->rbuf = NULL;
	c->rcap = 0;
	if (c->rlen && c->state != CONN_CLOSED) {
		c->rcap = MAX(c->rlen, (size_t)4096);
		c->rbuf = xmalloc(c->rcap);
		memcpy(c->rbuf, lent, c->rlen);
	} else {
		c->rlen = 0;
	}
}

static void drop_read_buffer(struct conn *c)
{
	c->rlen = 0;
	if (c->rbuf_lent)
		return_read_buffer(c);
	free(c->rbuf);
	c->rbuf = NULL;
	c->rcap = 0;
}

void conn_wait(struct conn *c)
{
	c->state = CONN_WAITING;
	/* Input stops at the pass end (the flush), not now: an answer that
	 * comes within the pass (a publish the database commits in it) finds
	 * the interest as it was, and no epoll_ctl call stops and restarts
	 * input around it. */
	schedule_flush(c);
}

void conn_become_stream(struct conn *c)
{
	c->state = CONN_STREAMING;
	drop_read_buffer(c);
	/* A stream's response has begun, so it is never refused, and it
	 * reads no other request: no log line names its request again. */
	free(c->what);
	c->what = NULL;
	loop_timer_stop(c->pool->lp, &c->timer);
	transport_streaming(&c->tp);
	conn_update_events(c);
}

/* Queue h and body in the transport's form: one chunk of HTTP/1.1 text,
 * or the head handed to the transport and the body queued alone. A HEAD
 * request gets the head alone, in this one place (RFC 9110 9.3.2). */
static void queue_head(struct conn *c, const struct http_head *h, const char *body, size_t len)
{
	if (c->state == CONN_CLOSED)
		return;
	if (c->head_request)
		len = 0;
	struct chunk *ch = NULL;
	if (!transport_takes_heads(&c->tp))
		ch = http_head_text(h, body, len);
	else if (transport_head(&c->tp, h) == 0 && len)
		ch = chunk_from(body, len);
	if (ch) {
		enqueue(c, ch, 0, false);
		chunk_unref(ch);
	} else {
		schedule_flush(c); /* the head alone: whatever waits on the flush still runs */
	}
}

void conn_send_head(struct conn *c, const struct http_head *h, const char *body, size_t len)
{
	queue_head(c, h, body, len);
}

void conn_send_head_made(struct conn *c, const struct http_head *h, struct chunk *text, const char *body, size_t len)
{
	if (c->state == CONN_CLOSED)
		return;
	if (c->head_request || transport_takes_heads(&c->tp))
		queue_head(c, h, body, len);
	else
		enqueue(c, text, 0, false);
}

void conn_respond(struct conn *c, const struct http_head *h, const char *body, size_t len)
{
	conn_count_response(c, h->status);
	queue_head(c, h, body, len);
	c->head_request = false; /* answered: the next request says its own method */
	c->wait_hangup = false;
	c->user = NULL;          /* what a handler attached belonged to this request */
	c->user_data = NULL;
	c->served = true;
	if (!h->keep_alive || c->pool->draining) {
		c->close_after_flush = true;
		c->state = CONN_WAITING;
		/* The response must be taken within stall_timeout. */
		loop_timer_start(c->pool->lp, &c->timer, (uint64_t)c->pool->cfg->stall_timeout_ms, on_timeout, c);
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

static void consume(struct conn *c, size_t n)
{
	if (!c->rbuf)
		return; /* became a stream: the buffer is gone */
	memmove(c->rbuf, c->rbuf + n, c->rlen - n);
	c->rlen -= n;
}

/* Read what is there (up to a budget) into the request buffer. Returns 0,
 * or -1 when the connection was closed. */
static int fill(struct conn *c)
{
	size_t budget = READ_BUDGET, cap = read_cap(c);
	take_read_buffer(c);
	while (budget && !c->peer_eof) {
		if (c->rlen == c->rcap) {
			if (c->rcap >= cap)
				break;
			if (c->rbuf_lent) /* a request larger than the lent buffer: one of its own */
				return_read_buffer(c);
			c->rcap = MIN(cap, c->rcap ? c->rcap * 2 : 4096);
			c->rbuf = xrealloc(c->rbuf, c->rcap);
		}
		size_t want = MIN(budget, c->rcap - c->rlen);
		ssize_t n = transport_read(&c->tp, c->rbuf + c->rlen, want);
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
		/* A short read emptied the socket: another would only find
		 * EAGAIN, one system call per request for nothing. Epoll is
		 * level-triggered, so what arrives later wakes us again; what a
		 * transport holds inside (TLS) is read on. */
		if ((size_t)n < want && !transport_input_pending(&c->tp))
			break;
	}
	return 0;
}

/* Input on a stream or a lingering connection is read and dropped. */
static void discard_input(struct conn *c)
{
	char buf[4096];
	for (int i = 0; i < 16; i++) {
		ssize_t n = transport_read(&c->tp, buf, sizeof(buf));
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

/* The first bytes of the connection are HTTP/2's preface: the parser
 * refuses its request line, `PRI * HTTP/2.0`, as soon as it is whole. */
static bool is_h2_preface(const struct conn *c)
{
	static const char preface[] = "PRI * HTTP/2.0\r\n";
	return !c->served && c->rlen >= sizeof(preface) - 1 && memcmp(c->rbuf, preface, sizeof(preface) - 1) == 0;
}

/* Hand the socket, its transport and the bytes read to the pool's
 * takeover, and close what is left of c without touching them. Returns
 * false when it was not taken (HTTP/2 is off): c is as it was. */
static bool take_over(struct conn *c)
{
	struct conn_pool *p = c->pool;
	int fd = c->fd;
	loop_unwatch(p->lp, fd);
	if (!p->takeover.take(p->takeover.arg, c, fd, &c->tp, c->rbuf, c->rlen)) {
		c->want = 0; /* watched afresh by the next update */
		loop_watch(p->lp, fd, 0, on_io, c);
		return false;
	}
	c->fd = -1;
	c->tp.state = NULL;
	c->rlen = 0;
	conn_close(c, NULL);
	return true;
}

/* Hand a whole request (head and body) to the pool's request hook. */
static void serve(struct conn *c, const struct http_request *req, const char *body, size_t body_len)
{
	struct conn_pool *p = c->pool;
	c->continued = false;
	p->m->requests++;
	c->keep_alive = req->keep_alive && !p->draining && !c->peer_eof;
	c->in_handler = true;
	loop_label(p->lp, conn_what(c), conn_client(c));
	p->hooks.request(p->hooks.owner, c, req, body, body_len);
	c->in_handler = false;
}

static void conn_process(struct conn *c)
{
	struct conn_pool *p = c->pool;
	const struct config *cfg = p->cfg;
	struct http_limits lim = conn_head_limits(cfg);
	c->reparse = false;
	/* A client that sends requests but does not read the answers gets
	 * no more answers queued than OUTPUT_PAUSE: the rest of its requests
	 * wait in the buffer until the output drains (conn_flush). */
	while (c->state == CONN_READING && c->rlen > 0 && !c->close_after_flush && c->out.bytes < OUTPUT_PAUSE) {
		struct http_request req;
		struct http_error err;
		int r = http_parse_request(c->rbuf, c->rlen, &lim, &req, &err);
		conn_set_what(c, &req);
		if (r < 0) {
			if (is_h2_preface(c) && p->takeover.take && take_over(c))
				return;
			conn_refuse(c, err.status, http_error_cause(err.status), err.message, NULL);
			return;
		}
		if (r == 0) {
			if (c->peer_eof)
				conn_close(c, NULL);
			return;
		}
		if (conn_refuse_body(c, &req))
			return;
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
				if (!p->hooks.expect_continue(p->hooks.owner, c, &req))
					return;
				struct http_head cont;
				http_head_init(&cont, 100);
				struct chunk *ch = http_head_text(&cont, NULL, 0);
				conn_enqueue(c, ch, 0);
				chunk_unref(ch);
				c->continued = true;
			}
			return;
		}
		serve(c, &req, c->rbuf + r, body);
		if (c->state == CONN_CLOSED)
			return;
		consume(c, (size_t)r + body);
		if (c->state == CONN_READING && !c->close_after_flush)
			start_request_timer(c);
	}
	if (c->state == CONN_READING && c->peer_eof && c->rlen == 0 && !c->out.len)
		conn_close(c, NULL);
}

/* A request that came as a record (an HTTP/2 stream's): judged by the
 * limits a parsed head is held to, with the same refusals, and served
 * with its body, which is whole. */
void take_record(struct conn *c, const struct http_request *req, const char *body, size_t body_len)
{
	struct http_limits lim = conn_head_limits(c->pool->cfg);
	struct http_error err;
	conn_set_what(c, req);
	if (http_request_check(req, &lim, &err) < 0) {
		conn_refuse(c, err.status, http_error_cause(err.status), err.message, NULL);
		return;
	}
	if (conn_refuse_body(c, req))
		return;
	serve(c, req, body, body_len);
	if (c->state == CONN_READING && !c->close_after_flush)
		start_request_timer(c);
}

static void on_io(void *arg, uint32_t events)
{
	struct conn *c = arg;
	char why[320];
	loop_label(c->pool->lp, c->state == CONN_STREAMING ? "a stream's socket" : "reading a request", c->peer);
	if (transport_on_io(&c->tp, &events, why, sizeof(why)) < 0) {
		conn_close(c, why);
		return;
	}
	if (!events) {
		/* A handshake goes on: its own interest. */
		conn_update_events(c);
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
		if (fill(c) < 0) {
			return_read_buffer(c);
			return;
		}
		conn_process(c);
		return_read_buffer(c);
		if (c->state == CONN_CLOSED)
			return;
		if (!c->rlen) /* nothing pending: back to the lent buffer */
			drop_read_buffer(c);
		if (c->state == CONN_READING && c->rlen > 0 && !loop_timer_active(&c->timer))
			start_request_timer(c);
		break;
	case CONN_STREAMING:
	case CONN_LINGERING:
		discard_input(c);
		break;
	case CONN_WAITING: /* only a hang-up wakes it, and only after conn_wait_hangup */
		if (c->wait_hangup) {
			conn_close(c, "the client hung up while its request waited");
			return;
		}
		break;
	default:
		break;
	}
	conn_update_events(c);
}

void conn_close(struct conn *c, const char *why)
{
	struct conn_pool *p = c->pool;
	if (c->state == CONN_CLOSED)
		return;
	if (why)
		log_debug("closing connection from %s: %s", conn_client(c), why);
	c->state = CONN_CLOSED;
	const struct conn_user *u = c->user;
	c->user = NULL;
	if (u && u->closed)
		u->closed(c, c->user_data);
	c->user_data = NULL;
	loop_timer_stop(p->lp, &c->timer);
	if (c->fd >= 0)
		loop_unwatch(p->lp, c->fd);
	transport_free(&c->tp);
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	outq_free(&c->out);
	drop_read_buffer(c);
	list_unlink(&p->all, &c->link);
	p->n--;
	list_push(&p->graveyard, &c->link);
	schedule_pass_end(p);
}

static void frame_round_due(void *arg)
{
	struct conn_pool *p = arg;
	p->frame_round_due = true;
	schedule_pass_end(p);
}

/* Write the streams on the stream list, when their round is due; else make
 * sure the timer will bring it. */
static void frame_round(struct conn_pool *p)
{
	uint64_t now = clock_mono_ns(), gap = p->stream_gap_ms * 1000000;
	if (p->stream_round_ns * p->stream_gap_factor < gap)
		gap = p->stream_round_ns * p->stream_gap_factor;
	if (!p->frame_round_due && now - p->stream_round_end_ns < gap) {
		if (!loop_timer_active(&p->stream_timer)) {
			uint64_t wait_ms = (p->stream_round_end_ns + gap - now + 999999) / 1000000;
			loop_timer_start(p->lp, &p->stream_timer, wait_ms, frame_round_due, p);
		}
		return;
	}
	p->frame_round_due = false;
	loop_timer_stop(p->lp, &p->stream_timer);
	struct conn *list = p->stream_list;
	p->stream_list = NULL;
	p->stream_rounds++;
	struct conn *later = NULL;    /* written one by one after the batch's run */
	struct conn *gathered = NULL; /* gathered into their transports' sends */
	while (list) {
		struct conn *c = list;
		list = c->stream_next;
		if (c->state == CONN_CLOSED || !c->out.len) {
			c->stream_scheduled = false;
		} else if (p->gatherer.send && transport_gathers(&c->tp)) {
			/* Gathered once the batch holds every plain send but
			 * the last run's: nothing may act on a connection
			 * between its gather and its result. */
			c->stream_next = gathered;
			gathered = c;
		} else if (p->batch && !transport_plain_send(&c->tp) && !transport_seal_room(&c->tp, c->out.bytes)) {
			/* Neither a plain send nor records sealed for the batch
			 * (a TLS session not parked). Its
			 * write may set off hooks that drop another reader's
			 * queue (see batch_flush): after the run. It stays
			 * scheduled meanwhile, so nothing links it elsewhere. */
			c->stream_next = later;
			later = c;
		} else {
			c->stream_scheduled = false;
			batch_flush(p, c);
		}
	}
	if (gathered)
		gather_round(p, gathered);
	else if (p->batch)
		run_batch(p);
	while (later) {
		struct conn *c = later;
		later = c->stream_next;
		c->stream_scheduled = false;
		if (c->state != CONN_CLOSED && c->out.len)
			conn_flush(c);
	}
	p->stream_round_end_ns = clock_mono_ns();
	p->stream_round_ns = p->stream_round_end_ns - now;
}

/* The streams of a pass's flush list (linked by flush_next, still
 * scheduled, plain sockets): their output, a new stream's head and opening
 * frame above all (a burst of opens has a dozen in a pass), queued as
 * sends of the pool's batch and run in one submission, as a stream round's
 * are; one send(2) each cost a system call's entry and exit every time.
 * Nothing runs a hook between the first queued send and the run; a stream
 * whose queue emptied meanwhile is flushed after it. */
static void flush_streams(struct conn_pool *p, struct conn *list)
{
	struct conn *later = NULL;
	while (list) {
		struct conn *c = list;
		list = c->flush_next;
		if (c->state == CONN_CLOSED) {
			c->flush_scheduled = false;
		} else if (!c->out.len) {
			c->flush_next = later;
			later = c;
		} else {
			c->flush_scheduled = false;
			batch_flush(p, c);
		}
	}
	run_batch(p);
	while (later) {
		struct conn *c = later;
		later = c->flush_next;
		c->flush_scheduled = false;
		if (c->state != CONN_CLOSED)
			conn_flush(c);
	}
}

/* The end of a loop pass (deferred work): one flush for every connection
 * queued to, the stream round when due, requests parked behind output
 * parsed again, and the free of what was closed. */
void pass_end(void *arg)
{
	struct conn_pool *p = arg;
	p->pass_end_scheduled = false;
	loop_label(p->lp, "writing to connections (flushes and the stream round)", NULL);
	struct conn *list = p->flush_list;
	p->flush_list = NULL;
	uint64_t t0 = list || p->stream_list ? clock_mono_ns() : 0;
	struct conn *streams = NULL; /* plain streams' output, for the batch */
	while (list) {
		struct conn *c = list;
		list = c->flush_next;
		if (c->state == CONN_CLOSED) {
			c->flush_scheduled = false;
			continue;
		}
		if (p->batch && c->state == CONN_STREAMING && c->out.len && transport_plain_send(&c->tp)) {
			/* Still scheduled: what is queued to it meanwhile goes
			 * with it, and a close leaves it on the list. */
			c->flush_next = streams;
			streams = c;
			continue;
		}
		c->flush_scheduled = false;
		conn_flush(c);
		if (c->state == CONN_READING && c->reparse) {
			conn_process(c);
			conn_update_events(c);
		}
		if (c->state != CONN_CLOSED && (c->want & EPOLLIN) && transport_input_pending(&c->tp))
			on_io(c, EPOLLIN);
	}
	if (streams)
		flush_streams(p, streams);
	if (p->stream_list)
		frame_round(p);
	else
		p->frame_round_due = false;
	if (t0)
		metrics_observe(&p->m->flush_seconds, clock_mono_ns() - t0);
	/* Free what was closed, unless it is still on a list. */
	struct list_node *x, *tmp;
	list_each(&p->graveyard, x, tmp) {
		struct conn *c = list_item(x, struct conn, link);
		if (c->flush_scheduled || c->stream_scheduled)
			continue;
		list_unlink(&p->graveyard, x);
		conn_free_record(c);
	}
}

