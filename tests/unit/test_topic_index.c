/* SPDX-License-Identifier: BSD-2-Clause */
/* test_topic_index.c: the index from topic to subscriptions (src/
 * topic_index.c) against the rule it stands for, topic_pattern_match: for
 * random owners with random patterns and random topics, every owner is
 * visited exactly as many times as it has matching patterns (by one walk,
 * or by its two halves, keyed and "*"); an owner that leaves in the middle
 * of a walk costs its neighbours nothing; the tables grow and shrink back
 * to nothing. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/topic.h"
#include "hub/topic_index.h"
#include "common/util.h"

#define OWNER_PATTERNS 6

struct owner {
	size_t npat;
	char pat[OWNER_PATTERNS][32];
	struct topic_sub sub[OWNER_PATTERNS];
	bool in;             /* its subscriptions are in the index */
	unsigned visits;     /* during the current walk */
	bool leave_on_visit; /* unlink all its subscriptions when visited */
	struct topic_index *ix;
};

static void owner_add(struct topic_index *ix, struct owner *o)
{
	for (size_t i = 0; i < o->npat; i++)
		topic_index_add(ix, &o->sub[i], o->pat[i], o);
	o->in = true;
	o->ix = ix;
}

static void owner_del(struct topic_index *ix, struct owner *o)
{
	for (size_t i = 0; i < o->npat; i++)
		topic_index_del(ix, &o->sub[i]);
	o->in = false;
}

static void count_visit(void *owner, void *arg)
{
	struct owner *o = owner;
	(void)arg;
	o->visits++;
	if (o->leave_on_visit && o->in) {
		owner_del(o->ix, o);
		/* Poison the nodes, as a freed owner would leave them: the walk
		 * must not read them again. */
		memset(o->sub, 0xa5, sizeof(o->sub));
	}
}

/* A topic or pattern from a small alphabet, so that prefixes, slashes in a
 * row and near misses ("ab" beside "a/b") come up often. */
static void random_topic(char *buf, size_t len)
{
	static const char *const parts[] = { "a", "b", "ab", "", "c" };
	size_t segs = 1 + random_below(4), n = 0;
	for (size_t s = 0; s < segs && n + 4 < len; s++) {
		const char *p = parts[random_below(ARRAY_LEN(parts))];
		n += (size_t)snprintf(buf + n, len - n, "%s%s", s ? "/" : "", p);
	}
	buf[n] = '\0';
}

static void random_pattern(char *buf, size_t len)
{
	for (;;) {
		unsigned kind = (unsigned)random_below(10);
		if (kind == 0) {
			snprintf(buf, len, "*");
		} else {
			random_topic(buf, len - 2);
			if (kind < 5)
				strcat(buf, "/*");
		}
		if (topic_pattern_valid(buf, strlen(buf)))
			return;
	}
}

static unsigned expected_visits(const struct owner *o, const char *topic)
{
	unsigned n = 0;
	for (size_t i = 0; o->in && i < o->npat; i++)
		n += topic_pattern_match(o->pat[i], topic, strlen(topic));
	return n;
}

/* Owners with up to six distinct random patterns each; random topics. */
static void test_against_match(void)
{
	enum { OWNERS = 300, TOPICS = 2000 };
	struct topic_index *ix = topic_index_new();
	struct owner *o = xcalloc(OWNERS, sizeof(*o));
	for (size_t k = 0; k < OWNERS; k++) {
		size_t want = 1 + random_below(OWNER_PATTERNS);
		while (o[k].npat < want) {
			char p[32];
			random_pattern(p, sizeof(p));
			bool dup = false;
			for (size_t j = 0; j < o[k].npat; j++)
				dup = dup || strcmp(p, o[k].pat[j]) == 0;
			if (!dup)
				strcpy(o[k].pat[o[k].npat++], p);
		}
		owner_add(ix, &o[k]);
	}
	size_t bad = 0, visited = 0;
	for (int t = 0; t < TOPICS; t++) {
		char topic[32];
		random_topic(topic, sizeof(topic));
		if (t % 50 == 0) {
			/* Some owners leave and come back between walks. */
			struct owner *w = &o[random_below(OWNERS)];
			if (w->in)
				owner_del(ix, w);
			else
				owner_add(ix, w);
		}
		for (size_t k = 0; k < OWNERS; k++)
			o[k].visits = 0;
		if (t % 2) {
			/* The two halves of a walk visit what the whole does. */
			topic_index_each_every(ix, count_visit, NULL);
			topic_index_each_keyed(ix, topic, strlen(topic), count_visit, NULL);
		} else {
			topic_index_each(ix, topic, strlen(topic), count_visit, NULL);
		}
		for (size_t k = 0; k < OWNERS; k++) {
			visited += o[k].visits;
			if (o[k].visits != expected_visits(&o[k], topic) && bad++ < 5)
				fprintf(stderr, "topic \"%s\": owner %zu visited %u times, expected %u\n", topic, k,
					o[k].visits, expected_visits(&o[k], topic));
		}
	}
	CHECK_EQ_INT(bad, 0);
	CHECK(visited > TOPICS); /* the walks did visit */
	for (size_t k = 0; k < OWNERS; k++)
		if (o[k].in)
			owner_del(ix, &o[k]);
	struct topic_index_stats st;
	topic_index_stats(ix, &st);
	CHECK_EQ_INT(st.subs, 0);
	CHECK_EQ_INT(st.exact_keys + st.prefix_keys, 0);
	CHECK_EQ_INT(topic_index_keys(ix), 0);
	topic_index_free(ix);
	free(o);
}

