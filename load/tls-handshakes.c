/* SPDX-License-Identifier: BSD-2-Clause */
/* tls-handshakes.c: what a TLS handshake costs herald, full and resumed,
 * and what a reconnect storm costs. Every handshake is a real stream open:
 * connect, handshake, GET /api/events/stream, read until the opening frame
 * (": stream open"), then close or stay. One epoll client drives every
 * connection, so one code path serves both the one-at-a-time phases and the
 * storm.
 *
 * Phases, in order:
 *   plain     N opens without TLS, one at a time: the floor a handshake
 *             stands on (accept, request, opening frame, close)
 *   full      N TLS opens one at a time, no session offered
 *   resumed   N TLS opens one at a time, each offering the session ticket
 *             the one before it received; how many really resumed is counted
 *             from the client's side (SSL_session_reused)
 *   storm     M readers open at once and stay; then every one is closed at
 *             the same moment and all reconnect at once offering their
 *             tickets; then the same again without tickets. Each wave: time
 *             until all are open again, failures, server CPU.
 * Server CPU is utime+stime of herald from /proc over each phase, in clock
 * ticks (10 ms), so N should make each phase last well over that. */
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

static const char USAGE[] =
	"usage: load/tls-handshakes N [--storm M] [--phases LIST] [--server ADDR --plain ADDR --pid PID]\n"
	"       [--tls12] [--insecure | --cacert FILE] [--tls-cert FILE --tls-key FILE] [--timeout S]\n"
	"       [--port P] [--run LABEL] [--keep]\n";

static volatile int stop_flag;

enum hs_state { H_IDLE, H_CONNECTING, H_HANDSHAKE, H_SEND, H_HEAD, H_OPEN, H_DONE, H_FAILED };
enum fail_kind { F_CONNECT, F_TLS, F_HTTP, F_TIMEOUT, F_KINDS };
static const char *const fail_names[F_KINDS] = { "connect", "tls", "http", "timeout" };

#define HEAD_MAX 1024

/* One client connection and the session it keeps between waves. */
struct hs {
	int fd;
	uint8_t state;
	uint8_t reused;
	uint16_t len;
	SSL *ssl;
	SSL_SESSION *sess; /* the newest ticket this slot received; offered when asked */
	int64_t t0, t1;
	char head[HEAD_MAX];
};

/* What one phase measured. */
struct phase {
	const char *name;
	long n, opened, reused, failed[F_KINDS];
	double secs;     /* first connect to the last open */
	double p50, p99; /* each open, seconds (one-at-a-time phases) */
	double server_cpu, client_cpu;
	int cpu_ok;
	int tls, resume, storm;
	int at_once; /* every connect started together */
};

enum { P_PLAIN = 1, P_FULL = 2, P_RESUMED = 4, P_STORM = 8 };

struct ctx {
	long n, storm, pid_opt, tls12, insecure, keep, port;
	int phases; /* P_* */
	double timeout;
	const char *server, *plain, *cacert, *tls_cert, *tls_key, *run;
	struct tool_addr tls_addr, plain_addr;
	struct tool_herald h;
	struct tool_cert cert;
	pid_t pid;
	SSL_CTX *ctx;
	int ep;
	char req_tls[300], req_plain[300];
	char first_error[200];
	const char *proto; /* the version the last handshake agreed */
	struct phase ph[8];
	int nph;
};

/* ---- one connection --------------------------------------------------------- */

static void note(struct ctx *x, const char *what)
{
	tool_tls_note_error(x->first_error, sizeof(x->first_error), what);
}

/* Close the socket (and the TLS session, keeping its newest ticket). No
 * close_notify is sent: the socket is dropped as a lost client would drop
 * it. OpenSSL marks the session of a connection freed without a shutdown as
 * not resumable, so the connection is first declared shut down. */
