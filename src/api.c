/* api.c: routing and the small endpoints. */
#include "api.h"

#include <stdio.h>
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
	log_notice("refused %s: %d %s", c->client, status, message);
}

static void method_not_allowed(struct conn *c, const char *allow)
{
	char extra[64];
	snprintf(extra, sizeof(extra), "Allow: %s\r\n", allow);
	conn_refuse(c, 405, "method not allowed for this path", extra);
}

static void health(struct conn *c)
{
	struct server *srv = c->srv;
	char body[256];
	int n = snprintf(body, sizeof(body),
			 "{\"status\":\"%s\",\"readers\":%zu,\"connections\":%zu,\"last_id\":%lld,\"uptime_s\":%llu}\n",
			 srv->draining ? "draining" : "ok", hub_readers(&srv->hub), srv->nconns,
			 (long long)srv->hub.high_water,
			 (unsigned long long)((loop_now(srv->lp) - srv->started_ms) / 1000));
	srv->m.responses_by_class[2]++;
	conn_respond(c,
		     http_format_response(200, "application/json", "Cache-Control: no-store\r\n", body, (size_t)n,
					  c->keep_alive),
		     c->keep_alive);
}

void api_handle(struct conn *c, const struct http_request *req, const char *body, size_t body_len)
{
	struct server *srv = c->srv;
	const struct http_header *xff = http_header_get(req, "X-Forwarded-For");
	addr_client(&srv->trust, c->peer, c->peer_unix, xff ? xff->value.p : NULL, xff ? xff->value.n : 0, c->client,
		    sizeof(c->client));

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
		if (req->method != HTTP_GET)
			method_not_allowed(c, "GET");
		else
			health(c);
	} else if (path_is(req, "/metrics")) {
		if (req->method != HTTP_GET) {
			method_not_allowed(c, "GET");
		} else {
			srv->m.responses_by_class[2]++;
			conn_respond(c, metrics_render(srv, c->keep_alive), c->keep_alive);
		}
	} else {
		conn_refuse(c, 404, "no such path", NULL);
	}
}
