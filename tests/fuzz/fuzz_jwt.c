/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_jwt.c: fuzz target for jwt_verify in src/auth/jwt.c. Three fixed
 * verifiers are built once: two HS256 ones (one that checks nothing
 * optional; one with an audience, an issuer, no leeway and Mercure's nested
 * claim names) from a secret written to a temporary file, and one from a
 * JWK Set of two oct keys with that secret (kid "a", and kid "b" held to
 * the issuer https://auth.example), so that the header's kid is fuzzed. An input is either
 *   - a token, verified as it is; or
 *   - 'S' + header JSON + '\n' + payload JSON: encoded and signed here with
 *     the same secret, so that mutations reach the claims behind the
 *     signature.
 * Invariants, for each verifier:
 *   - the result is JWT_OK or one of the jwt_error values; *why is NULL on
 *     success and one of the documented reasons otherwise;
 *   - on failure the rights are empty; on success every pattern is a valid
 *     topic pattern (with no NUL inside), the lists and counts agree, and
 *     exp is not past the leeway; jwt_rights_free leaves them empty;
 *   - a raw token that verifies has exactly three parts, is at most 8 KiB,
 *     and its signature part is the base64url of the HMAC of the first two
 *     (computed here, apart from jwt.c);
 *   - a token signed here never fails its signature check;
 *   - jwt_check (the cache in front) gives jwt_verify's answer, twice: the
 *     second time from the cache when the token verified, with the same
 *     rights, and never a signature check for a token jwt_verify refused
 *     before its signature.
 * Leaks and over-reads are the sanitizers' (and the driver's guard page's).
 */
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "auth/jwt.h"
#include "core/topic.h"

#define NOW INT64_C(1700000000)
#define MAX_TOKEN 8192

/* The secret of both verifiers (and of the seed tokens in the corpus). */
static const char secret[] = "herald-fuzz-secret-0123456789abcdef";

struct target {
	struct jwt_verifier *v;
	int64_t leeway;
};
#define NTARGETS 3
static struct target targets[NTARGETS];

static void free_targets(void)
{
	for (size_t i = 0; i < NTARGETS; i++)
		jwt_verifier_free(targets[i].v);
}

static size_t b64url(const unsigned char *in, size_t n, char *out); /* below */

/* Build the verifiers, once. */
static void setup(void)
{
	char path[] = "/tmp/herald-fuzz-jwt-XXXXXX", path2[] = "/tmp/herald-fuzz-jwks-XXXXXX";
	int fd = mkstemp(path);
	FUZZ_ASSERT(fd >= 0);
	FUZZ_ASSERT(write(fd, secret, sizeof(secret) - 1) == (ssize_t)(sizeof(secret) - 1));
	close(fd);
	struct jwt_settings s = { .algorithm = "HS256",
				  .secret_file = path,
				  .public_key_file = "",
				  .leeway_s = 10,
				  .audience = "",
				  .issuer = "",
				  .subscribe_claim = "subscribe",
				  .publish_claim = "publish" };
	char err[512];
	FUZZ_ASSERT(jwt_verifier_new(&s, &targets[0].v, err, sizeof(err)) == 0 && targets[0].v);
	targets[0].leeway = 10;
	s.leeway_s = 0;
	s.audience = "herald";
	s.issuer = "https://auth.example";
	s.subscribe_claim = "mercure.subscribe";
	s.publish_claim = "mercure.publish";
	FUZZ_ASSERT(jwt_verifier_new(&s, &targets[1].v, err, sizeof(err)) == 0 && targets[1].v);
	targets[1].leeway = 0;
	unlink(path);
	/* The JWK Set: the secret as base64url, under two kids. */
	char k[80], set[300];
	b64url((const unsigned char *)secret, sizeof(secret) - 1, k);
	snprintf(set, sizeof(set),
		 "{\"keys\":[{\"kid\":\"a\",\"kty\":\"oct\",\"k\":\"%s\"},"
		 "{\"kid\":\"b\",\"kty\":\"oct\",\"k\":\"%s\",\"iss\":\"https://auth.example\"}]}",
		 k, k);
	fd = mkstemp(path2);
	FUZZ_ASSERT(fd >= 0 && write(fd, set, strlen(set)) == (ssize_t)strlen(set));
	close(fd);
	s = (struct jwt_settings){ .algorithm = "",
				   .jwks_file = path2,
				   .leeway_s = 10,
				   .subscribe_claim = "subscribe",
				   .publish_claim = "publish" };
	FUZZ_ASSERT(jwt_verifier_new(&s, &targets[2].v, err, sizeof(err)) == 0 && targets[2].v);
	targets[2].leeway = 10;
	unlink(path2);
	atexit(free_targets);
}

/* base64url without padding, written apart from jwt.c's decoder. */
static size_t b64url(const unsigned char *in, size_t n, char *out)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = abc[(v >> 6) & 63];
		if (i + 2 < n)
			out[o++] = abc[v & 63];
	}
	out[o] = '\0';
	return o;
}

/* The encoded HMAC-SHA256 of input[0..n) under the secret, into out. */
static size_t hmac_b64(const char *input, size_t n, char *out)
{
	unsigned char mac[32];
	size_t len = 0;
	FUZZ_ASSERT(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, secret, sizeof(secret) - 1,
			      (const unsigned char *)input, n, mac, sizeof(mac), &len) != NULL &&
		    len == 32);
	return b64url(mac, 32, out);
}

