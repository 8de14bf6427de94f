/* SPDX-License-Identifier: BSD-2-Clause */
/* backlog-experiment.c: what a tiny listen backlog does to a burst of opens,
 * on your own machine. Runs load/readers and load/open-only against a fresh
 * herald for each backlog (5, then 1024 unless told otherwise), shows each
 * run's output, then both tables side by side and what they mean. */
#include "tool.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char USAGE[] =
	"usage: load/backlog-experiment [--readers N] [--opens N] [--backlogs B1,B2,...] [--events K]\n"
	"       [--interval S] [--idle S] [--ramp M] [--post] [--no-floor] [--port P]\n";

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "For each listen backlog (default 5, then 1024) start a fresh herald and run\n"
	       "`load/readers N --backlog B` and `load/open-only N --backlog B`; print each\n"
	       "run's output, then the readers table and the open-only table for all\n"
	       "backlogs together, and sentences on what the difference means.\n"
	       "\n");
	tool_opt_help(t);
	printf("Exit status: 0 when every run reported its figures and the runs at the\n"
	       "largest backlog succeeded (readers failing to open behind a small backlog\n"
	       "are the result being shown); 1 otherwise; 2 usage.\n");
	tool_herald_help();
}

#define MAX_BACKLOGS 8
#define OUT_MAX (1 << 20)

/* The backlogs to try, in order. */
struct backlogs {
	long v[MAX_BACKLOGS];
	int n;
};

/* Options passed on to load/readers as given, in order. */
struct pass {
	const char *v[16];
	int n;
};

struct run {
	char *out; /* the tool's stdout */
	int status;
	char cmd[512];
};

static volatile int stop_flag;

/* Run argv with stdout captured (stderr passes through); 0 or -1. */
static int run_tool(char *const argv[], struct run *r)
{
	r->out = xcalloc(OUT_MAX, 1);
	r->status = -1;
	size_t cl = 0;
	r->cmd[0] = '\0';
	for (int i = 0; argv[i]; i++) {
		const char *a = i == 0 ? strrchr(argv[0], '/') : NULL;
		char shown[300];
		if (a && strstr(argv[0], "load/"))
			snprintf(shown, sizeof(shown), "load%s", a);
		else
			snprintf(shown, sizeof(shown), "%s", argv[i]);
		cl += (size_t)snprintf(r->cmd + cl, sizeof(r->cmd) - cl, "%s%s", i ? " " : "", shown);
		if (cl >= sizeof(r->cmd))
			break;
	}
	int pfd[2];
	if (pipe(pfd) != 0)
		return -1;
	fflush(stdout);
	fprintf(stderr, "backlog-experiment: running %s\n", r->cmd);
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		close(pfd[0]);
		dup2(pfd[1], 1);
		close(pfd[1]);
		execv(argv[0], argv);
		fprintf(stderr, "backlog-experiment: cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(pfd[0], r->out + len, OUT_MAX - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		if (len >= OUT_MAX - 1)
			break;
	}
	r->out[len] = '\0';
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return 0;
}

/* The line of text starting with prefix (the nth match), copied to buf. */
static int find_line(const char *text, const char *prefix, int nth, char *buf, size_t len)
{
	const char *p = text;
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t ll = nl ? (size_t)(nl - p) : strlen(p);
		if (strncmp(p, prefix, strlen(prefix)) == 0 && nth-- == 0) {
			snprintf(buf, len, "%.*s", (int)ll, p);
			return 0;
		}
		p = nl ? nl + 1 : NULL;
	}
	buf[0] = '\0';
	return -1;
}

/* The last line of text that starts with '{'. */
static const char *json_line(const char *text)
{
	const char *last = NULL;
	for (const char *p = text; p && *p;) {
		if (*p == '{')
			last = p;
		const char *nl = strchr(p, '\n');
		p = nl ? nl + 1 : NULL;
	}
	return last ? last : "";
}

static double jnum(const char *json, const char *key)
{
	double v;
	return tool_json_number(json, key, &v) == 0 ? v : NAN;
}

/* --backlogs 5,1024: up to MAX_BACKLOGS numbers, comma-separated. */
static int take_backlogs(void *ptr, const char *name, const char *v)
{
	struct backlogs *b = ptr;
	b->n = 0;
	char *copy = xstrdup(v), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (b->n == MAX_BACKLOGS || tool_parse_long(t, 1, 1L << 20, &b->v[b->n]) != 0) {
			free(copy);
			return tool_usage_error("%s needs up to %d numbers 1-1048576, comma-separated", name,
						MAX_BACKLOGS);
		}
		b->n++;
	}
	free(copy);
	if (b->n == 0)
		return tool_usage_error("%s needs a list like 5,1024", name);
	return 0;
}

#define PASS_WHAT "a number (0 to 86400)"

/* --events, --interval, --idle, --ramp: checked loosely here (load/readers
 * checks them exactly) and passed on as given. */
