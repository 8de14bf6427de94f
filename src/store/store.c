/* SPDX-License-Identifier: BSD-2-Clause */
/* store.c: store.h over its backends. Each backend is a table of
 * operations (store_backend.h); store_open picks the first one the
 * configuration names and every call goes through that table with the
 * backend's state. Nothing here knows a backend's insides. */
#include "store/store.h"

#include "store/store_backend.h"
#include "store/store_redis.h"
#include "store/store_sqlite.h"
#include "common/util.h"

#include <errno.h>
#include <stdlib.h>

struct store {
	const struct store_backend *ops; /* chosen once, at open */
	void *be;                        /* the backend's state, its own */
};

/* In order of preference: SQLite, the default, says yes to any
 * configuration, so it comes last. */
static const struct store_backend *const backends[] = {
	&store_redis_backend,
	&store_sqlite_backend,
};

struct store *store_open(const struct config *cfg, struct loop *lp, struct metrics *m, char *err, size_t errlen)
{
	const struct store_backend *ops = NULL;
	for (size_t i = 0; i < ARRAY_LEN(backends) && !ops; i++)
		if (backends[i]->chosen(cfg))
			ops = backends[i];
	void *be = ops->open(cfg, lp, m, err, errlen);
	if (!be)
		return NULL;
	struct store *st = xcalloc(1, sizeof(*st));
	st->ops = ops;
	st->be = be;
	return st;
}

void store_watch(struct store *st, const struct store_hooks *h)
{
	st->ops->watch(st->be, h);
}

void store_set_peers(struct store *st, const struct store_peers *p)
{
	if (st->ops->set_peers)
		st->ops->set_peers(st->be, p);
}

void store_close(struct store *st)
{
	if (!st)
		return;
	st->ops->close(st->be);
	free(st);
}

void store_append(struct store *st, const struct store_new_event *evs, size_t n, store_append_cb done, void *arg)
{
	st->ops->append(st->be, evs, n, done, arg);
}

int store_read_range(struct store *st, int64_t after, int64_t upto, size_t limit, store_row_cb cb, void *arg)
{
	return st->ops->read_range(st->be, after, upto, limit, cb, arg);
}

int store_read_matching(struct store *st, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
			store_row_cb cb, void *arg, int64_t *through)
{
	return st->ops->read_matching(st->be, after, upto, limit, f, cb, arg, through);
}

int store_max_id(struct store *st, int64_t *max_id)
{
	return st->ops->max_id(st->be, max_id);
}

int64_t store_pruned_through(const struct store *st)
{
	return st->ops->pruned_through(st->be);
}

uint64_t store_sync_begin(struct store *st)
{
	return st->ops->sync_begin(st->be);
}

bool store_sync_done(const struct store *st, uint64_t ticket)
{
	return st->ops->sync_done(st->be, ticket);
}

int store_prune(struct store *st, int64_t max_age_s, int64_t max_count, size_t max_rows)
{
	return st->ops->prune(st->be, max_age_s, max_count, max_rows);
}

int store_prune_namespaces(struct store *st, const struct namespaces *t, const struct namespace *defaults,
			   size_t max_rows, bool *more)
{
	*more = false;
	if (!st->ops->prune_namespaces)
		return -ENOTSUP;
	return st->ops->prune_namespaces(st->be, t, defaults, max_rows, more);
}

int64_t store_pruned_namespace(const struct store *st, int i)
{
	if (!st->ops->pruned_namespace)
		return st->ops->pruned_through(st->be);
	return st->ops->pruned_namespace(st->be, i);
}

bool store_available(const struct store *st)
{
	return st->ops->available(st->be);
}

void store_mercure_find(struct store *st, const char *mercure_id, store_found_cb found, void *arg)
{
	if (st->ops->mercure_find)
		st->ops->mercure_find(st->be, mercure_id, found, arg);
	else
		found(arg, -ENOTSUP, NULL);
}

bool store_keeps_mercure(const struct store *st)
{
	return st->ops->mercure_find != NULL;
}

const char *store_kind(const struct store *st)
{
	return st->ops->kind;
}
