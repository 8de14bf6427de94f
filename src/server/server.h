/* SPDX-License-Identifier: BSD-2-Clause */
/* server.h: the one server instance, and the only place that knows every
 * module: it builds them in start-up order, wires the layers together
 * (connections hand requests to the router, the router to the handlers,
 * the handlers to the hub, the hub to the store), runs the loop, and tears
 * them down in reverse. main.c owns the instance. */
#ifndef HERALD_SERVER_H
#define HERALD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "server/api.h"
#include "core/config.h"
#include "http/cors.h"
#include "auth/jwt.h"
#include "net/conn.h"
#include "h2/h2_session.h"
#include "hub/hub.h"
#include "net/listener.h"
#include "common/loop.h"
#include "core/metrics.h"
#include "core/stall_guard.h"
#include "store/store.h"
#include "api/stream.h"

struct publish_queue;
struct tls_ctx;
struct http_client;
struct jwks_fetch;
struct webhook;

struct server {
	struct config cfg;
	struct loop *lp;
	struct store *st;
	struct hub *hub;
	struct metrics m;
	struct conn_pool *pool;
	struct h2_server *h2; /* HTTP/2 sessions, whose streams are connections of pool */
	struct listeners listeners;
	struct streams *streams;  /* the stream handler's state (owned: streams_new, streams_free) */
	struct cors cors;         /* allow_origin, parsed once per load */
	struct jwt_verifier *jwt; /* signed tokens, or NULL when off */
	struct publish_queue *pubq;
	struct presence *presence;  /* who reads what (presence.h) */
	struct mercure_sets *msets; /* the Mercure subscribers' interned matcher lists */
	struct mercure_subs *msubs; /* the Mercure endpoint's active subscriptions (with presence) */
	struct tls_ctx *tls;
	struct http_client *http;    /* outbound requests (http_client.h) */
	struct jwks_fetch *jwks_url; /* jwt_jwks_url kept fresh, or NULL when unset */
	struct webhook *webhook;     /* webhook_url's deliverer (idle while unset) */
	struct api api;
	struct stall_guard stall; /* the loop's pass times (/metrics, /api/health, the stall warning) */

	int argc; /* the command line, read again on SIGHUP */
	char **argv;
	int sigfd;
	uint64_t drain_deadline;
	struct loop_timer drain_timer;
	struct loop_timer prune_timer;
	size_t prune_rows;             /* rows the next pruning step may remove (adapted to its time) */
	struct loop_timer stamp_timer; /* a worker's stamp into the group's region */
	struct loop_timer jwks_timer;  /* looks for a change of jwt_jwks_file */
	struct stat jwks_st;           /* jwt_jwks_file when its keys were last read */
	bool jwks_st_ok;               /* jwks_st is set (the file could be stat'ed) */
	bool draining;                 /* SIGTERM seen: no new work */
	int exit_code;                 /* what server_run returns */
	uint64_t started_ms;
};

/* Open everything in start-up order (store, TLS, listeners, hub, handlers,
 * systemd notification), with srv->cfg already loaded. Returns 0, or -1
 * after logging what failed (server_free cleans up either way). */
int server_start(struct server *srv, int argc, char **argv);

/* Run the loop until a signal or a fault ends it. Returns the exit code. */
int server_run(struct server *srv);

/* Close everything in reverse order and free it. */
void server_free(struct server *srv);

#endif
