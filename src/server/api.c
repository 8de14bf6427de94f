/* SPDX-License-Identifier: BSD-2-Clause */
/* api.c: routing and the small endpoints (health, metrics, presence).
 * Requests are routed by a table of paths (routes[] below): the first
 * route whose path matches and that the settings turn on answers, 405
 * naming its methods for a method it does not take, 404 when none does. */
#include "server/api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/console.h"
#include "core/group.h"
#include "common/log.h"
#include "mercure/mercure.h"
#include "mercure/mercure_match.h"
#include "presence/presence.h"
#include "core/stall_guard.h"
#include "common/text.h"
#include "core/topic.h"
#include "common/util.h"

static bool path_is(const struct http_request *req, const char *path)
{
	size_t n = strlen(path);
	return req->path.n == n && memcmp(req->path.p, path, n) == 0;
}

/* The refused hook: a log line with the client, the request and the cause,
 * at most 20 a second (a flood of bad requests must not flood the journal;
 * the rest are counted). */
static void log_refusal(void *owner, struct conn *c, int status, const char *message)
{
	struct api *a = owner;
	uint64_t now = loop_now(a->lp);
	if (now - a->log_window >= 1000) {
		if (a->log_suppressed)
			log_notice("%u more refused requests not logged in the last second", a->log_suppressed);
		a->log_window = now;
		a->log_in_window = a->log_suppressed = 0;
	}
	if (++a->log_in_window > 20) {
		a->log_suppressed++;
		return;
	}
	const char *what = conn_what(c);
	log_notice("refused %s %s: %d %s", conn_client(c), what[0] ? what : "(no request line)", status, message);
}

/* A refusal with one field first, then more (NULL: none). */
static void refuse_first(struct conn *c, int status, const char *cause, const char *why, const char *name,
			 const char *value, const struct http_head *more)
{
	struct http_head extra;
	http_head_init(&extra, 0);
	http_head_add(&extra, name, value);
	http_head_append(&extra, more);
	conn_refuse(c, status, cause, why, &extra);
	http_head_free(&extra);
}

/* 503 while the server shuts down, with more fields (or NULL) beside. */
static void shutting_down(struct conn *c, const struct http_head *more)
{
	refuse_first(c, 503, "shutting_down", "the server is shutting down", "Retry-After", "5", more);
}

/* 405 naming the methods allow, with more fields (or NULL) beside. */
static void method_not_allowed(struct conn *c, const char *allow, const struct http_head *more)
{
	refuse_first(c, 405, "method_not_allowed", "method not allowed for this path", "Allow", allow, more);
}

size_t api_sockets(const struct api *a)
{
	return conn_pool_count(a->pool) - h2_server_streams(a->h2) + h2_server_sessions(a->h2);
}

static void health(struct api *a, struct conn *c)
{
	/* The namespaces' rules follow the figures (measured, then written). */
	size_t nsl = namespaces_json(&a->cfg->namespaces, NULL, 0);
	size_t cap = 400 + 6 * STALL_WHAT_MAX + nsl;
	char *body = xmalloc(cap);
	/* A node whose log is unreachable answers 503, so a balancer's health
	 * check sends new readers and publishes elsewhere. */
	bool log_ok = store_available(a->st);
	int status = log_ok ? 200 : 503;
	/* In a group, readers counts every worker's; connections (sockets,
	 * an HTTP/2 connection being one) and http2_streams are this worker's
	 * (worker names it). */
	bool group = group_on();
	char who[48] = "";
	if (group)
		snprintf(who, sizeof(who), ",\"worker\":%d", group_index());
	/* The worst loop pass of the last minute (this process's) and what
	 * ran longest in it: a stall shows here without a profiler. */
	const char *what = "";
	uint64_t worst = a->stall ? stall_guard_worst(a->stall, loop_now(a->lp), &what) : 0;
	char what_json[6 * STALL_WHAT_MAX + 1];
	what_json[http_json_escape(what, what_json)] = '\0';
	int n = snprintf(body, cap,
			 "{\"status\":\"%s\",\"log\":\"%s\",\"backend\":\"%s\",\"workers\":%u%s,\"readers\":%zu,"
			 "\"connections\":%zu,\"http2_streams\":%zu,\"last_id\":%lld,\"uptime_s\":%llu,"
			 "\"loop_worst_ms\":%.3f,\"loop_worst\":\"%s\",\"namespaces\":",
			 !log_ok            ? "unavailable"
			 : conn_draining(c) ? "draining"
					    : "ok",
			 log_ok ? "ok" : "unavailable", store_kind(a->st), group ? group_workers() : 1u, who,
			 group ? group_readers() : hub_readers(a->hub), api_sockets(a), h2_server_streams(a->h2),
			 (long long)hub_high_water(a->hub),
			 (unsigned long long)((loop_now(a->lp) - a->started_ms) / 1000), (double)worst / 1e6,
			 what_json);
	n += (int)namespaces_json(&a->cfg->namespaces, body + n, cap - (size_t)n);
	n += snprintf(body + n, cap - (size_t)n, "}\n");
	struct http_head h;
	http_head_response(&h, status, "application/json", (size_t)n, conn_keep_alive(c));
	http_head_add(&h, "Cache-Control", "no-store");
	if (!log_ok)
		http_head_add(&h, "Retry-After", "1");
	conn_respond(c, &h, body, (size_t)n); /* to HEAD: the same head, and no body */
	http_head_free(&h);
	free(body);
}

