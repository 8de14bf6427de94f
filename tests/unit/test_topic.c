/* test_topic.c: topic patterns (src/topic.c): which patterns are valid,
 * which topics a pattern matches, and which patterns cover which, with
 * the edges named in topic.h ("a" and "a/" are not under SUB(a), nor is
 * "ab/c"). Inputs that are not NUL-terminated are given with lengths. */
#include <string.h>

#include "check.h"
#include "topic.h"

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

int main(void)
{
	test_valid();
	test_match();
	test_covers();
	test_covers_agrees_with_match();
	return check_done("test_topic");
}
