/* SPDX-License-Identifier: BSD-2-Clause */
/* store_sqlite_lease.c: store_lease on the SQLite file (store.h). A lease
 * named N is two herald_meta rows, 'N.owner' and 'N.until' (Unix time in
 * ms: processes sharing the file share the wall clock), and its cursor a
 * third, 'N.cursor' (absent until first stored); one BEGIN IMMEDIATE transaction reads and writes them,
 * so two workers never both hold it. A lock that is not free within
 * busy_timeout_ms is -EBUSY, nothing changed. A process that does not
 * hold the lease while another's is good learns so by reading alone, so
 * the workers that do not deliver take no write lock each second. Called
 * about once a second and once per webhook batch: the statements are
 * prepared per call. */
#include "store/store_sqlite_private.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define META_KEY_MAX 96

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* herald_meta's value for key into *v (kept when absent): SQLITE_OK. */
static int meta_get(sqlite3 *db, const char *key, int64_t *v, bool *found)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, "SELECT value FROM herald_meta WHERE key = ?1", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	*found = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int meta_put(sqlite3 *db, const char *key, int64_t v)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO herald_meta(key, value) VALUES (?1, ?2)", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, v);
	rc = store_sqlite_step_done(s);
	sqlite3_finalize(s);
	return rc;
}

static int meta_delete(sqlite3 *db, const char *key)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, "DELETE FROM herald_meta WHERE key = ?1", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
	rc = store_sqlite_step_done(s);
	sqlite3_finalize(s);
	return rc;
}

/* A lease's three rows: their keys and what they hold. */
struct lease_rows {
	char k_owner[META_KEY_MAX], k_until[META_KEY_MAX], k_cursor[META_KEY_MAX];
	int64_t owner, until, cursor; /* cursor -1 when absent */
	bool has_owner, has_until;
};

static int lease_read(sqlite3 *db, const char *name, struct lease_rows *r)
{
	bool has_cursor;
	snprintf(r->k_owner, sizeof(r->k_owner), "%s.owner", name);
	snprintf(r->k_until, sizeof(r->k_until), "%s.until", name);
	snprintf(r->k_cursor, sizeof(r->k_cursor), "%s.cursor", name);
	r->owner = r->until = 0;
	r->cursor = -1;
	int rc;
	if ((rc = meta_get(db, r->k_owner, &r->owner, &r->has_owner)) != SQLITE_OK ||
	    (rc = meta_get(db, r->k_until, &r->until, &r->has_until)) != SQLITE_OK)
		return rc;
	return meta_get(db, r->k_cursor, &r->cursor, &has_cursor);
}

/* Whether the rows say free (no owner, or its time is up) at now. */
static bool lease_free(const struct lease_rows *r, int64_t now)
{
	return !r->has_owner || !r->has_until || r->until <= now;
}

/* The transaction's body: SQLITE_OK with *held, *stored and *wrote. */
static int lease_tx(sqlite3 *db, const char *name, int64_t owner, uint64_t ttl_ms, int64_t cursor, bool *held,
		    int64_t *stored, bool *wrote)
{
	struct lease_rows r;
	int rc = lease_read(db, name, &r);
	if (rc != SQLITE_OK)
		return rc;
	*stored = r.cursor;
	int64_t now = wall_ms();
	bool own = r.has_owner && r.owner == owner;
	bool mine = own || (lease_free(&r, now) && ttl_ms > 0);
	*held = mine && ttl_ms > 0;
	if (mine && cursor >= 0 && cursor > *stored) {
		if ((rc = meta_put(db, r.k_cursor, cursor)) != SQLITE_OK)
			return rc;
		*stored = cursor;
		*wrote = true;
	}
	if (*held) {
		if ((!own && (rc = meta_put(db, r.k_owner, owner)) != SQLITE_OK) ||
		    (rc = meta_put(db, r.k_until, now + (int64_t)ttl_ms)) != SQLITE_OK)
			return rc;
		*wrote = true;
	} else if (own) {
		if ((rc = meta_delete(db, r.k_owner)) != SQLITE_OK || (rc = meta_delete(db, r.k_until)) != SQLITE_OK)
			return rc;
		*wrote = true;
	}
	return SQLITE_OK;
}

/* Whether another owner's lease is good now, read without the write lock
 * (WAL: a read waits for no writer): *stored its cursor. A take that would
 * fail anyway then answers without queueing behind publishers for the
 * lock; any change is decided by the transaction, which reads again. */
static bool held_by_another(sqlite3 *db, const char *name, int64_t owner, int64_t *stored)
{
	struct lease_rows r;
	if (lease_read(db, name, &r) != SQLITE_OK || lease_free(&r, wall_ms()) || r.owner == owner)
		return false;
	*stored = r.cursor;
	return true;
}

int store_sqlite_lease(struct store_sqlite *st, const char *name, int64_t owner, uint64_t ttl_ms, int64_t cursor,
		       bool *held, int64_t *stored)
{
	bool wrote = false;
	*held = false;
	*stored = -1;
	if (strlen(name) > META_KEY_MAX - 8)
		return -EINVAL;
	if (ttl_ms > 0 && held_by_another(st->db, name, owner, stored))
		return 0;
	*stored = -1;
	int rc = store_sqlite_step_done(st->begin);
	if (rc != SQLITE_OK)
		return store_sqlite_fail_rc(st, "lease (begin)", rc);
	rc = lease_tx(st->db, name, owner, ttl_ms, cursor, held, stored, &wrote);
	if (rc == SQLITE_OK)
		rc = store_sqlite_step_done(st->commit);
	if (rc != SQLITE_OK) {
		int ret = store_sqlite_fail_rc(st, "lease", rc);
		store_sqlite_tx_abort(st);
		*held = false;
		return ret;
	}
	if (wrote)
		store_sqlite_written(st);
	return 0;
}
