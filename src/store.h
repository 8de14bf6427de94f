/* store.h: the event log behind a small interface: append a batch, read a
 * range by id, learn of rows committed by other processes, prune by age and
 * count. SQLite (WAL mode) is the embedded backend; nothing outside store.c
 * includes sqlite3.h for the log, so another backend can sit behind this seam.
 *
 * Every call is bounded in time: the busy timeout is a few milliseconds, and
 * a call that would wait longer returns -EBUSY so the caller retries from a
 * timer instead of stalling the event loop.
 *
 * What a negative return means, for every call below that has one:
 *   -EBUSY   another connection holds the lock; nothing was done; retry soon.
 *   -EROFS   the database files cannot be written (a read-only file system,
 *            an immutable file, lost write permission); reads still work.
 *   -ENOSPC  no room to write (disk or quota full, or the file size limit).
 *   -EIO     anything else (logged here with SQLite's message).
 * -EROFS and -ENOSPC are not logged here: they last until someone fixes the
 * machine, so the caller reports each episode once. All of them leave the
 * log as it was (a failed write transaction is rolled back whole), and the
 * store retries normally on the next call once the cause is gone. */
#ifndef HERALD_STORE_H
#define HERALD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* One stored row, as read. Strings are NUL-terminated; every pointer is valid
 * only during the callback that receives it. */
struct store_event {
	int64_t id;
	const char *type;
	size_t type_len;
	const char *topic;
	size_t topic_len;
	const char *data;
	size_t data_len;
	bool public;
	int64_t created_at; /* Unix seconds */
};

/* One row to append. The store copies what it needs before returning. */
struct store_new_event {
	const char *type;
	const char *topic;
	const char *data;
	size_t data_len;
	bool public;
};

/* Called for each row in id order; return 0 to go on, non-zero to stop early. */
typedef int (*store_row_cb)(void *arg, const struct store_event *ev);

/* Open (creating if needed) the database at path: WAL mode, the schema
 * created or migrated to the current version, an inotify watch on the
 * database's folder. Returns NULL and writes a one-line reason into err on
 * failure. The caller owns the store and frees it with store_close. */
struct store *store_open(const char *path, int busy_timeout_ms, char *err, size_t errlen);

/* Finish statements, close the database cleanly (WAL checkpointed), free. */
void store_close(struct store *st);

/* Insert n rows in one transaction; ids_out[i] receives row i's id.
 * Returns 0, or -EBUSY, -EROFS, -ENOSPC or -EIO with nothing written. */
int store_append_batch(struct store *st, const struct store_new_event *evs, size_t n, int64_t *ids_out);

/* Call cb for each row with after < id <= upto, in id order, at most limit
 * rows. Returns the number of rows passed to cb, -EBUSY, or -EIO. */
int store_read_range(struct store *st, int64_t after, int64_t upto, size_t limit, store_row_cb cb, void *arg);

#define STORE_MAX_TOPICS 16
#define STORE_MAX_GRANTS 16

/* Which rows a reader may and wants to see. Topics and grants are topic
 * patterns (topic.h): an exact topic, a subtree ("prefix/" then "*") or
 * "*". */
struct store_filter {
	bool see_private;    /* every row not marked public too */
	size_t ntopics;      /* 0: every topic */
	char *const *topics; /* the topics wanted, at most STORE_MAX_TOPICS */
	size_t ngrants;      /* private rows whose topic matches one of these count too */
	char *const *grants; /* at most STORE_MAX_GRANTS */
};

/* Like store_read_range, but only rows that pass f (wanted by topic, and
 * public, or private with every private row or a granted topic), found
 * through indexes (by topic, by visibility), so a filter that matches
 * little costs little however long the log. Returns rows passed to cb,
 * -EBUSY, -EIO or -EINVAL (too many topics or grants). */
int store_read_matching(struct store *st, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
			store_row_cb cb, void *arg);

/* The highest id ever assigned (0 for an empty log), from sqlite_sequence so
 * it survives pruning. Returns 0 or -EBUSY / -EIO. */
int store_max_id(struct store *st, int64_t *max_id);

/* The highest id removed by retention (0 if none): a resume point below it
 * has lost events and gets a reset. */
int64_t store_pruned_through(const struct store *st);

/* The inotify descriptor to watch for readability, or -1 when inotify is
 * unavailable (the caller then polls store_changed from a slow timer). */
int store_watch_fd(const struct store *st);

/* Drain the inotify descriptor (if any) and report whether another database
 * connection has committed since the previous call (PRAGMA data_version).
 * This connection's own commits do not count. Logs a warning when another
 * writer has inserted rows with an id below the newest one. */
bool store_changed(struct store *st);

/* Whether the database file is still the one opened: after a folder event
 * named it (or on every call without inotify), compare the path's device
 * and inode. Returns 0, -ENOENT (deleted) or -ESTALE (replaced by another
 * file); the caller should then stop, since writes go to an unlinked file. */
int store_check_file(struct store *st);

/* Delete at most max_rows of the oldest rows that are older than max_age_s
 * seconds (0 = no age limit) or beyond the newest max_count rows (0 = no count
 * limit), in one short transaction. Returns rows deleted (0 when nothing is
 * due), -EBUSY or -EIO. */
int store_prune(struct store *st, int64_t max_age_s, int64_t max_count, size_t max_rows);

/* Pages in the write-ahead log after this connection's last commit (other
 * writers' commits are not counted). */
int store_wal_pages(const struct store *st);

/* WAL size at which a busy writer checkpoints without waiting for a pause
 * (SQLite's own automatic checkpoint size). */
#define STORE_WAL_FORCE_PAGES 1000
/* How long our writes must pause before the WAL is copied back. */
#define STORE_CHECKPOINT_QUIET_MS 100
/* How soon a caller that met -EBUSY tries again. */
#define STORE_BUSY_RETRY_MS 5

/* Copy what the WAL holds into the database, without waiting for readers or
 * writers (a passive checkpoint, with its file syncs). Returns pages
 * copied, -EBUSY, or another negative errno as the other calls do. */
int store_checkpoint(struct store *st);

/* The checkpoint policy, run after herald's own writes: automatic
 * checkpoints are off for herald's connection (they would sync the files
 * inside a publish), so the WAL is copied back once our writes have paused
 * for STORE_CHECKPOINT_QUIET_MS, or at once when it has grown past
 * STORE_WAL_FORCE_PAGES during a long busy stretch. Returns the ms after
 * which to call again, or -1 when nothing is left to do; *ns gets the
 * checkpoint's duration when one ran (else 0). */
int64_t store_upkeep(struct store *st, uint64_t *ns);

#endif
