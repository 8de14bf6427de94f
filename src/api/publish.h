/* SPDX-License-Identifier: BSD-2-Clause */
/* publish.h: POST /api/events: the right to publish, the JSON body checked
 * and taken apart (json.h), and group commit: every publish that arrives in
 * one loop pass is inserted in one transaction, then each is answered with
 * its id. */
#ifndef HERALD_PUBLISH_H
#define HERALD_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>

#include "core/config.h"
#include "net/conn.h"
#include "http/cors.h"
#include "auth/jwt.h"
#include "http/http.h"
#include "hub/hub.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "store/idempotency.h"
#include "store/store.h"

struct publish_queue;

/* A new, empty queue committing into st and telling hub of new rows. */
struct publish_queue *publish_new(struct loop *lp, struct store *st, struct hub *hub, const struct config *cfg,
				  const struct cors *cors, struct metrics *m);

/* The signed-token verifier publishes are checked with (NULL: none); the
 * caller owns it and sets it again after a reload. */
void publish_set_jwt(struct publish_queue *q, struct jwt_verifier *jwt);
/* Commit what is pending (one attempt: used at shutdown), then free. */
void publish_free(struct publish_queue *q);

/* Check what the head of a publish decides (rights, content type, length)
 * before its body is read: true when it would be taken, else false after
 * refusing it. */
bool publish_precheck(struct publish_queue *q, struct conn *c, const struct http_request *req);

/* Take a whole publish request: refuse it, or queue it for the group
 * commit at the end of this pass (the connection waits for its answer; if
 * it goes away meanwhile the event is still committed). */
void publish_handle(struct publish_queue *q, struct conn *c, const struct http_request *req, const char *body,
		    size_t body_len);

/* A Mercure update checked by its handler (mercure.c), its strings
 * malloc'd: the row (type, topic, data, public) and the update's id and
 * block (mercure_update.h). */
struct publish_mercure {
	char *type, *topic, *data;
	size_t data_len;
	bool public;
	char *id;
	char *block;
	size_t block_len;
	/* An Idempotency-Key (NULL: none), its publisher (idempotency.h) and
	 * the body's fingerprint, as for POST /api/events. */
	char *idem_key, *idem_publisher;
	char idem_hash[IDEM_HEX_LEN];
};

/* Queue u for the group commit like any publish (taking over its
 * strings); the answer is 200 text/plain with the id. fields: those every
 * answer carries, refusals included (CORS, the hub's Link), taken over
 * (left empty). */
void publish_mercure(struct publish_queue *q, struct conn *c, struct publish_mercure *u, struct http_head *fields);
void publish_mercure_free(struct publish_mercure *u);

/* The request's Idempotency-Key into key (IDEM_KEY_MAX + 1 bytes), as both
 * publish endpoints read it: 1, 0 when there is none, or -1 with *why set
 * (malformed, or the header twice). */
int publish_idempotency_key(const struct http_request *req, char *key, const char **why);

/* herald's one rule for a publish that shows no token, on POST /api/events
 * and on the Mercure endpoint alike (docs/SECURITY.md, "Who may publish"):
 * 0 when it may go on (publish_token is not set, and the peer is on this
 * host, not behind a proxy, and not a page of another site:
 * publish_cross_site), else 401 (publish_token is set) or 403, with *why.
 * jwt_algorithm changes nothing here: signed tokens add publishers, they
 * do not take the local one away. */
int publish_without_token(const struct config *cfg, const struct conn *c, const struct http_request *req,
			  const char **why);

/* Why a publish without a token must be refused though its peer is on
 * this host: a browser marked it as from another site (Sec-Fetch-Site),
 * its Origin or its Host names another host (a page could make it with a
 * form post, or through a name rebound to 127.0.0.1). NULL when none of
 * these. */
const char *publish_cross_site(const struct http_request *req);

/* Number of publishes waiting for their commit. */
size_t publish_pending(const struct publish_queue *q);

#endif
