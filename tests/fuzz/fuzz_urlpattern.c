/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_urlpattern.c: fuzz target for src/mercure/urlpattern.c. The input is two
 * lines: a pattern p and a topic t (a missing line is empty).
 * Invariants:
 *   - compiling p either succeeds or gives a reason, and a compiled p
 *     is at most URLPATTERN_MAX_WIDTH wide and matches t and p's own text
 *     without fault in at most (width + 1) steps per byte of the resolved
 *     topic, counted by urlpattern_steps (work, not time: a case that does
 *     more fails, however fast the machine);
 *   - a pattern refused for a regular expression group holds a '(';
 *   - "/" and t as a path, with the pattern syntax's bytes escaped, is a
 *     pattern that matches that path (for a t of printable bytes), on the
 *     base's host and on another; "*" matches every relative t;
 *   - matching is deterministic.
 * Over-reads are the sanitizers' (and the driver's guard page's). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "mercure/urlpattern.h"

#define BASE "https://hub.example/.well-known/mercure"

/* t with the bytes that mean something in a pattern escaped, except '?'
 * and '#', which split a URL the same way in both. */
static char *escaped(const char *t, size_t n, size_t *len)
{
	char *out = malloc(2 * n + 1);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (strchr(":*{}()+\\", t[i]))
			out[k++] = '\\';
		out[k++] = t[i];
	}
	out[k] = '\0';
	*len = k;
	return out;
}

/* The most steps a match of a pattern of width w may take on a topic of
 * n bytes: (w + 1) per byte of the topic resolved against BASE, which adds
 * at most the base's scheme, host and port and its folder (or a "/"). */
static uint64_t bound(size_t w, size_t n)
{
	return (uint64_t)(w + 1) * (n + 2 * strlen(BASE) + 1);
}

static bool printable(const char *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
			return false;
	return true;
}

int fuzz_one(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	const char *nl = memchr(p, '\n', size);
	size_t pn = nl ? (size_t)(nl - p) : size;
	const char *t = nl ? nl + 1 : p + size;
	size_t tn = nl ? size - pn - 1 : 0;
	if (pn > URLPATTERN_MAX_LEN + 8 || tn > 2048)
		return 0;

	const char *why = NULL;
	struct urlpattern *up = urlpattern_new(p, pn, BASE, &why);
	if (!up) {
		FUZZ_ASSERT(why != NULL);
		if (strstr(why, "regular expression"))
			FUZZ_ASSERT(memchr(p, '(', pn) != NULL);
	} else {
		size_t w = urlpattern_width(up);
		FUZZ_ASSERT(w <= URLPATTERN_MAX_WIDTH);
		uint64_t before = urlpattern_steps();
		bool a = urlpattern_match(up, t, tn, BASE);
		FUZZ_ASSERT(urlpattern_steps() - before <= bound(w, tn));
		bool b = urlpattern_match(up, t, tn, BASE);
		FUZZ_ASSERT(a == b);
		before = urlpattern_steps();
		(void)urlpattern_match(up, p, pn, BASE);
		FUZZ_ASSERT(urlpattern_steps() - before <= bound(w, pn));
		urlpattern_free(up);
	}

	if (printable(t, tn) && !memchr(t, '?', tn) && !memchr(t, '#', tn)) {
		/* As a path of the base's host, and of another host. */
		for (int absolute = 0; absolute < 2; absolute++) {
			static const char host[] = "https://example.com/";
			size_t hn = absolute ? sizeof(host) - 1 : 1;
			char *topic = malloc(hn + tn + 1);
			memcpy(topic, absolute ? host : "/", hn);
			memcpy(topic + hn, t, tn);
			size_t en, n = hn + tn;
			char *e = escaped(topic + hn - 1, tn + 1, &en);
			char *pat = malloc(hn + en + 1);
			memcpy(pat, topic, hn - 1);
			memcpy(pat + hn - 1, e, en);
			size_t patn = hn - 1 + en;
			struct urlpattern *self = urlpattern_new(pat, patn, BASE, &why);
			if (patn <= URLPATTERN_MAX_LEN) {
				FUZZ_ASSERT(self != NULL);
				FUZZ_ASSERT(urlpattern_match(self, topic, n, BASE));
			}
			urlpattern_free(self);
			free(e);
			free(pat);
			free(topic);
		}
	}
	/* The path the namespace check judges: always absolute, never with
	 * the search or the hash. */
	char *path = urlpattern_topic_path(t, tn, BASE);
	FUZZ_ASSERT(path[0] == '/' && !strpbrk(path, "?#"));
	free(path);
	struct urlpattern *all = urlpattern_new("*", 1, BASE, &why);
	FUZZ_ASSERT(all != NULL);
	if (tn > 0 && t[0] != '/' && !memmem(t, tn, "://", 3))
		FUZZ_ASSERT(urlpattern_match(all, t, tn, BASE) || memchr(t, '?', tn) || memchr(t, '#', tn));
	urlpattern_free(all);
	return 0;
}
