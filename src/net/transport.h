/* SPDX-License-Identifier: BSD-2-Clause */
/* transport.h: how a connection moves its bytes: a table of operations,
 * chosen once when the socket is accepted (plain TCP or unix socket, TLS,
 * and later HTTP/2 streams layered on one of those), and the transport's
 * own state for that connection. conn.c calls only through this table and
 * never names an implementation; an implementation never names conn, so
 * whatever it must make the connection do (close, change its epoll
 * interest) it returns as a result.
 *
 * Ownership: the connection owns the struct transport (inside struct conn)
 * and the socket (it closes fd after free); the implementation allocates
 * its state in open and frees it in free.
 *
 * The read and writev contracts are read(2)'s and writev(2)'s, returning
 * -errno (-EAGAIN while the socket, or a handshake, must be waited on).
 * writev takes plaintext bytes; after -EAGAIN or a short count the next
 * call must start with the same bytes (a transport may have committed
 * them, output_pending). Optional operations are NULL where a transport
 * has nothing to do; the inline calls below supply the plain behaviour. */
#ifndef HERALD_TRANSPORT_H
#define HERALD_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct transport;
struct http_head;

struct transport_ops {
	const char *name; /* "tcp", "tls": for logs */
	/* The client's first bytes are the application's own (no handshake):
	 * the connection reads them at accept, before any epoll wake-up. */
	bool ready_at_accept;
	/* Each piece given to writev costs a record of its own (TLS): a
	 * writer of many small pieces joins them first. */
	bool coalesce;
	/* writev is send(2) of the bytes as they are on fd, with nothing kept
	 * in between: a send of the same bytes queued elsewhere (a batch of
	 * sends over many sockets) may stand in for it. */
	bool plain_send;
	/* Set up t->state for the accepted socket t->fd with the listener's
	 * ctx; peer names the client in logs and outlives t. Returns 0, or -1
	 * after logging why (nothing to free). NULL: no state. */
	int (*open)(struct transport *t, void *ctx, const char *peer);
	ssize_t (*read)(struct transport *t, void *buf, size_t len);
	ssize_t (*writev)(struct transport *t, const struct iovec *iov, int n);
	/* In a stream round, writev's bytes made part of one send that the
	 * pool's gatherer (conn_pool_set_gatherer) makes for many connections
	 * after every one was gathered (an HTTP/2 session's frames for all its
	 * streams): what it keeps points into iov's memory, which the
	 * connection leaves as it is until the gatherer's send has run, and
	 * only then takes the bytes off its queue. Returns the bytes taken,
	 * -EAGAIN (none now: the transport wakes the connection), -ENOTSUP
	 * (not this time: writev after the round's batch), or -errno. NULL:
	 * never gathered. */
	ssize_t (*gather)(struct transport *t, const struct iovec *iov, int n);
	/* The transport sends response heads itself (an HTTP/2 stream, as
	 * HEADERS): the connection hands it the record (read during the call
	 * only) when the response is queued, and writev gets only the body.
	 * Returns 0, or -1 when it cannot (writev then fails). NULL: the head
	 * is written as HTTP/1.1 text. */
	int (*head)(struct transport *t, const struct http_head *h);
	/* The epoll interest to ask for, given what the connection wants
	 * (EPOLLIN while it reads, EPOLLOUT while output waits): a handshake
	 * has its own, and a read that must first write (or the reverse) turns
	 * the direction around. NULL: wanted as it is. */
	uint32_t (*events)(const struct transport *t, uint32_t wanted);
	/* An epoll wake-up, before the connection acts on it: a handshake
	 * step, or the event a pending read or write waited for turned into
	 * that operation's. Returns 0 with *events set to what the connection
	 * should act on (0: nothing now; it recomputes its interest), or -1
	 * when the connection must close, with the reason in why. NULL: the
	 * events as they came. */
	int (*on_io)(struct transport *t, uint32_t *events, char *why, size_t whylen);
	/* Input is waiting inside the transport, where epoll cannot see it. */
	bool (*input_pending)(const struct transport *t);
	/* How many of the first bytes offered to writev are committed
	 * (encrypted, held) but not all sent: they must be offered again as
	 * they are, and none of them dropped. 0: none. */
	size_t (*output_pending)(const struct transport *t);
	/* Its sends may be made elsewhere (one io_uring submission over many
	 * sockets), as bytes it makes here from the plaintext: a parked TLS
	 * stream seals its own records. seal_room is the room sealing plain
	 * bytes takes, or 0 when it cannot now (the connection then writes
	 * with writev). seal makes the bytes for the first plain bytes of iov
	 * (as writev would offer them; plain at most their total) in buf
	 * (seal_room's size): it returns the plaintext bytes they carry, the
	 * bytes to send in *wire; those are committed, and sealed must follow
	 * before any other write, with what the send did: w bytes of *wire
	 * taken, or -errno. sealed holds what was not taken for the next
	 * write and returns writev's result for the plaintext. NULL: not. */
	size_t (*seal_room)(const struct transport *t, size_t plain);
	size_t (*seal)(struct transport *t, const struct iovec *iov, int n, size_t plain, void *buf, size_t *wire);
	ssize_t (*sealed)(struct transport *t, ssize_t w);
	/* The connection has become a write-only stream: its input is read
	 * and dropped from now on (a TLS session may shed its read side). */
	void (*streaming)(struct transport *t);
	/* The connection will stay open long, moving application bytes both
	 * ways and little of them (an HTTP/2 session): the transport may shed
	 * what it keeps only for other work (a TLS session may park, reading
	 * on). */
	void (*settle)(struct transport *t);
	/* Why the connection's timer firing now must close it at once (a
	 * handshake not done in time), or NULL to let the connection judge. */
	const char *(*not_ready)(const struct transport *t);
	/* Say goodbye (TLS close_notify), best effort, before the connection
	 * shuts its write side down. */
	void (*shutdown)(struct transport *t);
	/* t->state now lives in another struct transport (a connection taken
	 * over by the HTTP/2 session), and peer (which outlives it) names the
	 * client in logs from now on. NULL: nothing refers back. */
	void (*moved)(struct transport *t, const char *peer);
	/* The bytes cross the network encrypted (TLS, or HTTP/2 streams over
	 * it): a request on it came as https. NULL: not. */
	bool (*secure)(const struct transport *t);
	/* Free t->state (saying goodbye first where the session is healthy).
	 * Never closes t->fd. */
	void (*free)(struct transport *t);
};

