/* SPDX-License-Identifier: BSD-2-Clause */
/* rate.c: sustained event rates, open loop. N readers (load/readers' epoll
 * client) stay open on a herald started here while a publisher sends events
 * on a fixed schedule, step after step at rising rates, whatever the
 * readers and the answers do. Every event carries its scheduled send time in
 * its data, so each reader's latency for each event is known on arrival.
 *
 * Per step: send at the rate for --step seconds; then drain, waiting up to
 * --drain seconds until every answer is in and every reader has the step's
 * last event (a reader that fell behind is fed from the database by herald
 * and must still get everything); then read herald's CPU (utime+stime from
 * /proc), its RSS (sampled every 100 ms), and its catch-up counter (from
 * /metrics). After the last step the tool waits up to four drains more for
 * whatever is still on its way, then counts per step what never arrived
 * (lost) and what arrived after its step's drain (late). A step "keeps up"
 * when its p99 latency is under --limit, every reader had every event by
 * the end of its drain, and none was out of order. See rate.h for the other
 * parts. */
#include "rate.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] = "usage: load/rate [N] [--rates R1,R2,...] [--step S] [--drain S] [-k K] [--limit S]\n"
			    "       [--csv FILE] [--port P] [--run LABEL] [--keep] [--tls]\n";

static volatile int stop_flag;

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "Sustained rates, open loop: N Server-Sent Events readers on one epoll thread,\n"
	       "and a publisher that POSTs events on a fixed schedule (pipelined over K\n"
	       "keep-alive connections, not waiting for answers), one step per rate. Each\n"
	       "event's data is its scheduled send time, so every delivery's latency is\n"
	       "measured; each reader's ids are checked to be complete and in order. After\n"
	       "each step the tool waits until every reader has every event, then reports\n"
	       "deliveries/s, p50/p99/max latency, lost, server CPU per delivery, server RSS,\n"
	       "readers moved to catch-up, and its own CPU. Prints a markdown table and one\n"
	       "JSON line; --csv writes one row per step for plots. It starts its own herald\n"
	       "on a temporary database and port.\n"
	       "\n"
	       "With --tls the herald gets a tls: listener and a fresh P-256 certificate, and the\n"
	       "steps run twice in the same run: first to N TLS readers (TLS 1.3, their streams\n"
	       "parked), then, on the same herald, to N plain readers; a table and a JSON line\n"
	       "each, then server CPU per delivery of the two side by side, rate by rate, with\n"
	       "their ratio (a \"rate-tls\" JSON line).\n"
	       "\n");
	tool_opt_help(t);
	printf("Exit status: 0 when no step lost an event or broke order; 1 otherwise; 2 usage.\n");
	tool_herald_help();
}

static int take_rates(void *ptr, const char *name, const char *v)
{
	struct rate_opts *o = ptr;
	o->nrates = 0;
	const char *p = v;
	while (*p) {
		char *end;
		double r = strtod(p, &end);
		if (end == p || r < 1 || r > 200000 || (*end && *end != ',') || (*end == ',' && !end[1]))
			return tool_usage_error("%s wants rates from 1 to 200000 separated by commas", name);
		if (o->nrates == RATE_MAX_STEPS)
			return tool_usage_error("%s takes at most %d rates", name, RATE_MAX_STEPS);
		o->rates[o->nrates++] = r;
		p = *end ? end + 1 : end;
	}
	if (!o->nrates)
		return tool_usage_error("%s wants at least one rate", name);
	return 0;
}

