/* SPDX-License-Identifier: BSD-2-Clause */
/* test_presence.c: the presence table (counts per key and column, the
 * join announced once, a leave only after the grace, a reconnect within
 * it neither, a dead worker's column dropped, in a real shared mapping
 * with a second process) and the registry above it (a stream counted for
 * every topic its patterns match, once; subjects distinct and sorted; the
 * list of topics with the most readers; the scope of a token). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "presence/presence.h"
#include "core/presence_table.h"

static void test_table_counts(void)
{
	struct presence_table *t = presence_table_map(2, 1024, PRESENCE_KEY_MAX, false);
	CHECK(t != NULL);
	CHECK_EQ_INT(presence_table_add(t, 0, "room/1", false), 0);
	CHECK_EQ_INT(presence_table_add(t, 1, "room/1", false), 0);
	CHECK_EQ_INT(presence_table_add(t, 1, "room/1", false), 0);
	CHECK_EQ_INT(presence_table_total(t, "room/1"), 3);
	CHECK_EQ_INT(presence_table_total(t, "room/2"), 0);
	presence_table_del(t, 1, "room/1", 100);
	CHECK_EQ_INT(presence_table_total(t, "room/1"), 2);
	/* A column that holds nothing under a key takes nothing away. */
	presence_table_del(t, 0, "room/1", 100);
	presence_table_del(t, 0, "room/1", 100);
	CHECK_EQ_INT(presence_table_total(t, "room/1"), 1);
	presence_table_drop_column(t, 1, 200);
	CHECK_EQ_INT(presence_table_total(t, "room/1"), 0);
	CHECK_EQ_INT(presence_table_used(t), 0);
	/* Many keys, each out of the table again once its total is 0. */
	char key[32];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 900; i++) {
			snprintf(key, sizeof(key), "k%d/%d", round, i);
			CHECK(presence_table_add(t, 0, key, false) >= 0);
		}
		CHECK_EQ_INT(presence_table_used(t), 900);
		for (int i = 0; i < 900; i++) {
			snprintf(key, sizeof(key), "k%d/%d", round, i);
			presence_table_del(t, 0, key, 1);
		}
	}
	CHECK_EQ_INT(presence_table_used(t), 0);
	presence_table_unmap(t);
}

static uint32_t column_sum;
static int column_keys;

static void on_column(void *arg, const char *key, uint32_t n)
{
	(void)arg;
	(void)key;
	column_sum += n;
	column_keys++;
}

/* A count checked against a limit and made in one step (the group's
 * per-address counts): refused at the limit whichever column asks, never
 * past it, refused when the table is full; keys of a small room, a longer
 * one counted as its cut. */
static void test_table_add_below(void)
{
	struct presence_table *t = presence_table_map(2, 1024, 16, false);
	CHECK(presence_table_map(2, 1024, 1, false) == NULL);
	CHECK(presence_table_map(2, 1024, PRESENCE_KEY_MAX + 1, false) == NULL);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "10.0.0.1", 2), 0);
	CHECK_EQ_INT(presence_table_add_below(t, 1, "10.0.0.1", 2), 0);
	CHECK_EQ_INT(presence_table_add_below(t, 1, "10.0.0.1", 2), 1);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "10.0.0.1", 2), 1);
	CHECK_EQ_INT(presence_table_total(t, "10.0.0.1"), 2);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "10.0.0.1", 0), 0); /* 0: no limit */
	CHECK_EQ_INT(presence_table_total(t, "10.0.0.1"), 3);
	presence_table_drop_column(t, 0, 0);
	CHECK_EQ_INT(presence_table_add_below(t, 1, "10.0.0.1", 2), 0);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "10.0.0.1", 2), 1);
	/* 15 bytes of key: a longer key is the same key as its first 15. */
	CHECK_EQ_INT(presence_table_add_below(t, 0, "2001:db8:0:1::/64", 3), 0);
	CHECK_EQ_INT(presence_table_add_below(t, 1, "2001:db8:0:1::/", 3), 0);
	CHECK_EQ_INT(presence_table_total(t, "2001:db8:0:1::/48"), 2);
	CHECK_EQ_INT(presence_table_total(t, "2001:db8:0:1::"), 0);
	CHECK_EQ_INT(presence_table_used(t), 2);
	/* Full: nothing counted, and the keys in it still are. */
	char key[32];
	int wrong = 0;
	for (int i = 0; i < 1022; i++) {
		snprintf(key, sizeof(key), "192.0.%d.%d", i / 256, i % 256);
		wrong += presence_table_add_below(t, (unsigned)i % 2, key, 1) != 0;
	}
	CHECK_EQ_INT(wrong, 0);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "198.51.100.1", 1), -1);
	CHECK_EQ_INT(presence_table_total(t, "198.51.100.1"), 0);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "192.0.3.253", 1), 1);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "192.0.3.253", 2), 0);
	/* Dropping both columns empties it, and it takes new keys again. */
	presence_table_drop_column(t, 0, 0);
	presence_table_drop_column(t, 1, 0);
	CHECK_EQ_INT(presence_table_used(t), 0);
	CHECK_EQ_INT(presence_table_add_below(t, 0, "198.51.100.1", 1), 0);
	presence_table_unmap(t);
}

