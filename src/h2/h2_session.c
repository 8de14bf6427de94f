/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_session.c: HTTP/2 sessions over nghttp2, each HTTP/2 stream served
 * as a connection of the pool without a socket of its own (whose
 * transport is h2_stream.c's; the state both keep is in h2_private.h).
 *
 * A session:   taken over (preface seen) -> OPEN -> dead (error, EOF,
 * GOAWAY done, idle, stalled) -> torn down at the end of the session's own
 * callback (its socket wake-up, its deferred run, its timer), never inside
 * nghttp2 or a stream's write. Tearing down closes every stream's
 * connection first.
 *
 * A stream:    HEADERS (fields into an h2_request; among the session's
 * incomplete requests, oldest first) -> request whole (END_STREAM), or
 * expired (header_timeout after its HEADERS: answered 408) -> its
 * connection is made after nghttp2 returns, reads the request text and
 * runs its handler -> writes: the response head becomes
 * HEADERS, the rest DATA -> the connection ends it (END_STREAM once all
 * it wrote is out, RST_STREAM when it closes with bytes unwritten). A
 * stream record is freed by the second of nghttp2 closing the stream and
 * its connection letting go.
 *
 * Output without copies: a stream connection's writev hands its iovecs
 * (the shared chunks) to nghttp2 as the current data source and runs
 * nghttp2_session_send; the data callback answers with NO_COPY and
 * send_data writes the 9-byte frame header and the payload pieces in one
 * writev. What the socket does not take is copied into the session's
 * output buffer (as is every control frame), and no more DATA is offered
 * until it drains. Over TLS, whose every piece would be a record, frame
 * header and payload are joined in that buffer first.
 *
 * Backpressure: writev returns what went out. A spent window (the
 * stream's or the connection's) or a full socket returns less, so the
 * connection keeps the rest queued and asks for EPOLLOUT, which the
 * transport remembers (it asks epoll for nothing); the session wakes it
 * when the window opens (nghttp2 asks the stream for data again) or the
 * socket drains. The hub sees an ordinary slow reader: queue_limit, then
 * catch-up from the store. (The stream's side: h2_stream.c.)
 *
 * Limits: nghttp2 enforces SETTINGS_MAX_CONCURRENT_STREAMS
 * (http2_max_streams), CONTINUATION counts, the rate of RST_STREAM (rapid
 * reset) and the queue of unsent acknowledgements. herald bounds:
 *   - header lists: every field decoded counts (name + value + 32, kept
 *     or dropped) against the header limit, max_request_line +
 *     max_header_bytes (SETTINGS_MAX_HEADER_LIST_SIZE): 431 past it. HPACK
 *     lets one byte on the wire stand for a 4 KB field, so a block decoded
 *     past twice the limit ends the session (GOAWAY ENHANCE_YOUR_CALM)
 *     before nghttp2 decodes and checks more of it;
 *   - decoding per pass: DECODE_BUDGET decoded header bytes per session
 *     per loop pass, as READ_BUDGET bounds the bytes read; nghttp2 is
 *     paused at the field that spends it and fed the rest next pass;
 *   - incomplete requests (HEADERS seen, END_STREAM not yet): each is
 *     answered 408 header_timeout after its HEADERS, as over HTTP/1.1 (a
 *     header block still unfinished then holds the whole connection,
 *     which ends); together they hold at most held_limit bytes, two of the
 *     largest requests HTTP/1.1 lets one connection hold as it arrives.
 *     Past it a new stream is refused (REFUSED_STREAM: the client may send
 *     it again), as is one whose fields or DATA pass it unless it is the
 *     only one; a client that goes on opening streams once refused is
 *     sent away (GOAWAY ENHANCE_YOUR_CALM);
 *   - bodies (413), PING and SETTINGS per second, input read while output
 *     waits, idle and stalled sessions, and a client silent for
 *     keepalive_timeout (a PING, which it must answer within
 *     stall_timeout). */
#include "h2/h2_session.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "h2/h2_head.h"
#include "h2/h2_private.h"
#include "http/http.h"
#include "common/log.h"
#include "common/util.h"

#define READ_CHUNK 16384
#define READ_BUDGET (64 * 1024)   /* bytes read per wake-up per session */
#define DECODE_BUDGET (64 * 1024) /* decoded header bytes per loop pass per session */
#define OBUF_HIGH (64 * 1024)     /* unsent output past which input and control frames wait */
#define IOV_MAX_H2 160
#define CONTROL_PER_SEC 250 /* PING and SETTINGS frames a client may send per second */
#define QUIET_MS 1000       /* without output this long, a session gives its frame buffer's pages back */

static void finish(struct h2_session *s);
static void h2_kick(struct h2_session *s);

static void fail(struct h2_session *s, const char *why)
{
	if (!s->dead && why)
		log_debug("closing HTTP/2 connection from %s: %s", s->peer, why);
	s->dead = true;
}

/* fail() for a protocol error or a limit passed: counted once per session
 * in herald_http2_sessions_ended_total. */
static void end_for(struct h2_session *s, enum metrics_h2_end cause, const char *why)
{
	if (!s->dead)
		s->h->m->http2_sessions_ended[cause]++;
	fail(s, why);
}

/* end_for() with GOAWAY ENHANCE_YOUR_CALM: nghttp2 ignores the rest of
 * the input (its own state is IGN_ALL from now on). */
static void calm(struct h2_session *s, enum metrics_h2_end cause, const char *why)
{
	end_for(s, cause, why);
	nghttp2_session_terminate_session(s->ng, NGHTTP2_ENHANCE_YOUR_CALM);
}

/* The header limit (SETTINGS_MAX_HEADER_LIST_SIZE): what HTTP/1.1 allows
 * a request line and head together. */
static size_t header_limit(const struct config *cfg)
{
	return (size_t)(cfg->max_request_line + cfg->max_header_bytes);
}

/* What the incomplete requests of one session may hold: two of the
 * largest requests HTTP/1.1 lets one connection hold while it arrives
 * (head and body), or as many smaller ones. */
static size_t held_limit(const struct config *cfg)
{
	return 2 * (header_limit(cfg) + (size_t)cfg->max_body);
}

/* The cause of a failed nghttp2_session_mem_recv. */
static enum metrics_h2_end recv_cause(ssize_t r)
{
	return r == NGHTTP2_ERR_FLOODED ? METRICS_H2_FLOOD : METRICS_H2_PROTOCOL_ERROR;
}

/* ---- output ---- */

static void obuf_append(struct h2_session *s, const void *p, size_t n)
{
	if (s->olen + n > s->ocap) {
		s->ocap = MAX(s->olen + n, s->ocap ? s->ocap * 2 : (size_t)4096);
		s->obuf = xrealloc(s->obuf, s->ocap);
	}
	memcpy(s->obuf + s->olen, p, n);
	s->olen += n;
}

/* The socket took w bytes of the output buffer. */
static void obuf_consume(struct h2_session *s, size_t w)
{
	memmove(s->obuf, s->obuf + w, s->olen - w);
	s->olen -= w;
	/* An idle session holds no buffer: most of its output (DATA) goes
	 * straight from the shared chunks to the socket. */
	if (s->olen == 0) {
		free(s->obuf);
		s->obuf = NULL;
		s->ocap = 0;
	}
}

/* The socket took w bytes of iov (the output buffer first, when it has
 * bytes, as iov[0]), or failed with -errno: what it did not take joins
 * the output buffer. */
static void sent_out(struct h2_session *s, const struct iovec *iov, int n, bool first_is_obuf, ssize_t w)
{
	struct h2_server *h = s->h;
	if (w == -EAGAIN)
		w = 0;
	if (w < 0) {
		s->io_err = true;
		fail(s, w == -EPIPE || w == -ECONNRESET ? NULL : "write failed");
		w = 0;
	}
	if (w > 0) {
		h->m->bytes_written += (uint64_t)w;
		s->last_out = loop_now(h->lp);
	}
	size_t done = (size_t)w;
	int i = 0;
	if (first_is_obuf) {
		size_t o = MIN(done, iov[0].iov_len);
		obuf_consume(s, o);
		done -= o;
		i = 1;
	}
	bool left = false;
	for (; i < n; i++) {
		size_t take = MIN(done, iov[i].iov_len);
		done -= take;
		if (take < iov[i].iov_len) {
			obuf_append(s, (const char *)iov[i].iov_base + take, iov[i].iov_len - take);
			left = true;
		}
	}
	s->blocked = left || s->olen > 0;
}

/* Write iov (the output buffer first, when it has bytes, as iov[0]) to the
 * socket; what it does not take joins the output buffer. */
static void write_out(struct h2_session *s, struct iovec *iov, int n, bool first_is_obuf)
{
	ssize_t w = 0;
	if (!s->io_err) {
		for (;;) {
			w = transport_writev(&s->tp, iov, n);
			if (w != -EINTR)
				break;
		}
	}
	sent_out(s, iov, n, first_is_obuf, w);
}

static void flush_obuf(struct h2_session *s)
{
	while (s->olen && !s->io_err) {
		struct iovec iov = { s->obuf, s->olen };
		size_t before = s->olen;
		write_out(s, &iov, 1, true);
		if (s->olen == before)
			break;
	}
	if (!s->olen)
		s->blocked = false;
}

/* ---- a stream round's frames, gathered into one send ----
 *
 * While a round gathers (s->g), the frames nghttp2 makes are not written:
 * control frames and DATA frame headers are copied into the gather, DATA
 * payloads are pointers into the stream connections' queues, which stay
 * as they are until the send has run (conn.c takes the bytes off them
 * only then). A gather begins only with the output buffer empty, so its
 * bytes follow everything sent before; what the socket does not take of
 * it is copied into the output buffer before the queues let go. */

static struct h2_piece *gather_piece(struct h2_gather *g)
{
	if (g->n == g->cap) {
		g->cap = g->cap ? 2 * g->cap : 64;
		g->pc = xrealloc(g->pc, (size_t)g->cap * sizeof(*g->pc));
	}
	return &g->pc[g->n++];
}

/* Copy n bytes into the gather, after its last piece. */
static void gather_copy(struct h2_gather *g, const void *p, size_t n)
{
	if (g->clen + n > g->ccap) {
		g->ccap = MAX(g->clen + n, g->ccap ? 2 * g->ccap : (size_t)1024);
		g->copy = xrealloc(g->copy, g->ccap);
	}
	memcpy(g->copy + g->clen, p, n);
	struct h2_piece *last = g->n ? &g->pc[g->n - 1] : NULL;
	if (last && !last->p && last->off + last->len == g->clen)
		last->len += n; /* adjacent copies are one piece */
	else
		*gather_piece(g) = (struct h2_piece){ NULL, g->clen, n };
	g->clen += n;
	g->total += n;
}

/* Point the gather at n bytes that stay put until its send has run. */
static void gather_ref(struct h2_gather *g, const void *p, size_t n)
{
	*gather_piece(g) = (struct h2_piece){ p, 0, n };
	g->total += n;
}

/* The stream round's first gather for s: its frames go to the gather
 * until the round's send. */
static void gather_begin(struct h2_session *s)
{
	struct h2_gather *g = xcalloc(1, sizeof(*g));
	g->next = s->h->gathering;
	s->h->gathering = s;
	s->g = g;
}

static void gather_free(struct h2_gather *g)
{
	free(g->pc);
	free(g->copy);
	free(g->iov);
	free(g);
}

/* The gather's pieces as the send reads them (the copies no longer
 * move). */
static void gather_iov(struct h2_gather *g)
{
	g->iov = xmalloc((size_t)MAX(g->n, 1) * sizeof(*g->iov));
	for (int i = 0; i < g->n; i++) {
		const struct h2_piece *pc = &g->pc[i];
		g->iov[i] = (struct iovec){ (void *)(pc->p ? pc->p : g->copy + pc->off), pc->len };
	}
}

/* The socket took w bytes of s's gathered send (or -errno): the rest is
 * copied into the output buffer, and the session runs again at the end
 * of the pass for what it must do about it (its interest, a failure). */
static void gather_done(struct h2_session *s, ssize_t w)
{
	struct h2_gather *g = s->g;
	s->g = NULL;
	if (g->n) {
		s->h->m->http2_round_sends++;
		s->h->m->http2_round_streams += g->streams;
	}
	sent_out(s, g->iov, g->n, false, w);
	gather_free(g);
	/* Output left, a failure, or frames nghttp2 held back (the gather
	 * was full): the session's own run sees to them. */
	if (s->olen || s->dead || nghttp2_session_want_write(s->ng))
		h2_kick(s);
}

/* The pool's gatherer: each gathering session's send, queued in b, or
 * written now without one (io_uring off) or without room in it; over TLS
 * the frames are joined and written as one (SSL_write). */
static void gatherer_send(void *arg, struct send_batch *b)
{
	struct h2_server *h = arg;
	struct h2_session *s = h->gathering;
	h->gathering = NULL;
	while (s) {
		struct h2_session *next = s->g->next;
		struct h2_gather *g = s->g;
		gather_iov(g);
		if (g->n == 0) {
			gather_done(s, 0);
		} else if (s->tp.ops->coalesce) {
			/* TLS, a record per piece: the round's frames joined
			 * into the output buffer and written as one. */
			gather_done(s, 0);
			flush_obuf(s);
		} else if (b && !s->io_err && transport_plain_send(&s->tp) &&
			   send_batch_add_gathered(b, s->fd, g->iov, g->n, g->total, s) == SEND_BATCH_QUEUED) {
			/* its result comes to gatherer_sent */
		} else if (g->n <= SEND_BATCH_GATHER_IOV) {
			ssize_t w = 0;
			if (!s->io_err) {
				do
					w = transport_writev(&s->tp, g->iov, g->n);
				while (w == -EINTR);
			}
			gather_done(s, w);
		} else {
			/* More pieces than one send takes: joined. */
			gather_done(s, 0);
			flush_obuf(s);
		}
		s = next;
	}
}

static void gatherer_sent(void *arg, void *tag, ssize_t w)
{
	(void)arg;
	gather_done(tag, w);
}

/* nghttp2's serialised frames (all but no-copy DATA): into the buffer,
 * which the caller flushes. Past OBUF_HIGH they wait inside nghttp2,
 * whose queue of unsent acknowledgements is bounded. */
static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *user)
{
	struct h2_session *s = user;
	(void)ng;
	(void)flags;
	if (s->g) {
		if (s->g->clen >= OBUF_HIGH)
			return NGHTTP2_ERR_WOULDBLOCK;
		gather_copy(s->g, data, len);
		return (ssize_t)len;
	}
	if (s->olen >= OBUF_HIGH)
		return NGHTTP2_ERR_WOULDBLOCK;
	obuf_append(s, data, len);
	return (ssize_t)len;
}

/* Point out[] at len bytes of the current source from where the last
 * frame ended. Returns the pieces used. */
static int source_pieces(struct h2_session *s, size_t len, struct iovec *out, int max)
{
	size_t skip = s->cur_skip + s->cur_taken;
	int k = 0;
	for (int i = 0; i < s->cur_n && len && k < max; i++) {
		size_t l = s->cur_iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		size_t take = MIN(l - skip, len);
		out[k++] = (struct iovec){ (char *)s->cur_iov[i].iov_base + skip, take };
		len -= take;
		skip = 0;
	}
	return k;
}

static int on_send_data(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd, size_t length,
			nghttp2_data_source *source, void *user)
{
	struct h2_session *s = user;
	(void)ng;
	(void)frame;
	(void)source;
	if (s->g) {
		struct iovec iov[IOV_MAX_H2];
		int pieces = source_pieces(s, length, iov, IOV_MAX_H2);
		gather_copy(s->g, framehd, 9);
		for (int i = 0; i < pieces; i++)
			gather_ref(s->g, iov[i].iov_base, iov[i].iov_len);
		s->cur_taken += length;
		return 0;
	}
	struct iovec iov[IOV_MAX_H2];
	int k = 0;
	bool first_is_obuf = s->olen > 0;
	if (first_is_obuf)
		iov[k++] = (struct iovec){ s->obuf, s->olen };
	iov[k++] = (struct iovec){ (void *)framehd, 9 };
	int pieces = source_pieces(s, length, iov + k, IOV_MAX_H2 - k);
	if (s->tp.ops->coalesce) {
		/* One record for header and payload, from the buffer. */
		for (int i = first_is_obuf ? 1 : 0; i < k + pieces; i++)
			obuf_append(s, iov[i].iov_base, iov[i].iov_len);
		flush_obuf(s);
	} else {
		write_out(s, iov, k + pieces, first_is_obuf);
	}
	s->cur_taken += length;
	return s->io_err ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
}

/* Run nghttp2's sender (control frames, HEADERS, the DATA of the current
 * source or of ending streams), then flush. */
static void h2_kick(struct h2_session *s);

static void on_quiet(void *arg);

static void h2_session_send(struct h2_session *s)
{
	if (s->in_ng || s->dead)
		return;
	s->in_ng = true;
	int r = nghttp2_session_send(s->ng);
	s->in_ng = false;
	if (r < 0)
		fail(s, nghttp2_strerror(r));
	flush_obuf(s);
	if (!loop_timer_active(&s->quiet_timer)) /* the buffer may hold pages now */
		loop_timer_start(s->h->lp, &s->quiet_timer, QUIET_MS, on_quiet, s);
}

/* Most sessions are quiet between events and heartbeats: once one has
 * sent nothing for QUIET_MS and nghttp2 holds no frame in its buffer,
 * the buffer's pages go back to the kernel (h2_mem.h). */
static void on_quiet(void *arg)
{
	struct h2_session *s = arg;
	uint64_t since = loop_now(s->h->lp) - s->last_out;
	if (s->dead)
		return;
	if (since < QUIET_MS || nghttp2_session_want_write(s->ng)) {
		loop_timer_start(s->h->lp, &s->quiet_timer, since < QUIET_MS ? QUIET_MS - since : QUIET_MS, on_quiet,
				 s);
		return;
	}
	h2_mem_release(&s->mem);
}

/* ---- nghttp2's input callbacks ---- */

/* Refuse stream id while the session's incomplete requests hold
 * held_limit: RST_STREAM REFUSED_STREAM (the request was not taken; the
 * client may send it again), and GOAWAY once more streams were refused
 * without a request ending in between than a client may have open at
 * once, which only one that goes on opening streams after it was refused
 * can do. */
static void refuse(struct h2_session *s, int32_t id)
{
	nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
	if (++s->refused > (unsigned)s->h->cfg->http2_max_streams)
		calm(s, METRICS_H2_INCOMPLETE, "streams opened past the bound of incomplete requests");
}

/* Whether st's request must go for the session's bound: its incomplete
 * requests hold more than held_limit, and st is not the only one (one
 * request alone is always taken, as over HTTP/1.1). */
static bool over_held(const struct h2_session *s, const struct h2_stream *st)
{
	return s->held > held_limit(s->h->cfg) &&
	       !(h2_oldest_arriving(s) == st && s->arriving.last == s->arriving.list.first);
}

/* Count n decoded header bytes against this pass's budget. True once it
 * is spent: the callback pauses nghttp2 after this field, and the session
 * feeds it the rest on the next pass (read_input). */
static bool decode_spent(struct h2_session *s, size_t n)
{
	uint64_t pass = loop_iterations(s->h->lp);
	if (pass != s->pass) {
		s->pass = pass;
		s->decoded = 0;
	}
	s->decoded += n;
	if (s->decoded < DECODE_BUDGET)
		return false;
	s->paused = true;
	return true;
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
	struct h2_session *s = user;
	s->block = 0;
	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	const struct config *cfg = s->h->cfg;
	if (s->held >= held_limit(cfg)) {
		refuse(s, frame->hd.stream_id);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* its block is decoded, never handed to herald */
	}
	struct h2_stream *st = h2_stream_new(s, frame->hd.stream_id, header_limit(cfg), (size_t)cfg->max_body);
	list_push(&s->streams, &st->link);
	nghttp2_session_set_stream_user_data(ng, st->id, st);
	return 0;
}

/* Every field counts, kept or dropped, as SETTINGS_MAX_HEADER_LIST_SIZE
 * counts it (name, value and 32): a reference to HPACK's dynamic table is
 * one byte on the wire and up to 4 KB decoded. Past the header limit the
 * request is answered 431 and nothing more of it is kept; a block twice
 * the limit ends the session before nghttp2 decodes and checks more of
 * it. */
static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
		     const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
	struct h2_session *s = user;
	(void)flags;
	size_t size = namelen + valuelen + 32, limit = header_limit(s->h->cfg);
	s->block += size;
	if (s->block > 2 * limit) {
		calm(s, METRICS_H2_HEADER_SIZE, "header block decoded past twice the header limit");
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
	if (frame->hd.type == NGHTTP2_HEADERS && st && st->arriving) {
		if (s->block > limit)
			h2_stream_request(st)->too_large = true;
		else if (frame->headers.cat == NGHTTP2_HCAT_REQUEST) /* trailers: nothing herald reads */
			h2_stream_field(st, (const char *)name, namelen, (const char *)value, valuelen);
		if (over_held(s, st)) {
			h2_stream_drop_request(st);
			refuse(s, st->id);
			return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
		}
	}
	return decode_spent(s, size) ? NGHTTP2_ERR_PAUSE : 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user)
{
	struct h2_session *s = user;
	(void)flags;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);
	if (st && st->arriving) {
		h2_stream_data(st, (const char *)data, len);
		if (over_held(s, st)) {
			h2_stream_drop_request(st);
			refuse(s, id);
		}
	}
	return 0;
}