/* A 200 that must never be cached (a scrape, a presence answer): body,
 * malloc'd by the caller, is sent and freed. */
static void respond_no_store(struct conn *c, const char *type, char *body, size_t len)
{
	struct http_head h;
	http_head_response(&h, 200, type, len, conn_keep_alive(c));
	http_head_add(&h, "Cache-Control", "no-store");
	conn_respond(c, &h, body, len);
	http_head_free(&h);
	free(body);
}

/* The metrics page as a 200: metrics.c makes the text, the HTTP head is
 * made here (Cache-Control: no-store, as a scrape must never be cached). */
static void metrics_respond(struct conn *c, const struct metrics *m, const struct metrics_gauges *g)
{
	size_t len;
	char *body = metrics_render(m, g, &len);
	respond_no_store(c, "text/plain; version=0.0.4", body, len);
}

/* /metrics in a worker of a group: counters summed over the group (this
 * worker's stamped first, so its own are current; the others' are at most
 * a stamp old), gauges summed, and each worker's line. g holds this
 * worker's gauges (log_available stays its own). */
static void group_metrics(struct api *a, struct conn *c, struct metrics_gauges *g)
{
	struct group_figures mine = { .connections = g->connections,
				      .http2_sessions = g->http2_sessions,
				      .http2_streams = g->http2_streams,
				      .readers_catching_up = g->readers_catching_up,
				      .publish_pending = g->publish_pending,
				      .last_event_id = g->last_event_id };
	group_stamp(&mine, a->m);
	struct metrics *sum = xcalloc(1, sizeof(*sum));
	struct group_figures f;
	struct group_worker w[GROUP_MAX_WORKERS];
	int pids[GROUP_MAX_WORKERS];
	size_t readers[GROUP_MAX_WORKERS];
	unsigned n = group_sum(sum, &f, w);
	g->readers = 0;
	for (unsigned i = 0; i < n; i++) {
		pids[i] = (int)w[i].pid;
		readers[i] = w[i].readers;
		g->readers += w[i].readers;
	}
	g->readers_catching_up = f.readers_catching_up;
	g->connections = f.connections;
	g->http2_sessions = f.http2_sessions;
	g->http2_streams = f.http2_streams;
	g->publish_pending = f.publish_pending;
	g->last_event_id = f.last_event_id;
	g->workers = n;
	g->worker_pids = pids;
	g->worker_readers = readers;
	metrics_respond(c, sum, g);
	free(sum);
}

/* /metrics for whom metrics_access allows: anyone; only a client on this
 * host that did not come through a proxy; or a client with metrics_token. */
