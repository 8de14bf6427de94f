/* SPDX-License-Identifier: BSD-2-Clause */
/* jwt.c: verification of signed tokens (jwt.h). A token is checked in this
 * order, cheapest first, and the first failure is the answer:
 *   1. shape: at most 8 KiB, three strict base64url parts (no padding, no
 *      other characters, unused bits zero), header and payload UTF-8 JSON
 *      objects without NUL;
 *   2. header: with a JWK Set, "kid" chooses the key (an unknown one is
 *      refused, never tried against every key); "alg" exactly the key's
 *      algorithm (the configured one without a set); no "crit";
 *   3. times: exp (required) and nbf, read before the signature so that a
 *      stale token costs none (the payload is untrusted text either way,
 *      and its reading is fuzzed);
 *   4. signature over "header.payload", the costly step (an ES256 check
 *      takes longer than the rest of a stream's open);
 *   5. claims: aud, iss (and the issuer the key is held to), then the
 *      rights, each a topic pattern or a list of them, copied only from a
 *      token whose signature verified.
 * jwt_check puts a cache in front (token_cache.h): a token verified before
 * is found by its SHA-256 and answered with the rights it granted.
 * JSON is read with json.h, signatures with OpenSSL's EVP (RS256, ES256
 * over SHA-256; EdDSA is Ed25519, which hashes inside). The verifier owns
 * its keys (jwks.h; secrets wiped on free), its claim names and its cache.
 * Nothing here prints a token or a secret. */
#include "auth/jwt.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "common/json.h"
#include "common/log.h"
#include "auth/jwks.h"
#include "auth/token_cache.h"
#include "core/topic.h"
#include "common/util.h"

#define JWT_MAX_TOKEN 8192
#define JWT_KEY_FILE_MAX 65536
#define JWT_CLAIM_PATH_MAX 256
#define JWT_EXP_MAX INT64_C(253402300799) /* 9999-12-31T23:59:59Z */
/* The cache of verified tokens: a reconnect storm of this many readers,
 * each with a token of its own, is answered from it; 4 MiB holds them with
 * about 1 KiB of rights each (a few patterns take a hundred bytes). */
#define JWT_CACHE_ENTRIES 4096
#define JWT_CACHE_BYTES (4u << 20)

/* At most one log line a second for tokens naming an unknown kid: a
 * client sending many must not flood the log. */
struct kid_log {
	int64_t last_s;
	unsigned long suppressed;
};

struct jwt_verifier {
	struct jwks keys;               /* the one key of a PEM or secret file (no kid), or jwt_jwks_file's set */
	bool by_kid;                    /* the keys are a JWK Set (jwt_jwks_file or jwt_jwks_url): chosen by kid */
	char *jwks_path;                /* for the unknown-kid log line: jwt_jwks_file's path or jwt_jwks_url */
	const char *jwks_key;           /* which of the two: "jwt_jwks_file" or "jwt_jwks_url" */
	void (*unknown_kid)(void *arg); /* told of a kid the set has not (jwt_verifier_on_unknown_kid) */
	void *unknown_kid_arg;
	EVP_MAC *mac;            /* HMAC, fetched once when a key is HS256 */
	struct kid_log *kid_log; /* written through a const verifier */
	int64_t leeway_s;
	char *audience;       /* NULL: not checked */
	char *issuer;         /* NULL: not checked */
	char *subscribe_path; /* a dotted claim name: mercure.subscribe */
	char *publish_path;
	char *presence_path;
	EVP_MD *sha256; /* the cache's key, fetched once */
	struct token_cache *cache;
};

/* Reasons, indexed by -enum jwt_error. */
static const char *const reasons[] = {
	NULL,
	"the token is malformed",
	"the token's algorithm is not the one configured",
	"the token's signature does not verify",
	"the token has expired",
	"the token is not valid yet",
	"the token's audience is not this server",
	"the token's issuer is not the one configured",
	"unknown key id: no key of jwt_jwks_file has the token's kid",
};
static const char reason_unknown_url[] = "unknown key id: no key of jwt_jwks_url has the token's kid";
static const char reason_no_exp[] = "the token has no exp claim";
static const char reason_no_kid[] = "the token has no key id (kid), which a key set of several keys needs";
static const char reason_key_iss[] = "the token's issuer is not the one its key (kid) is held to";

/* ---- configuration ---------------------------------------------------- */

/* Copy s into buf for an error message: printable ASCII kept, anything
 * else shown as '?', so one message stays one line. */
static const char *shown(const char *s, char *buf, size_t len)
{
	size_t n = 0;
	for (; s[n] && n + 1 < len; n++)
		buf[n] = s[n] >= 0x20 && s[n] < 0x7f ? s[n] : '?';
	buf[n] = '\0';
	return buf;
}

/* A copy of the dotted claim name ("mercure.subscribe": member
 * "subscribe" of member "mercure"). Returns NULL when a segment is empty or
 * holds anything but letters, digits, '_' and '-'. */
static char *claim_path(const char *dotted)
{
	size_t n = strlen(dotted);
	if (n == 0 || n > JWT_CLAIM_PATH_MAX)
		return NULL;
	for (const char *p = dotted;; p++) {
		size_t seg = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");
		if (seg == 0 || (p[seg] != '.' && p[seg] != '\0'))
			return NULL;
		p += seg;
		if (*p == '\0')
			break;
	}
	return xstrdup(dotted);
}

