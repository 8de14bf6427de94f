/* SPDX-License-Identifier: BSD-2-Clause */
/* stream.h: the GET /api/events/stream handler. Its checks, in order: the
 * query and headers (400); the server shutting down (503); the caps, asked
 * of admission (admission.h: 503 at max_readers, 429 past
 * per_address_limit), before the token so that a request they refuse costs
 * no signature check; then the token (401, 403; a token from a cookie only
 * for a listed origin), whose refusal gives the counted place back; then,
 * when auth_request is set, the application's answer (auth_hook.h: 401,
 * 403 as it says, 502/503 without a usable one), the connection waiting
 * for it with its place counted. A capacity refusal to an EventSource is a 200 stream that ends at once.
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

struct presence;

/* The stream handler's state: what every stream shares (the hub, the
 * caps' counts, the verifier, presence, the shared head). Opaque: its
 * fields are stream.c's; the server sets what it wires in through the
 * setters below. */
struct streams;

/* A new handler state over hub, cfg, cors and m (lent: they must outlive
 * it); the caller owns it until streams_free. */
struct streams *streams_new(struct hub *hub, const struct config *cfg, const struct cors *cors, struct metrics *m);
/* Rebuild the head and the origin list from the (reloaded) settings. */
void streams_reconfigure(struct streams *s);
/* Free s and what it owns, once every stream has closed (NULL: nothing). */
void streams_free(struct streams *s);

/* Signed tokens, or NULL: set by the server at start and on reload (it owns
 * the verifier); other handlers (Mercure, the subscriptions API) share it
 * through streams_jwt. */
void streams_set_jwt(struct streams *s, struct jwt_verifier *jwt);
struct jwt_verifier *streams_jwt(const struct streams *s);
/* Who reads what, or NULL: lent by the server, which owns it; other
 * handlers (Mercure) register their streams with it too. */
void streams_set_presence(struct streams *s, struct presence *presence);
/* herald's HTTP client on lp, lent by the server (both outlive s): the
 * stream opens auth_request decides (auth_hook.h) ask through it. Without
 * one, auth_request is not asked. */
struct loop;
struct http_client;
void streams_set_http(struct streams *s, struct loop *lp, struct http_client *http);
struct presence *streams_presence(const struct streams *s);
/* The caps: max_readers streams open at once (in a group, the group's; 0:
 * none) and max_sockets descriptors this process's readers may hold (from
 * the open-file limit). */
void streams_set_limits(struct streams *s, int64_t max_readers, int64_t max_sockets);
int64_t streams_max_readers(const struct streams *s);
int64_t streams_max_sockets(const struct streams *s);
/* The HTTP/2 connections open here (each holds a descriptor, whatever its
 * streams): counted by fn(arg), set by the server once the sessions exist. */
void streams_set_http2_sockets(struct streams *s, size_t (*fn)(void *arg), void *arg);

/* Handle a stream request on c: refuse it with a precise status, or turn c
 * into a stream whose reader the hub owns and feeds. */
void stream_open(struct streams *s, struct conn *c, const struct http_request *req);

struct admission_ticket;

/* For another protocol's handler (mercure.c), before its token is checked,
 * so that a request the caps refuse costs no signature check: a place for
 * one more stream on c, or NULL after refusing c (503, 429; with the
 * fields of extra, or NULL, after Retry-After). The place is given back
 * with stream_release when the handler then refuses, or kept by
 * stream_open_spec. */
struct admission_ticket *stream_admit(struct streams *s, struct conn *c, const struct http_head *extra);
void stream_release(struct streams *s, struct admission_ticket *ticket);

/* Open a stream on c, holding ticket, for a reader that handler described:
 * the head with the fields of extra (or NULL) added, then the reader spec
 * opens (taking over its topics, grants and accepts_arg), fed as any
 * stream. */
void stream_open_spec(struct streams *s, struct conn *c, struct admission_ticket *ticket, struct reader_spec *spec,
		      const struct http_head *extra);

#endif
