/* SPDX-License-Identifier: BSD-2-Clause */
/* presence.c: what presence costs herald. N readers (10,000 by default),
 * reader i on the topic "t/(i mod T)" (T = 1,000 by default), spread over P
 * client processes (process p binding to 127.0.p+1.1, so each has its own
 * ports and open-file limit), against a herald started here with
 * presence on or off (--presence) and W workers. Measured:
 *   - the opens: from the first connect to the last opening frame, opens
 *     per second, and herald's CPU over them (utime+stime of herald and
 *     its workers, /proc) per open;
 *   - then Q answers of GET /api/presence?topic=t/0 and Q of GET
 *     /api/presence (the busiest topics), each timed from connect to the
 *     answer's end; the first must count exactly the readers of t/0.
 * Prints a markdown table and one JSON line. */
#include "sse-client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static const char USAGE[] =
	"usage: load/presence [N] [--topics T] [--procs P] [--workers W] [--presence on|off] [--queries Q]\n"
	"       [--ramp M] [--open-timeout S] [--run LABEL] [--keep]\n";

static volatile int stop_flag;

struct popts {
	long n, topics, procs, workers, queries, ramp;
	double open_timeout;
	const char *presence;
	const char *run;
	int keep;
};

/* What a client process tells the parent once its share opened (or gave
 * up): one write below PIPE_BUF. */
struct opened_msg {
	long proc, share, opened, errors;
	int64_t t_last_open;
};

/* ---- a client process ------------------------------------------------------ */

struct child {
	long first; /* the global index of its reader 0 */
	long topics;
	char host[200];
	char req[512];
};

static const char *request_for(void *arg, long i, size_t *len)
{
	struct child *ch = arg;
	int n = snprintf(ch->req, sizeof(ch->req),
			 "GET /api/events/stream?topic=t/%ld HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n",
			 (ch->first + i) % ch->topics, ch->host);
	*len = (size_t)n;
	return ch->req;
}

/* Open share readers, report, hold them until the parent closes cmd. */
static int child_main(const struct popts *o, const struct tool_addr *target, long proc, long first, long share, int cmd,
		      int up)
{
	struct child ch = { .first = first, .topics = o->topics };
	snprintf(ch.host, sizeof(ch.host), "%s", target->text);
	struct tls plain = { .ctx = NULL };
	struct client *c = client_new(share, target, 1, "", &plain, NULL);
	if (!c)
		return 1;
	c->source_first = 0x7f000001u + ((uint32_t)(proc + 1) << 8);
	c->request_for = request_for;
	c->hook_arg = &ch;
	long ramp = o->ramp ? o->ramp : 200;
	int64_t deadline = tool_now_ns() + (int64_t)(o->open_timeout * 1e9);
	while (c->c.settled < c->n && !stop_flag && tool_now_ns() < deadline) {
		int more = client_connect_more(c, ramp);
		client_loop_once(c, more ? 0 : 10);
	}
	client_give_up(c);
	struct opened_msg m = { .proc = proc, .share = share, .opened = c->c.opened, .t_last_open = c->c.t_last_open };
	for (int k = 0; k < E_KINDS; k++)
		m.errors += c->c.errs[k];
	if (write(up, &m, sizeof(m)) != (ssize_t)sizeof(m))
		return 1;
	/* Hold the streams (reading their heartbeats) until told. */
	struct pollfd p = { .fd = cmd, .events = POLLIN };
	while (!stop_flag) {
		client_loop_once(c, 50);
		if (poll(&p, 1, 0) > 0)
			break;
	}
	client_free(c);
	return 0;
}

/* ---- the questions ------------------------------------------------------------ */

/* One GET of target on a new connection: the seconds it took, the status
 * in *status and the body in body (cut to len). */
static double ask(int port, const char *target, int *status, char *body, size_t len)
{
	char req[512], buf[65536];
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", target);
	int64_t t0 = tool_now_ns();
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(0x7f000001u) };
	size_t got = 0;
	*status = 0;
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    write(fd, req, strlen(req)) == (ssize_t)strlen(req)) {
		ssize_t r;
		while ((r = read(fd, buf + got, sizeof(buf) - 1 - got)) > 0 && got + 1 < sizeof(buf))
			got += (size_t)r;
	}
	double s = (double)(tool_now_ns() - t0) / 1e9;
	if (fd >= 0)
		close(fd);
	buf[got] = '\0';
	sscanf(buf, "HTTP/1.1 %d", status);
	const char *b = strstr(buf, "\r\n\r\n");
	snprintf(body, len, "%s", b ? b + 4 : "");
	return s;
}

struct timing {
	double p50, p99, max;
};

