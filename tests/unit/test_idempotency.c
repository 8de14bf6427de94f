/* SPDX-License-Identifier: BSD-2-Clause */
/* test_idempotency.c: Idempotency-Key values as the draft's sf-string, the
 * publisher names keys are scoped to, and the body fingerprint. */
#include "check.h"
#include "store/idempotency.h"

#include <string.h>

static int parse(const char *v, char *out)
{
	const char *why = NULL;
	int r = idem_key_parse(v, strlen(v), out, &why);
	CHECK(r == 0 || why != NULL);
	return r;
}

static void test_keys(void)
{
	char k[IDEM_KEY_MAX + 1];
	CHECK_EQ_INT(parse("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"", k), 0);
	CHECK(strcmp(k, "8e03978e-40d5-43e8-bc93-6894a57f9324") == 0);
	CHECK_EQ_INT(parse("\"a \\\"b\\\" \\\\c\"", k), 0);
	CHECK(strcmp(k, "a \"b\" \\c") == 0);
	CHECK_EQ_INT(parse("\" \"", k), 0);

	/* Refused: not a string, empty, bad escapes, inner quotes, trailing
	 * text, non-ASCII or control characters, too long. */
	const char *bad[] = { "",         "abc",       "\"",       "\"\"",       "\"abc",      "abc\"",
			      "\"a\\b\"", "\"a\\\"",   "\"a\"b\"", "\"a\";x\"",  "\"a\" ",     "\"\xc3\xa9\"",
			      "\"a\tb\"", "\"a\x7f\"", ":YWJj:",   "\"a\"\"b\"", "\"a\\\\\\\"" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ_INT(parse(bad[i], k), -1);

	char longest[IDEM_KEY_MAX + 4];
	longest[0] = '"';
	memset(longest + 1, 'x', IDEM_KEY_MAX);
	longest[IDEM_KEY_MAX + 1] = '"';
	longest[IDEM_KEY_MAX + 2] = '\0';
	CHECK_EQ_INT(parse(longest, k), 0);
	CHECK_EQ_INT(strlen(k), IDEM_KEY_MAX);
	longest[IDEM_KEY_MAX + 1] = 'x';
	longest[IDEM_KEY_MAX + 2] = '"';
	longest[IDEM_KEY_MAX + 3] = '\0';
	CHECK_EQ_INT(parse(longest, k), -1);
}

static void test_digest(void)
{
	char d[IDEM_HEX_LEN];
	idem_digest("abc", 3, NULL, 0, d);
	CHECK(strcmp(d, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0);
	char e[IDEM_HEX_LEN];
	/* Two parts are kept apart: ("ab", "c") is not ("a", "bc"). */
	idem_digest("ab", 2, "c", 1, d);
	idem_digest("a", 1, "bc", 2, e);
	CHECK(strcmp(d, e) != 0);
}

static void test_publishers(void)
{
	char p[IDEM_PUBLISHER_MAX];
	/* {"alg":"HS256"} . {"sub":"alice","mercure":{}} . signature */
	const char *with_sub = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSIsIm1lcmN1cmUiOnt9fQ.c2ln";
	idem_publisher(with_sub, strlen(with_sub), false, "127.0.0.1", p);
	CHECK(strcmp(p, "sub:alice") == 0);
	/* {"mercure":{}}: no subject, the token stands for the publisher. */
	const char *no_sub = "eyJhbGciOiJIUzI1NiJ9.eyJtZXJjdXJlIjp7fX0.c2ln";
	idem_publisher(no_sub, strlen(no_sub), false, "127.0.0.1", p);
	CHECK(strncmp(p, "jwt:", 4) == 0 && strlen(p) == 4 + 64);
	idem_publisher(NULL, 0, true, "127.0.0.1", p);
	CHECK(strcmp(p, "token") == 0);
	idem_publisher(NULL, 0, false, "unix", p);
	CHECK(strcmp(p, "peer:unix") == 0);
}

int main(void)
{
	test_keys();
	test_digest();
	test_publishers();
	return check_done("idempotency");
}
