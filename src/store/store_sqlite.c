/* SPDX-License-Identifier: BSD-2-Clause */
/* store_sqlite.c: the SQLite backend of store.h. Owns the database
 * connection (open and close), the prepared statements of the hot paths,
 * errors and transactions, the log (append, reads and their budgets,
 * prune) and the backend table store.c drives. The schema and its
 * migrations are store_sqlite_schema.c's; the watch for other writers'
 * commits and the checkpoint policy are store_sqlite_watch.c's; the struct
 * they share is in store_sqlite_private.h.
 *
 * Invariants:
 * - Every statement is reset right after use, so no read transaction stays
 *   open between calls (an open one would pin an old snapshot, hide other
 *   writers' commits and block WAL checkpoints).
 * - Write paths run BEGIN IMMEDIATE ... COMMIT; a lock that is not free
 *   within busy_timeout_ms gives -EBUSY with nothing written, never a stall.
 * - Ids come from AUTOINCREMENT, so an id is never reused even after the
 *   rows holding the highest ids were pruned (sqlite_sequence remembers). */
#include "store/store_sqlite_private.h"

#include "core/config.h"
#include "common/log.h"
#include "store/store_backend.h"
#include "store/store_filter_sql.h"
#include "store/mercure_update.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* SQLite's VM steps between two looks at a read's budget. */
#define BUDGET_CHECK_OPS 1000

static int budget_check(void *arg);
static void sql_seen(sqlite3_context *ctx, int argc, sqlite3_value **argv);

/* While opening, migrations may legitimately wait for another writer for a
 * while; the loop is not running yet. */
#define STORE_OPEN_BUSY_MS 5000

/* ---- open and close ---- */

static int prepare(struct store_sqlite *st, sqlite3_stmt **out, const char *sql, char *err, size_t errlen)
{
	int rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, out, NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "preparing \"%.60s\": %s", sql, sqlite3_errmsg(st->db));
		return -1;
	}
	return 0;
}

static int wal_counted(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct store_sqlite *st = arg;
	(void)db;
	(void)name;
	st->wal_pages = pages;
	st->last_write_ms = clock_mono_ms();
	return SQLITE_OK;
}

struct store_sqlite *store_sqlite_open(const char *path, int busy_timeout_ms, char *err, size_t errlen)
{
	struct store_sqlite *st = xcalloc(1, sizeof(*st));
	int64_t version = 0;
	int rc;

