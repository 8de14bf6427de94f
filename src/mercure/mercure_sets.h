/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_sets.h: the topic matcher lists of the Mercure endpoint's live
 * subscribers, interned. Subscriptions whose lists are the same (the same
 * matchers in the same order, resolved against the same hub URL) share one
 * set, and with it one verdict per update: many subscribers with the same
 * selectors cost an update one judging, not one each.
 *
 * The registry owns its sets; a set lives while a subscriber holds a
 * reference to it (mercure_sets_intern, mercure_sets_release). Pure but
 * for its memory: no I/O. */
#ifndef HERALD_MERCURE_SETS_H
#define HERALD_MERCURE_SETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mercure/mercure_match.h"
#include "store/store.h"

struct mercure_sets;
struct mercure_set;

struct metrics;

/* An empty registry that counts its verdicts and their URL pattern steps
 * in m (mercure_judged, mercure_judged_shared, mercure_match_steps; m
 * outlives it). Aborts only when memory runs out (xmalloc). */
struct mercure_sets *mercure_sets_new(struct metrics *m);
/* Free the registry, once every set it gave out has been released (NULL:
 * nothing). */
void mercure_sets_free(struct mercure_sets *ss);

/* The set of list *l resolved against base (NUL-terminated), one reference
 * more: an existing one equal to it, or a new one. *l is taken over either
 * way (moved into the new set, or freed) and left empty. */
struct mercure_set *mercure_sets_intern(struct mercure_sets *ss, struct mercure_matchers *l, const char *base);
/* Drop one reference to s; the last one frees it. */
void mercure_sets_release(struct mercure_sets *ss, struct mercure_set *s);

/* Whether one of s's matchers matches one of ev's topics: the update's
 * (its Mercure block), else the row's own topic (none: no). Judged once
 * per update and set: the verdicts of the last few updates are kept. */
bool mercure_set_wants(struct mercure_set *s, const struct store_event *ev);

/* s's matchers, owned by s. */
const struct mercure_matchers *mercure_set_matchers(const struct mercure_set *s);

/* Where the hub's index is to find s's subscribers (reader_spec.keys):
 * copies, malloc'd (the array and its strings, the caller's), *n of them;
 * NULL with *n 0 for a set that may want any update. An exact matcher is
 * found under its text, a URL pattern under its path's literal prefix up
 * to its last '/' (a subtree pattern); a matcher without one ("*", a path
 * that starts with a variable) makes the set want every update. */
char **mercure_set_keys(const struct mercure_set *s, size_t *n);

/* The hub's rule prober (hub_rule_probe) for the sets of ss: each of ev's
 * topics (the update's, else the row's), and its path with a '?' after it
 * (resolved against the hub URL's folder of every set in use), so that
 * every subscriber that may want ev is found under one of its keys. */
void mercure_sets_probe(void *arg, const struct store_event *ev, void (*hit)(void *ctx, const char *key, size_t n),
			void *ctx);

/* Distinct sets alive. */
size_t mercure_sets_count(const struct mercure_sets *ss);

#endif
