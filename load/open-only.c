/* SPDX-License-Identifier: BSD-2-Clause */
/* open-only.c: the connect-loop probe. N connects one after another in a
 * plain loop (no concurrency on the client side), each timed, with the
 * kernel's ListenOverflows and ListenDrops read before and after, so a slow
 * connect can be matched to a dropped handshake instead of guessed at. */
#include "tool.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] = "usage: load/open-only N [--server ADDR | --port P] [--backlog B] [--timeout SECONDS] "
			    "[--close] [--run LABEL] [--keep]\n";

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "Connect N times in a plain loop, one after another, timing each connect,\n"
	       "and read TcpExt ListenOverflows and ListenDrops from /proc/net/netstat\n"
	       "before and after. Prints the backlog, the total time, how many connects\n"
	       "took longer than 0.5 s, and both counters' deltas, as a markdown table and\n"
	       "one JSON line. Connections stay open until the end (see --close).\n"
	       "\n");
	tool_opt_help(t);
	printf("The counters are the whole network namespace's: other traffic adds to them.\n"
	       "Exit status: 0; 1 when a connect failed; 2 usage.\n");
	tool_herald_help();
}

static volatile int stop_flag;

/* Connect once; returns 0 or an errno value, and the fd in *fdp when open. */
static int connect_one(const struct tool_addr *a, double timeout, int *fdp)
{
	*fdp = -1;
	int fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	double deadline = tool_now_s() + timeout;
	for (;;) {
		if (connect(fd, (const struct sockaddr *)&a->sa, a->len) == 0)
			break;
		int e = errno;
		if (e == EINTR)
			continue;
		if (e == EAGAIN && a->family == AF_UNIX) {
			/* A unix listener's queue is full: the kernel does not queue
			 * us, so wait a little and try again, like a blocking connect. */
			if (tool_now_s() > deadline) {
				close(fd);
				return ETIMEDOUT;
			}
			tool_sleep(0.001, NULL);
			continue;
		}
		if (e != EINPROGRESS) {
			close(fd);
			return e;
		}
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		for (;;) {
			double left = deadline - tool_now_s();
			if (left <= 0 || stop_flag) {
				close(fd);
				return ETIMEDOUT;
			}
			int r = poll(&p, 1, (int)ceil(left * 1000));
			if (r > 0)
				break;
			if (r < 0 && errno != EINTR) {
				e = errno;
				close(fd);
				return e;
			}
		}
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			close(fd);
			return soerr;
		}
		break;
	}
	*fdp = fd;
	return 0;
}

