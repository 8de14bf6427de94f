/* SPDX-License-Identifier: BSD-2-Clause */
/* test_json.c: the JSON reader (src/common/json.c), every input placed to end at a
 * PROT_NONE guard page:
 *   - json_parse: RFC 8259 texts accepted, with the root's type and extent;
 *     each refusal and its order (UTF-8, NUL byte, \u0000, the rest):
 *     numbers, literals, escapes, control characters, whitespace other
 *     than RFC 8259's, commas and colons, trailing text, depth 2000 and 2001;
 *   - iteration over members and elements, nested values skipped whole;
 *   - json_member: the first of equal names, names compared as written;
 *   - json_int64 at the int64 limits, json_double, json_string_is and
 *     json_string_dup (escapes, surrogate pairs, lone surrogates), and
 *     json_compact (whitespace dropped, numbers written anew). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "guard.h"
#include "common/json.h"

static int parse(const char *s, struct json_value *root)
{
	return json_parse(guarded(s, strlen(s)), strlen(s), root);
}

/* The error json_parse gives s (JSON_OK when it accepts it). */
static int verdict(const char *s)
{
	struct json_value root;
	return parse(s, &root);
}

/* s accepted with root type t and root text want. */
static bool root_is(const char *s, enum json_type t, const char *want)
{
	struct json_value root;
	return parse(s, &root) == JSON_OK && root.type == t && root.n == strlen(want) &&
	       memcmp(root.p, want, root.n) == 0;
}

static void test_accepts(void)
{
	CHECK(root_is("{}", JSON_OBJECT, "{}"));
	CHECK(root_is(" \t\r\n[ ] \n", JSON_ARRAY, "[ ]"));
	CHECK(root_is("{\"a\" : [1, {\"b\": null}], \"c\":\"\"}", JSON_OBJECT,
		      "{\"a\" : [1, {\"b\": null}], \"c\":\"\"}"));
	CHECK(root_is("true", JSON_TRUE, "true"));
	CHECK(root_is("false ", JSON_FALSE, "false"));
	CHECK(root_is(" null", JSON_NULL, "null"));
	CHECK(root_is("0", JSON_INTEGER, "0"));
	CHECK(root_is("-0", JSON_INTEGER, "-0"));
	CHECK(root_is("-12", JSON_INTEGER, "-12"));
	CHECK(root_is("1.5", JSON_REAL, "1.5"));
	CHECK(root_is("1e5", JSON_REAL, "1e5"));
	CHECK(root_is("-0.0E+2", JSON_REAL, "-0.0E+2"));
	CHECK(root_is("1e-2", JSON_REAL, "1e-2"));
	CHECK(root_is("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"", JSON_STRING,
		      "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\""));
	CHECK(root_is("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", JSON_STRING, "\"caf\xc3\xa9 \xf0\x9f\x98\x80\""));
	CHECK(root_is("\"\\ud800\"", JSON_STRING, "\"\\ud800\"")); /* RFC 8259 allows a lone one */
}

