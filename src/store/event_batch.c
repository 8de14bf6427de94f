/* SPDX-License-Identifier: BSD-2-Clause */
/* event_batch.c: the queue of rows herald appends on its own behalf, its
 * retries in order and its bound (event_batch.h).
 *
 * The queue is a list, oldest first, of rows the queue owns (each one
 * allocation: the row and copies of its strings). While an append is out
 * (appending), its rows are the first `sending` of the list and `unsent`
 * points at the link to the first row after them; they leave the list
 * only when the log answers (stored, or given up). A failed append leaves
 * them where they are, so the retry sends them again ahead of whatever
 * came meanwhile, and only rows behind them (never the ones in the
 * store's hands) are dropped for room. */
#include "store/event_batch.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

struct row {
	struct row *next;
	size_t bytes;              /* this allocation, counted against max_bytes */
	struct store_new_event ev; /* its strings point into text */
	char text[];
};

struct event_batch {
	struct loop *lp;
	struct store *st;
	struct metrics *m;
	struct event_batch_spec spec;
	struct row *head, **tail; /* tail: the link a new row goes in */
	struct row **unsent;      /* the link to the first row not in flight */
	size_t nrows, bytes;
	size_t sending;          /* rows of the append in flight (the first ones) */
	bool appending;          /* an append is out */
	bool closing;            /* the owner let go: the answer in flight frees b */
	bool in_close;           /* event_batch_close is appending what waits */
	bool close_failed;       /* ... and the log refused it */
	uint64_t failing_since;  /* the first failure of the rows at the head; 0: none */
	uint64_t dropped;        /* rows dropped for room since an append was last stored */
	struct loop_timer timer; /* the next append: this pass (0 ms) or a retry */
	char label[96];          /* what the loop's stall report names */
};

struct event_batch *event_batch_new(struct loop *lp, struct store *st, struct metrics *m,
				    const struct event_batch_spec *spec)
{
	struct event_batch *b = xcalloc(1, sizeof(*b));
	b->lp = lp;
	b->st = st;
	b->m = m;
	b->spec = *spec;
	if (!b->spec.batch_rows)
		b->spec.batch_rows = EVENT_BATCH_ROWS;
	if (!b->spec.max_bytes)
		b->spec.max_bytes = EVENT_BATCH_MAX_BYTES;
	if (!b->spec.give_up_ms)
		b->spec.give_up_ms = EVENT_BATCH_GIVE_UP_MS;
	b->tail = &b->head;
	b->unsent = &b->head;
	snprintf(b->label, sizeof(b->label), "appending %s (%s)", spec->rows, spec->name);
	return b;
}

size_t event_batch_rows(const struct event_batch *b)
{
	return b->nrows;
}

size_t event_batch_bytes(const struct event_batch *b)
{
	return b->bytes;
}

/* Unlink the row *at (not in flight) and free it. */
static void unlink_row(struct event_batch *b, struct row **at)
{
	struct row *r = *at;
	*at = r->next;
	if (b->tail == &r->next)
		b->tail = at;
	b->nrows--;
	b->bytes -= r->bytes;
	free(r);
}

/* Free the first n rows (an append's, answered). */
static void drop_head(struct event_batch *b, size_t n)
{
	for (size_t i = 0; i < n && b->head; i++)
		unlink_row(b, &b->head);
	b->unsent = &b->head;
}

/* n rows will never be stored: say why, count them. */
static void lost(struct event_batch *b, size_t n, const char *why)
{
	if (!n)
		return;
	log_err("%s: %zu %s were not stored: %s", b->spec.name, n, b->spec.rows, why);
	if (b->m)
		b->m->own_events_dropped += n;
}

static void release(struct event_batch *b)
{
	while (b->head)
		unlink_row(b, &b->head);
	free(b);
}

static void flush(void *arg);

/* The next append in delay_ms, unless one is out or already due. */
static void schedule(struct event_batch *b, uint64_t delay_ms)
{
	if (!b->appending && !loop_timer_active(&b->timer))
		loop_timer_start(b->lp, &b->timer, delay_ms, flush, b);
}

