/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_subs.c: active Mercure subscriptions, their events and the
 * subscription API's documents (mercure_subs.h). */
#include "mercure/mercure_subs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/event_batch.h"
#include "store/idempotency.h"
#include "store/mercure_update.h"
#include "common/list.h"
#include "common/rate_limit.h"
#include "common/util.h"

struct mercure_sub {
	struct list_node node; /* on mercure_subs.list, newest first */
	char *subscriber;
	char *hub_path;
	size_t n;
	enum mercure_kind *kinds;
	char **matches;
};

struct mercure_subs {
	struct hub *hub;
	struct list list;
	struct event_batch *events; /* subscription events on their way to the log; NULL: none */
	struct rate_limit *budget;  /* events per client address */
};

#define BUDGET_KEYS 16384 /* addresses whose budgets are kept apart */

/* Subscription events were stored: the hub reads them, as after a
 * publish. */
static void events_stored(void *arg)
{
	struct mercure_subs *s = arg;
	if (s->hub)
		hub_poll(s->hub);
}

struct mercure_subs *mercure_subs_new(struct loop *lp, struct store *st, struct hub *hub, struct metrics *m)
{
	struct mercure_subs *s = xcalloc(1, sizeof(*s));
	s->hub = hub;
	if (st && store_keeps_mercure(st)) {
		struct event_batch_spec spec = {
			.name = "mercure", .rows = "subscription events", .stored = events_stored, .arg = s
		};
		s->events = event_batch_new(lp, st, m, &spec);
	}
	s->budget = rate_limit_new(BUDGET_KEYS);
	return s;
}

void mercure_subs_free(struct mercure_subs *s)
{
	if (!s)
		return;
	event_batch_close(s->events);
	rate_limit_free(s->budget);
	free(s);
}

char *mercure_pct(const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";
	char *out = xmalloc(3 * n + 1), *p = out;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || strchr("-._~", c)) {
			*p++ = (char)c;
		} else {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		}
	}
	*p = '\0';
	return out;
}

static const char *kind_name(enum mercure_kind k)
{
	return k == MERCURE_URLPATTERN ? "urlpattern" : "exact";
}

/* A growing text. */
struct text {
	char *p;
	size_t n, cap;
};

static void add(struct text *t, const char *s, size_t n)
{
	if (t->n + n + 1 > t->cap) {
		t->cap = (t->n + n + 1) * 2;
		t->p = xrealloc(t->p, t->cap);
	}
	memcpy(t->p + t->n, s, n);
	t->n += n;
	t->p[t->n] = '\0';
}

static void adds(struct text *t, const char *s)
{
	add(t, s, strlen(s));
}

/* s as a JSON string (its bytes hold no control character). */
static void add_json(struct text *t, const char *s)
{
	add(t, "\"", 1);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			add(t, "\\", 1);
		add(t, s, 1);
	}
	add(t, "\"", 1);
}

/* The topic of sub's i-th subscription (a new string). */
static char *sub_topic(const struct mercure_sub *sub, size_t i)
{
	char *m = mercure_pct(sub->matches[i], strlen(sub->matches[i]));
	char *u = mercure_pct(sub->subscriber, strlen(sub->subscriber));
	size_t len = strlen(sub->hub_path) + strlen(m) + strlen(u) + 40;
	char *t = xmalloc(len);
	snprintf(t, len, "%s/subscriptions/%s/%s/%s", sub->hub_path, kind_name(sub->kinds[i]), m, u);
	free(m);
	free(u);
	return t;
}

/* The subscription document of sub's i-th subscription at t. */
static void add_doc(struct text *t, const struct mercure_sub *sub, size_t i, bool active)
{
	char *topic = sub_topic(sub, i);
	adds(t, "{\"id\":");
	add_json(t, topic);
	adds(t, ",\"type\":\"subscription\",\"match_type\":\"");
	adds(t, kind_name(sub->kinds[i]));
	adds(t, "\",\"match\":");
	add_json(t, sub->matches[i]);
	adds(t, ",\"subscriber\":");
	add_json(t, sub->subscriber);
	adds(t, active ? ",\"active\":true}" : ",\"active\":false}");
	free(topic);
}

/* Queue the event of sub's i-th subscription. */
static void queue(struct mercure_subs *s, const struct mercure_sub *sub, size_t i, bool active)
{
	if (!s->events)
		return;
	struct text data = { 0 };
	add_doc(&data, sub, i, active);
	char *topic = sub_topic(sub, i);
	char *id = mercure_new_id();
	size_t block_len;
	char *block = mercure_block_new(id, "", &topic, 1, &block_len);
	/* The row's topic: herald's rule takes no '%'. */
	char hex[IDEM_HEX_LEN];
	idem_digest(topic, strlen(topic), NULL, 0, hex);
	char row_topic[80];
	snprintf(row_topic, sizeof(row_topic), "$mercure/%s", hex);
	struct store_new_event ev = { .type = "mercure",
				      .topic = row_topic,
				      .data = data.p,
				      .data_len = data.n,
				      .public = false,
				      .mercure_id = id,
				      .mercure = block,
				      .mercure_len = block_len };
	event_batch_add(s->events, &ev); /* copies the row */
	free(topic);
	free(id);
	free(block);
	free(data.p);
}

