/* SPDX-License-Identifier: BSD-2-Clause */
/* test_jwks.c: JWK Sets (src/auth/jwks.c) and tokens verified by kid
 * (src/auth/jwt.c). Keys are made here with OpenSSL (RSA 2048, EC P-256,
 * Ed25519, a 40-byte secret), written out as JWK JSON by this file's own
 * encoder, and tokens are signed here with EVP, so that jwks.c reads what
 * an identity provider would publish:
 *   - a set of one key of each type parses, each key with its algorithm,
 *     kid and issuer, and builds a verifier;
 *   - each refusal names the key (index and kid) and the member: shape,
 *     kty, alg against kty, use, private members, short keys, a point off
 *     the curve, bad base64url, a missing or repeated kid, a bad iss;
 *   - tokens: each key chosen by kid verifies; an unknown kid, no kid with
 *     several keys, an algorithm other than the key's, another key's
 *     signature and an issuer other than the key's are refused, and
 *     another algorithm is named before a crit member as without a set;
 *   - EdDSA from a PEM file with jwt_algorithm = EdDSA;
 *   - jwt_jwks_file beside jwt_algorithm or another key file is refused.
 * ASan's leak check at exit covers jwks_free and jwt_verifier_free. */
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b64url.h"
#include "check.h"
#include "auth/jwks.h"
#include "auth/jwt.h"

#define NOW INT64_C(1700000000)

static char tmpdir[64];
static EVP_PKEY *rsa, *ec, *ed, *ed_other, *rsa_short;
static const char secret[] = "0123456789abcdef0123456789abcdef01234567"; /* 40 bytes */

/* The big-endian bytes of k's BIGNUM parameter name, base64url, padded on
 * the left to width bytes (0: minimal). */
static void bn_param(EVP_PKEY *k, const char *name, size_t width, char *out)
{
	BIGNUM *bn = NULL;
	unsigned char buf[1024];
	if (!EVP_PKEY_get_bn_param(k, name, &bn))
		abort();
	int n = width ? BN_bn2binpad(bn, buf, (int)width) : BN_bn2bin(bn, buf);
	BN_free(bn);
	b64url(buf, (size_t)n, out);
}