static void hs_close(struct hs *c)
{
	if (c->ssl) {
		SSL_set_shutdown(c->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
		SSL_SESSION *s = SSL_get1_session(c->ssl);
		if (s && SSL_SESSION_is_resumable(s)) {
			SSL_SESSION_free(c->sess);
			c->sess = s;
		} else {
			SSL_SESSION_free(s);
		}
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

static void hs_fail(struct ctx *x, struct hs *c, struct phase *p, enum fail_kind k, const char *what)
{
	if (what)
		note(x, what);
	p->failed[k]++;
	c->state = H_FAILED;
	hs_close(c);
}

static void hs_watch(struct ctx *x, struct hs *c, uint32_t ev, int op, long i)
{
	struct epoll_event e = { .events = ev, .data.u64 = (uint64_t)i };
	epoll_ctl(x->ep, op, c->fd, &e);
}

/* Start connection i: a non-blocking connect, TLS (offering its session when
 * resume is set) unless plain. */
static void hs_start(struct ctx *x, struct hs *c, long i, struct phase *p, SSL_SESSION *offer)
{
	const struct tool_addr *a = p->tls ? &x->tls_addr : &x->plain_addr;
	c->len = 0;
	c->reused = 0;
	c->t0 = tool_now_ns();
	c->fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		hs_fail(x, c, p, F_CONNECT, "socket");
		return;
	}
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (p->tls) {
		c->ssl = SSL_new(x->ctx);
		if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
			hs_fail(x, c, p, F_TLS, "SSL_new");
			return;
		}
		SSL_set_connect_state(c->ssl);
		if (offer)
			SSL_set_session(c->ssl, offer);
	}
	c->state = H_CONNECTING;
	if (connect(c->fd, (const struct sockaddr *)&a->sa, a->len) != 0 && errno != EINPROGRESS) {
		hs_fail(x, c, p, F_CONNECT, "connect");
		return;
	}
	hs_watch(x, c, EPOLLOUT, EPOLL_CTL_ADD, i);
}

/* Reached the opening frame: the open counts. */
static void hs_opened(struct ctx *x, struct hs *c, struct phase *p, int stay, long i)
{
	c->t1 = tool_now_ns();
	p->opened++;
	if (c->ssl)
		x->proto = SSL_get_version(c->ssl);
	if (c->ssl && SSL_session_reused(c->ssl)) {
		c->reused = 1;
		p->reused++;
	}
	if (stay) {
		c->state = H_OPEN;
		hs_watch(x, c, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD, i);
	} else {
		c->state = H_DONE;
		hs_close(c);
	}
}

/* Map an SSL result to: 1 done, 0 wait (epoll interest set), -1 failed. */
static int ssl_step(struct ctx *x, struct hs *c, int r, long i)
{
	if (r > 0)
		return 1;
	int e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ) {
		hs_watch(x, c, EPOLLIN, EPOLL_CTL_MOD, i);
		return 0;
	}
	if (e == SSL_ERROR_WANT_WRITE) {
		hs_watch(x, c, EPOLLOUT, EPOLL_CTL_MOD, i);
		return 0;
	}
	return -1;
}

