/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_subs.c: active Mercure subscriptions, their events and the
 * subscription API's documents (mercure_subs.h): this process's list, and
 * with the log on Redis its copy in the node's presence share, which the
 * answers read for the whole cluster. */
#include "mercure/mercure_subs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/event_batch.h"
#include "store/idempotency.h"
#include "store/mercure_update.h"
#include "common/list.h"
#include "common/rate_limit.h"
#include "common/log.h"
#include "common/util.h"
#include "core/group.h"
#include "core/shared_records.h"
#include "presence/presence_redis.h"

struct mercure_sub {
	struct list_node node; /* on mercure_subs.list, newest first */
	char *subscriber;
	char *hub_path;
	size_t n;
	enum mercure_kind *kinds;
	char **matches;
	uint32_t *handles; /* in the group's records, one per matcher (0: not there); NULL without */
	bool shared;       /* put in the node's share on some connection */
	bool reopen;       /* put before the latest (re)connection: opened again if a sweep closed it */
};

struct mercure_subs {
	struct loop *lp;
	struct hub *hub;
	struct list list;
	struct event_batch *events;      /* subscription events on their way to the log; NULL: none */
	struct rate_limit *budget;       /* events per client address */
	struct presence_redis *share;    /* the node's share in Redis (lent); NULL: the list is this process's */
	struct shared_records *table;    /* else in a group, the group's records (lent by group.c) */
	struct loop_timer orphans_timer; /* with table: looks for a dead worker's subscriptions */
	bool table_full_said;
};

#define ORPHANS_MS 250    /* how often a dead worker's subscriptions are looked for */
#define ORPHANS_CHUNK 256 /* of them closed per look (the next follows at once) */

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
	s->lp = lp;
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
	if (s->share)
		presence_redis_subs_hooks(s->share, NULL);
	if (s->table)
		loop_timer_stop(s->lp, &s->orphans_timer);
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

/* A subscription's id, its events' topic (a new string). */
static char *sub_id(const char *hub_path, enum mercure_kind kind, const char *match, const char *subscriber)
{
	char *m = mercure_pct(match, strlen(match));
	char *u = mercure_pct(subscriber, strlen(subscriber));
	size_t len = strlen(hub_path) + strlen(m) + strlen(u) + 40;
	char *t = xmalloc(len);
	snprintf(t, len, "%s/subscriptions/%s/%s/%s", hub_path, kind_name(kind), m, u);
	free(m);
	free(u);
	return t;
}

/* One subscription, by its parts. */
struct one {
	const char *hub_path;
	enum mercure_kind kind;
	const char *match, *subscriber;
};

static struct one one_of(const struct mercure_sub *sub, size_t i)
{
	return (struct one){ sub->hub_path, sub->kinds[i], sub->matches[i], sub->subscriber };
}

/* The subscription document of o at t. */
static void add_doc(struct text *t, const struct one *o, bool active)
{
	char *topic = sub_id(o->hub_path, o->kind, o->match, o->subscriber);
	adds(t, "{\"id\":");
	add_json(t, topic);
	adds(t, ",\"type\":\"subscription\",\"match_type\":\"");
	adds(t, kind_name(o->kind));
	adds(t, "\",\"match\":");
	add_json(t, o->match);
	adds(t, ",\"subscriber\":");
	add_json(t, o->subscriber);
	adds(t, active ? ",\"active\":true}" : ",\"active\":false}");
	free(topic);
}

/* Queue the event of o. */
static void queue(struct mercure_subs *s, const struct one *o, bool active)
{
	if (!s->events)
		return;
	struct text data = { 0 };
	add_doc(&data, o, active);
	char *topic = sub_id(o->hub_path, o->kind, o->match, o->subscriber);
	size_t block_len;
	char *block = mercure_block_new("", "", &topic, 1, &block_len); /* its id: made from its number */
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
				      .mercure = block,
				      .mercure_len = block_len };
	event_batch_add(s->events, &ev); /* copies the row */
	free(topic);
	free(block);
	free(data.p);
}

char *mercure_subs_record(const char *hub_path, enum mercure_kind kind, const char *match, const char *subscriber,
			  size_t *len)
{
	struct text t = { 0 };
	adds(&t, kind_name(kind));
	adds(&t, "\n");
	adds(&t, hub_path);
	adds(&t, "\n");
	adds(&t, subscriber);
	adds(&t, "\n");
	adds(&t, match);
	*len = t.n;
	return t.p;
}

