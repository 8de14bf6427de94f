/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-restart.c: load/readers N --restart, a reconnect storm. N readers
 * open on the herald readers.c started; events are INSERTed at --rate from
 * then on, without pause, to the end. After --before seconds herald gets
 * SIGTERM and ends every stream; once it has exited a new herald starts on
 * the same port and database, and the moment it is ready every reader
 * reconnects at once, each with Last-Event-ID of the last id it read (what
 * a browser's EventSource sends). --after seconds after every reader has
 * caught up, publishing stops and each reader's ids are checked: every id
 * from the first published to the last, once each, in order.
 *
 * Times: SIGTERM to the old herald's exit, SIGTERM to the new one's ready,
 * ready to every reader reopened (its opening frame read), and ready to
 * every reader caught up (it has read the newest event published by the
 * time the new herald was ready, so everything published while herald was
 * down). ListenOverflows and ListenDrops are read around the storm (ready to
 * caught up), and the new herald's CPU over it from /proc/PID/schedstat. */
#include "readers.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const ERR_KIND_NAMES[E_KINDS] = { "refused", "reset", "timeout", "non200", "closed", "other" };

/* One pass of the client while publishing goes on. */
static void pass(struct client *c, struct steady *st, int cap_ms)
{
	int wait = steady_tick(st);
	client_loop_once(c, wait < cap_ms ? wait : cap_ms);
}

/* Whether every reader that opened has read id or a later one. */
static int all_have(const struct client *c, int64_t id)
{
	for (long i = 0; i < c->n; i++)
		if (c->r[i].t_open && c->r[i].last_id < id)
			return 0;
	return 1;
}

struct storm {
	double term_to_exit, term_to_ready, ready_to_reopened, ready_to_caught_up;
	double cpu_storm_s, insert_max_s;
	long ended_by_ready, reopened, retries;
	long long ovf, drop;
	int old_exit, new_exit;
	int64_t term_id, ready_id;
};

int restart_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
		struct publisher *pub, volatile int *stop)
{
	struct tls tls = { 0 };
	struct events ev;
	struct client *c = tracked_client_new(o, target, request, &tls, &ev);
	if (!c)
		return 1;
	c->resume = 1;
	c->no_last_id = o->no_last_id;
	struct storm s = { .term_to_exit = NAN,
			   .term_to_ready = NAN,
			   .ready_to_reopened = NAN,
			   .ready_to_caught_up = NAN,
			   .cpu_storm_s = NAN,
			   .old_exit = -1,
			   .new_exit = -1 };
	int ok = 1;

	/* Open. */
	fprintf(stderr, "readers: opening %ld readers to %s\n", o->n, target->text);
	int64_t t_begin = tool_now_ns();
	int64_t deadline = t_begin + (int64_t)(o->open_timeout * 1e9);
	while (c->c.settled < c->n && !*stop && tool_now_ns() < deadline) {
		int more = client_connect_more(c, o->ramp);
		client_loop_once(c, more ? 0 : 10);
	}
	client_give_up(c);
	double open_s = c->c.opened ? (double)(c->c.t_last_open - t_begin) / 1e9 : NAN;
	long opened = c->c.opened;
	fprintf(stderr, "readers: %ld of %ld open in %.3f s; events at %ld/s from now\n", opened, o->n, open_s,
		o->rate);
	if (opened < o->n)
		ok = 0;

	/* Events before the restart. */
	struct steady st;
	steady_start(&st, pub, o->rate);
	int64_t until = tool_now_ns() + (int64_t)(o->before * 1e9);
	while (!*stop && tool_now_ns() < until)
		pass(c, &st, 50);

	/* SIGTERM, and wait for the old herald to exit, publishing on. */
	fprintf(stderr, "readers: SIGTERM to herald (pid %d) after id %lld\n", (int)h->pid, (long long)st.last_id);
	int64_t t_term = tool_now_ns();
	s.term_id = st.last_id;
	kill(h->pid, SIGTERM);
	int killed = 0;
	while (h->pid > 0) {
		int wst;
		pid_t r = waitpid(h->pid, &wst, WNOHANG);
		if (r == h->pid) {
			s.old_exit = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
			h->pid = 0;
			break;
		}
		if (!killed && tool_now_ns() - t_term > 15 * (int64_t)1000000000) {
			fprintf(stderr, "readers: herald did not exit within 15 s of SIGTERM; killing it\n");
			kill(h->pid, SIGKILL);
			killed = 1;
		}
		pass(c, &st, 5);
	}
	s.term_to_exit = (double)(tool_now_ns() - t_term) / 1e9;

