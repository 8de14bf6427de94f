/* SPDX-License-Identifier: BSD-2-Clause */
/* test_mercure_sets.c: interned Mercure matcher lists (src/mercure/mercure_sets.c):
 * equal lists against the same hub URL share one set and one verdict per
 * update, whatever the number of subscribers; lists that differ in a
 * matcher, its kind, their order or the hub URL do not; verdicts equal a
 * direct judging of the update's topics; a set lives as long as its last
 * reference; a set's keys find it, through the hub's topic index and the
 * prober, for every update it wants. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mercure/mercure_sets.h"
#include "store/mercure_update.h"
#include "core/metrics.h"
#include "hub/topic_index.h"
#include "mercure/urlpattern.h"
#include "common/util.h"

#define BASE "https://hub.example/.well-known/mercure"

/* A list of the given matchers against base: "u:" marks a URL pattern,
 * else exact. */
static struct mercure_matchers list_on(const char *const *texts, size_t n, const char *base)
{
	struct mercure_matchers l = { 0 };
	for (size_t i = 0; i < n; i++) {
		bool up = strncmp(texts[i], "u:", 2) == 0;
		const char *t = up ? texts[i] + 2 : texts[i];
		const char *why = mercure_matchers_add(&l, up ? MERCURE_URLPATTERN : MERCURE_EXACT, t, strlen(t), base);
		CHECK(why == NULL);
		if (why)
			fprintf(stderr, "%s: %s\n", texts[i], why);
	}
	return l;
}

static struct mercure_matchers list(const char *const *texts, size_t n)
{
	return list_on(texts, n, BASE);
}

/* An update's row: id, and its topics in a block (or, with mercure NULL,
 * a row of herald's own with topic). */
struct row {
	struct store_event ev;
	char *block;
};

static struct row update(int64_t id, char *const *topics, size_t n)
{
	struct row r = { .ev = { .id = id, .type = "message", .type_len = 7, .public = true, .created_at = 1000 } };
	size_t len;
	r.block = mercure_block_new("urn:x", "", topics, n, &len);
	r.ev.mercure = r.block;
	r.ev.mercure_len = len;
	r.ev.topic = topics[0];
	r.ev.topic_len = strlen(topics[0]);
	return r;
}

static const char *const wanted[] = { "u:https://example.com/books/:id", "https://example.com/news",
				      "u:https://example.com/*a*a*a*a*a*a*a*a*Z" };

/* 31 subscribers with the same selectors: one set, one judging per update,
 * whatever the update's topics cost to judge. */
static void test_shared(void)
{
	struct metrics mt = { 0 };
	struct mercure_sets *ss = mercure_sets_new(&mt);
	struct mercure_set *sub[31];
	for (size_t i = 0; i < 31; i++) {
		struct mercure_matchers l = list(wanted, 3);
		sub[i] = mercure_sets_intern(ss, &l, BASE);
		CHECK(l.n == 0 && l.v == NULL);
		CHECK(sub[i] == sub[0]);
	}
	CHECK_EQ_INT(mercure_sets_count(ss), 1);
	char long_topic[2100] = "https://example.com/";
	memset(long_topic + strlen(long_topic), 'a', 2000);
	char *topics[3] = { long_topic, "https://example.com/books/7", "other" };
	for (int64_t id = 1; id <= 40; id++) {
		/* Odd updates are wanted (their second topic is a book). */
		struct row r = update(id, topics, id % 2 ? 3 : 1);
		uint64_t steps = urlpattern_steps();
		for (size_t i = 0; i < 31; i++)
			CHECK(mercure_set_wants(sub[i], &r.ev) == (id % 2 == 1));
		steps = urlpattern_steps() - steps;
		/* Judged once: the steps of one subscriber, not 31. */
		CHECK(steps <= (mercure_set_matchers(sub[0])->width + 3) * 2 * (strlen(long_topic) + strlen(BASE)));
		CHECK(steps > 0 && mt.mercure_match_steps >= steps);
		free(r.block);
	}
	CHECK_EQ_INT((int)mt.mercure_judged, 40);
	CHECK_EQ_INT((int)mt.mercure_judged_shared, 40 * 30);
	for (size_t i = 0; i < 31; i++)
		mercure_sets_release(ss, sub[i]);
	CHECK_EQ_INT(mercure_sets_count(ss), 0);
	mercure_sets_free(ss);
}