bool jwt_claim_name_valid(const char *dotted)
{
	char *p = claim_path(dotted);
	free(p);
	return p != NULL;
}

/* The verifier's one key (a PEM or secret file), for alg. */
static struct jwk *one_key(struct jwt_verifier *v, enum jwk_alg alg)
{
	v->keys.keys = xcalloc(1, sizeof(*v->keys.keys));
	v->keys.n = 1;
	v->keys.keys[0].alg = alg;
	return &v->keys.keys[0];
}

/* HS256: the secret is the file's bytes less one trailing LF or CRLF. */
static int load_secret(struct jwt_verifier *v, const char *path, char *err, size_t errlen)
{
	char sp[300];
	const char *why;
	unsigned char *buf;
	ssize_t n = jwk_read_file(path, JWK_SECRET_MAX + 2, &buf, &why);
	if (n < 0) {
		snprintf(err, errlen, "jwt_secret_file = \"%s\": %s", shown(path, sp, sizeof(sp)), why);
		return -1;
	}
	size_t len = (size_t)n;
	if (len && buf[len - 1] == '\n')
		len -= len > 1 && buf[len - 2] == '\r' ? 2 : 1;
	if (len == 0)
		snprintf(err, errlen, "jwt_secret_file = \"%s\": the file is empty", shown(path, sp, sizeof(sp)));
	else if (len < JWK_SECRET_MIN)
		snprintf(err, errlen,
			 "jwt_secret_file = \"%s\": the secret is %zu bytes; HS256 needs at least %d "
			 "(e.g. openssl rand -base64 48)",
			 shown(path, sp, sizeof(sp)), len, JWK_SECRET_MIN);
	else if (len > JWK_SECRET_MAX)
		snprintf(err, errlen, "jwt_secret_file = \"%s\": the secret is longer than %d bytes",
			 shown(path, sp, sizeof(sp)), JWK_SECRET_MAX);
	bool ok = len >= JWK_SECRET_MIN && len <= JWK_SECRET_MAX;
	if (ok) {
		struct jwk *k = one_key(v, JWK_HS256);
		k->secret = xmalloc(len);
		memcpy(k->secret, buf, len);
		k->secret_len = len;
	}
	OPENSSL_cleanse(buf, (size_t)n);
	free(buf);
	return ok ? 0 : -1;
}

/* The public key in PEM text buf[0..n): a PUBLIC KEY block, else the key
 * of a CERTIFICATE block. NULL when neither is there. */
static EVP_PKEY *pem_public_key(const unsigned char *buf, size_t n)
{
	BIO *b = BIO_new_mem_buf(buf, (int)n);
	EVP_PKEY *k = b ? PEM_read_bio_PUBKEY(b, NULL, NULL, NULL) : NULL;
	BIO_free(b);
	if (!k) {
		/* Read afresh: the first pass consumed the text. */
		b = BIO_new_mem_buf(buf, (int)n);
		X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
		if (x)
			k = X509_get_pubkey(x);
		X509_free(x);
		BIO_free(b);
	}
	ERR_clear_error();
	return k;
}

/* RS256 / ES256 / EdDSA: a PEM public key or certificate, of the right
 * type. */
static int load_public_key(struct jwt_verifier *v, enum jwk_alg alg, const char *path, char *err, size_t errlen)
{
	char sp[300];
	const char *why;
	unsigned char *buf;
	ssize_t n = jwk_read_file(path, JWT_KEY_FILE_MAX, &buf, &why);
	if (n >= 0) {
		EVP_PKEY *pkey = pem_public_key(buf, (size_t)n);
		if (!pkey && memmem(buf, (size_t)n, "PRIVATE KEY-----", 16))
			why = "the file holds a private key; give the public key (openssl pkey -pubout) or a "
			      "certificate";
		else if (!pkey)
			why = "no PEM public key (BEGIN PUBLIC KEY) or certificate in the file";
		else
			why = jwk_key_mismatch(pkey, alg);
		if (pkey)
			one_key(v, alg)->pkey = pkey;
		OPENSSL_cleanse(buf, (size_t)n); /* it may have held a private key */
		free(buf);
	}
	if (why)
		snprintf(err, errlen, "jwt_public_key_file = \"%s\": %s", shown(path, sp, sizeof(sp)), why);
	return why ? -1 : 0;
}

/* jwt_jwks_file: the keys chosen by kid. */
static int load_jwks(struct jwt_verifier *v, const char *path, char *err, size_t errlen)
{
	char sp[300], why[400];
	if (jwks_load(path, &v->keys, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "jwt_jwks_file = \"%s\": %s", shown(path, sp, sizeof(sp)), why);
		return -1;
	}
	v->by_kid = true;
	v->jwks_path = xstrdup(path);
	v->jwks_key = "jwt_jwks_file";
	return 0;
}

/* jwt_jwks_url: the set the server fetched, or none yet (every token
 * refused as naming an unknown key until one arrives). */
static int load_jwks_text(struct jwt_verifier *v, const struct jwt_settings *s, char *err, size_t errlen)
{
	char sp[300], why[400];
	if (s->jwks_text && jwks_parse(s->jwks_text, s->jwks_len, &v->keys, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "jwt_jwks_url = \"%s\": %s", shown(s->jwks_url, sp, sizeof(sp)), why);
		return -1;
	}
	v->by_kid = true;
	v->jwks_path = xstrdup(s->jwks_url);
	v->jwks_key = "jwt_jwks_url";
	return 0;
}

