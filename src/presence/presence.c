/* SPDX-License-Identifier: BSD-2-Clause */
/* presence.c: the registry of who reads which topic (presence.h): each
 * stream's keys in the presence table, the answers to GET /api/presence,
 * and the join and leave events appended to the log.
 *
 * Keys: a pattern alone counts the streams that read it; a pattern, the
 * separator and a subject count that subject's streams on it. A topic's
 * readers are looked up by key (the topic, "*", and each "prefix/" "*" of
 * it); its subjects come from one pass over the table's keys in use. */
#include "presence/presence.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/event_batch.h"
#include "core/group.h"
#include "common/log.h"
#include "presence/presence_redis.h"
#include "core/presence_table.h"
#include "core/topic.h"
#include "common/util.h"

#define PATTERN_MAX 128
#define CANDIDATES_MAX (PATTERN_MAX / 2 + 2) /* the topic, "*", one per '/' */

struct presence {
	struct loop *lp;
	struct store *st;
	struct hub *hub;
	const struct config *cfg;
	struct metrics *m;
	struct presence_table *t;
	bool own_table; /* mapped here (no group), unmapped by presence_free */
	unsigned col;   /* this process's column */
	/* Join and leave events on their way to the log (NULL without st). */
	struct event_batch *events;
	struct loop_timer leave_timer;
	/* With the event log on Redis: this node's share there, which joins,
	 * leaves and answers go through. */
	struct presence_redis *redis;
	/* A full table is said at most once a second (a client opening
	 * streams of many topics must not flood the log): when it was last
	 * said, and how many streams went uncounted since. */
	uint64_t full_said_ms;
	unsigned long full_unsaid;
};

/* One stream's keys; counted[i] says whether keys[i] got into the table
 * (a full table counts nothing, and nothing is taken back). */
struct presence_reg {
	size_t n, npatterns; /* keys; those of patterns alone come first */
	bool *counted;
	char *keys[];
};

static void schedule_leaves(struct presence *p);

static void event_add(struct presence *p, bool join, const char *key);

/* Join and leave events were stored: the hub reads them, as after a
 * publish. */
static void events_stored(void *arg)
{
	struct presence *p = arg;
	if (p->hub)
		hub_poll(p->hub);
}

static void put_share(void *arg, const char *key, uint32_t n)
{
	presence_redis_share(arg, key, n);
}

/* Connected to Redis (again): this process's whole share. */
static void redis_connected(void *arg)
{
	struct presence *p = arg;
	presence_table_each_column(p->t, p->col, put_share, p->redis);
	presence_redis_share_done(p->redis);
}

static void redis_join(void *arg, const char *key)
{
	event_add(arg, true, key);
}

static void redis_leave(void *arg, const char *key)
{
	event_add(arg, false, key);
}

struct presence *presence_new(struct loop *lp, struct store *st, struct hub *hub, const struct config *cfg,
			      struct metrics *m)
{
	struct presence *p = xcalloc(1, sizeof(*p));
	*p = (struct presence){ .lp = lp, .st = st, .hub = hub, .cfg = cfg, .m = m };
	if (group_on()) {
		p->t = group_presence_table();
		p->col = (unsigned)group_index();
	} else {
		p->t = presence_table_map(1, (size_t)cfg->presence_max_keys, PRESENCE_KEY_MAX, false);
		p->own_table = true;
	}
	if (!p->t) {
		int e = errno;
		free(p);
		errno = e;
		return NULL;
	}
	if (st && (cfg->redis_url[0] || cfg->redis_sentinels[0])) {
		char err[300];
		struct presence_redis_hooks hooks = { redis_connected, redis_join, redis_leave, p };
		p->redis = presence_redis_new(lp, cfg, &hooks, err, sizeof(err));
		if (!p->redis) {
			log_err("presence on Redis: %s", err);
			if (p->own_table)
				presence_table_unmap(p->t);
			free(p);
			errno = EINVAL;
			return NULL;
		}
	}
	if (st) {
		struct event_batch_spec spec = {
			.name = "presence", .rows = "join and leave events", .stored = events_stored, .arg = p
		};
		p->events = event_batch_new(lp, st, m, &spec);
	}
	schedule_leaves(p);
	return p;
}

void presence_free(struct presence *p)
{
	if (!p)
		return;
	if (p->st)
		loop_timer_stop(p->lp, &p->leave_timer);
	presence_redis_free(p->redis); /* its answers still out come back empty */
	event_batch_close(p->events);  /* what waits gets one attempt; one in flight is the store's to answer */
	if (p->own_table)
		presence_table_unmap(p->t);
	free(p);
}

