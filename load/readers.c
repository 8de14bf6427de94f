/* readers.c: N stream readers on one epoll thread, so the client is never
 * the bottleneck, and the server measured from outside while they listen.
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
 * Reader state machine: CONNECTING (EPOLLOUT armed) -> HEAD (request sent,
 * collecting the header block) -> OPENING (status 200, waiting for the end of
 * the first frame) -> OPEN; any failure -> DEAD with its kind counted. The
 * byte stream is scanned line by line for "id: N" at line starts and blank
 * lines (frame ends); nothing else is parsed.
 *
 * TLS (--tls): after the connect, a HANDSHAKE state drives SSL_do_handshake
 * with epoll interest following WANT_READ/WANT_WRITE, in the same loop; then
 * reader I/O goes through conn_read()/conn_write() (SSL_read/SSL_write), so
 * the scanner never knows. The herald started here gets a tls: listener and
 * a fresh P-256 certificate (or --tls-cert/--tls-key); the publisher stays
 * plain. The CPU the server spends over the opens is reported, which with
 * TLS is mostly the handshakes. */
#include "proc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static const char USAGE[] =
	"usage: load/readers N [--server ADDR [--pid PID] (--db PATH | --publish URL)] [--backlog B] [--unix] [--post]\n"
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
	       "starts its own herald (build/herald or $HERALD_BIN) on a temporary database\n"
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
}

static int usage_error(const char *why)
{
	fprintf(stderr, "readers: %s\n%s", why, USAGE);
	return 2;
}

enum rstate { R_NEW, R_RETRY, R_CONNECTING, R_HANDSHAKE, R_HEAD, R_OPENING, R_OPEN, R_DEAD };
enum chunk_state { CH_SIZE, CH_SIZE_LINE, CH_DATA, CH_DATA_END, CH_DONE };
enum err_kind { E_REFUSED, E_RESET, E_TIMEOUT, E_NON200, E_CLOSED, E_OTHER, E_KINDS };
static const char *const ERR_NAMES[E_KINDS] = {"refused", "reset", "timeout", "non200", "closed", "other"};

#define PART_MAX 28
#define PEND_MAX 4
#define HEAD_MAX 16384

struct reader {
	int fd;
	uint8_t state;
	uint8_t chunked;
	uint8_t cstate;
	uint8_t midline; /* inside a line whose start is in part[] */
	uint8_t partlen;
	uint8_t npend;
	char part[PART_MAX];
	uint32_t chunk_left;
	uint32_t headlen;
	char *head; /* header bytes so far, when they came in pieces */
	SSL *ssl;   /* with --tls */
	int64_t t_start, t_open;
	/* ids seen before the publisher knew them (POST answers can come after
	 * the event itself); resolved when the id becomes known. */
	int64_t pend_id[PEND_MAX];
	int64_t pend_t[PEND_MAX];
};

struct options {
	long n;
	const char *server;
	long pid;
	const char *db;
	const char *publish;
	long backlog;
	int unix_listener, post, no_floor, keep;
	long events;
	double interval, idle, open_timeout, event_timeout;
	long ramp, sources;
	const char *path, *token, *csv, *run;
	int tls, insecure;
	const char *cacert, *tls_cert, *tls_key;
};

static struct options opt = {
	.n = -1, .events = 10, .interval = 0.5, .idle = 20, .open_timeout = 300, .event_timeout = 10, .run = "1",
};

static volatile int stop_flag;
static int ep = -1;
static struct reader *R;
static long N;
static struct tool_addr target;
static char request[2048];
static size_t request_len;
static char rbuf[65536];
static SSL_CTX *tls_ctx;
static char tls_first_error[200]; /* the first handshake or record error */

/* Counters. */
static long n_settled, n_open, n_opened, n_inflight;
static long errs[E_KINDS], closed_after_open[E_KINDS];
static int first_other_errno;
static long non200[600]; /* by status; [0] for an unparsable status line */
static long next_connect, n_retry;
static int64_t t_open_begin, t_last_open;

/* Events. */
static long K;
static int64_t *recv_ns;  /* N*K: when reader i had event k, 0 = not (yet) */
static int64_t *ev_id;    /* K: the id the publisher got, 0 = not known yet */
static int64_t *ev_t0;    /* K: just before the insert or the POST */
static int64_t *ev_t1;    /* K: the insert returned, or the POST's answer came */
static long *ev_got;      /* K: readers that had it */
static int *ev_failed;    /* K: the publish itself failed */
static long n_published;  /* publishes started */
static int64_t max_known_id;

/* ---- reader I/O (plain sockets, or TLS) ------------------------------------ */

static void tls_note_error(const char *what)
{
	unsigned long e = ERR_peek_last_error();
	if (!tls_first_error[0]) {
		char buf[160];
		if (e)
			ERR_error_string_n(e, buf, sizeof(buf));
		else
			snprintf(buf, sizeof(buf), "%s", errno ? strerror(errno) : "connection closed");
		snprintf(tls_first_error, sizeof(tls_first_error), "%s: %s", what, buf);
	}
	ERR_clear_error();
}

/* SSL_read/SSL_write results as read(2)/write(2) would give them: -1 with
 * errno EAGAIN when OpenSSL waits for the socket, 0 at the end. */
static ssize_t tls_result(struct reader *r, int n, const char *what)
{
	if (n > 0)
		return n;
	int saved = errno;
	switch (SSL_get_error(r->ssl, n)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		errno = saved;
		tls_note_error(what);
		errno = saved ? saved : ECONNRESET;
		return -1;
	default:
		tls_note_error(what);
		errno = EPROTO;
		return -1;
	}
}

static ssize_t conn_read(struct reader *r, void *buf, size_t len)
{
	if (!r->ssl)
		return read(r->fd, buf, len);
	ERR_clear_error();
	return tls_result(r, SSL_read(r->ssl, buf, (int)len), "read");
}

static ssize_t conn_write(struct reader *r, const void *buf, size_t len)
{
	if (!r->ssl)
		return write(r->fd, buf, len);
	ERR_clear_error();
	return tls_result(r, SSL_write(r->ssl, buf, (int)len), "write");
}

/* ---- opening and failing readers ----------------------------------------- */

static enum err_kind kind_of(int err)
{
	switch (err) {
	case ECONNREFUSED:
		return E_REFUSED;
	case ECONNRESET:
	case EPIPE:
	case ECONNABORTED:
		return E_RESET;
	case ETIMEDOUT:
		return E_TIMEOUT;
	case 0:
		return E_CLOSED;
	default:
		if (!first_other_errno)
			first_other_errno = err;
		return E_OTHER;
	}
}

static void reader_close(struct reader *r)
{
	if (r->fd >= 0) {
		close(r->fd); /* closing removes it from epoll */
		r->fd = -1;
	}
	free(r->head);
	r->head = NULL;
	SSL_free(r->ssl);
	r->ssl = NULL;
}

