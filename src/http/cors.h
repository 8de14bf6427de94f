/* SPDX-License-Identifier: BSD-2-Clause */
/* cors.h: which web origins may use herald from a browser (allow_origin):
 * none, every one ("*"), or a list, parsed once per load. Streams echo an
 * allowed origin, publish answers carry it, and preflights are answered
 * from it. */
#ifndef HERALD_CORS_H
#define HERALD_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

struct cors {
	bool any;       /* allow_origin = "*" */
	char **origins; /* the listed origins, exactly as written */
	size_t n;
};

/* Parse allow_origin (already checked at load) into c, replacing what was
 * there. */
void cors_set(struct cors *c, const char *allow_origin);
void cors_free(struct cors *c);

/* The value for Access-Control-Allow-Origin when origin[0..n) may use
 * herald: "*" for any (when credentials are not involved), the listed
 * origin itself, or NULL when it is not allowed. */
const char *cors_allow(const struct cors *c, const char *origin, size_t n);

/* Whether origin[0..n) is one of the listed origins (not merely "*"): the
 * condition for sending credentials (cookies) across sites. */
bool cors_listed(const struct cors *c, const char *origin, size_t n);

/* Add the response fields for an allowed origin to h (none when origin is
 * NULL or not allowed): Access-Control-Allow-Origin, and for a listed
 * origin also Access-Control-Allow-Credentials and Vary: Origin. Returns
 * whether it was allowed. */
bool cors_fields(const struct cors *c, const char *origin, size_t n, struct http_head *h);

#endif