uint64_t mercure_subs_admit(struct mercure_subs *s, const char *key, size_t n, int64_t per_minute, uint64_t now_ms)
{
	if (!s->events || per_minute <= 0)
		return 0;
	return rate_limit_take(s->budget, key, 2 * (uint64_t)n, (uint64_t)per_minute, now_ms);
}

struct mercure_sub *mercure_subs_add(struct mercure_subs *s, const char *hub_path, const struct mercure_matchers *want)
{
	struct mercure_sub *sub = xcalloc(1, sizeof(*sub));
	sub->subscriber = mercure_new_id();
	sub->hub_path = xstrdup(hub_path);
	sub->n = want->n;
	sub->kinds = xcalloc(want->n ? want->n : 1, sizeof(*sub->kinds));
	sub->matches = xcalloc(want->n ? want->n : 1, sizeof(*sub->matches));
	for (size_t i = 0; i < want->n; i++) {
		sub->kinds[i] = want->v[i].kind == MERCURE_URLPATTERN ? MERCURE_URLPATTERN : MERCURE_EXACT;
		sub->matches[i] = xstrdup(want->v[i].text);
		queue(s, sub, i, true);
	}
	list_push(&s->list, &sub->node);
	return sub;
}

void mercure_subs_remove(struct mercure_subs *s, struct mercure_sub *sub)
{
	if (!sub)
		return;
	for (size_t i = 0; i < sub->n; i++)
		queue(s, sub, i, false);
	list_unlink(&s->list, &sub->node);
	for (size_t i = 0; i < sub->n; i++)
		free(sub->matches[i]);
	free(sub->matches);
	free(sub->kinds);
	free(sub->subscriber);
	free(sub->hub_path);
	free(sub);
}

/* Percent-decode one path segment s[0..n) into a new string; NULL when
 * malformed. */
static char *segment(const char *s, size_t n)
{
	char *out = xmalloc(n + 1), *p = out;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%') {
			unsigned v;
			if (i + 2 >= n) {
				free(out);
				return NULL;
			}
			char hex[3] = { s[i + 1], s[i + 2], 0 };
			if (sscanf(hex, "%2x", &v) != 1 || v == 0) {
				free(out);
				return NULL;
			}
			*p++ = (char)v;
			i += 2;
		} else {
			*p++ = s[i];
		}
	}
	*p = '\0';
	return out;
}

char *mercure_subs_answer(struct mercure_subs *s, const char *hub_path, const char *rest, size_t *len)
{
	/* rest: "", "/TYPE/MATCH" or "/TYPE/MATCH/SUBSCRIBER". */
	char *parts[3] = { NULL, NULL, NULL };
	size_t nparts = 0;
	const char *p = rest;
	bool bad = false;
	while (*p && !bad) {
		if (*p != '/' || nparts == 3) {
			bad = true;
			break;
		}
		p++;
		size_t n = strcspn(p, "/");
		parts[nparts] = segment(p, n);
		bad = !parts[nparts++];
		p += n;
	}
	enum mercure_kind kind = MERCURE_EXACT;
	if (!bad && nparts >= 1) {
		if (strcmp(parts[0], "urlpattern") == 0)
			kind = MERCURE_URLPATTERN;
		else if (strcmp(parts[0], "exact") != 0)
			bad = true;
	}
	char *out = NULL;
	if (!bad && nparts != 1) {
		struct text t = { 0 };
		size_t found = 0;
		if (nparts < 3) {
			adds(&t, "{\"id\":");
			char id[2200];
			snprintf(id, sizeof(id), "%s/subscriptions%s", hub_path, rest);
			add_json(&t, id);
			adds(&t, ",\"type\":\"subscriptions\",\"subscriptions\":[");
		}
		for (const struct list_node *n = s->list.first; n; n = n->next) {
			const struct mercure_sub *sub = list_item(n, const struct mercure_sub, node);
			for (size_t i = 0; i < sub->n; i++) {
				if (strcmp(sub->hub_path, hub_path) != 0)
					continue;
				if (nparts >= 2 && (sub->kinds[i] != kind || strcmp(sub->matches[i], parts[1]) != 0))
					continue;
				if (nparts == 3 && strcmp(sub->subscriber, parts[2]) != 0)
					continue;
				if (found++ && nparts < 3)
					add(&t, ",", 1);
				if (nparts < 3 || found == 1)
					add_doc(&t, sub, i, true);
			}
		}
		if (nparts < 3)
			adds(&t, "]}");
		if (nparts == 3 && !found) {
			free(t.p);
		} else {
			adds(&t, "\n");
			out = t.p;
			*len = t.n;
		}
	}
	for (size_t i = 0; i < 3; i++)
		free(parts[i]);
	return out;
}