/* Fail reader r with kind k; an open reader counts as closed after open. */
static void reader_fail(struct reader *r, enum err_kind k)
{
	if (r->state == R_DEAD)
		return;
	if (r->state == R_OPEN) {
		closed_after_open[k]++;
		n_open--;
	} else {
		errs[k]++;
		n_settled++;
		if (r->state >= R_CONNECTING)
			n_inflight--;
	}
	r->state = R_DEAD;
	reader_close(r);
}

static void reader_connect(long i)
{
	struct reader *r = &R[i];
	if (r->state == R_NEW) {
		r->t_start = tool_now_ns();
		n_inflight++;
	}
	r->state = R_CONNECTING;
	r->fd = socket(target.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (r->fd < 0) {
		reader_fail(r, kind_of(errno));
		return;
	}
	if (opt.sources > 1 && target.family == AF_INET) {
		/* Spread over 127.0.0.x; the port is picked at connect time so that
		 * each source address has its own ephemeral range. */
		int one = 1;
		setsockopt(r->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		struct sockaddr_in src = {.sin_family = AF_INET};
		src.sin_addr.s_addr = htonl(0x7f000001u + (uint32_t)(i % opt.sources));
		if (bind(r->fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
			reader_fail(r, kind_of(errno));
			return;
		}
	}
	int rc = connect(r->fd, (struct sockaddr *)&target.sa, target.len);
	if (rc != 0 && errno == EAGAIN && target.family == AF_UNIX) {
		/* A full unix listener queue refuses instead of queueing us:
		 * back off and try again, as a blocking client would wait. */
		close(r->fd);
		r->fd = -1;
		r->state = R_RETRY;
		n_retry++;
		return;
	}
	if (rc != 0 && errno != EINPROGRESS) {
		reader_fail(r, kind_of(errno));
		return;
	}
	struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)i};
	if (epoll_ctl(ep, EPOLL_CTL_ADD, r->fd, &ev) != 0)
		reader_fail(r, kind_of(errno));
}

static void send_request(long i);

/* Drive the TLS handshake; epoll interest follows what it waits for. */
static void on_handshake(long i)
{
	struct reader *r = &R[i];
	ERR_clear_error();
	int rc = SSL_do_handshake(r->ssl);
	if (rc == 1) {
		send_request(i);
		return;
	}
	int saved = errno;
	int e = SSL_get_error(r->ssl, rc);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		struct epoll_event ev = {.events = e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT, .data.u64 = (uint64_t)i};
		if (epoll_ctl(ep, EPOLL_CTL_MOD, r->fd, &ev) != 0)
			reader_fail(r, kind_of(errno));
		return;
	}
	errno = saved;
	tls_note_error("handshake");
	reader_fail(r, e == SSL_ERROR_SYSCALL ? kind_of(saved ? saved : ECONNRESET) : E_OTHER);
}

