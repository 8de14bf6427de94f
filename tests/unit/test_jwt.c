/* SPDX-License-Identifier: BSD-2-Clause */
/* test_jwt.c: signed tokens (src/auth/jwt.c). Keys are made here with OpenSSL
 * (RSA 2048, P-256; a few others to be refused), written as PEM to a
 * temporary folder beside an HS256 secret file, and tokens are signed here
 * with EVP (ES256's DER signature turned into raw r || s), so every check
 * runs against tokens built independently of jwt.c:
 *   - verifiers: each algorithm, a certificate instead of a key, and each
 *     refusal of jwt_verifier_new (file, secret length, key type, claim
 *     names), whose message never holds the secret;
 *   - tokens: good ones of each algorithm; expired, missing exp, nbf, the
 *     leeway both ways; wrong keys; an algorithm other than the verifier's,
 *     including an HS256 token keyed with the RSA public key's PEM; "none";
 *     a tampered payload; bad shapes and encodings; JSON that is not an
 *     object; rights as a string, a list, wrong types and bad patterns;
 *     Mercure's nested claims; aud and iss; a token over 8 KiB;
 *   - the JSON: the first of equal names, names as written, values
 *     decoded, strict whitespace and numbers, the depth limit.
 * ASan's leak check at exit covers jwt_verifier_free and jwt_rights_free. */
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b64url.h"
#include "check.h"
#include "auth/jwt.h"

#define NOW INT64_C(1700000000)

static char tmpdir[64];
static EVP_PKEY *rsa, *rsa_other, *ec, *ec_other;
static const char secret[] = "0123456789abcdef0123456789abcdef01234567"; /* 40 bytes */

/* ---- files and keys --------------------------------------------------- */

/* A path in the temporary folder (static storage, a few at a time). */
static const char *tmp_path(const char *name)
{
	static char paths[8][128];
	static int i;
	char *p = paths[i++ % 8];
	snprintf(p, sizeof(paths[0]), "%s/%s", tmpdir, name);
	return p;
}

static const char *write_bytes(const char *name, const void *data, size_t len)
{
	const char *p = tmp_path(name);
	FILE *f = fopen(p, "wb");
	if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
		perror(p);
		exit(2);
	}
	return p;
}

/* Write k's public key (or, with priv, its private key) as PEM. */
static const char *write_key(const char *name, EVP_PKEY *k, bool priv)
{
	const char *p = tmp_path(name);
	BIO *b = BIO_new_file(p, "w");
	int ok = b && (priv ? PEM_write_bio_PrivateKey(b, k, NULL, NULL, 0, NULL, NULL) : PEM_write_bio_PUBKEY(b, k));
	BIO_free(b);
	if (!ok) {
		fprintf(stderr, "cannot write %s\n", p);
		exit(2);
	}
	return p;
}

/* A self-signed certificate for k, as PEM. */
static const char *write_cert(const char *name, EVP_PKEY *k)
{
	const char *p = tmp_path(name);
	X509 *x = X509_new();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	X509_NAME *n = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"herald-test", -1, -1, 0);
	X509_set_issuer_name(x, n);
	BIO *b = BIO_new_file(p, "w");
	int ok = X509_sign(x, k, EVP_sha256()) > 0 && b && PEM_write_bio_X509(b, x);
	BIO_free(b);
	X509_free(x);
	if (!ok) {
		fprintf(stderr, "cannot write %s\n", p);
		exit(2);
	}
	return p;
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *s = calloc(1, 65536);
	*len = f ? fread(s, 1, 65535, f) : 0;
	if (f)
		fclose(f);
	return s;
}

/* ---- signing ---------------------------------------------------------- */

enum how { HS, RS, ES, NONE };

/* Who signs: an algorithm and its key (HS: key bytes). */
struct signer {
	enum how how;
	EVP_PKEY *pkey;
	const void *key;
	size_t key_len;
};

static const struct signer hs = { HS, NULL, secret, sizeof(secret) - 1 };

/* The signature over input[0..n) into sig (room for 512 bytes); returns
 * its length. ES256 comes out of OpenSSL as DER and is cut into r || s. */
static size_t sign(const struct signer *s, const char *input, size_t n, unsigned char *sig)
{
	size_t len = 512;
	if (s->how == NONE)
		return 0;
	if (s->how == HS) {
		if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, s->key, s->key_len, (const unsigned char *)input, n,
			       sig, 32, &len))
			abort();
		return len;
	}
	unsigned char der[512];
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	if (EVP_DigestSignInit_ex(md, NULL, "SHA256", NULL, NULL, s->pkey, NULL) != 1 ||
	    EVP_DigestSign(md, s->how == ES ? der : sig, &len, (const unsigned char *)input, n) != 1)
		abort();
	EVP_MD_CTX_free(md);
	if (s->how == RS)
		return len;
	const unsigned char *p = der;
	ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)len);
	const BIGNUM *r, *ss;
	ECDSA_SIG_get0(es, &r, &ss);
	if (BN_bn2binpad(r, sig, 32) != 32 || BN_bn2binpad(ss, sig + 32, 32) != 32)
		abort();
	ECDSA_SIG_free(es);
	return 64;
}

/* "<b64 header>.<b64 payload>" as given, signed by s; returns a new string. */
static char *sign_input(const char *input, const struct signer *s)
{
	unsigned char sig[512];
	size_t n = strlen(input), sl = sign(s, input, n, sig);
	char *t = malloc(n + 1 + (sl * 4 + 2) / 3 + 1);
	memcpy(t, input, n);
	t[n] = '.';
	b64url(sig, sl, t + n + 1);
	return t;
}

/* A token from the JSON texts of its header and payload, with bit 0 of
 * signature byte flip (counted from the end) inverted; flip 0: none. */
static char *token_flipped(const char *header, const char *payload, const struct signer *s, size_t flip)
{
	size_t hn = strlen(header), pn = strlen(payload);
	char *t = malloc((hn + pn) * 2 + 700);
	b64url((const unsigned char *)header, hn, t);
	size_t at = strlen(t);
	t[at++] = '.';
	b64url((const unsigned char *)payload, pn, t + at);
	at = strlen(t);
	unsigned char sig[512];
	size_t sl = sign(s, t, at, sig);
	if (flip && flip <= sl)
		sig[sl - flip] ^= 1;
	t[at++] = '.';
	b64url(sig, sl, t + at);
	return t;
}

/* A token from the JSON texts of its header and payload. */
static char *token(const char *header, const char *payload, const struct signer *s)
{
	size_t hn = strlen(header), pn = strlen(payload);
	char *input = malloc((hn + pn) * 2 + 8);
	b64url((const unsigned char *)header, hn, input);
	size_t at = strlen(input);
	input[at++] = '.';
	b64url((const unsigned char *)payload, pn, input + at);
	char *t = sign_input(input, s);
	free(input);
	return t;
}

static const char *header_of(enum how how)
{
	return how == HS   ? "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"
	       : how == RS ? "{\"alg\":\"RS256\",\"typ\":\"JWT\"}"
			   : "{\"alg\":\"ES256\"}";
}

/* ---- verifiers -------------------------------------------------------- */

static const char *secret_path, *rsa_path, *ec_path;

static struct jwt_settings settings(const char *alg)
{
	bool h = strcmp(alg, "HS256") == 0;
	return (struct jwt_settings){
		.algorithm = alg,
		.secret_file = h ? secret_path : "",
		.public_key_file = h                           ? ""
				   : strcmp(alg, "RS256") == 0 ? rsa_path
							       : ec_path,
		.leeway_s = 10,
		.audience = "",
		.issuer = "",
		.subscribe_claim = "subscribe",
		.publish_claim = "publish",
	};
}

static struct jwt_verifier *verifier(const struct jwt_settings *s)
{
	struct jwt_verifier *v = NULL;
	char err[512];
	if (jwt_verifier_new(s, &v, err, sizeof(err)) < 0 || !v) {
		fprintf(stderr, "jwt_verifier_new(%s): %s\n", s->algorithm, err);
		exit(2);
	}
	return v;
}

