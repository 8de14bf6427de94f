/* SPDX-License-Identifier: BSD-2-Clause */
/* jwt.h: signed tokens (JWS compact serialization, RFC 7515/7519) that
 * carry a reader's and a publisher's topic rights. Either one algorithm,
 * fixed by configuration (HS256 with a secret read from a file, or RS256 /
 * ES256 / EdDSA with a PEM public key file), or a JWK Set (jwks.h) whose
 * keys the token's "kid" chooses, each with its own algorithm and perhaps
 * held to an issuer; an unknown kid is refused, never tried against every
 * key. "alg": "none", an algorithm other than the key's, and an HMAC token
 * against a public key are refused. "exp" is required, "nbf"
 * honoured, both with a leeway; "aud" and "iss" checked when configured.
 * The rights are read from claims named by dotted paths ("subscribe", or
 * "mercure.subscribe" for a token minted for Mercure; "presence"), each a
 * list of topic patterns (topic.h); the subject is "sub". Secrets and tokens never appear in errors or logs. */
#ifndef HERALD_JWT_H
#define HERALD_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a verifier is built from (the jwt_* configuration keys). */
struct jwt_settings {
	const char *algorithm;       /* "HS256", "RS256", "ES256" or "EdDSA"; "" = tokens off (or jwks_file) */
	const char *secret_file;     /* HS256: the shared secret (one trailing newline stripped) */
	const char *public_key_file; /* RS256 / ES256 / EdDSA: a PEM public key (or certificate) */
	int64_t leeway_s;            /* clock skew allowed on exp and nbf */
	const char *audience;        /* "" = not checked; else "aud" must be it or contain it */
	const char *issuer;          /* "" = not checked; else "iss" must equal it */
	const char *subscribe_claim; /* dotted path, e.g. "subscribe" or "mercure.subscribe" */
	const char *publish_claim;   /* dotted path, e.g. "publish" or "mercure.publish" */
	const char *presence_claim;  /* dotted path, e.g. "presence": who may ask GET /api/presence */
	const char *jwks_file;       /* a JWK Set (jwks.h), with algorithm "": the keys chosen by kid */
	const char *jwks_url;        /* instead of jwks_file: a JWK Set fetched by the server (named in logs) */
	const char *jwks_text;       /* with jwks_url: the set's text as last fetched; NULL: none yet (no keys) */
	size_t jwks_len;
};

/* The rights a verified token grants. Owned by the caller once filled;
 * release with jwt_rights_free. */
struct jwt_rights {
	char **subscribe; /* valid topic patterns (topic.h) */
	size_t nsubscribe;
	char **publish;
	size_t npublish;
	char **presence; /* topics whose presence the bearer may ask about */
	size_t npresence;
	char *sub;   /* the "sub" claim when it is a string of 1 to 128 printable bytes, else NULL */
	int64_t exp; /* Unix seconds; a later exp than 9999-12-31 reads as that */
};

struct jwt_verifier;

#define JWT_SUBJECT_MAX 128 /* the longest "sub" taken as a subject */

/* Build a verifier: reads and parses the key file now (nothing is read
 * later: a changed file is a new verifier, with a cache of its own).
 * Returns 0 with *out set, or with *out NULL when s->algorithm and
 * s->jwks_file are both "" (tokens off); or -1 with a one-line reason in err naming the setting
 * and file (never the secret), e.g. an unreadable file, an empty secret,
 * a PEM that is not a public key, a key of the wrong type for the
 * algorithm (an EC key for RS256, an RSA key or a curve other than P-256
 * for ES256). */
int jwt_verifier_new(const struct jwt_settings *s, struct jwt_verifier **out, char *err, size_t errlen);
void jwt_verifier_free(struct jwt_verifier *v);

/* How many keys v holds (1 without a JWK Set; 0 for NULL). */
size_t jwt_verifier_keys(const struct jwt_verifier *v);

/* Call fn(arg) when a token names a kid the set has not (or with
 * jwks_url before any set arrived): the server fetches the set again. The
 * token is refused all the same; fn must not block, and should only
 * schedule. */
