/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_topic.c: fuzz target for src/core/topic.c. The input is three lines: a
 * pattern p, a pattern q and a topic t (a missing line is empty).
 * Invariants:
 *   - topic_pattern_valid agrees with a reference written from the rule
 *     (at most one '*', and only as the whole pattern or after a final
 *     '/' with something before it; every other byte a topic byte; a
 *     leading '$' before a pattern that is not "*" nor starts with '/');
 *   - for a valid p, topic_pattern_match agrees with a reference that
 *     works on the pattern's segment text;
 *   - covers is reflexive; when p covers q, every topic q matches (t, and
 *     two topics built from q) p matches too; when it does not, one of
 *     those built topics tells them apart.
 * Over-reads are the sanitizers' (and the driver's guard page's).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "core/topic.h"

static bool topic_byte(unsigned char c)
{
	return strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:/-", c) && c != '\0';
}

static bool ref_valid(const char *p, size_t n)
{
	size_t stars = 0, at = 0;
	if (n < 1 || n > 128)
		return false;
	if (p[0] == '$') {
		/* herald's own topics: "$" then a pattern that is not "*" */
		p++;
		n--;
		if (n == 0 || p[0] == '*' || p[0] == '/')
			return false;
	}
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '*') {
			stars++;
			at = i;
		} else if (!topic_byte((unsigned char)p[i])) {
			return false;
		}
	}
	if (stars == 0)
		return true;
	if (stars > 1 || at != n - 1)
		return false;
	return n == 1 || (n >= 3 && p[n - 2] == '/');
}

/* The reference match: the text before the star, if any, must begin the
 * topic, and the star stands for at least one byte. */
static bool ref_match(const char *p, const char *t, size_t tn)
{
	const char *star = strchr(p, '*');
	if (!star)
		return strlen(p) == tn && memcmp(p, t, tn) == 0;
	size_t head = (size_t)(star - p);
	return (head == 0) || (tn > head && strncmp(p, t, head) == 0);
}

/* Copy s[0..n) into a new NUL-terminated string. */
static char *dup_n(const char *s, size_t n)
{
	char *c = malloc(n + 1);
	FUZZ_ASSERT(c != NULL);
	memcpy(c, s, n);
	c[n] = '\0';
	return c;
}

/* Topics q matches, built from q: with "x", and with "y/z", in place of
 * the star (or appended to nothing: q itself, for an exact q). */
static void witnesses(const char *q, char *w1, char *w2)
{
	size_t n = strlen(q);
	if (n && q[n - 1] == '*') {
		snprintf(w1, 200, "%.*sx", (int)(n - 1), q);
		snprintf(w2, 200, "%.*sy/z", (int)(n - 1), q);
	} else {
		snprintf(w1, 200, "%s", q);
		snprintf(w2, 200, "%s", q);
	}
}

static void check_pair(const char *p, const char *q, const char *t, size_t tn)
{
	char w1[200], w2[200];
	witnesses(q, w1, w2);
	FUZZ_ASSERT(topic_pattern_match(q, w1, strlen(w1)) && topic_pattern_match(q, w2, strlen(w2)));
	bool c = topic_pattern_covers(p, q);
	bool p1 = topic_pattern_match(p, w1, strlen(w1)), p2 = topic_pattern_match(p, w2, strlen(w2));
	if (c) {
		FUZZ_ASSERT(p1 && p2);
		FUZZ_ASSERT(!topic_pattern_match(q, t, tn) || topic_pattern_match(p, t, tn));
	} else {
		FUZZ_ASSERT(!p1 || !p2);
	}
}

int fuzz_one(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data, *end = s + size;
	const char *nl1 = memchr(s, '\n', size);
	const char *q = nl1 ? nl1 + 1 : end;
	const char *nl2 = nl1 ? memchr(q, '\n', (size_t)(end - q)) : NULL;
	const char *t = nl2 ? nl2 + 1 : end;
	size_t pn = (size_t)((nl1 ? nl1 : end) - s), qn = (size_t)((nl2 ? nl2 : end) - q), tn = (size_t)(end - t);

	bool pv = topic_pattern_valid(s, pn), qv = topic_pattern_valid(q, qn);
	FUZZ_ASSERT(pv == ref_valid(s, pn));
	FUZZ_ASSERT(qv == ref_valid(q, qn));
	if (!pv)
		return 0;
	char *p = dup_n(s, pn);
	FUZZ_ASSERT(topic_pattern_match(p, t, tn) == ref_match(p, t, tn));
	FUZZ_ASSERT(topic_pattern_covers(p, p));
	if (qv) {
		char *qq = dup_n(q, qn);
		check_pair(p, qq, t, tn);
		check_pair(qq, p, t, tn);
		free(qq);
	}
	free(p);
	return 0;
}
