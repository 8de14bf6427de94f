/* SPDX-License-Identifier: BSD-2-Clause */
/* stall_guard.h: what the loop's passes cost, as an operator sees it. Fed
 * by the loop's pass hook: every pass into herald_loop_pass_seconds, the
 * worst pass of the last minute (for /api/health) with the label of its
 * longest callback, and a warning for a pass over loop_stall_warn naming
 * what ran in it: one line per STALL_WARN_EVERY_MS, and within that time
 * only a pass more than twice as long as the last written. Times are of
 * the wall clock: a pass the kernel set aside for another process held
 * herald's clients as long. */
#ifndef HERALD_STALL_GUARD_H
#define HERALD_STALL_GUARD_H

#include <stdint.h>

#include "core/config.h"
#include "common/loop.h"
#include "core/metrics.h"

#define STALL_WINDOWS 6 /* the last minute, in windows of ten seconds */
#define STALL_WINDOW_MS 10000
#define STALL_WARN_EVERY_MS 10000 /* at most one warning line this often */
#define STALL_WHAT_MAX 192

struct stall_guard {
	const struct config *cfg; /* loop_stall_warn, read at every pass (a reload takes effect at once) */
	struct metrics *m;
	struct stall_window {
		uint64_t epoch; /* now_ms / STALL_WINDOW_MS of the window this slot holds */
		uint64_t ns;    /* its worst pass */
		char what[STALL_WHAT_MAX];
	} win[STALL_WINDOWS];
	uint64_t warned_ms;   /* when the window of the last warning line opened (0: never) */
	uint64_t warned_ns;   /* the worst pass written in that window */
	uint64_t unwarned;    /* slow passes since, not written */
	uint64_t unwarned_ns; /* the worst of them */
	struct loop *lp;
};

/* Register g as lp's pass hook. g is the caller's (embedded in the server),
 * and must outlive the loop's last pass or be stopped first. */
void stall_guard_start(struct stall_guard *g, struct loop *lp, const struct config *cfg, struct metrics *m);
void stall_guard_stop(struct stall_guard *g);

/* The worst pass of the last minute at now_ms, in ns (0: none), with the
 * label of its longest callback in *what (g's own text; "" when none). */
uint64_t stall_guard_worst(const struct stall_guard *g, uint64_t now_ms, const char **what);

/* Describe pass's longest callback into buf: its label, or its kind. */
void stall_guard_describe(const struct loop_pass *pass, char *buf, size_t len);

#endif
