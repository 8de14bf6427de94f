/* SPDX-License-Identifier: BSD-2-Clause */
/* config_keys.c: what each setting is and how its text is read: the key
 * table (name, type, field, range, built-in default, flags, extra check),
 * finding a key by name (a dash for an underscore; the nearest name for a
 * slip), and the value parsers (numbers with units, durations, sizes,
 * modes, switches, choices, and the string checks, some through the pure
 * parsers of addr.h, redis_url.h and redis_sentinel.h). Where a value
 * comes from (defaults, file, environment, flags) is config.c's; both share
 * config_private.h. Nothing here allocates but config_key_set, whose
 * strings the settings own (config_free). */
#include "core/config_private.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "redis/redis_sentinel.h"
#include "redis/redis_url.h"

static key_check_fn check_origins, check_proxies, check_jwt_algorithm, check_cookie, check_mercure_url, check_redis_url,
	check_redis_stream, check_redis_sentinels, check_redis_master_name;

/* Indexed by enum metrics_mode. */
static const char *const metrics_modes[] = { "any", "local", "token", NULL };

/* KEY(name, type, field, min, max, default[, .flags = ..., .check = ..., .choices = ...]) */
#define KEY(n, t, f, lo, hi, d, ...)                                                             \
	{                                                                                        \
		.name = n, .type = t, .off = OFF(f), .min = lo, .max = hi, .def = d, __VA_ARGS__ \
	}