static void on_writable(long i)
{
	struct reader *r = &R[i];
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	if (getsockopt(r->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
		soerr = errno;
	if (soerr) {
		reader_fail(r, kind_of(soerr));
		return;
	}
	if (tls_ctx && !r->ssl) {
		r->ssl = SSL_new(tls_ctx);
		if (!r->ssl || SSL_set_fd(r->ssl, r->fd) != 1) {
			tls_note_error("SSL_new");
			reader_fail(r, E_OTHER);
			return;
		}
		SSL_set_connect_state(r->ssl);
		r->state = R_HANDSHAKE;
		on_handshake(i);
		return;
	}
	send_request(i);
}

/* Send the stream request and wait for the head. */
static void send_request(long i)
{
	struct reader *r = &R[i];
	ssize_t w = conn_write(r, request, request_len);
	if (w != (ssize_t)request_len) {
		reader_fail(r, w < 0 ? kind_of(errno) : E_OTHER);
		return;
	}
	r->state = R_HEAD;
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
	if (epoll_ctl(ep, EPOLL_CTL_MOD, r->fd, &ev) != 0)
		reader_fail(r, kind_of(errno));
}

/* ---- events: matching ids to publishes ------------------------------------ */

static long event_of(int64_t id)
{
	for (long k = 0; k < n_published; k++)
		if (ev_id[k] == id)
			return k;
	return -1;
}

static void got_event(long i, long k, int64_t t)
{
	int64_t *slot = &recv_ns[(size_t)i * (size_t)K + (size_t)k];
	if (*slot)
		return;
	*slot = t;
	ev_got[k]++;
}

static void saw_id(long i, int64_t id, int64_t t)
{
	long k = event_of(id);
	if (k >= 0) {
		got_event(i, k, t);
		return;
	}
	if (id <= max_known_id || n_published == 0)
		return; /* someone else's event */
	struct reader *r = &R[i];
	if (r->npend == PEND_MAX) {
		memmove(r->pend_id, r->pend_id + 1, (PEND_MAX - 1) * sizeof(r->pend_id[0]));
		memmove(r->pend_t, r->pend_t + 1, (PEND_MAX - 1) * sizeof(r->pend_t[0]));
		r->npend--;
	}
	r->pend_id[r->npend] = id;
	r->pend_t[r->npend] = t;
	r->npend++;
}

/* The publisher learned event k's id: credit readers that were faster. */
static void id_known(long k, int64_t id)
{
	ev_id[k] = id;
	if (id > max_known_id)
		max_known_id = id;
	for (long i = 0; i < N; i++) {
		struct reader *r = &R[i];
		for (int j = 0; j < r->npend; j++) {
			if (r->pend_id[j] != id)
				continue;
			got_event(i, k, r->pend_t[j]);
			r->npend--;
			memmove(r->pend_id + j, r->pend_id + j + 1, (size_t)(r->npend - j) * sizeof(r->pend_id[0]));
			memmove(r->pend_t + j, r->pend_t + j + 1, (size_t)(r->npend - j) * sizeof(r->pend_t[0]));
			break;
		}
	}
}

/* ---- the stream scanner -------------------------------------------------- */

static void line_done(long i, const char *line, size_t len, int64_t now)
{
	struct reader *r = &R[i];
	if (len && line[len - 1] == '\r')
		len--;
	if (len == 0) {
		if (r->state == R_OPENING) {
			r->state = R_OPEN;
			r->t_open = now;
			t_last_open = now;
			n_open++;
			n_opened++;
			n_settled++;
			n_inflight--;
		}
		return;
	}
	if (line[0] != 'i' || len < 4 || line[1] != 'd' || line[2] != ':')
		return;
	size_t p = 3;
	if (p < len && line[p] == ' ')
		p++;
	int64_t id = 0;
	size_t digits = 0;
	for (; p < len && isdigit((unsigned char)line[p]) && digits < 19; p++, digits++)
		id = id * 10 + (line[p] - '0');
	if (digits)
		saw_id(i, id, now);
}

/* Split stream bytes into lines; a line's start that is cut by the end of a
 * read is kept in part[] (only its first bytes matter). */
static void scan(long i, const char *p, size_t len, int64_t now)
{
	struct reader *r = &R[i];
	const char *end = p + len;
	while (p < end && r->state != R_DEAD) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t take = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (r->midline || !nl) {
			size_t room = PART_MAX - r->partlen;
			size_t c = take < room ? take : room;
			memcpy(r->part + r->partlen, p, c);
			r->partlen = (uint8_t)(r->partlen + c);
			if (!nl) {
				r->midline = 1;
				return;
			}
			line_done(i, r->part, r->partlen, now);
			r->midline = 0;
			r->partlen = 0;
		} else {
			line_done(i, p, take, now);
		}
		p = nl + 1;
	}
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Feed the body bytes after the header block, undoing chunked encoding when
 * the server used it. */
static void feed(long i, const char *p, size_t len, int64_t now)
{
	struct reader *r = &R[i];
	if (!r->chunked) {
		scan(i, p, len, now);
		return;
	}
	while (len > 0 && r->state != R_DEAD) {
		switch (r->cstate) {
		case CH_SIZE: {
			int v = hexval(*p);
			if (v >= 0) {
				r->chunk_left = r->chunk_left * 16 + (uint32_t)v;
			} else if (*p == '\n') {
				r->cstate = r->chunk_left ? CH_DATA : CH_DONE;
			} else {
				r->cstate = CH_SIZE_LINE;
			}
			p++;
			len--;
			break;
		}
		case CH_SIZE_LINE:
			if (*p == '\n')
				r->cstate = r->chunk_left ? CH_DATA : CH_DONE;
			p++;
			len--;
			break;
		case CH_DATA: {
			size_t take = len < r->chunk_left ? len : r->chunk_left;
			scan(i, p, take, now);
			p += take;
			len -= take;
			r->chunk_left -= (uint32_t)take;
			if (r->chunk_left == 0)
				r->cstate = CH_DATA_END;
			break;
		}
		case CH_DATA_END:
			if (*p == '\n') {
				r->cstate = CH_SIZE;
				r->chunk_left = 0;
			}
			p++;
			len--;
			break;
		default:
			return;
		}
	}
}

/* Parse a complete header block; returns 0 when the stream may go on. */
static int head_done(long i, const char *h, size_t len)
{
	struct reader *r = &R[i];
	int status = 0;
	if (len > 12 && memcmp(h, "HTTP/1.", 7) == 0 && h[8] == ' ' && isdigit((unsigned char)h[9]) &&
	    isdigit((unsigned char)h[10]) && isdigit((unsigned char)h[11]))
		status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
	if (status != 200) {
		non200[status > 0 && status < 600 ? status : 0]++;
		reader_fail(r, E_NON200);
		return -1;
	}
	/* Transfer-Encoding: chunked, case-insensitively. */
	for (const char *p = h; p && p < h + len;) {
		const char *nl = memchr(p, '\n', (size_t)(h + len - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(h + len - p);
		if (ll > 18 && strncasecmp(p, "transfer-encoding:", 18) == 0) {
			for (size_t j = 18; j + 7 <= ll; j++)
				if (strncasecmp(p + j, "chunked", 7) == 0)
					r->chunked = 1;
		}
		p = nl ? nl + 1 : NULL;
	}
	r->state = R_OPENING;
	return 0;
}

static const char *find_head_end(const char *p, size_t len)
{
	for (size_t j = 0; j + 3 < len; j++) {
		const char *c = memchr(p + j, '\r', len - j);
		if (!c)
			return NULL;
		j = (size_t)(c - p);
		if (j + 3 < len && c[1] == '\n' && c[2] == '\r' && c[3] == '\n')
			return c + 4;
	}
	return NULL;
}

static void read_once(long i);

/* Read what is there; with TLS, also what OpenSSL has decrypted already,
 * which epoll cannot report. */
static void on_readable(long i)
{
	struct reader *r = &R[i];
	do
		read_once(i);
	while (r->state != R_DEAD && r->ssl && SSL_pending(r->ssl) > 0);
}

static void read_once(long i)
{
	struct reader *r = &R[i];
	ssize_t got = conn_read(r, rbuf, sizeof(rbuf));
	if (got <= 0) {
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		reader_fail(r, got == 0 ? E_CLOSED : kind_of(errno));
		return;
	}
	int64_t now = tool_now_ns();
	const char *p = rbuf;
	size_t len = (size_t)got;
	if (r->state == R_HEAD) {
		if (!r->head) {
			const char *e = find_head_end(p, len);
			if (e) {
				/* The usual case: the whole head in one read, no copy. */
				if (head_done(i, p, (size_t)(e - p)) != 0)
					return;
				len -= (size_t)(e - p);
				p = e;
			} else {
				r->head = xmalloc(HEAD_MAX);
				r->headlen = 0;
			}
		}
		if (r->head) {
			size_t room = HEAD_MAX - r->headlen;
			if (len > room) {
				reader_fail(r, E_OTHER);
				return;
			}
			memcpy(r->head + r->headlen, p, len);
			size_t old = r->headlen;
			r->headlen += (uint32_t)len;
			size_t from = old > 3 ? old - 3 : 0;
			const char *e = find_head_end(r->head + from, r->headlen - from);
			if (!e)
				return;
			size_t hl = (size_t)(e - r->head);
			if (head_done(i, r->head, hl) != 0)
				return;
			/* Body bytes that followed the head in this read. */
			size_t body_from_here = r->headlen - hl;
			p = rbuf + (size_t)got - body_from_here;
			len = body_from_here;
			free(r->head);
			r->head = NULL;
		}
	}
	if (len)
		feed(i, p, len, now);
}

/* ---- publishing ---------------------------------------------------------- */

static sqlite3 *db;
static sqlite3_stmt *ins;
static char run_tag[32];

/* HTTP publisher: one keep-alive connection, answers read in the loop. */
static struct tool_addr pub_addr;
static int pub_fd = -1;
static char pub_in[8192];
static size_t pub_in_len;
static long pub_waiting[64]; /* event indexes awaiting an answer, in order */
static int pub_nwait;

static int db_open(const char *path)
{
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "readers: cannot open %s: %s\n", path, db ? sqlite3_errmsg(db) : "?");
		return -1;
	}
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, "INSERT INTO events(type, topic, data, public) VALUES ('load', 'load', ?1, 1)",
			       -1, &ins, NULL) != SQLITE_OK) {
		fprintf(stderr, "readers: %s has no usable events table: %s\n", path, sqlite3_errmsg(db));
		return -1;
	}
	return 0;
}