/* Drive connection i as far as it goes now. */
static void hs_drive(struct ctx *x, struct hs *c, struct phase *p, int stay, long i)
{
	const char *req = p->tls ? x->req_tls : x->req_plain;
	if (c->state == H_CONNECTING) {
		int err = 0;
		socklen_t sl = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &sl);
		if (err) {
			errno = err;
			hs_fail(x, c, p, F_CONNECT, "connect");
			return;
		}
		c->state = c->ssl ? H_HANDSHAKE : H_SEND;
	}
	if (c->state == H_HANDSHAKE) {
		ERR_clear_error();
		int r = ssl_step(x, c, SSL_do_handshake(c->ssl), i);
		if (r < 0)
			hs_fail(x, c, p, F_TLS, "handshake");
		if (r <= 0)
			return;
		c->state = H_SEND;
	}
	if (c->state == H_SEND) {
		size_t n = strlen(req);
		if (c->ssl) {
			ERR_clear_error();
			int r = ssl_step(x, c, SSL_write(c->ssl, req, (int)n), i);
			if (r < 0)
				hs_fail(x, c, p, F_TLS, "write");
			if (r <= 0)
				return;
		} else if (write(c->fd, req, n) != (ssize_t)n) {
			hs_fail(x, c, p, F_CONNECT, "write"); /* a fresh socket takes 100 bytes */
			return;
		}
		c->state = H_HEAD;
		hs_watch(x, c, EPOLLIN, EPOLL_CTL_MOD, i);
	}
	while (c->state == H_HEAD) {
		int room = HEAD_MAX - 1 - c->len;
		int r;
		if (room <= 0) {
			errno = 0;
			hs_fail(x, c, p, F_HTTP, "no opening frame in the first 1 KiB");
			return;
		}
		if (c->ssl) {
			ERR_clear_error();
			r = SSL_read(c->ssl, c->head + c->len, room);
			if (r <= 0) {
				int s = ssl_step(x, c, r, i);
				if (s < 0)
					hs_fail(x, c, p, F_TLS, "read");
				return;
			}
		} else {
			r = (int)read(c->fd, c->head + c->len, (size_t)room);
			if (r < 0 && errno == EAGAIN)
				return;
			if (r <= 0) {
				hs_fail(x, c, p, F_CONNECT, "read");
				return;
			}
		}
		c->len += (uint16_t)r;
		c->head[c->len] = '\0';
		if (c->len >= 12 && strncmp(c->head + 9, "200", 3) != 0) {
			errno = 0;
			char what[64];
			snprintf(what, sizeof(what), "HTTP status %.3s", c->head + 9);
			hs_fail(x, c, p, F_HTTP, what);
			return;
		}
		if (strstr(c->head, ": refused")) {
			errno = 0;
			hs_fail(x, c, p, F_HTTP, "refused");
			return;
		}
		if (strstr(c->head, ": stream open"))
			hs_opened(x, c, p, stay, i);
	}
	if (c->state == H_OPEN) {
		/* An open stream: only heartbeats come; read and drop them. */
		char buf[4096];
		for (;;) {
			int r = c->ssl ? SSL_read(c->ssl, buf, sizeof(buf)) : (int)read(c->fd, buf, sizeof(buf));
			if (r > 0)
				continue;
			if (c->ssl && SSL_get_error(c->ssl, r) == SSL_ERROR_WANT_READ)
				break;
			if (!c->ssl && r < 0 && errno == EAGAIN)
				break;
			ERR_clear_error();
			hs_close(c); /* closed by herald after it opened: not a failed open */
			c->state = H_DONE;
			break;
		}
	}
}

/* ---- phases ----------------------------------------------------------------------- */

