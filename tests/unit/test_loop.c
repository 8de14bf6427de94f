/* SPDX-License-Identifier: BSD-2-Clause */
/* test_loop.c: the event loop. Timers fire in due order (many, with equal
 * and random due times, some stopped or restarted while inside the heap,
 * checked against a sorted reference); deferred work runs at the end of its
 * pass and work deferred by deferred work in the next pass, after a poll
 * that does not block; fd watchers on pipes, eventfds and socketpairs see
 * the events they asked for, follow loop_modify, and never get a stale
 * event from earlier in the same batch, even when an fd number is closed and
 * reused by a new watcher in that pass; loop_stop ends loop_run; every pass
 * is reported to the pass hook with its longest callback, named by the
 * label that callback set (cut to a bound), or else by its kind and fd.
 *
 * Every loop run is bounded by a safety timer, so a broken loop fails the
 * test instead of hanging it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "common/loop.h"
#include "common/util.h"

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* ---- Safety: every run ends within a bound. ---- */

static void stop_cb(void *arg)
{
	loop_stop(arg);
}

static struct loop_timer safety;
static bool safety_fired;

static void on_safety(void *arg)
{
	safety_fired = true;
	loop_stop(arg);
}

/* Run lp until a callback calls loop_stop, or for at most ms. Returns
 * whether it ended by itself (not by the safety timer). */
static bool run_bounded(struct loop *lp, uint64_t ms)
{
	safety_fired = false;
	loop_timer_start(lp, &safety, ms, on_safety, lp);
	int r = loop_run(lp);
	loop_timer_stop(lp, &safety);
	if (r != 0)
		fprintf(stderr, "  loop_run returned %d\n", r);
	return r == 0 && !safety_fired;
}

/* ---- Timers ---- */

struct tt {
	struct loop_timer t;
	struct loop *lp;
	uint64_t due;
	bool stopped;
	int fired;
	uint64_t fired_iter;
	uint64_t fired_at;
	bool late_ok; /* fired at or after its due time */
};

static uint64_t *fire_due; /* due times in firing order */
static size_t nfired, want_fired;
static struct tt **fire_who;

