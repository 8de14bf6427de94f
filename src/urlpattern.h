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
 * anything. Each component compiles to a small program run as a Thompson
 * simulation, so a match costs O(pattern x topic) steps, never
 * backtracking. Hosts and schemes compare case-insensitively, the rest
 * byte for byte. Pure, no I/O; fuzzed. */
#ifndef HERALD_URLPATTERN_H
#define HERALD_URLPATTERN_H

#include <stdbool.h>
#include <stddef.h>

#define URLPATTERN_MAX_LEN 1024   /* the longest pattern taken */
#define URLPATTERN_TOPIC_MAX 4096 /* a longer topic never matches */

struct urlpattern;

/* Compile pattern[0..n), resolving a relative one against base (an
 * absolute URL, NUL-terminated). Returns the pattern (the caller frees it
 * with urlpattern_free), or NULL with *why a static reason (a regular
 * expression group, a nested or unclosed group, a name missing after ':',
 * too long). */
struct urlpattern *urlpattern_new(const char *pattern, size_t n, const char *base, const char **why);
void urlpattern_free(struct urlpattern *p);

/* Whether topic[0..n), resolved against base, matches p. */
bool urlpattern_match(const struct urlpattern *p, const char *topic, size_t n, const char *base);

/* The path of topic[0..n) resolved against base exactly as
 * urlpattern_match resolves it (a relative topic joined to base's folder,
 * no dot segment removed, no escape decoded): a new string the caller
 * frees. The hub's namespace check (mercure.c) judges this path, so what
 * it lets through no pattern on that namespace matches. */
char *urlpattern_topic_path(const char *topic, size_t n, const char *base);

#endif
