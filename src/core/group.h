/* SPDX-License-Identifier: BSD-2-Clause */
/* group.h: what the worker processes of one herald share (workers > 1),
 * in shared memory mapped by the main process before it forks: one slot
 * per worker (its pid, whether it is ready, when its loop last showed
 * life, its open readers, its gauges and a copy of its counters); the open
 * readers per address key with a column per worker (a presence_table,
 * presence_table.h), so that max_readers and per_address_limit hold for
 * the whole group and the main process can drop a dead worker's share at
 * once; the presence table, a column per worker, whose dead worker's
 * column the main process drops the same way; and the records of the
 * Mercure subscriptions, a dead worker's orphaned for a live one to close.
 *
 * The address counts hold only the keys with a reader open now, so a
 * lookup (every stream's open and close) costs a few slots whatever
 * addresses came and went before.
 *
 * One set of mappings per process, as this file's state: the main process
 * creates them, each worker enters them with its index after fork. Robust,
 * process-shared mutexes guard the slots and each table, so a worker
 * killed while holding one leaves it usable. With workers = 1 nothing is
 * mapped and group_on() is false: callers keep their private state. */
#ifndef HERALD_GROUP_H
#define HERALD_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/metrics.h"

#define GROUP_MAX_WORKERS 64

/* Figures of the moment a worker stamps into its slot. */
struct group_figures {
	size_t connections, readers_catching_up, publish_pending;
	size_t http2_sessions, http2_streams;
	int64_t last_event_id;
};

/* One worker as the group sees it, for /metrics and STATUS=. */
struct group_worker {
	pid_t pid; /* 0 while not running */
	bool ready;
	size_t readers;
};

/* Map the region for nworkers (2..GROUP_MAX_WORKERS) with room for
 * max_keys distinct address keys at once (the reader cap: each key counts
 * a reader; at least 1,024), and the presence table with room for
 * presence_keys. Main process, before any fork. Returns 0, or -errno
 * (nothing mapped). */
int group_create(unsigned nworkers, size_t max_keys, size_t presence_keys);

/* Unmap the region (main process at exit; a worker before it exits). */
void group_destroy(void);

/* This process is worker index (after fork, before it serves). */
void group_enter(unsigned index);

/* True in a worker of a group: counts and caps go through the region. */
bool group_on(void);

struct presence_table;

unsigned group_workers(void); /* 0 when no region */
int group_index(void);        /* this worker's index, or -1 */

/* The group's presence table (NULL when no region); a worker's column is
 * its index. */
struct presence_table *group_presence_table(void);

/* The group's records of Mercure subscriptions (shared_records.h; 2 x
 * presence_keys cells; NULL when no region); a worker's column is its
 * index, and a dead worker's records are orphaned when it is reaped. */
struct shared_records;
struct shared_records *group_records(void);

/* The per-address counts (admission.c's counts in a group), keys of at
 * most 63 bytes. admit and del change this worker's column; count is the
 * group's total for key.
 *
 * admit is the cap check and the count in one step, so that streams
 * opening at the same moment on several workers cannot pass a cap
 * together: counts one more reader under key and returns 0, or counts
 * nothing and returns -1 when the group holds total_limit readers, -2
 * when key has per_key_limit (a limit of 0: none). */
int group_count_admit(const char *key, size_t per_key_limit, size_t total_limit);
/* One reader less under key (one group_count_admit counted). */
void group_count_del(const char *key);
size_t group_count(const char *key);

/* The same counts for another kind of key (a namespace's topic pattern
 * under max_readers, namespace_admit.c): the key's cap checked and counted
 * in one step, without the group's reader total. Returns 0 when counted, 1
 * at the limit, -1 when the table is full (nothing counted: the caller
 * serves the stream uncounted). */
int group_count_admit_key(const char *key, size_t limit);
void group_count_del_key(const char *key);

/* Index slots the address counts looked at since group_create: the work
 * their lookups cost, counted (tests read it). */
uint64_t group_count_probes(void);

/* Open readers in the whole group. */
size_t group_readers(void);

/* A worker: stamp "alive now" with its figures and a copy of its counters
 * (from its loop, a few times a second, and before /metrics). */
void group_stamp(const struct group_figures *f, const struct metrics *m);

/* A worker: start-up done, serving. */
void group_set_ready(void);

/* Sum over the group: counters of every worker (and of workers that died,
 * so counters never go back), gauges of the running ones, into m and f
 * (both overwritten); w[GROUP_MAX_WORKERS] gets each worker's line.
 * Returns the number of workers. */
unsigned group_sum(struct metrics *m, struct group_figures *f, struct group_worker *w);

/* Main process: worker index now runs as pid (the worker may have marked
 * itself ready already). */
void group_worker_started(unsigned index, pid_t pid);

/* Main process: worker index is gone: its readers leave every count, its
 * counters are kept with the dead ones', its slot is emptied, its Mercure
 * subscriptions' records are orphans. */
void group_worker_gone(unsigned index);

/* Wake-ups between workers writing one SQLite log: a commit's rows are
 * visible to the others the moment it returns, which the file watch cannot
 * tell them (it fires on the -wal write, before the commit shows).
 * group_wake_fd is this worker's eventfd (-1 outside a group), readable
 * after another worker called group_wake_others; group_wake_taken clears it
 * before the worker looks for the new rows. */
int group_wake_fd(void);
void group_wake_others(void);
void group_wake_taken(void);

/* Main process: every worker running and ready. */
bool group_all_ready(void);

/* Main process: every running worker stamped within the last within_ms
 * (one waiting to be started again does not count). */
bool group_all_alive(uint64_t within_ms);

/* The monotonic clock in ms, as the stamps use it. */
uint64_t group_clock_ms(void);

#endif
