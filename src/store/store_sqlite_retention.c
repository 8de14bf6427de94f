/* SPDX-License-Identifier: BSD-2-Clause */
/* store_sqlite_retention.c: retention kept per namespace (namespace.h) on
 * the SQLite log, so that a chatty family of topics never prunes a quiet
 * one's history. A row's namespace is its topic's, found in C; the table
 * has no column for it (applications insert rows themselves).
 *
 * Two walks up the log, each bounded per call:
 *   counting: the rows above `counted` are classified and counted per
 *             namespace (live rows at or below `counted`);
 *   pruning:  per namespace, from `low` (every row of it at or below is
 *             gone) upwards: its oldest rows are deleted while it has more
 *             than its retention_count counted, or while they are older
 *             than its retention_age; the walk stops at its first row that
 *             stays (the rest of it is newer). Rows of other namespaces are
 *             stepped over, and low with them.
 * A namespace's pruned-through id (the highest id of it deleted: a reader
 * resuming below it missed something) is kept in herald_meta under
 * "pruned_through ns:PATTERN" (the defaults: "pruned_through"), so it
 * survives restarts and reloads. The counts are rebuilt when the
 * namespaces' patterns change and at every start, and counted again all
 * the time by a third walk a step behind the others (recount): a row
 * another program deleted is counted until that walk has passed its place,
 * never for good, so a namespace never keeps fewer than its count for long
 * because something else deleted its rows. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "core/namespace.h"
#include "store/store_sqlite_private.h"

/* Rows one walk visits a call, at most (and max_rows, whichever is less). */
#define RETENTION_SCAN_ROWS 4096

struct ns_count {
	int64_t count;  /* its rows at or below counted, not deleted */
	int64_t fresh;  /* its rows at or below recounted, counted again */
	int64_t low;    /* every row of it at or below is deleted */
	int64_t pruned; /* the highest id of it deleted */
};

struct store_retention {
	struct namespaces patterns; /* the classification these counts are by */
	struct ns_count *ns;        /* [0]: the defaults, [i + 1]: patterns.ns[i] */
	int64_t counted;
	int64_t recounted;   /* the recount's walk has reached this id */
	sqlite3_stmt *scan;  /* id, topic, created_at above an id */
	sqlite3_stmt *del;   /* one row */
	sqlite3_stmt *keys;  /* its idempotency key */
	sqlite3_stmt *get;   /* a namespace's pruned_through */
	sqlite3_stmt *put;   /* and its update */
	int64_t max_deleted; /* highest id deleted in this call */
};

/* The herald_meta key of namespace i (-1: the defaults). */
static void meta_key(const struct namespaces *t, int i, char *out, size_t len)
{
	if (i < 0)
		snprintf(out, len, "pruned_through");
	else
		snprintf(out, len, "pruned_through ns:%s", t->ns[i].pattern);
}

static void retention_free(struct store_retention *r)
{
	if (!r)
		return;
	sqlite3_stmt *stmts[] = { r->scan, r->del, r->keys, r->get, r->put };
	for (size_t i = 0; i < ARRAY_LEN(stmts); i++)
		sqlite3_finalize(stmts[i]);
	namespaces_free(&r->patterns);
	free(r->ns);
	free(r);
}

void store_sqlite_retention_free(struct store_sqlite *st)
{
	retention_free(st->retention);
	st->retention = NULL;
}

/* A fresh state for table t: statements prepared, every namespace's
 * pruned-through read back, nothing counted yet. NULL on failure (logged). */
