/* SPDX-License-Identifier: BSD-2-Clause */
/* send_batch.h: many sends on many sockets in one system call. A stream
 * round writes one small piece to each of thousands of readers; one
 * send(2) each pays the system call's entry and exit every time (a third
 * of a small send's cost on a machine with page-table isolation), so the
 * round queues its sends here and runs them together through io_uring,
 * each with the result send(2) would have given.
 *
 * Every send is non-blocking (MSG_DONTWAIT, MSG_NOSIGNAL): a full socket
 * answers -EAGAIN at once and nothing waits in the kernel. send_batch_run
 * returns only when every queued send has its result, so the caller's
 * buffers need to live only until then.
 *
 * Ownership: the caller owns the batch (send_batch_new, send_batch_free)
 * and the bytes it queues, which must stay as they are until the run; the
 * batch keeps a copy of the iovec array, and lends a buffer
 * (send_batch_buffer) for pieces the caller joins, reused after each run.
 * A gathered send (send_batch_add_gathered) is the exception: its iovec
 * array is the caller's, kept as it is until the run, so one send may
 * carry hundreds of pieces (an HTTP/2 connection's frames for all its
 * streams) without a copy. */
#ifndef HERALD_SEND_BATCH_H
#define HERALD_SEND_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct send_batch;

/* The most pieces one queued send may have (more: the caller writes it
 * itself, or joins the pieces first). */
#define SEND_BATCH_IOV 8

enum send_batch_add {
	SEND_BATCH_QUEUED,
	SEND_BATCH_FULL,  /* no room: run the batch, then queue it again */
	SEND_BATCH_UNFIT, /* write it another way: more than SEND_BATCH_IOV pieces, or
			   * the batch is out of use (see send_batch_run) */
};

/* A batch of at most cap sends (rounded up to a power of two by the
 * kernel), or NULL with the reason in why when io_uring cannot be used
 * here (an old kernel, io_uring switched off, a system call filter). */
struct send_batch *send_batch_new(unsigned cap, char *why, size_t whylen);
void send_batch_free(struct send_batch *b);

/* Room for len bytes of joined pieces, valid until the next run, or NULL
 * when this run's buffer is used up (run the batch first). */
void *send_batch_buffer(struct send_batch *b, size_t len);

/* Queue one send of the n pieces of iov (total bytes in all) on fd;
 * tag names it in the result. */
enum send_batch_add send_batch_add(struct send_batch *b, int fd, const struct iovec *iov, int n, size_t total,
				   void *tag);

/* The most pieces one gathered send may have (the kernel's IOV_MAX). */
#define SEND_BATCH_GATHER_IOV 1024

/* Queue one send of the n pieces of iov (at most SEND_BATCH_GATHER_IOV) on
 * fd, pointing at iov itself: the caller keeps the array and the bytes as
 * they are until the run. Its result says it was gathered
 * (send_batch_gathered). */
enum send_batch_add send_batch_add_gathered(struct send_batch *b, int fd, const struct iovec *iov, int n,
					    size_t total, void *tag);

/* Sends queued and not yet run. */
unsigned send_batch_count(const struct send_batch *b);

/* Whether one more send fits, with joined bytes of send_batch_buffer. */
bool send_batch_has_room(const struct send_batch *b, size_t joined);

/* Run every queued send, in the order queued; returns how many ran. Their
 * results stay readable with send_batch_result until the next
 * send_batch_add. Should the kernel not take every send, each one not run
 * reads as -EAGAIN (the socket is then watched for room, which comes at
 * once), the error is logged, and the batch queues nothing from then on
 * (UNFIT). */
unsigned send_batch_run(struct send_batch *b);

/* The i-th send of the last run: its tag, and what it did: bytes taken
 * (possibly fewer than *total) or -errno. */
void *send_batch_result(const struct send_batch *b, unsigned i, ssize_t *w, size_t *total);

/* Whether the i-th send of the last run was queued by
 * send_batch_add_gathered. */
bool send_batch_gathered(const struct send_batch *b, unsigned i);

#endif
