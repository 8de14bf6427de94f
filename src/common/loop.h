/* SPDX-License-Identifier: BSD-2-Clause */
/* loop.h: the event loop, the only caller of epoll_*. It owns fd watchers
 * (an fd-indexed table), timers (a min-heap of caller-owned nodes), and a
 * deferred-work queue run once at the end of every iteration.
 *
 * One thread; callbacks run one at a time. A watcher removed during a pass
 * gets no further events in that pass, even if its fd number is reused.
 *
 * Every pass is timed, and each callback in it: a hook (loop_on_pass) hears
 * of every pass with its longest callback and that callback's label, which
 * the module running it may set (loop_label), so a stalled loop names its
 * cause without a profiler. */
#ifndef HERALD_LOOP_H
#define HERALD_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>

struct loop;

typedef void (*loop_io_cb)(void *arg, uint32_t events);
typedef void (*loop_fn)(void *arg);

/* A timer node lives inside its owner's struct; the loop never frees it. */
struct loop_timer {
	uint64_t due_ms;
	uint64_t seq;
	size_t heap_idx; /* 0 = not scheduled; otherwise index + 1 */
	loop_fn cb;
	void *arg;
};

/* Returns NULL (errno set) if epoll_create1 fails. */
struct loop *loop_new(void);
/* Frees the loop; watchers and timers still registered are forgotten. */
void loop_free(struct loop *lp);

/* Watch fd for events (EPOLLIN, EPOLLOUT, ...), or change what is watched:
 * epoll_ctl runs only when the set really changes. Returns 0 or -errno. */
int loop_watch(struct loop *lp, int fd, uint32_t events, loop_io_cb cb, void *arg);
/* Change only the event set of a watched fd. Returns 0 or -errno. */
int loop_modify(struct loop *lp, int fd, uint32_t events);
/* Stop watching fd; call before close(fd). Unknown fds are ignored. */
void loop_unwatch(struct loop *lp, int fd);

/* (Re)arm t to fire once after delay_ms. */
void loop_timer_start(struct loop *lp, struct loop_timer *t, uint64_t delay_ms, loop_fn cb, void *arg);
void loop_timer_stop(struct loop *lp, struct loop_timer *t);
static inline bool loop_timer_active(const struct loop_timer *t)
{
	return t->heap_idx != 0;
}

/* Run fn(arg) once at the end of the current iteration. Work deferred from
 * deferred work runs at the end of the next iteration, after a non-blocking
 * poll of the sockets. */
void loop_defer(struct loop *lp, loop_fn fn, void *arg);

/* The monotonic clock in ms, read once per iteration. */
uint64_t loop_now(const struct loop *lp);
uint64_t loop_iterations(const struct loop *lp);

/* What the callback now running works on, for the pass's report when it
 * is the pass's longest: what (a request, a task) and who (a peer, or
 * NULL). Both are copied, cut to a bounded length; the label is cleared
 * before every callback, so one without a label is named by its kind. */
void loop_label(struct loop *lp, const char *what, const char *who);

/* One pass of the loop, from epoll_wait's return to the end of its
 * deferred work (the wait itself is not counted). */
struct loop_pass {
	uint64_t ns;        /* the whole pass */
	uint64_t worst_ns;  /* its longest callback */
	const char *worst;  /* that callback's label ("what from who"), or NULL */
	const char *kind;   /* its kind: "I/O", "timer" or "deferred work" */
	int fd;             /* for I/O, the watched fd; else -1 */
	unsigned callbacks; /* watchers, timers and deferred work run */
};
typedef void (*loop_pass_fn)(void *arg, const struct loop_pass *pass);
/* Call fn(arg, pass) at the end of every pass that ran a callback; pass and
 * its label are valid during the call only. NULL stops it. The label is
 * formatted here, not per callback: a callback pays two clock reads. */
void loop_on_pass(struct loop *lp, loop_pass_fn fn, void *arg);

/* Run until loop_stop. Returns 0, or -errno if epoll_wait fails hard. */
int loop_run(struct loop *lp);
void loop_stop(struct loop *lp);

#endif