/* ---- join and leave events --------------------------------------------- */

/* Append s to a growing buffer. */
struct buf {
	char *p;
	size_t n, cap;
};

static void buf_add(struct buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = MAX(b->cap * 2, b->n + n + 256);
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

/* s as a JSON string (patterns and subjects are printable ASCII, the
 * labels of Mercure topics UTF-8 without control characters: only quotes
 * and backslashes need escaping). */
static void buf_json(struct buf *b, const char *s, size_t n)
{
	buf_add(b, "\"", 1);
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			buf_add(b, "\\", 1);
		buf_add(b, s + i, 1);
	}
	buf_add(b, "\"", 1);
}

/* The rules of a key's pattern (the key up to its separator). */
static const struct namespace *key_rules(const struct presence *p, const char *key)
{
	return config_rules(p->cfg, key, strcspn(key, (char[]){ PRESENCE_KEY_SEP, '\0' }));
}

/* Whether key's joins and leaves are events in the log. */
static bool announced(const struct presence *p, const char *key)
{
	return p->cfg->presence_events && p->st && (!p->cfg->namespaces.n || key_rules(p, key)->presence_events);
}

/* Queue the join or leave of key (pattern, separator, subject): its row
 * is made here and copied by the queue. */
static void event_add(struct presence *p, bool join, const char *key)
{
	if (!p->events || (p->cfg->namespaces.n && !key_rules(p, key)->presence_events))
		return;
	const char *sep = strchr(key, PRESENCE_KEY_SEP);
	size_t plen = (size_t)(sep - key);
	struct buf topic = { 0 }, data = { 0 };
	buf_str(&topic, PRESENCE_TOPIC_PREFIX);
	buf_add(&topic, key, plen);
	buf_str(&data, join ? "{\"action\":\"join\",\"topic\":" : "{\"action\":\"leave\",\"topic\":");
	buf_json(&data, key, plen);
	buf_str(&data, ",\"subject\":");
	buf_json(&data, sep + 1, strlen(sep + 1));
	buf_str(&data, "}");
	struct store_new_event ev = { .type = join ? "presence.join" : "presence.leave",
				      .topic = topic.p,
				      .data = data.p,
				      .data_len = data.n,
				      .public = false };
	event_batch_add(p->events, &ev);
	free(topic.p);
	free(data.p);
}

static void take_leave(void *arg, const char *key)
{
	event_add(arg, false, key);
}

/* How often due leaves are looked for: a leave goes out within the grace
 * and this much. */
static uint64_t leave_tick_ms(const struct presence *p)
{
	uint64_t g = (uint64_t)p->cfg->presence_grace_ms;
	return MAX(MIN(g / 4, (uint64_t)1000), (uint64_t)50);
}

static void leave_tick(void *arg)
{
	struct presence *p = arg;
	if (p->cfg->presence_events && presence_table_leaves_pending(p->t))
		presence_table_take_leaves(p->t, group_clock_ms(), (uint64_t)p->cfg->presence_grace_ms, take_leave, p);
	schedule_leaves(p);
}

static void schedule_leaves(struct presence *p)
{
	/* Only while leaves may come: on Redis the node's share sweeps there
	 * (presence_redis.c); alone, once one is pending; in a group, while
	 * events are on, since another worker's close or a worker's death
	 * makes them. An idle herald with events off wakes for nothing. */
	if (!p->st || p->redis || !p->cfg->presence_events || loop_timer_active(&p->leave_timer))
		return;
	if (!group_on() && !presence_table_leaves_pending(p->t))
		return;
	loop_timer_start(p->lp, &p->leave_timer, leave_tick_ms(p), leave_tick, p);
}

/* ---- registration ---------------------------------------------------- */

/* A stream was not counted under missed of its n keys: logged at most
 * once a second, with how many streams went unsaid since. */
static void say_full(struct presence *p, size_t missed, size_t n)
{
	uint64_t now = clock_mono_ms();
	if (p->full_said_ms && now - p->full_said_ms < 1000) {
		p->full_unsaid++;
		return;
	}
	char more[80] = "";
	if (p->full_unsaid)
		snprintf(more, sizeof(more), " (and %lu more streams since the last line)", p->full_unsaid);
	log_warn("presence: the table is full (presence_max_keys %lld); a stream is not counted under %zu of its "
		 "%zu keys%s",
		 (long long)p->cfg->presence_max_keys, missed, n, more);
	p->full_said_ms = now;
	p->full_unsaid = 0;
}

