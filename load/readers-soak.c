/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-soak.c: load/readers N --soak S. N readers stay open for S
 * seconds while events are INSERTed at --rate and a second process, the
 * churner, connects and leaves --churn times a second: a stream read up to
 * its opening frame and dropped, then a GET /api/health read to its end, in
 * turn, each on a new connection. Every --sample seconds herald's RSS and
 * CPU are read from /proc; the report gives the first sample, the first
 * after --warmup, the last, and the least-squares slope of RSS after the
 * warm-up (KiB a minute), herald's CPU per event, what the churner did, and
 * each reader's ids checked: every event once, in order, none missed. */
#include "readers.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the churner did, in memory shared with it. */
struct churn_counts {
	long streams, requests, failed;
	int first_errno;
};

struct sample {
	double t;     /* seconds since the soak began */
	long rss_kb;  /* herald's resident set */
	double cpu_s; /* herald's CPU since it started */
	long events;  /* published by then */
};

static double cpu_s(pid_t pid)
{
	uint64_t ticks;
	if (tool_cpu_ticks(pid, 0, &ticks) != 0)
		return NAN;
	return (double)ticks / (double)procstat_clk_tck();
}

/* Connect to a, send req, and read until the answer holds until (or the
 * connection ends, when until is NULL); 0 when it did, else an errno. */
static int churn_one(const struct tool_addr *a, const char *req, const char *until)
{
	int fd = socket(a->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	struct timeval tv = { .tv_sec = 5 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	int err = 0;
	char buf[4096];
	size_t len = 0;
	if (connect(fd, (struct sockaddr *)&a->sa, a->len) != 0 ||
	    write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		err = errno ? errno : EIO;
	} else {
		for (;;) {
			ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				err = errno;
				break;
			}
			len += (size_t)r;
			buf[len] = '\0';
			if (until && strstr(buf, until))
				break;
			if (r == 0 || len == sizeof(buf) - 1) {
				if (until || strncmp(buf, "HTTP/1.1 200 ", 13) != 0)
					err = EPROTO;
				break;
			}
		}
	}
	close(fd);
	return err;
}

/* The churner's life: connect and leave rate times a second until killed. */
static void churn_loop(const struct tool_addr *a, long rate, struct churn_counts *cc)
{
	char stream[512], health[512];
	const char *host = a->family == AF_UNIX ? "localhost" : a->text;
	snprintf(stream, sizeof(stream),
		 "GET /api/events/stream HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", host);
	snprintf(health, sizeof(health), "GET /api/health HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", host);
	double step = 1.0 / (double)rate, next = tool_now_s();
	for (long k = 0;; k++) {
		int err = k % 2 ? churn_one(a, health, NULL) : churn_one(a, stream, ": stream open\n\n");
		if (err) {
			if (!cc->failed)
				cc->first_errno = err;
			cc->failed++;
		} else if (k % 2) {
			cc->requests++;
		} else {
			cc->streams++;
		}
		next += step;
		double left = next - tool_now_s();
		if (left > 0)
			tool_sleep(left, NULL);
		else if (left < -1)
			next = tool_now_s(); /* fell behind: no burst to catch up */
	}
}

/* Start the churner; its pid, or 0 when none (rate 0 or fork failed). */
static pid_t churn_start(const struct tool_addr *a, long rate, struct churn_counts *cc)
{
	if (rate <= 0)
		return 0;
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(0);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		churn_loop(a, rate, cc);
		_exit(0);
	}
	return pid > 0 ? pid : 0;
}

/* Least-squares slope of RSS (KiB) against time (minutes) over s[from..n). */
static double rss_slope(const struct sample *s, long from, long n)
{
	long k = n - from;
	if (k < 2)
		return NAN;
	double mt = 0, mr = 0;
	for (long i = from; i < n; i++) {
		mt += s[i].t / 60;
		mr += (double)s[i].rss_kb;
	}
	mt /= (double)k;
	mr /= (double)k;
	double num = 0, den = 0;
	for (long i = from; i < n; i++) {
		num += (s[i].t / 60 - mt) * ((double)s[i].rss_kb - mr);
		den += (s[i].t / 60 - mt) * (s[i].t / 60 - mt);
	}
	return den > 0 ? num / den : NAN;
}

