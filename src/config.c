/* config.c: the key table, the value parsers, and the four sources
 * (defaults, INI file through libinih, environment, flags). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "util.h"

enum ktype { K_STR, K_INT, K_DUR_MS, K_DUR_S, K_SIZE, K_LIST, K_LEVEL, K_MODE };

struct key {
	const char *name;
	enum ktype type;
	size_t off;
	int64_t min, max;
	const char *def;
};

#define OFF(f) offsetof(struct config, f)
static const struct key keys[] = {
	{ "listen", K_LIST, OFF(listen), 0, 0, "127.0.0.1:8199" },
	{ "db", K_STR, OFF(db), 1, 4096, "var/herald.db" },
	{ "unix_mode", K_MODE, OFF(unix_mode), 0, 0777, "0660" },
	{ "backlog", K_INT, OFF(backlog), 1, 65535, "1024" },
	{ "log_level", K_LEVEL, OFF(log_level), 0, 0, "info" },
	{ "per_address_limit", K_INT, OFF(per_address_limit), 0, 1000000, "32" },
	{ "max_readers", K_INT, OFF(max_readers), 0, 10000000, "0" },
	{ "heartbeat_interval", K_DUR_MS, OFF(heartbeat_interval_ms), 100, 3600000, "15s" },
	{ "header_timeout", K_DUR_MS, OFF(header_timeout_ms), 100, 3600000, "10s" },
	{ "keepalive_timeout", K_DUR_MS, OFF(keepalive_timeout_ms), 100, 3600000, "60s" },
	{ "stall_timeout", K_DUR_MS, OFF(stall_timeout_ms), 100, 86400000, "60s" },
	{ "max_request_line", K_SIZE, OFF(max_request_line), 64, 1048576, "8192" },
	{ "max_header_bytes", K_SIZE, OFF(max_header_bytes), 256, 1048576, "16384" },
	{ "max_headers", K_INT, OFF(max_headers), 4, 128, "64" },
	{ "max_body", K_SIZE, OFF(max_body), 64, 16777216, "65536" },
	{ "queue_limit", K_SIZE, OFF(queue_limit), 4096, 1073741824, "256k" },
	{ "retention_age", K_DUR_S, OFF(retention_age_s), 0, INT64_C(3153600000), "7d" },
	{ "retention_count", K_INT, OFF(retention_count), 0, INT64_C(1000000000000), "1000000" },
	{ "publish_token", K_STR, OFF(publish_token), 0, 1024, "" },
	{ "read_token", K_STR, OFF(read_token), 0, 1024, "" },
	{ "allow_origin", K_STR, OFF(allow_origin), 0, 4096, "" },
	{ "trusted_proxies", K_STR, OFF(trusted_proxies), 0, 4096, "127.0.0.0/8,::1,unix" },
	{ "retry_ms", K_INT, OFF(retry_ms), 0, 3600000, "3000" },
	{ "rotate_after", K_DUR_MS, OFF(rotate_after_ms), 0, INT64_C(31536000000), "0" },
	{ "busy_timeout_ms", K_INT, OFF(busy_timeout_ms), 0, 1000, "5" },
	{ "tls_cert", K_STR, OFF(tls_cert), 0, 4096, "" },
	{ "tls_key", K_STR, OFF(tls_key), 0, 4096, "" },
};

static const struct key *key_find(const char *name, size_t n)
{
	for (size_t i = 0; i < ARRAY_LEN(keys); i++)
		if (strlen(keys[i].name) == n && strncmp(keys[i].name, name, n) == 0)
			return &keys[i];
	return NULL;
}

/* Parse a whole decimal number with an optional unit suffix from units[]
 * (each with its multiplier); bare numbers use the multiplier of "". */
struct unit {
	const char *suffix;
	int64_t mult;
};

static const char *parse_scaled(const char *s, const struct unit *units, int64_t *out)
{
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return "not a whole number";
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
	return NULL == units[1].suffix ? "not a whole number" : "unknown unit";
}

static const struct unit units_int[] = { { "", 1 }, { NULL, 0 } };
static const struct unit units_ms[] = { { "", 1000 },     { "ms", 1 },       { "s", 1000 }, { "m", 60000 },
					{ "h", 3600000 }, { "d", 86400000 }, { NULL, 0 } };
static const struct unit units_s[] = { { "", 1 }, { "s", 1 }, { "m", 60 }, { "h", 3600 }, { "d", 86400 }, { NULL, 0 } };
static const struct unit units_size[] = { { "", 1 },           { "b", 1 },           { "k", 1024 },
					  { "kb", 1024 },      { "m", 1048576 },     { "mb", 1048576 },
					  { "g", 1073741824 }, { "gb", 1073741824 }, { NULL, 0 } };