/* Count key (a subject's key when of_subject); returns
 * presence_table_add's answer: -1 when the table is full; or -2 when its
 * namespace has presence off (not counted). */
static int count_key(struct presence *p, const char *key, bool of_subject)
{
	if (p->cfg->namespaces.n && !key_rules(p, key)->presence)
		return -2;
	bool announce = announced(p, key), here = announce && !p->redis;
	int added = presence_table_add(p->t, p->col, key, here && of_subject);
	if (p->redis && added >= 0)
		presence_redis_add(p->redis, key, announce && of_subject);
	if (added == 1)
		event_add(p, true, key);
	return added;
}

static void uncount_key(struct presence *p, const char *key, bool of_subject, uint64_t now)
{
	presence_table_del(p->t, p->col, key, now);
	if (p->redis)
		presence_redis_del(p->redis, key, announced(p, key) && of_subject);
}

/* The registration of a stream of every topic with no subject, the most
 * common by far, is one of these two, shared, rather than a block of its
 * own: 48 bytes a reader (docs/BENCHMARKS.md). Never freed. */
static struct presence_reg every_counted, every_missed;

struct presence_reg *presence_register(struct presence *p, char *const *patterns, size_t n, const char *subject)
{
	static char *const every[] = { "*" };
	if (n == 0 && !subject) {
		int added = count_key(p, "*", false);
		bool counted = added >= 0;
		if (added == -1)
			say_full(p, 1, 1);
		schedule_leaves(p);
		return counted ? &every_counted : &every_missed;
	}
	if (n == 0) {
		patterns = every;
		n = 1;
	}
	size_t nkeys = subject ? 2 * n : n, bytes = 0;
	size_t slen = subject ? strlen(subject) : 0;
	for (size_t i = 0; i < n; i++)
		bytes += (strlen(patterns[i]) + 1) * (subject ? 2 : 1) + (subject ? slen + 1 : 0);
	struct presence_reg *r = xmalloc(sizeof(*r) + nkeys * (sizeof(char *) + sizeof(bool)) + bytes);
	r->n = nkeys;
	r->npatterns = n;
	r->counted = (bool *)(void *)(r->keys + nkeys);
	char *w = (char *)(r->counted + nkeys);
	size_t full = 0;
	for (size_t i = 0; i < nkeys; i++) {
		const char *pat = patterns[i % n];
		size_t plen = strlen(pat);
		r->keys[i] = w;
		memcpy(w, pat, plen);
		w += plen;
		if (i >= n) {
			*w++ = PRESENCE_KEY_SEP;
			memcpy(w, subject, slen);
			w += slen;
		}
		*w++ = '\0';
		int added = count_key(p, r->keys[i], i >= n);
		r->counted[i] = added >= 0;
		full += added == -1;
	}
	if (full)
		say_full(p, full, nkeys);
	schedule_leaves(p);
	return r;
}

void presence_unregister(struct presence *p, struct presence_reg *r)
{
	if (!r)
		return;
	uint64_t now = group_clock_ms();
	if (r == &every_counted || r == &every_missed) {
		if (r == &every_counted)
			uncount_key(p, "*", false, now);
		schedule_leaves(p);
		return;
	}
	for (size_t i = 0; i < r->n; i++)
		if (r->counted[i])
			uncount_key(p, r->keys[i], i >= r->npatterns, now);
	free(r);
	schedule_leaves(p);
}

/* ---- answers ----------------------------------------------------------- */

bool presence_scope_covers(const struct presence_scope *s, const char *topic)
{
	if (s->every_topic)
		return true;
	for (size_t i = 0; i < s->ngrants; i++)
		if (topic_pattern_covers(s->grants[i], topic))
			return true;
	return false;
}

/* The patterns a stream may hold that cover topic: topic itself, "*", and
 * "prefix/" "*" for each '/' in it; written into room, pointed at by
 * out. Returns how many (no two equal). */
static size_t candidates(const char *topic, char room[][PATTERN_MAX + 3], const char **out)
{
	size_t n = 0, len = strlen(topic);
	snprintf(room[n], sizeof(room[n]), "%s", topic);
	out[n] = room[n];
	n++;
	if (strcmp(topic, "*") != 0) {
		out[n++] = "*";
	}
	for (size_t i = 1; i < len && n < CANDIDATES_MAX; i++) {
		if (topic[i] != '/')
			continue;
		snprintf(room[n], sizeof(room[n]), "%.*s/*", (int)i, topic);
		if (strcmp(room[n], topic) == 0)
			continue; /* a subtree topic is already first */
		out[n] = room[n];
		n++;
	}
	return n;
}

