/* group.c: the shared region of a group of workers: slots, counts, the
 * robust lock. See group.h.
 *
 * Layout, one anonymous shared mapping made before fork (so every worker
 * sees it at the same address): struct region, then the count table, an
 * open-addressed array of entries { used, total, key[64], n[nworkers] }.
 * An entry once used is never emptied again (its total may fall to 0 and
 * the entry then serves another key), so probe chains never break and a
 * lookup stops at the first never-used entry. After the table, the indexes
 * of the entries ever used, in order, so that dropping a dead worker's
 * share reads only those (never the untouched pages of the table). */
#include "group.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "presence_table.h"
#include "util.h"

#define KEY_LEN 64

struct slot {
	pid_t pid;
	bool ready;
	uint64_t alive_ms;
	uint64_t readers; /* this worker's column total */
	struct group_figures f;
	struct metrics m;      /* the worker's counters as last stamped */
	uint32_t wake_pending; /* its wake fd was written and not yet taken */
};

struct region {
	pthread_mutex_t lock;
	unsigned nworkers;
	size_t nentries; /* a power of two */
	size_t entry_size;
	size_t nused;           /* entries ever used, listed in the index after the table */
	struct metrics retired; /* counters of workers that died */
	struct slot slot[GROUP_MAX_WORKERS];
};

struct entry {
	uint32_t used;
	uint32_t total;
	char key[KEY_LEN];
	uint32_t n[]; /* one per worker */
};

static struct region *g;
static size_t g_len;
static struct presence_table *presence; /* the presence counts, a column per worker */
static int self = -1;
/* One eventfd per worker index, made before the first fork, so every worker
 * (a restarted one too) inherits all of them: a commit wakes the others. */
static int wake_fds[GROUP_MAX_WORKERS];
static unsigned n_wake_fds;

uint64_t group_clock_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct entry *entry_at(size_t i)
{
	return (struct entry *)((char *)(g + 1) + i * g->entry_size);
}

static uint32_t *used_index(void)
{
	return (uint32_t *)(void *)((char *)(g + 1) + g->nentries * g->entry_size);
}

/* Take the lock; a holder that died leaves it to us, consistent again
 * (what it was changing is at worst one worker's count or copy, and the
 * main process zeroes a dead worker's share anyway). */
static void lock(void)
{
	int r = pthread_mutex_lock(&g->lock);
	if (r == EOWNERDEAD)
		pthread_mutex_consistent(&g->lock);
}

static void unlock(void)
{
	pthread_mutex_unlock(&g->lock);
}

int group_create(unsigned nworkers, size_t max_keys, size_t presence_keys)
{
	if (nworkers < 2 || nworkers > GROUP_MAX_WORKERS)
		return -EINVAL;
	presence = presence_table_map(nworkers, presence_keys, true);
	if (!presence)
		return -errno;
	size_t n = 1024;
	while (n < max_keys * 2 && n < ((size_t)1 << 22))
		n *= 2;
	size_t esize = (sizeof(struct entry) + nworkers * sizeof(uint32_t) + 7) & ~(size_t)7;
	size_t len = sizeof(struct region) + n * esize + n * sizeof(uint32_t);
	/* Pages are touched only as keys land on them. */
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		presence_table_unmap(presence);
		presence = NULL;
		return -e;
	}
	g = p;
	g_len = len;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int r = pthread_mutex_init(&g->lock, &a);
	pthread_mutexattr_destroy(&a);
	if (r != 0) {
		munmap(p, len);
		g = NULL;
		presence_table_unmap(presence);
		presence = NULL;
		return -r;
	}
	g->nworkers = nworkers;
	g->nentries = n;
	g->entry_size = esize;
	for (unsigned i = 0; i < nworkers; i++) {
		wake_fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (wake_fds[i] < 0) {
			r = errno;
			n_wake_fds = i;
			group_destroy();
			return -r;
		}
	}
	n_wake_fds = nworkers;
	return 0;
}

