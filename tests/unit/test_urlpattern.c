/* SPDX-License-Identifier: BSD-2-Clause */
/* test_urlpattern.c: URL patterns (src/mercure/urlpattern.c): the syntax herald
 * takes (named groups, wildcards, groups, modifiers and the "/" before a
 * modified part, escapes, each component with its delimiter), relative
 * patterns and topics against the hub's URL, case rules, what is refused,
 * a pattern's width and literal prefix, and the steps a match costs (a
 * pattern that would make a backtracking matcher run for hours answers in
 * at most (width + 1) steps per byte). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mercure/urlpattern.h"

#define BASE "https://hub.example/.well-known/mercure"

/* 1 match, 0 no match, -1 refused. */
static int try(const char *pattern, const char *topic)
{
	const char *why;
	struct urlpattern *p = urlpattern_new(pattern, strlen(pattern), BASE, &why);
	if (!p)
		return -1;
	int r = urlpattern_match(p, topic, strlen(topic), BASE);
	urlpattern_free(p);
	return r;
}

static void test_paths(void)
{
	CHECK_EQ_INT(try("https://example.com/books/:id", "https://example.com/books/1"), 1);
	CHECK_EQ_INT(try("https://example.com/books/:id", "https://example.com/books/1/2"), 0);
	CHECK_EQ_INT(try("https://example.com/books/:id", "https://example.com/books/"), 0);
	CHECK_EQ_INT(try("https://example.com/books/:id", "https://example.com/books"), 0);
	CHECK_EQ_INT(try("https://example.com/books/:id?", "https://example.com/books"), 1);
	CHECK_EQ_INT(try("https://example.com/books/:id?", "https://example.com/books/7"), 1);
	CHECK_EQ_INT(try("https://example.com/books/:id?", "https://example.com/books/7/8"), 0);
	CHECK_EQ_INT(try("https://example.com/a/:x+", "https://example.com/a/b/c/d"), 1);
	CHECK_EQ_INT(try("https://example.com/a/:x+", "https://example.com/a"), 0);
	CHECK_EQ_INT(try("https://example.com/a/:x*", "https://example.com/a"), 1);
	CHECK_EQ_INT(try("https://example.com/a/:x*", "https://example.com/a/b/c"), 1);
	CHECK_EQ_INT(try("https://example.com/books/*", "https://example.com/books/3/4"), 1);
	CHECK_EQ_INT(try("https://example.com/books/*", "https://example.com/books/"), 1);
	CHECK_EQ_INT(try("https://example.com/books/*", "https://example.com/books"), 0);
	CHECK_EQ_INT(try("https://example.com/{a/}?b", "https://example.com/b"), 1);
	CHECK_EQ_INT(try("https://example.com/{a/}?b", "https://example.com/a/b"), 1);
	CHECK_EQ_INT(try("https://example.com/{a/}+b", "https://example.com/a/a/b"), 1);
	CHECK_EQ_INT(try("https://example.com/{a/}+b", "https://example.com/b"), 0);
	CHECK_EQ_INT(try("https://example.com/x\\:y\\*", "https://example.com/x:y*"), 1);
	CHECK_EQ_INT(try("https://example.com/x\\:y\\*", "https://example.com/x:yz"), 0);
	CHECK_EQ_INT(try("https://example.com/:a-:b", "https://example.com/1-2"), 1);
}

static void test_components(void)
{
	/* Left-out search and hash match anything; given ones are matched. */
	CHECK_EQ_INT(try("https://example.com/b", "https://example.com/b?x=1#f"), 1);
	CHECK_EQ_INT(try("https://example.com/b?x=:v", "https://example.com/b?x=1"), 1);
	CHECK_EQ_INT(try("https://example.com/b?x=:v", "https://example.com/b?y=1"), 0);
	CHECK_EQ_INT(try("https://example.com/b#:h", "https://example.com/b#top"), 1);
	/* Hosts: '.' delimits a name; case does not matter. */
	CHECK_EQ_INT(try("https://*.example.com/x", "https://a.b.example.com/x"), 1);
	CHECK_EQ_INT(try("https://:sub.example.com/x", "https://a.example.com/x"), 1);
	CHECK_EQ_INT(try("https://:sub.example.com/x", "https://a.b.example.com/x"), 0);
	CHECK_EQ_INT(try("https://Example.COM/x", "HTTPS://example.com/x"), 1);
	CHECK_EQ_INT(try("https://example.com/X", "https://example.com/x"), 0);
	/* Ports: default ones are no port. */
	CHECK_EQ_INT(try("https://example.com/b", "https://example.com:443/b"), 1);
	CHECK_EQ_INT(try("https://example.com/b", "https://example.com:8443/b"), 0);
	CHECK_EQ_INT(try("https://example.com:*/b", "https://example.com:8443/b"), 1);
	CHECK_EQ_INT(try("*://example.com/b", "wss://example.com/b"), 1);
	CHECK_EQ_INT(try("https://example.com/b", "http://example.com/b"), 0);
}