	st->watch_fd = -1;
	st->path = xstrdup(path);
	/* Create a new database group-writable (the umask still applies), so
	 * other programs in the service's group can insert events; SQLite gives
	 * its -wal and -shm files the same mode. */
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0660);
	if (fd >= 0)
		close(fd);
	rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		int sys = st->db ? sqlite3_system_errno(st->db) : 0;
		snprintf(err, errlen, "cannot open database %s: %s%s%s%s", path,
			 st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc), sys ? " (" : "",
			 sys ? strerror(sys) : "", sys ? ")" : "");
		goto fail;
	}
	sqlite3_busy_timeout(st->db, MAX(busy_timeout_ms, STORE_OPEN_BUSY_MS));

	/* Refuse a newer schema before touching the file at all. */
	if (store_sqlite_schema_version(st->db, path, &version, err, errlen) < 0)
		goto fail;

	/* WAL lets other processes insert while herald reads, and makes every
	 * commit touch the -wal file that inotify watches. */
	sqlite3_stmt *s;
	rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode=WAL", -1, &s, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(s);
		const char *mode = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL;
		if (!mode || strcasecmp(mode, "wal") != 0) {
			snprintf(err, errlen, "cannot set WAL journal mode on %s: %s", path,
				 mode ? mode : sqlite3_errmsg(st->db));
			sqlite3_finalize(s);
			goto fail;
		}
		sqlite3_finalize(s);
	} else {
		snprintf(err, errlen, "cannot set WAL journal mode on %s: %s", path, sqlite3_errmsg(st->db));
		goto fail;
	}
	if (store_sqlite_exec(st->db, "PRAGMA synchronous=NORMAL", err, errlen, "setting synchronous=NORMAL") < 0)
		goto fail;
	if (store_sqlite_migrate(st->db, path, err, errlen) < 0)
		goto fail;

	if (prepare(st, &st->begin, "BEGIN IMMEDIATE", err, errlen) < 0 ||
	    prepare(st, &st->commit, "COMMIT", err, errlen) < 0 ||
	    prepare(st, &st->rollback, "ROLLBACK", err, errlen) < 0 ||
	    prepare(st, &st->insert, "INSERT INTO events(type, topic, data, public) VALUES (?1, ?2, ?3, ?4)", err,
		    errlen) < 0 ||
	    prepare(st, &st->range,
		    "SELECT " STORE_ROW_COLUMNS " FROM events WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3", err,
		    errlen) < 0 ||
	    prepare(st, &st->range_public,
		    "SELECT " STORE_ROW_COLUMNS " FROM events WHERE CAST(public AS INTEGER) <> 0"
		    " AND id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3",
		    err, errlen) < 0 ||
	    prepare(st, &st->late, "SELECT value FROM herald_meta WHERE key = 'late_inserts'", err, errlen) < 0 ||
	    prepare(st, &st->max_id,
		    "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='events'), 0),"
		    " COALESCE((SELECT MAX(id) FROM events), 0))",
		    err, errlen) < 0 ||
	    /* Both halves are bounded by the limit and walk an index (rowid,
	     * created_at), so a call costs O(limit) however large the table;
	     * a single "WHERE age OR count ORDER BY id" scans every row when
	     * nothing is due. */
	    prepare(st, &st->prune,
		    "DELETE FROM events WHERE id IN ("
		    "SELECT id FROM (SELECT id FROM events WHERE id <= ?2 ORDER BY id LIMIT ?3)"
		    " UNION SELECT id FROM (SELECT id FROM events WHERE created_at < ?1"
		    " ORDER BY created_at, id LIMIT ?3)"
		    " ORDER BY id LIMIT ?3) RETURNING id",
		    err, errlen) < 0 ||
	    prepare(st, &st->set_pruned,
		    "INSERT INTO herald_meta(key, value) VALUES ('pruned_through', ?1)"
		    " ON CONFLICT(key) DO UPDATE SET value = MAX(value, excluded.value)",
		    err, errlen) < 0 ||
	    prepare(st, &st->data_ver, "PRAGMA data_version", err, errlen) < 0 ||
	    prepare(st, &st->mercure_put, "INSERT INTO herald_mercure(event_id, uid, block) VALUES (?1, ?2, ?3)", err,
		    errlen) < 0 ||
	    prepare(st, &st->mercure_find,
		    "SELECT event_id FROM herald_mercure WHERE uid = ?1 ORDER BY event_id LIMIT 1", err, errlen) < 0 ||
	    /* A key counts only while its event is in the log: once retention
	     * (or another program) removed it, a retry is stored anew. */
	    prepare(st, &st->idem_get,
		    "SELECT hash, event_id FROM herald_idempotency WHERE publisher = ?1 AND key = ?2"
		    " AND created_at >= ?3 AND EXISTS (SELECT 1 FROM events WHERE id = event_id)",
		    err, errlen) < 0 ||
	    prepare(st, &st->idem_put,
		    "INSERT OR REPLACE INTO herald_idempotency(publisher, key, hash, event_id, created_at)"
		    " VALUES (?1, ?2, ?3, ?4, ?5)",
		    err, errlen) < 0 ||
	    /* Each through its index: one DELETE with both halves (an OR or a
	     * UNION inside IN) makes SQLite scan the whole table. */
	    prepare(st, &st->idem_prune_age,
		    "DELETE FROM herald_idempotency WHERE created_at < ?1 AND (publisher, key) IN ("
		    "SELECT publisher, key FROM herald_idempotency WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)",
		    err, errlen) < 0 ||
	    prepare(st, &st->idem_prune_gone,
		    "DELETE FROM herald_idempotency WHERE event_id <= ?1 AND (publisher, key) IN ("
		    "SELECT publisher, key FROM herald_idempotency WHERE event_id <= ?1 ORDER BY event_id LIMIT ?2)",
		    err, errlen) < 0)
		goto fail;
	st->idem_window_s = 86400;

	rc = store_sqlite_query_int(st->db, "SELECT value FROM herald_meta WHERE key='pruned_through'",
				    &st->pruned_through);
	if (rc == SQLITE_OK)
		rc = store_sqlite_query_int(st->db, "SELECT value FROM herald_meta WHERE key='late_inserts'",
					    &st->late_inserts);
	int64_t identity = 0;
	if (rc == SQLITE_OK)
		rc = store_sqlite_query_int(st->db, "SELECT value FROM herald_meta WHERE key='log_identity'", &identity);
	if (rc == SQLITE_OK)
		rc = store_sqlite_query_int(st->db, "PRAGMA data_version", &st->data_version);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "cannot read database %s: %s", path, sqlite3_errmsg(st->db));
		goto fail;
	}
	mercure_log_identity_set((uint64_t)identity);
	/* From here on, never wait longer than the loop can afford. */
	sqlite3_busy_timeout(st->db, busy_timeout_ms);
	/* No automatic checkpoint inside our commits: it syncs the files in
	 * the middle of a publish. The caller checkpoints from a timer
	 * (store_sqlite_checkpoint); the hook only counts the WAL's pages. */
	sqlite3_wal_hook(st->db, wal_counted, st);
	/* Filtered reads are cut short by their budget (budget_check), and
	 * their scans note how far they looked (herald_seen; direct calls
	 * only, so a trigger or view in the file cannot call it). */
	store_sqlite_set_read_budget(st, STORE_READ_BUDGET_US, STORE_READ_MIN_OPS, 0);
	sqlite3_progress_handler(st->db, BUDGET_CHECK_OPS, budget_check, st);
	if (sqlite3_create_function(st->db, "herald_seen", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY, st, sql_seen, NULL,
				    NULL) != SQLITE_OK) {
		snprintf(err, errlen, "cannot register a function on %s: %s", path, sqlite3_errmsg(st->db));
		goto fail;
	}
	struct stat sb;
	if (stat(path, &sb) < 0) {
		snprintf(err, errlen, "cannot stat database %s: %s", path, strerror(errno));
		goto fail;
	}
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	st->watch_fd = store_sqlite_watch_folder(path, FOLDER_WRITES | FOLDER_NAMES);
	return st;

