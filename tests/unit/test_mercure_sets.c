/* test_mercure_sets.c: interned Mercure matcher lists (src/mercure_sets.c):
 * equal lists against the same hub URL share one set and one verdict per
 * update, whatever the number of subscribers; lists that differ in a
 * matcher, its kind, their order or the hub URL do not; verdicts equal a
 * direct judging of the update's topics; a set lives as long as its last
 * reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mercure_sets.h"
#include "mercure_update.h"
#include "metrics.h"
#include "urlpattern.h"

#define BASE "https://hub.example/.well-known/mercure"

/* A list of the given matchers: "u:" marks a URL pattern, else exact. */
static struct mercure_matchers list(const char *const *texts, size_t n)
{
	struct mercure_matchers l = { 0 };
	for (size_t i = 0; i < n; i++) {
		bool up = strncmp(texts[i], "u:", 2) == 0;
		const char *t = up ? texts[i] + 2 : texts[i];
		CHECK(mercure_matchers_add(&l, up ? MERCURE_URLPATTERN : MERCURE_EXACT, t, strlen(t), BASE) == NULL);
	}
	return l;
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

int main(void)
{
	test_shared();
	test_distinct();
	test_verdicts();
	return check_done("test_mercure_sets");
}