/* k's public members as JWK JSON text (without braces). */
static void jwk_members(EVP_PKEY *k, char *out, size_t len)
{
	char a[1400], b[1400];
	if (EVP_PKEY_is_a(k, "RSA")) {
		bn_param(k, OSSL_PKEY_PARAM_RSA_N, 0, a);
		bn_param(k, OSSL_PKEY_PARAM_RSA_E, 0, b);
		if (snprintf(out, len, "\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"%s\"", a, b) >= (int)len)
			abort(); /* the caller's room is sized for these keys */
	} else if (EVP_PKEY_is_a(k, "EC")) {
		bn_param(k, OSSL_PKEY_PARAM_EC_PUB_X, 32, a);
		bn_param(k, OSSL_PKEY_PARAM_EC_PUB_Y, 32, b);
		if (snprintf(out, len, "\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"", a, b) >= (int)len)
			abort(); /* the caller's room is sized for these keys */
	} else {
		unsigned char raw[32];
		size_t n = sizeof(raw);
		if (!EVP_PKEY_get_raw_public_key(k, raw, &n))
			abort();
		b64url(raw, n, a);
		if (snprintf(out, len, "\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"%s\"", a) >= (int)len)
			abort(); /* the caller's room is sized for these keys */
	}
}

static void oct_members(char *out, size_t len)
{
	char k[80];
	b64url((const unsigned char *)secret, sizeof(secret) - 1, k);
	snprintf(out, len, "\"kty\":\"oct\",\"k\":\"%s\"", k);
}

static const char *write_file(const char *name, const char *text)
{
	static char paths[8][128];
	static int i;
	char *p = paths[i++ % 8];
	snprintf(p, sizeof(paths[0]), "%s/%s", tmpdir, name);
	FILE *f = fopen(p, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		abort();
	return p;
}

/* The set of the four test keys: kids "rsa", "ec", "ed", "hs"; "ed" held
 * to the issuer "https://idp.example". */
static char *four_keys(void)
{
	char r[1400], e[400], d[200], o[200];
	char *out = malloc(4096);
	jwk_members(rsa, r, sizeof(r));
	jwk_members(ec, e, sizeof(e));
	jwk_members(ed, d, sizeof(d));
	oct_members(o, sizeof(o));
	snprintf(out, 4096,
		 "{\"keys\":[{\"kid\":\"rsa\",\"use\":\"sig\",\"alg\":\"RS256\",%s},{\"kid\":\"ec\",%s},"
		 "{\"kid\":\"ed\",\"alg\":\"EdDSA\",\"iss\":\"https://idp.example\",%s},{\"kid\":\"hs\",%s}]}",
		 r, e, d, o);
	return out;
}

/* Whether jwks_parse refuses text with a message holding want. */
static bool refused(const char *text, const char *want)
{
	struct jwks s;
	char err[512];
	int r = jwks_parse(text, strlen(text), &s, err, sizeof(err));
	if (r == 0) {
		jwks_free(&s);
		fprintf(stderr, "accepted: %s\n", text);
		return false;
	}
	if (!strstr(err, want) || s.n != 0) {
		fprintf(stderr, "error \"%s\" lacks \"%s\"\n", err, want);
		return false;
	}
	return true;
}

static void test_parse(void)
{
	char *text = four_keys();
	struct jwks s;
	char err[512];
	CHECK_EQ_INT(jwks_parse(text, strlen(text), &s, err, sizeof(err)), 0);
	CHECK_EQ_INT(s.n, 4);
	if (s.n == 4) {
		CHECK(s.keys[0].alg == JWK_RS256 && s.keys[1].alg == JWK_ES256 && s.keys[2].alg == JWK_EDDSA &&
		      s.keys[3].alg == JWK_HS256);
		CHECK(jwks_find(&s, "ec", 2) == &s.keys[1] && jwks_find(&s, "e", 1) == NULL);
		CHECK(s.keys[2].iss && strcmp(s.keys[2].iss, "https://idp.example") == 0 && !s.keys[0].iss);
		CHECK(s.keys[3].secret_len == sizeof(secret) - 1 && memcmp(s.keys[3].secret, secret, 40) == 0);
		CHECK(EVP_PKEY_eq(s.keys[0].pkey, rsa) == 1 && EVP_PKEY_eq(s.keys[1].pkey, ec) == 1 &&
		      EVP_PKEY_eq(s.keys[2].pkey, ed) == 1);
	}
	jwks_free(&s);
	free(text);

	/* One key needs no kid. */
	char m[400], t[600];
	jwk_members(ed, m, sizeof(m));
	snprintf(t, sizeof(t), "{\"keys\":[{%s}],\"other\":1}", m);
	CHECK_EQ_INT(jwks_parse(t, strlen(t), &s, err, sizeof(err)), 0);
	CHECK(s.n == 1 && !s.keys[0].kid);
	jwks_free(&s);
}

static void test_refusals(void)
{
	char e[400], d[200], o[200], r[1400], t[3000];
	jwk_members(ec, e, sizeof(e));
	jwk_members(ed, d, sizeof(d));
	oct_members(o, sizeof(o));
	CHECK(refused("[]", "not a JSON object"));
	CHECK(refused("{\"keys\":", "not a JSON object"));
	CHECK(refused("{}", "\"keys\": missing"));
	CHECK(refused("{\"keys\":{}}", "\"keys\": not an array"));
	CHECK(refused("{\"keys\":[]}", "\"keys\": empty"));
	CHECK(refused("{\"keys\":[1]}", "keys[0]: not a JSON object"));
	CHECK(refused("{\"keys\":[{\"kid\":\"a\"}]}", "keys[0] (kid \"a\"): \"kty\": missing"));
	CHECK(refused("{\"keys\":[{\"kid\":\"a\",\"kty\":\"DSA\"}]}", "\"kty\": not one of RSA, EC, OKP, oct"));
	CHECK(refused("{\"keys\":[{\"kid\":7,\"kty\":\"oct\"}]}", "keys[0]: \"kid\": not a string"));
	CHECK(refused("{\"keys\":[{\"kid\":\"\",\"kty\":\"oct\"}]}", "\"kid\": must be 1 to 256 bytes"));
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",\"alg\":\"RS256\",%s}]}", e);
	CHECK(refused(t, "keys[0] (kid \"a\"): \"alg\": a key of kty \"EC\" verifies ES256 only"));
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",\"use\":\"enc\",%s}]}", e);
	CHECK(refused(t, "\"use\": must be \"sig\""));
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",\"d\":\"AAAA\",%s}]}", d);
	CHECK(refused(t, "keys[0] (kid \"a\"): \"d\": a private key member"));
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",\"iss\":3,%s}]}", d);
	CHECK(refused(t, "\"iss\": not a string"));
	/* Several keys: each needs a kid, all different. */
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",%s},{%s}]}", e, d);
	CHECK(refused(t, "keys[1]: \"kid\": missing; each key of a set of more than one needs a kid"));
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",%s},{\"kid\":\"a\",%s}]}", e, d);
	CHECK(refused(t, "keys[1]: \"kid\": \"a\" is also the kid of keys[0]"));
	/* Key material. */
	CHECK(refused("{\"keys\":[{\"kid\":\"a\",\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"\",\"y\":\"\"}]}",
		      "keys[0] (kid \"a\"): \"crv\": is \"P-384\"; EC keys must be on P-256"));
	CHECK(refused("{\"keys\":[{\"kid\":\"a\",\"kty\":\"OKP\",\"crv\":\"X25519\",\"x\":\"\"}]}",
		      "\"crv\": is \"X25519\"; OKP keys must be Ed25519"));
	CHECK(refused("{\"keys\":[{\"kid\":\"a\",\"kty\":\"OKP\",\"crv\":\"Ed25519\"}]}", "\"x\": missing"));
	CHECK(refused("{\"keys\":[{\"kid\":\"a\",\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"AAAA\"}]}",
		      "\"x\": 3 bytes, where 32 are needed"));
	CHECK(refused("{\"keys\":[{\"kid\":\"a\",\"kty\":\"oct\",\"k\":\"c2hvcnQ\"}]}",
		      "keys[0] (kid \"a\"): \"k\": 5 bytes, where 32 to 4096 are allowed"));
	CHECK(refused("{\"keys\":[{\"kid\":\"a\",\"kty\":\"oct\",\"k\":\"c2hvcnQ=\"}]}",
		      "\"k\": not base64url without padding"));
	/* A point off the curve: y of another point. */
	char x[64], y[64];
	bn_param(ec, OSSL_PKEY_PARAM_EC_PUB_X, 32, x);
	bn_param(ec, OSSL_PKEY_PARAM_EC_PUB_Y, 32, y);
	y[0] = y[0] == 'A' ? 'B' : 'A';
	snprintf(t, sizeof(t),
		 "{\"keys\":[{\"kid\":\"a\",\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"%s\",\"y\":\"%s\"}]}", x, y);
	CHECK(refused(t, "keys[0] (kid \"a\"): \"x\": with \"y\", not a point on P-256"));
	jwk_members(rsa_short, r, sizeof(r));
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",%s}]}", r);
	CHECK(refused(t, "\"n\": the RSA key is shorter than 2048 bits"));
	/* e even, or 1; a leading zero byte is taken. */
	{
		char n64[400];
		bn_param(rsa, OSSL_PKEY_PARAM_RSA_N, 0, n64);
		snprintf(t, sizeof(t), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AAE\"}]}", n64);
		CHECK(refused(t, "\"e\": not a usable RSA public exponent"));
		snprintf(t, sizeof(t), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQAA\"}]}", n64);
		CHECK(refused(t, "\"e\": not a usable RSA public exponent"));
		struct jwks ok;
		char err[512];
		snprintf(t, sizeof(t), "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AAEAAQ\"}]}", n64);
		CHECK_EQ_INT(jwks_parse(t, strlen(t), &ok, err, sizeof(err)), 0);
		CHECK(ok.n == 1 && EVP_PKEY_eq(ok.keys[0].pkey, rsa) == 1);
		jwks_free(&ok);
	}
	/* The secret never shows in a message. */
	snprintf(t, sizeof(t), "{\"keys\":[{\"kid\":\"a\",\"alg\":\"HS512\",%s}]}", o);
	CHECK(refused(t, "\"alg\": a key of kty \"oct\" verifies HS256 only"));
}

