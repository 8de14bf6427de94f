/* SPDX-License-Identifier: BSD-2-Clause */
/* test_redis_sentinel.c: the redis_sentinels list (src/redis/redis_sentinel.c):
 * the forms docs/cluster.md documents, the default port, and the refusals an
 * operator may meet; a finder built from a list says what it asks. */
#include "check.h"
#include "redis/redis_sentinel.h"

#include <stdio.h>
#include <string.h>

static void test_accepted(void)
{
	char buf[200];
	const char *good[] = { "127.0.0.1:26379",       "10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379",
			       "sentinel.internal",     " a:1 , b:2 ",
			       "[::1]:26380,[fe80::1]", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		const char *why = redis_sentinel_check_list(good[i], buf, sizeof(buf));
		if (why)
			fprintf(stderr, "%s: %s\n", good[i], why);
		CHECK(why == NULL);
	}
}

static void test_refused(void)
{
	char buf[200];
	const char *bad[] = { "",
			      ",",
			      "a:0",
			      "a:65536",
			      "a:26x",
			      "::1:26379",
			      "[::1",
			      "[::1]x",
			      "a b:1",
			      "a:1,,b:2",
			      "a:",
			      "user@a:1",
			      "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = redis_sentinel_check_list(bad[i], buf, sizeof(buf));
		if (!why)
			fprintf(stderr, "accepted: \"%s\"\n", bad[i]);
		CHECK(why != NULL);
	}
	CHECK(strstr(redis_sentinel_check_list("a:1,b:0", buf, sizeof(buf)), "entry 2") != NULL);
}

static void test_finder(void)
{
	char err[200];
	struct redis_sentinel *s = redis_sentinel_new(NULL, "a:1,b", "heraldlog", err, sizeof(err));
	CHECK(s != NULL);
	CHECK(strcmp(redis_sentinel_describe(s), "heraldlog via Sentinel a:1,b") == 0);
	redis_sentinel_free(s);
	CHECK(redis_sentinel_new(NULL, "a:x", "heraldlog", err, sizeof(err)) == NULL && err[0]);
	redis_sentinel_free(NULL);
}

int main(void)
{
	test_accepted();
	test_refused();
	test_finder();
	return check_done("test_redis_sentinel");
}
