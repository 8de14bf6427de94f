/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_match.h: the Mercure protocol's topic matchers (exact, URL
 * pattern, and the wildcard "*"), the values a topic, id or type may hold,
 * and the rights a token grants in either claim style: RFC 9068 access
 * tokens' authorization_details of type
 * https://mercure.rocks/authorization-detail, or the older "mercure" claim
 * with "publish" and "subscribe" lists, and a subscription's query string.
 * Pure: no I/O. */
#ifndef HERALD_MERCURE_MATCH_H
#define HERALD_MERCURE_MATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

#define MERCURE_MAX_MATCHERS 64 /* per request, and per token and action */
#define MERCURE_MAX_VALUE 2048  /* bytes of a topic, matcher or id */
/* The widths (urlpattern.h) of one list's URL patterns, added up: what
 * judging one topic byte may cost the list, at most. */
#define MERCURE_MAX_WIDTH 256

enum mercure_kind { MERCURE_ANY, MERCURE_EXACT, MERCURE_URLPATTERN };

struct urlpattern;

struct mercure_matcher {
	enum mercure_kind kind;
	char *text; /* owned, NUL-terminated */
	size_t len;
	struct urlpattern *up; /* MERCURE_URLPATTERN: owned */
};

/* A list of matchers, owned; base is the hub's URL relative patterns and
 * topics resolve against (owned). */
struct mercure_matchers {
	struct mercure_matcher *v;
	size_t n;
	size_t width; /* of its URL patterns, added up */
};

/* Whether s[0..n) is a value the protocol allows for a topic, matcher,
 * id or type: 1 to MERCURE_MAX_VALUE bytes of UTF-8 without C0 or C1
 * controls, DEL, or Unicode format characters (Cf). */
bool mercure_value_valid(const char *s, size_t n);

/* Add a matcher of kind for text[0..n) ("*" is the wildcard whatever the
 * kind). Returns NULL, or a static reason it is refused (invalid value, a
 * URL pattern herald cannot evaluate or too wide, the list's patterns too
 * wide together, too many). */
const char *mercure_matchers_add(struct mercure_matchers *l, enum mercure_kind kind, const char *text, size_t n,
				 const char *base);

/* Whether one of l's matchers matches topic[0..n): at most
 * (l->width + the number of URL patterns) steps per byte of the topic
 * resolved, besides an exact matcher's comparison. */
bool mercure_matchers_match(const struct mercure_matchers *l, const char *topic, size_t n, const char *base);

/* What a subscription's query asks besides its matchers. */
struct mercure_query {
	char *last_id;           /* last_event_id, else the older lastEventID (malloc'd), or NULL */
	const char *token_param; /* "authorization" or "access_token" when one came (never read), else NULL */
	char why[400];           /* the text of a refusal that names a parameter */
};

/* A subscription's query string: its matchers (match, match_exact,
 * match_urlpattern, the older topic) added to *want, the rest into *q (the
 * caller frees q->last_id). Returns NULL, or why the query is refused
 * (400), static or in q->why: a malformed escape, an unknown matcher type
 * or parameter (named, with the one it is likely a slip for), a refused
 * matcher, or no matcher at all. */
const char *mercure_query_read(struct http_slice query, const char *base, struct mercure_matchers *want,
			       struct mercure_query *q);

void mercure_matchers_free(struct mercure_matchers *l);

/* What a token grants on the Mercure endpoint. */
struct mercure_grants {
	const char *base; /* lent: the hub's URL, for URL patterns */
	struct mercure_matchers subscribe, publish;
	bool audience_checked; /* jwt_audience is set (jwt.c checks aud against it) */
	bool access_token;     /* an RFC 9068 token (authorization_details) */
};

struct json_value;

/* jwt_claims_fn (jwt.h) reading *arg, a struct mercure_grants with base
 * set: a token whose header "typ" is at+jwt (or application/at+jwt) must
 * name an issuer ("iss") and this hub (base) in "aud", unless
 * audience_checked, and carry its rights in authorization_details (every Mercure detail valid,
 * or the token is refused); any other token in the older "mercure" claim
 * (publish and subscribe lists of topics, "*" for all). Returns JWT_OK,
 * JWT_BAD_ISSUER (an access token without iss), JWT_BAD_AUDIENCE (one
 * whose aud does not name the hub) or JWT_MALFORMED. */
int mercure_read_claims(void *arg, const struct json_value *header, const struct json_value *payload);

void mercure_grants_free(struct mercure_grants *g);

#endif
