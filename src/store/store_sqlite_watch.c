/* SPDX-License-Identifier: BSD-2-Clause */
/* store_sqlite_watch.c: how the SQLite backend learns of other writers'
 * commits and keeps its WAL small. The folder's inotify watch (or a slow
 * poll without inotify) and the other workers' wake-ups, with their rests,
 * call the store's hooks once a commit is visible or the database file was
 * deleted or replaced; the checkpoint policy runs after herald's own
 * writes. The state is struct store_sqlite's (store_sqlite_private.h); the
 * timers and watches started here are stopped by store_sqlite_unwatch. */
#include "store/store_sqlite_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* ---- the folder watch ---- */

/* The folder that holds path (a copy the caller frees). */
static char *folder_of(const char *path)
{
	char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	if (!slash) {
		free(dir);
		return xstrdup(".");
	}
	if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	return dir;
}

/* Watch the database's folder for mask. Returns the descriptor or -1 (the
 * caller then polls). */
int store_sqlite_watch_folder(const char *path, uint32_t mask)
{
	char *folder = folder_of(path);
	int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (fd < 0) {
		log_warn("store: inotify unavailable (%s); falling back to polling for other writers", strerror(errno));
	} else if (inotify_add_watch(fd, folder, mask) < 0) {
		log_warn("store: cannot watch %s with inotify (%s); falling back to polling for other writers", folder,
			 strerror(errno));
		close(fd);
		fd = -1;
	}
	free(folder);
	return fd;
}

int store_sqlite_watch_fd(const struct store_sqlite *st)
{
	return st->watch_fd;
}

/* Another writer inserted rows with an explicit id below the newest one
 * (the trigger of schema version 2 counts them): readers that are live have
 * passed those ids and never get them. Say so, once per new count. */
static void note_late_inserts(struct store_sqlite *st)
{
	int64_t n = st->late_inserts;
	if (sqlite3_step(st->late) == SQLITE_ROW)
		n = sqlite3_column_int64(st->late, 0);
	sqlite3_reset(st->late);
	if (n > st->late_inserts) {
		log_warn("store: %lld row(s) were inserted into %s with an id below the newest one; readers already "
			 "past that id do not get them (leave id out of INSERT: the store assigns ids)",
			 (long long)(n - st->late_inserts), st->path);
		st->late_inserts = n;
	}
}

bool store_sqlite_changed(struct store_sqlite *st)
{
	/* Drain first, then look: a commit landing in between is both seen
	 * now and leaves a fresh inotify event, which costs one spurious
	 * check later instead of a missed row. */
	if (st->watch_fd >= 0) {
		char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
		const char *slash = strrchr(st->path, '/');
		const char *base = slash ? slash + 1 : st->path;
		for (;;) {
			ssize_t r = read(st->watch_fd, buf, sizeof(buf));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			/* The database file itself deleted, renamed or created
			 * anew: store_sqlite_check_file looks at it. */
			for (char *p = buf; p < buf + r;) {
				const struct inotify_event *e = (const void *)p;
				if ((e->mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE)) && e->len &&
				    strcmp(e->name, base) == 0)
					st->check_file = true;
				p += sizeof(*e) + e->len;
			}
		}
	}
	int rc = sqlite3_step(st->data_ver);
	if (rc != SQLITE_ROW) {
		/* Unknown: say yes, since the caller rereads past its high-water
		 * mark (harmless), while a wrong no could strand a row until the
		 * next commit. */
		if (!store_sqlite_is_busy(rc))
			log_err("store: reading data_version of %s: %s", st->path, sqlite3_errmsg(st->db));
		sqlite3_reset(st->data_ver);
		return true;
	}
	int64_t v = sqlite3_column_int64(st->data_ver, 0);
	sqlite3_reset(st->data_ver);
	if (v == st->data_version)
		return false;
	st->data_version = v;
	note_late_inserts(st);
	return true;
}

int store_sqlite_check_file(struct store_sqlite *st)
{
	if (st->watch_fd >= 0 && !st->check_file)
		return 0;
	st->check_file = false;
	struct stat sb;
	if (stat(st->path, &sb) < 0)
		return errno == ENOENT ? -ENOENT : 0; /* another error says nothing about the file */
	return sb.st_dev == st->dev && sb.st_ino == st->ino ? 0 : -ESTALE;
}