static struct store_retention *retention_new(struct store_sqlite *st, const struct namespaces *t)
{
	struct store_retention *r = xcalloc(1, sizeof(*r));
	namespaces_copy(&r->patterns, t);
	r->ns = xcalloc(t->n + 1, sizeof(*r->ns));
	const char *sql[] = {
		"SELECT id, topic, created_at FROM events WHERE id > ?1 ORDER BY id LIMIT ?2",
		"DELETE FROM events WHERE id = ?1",
		"DELETE FROM herald_idempotency WHERE event_id = ?1",
		"SELECT value FROM herald_meta WHERE key = ?1",
		"INSERT INTO herald_meta(key, value) VALUES (?1, ?2)"
		" ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
	};
	sqlite3_stmt **out[] = { &r->scan, &r->del, &r->keys, &r->get, &r->put };
	for (size_t i = 0; i < ARRAY_LEN(sql); i++) {
		if (sqlite3_prepare_v3(st->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, out[i], NULL) != SQLITE_OK) {
			log_err("store: preparing retention by namespace: %s", sqlite3_errmsg(st->db));
			retention_free(r);
			return NULL;
		}
	}
	/* A namespace never pruned on its own may have lost rows to the
	 * retention of the whole log before it had a section: the log's
	 * pruned-through (the defaults' key) is where it starts. */
	for (int i = -1; i < (int)t->n; i++) {
		char key[200];
		meta_key(t, i, key, sizeof(key));
		sqlite3_bind_text(r->get, 1, key, -1, SQLITE_TRANSIENT);
		int64_t v = r->ns[0].pruned;
		if (sqlite3_step(r->get) == SQLITE_ROW)
			v = sqlite3_column_int64(r->get, 0);
		sqlite3_reset(r->get);
		r->ns[i + 1].pruned = MAX(v, r->ns[0].pruned);
		r->ns[i + 1].low = 0;
	}
	return r;
}

/* The namespace of the row the scan is on (-1: the defaults). */
static int row_namespace(const struct store_retention *r)
{
	const char *topic = (const char *)sqlite3_column_text(r->scan, 1);
	size_t len = (size_t)sqlite3_column_bytes(r->scan, 1);
	return namespace_of(&r->patterns, topic ? topic : "", len);
}

/* Count the rows above r->counted, up to limit of them. Returns the rows
 * visited or a negative errno. */
static int count_new(struct store_sqlite *st, struct store_retention *r, size_t limit)
{
	sqlite3_bind_int64(r->scan, 1, r->counted);
	sqlite3_bind_int64(r->scan, 2, (sqlite3_int64)limit);
	int rc, n = 0;
	while ((rc = sqlite3_step(r->scan)) == SQLITE_ROW) {
		r->ns[row_namespace(r) + 1].count++;
		r->counted = sqlite3_column_int64(r->scan, 0);
		n++;
	}
	sqlite3_reset(r->scan);
	if (rc != SQLITE_DONE)
		return store_sqlite_fail_rc(st, "count the log by namespace", rc);
	return n;
}

/* Count again the rows above r->recounted, up to limit of them and no
 * further than counted; once the walk has reached it, its counts are the
 * namespaces' and it starts over. Returns 0 or a negative errno. */
static int recount(struct store_sqlite *st, struct store_retention *r, size_t limit, size_t nns)
{
	sqlite3_bind_int64(r->scan, 1, r->recounted);
	sqlite3_bind_int64(r->scan, 2, (sqlite3_int64)limit);
	int rc;
	size_t n = 0;
	bool end = true;
	while ((rc = sqlite3_step(r->scan)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(r->scan, 0);
		if (id > r->counted)
			break;
		r->ns[row_namespace(r) + 1].fresh++;
		r->recounted = id;
		if (++n == limit)
			end = false;
	}
	sqlite3_reset(r->scan);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return store_sqlite_fail_rc(st, "count the log again by namespace", rc);
	if (end) {
		for (size_t i = 0; i < nns; i++) {
			r->ns[i].count = r->ns[i].fresh;
			r->ns[i].fresh = 0;
		}
		r->recounted = 0;
	}
	return 0;
}

/* Delete row id of namespace i (and its idempotency key). */
static int delete_row(struct store_sqlite *st, struct store_retention *r, int i, int64_t id)
{
	sqlite3_bind_int64(r->del, 1, id);
	int rc = store_sqlite_step_done(r->del);
	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(r->keys, 1, id);
		rc = store_sqlite_step_done(r->keys);
	}
	if (rc != SQLITE_OK)
		return store_sqlite_fail_rc(st, "prune a namespace", rc);
	if (id > r->max_deleted)
		r->max_deleted = id;
	if (id <= r->recounted)
		r->ns[i + 1].fresh--;
	return 0;
}

/* Prune namespace i (-1: the defaults) by its rules, visiting up to limit
 * rows. Returns the rows deleted or a negative errno. */