/* PING and SETTINGS cost an answer each: more than CONTROL_PER_SEC a
 * second is a flood. */
static bool control_flood(struct h2_session *s)
{
	uint64_t sec = loop_now(s->h->lp) / 1000;
	if (sec != s->ctl_window) {
		s->ctl_window = sec;
		s->ctl_count = 0;
	}
	return ++s->ctl_count > CONTROL_PER_SEC;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
	struct h2_session *s = user;
	switch (frame->hd.type) {
	case NGHTTP2_PING:
	case NGHTTP2_SETTINGS:
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && control_flood(s))
			calm(s, METRICS_H2_FLOOD, "PING or SETTINGS flood");
		return 0;
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		break;
	default:
		return 0;
	}
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
	if (st && frame->hd.type == NGHTTP2_HEADERS)
		st->head_whole = true;
	if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	if (st && st->arriving && !st->ready) {
		s->refused = 0;
		h2_stream_whole(st);
		st->ready = true;
		h2_pending_push(st);
	}
	return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t id, uint32_t error_code, void *user)
{
	(void)user;
	(void)error_code;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);
	if (!st)
		return 0;
	st->closed = true;
	if (st->c || st->pending)
		h2_pending_push(st); /* its connection closes after nghttp2 returns */
	else
		h2_stream_free(st);
	return 0;
}