static const char *or_empty(const char *s)
{
	return s ? s : "";
}

/* Settings that need no file: the algorithm, the leeway, the claim names.
 * *alg is the algorithm, or -1 when the keys come from a JWK Set. */
static int check_settings(const struct jwt_settings *s, struct jwt_verifier *v, int *alg, char *err, size_t errlen)
{
	char sp[300];
	*alg = jwk_alg_from_name(or_empty(s->algorithm));
	if (*alg < 0 && s->algorithm && s->algorithm[0]) {
		snprintf(err, errlen, "jwt_algorithm = \"%s\": not one of HS256, RS256, ES256, EdDSA",
			 shown(s->algorithm, sp, sizeof(sp)));
		return -1;
	}
	if (s->leeway_s < 0) {
		snprintf(err, errlen, "jwt_leeway: must not be negative");
		return -1;
	}
	v->leeway_s = s->leeway_s;
	/* Settings built before the presence claim existed name none: its
	 * default then. */
	const char *presence = s->presence_claim && s->presence_claim[0] ? s->presence_claim : "presence";
	const char *names[3] = { or_empty(s->subscribe_claim), or_empty(s->publish_claim), presence };
	char **paths[3] = { &v->subscribe_path, &v->publish_path, &v->presence_path };
	static const char *const keys[3] = { "jwt_subscribe_claim", "jwt_publish_claim", "jwt_presence_claim" };
	for (int i = 0; i < 3; i++) {
		*paths[i] = claim_path(names[i]);
		if (!*paths[i]) {
			snprintf(err, errlen,
				 "%s = \"%s\": not a claim name: names of letters, digits, _ and -, "
				 "joined by dots (e.g. mercure.subscribe)",
				 keys[i], shown(names[i], sp, sizeof(sp)));
			return -1;
		}
	}
	if (s->audience && s->audience[0])
		v->audience = xstrdup(s->audience);
	if (s->issuer && s->issuer[0])
		v->issuer = xstrdup(s->issuer);
	return 0;
}

/* Exactly one source of keys: jwt_jwks_file alone (each key names its
 * algorithm), or jwt_algorithm with its own key file. */
static int check_files(const struct jwt_settings *s, int alg, char *err, size_t errlen)
{
	const char *jwks = or_empty(s->jwks_file), *secret = or_empty(s->secret_file),
		   *pub = or_empty(s->public_key_file), *url = or_empty(s->jwks_url);
	if (jwks[0] && url[0]) {
		snprintf(err, errlen, "jwt_jwks_file and jwt_jwks_url are both set; keys come from one of them");
		return -1;
	}
	if (jwks[0] || url[0]) {
		const char *key = jwks[0] ? "jwt_jwks_file" : "jwt_jwks_url";
		if (alg >= 0)
			snprintf(err, errlen,
				 "jwt_algorithm = \"%s\" is set, but %s names each key's algorithm; "
				 "leave jwt_algorithm empty",
				 jwk_alg_name((enum jwk_alg)alg), key);
		else if (secret[0] || pub[0])
			snprintf(err, errlen, "%s is set, but %s holds the keys",
				 secret[0] ? "jwt_secret_file" : "jwt_public_key_file", key);
		return alg >= 0 || secret[0] || pub[0] ? -1 : 0;
	}
	bool hs = alg == JWK_HS256;
	const char *want = hs ? secret : pub;
	const char *other = hs ? pub : secret;
	const char *want_key = hs ? "jwt_secret_file" : "jwt_public_key_file";
	const char *other_key = hs ? "jwt_public_key_file" : "jwt_secret_file";
	if (!want[0]) {
		snprintf(err, errlen, "jwt_algorithm = \"%s\" needs %s", jwk_alg_name((enum jwk_alg)alg), want_key);
		return -1;
	}
	if (other[0]) {
		snprintf(err, errlen, "%s is set, but jwt_algorithm = \"%s\" reads %s", other_key,
			 jwk_alg_name((enum jwk_alg)alg), want_key);
		return -1;
	}
	return 0;
}

static int load_keys(struct jwt_verifier *v, const struct jwt_settings *s, int alg, char *err, size_t errlen)
{
	int r;
	if (alg < 0 && s->jwks_url && s->jwks_url[0])
		r = load_jwks_text(v, s, err, errlen);
	else if (alg < 0)
		r = load_jwks(v, s->jwks_file, err, errlen);
	else if (alg == JWK_HS256)
		r = load_secret(v, s->secret_file, err, errlen);
	else
		r = load_public_key(v, (enum jwk_alg)alg, s->public_key_file, err, errlen);
	if (r < 0)
		return -1;
	bool hs = false;
	for (size_t i = 0; i < v->keys.n; i++)
		hs |= v->keys.keys[i].alg == JWK_HS256;
	if (hs && !(v->mac = EVP_MAC_fetch(NULL, "HMAC", NULL))) {
		snprintf(err, errlen, "HS256: this OpenSSL has no HMAC");
		ERR_clear_error();
		return -1;
	}
	return 0;
}

