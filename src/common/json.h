/* SPDX-License-Identifier: BSD-2-Clause */
/* json.h: the one JSON reader, for publish bodies and token parts. Strict
 * RFC 8259 (UTF-8 checked, containers nested at most JSON_MAX_DEPTH deep,
 * only space, tab, CR and LF as whitespace); a NUL byte and the escape
 * \u0000 are refused, since a C string ends there. Parsing allocates
 * nothing: a value is a slice of the caller's text, and the readers below
 * step over that text again. Pure functions, fuzzed (tests/fuzz/fuzz_json.c,
 * which compares every answer with SQLite's JSON functions).
 *
 * Where SQLite 3.40 reads a text otherwise, this reader follows RFC 8259: a
 * member name must be a string, where SQLite also took an array or object
 * whose last value is a string ({["a"]:1}) and then mangled the members. */
#ifndef HERALD_JSON_H
#define HERALD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 2000

/* A number is JSON_REAL when its text has a fraction or an exponent. */
enum json_type { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_INTEGER, JSON_REAL, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

/* A value: its JSON text p[0..n) inside the parsed text (a string with its
 * quotes). Valid while that text is; only json_parse and the readers below
 * make one. */
struct json_value {
	enum json_type type;
	const char *p;
	size_t n;
};

/* Why json_parse refused a text. When several apply, the first listed. */
enum json_error {
	JSON_OK = 0,
	JSON_NOT_UTF8 = -1,   /* not well-formed UTF-8 */
	JSON_NUL_BYTE = -2,   /* a NUL byte */
	JSON_NUL_ESCAPE = -3, /* \u0000 in a string (or, in a text that is not JSON, after a quote) */
	JSON_NOT_JSON = -4,   /* anything else that is not one JSON value */
};

/* Check text[0..n) and set *root to its value. Returns JSON_OK, or a
 * json_error with *root untouched. */
int json_parse(const char *text, size_t n, struct json_value *root);

/* The members of an object or the elements of an array, in text order. */
struct json_iter {
	const char *p, *end;
	bool object;
};

void json_iter_start(struct json_iter *it, const struct json_value *container);

/* The next member (*key is its name, a JSON_STRING) or element (*key is
 * left alone; key may be NULL). Returns false after the last. */
bool json_iter_next(struct json_iter *it, struct json_value *key, struct json_value *value);

/* The first member of object whose name, as written between its quotes
 * (escapes not decoded: "\u0061" is not "a"), is name[0..len). Returns
 * false when there is none or object is not a JSON_OBJECT. */
bool json_member(const struct json_value *object, const char *name, size_t len, struct json_value *out);

/* A JSON_INTEGER that fits in int64_t, in *out; false otherwise (a larger
 * one is read with json_double). "-0" is 0. */
bool json_int64(const struct json_value *v, int64_t *out);

/* A JSON_INTEGER or JSON_REAL as the nearest double (infinite past the
 * range); 0 for any other type. */
double json_double(const struct json_value *v);

/* Whether the JSON_STRING s, escapes decoded, is want[0..len). Allocates
 * nothing. */
bool json_string_is(const struct json_value *s, const char *want, size_t len);

/* A new NUL-terminated copy of the JSON_STRING s, escapes decoded (a lone
 * surrogate escape becomes its three-byte form), with its length in *len.
 * The caller frees it. */
char *json_string_dup(const struct json_value *s, size_t *len);

/* A new NUL-terminated copy of v's JSON text without insignificant
 * whitespace, with its length in *len; the caller frees it. A number that is
 * v itself is written anew: an integer in decimal ("-0" is "0"), anything
 * else as a double with 15 significant digits and always a point or an
 * exponent ("1e2" is "100.0"); numbers inside a container stay as written. */
char *json_compact(const struct json_value *v, size_t *len);

#endif
