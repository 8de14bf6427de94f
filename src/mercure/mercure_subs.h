/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_subs.h: the Mercure endpoint's active subscriptions, kept by the
 * presence registry (presence.h owns one): each open subscription's
 * matchers under a subscriber id herald makes (a urn:uuid: per
 * connection), a subscription event appended to the log when one opens
 * (active) and when it closes (not active), and the documents of the
 * subscription API. The events are private updates of type "mercure" on
 * the topics HUBPATH/subscriptions/{match_type}/{match}/{subscriber}
 * (each variable percent-encoded once), as the specification has them.
 * The list is this process's: with workers, or nodes on one log, each
 * answers for its own subscribers (the events reach everyone, on SQLite
 * and on Redis alike).
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

/* s[0..n) percent-encoded as an RFC 6570 simple expansion (everything
 * but the unreserved characters), into a new string. */
char *mercure_pct(const char *s, size_t n);

#endif
