/* SPDX-License-Identifier: BSD-2-Clause */
/* conn.h: client connections: each one's read buffer, output queue of
 * shared chunks written with writev once per loop pass, EPOLLOUT armed only
 * while output is pending, its one timer, and a close that is safe from
 * inside its own callbacks; and the pool that owns them all, with the
 * end-of-pass flush list and the deferred free.
 *
 * States: READING (collecting a request head and body) -> WAITING (a handler
 * owns the request, e.g. a publish awaiting group commit; input paused) ->
 * READING again for keep-alive, or STREAMING (an SSE reader: output only).
 * A connection that is to close after its last response goes to LINGERING
 * once that is written (write side shut, input drained briefly) -> CLOSED.
 * Any state may go to CLOSED.
 *
 * Layering: conn knows nothing of the handlers above it. The pool's hooks
 * (set once by whoever builds the server) take complete requests; what a
 * handler attaches to one connection (a stream, a waiting publish) is told
 * through that connection's conn_user when the output drains and when the
 * connection closes. Bytes move through the connection's transport
 * (transport.h), whose table the accepting side picks; conn never names
 * one. The fields of struct conn belong to conn.c; every other module uses
 * the functions below, and struct conn_pool is conn.c's and conn_pool.c's
 * alone (net/conn_private.h). */
#ifndef HERALD_CONN_H
#define HERALD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/chunk.h"
#include "common/list.h"
#include "core/config.h"
#include "http/http.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "net/outq.h"
#include "net/transport.h"

struct conn;
struct conn_pool;

enum conn_state { CONN_READING, CONN_WAITING, CONN_STREAMING, CONN_LINGERING, CONN_CLOSED };

/* What the pool's owner does with requests. Every function gets the
 * owner pointer back. */
struct conn_hooks {
	void *owner;
	/* A complete request (head and body; slices valid only during the
	 * call): respond (conn_respond / conn_refuse), turn the connection into
	 * a stream, or leave it WAITING (conn_wait). */
	void (*request)(void *owner, struct conn *c, const struct http_request *req, const char *body, size_t body_len);
	/* The head of a request that sent Expect: 100-continue is complete and
	 * its body is not: true when it would be taken (100 Continue is sent);
	 * otherwise the hook has refused it. */
	bool (*expect_continue)(void *owner, struct conn *c, const struct http_request *req);
	/* A refusal is being sent (for the log): its sentence. */
	void (*refused)(void *owner, struct conn *c, int status, const char *message);
	/* The fields every answer to req carries, whoever makes it (the
	 * Mercure hub's Link on its paths), added to h: asked for the
	 * refusals conn.c makes once it has a request's head (411, 413).
	 * NULL: none. */
	void (*answer_headers)(void *owner, struct conn *c, const struct http_request *req, struct http_head *h);
};

/* What a handler attaches to one connection (conn_attach). */
struct conn_user {
	void (*drained)(struct conn *c, void *data); /* the output queue is empty; may be NULL */
	void (*closed)(struct conn *c, void *data);  /* the connection is closing: let go of it */
};

struct conn {
	int fd;
	enum conn_state state;
	struct conn_pool *pool;
	struct transport tp; /* how bytes move: plain, TLS (chosen at accept) */
	char *client;        /* client address after trusted-proxy rules; NULL while it is the peer */
	char *what;          /* "METHOD /path" of the request being handled, for logs; NULL: "" (a stream's) */

	char *rbuf;          /* the request bytes read and not yet consumed */
	uint32_t rlen, rcap; /* rcap is at most read_cap (the request's limits) */

	struct outq out;
	uint64_t last_progress; /* loop time of the last byte written, or enqueue into an empty queue */