const struct key config_keys[] = {
	KEY("listen", K_LIST, listen, 0, 0, "127.0.0.1:8199", .flags = KF_RESTART),
	KEY("db", K_STR, db, 1, 4096, "var/herald.db", .flags = KF_RESTART),
	KEY("unix_mode", K_MODE, unix_mode, 0, 0777, "0660"),
	KEY("backlog", K_INT, backlog, 1, 65535, "1024", .flags = KF_RESTART),
	KEY("workers", K_INT, workers, 1, 64, "1", .flags = KF_RESTART | KF_AUTO),
	KEY("log_level", K_LEVEL, log_level, 0, 0, "info"),
	KEY("per_address_limit", K_INT, per_address_limit, 0, 1000000, "32"),
	KEY("ipv6_prefix", K_INT, ipv6_prefix, 1, 128, "64"),
	KEY("max_readers", K_INT, max_readers, 0, 10000000, "0"),
	KEY("heartbeat_interval", K_DUR_MS, heartbeat_interval_ms, 100, 3600000, "15s"),
	KEY("header_timeout", K_DUR_MS, header_timeout_ms, 100, 3600000, "10s"),
	KEY("keepalive_timeout", K_DUR_MS, keepalive_timeout_ms, 100, 3600000, "60s"),
	KEY("stall_timeout", K_DUR_MS, stall_timeout_ms, 100, 86400000, "60s"),
	KEY("loop_stall_warn", K_DUR_MS, loop_stall_warn_ms, 1, 60000, "50ms", .flags = KF_ZERO_OK),
	KEY("max_request_line", K_SIZE, max_request_line, 64, 1048576, "8192"),
	KEY("max_header_bytes", K_SIZE, max_header_bytes, 256, 1048576, "16384"),
	KEY("max_headers", K_INT, max_headers, 4, 128, "64"),
	KEY("max_body", K_SIZE, max_body, 64, 16777216, "65536"),
	KEY("queue_limit", K_SIZE, queue_limit, 4096, 1073741824, "256k"),
	KEY("retention_age", K_DUR_S, retention_age_s, 0, INT64_C(3153600000), "7d"),
	KEY("retention_count", K_INT, retention_count, 0, INT64_C(1000000000000), "1000000"),
	KEY("idempotency_window", K_DUR_S, idempotency_window_s, 1, INT64_C(31536000), "24h"),
	KEY("publish_token", K_STR, publish_token, 0, 1024, "", .flags = KF_SECRET),
	KEY("publish_token_file", K_STR, publish_token_file, 0, 4096, ""),
	KEY("read_token", K_STR, read_token, 0, 1024, "", .flags = KF_SECRET),
	KEY("read_token_file", K_STR, read_token_file, 0, 4096, ""),
	KEY("allow_origin", K_STR, allow_origin, 0, 4096, "", .check = check_origins),
	KEY("trusted_proxies", K_STR, trusted_proxies, 0, 4096, "127.0.0.0/8,::1,unix", .check = check_proxies),
	KEY("metrics_access", K_CHOICE, metrics_mode, 0, 0, "local", .choices = metrics_modes),
	KEY("metrics_token", K_STR, metrics_token, 0, 1024, "", .flags = KF_SECRET),
	KEY("metrics_token_file", K_STR, metrics_token_file, 0, 4096, ""),
	KEY("presence", K_BOOL, presence, 0, 0, "on", .flags = KF_RESTART),
	KEY("presence_access", K_CHOICE, presence_mode, 0, 0, "local", .choices = metrics_modes),
	KEY("presence_token", K_STR, presence_token, 0, 1024, "", .flags = KF_SECRET),
	KEY("presence_token_file", K_STR, presence_token_file, 0, 4096, ""),
	KEY("presence_limit", K_INT, presence_limit, 1, 10000, "100"),
	KEY("presence_top", K_INT, presence_top, 1, 1000, "50"),
	KEY("presence_events", K_BOOL, presence_events, 0, 0, "off"),
	KEY("presence_grace", K_DUR_MS, presence_grace_ms, 0, 3600000, "5s"),
	KEY("presence_ttl", K_DUR_MS, presence_ttl_ms, 1000, 3600000, "15s"),
	KEY("presence_max_keys", K_INT, presence_max_keys, 1024, 4194304, "65536", .flags = KF_RESTART),
	KEY("mercure", K_BOOL, mercure, 0, 0, "on"),
	KEY("mercure_anonymous", K_BOOL, mercure_anonymous, 0, 0, "off"),
	KEY("mercure_url", K_STR, mercure_url, 0, 2048, "", .check = check_mercure_url),
	KEY("mercure_subscriptions", K_BOOL, mercure_subscriptions, 0, 0, "off"),
	/* A subscription's open and close events, 2 per matcher: one of 64
	 * matchers (MERCURE_MAX_MATCHERS) must fit, so at least 128. */
	KEY("mercure_subscription_events", K_INT, mercure_subscription_events, 128, INT64_C(1000000000), "256",
	    .flags = KF_ZERO_OK),
	KEY("retry_ms", K_INT, retry_ms, 0, 3600000, "3000"),
	KEY("rotate_after", K_DUR_MS, rotate_after_ms, 0, INT64_C(31536000000), "0"),
	KEY("busy_timeout_ms", K_INT, busy_timeout_ms, 0, 1000, "5"),
	KEY("tls_cert", K_STR, tls_cert, 0, 4096, ""),
	KEY("tls_key", K_STR, tls_key, 0, 4096, ""),
	KEY("tls_ticket_rotate", K_DUR_MS, tls_ticket_rotate_ms, 1000, 604800000, "12h", .flags = KF_ZERO_OK),
	KEY("jwt_algorithm", K_STR, jwt_algorithm, 0, 64, "", .check = check_jwt_algorithm),
	KEY("jwt_secret_file", K_STR, jwt_secret_file, 0, 4096, ""),
	KEY("jwt_public_key_file", K_STR, jwt_public_key_file, 0, 4096, ""),
	KEY("jwt_jwks_file", K_STR, jwt_jwks_file, 0, 4096, ""),
	KEY("jwt_jwks_url", K_STR, jwt_jwks_url, 0, 4096, ""),
	KEY("outbound_ca_file", K_STR, outbound_ca_file, 0, 4096, ""),
	KEY("auth_request", K_STR, auth_request, 0, 4096, "", .flags = KF_URL),
	KEY("auth_timeout", K_DUR_MS, auth_timeout_ms, 10, 60000, "2s"),
	KEY("auth_max_waiting", K_INT, auth_max_waiting, 1, 10000000, "10000"),
	KEY("jwt_leeway", K_DUR_S, jwt_leeway_s, 0, 300, "10s"),
	KEY("jwt_audience", K_STR, jwt_audience, 0, 1024, ""),
	KEY("jwt_issuer", K_STR, jwt_issuer, 0, 1024, ""),
	KEY("jwt_subscribe_claim", K_STR, jwt_subscribe_claim, 1, 256, "subscribe"),
	KEY("jwt_publish_claim", K_STR, jwt_publish_claim, 1, 256, "publish"),
	KEY("jwt_presence_claim", K_STR, jwt_presence_claim, 1, 256, "presence"),
	KEY("jwt_cookie", K_STR, jwt_cookie, 0, 256, "", .check = check_cookie),
	KEY("console", K_BOOL, console, 0, 0, "on"),
	KEY("http2", K_BOOL, http2, 0, 0, "on"),
	KEY("io_uring", K_BOOL, io_uring, 0, 0, "on", .flags = KF_RESTART),
	KEY("http2_max_streams", K_INT, http2_max_streams, 1, 100000, "100"),
	KEY("redis_url", K_STR, redis_url, 0, REDIS_URL_MAX - 1, "", .flags = KF_URL | KF_RESTART,
	    .check = check_redis_url),
	KEY("redis_sentinels", K_STR, redis_sentinels, 0, 4096, "", .flags = KF_RESTART,
	    .check = check_redis_sentinels),
	KEY("redis_master_name", K_STR, redis_master_name, 0, 200, "", .flags = KF_RESTART,
	    .check = check_redis_master_name),
	KEY("redis_stream", K_STR, redis_stream, 1, 200, "herald", .flags = KF_RESTART, .check = check_redis_stream),
	KEY("redis_wait_replicas", K_INT, redis_wait_replicas, 0, 64, "0"),
	KEY("redis_wait_timeout", K_DUR_MS, redis_wait_timeout_ms, 1, 60000, "1s"),
	KEY("webhook_url", K_STR, webhook_url, 0, 4096, "", .flags = KF_URL),
	KEY("webhook_secret", K_STR, webhook_secret, 0, 1024, "", .flags = KF_SECRET),
	KEY("webhook_secret_file", K_STR, webhook_secret_file, 0, 4096, ""),
	KEY("webhook_publishes", K_BOOL, webhook_publishes, 0, 0, "off"),
	KEY("webhook_batch", K_INT, webhook_batch, 1, 1000, "100"),
	KEY("webhook_batch_bytes", K_SIZE, webhook_batch_bytes, 4096, 16777216, "1m"),
	KEY("webhook_timeout", K_DUR_MS, webhook_timeout_ms, 100, 300000, "10s"),
};
#define NKEYS ARRAY_LEN(config_keys)
const size_t config_nkeys = NKEYS;

