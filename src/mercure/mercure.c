/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure.c: the Mercure endpoint's two handlers (mercure.h): the
 * subscription's matchers, resume point and token, handed to stream.c as
 * a reader with its own rule; the publish form checked, authorized and
 * queued through publish.c. */
#include "mercure/mercure.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/addr.h"
#include "common/log.h"
#include "hub/frame.h"
#include "store/idempotency.h"
#include "auth/jwt.h"
#include "mercure/mercure_match.h"
#include "mercure/mercure_sets.h"
#include "mercure/mercure_subs.h"
#include "store/mercure_update.h"
#include "common/text.h"
#include "mercure/urlpattern.h"
#include "common/util.h"
#include "presence/presence.h"
#include "core/topic.h"

#define MERCURE_MAX_TOPICS 64 /* topic fields of one update */

/* mercure_subscription_events (config.c) is at least 128: one subscription
 * of the most matchers must fit in a budget. */
_Static_assert(2 * MERCURE_MAX_MATCHERS <= 128, "a full subscription must fit mercure_subscription_events");

/* The hub's URL: mercure_url, else SCHEME://HOST/.well-known/mercure from
 * the request's Host (printable bytes only), https when c came over TLS
 * (c NULL: http), into buf. */
static void hub_url(const struct mercure *mc, const struct conn *c, const struct http_request *req, char *buf,
		    size_t len)
{
	if (mc->cfg->mercure_url[0]) {
		snprintf(buf, len, "%s", mc->cfg->mercure_url);
		return;
	}
	const struct http_header *h = http_header_get(req, "Host");
	char host[256] = "localhost";
	if (h && h->value.n > 0 && h->value.n < sizeof(host)) {
		bool ok = true;
		for (size_t i = 0; i < h->value.n && ok; i++)
			ok = isgraph((unsigned char)h->value.p[i]) && !strchr("/?#@\\\"<>", h->value.p[i]);
		if (ok) {
			memcpy(host, h->value.p, h->value.n);
			host[h->value.n] = '\0';
		}
	}
	snprintf(buf, len, "%s://%s%s", c && conn_secure(c) ? "https" : "http", host, MERCURE_PATH);
}

/* Where the protected-resource metadata of the hub at base is served
 * (RFC 9728: the well-known prefix before the hub's path), as a URL. */
static void metadata_url(const char *base, char *buf, size_t len)
{
	const char *hp = strstr(base, "://");
	size_t origin = hp ? (size_t)(hp + 3 - base) + strcspn(hp + 3, "/") : 0;
	snprintf(buf, len, "%.*s/.well-known/oauth-protected-resource%s", (int)origin, base, base + origin);
}

/* A Bearer challenge naming the metadata, with error (or none), into buf
 * as the value of WWW-Authenticate. */
static const char *challenge(const char *base, const char *error, char *buf, size_t len)
{
	char meta[2400];
	metadata_url(base, meta, sizeof(meta));
	snprintf(buf, len, "Bearer realm=\"mercure\", resource_metadata=\"%s\"%s%s%s", meta, error ? ", error=\"" : "",
		 error ? error : "", error ? "\"" : "");
	return buf;
}

/* Add the hub's Link for base to h. */
static void add_link(struct http_head *h, const char *base)
{
	http_head_addf(h, "Link", "<%s>; rel=\"mercure\"", base);
}

/* Refuse c as conn_refuse does, with the hub's Link among the fields
 * (every answer of the endpoint carries it) and after it name: value (none
 * when value is NULL). */
static void refuse_with(struct conn *c, const char *base, int status, const char *cause, const char *why,
			const char *name, const char *value)
{
	struct http_head extra;
	http_head_init(&extra, 0);
	add_link(&extra, base);
	if (value)
		http_head_add(&extra, name, value);
	conn_refuse(c, status, cause, why, &extra);
	http_head_free(&extra);
}

/* The same with a challenge (a WWW-Authenticate value, or NULL). */
static void refuse(struct conn *c, const char *base, int status, const char *cause, const char *why, const char *chal)
{
	refuse_with(c, base, status, cause, why, "WWW-Authenticate", chal);
}

/* The path of the hub's URL base into buf. */
static void hub_path(const char *base, char *buf, size_t len)
{
	const char *hp = strstr(base, "://");
	hp = hp ? hp + 3 + strcspn(hp + 3, "/") : base;
	snprintf(buf, len, "%.*s", (int)strcspn(hp, "?#"), hp);
}

/* The access token: the Authorization header's, else a cookie (herald's
 * jwt_cookie, the specification's, the older mercureAuthorization). */
static bool find_token(const struct mercure *mc, const struct http_request *req, struct http_slice *tok,
		       bool *from_cookie)
{
	*from_cookie = false;
	if (http_bearer_token(req, tok))
		return true;
	const char *names[3] = { mc->cfg->jwt_cookie, "__Secure-mercure_access_token", "mercureAuthorization" };
	for (int i = 0; i < 3; i++)
		if (names[i][0] && http_cookie_get(req, names[i], tok)) {
			*from_cookie = true;
			return true;
		}
	return false;
}

/* A cookie is sent with every request a browser makes: only a page of a
 * listed origin (or none, a same-origin page) may use it. */
static bool cookie_allowed(const struct mercure *mc, const struct http_request *req)
{
	const struct http_header *o = http_header_get(req, "Origin");
	return !o || cors_listed(mc->cors, o->value.p, o->value.n);
}

