/* stream.c: opening Server-Sent Events streams: the request's parameters,
 * read rights and caps, the head, and the connection handed to the hub as
 * the reader's sink. */
#include "stream.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"
#include "frame.h"
#include "text.h"
#include "util.h"

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
		if (!text_name_valid(s, n, true))
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
static struct chunk *cors_head(const struct streams *s, const struct http_request *req)
{
	const struct http_header *o = http_header_get(req, "Origin");
	if (!o || !s->norigins || o->value.n == 0)
		return NULL;
	for (size_t i = 0; i < s->norigins; i++) {
		const char *want = s->origins[i];
		if (strlen(want) == o->value.n && memcmp(want, o->value.p, o->value.n) == 0) {
			char extra[320];
			snprintf(extra, sizeof(extra), "Access-Control-Allow-Origin: %s\r\nVary: Origin\r\n", want);
			return frame_stream_head(s->cfg->retry_ms, extra);
		}
	}
	return NULL;
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

/* What the connection tells its reader. */
static void reader_drained(struct conn *c, void *data)
{
	(void)c;
	hub_reader_drained(data);
}

static void reader_closed(struct conn *c, void *data)
{
	(void)c;
	hub_reader_closed(data);
}

static const struct conn_user reader_user = { reader_drained, reader_closed };

void streams_init(struct streams *s, struct hub *hub, const struct config *cfg)
{
	memset(s, 0, sizeof(*s));
	s->hub = hub;
	s->cfg = cfg;
	streams_reconfigure(s);
}

static void clear_origins(struct streams *s)
{
	for (size_t i = 0; i < s->norigins; i++)
		free(s->origins[i]);
	free(s->origins);
	s->origins = NULL;
	s->norigins = 0;
}

void streams_reconfigure(struct streams *s)
{
	/* allow_origin, checked at load, becomes the shared head ("*") or a
	 * list of origins to echo, once per load instead of per request. */
	const char *list = s->cfg->allow_origin;
	bool any = strcmp(list, "*") == 0;
	clear_origins(s);
	if (list[0] && !any) {
		for (const char *p = list; *p;) {
			p += strspn(p, " ");
			size_t n = strcspn(p, ","), len = n;
			while (len && p[len - 1] == ' ')
				len--;
			if (len) {
				s->origins = xrealloc(s->origins, (s->norigins + 1) * sizeof(*s->origins));
				s->origins[s->norigins++] = xstrndup(p, len);
			}
			p += n;
			if (*p == ',')
				p++;
		}
	}
	chunk_unref(s->head);
	s->head = frame_stream_head(s->cfg->retry_ms, any ? "Access-Control-Allow-Origin: *\r\n" : NULL);
}

void streams_free(struct streams *s)
{
	clear_origins(s);
	chunk_unref(s->head);
	s->head = NULL;
}

void stream_open(struct streams *s, struct conn *c, const struct http_request *req)
{
	const struct config *cfg = s->cfg;
	struct stream_params p;
	const char *why = stream_params_parse(req, &p);
	if (why) {
		conn_refuse(c, 400, why, NULL);
		return;
	}
	bool see_private = false;
	if (cfg->read_token[0] && p.token) {
		if (!http_token_equal((struct http_slice){ p.token, strlen(p.token) }, cfg->read_token)) {
			stream_params_free(&p);
			conn_refuse(c, 403, "the read token is not valid", NULL);
			return;
		}
		see_private = true;
	}
	char key[64];
	addr_count_key(conn_client(c), (int)cfg->ipv6_prefix, key, sizeof(key));
	int status = 0;
	if (conn_draining(c)) {
		status = 503;
		why = "the server is shutting down";
	} else if ((int64_t)hub_readers(s->hub) >= s->max_readers) {
		status = 503;
		why = "the server is at its reader capacity (max_readers)";
	} else if (cfg->per_address_limit > 0 && (int64_t)hub_count(s->hub, key) >= cfg->per_address_limit) {
		status = 429;
		why = "too many open streams from this address (per_address_limit)";
	}
	if (status) {
		stream_params_free(&p);
		conn_refuse(c, status, why, "Retry-After: 5\r\n");
		return;
	}

	struct chunk *head = cors_head(s, req); /* before the request's buffer goes */
	conn_count_response(c, 200);
	conn_become_stream(c);
	conn_enqueue(c, head ? head : s->head, 0);
	chunk_unref(head);
	struct reader_spec spec = { .resume = p.resume,
				    .see_private = see_private,
				    .ntopics = p.ntopics,
				    .client = conn_client(c),
				    .count_key = key,
				    .rotate_after_ms = cfg->rotate_after_ms };
	memcpy(spec.topics, p.topics, sizeof(spec.topics));
	p.ntopics = 0; /* the hub takes the topics */
	stream_params_free(&p);
	struct reader *r = hub_open(s->hub, &spec, &conn_sink, c);
	conn_attach(c, &reader_user, r);
}
