/* SPDX-License-Identifier: BSD-2-Clause */
/* config.c: where the settings come from: the four sources (defaults,
 * INI file through libinih, environment, flags), and the checks of the
 * whole that need no other module once every source is read (token files,
 * keys that go together). What each key is and how its text is read is
 * config_keys.c's. Each key remembers where its value came from, in the
 * settings themselves, so that every error names it, here and in the
 * modules' own checks (config_check.c); errors go to the log. Besides log
 * and util it uses only the pure parsers config_keys.c calls, and
 * redis_url.h's redaction, which touch nothing. */
#include "core/config_private.h"
#include "redis/redis_url.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/text.h"
#include "common/util.h"
#include "core/topic.h"

/* One load in progress: the settings being built (with cfg->origin, where
 * each key's value came from), and the errors reported. */
struct load {
	struct config *cfg;
	int errors;
};

/* Report one configuration error, as an error-level log line (so that
 * under journald it carries the error priority). */
static void config_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void config_err(const char *fmt, ...)
{
	char line[1800];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_err("%s", line);
}

/* How a key is written: in a file, as a flag (--max-body), or as a
 * variable (HERALD_MAX_BODY). */
enum spelling { AS_KEY, AS_FLAG, AS_VARIABLE };

/* k's name as written in that source, into buf. Returns buf. */
static const char *key_spelled(const struct key *k, enum spelling as, char *buf, size_t len)
{
	size_t w = (size_t)snprintf(buf, len, "%s", as == AS_FLAG ? "--" : as == AS_VARIABLE ? "HERALD_" : "");
	for (const char *p = k->name; *p && w + 1 < len; p++)
		buf[w++] = as == AS_VARIABLE ? (char)toupper((unsigned char)*p) : as == AS_FLAG && *p == '_' ? '-' : *p;
	buf[w] = '\0';
	return buf;
}

/* " (did you mean K?)", K the key nearest to the unknown name (n bytes)
 * as written in that source; "" when none is near. Returns buf, which
 * holds 112 bytes for a whole answer (K is at most 79). */
static const char *did_you_mean(const char *name, size_t n, enum spelling as, char *buf, size_t len)
{
	const struct key *k = config_key_nearest(name, n);
	char shown[80];
	if (k)
		snprintf(buf, len, " (did you mean %s?)", key_spelled(k, as, shown, sizeof(shown)));
	else
		buf[0] = '\0';
	return buf;
}

static const char *origin_in(const struct config *cfg, const struct key *k)
{
	const char *o = cfg->origin ? cfg->origin[k - config_keys] : NULL;
	return o ? o : "built-in default";
}

static const char *origin_of(const struct load *ld, const struct key *k)
{
	return origin_in(ld->cfg, k);
}

/* v for a message (text_escape), in double quotes. */
static const char *quoted(const char *v, char *buf, size_t len)
{
	buf[0] = '"';
	text_escape(v, buf + 1, len - 2);
	size_t n = strlen(buf);
	buf[n] = '"';
	buf[n + 1] = '\0';
	return buf;
}

static void list_clear(struct config *cfg)
{
	for (size_t i = 0; i < cfg->nlisten; i++)
		free(cfg->listen[i]);
	cfg->nlisten = 0;
}

/* Log the error for a value of key k from origin: key, value (unless
 * secret), reason, and for numbers the range allowed. */
static void report_value(const char *origin, const struct key *k, const char *v, const char *why)
{
	char shown[600], hint[112] = "";
	if (k->type == K_INT || k->type == K_SIZE || k->type == K_DUR_MS || k->type == K_DUR_S) {
		const char *unit = k->type == K_DUR_MS  ? " ms"
				   : k->type == K_DUR_S ? " s"
				   : k->type == K_SIZE  ? " bytes"
							: "";
		snprintf(hint, sizeof(hint), " (allowed: %s%lld to %lld%s%s)", k->flags & KF_ZERO_OK ? "0, or " : "",
			 (long long)k->min, (long long)k->max, unit,
			 k->flags & KF_AUTO ? ", or auto: one per CPU" : "");
	}
	/* A token is a secret: name it, never echo it into a log. */
	char redacted[REDIS_URL_MAX + 8];
	if (k->flags & KF_URL) {
		redis_url_redact(v, redacted, sizeof(redacted));
		v = redacted;
	}
	config_err("%s: %s = %s: %s%s", origin, k->name,
		   k->flags & KF_SECRET ? "(value not shown)" : quoted(v, shown, sizeof(shown)), why, hint);
}

/* The same, counted as one of this load's errors. */
static void bad_value(struct load *ld, const char *origin, const struct key *k, const char *v, const char *why)
{
	report_value(origin, k, v, why);
	ld->errors++;
}

