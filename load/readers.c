/* readers.c: N stream readers on one epoll thread, so the client is never
 * the bottleneck, and the server measured from outside while they listen.
 * This file holds the command line, the set-up and the run's phases; the
 * client itself is readers-net.c (see readers.h for the other parts).
 *
 * Phases, in order:
 *   open    connect N sockets (optionally at most --ramp in flight), send the
 *           stream request, wait for every status line, header block and
 *           opening frame; time until the last had it, errors by kind.
 *   events  publish one public event --events times, --interval apart (an
 *           INSERT into the SQLite file as another process would, or a POST),
 *           and time from just before each insert until every reader has it.
 *   idle    stay connected --idle seconds.
 * Around the phases the server is sampled from /proc (CPU from utime+stime,
 * threads, RSS) and TcpExt ListenOverflows/ListenDrops are read; then the
 * kernel's floor (load/fanout-floor N) is measured for the ratio.
 *
 * With --tls the herald started here gets a tls: listener and a fresh P-256
 * certificate (or --tls-cert/--tls-key); the publisher stays plain. The CPU
 * the server spends over the opens is reported, which with TLS is mostly the
 * handshakes. */
#include "readers.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] =
	"usage: load/readers N [--server ADDR [--pid PID] (--db PATH | --publish URL)] [--backlog B] [--unix] "
	"[--post]\n"
	"       [--events K] [--interval S] [--idle S] [--ramp M] [--sources K] [--path TARGET] [--token T]\n"
	"       [--open-timeout S] [--event-timeout S] [--csv FILE] [--run LABEL] [--no-floor] [--keep]\n"
	"       [--tls [--insecure | --cacert FILE] [--tls-cert FILE --tls-key FILE]]\n";

static void help(void)
{
	printf("%s", USAGE);
	printf("\n"
	       "Open N Server-Sent Events streams from one epoll thread, wait for every\n"
	       "opening frame, publish one public event K times, time until every reader has\n"
	       "each, stay idle, and sample the server from /proc. Prints a markdown table,\n"
	       "a per-event table, and one JSON line with every figure. With no --server it\n"
	       "starts its own herald (see the end of this text) on a temporary database\n"
	       "and port, with the per-address cap lifted: `load/readers 1000` is the whole\n"
	       "experiment.\n"
	       "\n"
	       "  N                  readers (1 to 1000000; the fd limit is raised to the hard one)\n"
	       "  --server ADDR      an already running server: 127.0.0.1:PORT, [::1]:PORT,\n"
	       "                     unix:/path, or http://127.0.0.1:PORT/stream/path\n"
	       "  --pid PID          sample this server process (and its children) from /proc\n"
	       "  --db PATH          publish by INSERT into this herald database\n"
	       "  --publish URL      publish by POST to URL (http://127.0.0.1:PORT/api/events\n"
	       "                     or unix:/path for /api/events on a unix socket)\n"
	       "  --backlog B        listen backlog of the herald started here (default $BACKLOG\n"
	       "                     or 1024)\n"
	       "  --unix             the herald started here also listens on a unix socket, and\n"
	       "                     the readers connect through it\n"
	       "  --post             publish to the herald started here by POST, not INSERT\n"
	       "  --events K         events to publish (default 10)\n"
	       "  --interval S       seconds between them (default 0.5)\n"
	       "  --idle S           idle seconds after the events (default 20)\n"
	       "  --ramp M           at most M connects in flight (default 0: no cap)\n"
	       "  --sources K        spread source addresses over 127.0.0.1 .. 127.0.0.K\n"
	       "  --path TARGET      request target (default /api/events/stream)\n"
	       "  --token T          send Authorization: Bearer T (stream and publish)\n"
	       "  --open-timeout S   give up on opens after S seconds (default 300)\n"
	       "  --event-timeout S  wait S seconds after the last event for stragglers (default 10)\n"
	       "  --csv FILE         write reader,event,id,latency_ms for every reader and event\n"
	       "  --run LABEL        the label in the table's run column (default 1)\n"
	       "  --no-floor         skip measuring the kernel's floor (load/fanout-floor N)\n"
	       "  --keep             keep the started herald's temporary folder\n"
	       "  --tls              readers speak TLS (full handshakes, ALPN http/1.1); the herald\n"
	       "                     started here gets a tls:127.0.0.1:0 listener and a fresh P-256\n"
	       "                     certificate; publishing stays plain\n"
	       "  --insecure         with --tls, do not verify the server's certificate (for a\n"
	       "                     self-signed one on --server)\n"
	       "  --cacert FILE      with --tls, trust this PEM instead of the system's CAs\n"
	       "  --tls-cert FILE, --tls-key FILE\n"
	       "                     with --tls, the pair for the herald started here (e.g. RSA)\n"
	       "  --help             this text\n"
	       "Exit status: 0 when every reader opened and had every event; 1 otherwise; 2 usage.\n");
	tool_herald_help();
}

