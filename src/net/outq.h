/* SPDX-License-Identifier: BSD-2-Clause */
/* outq.h: a connection's output queue: a ring of references to shared
 * chunks, what of each is written, and which entries may be dropped. Pure:
 * no I/O; the connection fills an iovec from it, writes, and reports how
 * many bytes the socket took.
 *
 * Invariant: entries leave in the order they came, and only from the head,
 * except that outq_drop removes droppable entries that have not started to
 * be written; the ids of entries carrying events only increase along the
 * queue, so the last id kept (or written) is the point a reader resumes
 * from. */
#ifndef HERALD_OUTQ_H
#define HERALD_OUTQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/chunk.h"

/* 8 bytes, so a delivery stores into an eighth of a cache line: the store
 * into each reader's ring misses the cache, and it is the largest cost of a
 * delivery in user space. The chunk's address, with the low bit set for a
 * frame the reader can get again (an event or a heartbeat), which outq_drop
 * may discard; the event id carried is the chunk's own (chunk->id). */
struct outq_entry {
	uintptr_t word;
};

struct outq {
	struct outq_entry *q; /* ring buffer */
	/* 32 bits each: a ring is bounded far below by queue_limit, and the
	 * record is part of every connection's. */
	uint32_t head, len, cap;
	uint32_t head_off;  /* bytes of the head entry already written */
	size_t bytes;       /* unwritten bytes in the queue */
	int64_t written_id; /* id of the last event fully written, or the resume point set */
};

/* Append a reference to ch (the caller keeps its own), carrying event id
 * (0: none), which becomes ch->id: a chunk carries one id wherever it is
 * queued. */
void outq_push(struct outq *q, struct chunk *ch, int64_t id, bool droppable);

/* Fill iov with up to max entries from the head (the unwritten part of
 * each). Returns the count; *total gets their bytes. */
int outq_iov(const struct outq *q, struct iovec *iov, int max, size_t *total);

/* The socket took n bytes from the head: advance, release what is fully
 * written, and move written_id past each event written. */
void outq_consume(struct outq *q, size_t n);

/* Drop every droppable entry that has not started to be written; kept
 * entries stay in order. The first committed unwritten bytes are already
 * on their way even with nothing written (TLS: encrypted, waiting for the
 * socket, possibly several frames in one record): every entry they touch
 * is kept. Returns the resume point: the id of the last event kept, or
 * written_id. */
int64_t outq_drop(struct outq *q, size_t committed);

/* Whether the head entry has started to be written. */
bool outq_head_started(const struct outq *q);

/* Release every reference and the ring. */
void outq_free(struct outq *q);

#endif