/* ---- the session's own work ---- */

/* A response ended before its request (a 408): the rest of the request
 * is declined without error (RFC 9113 8.1). A GOAWAY with an error code
 * is nghttp2 ending the session for a protocol error or one of its limits
 * (rapid reset, CONTINUATION, the queue of acknowledgements); herald's
 * own ends were counted before. */
static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
	struct h2_session *s = user;
	if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
	    (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
	    nghttp2_session_get_stream_remote_close(ng, frame->hd.stream_id) == 0)
		nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
	if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
		end_for(s,
			frame->goaway.error_code == NGHTTP2_ENHANCE_YOUR_CALM ? METRICS_H2_FLOOD
									      : METRICS_H2_PROTOCOL_ERROR,
			nghttp2_http2_strerror(frame->goaway.error_code));
	return 0;
}

/* Queue a graceful GOAWAY (once): the streams begun go on, new ones go to
 * a new connection. */
static void go_away(struct h2_session *s)
{
	if (s->goaway)
		return;
	s->goaway = true;
	nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->ng),
			      NGHTTP2_NO_ERROR, NULL, 0);
	h2_kick(s);
}

/* Make the connection of a stream whose request is whole, or expired. */
static void make_conn(struct h2_session *s, struct h2_stream *st)
{
	struct h2_server *h = s->h;
	/* Rotation moves readers, and so a session older than rotate_after
	 * sends its new streams elsewhere (a restarted proxy, another node). */
	int64_t rotate = h->cfg->rotate_after_ms;
	if (rotate > 0 && loop_now(h->lp) - s->started >= (uint64_t)rotate)
		go_away(s);
	/* The request's buffers are this call's until the connection has
	 * been handed the record of it (slices into them). */
	struct h2_request r = { 0 };
	struct http_request req;
	const char *body = NULL;
	size_t body_len = 0;
	int status = 408;
	if (!st->expired) {
		h2_stream_take_request(st, &r);
		status = h2_request_record(&r, &req, &body, &body_len);
	}
	if (status < 0) {
		h2_request_free(&r);
		nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_PROTOCOL_ERROR);
		return;
	}
	s->nconns++;
	h->streams++;
	s->served = true;
	st->conn_gone = false;
	struct conn *c = conn_new_virtual(h->pool, s->peer, s->peer_unix, s->peer_loopback, &h2_stream_ops, st,
					  status ? NULL : &req, body, body_len);
	h2_request_free(&r);
	/* Its handler may have run and closed it already; st stays (nghttp2
	 * has not closed the stream while the session was not running it). */
	if (st->conn_gone)
		return;
	st->c = c;
	if (status == 408)
		conn_refuse(c, 408, "header_timeout", "request not complete within header_timeout", NULL);
	else if (status)
		conn_refuse(c, 431, http_error_cause(431), "request header fields too large", NULL);
}