/* The key called name (n bytes); a dash matches an underscore, so that
 * "max-body" in a file or a flag is max_body. */
bool config_key_name_is(const char *key, const char *name, size_t n)
{
	size_t j = 0;
	while (j < n && key[j] && (key[j] == name[j] || (key[j] == '_' && name[j] == '-')))
		j++;
	return j == n && !key[j];
}

const struct key *config_key_find(const char *name, size_t n)
{
	for (size_t i = 0; i < NKEYS; i++)
		if (config_key_name_is(config_keys[i].name, name, n))
			return &config_keys[i];
	return NULL;
}

const struct key *config_key_named(const char *name)
{
	return config_key_find(name, strlen(name));
}

/* The key nearest to the unknown name (n bytes; a dash read as an
 * underscore) when it is likely a slip of the keyboard, else NULL. */
const struct key *config_key_nearest(const char *name, size_t n)
{
	char want[TEXT_DISTANCE_MAX + 1];
	const char *names[NKEYS];
	if (n > TEXT_DISTANCE_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++)
		want[i] = name[i] == '-' ? '_' : name[i];
	want[n] = '\0';
	for (size_t i = 0; i < NKEYS; i++)
		names[i] = config_keys[i].name;
	const char *near = text_nearest(want, names, NKEYS);
	return near ? config_key_named(near) : NULL;
}

/* Parse a whole decimal number with an optional unit suffix from units[]
 * (each with its multiplier); bare numbers use the multiplier of "". A
 * value that is not one says what one looks like (form), so that "lots"
 * or "1.5m" is answered with the accepted spelling, and a negative one
 * says that, rather than that it is not a number. */
struct unit {
	const char *suffix;
	int64_t mult;
};

