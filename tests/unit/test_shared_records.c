/* SPDX-License-Identifier: BSD-2-Clause */
/* test_shared_records.c: records in chains of cells (src/core/shared_records.c):
 * a record read back as added, short and long (several cells, the longest
 * allowed) and empty; a deleted record's cells used again; a block that
 * cannot take a record takes nothing of it; a dead column's records
 * orphaned, left out of each, claimed once, their cells freed; and in a
 * shared block, two processes claiming at once get each orphan once
 * between them. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "core/shared_records.h"

struct seen {
	size_t n, bytes;
	char last[SHARED_RECORD_MAX + 1];
};

static void see(void *arg, const char *rec, size_t len)
{
	struct seen *s = arg;
	s->n++;
	s->bytes += len;
	memcpy(s->last, rec, len);
	s->last[len] = '\0';
}

static void test_add_each_del(void)
{
	struct shared_records *t = shared_records_map(0, false);
	CHECK(t != NULL);
	char *big = malloc(SHARED_RECORD_MAX + 1);
	for (size_t i = 0; i < SHARED_RECORD_MAX + 1; i++)
		big[i] = (char)('a' + i % 26);
	uint32_t a = shared_records_add(t, 0, "short", 5);
	uint32_t b = shared_records_add(t, 1, big, SHARED_RECORD_MAX);
	uint32_t e = shared_records_add(t, 1, "", 0);
	CHECK(a && b && e);
	CHECK_EQ_INT(shared_records_add(t, 0, big, SHARED_RECORD_MAX + 1), 0);
	CHECK_EQ_INT(shared_records_add(t, 64, "x", 1), 0);
	size_t cells = 1 + (SHARED_RECORD_MAX + SHARED_RECORD_CELL - 1) / SHARED_RECORD_CELL + 1;
	CHECK_EQ_INT(shared_records_cells_used(t), cells);
	struct seen s = { 0 };
	CHECK_EQ_INT(shared_records_each(t, 0, see, &s), 3);
	CHECK_EQ_INT(s.bytes, 5 + SHARED_RECORD_MAX);
	s = (struct seen){ 0 };
	CHECK_EQ_INT(shared_records_each(t, 2, see, &s), 2);
	shared_records_del(t, e);
	s = (struct seen){ 0 };
	shared_records_each(t, 0, see, &s);
	CHECK(s.n == 2 && strncmp(s.last, big, SHARED_RECORD_MAX) == 0 && strlen(s.last) == SHARED_RECORD_MAX);
	shared_records_del(t, b);
	shared_records_del(t, 0);
	CHECK_EQ_INT(shared_records_cells_used(t), 1);
	/* Freed cells go to the next records: the block does not grow. */
	for (int i = 0; i < 100; i++) {
		uint32_t h = shared_records_add(t, 0, big, 1000);
		CHECK(h != 0);
		shared_records_del(t, h);
	}
	CHECK_EQ_INT(shared_records_cells_used(t), 1);
	s = (struct seen){ 0 };
	shared_records_each(t, 0, see, &s);
	CHECK(s.n == 1 && strcmp(s.last, "short") == 0);
	shared_records_del(t, a);
	free(big);
	shared_records_unmap(t);
}

static void test_full(void)
{
	struct shared_records *t = shared_records_map(1024, false);
	char rec[3 * SHARED_RECORD_CELL];
	memset(rec, 'r', sizeof(rec));
	size_t n = 0;
	while (shared_records_add(t, 0, rec, sizeof(rec)))
		n++;
	CHECK_EQ_INT(n, 1024 / 3);
	CHECK_EQ_INT(shared_records_cells_used(t), 3 * n);
	/* One cell left: a one-cell record fits, a longer one takes nothing. */
	CHECK(shared_records_add(t, 0, rec, SHARED_RECORD_CELL) != 0);
	CHECK_EQ_INT(shared_records_add(t, 0, rec, 1), 0);
	CHECK_EQ_INT(shared_records_cells_used(t), 1024);
	shared_records_unmap(t);
}

static void test_orphans(void)
{
	struct shared_records *t = shared_records_map(0, false);
	for (int i = 0; i < 10; i++)
		CHECK(shared_records_add(t, (unsigned)(i % 2), i % 2 ? "dead" : "live", 4) != 0);
	CHECK(!shared_records_has_orphans(t));
	CHECK_EQ_INT(shared_records_orphan_column(t, 1), 5);
	CHECK_EQ_INT(shared_records_orphan_column(t, 1), 0);
	CHECK(shared_records_has_orphans(t));
	struct seen s = { 0 };
	CHECK_EQ_INT(shared_records_each(t, 0, see, &s), 5);
	CHECK(strcmp(s.last, "live") == 0);
	s = (struct seen){ 0 };
	CHECK_EQ_INT(shared_records_claim_orphans(t, 3, see, &s), 3);
	CHECK_EQ_INT(shared_records_claim_orphans(t, 3, see, &s), 2);
	CHECK_EQ_INT(shared_records_claim_orphans(t, 3, see, &s), 0);
	CHECK(s.n == 5 && strcmp(s.last, "dead") == 0);
	CHECK(!shared_records_has_orphans(t));
	CHECK_EQ_INT(shared_records_cells_used(t), 5);
	shared_records_unmap(t);
}

static void count(void *arg, const char *rec, size_t len)
{
	(void)rec;
	(void)len;
	(*(size_t *)arg)++;
}

static void test_claimed_once_across_processes(void)
{
	struct shared_records *t = shared_records_map(4096, true);
	enum { N = 3000 };
	for (int i = 0; i < N; i++)
		shared_records_add(t, 2, "orphan-to-be", 12);
	CHECK_EQ_INT(shared_records_orphan_column(t, 2), N);
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		size_t mine = 0;
		while (shared_records_claim_orphans(t, 7, count, &mine))
			;
		ssize_t w = write(fds[1], &mine, sizeof(mine));
		_exit(w == sizeof(mine) ? 0 : 1);
	}
	size_t mine = 0, theirs = 0;
	while (shared_records_claim_orphans(t, 5, count, &mine))
		;
	int st;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(read(fds[0], &theirs, sizeof(theirs)) == sizeof(theirs));
	CHECK_EQ_INT(mine + theirs, N);
	CHECK_EQ_INT(shared_records_cells_used(t), 0);
	close(fds[0]);
	close(fds[1]);
	shared_records_unmap(t);
}

int main(void)
{
	test_add_each_del();
	test_full();
	test_orphans();
	test_claimed_once_across_processes();
	return check_done("test_shared_records");
}
