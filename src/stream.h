/* stream.h: the GET /api/events/stream handler: query and header parsing,
 * read authorisation, per-address and global caps, the resume decision
 * (catch-up, or a reset for a point the log no longer holds), and the
 * opening frame. After that the hub feeds the connection. */
#ifndef HERALD_STREAM_H
#define HERALD_STREAM_H

#include "conn.h"
#include "http.h"

struct server;

/* Handle a stream request on c: refuse it with a precise status, or turn c
 * into a reader registered with the hub. */
void stream_open(struct conn *c, const struct http_request *req);

/* The reader's queue is empty (conn_flush). */
void stream_on_drained(struct conn *c);

/* c is closing: release its cap slot and its hub entry. */
void stream_closed(struct conn *c);

/* Count of open streams from one client address (for the per-address cap). */
size_t stream_count_for(struct server *srv, const char *client);

/* Free the per-address table (at exit, after every stream closed). */
void stream_shutdown(struct server *srv);

#endif
