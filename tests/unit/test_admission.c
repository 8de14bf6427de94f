/* SPDX-License-Identifier: BSD-2-Clause */
/* test_admission.c: the caps on open streams and the places they hold, in
 * one process (the module's own table) and in a group of workers (the real
 * shared region, with a second worker in a child process): which cap
 * refuses first, a refusal counting nothing, places shared under a key and
 * given back one by one, and many keys through the table's chains. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/admission.h"
#include "check.h"
#include "core/group.h"

static void test_per_address_cap(void)
{
	struct admission *a = admission_new();
	struct admission_caps caps = { .max_readers = 0, .per_address_limit = 3 };
	struct admission_ticket *t[4];
	for (int i = 0; i < 3; i++) {
		CHECK_EQ_INT(admission_admit(a, "10.0.0.1", &caps, (size_t)i, &t[i]), ADMISSION_OK);
		CHECK(t[i] != NULL);
	}
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 3);
	t[3] = t[0];
	CHECK_EQ_INT(admission_admit(a, "10.0.0.1", &caps, 3, &t[3]), ADMISSION_ADDRESS_FULL);
	CHECK(t[3] == NULL);
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 3); /* a refusal counts nothing */
	/* Another address has places of its own. */
	struct admission_ticket *other;
	CHECK_EQ_INT(admission_admit(a, "10.0.0.2", &caps, 3, &other), ADMISSION_OK);
	CHECK_EQ_INT(admission_count(a, "10.0.0.2"), 1);
	/* A place given back makes room for one more. */
	admission_release(a, t[1]);
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 2);
	CHECK_EQ_INT(admission_admit(a, "10.0.0.1", &caps, 3, &t[1]), ADMISSION_OK);
	for (int i = 0; i < 3; i++)
		admission_release(a, t[i]);
	admission_release(a, other);
	admission_release(a, NULL); /* nothing held: nothing to give back */
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 0);
	CHECK_EQ_INT(admission_count(a, "10.0.0.2"), 0);
	admission_free(a);
}

static void test_global_cap_comes_first(void)
{
	struct admission *a = admission_new();
	struct admission_caps caps = { .max_readers = 2, .per_address_limit = 1 };
	struct admission_ticket *t, *u;
	/* The global cap counts what is open here (the hub's readers), as
	 * the caller says, not the places held. */
	CHECK_EQ_INT(admission_admit(a, "k", &caps, 1, &t), ADMISSION_OK);
	CHECK_EQ_INT(admission_admit(a, "k", &caps, 1, &u), ADMISSION_ADDRESS_FULL);
	/* When both caps would refuse, the global one is the cause. */
	CHECK_EQ_INT(admission_admit(a, "k", &caps, 2, &u), ADMISSION_FULL);
	CHECK(u == NULL);
	CHECK_EQ_INT(admission_admit(a, "j", &caps, 2, &u), ADMISSION_FULL);
	CHECK_EQ_INT(admission_count(a, "j"), 0);
	/* 0 is no cap. */
	caps = (struct admission_caps){ 0 };
	CHECK_EQ_INT(admission_admit(a, "k", &caps, 1000000, &u), ADMISSION_OK);
	CHECK_EQ_INT(admission_count(a, "k"), 2);
	admission_release(a, u);
	admission_release(a, t);
	admission_free(a);
}

/* Many keys: chains in every bucket, places released in an order unlike
 * the one they were taken in; the table is empty again at the end (and
 * the sanitizer finds nothing left over). */
