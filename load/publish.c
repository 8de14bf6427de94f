/* SPDX-License-Identifier: BSD-2-Clause */
/* publish.c: load on the publish path. N POSTs to /api/events (or, with
 * --mercure, to /.well-known/mercure as forms), at most C in flight, spread
 * over K keep-alive connections (pipelined when C > K), from one epoll
 * thread. Throughput counts every request, so it is always printed beside
 * the split: ok, HTTP error (by status), network error (by kind). Both
 * endpoints get the same event: topic "load", type "load", and a data line
 * of the same length, so the two figures compare.
 *
 * Each connection: CONNECTING (EPOLLOUT) -> OPEN, with a FIFO of requests
 * sent and not yet answered (responses come in order). An answer that says
 * "Connection: close" (herald's refusals do) ends the connection, and the
 * requests pipelined behind it, which the server never read, go back to be
 * sent again on a new one. A connection that closes or fails otherwise fails
 * its FIFO as network errors. Either way it is reopened while work is left.
 * A connect that fails uses up one request, so a dead server ends the run
 * instead of spinning. */
#include "tool.h"

#include <errno.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

static const char USAGE[] =
	"usage: load/publish N [-c C] [-k K] [--server ADDR] [--db PATH] [--token T] [--size BYTES]\n"
	"       [--public] [--idempotency-keys] [--mercure [--ids]] [--timeout S] [--port P] [--backlog B]\n"
	"       [--run LABEL] [--keep]\n";

static void help(const struct tool_opt *t)
{
	printf("%s", USAGE);
	printf("\n"
	       "N POSTs to /api/events (with --mercure: to /.well-known/mercure, as forms),\n"
	       "C in flight, over K keep-alive connections (requests\n"
	       "are pipelined when C > K). Prints throughput, p50 and p99 latency, and the\n"
	       "split ok / HTTP error (by status) / network error side by side, as a markdown\n"
	       "table and one JSON line. Throughput counts every request, failed ones too,\n"
	       "so read it beside the split; a refusal is counted under its status, and a\n"
	       "401 or 403 is explained once. Without --server a herald is started on a\n"
	       "temporary database and stopped after; its rows are counted at the end (with\n"
	       "--server, only given --db; otherwise the JSON says \"rows\":null and why).\n"
	       "\n");
	tool_opt_help(t);
	printf("Exit status: 0 when every request got a 2xx; 1 otherwise; 2 usage.\n");
	tool_herald_help();
}

enum { C_CLOSED, C_CONNECTING, C_OPEN };
enum net_kind { N_REFUSED, N_RESET, N_TIMEOUT, N_CLOSED, N_OTHER, N_KINDS };
static const char *const NET_NAMES[N_KINDS] = { "refused", "reset", "timeout", "closed", "other" };

struct pconn {
	int fd;
	int state;
	long *fifo; /* request numbers sent, oldest first */
	int64_t *sent;
	int head, count, depth;
	char *out;
	size_t outlen, outoff, outcap;
	char in[16384];
	size_t inlen;
};

static long N, C, K;
static double timeout_s = 10;
static const char *token;
static long size = 32;
static int public_events;
static int idem_keys;     /* --idempotency-keys: one new key per request */
static int mercure;       /* --mercure: Mercure's form publish instead of herald's JSON */
static int mercure_ids;   /* --ids: each Mercure update names its own id */
static char idem_run[40]; /* this run's part of every key, so runs differ */
static struct tool_addr addr;
static int ep;
static struct pconn *conns;
static long issued, answered, inflight, ok, http_err, net_err, resent;
static long net_kinds[N_KINDS];
static long status_count[600];
static int first_other;
/* The first refusal's own words (the JSON error line herald sends), per
 * status, for the notes; a few statuses are enough. */
#define SAID_MAX 8
static int said_status[SAID_MAX];
static char said_text[SAID_MAX][160];
static int nsaid;
static double *lat;
static size_t nlat;
static int64_t t_first, t_last;
static volatile int stop_flag;