static void test_relative(void)
{
	CHECK_EQ_INT(try("/.well-known/mercure/subscriptions/:t/:s", "/.well-known/mercure/subscriptions/a/b"), 1);
	CHECK_EQ_INT(try("/.well-known/mercure/subscriptions/:t/:s",
			 "https://hub.example/.well-known/mercure/subscriptions/a/b"),
		     1);
	CHECK_EQ_INT(try("/.well-known/mercure/subscriptions/:t/:s",
			 "https://other.example/.well-known/mercure/subscriptions/a/b"),
		     0);
	CHECK_EQ_INT(try("https://hub.example/books/:id", "/books/1"), 1);
	CHECK_EQ_INT(try("books/:id", "https://hub.example/.well-known/books/1"), 1);
	/* A relative topic is matched as it resolves, and its path is the one
	 * urlpattern_topic_path gives (the hub's namespace check's). */
	CHECK_EQ_INT(try("/.well-known/mercure/subscriptions/:t", "mercure/subscriptions/a"), 1);
	static const char *const paths[][2] = {
		{ "mercure/subscriptions/a", "/.well-known/mercure/subscriptions/a" },
		{ "/x?y#z", "/x" },
		{ "?y", "/.well-known/" },
		{ "urn:example:1", "/.well-known/urn:example:1" },
		{ "https://other.example", "/" },
		{ "HTTPS://h.example/a/../b", "/a/../b" },
		{ "//h.example/.well-known/mercure", "//h.example/.well-known/mercure" },
	};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		char *path = urlpattern_topic_path(paths[i][0], strlen(paths[i][0]), BASE);
		CHECK(strcmp(path, paths[i][1]) == 0);
		free(path);
	}
}