/* jwt_verifier_new is refused with a message holding want. */
static bool refused(const struct jwt_settings *s, const char *want)
{
	struct jwt_verifier *v = (struct jwt_verifier *)1;
	char err[512] = "";
	int r = jwt_verifier_new(s, &v, err, sizeof(err));
	bool ok = r == -1 && v == NULL && strstr(err, want) && !strchr(err, '\n');
	if (!ok)
		fprintf(stderr, "  jwt_verifier_new: r=%d, err \"%s\", wanted \"%s\"\n", r, err, want);
	if (r == 0)
		jwt_verifier_free(v);
	return ok;
}

/* Verify t; on failure check that *why is the reason given and r empty.
 * Returns the result; the rights stay in *r (free them). */
static int verify_at(const struct jwt_verifier *v, const char *t, int64_t now, struct jwt_rights *r)
{
	const char *why = "unset";
	memset(r, 0x5a, sizeof(*r)); /* jwt_verify must set every field */
	int e = jwt_verify(v, t, strlen(t), now, r, &why);
	if (e == JWT_OK) {
		CHECK(why == NULL);
	} else {
		CHECK(why != NULL && strncmp(why, "the token", 9) == 0);
		CHECK(r->subscribe == NULL && r->nsubscribe == 0 && r->publish == NULL && r->npublish == 0);
	}
	return e;
}

/* The result of verifying t at NOW, rights freed. */
static int result(const struct jwt_verifier *v, const char *t)
{
	struct jwt_rights r;
	int e = verify_at(v, t, NOW, &r);
	jwt_rights_free(&r);
	return e;
}

/* Sign payload with s and verify it with v; frees the token. */
static int check_payload(const struct jwt_verifier *v, const struct signer *s, const char *payload)
{
	char *t = token(header_of(s->how), payload, s);
	int e = result(v, t);
	free(t);
	return e;
}

/* The reason jwt_verify gives for t. */
static const char *why_of(const struct jwt_verifier *v, const char *t)
{
	struct jwt_rights r;
	const char *why = NULL;
	jwt_verify(v, t, strlen(t), NOW, &r, &why);
	jwt_rights_free(&r);
	return why ? why : "";
}

/* ---- tests ------------------------------------------------------------ */

static void test_verifier_new(void)
{
	struct jwt_settings s = settings("");
	struct jwt_verifier *v = (struct jwt_verifier *)1;
	char err[512];
	CHECK(jwt_verifier_new(&s, &v, err, sizeof(err)) == 0 && v == NULL);
	jwt_verifier_free(NULL);

	s = settings("HS512");
	CHECK(refused(&s, "jwt_algorithm = \"HS512\": not one of HS256, RS256, ES256, EdDSA"));
	s = settings("none");
	CHECK(refused(&s, "not one of"));
	s = settings("hs256");
	CHECK(refused(&s, "not one of"));

	/* HS256 secrets: one trailing LF or CRLF dropped, at least 32 bytes. */
	s = settings("HS256");
	s.secret_file = write_bytes("short", "SHORTSECRET\n", 12);
	CHECK(refused(&s, "the secret is 11 bytes; HS256 needs at least 32"));
	CHECK(refused(&s, s.secret_file));
	char e2[512] = "";
	jwt_verifier_new(&s, &v, e2, sizeof(e2));
	CHECK(strstr(e2, "SHORT") == NULL && strstr(e2, "jwt_secret_file") != NULL);
	s.secret_file = write_bytes("empty", "", 0);
	CHECK(refused(&s, "the file is empty"));
	s.secret_file = write_bytes("crlf", "\r\n", 2);
	CHECK(refused(&s, "the file is empty"));
	s.secret_file = write_bytes("s31", "0123456789012345678901234567890\n", 32);
	CHECK(refused(&s, "the secret is 31 bytes"));
	s.secret_file = write_bytes("s31crlf", "0123456789012345678901234567890\r\n", 33);
	CHECK(refused(&s, "the secret is 31 bytes"));
	s.secret_file = "/nonexistent/secret";
	CHECK(refused(&s, "jwt_secret_file = \"/nonexistent/secret\": No such file or directory"));
	s.secret_file = tmpdir;
	CHECK(refused(&s, "Is a directory"));
	s.secret_file = "/dev/null";
	CHECK(refused(&s, "not a regular file"));
	s.secret_file = "";
	CHECK(refused(&s, "jwt_algorithm = \"HS256\" needs jwt_secret_file"));
	s = settings("HS256");
	s.public_key_file = rsa_path;
	CHECK(refused(&s, "jwt_public_key_file is set, but jwt_algorithm = \"HS256\" reads jwt_secret_file"));
	s = settings("RS256");
	s.secret_file = secret_path;
	CHECK(refused(&s, "jwt_secret_file is set"));
	s.secret_file = "";
	s.public_key_file = "";
	CHECK(refused(&s, "jwt_algorithm = \"RS256\" needs jwt_public_key_file"));

	/* Public keys: of the algorithm's type, P-256 only, RSA of 2048 bits
	 * at least; a private key or other PEM refused with a reason. */
	s = settings("RS256");
	s.public_key_file = ec_path;
	CHECK(refused(&s, "not an RSA key"));
	s = settings("ES256");
	s.public_key_file = rsa_path;
	CHECK(refused(&s, "not an EC key"));
	EVP_PKEY *p384 = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-384");
	s.public_key_file = write_key("p384.pem", p384, false);
	CHECK(refused(&s, "not on curve P-256"));
	EVP_PKEY_free(p384);
	EVP_PKEY *small = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)1024);
	s = settings("RS256");
	s.public_key_file = write_key("rsa1024.pem", small, false);
	CHECK(refused(&s, "shorter than 2048 bits"));
	EVP_PKEY_free(small);
	s.public_key_file = write_key("rsa-private.pem", rsa, true);
	CHECK(refused(&s, "holds a private key"));
	char e3[512] = "";
	jwt_verifier_new(&s, &v, e3, sizeof(e3));
	CHECK(strstr(e3, "MII") == NULL); /* no key material in the message */
	s.public_key_file =
		write_bytes("garbage.pem", "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n", 57);
	CHECK(refused(&s, "jwt_public_key_file = \""));
	CHECK(refused(&s, "no PEM public key"));
	s.public_key_file = secret_path;
	CHECK(refused(&s, "no PEM public key"));
	s.public_key_file = "/nonexistent/key.pem";
	CHECK(refused(&s, "No such file or directory"));

	/* Claim names and the leeway. */
	static const char *const bad_claims[] = { "", ".", "a.", ".a", "a..b", "a b", "a/b", "a\"b", "$.a", "a[0]" };
	for (size_t i = 0; i < sizeof(bad_claims) / sizeof(bad_claims[0]); i++) {
		s = settings("HS256");
		s.subscribe_claim = bad_claims[i];
		CHECK(refused(&s, "jwt_subscribe_claim = \""));
		CHECK(!jwt_claim_name_valid(bad_claims[i]));
		s = settings("HS256");
		s.publish_claim = bad_claims[i];
		CHECK(refused(&s, "jwt_publish_claim"));
	}
	char longname[300];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK(!jwt_claim_name_valid(longname));
	longname[256] = '\0';
	CHECK(jwt_claim_name_valid(longname));
	CHECK(jwt_claim_name_valid("subscribe"));
	CHECK(jwt_claim_name_valid("mercure.subscribe"));
	CHECK(jwt_claim_name_valid("https-example_com.Rights.sub-1"));
	s = settings("HS256");
	s.leeway_s = -1;
	CHECK(refused(&s, "jwt_leeway"));

	/* Good ones: each algorithm, a certificate's key, a CRLF-ended secret. */
	static const char *const algs[] = { "HS256", "RS256", "ES256" };
	for (size_t i = 0; i < 3; i++) {
		s = settings(algs[i]);
		jwt_verifier_free(verifier(&s));
	}
	s = settings("RS256");
	s.public_key_file = write_cert("rsa-cert.pem", rsa);
	v = verifier(&s);
	struct signer rs = { RS, rsa, NULL, 0 };
	CHECK_EQ_INT(check_payload(v, &rs, "{\"exp\":1700000100}"), JWT_OK);
	jwt_verifier_free(v);
	s = settings("ES256");
	s.public_key_file = write_cert("ec-cert.pem", ec);
	v = verifier(&s);
	struct signer es = { ES, ec, NULL, 0 };
	CHECK_EQ_INT(check_payload(v, &es, "{\"exp\":1700000100}"), JWT_OK);
	jwt_verifier_free(v);
	s = settings("HS256");
	s.secret_file = write_bytes("s32crlf", "0123456789012345678901234567890X\r\n", 34);
	v = verifier(&s);
	struct signer hs32 = { HS, NULL, "0123456789012345678901234567890X", 32 };
	CHECK_EQ_INT(check_payload(v, &hs32, "{\"exp\":1700000100}"), JWT_OK);
	struct signer hs34 = { HS, NULL, "0123456789012345678901234567890X\r\n", 34 };
	CHECK_EQ_INT(check_payload(v, &hs34, "{\"exp\":1700000100}"), JWT_BAD_SIGNATURE);
	jwt_verifier_free(v);
	/* Only one line end goes: the second is part of the secret. */
	s.secret_file = write_bytes("s32lflf", "0123456789012345678901234567890X\n\n", 34);
	v = verifier(&s);
	struct signer hs33 = { HS, NULL, "0123456789012345678901234567890X\n", 33 };
	CHECK_EQ_INT(check_payload(v, &hs33, "{\"exp\":1700000100}"), JWT_OK);
	jwt_verifier_free(v);
}

