/* SPDX-License-Identifier: BSD-2-Clause */
/* test_conn_gather.c: a stream round's gathered connections (a transport
 * with the gather op, as an HTTP/2 stream's), on a real loop, against a
 * fake transport and gatherer whose one send per round goes to a real
 * socketpair, through the pool's io_uring batch and with io_uring off:
 *   - one gatherer send a round for every gathered connection, carrying
 *     their bytes (pointed at, not copied) in the order gathered;
 *   - when the gatherer hears of its send's result (sent, or its own write
 *     without a batch) every queue still holds the bytes it gave: the
 *     queues let go only after;
 *   - a connection whose transport took part keeps the rest queued and
 *     asks for EPOLLOUT; one answered -EAGAIN keeps all; one answered
 *     -ENOTSUP is written with writev after the round;
 *   - a plain reader in the same round is unaffected. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "conn_fixture.h"
#include "common/util.h"
#include "net/conn.h"
#include "net/send_batch.h"
#include "net/transport_plain.h"

#define NCONN 4
#define FRAME "data: the event\n\n"

struct fake_conn {
	struct tfx *f;
	ssize_t take;   /* bytes the gather takes at most (-1: all) */
	ssize_t answer; /* a gather's -errno instead (0: none) */
	bool want_out;
	int writevs;
};

struct tfx {
	struct loop *lp;
	struct config cfg;
	struct metrics m;
	struct conn_pool *pool;
	struct conn *c[NCONN];
	struct fake_conn fc[NCONN];
	struct conn *plain;
	int peer_plain;
	int sv[2]; /* the gatherer's socket and its reader */
	struct iovec pieces[64];
	int npieces;
	size_t gathered; /* bytes in pieces */
	size_t queued_before[NCONN];
	int sends, sent_calls, intact_at_result;
	char expect[1024];
	size_t nexpect;
};

static ssize_t fake_read(struct transport *t, void *buf, size_t len)
{
	(void)t, (void)buf, (void)len;
	return -EAGAIN;
}

static size_t sum(const struct iovec *iov, int n)
{
	size_t s = 0;
	for (int i = 0; i < n; i++)
		s += iov[i].iov_len;
	return s;
}

static ssize_t fake_writev(struct transport *t, const struct iovec *iov, int n)
{
	struct fake_conn *fc = t->state;
	fc->writevs++;
	return (ssize_t)sum(iov, n);
}

static ssize_t fake_gather(struct transport *t, const struct iovec *iov, int n)
{
	struct fake_conn *fc = t->state;
	struct tfx *f = fc->f;
	if (fc->answer)
		return fc->answer;
	size_t total = sum(iov, n), left = fc->take < 0 ? total : MIN((size_t)fc->take, total);
	size_t w = left;
	for (int i = 0; i < n && left; i++) {
		size_t k = MIN(left, iov[i].iov_len);
		f->pieces[f->npieces++] = (struct iovec){ iov[i].iov_base, k };
		left -= k;
	}
	f->gathered += w;
	return w ? (ssize_t)w : -EAGAIN;
}

static uint32_t fake_events(const struct transport *t, uint32_t wanted)
{
	struct fake_conn *fc = t->state;
	fc->want_out = (wanted & EPOLLOUT) != 0;
	return 0;
}

static const struct transport_ops fake_ops = {
	.name = "fake",
	.read = fake_read,
	.writev = fake_writev,
	.gather = fake_gather,
	.events = fake_events,
};

/* Every queue still holds what it held before the round. */
static bool queues_intact(const struct tfx *f)
{
	for (int i = 0; i < NCONN; i++)
		if (conn_queued_bytes(f->c[i]) != f->queued_before[i])
			return false;
	return true;
}

/* What the pieces point at now, which is what the socket must get. */
static void note_expect(struct tfx *f)
{
	for (int i = 0; i < f->npieces; i++) {
		memcpy(f->expect + f->nexpect, f->pieces[i].iov_base, f->pieces[i].iov_len);
		f->nexpect += f->pieces[i].iov_len;
	}
}

static void gatherer_send(void *arg, struct send_batch *b)
{
	struct tfx *f = arg;
	f->sends++;
	if (!f->npieces)
		return;
	note_expect(f);
	if (b && send_batch_add_gathered(b, f->sv[0], f->pieces, f->npieces, f->gathered, f) == SEND_BATCH_QUEUED)
		return;
	ssize_t w = writev(f->sv[0], f->pieces, f->npieces);
	CHECK_EQ_INT(w, (ssize_t)f->gathered);
	f->intact_at_result += queues_intact(f);
}

static void gatherer_sent(void *arg, void *tag, ssize_t w)
{
	struct tfx *f = arg;
	CHECK(tag == f);
	CHECK_EQ_INT(w, (ssize_t)f->gathered);
	f->sent_calls++;
	f->intact_at_result += queues_intact(f);
}

