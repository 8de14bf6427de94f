/* SPDX-License-Identifier: BSD-2-Clause */
/* jwks_fetch.h: jwt_jwks_url, a JWK Set kept fresh from an identity
 * provider over the outbound client (net/http_client.h). The set is
 * fetched at start, again when its Cache-Control max-age runs out (clamped
 * to [60 s, 24 h]; 1 h without one), when a token names a kid the set has
 * not (at most once a minute, never while a fetch is out), and on SIGHUP.
 * A document that arrives, answers 200 and parses as a set by jwks.c's
 * rules is kept and handed to the owner, who builds a new verifier from it;
 * anything else (no answer in time, another status, a body over the cap, a
 * set refused) keeps the keys in force, logged once per run of failures,
 * and is tried again after 5 s, doubling to a minute.
 *
 * Nothing waits for a fetch: start-up goes on without keys (every token
 * refused as naming an unknown key until the first set arrives), and a
 * token arriving while a fetch is out is answered with the keys in force.
 * Owned by the server; the client is lent and outlives it. */
#ifndef HERALD_JWKS_FETCH_H
#define HERALD_JWKS_FETCH_H

#include <stddef.h>

struct loop;
struct http_client;
struct jwks_fetch;

/* A new set arrived: text[0..len) parses (jwks_parse), and differs from
 * the one before. Valid during the call; jwks_fetch_text gives it later. */
typedef void (*jwks_fetch_fn)(void *arg, const char *text, size_t len);

/* Keep url's set fresh, starting now. */
struct jwks_fetch *jwks_fetch_new(struct loop *lp, struct http_client *client, const char *url, jwks_fetch_fn fn,
				  void *arg);
void jwks_fetch_free(struct jwks_fetch *f);

/* Fetch now (a reload), from url (it may have changed: the set in force
 * stays until the new address answers). */
void jwks_fetch_again(struct jwks_fetch *f, const char *url);

/* A token named a kid the set has not: fetch now unless a fetch is out or
 * one was started for this reason less than a minute ago. */
void jwks_fetch_unknown_kid(void *f);

/* The last set that arrived, or NULL (none yet). */
const char *jwks_fetch_text(const struct jwks_fetch *f, size_t *len);

#endif
