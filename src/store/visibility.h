/* SPDX-License-Identifier: BSD-2-Clause */
/* visibility.h: the one rule for which rows a reader is sent: a topic it
 * asked for (none asked: every topic), and a row it may see (public, or
 * private with the read token, or of a granted topic). The hub's fan-out
 * and catch-up and every backend that filters in memory call these; the
 * SQLite backend writes the same rule as SQL, and its unit test holds the
 * SQL to these functions. Patterns are topic.h's; pure, no allocation. */
#ifndef HERALD_VISIBILITY_H
#define HERALD_VISIBILITY_H

#include <stdbool.h>
#include <stddef.h>

struct store_filter;

/* Whether topic[0..len) matches one of the n (valid, NUL-terminated)
 * patterns. */
bool visibility_match_any(char *const *patterns, size_t n, const char *topic, size_t len);

/* Whether a reader may see a row of topic[0..len) marked public or not:
 * public rows to all, private ones with see_private or under one of the
 * ngrants granted patterns. Inline: the fan-out asks it per reader. */
static inline bool visibility_may_see(bool see_private, char *const *grants, size_t ngrants, const char *topic,
				      size_t len, bool public)
{
	return public || see_private || visibility_match_any(grants, ngrants, topic, len);
}

/* Whether a reader that asked for the ntopics patterns (0: every topic)
 * wants a row of topic[0..len). */
static inline bool visibility_wants(char *const *topics, size_t ntopics, const char *topic, size_t len)
{
	return ntopics == 0 || visibility_match_any(topics, ntopics, topic, len);
}

/* The whole rule for the reader f describes (store.h): wanted, and
 * allowed. A NULL f passes every row. */
bool visibility_passes(const struct store_filter *f, const char *topic, size_t len, bool public);

#endif