/* A good token of each algorithm, with its rights. */
static void test_valid_tokens(void)
{
	static const char *const algs[] = { "HS256", "RS256", "ES256" };
	struct signer signers[] = { hs, { RS, rsa, NULL, 0 }, { ES, ec, NULL, 0 } };
	for (size_t i = 0; i < 3; i++) {
		struct jwt_settings s = settings(algs[i]);
		struct jwt_verifier *v = verifier(&s);
		char *t = token(header_of(signers[i].how),
				"{\"sub\":\"u1\",\"exp\":1700000100,\"subscribe\":[\"news\",\"user/42/*\"],"
				"\"publish\":\"chat/*\"}",
				&signers[i]);
		struct jwt_rights r;
		CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
		CHECK_EQ_INT(r.nsubscribe, 2);
		CHECK(r.nsubscribe == 2 && !strcmp(r.subscribe[0], "news") && !strcmp(r.subscribe[1], "user/42/*"));
		CHECK(r.npublish == 1 && !strcmp(r.publish[0], "chat/*"));
		CHECK_EQ_INT(r.exp, 1700000100);
		jwt_rights_free(&r);
		CHECK(r.subscribe == NULL && r.nsubscribe == 0 && r.publish == NULL && r.npublish == 0);
		jwt_rights_free(&r); /* twice is harmless */
		/* The same token again, many times: same answer, no leak. */
		for (int k = 0; k < 20; k++)
			CHECK_EQ_INT(result(v, t), JWT_OK);
		/* The signature of each verifier's own algorithm only. */
		for (size_t j = 0; j < 3; j++) {
			struct jwt_settings s2 = settings(algs[j]);
			struct jwt_verifier *w = verifier(&s2);
			CHECK_EQ_INT(result(w, t), i == j ? JWT_OK : JWT_BAD_ALG);
			jwt_verifier_free(w);
		}
		free(t);
		jwt_verifier_free(v);
	}
}

