/* SPDX-License-Identifier: BSD-2-Clause */
/* shared_records.c: records in chains of fixed cells, in one mapping (see
 * shared_records.h).
 *
 * Layout: the header (the lock, the counts, the free list's head), then
 * ncells cells of 256 bytes. A record's first cell (its head, whose index
 * + 1 is the record's handle) holds its owner, its whole length and the
 * orphan mark; each cell holds up to SHARED_RECORD_CELL of its bytes and
 * the index + 1 of the next (0: the last). A free cell is on the free
 * list (through next) or at or past high, never touched yet. What a cb
 * sees is copied out under the lock first, so no other worker waits on a
 * caller's work. */
#include "core/shared_records.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/shared_map.h"
#include "common/util.h"

#define CELLS_MIN 1024
#define CELLS_MAX (UINT32_C(1) << 24)
#define CELLS_PER_RECORD_MAX ((SHARED_RECORD_MAX + SHARED_RECORD_CELL - 1) / SHARED_RECORD_CELL)

enum { CELL_FREE, CELL_HEAD, CELL_BODY };

struct cell {
	uint32_t next;  /* index + 1 of the record's next cell; 0: the last */
	uint32_t total; /* a head: the record's length */
	uint16_t len;   /* of the record's bytes in this cell */
	uint8_t col;    /* a head: its owner */
	uint8_t state;  /* CELL_* */
	uint8_t orphan; /* a head: its owner died */
	uint8_t pad[3];
	char data[SHARED_RECORD_CELL];
};

_Static_assert(sizeof(struct cell) == 256, "a cell is 256 bytes");

struct shared_records {
	pthread_mutex_t lock;
	size_t map_len;
	uint32_t ncells;
	uint32_t high;      /* cells below were used once */
	uint32_t free_head; /* index + 1 of the first free cell below high; 0: none */
	uint32_t used;      /* cells in records */
	uint32_t orphans;   /* orphaned records not yet claimed (read without the lock too) */
	struct cell cells[];
};

_Static_assert(offsetof(struct shared_records, lock) == 0, "shared_map_new puts the lock first");