fail:
	store_sqlite_close(st);
	return NULL;
}

void store_sqlite_close(struct store_sqlite *st)
{
	if (!st)
		return;
	store_sqlite_unwatch(st);
	store_sqlite_retention_free(st);
	sqlite3_stmt **stmts[] = { &st->begin,        &st->commit,         &st->rollback,
				   &st->insert,       &st->range,          &st->max_id,
				   &st->prune,        &st->set_pruned,     &st->data_ver,
				   &st->range_public, &st->late,           &st->idem_get,
				   &st->idem_put,     &st->idem_prune_age, &st->idem_prune_gone,
				   &st->mercure_put,  &st->mercure_find };
	for (size_t i = 0; i < ARRAY_LEN(stmts); i++) {
		sqlite3_finalize(*stmts[i]);
		*stmts[i] = NULL;
	}
	for (size_t i = 0; i < STORE_FILTER_CACHE; i++) {
		sqlite3_finalize(st->filters[i].stmt);
		free(st->filters[i].sql);
		st->filters[i].stmt = NULL;
		st->filters[i].sql = NULL;
	}
	if (st->db) {
		/* The last connection to close checkpoints the WAL into the
		 * database and removes the -wal file. */
		int rc = sqlite3_close(st->db);
		if (rc != SQLITE_OK) {
			log_err("store: closing %s: %s", st->path, sqlite3_errmsg(st->db));
			/* Finish whatever statement is left so the handle can go. */
			sqlite3_stmt *s;
			while ((s = sqlite3_next_stmt(st->db, NULL)))
				sqlite3_finalize(s);
			if (sqlite3_close(st->db) != SQLITE_OK)
				log_err("store: closing %s failed again: %s", st->path, sqlite3_errmsg(st->db));
		}
	}
	if (st->watch_fd >= 0)
		close(st->watch_fd);
	free(st->path);
	free(st);
}

/* ---- errors and transactions ---- */

bool store_sqlite_is_busy(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
}

/* The errno behind a failed file operation, or 0 when the failure was not
 * one. sqlite3_system_errno misses a write that fails inside COMMIT, so ask
 * the write-ahead log's file, where herald's commits write, and then the
 * database file: each keeps the errno of its own last failure. */
static int failed_errno(struct store_sqlite *st)
{
	int primary = sqlite3_extended_errcode(st->db) & 0xff;
	if (primary != SQLITE_IOERR && primary != SQLITE_CANTOPEN)
		return 0;
	int e = sqlite3_system_errno(st->db);
	sqlite3_file *wal = NULL;
	if (!e && sqlite3_file_control(st->db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal) == SQLITE_OK && wal &&
	    wal->pMethods && wal->pMethods->xFileControl(wal, SQLITE_FCNTL_LAST_ERRNO, &e) != SQLITE_OK)
		e = 0;
	if (!e && sqlite3_file_control(st->db, "main", SQLITE_FCNTL_LAST_ERRNO, &e) != SQLITE_OK)
		e = 0;
	return e;
}

/* Map a failed result to store.h's contract: -EBUSY (contention), -EROFS
 * (the files cannot be written), -ENOSPC (no room), or -EIO (logged). A
 * full disk is SQLITE_FULL, but a file past RLIMIT_FSIZE (EFBIG) or over
 * quota comes as an I/O error; an immutable file or a file system that went
 * read-only under an open descriptor also comes as an I/O error (EPERM,
 * EROFS), not as SQLITE_READONLY. Call before anything else runs on the
 * connection, so the codes are still the failure's own. */
int store_sqlite_fail_rc(struct store_sqlite *st, const char *op, int rc)
{
	if (store_sqlite_is_busy(rc))
		return -EBUSY;
	int primary = sqlite3_extended_errcode(st->db) & 0xff;
	int sys = failed_errno(st);
	char why[96] = "";
	if (sys)
		snprintf(why, sizeof(why), " (%s)", strerror(sys));
	if (primary == SQLITE_READONLY || sys == EROFS || sys == EPERM || sys == EACCES) {
		log_debug("store: %s on %s: %s%s: read-only", op, st->path, sqlite3_errmsg(st->db), why);
		return -EROFS;
	}
	if (primary == SQLITE_FULL || sys == ENOSPC || sys == EDQUOT || sys == EFBIG) {
		log_debug("store: %s on %s: %s%s: no space", op, st->path, sqlite3_errmsg(st->db), why);
		return -ENOSPC;
	}
	log_err("store: %s on %s: %s%s", op, st->path, sqlite3_errmsg(st->db), why);
	return -EIO;
}