/* ---- tokens ----------------------------------------------------------- */

/* A token with header {"alg":alg[,"kid":kid]} and the payload, signed by k
 * (NULL: the HS256 secret) as alg says. */
static char *token(const char *alg, const char *kid, const char *payload, EVP_PKEY *k)
{
	char header[200], h64[300], p64[1000], sig64[700];
	unsigned char sig[512];
	size_t sig_len = sizeof(sig);
	if (kid)
		snprintf(header, sizeof(header), "{\"alg\":\"%s\",\"kid\":\"%s\"}", alg, kid);
	else
		snprintf(header, sizeof(header), "{\"alg\":\"%s\"}", alg);
	b64url((const unsigned char *)header, strlen(header), h64);
	b64url((const unsigned char *)payload, strlen(payload), p64);
	char *out = malloc(3000);
	int n = snprintf(out, 3000, "%s.%s", h64, p64);
	if (!k) {
		if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, secret, sizeof(secret) - 1,
			       (const unsigned char *)out, (size_t)n, sig, sizeof(sig), &sig_len))
			abort();
	} else {
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		const char *digest = EVP_PKEY_is_a(k, "ED25519") ? NULL : "SHA256";
		if (EVP_DigestSignInit_ex(md, NULL, digest, NULL, NULL, k, NULL) != 1 ||
		    EVP_DigestSign(md, sig, &sig_len, (const unsigned char *)out, (size_t)n) != 1)
			abort();
		EVP_MD_CTX_free(md);
		if (EVP_PKEY_is_a(k, "EC")) {
			/* DER to r || s */
			const unsigned char *p = sig;
			ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)sig_len);
			unsigned char raw[64];
			BN_bn2binpad(ECDSA_SIG_get0_r(es), raw, 32);
			BN_bn2binpad(ECDSA_SIG_get0_s(es), raw + 32, 32);
			ECDSA_SIG_free(es);
			memcpy(sig, raw, 64);
			sig_len = 64;
		}
	}
	b64url(sig, sig_len, sig64);
	snprintf(out + n, 3000 - (size_t)n, ".%s", sig64);
	return out;
}