/* A copy of counts made elsewhere (a cluster's, summed), and one column's
 * share (what a node writes to Redis). */
static void test_table_put_and_columns(void)
{
	struct presence_table *t = presence_table_map(2, 1024, PRESENCE_KEY_MAX, false);
	CHECK_EQ_INT(presence_table_put(t, 0, "x", 40), 0);
	CHECK_EQ_INT(presence_table_put(t, 1, "x", 2), 0);
	CHECK_EQ_INT(presence_table_put(t, 1, "y", 5), 0);
	CHECK_EQ_INT(presence_table_total(t, "x"), 42);
	column_sum = 0;
	column_keys = 0;
	presence_table_each_column(t, 1, on_column, NULL);
	CHECK_EQ_INT(column_sum, 7);
	CHECK_EQ_INT(column_keys, 2);
	column_sum = 0;
	column_keys = 0;
	presence_table_each_column(t, 0, on_column, NULL);
	CHECK_EQ_INT(column_sum, 40);
	CHECK_EQ_INT(column_keys, 1);
	/* A put never announces: nothing is pending when it falls to 0. */
	presence_table_drop_column(t, 0, 1);
	presence_table_drop_column(t, 1, 1);
	CHECK(!presence_table_leaves_pending(t));
	CHECK_EQ_INT(presence_table_used(t), 0);
	presence_table_unmap(t);
}

static int taken;
static char taken_key[PRESENCE_KEY_MAX];

static void on_leave(void *arg, const char *key)
{
	(void)arg;
	taken++;
	snprintf(taken_key, sizeof(taken_key), "%s", key);
}

static void test_table_debounce(void)
{
	struct presence_table *t = presence_table_map(1, 1024, PRESENCE_KEY_MAX, false);
	const char *k = "room/1\x1fuser-42";
	CHECK_EQ_INT(presence_table_add(t, 0, k, true), 1); /* the join */
	CHECK_EQ_INT(presence_table_add(t, 0, k, true), 0); /* a second stream: no join */
	presence_table_del(t, 0, k, 1000);
	CHECK(!presence_table_leaves_pending(t));
	presence_table_del(t, 0, k, 1000); /* the last: a leave pending */
	CHECK(presence_table_leaves_pending(t));
	CHECK_EQ_INT(presence_table_take_leaves(t, 5999, 5000, on_leave, NULL), 0); /* within the grace */
	/* Back within the grace: neither a join nor a leave. */
	CHECK_EQ_INT(presence_table_add(t, 0, k, true), 0);
	CHECK(!presence_table_leaves_pending(t));
	CHECK_EQ_INT(presence_table_take_leaves(t, 100000, 5000, on_leave, NULL), 0);
	presence_table_del(t, 0, k, 20000);
	CHECK_EQ_INT(presence_table_take_leaves(t, 24999, 5000, on_leave, NULL), 0);
	CHECK_EQ_INT(presence_table_take_leaves(t, 25000, 5000, on_leave, NULL), 1);
	CHECK(strcmp(taken_key, k) == 0);
	CHECK(!presence_table_leaves_pending(t));
	CHECK_EQ_INT(presence_table_take_leaves(t, 90000, 5000, on_leave, NULL), 0); /* once */
	/* After the leave, a stream is a join again. */
	CHECK_EQ_INT(presence_table_add(t, 0, k, true), 1);
	presence_table_del(t, 0, k, 1);
	presence_table_take_leaves(t, 1000000, 5000, on_leave, NULL);
	/* Without announcing, nothing is ever pending. */
	CHECK_EQ_INT(presence_table_add(t, 0,
					"a\x1f"
					"b",
					false),
		     0);
	presence_table_del(t, 0,
			   "a\x1f"
			   "b",
			   1);
	CHECK(!presence_table_leaves_pending(t));
	presence_table_unmap(t);
}

