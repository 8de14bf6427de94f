/* SPDX-License-Identifier: BSD-2-Clause */
/* send_batch.c: queued sends run together through one io_uring (see
 * send_batch.h). Each queued send is an entry holding its tag, its size
 * and, for a send of several pieces, the msghdr and iovec copy that
 * IORING_OP_SENDMSG reads at submission (a slot of its own); a send of
 * one piece is an IORING_OP_SEND. A gathered send's msghdr is a slot of
 * its own too, pointing at the caller's iovecs. The completion ring holds twice the
 * submission ring, and a run reaps every completion before it returns, so
 * it never overflows. */
#include "net/send_batch.h"

#include <errno.h>
#include <liburing.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/util.h"

/* Joined pieces of one run: a stream round's small frames, up to 8 KiB a
 * reader, for a few dozen readers before the run must go. Allocated at
 * the first use: while events come one at a time nothing is joined. */
#define ARENA_BYTES (128 * 1024)
/* Sends of several pieces in one run (each holds a msghdr and iovecs the
 * kernel reads at submission): only large queues are not joined. */
#define VEC_SLOTS 64

struct entry {
	void *tag;
	size_t total;
	ssize_t res;
	bool done;
	bool gathered;
};

struct vec {
	struct msghdr msg;
	struct iovec iov[SEND_BATCH_IOV];
};

struct send_batch {
	struct io_uring ring;
	unsigned cap, n;
	unsigned ran; /* sends of the last run, their results in e[] */
	bool broken;  /* the kernel did not take a submission: never submit again */
	struct entry *e;
	struct vec *vec;
	unsigned vecs;
	struct msghdr *msgs; /* gathered sends' headers (cap of them, at the first use) */
	unsigned nmsgs;
	char *arena;
	size_t arena_used;
};

struct send_batch *send_batch_new(unsigned cap, char *why, size_t whylen)
{
	struct send_batch *b = xcalloc(1, sizeof(*b));
	/* The fewest interruptions: one process submits, and completions are
	 * posted while it is in the kernel anyway; a bad send does not stop
	 * the others. Kernels before 6.0 lack some of these flags: ask again
	 * without them. */
	unsigned flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER;
	int r = io_uring_queue_init(cap, &b->ring, flags);
	if (r == -EINVAL)
		r = io_uring_queue_init(cap, &b->ring, 0);
	if (r < 0) {
		snprintf(why, whylen, "io_uring_setup: %s", strerror(-r));
		free(b);
		return NULL;
	}
	b->cap = b->ring.sq.ring_entries;
	b->e = xcalloc(b->cap, sizeof(*b->e));
	b->vec = xcalloc(VEC_SLOTS, sizeof(*b->vec));
	return b;
}

void send_batch_free(struct send_batch *b)
{
	if (!b)
		return;
	io_uring_queue_exit(&b->ring);
	free(b->e);
	free(b->vec);
	free(b->msgs);
	free(b->arena);
	free(b);
}

void *send_batch_buffer(struct send_batch *b, size_t len)
{
	if (len > ARENA_BYTES - b->arena_used)
		return NULL;
	if (!b->arena)
		b->arena = xmalloc(ARENA_BYTES);
	void *p = b->arena + b->arena_used;
	b->arena_used += len;
	return p;
}

unsigned send_batch_count(const struct send_batch *b)
{
	return b->n;
}

bool send_batch_has_room(const struct send_batch *b, size_t joined)
{
	return b->n < b->cap && b->vecs < VEC_SLOTS && joined <= ARENA_BYTES - b->arena_used;
}

