/* SPDX-License-Identifier: BSD-2-Clause */
/* jwks_fetch.c: jwt_jwks_url's set kept fresh (jwks_fetch.h). One fetch
 * at most is out; a timer holds the next one. The fetcher owns its copy of
 * the URL and the last set that arrived (the text, handed to the server's
 * callback and read back by jwks_fetch_text when a reload builds a new
 * verifier), and the request out, cancelled by jwks_fetch_free. */
#include "server/jwks_fetch.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/jwks.h"
#include "common/log.h"
#include "common/loop.h"
#include "common/util.h"
#include "net/http_client.h"

#define REFRESH_MIN_S 60
#define REFRESH_MAX_S 86400
#define REFRESH_DEFAULT_S 3600
#define RETRY_FIRST_MS 5000
#define RETRY_MAX_MS 60000
#define UNKNOWN_KID_EVERY_MS 60000
#define FETCH_TIMEOUT_MS 10000

struct jwks_fetch {
	struct loop *lp;
	struct http_client *client; /* lent */
	char *url;
	jwks_fetch_fn fn;
	void *arg;
	struct http_call *call; /* out now, or NULL */
	struct loop_timer timer;
	char *text; /* the last set that arrived (NUL-terminated), or NULL */
	size_t len;
	uint64_t kid_fetch_ms; /* when an unknown kid last started a fetch; 0: never */
	uint64_t retry_ms;     /* the wait after the next failure */
	bool failing;          /* the last fetch failed: its reason was logged */
};

static void fetch(struct jwks_fetch *f);

static void on_timer(void *arg)
{
	struct jwks_fetch *f = arg;
	loop_label(f->lp, "jwt_jwks_url refresh", NULL);
	if (!f->call)
		fetch(f);
}

/* Keep the keys in force and try again later; the reason is logged at
 * the first failure of a run, the rest at debug level. */
static void failed(struct jwks_fetch *f, const char *why)
{
	if (!f->failing)
		log_err("jwt_jwks_url %s: %s; %s", f->url, why,
			f->text ? "the keys in force stay" : "no keys yet: signed tokens are refused");
	else
		log_debug("jwt_jwks_url %s: %s (still)", f->url, why);
	f->failing = true;
	uint64_t wait = f->retry_ms ? f->retry_ms : RETRY_FIRST_MS;
	f->retry_ms = MIN(wait * 2, (uint64_t)RETRY_MAX_MS);
	loop_timer_start(f->lp, &f->timer, wait, on_timer, f);
}

static void on_done(void *arg, const struct http_client_response *r)
{
	struct jwks_fetch *f = arg;
	char why[512];
	f->call = NULL;
	if (r->status < 0) {
		snprintf(why, sizeof(why), "%s", r->status == -EMSGSIZE ? "the set is over 256 KiB" : r->error);
		failed(f, why);
		return;
	}
	if (r->status != 200) {
		snprintf(why, sizeof(why), "answered HTTP %d", r->status);
		failed(f, why);
		return;
	}
	struct jwks keys;
	char err[400];
	if (jwks_parse(r->body, r->len, &keys, err, sizeof(err)) < 0) {
		snprintf(why, sizeof(why), "not a JWK Set herald takes: %s", err);
		failed(f, why);
		return;
	}
	size_t n = keys.n, secrets = 0;
	for (size_t i = 0; i < n; i++)
		secrets += keys.keys[i].alg == JWK_HS256;
	jwks_free(&keys);
	if (f->failing)
		log_info("jwt_jwks_url %s answers again", f->url);
	f->failing = false;
	f->retry_ms = 0;
	int64_t age = http_cache_max_age(http_response_header(r, "Cache-Control"));
	int64_t next = age < 0 ? REFRESH_DEFAULT_S : age < REFRESH_MIN_S ? REFRESH_MIN_S : MIN(age, REFRESH_MAX_S);
	loop_timer_start(f->lp, &f->timer, (uint64_t)next * 1000, on_timer, f);
	if (f->text && f->len == r->len && memcmp(f->text, r->body, r->len) == 0) {
		/* The same set: the verifier and its cache stay. */
		log_debug("jwt_jwks_url %s: the set is unchanged; next fetch in %lld s", f->url, (long long)next);
		return;
	}
	free(f->text);
	f->text = xmalloc(r->len + 1);
	memcpy(f->text, r->body, r->len + 1);
	f->len = r->len;
	log_info("jwt_jwks_url %s: a set of %zu key%s arrived; next fetch in %lld s", f->url, n, n == 1 ? "" : "s",
		 (long long)next);
	/* The rules are jwt_jwks_file's, which take oct keys; served at a
	 * URL, a shared secret is anyone's who can fetch it. */
	if (secrets)
		log_warn("jwt_jwks_url %s serves %zu shared secret%s (oct keys): whoever can fetch it can sign "
			 "tokens; make sure only herald can",
			 f->url, secrets, secrets == 1 ? "" : "s");
	f->fn(f->arg, f->text, f->len);
}

static void fetch(struct jwks_fetch *f)
{
	static const char *const headers[] = { "Accept: application/jwk-set+json, application/json" };
	struct http_client_request req = { .url = f->url,
					   .headers = headers,
					   .nheaders = 1,
					   .timeout_ms = FETCH_TIMEOUT_MS,
					   .max_response = JWKS_FILE_MAX };
	char err[256];
	loop_timer_stop(f->lp, &f->timer);
	f->call = http_client_request(f->client, &req, on_done, f, err, sizeof(err));
	if (!f->call)
		failed(f, err);
}

struct jwks_fetch *jwks_fetch_new(struct loop *lp, struct http_client *client, const char *url, jwks_fetch_fn fn,
				  void *arg)
{
	struct jwks_fetch *f = xcalloc(1, sizeof(*f));
	f->lp = lp;
	f->client = client;
	f->url = xstrdup(url);
	f->fn = fn;
	f->arg = arg;
	fetch(f);
	return f;
}

void jwks_fetch_again(struct jwks_fetch *f, const char *url)
{
	if (f->call)
		http_client_cancel(f->call);
	f->call = NULL;
	if (strcmp(url, f->url) != 0) {
		free(f->url);
		f->url = xstrdup(url);
		f->failing = false;
	}
	f->retry_ms = 0;
	fetch(f);
}

void jwks_fetch_unknown_kid(void *arg)
{
	struct jwks_fetch *f = arg;
	uint64_t now = loop_now(f->lp);
	if (f->call || (f->kid_fetch_ms && now - f->kid_fetch_ms < UNKNOWN_KID_EVERY_MS))
		return;
	f->kid_fetch_ms = now;
	log_info("jwt_jwks_url %s: a token names a key id the set has not: fetching the set again", f->url);
	fetch(f);
}

const char *jwks_fetch_text(const struct jwks_fetch *f, size_t *len)
{
	*len = f ? f->len : 0;
	return f ? f->text : NULL;
}

void jwks_fetch_free(struct jwks_fetch *f)
{
	if (!f)
		return;
	if (f->call)
		http_client_cancel(f->call);
	loop_timer_stop(f->lp, &f->timer);
	free(f->url);
	free(f->text);
	free(f);
}