/* Keys come and go far beyond the table's room (anonymous streams on ever
 * new patterns, subjects that join and leave, a worker that dies): a
 * lookup of a key that is not there still looks at a few slots of the
 * index, not at every key the table ever held. */
static void test_table_churn_stays_cheap(void)
{
	enum { LIVE = 800, KEYS = 60000, ASKED = 1000 };
	struct presence_table *t = presence_table_map(2, 1024, PRESENCE_KEY_MAX, false);
	char key[48];
	int refused = 0, wrong = 0;
	for (int i = 0; i < KEYS; i++) {
		/* One key in ten a subject that joins, leaves and is taken out. */
		bool subject = i % 10 == 0;
		snprintf(key, sizeof(key), subject ? "churn/%d\x1fu%d" : "churn/%d", i, i);
		refused += presence_table_add(t, (unsigned)i % 2, key, subject) < 0;
		if (i >= LIVE) {
			int j = i - LIVE;
			snprintf(key, sizeof(key), j % 10 == 0 ? "churn/%d\x1fu%d" : "churn/%d", j, j);
			presence_table_del(t, (unsigned)j % 2, key, (uint64_t)i);
		}
		if (i % 1000 == 999)
			presence_table_take_leaves(t, (uint64_t)i, 10, on_leave, NULL);
	}
	CHECK_EQ_INT(refused, 0);
	/* Every live key, and the few subjects whose leave is not due yet. */
	CHECK(presence_table_used(t) >= LIVE && presence_table_used(t) <= LIVE + 10);
	/* The live keys are all there, counted once. */
	for (int i = KEYS - LIVE; i < KEYS; i++) {
		snprintf(key, sizeof(key), i % 10 == 0 ? "churn/%d\x1fu%d" : "churn/%d", i, i);
		wrong += presence_table_total(t, key) != 1;
	}
	CHECK_EQ_INT(wrong, 0);
	uint64_t start = presence_table_probes(t), worst = 0;
	for (int i = 0; i < ASKED; i++) {
		snprintf(key, sizeof(key), "absent/%d", i);
		uint64_t before = presence_table_probes(t);
		wrong += presence_table_total(t, key) != 0;
		uint64_t n = presence_table_probes(t) - before;
		worst = n > worst ? n : worst;
	}
	CHECK_EQ_INT(wrong, 0);
	uint64_t mean_x10 = (presence_table_probes(t) - start) * 10 / ASKED;
	/* Linear probing at under half load looks at 2.5 slots on average for a
	 * key that is not there; an index never emptied, at every slot. */
	if (mean_x10 > 50 || worst > 64)
		fprintf(stderr, "absent-key lookups: %.1f slots on average, %llu at worst\n", (double)mean_x10 / 10,
			(unsigned long long)worst);
	CHECK(mean_x10 <= 50);
	CHECK(worst <= 64);
	/* A worker's death empties its column; the other keeps its half. */
	presence_table_drop_column(t, 1, KEYS);
	presence_table_take_leaves(t, 10 * KEYS, 10, on_leave, NULL);
	CHECK_EQ_INT(presence_table_used(t), LIVE / 2);
	presence_table_drop_column(t, 0, KEYS);
	presence_table_take_leaves(t, 10 * KEYS, 10, on_leave, NULL);
	CHECK_EQ_INT(presence_table_used(t), 0);
	presence_table_unmap(t);
}

/* A second process (a worker) counts in column 1 of a shared table and
 * dies; dropping its column takes its streams out, and its subject, last
 * seen there, is due to leave after the grace. */
