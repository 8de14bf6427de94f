/* SPDX-License-Identifier: BSD-2-Clause */
/* conn_pool.c: the connection pool's cold half: making it (with its
 * io_uring send batch, when there is one), draining and freeing it, its
 * counts and settings (the takeover, the gatherer), the small accessors
 * handlers read and set a connection through, refusals (a response that
 * closes, through conn_respond: a head's limits, a body refused), and the
 * request's name for log lines. Nothing here runs per event: reading, output and
 * the stream rounds stay in conn.c, where their helpers inline. The pool
 * is allocated by conn_pool_new and freed by conn_pool_free (which closes
 * what is still open first); a connection's texts (client, what) are its
 * own, freed with its record (conn.c). */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "net/conn_private.h"

struct conn_pool *conn_pool_new(struct loop *lp, const struct config *cfg, struct metrics *m,
				const struct conn_hooks *hooks)
{
	struct conn_pool *p = xcalloc(1, sizeof(*p));
	p->lp = lp;
	p->cfg = cfg;
	p->m = m;
	p->hooks = *hooks;
	p->stream_gap_ms = STREAM_GAP_MS;
	p->stream_gap_factor = STREAM_GAP_FACTOR;
	if (cfg->io_uring) {
		char why[160];
		p->batch = send_batch_new(SEND_BATCH_CAP, why, sizeof(why));
		if (p->batch)
			log_info("stream rounds send through io_uring, up to %d readers per submission",
				 SEND_BATCH_CAP);
		else
			log_warn("io_uring is not available (%s): each reader of a stream round gets a send(2) of "
				 "its own (io_uring = off says so without this warning)",
				 why);
	}
	return p;
}

void conn_pool_set_gatherer(struct conn_pool *p, const struct conn_gatherer *g)
{
	p->gatherer = g ? *g : (struct conn_gatherer){ 0 };
}

void conn_pool_set_takeover(struct conn_pool *p, const struct conn_takeover *t)
{
	p->takeover = t ? *t : (struct conn_takeover){ 0 };
}

size_t conn_queued_bytes(const struct conn *c)
{
	return c->out.bytes;
}

uint64_t conn_idle_ms(const struct conn *c)
{
	return loop_now(c->pool->lp) - c->last_progress;
}

bool conn_ending(const struct conn *c)
{
	return c->close_after_flush;
}

void conn_count_response(struct conn *c, int status)
{
	metrics_count_response(c->pool->m, status);
}

void conn_attach(struct conn *c, const struct conn_user *user, void *data)
{
	c->user = user;
	c->user_data = data;
}

void conn_pool_drain(struct conn_pool *p)
{
	p->draining = true;
	struct list_node *x, *tmp;
	list_each(&p->all, x, tmp)
	{
		struct conn *c = list_item(x, struct conn, link);
		if (c->state == CONN_READING && c->rlen == 0 && c->out.len == 0)
			conn_close(c, NULL);
	}
}

void conn_pool_free(struct conn_pool *p)
{
	if (!p)
		return;
	conn_pool_close_all(p);
	send_batch_free(p->batch);
	free(p->gathered);
	free(p);
}

size_t conn_pool_count(const struct conn_pool *p)
{
	return p->n;
}

bool conn_pool_draining(const struct conn_pool *p)
{
	return p->draining;
}

uint64_t conn_pool_writes(const struct conn_pool *p)
{
	return p->writes;
}

uint64_t conn_pool_stream_rounds(const struct conn_pool *p)
{
	return p->stream_rounds;
}

void conn_pool_set_stream_gap(struct conn_pool *p, uint64_t max_ms, uint64_t factor)
{
	p->stream_gap_ms = max_ms;
	p->stream_gap_factor = factor;
}

const char *conn_client(const struct conn *c)
{
	return c->client ? c->client : c->peer;
}

void conn_set_client(struct conn *c, const char *client)
{
	/* Unchanged, the text stays where it is: a reader may hold it. */
	if (strcmp(client, conn_client(c)) == 0)
		return;
	free(c->client);
	c->client = strcmp(client, c->peer) == 0 ? NULL : xstrdup(client);
}

const char *conn_peer(const struct conn *c)
{
	return c->peer;
}

bool conn_has_socket(const struct conn *c)
{
	return c->fd >= 0;
}

bool conn_peer_unix(const struct conn *c)
{
	return c->peer_unix;
}

bool conn_peer_local(const struct conn *c)
{
	return c->peer_loopback;
}

const char *conn_what(const struct conn *c)
{
	return c->what ? c->what : "";
}

bool conn_secure(const struct conn *c)
{
	return transport_secure(&c->tp);
}

bool conn_keep_alive(const struct conn *c)
{
	return c->keep_alive;
}

bool conn_draining(const struct conn *c)
{
	return c->pool->draining;
}

void conn_set_keep_alive(struct conn *c, bool keep)
{
	c->keep_alive = keep;
}

void *conn_owner(const struct conn *c)
{
	return c->pool->hooks.owner;
}

/* Refusals: rare, so with the cold half; each is a response that closes. */
void conn_refuse_as(struct conn *c, int status, const char *cause, const char *message, const struct http_head *h,
		    const char *body, size_t len)
{
	if (c->state == CONN_CLOSED || c->state == CONN_LINGERING)
		return;
	struct conn_pool *p = c->pool;
	if (p->hooks.refused)
		p->hooks.refused(p->hooks.owner, c, status, message);
	metrics_count_refusal(p->m, status, cause);
	/* A refusal always closes, whatever its head said. */
	struct http_head closing = *h;
	closing.keep_alive = false;
	conn_respond(c, &closing, body, len);
}