/* Verify tok's Mercure grants into *g (base set by the caller): JWT_OK,
 * or the jwt_error with *why its cause (jwt.c's words, for the answer and
 * the log). */
static int verify(const struct mercure *mc, struct http_slice tok, struct mercure_grants *g, int64_t *exp, char **sub,
		  const char **why)
{
	if (!streams_jwt(mc->streams)) {
		*why = "signed tokens are off (jwt_algorithm is not set)";
		return JWT_BAD_SIGNATURE;
	}
	struct jwt_rights r;
	g->audience_checked = mc->cfg->jwt_audience[0] != '\0';
	int e = jwt_verify_claims(streams_jwt(mc->streams), tok.p, tok.n, clock_wall_s(), mercure_read_claims, g, &r,
				  why);
	if (e == JWT_OK) {
		*exp = r.exp;
		if (sub) {
			*sub = r.sub;
			r.sub = NULL;
		}
	}
	jwt_rights_free(&r);
	return e;
}

/* ---- subscribe ---------------------------------------------------------- */

/* A subscriber's rule: what it asked for and what its token grants, as
 * they are read, then interned (msub_intern) for as long as it reads. */
struct msub {
	const struct config *cfg; /* lent: the namespaces' rules */
	char *base;
	struct mercure_matchers want;
	struct mercure_grants grants;
	struct mercure_sets *sets;                /* the registry want_set and grant_set are from */
	struct mercure_set *want_set, *grant_set; /* grant_set NULL: no grants */
	struct mercure_subs *subs;                /* where sub is registered (the presence registry's) */
	struct mercure_sub *sub;
	char *subject;             /* the token's "sub" (owned) until msub_count */
	struct presence *presence; /* lent: where reg is counted */
	struct presence_reg *reg;  /* NULL: not counted */
};

static void msub_free(void *arg)
{
	struct msub *m = arg;
	if (!m)
		return;
	if (m->sub)
		mercure_subs_remove(m->subs, m->sub);
	presence_unregister(m->presence, m->reg);
	free(m->subject);
	if (m->want_set)
		mercure_sets_release(m->sets, m->want_set);
	if (m->grant_set)
		mercure_sets_release(m->sets, m->grant_set);
	mercure_matchers_free(&m->want);
	mercure_grants_free(&m->grants);
	free(m->base);
	free(m);
}

/* The topic lines of the row's update into [*p, *end): its block's, else
 * the row's one topic; false for a row without either. */
static bool update_topics(const struct store_event *ev, const char **p, const char **end)
{
	struct mercure_block b;
	if (ev->mercure && mercure_block_parse(ev->mercure, ev->mercure_len, &b) && b.topics) {
		*p = b.topics;
		*end = b.topics + b.topics_len;
		return true;
	}
	*p = ev->topic;
	*end = ev->topic + ev->topic_len;
	return ev->topic_len > 0;
}

/* Share the subscriber's lists with the other subscribers that have the
 * same: they are judged once per update for all of them. */
static void msub_intern(struct msub *m, struct mercure_sets *sets)
{
	m->sets = sets;
	m->want_set = mercure_sets_intern(sets, &m->want, m->base);
	if (m->grants.subscribe.n)
		m->grant_set = mercure_sets_intern(sets, &m->grants.subscribe, m->base);
	mercure_grants_free(&m->grants);
}

/* Count the opened subscriber with presence (NULL: off) under what its
 * matchers read, with its token's subject: an exact topic under the name
 * its rows carry (mercure_row_topic), "*" as "*". URL patterns are not
 * counted (docs/presence.md): a topic's readers are found under the few
 * patterns that can cover it, and a URL pattern is none of them. */
static void msub_count(struct msub *m, struct presence *p)
{
	const struct mercure_matchers *l = mercure_set_matchers(m->want_set);
	char **names = xmalloc((l->n + 1) * sizeof(*names));
	size_t n = 0;
	for (size_t i = 0; p && i < l->n; i++) {
		if (l->v[i].kind == MERCURE_ANY)
			names[n++] = xstrdup("*");
		else if (l->v[i].kind == MERCURE_EXACT)
			names[n++] = mercure_row_topic(l->v[i].text);
	}
	n = topic_patterns_reduce(names, n); /* "*" covers the rest; a topic repeated counts once */
	if (n) {
		m->presence = p;
		m->reg = presence_register(p, names, n, m->subject);
	}
	while (n)
		free(names[--n]);
	free(names);
	free(m->subject);
	m->subject = NULL;
}

/* Wanted by a matcher on one of the update's topics, and public or
 * granted on one of them (the audience of a private update is the union
 * of its topics'). */
static bool msub_accepts(void *arg, const struct store_event *ev)
{
	const struct msub *m = arg;
	/* The sets' verdicts are shared by their subscribers (one judgement an
	 * event a set), so they go first: the namespace's rule below is then
	 * looked up only for an update this subscriber is about to be sent. */
	if (!mercure_set_wants(m->want_set, ev) ||
	    !(ev->public || (m->grant_set && mercure_set_wants(m->grant_set, ev))))
		return false;
	/* An event of a namespace with mercure = off is not the hub's. */
	return !m->cfg->namespaces.n || config_rules(m->cfg, ev->topic, ev->topic_len)->mercure;
}

/* Whether s[0..n) is a decimal id herald can hold. */
static bool all_digits(const char *s, size_t n)
{
	if (n == 0 || n > 18)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return true;
}

