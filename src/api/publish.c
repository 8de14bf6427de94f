/* SPDX-License-Identifier: BSD-2-Clause */
/* publish.c: the publish endpoint and group commit, with publishes made
 * safe to retry by Idempotency-Key (the store keeps the keys; this file
 * reads them, names the publisher they belong to, and answers replays and
 * conflicts). */
#include "api/publish.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/hub.h"
#include "store/idempotency.h"
#include "store/mercure_update.h"
#include "common/json.h"
#include "common/log.h"
#include "store/store.h"
#include "core/topic.h"
#include "common/text.h"
#include "common/util.h"

#define MAX_PENDING 10000
#define BUSY_GIVE_UP_MS 2000

struct publish_item {
	struct conn *c; /* NULL once the client has gone */
	bool keep_alive;
	uint64_t started_ns;
	char *type, *topic, *data;
	size_t data_len;
	bool public;
	struct http_head fields; /* the answer's CORS fields (an allowed Origin), and a Mercure update's Link: owned */
	char *idem_key;          /* the Idempotency-Key, or NULL */
	char *idem_publisher;    /* whose key it is (idempotency.h), with idem_key */
	char idem_hash[IDEM_HEX_LEN];
	bool is_mercure;  /* a Mercure update: answered 200 text/plain with its id */
	char *mercure_id; /* the publisher's id, or NULL: the id made from its number */
	char *mercure;    /* its block (mercure_update.h), or NULL: a plain row */
	size_t mercure_len;
};

struct publish_queue {
	struct loop *lp;
	struct store *st;
	struct hub *hub;
	const struct config *cfg;
	struct metrics *m;
	struct publish_item *items;
	size_t n, cap;
	bool scheduled;
	size_t committing;  /* the first this many items are being appended now */
	bool closed;        /* publish_free ran while an append was in flight */
	uint64_t commit_t0; /* when that append started */
	uint64_t busy_since;
	bool single_attempt;      /* shutting down: one commit, no retries */
	bool warned_unreadable;   /* said once that private events cannot be read */
	struct jwt_verifier *jwt; /* signed tokens, or NULL (publish_set_jwt) */
	const struct cors *cors;
	struct loop_timer retry;
	int fault;            /* store failure refusing publishes now (-EBUSY, -EROFS, -ENOSPC), or 0 */
	uint64_t fault_since; /* loop time of the first refusal of that episode */
	size_t fault_refused; /* publishes refused in it */
};

struct publish_queue *publish_new(struct loop *lp, struct store *st, struct hub *hub, const struct config *cfg,
				  const struct cors *cors, struct metrics *m)
{
	struct publish_queue *q = xcalloc(1, sizeof(*q));
	q->cors = cors;
	q->lp = lp;
	q->st = st;
	q->hub = hub;
	q->cfg = cfg;
	q->m = m;
	return q;
}

static void item_free(struct publish_item *it)
{
	http_head_free(&it->fields);
	free(it->idem_key);
	free(it->idem_publisher);
	free(it->mercure_id);
	free(it->mercure);
	free(it->type);
	free(it->topic);
	free(it->data);
}

size_t publish_pending(const struct publish_queue *q)
{
	return q ? q->n : 0;
}

/* Why the body's field named by key is refused: its name (escaped and cut
 * for a one-line message) and the field it is nearest to, written into
 * buf. Returns buf. */
static const char *unknown_field(const struct json_value *key, char *buf, size_t len)
{
	static const char *const fields[] = { "type", "topic", "data", "public" };
	size_t n;
	char *name = json_string_dup(key, &n), shown[64], hint[48];
	snprintf(buf, len, "unknown field \"%s\"%s; the fields are type, topic, data and public",
		 text_escape(name, shown, sizeof(shown)),
		 text_did_you_mean(name, fields, ARRAY_LEN(fields), "\"", hint, sizeof(hint)));
	free(name);
	return buf;
}

/* Take the body apart into it. Returns NULL, or the reason for a 400
 * (static, or written into buf). */
