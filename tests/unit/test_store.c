/* SPDX-License-Identifier: BSD-2-Clause */
/* test_store.c: the SQLite store against real files in a temporary folder,
 * with a second SQLite connection (and once the sqlite3 command-line tool)
 * playing the other processes that insert into the events table. */
#include "check.h"
#include "store/store_filter_sql.h"
#include "store/store_sqlite.h"
#include "core/topic.h"
#include "common/util.h"
#include "store/visibility.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[] = "/tmp/herald-test-store-XXXXXX";

static const char *db_path(const char *name)
{
	static char buf[4][256];
	static int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

static struct store_sqlite *open_ok(const char *path)
{
	char err[512] = "";
	struct store_sqlite *st = store_sqlite_open(path, 5, err, sizeof(err));
	if (!st)
		fprintf(stderr, "store_sqlite_open(%s): %s\n", path, err);
	CHECK(st != NULL);
	return st;
}

/* ---- the "other process": a second, independent connection ---- */

static sqlite3 *ext_open(const char *path)
{
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	CHECK_EQ_INT(rc, SQLITE_OK);
	sqlite3_busy_timeout(db, 2000);
	return db;
}

static void ext_exec(sqlite3 *db, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK)
		fprintf(stderr, "ext_exec(%s): %s\n", sql, msg ? msg : "?");
	CHECK_EQ_INT(rc, SQLITE_OK);
	sqlite3_free(msg);
}

static int64_t ext_int(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	int64_t v = -1;
	CHECK_EQ_INT(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	if (s && sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

static void ext_text(sqlite3 *db, const char *sql, char *out, size_t outlen)
{
	sqlite3_stmt *s = NULL;
	out[0] = '\0';
	CHECK_EQ_INT(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	if (s && sqlite3_step(s) == SQLITE_ROW && sqlite3_column_text(s, 0))
		snprintf(out, outlen, "%s", (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
}

static void ext_close(sqlite3 *db)
{
	CHECK_EQ_INT(sqlite3_close(db), SQLITE_OK);
}

/* ---- collecting rows ---- */

#define MAX_ROWS 64

struct rows {
	int n;
	int stop_after; /* 0 = never stop early */
	int64_t id[MAX_ROWS];
	char type[MAX_ROWS][32];
	char topic[MAX_ROWS][32];
	char data[MAX_ROWS][64];
	size_t type_len[MAX_ROWS], topic_len[MAX_ROWS], data_len[MAX_ROWS];
	bool pub[MAX_ROWS];
	int64_t created_at[MAX_ROWS];
	bool terminated; /* every string had its NUL at [len] */
};

static int collect(void *arg, const struct store_event *ev)
{
	struct rows *r = arg;
	if (r->n >= MAX_ROWS)
		return 1;
	int i = r->n++;
	r->id[i] = ev->id;
	r->type_len[i] = ev->type_len;
	r->topic_len[i] = ev->topic_len;
	r->data_len[i] = ev->data_len;
	memcpy(r->type[i], ev->type, MIN(ev->type_len + 1, sizeof(r->type[i]) - 1));
	memcpy(r->topic[i], ev->topic, MIN(ev->topic_len + 1, sizeof(r->topic[i]) - 1));
	memcpy(r->data[i], ev->data, MIN(ev->data_len + 1, sizeof(r->data[i]) - 1));
	if (ev->type[ev->type_len] || ev->topic[ev->topic_len] || ev->data[ev->data_len])
		r->terminated = false;
	r->pub[i] = ev->public;
	r->created_at[i] = ev->created_at;
	return r->stop_after && r->n >= r->stop_after;
}

static int collect_none(void *arg, const struct store_event *ev)
{
	(void)arg;
	(void)ev;
	return 0;
}

static int read_all(struct store_sqlite *st, int64_t after, int64_t upto, size_t limit, struct rows *r)
{
	memset(r, 0, sizeof(*r));
	r->terminated = true;
	return store_sqlite_read_range(st, after, upto, limit, collect, r);
}

static int append_one(struct store_sqlite *st, const char *type, const char *topic, const char *data, bool pub,
		      int64_t *id)
{
	struct store_new_event ev = {
		type, topic, data, data ? strlen(data) : 0, pub, NULL, NULL, NULL, NULL, NULL, 0
	};
	return store_sqlite_append_batch(st, &ev, 1, id);
}

static bool readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

static off_t file_size(const char *path)
{
	struct stat sb;
	return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* ---- tests ---- */

static void test_open_creates_schema_and_wal(void)
{
	const char *path = db_path("schema.db");
	char wal[300], mode[32];
	snprintf(wal, sizeof(wal), "%s-wal", path);

	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	int64_t id = 0, max = -1;
	CHECK_EQ_INT(store_sqlite_max_id(st, &max), 0);
	CHECK_EQ_INT(max, 0);
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 0);
	CHECK_EQ_INT(append_one(st, "t", "news", "hello", true, &id), 0);
	CHECK_EQ_INT(id, 1);
	CHECK(file_size(wal) > 0);

	sqlite3 *db = ext_open(path);
	ext_text(db, "PRAGMA journal_mode", mode, sizeof(mode));
	CHECK(strcmp(mode, "wal") == 0);
	CHECK_EQ_INT(ext_int(db, "PRAGMA user_version"), 6);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='events'"), 1);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='herald_meta'"), 1);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='index'"
				 " AND name='events_created_at'"),
		     1);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='index'"
				 " AND name='events_public_topic_id'"),
		     1);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='events'"
				 " AND sql LIKE '%AUTOINCREMENT%'"),
		     1);
	/* The contract's column defaults work for a bare external insert. */
	ext_exec(db, "INSERT INTO events(data) VALUES ('x')");
	ext_text(db, "SELECT type || '|' || topic || '|' || public FROM events WHERE id=2", mode, sizeof(mode));
	CHECK(strcmp(mode, "message||0") == 0);
	CHECK(llabs(ext_int(db, "SELECT created_at FROM events WHERE id=2") - clock_wall_s()) <= 5);
	ext_close(db);

	store_sqlite_close(st);
	/* The last connection checkpointed: nothing is left to recover. */
	CHECK(file_size(wal) <= 0);
}