/* The row read (store_row_cb): whether the subscriber whose grants are
 * in arg (struct sight) may see its update: public, or granted on one of
 * its topics. */
struct sight {
	const struct mercure_grants *grants;
	bool visible;
};

static int judge_sight(void *arg, const struct store_event *ev)
{
	struct sight *w = arg;
	const char *p, *end, *t;
	size_t tl;
	update_topics(ev, &p, &end);
	w->visible = ev->public;
	while (!w->visible && mercure_block_next_topic(&p, end, &t, &tl))
		w->visible = mercure_matchers_match(&w->grants->subscribe, t, tl, w->grants->base);
	return 1;
}

/* Whether the resume id must be looked up in the log's map of Mercure
 * ids: not "earliest", not one of herald's numbers nor an id made from
 * one, and a value an update's id could be. */
static bool resume_needs_lookup(const char *id)
{
	int64_t n;
	size_t len = strlen(id);
	return strcmp(id, "earliest") != 0 && !all_digits(id, len) && !mercure_log_id_parse(id, len, &n) &&
	       mercure_value_valid(id, len);
}

/* The resume point for an id that needs no lookup: "earliest", or one of
 * herald's numbers or the id made from one, a place in the log taken for
 * any number in its range whatever the row there; -1 (from now on,
 * *found false) otherwise. */
static int64_t resume_of_place(const struct mercure *mc, const char *id, bool *found)
{
	*found = true;
	if (strcmp(id, "earliest") == 0)
		return store_pruned_through(mc->st);
	int64_t ev = -1;
	if (all_digits(id, strlen(id)))
		ev = strtoll(id, NULL, 10);
	else if (!mercure_log_id_parse(id, strlen(id), &ev))
		ev = -1;
	if (ev >= 0 && ev <= hub_high_water(mc->hub) && ev >= store_pruned_through(mc->st))
		return ev;
	*found = false;
	return -1;
}

/* Whether c's address may open a subscription of n matchers now, whose
 * opening and closing put 2n events in the log: taken from its budget of
 * mercure_subscription_events a minute, else refused (429, with when to
 * try again). Subscription events count toward retention_count like any
 * row, so without a budget a client that opens and drops subscriptions
 * would push published events out of the log. */
static bool subscription_events_admitted(const struct mercure *mc, struct conn *c, struct mercure_subs *subs, size_t n,
					 const char *base)
{
	char key[64], retry[48];
	addr_count_key(conn_client(c), (int)mc->cfg->ipv6_prefix, key, sizeof(key));
	uint64_t wait_ms = mercure_subs_admit(subs, key, n, mc->cfg->mercure_subscription_events, clock_mono_ms());
	if (!wait_ms)
		return true;
	snprintf(retry, sizeof(retry), "%llu", (unsigned long long)((wait_ms + 999) / 1000));
	refuse_with(c, base, 429, "subscription_events",
		    "too many subscriptions from this address: each puts an event in the log when it opens and when "
		    "it closes, and mercure_subscription_events caps those a minute",
		    "Retry-After", retry);
	return false;
}

/* A subscription that has passed every check, opening once its resume
 * point is known. */
struct opening {
	struct mercure mc; /* a copy: the caller's may live only for the request */
	struct conn *c;    /* NULL once it closed while the lookup was out */
	struct msub *m;
	struct admission_ticket *ticket;
	struct mercure_subs *subs; /* NULL: no subscription events */
	int64_t exp;
	int64_t resume;  /* -1: from now on */
	char *resume_id; /* what Mercure-Last-Event-ID says; NULL: no resume asked */
	struct http_head extra;
	bool looking; /* the lookup has not answered yet */
	bool in_call; /* inside store_mercure_find: its answer is handled after */
	int failed;   /* the lookup's error, or 0 */
};

static void opening_free(struct opening *op)
{
	msub_free(op->m);
	free(op->resume_id);
	http_head_free(&op->extra);
	free(op);
}

/* Open the stream with what the opening holds; frees it. */
static void opening_open(struct opening *op)
{
	const struct mercure *mc = &op->mc;
	struct msub *m = op->m;
	struct reader_spec spec = { .resume = op->resume,
				    .format = FRAME_MERCURE,
				    .accepts = msub_accepts,
				    .accepts_arg = m,
				    .accepts_free = msub_free,
				    .expires_at = op->exp ? op->exp + mc->cfg->jwt_leeway_s : 0 };
	if (op->resume_id)
		http_head_add(&op->extra, "Mercure-Last-Event-ID", op->resume_id);
	msub_intern(m, mc->sets);
	spec.keys = mercure_set_keys(m->want_set, &spec.nkeys);
	op->m = NULL; /* the reader's now */
	stream_open_spec(mc->streams, op->c, op->ticket, &spec, &op->extra);
	msub_count(m, streams_presence(mc->streams));
	if (op->subs) {
		char path[2200];
		hub_path(m->base, path, sizeof(path));
		m->subs = op->subs;
		m->sub = mercure_subs_add(op->subs, path, mercure_set_matchers(m->want_set));
	}
	opening_free(op);
}

/* The subscriber went away while its resume point was being looked up:
 * its place among the caps is given back now; the opening is freed when
 * the lookup answers. */
static void opening_closed(struct conn *c, void *data)
{
	struct opening *op = data;
	(void)c;
	stream_release(op->mc.streams, op->ticket);
	op->ticket = NULL;
	op->c = NULL;
}

