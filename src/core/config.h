/* SPDX-License-Identifier: BSD-2-Clause */
/* config.h: herald's settings. Sources, later ones winning: built-in
 * defaults < config file (INI, libinih) < environment (HERALD_<KEY>, and
 * BACKLOG) < command-line flags (--key-name VALUE). Every value is parsed
 * and validated here for what needs no other module: its type, range,
 * enumeration and syntax; token files are read. What only a module knows
 * (an address it binds, a key pair it loads) is checked by that module,
 * after loading (config_check.h), with config_origin and config_bad_value
 * so that its errors read like these. An error names the key, the value
 * (never a secret's) and where it came from (file:line, environment
 * variable, or flag), and goes to the log as an error. */
#ifndef HERALD_CONFIG_H
#define HERALD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/addr.h"
#include "core/namespace.h"

#define CONFIG_MAX_LISTEN 16

/* Who may read /metrics (metrics_access), and ask GET /api/presence
 * (presence_access). */
enum metrics_mode { METRICS_ANY, METRICS_LOCAL, METRICS_TOKEN };

struct config {
	char *listen[CONFIG_MAX_LISTEN];
	size_t nlisten;
	char *db;
	int64_t unix_mode; /* permissions of our own unix sockets */
	int backlog;
	int64_t workers; /* worker processes sharing the listeners (1: this process serves) */
	int log_level;
	int64_t per_address_limit;
	int64_t ipv6_prefix; /* IPv6 clients count per /ipv6_prefix network */
	int64_t max_readers;
	int64_t heartbeat_interval_ms;
	int64_t header_timeout_ms;
	int64_t keepalive_timeout_ms;
	int64_t stall_timeout_ms;
	int64_t loop_stall_warn_ms; /* a loop pass this long is logged; 0 = never */
	int64_t max_request_line;
	int64_t max_header_bytes;
	int64_t max_headers;
	int64_t max_body;
	int64_t queue_limit;
	int64_t retention_age_s;
	int64_t retention_count;
	int64_t idempotency_window_s; /* how long an Idempotency-Key is remembered */
	/* Tokens: "" when unset. A token given by its _file key has been read
	 * into the token itself, so users of the token need not know. */
	char *publish_token;
	char *publish_token_file;
	char *read_token;
	char *read_token_file;
	char *allow_origin; /* CORS for streams: empty, "*" or a comma-separated list of origins */
	char *trusted_proxies;
	struct trust trust; /* trusted_proxies, parsed once at load */
	int metrics_mode;   /* enum metrics_mode */
	char *metrics_token;
	char *metrics_token_file;
	/* Presence (presence.h): who may ask, how much an answer lists, the
	 * join and leave events, the table's room. */
	bool presence;     /* count who reads what (off: no registry, /api/presence is 404) */
	int presence_mode; /* enum metrics_mode */
	char *presence_token;
	char *presence_token_file;
	int64_t presence_limit;    /* subjects listed per topic */
	int64_t presence_top;      /* topics listed without ?topic= */
	bool presence_events;      /* join and leave events in the log */
	int64_t presence_grace_ms; /* a reconnect within it is neither a leave nor a join */
	int64_t presence_ttl_ms;   /* on Redis: a node's share outlives its last heartbeat this long */
	int64_t presence_max_keys; /* distinct (topic pattern) and (pattern, subject) entries at once */
	/* The Mercure protocol at /.well-known/mercure (mercure.h). */
	bool mercure;                        /* serve it (off: 404) */
	bool mercure_anonymous;              /* subscribers without a token (public updates only) */
	char *mercure_url;                   /* the hub's public URL: "" = from the request's Host */
	bool mercure_subscriptions;          /* active subscriptions: events and the API (needs presence) */
	int64_t mercure_subscription_events; /* of them per address a minute (0: no limit) */
	int64_t retry_ms;
	int64_t rotate_after_ms;
	int64_t busy_timeout_ms;
	char *tls_cert;
	char *tls_key;
	int64_t tls_ticket_rotate_ms; /* 0 = never */
	/* Signed tokens (jwt.h): "" when unset; jwt_algorithm "" = off. */
	char *jwt_algorithm, *jwt_secret_file, *jwt_public_key_file, *jwt_audience, *jwt_issuer, *jwt_subscribe_claim,
		*jwt_publish_claim, *jwt_presence_claim, *jwt_cookie;
	char *jwt_jwks_file;    /* a JWK Set: keys chosen by the token's kid (jwks.h) */
	char *jwt_jwks_url;     /* the same fetched from an identity provider (server/jwks_fetch.c) */
	char *outbound_ca_file; /* PEM CAs herald's own HTTPS requests trust; "" = the system's */
	/* The application's say on stream opens (api/auth_hook.h): its URL
	 * ("" = off), the time its answer may take, and the opens that may
	 * wait for one at once. */
	char *auth_request;
	int64_t auth_timeout_ms;
	int64_t auth_max_waiting;
	int64_t jwt_leeway_s;
	bool console; /* serve the console page at GET / */
	/* HTTP/2: h2 by ALPN on TLS listeners and h2c with prior knowledge on
	 * the others (h2_session.h); the streams one connection may open. */
	bool http2;
	bool io_uring; /* a stream round's sends go to the kernel together (off: one send(2) per reader) */
	int64_t http2_max_streams;
	/* The event log on Redis Streams (store_redis.c) when redis_url or
	 * redis_sentinels is set. */
	char *redis_url;
	/* Or the primary found through Sentinel (redis_sentinel.h): the
	 * sentinels "host:port,..." and the name they know it by. */
	char *redis_sentinels, *redis_master_name;
	char *redis_stream; /* the keys' hash tag: {name}:events, {name}:last */
	int64_t redis_wait_replicas;
	int64_t redis_wait_timeout_ms;
	/* Webhooks (webhook/webhook.h): presence, subscription and (with
	 * webhook_publishes) every event, POSTed to the application. */
	char *webhook_url;    /* "" = off */
	char *webhook_secret; /* the HMAC-SHA256 key of the signature */
	char *webhook_secret_file;
	bool webhook_publishes;
	int64_t webhook_batch;       /* events per request, at most */
	int64_t webhook_batch_bytes; /* a request's body, about at most */
	int64_t webhook_timeout_ms;  /* one request, whole */
	struct namespaces namespaces; /* the [namespace "PATTERN"] sections, in file order, resolved */
	struct namespace ns_defaults; /* the top-level keys' rules, as a namespace (pattern NULL) */
	char *config_path;            /* the file read, or NULL */
	char **origin;     /* per key: where its value came from (NULL: the default); config.c's */
};