int jwt_verifier_new(const struct jwt_settings *s, struct jwt_verifier **out, char *err, size_t errlen)
{
	int alg;
	*out = NULL;
	if (errlen)
		err[0] = '\0';
	if ((!s->algorithm || !s->algorithm[0]) && (!s->jwks_file || !s->jwks_file[0]) &&
	    (!s->jwks_url || !s->jwks_url[0]))
		return 0;
	struct jwt_verifier *v = xcalloc(1, sizeof(*v));
	v->kid_log = xcalloc(1, sizeof(*v->kid_log));
	if (check_settings(s, v, &alg, err, errlen) < 0 || check_files(s, alg, err, errlen) < 0 ||
	    load_keys(v, s, alg, err, errlen) < 0) {
		jwt_verifier_free(v);
		return -1;
	}
	v->sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!v->sha256) {
		snprintf(err, errlen, "jwt: this OpenSSL has no SHA-256");
		ERR_clear_error();
		jwt_verifier_free(v);
		return -1;
	}
	v->cache = token_cache_new(JWT_CACHE_ENTRIES, JWT_CACHE_BYTES);
	*out = v;
	return 0;
}

size_t jwt_verifier_keys(const struct jwt_verifier *v)
{
	return v ? v->keys.n : 0;
}

void jwt_verifier_on_unknown_kid(struct jwt_verifier *v, void (*fn)(void *arg), void *arg)
{
	v->unknown_kid = fn;
	v->unknown_kid_arg = arg;
}

void jwt_verifier_free(struct jwt_verifier *v)
{
	if (!v)
		return;
	jwks_free(&v->keys);
	free(v->jwks_path);
	free(v->kid_log);
	EVP_MAC_free(v->mac);
	free(v->audience);
	free(v->issuer);
	free(v->subscribe_path);
	free(v->publish_path);
	free(v->presence_path);
	EVP_MD_free(v->sha256);
	token_cache_free(v->cache);
	free(v);
}

/* ---- decoding --------------------------------------------------------- */

/* A token cut into its parts: the signing input is the text up to the
 * second dot; header, payload and signature are decoded. */
struct jws {
	const char *input;
	size_t input_len;
	unsigned char *header, *payload, *sig;
	size_t header_len, payload_len, sig_len;
	unsigned char *buf; /* holds the three decoded parts */
};

/* Split and decode token[0..len) into t. Returns 0, or -1 when it is not
 * three base64url parts. t->buf is set (to be freed) either way. */
static int jws_split(const char *token, size_t len, struct jws *t)
{
	const char *d1 = memchr(token, '.', len);
	const char *d2 = d1 ? memchr(d1 + 1, '.', len - (size_t)(d1 + 1 - token)) : NULL;
	t->buf = xmalloc(len + 1);
	if (!d2 || memchr(d2 + 1, '.', len - (size_t)(d2 + 1 - token)))
		return -1;
	const char *parts[3] = { token, d1 + 1, d2 + 1 };
	size_t lens[3] = { (size_t)(d1 - token), (size_t)(d2 - d1 - 1), len - (size_t)(d2 + 1 - token) };
	unsigned char **outs[3] = { &t->header, &t->payload, &t->sig };
	size_t *olens[3] = { &t->header_len, &t->payload_len, &t->sig_len };
	unsigned char *w = t->buf;
	for (int i = 0; i < 3; i++) {
		ssize_t n = b64url_decode(parts[i], lens[i], w);
		if (n < 0)
			return -1;
		*outs[i] = w;
		*olens[i] = (size_t)n;
		w += n;
	}
	t->input = token;
	t->input_len = (size_t)(d2 - token);
	return 0;
}

/* ---- JSON ------------------------------------------------------------- */

/* Whether j[0..n) is UTF-8 JSON text of an object, holding no NUL byte
 * and no \u0000 escape (which would cut a string short in C); *root is
 * the object. */
static bool read_object(const unsigned char *j, size_t n, struct json_value *root)
{
	return json_parse((const char *)j, n, root) == JSON_OK && root->type == JSON_OBJECT;
}

enum ctype { C_ABSENT, C_NUMBER, C_TEXT, C_ARRAY, C_OTHER };

/* One value looked up in a JSON object. */
struct claim {
	enum ctype type;
	bool is_int; /* C_NUMBER: i, else d */
	int64_t i;
	double d;
	struct json_value v; /* where it is in the token's text */
};

/* Look up the dotted name path ("exp", "mercure.subscribe") in the object
 * root: each name is matched as written in the token, the first of equal
 * names wins, and a path through anything but objects finds nothing. */
static void claim_get(const struct json_value *root, const char *path, struct claim *c)
{
	struct json_value at = *root;
	memset(c, 0, sizeof(*c));
	for (const char *p = path;;) {
		size_t seg = strcspn(p, ".");
		if (!json_member(&at, p, seg, &at))
			return; /* C_ABSENT */
		if (p[seg] == '\0')
			break;
		p += seg + 1;
	}
	c->v = at;
	switch (at.type) {
	case JSON_INTEGER:
	case JSON_REAL:
		c->type = C_NUMBER;
		c->is_int = json_int64(&at, &c->i);
		if (!c->is_int)
			c->d = json_double(&at);
		break;
	case JSON_STRING:
		c->type = C_TEXT;
		break;
	case JSON_ARRAY:
		c->type = C_ARRAY;
		break;
	default:
		c->type = C_OTHER;
	}
}

/* Call fn(arg, element) for each element of the array c; stops when fn
 * returns non-zero and returns that, else 0. */