/* One counter from herald's /metrics (local access, the default), or -1. */
static long long metric(const struct tool_addr *a, const char *name)
{
	int fd = socket(a->family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct timeval tv = { .tv_sec = 3 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	long long v = -1;
	char req[300];
	int rl = snprintf(req, sizeof(req), "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", a->text);
	if (connect(fd, (const struct sockaddr *)&a->sa, a->len) == 0 && write(fd, req, (size_t)rl) == rl) {
		size_t cap = 1 << 16, len = 0;
		char *buf = xmalloc(cap + 1);
		for (;;) {
			if (len == cap) {
				cap *= 2;
				buf = xrealloc(buf, cap + 1);
			}
			ssize_t r = read(fd, buf + len, cap - len);
			if (r <= 0)
				break;
			len += (size_t)r;
		}
		buf[len] = '\0';
		size_t nl = strlen(name);
		for (char *p = strstr(buf, name); p; p = strstr(p + 1, name))
			if ((p == buf || p[-1] == '\n') && p[nl] == ' ') {
				v = (long long)strtod(p + nl + 1, NULL);
				break;
			}
		free(buf);
	}
	close(fd);
	return v;
}

static double self_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double server_cpu_s(pid_t pid)
{
	uint64_t t = 0;
	if (tool_cpu_ticks(pid, 0, &t) != 0)
		return NAN;
	return (double)t / (double)sysconf(_SC_CLK_TCK);
}

/* Nanoseconds pid has spent runnable but waiting for a CPU (the second
 * field of /proc/PID/schedstat), or -1: on a shared machine, the share of
 * a step the server wanted a core and had none. */
static double runq_wait_s(pid_t pid)
{
	uint64_t wait;
	return tool_sched_ns(pid, 0, NULL, &wait) == 0 ? (double)wait / 1e9 : NAN;
}

struct ctx {
	struct rate_opts o;
	struct tool_herald h;
	struct tool_addr target;   /* where the readers connect */
	struct tool_addr pub_addr; /* herald's plain port: the publisher's, and plain readers' */
	struct client *cl;
	struct rate_pub pub;
	struct rate_recv rv;
	struct rate_run m;
	struct tls tls;    /* with --tls: the certificate and the client's context */
	struct tls no_tls; /* plain readers' (no context) */
};

/* Open every reader (60 s at most). Returns the count opened. */
static long open_readers(struct ctx *x)
{
	struct client *c = x->cl;
	int64_t t0 = tool_now_ns(), deadline = t0 + 60 * (int64_t)1000000000;
	while (c->c.settled < c->n && !stop_flag && tool_now_ns() < deadline) {
		int more = client_connect_more(c, 0);
		client_loop_once(c, more ? 0 : 10);
	}
	client_give_up(c);
	x->m.open_s = c->c.opened ? (double)(c->c.t_last_open - t0) / 1e9 : NAN;
	return c->c.opened;
}

/* Run one step at rate r; fills x->m.s[x->m.nsteps++]. */
static void run_step(struct ctx *x, double rate)
{
	struct rate_step *s = &x->m.s[x->m.nsteps++];
	memset(s, 0, sizeof(*s));
	s->rate = rate;
	struct rate_pub *p = &x->pub;
	long sent0 = p->sent, ok0 = p->ok, fail0 = p->http_err + p->net_err;
	long long cu0 = metric(&x->target, "herald_readers_to_catchup_total");
	p->max_lag_ns = 0;
	int64_t period = (int64_t)(1e9 / rate);
	long total = (long)ceil(rate * x->o.step_s);
	double cpu0 = server_cpu_s(x->m.pid), self0 = self_cpu_s(), wall0 = tool_now_s();
	double wait0 = runq_wait_s(x->m.pid);
	int64_t t0 = tool_now_ns() + 1000000;
	int k = rate_recv_step(&x->rv, t0);
	int64_t next_rss = 0;
	long sent = 0;
	fprintf(stderr, "rate: step %d: %g events/s for %g s to %ld readers\n", k + 1, rate, x->o.step_s,
		x->cl->c.open);
	while (sent < total && !stop_flag) {
		int64_t now = tool_now_ns();
		/* Everything due by now leaves now, stamped with its own time. */
		while (sent < total && t0 + sent * period <= now)
			rate_pub_send(p, t0 + (sent++) * period, now);
		rate_pub_pump(p);
		if (now >= next_rss) {
			long rss = tool_rss_kb(x->m.pid, 0);
			if (rss > s->rss_kb_max)
				s->rss_kb_max = rss;
			next_rss = now + 100000000;
		}
		int64_t wait = sent < total ? t0 + sent * period - tool_now_ns() : 0;
		/* Whole milliseconds: sleep at least 1 ms rather than spin. */
		client_loop_once(x->cl, wait > 0 ? (int)(wait / 1000000) + 1 : 0);
	}
	s->dur_s = (double)(total > 1 ? (total - 1) * period : 0) / 1e9;
	s->max_lag_ms = (double)p->max_lag_ns / 1e6;
	/* Drain: every answer, and every reader at the newest id. */
	int64_t drain_end = tool_now_ns() + (int64_t)(x->o.drain_s * 1e9);
	while (!stop_flag && tool_now_ns() < drain_end) {
		rate_pub_pump(p);
		if (rate_pub_unanswered(p) == 0 && rate_recv_behind(&x->rv, x->cl, p->max_id) == 0)
			break;
		int64_t now = tool_now_ns();
		if (now >= next_rss) {
			long rss = tool_rss_kb(x->m.pid, 0);
			if (rss > s->rss_kb_max)
				s->rss_kb_max = rss;
			next_rss = now + 100000000;
		}
		client_loop_once(x->cl, 5);
	}
	s->cpu_s = server_cpu_s(x->m.pid) - cpu0;
	s->runq_s = runq_wait_s(x->m.pid) - wait0;
	s->self_cpu_s = self_cpu_s() - self0;
	s->wall_s = tool_now_s() - wall0;
	s->rss_kb_end = tool_rss_kb(x->m.pid, 0);
	long long cu1 = metric(&x->target, "herald_readers_to_catchup_total");
	s->catchups = cu0 >= 0 && cu1 >= 0 ? cu1 - cu0 : -1;
	s->sent = p->sent - sent0;
	s->ok = p->ok - ok0;
	s->failed = p->http_err + p->net_err - fail0;
	const struct rate_step_recv *sr = &x->rv.step[k];
	s->deliveries = sr->deliveries;
	s->deliver_s = sr->last_arrival > t0 ? (double)(sr->last_arrival - t0) / 1e9 : NAN;
	s->behind = rate_recv_behind(&x->rv, x->cl, p->max_id);
	long oe = 0, gaps = 0;
	for (long i = 0; i < x->rv.n; i++) {
		oe += x->rv.r[i].order_errs;
		gaps += x->rv.r[i].gaps;
	}
	long oe_before = 0, gaps_before = 0;
	for (int j = 0; j < x->m.nsteps - 1; j++) {
		oe_before += x->m.s[j].order_errs;
		gaps_before += x->m.s[j].gaps;
	}
	s->order_errs = oe - oe_before;
	s->gaps = gaps - gaps_before;
	fprintf(stderr, "rate: step %d: %llu deliveries, p99 %.1f ms, %ld readers behind, server CPU %.2f s\n", k + 1,
		(unsigned long long)s->deliveries, lat_pct_ms(&sr->lat, 99), s->behind, s->cpu_s);
}

/* After the last step: wait (up to 4 drains) for whatever is still on its
 * way, then count, per step, what never arrived and what came after its
 * drain, and judge each step. */
static void final_drain(struct ctx *x)
{
	struct rate_pub *p = &x->pub;
	double t0 = tool_now_s(), limit = 4 * x->o.drain_s;
	while (!stop_flag && tool_now_s() - t0 < limit) {
		rate_pub_pump(p);
		if (rate_pub_unanswered(p) == 0 && rate_recv_behind(&x->rv, x->cl, p->max_id) == 0)
			break;
		client_loop_once(x->cl, 5);
	}
	x->m.final_drain_s = tool_now_s() - t0;
	x->m.final_behind = rate_recv_behind(&x->rv, x->cl, p->max_id);
	x->m.published = p->ok;
	for (int i = 0; i < x->m.nsteps; i++) {
		struct rate_step *s = &x->m.s[i];
		const struct rate_step_recv *sr = &x->rv.step[i];
		long long expected = (long long)(s->sent - s->failed) * x->cl->c.open;
		s->lost = expected > (long long)sr->deliveries ? (long)(expected - (long long)sr->deliveries) : 0;
		s->late = sr->deliveries - s->deliveries;
		s->keeps_up = s->lost == 0 && s->late == 0 && s->behind == 0 && s->order_errs == 0 && s->gaps == 0 &&
			      s->failed == 0 && lat_pct_ms(&sr->lat, 99) < x->o.p99_limit_ms;
	}
}

/* Open o->n readers at x->target, run every step and the final drain, and
 * report; readers count ids from start_after (the newest event published
 * before they opened). last: the run's last readers, so herald is stopped
 * before the report, which gives its exit status. Returns the report's
 * status. */
static int run_readers_from(struct ctx *x, int64_t start_after, int last)
{
	struct rate_opts *o = &x->o;
	int rc = 1;
	memset(&x->m, 0, sizeof(x->m));
	x->m.pid = x->h.pid;
	char request[512];
	snprintf(request, sizeof(request),
		 "GET /api/events/stream HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", x->target.text);
	rate_recv_init(&x->rv, o->n);
	for (long i = 0; i < o->n; i++)
		x->rv.r[i].last_id = start_after;
	x->cl = client_new(o->n, &x->target, 1, request, strcmp(o->readers, "tls") == 0 ? &x->tls : &x->no_tls,
			   NULL);
	if (x->cl) {
		x->cl->frame = rate_recv_frame;
		x->cl->frame_arg = &x->rv;
		x->m.opened = open_readers(x);
		x->m.rss_open_kb = tool_rss_kb(x->m.pid, 0);
		fprintf(stderr, "rate: %ld of %ld %s readers open in %.3f s\n", x->m.opened, o->n, o->readers,
			x->m.open_s);
		if (x->m.opened > 0 && rate_pub_open(&x->pub, &x->pub_addr, (int)o->k, x->cl->ep) == 0) {
			x->cl->other = rate_pub_pump;
			x->cl->other_arg = &x->pub;
			for (int i = 0; i < o->nrates && !stop_flag; i++)
				run_step(x, o->rates[i]);
			final_drain(x);
		}
		rc = 0;
	}
	int64_t max_id = x->pub.max_id;
	rate_pub_close(&x->pub);
	x->pub.max_id = max_id; /* where the next readers start */
	if (x->cl)
		client_close(x->cl);
	if (last)
		x->m.herald_exit = tool_herald_stop(&x->h, o->keep);
	if (rc == 0)
		rc = rate_report(o, &x->m, &x->rv, x->cl, stop_flag);
	client_free(x->cl);
	x->cl = NULL;
	rate_recv_free(&x->rv);
	return rc;
}

/* With --tls: server CPU per delivery to the TLS readers and to the plain
 * ones, step by step, and their ratio. */
static void compare(const struct rate_opts *o, const double *tls_us, const struct rate_run *plain)
{
	printf("\n| rate (ev/s) | server CPU per delivery, %ld TLS readers | the same, %ld plain readers | TLS / plain |\n",
	       o->n, o->n);
	printf("|---|---|---|---|\n");
	double plain_us[RATE_MAX_STEPS];
	int n = plain->nsteps < o->nrates ? plain->nsteps : o->nrates;
	for (int i = 0; i < n; i++) {
		const struct rate_step *s = &plain->s[i];
		plain_us[i] = s->deliveries ? s->cpu_s * 1e6 / (double)s->deliveries : NAN;
		printf("| %g | %.2f us | %.2f us | **%.2fx** |\n", s->rate, tls_us[i], plain_us[i],
		       tls_us[i] / plain_us[i]);
	}
	tool_json_open(NULL, '{');
	tool_json_text("tool", "rate-tls");
	tool_json_text("run", o->run);
	tool_json_int("n", o->n);
	tool_json_open("pairs", '[');
	for (int i = 0; i < n; i++) {
		tool_json_open(NULL, '{');
		tool_json_num("rate", plain->s[i].rate);
		tool_json_num("tls_cpu_us_per_delivery", tls_us[i]);
		tool_json_num("plain_cpu_us_per_delivery", plain_us[i]);
		tool_json_num("tls_over_plain", tls_us[i] / plain_us[i]);
		tool_json_close();
	}
	tool_json_close();
	tool_json_close();
}

int main(int argc, char **argv)
{
	tool_usage("rate", USAGE);
	struct ctx *x = xcalloc(1, sizeof(*x));
	struct rate_opts *o = &x->o;
	*o = (struct rate_opts){ .n = 1000, .k = 16, .step_s = 5, .drain_s = 30, .p99_limit_ms = 100, .run = "1" };
	double limit_s = 0.1;
	take_rates(o, "--rates", "250,500,1000,2000,4000");
	const struct tool_opt t[] = {
		TOOL_LONG("N", &o->n, 1, 100000, "a number", "  N                  readers (default 1000)\n"),
		TOOL_CALL("--rates", o, take_rates, "a list",
			  "  --rates R1,R2,...  events per second, one step each (default 250,500,1000,2000,4000)\n"),
		TOOL_SECONDS("--step", &o->step_s, 0.1, 3600,
			     "  --step S           seconds of sending per step (default 5)\n"),
		TOOL_SECONDS("--drain", &o->drain_s, 0.1, 3600,
			     "  --drain S          after a step, wait at most S seconds for every reader to have\n"
			     "                     every event (default 30)\n"),
		TOOL_LONG("--connections", &o->k, 1, 1024, "a number",
			  "  -k, --connections K  publisher's keep-alive connections (default 16)\n"),
		TOOL_SECONDS("--limit", &limit_s, 0.001, 60,
			     "  --limit S          p99 latency under which a step keeps up (default 100ms)\n"),
		TOOL_STRING("--csv", &o->csv, "a file",
			    "  --csv FILE         write one row per step (for load/plot)\n"),
		TOOL_LONG("--port", &o->port, 0, 65535, "a port number",
			  "  --port P           the port of the herald started here (default 0: one the kernel\n"
			  "                     picks), to watch it meanwhile (load/overflow-report, /metrics)\n"),
		TOOL_STRING("--run", &o->run, "a label",
			    "  --run LABEL        the label in the JSON line (default 1)\n"),
		TOOL_FLAG("--keep", &o->keep, "  --keep             keep the started herald's temporary folder\n"),
		TOOL_FLAG("--tls", &o->tls,
			  "  --tls              TLS readers first (a tls:127.0.0.1:0 listener, a fresh P-256\n"
			  "                     certificate), then plain ones, the same steps on the same herald\n"),
		TOOL_HELP("  --help             this text\n"),
		TOOL_END,
	};
	struct tool_opt tk[sizeof(t) / sizeof(t[0])];
	memcpy(tk, t, sizeof(t));
	for (size_t i = 0; tk[i].name; i++)
		if (strcmp(tk[i].name, "--connections") == 0)
			tk[i].short_name = 'k';
	int rc = tool_opt_parse(tk, argc, argv, help);
	if (rc >= 0) {
		free(x);
		return rc;
	}
	o->p99_limit_ms = limit_s * 1e3;
	long soft = 0, hard = 0;
	tool_raise_nofile(&soft, &hard);
	char what[64];
	snprintf(what, sizeof(what), "%ld readers", o->n);
	if (tool_check_fds(o->n + o->k + 64, what) != 0) {
		free(x);
		return 2;
	}
	tool_catch_signals(&stop_flag);
	const char *extra[8] = { NULL };
	if (o->tls) {
		if (tls_make_cert(&x->tls) != 0) {
			free(x);
			return 1;
		}
		const char *tls_args[] = { "--listen",  "tls:127.0.0.1:0", "--tls-cert", x->tls.cert_path,
					   "--tls-key", x->tls.key_path,   NULL };
		memcpy(extra, tls_args, sizeof(tls_args));
	}
	if (tool_herald_start(&x->h, (int)o->port, tool_default_backlog(0), 0, extra) != 0) {
		tls_remove_cert(&x->tls, o->keep);
		free(x);
		return 1;
	}
	rc = 0;
	char s[200];
	snprintf(s, sizeof(s), "127.0.0.1:%d", x->h.port);
	tool_parse_addr(s, &x->pub_addr);
	fprintf(stderr, "rate: started herald %s (pid %d) on %s\n", x->h.bin, (int)x->h.pid, x->pub_addr.text);
	double tls_us[RATE_MAX_STEPS] = { 0 };
	int herald_rc = 0;
	if (o->tls) {
		int tls_port = tls_port_from_log(x->h.log);
		snprintf(s, sizeof(s), "127.0.0.1:%d", tls_port);
		tool_parse_addr(s, &x->target);
		if (!tls_port || tls_client_setup(&x->tls, x->tls.cert_path, 0, &x->target) != 0) {
			fprintf(stderr, "rate: no TLS listener to read from (see %s)\n", x->h.log);
			rc = 1;
		} else {
			o->readers = "tls";
			rc = run_readers_from(x, 0, 0);
			for (int i = 0; i < x->m.nsteps; i++)
				tls_us[i] = x->m.s[i].deliveries ? x->m.s[i].cpu_s * 1e6 / (double)x->m.s[i].deliveries
								 : NAN;
		}
		printf("\n");
	}
	int64_t start_after = x->pub.max_id;
	x->target = x->pub_addr;
	o->readers = "plain";
	if (!stop_flag)
		rc |= run_readers_from(x, start_after, 1);
	if (o->tls)
		compare(o, tls_us, &x->m);
	herald_rc = x->h.pid ? tool_herald_stop(&x->h, o->keep) : 0;
	SSL_CTX_free(x->tls.ctx);
	tls_remove_cert(&x->tls, o->keep);
	free(x);
	return rc || herald_rc ? 1 : 0;
}