/* The edges of the rule, written out. */
static void test_edges(void)
{
	static const struct {
		const char *pattern, *topic;
		unsigned visits;
	} cases[] = {
		{ "a/*", "a/b", 1 },     { "a/*", "a/b/c", 1 },  { "a/*", "a", 0 },    { "a/*", "a/", 0 },
		{ "a/*", "ab/c", 0 },    { "a//*", "a//x", 1 },  { "a//*", "a/x", 0 }, { "a/", "a/", 1 },
		{ "a", "a", 1 },         { "a", "a/b", 0 },      { "*", "", 1 },       { "*", "x/y", 1 },
		{ "a/b/*", "a/b/c", 1 }, { "a/b/*", "a/bc", 0 },
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct topic_index *ix = topic_index_new();
		struct owner o = { .npat = 1 };
		strcpy(o.pat[0], cases[i].pattern);
		owner_add(ix, &o);
		topic_index_each(ix, cases[i].topic, strlen(cases[i].topic), count_visit, NULL);
		if (o.visits != cases[i].visits)
			fprintf(stderr, "pattern \"%s\", topic \"%s\": %u visits\n", cases[i].pattern, cases[i].topic,
				o.visits);
		CHECK_EQ_INT(o.visits, cases[i].visits);
		owner_del(ix, &o);
		topic_index_free(ix);
	}
}

/* Owners that leave when visited (their nodes poisoned at once) in the
 * middle of every list they are on: the others are still visited once per
 * matching pattern, and a leaver is not visited again. */
static void test_leave_during_walk(void)
{
	enum { OWNERS = 60 };
	static const char *const pats[] = { "x/y", "x/*", "*", "x/y/*" };
	struct topic_index *ix = topic_index_new();
	struct owner o[OWNERS];
	memset(o, 0, sizeof(o));
	for (size_t k = 0; k < OWNERS; k++) {
		/* Every owner on two or three of the lists "x/y/z" reaches. */
		o[k].npat = 2 + k % 2;
		for (size_t j = 0; j < o[k].npat; j++)
			strcpy(o[k].pat[j], pats[(k + j) % ARRAY_LEN(pats)]);
		o[k].leave_on_visit = k % 3 == 1;
		owner_add(ix, &o[k]);
	}
	topic_index_each(ix, "x/y/z", 5, count_visit, NULL);
	for (size_t k = 0; k < OWNERS; k++) {
		if (o[k].leave_on_visit) {
			CHECK_EQ_INT(o[k].visits, 1);
			CHECK(!o[k].in);
		} else {
			o[k].in = true;
			CHECK_EQ_INT(o[k].visits, expected_visits(&o[k], "x/y/z"));
		}
	}
	for (size_t k = 0; k < OWNERS; k++)
		if (!o[k].leave_on_visit)
			owner_del(ix, &o[k]);
	struct topic_index_stats st;
	topic_index_stats(ix, &st);
	CHECK_EQ_INT(st.subs, 0);
	topic_index_free(ix);
}

/* 20,000 owners on their own topic: every topic finds exactly its owner;
 * the tables give their memory back as owners leave. */
static void test_many_keys(void)
{
	enum { OWNERS = 20000 };
	struct topic_index *ix = topic_index_new();
	struct topic_index_stats empty, full, st;
	topic_index_stats(ix, &empty);
	struct owner *o = xcalloc(OWNERS, sizeof(*o));
	for (size_t k = 0; k < OWNERS; k++) {
		o[k].npat = 1 + k % 2;
		snprintf(o[k].pat[0], sizeof(o[k].pat[0]), "user/%zu", k);
		snprintf(o[k].pat[1], sizeof(o[k].pat[1]), "user/%zu/*", k);
		owner_add(ix, &o[k]);
	}
	topic_index_stats(ix, &full);
	CHECK_EQ_INT(full.exact_keys, OWNERS);
	CHECK_EQ_INT(full.prefix_keys, OWNERS / 2);
	CHECK_EQ_INT(full.subs, OWNERS + OWNERS / 2);
	size_t bad = 0;
	for (size_t k = 0; k < OWNERS; k++) {
		char t[40];
		int n = snprintf(t, sizeof(t), "user/%zu/inbox", k);
		o[k].visits = 0;
		topic_index_each(ix, t, (size_t)n, count_visit, NULL);
		n = snprintf(t, sizeof(t), "user/%zu", k);
		topic_index_each(ix, t, (size_t)n, count_visit, NULL);
		bad += o[k].visits != o[k].npat;
	}
	CHECK_EQ_INT(bad, 0);
	for (size_t k = 0; k < OWNERS; k++)
		owner_del(ix, &o[k]);
	topic_index_stats(ix, &st);
	CHECK_EQ_INT(st.bytes, empty.bytes);
	CHECK(full.bytes > empty.bytes + OWNERS * 32);
	/* Freeing an index that still holds subscriptions frees its own
	 * memory (ASan's leak check) and leaves the nodes to their owners. */
	owner_add(ix, &o[0]);
	topic_index_free(ix);
	free(o);
}

int main(void)
{
	test_edges();
	test_against_match();
	test_leave_during_walk();
	test_many_keys();
	return check_done("test_topic_index");
}
