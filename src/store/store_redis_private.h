/* SPDX-License-Identifier: BSD-2-Clause */
/* store_redis_private.h: what the Redis backend's files share and no other
 * file sees: struct store_redis itself and the command connection's use.
 *   store_redis.c        the connections, the log (appends, the tail,
 *                        catch-up pages, retention, Mercure ids), the table
 *   store_redis_connect.c  the blocking connection at start-up
 *   store_redis_lease.c  store_lease's keys beside the stream */
#ifndef HERALD_STORE_REDIS_PRIVATE_H
#define HERALD_STORE_REDIS_PRIVATE_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/metrics.h"
#include "common/loop.h"
#include "store/store.h"
#include "store/store_window.h"

struct fetch;
struct redis_link;

struct store_redis {
	const struct config *cfg;
	struct loop *lp;
	struct metrics *m;
	struct store_hooks hooks;
	bool watching;
	char key_events[256], key_last[256], key_mercure[256], key_identity[256], key_retention[256];

	struct redis_link *cmd_link, *tail_link;
	redisAsyncContext *cmd, *tail; /* the links' connections, NULL while down */
	bool up;                       /* the function loaded, herald_floor answered */
	uint64_t down_since;           /* loop time the outage began */
	struct loop_timer watchdog_timer, sweep_timer;
	size_t cmd_out;        /* commands waiting for an answer */
	uint64_t cmd_progress; /* loop time of the last answer, or of the first command out */
	bool tail_out;
	uint64_t tail_sent;

	struct store_window win; /* the newest entries and fetched pages */
	struct fetch *fetches;   /* catch-up XRANGEs out */
	size_t nfetches;
	int64_t pruned_through;
	bool trim_out;
	/* Retention by namespace (herald_trim_ns): the patterns last asked
	 * for, and what each namespace has lost as the answer says ([0]: the
	 * defaults); ns_gen tells an answer for older patterns. */
	struct namespaces ns_patterns;
	int64_t *ns_pruned;
	size_t ns_known;
	uint64_t ns_gen;

	uint64_t sync_sent, sync_done; /* tickets (store_sync_begin) */
	uint64_t sync_wait_ticket;     /* answered, waiting for the tail to reach: */
	int64_t sync_wait_target;
	uint64_t sync_wait_since;
	bool warned_down; /* this outage has been logged */

	/* Entries herald_publish did not add (an XADD by hand) are not events.
	 * Unmarked entries <n>-0 with n up to counter_seen are events of an
	 * older herald; the tail reads from tail_from, the stream id it has
	 * read through (past entries it passes over, not only events). */
	int64_t counter_seen;
	char tail_from[48];
	bool sweep_out;     /* herald_sweep asked, the tail waits for it */
	char foreign[48];   /* the entry that made the tail ask */
	bool foreign_told;  /* this run of such entries has been logged */
	bool warned_pages;  /* such an entry read in a catch-up page (logged once) */
	bool lease_failing; /* herald_lease's error logged (once per run of them) */
};

/* Send argv on the command connection, cb(privdata) with the answer;
 * -1 (nothing sent) while Redis is not up. */
int store_redis_send(struct store_redis *st, redisCallbackFn *cb, void *privdata, int argc, const char **argv);
/* An answer on the command connection, counted as progress; NULL when the
 * connection went away (or a demoted primary answered). */
redisReply *store_redis_answer(struct store_redis *st, void *reply);
/* The server's address, for logs. */
const char *store_redis_where(const struct store_redis *st);

/* Start-up, before the loop runs: connect now (CONNECT_TIMEOUT_MS), load
 * herald's function, read the counter and the pruned-through id into st,
 * read or set the log's identity. 0, or -1 with a reason in err, so that a
 * Redis herald cannot use is met at once. */
int store_redis_sync_connect(struct store_redis *st, char *err, size_t errlen);

/* store_lease (store.h): herald_lease on {stream}:name:lease and :cursor. */
void store_redis_lease(void *be, const char *name, int64_t owner, uint64_t ttl_ms, int64_t cursor, store_lease_cb done,
		       void *arg);

#endif
