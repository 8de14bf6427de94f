/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_url.h: the redis_url setting taken apart (pure; fuzzed):
 *   redis://[user[:password]@]host[:port][/db]   host may be [IPv6]
 *   unix:/path/to/redis.sock[?db=N]
 * user and password may be percent-encoded. */
#ifndef HERALD_REDIS_URL_H
#define HERALD_REDIS_URL_H

#include <stddef.h>

#define REDIS_URL_MAX 1024

struct redis_url {
	char host[256]; /* "" for a unix socket */
	int port;       /* 6379 unless given */
	char path[108]; /* the unix socket, or "" */
	char user[128];
	char password[256];
	int db; /* 0 unless given */
};

/* Fill out from s; returns NULL, or the reason s is not a Redis address. */
const char *redis_url_parse(const char *s, struct redis_url *out);

/* s without its password, for logs ("redis://user:***@host:6379/0"). */
void redis_url_redact(const char *s, char *buf, size_t len);

#endif