static void test_times(void)
{
	struct jwt_settings s = settings("HS256");
	struct jwt_verifier *v = verifier(&s);
	s.leeway_s = 0;
	struct jwt_verifier *strict = verifier(&s);

	/* exp: expired once now passes exp + leeway (10 s here). */
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1699999990}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1699999989}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1699999995}"), JWT_OK);
	CHECK_EQ_INT(check_payload(strict, &hs, "{\"exp\":1699999995}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(strict, &hs, "{\"exp\":1700000000}"), JWT_OK);
	CHECK_EQ_INT(check_payload(strict, &hs, "{\"exp\":1699999999}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1699999989.5}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1699999990.5}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1.7e9}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1.6e9}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":9223372036854775807}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1e300}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":-1}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":0}"), JWT_EXPIRED);

	char *t = token(header_of(HS), "{\"exp\":1699999989}", &hs);
	CHECK(strcmp(why_of(v, t), "the token has expired") == 0);
	free(t);

	/* exp missing, or not a number. */
	t = token(header_of(HS), "{\"sub\":\"x\",\"subscribe\":[\"*\"]}", &hs);
	CHECK_EQ_INT(result(v, t), JWT_EXPIRED);
	CHECK(strcmp(why_of(v, t), "the token has no exp claim") == 0);
	free(t);
	CHECK_EQ_INT(check_payload(v, &hs, "{}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":\"1700000100\"}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":null}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":true}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":[1700000100]}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"Exp\":1700000100}"), JWT_EXPIRED);

	/* nbf: too early while now + leeway < nbf. */
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"nbf\":1700000010}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"nbf\":1700000011}"), JWT_NOT_YET);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"nbf\":1700000005}"), JWT_OK);
	CHECK_EQ_INT(check_payload(strict, &hs, "{\"exp\":1700000100,\"nbf\":1700000005}"), JWT_NOT_YET);
	CHECK_EQ_INT(check_payload(strict, &hs, "{\"exp\":1700000100,\"nbf\":1700000000}"), JWT_OK);
	CHECK_EQ_INT(check_payload(strict, &hs, "{\"exp\":1700000100,\"nbf\":1700000000.5}"), JWT_NOT_YET);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"nbf\":\"soon\"}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"nbf\":9223372036854775807}"), JWT_NOT_YET);
	t = token(header_of(HS), "{\"exp\":1700000100,\"nbf\":1700000011}", &hs);
	CHECK(strcmp(why_of(v, t), "the token is not valid yet") == 0);
	free(t);

	/* Extreme clocks do not overflow. */
	t = token(header_of(HS), "{\"exp\":9223372036854775807,\"nbf\":-9223372036854775808}", &hs);
	struct jwt_rights r;
	CHECK_EQ_INT(verify_at(v, t, INT64_MAX, &r), JWT_OK);
	CHECK_EQ_INT(r.exp, INT64_C(253402300799)); /* the end of 9999: room to add a leeway */
	jwt_rights_free(&r);
	CHECK_EQ_INT(verify_at(v, t, INT64_MIN, &r), JWT_OK);
	jwt_rights_free(&r);
	free(t);
	t = token(header_of(HS), "{\"exp\":1e300}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK_EQ_INT(r.exp, INT64_C(253402300799));
	jwt_rights_free(&r);
	free(t);
	t = token(header_of(HS), "{\"exp\":253402300800}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK_EQ_INT(r.exp, INT64_C(253402300799));
	jwt_rights_free(&r);
	free(t);
	jwt_verifier_free(strict);
	jwt_verifier_free(v);
}

/* Signatures that must not verify, and algorithms that must be refused. */
static void test_signatures(void)
{
	struct jwt_settings s = settings("HS256");
	struct jwt_verifier *vh = verifier(&s);
	s = settings("RS256");
	struct jwt_verifier *vr = verifier(&s);
	s = settings("ES256");
	struct jwt_verifier *ve = verifier(&s);
	const char *claims = "{\"exp\":1700000100,\"subscribe\":[\"*\"]}";

	/* Wrong keys. */
	struct signer rs_other = { RS, rsa_other, NULL, 0 }, es_other = { ES, ec_other, NULL, 0 };
	struct signer hs_other = { HS, NULL, "0123456789abcdef0123456789abcdef01234568", 40 };
	CHECK_EQ_INT(check_payload(vr, &rs_other, claims), JWT_BAD_SIGNATURE);
	CHECK_EQ_INT(check_payload(ve, &es_other, claims), JWT_BAD_SIGNATURE);
	CHECK_EQ_INT(check_payload(vh, &hs_other, claims), JWT_BAD_SIGNATURE);
	char *t = token(header_of(RS), claims, &rs_other);
	CHECK(strcmp(why_of(vr, t), "the token's signature does not verify") == 0);
	free(t);

	/* A header naming another algorithm than the signature's. */
	struct signer rs = { RS, rsa, NULL, 0 }, es = { ES, ec, NULL, 0 };
	t = token(header_of(ES), claims, &rs);
	CHECK_EQ_INT(result(ve, t), JWT_BAD_SIGNATURE);
	CHECK_EQ_INT(result(vr, t), JWT_BAD_ALG);
	free(t);
	t = token(header_of(RS), claims, &es);
	CHECK_EQ_INT(result(vr, t), JWT_BAD_SIGNATURE);
	CHECK_EQ_INT(result(ve, t), JWT_BAD_ALG);
	free(t);

	/* The classic confusion: an HMAC keyed with the RSA public key's PEM. */
	size_t pem_len;
	char *pem = slurp(rsa_path, &pem_len);
	struct signer confused = { HS, NULL, pem, pem_len };
	t = token(header_of(HS), claims, &confused);
	CHECK_EQ_INT(result(vr, t), JWT_BAD_ALG);
	CHECK(strcmp(why_of(vr, t), "the token's algorithm is not the one configured") == 0);
	free(t);
	t = token("{\"alg\":\"RS256\"}", claims, &confused);
	CHECK_EQ_INT(result(vr, t), JWT_BAD_SIGNATURE);
	free(t);
	free(pem);

	/* "none", with an empty signature and with the usual one. */
	struct signer none = { NONE, NULL, NULL, 0 };
	static const char *const none_headers[] = { "{\"alg\":\"none\"}", "{\"alg\":\"None\",\"typ\":\"JWT\"}",
						    "{\"alg\":\"NONE\"}" };
	for (size_t i = 0; i < 3; i++) {
		t = token(none_headers[i], claims, &none);
		CHECK(t[strlen(t) - 1] == '.');
		CHECK_EQ_INT(result(vh, t), JWT_BAD_ALG);
		CHECK_EQ_INT(result(vr, t), JWT_BAD_ALG);
		CHECK_EQ_INT(result(ve, t), JWT_BAD_ALG);
		free(t);
		t = token(none_headers[i], claims, &hs);
		CHECK_EQ_INT(result(vh, t), JWT_BAD_ALG);
		free(t);
	}
	/* Other "alg" values, a missing one; an empty signature of the right
	 * algorithm. */
	static const char *const bad_algs[] = { "{\"typ\":\"JWT\"}",   "{\"alg\":\"hs256\"}", "{\"alg\":\"HS256 \"}",
						"{\"alg\":\"HS512\"}", "{\"alg\":256}",       "{\"alg\":[\"HS256\"]}",
						"{\"alg\":null}",      "{\"alg\":\"\"}",      "{\"ALG\":\"HS256\"}" };
	for (size_t i = 0; i < sizeof(bad_algs) / sizeof(bad_algs[0]); i++) {
		t = token(bad_algs[i], claims, &hs);
		CHECK_EQ_INT(result(vh, t), JWT_BAD_ALG);
		free(t);
	}
	t = token(header_of(HS), claims, &none);
	CHECK_EQ_INT(result(vh, t), JWT_BAD_SIGNATURE);
	free(t);
	t = token(header_of(RS), claims, &none);
	CHECK_EQ_INT(result(vr, t), JWT_BAD_SIGNATURE);
	free(t);
	t = token(header_of(ES), claims, &none);
	CHECK_EQ_INT(result(ve, t), JWT_BAD_SIGNATURE);
	free(t);
	/* An escaped "alg" is the same string. */
	t = token("{\"alg\":\"HS\\u00325\\u0036\"}", claims, &hs);
	CHECK_EQ_INT(result(vh, t), JWT_OK);
	free(t);
	/* A "crit" extension is not understood, so the token is refused. */
	t = token("{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", claims, &hs);
	CHECK_EQ_INT(result(vh, t), JWT_MALFORMED);
	free(t);

	/* ES256: the JWS form is r || s, 64 bytes; DER or a truncated
	 * signature is a bad signature. */
	t = token(header_of(ES), claims, &es);
	CHECK_EQ_INT(result(ve, t), JWT_OK);
	char *dot = strrchr(t, '.');
	dot[1 + 84] = '\0'; /* 63 bytes */
	CHECK_EQ_INT(result(ve, t), JWT_BAD_SIGNATURE);
	free(t);
	{
		const char *input_json[2] = { header_of(ES), claims };
		char input[400];
		b64url((const unsigned char *)input_json[0], strlen(input_json[0]), input);
		strcat(input, ".");
		b64url((const unsigned char *)input_json[1], strlen(input_json[1]), input + strlen(input));
		unsigned char der[128];
		size_t len = sizeof(der);
		EVP_MD_CTX *md = EVP_MD_CTX_new();
		EVP_DigestSignInit_ex(md, NULL, "SHA256", NULL, NULL, ec, NULL);
		EVP_DigestSign(md, der, &len, (const unsigned char *)input, strlen(input));
		EVP_MD_CTX_free(md);
		char tok[600], sig[200];
		b64url(der, len, sig);
		snprintf(tok, sizeof(tok), "%s.%s", input, sig);
		CHECK_EQ_INT(result(ve, tok), JWT_BAD_SIGNATURE);
		/* r = 0 and s = 0 must not verify either. */
		unsigned char zero[64] = { 0 };
		b64url(zero, 64, sig);
		snprintf(tok, sizeof(tok), "%s.%s", input, sig);
		CHECK_EQ_INT(result(ve, tok), JWT_BAD_SIGNATURE);
	}

	/* A tampered payload, the signature kept: one character of the JSON
	 * changed (still JSON, so the signature is what refuses it), and one
	 * of its base64url (which breaks the JSON here: refused before the
	 * signature is looked at). */
	struct signer *signers[3] = { (struct signer *)&hs, &rs, &es };
	struct jwt_verifier *vs[3] = { vh, vr, ve };
	for (size_t i = 0; i < 3; i++) {
		t = token(header_of(signers[i]->how), "{\"exp\":1700000100,\"subscribe\":[\"user/42\"]}", signers[i]);
		CHECK_EQ_INT(result(vs[i], t), JWT_OK);
		static const char other[] = "{\"exp\":1700000100,\"subscribe\":[\"user/43\"]}";
		char *p = strchr(t, '.') + 1;
		char enc[128];
		b64url((const unsigned char *)other, strlen(other), enc);
		CHECK(strchr(p, '.') - p == (ptrdiff_t)strlen(enc));
		memcpy(p, enc, strlen(enc));
		CHECK_EQ_INT(result(vs[i], t), JWT_BAD_SIGNATURE);
		p += 10;
		*p = *p == 'A' ? 'B' : 'A';
		CHECK_EQ_INT(result(vs[i], t), JWT_MALFORMED);
		free(t);
		/* The last, middle and first signature bytes changed. */
		for (size_t flip = 1; flip <= 31; flip += 15) {
			t = token_flipped(header_of(signers[i]->how), claims, signers[i], flip);
			CHECK_EQ_INT(result(vs[i], t), JWT_BAD_SIGNATURE);
			free(t);
		}
		t = token_flipped(header_of(signers[i]->how), claims, signers[i], i == 0 ? 32 : i == 1 ? 256 : 64);
		CHECK_EQ_INT(result(vs[i], t), JWT_BAD_SIGNATURE);
		free(t);
		/* And one signature character changed. */
		t = token(header_of(signers[i]->how), claims, signers[i]);
		p = strrchr(t, '.') + 5;
		*p = *p == 'A' ? 'B' : 'A';
		CHECK_EQ_INT(result(vs[i], t), JWT_BAD_SIGNATURE);
		free(t);
	}
	jwt_verifier_free(vh);
	jwt_verifier_free(vr);
	jwt_verifier_free(ve);
}

/* Tokens whose shape, encoding or JSON is wrong. */
static void test_malformed(void)
{
	struct jwt_settings s = settings("HS256");
	struct jwt_verifier *v = verifier(&s);
	const char *claims = "{\"exp\":1700000100}";
	char *good = token(header_of(HS), claims, &hs);
	CHECK_EQ_INT(result(v, good), JWT_OK);

	/* Not three parts. */
	static const char *const shapes[] = { "", ".", "..", "...", "abc", "abc.def", "a.b.c.d", "eyJ", "a..", "..a" };
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		CHECK_EQ_INT(result(v, shapes[i]), JWT_MALFORMED);
	char buf[1200];
	snprintf(buf, sizeof(buf), "%s.", good);
	CHECK_EQ_INT(result(v, buf), JWT_MALFORMED);
	snprintf(buf, sizeof(buf), "%s.%s", good, strrchr(good, '.') + 1);
	CHECK_EQ_INT(result(v, buf), JWT_MALFORMED);
	CHECK(strcmp(why_of(v, "abc"), "the token is malformed") == 0);

	/* Padding, '+' and '/', blanks: base64url has none, even when the
	 * signature covers them. */
	char hb[200], pb[200], input[500];
	b64url((const unsigned char *)header_of(HS), strlen(header_of(HS)), hb);
	const char *odd = "{\"exp\":1700000100,\"ab\":1}"; /* 25 bytes: 34 characters */
	b64url((const unsigned char *)odd, strlen(odd), pb);
	CHECK(strlen(pb) % 4 == 2);
	snprintf(input, sizeof(input), "%s.%s=", hb, pb);
	while (strlen(strchr(input, '.') + 1) % 4)
		strcat(input, "=");
	char *t = sign_input(input, &hs);
	CHECK_EQ_INT(result(v, t), JWT_MALFORMED);
	free(t);
	static const char *const alphabet_swaps[][2] = { { "-", "+" }, { "_", "/" } };
	for (size_t i = 0; i < 2; i++) {
		/* A payload whose encoding holds '-' or '_', written with the
		 * standard alphabet instead. */
		const char *payload =
			i == 0 ? "{\"exp\":1700000100,\"x\":\">>>\"}" : "{\"exp\":1700000100,\"x\":\"???\"}";
		b64url((const unsigned char *)payload, strlen(payload), pb);
		char *at = strpbrk(pb, alphabet_swaps[i][0]);
		CHECK(at != NULL);
		t = token(header_of(HS), payload, &hs);
		CHECK_EQ_INT(result(v, t), JWT_OK);
		free(t);
		if (at)
			*at = alphabet_swaps[i][1][0];
		snprintf(input, sizeof(input), "%s.%s", hb, pb);
		t = sign_input(input, &hs);
		CHECK_EQ_INT(result(v, t), JWT_MALFORMED);
		free(t);
	}
	/* Unused low bits set: the last character of 25 bytes carries 4 bits
	 * that must be zero ('A', 'Q', 'g' or 'w'); one more is the same bytes
	 * to a lax decoder. */
	b64url((const unsigned char *)odd, strlen(odd), pb);
	snprintf(input, sizeof(input), "%s.%s", hb, pb);
	char *last = input + strlen(input) - 1;
	CHECK(strchr("AQgw", *last) != NULL);
	*last = (char)(*last + 1);
	t = sign_input(input, &hs);
	CHECK_EQ_INT(result(v, t), JWT_MALFORMED);
	free(t);
	snprintf(buf, sizeof(buf), " %s", good);
	CHECK_EQ_INT(result(v, buf), JWT_MALFORMED);
	snprintf(buf, sizeof(buf), "%s\n", good);
	CHECK_EQ_INT(result(v, buf), JWT_MALFORMED);
	/* A length that leaves one character over. */
	snprintf(input, sizeof(input), "%s.%sA", hb, pb);
	if (strlen(strchr(input, '.') + 1) % 4 != 1)
		strcat(input, "AA");
	t = sign_input(input, &hs);
	CHECK_EQ_INT(result(v, t), JWT_MALFORMED);
	free(t);
	/* Only token[0..len) is read. */
	{
		struct jwt_rights r;
		const char *why;
		size_t n = strlen(good);
		snprintf(buf, sizeof(buf), "%sXYZ.", good);
		CHECK(jwt_verify(v, buf, n - 1, NOW, &r, &why) != JWT_OK);
		CHECK_EQ_INT(jwt_verify(v, buf, n, NOW, &r, &why), JWT_OK);
		jwt_rights_free(&r);
		CHECK_EQ_INT(jwt_verify(v, good, 0, NOW, &r, &why), JWT_MALFORMED);
	}

	/* JSON that is not an object, or not JSON. */
	static const char *const not_objects[] = { "[1,2]",
						   "\"exp\"",
						   "1700000100",
						   "null",
						   "{",
						   "",
						   "{\"exp\":1700000100",
						   "{\"exp\":1700000100}x",
						   "{exp:1700000100}",
						   "{\"exp\":1700000100,}" };
	for (size_t i = 0; i < sizeof(not_objects) / sizeof(not_objects[0]); i++) {
		CHECK_EQ_INT(check_payload(v, &hs, not_objects[i]), JWT_MALFORMED);
		t = token(not_objects[i], claims, &hs);
		CHECK_EQ_INT(result(v, t), JWT_MALFORMED);
		free(t);
	}
	CHECK_EQ_INT(check_payload(v, &hs, " {\"exp\":1700000100} "), JWT_OK);
	/* A NUL, escaped or raw, and bytes that are not UTF-8. */
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"sub\":\"a\\u0000b\"}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"sub\":\"\xff\"}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"sub\":\"\xc3\xa9\"}"), JWT_OK);
	{
		static const char raw[] = "{\"exp\":1700000100,\"sub\":\"a\0b\"}";
		char enc[200];
		b64url((const unsigned char *)raw, sizeof(raw) - 1, enc);
		snprintf(input, sizeof(input), "%s.%s", hb, enc);
		t = sign_input(input, &hs);
		CHECK_EQ_INT(result(v, t), JWT_MALFORMED);
		free(t);
	}

	/* Size: up to 8 KiB. */
	char *payload = malloc(9000);
	for (size_t want = 8190; want <= 8194; want++) {
		int pad = 0;
		char *tt = NULL;
		for (pad = 5800; pad < 6300; pad++) {
			snprintf(payload, 9000, "{\"exp\":1700000100,\"pad\":\"%0*d\"}", pad, 0);
			tt = token(header_of(HS), payload, &hs);
			if (strlen(tt) >= want)
				break;
			free(tt);
			tt = NULL;
		}
		CHECK(tt != NULL);
		if (!tt)
			continue;
		CHECK_EQ_INT(result(v, tt), strlen(tt) <= 8192 ? JWT_OK : JWT_MALFORMED);
		free(tt);
	}
	free(payload);
	free(good);
	jwt_verifier_free(v);
}

