/* SPDX-License-Identifier: BSD-2-Clause */
/* test_group.c: the workers' shared region with real processes: counts with
 * a column per worker, a dead worker's share dropped, keys taken out without
 * losing the others, lookups that stay a few slots after any churn of
 * addresses with the caps still exact, the locks surviving a process killed
 * while it may hold them, counters summed over the slots, and the wake-ups
 * a commit sends the other workers. */
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/group.h"

/* Run fn as worker index in a child process; wait for it. */
static void as_worker(unsigned index, void (*fn)(void))
{
	pid_t pid = fork();
	if (pid == 0) {
		group_enter(index);
		fn();
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void worker0_adds(void)
{
	group_count_admit("10.0.0.1", 0, 0);
	group_count_admit("10.0.0.1", 0, 0);
	group_count_admit("10.0.0.2", 0, 0);
}

static void worker1_adds(void)
{
	group_count_admit("10.0.0.1", 0, 0);
	group_count_admit("10.0.0.3", 0, 0);
	group_count_del("10.0.0.3");
}

static void test_counts_across_workers(void)
{
	CHECK_EQ_INT(group_create(2, 100, 1024), 0);
	as_worker(0, worker0_adds);
	as_worker(1, worker1_adds);
	group_enter(0);
	CHECK_EQ_INT(group_count("10.0.0.1"), 3);
	CHECK_EQ_INT(group_count("10.0.0.2"), 1);
	CHECK_EQ_INT(group_count("10.0.0.3"), 0);
	CHECK_EQ_INT(group_readers(), 4);
	/* Worker 1 dies: its one reader on 10.0.0.1 leaves the counts. */
	group_worker_gone(1);
	CHECK_EQ_INT(group_count("10.0.0.1"), 2);
	CHECK_EQ_INT(group_readers(), 3);
	group_enter(0);
	group_count_del("10.0.0.1");
	CHECK_EQ_INT(group_count("10.0.0.1"), 1);
	group_destroy();
}

static void test_keys_out_keep_the_others(void)
{
	/* A table of 1,024: many keys collide; keys leaving at 0 take their
	 * slots out while keys further along their chains stay found. */
	CHECK_EQ_INT(group_create(2, 10, 1024), 0);
	group_enter(1);
	char key[32];
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 600; i++) {
			snprintf(key, sizeof(key), "r%d-%d", round, i);
			group_count_admit(key, 0, 0);
		}
		for (int i = 0; i < 600; i += 2) {
			snprintf(key, sizeof(key), "r%d-%d", round, i);
			group_count_del(key);
		}
		int found = 0;
		for (int i = 1; i < 600; i += 2) {
			snprintf(key, sizeof(key), "r%d-%d", round, i);
			found += group_count(key) == 1;
		}
		CHECK_EQ_INT(found, 300);
		for (int i = 1; i < 600; i += 2) {
			snprintf(key, sizeof(key), "r%d-%d", round, i);
			group_count_del(key);
		}
	}
	CHECK_EQ_INT(group_readers(), 0);
	group_destroy();
}

static void churn(void)
{
	for (;;) {
		group_count_admit("10.9.9.9", 0, 0);
		group_count_del("10.9.9.9");
	}
}

static void test_lock_survives_a_killed_holder(void)
{
	CHECK_EQ_INT(group_create(2, 10, 1024), 0);
	/* A worker killed while it churns is most often inside the lock; a
	 * lock that did not survive would hang the next caller (the alarm
	 * fails the test instead). */
	alarm(20);
	for (int i = 0; i < 20; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			group_enter(1);
			churn();
		}
		usleep(2000 + (useconds_t)(i * 337 % 3000));
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		group_worker_gone(1);
		group_enter(0);
		CHECK_EQ_INT(group_count("10.9.9.9"), 0);
	}
	alarm(0);
	group_destroy();
}

static void stamp_worker1(void)
{
	struct metrics m = { 0 };
	m.requests = 5;
	metrics_count_refusal(&m, 429, "too many");
	metrics_observe(&m.fanout_seconds, 2000000);
	struct group_figures f = { .connections = 7, .http2_sessions = 2, .http2_streams = 9, .last_event_id = 40 };
	group_stamp(&f, &m);
	group_set_ready();
}

