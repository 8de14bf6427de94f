/* h2_session.c: HTTP/2 sessions over nghttp2, each HTTP/2 stream served
 * as a connection of the pool without a socket of its own.
 *
 * A session:   taken over (preface seen) -> OPEN -> dead (error, EOF,
 * GOAWAY done, idle, stalled) -> torn down at the end of the session's own
 * callback (its socket wake-up, its deferred run, its timer), never inside
 * nghttp2 or a stream's write. Tearing down closes every stream's
 * connection first.
 *
 * A stream:    HEADERS (fields into an h2_request) -> request whole
 * (END_STREAM) -> its connection is made after nghttp2 returns, reads the
 * request text and runs its handler -> writes: the response head becomes
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
 * catch-up from the store.
 *
 * Limits: nghttp2 enforces SETTINGS_MAX_CONCURRENT_STREAMS
 * (http2_max_streams), CONTINUATION counts, the rate of RST_STREAM (rapid
 * reset) and the queue of unsent acknowledgements; herald bounds header
 * lists (431), bodies (413), PING and SETTINGS per second, input read
 * while output waits, idle and stalled sessions, and a client silent for
 * keepalive_timeout (a PING, which it must answer within stall_timeout). */
#include "h2_session.h"

#include <errno.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "h2_head.h"
#include "http.h"
#include "log.h"
#include "util.h"

#define READ_CHUNK 16384
#define READ_BUDGET (64 * 1024) /* bytes read per wake-up per session */
#define OBUF_HIGH (64 * 1024)   /* unsent output past which input and control frames wait */
#define HEAD_MAX 16384          /* a response head */
#define FIELDS_MAX 64
#define IOV_MAX_H2 160
#define CONTROL_PER_SEC 250      /* PING and SETTINGS frames a client may send per second */
#define COALESCE_MAX (16384 + 9) /* one DATA frame */

struct h2_session;

struct h2_stream {
	struct h2_session *s;
	int32_t id;
	struct conn *c;         /* NULL until made, and once it let go */
	struct h2_request *req; /* while the request arrives */
	char *in;               /* the request text, until the connection read it */
	size_t in_len, in_off;
	char *head; /* a response head split over writes (rare) */
	size_t head_len;
	bool head_request; /* HEAD: no body */
	bool submitted;    /* the response's HEADERS are queued */
	bool bodyless;     /* ...without a data source */
	bool ending;       /* END_STREAM once what was written is out */
	bool short_write;  /* the last writev left bytes queued */
	bool want_out;     /* the connection waits for room */
	bool closed;       /* nghttp2 is done with the stream */
	bool ready;        /* the request is whole: make the connection */
	bool pending;      /* on the session's pending list */
	bool conn_gone;    /* its connection closed */
	struct h2_stream *next, *prev;
	struct h2_stream *pend_next;
};

struct h2_session {
	struct h2_server *h;
	nghttp2_session *ng;
	int fd;
	struct transport tp; /* the lower transport, taken over */
	char peer[64];
	bool peer_unix, peer_loopback;
	uint32_t want;
	char *obuf; /* output not yet taken by the socket */
	size_t olen, ocap;
	bool blocked; /* the socket took less than offered: no DATA until obuf drains */
	struct h2_stream *streams;
	struct h2_stream *pending;
	size_t nconns; /* streams with a connection */
	/* The data source of the writev in progress. */
	struct h2_stream *cur;
	const struct iovec *cur_iov;
	int cur_n;
	size_t cur_skip, cur_len, cur_taken;
	int busy;    /* inside one of the session's own callbacks */
	bool in_ng;  /* inside nghttp2 */
	bool dead;   /* to be torn down */
	bool io_err; /* the socket failed: nothing more can be sent */
	bool kick_scheduled;
	bool zombie; /* torn down; freed by the deferred run still due */
	bool served; /* a stream was made */
	bool goaway; /* GOAWAY queued: no stream past those begun */
	struct loop_timer timer;
	uint64_t last_active; /* loop time the last connection left, or the session began */
	uint64_t last_out;    /* loop time the socket last took bytes */
	uint64_t started;     /* loop time the session began */
	uint64_t last_in;     /* loop time the client last sent bytes */
	uint64_t ping_at;     /* loop time our PING went out */
	bool ping_sent;       /* a PING waits for the client's answer (any input) */
	uint64_t ctl_window;  /* the second the control frames are counted in */
	unsigned ctl_count;
	struct h2_session *next, *prev;
};

