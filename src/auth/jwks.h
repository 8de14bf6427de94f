/* SPDX-License-Identifier: BSD-2-Clause */
/* jwks.h: signing keys for tokens, as a JWK Set (RFC 7517) or as the one
 * key of the PEM and secret files. A key is public (RSA of 2048 bits or
 * more for RS256, EC on P-256 for ES256, OKP Ed25519 for EdDSA) or a
 * shared secret ("oct", at least 32 bytes, for HS256); each has exactly one
 * algorithm, so a token's "alg" must be that key's.
 *
 * A set's keys are chosen by "kid": every key of a set of more than one
 * must have a kid, and no two the same. A key may be held to one issuer by
 * a member "iss" (not in RFC 7517, whose rule is that members not
 * understood are ignored, so the file stays a valid JWK Set for other
 * readers): a token verified with that key must carry exactly that "iss".
 * One file for every issuer keeps the operator's picture whole: the keys
 * and whom each belongs to, side by side.
 *
 * Refused: a set that is not {"keys": [...]}, an empty one, a "use" other
 * than "sig", an "alg" that does not fit the "kty", private members ("d",
 * ...: a verifier needs the public half only), weak keys, and EC points
 * off the curve. Every refusal names the key (its index and kid) and the
 * member. Parsing reads only the given text (fuzzed: tests/fuzz/fuzz_jwks.c).
 * The set owns its keys (EVP_PKEY, secrets wiped on free). */
#ifndef HERALD_JWKS_H
#define HERALD_JWKS_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The algorithms a key verifies (one per key). */
enum jwk_alg { JWK_HS256, JWK_RS256, JWK_ES256, JWK_EDDSA };

#define JWK_ALG_COUNT 4
#define JWKS_MAX_KEYS 64
#define JWKS_FILE_MAX (256 * 1024)
#define JWK_SECRET_MIN 32
#define JWK_SECRET_MAX 4096
#define JWK_KID_MAX 256

/* The JOSE name of an algorithm ("HS256", ..., "EdDSA"). */
const char *jwk_alg_name(enum jwk_alg a);

/* The algorithm named name (exactly), or -1. */
int jwk_alg_from_name(const char *name);

struct jwk {
	enum jwk_alg alg;
	char *kid;             /* NULL: none (a PEM or secret file, or a one-key set) */
	char *iss;             /* NULL: any issuer; else the token's "iss" must be it */
	EVP_PKEY *pkey;        /* RS256, ES256, EdDSA */
	unsigned char *secret; /* HS256 */
	size_t secret_len;
};

struct jwks {
	struct jwk *keys;
	size_t n;
};

/* Parse the JWK Set text[0..n) into *out (emptied first). Returns 0, or -1
 * with *out empty and a one-line reason in err, e.g.
 * 'keys[2] (kid "b"): "crv" is "P-384"; EC keys must be on P-256 (ES256)'.
 * Secrets never appear in err. */
int jwks_parse(const char *text, size_t n, struct jwks *out, char *err, size_t errlen);

/* Read the file path (a regular file of at most JWKS_FILE_MAX bytes) and
 * parse it; err as jwks_parse's, without the path (the caller names it). */
int jwks_load(const char *path, struct jwks *out, char *err, size_t errlen);

void jwks_free(struct jwks *s);

/* The key whose kid is kid[0..len), or NULL. */
const struct jwk *jwks_find(const struct jwks *s, const char *kid, size_t len);

/* Why public key k cannot verify alg (RS256, ES256 or EdDSA), or NULL. */
const char *jwk_key_mismatch(EVP_PKEY *k, enum jwk_alg alg);

/* Decode the unpadded base64url text s[0..n) into out (room for 3n/4
 * bytes). Only the canonical encoding: a length that leaves a lone
 * character, any other character (padding too), or unused low bits that
 * are not zero fail. Returns the decoded length, or -1. */
ssize_t b64url_decode(const char *s, size_t n, unsigned char *out);

/* Read the regular file path whole, at most max bytes, into a new buffer
 * (the caller wipes and frees it). Returns the byte count, or -1 with a
 * static reason in *why. Opening does not block on a FIFO, which is
 * refused. */
ssize_t jwk_read_file(const char *path, size_t max, unsigned char **out, const char **why);

#endif