static const char *parse_body(const char *body, size_t len, struct publish_item *it, char *buf, size_t buflen)
{
	static const char *const refused[] = {
		[-JSON_NOT_UTF8] = "the request body is not valid UTF-8",
		[-JSON_NUL_BYTE] = "the request body contains a NUL byte",
		[-JSON_NUL_ESCAPE] = "a string in the body contains \\u0000, which cannot be stored",
		[-JSON_NOT_JSON] = "the request body is not valid JSON",
	};
	const char *why = NULL;
	bool have_data = false, seen_type = false, seen_topic = false, seen_public = false;
	struct json_value root, key, v;
	struct json_iter members;
	if (len == 0)
		return "the request body is empty; send a JSON object";
	int e = json_parse(body, len, &root);
	if (e != JSON_OK)
		return refused[-e];
	if (root.type != JSON_OBJECT)
		return "the request body must be a JSON object";

	json_iter_start(&members, &root);
	while (!why && json_iter_next(&members, &key, &v)) {
		size_t vlen;
		if (json_string_is(&key, "type", 4)) {
			if (seen_type)
				why = "\"type\" appears twice";
			else if (v.type != JSON_STRING)
				why = "\"type\" must be a string";
			else if (!(it->type = json_string_dup(&v, &vlen)) || vlen < 1 || vlen > 64 ||
				 !text_name_valid(it->type, vlen, false))
				why = "\"type\" must be 1 to 64 characters of letters, digits and _ . : -";
			seen_type = true;
		} else if (json_string_is(&key, "topic", 5)) {
			if (seen_topic)
				why = "\"topic\" appears twice";
			else if (v.type != JSON_STRING)
				why = "\"topic\" must be a string";
			else if (!(it->topic = json_string_dup(&v, &vlen)) || vlen > 128 ||
				 !text_name_valid(it->topic, vlen, true))
				why = "\"topic\" must be up to 128 characters of letters, digits and _ . : / -";
			seen_topic = true;
		} else if (json_string_is(&key, "data", 4)) {
			if (have_data)
				why = "\"data\" appears twice";
			else if (v.type == JSON_STRING)
				it->data = json_string_dup(&v, &it->data_len);
			else
				it->data = json_compact(&v, &it->data_len);
			have_data = true;
		} else if (json_string_is(&key, "public", 6)) {
			if (seen_public)
				why = "\"public\" appears twice";
			else if (v.type == JSON_TRUE || v.type == JSON_FALSE)
				it->public = v.type == JSON_TRUE;
			else
				why = "\"public\" must be true or false";
			seen_public = true;
		} else {
			why = unknown_field(&key, buf, buflen);
		}
	}
	if (!why && !have_data)
		why = "\"data\" is required";
	if (!why) {
		if (!it->type)
			it->type = xstrdup("message");
		if (!it->topic)
			it->topic = xstrdup("");
	}
	return why;
}