static int pass_value(void *ptr, const char *name, const char *v)
{
	struct pass *p = ptr;
	double d;
	if (tool_parse_seconds(v, 0, 86400, &d) != 0)
		return tool_usage_error("%s needs %s", name, PASS_WHAT);
	if (p->n + 2 > 14)
		return tool_usage_error("too many options");
	p->v[p->n++] = name;
	p->v[p->n++] = v;
	return 0;
}

/* A flag passed on to load/readers; 0, or -1 when there is no room. */
static int pass_flag(struct pass *p, const char *flag)
{
	if (p->n + 1 > 14)
		return -1;
	p->v[p->n++] = flag;
	return 0;
}

int main(int argc, char **argv)
{
	tool_usage("backlog-experiment", USAGE);
	long readers = 1000, opens = 1000, port = -1;
	struct backlogs asked = { { 5, 1024 }, 2 };
	struct pass pass = { { NULL }, 0 };
	int post = 0, no_floor = 0;
	const struct tool_opt opts[] = {
		TOOL_LONG("--readers", &readers, 1, 1000000, "a number",
			  "  --readers N     readers to open (default 1000)\n"),
		TOOL_LONG("--opens", &opens, 1, 1000000, "a number",
			  "  --opens N       sequential connects for open-only (default 1000)\n"),
		TOOL_CALL("--backlogs", &asked, take_backlogs, "a list like 5,1024",
			  "  --backlogs LIST comma-separated backlogs (default 5,1024; at most 8)\n"),
		TOOL_CALL("--events", &pass, pass_value, PASS_WHAT,
			  "  --events K, --interval S, --idle S, --ramp M, --post, --no-floor\n"
			  "                  passed to load/readers (see load/readers --help)\n"),
		TOOL_CALL("--interval", &pass, pass_value, PASS_WHAT, NULL),
		TOOL_CALL("--idle", &pass, pass_value, PASS_WHAT, NULL),
		TOOL_CALL("--ramp", &pass, pass_value, PASS_WHAT, NULL),
		TOOL_FLAG("--post", &post, NULL),
		TOOL_FLAG("--no-floor", &no_floor, NULL),
		TOOL_LONG("--port", &port, 0, 65535, "a port number",
			  "  --port P        the port of each herald started, one run after the other\n"
			  "                  (default 0: one the kernel picks)\n"),
		TOOL_HELP("  --help          this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(opts, argc, argv, help);
	if (rc >= 0)
		return rc;
	if ((post && pass_flag(&pass, "--post") != 0) || (no_floor && pass_flag(&pass, "--no-floor") != 0))
		return tool_usage_error("too many options");
	long *backlogs = asked.v;
	int nb = asked.n;
	int npass = pass.n;
	long need = readers > opens ? readers : opens;
	char what[64];
	snprintf(what, sizeof(what), "%ld connections", need);
	if (tool_check_fds(need + 64, what) != 0)
		return 2;
	/* A terminal's ^C reaches the children too: each stops its herald and
	 * reports; this program then stops starting new runs. */
	tool_catch_signals(&stop_flag);

	/* The runs start the herald found here (said first when sanitized). */
	char bin[512];
	if (tool_herald_bin(bin, sizeof(bin)) != 0)
		return 1;
	setenv("HERALD_BIN", bin, 1);

	char rpath[4096], opath[4096];
	tool_sibling("readers", rpath, sizeof(rpath));
	tool_sibling("open-only", opath, sizeof(opath));
	struct run rr[MAX_BACKLOGS], orr[MAX_BACKLOGS];
	memset(rr, 0, sizeof(rr));
	memset(orr, 0, sizeof(orr));
	int failed = 0;
	char nbuf[32], obuf[32], pbuf[32];
	snprintf(pbuf, sizeof(pbuf), "%ld", port < 0 ? 0 : port);
	snprintf(nbuf, sizeof(nbuf), "%ld", readers);
	snprintf(obuf, sizeof(obuf), "%ld", opens);

	long largest = 0;
	for (int b = 0; b < nb; b++)
		if (backlogs[b] > largest)
			largest = backlogs[b];

	printf("# Listen backlog experiment: %ld readers and %ld sequential connects per backlog\n", readers, opens);
	for (int b = 0; b < nb && !stop_flag; b++) {
		char bl[32], label[48];
		snprintf(bl, sizeof(bl), "%ld", backlogs[b]);
		snprintf(label, sizeof(label), "backlog %ld", backlogs[b]);
		const char *ra[40];
		int n = 0;
		ra[n++] = rpath;
		ra[n++] = nbuf;
		ra[n++] = "--backlog";
		ra[n++] = bl;
		ra[n++] = "--run";
		ra[n++] = label;
		for (int j = 0; j < npass; j++)
			ra[n++] = pass.v[j];
		ra[n++] = "--port";
		ra[n++] = pbuf;
		ra[n] = NULL;
		/* Opens failing behind a small backlog are the finding, not a
		 * failure; a run that says nothing, or the largest backlog failing,
		 * is. */
		if (run_tool((char *const *)ra, &rr[b]) != 0 || !*json_line(rr[b].out) ||
		    (rr[b].status != 0 && backlogs[b] == largest))
			failed = 1;
		printf("\n## %s\n\n$ %s\n\n%s", label, rr[b].cmd, rr[b].out);
		if (rr[b].status != 0)
			printf("(exit status %d)\n", rr[b].status);
		fflush(stdout);
		if (stop_flag)
			break;
		const char *oa[] = { opath, obuf, "--backlog", bl, "--run", label, "--port", pbuf, NULL };
		if (run_tool((char *const *)oa, &orr[b]) != 0 || !*json_line(orr[b].out) ||
		    (orr[b].status != 0 && backlogs[b] == largest))
			failed = 1;
		printf("\n$ %s\n\n%s", orr[b].cmd, orr[b].out);
		if (orr[b].status != 0)
			printf("(exit status %d)\n", orr[b].status);
		fflush(stdout);
	}

	/* Both tables, every backlog's row under one header. The readers'
	 * header names how many opened ("event to all N"), so a run where fewer
	 * opened starts a table of its own. */
	char line[1024], shown[1024] = "";
	printf("\n## Summary\n\n### load/readers %ld\n\n", readers);
	for (int b = 0; b < nb; b++) {
		if (!rr[b].out)
			continue;
		if (find_line(rr[b].out, "| run |", 0, line, sizeof(line)) == 0 && strcmp(line, shown) != 0) {
			printf("%s%s\n", shown[0] ? "\n" : "", line);
			snprintf(shown, sizeof(shown), "%s", line);
			find_line(rr[b].out, "|---", 0, line, sizeof(line));
			printf("%s\n", line);
		}
		if (find_line(rr[b].out, "| backlog ", 0, line, sizeof(line)) == 0)
			printf("%s\n", line);
	}
	printf("\n### load/open-only %ld\n\n", opens);
	int header = 0;
	for (int b = 0; b < nb; b++) {
		if (!orr[b].out)
			continue;
		if (!header && find_line(orr[b].out, "| backlog |", 0, line, sizeof(line)) == 0) {
			printf("%s\n", line);
			find_line(orr[b].out, "|---", 0, line, sizeof(line));
			printf("%s\n", line);
			header = 1;
		}
		if (find_line(orr[b].out, "| ", 1, line, sizeof(line)) == 0)
			printf("%s\n", line);
	}

	printf("\nWhat this means:\n");
	for (int b = 0; b < nb; b++) {
		if (!rr[b].out)
			continue;
		const char *rj = json_line(rr[b].out);
		const char *oj = orr[b].out ? json_line(orr[b].out) : "";
		double opened = jnum(rj, "opened"), open_ms = jnum(rj, "open_ms"), rovf = jnum(rj, "listen_overflows");
		double slow = jnum(oj, "slow_connects"), oovf = jnum(oj, "listen_overflows");
		double total = jnum(oj, "total_ms");
		printf("- backlog %ld: %.0f of %ld readers had their opening frame after %.3f s, with %.0f listen "
		       "overflows during the opens; %ld sequential connects took %.3f s, %.0f of them slower than "
		       "0.5 s, %.0f overflows.\n",
		       backlogs[b], opened, readers, open_ms / 1e3, rovf, opens, total / 1e3, slow, oovf);
		double reset = jnum(rj, "reset"), timeouts = jnum(rj, "timeout"),
		       failed_opens = jnum(rj, "open_errors");
		if (failed_opens > 0)
			printf("  %.0f readers never opened (%.0f reset, %.0f timed out). A reset here is a connection "
			       "the "
			       "client saw complete while the server dropped its final ACK on the full queue; once the "
			       "server gave up resending its SYN-ACK, the client's request met a RST.\n",
			       failed_opens, reset, timeouts);
		if (rovf > 0 || oovf > 0)
			printf("  Each overflow is a handshake the kernel dropped because the accept queue of %ld was "
			       "full; the client's SYN comes back only after the 1 s retransmission timeout (then 3 s, "
			       "7 s ...), and readers that started together retry together, which is where whole "
			       "seconds of open time come from.\n",
			       backlogs[b]);
		else
			printf("  No handshake overflowed the accept queue of %ld: herald's accept loop emptied it "
			       "faster than connections arrived.\n",
			       backlogs[b]);
	}
	printf("- load/readers starts every connect at once, as clients reconnecting after a restart do; with "
	       "--ramp M (at most M connects in flight) a small queue overflows less, but a reconnect storm does "
	       "not ramp itself.\n");
	printf("- The counters are the whole network namespace's (other traffic adds to them); "
	       "load/overflow-report explains each.\n");
	for (int b = 0; b < nb; b++) {
		free(rr[b].out);
		free(orr[b].out);
	}
	return (failed || stop_flag) ? 1 : 0;
}