static void run_pending(struct h2_session *s)
{
	while (!list_empty(&s->pending.list) && !s->dead) {
		struct h2_stream *st = list_item(s->pending.list.first, struct h2_stream, pend);
		list_fifo_unlink(&s->pending, &st->pend);
		st->pending = false;
		if (st->closed) {
			if (st->c)
				conn_close(st->c, NULL); /* frees st */
			else
				h2_stream_free(st);
		} else if (st->ready && (st->arriving || st->expired)) {
			make_conn(s, st);
		}
	}
}

/* Wake every stream connection waiting for room that has some now. */
static void wake_streams(struct h2_session *s)
{
	if (s->blocked || s->dead || nghttp2_session_get_remote_window_size(s->ng) <= 0)
		return;
	struct list_node *x, *tmp;
	list_each(&s->streams, x, tmp)
	{
		struct h2_stream *st = list_item(x, struct h2_stream, link);
		if (!st->c || !st->want_out || st->closed)
			continue;
		if (nghttp2_session_get_stream_remote_window_size(s->ng, st->id) <= 0)
			continue;
		st->want_out = false;
		conn_wake(st->c, EPOLLOUT);
		if (s->dead || s->blocked)
			return;
	}
}

/* Hand n bytes to nghttp2 (p may be ibuf itself). What it leaves unread,
 * paused at a field once the pass's budget of decoded header bytes was
 * spent, waits in ibuf for the next pass. Returns false once the session
 * has failed. */