static double cpu_self(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* herald's CPU seconds now; NAN when unknown. */
static double cpu_server(struct ctx *x)
{
	uint64_t t;
	if (x->pid <= 0 || tool_cpu_ticks(x->pid, 0, &t) != 0)
		return NAN;
	return (double)t / (double)sysconf(_SC_CLK_TCK);
}

/* Open conns[0..n) as phase p: at most inflight at once (1: one at a time),
 * each closed once open unless stay. The server's and our CPU are read
 * around it; in a storm phase the connections still open are closed first,
 * all at once, inside the measured window. */
static void run_phase(struct ctx *x, struct phase *p, struct hs *conns, long n, long inflight, int stay)
{
	double *each = xcalloc((size_t)n, sizeof(double));
	struct epoll_event evs[256];
	p->n = n;
	p->at_once = inflight > 1;
	double s0 = cpu_server(x), c0 = cpu_self();
	int64_t t0 = tool_now_ns(), t_last = t0;
	if (p->storm)
		for (long i = 0; i < n; i++)
			if (conns[i].fd >= 0)
				hs_close(&conns[i]);
	long next = 0, busy = 0, settled = 0;
	int64_t deadline = t0 + (int64_t)(x->timeout * 1e9);
	while (settled < n && !stop_flag) {
		while (next < n && busy < inflight) {
			/* One at a time, each open offers the ticket the one
			 * before it was given; in a storm, each its own. */
			SSL_SESSION *offer = NULL;
			if (p->resume)
				offer = !p->storm && next > 0 && conns[next - 1].sess ? conns[next - 1].sess
										      : conns[next].sess;
			conns[next].state = H_IDLE;
			hs_start(x, &conns[next], next, p, offer);
			if (conns[next].state == H_FAILED)
				settled++;
			else
				busy++;
			next++;
		}
		if (tool_now_ns() > deadline)
			break;
		int k = epoll_wait(x->ep, evs, 256, 50);
		for (int j = 0; j < k; j++) {
			long i = (long)evs[j].data.u64;
			struct hs *c = &conns[i];
			int was_open = c->state == H_OPEN;
			if (c->state == H_DONE || c->state == H_FAILED)
				continue;
			hs_drive(x, c, p, stay, i);
			if (!was_open && (c->state == H_OPEN || c->state == H_DONE || c->state == H_FAILED)) {
				settled++;
				busy--;
				if (c->state != H_FAILED) {
					each[i] = (double)(c->t1 - c->t0) / 1e9;
					if (c->t1 > t_last)
						t_last = c->t1;
				}
			}
		}
	}
	for (long i = 0; i < n; i++)
		if (conns[i].state != H_OPEN && conns[i].state != H_DONE && conns[i].state != H_FAILED &&
		    conns[i].state != H_IDLE) {
			p->failed[F_TIMEOUT]++;
			conns[i].state = H_FAILED;
			hs_close(&conns[i]);
		}
	p->failed[F_TIMEOUT] += n - next;
	p->secs = p->opened ? (double)(t_last - t0) / 1e9 : NAN;
	p->server_cpu = cpu_server(x) - s0;
	p->cpu_ok = !isnan(p->server_cpu);
	p->client_cpu = cpu_self() - c0;
	/* Latencies of the opens that succeeded. */
	long m = 0;
	for (long i = 0; i < n; i++)
		if (each[i] > 0)
			each[m++] = each[i];
	tool_sort_doubles(each, (size_t)m);
	p->p50 = tool_percentile(each, (size_t)m, 50);
	p->p99 = tool_percentile(each, (size_t)m, 99);
	free(each);
	long failed = 0;
	for (int k = 0; k < F_KINDS; k++)
		failed += p->failed[k];
	fprintf(stderr, "tls-handshakes: %s: %ld of %ld open (%ld resumed, %ld failed) in %.3f s\n", p->name, p->opened,
		n, p->reused, failed, p->secs);
}

static struct phase *new_phase(struct ctx *x, const char *name, int tls, int resume, int storm)
{
	struct phase *p = &x->ph[x->nph++];
	*p = (struct phase){ .name = name, .tls = tls, .resume = resume, .storm = storm };
	return p;
}

/* ---- report ---------------------------------------------------------------------------- */

static long failed_total(const struct phase *p)
{
	long f = 0;
	for (int k = 0; k < F_KINDS; k++)
		f += p->failed[k];
	return f;
}

/* Server CPU per open in microseconds, and the same less the plain floor. */
static double per_open_us(const struct phase *p)
{
	return p->cpu_ok && p->opened ? p->server_cpu / (double)p->opened * 1e6 : NAN;
}

static const char *fmt_us(double us, char *buf, size_t len)
{
	if (isnan(us))
		snprintf(buf, len, "n/a");
	else
		snprintf(buf, len, "%.0f us", us);
	return buf;
}

static int report(struct ctx *x, const char *proto)
{
	const struct phase *plain = x->nph ? &x->ph[0] : NULL;
	double floor_us = plain && !plain->tls ? per_open_us(plain) : NAN;
	int rc = 0;
	printf("| phase | opens | resumed | failed | time | each open, p50 / p99 | server CPU | per open | less plain "
	       "| client CPU |\n|---|---|---|---|---|---|---|---|---|---|\n");
	for (int i = 0; i < x->nph; i++) {
		const struct phase *p = &x->ph[i];
		char a[32], b[32], c[32], d[32], e[32], f[32], lat[80];
		long failed = failed_total(p);
		if (failed || p->opened < p->n)
			rc = 1;
		double us = per_open_us(p);
		snprintf(lat, sizeof(lat), "%s / %s", tool_fmt_dur(p->p50, a, sizeof(a)),
			 tool_fmt_dur(p->p99, b, sizeof(b)));
		printf("| %s | %s | %ld | %ld | **%s** | %s | %s | %s | %s | %s |\n", p->name,
		       tool_fmt_count(p->opened, a, sizeof(a)), p->reused, failed, tool_fmt_dur(p->secs, b, sizeof(b)),
		       lat, p->cpu_ok ? tool_fmt_dur(p->server_cpu, c, sizeof(c)) : "n/a", fmt_us(us, d, sizeof(d)),
		       p->tls ? fmt_us(us - floor_us, e, sizeof(e)) : "-", tool_fmt_dur(p->client_cpu, f, sizeof(f)));
	}
	printf("\n");
	const struct phase *full = NULL, *res = NULL;
	for (int i = 0; i < x->nph; i++) {
		if (!strcmp(x->ph[i].name, "full"))
			full = &x->ph[i];
		if (!strcmp(x->ph[i].name, "resumed"))
			res = &x->ph[i];
	}
	if (full && res && !isnan(per_open_us(full)) && !isnan(per_open_us(res)) && per_open_us(full) > 0)
		printf("- a resumed handshake costs herald %.0f%% of a full one (%s, %ld of %ld offered tickets "
		       "resumed)\n",
		       100.0 * (per_open_us(res) - floor_us) / (per_open_us(full) - floor_us), proto, res->reused,
		       res->n);
	if (x->first_error[0])
		printf("- first error: %s\n", x->first_error);
	printf("- server CPU is herald's utime+stime from /proc in %ld ms ticks; \"less plain\" subtracts the "
	       "plain open's CPU\n",
	       1000 / sysconf(_SC_CLK_TCK));

	tool_json_open(NULL, '{');
	tool_json_text("tool", "tls-handshakes");
	tool_json_text("run", x->run);
	tool_json_text("protocol", proto);
	tool_json_int("n", x->n);
	tool_json_int("storm", x->storm);
	tool_json_num("plain_cpu_per_open_us", floor_us);
	tool_json_open("phases", '[');
	for (int i = 0; i < x->nph; i++) {
		const struct phase *p = &x->ph[i];
		tool_json_open(NULL, '{');
		tool_json_text("phase", p->name);
		tool_json_bool("tls", p->tls);
		tool_json_bool("tickets_offered", p->resume);
		tool_json_bool("at_once", p->at_once);
		tool_json_bool("dropped_first", p->storm);
		tool_json_int("n", p->n);
		tool_json_int("opened", p->opened);
		tool_json_int("resumed", p->reused);
		tool_json_int("failed", failed_total(p));
		tool_json_open("failures", '{');
		for (int k = 0; k < F_KINDS; k++)
			tool_json_int(fail_names[k], p->failed[k]);
		tool_json_close();
		tool_json_num("time_ms", p->secs * 1e3);
		tool_json_num("p50_ms", p->p50 * 1e3);
		tool_json_num("p99_ms", p->p99 * 1e3);
		tool_json_num("server_cpu_ms", p->cpu_ok ? p->server_cpu * 1e3 : NAN);
		tool_json_num("server_cpu_per_open_us", per_open_us(p));
		tool_json_num("server_cpu_per_handshake_us", p->tls ? per_open_us(p) - floor_us : NAN);
		tool_json_num("client_cpu_ms", p->client_cpu * 1e3);
		tool_json_close();
	}
	tool_json_close();
	tool_json_text("first_error", x->first_error);
	tool_json_close();
	return rc;
}

/* ---- set-up --------------------------------------------------------------------------------- */

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "What a TLS handshake costs herald. N stream opens without TLS (the floor),\n"
	       "N with a full TLS handshake and N resuming the session ticket of the one\n"
	       "before, each one at a time (connect, handshake, GET /api/events/stream, read\n"
	       "to the opening frame, close); then a reconnect storm: M readers open at once,\n"
	       "all dropped at the same moment and reconnecting at once with their tickets,\n"
	       "then again without. For each: opens, how many resumed (the client's\n"
	       "SSL_session_reused), failures, time, herald's CPU from /proc per open and\n"
	       "less the plain floor. A markdown table and one JSON line. With no --server\n"
	       "a herald is started here with a tls: listener and a fresh P-256 certificate.\n"
	       "\n");
	tool_opt_help(t);
	printf("Exit status: 0 when every open succeeded; 1 otherwise; 2 usage.\n");
	tool_herald_help();
}