static void test_refusals(void)
{
	static const char *const not_json[] = {
		"",
		" ",
		"{",
		"}",
		"[1,]",
		"[,1]",
		"[1 2]",
		"{\"a\":1,}",
		"{\"a\" 1}",
		"{\"a\"}",
		"{1:2}",
		"{\"a\":1}}",
		"[1]]",
		"[1] [2]",
		"01",
		"-01",
		"00",
		"1.",
		".5",
		"-",
		"-.5",
		"+1",
		"1e",
		"1e+",
		"1.5.3",
		"1e5.3",
		"0x10",
		"Infinity",
		"NaN",
		"tru",
		"truex",
		"nul",
		"[true false]",
		"\"abc",
		"\"\\x\"",
		"\"\\u12\"",
		"\"\\u12g4\"",
		"\"\\\"",
		"\"a\tb\"",
		"\"a\nb\"",
		"'a'",
		"[1,2",
		"\x0c[1]",
		"\x0b[1]",
		"[1]\x0c",
		"/*c*/1",
		"{\"a\":1 /* c */}",
		"{[\"a\"]:1}",
		"{{\"x\":\"a\"}:1}", /* names are strings, whatever SQLite 3.40 took */
	};
	for (size_t i = 0; i < sizeof(not_json) / sizeof(not_json[0]); i++) {
		int r = verdict(not_json[i]);
		if (r != JSON_NOT_JSON)
			fprintf(stderr, "  input %zu: \"%s\": %d\n", i, not_json[i], r);
		CHECK_EQ_INT(r, JSON_NOT_JSON);
	}
	/* The causes in their order: UTF-8, NUL byte, \u0000, the rest. */
	CHECK_EQ_INT(verdict("{\"a\":\"\xff\"}"), JSON_NOT_UTF8);
	CHECK_EQ_INT(verdict("\"\xc0\xaf\""), JSON_NOT_UTF8);       /* overlong */
	CHECK_EQ_INT(verdict("\"\xed\xa0\x80\""), JSON_NOT_UTF8);   /* a surrogate's bytes */
	CHECK_EQ_INT(verdict("\"\xe2\x82\""), JSON_NOT_UTF8);       /* truncated */
	CHECK_EQ_INT(verdict("[\"\\u0000\", \xff"), JSON_NOT_UTF8); /* before anything else */
	CHECK_EQ_INT(verdict("{\"a\":\"\\u0000\"}"), JSON_NUL_ESCAPE);
	CHECK_EQ_INT(verdict("{\"\\u0000\":1}"), JSON_NUL_ESCAPE);
	CHECK_EQ_INT(verdict("[\"\\u0000"), JSON_NUL_ESCAPE); /* not JSON, but \u0000 is named first */
	CHECK_EQ_INT(verdict("[\"\\\\u0000\"]"), JSON_OK);    /* an escaped backslash, then text */
	CHECK_EQ_INT(verdict("[\"\\u00000\"]"), JSON_NUL_ESCAPE);
	struct json_value root;
	const char nul[] = "[\"a\0\"]";
	CHECK_EQ_INT(json_parse(guarded(nul, sizeof(nul) - 1), sizeof(nul) - 1, &root), JSON_NUL_BYTE);
	const char nul_escape[] = "[\"\\u0000\", \"\0\"]";
	CHECK_EQ_INT(json_parse(guarded(nul_escape, sizeof(nul_escape) - 1), sizeof(nul_escape) - 1, &root),
		     JSON_NUL_BYTE);
}

/* n nested arrays, or objects each holding the next as "a". */
static char *nested(size_t n, bool objects)
{
	char *s = malloc(n * 6 + 2), *w = s;
	for (size_t i = 0; i < n; i++)
		w += objects ? (size_t)sprintf(w, "{\"a\":") : (size_t)sprintf(w, "[");
	if (objects)
		*w++ = '1';
	for (size_t i = 0; i < n; i++)
		*w++ = objects ? '}' : ']';
	*w = '\0';
	return s;
}

static void test_depth(void)
{
	for (int objects = 0; objects < 2; objects++) {
		char *ok = nested(JSON_MAX_DEPTH, objects), *deep = nested(JSON_MAX_DEPTH + 1, objects);
		CHECK_EQ_INT(verdict(ok), JSON_OK);
		CHECK_EQ_INT(verdict(deep), JSON_NOT_JSON);
		free(ok);
		free(deep);
	}
	/* Depth counts open containers, not values seen: a long flat list is fine. */
	char *flat = malloc(3 * 5000 + 3), *w = flat;
	*w++ = '[';
	for (int i = 0; i < 5000; i++)
		w += sprintf(w, "%s[]", i ? "," : "");
	strcpy(w, "]");
	CHECK_EQ_INT(verdict(flat), JSON_OK);
	free(flat);
}

static bool text_is(const struct json_value *v, const char *want)
{
	return v->n == strlen(want) && memcmp(v->p, want, v->n) == 0;
}

