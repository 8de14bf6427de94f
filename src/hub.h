/* hub.h: the set of stream readers and the fan-out of new events.
 *
 * Every reader is either LIVE (on the hub's list; each new matching event's
 * shared chunk is queued to it) or CATCHUP (fed from the store, page by page,
 * as its socket drains, until its cursor reaches the hub's high-water id,
 * when it joins LIVE). A live reader whose queue would pass queue_limit drops
 * what it has not started writing and moves to CATCHUP from the last event
 * it keeps, so memory per reader stays bounded and nothing is lost.
 *
 * Invariant: high_water is the highest id the hub has read from the store;
 * every event <= high_water has been offered to every live reader, and a
 * catch-up reader reads only ids in (cursor, high_water]. So ids reach each
 * reader strictly increasing, with no gap and no duplicate. */
#ifndef HERALD_HUB_H
#define HERALD_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunk.h"
#include "loop.h"
#include "store.h"

struct server;
struct conn;

#define READER_MAX_TOPICS STORE_MAX_TOPICS

enum reader_mode { READER_LIVE, READER_CATCHUP, READER_ENDED };

struct reader {
	struct conn *c;
	enum reader_mode mode;
	int64_t cursor;       /* CATCHUP: the last id read from the store */
	int64_t skip_through; /* LIVE: ids up to this were seen already */
	bool see_private;     /* presented the read token */
	size_t ntopics;       /* 0 = every topic */
	char *topics[READER_MAX_TOPICS];
	char client[64];    /* the client address, for logs */
	char count_key[64]; /* what the per-address cap counts (an IPv6 client's /N) */
	uint64_t opened_ms;
	uint64_t rotate_at;         /* 0 = never */
	unsigned slot;              /* which heartbeat turn visits this reader */
	struct reader *next, *prev; /* the hub's list for its mode */
};

struct hub {
	struct server *srv;
	int64_t high_water;
	struct reader *live;
	struct reader *catchup;
	size_t nlive, ncatchup;
	struct chunk *heartbeat;
	struct chunk *stream_head;
	struct loop_timer heartbeat_timer;
	struct loop_timer retry_timer;   /* store busy: poll again soon */
	struct loop_timer catchup_timer; /* feed catch-up readers with empty queues */
	struct loop_timer watch_timer;   /* only without inotify: slow poll */
	struct loop_timer confirm_timer; /* re-check data_version after a wake-up */
	size_t confirm_step;
	unsigned sweep_slot; /* the heartbeat turn due next */
	unsigned next_slot;  /* the turn the next new reader joins */
};

/* Set up the hub: high_water = the store's newest id, timers armed. */
int hub_init(struct hub *h, struct server *srv);
/* Close every reader (the streams end) and free the hub's chunks. */
void hub_shutdown(struct hub *h);

/* Read every row past high_water from the store and fan it out. Called after
 * own commits and when another process committed. */
void hub_poll(struct hub *h);

/* Watch the store's change descriptor (inotify) with the loop. */
int hub_watch_store(struct hub *h);

/* Register a new stream reader on c (head already queued): LIVE from
 * high_water when resume_id < 0, else CATCHUP from resume_id. Takes
 * ownership of r. */
void hub_add(struct hub *h, struct reader *r, int64_t resume_id);

/* Take r off the hub's lists (called by conn_close; no-op once ENDED). */
void hub_remove(struct hub *h, struct reader *r);

/* End r's stream: no more events; the connection closes once its queue is
 * written (rotation, shutdown). */
void hub_end(struct hub *h, struct reader *r);

/* End every stream that presented the read token (it changed on reload). */
void hub_end_private(struct hub *h);

/* c's output queue has drained: feed a catch-up reader its next page. */
void hub_on_drained(struct hub *h, struct reader *r);

/* Apply changed settings (heartbeat interval) after a reload. */
void hub_reconfigure(struct hub *h);

size_t hub_readers(const struct hub *h);

#endif
