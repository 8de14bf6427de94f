/* SPDX-License-Identifier: BSD-2-Clause */
/* store.h: the event log, as the hub, the streams and the publisher see it:
 * append a batch, read a range of ids (all rows, or those a reader may and
 * wants to see), the newest and the pruned-through id, be told of change,
 * prune. Two backends sit behind it, chosen by the configuration: SQLite
 * (store_sqlite.c, the embedded default) and Redis Streams (store_redis.c,
 * redis_url). Nothing above this file knows which one runs.
 *
 * Every call returns at once; none waits on a disk lock or the network.
 * Appends answer through a callback (at once with SQLite, when Redis replies
 * with Redis). A read the backend cannot answer from what it has returns
 * -EAGAIN and fetches; the changed hook fires when a retry can succeed.
 *
 * What a negative return (or an append's rc) means:
 *   -EAGAIN    a read is being fetched; retry after the changed hook.
 *   -EBUSY     another writer holds the lock; nothing was done; retry soon.
 *   -EROFS     the log cannot be written (read-only files); reads still work.
 *   -ENOSPC    no room to write (disk or quota full, or the file size limit).
 *   -ENOTCONN  the log's server is unreachable (Redis); nothing was done,
 *              unless the connection was lost with the append in flight, in
 *              which case it may have been stored.
 *   -EIO       anything else (logged by the backend).
 * Failures that last (-EROFS, -ENOSPC, -ENOTCONN) are reported once per
 * episode by the caller, not per call. */
#ifndef HERALD_STORE_H
#define HERALD_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct loop;
struct metrics;
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
	/* A row published through the Mercure endpoint: its update's id,
	 * retry and topics (mercure.h's block), else NULL. */
	const char *mercure;
	size_t mercure_len;
};

/* One row to append. The store copies what it needs before returning.
 * With idem_key set the append is keyed: if the same publisher's same key
 * was stored within the idempotency window (cfg->idempotency_window_s) and
 * its event is still in the log, nothing is stored and the answer is that
 * event's id (STORE_REPLAYED), or STORE_KEY_CONFLICT when idem_hash
 * differs; otherwise the row is stored and the key remembered with it.
 * Keys live with the log (both backends), so they hold across restarts and
 * nodes; two rows of one batch with the same key make one event. */
struct store_new_event {
	const char *type;
	const char *topic;
	const char *data;
	size_t data_len;
	bool public;
	const char *idem_publisher; /* the key's scope (idempotency.h); with idem_key */
	const char *idem_key;       /* NULL: not keyed */
	const char *idem_hash;      /* the body's fingerprint, hex */
	/* A Mercure update: its id (store_mercure_find finds the earliest
	 * row of an id used again) and the block read back as
	 * store_event.mercure. NULL: a row of herald's own. */
	const char *mercure_id;
	const char *mercure;
	size_t mercure_len;
};

/* What became of one row of an append. */
enum store_outcome {
	STORE_STORED,       /* stored now as id */
	STORE_REPLAYED,     /* its key was stored before as id, with the same hash */
	STORE_KEY_CONFLICT, /* its key was stored before as id, with another hash */
};

struct store_appended {
	int64_t id;
	enum store_outcome outcome;
	/* A Mercure row stored whose update id an earlier event still in the
	 * log carries: that event (the id keeps naming it: the earliest
	 * wins), else 0. */
	int64_t earlier;
};

/* Called for each row in id order; return 0 to go on, non-zero to stop early. */
typedef int (*store_row_cb)(void *arg, const struct store_event *ev);

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

/* What the store tells its user (the hub), registered once. */
struct store_hooks {
	/* Rows may have been added (by herald or another program), or a read
	 * that returned -EAGAIN may now succeed. */
	void (*changed)(void *arg);
	/* The log cannot be used any more (the database file was deleted or
	 * replaced under herald): the process should stop. */
	void (*fatal)(void *arg);
	void *arg;
};

/* An append's answer: rc 0 and res[i] what became of row i, or a negative
 * code above with nothing stored (res NULL). Called exactly once, possibly
 * before store_append returns. */
typedef void (*store_append_cb)(void *arg, int rc, const struct store_appended *res);

/* How soon a caller that met -EBUSY tries again. */
#define STORE_BUSY_RETRY_MS 5

/* Open the backend the configuration names (cfg->redis_url, else the SQLite
 * file cfg->db): for SQLite the file (and any missing folder above it) is
 * created or migrated; for Redis the server must answer now (its function
 * is loaded, the newest id read), and later losses of the connection are
 * ridden out. Returns NULL with a
 * one-line reason in err. The caller owns the store (store_close). */
struct store *store_open(const struct config *cfg, struct loop *lp, struct metrics *m, char *err, size_t errlen);

/* Start telling h about change (watches, tails). */
void store_watch(struct store *st, const struct store_hooks *h);

