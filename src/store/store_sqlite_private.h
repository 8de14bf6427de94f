/* SPDX-License-Identifier: BSD-2-Clause */
/* store_sqlite_private.h: what the SQLite backend's files share and no
 * other file sees: struct store_sqlite itself (opaque elsewhere,
 * store_sqlite.h) and the functions one file of the backend gives another.
 *   store_sqlite.c         open and close, errors and transactions, the log
 *                          (append, reads, budgets, prune), the backend table
 *   store_sqlite_schema.c  the schema and its migrations
 *   store_sqlite_retention.c  retention kept per namespace
 *   store_sqlite_watch.c   the folder watch, peers' wake-ups, checkpoints
 *   store_sqlite_lease.c   store_lease's rows in herald_meta */
#ifndef HERALD_STORE_SQLITE_PRIVATE_H
#define HERALD_STORE_SQLITE_PRIVATE_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/inotify.h>
#include <sys/types.h>

#include "common/loop.h"
#include "core/metrics.h"
#include "store/store.h"
#include "store/store_sqlite.h"

/* Filtered reads' statements kept prepared (by their text). */
#define STORE_FILTER_CACHE 32

/* The schema version this build writes; a newer database is refused. */
#define STORE_SCHEMA_VERSION 6

/* What the folder watch asks for: a commit by any process appends to the
 * -wal file there (IN_MODIFY); the other events catch the file being
 * created or replaced. */
#define FOLDER_WRITES (IN_MODIFY | IN_CLOSE_WRITE)
#define FOLDER_NAMES (IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM)

struct store_sqlite {
	sqlite3 *db;
	char *path;
	int watch_fd;
	int64_t pruned_through;
	int64_t data_version;
	int wal_pages;          /* frames in the WAL after our last commit */
	uint64_t last_write_ms; /* monotonic time of our last commit */
	dev_t dev;              /* the database file opened, to notice it replaced */
	ino_t ino;
	bool check_file;      /* a folder event named the database file */
	int64_t late_inserts; /* rows seen inserted below the newest id */

	sqlite3_stmt *begin;
	sqlite3_stmt *commit;
	sqlite3_stmt *rollback;
	sqlite3_stmt *insert;
	sqlite3_stmt *range;
	sqlite3_stmt *range_public;
	struct filter_cache {
		char *sql;
		sqlite3_stmt *stmt;
	} filters[STORE_FILTER_CACHE]; /* the filtered reads' statements, by their text */
	size_t next_filter;
	sqlite3_stmt *late;
	sqlite3_stmt *max_id;
	/* The work a filtered read may do (store_sqlite_set_read_budget),
	 * counted by the progress handler while one runs. */
	struct read_budget {
		uint64_t us;         /* time, from the read's start */
		uint64_t min_ops;    /* never interrupted before this many VM steps */
		uint64_t max_ops;    /* nor allowed more (0: no count limit) */
		bool on;             /* a budgeted read is running */
		uint64_t ops;        /* VM steps so far */
		uint64_t deadline;   /* clock_mono_us() */
		int64_t seen;        /* a scan's last row examined (herald_seen) */
		uint64_t interrupts; /* reads cut short, for tests and logs */
	} budget;
	sqlite3_stmt *prune;
	sqlite3_stmt *set_pruned;
	sqlite3_stmt *idem_get;        /* a publisher's key, if still valid */
	sqlite3_stmt *idem_put;        /* remember a key with its event */
	sqlite3_stmt *idem_prune_age;  /* forget keys past the window */
	sqlite3_stmt *idem_prune_gone; /* forget the keys of pruned events */
	int64_t idem_window_s;         /* how long a key is remembered */
	sqlite3_stmt *data_ver;
	sqlite3_stmt *mercure_put;  /* a Mercure update's id and block */
	sqlite3_stmt *mercure_find; /* the event of a Mercure id */
	struct store_retention *retention; /* retention by namespace, once asked for */

	/* Wired to the loop by store_sqlite_watch (else lp is NULL). */
	struct loop *lp;
	struct metrics *m;
	struct store_hooks hooks;
	struct loop_timer watch_timer;   /* only without inotify: slow poll */
	struct loop_timer confirm_timer; /* re-check data_version after a wake-up */
	struct loop_timer upkeep_timer;  /* the checkpoint after our writes */
	size_t confirm_step;
	/* Other workers of a group, which wake us after their commits. */
	struct store_peers peers;
	bool has_peers;
	struct loop_timer folder_rest_timer; /* the folder watch paused */
	struct loop_timer peer_rest_timer;   /* the peers' wake-up paused */
};

/* ---- store_sqlite.c ---- */

/* A lock held by another connection (SQLITE_BUSY or SQLITE_LOCKED). */
bool store_sqlite_is_busy(int rc);
/* Step a statement that returns no row, and reset it: SQLITE_OK, or the
 * failure's code. */
int store_sqlite_step_done(sqlite3_stmt *s);
/* Roll back the transaction open on st, if one is (logged if that fails). */
void store_sqlite_tx_abort(struct store_sqlite *st);
/* Map a failed result to store.h's contract: -EBUSY, -EROFS, -ENOSPC, or
 * -EIO (logged). Call before anything else runs on the connection. */
int store_sqlite_fail_rc(struct store_sqlite *st, const char *op, int rc);

/* ---- store_sqlite_schema.c ---- */

/* Run sql; -1 with "what: SQLite's message" in err on failure, else 0. */
int store_sqlite_exec(sqlite3 *db, const char *sql, char *err, size_t errlen, const char *what);
/* Run a one-row, one-integer query; *out keeps its value when no row comes.
 * Returns the SQLite result code (SQLITE_OK on success). */
int store_sqlite_query_int(sqlite3 *db, const char *sql, int64_t *out);
/* Read PRAGMA user_version into *version; refuse a schema newer than this
 * build knows. Returns 0, or -1 with a reason in err. */
int store_sqlite_schema_version(sqlite3 *db, const char *path, int64_t *version, char *err, size_t errlen);
/* Bring the schema up to STORE_SCHEMA_VERSION in one transaction. Returns 0
 * or -1 with err set. */
int store_sqlite_migrate(sqlite3 *db, const char *path, char *err, size_t errlen);

/* ---- store_sqlite_retention.c ---- */

/* Release the namespaces' retention state (before the close). */
void store_sqlite_retention_free(struct store_sqlite *st);

/* ---- store_sqlite_watch.c ---- */

/* An inotify descriptor watching path's folder for mask, or -1 (logged:
 * the caller then polls). The caller owns the descriptor. */
int store_sqlite_watch_folder(const char *path, uint32_t mask);
/* Wire st to the loop (the watch or a slow poll, the peers' wake-ups):
 * h->changed once another writer's commit is visible, h->fatal when the
 * database file was deleted or replaced; checkpoint durations to m.
 * Returns 0 or -1. */
int store_sqlite_watch(struct store_sqlite *st, struct loop *lp, struct metrics *m, const struct store_hooks *h);
/* Undo store_sqlite_watch (timers, the watches); before the close. */
void store_sqlite_unwatch(struct store_sqlite *st);
/* The other workers of a group, which wake st after their commits. */
void store_sqlite_set_peers(struct store_sqlite *st, const struct store_peers *p);
/* After an append of herald's own: rest the watch of the -wal file. */
void store_sqlite_rest_after_own_append(struct store_sqlite *st);
/* After herald's own writes: run the checkpoint policy now and from a
 * timer until it has nothing left to do. */
void store_sqlite_written(struct store_sqlite *st);

#endif
