/* SPDX-License-Identifier: BSD-2-Clause */
/* store_filter_sql.c: the SQL of a filtered read (see store_filter_sql.h):
 * a reader's filter as the parts it reads, then as one statement of index
 * seeks or one scan, and its patterns bound. Text in, text out: the
 * connection, the statement cache and the read budget are store_sqlite.c's. */
#include "store/store_filter_sql.h"

#include <stdio.h>
#include <string.h>

#include "core/topic.h"

/* A pattern as SQL: an exact topic is compared with "=", which seeks the
 * (topic, id) indexes in id order; a subtree (p, "/", "*") becomes GLOB
 * 'p/?*' (topics hold no GLOB metacharacters). */
static bool pattern_exact(const char *pattern)
{
	size_t n = strlen(pattern);
	return !(n >= 1 && pattern[n - 1] == '*');
}

static void pattern_bind(sqlite3_stmt *s, int index, const char *pattern)
{
	size_t n = strlen(pattern);
	if (pattern_exact(pattern)) {
		sqlite3_bind_text(s, index, pattern, -1, SQLITE_TRANSIENT);
		return;
	}
	char glob[160];
	snprintf(glob, sizeof(glob), "%.*s?*", (int)(n - 1), pattern);
	sqlite3_bind_text(s, index, glob, -1, SQLITE_TRANSIENT);
}

#define MATCH(p) (pattern_exact(p) ? "=" : "GLOB")

/* ---- filtered reads ----
 *
 * What a reader may and wants to see is its topics (none: all), and of
 * those the public rows, or every row (the read token, a "*" grant), or the
 * private rows under its granted patterns too. Two patterns are either
 * disjoint or one covers the other (the hub has removed repeated and
 * covered ones), so the rows of topic t a reader may see are: all of them
 * when a grant covers t; else the public ones, plus all rows of each grant
 * that t covers.
 *
 * When every such part is an exact topic, the read is one index seek per
 * part (public parts through the index of public rows by topic), each
 * stopping at the limit: bounded work, whatever the log. A subtree is a
 * GLOB, which no index seeks in id order; its read is then one scan in id
 * order (the rows, or only the public ones through their index) with the
 * whole filter as its condition, cut short by the read budget and resumed
 * from the last row it examined. */

/* One index seek: the rows of pattern (NULL: every topic), only the public
 * ones or all. */
struct part {
	const char *pattern;
	bool public_only;
};


static bool covered_by_any(char *const *patterns, size_t n, const char *q)
{
	for (size_t i = 0; i < n; i++)
		if (topic_pattern_covers(patterns[i], q))
			return true;
	return false;
}

static void part_add(struct part *parts, size_t *n, const char *pattern, bool public_only)
{
	for (size_t i = 0; i < *n; i++)
		if (parts[i].public_only == public_only &&
		    (parts[i].pattern == pattern ||
		     (parts[i].pattern && pattern && strcmp(parts[i].pattern, pattern) == 0)))
			return;
	parts[(*n)++] = (struct part){ pattern, public_only };
}

/* The parts of f, for a reader that does not see every row (see_private
 * false). Returns their count, and whether one is a subtree. */
static size_t filter_parts(const struct store_filter *f, size_t ntopics, struct part *parts, bool *subtree)
{
	size_t n = 0;
	if (ntopics == 0) {
		part_add(parts, &n, NULL, true);
		for (size_t g = 0; g < f->ngrants; g++)
			part_add(parts, &n, f->grants[g], false);
	}
	for (size_t i = 0; i < ntopics; i++) {
		const char *t = f->topics[i];
		if (covered_by_any(f->grants, f->ngrants, t)) {
			part_add(parts, &n, t, false);
			continue;
		}
		part_add(parts, &n, t, true);
		for (size_t g = 0; g < f->ngrants; g++)
			if (topic_pattern_covers(t, f->grants[g]))
				part_add(parts, &n, f->grants[g], false);
	}
	*subtree = false;
	for (size_t i = 0; i < n; i++)
		if (parts[i].pattern && !pattern_exact(parts[i].pattern))
			*subtree = true;
	return n;
}

/* The parts as one statement: ?1 after, ?2 upto, ?3 limit, then the
 * parts' patterns from ?4 in order; merged by id (UNION: a row of two
 * parts, a public row of a granted topic, comes once). A public part names
 * the partial indexes' own condition, so SQLite's planner picks them by
 * itself (test_store checks the page reads); with no INDEXED BY, a
 * database that lost one still reads, only slower. */