/* Append the comma-separated addresses in v to cfg->listen; blanks around
 * entries and empty entries are skipped. What an address means is the
 * listeners' to check (listener_check_config). Returns how many were
 * added, or -1 after reporting each bad one. */
static int list_add(struct load *ld, const struct key *k, const char *v, const char *origin)
{
	struct config *cfg = ld->cfg;
	char *copy = xstrdup(v), *save = NULL;
	int added = 0, bad = 0;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		while (isspace((unsigned char)*t))
			t++;
		size_t n = strlen(t);
		while (n && isspace((unsigned char)t[n - 1]))
			t[--n] = '\0';
		if (!n)
			continue;
		bool control = false;
		for (const char *c = t; *c; c++)
			control = control || (unsigned char)*c < 0x20 || *c == 0x7f;
		if (control) {
			/* A unix path may hold any byte; one that would break a
			 * log line or --check-config's output is refused. */
			bad_value(ld, origin, k, t, "contains a control character");
			bad++;
			continue;
		}
		if (cfg->nlisten == CONFIG_MAX_LISTEN) {
			bad_value(ld, origin, k, v, "too many addresses (at most 16)");
			bad++;
			break;
		}
		cfg->listen[cfg->nlisten++] = xstrdup(t);
		added++;
	}
	free(copy);
	if (!bad && !added) {
		bad_value(ld, origin, k, v, "needs at least one address");
		bad++;
	}
	return bad ? -1 : added;
}

static void note_origin(struct load *ld, const struct key *k, const char *origin)
{
	free(ld->cfg->origin[k - config_keys]);
	ld->cfg->origin[k - config_keys] = xstrdup(origin);
}

/* Set key k to v from origin (a whole listen list is replaced). Returns 0,
 * or -1 after reporting why. */