static void list_clear(struct config *cfg)
{
	for (size_t i = 0; i < cfg->nlisten; i++)
		free(cfg->listen[i]);
	cfg->nlisten = 0;
}

/* Split a comma-separated list into cfg->listen, replacing what was there. */
static const char *list_set(struct config *cfg, const char *v)
{
	char *copy = xstrdup(v), *save = NULL;
	list_clear(cfg);
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*t))
			t++;
		size_t n = strlen(t);
		while (n && isspace((unsigned char)t[n - 1]))
			t[--n] = '\0';
		if (!n)
			continue;
		if (cfg->nlisten == CONFIG_MAX_LISTEN) {
			free(copy);
			return "too many addresses (at most 16)";
		}
		cfg->listen[cfg->nlisten++] = xstrdup(t);
	}
	free(copy);
	return cfg->nlisten ? NULL : "needs at least one address";
}

/* Set one key from text; returns NULL or a static reason. */
static const char *key_set(struct config *cfg, const struct key *k, const char *v)
{
	char *base = (char *)cfg + k->off;
	int64_t n = 0;
	const char *why = NULL;

	switch (k->type) {
	case K_LIST:
		return list_set(cfg, v);
	case K_STR: {
		size_t len = strlen(v);
		if ((int64_t)len < k->min)
			return "must not be empty";
		if ((int64_t)len > k->max)
			return "too long";
		for (const char *p = v; *p; p++)
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				return "contains a control character";
		char **s = (char **)(void *)base;
		free(*s);
		*s = xstrdup(v);
		return NULL;
	}
	case K_LEVEL: {
		int lvl = log_level_parse(v);
		if (lvl < 0)
			return "not one of error, warning, notice, info, debug";
		*(int *)(void *)base = lvl;
		return NULL;
	}
	case K_INT:
		why = parse_scaled(v, units_int, &n);
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
		why = parse_scaled(v, units_ms, &n);
		break;
	case K_DUR_S:
		why = parse_scaled(v, units_s, &n);
		break;
	case K_SIZE:
		why = parse_scaled(v, units_size, &n);
		break;
	}
	if (why)
		return why;
	if (n < k->min || n > k->max)
		return "out of range";
	if (k->off == OFF(backlog))
		*(int *)(void *)base = (int)n;
	else
		*(int64_t *)(void *)base = n;
	return NULL;
}

static void key_range_hint(const struct key *k, char *buf, size_t len)
{
	buf[0] = '\0';
	if (k->type == K_INT || k->type == K_SIZE || k->type == K_DUR_MS || k->type == K_DUR_S) {
		const char *unit = k->type == K_DUR_MS  ? " ms"
				   : k->type == K_DUR_S ? " s"
				   : k->type == K_SIZE  ? " bytes"
							: "";
		snprintf(buf, len, " (allowed: %lld to %lld%s)", (long long)k->min, (long long)k->max, unit);
	}
}

static int set_from(struct config *cfg, const struct key *k, const char *v, const char *origin)
{
	const char *why = key_set(cfg, k, v);
	if (!why)
		return 0;
	char hint[96];
	key_range_hint(k, hint, sizeof(hint));
	/* A token is a secret: name it, never echo it into a log. Other values
	 * are quoted with control bytes escaped, so one line stays one line. */
	bool secret = k->off == OFF(publish_token) || k->off == OFF(read_token);
	char shown[600];
	size_t n = 0;
	if (secret) {
		snprintf(shown, sizeof(shown), "(value not shown)");
	} else {
		shown[n++] = '"';
		for (const char *p = v; *p && n < sizeof(shown) - 8; p++) {
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				n += (size_t)snprintf(shown + n, sizeof(shown) - n, "\\x%02x", (unsigned char)*p);
			else
				shown[n++] = *p;
		}
		shown[n++] = '"';
		shown[n] = '\0';
	}
	fprintf(stderr, "herald: %s: %s = %s: %s%s\n", origin, k->name, shown, why, hint);
	return -1;
}

/* INI file. What libinih (as Debian builds it) does not do is done in the
 * reader callback: counting lines, since the handler gets no line numbers;
 * long lines, since inih reads into a 200-byte buffer and would split a
 * longer line in two; and indented lines, which inih would fold into the
 * previous value. A long "key = value" line reaches inih as
 * "key = \x01N", and the handler takes value N from the side list. */
