/* stream.h: the GET /api/events/stream handler. Its checks, in order: the
 * query and headers (400); the server shutting down (503); the caps, asked
 * of admission (admission.h: 503 at max_readers, 429 past
 * per_address_limit), before the token so that a request they refuse costs
 * no signature check; then the token (401, 403; a token from a cookie only
 * for a listed origin), whose refusal gives the counted place back. A
 * capacity refusal to an EventSource is a 200 stream that ends at once.
 * Then the head and opening frame, the stream registered with presence
 * (its topics, and a signed token's subject), and the hub opens the reader
 * (catch-up from the resume point, or a reset for a point the log no
 * longer holds) and feeds the connection. */
#ifndef HERALD_STREAM_H
#define HERALD_STREAM_H

#include <stdint.h>

#include "net/conn.h"
#include "http/cors.h"
#include "http/http.h"
#include "hub/hub.h"
#include "auth/jwt.h"
#include "core/metrics.h"

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

struct admission;
struct presence;

/* The stream handler's state: what every stream shares. */
struct streams {
	struct hub *hub;
	const struct config *cfg;
	struct metrics *m;
	struct admission *admission; /* the caps' counts: owned (streams_init, streams_free) */
	const struct cors *cors;     /* allow_origin, parsed once per load */
	struct jwt_verifier *jwt;    /* signed tokens, or NULL: set by the server at start and reload */
	struct presence *presence;   /* who reads what, or NULL: set by the server (it owns it) */
	int64_t max_readers;         /* streams open at once (in a group, the group's); 0: none */
	int64_t max_sockets;         /* descriptors its readers may hold here (from the open-file limit) */
	size_t socket_readers;       /* open streams on a socket of their own (HTTP/1.1) */
	/* The HTTP/2 connections open here (each holds a descriptor, whatever
	 * its streams): set by the server. */
	size_t (*http2_sockets)(void *arg);
	void *http2_sockets_arg;
	struct chunk *head; /* the shared head and opening frame (with CORS * when so set) */
};

void streams_init(struct streams *s, struct hub *hub, const struct config *cfg, const struct cors *cors,
		  struct metrics *m);
/* Rebuild the head and the origin list from the (reloaded) settings. */
void streams_reconfigure(struct streams *s);
/* Free what s owns, once every stream has closed. */
void streams_free(struct streams *s);

/* Handle a stream request on c: refuse it with a precise status, or turn c
 * into a stream whose reader the hub owns and feeds. */
void stream_open(struct streams *s, struct conn *c, const struct http_request *req);

struct admission_ticket;

/* For another protocol's handler (mercure.c), before its token is checked,
 * so that a request the caps refuse costs no signature check: a place for
 * one more stream on c, or NULL after refusing c (503, 429; with
 * extra_headers, "Name: value\r\n" lines or NULL, among the headers). The
 * place is given back with stream_release when the handler then refuses,
 * or kept by stream_open_spec. */
struct admission_ticket *stream_admit(struct streams *s, struct conn *c, const char *extra_headers);
void stream_release(struct streams *s, struct admission_ticket *ticket);

/* Open a stream on c, holding ticket, for a reader that handler described:
 * the head with extra_headers ("Name: value\r\n" lines, or NULL), then the
 * reader spec opens (taking over its topics, grants and accepts_arg), fed
 * as any stream. */
void stream_open_spec(struct streams *s, struct conn *c, struct admission_ticket *ticket, struct reader_spec *spec,
		      const char *extra_headers);

#endif