static int set_from(struct load *ld, const struct key *k, const char *v, const char *origin)
{
	char buf[256];
	if (k->type == K_LIST) {
		list_clear(ld->cfg);
		if (list_add(ld, k, v, origin) < 0)
			return -1;
	} else {
		const char *why = config_key_set(ld->cfg, k, v, buf, sizeof(buf));
		if (why) {
			bad_value(ld, origin, k, v, why);
			return -1;
		}
	}
	note_origin(ld, k, origin);
	return 0;
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
	struct load *ld;
	char *buf;
	size_t cap;
	char **longvals;
	size_t nlong;
	int header_line; /* the line of the newest [section] header */
	int ns_line;     /* the header line of the namespace being filled */
	struct namespace *ns;
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
	if (*p == '[')
		fc->header_line = fc->line;
	n -= p - fc->buf;
	if (n < num) {
		memcpy(str, p, (size_t)n + 1);
		return str;
	}
	char *eq = strpbrk(p, "=:");
	if (*p == ';' || *p == '#' || *p == '[' || !eq || eq - p > num - 24) {
		if (*p != ';' && *p != '#') {
			config_err("%s:%d: line too long to read (%zd bytes)", fc->path, fc->line, n);
			fc->ld->errors++;
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

/* A file value in one pair of matching double or single quotes loses them:
 * inih trims blanks around a value, so quotes are how a value keeps its
 * own, and how a value copied from a shell file reads the same. Returns a
 * new string. */
static char *unquote(const char *v)
{
	size_t n = strlen(v);
	if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0])
		return xstrndup(v + 1, n - 2);
	return xstrdup(v);
}

/* The keys a [namespace] section may set: a top-level key's name and
 * syntax (read by its parser into a scratch config, then moved), or one
 * of the namespace's own switches. */
enum ns_field {
	NSF_RETENTION_COUNT,
	NSF_RETENTION_AGE,
	NSF_PRESENCE,
	NSF_PRESENCE_EVENTS,
	NSF_MERCURE,
	NSF_MAX_READERS,
	NSF_ANONYMOUS,
	NSF_PUBLISH_TOKEN,
	NSF_AUTH_REQUEST,
	NSF_WEBHOOK_URL
};
static const struct {
	const char *name;
	enum ns_field field;
	const char *as; /* the top-level key whose parser reads it, or NULL: a switch */
} ns_keys[] = {
	{ "retention_count", NSF_RETENTION_COUNT, "retention_count" },
	{ "retention_age", NSF_RETENTION_AGE, "retention_age" },
	{ "presence", NSF_PRESENCE, "presence" },
	{ "presence_events", NSF_PRESENCE_EVENTS, "presence_events" },
	{ "mercure", NSF_MERCURE, "mercure" },
	{ "max_readers", NSF_MAX_READERS, "max_readers" },
	{ "anonymous", NSF_ANONYMOUS, NULL },
	{ "publish_needs_token", NSF_PUBLISH_TOKEN, NULL },
	{ "auth_request", NSF_AUTH_REQUEST, "auth_request" },
	{ "webhook_url", NSF_WEBHOOK_URL, "webhook_url" },
};

/* The section's pattern: `"chat/ *"` (quotes optional) after the word. */
static const char *ns_pattern(const char *rest, char *out, size_t len)
{
	while (*rest == ' ' || *rest == '\t')
		rest++;
	size_t n = strlen(rest);
	if (n >= 2 && (rest[0] == '"' || rest[0] == '\'') && rest[n - 1] == rest[0]) {
		rest++;
		n -= 2;
	}
	if (n == 0)
		return "a namespace needs a topic pattern: [namespace \"chat/*\"]";
	if (n >= len || !topic_pattern_valid(rest, n))
		return "not a topic pattern (an exact topic, or a prefix and \"/*\"; letters, digits and _ . : / -)";
	if (n == 1 && rest[0] == '*')
		return "\"*\" is every topic: the defaults are the top-level keys";
	memcpy(out, rest, n);
	out[n] = '\0';
	return NULL;
}

/* One key of a [namespace] section: the section is found or started (a
 * second section with the same pattern is an error naming the first),
 * the key checked and set. */
static void namespace_key(struct file_ctx *fc, const char *rest, const char *name, const char *value,
			  const char *origin)
{
	char pattern[129], shown[300], where[4200];
	struct load *ld = fc->ld;
	const char *why = ns_pattern(rest, pattern, sizeof(pattern));
	snprintf(where, sizeof(where), "%s:%d", fc->path, fc->header_line);
	if (why) {
		if (fc->ns_line != fc->header_line) {
			config_err("%s: [namespace%s]: %s", where, text_escape(rest, shown, sizeof(shown)), why);
			ld->errors++;
			fc->ns_line = fc->header_line;
		}
		fc->ns = NULL;
		return;
	}
	if (fc->ns_line != fc->header_line) {
		fc->ns_line = fc->header_line;
		struct namespace *prev = namespaces_named(&ld->cfg->namespaces, pattern);
		if (prev) {
			config_err("%s: [namespace \"%s\"] again: the first section is at %s (one section a pattern)",
				   where, pattern, prev->origin);
			ld->errors++;
			fc->ns = NULL;
			return;
		}
		fc->ns = namespaces_add(&ld->cfg->namespaces, pattern, where);
		if (!fc->ns) {
			config_err("%s: [namespace \"%s\"]: more than %d namespaces", where, pattern, NAMESPACE_MAX);
			ld->errors++;
			return;
		}
	}
	struct namespace *ns = fc->ns;
	if (!ns)
		return; /* its header was refused */
	size_t i = 0, n = strlen(name);
	while (i < ARRAY_LEN(ns_keys) && !config_key_name_is(ns_keys[i].name, name, n))
		i++;
	if (i == ARRAY_LEN(ns_keys)) {
		config_err(
			"%s: [namespace \"%s\"]: %s is not a namespace key (retention_count, retention_age, anonymous, "
			"publish_needs_token, presence, presence_events, max_readers, mercure, auth_request, "
			"webhook_url)",
			origin, pattern, quoted(name, shown, sizeof(shown)));
		ld->errors++;
		return;
	}
	char *v = unquote(value), buf[256];
	struct config scratch = { 0 };
	bool flag = false;
	const struct key *k = ns_keys[i].as ? config_key_named(ns_keys[i].as) : NULL;
	why = k ? config_key_set(&scratch, k, v, buf, sizeof(buf)) : config_parse_bool(v, &flag);
	if (why) {
		config_err("%s: [namespace \"%s\"] %s = %s: %s", origin, pattern, ns_keys[i].name,
			   quoted(v, shown, sizeof(shown)), why);
		ld->errors++;
		free(v);
		return;
	}
	free(v);
	switch (ns_keys[i].field) {
	case NSF_RETENTION_COUNT:
		ns->retention_count = scratch.retention_count;
		break;
	case NSF_RETENTION_AGE:
		ns->retention_age_s = scratch.retention_age_s;
		break;
	case NSF_PRESENCE:
		ns->presence = scratch.presence;
		break;
	case NSF_PRESENCE_EVENTS:
		ns->presence_events = scratch.presence_events;
		break;
	case NSF_MERCURE:
		ns->mercure = scratch.mercure;
		break;
	case NSF_MAX_READERS:
		ns->max_readers = scratch.max_readers;
		break;
	case NSF_ANONYMOUS:
		ns->anonymous = flag;
		break;
	case NSF_PUBLISH_TOKEN:
		ns->publish_token = flag;
		break;
	case NSF_AUTH_REQUEST:
		free(ns->auth_request);
		ns->auth_request = scratch.auth_request; /* taken over: "" turns the defaults' off here */
		break;
	case NSF_WEBHOOK_URL:
		free(ns->webhook_url);
		ns->webhook_url = scratch.webhook_url; /* the same */
		break;
	}
}

static int file_handler(void *user, const char *section, const char *name, const char *value)
{
	struct file_ctx *fc = user;
	char origin[4200], shown[300];
	if (value[0] == '\x01') {
		size_t i = (size_t)strtoul(value + 1, NULL, 10);
		if (i < fc->nlong)
			value = fc->longvals[i];
	}
	snprintf(origin, sizeof(origin), "%s:%d", fc->path, fc->line);
	if (strncmp(section, "namespace", 9) == 0 && (section[9] == ' ' || section[9] == '\t' || !section[9])) {
		namespace_key(fc, section + 9, name, value, origin);
		return 1;
	}
	if (section[0] && strcmp(section, "herald") != 0) {
		config_err("%s: unknown section [%s] (keys go at the top, under [herald] or under [namespace "
			   "\"PATTERN\"])",
			   origin, text_escape(section, shown, sizeof(shown)));
		fc->ld->errors++;
		return 1;
	}
	const struct key *k = config_key_find(name, strlen(name));
	if (!k) {
		char hint[112];
		config_err("%s: unknown key %s%s", origin, quoted(name, shown, sizeof(shown)),
			   did_you_mean(name, strlen(name), AS_KEY, hint, sizeof(hint)));
		fc->ld->errors++;
		return 1;
	}
	char *v = unquote(value);
	set_from(fc->ld, k, v, origin);
	free(v);
	return 1;
}

static void load_file(struct load *ld, const char *path)
{
	struct file_ctx fc = { .path = path, .ld = ld };
	fc.f = fopen(path, "r");
	if (!fc.f) {
		config_err("cannot read config file %s: %s", path, strerror(errno));
		ld->errors++;
		return;
	}
	int r = ini_parse_stream(file_reader, &fc, file_handler, &fc);
	fclose(fc.f);
	free(fc.buf);
	for (size_t i = 0; i < fc.nlong; i++)
		free(fc.longvals[i]);
	free(fc.longvals);
	if (r > 0) {
		config_err("%s:%d: not a \"key = value\" line", path, r);
		ld->errors++;
	} else if (r < 0) {
		config_err("%s: cannot parse the file", path);
		ld->errors++;
	}
}

/* Variables named HERALD_* that are not keys but are set by herald's own
 * build and test tools (Makefile, tests/run.py), which start herald with
 * them in its environment. Any other unknown HERALD_* is a mistake. */
static const char *const env_not_keys[] = { "HERALD_BIN", "HERALD_BUILD", "HERALD_TEST_JOBS" };

/* The key whose variable is exactly name ("HERALD_" and the key in upper
 * case), or NULL. */
static const struct key *env_key(const char *name, size_t n)
{
	for (size_t i = 0; i < config_nkeys; i++) {
		const char *k = config_keys[i].name;
		size_t j = 0;
		while (7 + j < n && k[j] && name[7 + j] == toupper((unsigned char)k[j]))
			j++;
		if (7 + j == n && !k[j])
			return &config_keys[i];
	}
	return NULL;
}

/* An unknown HERALD_* variable: name it, and the key it may have meant
 * (its name in another letter case, or one near it). */
static void env_unknown(struct load *ld, const char *name, size_t n)
{
	char shown[300], lower[128], hint[112];
	size_t m = 0;
	for (size_t i = 7; i < n && m < sizeof(lower) - 1; i++)
		lower[m++] = (char)tolower((unsigned char)name[i]);
	lower[m] = '\0';
	char *v = xstrndup(name, n);
	const struct key *k = config_key_find(lower, m);
	if (k) {
		config_err("environment %s: unknown variable; the key %s is set by %s", quoted(v, shown, sizeof(shown)),
			   k->name, key_spelled(k, AS_VARIABLE, hint, sizeof(hint)));
	} else {
		config_err("environment %s: unknown variable: herald has no key %s%s", quoted(v, shown, sizeof(shown)),
			   lower,
			   did_you_mean(lower, m, AS_VARIABLE, hint, sizeof(hint))[0] ? hint : " (see herald --help)");
	}
	free(v);
	ld->errors++;
}

static void load_env(struct load *ld)
{
	extern char **environ;
	char origin[160];
	/* BACKLOG alone is honoured for experiments (load/backlog-experiment). */
	const char *b = getenv("BACKLOG");
	if (b && *b)
		set_from(ld, config_key_named("backlog"), b, "environment BACKLOG");
	for (char **e = environ; *e; e++) {
		if (strncmp(*e, "HERALD_", 7) != 0)
			continue;
		size_t n = strcspn(*e, "=");
		bool tool = false;
		for (size_t i = 0; i < ARRAY_LEN(env_not_keys); i++)
			tool |= strlen(env_not_keys[i]) == n && strncmp(*e, env_not_keys[i], n) == 0;
		if (tool)
			continue;
		const struct key *k = env_key(*e, n);
		if (!k) {
			env_unknown(ld, *e, n);
			continue;
		}
		snprintf(origin, sizeof(origin), "environment %.*s", (int)n, *e);
		set_from(ld, k, (*e)[n] ? *e + n + 1 : "", origin);
	}
}

void config_usage(FILE *out)
{
	fprintf(out, "usage: herald [--config FILE] [--listen ADDR[,ADDR...]]... [--db PATH] [--backlog N]\n"
		     "              [--KEY VALUE]... [--check-config] [--redis-function] [--help] [--version]\n"
		     "\n"
		     "Server-Sent Events from a SQLite table (or a Redis stream) to many readers.\n"
		     "\n"
		     "  --config FILE     read settings from an INI file (keys as below)\n"
		     "  --check-config    validate the settings, print them, and exit\n"
		     "  --listen ADDR     127.0.0.1:8199, [::1]:8199, unix:/path or tls:ADDR;\n"
		     "                    comma-separated, repeatable\n"
		     "  --KEY VALUE       set any configuration key (dashes or underscores)\n"
		     "  --redis-function  print the Redis function library herald loads, and exit\n"
		     "  --help, --version\n"
		     "\n"
		     "Keys and defaults (environment: HERALD_<KEY>; BACKLOG also sets backlog):\n");
	for (size_t i = 0; i < config_nkeys; i++)
		fprintf(out, "  %-20s %s\n", config_keys[i].name,
			config_keys[i].def[0] ? config_keys[i].def : "(empty)");
}

static void defaults(struct load *ld)
{
	char buf[256];
	memset(ld->cfg, 0, sizeof(*ld->cfg));
	ld->cfg->origin = xcalloc(config_nkeys, sizeof(*ld->cfg->origin));
	for (size_t i = 0; i < config_nkeys; i++) {
		const char *why = NULL;
		if (config_keys[i].type == K_LIST)
			ld->cfg->listen[ld->cfg->nlisten++] = xstrdup(config_keys[i].def);
		else
			why = config_key_set(ld->cfg, &config_keys[i], config_keys[i].def, buf, sizeof(buf));
		if (why) {
			/* A defect in the table above, not user input. */
			fprintf(stderr, "herald: built-in default for %s is invalid: %s\n", config_keys[i].name, why);
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
	*inline_value = eq ? eq + 1 : NULL;
	return config_key_find(name, n);
}

/* Read at most len bytes of the regular file path into buf. Returns the
 * count, or -1 with the reason in *why. O_NONBLOCK: a FIFO must not hang
 * the load (it is refused as not a regular file). */
static ssize_t read_small_file(const char *path, char *buf, size_t len, const char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	struct stat st;
	ssize_t n = 0, r = 1;
	*why = NULL;
	if (fd < 0 || fstat(fd, &st) < 0)
		*why = strerror(errno);
	else if (S_ISDIR(st.st_mode))
		*why = strerror(EISDIR);
	else if (!S_ISREG(st.st_mode))
		*why = "not a regular file";
	while (!*why && r > 0 && (size_t)n < len) {
		r = read(fd, buf + n, len - (size_t)n);
		if (r < 0)
			*why = strerror(errno);
		else
			n += r;
	}
	if (fd >= 0)
		close(fd);
	return *why ? -1 : n;
}

/* Read a token from the file named by key kf (whose value is path) into
 * *token, the value of key kt: one trailing LF or CRLF is dropped; an
 * empty, unreadable or too long file, or a control character, is an error
 * naming the key and the path, never the content. Returns 0 or -1. */
static int read_token_file(struct load *ld, const struct key *kf, const struct key *kt, const char *path, char **token)
{
	char buf[1100], why_buf[96];
	const char *why;
	ssize_t n = read_small_file(path, buf, sizeof(buf), &why);
	if (n > 0 && buf[n - 1] == '\n')
		n -= n > 1 && buf[n - 2] == '\r' ? 2 : 1;
	if (n == 0) {
		why = "the file is empty";
	} else if (n > kt->max) {
		snprintf(why_buf, sizeof(why_buf), "the token in it is too long (at most %lld bytes)",
			 (long long)kt->max);
		why = why_buf;
	}
	for (ssize_t i = 0; !why && i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			why = "the token in it contains a control character (only one line end is dropped)";
	if (!why) {
		free(*token);
		*token = xstrndup(buf, (size_t)n);
	}
	explicit_bzero(buf, sizeof(buf));
	if (why)
		bad_value(ld, origin_of(ld, kf), kf, path, why);
	return why ? -1 : 0;
}

/* The tokens that may come from a file: set one way or the other. */
static void resolve_tokens(struct load *ld)
{
	static const char *const names[] = { "publish_token", "read_token", "metrics_token", "presence_token",
					     "webhook_secret" };
	char fname[64];
	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		snprintf(fname, sizeof(fname), "%s_file", names[i]);
		const struct key *kt = config_key_named(names[i]), *kf = config_key_named(fname);
		char **token = (char **)(void *)((char *)ld->cfg + kt->off);
		const char *path = *(char **)(void *)((char *)ld->cfg + kf->off);
		if (!path[0])
			continue;
		if ((*token)[0]) {
			config_err("%s: %s is set, and so is %s (%s): set only one", origin_of(ld, kt), kt->name,
				   kf->name, origin_of(ld, kf));
			ld->errors++;
			continue;
		}
		read_token_file(ld, kf, kt, path, token);
	}
}

/* Checks of keys that depend on each other, once every source is read. */
static void check_whole(struct load *ld)
{
	resolve_tokens(ld);
	if (ld->cfg->metrics_mode == METRICS_TOKEN && !ld->cfg->metrics_token[0]) {
		config_err("%s: metrics_access = \"token\" needs metrics_token or metrics_token_file",
			   origin_of(ld, config_key_named("metrics_access")));
		ld->errors++;
	}
	if (ld->cfg->presence_mode == METRICS_TOKEN && !ld->cfg->presence_token[0]) {
		config_err("%s: presence_access = \"token\" needs presence_token or presence_token_file",
			   origin_of(ld, config_key_named("presence_access")));
		ld->errors++;
	}
	const struct config *c = ld->cfg;
	if (c->redis_sentinels[0] && c->redis_url[0]) {
		config_err("%s: redis_sentinels is set, and so is redis_url (%s): set only one (with Sentinel, "
			   "herald finds the primary itself)",
			   origin_of(ld, config_key_named("redis_sentinels")),
			   origin_of(ld, config_key_named("redis_url")));
		ld->errors++;
	}
	if (c->redis_sentinels[0] && !c->redis_master_name[0]) {
		config_err("%s: redis_sentinels needs redis_master_name (the name the sentinels monitor the "
			   "primary by)",
			   origin_of(ld, config_key_named("redis_sentinels")));
		ld->errors++;
	}
	if (c->mercure_subscriptions && !c->presence) {
		/* The presence registry keeps the subscriptions: without it
		 * the subscription API would answer 404. */
		config_err("%s: mercure_subscriptions = on needs presence = on (%s sets it off): the active "
			   "subscriptions are kept by presence",
			   origin_of(ld, config_key_named("mercure_subscriptions")),
			   origin_of(ld, config_key_named("presence")));
		ld->errors++;
	}
	if (c->redis_master_name[0] && !c->redis_sentinels[0]) {
		config_err("%s: redis_master_name is set without redis_sentinels",
			   origin_of(ld, config_key_named("redis_master_name")));
		ld->errors++;
	}
}

/* A bad command line: "<before><arg><after>", then the usage; exit code 2. */
static int cmdline_error(int *exit_code, bool usage, const char *before, const char *arg, const char *after)
{
	char shown[300];
	config_err("%s%s%s", before, text_escape(arg, shown, sizeof(shown)), after);
	if (usage)
		config_usage(stderr);
	*exit_code = 2;
	return -1;
}

/* The words that are commands to main (config_load returns 1 at the first
 * one), not settings. */
static const char *const commands[] = { "--help", "-h", "--version", "--redis-function" };

/* First pass over argv: the flags that decide what else to read or do, and
 * a bad command line reported before anything is read. Returns 0, 1 at one
 * of main's commands (in *command), or -1. */
static int scan_args(int argc, char **argv, const char **path, bool *check_only, const char **command, int *exit_code)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		for (size_t c = 0; c < ARRAY_LEN(commands); c++) {
			if (strcmp(a, commands[c]) == 0) {
				*command = a;
				return 1;
			}
		}
		if (strcmp(a, "--check-config") == 0) {
			*check_only = true;
		} else if (strcmp(a, "--config") == 0) {
			if (i + 1 >= argc)
				return cmdline_error(exit_code, true, "", a, " needs a file name");
			*path = argv[++i];
		} else if (strncmp(a, "--config=", 9) == 0) {
			*path = a + 9;
		} else if (strncmp(a, "--", 2) == 0) {
			const char *iv;
			if (!flag_key(a, &iv)) {
				char hint[112];
				size_t n = strcspn(a + 2, "=");
				return cmdline_error(exit_code, true, "unknown option ", a,
						     did_you_mean(a + 2, n, AS_FLAG, hint, sizeof(hint)));
			}
			if (!iv && ++i >= argc)
				return cmdline_error(exit_code, false, "option ", a, " needs a value");
		} else {
			return cmdline_error(exit_code, true, "unexpected argument \"", a, "\"");
		}
	}
	return 0;
}

/* Flags last. Repeated --listen flags build one list, replacing the one
 * from the file or the environment; each may hold several addresses. */
static void load_flags(struct load *ld, int argc, char **argv)
{
	bool listen_from_flags = false;
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
		if (k->type != K_LIST) {
			set_from(ld, k, v, origin);
			continue;
		}
		if (!listen_from_flags)
			list_clear(ld->cfg);
		listen_from_flags = true;
		if (list_add(ld, k, v, origin) >= 0)
			note_origin(ld, k, origin);
	}
}

