/* SPDX-License-Identifier: BSD-2-Clause */
/* tool-proc.c: the kernel readings the load tools print, built on herald's
 * src/procstat and src/sockdiag: a server process and its children summed
 * (CPU ticks, threads, resident memory, from one /proc/N/stat line each;
 * the scheduler's nanoseconds on a CPU and waiting for one, from
 * /proc/N/schedstat),
 * one TcpExt counter now, the backlog a listener got, and which process
 * holds a socket. A missing process or file gives an error value the tools
 * print as "n/a", never a crash. */
#include "tool.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#define FAMILY_MAX 256

/* Add every live descendant of out[0..n) to out (up to max), found through
 * the parent field of each /proc/N/stat; returns the new count. */
static int add_descendants(pid_t *out, int n, int max)
{
	DIR *d = opendir("/proc");
	if (!d)
		return n;
	/* Collect (pid, ppid) of every process once, then grow the family until
	 * no process's parent is newly in it. */
	size_t cap = 256, cnt = 0;
	pid_t(*pairs)[2] = xmalloc(cap * sizeof(*pairs));
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		struct procstat ps;
		pid_t p = (pid_t)atoi(de->d_name);
		if (p == out[0] || procstat_read(p, &ps) != 0)
			continue;
		if (cnt == cap) {
			cap *= 2;
			pairs = xrealloc(pairs, cap * sizeof(*pairs));
		}
		pairs[cnt][0] = p;
		pairs[cnt][1] = ps.ppid;
		cnt++;
	}
	closedir(d);
	for (int grew = 1; grew && n < max;) {
		grew = 0;
		for (size_t i = 0; i < cnt && n < max; i++) {
			for (int j = 0; pairs[i][0] && j < n; j++) {
				if (pairs[i][1] == out[j]) {
					out[n++] = pairs[i][0];
					pairs[i][0] = 0;
					grew = 1;
				}
			}
		}
	}
	free(pairs);
	return n;
}

/* Read /proc/N/stat of pid and, with children, of each live descendant,
 * into st[] (pid first); returns how many, 0 when pid itself is gone. */
static int family_stats(pid_t pid, int children, struct procstat *st, int max)
{
	if (procstat_read(pid, &st[0]) != 0)
		return 0;
	if (!children)
		return 1;
	pid_t fam[FAMILY_MAX];
	fam[0] = pid;
	int n = add_descendants(fam, 1, FAMILY_MAX);
	int got = 1;
	for (int i = 1; i < n && got < max; i++)
		if (procstat_read(fam[i], &st[got]) == 0)
			got++;
	return got;
}

int tool_cpu_ticks(pid_t pid, int children, uint64_t *ticks)
{
	struct procstat st[FAMILY_MAX];
	int n = family_stats(pid, children, st, FAMILY_MAX);
	if (n == 0)
		return -ESRCH;
	uint64_t sum = 0;
	for (int i = 0; i < n; i++)
		sum += st[i].utime + st[i].stime;
	*ticks = sum;
	return 0;
}