	/* The new herald on the same port and database. */
	int ready = -1;
	if (!*stop && tool_herald_start_again(h, NULL) == 0) {
		int64_t give_up = tool_now_ns() + 30 * (int64_t)1000000000;
		while ((ready = tool_herald_ready(h)) == 0 && tool_now_ns() < give_up && !*stop)
			pass(c, &st, 2);
	}
	if (ready != 1) {
		fprintf(stderr, "readers: the new herald did not become ready\n");
		ok = 0;
	} else {
		int64_t t_ready = tool_now_ns();
		s.term_to_ready = (double)(t_ready - t_term) / 1e9;
		s.ready_id = st.last_id;
		s.ended_by_ready = c->c.ended;
		long long ovf0 = tool_tcpext_now("ListenOverflows"), drop0 = tool_tcpext_now("ListenDrops");
		double cpu0 = tool_cpu_run_s(h->pid);
		fprintf(stderr,
			"readers: new herald (pid %d) ready %.3f s after SIGTERM; %ld streams ended; newest id %lld; "
			"reconnecting\n",
			(int)h->pid, s.term_to_ready, c->c.ended, (long long)s.ready_id);

		/* The storm: every reader whose stream ended reconnects now. */
		int64_t storm_end = t_ready + (int64_t)(o->open_timeout * 1e9);
		int reopened = 0;
		while (!*stop && tool_now_ns() < storm_end) {
			long down = client_reconnect(c);
			pass(c, &st, down ? 0 : 10);
			if (!reopened && c->c.open == opened && c->c.down == 0 && c->c.inflight == 0) {
				reopened = 1;
				s.ready_to_reopened = (double)(c->c.t_last_reopen - t_ready) / 1e9;
			}
			if (reopened && all_have(c, s.ready_id)) {
				s.ready_to_caught_up = (double)(tool_now_ns() - t_ready) / 1e9;
				break;
			}
		}
		s.cpu_storm_s = tool_cpu_run_s(h->pid) - cpu0;
		long long ovf1 = tool_tcpext_now("ListenOverflows"), drop1 = tool_tcpext_now("ListenDrops");
		s.ovf = ovf0 >= 0 && ovf1 >= 0 ? ovf1 - ovf0 : -1;
		s.drop = drop0 >= 0 && drop1 >= 0 ? drop1 - drop0 : -1;
		if (isnan(s.ready_to_caught_up))
			ok = 0;
		fprintf(stderr, "readers: %ld reopened in %.3f s, all caught up %.3f s after ready\n", c->c.reopened,
			s.ready_to_reopened, s.ready_to_caught_up);

		/* Events after, then the last one must reach everybody. */
		until = tool_now_ns() + (int64_t)(o->after * 1e9);
		while (!*stop && tool_now_ns() < until)
			pass(c, &st, 50);
	}
	int64_t wait_until = tool_now_ns() + (int64_t)(o->event_timeout * 1e9);
	while (!*stop && !all_have(c, st.last_id) && tool_now_ns() < wait_until)
		client_loop_once(c, 10);

	struct id_verdict v;
	ids_verdict(c, st.first_id, st.last_id, &v);
	s.reopened = c->c.reopened;
	long non200[600];
	memcpy(non200, c->c.non200, sizeof(non200));
	long kinds[E_KINDS];
	for (int k = 0; k < E_KINDS; k++) {
		kinds[k] = c->c.reconnect_errs[k];
		s.retries += kinds[k];
	}
	s.insert_max_s = st.insert_max_s;
	client_free(c);
	events_free(&ev);
	s.new_exit = tool_herald_stop(h, o->keep);