struct h2_server {
	struct loop *lp;
	const struct config *cfg;
	struct metrics *m;
	struct conn_pool *pool;
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;
	struct h2_session *all;
	size_t n;
	bool draining;
};

static const struct transport_ops stream_ops;
static void kick(struct h2_session *s);
static void finish(struct h2_session *s);

static void fail(struct h2_session *s, const char *why)
{
	if (!s->dead && why)
		log_debug("closing HTTP/2 connection from %s: %s", s->peer, why);
	s->dead = true;
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

/* Write iov (the output buffer first, when it has bytes, as iov[0]) to the
 * socket; what it does not take joins the output buffer. */
static void write_out(struct h2_session *s, struct iovec *iov, int n, bool first_is_obuf)
{
	struct h2_server *h = s->h;
	ssize_t w = 0;
	if (!s->io_err) {
		for (;;) {
			w = transport_writev(&s->tp, iov, n);
			if (w != -EINTR)
				break;
		}
	}
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

/* nghttp2's serialised frames (all but no-copy DATA): into the buffer,
 * which the caller flushes. Past OBUF_HIGH they wait inside nghttp2,
 * whose queue of unsent acknowledgements is bounded. */
static ssize_t on_send(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *user)
{
	struct h2_session *s = user;
	(void)ng;
	(void)flags;
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
static void session_send(struct h2_session *s)
{
	if (s->in_ng || s->dead)
		return;
	s->in_ng = true;
	int r = nghttp2_session_send(s->ng);
	s->in_ng = false;
	if (r < 0)
		fail(s, nghttp2_strerror(r));
	flush_obuf(s);
}

/* ---- streams ---- */

static void pending_push(struct h2_stream *st)
{
	struct h2_session *s = st->s;
	if (st->pending)
		return;
	/* In order of arrival: the caps admit the streams opened first. */
	st->pending = true;
	st->pend_next = NULL;
	struct h2_stream **pp = &s->pending;
	while (*pp)
		pp = &(*pp)->pend_next;
	*pp = st;
	kick(s);
}

static void pending_remove(struct h2_stream *st)
{
	struct h2_stream **pp = &st->s->pending;
	while (*pp && *pp != st)
		pp = &(*pp)->pend_next;
	if (*pp)
		*pp = st->pend_next;
	st->pending = false;
}

static void stream_free(struct h2_stream *st)
{
	struct h2_session *s = st->s;
	if (st->pending)
		pending_remove(st);
	if (st->prev)
		st->prev->next = st->next;
	else
		s->streams = st->next;
	if (st->next)
		st->next->prev = st->prev;
	if (st->req) {
		h2_request_free(st->req);
		free(st->req);
	}
	free(st->in);
	free(st->head);
	if (s->cur == st)
		s->cur = NULL;
	if (s->ng && !s->dead && !st->closed)
		nghttp2_session_set_stream_user_data(s->ng, st->id, NULL);
	free(st);
}

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
			kick(s);
		return NGHTTP2_ERR_DEFERRED;
	}
	size_t avail = s->cur_len - s->cur_taken;
	if (avail == 0 || s->blocked)
		return NGHTTP2_ERR_DEFERRED;
	*flags |= NGHTTP2_DATA_FLAG_NO_COPY;
	return (ssize_t)MIN(length, avail);
}

/* Queue the response head as HEADERS with the stream's data source. */
static int submit_head(struct h2_stream *st, char *head, size_t len)
{
	struct h2_session *s = st->s;
	struct h2_field f[FIELDS_MAX];
	size_t n = 0;
	int status = 0;
	if (h2_head_parse(head, len, &status, f, FIELDS_MAX, &n) <= 0)
		return -1;
	nghttp2_nv nv[FIELDS_MAX + 1];
	char code[4] = { (char)('0' + status / 100 % 10), (char)('0' + status / 10 % 10), (char)('0' + status % 10),
			 0 };
	nv[0] = (nghttp2_nv){ (uint8_t *)":status", (uint8_t *)code, 7, 3, NGHTTP2_NV_FLAG_NONE };
	for (size_t i = 0; i < n; i++)
		nv[i + 1] = (nghttp2_nv){ (uint8_t *)f[i].name, (uint8_t *)f[i].value, f[i].namelen, f[i].valuelen,
					  NGHTTP2_NV_FLAG_NONE };
	st->bodyless = st->head_request || status == 204 || status == 304;
	nghttp2_data_provider prd = { .source.ptr = st, .read_callback = read_data };
	int r = nghttp2_submit_response(s->ng, st->id, nv, n + 1, st->bodyless ? NULL : &prd);
	if (r < 0)
		return -1;
	st->submitted = true;
	return 0;
}

/* Take the response head from the start of what the connection writes
 * (nearly always whole in its first piece), and queue it as HEADERS once
 * it is whole. Returns the bytes of it consumed, or -1. */
static ssize_t take_head(struct h2_stream *st, const struct iovec *iov, int n)
{
	char buf[HEAD_MAX];
	size_t have = st->head_len, used = 0;
	if (have)
		memcpy(buf, st->head, have);
	for (int i = 0; i < n; i++) {
		if (have == HEAD_MAX)
			return -1;
		size_t take = MIN(HEAD_MAX - have, iov[i].iov_len);
		memcpy(buf + have, iov[i].iov_base, take);
		size_t end = h2_head_end(buf, have + take);
		if (end) {
			if (submit_head(st, buf, end) < 0)
				return -1;
			free(st->head);
			st->head = NULL;
			st->head_len = 0;
			return (ssize_t)(used + end - have);
		}
		have += take;
		used += take;
	}
	st->head = xrealloc(st->head, have ? have : 1);
	memcpy(st->head, buf, have);
	st->head_len = have;
	return (ssize_t)used;
}

static ssize_t stream_read(struct transport *t, void *buf, size_t len)
{
	struct h2_stream *st = t->state;
	if (!st->in)
		return -EAGAIN;
	size_t n = MIN(len, st->in_len - st->in_off);
	memcpy(buf, st->in + st->in_off, n);
	st->in_off += n;
	if (st->in_off == st->in_len) {
		free(st->in);
		st->in = NULL;
	}
	return (ssize_t)n;
}

static ssize_t stream_writev(struct transport *t, const struct iovec *iov, int n)
{
	struct h2_stream *st = t->state;
	struct h2_session *s = st->s;
	if (s->dead || st->closed)
		return -EPIPE;
	if (s->in_ng) {
		kick(s);
		return -EAGAIN;
	}
	size_t total = 0;
	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	size_t off = 0;
	if (!st->submitted) {
		ssize_t u = take_head(st, iov, n);
		if (u < 0) {
			log_warn("HTTP/2 stream from %s: response head not understood", s->peer);
			return -EIO;
		}
		off = (size_t)u;
	}
	if (st->submitted && st->bodyless)
		off = total; /* nothing follows the head */
	size_t taken = 0;
	if (off < total && !s->blocked) {
		s->cur = st;
		s->cur_iov = iov;
		s->cur_n = n;
		s->cur_skip = off;
		s->cur_len = total - off;
		s->cur_taken = 0;
		nghttp2_session_resume_data(s->ng, st->id);
		session_send(s);
		taken = s->cur_taken;
		s->cur = NULL;
		s->cur_iov = NULL;
	} else {
		session_send(s); /* the HEADERS */
	}
	if (s->dead)
		kick(s);
	size_t w = off + taken;
	st->short_write = w < total;
	return w ? (ssize_t)w : -EAGAIN;
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
		st->ending = true;
		nghttp2_session_resume_data(s->ng, st->id);
	}
	kick(s);
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
	if (s->nconns == 0)
		s->last_active = loop_now(s->h->lp);
	if (s->dead || st->closed) {
		stream_free(st);
		return;
	}
	if (!st->ending)
		end_stream(st);
}

