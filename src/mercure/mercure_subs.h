/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_subs.h: the Mercure endpoint's active subscriptions, kept by the
 * presence registry (presence.h owns one): each open subscription's
 * matchers under a subscriber id herald makes (a urn:uuid: per
 * connection), a subscription event appended to the log when one opens
 * (active) and when it closes (not active), and the documents of the
 * subscription API. The events are private updates of type "mercure" on
 * the topics HUBPATH/subscriptions/{match_type}/{match}/{subscriber}
 * (each variable percent-encoded once), as the specification has them.
 * The list is this process's, and with the log on Redis a copy of it lives
 * in the node's presence share (presence_redis.h, mercure_subs_share):
 * the answers then read every live node's, and a dead node's
 * subscriptions are closed (their events appended) by the one live node
 * that claims them. In a group of workers without Redis the copy is in
 * the group's shared records, to the same ends. The events reach
 * everyone, on SQLite and on Redis alike.
 * Each client address has a budget of events a minute
 * (mercure_subs_admit), so that subscribers cannot push published events
 * out of the log's retention_count. */
#ifndef HERALD_MERCURE_SUBS_H
#define HERALD_MERCURE_SUBS_H

#include <stdbool.h>
#include <stddef.h>

#include "hub/hub.h"
#include "common/loop.h"
#include "mercure/mercure_match.h"
#include "core/metrics.h"
#include "store/store.h"

struct mercure_subs;
struct mercure_sub;
struct presence_redis;

/* The documents an answer read from Redis holds at most (a longer list
 * is cut, and the cut logged): the answer's memory is bounded. */
#define MERCURE_SUBS_ANSWER_MAX 4096
/* How long an answer waits for Redis before it is 503 (a server that
 * hangs with its connection open). */
#define MERCURE_SUBS_ASK_MS 2000

/* A registry appending its events to st through a queue of its own
 * (event_batch.h: one append a loop pass, a failed one tried again in
 * order; m counts what is dropped) and telling hub; NULL st or a log
 * without Mercure ids: no events. The caller frees it. */
struct mercure_subs *mercure_subs_new(struct loop *lp, struct store *st, struct hub *hub, struct metrics *m);
/* Free the registry (NULL: nothing) once every subscription is gone,
 * before the store: events not yet stored (the closes of the last
 * subscriptions among them) get one attempt, and what the log does not
 * take is dropped with an error line. */
void mercure_subs_free(struct mercure_subs *s);

/* Whether a subscription of n matchers from the client address key may
 * open now: its 2n events (open and close) are taken from key's budget of
 * per_minute events a minute (rate_limit.h; 0: no limit). Returns 0, or
 * the milliseconds until they could be (nothing taken). A registry that
 * appends no events takes every one. */
uint64_t mercure_subs_admit(struct mercure_subs *s, const char *key, size_t n, int64_t per_minute, uint64_t now_ms);

/* Register a connection's subscriptions (one per matcher of want, which
 * is copied) on the hub whose path is hub_path ("/.well-known/mercure"):
 * queues their active events. Returns the registration (never NULL). */
struct mercure_sub *mercure_subs_add(struct mercure_subs *s, const char *hub_path, const struct mercure_matchers *want);
/* The connection closed: queue the events that say so and free sub
 * (NULL: nothing). */
void mercure_subs_remove(struct mercure_subs *s, struct mercure_sub *sub);

/* The subscription API's document for path rest (what follows
 * HUBPATH/subscriptions: "", "/TYPE/MATCH" or "/TYPE/MATCH/SUBSCRIBER",
 * percent-encoded): a new JSON text (the caller frees it) and its length,
 * or NULL when rest names no subscription or collection (404). */
char *mercure_subs_answer(struct mercure_subs *s, const char *hub_path, const char *rest, size_t *len);

/* Keep the list in r too (the node's share in Redis): what is open now is
 * written at r's next connection, and answers (mercure_subs_ask) read the
 * cluster's. r NULL, in a worker of a group: in the group's records
 * (group_records, shared_records.h) instead, which answers read, and a
 * dead worker's subscriptions are closed (their events appended) by the
 * one live worker that claims them. r outlives s. Once, after
 * mercure_subs_new, before any subscription. */
void mercure_subs_share(struct mercure_subs *s, struct presence_redis *r);

/* The answer of mercure_subs_answer, for the cluster when s has a share
 * (cb runs later, from the loop) or for this process (cb runs before this
 * returns): cb(arg, status, body, len) once, with status 200 (body, the
 * callee's to free), 404 (rest names no subscription or collection) or
 * 503 (Redis cannot answer now, or not within MERCURE_SUBS_ASK_MS). rest
 * is copied. */
typedef void mercure_subs_answer_cb(void *arg, int status, char *body, size_t len);
void mercure_subs_ask(struct mercure_subs *s, const char *hub_path, const char *rest, mercure_subs_answer_cb *cb,
		      void *arg);

/* ---- pure parts, for the share and the unit tests ---------------------- */

/* One subscription's parts (pointers into a record, or lent). */
struct mercure_sub_view {
	const char *hub_path;
	enum mercure_kind kind;
	const char *match, *subscriber;
};

/* A subscription's record in Redis: "TYPE\nHUBPATH\nSUBSCRIBER\nMATCH" (the
 * match last: it is the only part a client writes). A new string and its
 * length. */
char *mercure_subs_record(const char *hub_path, enum mercure_kind kind, const char *match, const char *subscriber,
			  size_t *len);
/* Read rec[0..len) (NUL-terminated, cut in place) into v; false when it
 * is not a record. */
bool mercure_subs_record_parse(char *rec, size_t len, struct mercure_sub_view *v);

/* What a subscription API path asks (the decoded parts of rest). */
struct mercure_subs_query {
	size_t nparts; /* 0: every subscription; 2: one matcher's; 3: one */
	enum mercure_kind kind;
	char *match;      /* nparts >= 2 (owned) */
	char *subscriber; /* nparts == 3 (owned) */
};
/* Parse rest (as for mercure_subs_answer); false: it names nothing. */
bool mercure_subs_query_parse(const char *rest, struct mercure_subs_query *q);
void mercure_subs_query_free(struct mercure_subs_query *q);
/* Whether the subscription v on hub_path answers q. */
bool mercure_subs_query_wants(const struct mercure_subs_query *q, const char *hub_path,
			      const struct mercure_sub_view *v);
/* The start of the ids q covers on hub_path (q a single subscription:
 * its id), a new string. */
char *mercure_subs_query_prefix(const struct mercure_subs_query *q, const char *hub_path);

/* s[0..n) percent-encoded as an RFC 6570 simple expansion (everything
 * but the unreserved characters), into a new string. */
char *mercure_pct(const char *s, size_t n);

#endif