static void db_close(void)
{
	sqlite3_finalize(ins);
	sqlite3_close(db);
	ins = NULL;
	db = NULL;
}

static int pub_connect(void)
{
	pub_fd = socket(pub_addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pub_fd < 0)
		return -1;
	struct timeval tv = {.tv_sec = 5};
	setsockopt(pub_fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(pub_fd, (struct sockaddr *)&pub_addr.sa, pub_addr.len) != 0) {
		fprintf(stderr, "readers: cannot connect to %s to publish: %s\n", pub_addr.text, strerror(errno));
		close(pub_fd);
		pub_fd = -1;
		return -1;
	}
	pub_in_len = 0;
	pub_nwait = 0;
	struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UINT64_MAX};
	epoll_ctl(ep, EPOLL_CTL_ADD, pub_fd, &ev);
	return 0;
}

static void pub_drop(void)
{
	if (pub_fd >= 0)
		close(pub_fd);
	pub_fd = -1;
	for (int j = 0; j < pub_nwait; j++) {
		ev_failed[pub_waiting[j]] = 1;
		fprintf(stderr, "readers: publish of event %ld got no answer (connection closed)\n", pub_waiting[j] + 1);
	}
	pub_nwait = 0;
}

/* Publish event k; ev_t0[k] is taken just before the insert or the send. */
static void publish(long k)
{
	char data[128];
	snprintf(data, sizeof(data), "readers seq=%ld run=%s", k + 1, run_tag);
	n_published = k + 1;
	if (db) {
		sqlite3_bind_text(ins, 1, data, -1, SQLITE_TRANSIENT);
		ev_t0[k] = tool_now_ns();
		int rc = sqlite3_step(ins);
		ev_t1[k] = tool_now_ns();
		sqlite3_reset(ins);
		if (rc != SQLITE_DONE) {
			fprintf(stderr, "readers: insert of event %ld failed: %s\n", k + 1, sqlite3_errmsg(db));
			ev_failed[k] = 1;
			return;
		}
		id_known(k, sqlite3_last_insert_rowid(db));
		return;
	}
	char body[256], req[1024];
	int bl = snprintf(body, sizeof(body), "{\"type\":\"load\",\"topic\":\"load\",\"data\":\"%s\",\"public\":true}",
			  data);
	char auth[300] = "";
	if (opt.token)
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s\r\n", opt.token);
	int rl = snprintf(req, sizeof(req),
			  "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
			  "Content-Length: %d\r\n%s\r\n%s",
			  pub_addr.path[0] ? pub_addr.path : "/api/events",
			  pub_addr.family == AF_UNIX ? "localhost" : pub_addr.text, bl, auth, body);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (pub_fd < 0 && pub_connect() != 0)
			break;
		ev_t0[k] = tool_now_ns();
		if (write(pub_fd, req, (size_t)rl) == rl) {
			if (pub_nwait < (int)(sizeof(pub_waiting) / sizeof(pub_waiting[0])))
				pub_waiting[pub_nwait++] = k;
			return;
		}
		pub_drop(); /* the server closed the idle keep-alive: reconnect once */
	}
	fprintf(stderr, "readers: POST of event %ld failed\n", k + 1);
	ev_failed[k] = 1;
}

