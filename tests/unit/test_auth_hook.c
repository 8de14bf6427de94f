/* SPDX-License-Identifier: BSD-2-Clause */
/* test_auth_hook.c: reading the application's answer to auth_request: no
 * body or an empty object allows as asked; topics narrow only within those
 * asked (none asked: any), and anything else is the application's error
 * (502); an empty list allows nothing (403); a body that is not a JSON
 * object is no answer (503); the subject is taken when it is a short
 * string. And the one place that names the URL. */
#include <stdlib.h>
#include <string.h>

#include "api/auth_hook.h"
#include "check.h"
#include "core/config.h"

static int parse(const char *body, char *const *asked, size_t nasked, struct auth_hook_answer *a)
{
	return auth_hook_parse_answer(body, strlen(body), asked, nasked, a);
}

static void test_allowed_as_asked(void)
{
	struct auth_hook_answer a;
	CHECK_EQ_INT(parse("", NULL, 0, &a), 0);
	CHECK(a.status == 200 && !a.narrowed && !a.subject);
	CHECK_EQ_INT(parse(" \r\n", NULL, 0, &a), 0);
	CHECK_EQ_INT(parse("{}", NULL, 0, &a), 0);
	CHECK(!a.narrowed);
	CHECK_EQ_INT(parse("{\"topics\":null,\"subject\":null,\"other\":[1]}", NULL, 0, &a), 0);
	CHECK(!a.narrowed && !a.subject);
	auth_hook_answer_clear(&a);
}

static void test_narrowing(void)
{
	char *asked[] = { "room/*", "news" };
	struct auth_hook_answer a;
	CHECK_EQ_INT(parse("{\"topics\":[\"room/1\",\"news\"],\"subject\":\"carol\"}", asked, 2, &a), 0);
	CHECK(a.narrowed && a.ntopics == 2);
	CHECK(strcmp(a.topics[0], "room/1") == 0 && strcmp(a.topics[1], "news") == 0);
	CHECK(a.subject && strcmp(a.subject, "carol") == 0);
	auth_hook_answer_clear(&a);
	CHECK_EQ_INT(parse("{\"topics\":[\"room/a/*\"]}", asked, 2, &a), 0);
	auth_hook_answer_clear(&a);
	/* Past what was asked, or not a topic: the application's error. */
	CHECK_EQ_INT(parse("{\"topics\":[\"room/1\",\"other\"]}", asked, 2, &a), 502);
	CHECK(a.ntopics == 0 && a.topics == NULL && strstr(a.why, "did not ask for"));
	CHECK_EQ_INT(parse("{\"topics\":[\"*\"]}", asked, 2, &a), 502);
	CHECK_EQ_INT(parse("{\"topics\":[\"a b\"]}", asked, 2, &a), 502);
	CHECK_EQ_INT(parse("{\"topics\":[1]}", asked, 2, &a), 502);
	CHECK_EQ_INT(parse("{\"topics\":\"news\"}", asked, 2, &a), 502);
	CHECK_EQ_INT(parse("{\"subject\":42}", asked, 2, &a), 502);
	CHECK_EQ_INT(parse("{\"subject\":\"\"}", asked, 2, &a), 502);
	/* Nothing asked: every topic, so any topic may be named. */
	CHECK_EQ_INT(parse("{\"topics\":[\"anything/*\"]}", NULL, 0, &a), 0);
	auth_hook_answer_clear(&a);
	/* None allowed. */
	CHECK_EQ_INT(parse("{\"topics\":[]}", asked, 2, &a), 403);
	/* 17 topics: more than a reader may read. */
	char many[400] = "{\"topics\":[";
	for (int i = 0; i < 17; i++)
		strcat(many, i ? ",\"news\"" : "\"news\"");
	strcat(many, "]}");
	CHECK_EQ_INT(parse(many, asked, 2, &a), 502);
}

static void test_not_an_answer(void)
{
	struct auth_hook_answer a;
	CHECK_EQ_INT(parse("<html>", NULL, 0, &a), 503);
	CHECK_EQ_INT(parse("[]", NULL, 0, &a), 503);
	CHECK_EQ_INT(parse("{\"topics\":[", NULL, 0, &a), 503);
	CHECK(strstr(a.why, "not a JSON object"));
}

static void test_url(void)
{
	struct config cfg;
	memset(&cfg, 0, sizeof(cfg));
	bool mixed = true;
	cfg.auth_request = "";
	CHECK(auth_hook_url(&cfg, NULL, 0, &mixed) == NULL && !mixed);
	cfg.auth_request = "https://app.example/auth";
	CHECK(strcmp(auth_hook_url(&cfg, NULL, 0, &mixed), "https://app.example/auth") == 0 && !mixed);
	/* Per namespace: the hooks of the namespaces a stream reaches must agree. */
	CHECK(namespaces_add(&cfg.namespaces, "app/*", "t:1") && namespaces_add(&cfg.namespaces, "open/*", "t:2"));
	cfg.namespaces.ns[0].auth_request = strdup("https://app.example/other");
	cfg.namespaces.ns[1].auth_request = strdup("");
	char *app[] = { "app/1" }, *open[] = { "open/x" }, *news[] = { "news" }, *both[] = { "app/1", "news" };
	CHECK(strcmp(auth_hook_url(&cfg, app, 1, &mixed), "https://app.example/other") == 0 && !mixed);
	CHECK(auth_hook_url(&cfg, open, 1, &mixed) == NULL && !mixed);
	CHECK(strcmp(auth_hook_url(&cfg, news, 1, &mixed), "https://app.example/auth") == 0 && !mixed);
	CHECK(auth_hook_url(&cfg, both, 2, &mixed) == NULL && mixed);
	CHECK(auth_hook_url(&cfg, NULL, 0, &mixed) == NULL && mixed);
	namespaces_free(&cfg.namespaces);
}

int main(void)
{
	test_allowed_as_asked();
	test_narrowing();
	test_not_an_answer();
	test_url();
	return check_done("auth_hook");
}
