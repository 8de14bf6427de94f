/* SPDX-License-Identifier: BSD-2-Clause */
/* overflow-report.c: the listen-overflow report. Reads the kernel's own
 * counters (TcpExt in /proc/net/netstat), the sysctls that size the listen
 * queues, and every listening socket's accept queue, TCP and unix, through
 * sock_diag netlink, once or as deltas per interval, and ends with sentences
 * saying what the numbers mean. */
#include "tool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const COUNTERS[] = { "ListenOverflows", "ListenDrops",          "TCPBacklogDrop",
					"TCPReqQFullDrop", "TCPReqQFullDoCookies", "SyncookiesSent" };
#define NCOUNTERS (sizeof(COUNTERS) / sizeof(COUNTERS[0]))
static const char *const SYSCTLS[] = { "net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog",
				       "net.ipv4.tcp_syncookies" };
#define NSYSCTLS (sizeof(SYSCTLS) / sizeof(SYSCTLS[0]))
#define MAX_PORTS 16
#define MAX_SOCKETS 16

static const char USAGE[] =
	"usage: load/overflow-report [--port P]... [--socket PATH]... [--backlog N] [--watch SECONDS [--count K]]\n"
	"       [--json]\n";

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "The listen-overflow report: the kernel's TcpExt counters (ListenOverflows,\n"
	       "ListenDrops, TCPBacklogDrop, TCPReqQFullDrop, TCPReqQFullDoCookies,\n"
	       "SyncookiesSent), net.core.somaxconn, net.ipv4.tcp_max_syn_backlog and\n"
	       "tcp_syncookies, and each listening socket's accept queue now and its maximum,\n"
	       "TCP and unix alike (read through sock_diag netlink), then sentences on what\n"
	       "they mean. Counters are since boot for this network namespace; --watch shows\n"
	       "deltas. The counters are TCP's; a full unix accept queue makes connect()\n"
	       "wait or fail with EAGAIN instead, and shows only in its queue.\n"
	       "\n");
	tool_opt_help(t);
	printf("Exit status: 0; 1 when a --port or --socket has no listener or the kernel cannot\n"
	       "be read; 2 usage.\n");
}

struct snapshot {
	long long ctr[NCOUNTERS];
	long sys[NSYSCTLS];
	int sys_ok[NSYSCTLS];
	struct sockdiag_listener *ls;
	struct tool_owner *own; /* ls[i]'s process in own[i] */
	int nls;
};

/* What the command line asked about. */
struct asked {
	int ports[MAX_PORTS];
	int nports;
	const char *sockets[MAX_SOCKETS];
	int nsockets;
	long backlog;
	int need_owners; /* the output names each listener's process */
};

static struct asked asked;

/* Whether l is one the command line asked about (every one when it named
 * none). */
static int wanted(const struct sockdiag_listener *l)
{
	if (asked.nports == 0 && asked.nsockets == 0)
		return 1;
	if (l->family == AF_UNIX) {
		for (int i = 0; i < asked.nsockets; i++)
			if (sockdiag_unix_is(l, asked.sockets[i]))
				return 1;
		return 0;
	}
	for (int i = 0; i < asked.nports; i++)
		if (asked.ports[i] == l->port)
			return 1;
	return 0;
}

/* Append the wanted ones of a sock_diag listing (n < 0: its error) to s. */
static void keep_wanted(struct snapshot *s, struct sockdiag_listener *all, int n, const char *what)
{
	if (n < 0) {
		fprintf(stderr, "overflow-report: sock_diag (%s): %s\n", what, strerror(-n));
		return;
	}
	s->ls = xrealloc(s->ls, ((size_t)s->nls + (size_t)n + 1) * sizeof(*s->ls));
	for (int i = 0; i < n; i++)
		if (wanted(&all[i]))
			s->ls[s->nls++] = all[i];
	free(all);
}

/* Whether a --port or --socket named on the command line has no listener in s. */
static int asked_missing(const struct snapshot *s, int i_port, int i_socket)
{
	for (int j = 0; j < s->nls; j++) {
		const struct sockdiag_listener *l = &s->ls[j];
		if (i_port >= 0 && l->family != AF_UNIX && l->port == asked.ports[i_port])
			return 0;
		if (i_socket >= 0 && sockdiag_unix_is(l, asked.sockets[i_socket]))
			return 0;
	}
	return 1;
}