static void metrics(struct api *a, struct conn *c, const struct http_request *req)
{
	const struct config *cfg = a->cfg;
	if (cfg->metrics_mode == METRICS_LOCAL && !(conn_peer_local(c) && !http_forwarded(req))) {
		conn_refuse(c, 403, "metrics_local_only",
			    "metrics are served only to this host (metrics_access = local)", NULL);
		return;
	}
	if (cfg->metrics_mode == METRICS_TOKEN) {
		struct http_slice tok;
		if (!http_bearer_token(req, &tok)) {
			conn_refuse_with(c, 401, "metrics_token_missing",
					 "metrics need Authorization: Bearer <metrics_token>", "WWW-Authenticate",
					 "Bearer");
			return;
		}
		if (!http_token_equal(tok, cfg->metrics_token)) {
			conn_refuse(c, 403, "metrics_token_invalid", "the metrics token is not valid", NULL);
			return;
		}
	}
	struct metrics_gauges g = { .readers = hub_readers(a->hub),
				    .readers_catching_up = hub_catching_up(a->hub),
				    .connections = api_sockets(a),
				    .http2_sessions = h2_server_sessions(a->h2),
				    .http2_streams = h2_server_streams(a->h2),
				    .last_event_id = hub_high_water(a->hub),
				    .publish_pending = publish_pending(a->pubq),
				    .log_available = store_available(a->st) };
	if (group_on()) {
		group_metrics(a, c, &g);
		return;
	}
	metrics_respond(c, a->m, &g);
}

#define PRESENCE_MAX_TOPICS 64

/* Add a topic to ask for, answered under label (NULL: itself), both
 * taken over; false (both freed) when there are PRESENCE_MAX_TOPICS
 * already. */
static bool presence_topic_add(char **topics, char **labels, size_t *n, char *topic, char *label)
{
	if (*n == PRESENCE_MAX_TOPICS) {
		free(topic);
		free(label);
		return false;
	}
	labels[*n] = label ? label : xstrdup(topic);
	topics[(*n)++] = topic;
	return true;
}

/* One mercure_topic parameter's value: a Mercure topic, asked for under
 * the name its readers are counted by (mercure_row_topic) and answered
 * under itself. NULL, or why it is refused (static, or written into buf). */
static const char *presence_mercure_topic(struct http_slice value, char **topics, char **labels, size_t *n, char *buf,
					  size_t len)
{
	size_t vn;
	char *t = http_percent_decode_dup(value, &vn), shown[48];
	if (!t)
		return "the mercure_topic parameter is not valid percent-encoding";
	const char *why = NULL;
	if (!mercure_value_valid(t, vn)) {
		snprintf(buf, len,
			 "the mercure_topic parameter: \"%s\" is not a Mercure topic (1 to 2048 bytes of UTF-8 without "
			 "control or format characters)",
			 text_shown(t, vn, shown, sizeof(shown)));
		why = buf;
	} else if (strcmp(t, "*") == 0) {
		why = "the mercure_topic parameter: \"*\" is the wildcard matcher, not a topic (topic=* counts the "
		      "streams that read every topic)";
	}
	if (why) {
		free(t);
		return why;
	}
	if (!presence_topic_add(topics, labels, n, mercure_row_topic(t), t))
		return "more than 64 topics asked (topic and mercure_topic together)";
	return NULL;
}

/* The topics of GET /api/presence?topic=a,b&mercure_topic=T (owned
 * strings, valid patterns) into topics, and the name each is answered
 * under into labels (owned); returns how many, or -1 with *why set
 * (static, or written into buf): the parameter and what is wrong with it.
 * topic takes herald's topics and patterns, comma-separated (the first
 * topic parameter); each mercure_topic one Mercure topic, any text the
 * protocol allows (commas included), counted under the name its updates'
 * rows carry. */
