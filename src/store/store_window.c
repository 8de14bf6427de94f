/* SPDX-License-Identifier: BSD-2-Clause */
/* store_window.c: the rows kept in memory for a network backend
 * (store_window.h): spans of rows in id order, the window of the newest
 * ones and an LRU cache of fetched pages, and reads over them under the
 * visibility rule. Each row is one allocation, its strings after it. */
#include "store/store_window.h"

#include "common/util.h"
#include "store/visibility.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One row, its strings in the same allocation. */
struct store_window_row {
	struct store_event ev;
};

static char *put_str(char **p, const char *s, size_t n)
{
	char *at = *p;
	memcpy(at, s, n);
	at[n] = '\0';
	*p += n + 1;
	return at;
}

static size_t event_bytes(const struct store_event *ev)
{
	return sizeof(struct store_window_row) + ev->type_len + ev->topic_len + ev->data_len + 3 +
	       (ev->mercure ? ev->mercure_len + 1 : 0);
}

static struct store_window_row *row_new(const struct store_event *ev)
{
	struct store_window_row *r = xmalloc(event_bytes(ev));
	char *p = (char *)(r + 1);
	r->ev = *ev;
	r->ev.type = put_str(&p, ev->type, ev->type_len);
	r->ev.topic = put_str(&p, ev->topic, ev->topic_len);
	r->ev.data = put_str(&p, ev->data, ev->data_len);
	if (ev->mercure)
		r->ev.mercure = put_str(&p, ev->mercure, ev->mercure_len);
	return r;
}

/* ---- spans ---- */

static void span_push(struct store_span *s, struct store_window_row *r)
{
	s->bytes += event_bytes(&r->ev);
	if (s->start + s->n == s->cap) {
		if (s->start > s->cap / 2) {
			memmove(s->rows, s->rows + s->start, s->n * sizeof(*s->rows));
			s->start = 0;
		} else {
			s->cap = s->cap ? s->cap * 2 : 64;
			s->rows = xrealloc(s->rows, s->cap * sizeof(*s->rows));
		}
	}
	s->rows[s->start + s->n++] = r;
}

static const struct store_event *span_at(const struct store_span *s, size_t i)
{
	return &s->rows[s->start + i]->ev;
}

/* Drop the oldest row; the span then starts after it. */
static void span_shift(struct store_span *s)
{
	struct store_window_row *r = s->rows[s->start];
	s->lo = r->ev.id;
	s->bytes -= event_bytes(&r->ev);
	free(r);
	s->start++;
	s->n--;
}

static void span_clear(struct store_span *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->rows[s->start + i]);
	free(s->rows);
	memset(s, 0, sizeof(*s));
}

