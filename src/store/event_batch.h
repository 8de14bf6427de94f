/* SPDX-License-Identifier: BSD-2-Clause */
/* event_batch.h: rows herald appends to the log on its own behalf, where
 * no client waits for the answer (presence's joins and leaves, the
 * Mercure endpoint's subscription events). Each owner has a queue: rows
 * added during a loop pass go in one append (at most batch_rows of them;
 * the rest on the next passes), and what the log cannot take now stays at
 * the head and is tried again, in order, before anything newer:
 *
 *   add ──> queued ──(timer, 0 ms: once per pass)──> in flight ──> stored: freed, owner's stored hook
 *             ^                                           │
 *             └──── failed: kept at the head, tried ──────┤
 *                   again after STORE_BUSY_RETRY_MS       └──> failed for give_up_ms: dropped (error)
 *                   (-EBUSY) or EVENT_BATCH_RETRY_MS
 *
 * One warning when a streak of failures starts, an error when its batch
 * is given up. While the log fails the queue holds at most max_bytes of
 * rows; past that the oldest waiting rows are dropped (an error line per
 * streak of drops, herald_own_events_dropped_total counts every row
 * dropped). Always the oldest, whether for time or for room: the newest
 * rows say where things stand now (who is present, which subscriptions
 * are open), and what is stored stays in the order it happened. */
#ifndef HERALD_EVENT_BATCH_H
#define HERALD_EVENT_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "common/loop.h"
#include "core/metrics.h"
#include "store/store.h"

#define EVENT_BATCH_ROWS 256              /* rows per append */
#define EVENT_BATCH_MAX_BYTES (16u << 20) /* bytes of rows one queue holds */
#define EVENT_BATCH_GIVE_UP_MS 60000      /* a failing batch is tried this long, */
#define EVENT_BATCH_RETRY_MS 500          /* this far apart (-EBUSY: STORE_BUSY_RETRY_MS) */

struct event_batch;

/* Who owns a queue and what it holds. The strings are static (kept by
 * pointer). A limit left 0 takes the default above. */
struct event_batch_spec {
	const char *name; /* the log lines' prefix: "presence" */
	const char *rows; /* the rows, plural: "join and leave events" */
	/* After each append the log took (the owner tells the hub: hub_poll);
	 * never after event_batch_close. NULL: nothing. */
	void (*stored)(void *arg);
	void *arg;
	size_t batch_rows;
	size_t max_bytes;
	uint64_t give_up_ms;
};

/* A queue appending to st; m counts the rows dropped. lp, st and m
 * outlive it; the spec is copied. Never NULL. The owner ends it with
 * event_batch_close. */
struct event_batch *event_batch_new(struct loop *lp, struct store *st, struct metrics *m,
				    const struct event_batch_spec *spec);

/* Queue a copy of ev (type, topic, data, public, and a Mercure update's
 * id and block; ev has no idempotency key): the caller keeps its strings.
 * The append goes at the end of the pass, or after the failed rows ahead
 * of it. */
void event_batch_add(struct event_batch *b, const struct store_new_event *ev);

/* Rows waiting or in flight, and their bytes. */
size_t event_batch_rows(const struct event_batch *b);
size_t event_batch_bytes(const struct event_batch *b);

/* The owner is done with b (NULL: nothing): what waits is appended now,
 * one attempt (with SQLite, answered at once; the stored hook is not
 * called), and what the log does not take is dropped with an error line.
 * An append still in flight (Redis) keeps b until store_close answers it;
 * b is not used by the caller again either way. */
void event_batch_close(struct event_batch *b);

#endif