int soak_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
	     struct publisher *pub, volatile int *stop)
{
	struct tls tls = { 0 };
	struct events ev;
	struct client *c = tracked_client_new(o, target, request, &tls, &ev);
	if (!c)
		return 1;
	struct churn_counts *cc = mmap(NULL, sizeof(*cc), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (cc == MAP_FAILED) {
		fprintf(stderr, "readers: mmap: %s\n", strerror(errno));
		client_free(c);
		events_free(&ev);
		return 1;
	}
	memset(cc, 0, sizeof(*cc));

	fprintf(stderr, "readers: opening %ld readers to %s\n", o->n, target->text);
	int64_t t_begin = tool_now_ns();
	int64_t deadline = t_begin + (int64_t)(o->open_timeout * 1e9);
	while (c->c.settled < c->n && !*stop && tool_now_ns() < deadline) {
		int more = client_connect_more(c, o->ramp);
		client_loop_once(c, more ? 0 : 10);
	}
	client_give_up(c);
	long opened = c->c.opened;

	long cap = (long)(o->soak / o->sample) + 3;
	struct sample *smp = xcalloc((size_t)cap, sizeof(*smp));
	long ns = 0;
	pid_t churner = churn_start(target, o->churn, cc);
	fprintf(stderr, "readers: %ld of %ld open; soaking %g s at %ld events/s, churn %ld/s, RSS every %g s\n", opened,
		o->n, o->soak, o->rate, o->churn, o->sample);
	struct steady st;
	steady_start(&st, pub, o->rate);
	double t0 = tool_now_s(), next_sample = t0, next_note = t0 + 60;
	for (;;) {
		double now = tool_now_s();
		if (now >= next_sample && ns < cap) {
			smp[ns] = (struct sample){ .t = now - t0,
						   .rss_kb = tool_rss_kb(h->pid, 0),
						   .cpu_s = cpu_s(h->pid),
						   .events = st.published };
			ns++;
			next_sample += o->sample;
		}
		if (now >= next_note) {
			fprintf(stderr,
				"readers: %.0f s: %ld events, herald RSS %ld KiB, %ld readers open, churn %ld+%ld\n",
				now - t0, st.published, smp[ns - 1].rss_kb, c->c.open, cc->streams, cc->requests);
			next_note += 60;
		}
		if (*stop || now - t0 >= o->soak)
			break;
		int wait = steady_tick(&st);
		client_loop_once(c, wait < 50 ? wait : 50);
	}
	double soak_s = tool_now_s() - t0;
	if (churner > 0) {
		kill(churner, SIGTERM);
		waitpid(churner, NULL, 0);
	}
	/* The last sample, after the last event was published. */
	if (ns < cap)
		smp[ns++] = (struct sample){
			.t = soak_s, .rss_kb = tool_rss_kb(h->pid, 0), .cpu_s = cpu_s(h->pid), .events = st.published
		};
	int64_t wait_until = tool_now_ns() + (int64_t)(o->event_timeout * 1e9);
	for (;;) {
		int all = 1;
		for (long i = 0; i < c->n && all; i++)
			if (c->r[i].t_open && c->r[i].last_id < st.last_id)
				all = 0;
		if (all || *stop || tool_now_ns() > wait_until)
			break;
		client_loop_once(c, 10);
	}
	struct id_verdict v;
	ids_verdict(c, st.first_id, st.last_id, &v);
	long closed = 0;
	for (int k = 0; k < E_KINDS; k++)
		closed += c->c.closed_after_open[k];
	client_free(c);
	events_free(&ev);
	int herald_exit = tool_herald_stop(h, o->keep);

	long warm = 0;
	while (warm < ns - 1 && smp[warm].t < o->warmup)
		warm++;
	double slope = rss_slope(smp, warm, ns);
	double cpu_total = ns ? smp[ns - 1].cpu_s - smp[0].cpu_s : NAN;
	double cpu_pct = ns && soak_s > 0 ? cpu_total / (smp[ns - 1].t - smp[0].t) * 100 : NAN;
	double per_event_ms = st.published ? cpu_total / (double)st.published * 1e3 : NAN;

	char cN[32], cE[32], b1[32];
	tool_fmt_count(o->n, cN, sizeof(cN));
	tool_fmt_count(st.published, cE, sizeof(cE));
	/* The churner waits for each answer, so a busy herald slows it: the
	 * rate it reached is shown beside the one asked for. */
	double churn_rate = soak_s > 0 ? (double)(cc->streams + cc->requests) / soak_s : NAN;
	printf("| readers | events/s | length | events | churn: streams, requests (failed), per s | RSS first | "
	       "RSS after warm-up | RSS last | slope after warm-up | herald CPU | CPU per event | missed | "
	       "duplicated | readers with every event once |\n");
	printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %ld | %s | %s | %ld, %ld (%ld), %.1f/s | %.1f MiB | %.1f MiB (%.0f s) | %.1f MiB | "
	       "**%+.1f KiB/min** | %.2f %% of a core | %.2f ms | %lld | %lld | %ld of %ld |\n",
	       cN, o->rate, tool_fmt_dur(soak_s, b1, sizeof(b1)), cE, cc->streams, cc->requests, cc->failed, churn_rate,
	       ns ? (double)smp[0].rss_kb / 1024 : NAN, ns ? (double)smp[warm].rss_kb / 1024 : NAN,
	       ns ? smp[warm].t : NAN, ns ? (double)smp[ns - 1].rss_kb / 1024 : NAN, slope, cpu_pct, per_event_ms,
	       v.gaps, v.dups, v.complete, v.readers);
	printf("\nRSS sampled %ld times, %g s apart; the slope is the least-squares fit over the samples after %g s "
	       "of warm-up. Streams closed by the server during the soak: %ld.%s\n\n",
	       ns, o->sample, o->warmup, closed,
	       cc->failed ? " The churning client's failures are connects or answers that did not complete." : "");

	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_text("mode", "soak");
	tool_json_int("n", o->n);
	tool_json_int("opened", opened);
	tool_json_int("rate", o->rate);
	tool_json_num("soak_s", soak_s);
	tool_json_num("warmup_s", o->warmup);
	tool_json_int("events_published", st.published);
	tool_json_int("events_failed", st.failed);
	tool_json_int("first_id", st.first_id);
	tool_json_int("last_id", st.last_id);
	tool_json_int("churn_streams", cc->streams);
	tool_json_int("churn_requests", cc->requests);
	tool_json_int("churn_failed", cc->failed);
	tool_json_num("churn_per_s", churn_rate);
	if (cc->failed)
		tool_json_text("churn_first_error", strerror(cc->first_errno));
	tool_json_int("rss_first_kb", ns ? smp[0].rss_kb : -1);
	tool_json_int("rss_warm_kb", ns ? smp[warm].rss_kb : -1);
	tool_json_int("rss_last_kb", ns ? smp[ns - 1].rss_kb : -1);
	tool_json_num("rss_slope_kib_per_min", slope);
	tool_json_num("cpu_pct", cpu_pct);
	tool_json_num("cpu_per_event_ms", per_event_ms);
	tool_json_int("closed_after_open", closed);
	ids_json(&v);
	tool_json_int("herald_exit", herald_exit);
	tool_json_open("samples", '[');
	for (long i = 0; i < ns; i++) {
		tool_json_open(NULL, '[');
		tool_json_num(NULL, smp[i].t);
		tool_json_int(NULL, smp[i].rss_kb);
		tool_json_num(NULL, smp[i].cpu_s);
		tool_json_close();
	}
	tool_json_close();
	tool_json_close();

	int ok = !*stop && opened == o->n && v.complete == v.readers && closed == 0 && st.failed == 0 &&
		 cc->failed == 0 && herald_exit == 0;
	munmap(cc, sizeof(*cc));
	free(smp);
	return ok ? 0 : 1;
}
