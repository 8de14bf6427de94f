/* SPDX-License-Identifier: BSD-2-Clause */
/* presence_table.c: counts per key and column in one mapped block (see
 * presence_table.h).
 *
 * Layout: struct presence_table, then the index, then the pool.
 *   index  nslots 64-bit slots (a power of two, at least twice the pool):
 *          0 for an empty slot, else the key's hash (high 32 bits) and
 *          its entry's place in the pool plus one (low 32 bits). Open
 *          addressing with linear probing.
 *   pool   cap entries { hash, total, announced, zero_ms, n[ncols], key },
 *          the key's room (key_max bytes) fixed per table, the nlive in
 *          use first, with no gap.
 * Invariants, whenever the lock is free:
 *   - every entry in pool[0, nlive) has exactly one index slot, found by
 *     probing from its hash, and no empty slot lies between the two;
 *   - an entry is in the pool while its total is above 0 or its join is
 *     announced (a leave pending); the step that makes it neither takes
 *     it out: its slot leaves the index by backward shift (the slots after
 *     it that may move closer to their home do, so no tombstone is left),
 *     and the last entry of the pool moves into its place.
 * So the index is at most half full whatever the history of keys, a
 * lookup of an absent key looks at 2.5 slots on average, and scans read
 * only the entries in use.
 *
 * A worker killed inside the lock may leave a step half done. The moves
 * of entries are written down before they start (moving_from/moving_to);
 * the next holder (pthread's EOWNERDEAD) finishes such a move, drops
 * entries that are neither counted nor pending, and builds the index
 * again from the pool, which is the truth. */
#include "core/presence_table.h"

#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "common/shared_map.h"

#define POOL_MIN 1024
#define POOL_MAX ((size_t)1 << 23)
#define NO_MOVE UINT32_MAX

/* Stores before it are not moved after it by the compiler: a worker killed
 * between two steps leaves them done in order. */
#define STEP() __atomic_signal_fence(__ATOMIC_SEQ_CST)

struct entry {
	uint32_t hash;
	uint32_t total;
	uint32_t announced; /* a join went out and no leave since */
	uint32_t pad;
	uint64_t zero_ms; /* when total fell to 0 with the join announced; 0: no leave pending */
	uint32_t n[];     /* one per column, then the key (key_of) */
};

struct presence_table {
	pthread_mutex_t lock;
	unsigned ncols;
	uint32_t moving_from, moving_to; /* an entry moving in the pool; moving_from NO_MOVE: none */
	size_t cap;                      /* entries the pool holds */
	size_t nlive;                    /* entries in use: pool[0, nlive) */
	size_t nslots;                   /* index slots, a power of two */
	size_t entry_size;
	size_t key_off, key_max; /* where an entry's key starts, and its room */
	size_t pending;          /* entries with a leave pending */
	size_t map_len;
	uint64_t probes; /* index slots looked at */
};

_Static_assert(offsetof(struct presence_table, lock) == 0, "shared_map_new puts the lock first");

static uint64_t *slots(struct presence_table *t)
{
	return (uint64_t *)(void *)(t + 1);
}

static struct entry *entry_at(struct presence_table *t, size_t i)
{
	return (struct entry *)(void *)((char *)(slots(t) + t->nslots) + i * t->entry_size);
}

static char *key_of(struct presence_table *t, struct entry *e)
{
	return (char *)e + t->key_off;
}

static size_t place_of(struct presence_table *t, const struct entry *e)
{
	return (size_t)((const char *)e - (const char *)entry_at(t, 0)) / t->entry_size;
}

static uint64_t slot_value(uint32_t hash, size_t place)
{
	return (uint64_t)hash << 32 | (uint64_t)(place + 1);
}

static size_t slot_place(uint64_t v)
{
	return (size_t)(v & 0xffffffffu) - 1;
}