static void test_table_shared_worker_dies(void)
{
	struct presence_table *t = presence_table_map(2, 1024, PRESENCE_KEY_MAX, true);
	CHECK_EQ_INT(presence_table_add(t, 0, "news", false), 0);
	int to_child[2], to_parent[2];
	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		for (int i = 0; i < 5; i++)
			presence_table_add(t, 1, "news", false);
		int r = presence_table_add(t, 1, "news\x1fuser-7", true);
		if (write(to_parent[1], r == 1 ? "j" : "x", 1) != 1 || read(to_child[0], &c, 1) != 1)
			_exit(2);
		_exit(0);
	}
	char c = 0;
	CHECK(read(to_parent[0], &c, 1) == 1);
	CHECK(c == 'j');
	CHECK_EQ_INT(presence_table_total(t, "news"), 6);
	CHECK(kill(pid, SIGKILL) == 0);
	int st;
	waitpid(pid, &st, 0);
	presence_table_drop_column(t, 1, 50000);
	CHECK_EQ_INT(presence_table_total(t, "news"), 1);
	CHECK_EQ_INT(presence_table_total(t, "news\x1fuser-7"), 0);
	taken = 0;
	CHECK_EQ_INT(presence_table_take_leaves(t, 54999, 5000, on_leave, NULL), 0);
	CHECK_EQ_INT(presence_table_take_leaves(t, 55000, 5000, on_leave, NULL), 1);
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
	presence_table_unmap(t);
}

/* A worker killed at any moment, most likely inside the lock, halfway
 * through taking a key out: the next holder repairs the table, and after
 * its column is dropped every key of the other column is found with its
 * count, and nothing else is left. */
static void test_table_worker_killed_mid_change(void)
{
	enum { MINE = 200, ROUNDS = 40 };
	struct presence_table *t = presence_table_map(2, 1024, PRESENCE_KEY_MAX, true);
	char key[48];
	for (int i = 0; i < MINE; i++) {
		snprintf(key, sizeof(key), "mine/%d", i);
		presence_table_add(t, 0, key, false);
	}
	int wrong = 0;
	for (int round = 0; round < ROUNDS; round++) {
		int ready[2];
		CHECK(pipe(ready) == 0);
		pid_t pid = fork();
		if (pid == 0) {
			char k[48];
			if (write(ready[1], "r", 1) != 1)
				_exit(2);
			for (unsigned i = 0;; i++) {
				snprintf(k, sizeof(k), "theirs/%u/%u", (unsigned)round, i);
				presence_table_add(t, 1, k, false);
				if (i >= 300) {
					snprintf(k, sizeof(k), "theirs/%u/%u", (unsigned)round, i - 300);
					presence_table_del(t, 1, k, 1);
				}
			}
		}
		char c;
		CHECK(read(ready[0], &c, 1) == 1);
		usleep((useconds_t)(200 + round * 97 % 1500));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(ready[0]);
		close(ready[1]);
		presence_table_drop_column(t, 1, 1);
		wrong += presence_table_used(t) != MINE;
		for (int i = 0; i < MINE; i++) {
			snprintf(key, sizeof(key), "mine/%d", i);
			wrong += presence_table_total(t, key) != 1;
		}
		snprintf(key, sizeof(key), "theirs/%u/%u", (unsigned)round, 0u);
		wrong += presence_table_total(t, key) != 0;
	}
	CHECK_EQ_INT(wrong, 0);
	presence_table_unmap(t);
}

static struct config test_config(void)
{
	struct config c;
	memset(&c, 0, sizeof(c));
	c.presence_max_keys = 4096;
	c.presence_limit = 2;
	c.presence_top = 3;
	c.presence_grace_ms = 5000;
	return c;
}

static const struct presence_scope everything = { .every_topic = true, .subjects = true };

static void check_answer(struct presence *p, char *const *topics, size_t n, const struct presence_scope *scope,
			 const char *want)
{
	size_t len;
	char *got = presence_answer(p, topics, n, scope, &len);
	CHECK_EQ_INT(len, strlen(got));
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "answer: got  %s      want %s\n", got, want);
		CHECK(!"the answer");
	}
	free(got);
}

