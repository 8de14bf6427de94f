/* SPDX-License-Identifier: BSD-2-Clause */
/* store_window.h: the rows a backend that reads its log over the network
 * (store_redis.c) keeps in memory: the window of the newest rows, as its
 * tail brings them, and a small cache of older pages fetched for readers
 * that catch up. Rows in, reads out, within fixed bounds; no I/O. Reads
 * are store.h's (after, upto], in id order, optionally filtered by the
 * visibility rule (visibility.h).
 *
 * A span of rows covers an id range (lo, hi]: every row that exists in it
 * is held, so an id missing inside it was never stored or was pruned. The
 * window covers (lo, newest]; its lo rises as old rows are dropped. A page
 * covers what one fetch returned. A read walks from span to span and stops
 * at the first id no span covers, the gap, which the caller fetches. */
#ifndef HERALD_STORE_WINDOW_H
#define HERALD_STORE_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

#define STORE_WINDOW_ROWS 16384             /* newest rows kept */
#define STORE_WINDOW_BYTES (4u << 20)       /* and their bytes (row_bytes) */
#define STORE_WINDOW_PAGES 64               /* slots for fetched pages, one kept free */
#define STORE_WINDOW_PAGES_BYTES (4u << 20) /* and their bytes in all */
#define STORE_WINDOW_READ_BUDGET 4096       /* rows one filtered read looks at, at most */

struct store_window_row;

/* Rows lo < id <= hi, in id order. Its fields are store_window.c's. */
struct store_span {
	int64_t lo, hi;
	struct store_window_row **rows;
	size_t start, n, cap; /* rows[start .. start+n) */
	size_t bytes;         /* the rows' allocations */
	uint64_t used;        /* last read, for evicting pages */
};

struct store_window {
	struct store_span newest; /* the window; newest.hi is the newest id seen */
	struct store_span pages[STORE_WINDOW_PAGES];
	size_t npages;
	uint64_t clock;         /* reads so far, for the pages' recency */
	int64_t polled_through; /* unfiltered reads (the fan-out) have read the window to here */
	bool offering;          /* inside offer() */
	/* Called before a row that no unfiltered read has reached yet is
	 * dropped (at most once per store_window_add), so the fan-out can
	 * read it first. */
	void (*offer)(void *arg);
	void *offer_arg;
};

/* An empty window whose newest id is newest, no pages. offer may be NULL.
 * The window owns every row it is given; store_window_free frees them. */
void store_window_init(struct store_window *w, int64_t newest, void (*offer)(void *arg), void *arg);
void store_window_free(struct store_window *w);

/* The newest id the window has seen (where the tail is). */
static inline int64_t store_window_newest(const struct store_window *w)
{
	return w->newest.hi;
}

/* Set where an empty window starts (nothing held, nothing dropped). */
void store_window_start_at(struct store_window *w, int64_t newest);

/* Append a copy of ev as the newest row, dropping the oldest ones (after
 * one offer) past STORE_WINDOW_ROWS or STORE_WINDOW_BYTES. Returns false
 * (nothing kept) when ev->id is not above the newest id. */
bool store_window_add(struct store_window *w, const struct store_event *ev);

/* The average size of the rows in the window (a guess before any row),
 * to size fetches. */
size_t store_window_row_size(const struct store_window *w);

/* A page of the rows after `after`, being filled: room for it is made
 * first (least recently read pages dropped). Rows are given in id order
 * with store_window_page_add; store_window_page_end sets what the page
 * covers. Nothing else may touch the window in between. */
struct store_span *store_window_page_begin(struct store_window *w, int64_t after);
/* Keep a copy of ev if its id is above the page's start and its last row. */
void store_window_page_add(struct store_span *p, const struct store_event *ev);
/* The page now covers (after, hi], and counts as just read; other pages
 * are dropped while the cache is over its bounds. Returns the id up to
 * which rows are missing at the page's start (pruned), or 0. */
int64_t store_window_page_end(struct store_window *w, struct store_span *p, int64_t hi);

/* Call cb for the rows after < id <= min(upto, newest) that f passes (NULL:
 * every row), in id order, at most limit rows, stopping at the first gap
 * and, when filtered, after STORE_WINDOW_READ_BUDGET rows looked at.
 * Returns the rows passed to cb, or -EAGAIN when the read got nowhere
 * (a gap right after `after`). *through (may be NULL) gets the id up to
 * which the range was examined; *gap the id after which rows are
 * missing, to be fetched, or -1. */
int store_window_read(struct store_window *w, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
		      store_row_cb cb, void *arg, int64_t *through, int64_t *gap);

#endif
