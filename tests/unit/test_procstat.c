/* SPDX-License-Identifier: BSD-2-Clause */
/* test_procstat.c: /proc/PID/stat lines with odd command names (spaces,
 * parentheses, a fake field list inside the name, empty, too long), lines
 * cut short or with a non-number where a number belongs, each placed before
 * a PROT_NONE page so an over-read faults; then real readings: this process,
 * a child renamed to "a) (b c" with prctl, a process that is gone, the
 * TcpExt pair of /proc/net/netstat (from text and from the kernel) and a
 * /proc/sys number. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "guard.h"
#include "common/procstat.h"

/* Fields 3..24 of a line, after the name: state S, ppid 1, utime 25,
 * stime 7, 3 threads, 512 resident pages, then the rest as the kernel
 * writes them. */
#define TAIL                                                                         \
	" S 1 1234 1234 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 3 0 12345 1000000 512 " \
	"18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 0 0 0 0 0\n"

static int parse(const char *line, struct procstat *ps)
{
	return procstat_parse(guarded(line, strlen(line) + 1), ps);
}

static void check_tail(const struct procstat *ps)
{
	CHECK_EQ_INT(ps->state, 'S');
	CHECK_EQ_INT(ps->ppid, 1);
	CHECK_EQ_INT(ps->utime, 25);
	CHECK_EQ_INT(ps->stime, 7);
	CHECK_EQ_INT(ps->threads, 3);
	CHECK_EQ_INT(ps->rss_pages, 512);
}

