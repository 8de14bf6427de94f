/* config.h: herald's settings. Sources, later ones winning: built-in
 * defaults < config file (INI, libinih) < environment (HERALD_<KEY>, and
 * BACKLOG) < command-line flags (--key-name VALUE). Every value is validated
 * once, at load, completely: listen addresses are parsed, certificate pairs
 * loaded, token files read. An error names the key, the value (never a
 * secret's) and where it came from (file:line, environment variable, or
 * flag), and goes to the log as an error. */
#ifndef HERALD_CONFIG_H
#define HERALD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "addr.h"

#define CONFIG_MAX_LISTEN 16

/* Who may read /metrics (metrics_access). */
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
	int64_t max_request_line;
	int64_t max_header_bytes;
	int64_t max_headers;
	int64_t max_body;
	int64_t queue_limit;
	int64_t retention_age_s;
	int64_t retention_count;
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
	int64_t retry_ms;
	int64_t rotate_after_ms;
	int64_t busy_timeout_ms;
	char *tls_cert;
	char *tls_key;
	int64_t tls_ticket_rotate_ms; /* 0 = never */
	/* Signed tokens (jwt.h): "" when unset; jwt_algorithm "" = off. */
	char *jwt_algorithm, *jwt_secret_file, *jwt_public_key_file, *jwt_audience, *jwt_issuer, *jwt_subscribe_claim,
		*jwt_publish_claim, *jwt_cookie;
	int64_t jwt_leeway_s;
	bool console;      /* serve the console page at GET / */
	/* The event log on Redis Streams (store_redis.c) when redis_url is set. */
	char *redis_url;
	char *redis_stream; /* the keys' hash tag: {name}:events, {name}:last */
	int64_t redis_wait_replicas;
	int64_t redis_wait_timeout_ms;
	char *config_path; /* the file read, or NULL */
};

/* Fill cfg from defaults, the file named by --config (if any), the
 * environment and argv, then check the whole: token files are read, the
 * TLS pair is loaded once. Returns 0; or 1 after printing usage/version (the
 * caller exits 0); or -1 after logging every error found (exit 2 for a bad
 * command line, 1 for a bad value), with cfg freed. *check_only is set by
 * --check-config. Called again, afresh, on every reload. */
int config_load(struct config *cfg, int argc, char **argv, bool *check_only, int *exit_code);

void config_free(struct config *cfg);

/* Print every key with its effective value, one "key = value" per line;
 * tokens print as "(set)". */
void config_print(const struct config *cfg, FILE *out);

void config_usage(FILE *out);

struct jwt_settings;

/* Fill out with the jwt_* settings of cfg, for jwt_verifier_new; the
 * strings point into cfg, which must outlive out. */
void config_jwt_settings(const struct config *cfg, struct jwt_settings *out);

#endif