static const struct conn_user opening_user = { NULL, opening_closed };

/* Open the stream once the resume point is known, or refuse it (503)
 * when the log could not answer: opening from now would skip what the
 * subscriber asked to get. Frees op. */
static void opening_finish(struct opening *op)
{
	if (!op->c) {
		opening_free(op);
	} else if (op->failed) {
		stream_release(op->mc.streams, op->ticket);
		log_warn("mercure: the resume point %s could not be looked up (%s); refused with 503", op->resume_id,
			 op->failed == -ENOTCONN ? "the event log is unreachable" : "the event log failed");
		refuse_with(op->c, op->m->base, 503, "log_unavailable",
			    "the event log cannot be read now to find the resume point; try again", "Retry-After", "1");
		opening_free(op);
	} else {
		opening_open(op);
	}
}

/* The lookup's answer (store_found_cb): resume after the event the id
 * names when the subscriber may see it; else from now on, as if the log
 * never had the id (neither its existence nor its place is told). */
static void resume_found(void *arg, int rc, const struct store_event *ev)
{
	struct opening *op = arg;
	op->looking = false;
	op->resume = -1;
	op->failed = rc < 0 ? rc : 0;
	if (rc == 1 && op->m) {
		struct sight w = { &op->m->grants, false };
		judge_sight(&w, ev);
		if (w.visible)
			op->resume = ev->id;
	}
	if (rc >= 0 && op->resume < 0) {
		free(op->resume_id);
		op->resume_id = xstrdup("earliest");
	}
	if (!op->in_call)
		opening_finish(op);
}

void mercure_subscribe(const struct mercure *mc, struct conn *c, const struct http_request *req)
{
	char base[2200], why_buf[400];
	hub_url(mc, c, req, base, sizeof(base));
	struct http_head link;
	http_head_init(&link, 0);
	add_link(&link, base);
	struct msub *m = xcalloc(1, sizeof(*m));
	m->cfg = mc->cfg;
	m->base = xstrdup(base);
	m->grants.base = m->base;
	struct mercure_query q;
	const char *why = mercure_query_read(req->query, base, &m->want, &q);
	const struct http_header *leh = http_header_get(req, "Last-Event-ID");
	char *resume_id = leh ? xstrndup(leh->value.p, leh->value.n) : q.last_id;
	if (why) {
		refuse(c, base, 400, "bad_parameter", why, NULL);
		goto done;
	}

	struct http_slice tok;
	bool from_cookie;
	int64_t exp = 0;
	char *sub = NULL;
	char chal[2600];
	/* The caps before the token, as for herald's own streams. */
	struct admission_ticket *ticket = stream_admit(mc->streams, c, &link);
	if (!ticket)
		goto done;
	if (find_token(mc, req, &tok, &from_cookie)) {
		if (from_cookie && !cookie_allowed(mc, req)) {
			stream_release(mc->streams, ticket);
			refuse(c, base, 403, "cookie_origin",
			       "a subscription authorized by cookie is refused from an origin allow_origin does not "
			       "list",
			       NULL);
			goto done;
		}
		if (verify(mc, tok, &m->grants, &exp, &sub, &why) != JWT_OK) {
			stream_release(mc->streams, ticket);
			refuse(c, base, 401, "invalid_token", why,
			       challenge(base, "invalid_token", chal, sizeof(chal)));
			goto done;
		}
	} else if (q.token_param) {
		/* Not read (docs/mercure.md), and not ignored either: a client that
		 * sends one means to be authorized. */
		stream_release(mc->streams, ticket);
		snprintf(why_buf, sizeof(why_buf),
			 "herald does not read a token from the query (%s): send it in the Authorization header or "
			 "the cookie",
			 q.token_param);
		refuse(c, base, 401, "token_in_query", why_buf, challenge(base, "invalid_request", chal, sizeof(chal)));
		goto done;
	} else if (!mc->cfg->mercure_anonymous) {
		stream_release(mc->streams, ticket);
		refuse(c, base, 401, "token_required", "subscribing needs an access token (mercure_anonymous is off)",
		       challenge(base, NULL, chal, sizeof(chal)));
		goto done;
	}
	m->subject = sub;
	/* Subscription events count against the address's budget, checked
	 * before the stream opens. */
	struct mercure_subs *subs = mc->cfg->mercure_subscriptions ? mc->subs : NULL;
	if (subs && !subscription_events_admitted(mc, c, subs, m->want.n, base)) {
		stream_release(mc->streams, ticket);
		goto done;
	}

	struct opening *op = xcalloc(1, sizeof(*op));
	*op = (struct opening){ .mc = *mc, .c = c, .m = m, .ticket = ticket, .exp = exp, .subs = subs };
	m = NULL; /* the opening's now */
	http_head_init(&op->extra, 0);
	const struct http_header *o = http_header_get(req, "Origin");
	if (o)
		cors_fields(mc->cors, o->value.p, o->value.n, &op->extra);
	add_link(&op->extra, base);
	if (resume_id && resume_needs_lookup(resume_id)) {
		/* The id is an update's: the log's map says which event it
		 * names, at once (SQLite) or when Redis answers, the
		 * connection waiting meanwhile. */
		op->resume_id = xstrdup(resume_id);
		op->looking = op->in_call = true;
		store_mercure_find(mc->st, op->resume_id, resume_found, op);
		op->in_call = false;
		if (op->looking) {
			conn_attach(c, &opening_user, op);
			conn_wait(c);
		} else {
			opening_finish(op);
		}
	} else {
		op->resume = -1;
		if (resume_id) {
			bool found;
			op->resume = resume_of_place(mc, resume_id, &found);
			op->resume_id = xstrdup(found && strcmp(resume_id, "earliest") != 0 ? resume_id : "earliest");
		}
		opening_open(op);
	}
done:
	http_head_free(&link);
	if (resume_id != q.last_id)
		free(resume_id);
	free(q.last_id);
	msub_free(m);
}

