/* SPDX-License-Identifier: BSD-2-Clause */
/* readers.c: N stream readers on one epoll thread, so the client is never
 * the bottleneck, and the server measured from outside while they listen.
 * This file holds the command line, the set-up and the run's phases; the
 * client itself is the tools' SSE client, sse-client.c (see readers.h for
 * the other parts and the state each owns).
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char USAGE[] =
	"usage: load/readers N [--server ADDR [--pid PID] (--db PATH | --publish URL)] [--port P] [--backlog B]\n"
	"       [--unix] [--post] [--peer nchan] [--mercure]\n"
	"       [--events K] [--interval S] [--idle S] [--ramp M] [--sources K] [--path TARGET] [--token T]\n"
	"       [--open-timeout S] [--event-timeout S] [--csv FILE] [--opens-csv FILE] [--run LABEL] [--no-floor]\n"
	"       [--keep]\n"
	"       [--tls [--insecure | --cacert FILE] [--tls-cert FILE --tls-key FILE]]\n"
	"       load/readers N --opens R\n"
	"       load/readers N --restart [--rate E] [--before S] [--after S]\n"
	"       load/readers N --soak S [--rate E] [--churn C] [--sample S] [--warmup S]\n"
	"       load/readers N --procs P [--workers W]\n"
	"       load/readers N --h2c [--streams-per-conn K]\n";

static volatile int stop_flag; /* set by SIGINT and SIGTERM */

/* One run: the options and every part's state, handed down from here. */
struct ctx {
	struct options opt;
	struct tool_addr target;   /* where the readers connect */
	struct tool_addr pub_addr; /* where --publish (or --post) sends */
	struct tool_herald h;      /* the herald started here, without --server */
	struct run m;
	struct tls tls;
	struct events ev;
	struct publisher pub;
	struct client *cl;
	char request[2048]; /* the stream request every reader sends */
};

/* ---- the command line ------------------------------------------------------ */

static void help(const struct tool_opt *t)
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
	       "\n");
	tool_opt_help(t);
	printf("\n"
	       "Modes (each starts its own herald, but --procs may take --server; none\n"
	       "takes --tls or --unix):\n"
	       "  --opens R: R rounds of opening the N readers at once against herald and\n"
	       "    against load/minimal-sse (accept, read the head, write the same head),\n"
	       "    alternating; herald's median beside the minimal server's, and each one's\n"
	       "    CPU per open.\n"
	       "  --restart: the N readers open, events are INSERTed at --rate from then on;\n"
	       "    after --before seconds herald gets SIGTERM and a new herald starts on the\n"
	       "    same port and database; once it is ready every reader reconnects at once\n"
	       "    with Last-Event-ID. Times until all reopened and all caught up, the\n"
	       "    listen-queue counters over the storm, and every reader's ids checked for\n"
	       "    gaps and duplicates, --after seconds later.\n"
	       "  --soak S: the N readers for S seconds while events are INSERTed at --rate\n"
	       "    and another process connects and leaves --churn times a second (streams\n"
	       "    and health requests in turn); herald's RSS and CPU every --sample seconds,\n"
	       "    the RSS slope after --warmup, and every reader's ids checked.\n"
	       "  --procs P [--workers W]: the N readers spread over P client processes,\n"
	       "    process i binding to 127.0.i+1.1 .. 127.0.i+1.K (--sources K; by default\n"
	       "    one address per %d readers of its share: the kernel's search for a free\n"
	       "    source port slows as an address's ports fill, 100,000 readers over six\n"
	       "    processes opened in 37 s from one address each, 4.9 s from four), so\n",
	       MANY_PER_SOURCE);
	printf(
	       "    each has its own ports and open-file limit; herald (started here as a\n"
	       "    group of W workers, or --server with --db) gets K events by INSERT.\n"
	       "    Every reader's ids are checked (missed, repeated, out of order), each\n"
	       "    event timed to the last reader of all, herald's RSS and CPU summed over\n"
	       "    its processes, and the floor is load/fanout-floor N --procs W --uring.\n"
	       "    First the system's limits are checked (fs.file-max, fs.nr_open, ulimit -n,\n"
	       "    the ephemeral ports of a source address, memory, net.ipv4.tcp_mem at a\n"
	       "    page and a half a reader): a setting that is short\n"
	       "    is named with the value to give it, and nothing opens. The kernel's memory\n"
	       "    per reader (slab, TCP buffers, the caches that grew) is read before and\n"
	       "    after the opens; the idle phase counts the heartbeats read and herald's\n"
	       "    CPU per heartbeat (--heartbeat S sets the interval).\n"
	       "    A million: load/readers 1000000 --procs 55 --workers 55 --events 6\n"
	       "    --interval 10 --heartbeat 60.\n"
	       "  --h2c [--streams-per-conn K]: the N readers as HTTP/2 streams, K (100) on\n"
	       "    each h2c connection (prior knowledge), on nghttp2's client side; the same\n"
	       "    phases (open, --events K by INSERT or POST, herald's CPU per event), every\n"
	       "    stream's ids checked (missed, repeated, out of order). Takes --server.\n");
	printf("Exit status: 0 when every reader opened and had every event (in the modes:\n"
	       "none missed or repeated); 1 otherwise; 2 usage.\n");
	tool_herald_help();
}