/* Fill cfg from defaults, the file named by --config (if any), the
 * environment and argv, then check what config itself can: token files are
 * read, keys that go together are set together. Returns 0; or 1 when argv
 * names one of main's commands (--help or -h, --version, --redis-function)
 * before anything wrong, the word in *command (nothing is loaded; exit 0
 * once main has answered it); or -1 after logging every error found (exit
 * 2 for a bad command line, 1 for a bad value), with cfg freed. The owning
 * modules' checks are not run here (config_check.h). *check_only is set by
 * --check-config. Called again, afresh, on every reload. */
int config_load(struct config *cfg, int argc, char **argv, bool *check_only, const char **command, int *exit_code);

/* The rules for topic[0..n): its namespace's, or the defaults'. */
const struct namespace *config_rules(const struct config *cfg, const char *topic, size_t n);

/* Free every value cfg holds (twice is harmless). */
void config_free(struct config *cfg);

/* Where the value of key came from: "path:line", "environment HERALD_X",
 * "option --x" or "built-in default". Points into cfg or is static. */
const char *config_origin(const struct config *cfg, const char *key);

/* Log the error that value of key is refused for why, the way config_load
 * words its own: "origin: key = \"value\": why (allowed: ...)", the value
 * escaped, a secret's never shown and a URL's password left out. */
void config_bad_value(const struct config *cfg, const char *key, const char *value, const char *why);

/* The keys flagged as taking effect only at a restart (listen, backlog,
 * workers, db, redis_url, redis_sentinels,
 * redis_master_name, redis_stream, presence, presence_max_keys): give fresh the running value of
 * each from cur, moving cur's strings (cur keeps none; free it as usual),
 * and call changed(key, arg) for each whose value fresh had changed. */
void config_keep_restart_keys(struct config *fresh, struct config *cur, void (*changed)(const char *key, void *arg),
			      void *arg);

/* Print every key with its effective value, one "key = value" per line;
 * tokens print as "(set)". */
void config_print(const struct config *cfg, FILE *out);

/* The command line's usage and every key with its default. */
void config_usage(FILE *out);

#endif