typedef int element_fn(void *arg, const struct json_value *element);
static int each_element(const struct claim *c, element_fn *fn, void *arg)
{
	struct json_iter it;
	struct json_value e;
	int r = 0;
	json_iter_start(&it, &c->v);
	while (r == 0 && json_iter_next(&it, NULL, &e))
		r = fn(arg, &e);
	return r;
}

/* ---- signatures ------------------------------------------------------- */

static bool verify_hs256(const struct jwt_verifier *v, const struct jwk *k, const struct jws *t)
{
	unsigned char mac[EVP_MAX_MD_SIZE];
	size_t mac_len = 0;
	bool ok = false;
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(v->mac);
	OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
				OSSL_PARAM_construct_end() };
	if (ctx && EVP_MAC_init(ctx, k->secret, k->secret_len, params) &&
	    EVP_MAC_update(ctx, (const unsigned char *)t->input, t->input_len) &&
	    EVP_MAC_final(ctx, mac, &mac_len, sizeof(mac)))
		ok = mac_len == 32 && t->sig_len == 32 && CRYPTO_memcmp(mac, t->sig, 32) == 0;
	OPENSSL_cleanse(mac, sizeof(mac));
	EVP_MAC_CTX_free(ctx);
	return ok;
}

/* The DER ECDSA-Sig-Value for a JWS ES256 signature (r || s, 32 bytes
 * each). Returns its length with *der to be freed by OPENSSL_free, or -1. */
static int es256_der(const unsigned char *raw, unsigned char **der)
{
	ECDSA_SIG *es = ECDSA_SIG_new();
	BIGNUM *r = BN_bin2bn(raw, 32, NULL), *s = BN_bin2bn(raw + 32, 32, NULL);
	int n = -1;
	*der = NULL;
	if (es && r && s && ECDSA_SIG_set0(es, r, s) == 1) {
		r = s = NULL; /* now the signature's */
		n = i2d_ECDSA_SIG(es, der);
	}
	BN_free(r);
	BN_free(s);
	ECDSA_SIG_free(es);
	return n > 0 ? n : -1;
}

/* RS256 (PKCS#1 v1.5) or ES256, both over SHA-256; or EdDSA (Ed25519,
 * which hashes inside: no digest is named). */
static bool verify_pkey(const struct jwk *k, const struct jws *t)
{
	const unsigned char *sig = t->sig;
	size_t sig_len = t->sig_len;
	unsigned char *der = NULL;
	if (k->alg == JWK_EDDSA) {
		if (t->sig_len != 64)
			return false;
	} else if (k->alg == JWK_ES256) {
		int n = t->sig_len == 64 ? es256_der(t->sig, &der) : -1;
		if (n < 0)
			return false;
		sig = der;
		sig_len = (size_t)n;
	} else if (t->sig_len != (size_t)EVP_PKEY_get_size(k->pkey)) {
		return false;
	}
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	EVP_PKEY_CTX *pctx = NULL;
	const char *digest = k->alg == JWK_EDDSA ? NULL : "SHA256";
	bool ok = md && EVP_DigestVerifyInit_ex(md, &pctx, digest, NULL, NULL, k->pkey, NULL) == 1 &&
		  (k->alg != JWK_RS256 || EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) == 1) &&
		  EVP_DigestVerify(md, sig, sig_len, (const unsigned char *)t->input, t->input_len) == 1;
	EVP_MD_CTX_free(md);
	OPENSSL_free(der);
	ERR_clear_error();
	return ok;
}

/* ---- claims ----------------------------------------------------------- */

/* Whether exp lies before now by more than the leeway. A number too large
 * to add the leeway to has not passed. */
static bool is_expired(const struct claim *exp, int64_t now, int64_t leeway)
{
	int64_t limit;
	if (!exp->is_int)
		return (double)now > exp->d + (double)leeway;
	if (__builtin_add_overflow(exp->i, leeway, &limit))
		return false;
	return now > limit;
}

/* Whether nbf lies after now by more than the leeway. */
static bool is_early(const struct claim *nbf, int64_t now, int64_t leeway)
{
	int64_t t;
	if (!nbf->is_int)
		return (double)now + (double)leeway < nbf->d;
	if (__builtin_add_overflow(now, leeway, &t))
		return false;
	return t < nbf->i;
}

/* exp in whole seconds for the rights: a fraction is dropped, and a time
 * past the year 9999 reads as its end, so that callers may add a leeway
 * to it without overflow. */
static int64_t whole_seconds(const struct claim *c)
{
	if (c->is_int)
		return MIN(c->i, JWT_EXP_MAX);
	if (c->d >= (double)JWT_EXP_MAX)
		return JWT_EXP_MAX;
	if (c->d <= -(double)JWT_EXP_MAX)
		return -JWT_EXP_MAX;
	return (int64_t)c->d;
}

/* exp (required) and nbf (optional). Returns JWT_OK or the error, with
 * *why set for a missing exp. */
static int check_times(const struct jwt_verifier *v, const struct json_value *payload, int64_t now,
		       struct jwt_rights *r, const char **why)
{
	struct claim exp, nbf;
	claim_get(payload, "exp", &exp);
	claim_get(payload, "nbf", &nbf);
	if (exp.type == C_ABSENT) {
		*why = reason_no_exp;
		return JWT_EXPIRED;
	}
	if (exp.type != C_NUMBER || (nbf.type != C_ABSENT && nbf.type != C_NUMBER))
		return JWT_MALFORMED;
	if (is_expired(&exp, now, v->leeway_s))
		return JWT_EXPIRED;
	if (nbf.type == C_NUMBER && is_early(&nbf, now, v->leeway_s))
		return JWT_NOT_YET;
	r->exp = whole_seconds(&exp);
	return JWT_OK;
}

