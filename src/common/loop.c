/* SPDX-License-Identifier: BSD-2-Clause */
/* loop.c: epoll event loop with an fd-indexed watcher table, a timer heap
 * and a deferred-work queue.
 *
 * Stale events: epoll data carries the fd and the watcher's generation; a
 * watcher removed (or its fd closed and reused) earlier in the same pass has
 * a new generation, so its leftover events are skipped. */
#include "common/loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

/* Events taken per epoll_wait. Small enough that a pass stays short, so a
 * listener is served often during a connect storm: at 512, 10,000
 * simultaneous connects overflowed a 1024 backlog (691 drops, 1 s SYN
 * retransmits); at 128, none did. */
#define MAX_EVENTS 128

struct watcher {
	loop_io_cb cb;
	void *arg;
	uint32_t events;
	/* 31 bits of generation beside the flag: 24 bytes a watcher, one per
	 * descriptor, so a reader's share is 24 bytes and not 32. */
	uint32_t gen : 31;
	uint32_t active : 1;
};

struct deferred {
	loop_fn fn;
	void *arg;
};

#define LABEL_MAX 160

/* The timing of the pass under way: when the last callback ended, its
 * longest callback so far, and the labels. Two label buffers take turns:
 * the callback running writes one, and the longest so far keeps the other,
 * so a new longest costs a swap, not a copy. */
struct pass_clock {
	uint64_t mark_ns;
	uint64_t worst_ns;
	unsigned callbacks;
	const char *worst_kind;
	int worst_fd;
	int worst_label; /* index into label[] of the longest's label, or -1 */
	int cur;         /* index into label[] the running callback labels */
	bool labelled;   /* the running callback set its label */
	char label[2][LABEL_MAX];
};

struct loop {
	int epfd;
	bool stop;
	uint64_t now;
	uint64_t iterations;
	struct watcher *w;
	size_t nw;
	struct loop_timer **heap;
	size_t nheap, capheap;
	uint64_t timer_seq; /* start order, so a timer re-armed while timers run waits a pass */
	struct deferred *dq;
	size_t ndq, capdq;
	loop_pass_fn pass_fn;
	void *pass_arg;
	struct pass_clock pc;
};

struct loop *loop_new(void)
{
	int epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return NULL;
	struct loop *lp = xcalloc(1, sizeof(*lp));
	lp->epfd = epfd;
	lp->now = clock_mono_ms();
	return lp;
}

void loop_free(struct loop *lp)
{
	if (!lp)
		return;
	close(lp->epfd);
	free(lp->w);
	free(lp->heap);
	free(lp->dq);
	free(lp);
}

static struct watcher *watcher_slot(struct loop *lp, int fd)
{
	if ((size_t)fd >= lp->nw) {
		/* A quarter more at least (amortized O(1) still), in steps of
		 * 1,024: doubling kept up to half of the table zeroed and
		 * unused, 32 bytes a reader at 16,700 readers a worker. */
		size_t n = lp->nw + lp->nw / 4;
		if (n <= (size_t)fd)
			n = (size_t)fd + 1;
		n = (n + 1023) & ~(size_t)1023;
		lp->w = xrealloc(lp->w, n * sizeof(*lp->w));
		memset(lp->w + lp->nw, 0, (n - lp->nw) * sizeof(*lp->w));
		lp->nw = n;
	}
	return &lp->w[fd];
}

static uint64_t ev_data(int fd, uint32_t gen)
{
	return (uint64_t)(uint32_t)fd | ((uint64_t)gen << 32);
}

int loop_watch(struct loop *lp, int fd, uint32_t events, loop_io_cb cb, void *arg)
{
	if (fd < 0)
		return -EBADF;
	struct watcher *w = watcher_slot(lp, fd);
	if (w->active) {
		w->cb = cb;
		w->arg = arg;
		return loop_modify(lp, fd, events);
	}
	w->gen++;
	struct epoll_event ev = { .events = events, .data.u64 = ev_data(fd, w->gen) };
	if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		return -errno;
	w->cb = cb;
	w->arg = arg;
	w->events = events;
	w->active = true;
	return 0;
}