static bool feed(struct h2_session *s, const char *p, size_t n)
{
	s->in_ng = true;
	ssize_t r = nghttp2_session_mem_recv(s->ng, (const uint8_t *)p, n);
	s->in_ng = false;
	if (r < 0) {
		end_for(s, recv_cause(r), nghttp2_strerror((int)r));
		return false;
	}
	size_t left = n - (size_t)r;
	if (left && p == s->ibuf) {
		memmove(s->ibuf, s->ibuf + r, left);
	} else if (left) {
		s->ibuf = xmalloc(left); /* empty before: no read while paused */
		memcpy(s->ibuf, p + r, left);
	} else {
		free(s->ibuf);
		s->ibuf = NULL;
	}
	s->ilen = left;
	return true;
}

static void read_input(struct h2_session *s)
{
	if (s->paused) {
		/* What nghttp2 left, once this pass has budget for it. */
		if (s->pass == loop_iterations(s->h->lp) && s->decoded >= DECODE_BUDGET)
			return;
		s->paused = false;
		if (!feed(s, s->ibuf, s->ilen) || s->paused)
			return;
	}
	char buf[READ_CHUNK];
	size_t budget = READ_BUDGET;
	while (budget && !s->dead && !s->paused && s->olen < OBUF_HIGH) {
		ssize_t n = transport_read(&s->tp, buf, sizeof(buf));
		if (n == -EINTR)
			continue;
		if (n == -EAGAIN)
			break;
		if (n <= 0) {
			s->io_err = n < 0;
			fail(s, n < 0 && n != -ECONNRESET ? "read failed" : NULL);
			break;
		}
		if (!feed(s, buf, (size_t)n))
			break;
		budget -= (size_t)n;
		s->last_in = loop_now(s->h->lp);
		s->ping_sent = false;
		if ((size_t)n < sizeof(buf) && !transport_input_pending(&s->tp))
			break;
	}
}