	/* The flags together, a bit each, so that the record has no padding:
	 * most of a reader's memory is records like this one, and with an
	 * IPv4 peer it fits malloc's 240-byte size (docs/BENCHMARKS.md). */
	uint32_t want; /* epoll events currently requested */
	bool peer_unix : 1;
	bool peer_loopback : 1;
	bool rbuf_lent : 1; /* rbuf is the pool's read_buf, for the length of one wake-up */
	bool flush_scheduled : 1;
	bool stream_scheduled : 1; /* on the pool's stream_list */
	bool close_after_flush : 1;
	bool keep_alive : 1;
	bool served : 1;       /* answered at least one request */
	bool reparse : 1;      /* buffered input to parse after the current response */
	bool peer_eof : 1;     /* the client shut down its side */
	bool in_handler : 1;   /* inside the request hook: the request is not consumed yet */
	bool continued : 1;    /* sent 100 Continue for the request being read */
	bool head_request : 1; /* the request being answered is a HEAD: its response has no body */
	bool wait_hangup : 1;  /* WAITING: the client's hang-up closes it (conn_wait_hangup) */

	struct loop_timer timer; /* request, keep-alive, send-progress or linger timeout */
	const struct conn_user *user;
	void *user_data;

	struct list_node link;    /* on the pool's list of all connections; once closed, its graveyard */
	struct conn *flush_next;  /* the pool's flush list */
	struct conn *stream_next; /* the pool's stream list */
	/* The peer address as text ("unix" for the unix socket), allocated
	 * with the record at its exact length; it never changes, so a
	 * transport may keep pointing at it. */
	char peer[];
};

/* A new empty pool on lp; cfg (timeouts and limits, read at each use, so
 * a reload takes effect) and m must outlive it. The caller owns it and
 * frees it with conn_pool_free. */
struct conn_pool *conn_pool_new(struct loop *lp, const struct config *cfg, struct metrics *m,
				const struct conn_hooks *hooks);

/* Close every connection (conn_pool_close_all) and free the pool (NULL:
 * nothing). */
void conn_pool_free(struct conn_pool *p);

/* Open connections. */
size_t conn_pool_count(const struct conn_pool *p);

/* Whether conn_pool_drain was called: no more connections are taken. */
bool conn_pool_draining(const struct conn_pool *p);

/* writev calls (or their transport's equivalent) and stream rounds so
 * far. */
uint64_t conn_pool_writes(const struct conn_pool *p);
uint64_t conn_pool_stream_rounds(const struct conn_pool *p);

/* Set the gap between stream rounds (conn.c): at most max_ms, and at most
 * factor times the last round's length. */
void conn_pool_set_stream_gap(struct conn_pool *p, uint64_t max_ms, uint64_t factor);

/* Stop keep-alive for good and close every connection that is idle between
 * requests; the rest close after their answers. */
void conn_pool_drain(struct conn_pool *p);

/* Close every connection now and free them (at exit). */
void conn_pool_close_all(struct conn_pool *p);

/* Take ownership of an accepted, non-blocking fd whose bytes move through
 * the transport ops (opened with ctx, the listener's: a TLS context), and
 * read the request at once when the transport is ready at accept and it
 * has arrived (its handler may run, and close it, before this returns).
 * Returns the connection (freed after conn_close) or NULL when the
 * transport cannot start or the fd cannot be watched (the fd is closed
 * then). */
struct conn *conn_new(struct conn_pool *p, int fd, const struct sockaddr *sa, socklen_t salen,
		      const struct transport_ops *ops, void *ctx);

/* A connection without a socket of its own: one HTTP/2 stream, whose bytes
 * move through ops with state (the session's stream; it never touches
 * conn.h). peer names the session's client as conn_new would, with
 * peer_unix and peer_loopback likewise. Its request comes as a record,
 * not text (req; NULL: none, the caller refuses it): judged at once by
 * the limits of an HTTP/1.1 head (http_request_check) and, with its whole
 * body, handed to the request hook, so its handler may run (and close it)
 * before this returns. req and body need stay valid only during the call.
 * Its transport reads nothing. Returns the connection (freed after
 * conn_close); its transport's free is called on close. */