/* Whether "host[:port]" names this host: localhost, 127.0.0.0/8 or [::1]. */
static bool loopback_authority(const char *p, size_t n)
{
	size_t h = n;
	if (n && p[0] == '[') {
		const char *close = memchr(p, ']', n);
		if (!close)
			return false;
		h = (size_t)(close - p) + 1;
	} else {
		const char *colon = memchr(p, ':', n);
		if (colon)
			h = (size_t)(colon - p);
	}
	if (h < n && (p[h] != ':' || h + 1 == n))
		return false;
	for (size_t i = h + 1; i < n; i++)
		if (!isdigit((unsigned char)p[i]))
			return false;
	if ((h == 9 && strncasecmp(p, "localhost", 9) == 0) || (h == 5 && memcmp(p, "[::1]", 5) == 0))
		return true;
	char ip[16];
	struct in_addr a;
	if (h >= sizeof(ip))
		return false;
	memcpy(ip, p, h);
	ip[h] = '\0';
	return inet_pton(AF_INET, ip, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

/* A browser on this host can be made to send a publish by any page it
 * opens (a form post needs no CORS preflight), or by a page whose name was
 * rebound to 127.0.0.1. Without a token, refuse what a browser marks as
 * coming from another site, and any request naming a host other than this
 * one. Returns NULL or the reason. */
const char *publish_cross_site(const struct http_request *req)
{
	const struct http_header *h = http_header_get(req, "Sec-Fetch-Site");
	if (h && !(h->value.n == 11 && strncasecmp(h->value.p, "same-origin", 11) == 0) &&
	    !(h->value.n == 4 && strncasecmp(h->value.p, "none", 4) == 0))
		return "publishing without publish_token is refused from another site (Sec-Fetch-Site)";
	h = http_header_get(req, "Origin");
	if (h) {
		const char *p = h->value.p;
		size_t n = h->value.n, skip = 0;
		if (n > 7 && strncasecmp(p, "http://", 7) == 0)
			skip = 7;
		else if (n > 8 && strncasecmp(p, "https://", 8) == 0)
			skip = 8;
		if (!skip || !loopback_authority(p + skip, n - skip))
			return "publishing without publish_token is refused from a page of another origin (Origin)";
	}
	h = http_header_get(req, "Host");
	if (h && !loopback_authority(h->value.p, h->value.n))
		return "publishing without publish_token needs a Host naming this host (localhost, 127.0.0.1 or [::1])";
	return NULL;
}

/* What a publish may do: anything (the static token, or token-less on
 * this host), or what a signed token's publish claim grants. */
struct rights {
	bool tokened; /* a valid token was shown (a namespace may need one) */
	bool by_claim;
	struct jwt_rights jwt;
};

static bool topic_granted(const struct rights *r, const char *topic)
{
	if (!r->by_claim)
		return true;
	for (size_t i = 0; i < r->jwt.npublish; i++)
		if (topic_pattern_match(r->jwt.publish[i], topic, strlen(topic)))
			return true;
	return false;
}

int publish_without_token(const struct config *cfg, const struct conn *c, const struct http_request *req,
			  const char **why)
{
	if (cfg->publish_token[0]) {
		*why = "publishing needs a token (publish_token is set): Authorization: Bearer <token>";
		return 401;
	}
	if (!conn_peer_local(c) || http_forwarded(req)) {
		*why = "publishing without publish_token is allowed only from this host, not through a proxy";
		return 403;
	}
	*why = publish_cross_site(req);
	return *why ? 403 : 0;
}

/* The right to publish: a token shown (publish_token anywhere, a signed
 * one where its claim says), else publish_without_token's rule. Returns 0
 * or the refusal status with *why set. */
static int check_right(const struct publish_queue *q, struct conn *c, const struct http_request *req,
		       struct rights *rights, const char **why)
{
	const char *token = q->cfg->publish_token;
	struct http_slice tok;
	bool bearer = http_bearer_token(req, &tok);
	/* A bearer token that nothing here could check (neither
	 * publish_token nor jwt_algorithm is set) counts for nothing. */
	if (!bearer || (!token[0] && !q->jwt))
		return publish_without_token(q->cfg, c, req, why);
	if (token[0] && http_token_equal(tok, token)) {
		rights->tokened = true;
		return 0;
	}
	if (!q->jwt) {
		*why = "the publish token is not valid";
		return 403;
	}
	/* Signed: its claim is checked against the topic once the body is
	 * read. */
	struct jwt_cost cost;
	int e = jwt_check(q->jwt, tok.p, tok.n, clock_wall_s(), &rights->jwt, why, &cost);
	q->m->token_verifications += cost.signature;
	q->m->token_cache_hits += cost.cached;
	if (e != JWT_OK)
		return 401;
	rights->by_claim = true;
	rights->tokened = true;
	return 0;
}

/* The body must be declared JSON: a form or text/plain post, which any web
 * page can make without asking, is refused. */
static bool json_content_type(const struct http_request *req)
{
	const struct http_header *h = http_header_get(req, "Content-Type");
	if (!h || h->value.n < 16 || strncasecmp(h->value.p, "application/json", 16) != 0)
		return false;
	return h->value.n == 16 || h->value.p[16] == ';' || h->value.p[16] == ' ' || h->value.p[16] == '\t';
}

/* The short name a refusal of check_head's is counted under. */
static const char *head_cause(int status)
{
	switch (status) {
	case 401:
		return "unauthorized";
	case 403:
		return "forbidden";
	case 411:
		return "content_length";
	default:
		return "content_type";
	}
}

/* Everything that can be judged from the head. Returns 0, or the refusal
 * status with *why and *challenge (a WWW-Authenticate value, or NULL)
 * set. */
static int check_head(const struct publish_queue *q, struct conn *c, const struct http_request *req,
		      struct rights *rights, const char **why, const char **challenge)
{
	*challenge = NULL;
	int status = check_right(q, c, req, rights, why);
	if (status) {
		if (status == 401)
			*challenge = http_bearer_token(req, &(struct http_slice){ 0 })
					     ? "Bearer error=\"invalid_token\""
					     : "Bearer";
		return status;
	}
	if (!json_content_type(req)) {
		*why = "the body must be sent as Content-Type: application/json";
		return 415;
	}
	if (req->content_length < 0) {
		*why = "POST needs a Content-Length header";
		return 411;
	}
	return 0;
}

bool publish_precheck(struct publish_queue *q, struct conn *c, const struct http_request *req)
{
	const char *why, *challenge;
	struct rights rights = { 0 };
	int status = check_head(q, c, req, &rights, &why, &challenge);
	jwt_rights_free(&rights.jwt);
	if (status)
		conn_refuse_with(c, status, head_cause(status), why, "WWW-Authenticate", challenge);
	return status == 0;
}

static void commit(void *arg);

static void schedule(struct publish_queue *q)
{
	if (!q->scheduled) {
		q->scheduled = true;
		loop_defer(q->lp, commit, q);
	}
}

void publish_set_jwt(struct publish_queue *q, struct jwt_verifier *jwt)
{
	q->jwt = jwt;
}

/* The client went away while its publish waits: the event is still
 * committed, but no answer is sent. */
static void cancel(struct conn *c, void *data)
{
	struct publish_queue *q = data;
	for (size_t i = 0; i < q->n; i++)
		if (q->items[i].c == c)
			q->items[i].c = NULL;
}

static const struct conn_user waiting_user = { NULL, cancel };

/* Queue it (the queue owns its strings now) for the next group commit, c
 * waiting for its answer. */
static void enqueue(struct publish_queue *q, struct conn *c, const struct publish_item *it)
{
	if (q->n == q->cap) {
		q->cap = q->cap ? q->cap * 2 : 64;
		q->items = xrealloc(q->items, q->cap * sizeof(*q->items));
	}
	q->items[q->n++] = *it;
	conn_attach(c, &waiting_user, q);
	schedule(q); /* before the connection's pass end, which stops its input */
	conn_wait(c);
}

int publish_idempotency_key(const struct http_request *req, char *key, const char **why)
{
	const struct http_header *found = NULL;
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];
		if (h->name.n != 15 || strncasecmp(h->name.p, "Idempotency-Key", 15) != 0)
			continue;
		if (found) {
			*why = "Idempotency-Key appears twice; send one key";
			return -1;
		}
		found = h;
	}
	if (!found)
		return 0;
	return idem_key_parse(found->value.p, found->value.n, key, why) < 0 ? -1 : 1;
}