/* Read POST answers: "HTTP/1.1 201 ...", Content-Length, {"id":N}. */
static void pub_readable(void)
{
	ssize_t got = read(pub_fd, pub_in + pub_in_len, sizeof(pub_in) - 1 - pub_in_len);
	if (got <= 0) {
		if (got < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		pub_drop();
		return;
	}
	pub_in_len += (size_t)got;
	pub_in[pub_in_len] = '\0';
	for (;;) {
		char *e = strstr(pub_in, "\r\n\r\n");
		if (!e)
			break;
		size_t hl = (size_t)(e + 4 - pub_in);
		long clen = 0;
		for (char *p = pub_in; p && p < e; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
			if (strncasecmp(p, "content-length:", 15) == 0)
				clen = strtol(p + 15, NULL, 10);
		if (clen < 0 || hl + (size_t)clen > sizeof(pub_in) - 1) {
			pub_drop();
			return;
		}
		if (pub_in_len < hl + (size_t)clen)
			break;
		int status = atoi(pub_in + 9);
		char saved = pub_in[hl + (size_t)clen];
		pub_in[hl + (size_t)clen] = '\0';
		double idv = 0;
		long k = pub_nwait > 0 ? pub_waiting[0] : -1;
		if (pub_nwait > 0)
			memmove(pub_waiting, pub_waiting + 1, (size_t)--pub_nwait * sizeof(pub_waiting[0]));
		if (k >= 0) {
			ev_t1[k] = tool_now_ns();
			if (status == 201 && tool_json_number(pub_in + hl, "id", &idv) == 0 && idv > 0) {
				id_known(k, (int64_t)idv);
			} else {
				ev_failed[k] = 1;
				fprintf(stderr, "readers: POST of event %ld answered %d: %.200s\n", k + 1, status,
					pub_in + hl);
			}
		}
		pub_in[hl + (size_t)clen] = saved;
		size_t used = hl + (size_t)clen;
		memmove(pub_in, pub_in + used, pub_in_len - used + 1);
		pub_in_len -= used;
	}
	if (pub_in_len >= sizeof(pub_in) - 1)
		pub_drop();
}

/* ---- the loop ------------------------------------------------------------ */

static struct epoll_event evbuf[4096];

/* One pass: wait up to timeout_ms and handle what is ready. */
static void loop_once(int timeout_ms)
{
	int k = epoll_wait(ep, evbuf, (int)(sizeof(evbuf) / sizeof(evbuf[0])), timeout_ms);
	for (int j = 0; j < k; j++) {
		uint64_t tag = evbuf[j].data.u64;
		if (tag == UINT64_MAX) {
			if (pub_fd >= 0)
				pub_readable();
			continue;
		}
		long i = (long)tag;
		struct reader *r = &R[i];
		if (r->state == R_DEAD)
			continue;
		if (r->state == R_CONNECTING)
			on_writable(i);
		else if (r->state == R_HANDSHAKE)
			on_handshake(i);
		else
			on_readable(i);
	}
}

/* ---- sampling the server -------------------------------------------------- */

static pid_t server_pid;

struct cpu_mark {
	uint64_t ticks;
	double t;
	double self; /* this client's own CPU seconds, to show it kept up */
	int ok;
};

static struct cpu_mark cpu_mark(void)
{
	struct cpu_mark m = {.t = tool_now_s()};
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	m.self = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
	if (server_pid > 0)
		m.ok = proc_cpu_ticks(server_pid, 1, &m.ticks) == 0;
	return m;
}

/* Percent of one core between two marks; NAN when unknown. */
static double cpu_pct(struct cpu_mark a, struct cpu_mark b)
{
	if (!a.ok || !b.ok || b.t <= a.t)
		return NAN;
	return (double)(b.ticks - a.ticks) / (double)proc_clk_tck() / (b.t - a.t) * 100.0;
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
		struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
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

/* ---- main ------------------------------------------------------------------ */

static int parse_args(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED(what)                                                                                                     \
	do {                                                                                                           \
		if (!v)                                                                                                \
			return usage_error(what);                                                        \
		i++;                                                                                                   \
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
				return usage_error("--pid needs a process id");
		} else if (strcmp(a, "--db") == 0) {
			NEED("--db needs a path");
			opt.db = v;
		} else if (strcmp(a, "--publish") == 0) {
			NEED("--publish needs a URL");
			opt.publish = v;
		} else if (strcmp(a, "--backlog") == 0) {
			NEED("--backlog needs a number");
			if (tool_parse_long(v, 1, 1L << 20, &opt.backlog) != 0)
				return usage_error("--backlog needs a number 1-1048576");
		} else if (strcmp(a, "--events") == 0) {
			NEED("--events needs a number");
			if (tool_parse_long(v, 1, 10000, &opt.events) != 0)
				return usage_error("--events needs a number 1-10000");
		} else if (strcmp(a, "--interval") == 0) {
			NEED("--interval needs seconds");
			if (tool_parse_seconds(v, 0, 3600, &opt.interval) != 0)
				return usage_error("--interval needs seconds (0 to 3600)");
		} else if (strcmp(a, "--idle") == 0) {
			NEED("--idle needs seconds");
			if (tool_parse_seconds(v, 0, 86400, &opt.idle) != 0)
				return usage_error("--idle needs seconds (0 to 86400)");
		} else if (strcmp(a, "--open-timeout") == 0) {
			NEED("--open-timeout needs seconds");
			if (tool_parse_seconds(v, 0.01, 86400, &opt.open_timeout) != 0)
				return usage_error("--open-timeout needs seconds");
		} else if (strcmp(a, "--event-timeout") == 0) {
			NEED("--event-timeout needs seconds");
			if (tool_parse_seconds(v, 0.01, 3600, &opt.event_timeout) != 0)
				return usage_error("--event-timeout needs seconds");
		} else if (strcmp(a, "--ramp") == 0) {
			NEED("--ramp needs a number");
			if (tool_parse_long(v, 0, 1000000, &opt.ramp) != 0)
				return usage_error("--ramp needs a number (0 = no cap)");
		} else if (strcmp(a, "--sources") == 0) {
			NEED("--sources needs a number");
			if (tool_parse_long(v, 1, 254, &opt.sources) != 0)
				return usage_error("--sources needs a number 1-254");
		} else if (strcmp(a, "--path") == 0) {
			NEED("--path needs a request target");
			if (v[0] != '/' || strpbrk(v, " \r\n"))
				return usage_error("--path needs a target starting with /");
			opt.path = v;
		} else if (strcmp(a, "--token") == 0) {
			NEED("--token needs a value");
			if (strpbrk(v, "\r\n"))
				return usage_error("--token may not hold line breaks");
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
				return usage_error("N must be a number from 1 to 1000000");
		} else {
			char why[300];
			snprintf(why, sizeof(why), "unknown argument '%s'", a);
			return usage_error(why);
		}
#undef NEED
	}
	if (opt.n < 0)
		return usage_error("say how many readers (N)");
	if (opt.n * opt.events > 50000000)
		return usage_error("N times --events may be at most 50,000,000 (a latency is kept for each)");
	if (opt.server) {
		if (tool_parse_addr(opt.server, &target) != 0)
			return usage_error("--server wants 127.0.0.1:PORT, [::1]:PORT, unix:/path or http://HOST:PORT/path");
		if (!opt.db && !opt.publish)
			return usage_error("with --server, say how to publish: --db PATH or --publish URL");
		if (opt.unix_listener || opt.post)
			return usage_error("--unix and --post are for the herald started here (no --server)");
	} else if (opt.pid || opt.db || opt.publish) {
		return usage_error("--pid, --db and --publish go with --server");
	}
	if (opt.db && opt.publish)
		return usage_error("--db and --publish exclude each other");
	if (!opt.tls && (opt.insecure || opt.cacert || opt.tls_cert || opt.tls_key))
		return usage_error("--insecure, --cacert, --tls-cert and --tls-key go with --tls");
	if (opt.tls && opt.unix_listener)
		return usage_error("--tls is over TCP; leave out --unix");
	if (opt.insecure && opt.cacert)
		return usage_error("--insecure and --cacert exclude each other");
	if (!opt.tls_cert != !opt.tls_key)
		return usage_error("--tls-cert and --tls-key go together");
	if (opt.server && opt.tls_cert)
		return usage_error("--tls-cert and --tls-key are for the herald started here (no --server)");
	if (opt.publish && tool_parse_addr(opt.publish, &pub_addr) != 0)
		return usage_error("--publish wants http://127.0.0.1:PORT/api/events or unix:/path");
	return -1;
}

static double ms(int64_t ns)
{
	return (double)ns / 1e6;
}

/* What a run measured, gathered by the phases and printed by report(). */
struct run {
	int backlog, backlog_effective;
	int threads_before, threads_open, threads_max;
	long rss_before, rss_open;
	long long ovf0, ovf1, drop0, drop1;
	double open_s;
	long open_errors, still_open;
	struct cpu_mark open_a, open_b, ev_a, ev_b, idle_a, idle_b;
	int herald_exit;
	double floor_s;
};

static void sample_threads(struct run *m)
{
	if (!server_pid)
		return;
	int t = proc_threads(server_pid, 1);
	if (t > m->threads_max)
		m->threads_max = t;
}

/* ---- TLS set-up ------------------------------------------------------------ */

static char tls_dir[300];              /* our certificate's folder, "" when none */
static char tls_cert_path[400], tls_key_path[400];

/* Write a fresh self-signed P-256 certificate for 127.0.0.1 (valid a day)
 * and its key into a temporary folder. Returns 0, or -1 after saying why. */
static int make_cert(void)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(tls_dir, sizeof(tls_dir), "%s/readers-tls-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(tls_dir)) {
		fprintf(stderr, "readers: mkdtemp %s: %s\n", tls_dir, strerror(errno));
		tls_dir[0] = '\0';
		return -1;
	}
	snprintf(tls_cert_path, sizeof(tls_cert_path), "%s/cert.pem", tls_dir);
	snprintf(tls_key_path, sizeof(tls_key_path), "%s/key.pem", tls_dir);
	int ok = 0;
	EVP_PKEY *pk = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_EXTENSION *san = NULL;
	FILE *fc = NULL, *fk = NULL;
	if (!pk || !x)
		goto done;
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), (long)(time(NULL) & 0x7fffffff));
	X509_gmtime_adj(X509_getm_notBefore(x), -60);
	X509_gmtime_adj(X509_getm_notAfter(x), 86400);
	X509_set_pubkey(x, pk);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"herald-load", -1, -1, 0);
	X509_set_issuer_name(x, name);
	X509V3_CTX v3;
	X509V3_set_ctx_nodb(&v3);
	X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
	san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
	if (!san || X509_add_ext(x, san, -1) != 1 || X509_sign(x, pk, EVP_sha256()) <= 0)
		goto done;
	fc = fopen(tls_cert_path, "w");
	fk = fopen(tls_key_path, "w");
	ok = fc && fk && PEM_write_X509(fc, x) == 1 && PEM_write_PrivateKey(fk, pk, NULL, NULL, 0, NULL, NULL) == 1;