/* The hash of key as the table keeps it: its first key_max - 1 bytes. */
static uint32_t hash(const struct presence_table *t, const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const char *p = key; *p && p < key + t->key_max - 1; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* Put pool[place] (whose hash is h) into the first empty slot from its
 * home. The index always has one: it is at most half full. */
static void index_put(struct presence_table *t, uint32_t h, size_t place)
{
	size_t mask = t->nslots - 1, i = h & mask;
	while (slots(t)[i])
		i = (i + 1) & mask;
	slots(t)[i] = slot_value(h, place);
}

/* The slot pointing at pool[place], whose hash is h. */
static size_t slot_pointing(struct presence_table *t, uint32_t h, size_t place)
{
	size_t mask = t->nslots - 1, i = h & mask;
	for (size_t seen = 0; seen < t->nslots; seen++, i = (i + 1) & mask) {
		t->probes++;
		if (slots(t)[i] == slot_value(h, place))
			break;
	}
	return i;
}

/* Empty slot i, then move back each slot of its run that may sit closer
 * to its home (Knuth's algorithm R for linear probing): no probe chain
 * breaks, and no tombstone is left. */
static void index_remove(struct presence_table *t, size_t i)
{
	size_t mask = t->nslots - 1, j = i;
	uint64_t *s = slots(t);
	for (;;) {
		s[i] = 0;
		for (;;) {
			j = (j + 1) & mask;
			if (!s[j])
				return;
			size_t home = (size_t)(s[j] >> 32) & mask;
			/* Stays when its home lies cyclically in (i, j]. */
			bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
			if (!stays)
				break;
		}
		s[i] = s[j];
		i = j;
	}
}

/* Rebuild after a holder died: finish its move, drop what is neither
 * counted nor pending, and index the pool again. Under the lock. */
static void recover(struct presence_table *t)
{
	if (t->moving_from != NO_MOVE && t->moving_to < t->moving_from && t->moving_from < t->cap) {
		memcpy(entry_at(t, t->moving_to), entry_at(t, t->moving_from), t->entry_size);
		t->nlive = t->moving_from;
	}
	t->moving_from = NO_MOVE;
	size_t k = 0;
	t->pending = 0;
	for (size_t i = 0; i < t->nlive; i++) {
		struct entry *e = entry_at(t, i);
		if (e->total == 0 && !e->announced)
			continue;
		if (k != i)
			memcpy(entry_at(t, k), e, t->entry_size);
		t->pending += entry_at(t, k)->zero_ms != 0;
		k++;
	}
	t->nlive = k;
	memset(slots(t), 0, t->nslots * sizeof(uint64_t));
	for (size_t i = 0; i < t->nlive; i++)
		index_put(t, entry_at(t, i)->hash, i);
}

static void lock(struct presence_table *t)
{
	if (pthread_mutex_lock(&t->lock) == EOWNERDEAD) {
		/* Its counts are at worst one column's half changed; the
		 * main process drops that column anyway. */
		recover(t);
		pthread_mutex_consistent(&t->lock);
	}
}

static void unlock(struct presence_table *t)
{
	pthread_mutex_unlock(&t->lock);
}

struct presence_table *presence_table_map(unsigned ncols, size_t capacity, size_t key_max, bool shared)
{
	if (ncols < 1 || ncols > 64 || key_max < 2 || key_max > PRESENCE_KEY_MAX) {
		errno = EINVAL;
		return NULL;
	}
	size_t cap = capacity < POOL_MIN ? POOL_MIN : capacity > POOL_MAX ? POOL_MAX : capacity;
	size_t nslots = 1;
	while (nslots < 2 * cap)
		nslots *= 2;
	size_t key_off = sizeof(struct entry) + ncols * sizeof(uint32_t);
	size_t esize = (key_off + key_max + 7) & ~(size_t)7;
	size_t len = sizeof(struct presence_table) + nslots * sizeof(uint64_t) + cap * esize;
	struct presence_table *t = shared_map_new(len, shared);
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->moving_from = NO_MOVE;
	t->cap = cap;
	t->nslots = nslots;
	t->entry_size = esize;
	t->key_off = key_off;
	t->key_max = key_max;
	t->map_len = len;
	return t;
}

void presence_table_unmap(struct presence_table *t)
{
	if (t)
		munmap(t, t->map_len);
}

/* The entry holding key, or NULL; *slot is then the empty slot where key
 * would go. Under the lock. */
static struct entry *find(struct presence_table *t, const char *key, uint32_t h, size_t *slot)
{
	size_t mask = t->nslots - 1, i = h & mask;
	uint64_t *s = slots(t);
	for (;; i = (i + 1) & mask) {
		t->probes++;
		if (!s[i])
			break;
		if ((uint32_t)(s[i] >> 32) != h)
			continue;
		struct entry *e = entry_at(t, slot_place(s[i]));
		if (strncmp(key_of(t, e), key, t->key_max - 1) == 0)
			return e;
	}
	*slot = i;
	return NULL;
}

static struct entry *lookup(struct presence_table *t, const char *key)
{
	size_t slot;
	return find(t, key, hash(t, key), &slot);
}

/* key's entry, made when new; NULL when the pool is full. Under the lock. */
static struct entry *entry_for(struct presence_table *t, const char *key)
{
	uint32_t h = hash(t, key);
	size_t slot;
	struct entry *e = find(t, key, h, &slot);
	if (e || t->nlive == t->cap)
		return e;
	/* Written past the pool's end first: a holder killed before nlive
	 * moves leaves nothing half made in the pool. */
	e = entry_at(t, t->nlive);
	memset(e, 0, t->entry_size);
	e->hash = h;
	snprintf(key_of(t, e), t->key_max, "%s", key);
	slots(t)[slot] = slot_value(h, t->nlive);
	STEP();
	t->nlive++;
	return e;
}

/* Take e out of the table when it is neither counted nor pending: its
 * slot leaves the index, the pool's last entry moves into its place.
 * Under the lock. */
static void release_if_unused(struct presence_table *t, struct entry *e)
{
	if (e->total > 0 || e->announced)
		return;
	size_t place = place_of(t, e), last = t->nlive - 1;
	index_remove(t, slot_pointing(t, e->hash, place));
	if (place != last) {
		struct entry *l = entry_at(t, last);
		size_t ls = slot_pointing(t, l->hash, last);
		t->moving_to = (uint32_t)place;
		STEP();
		t->moving_from = (uint32_t)last; /* the move is on from here */
		STEP();
		memcpy(e, l, t->entry_size);
		slots(t)[ls] = slot_value(e->hash, place);
	}
	t->nlive = last;
	STEP();
	t->moving_from = NO_MOVE;
}

/* Count n more under key in column col, with no join, unless key's total
 * is limit or more (0: no limit). Returns 0, 1 (at the limit) or -1 (the
 * pool is full), as presence_table_add_below does. */
static int count_below(struct presence_table *t, unsigned col, const char *key, uint32_t n, size_t limit)
{
	lock(t);
	struct entry *e = entry_for(t, key);
	/* A key made just now counts 0, below any limit: nothing to take out. */
	int r = !e ? -1 : limit && e->total >= limit ? 1 : 0;
	if (r == 0) {
		e->n[col] += n;
		e->total += n;
	}
	unlock(t);
	return r;
}

int presence_table_put(struct presence_table *t, unsigned col, const char *key, uint32_t n)
{
	return n ? count_below(t, col, key, n, 0) : 0;
}

int presence_table_add_below(struct presence_table *t, unsigned col, const char *key, size_t limit)
{
	return count_below(t, col, key, 1, limit);
}

int presence_table_add(struct presence_table *t, unsigned col, const char *key, bool announce)
{
	int r = 0;
	lock(t);
	struct entry *e = entry_for(t, key);
	if (!e) {
		unlock(t);
		return -1;
	}
	e->n[col]++;
	if (e->total++ == 0) {
		if (e->zero_ms) {
			/* Back within the grace: the join still stands. */
			e->zero_ms = 0;
			t->pending--;
		} else if (announce && !e->announced) {
			e->announced = 1;
			r = 1;
		}
	}
	unlock(t);
	return r;
}

/* The total of e fell to 0 at now_ms: a leave is pending if a join was
 * announced. Under the lock. */
static void fell_to_zero(struct presence_table *t, struct entry *e, uint64_t now_ms)
{
	if (e->announced && !e->zero_ms) {
		e->zero_ms = now_ms ? now_ms : 1;
		t->pending++;
	}
}

void presence_table_del(struct presence_table *t, unsigned col, const char *key, uint64_t now_ms)
{
	lock(t);
	struct entry *e = lookup(t, key);
	if (e && e->n[col] > 0) {
		e->n[col]--;
		if (--e->total == 0) {
			fell_to_zero(t, e, now_ms);
			release_if_unused(t, e);
		}
	}
	unlock(t);
}

uint32_t presence_table_total(struct presence_table *t, const char *key)
{
	uint32_t n;
	presence_table_totals(t, &key, 1, &n);
	return n;
}

void presence_table_totals(struct presence_table *t, const char *const *keys, size_t n, uint32_t *totals)
{
	lock(t);
	for (size_t i = 0; i < n; i++) {
		struct entry *e = lookup(t, keys[i]);
		totals[i] = e ? e->total : 0;
	}
	unlock(t);
}

size_t presence_table_each(struct presence_table *t, void (*fn)(void *arg, const char *key, uint32_t total), void *arg)
{
	size_t k = 0;
	lock(t);
	for (size_t i = 0; i < t->nlive; i++) {
		struct entry *e = entry_at(t, i);
		if (e->total > 0) {
			fn(arg, key_of(t, e), e->total);
			k++;
		}
	}
	unlock(t);
	return k;
}

void presence_table_each_column(struct presence_table *t, unsigned col,
				void (*fn)(void *arg, const char *key, uint32_t n), void *arg)
{
	lock(t);
	for (size_t i = 0; i < t->nlive; i++) {
		struct entry *e = entry_at(t, i);
		if (e->n[col] > 0)
			fn(arg, key_of(t, e), e->n[col]);
	}
	unlock(t);
}

void presence_table_drop_column(struct presence_table *t, unsigned col, uint64_t now_ms)
{
	lock(t);
	/* From the end: an entry taken out is replaced by the last one,
	 * which has been seen already. */
	for (size_t i = t->nlive; i-- > 0;) {
		/* The total is summed again from the other columns: a worker
		 * killed inside the lock may have changed its column and not
		 * yet the total. */
		struct entry *e = entry_at(t, i);
		uint32_t total = 0, before = e->total;
		e->n[col] = 0;
		for (unsigned c = 0; c < t->ncols; c++)
			total += e->n[c];
		e->total = total;
		if (total == 0 && before > 0)
			fell_to_zero(t, e, now_ms);
		release_if_unused(t, e);
	}
	unlock(t);
}

bool presence_table_leaves_pending(const struct presence_table *t)
{
	return __atomic_load_n(&t->pending, __ATOMIC_RELAXED) > 0;
}

size_t presence_table_take_leaves(struct presence_table *t, uint64_t now_ms, uint64_t grace_ms,
				  void (*fn)(void *arg, const char *key), void *arg)
{
	size_t k = 0;
	lock(t);
	/* From the end, as in presence_table_drop_column. */
	for (size_t i = t->nlive; i-- > 0 && t->pending > 0;) {
		struct entry *e = entry_at(t, i);
		if (!e->zero_ms || e->total > 0 || now_ms < e->zero_ms + grace_ms)
			continue;
		e->zero_ms = 0;
		e->announced = 0;
		t->pending--;
		fn(arg, key_of(t, e));
		k++;
		release_if_unused(t, e);
	}
	unlock(t);
	return k;
}

size_t presence_table_used(struct presence_table *t)
{
	lock(t);
	size_t k = t->nlive;
	unlock(t);
	return k;
}

uint64_t presence_table_probes(struct presence_table *t)
{
	lock(t);
	uint64_t n = t->probes;
	unlock(t);
	return n;
}
