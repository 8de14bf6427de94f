/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_update.h: what a Mercure update keeps beside its row in the log
 * (store_event.mercure): its id, its retry and every topic, canonical
 * first, as one block of lines, "ID\nRETRY\nTOPIC\nTOPIC...". Ids, retry
 * and topics hold no control character (mercure.c refuses them), so a
 * line break always ends a field. Pure, no I/O (but for the random ids). */
#ifndef HERALD_MERCURE_UPDATE_H
#define HERALD_MERCURE_UPDATE_H

#include <stdbool.h>
#include <stddef.h>

/* A block taken apart: slices of the block's text. */
struct mercure_block {
	const char *id;
	size_t id_len;
	const char *retry; /* digits, or empty */
	size_t retry_len;
	const char *topics; /* the topic lines, canonical first */
	size_t topics_len;
};

/* A new block (malloc'd, NUL-terminated, *len its length) of id, retry
 * ("" for none) and the n topics. */
char *mercure_block_new(const char *id, const char *retry, char *const *topics, size_t n, size_t *len);

/* Take b[0..n) apart; false for a block without its id line. */
bool mercure_block_parse(const char *b, size_t n, struct mercure_block *out);

/* The next topic of the lines at *p (before end): true with *t and *tl
 * set and *p moved past it, false when there is none. */
bool mercure_block_next_topic(const char **p, const char *end, const char **t, size_t *tl);

/* A new urn:uuid: (version 7: Unix milliseconds, then random bits, so
 * that ids made in a row are near in the log's index), malloc'd: the ids herald gives
 * updates and subscribers. */
char *mercure_new_id(void);

/* The id of an update published with an Idempotency-Key and no id of its
 * own, malloc'd: a urn:uuid: (version 8, its bits the SHA-256 of the
 * publisher, the key and the body's fingerprint), so a retry of the same
 * publish names the same update. */
char *mercure_keyed_id(const char *publisher, const char *key, const char *body_hash);

#endif
