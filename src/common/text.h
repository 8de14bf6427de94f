/* SPDX-License-Identifier: BSD-2-Clause */
/* text.h: byte-level checks of request text: UTF-8 validity, and NUL
 * escapes inside JSON strings (json.c names a refused text's cause with
 * them); the characters allowed in event types and topics; and what a
 * message says of a name it refuses: the name escaped, and the known name
 * nearest to it ("did you mean"). Pure functions, fuzzed
 * (tests/fuzz/fuzz_text.c). */
#ifndef HERALD_TEXT_H
#define HERALD_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s[0..n) is well-formed UTF-8: no overlong forms, no surrogates,
 * nothing above U+10FFFF, no truncated sequence. */
bool text_utf8_valid(const unsigned char *s, size_t n);

/* Whether a JSON string in b[0..n) holds the escape \u0000. Bytes outside
 * strings and other escapes are stepped over; the input need not be valid
 * JSON. */
bool text_json_escapes_nul(const char *b, size_t n);

/* Whether s[0..n) is a valid event name: letters, digits and _ . : -, and
 * with slash also '/' (topics). One rule for publishes and stream filters. */
bool text_name_valid(const char *s, size_t n, bool slash);

/* Names longer than this are never near another (text_distance). */
#define TEXT_DISTANCE_MAX 64

/* The edit distance between the strings a and b: the fewest insertions,
 * deletions and changes of one byte, and swaps of two neighbouring bytes,
 * that turn one into the other. A distance above limit is given as
 * limit + 1 (found without the whole work), as is any distance from a
 * string longer than TEXT_DISTANCE_MAX bytes. */
size_t text_distance(const char *a, const char *b, size_t limit);

/* The one of the n choices (in lower case) nearest to word, letter case
 * aside, when it is near enough to be a slip of the keyboard: within a
 * third of the choice's length, at least 1, at most 3. The first of the
 * nearest on a tie; NULL when none is near enough. */
const char *text_nearest(const char *word, const char *const *choices, size_t n);

/* " (did you mean Q<choice>Q?)", Q being quote ("" for none), for the
 * choice text_nearest finds for word; "" when none is near. Returns buf. */
const char *text_did_you_mean(const char *word, const char *const *choices, size_t n, const char *quote, char *buf,
			      size_t len);

/* v for a one-line message: control bytes as \xNN, quotes and backslashes
 * behind a backslash, cut to fit len (at least 1) bytes with its NUL.
 * Returns buf. */
const char *text_escape(const char *v, char *buf, size_t len);

/* s[0..n) as a refusal may quote it, into buf (len > 4): printable ASCII
 * kept, '"', '\\' and every other byte as '?', cut with "..." when it
 * does not fit. Returns buf. */
char *text_shown(const char *s, size_t n, char *buf, size_t len);

#endif