void jwt_verifier_on_unknown_kid(struct jwt_verifier *v, void (*fn)(void *arg), void *arg);

/* Whether dotted is a claim name jwt_verifier_new takes: names of letters,
 * digits, '_' and '-', joined by dots ("subscribe", "mercure.subscribe"),
 * at most 256 bytes. Lets the configuration refuse a bad one at its key. */
bool jwt_claim_name_valid(const char *dotted);

/* Failures of jwt_verify, each with a static reason for a 401 body. */
enum jwt_error {
	JWT_OK = 0,
	JWT_MALFORMED = -1,     /* not three base64url parts, bad JSON, a claim of the wrong type */
	JWT_BAD_ALG = -2,       /* "none", or another algorithm than the configured one */
	JWT_BAD_SIGNATURE = -3, /* the signature does not verify */
	JWT_EXPIRED = -4,       /* exp in the past (beyond the leeway), or missing */
	JWT_NOT_YET = -5,       /* nbf in the future (beyond the leeway) */
	JWT_BAD_AUDIENCE = -6,
	JWT_BAD_ISSUER = -7,  /* or not the issuer the token's key is held to */
	JWT_UNKNOWN_KEY = -8, /* a JWK Set has no key of the token's kid, or the token has none */
};

/* Verify token[0..len) at Unix time now. Returns JWT_OK with *r filled, or
 * a jwt_error with *why a static reason such as "the token has expired"
 * and *r empty. A rights claim that is absent grants nothing; present, it
 * must be a list of valid patterns or a single pattern string (anything
 * else is JWT_MALFORMED). A token longer than 8 KiB is JWT_MALFORMED. */
int jwt_verify(const struct jwt_verifier *v, const char *token, size_t len, int64_t now, struct jwt_rights *r,
	       const char **why);

struct json_value;

/* Reads another protocol's claims from a verified token's header and
 * payload (the Mercure endpoint's authorization details): returns JWT_OK,
 * or the jwt_error the token is refused with. */
typedef int (*jwt_claims_fn)(void *arg, const struct json_value *header, const struct json_value *payload);

/* jwt_verify, except that herald's rights claims are not read: once the
 * signature, times, aud and iss pass, read(arg, header, payload) reads
 * what its protocol needs. *r gets only exp and sub. No cache. */
int jwt_verify_claims(const struct jwt_verifier *v, const char *token, size_t len, int64_t now, jwt_claims_fn read,
		      void *arg, struct jwt_rights *r, const char **why);

/* What jwt_check spent on a token, for the counters. */
struct jwt_cost {
	bool cached;    /* answered from the cache of verified tokens */
	bool signature; /* a signature was computed (the costly step) */
};

/* jwt_verify through v's cache of verified tokens: a token that verified
 * before (the same text: keyed by its SHA-256) and whose exp plus the
 * leeway has not passed is answered with a copy of the rights it granted,
 * without a signature check. A token that verifies now is cached; a
 * refused one is not (refusals of a token's time and shape already cost
 * no signature). The cache belongs to v, so a new key (a new verifier)
 * never sees an answer of the old one. *cost says what was done. */
int jwt_check(struct jwt_verifier *v, const char *token, size_t len, int64_t now, struct jwt_rights *r,
	      const char **why, struct jwt_cost *cost);

void jwt_rights_free(struct jwt_rights *r);

struct config;

/* Fill out with the jwt_* settings of cfg, for jwt_verifier_new; the
 * strings point into cfg, which must outlive out. */
void jwt_settings_from_config(const struct config *cfg, struct jwt_settings *out);

/* Check the jwt_* settings of cfg once loaded: claim names jwt_verify can
 * follow, the algorithm's own key file set and the other one not, and a
 * verifier that builds from them (the key file read, then freed). Logs
 * each error with the key's origin (config_origin) and returns how many;
 * the secret is never shown. */
int jwt_check_config(const struct config *cfg);

#endif