/* The defaults as a namespace, and every section's unset fields from
 * them; a switch a section turns on that the top level has off entirely
 * (presence, mercure: what serves them is not running) is an error. */
static void resolve_namespaces(struct load *ld)
{
	struct config *cfg = ld->cfg;
	struct namespace *d = &cfg->ns_defaults;
	*d = (struct namespace){ .retention_count = cfg->retention_count,
				 .retention_age_s = cfg->retention_age_s,
				 .anonymous = 1,
				 .publish_token = 0,
				 .presence = cfg->presence,
				 .presence_events = cfg->presence_events,
				 .mercure = cfg->mercure,
				 .max_readers = 0,
				 .auth_request = cfg->auth_request, /* lent: the settings own them */
				 .webhook_url = cfg->webhook_url };
	for (size_t i = 0; i < cfg->namespaces.n; i++) {
		struct namespace *ns = &cfg->namespaces.ns[i];
		if (ns->presence == 1 && !cfg->presence) {
			config_err(
				"%s: [namespace \"%s\"] presence = on, but presence is off at the top level (a restart "
				"with presence = on starts it)",
				ns->origin, ns->pattern);
			ld->errors++;
		}
		if (ns->presence_events == 1 && !cfg->presence_events) {
			config_err("%s: [namespace \"%s\"] presence_events = on, but presence_events is off at the top "
				   "level (a namespace can only turn them off)",
				   ns->origin, ns->pattern);
			ld->errors++;
		}
		if (ns->mercure == 1 && !cfg->mercure) {
			config_err("%s: [namespace \"%s\"] mercure = on, but the Mercure hub is off at the top level",
				   ns->origin, ns->pattern);
			ld->errors++;
		}
		if (ns->publish_token == 1 && !cfg->publish_token[0] && !cfg->jwt_algorithm[0]) {
			config_err("%s: [namespace \"%s\"] publish_needs_token = on, but no token can be checked: set "
				   "publish_token or jwt_algorithm",
				   ns->origin, ns->pattern);
			ld->errors++;
		}
		namespace_inherit(ns, d);
	}
}