/* ---- discovery ---------------------------------------------------------- */

bool mercure_answers(const struct mercure *mc, const struct http_request *req)
{
	size_t n = strlen(MERCURE_PATH);
	if (!mc->cfg->mercure)
		return false;
	if (req->path.n >= n && memcmp(req->path.p, MERCURE_PATH, n) == 0 &&
	    (req->path.n == n || req->path.p[n] == '/'))
		return true;
	static const char meta[] = "/.well-known/oauth-protected-resource/";
	return req->path.n > sizeof(meta) - 1 && memcmp(req->path.p, meta, sizeof(meta) - 1) == 0 &&
	       mercure_metadata_path(mc, req);
}

void mercure_link(const struct mercure *mc, const struct conn *c, const struct http_request *req, struct http_head *h)
{
	char base[2200];
	hub_url(mc, c, req, base, sizeof(base));
	add_link(h, base);
}

bool mercure_metadata_path(const struct mercure *mc, const struct http_request *req)
{
	char base[2200], meta[2400];
	hub_url(mc, NULL, req, base, sizeof(base));
	metadata_url(base, meta, sizeof(meta));
	const char *hp = strstr(meta, "://");
	const char *path = hp ? hp + 3 + strcspn(hp + 3, "/") : meta;
	return strlen(path) == req->path.n && memcmp(path, req->path.p, req->path.n) == 0;
}

void mercure_metadata(const struct mercure *mc, struct conn *c, const struct http_request *req)
{
	char base[2200], body[3000];
	hub_url(mc, c, req, base, sizeof(base));
	const char *cookie = mc->cfg->jwt_cookie[0] ? mc->cfg->jwt_cookie : "__Secure-mercure_access_token";
	int n = snprintf(
		body, sizeof(body),
		"{\"resource\":\"%s\",\"authorization_details_types_supported\":"
		"[\"https://mercure.rocks/authorization-detail\"],\"bearer_methods_supported\":[\"header\"],"
		"\"mercure_cookie\":\"%s\",\"mercure_matcher_types_supported\":[\"exact\",\"urlpattern\"]%s}\n",
		base, cookie, mc->cfg->mercure_subscriptions && mc->subs ? ",\"mercure_subscriptions\":true" : "");
	struct http_head h;
	http_head_response(&h, 200, "application/json", (size_t)n, conn_keep_alive(c));
	const struct http_header *o = http_header_get(req, "Origin");
	if (o)
		cors_fields(mc->cors, o->value.p, o->value.n, &h);
	add_link(&h, base);
	conn_respond(c, &h, body, (size_t)n);
	http_head_free(&h);
}

/* ---- the subscription API ---------------------------------------------- */

/* The row read (store_row_cb) as a cursor for the asker whose grants are
 * in arg (struct cursor): its update's id when the asker may see it, else
 * the id made from its number (a place in the log, which tells nothing of
 * the update). */
struct cursor {
	const struct mercure_grants *grants;
	char *id;
};

static int newest_id(void *arg, const struct store_event *ev)
{
	struct cursor *cur = arg;
	struct mercure_block b;
	struct sight w = { cur->grants, false };
	judge_sight(&w, ev);
	char made[MERCURE_LOG_ID_LEN + 1];
	if (w.visible && ev->mercure && mercure_block_parse(ev->mercure, ev->mercure_len, &b) && b.id_len) {
		cur->id = xstrndup(b.id, b.id_len);
	} else {
		mercure_log_id(ev->id, made);
		cur->id = xstrdup(made);
	}
	return 1;
}

/* A subscriptions request waiting for its list; c NULL once it closed. */
struct subs_wait {
	struct conn *c;
	const struct cors *cors;
	char base[2200];
	char *origin;  /* the request's Origin (NULL: none) */
	char *last_id; /* the Link's last-event-id */
};

static void subs_wait_closed(struct conn *c, void *data)
{
	struct subs_wait *w = data;
	(void)c;
	w->c = NULL;
}

static const struct conn_user subs_waiter = { NULL, subs_wait_closed };

static void subscriptions_answered(void *arg, int status, char *body, size_t len)
{
	struct subs_wait *w = arg;
	struct conn *c = w->c;
	if (c)
		conn_attach(c, NULL, NULL);
	if (c && status == 503) {
		refuse_with(c, w->base, 503, "subscriptions_unavailable",
			    "the cluster's subscriptions cannot be read now (Redis is unreachable)", "Retry-After",
			    "1");
	} else if (c && status != 200) {
		refuse(c, w->base, 404, "not_found", "no such subscription", NULL);
	} else if (c) {
		struct http_head h;
		http_head_response(&h, 200, "application/json", len, conn_keep_alive(c));
		if (w->origin)
			cors_fields(w->cors, w->origin, strlen(w->origin), &h);
		http_head_addf(&h, "Link",
			       "<%s>; rel=\"mercure\"; last-event-id=\"%s\"; type=\"mercure\"; "
			       "content-type=\"application/json\"",
			       w->base, w->last_id);
		http_head_add(&h, "Cache-Control", "must-revalidate");
		conn_respond(c, &h, body, len);
		http_head_free(&h);
	}
	free(body);
	free(w->origin);
	free(w->last_id);
	free(w);
}