static int result(struct jwt_verifier *v, char *tok, const char **why)
{
	struct jwt_rights r;
	int e = jwt_verify(v, tok, strlen(tok), NOW, &r, why);
	jwt_rights_free(&r);
	free(tok);
	return e;
}

static struct jwt_settings jwks_settings(const char *path)
{
	return (struct jwt_settings){ .algorithm = "",
				      .jwks_file = path,
				      .leeway_s = 0,
				      .subscribe_claim = "subscribe",
				      .publish_claim = "publish" };
}

static void test_tokens(void)
{
	char *text = four_keys();
	struct jwt_settings s = jwks_settings(write_file("four.json", text));
	struct jwt_verifier *v;
	char err[512];
	const char *why;
	free(text);
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), 0);
	CHECK_EQ_INT(jwt_verifier_keys(v), 4);
	const char *pl = "{\"exp\":1700000100,\"subscribe\":[\"a\"]}";
	const char *pl_iss = "{\"exp\":1700000100,\"iss\":\"https://idp.example\"}";
	CHECK_EQ_INT(result(v, token("RS256", "rsa", pl, rsa), &why), JWT_OK);
	CHECK_EQ_INT(result(v, token("ES256", "ec", pl, ec), &why), JWT_OK);
	CHECK_EQ_INT(result(v, token("HS256", "hs", pl, NULL), &why), JWT_OK);
	CHECK_EQ_INT(result(v, token("EdDSA", "ed", pl_iss, ed), &why), JWT_OK);
	/* The key "ed" is held to its issuer. */
	CHECK_EQ_INT(result(v, token("EdDSA", "ed", pl, ed), &why), JWT_BAD_ISSUER);
	CHECK(strstr(why, "its key (kid)") != NULL);
	CHECK_EQ_INT(result(v, token("EdDSA", "ed", "{\"exp\":1700000100,\"iss\":\"https://evil\"}", ed), &why),
		     JWT_BAD_ISSUER);
	/* Unknown kid, no kid: refused, never tried against the keys. */
	CHECK_EQ_INT(result(v, token("RS256", "nope", pl, rsa), &why), JWT_UNKNOWN_KEY);
	CHECK(strstr(why, "unknown key id") != NULL);
	CHECK_EQ_INT(result(v, token("RS256", NULL, pl, rsa), &why), JWT_UNKNOWN_KEY);
	CHECK(strstr(why, "no key id (kid)") != NULL);
	/* The key's algorithm only. */
	CHECK_EQ_INT(result(v, token("HS256", "rsa", pl, NULL), &why), JWT_BAD_ALG);
	CHECK_EQ_INT(result(v, token("ES256", "rsa", pl, ec), &why), JWT_BAD_ALG);
	/* Another key's signature under a kid. */
	CHECK_EQ_INT(result(v, token("EdDSA", "ed", pl_iss, ed_other), &why), JWT_BAD_SIGNATURE);
	CHECK_EQ_INT(result(v, token("ES256", "ec", pl, ec), &why), JWT_OK);
	/* A kid that is not a string. */
	{
		char h64[100], p64[200], tok[400];
		const char *header = "{\"alg\":\"HS256\",\"kid\":1}";
		b64url((const unsigned char *)header, strlen(header), h64);
		b64url((const unsigned char *)pl, strlen(pl), p64);
		snprintf(tok, sizeof(tok), "%s.%s.AAAA", h64, p64);
		CHECK_EQ_INT(result(v, strdup(tok), &why), JWT_MALFORMED);
	}
	/* As without a key set: another algorithm is named before a crit
	 * member, which is malformed. */
	{
		char h64[100], p64[200], tok[400];
		const char *headers[2] = { "{\"alg\":\"HS256\",\"kid\":\"rsa\",\"crit\":[\"x\"]}",
					   "{\"alg\":\"RS256\",\"kid\":\"rsa\",\"crit\":[\"x\"]}" };
		for (int i = 0; i < 2; i++) {
			b64url((const unsigned char *)headers[i], strlen(headers[i]), h64);
			b64url((const unsigned char *)pl, strlen(pl), p64);
			snprintf(tok, sizeof(tok), "%s.%s.AAAA", h64, p64);
			CHECK_EQ_INT(result(v, strdup(tok), &why), i == 0 ? JWT_BAD_ALG : JWT_MALFORMED);
		}
	}
	/* The cache answers a token it verified, from the verifier of its
	 * set only. */
	char *t = token("RS256", "rsa", pl, rsa);
	struct jwt_rights r;
	struct jwt_cost cost;
	CHECK_EQ_INT(jwt_check(v, t, strlen(t), NOW, &r, &why, &cost), JWT_OK);
	jwt_rights_free(&r);
	CHECK_EQ_INT(jwt_check(v, t, strlen(t), NOW, &r, &why, &cost), JWT_OK);
	CHECK(cost.cached);
	jwt_rights_free(&r);
	jwt_verifier_free(v);
	/* The set without "rsa": a new verifier refuses the token the old
	 * one had cached. */
	char m[400], set[600];
	jwk_members(ec, m, sizeof(m));
	snprintf(set, sizeof(set), "{\"keys\":[{\"kid\":\"ec\",%s}]}", m);
	s = jwks_settings(write_file("one.json", set));
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), 0);
	CHECK_EQ_INT(jwt_check(v, t, strlen(t), NOW, &r, &why, &cost), JWT_UNKNOWN_KEY);
	CHECK(!cost.cached && !cost.signature);
	free(t);
	/* One key: a token without kid takes it. */
	CHECK_EQ_INT(result(v, token("ES256", NULL, pl, ec), &why), JWT_OK);
	jwt_verifier_free(v);
}

