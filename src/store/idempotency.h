/* SPDX-License-Identifier: BSD-2-Clause */
/* idempotency.h: the pieces of a publish that is safe to retry
 * (Idempotency-Key, the IETF httpapi draft): the key read from its header
 * (a Structured Field sf-string), who the publisher is (what keys are scoped
 * to), and the fingerprint of a body. Pure functions: no I/O, no state; the
 * store keeps the keys (store.h) and the publisher answers (publish.c). */
#ifndef HERALD_IDEMPOTENCY_H
#define HERALD_IDEMPOTENCY_H

#include <stdbool.h>
#include <stddef.h>

/* The longest key taken, unescaped (the draft sets no bound; a UUID is 36). */
#define IDEM_KEY_MAX 255
/* A SHA-256 in lowercase hex, with its NUL. */
#define IDEM_HEX_LEN 65
/* The longest publisher name made by idem_publisher, with its NUL. */
#define IDEM_PUBLISHER_MAX 320

/* Parse a header value (already trimmed of spaces and tabs) as an sf-string:
 * a double-quoted string of printable ASCII where only \" and \\ are
 * escapes. Writes the unescaped key (1 to IDEM_KEY_MAX characters) with its
 * NUL into out (IDEM_KEY_MAX + 1 bytes). Returns 0, or -1 with *why set to
 * a static reason. */
int idem_key_parse(const char *value, size_t n, char *out, const char **why);

/* Write the SHA-256 of the bytes of a (then, if b is not NULL, a zero byte
 * and the bytes of b) as lowercase hex into out. */
void idem_digest(const char *a, size_t alen, const char *b, size_t blen, char out[IDEM_HEX_LEN]);

/* Who a keyed publish comes from, the scope of its keys, written into out
 * (IDEM_PUBLISHER_MAX bytes): "sub:<subject>" for a signed token with a sub
 * claim (jwt, a token already verified), "jwt:<digest>" for one without,
 * "token" for the static publish token, else "peer:<address>" for a local
 * publisher without a token (the address without port, or "unix"). */
void idem_publisher(const char *jwt, size_t jwt_len, bool static_token, const char *peer, char *out);

#endif