/* /proc/N/schedstat: nanoseconds on a CPU, then runnable and waiting. */
static int read_schedstat(pid_t pid, uint64_t *run, uint64_t *wait)
{
	char path[64], buf[128];
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	if (pid <= 0 || procstat_read_file(path, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	unsigned long long r = 0, w = 0;
	if (sscanf(buf, "%llu %llu", &r, &w) != 2)
		return -EINVAL;
	*run = r;
	*wait = w;
	return 0;
}

int tool_sched_ns(pid_t pid, int children, uint64_t *run_ns, uint64_t *wait_ns)
{
	uint64_t run = 0, wait = 0;
	int r = read_schedstat(pid, &run, &wait);
	if (r < 0)
		return r;
	if (children) {
		pid_t fam[FAMILY_MAX];
		fam[0] = pid;
		int n = add_descendants(fam, 1, FAMILY_MAX);
		for (int i = 1; i < n; i++) {
			uint64_t a, b;
			if (read_schedstat(fam[i], &a, &b) == 0) {
				run += a;
				wait += b;
			}
		}
	}
	if (run_ns)
		*run_ns = run;
	if (wait_ns)
		*wait_ns = wait;
	return 0;
}

double tool_cpu_run_s(pid_t pid)
{
	struct procstat ps;
	double until = tool_now_s() + 0.05;
	while (procstat_read(pid, &ps) == 0 && ps.state == 'R' && tool_now_s() < until)
		tool_sleep(0.0002, NULL);
	uint64_t run;
	return tool_sched_ns(pid, 0, &run, NULL) == 0 ? (double)run / 1e9 : NAN;
}

int tool_threads(pid_t pid, int children)
{
	struct procstat st[FAMILY_MAX];
	int n = family_stats(pid, children, st, FAMILY_MAX);
	if (n == 0)
		return -1;
	long total = 0;
	for (int i = 0; i < n; i++)
		total += st[i].threads;
	return (int)total;
}

/* The proportional set size of one process in KiB (/proc/N/smaps_rollup:
 * each page it maps divided among the processes that map it), or -1. */
static long pss_kb(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	long kb = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

long tool_rss_kb(pid_t pid, int children)
{
	if (children) {
		/* A group maps one shared region (and the same libraries): its
		 * pages, in every process's RSS, would be counted once per
		 * process; a process's PSS counts its share of them. */
		pid_t fam[FAMILY_MAX];
		fam[0] = pid;
		int n = add_descendants(fam, 1, FAMILY_MAX);
		long total = 0;
		for (int i = 0; i < n; i++) {
			long kb = pss_kb(fam[i]);
			if (kb < 0) {
				if (i == 0)
					return -1;
				continue;
			}
			total += kb;
		}
		return total;
	}
	struct procstat st[FAMILY_MAX];
	int n = family_stats(pid, children, st, FAMILY_MAX);
	if (n == 0)
		return -1;
	long pages = 0;
	for (int i = 0; i < n; i++)
		pages += st[i].rss_pages;
	return pages * (procstat_page_size() / 1024);
}

long long tool_tcpext_now(const char *name)
{
	struct procstat_tcpext t;
	if (procstat_tcpext_read(&t) != 0)
		return -1;
	long long v = procstat_tcpext_get(&t, name);
	procstat_tcpext_free(&t);
	return v;
}

int tool_accept_queue_max(const struct tool_addr *a)
{
	struct sockdiag_listener *ls = NULL;
	int n = a->family == AF_UNIX ? sockdiag_unix_listeners(&ls) : sockdiag_tcp_listeners(&ls);
	int max = -1;
	const char *path = ((const struct sockaddr_un *)&a->sa)->sun_path;
	for (int i = 0; i < n && max < 0; i++)
		if (a->family == AF_UNIX ? sockdiag_unix_is(&ls[i], path) : ls[i].port == a->port)
			max = (int)ls[i].max;
	free(ls);
	return max;
}

/* The entry among o[0..n) whose socket this /proc/N/fd link names and whose
 * owner is not known yet; NULL when none. */
static struct tool_owner *unowned(struct tool_owner *o, int n, const char *target)
{
	if (strncmp(target, "socket:[", 8) != 0)
		return NULL;
	unsigned long ino = strtoul(target + 8, NULL, 10);
	for (int i = 0; i < n; i++)
		if (o[i].inode == ino && o[i].pid == 0)
			return &o[i];
	return NULL;
}

/* Name p (found holding a socket) as the owner of e. */
static void own(struct tool_owner *e, pid_t p)
{
	e->pid = p;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)p);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r = fd >= 0 ? read(fd, e->comm, sizeof(e->comm) - 1) : -1;
	e->comm[r > 0 ? r : 0] = '\0';
	e->comm[strcspn(e->comm, "\n")] = '\0';
	if (fd >= 0)
		close(fd);
}

/* Look through the descriptors of process pid (a /proc name) for sockets of
 * o[]; returns how many owners were found. */
static int scan_fds(const char *pid, struct tool_owner *o, int n, int left)
{
	char path[300];
	snprintf(path, sizeof(path), "/proc/%s/fd", pid);
	DIR *fds = opendir(path);
	if (!fds)
		return 0;
	int found = 0;
	struct dirent *fe;
	while (found < left && (fe = readdir(fds))) {
		if (fe->d_name[0] == '.')
			continue;
		char link[600], target[128];
		snprintf(link, sizeof(link), "%s/%s", path, fe->d_name);
		ssize_t r = readlink(link, target, sizeof(target) - 1);
		if (r <= 0)
			continue;
		target[r] = '\0';
		struct tool_owner *e = unowned(o, n, target);
		if (e) {
			own(e, (pid_t)atoi(pid));
			found++;
		}
	}
	closedir(fds);
	return found;
}

void tool_socket_owners(struct tool_owner *o, int n)
{
	int left = 0;
	for (int i = 0; i < n; i++) {
		o[i].pid = 0;
		o[i].comm[0] = '\0';
		left += o[i].inode != 0;
	}
	/* One walk over every process's descriptors, however many sockets. */
	DIR *d = left ? opendir("/proc") : NULL;
	if (!d)
		return;
	struct dirent *de;
	while (left > 0 && (de = readdir(d)))
		if (isdigit((unsigned char)de->d_name[0]))
			left -= scan_fds(de->d_name, o, n, left);
	closedir(d);
}