static const struct transport_ops stream_ops = {
	.name = "h2",
	.ready_at_accept = true,
	.read = stream_read,
	.writev = stream_writev,
	.events = stream_events,
	.shutdown = stream_shutdown,
	.free = stream_free_op,
};

/* ---- nghttp2's input callbacks ---- */

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *user)
{
	struct h2_session *s = user;
	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	const struct config *cfg = s->h->cfg;
	struct h2_stream *st = xcalloc(1, sizeof(*st));
	st->s = s;
	st->id = frame->hd.stream_id;
	st->req = xcalloc(1, sizeof(*st->req));
	st->req->head_limit = (size_t)(cfg->max_request_line + cfg->max_header_bytes);
	st->req->body_limit = (size_t)cfg->max_body;
	st->next = s->streams;
	if (s->streams)
		s->streams->prev = st;
	s->streams = st;
	nghttp2_session_set_stream_user_data(ng, st->id, st);
	return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name, size_t namelen,
		     const uint8_t *value, size_t valuelen, uint8_t flags, void *user)
{
	(void)flags;
	(void)user;
	if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0; /* trailers: nothing herald reads */
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
	if (st && st->req)
		h2_request_field(st->req, (const char *)name, namelen, (const char *)value, valuelen);
	return 0;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t id, const uint8_t *data, size_t len, void *user)
{
	(void)flags;
	(void)user;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, id);
	if (st && st->req)
		h2_request_data(st->req, (const char *)data, len);
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
		if (!(frame->hd.flags & NGHTTP2_FLAG_ACK) && control_flood(s)) {
			fail(s, "PING or SETTINGS flood");
			nghttp2_session_terminate_session(ng, NGHTTP2_ENHANCE_YOUR_CALM);
		}
		return 0;
	case NGHTTP2_HEADERS:
	case NGHTTP2_DATA:
		break;
	default:
		return 0;
	}
	if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	struct h2_stream *st = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
	if (st && st->req && !st->ready) {
		st->ready = true;
		pending_push(st);
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
		pending_push(st); /* its connection closes after nghttp2 returns */
	else
		stream_free(st);
	return 0;
}

