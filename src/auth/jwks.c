/* SPDX-License-Identifier: BSD-2-Clause */
/* jwks.c: JWK Sets (jwks.h) read into OpenSSL keys. Public keys are built
 * from their parameters with EVP_PKEY_fromdata (RSA n, e; EC P-256 as the
 * uncompressed point 04 || x || y, then checked to be on the curve) or
 * from the raw 32 bytes of an Ed25519 key. The JSON is read with json.h;
 * decoded members are wiped before they are freed (an "oct" key is a
 * secret). Also the helpers jwt.c shares: strict base64url, the key-type
 * check of a PEM key, and reading a key file. */
#include "auth/jwks.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/json.h"
#include "common/util.h"

#define JWK_RSA_MIN_BITS 2048
#define JWK_RSA_MAX_BYTES 2048 /* n of 16384 bits */
#define JWK_MEMBER_MAX 8192    /* the longest base64url member read */

static const char *const alg_names[JWK_ALG_COUNT] = { "HS256", "RS256", "ES256", "EdDSA" };

const char *jwk_alg_name(enum jwk_alg a)
{
	return alg_names[a];
}

int jwk_alg_from_name(const char *name)
{
	for (int a = 0; a < JWK_ALG_COUNT; a++)
		if (strcmp(name, alg_names[a]) == 0)
			return a;
	return -1;
}

/* ---- shared helpers --------------------------------------------------- */

static int b64url_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '-')
		return 62;
	if (c == '_')
		return 63;
	return -1;
}

ssize_t b64url_decode(const char *s, size_t n, unsigned char *out)
{
	unsigned acc = 0, bits = 0;
	size_t k = 0;
	if (n % 4 == 1)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int d = b64url_value((unsigned char)s[i]);
		if (d < 0)
			return -1;
		acc = ((acc << 6) | (unsigned)d) & 0x3fff;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[k++] = (unsigned char)(acc >> bits);
		}
	}
	if (acc & ((1u << bits) - 1))
		return -1;
	return (ssize_t)k;
}

