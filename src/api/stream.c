/* SPDX-License-Identifier: BSD-2-Clause */
/* stream.c: opening Server-Sent Events streams: the request's parameters,
 * the caps (asked of admission), read rights, the head, and the connection
 * handed to the hub as the reader's sink; each open stream's record (its
 * reader and its admission ticket). */
#include "api/stream.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/addr.h"
#include "api/admission.h"
#include "api/auth_hook.h"
#include "api/namespace_admit.h"
#include "hub/frame.h"
#include "presence/presence.h"
#include "common/text.h"
#include "core/topic.h"
#include "common/util.h"

/* The handler's state (stream.h). */
struct streams {
	struct hub *hub;
	const struct config *cfg;
	struct metrics *m;
	struct admission *admission;   /* the caps' counts: owned (streams_new, streams_free) */
	struct topic_caps *topic_caps; /* the namespaces' max_readers counts: owned */
	const struct cors *cors;       /* allow_origin, parsed once per load */
	struct jwt_verifier *jwt;      /* signed tokens, or NULL: lent by the server at start and reload */
	struct presence *presence;     /* who reads what, or NULL: lent by the server (it owns it) */
	struct auth_hook *hook;        /* auth_request's questions and cache: owned, once the server lends a client */
	int64_t max_readers;           /* streams open at once (in a group, the group's); 0: none */
	int64_t max_sockets;           /* descriptors its readers may hold here (from the open-file limit) */
	size_t socket_readers;         /* open streams on a socket of their own (HTTP/1.1) */
	size_t (*http2_sockets)(void *arg); /* the HTTP/2 connections open here, or NULL */
	void *http2_sockets_arg;
	struct http_head head;   /* the shared head (with CORS * when so set): owned */
	struct chunk *head_text; /* head and the opening frame as HTTP/1.1 text, shared by every open: owned */
};

