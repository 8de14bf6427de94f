/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_sentinel.h: finding the Redis primary through Redis Sentinel, in
 * plain commands (hiredis 0.14 knows nothing of Sentinel): SENTINEL
 * get-master-addr-by-name asked of each sentinel in turn, and a
 * subscription to +switch-master on one of them that says when a failover
 * moved the primary. Connections are driven by the loop (redis_loop.h). */
#ifndef HERALD_REDIS_SENTINEL_H
#define HERALD_REDIS_SENTINEL_H

#include <stddef.h>

#define REDIS_SENTINEL_MAX 16     /* sentinels in one list */
#define REDIS_SENTINEL_PORT 26379 /* when an entry names none */

struct loop;
struct redis_sentinel;

/* The address of the primary (host is NUL-terminated and lives only for the
 * call), or host NULL when no sentinel named one. */
typedef void redis_sentinel_cb(void *arg, const char *host, int port);

/* Check the list "host[:port],..." (host may be [IPv6]); pure. Returns
 * NULL, or the reason it is not one, written into buf. */
const char *redis_sentinel_check_list(const char *list, char *buf, size_t len);

/* A finder for the primary called master, asking the sentinels in list
 * (checked by redis_sentinel_check_list). Returns NULL, with the reason in
 * err, if the list is not one. The caller frees it (redis_sentinel_free). */
struct redis_sentinel *redis_sentinel_new(struct loop *lp, const char *list, const char *master, char *err,
					  size_t errlen);

/* Ask the sentinels now, blocking up to timeout_ms for each one (start-up
 * only, before the loop runs). Returns 0 with the primary in host and
 * *port, or -1 with every sentinel's answer in err. */
int redis_sentinel_ask_now(struct redis_sentinel *s, int timeout_ms, char *host, size_t hostlen, int *port, char *err,
			   size_t errlen);

/* Ask the sentinels from the loop, each in turn until one names the
 * primary; cb gets its address, or NULL once all have failed. One ask at a
 * time: a second replaces the first, whose cb is not called; cb NULL only
 * cancels. */
void redis_sentinel_ask(struct redis_sentinel *s, redis_sentinel_cb *cb, void *arg);

/* Follow failovers: cb gets the new primary whenever a sentinel announces
 * +switch-master for this master. The subscription moves to the next
 * sentinel when its connection fails. */
void redis_sentinel_follow(struct redis_sentinel *s, redis_sentinel_cb *cb, void *arg);

/* The sentinels and the master's name, for logs ("mymaster via
 * 127.0.0.1:26379,..."). */
const char *redis_sentinel_describe(const struct redis_sentinel *s);

/* Close every connection and free s; no callback runs after. NULL is
 * ignored. */
void redis_sentinel_free(struct redis_sentinel *s);

#endif