ssize_t jwk_read_file(const char *path, size_t max, unsigned char **out, const char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	*out = NULL;
	*why = NULL;
	if (fd < 0 || fstat(fd, &st) < 0)
		*why = strerror(errno);
	else if (S_ISDIR(st.st_mode))
		*why = strerror(EISDIR);
	else if (!S_ISREG(st.st_mode))
		*why = "not a regular file";
	unsigned char *buf = xmalloc(max + 1);
	size_t n = 0;
	while (!*why && n <= max) {
		ssize_t r = read(fd, buf + n, max + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			*why = strerror(errno);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	if (!*why && n > max)
		*why = "the file is too large";
	if (fd >= 0)
		close(fd);
	if (*why) {
		OPENSSL_cleanse(buf, max + 1);
		free(buf);
		return -1;
	}
	*out = buf;
	return (ssize_t)n;
}

const char *jwk_key_mismatch(EVP_PKEY *k, enum jwk_alg alg)
{
	if (alg == JWK_RS256) {
		if (!EVP_PKEY_is_a(k, "RSA"))
			return "not an RSA key, which RS256 needs";
		if (EVP_PKEY_get_bits(k) < JWK_RSA_MIN_BITS)
			return "the RSA key is shorter than 2048 bits";
		return NULL;
	}
	if (alg == JWK_EDDSA)
		return EVP_PKEY_is_a(k, "ED25519") ? NULL : "not an Ed25519 key, which EdDSA needs";
	char group[64] = "";
	size_t glen = 0;
	if (!EVP_PKEY_is_a(k, "EC"))
		return "not an EC key, which ES256 needs";
	if (!EVP_PKEY_get_group_name(k, group, sizeof(group), &glen) || strcmp(group, "prime256v1") != 0) {
		ERR_clear_error();
		return "the EC key is not on curve P-256, which ES256 needs";
	}
	return NULL;
}

/* ---- one key ---------------------------------------------------------- */

/* A key being read: its JSON, where it is, and the error text's prefix. */
struct reading {
	const struct json_value *obj;
	char where[JWK_KID_MAX + 40]; /* keys[3] (kid "a") */
	char *err;
	size_t errlen;
};

/* Copy s into buf for a message: printable ASCII kept, '?' for anything
 * else, so one message stays one line. */
static void shown(const char *s, size_t n, char *buf, size_t len)
{
	size_t i = 0;
	for (; i < n && i + 1 < len; i++)
		buf[i] = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' ? s[i] : '?';
	buf[i] = '\0';
}

static int fail(struct reading *k, const char *member, const char *why)
{
	if (member)
		snprintf(k->err, k->errlen, "%s: \"%s\": %s", k->where, member, why);
	else
		snprintf(k->err, k->errlen, "%s: %s", k->where, why);
	return -1;
}

/* The string member name, decoded, in *out (NULL when absent). Returns 0,
 * or -1 after fail when it is present but not a string. */
static int str_member(struct reading *k, const char *name, char **out, size_t *len)
{
	struct json_value v;
	*out = NULL;
	*len = 0;
	if (!json_member(k->obj, name, strlen(name), &v))
		return 0;
	if (v.type != JSON_STRING)
		return fail(k, name, "not a string");
	*out = json_string_dup(&v, len);
	return 0;
}

static void wipe_free(char *s, size_t n)
{
	if (s)
		OPENSSL_cleanse(s, n);
	free(s);
}

/* The base64url member name decoded into a new buffer (wiped and freed by
 * the caller) of *len bytes, between min and max of them. */
static int bytes_member(struct reading *k, const char *name, size_t min, size_t max, unsigned char **out, size_t *len)
{
	char *text;
	size_t tlen;
	char why[96];
	*out = NULL;
	if (str_member(k, name, &text, &tlen) < 0)
		return -1;
	if (!text)
		return fail(k, name, "missing");
	if (tlen > JWK_MEMBER_MAX) {
		wipe_free(text, tlen);
		return fail(k, name, "too long");
	}
	unsigned char *buf = xmalloc(tlen / 4 * 3 + 3);
	ssize_t n = b64url_decode(text, tlen, buf);
	wipe_free(text, tlen);
	if (n < 0) {
		free(buf);
		return fail(k, name, "not base64url without padding");
	}
	if ((size_t)n < min || (size_t)n > max) {
		OPENSSL_cleanse(buf, (size_t)n);
		free(buf);
		if (min == max)
			snprintf(why, sizeof(why), "%zd bytes, where %zu are needed", n, min);
		else
			snprintf(why, sizeof(why), "%zd bytes, where %zu to %zu are allowed", n, min, max);
		return fail(k, name, why);
	}
	*out = buf;
	*len = (size_t)n;
	return 0;
}

/* A key from OSSL parameters of type name ("RSA", "EC"). NULL on failure. */
static EVP_PKEY *from_params(const char *name, OSSL_PARAM_BLD *bld)
{
	OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, name, NULL);
	EVP_PKEY *k = NULL;
	if (!params || !ctx || EVP_PKEY_fromdata_init(ctx) != 1 ||
	    EVP_PKEY_fromdata(ctx, &k, EVP_PKEY_PUBLIC_KEY, params) != 1)
		k = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	ERR_clear_error();
	return k;
}

static int rsa_key(struct reading *k, struct jwk *out)
{
	unsigned char *n = NULL, *e = NULL;
	size_t nlen = 0, elen = 0;
	int r = -1;
	if (bytes_member(k, "n", 1, JWK_RSA_MAX_BYTES, &n, &nlen) < 0 || bytes_member(k, "e", 1, 8, &e, &elen) < 0)
		goto done;
	/* A leading zero byte (not RFC 7518's minimal encoding, but written
	 * by some libraries) changes no value: taken. */
	BIGNUM *bn = BN_bin2bn(n, (int)nlen, NULL), *be = BN_bin2bn(e, (int)elen, NULL);
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	if (bn && be && bld && OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn) &&
	    OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, be))
		out->pkey = from_params("RSA", bld);
	bool e_ok = be && BN_is_odd(be) && !BN_is_one(be);
	OSSL_PARAM_BLD_free(bld);
	BN_free(bn);
	BN_free(be);
	if (!out->pkey)
		fail(k, NULL, "OpenSSL does not take this RSA key");
	else if (EVP_PKEY_get_bits(out->pkey) < JWK_RSA_MIN_BITS)
		fail(k, "n", "the RSA key is shorter than 2048 bits");
	else if (!e_ok)
		fail(k, "e", "not a usable RSA public exponent (odd, above 1)");
	else
		r = 0;
done:
	free(n);
	free(e);
	return r;
}