int main(int argc, char **argv)
{
	tool_usage("open-only", USAGE);
	long n = -1, backlog_arg = 0, port = -1;
	double timeout = 30;
	int close_each = 0, keep = 0;
	const char *server = NULL, *label = "1";
	const struct tool_opt opts[] = {
		TOOL_LONG("N", &n, 1, 1000000, "a number", "  N                 connects to make (1 to 1000000)\n"),
		TOOL_STRING("--server", &server, "an address",
			    "  --server ADDR     127.0.0.1:PORT, [::1]:PORT or unix:/path; without it a\n"
			    "                    herald is started on a temporary database and stopped after\n"),
		TOOL_LONG("--port", &port, 0, 65535, "a port number",
			  "  --port P          the port of the herald started here (default 0: one the\n"
			  "                    kernel picks), to watch it meanwhile (load/overflow-report)\n"),
		TOOL_LONG("--backlog", &backlog_arg, 1, 1L << 20, "a number",
			  "  --backlog B       backlog for the herald started here (default $BACKLOG or\n"
			  "                    1024); with --server, the backlog to print when the socket's\n"
			  "                    own cannot be read\n"),
		TOOL_SECONDS("--timeout", &timeout, 0.01, 3600,
			     "  --timeout S       give up on one connect after S seconds (default 30)\n"),
		TOOL_FLAG("--close", &close_each,
			  "  --close           close each connection right after it connects\n"),
		TOOL_STRING("--run", &label, "a label", "  --run LABEL       the label of this run in the JSON line\n"),
		TOOL_FLAG("--keep", &keep, "  --keep            keep the started herald's temporary folder\n"),
		TOOL_HELP("  --help            this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(opts, argc, argv, help);
	if (rc >= 0)
		return rc;
	if (n < 0)
		return tool_usage_error("say how many connects (N)");
	struct tool_addr addr;
	if (server && tool_parse_addr(server, &addr) != 0)
		return tool_usage_error("--server wants 127.0.0.1:PORT, [::1]:PORT or unix:/path");
	if (server && port >= 0)
		return tool_usage_error("--port is for the herald started here: leave it out with --server");
	if (!close_each) {
		char what[64];
		snprintf(what, sizeof(what), "%ld open connections", n);
		if (tool_check_fds(n + 32, what) != 0)
			return 2;
	}
	tool_catch_signals(&stop_flag);

	struct tool_herald h;
	memset(&h, 0, sizeof(h));
	int backlog = (int)backlog_arg;
	if (!server) {
		backlog = tool_default_backlog(backlog_arg);
		if (tool_herald_start(&h, port < 0 ? 0 : (int)port, backlog, 0, NULL) != 0)
			return 1;
		char s[64];
		snprintf(s, sizeof(s), "127.0.0.1:%d", h.port);
		tool_parse_addr(s, &addr);
		backlog = h.backlog;
		fprintf(stderr, "open-only: started herald %s (pid %d) on %s\n", h.bin, (int)h.pid, addr.text);
	}
	/* The accept queue's own maximum is the backlog that took effect. */
	int effective = tool_accept_queue_max(&addr);

	int *fds = xmalloc((size_t)n * sizeof(*fds));
	double *times = xmalloc((size_t)n * sizeof(*times));
	long errs_refused = 0, errs_reset = 0, errs_timeout = 0, errs_other = 0, slow = 0, done = 0;
	int first_other = 0;
	fprintf(stderr, "open-only: %ld connects to %s, one after another\n", n, addr.text);

	long long ovf0 = tool_tcpext_now("ListenOverflows"), drop0 = tool_tcpext_now("ListenDrops");
	double t0 = tool_now_s();
	for (long i = 0; i < n && !stop_flag; i++) {
		double c0 = tool_now_s();
		int fd;
		int e = connect_one(&addr, timeout, &fd);
		double dt = tool_now_s() - c0;
		times[done++] = dt;
		fds[i] = fd;
		if (dt > 0.5)
			slow++;
		if (e) {
			const char *kind = tool_errno_kind(e);
			if (strcmp(kind, "refused") == 0)
				errs_refused++;
			else if (strcmp(kind, "reset") == 0)
				errs_reset++;
			else if (strcmp(kind, "timeout") == 0)
				errs_timeout++;
			else {
				errs_other++;
				if (!first_other)
					first_other = e;
			}
		} else if (close_each) {
			close(fd);
			fds[i] = -1;
		}
	}
	double total = tool_now_s() - t0;
	long long ovf1 = tool_tcpext_now("ListenOverflows"), drop1 = tool_tcpext_now("ListenDrops");
	for (long i = 0; i < done; i++)
		if (fds[i] >= 0)
			close(fds[i]);

	long long dovf = (ovf0 >= 0 && ovf1 >= 0) ? ovf1 - ovf0 : -1;
	long long ddrop = (drop0 >= 0 && drop1 >= 0) ? drop1 - drop0 : -1;
	tool_sort_doubles(times, (size_t)done);
	double p50 = tool_percentile(times, (size_t)done, 50), p99 = tool_percentile(times, (size_t)done, 99);
	double mx = done ? times[done - 1] : NAN;
	long errors = errs_refused + errs_reset + errs_timeout + errs_other;

	if (!server)
		tool_herald_stop(&h, keep);

	char b1[32], b2[32], b3[32], b4[32], c1[32];
	char bl[64];
	if (effective > 0 && backlog > 0 && effective != backlog)
		snprintf(bl, sizeof(bl), "%d (asked %d)", effective, backlog);
	else if (effective > 0)
		snprintf(bl, sizeof(bl), "%d", effective);
	else if (backlog > 0)
		snprintf(bl, sizeof(bl), "%d", backlog);
	else
		snprintf(bl, sizeof(bl), "?");
	printf("| backlog | connects (%s) | connect loop | connects slower than 0.5 s | ListenOverflows | ListenDrops |"
	       " errors |\n|---|---|---|---|---|---|---|\n",
	       tool_fmt_count(n, c1, sizeof(c1)));
	printf("| %s | %ld | %s | %ld | %lld | %lld | %ld |\n", bl, done, tool_fmt_dur(total, b1, sizeof(b1)), slow,
	       dovf, ddrop, errors);
	printf("\nEach connect: p50 %s, p99 %s, max %s. Errors: %ld refused, %ld reset, %ld timeout, %ld other%s%s.\n",
	       tool_fmt_dur(p50, b2, sizeof(b2)), tool_fmt_dur(p99, b3, sizeof(b3)), tool_fmt_dur(mx, b4, sizeof(b4)),
	       errs_refused, errs_reset, errs_timeout, errs_other, first_other ? ": " : "",
	       first_other ? strerror(first_other) : "");
	if (dovf > 0)
		printf("%lld handshakes overflowed an accept queue during the loop; each costs the client about 1 s "
		       "(the initial SYN retransmission timeout).\n",
		       dovf);
	tool_json_open(NULL, '{');
	tool_json_text("tool", "open-only");
	tool_json_text("run", label);
	tool_json_text("server", server ? addr.text : "own herald");
	tool_json_int("n", n);
	tool_json_int("connects", done);
	tool_json_int("backlog", backlog);
	tool_json_int("backlog_effective", effective);
	tool_json_num("total_ms", total * 1e3);
	tool_json_int("slow_connects", slow);
	tool_json_num("p50_ms", p50 * 1e3);
	tool_json_num("p99_ms", p99 * 1e3);
	tool_json_num("max_ms", mx * 1e3);
	tool_json_int("listen_overflows_before", ovf0);
	tool_json_int("listen_overflows_after", ovf1);
	tool_json_int("listen_drops_before", drop0);
	tool_json_int("listen_drops_after", drop1);
	tool_json_int("listen_overflows", dovf);
	tool_json_int("listen_drops", ddrop);
	tool_json_int("errors", errors);
	tool_json_int("refused", errs_refused);
	tool_json_int("reset", errs_reset);
	tool_json_int("timeout", errs_timeout);
	tool_json_int("other", errs_other);
	tool_json_bool("interrupted", stop_flag);
	tool_json_close();
	free(fds);
	free(times);
	return (errors || stop_flag || done < n) ? 1 : 0;
}