static void no_request(void *owner, struct conn *c, const struct http_request *req, const char *body, size_t n)
{
	(void)owner, (void)req, (void)body, (void)n;
	conn_close(c, NULL);
}

static void setup(struct tfx *f, bool io_uring)
{
	memset(f, 0, sizeof(*f));
	f->lp = loop_new();
	fixture_config(&f->cfg);
	f->cfg.io_uring = io_uring;
	struct conn_hooks hooks = { .owner = f, .request = no_request, .expect_continue = fixture_no_continue };
	f->pool = conn_pool_new(f->lp, &f->cfg, &f->m, &hooks);
	struct conn_gatherer g = { .arg = f, .send = gatherer_send, .sent = gatherer_sent };
	conn_pool_set_gatherer(f->pool, &g);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, f->sv) == 0);
	for (int i = 0; i < NCONN; i++) {
		f->fc[i] = (struct fake_conn){ .f = f, .take = -1 };
		f->c[i] = conn_new_virtual(f->pool, "fake", false, true, &fake_ops, &f->fc[i], NULL, NULL, 0);
		conn_become_stream(f->c[i]);
	}
	int pv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pv) == 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	f->plain = conn_new(f->pool, pv[0], (struct sockaddr *)&sa, sizeof(sa_family_t), &transport_plain, NULL);
	f->peer_plain = pv[1];
	conn_become_stream(f->plain);
}

static void teardown(struct tfx *f)
{
	conn_pool_free(f->pool);
	close(f->sv[0]);
	close(f->sv[1]);
	close(f->peer_plain);
	loop_free(f->lp);
}

static void stop(void *arg)
{
	loop_stop(arg);
}

/* Queue one event frame (two chunks) to every connection; the round runs
 * at this pass's end (the first after a quiet spell). */
static void queue_event(void *arg)
{
	struct tfx *f = arg;
	struct chunk *a = chunk_from("id: 7\n", 6), *b = chunk_from(FRAME, strlen(FRAME));
	for (int i = 0; i < NCONN; i++) {
		conn_enqueue_frame(f->c[i], a, 7);
		conn_enqueue_frame(f->c[i], b, 7);
		f->queued_before[i] = conn_queued_bytes(f->c[i]);
	}
	conn_enqueue_frame(f->plain, a, 7);
	conn_enqueue_frame(f->plain, b, 7);
	chunk_unref(a);
	chunk_unref(b);
}

static size_t read_all(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r <= 0)
			return n;
		n += (size_t)r;
	}
}

static void run_round(struct tfx *f)
{
	struct loop_timer t1, t2;
	memset(&t1, 0, sizeof(t1));
	memset(&t2, 0, sizeof(t2));
	loop_timer_start(f->lp, &t1, 0, queue_event, f);
	loop_timer_start(f->lp, &t2, 50, stop, f->lp);
	CHECK(loop_run(f->lp) == 0);
	loop_timer_stop(f->lp, &t1);
	loop_timer_stop(f->lp, &t2);
}

static void test_round(bool io_uring)
{
	struct tfx f;
	setup(&f, io_uring);
	size_t one = 6 + strlen(FRAME);
	f.fc[1].take = 3;          /* a spent window, part way */
	f.fc[2].answer = -EAGAIN;  /* nothing now */
	f.fc[3].answer = -ENOTSUP; /* writev after the round */
	run_round(&f);
	CHECK_EQ_INT(f.sends, 1);
	CHECK_EQ_INT(f.sent_calls, io_uring ? 1 : 0);
	CHECK_EQ_INT(f.intact_at_result, 1);
	char got[1024];
	size_t n = read_all(f.sv[1], got, sizeof(got));
	CHECK_EQ_INT(n, one + 3);
	CHECK(n == f.nexpect && memcmp(got, f.expect, n) == 0);
	/* Taken whole, part, none; the one refused went by writev. */
	CHECK_EQ_INT(conn_queued_bytes(f.c[0]), 0);
	CHECK_EQ_INT(conn_queued_bytes(f.c[1]), one - 3);
	CHECK(f.fc[1].want_out && !f.fc[0].want_out);
	CHECK_EQ_INT(conn_queued_bytes(f.c[2]), one);
	CHECK(f.fc[2].want_out);
	CHECK_EQ_INT(f.fc[3].writevs, 1);
	CHECK_EQ_INT(conn_queued_bytes(f.c[3]), 0);
	/* The plain reader beside them had its frame. */
	n = read_all(f.peer_plain, got, sizeof(got));
	CHECK_EQ_INT(n, one);
	teardown(&f);
}

int main(void)
{
	test_round(true);
	test_round(false);
	return check_done("test_conn_gather");
}
