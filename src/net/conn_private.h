/* SPDX-License-Identifier: BSD-2-Clause */
/* conn_private.h: the connection pool's record, shared by the two files
 * that keep it: conn.c (reading, output, stream rounds, closing: the
 * connection's life) and conn_pool.c (the pool's making, draining, free
 * and counts, and the accessors handlers read a connection through).
 * Included by nothing else; the rest of herald sees conn.h, where the pool
 * is opaque. */
#ifndef HERALD_CONN_PRIVATE_H
#define HERALD_CONN_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/list.h"
#include "common/loop.h"
#include "core/config.h"
#include "core/metrics.h"
#include "net/conn.h"
#include "net/send_batch.h"

/* The gap between stream rounds: STREAM_GAP_FACTOR times the last round's
 * length, at most STREAM_GAP_MS (the most a frame waits for company). At
 * 1,000 events/s to 1,000 readers this halves the server's CPU per delivery
 * against writing every pass, and 30 ms rather than 20 takes a fifth off
 * again for about 10 ms more latency (docs/BENCHMARKS.md). */
#define STREAM_GAP_MS 30
#define STREAM_GAP_FACTOR 4
/* Sends per io_uring submission in a stream round: ten system calls for
 * ten thousand readers, and 64 bytes of submission ring (and 32 of
 * completion ring) per send, 96 KiB in all. */
#define SEND_BATCH_CAP 1024

struct conn_pool {
	struct loop *lp;
	const struct config *cfg; /* timeouts and limits, read at each use (reload swaps the values) */
	struct metrics *m;
	struct conn_hooks hooks;
	bool draining;   /* no keep-alive: every connection closes after its answer */
	struct list all; /* every open connection (conn.link) */
	size_t n;
	struct conn *flush_list; /* connections with output to write this pass */
	struct list graveyard;   /* closed (conn.link), freed at the end of the pass */
	bool pass_end_scheduled;
	/* Streams with event frames held for the next stream round (conn.c:
	 * while the loop is busy, several events leave in one writev). */
	struct conn *stream_list;
	uint64_t stream_round_end_ns; /* when the last stream round ended */
	uint64_t stream_round_ns;     /* how long it took */
	uint64_t stream_gap_ms;       /* the longest gap between rounds (STREAM_GAP_MS) */
	uint64_t stream_gap_factor;   /* the gap in lengths of the last round (STREAM_GAP_FACTOR) */
	struct loop_timer stream_timer;
	bool frame_round_due;   /* stream_timer fired: the next pass end writes them */
	uint64_t stream_rounds; /* stream rounds run */
	uint64_t writes;        /* writev calls (or their transport's equivalent, or batched sends) */
	/* A stream round's sends, run together (NULL: io_uring is off or
	 * cannot be used here, and each reader gets its own send). */
	struct send_batch *batch;
	/* The request buffer a connection reads into while it has no request
	 * of its own in progress (see take_read_buffer). */
	char *read_buf;
	bool read_buf_lent;
	struct conn_takeover takeover; /* who takes a client speaking HTTP/2 */
	struct conn_gatherer gatherer; /* who sends gathered bytes (HTTP/2 sessions) */
	/* The round's gathered connections and what each gave (bytes taken
	 * by the gather op, or -errno), taken off their queues once the
	 * gatherer's sends have run. */
	struct gathered {
		struct conn *c;
		ssize_t w;
		size_t total;
	} *gathered;
	size_t ngathered, gathered_cap;
};

/* Shared by conn.c and conn_pool.c (conn.c's own, used by the pool's cold
 * half): a record made, freed and added to the pool; a request record
 * taken; the interest and the request timer kept; the pass's end. And the
 * pool's, used by conn.c's request reading: a head's limits, a body
 * refused, the request named for log lines. */
struct conn *conn_alloc(struct conn_pool *p, const char *peer);
void conn_free_record(struct conn *c);
void pool_add(struct conn_pool *p, struct conn *c);
void take_record(struct conn *c, const struct http_request *req, const char *body, size_t body_len);
void conn_update_events(struct conn *c);
void start_request_timer(struct conn *c);
void pass_end(void *arg);
struct http_limits conn_head_limits(const struct config *cfg);
bool conn_refuse_body(struct conn *c, const struct http_request *req);
void conn_set_what(struct conn *c, const struct http_request *req);

#endif
