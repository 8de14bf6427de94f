/* stream.c: opening Server-Sent Events streams. */
#include "stream.h"

#include <ctype.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

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

size_t stream_count_for(struct server *srv, const char *client)
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

/* Parse a decimal id of at most 18 digits; -1 if malformed. */
static int64_t parse_id(const char *p, size_t n)
{
	if (n == 0 || n > 18)
		return -1;
	int64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)p[i]))
			return -1;
		v = v * 10 + (p[i] - '0');
	}
	return v;
}

static void reader_free(struct reader *r)
{
	for (size_t i = 0; i < r->ntopics; i++)
		free(r->topics[i]);
	free(r);
}

/* Fill r's topic list from "a,b" (already percent-decoded). */
static const char *parse_topics(struct reader *r, const char *s)
{
	const char *p = s;
	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 0 || n > 128)
			return "a topic in the topic parameter is empty or longer than 128 characters";
		for (size_t i = 0; i < n; i++)
			if (!topic_char(p[i]))
				return "a topic may hold only letters, digits and _ . : / -";
		if (r->ntopics == READER_MAX_TOPICS)
			return "more than 16 topics";
		r->topics[r->ntopics++] = xstrndup(p, n);
		p += n;
		if (*p == ',')
			p++;
	}
	return NULL;
}

static bool token_equal(const char *given, size_t n, const char *want)
{
	size_t wn = strlen(want);
	return n == wn && CRYPTO_memcmp(given, want, wn) == 0;
}

/* The bearer token from Authorization, or the token query parameter. */
static bool find_token(const struct http_request *req, struct http_slice *tok)
{
	const struct http_header *h = http_header_get(req, "Authorization");
	if (h && h->value.n > 7 && strncasecmp(h->value.p, "Bearer ", 7) == 0) {
		tok->p = h->value.p + 7;
		tok->n = h->value.n - 7;
		return true;
	}
	return http_query_get(req->query, "token", tok);
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

void stream_open(struct conn *c, const struct http_request *req)
{
	struct server *srv = c->srv;
	const struct config *cfg = &srv->cfg;
	struct reader *r = xcalloc(1, sizeof(*r));
	struct http_slice v;
	int64_t resume = -1;
	const char *why;

	if (http_query_get(req->query, "topic", &v)) {
		char *dec = xmalloc(v.n + 1);
		long n = http_percent_decode(v, dec);
		why = n < 0 ? "the topic parameter is not valid percent-encoding" : NULL;
		if (!why) {
			dec[n] = '\0';
			why = parse_topics(r, dec);
		}
		free(dec);
		if (why)
			goto bad;
	}
	if (http_query_get(req->query, "last_event_id", &v)) {
		resume = parse_id(v.p, v.n);
		if (resume < 0) {
			why = "last_event_id must be a non-negative whole number";
			goto bad;
		}
	}
	/* The header is what EventSource sends on reconnect, with the newest
	 * id; it wins over an id kept in the URL. */
	const struct http_header *h = http_header_get(req, "Last-Event-ID");
	if (h && h->value.n) {
		resume = parse_id(h->value.p, h->value.n);
		if (resume < 0) {
			why = "Last-Event-ID must be a non-negative whole number";
			goto bad;
		}
	}
	struct http_slice tok;
	if (cfg->read_token[0] && find_token(req, &tok)) {
		if (!token_equal(tok.p, tok.n, cfg->read_token)) {
			reader_free(r);
			conn_refuse(c, 403, "the read token is not valid", NULL);
			return;
		}
		r->see_private = true;
	}
	if (srv->draining) {
		reader_free(r);
		conn_refuse(c, 503, "the server is shutting down", "Retry-After: 5\r\n");
		return;
	}
	if ((int64_t)hub_readers(&srv->hub) >= srv->max_readers) {
		reader_free(r);
		conn_refuse(c, 503, "the server is at its reader capacity (max_readers)", "Retry-After: 5\r\n");
		return;
	}
	if (cfg->per_address_limit > 0 && (int64_t)stream_count_for(srv, c->client) >= cfg->per_address_limit) {
		reader_free(r);
		conn_refuse(c, 429, "too many open streams from this address (per_address_limit)",
			    "Retry-After: 5\r\n");
		return;
	}

	snprintf(r->client, sizeof(r->client), "%s", c->client);
	count_add(srv, r->client);
	r->c = c;
	r->opened_ms = loop_now(srv->lp);
	if (cfg->rotate_after_ms > 0) {
		/* Up to 10% jitter either way, so streams opened together do not
		 * all reconnect together. */
		int64_t jitter = cfg->rotate_after_ms / 10;
		int64_t span = jitter * 2 + 1;
		r->rotate_at = r->opened_ms + (uint64_t)(cfg->rotate_after_ms - jitter + (int64_t)(random() % span));
	}
	struct chunk *head = cors_head(srv, req); /* before req's buffer goes */
	c->reader = r;
	c->state = CONN_STREAMING;
	free(c->rbuf);
	c->rbuf = NULL;
	c->rlen = c->rcap = 0;
	loop_timer_stop(srv->lp, &c->timer);
	srv->m.responses_by_class[2]++;
	conn_enqueue(c, head ? head : srv->hub.stream_head, 0);
	chunk_unref(head);
	hub_add(&srv->hub, r, resume);
	conn_update_events(c);
	return;
bad:
	reader_free(r);
	conn_refuse(c, 400, why, NULL);
}

void stream_on_drained(struct conn *c)
{
	hub_on_drained(&c->srv->hub, c->reader);
}

void stream_closed(struct conn *c)
{
	struct reader *r = c->reader;
	c->reader = NULL;
	count_del(c->srv, r->client);
	hub_remove(&c->srv->hub, r);
	reader_free(r);
}