bool mercure_subs_record_parse(char *rec, size_t len, struct mercure_sub_view *v)
{
	if (memchr(rec, '\0', len))
		return false;
	char *f[4];
	f[0] = rec;
	for (int i = 1; i < 4; i++) {
		char *nl = strchr(f[i - 1], '\n');
		if (!nl)
			return false;
		*nl = '\0';
		f[i] = nl + 1;
	}
	if (strcmp(f[0], "exact") == 0)
		v->kind = MERCURE_EXACT;
	else if (strcmp(f[0], "urlpattern") == 0)
		v->kind = MERCURE_URLPATTERN;
	else
		return false;
	if (!f[1][0] || !f[2][0])
		return false;
	v->hub_path = f[1];
	v->subscriber = f[2];
	v->match = f[3];
	return true;
}

/* sub's copies in the node's share (an id and a record per matcher). */
static void share_put(struct presence_redis *r, struct mercure_sub *sub)
{
	for (size_t i = 0; i < sub->n; i++) {
		struct one o = one_of(sub, i);
		size_t len;
		char *id = sub_id(o.hub_path, o.kind, o.match, o.subscriber);
		char *rec = mercure_subs_record(o.hub_path, o.kind, o.match, o.subscriber, &len);
		if (presence_redis_subs_put(r, id, rec, len) == 0)
			sub->shared = true;
		free(id);
		free(rec);
	}
}

/* Connected to Redis (again): every subscription of this process. */
static void share_connected(void *arg)
{
	struct mercure_subs *s = arg;
	for (struct list_node *n = s->list.first; n; n = n->next) {
		struct mercure_sub *sub = list_item(n, struct mercure_sub, node);
		sub->reopen = sub->shared;
		share_put(s->share, sub);
	}
}

/* A sweep closed (events included) what this node had put before it was
 * taken for dead: what is still open opens again, said by events. */
static void share_swept(void *arg)
{
	struct mercure_subs *s = arg;
	size_t n = 0;
	for (struct list_node *l = s->list.first; l; l = l->next) {
		struct mercure_sub *sub = list_item(l, struct mercure_sub, node);
		for (size_t i = 0; sub->reopen && i < sub->n; i++, n++) {
			struct one o = one_of(sub, i);
			queue(s, &o, true);
		}
		sub->reopen = false;
	}
	log_notice("mercure: this node was taken for dead and its subscriptions closed by another; %zu opened again",
		   n);
}

/* A dead node's (or in a group a dead worker's) subscription, this one's
 * to close: its event. */
static void share_closed(void *arg, const char *record, size_t len)
{
	struct mercure_subs *s = arg;
	char *rec = xstrndup(record, len);
	struct mercure_sub_view v;
	if (mercure_subs_record_parse(rec, len, &v)) {
		struct one o = { v.hub_path, v.kind, v.match, v.subscriber };
		queue(s, &o, false);
	}
	free(rec);
}

static void orphans_tick(void *arg)
{
	struct mercure_subs *s = arg;
	size_t n = 0;
	if (shared_records_has_orphans(s->table))
		n = shared_records_claim_orphans(s->table, ORPHANS_CHUNK, share_closed, s);
	loop_timer_start(s->lp, &s->orphans_timer, n == ORPHANS_CHUNK ? 0 : ORPHANS_MS, orphans_tick, s);
}

/* sub's records in the group's table. */
static void table_put(struct mercure_subs *s, struct mercure_sub *sub)
{
	sub->handles = xcalloc(sub->n ? sub->n : 1, sizeof(*sub->handles));
	for (size_t i = 0; i < sub->n; i++) {
		size_t len;
		char *rec = mercure_subs_record(sub->hub_path, sub->kinds[i], sub->matches[i], sub->subscriber, &len);
		sub->handles[i] = shared_records_add(s->table, (unsigned)group_index(), rec, len);
		if (!sub->handles[i] && !s->table_full_said)
			log_warn("mercure: the group's table of subscriptions is full (2 x presence_max_keys cells); "
				 "a subscription is left out of the subscriptions API's answers");
		s->table_full_said |= !sub->handles[i];
		free(rec);
	}
}