/* ---- the session's own work ---- */

/* Queue a graceful GOAWAY (once): the streams begun go on, new ones go to
 * a new connection. */
static void go_away(struct h2_session *s)
{
	if (s->goaway)
		return;
	s->goaway = true;
	nghttp2_submit_goaway(s->ng, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(s->ng),
			      NGHTTP2_NO_ERROR, NULL, 0);
	kick(s);
}

/* Make the connection of a stream whose request is whole. */
static void make_conn(struct h2_session *s, struct h2_stream *st)
{
	struct h2_server *h = s->h;
	/* Rotation moves readers, and so a session older than rotate_after
	 * sends its new streams elsewhere (a restarted proxy, another node). */
	int64_t rotate = h->cfg->rotate_after_ms;
	if (rotate > 0 && loop_now(h->lp) - s->started >= (uint64_t)rotate)
		go_away(s);
	size_t len = 0;
	char *text = h2_request_finish(st->req, &len);
	bool too_large = st->req->too_large;
	st->head_request = h2_request_is_head(st->req);
	h2_request_free(st->req);
	free(st->req);
	st->req = NULL;
	if (!text && !too_large) {
		nghttp2_submit_rst_stream(s->ng, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_PROTOCOL_ERROR);
		return;
	}
	st->in = text;
	st->in_len = len;
	s->nconns++;
	s->served = true;
	st->conn_gone = false;
	struct conn *c = conn_new_virtual(h->pool, s->peer, s->peer_unix, s->peer_loopback, &stream_ops, st);
	/* Its handler may have run and closed it already; st stays (nghttp2
	 * has not closed the stream while the session was not running it). */
	if (st->conn_gone)
		return;
	st->c = c;
	if (!text)
		conn_refuse(c, 431, http_error_cause(431), "request header fields too large", NULL);
}

