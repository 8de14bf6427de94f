/* store.c: store.h over its two backends. Picks one at open (redis_url set:
 * Redis Streams, else the SQLite file) and forwards each call; the parts
 * both share live here: an append's answer for a backend that answers at
 * once. */
#include "store.h"

#include "config.h"
#include "log.h"
#include "store_redis.h"
#include "store_sqlite.h"
#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct store {
	struct store_sqlite *sql; /* exactly one of the two */
	struct store_redis *redis;
	struct loop *lp;
	struct metrics *m;
};

/* Create the folders above the database file that are missing (as mkdir
 * -p). Here, in the one open every start-up path goes through (a single
 * herald, a group's main process before it forks, each worker), so none of
 * them meets a fresh tree's missing folder. Returns 0, or -1 with the
 * reason in err. */
static int make_db_folder(const char *db, char *err, size_t errlen)
{
	const char *slash = strrchr(db, '/');
	if (!slash || slash == db)
		return 0;
	char *dir = xstrndup(db, (size_t)(slash - db));
	int r = 0;
	for (char *p = dir + 1;; p++) {
		bool last = *p == '\0';
		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
			snprintf(err, errlen, "creating the database folder %s: %s", dir, strerror(errno));
			r = -1;
			break;
		}
		if (last)
			break;
		*p = '/';
	}
	free(dir);
	return r;
}

struct store *store_open(const struct config *cfg, struct loop *lp, struct metrics *m, char *err, size_t errlen)
{
	bool redis = cfg->redis_url && cfg->redis_url[0];
	if (!redis && make_db_folder(cfg->db, err, errlen) < 0)
		return NULL;
	struct store *st = xcalloc(1, sizeof(*st));
	st->lp = lp;
	st->m = m;
	if (redis)
		st->redis = store_redis_open(cfg, lp, m, err, errlen);
	else
		st->sql = store_sqlite_open(cfg->db, (int)cfg->busy_timeout_ms, err, errlen);
	if (!st->sql && !st->redis) {
		free(st);
		return NULL;
	}
	return st;
}

void store_watch(struct store *st, const struct store_hooks *h)
{
	if (st->redis)
		store_redis_watch(st->redis, h);
	else if (store_sqlite_watch(st->sql, st->lp, st->m, h) < 0)
		log_warn("watching the database for other writers failed; only herald's own events are seen");
}

void store_close(struct store *st)
{
	if (!st)
		return;
	if (st->redis)
		store_redis_close(st->redis);
	else
		store_sqlite_close(st->sql);
	free(st);
}

void store_append(struct store *st, const struct store_new_event *evs, size_t n, store_append_cb done, void *arg)
{
	if (st->redis) {
		store_redis_append(st->redis, evs, n, done, arg);
		return;
	}
	int64_t *ids = xmalloc((n ? n : 1) * sizeof(*ids));
	int r = store_sqlite_append_batch(st->sql, evs, n, ids);
	done(arg, r, r == 0 ? ids : NULL); /* the answers and the fan-out first */
	free(ids);
	if (r == 0)
		store_sqlite_written(st->sql);
}

int store_read_range(struct store *st, int64_t after, int64_t upto, size_t limit, store_row_cb cb, void *arg)
{
	if (st->redis)
		return store_redis_read(st->redis, after, upto, limit, NULL, cb, arg, NULL);
	return store_sqlite_read_range(st->sql, after, upto, limit, cb, arg);
}

int store_read_matching(struct store *st, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
			store_row_cb cb, void *arg, int64_t *through)
{
	if (st->redis)
		return store_redis_read(st->redis, after, upto, limit, f, cb, arg, through);
	return store_sqlite_read_matching(st->sql, after, upto, limit, f, cb, arg, through);
}

int store_max_id(struct store *st, int64_t *max_id)
{
	if (st->redis)
		return store_redis_max_id(st->redis, max_id);
	return store_sqlite_max_id(st->sql, max_id);
}

int64_t store_pruned_through(const struct store *st)
{
	if (st->redis)
		return store_redis_pruned_through(st->redis);
	return store_sqlite_pruned_through(st->sql);
}

uint64_t store_sync_begin(struct store *st)
{
	return st->redis ? store_redis_sync_begin(st->redis) : 0;
}

bool store_sync_done(const struct store *st, uint64_t ticket)
{
	return st->redis ? store_redis_sync_done(st->redis, ticket) : true;
}

int store_prune(struct store *st, int64_t max_age_s, int64_t max_count, size_t max_rows)
{
	if (st->redis)
		return store_redis_prune(st->redis, max_age_s, max_count, max_rows);
	int n = store_sqlite_prune(st->sql, max_age_s, max_count, max_rows);
	if (n > 0)
		store_sqlite_written(st->sql);
	return n;
}

bool store_available(const struct store *st)
{
	return st->redis ? store_redis_available(st->redis) : true;
}

const char *store_kind(const struct store *st)
{
	return st->redis ? "redis" : "sqlite";
}