/* --path: a request target of one line, starting with '/'. */
static int take_path(void *ptr, const char *name, const char *v)
{
	if (v[0] != '/' || strpbrk(v, " \r\n"))
		return tool_usage_error("%s needs a target starting with /", name);
	*(const char **)ptr = v;
	return 0;
}

/* --peer: the one other server whose frames the client knows. */
static int take_peer(void *ptr, const char *name, const char *v)
{
	if (strcmp(v, "nchan") != 0)
		return tool_usage_error("%s knows nchan only", name);
	*(const char **)ptr = v;
	return 0;
}

/* --token: sent in a header line, so no line breaks. */
static int take_token(void *ptr, const char *name, const char *v)
{
	if (strpbrk(v, "\r\n"))
		return tool_usage_error("%s may not hold line breaks", name);
	*(const char **)ptr = v;
	return 0;
}

/* Parse the options into x->opt, x->target and x->pub_addr. Returns -1 to
 * go on, or the exit status (0 after --help, 2 on a usage error). */
static int parse_args(struct ctx *x, int argc, char **argv)
{
	struct options *o = &x->opt;
	const struct tool_opt t[] = {
		TOOL_LONG("N", &o->n, 1, 1000000, "a number",
			  "  N                  readers (1 to 1000000; the fd limit is raised to the hard one)\n"),
		TOOL_STRING("--server", &o->server, "an address",
			    "  --server ADDR      an already running server: 127.0.0.1:PORT, [::1]:PORT,\n"
			    "                     unix:/path, or http://127.0.0.1:PORT/stream/path\n"),
		TOOL_LONG("--pid", &o->pid, 1, 1L << 30, "a process id",
			  "  --pid PID          sample this server process (and its children) from /proc\n"),
		TOOL_STRING("--db", &o->db, "a path",
			    "  --db PATH          publish by INSERT into this herald database\n"),
		TOOL_STRING("--publish", &o->publish, "a URL",
			    "  --publish URL      publish by POST to URL (http://127.0.0.1:PORT/api/events\n"
			    "                     or unix:/path for /api/events on a unix socket)\n"),
		TOOL_LONG("--port", &o->port, 0, 65535, "a port number",
			  "  --port P           the port of the herald started here (default 0: one the kernel\n"
			  "                     picks), to watch it meanwhile (load/overflow-report, /metrics);\n"
			  "                     with --tls its tls: listener takes one the kernel picks\n"),
		TOOL_LONG("--backlog", &o->backlog, 1, 1L << 20, "a number",
			  "  --backlog B        listen backlog of the herald started here (default $BACKLOG\n"
			  "                     or 1024)\n"),
		TOOL_FLAG("--unix", &o->unix_listener,
			  "  --unix             the herald started here also listens on a unix socket, and\n"
			  "                     the readers connect through it\n"),
		TOOL_FLAG("--post", &o->post,
			  "  --post             publish to the herald started here by POST, not INSERT\n"),
		TOOL_CALL("--peer", &o->peer, take_peer, "a server kind",
			  "  --peer nchan       --server is nginx with nchan (an eventsource subscriber\n"
			  "                     location) and --publish its publisher location: each event\n"
			  "                     is POSTed as \"SEQ run=TAG\" and known by its data line\n"),
		TOOL_FLAG("--mercure", &o->mercure,
			  "  --mercure          --publish is herald's Mercure hub\n"
			  "                     (http://127.0.0.1:PORT/.well-known/mercure): each event is\n"
			  "                     POSTed as a public form, topic load, data \"SEQ run=TAG\", and\n"
			  "                     known by its data line (readers: --path\n"
			  "                     '/.well-known/mercure?topic=load'; herald with\n"
			  "                     mercure_anonymous = on)\n"),
		TOOL_LONG("--events", &o->events, 1, 10000, "a number",
			  "  --events K         events to publish (default 10)\n"),
		TOOL_SECONDS("--interval", &o->interval, 0, 3600,
			     "  --interval S       seconds between them (default 0.5)\n"),
		TOOL_SECONDS("--idle", &o->idle, 0, 86400,
			     "  --idle S           idle seconds after the events (default 20)\n"),
		TOOL_LONG("--ramp", &o->ramp, 0, 1000000, "a number",
			  "  --ramp M           at most M connects in flight (default 0: no cap)\n"),
		TOOL_LONG("--sources", &o->sources, 1, 254, "a number",
			  "  --sources K        spread source addresses over 127.0.0.1 .. 127.0.0.K\n"),
		TOOL_CALL("--path", &o->path, take_path, "a request target",
			  "  --path TARGET      request target (default /api/events/stream)\n"),
		TOOL_CALL("--token", &o->token, take_token, "a value",
			  "  --token T          send Authorization: Bearer T (stream and publish)\n"),
		TOOL_SECONDS("--open-timeout", &o->open_timeout, 0.01, 86400,
			     "  --open-timeout S   give up on opens after S seconds (default 300); with\n"
			     "                     --restart, on the storm S seconds after the new herald is ready\n"),
		TOOL_SECONDS("--event-timeout", &o->event_timeout, 0.01, 3600,
			     "  --event-timeout S  wait S seconds after the last event for stragglers (default 10)\n"),
		TOOL_STRING("--csv", &o->csv, "a file",
			    "  --csv FILE         write reader,event,id,latency_ms for every reader and event\n"),
		TOOL_STRING("--opens-csv", &o->opens_csv, "a file",
			    "  --opens-csv FILE   write reader,connect_ms,open_ms for every reader: when it began\n"
			    "                     to connect and when it had its opening frame, from the first\n"
			    "                     connect (open_ms empty when it never opened)\n"),
		TOOL_STRING("--run", &o->run, "a label",
			    "  --run LABEL        the label in the table's run column (default 1)\n"),
		TOOL_FLAG("--no-floor", &o->no_floor,
			  "  --no-floor         skip measuring the kernel's floor (load/fanout-floor N)\n"),
		TOOL_FLAG("--keep", &o->keep, "  --keep             keep the started herald's temporary folder\n"),
		TOOL_FLAG("--tls", &o->tls,
			  "  --tls              readers speak TLS (full handshakes, ALPN http/1.1); the herald\n"
			  "                     started here gets a tls:127.0.0.1:0 listener and a fresh P-256\n"
			  "                     certificate; publishing stays plain\n"),
		TOOL_FLAG("--insecure", &o->insecure,
			  "  --insecure         with --tls, do not verify the server's certificate (for a\n"
			  "                     self-signed one on --server)\n"),
		TOOL_STRING("--cacert", &o->cacert, "a file",
			    "  --cacert FILE      with --tls, trust this PEM instead of the system's CAs\n"),
		TOOL_STRING("--tls-cert", &o->tls_cert, "a file",
			    "  --tls-cert FILE, --tls-key FILE\n"
			    "                     with --tls, the pair for the herald started here (e.g. RSA)\n"),
		TOOL_STRING("--tls-key", &o->tls_key, "a file", NULL),
		TOOL_LONG("--opens", &o->opens, 1, 100, "a number",
			  "  --opens R          compare opens with load/minimal-sse over R rounds (below)\n"),
		TOOL_FLAG("--restart", &o->restart,
			  "  --restart          a reconnect storm across a restart (below)\n"),
		TOOL_SECONDS("--soak", &o->soak, 1, 7 * 86400, "  --soak S           a soak of S seconds (below)\n"),
		TOOL_LONG("--rate", &o->rate, 1, 10000, "a number",
			  "  --rate E           events a second with --restart (default 50) and --soak (100)\n"),
		TOOL_SECONDS("--before", &o->before, 0, 3600,
			     "  --before S         --restart: seconds of events before the restart (default 2)\n"),
		TOOL_SECONDS("--after", &o->after, 0, 3600,
			     "  --after S          --restart: seconds of events after all resumed (default 2)\n"),
		TOOL_FLAG("--no-last-id", &o->no_last_id,
			  "  --no-last-id       --restart: reconnect without Last-Event-ID, as a page that opens\n"
			  "                     a new EventSource would; the events of the downtime are missed\n"
			  "                     (the check must say so, and the exit status is 1)\n"),
		TOOL_LONG("--churn", &o->churn, 0, 10000, "a number",
			  "  --churn C          --soak: connects a second of the churning client (default 20)\n"),
		TOOL_SECONDS("--sample", &o->sample, 0.1, 3600,
			     "  --sample S         --soak: seconds between RSS samples (default 5)\n"),
		TOOL_SECONDS("--warmup", &o->warmup, 0, 86400,
			     "  --warmup S         --soak: the warm-up left out of the slope (default a fifth\n"
			     "                     of the soak, at most 60 s)\n"),
		TOOL_LONG("--procs", &o->procs, 1, 64, "a number",
			  "  --procs P          spread the readers over P client processes (below)\n"),
		TOOL_LONG("--workers", &o->workers, 1, 64, "a number",
			  "  --workers W        --procs: the herald started here runs as a group of W workers;\n"
			  "                     with --server, the workers of the group measured (for the floor)\n"),
		TOOL_FLAG("--h2c", &o->h2c,
			  "  --h2c              the readers are HTTP/2 streams over h2c connections (below)\n"),
		TOOL_LONG("--streams-per-conn", &o->streams_per_conn, 1, 10000, "a number",
			  "  --streams-per-conn K\n"
			  "                     --h2c: streams on each connection (default 100)\n"),
		TOOL_SECONDS("--heartbeat", &o->heartbeat, 0.1, 3600,
			     "  --heartbeat S      --procs: the herald started here sends heartbeats S seconds apart\n"
			     "                     (heartbeat_interval; with --server, say what it is set to); the\n"
			     "                     idle phase measures what they cost\n"),
		TOOL_HELP("  --help             this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(t, argc, argv, help);
	if (rc >= 0)
		return rc;
	if (o->n < 0)
		return tool_usage_error("say how many readers (N)");
	if (o->n * o->events > 50000000)
		return tool_usage_error("N times --events may be at most 50,000,000 (a latency is kept for each)");
	if (o->server) {
		if (tool_parse_addr(o->server, &x->target) != 0)
			return tool_usage_error(
				"--server wants 127.0.0.1:PORT, [::1]:PORT, unix:/path or http://HOST:PORT/path");
		if (!o->db && !o->publish)
			return tool_usage_error("with --server, say how to publish: --db PATH or --publish URL");
		if (o->unix_listener || o->post || o->port >= 0)
			return tool_usage_error(
				"--unix, --post and --port are for the herald started here (no --server)");
	} else if (o->pid || o->db || o->publish) {
		return tool_usage_error("--pid, --db and --publish go with --server");
	}
	if (o->db && o->publish)
		return tool_usage_error("--db and --publish exclude each other");
	if (o->peer && (!o->server || !o->publish || o->tls))
		return tool_usage_error("--peer goes with --server and --publish, without --tls");
	if (o->mercure && (!o->server || !o->publish || o->peer))
		return tool_usage_error("--mercure goes with --server and --publish, without --peer");
	if (!o->tls && (o->insecure || o->cacert || o->tls_cert || o->tls_key))
		return tool_usage_error("--insecure, --cacert, --tls-cert and --tls-key go with --tls");
	if (o->tls && o->unix_listener)
		return tool_usage_error("--tls is over TCP; leave out --unix");
	if (o->insecure && o->cacert)
		return tool_usage_error("--insecure and --cacert exclude each other");
	if (!o->tls_cert != !o->tls_key)
		return tool_usage_error("--tls-cert and --tls-key go together");
	if (o->server && o->tls_cert)
		return tool_usage_error("--tls-cert and --tls-key are for the herald started here (no --server)");
	int modes = (o->opens > 0) + o->restart + (o->soak > 0);
	if (modes + (o->procs > 0) > 1)
		return tool_usage_error("--opens, --restart, --soak and --procs exclude each other");
	if (o->procs && (o->tls || o->unix_listener || o->post || o->publish))
		return tool_usage_error("--procs publishes by INSERT to readers over TCP: leave out --tls, --unix, "
					"--post and --publish");
	if (o->procs > o->n)
		return tool_usage_error("--procs may be at most N");
	if (o->h2c && (modes || o->procs || o->tls || o->peer || o->mercure))
		return tool_usage_error("--h2c goes alone: leave out --opens, --restart, --soak, --procs, --tls, "
					"--peer and --mercure");
	if (o->streams_per_conn && !o->h2c)
		return tool_usage_error("--streams-per-conn goes with --h2c");
	if (o->workers && !o->procs)
		return tool_usage_error("--workers goes with --procs");
	if (o->heartbeat > 0 && !o->procs)
		return tool_usage_error("--heartbeat goes with --procs");
	if (o->procs && !o->sources) {
		long share = o->n / o->procs + (o->n % o->procs != 0);
		long k = (share + MANY_PER_SOURCE - 1) / MANY_PER_SOURCE;
		o->sources = k < 1 ? 1 : k > 254 ? 254 : k;
	}
	if (modes && (o->server || o->tls || o->unix_listener || o->post))
		return tool_usage_error("--opens, --restart and --soak start their own herald: leave out --server, "
					"--tls, --unix and --post");
	if (o->no_last_id && !o->restart)
		return tool_usage_error("--no-last-id goes with --restart");
	if ((o->before != 2 || o->after != 2) && !o->restart)
		return tool_usage_error("--before and --after go with --restart");
	if (!o->soak && (o->churn != 20 || o->sample != 5 || o->warmup >= 0))
		return tool_usage_error("--churn, --sample and --warmup go with --soak");
	if (!o->restart && !o->soak && o->rate)
		return tool_usage_error("--rate goes with --restart or --soak");
	if (o->publish && tool_parse_addr(o->publish, &x->pub_addr) != 0)
		return tool_usage_error("--publish wants http://127.0.0.1:PORT/api/events or unix:/path");
	return -1;
}

/* ---- sampling the server, and the floor -------------------------------------- */

static struct cpu_mark cpu_mark(pid_t pid)
{
	struct cpu_mark m = { .t = tool_now_s() };
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	m.self = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (pid > 0) {
		m.ok = tool_cpu_ticks(pid, 1, &m.ticks) == 0;
		m.wait_ok = tool_sched_ns(pid, 1, NULL, &m.wait_ns) == 0;
	}
	return m;
}

static void sample_threads(struct run *m)
{
	if (!m->pid)
		return;
	int t = tool_threads(m->pid, 1);
	if (t > m->threads_max)
		m->threads_max = t;
}

double run_floor(long n, int over_unix, long writers, int uring, double *cpu_s)
{
	char path[4096], arg[32], w[32];
	if (cpu_s)
		*cpu_s = NAN;
	tool_sibling("fanout-floor", path, sizeof(path));
	snprintf(arg, sizeof(arg), "%ld", n);
	snprintf(w, sizeof(w), "%ld", writers > 1 ? writers : 1);
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
		const char *argv[8] = { path, arg, "--json", "--procs", w };
		int ac = 5;
		if (over_unix)
			argv[ac++] = "--unix";
		if (uring)
			argv[ac++] = "--uring";
		execv(path, (char *const *)argv);
		fprintf(stderr, "readers: cannot run %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	char out[4096];
	size_t len = 0;
	double deadline = tool_now_s() + 300;
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
	double v;
	if (cpu_s && tool_json_number(out, "cpu_ms", &v) == 0)
		*cpu_s = v / 1e3;
	if (tool_json_number(out, "last_reader_ms", &v) != 0)
		return NAN;
	return v / 1e3;
}

/* ---- setting up ------------------------------------------------------------- */

/* Start the herald the readers will measure (with a tls: listener and a
 * certificate for --tls), and aim the readers and the publisher at it.
 * Returns 0, or the exit status after saying why. */
static int start_own(struct ctx *x)
{
	struct options *o = &x->opt;
	struct tool_herald *h = &x->h;
	const char *extra[8] = { NULL };
	char workers[32], streams[32], hb[32];
	if (o->procs) {
		int e = 0;
		if (o->workers > 1) {
			snprintf(workers, sizeof(workers), "%ld", o->workers);
			extra[e++] = "--workers";
			extra[e++] = workers;
		}
		if (o->heartbeat > 0) {
			snprintf(hb, sizeof(hb), "%.0fms", o->heartbeat * 1e3);
			extra[e++] = "--heartbeat-interval";
			extra[e++] = hb;
		}
	} else if (o->h2c && o->streams_per_conn > 100) {
		/* herald's default is 100 streams a connection. */
		snprintf(streams, sizeof(streams), "%ld", o->streams_per_conn);
		extra[0] = "--http2-max-streams";
		extra[1] = streams;
	} else if (o->tls) {
		if (o->tls_cert) {
			snprintf(x->tls.cert_path, sizeof(x->tls.cert_path), "%s", o->tls_cert);
			snprintf(x->tls.key_path, sizeof(x->tls.key_path), "%s", o->tls_key);
		} else if (tls_make_cert(&x->tls) != 0) {
			return 1;
		}
		const char *tls_args[] = { "--listen",  "tls:127.0.0.1:0", "--tls-cert", x->tls.cert_path,
					   "--tls-key", x->tls.key_path,   NULL };
		memcpy(extra, tls_args, sizeof(tls_args));
	}
	if (tool_herald_start(h, o->port < 0 ? 0 : (int)o->port, tool_default_backlog(o->backlog), o->unix_listener,
			      extra) != 0)
		return 1;
	x->m.backlog = h->backlog;
	x->m.pid = h->pid;
	char s[400];
	int tls_port = o->tls ? tls_port_from_log(h->log) : 0;
	if (o->tls && !tls_port) {
		fprintf(stderr, "readers: the herald started here logged no tls listener (see %s)\n", h->log);
		return 1;
	}
	if (o->unix_listener)
		snprintf(s, sizeof(s), "unix:%s", h->unix_path);
	else
		snprintf(s, sizeof(s), "127.0.0.1:%d", o->tls ? tls_port : h->port);
	tool_parse_addr(s, &x->target);
	if (o->post) {
		snprintf(s, sizeof(s), "http://127.0.0.1:%d/api/events", h->port);
		tool_parse_addr(s, &x->pub.addr);
		o->publish = "own";
	} else {
		o->db = h->db;
	}
	fprintf(stderr, "readers: started herald %s (pid %d) on 127.0.0.1:%d%s%s, backlog %d, db %s\n", h->bin,
		(int)h->pid, h->port, o->tls ? ", tls on " : "", o->tls ? x->target.text : "", h->backlog, h->db);
	return 0;
}

/* Warn when n readers from the given source addresses need more ephemeral
 * ports than the kernel hands out. */
static void check_ports(long n, long sources)
{
	long lo = 32768, hi = 60999;
	char buf[64];
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fgets(buf, sizeof(buf), f))
			sscanf(buf, "%ld %ld", &lo, &hi);
		fclose(f);
	}
	long srcs = sources > 1 ? sources : 1;
	if (n > (hi - lo + 1) * srcs)
		fprintf(stderr,
			"readers: warning: %ld readers from %ld source address(es) need more ephemeral ports "
			"than the %ld of net.ipv4.ip_local_port_range; use --sources\n",
			n, srcs, (hi - lo + 1) * srcs);
}

/* Name the target and publisher: start a herald, or use --server; set up
 * TLS, the database and the stream request. Returns 0, or the exit status
 * after saying why. */
static int setup(struct ctx *x)
{
	struct options *o = &x->opt;
	struct run *m = &x->m;
	m->backlog = -1;
	m->backlog_effective = -1;
	if (!o->server) {
		int rc = start_own(x);
		if (rc != 0)
			return rc;
	} else {
		m->pid = (pid_t)o->pid;
		if (m->pid)
			tool_herald_warn_pid(m->pid);
		if (o->backlog > 0)
			m->backlog = (int)o->backlog;
	}
	/* The accept queue's maximum is the backlog that took effect. */
	m->backlog_effective = tool_accept_queue_max(&x->target);
	if (x->target.family != AF_UNIX)
		check_ports(o->procs ? o->n / o->procs + (o->n % o->procs != 0) : o->n, o->sources);
	if (m->backlog < 0)
		m->backlog = m->backlog_effective;
	const char *trust = o->cacert ? o->cacert : !o->server ? x->tls.cert_path : NULL;
	if (o->tls && tls_client_setup(&x->tls, trust, o->insecure, &x->target) != 0)
		return 1;
	if (o->db && pub_db_open(&x->pub, o->db) != 0)
		return 1;
	char auth[300] = "";
	if (o->token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", o->token);
	snprintf(x->request, sizeof(x->request), "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n%s\r\n",
		 o->path ? o->path : (x->target.path[0] ? x->target.path : "/api/events/stream"),
		 x->target.family == AF_UNIX ? "localhost" : x->target.text, auth);
	return 0;
}

/* ---- the phases ----------------------------------------------------------------- */

/* Open every reader, or give up at --open-timeout; samples around it. */
static void phase_open(struct ctx *x, long fd_limit)
{
	struct run *m = &x->m;
	struct client *c = x->cl;
	m->threads_before = m->pid ? tool_threads(m->pid, 1) : -1;
	m->rss_before = m->pid ? tool_rss_kb(m->pid, 1) : -1;
	m->ovf0 = tool_tcpext_now("ListenOverflows");
	m->drop0 = tool_tcpext_now("ListenDrops");
	fprintf(stderr, "readers: opening %ld readers to %s%s (fd limit %ld)\n", c->n, c->target.text,
		x->opt.ramp ? "" : ", no cap on connects in flight", fd_limit);
	m->open_a = cpu_mark(m->pid);
	int64_t t_begin = tool_now_ns();
	int64_t deadline = t_begin + (int64_t)(x->opt.open_timeout * 1e9);
	double last_note = tool_now_s();
	while (c->c.settled < c->n && !stop_flag && tool_now_ns() < deadline) {
		int more = client_connect_more(c, x->opt.ramp);
		client_loop_once(c, more ? 0 : 10);
		if (tool_now_s() - last_note > 5) {
			last_note = tool_now_s();
			fprintf(stderr, "readers: %ld of %ld open after %.0f s\n", c->c.opened, c->n,
				(double)(tool_now_ns() - t_begin) / 1e9);
		}
	}
	/* Whatever has not opened by now timed out. */
	client_give_up(c);
	m->open_b = cpu_mark(m->pid);
	m->open_s = c->c.opened ? (double)(c->c.t_last_open - t_begin) / 1e9 : NAN;
	m->ovf1 = tool_tcpext_now("ListenOverflows");
	m->drop1 = tool_tcpext_now("ListenDrops");
	m->threads_open = m->pid ? tool_threads(m->pid, 1) : -1;
	m->threads_max = m->threads_open;
	m->rss_open = m->pid ? tool_rss_kb(m->pid, 1) : -1;
	for (int k = 0; k < E_KINDS; k++)
		m->open_errors += c->c.errs[k];
	fprintf(stderr, "readers: %ld of %ld open in %.3f s; %ld failed\n", c->c.opened, c->n, m->open_s,
		m->open_errors);
}

/* Say so as events complete, in order, from event *reported on. */
static void note_complete(struct ctx *x, long next, long *reported)
{
	struct events *ev = &x->ev;
	while (*reported < next &&
	       (ev->failed[*reported] || (ev->id[*reported] && ev->got[*reported] >= x->cl->c.open))) {
		long k = (*reported)++;
		if (!ev->failed[k])
			fprintf(stderr, "readers: event %ld/%ld (id %lld): all %ld readers in %.1f ms\n", k + 1, ev->k,
				(long long)ev->id[k], ev->got[k], ms(events_last_arrival(ev, k) - ev->t0[k]));
	}
}

/* Publish K events on schedule, --interval apart, whether or not the last
 * one has reached everybody, then wait --event-timeout for stragglers. */
static void phase_events(struct ctx *x)
{
	struct run *m = &x->m;
	struct events *ev = &x->ev;
	m->ev_a = m->ev_b = cpu_mark(m->pid);
	if (x->cl->c.open == 0 || stop_flag)
		return;
	if (x->opt.publish && x->pub.fd < 0)
		pub_connect(&x->pub);
	int64_t t_ev = tool_now_ns();
	m->ev_a = cpu_mark(m->pid);
	int64_t step = (int64_t)(x->opt.interval * 1e9);
	int64_t stragglers_until = 0;
	long next = 0, reported = 0;
	while (!stop_flag) {
		int64_t now = tool_now_ns();
		if (next < ev->k && now >= t_ev + next * step) {
			publish(&x->pub, next);
			next++;
			if (next == ev->k)
				stragglers_until = tool_now_ns() + (int64_t)(x->opt.event_timeout * 1e9);
			continue;
		}
		note_complete(x, next, &reported);
		if (next == ev->k && (reported == ev->k || now > stragglers_until))
			break;
		int64_t wait_ns = next < ev->k ? t_ev + next * step - now : stragglers_until - now;
		int64_t wait_ms = wait_ns / 1000000;
		client_loop_once(x->cl, (int)(wait_ms > 50 ? 50 : wait_ms < 0 ? 0 : wait_ms));
	}
	m->ev_b = cpu_mark(m->pid);
	sample_threads(m);
}

static void phase_idle(struct ctx *x)
{
	struct run *m = &x->m;
	m->idle_a = m->idle_b = cpu_mark(m->pid);
	if (x->cl->c.open == 0 || stop_flag || x->opt.idle <= 0)
		return;
	fprintf(stderr, "readers: idle for %g s\n", x->opt.idle);
	int64_t until = tool_now_ns() + (int64_t)(x->opt.idle * 1e9);
	while (!stop_flag) {
		int64_t left_ms = (until - tool_now_ns()) / 1000000;
		if (left_ms <= 0)
			break;
		client_loop_once(x->cl, (int)(left_ms > 200 ? 200 : left_ms));
	}
	m->idle_b = cpu_mark(m->pid);
	sample_threads(m);
}

/* ---- main ------------------------------------------------------------------------ */

/* Stop what the run started (herald, TLS, connections) and measure the
 * floor; returns report()'s exit status. */
static int finish(struct ctx *x)
{
	struct options *o = &x->opt;
	x->m.still_open = x->cl->c.open;
	client_close(x->cl);
	pub_close(&x->pub);
	if (!o->server)
		x->m.herald_exit = tool_herald_stop(&x->h, o->keep);
	SSL_CTX_free(x->tls.ctx);
	x->tls.ctx = NULL;
	tls_remove_cert(&x->tls, o->keep);
	if (!o->no_floor && !stop_flag && x->cl->c.opened > 0) {
		fprintf(stderr, "readers: measuring the kernel's floor for %ld readers (load/fanout-floor)\n",
			x->cl->c.opened);
		x->m.floor_s = run_floor(x->cl->c.opened, x->target.family == AF_UNIX, 1, 0, NULL);
	}
	return report(o, &x->m, x->cl, &x->ev, &x->tls, stop_flag);
}

/* Undo a set-up that failed half way. */
static void abandon(struct ctx *x)
{
	pub_close(&x->pub);
	if (!x->opt.server)
		tool_herald_stop(&x->h, 1);
	SSL_CTX_free(x->tls.ctx);
	x->tls.ctx = NULL;
	tls_remove_cert(&x->tls, x->opt.keep);
}

int main(int argc, char **argv)
{
	tool_usage("readers", USAGE);
	struct ctx *x = xcalloc(1, sizeof(*x));
	x->opt = (struct options){
		.n = -1,
		.events = 10,
		.interval = 0.5,
		.idle = 20,
		.open_timeout = 300,
		.event_timeout = 10,
		.run = "1",
		.before = 2,
		.after = 2,
		.churn = 20,
		.sample = 5,
		.warmup = -1,
		.port = -1,
	};
	int rc = parse_args(x, argc, argv);
	if (rc >= 0) {
		free(x);
		return rc;
	}
	long soft = 0, hard = 0;
	tool_raise_nofile(&soft, &hard);
	char what[64];
	/* With --procs each client process holds its share. */
	long per = x->opt.procs ? x->opt.n / x->opt.procs + (x->opt.n % x->opt.procs != 0) : x->opt.n;
	snprintf(what, sizeof(what), "%ld readers%s", per, x->opt.procs ? " in each client process" : "");
	if ((x->opt.procs && many_check_limits(&x->opt) != 0) || tool_check_fds(per + 64, what) != 0) {
		free(x);
		return 2;
	}
	tool_catch_signals(&stop_flag);
	events_init(&x->ev, x->opt.n, x->opt.events);
	pub_init(&x->pub, &x->ev, x->opt.token);
	x->pub.addr = x->pub_addr;
	x->m.floor_s = NAN;
	if (!x->opt.rate)
		x->opt.rate = x->opt.soak > 0 ? 100 : 50;
	if (x->opt.h2c && !x->opt.streams_per_conn)
		x->opt.streams_per_conn = 100;
	if (x->opt.warmup < 0)
		x->opt.warmup = x->opt.soak / 5 < 60 ? x->opt.soak / 5 : 60;
	rc = setup(x);
	if (rc == 0 && (x->opt.opens || x->opt.restart || x->opt.soak > 0 || x->opt.procs || x->opt.h2c)) {
		/* The modes print their own report and stop herald themselves. */
		if (x->opt.h2c)
			rc = h2c_run(&x->opt, &x->h, &x->target, &x->pub, &stop_flag);
		else if (x->opt.procs)
			rc = many_run(&x->opt, &x->h, &x->target, x->request, &x->pub, &stop_flag);
		else if (x->opt.opens)
			rc = opens_run(&x->opt, &x->h, &x->target, x->request, &stop_flag);
		else if (x->opt.restart)
			rc = restart_run(&x->opt, &x->h, &x->target, x->request, &x->pub, &stop_flag);
		else
			rc = soak_run(&x->opt, &x->h, &x->target, x->request, &x->pub, &stop_flag);
		abandon(x);
		events_free(&x->ev);
		free(x);
		return rc;
	}
	if (rc == 0) {
		x->cl = client_new(x->opt.n, &x->target, x->opt.sources, x->request, &x->tls, &x->ev);
		rc = x->cl ? 0 : 1;
	}
	if (rc != 0) {
		abandon(x);
	} else {
		/* The POST connection is watched in the client's loop. */
		x->pub.ep = x->cl->ep;
		x->cl->other = pub_readable;
		x->cl->other_arg = &x->pub;
		if (x->opt.peer || x->opt.mercure) {
			x->pub.peer = x->opt.peer != NULL;
			x->pub.mercure = x->opt.mercure;
			x->cl->frame = pub_frame;
			x->cl->frame_arg = &x->pub;
		}
		phase_open(x, soft);
		phase_events(x);
		phase_idle(x);
		rc = finish(x);
	}
	client_free(x->cl);
	events_free(&x->ev);
	free(x);
	return rc;
}