static int take(struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	struct procstat_tcpext t;
	int rc = procstat_tcpext_read(&t);
	for (size_t i = 0; i < NCOUNTERS; i++)
		s->ctr[i] = rc == 0 ? procstat_tcpext_get(&t, COUNTERS[i]) : -1;
	if (rc == 0)
		procstat_tcpext_free(&t);
	for (size_t i = 0; i < NSYSCTLS; i++)
		s->sys_ok[i] = procstat_sysctl(SYSCTLS[i], &s->sys[i]) == 0;
	struct sockdiag_listener *all = NULL;
	s->ls = xcalloc(1, sizeof(*s->ls));
	if (asked.nports > 0 || asked.nsockets == 0) {
		int n = sockdiag_tcp_listeners(&all);
		keep_wanted(s, all, n, "TCP");
	}
	if (asked.nsockets > 0 || asked.nports == 0) {
		int n = sockdiag_unix_listeners(&all);
		keep_wanted(s, all, n, "unix");
	}
	s->own = xcalloc((size_t)s->nls + 1, sizeof(*s->own));
	for (int i = 0; i < s->nls; i++)
		s->own[i].inode = s->ls[i].inode;
	if (asked.need_owners)
		tool_socket_owners(s->own, s->nls);
	return rc;
}

static void snapshot_free(struct snapshot *s)
{
	free(s->ls);
	free(s->own);
	s->ls = NULL;
	s->own = NULL;
}

/* Plain sentences about a window of counters (totals or deltas). Each goes to
 * out[] (at most max) so text and JSON say the same. */
