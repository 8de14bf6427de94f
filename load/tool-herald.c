/* SPDX-License-Identifier: BSD-2-Clause */
/* tool-herald.c: the private herald a load tool starts when no --server is
 * given: where its binary is found, starting it on a temporary database and
 * port and waiting until it is ready, and stopping it and removing its files.
 * The port and the backlog in effect are read from herald's log. */
#include "common/procstat.h"
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The herald of the tree this tool was built in, into buf. The Makefile
 * names it (HERALD_TREE_BIN, an absolute path); a build without it guesses
 * the build folder the tool sits in (BUILD/load/NAME -> BUILD/herald).
 * Returns words saying which. */
static const char *tree_herald(char *buf, size_t len)
{
#ifdef HERALD_TREE_BIN
	snprintf(buf, len, "%s", HERALD_TREE_BIN);
	return "the build this tool came from";
#else
	const char *guess = "beside the folder this tool is in";
	char self[4096];
	snprintf(buf, len, "build/herald");
	ssize_t r = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (r <= 0)
		return guess;
	self[r] = '\0';
	/* Drop the tool's name, then load/. */
	for (int up = 0; up < 2; up++) {
		char *slash = strrchr(self, '/');
		if (!slash)
			return guess;
		*slash = '\0';
	}
	snprintf(buf, len, "%s/herald", self);
	return guess;
#endif
}

/* The first executable NAME in $PATH's folders, into buf; 0 or -1. */
static int path_search(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		int w = snprintf(buf, len, "%.*s/%s", (int)n, n ? p : ".", name);
		if (w > 0 && (size_t)w < len && access(buf, X_OK) == 0) {
			struct stat st;
			if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
				return 0;
		}
		p += n;
		if (*p == ':')
			p++;
	}
	buf[0] = '\0';
	return -1;
}

/* The symbols a sanitizer's runtime brings into a program (in its dynamic
 * symbol table when linked as a library, in its code when linked in). */
static const struct {
	const char *sym;
	const char *name;
} sanitizer_syms[] = {
	{ "__asan_init", "AddressSanitizer" },
	{ "__ubsan_handle_", "UndefinedBehaviorSanitizer" },
	{ "__tsan_init", "ThreadSanitizer" },
	{ "__msan_init", "MemorySanitizer" },
};
#define NSANITIZERS (sizeof(sanitizer_syms) / sizeof(sanitizer_syms[0]))

int tool_sanitizers(const char *path, char *buf, size_t len)
{
	if (len)
		buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	/* Read in blocks, each starting with the previous one's last bytes, so
	 * a name cut by a block's end is still found. */
	enum { BLOCK = 1 << 20, KEEP = 32 };
	char *b = xmalloc(BLOCK + KEEP);
	bool found[NSANITIZERS] = { false };
	size_t have = 0;
	ssize_t r;
	while ((r = read(fd, b + have, BLOCK)) > 0) {
		size_t n = have + (size_t)r;
		for (size_t i = 0; i < NSANITIZERS; i++)
			found[i] = found[i] || memmem(b, n, sanitizer_syms[i].sym, strlen(sanitizer_syms[i].sym));
		have = n < KEEP ? n : KEEP;
		memmove(b, b + n - have, have);
	}
	close(fd);
	free(b);
	int count = 0;
	size_t at = 0;
	for (size_t i = 0; i < NSANITIZERS; i++) {
		if (!found[i])
			continue;
		count++;
		int w = snprintf(buf + at, len > at ? len - at : 0, "%s%s", at ? " and " : "", sanitizer_syms[i].name);
		if (w > 0)
			at += (size_t)w;
	}
	return count;
}

/* Say so on stdout, once, before anything else the tool prints there: a
 * sanitized herald runs several times slower, so its figures are not
 * herald's. shown names the binary in the message. */
static void warn_sanitized(const char *path, const char *shown)
{
	static bool warned;
	char names[160];
	if (warned || tool_sanitizers(path, names, sizeof(names)) == 0)
		return;
	warned = true;
	printf("warning: herald %s is built with %s: these figures include the sanitizer's cost and are not "
	       "herald's (make builds a release herald in build/; HERALD_BIN names one)\n",
	       shown, names);
	fflush(stdout);
}

void tool_herald_warn_pid(pid_t pid)
{
	char exe[64], shown[4096];
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	ssize_t r = readlink(exe, shown, sizeof(shown) - 1);
	if (r <= 0)
		return;
	shown[r] = '\0';
	warn_sanitized(exe, shown);
}

