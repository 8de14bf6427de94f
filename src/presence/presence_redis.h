/* SPDX-License-Identifier: BSD-2-Clause */
/* presence_redis.h: this node's share of presence kept in Redis, so that
 * every node of a cluster (herald nodes on one Redis log) answers for all.
 *
 * Keys, under the event log's hash tag {redis_stream}:
 *   {S}:presence:nodes      sorted set: node id -> when its share expires
 *   {S}:presence:node:ID    hash: key -> this node's streams under it
 *   {S}:presence:announced  hash: (pattern, subject) keys whose join went out
 *   {S}:presence:leaving    sorted set: announced keys with no stream left,
 *                           by when they fell empty
 * A node's id is random, new at every start. Its heartbeat moves its expiry
 * PRESENCE_TTL ahead (times are Redis' own clock, so nodes' clocks never
 * disagree); a node that stops (killed, cut off) drops out of every answer
 * once it expires, and the first sweep after that makes its subjects leave.
 * Its hash outlives the expiry (twice the TTL) so that sweep can read it.
 * A connection (or a reconnection, after a Redis outage, or a heartbeat
 * that finds the node was swept while it did not beat) first writes the
 * node's whole share again, then counts go as streams open and close, in
 * order on the one connection. Each step that decides a join or a leave is
 * one script, so two nodes never both announce one. A Redis link of its
 * own (redis_link.h: Redis found as the store finds it, from redis_url or
 * the primary named by redis_sentinels, and followed across a failover). */
#ifndef HERALD_PRESENCE_REDIS_H
#define HERALD_PRESENCE_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "common/loop.h"

struct presence_redis;

/* What the node's share in Redis tells presence.c (registered once). */
struct presence_redis_hooks {
	/* Connected (again): give the whole share now with
	 * presence_redis_share and presence_redis_share_done. */
	void (*connected)(void *arg);
	/* A (pattern, subject) key whose first stream in the cluster opened
	 * (join), or whose last closed more than the grace ago (leave). */
	void (*join)(void *arg, const char *key);
	void (*leave)(void *arg, const char *key);
	void *arg;
};

/* A share for this node (a new random id) in the Redis cfg names; connects
 * from the loop's next pass, and again with backoff whenever the
 * connection is lost. Returns
 * NULL with a reason in err when cfg names no usable Redis. */
struct presence_redis *presence_redis_new(struct loop *lp, const struct config *cfg,
					  const struct presence_redis_hooks *hooks, char *err, size_t errlen);

/* Close the connection (its pending answers come back empty) and free. */
void presence_redis_free(struct presence_redis *r);

/* Whether the connection is up (answers may be asked). */
bool presence_redis_up(const struct presence_redis *r);

/* One stream more (add) or less (del) under key; a subject key with
 * announce may make a join (add) or start a leave's grace (del). Dropped
 * while the connection is down: the share is written whole on reconnect. */
void presence_redis_add(struct presence_redis *r, const char *key, bool announce);
void presence_redis_del(struct presence_redis *r, const char *key, bool announce);

/* The share, written whole after connected: key with n streams, then
 * done. */
void presence_redis_share(struct presence_redis *r, const char *key, uint32_t n);
void presence_redis_share_done(struct presence_redis *r);

/* The cluster's counts: cb(arg, keys, totals, n) once with every key of
 * every live node summed (n 0 when nothing), or with n == (size_t)-1 when
 * Redis cannot answer. Returns 0, or -1 (not connected; cb not called). */
typedef void presence_redis_snapshot_cb(void *arg, const char *const *keys, const uint32_t *totals, size_t n);
int presence_redis_snapshot(struct presence_redis *r, presence_redis_snapshot_cb *cb, void *arg);

/* ---- the Mercure endpoint's active subscriptions (mercure_subs.c) ----
 * Beside the node's counts, and alive as long (the same heartbeat, TTL and
 * sweep, so a node's death is found once):
 *   {S}:presence:subs:ID       hash: subscription id -> its record (the
 *                              user's text, opaque here)
 *   {S}:presence:subs:ids:ID   sorted set: the same ids (all of score 0),
 *                              so a list by prefix is a range, not a scan
 *   {S}:presence:subs:closing  list: records of dead nodes' subscriptions
 *                              that no live node has closed yet
 *   {S}:presence:subs:swept:ID a mark: a sweep closed ID's subscriptions
 *                              (a day; ID, back, takes it: swept)
 * The sweep that takes a dead node out moves its records onto the closing
 * list in the same script; each sweep then pops at most SUBS_CLOSE_CHUNK
 * of them (one node gets each) for closed. */
struct presence_redis_subs_hooks {
	/* Connected (again), the node's hash emptied: put every subscription
	 * now (presence_redis_subs_put). */
	void (*connected)(void *arg);
	/* A dead node's subscription, this node's to close (once in the
	 * cluster): its record, valid during the call. */
	void (*closed)(void *arg, const char *record, size_t len);
	/* After connected: a sweep closed what this node had put before (it
	 * was taken for dead: cut off or paused for presence_ttl), which is
	 * open again now. NULL: not asked. */
	void (*swept)(void *arg);
	void *arg;
};

/* Register the hooks (copied; NULL: none, before the user goes). The
 * sweep runs from the next connection on whatever presence_events says. */
void presence_redis_subs_hooks(struct presence_redis *r, const struct presence_redis_subs_hooks *h);

/* This node's subscription id is open with record (put), or closed (del).
 * Dropped while the connection is down: connected puts them all again.
 * put returns 0, or -1 when dropped. */
int presence_redis_subs_put(struct presence_redis *r, const char *id, const char *record, size_t len);
void presence_redis_subs_del(struct presence_redis *r, const char *id);

/* The live nodes' records whose id starts with prefix (exact: whose id is
 * prefix), at most cap of them: cb(arg, records, lens, n, cut) once, cut
 * when more were left out; n == (size_t)-1 when Redis cannot answer.
 * Returns 0, or -1 (not connected; cb not called). */
typedef void presence_redis_subs_cb(void *arg, const char *const *records, const size_t *lens, size_t n, bool cut);
int presence_redis_subs_list(struct presence_redis *r, const char *prefix, bool exact, size_t cap,
			     presence_redis_subs_cb *cb, void *arg);

#endif
