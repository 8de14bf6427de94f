/* SPDX-License-Identifier: BSD-2-Clause */
/* rate_limit.c: budgets per key in a chained hash table, one "full again
 * at" time per key (rate_limit.h). */
#include "common/rate_limit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

#define BUCKETS 1024
#define MINUTE_US UINT64_C(60000000)
#define SWEEP_EVERY_MS 1000 /* a full table looks for keys to drop at most this often */

struct entry {
	struct entry *next;
	uint64_t full_at_us; /* when the key's budget is whole again */
	char key[RATE_LIMIT_KEY_MAX];
};

struct rate_limit {
	struct entry *buckets[BUCKETS];
	size_t n, max_keys;
	struct entry shared; /* every key past max_keys */
	bool shared_used;
	uint64_t swept_ms;
};

struct rate_limit *rate_limit_new(size_t max_keys)
{
	struct rate_limit *r = xcalloc(1, sizeof(*r));
	r->max_keys = max_keys ? max_keys : 1;
	return r;
}

void rate_limit_free(struct rate_limit *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < BUCKETS; i++)
		while (r->buckets[i]) {
			struct entry *e = r->buckets[i];
			r->buckets[i] = e->next;
			free(e);
		}
	free(r);
}

size_t rate_limit_keys(const struct rate_limit *r)
{
	return r->n + (r->shared_used ? 1 : 0);
}

/* Drop the keys of chain *pp whose budget is whole at now_us. */
static void sweep_chain(struct rate_limit *r, struct entry **pp, uint64_t now_us)
{
	while (*pp) {
		struct entry *e = *pp;
		if (e->full_at_us <= now_us) {
			*pp = e->next;
			free(e);
			r->n--;
		} else {
			pp = &e->next;
		}
	}
}

/* key's entry, made when missing (the shared one when the table is
 * full), after its chain was swept. */
static struct entry *entry_of(struct rate_limit *r, const char *key, uint64_t now_ms)
{
	char k[RATE_LIMIT_KEY_MAX];
	snprintf(k, sizeof(k), "%s", key);
	unsigned hash = 2166136261u; /* FNV-1a */
	for (const char *p = k; *p; p++)
		hash = (hash ^ (unsigned char)*p) * 16777619u;
	struct entry **head = &r->buckets[hash % BUCKETS];
	sweep_chain(r, head, now_ms * 1000);
	for (struct entry *e = *head; e; e = e->next)
		if (strcmp(e->key, k) == 0)
			return e;
	if (r->n >= r->max_keys && now_ms - r->swept_ms >= SWEEP_EVERY_MS) {
		r->swept_ms = now_ms;
		for (size_t i = 0; i < BUCKETS; i++)
			sweep_chain(r, &r->buckets[i], now_ms * 1000);
	}
	if (r->n >= r->max_keys) {
		r->shared_used = true;
		return &r->shared;
	}
	struct entry *e = xcalloc(1, sizeof(*e));
	memcpy(e->key, k, sizeof(k));
	e->next = *head;
	*head = e;
	r->n++;
	return e;
}

uint64_t rate_limit_take(struct rate_limit *r, const char *key, uint64_t n, uint64_t per_minute, uint64_t now_ms)
{
	if (per_minute == 0)
		return 0;
	if (n > per_minute)
		return MINUTE_US / 1000;
	uint64_t now_us = now_ms * 1000, interval = MINUTE_US / per_minute;
	if (interval == 0)
		interval = 1;
	struct entry *e = entry_of(r, key, now_ms);
	uint64_t from = e->full_at_us > now_us ? e->full_at_us : now_us;
	uint64_t then = from + n * interval;
	if (then - now_us > MINUTE_US) {
		uint64_t wait_us = then - now_us - MINUTE_US;
		return (wait_us + 999) / 1000;
	}
	e->full_at_us = then;
	return 0;
}