/* Who a keyed publish is from, the scope of its keys: the signed token's
 * subject, the static publish token, or the local peer (idempotency.h). */
static char *publisher_of(const struct publish_queue *q, struct conn *c, const struct http_request *req,
			  const struct rights *rights)
{
	char name[IDEM_PUBLISHER_MAX];
	struct http_slice tok = { 0 };
	bool bearer = http_bearer_token(req, &tok);
	idem_publisher(rights->by_claim && bearer ? tok.p : NULL, tok.n, !rights->by_claim && q->cfg->publish_token[0],
		       conn_peer(c), name);
	return xstrdup(name);
}

void publish_handle(struct publish_queue *q, struct conn *c, const struct http_request *req, const char *body,
		    size_t body_len)
{
	const char *why, *challenge;
	struct rights rights = { 0 };
	int status = check_head(q, c, req, &rights, &why, &challenge);
	if (status) {
		conn_refuse_with(c, status, head_cause(status), why, "WWW-Authenticate", challenge);
		return;
	}
	if (q->n >= MAX_PENDING) {
		jwt_rights_free(&rights.jwt);
		conn_refuse_with(c, 503, "publish_queue_full", "too many publishes waiting for the database",
				 "Retry-After", "1");
		return;
	}
	char key[IDEM_KEY_MAX + 1];
	int keyed = publish_idempotency_key(req, key, &why);
	if (keyed < 0) {
		jwt_rights_free(&rights.jwt);
		conn_refuse(c, 400, "bad_idempotency_key", why, NULL);
		return;
	}
	struct publish_item it = { .c = c, .keep_alive = conn_keep_alive(c), .started_ns = clock_mono_ns() };
	if (keyed) {
		/* The fingerprint is of the body's bytes: a retry sends the
		 * same request again (the draft's "same payload"). */
		it.idem_key = xstrdup(key);
		it.idem_publisher = publisher_of(q, c, req, &rights);
		idem_digest(body, body_len, NULL, 0, it.idem_hash);
	}
	char reason[200];
	why = parse_body(body, body_len, &it, reason, sizeof(reason));
	if (!why && !topic_granted(&rights, it.topic)) {
		jwt_rights_free(&rights.jwt);
		item_free(&it);
		conn_refuse(c, 403, "topic_not_granted", "the token does not grant publishing to this topic", NULL);
		return;
	}
	jwt_rights_free(&rights.jwt);
	const struct namespace *ns = why ? NULL : config_rules(q->cfg, it.topic, strlen(it.topic));
	if (ns && ns->publish_token == 1 && !rights.tokened) {
		char text[200];
		snprintf(text, sizeof(text), "publishing to namespace \"%s\" needs a token (publish_needs_token)",
			 ns->pattern);
		item_free(&it);
		conn_refuse_with(c, 401, "namespace_needs_token", text, "WWW-Authenticate", "Bearer");
		return;
	}
	if (why) {
		item_free(&it);
		conn_refuse(c, 400, "bad_body", why, NULL);
		return;
	}
	const struct http_header *o = http_header_get(req, "Origin");
	if (o)
		cors_fields(q->cors, o->value.p, o->value.n, &it.fields);
	if (!it.public && !q->cfg->read_token[0] && !q->jwt && !q->warned_unreadable) {
		/* Events are private unless marked public: without a read token
		 * or signed tokens, no reader will ever see this one. */
		log_warn("publish: an event not marked public was stored, but with neither read_token nor "
			 "jwt_algorithm set no reader can receive private events (logged once)");
		q->warned_unreadable = true;
	}
	enqueue(q, c, &it);
}

