/* SPDX-License-Identifier: BSD-2-Clause */
/* store_sqlite_schema.c: the SQLite backend's schema and its migrations
 * (PRAGMA user_version names the version; every step up runs in one
 * transaction), an older events table adopted with its ids kept, and the
 * two small SQL helpers the backend's files share. Nothing here keeps
 * state: each function works on the connection it is given. */
#include "store/store_sqlite_private.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"

#define EVENTS_COLUMNS                          \
	"id INTEGER PRIMARY KEY AUTOINCREMENT," \
	"type TEXT NOT NULL DEFAULT 'message'," \
	"topic TEXT NOT NULL DEFAULT '',"       \
	"data TEXT NOT NULL DEFAULT '',"        \
	"public INTEGER NOT NULL DEFAULT 0,"    \
	"created_at INTEGER NOT NULL DEFAULT (CAST(strftime('%s','now') AS INTEGER))"

/* One schema step: run fn (if any), then sql (if any), inside the migration
 * transaction. Adding version N is appending { N, "...", fn } below. */
struct migration {
	int version;
	const char *sql;
	int (*fn)(sqlite3 *db, char *err, size_t errlen);
};

static int migrate_adopt_events(sqlite3 *db, char *err, size_t errlen);

static const struct migration migrations[] = {
	{ 1,
	  "CREATE TABLE IF NOT EXISTS events(" EVENTS_COLUMNS ");"
	  "CREATE INDEX IF NOT EXISTS events_created_at ON events(created_at);"
	  "CREATE TABLE IF NOT EXISTS herald_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);",
	  migrate_adopt_events },
	/* Catch-up reads by topic and by visibility walk an index instead of
	 * the whole log; the trigger counts rows inserted with an id below
	 * the newest one (live readers never see those; see store_sqlite_changed). */
	{ 2,
	  "CREATE INDEX IF NOT EXISTS events_topic_id ON events(topic, id);"
	  "CREATE INDEX IF NOT EXISTS events_public_id ON events(id) WHERE CAST(public AS INTEGER) <> 0;"
	  "CREATE TRIGGER IF NOT EXISTS herald_late_insert AFTER INSERT ON events"
	  " WHEN EXISTS (SELECT 1 FROM events WHERE id > NEW.id) BEGIN"
	  " INSERT OR REPLACE INTO herald_meta(key, value) VALUES ('late_inserts',"
	  " COALESCE((SELECT value FROM herald_meta WHERE key = 'late_inserts'), 0) + 1); END;",
	  NULL },
	/* A reader without rights to private rows reads public rows by topic
	 * through an index that holds nothing else: a log full of private
	 * rows under its topics costs it nothing. */
	{ 3,
	  "CREATE INDEX IF NOT EXISTS events_public_topic_id ON events(topic, id) WHERE CAST(public AS INTEGER) <> 0;",
	  NULL },
	/* Idempotency-Key: each publisher's keys with the body's hash and the
	 * event stored, forgotten by age (the window) and with their event
	 * (retention), each through its index. */
	{ 4,
	  "CREATE TABLE IF NOT EXISTS herald_idempotency(publisher TEXT NOT NULL, key TEXT NOT NULL,"
	  " hash TEXT NOT NULL, event_id INTEGER NOT NULL, created_at INTEGER NOT NULL,"
	  " PRIMARY KEY(publisher, key)) WITHOUT ROWID;"
	  "CREATE INDEX IF NOT EXISTS herald_idempotency_created_at ON herald_idempotency(created_at);"
	  "CREATE INDEX IF NOT EXISTS herald_idempotency_event_id ON herald_idempotency(event_id);",
	  NULL },
	/* Mercure updates: the publisher's id (a reused one names its
	 * earliest event, so an id resolves to one event) and the block read
	 * back with the row, removed with their event by whoever deletes it. */
	{ 5,
	  "CREATE TABLE IF NOT EXISTS herald_mercure(event_id INTEGER PRIMARY KEY, uid TEXT NOT NULL,"
	  " block TEXT NOT NULL);"
	  "CREATE INDEX IF NOT EXISTS herald_mercure_uid ON herald_mercure(uid, event_id);"
	  "CREATE TRIGGER IF NOT EXISTS herald_mercure_gone AFTER DELETE ON events BEGIN"
	  " DELETE FROM herald_mercure WHERE event_id = OLD.id; END;",
	  NULL },
	/* The log's identity: 48 random bits (SQLite's generator, seeded from
	 * the system's), part of the Mercure id of every row that has no id
	 * of its publisher's (mercure_update.h), so ids of two logs differ. */
	{ 6, "INSERT OR IGNORE INTO herald_meta(key, value) VALUES ('log_identity', random() & 281474976710655);",
	  NULL },
};