static int ec_key(struct reading *k, struct jwk *out)
{
	char *crv;
	size_t clen;
	unsigned char *x = NULL, *y = NULL, point[65];
	size_t xlen = 0, ylen = 0;
	char msg[128], sv[40];
	int r = -1;
	if (str_member(k, "crv", &crv, &clen) < 0)
		return -1;
	if (!crv || strcmp(crv, "P-256") != 0 || clen != 5) {
		if (crv)
			shown(crv, clen, sv, sizeof(sv));
		snprintf(msg, sizeof(msg), "%s%s%s; EC keys must be on P-256 (ES256)", crv ? "is \"" : "missing",
			 crv ? sv : "", crv ? "\"" : "");
		free(crv);
		return fail(k, "crv", msg);
	}
	free(crv);
	if (bytes_member(k, "x", 32, 32, &x, &xlen) < 0 || bytes_member(k, "y", 32, 32, &y, &ylen) < 0)
		goto done;
	point[0] = 0x04; /* uncompressed */
	memcpy(point + 1, x, 32);
	memcpy(point + 33, y, 32);
	OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
	if (bld && OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
	    OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point)))
		out->pkey = from_params("EC", bld);
	OSSL_PARAM_BLD_free(bld);
	/* fromdata may take a point without checking it: an invalid point
	 * is an invalid-curve attack's way in. */
	EVP_PKEY_CTX *ctx = out->pkey ? EVP_PKEY_CTX_new_from_pkey(NULL, out->pkey, NULL) : NULL;
	bool on_curve = ctx && EVP_PKEY_public_check(ctx) == 1;
	EVP_PKEY_CTX_free(ctx);
	ERR_clear_error();
	if (!on_curve)
		fail(k, "x", "with \"y\", not a point on P-256");
	else
		r = 0;
done:
	free(x);
	free(y);
	return r;
}

static int okp_key(struct reading *k, struct jwk *out)
{
	char *crv;
	size_t clen;
	unsigned char *x = NULL;
	size_t xlen = 0;
	char msg[128], sv[40];
	if (str_member(k, "crv", &crv, &clen) < 0)
		return -1;
	if (!crv || strcmp(crv, "Ed25519") != 0 || clen != 7) {
		if (crv)
			shown(crv, clen, sv, sizeof(sv));
		snprintf(msg, sizeof(msg), "%s%s%s; OKP keys must be Ed25519 (EdDSA)", crv ? "is \"" : "missing",
			 crv ? sv : "", crv ? "\"" : "");
		free(crv);
		return fail(k, "crv", msg);
	}
	free(crv);
	if (bytes_member(k, "x", 32, 32, &x, &xlen) < 0)
		return -1;
	out->pkey = EVP_PKEY_new_raw_public_key_ex(NULL, "ED25519", NULL, x, xlen);
	ERR_clear_error();
	free(x);
	return out->pkey ? 0 : fail(k, "x", "OpenSSL does not take this Ed25519 key");
}

static int oct_key(struct reading *k, struct jwk *out)
{
	return bytes_member(k, "k", JWK_SECRET_MIN, JWK_SECRET_MAX, &out->secret, &out->secret_len);
}

/* Members a verifier must not be given: the private halves. */
static const char *const private_members[] = { "d", "p", "q", "dp", "dq", "qi", "oth" };

/* Read the key object at index i into out. */
static int read_key(const struct json_value *obj, size_t i, struct jwk *out, char *err, size_t errlen)
{
	struct reading k = { .obj = obj, .err = err, .errlen = errlen };
	char *kty = NULL, *alg = NULL, *use = NULL;
	size_t kty_len, alg_len, use_len, kid_len, iss_len;
	char sv[JWK_KID_MAX + 1];
	int r = -1;
	snprintf(k.where, sizeof(k.where), "keys[%zu]", i);
	if (obj->type != JSON_OBJECT)
		return fail(&k, NULL, "not a JSON object");
	if (str_member(&k, "kid", &out->kid, &kid_len) < 0)
		return -1;
	if (out->kid) {
		shown(out->kid, MIN(kid_len, 64), sv, sizeof(sv));
		snprintf(k.where, sizeof(k.where), "keys[%zu] (kid \"%s%s\")", i, sv, kid_len > 64 ? "..." : "");
		if (kid_len == 0 || kid_len > JWK_KID_MAX || strlen(out->kid) != kid_len)
			return fail(&k, "kid", "must be 1 to 256 bytes");
	}
	if (str_member(&k, "kty", &kty, &kty_len) < 0 || str_member(&k, "alg", &alg, &alg_len) < 0 ||
	    str_member(&k, "use", &use, &use_len) < 0 || str_member(&k, "iss", &out->iss, &iss_len) < 0)
		goto done;
	if (out->iss && (iss_len == 0 || strlen(out->iss) != iss_len)) {
		fail(&k, "iss", "must be a non-empty string");
		goto done;
	}
	if (use && strcmp(use, "sig") != 0) {
		fail(&k, "use", "must be \"sig\" (a key for signatures)");
		goto done;
	}
	static const char *const ktys[JWK_ALG_COUNT] = { "oct", "RSA", "EC", "OKP" };
	int a = 0;
	while (kty && a < JWK_ALG_COUNT && strcmp(kty, ktys[a]) != 0)
		a++;
	if (!kty || a == JWK_ALG_COUNT) {
		fail(&k, "kty", kty ? "not one of RSA, EC, OKP, oct" : "missing");
		goto done;
	}
	out->alg = (enum jwk_alg)a;
	if (alg && (strlen(alg) != alg_len || jwk_alg_from_name(alg) != a)) {
		char msg[96];
		snprintf(msg, sizeof(msg), "a key of kty \"%s\" verifies %s only", ktys[a], alg_names[a]);
		fail(&k, "alg", msg);
		goto done;
	}
	for (size_t m = 0; a != JWK_HS256 && m < ARRAY_LEN(private_members); m++) {
		struct json_value v;
		if (json_member(obj, private_members[m], strlen(private_members[m]), &v)) {
			fail(&k, private_members[m], "a private key member; give the public key only");
			goto done;
		}
	}
	switch (out->alg) {
	case JWK_HS256:
		r = oct_key(&k, out);
		break;
	case JWK_RS256:
		r = rsa_key(&k, out);
		break;
	case JWK_ES256:
		r = ec_key(&k, out);
		break;
	case JWK_EDDSA:
		r = okp_key(&k, out);
		break;
	}
done:
	free(kty);
	free(alg);
	free(use);
	return r;
}