/* The rights claims: absent, a string, a list; anything else refused. */
static void test_rights(void)
{
	struct jwt_settings s = settings("HS256");
	struct jwt_verifier *v = verifier(&s);
	struct jwt_rights r;
	char *t = token(header_of(HS), "{\"exp\":1700000100}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.subscribe == NULL && r.nsubscribe == 0 && r.publish == NULL && r.npublish == 0);
	CHECK_EQ_INT(r.exp, 1700000100);
	jwt_rights_free(&r);
	free(t);

	t = token(header_of(HS), "{\"exp\":1700000100.75,\"subscribe\":\"news\",\"publish\":[]}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 1 && strcmp(r.subscribe[0], "news") == 0);
	CHECK(r.npublish == 0);
	CHECK_EQ_INT(r.exp, 1700000100);
	jwt_rights_free(&r);
	free(t);

	t = token(header_of(HS),
		  "{\"exp\":1700000100,\"subscribe\":[\"*\",\"a/b/*\",\"x:y.z-w_v\",\"a/b/*\"],"
		  "\"publish\":[\"chat/\\u0031\"]}",
		  &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 4 && !strcmp(r.subscribe[0], "*") && !strcmp(r.subscribe[1], "a/b/*") &&
	      !strcmp(r.subscribe[2], "x:y.z-w_v") && !strcmp(r.subscribe[3], "a/b/*"));
	CHECK(r.npublish == 1 && !strcmp(r.publish[0], "chat/1"));
	jwt_rights_free(&r);
	free(t);

	static const char *const bad[] = {
		"{\"exp\":1700000100,\"subscribe\":42}",
		"{\"exp\":1700000100,\"subscribe\":null}",
		"{\"exp\":1700000100,\"subscribe\":true}",
		"{\"exp\":1700000100,\"subscribe\":{\"news\":true}}",
		"{\"exp\":1700000100,\"subscribe\":\"\"}",
		"{\"exp\":1700000100,\"subscribe\":\"a/*/b\"}",
		"{\"exp\":1700000100,\"subscribe\":\"news feed\"}",
		"{\"exp\":1700000100,\"subscribe\":[\"news\",42]}",
		"{\"exp\":1700000100,\"subscribe\":[\"news\",\"a*\"]}",
		"{\"exp\":1700000100,\"subscribe\":[\"news\",[\"x\"]]}",
		"{\"exp\":1700000100,\"subscribe\":[\"news\",null]}",
		"{\"exp\":1700000100,\"subscribe\":[\"\\u00e9\"]}",
		"{\"exp\":1700000100,\"publish\":7}",
		"{\"exp\":1700000100,\"subscribe\":[\"ok\"],\"publish\":[\"/*\"]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int e = check_payload(v, &hs, bad[i]);
		if (e != JWT_MALFORMED)
			fprintf(stderr, "  accepted: %s\n", bad[i]);
		CHECK_EQ_INT(e, JWT_MALFORMED);
	}
	/* 129 bytes is one too many for a pattern. */
	char payload[400], pat[200];
	memset(pat, 'p', 129);
	pat[129] = '\0';
	snprintf(payload, sizeof(payload), "{\"exp\":1700000100,\"subscribe\":[\"%s\"]}", pat);
	CHECK_EQ_INT(check_payload(v, &hs, payload), JWT_MALFORMED);
	pat[128] = '\0';
	snprintf(payload, sizeof(payload), "{\"exp\":1700000100,\"subscribe\":[\"%s\"]}", pat);
	CHECK_EQ_INT(check_payload(v, &hs, payload), JWT_OK);
	/* Claims of the same name elsewhere are not the rights. */
	t = token(header_of(HS), "{\"exp\":1700000100,\"mercure\":{\"subscribe\":[\"x\"]}}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 0);
	jwt_rights_free(&r);
	free(t);
	jwt_verifier_free(v);
}

/* Mercure's claims, nested under "mercure". */
static void test_mercure(void)
{
	struct jwt_settings s = settings("HS256");
	s.subscribe_claim = "mercure.subscribe";
	s.publish_claim = "mercure.publish";
	struct jwt_verifier *v = verifier(&s);
	struct jwt_rights r;
	char *t = token(header_of(HS),
			"{\"exp\":1700000100,\"subscribe\":[\"top\"],\"mercure\":{\"subscribe\":[\"user/42\",\"news\"],"
			"\"payload\":{\"user\":42}}}",
			&hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 2 && !strcmp(r.subscribe[0], "user/42") && !strcmp(r.subscribe[1], "news"));
	CHECK(r.npublish == 0 && r.publish == NULL);
	jwt_rights_free(&r);
	free(t);
	t = token(header_of(HS), "{\"exp\":1700000100,\"mercure\":{\"publish\":[\"*\"]}}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 0 && r.npublish == 1 && !strcmp(r.publish[0], "*"));
	jwt_rights_free(&r);
	free(t);
	/* "mercure" of another type, or a name with a dot in it, is absence. */
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"mercure\":[\"x\"]}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"mercure\":7}"), JWT_OK);
	t = token(header_of(HS), "{\"exp\":1700000100,\"mercure.subscribe\":[\"x\"]}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 0);
	jwt_rights_free(&r);
	free(t);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"mercure\":{\"subscribe\":3}}"), JWT_MALFORMED);
	jwt_verifier_free(v);

	/* A name with '-' and digits, three deep. */
	s.subscribe_claim = "https-example_com.rights-v2.sub";
	v = verifier(&s);
	t = token(header_of(HS), "{\"exp\":1700000100,\"https-example_com\":{\"rights-v2\":{\"sub\":\"a/*\"}}}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 1 && !strcmp(r.subscribe[0], "a/*"));
	jwt_rights_free(&r);
	free(t);
	jwt_verifier_free(v);
}

/* How claims are found in the JSON: the first of equal names, names as
 * written (an escaped name is another name, while values are decoded),
 * RFC 8259 whitespace only, a depth limit, and a crit of any value. */
static void test_json_reading(void)
{
	struct jwt_settings s = settings("HS256");
	s.subscribe_claim = "mercure.subscribe";
	struct jwt_verifier *v = verifier(&s);
	struct jwt_rights r;
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"exp\":1}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1,\"exp\":1700000100}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"\\u0065xp\":1700000100}"), JWT_EXPIRED); /* no exp */
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"nbf\":1,\"nbf\":1800000000}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":-0}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":17000001e2}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1e999}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":-1e999}"), JWT_EXPIRED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":99999999999999999999}"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "\t{\r\n\"exp\" :\t1700000100 }\n"), JWT_OK);
	CHECK_EQ_INT(check_payload(v, &hs, "\f{\"exp\":1700000100}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":01700000100}"), JWT_MALFORMED);
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"sub\":\"a\tb\"}"), JWT_MALFORMED);

	/* The first "mercure" is the one read, even when it holds nothing. */
	char *t = token(
		header_of(HS),
		"{\"exp\":1700000100,\"mercure\":{\"subscribe\":[\"a\",\"b\\/c\"]},\"mercure\":{\"subscribe\":\"x\"}}",
		&hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 2 && !strcmp(r.subscribe[0], "a") && !strcmp(r.subscribe[1], "b/c"));
	jwt_rights_free(&r);
	free(t);
	t = token(header_of(HS), "{\"exp\":1700000100,\"mercure\":{},\"mercure\":{\"subscribe\":\"x\"}}", &hs);
	CHECK_EQ_INT(verify_at(v, t, NOW, &r), JWT_OK);
	CHECK(r.nsubscribe == 0);
	jwt_rights_free(&r);
	free(t);
	/* A pattern decoded from a lone surrogate escape is no pattern. */
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1700000100,\"mercure\":{\"subscribe\":\"\\ud800\"}}"),
		     JWT_MALFORMED);

	/* Nesting: 2000 containers deep is JSON, one more is not. */
	for (int depth = 1999; depth <= 2000; depth++) {
		char *p = malloc(30 + 2 * (size_t)depth);
		int n = sprintf(p, "{\"exp\":1700000100,\"x\":");
		memset(p + n, '[', (size_t)depth);
		memset(p + n + depth, ']', (size_t)depth);
		strcpy(p + n + 2 * depth, "}");
		CHECK_EQ_INT(check_payload(v, &hs, p), depth == 1999 ? JWT_OK : JWT_MALFORMED);
		free(p);
	}

	/* The header: "alg" decoded, compared as a whole; "crit" of any value. */
	static const struct {
		const char *header;
		int want;
	} headers[] = {
		{ "{\"alg\":\"\\u0048S256\"}", JWT_OK },
		{ "{\"alg\":\"HS256\",\"alg\":\"none\"}", JWT_OK },
		{ "{\"alg\":\"none\",\"alg\":\"HS256\"}", JWT_BAD_ALG },
		{ "{\"\\u0061lg\":\"HS256\"}", JWT_BAD_ALG },
		{ "{\"alg\":\"HS256 \"}", JWT_BAD_ALG },
		{ "{\"alg\":[\"HS256\"]}", JWT_BAD_ALG },
		{ "{\"alg\":\"HS256\",\"crit\":null}", JWT_MALFORMED },
		{ "{\"alg\":\"HS256\",\"crit\":[]}", JWT_MALFORMED },
		{ "{\"alg\":\"HS256\",\"\\u0063rit\":[\"x\"]}", JWT_OK },
	};
	for (size_t i = 0; i < sizeof(headers) / sizeof(headers[0]); i++) {
		t = token(headers[i].header, "{\"exp\":1700000100}", &hs);
		int e = result(v, t);
		if (e != headers[i].want)
			fprintf(stderr, "  header %s: %d\n", headers[i].header, e);
		CHECK_EQ_INT(e, headers[i].want);
		free(t);
	}
	jwt_verifier_free(v);
}