/* --phases: a comma-separated list of plain, full, resumed, storm. */
static int take_phases(void *ptr, const char *name, const char *v)
{
	static const char *const names[] = { "plain", "full", "resumed", "storm" };
	int *out = ptr, got = 0;
	for (const char *p = v; *p;) {
		size_t n = strcspn(p, ",");
		int k = 0;
		while (k < 4 && !(strlen(names[k]) == n && !strncmp(p, names[k], n)))
			k++;
		if (k == 4)
			return tool_usage_error("%s takes plain, full, resumed and storm, comma-separated", name);
		got |= 1 << k;
		p += n;
		if (*p == ',')
			p++;
	}
	if (!got)
		return tool_usage_error("%s needs at least one phase", name);
	*out = got;
	return 0;
}

static int parse_args(struct ctx *x, int argc, char **argv)
{
	const struct tool_opt t[] = {
		TOOL_LONG("N", &x->n, 1, 1000000, "a number",
			  "  N                  opens per one-at-a-time phase (plain, full, resumed)\n"),
		TOOL_LONG("--storm", &x->storm, 0, 1000000, "a number",
			  "  --storm M          readers in the reconnect storm (default 1000; 0: none)\n"),
		TOOL_CALL("--phases", &x->phases, take_phases, "a list",
			  "  --phases LIST      which of plain,full,resumed,storm to run (default all); resumed\n"
			  "                     alone first makes one unmeasured full open for its ticket\n"),
		TOOL_STRING("--server", &x->server, "an address",
			    "  --server ADDR      a running herald's TLS listener (127.0.0.1:PORT, [::1]:PORT)\n"),
		TOOL_STRING("--plain", &x->plain, "an address",
			    "  --plain ADDR       with --server, its plain listener for the floor (else no floor)\n"),
		TOOL_LONG("--pid", &x->pid_opt, 1, 1L << 30, "a process id",
			  "  --pid PID          with --server, the process to read CPU from\n"),
		TOOL_FLAG("--tls12", &x->tls12,
			  "  --tls12            offer TLS 1.2 only (default: 1.3 when herald has it)\n"),
		TOOL_FLAG("--insecure", &x->insecure, "  --insecure         do not verify the server's certificate\n"),
		TOOL_STRING("--cacert", &x->cacert, "a file",
			    "  --cacert FILE      trust this PEM (default: the certificate made here, or the\n"
			    "                     system's CAs with --server)\n"),
		TOOL_STRING("--tls-cert", &x->tls_cert, "a file",
			    "  --tls-cert FILE, --tls-key FILE\n"
			    "                     the pair for the herald started here (e.g. RSA)\n"),
		TOOL_STRING("--tls-key", &x->tls_key, "a file", NULL),
		TOOL_SECONDS("--timeout", &x->timeout, 0.1, 3600,
			     "  --timeout S        give up on a phase after S seconds (default 120)\n"),
		TOOL_LONG("--port", &x->port, 0, 65535, "a port number",
			  "  --port P           the plain port of the herald started here (default 0: one the\n"
			  "                     kernel picks); its tls: listener takes one the kernel picks\n"),
		TOOL_STRING("--run", &x->run, "a label", "  --run LABEL        the label of this run\n"),
		TOOL_FLAG("--keep", &x->keep, "  --keep             keep the started herald's temporary folder\n"),
		TOOL_HELP("  --help             this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(t, argc, argv, help);
	if (rc >= 0)
		return rc;
	if (x->n < 1)
		return tool_usage_error("N is required");
	if (!x->tls_cert != !x->tls_key)
		return tool_usage_error("--tls-cert and --tls-key go together");
	if (x->server && x->tls_cert)
		return tool_usage_error("--tls-cert and --tls-key are for the herald started here (no --server)");
	if (!x->server && (x->plain || x->pid_opt))
		return tool_usage_error("--plain and --pid go with --server");
	if (x->server && x->port >= 0)
		return tool_usage_error("--port is for the herald started here: leave it out with --server");
	if (x->insecure && x->cacert)
		return tool_usage_error("--insecure and --cacert exclude each other");
	if (x->server && tool_parse_addr(x->server, &x->tls_addr) != 0)
		return tool_usage_error("--server: cannot use %s", x->server);
	if (x->plain && tool_parse_addr(x->plain, &x->plain_addr) != 0)
		return tool_usage_error("--plain: cannot use %s", x->plain);
	if ((x->server && x->tls_addr.family == AF_UNIX) || (x->plain && x->plain_addr.family == AF_UNIX))
		return tool_usage_error("TLS is over TCP: give 127.0.0.1:PORT or [::1]:PORT");
	return -1;
}

static int start_own(struct ctx *x)
{
	char err[700];
	const char *cert = x->tls_cert, *key = x->tls_key;
	if (!cert) {
		if (tool_tls_make_cert(&x->cert, err, sizeof(err)) != 0) {
			fprintf(stderr, "tls-handshakes: %s\n", err);
			return 1;
		}
		cert = x->cert.cert;
		key = x->cert.key;
	}
	const char *extra[] = { "--listen", "tls:127.0.0.1:0", "--tls-cert", cert, "--tls-key", key, NULL };
	if (tool_herald_start(&x->h, x->port < 0 ? 0 : (int)x->port, tool_default_backlog(0), 0, extra) != 0)
		return 1;
	int port = tool_tls_port_from_log(x->h.log);
	if (!port) {
		fprintf(stderr, "tls-handshakes: the herald started here logged no tls listener (see %s)\n", x->h.log);
		return 1;
	}
	char s[64];
	snprintf(s, sizeof(s), "127.0.0.1:%d", port);
	tool_parse_addr(s, &x->tls_addr);
	snprintf(s, sizeof(s), "127.0.0.1:%d", x->h.port);
	tool_parse_addr(s, &x->plain_addr);
	x->plain = "own";
	x->pid = x->h.pid;
	fprintf(stderr, "tls-handshakes: started herald %s (pid %d), tls on %s, plain on %s\n", x->h.bin, (int)x->h.pid,
		x->tls_addr.text, x->plain_addr.text);
	return 0;
}

/* The client context: TLS 1.2 or later (1.2 only with --tls12), ALPN
 * http/1.1, tickets kept by hand (no internal cache), the server's
 * certificate checked unless --insecure. */
static int client_ctx(struct ctx *x)
{
	x->ctx = SSL_CTX_new(TLS_client_method());
	if (!x->ctx)
		return -1;
	SSL_CTX_set_min_proto_version(x->ctx, TLS1_2_VERSION);
	if (x->tls12)
		SSL_CTX_set_max_proto_version(x->ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(x->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(x->ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_cache_mode(x->ctx, SSL_SESS_CACHE_OFF);
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX_set_alpn_protos(x->ctx, alpn, sizeof(alpn) - 1);
	if (x->insecure) {
		SSL_CTX_set_verify(x->ctx, SSL_VERIFY_NONE, NULL);
		return 0;
	}
	SSL_CTX_set_verify(x->ctx, SSL_VERIFY_PEER, NULL);
	const char *trust = x->cacert ? x->cacert : x->cert.dir[0] ? x->cert.cert : x->tls_cert;
	if ((trust ? SSL_CTX_load_verify_locations(x->ctx, trust, NULL) : SSL_CTX_set_default_verify_paths(x->ctx)) !=
	    1) {
		note(x, trust ? trust : "the system's CAs");
		fprintf(stderr, "tls-handshakes: cannot load %s\n", x->first_error);
		return -1;
	}
	char ip[INET6_ADDRSTRLEN] = "";
	const struct tool_addr *a = &x->tls_addr;
	if (a->family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->sa)->sin_addr, ip, sizeof(ip));
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->sa)->sin6_addr, ip, sizeof(ip));
	if (X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(x->ctx), ip) != 1) {
		fprintf(stderr, "tls-handshakes: cannot check the certificate against %s\n", ip);
		return -1;
	}
	return 0;
}

static void free_conns(struct hs *c, long n)
{
	for (long i = 0; i < n; i++) {
		hs_close(&c[i]);
		SSL_SESSION_free(c[i].sess);
	}
	free(c);
}

int main(int argc, char **argv)
{
	tool_usage("tls-handshakes", USAGE);
	struct ctx *x = xcalloc(1, sizeof(*x));
	x->n = -1;
	x->storm = 1000;
	x->port = -1;
	x->phases = P_PLAIN | P_FULL | P_RESUMED | P_STORM;
	x->timeout = 120;
	x->run = "1";
	int rc = parse_args(x, argc, argv);
	if (rc >= 0) {
		free(x);
		return rc;
	}
	long soft = 0, hard = 0;
	tool_raise_nofile(&soft, &hard);
	char what[64];
	snprintf(what, sizeof(what), "a storm of %ld readers", x->storm);
	if (tool_check_fds(x->storm + 64, what) != 0) {
		free(x);
		return 2;
	}
	tool_catch_signals(&stop_flag);
	x->ep = epoll_create1(EPOLL_CLOEXEC);
	rc = x->ep < 0 ? 1 : 0;
	if (rc == 0 && !x->server)
		rc = start_own(x);
	else if (rc == 0 && (x->pid = (pid_t)x->pid_opt) > 0)
		tool_herald_warn_pid(x->pid);
	if (rc == 0 && client_ctx(x) != 0)
		rc = 1;
	if (rc == 0) {
		snprintf(x->req_tls, sizeof(x->req_tls),
			 "GET /api/events/stream HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n",
			 x->tls_addr.text);
		snprintf(x->req_plain, sizeof(x->req_plain),
			 "GET /api/events/stream HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n",
			 x->plain_addr.text);
		long most = x->n > x->storm ? x->n : x->storm;
		struct hs *conns = xcalloc((size_t)most, sizeof(*conns));
		for (long i = 0; i < most; i++)
			conns[i].fd = -1;
		if (x->plain && (x->phases & P_PLAIN) && !stop_flag)
			run_phase(x, new_phase(x, "plain", 0, 0, 0), conns, x->n, 1, 0);
		if ((x->phases & P_FULL) && !stop_flag)
			run_phase(x, new_phase(x, "full", 1, 0, 0), conns, x->n, 1, 0);
		if ((x->phases & P_RESUMED) && !stop_flag) {
			if (!(x->phases & P_FULL)) {
				/* A ticket to start from, outside what is measured. */
				struct phase warm = { .name = "warm-up", .tls = 1 };
				run_phase(x, &warm, conns, 1, 1, 0);
			}
			run_phase(x, new_phase(x, "resumed", 1, 1, 0), conns, x->n, 1, 0);
		}
		if (x->storm > 0 && (x->phases & P_STORM) && !stop_flag) {
			for (long i = 0; i < most; i++) {
				SSL_SESSION_free(conns[i].sess);
				conns[i].sess = NULL;
			}
			run_phase(x, new_phase(x, "storm: open", 1, 0, 0), conns, x->storm, x->storm, 1);
			struct phase *p = new_phase(x, "storm: reconnect with tickets", 1, 1, 1);
			run_phase(x, p, conns, x->storm, x->storm, 1);
			p = new_phase(x, "storm: reconnect without", 1, 0, 1);
			run_phase(x, p, conns, x->storm, x->storm, 1);
		}
		const char *proto = x->proto ? x->proto : "none";
		free_conns(conns, most);
		if (!x->server) {
			int st = tool_herald_stop(&x->h, x->keep);
			if (st != 0 && !stop_flag)
				fprintf(stderr, "tls-handshakes: herald exited with status %d\n", st);
		}
		rc = report(x, proto);
	} else if (!x->server) {
		tool_herald_stop(&x->h, 1);
	}
	SSL_CTX_free(x->ctx);
	tool_tls_remove_cert(&x->cert, x->keep);
	if (x->ep >= 0)
		close(x->ep);
	free(x);
	return rc;
}