static void test_append_and_read_range(void)
{
	struct store_sqlite *st = open_ok(db_path("range.db"));
	if (!st)
		return;
	struct store_new_event evs[5] = {
		{ "greet", "news", "hello", 5, true, NULL, NULL, NULL, NULL, NULL, 0 },
		{ NULL, NULL, "line1\nline2", 11, false, NULL, NULL, NULL, NULL, NULL, 0 },
		{ "t", "a/b", "h\xc3\xa9llo", 6, true, NULL, NULL, NULL, NULL, NULL, 0 },
		{ "t", "", "", 0, false, NULL, NULL, NULL, NULL, NULL, 0 },
		{ "bin", "x", "a\0b", 3, false, NULL, NULL, NULL, NULL, NULL, 0 },
	};
	int64_t ids[5] = { 0 };
	CHECK_EQ_INT(store_sqlite_append_batch(st, evs, 2, ids), 0);
	CHECK_EQ_INT(store_sqlite_append_batch(st, evs + 2, 3, ids + 2), 0);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(ids[i], i + 1);
	CHECK_EQ_INT(store_sqlite_append_batch(st, evs, 0, NULL), 0);
	int64_t max = 0;
	CHECK_EQ_INT(store_sqlite_max_id(st, &max), 0);
	CHECK_EQ_INT(max, 5);

	struct rows r;
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 5);
	CHECK(r.terminated);
	for (int i = 0; i < 5; i++)
		CHECK_EQ_INT(r.id[i], i + 1);
	CHECK(strcmp(r.type[0], "greet") == 0 && r.type_len[0] == 5);
	CHECK(strcmp(r.topic[0], "news") == 0 && r.topic_len[0] == 4);
	CHECK(strcmp(r.data[0], "hello") == 0 && r.data_len[0] == 5);
	CHECK(r.pub[0] && !r.pub[1] && r.pub[2] && !r.pub[3]);
	CHECK(strcmp(r.type[1], "message") == 0 && r.type_len[1] == 7);
	CHECK(r.topic_len[1] == 0 && r.topic[1][0] == '\0');
	CHECK(strcmp(r.data[1], "line1\nline2") == 0 && r.data_len[1] == 11);
	CHECK(strcmp(r.data[2], "h\xc3\xa9llo") == 0 && r.data_len[2] == 6);
	CHECK(r.data_len[3] == 0 && r.data[3][0] == '\0');
	CHECK(r.data_len[4] == 3 && memcmp(r.data[4], "a\0b", 4) == 0);
	for (int i = 0; i < 5; i++)
		CHECK(llabs(r.created_at[i] - clock_wall_s()) <= 5);

	/* Bounds: after is exclusive, upto inclusive. */
	CHECK_EQ_INT(read_all(st, 1, 4, 100, &r), 3);
	CHECK(r.id[0] == 2 && r.id[1] == 3 && r.id[2] == 4);
	/* Limit keeps the lowest ids. */
	CHECK_EQ_INT(read_all(st, 0, 5, 2, &r), 2);
	CHECK(r.id[0] == 1 && r.id[1] == 2);
	/* Empty ranges. */
	CHECK_EQ_INT(read_all(st, 3, 3, 100, &r), 0);
	CHECK_EQ_INT(read_all(st, 4, 2, 100, &r), 0);
	CHECK_EQ_INT(read_all(st, 5, 1000, 100, &r), 0);
	CHECK_EQ_INT(read_all(st, 0, 5, 0, &r), 0);
	/* A callback that stops early: the stopping row counts. */
	memset(&r, 0, sizeof(r));
	r.stop_after = 2;
	CHECK_EQ_INT(store_sqlite_read_range(st, 0, 5, 100, collect, &r), 2);
	CHECK_EQ_INT(r.n, 2);
	/* After an early stop the statement is reset: a new read starts clean. */
	CHECK_EQ_INT(read_all(st, 2, 5, 100, &r), 3);
	CHECK_EQ_INT(r.id[0], 3);

	store_sqlite_close(st);
}

static bool run_sqlite3_cli(const char *path, const char *sql)
{
	pid_t pid = fork();
	if (pid < 0)
		return false;
	if (pid == 0) {
		execl("/usr/bin/sqlite3", "sqlite3", "-batch", path, sql, (char *)NULL);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void test_external_insert_is_noticed(void)
{
	const char *path = db_path("notify.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	int fd = store_sqlite_watch_fd(st);
	CHECK(fd >= 0);

	/* Opening created files in the folder; those events are ours. */
	CHECK(!store_sqlite_changed(st));
	if (fd >= 0)
		CHECK(!readable(fd, 0));

	/* Our own commits wake the fd (the -wal file changed) but are not
	 * reported as another writer's. */
	int64_t id = 0;
	CHECK_EQ_INT(append_one(st, "t", "", "own", false, &id), 0);
	CHECK(!store_sqlite_changed(st));
	if (fd >= 0)
		CHECK(!readable(fd, 0));

	sqlite3 *db = ext_open(path);
	ext_exec(db, "INSERT INTO events(type, topic, data, public) VALUES ('t','news','from outside',1)");
	if (fd >= 0)
		CHECK(readable(fd, 2000));
	CHECK(store_sqlite_changed(st));
	CHECK(!store_sqlite_changed(st)); /* reported once */
	if (fd >= 0)
		CHECK(!readable(fd, 0)); /* drained */

	struct rows r;
	CHECK_EQ_INT(read_all(st, id, INT64_MAX, 100, &r), 1);
	CHECK(r.id[0] == id + 1 && strcmp(r.data[0], "from outside") == 0 && r.pub[0]);

	/* A pending external commit seen before draining is not lost. */
	ext_exec(db, "INSERT INTO events(data) VALUES ('second')");
	CHECK(store_sqlite_changed(st));
	CHECK(!store_sqlite_changed(st));
	ext_close(db);

	/* Once with the real command-line tool, a genuinely separate process. */
	if (access("/usr/bin/sqlite3", X_OK) == 0) {
		CHECK(run_sqlite3_cli(path,
				      "INSERT INTO events(type, topic, data, public) VALUES ('t','news','cli',1)"));
		if (fd >= 0)
			CHECK(readable(fd, 2000));
		CHECK(store_sqlite_changed(st));
		CHECK_EQ_INT(read_all(st, id + 2, INT64_MAX, 100, &r), 1);
		CHECK(r.n == 1 && strcmp(r.data[0], "cli") == 0 && strcmp(r.type[0], "t") == 0);
		CHECK(!store_sqlite_changed(st));
	} else {
		printf("store: /usr/bin/sqlite3 missing, CLI insert not tested\n");
	}
	store_sqlite_close(st);
}

static void test_busy(void)
{
	const char *path = db_path("busy.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	int64_t id = 0, max = 0;
	CHECK_EQ_INT(append_one(st, "t", "", "before", false, &id), 0);

	sqlite3 *db = ext_open(path);
	ext_exec(db, "BEGIN IMMEDIATE");
	ext_exec(db, "INSERT INTO events(data) VALUES ('held')");

	struct store_new_event evs[2] = { { "t", "", "a", 1, false, NULL, NULL, NULL, NULL, NULL, 0 },
					  { "t", "", "b", 1, false, NULL, NULL, NULL, NULL, NULL, 0 } };
	int64_t ids[2] = { -1, -1 };
	uint64_t t0 = clock_mono_ms();
	CHECK_EQ_INT(store_sqlite_append_batch(st, evs, 2, ids), -EBUSY);
	uint64_t t1 = clock_mono_ms();
	CHECK(t1 - t0 < 100);
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 1, 100), -EBUSY);
	CHECK(clock_mono_ms() - t1 < 100);
	/* WAL: reading goes on while another process writes. */
	struct rows r;
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 1);
	CHECK_EQ_INT(store_sqlite_max_id(st, &max), 0);
	CHECK_EQ_INT(max, id);
	ext_exec(db, "ROLLBACK");
	ext_close(db);

	/* Nothing of the refused batch was written; the store still works. */
	CHECK_EQ_INT(store_sqlite_append_batch(st, evs, 2, ids), 0);
	CHECK(ids[0] == id + 1 && ids[1] == id + 2);
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 3);
	CHECK(strcmp(r.data[1], "a") == 0 && strcmp(r.data[2], "b") == 0);
	store_sqlite_close(st);
}

