/* SPDX-License-Identifier: BSD-2-Clause */
/* cors.c: allow_origin as a list, and the headers it decides. */
#include "http/cors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

void cors_free(struct cors *c)
{
	for (size_t i = 0; i < c->n; i++)
		free(c->origins[i]);
	free(c->origins);
	memset(c, 0, sizeof(*c));
}

void cors_set(struct cors *c, const char *list)
{
	cors_free(c);
	if (strcmp(list, "*") == 0) {
		c->any = true;
		return;
	}
	for (const char *p = list; *p;) {
		p += strspn(p, " ");
		size_t n = strcspn(p, ","), len = n;
		while (len && p[len - 1] == ' ')
			len--;
		if (len) {
			c->origins = xrealloc(c->origins, (c->n + 1) * sizeof(*c->origins));
			c->origins[c->n++] = xstrndup(p, len);
		}
		p += n;
		if (*p == ',')
			p++;
	}
}

bool cors_listed(const struct cors *c, const char *origin, size_t n)
{
	for (size_t i = 0; origin && i < c->n; i++)
		if (strlen(c->origins[i]) == n && memcmp(c->origins[i], origin, n) == 0)
			return true;
	return false;
}

const char *cors_allow(const struct cors *c, const char *origin, size_t n)
{
	for (size_t i = 0; origin && i < c->n; i++)
		if (strlen(c->origins[i]) == n && memcmp(c->origins[i], origin, n) == 0)
			return c->origins[i];
	return c->any ? "*" : NULL;
}

bool cors_fields(const struct cors *c, const char *origin, size_t n, struct http_head *h)
{
	const char *allow = origin ? cors_allow(c, origin, n) : NULL;
	if (!allow)
		return false;
	http_head_add(h, "Access-Control-Allow-Origin", allow);
	if (strcmp(allow, "*") != 0) {
		http_head_add(h, "Access-Control-Allow-Credentials", "true");
		http_head_add(h, "Vary", "Origin");
	}
	return true;
}