static void odd_names(void)
{
	struct procstat ps;
	CHECK_EQ_INT(parse("1234 (herald)" TAIL, &ps), 0);
	CHECK_EQ_INT(ps.pid, 1234);
	CHECK(strcmp(ps.comm, "herald") == 0);
	check_tail(&ps);

	const char *names[] = { "a b",   "a (b) c",    ")",
				"(",     "x) R 99 99", ") S 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9",
				"",      "tab\there",  "new\nline",
				"((()))" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char line[512];
		snprintf(line, sizeof(line), "77 (%s)" TAIL, names[i]);
		int rc = parse(line, &ps);
		CHECK_EQ_INT(rc, 0);
		CHECK(strcmp(ps.comm, names[i]) == 0);
		if (rc == 0)
			check_tail(&ps);
	}

	/* A name longer than the field keeps its start; the numbers still come
	 * from after the last ')'. */
	char line[512], longname[200];
	memset(longname, 'n', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	snprintf(line, sizeof(line), "5 (%s)" TAIL, longname);
	CHECK_EQ_INT(parse(line, &ps), 0);
	CHECK_EQ_INT(strlen(ps.comm), sizeof(ps.comm) - 1);
	check_tail(&ps);
	/* Without the final newline too (a line read through another means). */
	CHECK_EQ_INT(parse("1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 2 3 0 0 20 0 1 0 5 100 9", &ps), 0);
	CHECK_EQ_INT(ps.utime, 2);
	CHECK_EQ_INT(ps.rss_pages, 9);
}

static void bad_lines(void)
{
	struct procstat ps;
	const char *bad[] = {
		"",
		"1234 herald S 1 2 3",
		"1234 (herald",
		"(herald)" TAIL,
		"x (herald)" TAIL,
		"1234 (herald) S 1 1234 1234 0 -1 4194560 100 0 0 0 25 7\n", /* stops at stime */
		"1234 (herald) S 1 1234 1234 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 3 0 12345 1000000",
		"1234 (herald) S 1 1234 1234 0 -1 4194560 100 0 0 0 2x5 7 0 0 20 0 3 0 12345 1000000 512 0\n",
		"1234 (herald) S one 1234 1234 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 3 0 12345 1000000 512 0\n",
		"1234 (herald) S 1 1234 1234 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 3 0 12345 1000000 -\n",
		"1234 (herald)S 1 1234 1234 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 3 0 12345 1000000 512 0\n",
		"1234 (herald) S 1  1234 1234 0 -1 4194560 100 0 0 0 25 7 0 0 20 0 3 0 12345 1000000 512 0\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &ps);
		if (rc != -EINVAL)
			fprintf(stderr, "  accepted bad line %zu: %s\n", i, bad[i]);
		CHECK_EQ_INT(rc, -EINVAL);
	}
}

static void real_processes(void)
{
	struct procstat ps;
	CHECK_EQ_INT(procstat_read(0, &ps), 0);
	CHECK_EQ_INT(ps.pid, getpid());
	CHECK_EQ_INT(ps.ppid, getppid());
	CHECK_EQ_INT(ps.state, 'R');
	CHECK(ps.threads >= 1);
	CHECK(ps.rss_pages > 0);
	CHECK(procstat_clk_tck() > 0 && procstat_page_size() > 0);

	/* A child that names itself like a stat line, waiting on a pipe. */
	int ready[2], hold[2];
	CHECK(pipe(ready) == 0 && pipe(hold) == 0);
	pid_t child = fork();
	if (child == 0) {
		char c = 0;
		prctl(PR_SET_NAME, "a) (b c", 0, 0, 0);
		if (write(ready[1], "r", 1) != 1 || read(hold[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	char c;
	CHECK(child > 0 && read(ready[0], &c, 1) == 1);
	CHECK_EQ_INT(procstat_read(child, &ps), 0);
	CHECK(strcmp(ps.comm, "a) (b c") == 0);
	CHECK_EQ_INT(ps.pid, child);
	CHECK_EQ_INT(ps.ppid, getpid());
	CHECK_EQ_INT(ps.threads, 1);
	CHECK(write(hold[1], "x", 1) == 1);
	int st;
	CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	/* Reaped: its /proc entry is gone. */
	CHECK_EQ_INT(procstat_read(child, &ps), -ENOENT);
	close(ready[0]);
	close(ready[1]);
	close(hold[0]);
	close(hold[1]);
}

static void tcpext(void)
{
	struct procstat_tcpext t;
	const char *text = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\n"
			   "TcpExt: 4 17 18\n"
			   "IpExt: InNoRoutes\n"
			   "IpExt: 99\n";
	CHECK_EQ_INT(procstat_tcpext_parse(guarded(text, strlen(text) + 1), &t), 0);
	CHECK_EQ_INT(t.n, 3);
	CHECK_EQ_INT(procstat_tcpext_get(&t, "ListenOverflows"), 17);
	CHECK_EQ_INT(procstat_tcpext_get(&t, "ListenDrops"), 18);
	CHECK_EQ_INT(procstat_tcpext_get(&t, "SyncookiesSent"), 4);
	CHECK_EQ_INT(procstat_tcpext_get(&t, "InNoRoutes"), -1);
	procstat_tcpext_free(&t);
	/* Without a final newline, and with more names than values. */
	text = "TcpExt: A B C\nTcpExt: 1 2";
	CHECK_EQ_INT(procstat_tcpext_parse(guarded(text, strlen(text) + 1), &t), 0);
	CHECK_EQ_INT(t.n, 2);
	CHECK_EQ_INT(procstat_tcpext_get(&t, "B"), 2);
	CHECK_EQ_INT(procstat_tcpext_get(&t, "C"), -1);
	procstat_tcpext_free(&t);
	text = "TcpExt: A B C\nIpExt: 1 2 3\n";
	CHECK_EQ_INT(procstat_tcpext_parse(guarded(text, strlen(text) + 1), &t), -ENODATA);
	CHECK_EQ_INT(procstat_tcpext_parse(guarded("", 1), &t), -ENODATA);

	/* The kernel's own: the counters the load tools report exist. */
	CHECK_EQ_INT(procstat_tcpext_read(&t), 0);
	CHECK(t.n > 10);
	CHECK(procstat_tcpext_get(&t, "ListenOverflows") >= 0);
	CHECK(procstat_tcpext_get(&t, "ListenDrops") >= 0);
	procstat_tcpext_free(&t);
}

static void sysctl(void)
{
	long a = -1, b = -2;
	CHECK_EQ_INT(procstat_sysctl("net.core.somaxconn", &a), 0);
	CHECK_EQ_INT(procstat_sysctl("/proc/sys/net/core/somaxconn", &b), 0);
	CHECK(a > 0 && a == b);
	CHECK_EQ_INT(procstat_sysctl("net.core.no_such_setting", &a), -ENOENT);
}

int main(void)
{
	arena_init();
	odd_names();
	bad_lines();
	real_processes();
	tcpext();
	sysctl();
	return check_done("test_procstat");
}
