/* SPDX-License-Identifier: BSD-2-Clause */
/* test_util.c: the seeded uniform draw used for rotation jitter. */
#include <stdint.h>

#include "check.h"
#include "common/util.h"

int main(void)
{
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