static void on_tt(void *arg)
{
	struct tt *x = arg;
	x->fired++;
	x->fired_iter = loop_iterations(x->lp);
	x->late_ok = loop_now(x->lp) >= x->due;
	fire_due[nfired] = x->t.due_ms;
	fire_who[nfired] = x;
	nfired++;
	if (nfired == want_fired)
		loop_stop(x->lp);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Start n timers with random delays in [0, spread], then stop or restart a
 * random share of them at random heap positions; run; compare the firing
 * order with the sorted due times of the survivors. */
static void timer_round(size_t n, uint32_t spread, uint32_t stop_pct, uint32_t restart_pct)
{
	struct loop *lp = loop_new();
	CHECK(lp != NULL);
	struct tt *ts = xcalloc(n, sizeof(*ts));
	fire_due = xcalloc(n, sizeof(*fire_due));
	fire_who = xcalloc(n, sizeof(*fire_who));
	nfired = 0;
	size_t inactive = 0;
	for (size_t i = 0; i < n; i++) {
		ts[i].lp = lp;
		loop_timer_start(lp, &ts[i].t, rnd32() % (spread + 1), on_tt, &ts[i]);
		ts[i].due = ts[i].t.due_ms;
		inactive += !loop_timer_active(&ts[i].t);
	}
	CHECK_EQ_INT(inactive, 0);
	/* Stops and restarts in a random order, hitting every heap position. */
	for (size_t k = 0; k < n; k++) {
		struct tt *x = &ts[rnd32() % n];
		uint32_t roll = rnd32() % 100;
		if (roll < stop_pct) {
			loop_timer_stop(lp, &x->t);
			loop_timer_stop(lp, &x->t); /* a second stop does nothing */
			x->stopped = true;
		} else if (roll < stop_pct + restart_pct) {
			loop_timer_start(lp, &x->t, rnd32() % (spread + 1), on_tt, x);
			x->due = x->t.due_ms;
			x->stopped = false;
		}
	}
	uint64_t *want = xcalloc(n, sizeof(*want));
	size_t nw = 0;
	size_t wrong_active = 0;
	for (size_t i = 0; i < n; i++) {
		wrong_active += loop_timer_active(&ts[i].t) != !ts[i].stopped;
		if (!ts[i].stopped)
			want[nw++] = ts[i].due;
	}
	CHECK_EQ_INT(wrong_active, 0);
	qsort(want, nw, sizeof(*want), cmp_u64);
	want_fired = nw;
	bool ended = nw == 0 || run_bounded(lp, 5000);
	CHECK(ended);
	CHECK_EQ_INT(nfired, nw);
	size_t order_bad = 0, dup = 0, stale = 0, early = 0;
	for (size_t i = 0; i < nfired && i < nw; i++) {
		if (fire_due[i] != want[i])
			order_bad++;
		if (fire_who[i]->fired != 1)
			dup++;
		if (fire_who[i]->stopped)
			stale++;
		if (!fire_who[i]->late_ok)
			early++;
	}
	CHECK_EQ_INT(order_bad, 0);
	CHECK_EQ_INT(dup, 0);
	CHECK_EQ_INT(stale, 0);
	CHECK_EQ_INT(early, 0);
	size_t still_active = 0;
	for (size_t i = 0; i < n; i++)
		still_active += loop_timer_active(&ts[i].t);
	CHECK_EQ_INT(still_active, 0);
	free(want);
	free(fire_due);
	free(fire_who);
	free(ts);
	loop_free(lp);
}

static void test_timer_order(void)
{
	timer_round(1, 0, 0, 0);
	timer_round(2, 1, 0, 0);
	timer_round(300, 0, 0, 0);     /* all equal */
	timer_round(2000, 3, 0, 0);    /* a few distinct due times, many equal */
	timer_round(3000, 40, 0, 0);   /* random */
	timer_round(3000, 30, 40, 0);  /* random with stops anywhere in the heap */
	timer_round(3000, 30, 20, 30); /* stops and restarts */
	timer_round(500, 20, 100, 0);  /* almost everything stopped */
	timer_round(64, 5, 30, 30);    /* right at the heap's first growth */
	timer_round(65, 5, 30, 30);
}

/* Timers that stop other timers from inside their callbacks. */
static struct tt mut[200];
static size_t mut_n;

static void on_mut(void *arg)
{
	struct tt *x = arg;
	x->fired++;
	nfired++;
	/* Stop one other still-pending timer, chosen at random. */
	for (int tries = 0; tries < 8; tries++) {
		struct tt *y = &mut[rnd32() % mut_n];
		if (y != x && loop_timer_active(&y->t)) {
			loop_timer_stop(x->lp, &y->t);
			y->stopped = true;
			break;
		}
	}
	size_t settled = 0;
	for (size_t i = 0; i < mut_n; i++)
		settled += mut[i].fired || mut[i].stopped;
	if (settled == mut_n)
		loop_stop(x->lp);
}

static void test_timer_stop_in_callback(void)
{
	struct loop *lp = loop_new();
	memset(mut, 0, sizeof(mut));
	mut_n = sizeof(mut) / sizeof(mut[0]);
	nfired = 0;
	for (size_t i = 0; i < mut_n; i++) {
		mut[i].lp = lp;
		/* Half share one due time, the rest spread out a little. */
		loop_timer_start(lp, &mut[i].t, i % 2 ? 2 : rnd32() % 10, on_mut, &mut[i]);
	}
	CHECK(run_bounded(lp, 5000));
	size_t both = 0, neither = 0, multi = 0;
	for (size_t i = 0; i < mut_n; i++) {
		both += mut[i].fired && mut[i].stopped;
		neither += !mut[i].fired && !mut[i].stopped;
		multi += mut[i].fired > 1;
	}
	CHECK_EQ_INT(both, 0);
	CHECK_EQ_INT(neither, 0);
	CHECK_EQ_INT(multi, 0);
	CHECK(nfired > 0 && nfired < mut_n);
	loop_free(lp);
}

/* Restarting an active timer moves it; it fires once, at the new time. */
static struct tt rs;
static uint64_t rs_started;
static int rs_periodic_left;
static uint64_t rs_iters[8];

static void on_rs(void *arg)
{
	struct tt *x = arg;
	x->fired++;
	x->late_ok = loop_now(x->lp) >= x->due;
	loop_stop(x->lp);
}

static void on_periodic(void *arg)
{
	struct tt *x = arg;
	rs_iters[x->fired] = loop_iterations(x->lp);
	x->fired++;
	if (--rs_periodic_left > 0) {
		loop_timer_start(x->lp, &x->t, 1, on_periodic, x);
		x->due = x->t.due_ms;
	} else {
		loop_stop(x->lp);
	}
}

static void test_timer_restart(void)
{
	struct loop *lp = loop_new();
	/* Far, then near: fires soon, once. */
	memset(&rs, 0, sizeof(rs));
	rs.lp = lp;
	loop_timer_start(lp, &rs.t, 100000, on_rs, &rs);
	uint64_t far_due = rs.t.due_ms;
	loop_timer_start(lp, &rs.t, 2, on_rs, &rs);
	rs.due = rs.t.due_ms;
	CHECK(rs.due < far_due);
	CHECK(loop_timer_active(&rs.t));
	rs_started = clock_mono_ms();
	CHECK(run_bounded(lp, 3000));
	CHECK_EQ_INT(rs.fired, 1);
	CHECK(rs.late_ok);
	CHECK(clock_mono_ms() - rs_started < 2000);
	CHECK(!loop_timer_active(&rs.t));

	/* Near, then far: not before the new time. */
	memset(&rs, 0, sizeof(rs));
	rs.lp = lp;
	loop_timer_start(lp, &rs.t, 1, on_rs, &rs);
	loop_timer_start(lp, &rs.t, 60, on_rs, &rs);
	rs.due = rs.t.due_ms;
	rs_started = loop_now(lp);
	CHECK(run_bounded(lp, 3000));
	CHECK_EQ_INT(rs.fired, 1);
	CHECK(rs.late_ok);
	CHECK(loop_now(lp) >= rs_started + 60);

	/* Restarted with other timers around it in the heap. */
	struct tt others[50];
	memset(others, 0, sizeof(others));
	nfired = 0;
	want_fired = 1000; /* never reached: on_rs stops the loop */
	fire_due = xcalloc(64, sizeof(*fire_due));
	fire_who = xcalloc(64, sizeof(*fire_who));
	for (int i = 0; i < 50; i++) {
		others[i].lp = lp;
		loop_timer_start(lp, &others[i].t, 10000 + (uint64_t)i, on_tt, &others[i]);
	}
	memset(&rs, 0, sizeof(rs));
	rs.lp = lp;
	loop_timer_start(lp, &rs.t, 20000, on_rs, &rs);
	loop_timer_start(lp, &rs.t, 1, on_rs, &rs);
	rs.due = rs.t.due_ms;
	CHECK(run_bounded(lp, 3000));
	CHECK_EQ_INT(rs.fired, 1);
	CHECK_EQ_INT(nfired, 0);
	for (int i = 0; i < 50; i++)
		loop_timer_stop(lp, &others[i].t);
	free(fire_due);
	free(fire_who);

	/* A timer that re-arms itself from its callback fires once a pass. */
	memset(&rs, 0, sizeof(rs));
	rs.lp = lp;
	rs_periodic_left = 5;
	loop_timer_start(lp, &rs.t, 1, on_periodic, &rs);
	CHECK(run_bounded(lp, 3000));
	CHECK_EQ_INT(rs.fired, 5);
	bool distinct = true;
	for (int i = 1; i < 5; i++)
		distinct &= rs_iters[i] > rs_iters[i - 1];
	CHECK(distinct);
	loop_free(lp);
}

/* A timer re-armed with no delay from its own callback (hub.c does this to
 * spread a long fan-out or catch-up over passes) should fire again in a
 * later pass, after the sockets were polled. The first fire makes an
 * eventfd readable; its callback should run before the second fire. */
static struct loop_timer zt;
static int zt_fires, zt_efd, zt_io_count;
static uint64_t zt_first_iter, zt_last_iter;
static bool zt_io_between;

static void on_zero(void *arg)
{
	struct loop *lp = arg;
	if (zt_fires == 0) {
		zt_first_iter = loop_iterations(lp);
		uint64_t one = 1;
		if (write(zt_efd, &one, sizeof(one)) != sizeof(one))
			abort();
	} else if (zt_fires == 1) {
		zt_io_between = zt_io_count > 0;
	}
	zt_last_iter = loop_iterations(lp);
	zt_fires++;
	if (zt_fires < 20)
		loop_timer_start(lp, &zt, 0, on_zero, lp);
	else
		loop_stop(lp);
}

static void on_zero_io(void *arg, uint32_t events)
{
	(void)arg;
	(void)events;
	uint64_t v;
	if (read(zt_efd, &v, sizeof(v)) == sizeof(v))
		zt_io_count++;
}

static void test_timer_zero_rearm(void)
{
	struct loop *lp = loop_new();
	zt_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK_EQ_INT(loop_watch(lp, zt_efd, EPOLLIN, on_zero_io, NULL), 0);
	zt_fires = zt_io_count = 0;
	zt_io_between = false;
	memset(&zt, 0, sizeof(zt));
	loop_timer_start(lp, &zt, 0, on_zero, lp);
	CHECK(run_bounded(lp, 3000));
	CHECK_EQ_INT(zt_fires, 20);
	/* One fire per pass, with the eventfd served in between (run_timers
	 * once kept popping a zero-delay re-arm within the same pass). */
	CHECK(zt_last_iter > zt_first_iter && zt_io_between);
	loop_unwatch(lp, zt_efd);
	close(zt_efd);
	loop_free(lp);
}

/* Timers armed before a pass are not held back by a timer that keeps
 * re-arming itself with no delay: the spinner runs until every older timer
 * has fired, and each of those fires once, close to its due time. */
static struct loop_timer spin_t;
static int spin_runs;
static struct tt older[100];
static size_t older_fired;

static void on_spin(void *arg)
{
	struct loop *lp = arg;
	/* The cap turns a same-pass spin (the clock frozen, so the older
	 * timers never come due) into a failure instead of a hang. */
	if (++spin_runs > 1000000)
		return;
	if (older_fired == sizeof(older) / sizeof(older[0]))
		loop_stop(lp);
	else
		loop_timer_start(lp, &spin_t, 0, on_spin, lp);
}

static void on_older(void *arg)
{
	struct tt *x = arg;
	x->fired++;
	x->fired_at = loop_now(x->lp);
	older_fired++;
}

static void test_timer_zero_rearm_fairness(void)
{
	struct loop *lp = loop_new();
	memset(older, 0, sizeof(older));
	older_fired = 0;
	spin_runs = 0;
	memset(&spin_t, 0, sizeof(spin_t));
	loop_timer_start(lp, &spin_t, 0, on_spin, lp);
	for (size_t i = 0; i < sizeof(older) / sizeof(older[0]); i++) {
		older[i].lp = lp;
		loop_timer_start(lp, &older[i].t, i % 5, on_older, &older[i]);
		older[i].due = older[i].t.due_ms;
	}
	CHECK(run_bounded(lp, 3000));
	loop_timer_stop(lp, &spin_t);
	CHECK_EQ_INT(older_fired, sizeof(older) / sizeof(older[0]));
	size_t multi = 0, late = 0;
	for (size_t i = 0; i < sizeof(older) / sizeof(older[0]); i++) {
		multi += older[i].fired != 1;
		if (older[i].fired && older[i].fired_at > older[i].due + 200)
			late++;
	}
	CHECK_EQ_INT(multi, 0);
	CHECK_EQ_INT(late, 0);
	CHECK(spin_runs > 1);
	loop_free(lp);
}

/* ---- Deferred work ---- */

struct rec {
	char what[16];
	uint64_t iter;
	uint64_t now;
};
static struct rec recs[4096];
static size_t nrec;
static struct loop *cur;

static void record(const char *what)
{
	if (nrec < sizeof(recs) / sizeof(recs[0])) {
		snprintf(recs[nrec].what, sizeof(recs[nrec].what), "%s", what);
		recs[nrec].iter = loop_iterations(cur);
		recs[nrec].now = loop_now(cur);
	}
	nrec++;
}

static const struct rec *find(const char *what)
{
	for (size_t i = 0; i < nrec && i < sizeof(recs) / sizeof(recs[0]); i++)
		if (strcmp(recs[i].what, what) == 0)
			return &recs[i];
	return NULL;
}

static int pos_of(const char *what)
{
	const struct rec *r = find(what);
	return r ? (int)(r - recs) : -1;
}

static int pipe_a[2], pipe_b[2];

static void on_pipe_a(void *arg, uint32_t events)
{
	(void)arg;
	char b[64];
	if (events & EPOLLIN)
		while (read(pipe_a[0], b, sizeof(b)) > 0)
			;
	record("io-a");
}

static void on_pipe_b(void *arg, uint32_t events)
{
	(void)arg;
	char b[64];
	if (events & EPOLLIN)
		while (read(pipe_b[0], b, sizeof(b)) > 0)
			;
	record("io-b");
}

static void d_second(void *arg)
{
	(void)arg;
	record("d3");
	loop_stop(cur);
}

static void d_first(void *arg)
{
	(void)arg;
	record("d1");
	/* Deferred from deferred work: next pass. Make an fd readable so the
	 * next pass's poll has something to report before d3 runs. */
	loop_defer(cur, d_second, NULL);
	CHECK(write(pipe_b[1], "x", 1) == 1);
}

static void d_plain(void *arg)
{
	record(arg);
}

static struct loop_timer t_now;
static void on_t_now(void *arg)
{
	(void)arg;
	record("timer");
}

static void test_defer_order(void)
{
	cur = loop_new();
	nrec = 0;
	CHECK_EQ_INT(pipe2(pipe_a, O_NONBLOCK | O_CLOEXEC), 0);
	CHECK_EQ_INT(pipe2(pipe_b, O_NONBLOCK | O_CLOEXEC), 0);
	CHECK_EQ_INT(loop_watch(cur, pipe_a[0], EPOLLIN, on_pipe_a, NULL), 0);
	CHECK_EQ_INT(loop_watch(cur, pipe_b[0], EPOLLIN, on_pipe_b, NULL), 0);
	CHECK(write(pipe_a[1], "x", 1) == 1);
	loop_timer_start(cur, &t_now, 0, on_t_now, NULL);
	/* Deferred before the loop runs: at the end of the first pass, in
	 * order, after that pass's I/O and timers. */
	loop_defer(cur, d_first, NULL);
	loop_defer(cur, d_plain, "d2");
	CHECK(run_bounded(cur, 3000));

	const struct rec *io_a = find("io-a"), *tm = find("timer"), *d1 = find("d1"), *d2 = find("d2"),
			 *io_b = find("io-b"), *d3 = find("d3");
	CHECK(io_a && tm && d1 && d2 && io_b && d3);
	if (io_a && tm && d1 && d2 && io_b && d3) {
		CHECK_EQ_INT(io_a->iter, 1);
		CHECK_EQ_INT(tm->iter, 1);
		CHECK_EQ_INT(d1->iter, 1);
		CHECK_EQ_INT(d2->iter, 1);
		CHECK(pos_of("io-a") < pos_of("timer"));
		CHECK(pos_of("timer") < pos_of("d1"));
		CHECK(pos_of("d1") < pos_of("d2"));
		/* d3, deferred by d1, waits for the next pass, whose poll saw
		 * pipe b first. */
		CHECK_EQ_INT(d3->iter, 2);
		CHECK_EQ_INT(io_b->iter, 2);
		CHECK(pos_of("d2") < pos_of("io-b"));
		CHECK(pos_of("io-b") < pos_of("d3"));
	}
	loop_unwatch(cur, pipe_a[0]);
	loop_unwatch(cur, pipe_b[0]);
	for (int i = 0; i < 2; i++) {
		close(pipe_a[i]);
		close(pipe_b[i]);
	}
	loop_free(cur);
}

/* The poll before deferred-by-deferred work does not block, even with no
 * fd activity and only a far timer. */
static struct loop_timer far_timer;
static void on_far(void *arg)
{
	(void)arg;
	record("far");
	loop_stop(cur);
}

static void d_late(void *arg)
{
	(void)arg;
	record("late");
	loop_stop(cur);
}

static void d_early(void *arg)
{
	(void)arg;
	record("early");
	loop_defer(cur, d_late, NULL);
}

static void test_defer_nonblocking(void)
{
	cur = loop_new();
	nrec = 0;
	loop_timer_start(cur, &far_timer, 1500, on_far, NULL);
	loop_defer(cur, d_early, NULL);
	uint64_t t0 = clock_mono_ms();
	CHECK(run_bounded(cur, 3000));
	const struct rec *e = find("early"), *l = find("late");
	CHECK(e && l && !find("far"));
	if (e && l) {
		CHECK_EQ_INT(l->iter, e->iter + 1);
		CHECK(l->now - e->now < 500);
	}
	CHECK(clock_mono_ms() - t0 < 1000);
	loop_timer_stop(cur, &far_timer);
	loop_free(cur);
}

/* Many deferred calls run in order; more queued during the drain (growing
 * the queue under the drain) wait for the next pass, also in order. */
static int seq_next, seq_bad, seq_late_next;
static uint64_t seq_iter;

static void d_seq_late(void *arg)
{
	int i = (int)(intptr_t)arg;
	if (i != seq_late_next++)
		seq_bad++;
	if (loop_iterations(cur) != seq_iter + 1)
		seq_bad++;
	if (i == 1499)
		loop_stop(cur);
}

static void d_seq(void *arg)
{
	int i = (int)(intptr_t)arg;
	if (i != seq_next++)
		seq_bad++;
	if (i == 0) {
		seq_iter = loop_iterations(cur);
		for (int k = 0; k < 1500; k++)
			loop_defer(cur, d_seq_late, (void *)(intptr_t)k);
	} else if (loop_iterations(cur) != seq_iter) {
		seq_bad++;
	}
}

static void test_defer_many(void)
{
	cur = loop_new();
	seq_next = seq_bad = seq_late_next = 0;
	for (int i = 0; i < 1000; i++)
		loop_defer(cur, d_seq, (void *)(intptr_t)i);
	CHECK(run_bounded(cur, 3000));
	CHECK_EQ_INT(seq_next, 1000);
	CHECK_EQ_INT(seq_late_next, 1500);
	CHECK_EQ_INT(seq_bad, 0);
	loop_free(cur);
}

/* Work that re-defers itself forever does not starve fds or timers. */
static int chain_runs, chain_io, chain_timer;
static uint64_t chain_io_iter;
static int chain_efd;
static struct loop_timer chain_t;

static void d_chain(void *arg)
{
	(void)arg;
	chain_runs++;
	if (chain_timer && chain_io) {
		loop_stop(cur);
		return;
	}
	if (chain_runs > 100000) {
		loop_stop(cur);
		return;
	}
	loop_defer(cur, d_chain, NULL);
}

static void on_chain_io(void *arg, uint32_t events)
{
	(void)arg;
	(void)events;
	uint64_t v;
	if (read(chain_efd, &v, sizeof(v)) == sizeof(v))
		chain_io++;
	chain_io_iter = loop_iterations(cur);
}

static void on_chain_timer(void *arg)
{
	(void)arg;
	chain_timer = 1;
}

static void d_kick(void *arg)
{
	(void)arg;
	uint64_t one = 1;
	if (write(chain_efd, &one, sizeof(one)) != sizeof(one))
		abort();
}

static void test_defer_chain_no_starvation(void)
{
	cur = loop_new();
	chain_runs = chain_io = chain_timer = 0;
	chain_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK_EQ_INT(loop_watch(cur, chain_efd, EPOLLIN, on_chain_io, NULL), 0);
	loop_defer(cur, d_chain, NULL);
	loop_defer(cur, d_kick, NULL); /* the fd turns readable at the end of pass 1 */
	loop_timer_start(cur, &chain_t, 5, on_chain_timer, NULL);
	CHECK(run_bounded(cur, 3000));
	CHECK_EQ_INT(chain_io, 1);
	CHECK_EQ_INT(chain_io_iter, 2);
	CHECK_EQ_INT(chain_timer, 1);
	CHECK(chain_runs < 100000);
	loop_unwatch(cur, chain_efd);
	close(chain_efd);
	loop_free(cur);
}

/* ---- fd watchers ---- */

struct w {
	int fd;
	int calls;
	uint32_t events_or;
	uint32_t last_events;
	uint64_t first_iter, last_iter;
	bool drain;
	int stop_after;
	void *tag;
};

static void on_w(void *arg, uint32_t events)
{
	struct w *w = arg;
	if (!w->calls)
		w->first_iter = loop_iterations(cur);
	w->calls++;
	w->events_or |= events;
	w->last_events = events;
	w->last_iter = loop_iterations(cur);
	if (w->drain && (events & EPOLLIN)) {
		char b[256];
		while (read(w->fd, b, sizeof(b)) > 0)
			;
	}
	if (w->stop_after && w->calls >= w->stop_after)
		loop_stop(cur);
}

static void test_watch_basic(void)
{
	cur = loop_new();
	/* A pipe: EPOLLIN with our argument. */
	int p[2];
	CHECK_EQ_INT(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	struct w wp = { .fd = p[0], .drain = true, .stop_after = 1 };
	CHECK_EQ_INT(loop_watch(cur, p[0], EPOLLIN, on_w, &wp), 0);
	CHECK(write(p[1], "hello", 5) == 5);
	CHECK(run_bounded(cur, 2000));
	CHECK_EQ_INT(wp.calls, 1);
	CHECK(wp.last_events & EPOLLIN);
	CHECK(!(wp.last_events & EPOLLOUT));

	/* The write end closed: the read end reports a hangup. */
	close(p[1]);
	wp.calls = 0;
	wp.events_or = 0;
	CHECK(run_bounded(cur, 2000));
	CHECK(wp.events_or & EPOLLHUP);
	loop_unwatch(cur, p[0]);
	loop_unwatch(cur, p[0]); /* twice is harmless */
	close(p[0]);

	/* An eventfd. */
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct w we = { .fd = efd, .drain = true, .stop_after = 1 };
	CHECK_EQ_INT(loop_watch(cur, efd, EPOLLIN, on_w, &we), 0);
	uint64_t one = 1;
	CHECK(write(efd, &one, sizeof(one)) == sizeof(one));
	CHECK(run_bounded(cur, 2000));
	CHECK_EQ_INT(we.calls, 1);
	CHECK(we.last_events == EPOLLIN);

	/* Watching again replaces callback, argument and events. */
	struct w we2 = { .fd = efd, .drain = true, .stop_after = 1 };
	CHECK_EQ_INT(loop_watch(cur, efd, EPOLLIN | EPOLLOUT, on_w, &we2), 0);
	CHECK(run_bounded(cur, 2000));
	CHECK_EQ_INT(we.calls, 1);
	CHECK_EQ_INT(we2.calls, 1);
	CHECK(we2.last_events & EPOLLOUT);
	loop_unwatch(cur, efd);
	close(efd);

	/* A high fd number grows the table. */
	int hp[2];
	CHECK_EQ_INT(pipe2(hp, O_NONBLOCK | O_CLOEXEC), 0);
	int high = fcntl(hp[0], F_DUPFD_CLOEXEC, 700);
	CHECK(high >= 700);
	struct w wh = { .fd = high, .drain = true, .stop_after = 1 };
	CHECK_EQ_INT(loop_watch(cur, high, EPOLLIN, on_w, &wh), 0);
	CHECK(write(hp[1], "x", 1) == 1);
	CHECK(run_bounded(cur, 2000));
	CHECK_EQ_INT(wh.calls, 1);
	loop_unwatch(cur, high);
	close(high);
	close(hp[0]);
	close(hp[1]);

	/* Errors. */
	CHECK_EQ_INT(loop_watch(cur, -1, EPOLLIN, on_w, NULL), -EBADF);
	int closed = eventfd(0, EFD_CLOEXEC);
	close(closed);
	CHECK_EQ_INT(loop_watch(cur, closed, EPOLLIN, on_w, NULL), -EBADF);
	CHECK_EQ_INT(loop_modify(cur, closed, EPOLLOUT), -EBADF);
	CHECK_EQ_INT(loop_modify(cur, -1, EPOLLOUT), -EBADF);
	CHECK_EQ_INT(loop_modify(cur, 100000, EPOLLOUT), -EBADF);
	loop_unwatch(cur, -1);
	loop_unwatch(cur, 100000);
	loop_unwatch(cur, closed);
	FILE *f = tmpfile();
	CHECK(f != NULL);
	if (f) {
		CHECK_EQ_INT(loop_watch(cur, fileno(f), EPOLLIN, on_w, NULL), -EPERM);
		CHECK_EQ_INT(loop_modify(cur, fileno(f), EPOLLIN), -EBADF);
		fclose(f);
	}
	loop_free(cur);
}

/* loop_modify changes what a socket reports. */
static int sp[2];
static int mod_phase;
static struct loop_timer mod_t;
static int mod_out_after_modify;

static void on_sock(void *arg, uint32_t events)
{
	struct w *w = arg;
	w->calls++;
	if (mod_phase == 0) {
		/* Writable at once. */
		CHECK(events & EPOLLOUT);
		CHECK_EQ_INT(loop_modify(cur, sp[0], EPOLLIN), 0);
		CHECK_EQ_INT(loop_modify(cur, sp[0], EPOLLIN), 0); /* no change: fine */
		mod_phase = 1;
		return;
	}
	if ((events & EPOLLOUT) && mod_phase < 3)
		mod_out_after_modify++;
	if (mod_phase == 2 && (events & EPOLLIN)) {
		char b[16];
		CHECK(read(sp[0], b, sizeof(b)) == 3);
		/* And back to EPOLLOUT: reported again. */
		CHECK_EQ_INT(loop_modify(cur, sp[0], EPOLLOUT), 0);
		mod_phase = 3;
		return;
	}
	if (mod_phase == 3 && (events & EPOLLOUT)) {
		mod_phase = 4;
		loop_stop(cur);
	}
}

static void on_mod_t(void *arg)
{
	(void)arg;
	/* Several quiet passes after the modify: no EPOLLOUT arrived. */
	CHECK(send(sp[1], "abc", 3, 0) == 3);
	mod_phase = 2;
}

static void test_modify(void)
{
	cur = loop_new();
	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp), 0);
	struct w ws = { .fd = sp[0] };
	mod_phase = 0;
	mod_out_after_modify = 0;
	CHECK_EQ_INT(loop_watch(cur, sp[0], EPOLLOUT, on_sock, &ws), 0);
	loop_timer_start(cur, &mod_t, 30, on_mod_t, NULL);
	CHECK(run_bounded(cur, 3000));
	CHECK_EQ_INT(mod_phase, 4);
	CHECK_EQ_INT(mod_out_after_modify, 0);
	/* Interest on a watched fd: EPOLLOUT now; unwatch makes modify fail. */
	loop_unwatch(cur, sp[0]);
	CHECK_EQ_INT(loop_modify(cur, sp[0], EPOLLIN), -EBADF);
	close(sp[0]);
	close(sp[1]);
	loop_free(cur);
}

