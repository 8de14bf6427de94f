/* text.h: byte-level checks of request text: UTF-8 validity, and NUL
 * escapes inside JSON strings (json.c names a refused text's cause with
 * them); and the characters allowed in event types and topics. Pure
 * functions, fuzzed (tests/fuzz/fuzz_text.c). */
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

/* s[0..n) as a refusal may quote it, into buf (len > 4): printable ASCII
 * kept, '"', '\\' and every other byte as '?', cut with "..." when it
 * does not fit. Returns buf. */
char *text_shown(const char *s, size_t n, char *buf, size_t len);

#endif