struct file_ctx {
	FILE *f;
	const char *path;
	int line;
	int errors;
	struct config *cfg;
	char *buf;
	size_t cap;
	char **longvals;
	size_t nlong;
};

static char *file_reader(char *str, int num, void *stream)
{
	struct file_ctx *fc = stream;
	ssize_t n = getline(&fc->buf, &fc->cap, fc->f);
	if (n < 0)
		return NULL;
	fc->line++;
	/* Leading blanks are dropped: inih would read an indented line as the
	 * continuation of the previous value and silently fold it in. */
	char *p = fc->buf;
	while (*p == ' ' || *p == '\t')
		p++;
	n -= p - fc->buf;
	if (n < num) {
		memcpy(str, p, (size_t)n + 1);
		return str;
	}
	char *eq = strpbrk(p, "=:");
	if (*p == ';' || *p == '#' || *p == '[' || !eq || eq - p > num - 24) {
		if (*p != ';' && *p != '#') {
			fprintf(stderr, "herald: %s:%d: line too long to read (%zd bytes)\n", fc->path, fc->line, n);
			fc->errors++;
		}
		snprintf(str, (size_t)num, ";\n");
		return str;
	}
	/* The value as inih would see it: trimmed, inline " ;" comment cut. */
	char *v = eq + 1, *end = fc->buf + n;
	for (char *c = v; c < end; c++)
		if (*c == ';' && c > v && (c[-1] == ' ' || c[-1] == '\t')) {
			end = c;
			break;
		}
	while (v < end && isspace((unsigned char)*v))
		v++;
	while (end > v && isspace((unsigned char)end[-1]))
		end--;
	fc->longvals = xrealloc(fc->longvals, (fc->nlong + 1) * sizeof(*fc->longvals));
	fc->longvals[fc->nlong] = xstrndup(v, (size_t)(end - v));
	snprintf(str, (size_t)num, "%.*s= \x01%zu\n", (int)(eq - p), p, fc->nlong);
	fc->nlong++;
	return str;
}

static int file_handler(void *user, const char *section, const char *name, const char *value)
{
	struct file_ctx *fc = user;
	char origin[4200];
	if (value[0] == '\x01') {
		size_t i = (size_t)strtoul(value + 1, NULL, 10);
		if (i < fc->nlong)
			value = fc->longvals[i];
	}
	snprintf(origin, sizeof(origin), "%s:%d", fc->path, fc->line);
	if (section[0] && strcmp(section, "herald") != 0) {
		fprintf(stderr, "herald: %s: unknown section [%s] (keys go at the top or under [herald])\n", origin,
			section);
		fc->errors++;
		return 1;
	}
	const struct key *k = key_find(name, strlen(name));
	if (!k) {
		fprintf(stderr, "herald: %s: unknown key \"%s\" = \"%s\"\n", origin, name, value);
		fc->errors++;
		return 1;
	}
	if (set_from(fc->cfg, k, value, origin) < 0)
		fc->errors++;
	return 1;
}

static int load_file(struct config *cfg, const char *path)
{
	struct file_ctx fc = { .path = path, .cfg = cfg };
	fc.f = fopen(path, "r");
	if (!fc.f) {
		fprintf(stderr, "herald: cannot read config file %s: %s\n", path, strerror(errno));
		return -1;
	}
	int r = ini_parse_stream(file_reader, &fc, file_handler, &fc);
	fclose(fc.f);
	free(fc.buf);
	for (size_t i = 0; i < fc.nlong; i++)
		free(fc.longvals[i]);
	free(fc.longvals);
	if (r > 0) {
		fprintf(stderr, "herald: %s:%d: not a \"key = value\" line\n", path, r);
		return -1;
	}
	if (r < 0) {
		fprintf(stderr, "herald: %s: cannot parse the file\n", path);
		return -1;
	}
	return fc.errors ? -1 : 0;
}

static int load_env(struct config *cfg)
{
	int errors = 0;
	char name[64], origin[96];
	/* BACKLOG alone is honoured for experiments (load/backlog-experiment). */
	const char *b = getenv("BACKLOG");
	if (b && *b && set_from(cfg, key_find("backlog", 7), b, "environment BACKLOG") < 0)
		errors++;
	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		size_t n = (size_t)snprintf(name, sizeof(name), "HERALD_");
		for (const char *p = keys[i].name; *p && n < sizeof(name) - 1; p++)
			name[n++] = (char)toupper((unsigned char)*p);
		name[n] = '\0';
		const char *v = getenv(name);
		if (!v)
			continue;
		snprintf(origin, sizeof(origin), "environment %s", name);
		if (set_from(cfg, &keys[i], v, origin) < 0)
			errors++;
	}
	return errors ? -1 : 0;
}