static int seek_sql(const struct part *parts, size_t n, char *sql, size_t len)
{
	size_t k = 0;
#define ADD(...) k += (size_t)snprintf(sql + k, k < len ? len - k : 0, __VA_ARGS__)
	for (size_t i = 0; i < n; i++) {
		ADD("%sSELECT * FROM (SELECT " STORE_ROW_COLUMNS " FROM events", i ? " UNION " : "");
		if (!parts[i].pattern)
			ADD(" WHERE CAST(public AS INTEGER) <> 0");
		else if (parts[i].public_only)
			ADD(" WHERE topic %s ?%zu AND CAST(public AS INTEGER) <> 0", MATCH(parts[i].pattern), i + 4);
		else
			ADD(" WHERE topic %s ?%zu", MATCH(parts[i].pattern), i + 4);
		ADD(" AND id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3)");
	}
	ADD(" ORDER BY id LIMIT ?3");
#undef ADD
	return k < len ? 0 : -1;
}

/* The filter as one scan in id order: ?1 after, ?2 upto, ?3 limit, the
 * topics from ?4, then the grants. herald_seen(id, wanted) notes every row
 * examined, so a scan cut short still says how far it looked. A reader
 * that sees only public rows scans their index alone. */
static int scan_sql(const struct store_filter *f, size_t ntopics, bool see_private, char *sql, size_t len)
{
	size_t k = 0;
	bool public_only = !see_private && f->ngrants == 0;
#define ADD(...) k += (size_t)snprintf(sql + k, k < len ? len - k : 0, __VA_ARGS__)
	ADD("SELECT " STORE_ROW_COLUMNS " FROM events %s WHERE id > ?1 AND id <= ?2", public_only ? "" : "NOT INDEXED");
	if (public_only)
		ADD(" AND CAST(public AS INTEGER) <> 0");
	ADD(" AND herald_seen(id, (");
	if (ntopics == 0)
		ADD("1");
	for (size_t i = 0; i < ntopics; i++)
		ADD("%stopic %s ?%zu", i ? " OR " : "", MATCH(f->topics[i]), i + 4);
	ADD(")");
	if (!see_private && !public_only) {
		ADD(" AND (CAST(public AS INTEGER) <> 0");
		for (size_t g = 0; g < f->ngrants; g++)
			ADD(" OR topic %s ?%zu", MATCH(f->grants[g]), ntopics + g + 4);
		ADD(")");
	}
	ADD(") ORDER BY id LIMIT ?3");
#undef ADD
	return k < len ? 0 : -1;
}

int store_filter_sql(const struct store_filter *f, bool force_scan, struct store_filter_query *q, char *sql,
		     size_t len)
{
	bool see_private = f->see_private;
	size_t ntopics = f->ntopics;
	for (size_t i = 0; i < f->ntopics; i++)
		if (strcmp(f->topics[i], "*") == 0)
			ntopics = 0; /* every topic */
	for (size_t g = 0; g < f->ngrants; g++)
		if (strcmp(f->grants[g], "*") == 0)
			see_private = true;
	size_t ngrants = see_private ? 0 : f->ngrants;
	*q = (struct store_filter_query){ .every = ntopics == 0 && ngrants == 0, .see_private = see_private };
	if (q->every)
		return 0; /* every row, or every public one: the caller's own walk */
	struct part parts[STORE_FILTER_MAX_BINDS];
	size_t n = 0;
	bool subtree = false;
	if (see_private) {
		for (size_t i = 0; i < ntopics; i++) {
			part_add(parts, &n, f->topics[i], false);
			subtree = subtree || !pattern_exact(f->topics[i]);
		}
	} else {
		n = filter_parts(f, ntopics, parts, &subtree);
	}
	q->scan = subtree || force_scan;
	struct store_filter g = *f;
	g.ngrants = ngrants;
	if (q->scan ? scan_sql(&g, ntopics, see_private, sql, len) : seek_sql(parts, n, sql, len))
		return -1;
	if (q->scan) {
		for (size_t i = 0; i < ntopics; i++)
			q->binds[q->nbinds++] = f->topics[i];
		for (size_t i = 0; i < ngrants; i++)
			q->binds[q->nbinds++] = f->grants[i];
	} else {
		/* A part of every topic has no pattern, and so no parameter. */
		for (size_t i = 0; i < n; i++)
			q->binds[q->nbinds++] = parts[i].pattern;
	}
	return 0;
}

void store_filter_bind(sqlite3_stmt *s, const struct store_filter_query *q)
{
	for (size_t i = 0; i < q->nbinds; i++)
		if (q->binds[i])
			pattern_bind(s, (int)i + 4, q->binds[i]);
}