static const char *parse_scaled(const char *s, const struct unit *units, const char *form, int64_t *out)
{
	while (isspace((unsigned char)*s))
		s++;
	if (s[0] == '-' && isdigit((unsigned char)s[1]))
		return "must not be negative";
	if (!isdigit((unsigned char)*s))
		return form;
	errno = 0;
	char *end;
	long long v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return "number out of range";
	while (isspace((unsigned char)*end))
		end++;
	size_t n = strlen(end);
	while (n && isspace((unsigned char)end[n - 1]))
		n--;
	for (const struct unit *u = units; u->suffix; u++) {
		if (strlen(u->suffix) == n && strncasecmp(end, u->suffix, n) == 0) {
			if (v > INT64_MAX / u->mult)
				return "number out of range";
			*out = (int64_t)v * u->mult;
			return NULL;
		}
	}
	return form;
}

static const struct unit units_int[] = { { "", 1 }, { NULL, 0 } };
static const struct unit units_ms[] = { { "", 1000 },     { "ms", 1 },       { "s", 1000 }, { "m", 60000 },
					{ "h", 3600000 }, { "d", 86400000 }, { NULL, 0 } };
static const struct unit units_s[] = { { "", 1 }, { "s", 1 }, { "m", 60 }, { "h", 3600 }, { "d", 86400 }, { NULL, 0 } };
static const struct unit units_size[] = { { "", 1 },           { "b", 1 },           { "k", 1024 },
					  { "kb", 1024 },      { "m", 1048576 },     { "mb", 1048576 },
					  { "g", 1073741824 }, { "gb", 1073741824 }, { NULL, 0 } };
static const char form_int[] = "not a whole number";
static const char form_int_auto[] = "not a whole number, nor auto";
static const char form_ms[] =
	"not a duration: a whole number, optionally followed by ms, s, m, h or d (a bare number is seconds)";
static const char form_s[] =
	"not a duration: a whole number, optionally followed by s, m, h or d (a bare number is seconds)";
static const char form_size[] = "not a size: a whole number of bytes, optionally followed by k, m or g";

/* allow_origin: "*" alone, or origins written scheme://host[:port]. */
static const char *check_origins(const char *o, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	if (!o[0] || strcmp(o, "*") == 0)
		return NULL;
	for (const char *p = o; *p;) {
		while (*p == ' ')
			p++;
		size_t n = strcspn(p, ",");
		while (n && p[n - 1] == ' ')
			n--;
		if (!(n > 7 && strncmp(p, "http://", 7) == 0) && !(n > 8 && strncmp(p, "https://", 8) == 0))
			return "each entry must be * alone or an origin such as https://example.com";
		size_t host = p[4] == 's' ? 8 : 7; /* past "https://" or "http://" */
		for (size_t i = 0; i < n; i++)
			if (p[i] == ' ' || (p[i] == '/' && i >= host))
				return "an origin has no spaces and no path";
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	return NULL;
}

/* trusted_proxies: what the server will parse, parsed now. */
static const char *check_proxies(const char *v, char *buf, size_t len)
{
	struct trust t;
	return trust_parse(&t, v, buf, len) < 0 ? buf : NULL;
}

/* jwt_algorithm: one of those jwt.c verifies, or empty (tokens off, or
 * each key's own with jwt_jwks_file). */
static const char *check_jwt_algorithm(const char *v, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	if (!v[0] || !strcmp(v, "HS256") || !strcmp(v, "RS256") || !strcmp(v, "ES256") || !strcmp(v, "EdDSA"))
		return NULL;
	return "not one of HS256, RS256, ES256, EdDSA (or empty: signed tokens off)";
}

/* mercure_url: empty, or an absolute http(s) URL without spaces. */
static const char *check_mercure_url(const char *v, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	if (!v[0])
		return NULL;
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		return "not an http:// or https:// URL";
	for (const char *p = v; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f || strchr("\"<>\\", *p))
			return "a URL holds no spaces, control characters, quotes, angle brackets or backslashes";
	return NULL;
}

/* jwt_cookie: empty, or a cookie name of letters, digits, _ - and '.'. */
static const char *check_cookie(const char *v, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	for (const char *p = v; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '-' && *p != '.')
			return "a cookie name has only letters, digits, _ - and .";
	return NULL;
}

static const char *check_redis_url(const char *v, char *buf, size_t len)
{
	struct redis_url u;
	const char *why = v[0] ? redis_url_parse(v, &u) : NULL;
	if (why)
		snprintf(buf, len, "%s", why);
	return why ? buf : NULL;
}

static const char *check_redis_sentinels(const char *v, char *buf, size_t len)
{
	return v[0] ? redis_sentinel_check_list(v, buf, len) : NULL;
}

/* Sentinel's own rule for a master's name: one word, sent in commands and
 * read back from space-separated messages. */
static const char *check_redis_master_name(const char *v, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	for (const char *p = v; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_-.", *p))
			return "a master name has only letters, digits, _ - and .";
	return NULL;
}

/* The name goes inside {...} in every key (a Redis Cluster hash tag), so
 * it may not hold braces; it is kept to characters that need no quoting in
 * a shell or a log. */
static const char *check_redis_stream(const char *v, char *buf, size_t len)
{
	(void)buf;
	(void)len;
	for (const char *p = v; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("_-.:", *p))
			return "a stream name has only letters, digits, _ - . and :";
	return NULL;
}

/* An on/off switch, in any of the spellings people write in INI files
 * (letter case ignored); returns NULL or the reason. */
const char *config_parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = { "on", "yes", "true", "1" }, *const no[] = { "off", "no", "false", "0" };
	for (size_t i = 0; i < ARRAY_LEN(yes); i++) {
		if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
			*out = strcasecmp(v, yes[i]) == 0;
			return NULL;
		}
	}
	return "not one of on, off, yes, no, true, false, 1, 0";
}

