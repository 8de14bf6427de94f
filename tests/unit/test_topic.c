/* SPDX-License-Identifier: BSD-2-Clause */
/* test_topic.c: topic patterns (src/core/topic.c): which patterns are valid,
 * which topics a pattern matches, and which patterns cover which, with
 * the edges named in topic.h ("a" and "a/" are not under SUB(a), nor is
 * "ab/c"). Inputs that are not NUL-terminated are given with lengths. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "core/topic.h"

static bool valid(const char *p)
{
	return topic_pattern_valid(p, strlen(p));
}

static bool match(const char *pattern, const char *topic)
{
	return topic_pattern_match(pattern, topic, strlen(topic));
}

static void test_valid(void)
{
	static const char *const good[] = {
		"a",     "news",      "user/42", "a/b/c", "a.b:c-d_e", "*",  "a/*",
		"a/b/*", "A-Z/0_9/*", "a//b",    "a//*",  "a/",        "/a", ":",
	};
	static const char *const bad[] = {
		"",    "**",  "*/a",  "a*", "a/*/b", "/*", "a/**",  "a/b*", "*a",
		"a b", "a,b", "a\tb", "é",  "a/*/",  "a?", "a/%2A", "a/*x",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		bool ok = valid(good[i]);
		if (!ok)
			fprintf(stderr, "  refused: \"%s\"\n", good[i]);
		CHECK(ok);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		bool ok = !valid(bad[i]);
		if (!ok)
			fprintf(stderr, "  accepted: \"%s\"\n", bad[i]);
		CHECK(ok);
	}
	/* Length: 1 to 128 bytes, the subtree's two bytes included. */
	char p[200];
	memset(p, 'x', sizeof(p));
	CHECK(topic_pattern_valid(p, 128));
	CHECK(!topic_pattern_valid(p, 129));
	p[126] = '/';
	p[127] = '*';
	CHECK(topic_pattern_valid(p, 128));
	p[127] = 'x';
	p[128] = '/';
	p[129] = '*';
	CHECK(!topic_pattern_valid(p, 130));
	/* Only the given bytes count: a NUL or what follows is not read. */
	CHECK(topic_pattern_valid("ab\0c", 2));
	CHECK(!topic_pattern_valid("ab\0c", 4));
	CHECK(topic_pattern_valid("a/*garbage", 3));
	CHECK(!topic_pattern_valid("*", 0));
}

static void test_match(void)
{
	CHECK(match("news", "news"));
	CHECK(!match("news", "new"));
	CHECK(!match("news", "newsy"));
	CHECK(!match("news", "news/x"));
	CHECK(!match("news", ""));
	CHECK(!match("a/b", "a/c"));

	CHECK(match("a/*", "a/b"));
	CHECK(match("a/*", "a/b/c"));
	CHECK(match("a/*", "a//"));
	CHECK(match("a/*", "a/*"));
	CHECK(!match("a/*", "a"));
	CHECK(!match("a/*", "a/"));
	CHECK(!match("a/*", "ab/c"));
	CHECK(!match("a/*", "b/a/c"));
	CHECK(!match("a/*", ""));
	CHECK(match("a/b/*", "a/b/c"));
	CHECK(!match("a/b/*", "a/bc"));
	CHECK(!match("a/b/*", "a/c/d"));

	CHECK(match("*", "anything/at/all"));
	CHECK(match("*", "x"));
	CHECK(match("*", ""));

	/* Only topic[0..n) is compared. */
	CHECK(topic_pattern_match("news", "newsroom", 4));
	CHECK(!topic_pattern_match("news", "newsroom", 3));
	CHECK(!topic_pattern_match("a/*", "a/b", 2));
	CHECK(topic_pattern_match("a/*", "a/bc", 3));
}

static bool covers(const char *p, const char *q)
{
	return topic_pattern_covers(p, q);
}

static void test_covers(void)
{
	CHECK(covers("*", "*"));
	CHECK(covers("*", "a"));
	CHECK(covers("*", "a/*"));

	CHECK(covers("a/*", "a/b"));
	CHECK(covers("a/*", "a/b/*"));
	CHECK(covers("a/*", "a/b/c"));
	CHECK(covers("a/*", "a/*"));
	CHECK(covers("a/*", "a//*"));
	CHECK(!covers("a/*", "a"));
	CHECK(!covers("a/*", "a/"));
	CHECK(!covers("a/*", "ab/c"));
	CHECK(!covers("a/*", "ab/*"));
	CHECK(!covers("a/*", "*"));
	CHECK(!covers("a/*", "b/*"));

	CHECK(covers("a/b/*", "a/b/c/*"));
	CHECK(!covers("a/b/*", "a/*"));
	CHECK(!covers("a/b/*", "a/b"));

	CHECK(covers("news", "news"));
	CHECK(!covers("news", "news/*"));
	CHECK(!covers("news", "*"));
	CHECK(!covers("news", "new"));
	CHECK(!covers("a/b", "a/*"));
}

