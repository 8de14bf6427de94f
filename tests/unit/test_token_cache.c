/* SPDX-License-Identifier: BSD-2-Clause */
/* test_token_cache.c: the cache of verified tokens (src/auth/token_cache.c):
 * a hit gives back a copy of the rights put, a miss gives nothing; an entry
 * ends after its valid_until and when the clock goes back before the time
 * it was put; the least recently used entry goes first at the entry bound
 * and at the byte bound; an entry larger than the byte bound is not kept;
 * putting a key again replaces it. ASan's leak check at exit covers the
 * copies and token_cache_free. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "auth/token_cache.h"

#define NOW INT64_C(1700000000)

/* Key k: 32 bytes that differ in their first and last bytes. */
static const unsigned char *key(unsigned k)
{
	static unsigned char buf[4][TOKEN_CACHE_KEY_LEN];
	static int turn;
	unsigned char *p = buf[turn++ % 4];
	memset(p, 0x5a, TOKEN_CACHE_KEY_LEN);
	memcpy(p, &k, sizeof(k));
	p[TOKEN_CACHE_KEY_LEN - 1] = (unsigned char)k;
	return p;
}

/* Rights with the given patterns (NULL-terminated lists); free with
 * jwt_rights_free. */
static struct jwt_rights rights(const char *const *sub, const char *const *pub, int64_t exp)
{
	struct jwt_rights r = { .exp = exp };
	for (; sub && *sub; sub++) {
		r.subscribe = realloc(r.subscribe, (r.nsubscribe + 1) * sizeof(char *));
		r.subscribe[r.nsubscribe++] = strdup(*sub);
	}
	for (; pub && *pub; pub++) {
		r.publish = realloc(r.publish, (r.npublish + 1) * sizeof(char *));
		r.publish[r.npublish++] = strdup(*pub);
	}
	return r;
}

static bool same_rights(const struct jwt_rights *a, const struct jwt_rights *b)
{
	if (a->nsubscribe != b->nsubscribe || a->npublish != b->npublish || a->exp != b->exp)
		return false;
	for (size_t i = 0; i < a->nsubscribe; i++)
		if (strcmp(a->subscribe[i], b->subscribe[i]) != 0)
			return false;
	for (size_t i = 0; i < a->npublish; i++)
		if (strcmp(a->publish[i], b->publish[i]) != 0)
			return false;
	return true;
}

/* Whether key k is cached at now (the copy freed). */
static bool has(struct token_cache *c, unsigned k, int64_t now)
{
	struct jwt_rights r;
	bool hit = token_cache_get(c, key(k), now, &r);
	if (!hit)
		CHECK(r.subscribe == NULL && r.nsubscribe == 0 && r.publish == NULL && r.npublish == 0);
	jwt_rights_free(&r);
	return hit;
}

static void test_hit_and_miss(void)
{
	struct token_cache *c = token_cache_new(8, 1 << 20);
	static const char *const sub[] = { "user/42/*", "news", NULL }, *const pub[] = { "chat/*", NULL };
	struct jwt_rights put = rights(sub, pub, NOW + 60), got;
	CHECK(!has(c, 1, NOW));
	token_cache_put(c, key(1), &put, NOW, NOW + 70);
	CHECK_EQ_INT(token_cache_entries(c), 1);
	CHECK(token_cache_get(c, key(1), NOW + 5, &got));
	CHECK(same_rights(&put, &got));
	/* A copy: freeing the cache's answer or the original leaves the other. */
	CHECK(got.subscribe != put.subscribe && got.subscribe[0] != put.subscribe[0]);
	jwt_rights_free(&got);
	jwt_rights_free(&put);
	CHECK(token_cache_get(c, key(1), NOW + 6, &got));
	CHECK(got.nsubscribe == 2 && !strcmp(got.subscribe[1], "news") && got.npublish == 1 &&
	      !strcmp(got.publish[0], "chat/*") && got.exp == NOW + 60);
	jwt_rights_free(&got);
	/* Another key (the same first bytes, another last) is a miss. */
	unsigned char near[TOKEN_CACHE_KEY_LEN];
	memcpy(near, key(1), sizeof(near));
	near[TOKEN_CACHE_KEY_LEN - 1] ^= 1;
	CHECK(!token_cache_get(c, near, NOW, &got));
	CHECK(!has(c, 2, NOW));
	/* Rights that grant nothing are cached as such. */
	struct jwt_rights none = rights(NULL, NULL, NOW + 60);
	token_cache_put(c, key(2), &none, NOW, NOW + 70);
	CHECK(token_cache_get(c, key(2), NOW, &got));
	CHECK(got.subscribe == NULL && got.nsubscribe == 0 && got.publish == NULL && got.npublish == 0);
	jwt_rights_free(&got);
	token_cache_free(c);
}