static void test_iteration(void)
{
	struct json_value root, key, v;
	struct json_iter it;
	CHECK_EQ_INT(parse(" { \"a\" : [1, [2, \"]\"]] , \"b\\\"\":{\"c\":{}} ,\"d\":-1.5e3,\"e\":\"x,}\" } ", &root),
		     JSON_OK);
	json_iter_start(&it, &root);
	CHECK(json_iter_next(&it, &key, &v) && text_is(&key, "\"a\"") && v.type == JSON_ARRAY &&
	      text_is(&v, "[1, [2, \"]\"]]"));
	struct json_iter inner;
	struct json_value e;
	json_iter_start(&inner, &v);
	CHECK(json_iter_next(&inner, NULL, &e) && e.type == JSON_INTEGER && text_is(&e, "1"));
	CHECK(json_iter_next(&inner, NULL, &e) && e.type == JSON_ARRAY && text_is(&e, "[2, \"]\"]"));
	CHECK(!json_iter_next(&inner, NULL, &e));
	CHECK(json_iter_next(&it, &key, &v) && text_is(&key, "\"b\\\"\"") && v.type == JSON_OBJECT &&
	      text_is(&v, "{\"c\":{}}"));
	CHECK(json_iter_next(&it, &key, &v) && text_is(&key, "\"d\"") && v.type == JSON_REAL && text_is(&v, "-1.5e3"));
	CHECK(json_iter_next(&it, &key, &v) && text_is(&key, "\"e\"") && v.type == JSON_STRING &&
	      text_is(&v, "\"x,}\""));
	CHECK(!json_iter_next(&it, &key, &v));
	CHECK(!json_iter_next(&it, &key, &v));

	CHECK_EQ_INT(parse("[ ]", &root), JSON_OK);
	json_iter_start(&it, &root);
	CHECK(!json_iter_next(&it, NULL, &v));
	CHECK_EQ_INT(parse("7", &root), JSON_OK); /* a scalar has no members */
	json_iter_start(&it, &root);
	CHECK(!json_iter_next(&it, NULL, &v));
}

static void test_member(void)
{
	struct json_value root, v;
	CHECK_EQ_INT(parse("{\"exp\":1,\"exp\":2,\"\\u0065xp2\":3,\"m\":{\"s\":\"x\"},\"\":4}", &root), JSON_OK);
	CHECK(json_member(&root, "exp", 3, &v) && text_is(&v, "1")); /* the first */
	CHECK(!json_member(&root, "exp2", 4, &v));                   /* compared as written */
	CHECK(json_member(&root, "\\u0065xp2", 9, &v) && text_is(&v, "3"));
	CHECK(json_member(&root, "m", 1, &v) && v.type == JSON_OBJECT);
	CHECK(json_member(&v, "s", 1, &v) && v.type == JSON_STRING && text_is(&v, "\"x\""));
	CHECK(!json_member(&v, "s", 1, &v)); /* a string has no members */
	CHECK(json_member(&root, "", 0, &v) && text_is(&v, "4"));
	CHECK(!json_member(&root, "ex", 2, &v));
	CHECK_EQ_INT(parse("[{\"a\":1}]", &root), JSON_OK);
	CHECK(!json_member(&root, "a", 1, &v));
}

/* The root of s read by json_int64. */
static bool int_is(const char *s, int64_t want)
{
	struct json_value root;
	int64_t i;
	return parse(s, &root) == JSON_OK && json_int64(&root, &i) && i == want;
}

static bool int_refused(const char *s)
{
	struct json_value root;
	int64_t i;
	return parse(s, &root) == JSON_OK && !json_int64(&root, &i);
}

static double double_of(const char *s)
{
	struct json_value root;
	return parse(s, &root) == JSON_OK ? json_double(&root) : -42;
}

static void test_numbers(void)
{
	CHECK(int_is("0", 0));
	CHECK(int_is("-0", 0));
	CHECK(int_is("1767225600", INT64_C(1767225600)));
	CHECK(int_is("9223372036854775807", INT64_MAX));
	CHECK(int_is("-9223372036854775808", INT64_MIN));
	CHECK(int_refused("9223372036854775808"));
	CHECK(int_refused("-9223372036854775809"));
	CHECK(int_refused("10000000000000000000"));
	CHECK(int_refused("1e2")); /* a real, however whole */
	CHECK(int_refused("\"1\""));
	CHECK(double_of("1.5") == 1.5);
	CHECK(double_of("1e2") == 100.0);
	CHECK(double_of("-2.5E-1") == -0.25);
	CHECK(double_of("9223372036854775808") == 9223372036854775808.0);
	CHECK(double_of("1e999") > 1e308);
	CHECK(double_of("\"1\"") == 0);
	/* A number longer than the reader's own buffer. */
	char long_num[200];
	memset(long_num, '1', sizeof(long_num) - 3);
	strcpy(long_num + sizeof(long_num) - 3, ".5");
	CHECK(double_of(long_num) > 1e196);
}