/* Parse a decimal event id in 0..INT64_MAX; -1 if malformed or too large. */
static int64_t parse_id(const char *p, size_t n)
{
	if (n == 0 || n > 19)
		return -1;
	int64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return -1;
		int d = p[i] - '0';
		if (v > (INT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	return v;
}

/* The query parameters a stream takes. */
static const char *const known_params[] = { "topic", "last_event_id", "envelope", "token" };

/* The first parameter of query not in known_params, as a refusal's reason
 * in why; NULL when every one is known. Empty parts ("a=1&&b=2", a
 * trailing "&") are no parameter. */
static const char *unknown_param(struct http_slice query, char *why, size_t len)
{
	size_t pos = 0;
	struct http_slice name, value;
	while (http_query_next(query, &pos, &name, &value)) {
		const char *q = name.p;
		size_t n = name.n;
		bool known = n == 0;
		for (size_t i = 0; i < sizeof(known_params) / sizeof(known_params[0]) && !known; i++)
			known = strlen(known_params[i]) == n && memcmp(known_params[i], q, n) == 0;
		if (!known) {
			char shown[44];
			snprintf(why, len,
				 "unknown query parameter \"%s\" (a stream takes topic, last_event_id, envelope, "
				 "token)",
				 text_shown(q, n, shown, sizeof(shown)));
			return why;
		}
	}
	return NULL;
}

void stream_params_free(struct stream_params *p)
{
	for (size_t i = 0; i < p->ntopics; i++)
		free(p->topics[i]);
	free(p->token);
	memset(p, 0, sizeof(*p));
	p->resume = -1;
}

/* Fill p's topic list from "a,b" (already percent-decoded). */
static const char *parse_topics(struct stream_params *p, const char *s)
{
	while (*s) {
		const char *e = strchr(s, ',');
		size_t n = e ? (size_t)(e - s) : strlen(s);
		if (n == 0 || n > 128)
			return "a topic in the topic parameter is empty or longer than 128 characters";
		if (!topic_pattern_valid(s, n))
			return "a topic may hold only letters, digits and _ . : / -, or end in /* for a subtree, or be "
			       "*";
		if (p->ntopics == READER_MAX_TOPICS)
			return "more than 16 topics";
		p->topics[p->ntopics++] = xstrndup(s, n);
		s += n;
		if (*s == ',')
			s++;
	}
	return NULL;
}

/* Percent-decode v into a new string (*out, owned by the caller); NULL or
 * the reason it is malformed. */
static const char *decode_param(struct http_slice v, const char *name, char **out)
{
	*out = http_percent_decode_dup(v, NULL);
	return *out ? NULL : name;
}

const char *stream_params_parse(const struct http_request *req, struct stream_params *p)
{
	struct http_slice v;
	const char *why = NULL;
	char *dec;

	memset(p, 0, sizeof(*p));
	p->resume = -1;
	if (unknown_param(req->query, p->why, sizeof(p->why)))
		return p->why; /* nothing allocated yet */
	if (http_query_get(req->query, "topic", &v)) {
		why = decode_param(v, "the topic parameter is not valid percent-encoding", &dec);
		if (!why) {
			why = parse_topics(p, dec);
			free(dec);
		}
		if (why)
			goto bad;
	}
	if (http_query_get(req->query, "last_event_id", &v)) {
		p->resume = parse_id(v.p, v.n);
		if (p->resume < 0) {
			why = "last_event_id must be a whole number from 0 to 9223372036854775807";
			goto bad;
		}
	}
	/* The header is what EventSource sends on reconnect, with the newest
	 * id; it wins over an id kept in the URL. */
	const struct http_header *h = http_header_get(req, "Last-Event-ID");
	if (h && h->value.n) {
		p->resume = parse_id(h->value.p, h->value.n);
		if (p->resume < 0) {
			why = "Last-Event-ID must be a whole number from 0 to 9223372036854775807";
			goto bad;
		}
	}
	if (http_query_get(req->query, "envelope", &v)) {
		if (v.n != 1 || (v.p[0] != '0' && v.p[0] != '1')) {
			why = "envelope must be 0 or 1";
			goto bad;
		}
		p->envelope = v.p[0] == '1';
	}
	if (http_bearer_token(req, &v)) {
		p->token = xstrndup(v.p, v.n);
	} else if (http_query_get(req->query, "token", &v)) {
		why = decode_param(v, "the token parameter is not valid percent-encoding", &p->token);
		if (why)
			goto bad;
		p->token_in_query = true;
	}
	return NULL;
bad:
	stream_params_free(p);
	return why;
}

/* A request from a listed origin gets a head of its own naming that origin
 * (and allowing credentials), made in h: returns true. Otherwise false:
 * the shared head, which says "*" when allow_origin is "*". */
static bool cors_head(const struct streams *s, const char *origin, size_t origin_len, struct http_head *h)
{
	if (!origin || !cors_listed(s->cors, origin, origin_len))
		return false;
	frame_stream_head(h);
	cors_fields(s->cors, origin, origin_len, h);
	return true;
}

/* Queue the stream's head (h) and its opening frame; the shared head goes
 * as the text made once (no allocation per open: a thousand opens would
 * otherwise leave a thousand freed small blocks among the readers'). */
static void send_head(const struct streams *s, struct conn *c, const struct http_head *h)
{
	char open[64];
	size_t n = frame_stream_open(s->cfg->retry_ms, open, sizeof(open));
	if (h == &s->head)
		conn_send_head_made(c, h, s->head_text, open, n);
	else
		conn_send_head(c, h, open, n);
}

/* The delay a refused browser waits, on average (the Retry-After of the
 * 429 and 503 that other clients get). */
#define REFUSAL_RETRY_MS 5000

/* Whether the client reads an event stream (EventSource sends this). */
static bool accepts_event_stream(const struct http_request *req)
{
	const struct http_header *a = http_header_get(req, "Accept");
	if (!a)
		return false;
	for (size_t i = 0; i + 17 <= a->value.n; i++)
		if (strncasecmp(a->value.p + i, "text/event-stream", 17) == 0)
			return true;
	return false;
}

/* The refusal as an event stream, with the CORS headers an allowed origin
 * needs to read it: its head in h, its body returned (frame_refusal). */
static char *cors_refusal(const struct streams *s, const char *origin, size_t origin_len, struct http_head *h,
			  int status, int64_t retry, int64_t id, const char *cause, size_t *len)
{
	char *body = frame_refusal(h, status, retry, id, cause, len);
	if (origin)
		cors_fields(s->cors, origin, origin_len, h);
	return body;
}

/* The connection as a reader's sink. */
static void sink_send(void *sink, struct chunk *ch, int64_t id, bool droppable)
{
	if (droppable)
		conn_enqueue_frame(sink, ch, id);
	else
		conn_enqueue(sink, ch, id);
}

static int64_t sink_drop(void *sink)
{
	return conn_drop_queue(sink);
}

static void sink_set_resume_point(void *sink, int64_t id)
{
	conn_set_resume_point(sink, id);
}

static size_t sink_queued(const void *sink)
{
	return conn_queued_bytes(sink);
}

static uint64_t sink_idle_ms(const void *sink)
{
	return conn_idle_ms(sink);
}

static void sink_end(void *sink)
{
	conn_end_after_flush(sink);
}

static void sink_close(void *sink)
{
	conn_close(sink, NULL);
}

static const struct hub_sink_ops conn_sink = {
	sink_send, sink_drop, sink_set_resume_point, sink_queued, sink_idle_ms, sink_end, sink_close,
};

/* One open stream: its reader, which the hub owns, the place admission
 * counted for it, and its registration with presence. Allocated when the
 * stream opens, freed when its connection closes. */
/* One per open stream: 40 bytes, malloc's 48 (the admission and the
 * presence are the owner's, set once before any stream opens). */
struct stream {
	struct reader *r;
	struct admission_ticket *ticket;
	struct presence_reg *reg;
	struct streams *owner;
	bool on_socket; /* counted in owner->socket_readers */
	bool held;      /* places kept under its address in owner->topic_caps */
};

/* What the connection tells its stream. */
static void reader_drained(struct conn *c, void *data)
{
	(void)c;
	struct stream *st = data;
	hub_reader_drained(st->r);
}

static void reader_closed(struct conn *c, void *data)
{
	(void)c;
	struct stream *st = data;
	hub_reader_closed(st->r);
	if (st->on_socket)
		st->owner->socket_readers--;
	admission_release(st->owner->admission, st->ticket);
	presence_unregister(st->owner->presence, st->reg);
	if (st->held)
		namespace_release_owner(st->owner->topic_caps, st);
	free(st);
}

static const struct conn_user reader_user = { reader_drained, reader_closed };

/* Count st among the readers holding a descriptor when c has a socket. */
static void stream_count_socket(struct streams *s, struct stream *st, struct conn *c)
{
	st->owner = s;
	st->on_socket = conn_has_socket(c);
	if (st->on_socket)
		s->socket_readers++;
}

struct streams *streams_new(struct hub *hub, const struct config *cfg, const struct cors *cors, struct metrics *m)
{
	struct streams *s = xcalloc(1, sizeof(*s));
	s->hub = hub;
	s->cfg = cfg;
	s->cors = cors;
	s->m = m;
	s->admission = admission_new();
	s->topic_caps = topic_caps_new();
	streams_reconfigure(s);
	return s;
}

void streams_reconfigure(struct streams *s)
{
	http_head_free(&s->head);
	frame_stream_head(&s->head);
	if (s->cors->any)
		http_head_add(&s->head, "Access-Control-Allow-Origin", "*");
	/* Streams still sending the old text hold their own references. */
	chunk_unref(s->head_text);
	char open[64];
	size_t n = frame_stream_open(s->cfg->retry_ms, open, sizeof(open));
	s->head_text = http_head_text(&s->head, open, n);
}

void streams_free(struct streams *s)
{
	if (!s)
		return;
	http_head_free(&s->head);
	chunk_unref(s->head_text);
	admission_free(s->admission); /* every stream has closed */
	auth_hook_free(s->hook);      /* every open waiting for it has closed */
	topic_caps_free(s->topic_caps);
	free(s);
}

void streams_set_jwt(struct streams *s, struct jwt_verifier *jwt)
{
	s->jwt = jwt;
}

struct jwt_verifier *streams_jwt(const struct streams *s)
{
	return s->jwt;
}

void streams_set_http(struct streams *s, struct loop *lp, struct http_client *http)
{
	if (!s->hook && http)
		s->hook = auth_hook_new(lp, http, s->m);
}

void streams_set_presence(struct streams *s, struct presence *presence)
{
	s->presence = presence;
}

struct presence *streams_presence(const struct streams *s)
{
	return s->presence;
}

void streams_set_limits(struct streams *s, int64_t max_readers, int64_t max_sockets)
{
	s->max_readers = max_readers;
	s->max_sockets = max_sockets;
}

int64_t streams_max_readers(const struct streams *s)
{
	return s->max_readers;
}

int64_t streams_max_sockets(const struct streams *s)
{
	return s->max_sockets;
}

void streams_set_http2_sockets(struct streams *s, size_t (*fn)(void *arg), void *arg)
{
	s->http2_sockets = fn;
	s->http2_sockets_arg = arg;
}

/* Who the reader is: nobody (public events), the read token (every private
 * event), or a signed token's rights (from the verifier's cache when the
 * token verified before). Returns 0, or the refusal status with *why (and
 * *challenge, a WWW-Authenticate value) set. */
static int authorize(const struct streams *s, const struct stream_params *p, struct jwt_rights *rights,
		     bool *see_private, const char **why, const char **challenge)
{
	const struct config *cfg = s->cfg;
	*see_private = false;
	*challenge = NULL;
	if (!p->token)
		return 0;
	struct http_slice tok = { p->token, strlen(p->token) };
	if (cfg->read_token[0] && http_token_equal(tok, cfg->read_token)) {
		*see_private = true;
		return 0;
	}
	if (s->jwt) {
		/* Never a silent downgrade to public: a token that does not
		 * verify is refused with its cause. */
		struct jwt_cost cost;
		int e = jwt_check(s->jwt, tok.p, tok.n, clock_wall_s(), rights, why, &cost);
		s->m->token_verifications += cost.signature;
		s->m->token_cache_hits += cost.cached;
		if (e != JWT_OK) {
			*challenge = "Bearer error=\"invalid_token\"";
			return 401;
		}
		if (rights->nsubscribe > READER_MAX_GRANTS) {
			*why = "the token grants more than 16 topic patterns to subscribe to";
			return 403;
		}
		/* A reader with a token reads within its rights: every topic
		 * it asks for must be granted. */
		for (size_t i = 0; i < p->ntopics; i++) {
			bool covered = false;
			for (size_t g = 0; g < rights->nsubscribe && !covered; g++)
				covered = topic_pattern_covers(rights->subscribe[g], p->topics[i]);
			if (!covered) {
				*why = "the token does not grant a topic the topic parameter names";
				return 403;
			}
		}
		return 0;
	}
	if (cfg->read_token[0]) {
		*why = "the read token is not valid";
		return 403;
	}
	return 0; /* no token is used here: public events, as without one */
}

/* A place for one more stream on c: 0 with *ticket set, or the refusal
 * (503 shutting down, at the open-file limit or at max_readers, 429 past
 * per_address_limit) with *cause and *why. */
static int admit(struct streams *s, struct conn *c, struct admission_ticket **ticket, const char **cause,
		 const char **why)
{
	const struct config *cfg = s->cfg;
	*ticket = NULL;
	if (conn_draining(c)) {
		*cause = "shutting_down";
		*why = "the server is shutting down";
		return 503;
	}
	/* The open-file limit caps the descriptors readers hold: one for each
	 * HTTP/1.1 reader, one for each HTTP/2 connection, none for an HTTP/2
	 * stream, which it therefore never refuses. */
	size_t held = s->socket_readers + (s->http2_sockets ? s->http2_sockets(s->http2_sockets_arg) : 0);
	if (conn_has_socket(c) && s->max_sockets > 0 && (int64_t)held >= s->max_sockets) {
		*cause = "open_file_limit";
		*why = "the server is at its reader capacity (the open-file limit)";
		return 503;
	}
	char key[64];
	addr_count_key(conn_client(c), (int)cfg->ipv6_prefix, key, sizeof(key));
	struct admission_caps caps = { .max_readers = s->max_readers, .per_address_limit = cfg->per_address_limit };
	enum admission_refusal refused = admission_admit(s->admission, key, &caps, hub_readers(s->hub), ticket);
	if (refused == ADMISSION_FULL) {
		*cause = "max_readers";
		*why = "the server is at its reader capacity (max_readers)";
		return 503;
	}
	if (refused == ADMISSION_ADDRESS_FULL) {
		*cause = "per_address_limit";
		*why = "too many open streams from this address (per_address_limit)";
		return 429;
	}
	return 0;
}

struct admission_ticket *stream_admit(struct streams *s, struct conn *c, const struct http_head *extra)
{
	struct admission_ticket *ticket = NULL;
	const char *cause = NULL, *why = NULL;
	int status = admit(s, c, &ticket, &cause, &why);
	if (status) {
		struct http_head fields;
		http_head_init(&fields, 0);
		http_head_add(&fields, "Retry-After", "5");
		http_head_append(&fields, extra);
		conn_refuse(c, status, cause, why, &fields);
		http_head_free(&fields);
		return NULL;
	}
	return ticket;
}

void stream_release(struct streams *s, struct admission_ticket *ticket)
{
	admission_release(s->admission, ticket);
}

void stream_open_spec(struct streams *s, struct conn *c, struct admission_ticket *ticket, struct reader_spec *spec,
		      const struct http_head *extra)
{
	struct http_head head;
	frame_stream_head(&head);
	http_head_append(&head, extra);
	conn_count_response(c, 200);
	conn_become_stream(c);
	send_head(s, c, &head);
	http_head_free(&head);
	spec->client = conn_client(c);
	spec->rotate_after_ms = s->cfg->rotate_after_ms;
	struct stream *st = xmalloc(sizeof(*st));
	*st = (struct stream){ .r = hub_open(s->hub, spec, &conn_sink, c), .ticket = ticket };
	stream_count_socket(s, st, c);
	conn_attach(c, &reader_user, st);
}

/* A stream herald's own checks have let through, on its way to open:
 * what the rest of the open needs once the request's buffer is gone. On
 * the stack, or on the heap while it waits for auth_request's answer
 * (then origin is its own copy). */
struct opening {
	struct streams *s;
	struct conn *c;
	struct stream_params p;
	struct jwt_rights rights;
	struct admission_ticket *ticket;
	struct topic_hold *hold; /* the namespaces' places (namespace_admit), or NULL */
	bool see_private;
	bool event_stream;  /* the client reads an event stream (Accept) */
	const char *origin; /* the request's Origin, or NULL */
	size_t origin_len;
	char *origin_own; /* origin's copy while waiting */
	char *subject;    /* named by auth_request (owned), or NULL */
	struct auth_wait *wait;
};

static void opening_clear(struct opening *op)
{
	stream_params_free(&op->p);
	jwt_rights_free(&op->rights);
	free(op->origin_own);
	free(op->subject);
	op->origin_own = op->subject = NULL;
}

/* Refuse op's stream with status (its place given back), and let go of
 * what op holds. */
static void opening_refuse(struct opening *op, int status, const char *cause, const char *why, const char *challenge)
{
	struct streams *s = op->s;
	struct conn *c = op->c;
	admission_release(s->admission, op->ticket);
	op->ticket = NULL;
	namespace_release(s->topic_caps, op->hold);
	op->hold = NULL;
	if (status >= 429 && op->event_stream) {
		/* An EventSource gives up for good on any status but 200: a
		 * capacity refusal it can survive is a 200 stream that ends at
		 * once, with a jittered retry: (refused browsers do not all come
		 * back together) and the id to resume from (its own, or the
		 * newest, so a page refused on its first request misses nothing
		 * once a place frees). Authorization stays 401/403. */
		int64_t id = op->p.resume >= 0 ? op->p.resume : hub_high_water(s->hub);
		uint64_t retry = REFUSAL_RETRY_MS / 2 + random_below(REFUSAL_RETRY_MS);
		struct http_head head;
		size_t len;
		char *body = cors_refusal(s, op->origin, op->origin_len, &head, status, (int64_t)retry, id, why, &len);
		conn_refuse_as(c, status, cause, why, &head, body, len);
		http_head_free(&head);
		free(body);
	} else if (challenge) {
		conn_refuse_with(c, status, cause, why, "WWW-Authenticate", challenge);
	} else {
		conn_refuse_with(c, status, cause, why, "Retry-After", status >= 429 ? "5" : NULL);
	}
	opening_clear(op);
}

/* Open op's stream: the head, presence, the hub's reader; op's topics and
 * grants go to the hub, the rest is let go of. */
static void opening_open(struct opening *op)
{
	struct streams *s = op->s;
	struct conn *c = op->c;
	const struct config *cfg = s->cfg;
	struct http_head own;
	bool listed = cors_head(s, op->origin, op->origin_len, &own);
	conn_count_response(c, 200);
	conn_become_stream(c);
	send_head(s, c, listed ? &own : &s->head);
	if (listed)
		http_head_free(&own);
	struct reader_spec spec = { .resume = op->p.resume,
				    .see_private = op->see_private,
				    .ntopics = op->p.ntopics,
				    .ngrants = op->rights.nsubscribe,
				    .grants = op->rights.subscribe,
				    .expires_at = op->rights.exp ? op->rights.exp + cfg->jwt_leeway_s : 0,
				    .format = op->p.envelope ? FRAME_ENVELOPE : FRAME_SSE,
				    .client = conn_client(c),
				    .rotate_after_ms = cfg->rotate_after_ms };
	/* Reduced here (the hub's own reduction then keeps them), so that
	 * presence counts each stream once per topic. */
	spec.ntopics = topic_patterns_reduce(op->p.topics, op->p.ntopics);
	memcpy(spec.topics, op->p.topics, sizeof(spec.topics));
	struct presence_reg *reg = NULL;
	if (s->presence)
		reg = presence_register(s->presence, spec.topics, spec.ntopics,
					op->subject ? op->subject : op->rights.sub);
	op->p.ntopics = 0; /* the hub takes the topics and the grants */
	op->rights.subscribe = NULL;
	op->rights.nsubscribe = 0;
	struct stream *st = xmalloc(sizeof(*st));
	*st = (struct stream){
		.r = hub_open(s->hub, &spec, &conn_sink, c), .ticket = op->ticket, .reg = reg, .held = op->hold != NULL
	};
	if (op->hold)
		namespace_hold_keep(s->topic_caps, op->hold, st);
	op->ticket = NULL;
	op->hold = NULL;
	opening_clear(op);
	stream_count_socket(s, st, c);
	conn_attach(c, &reader_user, st);
}

/* auth_request's answer for a waiting (heap) opening. */
static void opening_answered(void *arg, const struct auth_hook_answer *a)
{
	struct opening *op = arg;
	if (op->wait) {
		op->wait = NULL;
		conn_attach(op->c, NULL, NULL);
	}
	if (a->status == 200 && conn_draining(op->c)) {
		/* The server began to stop while the open waited. */
		opening_refuse(op, 503, "shutting_down", "the server is shutting down", NULL);
	} else if (a->status == 200) {
		if (a->narrowed) {
			for (size_t i = 0; i < op->p.ntopics; i++)
				free(op->p.topics[i]);
			op->p.ntopics = 0;
			for (size_t i = 0; i < a->ntopics && i < READER_MAX_TOPICS; i++)
				op->p.topics[op->p.ntopics++] = xstrdup(a->topics[i]);
		}
		if (a->subject)
			op->subject = xstrdup(a->subject);
		opening_open(op);
	} else if (a->status == 401 || a->status == 403) {
		opening_refuse(op, a->status, "auth_request_refused", a->why, NULL);
	} else {
		opening_refuse(op, a->status, a->status == 502 ? "auth_request_bad_answer" : "auth_request_unavailable",
			       a->why, NULL);
	}
	free(op);
}

/* The reader went while its open waited for auth_request. */
static void opening_closed(struct conn *c, void *data)
{
	(void)c;
	struct opening *op = data;
	auth_hook_cancel(op->wait);
	admission_release(op->s->admission, op->ticket);
	namespace_release(op->s->topic_caps, op->hold);
	opening_clear(op);
	free(op);
}

static const struct conn_user opening_user = { NULL, opening_closed };

/* Ask auth_request at url whether the stream op describes (on the stack,
 * its request still readable as req) may open: the opening moves to the
 * heap and is answered now (a cached answer) or once the application
 * answers, the connection waiting meanwhile. */
static void opening_ask(struct opening *stack, const struct http_request *req, const char *url)
{
	struct streams *s = stack->s;
	struct opening *op = xmalloc(sizeof(*op));
	*op = *stack;
	if (op->origin) {
		op->origin_own = xstrndup(op->origin, op->origin_len);
		op->origin = op->origin_own;
	}
	const struct http_header *ck = http_header_get(req, "Cookie");
	const struct http_header *au = http_header_get(req, "Authorization");
	struct auth_hook_question q = { .url = url,
					.timeout_ms = (uint64_t)s->cfg->auth_timeout_ms,
					.max_waiting = (size_t)s->cfg->auth_max_waiting,
					.cookie = ck ? ck->value.p : NULL,
					.cookie_len = ck ? ck->value.n : 0,
					.authorization = au ? au->value.p : NULL,
					.authorization_len = au ? au->value.n : 0,
					.topics = op->p.topics,
					.ntopics = op->p.ntopics,
					.last_event_id = op->p.resume };
	struct conn *c = op->c;
	struct auth_wait *w = auth_hook_ask(s->hook, &q, opening_answered, op);
	if (!w)
		return; /* answered already (op is gone) */
	op->wait = w;
	conn_attach(c, &opening_user, op);
	conn_wait_hangup(c);
}

void stream_open(struct streams *s, struct conn *c, const struct http_request *req)
{
	const struct config *cfg = s->cfg;
	struct opening op = { .s = s, .c = c };
	const char *why = stream_params_parse(req, &op.p), *challenge = NULL;
	if (why) {
		conn_refuse(c, 400, "bad_parameter", why, NULL);
		return;
	}
	const struct http_header *origin = http_header_get(req, "Origin");
	if (origin) {
		op.origin = origin->value.p;
		op.origin_len = origin->value.n;
	}
	op.event_stream = accepts_event_stream(req);
	/* EventSource cannot set headers but sends cookies: a token cookie
	 * comes before one in the URL (which proxies may log). */
	bool from_cookie = false;
	struct http_slice ck;
	if ((!op.p.token || op.p.token_in_query) && cfg->jwt_cookie[0] && http_cookie_get(req, cfg->jwt_cookie, &ck)) {
		free(op.p.token);
		op.p.token = xstrndup(ck.p, ck.n);
		op.p.token_in_query = false;
		from_cookie = true;
	}
	/* Admission comes before the token: a request the caps refuse costs no
	 * signature check, so forged tokens sent past the caps cost what
	 * requests without a token do. When both would refuse, the cap's
	 * answer is given; the token is judged once there is room. */
	const char *cause = NULL;
	int status = admit(s, c, &op.ticket, &cause, &why);
	char ns_why[400];
	if (!status) {
		status = authorize(s, &op.p, &op.rights, &op.see_private, &why, &challenge);
		cause = status == 401 ? "invalid_token" : "forbidden";
		if (!status && from_cookie && origin && !cors_listed(s->cors, origin->value.p, origin->value.n)) {
			/* A cookie goes with every request the browser makes,
			 * whoever made the page: only listed origins may use it. */
			status = 403;
			cause = "cookie_origin";
			why = "a stream authorized by cookie is refused from an origin allow_origin does not list";
		}
		if (!status) {
			/* The namespaces' rules, on the reduced patterns. */
			op.p.ntopics = topic_patterns_reduce(op.p.topics, op.p.ntopics);
			bool tokened = op.p.token && (op.see_private || s->jwt);
			status = namespace_admit(s->topic_caps, cfg, op.p.topics, op.p.ntopics, tokened, &op.hold,
						 &cause, ns_why, sizeof(ns_why));
			if (status) {
				why = ns_why;
				if (status == 401)
					challenge = "Bearer";
			}
		}
	}
	if (status) {
		opening_refuse(&op, status, cause, why, challenge);
		return;
	}
	/* herald's own checks first, so that what they refuse costs the
	 * application nothing; then the application's say, if it has one. */
	bool mixed = false;
	const char *url = s->hook ? auth_hook_url(cfg, op.p.topics, op.p.ntopics, &mixed) : NULL;
	if (mixed) {
		opening_refuse(
			&op, 400, "auth_request_mixed",
			"the topics reach namespaces with different auth_request hooks: open a stream per namespace",
			NULL);
		return;
	}
	if (url)
		opening_ask(&op, req, url);
	else
		opening_open(&op);
}