/* Whether the JSON value s is the string want. */
static bool same(const struct json_value *s, const char *want)
{
	return json_string_is(s, want, strlen(want));
}

static int audience_is(void *arg, const struct json_value *element)
{
	return same(element, arg);
}

/* "aud", when an audience is configured: it, or a list holding it. */
static int check_audience(const struct jwt_verifier *v, const struct json_value *payload)
{
	struct claim c;
	if (!v->audience)
		return JWT_OK;
	claim_get(payload, "aud", &c);
	bool ok = (c.type == C_TEXT && same(&c.v, v->audience)) ||
		  (c.type == C_ARRAY && each_element(&c, audience_is, v->audience) == 1);
	return ok ? JWT_OK : JWT_BAD_AUDIENCE;
}

/* "iss", when an issuer is configured: exactly it. */
static int check_issuer(const struct jwt_verifier *v, const struct json_value *payload)
{
	struct claim c;
	if (!v->issuer)
		return JWT_OK;
	claim_get(payload, "iss", &c);
	return c.type == C_TEXT && same(&c.v, v->issuer) ? JWT_OK : JWT_BAD_ISSUER;
}

/* A list of patterns being collected. */
struct patterns {
	char **list;
	size_t n;
};

/* Add one pattern; non-zero when it is not a string or not a valid one. */
static int pattern_add(void *arg, const struct json_value *s)
{
	struct patterns *p = arg;
	size_t len;
	if (s->type != JSON_STRING)
		return 1;
	char *text = json_string_dup(s, &len);
	if (!topic_pattern_valid(text, len)) {
		free(text);
		return 1;
	}
	p->list = xrealloc(p->list, (p->n + 1) * sizeof(*p->list));
	p->list[p->n++] = text;
	return 0;
}

