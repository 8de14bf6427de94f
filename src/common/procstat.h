/* SPDX-License-Identifier: BSD-2-Clause */
/* procstat.h: what /proc says about a process and the TCP stack: one
 * /proc/PID/stat line (CPU ticks, threads, resident pages, parent), the
 * TcpExt counters of /proc/net/netstat, and numbers under /proc/sys.
 *
 * Each reading has a pure parser that takes the file's text (unit-tested
 * without /proc) and a reader that opens the file and calls it. Nothing here
 * logs; a missing file is an error value for the caller to report. */
#ifndef HERALD_PROCSTAT_H
#define HERALD_PROCSTAT_H

#include <stdint.h>
#include <sys/types.h>

/* The fields of a /proc/PID/stat line that herald and the load tools use. */
struct procstat {
	pid_t pid;
	char comm[64]; /* the command name between the outer parentheses, cut to fit */
	char state;    /* R, S, D, Z, ... */
	pid_t ppid;
	uint64_t utime, stime; /* CPU time in clock ticks (procstat_clk_tck per second) */
	long threads;
	long rss_pages; /* resident set, in pages of procstat_page_size bytes */
};

/* Parse one /proc/PID/stat line. The command name may hold spaces and
 * parentheses, so the fields are counted from the last ')'. Returns 0, or
 * -EINVAL when the line is cut short or a field used is not a number. */
int procstat_parse(const char *line, struct procstat *ps);

/* Read and parse /proc/PID/stat (pid 0: this process). Returns 0, -ENOENT
 * when the process is gone, another -errno from reading, or -EINVAL. */
int procstat_read(pid_t pid, struct procstat *ps);

/* Clock ticks per second and bytes per page, for the fields above. */
long procstat_clk_tck(void);
long procstat_page_size(void);

/* The TcpExt counters of /proc/net/netstat: names[i] has value vals[i]. */
struct procstat_tcpext {
	int n;
	char (*names)[48];
	long long *vals;
};

/* Parse the text of /proc/net/netstat: its first "TcpExt:" line names the
 * counters, the second holds their values. Returns 0 (free t with
 * procstat_tcpext_free), or -ENODATA when the pair is missing. */
int procstat_tcpext_parse(const char *text, struct procstat_tcpext *t);
/* Read /proc/net/netstat now; 0 or -errno, as procstat_tcpext_parse. */
int procstat_tcpext_read(struct procstat_tcpext *t);
void procstat_tcpext_free(struct procstat_tcpext *t);
/* The counter called name, or -1 when this kernel has none by that name. */
long long procstat_tcpext_get(const struct procstat_tcpext *t, const char *name);

/* Read a small file whole into buf (at most len - 1 bytes, then a NUL).
 * Returns the bytes read, or -errno. */
ssize_t procstat_read_file(const char *path, char *buf, size_t len);

/* Read the first number of /proc/sys/NAME, NAME dotted
 * ("net.core.somaxconn") or an absolute path. Returns 0 with *val set,
 * -errno when the file cannot be read, or -EINVAL when it holds no number. */
int procstat_sysctl(const char *name, long *val);

#endif
