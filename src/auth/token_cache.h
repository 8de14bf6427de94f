/* SPDX-License-Identifier: BSD-2-Clause */
/* token_cache.h: signed tokens verified before, so that a reader who
 * reconnects with the same token (a reconnect storm: every reader at once)
 * costs a hash and a lookup instead of a signature check. An entry is the
 * SHA-256 of the whole token (the caller computes it) and a copy of the
 * rights it granted, valid until a time the caller gives (the token's exp
 * plus the leeway). The cache is bounded in entries and in bytes, the least
 * recently used entry going first. Only verified tokens are put here; the
 * verifier owns its cache, so a new key (a reload builds a new verifier)
 * starts empty. Pure: no I/O, no clock (now is passed in). */
#ifndef HERALD_TOKEN_CACHE_H
#define HERALD_TOKEN_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/jwt.h"

#define TOKEN_CACHE_KEY_LEN 32 /* SHA-256 */

struct token_cache;

/* An empty cache of at most max_entries entries holding at most max_bytes
 * (entry headers, pattern arrays and their strings, counted exactly). */
struct token_cache *token_cache_new(size_t max_entries, size_t max_bytes);
void token_cache_free(struct token_cache *c);

/* The rights cached under key, copied into *r (free with jwt_rights_free):
 * true when there is an entry, now is not past its valid_until, and now is
 * not before the time it was put (a clock that went back could make a
 * check pass now that failed then; such an entry is dropped, so the token
 * is verified again). Otherwise false, with *r empty. A hit makes the
 * entry the most recently used. */
bool token_cache_get(struct token_cache *c, const unsigned char key[TOKEN_CACHE_KEY_LEN], int64_t now,
		     struct jwt_rights *r);

/* Cache a copy of r under key (replacing an entry of the same key) until
 * valid_until, verified at now. Evicts the least recently used entries to
 * stay within both bounds; an entry larger than max_bytes alone is not
 * cached. */
void token_cache_put(struct token_cache *c, const unsigned char key[TOKEN_CACHE_KEY_LEN], const struct jwt_rights *r,
		     int64_t now, int64_t valid_until);

size_t token_cache_entries(const struct token_cache *c);
size_t token_cache_bytes(const struct token_cache *c);

#endif