static int presence_topics(const struct http_request *req, char **topics, char **labels, const char **why, char *buf,
			   size_t len)
{
	static const char *const params[] = { "topic", "mercure_topic" };
	size_t pos = 0, n = 0;
	struct http_slice name, value;
	char shown[48];
	*why = NULL;
	while (!*why && http_query_next(req->query, &pos, &name, &value)) {
		if (!name.n || (name.n == 5 && memcmp(name.p, "topic", 5) == 0))
			continue;
		if (name.n == 13 && memcmp(name.p, "mercure_topic", 13) == 0) {
			*why = presence_mercure_topic(value, topics, labels, &n, buf, len);
			continue;
		}
		char *given = xstrndup(name.p, name.n), hint[48];
		snprintf(buf, len, "unknown query parameter \"%s\"%s; presence takes only topic and mercure_topic",
			 text_escape(given, shown, sizeof(shown)),
			 text_did_you_mean(given, params, ARRAY_LEN(params), "", hint, sizeof(hint)));
		free(given);
		*why = buf;
	}
	char *dec = NULL;
	size_t mercure_n = n; /* mercure_topic values come first */
	if (!*why && http_query_get(req->query, "topic", &value)) {
		dec = http_percent_decode_dup(value, NULL);
		if (!dec) {
			*why = "the topic parameter is not valid percent-encoding";
			dec = xstrdup("");
		}
	}
	for (const char *t = dec; t && !*why && *t;) {
		size_t k = strcspn(t, ",");
		if (k == 0) {
			*why = "the topic parameter holds an empty topic (two commas together, or a comma first)";
		} else if (!topic_pattern_valid(t, k)) {
			char *bad = xstrndup(t, k);
			snprintf(buf, len,
				 "the topic parameter: \"%s\" is not a topic (letters, digits and _ . : / -, or ending "
				 "in /* for a subtree, or *; a Mercure topic goes in mercure_topic)",
				 text_escape(bad, shown, sizeof(shown)));
			free(bad);
			*why = buf;
		} else if (!presence_topic_add(topics, labels, &n, xstrndup(t, k), NULL)) {
			*why = mercure_n ? "more than 64 topics asked (topic and mercure_topic together)"
					 : "the topic parameter names more than 64 topics";
		}
		t += k;
		if (*t == ',')
			t++;
	}
	free(dec);
	if (*why) {
		while (n) {
			n--;
			free(topics[n]);
			free(labels[n]);
		}
		return -1;
	}
	return (int)n;
}

/* Who asks GET /api/presence, and what they may learn: the presence token
 * (everything, subjects too); a signed token (the topics its presence
 * claim covers, with subjects); without a token, a client on this host
 * not come through a proxy with presence_access = local (everything), or
 * anyone with presence_access = any (counts, no subjects). Returns 0 with
 * *scope set (its grants in *rights), or the refusal status with
 * *cause, *why and *challenge (a WWW-Authenticate value, or NULL) set. */
static int presence_scope(struct api *a, struct conn *c, const struct http_request *req, struct presence_scope *scope,
			  struct jwt_rights *rights, const char **cause, const char **why, const char **challenge)
{
	const struct config *cfg = a->cfg;
	struct http_slice tok;
	*scope = (struct presence_scope){ .every_topic = true, .subjects = true };
	*challenge = NULL;
	if (http_bearer_token(req, &tok)) {
		if (cfg->presence_token[0] && http_token_equal(tok, cfg->presence_token))
			return 0;
		struct jwt_verifier *jwt = streams_jwt(a->streams);
		if (!jwt) {
			*cause = "presence_token_invalid";
			*why = "the presence token is not valid";
			return 403;
		}
		struct jwt_cost cost;
		int e = jwt_check(jwt, tok.p, tok.n, clock_wall_s(), rights, why, &cost);
		a->m->token_verifications += cost.signature;
		a->m->token_cache_hits += cost.cached;
		if (e != JWT_OK) {
			*cause = "invalid_token";
			*challenge = "Bearer error=\"invalid_token\"";
			return 401;
		}
		if (!rights->npresence) {
			*cause = "forbidden";
			*why = "the token grants no topic to ask presence of (its presence claim)";
			return 403;
		}
		*scope = (struct presence_scope){ .grants = rights->presence,
						  .ngrants = rights->npresence,
						  .subjects = true };
		return 0;
	}
	if (cfg->presence_mode == METRICS_ANY) {
		scope->subjects = false; /* subjects are personal data: never to anyone */
		return 0;
	}
	if (cfg->presence_mode == METRICS_LOCAL && conn_peer_local(c) && !http_forwarded(req))
		return 0;
	*cause = "presence_forbidden";
	*why = cfg->presence_mode == METRICS_LOCAL
		       ? "presence is served only to this host or with a token (presence_access = local)"
		       : "presence needs Authorization: Bearer with the presence token or a signed token";
	*challenge = "Bearer";
	return 403;
}

/* A presence request waiting for its answer; c NULL once it closed. */
struct presence_wait {
	struct conn *c;
};