/* Stale events. NFD eventfds are all readable before the pass, so their
 * events arrive in one batch. Whichever callback runs first unwatches every
 * other fd; half of those it closes and replaces, at the same fd number,
 * with a new watcher (some of the new fds readable at once, some not); the
 * rest it leaves unwatched. In that pass no other callback may run: not the
 * old ones (removed), not the new ones (their events can only come from a
 * later poll). */
#define NFD 24
static struct w olds[NFD], news[NFD];
static int first_called = -1;
static uint64_t first_iter;
static struct loop_timer stale_t;

static void on_old(void *arg, uint32_t events)
{
	struct w *w = arg;
	on_w(arg, events);
	if (first_called >= 0)
		return;
	first_called = (int)(w - olds);
	first_iter = loop_iterations(cur);
	for (int i = 0; i < NFD; i++) {
		if (i == first_called)
			continue;
		loop_unwatch(cur, olds[i].fd);
		if (i % 2)
			continue; /* removed, fd left open and readable */
		int nfd = eventfd(i % 4 == 0 ? 1 : 0, EFD_NONBLOCK | EFD_CLOEXEC);
		CHECK(nfd >= 0);
		/* Take over the old number, as a quick accept() would. */
		CHECK_EQ_INT(dup3(nfd, olds[i].fd, O_CLOEXEC), olds[i].fd);
		close(nfd);
		news[i].fd = olds[i].fd;
		news[i].drain = true;
		CHECK_EQ_INT(loop_watch(cur, news[i].fd, EPOLLIN, on_w, &news[i]), 0);
	}
}