int loop_modify(struct loop *lp, int fd, uint32_t events)
{
	if (fd < 0 || (size_t)fd >= lp->nw || !lp->w[fd].active)
		return -EBADF;
	struct watcher *w = &lp->w[fd];
	if (w->events == events)
		return 0;
	struct epoll_event ev = { .events = events, .data.u64 = ev_data(fd, w->gen) };
	if (epoll_ctl(lp->epfd, EPOLL_CTL_MOD, fd, &ev) < 0)
		return -errno;
	w->events = events;
	return 0;
}

void loop_unwatch(struct loop *lp, int fd)
{
	if (fd < 0 || (size_t)fd >= lp->nw || !lp->w[fd].active)
		return;
	struct watcher *w = &lp->w[fd];
	epoll_ctl(lp->epfd, EPOLL_CTL_DEL, fd, NULL);
	w->active = false;
	w->gen++;
	w->cb = NULL;
	w->arg = NULL;
	w->events = 0;
}

/* Timer heap: a binary min-heap on due_ms of caller-owned nodes. */
static void heap_set(struct loop *lp, size_t i, struct loop_timer *t)
{
	lp->heap[i] = t;
	t->heap_idx = i + 1;
}

static void heap_up(struct loop *lp, size_t i)
{
	struct loop_timer *t = lp->heap[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (lp->heap[p]->due_ms <= t->due_ms)
			break;
		heap_set(lp, i, lp->heap[p]);
		i = p;
	}
	heap_set(lp, i, t);
}

static void heap_down(struct loop *lp, size_t i)
{
	struct loop_timer *t = lp->heap[i];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		uint64_t mdue = t->due_ms;
		if (l < lp->nheap && lp->heap[l]->due_ms < mdue) {
			m = l;
			mdue = lp->heap[l]->due_ms;
		}
		if (r < lp->nheap && lp->heap[r]->due_ms < mdue)
			m = r;
		if (m == i)
			break;
		heap_set(lp, i, lp->heap[m]);
		i = m;
	}
	heap_set(lp, i, t);
}

void loop_timer_stop(struct loop *lp, struct loop_timer *t)
{
	if (!t->heap_idx)
		return;
	size_t i = t->heap_idx - 1;
	t->heap_idx = 0;
	lp->nheap--;
	if (i == lp->nheap)
		return;
	lp->heap[i] = lp->heap[lp->nheap];
	lp->heap[i]->heap_idx = i + 1;
	heap_down(lp, i);
	heap_up(lp, lp->heap[i]->heap_idx - 1);
}

void loop_timer_start(struct loop *lp, struct loop_timer *t, uint64_t delay_ms, loop_fn cb, void *arg)
{
	loop_timer_stop(lp, t);
	t->due_ms = lp->now + delay_ms;
	t->seq = ++lp->timer_seq;
	t->cb = cb;
	t->arg = arg;
	if (lp->nheap == lp->capheap) {
		lp->capheap = lp->capheap ? lp->capheap * 2 : 64;
		lp->heap = xrealloc(lp->heap, lp->capheap * sizeof(*lp->heap));
	}
	heap_set(lp, lp->nheap, t);
	lp->nheap++;
	heap_up(lp, lp->nheap - 1);
}

void loop_defer(struct loop *lp, loop_fn fn, void *arg)
{
	if (lp->ndq == lp->capdq) {
		lp->capdq = lp->capdq ? lp->capdq * 2 : 64;
		lp->dq = xrealloc(lp->dq, lp->capdq * sizeof(*lp->dq));
	}
	lp->dq[lp->ndq++] = (struct deferred){ fn, arg };
}

uint64_t loop_now(const struct loop *lp)
{
	return lp->now;
}

uint64_t loop_iterations(const struct loop *lp)
{
	return lp->iterations;
}

void loop_stop(struct loop *lp)
{
	lp->stop = true;
}

void loop_label(struct loop *lp, const char *what, const char *who)
{
	char *d = lp->pc.label[lp->pc.cur], *end = d + LABEL_MAX - 1;
	/* A bounded copy by hand: snprintf would cost more than the label is
	 * worth on a callback that turns out short. */
	for (const char *s = what ? what : ""; *s && d < end; s++)
		*d++ = *s;
	if (who && *who) {
		for (const char *s = " from "; *s && d < end; s++)
			*d++ = *s;
		for (const char *s = who; *s && d < end; s++)
			*d++ = *s;
	}
	*d = '\0';
	lp->pc.labelled = true;
}

