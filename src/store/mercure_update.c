/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_update.c: the block of a Mercure update's id, retry and topics
 * (see mercure_update.h). */
#include "store/mercure_update.h"

#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "common/util.h"
#include "store/idempotency.h"

char *mercure_block_new(const char *id, const char *retry, char *const *topics, size_t n, size_t *len)
{
	size_t total = strlen(id) + 1 + strlen(retry) + 1;
	for (size_t i = 0; i < n; i++)
		total += strlen(topics[i]) + 1;
	char *b = xmalloc(total + 1), *p = b;
	p += sprintf(p, "%s\n%s", id, retry);
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "\n%s", topics[i]);
	*len = (size_t)(p - b);
	return b;
}

/* The line at b[*at..n): its start and length; *at moves past its break. */
static bool next_line(const char *b, size_t n, size_t *at, const char **line, size_t *len)
{
	if (*at > n)
		return false;
	const char *nl = memchr(b + *at, '\n', n - *at);
	size_t end = nl ? (size_t)(nl - b) : n;
	*line = b + *at;
	*len = end - *at;
	*at = end + 1;
	return true;
}

bool mercure_block_parse(const char *b, size_t n, struct mercure_block *out)
{
	size_t at = 0;
	memset(out, 0, sizeof(*out));
	if (!b || !next_line(b, n, &at, &out->id, &out->id_len) || out->id_len == 0)
		return false;
	if (!next_line(b, n, &at, &out->retry, &out->retry_len)) {
		out->retry = "";
		return true;
	}
	if (at <= n) {
		out->topics = b + at;
		out->topics_len = n - at;
	}
	return true;
}

bool mercure_block_next_topic(const char **p, const char *end, const char **t, size_t *tl)
{
	if (!*p || *p >= end)
		return false;
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	*t = *p;
	*tl = (size_t)((nl ? nl : end) - *p);
	*p = nl ? nl + 1 : end;
	return true;
}

/* u as a urn:uuid:, version v, the RFC 9562 variant. */
static char *uuid_text(unsigned char u[16], unsigned v)
{
	static const char hex[] = "0123456789abcdef";
	u[6] = (unsigned char)((u[6] & 0x0F) | (v << 4));
	u[8] = (unsigned char)((u[8] & 0x3F) | 0x80);
	char *s = xmalloc(46), *p = s;
	memcpy(p, "urn:uuid:", 9);
	p += 9;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex[u[i] >> 4];
		*p++ = hex[u[i] & 15];
	}
	*p = '\0';
	return s;
}

char *mercure_new_id(void)
{
	/* Version 7: 48 bits of milliseconds first (ids made one after
	 * another sort by time, which keeps the id index's inserts at its
	 * end), then random bits. */
	unsigned char u[16];
	random_bytes(u + 6, 10);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	for (int i = 0; i < 6; i++)
		u[i] = (unsigned char)(ms >> (40 - 8 * i));
	return uuid_text(u, 7);
}

char *mercure_keyed_id(const char *publisher, const char *key, const char *body_hash)
{
	char hex[IDEM_HEX_LEN], both[2 * IDEM_HEX_LEN + 2];
	idem_digest(publisher, strlen(publisher), key, strlen(key), hex);
	snprintf(both, sizeof(both), "%s:%s", hex, body_hash);
	idem_digest(both, strlen(both), NULL, 0, hex);
	unsigned char u[16];
	for (size_t i = 0; i < sizeof(u); i++)
		sscanf(hex + 2 * i, "%2hhx", &u[i]);
	return uuid_text(u, 8);
}
