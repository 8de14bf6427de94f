/* SPDX-License-Identifier: BSD-2-Clause */
/* test_namespace.c: the namespace table (src/core/namespace.c): a topic's
 * namespace by the longest matching pattern, whether a reader's pattern
 * reaches one (never one whose topics a more specific section takes
 * whole), inheriting the defaults, the JSON for /api/health, copies, and
 * the stream admission by its rules (src/api/namespace_admit.c). */
#include <stdlib.h>
#include <string.h>

#include "api/namespace_admit.h"
#include "check.h"
#include "core/config.h"
#include "core/namespace.h"

static struct namespaces table(void)
{
	struct namespaces t = { 0 };
	const char *pats[] = { "chat/*", "chat/vip/*", "alerts", "ticker/*" };
	for (size_t i = 0; i < 4; i++)
		CHECK(namespaces_add(&t, pats[i], "test:1") != NULL);
	return t;
}

static int of(const struct namespaces *t, const char *topic)
{
	return namespace_of(t, topic, strlen(topic));
}

static void test_longest_pattern_wins(void)
{
	struct namespaces t = table();
	CHECK_EQ_INT(of(&t, "chat/room"), 0);
	CHECK_EQ_INT(of(&t, "chat/vip/room"), 1);
	CHECK_EQ_INT(of(&t, "chat/vip/a/b"), 1);
	CHECK_EQ_INT(of(&t, "chat/vip"), 0); /* not under chat/vip/ */
	CHECK_EQ_INT(of(&t, "chat"), -1);
	CHECK_EQ_INT(of(&t, "alerts"), 2);
	CHECK_EQ_INT(of(&t, "alerts/x"), -1);
	CHECK_EQ_INT(of(&t, "tickers/x"), -1);
	CHECK_EQ_INT(of(&t, "news"), -1);
	CHECK(namespaces_named(&t, "alerts") == &t.ns[2]);
	CHECK(namespaces_named(&t, "alert") == NULL);
	namespaces_free(&t);
	namespaces_free(&t); /* twice is harmless */
}

static void test_touches(void)
{
	struct namespaces t = table();
	/* "*" reaches every namespace and the defaults. */
	for (int i = -1; i < 4; i++)
		CHECK(namespace_touches(&t, i, "*"));
	/* A subtree reaches its own section and those inside it. */
	CHECK(namespace_touches(&t, 0, "chat/*"));
	CHECK(namespace_touches(&t, 1, "chat/*"));
	CHECK(!namespace_touches(&t, -1, "chat/*"));
	/* What a more specific section takes whole is not the outer one's. */
	CHECK(!namespace_touches(&t, 0, "chat/vip/*"));
	CHECK(!namespace_touches(&t, 0, "chat/vip/x"));
	CHECK(namespace_touches(&t, 1, "chat/vip/x"));
	CHECK(namespace_touches(&t, 0, "chat/room"));
	CHECK(!namespace_touches(&t, 1, "chat/room"));
	CHECK(namespace_touches(&t, -1, "news"));
	CHECK(!namespace_touches(&t, 3, "news"));
	CHECK(namespace_touches(&t, 2, "alerts"));
	CHECK(!namespace_touches(&t, -1, "alerts"));
	namespaces_free(&t);
}

static void test_inherit_json_copy(void)
{
	struct namespaces t = table();
	t.ns[3].retention_count = 10;
	t.ns[0].anonymous = 0;
	struct namespace d = { .retention_count = 1000,
			       .retention_age_s = 60,
			       .anonymous = 1,
			       .presence = 1,
			       .presence_events = 0,
			       .mercure = 1,
			       .max_readers = 0 };
	for (size_t i = 0; i < t.n; i++)
		namespace_inherit(&t.ns[i], &d);
	CHECK_EQ_INT(t.ns[3].retention_count, 10);
	CHECK_EQ_INT(t.ns[2].retention_count, 1000);
	CHECK_EQ_INT(t.ns[0].anonymous, 0);
	CHECK_EQ_INT(t.ns[1].anonymous, 1);
	size_t need = namespaces_json(&t, NULL, 0);
	char *buf = malloc(need + 1);
	CHECK_EQ_INT((long long)namespaces_json(&t, buf, need + 1), (long long)need);
	CHECK(strlen(buf) == need && buf[0] == '[' && buf[need - 1] == ']');
	CHECK(strstr(buf, "{\"pattern\":\"ticker/*\",\"retention_count\":10,") != NULL);
	/* A buffer too small is cut, NUL-terminated, and the length needed said. */
	char small[8];
	CHECK_EQ_INT((long long)namespaces_json(&t, small, sizeof(small)), (long long)need);
	CHECK(strlen(small) == sizeof(small) - 1);
	free(buf);
	struct namespaces c = { 0 };
	namespaces_copy(&c, &t);
	CHECK(namespaces_same_patterns(&c, &t));
	CHECK(c.ns[0].pattern != t.ns[0].pattern && c.ns[3].retention_count == 10);
	namespaces_free(&c);
	CHECK(!namespaces_same_patterns(&c, &t));
	namespaces_free(&t);
	struct namespaces empty = { 0 };
	CHECK_EQ_INT((long long)namespaces_json(&empty, small, sizeof(small)), 2);
	CHECK(strcmp(small, "[]") == 0);
}