/* Step a statement that yields no row (BEGIN, COMMIT, ...) and reset it. */
int store_sqlite_step_done(sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

void store_sqlite_tx_abort(struct store_sqlite *st)
{
	if (!sqlite3_get_autocommit(st->db)) {
		int rc = store_sqlite_step_done(st->rollback);
		if (rc != SQLITE_OK)
			log_err("store: rollback on %s: %s", st->path, sqlite3_errmsg(st->db));
	}
}

/* ---- the log ---- */

/* The key of ev as remembered within the window and with its event still in
 * the log: 1 with *id and *same (the hash equal), 0 when there is none, or
 * a negative code. */
static int key_lookup(struct store_sqlite *st, const struct store_new_event *ev, int64_t now, int64_t *id, bool *same)
{
	sqlite3_stmt *s = st->idem_get;
	sqlite3_bind_text(s, 1, ev->idem_publisher ? ev->idem_publisher : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, ev->idem_key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, now - st->idem_window_s);
	int rc = sqlite3_step(s), ret = 0;
	if (rc == SQLITE_ROW) {
		const char *h = (const char *)sqlite3_column_text(s, 0);
		*id = sqlite3_column_int64(s, 1);
		*same = h && ev->idem_hash && strcmp(h, ev->idem_hash) == 0;
		ret = 1;
	} else if (rc != SQLITE_DONE) {
		ret = store_sqlite_fail_rc(st, "idempotency key lookup", rc);
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return ret;
}

/* Remember ev's key for event id (replacing an expired or orphaned one). */
static int key_remember(struct store_sqlite *st, const struct store_new_event *ev, int64_t id, int64_t now)
{
	sqlite3_stmt *s = st->idem_put;
	sqlite3_bind_text(s, 1, ev->idem_publisher ? ev->idem_publisher : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, ev->idem_key, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, ev->idem_hash ? ev->idem_hash : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, id);
	sqlite3_bind_int64(s, 5, now);
	int rc = store_sqlite_step_done(s);
	sqlite3_clear_bindings(s);
	return rc == SQLITE_OK ? 0 : store_sqlite_fail_rc(st, "remember idempotency key", rc);
}

/* Forget at most limit keys older than the window or whose event retention
 * removed (id at most pruned). Inside the caller's transaction. */
static int keys_prune(struct store_sqlite *st, int64_t now, int64_t pruned, size_t limit)
{
	sqlite3_bind_int64(st->idem_prune_age, 1, now - st->idem_window_s);
	sqlite3_bind_int64(st->idem_prune_age, 2, (sqlite3_int64)limit);
	int rc = store_sqlite_step_done(st->idem_prune_age);
	if (rc == SQLITE_OK && pruned > 0) {
		sqlite3_bind_int64(st->idem_prune_gone, 1, pruned);
		sqlite3_bind_int64(st->idem_prune_gone, 2, (sqlite3_int64)limit);
		rc = store_sqlite_step_done(st->idem_prune_gone);
	}
	return rc == SQLITE_OK ? 0 : store_sqlite_fail_rc(st, "forget idempotency keys", rc);
}

void store_sqlite_set_idempotency_window(struct store_sqlite *st, int64_t window_s)
{
	st->idem_window_s = window_s;
}

int store_sqlite_mercure_find(struct store_sqlite *st, const char *mercure_id, int64_t *id)
{
	sqlite3_stmt *s = st->mercure_find;
	sqlite3_bind_text(s, 1, mercure_id, -1, SQLITE_STATIC);
	int rc = sqlite3_step(s);
	int ret = 0;
	if (rc == SQLITE_ROW) {
		*id = sqlite3_column_int64(s, 0);
		ret = 1;
	} else if (rc != SQLITE_DONE) {
		ret = store_sqlite_fail_rc(st, "find a Mercure id", rc);
	}
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return ret;
}

/* Keep row id's Mercure id and block (inside the append's transaction);
 * a block without the publisher's id is kept under the id made from the
 * number, which no lookup needs (mercure_log_id_parse places it). */
static int mercure_remember(struct store_sqlite *st, const struct store_new_event *ev, int64_t id)
{
	sqlite3_stmt *s = st->mercure_put;
	char made[MERCURE_LOG_ID_LEN + 1];
	if (!ev->mercure_id)
		mercure_log_id(id, made);
	sqlite3_bind_int64(s, 1, id);
	sqlite3_bind_text(s, 2, ev->mercure_id ? ev->mercure_id : made, -1, SQLITE_STATIC);
	sqlite3_bind_text64(s, 3, ev->mercure ? ev->mercure : "", ev->mercure ? ev->mercure_len : 0, SQLITE_STATIC,
			    SQLITE_UTF8);
	int rc = sqlite3_step(s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc == SQLITE_DONE ? 0 : store_sqlite_fail_rc(st, "append a Mercure id", rc);
}

int store_sqlite_append(struct store_sqlite *st, const struct store_new_event *evs, size_t n,
			struct store_appended *out)
{
	int rc, ret;
	int64_t now = clock_wall_s();
	size_t keyed = 0;

	if (n == 0)
		return 0;
	rc = store_sqlite_step_done(st->begin);
	if (rc != SQLITE_OK) {
		ret = store_sqlite_fail_rc(st, "begin append", rc);
		store_sqlite_tx_abort(st);
		return ret;
	}
	for (size_t i = 0; i < n; i++) {
		const struct store_new_event *ev = &evs[i];
		if (ev->idem_key) {
			/* Looked up inside the transaction, so an earlier row of
			 * this batch with the same key is found too. */
			int64_t id = 0;
			bool same = false;
			keyed++;
			ret = key_lookup(st, ev, now, &id, &same);
			if (ret < 0)
				goto fail;
			if (ret == 1) {
				out[i] = (struct store_appended){ id, same ? STORE_REPLAYED : STORE_KEY_CONFLICT, 0 };
				continue;
			}
		}
		sqlite3_bind_text(st->insert, 1, ev->type ? ev->type : "message", -1, SQLITE_STATIC);
		sqlite3_bind_text(st->insert, 2, ev->topic ? ev->topic : "", -1, SQLITE_STATIC);
		sqlite3_bind_text64(st->insert, 3, ev->data ? ev->data : "", ev->data ? ev->data_len : 0, SQLITE_STATIC,
				    SQLITE_UTF8);
		sqlite3_bind_int(st->insert, 4, ev->public ? 1 : 0);
		rc = sqlite3_step(st->insert);
		if (rc != SQLITE_DONE) {
			ret = store_sqlite_fail_rc(st, "append", rc);
			sqlite3_reset(st->insert);
			goto fail;
		}
		sqlite3_reset(st->insert);
		int64_t id = sqlite3_last_insert_rowid(st->db);
		out[i] = (struct store_appended){ id, STORE_STORED, 0 };
		if (ev->idem_key && (ret = key_remember(st, ev, id, now)) < 0)
			goto fail;
		if (ev->mercure_id && (ret = store_sqlite_mercure_find(st, ev->mercure_id, &out[i].earlier)) < 0)
			goto fail;
		if ((ev->mercure_id || ev->mercure) && (ret = mercure_remember(st, ev, id)) < 0)
			goto fail;
	}
	/* The bound strings belong to the caller; drop the references. */
	sqlite3_clear_bindings(st->insert);
	/* Keyed publishes pay for forgetting a few expired keys, so the table
	 * stays bounded by the window even without retention. */
	if (keyed && (ret = keys_prune(st, now, 0, 2 * keyed + 16)) < 0)
		goto fail;
	rc = store_sqlite_step_done(st->commit);
	if (rc != SQLITE_OK) {
		ret = store_sqlite_fail_rc(st, "commit append", rc);
		store_sqlite_tx_abort(st);
		return ret;
	}
	return 0;

fail:
	sqlite3_clear_bindings(st->insert);
	store_sqlite_tx_abort(st);
	return ret;
}

int store_sqlite_append_batch(struct store_sqlite *st, const struct store_new_event *evs, size_t n, int64_t *ids_out)
{
	struct store_appended *res = xmalloc((n ? n : 1) * sizeof(*res));
	int r = store_sqlite_append(st, evs, n, res);
	if (r == 0 && ids_out)
		for (size_t i = 0; i < n; i++)
			ids_out[i] = res[i].id;
	free(res);
	return r;
}

/* A column as text: NULL reads as "", any other type as SQLite's text
 * conversion, so rows inserted by other programs can never crash us. */
static const char *column_text(sqlite3_stmt *s, int col, size_t *len)
{
	const char *p = (const char *)sqlite3_column_text(s, col);
	if (!p) {
		*len = 0;
		return "";
	}
	*len = (size_t)sqlite3_column_bytes(s, col);
	return p;
}

/* The row s is on (its columns in STORE_ROW_COLUMNS' order), valid until the
 * next step. */
static void row_event(sqlite3_stmt *s, struct store_event *ev)
{
	ev->id = sqlite3_column_int64(s, 0);
	ev->type = column_text(s, 1, &ev->type_len);
	ev->topic = column_text(s, 2, &ev->topic_len);
	ev->data = column_text(s, 3, &ev->data_len);
	ev->public = sqlite3_column_int64(s, 4) != 0;
	ev->created_at = sqlite3_column_int64(s, 5);
	ev->mercure = NULL;
	ev->mercure_len = 0;
	if (sqlite3_column_type(s, 6) != SQLITE_NULL)
		ev->mercure = column_text(s, 6, &ev->mercure_len);
}

/* Step s (with ?1 after, ?2 upto and ?3 limit bound here, anything else by
 * the caller) and pass each row to cb; reset and unbind it afterwards. */
static int read_rows(struct store_sqlite *st, sqlite3_stmt *s, int64_t after, int64_t upto, size_t limit,
		     store_row_cb cb, void *arg)
{
	int count = 0, rc;

	if (limit > INT_MAX)
		limit = INT_MAX;
	sqlite3_bind_int64(s, 1, after);
	sqlite3_bind_int64(s, 2, upto);
	sqlite3_bind_int64(s, 3, (sqlite3_int64)limit);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_event ev;
		row_event(s, &ev);
		count++;
		if (cb(arg, &ev) != 0) {
			rc = SQLITE_DONE;
			break;
		}
	}
	int ret = rc == SQLITE_DONE ? count : store_sqlite_fail_rc(st, "read range", rc);
	/* Ends the read transaction, so the next call sees new commits. */
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return ret;
}

int store_sqlite_read_range(struct store_sqlite *st, int64_t after, int64_t upto, size_t limit, store_row_cb cb,
			    void *arg)
{
	if (limit == 0 || upto <= after)
		return 0;
	return read_rows(st, st->range, after, upto, limit, cb, arg);
}

/* herald_seen(id, wanted): note id as examined, answer wanted. */
static void sql_seen(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	(void)argc;
	struct store_sqlite *st = sqlite3_user_data(ctx);
	st->budget.seen = sqlite3_value_int64(argv[0]);
	sqlite3_result_int(ctx, sqlite3_value_int(argv[1]) != 0);
}

/* SQLite's progress handler: interrupt a budgeted read once it is past its
 * time (and its floor of steps, so every read makes progress), or past its
 * count of steps. */
static int budget_check(void *arg)
{
	struct store_sqlite *st = arg;
	struct read_budget *b = &st->budget;
	if (!b->on)
		return 0;
	b->ops += BUDGET_CHECK_OPS;
	if (b->ops < b->min_ops)
		return 0;
	if (b->max_ops && b->ops >= b->max_ops)
		return 1;
	return clock_mono_ns() / 1000 >= b->deadline;
}

void store_sqlite_set_read_budget(struct store_sqlite *st, uint64_t us, uint64_t min_ops, uint64_t max_ops)
{
	st->budget.us = us;
	st->budget.min_ops = min_ops;
	st->budget.max_ops = max_ops;
}

uint64_t store_sqlite_read_interrupts(const struct store_sqlite *st)
{
	return st->budget.interrupts;
}

/* The prepared statement for sql, from a small cache of the filters seen
 * lately (replaced round-robin): the shapes in use are few. */
static sqlite3_stmt *filter_stmt(struct store_sqlite *st, const char *sql)
{
	for (size_t i = 0; i < STORE_FILTER_CACHE; i++)
		if (st->filters[i].sql && strcmp(st->filters[i].sql, sql) == 0)
			return st->filters[i].stmt;
	struct filter_cache *slot = &st->filters[st->next_filter];
	st->next_filter = (st->next_filter + 1) % STORE_FILTER_CACHE;
	sqlite3_finalize(slot->stmt);
	free(slot->sql);
	slot->sql = NULL;
	slot->stmt = NULL;
	char err[256];
	if (prepare(st, &slot->stmt, sql, err, sizeof(err)) < 0) {
		log_err("store: preparing a filtered read: %s", err);
		return NULL;
	}
	slot->sql = xstrdup(sql);
	return slot->stmt;
}

/* A read in progress: the caller's callback, and what came of it. */
struct read_state {
	store_row_cb cb;
	void *arg;
	int64_t last; /* the last row passed to cb */
	bool stopped; /* cb asked to stop */
	int n;        /* rows passed */
};

/* Step s (bound by the caller) under the budget. SQLITE_DONE, SQLITE_INTERRUPT
 * (the budget ran out), or an error code; s is reset either way. */
static int step_budgeted(struct store_sqlite *st, sqlite3_stmt *s, struct read_state *rs)
{
	int rc;
	st->budget.on = true;
	st->budget.ops = 0;
	st->budget.seen = 0;
	st->budget.deadline = clock_mono_ns() / 1000 + st->budget.us;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct store_event ev;
		row_event(s, &ev);
		rs->n++;
		rs->last = ev.id;
		if (rs->cb(rs->arg, &ev) != 0) {
			rs->stopped = true;
			rc = SQLITE_DONE;
			break;
		}
	}
	st->budget.on = false;
	if (rc == SQLITE_INTERRUPT)
		st->budget.interrupts++;
	/* Ends the read transaction, so the next call sees new commits. */
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc;
}

/* Prepare and bind the read of f: the range walks, a seek by parts, or a
 * scan (always when force_scan). Sets *scan to which. NULL on failure with
 * *rc set (-EINVAL, -EIO). */
static sqlite3_stmt *filtered_stmt(struct store_sqlite *st, const struct store_filter *f, bool force_scan, bool *scan,
				   int *rc)
{
	struct store_filter_query q;
	char sql[16384];
	*scan = false;
	if (store_filter_sql(f, force_scan, &q, sql, sizeof(sql)) < 0) {
		*rc = -EINVAL;
		return NULL;
	}
	if (q.every)
		/* Every row, or every public one: an id-ordered walk that stops
		 * at the limit. */
		return q.see_private ? st->range : st->range_public;
	*scan = q.scan;
	sqlite3_stmt *s = filter_stmt(st, sql);
	if (!s) {
		*rc = -EIO;
		return NULL;
	}
	store_filter_bind(s, &q);
	return s;
}

int store_sqlite_read_matching(struct store_sqlite *st, int64_t after, int64_t upto, size_t limit,
			       const struct store_filter *f, store_row_cb cb, void *arg, int64_t *through)
{
	*through = after;
	if (limit == 0 || upto <= after)
		return 0;
	if (f->ntopics > STORE_MAX_TOPICS || f->ngrants > STORE_MAX_GRANTS)
		return -EINVAL;
	if (limit > INT_MAX)
		limit = INT_MAX;
	for (int attempt = 0;; attempt++) {
		bool scan;
		int err = -EIO;
		sqlite3_stmt *s = filtered_stmt(st, f, attempt > 0, &scan, &err);
		if (!s)
			return err;
		sqlite3_bind_int64(s, 1, after);
		sqlite3_bind_int64(s, 2, upto);
		sqlite3_bind_int64(s, 3, (sqlite3_int64)limit);
		struct read_state rs = { cb, arg, after, false, 0 };
		int rc = step_budgeted(st, s, &rs);
		if (rc == SQLITE_DONE) {
			/* Fewer rows than asked, and not stopped: nothing else
			 * matched up to upto. */
			*through = (!rs.stopped && (size_t)rs.n < limit) ? upto : rs.last;
			return rs.n;
		}
		if (rc != SQLITE_INTERRUPT)
			return store_sqlite_fail_rc(st, "filtered read", rc);
		/* Out of budget. Rows come out in id order (a seek's parts are
		 * merged as they go), so every wanted row up to the last one
		 * passed on has been; a scan has also examined every row below
		 * the one it was on. */
		int64_t looked = scan && st->budget.seen > after ? st->budget.seen - 1 : after;
		*through = looked > rs.last ? looked : rs.last;
		if (rs.n > 0 || scan || attempt > 0)
			return rs.n;
		/* A seek that got nowhere in its budget: once more as a scan,
		 * which always does (its floor of steps examines rows). */
	}
}

int store_sqlite_max_id(struct store_sqlite *st, int64_t *max_id)
{
	int rc = sqlite3_step(st->max_id);
	int ret = 0;
	if (rc == SQLITE_ROW)
		*max_id = sqlite3_column_int64(st->max_id, 0);
	else
		ret = store_sqlite_fail_rc(st, "read max id", rc);
	sqlite3_reset(st->max_id);
	return ret;
}

int64_t store_sqlite_pruned_through(const struct store_sqlite *st)
{
	return st->pruned_through;
}

int store_sqlite_prune(struct store_sqlite *st, int64_t max_age_s, int64_t max_count, size_t max_rows)
{
	int64_t age_cut = INT64_MIN, id_cut = INT64_MIN, highest = 0;
	int deleted = 0, rc, ret;

	if (max_rows == 0 || (max_age_s <= 0 && max_count <= 0))
		return 0;
	if (max_rows > INT_MAX)
		max_rows = INT_MAX;
	rc = store_sqlite_step_done(st->begin);
	if (rc != SQLITE_OK) {
		ret = store_sqlite_fail_rc(st, "begin prune", rc);
		store_sqlite_tx_abort(st);
		return ret;
	}
	if (max_count > 0) {
		int64_t max_id = 0;
		ret = store_sqlite_max_id(st, &max_id);
		if (ret < 0) {
			store_sqlite_tx_abort(st);
			return ret;
		}
		id_cut = max_id - max_count;
	}
	if (max_age_s > 0)
		age_cut = clock_wall_s() - max_age_s;
	sqlite3_bind_int64(st->prune, 1, age_cut);
	sqlite3_bind_int64(st->prune, 2, id_cut);
	sqlite3_bind_int64(st->prune, 3, (sqlite3_int64)max_rows);
	while ((rc = sqlite3_step(st->prune)) == SQLITE_ROW) {
		int64_t id = sqlite3_column_int64(st->prune, 0);
		highest = MAX(highest, id);
		deleted++;
	}
	if (rc != SQLITE_DONE) {
		ret = store_sqlite_fail_rc(st, "prune", rc);
		sqlite3_reset(st->prune);
		store_sqlite_tx_abort(st);
		return ret;
	}
	sqlite3_reset(st->prune);
	/* Keys go with their events, and by age. */
	ret = keys_prune(st, clock_wall_s(), MAX(highest, st->pruned_through), max_rows);
	if (ret < 0) {
		store_sqlite_tx_abort(st);
		return ret;
	}
	if (deleted > 0 && highest > st->pruned_through) {
		sqlite3_bind_int64(st->set_pruned, 1, highest);
		rc = store_sqlite_step_done(st->set_pruned);
		if (rc != SQLITE_OK) {
			ret = store_sqlite_fail_rc(st, "record pruned_through", rc);
			store_sqlite_tx_abort(st);
			return ret;
		}
	}
	rc = store_sqlite_step_done(st->commit);
	if (rc != SQLITE_OK) {
		ret = store_sqlite_fail_rc(st, "commit prune", rc);
		store_sqlite_tx_abort(st);
		return ret;
	}
	if (highest > st->pruned_through)
		st->pruned_through = highest;
	return deleted;
}

/* ---- the backend table (store_backend.h) ----
 *
 * What store.c drives: the store, and the loop and metrics it is wired to
 * when watching starts. Appends are answered at once; herald's own writes
 * (appends, prunes) are followed by the checkpoint policy. */

struct sqlite_backend {
	struct store_sqlite *db;
	struct loop *lp;
	struct metrics *m;
};

static bool be_chosen(const struct config *cfg)
{
	(void)cfg;
	return true; /* the default */
}

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

static void *be_open(const struct config *cfg, struct loop *lp, struct metrics *m, char *err, size_t errlen)
{
	if (make_db_folder(cfg->db, err, errlen) < 0)
		return NULL;
	struct store_sqlite *db = store_sqlite_open(cfg->db, (int)cfg->busy_timeout_ms, err, errlen);
	if (!db)
		return NULL;
	store_sqlite_set_idempotency_window(db, cfg->idempotency_window_s);
	struct sqlite_backend *b = xcalloc(1, sizeof(*b));
	*b = (struct sqlite_backend){ db, lp, m };
	return b;
}

static void be_watch(void *be, const struct store_hooks *h)
{
	struct sqlite_backend *b = be;
	if (store_sqlite_watch(b->db, b->lp, b->m, h) < 0)
		log_warn("watching the database for other writers failed; only herald's own events are seen");
}

static void be_set_peers(void *be, const struct store_peers *p)
{
	store_sqlite_set_peers(((struct sqlite_backend *)be)->db, p);
}

static void be_close(void *be)
{
	struct sqlite_backend *b = be;
	store_sqlite_close(b->db);
	free(b);
}

static void be_append(void *be, const struct store_new_event *evs, size_t n, store_append_cb done, void *arg)
{
	struct sqlite_backend *b = be;
	struct store_appended *res = xmalloc((n ? n : 1) * sizeof(*res));
	int r = store_sqlite_append(b->db, evs, n, res);
	if (r == 0 && b->db->has_peers)
		b->db->peers.wake(b->db->peers.arg); /* their fan-out beside ours */
	done(arg, r, r == 0 ? res : NULL);           /* the answers and the fan-out first */
	free(res);
	if (r == 0) {
		store_sqlite_rest_after_own_append(b->db);
		store_sqlite_written(b->db);
	}
}

static int be_read_range(void *be, int64_t after, int64_t upto, size_t limit, store_row_cb cb, void *arg)
{
	return store_sqlite_read_range(((struct sqlite_backend *)be)->db, after, upto, limit, cb, arg);
}

static int be_read_matching(void *be, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
			    store_row_cb cb, void *arg, int64_t *through)
{
	return store_sqlite_read_matching(((struct sqlite_backend *)be)->db, after, upto, limit, f, cb, arg, through);
}

static int be_max_id(void *be, int64_t *max_id)
{
	return store_sqlite_max_id(((struct sqlite_backend *)be)->db, max_id);
}

static int64_t be_pruned_through(const void *be)
{
	return store_sqlite_pruned_through(((const struct sqlite_backend *)be)->db);
}

/* One file holds every commit: always in sync, always available (its
 * failures are per call). */
static uint64_t be_sync_begin(void *be)
{
	(void)be;
	return 0;
}

static bool be_sync_done(const void *be, uint64_t ticket)
{
	(void)be;
	(void)ticket;
	return true;
}

static bool be_available(const void *be)
{
	(void)be;
	return true;
}

static int be_prune_namespaces(void *be, const struct namespaces *t, const struct namespace *defaults,
			       size_t max_rows, bool *more)
{
	struct sqlite_backend *b = be;
	int n = store_sqlite_prune_namespaces(b->db, t, defaults, max_rows, more);
	if (n > 0)
		store_sqlite_written(b->db);
	return n;
}

static int64_t be_pruned_namespace(const void *be, int i)
{
	return store_sqlite_pruned_namespace(((const struct sqlite_backend *)be)->db, i);
}

static int be_prune(void *be, int64_t max_age_s, int64_t max_count, size_t max_rows)
{
	struct sqlite_backend *b = be;
	int n = store_sqlite_prune(b->db, max_age_s, max_count, max_rows);
	if (n > 0)
		store_sqlite_written(b->db);
	return n;
}

/* The row found, handed on (store_row_cb). */
struct found_row {
	store_found_cb found;
	void *arg;
};

static int hand_on(void *arg, const struct store_event *ev)
{
	struct found_row *f = arg;
	f->found(f->arg, 1, ev);
	f->found = NULL;
	return 1;
}

static void be_mercure_find(void *be, const char *mercure_id, store_found_cb found, void *arg)
{
	struct sqlite_backend *b = be;
	int64_t id = 0;
	int rc = store_sqlite_mercure_find(b->db, mercure_id, &id);
	if (rc != 1) {
		found(arg, rc, NULL);
		return;
	}
	struct found_row f = { found, arg };
	rc = store_sqlite_read_range(b->db, id - 1, id, 1, hand_on, &f);
	if (f.found) /* the row went between the two reads: retention */
		f.found(arg, rc < 0 ? rc : 0, NULL);
}

static void be_lease(void *be, const char *name, int64_t owner, uint64_t ttl_ms, int64_t cursor,
		     store_lease_cb done, void *arg)
{
	struct sqlite_backend *b = be;
	bool held;
	int64_t stored;
	int rc = store_sqlite_lease(b->db, name, owner, ttl_ms, cursor, &held, &stored);
	done(arg, rc, held, stored);
}

const struct store_backend store_sqlite_backend = {
	.kind = "sqlite",
	.chosen = be_chosen,
	.open = be_open,
	.watch = be_watch,
	.set_peers = be_set_peers,
	.close = be_close,
	.append = be_append,
	.read_range = be_read_range,
	.read_matching = be_read_matching,
	.max_id = be_max_id,
	.pruned_through = be_pruned_through,
	.sync_begin = be_sync_begin,
	.sync_done = be_sync_done,
	.prune = be_prune,
	.prune_namespaces = be_prune_namespaces,
	.pruned_namespace = be_pruned_namespace,
	.available = be_available,
	.mercure_find = be_mercure_find,
	.lease = be_lease,
};
