/* presence_table.c: the presence counts in one mapped block (see
 * presence_table.h).
 *
 * Layout: struct presence_table, then an open-addressed array of entries
 * { used, total, announced, zero_ms, key, n[ncols] }, then the indexes of
 * the entries ever used, in order. As in group.c's count table, an entry
 * once used is never emptied: one whose total is 0 and whose join is not
 * announced may take another key, so probe chains never break and a
 * lookup stops at the first never-used entry; scans read only the entries
 * ever used. */
#include "presence_table.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

struct entry {
	uint32_t used;
	uint32_t total;
	uint32_t announced; /* a join went out and no leave since */
	uint32_t pad;
	uint64_t zero_ms; /* when total fell to 0 with the join announced; 0: no leave pending */
	char key[PRESENCE_KEY_MAX];
	uint32_t n[]; /* one per column */
};

struct presence_table {
	pthread_mutex_t lock;
	unsigned ncols;
	size_t nentries; /* a power of two */
	size_t entry_size;
	size_t nused;   /* entries ever used, listed after the table */
	size_t pending; /* entries with a leave pending */
	size_t map_len;
};

static struct entry *entry_at(struct presence_table *t, size_t i)
{
	return (struct entry *)((char *)(t + 1) + i * t->entry_size);
}

static uint32_t *used_index(struct presence_table *t)
{
	return (uint32_t *)(void *)((char *)(t + 1) + t->nentries * t->entry_size);
}

static void lock(struct presence_table *t)
{
	/* A holder that died left at worst one column's count half changed;
	 * the main process drops that column anyway. */
	if (pthread_mutex_lock(&t->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&t->lock);
}

static void unlock(struct presence_table *t)
{
	pthread_mutex_unlock(&t->lock);
}

struct presence_table *presence_table_map(unsigned ncols, size_t capacity, bool shared)
{
	if (ncols < 1 || ncols > 64) {
		errno = EINVAL;
		return NULL;
	}
	size_t n = 1024;
	while (n < capacity && n < ((size_t)1 << 23))
		n *= 2;
	size_t esize = (sizeof(struct entry) + ncols * sizeof(uint32_t) + 7) & ~(size_t)7;
	size_t len = sizeof(struct presence_table) + n * esize + n * sizeof(uint32_t);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	struct presence_table *t = p;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int r = pthread_mutex_init(&t->lock, &a);
	pthread_mutexattr_destroy(&a);
	if (r != 0) {
		munmap(p, len);
		errno = r;
		return NULL;
	}
	t->ncols = ncols;
	t->nentries = n;
	t->entry_size = esize;
	t->map_len = len;
	return t;
}

void presence_table_unmap(struct presence_table *t)
{
	if (t)
		munmap(t, t->map_len);
}

static size_t hash(const char *key)
{
	unsigned h = 2166136261u; /* FNV-1a */
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* The entry holding key, or NULL; with spare set, also the first entry a
 * new key may take on its probe path (NULL when there is none). */
static struct entry *find(struct presence_table *t, const char *key, struct entry **spare)
{
	size_t mask = t->nentries - 1;
	if (spare)
		*spare = NULL;
	for (size_t i = hash(key) & mask, seen = 0; seen < t->nentries; i = (i + 1) & mask, seen++) {
		struct entry *e = entry_at(t, i);
		if (!e->used) {
			if (spare && !*spare)
				*spare = e;
			return NULL;
		}
		if (strncmp(e->key, key, PRESENCE_KEY_MAX) == 0)
			return e;
		if (spare && !*spare && e->total == 0 && !e->announced)
			*spare = e;
	}
	return NULL;
}

/* key's entry, taken from a spare one when new; NULL when the table is
 * full. Under the lock. */
static struct entry *entry_for(struct presence_table *t, const char *key)
{
	struct entry *spare, *e = find(t, key, &spare);
	if (!e && spare) {
		e = spare;
		if (!e->used)
			used_index(t)[t->nused++] = (uint32_t)(((char *)e - (char *)(t + 1)) / t->entry_size);
		memset(e, 0, t->entry_size);
		e->used = 1;
		snprintf(e->key, sizeof(e->key), "%s", key);
	}
	return e;
}

int presence_table_put(struct presence_table *t, unsigned col, const char *key, uint32_t n)
{
	lock(t);
	struct entry *e = entry_for(t, key);
	if (e) {
		e->n[col] += n;
		e->total += n;
	}
	unlock(t);
	return e ? 0 : -1;
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
	struct entry *e = find(t, key, NULL);
	if (e && e->n[col] > 0) {
		e->n[col]--;
		if (--e->total == 0)
			fell_to_zero(t, e, now_ms);
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
		struct entry *e = find(t, keys[i], NULL);
		totals[i] = e ? e->total : 0;
	}
	unlock(t);
}

size_t presence_table_each(struct presence_table *t, void (*fn)(void *arg, const char *key, uint32_t total), void *arg)
{
	size_t k = 0;
	lock(t);
	for (size_t i = 0; i < t->nused; i++) {
		struct entry *e = entry_at(t, used_index(t)[i]);
		if (e->total > 0) {
			fn(arg, e->key, e->total);
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
	for (size_t i = 0; i < t->nused; i++) {
		struct entry *e = entry_at(t, used_index(t)[i]);
		if (e->n[col] > 0)
			fn(arg, e->key, e->n[col]);
	}
	unlock(t);
}

void presence_table_drop_column(struct presence_table *t, unsigned col, uint64_t now_ms)
{
	lock(t);
	for (size_t i = 0; i < t->nused; i++) {
		/* The total is summed again from the other columns: a worker
		 * killed inside the lock may have changed its column and not
		 * yet the total. */
		struct entry *e = entry_at(t, used_index(t)[i]);
		uint32_t total = 0, before = e->total;
		e->n[col] = 0;
		for (unsigned c = 0; c < t->ncols; c++)
			total += e->n[c];
		e->total = total;
		if (total == 0 && before > 0)
			fell_to_zero(t, e, now_ms);
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
	for (size_t i = 0; i < t->nused && t->pending > 0; i++) {
		struct entry *e = entry_at(t, used_index(t)[i]);
		if (!e->zero_ms || e->total > 0 || now_ms < e->zero_ms + grace_ms)
			continue;
		e->zero_ms = 0;
		e->announced = 0;
		t->pending--;
		fn(arg, e->key);
		k++;
	}
	unlock(t);
	return k;
}

size_t presence_table_used(struct presence_table *t)
{
	size_t k = 0;
	lock(t);
	for (size_t i = 0; i < t->nused; i++) {
		struct entry *e = entry_at(t, used_index(t)[i]);
		k += e->total > 0 || e->zero_ms;
	}
	unlock(t);
	return k;
}
