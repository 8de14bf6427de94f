/* SPDX-License-Identifier: BSD-2-Clause */
/* stall_guard.c: the loop-pass histogram, the worst pass of the last
 * minute and the stall warning (see stall_guard.h). Everything here runs
 * once per pass, so the common pass costs a histogram bucket and a compare;
 * a label is formatted only for a pass that is a window's new worst or
 * warned of. */
#include "core/stall_guard.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"

void stall_guard_describe(const struct loop_pass *pass, char *buf, size_t len)
{
	if (pass->worst)
		snprintf(buf, len, "%s", pass->worst);
	else if (pass->fd >= 0)
		snprintf(buf, len, "%s on fd %d", pass->kind, pass->fd);
	else
		snprintf(buf, len, "%s", pass->kind ? pass->kind : "");
}

/* A line opens a window of STALL_WARN_EVERY_MS in which only a pass more
 * than twice as long as the worst written in it is written too: a storm of
 * slow passes writes a handful of lines, and a small stall never hides a
 * large one. The rest are counted into the next line. */
static void warn(struct stall_guard *g, const struct loop_pass *pass, uint64_t now)
{
	bool window = g->warned_ms && now - g->warned_ms < STALL_WARN_EVERY_MS;
	if (window && pass->ns <= 2 * g->warned_ns) {
		g->unwarned++;
		if (pass->ns > g->unwarned_ns)
			g->unwarned_ns = pass->ns;
		return;
	}
	char what[STALL_WHAT_MAX], more[128] = "";
	stall_guard_describe(pass, what, sizeof(what));
	if (g->unwarned)
		snprintf(more, sizeof(more), "; %llu more over loop_stall_warn since the last line, the worst %.1f ms",
			 (unsigned long long)g->unwarned, (double)g->unwarned_ns / 1e6);
	log_warn("the event loop was held %.1f ms in one pass (loop_stall_warn %lld ms): longest %.1f ms in %s, "
		 "%u callbacks in the pass%s",
		 (double)pass->ns / 1e6, (long long)g->cfg->loop_stall_warn_ms, (double)pass->worst_ns / 1e6, what,
		 pass->callbacks, more);
	if (!window)
		g->warned_ms = now;
	g->warned_ns = pass->ns;
	g->unwarned = 0;
	g->unwarned_ns = 0;
}

static void on_pass(void *arg, const struct loop_pass *pass)
{
	struct stall_guard *g = arg;
	metrics_observe(&g->m->loop_pass_seconds, pass->ns);
	uint64_t now = loop_now(g->lp), epoch = now / STALL_WINDOW_MS;
	struct stall_window *w = &g->win[epoch % STALL_WINDOWS];
	if (w->epoch != epoch) {
		w->epoch = epoch;
		w->ns = 0;
		w->what[0] = '\0';
	}
	if (pass->ns > w->ns) {
		w->ns = pass->ns;
		stall_guard_describe(pass, w->what, sizeof(w->what));
	}
	uint64_t limit = (uint64_t)g->cfg->loop_stall_warn_ms * 1000000;
	if (limit && pass->ns >= limit) {
		g->m->loop_stalls++;
		warn(g, pass, now);
	}
}

void stall_guard_start(struct stall_guard *g, struct loop *lp, const struct config *cfg, struct metrics *m)
{
	memset(g, 0, sizeof(*g));
	g->cfg = cfg;
	g->m = m;
	g->lp = lp;
	loop_on_pass(lp, on_pass, g);
}

void stall_guard_stop(struct stall_guard *g)
{
	if (g->lp)
		loop_on_pass(g->lp, NULL, NULL);
	g->lp = NULL;
}

uint64_t stall_guard_worst(const struct stall_guard *g, uint64_t now_ms, const char **what)
{
	uint64_t epoch = now_ms / STALL_WINDOW_MS, worst = 0;
	*what = "";
	for (size_t i = 0; i < STALL_WINDOWS; i++) {
		const struct stall_window *w = &g->win[i];
		if (w->epoch + STALL_WINDOWS > epoch && w->ns > worst) {
			worst = w->ns;
			*what = w->what;
		}
	}
	return worst;
}
