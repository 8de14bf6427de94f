/* SPDX-License-Identifier: BSD-2-Clause */
/* hub_private.h: the fields of the hub and of its readers, which are the
 * hub's alone. Only hub.c includes this, and the hub's unit test
 * (tests/unit/test_hub.c), which looks at a reader's mode, the index and
 * the catch-up budget; every other file holds a hub or a reader only by
 * pointer, through hub.h. */
#ifndef HERALD_HUB_PRIVATE_H
#define HERALD_HUB_PRIVATE_H

#include "common/list.h"
#include "hub/hub.h"
#include "hub/topic_index.h"

/* The time catch-up reads may spend in one loop pass looking for rows, for
 * every reader together: the store's search and the judging of rows by a
 * reader's own rule, everything but queuing the rows sent; the rest goes
 * on in the next pass, after the loop has looked at the sockets. A read
 * stops after the row that spends it (feed_row), and the store's budget
 * (STORE_READ_BUDGET_US in store_sqlite.h) cuts a search that finds no row,
 * so a pass spends at most about this plus one store step or one row's
 * judging, whatever the filters, rules and the log. Queuing the rows sent
 * is the delivery itself (as a fan-out is) and is bounded by the reader's
 * queue. */
#define CATCHUP_PASS_NS 1000000

#define HEARTBEAT_SLOTS 4 /* turns in which readers are visited, twice per heartbeat_interval */

enum reader_mode { READER_LIVE, READER_CATCHUP, READER_ENDED };

/* The fields are ordered so that the record has no holes: an idle stream
 * is mostly this block (with one index node, 248 bytes: malloc's 256-byte
 * size) and its connection, so every eight bytes here are 8 MB at a
 * million readers (docs/BENCHMARKS.md, "Memory per reader at 100,000"). */
struct reader {
	struct hub *hub;
	const struct hub_sink_ops *ops;
	void *sink;
	enum reader_mode mode;
	enum frame_format format; /* indexes offer.frames */
	int64_t cursor;       /* CATCHUP: the last id read from the store */
	int64_t skip_through; /* LIVE: ids up to this were seen or offered already */
	uint32_t nsubs;       /* LIVE: its patterns (or keys) in the hub's index (or rules index) */
	uint8_t slot;         /* which heartbeat turn visits this reader (< HEARTBEAT_SLOTS) */
	bool see_private;
	/* A resume point beyond the newest id known, to be checked once the
	 * store has caught up (store_sync_done); opened_at_id is where the
	 * reader continues if the id turns out unknown. */
	bool sync_pending;
	uint64_t sync_ticket;
	int64_t opened_at_id;
	/* Its own rule instead of topics and grants (reader_spec.accepts). */
	bool (*accepts)(void *arg, const struct store_event *ev);
	void *accepts_arg;
	void (*accepts_free)(void *arg);
	size_t ntopics; /* 0 = every topic */
	char **topics;  /* ntopics patterns, in the reader's own block after subs[] */
	size_t nkeys;   /* with accepts: where the rules index finds it (reader_spec.keys) */
	char **keys;    /* owned, with its strings */
	size_t ngrants;
	char **grants;
	struct loop_timer expiry_timer; /* ends the stream when its token expires */
	const char *client;             /* the client address, for logs (lent by the opener, see reader_spec) */
	uint64_t rotate_at;             /* 0 = never */
	struct list_node node;          /* on the hub's list for its mode */
	struct topic_sub subs[];        /* room for max(1, ntopics, nkeys), then the topics' pointers */
};

struct hub {
	struct loop *lp;
	struct store *st;
	const struct config *cfg; /* queue_limit, heartbeat_interval, stall_timeout */
	struct metrics *m;
	void (*on_fatal)(void *arg); /* the store's file is gone: stop */
	void *fatal_arg;
	int64_t high_water;
	struct list live;          /* the LIVE readers (struct reader.node) */
	struct list catchup;       /* the CATCHUP readers */
	struct topic_index *index; /* the live readers by the topics they want */
	struct topic_index *rules; /* the live readers with their own rule, by their keys */
	size_t nrules;             /* readers in rules */
	hub_rule_probe probe;      /* an event's keys in rules (hub_set_rule_probe) */
	void *probe_arg;
	void (*advanced)(void *arg); /* hub_on_advance: high_water moved */
	void *advanced_arg;
	size_t nlive, ncatchup;
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
	size_t slot_readers[HEARTBEAT_SLOTS]; /* readers on a list, by turn */
};

#endif