done:
	if (fc && fclose(fc) != 0)
		ok = 0;
	if (fk && fclose(fk) != 0)
		ok = 0;
	X509_EXTENSION_free(san);
	X509_free(x);
	EVP_PKEY_free(pk);
	if (!ok) {
		tls_note_error("making a certificate");
		fprintf(stderr, "readers: cannot make a certificate in %s: %s\n", tls_dir, tls_first_error);
		return -1;
	}
	return 0;
}

static void remove_cert(void)
{
	if (!tls_dir[0] || opt.keep)
		return;
	unlink(tls_cert_path);
	unlink(tls_key_path);
	rmdir(tls_dir);
}

/* The port of the started herald's tls: listener, from its log; 0 if none. */
static int tls_port_from_log(const char *log)
{
	FILE *f = fopen(log, "r");
	char line[512];
	int port = 0;
	while (f && !port && fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "listening on tls 127.0.0.1:");
		if (p)
			port = atoi(p + strlen("listening on tls 127.0.0.1:"));
	}
	if (f)
		fclose(f);
	return port;
}

/* The client context: TLS 1.2 or later, ALPN http/1.1, and unless
 * --insecure the server's certificate checked against trust (a PEM file, or
 * the system's CAs when NULL) and the target's address. */
static int tls_client_setup(const char *trust)
{
	tls_ctx = SSL_CTX_new(TLS_client_method());
	if (!tls_ctx) {
		tls_note_error("SSL_CTX_new");
		fprintf(stderr, "readers: %s\n", tls_first_error);
		return -1;
	}
	SSL_CTX_set_min_proto_version(tls_ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(tls_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(tls_ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_cache_mode(tls_ctx, SSL_SESS_CACHE_OFF); /* every reader a full handshake */
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX_set_alpn_protos(tls_ctx, alpn, sizeof(alpn) - 1);
	if (opt.insecure) {
		SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
		return 0;
	}
	SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_PEER, NULL);
	int ok = trust ? SSL_CTX_load_verify_locations(tls_ctx, trust, NULL) : SSL_CTX_set_default_verify_paths(tls_ctx);
	if (ok != 1) {
		tls_note_error(trust ? trust : "the system's CAs");
		fprintf(stderr, "readers: cannot load %s\n", tls_first_error);
		return -1;
	}
	char host[INET6_ADDRSTRLEN] = "";
	if (target.family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&target.sa)->sin_addr, host, sizeof(host));
	else if (target.family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&target.sa)->sin6_addr, host, sizeof(host));
	if (host[0] && X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(tls_ctx), host) != 1) {
		fprintf(stderr, "readers: cannot check the certificate against %s\n", host);
		return -1;
	}
	return 0;
}

/* Name the target and publisher: start a herald, or use --server. Returns 0,
 * or the exit status after saying why. */
static int setup(struct tool_herald *h, struct run *m)
{
	m->backlog = -1;
	m->backlog_effective = -1;
	if (!opt.server) {
		const char *extra[8] = {NULL};
		if (opt.tls) {
			if (opt.tls_cert) {
				snprintf(tls_cert_path, sizeof(tls_cert_path), "%s", opt.tls_cert);
				snprintf(tls_key_path, sizeof(tls_key_path), "%s", opt.tls_key);
			} else if (make_cert() != 0) {
				return 1;
			}
			const char *tls_args[] = {"--listen", "tls:127.0.0.1:0", "--tls-cert", tls_cert_path, "--tls-key",
						  tls_key_path, NULL};
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
			(int)h->pid, h->port, opt.tls ? ", tls on " : "", opt.tls ? target.text : "", h->backlog, h->db);
	} else {
		server_pid = (pid_t)opt.pid;
		if (opt.backlog > 0)
			m->backlog = (int)opt.backlog;
	}
	if (target.family != AF_UNIX) {
		/* The accept queue's maximum is the backlog that took effect. */
		struct proc_listener *ls = NULL;
		int nl = proc_listeners(&ls);
		for (int i = 0; i < nl; i++)
			if (ls[i].port == target.port)
				m->backlog_effective = (int)ls[i].max;
		free(ls);
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

/* Figures of one event over the readers that had it. */
struct ev_fig {
	double min, p50, p99, max;
	long missing;
	int failed;
};

static void write_csv(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "readers: cannot write %s: %s\n", path, strerror(errno));
		return;
	}
	fprintf(f, "reader,event,id,latency_ms\n");
	for (long i = 0; i < N; i++) {
		if (!R[i].t_open)
			continue;
		for (long k = 0; k < K; k++) {
			int64_t t = recv_ns[(size_t)i * (size_t)K + (size_t)k];
			if (t)
				fprintf(f, "%ld,%ld,%lld,%.3f\n", i, k + 1, (long long)ev_id[k], ms(t - ev_t0[k]));
			else
				fprintf(f, "%ld,%ld,%lld,\n", i, k + 1, (long long)ev_id[k]);
		}
	}
	fclose(f);
}

/* Print the table, the per-event table, the notes and the JSON line (and the
 * CSV); returns the exit status. */
