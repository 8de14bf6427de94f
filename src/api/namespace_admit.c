/* SPDX-License-Identifier: BSD-2-Clause */
/* namespace_admit.c: a stream's admission by its namespaces' rules
 * (namespace_admit.h): a chained hash table of open streams per topic
 * pattern, kept only for patterns whose namespace sets max_readers, and
 * the hold a stream keeps to give its places back. */
#include "api/namespace_admit.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/config.h"
#include "core/group.h"
#include "hub/hub.h"

#define CAP_BUCKETS 1024

struct cap_entry {
	struct cap_entry *next;
	size_t open;
	char key[64];   /* the group's name for it: "\x1ft:" and the pattern, or its digest */
	char pattern[]; /* NUL-terminated */
};

struct topic_caps {
	struct cap_entry *buckets[CAP_BUCKETS];
	struct topic_hold *held[CAP_BUCKETS]; /* kept holds, by owner */
};

/* The places one stream took: one entry per capped pattern. */
struct topic_hold {
	struct topic_hold *next; /* in held[], once kept */
	const void *owner;
	size_t n;
	struct cap_entry *e[READER_MAX_TOPICS];
	bool group[READER_MAX_TOPICS]; /* e[i] also took a place in the group's counts */
};

struct topic_caps *topic_caps_new(void)
{
	return xcalloc(1, sizeof(struct topic_caps));
}

void topic_caps_free(struct topic_caps *tc)
{
	if (!tc)
		return;
	for (size_t i = 0; i < CAP_BUCKETS; i++)
		while (tc->held[i]) {
			struct topic_hold *h = tc->held[i];
			tc->held[i] = h->next;
			namespace_release(tc, h);
		}
	for (size_t i = 0; i < CAP_BUCKETS; i++)
		while (tc->buckets[i]) {
			struct cap_entry *e = tc->buckets[i];
			tc->buckets[i] = e->next;
			free(e);
		}
	free(tc);
}

static struct cap_entry **slot(struct topic_caps *tc, const char *pattern)
{
	unsigned hash = 2166136261u; /* FNV-1a */
	for (const char *p = pattern; *p; p++)
		hash = (hash ^ (unsigned char)*p) * 16777619u;
	struct cap_entry **pp = &tc->buckets[hash % CAP_BUCKETS];
	while (*pp && strcmp((*pp)->pattern, pattern) != 0)
		pp = &(*pp)->next;
	return pp;
}

size_t topic_caps_count(const struct topic_caps *tc, const char *pattern)
{
	struct cap_entry *e = *slot((struct topic_caps *)tc, pattern);
	return e ? e->open : 0;
}

/* The first namespace a reader of pattern reaches that anonymous readers
 * may not read, or NULL. */
static const struct namespace *closed_to_anonymous(const struct config *cfg, const char *pattern)
{
	const struct namespaces *t = &cfg->namespaces;
	for (size_t i = 0; i < t->n; i++)
		if (!t->ns[i].anonymous && namespace_touches(t, (int)i, pattern))
			return &t->ns[i];
	return !cfg->ns_defaults.anonymous ? &cfg->ns_defaults : NULL;
}

/* The group's key for a pattern: short enough for its table (63 bytes),
 * apart from the address keys (a control byte first). */
static void group_key(const char *pattern, char *key, size_t len)
{
	size_t n = strlen(pattern);
	if (n + 3 < len) {
		snprintf(key, len, "\x1ft:%s", pattern);
		return;
	}
	uint64_t hash = 1469598103934665603u; /* FNV-1a, 64 bits */
	for (const char *p = pattern; *p; p++)
		hash = (hash ^ (unsigned char)*p) * 1099511628211u;
	snprintf(key, len, "\x1ft#%016llx%.40s", (unsigned long long)hash, pattern);
}

/* Give back h's places, an entry going with its last. */
static void give_back(struct topic_caps *tc, const struct topic_hold *h)
{
	for (size_t i = 0; i < h->n; i++) {
		struct cap_entry *e = h->e[i];
		if (h->group[i])
			group_count_del_key(e->key);
		if (--e->open > 0)
			continue;
		struct cap_entry **pp = slot(tc, e->pattern);
		*pp = e->next;
		free(e);
	}
}

int namespace_admit(struct topic_caps *tc, const struct config *cfg, char *const *topics, size_t n, bool tokened,
		    struct topic_hold **hold, const char **cause, char *why, size_t len)
{
	*hold = NULL;
	if (cfg->namespaces.n == 0)
		return 0;
	static char *const every[] = { "*" };
	char *const *pats = n ? topics : every;
	size_t np = n ? n : 1;
	for (size_t i = 0; i < np && !tokened; i++) {
		const struct namespace *ns = closed_to_anonymous(cfg, pats[i]);
		if (ns) {
			*cause = "namespace_needs_token";
			snprintf(why, len,
				 "topic \"%s\" reaches namespace \"%s\", which anonymous readers may not read: send a "
				 "token, or name topics outside it",
				 pats[i], ns->pattern);
			return 401;
		}
	}
	struct topic_hold h = { 0 };
	for (size_t i = 0; i < n; i++) {
		const struct namespace *ns = config_rules(cfg, topics[i], strlen(topics[i]));
		if (ns->max_readers <= 0)
			continue;
		struct cap_entry **pp = slot(tc, topics[i]);
		bool full = *pp && (int64_t)(*pp)->open >= ns->max_readers, in_group = false;
		if (!full && group_on()) {
			/* The group's count decides, checked and taken in one step. */
			char key[64];
			group_key(topics[i], key, sizeof(key));
			int r = group_count_admit_key(key, (size_t)ns->max_readers);
			full = r == 1;
			in_group = r == 0;
		}
		if (full) {
			*cause = "namespace_max_readers";
			snprintf(why, len, "topic \"%s\" has its namespace's most readers (max_readers %lld in \"%s\")",
				 topics[i], (long long)ns->max_readers, ns->pattern);
			give_back(tc, &h);
			return 503;
		}
		if (!*pp) {
			size_t pl = strlen(topics[i]);
			*pp = xcalloc(1, sizeof(**pp) + pl + 1);
			memcpy((*pp)->pattern, topics[i], pl + 1);
			group_key(topics[i], (*pp)->key, sizeof((*pp)->key));
		}
		(*pp)->open++;
		h.group[h.n] = in_group; /* a group place to give back */
		h.e[h.n++] = *pp;
	}
	if (h.n) {
		*hold = xmalloc(sizeof(h));
		**hold = h;
	}
	return 0;
}

void namespace_release(struct topic_caps *tc, struct topic_hold *hold)
{
	if (!hold)
		return;
	give_back(tc, hold);
	free(hold);
}

static struct topic_hold **held_slot(struct topic_caps *tc, const void *owner)
{
	uintptr_t k = (uintptr_t)owner;
	struct topic_hold **pp = &tc->held[(k >> 4 ^ k >> 14) % CAP_BUCKETS];
	while (*pp && (*pp)->owner != owner)
		pp = &(*pp)->next;
	return pp;
}

void namespace_hold_keep(struct topic_caps *tc, struct topic_hold *hold, const void *owner)
{
	hold->owner = owner;
	struct topic_hold **pp = held_slot(tc, owner);
	hold->next = *pp;
	*pp = hold;
}

void namespace_release_owner(struct topic_caps *tc, const void *owner)
{
	struct topic_hold **pp = held_slot(tc, owner), *h = *pp;
	if (!h)
		return;
	*pp = h->next;
	namespace_release(tc, h);
}
