/* SPDX-License-Identifier: BSD-2-Clause */
/* rate-lat.c: what load/rate's readers received. Every frame is one
 * delivery: its latency (arrival minus the send time in its data) goes into
 * the histogram of the step that sent it, and its id is checked against the
 * reader's previous one. herald's own database holds only this run's
 * events, so each reader must see 1, 2, 3 ... with no gap and no repeat.
 *
 * Histogram: a few million deliveries a step cannot each be kept, so
 * latencies are counted in buckets: exact below 64 us, then 64 buckets per
 * power of two (1.6 % apart) up to 2^42 us. */
#include "rate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static unsigned bucket_of(uint64_t us)
{
	if (us < 64)
		return (unsigned)us;
	unsigned e = 63u - (unsigned)__builtin_clzll(us); /* 6 and up */
	if (e > 41)
		return LAT_BUCKETS - 1;
	return (e - 5) * 64 + (unsigned)((us >> (e - 6)) & 63);
}

/* The least latency in bucket b. */
static uint64_t bucket_floor(unsigned b)
{
	if (b < 64)
		return b;
	unsigned e = b / 64 + 5, m = b % 64;
	return ((uint64_t)(64 + m)) << (e - 6);
}

void lat_add(struct lat_hist *h, uint64_t us)
{
	h->b[bucket_of(us)]++;
	h->count++;
	if (us > h->max_us)
		h->max_us = us;
}

double lat_pct_ms(const struct lat_hist *h, double p)
{
	if (!h->count)
		return NAN;
	if (p >= 100)
		return (double)h->max_us / 1e3;
	/* Nearest rank, as tool_percentile. */
	uint64_t rank = (uint64_t)ceil(p / 100 * (double)h->count);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < LAT_BUCKETS; b++) {
		seen += h->b[b];
		if (seen >= rank)
			return (double)bucket_floor(b) / 1e3;
	}
	return (double)h->max_us / 1e3;
}

void rate_recv_init(struct rate_recv *rv, long n)
{
	memset(rv, 0, sizeof(*rv));
	rv->n = n;
	rv->r = xcalloc((size_t)n, sizeof(*rv->r));
	rv->step = xcalloc(RATE_MAX_STEPS, sizeof(*rv->step));
}

void rate_recv_free(struct rate_recv *rv)
{
	free(rv->r);
	free(rv->step);
	memset(rv, 0, sizeof(*rv));
}

int rate_recv_step(struct rate_recv *rv, int64_t t0)
{
	struct rate_step_recv *s = &rv->step[rv->nsteps];
	memset(s, 0, sizeof(*s));
	s->t0 = t0;
	return rv->nsteps++;
}

void rate_recv_frame(void *arg, long i, int64_t id, int64_t stamp, int64_t now)
{
	struct rate_recv *rv = arg;
	struct rate_reader *r = &rv->r[i];
	if (id <= r->last_id)
		r->order_errs++;
	else if (id > r->last_id + 1)
		r->gaps++;
	if (id > r->last_id)
		r->last_id = id;
	r->got++;
	/* The step that sent it: the last one begun at or before its stamp. */
	int k = rv->nsteps - 1;
	while (k >= 0 && stamp < rv->step[k].t0)
		k--;
	if (k < 0 || stamp <= 0) {
		rv->foreign++;
		return;
	}
	struct rate_step_recv *s = &rv->step[k];
	s->deliveries++;
	if (now > s->last_arrival)
		s->last_arrival = now;
	lat_add(&s->lat, now > stamp ? (uint64_t)(now - stamp) / 1000 : 0);
}

long rate_recv_behind(const struct rate_recv *rv, const struct client *c, int64_t last_id)
{
	long behind = 0;
	for (long i = 0; i < rv->n; i++)
		if (c->r[i].state == R_OPEN && rv->r[i].last_id < last_id)
			behind++;
	return behind;
}