static int report(const struct run *m)
{
	struct ev_fig *ev = xcalloc((size_t)K, sizeof(*ev));
	double *lat = xmalloc((size_t)N * sizeof(double));
	double *to_all = xmalloc((size_t)K * sizeof(double));
	long missing_total = 0, failed_events = 0;
	size_t n_all = 0;
	for (long k = 0; k < K; k++) {
		size_t got = 0;
		for (long i = 0; i < N; i++) {
			int64_t t = recv_ns[(size_t)i * (size_t)K + (size_t)k];
			if (t)
				lat[got++] = (double)(t - ev_t0[k]) / 1e9;
		}
		tool_sort_doubles(lat, got);
		ev[k].missing = n_opened - (long)got;
		ev[k].failed = k >= n_published || ev_failed[k];
		failed_events += ev[k].failed;
		missing_total += ev[k].missing;
		ev[k].min = got ? lat[0] : NAN;
		ev[k].p50 = tool_percentile(lat, got, 50);
		ev[k].p99 = tool_percentile(lat, got, 99);
		ev[k].max = got ? lat[got - 1] : NAN;
		if (got)
			to_all[n_all++] = ev[k].max;
	}
	tool_sort_doubles(to_all, n_all);
	double all_min = n_all ? to_all[0] : NAN, all_max = n_all ? to_all[n_all - 1] : NAN;
	double all_p50 = tool_percentile(to_all, n_all, 50);
	double ratio = (!isnan(m->floor_s) && m->floor_s > 0) ? all_p50 / m->floor_s : NAN;

	size_t no = 0;
	for (long i = 0; i < N; i++)
		if (R[i].t_open)
			lat[no++] = (double)(R[i].t_open - R[i].t_start) / 1e9;
	tool_sort_doubles(lat, no);
	double open_p50 = tool_percentile(lat, no, 50), open_p99 = tool_percentile(lat, no, 99);

	double cpu_ev = cpu_pct(m->ev_a, m->ev_b), cpu_idle = cpu_pct(m->idle_a, m->idle_b);
	double client_cpu = m->ev_b.t > m->ev_a.t ? (m->ev_b.self - m->ev_a.self) / (m->ev_b.t - m->ev_a.t) * 100.0 : NAN;
	double cpu_open_ms = NAN, client_open_ms = m->open_b.t > m->open_a.t ? (m->open_b.self - m->open_a.self) * 1e3 : NAN;
	if (m->open_a.ok && m->open_b.ok)
		cpu_open_ms = (double)(m->open_b.ticks - m->open_a.ticks) / (double)proc_clk_tck() * 1e3;
	double cpu_per_event = NAN;
	if (m->ev_a.ok && m->ev_b.ok && m->ev_b.t > m->ev_a.t)
		cpu_per_event = (double)(m->ev_b.ticks - m->ev_a.ticks) / (double)proc_clk_tck() * 1e3 / (double)K;
	double rss_per_reader = (m->rss_open >= 0 && m->rss_before >= 0 && n_opened > 0)
					? (double)(m->rss_open - m->rss_before) / (double)n_opened
					: NAN;
	long long dovf = (m->ovf0 >= 0 && m->ovf1 >= 0) ? m->ovf1 - m->ovf0 : -1;
	long long ddrop = (m->drop0 >= 0 && m->drop1 >= 0) ? m->drop1 - m->drop0 : -1;
	long closed_total = 0;
	for (int k = 0; k < E_KINDS; k++)
		closed_total += closed_after_open[k];

	/* The table. */
	char cN[32], b1[32], b2[32], b3[32], b4[32];
	char c_backlog[48], c_open[64], c_thr[32], c_ev[96], c_cpu1[32], c_cpu2[32], c_rss[32], c_ratio[32];
	tool_fmt_count(N, cN, sizeof(cN));
	if (m->backlog > 0 && m->backlog_effective > 0 && m->backlog_effective != m->backlog)
		snprintf(c_backlog, sizeof(c_backlog), "%d (capped to %d)", m->backlog, m->backlog_effective);
	else if (m->backlog > 0)
		snprintf(c_backlog, sizeof(c_backlog), "%d", m->backlog);
	else
		snprintf(c_backlog, sizeof(c_backlog), "?");
	if (n_opened == N)
		snprintf(c_open, sizeof(c_open), "**%s**", tool_fmt_dur(m->open_s, b1, sizeof(b1)));
	else
		snprintf(c_open, sizeof(c_open), "**%s** (%ld of %ld)", tool_fmt_dur(m->open_s, b1, sizeof(b1)),
			 n_opened, N);
	if (m->threads_open < 0)
		snprintf(c_thr, sizeof(c_thr), "n/a");
	else if (m->threads_max != m->threads_open)
		snprintf(c_thr, sizeof(c_thr), "%d (max %d)", m->threads_open, m->threads_max);
	else
		snprintf(c_thr, sizeof(c_thr), "%d", m->threads_open);
	if (n_all == 0)
		snprintf(c_ev, sizeof(c_ev), "none arrived");
	else if (missing_total || failed_events)
		snprintf(c_ev, sizeof(c_ev), "%s – %s (%ld missing)", tool_fmt_dur(all_min, b2, sizeof(b2)),
			 tool_fmt_dur(all_max, b3, sizeof(b3)), missing_total);
	else
		snprintf(c_ev, sizeof(c_ev), "%s – %s", tool_fmt_dur(all_min, b2, sizeof(b2)),
			 tool_fmt_dur(all_max, b3, sizeof(b3)));
	strcpy(c_cpu1, "n/a");
	strcpy(c_cpu2, "n/a");
	strcpy(c_rss, "n/a");
	strcpy(c_ratio, "n/a");
	if (!isnan(cpu_ev))
		snprintf(c_cpu1, sizeof(c_cpu1), "%.1f %% of a core", cpu_ev);
	if (!isnan(cpu_idle))
		snprintf(c_cpu2, sizeof(c_cpu2), "%.2f %%", cpu_idle);
	if (!isnan(rss_per_reader))
		snprintf(c_rss, sizeof(c_rss), "%.1f KiB", rss_per_reader);
	if (!isnan(ratio))
		snprintf(c_ratio, sizeof(c_ratio), "%.1fx", ratio);
	printf("| run | listen backlog | opens (%s) | threads, all open | event to all %s | CPU while events flow | "
	       "CPU idle | RSS per reader | kernel floor | vs floor |\n",
	       cN, cN);
	printf("|---|---|---|---|---|---|---|---|---|---|\n");
	printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", opt.run, c_backlog, c_open, c_thr, c_ev, c_cpu1,
	       c_cpu2, c_rss, tool_fmt_dur(m->floor_s, b4, sizeof(b4)), c_ratio);

	printf("\nPer event, from just before the %s until each reader had it:\n\n", opt.publish ? "POST" : "insert");
	printf("| event | id | readers | missing | min | p50 | p99 | max (all %s) |\n|---|---|---|---|---|---|---|---|\n",
	       cN);
	for (long k = 0; k < K; k++) {
		char m1[32], m2[32], m3[32], m4[32];
		printf("| %ld | %lld | %ld | %ld%s | %s | %s | %s | %s |\n", k + 1, (long long)ev_id[k], ev_got[k],
		       ev[k].missing, ev[k].failed ? " (publish failed)" : "", tool_fmt_dur(ev[k].min, m1, sizeof(m1)),
		       tool_fmt_dur(ev[k].p50, m2, sizeof(m2)), tool_fmt_dur(ev[k].p99, m3, sizeof(m3)),
		       tool_fmt_dur(ev[k].max, m4, sizeof(m4)));
	}

	/* Notes: the error split beside the figures, always. */
	printf("\nOpens: %ld of %ld in %s (each: p50 %s, p99 %s). Errors: %ld refused, %ld reset, %ld timeout, "
	       "%ld non-200",
	       n_opened, N, tool_fmt_dur(m->open_s, b1, sizeof(b1)), tool_fmt_dur(open_p50, b2, sizeof(b2)),
	       tool_fmt_dur(open_p99, b3, sizeof(b3)), errs[E_REFUSED], errs[E_RESET], errs[E_TIMEOUT], errs[E_NON200]);
	if (errs[E_NON200]) {
		printf(" (");
		for (int s = 0, first = 1; s < 600; s++)
			if (non200[s]) {
				printf("%s%s%d: %ld", first ? "" : ", ", s ? "" : "unparsable ", s, non200[s]);
				first = 0;
			}
		printf(")");
	}
	printf(", %ld closed before the opening frame, %ld other%s%s.\n", errs[E_CLOSED], errs[E_OTHER],
	       first_other_errno ? ": " : "", first_other_errno ? strerror(first_other_errno) : "");
	if (non200[429])
		printf("429 is the per-address cap: start herald with --per-address-limit 0 or spread --sources.\n");
	printf("Listen queue over the opens: ListenOverflows +%lld, ListenDrops +%lld (whole namespace).\n", dovf,
	       ddrop);
	if (missing_total || failed_events)
		printf("MISSING: %ld reader-events never arrived; %ld publishes failed.\n", missing_total, failed_events);
	if (closed_total)
		printf("%ld readers were closed by the server after opening (%ld reset, %ld closed, %ld other).\n",
		       closed_total, closed_after_open[E_RESET], closed_after_open[E_CLOSED], closed_after_open[E_OTHER]);
	if (!isnan(cpu_per_event))
		printf("Server CPU: %.1f ms per event while events flowed; RSS %ld KiB before, %ld KiB with all open.\n",
		       cpu_per_event, m->rss_before, m->rss_open);
	if (!isnan(client_cpu))
		printf("This client used %.1f %% of a core while events flowed.\n", client_cpu);
	if (!isnan(cpu_open_ms) && n_opened > 0)
		printf("Over the opens%s: server CPU %.0f ms (%.0f us per reader), this client %.0f ms.\n",
		       opt.tls ? " (TLS handshakes included)" : "", cpu_open_ms, cpu_open_ms * 1e3 / (double)n_opened,
		       client_open_ms);
	if (tls_first_error[0])
		printf("First TLS error: %s.\n", tls_first_error);
	if (!isnan(ratio))
		printf("Event to all %s: p50 %s, %.1fx the kernel's floor of %s for %ld one-write fan-outs.\n", cN,
		       tool_fmt_dur(all_p50, b1, sizeof(b1)), ratio, tool_fmt_dur(m->floor_s, b2, sizeof(b2)),
		       n_opened);

	/* The JSON line: every figure. */
	tool_json_open(NULL, '{');
	tool_json_text("tool", "readers");
	tool_json_text("run", opt.run);
	tool_json_text("server", opt.server ? target.text : "own herald");
	tool_json_int("n", N);
	tool_json_int("backlog", m->backlog);
	tool_json_int("backlog_effective", m->backlog_effective);
	tool_json_int("ramp", opt.ramp);
	tool_json_int("sources", opt.sources ? opt.sources : 1);
	tool_json_text("publish", opt.publish ? "post" : "insert");
	tool_json_bool("tls", opt.tls);
	tool_json_int("opened", n_opened);
	tool_json_num("open_ms", m->open_s * 1e3);
	tool_json_num("open_p50_ms", open_p50 * 1e3);
	tool_json_num("open_p99_ms", open_p99 * 1e3);
	tool_json_int("open_errors", m->open_errors);
	tool_json_num("cpu_open_ms", cpu_open_ms);
	tool_json_num("client_cpu_open_ms", client_open_ms);
	tool_json_open("errors", '{');
	for (int k = 0; k < E_KINDS; k++)
		tool_json_int(ERR_NAMES[k], errs[k]);
	tool_json_close();
	tool_json_open("non200_status", '{');
	for (int s = 0; s < 600; s++)
		if (non200[s]) {
			char key[16];
			snprintf(key, sizeof(key), "%d", s);
			tool_json_int(key, non200[s]);
		}
	tool_json_close();
	tool_json_int("closed_after_open", closed_total);
	tool_json_int("still_open", m->still_open);
	tool_json_int("listen_overflows", dovf);
	tool_json_int("listen_drops", ddrop);
	tool_json_int("pid", server_pid);
	tool_json_int("threads_before", m->threads_before);
	tool_json_int("threads_open", m->threads_open);
	tool_json_int("threads_max", m->threads_max);
	tool_json_int("rss_before_kb", m->rss_before);
	tool_json_int("rss_open_kb", m->rss_open);
	tool_json_num("rss_per_reader_kb", rss_per_reader);
	tool_json_num("cpu_events_pct", cpu_ev);
	tool_json_num("cpu_idle_pct", cpu_idle);
	tool_json_num("cpu_ms_per_event", cpu_per_event);
	tool_json_num("client_cpu_events_pct", client_cpu);
	tool_json_int("events_published", n_published);
	tool_json_int("events_failed", failed_events);
	tool_json_int("missing_total", missing_total);
	tool_json_open("events", '[');
	for (long k = 0; k < K; k++) {
		tool_json_open(NULL, '{');
		tool_json_int("seq", k + 1);
		tool_json_int("id", ev_id[k]);
		tool_json_int("received", ev_got[k]);
		tool_json_int("missing", ev[k].missing);
		tool_json_num("min_ms", ev[k].min * 1e3);
		tool_json_num("p50_ms", ev[k].p50 * 1e3);
		tool_json_num("p99_ms", ev[k].p99 * 1e3);
		tool_json_num("max_ms", ev[k].max * 1e3);
		tool_json_num("publish_ms", ev_t1[k] ? ms(ev_t1[k] - ev_t0[k]) : NAN);
		tool_json_close();
	}
	tool_json_close();
	tool_json_num("event_to_all_min_ms", all_min * 1e3);
	tool_json_num("event_to_all_p50_ms", all_p50 * 1e3);
	tool_json_num("event_to_all_max_ms", all_max * 1e3);
	tool_json_num("floor_ms", m->floor_s * 1e3);
	tool_json_num("floor_ratio", ratio);
	tool_json_int("herald_exit", m->herald_exit);
	tool_json_bool("interrupted", stop_flag);
	tool_json_close();

	if (opt.csv)
		write_csv(opt.csv);
	free(ev);
	free(lat);
	free(to_all);
	return (n_opened < N || missing_total > 0 || failed_events > 0 || stop_flag) ? 1 : 0;
}

int main(int argc, char **argv)
{
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
		fprintf(stderr, "readers: measuring the kernel's floor for %ld readers (load/fanout-floor)\n", n_opened);
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
