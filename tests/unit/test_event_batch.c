/* SPDX-License-Identifier: BSD-2-Clause */
/* test_event_batch.c: herald's own rows on their way to a real SQLite log
 * (src/store/event_batch.c): a pass's rows in one append and a long queue one
 * batch a pass, every field copied, the rows a held write lock refuses
 * kept and stored in order ahead of newer ones once it is free, a batch
 * given up after its time, the oldest rows dropped for room and counted,
 * and the close: what waits gets one attempt, nothing leaks. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "loop_spin.h"
#include "core/config.h"
#include "store/event_batch.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "store/store.h"
#include "common/util.h"

static char tmpdir[] = "/tmp/herald-test-event-batch-XXXXXX";
static int dbs;

struct fixture {
	char db[256];
	struct loop *lp;
	struct store *st;
	struct config cfg;
	struct metrics m;
	struct event_batch *b;
	int stored;        /* calls of the stored hook */
	int64_t max_step;  /* the most rows one append added */
	int64_t last_seen; /* the log's newest id at the last hook */
};

static void on_stored(void *arg)
{
	struct fixture *fx = arg;
	int64_t max = 0;
	CHECK_EQ_INT(store_max_id(fx->st, &max), 0);
	fx->max_step = MAX(fx->max_step, max - fx->last_seen);
	fx->last_seen = max;
	fx->stored++;
}

static void setup(struct fixture *fx, size_t batch_rows, size_t max_bytes, uint64_t give_up_ms)
{
	memset(fx, 0, sizeof(*fx));
	char err[256];
	snprintf(fx->db, sizeof(fx->db), "%s/b%d.db", tmpdir, dbs++);
	fx->lp = loop_new();
	fx->cfg.db = fx->db;
	fx->cfg.busy_timeout_ms = 5;
	fx->st = store_open(&fx->cfg, fx->lp, &fx->m, err, sizeof(err));
	if (!fx->st) {
		fprintf(stderr, "store_open: %s\n", err);
		exit(1);
	}
	struct event_batch_spec spec = { .name = "test",
					 .rows = "test rows",
					 .stored = on_stored,
					 .arg = fx,
					 .batch_rows = batch_rows,
					 .max_bytes = max_bytes,
					 .give_up_ms = give_up_ms };
	fx->b = event_batch_new(fx->lp, fx->st, &fx->m, &spec);
}

static void teardown(struct fixture *fx)
{
	if (fx->b)
		event_batch_close(fx->b);
	store_close(fx->st);
	loop_free(fx->lp);
	fx->cfg.db = NULL;
}

static void spin(struct fixture *fx, uint64_t ms)
{
	loop_spin(fx->lp, ms);
}

/* Run the loop until the queue is empty (at most 5 s). */
static void drain(struct fixture *fx)
{
	for (int i = 0; i < 500 && event_batch_rows(fx->b); i++)
		spin(fx, 10);
	CHECK_EQ_INT(event_batch_rows(fx->b), 0);
}

/* Queue the row named name ("a", "b", ...): its data is the name. */
static void add(struct fixture *fx, const char *name)
{
	struct store_new_event ev = {
		.type = "test.row", .topic = "$test/t", .data = name, .data_len = strlen(name), .public = false
	};
	event_batch_add(fx->b, &ev);
}

static void add_abc(struct fixture *fx)
{
	add(fx, "a");
	add(fx, "b");
	add(fx, "c");
}

/* The rows of the log, their data joined by ',' into out. */
struct seen {
	char text[4096];
	size_t n;
	struct store_event last; /* pointers dead after the read; only the scalars are used */
	char last_topic[64], last_type[64], last_mercure[128];
};

static int collect(void *arg, const struct store_event *ev)
{
	struct seen *s = arg;
	size_t len = strlen(s->text);
	snprintf(s->text + len, sizeof(s->text) - len, "%s%.*s", s->n ? "," : "", (int)ev->data_len, ev->data);
	s->n++;
	s->last = *ev;
	snprintf(s->last_topic, sizeof(s->last_topic), "%s", ev->topic);
	snprintf(s->last_type, sizeof(s->last_type), "%s", ev->type);
	snprintf(s->last_mercure, sizeof(s->last_mercure), "%.*s", (int)ev->mercure_len,
		 ev->mercure ? ev->mercure : "");
	return 0;
}