static struct timing timed(double *v, long n)
{
	tool_sort_doubles(v, (size_t)n);
	return (struct timing){ tool_percentile(v, (size_t)n, 50), tool_percentile(v, (size_t)n, 99),
				n ? v[n - 1] : NAN };
}

/* ---- the run ----------------------------------------------------------------- */

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "Open N streams, reader i on topic t/(i mod T), from P client processes\n"
	       "against a herald started here (W workers, presence on or off); time the\n"
	       "opens and herald's CPU per open, then Q answers of GET /api/presence for\n"
	       "one topic (which must count its readers exactly) and Q of the busiest\n"
	       "topics. Prints a markdown table and one JSON line.\n"
	       "\n");
	tool_opt_help(t);
	printf("\nExit status: 0 when every reader opened and every answer was right; 1\n"
	       "otherwise; 2 usage.\n");
	tool_herald_help();
}

static int parse_args(struct popts *o, int argc, char **argv)
{
	const struct tool_opt t[] = {
		TOOL_LONG("N", &o->n, 1, 1000000, "a number", "  N                  readers (default 10000)\n"),
		TOOL_LONG("--topics", &o->topics, 1, 1000000, "a number",
			  "  --topics T         reader i reads t/(i mod T) (default 1000)\n"),
		TOOL_LONG("--procs", &o->procs, 1, 64, "a number",
			  "  --procs P          client processes holding the readers (default 1)\n"),
		TOOL_LONG("--workers", &o->workers, 1, 64, "a number",
			  "  --workers W        the herald started here runs W workers (default 1)\n"),
		TOOL_STRING("--presence", &o->presence, "on or off",
			    "  --presence on|off  herald's presence setting (default on)\n"),
		TOOL_LONG("--queries", &o->queries, 0, 100000, "a number",
			  "  --queries Q        answers of GET /api/presence timed, of each kind (default 100)\n"),
		TOOL_LONG("--ramp", &o->ramp, 0, 1000000, "a number",
			  "  --ramp M           connects in flight per client process (default 200)\n"),
		TOOL_SECONDS("--open-timeout", &o->open_timeout, 0.01, 3600,
			     "  --open-timeout S   give up on opens after S seconds (default 120)\n"),
		TOOL_STRING("--run", &o->run, "a label",
			    "  --run LABEL        the label in the table's run column (default 1)\n"),
		TOOL_FLAG("--keep", &o->keep, "  --keep             keep the started herald's temporary folder\n"),
		TOOL_HELP("  --help             this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(t, argc, argv, help);
	if (rc >= 0)
		return rc;
	if (strcmp(o->presence, "on") != 0 && strcmp(o->presence, "off") != 0)
		return tool_usage_error("--presence takes on or off");
	if (o->procs > o->n)
		return tool_usage_error("--procs may be at most N");
	return -1;
}

int main(int argc, char **argv)
{
	tool_usage("presence", USAGE);
	struct popts o = { .n = 10000,
			   .topics = 1000,
			   .procs = 1,
			   .workers = 1,
			   .queries = 100,
			   .open_timeout = 120,
			   .presence = "on",
			   .run = "1" };
	int rc = parse_args(&o, argc, argv);
	if (rc >= 0)
		return rc;
	long soft = 0, hard = 0;
	tool_raise_nofile(&soft, &hard);
	long per = o.n / o.procs + (o.n % o.procs != 0);
	char what[64];
	snprintf(what, sizeof(what), "%ld readers in each client process", per);
	if (tool_check_fds(per + 64, what) != 0)
		return 2;
	tool_catch_signals(&stop_flag);

	struct tool_herald h;
	char workers[16];
	snprintf(workers, sizeof(workers), "%ld", o.workers);
	const char *extra[] = { "--presence", o.presence, "--workers", workers, NULL };
	if (tool_herald_start(&h, 0, tool_default_backlog(0), 0, extra) != 0)
		return 1;
	char s[64];
	struct tool_addr target;
	snprintf(s, sizeof(s), "127.0.0.1:%d", h.port);
	tool_parse_addr(s, &target);
	fprintf(stderr,
		"presence: %ld readers on %ld topics from %ld client processes, herald pid %d with %ld "
		"worker(s), presence %s\n",
		o.n, o.topics, o.procs, (int)h.pid, o.workers, o.presence);

	uint64_t tick0 = 0, tick1 = 0;
	tool_cpu_ticks(h.pid, 1, &tick0);
	int up[2];
	if (pipe(up) != 0)
		return 1;
	int *cmd = calloc((size_t)o.procs, sizeof(int));
	pid_t *pids = calloc((size_t)o.procs, sizeof(pid_t));
	int64_t t_begin = tool_now_ns();
	for (long p = 0; p < o.procs; p++) {
		int c[2];
		if (pipe(c) != 0)
			return 1;
		long first = p * per, share = MIN(per, o.n - first);
		pids[p] = fork();
		if (pids[p] == 0) {
			close(c[1]);
			close(up[0]);
			_exit(child_main(&o, &target, p, first, share, c[0], up[1]));
		}
		close(c[0]);
		cmd[p] = c[1];
	}
	close(up[1]);
	long opened = 0, errors = 0;
	int64_t t_open = 0;
	for (long got = 0; got < o.procs && !stop_flag;) {
		struct opened_msg m;
		ssize_t r = read(up[0], &m, sizeof(m));
		if (r == (ssize_t)sizeof(m)) {
			opened += m.opened;
			errors += m.errors;
			t_open = MAX(t_open, m.t_last_open);
			got++;
		} else if (r <= 0 && errno != EINTR) {
			break; /* a child died */
		}
	}
	tool_cpu_ticks(h.pid, 1, &tick1);
	double open_s = t_open ? (double)(t_open - t_begin) / 1e9 : NAN;
	double cpu_s = (double)(tick1 - tick0) / (double)sysconf(_SC_CLK_TCK);
	fprintf(stderr, "presence: %ld of %ld open in %.3f s, herald CPU %.2f s\n", opened, o.n, open_s, cpu_s);

	/* The answers: one topic (exact: t/0 has ceil(N/T) readers), then the
	 * busiest topics. */
	long want = o.n / o.topics + (o.n % o.topics != 0);
	double *one = calloc((size_t)o.queries + 1, sizeof(double)),
	       *top = calloc((size_t)o.queries + 1, sizeof(double));
	long bad = 0, wrong = 0;
	char body[65536];
	for (long q = 0; q < o.queries && !stop_flag && opened == o.n; q++) {
		int st;
		one[q] = ask(h.port, "/api/presence?topic=t/0", &st, body, sizeof(body));
		const char *r = strstr(body, "\"readers\":");
		if (st != 200)
			bad++;
		else if (!r || atol(r + 10) != want)
			wrong++;
		top[q] = ask(h.port, "/api/presence", &st, body, sizeof(body));
		bad += st != 200;
	}
	struct timing t1 = timed(one, o.queries), t2 = timed(top, o.queries);

	long rss = tool_rss_kb(h.pid, 1);
	for (long p = 0; p < o.procs; p++)
		close(cmd[p]);
	for (long p = 0; p < o.procs; p++)
		waitpid(pids[p], NULL, 0);
	close(up[0]);
	int herald_exit = tool_herald_stop(&h, o.keep);

	char b1[32];
	printf("| run | readers | topics | workers | presence | opened | open time | opens/s | herald CPU per open | "
	       "one topic p50 / p99 | busiest topics p50 / p99 | herald RSS |\n");
	printf("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
	printf("| %s | %ld | %ld | %ld | %s | %ld | %s | %.0f | %.1f us | %.2f / %.2f ms | %.2f / %.2f ms | %ld MiB "
	       "|\n",
	       o.run, o.n, o.topics, o.workers, o.presence, opened, tool_fmt_dur(open_s, b1, sizeof(b1)),
	       (double)opened / open_s, cpu_s * 1e6 / (double)(opened ? opened : 1), t1.p50 * 1e3, t1.p99 * 1e3,
	       t2.p50 * 1e3, t2.p99 * 1e3, rss / 1024);
	if (wrong || bad)
		printf("\n%ld answers of t/0 did not count %ld readers, %ld answers were not 200.\n", wrong, want, bad);
	tool_json_open(NULL, '{');
	tool_json_text("tool", "presence");
	tool_json_text("run", o.run);
	tool_json_int("readers", o.n);
	tool_json_int("topics", o.topics);
	tool_json_int("workers", o.workers);
	tool_json_text("presence", o.presence);
	tool_json_int("opened", opened);
	tool_json_int("open_errors", errors);
	tool_json_num("open_s", open_s);
	tool_json_num("opens_per_s", (double)opened / open_s);
	tool_json_num("cpu_per_open_us", cpu_s * 1e6 / (double)(opened ? opened : 1));
	tool_json_num("one_topic_p50_ms", t1.p50 * 1e3);
	tool_json_num("one_topic_p99_ms", t1.p99 * 1e3);
	tool_json_num("one_topic_max_ms", t1.max * 1e3);
	tool_json_num("top_p50_ms", t2.p50 * 1e3);
	tool_json_num("top_p99_ms", t2.p99 * 1e3);
	tool_json_num("top_max_ms", t2.max * 1e3);
	tool_json_int("wrong_counts", wrong);
	tool_json_int("herald_rss_kb", rss);
	tool_json_close();
	printf("\n");
	free(one);
	free(top);
	free(cmd);
	free(pids);
	return opened == o.n && !wrong && !bad && herald_exit == 0 && !stop_flag ? 0 : 1;
}
