/* SPDX-License-Identifier: BSD-2-Clause */
/* chunk.h: immutable, reference-counted byte blocks. One encoded event is one
 * chunk that every reader's output queue points into; the last unref frees
 * it. Single-threaded: the count is a plain integer. */
#ifndef HERALD_CHUNK_H
#define HERALD_CHUNK_H

#include <stddef.h>
#include <stdint.h>

struct chunk {
	uint32_t refs;
	uint32_t len;
	/* The event id the bytes carry (0: none): the same in every output
	 * queue the chunk is in, so the queues keep it here, once (outq.h). */
	int64_t id;
	char data[];
};

/* Allocate a chunk of len bytes with one reference; the caller fills data. */
struct chunk *chunk_new(size_t len);
/* Allocate a chunk holding a copy of len bytes at p. */
struct chunk *chunk_from(const void *p, size_t len);
struct chunk *chunk_ref(struct chunk *c);
/* Drop one reference; frees the chunk when it was the last. NULL is a no-op. */
void chunk_unref(struct chunk *c);

#endif
