/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure.h: the Mercure protocol at /.well-known/mercure, on herald's own
 * event log. Subscribing opens a stream through stream.c whose reader
 * decides by the request's matchers and the token's grants
 * (reader_spec.accepts) and is sent Mercure frames (frame_mercure);
 * publishing queues a row through publish.c's group commit, with the
 * update's id, retry and topics kept beside it (store_new_event.mercure).
 *
 * How an update maps onto a row: the row's topic is the canonical topic
 * when herald's topic rule takes it (text_name_valid with '/', at most 128
 * bytes), else "$mercure/" and the SHA-256 of the topic in hex (herald's
 * own readers can ask for it; no publish of herald's API can write a "$"
 * topic); its type is the update's type ("message" when none); public is
 * the absence of "private". A row of herald's own API reaches Mercure
 * subscribers with its topic as the one topic and its number as the id.
 * A publisher's id names the earliest row that carries it; ids made only
 * of digits are refused (they name herald's rows). */
#ifndef HERALD_MERCURE_H
#define HERALD_MERCURE_H

#include <stdbool.h>
#include <stddef.h>

#include "net/conn.h"
#include "http/cors.h"
#include "http/http.h"
#include "hub/hub.h"
#include "api/publish.h"
#include "store/store.h"
#include "api/stream.h"

#define MERCURE_PATH "/.well-known/mercure"

struct mercure_sets;
struct mercure_subs;

/* What the handlers use, lent by the router for one request. */
struct mercure {
	const struct config *cfg;
	const struct cors *cors;
	struct streams *streams; /* caps, the shared verifier (streams_jwt), the hub */
	struct publish_queue *pubq;
	struct store *st;
	struct hub *hub;
	struct mercure_sets *sets; /* the subscribers' interned matcher lists */
	struct mercure_subs *subs; /* the active subscriptions (mercure_subs.h); NULL with presence off */
};

/* The row's topic for an update's canonical topic (above): the topic when
 * herald's rule takes it, else "$mercure/" and its SHA-256 in lowercase
 * hex. Presence counts a subscriber's exact topics under the same names.
 * Returns a new string (the caller frees it). */
char *mercure_row_topic(const char *topic);

/* GET: subscribe, or refuse (400 for bad matchers or an unknown
 * parameter, named; 401/403 with a Bearer challenge naming the token's
 * fault; the caps' 429/503). */
void mercure_subscribe(const struct mercure *mc, struct conn *c, const struct http_request *req);

/* POST: publish a form-encoded update, or refuse (400, 401, 403, 413,
 * 422 for an Idempotency-Key used with another body). */
void mercure_publish(const struct mercure *mc, struct conn *c, const struct http_request *req, const char *body,
		     size_t len);

/* GET MERCURE_PATH/subscriptions[/TYPE/MATCH[/SUBSCRIBER]]: the active
 * subscriptions (mercure_subs.h) to a token granted subscribe on that
 * path; 401/403, or 404 for none (or with presence off). With the log
 * on Redis the cluster's, read there while the connection waits (503 with
 * Retry-After when Redis cannot answer). */
void mercure_subscriptions(const struct mercure *mc, struct conn *c, const struct http_request *req);

/* Whether req asks for the hub's protected-resource metadata (RFC 9728:
 * /.well-known/oauth-protected-resource then the hub's path). */
bool mercure_metadata_path(const struct mercure *mc, const struct http_request *req);

/* GET of that document: the resource (the hub's URL), the authorization
 * detail type, the bearer method (header), the cookie, the matcher types. */
void mercure_metadata(const struct mercure *mc, struct conn *c, const struct http_request *req);

/* Whether req is the hub's to answer (mercure on): its path, a path under
 * it, or its metadata. Every answer to such a request carries the hub's
 * Link, whoever makes it (the router's 404, 405 and preflights, conn.c's
 * 411 and 413): mercure_link writes it. */
bool mercure_answers(const struct mercure *mc, const struct http_request *req);

/* Add the field `Link: <HUB URL>; rel="mercure"` for req on c to h. */
void mercure_link(const struct mercure *mc, const struct conn *c, const struct http_request *req, struct http_head *h);

#endif