static void presence_wait_closed(struct conn *c, void *data)
{
	struct presence_wait *w = data;
	(void)c;
	w->c = NULL;
}

static const struct conn_user presence_waiter = { NULL, presence_wait_closed };

static void presence_answered(void *arg, char *body, size_t len)
{
	struct presence_wait *w = arg;
	struct conn *c = w->c;
	free(w);
	if (!c) {
		free(body);
		return;
	}
	conn_attach(c, NULL, NULL);
	if (!body) {
		conn_refuse_with(c, 503, "presence_unavailable",
				 "the cluster's presence cannot be read now (Redis is unreachable)", "Retry-After",
				 "1");
		return;
	}
	respond_no_store(c, "application/json", body, len);
}

/* GET /api/presence[?topic=a,b]: the readers (and subjects) of each topic
 * asked, or the topics with the most readers. */
static void presence_route(struct api *a, struct conn *c, const struct http_request *req)
{
	char *topics[PRESENCE_MAX_TOPICS], *labels[PRESENCE_MAX_TOPICS];
	const char *why = NULL, *cause = "bad_parameter", *challenge = NULL;
	char reason[300];
	int n = presence_topics(req, topics, labels, &why, reason, sizeof(reason));
	if (n < 0) {
		conn_refuse(c, 400, cause, why, NULL);
		return;
	}
	struct presence_scope scope;
	struct jwt_rights rights = { 0 };
	int status = presence_scope(a, c, req, &scope, &rights, &cause, &why, &challenge);
	for (int i = 0; !status && i < n; i++) {
		if (!presence_scope_covers(&scope, topics[i])) {
			status = 403;
			cause = "forbidden";
			why = "the token's presence claim does not cover a topic asked (topic or mercure_topic)";
		}
	}
	if (status) {
		conn_refuse_with(c, status, cause, why, "WWW-Authenticate", challenge);
	} else {
		/* The connection waits for the answer (the cluster's, from
		 * Redis, comes later); if it closes first, the answer is
		 * dropped. */
		struct presence_wait *w = xmalloc(sizeof(*w));
		w->c = c;
		conn_attach(c, &presence_waiter, w);
		conn_wait(c);
		presence_ask(a->presence, topics, labels, (size_t)n, &scope, presence_answered, w);
	}
	jwt_rights_free(&rights);
	while (n > 0) {
		n--;
		free(topics[n]);
		free(labels[n]);
	}
}

/* A browser's CORS preflight, before a cross-origin request that sets
 * headers (Authorization, Last-Event-ID) or posts JSON: answered as
 * allow_origin says. */
static void preflight(struct api *a, struct conn *c, const struct http_request *req, const char *methods,
		      const struct http_head *more)
{
	const struct http_header *o = http_header_get(req, "Origin");
	struct http_head h;
	http_head_response(&h, 204, NULL, 0, conn_keep_alive(c));
	if (!cors_fields(a->cors, o ? o->value.p : NULL, o ? o->value.n : 0, &h)) {
		http_head_free(&h);
		conn_refuse(c, 403, "cross_origin",
			    "cross-origin requests are allowed only from the origins allow_origin lists", more);
		return;
	}
	http_head_add(&h, "Access-Control-Allow-Methods", methods);
	http_head_add(&h, "Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID");
	http_head_add(&h, "Access-Control-Max-Age", "600");
	http_head_append(&h, more);
	conn_respond(c, &h, NULL, 0);
	http_head_free(&h);
}

static void route(void *owner, struct conn *c, const struct http_request *req, const char *body, size_t body_len);

/* What the Mercure handlers use, lent for one request. */
static struct mercure mercure_of(const struct api *a)
{
	return (struct mercure){ a->cfg, a->cors, a->streams, a->pubq, a->st, a->hub, a->msets, a->msubs };
}

/* The fields every answer to req carries, whoever makes it
 * (conn_hooks.answer_headers): the Mercure hub's Link on its paths. */
static void answer_headers(void *owner, struct conn *c, const struct http_request *req, struct http_head *h)
{
	struct api *a = owner;
	struct mercure mc = mercure_of(a);
	if (mercure_answers(&mc, req))
		mercure_link(&mc, c, req, h);
}

/* Route a request whose body has not arrived and that asked first
 * (Expect: 100-continue): refuse it now if it would be refused anyway. */
