/* SPDX-License-Identifier: BSD-2-Clause */
/* api.h: the router: one complete request to its handler (stream, publish)
 * or to the small endpoints (health, metrics, presence, the console page,
 * CORS preflights), the client address behind trusted proxies, and the refusal
 * log. The server fills struct api once and hands conn its hooks
 * (api_hooks). */
#ifndef HERALD_API_H
#define HERALD_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/addr.h"
#include "core/config.h"
#include "http/cors.h"
#include "net/conn.h"
#include "h2/h2_session.h"
#include "hub/hub.h"
#include "core/metrics.h"
#include "api/publish.h"
#include "store/store.h"
#include "api/stream.h"

struct presence;
struct stall_guard;

struct api {
	struct loop *lp;
	const struct config *cfg;
	const struct trust *trust;
	const struct cors *cors;
	struct hub *hub;
	struct store *st; /* the event log, for health and metrics */
	struct streams *streams;
	struct presence *presence; /* GET /api/presence */
	struct publish_queue *pubq;
	struct mercure_sets *msets; /* the Mercure subscribers' interned matcher lists */
	struct mercure_subs *msubs; /* the Mercure endpoint's active subscriptions (NULL: presence off) */
	struct conn_pool *pool;
	struct h2_server *h2; /* HTTP/2 sessions, for health and metrics */
	struct metrics *m;
	const struct stall_guard *stall; /* the worst loop pass of the last minute, for health */
	uint64_t started_ms;
	/* The refusal log's rate limit. */
	uint64_t log_window;
	unsigned log_in_window, log_suppressed;
};

/* Sockets held for clients: the pool's connections less the HTTP/2 streams
 * among them (which hold none), plus the HTTP/2 sessions (one each). */
size_t api_sockets(const struct api *a);

/* The hooks that route the pool's requests to a (owner = a). */
void api_hooks(struct api *a, struct conn_hooks *out);

#endif