static void test_audience_issuer(void)
{
	struct jwt_settings s = settings("HS256");
	struct jwt_verifier *open = verifier(&s);
	s.audience = "https://herald.example";
	s.issuer = "auth.example";
	struct jwt_verifier *v = verifier(&s);

	/* Not configured: not checked. */
	CHECK_EQ_INT(check_payload(open, &hs, "{\"exp\":1700000100,\"aud\":\"elsewhere\",\"iss\":3}"), JWT_OK);

	CHECK_EQ_INT(check_payload(v, &hs,
				   "{\"exp\":1700000100,\"aud\":\"https://herald.example\",\"iss\":\"auth.example\"}"),
		     JWT_OK);
	CHECK_EQ_INT(
		check_payload(
			v, &hs,
			"{\"exp\":1700000100,\"aud\":[\"other\",\"https://herald.example\"],\"iss\":\"auth.example\"}"),
		JWT_OK);
	CHECK_EQ_INT(
		check_payload(v, &hs,
			      "{\"exp\":1700000100,\"aud\":[7,\"https://herald.example\"],\"iss\":\"auth.example\"}"),
		JWT_OK);
	static const char *const bad_aud[] = {
		"{\"exp\":1700000100,\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":\"https://herald.example/\",\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":\"HTTPS://herald.example\",\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":[\"other\"],\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":[],\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":[[\"https://herald.example\"]],\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":{\"https://herald.example\":1},\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":null,\"iss\":\"auth.example\"}",
		"{\"exp\":1700000100,\"aud\":\"https://herald.exampl\",\"iss\":\"auth.example\"}",
	};
	for (size_t i = 0; i < sizeof(bad_aud) / sizeof(bad_aud[0]); i++)
		CHECK_EQ_INT(check_payload(v, &hs, bad_aud[i]), JWT_BAD_AUDIENCE);
	char *t = token(header_of(HS), bad_aud[0], &hs);
	CHECK(strcmp(why_of(v, t), "the token's audience is not this server") == 0);
	free(t);

	static const char *const bad_iss[] = {
		"{\"exp\":1700000100,\"aud\":\"https://herald.example\"}",
		"{\"exp\":1700000100,\"aud\":\"https://herald.example\",\"iss\":\"auth.example.\"}",
		"{\"exp\":1700000100,\"aud\":\"https://herald.example\",\"iss\":[\"auth.example\"]}",
		"{\"exp\":1700000100,\"aud\":\"https://herald.example\",\"iss\":\"\"}",
		"{\"exp\":1700000100,\"aud\":\"https://herald.example\",\"iss\":7}",
	};
	for (size_t i = 0; i < sizeof(bad_iss) / sizeof(bad_iss[0]); i++)
		CHECK_EQ_INT(check_payload(v, &hs, bad_iss[i]), JWT_BAD_ISSUER);
	t = token(header_of(HS), bad_iss[0], &hs);
	CHECK(strcmp(why_of(v, t), "the token's issuer is not the one configured") == 0);
	free(t);
	/* Time is checked before audience and issuer. */
	CHECK_EQ_INT(check_payload(v, &hs, "{\"exp\":1600000000}"), JWT_EXPIRED);
	jwt_verifier_free(open);
	jwt_verifier_free(v);
}

/* jwt_check: the cache in front of jwt_verify. */
static int check_at(struct jwt_verifier *v, const char *t, int64_t now, struct jwt_cost *cost)
{
	struct jwt_rights r;
	const char *why = "unset";
	memset(cost, 0x5a, sizeof(*cost)); /* jwt_check must set both */
	int e = jwt_check(v, t, strlen(t), now, &r, &why, cost);
	CHECK(e == JWT_OK ? why == NULL : why != NULL);
	jwt_rights_free(&r);
	return e;
}

static void test_cache(void)
{
	struct jwt_settings s = settings("ES256");
	struct jwt_verifier *ve = verifier(&s);
	struct signer es = { ES, ec, NULL, 0 }, es_other = { ES, ec_other, NULL, 0 };
	char *t = token(header_of(ES), "{\"exp\":1700000100,\"subscribe\":[\"user/42/*\"],\"publish\":[\"x\"]}", &es);
	struct jwt_cost cost;
	struct jwt_rights want, got;
	const char *why;

	/* Verified once, then answered from the cache with the same rights. */
	CHECK_EQ_INT(check_at(ve, t, NOW, &cost), JWT_OK);
	CHECK(cost.signature && !cost.cached);
	CHECK_EQ_INT(jwt_verify(ve, t, strlen(t), NOW, &want, &why), JWT_OK);
	CHECK_EQ_INT(jwt_check(ve, t, strlen(t), NOW + 1, &got, &why, &cost), JWT_OK);
	CHECK(cost.cached && !cost.signature && why == NULL);
	CHECK(got.nsubscribe == 1 && !strcmp(got.subscribe[0], "user/42/*") && got.npublish == 1 &&
	      !strcmp(got.publish[0], "x") && got.exp == want.exp);
	jwt_rights_free(&got);
	jwt_rights_free(&want);
	/* Until exp plus the leeway (10 s), then refused as expired, with no
	 * signature check. */
	CHECK_EQ_INT(check_at(ve, t, 1700000110, &cost), JWT_OK);
	CHECK(cost.cached);
	CHECK_EQ_INT(check_at(ve, t, 1700000111, &cost), JWT_EXPIRED);
	CHECK(!cost.cached && !cost.signature);
	/* Once dropped, verified again when time allows (a clock set back). */
	CHECK_EQ_INT(check_at(ve, t, NOW, &cost), JWT_OK);
	CHECK(cost.signature && !cost.cached);

	/* A token that does not verify is not cached: each try costs a check. */
	char *forged = token_flipped(header_of(ES), "{\"exp\":1700000100}", &es, 7);
	for (int i = 0; i < 2; i++) {
		CHECK_EQ_INT(check_at(ve, forged, NOW, &cost), JWT_BAD_SIGNATURE);
		CHECK(cost.signature && !cost.cached);
	}
	free(forged);
	/* Refusals of shape and time cost no signature check. */
	char *expired = token(header_of(ES), "{\"exp\":1600000000}", &es_other);
	CHECK_EQ_INT(check_at(ve, expired, NOW, &cost), JWT_EXPIRED);
	CHECK(!cost.signature && !cost.cached);
	free(expired);
	char *early = token(header_of(ES), "{\"exp\":1700000100,\"nbf\":1700000050}", &es_other);
	CHECK_EQ_INT(check_at(ve, early, NOW, &cost), JWT_NOT_YET);
	CHECK(!cost.signature);
	free(early);
	CHECK_EQ_INT(check_at(ve, "abc.def", NOW, &cost), JWT_MALFORMED);
	CHECK(!cost.signature && !cost.cached);
	char *wrong_alg = token(header_of(HS), "{\"exp\":1700000100}", &hs);
	CHECK_EQ_INT(check_at(ve, wrong_alg, NOW, &cost), JWT_BAD_ALG);
	CHECK(!cost.signature);
	free(wrong_alg);
	char *long_tok = malloc(9000);
	memset(long_tok, 'a', 8999);
	long_tok[8999] = '\0';
	CHECK_EQ_INT(check_at(ve, long_tok, NOW, &cost), JWT_MALFORMED);
	free(long_tok);
	CHECK_EQ_INT(check_at(NULL, t, NOW, &cost), JWT_MALFORMED);

	/* A reload builds a new verifier: nothing of the old one's cache
	 * survives. With another key the cached token is refused; with the
	 * same key it is verified afresh. */
	CHECK_EQ_INT(check_at(ve, t, NOW, &cost), JWT_OK);
	CHECK(cost.cached);
	struct jwt_settings s2 = s;
	s2.public_key_file = write_key("ec_other.pem", ec_other, false);
	struct jwt_verifier *other = verifier(&s2);
	CHECK_EQ_INT(check_at(other, t, NOW, &cost), JWT_BAD_SIGNATURE);
	CHECK(cost.signature && !cost.cached);
	char *t2 = token(header_of(ES), "{\"exp\":1700000100}", &es_other);
	CHECK_EQ_INT(check_at(other, t2, NOW, &cost), JWT_OK);
	CHECK_EQ_INT(check_at(ve, t2, NOW, &cost), JWT_BAD_SIGNATURE);
	free(t2);
	jwt_verifier_free(other);
	struct jwt_verifier *same = verifier(&s);
	CHECK_EQ_INT(check_at(same, t, NOW, &cost), JWT_OK);
	CHECK(cost.signature && !cost.cached);
	jwt_verifier_free(same);
	free(t);
	jwt_verifier_free(ve);

	/* The bound: 4096 tokens fit; one more evicts the least recently
	 * used, which is then verified again. */
	s = settings("HS256");
	struct jwt_verifier *vh = verifier(&s);
	enum { BOUND = 4096 };
	char **toks = malloc((BOUND + 1) * sizeof(*toks));
	for (int i = 0; i <= BOUND; i++) {
		char claims[80];
		snprintf(claims, sizeof(claims), "{\"exp\":1700000100,\"sub\":\"u%d\"}", i);
		toks[i] = token(header_of(HS), claims, &hs);
	}
	for (int i = 0; i < BOUND; i++)
		CHECK_EQ_INT(check_at(vh, toks[i], NOW, &cost), JWT_OK);
	int hits = 0;
	for (int i = 0; i < BOUND; i++)
		hits += check_at(vh, toks[i], NOW, &cost) == JWT_OK && cost.cached;
	CHECK_EQ_INT(hits, BOUND);
	CHECK_EQ_INT(check_at(vh, toks[BOUND], NOW, &cost), JWT_OK); /* evicts toks[0] */
	CHECK(cost.signature);
	CHECK_EQ_INT(check_at(vh, toks[0], NOW, &cost), JWT_OK);
	CHECK(cost.signature && !cost.cached);
	CHECK_EQ_INT(check_at(vh, toks[BOUND], NOW, &cost), JWT_OK);
	CHECK(cost.cached);
	for (int i = 0; i <= BOUND; i++)
		free(toks[i]);
	free(toks);
	jwt_verifier_free(vh);
}

static int unknown_kids;

static void count_unknown_kid(void *arg)
{
	(void)arg;
	unknown_kids++;
}

/* jwt_jwks_url: the verifier built from the set the server fetched, or
 * with none yet (every token refused as naming an unknown key), and the
 * hook that tells the server of a kid the set has not. */
/* jwt_verify's result for t at NOW (an unknown key's reason does not
 * begin "the token", which verify_at asks of the others). */
static int code_of(const struct jwt_verifier *v, const char *t)
{
	struct jwt_rights r;
	const char *why = NULL;
	int e = jwt_verify(v, t, strlen(t), NOW, &r, &why);
	jwt_rights_free(&r);
	return e;
}

static void test_jwks_url(void)
{
	char set[256], k[64];
	b64url((const unsigned char *)secret, sizeof(secret) - 1, k);
	snprintf(set, sizeof(set), "{\"keys\": [{\"kty\": \"oct\", \"kid\": \"k1\", \"k\": \"%s\"}]}", k);
	struct jwt_settings s = settings("HS256");
	s.algorithm = "";
	s.secret_file = "";
	s.jwks_url = "https://idp.example/jwks";
	const char *payload = "{\"exp\": 1700000100, \"subscribe\": [\"a\"]}";
	char *known = token("{\"alg\":\"HS256\",\"kid\":\"k1\"}", payload, &hs);
	char *other = token("{\"alg\":\"HS256\",\"kid\":\"k2\"}", payload, &hs);
	char *none = token("{\"alg\":\"HS256\"}", payload, &hs);

	/* No set yet: every token names an unknown key, and says so. */
	struct jwt_verifier *v = verifier(&s);
	CHECK_EQ_INT(jwt_verifier_keys(v), 0);
	jwt_verifier_on_unknown_kid(v, count_unknown_kid, NULL);
	unknown_kids = 0;
	CHECK_EQ_INT(code_of(v, known), JWT_UNKNOWN_KEY);
	CHECK(strstr(why_of(v, known), "jwt_jwks_url") != NULL);
	CHECK_EQ_INT(code_of(v, none), JWT_UNKNOWN_KEY);
	CHECK_EQ_INT(unknown_kids, 3);
	jwt_verifier_free(v);

	/* The set fetched: its key verifies; another kid is refused and
	 * told. */
	s.jwks_text = set;
	s.jwks_len = strlen(set);
	v = verifier(&s);
	jwt_verifier_on_unknown_kid(v, count_unknown_kid, NULL);
	unknown_kids = 0;
	CHECK_EQ_INT(jwt_verifier_keys(v), 1);
	CHECK_EQ_INT(code_of(v, known), JWT_OK);
	CHECK_EQ_INT(code_of(v, none), JWT_OK); /* a set of one takes a token without kid */
	CHECK_EQ_INT(unknown_kids, 0);
	CHECK_EQ_INT(code_of(v, other), JWT_UNKNOWN_KEY);
	CHECK_EQ_INT(unknown_kids, 1);
	jwt_verifier_free(v);

	/* A set that does not load is refused, naming the URL's key. */
	s.jwks_text = "{\"keys\": []}";
	s.jwks_len = strlen(s.jwks_text);
	CHECK(refused(&s, "jwt_jwks_url = \"https://idp.example/jwks\""));
	/* Beside jwt_jwks_file, or jwt_algorithm: refused. */
	s.jwks_text = set;
	s.jwks_len = strlen(set);
	s.jwks_file = "/etc/jwks.json";
	CHECK(refused(&s, "jwt_jwks_file and jwt_jwks_url are both set"));
	s.jwks_file = "";
	s.algorithm = "HS256";
	CHECK(refused(&s, "jwt_algorithm = \"HS256\" is set, but jwt_jwks_url"));
	free(known);
	free(other);
	free(none);
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/herald-test-jwt-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	rsa_other = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)2048);
	ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	ec_other = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	if (!rsa || !rsa_other || !ec || !ec_other) {
		fprintf(stderr, "cannot make the test keys\n");
		return 2;
	}
	static char paths[3][128];
	snprintf(paths[0], sizeof(paths[0]), "%s",
		 write_bytes("secret", "0123456789abcdef0123456789abcdef01234567\n", 41));
	snprintf(paths[1], sizeof(paths[1]), "%s", write_key("rsa.pem", rsa, false));
	snprintf(paths[2], sizeof(paths[2]), "%s", write_key("ec.pem", ec, false));
	secret_path = paths[0];
	rsa_path = paths[1];
	ec_path = paths[2];

	test_verifier_new();
	test_valid_tokens();
	test_times();
	test_signatures();
	test_malformed();
	test_rights();
	test_mercure();
	test_json_reading();
	test_audience_issuer();
	test_cache();
	test_jwks_url();

	EVP_PKEY_free(rsa);
	EVP_PKEY_free(rsa_other);
	EVP_PKEY_free(ec);
	EVP_PKEY_free(ec_other);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return check_done("test_jwt");
}
