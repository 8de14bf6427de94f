/* SPDX-License-Identifier: BSD-2-Clause */
/* topic_index.h: from an event's topic to the subscriptions whose pattern
 * matches it, so that an event visits only the readers that can want it,
 * not every reader.
 *
 * A subscription is one pattern (topic.h) of one owner. Exact patterns sit
 * in a hash table by topic; subtree patterns SUB(p) in a second table by
 * their prefix p, looked up once for each '/' of the event's topic; "*"
 * on a plain list. Each key's subscriptions are a doubly linked list whose
 * nodes the owners embed (struct topic_sub), so adding and removing one
 * allocates nothing but the key's bucket, shared by every owner of the key.
 *
 * Rules the caller keeps: an owner adds a given pattern at most once (two
 * of its nodes never share a list); a node is in the index between its add
 * and its del, and is freed only after its del. */
#ifndef HERALD_TOPIC_INDEX_H
#define HERALD_TOPIC_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/list.h"

struct topic_bucket;
struct topic_index;

/* One pattern of one owner, embedded in the owner; the index links it. */
struct topic_sub {
	struct list_node node;         /* in its key's list */
	struct topic_bucket *bucket;   /* its key; NULL on the list of "*" */
	void *owner;
};

/* An empty index. Aborts only when memory runs out (xmalloc). */
struct topic_index *topic_index_new(void);

/* Free ix and its buckets; the subscriptions still in it are left unlinked
 * (their owners keep them). NULL is fine. */
void topic_index_free(struct topic_index *ix);

/* Link s, for the valid NUL-terminated pattern (topic_pattern_valid), on
 * behalf of owner. The pattern is copied into the key's bucket when the key
 * is new; the caller keeps its string. */
void topic_index_add(struct topic_index *ix, struct topic_sub *s, const char *pattern, void *owner);

/* Unlink s (added before); frees its bucket when s was the key's last. */
void topic_index_del(struct topic_index *ix, struct topic_sub *s);

/* Call visit(owner, arg) for every subscription whose pattern matches
 * topic[0..n), as topic_pattern_match would decide. An owner with two
 * matching patterns is visited twice; the caller dedupes. visit may del any
 * subscription of the owner it was called for (it closed, say), but may
 * not add, nor del another owner's. */
void topic_index_each(struct topic_index *ix, const char *topic, size_t n, void (*visit)(void *owner, void *arg),
		      void *arg);

/* The two halves of topic_index_each, for a caller that looks up several
 * topics for one event and wants the "*" subscriptions once: those whose
 * pattern is an exact topic or a subtree matching topic[0..n), and those
 * to "*". The same rules for visit. */
void topic_index_each_keyed(struct topic_index *ix, const char *topic, size_t n, void (*visit)(void *owner, void *arg),
			    void *arg);
void topic_index_each_every(struct topic_index *ix, void (*visit)(void *owner, void *arg), void *arg);

/* Distinct exact topics and subtree prefixes held (0: only "*", or none). */
size_t topic_index_keys(const struct topic_index *ix);

/* What the index holds: distinct exact topics, distinct subtree prefixes,
 * subscriptions in all, and the bytes of its buckets and slot arrays (the
 * nodes belong to their owners and are not counted). */
struct topic_index_stats {
	size_t exact_keys, prefix_keys, subs;
	size_t bytes;
};
void topic_index_stats(const struct topic_index *ix, struct topic_index_stats *out);

#endif