static void appended(void *arg, int rc, const struct store_appended *res)
{
	struct event_batch *b = arg;
	(void)res;
	size_t n = b->sending;
	b->appending = false;
	b->sending = 0;
	b->unsent = &b->head;
	if (b->closing) {
		if (rc < 0) {
			lost(b, n, strerror(-rc));
			b->close_failed = true;
		}
		drop_head(b, n);
		if (!b->in_close)
			release(b); /* answered after event_batch_close returned */
		return;
	}
	if (rc < 0) {
		uint64_t now = loop_now(b->lp);
		if (!b->failing_since) {
			b->failing_since = now ? now : 1;
			log_warn("%s: %zu %s could not be stored yet (%s); trying again", b->spec.name, n, b->spec.rows,
				 strerror(-rc));
		}
		if (now < b->failing_since + b->spec.give_up_ms) {
			/* The log is busy or unreachable for now: the same rows
			 * again shortly, ahead of any newer. */
			schedule(b, rc == -EBUSY ? STORE_BUSY_RETRY_MS : EVENT_BATCH_RETRY_MS);
			return;
		}
		lost(b, n, strerror(-rc));
		drop_head(b, n);
	} else {
		drop_head(b, n);
		if (b->dropped)
			log_warn("%s: the log takes %s again; %llu were dropped for room meanwhile", b->spec.name,
				 b->spec.rows, (unsigned long long)b->dropped);
		b->dropped = 0;
	}
	b->failing_since = 0;
	if (b->head)
		schedule(b, 0); /* the rest of a long queue: one append a pass */
	if (rc >= 0 && b->spec.stored)
		b->spec.stored(b->spec.arg); /* last: it may add rows */
}

/* Append the oldest rows, at most batch_rows. */
static void flush(void *arg)
{
	struct event_batch *b = arg;
	if (b->appending || !b->head)
		return;
	size_t n = 0;
	struct store_new_event *evs = xmalloc(MIN(b->nrows, b->spec.batch_rows) * sizeof(*evs));
	struct row **at = &b->head;
	for (; *at && n < b->spec.batch_rows; at = &(*at)->next)
		evs[n++] = (*at)->ev;
	b->unsent = at;
	b->sending = n;
	b->appending = true;
	loop_label(b->lp, b->label, NULL);
	store_append(b->st, evs, n, appended, b); /* copies the rows; may answer before it returns */
	free(evs);
}

/* Make room for a row of bytes by dropping the oldest rows not in
 * flight. Returns whether it fits now. */
static bool make_room(struct event_batch *b, size_t bytes)
{
	size_t before = b->nrows;
	while (b->bytes + bytes > b->spec.max_bytes && *b->unsent)
		unlink_row(b, b->unsent);
	bool fits = b->bytes + bytes <= b->spec.max_bytes;
	size_t n = before - b->nrows + (fits ? 0 : 1);
	if (n) {
		if (bytes > b->spec.max_bytes)
			log_err("%s: one of the %s is %zu bytes, more than the queue holds (%zu): dropped",
				b->spec.name, b->spec.rows, bytes, b->spec.max_bytes);
		else if (!b->dropped)
			log_err("%s: %s waiting for the log fill the queue (%zu bytes): the oldest are dropped "
				"(herald_own_events_dropped_total counts them)",
				b->spec.name, b->spec.rows, b->spec.max_bytes);
		b->dropped += n;
		if (b->m)
			b->m->own_events_dropped += n;
	}
	return fits;
}

/* Copy n bytes of s after *w, NUL-terminated; returns the copy (NULL for
 * a NULL s). */
static const char *put(char **w, const char *s, size_t n)
{
	if (!s)
		return NULL;
	char *out = *w;
	memcpy(out, s, n);
	out[n] = '\0';
	*w += n + 1;
	return out;
}

void event_batch_add(struct event_batch *b, const struct store_new_event *ev)
{
	size_t type_len = strlen(ev->type), topic_len = strlen(ev->topic);
	size_t id_len = ev->mercure_id ? strlen(ev->mercure_id) : 0;
	size_t bytes = sizeof(struct row) + type_len + topic_len + ev->data_len + id_len + ev->mercure_len + 5;
	if (!make_room(b, bytes))
		return;
	struct row *r = xmalloc(bytes);
	char *w = r->text;
	r->next = NULL;
	r->bytes = bytes;
	r->ev = (struct store_new_event){ .type = put(&w, ev->type, type_len),
					  .topic = put(&w, ev->topic, topic_len),
					  .data = put(&w, ev->data ? ev->data : "", ev->data_len),
					  .data_len = ev->data_len,
					  .public = ev->public,
					  .mercure_id = put(&w, ev->mercure_id, id_len),
					  .mercure = put(&w, ev->mercure, ev->mercure_len),
					  .mercure_len = ev->mercure ? ev->mercure_len : 0 };
	*b->tail = r;
	b->tail = &r->next;
	b->nrows++;
	b->bytes += bytes;
	schedule(b, 0); /* once per pass: a burst of rows makes one append */
}

void event_batch_close(struct event_batch *b)
{
	if (!b)
		return;
	loop_timer_stop(b->lp, &b->timer);
	b->closing = true;
	if (!b->appending) {
		/* One attempt at what waits, batch after batch while the log
		 * answers at once and takes them. */
		b->in_close = true;
		while (b->head && !b->appending && !b->close_failed)
			flush(b);
		b->in_close = false;
	}
	/* What is behind an append in flight, or after a refusal. */
	size_t n = 0;
	while (*b->unsent) {
		unlink_row(b, b->unsent);
		n++;
	}
	lost(b, n, "herald stopped before the log took them");
	if (!b->appending)
		release(b);
}