/* Everything the session does after input or a wake-up. */
static void run(struct h2_session *s)
{
	run_pending(s);
	h2_session_send(s);
	wake_streams(s);
	run_pending(s);
	h2_session_send(s);
}

static void on_timer(void *arg);

static void arm(struct h2_session *s, uint64_t ms)
{
	s->timer_at = loop_now(s->h->lp) + ms;
	loop_timer_start(s->h->lp, &s->timer, ms, on_timer, s);
}

static void update(struct h2_session *s)
{
	struct h2_server *h = s->h;
	uint32_t want = 0;
	if (s->olen < OBUF_HIGH)
		want |= EPOLLIN | EPOLLRDHUP;
	if (s->olen || transport_output_pending(&s->tp))
		want |= EPOLLOUT;
	uint32_t ev = transport_events(&s->tp, want);
	if (ev != s->want) {
		s->want = ev;
		loop_modify(h->lp, s->fd, ev);
	}
	if ((want & EPOLLIN) && (s->paused || transport_input_pending(&s->tp)))
		h2_kick(s);
	/* One timer: stalled output, an idle session, (with streams) a client
	 * silent for keepalive_timeout, then its PING's answer, and the
	 * deadline of the oldest incomplete request. A timer set to fire
	 * later (header_timeout, before the first request) gives way to an
	 * earlier one; on_timer checks what is due. */
	const struct config *cfg = h->cfg;
	uint64_t now = loop_now(h->lp);
	uint64_t ms = (uint64_t)(s->olen || s->ping_sent  ? cfg->stall_timeout_ms
				 : s->nconns || s->served ? cfg->keepalive_timeout_ms
							  : cfg->header_timeout_ms);
	struct h2_stream *oldest = h2_oldest_arriving(s);
	if (oldest) {
		uint64_t due = oldest->text->begun + (uint64_t)cfg->header_timeout_ms;
		ms = MIN(ms, due > now ? due - now : 0);
	}
	if (!loop_timer_active(&s->timer) || now + ms < s->timer_at)
		arm(s, ms);
}

