/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_session.h: HTTP/2 connections (nghttp2): h2 chosen by ALPN on TLS
 * listeners and h2c with prior knowledge on the others, both recognised
 * by the client's preface, which the connection layer hands over
 * (conn_pool_set_takeover).
 *
 * A session owns the socket, its lower transport (plain or TLS) and the
 * nghttp2 session. Each HTTP/2 stream becomes a connection of the pool
 * without a socket (conn_new_virtual), whose transport is the session:
 * it is handed its request as a record (h2_head.h), and what it writes
 * (a response head, then the body or the event frames) leaves as one
 * HEADERS frame and DATA frames that point into the same shared chunks.
 * A stream whose flow-control window is spent takes no bytes, so its
 * connection is a slow reader like any other. Nothing here names a
 * handler. */
#ifndef HERALD_H2_SESSION_H
#define HERALD_H2_SESSION_H

#include <stddef.h>

#include "core/config.h"
#include "net/conn.h"
#include "common/loop.h"
#include "core/metrics.h"

struct h2_server;

/* The set of HTTP/2 sessions, whose streams become connections of pool.
 * cfg (http2, http2_max_streams, the timeouts and limits, read at each
 * use), lp, m and pool must outlive it. The caller frees it with
 * h2_server_free, before the pool. */
struct h2_server *h2_server_new(struct loop *lp, const struct config *cfg, struct metrics *m, struct conn_pool *pool);

/* The takeover the pool's owner gives conn_pool_set_takeover. */
struct conn_takeover h2_server_takeover(struct h2_server *h);

/* The gatherer the pool's owner gives conn_pool_set_gatherer: a stream
 * round writes each session's DATA frames for all its streams in one
 * send (in the pool's io_uring batch when it has one). */
struct conn_gatherer h2_server_gatherer(struct h2_server *h);

/* Graceful stop: every session sends GOAWAY, takes no new stream, and
 * closes once its streams have ended. */
void h2_server_drain(struct h2_server *h);

/* Open sessions (each holds one socket). */
size_t h2_server_sessions(const struct h2_server *h);

/* Streams that have a connection, over every session: each is also one of
 * the pool's connections (conn_pool_count), though it holds no socket. */
size_t h2_server_streams(const struct h2_server *h);

/* Close every session (their streams' connections first) and free h
 * (NULL: nothing). */
void h2_server_free(struct h2_server *h);

#endif