struct options opt = {
	.n = -1,
	.events = 10,
	.interval = 0.5,
	.idle = 20,
	.open_timeout = 300,
	.event_timeout = 10,
	.run = "1",
};

volatile int stop_flag;
long N;
struct tool_addr target;
pid_t server_pid;
static long next_connect;
static int64_t t_open_begin;

/* Events. */
long K;
int64_t *recv_ns;
int64_t *ev_id;
int64_t *ev_t0;
int64_t *ev_t1;
long *ev_got;
int *ev_failed;
long n_published;

/* ---- sampling the server -------------------------------------------------- */

static struct cpu_mark cpu_mark(void)
{
	struct cpu_mark m = { .t = tool_now_s() };
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	m.self = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (server_pid > 0)
		m.ok = proc_cpu_ticks(server_pid, 1, &m.ticks) == 0;
	return m;
}

/* ---- the floor ------------------------------------------------------------- */

/* Run load/fanout-floor N --json (over unix sockets when the readers used
 * one) and return its median time to the last reader in seconds, NAN when it
 * could not run. */
static double run_floor(long n)
{
	char path[4096], arg[32];
	tool_sibling("fanout-floor", path, sizeof(path));
	snprintf(arg, sizeof(arg), "%ld", n);
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return NAN;
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return NAN;
	}
	if (pid == 0) {
		dup2(pfd[1], 1);
		if (target.family == AF_UNIX)
			execl(path, path, arg, "--json", "--unix", (char *)NULL);
		else
			execl(path, path, arg, "--json", (char *)NULL);
		fprintf(stderr, "readers: cannot run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	char out[4096];
	size_t len = 0;
	double deadline = tool_now_s() + 120;
	while (len < sizeof(out) - 1 && tool_now_s() < deadline) {
		struct pollfd pf = { .fd = pfd[0], .events = POLLIN };
		if (poll(&pf, 1, 1000) <= 0)
			continue;
		ssize_t r = read(pfd[0], out + len, sizeof(out) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	out[len] = '\0';
	close(pfd[0]);
	int st;
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGTERM);
		waitpid(pid, &st, 0);
	}
	double ms;
	if (tool_json_number(out, "last_reader_ms", &ms) != 0)
		return NAN;
	return ms / 1e3;
}

/* ---- the command line ------------------------------------------------------ */

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED(what)                                     \
	do {                                           \
		if (!v)                                \
			return tool_usage_error(what); \
		i++;                                   \
	} while (0)
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			help();
			exit(0);
		} else if (strcmp(a, "--server") == 0) {
			NEED("--server needs an address");
			opt.server = v;
		} else if (strcmp(a, "--pid") == 0) {
			NEED("--pid needs a process id");
			if (tool_parse_long(v, 1, 1L << 30, &opt.pid) != 0)
				return tool_usage_error("--pid needs a process id");
		} else if (strcmp(a, "--db") == 0) {
			NEED("--db needs a path");
			opt.db = v;
		} else if (strcmp(a, "--publish") == 0) {
			NEED("--publish needs a URL");
			opt.publish = v;
		} else if (strcmp(a, "--backlog") == 0) {
			NEED("--backlog needs a number");
			if (tool_parse_long(v, 1, 1L << 20, &opt.backlog) != 0)
				return tool_usage_error("--backlog needs a number 1-1048576");
		} else if (strcmp(a, "--events") == 0) {
			NEED("--events needs a number");
			if (tool_parse_long(v, 1, 10000, &opt.events) != 0)
				return tool_usage_error("--events needs a number 1-10000");
		} else if (strcmp(a, "--interval") == 0) {
			NEED("--interval needs seconds");
			if (tool_parse_seconds(v, 0, 3600, &opt.interval) != 0)
				return tool_usage_error("--interval needs seconds (0 to 3600)");
		} else if (strcmp(a, "--idle") == 0) {
			NEED("--idle needs seconds");
			if (tool_parse_seconds(v, 0, 86400, &opt.idle) != 0)
				return tool_usage_error("--idle needs seconds (0 to 86400)");
		} else if (strcmp(a, "--open-timeout") == 0) {
			NEED("--open-timeout needs seconds");
			if (tool_parse_seconds(v, 0.01, 86400, &opt.open_timeout) != 0)
				return tool_usage_error("--open-timeout needs seconds");
		} else if (strcmp(a, "--event-timeout") == 0) {
			NEED("--event-timeout needs seconds");
			if (tool_parse_seconds(v, 0.01, 3600, &opt.event_timeout) != 0)
				return tool_usage_error("--event-timeout needs seconds");
		} else if (strcmp(a, "--ramp") == 0) {
			NEED("--ramp needs a number");
			if (tool_parse_long(v, 0, 1000000, &opt.ramp) != 0)
				return tool_usage_error("--ramp needs a number (0 = no cap)");
		} else if (strcmp(a, "--sources") == 0) {
			NEED("--sources needs a number");
			if (tool_parse_long(v, 1, 254, &opt.sources) != 0)
				return tool_usage_error("--sources needs a number 1-254");
		} else if (strcmp(a, "--path") == 0) {
			NEED("--path needs a request target");
			if (v[0] != '/' || strpbrk(v, " \r\n"))
				return tool_usage_error("--path needs a target starting with /");
			opt.path = v;
		} else if (strcmp(a, "--token") == 0) {
			NEED("--token needs a value");
			if (strpbrk(v, "\r\n"))
				return tool_usage_error("--token may not hold line breaks");
			opt.token = v;
		} else if (strcmp(a, "--csv") == 0) {
			NEED("--csv needs a file");
			opt.csv = v;
		} else if (strcmp(a, "--run") == 0) {
			NEED("--run needs a label");
			opt.run = v;
		} else if (strcmp(a, "--unix") == 0) {
			opt.unix_listener = 1;
		} else if (strcmp(a, "--post") == 0) {
			opt.post = 1;
		} else if (strcmp(a, "--no-floor") == 0) {
			opt.no_floor = 1;
		} else if (strcmp(a, "--keep") == 0) {
			opt.keep = 1;
		} else if (strcmp(a, "--tls") == 0) {
			opt.tls = 1;
		} else if (strcmp(a, "--insecure") == 0) {
			opt.insecure = 1;
		} else if (strcmp(a, "--cacert") == 0) {
			NEED("--cacert needs a file");
			opt.cacert = v;
		} else if (strcmp(a, "--tls-cert") == 0) {
			NEED("--tls-cert needs a file");
			opt.tls_cert = v;
		} else if (strcmp(a, "--tls-key") == 0) {
			NEED("--tls-key needs a file");
			opt.tls_key = v;
		} else if (a[0] != '-' && opt.n < 0) {
			if (tool_parse_long(a, 1, 1000000, &opt.n) != 0)
				return tool_usage_error("N must be a number from 1 to 1000000");
		} else {
			return tool_usage_error("unknown argument '%s'", a);
		}
