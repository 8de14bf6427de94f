/* server.h: the one server instance every module works on: settings, the
 * loop, the store, the hub, listeners, connections and counters. main.c
 * builds it in start-up order and tears it down in reverse. */
#ifndef HERALD_SERVER_H
#define HERALD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "config.h"
#include "hub.h"
#include "loop.h"
#include "metrics.h"
#include "store.h"

struct conn;
struct listener;
struct publish_queue;
struct tls_ctx;
struct stream_counts;

struct server {
	struct config cfg;
	struct loop *lp;
	struct store *st;
	struct hub hub;
	struct trust trust;
	struct metrics m;
	struct publish_queue *pubq;
	struct tls_ctx *tls;

	struct listener *listeners;
	size_t nlisteners;

	struct conn *conns; /* every open connection */
	size_t nconns;
	struct conn *flush_list;             /* connections with output to write this pass */
	struct conn *graveyard;              /* closed connections freed at the end of the pass */
	struct stream_counts *stream_counts; /* open streams per client address */
	int argc;                            /* the command line, read again on SIGHUP */
	char **argv;
	int sigfd;
	uint64_t drain_deadline;
	struct loop_timer drain_timer;
	struct loop_timer prune_timer;
	struct loop_timer checkpoint_timer;
	uint64_t last_commit_ms; /* loop time of the last group commit */
	bool pass_end_scheduled;

	int64_t max_readers; /* effective global cap on streams */
	bool draining;       /* SIGTERM seen: no new work */
	int exit_code;       /* what server_run returns */
	uint64_t started_ms;
};

/* Open everything in start-up order (store, listeners, hub, publish queue,
 * systemd notification). Returns 0, or -1 after logging what failed. */
int server_start(struct server *srv, int argc, char **argv);

/* Run the loop until a signal ends it. Returns the exit code. */
int server_run(struct server *srv);

/* Close everything in reverse order and free it. */
void server_free(struct server *srv);

/* Record one of our own commits: the WAL is checkpointed at the next pause. */
void server_note_commit(struct server *srv);

/* Copy the WAL into the database now (a passive checkpoint). */
void server_checkpoint(struct server *srv);

/* Stop the loop with exit code 1 (a fault that a restart mends; the
 * caller has logged why). */
void server_fail(struct server *srv);

/* Schedule the end-of-pass work (flushes, frees) once for this pass. */
void server_schedule_pass_end(struct server *srv);

#endif
