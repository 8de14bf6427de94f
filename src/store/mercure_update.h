/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_update.h: what a Mercure update keeps beside its row in the log
 * (store_event.mercure): its id, its retry and every topic, canonical
 * first, as one block of lines, "ID\nRETRY\nTOPIC\nTOPIC...". Ids, retry
 * and topics hold no control character (mercure.c refuses them), so a
 * line break always ends a field. An empty ID line: the update has the id
 * herald makes from the log and its number (mercure_log_id), as every row
 * without a block has.
 *
 * Those ids cost nothing to keep: the log's identity (48 random bits the
 * store makes once per log and sets here when it opens it) and the
 * event's number, as a urn:uuid: of version 8, so a subscriber resuming
 * from one is placed without a lookup, and an update that names no id and
 * has one topic is stored as a plain row. Pure, no I/O (but for the
 * random ids). */
#ifndef HERALD_MERCURE_UPDATE_H
#define HERALD_MERCURE_UPDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Take b[0..n) apart; false for a block without its id line (an empty
 * line is an id: the one made from the number, out->id_len 0). */
bool mercure_block_parse(const char *b, size_t n, struct mercure_block *out);

/* The next topic of the lines at *p (before end): true with *t and *tl
 * set and *p moved past it, false when there is none. */
bool mercure_block_next_topic(const char **p, const char *end, const char **t, size_t *tl);

/* A new urn:uuid: (version 7: Unix milliseconds, then random bits),
 * malloc'd: the ids herald gives subscribers. */
char *mercure_new_id(void);

#define MERCURE_LOG_ID_LEN 45 /* "urn:uuid:" and 36 */

/* The log's identity (its low 48 bits), set by the store that opened it,
 * before any id is made or read. */
void mercure_log_identity_set(uint64_t identity);

/* The id of event n of this log into buf (MERCURE_LOG_ID_LEN + 1 bytes). */
void mercure_log_id(int64_t n, char *buf);

/* Whether id is an id mercure_log_id made for this log: true with *n. */
bool mercure_log_id_parse(const char *id, size_t len, int64_t *n);

#endif