static void run_pending(struct h2_session *s)
{
	while (s->pending && !s->dead) {
		struct h2_stream *st = s->pending;
		s->pending = st->pend_next;
		st->pending = false;
		if (st->closed) {
			if (st->c)
				conn_close(st->c, NULL); /* frees st */
			else
				stream_free(st);
		} else if (st->ready && st->req) {
			make_conn(s, st);
		}
	}
}

/* Wake every stream connection waiting for room that has some now. */
static void wake_streams(struct h2_session *s)
{
	if (s->blocked || s->dead || nghttp2_session_get_remote_window_size(s->ng) <= 0)
		return;
	for (struct h2_stream *st = s->streams, *next; st; st = next) {
		next = st->next;
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

static void read_input(struct h2_session *s)
{
	char buf[READ_CHUNK];
	size_t budget = READ_BUDGET;
	while (budget && !s->dead && s->olen < OBUF_HIGH) {
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
		s->in_ng = true;
		ssize_t r = nghttp2_session_mem_recv(s->ng, (const uint8_t *)buf, (size_t)n);
		s->in_ng = false;
		if (r < 0) {
			fail(s, nghttp2_strerror((int)r));
			break;
		}
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
	session_send(s);
	wake_streams(s);
	run_pending(s);
	session_send(s);
}

static void on_timer(void *arg);

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
	if ((want & EPOLLIN) && transport_input_pending(&s->tp))
		kick(s);
	/* One timer: stalled output, an idle session, or (with streams) a
	 * client silent for keepalive_timeout, then its PING's answer. */
	if (!loop_timer_active(&s->timer)) {
		const struct config *cfg = h->cfg;
		int64_t ms = s->olen || s->ping_sent  ? cfg->stall_timeout_ms
			     : s->nconns || s->served ? cfg->keepalive_timeout_ms
						      : cfg->header_timeout_ms;
		loop_timer_start(h->lp, &s->timer, (uint64_t)ms, on_timer, s);
	}
}

static void teardown(struct h2_session *s)
{
	struct h2_server *h = s->h;
	s->dead = true;
	if (s->prev)
		s->prev->next = s->next;
	else
		h->all = s->next;
	if (s->next)
		s->next->prev = s->prev;
	h->n--;
	while (s->streams) {
		struct h2_stream *st = s->streams;
		if (st->c)
			conn_close(st->c, NULL); /* frees st */
		else
			stream_free(st);
	}
	nghttp2_session_del(s->ng);
	s->ng = NULL;
	loop_timer_stop(h->lp, &s->timer);
	loop_unwatch(h->lp, s->fd);
	transport_free(&s->tp);
	close(s->fd);
	free(s->obuf);
	s->obuf = NULL;
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
	s->busy++;
	if (!s->dead) {
		if ((s->want & EPOLLIN) && transport_input_pending(&s->tp))
			read_input(s);
		run(s);
	}
	s->busy--;
	finish(s);
}

/* Run the session at the end of this loop pass. */
static void kick(struct h2_session *s)
{
	if (s->kick_scheduled || s->zombie)
		return;
	s->kick_scheduled = true;
	loop_defer(s->h->lp, deferred, s);
}

static void on_timer(void *arg)
{
	struct h2_session *s = arg;
	const struct config *cfg = s->h->cfg;
	uint64_t now = loop_now(s->h->lp);
	s->busy++;
	if (s->olen && now - s->last_out >= (uint64_t)cfg->stall_timeout_ms) {
		fail(s, "no bytes accepted within stall_timeout");
	} else if (!s->olen && s->nconns == 0) {
		uint64_t idle = (uint64_t)(s->served ? cfg->keepalive_timeout_ms : cfg->header_timeout_ms);
		if (now - s->last_active >= idle) {
			nghttp2_session_terminate_session(s->ng, NGHTTP2_NO_ERROR);
			session_send(s);
			s->dead = true;
		} else {
			loop_timer_start(s->h->lp, &s->timer, idle - (now - s->last_active), on_timer, s);
		}
	} else if (s->ping_sent && now - s->ping_at >= (uint64_t)cfg->stall_timeout_ms) {
		fail(s, "no answer to PING within stall_timeout");
	} else if (!s->ping_sent && now - s->last_in >= (uint64_t)cfg->keepalive_timeout_ms) {
		/* Streams only write, so a peer gone without a word would hold
		 * them until the socket fills: ask it for a sign of life. */
		s->ping_sent = true;
		s->ping_at = now;
		nghttp2_submit_ping(s->ng, NGHTTP2_FLAG_NONE, NULL);
		session_send(s);
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
	transport_moved(&s->tp, s->peer);
	s->started = s->last_active = s->last_out = s->last_in = loop_now(h->lp);
	nghttp2_session_server_new2(&s->ng, h->cbs, s, h->opt);
	nghttp2_settings_entry iv[] = {
		{ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)cfg->http2_max_streams },
		{ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)(cfg->max_request_line + cfg->max_header_bytes) },
		{ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
		{ NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1 },
	};
	nghttp2_submit_settings(s->ng, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
	if (h->draining)
		go_away(s);
	s->next = h->all;
	if (h->all)
		h->all->prev = s;
	h->all = s;
	h->n++;
	s->want = transport_events(&s->tp, EPOLLIN | EPOLLRDHUP);
	if (loop_watch(h->lp, fd, s->want, on_io, s) < 0) {
		s->io_err = true;
		fail(s, "cannot watch the socket");
	}
	/* The preface and whatever came with it. */
	s->busy++;
	if (!s->dead) {
		s->in_ng = true;
		ssize_t r = nghttp2_session_mem_recv(s->ng, (const uint8_t *)bytes, n);
		s->in_ng = false;
		if (r < 0)
			fail(s, nghttp2_strerror((int)r));
		/* More may wait inside TLS or the socket. */
		if (!s->dead)
			read_input(s);
		run(s);
	}
	s->busy--;
	/* The connection being taken over is still on the stack: tear down
	 * later if it has to be. */
	if (s->dead)
		kick(s);
	else
		update(s);
	return true;
}

struct conn_takeover h2_server_takeover(struct h2_server *h)
{
	return (struct conn_takeover){ .arg = h, .take = take };
}

struct h2_server *h2_server_new(struct loop *lp, const struct config *cfg, struct metrics *m, struct conn_pool *pool)
{
	struct h2_server *h = xcalloc(1, sizeof(*h));
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
	/* Closed streams are not kept for the priority tree (herald sends
	 * in the order its connections write). */
	nghttp2_option_set_no_closed_streams(h->opt, 1);
	return h;
}

void h2_server_drain(struct h2_server *h)
{
	h->draining = true;
	for (struct h2_session *s = h->all; s; s = s->next)
		go_away(s);
}

size_t h2_server_sessions(const struct h2_server *h)
{
	return h->n;
}

void h2_server_free(struct h2_server *h)
{
	if (!h)
		return;
	while (h->all) {
		struct h2_session *s = h->all;
		s->io_err = true;          /* no goodbye at exit */
		s->kick_scheduled = false; /* the loop runs no more deferred work */
		teardown(s);
	}
	nghttp2_session_callbacks_del(h->cbs);
	nghttp2_option_del(h->opt);
	free(h);
}
