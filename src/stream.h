/* stream.h: the GET /api/events/stream handler: query and header parsing,
 * read authorisation, per-address and global caps, the resume decision
 * (catch-up, or a reset for a point the log no longer holds), and the
 * opening frame. After that the hub feeds the connection. */
#ifndef HERALD_STREAM_H
#define HERALD_STREAM_H

#include <stdint.h>

#include "conn.h"
#include "cors.h"
#include "http.h"
#include "hub.h"
#include "jwt.h"

/* What a stream request asks for, parsed from its query and headers. */
struct stream_params {
	int64_t resume;                  /* -1: no resume point given */
	size_t ntopics;                  /* 0: every topic */
	char *topics[READER_MAX_TOPICS]; /* owned, percent-decoded, NUL-terminated */
	char *token;                     /* owned, percent-decoded; NULL if none given */
	bool token_in_query;             /* from ?token= (not Authorization) */
	bool envelope;                   /* ?envelope=1: events as unnamed JSON envelopes */
	char why[160];                   /* a refusal's reason naming what was sent */
};

/* Parse the query (topic=, last_event_id=, envelope=, token=; any other
 * parameter is refused, so a misspelt one is not silently ignored) and the
 * Last-Event-ID and Authorization headers of req (pure: no I/O, fuzzed).
 * Returns NULL with *p filled (free with stream_params_free), or the reason
 * for a 400 (static, or in p->why) with *p otherwise empty. */
const char *stream_params_parse(const struct http_request *req, struct stream_params *p);
void stream_params_free(struct stream_params *p);

/* The stream handler's state: what every stream shares. */
struct streams {
	struct hub *hub;
	const struct config *cfg;
	const struct cors *cors;  /* allow_origin, parsed once per load */
	struct jwt_verifier *jwt; /* signed tokens, or NULL: set by the server at start and reload */
	int64_t max_readers;      /* the global cap, set by the server from the open-file limit */
	int64_t max_local;        /* in a group of workers: this worker's own cap (its open-file limit) */
	struct chunk *head;       /* the shared head and opening frame (with CORS * when so set) */
};

void streams_init(struct streams *s, struct hub *hub, const struct config *cfg, const struct cors *cors);
/* Rebuild the head and the origin list from the (reloaded) settings. */
void streams_reconfigure(struct streams *s);
void streams_free(struct streams *s);

/* Handle a stream request on c: refuse it with a precise status, or turn c
 * into a stream whose reader the hub owns and feeds. */
void stream_open(struct streams *s, struct conn *c, const struct http_request *req);

#endif