/* ---- the set ---------------------------------------------------------- */

static void jwk_clear(struct jwk *k)
{
	free(k->kid);
	free(k->iss);
	EVP_PKEY_free(k->pkey);
	if (k->secret)
		OPENSSL_cleanse(k->secret, k->secret_len);
	free(k->secret);
	memset(k, 0, sizeof(*k));
}

void jwks_free(struct jwks *s)
{
	for (size_t i = 0; i < s->n; i++)
		jwk_clear(&s->keys[i]);
	free(s->keys);
	s->keys = NULL;
	s->n = 0;
}

int jwks_parse(const char *text, size_t n, struct jwks *out, char *err, size_t errlen)
{
	struct json_value root, keys, e;
	struct json_iter it;
	size_t count = 0;
	*out = (struct jwks){ 0 };
	if (errlen)
		err[0] = '\0';
	if (json_parse(text, n, &root) != JSON_OK || root.type != JSON_OBJECT) {
		snprintf(err, errlen, "not a JSON object (a JWK Set is {\"keys\": [...]})");
		return -1;
	}
	if (!json_member(&root, "keys", 4, &keys) || keys.type != JSON_ARRAY) {
		snprintf(err, errlen, "\"keys\": %s",
			 json_member(&root, "keys", 4, &keys) ? "not an array" : "missing");
		return -1;
	}
	json_iter_start(&it, &keys);
	while (json_iter_next(&it, NULL, &e))
		count++;
	if (count == 0 || count > JWKS_MAX_KEYS) {
		snprintf(err, errlen, "\"keys\": %s", count ? "more than 64 keys" : "empty; give at least one key");
		return -1;
	}
	out->keys = xcalloc(count, sizeof(*out->keys));
	json_iter_start(&it, &keys);
	for (size_t i = 0; json_iter_next(&it, NULL, &e); i++) {
		out->n = i + 1; /* so that jwks_free clears the one being read */
		if (read_key(&e, i, &out->keys[i], err, errlen) < 0)
			goto bad;
	}
	for (size_t i = 0; i < count; i++) {
		const struct jwk *k = &out->keys[i];
		if (!k->kid && count > 1) {
			snprintf(err, errlen,
				 "keys[%zu]: \"kid\": missing; each key of a set of more than one needs a kid "
				 "(tokens choose their key by it)",
				 i);
			goto bad;
		}
		for (size_t j = 0; k->kid && j < i; j++) {
			if (out->keys[j].kid && strcmp(out->keys[j].kid, k->kid) == 0) {
				char sv[72];
				shown(k->kid, MIN(strlen(k->kid), 64), sv, sizeof(sv));
				snprintf(err, errlen, "keys[%zu]: \"kid\": \"%s\" is also the kid of keys[%zu]", i, sv,
					 j);
				goto bad;
			}
		}
	}
	return 0;
bad:
	jwks_free(out);
	return -1;
}

int jwks_load(const char *path, struct jwks *out, char *err, size_t errlen)
{
	unsigned char *buf;
	const char *why;
	*out = (struct jwks){ 0 };
	ssize_t n = jwk_read_file(path, JWKS_FILE_MAX, &buf, &why);
	if (n < 0) {
		snprintf(err, errlen, "%s", why);
		return -1;
	}
	int r = jwks_parse((const char *)buf, (size_t)n, out, err, errlen);
	OPENSSL_cleanse(buf, (size_t)n); /* it may hold shared secrets */
	free(buf);
	return r;
}

const struct jwk *jwks_find(const struct jwks *s, const char *kid, size_t len)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->keys[i].kid && strlen(s->keys[i].kid) == len && memcmp(s->keys[i].kid, kid, len) == 0)
			return &s->keys[i];
	return NULL;
}