void loop_on_pass(struct loop *lp, loop_pass_fn fn, void *arg)
{
	lp->pass_fn = fn;
	lp->pass_arg = arg;
}

static inline void cb_begin(struct loop *lp)
{
	lp->pc.labelled = false;
}

/* A callback of this kind (and fd) has returned: time it against the
 * pass's longest. */
static void cb_end(struct loop *lp, const char *kind, int fd)
{
	struct pass_clock *pc = &lp->pc;
	uint64_t now = clock_mono_ns();
	uint64_t took = now - pc->mark_ns;
	pc->mark_ns = now;
	pc->callbacks++;
	if (took < pc->worst_ns && pc->callbacks > 1)
		return;
	pc->worst_ns = took;
	pc->worst_kind = kind;
	pc->worst_fd = fd;
	if (pc->labelled) {
		pc->worst_label = pc->cur;
		pc->cur ^= 1;
	} else {
		pc->worst_label = -1;
	}
}

static void pass_begin(struct loop *lp, uint64_t now_ns)
{
	struct pass_clock *pc = &lp->pc;
	pc->mark_ns = now_ns;
	pc->worst_ns = 0;
	pc->callbacks = 0;
	pc->worst_label = -1;
}

static void pass_report(struct loop *lp, uint64_t began_ns)
{
	struct pass_clock *pc = &lp->pc;
	if (!lp->pass_fn || !pc->callbacks)
		return;
	struct loop_pass pass = {
		.ns = pc->mark_ns - began_ns,
		.worst_ns = pc->worst_ns,
		.worst = pc->worst_label >= 0 ? pc->label[pc->worst_label] : NULL,
		.kind = pc->worst_kind,
		.fd = pc->worst_fd,
		.callbacks = pc->callbacks,
	};
	lp->pass_fn(lp->pass_arg, &pass);
}

static void run_timers(struct loop *lp)
{
	/* Only timers armed before this run: one re-armed from its own callback
	 * with no delay fires in the next pass, after the sockets are polled,
	 * instead of spinning here. */
	uint64_t limit = lp->timer_seq;
	while (lp->nheap && lp->heap[0]->due_ms <= lp->now && lp->heap[0]->seq <= limit) {
		struct loop_timer *t = lp->heap[0];
		loop_timer_stop(lp, t);
		cb_begin(lp);
		t->cb(t->arg);
		cb_end(lp, "timer", -1);
	}
}

static void run_deferred(struct loop *lp)
{
	/* Only what was queued before the drain runs now; work deferred by
	 * deferred work waits for the next pass, so no chain of it can starve
	 * the sockets. */
	size_t n = lp->ndq;
	for (size_t i = 0; i < n; i++) {
		struct deferred d = lp->dq[i];
		cb_begin(lp);
		d.fn(d.arg);
		cb_end(lp, "deferred work", -1);
	}
	if (lp->ndq > n)
		memmove(lp->dq, lp->dq + n, (lp->ndq - n) * sizeof(*lp->dq));
	lp->ndq -= n;
}

int loop_run(struct loop *lp)
{
	struct epoll_event evs[MAX_EVENTS];
	lp->stop = false;
	while (!lp->stop) {
		int timeout = -1;
		lp->now = clock_mono_ms();
		if (lp->ndq)
			timeout = 0;
		else if (lp->nheap)
			timeout = lp->heap[0]->due_ms <= lp->now ? 0 : (int)MIN(lp->heap[0]->due_ms - lp->now, 60000);
		int n = epoll_wait(lp->epfd, evs, MAX_EVENTS, timeout);
		if (n < 0) {
			if (errno != EINTR)
				return -errno;
			n = 0;
		}
		uint64_t began = clock_mono_ns();
		lp->now = began / 1000000;
		lp->iterations++;
		pass_begin(lp, began);
		for (int i = 0; i < n; i++) {
			int fd = (int)(uint32_t)evs[i].data.u64;
			uint32_t gen = (uint32_t)(evs[i].data.u64 >> 32);
			if ((size_t)fd >= lp->nw)
				continue;
			struct watcher *w = &lp->w[fd];
			if (!w->active || w->gen != gen)
				continue;
			cb_begin(lp);
			w->cb(w->arg, evs[i].events);
			cb_end(lp, "I/O", fd);
		}
		run_timers(lp);
		run_deferred(lp);
		pass_report(lp, began);
	}
	return 0;
}
