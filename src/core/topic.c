/* SPDX-License-Identifier: BSD-2-Clause */
/* topic.c: topic patterns (topic.h). A pattern is an exact topic, "*", or
 * SUB(prefix), the prefix followed by "/" and "*"; the characters of a
 * topic are text_name_valid's (text.h). Everything here is pure and works
 * on bytes, with no allocation. */
#include "core/topic.h"

#include <stdlib.h>
#include <string.h>

#include "common/text.h"

#define TOPIC_PATTERN_MAX 128

/* Whether p[0..n) ends in "/" and "*" (a subtree pattern): its "prefix/"
 * part is then p[0..n-1). */
static bool is_prefix_pattern(const char *p, size_t n)
{
	return n >= 2 && p[n - 1] == '*' && p[n - 2] == '/';
}

static bool is_everything(const char *p, size_t n)
{
	return n == 1 && p[0] == '*';
}

bool topic_pattern_valid(const char *p, size_t n)
{
	if (n == 0 || n > TOPIC_PATTERN_MAX)
		return false;
	if (p[0] == '$') {
		/* herald's own topics: the rest is a topic or a subtree */
		p++;
		n--;
		if (n == 0 || p[0] == '*' || p[0] == '/')
			return false;
	}
	if (is_everything(p, n))
		return true;
	if (is_prefix_pattern(p, n))
		return n > 2 && text_name_valid(p, n - 2, true); /* a non-empty, valid prefix */
	return text_name_valid(p, n, true);
}

bool topic_pattern_match(const char *pattern, const char *topic, size_t n)
{
	size_t pn = strlen(pattern);
	if (is_everything(pattern, pn))
		return true;
	if (is_prefix_pattern(pattern, pn)) {
		size_t keep = pn - 1; /* "prefix/" */
		return n > keep && memcmp(topic, pattern, keep) == 0;
	}
	return n == pn && memcmp(topic, pattern, n) == 0;
}

bool topic_pattern_covers(const char *p, const char *q)
{
	size_t pn = strlen(p), qn = strlen(q);
	if (is_everything(p, pn))
		return true;
	if (is_everything(q, qn))
		return false;
	if (!is_prefix_pattern(p, pn))
		return pn == qn && memcmp(p, q, pn) == 0;
	if (!is_prefix_pattern(q, qn))
		return topic_pattern_match(p, q, qn);
	/* Both subtrees, SUB(P) and SUB(Q): every topic under "Q/" lies
	 * under "P/" exactly when "Q/" starts with "P/". */
	return qn >= pn && memcmp(q, p, pn - 1) == 0;
}

size_t topic_patterns_reduce(char **patterns, size_t n)
{
	size_t kept = 0;
	for (size_t i = 0; i < n; i++) {
		bool covered = false;
		/* By a pattern kept before it (equal ones included), or by a
		 * later one that is strictly wider. */
		for (size_t k = 0; k < kept && !covered; k++)
			covered = topic_pattern_covers(patterns[k], patterns[i]);
		for (size_t j = i + 1; j < n && !covered; j++)
			covered = topic_pattern_covers(patterns[j], patterns[i]) &&
				  !topic_pattern_covers(patterns[i], patterns[j]);
		if (covered)
			free(patterns[i]);
		else
			patterns[kept++] = patterns[i];
	}
	return kept;
}
