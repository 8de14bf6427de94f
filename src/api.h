/* api.h: routing of one complete request to its handler, and the small
 * endpoints (health, metrics). Every refusal goes out through conn_refuse. */
#ifndef HERALD_API_H
#define HERALD_API_H

#include <stdbool.h>
#include <stddef.h>

#include "conn.h"
#include "http.h"

/* Handle req (its slices point into c's read buffer, valid only during the
 * call; body is body_len bytes). The handler either responds now
 * (conn_respond / conn_refuse), takes the connection over as a stream, or
 * leaves it WAITING with c->pending set (publish). */
void api_handle(struct conn *c, const struct http_request *req, const char *body, size_t body_len);

/* The request (head complete, body not yet read) asked before sending its
 * body (Expect: 100-continue): returns true when it would be taken, or
 * refuses it now (routing, rights, content type) and returns false. */
bool api_accepts_body(struct conn *c, const struct http_request *req);

/* Whether the client is on this host and did not come through a proxy
 * (a loopback or unix-socket peer, no forwarding headers). */
bool api_direct_local(const struct conn *c, const struct http_request *req);

/* Compare a presented token with a configured one in constant time; false
 * when none is configured. */
bool api_token_equal(struct http_slice given, const char *want);

/* Log a refused request at most a few times a second (the rest are counted). */
void api_log_refusal(struct conn *c, int status, const char *message);

#endif