static int explain(const struct snapshot *now, const long long *d, const char *window, char out[][400], int max)
{
	int n = 0;
	long somax = now->sys_ok[0] ? now->sys[0] : -1;
	long synq = now->sys_ok[1] ? now->sys[1] : -1;
	long cookies = now->sys_ok[2] ? now->sys[2] : -1;
	long long ovf = d[0], drops = d[1], bdrop = d[2], reqdrop = d[3], reqcook = d[4], cook = d[5];

	for (int i = 0; i < now->nls && n < max; i++) {
		const struct sockdiag_listener *l = &now->ls[i];
		if (asked.backlog > 0 && (long)l->max < asked.backlog && somax >= 0 && (long)l->max == somax)
			snprintf(out[n++], 400, "%s: backlog %ld is capped to %u by net.core.somaxconn.", l->name,
				 asked.backlog, l->max);
		else if (asked.backlog > 0 && (long)l->max != asked.backlog && n < max)
			snprintf(out[n++], 400, "%s: its accept queue holds %u, not the %ld asked for.", l->name,
				 l->max, asked.backlog);
		else if (asked.backlog <= 0 && somax > 0 && (long)l->max == somax && n < max)
			snprintf(out[n++], 400,
				 "%s: its accept queue maximum equals net.core.somaxconn (%ld), so a larger "
				 "backlog may have been asked for and capped.",
				 l->name, somax);
		if (l->max > 0 && l->queued >= l->max && n < max && l->family == AF_UNIX)
			snprintf(out[n++], 400,
				 "%s: the accept queue is full now (%u of %u): new connects wait (blocking "
				 "clients) or fail with EAGAIN (non-blocking ones, such as a proxy) until the "
				 "server accepts.",
				 l->name, l->queued, l->max);
		else if (l->max > 0 && l->queued >= l->max && n < max)
			snprintf(out[n++], 400,
				 "%s: the accept queue is full now (%u of %u): new connections are being dropped "
				 "and wait out SYN retransmits (1 s, 3 s, 7 s ...) until the server accepts.",
				 l->name, l->queued, l->max);
		else if (l->max > 0 && l->queued * 2 > l->max && n < max)
			snprintf(out[n++], 400,
				 "%s: the accept queue is more than half full (%u of %u): the server is not "
				 "accepting as fast as connections arrive.",
				 l->name, l->queued, l->max);
	}
	for (int i = 0; i < asked.nports && n < max; i++)
		if (asked_missing(now, i, -1))
			snprintf(out[n++], 400, "No TCP socket is listening on port %d.", asked.ports[i]);
	for (int i = 0; i < asked.nsockets && n < max; i++)
		if (asked_missing(now, -1, i))
			snprintf(out[n++], 400, "No unix socket is listening at %s.", asked.sockets[i]);
	if (somax >= 0 && somax < 1024 && n < max)
		snprintf(out[n++], 400,
			 "net.core.somaxconn is %ld: herald's default backlog 1024 is capped to %ld; "
			 "raise it with `sysctl -w net.core.somaxconn=4096`.",
			 somax, somax);
	else if (somax >= 0 && n < max)
		snprintf(out[n++], 400, "net.core.somaxconn is %ld: a listen backlog up to %ld takes effect as asked.",
			 somax, somax);

	if (ovf > 0 && n < max)
		snprintf(out[n++], 400,
			 "%lld overflow%s %s: the accept loop fell behind or the backlog is too small; each is "
			 "a handshake the kernel dropped, which the client retries after about 1 s.",
			 ovf, ovf == 1 ? "" : "s", window);
	else if (ovf == 0 && n < max)
		snprintf(out[n++], 400, "No listen overflows %s: no accept queue was full when a connection arrived.",
			 window);
	if (drops > ovf && ovf >= 0 && n < max)
		snprintf(out[n++], 400,
			 "%lld listen drop%s %s beyond the overflows: handshakes dropped for other reasons "
			 "(a full SYN queue, memory, or a listener closing).",
			 drops - ovf, drops - ovf == 1 ? "" : "s", window);
	if (reqcook > 0 && n < max)
		snprintf(out[n++], 400,
			 "%lld time%s %s the SYN queue (net.ipv4.tcp_max_syn_backlog %ld) was full and syncookies "
			 "answered instead: those connections still completed, without TCP options like window "
			 "scaling unless timestamps carried them.",
			 reqcook, reqcook == 1 ? "" : "s", window, synq);
	if (reqdrop > 0 && n < max)
		snprintf(out[n++], 400,
			 "%lld SYN%s dropped %s because the SYN queue was full and syncookies could not help "
			 "(tcp_syncookies %ld).",
			 reqdrop, reqdrop == 1 ? "" : "s", window, cookies);
	if (cook > reqcook && reqcook >= 0 && n < max)
		snprintf(out[n++], 400, "%lld syncookie%s sent %s in all.", cook, cook == 1 ? "" : "s", window);
	if (cookies == 0 && n < max)
		snprintf(out[n++], 400,
			 "net.ipv4.tcp_syncookies is 0: when a SYN queue fills, new connections are dropped.");
	if (bdrop > 0 && n < max)
		snprintf(out[n++], 400,
			 "%lld TCPBacklogDrop%s %s: packets dropped from a connected socket's own backlog while "
			 "its owner held the lock and the receive buffer was full (a busy reader, not the listen "
			 "queue).",
			 bdrop, bdrop == 1 ? "" : "s", window);
	return n;
}

static void print_listeners_json(const struct snapshot *s)
{
	printf("\"listeners\":[");
	for (int i = 0; i < s->nls; i++) {
		const struct sockdiag_listener *l = &s->ls[i];
		printf("%s{\"family\":\"%s\",\"addr\":", i ? "," : "", l->family == AF_UNIX ? "unix" : "tcp");
		tool_json_str(stdout, l->addr);
		if (l->family == AF_UNIX) {
			printf(",\"port\":null,\"path\":");
			tool_json_str(stdout, l->path);
		} else {
			printf(",\"port\":%d", l->port);
		}
		printf(",\"name\":");
		tool_json_str(stdout, l->name);
		printf(",\"queued\":%u,\"max\":%u,\"pid\":%d,\"process\":", l->queued, l->max, (int)s->own[i].pid);
		tool_json_str(stdout, s->own[i].comm);
		printf("}");
	}
	printf("]");
}

static void print_notes(char notes[][400], int n, int json)
{
	if (json) {
		printf("\"notes\":[");
		for (int i = 0; i < n; i++) {
			if (i)
				putchar(',');
			tool_json_str(stdout, notes[i]);
		}
		printf("]");
		return;
	}
	printf("\nWhat this means:\n");
	for (int i = 0; i < n; i++)
		printf("- %s\n", notes[i]);
}