int store_sqlite_exec(sqlite3 *db, const char *sql, char *err, size_t errlen, const char *what)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", what, msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

/* Run a one-row, one-integer query; *out keeps its value when no row comes.
 * Returns the SQLite result code (SQLITE_OK on success). */
int store_sqlite_query_int(sqlite3 *db, const char *sql, int64_t *out)
{
	sqlite3_stmt *s;
	int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK)
		return rc;
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_type(s, 0) != SQLITE_NULL)
			*out = sqlite3_column_int64(s, 0);
		rc = SQLITE_OK;
	} else if (rc == SQLITE_DONE) {
		rc = SQLITE_OK;
	}
	sqlite3_finalize(s);
	return rc;
}

/* An events table made before herald managed the file (by hand, or by an
 * older program) may lack columns, NOT NULL defaults or AUTOINCREMENT. One
 * with every column and AUTOINCREMENT is kept as it is; anything else is
 * rebuilt into the current layout with its ids and rows preserved, so
 * readers' resume points stay valid. */
static int migrate_adopt_events(sqlite3 *db, char *err, size_t errlen)
{
	static const char *const wanted[] = { "id", "type", "topic", "data", "public", "created_at" };
	bool have[ARRAY_LEN(wanted)] = { false };
	bool id_is_key = false;
	int64_t exists = 0, autoinc = 0, has_seq_table = 0, old_seq = 0;
	sqlite3_stmt *s;
	int rc;

	rc = store_sqlite_query_int(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='events'",
				    &exists);
	if (rc != SQLITE_OK)
		goto sql_fail;
	if (!exists)
		return 0;
	rc = store_sqlite_query_int(db,
				    "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='events'"
				    " AND sql LIKE '%autoincrement%'",
				    &autoinc);
	if (rc != SQLITE_OK)
		goto sql_fail;

	rc = sqlite3_prepare_v2(db, "SELECT name, type, pk FROM pragma_table_info('events')", -1, &s, NULL);
	if (rc != SQLITE_OK)
		goto sql_fail;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(s, 0);
		const char *type = (const char *)sqlite3_column_text(s, 1);
		for (size_t i = 0; name && i < ARRAY_LEN(wanted); i++)
			if (strcasecmp(name, wanted[i]) == 0)
				have[i] = true;
		if (name && strcasecmp(name, "id") == 0 && type && strcasecmp(type, "INTEGER") == 0 &&
		    sqlite3_column_int(s, 2) == 1)
			id_is_key = true;
	}
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE)
		goto sql_fail;

	bool complete = autoinc && id_is_key;
	for (size_t i = 0; i < ARRAY_LEN(wanted); i++)
		complete = complete && have[i];
	if (complete)
		return 0;

	log_notice("store: rebuilding an older events table into the current layout (ids kept)");
	rc = store_sqlite_query_int(
		db, "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='sqlite_sequence'", &has_seq_table);
	if (rc != SQLITE_OK)
		goto sql_fail;
	if (has_seq_table) {
		rc = store_sqlite_query_int(db, "SELECT seq FROM sqlite_sequence WHERE name='events'", &old_seq);
		if (rc != SQLITE_OK)
			goto sql_fail;
	}

	/* Each missing or NULL value becomes the column's default. A text
	 * created_at (a datetime string) is converted to Unix seconds so age
	 * retention can compare it. */
	char sql[2048];
	snprintf(sql, sizeof(sql),
		 "CREATE TABLE herald_events_new(%s);"
		 "INSERT INTO herald_events_new(id, type, topic, data, public, created_at)"
		 " SELECT %s, %s, %s, %s, %s, COALESCE(%s, CAST(strftime('%%s','now') AS INTEGER))"
		 " FROM events ORDER BY 1;"
		 "DROP TABLE events;"
		 "ALTER TABLE herald_events_new RENAME TO events;",
		 EVENTS_COLUMNS, have[0] ? "id" : "rowid", have[1] ? "COALESCE(type, 'message')" : "'message'",
		 have[2] ? "COALESCE(topic, '')" : "''", have[3] ? "COALESCE(data, '')" : "''",
		 have[4] ? "COALESCE(public, 0)" : "0",
		 have[5] ? "CASE typeof(created_at) WHEN 'integer' THEN created_at"
			   " WHEN 'real' THEN CAST(created_at AS INTEGER)"
			   " WHEN 'text' THEN CAST(strftime('%s', created_at) AS INTEGER) END"
			 : "NULL");
	/* Legacy rename: views and triggers elsewhere that name "events" keep
	 * naming it, instead of the rename refusing while events is missing. */
	if (store_sqlite_exec(db, "PRAGMA legacy_alter_table=ON", err, errlen, "rebuilding events table") < 0)
		return -1;
	int r = store_sqlite_exec(db, sql, err, errlen, "rebuilding events table");
	store_sqlite_exec(db, "PRAGMA legacy_alter_table=OFF", err, errlen, "rebuilding events table");
	if (r < 0)
		return -1;
	if (old_seq > 0) {
		snprintf(sql, sizeof(sql),
			 "UPDATE sqlite_sequence SET seq = MAX(seq, %lld) WHERE name='events';"
			 "INSERT INTO sqlite_sequence(name, seq) SELECT 'events', %lld"
			 " WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name='events');",
			 (long long)old_seq, (long long)old_seq);
		if (store_sqlite_exec(db, sql, err, errlen, "keeping the events id sequence") < 0)
			return -1;
	}
	return 0;