static void test_many_keys(void)
{
	enum { KEYS = 20000, PER = 3 };
	struct admission *a = admission_new();
	struct admission_caps caps = { .per_address_limit = PER };
	struct admission_ticket **t = calloc(KEYS * PER, sizeof(*t));
	char key[64];
	for (int p = 0; p < PER; p++)
		for (int k = 0; k < KEYS; k++) {
			snprintf(key, sizeof(key), "2001:db8:%x::/64", k);
			CHECK_EQ_INT(admission_admit(a, key, &caps, 0, &t[p * KEYS + k]), ADMISSION_OK);
		}
	int refused = 0;
	for (int k = 0; k < KEYS; k += 97) {
		struct admission_ticket *x;
		snprintf(key, sizeof(key), "2001:db8:%x::/64", k);
		refused += admission_admit(a, key, &caps, 0, &x) == ADMISSION_ADDRESS_FULL;
	}
	CHECK_EQ_INT(refused, (KEYS + 96) / 97);
	/* Release with a stride coprime to the count: every place once. */
	size_t n = (size_t)KEYS * PER;
	for (size_t i = 0, j = 0; i < n; i++, j = (j + 7919) % n) {
		admission_release(a, t[j]);
		if (i == n / 2) {
			snprintf(key, sizeof(key), "2001:db8:%x::/64", 5);
			CHECK(admission_count(a, key) <= PER);
		}
	}
	size_t left = 0;
	for (int k = 0; k < KEYS; k++) {
		snprintf(key, sizeof(key), "2001:db8:%x::/64", k);
		left += admission_count(a, key);
	}
	CHECK_EQ_INT(left, 0);
	free(t);
	admission_free(a);
}

/* A place held while the table goes (at exit) is freed with it. */
static void test_free_with_places_held(void)
{
	struct admission *a = admission_new();
	struct admission_caps caps = { 0 };
	struct admission_ticket *t;
	CHECK_EQ_INT(admission_admit(a, "10.0.0.1", &caps, 0, &t), ADMISSION_OK);
	admission_free(a);
	admission_free(NULL);
}

/* Worker 1 (a child process) opens two streams from 10.0.0.1 and keeps
 * them until it exits. */
static void worker1_opens_two(void)
{
	group_enter(1);
	struct admission *a = admission_new();
	struct admission_caps caps = { .max_readers = 0, .per_address_limit = 0 };
	struct admission_ticket *t;
	int ok = admission_admit(a, "10.0.0.1", &caps, 0, &t) == ADMISSION_OK &&
		 admission_admit(a, "10.0.0.1", &caps, 1, &t) == ADMISSION_OK;
	_exit(ok ? 0 : 1);
}

static void test_group_caps(void)
{
	CHECK_EQ_INT(group_create(2, 100, 1024), 0);
	pid_t pid = fork();
	if (pid == 0)
		worker1_opens_two();
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	group_enter(0);
	struct admission *a = admission_new();
	/* The other worker's two count for the whole group. */
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 2);
	struct admission_caps caps = { .max_readers = 4, .per_address_limit = 3 };
	struct admission_ticket *t1, *t2, *t3;
	CHECK_EQ_INT(admission_admit(a, "10.0.0.1", &caps, 0, &t1), ADMISSION_OK);
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 3);
	CHECK_EQ_INT(admission_admit(a, "10.0.0.1", &caps, 1, &t2), ADMISSION_ADDRESS_FULL);
	CHECK(t2 == NULL);
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 3);
	/* The group's max_readers: 3 open in all, one more fits. */
	CHECK_EQ_INT(admission_admit(a, "10.0.0.2", &caps, 1, &t2), ADMISSION_OK);
	CHECK_EQ_INT(group_readers(), 4);
	CHECK_EQ_INT(admission_admit(a, "10.0.0.3", &caps, 1, &t3), ADMISSION_FULL);
	CHECK_EQ_INT(admission_count(a, "10.0.0.3"), 0);
	CHECK_EQ_INT(group_readers(), 4);
	/* Places given back leave the group's counts. */
	admission_release(a, t1);
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 2);
	admission_release(a, t2);
	CHECK_EQ_INT(group_readers(), 2);
	/* The other worker is gone: its places go with it. */
	group_worker_gone(1);
	group_enter(0);
	CHECK_EQ_INT(admission_count(a, "10.0.0.1"), 0);
	admission_free(a);
	group_destroy();
}

int main(void)
{
	test_per_address_cap();
	test_global_cap_comes_first();
	test_many_keys();
	test_free_with_places_held();
	test_group_caps();
	return check_done("admission");
}
