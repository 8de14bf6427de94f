/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_link.h: one hiredis asynchronous connection whose life this module
 * owns, for any user of Redis: connecting (TCP or unix socket, from
 * redis_url, or to the primary Redis Sentinel names), AUTH and SELECT, ROLE
 * through Sentinel, following failovers (one +switch-master subscription
 * per process, shared by every link on the same sentinels), reconnecting
 * with backoff (0.1 s doubling to 5 s), a server that answers -READONLY
 * (a demoted primary) left. Its user is told through two callbacks: up,
 * with the connection to send on, and down. What "working" means (a
 * setup answered) is the user's to say (redis_link_works), and so are the
 * words of an outage's warning and of its end; the link logs its tries at
 * debug level, in the user's words (label). */
#ifndef HERALD_REDIS_LINK_H
#define HERALD_REDIS_LINK_H

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>

struct loop;
struct redis_link;

/* Where Redis is: url, or sentinels (non-empty) with the master's name.
 * label starts the link's log lines ("redis:" gives "redis: <where>:
 * <why>; trying again in 200 ms"). The strings are copied. */
struct redis_link_spec {
	const char *url;
	const char *sentinels;
	const char *master;
	const char *label;
};

struct redis_link_hooks {
	/* A connection to send on: AUTH, SELECT (and ROLE through Sentinel)
	 * are queued ahead of what the user sends now; whether the server
	 * works, its answers say. ac is the link's: valid until down (or
	 * redis_link_stop, redis_link_drop, redis_link_free); its commands
	 * out are answered NULL when it goes. */
	void (*up)(void *arg, redisAsyncContext *ac);
	/* The connection went (closed, refused, a setup step failed, READONLY,
	 * Sentinel moved the primary): a new one follows after the backoff.
	 * Not called for the user's own redis_link_stop/drop/free. */
	void (*down)(void *arg, const char *why);
	void *arg;
};

/* A link to the Redis spec names (not connected: redis_link_start).
 * Returns NULL with the reason in err when spec names no usable Redis.
 * The caller frees it (redis_link_free). */
struct redis_link *redis_link_new(struct loop *lp, const struct redis_link_spec *spec,
				  const struct redis_link_hooks *hooks, char *err, size_t errlen);

/* Connect now (the hooks may run before this returns: up, or down if the
 * connection is refused at once), or from the loop's next pass; and again
 * after the backoff whenever the connection goes, until redis_link_stop. */
void redis_link_start(struct redis_link *l, bool now);

/* Close the connection, and no more tries until redis_link_start. */
void redis_link_stop(struct redis_link *l);

/* The user found the connection bad (why, for the debug line): close it
 * and try again after the backoff. */
void redis_link_drop(struct redis_link *l, const char *why);

/* Redis answered what the user sent on this connection: the next loss
 * backs off from the start again. */
void redis_link_works(struct redis_link *l);

/* An answer that says the server is a replica now (-READONLY): the link
 * leaves it (down is called) and returns true; any other, false. */
bool redis_link_readonly(struct redis_link *l, const redisReply *r);

/* The address for logs, without password ("127.0.0.1:6380 (mymaster via
 * Sentinel ...)" through Sentinel). */
const char *redis_link_where(const struct redis_link *l);

/* The hooks' arg of the link that owns ac (ac->data is the link). */
void *redis_link_user(const redisAsyncContext *ac);

/* Start-up only, before the loop runs: a blocking connection (Sentinel
 * asked first), logged in and, through Sentinel, checked to be a primary,
 * each step bounded by timeout_ms. Returns it (the caller redisFrees it),
 * or NULL with the reason in err. */
redisContext *redis_link_connect_now(struct redis_link *l, int timeout_ms, char *err, size_t errlen);

/* Close the connection (answers out come back NULL) and free l; no hook
 * runs after. NULL is ignored. */
void redis_link_free(struct redis_link *l);

#endif