void group_destroy(void)
{
	if (!g)
		return;
	for (unsigned i = 0; i < n_wake_fds; i++)
		close(wake_fds[i]);
	n_wake_fds = 0;
	if (self < 0)
		pthread_mutex_destroy(&g->lock);
	munmap(g, g_len);
	g = NULL;
	presence_table_unmap(presence);
	presence = NULL;
	self = -1;
}

void group_enter(unsigned index)
{
	self = (int)index;
}

bool group_on(void)
{
	return g && self >= 0;
}

unsigned group_workers(void)
{
	return g ? g->nworkers : 0;
}

int group_index(void)
{
	return self;
}

struct presence_table *group_presence_table(void)
{
	return presence;
}

static size_t hash(const char *key)
{
	unsigned h = 2166136261u;
	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return h;
}

/* The entry holding key, or NULL; with spare set, also the first entry a
 * new key may take on its probe path (NULL when the table is full). */
static struct entry *find(const char *key, struct entry **spare)
{
	size_t mask = g->nentries - 1;
	if (spare)
		*spare = NULL;
	for (size_t i = hash(key) & mask, seen = 0; seen < g->nentries; i = (i + 1) & mask, seen++) {
		struct entry *e = entry_at(i);
		if (!e->used) {
			if (spare && !*spare)
				*spare = e;
			return NULL;
		}
		if (strncmp(e->key, key, KEY_LEN) == 0)
			return e;
		if (spare && !*spare && e->total == 0)
			*spare = e;
	}
	return NULL;
}

/* key's entry, taken from a spare one when new; NULL when the table is
 * full. Under the lock. */
static struct entry *entry_for(const char *key)
{
	struct entry *spare, *e = find(key, &spare);
	if (!e && spare) {
		e = spare;
		if (!e->used)
			used_index()[g->nused++] = (uint32_t)(((char *)e - (char *)(g + 1)) / g->entry_size);
		memset(e, 0, g->entry_size);
		e->used = 1;
		snprintf(e->key, sizeof(e->key), "%s", key);
	}
	return e;
}

/* Count one more reader under key in this worker's column. Under the lock. */
static void add_locked(const char *key)
{
	struct entry *e = entry_for(key);
	if (e) {
		e->n[self]++;
		e->total++;
	} else {
		/* Cannot happen while the table is twice the reader cap; the
		 * reader is served, uncounted by address. */
		log_warn("the group's count table is full; %s is not counted", key);
	}
	g->slot[self].readers++;
}

void group_count_add(const char *key)
{
	lock();
	add_locked(key);
	unlock();
}

int group_count_admit(const char *key, size_t per_key_limit, size_t total_limit)
{
	int r = 0;
	lock();
	size_t total = 0;
	for (unsigned i = 0; i < g->nworkers; i++)
		total += g->slot[i].readers;
	struct entry *e = per_key_limit ? find(key, NULL) : NULL;
	if (total_limit && total >= total_limit)
		r = -1;
	else if (e && e->total >= per_key_limit)
		r = -2;
	else
		add_locked(key);
	unlock();
	return r;
}

void group_count_del(const char *key)
{
	lock();
	struct entry *e = find(key, NULL);
	if (e && e->n[self] > 0) {
		e->n[self]--;
		e->total--;
	}
	if (g->slot[self].readers > 0)
		g->slot[self].readers--;
	unlock();
}

size_t group_count(const char *key)
{
	lock();
	struct entry *e = find(key, NULL);
	size_t n = e ? e->total : 0;
	unlock();
	return n;
}

size_t group_readers(void)
{
	size_t n = 0;
	for (unsigned i = 0; i < g->nworkers; i++)
		n += __atomic_load_n(&g->slot[i].readers, __ATOMIC_RELAXED);
	return n;
}

void group_stamp(const struct group_figures *f, const struct metrics *m)
{
	struct slot *s = &g->slot[self];
	lock();
	s->f = *f;
	s->m = *m;
	unlock();
	__atomic_store_n(&s->alive_ms, group_clock_ms(), __ATOMIC_RELAXED);
}