static void teardown(struct h2_session *s)
{
	struct h2_server *h = s->h;
	s->dead = true;
	list_unlink(&h->all, &s->link);
	h->n--;
	while (!list_empty(&s->streams)) {
		struct h2_stream *st = list_item(s->streams.first, struct h2_stream, link);
		if (st->c)
			conn_close(st->c, NULL); /* frees st */
		else
			h2_stream_free(st);
	}
	if (s->g) {
		/* Not normally: a round's gather and its send run together. */
		struct h2_session **pp = &h->gathering;
		while (*pp && *pp != s)
			pp = &(*pp)->g->next;
		if (*pp)
			*pp = s->g->next;
		gather_free(s->g);
		s->g = NULL;
	}
	nghttp2_session_del(s->ng);
	s->ng = NULL;
	loop_timer_stop(h->lp, &s->timer);
	loop_timer_stop(h->lp, &s->quiet_timer);
	loop_unwatch(h->lp, s->fd);
	transport_free(&s->tp);
	close(s->fd);
	free(s->obuf);
	s->obuf = NULL;
	free(s->ibuf);
	s->ibuf = NULL;
	if (s->kick_scheduled)
		s->zombie = true;
	else
		free(s);
}

/* The end of one of the session's callbacks: tear it down when it is
 * done, else ask for what it needs. */
static void finish(struct h2_session *s)
{
	if (s->busy)
		return;
	if (!s->dead && !nghttp2_session_want_read(s->ng) && !nghttp2_session_want_write(s->ng) && !s->olen)
		s->dead = true;
	if (s->dead) {
		if (!s->io_err) {
			/* A GOAWAY nghttp2 queued on an error: one try. */
			s->in_ng = true;
			nghttp2_session_send(s->ng);
			s->in_ng = false;
			flush_obuf(s);
		}
		teardown(s);
		return;
	}
	update(s);
}

static void on_io(void *arg, uint32_t events)
{
	struct h2_session *s = arg;
	char why[320];
	loop_label(s->h->lp, "an HTTP/2 connection", s->peer);
	s->busy++;
	if (transport_on_io(&s->tp, &events, why, sizeof(why)) < 0) {
		s->io_err = true;
		fail(s, why);
	} else if (events & EPOLLERR) {
		s->io_err = true;
		fail(s, NULL);
	} else if (events) {
		if (events & EPOLLOUT)
			flush_obuf(s);
		if (events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
			read_input(s);
		run(s);
	}
	s->busy--;
	finish(s);
}

static void deferred(void *arg)
{
	struct h2_session *s = arg;
	s->kick_scheduled = false;
	if (s->zombie) {
		free(s);
		return;
	}
	loop_label(s->h->lp, "an HTTP/2 connection", s->peer);
	s->busy++;
	if (!s->dead) {
		if ((s->want & EPOLLIN) && (s->paused || transport_input_pending(&s->tp)))
			read_input(s);
		run(s);
	}
	s->busy--;
	finish(s);
}

/* Run the session at the end of this loop pass. */
static void h2_kick(struct h2_session *s)
{
	if (s->kick_scheduled || s->zombie)
		return;
	s->kick_scheduled = true;
	loop_defer(s->h->lp, deferred, s);
}

/* Answer 408 to each request not whole within header_timeout of its
 * HEADERS (the list is oldest first), as HTTP/1.1 does. One whose header
 * block has not ended holds the whole connection (nothing else may come
 * before the rest of the block), which ends. */
static void expire_requests(struct h2_session *s, uint64_t now)
{
	uint64_t limit = (uint64_t)s->h->cfg->header_timeout_ms;
	struct h2_stream *st;
	while ((st = h2_oldest_arriving(s)) && !s->dead) {
		if (now - st->text->begun < limit)
			break;
		if (!st->head_whole) {
			calm(s, METRICS_H2_INCOMPLETE, "header block not finished within header_timeout");
			break;
		}
		h2_stream_drop_request(st);
		st->expired = st->ready = true;
		h2_pending_push(st);
	}
}

static void on_timer(void *arg)
{
	struct h2_session *s = arg;
	const struct config *cfg = s->h->cfg;
	loop_label(s->h->lp, "an HTTP/2 connection", s->peer);
	uint64_t now = loop_now(s->h->lp);
	s->busy++;
	expire_requests(s, now);
	if (s->olen && now - s->last_out >= (uint64_t)cfg->stall_timeout_ms) {
		end_for(s, METRICS_H2_STALLED, "no bytes accepted within stall_timeout");
	} else if (!s->olen && s->nconns == 0 && list_empty(&s->arriving.list) && list_empty(&s->pending.list)) {
		uint64_t idle = (uint64_t)(s->served ? cfg->keepalive_timeout_ms : cfg->header_timeout_ms);
		if (now - s->last_active >= idle) {
			nghttp2_session_terminate_session(s->ng, NGHTTP2_NO_ERROR);
			h2_session_send(s);
			s->dead = true;
		} else {
			arm(s, idle - (now - s->last_active));
		}
	} else if (s->ping_sent && now - s->ping_at >= (uint64_t)cfg->stall_timeout_ms) {
		end_for(s, METRICS_H2_PING_UNANSWERED, "no answer to PING within stall_timeout");
	} else if (!s->ping_sent && now - s->last_in >= (uint64_t)cfg->keepalive_timeout_ms) {
		/* Streams only write, so a peer gone without a word would hold
		 * them until the socket fills: ask it for a sign of life. */
		s->ping_sent = true;
		s->ping_at = now;
		nghttp2_submit_ping(s->ng, NGHTTP2_FLAG_NONE, NULL);
		h2_session_send(s);
	}
	s->busy--;
	finish(s);
}

/* ---- the server's side ---- */

static bool take(void *arg, const struct conn *c, int fd, const struct transport *tp, const char *bytes, size_t n)
{
	struct h2_server *h = arg;
	const struct config *cfg = h->cfg;
	if (!cfg->http2)
		return false;
	struct h2_session *s = xcalloc(1, sizeof(*s));
	s->h = h;
	s->fd = fd;
	s->tp = *tp;
	snprintf(s->peer, sizeof(s->peer), "%s", conn_peer(c));
	s->peer_unix = conn_peer_unix(c);
	s->peer_loopback = conn_peer_local(c);
	s->started = s->last_active = s->last_out = s->last_in = loop_now(h->lp);
	h2_mem_init(&s->mem);
	h2_mem_mark(&s->mem, true); /* what it maps now is its frame buffer */
	int rv = nghttp2_session_server_new3(&s->ng, h->cbs, s, h->opt, &s->mem.mem);
	h2_mem_mark(&s->mem, false);
	if (rv != 0) {
		log_warn("HTTP/2 connection from %s: nghttp2 could not start a session", s->peer);
		free(s);
		return false;
	}
	transport_moved(&s->tp, s->peer);
	transport_settle(&s->tp); /* a TLS session may park, reading on */
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)cfg->http2_max_streams },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)(cfg->max_request_line + cfg->max_header_bytes) },
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 },
	};
	nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
	if (h->draining)
		go_away(s);
	list_push(&h->all, &s->link);
	h->n++;
	s->want = transport_events(&s->tp, EPOLLIN | EPOLLRDHUP);
	if (loop_watch(h->lp, fd, s->want, on_io, s) < 0) {
		s->io_err = true;
		fail(s, "cannot watch the socket");
	}
	/* The preface and whatever came with it. */
	s->busy++;
	if (!s->dead) {
		/* More may wait inside TLS or the socket. */
		if (feed(s, bytes, n) && !s->dead)
			read_input(s);
		run(s);
	}
	s->busy--;
	/* The connection being taken over is still on the stack: tear down
	 * later if it has to be. */
	if (s->dead)
		h2_kick(s);
	else
		update(s);
	return true;
}

