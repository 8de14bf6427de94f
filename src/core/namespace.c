/* SPDX-License-Identifier: BSD-2-Clause */
/* namespace.c: the namespace table (namespace.h): adding sections, finding
 * a topic's namespace by the longest matching pattern, and whether a
 * reader's pattern reaches into one. */
#include "core/namespace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "core/topic.h"

struct namespace *namespaces_add(struct namespaces *t, const char *pattern, const char *origin)
{
	if (t->n == NAMESPACE_MAX)
		return NULL;
	struct namespace *ns = &t->ns[t->n++];
	*ns = (struct namespace){ .pattern = xstrdup(pattern),
				  .origin = xstrdup(origin),
				  .retention_count = NS_INHERIT,
				  .retention_age_s = NS_INHERIT,
				  .anonymous = NS_INHERIT,
				  .publish_token = NS_INHERIT,
				  .presence = NS_INHERIT,
				  .presence_events = NS_INHERIT,
				  .mercure = NS_INHERIT,
				  .max_readers = NS_INHERIT };
	return ns;
}

struct namespace *namespaces_named(struct namespaces *t, const char *pattern)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->ns[i].pattern, pattern) == 0)
			return &t->ns[i];
	return NULL;
}

int namespace_of(const struct namespaces *t, const char *topic, size_t n)
{
	int best = -1;
	size_t best_len = 0;
	for (size_t i = 0; i < t->n; i++) {
		size_t len = strlen(t->ns[i].pattern);
		if (len > best_len && topic_pattern_match(t->ns[i].pattern, topic, n)) {
			best = (int)i;
			best_len = len;
		}
	}
	return best;
}

/* Whether some namespace more specific than one of len bytes (0: the
 * defaults) takes every topic pattern matches. */
static bool taken_deeper(const struct namespaces *t, size_t len, const char *pattern)
{
	for (size_t j = 0; j < t->n; j++)
		if (strlen(t->ns[j].pattern) > len && topic_pattern_covers(t->ns[j].pattern, pattern))
			return true;
	return false;
}

bool namespace_touches(const struct namespaces *t, int i, const char *pattern)
{
	if (i < 0)
		return !taken_deeper(t, 0, pattern);
	const char *p = t->ns[i].pattern;
	if (!topic_pattern_covers(pattern, p) && !topic_pattern_covers(p, pattern))
		return false;
	return !taken_deeper(t, strlen(p), pattern);
}

bool namespace_reached(const struct namespaces *t, int i, char *const *patterns, size_t n)
{
	if (n == 0)
		return true; /* every topic reaches every namespace */
	for (size_t k = 0; k < n; k++)
		if (namespace_touches(t, i, patterns[k]))
			return true;
	return false;
}

void namespace_inherit(struct namespace *ns, const struct namespace *d)
{
	int64_t *nums[] = { &ns->retention_count, &ns->retention_age_s, &ns->max_readers };
	const int64_t dnums[] = { d->retention_count, d->retention_age_s, d->max_readers };
	for (size_t i = 0; i < ARRAY_LEN(nums); i++)
		if (*nums[i] == NS_INHERIT)
			*nums[i] = dnums[i];
	int *sw[] = { &ns->anonymous, &ns->publish_token, &ns->presence, &ns->presence_events, &ns->mercure };
	const int dsw[] = { d->anonymous, d->publish_token, d->presence, d->presence_events, d->mercure };
	for (size_t i = 0; i < ARRAY_LEN(sw); i++)
		if (*sw[i] == NS_INHERIT)
			*sw[i] = dsw[i];
	if (!ns->auth_request && d->auth_request)
		ns->auth_request = xstrdup(d->auth_request);
	if (!ns->webhook_url && d->webhook_url)
		ns->webhook_url = xstrdup(d->webhook_url);
}

/* Appends to out (cap bytes) at *at, counting what did not fit. */
static void put(char *out, size_t cap, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void put(char *out, size_t cap, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(*at < cap ? out + *at : NULL, *at < cap ? cap - *at : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at += (size_t)n;
}

size_t namespaces_json(const struct namespaces *t, char *out, size_t cap)
{
	size_t at = 0;
	if (cap)
		out[0] = '\0';
	put(out, cap, &at, "[");
	for (size_t i = 0; i < t->n; i++) {
		const struct namespace *ns = &t->ns[i];
		/* Patterns are topic characters only: nothing to escape. */
		put(out, cap, &at,
		    "%s{\"pattern\":\"%s\",\"retention_count\":%lld,\"retention_age_s\":%lld,\"anonymous\":%s,"
		    "\"publish_needs_token\":%s,\"presence\":%s,\"presence_events\":%s,\"max_readers\":%lld,"
		    "\"mercure\":%s,\"auth_request\":%s,\"webhook\":%s}",
		    i ? "," : "", ns->pattern, (long long)ns->retention_count, (long long)ns->retention_age_s,
		    ns->anonymous ? "true" : "false", ns->publish_token ? "true" : "false",
		    ns->presence ? "true" : "false", ns->presence_events ? "true" : "false", (long long)ns->max_readers,
		    ns->mercure ? "true" : "false", ns->auth_request && ns->auth_request[0] ? "true" : "false",
		    ns->webhook_url && ns->webhook_url[0] ? "true" : "false");
	}
	put(out, cap, &at, "]");
	return at;
}

void namespaces_free(struct namespaces *t)
{
	for (size_t i = 0; i < t->n; i++) {
		struct namespace *ns = &t->ns[i];
		free(ns->pattern);
		free(ns->origin);
		free(ns->auth_request);
		free(ns->webhook_url);
	}
	t->n = 0;
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

void namespaces_copy(struct namespaces *dst, const struct namespaces *src)
{
	namespaces_free(dst);
	for (size_t i = 0; i < src->n; i++) {
		struct namespace *d = &dst->ns[i];
		*d = src->ns[i];
		d->pattern = xstrdup(src->ns[i].pattern);
		d->origin = xstrdup(src->ns[i].origin);
		d->auth_request = dup_or_null(src->ns[i].auth_request);
		d->webhook_url = dup_or_null(src->ns[i].webhook_url);
	}
	dst->n = src->n;
}

bool namespaces_same_patterns(const struct namespaces *a, const struct namespaces *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->ns[i].pattern, b->ns[i].pattern) != 0)
			return false;
	return true;
}
