/* SPDX-License-Identifier: BSD-2-Clause */
/* test_send_batch.c: the io_uring send batch against real sockets (AF_UNIX
 * socketpairs and loopback TCP pairs, no mocks):
 *   - one-piece sends on several sockets: results in queue order with their
 *     tags, and the bytes arrive intact;
 *   - sends of 2..SEND_BATCH_IOV pieces (sendmsg) arrive whole and in order,
 *     also several on one socket in one run; more pieces are UNFIT and queue
 *     nothing;
 *   - the lent buffer: joined bytes go out right, it runs out once its room
 *     is used and comes back after a run; send_batch_has_room follows both
 *     the entries and the buffer, and while it says yes a send of several
 *     pieces is queued;
 *   - a full socket answers -EAGAIN at once (and takes nothing), a nearly
 *     full one takes a part, while other sockets of the run go on;
 *   - a closed peer gives -EPIPE or -ECONNRESET without a SIGPIPE, a closed
 *     fd -EBADF, and neither spoils the batch;
 *   - capacity (FULL after exactly the rounded cap), reuse after a run, the
 *     last run's results readable until the next add, a round over more
 *     sockets than the batch holds;
 *   - an empty run, send_batch_free(NULL);
 *   - gathered sends: up to SEND_BATCH_GATHER_IOV pieces from the caller's
 *     iovecs, beside ordinary ones, marked in the results.
 * Every wait is bounded: reads poll with a timeout, and a watchdog alarm
 * ends the test should a run ever wait in the kernel. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net/send_batch.h"

/* The longest any one wait for bytes or a socket state may take. */
#define WAIT_MS 5000
/* The whole test, should something block where it must not. */
#define WATCHDOG_S 30

#define TAG(i) ((void *)(uintptr_t)((i) + 1))

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] =
		"test_send_batch: watchdog: the test took too long (did a send wait in the kernel?)\n";
	ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)w;
	_exit(1);
}

/* Bytes that differ from place to place and from seed to seed, so a piece
 * out of order or from the wrong send shows. */
static void pattern(char *p, size_t n, unsigned seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		p[i] = (char)(x >> 24);
	}
}

static struct send_batch *new_batch(unsigned cap)
{
	char why[256] = "";
	struct send_batch *b = send_batch_new(cap, why, sizeof(why));
	if (!b)
		fprintf(stderr, "send_batch_new(%u): %s\n", cap, why);
	return b;
}

static bool unix_pair(int sv[2])
{
	return socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0;
}

/* Wait at most WAIT_MS for any of events (or an error or hang-up) on fd. */
static bool wait_for(int fd, short events)
{
	long long end = now_ms() + WAIT_MS;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		long long left = end - now_ms();
		if (left < 0)
			left = 0;
		int r = poll(&p, 1, (int)left);
		if (r > 0)
			return true;
		if (r == 0 || errno != EINTR)
			return false;
	}
}

/* A connected loopback TCP pair: sv[0] the connecting end (the sender in
 * these tests), sv[1] the accepted one, both non-blocking. A buffer size
 * above 0 makes the sender's send buffer and the receiver's receive buffer
 * that small, so a few sends fill the connection. */
