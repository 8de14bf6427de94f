/* conn.h: one client connection: the read buffer, the output queue of shared
 * chunks written with writev, EPOLLOUT armed only while output is pending,
 * the request/keep-alive timers, and a close that is safe from inside the
 * connection's own callbacks.
 *
 * States: READING (collecting a request head and body) -> WAITING (a handler
 * owns the request, e.g. a publish awaiting group commit; input paused) ->
 * READING again for keep-alive, or STREAMING (an SSE reader: output only, the
 * hub owns what is queued). A connection that is to close after its last
 * response goes to LINGERING once that is written (write side shut, input
 * drained briefly) -> CLOSED. Any state may go to CLOSED. */
#ifndef HERALD_CONN_H
#define HERALD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "chunk.h"
#include "loop.h"

struct server;
struct listener;
struct reader;
struct tls_conn;

enum conn_state { CONN_READING, CONN_WAITING, CONN_STREAMING, CONN_LINGERING, CONN_CLOSED };

struct outq_entry {
	struct chunk *c;
	uint32_t off;   /* bytes of c already written */
	bool droppable; /* an event or heartbeat frame the reader can get again */
	int64_t id;     /* event id carried, 0 for other frames */
};

struct conn {
	int fd;
	enum conn_state state;
	struct server *srv;
	struct listener *ls;
	struct tls_conn *tls; /* NULL for plain sockets */
	bool peer_unix;
	bool peer_loopback;
	char peer[64];   /* peer address as text ("unix" for the unix socket) */
	char client[64]; /* client address after trusted-proxy rules */

	char *rbuf;
	size_t rlen, rcap;

	struct outq_entry *q; /* ring buffer */
	size_t qhead, qlen, qcap;
	size_t qbytes;          /* unwritten bytes in the queue */
	uint64_t last_progress; /* loop time of the last byte written, or enqueue into an empty queue */
	int64_t written_id;     /* id of the last event fully written */
	bool flush_scheduled;
	bool close_after_flush;
	bool keep_alive;
	bool served;    /* answered at least one request */
	bool reparse;   /* buffered input to parse after the current response */
	bool peer_eof;  /* the client shut down its side */
	bool continued; /* sent 100 Continue for the request being read */
	bool in_handler; /* inside api_handle: the request is not consumed yet */
	char what[80];   /* "METHOD /path" of the request being handled, for logs */

	uint32_t want;           /* epoll events currently requested */
	struct loop_timer timer; /* header / keep-alive timeout */
	struct reader *reader;   /* stream state, owned by the hub */
	void *pending;           /* a handler's in-flight request (publish), or NULL */

	struct conn *next, *prev; /* server's list of all connections */
	struct conn *flush_next;  /* server's flush list */
};

/* Take ownership of an accepted, non-blocking fd. Returns the connection
 * (owned by the server's list; freed after conn_close) or NULL when the fd
 * cannot be watched (the fd is closed then). */
struct conn *conn_new(struct server *srv, struct listener *ls, int fd, const struct sockaddr *sa, socklen_t salen);

/* Queue a reference to ch (the caller keeps its own) and schedule one flush
 * for the end of this loop pass. id is the event id the chunk carries, or 0.
 * Such an entry (a response head, a reset) is never dropped. */
void conn_enqueue(struct conn *c, struct chunk *ch, int64_t id);

/* The same for an event or heartbeat frame, which conn_drop_queue may drop
 * (the hub sends the events again from the store). */
void conn_enqueue_frame(struct conn *c, struct chunk *ch, int64_t id);

/* Queue a response with this status (taking over the caller's reference to
 * the chunk), count it, and resume reading the next request afterwards, or
 * close once it is written when keep_alive is false. */
void conn_respond(struct conn *c, int status, struct chunk *response, bool keep_alive);

/* End the connection once its queue is written (a stream being rotated or
 * drained); a client that takes no bytes for stall_timeout is closed. */
void conn_end_after_flush(struct conn *c);

/* Count a response by status in the metrics (conn_respond does it). */
void conn_count_response(struct conn *c, int status);

/* Send the standard JSON refusal and close the connection after it. */
void conn_refuse(struct conn *c, int status, const char *message, const char *extra_headers);

/* Drop every queued event or heartbeat frame that has not started to be
 * written; response heads, resets and responses stay, in order. Returns the
 * id of the last event that remains queued or written (the resume point). */
int64_t conn_drop_queue(struct conn *c);

/* Write what the socket takes now; arm EPOLLOUT for the rest. */
void conn_flush(struct conn *c);

/* Close now: unwatch, close the fd, release the queue, tell the hub and any
 * pending handler. Safe to call twice and from the connection's own
 * callbacks; the struct is freed at the end of the loop pass. */
void conn_close(struct conn *c, const char *why);

/* Run the deferred flushes and frees for this pass (the server's defer hook). */
void conn_pass_end(struct server *srv);

/* Recompute and apply the epoll interest (after TLS wants change). */
void conn_update_events(struct conn *c);

#endif