static void on_stale_t(void *arg)
{
	(void)arg;
	/* Make the not-yet-readable replacements readable. */
	uint64_t one = 1;
	for (int i = 0; i < NFD; i += 2)
		if (news[i].fd > 0 && i % 4 != 0)
			CHECK(write(news[i].fd, &one, sizeof(one)) == sizeof(one));
	loop_timer_start(cur, &stale_t, 20, stop_cb, cur);
}

static void test_stale_events(void)
{
	cur = loop_new();
	memset(olds, 0, sizeof(olds));
	memset(news, 0, sizeof(news));
	first_called = -1;
	for (int i = 0; i < NFD; i++) {
		olds[i].fd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
		olds[i].drain = true;
		CHECK_EQ_INT(loop_watch(cur, olds[i].fd, EPOLLIN, on_old, &olds[i]), 0);
	}
	loop_timer_start(cur, &stale_t, 15, on_stale_t, NULL);
	CHECK(run_bounded(cur, 2000)); /* ends by stale_t's loop_stop */
	CHECK(first_called >= 0);
	int old_calls = 0, new_same_pass = 0, new_calls = 0, new_missing = 0, wrong_events = 0;
	for (int i = 0; i < NFD; i++) {
		if (i == first_called)
			continue;
		old_calls += olds[i].calls;
		if (i % 2)
			continue;
		new_calls += news[i].calls;
		if (news[i].calls && news[i].first_iter <= first_iter)
			new_same_pass++;
		if (!news[i].calls)
			new_missing++;
		if (news[i].calls && news[i].events_or != EPOLLIN)
			wrong_events++;
	}
	CHECK_EQ_INT(old_calls, 0);
	CHECK_EQ_INT(new_same_pass, 0);
	CHECK_EQ_INT(new_missing, 0); /* the new watchers work */
	CHECK_EQ_INT(wrong_events, 0);
	CHECK(new_calls > 0);
	for (int i = 0; i < NFD; i++) {
		loop_unwatch(cur, olds[i].fd);
		close(olds[i].fd);
	}
	loop_free(cur);
}