void tool_herald_help(void)
{
	char tree[4200];
	const char *where = tree_herald(tree, sizeof(tree));
	printf("The herald started here: $HERALD_BIN when set; else, when it exists,\n"
	       "  %s\n"
	       "  (%s)",
	       tree, where);
#ifdef HERALD_RELEASE_BIN
	printf(",\n  or the tree's release build %s when that one is built with a\n"
	       "  sanitizer and this one exists",
	       HERALD_RELEASE_BIN);
#endif
	printf("; else the first herald on PATH. A herald built with a sanitizer is\n"
	       "  named on the first line of the output.\n");
}

int tool_herald_bin(char *buf, size_t len)
{
	const char *env = getenv("HERALD_BIN");
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		if (access(buf, X_OK) == 0) {
			warn_sanitized(buf, buf);
			return 0;
		}
		fprintf(stderr, "%s: HERALD_BIN=%s cannot be run: %s\n", tool_name(), env, strerror(errno));
		return -1;
	}
	char tree[4200], names[160];
	const char *where = tree_herald(tree, sizeof(tree));
	bool have_tree = access(tree, X_OK) == 0;
	if (have_tree && tool_sanitizers(tree, names, sizeof(names)) == 0) {
		snprintf(buf, len, "%s", tree);
		return 0;
	}
#ifdef HERALD_RELEASE_BIN
	/* A tool built by the sanitized build (make test) still measures the
	 * tree's release herald when there is one. */
	if (access(HERALD_RELEASE_BIN, X_OK) == 0 && tool_sanitizers(HERALD_RELEASE_BIN, names, sizeof(names)) == 0) {
		snprintf(buf, len, "%s", HERALD_RELEASE_BIN);
		return 0;
	}
#endif
	if (have_tree) {
		snprintf(buf, len, "%s", tree);
		warn_sanitized(buf, buf);
		return 0;
	}
	if (path_search("herald", buf, len) == 0) {
		warn_sanitized(buf, buf);
		return 0;
	}
	fprintf(stderr,
		"%s: no herald to start: HERALD_BIN is not set, %s (%s) does not exist, and there is no "
		"herald on PATH.\n"
		"Set HERALD_BIN=/path/to/herald, put herald on PATH (make install), or measure a running "
		"server with --server.\n",
		tool_name(), tree, where);
	return -1;
}

int tool_default_backlog(long given)
{
	if (given > 0)
		return (int)given;
	const char *env = getenv("BACKLOG");
	long v;
	if (env && tool_parse_long(env, 1, 1 << 20, &v) == 0)
		return (int)v;
	return 1024;
}

/* Print the last lines of a log file to stderr. */
static void log_tail(const char *path)
{
	char *buf = xmalloc(8192);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		off_t end = lseek(fd, 0, SEEK_END);
		off_t start = end > 4000 ? end - 4000 : 0;
		ssize_t r = pread(fd, buf, 4000, start);
		if (r > 0) {
			buf[r] = '\0';
			fprintf(stderr, "--- last lines of %s ---\n%s%s---\n", path, buf,
				buf[r - 1] == '\n' ? "" : "\n");
		}
		close(fd);
	}
	free(buf);
}

/* Fork and exec herald on h's database, listening on listen (plus the unix
 * socket when h has one), its output into h->log (truncated). Sets h->pid;
 * returns 0, or -1 after saying why. */