/* The readers of topic in t. */
static size_t readers_in(struct presence_table *t, const char *topic)
{
	char room[CANDIDATES_MAX][PATTERN_MAX + 3];
	const char *keys[CANDIDATES_MAX];
	uint32_t totals[CANDIDATES_MAX];
	size_t n = candidates(topic, room, keys), sum = 0;
	presence_table_totals(t, keys, n, totals);
	for (size_t i = 0; i < n; i++)
		sum += totals[i];
	return sum;
}

/* The subjects found for the topics asked, in one pass over the table. */
struct subject_pass {
	char *const *topics;
	size_t ntopics;
	struct subject_list {
		char **s;
		size_t n, cap;
	} * lists; /* one per topic */
};

static void collect_subject(void *arg, const char *key, uint32_t total)
{
	struct subject_pass *sp = arg;
	(void)total;
	const char *sep = strchr(key, PRESENCE_KEY_SEP);
	if (!sep)
		return;
	char pattern[PATTERN_MAX + 1];
	size_t plen = (size_t)(sep - key);
	if (plen > PATTERN_MAX)
		return;
	memcpy(pattern, key, plen);
	pattern[plen] = '\0';
	for (size_t i = 0; i < sp->ntopics; i++) {
		if (!topic_pattern_covers(pattern, sp->topics[i]))
			continue;
		struct subject_list *l = &sp->lists[i];
		if (l->n == l->cap) {
			l->cap = l->cap ? l->cap * 2 : 16;
			l->s = xrealloc(l->s, l->cap * sizeof(*l->s));
		}
		l->s[l->n++] = xstrdup(sep + 1);
	}
}

static int compare_strings(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sort l and keep each subject once (a subject may hold streams on
 * several patterns that cover the topic). */
static void subjects_distinct(struct subject_list *l)
{
	if (l->n < 2)
		return;
	qsort(l->s, l->n, sizeof(*l->s), compare_strings);
	size_t k = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (k > 0 && strcmp(l->s[k - 1], l->s[i]) == 0)
			free(l->s[i]);
		else
			l->s[k++] = l->s[i];
	}
	l->n = k;
}

static void answer_topic(struct buf *b, const char *topic, size_t readers, const struct subject_list *l, size_t limit)
{
	char num[32];
	buf_json(b, topic, strlen(topic));
	snprintf(num, sizeof(num), ":{\"readers\":%zu", readers);
	buf_str(b, num);
	if (l) {
		buf_str(b, ",\"subjects\":[");
		for (size_t i = 0; i < l->n && i < limit; i++) {
			if (i)
				buf_str(b, ",");
			buf_json(b, l->s[i], strlen(l->s[i]));
		}
		snprintf(num, sizeof(num), "],\"subjects_total\":%zu", l->n);
		buf_str(b, num);
	}
	buf_str(b, "}");
}

/* The patterns in use, for the list of topics with the most readers. */
struct top_pass {
	struct top {
		char *pattern;
		size_t readers;
	} * t;
	size_t n, cap;
};

static void collect_pattern(void *arg, const char *key, uint32_t total)
{
	struct top_pass *tp = arg;
	(void)total;
	if (strchr(key, PRESENCE_KEY_SEP))
		return;
	if (tp->n == tp->cap) {
		tp->cap = tp->cap ? tp->cap * 2 : 64;
		tp->t = xrealloc(tp->t, tp->cap * sizeof(*tp->t));
	}
	tp->t[tp->n++] = (struct top){ xstrdup(key), 0 };
}

static int compare_top(const void *a, const void *b)
{
	const struct top *x = a, *y = b;
	if (x->readers != y->readers)
		return x->readers > y->readers ? -1 : 1;
	return strcmp(x->pattern, y->pattern);
}

static void answer_top(struct presence_table *t, const struct config *cfg, struct buf *b,
		       const struct presence_scope *scope)
{
	struct top_pass tp = { 0 };
	presence_table_each(t, collect_pattern, &tp);
	size_t k = 0;
	for (size_t i = 0; i < tp.n; i++) {
		if (!presence_scope_covers(scope, tp.t[i].pattern)) {
			free(tp.t[i].pattern);
			continue;
		}
		tp.t[i].readers = readers_in(t, tp.t[i].pattern);
		tp.t[k++] = tp.t[i];
	}
	if (k > 1)
		qsort(tp.t, k, sizeof(*tp.t), compare_top);
	size_t shown = MIN(k, (size_t)cfg->presence_top);
	for (size_t i = 0; i < k; i++) {
		if (i < shown) {
			if (i)
				buf_str(b, ",");
			answer_topic(b, tp.t[i].pattern, tp.t[i].readers, NULL, 0);
		}
		free(tp.t[i].pattern);
	}
	free(tp.t);
}