#undef NEED
	}
	if (opt.n < 0)
		return tool_usage_error("say how many readers (N)");
	if (opt.n * opt.events > 50000000)
		return tool_usage_error("N times --events may be at most 50,000,000 (a latency is kept for each)");
	if (opt.server) {
		if (tool_parse_addr(opt.server, &target) != 0)
			return tool_usage_error(
				"--server wants 127.0.0.1:PORT, [::1]:PORT, unix:/path or http://HOST:PORT/path");
		if (!opt.db && !opt.publish)
			return tool_usage_error("with --server, say how to publish: --db PATH or --publish URL");
		if (opt.unix_listener || opt.post)
			return tool_usage_error("--unix and --post are for the herald started here (no --server)");
	} else if (opt.pid || opt.db || opt.publish) {
		return tool_usage_error("--pid, --db and --publish go with --server");
	}
	if (opt.db && opt.publish)
		return tool_usage_error("--db and --publish exclude each other");
	if (!opt.tls && (opt.insecure || opt.cacert || opt.tls_cert || opt.tls_key))
		return tool_usage_error("--insecure, --cacert, --tls-cert and --tls-key go with --tls");
	if (opt.tls && opt.unix_listener)
		return tool_usage_error("--tls is over TCP; leave out --unix");
	if (opt.insecure && opt.cacert)
		return tool_usage_error("--insecure and --cacert exclude each other");
	if (!opt.tls_cert != !opt.tls_key)
		return tool_usage_error("--tls-cert and --tls-key go together");
	if (opt.server && opt.tls_cert)
		return tool_usage_error("--tls-cert and --tls-key are for the herald started here (no --server)");
	if (opt.publish && tool_parse_addr(opt.publish, &pub_addr) != 0)
		return tool_usage_error("--publish wants http://127.0.0.1:PORT/api/events or unix:/path");
	return -1;
}