static void test_sum_and_dead_counters_kept(void)
{
	static struct metrics sum;
	struct group_figures f;
	struct group_worker w[GROUP_MAX_WORKERS];
	CHECK_EQ_INT(group_create(2, 10, 1024), 0);
	/* The worker may be ready before the main process records its pid
	 * (fork returns to both in either order): ready must stay. */
	as_worker(1, stamp_worker1);
	group_worker_started(1, 4242);
	CHECK(!group_all_ready()); /* worker 0 is not running */
	group_worker_started(0, 4241);
	CHECK(!group_all_ready()); /* nor ready */
	CHECK_EQ_INT(group_sum(&sum, &f, w), 2);
	CHECK_EQ_INT(sum.requests, 5);
	CHECK_EQ_INT(f.connections, 7);
	CHECK_EQ_INT(f.http2_sessions, 2);
	CHECK_EQ_INT(f.http2_streams, 9);
	CHECK_EQ_INT(f.last_event_id, 40);
	CHECK_EQ_INT(w[1].pid, 4242);
	CHECK(w[1].ready);
	CHECK(group_all_alive(1000));
	usleep(30000);
	CHECK(!group_all_alive(10)); /* running, and no stamp for 30 ms */
	/* Its counters stay in the sum after it dies; its gauges do not. */
	group_worker_gone(1);
	group_sum(&sum, &f, w);
	CHECK_EQ_INT(sum.requests, 5);
	CHECK_EQ_INT(sum.nrefusals, 1);
	CHECK_EQ_INT(sum.fanout_seconds.n, 1);
	CHECK_EQ_INT(f.connections, 0);
	CHECK_EQ_INT(f.http2_streams, 0);
	CHECK_EQ_INT(w[1].pid, 0);
	group_worker_gone(0);
	CHECK(group_all_alive(10)); /* none running: nothing overdue */
	group_destroy();
}

/* Two workers admitting as fast as they can against the same caps: the
 * check and the count are one step, so together they stop exactly at the
 * caps, and a refused reader is not counted. */
static void admit_until_refused(void)
{
	for (int i = 0; i < 5000; i++)
		group_count_admit(i % 2 ? "10.0.0.9" : "10.0.0.8", 700, 1000);
	_exit(0);
}

static void test_admit_stops_at_the_caps(void)
{
	CHECK_EQ_INT(group_create(2, 100, 1024), 0);
	pid_t a = fork();
	if (a == 0) {
		group_enter(0);
		admit_until_refused();
	}
	pid_t b = fork();
	if (b == 0) {
		group_enter(1);
		admit_until_refused();
	}
	int st;
	CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st));
	CHECK(waitpid(b, &st, 0) == b && WIFEXITED(st));
	group_enter(0);
	CHECK_EQ_INT(group_readers(), 1000);
	CHECK(group_count("10.0.0.8") <= 700 && group_count("10.0.0.9") <= 700);
	CHECK_EQ_INT(group_count("10.0.0.8") + group_count("10.0.0.9"), 1000);
	/* Per key: the 701st under one key is refused, another key still fits
	 * while the total allows. */
	group_destroy();
	CHECK_EQ_INT(group_create(2, 100, 1024), 0);
	group_enter(0);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(group_count_admit("10.0.0.1", 3, 10), 0);
	CHECK_EQ_INT(group_count_admit("10.0.0.1", 3, 10), -2);
	CHECK_EQ_INT(group_count_admit("10.0.0.2", 3, 10), 0);
	CHECK_EQ_INT(group_count("10.0.0.1"), 3);
	CHECK_EQ_INT(group_readers(), 4);
	CHECK_EQ_INT(group_count_admit("10.0.0.3", 0, 4), -1);
	CHECK_EQ_INT(group_count_admit("10.0.0.3", 0, 0), 0); /* 0: no cap */
	group_destroy();
}

/* Address keys as addr_count_key makes them for IPv6: one a /64, so a
 * client with a /48 has 65,536. */
static void address_key(char *buf, size_t len, int i)
{
	snprintf(buf, len, "2001:db8:%x:%x::/64", (unsigned)i >> 16 & 0xffff, (unsigned)i & 0xffff);
}

/* How many slots a lookup of each of n keys no one counts looks at: the
 * mean times ten, and the worst into *worst. */
static uint64_t absent_lookups_x10(int n, uint64_t *worst)
{
	char key[64];
	uint64_t start = group_count_probes();
	int wrong = 0;
	*worst = 0;
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "198.51.%d.%d", i / 256, i % 256);
		uint64_t before = group_count_probes();
		wrong += group_count(key) != 0;
		uint64_t k = group_count_probes() - before;
		*worst = k > *worst ? k : *worst;
	}
	CHECK_EQ_INT(wrong, 0);
	return (group_count_probes() - start) * 10 / (uint64_t)n;
}

/* Client addresses come and go far beyond the table's room: the caps
 * still refuse exactly when they should, across two workers' columns and
 * after one column is dropped, and a lookup of an address no one counts
 * still looks at a few slots, not at every address that ever came (which
 * every stream's open and close would pay under the group's lock). */