void mercure_subs_share(struct mercure_subs *s, struct presence_redis *r)
{
	s->share = r;
	if (r) {
		struct presence_redis_subs_hooks h = { share_connected, share_closed, share_swept, s };
		presence_redis_subs_hooks(r, &h);
	} else if (group_on() && group_records() && s->lp) {
		s->table = group_records();
		loop_timer_start(s->lp, &s->orphans_timer, ORPHANS_MS, orphans_tick, s);
	}
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
		struct one o = one_of(sub, i);
		queue(s, &o, true);
	}
	if (s->share)
		share_put(s->share, sub);
	if (s->table)
		table_put(s, sub);
	list_push(&s->list, &sub->node);
	return sub;
}

void mercure_subs_remove(struct mercure_subs *s, struct mercure_sub *sub)
{
	if (!sub)
		return;
	for (size_t i = 0; i < sub->n; i++) {
		struct one o = one_of(sub, i);
		queue(s, &o, false);
		if (s->share) {
			char *id = sub_id(o.hub_path, o.kind, o.match, o.subscriber);
			presence_redis_subs_del(s->share, id);
			free(id);
		}
		if (sub->handles)
			shared_records_del(s->table, sub->handles[i]);
	}
	list_unlink(&s->list, &sub->node);
	free(sub->handles);
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

bool mercure_subs_query_parse(const char *rest, struct mercure_subs_query *q)
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
	free(parts[0]);
	if (bad || nparts == 1) {
		free(parts[1]);
		free(parts[2]);
		return false;
	}
	*q = (struct mercure_subs_query){ nparts, kind, parts[1], parts[2] };
	return true;
}

void mercure_subs_query_free(struct mercure_subs_query *q)
{
	free(q->match);
	free(q->subscriber);
	q->match = q->subscriber = NULL;
}

bool mercure_subs_query_wants(const struct mercure_subs_query *q, const char *hub_path,
			      const struct mercure_sub_view *v)
{
	if (strcmp(v->hub_path, hub_path) != 0)
		return false;
	if (q->nparts >= 2 && (v->kind != q->kind || strcmp(v->match, q->match) != 0))
		return false;
	return q->nparts < 3 || strcmp(v->subscriber, q->subscriber) == 0;
}

char *mercure_subs_query_prefix(const struct mercure_subs_query *q, const char *hub_path)
{
	if (q->nparts == 3)
		return sub_id(hub_path, q->kind, q->match, q->subscriber);
	struct text t = { 0 };
	adds(&t, hub_path);
	adds(&t, "/subscriptions/");
	if (q->nparts == 2) {
		char *m = mercure_pct(q->match, strlen(q->match));
		adds(&t, kind_name(q->kind));
		adds(&t, "/");
		adds(&t, m);
		adds(&t, "/");
		free(m);
	}
	return t.p;
}

/* An answer being made: the collection's head, its documents, its end. */
struct answer {
	const struct mercure_subs_query *q;
	struct text t;
	size_t found;
};

static void answer_begin(struct answer *a, const char *hub_path, const char *rest)
{
	if (a->q->nparts == 3)
		return;
	adds(&a->t, "{\"id\":");
	struct text id = { 0 };
	adds(&id, hub_path);
	adds(&id, "/subscriptions");
	adds(&id, rest);
	add_json(&a->t, id.p);
	free(id.p);
	adds(&a->t, ",\"type\":\"subscriptions\",\"subscriptions\":[");
}

static void answer_doc(struct answer *a, const struct one *o)
{
	if (a->found++ && a->q->nparts < 3)
		add(&a->t, ",", 1);
	if (a->q->nparts < 3 || a->found == 1)
		add_doc(&a->t, o, true);
}

/* The text and its length, or NULL (404) for a single subscription not
 * found. */
static char *answer_end(struct answer *a, size_t *len)
{
	if (a->q->nparts < 3)
		adds(&a->t, "]}");
	if (a->q->nparts == 3 && !a->found) {
		free(a->t.p);
		return NULL;
	}
	adds(&a->t, "\n");
	*len = a->t.n;
	return a->t.p;
}

/* A record of the group's table, added to an answer when it asks for it. */
struct table_pass {
	struct answer *a;
	const char *hub_path;
};

static void table_doc(void *arg, const char *record, size_t len)
{
	struct table_pass *tp = arg;
	char *rec = xstrndup(record, len);
	struct mercure_sub_view v;
	if (mercure_subs_record_parse(rec, len, &v) && mercure_subs_query_wants(tp->a->q, tp->hub_path, &v)) {
		struct one o = { v.hub_path, v.kind, v.match, v.subscriber };
		answer_doc(tp->a, &o);
	}
	free(rec);
}

