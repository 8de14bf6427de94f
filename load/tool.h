/* SPDX-License-Identifier: BSD-2-Clause */
/* tool.h: what every load tool shares, beside herald's own src/procstat and
 * src/sockdiag (kernel readings) and src/util (allocation that aborts):
 *
 *   tool.c         clocks, usage errors, numbers and addresses from the
 *                  command line, the fd limit, signals, errno kinds,
 *                  percentiles, formatting for tables
 *   tool-opt.c     the table-driven option parser and its --help lines
 *   tool-json.c    one JSON line at a time on stdout
 *   tool-herald.c  finding, starting and stopping a private herald
 *   tool-proc.c    a process and its children summed (CPU, threads, RSS),
 *                  TcpExt counters now, a listener's backlog, socket owners
 *   tool-tls.c     a throwaway certificate for a herald's tls: listener, and
 *                  that listener's port
 *
 * These files, the SSE client (sse-client.h) and herald's util, procstat and
 * sockdiag objects are the tools' library, $(BUILD)/load/libtool.a, compiled
 * once per build. Every function is prefixed tool_. One thread; the only state kept between
 * calls is the tool's name and usage (tool_usage), the JSON line's nesting,
 * the flag the signal handler sets, and whether the sanitized-herald warning
 * was printed. */
#ifndef HERALD_LOAD_TOOL_H
#define HERALD_LOAD_TOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "common/procstat.h"
#include "common/sockdiag.h"
#include "common/util.h"

/* ---- tool.c ---------------------------------------------------------------- */

/* Monotonic clock in nanoseconds and seconds. */
int64_t tool_now_ns(void);
double tool_now_s(void);
/* Sleep s seconds (restarting after signals unless *stop becomes set). */
void tool_sleep(double s, volatile int *stop);

/* Name the tool and its usage text for tool_usage_error(); both are kept,
 * not copied. Call it first thing in main. */
void tool_usage(const char *name, const char *usage);
/* The name given to tool_usage ("load" before). */
const char *tool_name(void);
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
/* Parse s into *a; 0 or -1. */
int tool_parse_addr(const char *s, struct tool_addr *a);

/* The classification the tools count errors by: "refused", "reset",
 * "timeout", "closed", or "other". */
const char *tool_errno_kind(int err);

/* Sigint/sigterm set *flag instead of killing the tool, so that it can stop
 * the herald it started and report what it has; SIGPIPE is ignored. */
void tool_catch_signals(volatile int *flag);

/* Path of a sibling tool (load/NAME next to this executable) into buf. */
const char *tool_sibling(const char *name, char *buf, size_t len);

/* Percentile p (0..100) of a sorted array, nearest-rank; NAN when empty. */
double tool_percentile(const double *sorted, size_t n, double p);
void tool_sort_doubles(double *v, size_t n);

/* Format a duration in seconds for a table: "61.2 ms", "6.01 s", "840 us". */
const char *tool_fmt_dur(double s, char *buf, size_t len);
/* Format an integer with thousands commas: 10000 -> "10,000". */
const char *tool_fmt_count(long long v, char *buf, size_t len);

/* ---- tool-opt.c: the command line ------------------------------------------- */

enum tool_opt_kind {
	TOOL_OPT_FLAG,   /* sets *(int *)ptr to 1 */
	TOOL_OPT_LONG,   /* a whole decimal number in [min, max] into *(long *)ptr */
	TOOL_OPT_DOUBLE, /* seconds ("0.5", "250ms", "2s", "1m") in [min, max] into *(double *)ptr */
	TOOL_OPT_STRING, /* the argument itself, at least min bytes long, into *(const char **)ptr */
	TOOL_OPT_CALL,   /* the argument handed to call(ptr, name, value) */
	TOOL_OPT_HELP,   /* the help function, then exit status 0 */
};

/* One option of a tool. A table of them ends with an entry whose name is
 * NULL; its order is the order of the --help lines. A name without a
 * leading '-' ("N") is a positional argument, filled by the first argument
 * not starting with '-' (TOOL_OPT_LONG only). */