static void print_once(const struct snapshot *s, int json)
{
	char notes[64][400];
	int nn = explain(s, s->ctr, "since boot", notes, 64);
	if (json) {
		printf("{\"tool\":\"overflow-report\",\"counters\":{");
		for (size_t i = 0; i < NCOUNTERS; i++)
			printf("%s\"%s\":%lld", i ? "," : "", COUNTERS[i], s->ctr[i]);
		printf("},\"sysctl\":{");
		for (size_t i = 0; i < NSYSCTLS; i++)
			printf("%s\"%s\":%ld", i ? "," : "", SYSCTLS[i], s->sys_ok[i] ? s->sys[i] : -1L);
		printf("},");
		print_listeners_json(s);
		putchar(',');
		print_notes(notes, nn, 1);
		printf("}\n");
		return;
	}
	time_t t = time(NULL);
	char when[64];
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&t));
	printf("# Listen-overflow report, %s\n\nCounters are since boot, for this network namespace.\n\n", when);
	printf("| TcpExt counter | value |\n|---|---|\n");
	for (size_t i = 0; i < NCOUNTERS; i++)
		if (s->ctr[i] >= 0)
			printf("| %s | %lld |\n", COUNTERS[i], s->ctr[i]);
		else
			printf("| %s | n/a |\n", COUNTERS[i]);
	printf("\n| setting | value |\n|---|---|\n");
	for (size_t i = 0; i < NSYSCTLS; i++)
		if (s->sys_ok[i])
			printf("| %s | %ld |\n", SYSCTLS[i], s->sys[i]);
		else
			printf("| %s | n/a |\n", SYSCTLS[i]);
	printf("\n| listening socket | process | accept queue now | accept queue max (backlog) |\n|---|---|---|---|\n");
	for (int i = 0; i < s->nls; i++) {
		const struct sockdiag_listener *l = &s->ls[i];
		char who[96] = "?";
		if (s->own[i].pid > 0)
			snprintf(who, sizeof(who), "%s (pid %d)", s->own[i].comm, (int)s->own[i].pid);
		printf("| %s | %s | %u | %u |\n", l->name, who, l->queued, l->max);
	}
	if (s->nls == 0)
		printf("| (none%s) | | | |\n", asked.nports || asked.nsockets ? " of those asked for" : "");
	print_notes(notes, nn, 0);
}

static volatile int stop_flag;

static int watch(double interval, long count, int json)
{
	struct snapshot prev, cur;
	take(&prev);
	long long total[NCOUNTERS] = { 0 };
	long done = 0;
	double t_start = tool_now_s();
	if (!json) {
		printf("Deltas every %g s (^C to stop).\n\n", interval);
		printf("| time | ListenOverflows | ListenDrops | TCPBacklogDrop | TCPReqQFullDrop | "
		       "TCPReqQFullDoCookies | SyncookiesSent | accept queues (now/max) |\n"
		       "|---|---|---|---|---|---|---|---|\n");
		fflush(stdout);
	}
	while (!stop_flag && (count <= 0 || done < count)) {
		tool_sleep(interval, &stop_flag);
		if (stop_flag)
			break;
		take(&cur);
		long long d[NCOUNTERS];
		for (size_t i = 0; i < NCOUNTERS; i++) {
			d[i] = (cur.ctr[i] >= 0 && prev.ctr[i] >= 0) ? cur.ctr[i] - prev.ctr[i] : -1;
			if (d[i] > 0)
				total[i] += d[i];
		}
		char window[64];
		snprintf(window, sizeof(window), "in the last %g s", interval);
		char notes[64][400];
		int nn = explain(&cur, d, window, notes, 64);
		time_t t = time(NULL);
		char when[32];
		strftime(when, sizeof(when), "%H:%M:%S", localtime(&t));
		if (json) {
			printf("{\"tool\":\"overflow-report\",\"time\":\"%s\",\"interval_s\":%g,\"deltas\":{", when,
			       interval);
			for (size_t i = 0; i < NCOUNTERS; i++)
				printf("%s\"%s\":%lld", i ? "," : "", COUNTERS[i], d[i]);
			printf("},\"sysctl\":{");
			for (size_t i = 0; i < NSYSCTLS; i++)
				printf("%s\"%s\":%ld", i ? "," : "", SYSCTLS[i], cur.sys_ok[i] ? cur.sys[i] : -1L);
			printf("},");
			print_listeners_json(&cur);
			putchar(',');
			print_notes(notes, nn, 1);
			printf("}\n");
		} else {
			printf("| %s |", when);
			for (size_t i = 0; i < NCOUNTERS; i++)
				printf(" %lld |", d[i]);
			putchar(' ');
			for (int i = 0; i < cur.nls && i < 8; i++)
				printf("%s%s %u/%u", i ? ", " : "", cur.ls[i].name, cur.ls[i].queued, cur.ls[i].max);
			if (cur.nls > 8)
				printf(", ...");
			printf(" |\n");
		}
		fflush(stdout);
		snapshot_free(&prev);
		prev = cur;
		done++;
	}
	if (!json) {
		char window[64];
		snprintf(window, sizeof(window), "in the last %.0f s", tool_now_s() - t_start);
		char notes[64][400];
		int nn = explain(&prev, total, window, notes, 64);
		print_notes(notes, nn, 0);
	}
	snapshot_free(&prev);
	return 0;
}