int config_load(struct config *cfg, int argc, char **argv, bool *check_only, const char **command, int *exit_code)
{
	const char *path = NULL;
	*check_only = false;
	*command = NULL;
	*exit_code = 0;
	int r = scan_args(argc, argv, &path, check_only, command, exit_code);
	if (r != 0)
		return r;

	struct load ld = { .cfg = cfg };
	defaults(&ld);
	if (path) {
		cfg->config_path = xstrdup(path);
		load_file(&ld, path);
	}
	/* Every source is read even after an error, so that one run reports
	 * every mistake; the checks of the whole need valid parts. */
	load_env(&ld);
	load_flags(&ld, argc, argv);
	if (!ld.errors)
		check_whole(&ld);
	if (!ld.errors)
		resolve_namespaces(&ld);
	/* Checked when set (check_proxies), so this cannot fail now. */
	char err[256];
	if (!ld.errors && trust_parse(&cfg->trust, cfg->trusted_proxies, err, sizeof(err)) < 0)
		ld.errors++;
	if (ld.errors) {
		*exit_code = 1;
		config_free(cfg);
		return -1;
	}
	return 0;
}

const struct namespace *config_rules(const struct config *cfg, const char *topic, size_t n)
{
	int i = namespace_of(&cfg->namespaces, topic, n);
	return i < 0 ? &cfg->ns_defaults : &cfg->namespaces.ns[i];
}