static void test_admission_by_rules(void)
{
	struct config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.namespaces = table();
	cfg.ns_defaults = (struct namespace){ .anonymous = 1, .presence = 1, .mercure = 1 };
	for (size_t i = 0; i < cfg.namespaces.n; i++) {
		cfg.namespaces.ns[i].max_readers = i == 2 ? 2 : 0;
		cfg.namespaces.ns[i].anonymous = i == 1 ? 0 : 1;
		namespace_inherit(&cfg.namespaces.ns[i], &cfg.ns_defaults);
	}
	struct topic_caps *tc = topic_caps_new();
	struct topic_hold *h1, *h2, *h3;
	const char *cause = NULL;
	char why[300];
	char *alerts[] = { "alerts" }, *vip[] = { "chat/vip/1" }, *room[] = { "chat/room", "alerts" };
	/* anonymous = off in the chat/vip subtree: refused without a token, for its
	 * topics and for every topic; not for a sibling. */
	CHECK_EQ_INT(namespace_admit(tc, &cfg, vip, 1, false, &h1, &cause, why, sizeof(why)), 401);
	CHECK(strcmp(cause, "namespace_needs_token") == 0 && strstr(why, "chat/vip/*") != NULL);
	CHECK_EQ_INT(namespace_admit(tc, &cfg, NULL, 0, false, &h1, &cause, why, sizeof(why)), 401);
	CHECK_EQ_INT(namespace_admit(tc, &cfg, vip, 1, true, &h1, &cause, why, sizeof(why)), 0);
	CHECK(h1 == NULL);
	/* max_readers = 2 on "alerts": the third waits for a close; a
	 * refusal half way gives back what it took. */
	CHECK_EQ_INT(namespace_admit(tc, &cfg, alerts, 1, false, &h1, &cause, why, sizeof(why)), 0);
	CHECK_EQ_INT(namespace_admit(tc, &cfg, room, 2, false, &h2, &cause, why, sizeof(why)), 0);
	CHECK_EQ_INT((long long)topic_caps_count(tc, "alerts"), 2);
	CHECK_EQ_INT(namespace_admit(tc, &cfg, alerts, 1, false, &h3, &cause, why, sizeof(why)), 503);
	CHECK(strcmp(cause, "namespace_max_readers") == 0 && h3 == NULL);
	CHECK_EQ_INT((long long)topic_caps_count(tc, "alerts"), 2);
	namespace_release(tc, h1);
	CHECK_EQ_INT((long long)topic_caps_count(tc, "alerts"), 1);
	CHECK_EQ_INT(namespace_admit(tc, &cfg, alerts, 1, false, &h3, &cause, why, sizeof(why)), 0);
	/* A hold kept under its owner goes with it; one left at the end goes
	 * with the table. */
	int owner;
	namespace_hold_keep(tc, h3, &owner);
	namespace_release_owner(tc, &owner);
	namespace_release_owner(tc, &owner); /* nothing left: harmless */
	CHECK_EQ_INT((long long)topic_caps_count(tc, "alerts"), 1);
	namespace_hold_keep(tc, h2, &cause);
	topic_caps_free(tc);
	namespaces_free(&cfg.namespaces);
}

int main(void)
{
	test_longest_pattern_wins();
	test_touches();
	test_inherit_json_copy();
	test_admission_by_rules();
	return check_done("test_namespace");
}