static void test_prune(void)
{
	const char *path = db_path("prune.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	struct store_new_event ev = { "t", "", "x", 1, false, NULL, NULL, NULL, NULL, NULL, 0 };
	struct rows r;
	int64_t max = 0;
	for (int i = 0; i < 10; i++)
		CHECK_EQ_INT(store_sqlite_append_batch(st, &ev, 1, NULL), 0);

	/* Nothing configured, nothing due. */
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 0, 100), 0);
	CHECK_EQ_INT(store_sqlite_prune(st, 3600, 100, 100), 0);
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 0);

	/* By count: keep the newest 4 of ids 1..10. */
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 4, 100), 6);
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 6);
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 4);
	CHECK(r.id[0] == 7 && r.id[3] == 10);
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 4, 100), 0);

	/* max_rows bounds one call. */
	for (int i = 0; i < 10; i++)
		CHECK_EQ_INT(store_sqlite_append_batch(st, &ev, 1, NULL), 0);
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 4, 3), 3);
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 9);
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 4, 100), 7);
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 16);

	/* By age: rows another process inserted with old timestamps go, the
	 * fresh ones (lower and higher ids) stay. */
	sqlite3 *db = ext_open(path);
	ext_exec(db,
		 "INSERT INTO events(data, created_at) VALUES ('old1', CAST(strftime('%s','now') AS INTEGER) - 1000),"
		 " ('old2', CAST(strftime('%s','now') AS INTEGER) - 1000),"
		 " ('old3', CAST(strftime('%s','now') AS INTEGER) - 2000)");
	CHECK_EQ_INT(store_sqlite_append_batch(st, &ev, 1, NULL), 0);
	CHECK_EQ_INT(store_sqlite_prune(st, 500, 0, 2), 2);
	CHECK_EQ_INT(store_sqlite_prune(st, 500, 0, 100), 1);
	CHECK_EQ_INT(store_sqlite_prune(st, 500, 0, 100), 0);
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 23);
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 5);
	CHECK(r.id[0] == 17 && r.id[3] == 20 && r.id[4] == 24);
	CHECK_EQ_INT(ext_int(db, "SELECT value FROM herald_meta WHERE key='pruned_through'"), 23);

	/* Prune everything: the id sequence survives. */
	ext_exec(db, "UPDATE events SET created_at = created_at - 10000");
	CHECK_EQ_INT(store_sqlite_prune(st, 500, 0, 1000), 5);
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 0);
	CHECK_EQ_INT(store_sqlite_max_id(st, &max), 0);
	CHECK_EQ_INT(max, 24);
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 24);
	ext_close(db);
	store_sqlite_close(st);

	/* Reopen: pruned_through and the sequence are persistent. */
	st = open_ok(path);
	if (!st)
		return;
	CHECK_EQ_INT(store_sqlite_pruned_through(st), 24);
	CHECK_EQ_INT(store_sqlite_max_id(st, &max), 0);
	CHECK_EQ_INT(max, 24);
	int64_t id = 0;
	CHECK_EQ_INT(store_sqlite_append_batch(st, &ev, 1, &id), 0);
	CHECK_EQ_INT(id, 25);
	/* A count limit larger than the log deletes nothing. */
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 1000, 100), 0);
	store_sqlite_close(st);
}

static void test_reopen(void)
{
	const char *path = db_path("reopen.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	int64_t id = 0;
	CHECK_EQ_INT(append_one(st, "t", "a", "one", true, &id), 0);
	CHECK_EQ_INT(append_one(st, "t", "a", "two", true, &id), 0);
	store_sqlite_close(st);

	st = open_ok(path);
	if (!st)
		return;
	struct rows r;
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 2);
	CHECK(strcmp(r.data[0], "one") == 0 && strcmp(r.data[1], "two") == 0);
	CHECK_EQ_INT(append_one(st, "t", "a", "three", true, &id), 0);
	CHECK_EQ_INT(id, 3);
	CHECK(!store_sqlite_changed(st));
	store_sqlite_close(st);
}

static void test_newer_schema_refused(void)
{
	const char *path = db_path("newer.db");
	char err[512] = "", mode[32];
	sqlite3 *db = ext_open(path);
	ext_exec(db, "CREATE TABLE something(a); PRAGMA user_version=7");
	ext_close(db);

	struct store_sqlite *st = store_sqlite_open(path, 5, err, sizeof(err));
	CHECK(st == NULL);
	store_sqlite_close(st);
	CHECK(strstr(err, path) != NULL);
	CHECK(strstr(err, "version 7") != NULL);
	CHECK(strstr(err, "newer") != NULL);

	/* Refused before anything was changed. */
	db = ext_open(path);
	ext_text(db, "PRAGMA journal_mode", mode, sizeof(mode));
	CHECK(strcmp(mode, "delete") == 0);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='events'"), 0);
	ext_close(db);
}

static void test_open_failure(void)
{
	char err[512] = "";
	const char *path = db_path("no/such/folder/x.db");
	struct store_sqlite *st = store_sqlite_open(path, 5, err, sizeof(err));
	CHECK(st == NULL);
	CHECK(strstr(err, path) != NULL);
	CHECK(strstr(err, "unable to open") != NULL);
}

static void test_odd_external_rows(void)
{
	/* Non-text values in the current schema. */
	const char *path = db_path("odd.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	sqlite3 *db = ext_open(path);
	ext_exec(db, "INSERT INTO events(type, topic, data, public) VALUES (42, x'6869', x'00ff41', 7)");
	ext_exec(db, "INSERT INTO events(type, data, public) VALUES ('t', 2.5, 'yes')");
	ext_close(db);
	struct rows r;
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 2);
	CHECK(r.terminated);
	CHECK(strcmp(r.type[0], "42") == 0 && r.type_len[0] == 2);
	CHECK(strcmp(r.topic[0], "hi") == 0 && r.topic_len[0] == 2);
	CHECK(r.data_len[0] == 3 && memcmp(r.data[0],
					   "\0\xff"
					   "A",
					   3) == 0);
	CHECK(r.pub[0]);
	CHECK(strcmp(r.data[1], "2.5") == 0 && r.data_len[1] == 3);
	CHECK(!r.pub[1]);
	store_sqlite_close(st);

	/* NULLs, possible in a lenient table an older program made: it has
	 * every column and AUTOINCREMENT, so it is adopted as it is. */
	path = db_path("lenient.db");
	db = ext_open(path);
	ext_exec(db, "CREATE TABLE events(id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT, topic TEXT,"
		     " data TEXT, public INTEGER, created_at INTEGER)");
	ext_exec(db, "INSERT INTO events(type, topic, data, public, created_at) VALUES (NULL, NULL, NULL, NULL, NULL)");
	ext_close(db);
	st = open_ok(path);
	if (!st)
		return;
	db = ext_open(path);
	ext_exec(db, "INSERT INTO events(data) VALUES (NULL)");
	ext_close(db);
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 2);
	CHECK(r.terminated);
	for (int i = 0; i < 2; i++)
		CHECK(r.type_len[i] == 0 && r.topic_len[i] == 0 && r.data_len[i] == 0 && !r.pub[i]);
	CHECK_EQ_INT(r.created_at[0], 0);
	store_sqlite_close(st);
}