struct transport {
	const struct transport_ops *ops;
	void *state; /* the implementation's, per connection; NULL for plain */
	int fd;      /* the socket, lent by the connection */
};

static inline ssize_t transport_read(struct transport *t, void *buf, size_t len)
{
	return t->ops->read(t, buf, len);
}

static inline ssize_t transport_writev(struct transport *t, const struct iovec *iov, int n)
{
	return t->ops->writev(t, iov, n);
}

/* Whether heads go through transport_head rather than as text. */
static inline bool transport_takes_heads(const struct transport *t)
{
	return t->ops->head != NULL;
}

static inline int transport_head(struct transport *t, const struct http_head *h)
{
	return t->ops->head(t, h);
}

static inline bool transport_gathers(const struct transport *t)
{
	return t->ops->gather != NULL;
}

static inline ssize_t transport_gather(struct transport *t, const struct iovec *iov, int n)
{
	return t->ops->gather(t, iov, n);
}

static inline bool transport_plain_send(const struct transport *t)
{
	return t->ops->plain_send;
}

static inline uint32_t transport_events(const struct transport *t, uint32_t wanted)
{
	return t->ops->events ? t->ops->events(t, wanted) : wanted;
}

/* True when the wanted interest is passed as it is (an EPOLLOUT asked for
 * is then the connection's own: output the socket did not take). */
static inline bool transport_events_exact(const struct transport *t)
{
	return !t->ops->events;
}

static inline int transport_on_io(struct transport *t, uint32_t *events, char *why, size_t whylen)
{
	return t->ops->on_io ? t->ops->on_io(t, events, why, whylen) : 0;
}

static inline bool transport_input_pending(const struct transport *t)
{
	return t->ops->input_pending && t->ops->input_pending(t);
}

static inline size_t transport_output_pending(const struct transport *t)
{
	return t->ops->output_pending ? t->ops->output_pending(t) : 0;
}

static inline size_t transport_seal_room(const struct transport *t, size_t plain)
{
	return t->ops->seal_room ? t->ops->seal_room(t, plain) : 0;
}

static inline size_t transport_seal(struct transport *t, const struct iovec *iov, int n, size_t plain, void *buf,
				    size_t *wire)
{
	return t->ops->seal(t, iov, n, plain, buf, wire);
}

/* Whether sends of this transport in a batch were sealed by it (their
 * results go through transport_sealed). */
static inline bool transport_seals(const struct transport *t)
{
	return t->ops->sealed != NULL;
}

static inline ssize_t transport_sealed(struct transport *t, ssize_t w)
{
	return t->ops->sealed(t, w);
}

static inline void transport_streaming(struct transport *t)
{
	if (t->ops->streaming)
		t->ops->streaming(t);
}

static inline void transport_settle(struct transport *t)
{
	if (t->ops->settle)
		t->ops->settle(t);
}

static inline const char *transport_not_ready(const struct transport *t)
{
	return t->ops->not_ready ? t->ops->not_ready(t) : NULL;
}

static inline void transport_shutdown(struct transport *t)
{
	if (t->ops->shutdown)
		t->ops->shutdown(t);
}

static inline void transport_moved(struct transport *t, const char *peer)
{
	if (t->ops->moved)
		t->ops->moved(t, peer);
}

static inline bool transport_secure(const struct transport *t)
{
	return t->ops->secure && t->ops->secure(t);
}

static inline void transport_free(struct transport *t)
{
	if (t->ops->free)
		t->ops->free(t);
	t->state = NULL;
}

#endif
