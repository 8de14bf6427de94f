/* proc.h: the one module every load tool links. It reads what the kernel says
 * about a process and the TCP stack (/proc/PID, /proc/net/netstat, /proc/sys,
 * sock_diag netlink), and carries the little plumbing the tools share: clocks,
 * argument checks, the fd limit, and starting and stopping a private herald.
 *
 * Prefixes: proc_ for kernel readings, tool_ for shared tool plumbing. The
 * tools link without src/, so the abort-on-OOM allocators live here too. */
#ifndef HERALD_LOAD_PROC_H
#define HERALD_LOAD_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

/* xmalloc and friends come from herald's own src/util.c, linked in. */
#include "util.h"

/* ---- /proc/PID ---------------------------------------------------------- */

/* Fill out[] with pid and every live descendant of it (found through the ppid
 * field of /proc/N/stat), pid first. Returns how many, at most max; 0 when pid
 * is gone. With children=0 only pid itself is checked. */
int proc_family(pid_t pid, int children, pid_t *out, int max);
/* utime+stime in clock ticks of pid (and its live descendants when children
 * is set). Returns 0, or -ESRCH when pid is gone. */
int proc_cpu_ticks(pid_t pid, int children, uint64_t *ticks);
/* Clock ticks per second (sysconf(_SC_CLK_TCK)). */
long proc_clk_tck(void);
/* Threads (entries of /proc/N/task) of pid and, with children, descendants;
 * -1 when pid is gone. */
int proc_threads(pid_t pid, int children);
/* VmRSS in KiB summed the same way; -1 when pid is gone. */
long proc_rss_kb(pid_t pid, int children);

/* ---- /proc/net/netstat and /proc/sys -------------------------------------- */

/* A snapshot of the TcpExt line pair of /proc/net/netstat. */
struct proc_tcpext {
	int n;
	char (*names)[48];
	long long *vals;
};

/* Read the current TcpExt counters; returns 0 or -errno. Free with
 * proc_tcpext_free. */
int proc_tcpext_read(struct proc_tcpext *t);
void proc_tcpext_free(struct proc_tcpext *t);
/* The counter called name, or -1 when this kernel has none by that name. */
long long proc_tcpext_get(const struct proc_tcpext *t, const char *name);
/* Read one TcpExt counter now; -1 when absent or unreadable. */
long long proc_tcpext_now(const char *name);

/* Read /proc/sys/NAME where NAME is dotted ("net.core.somaxconn") or a path;
 * the first number of the file goes to *val. Returns 0 or -errno. */
int proc_sys_long(const char *name, long *val);

/* ---- sock_diag ------------------------------------------------------------ */

/* One listening socket as sock_diag reports it. For a listener the kernel
 * puts the accept queue length in rqueue and its maximum (the listen backlog
 * after the somaxconn cap) in wqueue, for TCP and unix sockets alike. */
struct proc_listener {
	int family;     /* AF_INET, AF_INET6 or AF_UNIX */
	char addr[64];  /* numeric, IPv6 in brackets; "unix" for unix sockets */
	int port;       /* 0 for unix sockets */
	char path[110]; /* unix: the name as bound, "@name" when abstract, "" when unnamed */
	char name[180]; /* for people: "127.0.0.1:8199", "[::1]:8199", "unix:/run/herald.sock" */
	unsigned queued;
	unsigned max;
	unsigned long inode;
	unsigned uid;
	unsigned long vfs_ino; /* unix: the socket file's inode and device, 0 when none */
	unsigned long vfs_dev;
	pid_t owner; /* set by proc_listener_owners() */
	char comm[32];
};

/* List every listening TCP socket (IPv4 and IPv6) of this network namespace.
 * *out is allocated (free it); returns the count or -errno. */
int proc_listeners(struct proc_listener **out);
/* List every listening unix stream socket of this network namespace, the
 * same way. */
int proc_unix_listeners(struct proc_listener **out);
/* Whether l is the unix listener bound at path: the same name, or the same
 * socket file (so a relative or linked path matches too). */
int proc_unix_listener_is(const struct proc_listener *l, const char *path);
/* Fill in owner and comm of each of ls[0..n): the process holding the socket,
 * found in one walk over /proc/N/fd (only processes we may look into);
 * owner 0 when not found. */
void proc_listener_owners(struct proc_listener *ls, int n);

/* ---- tool plumbing -------------------------------------------------------- */

/* Monotonic clock in nanoseconds and seconds. */
int64_t tool_now_ns(void);
double tool_now_s(void);
/* Sleep s seconds (restarting after signals unless *stop becomes set). */
void tool_sleep(double s, volatile int *stop);

/* Name the tool and its usage text for tool_usage_error(); both are kept,
 * not copied. Call it first thing in main. */