/* What makes two lists different sets. */
static void test_distinct(void)
{
	struct metrics mt = { 0 };
	struct mercure_sets *ss = mercure_sets_new(&mt);
	static const char *const a[] = { "x", "y" }, *const b[] = { "y", "x" }, *const c[] = { "u:x", "y" },
				 *const d[] = { "x", "yy" }, *const e[] = { "xy" };
	const char *const *lists[] = { a, b, c, d, e };
	size_t lens[] = { 2, 2, 2, 2, 1 };
	struct mercure_set *s[6];
	for (size_t i = 0; i < 5; i++) {
		struct mercure_matchers l = list(lists[i], lens[i]);
		s[i] = mercure_sets_intern(ss, &l, BASE);
		for (size_t j = 0; j < i; j++)
			CHECK(s[i] != s[j]);
	}
	struct mercure_matchers l = list(a, 2);
	s[5] = mercure_sets_intern(ss, &l, "https://other.example/.well-known/mercure");
	for (size_t j = 0; j < 5; j++)
		CHECK(s[5] != s[j]);
	CHECK_EQ_INT(mercure_sets_count(ss), 6);
	/* Many sets: the table grows and keeps each one findable. */
	struct mercure_set *many[300];
	char name[32];
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "t/%d", i);
		const char *one[1] = { name };
		struct mercure_matchers m = list(one, 1);
		many[i] = mercure_sets_intern(ss, &m, BASE);
	}
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "t/%d", i);
		const char *one[1] = { name };
		struct mercure_matchers m = list(one, 1);
		CHECK(mercure_sets_intern(ss, &m, BASE) == many[i]);
		mercure_sets_release(ss, many[i]);
		mercure_sets_release(ss, many[i]);
	}
	for (size_t i = 0; i < 6; i++)
		mercure_sets_release(ss, s[i]);
	CHECK_EQ_INT(mercure_sets_count(ss), 0);
	mercure_sets_free(ss);
}

/* Verdicts equal judging the topics directly, for ids that share a slot
 * of a set's memory, for rows of herald's own API, and for an id that a
 * log started afresh gave another row. */
static void test_verdicts(void)
{
	struct metrics mt = { 0 };
	struct mercure_sets *ss = mercure_sets_new(&mt);
	struct mercure_matchers l = list(wanted, 3);
	struct mercure_set *s = mercure_sets_intern(ss, &l, BASE);
	const struct mercure_matchers *m = mercure_set_matchers(s);
	char *pool[] = { "https://example.com/books/1", "https://example.com/news", "https://example.com/x",
			 "https://example.com/books/1/2", "news" };
	for (int round = 0; round < 3; round++)
		for (int64_t id = 1; id <= 64; id++) {
			char *topics[2] = { pool[id % 5], pool[(id / 5) % 5] };
			size_t n = 1 + (size_t)(id % 2);
			struct row r = update(id * 16, topics, n); /* every id in one slot */
			bool direct = false;
			for (size_t i = 0; i < n; i++)
				direct |= mercure_matchers_match(m, topics[i], strlen(topics[i]), BASE);
			CHECK(mercure_set_wants(s, &r.ev) == direct);
			CHECK(mercure_set_wants(s, &r.ev) == direct);
			free(r.block);
		}
	/* A row of herald's own API: its topic is the one topic. */
	struct store_event own = { .id = 9999, .topic = "https://example.com/news", .topic_len = 24 };
	CHECK(mercure_set_wants(s, &own));
	struct store_event none = { .id = 9998, .topic = "", .topic_len = 0 };
	CHECK(!mercure_set_wants(s, &none));
	/* The same id on another row (a log started afresh). */
	struct store_event again = { .id = 9999, .topic = "https://example.com/x", .topic_len = 21, .created_at = 5 };
	CHECK(!mercure_set_wants(s, &again));
	mercure_sets_release(ss, s);
	mercure_sets_free(ss);
}

