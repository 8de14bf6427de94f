/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_private.h: the state of HTTP/2 sessions and their streams, shared by
 * the two files that keep it: h2_session.c (the socket, nghttp2 and its
 * callbacks, the session's life) and h2_stream.c (each stream's
 * connection transport: the request read, the response written as HEADERS
 * and DATA). Included by nothing else; the rest of herald sees
 * h2_session.h. */
#ifndef HERALD_H2_PRIVATE_H
#define HERALD_H2_PRIVATE_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/list.h"
#include "core/config.h"
#include "net/conn.h"
#include "h2/h2_head.h"
#include "h2/h2_mem.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "net/send_batch.h"
#include "net/transport.h"

struct h2_session;
struct h2_server;

/* One piece of a gathered send: bytes of a stream connection's queue (p),
 * or, where p is NULL, of the gather's own copies (frame headers, control
 * frames) at off, whose buffer may move while it grows. */
struct h2_piece {
	const char *p;
	size_t off, len;
};

/* A session's frames of one stream round, gathered for one send of them
 * all (h2_session.c's): made at the round's first gather for the session,
 * freed once its send has its result. */
struct h2_gather {
	struct h2_piece *pc;
	int n, cap;
	char *copy; /* frame headers and control frames, in order among the pieces */
	size_t clen, ccap;
	struct iovec *iov; /* the pieces as the send reads them, made at the send */
	size_t total;
	unsigned streams;        /* stream writes gathered */
	struct h2_session *next; /* the server's list of sessions gathering */
};

/* What a stream holds only for a while (h2_stream.c's), allocated then
 * and freed after, so that an idle stream's record is small: its request
 * as it arrives. */
struct h2_stream_text {
	struct h2_request req; /* while the stream is arriving */
	/* Until the request is whole: its place among the session's
	 * incomplete requests (oldest first) and the bytes of req counted in
	 * the session's held; when its HEADERS began (loop ms). */
	struct list_node arr; /* on the session's arriving list */
	struct h2_stream *st; /* whose text this is */
	uint64_t begun;
	size_t held;
};

/* A stream's record, kept small: an idle stream is most of them. */
struct h2_stream {
	struct h2_session *s;
	int32_t id;
	bool arriving : 1;           /* its request arrives (text->req) */
	bool head_request : 1;       /* HEAD: no body */
	bool submitted : 1;          /* the response's HEADERS are queued */
	bool bodyless : 1;           /* ...with END_STREAM: no data follows */
	bool ending : 1;             /* END_STREAM once what was written is out */
	bool short_write : 1;        /* the last writev left bytes queued */
	bool want_out : 1;           /* the connection waits for room */
	bool closed : 1;             /* nghttp2 is done with the stream */
	bool ready : 1;              /* the request is whole: make the connection */
	bool pending : 1;            /* on the session's pending list */
	bool conn_gone : 1;          /* its connection closed */
	bool head_whole : 1;         /* its request's header block has ended */
	bool expired : 1;            /* not whole within header_timeout: answered 408 */
	struct conn *c;              /* NULL until made, and once it let go */
	struct h2_stream_text *text; /* NULL while it holds none of its texts */
	struct list_node link;       /* on the session's streams */
	struct list_node pend;       /* on the session's pending list, while pending */
};

struct h2_session {
	struct h2_server *h;
	nghttp2_session *ng;
	struct h2_mem mem; /* nghttp2's allocator for this session */
	int fd;
	struct transport tp; /* the lower transport, taken over */
	char peer[64];
	bool peer_unix, peer_loopback;
	uint32_t want;
	char *obuf; /* output not yet taken by the socket */
	size_t olen, ocap;
	bool blocked;             /* the socket took less than offered: no DATA until obuf drains */
	struct list streams;      /* every stream record (h2_stream.link) */
	struct list_fifo pending; /* streams to act on (h2_stream.pend), in order of arrival */
	/* Incomplete requests (HEADERS seen, END_STREAM not yet), oldest
	 * first (h2_stream_text.arr), and the bytes they hold; streams
	 * refused for it since a request last ended. */
	struct list_fifo arriving;
	size_t held;
	unsigned refused;
	/* Header blocks: the decoded size of the one arriving, and the bytes
	 * decoded in loop iteration `pass`. paused: nghttp2 stopped at a field
	 * once those passed the pass's budget, and what it left of its input
	 * waits in ibuf. */
	size_t block;
	size_t decoded;
	uint64_t pass;
	bool paused;
	char *ibuf;
	size_t ilen;
	size_t nconns; /* streams with a connection */
	/* The data source of the writev in progress. */
	struct h2_stream *cur;
	const struct iovec *cur_iov;
	int cur_n;
	size_t cur_skip, cur_len, cur_taken;
	struct h2_gather *g; /* this round's frames, while the round gathers them */
	int busy;    /* inside one of the session's own callbacks */
	bool in_ng;  /* inside nghttp2 */
	bool dead;   /* to be torn down */
	bool io_err; /* the socket failed: nothing more can be sent */
	bool kick_scheduled;
	bool zombie; /* torn down; freed by the deferred run still due */
	bool served; /* a stream was made */
	bool goaway; /* GOAWAY queued: no stream past those begun */
	struct loop_timer timer;
	uint64_t timer_at;             /* loop time the timer was last set to fire */
	struct loop_timer quiet_timer; /* gives the frame buffer's pages back after QUIET_MS without output */
	uint64_t last_active;          /* loop time the last connection left, or the session began */
	uint64_t last_out;             /* loop time the socket last took bytes */
	uint64_t started;              /* loop time the session began */
	uint64_t last_in;              /* loop time the client last sent bytes */
	uint64_t ping_at;              /* loop time our PING went out */
	bool ping_sent;                /* a PING waits for the client's answer (any input) */
	uint64_t ctl_window;           /* the second the control frames are counted in */
	unsigned ctl_count;
	struct list_node link; /* on the server's list of sessions */
};

