/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_stream.c: the transport of an HTTP/2 stream's connection (a
 * connection of the pool without a socket, conn_new_virtual, which is
 * handed the request as a record and reads nothing); the connection hands
 * its response head over as a record (the transport's head op), queued
 * at once as HEADERS, and what it writes becomes DATA frames whose
 * payload is the connection's own iovecs (the shared chunks), handed to
 * nghttp2 as the current data source while the session's sender runs. A
 * stream holds a data item in nghttp2 only while output waits: one is
 * submitted when its connection writes body bytes and ends (without
 * END_STREAM) with the last of them, so an idle stream costs nghttp2 no
 * outbound item; ending the stream submits one for END_STREAM. A spent
 * window or a full socket makes a short write, which keeps the item
 * (deferred), so the connection is a slow reader. Its interest is kept
 * here (want_out) and epoll is asked for nothing; the session wakes it.
 * The stream record is freed by the second of nghttp2 closing the stream
 * and the connection letting go (its transport's free). Until its request
 * is whole a stream is on its session's list of incomplete requests
 * (oldest first: the session times out the head of it), and what the
 * request holds counts in the session's held, which the session bounds. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h2/h2_private.h"
#include "common/log.h"
#include "common/util.h"

void h2_pending_push(struct h2_stream *st)
{
	struct h2_session *s = st->s;
	if (st->pending)
		return;
	/* In order of arrival: the caps admit the streams opened first. */
	st->pending = true;
	list_fifo_push(&s->pending, &st->pend);
	s->h->kick(s);
}

struct h2_stream *h2_stream_new(struct h2_session *s, int32_t id, size_t head_limit, size_t body_limit)
{
	struct h2_stream *st = xcalloc(1, sizeof(*st));
	st->s = s;
	st->id = id;
	struct h2_stream_text *x = st->text = xcalloc(1, sizeof(*st->text));
	x->req.head_limit = head_limit;
	x->req.body_limit = body_limit;
	x->st = st;
	x->begun = loop_now(s->h->lp);
	/* The newest of the session's incomplete requests. */
	list_fifo_push(&s->arriving, &x->arr);
	st->arriving = true;
	return st;
}

/* Free the stream's text record once it holds none of its texts. */
static void text_release(struct h2_stream *st)
{
	if (st->text && !st->arriving) {
		free(st->text);
		st->text = NULL;
	}
}

/* Whether the request is on the session's list of incomplete ones. */
static bool listed(const struct h2_stream *st)
{
	return list_holds(&st->s->arriving.list, &st->text->arr);
}

/* Take the request off the session's list of incomplete requests, and
 * what it holds off the session's held. */
static void unlist(struct h2_stream *st)
{
	struct h2_session *s = st->s;
	struct h2_stream_text *x = st->text;
	if (!listed(st))
		return;
	list_fifo_unlink(&s->arriving, &x->arr);
	s->held -= x->held;
	x->held = 0;
}

/* The request is no longer arriving: unlisted and freed. */
static void arriving_end(struct h2_stream *st)
{
	unlist(st);
	h2_request_free(&st->text->req);
	st->arriving = false;
}

/* Count what the request holds now in the session's held. */
static void count_held(struct h2_stream *st)
{
	struct h2_stream_text *x = st->text;
	if (!listed(st))
		return;
	st->s->held += x->req.held - x->held;
	x->held = x->req.held;
}

void h2_stream_whole(struct h2_stream *st)
{
	unlist(st);
}

void h2_stream_field(struct h2_stream *st, const char *name, size_t namelen, const char *value, size_t valuelen)
{
	h2_request_field(&st->text->req, name, namelen, value, valuelen);
	count_held(st);
}

void h2_stream_data(struct h2_stream *st, const char *data, size_t len)
{
	h2_request_data(&st->text->req, data, len);
	count_held(st);
}

void h2_stream_take_request(struct h2_stream *st, struct h2_request *out)
{
	struct h2_stream_text *x = st->text;
	*out = x->req;
	x->req = (struct h2_request){ 0 };
	st->head_request = h2_request_is_head(out);
	arriving_end(st);
	text_release(st);
}

void h2_stream_drop_request(struct h2_stream *st)
{
	arriving_end(st);
	text_release(st);
}

void h2_stream_free(struct h2_stream *st)
{
	struct h2_session *s = st->s;
	if (st->pending)
		list_fifo_unlink(&s->pending, &st->pend);
	list_unlink(&s->streams, &st->link);
	if (st->text) {
		if (st->arriving)
			arriving_end(st);
		free(st->text);
	}
	if (s->cur == st)
		s->cur = NULL;
	if (s->ng && !s->dead && !st->closed)
		nghttp2_session_set_stream_user_data(s->ng, st->id, NULL);
	free(st);
}

/* The data item's source (every item is submitted with END_STREAM, which
 * only an ending stream's EOF keeps). */
static ssize_t read_data(nghttp2_session *ng, int32_t id, uint8_t *buf, size_t length, uint32_t *flags,
			 nghttp2_data_source *source, void *user)
{
	struct h2_session *s = user;
	struct h2_stream *st = source->ptr;
	(void)ng;
	(void)id;
	(void)buf;
	if (st != s->cur) {
		if (st->ending) {
			*flags |= NGHTTP2_DATA_FLAG_EOF;
			return 0;
		}
		/* Its window opened (or it was resumed) while its connection
		 * was not writing: wake the connection. */
		if (st->c && st->want_out)
			s->h->kick(s);
		return NGHTTP2_ERR_DEFERRED;
	}
	size_t avail = s->cur_len - s->cur_taken;
	if (avail == 0 || s->blocked)
		return NGHTTP2_ERR_DEFERRED;
	*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	if (length < avail)
		return (ssize_t)length;
	/* The last byte of this write: nghttp2 lets go of the item once the
	 * frame is out, and the stream stays open. */
	*flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
	return (ssize_t)avail;
}

/* Give the stream a data item for nghttp2 to ask read_data from, or
 * resume the one it still holds (a short write left it deferred).
 * Returns 0, or nghttp2's error (the stream is closed). */
static int attach_data(struct h2_stream *st)
{
	nghttp2_session *ng = st->s->ng;
	nghttp2_data_provider prd = { .source.ptr = st, .read_callback = read_data };
	int r = nghttp2_submit_data(ng, NGHTTP2_FLAG_END_STREAM, st->id, &prd);
	if (r == NGHTTP2_ERR_DATA_EXIST) {
		/* Still held: resumed when read_data deferred it (a full
		 * socket); one waiting for its window nghttp2 resumes itself
		 * when the window opens, and this call fails harmlessly. */
		nghttp2_session_resume_data(ng, st->id);
		return 0;
	}
	return r;
}

/* The connection hands over its response head (transport op head): queue
 * it as HEADERS at once, the stream's end with it when the response has
 * no body, else no data item until body bytes are written. nghttp2 copies
 * the fields; the session sends them on its next pass (kicked). */
static int stream_head(struct transport *t, const struct http_head *h)
{
	struct h2_stream *st = t->state;
	struct h2_session *s = st->s;
	if (s->dead || st->closed || st->submitted)
		return -1;
	struct h2_fields f;
	h2_fields_make(&f, h);
	nghttp2_nv *nv = xmalloc(f.n * sizeof(*nv));
	for (size_t i = 0; i < f.n; i++)
		nv[i] = (nghttp2_nv){ (uint8_t *)f.f[i].name, (uint8_t *)f.f[i].value, f.f[i].namelen, f.f[i].valuelen,
				      NGHTTP2_NV_FLAG_NONE };
	st->bodyless = st->head_request || h->status == 204 || h->status == 304;
	uint8_t flags = st->bodyless ? NGHTTP2_FLAG_END_STREAM : NGHTTP2_FLAG_NONE;
	int r = nghttp2_submit_headers(s->ng, flags, st->id, NULL, nv, f.n, NULL);
	free(nv);
	h2_fields_free(&f);
	if (r < 0)
		return -1;
	st->submitted = true;
	s->h->kick(s);
	return 0;
}

/* The request came as a record (conn_new_virtual): there are no bytes
 * to read, ever. */
static ssize_t stream_read(struct transport *t, void *buf, size_t len)
{
	(void)t;
	(void)buf;
	(void)len;
	return -EAGAIN;
}

/* Hand the connection's n pieces to nghttp2 as the stream's data source
 * and run the sender, which writes the frames, or gathers them for the
 * round's one send while the session gathers. Returns the bytes taken
 * (framed), or -EAGAIN for none. */
static ssize_t write_data(struct h2_stream *st, const struct iovec *iov, int n, size_t total)
{
	struct h2_session *s = st->s;
	size_t off = 0;
	if (st->bodyless)
		off = total; /* nothing follows the head */
	size_t taken = 0;
	if (off < total && !s->blocked) {
		if (attach_data(st) < 0)
			return -EPIPE;
		s->cur = st;
		s->cur_iov = iov;
		s->cur_n = n;
		s->cur_skip = off;
		s->cur_len = total - off;
		s->cur_taken = 0;
		s->h->send(s);
		taken = s->cur_taken;
		s->cur = NULL;
		s->cur_iov = NULL;
	} else {
		s->h->send(s); /* the HEADERS */
	}
	if (s->dead)
		s->h->kick(s);
	size_t w = off + taken;
	st->short_write = w < total;
	return w ? (ssize_t)w : -EAGAIN;
}

static size_t iov_total(const struct iovec *iov, int n)
{
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	return total;
}

/* Every response's head comes through stream_head first. */
static bool headed(const struct h2_stream *st)
{
	if (!st->submitted)
		log_warn("HTTP/2 stream from %s: body bytes without a response head", st->s->peer);
	return st->submitted;
}

static ssize_t stream_writev(struct transport *t, const struct iovec *iov, int n)
{
	struct h2_stream *st = t->state;
	struct h2_session *s = st->s;
	if (s->dead || st->closed)
		return -EPIPE;
	if (s->in_ng || s->g) {
		/* Inside nghttp2, or between a round's gathering and its
		 * send: later, from the session's own run. */
		s->h->kick(s);
		return -EAGAIN;
	}
	if (!headed(st))
		return -EIO;
	return write_data(st, iov, n, iov_total(iov, n));
}

/* A stream round's write: the frames gathered into the session's one send
 * of the round (h2_session.c), pointing into iov's memory, which the
 * connection keeps until that send ran. */
static ssize_t stream_gather(struct transport *t, const struct iovec *iov, int n)
{
	struct h2_stream *st = t->state;
	struct h2_session *s = st->s;
	if (s->dead || st->closed)
		return -EPIPE;
	if (!headed(st))
		return -EIO;
	size_t total = iov_total(iov, n);
	if (s->olen)
		return -EAGAIN; /* the socket is full: the session wakes the stream once it drains */
	if (s->in_ng || !h2_gather_room(s, n, total)) {
		s->h->kick(s);
		return -EAGAIN;
	}
	if (!s->g)
		s->h->gather(s);
	s->g->streams++;
	return write_data(st, iov, n, total);
}

/* The connection's interest is kept here; epoll is asked for nothing. */
static uint32_t stream_events(const struct transport *t, uint32_t wanted)
{
	struct h2_stream *st = t->state;
	st->want_out = (wanted & EPOLLOUT) != 0;
	return 0;
}

/* End the stream once what was written is out. */
static void end_stream(struct h2_stream *st)
{
	struct h2_session *s = st->s;
	if (!st->submitted) {
		nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_INTERNAL_ERROR);
	} else if (st->short_write) {
		nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_CANCEL);
	} else if (!st->bodyless) {
		/* An item ending in END_STREAM: a new one, or the one still
		 * held, which read_data now ends. */
		st->ending = true;
		attach_data(st);
	}
	s->h->kick(s);
}

static void stream_shutdown(struct transport *t)
{
	struct h2_stream *st = t->state;
	if (!st->s->dead && !st->closed && !st->ending)
		end_stream(st);
}

static void stream_free_op(struct transport *t)
{
	struct h2_stream *st = t->state;
	struct h2_session *s = st->s;
	st->c = NULL;
	st->conn_gone = true;
	s->nconns--;
	s->h->streams--;
	if (s->nconns == 0)
		s->last_active = loop_now(s->h->lp);
	if (s->dead || st->closed) {
		h2_stream_free(st);
		return;
	}
	if (!st->ending)
		end_stream(st);
}

/* A stream is as secure as its session's connection. */
static bool stream_secure(const struct transport *t)
{
	const struct h2_stream *st = t->state;
	return transport_secure(&st->s->tp);
}

const struct transport_ops h2_stream_ops = {
	.name = "h2",
	.ready_at_accept = true,
	.read = stream_read,
	.writev = stream_writev,
	.gather = stream_gather,
	.head = stream_head,
	.events = stream_events,
	.shutdown = stream_shutdown,
	.secure = stream_secure,
	.free = stream_free_op,
};