/* Set one key from text; returns NULL or the reason (static, or in buf). */
const char *config_key_set(struct config *cfg, const struct key *k, const char *v, char *buf, size_t len)
{
	char *base = (char *)cfg + k->off;
	int64_t n = 0;
	const char *why = NULL;

	switch (k->type) {
	case K_LIST:
		return "internal: a list is set through list_add";
	case K_STR: {
		size_t slen = strlen(v);
		if ((int64_t)slen < k->min)
			return "must not be empty";
		if ((int64_t)slen > k->max)
			return "too long";
		for (const char *p = v; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return "contains a control character";
		if (k->check && (why = k->check(v, buf, len)) != NULL)
			return why;
		char **sp = (char **)(void *)base;
		free(*sp);
		*sp = xstrdup(v);
		return NULL;
	}
	case K_LEVEL: {
		int lvl = log_level_parse(v);
		if (lvl < 0)
			return "not one of error, warning, notice, info, debug";
		*(int *)(void *)base = lvl;
		return NULL;
	}
	case K_BOOL:
		return config_parse_bool(v, (bool *)(void *)base);
	case K_CHOICE: {
		size_t at = 0;
		for (size_t i = 0; k->choices[i]; i++) {
			if (strcmp(v, k->choices[i]) == 0) {
				*(int *)(void *)base = (int)i;
				return NULL;
			}
			at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "not one of ", k->choices[i]);
			if (at >= len)
				break;
		}
		return buf;
	}
	case K_INT:
		if ((k->flags & KF_AUTO) && strcmp(v, "auto") == 0) {
			long cpus = sysconf(_SC_NPROCESSORS_ONLN);
			n = cpus < 1 ? 1 : cpus > k->max ? k->max : cpus;
			break;
		}
		why = parse_scaled(v, units_int, k->flags & KF_AUTO ? form_int_auto : form_int, &n);
		break;
	case K_MODE: {
		char *end;
		errno = 0;
		long m = strtol(v, &end, 8);
		if (!*v || *end || errno || m < 0)
			return "not an octal file mode such as 0660";
		n = m;
		break;
	}
	case K_DUR_MS:
		why = parse_scaled(v, units_ms, form_ms, &n);
		break;
	case K_DUR_S:
		why = parse_scaled(v, units_s, form_s, &n);
		break;
	case K_SIZE:
		why = parse_scaled(v, units_size, form_size, &n);
		break;
	}
	if (why)
		return why;
	if ((n < k->min || n > k->max) && !(n == 0 && (k->flags & KF_ZERO_OK)))
		return "out of range";
	if (k->off == OFF(backlog))
		*(int *)(void *)base = (int)n;
	else
		*(int64_t *)(void *)base = n;
	return NULL;
}