void conn_refuse(struct conn *c, int status, const char *cause, const char *message, const struct http_head *extra)
{
	size_t len;
	char *body = http_error_body(status, message, &len);
	struct http_head h;
	http_head_error(&h, status, len, false);
	http_head_append(&h, extra);
	conn_refuse_as(c, status, cause, message, &h, body, len);
	http_head_free(&h);
	free(body);
}

void conn_refuse_with(struct conn *c, int status, const char *cause, const char *message, const char *name,
		      const char *value)
{
	struct http_head extra;
	http_head_init(&extra, 0);
	if (value)
		http_head_add(&extra, name, value);
	conn_refuse(c, status, cause, message, &extra);
	http_head_free(&extra);
}

/* The limits a request's head is held to, however it came. */
struct http_limits conn_head_limits(const struct config *cfg)
{
	return (struct http_limits){ (size_t)cfg->max_request_line, (size_t)cfg->max_header_bytes,
				     (size_t)cfg->max_headers };
}

/* Refuse a request whose body is framed in a way herald does not take
 * (chunked) or is larger than max_body. Returns whether it was refused. */
bool conn_refuse_body(struct conn *c, const struct http_request *req)
{
	struct conn_pool *p = c->pool;
	if (!req->chunked && req->content_length <= p->cfg->max_body)
		return false;
	struct http_head more;
	http_head_init(&more, 0);
	if (p->hooks.answer_headers)
		p->hooks.answer_headers(p->hooks.owner, c, req, &more);
	if (req->chunked)
		conn_refuse(c, 411, "chunked_body", "chunked request bodies are not accepted; send Content-Length",
			    &more);
	else
		conn_refuse(c, 413, "body_too_large", "request body larger than max_body", &more);
	http_head_free(&more);
	return true;
}

/* Remember "METHOD /path" of the request being read, for log lines, from
 * every parse of it: a refusal of its head (413, 411, 431, 408) names it as
 * soon as its request line is whole, and none names the request before it
 * on the connection ("" while no request line is there). Control bytes
 * cannot occur: the parser refuses them. */
void conn_set_what(struct conn *c, const struct http_request *req)
{
	char what[80];
	what[0] = '\0';
	/* Whatever answers it, a HEAD request gets a head alone. */
	c->head_request = req->method_name.n == 4 && memcmp(req->method_name.p, "HEAD", 4) == 0;
	if (req->method_name.n) {
		/* By hand: snprintf was 2-3 % of an open's CPU (perf). At
		 * most 12 + 1 + 60 + 3 + 1 bytes. */
		size_t mn = MIN(req->method_name.n, 12), pn = MIN(req->path.n, 60), at = 0;
		memcpy(what, req->method_name.p, mn);
		at += mn;
		what[at++] = ' ';
		memcpy(what + at, req->path.p, pn);
		at += pn;
		if (req->path.n > 60) {
			memcpy(what + at, "...", 3);
			at += 3;
		}
		what[at] = '\0';
	}
	/* A request read in pieces is parsed again as each arrives. */
	if (strcmp(what, conn_what(c)) == 0)
		return;
	free(c->what);
	c->what = what[0] ? xstrdup(what) : NULL;
}

/* A zeroed connection record of p, READING, with the peer's text at its
 * end. Freed by conn_free_record. */
struct conn *conn_alloc(struct conn_pool *p, const char *peer)
{
	size_t n = strlen(peer) + 1;
	struct conn *c = xcalloc(1, sizeof(*c) + n);
	memcpy(c->peer, peer, n);
	c->pool = p;
	c->state = CONN_READING;
	c->last_progress = loop_now(p->lp);
	return c;
}

/* Free a record and the text it owns (client, what). */
void conn_free_record(struct conn *c)
{
	free(c->client);
	free(c->what);
	free(c);
}

/* c joins the pool's list of every connection, its request timer running. */
void pool_add(struct conn_pool *p, struct conn *c)
{
	list_push(&p->all, &c->link);
	p->n++;
	start_request_timer(c);
}

struct conn *conn_new_virtual(struct conn_pool *p, const char *peer, bool peer_unix, bool peer_loopback,
			      const struct transport_ops *ops, void *state, const struct http_request *req,
			      const char *body, size_t body_len)
{
	struct conn *c = conn_alloc(p, peer);
	c->fd = -1;
	c->tp = (struct transport){ .ops = ops, .state = state, .fd = -1 };
	c->peer_unix = peer_unix;
	c->peer_loopback = peer_loopback;
	/* Its interest is the transport's to keep: what it returns stays
	 * c->want, so epoll is never asked about a socket it does not have. */
	c->want = transport_events(&c->tp, EPOLLIN | EPOLLRDHUP);
	pool_add(p, c);
	if (req) {
		take_record(c, req, body, body_len);
		if (c->state != CONN_CLOSED)
			conn_update_events(c);
	}
	return c;
}

void conn_pool_close_all(struct conn_pool *p)
{
	while (!list_empty(&p->all))
		conn_close(list_item(p->all.first, struct conn, link), NULL);
	p->frame_round_due = true; /* lets go of the stream list now */
	pass_end(p);
	loop_timer_stop(p->lp, &p->stream_timer);
	free(p->read_buf);
	p->read_buf = NULL;
}
