/* SPDX-License-Identifier: BSD-2-Clause */
/* test_webhook_body.c: which rows a webhook delivers, the batch body
 * (valid JSON whatever the data's bytes) and its signature against one
 * computed independently (Python's hmac). */
#include "check.h"
#include "common/json.h"
#include "webhook/webhook_body.h"

#include <string.h>

static struct store_event ev(int64_t id, const char *type, const char *topic, const char *data, size_t len)
{
	return (struct store_event){ .id = id,
				     .type = type,
				     .type_len = strlen(type),
				     .topic = topic,
				     .topic_len = strlen(topic),
				     .data = data,
				     .data_len = len,
				     .created_at = 1700000000 };
}

static void test_kinds(void)
{
	const char *doc = "{\"id\":\"/.well-known/mercure/subscriptions/exact/a/b\",\"type\":\"subscription\"}";
	struct store_event join = ev(1, "presence.join", "$presence/room/1", "{}", 2);
	struct store_event sub = ev(2, "mercure", "$mercure/abc", doc, strlen(doc));
	struct store_event mpub = ev(3, "mercure", "$mercure/abc", "hello", 5);
	struct store_event pub = ev(4, "message", "news", "x", 1);
	CHECK_EQ_INT(webhook_kind_of(&join, false), WEBHOOK_PRESENCE);
	CHECK_EQ_INT(webhook_kind_of(&sub, false), WEBHOOK_SUBSCRIPTION);
	CHECK_EQ_INT(webhook_kind_of(&mpub, false), WEBHOOK_SKIP);
	CHECK_EQ_INT(webhook_kind_of(&mpub, true), WEBHOOK_PUBLISH);
	CHECK_EQ_INT(webhook_kind_of(&pub, false), WEBHOOK_SKIP);
	CHECK_EQ_INT(webhook_kind_of(&pub, true), WEBHOOK_PUBLISH);
}

static void test_body(void)
{
	struct webhook_body b;
	webhook_body_begin(&b);
	struct store_event e1 = ev(5, "message", "news", "a\"b\\c\n\x01", 7);
	struct store_event e2 = ev(6, "message", "news", "\xff\x00z", 3); /* not UTF-8, a NUL */
	struct store_event e3 = ev(7, "message", "news", "caf\xc3\xa9", 5);
	webhook_body_add(&b, WEBHOOK_PUBLISH, &e1);
	webhook_body_add(&b, WEBHOOK_PUBLISH, &e2);
	webhook_body_add(&b, WEBHOOK_PRESENCE, &e3);
	webhook_body_end(&b);
	CHECK_EQ_INT(b.count, 3);
	CHECK_EQ_INT(b.first, 5);
	CHECK_EQ_INT(b.last, 7);
	CHECK(strstr(b.p, "{\"id\":5,\"kind\":\"publish\",\"type\":\"message\",\"topic\":\"news\","
			  "\"data\":\"a\\\"b\\\\c\\n\\u0001\",\"time\":1700000000}") != NULL);
	CHECK(strstr(b.p, "\"data\":\"\\u00ff\\u0000z\"") != NULL);
	CHECK(strstr(b.p, "\"kind\":\"presence\"") != NULL);
	CHECK(strstr(b.p, "\"data\":\"caf\xc3\xa9\"") != NULL);
	/* JSON, but for the \u0000 herald's own parser refuses. */
	struct json_value root;
	CHECK(json_parse(b.p, b.n, &root) == JSON_NUL_ESCAPE);
	webhook_body_free(&b);
	webhook_body_begin(&b);
	webhook_body_add(&b, WEBHOOK_PUBLISH, &e1);
	webhook_body_add(&b, WEBHOOK_PRESENCE, &e3);
	webhook_body_end(&b);
	CHECK(json_parse(b.p, b.n, &root) == JSON_OK);
	webhook_body_free(&b);
}

static void test_signature(void)
{
	char hex[WEBHOOK_SIG_HEX];
	const char *body = "{\"events\":[]}";
	webhook_sign("webhook-secret-0123456789abcdef", 1700000000, body, strlen(body), hex);
	CHECK(strcmp(hex, "1cb15095bb4642f48cdd7b3172fcc85a507cab70abe2df32aa6542328e90efc1") == 0);
}

int main(void)
{
	test_kinds();
	test_body();
	test_signature();
	return check_done("webhook_body");
}