	long events = st.published;
	char cN[32], cE[32], b[6][32];
	tool_fmt_count(o->n, cN, sizeof(cN));
	tool_fmt_count(events, cE, sizeof(cE));
	printf("| readers | events/s | SIGTERM to exit | SIGTERM to new herald ready | ready to all reopened | "
	       "ready to all caught up | reconnects failed (retried) | ListenOverflows | ListenDrops | events | "
	       "missed | duplicated | readers with every event once |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %ld | %s | %s | **%s** | **%s** | %ld | %lld | %lld | %s | %lld | %lld | %ld of %ld |\n", cN,
	       o->rate, tool_fmt_dur(s.term_to_exit, b[0], sizeof(b[0])),
	       tool_fmt_dur(s.term_to_ready, b[1], sizeof(b[1])), tool_fmt_dur(s.ready_to_reopened, b[2], sizeof(b[2])),
	       tool_fmt_dur(s.ready_to_caught_up, b[3], sizeof(b[3])), s.retries, s.ovf, s.drop, cE, v.gaps, v.dups,
	       v.complete, v.readers);
	printf("\nFirst opens: %ld of %ld in %s. Streams ended by the stop: %ld by the time the new herald was ready. "
	       "New herald's CPU from ready to all caught up (the reconnects, their catch-up, and the fan-out of the "
	       "events published meanwhile): %s. Slowest INSERT: %s.",
	       opened, o->n, tool_fmt_dur(open_s, b[4], sizeof(b[4])), s.ended_by_ready,
	       tool_fmt_dur(s.cpu_storm_s, b[5], sizeof(b[5])), tool_fmt_dur(s.insert_max_s, b[0], sizeof(b[0])));
	if (s.retries) {
		printf(" Reconnects that failed and were retried:");
		for (int k = 0; k < E_KINDS; k++)
			if (kinds[k])
				printf(" %s %ld", ERR_KIND_NAMES[k], kinds[k]);
		printf(".");
	}
	if (isnan(s.ready_to_caught_up))
		printf(" Not every reader had caught up %g s after the new herald was ready (--open-timeout).",
		       o->open_timeout);
	printf("\n\n");

	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_text("mode", "restart");
	tool_json_int("n", o->n);
	tool_json_int("opened", opened);
	tool_json_num("open_ms", open_s * 1e3);
	tool_json_int("rate", o->rate);
	tool_json_int("backlog", h->backlog);
	tool_json_num("term_to_exit_ms", s.term_to_exit * 1e3);
	tool_json_num("term_to_ready_ms", s.term_to_ready * 1e3);
	tool_json_num("ready_to_reopened_ms", s.ready_to_reopened * 1e3);
	tool_json_num("ready_to_caught_up_ms", s.ready_to_caught_up * 1e3);
	tool_json_int("streams_ended", s.ended_by_ready);
	tool_json_int("reopened", s.reopened);
	tool_json_int("reconnects_failed", s.retries);
	tool_json_open("reconnect_errors", '{');
	for (int k = 0; k < E_KINDS; k++)
		tool_json_int(ERR_KIND_NAMES[k], kinds[k]);
	tool_json_close();
	/* Opens and reconnects answered with another status than 200, by it. */
	tool_json_open("non200_status", '{');
	for (int k = 0; k < 600; k++)
		if (non200[k]) {
			char key[16];
			snprintf(key, sizeof(key), "%d", k);
			tool_json_int(key, non200[k]);
		}
	tool_json_close();
	tool_json_int("listen_overflows", s.ovf);
	tool_json_int("listen_drops", s.drop);
	tool_json_num("storm_cpu_ms", s.cpu_storm_s * 1e3);
	tool_json_num("insert_max_ms", s.insert_max_s * 1e3);
	tool_json_int("events_published", events);
	tool_json_int("events_failed", st.failed);
	tool_json_int("first_id", st.first_id);
	tool_json_int("term_id", s.term_id);
	tool_json_int("ready_id", s.ready_id);
	tool_json_int("last_id", st.last_id);
	ids_json(&v);
	tool_json_int("old_herald_exit", s.old_exit);
	tool_json_int("herald_exit", s.new_exit);
	tool_json_close();

	if (*stop || v.complete != v.readers || v.readers != o->n || st.failed || s.old_exit != 0 || s.new_exit != 0 ||
	    s.reopened != opened)
		ok = 0;
	return ok ? 0 : 1;
}
