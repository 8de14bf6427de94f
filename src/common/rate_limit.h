/* SPDX-License-Identifier: BSD-2-Clause */
/* rate_limit.h: budgets per key (a client's address key, addr.h): each key
 * may take per_minute units a minute, and at most per_minute at once,
 * after which it waits for the budget to refill. The Mercure endpoint's
 * subscription events are counted here (mercure_subs.c), so that one
 * address cannot fill the log with them.
 *
 * Each key is one number, the time its budget would be full again (the
 * generic cell rate algorithm): taking n units moves it n intervals of
 * 60 s / per_minute later, and is refused when that would be more than a
 * minute ahead. A key whose budget is full again holds nothing and is
 * dropped. At most max_keys keys are kept; past that, every new key
 * shares one budget, so many addresses together get no more than one
 * (the rate is per process: each worker of a group has its own table). */
#ifndef HERALD_RATE_LIMIT_H
#define HERALD_RATE_LIMIT_H

#include <stddef.h>
#include <stdint.h>

#define RATE_LIMIT_KEY_MAX 64 /* the room of a key, as admission's */

struct rate_limit;

/* A new, empty table for at most max_keys keys (at least 1). Never NULL
 * (allocation failure aborts); the caller frees it. */
struct rate_limit *rate_limit_new(size_t max_keys);
void rate_limit_free(struct rate_limit *r);

/* Take n units for key (cut to RATE_LIMIT_KEY_MAX - 1 bytes) at now_ms
 * (a monotonic clock) from its budget of per_minute units a minute.
 * Returns 0 when they were taken, else the milliseconds until they could
 * be (at least 1; nothing taken). per_minute 0: no limit, always 0. n
 * above per_minute can never be taken: the wait is a minute. */
uint64_t rate_limit_take(struct rate_limit *r, const char *key, uint64_t n, uint64_t per_minute, uint64_t now_ms);

/* Keys held now (the shared one included once it is used). */
size_t rate_limit_keys(const struct rate_limit *r);

#endif