struct conn_takeover h2_server_takeover(struct h2_server *h)
{
	return (struct conn_takeover){ .arg = h, .take = take };
}

struct conn_gatherer h2_server_gatherer(struct h2_server *h)
{
	return (struct conn_gatherer){ .arg = h, .send = gatherer_send, .sent = gatherer_sent };
}

struct h2_server *h2_server_new(struct loop *lp, const struct config *cfg, struct metrics *m, struct conn_pool *pool)
{
	struct h2_server *h = xcalloc(1, sizeof(*h));
	h->kick = h2_kick;
	h->send = h2_session_send;
	h->gather = gather_begin;
	h->lp = lp;
	h->cfg = cfg;
	h->m = m;
	h->pool = pool;
	if (nghttp2_session_callbacks_new(&h->cbs) != 0 || nghttp2_option_new(&h->opt) != 0) {
		fprintf(stderr, "herald: out of memory for nghttp2\n");
		abort();
	}
	nghttp2_session_callbacks_set_send_callback(h->cbs, on_send);
	nghttp2_session_callbacks_set_send_data_callback(h->cbs, on_send_data);
	nghttp2_session_callbacks_set_on_begin_headers_callback(h->cbs, on_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(h->cbs, on_header);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(h->cbs, on_data_chunk);
	nghttp2_session_callbacks_set_on_frame_recv_callback(h->cbs, on_frame_recv);
	nghttp2_session_callbacks_set_on_stream_close_callback(h->cbs, on_stream_close);
	nghttp2_session_callbacks_set_on_frame_send_callback(h->cbs, on_frame_send);
	/* Closed streams are not kept for the priority tree (herald sends
	 * in the order its connections write). */
	nghttp2_option_set_no_closed_streams(h->opt, 1);
	return h;
}

void h2_server_drain(struct h2_server *h)
{
	h->draining = true;
	struct list_node *x, *tmp;
	list_each(&h->all, x, tmp)
	{
		go_away(list_item(x, struct h2_session, link));
	}
}

size_t h2_server_sessions(const struct h2_server *h)
{
	return h->n;
}

size_t h2_server_streams(const struct h2_server *h)
{
	return h->streams;
}

void h2_server_free(struct h2_server *h)
{
	if (!h)
		return;
	while (!list_empty(&h->all)) {
		struct h2_session *s = list_item(h->all.first, struct h2_session, link);
		s->io_err = true;          /* no goodbye at exit */
		s->kick_scheduled = false; /* the loop runs no more deferred work */
		teardown(s);
	}
	nghttp2_session_callbacks_del(h->cbs);
	nghttp2_option_del(h->opt);
	free(h);
}