static const char *stored(struct fixture *fx, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	CHECK(store_read_range(fx->st, 0, INT64_MAX, 1000, collect, s) >= 0);
	return s->text;
}

/* Another program holding the write lock (BEGIN IMMEDIATE). */
static sqlite3 *hold_lock(struct fixture *fx)
{
	sqlite3 *db = NULL;
	CHECK_EQ_INT(sqlite3_open_v2(fx->db, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	CHECK_EQ_INT(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
	return db;
}

static void let_go(sqlite3 *db)
{
	CHECK_EQ_INT(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

struct found {
	int rc;
	int64_t id;
};

static void found_row(void *arg, int rc, const struct store_event *ev)
{
	struct found *f = arg;
	f->rc = rc;
	f->id = ev ? ev->id : 0;
}

static void test_a_pass_is_one_append_and_every_field_is_copied(void)
{
	struct fixture fx;
	setup(&fx, 0, 0, 0);
	add(&fx, "a");
	add(&fx, "b");
	char data[] = "c", id[] = "urn:uuid:1", block[] = "urn:uuid:1\n\nhttps://example.com/x";
	struct store_new_event ev = { .type = "mercure",
				      .topic = "$mercure/x",
				      .data = data,
				      .data_len = 1,
				      .public = true,
				      .mercure_id = id,
				      .mercure = block,
				      .mercure_len = strlen(block) };
	event_batch_add(fx.b, &ev);
	/* The caller's strings are its own: changed after the add, the row
	 * stays as it was given. */
	data[0] = 'X';
	block[0] = 'X';
	CHECK_EQ_INT(event_batch_rows(fx.b), 3);
	CHECK(event_batch_bytes(fx.b) > 0);
	drain(&fx);
	CHECK_EQ_INT(fx.stored, 1); /* one append for the pass's three rows */
	CHECK_EQ_INT(event_batch_bytes(fx.b), 0);
	struct seen s;
	CHECK(strcmp(stored(&fx, &s), "a,b,c") == 0);
	CHECK(strcmp(s.last_type, "mercure") == 0 && strcmp(s.last_topic, "$mercure/x") == 0);
	CHECK(s.last.public);
	CHECK(strcmp(s.last_mercure, "urn:uuid:1\n\nhttps://example.com/x") == 0);
	struct found f = { 0, 0 };
	store_mercure_find(fx.st, "urn:uuid:1", found_row, &f);
	CHECK_EQ_INT(f.rc, 1); /* answered before the call returned: SQLite */
	CHECK_EQ_INT(f.id, 3);
	f.rc = -1;
	store_mercure_find(fx.st, "urn:uuid:none", found_row, &f);
	CHECK_EQ_INT(f.rc, 0);
	teardown(&fx);
}

static void test_a_long_queue_goes_one_batch_a_pass(void)
{
	struct fixture fx;
	setup(&fx, 4, 0, 0);
	char name[16];
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "%d", i);
		add(&fx, name);
	}
	drain(&fx);
	CHECK_EQ_INT(fx.stored, 3); /* 4 + 4 + 2 */
	CHECK_EQ_INT(fx.max_step, 4);
	struct seen s;
	CHECK(strcmp(stored(&fx, &s), "0,1,2,3,4,5,6,7,8,9") == 0);
	teardown(&fx);
}

static void test_a_held_lock_delays_and_keeps_the_order(void)
{
	struct fixture fx;
	setup(&fx, 2, 0, 0);
	sqlite3 *other = hold_lock(&fx);
	add_abc(&fx);
	spin(&fx, 40); /* several tries, each -EBUSY */
	CHECK_EQ_INT(fx.stored, 0);
	CHECK_EQ_INT(event_batch_rows(fx.b), 3);
	add(&fx, "d"); /* newer: after the ones being tried again */
	spin(&fx, 20);
	CHECK_EQ_INT(event_batch_rows(fx.b), 4);
	let_go(other);
	drain(&fx);
	struct seen s;
	CHECK(strcmp(stored(&fx, &s), "a,b,c,d") == 0);
	CHECK_EQ_INT(fx.stored, 2);
	CHECK_EQ_INT(fx.m.own_events_dropped, 0);
	teardown(&fx);
}

static void test_a_batch_is_given_up_after_its_time(void)
{
	struct fixture fx;
	setup(&fx, 2, 0, 30);
	sqlite3 *other = hold_lock(&fx);
	add_abc(&fx);
	/* Each batch of two is tried for 30 ms, then given up: both batches
	 * within 300 ms. */
	for (int i = 0; i < 30 && event_batch_rows(fx.b); i++)
		spin(&fx, 10);
	CHECK_EQ_INT(event_batch_rows(fx.b), 0);
	CHECK_EQ_INT(fx.m.own_events_dropped, 3);
	let_go(other);
	add(&fx, "d");
	drain(&fx);
	struct seen s;
	CHECK(strcmp(stored(&fx, &s), "d") == 0);
	teardown(&fx);
}

static void test_the_oldest_are_dropped_for_room(void)
{
	struct fixture fx;
	setup(&fx, 0, 0, 0);
	add(&fx, "probe");
	size_t row = event_batch_bytes(fx.b); /* one row of a name of 5 */
	drain(&fx);
	event_batch_close(fx.b);
	struct event_batch_spec spec = {
		.name = "test", .rows = "test rows", .stored = on_stored, .arg = &fx, .max_bytes = 3 * row
	};
	fx.b = event_batch_new(fx.lp, fx.st, &fx.m, &spec);
	sqlite3 *other = hold_lock(&fx);
	const char *names[] = { "row_1", "row_2", "row_3", "row_4", "row_5" };
	for (size_t i = 0; i < 5; i++) {
		add(&fx, names[i]);
		spin(&fx, 6); /* tried and refused between the adds */
	}
	CHECK_EQ_INT(event_batch_rows(fx.b), 3);
	CHECK(event_batch_bytes(fx.b) <= 3 * row);
	CHECK_EQ_INT(fx.m.own_events_dropped, 2);
	let_go(other);
	drain(&fx);
	struct seen s;
	CHECK(strcmp(stored(&fx, &s), "probe,row_3,row_4,row_5") == 0);
	/* A row larger than the whole room is dropped itself. */
	char big[1024];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	add(&fx, big);
	CHECK_EQ_INT(event_batch_rows(fx.b), 0);
	CHECK_EQ_INT(fx.m.own_events_dropped, 3);
	teardown(&fx);
}

static void test_close_gives_what_waits_one_attempt(void)
{
	struct fixture fx;
	setup(&fx, 2, 0, 0);
	add_abc(&fx);
	/* Never flushed by the loop: the close appends all three (two
	 * batches), without the hook. */
	event_batch_close(fx.b);
	fx.b = NULL;
	CHECK_EQ_INT(fx.stored, 0);
	struct seen s;
	CHECK(strcmp(stored(&fx, &s), "a,b,c") == 0);
	teardown(&fx);

	/* The log refusing: dropped, counted, freed (ASan finds a leak). */
	setup(&fx, 2, 0, 0);
	sqlite3 *other = hold_lock(&fx);
	add_abc(&fx);
	spin(&fx, 20);
	event_batch_close(fx.b);
	fx.b = NULL;
	CHECK_EQ_INT(fx.m.own_events_dropped, 3);
	let_go(other);
	CHECK(strcmp(stored(&fx, &s), "") == 0);
	teardown(&fx);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	test_a_pass_is_one_append_and_every_field_is_copied();
	test_a_long_queue_goes_one_batch_a_pass();
	test_a_held_lock_delays_and_keeps_the_order();
	test_a_batch_is_given_up_after_its_time();
	test_the_oldest_are_dropped_for_room();
	test_close_gives_what_waits_one_attempt();
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	CHECK_EQ_INT(system(cmd), 0);
	return check_done("test_event_batch");
}
