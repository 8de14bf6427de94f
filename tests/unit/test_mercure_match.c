/* SPDX-License-Identifier: BSD-2-Clause */
/* test_mercure_match.c: the Mercure endpoint's pure parts: the value rule
 * (src/mercure/mercure_match.c), matcher lists and their width budget, the
 * subscription's query, a token's grants in both claim styles read from
 * JSON as jwt.c hands them over, the block an update keeps beside its row
 * (src/store/mercure_update.c) and its frame (frame_mercure in src/hub/frame.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "hub/frame.h"
#include "common/json.h"
#include "auth/jwt.h"
#include "mercure/mercure_match.h"
#include "store/mercure_update.h"
#include "mercure/urlpattern.h"

#define BASE "https://hub.example/.well-known/mercure"

static bool valid(const char *s)
{
	return mercure_value_valid(s, strlen(s));
}

static void test_values(void)
{
	CHECK(valid("https://example.com/books/1"));
	CHECK(valid("caf\xc3\xa9"));
	CHECK(valid("*"));
	CHECK(!valid(""));
	CHECK(!valid("a\nb"));
	CHECK(!valid("a\x7f"));
	CHECK(!valid("a\xc2\x85"));         /* U+0085, a C1 control */
	CHECK(!valid("a\xe2\x80\x8b"));     /* U+200B, a format character */
	CHECK(!valid("a\xef\xbb\xbf"));     /* U+FEFF */
	CHECK(!valid("a\xf3\xa0\x80\x81")); /* U+E0001, a tag */
	CHECK(!valid("\xff"));
	char big[MERCURE_MAX_VALUE + 2];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(!valid(big));
}

static void test_matchers(void)
{
	struct mercure_matchers l = { 0 };
	CHECK(mercure_matchers_add(&l, MERCURE_EXACT, "https://example.com/a", 21, BASE) == NULL);
	CHECK(mercure_matchers_add(&l, MERCURE_URLPATTERN, "https://example.com/b/:id", 25, BASE) == NULL);
	CHECK(mercure_matchers_add(&l, MERCURE_URLPATTERN, "https://example.com/(x)", 23, BASE) != NULL);
	CHECK_EQ_INT(l.n, 2);
	CHECK(mercure_matchers_match(&l, "https://example.com/a", 21, BASE));
	CHECK(!mercure_matchers_match(&l, "https://example.com/A", 21, BASE));
	CHECK(!mercure_matchers_match(&l, "https://example.com/a/", 22, BASE));
	CHECK(mercure_matchers_match(&l, "https://example.com/b/9", 23, BASE));
	CHECK(!mercure_matchers_match(&l, "https://example.com/c", 21, BASE));
	/* "*" is the wildcard whatever the type. */
	CHECK(mercure_matchers_add(&l, MERCURE_EXACT, "*", 1, BASE) == NULL);
	CHECK(mercure_matchers_match(&l, "anything", 8, BASE));
	mercure_matchers_free(&l);
	for (int i = 0; i < MERCURE_MAX_MATCHERS; i++)
		CHECK(mercure_matchers_add(&l, MERCURE_EXACT, "a", 1, BASE) == NULL);
	CHECK(mercure_matchers_add(&l, MERCURE_EXACT, "a", 1, BASE) != NULL);
	mercure_matchers_free(&l);
}

/* One list's URL patterns may be 256 wide in all: the sum is what judging
 * one topic byte costs the list. */
static void test_width_budget(void)
{
	struct mercure_matchers l = { 0 };
	char p[128] = "https://example.com/";
	for (int i = 0; i < 31; i++)
		strcat(p, "*a");
	strcat(p, "*b"); /* 64 wide */
	for (int i = 0; i < 4; i++)
		CHECK(mercure_matchers_add(&l, MERCURE_URLPATTERN, p, strlen(p), BASE) == NULL);
	CHECK_EQ_INT(l.width, MERCURE_MAX_WIDTH);
	const char *why = mercure_matchers_add(&l, MERCURE_URLPATTERN, "https://example.com/:x", 22, BASE);
	CHECK(why && strstr(why, "wider than 256"));
	/* Exact matchers and literal patterns cost no width. */
	CHECK(mercure_matchers_add(&l, MERCURE_EXACT, "https://example.com/:x", 22, BASE) == NULL);
	CHECK(mercure_matchers_add(&l, MERCURE_URLPATTERN, "https://example.com/x", 21, BASE) == NULL);
	CHECK_EQ_INT(l.n, 6);
	/* Judging a topic costs at most (width + patterns) steps per byte. */
	char topic[2100] = "https://example.com/";
	memset(topic + strlen(topic), 'a', 2000);
	uint64_t before = urlpattern_steps();
	CHECK(!mercure_matchers_match(&l, topic, strlen(topic), BASE));
	CHECK(urlpattern_steps() - before <= (MERCURE_MAX_WIDTH + l.n) * strlen(topic));
	mercure_matchers_free(&l);
	CHECK_EQ_INT(l.width, 0);
}

