/* SPDX-License-Identifier: BSD-2-Clause */
/* urlpattern.h: URL patterns (the URL Pattern standard's syntax) matched
 * against topics, for the Mercure endpoint's urlpattern matchers. What is
 * supported: a pattern is split into protocol, hostname, port, pathname,
 * search and hash; in each, literal text, named groups ":name" (one or
 * more characters up to the component's delimiter: "/" in the pathname,
 * "." in the hostname, none elsewhere), the wildcard "*" (any text), groups
 * "{...}" and the modifiers "?", "*" and "+" after a name, a wildcard or a
 * group (in the pathname a "/" just before a modified name or wildcard
 * belongs to it: "/books/:id?" matches "/books"), and "\" escapes. Regular
 * expression groups "(...)" are refused, as is a group inside a group.
 * A relative pattern or topic is resolved against a base URL (the hub's);
 * a component the pattern leaves out after the last one given matches
 * anything. Hosts and schemes compare case-insensitively, the rest byte
 * for byte. Pure, no I/O; fuzzed.
 *
 * Cost. A pattern's width is the number of its positions after each
 * component's literal prefix (every :name, every *, and every literal byte
 * that follows the first of them) plus its groups with a modifier, over
 * all components; a component left out or given as "*" alone counts
 * nothing. A pattern wider than URLPATTERN_MAX_WIDTH is refused when it is
 * compiled. Matching a topic of n bytes (after resolution) then costs at
 * most n * (width + 1) steps (urlpattern_steps counts them): each byte
 * visits each live position once, never backtracking, with no
 * allocation. */
#ifndef HERALD_URLPATTERN_H
#define HERALD_URLPATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define URLPATTERN_MAX_LEN 1024   /* the longest pattern taken */
#define URLPATTERN_MAX_WIDTH 64   /* the widest pattern taken (above) */
#define URLPATTERN_TOPIC_MAX 4096 /* a longer topic never matches */

struct urlpattern;

/* Compile pattern[0..n), resolving a relative one against base (an
 * absolute URL, NUL-terminated). Returns the pattern (the caller frees it
 * with urlpattern_free), or NULL with *why a static reason (a regular
 * expression group, a nested or unclosed group, a name missing after ':',
 * too long, too wide). */
struct urlpattern *urlpattern_new(const char *pattern, size_t n, const char *base, const char **why);
void urlpattern_free(struct urlpattern *p);

/* p's width (above): at most URLPATTERN_MAX_WIDTH. */
size_t urlpattern_width(const struct urlpattern *p);

/* The literal prefix of p's pathname (resolved, so it starts with '/'
 * unless the path starts with a name, wildcard or modified group): every
 * topic p matches has a pathname that starts with it. Owned by p. */
const char *urlpattern_path_prefix(const struct urlpattern *p, size_t *len);

/* A topic taken apart into components once, for matching it against
 * several patterns. The texts are owned (urlpattern_url_free). */
struct urlpattern_url {
	char *text[6]; /* protocol, hostname, port, pathname, search, hash */
	size_t len[6];
	bool too_long; /* past URLPATTERN_TOPIC_MAX: matches nothing */
};
void urlpattern_url_parse(struct urlpattern_url *u, const char *topic, size_t n, const char *base);
void urlpattern_url_free(struct urlpattern_url *u);

/* u's pathname (resolved against the base given to urlpattern_url_parse). */
const char *urlpattern_url_path(const struct urlpattern_url *u, size_t *len);

/* Whether u matches p. */
bool urlpattern_match_url(const struct urlpattern *p, const struct urlpattern_url *u);

/* Whether topic[0..n), resolved against base, matches p. */
bool urlpattern_match(const struct urlpattern *p, const char *topic, size_t n, const char *base);

/* The path of topic[0..n) resolved against base exactly as
 * urlpattern_match resolves it (a relative topic joined to base's folder,
 * no dot segment removed, no escape decoded): a new string the caller
 * frees. The hub's namespace check (mercure.c) judges this path, so what
 * it lets through no pattern on that namespace matches. */
char *urlpattern_topic_path(const char *topic, size_t n, const char *base);

/* The steps every match has taken so far (above), for tests and fuzzing:
 * deterministic, unlike a clock. */
uint64_t urlpattern_steps(void);

#endif
