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
 * reader is in the index exactly while it is LIVE.
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

#include "chunk.h"
#include "config.h"
#include "loop.h"
#include "metrics.h"
#include "store.h"
#include "topic_index.h"

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
	bool envelope;                   /* events as unnamed JSON envelopes (frame_event_envelope) */
	const char *client;              /* for logs */
	const char *count_key;           /* what the per-address cap counts */
	int64_t rotate_after_ms;         /* 0: never */
	bool counted;                    /* hub_admit counted it already (a group of workers) */
};

enum reader_mode { READER_LIVE, READER_CATCHUP, READER_ENDED };

struct reader {
	struct hub *hub;
	const struct hub_sink_ops *ops;
	void *sink;
	enum reader_mode mode;
	int64_t cursor;       /* CATCHUP: the last id read from the store */
	int64_t skip_through; /* LIVE: ids up to this were seen or offered already */
	/* A resume point beyond the newest id known, to be checked once the
	 * store has caught up (store_sync_done); opened_at_id is where the
	 * reader continues if the id turns out unknown. */
	bool sync_pending;
	uint64_t sync_ticket;
	int64_t opened_at_id;
	bool see_private;
	bool envelope;  /* frame_event_envelope instead of frame_event */
	size_t ntopics; /* 0 = every topic */
	char *topics[READER_MAX_TOPICS];
	size_t ngrants;
	char **grants;
	struct loop_timer expiry_timer; /* ends the stream when its token expires */
	char client[64];                /* the client address, for logs */
	char count_key[64];             /* what the per-address cap counts */
	uint64_t opened_ms;
	uint64_t rotate_at;         /* 0 = never */
	unsigned slot;              /* which heartbeat turn visits this reader */
	struct reader *next, *prev; /* the hub's list for its mode */
	size_t nsubs;               /* LIVE: its patterns in the hub's index */
	struct topic_sub subs[];    /* room for max(1, ntopics) */
};

struct addr_counts;

struct hub {
	struct loop *lp;
	struct store *st;
	const struct config *cfg; /* queue_limit, heartbeat_interval, stall_timeout */
	struct metrics *m;
	void (*on_fatal)(void *arg); /* the store's file is gone: stop */
	void *fatal_arg;
	int64_t high_water;
	struct reader *live;
	struct reader *catchup;
	struct topic_index *index; /* the live readers by the topics they want */
	size_t nlive, ncatchup;
	struct addr_counts *counts; /* open readers per count key */
	struct chunk *heartbeat;
	struct loop_timer heartbeat_timer; /* runs while there are readers */
	struct loop_timer retry_timer;     /* store busy: poll again soon */
	struct loop_timer catchup_timer;   /* feed catch-up readers with empty queues */
	bool catchup_waiting;              /* a catch-up read waits for the store's fetch */
	struct reader *catchup_resume;     /* the catch-up reader a pass out of time stopped at */
	uint64_t pass;                     /* the loop pass pass_spent_ns counts */
	uint64_t pass_spent_ns;            /* catch-up reads in that pass so far */
	unsigned sweep_slot;               /* the heartbeat turn due next */
	unsigned next_slot;                /* the turn the next new reader joins */
};

/* Set up the hub: high_water = the store's newest id, the store's changed
 * hook registered. on_fatal is called when the store cannot go on (the
 * database file deleted or replaced). Returns 0, or -1 after logging why. */
int hub_init(struct hub *h, struct loop *lp, struct store *st, const struct config *cfg, struct metrics *m,
	     void (*on_fatal)(void *arg), void *fatal_arg);
/* Close every reader (the streams end) and free the hub's state. */
void hub_shutdown(struct hub *h);

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

size_t hub_readers(const struct hub *h);

/* Whether one more reader counted under key may open: 0, or the status
 * refusing it (503: max_readers readers are open; 429: per_key_limit under
 * key; a limit of 0 is none). In a group of workers the check counts the
 * reader in the same step (*counted; pass it on in reader_spec.counted). */
int hub_admit(struct hub *h, const char *key, int64_t per_key_limit, int64_t max_readers, bool *counted);

/* A reader hub_admit let in is refused after all (its token): give back
 * the place it counted, when it counted one. */
void hub_admit_release(struct hub *h, const char *key, bool counted);

/* Open readers counted under key (the per-address cap); in a worker of a
 * group, the whole group's (group.h). */
size_t hub_count(const struct hub *h, const char *key);

#endif