void config_free(struct config *cfg)
{
	list_clear(cfg);
	for (size_t i = 0; i < config_nkeys; i++)
		if (config_keys[i].type == K_STR) {
			char **s = (char **)(void *)((char *)cfg + config_keys[i].off);
			if (*s && (config_keys[i].flags & KF_SECRET))
				explicit_bzero(*s, strlen(*s));
			free(*s);
			*s = NULL;
		}
	free(cfg->config_path);
	cfg->config_path = NULL;
	namespaces_free(&cfg->namespaces);
	if (cfg->origin) {
		for (size_t i = 0; i < config_nkeys; i++)
			free(cfg->origin[i]);
		free(cfg->origin);
		cfg->origin = NULL;
	}
}

const char *config_origin(const struct config *cfg, const char *key)
{
	const struct key *k = config_key_named(key);
	return k ? origin_in(cfg, k) : "unknown key";
}

void config_bad_value(const struct config *cfg, const char *key, const char *value, const char *why)
{
	const struct key *k = config_key_named(key);
	if (k)
		report_value(origin_in(cfg, k), k, value, why);
	else
		config_err("%s: %s", key, why);
}

/* Whether key k holds the same value in a and b. */
static bool same_value(const struct config *a, const struct config *b, const struct key *k)
{
	const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
	switch (k->type) {
	case K_LIST:
		if (a->nlisten != b->nlisten)
			return false;
		for (size_t i = 0; i < a->nlisten; i++)
			if (strcmp(a->listen[i], b->listen[i]) != 0)
				return false;
		return true;
	case K_STR:
		return strcmp(*(char *const *)(const void *)pa, *(char *const *)(const void *)pb) == 0;
	case K_LEVEL:
	case K_CHOICE:
		return *(const int *)(const void *)pa == *(const int *)(const void *)pb;
	case K_BOOL:
		return *(const bool *)(const void *)pa == *(const bool *)(const void *)pb;
	default:
		if (k->off == OFF(backlog))
			return *(const int *)(const void *)pa == *(const int *)(const void *)pb;
		return *(const int64_t *)(const void *)pa == *(const int64_t *)(const void *)pb;
	}
}

