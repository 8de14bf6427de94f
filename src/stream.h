/* stream.h: the GET /api/events/stream handler: query and header parsing,
 * read authorisation, per-address and global caps, the resume decision
 * (catch-up, or a reset for a point the log no longer holds), and the
 * opening frame. After that the hub feeds the connection. */
#ifndef HERALD_STREAM_H
#define HERALD_STREAM_H

#include <stdint.h>

#include "conn.h"
#include "http.h"
#include "hub.h"

struct server;

/* What a stream request asks for, parsed from its query and headers. */
struct stream_params {
	int64_t resume;                  /* -1: no resume point given */
	size_t ntopics;                  /* 0: every topic */
	char *topics[READER_MAX_TOPICS]; /* owned, percent-decoded, NUL-terminated */
	char *token;                     /* owned, percent-decoded; NULL if none given */
};

/* Parse the query (topic=, last_event_id=, token=) and the Last-Event-ID
 * and Authorization headers of req (pure: no I/O, fuzzed). Returns NULL with
 * *p filled (free with stream_params_free), or a static reason for a 400
 * with *p empty. */
const char *stream_params_parse(const struct http_request *req, struct stream_params *p);
void stream_params_free(struct stream_params *p);

/* Handle a stream request on c: refuse it with a precise status, or turn c
 * into a reader registered with the hub. */
void stream_open(struct conn *c, const struct http_request *req);

/* The reader's queue is empty (conn_flush). */
void stream_on_drained(struct conn *c);

/* c is closing: release its cap slot and its hub entry. */
void stream_closed(struct conn *c);

/* Free the per-address table (at exit, after every stream closed). */
void stream_shutdown(struct server *srv);

#endif
