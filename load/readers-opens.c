/* SPDX-License-Identifier: BSD-2-Clause */
/* readers-opens.c: load/readers N --opens R. The same N readers opened at
 * once against herald and against load/minimal-sse (a server that only
 * accepts, reads to the end of the request head and writes the same head
 * and opening frame), R rounds each, alternating which goes first, in one
 * run: the minimal server is the floor, since with one client on the same
 * two cores the opens are bounded by the client's connect loop and the
 * kernel as much as by the server.
 *
 * Per round: the time from the first connect until the last reader had its
 * opening frame, readers that did not open, the server's CPU over the opens
 * (from /proc/PID/schedstat, in nanoseconds: both servers are one thread),
 * this client's CPU, and ListenOverflows. Between rounds every reader is
 * closed and the server is left to finish closing them (its CPU still). */
#include "readers.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { HERALD, MINIMAL, SERVERS };
static const char *const NAMES[SERVERS] = { "herald", "minimal-sse" };

struct round {
	double open_s; /* NAN when no reader opened */
	long opened, failed;
	double server_cpu_s, client_cpu_s;
	long long ovf;
};

/* This process's CPU time in seconds (the client's own cost). */
static double self_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Start load/minimal-sse with this backlog and read its port; its pid into
 * *pid. Returns the port, or -1 after saying why. */
