/* SPDX-License-Identifier: BSD-2-Clause */
/* topic_index.c: the index from topic to subscriptions (topic_index.h).
 *
 * Two chained hash tables with the same layout: `exact` by whole topic, and
 * `prefix` by the p of each subtree pattern SUB(p) (topic.h's notation).
 * An event's topic t is looked up once in `exact`, and in `prefix` once for
 * each '/' at position i with i + 1 < len(t), under the key t[0..i): SUB(p)
 * matches t exactly when t starts with p and '/' and is longer than that
 * (topic.h), which is the lookup at i = len(p). The hash is computed once
 * along t, so every prefix's hash is the running value at its '/' and an
 * event costs O(len(t)) plus one probe per '/', whatever the readers.
 *
 * The hash is FNV-1a over a per-index random basis, finished with a mixer
 * before choosing a slot; the tables double past one key per slot and halve
 * below one per eight, so chains stay short. */
#include "hub/topic_index.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define MIN_SLOTS 16

struct topic_bucket {
	struct topic_bucket *chain; /* the next bucket in the same slot */
	struct list subs;           /* of topic_sub.node; never empty while the bucket exists */
	struct topic_table *table;  /* the table it sits in */
	uint64_t hash;
	size_t len;
	char key[]; /* len bytes and a NUL */
};

struct topic_table {
	struct topic_bucket **slot;
	size_t nslots; /* 0 or a power of two */
	size_t nkeys;
};

struct topic_index {
	struct topic_table exact, prefix;
	struct list every; /* the subscriptions to "*" */
	uint64_t basis;
	size_t nsubs;
	size_t bytes;
};

static uint64_t hash_step(uint64_t h, unsigned char c)
{
	return (h ^ c) * 0x100000001b3ull;
}

static uint64_t hash_bytes(uint64_t basis, const char *p, size_t n)
{
	uint64_t h = basis;
	for (size_t i = 0; i < n; i++)
		h = hash_step(h, (unsigned char)p[i]);
	return h;
}

/* FNV's low bits depend on few input bits; mix the high ones down. */
static size_t slot_of(uint64_t h, size_t nslots)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (size_t)h & (nslots - 1);
}

struct topic_index *topic_index_new(void)
{
	struct topic_index *ix = xcalloc(1, sizeof(*ix));
	ix->basis = 0xcbf29ce484222325ull ^ random_below(UINT64_MAX);
	ix->bytes = sizeof(*ix);
	return ix;
}

