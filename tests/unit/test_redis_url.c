/* SPDX-License-Identifier: BSD-2-Clause */
/* test_redis_url.c: redis_url taken apart (src/redis/redis_url.c): the forms
 * docs/configuration.md documents, their defaults, and the refusals an
 * operator may meet. */
#include "check.h"
#include "redis/redis_url.h"

#include <string.h>

static void test_taken(void)
{
	struct redis_url u;
	CHECK(redis_url_parse("redis://127.0.0.1", &u) == NULL);
	CHECK(strcmp(u.host, "127.0.0.1") == 0 && u.port == 6379 && u.db == 0 && !u.path[0] && !u.password[0]);
	CHECK(redis_url_parse("redis://cache.internal:6380/4", &u) == NULL);
	CHECK(strcmp(u.host, "cache.internal") == 0 && u.port == 6380 && u.db == 4);
	CHECK(redis_url_parse("redis://[::1]:7000/", &u) == NULL);
	CHECK(strcmp(u.host, "::1") == 0 && u.port == 7000 && u.db == 0);
	CHECK(redis_url_parse("redis://herald:p%40ss%3Aw@10.0.0.5:6379/1", &u) == NULL);
	CHECK(strcmp(u.user, "herald") == 0 && strcmp(u.password, "p@ss:w") == 0 && u.db == 1);
	CHECK(redis_url_parse("redis://justapassword@localhost", &u) == NULL);
	CHECK(!u.user[0] && strcmp(u.password, "justapassword") == 0);
	CHECK(redis_url_parse("unix:/run/redis/redis.sock", &u) == NULL);
	CHECK(strcmp(u.path, "/run/redis/redis.sock") == 0 && !u.host[0] && u.db == 0);
	CHECK(redis_url_parse("unix:///tmp/r.sock?db=3", &u) == NULL);
	CHECK(strcmp(u.path, "/tmp/r.sock") == 0 && u.db == 3);
}

static void test_refused(void)
{
	struct redis_url u;
	const char *bad[] = { "",
			      "127.0.0.1:6379",
			      "http://localhost",
			      "redis://",
			      "redis://host:0",
			      "redis://host:65536",
			      "redis://host:63x9",
			      "redis://host/db",
			      "redis://ho st",
			      "redis://[::1",
			      "redis://[nothex]",
			      "redis://u:p%4@host",
			      "unix:relative.sock",
			      "unix:/tmp/r.sock?database=1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = redis_url_parse(bad[i], &u);
		CHECK(why != NULL && why[0]);
	}
}

static void test_redact(void)
{
	char out[128];
	redis_url_redact("redis://herald:secret@db:6379/0", out, sizeof(out));
	CHECK(strcmp(out, "redis://herald:***@db:6379/0") == 0);
	redis_url_redact("redis://secret@db", out, sizeof(out));
	CHECK(strcmp(out, "redis://***@db") == 0);
	redis_url_redact("redis://db:6379", out, sizeof(out));
	CHECK(strcmp(out, "redis://db:6379") == 0);
}

int main(void)
{
	test_taken();
	test_refused();
	test_redact();
	return check_done("test_redis_url");
}
