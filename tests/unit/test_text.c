/* SPDX-License-Identifier: BSD-2-Clause */
/* test_text.c: the edit distance and the nearest of a list of names, which
 * the "did you mean" of configuration keys, publish fields and query
 * parameters share, and the escaping of text shown in a message. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "common/text.h"

static void test_distance(void)
{
	CHECK_EQ_INT(text_distance("topic", "topic", 3), 0);
	CHECK_EQ_INT(text_distance("topc", "topic", 3), 1);   /* one left out */
	CHECK_EQ_INT(text_distance("topics", "topic", 3), 1); /* one too many */
	CHECK_EQ_INT(text_distance("tpoic", "topic", 3), 1);  /* two swapped */
	CHECK_EQ_INT(text_distance("tipic", "topic", 3), 1);  /* one changed */
	CHECK_EQ_INT(text_distance("", "data", 9), 4);
	CHECK_EQ_INT(text_distance("type", "topic", 9), 3);
	/* Past the limit: limit + 1, whatever the real distance. */
	CHECK_EQ_INT(text_distance("abcdef", "uvwxyz", 2), 3);
	CHECK_EQ_INT(text_distance("a", "abcdefghij", 2), 3);
	/* Symmetric. */
	CHECK_EQ_INT(text_distance("presence_max_keys", "presense_max_key", 5),
		     text_distance("presense_max_key", "presence_max_keys", 5));
	/* A long text is far from a short name, at no cost to find out. */
	char longer[5000];
	memset(longer, 'a', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	CHECK_EQ_INT(text_distance(longer, "data", 3), 4);
	CHECK_EQ_INT(text_distance(longer, longer, 3), 4); /* past TEXT_DISTANCE_MAX: far, even from itself */
}

static void test_nearest(void)
{
	static const char *const fields[] = { "type", "topic", "data", "public" };
	CHECK(strcmp(text_nearest("topc", fields, 4), "topic") == 0);
	CHECK(strcmp(text_nearest("Topic", fields, 4), "topic") == 0);
	CHECK(strcmp(text_nearest("dat", fields, 4), "data") == 0);
	CHECK(strcmp(text_nearest("pubilc", fields, 4), "public") == 0);
	CHECK(text_nearest("payload", fields, 4) == NULL);
	CHECK(text_nearest("x", fields, 4) == NULL);
	CHECK(text_nearest("", fields, 4) == NULL);
	static const char *const keys[] = { "presence", "presence_top", "max_body", "workers" };
	CHECK(strcmp(text_nearest("presense", keys, 4), "presence") == 0);
	CHECK(strcmp(text_nearest("max_bdy", keys, 4), "max_body") == 0);
	CHECK(strcmp(text_nearest("worker", keys, 4), "workers") == 0);
	CHECK(text_nearest("db", keys, 4) == NULL);
	char hint[48];
	CHECK(strcmp(text_did_you_mean("topc", fields, 4, "\"", hint, sizeof(hint)), " (did you mean \"topic\"?)") ==
	      0);
	CHECK(strcmp(text_did_you_mean("payload", fields, 4, "", hint, sizeof(hint)), "") == 0);
}

static void test_escape(void)
{
	char buf[32];
	CHECK(strcmp(text_escape("plain", buf, sizeof(buf)), "plain") == 0);
	CHECK(strcmp(text_escape("a\"b\\c\nd", buf, sizeof(buf)), "a\\\"b\\\\c\\x0ad") == 0);
	/* Cut to fit, never past the buffer. */
	char small[8];
	text_escape("0123456789abcdef", small, sizeof(small));
	CHECK(strlen(small) < sizeof(small));
}

int main(void)
{
	test_distance();
	test_nearest();
	test_escape();
	return check_done("text");
}