void mercure_subscriptions(const struct mercure *mc, struct conn *c, const struct http_request *req)
{
	char base[2200], path[2200], chal[2600];
	hub_url(mc, c, req, base, sizeof(base));
	hub_path(base, path, sizeof(path));
	struct mercure_subs *subs = mc->cfg->mercure_subscriptions ? mc->subs : NULL;
	if (!subs) {
		refuse(c, base, 404, "not_found", "active subscriptions are off (mercure_subscriptions, presence)",
		       NULL);
		return;
	}
	/* Authorized as a subscription to the requested path, relative. */
	const char *rest = req->path.p + strlen(MERCURE_PATH "/subscriptions");
	size_t rest_n = req->path.n - strlen(MERCURE_PATH "/subscriptions");
	char *topic = xmalloc(strlen(path) + strlen("/subscriptions") + rest_n + 1);
	sprintf(topic, "%s/subscriptions%.*s", path, (int)rest_n, rest);
	struct http_slice tok;
	bool from_cookie;
	int64_t exp;
	struct mercure_grants g = { .base = base };
	int status = 0;
	const char *why = NULL, *extra = NULL;
	if (!find_token(mc, req, &tok, &from_cookie)) {
		status = 401;
		why = "the subscription API needs an access token";
		extra = challenge(base, NULL, chal, sizeof(chal));
	} else if (from_cookie && !cookie_allowed(mc, req)) {
		status = 403;
		why = "a request authorized by cookie is refused from an origin allow_origin does not list";
	} else if (verify(mc, tok, &g, &exp, NULL, &why) != JWT_OK) {
		status = 401;
		extra = challenge(base, "invalid_token", chal, sizeof(chal));
	} else if (!mercure_matchers_match(&g.subscribe, topic, strlen(topic), base)) {
		status = 403;
		why = "the token does not grant subscribing to this path";
		extra = challenge(base, "insufficient_scope", chal, sizeof(chal));
	}
	if (status) {
		free(topic);
		mercure_grants_free(&g);
		refuse(c, base, status, status == 401 ? "invalid_token" : "forbidden", why, extra);
		return;
	}
	/* The cursor to subscribe from: the newest event's id (its number
	 * when the asker may not see it), taken before the list is read so
	 * that no event between the two is missed by one who resumes. */
	char last[64];
	int64_t newest = hub_high_water(mc->hub);
	struct cursor cur = { &g, NULL };
	if (newest > 0)
		store_read_range(mc->st, newest - 1, newest, 1, newest_id, &cur);
	mercure_grants_free(&g);
	snprintf(last, sizeof(last), "%lld", (long long)newest);
	/* The connection waits for the list (the cluster's, from Redis, comes
	 * later); if it closes first, the answer is dropped. */
	struct subs_wait *w = xcalloc(1, sizeof(*w));
	w->c = c;
	w->cors = mc->cors;
	snprintf(w->base, sizeof(w->base), "%s", base);
	w->last_id = cur.id ? cur.id : xstrdup(newest > 0 ? last : "earliest");
	const struct http_header *o = http_header_get(req, "Origin");
	if (o)
		w->origin = xstrndup(o->value.p, o->value.n);
	conn_attach(c, &subs_waiter, w);
	conn_wait(c);
	char *rest_s = xstrndup(rest, rest_n);
	mercure_subs_ask(subs, path, rest_s, subscriptions_answered, w);
	free(rest_s);
	free(topic);
}

/* ---- publish ------------------------------------------------------------ */

/* Whether topic, resolved against the hub's URL base as URL patterns
 * resolve it (urlpattern_topic_path: one resolution for both, so no
 * relative topic slips past this check into a pattern on the namespace),
 * is in the hub's own namespace: its path, with unreserved escapes decoded
 * and dot segments removed, is the hub's path or under it. */
