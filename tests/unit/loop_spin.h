/* SPDX-License-Identifier: BSD-2-Clause */
/* loop_spin.h: run a unit test's loop for a while (its watchers, timers
 * and deferred work), ended by a timer of its own. */
#ifndef HERALD_TEST_LOOP_SPIN_H
#define HERALD_TEST_LOOP_SPIN_H

#include "common/loop.h"

static inline void loop_spin_stop(void *arg)
{
	loop_stop(arg);
}

/* Run lp for ms (0: one pass, its due timers among it). */
static inline void loop_spin(struct loop *lp, uint64_t ms)
{
	struct loop_timer t = { 0 };
	loop_timer_start(lp, &t, ms, loop_spin_stop, lp);
	loop_run(lp);
	loop_timer_stop(lp, &t);
}

#endif