static void test_expiry(void)
{
	struct token_cache *c = token_cache_new(8, 1 << 20);
	static const char *const sub[] = { "a", NULL };
	struct jwt_rights r = rights(sub, NULL, NOW + 60);
	token_cache_put(c, key(1), &r, NOW, NOW + 70);
	CHECK(has(c, 1, NOW + 70)); /* the last second it is valid */
	CHECK(!has(c, 1, NOW + 71));
	CHECK_EQ_INT(token_cache_entries(c), 0); /* an entry past its end is dropped */
	CHECK(!has(c, 1, NOW + 5));
	/* A clock that went back before the entry was put: a miss, dropped. */
	token_cache_put(c, key(2), &r, NOW, NOW + 70);
	CHECK(has(c, 2, NOW));
	CHECK(!has(c, 2, NOW - 1));
	CHECK(!has(c, 2, NOW));
	/* Extreme times do not overflow. */
	token_cache_put(c, key(3), &r, INT64_MIN, INT64_MAX);
	CHECK(has(c, 3, INT64_MAX) && has(c, 3, INT64_MIN) && has(c, 3, 0));
	jwt_rights_free(&r);
	token_cache_free(c);
}

static void test_entry_bound(void)
{
	struct token_cache *c = token_cache_new(4, 1 << 20);
	static const char *const sub[] = { "x", NULL };
	struct jwt_rights r = rights(sub, NULL, NOW + 60);
	for (unsigned k = 1; k <= 4; k++)
		token_cache_put(c, key(k), &r, NOW, NOW + 70);
	CHECK_EQ_INT(token_cache_entries(c), 4);
	/* Key 1 is used, so 2 is the least recently used when 5 comes. */
	CHECK(has(c, 1, NOW));
	token_cache_put(c, key(5), &r, NOW, NOW + 70);
	CHECK_EQ_INT(token_cache_entries(c), 4);
	CHECK(!has(c, 2, NOW));
	CHECK(has(c, 1, NOW) && has(c, 3, NOW) && has(c, 4, NOW) && has(c, 5, NOW));
	/* Many more: never past the bound, the newest four kept. */
	for (unsigned k = 6; k <= 1000; k++)
		token_cache_put(c, key(k), &r, NOW, NOW + 70);
	CHECK_EQ_INT(token_cache_entries(c), 4);
	for (unsigned k = 997; k <= 1000; k++)
		CHECK(has(c, k, NOW));
	CHECK(!has(c, 996, NOW));
	/* Putting a key again replaces it (one entry, the new rights). */
	static const char *const other[] = { "y", "z", NULL };
	struct jwt_rights r2 = rights(other, NULL, NOW + 90), got;
	token_cache_put(c, key(1000), &r2, NOW, NOW + 100);
	CHECK_EQ_INT(token_cache_entries(c), 4);
	CHECK(token_cache_get(c, key(1000), NOW + 95, &got) && same_rights(&got, &r2));
	jwt_rights_free(&got);
	jwt_rights_free(&r2);
	jwt_rights_free(&r);
	token_cache_free(c);
}

static void test_byte_bound(void)
{
	/* Each entry with one 199-character pattern holds 200 bytes of text;
	 * a bound of three such entries keeps three, the newest. */
	char pattern[200];
	memset(pattern, 'p', sizeof(pattern) - 1);
	pattern[sizeof(pattern) - 1] = '\0';
	const char *sub[] = { pattern, NULL };
	struct jwt_rights r = rights(sub, NULL, NOW + 60);
	struct token_cache *probe = token_cache_new(1, 1 << 20);
	token_cache_put(probe, key(1), &r, NOW, NOW + 70);
	size_t one = token_cache_bytes(probe);
	CHECK(one >= 200 + sizeof(char *));
	token_cache_free(probe);

	struct token_cache *c = token_cache_new(100, 3 * one);
	for (unsigned k = 1; k <= 10; k++) {
		token_cache_put(c, key(k), &r, NOW, NOW + 70);
		CHECK(token_cache_bytes(c) <= 3 * one);
	}
	CHECK_EQ_INT(token_cache_entries(c), 3);
	CHECK(has(c, 8, NOW) && has(c, 9, NOW) && has(c, 10, NOW) && !has(c, 7, NOW));
	/* Larger than the whole bound: not cached, and nothing evicted. */
	char big[4000];
	memset(big, 'b', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *bigsub[] = { big, NULL };
	struct jwt_rights rb = rights(bigsub, NULL, NOW + 60);
	token_cache_put(c, key(11), &rb, NOW, NOW + 70);
	CHECK(!has(c, 11, NOW));
	CHECK_EQ_INT(token_cache_entries(c), 3);
	jwt_rights_free(&rb);
	jwt_rights_free(&r);
	token_cache_free(c);
}

int main(void)
{
	test_hit_and_miss();
	test_expiry();
	test_entry_bound();
	test_byte_bound();
	token_cache_free(NULL);
	return check_done("test_token_cache");
}