static bool known_reason(const char *why)
{
	static const char *const reasons[] = {
		"the token is malformed",
		"the token's algorithm is not the one configured",
		"the token's signature does not verify",
		"the token has expired",
		"the token has no exp claim",
		"the token is not valid yet",
		"the token's audience is not this server",
		"the token's issuer is not the one configured",
		"unknown key id: no key of jwt_jwks_file has the token's kid",
		"the token has no key id (kid), which a key set of several keys needs",
		"the token's issuer is not the one its key (kid) is held to",
	};
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (why && strcmp(why, reasons[i]) == 0)
			return true;
	return false;
}

static void check_list(char **list, size_t n)
{
	FUZZ_ASSERT((n == 0) == (list == NULL));
	for (size_t i = 0; i < n; i++) {
		FUZZ_ASSERT(list[i] != NULL);
		FUZZ_ASSERT(topic_pattern_valid(list[i], strlen(list[i])));
	}
}

/* A raw token that verified: its third part is the HMAC of the rest. */
static void check_signature(const char *tok, size_t len)
{
	FUZZ_ASSERT(len <= MAX_TOKEN);
	const char *d1 = memchr(tok, '.', len);
	FUZZ_ASSERT(d1 != NULL);
	const char *d2 = memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - tok));
	FUZZ_ASSERT(d2 != NULL);
	FUZZ_ASSERT(memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - tok)) == NULL);
	char want[64];
	size_t n = hmac_b64(tok, (size_t)(d2 - tok), want);
	FUZZ_ASSERT(len - (size_t)(d2 + 1 - tok) == n && memcmp(d2 + 1, want, n) == 0);
}

static bool same_list(char **a, size_t na, char **b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

/* jwt_check agrees with jwt_verify's result e and rights *want, the
 * second time from the cache when the token verified. */
static void check_cached(const struct target *t, const char *tok, size_t len, int e, const struct jwt_rights *want)
{
	for (int round = 0; round < 2; round++) {
		struct jwt_rights r;
		struct jwt_cost cost;
		const char *why = (const char *)1;
		int c = jwt_check(t->v, tok, len, NOW, &r, &why, &cost);
		FUZZ_ASSERT(c == e);
		FUZZ_ASSERT(!(cost.cached && cost.signature));
		if (e == JWT_OK) {
			FUZZ_ASSERT(why == NULL && r.exp == want->exp);
			FUZZ_ASSERT(same_list(r.subscribe, r.nsubscribe, want->subscribe, want->nsubscribe));
			FUZZ_ASSERT(same_list(r.publish, r.npublish, want->publish, want->npublish));
			FUZZ_ASSERT(round == 0 || cost.cached);
		} else {
			FUZZ_ASSERT(known_reason(why) && !cost.cached);
			FUZZ_ASSERT(r.subscribe == NULL && r.nsubscribe == 0 && r.publish == NULL && r.npublish == 0);
			if (e == JWT_BAD_ALG || e == JWT_EXPIRED || e == JWT_NOT_YET || e == JWT_UNKNOWN_KEY)
				FUZZ_ASSERT(!cost.signature);
		}
		jwt_rights_free(&r);
	}
}

/* Verify tok[0..len) with t and check every invariant; signed_here: the
 * token was signed with the verifier's secret by this target. */
static void check(const struct target *t, const char *tok, size_t len, bool signed_here)
{
	struct jwt_rights r;
	const char *why = (const char *)1;
	memset(&r, 0xa5, sizeof(r)); /* jwt_verify must set every field */
	int e = jwt_verify(t->v, tok, len, NOW, &r, &why);
	FUZZ_ASSERT(e <= JWT_OK && e >= JWT_UNKNOWN_KEY);
	FUZZ_ASSERT(e != JWT_UNKNOWN_KEY || t == &targets[2]); /* only a JWK Set has kids */
	if (e != JWT_OK) {
		FUZZ_ASSERT(known_reason(why));
		FUZZ_ASSERT(r.subscribe == NULL && r.nsubscribe == 0 && r.publish == NULL && r.npublish == 0);
		FUZZ_ASSERT(!(signed_here && e == JWT_BAD_SIGNATURE));
		check_cached(t, tok, len, e, &r);
		return;
	}
	FUZZ_ASSERT(why == NULL);
	check_list(r.subscribe, r.nsubscribe);
	check_list(r.publish, r.npublish);
	FUZZ_ASSERT(r.exp >= NOW - t->leeway - 1); /* - 1: a fraction of exp is dropped */
	if (!signed_here)
		check_signature(tok, len);
	check_cached(t, tok, len, e, &r);
	jwt_rights_free(&r);
	FUZZ_ASSERT(r.subscribe == NULL && r.nsubscribe == 0 && r.publish == NULL && r.npublish == 0);
}

/* 'S' mode: header and payload JSON, encoded and signed here. */
static void check_signed(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t hn = nl ? (size_t)(nl - data) : size;
	size_t pn = nl ? size - hn - 1 : 0;
	char *tok = malloc((size * 4) / 3 + 64);
	FUZZ_ASSERT(tok != NULL);
	size_t n = b64url(data, hn, tok);
	tok[n++] = '.';
	n += b64url(nl ? nl + 1 : data, pn, tok + n);
	tok[n] = '.';
	n += 1 + hmac_b64(tok, n, tok + n + 1);
	for (size_t i = 0; i < NTARGETS; i++)
		check(&targets[i], tok, n, true);
	free(tok);
}

int fuzz_one(const uint8_t *data, size_t size)
{
	if (!targets[0].v)
		setup();
	if (size && data[0] == 'S') {
		check_signed(data + 1, size - 1);
		return 0;
	}
	for (size_t i = 0; i < NTARGETS; i++)
		check(&targets[i], (const char *)data, size, false);
	return 0;
}
