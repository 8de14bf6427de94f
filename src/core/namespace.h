/* SPDX-License-Identifier: BSD-2-Clause */
/* namespace.h: families of topics with their own rules, from the
 * configuration's [namespace "PATTERN"] sections. A topic belongs to the
 * namespace of the longest pattern that matches it (topic.h patterns: an
 * exact topic or a subtree "prefix/ *"), else to the defaults (the
 * top-level keys). A namespace sets only what it names; the rest is the
 * defaults'. Pure data and lookups: config.c fills the table, the store
 * prunes by it, the request handlers and presence ask it. */
#ifndef HERALD_NAMESPACE_H
#define HERALD_NAMESPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NAMESPACE_MAX 64 /* sections in one configuration */
#define NS_INHERIT (-1)  /* a field the section did not set */

/* One [namespace "pattern"] section. Numbers and switches hold NS_INHERIT
 * when unset (a switch is otherwise 0 or 1); strings are NULL when unset.
 * The table owns every string. */
struct namespace
{
	char *pattern;
	char *origin;            /* "path:line" of the section's header */
	int64_t retention_count; /* newest events kept in this namespace (0: no count limit) */
	int64_t retention_age_s; /* events older than this go (0: no age limit) */
	int anonymous;           /* readers without a token may read (0: a token or read_token is needed) */
	int publish_token;       /* 1: publishing here needs a valid publish token even when the defaults do not */
	int presence;            /* readers here are counted in presence */
	int presence_events;     /* their joins and leaves are events in the log */
	int mercure;             /* reachable through the Mercure hub */
	int64_t max_readers;     /* streams reading one topic of it at once (0: no limit) */
	char *auth_request;      /* the application's authorization hook for its readers */
	char *webhook_url;       /* where its webhooks go */
};

struct namespaces {
	struct namespace ns[NAMESPACE_MAX];
	size_t n;
};

/* A section's new namespace, every field NS_INHERIT/NULL, or NULL when the
 * table is full. pattern and origin are copied. */
struct namespace *namespaces_add(struct namespaces *t, const char *pattern, const char *origin);

/* The namespace of a topic with the same pattern, or NULL. */
struct namespace *namespaces_named(struct namespaces *t, const char *pattern);

/* The index in t->ns of the namespace topic[0..n) belongs to, or -1 for the
 * defaults. */
int namespace_of(const struct namespaces *t, const char *topic, size_t n);

/* Whether a reader's pattern may read a topic of namespace i (the
 * defaults: -1): some topic both match. */
bool namespace_touches(const struct namespaces *t, int i, const char *pattern);

/* Set every field of ns left NS_INHERIT/NULL to the defaults'. */
void namespace_inherit(struct namespace *ns, const struct namespace *defaults);

/* The table as a JSON array of objects (pattern and every rule), for
 * /api/health; writes at most cap bytes with a NUL and returns the length
 * it needed (as snprintf). */
size_t namespaces_json(const struct namespaces *t, char *out, size_t cap);

/* Whether a reader of patterns[0..n) (n == 0: every topic) may read a
 * topic of namespace i (-1: the defaults): one of them touches it. */
bool namespace_reached(const struct namespaces *t, int i, char *const *patterns, size_t n);

/* Free every string the table holds and empty it (twice is harmless). */
void namespaces_free(struct namespaces *t);

/* A deep copy of src into dst (dst's own strings freed first). */
void namespaces_copy(struct namespaces *dst, const struct namespaces *src);

/* Whether two tables divide topics the same way (same patterns in the same
 * order): what is counted per namespace stays valid across a reload. */
bool namespaces_same_patterns(const struct namespaces *a, const struct namespaces *b);

#endif