static bool reserved_topic(const char *topic, const char *base)
{
	/* A quick no: the resolved path is the base's directory segments (at
	 * most all but the hub path's last) followed by the topic's own, so
	 * the hub path's last segment, when it holds only unreserved
	 * characters, is text of any topic without escapes that lands in the
	 * namespace. Most topics never get to the URL parser. */
	char hp[2200];
	hub_path(base, hp, sizeof(hp));
	const char *last = strrchr(hp, '/');
	last = last ? last + 1 : hp;
	size_t ll = strlen(last);
	if (ll > 0 && strspn(last, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") == ll &&
	    strcmp(last, ".") != 0 && strcmp(last, "..") != 0 && !strchr(topic, '%') && !strstr(topic, last))
		return false;
	char *resolved = urlpattern_topic_path(topic, strlen(topic), base);
	const char *path = resolved;
	size_t plen = strcspn(path, "?#");
	/* The path with unreserved escapes decoded and dot segments gone. */
	char *clean = xmalloc(plen + 2);
	size_t k = 0;
	for (size_t i = 0; i < plen; i++) {
		char ch = path[i];
		if (ch == '%' && i + 2 < plen + 1 && isxdigit((unsigned char)path[i + 1]) &&
		    isxdigit((unsigned char)path[i + 2])) {
			char hex[3] = { path[i + 1], path[i + 2], 0 };
			char d = (char)strtol(hex, NULL, 16);
			if (isalnum((unsigned char)d) || strchr("-._~", d)) {
				ch = d;
				i += 2;
			}
		}
		clean[k++] = ch;
	}
	clean[k] = '\0';
	/* Remove "." and ".." segments (RFC 3986 5.2.4, simplified). */
	char *out = xmalloc(k + 2);
	size_t o = 0;
	for (size_t i = 0; i < k;) {
		size_t seg_end = i + 1;
		while (seg_end < k && clean[seg_end] != '/')
			seg_end++;
		size_t sl = seg_end - i - 1; /* the segment after its '/' */
		const char *seg = clean + i + 1;
		if (clean[i] == '/' && sl == 1 && seg[0] == '.') {
		} else if (clean[i] == '/' && sl == 2 && seg[0] == '.' && seg[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
		} else {
			memcpy(out + o, clean + i, seg_end - i);
			o += seg_end - i;
		}
		i = seg_end;
	}
	out[o] = '\0';
	size_t hl = strlen(hp);
	bool r = strncmp(out, hp, hl) == 0 && (out[hl] == '\0' || out[hl] == '/');
	free(resolved);
	free(clean);
	free(out);
	return r;
}

char *mercure_row_topic(const char *topic)
{
	size_t n = strlen(topic);
	if (n <= 128 && text_name_valid(topic, n, true))
		return xstrdup(topic);
	char hex[IDEM_HEX_LEN];
	idem_digest(topic, n, NULL, 0, hex);
	char *t = xmalloc(10 + IDEM_HEX_LEN);
	snprintf(t, 10 + IDEM_HEX_LEN, "$mercure/%s", hex);
	return t;
}

/* The publish form's fields. */
struct form {
	char *topics[MERCURE_MAX_TOPICS];
	size_t ntopics;
	char *data, *id, *type, *retry;
	size_t data_len;
	bool private_;
};

static void form_free(struct form *f)
{
	for (size_t i = 0; i < f->ntopics; i++)
		free(f->topics[i]);
	free(f->data);
	free(f->id);
	free(f->type);
	free(f->retry);
}

/* Take the body apart; returns 0, or the status of a refusal with *why. */
static int read_form(const char *body, size_t len, const char *base, struct form *f, const char **why)
{
	struct http_slice all = { body ? body : "", body ? len : 0 }, name, value;
	size_t pos = 0;
	while (http_query_next(all, &pos, &name, &value)) {
		size_t nn, vn;
		char *n = http_percent_decode_dup(name, &nn);
		char *v = n ? http_percent_decode_dup(value, &vn) : NULL;
		if (!n || !v) {
			free(n);
			free(v);
			*why = "a form field with a malformed percent escape or a NUL byte";
			return 400;
		}
		char **slot = NULL;
		if (strcmp(n, "topic") == 0) {
			if (f->ntopics == MERCURE_MAX_TOPICS) {
				free(n);
				free(v);
				*why = "more than 64 topic fields";
				return 413;
			}
			slot = &f->topics[f->ntopics++];
		} else if (strcmp(n, "data") == 0) {
			slot = &f->data;
			f->data_len = vn;
		} else if (strcmp(n, "id") == 0) {
			slot = &f->id;
		} else if (strcmp(n, "type") == 0) {
			slot = &f->type;
		} else if (strcmp(n, "retry") == 0) {
			slot = &f->retry;
		} else if (strcmp(n, "private") == 0) {
			f->private_ = true;
		}
		free(n);
		if (slot && !*slot) {
			*slot = v;
			v = NULL;
		}
		free(v);
	}
	if (f->ntopics == 0) {
		*why = "an update needs a topic field";
		return 400;
	}
	for (size_t i = 0; i < f->ntopics; i++) {
		const char *t = f->topics[i];
		if (!mercure_value_valid(t, strlen(t))) {
			*why = "a topic must be 1 to 2048 bytes of UTF-8 without control or format characters";
			return 400;
		}
		if (strcmp(t, "*") == 0) {
			*why = "the topic \"*\" is reserved for the wildcard matcher";
			return 400;
		}
		if (reserved_topic(t, base)) {
			*why = "a topic in the hub's own namespace (/.well-known/mercure/...) cannot be published";
			return 400;
		}
	}
	if (f->data && !text_utf8_valid((const unsigned char *)f->data, f->data_len)) {
		*why = "data must be UTF-8";
		return 400;
	}
	int64_t n;
	if (f->id && (!mercure_value_valid(f->id, strlen(f->id)) || f->id[0] == '#' || strcmp(f->id, "earliest") == 0 ||
		      all_digits(f->id, strlen(f->id)) || mercure_log_id_parse(f->id, strlen(f->id), &n))) {
		*why = "an id must be valid UTF-8 without control or format characters, not start with '#', not be "
		       "\"earliest\", only digits, nor an id of the form herald makes for this log (those name its "
		       "events)";
		return 400;
	}
	if (f->type && (!mercure_value_valid(f->type, strlen(f->type)) || strcmp(f->type, "mercure") == 0)) {
		*why = "a type must be valid UTF-8 without control or format characters, and not \"mercure\"";
		return 400;
	}
	if (f->retry && (!f->retry[0] || strspn(f->retry, "0123456789") != strlen(f->retry) || strlen(f->retry) > 18)) {
		*why = "retry must be digits";
		return 400;
	}
	return 0;
}

/* The right to publish f: 0 with publisher (IDEM_PUBLISHER_MAX bytes) the
 * scope of its Idempotency-Keys (idempotency.h), or the refusal's status
 * with *why and *extra (a Bearer challenge). */
static int authorize_publish(const struct mercure *mc, struct conn *c, const struct http_request *req,
			     const struct form *f, const char *base, const char **why, const char **extra, char *chal,
			     size_t chal_len, char *publisher)
{
	struct http_slice tok;
	bool from_cookie;
	*extra = NULL;
	const char *static_token = mc->cfg->publish_token;
	for (size_t i = 0; i < f->ntopics && mc->cfg->namespaces.n; i++)
		if (!config_rules(mc->cfg, f->topics[i], strlen(f->topics[i]))->mercure) {
			*why = "a topic of the update is in a namespace the Mercure hub does not serve (mercure = off)";
			return 403;
		}
	if (!find_token(mc, req, &tok, &from_cookie)) {
		/* herald's one rule without a token, as on POST /api/events
		 * (a form post needs no preflight: publish_cross_site). */
		int status = publish_without_token(mc->cfg, c, req, why);
		if (status == 401)
			*extra = challenge(base, NULL, chal, chal_len);
		idem_publisher(NULL, 0, false, conn_peer(c), publisher);
		return status;
	}
	if (from_cookie && !cookie_allowed(mc, req)) {
		*why = "a publish authorized by cookie is refused from an origin allow_origin does not list";
		return 403;
	}
	if (!from_cookie && static_token[0] && http_token_equal(tok, static_token)) {
		idem_publisher(NULL, 0, true, conn_peer(c), publisher);
		return 0;
	}
	struct mercure_grants g = { .base = base };
	int64_t exp;
	if (verify(mc, tok, &g, &exp, NULL, why) != JWT_OK) {
		*extra = challenge(base, "invalid_token", chal, chal_len);
		return 401;
	}
	for (size_t i = 0; i < f->ntopics; i++)
		if (!mercure_matchers_match(&g.publish, f->topics[i], strlen(f->topics[i]), base)) {
			mercure_grants_free(&g);
			*why = "the token does not grant publishing to every topic of the update";
			*extra = challenge(base, "insufficient_scope", chal, chal_len);
			return 403;
		}
	mercure_grants_free(&g);
	idem_publisher(tok.p, tok.n, false, conn_peer(c), publisher);
	return 0;
}

void mercure_publish(const struct mercure *mc, struct conn *c, const struct http_request *req, const char *body,
		     size_t len)
{
	char base[2200];
	hub_url(mc, c, req, base, sizeof(base));
	const struct http_header *ct = http_header_get(req, "Content-Type");
	if (!ct || ct->value.n < 33 || strncasecmp(ct->value.p, "application/x-www-form-urlencoded", 33) != 0) {
		refuse(c, base, 400, "bad_content_type", "an update is sent as application/x-www-form-urlencoded",
		       NULL);
		return;
	}
	struct form f = { 0 };
	const char *why = NULL, *extra = NULL;
	char key[IDEM_KEY_MAX + 1], publisher[IDEM_PUBLISHER_MAX];
	int keyed = publish_idempotency_key(req, key, &why);
	int status = keyed < 0 ? 400 : read_form(body, len, base, &f, &why);
	char chal[2600];
	if (!status)
		status = authorize_publish(mc, c, req, &f, base, &why, &extra, chal, sizeof(chal), publisher);
	if (status) {
		form_free(&f);
		refuse(c, base, status,
		       keyed < 0       ? "bad_idempotency_key"
		       : status == 401 ? "invalid_token"
		       : status == 403 ? "forbidden"
				       : "bad_body",
		       why, extra);
		return;
	}
	struct publish_mercure u = { 0 };
	if (keyed) {
		/* As on POST /api/events: the same key and body within the
		 * window is answered as the first was (an update without an id
		 * of its own: the same event, so the same id made from it). */
		u.idem_key = xstrdup(key);
		u.idem_publisher = xstrdup(publisher);
		idem_digest(body ? body : "", body ? len : 0, NULL, 0, u.idem_hash);
	}
	u.id = f.id; /* NULL: the id made from the log and the event's number */
	f.id = NULL;
	u.topic = mercure_row_topic(f.topics[0]);
	/* An update with its own id, a retry, alternate topics or a topic its
	 * row cannot carry keeps a block; any other is a plain row. */
	if (u.id || f.retry || f.ntopics > 1 || strcmp(u.topic, f.topics[0]) != 0)
		u.block =
			mercure_block_new(u.id ? u.id : "", f.retry ? f.retry : "", f.topics, f.ntopics, &u.block_len);
	u.type = xstrdup(f.type && f.type[0] ? f.type : "message");
	u.data = f.data ? f.data : xstrdup("");
	u.data_len = f.data ? f.data_len : 0;
	f.data = NULL;
	u.public = !f.private_;
	form_free(&f);
	struct http_head fields;
	http_head_init(&fields, 0);
	const struct http_header *o = http_header_get(req, "Origin");
	if (o)
		cors_fields(mc->cors, o->value.p, o->value.n, &fields);
	add_link(&fields, base);
	publish_mercure(mc->pubq, c, &u, &fields); /* takes the fields */
}