static void test_older_layouts(void)
{
	struct rows r;
	int64_t id = 0;
	char text[64];

	/* The exact contract table, made by another tool before herald first
	 * ran (user_version 0): kept untouched. */
	const char *path = db_path("premade.db");
	sqlite3 *db = ext_open(path);
	ext_exec(db,
		 "CREATE TABLE events(id INTEGER PRIMARY KEY AUTOINCREMENT, type TEXT NOT NULL DEFAULT 'message',"
		 " topic TEXT NOT NULL DEFAULT '', data TEXT NOT NULL DEFAULT '', public INTEGER NOT NULL DEFAULT 0,"
		 " created_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER)));"
		 "INSERT INTO events(data) VALUES ('a'), ('b');");
	ext_close(db);
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 2);
	CHECK_EQ_INT(append_one(st, "t", "", "c", false, &id), 0);
	CHECK_EQ_INT(id, 3);
	store_sqlite_close(st);
	db = ext_open(path);
	CHECK_EQ_INT(ext_int(db, "PRAGMA user_version"), 6);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='herald_meta'"), 1);
	ext_close(db);

	/* An older, thinner layout: no topic/public, text timestamps, no
	 * AUTOINCREMENT, and a view on it. Rebuilt with ids kept. */
	path = db_path("thin.db");
	db = ext_open(path);
	ext_exec(db, "CREATE TABLE events(id INTEGER PRIMARY KEY, type TEXT, data TEXT, created_at TEXT);"
		     "INSERT INTO events VALUES (1, 'a', 'x', '2024-01-01 00:00:00'), (2, NULL, 'y', NULL),"
		     " (7, 'c', NULL, '2024-01-02 00:00:00');"
		     "CREATE VIEW recent AS SELECT id, data FROM events;");
	ext_close(db);
	st = open_ok(path);
	if (!st)
		return;
	CHECK_EQ_INT(read_all(st, 0, 100, 100, &r), 3);
	CHECK(r.id[0] == 1 && r.id[1] == 2 && r.id[2] == 7);
	CHECK(strcmp(r.type[0], "a") == 0 && strcmp(r.type[1], "message") == 0 && strcmp(r.type[2], "c") == 0);
	CHECK(strcmp(r.data[0], "x") == 0 && strcmp(r.data[1], "y") == 0 && r.data_len[2] == 0);
	CHECK(r.topic_len[0] == 0 && !r.pub[0]);
	CHECK_EQ_INT(r.created_at[0], 1704067200);
	CHECK(llabs(r.created_at[1] - clock_wall_s()) <= 5);
	CHECK_EQ_INT(append_one(st, "t", "", "new", false, &id), 0);
	CHECK_EQ_INT(id, 8);
	store_sqlite_close(st);
	db = ext_open(path);
	CHECK_EQ_INT(ext_int(db, "PRAGMA user_version"), 6);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM recent"), 4);
	CHECK_EQ_INT(ext_int(db, "SELECT seq FROM sqlite_sequence WHERE name='events'"), 8);
	ext_text(db, "SELECT sql FROM sqlite_master WHERE name='events'", text, sizeof(text));
	CHECK(strstr(text, "CREATE TABLE") != NULL && strstr(text, "herald_events_new") == NULL);
	ext_close(db);

	/* AUTOINCREMENT but a missing column, with its top rows deleted: the
	 * rebuild keeps the sequence, so ids 4 and 5 are never reused. */
	path = db_path("seq.db");
	db = ext_open(path);
	ext_exec(db, "CREATE TABLE events(id INTEGER PRIMARY KEY AUTOINCREMENT, data TEXT);"
		     "INSERT INTO events(data) VALUES ('1'), ('2'), ('3'), ('4'), ('5');"
		     "DELETE FROM events WHERE id > 3;");
	ext_close(db);
	st = open_ok(path);
	if (!st)
		return;
	int64_t max = 0;
	CHECK_EQ_INT(store_sqlite_max_id(st, &max), 0);
	CHECK_EQ_INT(max, 5);
	CHECK_EQ_INT(append_one(st, "t", "", "6", false, &id), 0);
	CHECK_EQ_INT(id, 6);
	store_sqlite_close(st);
}

static void rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	char p[512];
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (unlink(p) < 0)
			fprintf(stderr, "cannot remove %s: %s\n", p, strerror(errno));
	}
	closedir(d);
	if (rmdir(dir) < 0)
		fprintf(stderr, "cannot remove %s: %s\n", dir, strerror(errno));
}

/* ---- reads by filter ---- */

/* A VFS that counts reads and syncs, wrapped around the default one: how
 * many reads of the database file a query makes tells whether it walked an
 * index or the whole log, and the syncs of any file a write makes whether
 * it waited for the disk, with no clock involved. The database file has
 * methods of its own (real_io); the -wal and journal files share others
 * (real_other_io), of which only syncs are counted. */
static sqlite3_vfs counting_vfs, *real_vfs;
static struct sqlite3_io_methods counting_io, counting_other_io;
static const struct sqlite3_io_methods *real_io, *real_other_io;
static long file_reads, file_syncs;

static int counting_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	file_reads++;
	return real_io->xRead(f, buf, n, off);
}

static int counting_sync(sqlite3_file *f, int flags)
{
	file_syncs++;
	return real_io->xSync(f, flags);
}

static int counting_other_sync(sqlite3_file *f, int flags)
{
	file_syncs++;
	return real_other_io->xSync(f, flags);
}

static int counting_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out_flags)
{
	(void)vfs;
	int rc = real_vfs->xOpen(real_vfs, name, f, flags, out_flags);
	if (rc == SQLITE_OK && f->pMethods) {
		if (!real_io) {
			real_io = f->pMethods;
			counting_io = *real_io;
			counting_io.xRead = counting_read;
			counting_io.xSync = counting_sync;
		}
		if (f->pMethods == real_io) {
			f->pMethods = &counting_io;
		} else if (!real_other_io || f->pMethods == real_other_io) {
			real_other_io = f->pMethods;
			counting_other_io = *real_other_io;
			counting_other_io.xSync = counting_other_sync;
			f->pMethods = &counting_other_io;
		}
	}
	return rc;
}

static void use_counting_vfs(void)
{
	real_vfs = sqlite3_vfs_find(NULL);
	counting_vfs = *real_vfs;
	counting_vfs.zName = "counting";
	counting_vfs.xOpen = counting_open;
	sqlite3_vfs_register(&counting_vfs, 1);
}

static int read_matching(struct store_sqlite *st, int64_t after, size_t limit, bool see_private,
			 const char *const *topics, size_t ntopics, struct rows *r)
{
	struct store_filter f = { .see_private = see_private, .ntopics = ntopics, .topics = (char *const *)topics };
	memset(r, 0, sizeof(*r));
	r->terminated = true;
	int64_t through;
	return store_sqlite_read_matching(st, after, INT64_MAX, limit, &f, collect, r, &through);
}