/* Other processes appending to the same log that can wake this one and be
 * woken by it (the workers of a group): after each append of its own the
 * store calls wake(arg); fd is readable when a peer appended, and the store
 * calls taken(arg) before it looks for the rows. One of them (watch_writes)
 * also watches for other programs' writes and wakes the rest when it sees
 * one; the others leave that to it. A backend whose watch sees every commit
 * at once (Redis' tail) ignores it. The callbacks and fd outlive the store. */
struct store_peers {
	int fd;
	bool watch_writes;
	void (*wake)(void *arg);
	void (*taken)(void *arg);
	void *arg;
};

/* Before store_watch. */
void store_set_peers(struct store *st, const struct store_peers *p);

/* Stop watching, close the backend cleanly, free. Appends in flight are
 * answered -ENOTCONN first. */
void store_close(struct store *st);

/* Append n rows as one batch (one transaction, one Redis call): the rows
 * stored get consecutive ids, all or nothing. done runs once. After a
 * successful append the caller reads what is new (the hub's poll), and a
 * backend counts on it: SQLite's watch for other writers rests a moment. */
void store_append(struct store *st, const struct store_new_event *evs, size_t n, store_append_cb done, void *arg);

/* Call cb for each row with after < id <= upto, in id order, at most limit
 * rows. Returns the number of rows passed to cb, -EAGAIN, -EBUSY or -EIO. */
int store_read_range(struct store *st, int64_t after, int64_t upto, size_t limit, store_row_cb cb, void *arg);

/* Like store_read_range, but only rows that pass f (wanted by topic, and
 * public, or private with every private row or a granted topic). *through
 * gets the id up to which the range was examined: every matching row up to
 * it was passed to cb (the last one passed, when cb stopped early). A filter
 * that matches little costs little with SQLite (indexes); Redis filters the
 * rows it reads. Returns rows passed to cb, -EAGAIN, -EBUSY, -EIO or -EINVAL
 * (too many topics or grants). */
int store_read_matching(struct store *st, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
			store_row_cb cb, void *arg, int64_t *through);

/* The event a Mercure update id names, the earliest still in the log
 * that carries it: found(arg, 1, ev) with its row, (arg, 0, NULL) when no
 * row has it, or a negative code with NULL (-EBUSY, -EIO, -ENOTCONN;
 * -ENOTSUP when the backend keeps no Mercure ids). Called exactly once:
 * before this returns with SQLite, when the answer comes with Redis (or
 * -ENOTCONN at an outage or store_close). ev lives during the call. */
typedef void (*store_found_cb)(void *arg, int rc, const struct store_event *ev);
void store_mercure_find(struct store *st, const char *mercure_id, store_found_cb found, void *arg);

/* Whether the backend keeps Mercure updates' ids and topics. */
bool store_keeps_mercure(const struct store *st);

/* The highest id assigned that this node knows of (0 for an empty log). */
int store_max_id(struct store *st, int64_t *max_id);

/* The highest id removed by retention, as far as known (0 if none): a
 * resume point below it has lost events and gets a reset. */
int64_t store_pruned_through(const struct store *st);

/* A resume point beyond the newest id this node has seen may still be
 * real (another node's append not yet read here). store_sync_begin asks the
 * backend to catch up with everything committed before now; once
 * store_sync_done(ticket) is true (the changed hook fires when it becomes
 * so), store_max_id covers all of it. Immediate with SQLite. */
uint64_t store_sync_begin(struct store *st);
bool store_sync_done(const struct store *st, uint64_t ticket);

/* Start removing the oldest rows older than max_age_s seconds (0 = no age
 * limit) or beyond the newest max_count rows (0 = no count limit), at most
 * max_rows per call. Returns rows removed now (0 when nothing is due or the
 * backend trims on its own time), -EBUSY or -EIO. */
int store_prune(struct store *st, int64_t max_age_s, int64_t max_count, size_t max_rows);

/* Retention kept per namespace (namespace.h): t's sections each by their
 * own retention_count and retention_age over their own rows, the rest of
 * the log by defaults'; pruning one never removes another's rows. Up to
 * max_rows rows visited per namespace a call; *more when some were left.
 * Returns rows removed, -EBUSY, -EIO or -ENOTSUP (a backend without it). */
struct namespaces;
struct namespace;
int store_prune_namespaces(struct store *st, const struct namespaces *t, const struct namespace *defaults,
			   size_t max_rows, bool *more);

/* The highest id of namespace i (-1: the defaults) that retention
 * removed, as far as known: a reader of that namespace resuming below it
 * gets a reset. Without retention by namespace: store_pruned_through. */
int64_t store_pruned_namespace(const struct store *st, int i);

/* Whether the log can be written and read now (false while Redis is
 * unreachable; always true with SQLite, whose failures are per call). */
bool store_available(const struct store *st);

/* The backend and where it is, for logs and /api/health ("sqlite",
 * "redis"). */
const char *store_kind(const struct store *st);

#endif