void config_usage(FILE *out)
{
	fprintf(out, "usage: herald [--config FILE] [--listen ADDR]... [--db PATH] [--backlog N]\n"
		     "              [--KEY VALUE]... [--check-config] [--help] [--version]\n"
		     "\n"
		     "Server-Sent Events from a SQLite table to many readers.\n"
		     "\n"
		     "  --config FILE     read settings from an INI file (keys as below)\n"
		     "  --check-config    validate the settings, print them, and exit\n"
		     "  --listen ADDR     127.0.0.1:8199, [::1]:8199, unix:/path or tls:ADDR; repeatable\n"
		     "  --KEY VALUE       set any configuration key (dashes or underscores)\n"
		     "  --help, --version\n"
		     "\n"
		     "Keys and defaults (environment: HERALD_<KEY>; BACKLOG also sets backlog):\n");
	for (size_t i = 0; i < ARRAY_LEN(keys); i++)
		fprintf(out, "  %-20s %s\n", keys[i].name, keys[i].def[0] ? keys[i].def : "(empty)");
}

static void defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		const char *why = key_set(cfg, &keys[i], keys[i].def);
		if (why) {
			/* A defect in the table above, not user input. */
			fprintf(stderr, "herald: built-in default for %s is invalid: %s\n", keys[i].name, why);
			abort();
		}
	}
}

/* Match "--name" or "--name=value" against a key (dashes or underscores). */
static const struct key *flag_key(const char *arg, const char **inline_value)
{
	const char *name = arg + 2;
	const char *eq = strchr(name, '=');
	size_t n = eq ? (size_t)(eq - name) : strlen(name);
	char buf[64];
	if (n >= sizeof(buf))
		return NULL;
	for (size_t i = 0; i < n; i++)
		buf[i] = name[i] == '-' ? '_' : name[i];
	*inline_value = eq ? eq + 1 : NULL;
	return key_find(buf, n);
}

static int validate(const struct config *cfg)
{
	/* allow_origin: "*" alone, or origins written scheme://host[:port]. */
	const char *o = cfg->allow_origin;
	if (o[0] && strcmp(o, "*") != 0) {
		for (const char *p = o; *p;) {
			while (*p == ' ')
				p++;
			size_t n = strcspn(p, ",");
			while (n && p[n - 1] == ' ')
				n--;
			if (!(n > 7 && strncmp(p, "http://", 7) == 0) && !(n > 8 && strncmp(p, "https://", 8) == 0)) {
				fprintf(stderr,
					"herald: allow_origin = \"%s\": each entry must be * alone or an origin "
					"such as https://example.com\n",
					o);
				return -1;
			}
			size_t host = p[4] == 's' ? 8 : 7; /* past "https://" or "http://" */
			for (size_t i = 0; i < n; i++)
				if (p[i] == ' ' || (p[i] == '/' && i >= host)) {
					fprintf(stderr,
						"herald: allow_origin = \"%s\": an origin has no spaces and no "
						"path\n",
						o);
					return -1;
				}
			p += strcspn(p, ",");
			if (*p == ',')
				p++;
		}
	}
	if ((cfg->tls_cert[0] != '\0') != (cfg->tls_key[0] != '\0')) {
		fprintf(stderr, "herald: tls_cert and tls_key must be set together\n");
		return -1;
	}
	bool tls_listen = false;
	for (size_t i = 0; i < cfg->nlisten; i++)
		if (strncmp(cfg->listen[i], "tls:", 4) == 0)
			tls_listen = true;
	if (tls_listen && cfg->tls_cert[0] == '\0') {
		fprintf(stderr, "herald: listen has a tls: address, but tls_cert and tls_key are not set\n");
		return -1;
	}
	/* Under socket activation the sockets, and which is TLS (a socket named
	 * "tls"), come from systemd; listen is not used. */
	if (!tls_listen && cfg->tls_cert[0] != '\0' && !getenv("LISTEN_FDS")) {
		fprintf(stderr, "herald: tls_cert is set, but no listen address is a tls: one "
				"(e.g. listen = 127.0.0.1:8199, tls:127.0.0.1:8443)\n");
		return -1;
	}
	return 0;
}