static void table_free(struct topic_table *t)
{
	for (size_t i = 0; i < t->nslots; i++)
		while (t->slot[i]) {
			struct topic_bucket *b = t->slot[i];
			t->slot[i] = b->chain;
			for (struct list_node *n = b->subs.first; n; n = n->next)
				list_item(n, struct topic_sub, node)->bucket = NULL;
			free(b);
		}
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

void topic_index_free(struct topic_index *ix)
{
	if (!ix)
		return;
	table_free(&ix->exact);
	table_free(&ix->prefix);
	free(ix);
}

static void table_resize(struct topic_index *ix, struct topic_table *t, size_t nslots)
{
	struct topic_bucket **slot = xcalloc(nslots, sizeof(*slot));
	for (size_t i = 0; i < t->nslots; i++)
		while (t->slot[i]) {
			struct topic_bucket *b = t->slot[i];
			t->slot[i] = b->chain;
			size_t j = slot_of(b->hash, nslots);
			b->chain = slot[j];
			slot[j] = b;
		}
	free(t->slot);
	ix->bytes = ix->bytes - t->nslots * sizeof(*slot) + nslots * sizeof(*slot);
	t->slot = slot;
	t->nslots = nslots;
}

/* The bucket of key[0..n) with hash h, or NULL. */
static struct topic_bucket *table_find(const struct topic_table *t, uint64_t h, const char *key, size_t n)
{
	if (!t->nkeys)
		return NULL;
	for (struct topic_bucket *b = t->slot[slot_of(h, t->nslots)]; b; b = b->chain)
		if (b->hash == h && b->len == n && memcmp(b->key, key, n) == 0)
			return b;
	return NULL;
}

static struct topic_bucket *table_get(struct topic_index *ix, struct topic_table *t, const char *key, size_t n)
{
	uint64_t h = hash_bytes(ix->basis, key, n);
	struct topic_bucket *b = table_find(t, h, key, n);
	if (b)
		return b;
	if (t->nkeys + 1 > t->nslots)
		table_resize(ix, t, t->nslots ? t->nslots * 2 : MIN_SLOTS);
	b = xmalloc(sizeof(*b) + n + 1);
	b->subs.first = NULL;
	b->table = t;
	b->hash = h;
	b->len = n;
	memcpy(b->key, key, n);
	b->key[n] = '\0';
	size_t j = slot_of(h, t->nslots);
	b->chain = t->slot[j];
	t->slot[j] = b;
	t->nkeys++;
	ix->bytes += sizeof(*b) + n + 1;
	return b;
}

static void table_drop(struct topic_index *ix, struct topic_bucket *b)
{
	struct topic_table *t = b->table;
	struct topic_bucket **pp = &t->slot[slot_of(b->hash, t->nslots)];
	while (*pp != b)
		pp = &(*pp)->chain;
	*pp = b->chain;
	t->nkeys--;
	ix->bytes -= sizeof(*b) + b->len + 1;
	free(b);
	if (t->nkeys == 0) {
		ix->bytes -= t->nslots * sizeof(*t->slot);
		free(t->slot);
		t->slot = NULL;
		t->nslots = 0;
	} else if (t->nslots > MIN_SLOTS && t->nkeys < t->nslots / 8) {
		table_resize(ix, t, t->nslots / 2);
	}
}

void topic_index_add(struct topic_index *ix, struct topic_sub *s, const char *pattern, void *owner)
{
	size_t n = strlen(pattern);
	s->owner = owner;
	ix->nsubs++;
	if (n == 1 && pattern[0] == '*') {
		s->bucket = NULL;
		list_push(&ix->every, &s->node);
		return;
	}
	bool sub = n >= 2 && pattern[n - 1] == '*' && pattern[n - 2] == '/';
	struct topic_bucket *b =
		sub ? table_get(ix, &ix->prefix, pattern, n - 2) : table_get(ix, &ix->exact, pattern, n);
	s->bucket = b;
	list_push(&b->subs, &s->node);
}

void topic_index_del(struct topic_index *ix, struct topic_sub *s)
{
	list_unlink(s->bucket ? &s->bucket->subs : &ix->every, &s->node);
	if (s->bucket && list_empty(&s->bucket->subs))
		table_drop(ix, s->bucket);
	s->bucket = NULL;
	ix->nsubs--;
}

/* Visit a key's list. The next node is taken before the visit, which may
 * unlink (and the owner then free) the node visited; it cannot unlink the
 * next, which belongs to another owner. */
static void visit_list(struct list *l, void (*visit)(void *owner, void *arg), void *arg)
{
	struct list_node *n, *next;
	list_each(l, n, next)
		visit(list_item(n, struct topic_sub, node)->owner, arg);
}

void topic_index_each_keyed(struct topic_index *ix, const char *topic, size_t n, void (*visit)(void *owner, void *arg),
			    void *arg)
{
	uint64_t h = ix->basis;
	bool prefixes = ix->prefix.nkeys > 0;
	for (size_t i = 0; i < n; i++) {
		if (prefixes && topic[i] == '/' && i + 1 < n) {
			/* A visit may drop buckets and shrink the table, so each
			 * lookup starts afresh. */
			struct topic_bucket *b = table_find(&ix->prefix, h, topic, i);
			if (b)
				visit_list(&b->subs, visit, arg);
			prefixes = ix->prefix.nkeys > 0;
		}
		h = hash_step(h, (unsigned char)topic[i]);
	}
	struct topic_bucket *b = table_find(&ix->exact, h, topic, n);
	if (b)
		visit_list(&b->subs, visit, arg);
}

void topic_index_each_every(struct topic_index *ix, void (*visit)(void *owner, void *arg), void *arg)
{
	visit_list(&ix->every, visit, arg);
}

void topic_index_each(struct topic_index *ix, const char *topic, size_t n, void (*visit)(void *owner, void *arg),
		      void *arg)
{
	topic_index_each_keyed(ix, topic, n, visit, arg);
	topic_index_each_every(ix, visit, arg);
}

size_t topic_index_keys(const struct topic_index *ix)
{
	return ix->exact.nkeys + ix->prefix.nkeys;
}

void topic_index_stats(const struct topic_index *ix, struct topic_index_stats *out)
{
	out->exact_keys = ix->exact.nkeys;
	out->prefix_keys = ix->prefix.nkeys;
	out->subs = ix->nsubs;
	out->bytes = ix->bytes;
}
