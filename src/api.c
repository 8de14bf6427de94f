/* api.c: routing and the small endpoints. */
#include "api.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub.h"
#include "log.h"
#include "metrics.h"
#include "publish.h"
#include "server.h"
#include "stream.h"

static bool path_is(const struct http_request *req, const char *path)
{
	size_t n = strlen(path);
	return req->path.n == n && memcmp(req->path.p, path, n) == 0;
}

void api_log_refusal(struct conn *c, int status, const char *message)
{
	/* At most 20 lines a second; a flood of bad requests must not flood
	 * the journal. */
	static uint64_t window;
	static unsigned in_window, suppressed;
	uint64_t now = loop_now(c->srv->lp);
	if (now - window >= 1000) {
		if (suppressed)
			log_notice("%u more refused requests not logged in the last second", suppressed);
		window = now;
		in_window = suppressed = 0;
	}
	if (++in_window > 20) {
		suppressed++;
		return;
	}
	log_notice("refused %s %s: %d %s", c->client, c->what[0] ? c->what : "(no request line)", status, message);
}

static void method_not_allowed(struct conn *c, const char *allow)
{
	char extra[64];
	snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
	conn_refuse(c, 405, "method not allowed for this path", extra);
}

static void health(struct conn *c, bool head_only)
{
	struct server *srv = c->srv;
	char body[256];
	int n = snprintf(body, sizeof(body),
			 "{\"status\":\"%s\",\"readers\":%zu,\"connections\":%zu,\"last_id\":%lld,\"uptime_s\":%llu}\n",
			 srv->draining ? "draining" : "ok", hub_readers(&srv->hub), srv->nconns,
			 (long long)srv->hub.high_water,
			 (unsigned long long)((loop_now(srv->lp) - srv->started_ms) / 1000));
	struct chunk *resp = http_format_response(200, "application/json", "Cache-Control: no-store\r\n", body,
						  (size_t)n, c->keep_alive);
	if (head_only)
		resp->len -= (uint32_t)n; /* the same head, with its Content-Length, and no body */
	conn_respond(c, 200, resp, c->keep_alive);
}

/* /metrics for whom metrics_access allows: anyone; only a client on this
 * host that did not come through a proxy; or a client with metrics_token. */
static void metrics(struct conn *c, const struct http_request *req)
{
	const struct config *cfg = &c->srv->cfg;
	if (cfg->metrics_mode == METRICS_LOCAL && !api_direct_local(c, req)) {
		conn_refuse(c, 403, "metrics are served only to this host (metrics_access = local)", NULL);
		return;
	}
	if (cfg->metrics_mode == METRICS_TOKEN) {
		struct http_slice tok;
		if (!http_bearer_token(req, &tok)) {
			conn_refuse(c, 401, "metrics need Authorization: Bearer <metrics_token>",
				    "WWW-Authenticate: Bearer\r\n");
			return;
		}
		if (!api_token_equal(tok, cfg->metrics_token)) {
			conn_refuse(c, 403, "the metrics token is not valid", NULL);
			return;
		}
	}
	conn_respond(c, 200, metrics_render(c->srv, c->keep_alive), c->keep_alive);
}

bool api_direct_local(const struct conn *c, const struct http_request *req)
{
	return c->peer_loopback && !http_header_get(req, "X-Forwarded-For") && !http_header_get(req, "Forwarded") &&
	       !http_header_get(req, "X-Real-IP");
}

bool api_token_equal(struct http_slice given, const char *want)
{
	size_t wn = strlen(want);
	return wn && given.n == wn && CRYPTO_memcmp(given.p, want, wn) == 0;
}

/* Route a request whose body has not arrived and that asked first
 * (Expect: 100-continue): refuse it now if it would be refused anyway. */
bool api_accepts_body(struct conn *c, const struct http_request *req)
{
	if (path_is(req, "/api/events") && req->method == HTTP_POST) {
		if (c->srv->draining) {
			conn_refuse(c, 503, "the server is shutting down", "Retry-After: 5\r\n");
			return false;
		}
		return publish_precheck(c, req);
	}
	/* Nothing else takes a body: answer it now as it would be answered,
	 * and close, since the body it may still send is not read. */
	c->keep_alive = false;
	api_handle(c, req, NULL, 0);
	return false;
}

void api_handle(struct conn *c, const struct http_request *req, const char *body, size_t body_len)
{
	struct server *srv = c->srv;
	/* Every X-Forwarded-For line, in order: a proxy may add its hop on a
	 * line of its own, and reading only the first would trust what the
	 * client wrote there. */
	size_t xff_len = 0;
	char *xff = http_header_join(req, "X-Forwarded-For", &xff_len);
	addr_client(&srv->trust, c->peer, c->peer_unix, xff, xff_len, c->client, sizeof(c->client));
	free(xff);

	if (path_is(req, "/api/events/stream")) {
		if (req->method != HTTP_GET)
			method_not_allowed(c, "GET");
		else
			stream_open(c, req);
	} else if (path_is(req, "/api/events")) {
		if (req->method != HTTP_POST)
			method_not_allowed(c, "POST");
		else if (srv->draining)
			conn_refuse(c, 503, "the server is shutting down", "Retry-After: 5\r\n");
		else
			publish_handle(c, req, body, body_len);
	} else if (path_is(req, "/api/health")) {
		if (req->method != HTTP_GET && req->method != HTTP_HEAD)
			method_not_allowed(c, "GET, HEAD");
		else
			health(c, req->method == HTTP_HEAD);
	} else if (path_is(req, "/metrics")) {
		if (req->method != HTTP_GET)
			method_not_allowed(c, "GET");
		else
			metrics(c, req);
	} else {
		conn_refuse(c, 404, "no such path", NULL);
	}
}
