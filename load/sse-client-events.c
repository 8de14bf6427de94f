/* SPDX-License-Identifier: BSD-2-Clause */
/* sse-client-events.c: the records of a run's events (load/readers'): when each reader
 * had each event, and the matching of the ids readers see to the publishes
 * that made them. A POST's answer (with the id) can come after readers
 * already had the event, so such ids wait per reader (at most PEND_MAX, the
 * oldest dropped) until the publisher learns them. */
#include "sse-client.h"

#include <stdlib.h>
#include <string.h>

void events_init(struct events *e, long n, long k)
{
	memset(e, 0, sizeof(*e));
	e->n = n;
	e->k = k;
	e->recv_ns = xcalloc((size_t)n * (size_t)k, sizeof(*e->recv_ns));
	e->id = xcalloc((size_t)k, sizeof(*e->id));
	e->t0 = xcalloc((size_t)k, sizeof(*e->t0));
	e->t1 = xcalloc((size_t)k, sizeof(*e->t1));
	e->got = xcalloc((size_t)k, sizeof(*e->got));
	e->failed = xcalloc((size_t)k, sizeof(*e->failed));
	e->pend = xcalloc((size_t)n, sizeof(*e->pend));
}

void events_free(struct events *e)
{
	free(e->recv_ns);
	free(e->id);
	free(e->t0);
	free(e->t1);
	free(e->got);
	free(e->failed);
	free(e->pend);
	memset(e, 0, sizeof(*e));
}

/* The event the publisher got this id for; -1 when none (yet). */
static long event_of(const struct events *e, int64_t id)
{
	for (long k = 0; k < e->published; k++)
		if (e->id[k] == id)
			return k;
	return -1;
}

/* Reader i had event k at time t (only its first arrival counts). */
static void got_event(struct events *e, long i, long k, int64_t t)
{
	int64_t *slot = &e->recv_ns[(size_t)i * (size_t)e->k + (size_t)k];
	if (*slot)
		return;
	*slot = t;
	e->got[k]++;
}

void events_saw(struct events *e, long i, int64_t id, int64_t t)
{
	long k = event_of(e, id);
	if (k >= 0) {
		got_event(e, i, k, t);
		return;
	}
	if (id <= e->max_known || e->published == 0)
		return; /* someone else's event */
	struct pending *p = &e->pend[i];
	if (p->n == PEND_MAX) {
		memmove(p->id, p->id + 1, (PEND_MAX - 1) * sizeof(p->id[0]));
		memmove(p->t, p->t + 1, (PEND_MAX - 1) * sizeof(p->t[0]));
		p->n--;
	}
	p->id[p->n] = id;
	p->t[p->n] = t;
	p->n++;
}

void events_id_known(struct events *e, long k, int64_t id)
{
	e->id[k] = id;
	if (id > e->max_known)
		e->max_known = id;
	for (long i = 0; i < e->n; i++) {
		struct pending *p = &e->pend[i];
		for (int j = 0; j < p->n; j++) {
			if (p->id[j] != id)
				continue;
			got_event(e, i, k, p->t[j]);
			p->n--;
			memmove(p->id + j, p->id + j + 1, (size_t)(p->n - j) * sizeof(p->id[0]));
			memmove(p->t + j, p->t + j + 1, (size_t)(p->n - j) * sizeof(p->t[0]));
			break;
		}
	}
}

int64_t events_last_arrival(const struct events *e, long k)
{
	int64_t last = 0;
	for (long i = 0; i < e->n; i++) {
		int64_t t = e->recv_ns[(size_t)i * (size_t)e->k + (size_t)k];
		if (t > last)
			last = t;
	}
	return last;
}
