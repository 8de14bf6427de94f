/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_update.c: the block of a Mercure update's id, retry and topics
 * (see mercure_update.h). */
#include "store/mercure_update.h"

#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <time.h>

#include "common/util.h"

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
	if (!b || n == 0 || !next_line(b, n, &at, &out->id, &out->id_len))
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

static const char hex_digits[] = "0123456789abcdef";

/* u as a urn:uuid: into s (MERCURE_LOG_ID_LEN + 1 bytes), version v, the
 * RFC 9562 variant. */
static void uuid_text(unsigned char u[16], unsigned v, char *s)
{
	u[6] = (unsigned char)((u[6] & 0x0F) | (v << 4));
	u[8] = (unsigned char)((u[8] & 0x3F) | 0x80);
	char *p = s;
	memcpy(p, "urn:uuid:", 9);
	p += 9;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			*p++ = '-';
		*p++ = hex_digits[u[i] >> 4];
		*p++ = hex_digits[u[i] & 15];
	}
	*p = '\0';
}

char *mercure_new_id(void)
{
	/* Version 7: 48 bits of milliseconds first, then random bits. */
	unsigned char u[16];
	random_bytes(u + 6, 10);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	for (int i = 0; i < 6; i++)
		u[i] = (unsigned char)(ms >> (40 - 8 * i));
	char *s = xmalloc(MERCURE_LOG_ID_LEN + 1);
	uuid_text(u, 7, s);
	return s;
}

static uint64_t log_identity;

void mercure_log_identity_set(uint64_t identity)
{
	log_identity = identity & ((UINT64_C(1) << 48) - 1);
}

/* Version 8 (RFC 9562's custom bits): the identity in the first 48 bits,
 * then the number's top 12 bits beside the version and its low 62 beside
 * the variant. */
void mercure_log_id(int64_t n, char *buf)
{
	uint64_t v = (uint64_t)n;
	unsigned char u[16];
	for (int i = 0; i < 6; i++)
		u[i] = (unsigned char)(log_identity >> (40 - 8 * i));
	uint64_t high = v >> 62; /* at most 2 bits for a non-negative int64 */
	u[6] = (unsigned char)((high >> 8) & 0x0F);
	u[7] = (unsigned char)(high & 0xFF);
	u[8] = (unsigned char)((v >> 56) & 0x3F);
	for (int i = 9; i < 16; i++)
		u[i] = (unsigned char)(v >> (8 * (15 - i)));
	uuid_text(u, 8, buf);
}

static int hex_value(char c)
{
	const char *p = c ? strchr(hex_digits, c) : NULL;
	return p ? (int)(p - hex_digits) : -1;
}

bool mercure_log_id_parse(const char *id, size_t len, int64_t *n)
{
	if (len != MERCURE_LOG_ID_LEN || memcmp(id, "urn:uuid:", 9) != 0)
		return false;
	unsigned char u[16];
	const char *p = id + 9;
	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10) {
			if (*p++ != '-')
				return false;
		}
		int hi = hex_value(p[0]), lo = hex_value(p[1]);
		if (hi < 0 || lo < 0)
			return false;
		u[i] = (unsigned char)(hi << 4 | lo);
		p += 2;
	}
	uint64_t ident = 0;
	for (int i = 0; i < 6; i++)
		ident = ident << 8 | u[i];
	if (ident != log_identity || (u[6] >> 4) != 8 || (u[8] & 0xC0) != 0x80)
		return false;
	uint64_t high = (uint64_t)(u[6] & 0x0F) << 8 | u[7];
	if (high > 1) /* the number is an int64 of at most 63 bits */
		return false;
	uint64_t v = high << 62 | (uint64_t)(u[8] & 0x3F) << 56;
	for (int i = 9; i < 16; i++)
		v |= (uint64_t)u[i] << (8 * (15 - i));
	*n = (int64_t)v;
	return true;
}