static void test_count_churn_stays_cheap(void)
{
	enum { LIVE = 300, KEYS = 20000, ASKED = 1000, PER_KEY = 2 };
	/* Room for 100 keys: the table holds its least, 1,024. */
	CHECK_EQ_INT(group_create(2, 100, 1024), 0);
	/* Two readers a key and a new key each step: never the total. */
	const size_t total = 2 * LIVE + 3;
	char key[64];
	int wrong = 0;
	for (int i = 0; i < KEYS; i++) {
		address_key(key, sizeof(key), i);
		/* One reader on each worker; a third, on either, is refused. */
		group_enter(0);
		wrong += group_count_admit(key, PER_KEY, total) != 0;
		group_enter(1);
		wrong += group_count_admit(key, PER_KEY, total) != 0;
		wrong += group_count_admit(key, PER_KEY, total) != -2;
		group_enter((unsigned)i % 2);
		wrong += group_count_admit(key, PER_KEY, total) != -2;
		if (i >= LIVE) {
			address_key(key, sizeof(key), i - LIVE);
			group_enter(0);
			group_count_del(key);
			group_enter(1);
			group_count_del(key);
		}
	}
	CHECK_EQ_INT(wrong, 0);
	CHECK_EQ_INT(group_readers(), 2 * LIVE);
	for (int i = KEYS - LIVE; i < KEYS; i++) {
		address_key(key, sizeof(key), i);
		wrong += group_count(key) != 2;
	}
	address_key(key, sizeof(key), KEYS - LIVE - 1);
	wrong += group_count(key) != 0;
	CHECK_EQ_INT(wrong, 0);
	/* The total: the place past it is refused and leaves no count. */
	group_enter(0);
	CHECK_EQ_INT(group_count_admit("192.0.2.1", 0, 2 * LIVE), -1);
	CHECK_EQ_INT(group_count("192.0.2.1"), 0);
	CHECK_EQ_INT(group_count_admit("192.0.2.1", 0, 2 * LIVE + 1), 0);
	CHECK_EQ_INT(group_count_admit("192.0.2.2", 0, 2 * LIVE + 1), -1);
	group_count_del("192.0.2.1");
	/* Linear probing at under half load looks at 2.5 slots on average for
	 * a key that is not there; a table never emptied, at every slot. */
	uint64_t worst, mean_x10 = absent_lookups_x10(ASKED, &worst);
	if (mean_x10 > 50 || worst > 64)
		fprintf(stderr, "absent-key lookups: %.1f slots on average, %llu at worst\n", (double)mean_x10 / 10,
			(unsigned long long)worst);
	CHECK(mean_x10 <= 50);
	CHECK(worst <= 64);
	/* Worker 1 dies: its reader of every key goes, and its places with it. */
	group_worker_gone(1);
	group_enter(0);
	CHECK_EQ_INT(group_readers(), LIVE);
	address_key(key, sizeof(key), KEYS - 1);
	CHECK_EQ_INT(group_count(key), 1);
	CHECK_EQ_INT(group_count_admit(key, PER_KEY, 0), 0);
	CHECK_EQ_INT(group_count_admit(key, PER_KEY, 0), -2);
	group_enter(1); /* started again */
	CHECK_EQ_INT(group_count_admit(key, PER_KEY, 0), -2);
	CHECK_EQ_INT(group_count_admit("192.0.2.3", 0, LIVE + 1), -1);
	CHECK_EQ_INT(group_count_admit("192.0.2.3", 0, LIVE + 2), 0);
	CHECK_EQ_INT(group_readers(), LIVE + 2);
	/* Worker 0 dies: what is left is worker 1's one reader. */
	group_worker_gone(0);
	CHECK_EQ_INT(group_readers(), 1);
	CHECK_EQ_INT(group_count(key), 0);
	CHECK_EQ_INT(group_count("192.0.2.3"), 1);
	mean_x10 = absent_lookups_x10(ASKED, &worst);
	CHECK(mean_x10 <= 50);
	CHECK(worst <= 64);
	group_destroy();
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

/* A commit wakes every other worker once, however many commits follow,
 * until that worker takes the wake; a worker never wakes itself. */
static void test_wake_once_until_taken(void)
{
	CHECK_EQ_INT(group_wake_fd(), -1); /* no group */
	CHECK_EQ_INT(group_create(3, 10, 1024), 0);
	group_enter(0);
	int fd0 = group_wake_fd();
	group_wake_others();
	group_wake_others();
	CHECK(!readable(fd0));
	group_enter(1);
	int fd1 = group_wake_fd();
	CHECK(fd1 >= 0 && fd1 != fd0 && readable(fd1));
	uint64_t v = 0;
	CHECK(read(fd1, &v, sizeof(v)) == (ssize_t)sizeof(v));
	CHECK_EQ_INT((int)v, 1);
	group_enter(0);
	group_wake_others(); /* worker 1 has not taken the first: no write */
	CHECK(!readable(fd1));
	group_enter(1);
	group_wake_taken();
	group_enter(0);
	group_wake_others();
	group_enter(1);
	CHECK(readable(fd1));
	group_wake_taken();
	CHECK(!readable(fd1));
	group_enter(2);
	int fd2 = group_wake_fd();
	CHECK(read(fd2, &v, sizeof(v)) == (ssize_t)sizeof(v));
	CHECK_EQ_INT((int)v, 1);
	group_destroy();
}

int main(void)
{
	test_wake_once_until_taken();
	test_counts_across_workers();
	test_admit_stops_at_the_caps();
	test_keys_out_keep_the_others();
	test_count_churn_stays_cheap();
	test_lock_survives_a_killed_holder();
	test_sum_and_dead_counters_kept();
	return check_done("test_group");
}