static int minimal_start(int backlog, pid_t *pid)
{
	char path[4096], bl[32];
	tool_sibling("minimal-sse", path, sizeof(path));
	snprintf(bl, sizeof(bl), "%d", backlog);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return -1;
	pid_t p = fork();
	if (p < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (p == 0) {
		dup2(pfd[1], 1);
		execl(path, path, "--backlog", bl, (char *)NULL);
		fprintf(stderr, "readers: cannot run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	*pid = p;
	char line[256];
	size_t len = 0;
	double deadline = tool_now_s() + 10;
	while (len < sizeof(line) - 1 && !memchr(line, '\n', len) && tool_now_s() < deadline) {
		struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
		if (poll(&pf, 1, 200) <= 0)
			continue;
		ssize_t r = read(pfd[0], line + len, sizeof(line) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	line[len] = '\0';
	close(pfd[0]);
	const char *at = strstr(line, "listening on 127.0.0.1:");
	if (!at) {
		fprintf(stderr, "readers: %s did not say where it listens\n", path);
		kill(p, SIGTERM);
		waitpid(p, NULL, 0);
		*pid = 0;
		return -1;
	}
	return atoi(at + strlen("listening on 127.0.0.1:"));
}

/* Wait until a server's CPU stops moving (it has closed what the client
 * closed), at most 10 s. */
static void settle(pid_t pid)
{
	double last = tool_cpu_run_s(pid);
	int still = 0;
	double until = tool_now_s() + 10;
	while (still < 2 && tool_now_s() < until) {
		tool_sleep(0.1, NULL);
		double now = tool_cpu_run_s(pid);
		still = isnan(now) || now - last < 0.0005 ? still + 1 : 0;
		last = now;
	}
}

/* Open n readers at once against target, then close them all. */
static struct round open_round(const struct options *o, const struct tool_addr *target, const char *request, pid_t pid,
			       struct tls *tls, struct events *ev, volatile int *stop)
{
	struct round r = { .open_s = NAN };
	struct client *c = client_new(o->n, target, o->sources, request, tls, ev);
	if (!c) {
		r.failed = o->n;
		return r;
	}
	long long ovf0 = tool_tcpext_now("ListenOverflows");
	double cpu0 = tool_cpu_run_s(pid), self0 = self_cpu_s();
	int64_t t_begin = tool_now_ns();
	int64_t deadline = t_begin + (int64_t)(o->open_timeout * 1e9);
	while (c->c.settled < c->n && !*stop && tool_now_ns() < deadline) {
		int more = client_connect_more(c, o->ramp);
		client_loop_once(c, more ? 0 : 10);
	}
	client_give_up(c);
	r.server_cpu_s = tool_cpu_run_s(pid) - cpu0;
	r.client_cpu_s = self_cpu_s() - self0;
	long long ovf1 = tool_tcpext_now("ListenOverflows");
	r.ovf = ovf0 >= 0 && ovf1 >= 0 ? ovf1 - ovf0 : -1;
	r.opened = c->c.opened;
	r.failed = c->n - c->c.opened;
	if (c->c.opened)
		r.open_s = (double)(c->c.t_last_open - t_begin) / 1e9;
	client_free(c);
	settle(pid);
	return r;
}

static double median(const struct round *r, long n)
{
	double *v = xmalloc((size_t)n * sizeof(double));
	size_t k = 0;
	for (long i = 0; i < n; i++)
		if (!isnan(r[i].open_s))
			v[k++] = r[i].open_s;
	tool_sort_doubles(v, k);
	double m = tool_percentile(v, k, 50);
	free(v);
	return m;
}

int opens_run(const struct options *o, struct tool_herald *h, const struct tool_addr *target, const char *request,
	      volatile int *stop)
{
	pid_t mpid = 0;
	int mport = minimal_start(h->backlog, &mpid);
	if (mport < 0)
		return 1;
	struct tool_addr targets[SERVERS];
	targets[HERALD] = *target;
	char s[64];
	snprintf(s, sizeof(s), "127.0.0.1:%d", mport);
	tool_parse_addr(s, &targets[MINIMAL]);
	pid_t pids[SERVERS] = { h->pid, mpid };
	struct tls tls = { 0 };
	struct events ev;
	events_init(&ev, o->n, 1);
	struct round *rounds[SERVERS];
	for (int k = 0; k < SERVERS; k++)
		rounds[k] = xcalloc((size_t)o->opens, sizeof(struct round));
	long done = 0;
	for (long j = 0; j < o->opens && !*stop; j++) {
		for (int step = 0; step < SERVERS && !*stop; step++) {
			/* Even rounds start with the minimal server, odd ones with herald. */
			int k = (int)((j + step + 1) % SERVERS);
			fprintf(stderr, "readers: round %ld of %ld: opening %ld readers to %s (%s)\n", j + 1, o->opens,
				o->n, NAMES[k], targets[k].text);
			rounds[k][j] = open_round(o, &targets[k], request, pids[k], &tls, &ev, stop);
			char b[32];
			fprintf(stderr, "readers: %ld of %ld open in %s\n", rounds[k][j].opened, o->n,
				tool_fmt_dur(rounds[k][j].open_s, b, sizeof(b)));
		}
		done = j + 1;
	}
	events_free(&ev);
	kill(mpid, SIGTERM);
	waitpid(mpid, NULL, 0);
	int herald_exit = tool_herald_stop(h, o->keep);

	/* Rounds cut short by a signal are left out. */
	double med[SERVERS], cpu_per_open[SERVERS];
	long failed = 0;
	for (int k = 0; k < SERVERS; k++) {
		med[k] = median(rounds[k], done);
		double cpu = 0;
		long opened = 0;
		for (long j = 0; j < done; j++) {
			cpu += rounds[k][j].server_cpu_s;
			opened += rounds[k][j].opened;
			failed += rounds[k][j].failed;
		}
		cpu_per_open[k] = opened ? cpu / (double)opened : NAN;
	}
	double ratio = med[HERALD] / med[MINIMAL];

	char cN[32], b1[32], b2[32], b3[32];
	tool_fmt_count(o->n, cN, sizeof(cN));
	printf("| server | round | opens (%s) | not opened | server CPU over the opens | per open | client CPU | "
	       "ListenOverflows |\n",
	       cN);
	printf("|---|---|---|---|---|---|---|---|\n");
	for (long j = 0; j < done; j++)
		for (int step = 0; step < SERVERS; step++) {
			int k = (int)((j + step + 1) % SERVERS);
			const struct round *r = &rounds[k][j];
			printf("| %s | %ld | %s | %ld | %s | %.1f us | %s | %lld |\n", NAMES[k], j + 1,
			       tool_fmt_dur(r->open_s, b1, sizeof(b1)), r->failed,
			       tool_fmt_dur(r->server_cpu_s, b2, sizeof(b2)),
			       r->opened ? r->server_cpu_s / (double)r->opened * 1e6 : NAN,
			       tool_fmt_dur(r->client_cpu_s, b3, sizeof(b3)), r->ovf);
		}
	printf("\n| readers | herald, median of %ld | minimal server, median | herald / minimal | herald CPU per open "
	       "| "
	       "minimal CPU per open |\n",
	       done);
	printf("|---|---|---|---|---|---|\n");
	printf("| %s | **%s** | %s | **%.2fx** | %.1f us | %.1f us |\n", cN, tool_fmt_dur(med[HERALD], b1, sizeof(b1)),
	       tool_fmt_dur(med[MINIMAL], b2, sizeof(b2)), ratio, cpu_per_open[HERALD] * 1e6,
	       cpu_per_open[MINIMAL] * 1e6);
	printf("\n");

	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_text("mode", "opens");
	tool_json_int("n", o->n);
	tool_json_int("rounds", done);
	tool_json_int("backlog", h->backlog);
	tool_json_num("herald_open_ms", med[HERALD] * 1e3);
	tool_json_num("minimal_open_ms", med[MINIMAL] * 1e3);
	tool_json_num("ratio", ratio);
	tool_json_num("herald_cpu_per_open_us", cpu_per_open[HERALD] * 1e6);
	tool_json_num("minimal_cpu_per_open_us", cpu_per_open[MINIMAL] * 1e6);
	tool_json_int("not_opened", failed);
	tool_json_int("herald_exit", herald_exit);
	tool_json_open("runs", '[');
	for (long j = 0; j < done; j++)
		for (int step = 0; step < SERVERS; step++) {
			int k = (int)((j + step + 1) % SERVERS);
			const struct round *r = &rounds[k][j];
			tool_json_open(NULL, '{');
			tool_json_text("server", NAMES[k]);
			tool_json_int("round", j + 1);
			tool_json_num("open_ms", r->open_s * 1e3);
			tool_json_int("opened", r->opened);
			tool_json_num("server_cpu_ms", r->server_cpu_s * 1e3);
			tool_json_num("client_cpu_ms", r->client_cpu_s * 1e3);
			tool_json_int("listen_overflows", r->ovf);
			tool_json_close();
		}
	tool_json_close();
	tool_json_close();
	for (int k = 0; k < SERVERS; k++)
		free(rounds[k]);
	return failed == 0 && done == o->opens && herald_exit == 0 ? 0 : 1;
}