sql_fail:
	snprintf(err, errlen, "inspecting the events table: %s", sqlite3_errmsg(db));
	return -1;
}

/* Read PRAGMA user_version into *version; refuse a schema newer than this
 * build knows. Returns 0, or -1 with a reason in err. */
int store_sqlite_schema_version(sqlite3 *db, const char *path, int64_t *version, char *err, size_t errlen)
{
	if (store_sqlite_query_int(db, "PRAGMA user_version", version) != SQLITE_OK) {
		snprintf(err, errlen, "reading the schema version of %s: %s", path, sqlite3_errmsg(db));
		return -1;
	}
	if (*version > STORE_SCHEMA_VERSION) {
		snprintf(err, errlen,
			 "database %s has schema version %lld, newer than this herald knows (%d); refusing to open it",
			 path, (long long)*version, STORE_SCHEMA_VERSION);
		return -1;
	}
	return 0;
}

/* Bring the schema from the stored user_version up to the current one in a
 * single transaction, so a crash or a concurrent herald never sees half of
 * it. Returns 0 or -1 with err set. */
int store_sqlite_migrate(sqlite3 *db, const char *path, char *err, size_t errlen)
{
	int64_t version = 0;
	char sql[64];

	if (store_sqlite_exec(db, "BEGIN IMMEDIATE", err, errlen, "starting schema migration") < 0)
		return -1;
	/* Read again under the write lock: another process may have migrated
	 * since we looked. */
	if (store_sqlite_schema_version(db, path, &version, err, errlen) < 0)
		goto fail;
	for (size_t i = 0; i < ARRAY_LEN(migrations); i++) {
		const struct migration *m = &migrations[i];
		if (m->version <= version)
			continue;
		char what[64];
		snprintf(what, sizeof(what), "migrating schema to version %d", m->version);
		if (m->fn && m->fn(db, err, errlen) < 0)
			goto fail;
		if (m->sql && store_sqlite_exec(db, m->sql, err, errlen, what) < 0)
			goto fail;
		if (version > 0)
			log_notice("store: %s: schema migrated to version %d", path, m->version);
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version=%d", STORE_SCHEMA_VERSION);
	if (version != STORE_SCHEMA_VERSION && store_sqlite_exec(db, sql, err, errlen, "setting schema version") < 0)
		goto fail;
	if (store_sqlite_exec(db, "COMMIT", err, errlen, "committing schema migration") < 0)
		goto fail;
	return 0;

fail:
	if (!sqlite3_get_autocommit(db))
		sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}