struct conn *conn_new_virtual(struct conn_pool *p, const char *peer, bool peer_unix, bool peer_loopback,
			      const struct transport_ops *ops, void *state, const struct http_request *req,
			      const char *body, size_t body_len);

/* What the transport of a connection without a socket has to report, as
 * epoll would for a socket: input to read (EPOLLIN), room to write
 * (EPOLLOUT). Nothing when c is closed. */
void conn_wake(struct conn *c, uint32_t events);

/* Whoever takes over a connection whose client opened with the HTTP/2
 * preface (`PRI * HTTP/2.0`), set once by the pool's owner (NULL: such a
 * client is refused with 505, as before). take gets the socket fd (no
 * longer watched), the connection's transport (its state moves over: call
 * transport_moved), and the bytes read so far (valid during the call),
 * and returns true; the connection then closes without touching either.
 * false: not taken (HTTP/2 is off), the preface is refused with 505. */
struct conn_takeover {
	void *arg;
	bool (*take)(void *arg, const struct conn *c, int fd, const struct transport *tp, const char *bytes, size_t n);
};
void conn_pool_set_takeover(struct conn_pool *p, const struct conn_takeover *t);

struct send_batch;

/* Who makes one send of many connections' gathered bytes (the transport's
 * gather op): an HTTP/2 server, one send per session for all its streams.
 * Set once by the pool's owner. At the end of a stream round's gathering,
 * send queues each of its sends in b with send_batch_add_gathered (tag its
 * own), or writes it at once where b is NULL or has no room; sent gets
 * the result of each one queued, after the batch ran and before any
 * connection takes its bytes off its queue. Neither may close, write to or
 * queue to a connection (they run between a send and its results being
 * taken). */
struct conn_gatherer {
	void *arg;
	void (*send)(void *arg, struct send_batch *b);
	void (*sent)(void *arg, void *tag, ssize_t w);
};
void conn_pool_set_gatherer(struct conn_pool *p, const struct conn_gatherer *g);

/* Attach a handler's state to c: user->drained and user->closed are called
 * with data. Replaces what was attached; conn_respond detaches it. */
void conn_attach(struct conn *c, const struct conn_user *user, void *data);

/* Queue a reference to ch (the caller keeps its own) and schedule one flush
 * for the end of this loop pass. id is the event id the chunk carries, or 0.
 * Such an entry (a response head, a reset) is never dropped. */
void conn_enqueue(struct conn *c, struct chunk *ch, int64_t id);

/* The same for an event or heartbeat frame, which conn_drop_queue may drop
 * (the hub sends the events again from the store). */
void conn_enqueue_frame(struct conn *c, struct chunk *ch, int64_t id);

/* Queue a response: the head h in the transport's form (HTTP/1.1 text,
 * or HEADERS on an HTTP/2 stream) and len bytes of body (copied; none to
 * a HEAD request, whose head is GET's, Content-Length included), count it
 * by h->status, detach any handler state, and resume reading the next
 * request afterwards, or close once it is written when h->keep_alive is
 * false. h stays the caller's. */
void conn_respond(struct conn *c, const struct http_head *h, const char *body, size_t len);

/* Queue a stream's response head with the first bytes of its body
 * (copied; none to a HEAD request), in the transport's form, as
 * conn_enqueue would (never dropped); the stream's frames follow. */
void conn_send_head(struct conn *c, const struct http_head *h, const char *body, size_t len);

/* As conn_send_head, for a head many streams share: text is h followed by
 * body already made into HTTP/1.1 text (http_head_text), which a transport
 * that writes text takes a reference to, so an open allocates nothing;
 * HTTP/2 submits h and sends body, and a HEAD request gets h alone. */
void conn_send_head_made(struct conn *c, const struct http_head *h, struct chunk *text, const char *body, size_t len);