/* The string root of s decoded is want[0..len). */
static bool decodes_to(const char *s, const char *want, size_t len)
{
	struct json_value root;
	size_t n;
	if (parse(s, &root) != JSON_OK)
		return false;
	char *d = json_string_dup(&root, &n);
	bool ok = n == len && memcmp(d, want, len) == 0 && d[n] == '\0' && json_string_is(&root, want, len);
	free(d);
	return ok;
}

static void test_strings(void)
{
	CHECK(decodes_to("\"\"", "", 0));
	CHECK(decodes_to("\"plain\"", "plain", 5));
	CHECK(decodes_to("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\/\b\f\n\r\t", 8));
	CHECK(decodes_to("\"\\u0041\\u00e9\\u20AC\"", "A\xc3\xa9\xe2\x82\xac", 6));
	CHECK(decodes_to("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4));
	CHECK(decodes_to("\"\\uDBFF\\uDFFF!\"", "\xf4\x8f\xbf\xbf!", 5));
	/* Lone surrogates keep their three-byte form, as SQLite wrote them. */
	CHECK(decodes_to("\"\\ud83d\"", "\xed\xa0\xbd", 3));
	CHECK(decodes_to("\"\\ud83dx\\ude00\"", "\xed\xa0\xbdx\xed\xb8\x80", 7));
	CHECK(decodes_to("\"\\udc00\\ud800\"", "\xed\xb0\x80\xed\xa0\x80", 6));
	CHECK(decodes_to("\"\\ud83d\\u0041\"",
			 "\xed\xa0\xbd"
			 "A",
			 4));
	CHECK(decodes_to("\"\\ud83d\\\\\"", "\xed\xa0\xbd\\", 4));

	struct json_value root;
	CHECK_EQ_INT(parse("\"ab\\u0063\"", &root), JSON_OK);
	CHECK(json_string_is(&root, "abc", 3));
	CHECK(!json_string_is(&root, "ab", 2));
	CHECK(!json_string_is(&root, "abcd", 4));
	CHECK(!json_string_is(&root, "abd", 3));
	CHECK_EQ_INT(parse("1", &root), JSON_OK);
	CHECK(!json_string_is(&root, "1", 1));
}

/* json_compact of the root of s is want. */
static bool compacts_to(const char *s, const char *want)
{
	struct json_value root;
	size_t n;
	if (parse(s, &root) != JSON_OK)
		return false;
	char *c = json_compact(&root, &n);
	bool ok = n == strlen(want) && strcmp(c, want) == 0;
	if (!ok)
		fprintf(stderr, "  json_compact(%s) = \"%s\", wanted \"%s\"\n", s, c, want);
	free(c);
	return ok;
}

static void test_compact(void)
{
	CHECK(compacts_to(" { \"a b\" : [ 1 , 1e2, -0 ,\"x \\\" y\" ] ,\n\"c\":{ } } ",
			  "{\"a b\":[1,1e2,-0,\"x \\\" y\"],\"c\":{}}"));
	CHECK(compacts_to("true", "true"));
	CHECK(compacts_to("null", "null"));
	CHECK(compacts_to("\"a\\n\"", "\"a\\n\""));
	CHECK(compacts_to("42", "42"));
	CHECK(compacts_to("-0", "0"));
	CHECK(compacts_to("1e2", "100.0"));
	CHECK(compacts_to("0.1", "0.1"));
	CHECK(compacts_to("-0.0", "0.0"));
	CHECK(compacts_to("1e-7", "1.0e-07"));
	CHECK(compacts_to("1e300", "1.0e+300"));
	CHECK(compacts_to("0.30000000000000004", "0.3"));
	CHECK(compacts_to("12345678901234567890", "1.23456789012346e+19"));
	CHECK(compacts_to("-9223372036854775808", "-9223372036854775808"));
	CHECK(compacts_to("1e999", "Inf"));
}

int main(void)
{
	arena_init();
	test_accepts();
	test_refusals();
	test_depth();
	test_iteration();
	test_member();
	test_numbers();
	test_strings();
	test_compact();
	return check_done("test_json");
}