/* Refuse as conn_refuse does, with Retry-After on a 503, then the fields
 * every answer to a Mercure update carries (mercure_fields: CORS and the
 * hub's Link), or none for herald's own publishes (NULL). */
static void refuse_publish(struct conn *c, int status, const char *cause, const char *message,
			   const struct http_head *mercure_fields)
{
	struct http_head extra;
	http_head_init(&extra, 0);
	if (status == 503)
		http_head_add(&extra, "Retry-After", "1");
	http_head_append(&extra, mercure_fields);
	conn_refuse(c, status, cause, message, &extra);
	http_head_free(&extra);
}

void publish_mercure(struct publish_queue *q, struct conn *c, struct publish_mercure *u, struct http_head *fields)
{
	if (q->n >= MAX_PENDING) {
		publish_mercure_free(u);
		refuse_publish(c, 503, "publish_queue_full", "too many publishes waiting for the database", fields);
		http_head_free(fields);
		return;
	}
	struct publish_item it = { .c = c,
				   .keep_alive = conn_keep_alive(c),
				   .started_ns = clock_mono_ns(),
				   .type = u->type,
				   .topic = u->topic,
				   .data = u->data,
				   .data_len = u->data_len,
				   .public = u->public,
				   .fields = *fields,
				   .is_mercure = true,
				   .mercure_id = u->id,
				   .mercure = u->block,
				   .mercure_len = u->block_len,
				   .idem_key = u->idem_key,
				   .idem_publisher = u->idem_publisher };
	memcpy(it.idem_hash, u->idem_hash, sizeof(it.idem_hash));
	memset(u, 0, sizeof(*u)); /* the item owns the strings now */
	http_head_init(fields, 0);
	enqueue(q, c, &it);
}

void publish_mercure_free(struct publish_mercure *u)
{
	free(u->type);
	free(u->topic);
	free(u->data);
	free(u->id);
	free(u->block);
	free(u->idem_key);
	free(u->idem_publisher);
	memset(u, 0, sizeof(*u));
}

/* A key used before with another body: refused, and said in the log (a
 * publisher reusing keys is a bug worth finding). */
static void answer_conflict(struct publish_item *it, int64_t id)
{
	log_warn("publish: Idempotency-Key \"%s\" of %s was used for event %lld with another body; answered 422",
		 it->idem_key, it->idem_publisher, (long long)id);
	if (!it->c)
		return;
	char msg[160];
	snprintf(msg, sizeof(msg),
		 "this Idempotency-Key was used for event %lld with another request body; a retry must send the "
		 "same body, a new event a new key",
		 (long long)id);
	conn_refuse(it->c, 422, "idempotency_key_reused", msg, it->is_mercure ? &it->fields : NULL);
}