/* presence_answer over the counts in t, each topic answered under its
 * label (labels NULL: under itself). */
static char *answer_in(struct presence_table *t, const struct config *cfg, char *const *topics, char *const *labels,
		       size_t n, const struct presence_scope *scope, size_t *len)
{
	if (!labels)
		labels = topics;
	struct buf b = { 0 };
	buf_str(&b, "{\"topics\":{");
	if (n == 0) {
		answer_top(t, cfg, &b, scope);
	} else {
		struct subject_pass sp = { topics, n, xcalloc(n, sizeof(struct subject_list)) };
		if (scope->subjects)
			presence_table_each(t, collect_subject, &sp);
		for (size_t i = 0; i < n; i++) {
			bool repeated = false;
			for (size_t j = 0; j < i && !repeated; j++)
				repeated = strcmp(labels[j], labels[i]) == 0;
			if (!repeated) {
				if (i)
					buf_str(&b, ",");
				subjects_distinct(&sp.lists[i]);
				answer_topic(&b, labels[i], readers_in(t, topics[i]),
					     scope->subjects ? &sp.lists[i] : NULL, (size_t)cfg->presence_limit);
			}
			for (size_t k = 0; k < sp.lists[i].n; k++)
				free(sp.lists[i].s[k]);
			free(sp.lists[i].s);
		}
		free(sp.lists);
	}
	buf_str(&b, "}}\n");
	*len = b.n;
	return b.p;
}

char *presence_answer(struct presence *p, char *const *topics, size_t n, const struct presence_scope *scope,
		      size_t *len)
{
	return answer_in(p->t, p->cfg, topics, NULL, n, scope, len);
}

size_t presence_readers(struct presence *p, const char *topic)
{
	return readers_in(p->t, topic);
}

/* A question waiting for the cluster's counts: copies of what it asks. */
struct ask {
	const struct config *cfg;
	char **topics, **labels;
	size_t ntopics;
	struct presence_scope scope; /* its grants are copies too */
	presence_answer_cb *cb;
	void *arg;
};

static void ask_free(struct ask *a)
{
	for (size_t i = 0; i < a->ntopics; i++) {
		free(a->topics[i]);
		free(a->labels[i]);
	}
	free(a->topics);
	free(a->labels);
	for (size_t i = 0; i < a->scope.ngrants; i++)
		free(a->scope.grants[i]);
	free((void *)a->scope.grants);
	free(a);
}

static char **copy_strings(char *const *from, size_t n)
{
	char **out = xmalloc((n + 1) * sizeof(*out));
	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(from[i]);
	return out;
}

/* The cluster's counts, summed over the live nodes: the answer is made
 * from a table of them, as from this node's own. */
static void on_snapshot(void *arg, const char *const *keys, const uint32_t *totals, size_t n)
{
	struct ask *a = arg;
	struct presence_table *t = n == (size_t)-1 ? NULL : presence_table_map(1, n, PRESENCE_KEY_MAX, false);
	if (!t) {
		a->cb(a->arg, NULL, 0);
		ask_free(a);
		return;
	}
	for (size_t i = 0; i < n; i++)
		presence_table_put(t, 0, keys[i], totals[i]);
	size_t len;
	char *body = answer_in(t, a->cfg, a->topics, a->labels, a->ntopics, &a->scope, &len);
	presence_table_unmap(t);
	a->cb(a->arg, body, len);
	ask_free(a);
}

void presence_ask(struct presence *p, char *const *topics, char *const *labels, size_t n,
		  const struct presence_scope *scope, presence_answer_cb *cb, void *arg)
{
	if (!labels)
		labels = topics;
	if (!p->redis) {
		size_t len;
		char *body = answer_in(p->t, p->cfg, topics, labels, n, scope, &len);
		cb(arg, body, len);
		return;
	}
	struct ask *a = xcalloc(1, sizeof(*a));
	*a = (struct ask){ .cfg = p->cfg,
			   .topics = copy_strings(topics, n),
			   .labels = copy_strings(labels, n),
			   .ntopics = n,
			   .scope = *scope,
			   .cb = cb,
			   .arg = arg };
	a->scope.grants = copy_strings(scope->grants, scope->ngrants);
	if (presence_redis_snapshot(p->redis, on_snapshot, a) < 0) {
		cb(arg, NULL, 0);
		ask_free(a);
	}
}

struct presence_redis *presence_share(struct presence *p)
{
	return p ? p->redis : NULL;
}