/* --port P: one more TCP port to report on. */
static int add_port(void *ptr, const char *name, const char *v)
{
	struct asked *a = ptr;
	long p;
	if (tool_parse_long(v, 1, 65535, &p) != 0)
		return tool_usage_error("%s needs a port number 1-65535", name);
	if (a->nports == MAX_PORTS)
		return tool_usage_error("at most %d %s", MAX_PORTS, name);
	a->ports[a->nports++] = (int)p;
	return 0;
}

/* --socket PATH: one more unix listener to report on. */
static int add_socket(void *ptr, const char *name, const char *v)
{
	struct asked *a = ptr;
	if (!*v)
		return tool_usage_error("%s needs the path of a unix socket", name);
	if (a->nsockets == MAX_SOCKETS)
		return tool_usage_error("at most %d %s", MAX_SOCKETS, name);
	a->sockets[a->nsockets++] = v;
	return 0;
}

int main(int argc, char **argv)
{
	tool_usage("overflow-report", USAGE);
	double interval = 0;
	long count = 0;
	int json = 0;
	const struct tool_opt opts[] = {
		TOOL_CALL("--port", &asked, add_port, "a port number 1-65535",
			  "  --port P          only TCP listeners on port P (may be repeated)\n"),
		TOOL_CALL("--socket", &asked, add_socket, "the path of a unix socket",
			  "  --socket PATH     only the unix listener at PATH (may be repeated)\n"
			  "                    (without --port or --socket: every listener)\n"),
		TOOL_LONG("--backlog", &asked.backlog, 1, 1L << 30, "a number",
			  "  --backlog N       the backlog the server asked for, to say if it was capped\n"),
		TOOL_SECONDS("--watch", &interval, 0.05, 86400,
			     "  --watch SECONDS   print deltas every SECONDS until interrupted\n"),
		TOOL_LONG("--count", &count, 1, 1L << 30, "a number",
			  "  --count K         with --watch: stop after K intervals\n"),
		TOOL_FLAG("--json", &json, "  --json            one JSON object (per interval with --watch)\n"),
		TOOL_HELP("  --help            this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(opts, argc, argv, help);
	if (rc >= 0)
		return rc;
	if (count > 0 && interval <= 0)
		return tool_usage_error("--count goes with --watch");
	asked.need_owners = json || interval <= 0;
	if (interval > 0) {
		tool_catch_signals(&stop_flag);
		return watch(interval, count, json);
	}
	struct snapshot s;
	rc = take(&s);
	if (rc != 0)
		fprintf(stderr, "overflow-report: cannot read /proc/net/netstat: %s\n", strerror(-rc));
	print_once(&s, json);
	int missing = 0;
	for (int i = 0; i < asked.nports; i++)
		missing |= asked_missing(&s, i, -1);
	for (int i = 0; i < asked.nsockets; i++)
		missing |= asked_missing(&s, -1, i);
	snapshot_free(&s);
	return (rc != 0 || missing) ? 1 : 0;
}
