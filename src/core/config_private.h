/* SPDX-License-Identifier: BSD-2-Clause */
/* config_private.h: what config.c (the sources: defaults, file,
 * environment, flags) and config_keys.c (the key table and the value
 * parsers) share, and no other file sees. */
#ifndef HERALD_CONFIG_PRIVATE_H
#define HERALD_CONFIG_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

enum ktype { K_STR, K_INT, K_DUR_MS, K_DUR_S, K_SIZE, K_LIST, K_LEVEL, K_MODE, K_CHOICE, K_BOOL };

enum {
	KF_SECRET = 1,  /* never printed nor echoed in an error */
	KF_ZERO_OK = 2, /* 0 is allowed below min (0 = off) */
	KF_URL = 4,     /* may hold a password: printed and echoed without it */
	KF_RESTART = 8, /* read at start-up only: a reload keeps the running value */
	KF_AUTO = 16,   /* K_INT: "auto" is one per CPU this process may run on, at most max */
};

/* Extra validation of a string value: NULL, or the reason (static, or
 * written into buf). */
typedef const char *key_check_fn(const char *v, char *buf, size_t len);

struct key {
	const char *name;
	enum ktype type;
	size_t off;
	int64_t min, max;
	const char *def;
	unsigned flags;
	key_check_fn *check;        /* K_STR only, or NULL */
	const char *const *choices; /* K_CHOICE: the names, NULL-terminated; the value is the index */
};

#define OFF(f) offsetof(struct config, f)

/* Every key, in the order usage and --check-config print them; an index
 * into it is also an index into cfg->origin. */
extern const struct key config_keys[];
extern const size_t config_nkeys;

/* The key called name (n bytes); a dash matches an underscore, so that
 * "max-body" in a file or a flag is max_body. NULL if none. */
const struct key *config_key_find(const char *name, size_t n);
/* Whether name (n bytes) spells key, a dash for an underscore. */
bool config_key_name_is(const char *key, const char *name, size_t n);
const struct key *config_key_named(const char *name);
/* The key nearest to the unknown name (n bytes; a dash read as an
 * underscore) when it is likely a slip of the keyboard, else NULL. */
const struct key *config_key_nearest(const char *name, size_t n);
/* Set one key of cfg from text (not a K_LIST: config.c's list_add); returns
 * NULL or the reason (static, or in buf). */
const char *config_key_set(struct config *cfg, const struct key *k, const char *v, char *buf, size_t len);

/* A switch: on/off, yes/no, true/false, 1/0; NULL or the reason. */
const char *config_parse_bool(const char *v, bool *out);

#endif