struct tool_opt {
	const char *name; /* "--events" */
	char short_name;  /* 'c' for -c; 0 for none */
	enum tool_opt_kind kind;
	void *ptr;
	double min, max;  /* the allowed range (a string's least length in min) */
	const char *what; /* the value in messages: "a number", "seconds", "an address" */
	const char *help; /* its lines in --help as printed; NULL when another entry's lines cover it */
	/* TOOL_OPT_CALL: take value, given for the option spelled name; return
	 * 0, or an exit status after saying why (tool_usage_error). */
	int (*call)(void *ptr, const char *name, const char *value);
};

/* Table entries, by kind; a short name is added with .short_name. */
#define TOOL_FLAG(n, p, h)                                                  \
	{                                                                   \
		.name = (n), .kind = TOOL_OPT_FLAG, .ptr = (p), .help = (h) \
	}
#define TOOL_LONG(n, p, lo, hi, w, h)                                                                              \
	{                                                                                                          \
		.name = (n), .kind = TOOL_OPT_LONG, .ptr = (p), .min = (lo), .max = (hi), .what = (w), .help = (h) \
	}
#define TOOL_SECONDS(n, p, lo, hi, h)                                                                          \
	{                                                                                                      \
		.name = (n), .kind = TOOL_OPT_DOUBLE, .ptr = (p), .min = (lo), .max = (hi), .what = "seconds", \
		.help = (h)                                                                                    \
	}
#define TOOL_STRING(n, p, w, h)                                                            \
	{                                                                                  \
		.name = (n), .kind = TOOL_OPT_STRING, .ptr = (p), .what = (w), .help = (h) \
	}
#define TOOL_CALL(n, p, fn, w, h)                                                                      \
	{                                                                                              \
		.name = (n), .kind = TOOL_OPT_CALL, .ptr = (p), .call = (fn), .what = (w), .help = (h) \
	}
#define TOOL_HELP(h)                                                                    \
	{                                                                               \
		.name = "--help", .short_name = 'h', .kind = TOOL_OPT_HELP, .help = (h) \
	}
#define TOOL_END             \
	{                    \
		.name = NULL \
	}

/* Parse argv by the table. Returns -1 when the tool should go on, 0 after
 * help(t) for --help, or 2 after a usage error on stderr: an unknown
 * argument, or a value missing or out of range, named with its range
 * ("--events needs a number 1-10000", "N must be a number from 1 to 500"). */
int tool_opt_parse(const struct tool_opt *t, int argc, char **argv, void (*help)(const struct tool_opt *t));
/* Print the help lines of every option in the table, in order, on stdout. */
void tool_opt_help(const struct tool_opt *t);

/* ---- tool-json.c: the JSON line ---------------------------------------------- */

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

/* ---- tool-herald.c: a herald of our own ------------------------------------------ */

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
 * exists, unless it is built with a sanitizer and the tree's release build
 * (HERALD_RELEASE_BIN) exists, which is taken instead; else the first herald
 * on $PATH (an installed tool). A herald built with a sanitizer is named in
 * a warning on stdout (once, so on the output's first line when called
 * before anything is printed there). Returns 0, or -1 after saying which
 * places were tried. */
int tool_herald_bin(char *buf, size_t len);
/* The same warning for the herald running as process pid (--pid). */
void tool_herald_warn_pid(pid_t pid);
/* Which sanitizers the program at path was built with, from the symbols
 * their runtimes bring: "AddressSanitizer and UndefinedBehaviorSanitizer"
 * into buf ("" for none). Returns how many. */
int tool_sanitizers(const char *path, char *buf, size_t len);
/* Print, for --help, where the herald to start is looked for. */
void tool_herald_help(void);
/* Start herald with --db DIR/herald.db --listen 127.0.0.1:PORT (0: one the
 * kernel picks) --per-address-limit 0 --backlog BACKLOG (and a unix listener
 * when unix is set) plus extra args; wait for "herald ready" and read the
 * port from its log. Returns 0, or -1 after printing why (with the log's
 * tail, which says when the port was taken). */
