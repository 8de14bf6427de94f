/* stream.c: opening Server-Sent Events streams. */
#include "stream.h"

#include <ctype.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "api.h"
#include "frame.h"
#include "hub.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

/* Per-address open-stream counts: a chained hash table keyed by address. */
#define COUNT_BUCKETS 4096

struct addr_count {
	struct addr_count *next;
	size_t n;
	char addr[64];
};

struct stream_counts {
	struct addr_count *b[COUNT_BUCKETS];
};

static unsigned hash_str(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % COUNT_BUCKETS;
}

static struct addr_count **count_slot(struct server *srv, const char *client)
{
	if (!srv->stream_counts)
		srv->stream_counts = xcalloc(1, sizeof(struct stream_counts));
	struct addr_count **pp = &srv->stream_counts->b[hash_str(client)];
	while (*pp && strcmp((*pp)->addr, client) != 0)
		pp = &(*pp)->next;
	return pp;
}

static size_t count_of(struct server *srv, const char *client)
{
	struct addr_count **pp = count_slot(srv, client);
	return *pp ? (*pp)->n : 0;
}

static void count_add(struct server *srv, const char *client)
{
	struct addr_count **pp = count_slot(srv, client);
	if (!*pp) {
		*pp = xcalloc(1, sizeof(**pp));
		snprintf((*pp)->addr, sizeof((*pp)->addr), "%s", client);
	}
	(*pp)->n++;
}

static void count_del(struct server *srv, const char *client)
{
	struct addr_count **pp = count_slot(srv, client);
	if (*pp && --(*pp)->n == 0) {
		struct addr_count *dead = *pp;
		*pp = dead->next;
		free(dead);
	}
}

void stream_shutdown(struct server *srv)
{
	if (!srv->stream_counts)
		return;
	for (size_t i = 0; i < COUNT_BUCKETS; i++)
		while (srv->stream_counts->b[i]) {
			struct addr_count *a = srv->stream_counts->b[i];
			srv->stream_counts->b[i] = a->next;
			free(a);
		}
	free(srv->stream_counts);
	srv->stream_counts = NULL;
}

static bool topic_char(char ch)
{
	return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == ':' || ch == '/' || ch == '-';
}

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
		for (size_t i = 0; i < n; i++)
			if (!topic_char(s[i]))
				return "a topic may hold only letters, digits and _ . : / -";
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
	char *dec = xmalloc(v.n + 1);
	long n = http_percent_decode(v, dec);
	if (n < 0) {
		free(dec);
		*out = NULL;
		return name;
	}
	dec[n] = '\0';
	*out = dec;
	return NULL;
}

const char *stream_params_parse(const struct http_request *req, struct stream_params *p)
{
	struct http_slice v;
	const char *why = NULL;
	char *dec;

	memset(p, 0, sizeof(*p));
	p->resume = -1;
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
	if (http_bearer_token(req, &v)) {
		p->token = xstrndup(v.p, v.n);
	} else if (http_query_get(req->query, "token", &v)) {
		why = decode_param(v, "the token parameter is not valid percent-encoding", &p->token);
		if (why)
			goto bad;
	}
	return NULL;
bad:
	stream_params_free(p);
	return why;
}

/* With allow_origin a list of origins, a request whose Origin is on it gets
 * a head of its own naming that origin; otherwise NULL (the shared head). */
static struct chunk *cors_head(struct server *srv, const struct http_request *req)
{
	const char *list = srv->cfg.allow_origin;
	const struct http_header *o = http_header_get(req, "Origin");
	if (!o || !list[0] || strcmp(list, "*") == 0 || o->value.n == 0 || o->value.n > 256)
		return NULL;
	for (const char *p = list; *p;) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, ",");
		size_t len = n;
		while (len && p[len - 1] == ' ')
			len--;
		if (len == o->value.n && memcmp(p, o->value.p, len) == 0) {
			char extra[320];
			snprintf(extra, sizeof(extra), "Access-Control-Allow-Origin: %.*s\r\nVary: Origin\r\n",
				 (int)len, p);
			return frame_stream_head(srv->cfg.retry_ms, extra);
		}
		p += n;
		if (*p == ',')
			p++;
	}
	return NULL;
}

/* A uniformly drawn rotation time: rotate_after with up to 10% jitter
 * either way, so streams opened together do not all reconnect together. */
static uint64_t rotation_due(uint64_t opened_ms, int64_t rotate_after_ms)
{
	uint64_t jitter = (uint64_t)rotate_after_ms / 10;
	return opened_ms + (uint64_t)rotate_after_ms - jitter + random_below(jitter * 2 + 1);
}

void stream_open(struct conn *c, const struct http_request *req)
{
	struct server *srv = c->srv;
	const struct config *cfg = &srv->cfg;
	struct stream_params p;
	const char *why = stream_params_parse(req, &p);
	if (why) {
		conn_refuse(c, 400, why, NULL);
		return;
	}
	bool see_private = false;
	if (cfg->read_token[0] && p.token) {
		if (!api_token_equal((struct http_slice){ p.token, strlen(p.token) }, cfg->read_token)) {
			stream_params_free(&p);
			conn_refuse(c, 403, "the read token is not valid", NULL);
			return;
		}
		see_private = true;
	}
	char key[64];
	addr_count_key(c->client, (int)cfg->ipv6_prefix, key, sizeof(key));
	int status = 0;
	if (srv->draining) {
		status = 503;
		why = "the server is shutting down";
	} else if ((int64_t)hub_readers(&srv->hub) >= srv->max_readers) {
		status = 503;
		why = "the server is at its reader capacity (max_readers)";
	} else if (cfg->per_address_limit > 0 && (int64_t)count_of(srv, key) >= cfg->per_address_limit) {
		status = 429;
		why = "too many open streams from this address (per_address_limit)";
	}
	if (status) {
		stream_params_free(&p);
		conn_refuse(c, status, why, "Retry-After: 5\r\n");
		return;
	}

	struct reader *r = xcalloc(1, sizeof(*r));
	r->see_private = see_private;
	r->ntopics = p.ntopics;
	memcpy(r->topics, p.topics, sizeof(r->topics));
	p.ntopics = 0; /* the topics now belong to r */
	int64_t resume = p.resume;
	stream_params_free(&p);
	snprintf(r->client, sizeof(r->client), "%s", c->client);
	snprintf(r->count_key, sizeof(r->count_key), "%s", key);
	count_add(srv, r->count_key);
	r->c = c;
	r->opened_ms = loop_now(srv->lp);
	if (cfg->rotate_after_ms > 0)
		r->rotate_at = rotation_due(r->opened_ms, cfg->rotate_after_ms);
	struct chunk *head = cors_head(srv, req); /* before req's buffer goes */
	c->reader = r;
	c->state = CONN_STREAMING;
	free(c->rbuf);
	c->rbuf = NULL;
	c->rlen = c->rcap = 0;
	loop_timer_stop(srv->lp, &c->timer);
	conn_count_response(c, 200);
	conn_enqueue(c, head ? head : srv->hub.stream_head, 0);
	chunk_unref(head);
	hub_add(&srv->hub, r, resume);
	conn_update_events(c);
}

void stream_on_drained(struct conn *c)
{
	hub_on_drained(&c->srv->hub, c->reader);
}

void stream_closed(struct conn *c)
{
	struct reader *r = c->reader;
	c->reader = NULL;
	count_del(c->srv, r->count_key);
	hub_remove(&c->srv->hub, r);
	for (size_t i = 0; i < r->ntopics; i++)
		free(r->topics[i]);
	free(r);
}