int config_load(struct config *cfg, int argc, char **argv, bool *check_only, int *exit_code)
{
	const char *path = NULL;
	*check_only = false;
	*exit_code = 0;

	/* First pass: the flags that decide what else to read or do. */
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			config_usage(stdout);
			return 1;
		}
		if (strcmp(a, "--version") == 0) {
			printf("herald %s\n", HERALD_VERSION);
			return 1;
		}
		if (strcmp(a, "--check-config") == 0) {
			*check_only = true;
		} else if (strcmp(a, "--config") == 0) {
			if (i + 1 >= argc) {
				fprintf(stderr, "herald: --config needs a file name\n");
				config_usage(stderr);
				*exit_code = 2;
				return -1;
			}
			path = argv[++i];
		} else if (strncmp(a, "--config=", 9) == 0) {
			path = a + 9;
		} else if (strncmp(a, "--", 2) == 0) {
			const char *iv;
			const struct key *k = flag_key(a, &iv);
			if (!k) {
				fprintf(stderr, "herald: unknown option %s\n", a);
				config_usage(stderr);
				*exit_code = 2;
				return -1;
			}
			if (!iv && ++i >= argc) {
				fprintf(stderr, "herald: option %s needs a value\n", a);
				*exit_code = 2;
				return -1;
			}
		} else {
			fprintf(stderr, "herald: unexpected argument \"%s\"\n", a);
			config_usage(stderr);
			*exit_code = 2;
			return -1;
		}
	}

	defaults(cfg);
	*exit_code = 1;
	if (path) {
		cfg->config_path = xstrdup(path);
		if (load_file(cfg, path) < 0)
			goto fail;
	}
	if (load_env(cfg) < 0)
		goto fail;

	/* Flags last. Repeated --listen flags build one list. */
	bool listen_from_flags = false;
	int errors = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *iv;
		if (strcmp(a, "--check-config") == 0 || strncmp(a, "--config=", 9) == 0)
			continue;
		if (strcmp(a, "--config") == 0) {
			i++;
			continue;
		}
		const struct key *k = flag_key(a, &iv);
		const char *v = iv ? iv : argv[++i];
		char origin[128];
		const char *eq = strchr(a, '=');
		snprintf(origin, sizeof(origin), "option %.*s", (int)(eq ? eq - a : (ptrdiff_t)strlen(a)), a);
		if (k->type == K_LIST) {
			if (!listen_from_flags)
				list_clear(cfg);
			listen_from_flags = true;
			if (cfg->nlisten == CONFIG_MAX_LISTEN) {
				fprintf(stderr, "herald: %s: too many addresses (at most 16)\n", origin);
				errors++;
				continue;
			}
			cfg->listen[cfg->nlisten++] = xstrdup(v);
			continue;
		}
		if (set_from(cfg, k, v, origin) < 0)
			errors++;
	}
	if (errors || validate(cfg) < 0)
		goto fail;
	*exit_code = 0;
	return 0;
fail:
	config_free(cfg);
	return -1;
}

void config_free(struct config *cfg)
{
	list_clear(cfg);
	for (size_t i = 0; i < ARRAY_LEN(keys); i++)
		if (keys[i].type == K_STR) {
			char **s = (char **)(void *)((char *)cfg + keys[i].off);
			free(*s);
			*s = NULL;
		}
	free(cfg->config_path);
	cfg->config_path = NULL;
}

void config_print(const struct config *cfg, FILE *out)
{
	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		const struct key *k = &keys[i];
		const char *base = (const char *)cfg + k->off;
		fprintf(out, "%s = ", k->name);
		switch (k->type) {
		case K_LIST:
			for (size_t j = 0; j < cfg->nlisten; j++)
				fprintf(out, "%s%s", j ? ", " : "", cfg->listen[j]);
			break;
		case K_STR: {
			const char *s = *(char *const *)(const void *)base;
			bool secret = k->off == OFF(publish_token) || k->off == OFF(read_token);
			fprintf(out, "%s", secret && s[0] ? "(set)" : s);
			break;
		}
		case K_LEVEL: {
			static const char *const names[] = {
				"", "", "", "error", "warning", "notice", "info", "debug"
			};
			fprintf(out, "%s", names[*(const int *)(const void *)base]);
			break;
		}
		case K_DUR_MS:
			fprintf(out, "%lldms", (long long)*(const int64_t *)(const void *)base);
			break;
		case K_MODE:
			fprintf(out, "%04llo", (long long)*(const int64_t *)(const void *)base);
			break;
		case K_DUR_S:
			fprintf(out, "%llds", (long long)*(const int64_t *)(const void *)base);
			break;
		default:
			if (k->off == OFF(backlog))
				fprintf(out, "%d", *(const int *)(const void *)base);
			else
				fprintf(out, "%lld", (long long)*(const int64_t *)(const void *)base);
		}
		fputc('\n', out);
	}
}
