/* SPDX-License-Identifier: BSD-2-Clause */
/* store_sqlite.h: the SQLite backend of store.h (WAL mode), used through
 * store.c and directly by its unit tests. Calls are bounded in time: the
 * busy timeout is a few milliseconds, and a call that would wait longer
 * returns -EBUSY so the caller retries from a timer instead of stalling the
 * event loop. Error codes are store.h's; -EROFS and -ENOSPC are not logged
 * here (the caller reports each episode once). A failed write transaction is
 * rolled back whole, and the store retries normally on the next call once
 * the cause is gone. */
#ifndef HERALD_STORE_SQLITE_H
#define HERALD_STORE_SQLITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct loop;
struct metrics;
struct store_backend;
struct store_sqlite;

/* The backend store.c drives (store_backend.h): the file cfg->db, whose
 * missing folders it creates; appends answered at once. */
extern const struct store_backend store_sqlite_backend;

/* Open (creating if needed) the database at path: WAL mode, the schema
 * created or migrated to the current version, an inotify watch on the
 * database's folder. Returns NULL and writes a one-line reason into err on
 * failure. The caller owns the store and frees it with store_sqlite_close. */
struct store_sqlite *store_sqlite_open(const char *path, int busy_timeout_ms, char *err, size_t errlen);

/* Finish statements, close the database cleanly (WAL checkpointed), free. */
void store_sqlite_close(struct store_sqlite *st);

/* Append n rows in one transaction as store.h's store_append says (keyed
 * rows looked up in herald_idempotency first, and remembered there); out[i]
 * receives what became of row i. A keyed batch also forgets a few keys past
 * the window. Returns 0, or -EBUSY, -EROFS, -ENOSPC or -EIO with nothing
 * written. */
int store_sqlite_append(struct store_sqlite *st, const struct store_new_event *evs, size_t n,
			struct store_appended *out);

/* store_mercure_find (store.h) on this file. */
int store_sqlite_mercure_find(struct store_sqlite *st, const char *mercure_id, int64_t *id);

/* store_lease (store.h) on this file (store_sqlite_lease.c): 0 with
 * *held and *stored, or a negative code. */
int store_sqlite_lease(struct store_sqlite *st, const char *name, int64_t owner, uint64_t ttl_ms, int64_t cursor,
		       bool *held, int64_t *stored);

/* store_sqlite_append with only the ids (ids_out may be NULL). */
int store_sqlite_append_batch(struct store_sqlite *st, const struct store_new_event *evs, size_t n, int64_t *ids_out);

/* How long a key is remembered (seconds; 24 h until set). */
void store_sqlite_set_idempotency_window(struct store_sqlite *st, int64_t window_s);

/* Call cb for each row with after < id <= upto, in id order, at most limit
 * rows. Returns the number of rows passed to cb, -EBUSY, or -EIO. */
int store_sqlite_read_range(struct store_sqlite *st, int64_t after, int64_t upto, size_t limit, store_row_cb cb,
			    void *arg);

/* Like store_sqlite_read_range, but only rows that pass f (wanted by
 * topic, and public, or private with every private row or a granted
 * topic), found through indexes (by topic, public rows by topic, by
 * visibility), so a filter that matches little costs little however long
 * the log. The read stops when its budget (store_sqlite_set_read_budget)
 * runs out, having made progress: *through gets the id up to which the
 * range was examined (every matching row up to it was passed to cb).
 * Returns rows passed to cb, -EBUSY, -EIO or -EINVAL (too many topics or
 * grants). */
int store_sqlite_read_matching(struct store_sqlite *st, int64_t after, int64_t upto, size_t limit,
			       const struct store_filter *f, store_row_cb cb, void *arg, int64_t *through);

/* How much work one filtered read may do: about us microseconds, but at
 * least min_ops of SQLite's VM steps (so each read gets somewhere) and, when
 * max_ops is not 0, at most that many. */
#define STORE_READ_BUDGET_US 500
#define STORE_READ_MIN_OPS 2000
void store_sqlite_set_read_budget(struct store_sqlite *st, uint64_t us, uint64_t min_ops, uint64_t max_ops);

