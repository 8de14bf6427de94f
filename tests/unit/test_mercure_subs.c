/* SPDX-License-Identifier: BSD-2-Clause */
/* test_mercure_subs.c: the pure parts of the active subscriptions
 * (src/mercure/mercure_subs.c) that the Redis share rests on: a record
 * read back as written (a match with newlines and any byte but NUL
 * included), what is not a record refused; a subscription API path parsed
 * (percent-decoded, any case of hex), a path that names nothing refused;
 * the id prefix a question reads in Redis, which every id it wants starts
 * with (and the single subscription's id itself); and the answers of a
 * registry without events or share (the local list), which the cluster's
 * answers are made like. ASan's leak check at exit covers the frees. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mercure/mercure_subs.h"

#define HUB "/.well-known/mercure"

static void test_record_round_trip(void)
{
	const char *matches[] = { "https://example.com/a b", "line\none\ntwo", "", "\"q\\", "/books/:id?" };
	for (size_t i = 0; i < sizeof(matches) / sizeof(*matches); i++) {
		enum mercure_kind kind = i % 2 ? MERCURE_URLPATTERN : MERCURE_EXACT;
		size_t len;
		char *rec = mercure_subs_record(HUB, kind, matches[i], "urn:uuid:1", &len);
		CHECK_EQ_INT(len, strlen(rec));
		struct mercure_sub_view v;
		CHECK(mercure_subs_record_parse(rec, len, &v));
		CHECK(v.kind == kind);
		CHECK(strcmp(v.hub_path, HUB) == 0);
		CHECK(strcmp(v.subscriber, "urn:uuid:1") == 0);
		CHECK(strcmp(v.match, matches[i]) == 0);
		free(rec);
	}
	const char *bad[] = {
		"", "exact", "exact\n/hub\nsub", "other\n/hub\nsub\nm", "exact\n\nsub\nm", "exact\n/hub\n\nm"
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char *rec = strdup(bad[i]);
		struct mercure_sub_view v;
		CHECK(!mercure_subs_record_parse(rec, strlen(rec), &v));
		free(rec);
	}
	char nul[] = "exact\n/hub\nsub\nm\0x";
	struct mercure_sub_view v;
	CHECK(!mercure_subs_record_parse(nul, sizeof(nul) - 1, &v));
}

static void test_query_parse(void)
{
	struct mercure_subs_query q;
	CHECK(mercure_subs_query_parse("", &q));
	CHECK_EQ_INT(q.nparts, 0);
	mercure_subs_query_free(&q);
	CHECK(mercure_subs_query_parse("/urlpattern/https%3a%2F%2Fex.com%2F%3Ax", &q));
	CHECK_EQ_INT(q.nparts, 2);
	CHECK(q.kind == MERCURE_URLPATTERN && strcmp(q.match, "https://ex.com/:x") == 0);
	mercure_subs_query_free(&q);
	CHECK(mercure_subs_query_parse("/exact/a%20b/urn%3Auuid%3A1", &q));
	CHECK_EQ_INT(q.nparts, 3);
	CHECK(q.kind == MERCURE_EXACT && strcmp(q.match, "a b") == 0 && strcmp(q.subscriber, "urn:uuid:1") == 0);
	mercure_subs_query_free(&q);
	const char *bad[] = { "/exact", "/other/a", "x", "/exact/a/b/c", "/exact/%zz", "/exact/%00", "/exact/a%2" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		CHECK(!mercure_subs_query_parse(bad[i], &q));
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void test_query_prefix(void)
{
	struct mercure_subs_query q;
	/* A subscription's id, as its events' topic has it. */
	size_t len;
	char *rec = mercure_subs_record(HUB, MERCURE_EXACT, "a b/c", "urn:uuid:1", &len);
	struct mercure_sub_view v;
	CHECK(mercure_subs_record_parse(rec, len, &v));
	const char *id = HUB "/subscriptions/exact/a%20b%2Fc/urn%3Auuid%3A1";
	const char *rests[] = { "", "/exact/a%20b%2fc", "/exact/a b%2Fc/urn:uuid:1" };
	for (size_t i = 0; i < 3; i++) {
		CHECK(mercure_subs_query_parse(rests[i], &q));
		char *p = mercure_subs_query_prefix(&q, HUB);
		CHECK(starts(id, p));
		if (i == 2)
			CHECK(strcmp(id, p) == 0);
		CHECK(mercure_subs_query_wants(&q, HUB, &v));
		CHECK(!mercure_subs_query_wants(&q, "/other", &v));
		free(p);
		mercure_subs_query_free(&q);
	}
	/* A match that is another's start is not its prefix's: "a b" vs "a b/c". */
	CHECK(mercure_subs_query_parse("/exact/a%20b", &q));
	char *p = mercure_subs_query_prefix(&q, HUB);
	CHECK(!starts(id, p));
	CHECK(!mercure_subs_query_wants(&q, HUB, &v));
	free(p);
	mercure_subs_query_free(&q);
	CHECK(mercure_subs_query_parse("/urlpattern/a%20b%2Fc", &q));
	CHECK(!mercure_subs_query_wants(&q, HUB, &v));
	mercure_subs_query_free(&q);
	free(rec);
}

struct got {
	int status;
	char *body;
};

static void answered(void *arg, int status, char *body, size_t len)
{
	struct got *g = arg;
	(void)len;
	g->status = status;
	g->body = body;
}

static void test_local_answers(void)
{
	struct mercure_subs *s = mercure_subs_new(NULL, NULL, NULL, NULL);
	struct mercure_matchers want = { 0 };
	CHECK(mercure_matchers_add(&want, MERCURE_EXACT, "a b", 3, "https://hub.example" HUB) == NULL);
	struct mercure_sub *sub = mercure_subs_add(s, HUB, &want);
	size_t len;
	char *all = mercure_subs_answer(s, HUB, "", &len);
	CHECK(all && strstr(all, "\"type\":\"subscriptions\"") && strstr(all, "\"match\":\"a b\""));
	char *sid = strstr(all, "urn:uuid:");
	CHECK(sid != NULL);
	char subscriber[64] = "";
	if (sid)
		snprintf(subscriber, sizeof(subscriber), "%.*s", (int)strcspn(sid, "\""), sid);
	char *enc = mercure_pct(subscriber, strlen(subscriber));
	char rest[160];
	snprintf(rest, sizeof(rest), "/exact/a%%20b/%s", enc);
	struct got g = { 0, NULL };
	mercure_subs_ask(s, HUB, rest, answered, &g);
	CHECK_EQ_INT(g.status, 200);
	CHECK(g.body && strstr(g.body, "\"type\":\"subscription\"") && strstr(g.body, "\"active\":true"));
	free(g.body);
	g = (struct got){ 0, NULL };
	mercure_subs_ask(s, HUB, "/exact/a%20b/urn%3Auuid%3Anone", answered, &g);
	CHECK_EQ_INT(g.status, 404);
	CHECK(g.body == NULL);
	mercure_subs_ask(s, HUB, "/exact", answered, &g);
	CHECK_EQ_INT(g.status, 404);
	mercure_subs_remove(s, sub);
	char *none = mercure_subs_answer(s, HUB, "", &len);
	CHECK(none && strstr(none, "\"subscriptions\":[]"));
	free(none);
	free(all);
	free(enc);
	mercure_matchers_free(&want);
	mercure_subs_free(s);
}

int main(void)
{
	test_record_round_trip();
	test_query_parse();
	test_query_prefix();
	test_local_answers();
	return check_done("test_mercure_subs");
}