/* ---- the keys the hub's index finds subscribers by ---- */

static const char *const patterns[] = {
	"u:https://example.com/books/:id",
	"u:/books/:id",
	"u:books/:id",
	"u:https://*.example.com/books/*",
	"u:https://example.com/books/:id?",
	"u:https://example.com/:x/reviews",
	"https://example.com/books/1",
	"books/2",
	"u:https://example.com/books{/:id}?",
	"u:https://example.com/books/page-:n",
	"u:https://example.com/a/b/c/:d",
	"u:*://example.com/books/*",
	"u:https://example.com/books/*?q=:v",
	"u:https://example.com",
	"u:x",
	"u:/x/",
	"u:*",
	"*",
	"a/*",
};

static const char *const pool[] = {
	"https://example.com/books/1",
	"https://example.com/books/",
	"https://example.com/books",
	"/books/1",
	"books/1",
	"books/2",
	"https://a.example.com/books/x/y",
	"https://example.com/books/page-3",
	"https://example.com/a/b/c/d",
	"https://example.com/x/reviews",
	"urn:isbn:123",
	"https://example.com/books/1?q=1#f",
	"HTTPS://EXAMPLE.COM/books/1",
	"https://example.com",
	"x",
	"/x/",
	"a/b",
	"/hub/books/1",
	"https://other.example/hub/x",
};

#define NP (sizeof(patterns) / sizeof(patterns[0]))
#define NT (sizeof(pool) / sizeof(pool[0]))

struct seen {
	struct topic_index *ix;
	bool *visited;
};

static void mark(void *owner, void *arg)
{
	struct seen *sn = arg;
	sn->visited[(size_t)(uintptr_t)owner] = true;
}

static void probe_hit(void *ctx, const char *key, size_t n)
{
	struct seen *sn = ctx;
	topic_index_each_keyed(sn->ix, key, n, mark, sn);
}

/* Every subscriber that wants an update is found by one of the update's
 * probes under one of its set's keys (sound), over sets of one and two
 * matchers on two hub URLs with different folders; and keyed sets are
 * found for few of the updates they do not want (useful). */