static void test_registry(void)
{
	struct config cfg = test_config();
	struct presence *p = presence_new(NULL, NULL, NULL, &cfg, NULL);
	CHECK(p != NULL);
	char *room1[] = { "room/1" }, *rooms[] = { "room/*", "news" }, *deep[] = { "room/1/a" };
	struct presence_reg *a = presence_register(p, room1, 1, "bob");
	struct presence_reg *b = presence_register(p, rooms, 2, "alice");
	struct presence_reg *c = presence_register(p, NULL, 0, NULL); /* every topic */
	struct presence_reg *d = presence_register(p, room1, 1, "alice");
	struct presence_reg *e = presence_register(p, deep, 1, "carol");
	CHECK_EQ_INT(presence_readers(p, "room/1"), 4);   /* a, b, c, d */
	CHECK_EQ_INT(presence_readers(p, "room/2"), 2);   /* b, c */
	CHECK_EQ_INT(presence_readers(p, "room/1/a"), 3); /* b, c, e */
	CHECK_EQ_INT(presence_readers(p, "news"), 2);     /* b, c */
	CHECK_EQ_INT(presence_readers(p, "other"), 1);    /* c */
	CHECK_EQ_INT(presence_readers(p, "room/*"), 2);   /* b, c: the patterns that cover it */
	char *ask[] = { "room/1", "news", "room/1" };
	/* alice counts once on room/1 (two streams); the limit is 2. */
	check_answer(p, ask, 3, &everything,
		     "{\"topics\":{\"room/1\":{\"readers\":4,\"subjects\":[\"alice\",\"bob\"],\"subjects_total\":2},"
		     "\"news\":{\"readers\":2,\"subjects\":[\"alice\"],\"subjects_total\":1}}}\n");
	char *ask_deep[] = { "room/1/a" };
	check_answer(p, ask_deep, 1, &everything,
		     "{\"topics\":{\"room/1/"
		     "a\":{\"readers\":3,\"subjects\":[\"alice\",\"carol\"],\"subjects_total\":2}}}\n");
	struct presence_scope counts = { .every_topic = true };
	check_answer(p, ask_deep, 1, &counts, "{\"topics\":{\"room/1/a\":{\"readers\":3}}}\n");
	/* The most read first, at most presence_top. */
	check_answer(
		p, NULL, 0, &everything,
		"{\"topics\":{\"room/1\":{\"readers\":4},\"room/1/a\":{\"readers\":3},\"news\":{\"readers\":2}}}\n");
	/* A token's presence claim: only what it covers. */
	char *grants[] = { "room/*" };
	struct presence_scope rooms_only = { .grants = grants, .ngrants = 1, .subjects = true };
	CHECK(presence_scope_covers(&rooms_only, "room/7"));
	CHECK(!presence_scope_covers(&rooms_only, "news"));
	CHECK(!presence_scope_covers(&rooms_only, "*"));
	check_answer(
		p, NULL, 0, &rooms_only,
		"{\"topics\":{\"room/1\":{\"readers\":4},\"room/1/a\":{\"readers\":3},\"room/*\":{\"readers\":2}}}\n");
	presence_unregister(p, a);
	presence_unregister(p, d);
	presence_unregister(p, c);
	CHECK_EQ_INT(presence_readers(p, "room/1"), 1);
	check_answer(p, room1, 1, &everything,
		     "{\"topics\":{\"room/1\":{\"readers\":1,\"subjects\":[\"alice\"],\"subjects_total\":1}}}\n");
	presence_unregister(p, b);
	presence_unregister(p, e);
	presence_unregister(p, NULL);
	CHECK_EQ_INT(presence_readers(p, "room/1/a"), 0);
	check_answer(p, NULL, 0, &everything, "{\"topics\":{}}\n");
	presence_free(p);
}

/* Streams of every topic with no subject share one registration (no block
 * a stream: 48 bytes a reader), still counted each, and counted out each. */
static void test_every_topic_shares_a_registration(void)
{
	struct config cfg = test_config();
	struct presence *p = presence_new(NULL, NULL, NULL, &cfg, NULL);
	struct presence_reg *a = presence_register(p, NULL, 0, NULL);
	struct presence_reg *b = presence_register(p, NULL, 0, NULL);
	char *room1[] = { "room/1" };
	struct presence_reg *c = presence_register(p, room1, 1, NULL);
	CHECK(a == b);
	CHECK(c != a);
	CHECK_EQ_INT(presence_readers(p, "room/1"), 3);
	CHECK_EQ_INT(presence_readers(p, "other"), 2);
	presence_unregister(p, a);
	CHECK_EQ_INT(presence_readers(p, "other"), 1);
	presence_unregister(p, b);
	presence_unregister(p, c);
	CHECK_EQ_INT(presence_readers(p, "room/1"), 0);
	presence_free(p);
}