void config_keep_restart_keys(struct config *fresh, struct config *cur, void (*changed)(const char *key, void *arg),
			      void *arg)
{
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct key *k = &config_keys[i];
		if (!(k->flags & KF_RESTART))
			continue;
		if (!same_value(fresh, cur, k))
			changed(k->name, arg);
		char *to = (char *)fresh + k->off, *from = (char *)cur + k->off;
		switch (k->type) {
		case K_LIST:
			list_clear(fresh);
			memcpy(fresh->listen, cur->listen, sizeof(fresh->listen));
			fresh->nlisten = cur->nlisten;
			cur->nlisten = 0;
			break;
		case K_STR:
			free(*(char **)(void *)to);
			*(char **)(void *)to = *(char **)(void *)from;
			*(char **)(void *)from = NULL;
			break;
		case K_LEVEL:
		case K_CHOICE:
			*(int *)(void *)to = *(int *)(void *)from;
			break;
		case K_BOOL:
			*(bool *)(void *)to = *(bool *)(void *)from;
			break;
		default:
			if (k->off == OFF(backlog))
				*(int *)(void *)to = *(int *)(void *)from;
			else
				*(int64_t *)(void *)to = *(int64_t *)(void *)from;
		}
		/* The origin goes with the value it names. */
		if (fresh->origin && cur->origin) {
			free(fresh->origin[i]);
			fresh->origin[i] = cur->origin[i];
			cur->origin[i] = NULL;
		}
	}
}

void config_print(const struct config *cfg, FILE *out)
{
	for (size_t i = 0; i < config_nkeys; i++) {
		const struct key *k = &config_keys[i];
		const char *base = (const char *)cfg + k->off;
		fprintf(out, "%s = ", k->name);
		switch (k->type) {
		case K_LIST:
			for (size_t j = 0; j < cfg->nlisten; j++)
				fprintf(out, "%s%s", j ? ", " : "", cfg->listen[j]);
			break;
		case K_STR: {
			const char *s = *(char *const *)(const void *)base;
			if (k->flags & KF_URL) {
				char shown[REDIS_URL_MAX + 8];
				redis_url_redact(s, shown, sizeof(shown));
				fprintf(out, "%s", shown);
			} else {
				fprintf(out, "%s", (k->flags & KF_SECRET) && s[0] ? "(set)" : s);
			}
			break;
		}
		case K_LEVEL:
			fprintf(out, "%s", log_level_name(*(const int *)(const void *)base));
			break;
		case K_CHOICE:
			fprintf(out, "%s", k->choices[*(const int *)(const void *)base]);
			break;
		case K_BOOL:
			fprintf(out, "%s", *(const bool *)(const void *)base ? "on" : "off");
			break;
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