enum send_batch_add send_batch_add(struct send_batch *b, int fd, const struct iovec *iov, int n, size_t total,
				   void *tag)
{
	if (n < 1 || n > SEND_BATCH_IOV || b->broken)
		return SEND_BATCH_UNFIT;
	if (b->n == b->cap || (n > 1 && b->vecs == VEC_SLOTS))
		return SEND_BATCH_FULL;
	if (b->n == 0)
		b->ran = 0; /* the last run's results are let go */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
	if (!sqe)
		return SEND_BATCH_FULL;
	struct entry *e = &b->e[b->n];
	*e = (struct entry){ .tag = tag, .total = total };
	if (n == 1) {
		io_uring_prep_send(sqe, fd, iov[0].iov_base, iov[0].iov_len, MSG_DONTWAIT | MSG_NOSIGNAL);
	} else {
		struct vec *v = &b->vec[b->vecs++];
		memcpy(v->iov, iov, (size_t)n * sizeof(*iov));
		v->msg = (struct msghdr){ .msg_iov = v->iov, .msg_iovlen = (size_t)n };
		io_uring_prep_sendmsg(sqe, fd, &v->msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	io_uring_sqe_set_data64(sqe, b->n);
	b->n++;
	return SEND_BATCH_QUEUED;
}

enum send_batch_add send_batch_add_gathered(struct send_batch *b, int fd, const struct iovec *iov, int n,
					    size_t total, void *tag)
{
	if (n < 1 || n > SEND_BATCH_GATHER_IOV || b->broken)
		return SEND_BATCH_UNFIT;
	if (b->n == b->cap)
		return SEND_BATCH_FULL;
	if (b->n == 0)
		b->ran = 0;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
	if (!sqe)
		return SEND_BATCH_FULL;
	if (!b->msgs)
		b->msgs = xcalloc(b->cap, sizeof(*b->msgs));
	struct msghdr *m = &b->msgs[b->nmsgs++];
	*m = (struct msghdr){ .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n };
	io_uring_prep_sendmsg(sqe, fd, m, MSG_DONTWAIT | MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, b->n);
	b->e[b->n] = (struct entry){ .tag = tag, .total = total, .gathered = true };
	b->n++;
	return SEND_BATCH_QUEUED;
}

/* Take every completion posted so far into its entry. */
static unsigned reap(struct send_batch *b)
{
	struct io_uring_cqe *cqe;
	unsigned head, seen = 0;
	io_uring_for_each_cqe(&b->ring, head, cqe)
	{
		uint64_t i = io_uring_cqe_get_data64(cqe);
		if (i < b->n && !b->e[i].done) {
			b->e[i].res = cqe->res;
			b->e[i].done = true;
		}
		seen++;
	}
	io_uring_cq_advance(&b->ring, seen);
	return seen;
}

unsigned send_batch_run(struct send_batch *b)
{
	unsigned n = b->n;
	if (n == 0)
		return 0;
	int r = io_uring_submit_and_wait(&b->ring, n);
	unsigned sent = r < 0 ? 0 : (unsigned)r;
	if (sent < n) {
		/* What the kernel did not take stays in the submission ring and
		 * would go with the next submission, long after its bytes are
		 * gone: this batch is not used again. */
		log_err("io_uring took %u of %u sends (%s); stream rounds send to each reader in turn from now on",
			sent, n, r < 0 ? strerror(-r) : "no error");
		b->broken = true;
	}
	unsigned got = reap(b);
	/* Normally all are in: a send that cannot go at once fails with
	 * -EAGAIN instead of waiting. */
	while (got < sent) {
		struct io_uring_cqe *cqe;
		r = io_uring_wait_cqe(&b->ring, &cqe);
		if (r < 0 && r != -EINTR) {
			log_err("io_uring wait for %u of %u sends: %s", sent - got, sent, strerror(-r));
			b->broken = true;
			break;
		}
		got += reap(b);
	}
	b->ran = n;
	b->n = 0;
	b->vecs = 0;
	b->nmsgs = 0;
	b->arena_used = 0;
	return n;
}

void *send_batch_result(const struct send_batch *b, unsigned i, ssize_t *w, size_t *total)
{
	const struct entry *e = &b->e[i < b->ran ? i : 0];
	/* A send without a result is one the socket had no room for, as far
	 * as its connection can tell. */
	*w = e->done ? e->res : -EAGAIN;
	*total = e->total;
	return e->tag;
}

bool send_batch_gathered(const struct send_batch *b, unsigned i)
{
	return i < b->ran && b->e[i].gathered;
}