static int spawn(struct tool_herald *h, const char *listen, int backlog, const char *const *extra)
{
	char bl[32], ul[320];
	snprintf(bl, sizeof(bl), "%d", backlog);
	snprintf(ul, sizeof(ul), "unix:%s", h->unix_path);
	const char *argv[64];
	int ac = 0;
	argv[ac++] = h->bin;
	argv[ac++] = "--db";
	argv[ac++] = h->db;
	argv[ac++] = "--listen";
	argv[ac++] = listen;
	if (h->unix_path[0]) {
		argv[ac++] = "--listen";
		argv[ac++] = ul;
	}
	argv[ac++] = "--per-address-limit";
	argv[ac++] = "0";
	argv[ac++] = "--backlog";
	argv[ac++] = bl;
	for (int i = 0; extra && extra[i] && ac < 62; i++)
		argv[ac++] = extra[i];
	argv[ac] = NULL;

	int logfd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (logfd < 0) {
		fprintf(stderr, "open %s: %s\n", h->log, strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		/* herald goes down with us if this tool dies without stopping it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		signal(SIGPIPE, SIG_DFL);
		setpgid(0, 0); /* a terminal's ^C reaches the tool, which stops herald */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		execv(h->bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", h->bin, strerror(errno));
		_exit(127);
	}
	close(logfd);
	h->pid = pid;
	h->backlog = backlog;
	return 0;
}

int tool_herald_ready(struct tool_herald *h)
{
	char *buf = xmalloc(65536);
	int ready = 0;
	ssize_t r = procstat_read_file(h->log, buf, 65536);
	if (r > 0 && strstr(buf, "herald ready")) {
		ready = 1;
		char *p = strstr(buf, "listening on tcp 127.0.0.1:");
		if (p) {
			h->port = atoi(p + strlen("listening on tcp 127.0.0.1:"));
			char *b = strstr(p, "(backlog ");
			char *nl = strchr(p, '\n');
			if (b && (!nl || b < nl))
				h->backlog = atoi(b + 9);
		}
	} else {
		int st;
		if (waitpid(h->pid, &st, WNOHANG) == h->pid) {
			fprintf(stderr, "herald (%s) exited with %s %d before it was ready\n", h->bin,
				WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			h->pid = 0;
			log_tail(h->log);
			ready = -1;
		}
	}
	free(buf);
	return ready;
}

/* Wait up to 30 s (ASan builds start slower) for tool_herald_ready; 0 when
 * herald is ready with a port, or -1 after saying why. */
static int wait_ready(struct tool_herald *h)
{
	double deadline = tool_now_s() + 30.0;
	int ready;
	while ((ready = tool_herald_ready(h)) == 0) {
		if (tool_now_s() > deadline) {
			fprintf(stderr, "herald did not log \"herald ready\" within 30 s\n");
			log_tail(h->log);
			tool_herald_stop(h, 1);
			return -1;
		}
		tool_sleep(0.01, NULL);
	}
	if (ready < 0)
		return -1;
	if (h->port <= 0) {
		fprintf(stderr, "herald is ready but logged no \"listening on tcp 127.0.0.1:PORT\" line\n");
		log_tail(h->log);
		tool_herald_stop(h, 1);
		return -1;
	}
	return 0;
}

int tool_herald_start(struct tool_herald *h, int port, int backlog, int unix_listener, const char *const *extra)
{
	memset(h, 0, sizeof(*h));
	if (tool_herald_bin(h->bin, sizeof(h->bin)) != 0)
		return -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(h->dir, sizeof(h->dir), "%s/herald-load-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(h->dir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", h->dir, strerror(errno));
		return -1;
	}
	snprintf(h->db, sizeof(h->db), "%s/herald.db", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/herald.log", h->dir);
	if (unix_listener)
		snprintf(h->unix_path, sizeof(h->unix_path), "%s/herald.sock", h->dir);
	char listen[64];
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	if (spawn(h, listen, backlog, extra) != 0)
		return -1;
	return wait_ready(h);
}

int tool_herald_start_again(struct tool_herald *h, const char *const *extra)
{
	if (h->pid > 0 || h->port <= 0 || !h->dir[0]) {
		fprintf(stderr, "%s: no stopped herald to start again\n", tool_name());
		return -1;
	}
	char old[320], listen[64];
	snprintf(old, sizeof(old), "%s.1", h->log);
	rename(h->log, old);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", h->port);
	return spawn(h, listen, h->backlog, extra);
}

int tool_herald_stop(struct tool_herald *h, int keep)
{
	int code = -1;
	if (h->pid > 0) {
		kill(h->pid, SIGTERM);
		double deadline = tool_now_s() + 10.0;
		int st = 0;
		pid_t r;
		while ((r = waitpid(h->pid, &st, WNOHANG)) == 0 && tool_now_s() < deadline)
			tool_sleep(0.01, NULL);
		if (r == 0) {
			fprintf(stderr, "herald (pid %d) did not exit within 10 s of SIGTERM; killing it\n",
				(int)h->pid);
			kill(h->pid, SIGKILL);
			waitpid(h->pid, &st, 0);
			keep = 1;
		} else if (r == h->pid) {
			if (WIFEXITED(st))
				code = WEXITSTATUS(st);
			if (!WIFEXITED(st) || code != 0) {
				fprintf(stderr, "herald exited with %s %d after SIGTERM\n",
					WIFEXITED(st) ? "status" : "signal",
					WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
				log_tail(h->log);
				keep = 1;
			}
		}
		h->pid = 0;
	}
	if (!h->dir[0])
		return code;
	if (keep) {
		fprintf(stderr, "herald's files are kept in %s\n", h->dir);
	} else {
		const char *suffix[] = { "herald.db",  "herald.db-wal", "herald.db-shm", "herald.db-journal",
					 "herald.log", "herald.sock",   "herald.log.1" };
		for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
			char p[400];
			snprintf(p, sizeof(p), "%s/%s", h->dir, suffix[i]);
			unlink(p);
		}
		if (rmdir(h->dir) != 0)
			fprintf(stderr, "left %s behind: %s\n", h->dir, strerror(errno));
	}
	h->dir[0] = '\0';
	return code;
}