static bool expect_continue(void *owner, struct conn *c, const struct http_request *req)
{
	struct api *a = owner;
	if (path_is(req, "/api/events") && req->method == HTTP_POST) {
		if (conn_draining(c)) {
			shutting_down(c, NULL);
			return false;
		}
		return publish_precheck(a->pubq, c, req);
	}
	if (path_is(req, MERCURE_PATH) && a->cfg->mercure && req->method == HTTP_POST)
		return true; /* the form is judged whole */
	/* Nothing else takes a body: answer it now as it would be answered,
	 * and close, since the body it may still send is not read. */
	conn_set_keep_alive(c, false);
	route(owner, c, req, NULL, 0);
	return false;
}

/* ---- the routes ----
 *
 * Each route: a path, the methods its handler takes, whether OPTIONS is a
 * CORS preflight for them, whether the route exists under the current
 * settings, and the handler. The router takes the first route whose path
 * matches; a method the route does not take is answered 405 with an Allow
 * header made from the route's methods (OPTIONS last, when it has a
 * preflight); a path no route matches is 404. Every refusal carries the
 * answer's extra headers (the Mercure hub's Link on its paths). */

#define M(m) (1u << (m))

enum route_match {
	ROUTE_EXACT,   /* the path itself */
	ROUTE_SUBTREE, /* the path, or the path then "/..." */
	ROUTE_BELOW    /* the path (which ends in '/') then at least one byte */
};

/* One request being routed, for a handler. */
struct routed {
	struct api *a;
	struct conn *c;
	const struct http_request *req;
	const char *body;
	size_t body_len;
	const struct http_head *more; /* the fields every answer to req carries */
};

struct route {
	const char *path;
	enum route_match match;
	unsigned methods; /* M(HTTP_...) the handler takes */
	bool preflight;   /* OPTIONS answers a CORS preflight for those methods */
	/* Whether the route is there for req (a setting turns it off, or the
	 * path needs a closer look); NULL: always. */
	bool (*present)(const struct api *a, const struct http_request *req);
	void (*handle)(const struct routed *r);
};

static bool mercure_on(const struct api *a, const struct http_request *req)
{
	(void)req;
	return a->cfg->mercure;
}

static bool mercure_metadata_on(const struct api *a, const struct http_request *req)
{
	struct mercure mc = mercure_of(a);
	return a->cfg->mercure && mercure_metadata_path(&mc, req);
}

static bool presence_on(const struct api *a, const struct http_request *req)
{
	(void)req;
	return a->presence != NULL;
}

static bool console_on(const struct api *a, const struct http_request *req)
{
	(void)req;
	return a->cfg->console;
}

static void on_stream(const struct routed *r)
{
	stream_open(r->a->streams, r->c, r->req);
}

static void on_publish(const struct routed *r)
{
	if (conn_draining(r->c))
		shutting_down(r->c, r->more);
	else
		publish_handle(r->a->pubq, r->c, r->req, r->body, r->body_len);
}

static void on_mercure(const struct routed *r)
{
	struct mercure mc = mercure_of(r->a);
	if (r->req->method == HTTP_GET)
		mercure_subscribe(&mc, r->c, r->req);
	else if (conn_draining(r->c))
		shutting_down(r->c, r->more);
	else
		mercure_publish(&mc, r->c, r->req, r->body, r->body_len);
}

static void on_mercure_subscriptions(const struct routed *r)
{
	struct mercure mc = mercure_of(r->a);
	mercure_subscriptions(&mc, r->c, r->req);
}

static void on_mercure_metadata(const struct routed *r)
{
	struct mercure mc = mercure_of(r->a);
	mercure_metadata(&mc, r->c, r->req);
}

static void on_presence(const struct routed *r)
{
	presence_route(r->a, r->c, r->req);
}

static void on_health(const struct routed *r)
{
	health(r->a, r->c);
}

static void on_console(const struct routed *r)
{
	console_serve(r->c);
}

static void on_metrics(const struct routed *r)
{
	metrics(r->a, r->c, r->req);
}