#define CHECK_ANSWER(got, want)                                                           \
	do {                                                                              \
		if (strcmp((got), (want)) != 0) {                                         \
			fprintf(stderr, "answer: got  %s      want %s\n", (got), (want)); \
			CHECK(!"the answer");                                             \
		}                                                                         \
	} while (0)

static void keep_answer(void *arg, char *body, size_t len)
{
	(void)len;
	*(char **)arg = body;
}

/* presence_ask answers each topic under its label (a Mercure topic asked
 * is counted under its row's name and named as asked); repeated labels
 * once; without labels, under the topics themselves. */
static void test_labels(void)
{
	struct config cfg = test_config();
	struct presence *p = presence_new(NULL, NULL, NULL, &cfg, NULL);
	char *mapped[] = { "$mercure/ab12" }, *room[] = { "room/1" };
	struct presence_reg *a = presence_register(p, mapped, 1, "bob");
	struct presence_reg *b = presence_register(p, room, 1, NULL);
	char *topics[] = { "$mercure/ab12", "room/1", "$mercure/ab12" };
	char *labels[] = { "https://e.com/a b,\"c\"", "room/1", "https://e.com/a b,\"c\"" };
	char *got = NULL;
	presence_ask(p, topics, labels, 3, &everything, keep_answer, &got); /* no Redis: answered at once */
	CHECK(got != NULL);
	CHECK_ANSWER(got, "{\"topics\":{\"https://e.com/a b,\\\"c\\\"\":{\"readers\":1,\"subjects\":[\"bob\"],"
			  "\"subjects_total\":1},\"room/1\":{\"readers\":1,\"subjects\":[],\"subjects_total\":0}}}\n");
	free(got);
	got = NULL;
	presence_ask(p, topics, NULL, 1, &everything, keep_answer, &got);
	CHECK_ANSWER(got,
		     "{\"topics\":{\"$mercure/ab12\":{\"readers\":1,\"subjects\":[\"bob\"],\"subjects_total\":1}}}\n");
	free(got);
	presence_unregister(p, a);
	presence_unregister(p, b);
	presence_free(p);
}

/* Open and close storms in random order leave exact counts. */
static void test_churn(void)
{
	struct config cfg = test_config();
	struct presence *p = presence_new(NULL, NULL, NULL, &cfg, NULL);
	enum { N = 3000 };
	static struct presence_reg *regs[N];
	char *topics[][2] = { { "a/1", NULL }, { "a/*", NULL }, { "b", "a/2" } };
	size_t want_a1 = 0;
	srand(7);
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < N; i++) {
			int k = i % 3;
			if (regs[i]) {
				if (rand() % 2) {
					presence_unregister(p, regs[i]);
					regs[i] = NULL;
				}
			} else if (rand() % 2) {
				char sub[16];
				snprintf(sub, sizeof(sub), "u%d", i % 50);
				regs[i] = presence_register(p, topics[k], k == 2 ? 2 : 1, sub);
			}
		}
		want_a1 = 0;
		for (int i = 0; i < N; i++)
			want_a1 += regs[i] && (i % 3) != 2;
		CHECK_EQ_INT(presence_readers(p, "a/1"), want_a1);
	}
	for (int i = 0; i < N; i++)
		presence_unregister(p, regs[i]);
	CHECK_EQ_INT(presence_readers(p, "a/1"), 0);
	CHECK_EQ_INT(presence_readers(p, "a/2"), 0);
	presence_free(p);
}

int main(void)
{
	test_table_counts();
	test_table_put_and_columns();
	test_table_add_below();
	test_table_debounce();
	test_table_churn_stays_cheap();
	test_table_shared_worker_dies();
	test_table_worker_killed_mid_change();
	test_registry();
	test_every_topic_shares_a_registration();
	test_labels();
	test_churn();
	return check_done("presence");
}