/* ---- setting up, and the phases -------------------------------------------- */

static void sample_threads(struct run *m)
{
	if (!server_pid)
		return;
	int t = proc_threads(server_pid, 1);
	if (t > m->threads_max)
		m->threads_max = t;
}

/* Name the target and publisher: start a herald, or use --server. Returns 0,
 * or the exit status after saying why. */
static int setup(struct tool_herald *h, struct run *m)
{
	m->backlog = -1;
	m->backlog_effective = -1;
	if (!opt.server) {
		const char *extra[8] = { NULL };
		if (opt.tls) {
			if (opt.tls_cert) {
				snprintf(tls_cert_path, sizeof(tls_cert_path), "%s", opt.tls_cert);
				snprintf(tls_key_path, sizeof(tls_key_path), "%s", opt.tls_key);
			} else if (make_cert() != 0) {
				return 1;
			}
			const char *tls_args[] = { "--listen",  "tls:127.0.0.1:0", "--tls-cert", tls_cert_path,
						   "--tls-key", tls_key_path,      NULL };
			memcpy(extra, tls_args, sizeof(tls_args));
		}
		if (tool_herald_start(h, tool_default_backlog(opt.backlog), opt.unix_listener, extra) != 0)
			return 1;
		m->backlog = h->backlog;
		server_pid = h->pid;
		char s[400];
		int tls_port = opt.tls ? tls_port_from_log(h->log) : 0;
		if (opt.tls && !tls_port) {
			fprintf(stderr, "readers: the herald started here logged no tls listener (see %s)\n", h->log);
			return 1;
		}
		if (opt.unix_listener)
			snprintf(s, sizeof(s), "unix:%s", h->unix_path);
		else
			snprintf(s, sizeof(s), "127.0.0.1:%d", opt.tls ? tls_port : h->port);
		tool_parse_addr(s, &target);
		if (opt.post) {
			snprintf(s, sizeof(s), "http://127.0.0.1:%d/api/events", h->port);
			tool_parse_addr(s, &pub_addr);
			opt.publish = "own";
		} else {
			opt.db = h->db;
		}
		fprintf(stderr, "readers: started herald %s (pid %d) on 127.0.0.1:%d%s%s, backlog %d, db %s\n", h->bin,
			(int)h->pid, h->port, opt.tls ? ", tls on " : "", opt.tls ? target.text : "", h->backlog,
			h->db);
	} else {
		server_pid = (pid_t)opt.pid;
		if (opt.backlog > 0)
			m->backlog = (int)opt.backlog;
	}
	/* The accept queue's maximum is the backlog that took effect. */
	m->backlog_effective = tool_accept_queue_max(&target);
	if (target.family != AF_UNIX) {
		long lo = 32768, hi = 60999;
		char buf[64];
		FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
		if (f) {
			if (fgets(buf, sizeof(buf), f))
				sscanf(buf, "%ld %ld", &lo, &hi);
			fclose(f);
		}
		long srcs = opt.sources > 1 ? opt.sources : 1;
		if (N > (hi - lo + 1) * srcs)
			fprintf(stderr,
				"readers: warning: %ld readers from %ld source address(es) need more ephemeral ports "
				"than the %ld of net.ipv4.ip_local_port_range; use --sources\n",
				N, srcs, (hi - lo + 1) * srcs);
	}
	if (m->backlog < 0)
		m->backlog = m->backlog_effective;
	if (opt.tls && tls_client_setup(opt.cacert ? opt.cacert : !opt.server ? tls_cert_path : NULL) != 0)
		return 1;
	if (opt.db && db_open(opt.db) != 0)
		return 1;
	char auth[300] = "";
	if (opt.token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", opt.token);
	request_len = (size_t)snprintf(request, sizeof(request),
				       "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n%s\r\n",
				       opt.path ? opt.path : (target.path[0] ? target.path : "/api/events/stream"),
				       target.family == AF_UNIX ? "localhost" : target.text, auth);
	return 0;
}

/* Open every reader, or give up at --open-timeout; samples around it. */
static void phase_open(struct run *m, long fd_limit)
{
	m->threads_before = server_pid ? proc_threads(server_pid, 1) : -1;
	m->rss_before = server_pid ? proc_rss_kb(server_pid, 1) : -1;
	m->ovf0 = proc_tcpext_now("ListenOverflows");
	m->drop0 = proc_tcpext_now("ListenDrops");
	fprintf(stderr, "readers: opening %ld readers to %s%s (fd limit %ld)\n", N, target.text,
		opt.ramp ? "" : ", no cap on connects in flight", fd_limit);
	m->open_a = cpu_mark();
	t_open_begin = tool_now_ns();
	int64_t deadline = t_open_begin + (int64_t)(opt.open_timeout * 1e9);
	double last_note = tool_now_s();
	while (n_settled < N && !stop_flag && tool_now_ns() < deadline) {
		/* Start connects in batches so answers are read in between. */
		int started = 0;
		while (next_connect < N && started < 256 && (opt.ramp == 0 || n_inflight < opt.ramp)) {
			reader_connect(next_connect++);
			started++;
		}
		/* Unix listeners that were full: try those again. */
		if (n_retry > 0) {
			n_retry = 0;
			for (long i = 0; i < next_connect; i++)
				if (R[i].state == R_RETRY)
					reader_connect(i);
		}
		int more = next_connect < N && (opt.ramp == 0 || n_inflight < opt.ramp);
		loop_once(more ? 0 : 10);
		if (tool_now_s() - last_note > 5) {
			last_note = tool_now_s();
			fprintf(stderr, "readers: %ld of %ld open after %.0f s\n", n_opened, N,
				(double)(tool_now_ns() - t_open_begin) / 1e9);
		}
	}
	/* Whatever has not opened by now timed out. */
	for (long i = 0; i < N; i++) {
		struct reader *r = &R[i];
		if (r->state == R_NEW || r->state == R_RETRY) {
			errs[E_TIMEOUT]++;
			n_settled++;
			if (r->state == R_RETRY)
				n_inflight--;
			r->state = R_DEAD;
		} else if (r->state >= R_CONNECTING && r->state < R_OPEN) {
			reader_fail(r, E_TIMEOUT);
		}
	}
	m->open_b = cpu_mark();
	m->open_s = n_opened ? (double)(t_last_open - t_open_begin) / 1e9 : NAN;
	m->ovf1 = proc_tcpext_now("ListenOverflows");
	m->drop1 = proc_tcpext_now("ListenDrops");
	m->threads_open = server_pid ? proc_threads(server_pid, 1) : -1;
	m->threads_max = m->threads_open;
	m->rss_open = server_pid ? proc_rss_kb(server_pid, 1) : -1;
	for (int k = 0; k < E_KINDS; k++)
		m->open_errors += errs[k];
	fprintf(stderr, "readers: %ld of %ld open in %.3f s; %ld failed\n", n_opened, N, m->open_s, m->open_errors);
}

/* The time until the last reader had event k so far. */
static int64_t last_arrival(long k)
{
	int64_t last = 0;
	for (long i = 0; i < N; i++) {
		int64_t t = recv_ns[(size_t)i * (size_t)K + (size_t)k];
		if (t > last)
			last = t;
	}
	return last;
}

/* Publish K events on schedule, --interval apart, whether or not the last
 * one has reached everybody, then wait --event-timeout for stragglers. */
static void phase_events(struct run *m)
{
	m->ev_a = m->ev_b = cpu_mark();
	if (n_open == 0 || stop_flag)
		return;
	if (opt.publish && pub_fd < 0)
		pub_connect();
	int64_t t_ev = tool_now_ns();
	m->ev_a = cpu_mark();
	int64_t step = (int64_t)(opt.interval * 1e9);
	int64_t stragglers_until = 0;
	long next = 0, reported = 0;
	while (!stop_flag) {
		int64_t now = tool_now_ns();
		if (next < K && now >= t_ev + next * step) {
			publish(next);
			next++;
			if (next == K)
				stragglers_until = tool_now_ns() + (int64_t)(opt.event_timeout * 1e9);
			continue;
		}
		/* Say so as events complete, in order. */
		while (reported < next && (ev_failed[reported] || (ev_id[reported] && ev_got[reported] >= n_open))) {
			if (!ev_failed[reported])
				fprintf(stderr, "readers: event %ld/%ld (id %lld): all %ld readers in %.1f ms\n",
					reported + 1, K, (long long)ev_id[reported], ev_got[reported],
					ms(last_arrival(reported) - ev_t0[reported]));
			reported++;
		}
		if (next == K && (reported == K || now > stragglers_until))
			break;
		int64_t wait_ns = next < K ? t_ev + next * step - now : stragglers_until - now;
		int64_t wait_ms = wait_ns / 1000000;
		loop_once((int)(wait_ms > 50 ? 50 : wait_ms < 0 ? 0 : wait_ms));
	}
	m->ev_b = cpu_mark();
	sample_threads(m);
}

static void phase_idle(struct run *m)
{
	m->idle_a = m->idle_b = cpu_mark();
	if (n_open == 0 || stop_flag || opt.idle <= 0)
		return;
	fprintf(stderr, "readers: idle for %g s\n", opt.idle);
	int64_t until = tool_now_ns() + (int64_t)(opt.idle * 1e9);
	while (!stop_flag) {
		int64_t left_ms = (until - tool_now_ns()) / 1000000;
		if (left_ms <= 0)
			break;
		loop_once((int)(left_ms > 200 ? 200 : left_ms));
	}
	m->idle_b = cpu_mark();
	sample_threads(m);
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
	tool_usage("readers", USAGE);
	int rc = parse_args(argc, argv);
	if (rc >= 0)
		return rc;
	N = opt.n;
	K = opt.events;

	long soft = 0, hard = 0;
	tool_raise_nofile(&soft, &hard);
	char what[64];
	snprintf(what, sizeof(what), "%ld readers", N);
	if (tool_check_fds(N + 64, what) != 0)
		return 2;
	tool_catch_signals(&stop_flag);
	snprintf(run_tag, sizeof(run_tag), "%lx", (unsigned long)time(NULL) ^ ((unsigned long)getpid() << 16));

	struct tool_herald h;
	memset(&h, 0, sizeof(h));
	struct run m;
	memset(&m, 0, sizeof(m));
	m.floor_s = NAN;
	rc = setup(&h, &m);
	if (rc != 0) {
		if (!opt.server)
			tool_herald_stop(&h, 1);
		SSL_CTX_free(tls_ctx);
		remove_cert();
		return rc;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	R = xcalloc((size_t)N, sizeof(*R));
	for (long i = 0; i < N; i++)
		R[i].fd = -1;
	recv_ns = xcalloc((size_t)N * (size_t)K, sizeof(*recv_ns));
	ev_id = xcalloc((size_t)K, sizeof(*ev_id));
	ev_t0 = xcalloc((size_t)K, sizeof(*ev_t0));
	ev_t1 = xcalloc((size_t)K, sizeof(*ev_t1));
	ev_got = xcalloc((size_t)K, sizeof(*ev_got));
	ev_failed = xcalloc((size_t)K, sizeof(*ev_failed));

	phase_open(&m, soft);
	phase_events(&m);
	phase_idle(&m);
	m.still_open = n_open;

	for (long i = 0; i < N; i++)
		reader_close(&R[i]);
	if (pub_fd >= 0)
		close(pub_fd);
	if (db)
		db_close();
	close(ep);
	if (!opt.server)
		m.herald_exit = tool_herald_stop(&h, opt.keep);
	SSL_CTX_free(tls_ctx);
	tls_ctx = NULL;
	remove_cert();
	if (!opt.no_floor && !stop_flag && n_opened > 0) {
		fprintf(stderr, "readers: measuring the kernel's floor for %ld readers (load/fanout-floor)\n",
			n_opened);
		m.floor_s = run_floor(n_opened);
	}
	rc = report(&m);

	free(R);
	free(recv_ns);
	free(ev_id);
	free(ev_t0);
	free(ev_t1);
	free(ev_got);
	free(ev_failed);
	return rc;
}