/* Re-watching the same fd number without closing it in the same pass also
 * drops the batch's leftover event for it. */
static struct w rw_a, rw_b, rw_b2;
static int rw_first = -1;

static void on_rw(void *arg, uint32_t events)
{
	struct w *w = arg;
	on_w(arg, events);
	if (rw_first >= 0)
		return;
	rw_first = w == &rw_a ? 0 : 1;
	struct w *other = w == &rw_a ? &rw_b : &rw_a;
	loop_unwatch(cur, other->fd);
	rw_b2.fd = other->fd;
	rw_b2.drain = true;
	rw_b2.stop_after = 1;
	CHECK_EQ_INT(loop_watch(cur, other->fd, EPOLLIN, on_w, &rw_b2), 0);
}

static void test_rewatch_same_pass(void)
{
	cur = loop_new();
	memset(&rw_a, 0, sizeof(rw_a));
	memset(&rw_b, 0, sizeof(rw_b));
	memset(&rw_b2, 0, sizeof(rw_b2));
	rw_first = -1;
	rw_a.fd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
	rw_b.fd = eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
	rw_a.drain = rw_b.drain = true;
	CHECK_EQ_INT(loop_watch(cur, rw_a.fd, EPOLLIN, on_rw, &rw_a), 0);
	CHECK_EQ_INT(loop_watch(cur, rw_b.fd, EPOLLIN, on_rw, &rw_b), 0);
	CHECK(run_bounded(cur, 2000));
	struct w *first = rw_first == 0 ? &rw_a : &rw_b, *other = rw_first == 0 ? &rw_b : &rw_a;
	CHECK_EQ_INT(first->calls, 1);
	CHECK_EQ_INT(other->calls, 0);
	CHECK_EQ_INT(rw_b2.calls, 1);
	CHECK(rw_b2.first_iter > first->first_iter);
	loop_unwatch(cur, rw_a.fd);
	loop_unwatch(cur, rw_b.fd);
	close(rw_a.fd);
	close(rw_b.fd);
	loop_free(cur);
}

