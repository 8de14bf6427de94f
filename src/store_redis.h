/* store_redis.h: the Redis Streams backend of store.h (see store_redis.c):
 * used only through store.c. The calls mean what store.h says. */
#ifndef HERALD_STORE_REDIS_H
#define HERALD_STORE_REDIS_H

#include "store.h"

struct store_redis;

struct store_redis *store_redis_open(const struct config *cfg, struct loop *lp, struct metrics *m, char *err,
				     size_t errlen);
void store_redis_watch(struct store_redis *st, const struct store_hooks *h);
void store_redis_close(struct store_redis *st);
void store_redis_append(struct store_redis *st, const struct store_new_event *evs, size_t n, store_append_cb done,
			void *arg);
/* A read of (after, upto], filtered by f unless f is NULL (then through may
 * be NULL too). */
int store_redis_read(struct store_redis *st, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
		     store_row_cb cb, void *arg, int64_t *through);
int store_redis_max_id(struct store_redis *st, int64_t *max_id);
int64_t store_redis_pruned_through(const struct store_redis *st);
uint64_t store_redis_sync_begin(struct store_redis *st);
bool store_redis_sync_done(const struct store_redis *st, uint64_t ticket);
int store_redis_prune(struct store_redis *st, int64_t max_age_s, int64_t max_count, size_t max_rows);
bool store_redis_available(const struct store_redis *st);

/* The Lua source of the function library herald loads (FUNCTION LOAD). */
extern const char store_redis_function[];

#endif