static int prune_one(struct store_sqlite *st, struct store_retention *r, int i, const struct namespace *rules,
		     int64_t now, size_t limit)
{
	struct ns_count *c = &r->ns[i + 1];
	int64_t excess = rules->retention_count > 0 ? c->count - rules->retention_count : 0;
	int64_t age_cut = rules->retention_age_s > 0 ? now - rules->retention_age_s : INT64_MIN;
	if (excess <= 0 && age_cut == INT64_MIN)
		return 0;
	/* Rows the counting walk has not reached are left for it. */
	sqlite3_bind_int64(r->scan, 1, c->low);
	sqlite3_bind_int64(r->scan, 2, (sqlite3_int64)limit);
	int64_t dels[RETENTION_SCAN_ROWS];
	size_t ndel = 0;
	int rc;
	while ((rc = sqlite3_step(r->scan)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(r->scan, 0);
		if (id > r->counted)
			break;
		if (row_namespace(r) != i) {
			c->low = id;
			continue;
		}
		if (excess <= 0 && sqlite3_column_int64(r->scan, 2) >= age_cut)
			break; /* the first of it that stays */
		dels[ndel++] = id;
		excess--;
		c->low = id;
	}
	sqlite3_reset(r->scan);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return store_sqlite_fail_rc(st, "read the log for retention", rc);
	for (size_t k = 0; k < ndel; k++) {
		int e = delete_row(st, r, i, dels[k]);
		if (e < 0)
			return e;
	}
	c->count -= (int64_t)ndel;
	if (ndel) {
		int64_t top = dels[ndel - 1];
		char key[200];
		meta_key(&r->patterns, i, key, sizeof(key));
		sqlite3_bind_text(r->put, 1, key, -1, SQLITE_TRANSIENT);
		sqlite3_bind_int64(r->put, 2, top);
		int e = store_sqlite_step_done(r->put);
		if (e != SQLITE_OK)
			return store_sqlite_fail_rc(st, "record a namespace's pruned_through", e);
		if (top > c->pruned)
			c->pruned = top;
	}
	return (int)ndel;
}

int store_sqlite_prune_namespaces(struct store_sqlite *st, const struct namespaces *t, const struct namespace *defaults,
				  size_t max_rows, bool *more)
{
	*more = false;
	struct store_retention *r = st->retention;
	if (r && !namespaces_same_patterns(&r->patterns, t)) {
		store_sqlite_retention_free(st);
		r = NULL;
	}
	if (!r) {
		r = st->retention = retention_new(st, t);
		if (!r)
			return -EIO;
	}
	size_t limit = MIN(max_rows, (size_t)RETENTION_SCAN_ROWS);
	if (limit == 0)
		return 0;
	int rc = store_sqlite_step_done(st->begin);
	if (rc != SQLITE_OK)
		return store_sqlite_fail_rc(st, "begin prune", rc);
	int deleted = 0, ret = count_new(st, r, limit);
	*more = ret == (int)limit;
	if (ret >= 0 && !*more)
		ret = recount(st, r, limit, t->n + 1);
	r->max_deleted = 0;
	int64_t now = clock_wall_s();
	for (int i = -1; ret >= 0 && i < (int)t->n; i++) {
		ret = prune_one(st, r, i, i < 0 ? defaults : &t->ns[i], now, limit);
		if (ret > 0)
			deleted += ret;
		*more |= ret == (int)limit;
	}
	if (ret >= 0) {
		rc = store_sqlite_step_done(st->commit);
		if (rc != SQLITE_OK)
			ret = store_sqlite_fail_rc(st, "commit prune", rc);
	}
	if (ret < 0) {
		store_sqlite_tx_abort(st);
		/* What this call counted and moved may be undone: count again. */
		store_sqlite_retention_free(st);
		return ret;
	}
	if (r->max_deleted > st->pruned_through)
		st->pruned_through = r->max_deleted;
	return deleted;
}

int64_t store_sqlite_pruned_namespace(const struct store_sqlite *st, int i)
{
	const struct store_retention *r = st->retention;
	if (!r || i >= (int)r->patterns.n)
		return st->pruned_through; /* not yet known: the log's, never less */
	return r->ns[i + 1].pruned;
}