static enum net_kind kind_of(int err)
{
	switch (err) {
	case ECONNREFUSED:
		return N_REFUSED;
	case ECONNRESET:
	case EPIPE:
	case ECONNABORTED:
		return N_RESET;
	case ETIMEDOUT:
		return N_TIMEOUT;
	case 0:
		return N_CLOSED;
	default:
		if (!first_other)
			first_other = err;
		return N_OTHER;
	}
}

static void net_error(enum net_kind k, long count)
{
	t_last = tool_now_ns();
	net_err += count;
	net_kinds[k] += count;
	answered += count;
}

/* Close c and fail what it had in flight as kind k. */
static void conn_fail(struct pconn *c, enum net_kind k)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = C_CLOSED;
	net_error(k, c->count);
	inflight -= c->count;
	c->count = 0;
	c->head = 0;
	c->outlen = c->outoff = 0;
	c->inlen = 0;
	t_last = tool_now_ns();
}

static void conn_open(struct pconn *c, long idx)
{
	c->fd = socket(addr.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		issued++;
		net_error(kind_of(errno), 1);
		return;
	}
	c->state = C_CONNECTING;
	int rc = connect(c->fd, (struct sockaddr *)&addr.sa, addr.len);
	if (rc != 0 && errno != EINPROGRESS && !(errno == EAGAIN && addr.family == AF_UNIX)) {
		/* The request this connection would have carried fails instead. */
		int e = errno;
		close(c->fd);
		c->fd = -1;
		c->state = C_CLOSED;
		issued++;
		net_error(kind_of(e), 1);
		return;
	}
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLIN, .data.u64 = (uint64_t)idx };
	epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void want_out(struct pconn *c, long idx, int on)
{
	struct epoll_event ev = { .events = EPOLLIN | (on ? EPOLLOUT : 0), .data.u64 = (uint64_t)idx };
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void flush_out(struct pconn *c, long idx)
{
	while (c->outoff < c->outlen) {
		ssize_t w = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
		if (w < 0) {
			if (errno == EAGAIN) {
				want_out(c, idx, 1);
				return;
			}
			if (errno == EINTR)
				continue;
			conn_fail(c, kind_of(errno));
			return;
		}
		c->outoff += (size_t)w;
	}
	c->outoff = c->outlen = 0;
	want_out(c, idx, 0);
}

static char *body_tmpl;

/* Queue request number seq on c. */
static void send_one(struct pconn *c, long seq)
{
	char head[512];
	char *pad = body_tmpl;
	char body[256 + 4096];
	int bl;
	if (mercure) {
		/* The same data as the JSON body's once decoded ('+' is a space);
		 * an update without "private" is public. */
		char id[96] = "";
		if (mercure_ids)
			snprintf(id, sizeof(id), "&id=urn%%3Aload%%3A%s%%3A%ld", idem_run, seq);
		bl = snprintf(body, sizeof(body), "topic=load&type=load&data=publish+%ld+%s%s%s", seq, pad,
			      public_events ? "" : "&private=on", id);
	} else {
		bl = snprintf(body, sizeof(body),
			      "{\"type\":\"load\",\"topic\":\"load\",\"data\":\"publish %ld %s\",\"public\":%s}", seq,
			      pad, public_events ? "true" : "false");
	}
	char auth[300] = "", key[96] = "";
	if (token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", token);
	/* A request sent again after its connection closed keeps its number,
	 * so its key: as a publisher's retry would. */
	if (idem_keys)
		snprintf(key, sizeof(key), "Idempotency-Key: \"load-%s-%ld\"\r\n", idem_run, seq);
	int hl = snprintf(head, sizeof(head),
			  "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: "
			  "%d\r\n%s%s\r\n",
			  addr.path[0] ? addr.path
			  : mercure    ? "/.well-known/mercure"
				       : "/api/events",
			  addr.family == AF_UNIX ? "localhost" : addr.text,
			  mercure ? "application/x-www-form-urlencoded" : "application/json", bl, auth, key);
	size_t need = c->outlen + (size_t)hl + (size_t)bl;
	if (need > c->outcap) {
		c->outcap = need * 2;
		c->out = xrealloc(c->out, c->outcap);
	}
	memcpy(c->out + c->outlen, head, (size_t)hl);
	memcpy(c->out + c->outlen + (size_t)hl, body, (size_t)bl);
	c->outlen += (size_t)hl + (size_t)bl;
	int slot = (c->head + c->count) % c->depth;
	c->fifo[slot] = seq;
	c->sent[slot] = tool_now_ns();
	c->count++;
	inflight++;
	issued++;
}

/* The server closes c after the answer just read: what was pipelined behind
 * it was never read there, so it goes back to be sent on a new connection. */
static void conn_requeue(struct pconn *c)
{
	close(c->fd);
	c->fd = -1;
	c->state = C_CLOSED;
	issued -= c->count;
	inflight -= c->count;
	resent += c->count;
	c->count = 0;
	c->head = 0;
	c->outlen = c->outoff = 0;
	c->inlen = 0;
}

/* Keep the body of the first answer with this status (its "error" member
 * when it has one) for the notes. */
static void remember_refusal(int status, const char *body, size_t len)
{
	for (int i = 0; i < nsaid; i++)
		if (said_status[i] == status)
			return;
	if (nsaid == SAID_MAX)
		return;
	const char *p = memmem(body, len, "\"error\":\"", 9);
	if (p) {
		p += 9;
		const char *q = memchr(p, '"', len - (size_t)(p - body));
		len = q ? (size_t)(q - p) : len - (size_t)(p - body);
		body = p;
	}
	size_t n = len < sizeof(said_text[0]) - 1 ? len : sizeof(said_text[0]) - 1;
	for (size_t i = 0; i < n; i++) /* one line of plain text */
		said_text[nsaid][i] = (body[i] == '\r' || body[i] == '\n') ? ' ' : body[i];
	said_text[nsaid][n] = '\0';
	said_status[nsaid++] = status;
}

/* Give every open connection work while requests and room are left. */
static void fill(void)
{
	for (long i = 0; i < K && issued < N && inflight < C; i++) {
		struct pconn *c = &conns[i];
		if (c->state == C_CLOSED) {
			conn_open(c, i);
			continue;
		}
		if (c->state != C_OPEN)
			continue;
		int before = c->count;
		while (c->count < c->depth && issued < N && inflight < C)
			send_one(c, issued + 1);
		if (c->count > before)
			flush_out(c, i);
	}
}

/* Parse whole responses out of c->in; returns 1 when the server closes c
 * after the last one (Connection: close), -1 when c is broken. */
static int parse_responses(struct pconn *c)
{
	for (;;) {
		char *e = memmem(c->in, c->inlen, "\r\n\r\n", 4);
		if (!e)
			return c->inlen >= sizeof(c->in) ? -1 : 0;
		size_t hl = (size_t)(e + 4 - c->in);
		long clen = 0;
		int closing = 0;
		for (char *p = c->in; p && p < e;) {
			char *nl = memchr(p, '\n', (size_t)(e - p));
			if (strncasecmp(p, "content-length:", 15) == 0)
				clen = strtol(p + 15, NULL, 10);
			else if (strncasecmp(p, "connection:", 11) == 0 && strstr(p, "close") &&
				 (!nl || strstr(p, "close") < nl))
				closing = 1;
			p = nl ? nl + 1 : NULL;
		}
		if (clen < 0 || hl + (size_t)clen > sizeof(c->in))
			return -1;
		if (c->inlen < hl + (size_t)clen)
			return 0;
		int status = (c->inlen > 12 && memcmp(c->in, "HTTP/1.", 7) == 0) ? atoi(c->in + 9) : 0;
		if (c->count == 0)
			return -1; /* an answer to nothing */
		int64_t now = tool_now_ns();
		lat[nlat++] = (double)(now - c->sent[c->head]) / 1e9;
		c->head = (c->head + 1) % c->depth;
		c->count--;
		inflight--;
		answered++;
		t_last = now;
		if (status >= 200 && status < 300)
			ok++;
		else {
			http_err++;
			status_count[status > 0 && status < 600 ? status : 0]++;
			remember_refusal(status, c->in + hl, (size_t)clen);
		}
		size_t used = hl + (size_t)clen;
		memmove(c->in, c->in + used, c->inlen - used);
		c->inlen -= used;
		if (closing)
			return 1;
	}
}

static void on_event(long i, uint32_t events)
{
	struct pconn *c = &conns[i];
	if (c->state == C_CONNECTING) {
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
		if (soerr) {
			close(c->fd);
			c->fd = -1;
			c->state = C_CLOSED;
			/* Uses up a request, so that a dead server ends the run. */
			if (issued < N) {
				issued++;
				net_error(kind_of(soerr), 1);
			}
			return;
		}
		c->state = C_OPEN;
		want_out(c, i, 0);
		return;
	}
	if (events & EPOLLOUT)
		flush_out(c, i);
	if (c->state != C_OPEN || !(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	ssize_t r = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r <= 0) {
		conn_fail(c, r == 0 ? N_CLOSED : kind_of(errno));
		return;
	}
	c->inlen += (size_t)r;
	int rc = parse_responses(c);
	if (rc > 0)
		conn_requeue(c);
	else if (rc < 0)
		conn_fail(c, N_CLOSED);
}

static void check_timeouts(void)
{
	int64_t now = tool_now_ns(), lim = (int64_t)(timeout_s * 1e9);
	for (long i = 0; i < K; i++) {
		struct pconn *c = &conns[i];
		if (c->state == C_OPEN && c->count > 0 && now - c->sent[c->head] > lim)
			conn_fail(c, N_TIMEOUT);
	}
}

/* The rows this tool's events make in the database at path; -1 after
 * putting the reason in why. */
static long count_rows(const char *path, char *why, size_t whylen)
{
	sqlite3 *db = NULL;
	long n = -1;
	int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(db, 2000);
		sqlite3_stmt *st = NULL;
		rc = sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM events WHERE type = 'load' AND topic = 'load'", -1,
					&st, NULL);
		if (rc == SQLITE_OK)
			rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			n = (long)sqlite3_column_int64(st, 0);
		sqlite3_finalize(st);
	}
	if (n < 0)
		snprintf(why, whylen, "not counted: %s: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
	sqlite3_close(db);
	return n;
}

/* Say once, plainly, what a 401 or 403 means and how to pass a token. */
static void token_hint(char *out, size_t len)
{
	out[0] = '\0';
	if (status_count[401] && !token)
		snprintf(out, len,
			 "The server wants a publish token (401): pass it with --token T, sent as "
			 "`Authorization: Bearer T` (herald's publish_token).");
	else if (status_count[401] || (status_count[403] && token))
		snprintf(out, len,
			 "The server refused the token given with --token (%d): it must equal the server's "
			 "publish_token.",
			 status_count[403] ? 403 : 401);
	else if (status_count[403])
		snprintf(out, len,
			 "The server refused to take publishes from this client (403): herald without "
			 "publish_token takes them only from this host, not through a proxy; set publish_token "
			 "there and pass it with --token T.");
}

/* --token: sent in a header line, so no line breaks. */
static int take_token(void *ptr, const char *name, const char *v)
{
	if (strpbrk(v, "\r\n"))
		return tool_usage_error("%s needs a value without line breaks", name);
	*(const char **)ptr = v;
	return 0;
}

int main(int argc, char **argv)
{
	tool_usage("publish", USAGE);
	const char *server = NULL, *dbpath = NULL, *label = "1";
	long backlog_arg = 0, port = -1;
	int keep = 0;
	N = -1;
	C = 64;
	K = 0; /* 0: not given, 16 unless -c is smaller */
	const struct tool_opt opts[] = {
		TOOL_LONG("N", &N, 1, 10000000, "a number", "  N              requests (1 to 10000000)\n"),
		{ .name = "--concurrency",
		  .short_name = 'c',
		  .kind = TOOL_OPT_LONG,
		  .ptr = &C,
		  .min = 1,
		  .max = 100000,
		  .what = "a number",
		  .help = "  -c, --concurrency C   requests in flight at most (default 64, at most N)\n" },
		{ .name = "--connections",
		  .short_name = 'k',
		  .kind = TOOL_OPT_LONG,
		  .ptr = &K,
		  .min = 1,
		  .max = 100000,
		  .what = "a number",
		  .help = "  -k, --connections K   keep-alive connections (default 16, at most C)\n" },
		TOOL_STRING("--server", &server, "an address",
			    "  --server ADDR  127.0.0.1:PORT, [::1]:PORT, unix:/path, or\n"
			    "                 http://127.0.0.1:PORT/api/events\n"),
		TOOL_STRING("--db", &dbpath, "a path",
			    "  --db PATH      with --server: count the rows in this database afterwards\n"),
		TOOL_CALL("--token", &token, take_token, "a value without line breaks",
			  "  --token T      send Authorization: Bearer T (herald's publish_token)\n"),
		TOOL_LONG("--size", &size, 1, 4000, "a number",
			  "  --size BYTES   data length of each event (default 32)\n"),
		TOOL_FLAG("--public", &public_events, "  --public       publish public events (default: not public)\n"),
		TOOL_FLAG("--idempotency-keys", &idem_keys,
			  "  --idempotency-keys  send a new Idempotency-Key with each request (what keys cost)\n"),
		TOOL_FLAG("--mercure", &mercure,
			  "  --mercure      POST /.well-known/mercure forms (topic, type, data; private=on\n"
			  "                 unless --public) instead of JSON to /api/events: same data\n"),
		TOOL_FLAG("--ids", &mercure_ids,
			  "  --ids          with --mercure: each update names its id (urn:load:RUN:SEQ)\n"
			  "                 instead of herald making a urn:uuid\n"),
		TOOL_SECONDS("--timeout", &timeout_s, 0.01, 3600,
			     "  --timeout S    a request unanswered after S seconds is a network error (default 10)\n"),
		TOOL_LONG("--port", &port, 0, 65535, "a port number",
			  "  --port P       the port of the herald started here (default 0: one the kernel picks)\n"),
		TOOL_LONG("--backlog", &backlog_arg, 1, 1L << 20, "a number",
			  "  --backlog B    listen backlog of the herald started here (default $BACKLOG or 1024)\n"),
		TOOL_STRING("--run", &label, "a label", "  --run LABEL    the label of this run in the JSON line\n"),
		TOOL_FLAG("--keep", &keep, "  --keep         keep the started herald's temporary folder\n"),
		TOOL_HELP("  --help         this text\n"),
		TOOL_END,
	};
	int rc = tool_opt_parse(opts, argc, argv, help);
	if (rc >= 0)
		return rc;
	int k_given = K > 0;
	if (!k_given)
		K = 16;
	if (N < 0)
		return tool_usage_error("say how many requests (N)");
	if (K > C) {
		if (k_given)
			return tool_usage_error("-k (connections) may not exceed -c (requests in flight)");
		K = C;
	}
	/* No more in flight, or connections, than there are requests. */
	if (C > N)
		C = N;
	if (K > C)
		K = C;
	if (server && tool_parse_addr(server, &addr) != 0)
		return tool_usage_error(
			"--server wants 127.0.0.1:PORT, [::1]:PORT, unix:/path or http://HOST:PORT/path");
	if (dbpath && !server)
		return tool_usage_error("--db goes with --server");
	if (server && port >= 0)
		return tool_usage_error("--port is for the herald started here: leave it out with --server");
	if (mercure_ids && !mercure)
		return tool_usage_error("--ids goes with --mercure");
	char what[64];
	snprintf(what, sizeof(what), "%ld connections", K);
	if (tool_check_fds(K + 32, what) != 0)
		return 2;
	tool_catch_signals(&stop_flag);

	struct tool_herald h;
	memset(&h, 0, sizeof(h));
	if (!server) {
		if (tool_herald_start(&h, port < 0 ? 0 : (int)port, tool_default_backlog(backlog_arg), 0, NULL) != 0)
			return 1;
		char s[128];
		snprintf(s, sizeof(s), "http://127.0.0.1:%d%s", h.port,
			 mercure ? "/.well-known/mercure" : "/api/events");
		tool_parse_addr(s, &addr);
		dbpath = h.db;
		fprintf(stderr, "publish: started herald %s (pid %d) on 127.0.0.1:%d\n", h.bin, (int)h.pid, h.port);
	}
	snprintf(idem_run, sizeof(idem_run), "%ld-%lld", (long)getpid(), (long long)tool_now_ns());
	body_tmpl = xmalloc((size_t)size + 1);
	memset(body_tmpl, 'x', (size_t)size);
	body_tmpl[size] = '\0';
	char rows_why[600] = "";
	if (!dbpath)
		snprintf(rows_why, sizeof(rows_why), "not counted: give --db PATH with --server to count them");
	long rows_before = dbpath ? count_rows(dbpath, rows_why, sizeof(rows_why)) : -1;

	ep = epoll_create1(EPOLL_CLOEXEC);
	conns = xcalloc((size_t)K, sizeof(*conns));
	long depth = (C + K - 1) / K;
	for (long i = 0; i < K; i++) {
		conns[i].fd = -1;
		conns[i].depth = (int)depth;
		conns[i].fifo = xcalloc((size_t)depth, sizeof(long));
		conns[i].sent = xcalloc((size_t)depth, sizeof(int64_t));
	}
	lat = xmalloc((size_t)N * sizeof(double));
	const char *target = addr.path[0] ? addr.path : mercure ? "/.well-known/mercure" : "/api/events";
	fprintf(stderr, "publish: %ld POSTs to %s %s, %ld in flight over %ld connections\n", N, addr.text, target, C,
		K);

	struct epoll_event evs[1024];
	double last_check = tool_now_s();
	t_first = tool_now_ns();
	while (answered < N && !stop_flag) {
		fill();
		if (answered >= N)
			break;
		int n = epoll_wait(ep, evs, 1024, 100);
		for (int j = 0; j < n; j++)
			on_event((long)evs[j].data.u64, evs[j].events);
		if (tool_now_s() - last_check > 0.1) {
			last_check = tool_now_s();
			check_timeouts();
		}
	}
	for (long i = 0; i < K; i++) {
		if (conns[i].fd >= 0)
			close(conns[i].fd);
		free(conns[i].fifo);
		free(conns[i].sent);
		free(conns[i].out);
	}
	free(conns);
	close(ep);
	long rows = rows_before >= 0 ? count_rows(dbpath, rows_why, sizeof(rows_why)) : -1;
	if (rows >= 0)
		rows -= rows_before;
	if (!server)
		tool_herald_stop(&h, keep);

	double elapsed = t_last > t_first ? (double)(t_last - t_first) / 1e9 : NAN;
	double tput = elapsed > 0 ? (double)answered / elapsed : NAN;
	tool_sort_doubles(lat, nlat);
	double p50 = tool_percentile(lat, nlat, 50), p99 = tool_percentile(lat, nlat, 99);

	char c1[32], c2[32], c3[32], b1[32], b2[32], b3[32], t1[32];
	char herr[256] = "", nerr[256] = "";
	int hl = snprintf(herr, sizeof(herr), "%s", tool_fmt_count(http_err, c3, sizeof(c3)));
	if (http_err) {
		hl += snprintf(herr + hl, sizeof(herr) - (size_t)hl, " (");
		for (int s = 0, first = 1; s < 600 && hl < (int)sizeof(herr) - 24; s++)
			if (status_count[s]) {
				hl += snprintf(herr + hl, sizeof(herr) - (size_t)hl, "%s%d: %ld", first ? "" : ", ", s,
					       status_count[s]);
				first = 0;
			}
		snprintf(herr + hl, sizeof(herr) - (size_t)hl, ")");
	}
	int nl = snprintf(nerr, sizeof(nerr), "%s", tool_fmt_count(net_err, c3, sizeof(c3)));
	if (net_err) {
		nl += snprintf(nerr + nl, sizeof(nerr) - (size_t)nl, " (");
		for (int k = 0, first = 1; k < N_KINDS; k++)
			if (net_kinds[k]) {
				nl += snprintf(nerr + nl, sizeof(nerr) - (size_t)nl, "%s%s %ld", first ? "" : ", ",
					       NET_NAMES[k], net_kinds[k]);
				first = 0;
			}
		snprintf(nerr + nl, sizeof(nerr) - (size_t)nl, ")");
	}
	printf("| requests | in flight | connections | time | throughput | p50 | p99 | ok | HTTP error | network error "
	       "|\n"
	       "|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %ld | %ld | %s | %s req/s | %s | %s | %s | %s | %s |\n", tool_fmt_count(N, c1, sizeof(c1)), C, K,
	       tool_fmt_dur(elapsed, b1, sizeof(b1)),
	       isnan(tput) ? "n/a" : tool_fmt_count((long long)tput, t1, sizeof(t1)), tool_fmt_dur(p50, b2, sizeof(b2)),
	       tool_fmt_dur(p99, b3, sizeof(b3)), tool_fmt_count(ok, c2, sizeof(c2)), herr, nerr);
	printf("\nEach request: POST %s, %s; its data \"publish SEQ\" and %ld bytes more.\n", target,
	       mercure ? (mercure_ids ? "a Mercure form naming its id" : "a Mercure form") : "herald's JSON", size);
	printf("Throughput counts every request, failed ones too: read it beside ok / HTTP error / network error.\n");
	printf("p50 and p99 are over the %zu requests that got an answer (HTTP errors included).\n", nlat);
	if (first_other)
		printf("The first other network error was: %s.\n", strerror(first_other));
	if (rows >= 0)
		printf("The database holds %ld new rows from this run (%ld answered ok).\n", rows, ok);
	else
		printf("Rows %s.\n", rows_why);
	if (resent)
		printf("%ld requests were sent again: the server closed their connection after answering one "
		       "pipelined ahead of them (Connection: close), so it never read them.\n",
		       resent);
	for (int i = 0; i < nsaid; i++)
		if (said_text[i][0])
			printf("The first %d said: %s\n", said_status[i], said_text[i]);
	char hint[400];
	token_hint(hint, sizeof(hint));
	if (hint[0])
		printf("%s\n", hint);

	tool_json_open(NULL, '{');
	tool_json_text("tool", "publish");
	tool_json_text("run", label);
	tool_json_text("server", server ? addr.text : "own herald");
	tool_json_bool("idempotency_keys", idem_keys);
	tool_json_text("endpoint", mercure ? "mercure" : "events");
	tool_json_bool("mercure_ids", mercure_ids);
	tool_json_int("n", N);
	tool_json_int("in_flight", C);
	tool_json_int("connections", K);
	tool_json_num("time_ms", elapsed * 1e3);
	tool_json_num("throughput_rps", tput);
	tool_json_num("p50_ms", p50 * 1e3);
	tool_json_num("p99_ms", p99 * 1e3);
	tool_json_int("ok", ok);
	tool_json_int("http_errors", http_err);
	tool_json_open("http_status", '{');
	for (int s = 0; s < 600; s++)
		if (status_count[s]) {
			char key[16];
			snprintf(key, sizeof(key), "%d", s);
			tool_json_int(key, status_count[s]);
		}
	tool_json_close();
	tool_json_int("network_errors", net_err);
	tool_json_open("network", '{');
	for (int k = 0; k < N_KINDS; k++)
		tool_json_int(NET_NAMES[k], net_kinds[k]);
	tool_json_close();
	if (rows >= 0) {
		tool_json_int("rows", rows);
	} else {
		tool_json_null("rows");
		tool_json_text("rows_unknown", rows_why);
	}
	tool_json_int("resent", resent);
	if (hint[0])
		tool_json_text("hint", hint);
	tool_json_bool("interrupted", stop_flag);
	tool_json_close();
	free(lat);
	free(body_tmpl);
	return (ok == N && !stop_flag) ? 0 : 1;
}
