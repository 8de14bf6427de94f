/* SPDX-License-Identifier: BSD-2-Clause */
/* store_filter_sql.h: the statement a filtered read runs (see
 * store_sqlite_read_matching): what a reader may and wants to see as SQL
 * text over the events table, and its topic patterns bound to it. No
 * database connection here: store_sqlite.c prepares, caches and steps what
 * this writes. */
#ifndef HERALD_STORE_FILTER_SQL_H
#define HERALD_STORE_FILTER_SQL_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>

#include "store/store.h"

/* The columns a row is read with, in the order store_sqlite.c reads them.
 * The Mercure block comes from its own table by the event's id (a probe of
 * an integer key; NULL for herald's own rows). */
#define STORE_ROW_COLUMNS                            \
	"id, type, topic, data, public, created_at," \
	" (SELECT block FROM herald_mercure WHERE event_id = events.id)"

/* Topics, grants, and the public rows of every topic. */
#define STORE_FILTER_MAX_BINDS (STORE_MAX_TOPICS + STORE_MAX_GRANTS + 1)

/* What store_filter_sql made of a filter. The statement's parameters are ?1
 * the id read after, ?2 the last id wanted, ?3 the limit, then binds[] from
 * ?4 in order (a NULL one is a part with no pattern, and no parameter). */
struct store_filter_query {
	bool every;       /* every row (see_private) or every public one: no statement */
	bool see_private; /* every row of the topics read, private ones too */
	bool scan;        /* one scan in id order, not one index seek per part */
	size_t nbinds;
	const char *binds[STORE_FILTER_MAX_BINDS]; /* f's own strings, not copies */
};

/* The statement of f into sql (len bytes), unless q->every. force_scan asks
 * for the scan even where seeks would do. Returns 0, or -1 when sql is too
 * small. f's topics and grants must outlive q. */
int store_filter_sql(const struct store_filter *f, bool force_scan, struct store_filter_query *q, char *sql,
		     size_t len);

/* Bind q's patterns to s: an exact topic as itself, a subtree ("p/" then
 * "*") as the GLOB 'p/?*'. */
void store_filter_bind(sqlite3_stmt *s, const struct store_filter_query *q);

#endif