static void patterns_free(char **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

/* The rights claim at path: absent grants nothing; a pattern string or a
 * list of pattern strings; anything else is JWT_MALFORMED. */
static int read_patterns(const struct json_value *payload, const char *path, char ***out, size_t *count)
{
	struct claim c;
	struct patterns p = { NULL, 0 };
	int bad;
	claim_get(payload, path, &c);
	if (c.type == C_ABSENT)
		bad = 0;
	else if (c.type == C_TEXT)
		bad = pattern_add(&p, &c.v);
	else if (c.type == C_ARRAY)
		bad = each_element(&c, pattern_add, &p);
	else
		bad = 1;
	if (bad) {
		patterns_free(p.list, p.n);
		return JWT_MALFORMED;
	}
	*out = p.list;
	*count = p.n;
	return JWT_OK;
}

/* The subject ("sub") as presence shows it: a string of 1 to 128
 * printable ASCII bytes; any other "sub" is no subject (the token is
 * still valid: "sub" is not a right). */
static void read_subject(const struct json_value *payload, struct jwt_rights *r)
{
	struct claim c;
	claim_get(payload, "sub", &c);
	if (c.type != C_TEXT)
		return;
	size_t len;
	char *text = json_string_dup(&c.v, &len);
	bool ok = len >= 1 && len <= JWT_SUBJECT_MAX && strlen(text) == len;
	for (size_t i = 0; ok && i < len; i++)
		ok = text[i] >= 0x20 && text[i] < 0x7f;
	if (ok)
		r->sub = text;
	else
		free(text);
}

/* Log a token naming a kid that no key has: at most one line a second
 * (with how many were not logged), the kid shown safely and cut short. */
static void log_unknown_kid(const struct jwt_verifier *v, const struct json_value *kid, int64_t now)
{
	struct kid_log *l = v->kid_log;
	if (now == l->last_s) {
		l->suppressed++;
		return;
	}
	size_t len;
	char *text = json_string_dup(kid, &len);
	char sk[68], sp[300], more[64] = "";
	text[MIN(len, (size_t)64)] = '\0';
	shown(text, sk, sizeof(sk));
	if (l->suppressed)
		snprintf(more, sizeof(more), " (and %lu more since the last line)", l->suppressed);
	log_warn("jwt: refused a token whose kid \"%s%s\" is not in %s \"%s\" (%zu key%s)%s", sk, len > 64 ? "..." : "",
		 v->jwks_key, shown(v->jwks_path, sp, sizeof(sp)), v->keys.n, v->keys.n == 1 ? "" : "s", more);
	free(text);
	l->last_s = now;
	l->suppressed = 0;
}

/* The header: a JSON object with no "crit" (no extension is understood
 * here, so RFC 7515 says refuse), whose "kid" chooses the key from a JWK
 * Set (never each key in turn) and whose "alg" is that key's algorithm.
 * Without a JWK Set the one key is used and "kid" is not read. */
static int check_header(const struct jwt_verifier *v, const struct jws *t, int64_t now, const struct jwk **key,
			const char **why)
{
	struct claim alg, crit, kid;
	struct json_value header;
	if (!read_object(t->header, t->header_len, &header))
		return JWT_MALFORMED;
	claim_get(&header, "alg", &alg);
	claim_get(&header, "crit", &crit);
	const struct jwk *k = v->keys.n ? &v->keys.keys[0] : NULL;
	if (v->by_kid) {
		claim_get(&header, "kid", &kid);
		if (kid.type != C_ABSENT && kid.type != C_TEXT)
			return JWT_MALFORMED;
		if (kid.type == C_ABSENT && v->keys.n > 1) {
			*why = reason_no_kid;
			return JWT_UNKNOWN_KEY;
		}
		if (kid.type == C_TEXT) {
			size_t len;
			char *text = json_string_dup(&kid.v, &len);
			k = jwks_find(&v->keys, text, len);
			free(text);
			if (!k)
				log_unknown_kid(v, &kid.v, now);
		}
		if (!k) {
			/* The set may have rotated since it was fetched: the
			 * server fetches it again (at most once a minute). */
			if (v->unknown_kid)
				v->unknown_kid(v->unknown_kid_arg);
			if (strcmp(v->jwks_key, "jwt_jwks_url") == 0)
				*why = reason_unknown_url;
			return JWT_UNKNOWN_KEY;
		}
	}
	if (alg.type != C_TEXT || !same(&alg.v, jwk_alg_name(k->alg)))
		return JWT_BAD_ALG;
	if (crit.type != C_ABSENT)
		return JWT_MALFORMED;
	*key = k;
	return JWT_OK;
}

/* "iss" when the key is held to an issuer: exactly it. */
static int check_key_issuer(const struct jwk *k, const struct json_value *payload, const char **why)
{
	struct claim c;
	if (!k->iss)
		return JWT_OK;
	claim_get(payload, "iss", &c);
	if (c.type == C_TEXT && same(&c.v, k->iss))
		return JWT_OK;
	*why = reason_key_iss;
	return JWT_BAD_ISSUER;
}

/* Everything after the shape: header, times, signature, claims, rights.
 * *signed_ is set when the signature was computed. */
static int verify_parts(const struct jwt_verifier *v, const struct jws *t, int64_t now, struct jwt_rights *r,
			const char **why, bool *signed_, jwt_claims_fn read, void *arg)
{
	struct json_value payload;
	const struct jwk *k = NULL;
	int e = check_header(v, t, now, &k, why);
	if (e != JWT_OK)
		return e;
	if (!read_object(t->payload, t->payload_len, &payload))
		return JWT_MALFORMED;
	if ((e = check_times(v, &payload, now, r, why)) != JWT_OK)
		return e;
	*signed_ = true;
	if (!(k->alg == JWK_HS256 ? verify_hs256(v, k, t) : verify_pkey(k, t)))
		return JWT_BAD_SIGNATURE;
	if ((e = check_audience(v, &payload)) != JWT_OK || (e = check_issuer(v, &payload)) != JWT_OK ||
	    (e = check_key_issuer(k, &payload, why)) != JWT_OK)
		return e;
	if (read) {
		/* Another protocol's claims, read by its own module. */
		struct json_value header;
		if (!read_object(t->header, t->header_len, &header))
			return JWT_MALFORMED;
		if ((e = read(arg, &header, &payload)) != JWT_OK)
			return e;
		read_subject(&payload, r);
		return JWT_OK;
	}
	if ((e = read_patterns(&payload, v->subscribe_path, &r->subscribe, &r->nsubscribe)) != JWT_OK ||
	    (e = read_patterns(&payload, v->publish_path, &r->publish, &r->npublish)) != JWT_OK ||
	    (e = read_patterns(&payload, v->presence_path, &r->presence, &r->npresence)) != JWT_OK)
		return e;
	read_subject(&payload, r);
	return JWT_OK;
}

static int verify(const struct jwt_verifier *v, const char *token, size_t len, int64_t now, struct jwt_rights *r,
		  const char **why, bool *signed_, jwt_claims_fn read, void *arg)
{
	struct jws t = { 0 };
	int e = JWT_MALFORMED;
	memset(r, 0, sizeof(*r));
	*why = NULL;
	if (v && token && len <= JWT_MAX_TOKEN && jws_split(token, len, &t) == 0)
		e = verify_parts(v, &t, now, r, why, signed_, read, arg);
	free(t.buf);
	if (e != JWT_OK) {
		jwt_rights_free(r);
		if (!*why)
			*why = reasons[-e];
	}
	return e;
}

int jwt_verify(const struct jwt_verifier *v, const char *token, size_t len, int64_t now, struct jwt_rights *r,
	       const char **why)
{
	bool signed_ = false;
	return verify(v, token, len, now, r, why, &signed_, NULL, NULL);
}

int jwt_verify_claims(const struct jwt_verifier *v, const char *token, size_t len, int64_t now, jwt_claims_fn read,
		      void *arg, struct jwt_rights *r, const char **why)
{
	bool signed_ = false;
	return verify(v, token, len, now, r, why, &signed_, read, arg);
}

int jwt_check(struct jwt_verifier *v, const char *token, size_t len, int64_t now, struct jwt_rights *r,
	      const char **why, struct jwt_cost *cost)
{
	unsigned char key[TOKEN_CACHE_KEY_LEN];
	bool keyed = false;
	memset(cost, 0, sizeof(*cost));
	if (v && token && len <= JWT_MAX_TOKEN) {
		keyed = EVP_Digest(token, len, key, NULL, v->sha256, NULL) == 1;
		if (!keyed)
			ERR_clear_error();
	}
	if (keyed && token_cache_get(v->cache, key, now, r)) {
		*why = NULL;
		cost->cached = true;
		return JWT_OK;
	}
	int e = verify(v, token, len, now, r, why, &cost->signature, NULL, NULL);
	if (e == JWT_OK && keyed) {
		/* Valid while a verification would pass: until exp plus the
		 * leeway (exp is required, so every entry has an end). */
		int64_t until;
		if (__builtin_add_overflow(r->exp, v->leeway_s, &until))
			until = INT64_MAX;
		token_cache_put(v->cache, key, r, now, until);
	}
	return e;
}

void jwt_rights_free(struct jwt_rights *r)
{
	patterns_free(r->subscribe, r->nsubscribe);
	patterns_free(r->publish, r->npublish);
	patterns_free(r->presence, r->npresence);
	free(r->sub);
	memset(r, 0, sizeof(*r));
}

void jwt_settings_from_config(const struct config *cfg, struct jwt_settings *out)
{
	*out = (struct jwt_settings){
		.algorithm = cfg->jwt_algorithm,
		.secret_file = cfg->jwt_secret_file,
		.public_key_file = cfg->jwt_public_key_file,
		.jwks_file = cfg->jwt_jwks_file,
		.jwks_url = cfg->jwt_jwks_url,
		.leeway_s = cfg->jwt_leeway_s,
		.audience = cfg->jwt_audience,
		.issuer = cfg->jwt_issuer,
		.subscribe_claim = cfg->jwt_subscribe_claim,
		.publish_claim = cfg->jwt_publish_claim,
		.presence_claim = cfg->jwt_presence_claim,
	};
}

int jwt_check_config(const struct config *cfg)
{
	static const char *const claim_keys[] = { "jwt_subscribe_claim", "jwt_publish_claim", "jwt_presence_claim" };
	const char *claims[] = { cfg->jwt_subscribe_claim, cfg->jwt_publish_claim, cfg->jwt_presence_claim };
	int errors = 0;
	for (size_t i = 0; i < ARRAY_LEN(claims); i++) {
		if (!jwt_claim_name_valid(claims[i])) {
			config_bad_value(cfg, claim_keys[i], claims[i],
					 "not a claim name: names of letters, digits, _ and -, joined by dots (e.g. "
					 "mercure.subscribe)");
			errors++;
		}
	}
	if (errors)
		return errors;
	/* An algorithm reads exactly its own key file, and a JWK Set names
	 * each key's algorithm; a key file without either is a mistake. */
	const char *alg = cfg->jwt_algorithm, *jwks = cfg->jwt_jwks_file;
	const char *files[] = { "jwt_secret_file", "jwt_public_key_file" };
	const char *paths[] = { cfg->jwt_secret_file, cfg->jwt_public_key_file };
	const char *set_key = "jwt_jwks_file";
	if (jwks[0] && cfg->jwt_jwks_url[0]) {
		log_err("%s: jwt_jwks_file and jwt_jwks_url (%s) are both set; keys come from one of them",
			config_origin(cfg, "jwt_jwks_file"), config_origin(cfg, "jwt_jwks_url"));
		return errors + 1;
	}
	if (cfg->jwt_jwks_url[0]) {
		jwks = cfg->jwt_jwks_url;
		set_key = "jwt_jwks_url";
	}
	if (!alg[0] && !jwks[0]) {
		for (size_t i = 0; i < 2; i++) {
			if (paths[i][0]) {
				log_err("%s: %s is set, but jwt_algorithm is not (signed tokens are off)",
					config_origin(cfg, files[i]), files[i]);
				errors++;
			}
		}
		return errors;
	}
	const char *source = set_key;
	if (jwks[0]) {
		if (alg[0]) {
			log_err("%s: jwt_algorithm = \"%s\" is set, but %s (%s) names each key's algorithm; "
				"leave jwt_algorithm empty",
				config_origin(cfg, "jwt_algorithm"), alg, set_key, config_origin(cfg, set_key));
			errors++;
		}
		for (size_t i = 0; i < 2; i++) {
			if (paths[i][0]) {
				log_err("%s: %s is set, but %s (%s) holds the keys", config_origin(cfg, files[i]),
					files[i], set_key, config_origin(cfg, set_key));
				errors++;
			}
		}
	} else {
		size_t want = strcmp(alg, "HS256") == 0 ? 0 : 1, other = 1 - want;
		source = files[want];
		if (!paths[want][0]) {
			log_err("%s: jwt_algorithm = \"%s\" needs %s", config_origin(cfg, "jwt_algorithm"), alg,
				files[want]);
			errors++;
		}
		if (paths[other][0]) {
			log_err("%s: %s is set, but jwt_algorithm = \"%s\" (%s) reads %s instead",
				config_origin(cfg, files[other]), files[other], alg,
				config_origin(cfg, "jwt_algorithm"), files[want]);
			errors++;
		}
	}
	if (errors)
		return errors;
	/* Built as the server will build it, and freed: a key that does not
	 * load is refused before anything starts. */
	struct jwt_settings js;
	struct jwt_verifier *v = NULL;
	char err[700];
	jwt_settings_from_config(cfg, &js);
	if (jwt_verifier_new(&js, &v, err, sizeof(err)) < 0) {
		log_err("%s: %s", config_origin(cfg, source), err);
		errors++;
	}
	jwt_verifier_free(v);
	return errors;
}