/* Send the standard JSON refusal, count and log it, and close the
 * connection after it. cause is a short stable name (a static string, the
 * label of herald_refusals_total: "per_address_limit", "bad_parameter");
 * message is the sentence for the body and the log, copied at once.
 * extra: fields added to the head after the usual ones (its status is not
 * looked at; NULL: none), the caller's. */
void conn_refuse(struct conn *c, int status, const char *cause, const char *message, const struct http_head *extra);

/* The same with one field added, name: value (none when value is NULL):
 * a challenge (WWW-Authenticate) or a Retry-After. */
void conn_refuse_with(struct conn *c, int status, const char *cause, const char *message, const char *name,
		      const char *value);

/* The same refusal (logged and counted as status with its cause) sent as
 * another response (h and body as for conn_respond; the connection closes
 * after it): a stream refusal a browser survives is a 200 event stream
 * that ends at once. */
void conn_refuse_as(struct conn *c, int status, const char *cause, const char *message, const struct http_head *h,
		    const char *body, size_t len);

/* Count a response by status (conn_respond does it; a stream's 200 head
 * is counted by its handler). */
void conn_count_response(struct conn *c, int status);

/* The request now waits for its handler (a publish awaiting its commit):
 * input pauses from the end of the pass until conn_respond. An answer
 * work deferred before this call gives is there before the pause. */
void conn_wait(struct conn *c);

/* The same for a request that may wait long (a stream's open waiting for
 * the application's answer): a client that hangs up meanwhile (EOF, as a
 * stream's does) closes the connection, so what waits for it is let go
 * of at once. Until the answer. */
static inline void conn_wait_hangup(struct conn *c)
{
	c->wait_hangup = true; /* cleared by conn_respond */
	conn_wait(c);
}

/* c is a stream from now on: its read buffer and its request's text go
 * (conn_what is "" after), input is read and dropped, its liveness is the
 * hub's to judge, and its transport is told (a TLS session may shed all
 * but its write side). */
void conn_become_stream(struct conn *c);

/* Drop every queued event or heartbeat frame that has not started to be
 * written; response heads, resets and responses stay, in order. Returns the
 * id of the last event that remains queued or written (the resume point). */
int64_t conn_drop_queue(struct conn *c);

/* Set the resume point (the id a drop falls back to when nothing later is
 * kept): a reader's starting point. */
void conn_set_resume_point(struct conn *c, int64_t id);

/* Unwritten bytes queued. */
size_t conn_queued_bytes(const struct conn *c);

/* Milliseconds since the client last took bytes (or since output was
 * queued to an empty queue). */
uint64_t conn_idle_ms(const struct conn *c);

/* End the connection once its queue is written (a stream being rotated or
 * drained); a client that takes no bytes for stall_timeout is closed. */
void conn_end_after_flush(struct conn *c);

/* Whether conn_end_after_flush (or a final response) is pending. */
bool conn_ending(const struct conn *c);

/* Close now: unwatch, close the fd, release the queue, tell what is
 * attached. Safe to call twice and from the connection's own callbacks;
 * the struct is freed at the end of the loop pass. */
void conn_close(struct conn *c, const char *why);

/* Accessors for handlers. */
const char *conn_client(const struct conn *c); /* after trusted-proxy rules */
void conn_set_client(struct conn *c, const char *client);
const char *conn_peer(const struct conn *c); /* the socket's peer ("unix") */
bool conn_peer_unix(const struct conn *c);
bool conn_has_socket(const struct conn *c);  /* false: an HTTP/2 stream's (conn_new_virtual) */
bool conn_peer_local(const struct conn *c);  /* loopback or the unix socket */
bool conn_secure(const struct conn *c);      /* came over TLS (an https request) */
const char *conn_what(const struct conn *c); /* "METHOD /path", or "" */
bool conn_keep_alive(const struct conn *c);  /* the client allows another request */
bool conn_draining(const struct conn *c);    /* the server is shutting down */
void conn_set_keep_alive(struct conn *c, bool keep);
void *conn_owner(const struct conn *c); /* the pool hooks' owner */

#endif
