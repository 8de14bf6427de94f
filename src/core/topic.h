/* SPDX-License-Identifier: BSD-2-Clause */
/* topic.h: topic patterns, as readers ask for them (?topic=) and as tokens
 * grant them (subscribe and publish claims): an exact topic; a subtree,
 * written as a prefix, "/" and "*", for every topic under prefix/ (at any
 * depth); or "*" alone for every topic. Pure functions, fuzzed. In the
 * comments below, SUB(p) stands for the subtree pattern of prefix p. */
#ifndef HERALD_TOPIC_H
#define HERALD_TOPIC_H

#include <stdbool.h>
#include <stddef.h>

/* Whether p[0..n) is a valid pattern: 1 to 128 bytes of the topic
 * characters (letters, digits and _ . : / -), where '*' may appear only as
 * the whole pattern or as the last segment after a '/' (SUB(a/b)). A
 * leading '$' names herald's own topics ("$presence/room/1", presence.h):
 * readers may ask for them and tokens grant them, but no publisher can
 * write one, since a published topic is checked by text_name_valid. */
bool topic_pattern_valid(const char *p, size_t n);

/* Whether topic[0..n) matches the (valid) NUL-terminated pattern: equal to
 * it; or, for SUB(prefix), starting with "prefix/" and longer than that
 * (SUB(a) matches "a/b" and "a/b/c", not "a", "a/" or "ab/c"); or any topic
 * for "*". */
bool topic_pattern_match(const char *pattern, const char *topic, size_t n);

/* Whether every topic pattern q matches is also matched by p (p covers q):
 * used to check that a reader's ?topic= stays within its rights. */
bool topic_pattern_covers(const char *p, const char *q);

/* Reduce a list of (valid, heap-allocated) patterns to the fewest that
 * match the same topics: a pattern another one covers is freed and removed
 * (of equal ones, the first stays), the rest keep their order. Returns the
 * new count. Two patterns either match disjoint sets or one covers the
 * other, so what stays never overlaps: every read by these patterns, in
 * SQL, in the topic index or in memory, visits a row once per pattern at
 * most, and a repeated pattern costs nothing. */
size_t topic_patterns_reduce(char **patterns, size_t n);

#endif