/* ---- checkpoints ---- */

int store_sqlite_wal_pages(const struct store_sqlite *st)
{
	return st->wal_pages;
}

int store_sqlite_checkpoint(struct store_sqlite *st)
{
	int log = 0, done = 0;
	int rc = sqlite3_wal_checkpoint_v2(st->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
	if (rc != SQLITE_OK)
		return store_sqlite_fail_rc(st, "checkpoint", rc);
	/* Frames readers still need stay; the WAL restarts from the top once
	 * every frame is in the database. */
	st->wal_pages = log > done ? log - done : 0;
	return done;
}

/* A checkpoint that copied every frame lets the next write start the WAL
 * from the top, and SQLite syncs the new header before the first frame:
 * one sync of the disk (4 ms and more here) inside whatever publish came
 * next. The policy's own write takes it now, in the pause: page 1 written
 * again as it is (the schema version set to itself). Its one frame waits
 * for a later checkpoint without asking for one, and the clock of the
 * pause is left alone. Another writer holding the lock makes it a no-op;
 * the next append restarts the WAL then, as before. */
static void restart_wal(struct store_sqlite *st)
{
	uint64_t last_write = st->last_write_ms;
	char sql[64];
	snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", STORE_SCHEMA_VERSION);
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		log_debug("store: restarting the WAL of %s in a pause: %s", st->path, sqlite3_errstr(rc));
	st->wal_pages = 0;
	st->last_write_ms = last_write;
}

int64_t store_sqlite_upkeep(struct store_sqlite *st, uint64_t *ns)
{
	*ns = 0;
	if (st->wal_pages <= 0)
		return -1;
	uint64_t quiet = clock_mono_ms() - st->last_write_ms;
	if (quiet < STORE_CHECKPOINT_QUIET_MS && st->wal_pages < STORE_WAL_FORCE_PAGES)
		return (int64_t)(STORE_CHECKPOINT_QUIET_MS - quiet);
	int pages = st->wal_pages;
	uint64_t t0 = clock_mono_ns();
	int n = store_sqlite_checkpoint(st);
	if (n >= 0 && st->wal_pages == 0)
		restart_wal(st);
	*ns = clock_mono_ns() - t0;
	if (n >= 0)
		log_debug("checkpoint: %d of %d WAL pages copied in %.1f ms", n, pages, (double)*ns / 1e6);
	/* Once tried, wait for the next write: frames a reader still holds
	 * stay until a later checkpoint, and a failing disk is not retried
	 * in a loop. */
	return -1;
}

/* ---- wiring to the loop: change from other writers, checkpoints ---- */

#define NO_INOTIFY_POLL_MS 1000

/* A writer's commit shows in the -wal file (inotify) before it becomes
 * visible: the wal-index in the -shm file is updated through mmap, which
 * inotify does not see, and a writer with synchronous=FULL syncs the -wal
 * file in between, which on a busy disk takes a good part of a second or
 * more. So a wake-up is followed by checks of data_version on the next pass,
 * then from 1 ms to 2 s later (about 3.8 s in all), and a change found does
 * not end them: the same wake-up may stand for a second commit that is still
 * syncing. Without a change the checks end, and no timer runs while nothing
 * happens. */
static const unsigned confirm_delays_ms[] = { 0, 1, 1, 2, 4, 8, 16, 64, 250, 500, 1000, 2000 };

/* The database file was deleted or replaced under us: what we write would go
 * to an unlinked file. Say so and report it, so the process stops and a
 * restart opens the file that is there now. Returns true when gone. */
static bool file_gone(struct store_sqlite *st)
{
	int r = store_sqlite_check_file(st);
	if (r == 0)
		return false;
	log_err("the database file %s was %s while herald had it open; stopping so that a restart opens the "
		"file that is there now",
		st->path, r == -ENOENT ? "deleted" : "replaced by another file");
	st->hooks.fatal(st->hooks.arg);
	return true;
}

static void confirm_change(void *arg)
{
	struct store_sqlite *st = arg;
	bool changed = store_sqlite_changed(st);
	if (file_gone(st))
		return;
	if (changed) {
		/* Maybe another program's rows: the other workers are woken
		 * first, so that their fan-out starts beside this one's rather
		 * than after it (16,700 readers' queues here take milliseconds). */
		if (st->has_peers && st->peers.watch_writes)
			st->peers.wake(st->peers.arg);
		st->hooks.changed(st->hooks.arg);
		st->confirm_step = 1; /* go on checking from the shortest delay */
	}
	if (st->confirm_step < ARRAY_LEN(confirm_delays_ms))
		loop_timer_start(st->lp, &st->confirm_timer, confirm_delays_ms[st->confirm_step++], confirm_change, st);
	else
		st->confirm_step = 0;
}

/* With peers, their commits come through their wake-ups, visible at once,
 * while each of their writes to the -wal file also fires the folder watch
 * of every worker: at thousands of commits a second that was most of a
 * group's CPU. So the folder watch rests FOLDER_REST_MS after each event;
 * it still sees other programs' commits and the file being replaced, within
 * that much more. */
#define FOLDER_REST_MS 100

static void folder_rested(void *arg)
{
	struct store_sqlite *st = arg;
	int r = loop_modify(st->lp, st->watch_fd, EPOLLIN);
	if (r < 0)
		log_warn("store: watching %s again: %s", st->path, strerror(-r));
}

/* After an append of herald's own the caller reads every new row (store.h),
 * and the append had to wait for any other writer's lock, so a commit of
 * another program's that the watch or a running check stood for is read
 * then too. What the folder watch would report next is mostly the append's
 * own writes to the -wal file: one wake-up and one look per append, 5% of
 * the server's CPU at 1,000 publishes/s. So the checks end and the watch
 * rests OWN_WRITE_REST_MS: a commit of another program's after the append
 * is seen when the rest ends, or with the next append, whichever is first,
 * and without appends nothing rests. */
#define OWN_WRITE_REST_MS 10

void store_sqlite_rest_after_own_append(struct store_sqlite *st)
{
	if (!st->lp || st->watch_fd < 0 || (st->has_peers && !st->peers.watch_writes))
		return; /* no watch of the -wal file to rest */
	st->confirm_step = 0;
	loop_timer_stop(st->lp, &st->confirm_timer);
	if (!loop_timer_active(&st->folder_rest_timer) && loop_modify(st->lp, st->watch_fd, 0) == 0)
		loop_timer_start(st->lp, &st->folder_rest_timer, OWN_WRITE_REST_MS, folder_rested, st);
}

static void on_folder_event(void *arg, uint32_t events)
{
	struct store_sqlite *st = arg;
	(void)events;
	if (st->has_peers && loop_modify(st->lp, st->watch_fd, 0) == 0)
		loop_timer_start(st->lp, &st->folder_rest_timer, FOLDER_REST_MS, folder_rested, st);
	st->confirm_step = 0;
	loop_timer_stop(st->lp, &st->confirm_timer);
	confirm_change(st);
}

static void slow_poll(void *arg)
{
	struct store_sqlite *st = arg;
	bool changed = store_sqlite_changed(st);
	if (file_gone(st))
		return;
	if (changed)
		st->hooks.changed(st->hooks.arg);
	loop_timer_start(st->lp, &st->watch_timer, NO_INOTIFY_POLL_MS, slow_poll, st);
}

/* A peer committed: its rows are visible now, so one look is enough. Under
 * a stream of commits a worker looks at most once per PEER_REST_MS: after a
 * look its wake-up rests, the wake stays untaken (so peers skip the write),
 * and the rest's end takes it and looks again, resting on while it finds
 * rows. A row waits that much more at most; a look per commit was most of
 * what a worker that publishes nothing spent. */
#define PEER_REST_MS 1

/* One look; false when the file is gone (the process stops). */
static bool peer_look(struct store_sqlite *st, bool *changed)
{
	*changed = store_sqlite_changed(st);
	if (file_gone(st))
		return false;
	if (*changed)
		st->hooks.changed(st->hooks.arg);
	return true;
}

static void peer_rested(void *arg)
{
	struct store_sqlite *st = arg;
	st->peers.taken(st->peers.arg);
	bool changed;
	if (!peer_look(st, &changed))
		return;
	if (changed) {
		loop_timer_start(st->lp, &st->peer_rest_timer, PEER_REST_MS, peer_rested, st);
		return;
	}
	int r = loop_modify(st->lp, st->peers.fd, EPOLLIN);
	if (r < 0)
		log_warn("store: waiting for other workers' commits: %s", strerror(-r));
}

static void on_peer_wake(void *arg, uint32_t events)
{
	struct store_sqlite *st = arg;
	(void)events;
	bool changed;
	if (!peer_look(st, &changed))
		return;
	int r = loop_modify(st->lp, st->peers.fd, 0);
	if (r < 0) {
		st->peers.taken(st->peers.arg); /* cannot rest: take it now */
		return;
	}
	loop_timer_start(st->lp, &st->peer_rest_timer, PEER_REST_MS, peer_rested, st);
}

/* Wire the store to the loop: the inotify watch (or a slow poll without
 * inotify) calls h->changed once another writer's commit is visible, and
 * h->fatal when the database file was deleted or replaced. Checkpoint
 * durations go to m. Returns 0 or -1. */
int store_sqlite_watch(struct store_sqlite *st, struct loop *lp, struct metrics *m, const struct store_hooks *h)
{
	st->lp = lp;
	st->m = m;
	st->hooks = *h;
	if (st->watch_fd < 0) {
		log_warn("inotify is not available; checking the database for other writers every %d ms",
			 NO_INOTIFY_POLL_MS);
		loop_timer_start(lp, &st->watch_timer, NO_INOTIFY_POLL_MS, slow_poll, st);
	} else if (loop_watch(lp, st->watch_fd, EPOLLIN, on_folder_event, st) < 0) {
		return -1;
	}
	if (st->has_peers) {
		st->peers.taken(st->peers.arg); /* a wake meant for a worker before us */
		if (loop_watch(lp, st->peers.fd, EPOLLIN, on_peer_wake, st) < 0)
			return -1;
		/* Rows another program added while this worker was not running
		 * (the one that watches for them restarting): the others look. */
		if (st->peers.watch_writes)
			st->peers.wake(st->peers.arg);
	}
	return 0;
}

static void upkeep_tick(void *arg)
{
	struct store_sqlite *st = arg;
	uint64_t ns = 0;
	int64_t next = store_sqlite_upkeep(st, &ns);
	if (ns && st->m)
		metrics_observe(&st->m->checkpoint_seconds, ns);
	if (next >= 0)
		loop_timer_start(st->lp, &st->upkeep_timer, (uint64_t)next, upkeep_tick, st);
}

/* After herald's own writes: run the checkpoint policy (store_sqlite_upkeep)
 * now and from a timer until it has nothing left to do. */
void store_sqlite_written(struct store_sqlite *st)
{
	if (st->lp)
		upkeep_tick(st);
}

/* Undo store_sqlite_watch (timers, the watch); before store_sqlite_close. */
void store_sqlite_unwatch(struct store_sqlite *st)
{
	if (!st->lp)
		return;
	loop_timer_stop(st->lp, &st->watch_timer);
	loop_timer_stop(st->lp, &st->confirm_timer);
	loop_timer_stop(st->lp, &st->upkeep_timer);
	loop_timer_stop(st->lp, &st->folder_rest_timer);
	loop_timer_stop(st->lp, &st->peer_rest_timer);
	if (st->watch_fd >= 0)
		loop_unwatch(st->lp, st->watch_fd);
	if (st->has_peers)
		loop_unwatch(st->lp, st->peers.fd);
	st->lp = NULL;
}

void store_sqlite_set_peers(struct store_sqlite *st, const struct store_peers *p)
{
	st->peers = *p;
	st->has_peers = p->fd >= 0;
	if (st->has_peers && !p->watch_writes && st->watch_fd >= 0) {
		/* Every write to the -wal file is an event queued for each
		 * watch of the folder, in the writer's system call: one watch
		 * of them is enough. */
		char *folder = folder_of(st->path);
		if (inotify_add_watch(st->watch_fd, folder, FOLDER_NAMES) < 0)
			log_warn("store: watching %s: %s", folder, strerror(errno));
		free(folder);
	}
}