/* ---- loop_stop, the clock, iterations ---- */

static int stop_efd;
static int after_stop_deferred;
static void d_after_stop(void *arg)
{
	(void)arg;
	after_stop_deferred++;
}

static void on_stop_io(void *arg, uint32_t events)
{
	(void)arg;
	(void)events;
	uint64_t v;
	if (read(stop_efd, &v, sizeof(v)) < 0)
		return;
	loop_defer(cur, d_after_stop, NULL);
	loop_stop(cur);
}

static void test_stop(void)
{
	cur = loop_new();
	stop_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK_EQ_INT(loop_watch(cur, stop_efd, EPOLLIN, on_stop_io, NULL), 0);
	uint64_t one = 1;
	CHECK(write(stop_efd, &one, sizeof(one)) == sizeof(one));
	uint64_t it0 = loop_iterations(cur), now0 = loop_now(cur);
	after_stop_deferred = 0;
	CHECK(run_bounded(cur, 2000));
	/* The pass that called loop_stop finishes its deferred work. */
	CHECK_EQ_INT(after_stop_deferred, 1);
	CHECK_EQ_INT(loop_iterations(cur), it0 + 1);
	CHECK(loop_now(cur) >= now0);
	CHECK(loop_now(cur) <= clock_mono_ms());
	/* The loop runs again after a stop. */
	CHECK(write(stop_efd, &one, sizeof(one)) == sizeof(one));
	CHECK(run_bounded(cur, 2000));
	CHECK_EQ_INT(after_stop_deferred, 2);
	CHECK_EQ_INT(loop_iterations(cur), it0 + 2);

	/* Stopped from a timer: loop_run returns 0 after about that long. */
	struct loop_timer t;
	memset(&t, 0, sizeof(t));
	uint64_t t0 = loop_now(cur);
	loop_timer_start(cur, &t, 25, stop_cb, cur);
	CHECK(run_bounded(cur, 2000));
	CHECK(loop_now(cur) >= t0 + 25);
	CHECK(loop_now(cur) < t0 + 1500);

	/* Freed with a watcher and a timer still registered: nothing leaks. */
	loop_timer_start(cur, &t, 100000, stop_cb, cur);
	loop_free(cur);
	close(stop_efd);
	loop_free(NULL);
}