int tool_herald_start(struct tool_herald *h, int port, int backlog, int unix_listener, const char *const *extra);
/* Start the herald h was (it must have exited, and h->pid be 0) again, on
 * the same port, database and folder with the same backlog and extra args;
 * the previous log is kept as herald.log.1. Does not wait for it: see
 * tool_herald_ready. Returns 0, or -1 after saying why. */
int tool_herald_start_again(struct tool_herald *h, const char *const *extra);
/* 1 once h's herald logged "herald ready" (its port and backlog read from
 * the log), 0 while not yet, -1 when it exited first (h->pid is then 0,
 * and the log's tail printed). */
int tool_herald_ready(struct tool_herald *h);
/* SIGTERM it, wait up to 10 s (then SIGKILL), remove its temporary files
 * unless keep is set. Returns its exit status (or -1 when killed). */
int tool_herald_stop(struct tool_herald *h, int keep);
/* Backlog for a herald we start: --backlog if given (>0), else $BACKLOG,
 * else 1024. */
int tool_default_backlog(long given);

/* ---- tool-proc.c: readings for the tables --------------------------------------- */

/* utime+stime in clock ticks of pid (and its live descendants when children
 * is set). Returns 0, or -ESRCH when pid is gone. */
int tool_cpu_ticks(pid_t pid, int children, uint64_t *ticks);
/* The scheduler's own counts (/proc/N/schedstat of the main thread): ns on
 * a CPU and ns runnable but waiting for one, summed the same way; either
 * pointer may be NULL. Returns 0, or -ESRCH when pid is gone. */
int tool_sched_ns(pid_t pid, int children, uint64_t *run_ns, uint64_t *wait_ns);
/* Seconds pid's main thread has spent on a CPU, read once it is off one
 * (waiting at most 50 ms for that): the scheduler brings a running task's
 * count up to date only at its next scheduling event, so a reading taken
 * while it runs can miss all it did since it woke. NAN when pid is gone. */
double tool_cpu_run_s(pid_t pid);
/* Threads of pid and, with children, its descendants; -1 when pid is gone. */
int tool_threads(pid_t pid, int children);
/* Memory in KiB: pid's resident set; with children, the proportional set
 * sizes of pid and its descendants summed (shared pages counted once over
 * the group, not once per process); -1 when pid is gone. */
long tool_rss_kb(pid_t pid, int children);
/* Read one TcpExt counter now; -1 when absent or unreadable. */
long long tool_tcpext_now(const char *name);
/* The maximum of the accept queue of the listener at a (a TCP port, or a
 * unix socket's path), read through sock_diag: the backlog that took effect.
 * -1 when no listener is found. */
int tool_accept_queue_max(const struct tool_addr *a);

/* The process holding a socket, found by the socket's inode. */
struct tool_owner {
	unsigned long inode; /* in: the socket's; 0 to skip */
	pid_t pid;           /* out: 0 when not found */
	char comm[32];
};
/* Fill in pid and comm of each of o[0..n), in one walk over /proc/N/fd
 * (only processes we may look into). */
void tool_socket_owners(struct tool_owner *o, int n);

/* ---- tool-tls.c: TLS for the herald started here ------------------------------- */

/* A throwaway certificate: a temporary folder holding cert.pem and key.pem. */
struct tool_cert {
	char dir[300]; /* "" when none was made */
	char cert[400];
	char key[400];
};
/* Write a fresh self-signed P-256 certificate for IP 127.0.0.1 (valid a day)
 * and its key into a new temporary folder. Returns 0, or -1 with the reason
 * in err. */
int tool_tls_make_cert(struct tool_cert *c, char *err, size_t errlen);
/* Remove the folder and both files, unless keep is set. */
void tool_tls_remove_cert(struct tool_cert *c, int keep);
/* The port of a herald's tls:127.0.0.1 listener, from its log; 0 if none. */
int tool_tls_port_from_log(const char *log);
/* Keep the first TLS error of a run in first (len bytes; "" until one):
 * "what: OpenSSL's reason" (or errno's, or "connection closed"); later ones
 * are dropped. Clears OpenSSL's error queue either way. */
void tool_tls_note_error(char *first, size_t len, const char *what);

#endif
