/* SPDX-License-Identifier: BSD-2-Clause */
/* test_rate_limit.c: budgets per key (src/common/rate_limit.c): a key takes up to
 * its per-minute budget at once, then waits as long as the budget needs to
 * refill what it asks (the wait said is the wait needed), keys are apart,
 * a key whose budget is whole again is dropped, a full table makes new
 * keys share one budget, and 0 is no limit. ASan's leak check at exit
 * covers rate_limit_free. */
#include <stdint.h>

#include "check.h"
#include "common/rate_limit.h"

#define T0 UINT64_C(1000000) /* a monotonic time in ms */

static void test_budget_and_wait(void)
{
	struct rate_limit *r = rate_limit_new(16);
	/* 120 a minute: one unit every 500 ms, 120 at once. */
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.1", 100, 120, T0), 0);
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.1", 20, 120, T0), 0);
	uint64_t wait = rate_limit_take(r, "10.0.0.1", 4, 120, T0);
	CHECK_EQ_INT(wait, 2000);
	/* Nothing was taken by the refusal: after the wait, the 4 go. */
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.1", 4, 120, T0 + 1999) > 0, 1);
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.1", 4, 120, T0 + 2000), 0);
	/* Another key has its own budget. */
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.2", 120, 120, T0), 0);
	CHECK_EQ_INT(rate_limit_keys(r), 2);
	/* More than a minute's budget can never be taken. */
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.3", 121, 120, T0), 60000);
	/* No limit. */
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.1", 1000000, 0, T0), 0);
	/* A minute on, both budgets are whole: the keys go as they are met. */
	CHECK_EQ_INT(rate_limit_take(r, "10.0.0.1", 120, 120, T0 + 62000), 0);
	rate_limit_free(r);
}

static void test_full_table_shares_one_budget(void)
{
	struct rate_limit *r = rate_limit_new(2);
	CHECK_EQ_INT(rate_limit_take(r, "a", 60, 60, T0), 0);
	CHECK_EQ_INT(rate_limit_take(r, "b", 60, 60, T0), 0);
	/* c and d are past the table: they share one budget of 60. */
	CHECK_EQ_INT(rate_limit_take(r, "c", 40, 60, T0), 0);
	CHECK_EQ_INT(rate_limit_take(r, "d", 40, 60, T0) > 0, 1);
	CHECK_EQ_INT(rate_limit_keys(r), 3);
	/* Once a and b are whole again (a full table sweeps at most once a
	 * second), a new key has a place of its own. */
	CHECK_EQ_INT(rate_limit_take(r, "e", 60, 60, T0 + 61000), 0);
	CHECK_EQ_INT(rate_limit_take(r, "f", 60, 60, T0 + 61000), 0);
	CHECK_EQ_INT(rate_limit_keys(r), 3);
	rate_limit_free(r);
}

static void test_long_keys_are_cut(void)
{
	struct rate_limit *r = rate_limit_new(4);
	char a[200], b[200];
	for (int i = 0; i < 199; i++)
		a[i] = b[i] = 'k';
	a[199] = b[199] = '\0';
	b[198] = 'x'; /* differs only past the key's room */
	CHECK_EQ_INT(rate_limit_take(r, a, 10, 10, T0), 0);
	CHECK_EQ_INT(rate_limit_take(r, b, 1, 10, T0) > 0, 1);
	rate_limit_free(r);
}

int main(void)
{
	test_budget_and_wait();
	test_full_table_shares_one_budget();
	test_long_keys_are_cut();
	return check_done("test_rate_limit");
}