/* epoll_wait failing hard ends loop_run with -errno: the loop's epoll fd is
 * swapped for an eventfd under it. */
static void test_run_error(void)
{
	int probe = dup(0);
	close(probe);
	struct loop *lp = loop_new();
	/* loop_new's epoll fd took the lowest free number, which probe found. */
	char path[64], link[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", probe);
	ssize_t ln = readlink(path, link, sizeof(link) - 1);
	link[ln > 0 ? ln : 0] = '\0';
	CHECK(strstr(link, "eventpoll") != NULL);
	if (!strstr(link, "eventpoll")) {
		loop_free(lp);
		return;
	}
	int efd = eventfd(0, EFD_CLOEXEC);
	CHECK_EQ_INT(dup2(efd, probe), probe);
	close(efd);
	CHECK_EQ_INT(loop_run(lp), -EINVAL);
	loop_free(lp); /* closes the eventfd now at that number */
}

/* ---- Pass timing: the hook hears of the longest callback and its label. ---- */

struct seen_pass {
	uint64_t ns, worst_ns;
	char worst[200];
	bool labelled;
	const char *kind;
	int fd;
	unsigned callbacks;
};
static struct seen_pass seen[16];
static size_t nseen;

static void on_pass_seen(void *arg, const struct loop_pass *p)
{
	(void)arg;
	if (nseen == ARRAY_LEN(seen))
		return;
	struct seen_pass *s = &seen[nseen++];
	s->ns = p->ns;
	s->worst_ns = p->worst_ns;
	s->labelled = p->worst != NULL;
	snprintf(s->worst, sizeof(s->worst), "%s", p->worst ? p->worst : "");
	s->kind = p->kind;
	s->fd = p->fd;
	s->callbacks = p->callbacks;
}

/* Busy for at least ms: a lower bound that a loaded machine only lengthens. */
static void spin_ms(uint64_t ms)
{
	uint64_t t0 = clock_mono_ns();
	while (clock_mono_ns() - t0 < ms * 1000000)
		;
}

static int pass_efd;
static int pass_step;
static void pass_next(void *arg);

/* A deferred callback with a label longer than the bound. */
static void pass_long_label(void *arg)
{
	char what[400];
	memset(what, 'x', sizeof(what) - 1);
	what[sizeof(what) - 1] = '\0';
	loop_label(arg, what, "peer");
	spin_ms(25);
	loop_stop(arg);
}

static void pass_io(void *arg, uint32_t events)
{
	(void)events;
	uint64_t v;
	if (read(pass_efd, &v, sizeof(v)) < 0)
		return;
	if (pass_step == 0) {
		loop_label(arg, "GET /slow", "127.0.0.1");
		spin_ms(30);
	} else if (pass_step == 2) {
		spin_ms(20); /* no label of its own: named by kind and fd */
		loop_defer(arg, pass_next, arg);
	}
}

static void pass_slow_timer(void *arg)
{
	(void)arg;
	spin_ms(20);
}

static void pass_next(void *arg)
{
	struct loop *lp = arg;
	pass_step++;
	if (pass_step == 1) {
		/* A labelled callback that is short, then an unlabelled timer
		 * that is long: the label must not stick to the timer. */
		loop_label(lp, "short", NULL);
		static struct loop_timer t;
		loop_timer_start(lp, &t, 0, pass_slow_timer, lp);
		loop_defer(lp, pass_next, lp);
	} else if (pass_step == 2) {
		uint64_t one = 1; /* pass_io, in the next pass, goes on */
		CHECK(write(pass_efd, &one, sizeof(one)) == sizeof(one));
	} else {
		loop_defer(lp, pass_long_label, lp); /* in the pass after */
	}
}

/* The first pass of seen whose longest callback took at least ms, or NULL. */
static const struct seen_pass *slow_pass(size_t from, uint64_t ms)
{
	for (size_t i = from; i < nseen; i++)
		if (seen[i].worst_ns >= ms * 1000000)
			return &seen[i];
	return NULL;
}

static void test_pass_timing(void)
{
	struct loop *lp = loop_new();
	nseen = 0;
	pass_step = 0;
	pass_efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	CHECK(pass_efd >= 0);
	CHECK_EQ_INT(loop_watch(lp, pass_efd, EPOLLIN, pass_io, lp), 0);
	loop_on_pass(lp, on_pass_seen, NULL);
	uint64_t one = 1;
	CHECK(write(pass_efd, &one, sizeof(one)) == sizeof(one));
	loop_defer(lp, pass_next, lp);
	CHECK(run_bounded(lp, 5000));

	/* Pass 1: the labelled I/O callback of 30 ms is the longest. */
	const struct seen_pass *p = slow_pass(0, 30);
	CHECK(p != NULL);
	if (p) {
		CHECK(p->labelled);
		CHECK(strcmp(p->worst, "GET /slow from 127.0.0.1") == 0);
		CHECK(strcmp(p->kind, "I/O") == 0);
		CHECK_EQ_INT(p->fd, pass_efd);
		CHECK(p->ns >= p->worst_ns);
		CHECK(p->callbacks >= 2); /* the I/O and the deferred pass_next */
	}
	/* Pass 2: the unlabelled timer of 20 ms, not the labelled short one. */
	size_t at = p ? (size_t)(p - seen) + 1 : 0;
	p = slow_pass(at, 20);
	CHECK(p != NULL);
	if (p) {
		CHECK(!p->labelled);
		CHECK(strcmp(p->kind, "timer") == 0);
		CHECK_EQ_INT(p->fd, -1);
		at = (size_t)(p - seen) + 1;
	}
	/* Pass 3: an unlabelled I/O callback: its kind and fd. */
	p = slow_pass(at, 20);
	CHECK(p != NULL);
	if (p) {
		CHECK(!p->labelled);
		CHECK(strcmp(p->kind, "I/O") == 0);
		CHECK_EQ_INT(p->fd, pass_efd);
		at = (size_t)(p - seen) + 1;
	}
	/* Pass 4: a deferred callback with a label longer than the bound. */
	p = slow_pass(at, 25);
	CHECK(p != NULL);
	if (p) {
		CHECK(p->labelled);
		CHECK(strcmp(p->kind, "deferred work") == 0);
		CHECK_EQ_INT(strlen(p->worst), 159);
		CHECK(p->worst[0] == 'x' && p->worst[158] == 'x');
	}
	/* Every pass that ran a callback was reported, and no quiet one. */
	for (size_t i = 0; i < nseen; i++)
		CHECK(seen[i].callbacks > 0);
	loop_on_pass(lp, NULL, NULL);
	loop_unwatch(lp, pass_efd);
	close(pass_efd);
	loop_free(lp);
}

int main(void)
{
	uint64_t t0 = clock_mono_ms();
	test_timer_order();
	test_timer_stop_in_callback();
	test_timer_restart();
	test_timer_zero_rearm();
	test_timer_zero_rearm_fairness();
	test_defer_order();
	test_defer_nonblocking();
	test_defer_many();
	test_defer_chain_no_starvation();
	test_watch_basic();
	test_modify();
	test_stale_events();
	test_rewatch_same_pass();
	test_stop();
	test_run_error();
	test_pass_timing();
	CHECK(clock_mono_ms() - t0 < 8000);
	return check_done("test_loop");
}