/* Answer the item's request with its CORS headers (and a Mercure
 * update's Link). */
static void answer(struct publish_item *it, int status, const char *type, const char *body, size_t len)
{
	struct http_head h;
	http_head_response(&h, status, type, len, it->keep_alive);
	http_head_append(&h, &it->fields);
	conn_respond(it->c, &h, body, len);
	http_head_free(&h);
}

/* A Mercure update stored as event id: 200 text/plain with its id. */
static void answer_mercure(struct publish_queue *q, struct publish_item *it, int64_t id)
{
	char made[MERCURE_LOG_ID_LEN + 1];
	const char *mid = it->mercure_id;
	if (!mid) {
		mercure_log_id(id, made);
		mid = made;
	}
	metrics_observe(&q->m->publish_seconds, clock_mono_ns() - it->started_ns);
	answer(it, 200, "text/plain; charset=utf-8", mid, strlen(mid));
}

/* Answer the k oldest items (201 with res[i].id when res is given, or 422
 * for a key reused with another body; else status with cause and
 * message); the rest move up and keep their order. */
static void answer_oldest(struct publish_queue *q, size_t k, int status, const char *cause, const char *message,
			  const struct store_appended *res)
{
	for (size_t i = 0; i < k; i++) {
		struct publish_item *it = &q->items[i];
		if (res && res[i].outcome == STORE_KEY_CONFLICT) {
			answer_conflict(it, res[i].id);
		} else if (res && it->is_mercure) {
			if (it->mercure_id && res[i].outcome == STORE_STORED && res[i].earlier)
				log_warn("mercure: update id %s already names event %lld, which keeps it (the earliest "
					 "wins): a resume from it starts after that event; this update is event %lld",
					 it->mercure_id, (long long)res[i].earlier, (long long)res[i].id);
			if (it->c)
				answer_mercure(q, it, res[i].id);
		} else if (it->c) {
			if (res) {
				/* A replay is answered as the original was. */
				char body[64];
				int n = snprintf(body, sizeof(body), "{\"id\":%lld}\n", (long long)res[i].id);
				metrics_observe(&q->m->publish_seconds, clock_mono_ns() - it->started_ns);
				answer(it, 201, "application/json", body, (size_t)n);
			} else {
				refuse_publish(it->c, status, cause, message, it->is_mercure ? &it->fields : NULL);
			}
		}
		item_free(it);
	}
	memmove(q->items, q->items + k, (q->n - k) * sizeof(*q->items));
	q->n -= k;
}

/* Whether the event log is on Redis (redis_url, or found through
 * redis_sentinels), for the words of the log lines. */
static bool on_redis(const struct publish_queue *q)
{
	return strcmp(store_kind(q->st), "redis") == 0;
}

/* The 503 message for a store failure that ends without herald's help, or
 * NULL for one that may not (answered 500). */
static const char *fault_cause(int r)
{
	switch (r) {
	case -EBUSY:
		return "the database is locked by another writer";
	case -EROFS:
		return "the database is read-only";
	case -ENOSPC:
		return "the disk holding the database is full";
	case -ENOTCONN:
		return "the event log (Redis) is unreachable";
	default:
		return NULL;
	}
}

/* Refuse the n oldest waiting publishes with 503 for store failure r; the
 * rest keep their place. The first refusal of an episode is logged, not
 * every one: a full disk may last hours under steady publishing. */
static void refuse_oldest(struct publish_queue *q, size_t n, int r)
{
	const char *cause = fault_cause(r);
	if (q->fault != r) {
		if (!q->fault) {
			q->fault_since = loop_now(q->lp);
			q->fault_refused = 0;
		}
		q->fault = r;
		const char *where = on_redis(q) ? (q->cfg->redis_url[0] ? "redis_url" : "redis_sentinels") : q->cfg->db;
		if (r == -EBUSY)
			log_warn("publish: %s (%s); publishes are answered 503 after waiting %d ms for it", cause,
				 where, BUSY_GIVE_UP_MS);
		else
			log_warn("publish: %s (%s); publishes are answered 503 until that ends", cause, where);
	}
	q->fault_refused += n;
	answer_oldest(q, n, 503, "store_unavailable", cause, NULL);
}

