/* SPDX-License-Identifier: BSD-2-Clause */
/* presence_table.h: streams counted per key with a column per worker, in
 * one block of memory that is either this process's own or, in a group of
 * workers, shared by every worker (mapped by the main process before it
 * forks, so each worker sees it at the same address). Two users: the
 * counts behind presence (presence.h), and in a group the open streams per
 * client address that per_address_limit caps (group.c, with
 * presence_table_add_below; those keys never announce a join).
 *
 * An entry is a key with a count per column (one column per worker; one
 * in a single process) and their total. presence.c keys an entry by a
 * reader's topic pattern ("room/" "*"), or by a pattern and a subject
 * ("room/" "*" PRESENCE_KEY_SEP "user-42"). A subject entry also remembers
 * whether its join was announced and, once its total fell to 0, when: a
 * leave is due only after the grace period, and a new stream within it
 * finds the join still announced (no leave, no join).
 *
 * An entry leaves the table once it counts no stream and no leave is
 * pending, so the table holds only the keys in use, whatever came and
 * went before: a lookup costs a few slots of a hash index at most half
 * full, a scan reads the keys in use (presence_table.c draws the layout).
 *
 * A robust, process-shared mutex guards the block, so a worker killed
 * while holding it leaves the lock usable (and the next holder repairs
 * what it left half done); the main process drops a dead worker's column
 * (presence_table_drop_column) and its subjects become due to leave after
 * the grace. Every call below takes the lock itself. */
#ifndef HERALD_PRESENCE_TABLE_H
#define HERALD_PRESENCE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PRESENCE_KEY_MAX 260    /* pattern (128), separator, subject (128), NUL */
#define PRESENCE_KEY_SEP '\x1f' /* between a pattern and a subject: in neither */

struct presence_table;

/* Map a table with ncols columns (1..64) and room for capacity keys at
 * once (at least 1024, at most 8,388,608), each of at most key_max - 1
 * bytes (key_max 2..PRESENCE_KEY_MAX; a longer key counts as its first
 * key_max - 1 bytes): shared between processes that fork after this call,
 * or private to this one. About key_max + 24 + 4 x ncols bytes a key plus
 * 16 bytes of index a key are reserved; pages are touched only as keys are
 * used. Returns NULL with errno set (EINVAL: ncols or key_max out of
 * range). */
struct presence_table *presence_table_map(unsigned ncols, size_t capacity, size_t key_max, bool shared);

/* Unmap t (NULL: nothing). In a group each process unmaps its own view. */
void presence_table_unmap(struct presence_table *t);

/* Count one more stream under key in column col. Returns 1 when key's
 * total went from 0 to 1 and, with announce set, its join was not
 * announced (the caller announces it now: the entry remembers); 0
 * otherwise (a reconnect within the grace finds the join announced); -1
 * when the table is full (nothing counted). */
int presence_table_add(struct presence_table *t, unsigned col, const char *key, bool announce);

/* Count n streams under key in column col at once, with no join (a copy
 * of counts made elsewhere; n 0 counts nothing). Returns 0, or -1 when the
 * table is full. */
int presence_table_put(struct presence_table *t, unsigned col, const char *key, uint32_t n);

/* Count one more stream under key in column col, with no join, unless
 * key's total is already limit or more (0: no limit): the check and the
 * count under one hold of the lock, so that columns counting at once
 * cannot pass the limit together. Returns 0 when counted, 1 when at the
 * limit (nothing counted), -1 when the table is full (nothing counted). */
int presence_table_add_below(struct presence_table *t, unsigned col, const char *key, size_t limit);

/* Count one stream less under key in column col (as counted by
 * presence_table_add). When the total falls to 0 and a join was
 * announced, the entry notes now_ms: presence_table_take_leaves hands
 * it out once grace has passed with no stream back. */
void presence_table_del(struct presence_table *t, unsigned col, const char *key, uint64_t now_ms);

/* The total under key (0 for an unknown key). */
uint32_t presence_table_total(struct presence_table *t, const char *key);

/* The totals of the n keys at once, under one hold of the lock, into
 * totals[]. */
void presence_table_totals(struct presence_table *t, const char *const *keys, size_t n, uint32_t *totals);

/* Call fn(arg, key, total) for each key with a total above 0, under the
 * lock (fn must not call back into t). Returns how many. */
size_t presence_table_each(struct presence_table *t, void (*fn)(void *arg, const char *key, uint32_t total), void *arg);

/* Call fn(arg, key, n) for each key column col counts (n above 0), under
 * the lock (fn must not call back into t). */
void presence_table_each_column(struct presence_table *t, unsigned col,
				void (*fn)(void *arg, const char *key, uint32_t n), void *arg);

/* Main process: column col's worker is gone; its counts leave every
 * total, and the subjects that fall to 0 become due to leave after the
 * grace from now_ms. */
void presence_table_drop_column(struct presence_table *t, unsigned col, uint64_t now_ms);

/* Whether leaves may be due (a cheap look without the lock). */
bool presence_table_leaves_pending(const struct presence_table *t);

/* Hand out every subject entry whose total has been 0 for grace_ms by
 * now_ms with its join announced: fn(arg, key) once each, under the lock
 * (fn must not call back into t); the entry then counts as left (a new
 * stream is a join again). Returns how many. */
size_t presence_table_take_leaves(struct presence_table *t, uint64_t now_ms, uint64_t grace_ms,
				  void (*fn)(void *arg, const char *key), void *arg);

/* Keys in use (a total above 0, or a leave pending). */
size_t presence_table_used(struct presence_table *t);

/* Slots of the index looked at since t was mapped: the work lookups cost,
 * counted (tests and benchmarks read it). */
uint64_t presence_table_probes(struct presence_table *t);

#endif
