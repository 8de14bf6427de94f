/* SPDX-License-Identifier: BSD-2-Clause */
/* group.c: the shared memory of a group of workers: slots, the counts per
 * client address, the presence table, the wake-ups. See group.h.
 *
 * Three anonymous shared mappings made before fork (so every worker sees
 * each at the same address): struct region (the slots and the counters of
 * dead workers, under the region's robust lock); the open streams per
 * address key, a presence_table with a column per worker and keys of at
 * most KEY_LEN - 1 bytes, which holds only the keys counting a stream now
 * (a lookup stays a few slots of an index at most half full whatever
 * addresses came and went, presence_table.c); the presence counts, a
 * presence_table too; and the Mercure subscriptions' records
 * (shared_records.h), a dead worker's orphaned for a live one to close.
 *
 * The region's lock is taken first and the count table's inside it, never
 * the other way: admission checks the group's readers (the slots) and the
 * key's total (the table) in one step. The presence table's lock is never
 * held with either. */
#include "core/group.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "core/presence_table.h"
#include "core/shared_records.h"
#include "common/util.h"

#define KEY_LEN 64 /* an address key's room, as admission.c's */

struct slot {
	pid_t pid;
	bool ready;
	uint64_t alive_ms;
	uint64_t readers; /* this worker's open streams (its column of the counts) */
	struct group_figures f;
	struct metrics m;      /* the worker's counters as last stamped */
	uint32_t wake_pending; /* its wake fd was written and not yet taken */
};

struct region {
	pthread_mutex_t lock;
	unsigned nworkers;
	struct metrics retired; /* counters of workers that died */
	struct slot slot[GROUP_MAX_WORKERS];
};

static struct region *g;
static struct presence_table *counts;   /* open streams per address key, a column per worker */
static struct presence_table *presence; /* the presence counts, a column per worker */
static struct shared_records *records;  /* the Mercure subscriptions' records, an owner per worker */
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

/* Take the lock; a holder that died leaves it to us, consistent again
 * (what it was changing is at worst one worker's readers or copy, and the
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

/* Unmap the tables (either may be NULL). */
static void unmap_tables(void)
{
	presence_table_unmap(counts);
	presence_table_unmap(presence);
	shared_records_unmap(records);
	counts = presence = NULL;
	records = NULL;
}

int group_create(unsigned nworkers, size_t max_keys, size_t presence_keys)
{
	if (nworkers < 2 || nworkers > GROUP_MAX_WORKERS)
		return -EINVAL;
	counts = presence_table_map(nworkers, max_keys, KEY_LEN, true);
	presence = counts ? presence_table_map(nworkers, presence_keys, PRESENCE_KEY_MAX, true) : NULL;
	records = presence ? shared_records_map(2 * presence_keys, true) : NULL;
	if (!records) {
		int e = errno;
		unmap_tables();
		return -e;
	}
	void *p = mmap(NULL, sizeof(*g), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		int e = errno;
		unmap_tables();
		return -e;
	}
	g = p;
	pthread_mutexattr_t a;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	int r = pthread_mutex_init(&g->lock, &a);
	pthread_mutexattr_destroy(&a);
	if (r != 0) {
		munmap(p, sizeof(*g));
		g = NULL;
		unmap_tables();
		return -r;
	}
	g->nworkers = nworkers;
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
	munmap(g, sizeof(*g));
	g = NULL;
	unmap_tables();
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

struct shared_records *group_records(void)
{
	return records;
}

int group_count_admit(const char *key, size_t per_key_limit, size_t total_limit)
{
	int r = 0;
	lock();
	size_t total = 0;
	for (unsigned i = 0; i < g->nworkers; i++)
		total += g->slot[i].readers;
	if (total_limit && total >= total_limit) {
		r = -1;
	} else {
		/* The key's check and count under the table's lock, inside the
		 * region's: no other worker counts between the two checks. */
		int k = presence_table_add_below(counts, (unsigned)self, key, per_key_limit);
		if (k == 1) {
			r = -2;
		} else {
			/* Full cannot happen while the table has room for the
			 * reader cap; the reader is served, uncounted by address. */
			if (k < 0)
				log_warn("the group's count table is full; %s is not counted", key);
			g->slot[self].readers++;
		}
	}
	unlock();
	return r;
}

void group_count_del(const char *key)
{
	lock();
	presence_table_del(counts, (unsigned)self, key, 0);
	if (g->slot[self].readers > 0)
		g->slot[self].readers--;
	unlock();
}

int group_count_admit_key(const char *key, size_t limit)
{
	return presence_table_add_below(counts, (unsigned)self, key, limit);
}

void group_count_del_key(const char *key)
{
	presence_table_del(counts, (unsigned)self, key, 0);
}

size_t group_count(const char *key)
{
	return presence_table_total(counts, key);
}

uint64_t group_count_probes(void)
{
	return presence_table_probes(counts);
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
	/* Its keys leave with its readers, in one step for admission. */
	presence_table_drop_column(counts, index, 0);
	metrics_add(&g->retired, &s->m);
	memset(s, 0, sizeof(*s));
	unlock();
	presence_table_drop_column(presence, index, group_clock_ms());
	shared_records_orphan_column(records, index);
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