/* How many of the oldest waiting publishes have waited BUSY_GIVE_UP_MS for
 * the lock: each gets its own full wait, however long the lock has been
 * held before it came. At shutdown (a single attempt) all of them. */
static size_t busy_expired(const struct publish_queue *q)
{
	if (q->single_attempt)
		return q->n;
	uint64_t now = clock_mono_ns();
	size_t k = 0;
	while (k < q->n && now - q->items[k].started_ns >= (uint64_t)BUSY_GIVE_UP_MS * 1000000u)
		k++;
	return k;
}

static void queue_free(struct publish_queue *q);

/* The store's answer for the batch of the q->committing oldest items. */
static void committed(void *arg, int r, const struct store_appended *res)
{
	struct publish_queue *q = arg;
	size_t k = q->committing;
	q->committing = 0;
	metrics_observe(&q->m->commit_seconds, clock_mono_ns() - q->commit_t0);
	if (q->closed) {
		/* Shut down meanwhile: the clients are gone. */
		answer_oldest(q, q->n, 503, "shutting_down", "the server is shutting down", NULL);
		queue_free(q);
		return;
	}
	if (r == -EBUSY) {
		/* Another process holds the write lock: try again shortly,
		 * without blocking the loop, for a bounded time. */
		q->m->store_busy++;
		if (!q->busy_since)
			q->busy_since = loop_now(q->lp);
		size_t expired = busy_expired(q);
		if (expired)
			refuse_oldest(q, expired, r);
		if (q->n) {
			if (!q->single_attempt)
				loop_timer_start(q->lp, &q->retry, STORE_BUSY_RETRY_MS, commit, q);
			return;
		}
	} else if (fault_cause(r)) {
		/* Read-only, full or unreachable: waiting a moment would not
		 * help, and the client's Retry-After brings the publish back. */
		refuse_oldest(q, k, r);
	} else if (r < 0) {
		answer_oldest(q, k, 500, "store_error", "the event could not be stored", NULL);
	} else {
		for (size_t i = 0; i < k; i++) {
			q->m->events_published += res[i].outcome == STORE_STORED;
			q->m->publish_replays += res[i].outcome == STORE_REPLAYED;
		}
		q->m->group_commits++;
		answer_oldest(q, k, 0, NULL, NULL, res);
		hub_poll(q->hub);
		if (q->fault) {
			log_notice("publish: %s takes writes again; %zu publishes were refused in %.1f s",
				   on_redis(q) ? "the event log (Redis)" : "the database", q->fault_refused,
				   (double)(loop_now(q->lp) - q->fault_since) / 1000.0);
			q->fault = 0;
		}
	}
	q->busy_since = 0;
	/* Publishes that came while this batch was out form the next one. */
	if (q->n && !q->single_attempt)
		schedule(q);
}

static void commit(void *arg)
{
	struct publish_queue *q = arg;
	q->scheduled = false;
	if (q->n == 0 || q->committing)
		return; /* committed() schedules the next batch */
	struct store_new_event *evs = xmalloc(q->n * sizeof(*evs));
	for (size_t i = 0; i < q->n; i++)
		evs[i] = (struct store_new_event){ q->items[i].type,       q->items[i].topic,
						   q->items[i].data,       q->items[i].data_len,
						   q->items[i].public,     q->items[i].idem_publisher,
						   q->items[i].idem_key,   q->items[i].idem_hash,
						   q->items[i].mercure_id, q->items[i].mercure,
						   q->items[i].mercure_len };
	q->committing = q->n;
	q->commit_t0 = clock_mono_ns();
	store_append(q->st, evs, q->n, committed, q); /* may answer before it returns */
	free(evs);
}

static void queue_free(struct publish_queue *q)
{
	free(q->items);
	free(q);
}

void publish_free(struct publish_queue *q)
{
	if (!q)
		return;
	loop_timer_stop(q->lp, &q->retry);
	q->single_attempt = true;
	if (q->n && !q->committing)
		commit(q); /* answered at once by a store that answers at once */
	if (q->committing) {
		/* An append is out (Redis): its answer, which store_close
		 * gives at the latest, frees the queue. */
		q->closed = true;
		return;
	}
	if (q->n)
		answer_oldest(q, q->n, 503, "shutting_down", "the server is shutting down", NULL);
	queue_free(q);
}