static bool tcp_pair(int sv[2], int bufsize)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	int one = 1;
	sv[0] = sv[1] = -1;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l < 0)
		return false;
	/* Set before listen: the accepted socket inherits it, and the window
	 * it advertises follows from it. */
	if (bufsize > 0)
		setsockopt(l, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof(bufsize));
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, 4) != 0 ||
	    getsockname(l, (struct sockaddr *)&a, &alen) != 0)
		goto fail;
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sv[0] < 0)
		goto fail;
	if (bufsize > 0)
		setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof(bufsize));
	if (connect(sv[0], (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS)
		goto fail;
	if (!wait_for(l, POLLIN))
		goto fail;
	sv[1] = accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (sv[1] < 0 || !wait_for(sv[0], POLLOUT))
		goto fail;
	int err = 0;
	socklen_t elen = sizeof(err);
	if (getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0)
		goto fail;
	close(l);
	return true;
fail:
	perror("tcp_pair");
	close(l);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	sv[0] = sv[1] = -1;
	return false;
}

static void close_pair(int sv[2])
{
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	sv[0] = sv[1] = -1;
}

/* Read up to len bytes from fd, waiting at most WAIT_MS in all; returns
 * how many came. */
static size_t read_up_to(int fd, char *buf, size_t len)
{
	size_t got = 0;
	long long end = now_ms() + WAIT_MS;
	while (got < len) {
		ssize_t r = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			break; /* end of stream or an error: no more will come */
		long long left = end - now_ms();
		if (left <= 0)
			break;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		poll(&p, 1, (int)left);
	}
	return got;
}

/* Whether nothing (more) is readable on fd right now. */
static bool nothing_more(int fd)
{
	char c;
	ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
	return r < 0 && errno == EAGAIN;
}

/* Whether exactly the len bytes of want arrive at fd, and nothing after. */
static bool arrives(int fd, const void *want, size_t len)
{
	char *got = malloc(len + 1);
	if (!got)
		return false;
	size_t n = read_up_to(fd, got, len);
	bool same = n == len && memcmp(got, want, len) == 0;
	bool alone = nothing_more(fd);
	if (!same || !alone)
		fprintf(stderr, "  fd %d: %zu of %zu bytes came%s%s\n", fd, n, len,
			n == len && !same ? ", not the ones sent" : "", alone ? "" : ", and more after them");
	free(got);
	return same && alone;
}

/* Whether the i-th result of the last run is tag with w bytes taken of total. */
static bool result_is(const struct send_batch *b, unsigned i, void *tag, ssize_t w, size_t total)
{
	ssize_t gw;
	size_t gt;
	void *gtag = send_batch_result(b, i, &gw, &gt);
	bool ok = gtag == tag && gw == w && gt == total;
	if (!ok)
		fprintf(stderr, "  result %u: tag %p w %zd total %zu; expected tag %p w %zd total %zu\n", i, gtag, gw,
			gt, tag, w, total);
	return ok;
}

/* The w of the i-th result, after checking its tag. */
static ssize_t result_w(const struct send_batch *b, unsigned i, void *tag)
{
	ssize_t w;
	size_t total;
	CHECK(send_batch_result(b, i, &w, &total) == tag);
	return w;
}

static enum send_batch_add add1(struct send_batch *b, int fd, const void *p, size_t len, void *tag)
{
	struct iovec v = { .iov_base = (void *)p, .iov_len = len };
	return send_batch_add(b, fd, &v, 1, len, tag);
}

/* Write filler ('f') into fd until it takes no more; returns the bytes it
 * took. A TCP sender may get room back as the receiver's stack takes
 * segments, so fill again after a pause until a pass takes nothing. */
static size_t fill(int fd)
{
	char junk[1024];
	size_t sum = 0;
	memset(junk, 'f', sizeof(junk));
	for (int pass = 0; pass < 50; pass++) {
		size_t took = 0;
		for (int i = 0; i < 100000; i++) {
			ssize_t w = send(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (w <= 0)
				break;
			took += (size_t)w;
		}
		sum += took;
		if (took == 0 && pass > 0)
			break;
		poll(NULL, 0, 20);
	}
	return sum;
}

/* Read n bytes of filler from fd; whether all came and all were filler. */
static bool drain_filler(int fd, size_t n)
{
	char *buf = malloc(n + 1);
	if (!buf)
		return false;
	size_t got = read_up_to(fd, buf, n);
	bool ok = got == n;
	for (size_t i = 0; ok && i < n; i++)
		ok = buf[i] == 'f';
	if (!ok)
		fprintf(stderr, "  fd %d: %zu of %zu filler bytes came, or others among them\n", fd, got, n);
	free(buf);
	return ok;
}

/* 1. One piece on each of several sockets, queued in the reverse order of
 * the sockets so queue order and socket order differ. */
static void test_one_piece_each(void)
{
	enum { N_UNIX = 4, N_TCP = 4, N = N_UNIX + N_TCP };
	int sv[N][2];
	char msg[N][1500];
	size_t len[N];
	struct send_batch *b = new_batch(16);
	CHECK(b != NULL);
	if (!b)
		return;
	for (int i = 0; i < N; i++) {
		CHECK(i < N_UNIX ? unix_pair(sv[i]) : tcp_pair(sv[i], 0));
		len[i] = 100 + 150 * (size_t)i;
		pattern(msg[i], len[i], (unsigned)i);
	}
	for (int q = 0; q < N; q++) {
		int i = N - 1 - q;
		CHECK_EQ_INT(add1(b, sv[i][0], msg[i], len[i], TAG(i)), SEND_BATCH_QUEUED);
	}
	CHECK_EQ_INT(send_batch_count(b), N);
	CHECK_EQ_INT(send_batch_run(b), N);
	CHECK_EQ_INT(send_batch_count(b), 0);
	for (int q = 0; q < N; q++) {
		int i = N - 1 - q;
		CHECK(result_is(b, (unsigned)q, TAG(i), (ssize_t)len[i], len[i]));
	}
	for (int i = 0; i < N; i++) {
		CHECK(arrives(sv[i][1], msg[i], len[i]));
		close_pair(sv[i]);
	}
	send_batch_free(b);
}

/* 2. Sends of several pieces (the sendmsg path): 2..SEND_BATCH_IOV pieces
 * on as many sockets, three sends on one socket in one run, and a send of
 * too many pieces that must queue nothing. */
static void test_several_pieces(void)
{
	enum { FIRST = 2, LAST = SEND_BATCH_IOV, N = LAST - FIRST + 1, PIECE_MAX = 200 };
	int sv[N][2], one[2], unfit[2];
	char data[N][SEND_BATCH_IOV * PIECE_MAX];
	size_t total[N];
	struct iovec iov[SEND_BATCH_IOV + 1];
	struct send_batch *b = new_batch(16);
	CHECK(b != NULL);
	if (!b)
		return;
	for (int s = 0; s < N; s++) {
		int n = FIRST + s;
		CHECK(s % 2 ? tcp_pair(sv[s], 0) : unix_pair(sv[s]));
		/* Pieces of different lengths, cut from one patterned block. */
		total[s] = 0;
		for (int k = 0; k < n; k++) {
			size_t plen = 1 + (size_t)(k * 37 + s * 11) % PIECE_MAX;
			iov[k] = (struct iovec){ .iov_base = data[s] + total[s], .iov_len = plen };
			total[s] += plen;
		}
		pattern(data[s], total[s], 100u + (unsigned)s);
		CHECK_EQ_INT(send_batch_add(b, sv[s][0], iov, n, total[s], TAG(s)), SEND_BATCH_QUEUED);
	}
	/* The batch keeps its own copy of the iovecs: spoil ours before the run. */
	memset(iov, 0, sizeof(iov));

	/* More than SEND_BATCH_IOV pieces, or none: UNFIT, nothing queued. */
	CHECK(unix_pair(unfit));
	char spare[SEND_BATCH_IOV + 1];
	memset(spare, 'u', sizeof(spare));
	for (int k = 0; k < SEND_BATCH_IOV + 1; k++)
		iov[k] = (struct iovec){ .iov_base = spare + k, .iov_len = 1 };
	CHECK_EQ_INT(send_batch_add(b, unfit[0], iov, SEND_BATCH_IOV + 1, sizeof(spare), TAG(99)), SEND_BATCH_UNFIT);
	CHECK_EQ_INT(send_batch_add(b, unfit[0], iov, 0, 0, TAG(99)), SEND_BATCH_UNFIT);
	CHECK_EQ_INT(send_batch_count(b), N);

	CHECK_EQ_INT(send_batch_run(b), N);
	for (int s = 0; s < N; s++)
		CHECK(result_is(b, (unsigned)s, TAG(s), (ssize_t)total[s], total[s]));
	for (int s = 0; s < N; s++) {
		CHECK(arrives(sv[s][1], data[s], total[s]));
		close_pair(sv[s]);
	}
	CHECK(nothing_more(unfit[1]));
	close_pair(unfit);

	/* Three sends on one socket in one run (1, 3 and SEND_BATCH_IOV
	 * pieces) arrive one after another in the order queued. */
	char block[3 * 64 + SEND_BATCH_IOV * 16];
	size_t off = 0;
	pattern(block, sizeof(block), 7);
	CHECK(unix_pair(one));
	int counts[3] = { 1, 3, SEND_BATCH_IOV };
	for (int t = 0; t < 3; t++) {
		size_t sum = 0;
		for (int k = 0; k < counts[t]; k++) {
			iov[k] = (struct iovec){ .iov_base = block + off, .iov_len = 16 };
			off += 16;
			sum += 16;
		}
		CHECK_EQ_INT(send_batch_add(b, one[0], iov, counts[t], sum, TAG(t)), SEND_BATCH_QUEUED);
	}
	CHECK_EQ_INT(send_batch_run(b), 3);
	for (int t = 0; t < 3; t++)
		CHECK(result_is(b, (unsigned)t, TAG(t), 16 * counts[t], 16 * (size_t)counts[t]));
	CHECK(arrives(one[1], block, off));
	close_pair(one);
	send_batch_free(b);
}

/* Gathered sends: hundreds of pieces (an HTTP/2 connection's frames for
 * all its streams) read from the caller's own iovecs, kept until the run;
 * beside ordinary sends of the same run, marked gathered in the results;
 * more than SEND_BATCH_GATHER_IOV pieces, or none, are UNFIT. */
static void test_gathered(void)
{
	enum { PIECES = 600, PLEN = 7 };
	static char data[PIECES * PLEN];
	static struct iovec iov[SEND_BATCH_GATHER_IOV + 1];
	int g[2], plain[2], unfit[2];
	struct send_batch *b = new_batch(8);
	CHECK(b != NULL);
	if (!b)
		return;
	CHECK(tcp_pair(g, 0));
	CHECK(unix_pair(plain));
	CHECK(unix_pair(unfit));
	pattern(data, sizeof(data), 42);
	for (int k = 0; k < PIECES; k++)
		iov[k] = (struct iovec){ .iov_base = data + (size_t)k * PLEN, .iov_len = PLEN };
	CHECK_EQ_INT(add1(b, plain[0], "first", 5, TAG(0)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_add_gathered(b, g[0], iov, PIECES, sizeof(data), TAG(1)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, plain[0], "second", 6, TAG(2)), SEND_BATCH_QUEUED);
	char spare[SEND_BATCH_GATHER_IOV + 1];
	memset(spare, 'u', sizeof(spare));
	struct iovec many[SEND_BATCH_GATHER_IOV + 1];
	for (int k = 0; k < SEND_BATCH_GATHER_IOV + 1; k++)
		many[k] = (struct iovec){ .iov_base = spare + k, .iov_len = 1 };
	CHECK_EQ_INT(send_batch_add_gathered(b, unfit[0], many, SEND_BATCH_GATHER_IOV + 1, sizeof(spare), TAG(9)),
		     SEND_BATCH_UNFIT);
	CHECK_EQ_INT(send_batch_add_gathered(b, unfit[0], many, 0, 0, TAG(9)), SEND_BATCH_UNFIT);
	CHECK_EQ_INT(send_batch_count(b), 3);
	CHECK_EQ_INT(send_batch_run(b), 3);
	CHECK(result_is(b, 0, TAG(0), 5, 5));
	CHECK(result_is(b, 1, TAG(1), (ssize_t)sizeof(data), sizeof(data)));
	CHECK(result_is(b, 2, TAG(2), 6, 6));
	CHECK(!send_batch_gathered(b, 0));
	CHECK(send_batch_gathered(b, 1));
	CHECK(!send_batch_gathered(b, 2));
	CHECK(!send_batch_gathered(b, 3)); /* past the run */
	CHECK(arrives(g[1], data, sizeof(data)));
	CHECK(arrives(plain[1], "firstsecond", 11));
	CHECK(nothing_more(unfit[1]));
	/* The largest gathered send, after a run (its header slots reused). */
	for (int k = 0; k < SEND_BATCH_GATHER_IOV; k++)
		iov[k] = (struct iovec){ .iov_base = data + k % PIECES, .iov_len = 1 };
	for (int r = 0; r < 2; r++) {
		CHECK_EQ_INT(send_batch_add_gathered(b, g[0], iov, SEND_BATCH_GATHER_IOV, SEND_BATCH_GATHER_IOV, TAG(r)),
			     SEND_BATCH_QUEUED);
		CHECK_EQ_INT(send_batch_run(b), 1);
		CHECK(result_is(b, 0, TAG(r), SEND_BATCH_GATHER_IOV, SEND_BATCH_GATHER_IOV));
		CHECK(send_batch_gathered(b, 0));
	}
	char want[2 * SEND_BATCH_GATHER_IOV];
	for (int k = 0; k < 2 * SEND_BATCH_GATHER_IOV; k++)
		want[k] = data[(k % SEND_BATCH_GATHER_IOV) % PIECES];
	CHECK(arrives(g[1], want, sizeof(want)));
	close_pair(g);
	close_pair(plain);
	close_pair(unfit);
	send_batch_free(b);
}

/* The lent buffer's room in a run with nothing joined yet, read through
 * send_batch_has_room (the batch must have entries free). */
static size_t buffer_room(const struct send_batch *b)
{
	size_t lo = 0, hi = (size_t)1 << 30; /* has_room(lo) holds, has_room(hi) not */
	if (send_batch_has_room(b, hi))
		return hi;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (send_batch_has_room(b, mid))
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* 3. The lent buffer and send_batch_has_room. The buffer's size is the
 * module's own (ARENA_BYTES): read here, not assumed, but it must hold a
 * 64 KiB piece at least. */
static void test_lent_buffer(void)
{
	enum { BIG = 64 * 1024, MAX_BIG = 16 };
	int sv[2][2], bigs[MAX_BIG][2];
	struct send_batch *b = new_batch(8);
	CHECK(b != NULL);
	if (!b)
		return;
	size_t room = buffer_room(b);
	CHECK(room >= BIG && room < (size_t)1 << 30);

	/* Pieces joined into two lent stretches, one per socket. */
	const char *parts[] = { "id: 17\n", "event: note\n", "data: {\"a\":1}\n\n" };
	char want[2][128];
	size_t wlen[2] = { 0, 0 };
	char *lent[2];
	for (int s = 0; s < 2; s++) {
		CHECK(s ? tcp_pair(sv[s], 0) : unix_pair(sv[s]));
		for (int k = 0; k < 3; k++) {
			strcpy(want[s] + wlen[s], parts[(k + s) % 3]);
			wlen[s] += strlen(parts[(k + s) % 3]);
		}
		lent[s] = send_batch_buffer(b, wlen[s]);
		CHECK(lent[s] != NULL);
		if (!lent[s]) {
			close_pair(sv[s]);
			if (s)
				close_pair(sv[0]);
			send_batch_free(b);
			return;
		}
		for (int k = 0, at = 0; k < 3; k++) {
			const char *p = parts[(k + s) % 3];
			memcpy(lent[s] + at, p, strlen(p));
			at += (int)strlen(p);
		}
		CHECK_EQ_INT(add1(b, sv[s][0], lent[s], wlen[s], TAG(s)), SEND_BATCH_QUEUED);
	}
	/* The two stretches do not overlap, and the room shrank by both. */
	CHECK(lent[1] >= lent[0] + wlen[0] || lent[1] + wlen[1] <= lent[0]);
	CHECK(send_batch_has_room(b, room - wlen[0] - wlen[1]));
	CHECK(!send_batch_has_room(b, room - wlen[0] - wlen[1] + 1));
	CHECK_EQ_INT(send_batch_run(b), 2);
	for (int s = 0; s < 2; s++) {
		CHECK(result_is(b, (unsigned)s, TAG(s), (ssize_t)wlen[s], wlen[s]));
		CHECK(arrives(sv[s][1], want[s], wlen[s]));
		close_pair(sv[s]);
	}

	/* Room runs out: 64 KiB at a time until NULL, each written whole (ASan
	 * sees any stretch outside the buffer) and sent on its own socket. */
	char *big[MAX_BIG + 1];
	int got = 0;
	CHECK_EQ_INT(buffer_room(b), room); /* all of it back after the run */
	while (got <= MAX_BIG && (big[got] = send_batch_buffer(b, BIG)) != NULL) {
		pattern(big[got], BIG, 200u + (unsigned)got);
		got++;
		/* Room follows what is left of the buffer. */
		CHECK_EQ_INT(send_batch_has_room(b, room - (size_t)got * BIG), true);
		CHECK_EQ_INT(send_batch_has_room(b, room - (size_t)got * BIG + 1), false);
	}
	CHECK_EQ_INT(got, room / BIG);
	if (got > MAX_BIG)
		got = MAX_BIG; /* a buffer this large: send what bigs[] has room for */
	/* What is left is less than a piece: it can be had, then no more. */
	size_t rest = room % BIG;
	CHECK(send_batch_buffer(b, rest + 1) == NULL);
	CHECK(send_batch_buffer(b, rest) != NULL);
	CHECK(send_batch_buffer(b, 1) == NULL);
	CHECK(send_batch_has_room(b, 0)); /* entries left, no joined bytes */
	CHECK(!send_batch_has_room(b, 1));
	for (int i = 0; i < got; i++) {
		CHECK(unix_pair(bigs[i]));
		CHECK_EQ_INT(add1(b, bigs[i][0], big[i], BIG, TAG(i)), SEND_BATCH_QUEUED);
	}
	CHECK_EQ_INT(send_batch_run(b), (unsigned)got);
	for (int i = 0; i < got; i++) {
		CHECK(result_is(b, (unsigned)i, TAG(i), BIG, BIG));
		/* Compare with a fresh copy of the pattern: the buffer is the
		 * batch's again. */
		char *expect = malloc(BIG);
		if (expect) {
			pattern(expect, BIG, 200u + (unsigned)i);
			CHECK(arrives(bigs[i][1], expect, BIG));
			free(expect);
		}
		close_pair(bigs[i]);
	}

	/* After the run the whole buffer is there again. */
	CHECK(send_batch_has_room(b, room));
	CHECK(send_batch_buffer(b, BIG) != NULL);
	CHECK(!send_batch_has_room(b, room - BIG + 1));

	/* Room also counts entries: with the batch full, none. */
	int e[2];
	CHECK(unix_pair(e));
	unsigned queued = 0;
	while (queued < 1000 && add1(b, e[0], "x", 1, TAG(queued)) == SEND_BATCH_QUEUED)
		queued++;
	CHECK_EQ_INT(queued, 8);
	CHECK(!send_batch_has_room(b, 0));
	CHECK_EQ_INT(send_batch_run(b), queued);
	CHECK(send_batch_has_room(b, 0));
	CHECK(send_batch_has_room(b, room));
	CHECK(arrives(e[1], "xxxxxxxx", 8));
	close_pair(e);
	send_batch_free(b);
}

/* Sends of several pieces may be fewer per run than entries (each needs
 * room for its msghdr and iovecs). Whatever the limit: while
 * send_batch_has_room says yes, such a send is queued (the caller relies
 * on it); once refused it is FULL, not UNFIT; and all queued arrive in
 * order, run after run. */
static void test_piece_slots(void)
{
	enum { CAP = 256, SOCKS = 4 };
	int sv[SOCKS][2];
	struct send_batch *b = new_batch(CAP);
	CHECK(b != NULL);
	if (!b)
		return;
	for (int s = 0; s < SOCKS; s++)
		CHECK(unix_pair(sv[s]));
	/* Each send: "NNNN" and "|" as two pieces, round robin on the sockets,
	 * so each socket's reader sees its numbers in order. */
	static char nums[CAP][5];
	char *want[SOCKS];
	size_t wlen[SOCKS] = { 0 };
	for (int s = 0; s < SOCKS; s++)
		want[s] = malloc(CAP * 5 + 1);
	for (int round = 0; round < 2; round++) {
		unsigned k = 0;
		for (int s = 0; s < SOCKS; s++)
			wlen[s] = 0;
		while (k < CAP && send_batch_has_room(b, 0)) {
			int s = (int)(k % SOCKS);
			snprintf(nums[k], sizeof(nums[k]), "%04u", k);
			struct iovec two[2] = { { nums[k], 4 }, { (void *)"|", 1 } };
			enum send_batch_add r = send_batch_add(b, sv[s][0], two, 2, 5, TAG(k));
			CHECK_EQ_INT(r, SEND_BATCH_QUEUED);
			if (r != SEND_BATCH_QUEUED)
				break;
			if (want[s]) {
				memcpy(want[s] + wlen[s], nums[k], 4);
				want[s][wlen[s] + 4] = '|';
			}
			wlen[s] += 5;
			k++;
		}
		CHECK(k >= 2);
		if (k < CAP) {
			struct iovec two[2] = { { (void *)"late", 4 }, { (void *)"|", 1 } };
			CHECK_EQ_INT(send_batch_add(b, sv[0][0], two, 2, 5, TAG(999)), SEND_BATCH_FULL);
		}
		CHECK_EQ_INT(send_batch_count(b), k);
		CHECK_EQ_INT(send_batch_run(b), k);
		for (unsigned i = 0; i < k; i++)
			CHECK(result_is(b, i, TAG(i), 5, 5));
		for (int s = 0; s < SOCKS; s++)
			if (want[s])
				CHECK(arrives(sv[s][1], want[s], wlen[s]));
	}
	for (int s = 0; s < SOCKS; s++) {
		free(want[s]);
		close_pair(sv[s]);
	}
	send_batch_free(b);
}

/* 4. Full sockets answer -EAGAIN at once and take nothing; a nearly full
 * one takes part of a send; other sockets of the same run go on. */
static void test_full_socket(void)
{
	int full_u[2], full_t[2], good[2], part[2];
	int small = 4096;
	struct send_batch *b = new_batch(8);
	CHECK(b != NULL);
	if (!b)
		return;
	CHECK(unix_pair(full_u));
	CHECK(setsockopt(full_u[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
	CHECK(tcp_pair(full_t, small));
	CHECK(tcp_pair(good, 0));
	size_t filled_u = fill(full_u[0]), filled_t = fill(full_t[0]);
	CHECK(filled_u > 0);
	CHECK(filled_t > 0);

	const char one_piece[] = "data: never\n\n", good_msg[] = "data: fine\n\n";
	struct iovec two[2] = { { (void *)"data: ", 6 }, { (void *)"never either\n\n", 14 } };
	CHECK_EQ_INT(add1(b, full_u[0], one_piece, strlen(one_piece), TAG(0)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_add(b, full_u[0], two, 2, 20, TAG(1)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, good[0], good_msg, strlen(good_msg), TAG(2)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, full_t[0], one_piece, strlen(one_piece), TAG(3)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_add(b, full_t[0], two, 2, 20, TAG(4)), SEND_BATCH_QUEUED);
	long long t0 = now_ms();
	CHECK_EQ_INT(send_batch_run(b), 5);
	/* Nothing waited for room (the watchdog catches a run that never returns). */
	CHECK(now_ms() - t0 < 1000);
	CHECK(result_is(b, 0, TAG(0), -EAGAIN, strlen(one_piece)));
	CHECK(result_is(b, 1, TAG(1), -EAGAIN, 20));
	CHECK(result_is(b, 2, TAG(2), (ssize_t)strlen(good_msg), strlen(good_msg)));
	CHECK(result_is(b, 3, TAG(3), -EAGAIN, strlen(one_piece)));
	CHECK(result_is(b, 4, TAG(4), -EAGAIN, 20));
	CHECK(arrives(good[1], good_msg, strlen(good_msg)));

	/* The refused sends took nothing and were not kept to go later: the
	 * readers get the filler alone, and once it is read a new send is
	 * the next thing on the wire. */
	CHECK(drain_filler(full_u[1], filled_u));
	CHECK(drain_filler(full_t[1], filled_t));
	CHECK(nothing_more(full_u[1]));
	CHECK(nothing_more(full_t[1]));
	CHECK_EQ_INT(add1(b, full_u[0], good_msg, strlen(good_msg), TAG(5)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, full_t[0], good_msg, strlen(good_msg), TAG(6)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_run(b), 2);
	CHECK(result_is(b, 0, TAG(5), (ssize_t)strlen(good_msg), strlen(good_msg)));
	CHECK(result_is(b, 1, TAG(6), (ssize_t)strlen(good_msg), strlen(good_msg)));
	CHECK(arrives(full_u[1], good_msg, strlen(good_msg)));
	CHECK(arrives(full_t[1], good_msg, strlen(good_msg)));

	/* A send larger than the room left: it takes a part, and exactly the
	 * first w bytes arrive (the one-piece path, then sendmsg). */
	enum { LARGE = 64 * 1024 };
	CHECK(unix_pair(part));
	CHECK(setsockopt(part[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) == 0);
	char *large = malloc(LARGE);
	if (large) {
		pattern(large, LARGE, 300);
		CHECK_EQ_INT(add1(b, part[0], large, LARGE, TAG(7)), SEND_BATCH_QUEUED);
		CHECK_EQ_INT(send_batch_run(b), 1);
		ssize_t w = result_w(b, 0, TAG(7));
		CHECK(w > 0 && w < LARGE);
		if (w > 0 && w <= LARGE)
			CHECK(arrives(part[1], large, (size_t)w));

		struct iovec halves[2] = { { large, LARGE / 2 }, { large + LARGE / 2, LARGE / 2 } };
		CHECK_EQ_INT(send_batch_add(b, part[0], halves, 2, LARGE, TAG(8)), SEND_BATCH_QUEUED);
		CHECK_EQ_INT(send_batch_run(b), 1);
		w = result_w(b, 0, TAG(8));
		CHECK(w > 0 && w < LARGE);
		if (w > 0 && w <= LARGE)
			CHECK(arrives(part[1], large, (size_t)w));
		free(large);
	}
	close_pair(part);
	close_pair(full_u);
	close_pair(full_t);
	close_pair(good);
	send_batch_free(b);
}

static bool is_closed_error(ssize_t w)
{
	if (w != -EPIPE && w != -ECONNRESET)
		fprintf(stderr, "  w = %zd (%s), expected -EPIPE or -ECONNRESET\n", w, w < 0 ? strerror((int)-w) : "");
	return w == -EPIPE || w == -ECONNRESET;
}

/* 5. Closed peers: -EPIPE or -ECONNRESET and no SIGPIPE (main leaves
 * SIGPIPE deadly, so a send without MSG_NOSIGNAL would end the test; a
 * kernel that adds MSG_NOSIGNAL to io_uring sends itself, as 6.18 does,
 * cannot show that, but an older one can); a closed fd: -EBADF. None of them keeps the other sends of the run from
 * going, nor the batch from taking more. */
static void test_closed_peer(void)
{
	int u1[2], u2[2], rst[2], fin[2], good[2];
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	const char msg[] = "data: to nobody\n\n", fine[] = "data: fine\n\n";
	struct iovec three[3] = { { (void *)"a", 1 }, { (void *)"bc", 2 }, { (void *)"def", 3 } };
	struct send_batch *b = new_batch(8);
	CHECK(b != NULL);
	if (!b)
		return;
	CHECK(unix_pair(u1));
	CHECK(unix_pair(u2));
	CHECK(tcp_pair(rst, 0));
	CHECK(tcp_pair(fin, 0));
	CHECK(tcp_pair(good, 0));

	close(u1[1]);
	u1[1] = -1;
	close(u2[1]);
	u2[1] = -1;
	/* A reset: the peer closes with a zero linger; wait till it is in. */
	CHECK(setsockopt(rst[1], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) == 0);
	close(rst[1]);
	rst[1] = -1;
	CHECK(wait_for(rst[0], POLLERR | POLLHUP));
	/* An orderly close: the first send after the FIN may still be taken
	 * (the peer's answer to it is the reset), so send once, then wait
	 * for the reset. */
	close(fin[1]);
	fin[1] = -1;
	CHECK(wait_for(fin[0], POLLIN | POLLRDHUP));
	CHECK_EQ_INT(add1(b, fin[0], msg, strlen(msg), TAG(0)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_run(b), 1);
	ssize_t w0 = result_w(b, 0, TAG(0));
	CHECK(w0 == (ssize_t)strlen(msg) || is_closed_error(w0));
	CHECK(wait_for(fin[0], POLLERR | POLLHUP));

	/* A closed fd: its number is free (nothing opens one until the run). */
	int badfd = dup(good[0]);
	CHECK(badfd >= 0);
	close(badfd);

	CHECK_EQ_INT(add1(b, u1[0], msg, strlen(msg), TAG(1)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_add(b, u2[0], three, 3, 6, TAG(2)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, rst[0], msg, strlen(msg), TAG(3)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_add(b, fin[0], three, 3, 6, TAG(4)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, badfd, msg, strlen(msg), TAG(5)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, good[0], fine, strlen(fine), TAG(6)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_run(b), 6);
	CHECK(result_is(b, 0, TAG(1), -EPIPE, strlen(msg))); /* AF_UNIX: always EPIPE */
	CHECK(result_is(b, 1, TAG(2), -EPIPE, 6));
	CHECK(is_closed_error(result_w(b, 2, TAG(3))));
	CHECK(is_closed_error(result_w(b, 3, TAG(4))));
	CHECK(result_is(b, 4, TAG(5), -EBADF, strlen(msg)));
	CHECK(result_is(b, 5, TAG(6), (ssize_t)strlen(fine), strlen(fine)));
	CHECK(arrives(good[1], fine, strlen(fine)));

	/* Again on the reset ones (the error reported, EPIPE from then on):
	 * still no signal, and the batch still takes sends. */
	CHECK_EQ_INT(add1(b, rst[0], msg, strlen(msg), TAG(7)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_add(b, fin[0], three, 3, 6, TAG(8)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(add1(b, good[0], fine, strlen(fine), TAG(9)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_run(b), 3);
	CHECK(is_closed_error(result_w(b, 0, TAG(7))));
	CHECK(is_closed_error(result_w(b, 1, TAG(8))));
	CHECK(result_is(b, 2, TAG(9), (ssize_t)strlen(fine), strlen(fine)));
	CHECK(arrives(good[1], fine, strlen(fine)));

	close_pair(u1);
	close_pair(u2);
	close_pair(rst);
	close_pair(fin);
	close_pair(good);
	send_batch_free(b);
}

/* Queue one-byte sends ('A', 'B', ...) on fd until the batch refuses one;
 * returns how many it took, the refusal in *last. */
static unsigned queue_until_refused(struct send_batch *b, int fd, enum send_batch_add *last)
{
	static const char letters[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	unsigned n = 0;
	*last = SEND_BATCH_QUEUED;
	while (n < 1000 && (*last = add1(b, fd, &letters[n % 62], 1, TAG(n))) == SEND_BATCH_QUEUED)
		n++;
	return n;
}

/* 6. Capacity, reuse after a run, results kept until the next add, and a
 * round over more sockets than the batch holds. */
static void test_capacity(void)
{
	enum { ROUND = 20 };
	int sv[2], many[ROUND][2];
	enum send_batch_add last;
	struct send_batch *b = new_batch(8);
	CHECK(b != NULL);
	if (!b)
		return;
	CHECK(unix_pair(sv));
	CHECK_EQ_INT(queue_until_refused(b, sv[0], &last), 8);
	CHECK_EQ_INT(last, SEND_BATCH_FULL);
	CHECK_EQ_INT(add1(b, sv[0], "!", 1, TAG(100)), SEND_BATCH_FULL);
	CHECK_EQ_INT(send_batch_count(b), 8);
	CHECK(!send_batch_has_room(b, 0));
	CHECK_EQ_INT(send_batch_run(b), 8);
	CHECK(arrives(sv[1], "ABCDEFGH", 8));
	for (unsigned i = 0; i < 8; i++)
		CHECK(result_is(b, i, TAG(i), 1, 1));

	/* Only the next add lets the results go: not the lent buffer, nor
	 * an empty run. */
	CHECK(send_batch_buffer(b, 100) != NULL);
	CHECK_EQ_INT(send_batch_run(b), 0);
	for (unsigned i = 0; i < 8; i++)
		CHECK(result_is(b, i, TAG(i), 1, 1));

	/* The batch takes a full load again. */
	CHECK_EQ_INT(queue_until_refused(b, sv[0], &last), 8);
	CHECK_EQ_INT(last, SEND_BATCH_FULL);
	CHECK_EQ_INT(send_batch_run(b), 8);
	CHECK(arrives(sv[1], "ABCDEFGH", 8));
	close_pair(sv);
	send_batch_free(b);

	/* A capacity that is no power of two is rounded up (to 8 here). */
	b = new_batch(5);
	CHECK(b != NULL);
	if (!b)
		return;
	CHECK(unix_pair(sv));
	unsigned cap = queue_until_refused(b, sv[0], &last);
	CHECK(cap >= 5 && (cap & (cap - 1)) == 0);
	CHECK_EQ_INT(last, SEND_BATCH_FULL);
	CHECK_EQ_INT(send_batch_run(b), cap);
	close_pair(sv);

	/* A round over more readers than the batch holds, as a caller does
	 * it: queue until FULL, run, read the results, queue again. */
	char msg[ROUND][32];
	int seen[ROUND] = { 0 };
	int results = 0;
	for (int i = 0; i < ROUND; i++) {
		CHECK(i % 3 ? unix_pair(many[i]) : tcp_pair(many[i], 0));
		snprintf(msg[i], sizeof(msg[i]), "data: reader %d\n\n", i);
	}
	for (int i = 0; i <= ROUND; i++) {
		enum send_batch_add r = SEND_BATCH_FULL;
		if (i < ROUND)
			r = add1(b, many[i][0], msg[i], strlen(msg[i]), TAG(i));
		if (r == SEND_BATCH_QUEUED)
			continue;
		CHECK_EQ_INT(r, SEND_BATCH_FULL);
		unsigned ran = send_batch_run(b);
		for (unsigned k = 0; k < ran; k++) {
			ssize_t w;
			size_t total;
			uintptr_t t = (uintptr_t)send_batch_result(b, k, &w, &total);
			CHECK(t >= 1 && t <= ROUND);
			if (t < 1 || t > ROUND)
				continue;
			CHECK_EQ_INT(w, strlen(msg[t - 1]));
			CHECK_EQ_INT(total, strlen(msg[t - 1]));
			seen[t - 1]++;
			results++;
		}
		if (i < ROUND)
			CHECK_EQ_INT(add1(b, many[i][0], msg[i], strlen(msg[i]), TAG(i)), SEND_BATCH_QUEUED);
	}
	CHECK_EQ_INT(results, ROUND);
	for (int i = 0; i < ROUND; i++) {
		CHECK_EQ_INT(seen[i], 1);
		CHECK(arrives(many[i][1], msg[i], strlen(msg[i])));
		close_pair(many[i]);
	}
	send_batch_free(b);
}

/* 7. Nothing queued: a run is a no-op; freeing NULL is fine. */
static void test_empty(void)
{
	int sv[2];
	struct send_batch *b = new_batch(4);
	CHECK(b != NULL);
	if (!b)
		return;
	CHECK_EQ_INT(send_batch_count(b), 0);
	CHECK_EQ_INT(send_batch_run(b), 0);
	CHECK(unix_pair(sv));
	CHECK_EQ_INT(add1(b, sv[0], "hi", 2, TAG(0)), SEND_BATCH_QUEUED);
	CHECK_EQ_INT(send_batch_run(b), 1);
	CHECK_EQ_INT(send_batch_run(b), 0);
	CHECK_EQ_INT(send_batch_count(b), 0);
	CHECK(arrives(sv[1], "hi", 2));
	close_pair(sv);
	send_batch_free(b);
	send_batch_free(NULL);
}

int main(void)
{
	/* SIGPIPE stays deadly whatever the parent left us (an ignored signal
	 * is inherited across exec): the module's MSG_NOSIGNAL must keep it
	 * away. */
	sigset_t pipe_set;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigprocmask(SIG_UNBLOCK, &pipe_set, NULL);
	signal(SIGPIPE, SIG_DFL);
	signal(SIGALRM, on_alarm);
	alarm(WATCHDOG_S);

	/* Everything below needs io_uring: say so plainly if it is missing. */
	struct send_batch *probe = new_batch(8);
	CHECK(probe != NULL);
	if (!probe)
		return check_done("test_send_batch");
	send_batch_free(probe);

	test_one_piece_each();
	test_several_pieces();
	test_lent_buffer();
	test_piece_slots();
	test_full_socket();
	test_closed_peer();
	test_capacity();
	test_empty();
	test_gathered();
	return check_done("test_send_batch");
}