/* Filtered reads cut short by their budget so far. */
uint64_t store_sqlite_read_interrupts(const struct store_sqlite *st);

/* The highest id ever assigned (0 for an empty log), from sqlite_sequence so
 * it survives pruning. Returns 0 or -EBUSY / -EIO. */
int store_sqlite_max_id(struct store_sqlite *st, int64_t *max_id);

/* The highest id removed by retention (0 if none): a resume point below it
 * has lost events and gets a reset. */
int64_t store_sqlite_pruned_through(const struct store_sqlite *st);

/* The inotify descriptor to watch for readability, or -1 when inotify is
 * unavailable (the caller then polls store_sqlite_changed from a slow timer). */
int store_sqlite_watch_fd(const struct store_sqlite *st);

/* Drain the inotify descriptor (if any) and report whether another database
 * connection has committed since the previous call (PRAGMA data_version).
 * This connection's own commits do not count. Logs a warning when another
 * writer has inserted rows with an id below the newest one. */
bool store_sqlite_changed(struct store_sqlite *st);

/* Whether the database file is still the one opened: after a folder event
 * named it (or on every call without inotify), compare the path's device
 * and inode. Returns 0, -ENOENT (deleted) or -ESTALE (replaced by another
 * file); the caller should then stop, since writes go to an unlinked file. */
int store_sqlite_check_file(struct store_sqlite *st);

/* Delete at most max_rows of the oldest rows that are older than max_age_s
 * seconds (0 = no age limit) or beyond the newest max_count rows (0 = no count
 * limit), with at most max_rows idempotency keys (past the window, or of a
 * pruned event), in one short transaction. Returns rows deleted (0 when nothing is
 * due), -EBUSY or -EIO. */
int store_sqlite_prune(struct store_sqlite *st, int64_t max_age_s, int64_t max_count, size_t max_rows);

/* Retention by namespace (store_sqlite_retention.c): one short
 * transaction counting up to max_rows new rows by namespace and deleting
 * each namespace's oldest rows beyond its own retention_count or older than
 * its retention_age (t's sections; defaults for the rest), visiting at
 * most max_rows rows per namespace. *more when rows were left to visit.
 * Returns rows deleted, -EBUSY or -EIO. */
struct namespaces;
struct namespace;
int store_sqlite_prune_namespaces(struct store_sqlite *st, const struct namespaces *t, const struct namespace *defaults,
				  size_t max_rows, bool *more);

/* The highest id of namespace i (-1: the defaults) retention removed, as
 * far as known (before the first prune by namespace: the log's). */
int64_t store_sqlite_pruned_namespace(const struct store_sqlite *st, int i);

/* Pages in the write-ahead log after this connection's last commit (other
 * writers' commits are not counted). */
int store_sqlite_wal_pages(const struct store_sqlite *st);

/* WAL size at which a busy writer checkpoints without waiting for a pause
 * (SQLite's own automatic checkpoint size). */
#define STORE_WAL_FORCE_PAGES 1000
/* How long our writes must pause before the WAL is copied back. */
#define STORE_CHECKPOINT_QUIET_MS 100
/* Copy what the WAL holds into the database, without waiting for readers or
 * writers (a passive checkpoint, with its file syncs). Returns pages
 * copied, -EBUSY, or another negative errno as the other calls do. */
int store_sqlite_checkpoint(struct store_sqlite *st);

/* The checkpoint policy, run after herald's own writes: automatic
 * checkpoints are off for herald's connection (they would sync the files
 * inside a publish), so the WAL is copied back once our writes have paused
 * for STORE_CHECKPOINT_QUIET_MS, or at once when it has grown past
 * STORE_WAL_FORCE_PAGES during a long busy stretch. Returns the ms after
 * which to call again, or -1 when nothing is left to do; *ns gets the
 * checkpoint's duration when one ran (else 0). */
int64_t store_sqlite_upkeep(struct store_sqlite *st, uint64_t *ns);

#endif