static void lock(struct shared_records *t)
{
	if (pthread_mutex_lock(&t->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&t->lock);
}

static void unlock(struct shared_records *t)
{
	pthread_mutex_unlock(&t->lock);
}

struct shared_records *shared_records_map(size_t ncells, bool shared)
{
	size_t n = ncells < CELLS_MIN ? CELLS_MIN : ncells > CELLS_MAX ? CELLS_MAX : ncells;
	size_t len = sizeof(struct shared_records) + n * sizeof(struct cell);
	struct shared_records *t = shared_map_new(len, shared);
	if (!t)
		return NULL;
	t->map_len = len;
	t->ncells = (uint32_t)n;
	return t;
}

void shared_records_unmap(struct shared_records *t)
{
	if (t)
		munmap(t, t->map_len);
}

/* A free cell's index (the caller checked that one is left). */
static uint32_t take_cell(struct shared_records *t)
{
	uint32_t i;
	if (t->free_head) {
		i = t->free_head - 1;
		t->free_head = t->cells[i].next;
	} else {
		i = t->high++;
	}
	t->used++;
	return i;
}

/* Free the chain that starts at cell i. */
static void free_chain(struct shared_records *t, uint32_t i)
{
	for (size_t k = 0; k < CELLS_PER_RECORD_MAX && i < t->high && t->cells[i].state != CELL_FREE; k++) {
		struct cell *c = &t->cells[i];
		uint32_t next = c->next;
		c->state = CELL_FREE;
		c->orphan = 0;
		c->next = t->free_head;
		t->free_head = i + 1;
		t->used--;
		if (!next)
			break;
		i = next - 1;
	}
}

uint32_t shared_records_add(struct shared_records *t, unsigned col, const char *rec, size_t len)
{
	if (len > SHARED_RECORD_MAX || col > 63)
		return 0;
	size_t k = len ? (len + SHARED_RECORD_CELL - 1) / SHARED_RECORD_CELL : 1;
	lock(t);
	if (k > t->ncells - t->used) {
		unlock(t);
		return 0;
	}
	/* The body first, the head last: a record is seen only whole. */
	uint32_t head = take_cell(t), prev = head;
	size_t off = 0;
	for (size_t j = 0; j < k; j++) {
		uint32_t i = j ? take_cell(t) : head;
		struct cell *c = &t->cells[i];
		size_t n = MIN(len - off, (size_t)SHARED_RECORD_CELL);
		memcpy(c->data, rec + off, n);
		off += n;
		c->len = (uint16_t)n;
		c->next = 0;
		c->orphan = 0;
		if (j) {
			c->state = CELL_BODY;
			t->cells[prev].next = i + 1;
		}
		prev = i;
	}
	struct cell *h = &t->cells[head];
	h->total = (uint32_t)len;
	h->col = (uint8_t)col;
	h->state = CELL_HEAD;
	unlock(t);
	return head + 1;
}

void shared_records_del(struct shared_records *t, uint32_t handle)
{
	if (!handle)
		return;
	lock(t);
	uint32_t i = handle - 1;
	if (i < t->high && t->cells[i].state == CELL_HEAD && !t->cells[i].orphan)
		free_chain(t, i);
	unlock(t);
}

/* A growing copy of records: each its length (size_t) then its bytes. */
struct copy {
	char *p;
	size_t n, cap, count;
};

static void copy_record(struct shared_records *t, uint32_t i, struct copy *out)
{
	size_t total = t->cells[i].total;
	if (out->n + sizeof(size_t) + total > out->cap) {
		out->cap = MAX(out->cap * 2, out->n + sizeof(size_t) + total + 4096);
		out->p = xrealloc(out->p, out->cap);
	}
	char *w = out->p + out->n + sizeof(size_t);
	size_t got = 0;
	for (size_t k = 0; k < CELLS_PER_RECORD_MAX && i < t->high; k++) {
		const struct cell *c = &t->cells[i];
		size_t n = MIN((size_t)c->len, total - got);
		memcpy(w + got, c->data, n);
		got += n;
		if (!c->next || got == total)
			break;
		i = c->next - 1;
	}
	memcpy(out->p + out->n, &got, sizeof(got));
	out->n += sizeof(size_t) + got;
	out->count++;
}

static void hand_out(struct copy *c, shared_records_cb *cb, void *arg)
{
	for (size_t off = 0; off < c->n;) {
		size_t len;
		memcpy(&len, c->p + off, sizeof(len));
		off += sizeof(len);
		cb(arg, c->p + off, len);
		off += len;
	}
	free(c->p);
}

size_t shared_records_each(struct shared_records *t, size_t limit, shared_records_cb *cb, void *arg)
{
	struct copy c = { 0 };
	lock(t);
	for (uint32_t i = 0; i < t->high && (!limit || c.count < limit); i++)
		if (t->cells[i].state == CELL_HEAD && !t->cells[i].orphan)
			copy_record(t, i, &c);
	unlock(t);
	size_t n = c.count;
	hand_out(&c, cb, arg);
	return n;
}

size_t shared_records_orphan_column(struct shared_records *t, unsigned col)
{
	size_t n = 0;
	lock(t);
	for (uint32_t i = 0; i < t->high; i++) {
		struct cell *c = &t->cells[i];
		if (c->state == CELL_HEAD && !c->orphan && c->col == col) {
			c->orphan = 1;
			n++;
		}
	}
	__atomic_add_fetch(&t->orphans, (uint32_t)n, __ATOMIC_RELEASE);
	unlock(t);
	return n;
}

bool shared_records_has_orphans(const struct shared_records *t)
{
	return __atomic_load_n(&t->orphans, __ATOMIC_ACQUIRE) != 0;
}

size_t shared_records_claim_orphans(struct shared_records *t, size_t limit, shared_records_cb *cb, void *arg)
{
	struct copy c = { 0 };
	lock(t);
	for (uint32_t i = 0; i < t->high && c.count < limit && t->orphans; i++) {
		if (t->cells[i].state != CELL_HEAD || !t->cells[i].orphan)
			continue;
		copy_record(t, i, &c);
		free_chain(t, i);
		__atomic_sub_fetch(&t->orphans, 1, __ATOMIC_RELEASE);
	}
	unlock(t);
	size_t n = c.count;
	hand_out(&c, cb, arg);
	return n;
}

size_t shared_records_cells_used(struct shared_records *t)
{
	lock(t);
	size_t n = t->used;
	unlock(t);
	return n;
}
