/* SPDX-License-Identifier: BSD-2-Clause */
/* hub.h: the set of stream readers and the fan-out of new events.
 *
 * Every reader is either LIVE (on the hub's list; each new matching event's
 * shared chunk is queued to it) or CATCHUP (fed from the store, page by page,
 * as its output drains, until its cursor reaches the hub's high-water id,
 * when it joins LIVE). A live reader whose queue would pass queue_limit drops
 * what it has not started writing and moves to CATCHUP from the last event
 * it keeps, so memory per reader stays bounded and nothing is lost.
 *
 * Live readers are also indexed by their topic patterns (topic_index.h),
 * so an event visits only the readers whose patterns match its topic; a
 * reader with its own rule, by the keys its opener gave, in an index of
 * its own probed with the keys of each event; a reader is in an index
 * exactly while it is LIVE.
 *
 * Invariant: high_water is the highest id the hub has read from the store;
 * every event <= high_water has been offered to every live reader, and a
 * catch-up reader reads only ids in (cursor, high_water]. So ids reach each
 * reader strictly increasing, with no gap and no duplicate.
 *
 * The hub owns its readers: hub_open allocates one from what the stream
 * handler parsed, and hub_reader_closed, the one way a reader ends, frees
 * it. A reader writes through a sink (a connection, or a fake one in the
 * unit tests): the hub knows only the operations below. */
#ifndef HERALD_HUB_H
#define HERALD_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/chunk.h"
#include "core/config.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "hub/frame.h"
#include "store/store.h"

#define READER_MAX_TOPICS STORE_MAX_TOPICS
#define READER_MAX_GRANTS STORE_MAX_GRANTS

/* Where a reader's frames go. Every function gets the sink pointer given to
 * hub_open. */
struct hub_sink_ops {
	/* Queue ch (the caller keeps its reference); droppable for event and
	 * heartbeat frames, which drop() may discard. */
	void (*send)(void *sink, struct chunk *ch, int64_t id, bool droppable);
	/* Discard droppable frames not yet started; return the resume point
	 * (the last event id kept or written). */
	int64_t (*drop)(void *sink);
	/* The id a drop falls back to when nothing later is kept. */
	void (*set_resume_point)(void *sink, int64_t id);
	size_t (*queued)(const void *sink);    /* unwritten bytes */
	uint64_t (*idle_ms)(const void *sink); /* since the client last took bytes */
	/* End after what is queued (the sink then reports the close). */
	void (*end)(void *sink);
	/* Close now (the sink then reports the close). */
	void (*close)(void *sink);
};

/* What a new reader asks for (from the stream request). */
struct reader_spec {
	int64_t resume;                  /* -1: from now on */
	bool see_private;                /* presented the read token: every private event */
	size_t ntopics;                  /* 0: every topic */
	char *topics[READER_MAX_TOPICS]; /* patterns wanted, taken over by hub_open */
	size_t ngrants;                  /* private events on these patterns too (a token's rights) */
	char **grants;                   /* taken over by hub_open (the array and its strings) */
	int64_t expires_at;              /* Unix seconds the rights end (the token's exp): 0 never */
	enum frame_format format;        /* how its events are encoded (FRAME_SSE by default) */
	/* A reader whose rule is its own (the Mercure endpoint's matchers and
	 * grants): with accepts set, topics and grants are not used, the
	 * reader is sent those events accepts(arg, ev) passes, live and in
	 * catch-up alike (where it reads every row). The hub takes over arg
	 * and frees it with arg_free when the reader ends. Live, it is
	 * offered the events whose keys (the strings the hub's rule prober
	 * gives for an event, hub_set_rule_probe) match one of its own keys,
	 * topic patterns (topic.h's syntax: an exact string, "p/" then "*",
	 * or "*"); with no keys, or no prober, every event. keys (the array
	 * and its strings) are taken over by hub_open. */
	bool (*accepts)(void *arg, const struct store_event *ev);
	void *accepts_arg;
	void (*accepts_free)(void *arg);
	size_t nkeys;
	char **keys;
	const char *client;      /* for logs; lent, kept by the reader: must outlive it */
	int64_t rotate_after_ms; /* 0: never */
};

/* The hub and its readers: their fields are the hub's alone
 * (hub_private.h). */
struct hub;
struct reader;

/* A new hub reading st: high_water = the store's newest id, the store's
 * changed hook registered. on_fatal is called when the store cannot go on
 * (the database file deleted or replaced). Returns the hub, owned by the
 * caller until hub_free, or NULL after logging why. */
struct hub *hub_new(struct loop *lp, struct store *st, const struct config *cfg, struct metrics *m,
		    void (*on_fatal)(void *arg), void *fatal_arg);
/* Close every reader (the streams end) and free the hub (NULL: nothing). */
void hub_free(struct hub *h);

/* The strings under which an event reaches the readers with their own rule
 * (reader_spec.keys): probe calls hit(ctx, key, n) for each of ev's (a
 * key may come twice; a reader is offered an event once). Registered once,
 * before the first such reader opens; arg outlives the hub's readers. */
typedef void (*hub_rule_probe)(void *arg, const struct store_event *ev,
			       void (*hit)(void *ctx, const char *key, size_t n), void *ctx);
void hub_set_rule_probe(struct hub *h, hub_rule_probe probe, void *arg);

/* Call fn(arg) after a poll that moved high_water (new rows were read),
 * for another reader of the log that follows the hub (the webhook); fn
 * must not call back into the hub. One at most; NULL: none. */
void hub_on_advance(struct hub *h, void (*fn)(void *arg), void *arg);

/* Read every row past high_water from the store and fan it out. Called after
 * own commits and when another process committed. */
void hub_poll(struct hub *h);

/* Open a reader that writes to sink through ops: LIVE from high_water when
 * spec->resume < 0, else CATCHUP from it (or a reset first when the resume
 * point is gone or unknown). Takes over spec->topics. The caller has queued
 * the stream's head. Returns the reader, owned by the hub. */
struct reader *hub_open(struct hub *h, struct reader_spec *spec, const struct hub_sink_ops *ops, void *sink);

/* The sink's output has drained: feed a catch-up reader its next page. */
void hub_reader_drained(struct reader *r);

/* The sink is closing: take r off its hub and free it. The one way a
 * reader ends (after hub_end, a stall, a rotation, shutdown, or the client
 * going away). */
void hub_reader_closed(struct reader *r);

/* End r's stream: no more events; the sink closes once its queue is
 * written (rotation, shutdown). */
void hub_end(struct hub *h, struct reader *r);

/* End every stream (draining for shutdown). */
void hub_end_all(struct hub *h);

/* End every stream that presented the read token (it changed on reload). */
void hub_end_private(struct hub *h);

/* Apply changed settings (heartbeat interval) after a reload. */
void hub_reconfigure(struct hub *h);

/* Open readers: live and catching up (not those ended and still writing
 * what they had queued). */
size_t hub_readers(const struct hub *h);

/* Readers catching up from the store now. */
size_t hub_catching_up(const struct hub *h);

/* The highest event id the hub has read from the store (and offered to
 * every live reader). */
int64_t hub_high_water(const struct hub *h);

#endif