static void test_read_matching(void)
{
	const char *path = db_path("matching.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	/* ids 1..12: topic a/b/c in turn; every third row private. */
	static const char *const names[] = { "a", "b", "c" };
	for (int i = 0; i < 12; i++)
		CHECK_EQ_INT(append_one(st, "t", names[i % 3], "d", i % 3 != 1 || i % 2 == 0, NULL), 0);
	struct rows r;
	const char *const a[] = { "a" }, *const ac[] = { "c", "a" }, *const none[] = { "zzz" };
	CHECK_EQ_INT(read_matching(st, 0, 100, true, a, 1, &r), 4);
	CHECK(r.id[0] == 1 && r.id[1] == 4 && r.id[2] == 7 && r.id[3] == 10);
	/* Two topics come merged in id order, limit applied to the merge. */
	CHECK_EQ_INT(read_matching(st, 2, 5, true, ac, 2, &r), 5);
	CHECK(r.id[0] == 3 && r.id[1] == 4 && r.id[2] == 6 && r.id[3] == 7 && r.id[4] == 9);
	/* Without private rights, topic b keeps only its public rows (5, 11). */
	const char *const b[] = { "b" };
	CHECK_EQ_INT(read_matching(st, 0, 100, false, b, 1, &r), 2);
	CHECK(r.id[0] == 5 && r.id[1] == 11 && r.pub[0] && r.pub[1]);
	/* No topic: every public row, or every row. */
	CHECK_EQ_INT(read_matching(st, 0, 100, false, NULL, 0, &r), 10);
	CHECK_EQ_INT(read_matching(st, 0, 100, true, NULL, 0, &r), 12);
	CHECK_EQ_INT(read_matching(st, 0, 100, true, none, 1, &r), 0);
	const char *const many[17] = { "a" };
	CHECK_EQ_INT(read_matching(st, 0, 100, true, many, 17, &r), -EINVAL);

	/* Patterns and grants: private rows count only on granted topics. */
	append_one(st, "t", "u/1/x", "d", false, NULL);   /* 13 */
	append_one(st, "t", "u/2/x", "d", false, NULL);   /* 14 */
	append_one(st, "t", "u/1", "d", false, NULL);     /* 15: not under u/1/ */
	append_one(st, "t", "u/10/x", "d", true, NULL);   /* 16: public */
	append_one(st, "t", "u/1/y/z", "d", false, NULL); /* 17 */
	char *const sub1[] = { "u/1/*" }, *const all_u[] = { "u/*" }, *const star[] = { "*" };
	int64_t through;
	struct store_filter g = { .ngrants = 1, .grants = sub1 };
	memset(&r, 0, sizeof(r));
	CHECK_EQ_INT(store_sqlite_read_matching(st, 12, INT64_MAX, 100, &g, collect, &r, &through), 3);
	CHECK(r.id[0] == 13 && r.id[1] == 16 && r.id[2] == 17);
	g = (struct store_filter){ .ntopics = 1, .topics = all_u, .ngrants = 1, .grants = sub1 };
	memset(&r, 0, sizeof(r));
	CHECK_EQ_INT(store_sqlite_read_matching(st, 12, INT64_MAX, 100, &g, collect, &r, &through), 3);
	CHECK(r.id[0] == 13 && r.id[1] == 16 && r.id[2] == 17);
	/* Overlapping patterns give each row once. */
	char *const overlap[] = { "u/*", "u/1/*", "u/1/x" };
	g = (struct store_filter){ .see_private = true, .ntopics = 3, .topics = overlap };
	memset(&r, 0, sizeof(r));
	CHECK_EQ_INT(store_sqlite_read_matching(st, 12, INT64_MAX, 100, &g, collect, &r, &through), 5);
	CHECK(r.id[0] == 13 && r.id[4] == 17);
	/* "*" as a topic is every topic; as a grant, every private row. */
	g = (struct store_filter){ .ntopics = 1, .topics = star, .ngrants = 1, .grants = star };
	memset(&r, 0, sizeof(r));
	CHECK_EQ_INT(store_sqlite_read_matching(st, 12, INT64_MAX, 100, &g, collect, &r, &through), 5);

	/* 30,000 more rows on topic a, all private: a reader of a topic
	 * nobody writes, or of public events only, resuming from 0, must not
	 * read the whole log to learn there is nothing for it. */
	struct store_new_event batch[1000];
	for (int i = 0; i < 1000; i++)
		batch[i] = (struct store_new_event){ "t",  "a",   "some data of a modest size, as events have",
						     43,   false, NULL,
						     NULL, NULL,  NULL,
						     NULL, 0 };
	for (int k = 0; k < 30; k++)
		CHECK_EQ_INT(store_sqlite_append_batch(st, batch, 1000, NULL), 0);
	store_sqlite_checkpoint(st);
	store_sqlite_close(st);
	st = open_ok(path); /* a cold page cache */
	if (!st)
		return;
	long before = file_reads;
	CHECK_EQ_INT(read_matching(st, 0, 128, true, none, 1, &r), 0);
	CHECK_EQ_INT(read_matching(st, 17, 128, false, NULL, 0, &r), 0);
	long reads = file_reads - before;
	before = file_reads;
	CHECK_EQ_INT(store_sqlite_read_range(st, 17, INT64_MAX, 100000, collect_none, NULL), 30000);
	long scan = file_reads - before;
	fprintf(stderr, "file reads: filtered %ld, whole log %ld\n", reads, scan);
	CHECK(reads < 30);
	CHECK(scan > 200);
	store_sqlite_close(st);
}

struct ids {
	int64_t id[4096];
	int n;
	int stop_after;
};

static int collect_ids(void *arg, const struct store_event *ev)
{
	struct ids *r = arg;
	if (r->n < 4096)
		r->id[r->n++] = ev->id;
	return r->stop_after && r->n % r->stop_after == 0;
}

/* A random topic of one to three segments over a small alphabet, so that
 * topics share prefixes (and "a" is a prefix of "ab" without being its
 * parent); now and then the empty topic another program may insert. */
static void random_topic(char *out, size_t len, bool may_be_empty)
{
	static const char *const segs[] = { "a", "b", "ab", "c" };
	if (may_be_empty && random() % 40 == 0) {
		out[0] = '\0';
		return;
	}
	size_t k = 0;
	int depth = 1 + (int)(random() % 3);
	for (int d = 0; d < depth; d++)
		k += (size_t)snprintf(out + k, len - k, "%s%s", d ? "/" : "", segs[random() % 4]);
}

/* A random pattern: mostly exact topics and subtrees ("x/" then "*" over a
 * prefix of one or two segments), sometimes "*". Heap-allocated. */
static char *random_pattern(void)
{
	char buf[64];
	int kind = (int)(random() % 10);
	if (kind == 0)
		return xstrdup("*");
	random_topic(buf, sizeof(buf) - 2, false);
	if (kind < 5)
		return xstrdup(buf);
	/* A subtree of the topic's first one or two segments. */
	char *cut = strchr(buf, '/');
	if (cut && random() % 2)
		cut = strchr(cut + 1, '/');
	if (cut)
		*cut = '\0';
	strcat(buf, "/*");
	return xstrdup(buf);
}

/* n random patterns, reduced as the hub reduces a reader's (topic.h). */
static size_t random_patterns(char **out, size_t n)
{
	for (size_t i = 0; i < n; i++)
		out[i] = random_pattern();
	return topic_patterns_reduce(out, n);
}

static void free_patterns(char **p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(p[i]);
}

/* The SQL against the one rule (visibility.h), over random topics, exact
 * and subtree patterns, grants and public flags: the rows the store
 * passes, read in one go or in many steps cut short by a tiny budget (each
 * step going on from the last one's through), are exactly the ones
 * visibility_passes passes, once each and in id order. */
static void test_read_matching_agrees_with_the_rule(void)
{
	const char *path = db_path("rule.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	enum { ROWS = 3000, POOL = 48 };
	static char pool[POOL][32], tp[ROWS][32];
	static bool pb[ROWS + 1];
	srandom(7);
	for (int i = 0; i < POOL; i++)
		random_topic(pool[i], sizeof(pool[i]), true);
	struct store_new_event batch[ROWS];
	for (int i = 0; i < ROWS; i++) {
		snprintf(tp[i], sizeof(tp[i]), "%s", pool[random() % POOL]);
		pb[i + 1] = random() % 4 == 0;
		batch[i] = (struct store_new_event){ "t", tp[i], "d", 1, pb[i + 1], NULL, NULL, NULL, NULL, NULL, 0 };
	}
	CHECK_EQ_INT(store_sqlite_append_batch(st, batch, ROWS, NULL), 0);
	static struct ids want, got;
	int mismatches = 0, interrupted_reads = 0, subtrees = 0;
	for (int trial = 0; trial < 400; trial++) {
		char *tsel[4], *gsel[3];
		struct store_filter f = { .see_private = random() % 5 == 0, .topics = tsel, .grants = gsel };
		f.ntopics = random_patterns(tsel, (size_t)(random() % 5));
		f.ngrants = random_patterns(gsel, (size_t)(random() % 4));
		for (size_t i = 0; i < f.ntopics; i++)
			subtrees += strchr(tsel[i], '*') != NULL;
		int64_t after = random() % 1000, upto = after + 500 + random() % 3000;
		want.n = 0;
		for (int64_t id = after + 1; id <= upto && id <= ROWS; id++)
			if (visibility_passes(&f, tp[id - 1], strlen(tp[id - 1]), pb[id]) && want.n < 4096)
				want.id[want.n++] = id;
		/* In one read, and in steps under a tiny budget (ops, not
		 * time, so the steps are the same on any machine), some
		 * stopped early by the callback. */
		for (int mode = 0; mode < 2; mode++) {
			got.n = 0;
			got.stop_after = mode ? 7 : 0;
			uint64_t before = store_sqlite_read_interrupts(st);
			store_sqlite_set_read_budget(st, mode ? 0 : 1000000, mode ? 2000 : 20000, mode ? 3000 : 0);
			int64_t pos = after;
			int steps = 0;
			while (pos < upto && steps < 100000) {
				int64_t through = -1;
				int n = store_sqlite_read_matching(st, pos, upto, mode ? 50 : 100000, &f, collect_ids,
								   &got, &through);
				steps++;
				CHECK(n >= 0);
				if (n < 0 || through <= pos) {
					CHECK(through > pos); /* every read gets somewhere */
					break;
				}
				pos = through;
			}
			interrupted_reads += (int)(store_sqlite_read_interrupts(st) - before);
			bool same = got.n == want.n && memcmp(got.id, want.id, (size_t)want.n * sizeof(int64_t)) == 0;
			if (!same && mismatches++ < 3)
				fprintf(stderr, "trial %d mode %d: %d rows, the rule says %d\n", trial, mode, got.n,
					want.n);
		}
		free_patterns(tsel, f.ntopics);
		free_patterns(gsel, f.ngrants);
	}
	store_sqlite_set_read_budget(st, STORE_READ_BUDGET_US, STORE_READ_MIN_OPS, 0);
	CHECK_EQ_INT(mismatches, 0);
	fprintf(stderr, "rule: %d reads cut short by their budget, %d subtree patterns\n", interrupted_reads, subtrees);
	CHECK(interrupted_reads > 100); /* the steps really were cut short */
	CHECK(subtrees > 100);
	store_sqlite_close(st);
}

/* A database of schema version 2 gets the index of public rows by topic
 * and keeps its rows. */
static void test_migration_to_3(void)
{
	const char *path = db_path("v2.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	CHECK_EQ_INT(append_one(st, "t", "a", "x", true, NULL), 0);
	store_sqlite_close(st);
	sqlite3 *db = ext_open(path);
	ext_exec(db, "DROP INDEX events_public_topic_id; PRAGMA user_version=2;");
	ext_close(db);
	st = open_ok(path);
	if (!st)
		return;
	store_sqlite_close(st);
	db = ext_open(path);
	CHECK_EQ_INT(ext_int(db, "PRAGMA user_version"), 6);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE name='events_public_topic_id'"), 1);
	CHECK_EQ_INT(ext_int(db, "SELECT COUNT(*) FROM events"), 1);
	ext_close(db);
}

/* A reader without rights to private rows, whose topics hold nothing but
 * private rows, learns that from an index of public rows: a handful of
 * page reads however many private rows there are, and however often a
 * pattern repeats (the store reads a pattern once). */
static void test_private_rows_cost_a_public_reader_nothing(void)
{
	const char *path = db_path("private.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	static struct store_new_event batch[1000];
	static char names[1000][16];
	for (int i = 0; i < 1000; i++) {
		snprintf(names[i], sizeof(names[i]), "big/%d", i);
		batch[i] = (struct store_new_event){ "t",  names[i], "some data of a modest size, as events have",
						     43,   false,    NULL,
						     NULL, NULL,     NULL,
						     NULL, 0 };
	}
	for (int k = 0; k < 40; k++)
		CHECK_EQ_INT(store_sqlite_append_batch(st, batch, 1000, NULL), 0);
	store_sqlite_checkpoint(st);
	store_sqlite_close(st);
	st = open_ok(path);
	if (!st)
		return;
	char *sixteen[16], *exact16[16];
	for (int i = 0; i < 16; i++) {
		sixteen[i] = "big/*";
		exact16[i] = names[i * 7];
	}
	struct store_filter subtree = { .ntopics = 16, .topics = sixteen },
			    exact = { .ntopics = 16, .topics = exact16 };
	static struct ids got;
	int64_t through = 0;
	long before = file_reads;
	uint64_t cut = store_sqlite_read_interrupts(st);
	got.n = 0;
	CHECK_EQ_INT(store_sqlite_read_matching(st, 0, 40000, 128, &subtree, collect_ids, &got, &through), 0);
	CHECK_EQ_INT(through, 40000);
	CHECK_EQ_INT(store_sqlite_read_matching(st, 0, 40000, 128, &exact, collect_ids, &got, &through), 0);
	CHECK_EQ_INT(through, 40000);
	long reads = file_reads - before;
	fprintf(stderr, "file reads for 16 patterns over 40,000 private rows: %ld\n", reads);
	CHECK(reads < 30);
	CHECK_EQ_INT(store_sqlite_read_interrupts(st) - cut, 0);
	store_sqlite_close(st);
}

/* ---- Idempotency-Key ---- */

static struct store_new_event keyed(const char *data, const char *publisher, const char *key, const char *hash)
{
	return (struct store_new_event){ "t", "k", data, strlen(data), true, publisher, key, hash, NULL, NULL, 0 };
}

static void test_idempotency_keys(void)
{
	const char *path = db_path("idem.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	sqlite3 *db = ext_open(path);
	struct store_appended res[6];

	/* First use stores; the same key and hash again stores nothing and
	 * answers the same id; another hash is a conflict naming it. */
	struct store_new_event a = keyed("a", "token", "k1", "h1");
	CHECK_EQ_INT(store_sqlite_append(st, &a, 1, res), 0);
	CHECK(res[0].outcome == STORE_STORED && res[0].id == 1);
	CHECK_EQ_INT(store_sqlite_append(st, &a, 1, res), 0);
	CHECK(res[0].outcome == STORE_REPLAYED && res[0].id == 1);
	struct store_new_event other = keyed("b", "token", "k1", "h2");
	CHECK_EQ_INT(store_sqlite_append(st, &other, 1, res), 0);
	CHECK(res[0].outcome == STORE_KEY_CONFLICT && res[0].id == 1);
	CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM events"), 1);

	/* Keys are scoped to their publisher. */
	struct store_new_event b = keyed("a", "sub:alice", "k1", "h1");
	CHECK_EQ_INT(store_sqlite_append(st, &b, 1, res), 0);
	CHECK(res[0].outcome == STORE_STORED && res[0].id == 2);

	/* One batch, keyed and unkeyed: the same key twice makes one event,
	 * and the stored rows get consecutive ids. */
	struct store_new_event batch[6] = {
		{ "t", "", "u1", 2, false, NULL, NULL, NULL, NULL, NULL, 0 },
		keyed("x", "token", "k2", "hx"),
		keyed("x", "token", "k2", "hx"),
		keyed("y", "token", "k2", "hy"),
		{ "t", "", "u2", 2, false, NULL, NULL, NULL, NULL, NULL, 0 },
		keyed("a", "token", "k1", "h1"),
	};
	CHECK_EQ_INT(store_sqlite_append(st, batch, 6, res), 0);
	CHECK(res[0].outcome == STORE_STORED && res[0].id == 3);
	CHECK(res[1].outcome == STORE_STORED && res[1].id == 4);
	CHECK(res[2].outcome == STORE_REPLAYED && res[2].id == 4);
	CHECK(res[3].outcome == STORE_KEY_CONFLICT && res[3].id == 4);
	CHECK(res[4].outcome == STORE_STORED && res[4].id == 5);
	CHECK(res[5].outcome == STORE_REPLAYED && res[5].id == 1);
	CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM events"), 5);
	CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM herald_idempotency"), 3);

	/* A batch that fails (another writer holds the lock) remembers no
	 * key: the retry stores it. */
	ext_exec(db, "BEGIN IMMEDIATE");
	struct store_new_event c = keyed("c", "token", "k3", "hc");
	CHECK_EQ_INT(store_sqlite_append(st, &c, 1, res), -EBUSY);
	ext_exec(db, "COMMIT");
	CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM herald_idempotency WHERE key = 'k3'"), 0);
	CHECK_EQ_INT(store_sqlite_append(st, &c, 1, res), 0);
	CHECK(res[0].outcome == STORE_STORED && res[0].id == 6);

	/* Keys hold across a restart (they are in the file). */
	store_sqlite_close(st);
	st = open_ok(path);
	if (!st) {
		sqlite3_close(db);
		return;
	}
	CHECK_EQ_INT(store_sqlite_append(st, &c, 1, res), 0);
	CHECK(res[0].outcome == STORE_REPLAYED && res[0].id == 6);

	/* Past the window a key is forgotten: the same key stores anew, and
	 * then stands for the new event. */
	store_sqlite_set_idempotency_window(st, 60);
	ext_exec(db, "UPDATE herald_idempotency SET created_at = created_at - 61 WHERE key = 'k3'");
	CHECK_EQ_INT(store_sqlite_append(st, &c, 1, res), 0);
	CHECK(res[0].outcome == STORE_STORED && res[0].id == 7);
	CHECK_EQ_INT(store_sqlite_append(st, &c, 1, res), 0);
	CHECK(res[0].outcome == STORE_REPLAYED && res[0].id == 7);

	/* Keyed appends forget a few expired keys as they go. */
	ext_exec(db, "UPDATE herald_idempotency SET created_at = created_at - 1000 WHERE key = 'k2'");
	struct store_new_event d = keyed("d", "token", "k4", "hd");
	CHECK_EQ_INT(store_sqlite_append(st, &d, 1, res), 0);
	CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM herald_idempotency WHERE key = 'k2'"), 0);

	/* Retention removes a key with its event: a retry after that stores
	 * the event again under a new id (within the window). */
	CHECK_EQ_INT(store_sqlite_prune(st, 0, 1, 100), 7); /* keeps id 8 (k4) */
	CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM herald_idempotency"), 1);
	CHECK_EQ_INT(store_sqlite_append(st, &a, 1, res), 0);
	CHECK(res[0].outcome == STORE_STORED && res[0].id == 9);
	CHECK_EQ_INT(store_sqlite_append(st, &d, 1, res), 0);
	CHECK(res[0].outcome == STORE_REPLAYED && res[0].id == 8);

	/* A key whose event another program deleted (before a prune got to
	 * the key) counts as gone too. */
	ext_exec(db, "DELETE FROM events WHERE id = 9");
	CHECK_EQ_INT(store_sqlite_append(st, &a, 1, res), 0);
	CHECK(res[0].outcome == STORE_STORED && res[0].id == 10);

	store_sqlite_close(st);
	sqlite3_close(db);
}

/* A database of schema version 3 gains the keys' table, its events kept. */
static void test_migration_to_4(void)
{
	const char *path = db_path("v3.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	CHECK_EQ_INT(append_one(st, "t", "", "x", true, NULL), 0);
	store_sqlite_close(st);
	sqlite3 *db = ext_open(path);
	ext_exec(db, "DROP TABLE herald_idempotency; PRAGMA user_version=3");
	st = open_ok(path);
	if (st) {
		CHECK_EQ_INT(ext_int(db, "PRAGMA user_version"), 6);
		CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM herald_idempotency"), 0);
		CHECK_EQ_INT(ext_int(db, "SELECT count(*) FROM events"), 1);
		struct store_new_event a = keyed("a", "token", "k", "h");
		struct store_appended res;
		CHECK_EQ_INT(store_sqlite_append(st, &a, 1, &res), 0);
		CHECK(res.outcome == STORE_STORED && res.id == 2);
		store_sqlite_close(st);
	}
	sqlite3_close(db);
}

/* The checkpoint policy leaves the next publish nothing to sync. Once a
 * pause has let it copy the WAL back, the next write starts the WAL from
 * the top, and its new header is synced: that write is the policy's own,
 * in the pause, not the next append's (a sync of the disk inside a
 * publish, 4 ms and more). */
static void test_append_after_a_pause_syncs_nothing(void)
{
	const char *path = db_path("pause.db");
	struct store_sqlite *st = open_ok(path);
	if (!st)
		return;
	for (int round = 0; round < 3; round++) {
		int64_t id = 0;
		CHECK_EQ_INT(append_one(st, "t", "", "before the pause", false, &id), 0);
		/* The pause: the policy until it has nothing left to do, waiting
		 * as long as it asks each time. */
		uint64_t ns = 0;
		int64_t wait = 0;
		for (int i = 0; i < 100 && (wait = store_sqlite_upkeep(st, &ns)) >= 0; i++)
			usleep((useconds_t)wait * 1000 + 1000);
		CHECK(wait < 0);
		CHECK_EQ_INT(store_sqlite_wal_pages(st), 0);
		long syncs = file_syncs;
		CHECK_EQ_INT(append_one(st, "t", "", "after the pause", false, &id), 0);
		CHECK_EQ_INT((int)(file_syncs - syncs), 0);
		struct rows r;
		CHECK_EQ_INT(read_all(st, id - 1, INT64_MAX, 10, &r), 1);
		CHECK(r.n == 1 && r.id[0] == id && strcmp(r.data[0], "after the pause") == 0);
	}
	store_sqlite_close(st);
	/* What the pauses wrote is all in the file: a fresh open reads every row. */
	st = open_ok(path);
	if (st) {
		struct rows r;
		CHECK_EQ_INT(read_all(st, 0, INT64_MAX, 100, &r), 6);
		store_sqlite_close(st);
	}
}

/* The statement a filter makes, before any database sees it: exact topics
 * are index seeks with their topics bound in order, a subtree makes it one
 * scan, "*" reads everything through the range walks, and a buffer too
 * small is refused rather than cut. */
static void test_filter_sql_shapes(void)
{
	char sql[16384];
	struct store_filter_query q;
	char *ab[] = { "a", "b" }, *sub[] = { "a/*" }, *all[] = { "*" }, *grant[] = { "a" };

	struct store_filter f = { .ntopics = 2, .topics = ab };
	CHECK_EQ_INT(store_filter_sql(&f, false, &q, sql, sizeof(sql)), 0);
	CHECK(!q.every && !q.scan && !q.see_private && q.nbinds == 2);
	CHECK(q.nbinds == 2 && strcmp(q.binds[0], "a") == 0 && strcmp(q.binds[1], "b") == 0);
	CHECK(strstr(sql, " UNION ") && strstr(sql, "topic = ?4") && strstr(sql, "topic = ?5"));

	CHECK_EQ_INT(store_filter_sql(&f, true, &q, sql, sizeof(sql)), 0);
	CHECK(q.scan && strstr(sql, "herald_seen(id, (topic = ?4 OR topic = ?5))"));

	f = (struct store_filter){ .ntopics = 1, .topics = sub };
	CHECK_EQ_INT(store_filter_sql(&f, false, &q, sql, sizeof(sql)), 0);
	CHECK(q.scan && q.nbinds == 1 && strstr(sql, "topic GLOB ?4"));

	/* A grant of one topic: its private rows beside every public row. */
	f = (struct store_filter){ .ngrants = 1, .grants = grant };
	CHECK_EQ_INT(store_filter_sql(&f, false, &q, sql, sizeof(sql)), 0);
	CHECK(!q.every && !q.scan && q.nbinds == 2 && q.binds[0] == NULL && strcmp(q.binds[1], "a") == 0);

	f = (struct store_filter){ .ntopics = 1, .topics = all };
	CHECK_EQ_INT(store_filter_sql(&f, false, &q, sql, sizeof(sql)), 0);
	CHECK(q.every && !q.see_private);
	f = (struct store_filter){ .ngrants = 1, .grants = all };
	CHECK_EQ_INT(store_filter_sql(&f, false, &q, sql, sizeof(sql)), 0);
	CHECK(q.every && q.see_private);

	f = (struct store_filter){ .ntopics = 2, .topics = ab };
	CHECK_EQ_INT(store_filter_sql(&f, false, &q, sql, 64), -1);
}

/* store_lease's rows: one holder at a time, taken over once expired or
 * released; the cursor stored only by the holder and only forward. */
static void test_lease(void)
{
	struct store_sqlite *a = open_ok(db_path("lease.db")), *b = open_ok(db_path("lease.db"));
	bool held = false;
	int64_t stored = 0;
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 60000, -1, &held, &stored), 0);
	CHECK(held);
	CHECK_EQ_INT(stored, -1); /* none yet */
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 60000, 0, &held, &stored), 0);
	CHECK_EQ_INT(stored, 0);
	CHECK_EQ_INT(store_sqlite_lease(b, "webhook", 22, 60000, 50, &held, &stored), 0);
	CHECK(!held); /* a's, not expired: b's cursor not stored */
	CHECK_EQ_INT(stored, 0);
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 60000, 7, &held, &stored), 0);
	CHECK(held);
	CHECK_EQ_INT(stored, 7);
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 60000, 5, &held, &stored), 0);
	CHECK_EQ_INT(stored, 7); /* never backwards */
	/* Released with a last cursor: b takes it at once, from there. */
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 0, 9, &held, &stored), 0);
	CHECK(!held);
	CHECK_EQ_INT(stored, 9);
	CHECK_EQ_INT(store_sqlite_lease(b, "webhook", 22, 1, 0, &held, &stored), 0);
	CHECK(held);
	CHECK_EQ_INT(stored, 9);
	/* b's lease of 1 ms runs out: a takes it over. */
	usleep(5000);
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 60000, 0, &held, &stored), 0);
	CHECK(held);
	CHECK_EQ_INT(store_sqlite_lease(b, "webhook", 22, 60000, 100, &held, &stored), 0);
	CHECK(!held);
	CHECK_EQ_INT(stored, 9);
	/* Another name is another lease. */
	CHECK_EQ_INT(store_sqlite_lease(b, "other", 22, 60000, 3, &held, &stored), 0);
	CHECK(held);
	CHECK_EQ_INT(stored, 3);
	/* While another writer holds the file's write lock, a process that
	 * does not hold the lease learns so by reading (each worker asks each
	 * second: none of them queues for the lock); the holder's renewal
	 * writes, so it waits and is -EBUSY past the busy timeout. */
	sqlite3 *w = ext_open(db_path("lease.db"));
	ext_exec(w, "BEGIN IMMEDIATE");
	held = true;
	CHECK_EQ_INT(store_sqlite_lease(b, "webhook", 22, 60000, -1, &held, &stored), 0);
	CHECK(!held);
	CHECK_EQ_INT(stored, 9);
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 60000, 0, &held, &stored), -EBUSY);
	ext_exec(w, "COMMIT");
	sqlite3_close(w);
	CHECK_EQ_INT(store_sqlite_lease(a, "webhook", 11, 60000, 0, &held, &stored), 0);
	CHECK(held);
	store_sqlite_close(a);
	store_sqlite_close(b);
}

int main(void)
{
	use_counting_vfs();
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_open_creates_schema_and_wal();
	test_append_and_read_range();
	test_external_insert_is_noticed();
	test_append_after_a_pause_syncs_nothing();
	test_busy();
	test_prune();
	test_reopen();
	test_newer_schema_refused();
	test_open_failure();
	test_odd_external_rows();
	test_older_layouts();
	test_filter_sql_shapes();
	test_read_matching();
	test_read_matching_agrees_with_the_rule();
	test_migration_to_3();
	test_private_rows_cost_a_public_reader_nothing();
	test_idempotency_keys();
	test_migration_to_4();
	test_lease();
	rm_tree(tmpdir);
	return check_done("store");
}