static void test_settings(void)
{
	struct jwt_settings s;
	struct jwt_verifier *v;
	char err[512];
	/* EdDSA from a PEM public key. */
	const char *pem = NULL;
	{
		BIO *b = BIO_new(BIO_s_mem());
		char *data;
		PEM_write_bio_PUBKEY(b, ed);
		long n = BIO_get_mem_data(b, &data);
		char *text = strndup(data, (size_t)n);
		pem = write_file("ed.pem", text);
		free(text);
		BIO_free(b);
	}
	s = (struct jwt_settings){
		.algorithm = "EdDSA", .public_key_file = pem, .subscribe_claim = "subscribe", .publish_claim = "publish"
	};
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), 0);
	const char *why;
	const char *pl = "{\"exp\":1700000100}";
	CHECK_EQ_INT(result(v, token("EdDSA", NULL, pl, ed), &why), JWT_OK);
	CHECK_EQ_INT(result(v, token("EdDSA", "any", pl, ed), &why), JWT_OK); /* kid not read */
	CHECK_EQ_INT(result(v, token("EdDSA", NULL, pl, ed_other), &why), JWT_BAD_SIGNATURE);
	CHECK_EQ_INT(result(v, token("ES256", NULL, pl, ec), &why), JWT_BAD_ALG);
	jwt_verifier_free(v);
	s.algorithm = "ES256";
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), -1);
	CHECK(strstr(err, "not an EC key, which ES256 needs") != NULL);
	s.algorithm = "EdDSA";
	s.public_key_file = NULL;
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), -1);
	CHECK(strstr(err, "jwt_algorithm = \"EdDSA\" needs jwt_public_key_file") != NULL);

	/* jwt_jwks_file alone. */
	s = jwks_settings(write_file("bad.json", "{\"keys\":[]}"));
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), -1);
	CHECK(strstr(err, "jwt_jwks_file = \"") && strstr(err, "bad.json\": \"keys\": empty"));
	s.algorithm = "RS256";
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), -1);
	CHECK(strstr(err, "jwt_algorithm = \"RS256\" is set, but jwt_jwks_file names each key's algorithm") != NULL);
	s.algorithm = "";
	s.secret_file = "/x";
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), -1);
	CHECK(strstr(err, "jwt_secret_file is set, but jwt_jwks_file holds the keys") != NULL);
	s = jwks_settings("/nonexistent/keys.json");
	CHECK_EQ_INT(jwt_verifier_new(&s, &v, err, sizeof(err)), -1);
	CHECK(strstr(err, "jwt_jwks_file = \"/nonexistent/keys.json\": No such file") != NULL);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/herald-test-jwks-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	rsa_short = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	ed = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	ed_other = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	if (!rsa || !rsa_short || !ec || !ed || !ed_other) {
		fprintf(stderr, "cannot make the test keys\n");
		return 2;
	}
	test_parse();
	test_refusals();
	test_tokens();
	test_settings();
	EVP_PKEY_free(rsa);
	EVP_PKEY_free(rsa_short);
	EVP_PKEY_free(ec);
	EVP_PKEY_free(ed);
	EVP_PKEY_free(ed_other);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		perror("rm");
	return check_done("test_jwks");
}
