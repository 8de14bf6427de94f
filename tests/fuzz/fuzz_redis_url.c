/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_redis_url.c: fuzz target for src/redis/redis_url.c. The input is one
 * redis_url value. Invariants:
 *   - a value is taken (NULL) or refused with a reason, never a crash;
 *   - a taken value names exactly one of a host or a socket path, a port in
 *     1..65535 and a database number >= 0, every field NUL-terminated
 *     within its size;
 *   - a host and port taken apart and written back as redis://host:port/db
 *     parse to the same fields;
 *   - the redacted form shows *** in place of a user:password@'s password
 *     and the rest unchanged, written within its buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "redis/redis_url.h"

static void check_taken(const char *s, const struct redis_url *u)
{
	FUZZ_ASSERT(memchr(u->host, '\0', sizeof(u->host)) && memchr(u->path, '\0', sizeof(u->path)));
	FUZZ_ASSERT(memchr(u->user, '\0', sizeof(u->user)) && memchr(u->password, '\0', sizeof(u->password)));
	FUZZ_ASSERT((u->host[0] != '\0') != (u->path[0] != '\0'));
	FUZZ_ASSERT(u->port >= 1 && u->port <= 65535 && u->db >= 0);
	if (u->host[0]) {
		char again[600];
		int n = snprintf(again, sizeof(again), strchr(u->host, ':') ? "redis://[%s]:%d/%d" : "redis://%s:%d/%d",
				 u->host, u->port, u->db);
		FUZZ_ASSERT(n > 0 && (size_t)n < sizeof(again));
		struct redis_url v;
		FUZZ_ASSERT(redis_url_parse(again, &v) == NULL);
		FUZZ_ASSERT(strcmp(v.host, u->host) == 0 && v.port == u->port && v.db == u->db);
	}
	char shown[REDIS_URL_MAX + 8];
	redis_url_redact(s, shown, sizeof(shown));
	FUZZ_ASSERT(memchr(shown, '\0', sizeof(shown)));
	/* user:password@: what lies between the first ':' after the scheme
	 * and the last '@' is shown as ***, and nothing else changes. */
	const char *scheme = strstr(s, "://"), *at = scheme ? strrchr(scheme, '@') : NULL;
	const char *colon = at ? memchr(scheme + 3, ':', (size_t)(at - scheme - 3)) : NULL;
	if (colon && strlen(s) + 8 < sizeof(shown)) {
		char want[REDIS_URL_MAX + 8];
		snprintf(want, sizeof(want), "%.*s:***%s", (int)(colon - s), s, at);
		FUZZ_ASSERT(strcmp(shown, want) == 0);
	}
}

int fuzz_one(const uint8_t *data, size_t size)
{
	if (size > 2 * REDIS_URL_MAX)
		return 0;
	char *s = malloc(size + 1);
	memcpy(s, data, size);
	s[size] = '\0';
	struct redis_url u;
	const char *why = redis_url_parse(s, &u);
	if (!why)
		check_taken(s, &u);
	else
		FUZZ_ASSERT(why[0] != '\0');
	free(s);
	return 0;
}