void tool_usage(const char *name, const char *usage);
/* Say "NAME: " and the reason (printf-style, cut at 300 bytes), then the
 * usage text, on stderr. Returns 2, the exit status of a usage error. */
int tool_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Parse a whole decimal integer in [min, max]; 0 or -1. */
int tool_parse_long(const char *s, long min, long max, long *out);
/* Parse seconds: "0.5", "20", "250ms", "2s", "1m"; must be in [min, max]. */
int tool_parse_seconds(const char *s, double min, double max, double *out);

/* Raise RLIMIT_NOFILE's soft limit to the hard one. *soft and *hard get the
 * result; returns 0 or -errno. */
int tool_raise_nofile(long *soft, long *hard);
/* Say plainly, and return -1, when `need` descriptors cannot fit under the
 * current limit; what names the need ("1000 readers"). */
int tool_check_fds(long need, const char *what);

/* A place to connect to: "127.0.0.1:PORT", "[::1]:PORT", "HOST:PORT" with a
 * numeric host, "unix:/path", or "http://..." URL whose path is kept. */
struct tool_addr {
	struct sockaddr_storage sa;
	socklen_t len;
	int family; /* AF_INET, AF_INET6, AF_UNIX */
	int port;   /* 0 for unix */
	char text[160];
	char path[256]; /* URL path, "" when none was given */
};
int tool_parse_addr(const char *s, struct tool_addr *a);

/* The maximum of the accept queue of the listener at a (a TCP port, or a
 * unix socket's path), read through sock_diag: the backlog that took effect.
 * -1 when no listener is found. */
int tool_accept_queue_max(const struct tool_addr *a);

/* The classification the tools count errors by: "refused", "reset",
 * "timeout", "closed", or "other". */
const char *tool_errno_kind(int err);

/* Sigint/sigterm set *flag instead of killing the tool, so that it can stop
 * the herald it started and report what it has. */
void tool_catch_signals(volatile int *flag);

/* A herald this tool started on a temporary database. */
struct tool_herald {
	pid_t pid;
	int port;
	int backlog;   /* as herald logged it */
	char dir[256]; /* temporary folder */
	char db[300];
	char log[300];
	char unix_path[300]; /* "" without a unix listener */
	char bin[512];
};

/* Path of the herald to start, in this order: $HERALD_BIN when set (and then
 * only it); else the herald of the tree this tool was built in, when it still
 * exists; else the first herald on $PATH (an installed tool). Returns 0, or
 * -1 after saying which three places were tried. */
int tool_herald_bin(char *buf, size_t len);
/* Print, for --help, where the herald to start is looked for. */
void tool_herald_help(void);
/* Path of a sibling tool (load/NAME next to this executable). */
const char *tool_sibling(const char *name, char *buf, size_t len);
/* Start herald with --db DIR/herald.db --listen 127.0.0.1:0
 * --per-address-limit 0 --backlog BACKLOG (and a unix listener when unix is
 * set) plus extra args; wait for "herald ready" and read the port from its
 * log. Returns 0, or -1 after printing why (with the log's tail). */
int tool_herald_start(struct tool_herald *h, int backlog, int unix_listener, const char *const *extra);
/* SIGTERM it, wait up to 10 s (then SIGKILL), remove its temporary files
 * unless keep is set. Returns its exit status (or -1 when killed). */
int tool_herald_stop(struct tool_herald *h, int keep);
/* Backlog for a herald we start: --backlog if given (>0), else $BACKLOG,
 * else 1024. */
int tool_default_backlog(long given);

/* Write s as a JSON string (quoted, escaped) to f. */
void tool_json_str(FILE *f, const char *s);
/* Build one JSON line on stdout: tool_json_open(NULL, '{'), then members,
 * nested with tool_json_open("key", '{' or '[') and tool_json_close(), and a
 * final tool_json_close() ends the line. A NULL key adds an array element.
 * Numbers that are NaN print as null. */
void tool_json_open(const char *key, char bracket);
void tool_json_close(void);
void tool_json_int(const char *key, long long v);
void tool_json_num(const char *key, double v);
void tool_json_text(const char *key, const char *s);
void tool_json_bool(const char *key, int v);
void tool_json_null(const char *key);
/* Find "key": in a one-line JSON object and parse the number after it. */
int tool_json_number(const char *json, const char *key, double *out);

/* Percentile p (0..100) of a sorted array, nearest-rank. */
double tool_percentile(const double *sorted, size_t n, double p);
void tool_sort_doubles(double *v, size_t n);

/* Format a duration in seconds for a table: "61.2 ms", "6.01 s", "840 us". */
const char *tool_fmt_dur(double s, char *buf, size_t len);
/* Format an integer with thousands commas: 10000 -> "10,000". */
const char *tool_fmt_count(long long v, char *buf, size_t len);

#endif
