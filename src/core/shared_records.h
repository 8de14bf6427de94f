/* SPDX-License-Identifier: BSD-2-Clause */
/* shared_records.h: byte records, each owned by a column (a worker), in one
 * block of memory that is this process's own or, in a group of workers,
 * shared by every worker (mapped by the main process before it forks). Its
 * user: the Mercure endpoint's active subscriptions in a group without
 * Redis (mercure_subs.c), so that any worker answers for all.
 *
 * A record is a chain of fixed cells (SHARED_RECORD_CELL bytes of it
 * each; most records take one), so the block holds many short records
 * and a few long ones without a free-space search: cells are taken from a
 * free list or from the untouched rest of the block, whose pages are
 * touched only as it is used. A record is added and deleted by its owner
 * only; the main process orphans a dead worker's records
 * (shared_records_orphan_column), and one live worker claims each of them
 * (shared_records_claim_orphans), once. A robust, process-shared mutex
 * guards the block, so a worker killed while holding it leaves it usable
 * (at worst the cells of the record it was adding or deleting are lost
 * until the group restarts). Every call below takes the lock itself. */
#ifndef HERALD_SHARED_RECORDS_H
#define HERALD_SHARED_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHARED_RECORD_CELL 240  /* record bytes per cell */
#define SHARED_RECORD_MAX 16384 /* bytes of a record at most */

struct shared_records;

/* Map a block of ncells cells (at least 1,024, at most 16,777,216),
 * shared between processes that fork after this call, or private to this
 * one. About SHARED_RECORD_CELL + 16 bytes a cell are reserved. Returns
 * NULL with errno set. */
struct shared_records *shared_records_map(size_t ncells, bool shared);

/* Unmap t (NULL: nothing). In a group each process unmaps its own view. */
void shared_records_unmap(struct shared_records *t);

/* Add rec[0..len) owned by col (0..63). Returns its handle (never 0), or
 * 0 when it does not fit (longer than SHARED_RECORD_MAX, or the block is
 * full): nothing added. */
uint32_t shared_records_add(struct shared_records *t, unsigned col, const char *rec, size_t len);

/* Delete the record of handle (0: nothing), added by this column. */
void shared_records_del(struct shared_records *t, uint32_t handle);

/* cb(arg, rec, len) for every record not orphaned, in cell order (rec is
 * a copy, valid during the call; the lock is not held during cb). At most
 * limit records (0: no limit). Returns how many. */
typedef void shared_records_cb(void *arg, const char *rec, size_t len);
size_t shared_records_each(struct shared_records *t, size_t limit, shared_records_cb *cb, void *arg);

/* The records of col, a dead worker's, are orphans: left out of each,
 * waiting to be claimed. Returns how many. */
size_t shared_records_orphan_column(struct shared_records *t, unsigned col);

/* Whether orphans wait (a cheap look, without the lock). */
bool shared_records_has_orphans(const struct shared_records *t);

/* Take up to limit orphans (deleted, so no other process gets them) and
 * call cb for each. Returns how many. */
size_t shared_records_claim_orphans(struct shared_records *t, size_t limit, shared_records_cb *cb, void *arg);

/* Cells in use (for tests). */
size_t shared_records_cells_used(struct shared_records *t);

#endif