static void test_keys_find_every_subscriber(void)
{
	struct metrics mt = { 0 };
	struct mercure_sets *ss = mercure_sets_new(&mt);
	static const char *const bases[2] = { BASE, "https://other.example/hub/mercure" };
	enum { NSETS = 2 * (NP + NP * NP) };
	struct mercure_set **sets = xcalloc(NSETS, sizeof(*sets));
	struct topic_sub *subs = xcalloc(NSETS * 2 * NP, sizeof(*subs));
	struct topic_index *ix = topic_index_new();
	size_t nsets = 0, nsubs = 0, keyed = 0;
	for (int b = 0; b < 2; b++)
		for (size_t i = 0; i < NP; i++)
			for (size_t j = 0; j <= NP; j++) {
				const char *two[2] = { patterns[i], j < NP ? patterns[j] : NULL };
				struct mercure_matchers l = list_on(two, j < NP ? 2 : 1, bases[b]);
				struct mercure_set *s = mercure_sets_intern(ss, &l, bases[b]);
				sets[nsets] = s;
				size_t nk;
				char **keys = mercure_set_keys(s, &nk);
				keyed += nk > 0;
				if (!nk)
					topic_index_add(ix, &subs[nsubs++], "*", (void *)(uintptr_t)nsets);
				for (size_t k = 0; k < nk; k++) {
					topic_index_add(ix, &subs[nsubs++], keys[k], (void *)(uintptr_t)nsets);
					free(keys[k]);
				}
				free(keys);
				nsets++;
			}
	CHECK(keyed > nsets / 4);
	bool *visited = xcalloc(nsets, sizeof(bool));
	size_t missed = 0, spared = 0;
	for (size_t a = 0; a < NT; a++)
		for (size_t c = 0; c <= NT; c++) {
			char *topics[2] = { (char *)pool[a], c < NT ? (char *)pool[c] : NULL };
			struct row r = update((int64_t)(a * 100 + c + 1), topics, c < NT ? 2 : 1);
			if (c == NT && a % 2) {
				/* A row of herald's own: no block. */
				r.ev.mercure = NULL;
				r.ev.mercure_len = 0;
			}
			memset(visited, 0, nsets * sizeof(bool));
			struct seen sn = { ix, visited };
			topic_index_each_every(ix, mark, &sn);
			mercure_sets_probe(ss, &r.ev, probe_hit, &sn);
			for (size_t k = 0; k < nsets; k++) {
				bool wants = mercure_set_wants(sets[k], &r.ev);
				if (wants && !visited[k] && missed++ < 5)
					fprintf(stderr, "set %zu not found for %s %s\n", k, pool[a],
						c < NT ? pool[c] : "");
				spared += !wants && !visited[k];
			}
			free(r.block);
		}
	CHECK_EQ_INT(missed, 0);
	CHECK(spared > nsets * NT / 4);
	for (size_t k = 0; k < nsubs; k++)
		topic_index_del(ix, &subs[k]);
	topic_index_free(ix);
	for (size_t k = 0; k < nsets; k++)
		mercure_sets_release(ss, sets[k]);
	CHECK_EQ_INT(mercure_sets_count(ss), 0);
	mercure_sets_free(ss);
	free(visited);
	free(subs);
	free(sets);
}

/* The keys of a few sets, written out. */
static void test_keys(void)
{
	static const struct {
		const char *matcher, *key; /* key NULL: no keys (every update) */
	} cases[] = {
		{ "u:https://example.com/books/:id", "/books/*" },
		{ "u:https://example.com/books/page-:n", "/books/*" },
		{ "u:https://example.com/books/:id?", NULL }, /* its prefix "/books" has no '/' but the first */
		{ "u:books/:id", "/.well-known/books/*" },
		{ "https://example.com/books/1", "https://example.com/books/1" },
		{ "u:https://example.com/books/1", "/books/*" },
		{ "u:https://example.com/:x/reviews", NULL },
		{ "u:/.well-known/*", "/.well-known/*" },
		{ "u:*", NULL }, /* "*" alone: every topic, whatever the type */
		{ "*", NULL },
	};
	struct metrics mt = { 0 };
	struct mercure_sets *ss = mercure_sets_new(&mt);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mercure_matchers l = list(&cases[i].matcher, 1);
		struct mercure_set *s = mercure_sets_intern(ss, &l, BASE);
		size_t n;
		char **keys = mercure_set_keys(s, &n);
		if (cases[i].key)
			CHECK(n == 1 && strcmp(keys[0], cases[i].key) == 0);
		else
			CHECK(n == 0 && keys == NULL);
		if (cases[i].key ? n != 1 || strcmp(keys[0], cases[i].key) != 0 : n != 0)
			fprintf(stderr, "%s: %zu keys, the first %s\n", cases[i].matcher, n, n ? keys[0] : "");
		for (size_t k = 0; k < n; k++)
			free(keys[k]);
		free(keys);
		mercure_sets_release(ss, s);
	}
	mercure_sets_free(ss);
}

int main(void)
{
	test_shared();
	test_distinct();
	test_verdicts();
	test_keys();
	test_keys_find_every_subscriber();
	return check_done("test_mercure_sets");
}