/* A subscription's query: matchers of each kind, the resume id, and the
 * refusals, each naming its cause. */
static void test_query(void)
{
	static const struct {
		const char *query;
		size_t nmatchers;
		const char *last_id; /* NULL: none */
		const char *why;     /* a word of the refusal, or NULL */
	} cases[] = {
		{ "match=a&match_urlpattern=https://e.com/:x&topic=b&match_exact=c", 4, NULL, NULL },
		{ "match=a&lastEventID=x&last_event_id=y", 1, "y", NULL },
		{ "lastEventID=x&match=a&lastEventID=z", 1, "x", NULL },
		{ "match=%zz", 0, NULL, "percent" },
		{ "match_regex=a", 0, NULL, "unknown" },
		{ "last_event_id=1", 0, "1", "at least one" },
		{ "match_urlpattern=https://e.com/(x)", 0, NULL, "regular expression" },
		{ "match_urlpattern=https://e.com/*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a",
		  0, NULL, "wider than 64" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mercure_matchers want = { 0 };
		struct mercure_query mq;
		struct http_slice q = { cases[i].query, strlen(cases[i].query) };
		const char *why = mercure_query_read(q, BASE, &want, &mq);
		char *last_id = mq.last_id;
		if (cases[i].why) {
			CHECK(why && strstr(why, cases[i].why));
		} else {
			CHECK(!why);
			CHECK_EQ_INT(want.n, cases[i].nmatchers);
		}
		CHECK(cases[i].last_id ? last_id && strcmp(last_id, cases[i].last_id) == 0 : last_id == NULL);
		free(last_id);
		mercure_matchers_free(&want);
	}
}

/* Read header and payload JSON as jwt.c would hand them over. */
static int claims(const char *header, const char *payload, struct mercure_grants *g)
{
	struct json_value h, p;
	memset(g, 0, sizeof(*g));
	g->base = BASE;
	g->audience_checked = strstr(payload, "\"aud\"") == NULL;
	if (json_parse(header, strlen(header), &h) != JSON_OK || json_parse(payload, strlen(payload), &p) != JSON_OK)
		return 99;
	return mercure_read_claims(g, &h, &p);
}

static void test_claims(void)
{
	struct mercure_grants g;
	CHECK_EQ_INT(claims("{\"typ\":\"JWT\"}", "{\"mercure\":{\"publish\":[\"*\"],\"subscribe\":[\"a\",\"b\"]}}", &g),
		     JWT_OK);
	CHECK_EQ_INT(g.publish.n, 1);
	CHECK_EQ_INT(g.subscribe.n, 2);
	CHECK(!g.access_token);
	mercure_grants_free(&g);
	CHECK_EQ_INT(claims("{}", "{\"mercure\":{\"subscribe\":\"a\"}}", &g), JWT_MALFORMED);
	CHECK_EQ_INT(claims("{}", "{\"mercure\":{\"subscribe\":[1]}}", &g), JWT_MALFORMED);
	CHECK_EQ_INT(claims("{}", "{}", &g), JWT_OK);
	CHECK_EQ_INT(g.publish.n + g.subscribe.n, 0);

	static const char at[] = "{\"typ\":\"at+jwt\"}";
	/* An access token names its issuer and this hub, or is refused
	 * for the one it does not name. */
	CHECK_EQ_INT(claims(at, "{\"aud\":\"https://other/.well-known/mercure\",\"iss\":\"i\"}", &g), JWT_BAD_AUDIENCE);
	CHECK_EQ_INT(claims(at, "{\"aud\":[\"x\",\"" BASE "\"],\"iss\":\"i\"}", &g), JWT_OK);
	CHECK_EQ_INT(claims(at, "{\"aud\":\"" BASE "\"}", &g), JWT_BAD_ISSUER);
	CHECK_EQ_INT(claims("{\"typ\":\"Application/AT+JWT\"}", "{\"aud\":\"" BASE "\",\"iss\":\"i\"}", &g), JWT_OK);
	CHECK(g.access_token);
	CHECK_EQ_INT(claims(at,
			    "{\"iss\":\"i\",\"authorization_details\":[{\"type\":\"https://mercure.rocks/"
			    "authorization-detail\","
			    "\"actions\":[\"subscribe\",\"future\"],\"topics\":[{\"match\":\"https://e.com/:id\","
			    "\"match_type\":\"urlpattern\"},{\"match\":\"x\"}]},{\"type\":\"other\"}],"
			    "\"mercure\":{\"publish\":[\"*\"]}}",
			    &g),
		     JWT_OK);
	CHECK(g.access_token);
	CHECK_EQ_INT(g.subscribe.n, 2);
	CHECK_EQ_INT(g.publish.n, 0); /* the older claim is not read from an access token */
	CHECK(mercure_matchers_match(&g.subscribe, "https://e.com/7", 15, BASE));
	mercure_grants_free(&g);
	CHECK_EQ_INT(claims("{\"typ\":\"application/at+jwt\"}",
			    "{\"iss\":\"i\",\"authorization_details\":[{\"type\":\"https://mercure.rocks/"
			    "authorization-detail\","
			    "\"actions\":[\"publish\"],\"topics\":[{\"match\":\"*\"}]}]}",
			    &g),
		     JWT_OK);
	CHECK_EQ_INT(g.publish.n, 1);
	mercure_grants_free(&g);
	/* Any malformed Mercure detail refuses the whole token. */
	static const char *const bad[] = {
		"{\"authorization_details\":{}}",
		"{\"authorization_details\":[{\"actions\":[\"publish\"]}]}",
		"{\"authorization_details\":[{\"type\":\"https://mercure.rocks/authorization-detail\","
		"\"actions\":[],\"topics\":[{\"match\":\"a\"}]}]}",
		"{\"authorization_details\":[{\"type\":\"https://mercure.rocks/authorization-detail\","
		"\"actions\":[\"publish\",1],\"topics\":[{\"match\":\"a\"}]}]}",
		"{\"authorization_details\":[{\"type\":\"https://mercure.rocks/authorization-detail\","
		"\"actions\":[\"publish\"],\"topics\":[]}]}",
		"{\"authorization_details\":[{\"type\":\"https://mercure.rocks/authorization-detail\","
		"\"actions\":[\"publish\"],\"topics\":[{\"match\":\"a\",\"match_type\":\"regex\"}]}]}",
		"{\"authorization_details\":[{\"type\":\"https://mercure.rocks/authorization-detail\","
		"\"actions\":[\"future\"],\"topics\":[{\"match\":\"https://e.com/"
		"(x)\",\"match_type\":\"urlpattern\"}]}]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* Each with its issuer, so only the detail is at fault. */
		char with_iss[600];
		snprintf(with_iss, sizeof(with_iss), "{\"iss\":\"i\",%s", bad[i] + 1);
		CHECK_EQ_INT(claims(at, with_iss, &g), JWT_MALFORMED);
		CHECK_EQ_INT(g.publish.n + g.subscribe.n, 0);
	}
}

static void test_block_and_frame(void)
{
	char *topics[2] = { "https://e.com/a", "https://e.com/b" };
	size_t len;
	char *b = mercure_block_new("urn:x:1", "250", topics, 2, &len);
	struct mercure_block mb;
	CHECK(mercure_block_parse(b, len, &mb));
	CHECK(mb.id_len == 7 && memcmp(mb.id, "urn:x:1", 7) == 0);
	CHECK(mb.retry_len == 3);
	const char *p = mb.topics, *end = mb.topics + mb.topics_len, *t;
	size_t tl, n = 0;
	while (mercure_block_next_topic(&p, end, &t, &tl))
		CHECK(tl == strlen(topics[n]) && memcmp(t, topics[n++], tl) == 0);
	CHECK_EQ_INT(n, 2);

	struct store_event ev = { .id = 5,
				  .type = "message",
				  .type_len = 7,
				  .topic = "x",
				  .topic_len = 1,
				  .data = "a\r\nb",
				  .data_len = 4,
				  .mercure = b,
				  .mercure_len = len };
	struct chunk *c = frame_mercure(&ev);
	static const char want[] = "id: urn:x:1\nretry: 250\ndata: a\ndata: b\n\n";
	CHECK(c->len == sizeof(want) - 1 && memcmp(c->data, want, c->len) == 0);
	chunk_unref(c);
	/* A row of herald's own: the id made from the log and its number, its
	 * type. */
	mercure_log_identity_set(UINT64_C(0x0123456789ab));
	ev = (struct store_event){ .id = 42, .type = "chat", .type_len = 4, .data = "hi", .data_len = 2 };
	c = frame_mercure(&ev);
	static const char want2[] = "id: urn:uuid:01234567-89ab-8000-8000-00000000002a\nevent: chat\ndata: hi\n\n";
	CHECK(c->len == sizeof(want2) - 1 && memcmp(c->data, want2, c->len) == 0);
	chunk_unref(c);
	/* A block without the publisher's id (alternate topics, a retry):
	 * the made id too, with its retry. */
	char *made = mercure_block_new("", "5", topics, 2, &len);
	ev = (struct store_event){ .id = 43, .type = "message", .type_len = 7, .data = "x", .data_len = 1,
				   .mercure = made, .mercure_len = len };
	c = frame_mercure(&ev);
	static const char want3[] = "id: urn:uuid:01234567-89ab-8000-8000-00000000002b\nretry: 5\ndata: x\n\n";
	CHECK(c->len == sizeof(want3) - 1 && memcmp(c->data, want3, c->len) == 0);
	chunk_unref(c);
	free(made);
	free(b);
}

int main(void)
{
	test_values();
	test_matchers();
	test_width_budget();
	test_query();
	test_claims();
	test_block_and_frame();
	return check_done("test_mercure_match");
}
