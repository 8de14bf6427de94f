/* readers-net.c: the epoll client of load/readers: N readers on one thread,
 * so the client is never the bottleneck.
 *
 * Reader state machine: CONNECTING (EPOLLOUT armed) -> HEAD (request sent,
 * collecting the header block) -> OPENING (status 200, waiting for the end of
 * the first frame) -> OPEN; any failure -> DEAD with its kind counted. The
 * byte stream is scanned line by line for "id: N" at line starts and blank
 * lines (frame ends); nothing else is parsed.
 *
 * TLS (--tls): after the connect, a HANDSHAKE state drives SSL_do_handshake
 * with epoll interest following WANT_READ/WANT_WRITE, in the same loop; then
 * reader I/O goes through conn_read()/conn_write() (readers-tls.c).
 *
 * Epoll tags: a reader's index, or UINT64_MAX for the POST publisher. */
#include "readers.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define HEAD_MAX 16384

int ep = -1;
struct reader *R;
char request[2048];
size_t request_len;
static char rbuf[65536];

/* Counters. */
long n_settled, n_open, n_opened, n_inflight;
long errs[E_KINDS], closed_after_open[E_KINDS];
int first_other_errno;
long non200[600];
long n_retry;
int64_t t_last_open;

static int64_t max_known_id; /* the newest id a publish got */

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

void reader_close(struct reader *r)
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
void reader_fail(struct reader *r, enum err_kind k)
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

void reader_connect(long i)
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
		struct sockaddr_in src = { .sin_family = AF_INET };
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
	struct epoll_event ev = { .events = EPOLLOUT, .data.u64 = (uint64_t)i };
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
		struct epoll_event ev = { .events = e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT,
					  .data.u64 = (uint64_t)i };
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
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)i };
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
void id_known(long k, int64_t id)
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

/* ---- the loop ------------------------------------------------------------ */

static struct epoll_event evbuf[4096];

/* One pass: wait up to timeout_ms and handle what is ready. */
void loop_once(int timeout_ms)
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
