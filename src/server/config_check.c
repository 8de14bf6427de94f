/* SPDX-License-Identifier: BSD-2-Clause */
/* config_check.c: the list of the modules' checks of their own settings,
 * run after every load, and the TLS one, which needs only tls_context.h's public
 * tls_check_pair. The list's order is the order of the messages. */
#include "server/config_check.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth/jwt.h"
#include "net/http_client.h"
#include "net/listener.h"
#include "common/log.h"
#include "net/tls_context.h"
#include "common/util.h"

/* The event log's settings need no check of their own: redis_url and
 * redis_stream are syntax config checks as they are set, and the database
 * or server is only reachable at start-up, where store_open says why not. */
/* jwt_jwks_url: https, or http to this host only (a set fetched in the
 * clear from elsewhere could be anyone's keys); outbound_ca_file, the CAs
 * its server is verified with, readable. */
static int outbound_check_config(const struct config *cfg)
{
	const char *why;
	int errors = 0;
	if (cfg->jwt_jwks_url[0] && (why = http_client_url_check(cfg->jwt_jwks_url, true))) {
		config_bad_value(cfg, "jwt_jwks_url", cfg->jwt_jwks_url, why);
		errors++;
	}
	/* auth_request carries readers' cookies and Authorization headers:
	 * never in the clear past this host. */
	if (cfg->auth_request[0] && (why = http_client_url_check(cfg->auth_request, true))) {
		config_bad_value(cfg, "auth_request", cfg->auth_request, why);
		errors++;
	}
	for (size_t i = 0; i < cfg->namespaces.n; i++) {
		const struct namespace *ns = &cfg->namespaces.ns[i];
		if (ns->auth_request && ns->auth_request[0] && ns->auth_request != cfg->auth_request &&
		    strcmp(ns->auth_request, cfg->auth_request) != 0 &&
		    (why = http_client_url_check(ns->auth_request, true))) {
			log_err("%s: [namespace \"%s\"] auth_request: %s", ns->origin, ns->pattern, why);
			errors++;
		}
	}
	/* Read by libcurl at each request's handshake: a file that cannot be
	 * read would fail every one, so it is refused here. */
	if (cfg->outbound_ca_file[0] && access(cfg->outbound_ca_file, R_OK) < 0) {
		config_bad_value(cfg, "outbound_ca_file", cfg->outbound_ca_file, strerror(errno));
		errors++;
	}
	return errors;
}

/* webhook_url: http or https with a host; webhook_secret with it (an
 * unsigned delivery could be anyone's), long enough not to be guessed. */
static int webhook_check_config(const struct config *cfg)
{
	const char *why;
	/* A namespace's own URL: checked alike, and signed with the secret. */
	const char *where = cfg->webhook_url[0] ? config_origin(cfg, "webhook_url") : NULL;
	for (size_t i = 0; i < cfg->namespaces.n; i++) {
		const struct namespace *ns = &cfg->namespaces.ns[i];
		if (!ns->webhook_url || !ns->webhook_url[0] || strcmp(ns->webhook_url, cfg->webhook_url) == 0)
			continue;
		if ((why = http_client_url_check(ns->webhook_url, false))) {
			log_err("%s: [namespace \"%s\"] webhook_url: %s", ns->origin, ns->pattern, why);
			return 1;
		}
		if (!where)
			where = ns->origin;
	}
	if (!where)
		return 0;
	if (cfg->webhook_url[0] && (why = http_client_url_check(cfg->webhook_url, false))) {
		config_bad_value(cfg, "webhook_url", cfg->webhook_url, why);
		return 1;
	}
	if (!cfg->webhook_secret[0]) {
		log_err("%s: webhook_url is set, but webhook_secret is not (nor webhook_secret_file): deliveries are "
			"signed with it",
			where);
		return 1;
	}
	if (strlen(cfg->webhook_secret) < 16) {
		config_bad_value(cfg, "webhook_secret", cfg->webhook_secret, "shorter than 16 bytes");
		return 1;
	}
	return 0;
}

static config_check_fn *const config_checks[] = {
	listener_check_config, tls_check_config, outbound_check_config, jwt_check_config, webhook_check_config,
};

int config_check(const struct config *cfg)
{
	int errors = 0;
	for (size_t i = 0; i < ARRAY_LEN(config_checks); i++)
		errors += config_checks[i](cfg);
	return errors;
}

int config_load_checked(struct config *cfg, int argc, char **argv, bool *check_only, const char **command,
			int *exit_code)
{
	int r = config_load(cfg, argc, argv, check_only, command, exit_code);
	if (r != 0)
		return r;
	if (config_check(cfg) > 0) {
		config_free(cfg);
		*exit_code = 1;
		return -1;
	}
	return 0;
}

int tls_check_config(const struct config *cfg)
{
	bool cert = cfg->tls_cert[0], key = cfg->tls_key[0], tls_listen = false;
	for (size_t i = 0; i < cfg->nlisten; i++)
		tls_listen |= strncmp(cfg->listen[i], "tls:", 4) == 0;
	if (cert != key) {
		log_err("%s: %s is set, but %s is not: tls_cert and tls_key must be set together",
			config_origin(cfg, cert ? "tls_cert" : "tls_key"), cert ? "tls_cert" : "tls_key",
			cert ? "tls_key" : "tls_cert");
		return 1;
	}
	if (tls_listen && !cert) {
		log_err("%s: listen has a tls: address, but tls_cert and tls_key are not set",
			config_origin(cfg, "listen"));
		return 1;
	}
	/* Under socket activation the sockets, and which is TLS (a socket
	 * named "tls"), come from systemd; listen is not used. */
	if (!tls_listen && cert && !getenv("LISTEN_FDS")) {
		log_err("%s: tls_cert is set, but no listen address is a tls: one "
			"(e.g. listen = 127.0.0.1:8199, tls:127.0.0.1:8443)",
			config_origin(cfg, "tls_cert"));
		return 1;
	}
	if (!cert)
		return 0;
	char err[600];
	int bad = tls_check_pair(cfg->tls_cert, cfg->tls_key, err, sizeof(err));
	if (bad == TLS_BAD_CERT)
		config_bad_value(cfg, "tls_cert", cfg->tls_cert, err);
	else if (bad == TLS_BAD_KEY)
		config_bad_value(cfg, "tls_key", cfg->tls_key, err);
	return bad ? 1 : 0;
}
