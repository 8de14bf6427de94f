/* SPDX-License-Identifier: BSD-2-Clause */
/* auth_hook.h: the application's say on who may open a stream
 * (auth_request): one POST to its URL per question, carrying the reader's
 * Cookie and Authorization headers and the topics asked for; its answer
 * (allow, narrowed topics, a subject; or 401/403) cached per question for
 * the answer's Cache-Control max-age, and questions asked again while one
 * is out joined to it, so a reconnect storm costs the application one
 * request per distinct credential. The request and answer shapes are in
 * docs/integration.md.
 *
 * A question is keyed by a SHA-256 of the URL, Cookie, Authorization and
 * topics: neither the cache nor a log line holds a secret. Everything held
 * is bounded: cached answers (AUTH_HOOK_CACHE_MAX, oldest out first),
 * questions waiting (max_waiting; past it the answer is 503 at once), the
 * answer's body (AUTH_HOOK_MAX_RESPONSE) and the time (timeout_ms, the
 * HTTP client's limit for the whole exchange).
 *
 * This module knows no connection: who asks gets its answer through a
 * callback, and cancels a question it no longer needs. */
#ifndef HERALD_AUTH_HOOK_H
#define HERALD_AUTH_HOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct http_client;
struct loop;
struct metrics;

#define AUTH_HOOK_CACHE_MAX 10000       /* answers kept at once */
#define AUTH_HOOK_MAX_RESPONSE 16384    /* an answer's body, in bytes */
#define AUTH_HOOK_MAX_TOPICS 16         /* topics in a question and in an answer (READER_MAX_TOPICS) */
#define AUTH_HOOK_MAX_SUBJECT 256       /* an answer's subject, in bytes */

/* The URL that decides whether a stream asking for topics (none: every
 * topic) may open, or NULL when none does: the auth_request of the
 * namespaces its patterns reach (namespace.h), which must agree; when they
 * do not (two hooks, or a hook and none), NULL with *mixed set, and the
 * stream is refused rather than half asked. */
const char *auth_hook_url(const struct config *cfg, char *const *topics, size_t ntopics, bool *mixed);

/* One question; every pointer need only be valid during auth_hook_ask. */
struct auth_hook_question {
	const char *url;
	uint64_t timeout_ms;         /* the whole exchange */
	size_t max_waiting;          /* questions waiting at once, this one included (0: no cap) */
	const char *cookie;          /* the reader's Cookie header value, or NULL */
	size_t cookie_len;
	const char *authorization;   /* its Authorization header value, or NULL */
	size_t authorization_len;
	char *const *topics;         /* as asked (none: every topic, sent as "*") */
	size_t ntopics;
	int64_t last_event_id;       /* -1: none (sent as null) */
};

/* The answer, valid during the callback only.
 *   200  allowed: topics (narrowed when narrowed is set) and subject
 *   401, 403  the application refused (why says so)
 *   502  the application's 2xx answer named topics outside those asked, or
 *        malformed ones (why says which)
 *   503  no usable answer in time: timeout, refused connection, a status
 *        other than 2xx/401/403, a body that is not a JSON object, or
 *        too many questions waiting */
struct auth_hook_answer {
	int status;
	const char *why;
	bool narrowed;
	char *const *topics; /* when narrowed: the topics to read, 1..AUTH_HOOK_MAX_TOPICS */
	size_t ntopics;
	const char *subject; /* NULL: none named */
	bool cached;         /* from the cache (no request made) */
};

/* Called once per question not cancelled: possibly before auth_hook_ask
 * returns (a cached answer, or a refusal at once). It may ask and cancel
 * other questions. */
typedef void (*auth_hook_fn)(void *arg, const struct auth_hook_answer *a);

struct auth_hook;
struct auth_wait;

/* A hook sending through client on lp (both lent, and must outlive it),
 * counting into m. Never NULL. */
struct auth_hook *auth_hook_new(struct loop *lp, struct http_client *client, struct metrics *m);

/* Free h and its cache (NULL: nothing). No question may still wait. */
void auth_hook_free(struct auth_hook *h);

/* Ask q; fn(arg, answer) is called once. Returns NULL when fn has already
 * been called, or the question's handle, valid until fn is called or
 * auth_hook_cancel. */
struct auth_wait *auth_hook_ask(struct auth_hook *h, const struct auth_hook_question *q, auth_hook_fn fn, void *arg);

/* Withdraw a waiting question: fn is never called. The application's
 * request is cancelled too when no other question waits on it. */
void auth_hook_cancel(struct auth_wait *w);

/* Questions waiting now, and answers cached. */
size_t auth_hook_waiting(const struct auth_hook *h);
size_t auth_hook_cached(const struct auth_hook *h);

/* Check an answer's body (pure, for tests): the JSON object's topics,
 * each within those asked (none asked: any), and subject. Returns 0 with
 * *out filled (status 200; strings the caller's to free with
 * auth_hook_answer_clear), or 502 / 503 with out->why set (static). */
int auth_hook_parse_answer(const char *body, size_t len, char *const *asked, size_t nasked,
			   struct auth_hook_answer *out);
void auth_hook_answer_clear(struct auth_hook_answer *a);

#endif
