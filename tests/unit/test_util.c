/* SPDX-License-Identifier: BSD-2-Clause */
/* test_util.c: the seeded uniform draw used for rotation jitter, and the
 * kernel's random bytes drawn from a pool (never the same in a forked
 * child as in its parent). */
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "common/util.h"

/* Bytes drawn after a fork differ between parent and child: the child
 * does not hand out the parent's pool (workers make ids this way). */
static void test_random_bytes_fork(void)
{
	unsigned char warm[16], mine[32], theirs[32];
	random_bytes(warm, sizeof(warm)); /* the pool is filled before the fork */
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		unsigned char b[32];
		random_bytes(b, sizeof(b));
		_exit(write(fds[1], b, sizeof(b)) == (ssize_t)sizeof(b) ? 0 : 1);
	}
	CHECK(pid > 0);
	random_bytes(mine, sizeof(mine));
	CHECK(read(fds[0], theirs, sizeof(theirs)) == (ssize_t)sizeof(theirs));
	int status = 0;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(memcmp(mine, theirs, sizeof(mine)) != 0);
	close(fds[0]);
	close(fds[1]);
	/* Draws never repeat, across a refill too (a page is 4 KiB). */
	unsigned char a[48], b[48];
	random_bytes(a, sizeof(a));
	for (int i = 0; i < 200; i++)
		random_bytes(b, sizeof(b));
	CHECK(memcmp(a, b, sizeof(a)) != 0);
	unsigned char big[5000] = { 0 }, zero[64] = { 0 };
	random_bytes(big, sizeof(big)); /* more than the pool: straight from the kernel */
	CHECK(memcmp(big + sizeof(big) - 64, zero, 64) != 0);
}

int main(void)
{
	test_random_bytes_fork();
	CHECK_EQ_INT(random_below(0), 0);
	CHECK_EQ_INT(random_below(1), 0);
	/* Every value of a small range comes up, none outside it, and about
	 * equally often (10,000 draws into 10 bins: each within 15% of 1,000). */
	unsigned bins[10] = { 0 };
	for (int i = 0; i < 10000; i++) {
		uint64_t v = random_below(10);
		CHECK(v < 10);
		if (v < 10)
			bins[v]++;
	}
	for (int i = 0; i < 10; i++)
		CHECK(bins[i] > 850 && bins[i] < 1150);
	/* A span far past 2^31 (a rotation jitter of weeks, in ms) is covered
	 * whole: random() would reach only its first 2^31 values. */
	uint64_t span = UINT64_C(1) << 40, high = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t v = random_below(span);
		CHECK(v < span);
		if (v >= span / 2)
			high++;
	}
	CHECK(high > 400 && high < 600);
	return check_done("test_util");
}
