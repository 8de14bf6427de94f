/* api.h: routing of one complete request to its handler, and the small
 * endpoints (health, metrics). Every refusal goes out through conn_refuse. */
#ifndef HERALD_API_H
#define HERALD_API_H

#include <stddef.h>

#include "conn.h"
#include "http.h"

/* Handle req (its slices point into c's read buffer, valid only during the
 * call; body is body_len bytes). The handler either responds now
 * (conn_respond / conn_refuse), takes the connection over as a stream, or
 * leaves it WAITING with c->pending set (publish). */
void api_handle(struct conn *c, const struct http_request *req, const char *body, size_t body_len);

/* Log a refused request at most a few times a second (the rest are counted). */
void api_log_refusal(struct conn *c, int status, const char *message);

#endif
