/* SPDX-License-Identifier: BSD-2-Clause */
/* redis_url.c: the redis_url setting taken apart; see redis_url.h. No I/O,
 * no allocation: every field is bounded, and anything that does not fit is
 * an error, not a truncation. */
#include "redis/redis_url.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Copy n bytes of p into out (size cap), decoding %XX; false if it does not
 * fit, a % escape is broken, or the result holds a NUL. */
static int copy_decoded(char *out, size_t cap, const char *p, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		int c = (unsigned char)p[i];
		if (c == '%') {
			if (i + 2 >= n)
				return 0;
			int hi = hexval((unsigned char)p[i + 1]), lo = hexval((unsigned char)p[i + 2]);
			if (hi < 0 || lo < 0)
				return 0;
			c = hi * 16 + lo;
			i += 2;
		}
		if (c == 0 || o + 1 >= cap)
			return 0;
		out[o++] = (char)c;
	}
	out[o] = '\0';
	return 1;
}

/* A decimal number in [lo, hi] filling exactly p[0..n). */
static int parse_num(const char *p, size_t n, long lo, long hi, int *out)
{
	if (n == 0 || n > 9)
		return 0;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return 0;
		v = v * 10 + (p[i] - '0');
	}
	if (v < lo || v > hi)
		return 0;
	*out = (int)v;
	return 1;
}

static const char *parse_unix(const char *s, struct redis_url *out)
{
	const char *path = s + strlen("unix:");
	if (strncmp(path, "//", 2) == 0)
		path += 2; /* unix:///path */
	if (path[0] != '/')
		return "a unix socket is given by its absolute path: unix:/path/to/redis.sock";
	const char *q = strchr(path, '?');
	size_t n = q ? (size_t)(q - path) : strlen(path);
	if (n >= sizeof(out->path))
		return "the unix socket path is too long";
	memcpy(out->path, path, n);
	out->path[n] = '\0';
	if (q) {
		if (strncmp(q, "?db=", 4) != 0 || !parse_num(q + 4, strlen(q + 4), 0, 100000, &out->db))
			return "after the socket path only ?db=N (a database number) may follow";
	}
	return NULL;
}

const char *redis_url_parse(const char *s, struct redis_url *out)
{
	memset(out, 0, sizeof(*out));
	out->port = 6379;
	if (strlen(s) >= REDIS_URL_MAX)
		return "the address is too long";
	if (strncmp(s, "unix:", 5) == 0)
		return parse_unix(s, out);
	if (strncmp(s, "redis://", 8) != 0)
		return "expected redis://host[:port][/db] or unix:/path/to/redis.sock";
	const char *p = s + 8;
	const char *end = p + strcspn(p, "/");
	const char *at = NULL;
	for (const char *c = p; c < end; c++)
		if (*c == '@')
			at = c; /* the last @: a password may hold one percent-encoded only, but be kind */
	if (at) {
		const char *colon = memchr(p, ':', (size_t)(at - p));
		size_t ulen = colon ? (size_t)(colon - p) : (size_t)(at - p);
		if (!copy_decoded(out->user, sizeof(out->user), p, ulen))
			return "the user name is too long or badly percent-encoded";
		if (colon && !copy_decoded(out->password, sizeof(out->password), colon + 1, (size_t)(at - colon - 1)))
			return "the password is too long or badly percent-encoded";
		if (!colon) {
			/* redis://secret@host: a lone name is the password (AUTH with one argument). */
			snprintf(out->password, sizeof(out->password), "%s", out->user);
			out->user[0] = '\0';
		}
		p = at + 1;
	}
	const char *hend, *port = NULL;
	if (*p == '[') {
		const char *close = memchr(p, ']', (size_t)(end - p));
		if (!close)
			return "an IPv6 address in brackets lacks its ]";
		if ((size_t)(close - p - 1) >= sizeof(out->host) || close == p + 1)
			return "the host is empty or too long";
		memcpy(out->host, p + 1, (size_t)(close - p - 1));
		out->host[close - p - 1] = '\0';
		for (const char *c = out->host; *c; c++)
			if (!isalnum((unsigned char)*c) && *c != ':' && *c != '.' && *c != '%')
				return "an IPv6 address has only hex digits, : and . (and %zone)";
		if (!strchr(out->host, ':'))
			return "only an IPv6 address goes in brackets";
		hend = close + 1;
		if (hend < end && *hend != ':')
			return "after ] only :port may follow";
	} else {
		hend = memchr(p, ':', (size_t)(end - p));
		if (!hend)
			hend = end;
		if (hend == p || (size_t)(hend - p) >= sizeof(out->host))
			return "the host is empty or too long";
		memcpy(out->host, p, (size_t)(hend - p));
		out->host[hend - p] = '\0';
		for (const char *c = out->host; *c; c++)
			if (!isalnum((unsigned char)*c) && *c != '.' && *c != '-' && *c != '_')
				return "the host has a character no host name or address has";
	}
	if (hend < end && *hend == ':')
		port = hend + 1;
	if (port && !parse_num(port, (size_t)(end - port), 1, 65535, &out->port))
		return "the port is not a number from 1 to 65535";
	if (*end == '/' && end[1] && !parse_num(end + 1, strlen(end + 1), 0, 100000, &out->db))
		return "after the host only /db (a database number) may follow";
	return NULL;
}

void redis_url_redact(const char *s, char *buf, size_t len)
{
	const char *scheme_end = strstr(s, "://");
	const char *at = scheme_end ? strrchr(scheme_end, '@') : NULL;
	if (!at) {
		snprintf(buf, len, "%s", s);
		return;
	}
	const char *start = scheme_end + 3;
	const char *colon = memchr(start, ':', (size_t)(at - start));
	if (colon)
		snprintf(buf, len, "%.*s:***%s", (int)(colon - s), s, at);
	else
		snprintf(buf, len, "%.*s***%s", (int)(start - s), s, at);
}