/* The first row with an id above after. */
static size_t span_find(const struct store_span *s, int64_t after)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (span_at(s, mid)->id <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* ---- the window ---- */

void store_window_init(struct store_window *w, int64_t newest, void (*offer)(void *arg), void *arg)
{
	memset(w, 0, sizeof(*w));
	w->newest.lo = w->newest.hi = newest;
	w->offer = offer;
	w->offer_arg = arg;
}

void store_window_free(struct store_window *w)
{
	span_clear(&w->newest);
	for (size_t i = 0; i < w->npages; i++)
		span_clear(&w->pages[i]);
	w->npages = 0;
}

void store_window_start_at(struct store_window *w, int64_t newest)
{
	w->newest.lo = w->newest.hi = newest;
}

size_t store_window_row_size(const struct store_window *w)
{
	return w->newest.n ? w->newest.bytes / w->newest.n : 256;
}

/* Room for one more row of size bytes: the oldest rows go, but rows no
 * unfiltered read has reached are first offered (once per call). */
static void make_room(struct store_window *w, size_t size)
{
	struct store_span *s = &w->newest;
	bool offered = false;
	while (s->n && (s->n >= STORE_WINDOW_ROWS || s->bytes + size > STORE_WINDOW_BYTES)) {
		if (span_at(s, 0)->id > w->polled_through && !offered && !w->offering && w->offer) {
			w->offering = true;
			w->offer(w->offer_arg);
			w->offering = false;
			offered = true;
			continue;
		}
		span_shift(s);
	}
}

bool store_window_add(struct store_window *w, const struct store_event *ev)
{
	if (ev->id <= w->newest.hi)
		return false;
	make_room(w, event_bytes(ev));
	span_push(&w->newest, row_new(ev));
	w->newest.hi = ev->id;
	return true;
}

/* ---- the pages ---- */

static size_t pages_bytes(const struct store_window *w)
{
	size_t b = 0;
	for (size_t i = 0; i < w->npages; i++)
		b += w->pages[i].bytes;
	return b;
}

/* Drop the least recently read page (not keep) until there is a free slot
 * and the pages hold at most STORE_WINDOW_PAGES_BYTES. Returns where keep
 * is now (it may move into a freed slot). */
static struct store_span *evict_pages(struct store_window *w, struct store_span *keep)
{
	while (w->npages && (w->npages == STORE_WINDOW_PAGES || pages_bytes(w) > STORE_WINDOW_PAGES_BYTES)) {
		size_t oldest = w->npages;
		for (size_t i = 0; i < w->npages; i++)
			if (&w->pages[i] != keep && (oldest == w->npages || w->pages[i].used < w->pages[oldest].used))
				oldest = i;
		if (oldest == w->npages)
			break;
		span_clear(&w->pages[oldest]);
		w->pages[oldest] = w->pages[--w->npages];
		memset(&w->pages[w->npages], 0, sizeof(w->pages[w->npages]));
		if (keep == &w->pages[w->npages])
			keep = &w->pages[oldest];
	}
	return keep;
}

struct store_span *store_window_page_begin(struct store_window *w, int64_t after)
{
	evict_pages(w, NULL);
	struct store_span *p = &w->pages[w->npages++];
	p->lo = p->hi = after;
	return p;
}

void store_window_page_add(struct store_span *p, const struct store_event *ev)
{
	if (ev->id <= p->lo || (p->n && ev->id <= span_at(p, p->n - 1)->id))
		return;
	span_push(p, row_new(ev));
}

int64_t store_window_page_end(struct store_window *w, struct store_span *p, int64_t hi)
{
	p->hi = hi;
	int64_t first = p->n ? span_at(p, 0)->id : p->hi + 1;
	p->used = ++w->clock;
	evict_pages(w, p); /* the new page stays: its reader is about to read it */
	return first > p->lo + 1 ? first - 1 : 0;
}

/* ---- reads ---- */

/* What holds the rows right after pos: the window, or a page. */
static struct store_span *covering(struct store_window *w, int64_t pos)
{
	if (w->newest.lo <= pos && pos < w->newest.hi)
		return &w->newest;
	for (size_t i = 0; i < w->npages; i++)
		if (w->pages[i].lo <= pos && pos < w->pages[i].hi)
			return &w->pages[i];
	return NULL;
}

int store_window_read(struct store_window *w, int64_t after, int64_t upto, size_t limit, const struct store_filter *f,
		      store_row_cb cb, void *arg, int64_t *through, int64_t *gap)
{
	*gap = -1;
	if (upto > w->newest.hi)
		upto = w->newest.hi;
	int64_t pos = after;
	size_t n = 0, examined = 0;
	bool stopped = false, spent = false;
	while (pos < upto && n < limit && !stopped && !spent) {
		struct store_span *s = covering(w, pos);
		if (!s)
			break;
		s->used = ++w->clock;
		int64_t end = s->hi < upto ? s->hi : upto;
		for (size_t i = span_find(s, pos); i < s->n; i++) {
			const struct store_event *ev = span_at(s, i);
			if (ev->id > end)
				break;
			/* A filtered read looks at a bounded number of rows, so
			 * one that wants little costs the loop little at a
			 * time; it says how far it got (through). */
			if (f && ++examined > STORE_WINDOW_READ_BUDGET) {
				spent = true;
				break;
			}
			pos = ev->id;
			if (!visibility_passes(f, ev->topic, ev->topic_len, ev->public))
				continue;
			n++;
			if (cb(arg, ev) != 0)
				stopped = true;
			if (stopped || n == limit)
				break;
		}
		if (!stopped && !spent && n < limit)
			pos = end;
	}
	if (pos < upto && n < limit && !stopped && !spent)
		*gap = pos;
	if (!f && pos > w->polled_through)
		w->polled_through = pos;
	if (pos == after && after < upto)
		return -EAGAIN;
	if (through)
		*through = pos;
	return (int)n;
}