struct h2_server {
	struct loop *lp;
	const struct config *cfg;
	struct metrics *m;
	struct conn_pool *pool;
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;
	struct list all; /* every session (h2_session.link) */
	size_t n;
	size_t streams; /* streams with a connection, over every session */
	bool draining;
	struct h2_session *gathering; /* sessions with frames gathered this round (h2_gather.next) */
	/* What a stream asks of its session, set by h2_session.c so that
	 * h2_stream.c, below it, names none of its functions: run the session
	 * at the end of this loop pass (kick); run nghttp2's sender (control
	 * frames, HEADERS, the DATA of the current data source or of ending
	 * streams), then flush (send), which does nothing while inside
	 * nghttp2 or once the session is dead. */
	void (*kick)(struct h2_session *s);
	void (*send)(struct h2_session *s);
	/* Begin gathering s's frames for the round's one send (h2_session.c). */
	void (*gather)(struct h2_session *s);
};

/* Room for a stream's gathered write of n pieces, len bytes, in one send
 * of s's gather: each DATA frame (16 KiB at most) adds its header and may
 * split a piece. (Past it the send still goes, joined into one buffer.) */
static inline bool h2_gather_room(const struct h2_session *s, int n, size_t len)
{
	int need = n + 2 * (int)(len / 16384 + 1) + 4;
	return (s->g ? s->g->n : 0) + need <= SEND_BATCH_GATHER_IOV;
}

/* The transport of every stream's connection (h2_stream.c). */
extern const struct transport_ops h2_stream_ops;

/* Put st on its session's pending list (its request is whole, or nghttp2
 * closed it while it has a connection), in order of arrival, and kick the
 * session (h2_stream.c). */
void h2_pending_push(struct h2_stream *st);

/* A new stream record of s (zeroed, unlinked), its request arriving
 * under these limits (h2_stream.c). */
struct h2_stream *h2_stream_new(struct h2_session *s, int32_t id, size_t head_limit, size_t body_limit);

/* The oldest incomplete request of s, or NULL. */
static inline struct h2_stream *h2_oldest_arriving(const struct h2_session *s)
{
	struct list_node *n = s->arriving.list.first;
	return n ? list_item(n, struct h2_stream_text, arr)->st : NULL;
}

/* The request of a stream while it arrives, else NULL. */
static inline struct h2_request *h2_stream_request(const struct h2_stream *st)
{
	return st->arriving ? &st->text->req : NULL;
}

/* Add a field or body bytes to the stream's arriving request, counting
 * what it then holds in its session's held (h2_stream.c). */
void h2_stream_field(struct h2_stream *st, const char *name, size_t namelen, const char *value, size_t valuelen);
void h2_stream_data(struct h2_stream *st, const char *data, size_t len);

/* The stream's request has all come (END_STREAM): it is no longer
 * among the session's incomplete requests, nor counted in held, though
 * it is kept until its connection is made this pass (h2_stream.c). */
void h2_stream_whole(struct h2_stream *st);

/* The stream's request is whole: move it into *out (the caller frees it
 * with h2_request_free once the connection has been handed the record of
 * it) and note a HEAD (h2_stream.c). */
void h2_stream_take_request(struct h2_stream *st, struct h2_request *out);

/* Let go of the stream's arriving request unfinished (refused, or
 * expired) (h2_stream.c). */
void h2_stream_drop_request(struct h2_stream *st);

/* Unlink and free a stream record (h2_stream.c). */
void h2_stream_free(struct h2_stream *st);

#endif