char *mercure_subs_answer(struct mercure_subs *s, const char *hub_path, const char *rest, size_t *len)
{
	struct mercure_subs_query q;
	if (!mercure_subs_query_parse(rest, &q))
		return NULL;
	struct answer a = { &q, { 0 }, 0 };
	answer_begin(&a, hub_path, rest);
	if (s->table) {
		struct table_pass tp = { &a, hub_path };
		shared_records_each(s->table, 0, table_doc, &tp);
		char *out = answer_end(&a, len);
		mercure_subs_query_free(&q);
		return out;
	}
	for (const struct list_node *n = s->list.first; n; n = n->next) {
		const struct mercure_sub *sub = list_item(n, const struct mercure_sub, node);
		for (size_t i = 0; i < sub->n; i++) {
			struct mercure_sub_view v = { sub->hub_path, sub->kinds[i], sub->matches[i], sub->subscriber };
			if (mercure_subs_query_wants(&q, hub_path, &v)) {
				struct one o = one_of(sub, i);
				answer_doc(&a, &o);
			}
		}
	}
	char *out = answer_end(&a, len);
	mercure_subs_query_free(&q);
	return out;
}

/* A question on its way to Redis: copies of what it asks. cb NULL once
 * answered 503 for want of Redis' answer in time (k waits for it still:
 * hiredis holds it). */
struct ask {
	struct loop *lp;
	struct loop_timer timer;
	char *hub_path, *rest;
	struct mercure_subs_query q;
	mercure_subs_answer_cb *cb;
	void *arg;
};

static void ask_free(struct ask *k)
{
	loop_timer_stop(k->lp, &k->timer);
	mercure_subs_query_free(&k->q);
	free(k->hub_path);
	free(k->rest);
	free(k);
}

/* The live nodes' records: the answer, made as from this process's list. */
static void on_records(void *arg, const char *const *records, const size_t *lens, size_t n, bool cut)
{
	struct ask *k = arg;
	if (!k->cb) {
		ask_free(k);
		return;
	}
	if (n == (size_t)-1) {
		k->cb(k->arg, 503, NULL, 0);
		ask_free(k);
		return;
	}
	if (cut)
		log_notice("mercure: a subscriptions answer (%s/subscriptions%s) holds the first %d documents only",
			   k->hub_path, k->rest, MERCURE_SUBS_ANSWER_MAX);
	struct answer a = { &k->q, { 0 }, 0 };
	answer_begin(&a, k->hub_path, k->rest);
	for (size_t i = 0; i < n; i++) {
		char *rec = xstrndup(records[i], lens[i]);
		struct mercure_sub_view v;
		if (mercure_subs_record_parse(rec, lens[i], &v) && mercure_subs_query_wants(&k->q, k->hub_path, &v)) {
			struct one o = { v.hub_path, v.kind, v.match, v.subscriber };
			answer_doc(&a, &o);
		}
		free(rec);
	}
	size_t len = 0;
	char *body = answer_end(&a, &len);
	k->cb(k->arg, body ? 200 : 404, body, len);
	ask_free(k);
}

/* Redis has not answered in time (a server that hangs): 503 now. */
static void ask_late(void *arg)
{
	struct ask *k = arg;
	k->cb(k->arg, 503, NULL, 0);
	k->cb = NULL;
}

void mercure_subs_ask(struct mercure_subs *s, const char *hub_path, const char *rest, mercure_subs_answer_cb *cb,
		      void *arg)
{
	size_t len = 0;
	if (!s->share) {
		char *body = mercure_subs_answer(s, hub_path, rest, &len);
		cb(arg, body ? 200 : 404, body, len);
		return;
	}
	struct ask *k = xcalloc(1, sizeof(*k));
	if (!mercure_subs_query_parse(rest, &k->q)) {
		free(k);
		cb(arg, 404, NULL, 0);
		return;
	}
	k->lp = s->lp;
	k->hub_path = xstrdup(hub_path);
	k->rest = xstrdup(rest);
	k->cb = cb;
	k->arg = arg;
	char *prefix = mercure_subs_query_prefix(&k->q, hub_path);
	int rc = presence_redis_subs_list(s->share, prefix, k->q.nparts == 3, MERCURE_SUBS_ANSWER_MAX, on_records, k);
	free(prefix);
	if (rc < 0) {
		ask_free(k);
		cb(arg, 503, NULL, 0);
		return;
	}
	loop_timer_start(s->lp, &k->timer, MERCURE_SUBS_ASK_MS, ask_late, k);
}