void group_set_ready(void)
{
	__atomic_store_n(&g->slot[self].pid, getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&g->slot[self].alive_ms, group_clock_ms(), __ATOMIC_RELAXED);
	__atomic_store_n(&g->slot[self].ready, true, __ATOMIC_RELEASE);
}

unsigned group_sum(struct metrics *m, struct group_figures *f, struct group_worker *w)
{
	memset(f, 0, sizeof(*f));
	lock();
	*m = g->retired;
	for (unsigned i = 0; i < g->nworkers; i++) {
		struct slot *s = &g->slot[i];
		w[i] = (struct group_worker){ .pid = s->pid, .ready = s->ready, .readers = s->readers };
		if (!s->pid)
			continue;
		metrics_add(m, &s->m);
		f->connections += s->f.connections;
		f->readers_catching_up += s->f.readers_catching_up;
		f->publish_pending += s->f.publish_pending;
		f->http2_sessions += s->f.http2_sessions;
		f->http2_streams += s->f.http2_streams;
		f->last_event_id = MAX(f->last_event_id, s->f.last_event_id);
	}
	unlock();
	return g->nworkers;
}

void group_worker_started(unsigned index, pid_t pid)
{
	/* The slot was emptied when its last worker went (or never used);
	 * the new worker may already have marked itself ready: keep that. */
	struct slot *s = &g->slot[index];
	lock();
	s->pid = pid;
	if (!s->alive_ms)
		s->alive_ms = group_clock_ms();
	unlock();
}

void group_worker_gone(unsigned index)
{
	struct slot *s = &g->slot[index];
	lock();
	for (size_t i = 0; i < g->nused; i++) {
		/* The total is summed again from the other columns: a worker
		 * killed inside the lock may have changed its column and not
		 * yet the total. */
		struct entry *e = entry_at(used_index()[i]);
		uint32_t total = 0;
		e->n[index] = 0;
		for (unsigned w = 0; w < g->nworkers; w++)
			total += e->n[w];
		e->total = total;
	}
	metrics_add(&g->retired, &s->m);
	memset(s, 0, sizeof(*s));
	unlock();
	presence_table_drop_column(presence, index, group_clock_ms());
}

int group_wake_fd(void)
{
	return group_on() ? wake_fds[self] : -1;
}

void group_wake_others(void)
{
	if (!group_on())
		return;
	for (unsigned i = 0; i < n_wake_fds; i++) {
		/* One write until the worker takes it: a worker behind by
		 * many commits is woken once, and reads them all. */
		if ((int)i == self || __atomic_exchange_n(&g->slot[i].wake_pending, 1, __ATOMIC_ACQ_REL))
			continue;
		uint64_t one = 1;
		if (write(wake_fds[i], &one, sizeof(one)) < 0 && errno != EAGAIN)
			log_warn("group: waking worker %u: %s", i, strerror(errno));
	}
}

void group_wake_taken(void)
{
	if (!group_on())
		return;
	/* Clear first, then drain: a wake after the clear writes again. */
	__atomic_store_n(&g->slot[self].wake_pending, 0, __ATOMIC_RELEASE);
	uint64_t v;
	while (read(wake_fds[self], &v, sizeof(v)) < 0 && errno == EINTR)
		;
}

bool group_all_ready(void)
{
	for (unsigned i = 0; i < g->nworkers; i++)
		if (!g->slot[i].pid || !__atomic_load_n(&g->slot[i].ready, __ATOMIC_ACQUIRE))
			return false;
	return true;
}

bool group_all_alive(uint64_t within_ms)
{
	uint64_t now = group_clock_ms();
	for (unsigned i = 0; i < g->nworkers; i++) {
		/* A worker waiting to be started again is the main process's
		 * business, which is alive; a running one must stamp. */
		uint64_t at = __atomic_load_n(&g->slot[i].alive_ms, __ATOMIC_RELAXED);
		if (g->slot[i].pid && now > at && now - at > within_ms)
			return false;
	}
	return true;
}