static void test_refused(void)
{
	CHECK_EQ_INT(try("https://example.com/(\\d+)", "https://example.com/1"), -1);
	CHECK_EQ_INT(try("https://example.com/:id(\\d+)", "https://example.com/1"), -1);
	CHECK_EQ_INT(try("https://example.com/{a{b}}", "x"), -1);
	CHECK_EQ_INT(try("https://example.com/{a", "x"), -1);
	CHECK_EQ_INT(try("https://example.com/a}", "x"), -1);
	CHECK_EQ_INT(try("https://example.com/:/x", "x"), -1);
	CHECK_EQ_INT(try("https://example.com/x\\", "x"), -1);
	char big[URLPATTERN_MAX_LEN + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_EQ_INT(try(big, "a"), -1);
}

static size_t width(const char *pattern)
{
	const char *why;
	struct urlpattern *p = urlpattern_new(pattern, strlen(pattern), BASE, &why);
	CHECK(p != NULL);
	if (!p)
		return 0;
	size_t w = urlpattern_width(p);
	urlpattern_free(p);
	return w;
}

/* A pattern's width: its positions after each part's literal prefix and
 * its modified groups; what it leaves out, or gives as "*" alone, counts
 * nothing. */
static void test_width(void)
{
	CHECK_EQ_INT(width("https://example.com/books/1"), 0);
	CHECK_EQ_INT(width("https://example.com/books/:id"), 1);
	CHECK_EQ_INT(width("https://example.com/books/*"), 1);
	CHECK_EQ_INT(width("*"), 1); /* relative: the hub's folder, then a wildcard */
	CHECK_EQ_INT(width("*://*/*"), 1);
	CHECK_EQ_INT(width("https://*/x"), 0);
	CHECK_EQ_INT(width("https://*.example.com/x"), 13);
	CHECK_EQ_INT(width("https://example.com/{a/}?b"), 4);
	CHECK_EQ_INT(width("https://example.com/:a-:b"), 3);
	CHECK_EQ_INT(width("https://example.com/b?x=:v"), 1);
	CHECK_EQ_INT(width("https://example.com/{ab}c"), 0); /* a group without modifier is literal */
}

/* What an update's topic must start with for a pattern to match it. */
static void test_path_prefix(void)
{
	static const struct {
		const char *pattern, *prefix;
	} cases[] = {
		{ "https://example.com/books/:id", "/books/" },
		{ "https://example.com/books/page-:n", "/books/page-" },
		{ "https://example.com/books/:id?", "/books" },
		{ "https://example.com/{ab}+/x", "/" },
		{ "books/:id", "/.well-known/books/" },
		{ "/x/y", "/x/y" },
		{ "https://example.com/*", "/" },
		{ "https://example.com", "/" },
		{ "*", "/.well-known/" },
		{ "*://*/*", "/" },
		{ "https://example.com/:x?", "" },
		{ "https://example.com/:x", "/" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *why;
		struct urlpattern *p = urlpattern_new(cases[i].pattern, strlen(cases[i].pattern), BASE, &why);
		CHECK(p != NULL);
		size_t n;
		const char *got = urlpattern_path_prefix(p, &n);
		CHECK(n == strlen(cases[i].prefix) && memcmp(got, cases[i].prefix, n) == 0);
		if (n != strlen(cases[i].prefix) || memcmp(got, cases[i].prefix, n) != 0)
			fprintf(stderr, "%s: prefix %.*s\n", cases[i].pattern, (int)n, got);
		urlpattern_free(p);
	}
}

/* Too wide a pattern is refused, naming why; one at the bound matches a
 * topic that keeps every position live in at most (width + 1) steps per
 * byte, counted, not timed. */
static void test_cost(void)
{
	char pattern[URLPATTERN_MAX_LEN + 1] = "/", topic[URLPATTERN_TOPIC_MAX];
	for (int i = 0; i < 40; i++)
		strcat(pattern, "*a");
	strcat(pattern, "b");
	const char *why;
	CHECK(urlpattern_new(pattern, strlen(pattern), BASE, &why) == NULL && strstr(why, "wider than 64"));
	/* A thousand wildcards in 1 KB. */
	memset(pattern, 0, sizeof(pattern));
	for (int i = 0; i < 500; i++)
		strcat(pattern, "*a");
	CHECK(urlpattern_new(pattern, strlen(pattern), BASE, &why) == NULL && strstr(why, "wider than 64"));
	/* Empty modified groups cost too. */
	strcpy(pattern, "/x");
	for (int i = 0; i < 65; i++)
		strcat(pattern, "{}?");
	CHECK(urlpattern_new(pattern, strlen(pattern), BASE, &why) == NULL && strstr(why, "wider than 64"));

	strcpy(pattern, "/");
	for (int i = 0; i < 31; i++)
		strcat(pattern, "*a");
	strcat(pattern, "*b");
	CHECK_EQ_INT(width(pattern), URLPATTERN_MAX_WIDTH);
	topic[0] = '/';
	memset(topic + 1, 'a', sizeof(topic) - 2);
	topic[sizeof(topic) - 1] = '\0';
	uint64_t before = urlpattern_steps();
	CHECK_EQ_INT(try(pattern, topic), 0);
	uint64_t steps = urlpattern_steps() - before;
	size_t resolved = strlen(topic) + strlen(BASE);
	CHECK(steps <= (URLPATTERN_MAX_WIDTH + 1) * resolved);
	CHECK(steps > 40 * strlen(topic)); /* every position was live: the bound is no slack */
	/* Too long a topic is no match, without being looked at. */
	char huge[URLPATTERN_TOPIC_MAX + 2];
	memset(huge, 'a', sizeof(huge) - 1);
	huge[0] = '/';
	huge[sizeof(huge) - 1] = '\0';
	before = urlpattern_steps();
	CHECK_EQ_INT(try("/:x", huge), 0);
	CHECK(urlpattern_steps() == before);
}

int main(void)
{
	test_paths();
	test_components();
	test_relative();
	test_refused();
	test_width();
	test_path_prefix();
	test_cost();
	return check_done("test_urlpattern");
}