/* covers agrees with match: over a set of topics, whenever p covers q,
 * every topic q matches is one p matches, and when it does not, some
 * topic tells them apart. */
static void test_covers_agrees_with_match(void)
{
	static const char *const pats[] = { "*", "a", "a/", "a/b", "a/*", "a/b/*", "ab/*", "a//*", "b/*", "a/b/c" };
	static const char *const topics[] = { "",     "a",   "a/",   "a/b", "a/b/",    "a/b/c", "ab",
					      "ab/c", "a//", "a//x", "b/a", "a/b/c/d", "b",     "a/c" };
	size_t np = sizeof(pats) / sizeof(pats[0]), nt = sizeof(topics) / sizeof(topics[0]);
	for (size_t i = 0; i < np; i++)
		for (size_t j = 0; j < np; j++) {
			bool all = true, p_only_missing = false;
			for (size_t k = 0; k < nt; k++)
				if (match(pats[j], topics[k]) && !match(pats[i], topics[k])) {
					all = false;
					p_only_missing = true;
				}
			bool c = covers(pats[i], pats[j]);
			if (c && !all)
				fprintf(stderr, "  \"%s\" covers \"%s\" but misses a topic\n", pats[i], pats[j]);
			CHECK(!c || all);
			if (!c && !p_only_missing)
				fprintf(stderr, "  \"%s\" does not cover \"%s\", yet no topic tells\n", pats[i],
					pats[j]);
			CHECK(c || p_only_missing);
		}
}

/* Reducing a list keeps exactly the topics it matches, drops every
 * repeated or covered pattern, and leaves no two that overlap. */
static void test_reduce(void)
{
	static const char *const pats[] = { "*", "a", "a/b", "a/*", "a/b/*", "ab/*", "b/*", "a/b/c", "b", "c/d" };
	static const char *const topics[] = { "a", "a/b", "a/b/c", "ab/c", "b/a", "b", "c/d", "a/c", "x" };
	size_t np = sizeof(pats) / sizeof(pats[0]), nt = sizeof(topics) / sizeof(topics[0]);
	srandom(3);
	for (int trial = 0; trial < 2000; trial++) {
		char *list[16];
		const char *orig[16];
		size_t n = (size_t)(random() % 17);
		for (size_t i = 0; i < n; i++) {
			orig[i] = pats[random() % np];
			list[i] = strdup(orig[i]);
		}
		size_t m = topic_patterns_reduce(list, n);
		CHECK(m <= n);
		CHECK(n == 0 || m >= 1);
		for (size_t k = 0; k < nt; k++) {
			bool before = false, after = false;
			for (size_t i = 0; i < n; i++)
				before = before || match(orig[i], topics[k]);
			for (size_t i = 0; i < m; i++)
				after = after || match(list[i], topics[k]);
			CHECK(before == after);
		}
		for (size_t i = 0; i < m; i++)
			for (size_t j = 0; j < m; j++)
				CHECK(i == j || !covers(list[i], list[j]));
		for (size_t i = 0; i < m; i++)
			free(list[i]);
	}
	/* The same pattern sixteen times is one; order is kept. */
	char *same[16];
	for (int i = 0; i < 16; i++)
		same[i] = strdup("big/*");
	CHECK_EQ_INT(topic_patterns_reduce(same, 16), 1);
	CHECK(strcmp(same[0], "big/*") == 0);
	free(same[0]);
	char *mixed[] = { strdup("a/b"), strdup("x"), strdup("a/*"), strdup("a/b/c") };
	CHECK_EQ_INT(topic_patterns_reduce(mixed, 4), 2);
	CHECK(strcmp(mixed[0], "x") == 0 && strcmp(mixed[1], "a/*") == 0);
	free(mixed[0]);
	free(mixed[1]);
}

int main(void)
{
	test_valid();
	test_match();
	test_covers();
	test_covers_agrees_with_match();
	test_reduce();
	return check_done("test_topic");
}