static const struct route routes[] = {
	{ "/api/events/stream", ROUTE_EXACT, M(HTTP_GET), true, NULL, on_stream },
	{ "/api/events", ROUTE_EXACT, M(HTTP_POST), true, NULL, on_publish },
	{ MERCURE_PATH, ROUTE_EXACT, M(HTTP_GET) | M(HTTP_POST), true, mercure_on, on_mercure },
	{ MERCURE_PATH "/subscriptions", ROUTE_SUBTREE, M(HTTP_GET), false, mercure_on, on_mercure_subscriptions },
	{ "/.well-known/oauth-protected-resource/", ROUTE_BELOW, M(HTTP_GET), false, mercure_metadata_on,
	  on_mercure_metadata },
	{ "/api/presence", ROUTE_EXACT, M(HTTP_GET), false, presence_on, on_presence },
	{ "/api/health", ROUTE_EXACT, M(HTTP_GET) | M(HTTP_HEAD), false, NULL, on_health },
	{ "/", ROUTE_EXACT, M(HTTP_GET) | M(HTTP_HEAD), false, console_on, on_console },
	{ "/metrics", ROUTE_EXACT, M(HTTP_GET), false, NULL, on_metrics },
};

static bool route_matches(const struct route *rt, const struct http_request *req)
{
	size_t n = strlen(rt->path);
	if (req->path.n < n || memcmp(req->path.p, rt->path, n) != 0)
		return false;
	switch (rt->match) {
	case ROUTE_EXACT:
		return req->path.n == n;
	case ROUTE_SUBTREE:
		return req->path.n == n || req->path.p[n] == '/';
	case ROUTE_BELOW:
		return req->path.n > n;
	}
	return false;
}

/* The methods rt takes, for an Allow header ("GET, HEAD", "POST, OPTIONS"),
 * into buf. */
static const char *route_allow(const struct route *rt, char *buf, size_t len)
{
	static const struct {
		enum http_method m;
		const char *name;
	} order[] = { { HTTP_GET, "GET" }, { HTTP_HEAD, "HEAD" }, { HTTP_POST, "POST" } };
	size_t w = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(order); i++)
		if (rt->methods & M(order[i].m))
			w += (size_t)snprintf(buf + w, len - w, "%s%s", w ? ", " : "", order[i].name);
	if (rt->preflight)
		snprintf(buf + w, len - w, "%sOPTIONS", w ? ", " : "");
	return buf;
}

/* The methods a preflight for rt allows: its own, without HEAD. */
static const char *route_preflight_methods(const struct route *rt, char *buf, size_t len)
{
	struct route own = *rt;
	own.methods &= ~M(HTTP_HEAD);
	own.preflight = false;
	return route_allow(&own, buf, len);
}

static void route(void *owner, struct conn *c, const struct http_request *req, const char *body, size_t body_len)
{
	struct api *a = owner;
	/* Every X-Forwarded-For line, in order: a proxy may add its hop on a
	 * line of its own, and reading only the first would trust what the
	 * client wrote there. */
	size_t xff_len = 0;
	char *xff = http_header_join(req, "X-Forwarded-For", &xff_len);
	char client[64];
	addr_client(a->trust, conn_peer(c), conn_peer_unix(c), xff, xff_len, client, sizeof(client));
	conn_set_client(c, client);
	free(xff);
	struct http_head more;
	http_head_init(&more, 0);
	answer_headers(a, c, req, &more);

	for (size_t i = 0; i < ARRAY_LEN(routes); i++) {
		const struct route *rt = &routes[i];
		if (!route_matches(rt, req) || (rt->present && !rt->present(a, req)))
			continue;
		char methods[64];
		if (req->method == HTTP_OPTIONS && rt->preflight)
			preflight(a, c, req, route_preflight_methods(rt, methods, sizeof(methods)), &more);
		else if (!(rt->methods & M(req->method)))
			method_not_allowed(c, route_allow(rt, methods, sizeof(methods)), &more);
		else
			rt->handle(&(struct routed){ a, c, req, body, body_len, &more });
		http_head_free(&more);
		return;
	}
	conn_refuse(c, 404, "not_found", "no such path", &more);
	http_head_free(&more);
}

void api_hooks(struct api *a, struct conn_hooks *out)
{
	*out = (struct conn_hooks){
		.owner = a,
		.request = route,
		.expect_continue = expect_continue,
		.refused = log_refusal,
		.answer_headers = answer_headers,
	};
}
