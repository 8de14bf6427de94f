/* SPDX-License-Identifier: BSD-2-Clause */
/* test_config.c: config_load_checked (the values, then the modules' checks
 * of config_check.h) from argv arrays, temporary INI files and the
 * environment: defaults, precedence (defaults < file < env < flags), value
 * syntax (durations, sizes, lists), every kind of refusal with its message
 * (file:line, key and value on stderr, captured through a temp file), exit
 * codes, --listen, --check-config, main's commands, origins, the keys a
 * reload keeps, reloading and config_print. ASan's leak checker at exit
 * covers config_free. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "core/config.h"
#include "server/config_check.h"
#include "auth/jwt.h"
#include "net/listener.h"

static char tmpdir[64];
static int nfiles;

/* Write text to a new file in the temp folder; returns its path (static
 * storage, a few at a time). */
static const char *write_file(const char *text)
{
	static char paths[8][128];
	char *p = paths[nfiles % 8];
	snprintf(p, sizeof(paths[0]), "%s/c%d.ini", tmpdir, nfiles++);
	FILE *f = fopen(p, "w");
	if (!f) {
		perror(p);
		exit(2);
	}
	fputs(text, f);
	fclose(f);
	return p;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return strdup("");
	size_t cap = 4096, n = 0;
	char *s = malloc(cap);
	size_t k;
	while ((k = fread(s + n, 1, cap - n - 1, f)) > 0) {
		n += k;
		if (n + 1 == cap)
			s = realloc(s, cap *= 2);
	}
	s[n] = '\0';
	fclose(f);
	return s;
}

struct res {
	int r, code;
	bool check;
	char *err;           /* everything written to stderr */
	char *out;           /* and to stdout */
	const char *command; /* one of main's commands, when r is 1 */
};

static struct config cfg;
static struct res last;

/* config_load(argv = "herald" + args) with stdout and stderr captured. The
 * loaded config stays in cfg until the next call (freed there). */
static const struct res *load_argv(int argc, char **argv)
{
	config_free(&cfg);
	memset(&cfg, 0, sizeof(cfg));
	free(last.err);
	free(last.out);
	memset(&last, 0, sizeof(last));

	char ep[128], op[128];
	snprintf(ep, sizeof(ep), "%s/stderr", tmpdir);
	snprintf(op, sizeof(op), "%s/stdout", tmpdir);
	fflush(stdout);
	fflush(stderr);
	int save_err = dup(2), save_out = dup(1);
	int efd = open(ep, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int ofd = open(op, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (save_err < 0 || save_out < 0 || efd < 0 || ofd < 0) {
		perror("capture");
		exit(2);
	}
	dup2(efd, 2);
	dup2(ofd, 1);
	close(efd);
	close(ofd);
	last.r = config_load_checked(&cfg, argc, argv, &last.check, &last.command, &last.code);
	fflush(stdout);
	fflush(stderr);
	dup2(save_err, 2);
	dup2(save_out, 1);
	close(save_err);
	close(save_out);
	last.err = slurp(ep);
	last.out = slurp(op);
	return &last;
}

/* load("--flag", "value", ..., NULL) */
static const struct res *load(const char *first, ...)
{
	char *argv[64];
	int argc = 0;
	argv[argc++] = "herald";
	va_list ap;
	va_start(ap, first);
	for (const char *a = first; a && argc < 63; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return load_argv(argc, argv);
}

static const struct res *load_file(const char *text)
{
	return load("--config", write_file(text), NULL);
}

static bool err_has(const char *needle)
{
	bool ok = strstr(last.err, needle) != NULL;
	if (!ok)
		fprintf(stderr, "  stderr lacks \"%s\"; it was: %s\n", needle, last.err);
	return ok;
}

/* A refused value: -1, exit code 1, and the message names the origin, the
 * key and the quoted value. */
static bool refused_with(const char *origin, const char *key, const char *value)
{
	char q[512];
	snprintf(q, sizeof(q), "%s = \"%s\"", key, value);
	bool ok = last.r == -1 && last.code == 1;
	if (!ok)
		fprintf(stderr, "  expected a refusal of %s, got r=%d code=%d\n", q, last.r, last.code);
	return ok && err_has(origin) && err_has(q);
}

/* Remove every HERALD_* variable (and BACKLOG); unsetenv moves environ
 * about, so start over after each removal. */
static void clear_env(void)
{
	extern char **environ;
	for (bool again = true; again;) {
		again = false;
		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "HERALD_", 7) != 0)
				continue;
			char name[256];
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
			unsetenv(name);
			again = true;
			break;
		}
	}
	unsetenv("BACKLOG");
}

static bool listen_is(const char *a, const char *b, const char *c)
{
	const char *want[3] = { a, b, c };
	size_t n = 0;
	while (n < 3 && want[n])
		n++;
	bool ok = cfg.nlisten == n;
	for (size_t i = 0; ok && i < n; i++)
		ok = strcmp(cfg.listen[i], want[i]) == 0;
	if (!ok) {
		fprintf(stderr, "  listen is [");
		for (size_t i = 0; i < cfg.nlisten; i++)
			fprintf(stderr, "%s\"%s\"", i ? ", " : "", cfg.listen[i]);
		fprintf(stderr, "]\n");
	}
	return ok;
}

static void test_defaults(void)
{
	const struct res *r = load(NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(r->code, 0);
	CHECK(!r->check);
	CHECK(r->err[0] == '\0');
	CHECK(listen_is("127.0.0.1:8199", NULL, NULL));
	CHECK(strcmp(cfg.db, "var/herald.db") == 0);
	CHECK_EQ_INT(cfg.backlog, 1024);
	CHECK_EQ_INT(cfg.log_level, 6);
	CHECK_EQ_INT(cfg.per_address_limit, 32);
	CHECK_EQ_INT(cfg.max_readers, 0);
	CHECK_EQ_INT(cfg.heartbeat_interval_ms, 15000);
	CHECK_EQ_INT(cfg.header_timeout_ms, 10000);
	CHECK_EQ_INT(cfg.keepalive_timeout_ms, 60000);
	CHECK_EQ_INT(cfg.stall_timeout_ms, 60000);
	CHECK_EQ_INT(cfg.max_request_line, 8192);
	CHECK_EQ_INT(cfg.max_header_bytes, 16384);
	CHECK_EQ_INT(cfg.max_headers, 64);
	CHECK_EQ_INT(cfg.max_body, 65536);
	CHECK_EQ_INT(cfg.queue_limit, 262144);
	CHECK_EQ_INT(cfg.retention_age_s, 7 * 86400);
	CHECK_EQ_INT(cfg.retention_count, 1000000);
	CHECK(strcmp(cfg.publish_token, "") == 0);
	CHECK(strcmp(cfg.read_token, "") == 0);
	CHECK(strcmp(cfg.trusted_proxies, "127.0.0.0/8,::1,unix") == 0);
	CHECK_EQ_INT(cfg.retry_ms, 3000);
	CHECK_EQ_INT(cfg.rotate_after_ms, 0);
	CHECK_EQ_INT(cfg.busy_timeout_ms, 5);
	CHECK(cfg.config_path == NULL);
}

static void test_file(void)
{
	const char *path = write_file("; a comment\n"
				      "# another\n"
				      "\n"
				      "listen = 127.0.0.1:0, [::1]:0 ,unix:/tmp/h.sock\n"
				      "db=/tmp/x.db\n"
				      "backlog   =   77  \n"
				      "log_level = debug\n"
				      "per_address_limit = 0\n"
				      "max_readers = 5000\n"
				      "[herald]\n"
				      "heartbeat_interval = 250ms\n"
				      "header_timeout = 2\n"
				      "keepalive_timeout = 1m\n"
				      "stall_timeout = 1h\n"
				      "max_request_line = 1k\n"
				      "max_header_bytes = 32KB\n"
				      "max_headers = 4\n"
				      "max_body = 1m\n"
				      "queue_limit = 4096\n"
				      "retention_age = 30m\n"
				      "retention_count = 0\n"
				      "publish_token = pub-secret\n"
				      "read_token = read-secret\n"
				      "trusted_proxies = 10.0.0.0/8\n"
				      "retry_ms = 0\n"
				      "rotate_after = 2h\n"
				      "busy_timeout_ms = 1000\n");
	const struct res *r = load("--config", path, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK(r->err[0] == '\0');
	CHECK(cfg.config_path && strcmp(cfg.config_path, path) == 0);
	CHECK(listen_is("127.0.0.1:0", "[::1]:0", "unix:/tmp/h.sock"));
	CHECK(strcmp(cfg.db, "/tmp/x.db") == 0);
	CHECK_EQ_INT(cfg.backlog, 77);
	CHECK_EQ_INT(cfg.log_level, 7);
	CHECK_EQ_INT(cfg.per_address_limit, 0);
	CHECK_EQ_INT(cfg.max_readers, 5000);
	CHECK_EQ_INT(cfg.heartbeat_interval_ms, 250);
	CHECK_EQ_INT(cfg.header_timeout_ms, 2000);
	CHECK_EQ_INT(cfg.keepalive_timeout_ms, 60000);
	CHECK_EQ_INT(cfg.stall_timeout_ms, 3600000);
	CHECK_EQ_INT(cfg.max_request_line, 1024);
	CHECK_EQ_INT(cfg.max_header_bytes, 32768);
	CHECK_EQ_INT(cfg.max_headers, 4);
	CHECK_EQ_INT(cfg.max_body, 1048576);
	CHECK_EQ_INT(cfg.queue_limit, 4096);
	CHECK_EQ_INT(cfg.retention_age_s, 1800);
	CHECK_EQ_INT(cfg.retention_count, 0);
	CHECK(strcmp(cfg.publish_token, "pub-secret") == 0);
	CHECK(strcmp(cfg.read_token, "read-secret") == 0);
	CHECK(strcmp(cfg.trusted_proxies, "10.0.0.0/8") == 0);
	CHECK_EQ_INT(cfg.retry_ms, 0);
	CHECK_EQ_INT(cfg.rotate_after_ms, 7200000);
	CHECK_EQ_INT(cfg.busy_timeout_ms, 1000);

	/* --config=FILE, a later key wins, CRLF line ends, an empty token. */
	path = write_file("backlog = 5\r\nbacklog = 6\r\npublish_token =\r\n");
	char arg[160];
	snprintf(arg, sizeof(arg), "--config=%s", path);
	r = load(arg, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 6);
	CHECK(strcmp(cfg.publish_token, "") == 0);

	/* An empty file is all defaults. */
	r = load_file("");
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 1024);

	/* A missing file. */
	r = load("--config", "/nonexistent/herald.ini", NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 1);
	CHECK(err_has("/nonexistent/herald.ini"));
}

static void test_precedence(void)
{
	const char *path = write_file("backlog = 100\n"
				      "heartbeat_interval = 1s\n"
				      "db = from-file.db\n"
				      "listen = 127.0.0.1:1,127.0.0.1:2\n"
				      "read_token = file\n");
	const struct res *r = load("--config", path, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 100);
	CHECK_EQ_INT(cfg.heartbeat_interval_ms, 1000);
	CHECK(strcmp(cfg.db, "from-file.db") == 0);
	CHECK(listen_is("127.0.0.1:1", "127.0.0.1:2", NULL));

	/* The environment beats the file. */
	setenv("HERALD_BACKLOG", "200", 1);
	setenv("HERALD_HEARTBEAT_INTERVAL", "2s", 1);
	setenv("HERALD_DB", "from-env.db", 1);
	setenv("HERALD_LISTEN", " 127.0.0.1:3 ", 1);
	setenv("HERALD_READ_TOKEN", "", 1); /* set but empty: empty wins */
	r = load("--config", path, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 200);
	CHECK_EQ_INT(cfg.heartbeat_interval_ms, 2000);
	CHECK(strcmp(cfg.db, "from-env.db") == 0);
	CHECK(listen_is("127.0.0.1:3", NULL, NULL));
	CHECK(strcmp(cfg.read_token, "") == 0);

	/* Flags beat both; repeated --listen builds one list. */
	r = load("--config", path, "--backlog", "300", "--heartbeat-interval=3s", "--db", "from-flag.db", "--listen",
		 "127.0.0.1:4", "--listen=[::1]:5", "--read_token", "flag", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 300);
	CHECK_EQ_INT(cfg.heartbeat_interval_ms, 3000);
	CHECK(strcmp(cfg.db, "from-flag.db") == 0);
	CHECK(listen_is("127.0.0.1:4", "[::1]:5", NULL));
	CHECK(strcmp(cfg.read_token, "flag") == 0);
	/* Flag order does not matter against --config. */
	r = load("--backlog", "301", "--config", path, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 301);
	/* A repeated flag: the last one wins. */
	r = load("--backlog", "1", "--backlog", "2", NULL);
	CHECK_EQ_INT(cfg.backlog, 2);

	/* Unset again: the file's values return. */
	clear_env();
	r = load("--config", path, NULL);
	CHECK_EQ_INT(cfg.backlog, 100);
	CHECK(strcmp(cfg.db, "from-file.db") == 0);
	CHECK(strcmp(cfg.read_token, "file") == 0);

	/* BACKLOG alone also sets backlog; a flag still wins. */
	setenv("BACKLOG", "50", 1);
	r = load("--config", path, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 50);
	r = load("--backlog", "51", NULL);
	CHECK_EQ_INT(cfg.backlog, 51);
	setenv("BACKLOG", "", 1); /* empty: ignored */
	r = load(NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 1024);
	setenv("BACKLOG", "0", 1);
	r = load(NULL);
	CHECK(refused_with("environment BACKLOG", "backlog", "0"));
	clear_env();

	/* Every key as HERALD_<KEY>. */
	setenv("HERALD_PER_ADDRESS_LIMIT", "7", 1);
	setenv("HERALD_QUEUE_LIMIT", "1m", 1);
	setenv("HERALD_RETENTION_AGE", "1d", 1);
	setenv("HERALD_LOG_LEVEL", "warning", 1);
	setenv("HERALD_TRUSTED_PROXIES", "unix", 1);
	r = load(NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.per_address_limit, 7);
	CHECK_EQ_INT(cfg.queue_limit, 1048576);
	CHECK_EQ_INT(cfg.retention_age_s, 86400);
	CHECK_EQ_INT(cfg.log_level, 4);
	CHECK(strcmp(cfg.trusted_proxies, "unix") == 0);
	clear_env();
}

/* One key's value through a flag: 0 and the stored number, or -1. */
static int64_t flag_value(const char *key, const char *value, int *rc)
{
	char name[64];
	snprintf(name, sizeof(name), "--%s", key);
	const struct res *r = load(name, value, NULL);
	*rc = r->r;
	if (r->r != 0)
		return -1;
	if (!strcmp(key, "heartbeat-interval"))
		return cfg.heartbeat_interval_ms;
	if (!strcmp(key, "retention-age"))
		return cfg.retention_age_s;
	if (!strcmp(key, "rotate-after"))
		return cfg.rotate_after_ms;
	if (!strcmp(key, "queue-limit"))
		return cfg.queue_limit;
	if (!strcmp(key, "max-body"))
		return cfg.max_body;
	if (!strcmp(key, "retention-count"))
		return cfg.retention_count;
	if (!strcmp(key, "backlog"))
		return cfg.backlog;
	if (!strcmp(key, "ipv6-prefix"))
		return cfg.ipv6_prefix;
	if (!strcmp(key, "tls-ticket-rotate"))
		return cfg.tls_ticket_rotate_ms;
	if (!strcmp(key, "jwt-leeway"))
		return cfg.jwt_leeway_s;
	return -2;
}

#define VALUE_IS(key, value, want)                                                                            \
	do {                                                                                                  \
		int rc_;                                                                                      \
		int64_t v_ = flag_value((key), (value), &rc_);                                                \
		CHECK(rc_ == 0 && v_ == (int64_t)(want));                                                     \
		if (rc_ != 0 || v_ != (int64_t)(want))                                                        \
			fprintf(stderr, "  --%s %s: rc %d, value %lld, want %lld; %s\n", (key), (value), rc_, \
				(long long)v_, (long long)(want), last.err);                                  \
	} while (0)

#define VALUE_REFUSED(key, value, reason)                                               \
	do {                                                                            \
		int rc_;                                                                \
		flag_value((key), (value), &rc_);                                       \
		CHECK_EQ_INT(rc_, -1);                                                  \
		CHECK_EQ_INT(last.code, 1);                                             \
		char o_[96];                                                            \
		snprintf(o_, sizeof(o_), "option --%s", (key)); /* the flag as typed */ \
		CHECK(err_has(o_));                                                     \
		CHECK(err_has(reason));                                                 \
	} while (0)

static void test_units(void)
{
	/* Durations in ms: a bare number is seconds. */
	VALUE_IS("heartbeat-interval", "15", 15000);
	VALUE_IS("heartbeat-interval", "250ms", 250);
	VALUE_IS("heartbeat-interval", "100ms", 100);
	VALUE_IS("heartbeat-interval", "2s", 2000);
	VALUE_IS("heartbeat-interval", "2 s", 2000);
	VALUE_IS("heartbeat-interval", " 2S ", 2000);
	VALUE_IS("heartbeat-interval", "3m", 180000);
	VALUE_IS("heartbeat-interval", "1h", 3600000);
	VALUE_IS("heartbeat-interval", "60m", 3600000);
	VALUE_REFUSED("heartbeat-interval", "99ms", "out of range");
	VALUE_REFUSED("heartbeat-interval", "1d", "out of range");
	VALUE_REFUSED("heartbeat-interval", "3601s", "out of range");
	VALUE_REFUSED("heartbeat-interval", "0", "out of range");
	/* A refused duration says what a duration looks like; a negative one
	 * says that it is negative, not that it is not a number. */
	VALUE_REFUSED("heartbeat-interval", "5x",
		      "not a duration: a whole number, optionally followed by ms, s, m, h or d");
	VALUE_REFUSED("heartbeat-interval", "1.5s", "not a duration");
	VALUE_REFUSED("heartbeat-interval", "-1s", "must not be negative");
	VALUE_REFUSED("heartbeat-interval", "-3s", "must not be negative");
	VALUE_REFUSED("heartbeat-interval", " -3", "must not be negative");
	VALUE_REFUSED("heartbeat-interval", "s", "not a duration");
	VALUE_REFUSED("heartbeat-interval", "", "not a duration");
	VALUE_REFUSED("heartbeat-interval", "1s1", "not a duration");
	VALUE_REFUSED("heartbeat-interval", "-", "not a duration");
	VALUE_IS("rotate-after", "0", 0);
	VALUE_IS("rotate-after", "365d", INT64_C(31536000000));
	VALUE_REFUSED("rotate-after", "366d", "out of range");
	VALUE_REFUSED("rotate-after", "99999999999999999999", "out of range");
	VALUE_REFUSED("rotate-after", "9223372036854775807", "out of range"); /* seconds overflow ms */

	/* Durations in s. */
	VALUE_IS("retention-age", "7d", 604800);
	VALUE_IS("retention-age", "30m", 1800);
	VALUE_IS("retention-age", "90", 90);
	VALUE_IS("retention-age", "90s", 90);
	VALUE_IS("retention-age", "2h", 7200);
	VALUE_IS("retention-age", "0", 0);
	VALUE_IS("retention-age", "36500d", INT64_C(3153600000));
	VALUE_REFUSED("retention-age", "36501d", "out of range");
	VALUE_REFUSED("retention-age", "1ms", "not a duration: a whole number, optionally followed by s, m, h or d");
	VALUE_REFUSED("retention-age", "1y", "not a duration");
	VALUE_REFUSED("retention-age", "-7d", "must not be negative");

	/* Sizes. */
	VALUE_IS("queue-limit", "256k", 262144);
	VALUE_IS("queue-limit", "256K", 262144);
	VALUE_IS("queue-limit", "64kb", 65536);
	VALUE_IS("queue-limit", "1m", 1048576);
	VALUE_IS("queue-limit", "2MB", 2097152);
	VALUE_IS("queue-limit", "1g", 1073741824);
	VALUE_IS("queue-limit", "4096", 4096);
	VALUE_IS("queue-limit", "4096b", 4096);
	VALUE_REFUSED("queue-limit", "4095", "out of range");
	VALUE_REFUSED("queue-limit", "2g", "out of range");
	/* A refused size names the form a size takes. */
	VALUE_REFUSED("queue-limit", "1t", "not a size: a whole number of bytes, optionally followed by k, m or g");
	VALUE_REFUSED("max-body", "lots", "not a size: a whole number of bytes, optionally followed by k, m or g");
	VALUE_REFUSED("max-body", "1.5m", "not a size");
	VALUE_REFUSED("max-body", "-64k", "must not be negative");
	VALUE_REFUSED("queue-limit", "9223372036854775807k", "out of range");
	VALUE_IS("max-body", "64", 64);
	VALUE_IS("max-body", "16m", 16777216);
	VALUE_REFUSED("max-body", "63", "out of range");
	VALUE_REFUSED("max-body", "17m", "out of range");

	/* Plain integers take no unit. */
	VALUE_IS("backlog", "1", 1);
	VALUE_IS("backlog", "65535", 65535);
	VALUE_IS("backlog", "007", 7);
	VALUE_REFUSED("backlog", "0", "out of range");
	VALUE_REFUSED("backlog", "65536", "out of range");
	VALUE_REFUSED("backlog", "1k", "not a whole number");
	VALUE_REFUSED("backlog", "+5", "not a whole number");
	VALUE_REFUSED("backlog", "0x10", "not a whole number");
	VALUE_REFUSED("backlog", "ten", "not a whole number");
	VALUE_REFUSED("backlog", "-5", "must not be negative");
	VALUE_REFUSED("backlog", "99999999999999999999999", "out of range");
	VALUE_IS("retention-count", "1000000000000", INT64_C(1000000000000));
	VALUE_REFUSED("retention-count", "1000000000001", "out of range");
	/* The refusal gives the allowed range. */
	flag_value("backlog", "0", &(int){ 0 });
	CHECK(err_has("1 to 65535"));
}

static void test_refusals_in_file(void)
{
	/* Each bad value names file:line, the key and the value. */
	const char *p = write_file("# header\n"
				   "\n"
				   "backlog = 0\n");
	char origin[160];
	const struct res *r = load("--config", p, NULL);
	snprintf(origin, sizeof(origin), "%s:3:", p);
	CHECK(refused_with(origin, "backlog", "0"));
	CHECK(err_has("out of range"));

	p = write_file("db = ok.db\n"
		       "heartbeat_interval = 5x\n"
		       "max_headers = 1000\n"
		       "log_level = loud\n"
		       "db =\n"
		       "queue_limit = 99999999999999999999999\n");
	r = load("--config", p, NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 1);
	/* Every error is reported, not just the first. */
	snprintf(origin, sizeof(origin), "%s:2: heartbeat_interval = \"5x\"", p);
	CHECK(err_has(origin));
	snprintf(origin, sizeof(origin), "%s:3: max_headers = \"1000\"", p);
	CHECK(err_has(origin));
	snprintf(origin, sizeof(origin), "%s:4: log_level = \"loud\"", p);
	CHECK(err_has(origin));
	snprintf(origin, sizeof(origin), "%s:5: db = \"\"", p);
	CHECK(err_has(origin));
	CHECK(err_has("must not be empty"));
	snprintf(origin, sizeof(origin), "%s:6: queue_limit = \"99999999999999999999999\"", p);
	CHECK(err_has(origin));
	CHECK(err_has("not a duration"));
	CHECK(err_has("not one of"));

	/* A quoted negative duration and a size in words, from a file. */
	p = write_file("heartbeat_interval = \"-3s\"\n"
		       "max_body = lots\n");
	r = load("--config", p, NULL);
	CHECK_EQ_INT(r->r, -1);
	snprintf(origin, sizeof(origin), "%s:1: heartbeat_interval = \"-3s\": must not be negative", p);
	CHECK(err_has(origin));
	snprintf(origin, sizeof(origin),
		 "%s:2: max_body = \"lots\": not a size: a whole number of bytes, optionally followed by k, m or g", p);
	CHECK(err_has(origin));

	/* Control characters in strings. */
	p = write_file("db = a\x01"
		       "b\n");
	r = load("--config", p, NULL);
	snprintf(origin, sizeof(origin), "%s:1:", p);
	CHECK(refused_with(origin, "db", "a\\x01b")); /* escaped, so the log line stays one line */
	CHECK(err_has("control character"));
	p = write_file("publish_token = a\x01"
		       "b\n");
	r = load("--config", p, NULL);
	CHECK(err_has("publish_token = (value not shown): contains a control character"));

	/* Too long. */
	char big[1100];
	memset(big, 't', 1025);
	big[1025] = '\0';
	r = load("--publish-token", big, NULL);
	CHECK(last.r == -1 && last.code == 1);
	CHECK(err_has("option --publish-token: publish_token = (value not shown)"));
	CHECK(strstr(last.err, "tttt") == NULL); /* a token is never echoed */
	CHECK(err_has("too long"));
	big[1024] = '\0';
	r = load("--publish-token", big, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(strlen(cfg.publish_token), 1024);

	/* Unknown keys and sections, lines that are not key = value. */
	p = write_file("backlog = 5\nbogus = 1\n");
	r = load("--config", p, NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 1);
	snprintf(origin, sizeof(origin), "%s:2:", p);
	CHECK(err_has(origin));
	CHECK(err_has("unknown key \"bogus\""));
	/* A dashed key is the same key, as in a flag. */
	p = write_file("per-address-limit = 5\nmax-body = 1k\n");
	r = load("--config", p, NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.per_address_limit, 5);
	CHECK_EQ_INT(cfg.max_body, 1024);
	p = write_file("max-body = lots\nmax_body_ = 1\n");
	r = load("--config", p, NULL);
	snprintf(origin, sizeof(origin), "%s:1: max_body = \"lots\"", p);
	CHECK(r->r == -1 && err_has(origin));
	CHECK(err_has("unknown key \"max_body_\""));
	p = write_file("[other]\nbacklog = 5\n");
	r = load("--config", p, NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK(err_has("unknown section [other]"));
	p = write_file("backlog = 5\njust some words\n");
	r = load("--config", p, NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 1);
	snprintf(origin, sizeof(origin), "%s:2:", p);
	CHECK(err_has(origin));

	/* Environment errors name the variable. */
	setenv("HERALD_MAX_HEADERS", "3", 1);
	r = load(NULL);
	CHECK(refused_with("environment HERALD_MAX_HEADERS", "max_headers", "3"));
	clear_env();
	setenv("HERALD_LISTEN", " , ", 1);
	r = load(NULL);
	CHECK(refused_with("environment HERALD_LISTEN", "listen", " , "));
	CHECK(err_has("at least one address"));
	clear_env();

	/* tls_cert and tls_key go together, with a tls: listener, and must
	 * load (tests/e2e/test_tls.py tries real pairs). */
	r = load("--tls-cert", "/tmp/c.pem", NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 1);
	CHECK(err_has("option --tls-cert: tls_cert is set, but tls_key is not"));
	CHECK(err_has("tls_cert and tls_key"));
	setenv("HERALD_TLS_KEY", "/tmp/k.pem", 1);
	r = load("--listen", "127.0.0.1:1", NULL);
	CHECK(err_has("environment HERALD_TLS_KEY: tls_key is set, but tls_cert is not"));
	clear_env();
	r = load("--listen", "tls:127.0.0.1:1", NULL);
	CHECK(err_has("option --listen: listen has a tls: address, but tls_cert and tls_key are not set"));
	r = load("--tls-cert", "/nonexistent/c.pem", "--tls-key", "/tmp/k.pem", "--listen", "tls:127.0.0.1:8443", NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 1);
	CHECK(err_has("option --tls-cert: tls_cert = \"/nonexistent/c.pem\": No such file or directory"));
	p = write_file("x");
	r = load("--tls-cert", p, "--tls-key", "/nonexistent/k.pem", "--listen", "tls:127.0.0.1:8443", NULL);
	CHECK(err_has("option --tls-key: tls_key = \"/nonexistent/k.pem\": No such file or directory"));
	r = load("--tls-cert", "/dev/null", "--tls-key", p, "--listen", "tls:127.0.0.1:8443", NULL);
	CHECK(err_has("tls_cert = \"/dev/null\": not a regular file"));
}

/* libinih reads lines into a fixed 200-byte buffer; config.c's reader
 * passes long values beside it and counts physical lines. */
static void test_long_lines(void)
{
	char text[2048], value[1100];
	/* A long comment. */
	snprintf(text, sizeof(text), "# %0300d\nbacklog = 9\n", 0);
	const struct res *r = load_file(text);
	CHECK(r->r == 0 && cfg.backlog == 9);
	/* A long trusted_proxies list (the key allows 4096 bytes). */
	size_t n = 0;
	for (int i = 0; i < 20; i++)
		n += (size_t)snprintf(value + n, sizeof(value) - n, "10.%d.0.0/16,", i);
	snprintf(value + n, sizeof(value) - n, "unix");
	snprintf(text, sizeof(text), "trusted_proxies = %s\n", value);
	r = load_file(text);
	CHECK(r->r == 0 && strcmp(cfg.trusted_proxies, value) == 0);
	/* A long publish token (the key allows 1024 bytes). */
	memset(value, 'k', 1000);
	value[1000] = '\0';
	snprintf(text, sizeof(text), "publish_token = %s\n", value);
	r = load_file(text);
	CHECK(r->r == 0 && strcmp(cfg.publish_token, value) == 0);
	/* The line number of an error after a long line. */
	snprintf(text, sizeof(text), "# %0300d\nbacklog = 0\n", 0);
	const char *p = write_file(text);
	r = load("--config", p, NULL);
	char origin[160];
	snprintf(origin, sizeof(origin), "%s:2: backlog", p);
	CHECK_EQ_INT(r->r, -1);
	CHECK(strstr(r->err, origin) != NULL);
	/* The same value by flag and by environment is fine. */
	r = load("--publish-token", value, NULL);
	CHECK(r->r == 0 && strcmp(cfg.publish_token, value) == 0);
}

static void test_flags(void)
{
	/* Unknown flags and bad command lines: exit code 2. */
	const struct res *r = load("--bogus", "1", NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 2);
	CHECK(err_has("unknown option --bogus"));
	r = load("--bogus\n2", NULL);
	CHECK(err_has("unknown option --bogus\\x0a2"));
	r = load("--bogus=1", NULL);
	CHECK_EQ_INT(r->code, 2);
	r = load("--backlog", NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 2);
	CHECK(err_has("--backlog"));
	r = load("stray", NULL);
	CHECK_EQ_INT(r->code, 2);
	CHECK(err_has("stray"));
	r = load("-x", NULL);
	CHECK_EQ_INT(r->code, 2);
	r = load("--", NULL);
	CHECK_EQ_INT(r->code, 2);
	r = load("--config", NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 2);
	char longname[200];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[0] = longname[1] = '-';
	longname[sizeof(longname) - 1] = '\0';
	r = load(longname, "1", NULL);
	CHECK_EQ_INT(r->code, 2);
	/* A bad command line is reported before any file is read. */
	r = load("--config", "/nonexistent.ini", "--bogus", NULL);
	CHECK_EQ_INT(r->code, 2);
	CHECK(strstr(r->err, "nonexistent") == NULL);

	/* Dashes or underscores, separate or inline values. */
	r = load("--per-address-limit", "5", "--max_readers=6", "--busy-timeout-ms=7", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.per_address_limit, 5);
	CHECK_EQ_INT(cfg.max_readers, 6);
	CHECK_EQ_INT(cfg.busy_timeout_ms, 7);
	/* A value that looks like a flag is still the value. */
	r = load("--publish-token", "--check-config", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK(!r->check);
	CHECK(strcmp(cfg.publish_token, "--check-config") == 0);
	r = load("--db", "--config", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK(strcmp(cfg.db, "--config") == 0);
	CHECK(cfg.config_path == NULL);

	/* --check-config. */
	r = load("--check-config", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK(r->check);
	r = load("--backlog", "9", "--check-config", NULL);
	CHECK(r->r == 0 && r->check && cfg.backlog == 9);
	r = load("--check-config", "--backlog", "0", NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK_EQ_INT(r->code, 1);

	/* --help, --version and --redis-function are main's to answer:
	 * config_load stops at the first, names it, prints nothing and
	 * returns 1 (exit 0), unless the command line is wrong before it. */
	r = load("--help", NULL);
	CHECK(r->r == 1 && r->code == 0 && strcmp(r->command, "--help") == 0 && r->out[0] == '\0');
	r = load("-h", NULL);
	CHECK(r->r == 1 && strcmp(r->command, "-h") == 0);
	r = load("--version", NULL);
	CHECK(r->r == 1 && strcmp(r->command, "--version") == 0);
	r = load("--redis-function", "--help", NULL);
	CHECK(r->r == 1 && strcmp(r->command, "--redis-function") == 0);
	r = load("--backlog", "0", "--help", NULL);
	CHECK_EQ_INT(r->r, 1);
	r = load("--read-token", "--version", "--help", NULL); /* a value, then the command */
	CHECK(r->r == 1 && strcmp(r->command, "--help") == 0);
	r = load("--bogus", "--help", NULL);
	CHECK(r->r == -1 && r->code == 2);
	r = load(NULL);
	CHECK(r->r == 0 && r->command == NULL);
	/* The usage main prints for --help. */
	char up[128];
	snprintf(up, sizeof(up), "%s/usage-help", tmpdir);
	FILE *uf = fopen(up, "w");
	config_usage(uf);
	fclose(uf);
	char *usage = slurp(up);
	CHECK(strstr(usage, "usage: herald") != NULL && strstr(usage, "heartbeat_interval") != NULL);
	free(usage);

	/* --listen, repeated: one list, replacing file and environment. */
	r = load("--listen", "127.0.0.1:1", "--listen", "unix:/tmp/a.sock", "--listen=[::1]:2", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK(listen_is("127.0.0.1:1", "unix:/tmp/a.sock", "[::1]:2"));
	char *argv[40];
	int argc = 0;
	argv[argc++] = "herald";
	char addrs[17][32];
	for (int i = 0; i < 17; i++) {
		snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d", 1000 + i);
		argv[argc++] = "--listen";
		argv[argc++] = addrs[i];
	}
	argv[argc] = NULL;
	r = load_argv(argc - 2, argv); /* 16: the most */
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.nlisten, CONFIG_MAX_LISTEN);
	r = load_argv(argc, argv);
	CHECK_EQ_INT(r->r, -1);
	CHECK(err_has("too many"));
	/* In a file or the environment: comma-separated, blanks trimmed,
	 * empty entries skipped, at most 16. */
	r = load_file("listen = 127.0.0.1:1, ,[::1]:2,  unix:/tmp/c  ,\n");
	CHECK_EQ_INT(r->r, 0);
	CHECK(listen_is("127.0.0.1:1", "[::1]:2", "unix:/tmp/c"));
	char list[1024];
	size_t n = 0;
	for (int i = 0; i < 17; i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s127.0.0.1:%d", i ? "," : "", i);
	setenv("HERALD_LISTEN", list, 1);
	r = load(NULL);
	CHECK_EQ_INT(r->r, -1);
	CHECK(err_has("too many"));
	clear_env();
}

/* Every listen address is parsed at load (listen_addr_parse), from every
 * source, and a bad one names its origin; --listen takes lists too. */
static void test_listen_addresses(void)
{
	static const struct {
		const char *addr, *why;
	} bad[] = {
		{ "nonsense", "expected host:port" },
		{ "127.0.0.1:99999", "port must be a number from 0 to 65535" },
		{ "127.0.0.1:65536", "port" },
		{ "127.0.0.1:-1", "port" },
		{ "127.0.0.1:+80", "port" },
		{ "127.0.0.1: 80", "port" },
		{ "127.0.0.1:", "port" },
		{ "[::1]8199", "expected [IPv6]:port" },
		{ "[::1", "expected [IPv6]:port" },
		{ "localhost:80", "\"localhost\" is not an IP address" },
		{ "300.1.1.1:80", "not an IP address" },
		{ "unix:", "unix socket path is empty" },
		{ "tls:unix:/tmp/x", "TLS is served on TCP addresses only" },
		{ "tls:nonsense", "expected host:port" },
	};
	char origin[256], text[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const struct res *r = load("--listen", bad[i].addr, NULL);
		snprintf(origin, sizeof(origin), "option --listen: listen = \"%s\"", bad[i].addr);
		CHECK(r->r == -1 && r->code == 1 && err_has(origin) && err_has(bad[i].why));
		setenv("HERALD_LISTEN", bad[i].addr, 1);
		r = load(NULL);
		snprintf(origin, sizeof(origin), "environment HERALD_LISTEN: listen = \"%s\"", bad[i].addr);
		CHECK(r->r == -1 && err_has(origin) && err_has(bad[i].why));
		clear_env();
		snprintf(text, sizeof(text), "# first\nlisten = 127.0.0.1:1, %s\n", bad[i].addr);
		const char *p = write_file(text);
		r = load("--config", p, NULL);
		snprintf(origin, sizeof(origin), "%s:2: listen = \"%s\"", p, bad[i].addr);
		CHECK(r->r == -1 && err_has(origin) && err_has(bad[i].why));
	}
	/* Good ones, the port's edges included. */
	const struct res *r = load("--listen", "127.0.0.1:0,[::1]:65535", "--listen", "*:80", "--listen", ":81", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.nlisten, 4);
	r = load("--listen", "[::]:443, 0.0.0.0:443", "--listen", "unix:/run/h.sock", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK(listen_is("[::]:443", "0.0.0.0:443", "unix:/run/h.sock"));
	/* Every bad entry of one value is reported. */
	r = load("--listen", "a:1,127.0.0.1:2,b:3", NULL);
	CHECK(r->r == -1 && err_has("listen = \"a:1\"") && err_has("listen = \"b:3\""));
	/* A flag with no address at all. */
	r = load("--listen", " , ", NULL);
	CHECK(refused_with("option --listen", "listen", " , "));
	CHECK(err_has("at least one address"));
	/* A list and repeated flags add up to at most 16. */
	char list[512];
	size_t n = 0;
	for (int i = 0; i < 15; i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "%s127.0.0.1:%d", i ? "," : "", i);
	r = load("--listen", list, "--listen", "127.0.0.1:99", NULL);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.nlisten, 16);
	r = load("--listen", list, "--listen", "127.0.0.1:99,127.0.0.1:100", NULL);
	CHECK(r->r == -1 && err_has("too many addresses"));

	/* listen_addr_parse itself. */
	struct listen_addr la;
	char err[256];
	CHECK_EQ_INT(listen_addr_parse("tls:127.0.0.1:8443", &la, err, sizeof(err)), 0);
	CHECK(la.tls && !la.is_unix && la.ss.ss_family == AF_INET && la.len == sizeof(struct sockaddr_in));
	CHECK_EQ_INT(listen_addr_parse("[::1]:0", &la, err, sizeof(err)), 0);
	CHECK(!la.tls && la.ss.ss_family == AF_INET6);
	CHECK_EQ_INT(listen_addr_parse("unix:/tmp/a b", &la, err, sizeof(err)), 0);
	CHECK(la.is_unix && strcmp(la.path, "/tmp/a b") == 0);
	char longpath[200] = "unix:/";
	memset(longpath + 6, 'p', 120);
	longpath[126] = '\0';
	CHECK_EQ_INT(listen_addr_parse(longpath, &la, err, sizeof(err)), -1);
	CHECK(strstr(err, "longer than 107 bytes") != NULL);
	char longhost[300];
	memset(longhost, '1', 250);
	snprintf(longhost + 250, 50, ":80");
	CHECK_EQ_INT(listen_addr_parse(longhost, &la, err, sizeof(err)), -1);
	memset(longhost, 0, sizeof(longhost));
	longhost[0] = '[';
	memset(longhost + 1, ':', 250);
	snprintf(longhost + 251, 40, "]:80");
	CHECK_EQ_INT(listen_addr_parse(longhost, &la, err, sizeof(err)), -1);
}

/* allow_origin and trusted_proxies are checked when set, so their errors
 * name their origin like every other key. */
static void test_checked_strings(void)
{
	const char *p = write_file("allow_origin = https://a.example\nallow_origin = ftp://x\n"
				   "trusted_proxies = 10.0.0.0/33\n");
	char origin[256];
	const struct res *r = load("--config", p, NULL);
	snprintf(origin, sizeof(origin), "%s:2: allow_origin = \"ftp://x\": each entry must be", p);
	CHECK(r->r == -1 && err_has(origin));
	snprintf(origin, sizeof(origin), "%s:3: trusted_proxies = \"10.0.0.0/33\": bad prefix length", p);
	CHECK(err_has(origin));
	setenv("HERALD_ALLOW_ORIGIN", "https://a.example/path", 1);
	r = load(NULL);
	CHECK(refused_with("environment HERALD_ALLOW_ORIGIN", "allow_origin", "https://a.example/path"));
	CHECK(err_has("no path"));
	clear_env();
	r = load("--trusted-proxies", "unix,nope", NULL);
	CHECK(refused_with("option --trusted-proxies", "trusted_proxies", "unix,nope"));
	CHECK(err_has("\"nope\" is not an IP address"));
	r = load("--allow-origin", "*", "--trusted-proxies", "", NULL);
	CHECK(r->r == 0 && strcmp(cfg.allow_origin, "*") == 0 && strcmp(cfg.trusted_proxies, "") == 0);
	r = load("--allow-origin", "https://a.example, http://b.example:8080", NULL);
	CHECK_EQ_INT(r->r, 0);
}

/* A file value in one pair of matching quotes loses them. */
static void test_quotes(void)
{
	const struct res *r = load_file("read_token = \"abc\"\n"
					"publish_token = '  p q  '\n"
					"db = \"\"\"x.db\"\"\"\n"
					"allow_origin = ''\n"
					"trusted_proxies = \"unix\n");
	CHECK_EQ_INT(r->r, -1); /* the last one: an unmatched quote stays, and is no address */
	r = load_file("read_token = \"abc\"\n"
		      "publish_token = '  p q  '\n"
		      "db = \"\"\"x.db\"\"\"\n"
		      "allow_origin = ''\n"
		      "retry_ms = \"10\"\n"
		      "log_level = 'debug\"\n");
	CHECK(r->r == -1 && err_has("log_level = \"'debug\\\"\""));
	r = load_file("read_token = \"abc\"\n"
		      "publish_token = '  p q  '\n"
		      "db = \"\"\"x.db\"\"\"\n"
		      "allow_origin = ''\n"
		      "retry_ms = \"10\"\n"
		      "metrics_token = \"\n");
	CHECK_EQ_INT(r->r, 0);
	CHECK(strcmp(cfg.read_token, "abc") == 0);
	CHECK(strcmp(cfg.publish_token, "  p q  ") == 0);
	CHECK(strcmp(cfg.db, "\"\"x.db\"\"") == 0);
	CHECK(strcmp(cfg.allow_origin, "") == 0);
	CHECK_EQ_INT(cfg.retry_ms, 10);
	CHECK(strcmp(cfg.metrics_token, "\"") == 0);
	/* Flags and the environment are taken as they are (the shell has
	 * removed its quotes already). */
	r = load("--read-token", "\"abc\"", NULL);
	CHECK(r->r == 0 && strcmp(cfg.read_token, "\"abc\"") == 0);
}

/* A misspelt key, in a file, a flag or a variable, is answered with the
 * key nearest to it (none when no key is near); workers names its other
 * spelling; presence off with active subscriptions on is refused, naming
 * both keys where they were set. */
static void test_near_misses(void)
{
	char want[512];
	const char *p = write_file("backlog = 5\npresense = off\n");
	const struct res *r = load("--config", p, NULL);
	snprintf(want, sizeof(want), "%s:2: unknown key \"presense\" (did you mean presence?)", p);
	CHECK(r->r == -1 && r->code == 1 && err_has(want));
	r = load("--max-bdy", "1k", NULL);
	CHECK(r->code == 2 && err_has("unknown option --max-bdy (did you mean --max-body?)"));
	r = load("--max_bdy=1k", NULL);
	CHECK(r->code == 2 && err_has("unknown option --max_bdy=1k (did you mean --max-body?)"));
	r = load("--colour", "1", NULL);
	CHECK(r->code == 2 && !strstr(last.err, "did you mean"));
	setenv("HERALD_PRESENSE_TOP", "5", 1);
	r = load(NULL);
	CHECK(r->r == -1 && err_has("herald has no key presense_top (did you mean HERALD_PRESENCE_TOP?)"));
	clear_env();
	r = load("--workers", "two", NULL);
	CHECK(r->r == -1 && err_has("workers = \"two\": not a whole number, nor auto (allowed: 1 to 64, or auto: "
				    "one per CPU)"));
	r = load("--workers", "auto", NULL);
	CHECK(r->r == 0 && cfg.workers >= 1);
	p = write_file("presence = off\nmercure_subscriptions = on\n");
	r = load("--config", p, NULL);
	snprintf(want, sizeof(want), "%s:2: mercure_subscriptions = on needs presence = on (%s:1 sets it off)", p, p);
	CHECK(r->r == -1 && r->code == 1 && err_has(want));
	r = load("--presence", "off", NULL);
	CHECK_EQ_INT(r->r, 0);
}

/* HERALD_* variables: a key's exact name, the build's own two, or an error. */
static void test_env_names(void)
{
	setenv("HERALD_FOO", "1", 1);
	const struct res *r = load(NULL);
	CHECK(r->r == -1 && r->code == 1 && err_has("environment \"HERALD_FOO\": unknown variable"));
	clear_env();
	setenv("HERALD_Max_Body", "1k", 1);
	r = load(NULL);
	CHECK(r->r == -1 &&
	      err_has("\"HERALD_Max_Body\": unknown variable; the key max_body is set by HERALD_MAX_BODY"));
	clear_env();
	setenv("HERALD_BIN", "build/herald", 1);
	setenv("HERALD_BUILD", "build", 1);
	setenv("HERALD_TEST_JOBS", "1", 1); /* tests/run.py's, in every herald the tests start */
	setenv("HERALD_MAX_BODY", "1k", 1);
	r = load(NULL);
	CHECK(r->r == 0 && cfg.max_body == 1024);
	clear_env();
	/* Every error of every source in one run. */
	setenv("HERALD_NOPE", "1", 1);
	const char *p = write_file("backlog = 0\n");
	r = load("--config", p, "--max-body", "1", NULL);
	CHECK(r->r == -1 && err_has("backlog = \"0\"") && err_has("HERALD_NOPE") && err_has("max_body = \"1\""));
	clear_env();
}

/* Write content (len bytes) into a file in the temp folder; returns its path. */
static const char *write_bytes(const char *name, const char *content, size_t len)
{
	static char paths[4][160];
	static int i;
	char *path = paths[i++ % 4];
	snprintf(path, sizeof(paths[0]), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "wb");
	fwrite(content, 1, len, f);
	fclose(f);
	return path;
}

/* publish_token_file, read_token_file, metrics_token_file. */
static void test_token_files(void)
{
	static const char *const keys[] = { "publish-token-file", "read-token-file", "metrics-token-file" };
	static const char *const names[] = { "publish_token_file", "read_token_file", "metrics_token_file" };
	char flag[64], want[400];
	for (size_t i = 0; i < 3; i++) {
		snprintf(flag, sizeof(flag), "--%s", keys[i]);
		char **token = i == 0 ? &cfg.publish_token : i == 1 ? &cfg.read_token : &cfg.metrics_token;
		const char *p = write_bytes("t", "tok-1\n", 6);
		const struct res *r = load(flag, p, NULL);
		CHECK(r->r == 0 && strcmp(*token, "tok-1") == 0);
		p = write_bytes("t", "tok-2\r\n", 7);
		r = load(flag, p, NULL);
		CHECK(r->r == 0 && strcmp(*token, "tok-2") == 0);
		p = write_bytes("t", "tok-3", 5);
		r = load(flag, p, NULL);
		CHECK(r->r == 0 && strcmp(*token, "tok-3") == 0);
		char big[1030];
		memset(big, 'K', sizeof(big));
		p = write_bytes("t", big, 1024);
		r = load(flag, p, NULL);
		CHECK(r->r == 0 && strlen(*token) == 1024);
		static const struct {
			const char *content;
			size_t len;
			const char *why;
		} bad[] = {
			{ "", 0, "the file is empty" },
			{ "\n", 1, "the file is empty" },
			{ "\r\n", 2, "the file is empty" },
			{ "SECRET\n\n", 8, "the token in it contains a control character" },
			{ "SECRET\r", 7, "the token in it contains a control character" },
			{ "SEC\0RET", 7, "the token in it contains a control character" },
			{ "SECRET\tX", 8, "the token in it contains a control character" },
		};
		for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
			p = write_bytes("t", bad[j].content, bad[j].len);
			r = load(flag, p, NULL);
			snprintf(want, sizeof(want), "option %s: %s = \"%s\": %s", flag, names[i], p, bad[j].why);
			CHECK(r->r == -1 && r->code == 1 && err_has(want));
			CHECK(strstr(r->err, "SECRET") == NULL && strstr(r->err, "RET") == NULL);
		}
		p = write_bytes("t", big, 1025);
		r = load(flag, p, NULL);
		CHECK(r->r == -1 && err_has("too long (at most 1024 bytes)") && strstr(r->err, "KKKK") == NULL);
		p = write_bytes("t", big, 1030);
		r = load(flag, p, NULL);
		CHECK(r->r == -1 && err_has("too long"));
		r = load(flag, "/nonexistent/token", NULL);
		CHECK(r->r == -1 && err_has("\"/nonexistent/token\": No such file or directory"));
		r = load(flag, tmpdir, NULL);
		CHECK(r->r == -1 && err_has("Is a directory"));
		r = load(flag, "/dev/null", NULL);
		CHECK(r->r == -1 && err_has("not a regular file"));
	}
	/* The key's name and origin in the message; a file line too. */
	const char *tp = write_bytes("t", "", 0);
	char text[300], origin[400];
	snprintf(text, sizeof(text), "# tokens\nread_token_file = %s\n", tp);
	const char *p = write_file(text);
	const struct res *r = load("--config", p, NULL);
	snprintf(origin, sizeof(origin), "%s:2: read_token_file = \"%s\": the file is empty", p, tp);
	CHECK(r->r == -1 && err_has(origin));
	/* Both ways at once is an error naming both origins. */
	tp = write_bytes("t", "x\n", 2);
	setenv("HERALD_PUBLISH_TOKEN_FILE", tp, 1);
	r = load("--publish-token", "SECRET", NULL);
	CHECK(r->r == -1 &&
	      err_has("option --publish-token: publish_token is set, and so is publish_token_file (environment "
		      "HERALD_PUBLISH_TOKEN_FILE): set only one"));
	CHECK(strstr(r->err, "SECRET") == NULL);
	/* An empty token is not set: the file gives it. */
	r = load("--publish-token", "", NULL);
	CHECK(r->r == 0 && strcmp(cfg.publish_token, "x") == 0);
	clear_env();
	/* Read again at every load (a reload is a load). */
	tp = write_bytes("t", "one\n", 4);
	r = load("--read-token-file", tp, NULL);
	CHECK(r->r == 0 && strcmp(cfg.read_token, "one") == 0);
	tp = write_bytes("t", "two\n", 4);
	r = load("--read-token-file", tp, NULL);
	CHECK(r->r == 0 && strcmp(cfg.read_token, "two") == 0);
}

/* metrics_access and its token, ipv6_prefix, tls_ticket_rotate. */
static void test_new_keys(void)
{
	const struct res *r = load(NULL);
	CHECK(r->r == 0 && cfg.metrics_mode == METRICS_LOCAL && strcmp(cfg.metrics_token, "") == 0);
	CHECK_EQ_INT(cfg.ipv6_prefix, 64);
	CHECK_EQ_INT(cfg.tls_ticket_rotate_ms, 12 * 3600000);
	r = load("--metrics-access", "any", NULL);
	CHECK(r->r == 0 && cfg.metrics_mode == METRICS_ANY);
	r = load("--metrics-access", "token", "--metrics-token", "m", NULL);
	CHECK(r->r == 0 && cfg.metrics_mode == METRICS_TOKEN && strcmp(cfg.metrics_token, "m") == 0);
	r = load("--metrics-access", "Token", NULL);
	CHECK(refused_with("option --metrics-access", "metrics_access", "Token"));
	CHECK(err_has("not one of any, local, token"));
	const char *p = write_file("metrics_access = token\n");
	r = load("--config", p, NULL);
	char origin[256];
	snprintf(origin, sizeof(origin), "%s:1: metrics_access = \"token\" needs metrics_token or metrics_token_file",
		 p);
	CHECK(r->r == -1 && r->code == 1 && err_has(origin));
	r = load("--metrics-token", "bad\x01", NULL);
	CHECK(r->r == -1 && err_has("metrics_token = (value not shown)") && strstr(r->err, "bad") == NULL);

	VALUE_IS("ipv6-prefix", "1", 1);
	VALUE_IS("ipv6-prefix", "128", 128);
	VALUE_IS("ipv6-prefix", "48", 48);
	VALUE_REFUSED("ipv6-prefix", "0", "1 to 128");
	VALUE_REFUSED("ipv6-prefix", "129", "out of range");
	VALUE_REFUSED("ipv6-prefix", "/64", "not a whole number");

	VALUE_IS("tls-ticket-rotate", "0", 0);
	VALUE_IS("tls-ticket-rotate", "1m", 60000);
	VALUE_IS("tls-ticket-rotate", "60", 60000);
	VALUE_IS("tls-ticket-rotate", "7d", 604800000);
	VALUE_IS("tls-ticket-rotate", "1s", 1000);
	VALUE_REFUSED("tls-ticket-rotate", "999ms", "allowed: 0, or 1000 to 604800000 ms");
	VALUE_REFUSED("tls-ticket-rotate", "1ms", "out of range");
	VALUE_REFUSED("listen", "unix:/tmp/a\x01b", "control character");
	VALUE_REFUSED("tls-ticket-rotate", "8d", "out of range");
}

/* console: an on/off switch in every usual spelling, from every source. */
static void test_console_key(void)
{
	const struct res *r = load(NULL);
	CHECK(r->r == 0 && cfg.console);
	static const char *const on[] = { "on", "yes", "true", "1", "ON", "Yes", "TRUE" };
	static const char *const off[] = { "off", "no", "false", "0", "OFF", "No", "False" };
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		r = load("--console", "off", "--console", on[i], NULL);
		CHECK(r->r == 0 && cfg.console);
		r = load("--console", off[i], NULL);
		CHECK(r->r == 0 && !cfg.console);
	}
	r = load("--console", "maybe", NULL);
	CHECK(refused_with("option --console", "console", "maybe"));
	CHECK(err_has("not one of on, off, yes, no, true, false, 1, 0"));
	r = load("--console", "", NULL);
	CHECK(refused_with("option --console", "console", ""));
	r = load("--console", "2", NULL);
	CHECK(refused_with("option --console", "console", "2"));

	const char *p = write_file("console = off\n");
	r = load("--config", p, NULL);
	CHECK(r->r == 0 && !cfg.console);
	p = write_file("\nconsole = \"no\"\n");
	r = load("--config", p, NULL);
	CHECK(r->r == 0 && !cfg.console);
	p = write_file("\nconsole = nope\n");
	r = load("--config", p, NULL);
	char origin[256];
	snprintf(origin, sizeof(origin), "%s:2", p);
	CHECK(refused_with(origin, "console", "nope"));

	setenv("HERALD_CONSOLE", "false", 1);
	r = load(NULL);
	CHECK(r->r == 0 && !cfg.console);
	r = load("--console", "true", NULL); /* a flag wins over the environment */
	CHECK(r->r == 0 && cfg.console);
	unsetenv("HERALD_CONSOLE");
}

/* The jwt_* keys: defaults, values, the key file each algorithm needs, and
 * the verifier built at load (its refusals name the origin and the file,
 * never the secret). */
static void test_jwt_keys(void)
{
	const struct res *r = load(NULL);
	CHECK(r->r == 0 && strcmp(cfg.jwt_algorithm, "") == 0 && strcmp(cfg.jwt_secret_file, "") == 0 &&
	      strcmp(cfg.jwt_public_key_file, "") == 0 && strcmp(cfg.jwt_audience, "") == 0 &&
	      strcmp(cfg.jwt_issuer, "") == 0 && strcmp(cfg.jwt_cookie, "") == 0);
	CHECK(strcmp(cfg.jwt_subscribe_claim, "subscribe") == 0 && strcmp(cfg.jwt_publish_claim, "publish") == 0);
	CHECK_EQ_INT(cfg.jwt_leeway_s, 10);

	/* jwt_settings_from_config hands the same values over. */
	const char *secret = write_bytes("jwt-secret", "0123456789abcdef0123456789abcdef\n", 33);
	r = load("--jwt-algorithm", "HS256", "--jwt-secret-file", secret, "--jwt-audience", "aud-1", "--jwt-issuer",
		 "iss-1", "--jwt-leeway", "1m", "--jwt-subscribe-claim", "mercure.subscribe", "--jwt-publish-claim",
		 "mercure.publish", "--jwt-cookie", "herald_token", NULL);
	CHECK(r->r == 0);
	struct jwt_settings js;
	jwt_settings_from_config(&cfg, &js);
	CHECK(js.algorithm == cfg.jwt_algorithm && strcmp(js.algorithm, "HS256") == 0);
	CHECK(js.secret_file == cfg.jwt_secret_file && js.public_key_file == cfg.jwt_public_key_file);
	CHECK(js.audience == cfg.jwt_audience && strcmp(js.audience, "aud-1") == 0);
	CHECK(js.issuer == cfg.jwt_issuer && strcmp(js.issuer, "iss-1") == 0);
	CHECK(js.subscribe_claim == cfg.jwt_subscribe_claim && strcmp(js.subscribe_claim, "mercure.subscribe") == 0);
	CHECK(js.publish_claim == cfg.jwt_publish_claim && strcmp(js.publish_claim, "mercure.publish") == 0);
	CHECK(js.leeway_s == 60);
	CHECK(strcmp(cfg.jwt_cookie, "herald_token") == 0);
	struct jwt_verifier *v = NULL;
	char err[512];
	CHECK(jwt_verifier_new(&js, &v, err, sizeof(err)) == 0 && v != NULL);
	jwt_verifier_free(v);

	/* Values checked as they are set. */
	VALUE_REFUSED("jwt-algorithm", "HS512", "not one of HS256, RS256, ES256, EdDSA");
	VALUE_REFUSED("jwt-algorithm", "none", "not one of");
	VALUE_REFUSED("jwt-algorithm", "hs256", "not one of");
	VALUE_IS("jwt-leeway", "0", 0);
	VALUE_IS("jwt-leeway", "300", 300);
	VALUE_IS("jwt-leeway", "5m", 300);
	VALUE_IS("jwt-leeway", "30s", 30);
	VALUE_REFUSED("jwt-leeway", "301", "allowed: 0 to 300 s");
	VALUE_REFUSED("jwt-leeway", "1h", "out of range");
	VALUE_REFUSED("jwt-leeway", "-1", "must not be negative");
	VALUE_REFUSED("jwt-subscribe-claim", "mercure..subscribe", "not a claim name");
	VALUE_REFUSED("jwt-subscribe-claim", "", "must not be empty");
	VALUE_REFUSED("jwt-publish-claim", "a b", "not a claim name");
	VALUE_REFUSED("jwt-publish-claim", "$.publish", "not a claim name");
	VALUE_REFUSED("jwt-cookie", "bad cookie", "a cookie name has only letters, digits, _ - and .");
	VALUE_REFUSED("jwt-cookie", "a=b", "cookie name");
	VALUE_REFUSED("jwt-cookie", "a;b", "cookie name");
	r = load("--jwt-cookie", "a.b-c_D9", "--jwt-publish-claim", "x-1.y_2", NULL);
	CHECK(r->r == 0 && strcmp(cfg.jwt_cookie, "a.b-c_D9") == 0 && strcmp(cfg.jwt_publish_claim, "x-1.y_2") == 0);

	/* The algorithm's own key file, and not the other. */
	r = load("--jwt-algorithm", "HS256", NULL);
	CHECK(r->r == -1 && r->code == 1 &&
	      err_has("option --jwt-algorithm: jwt_algorithm = \"HS256\" needs jwt_secret_file"));
	r = load("--jwt-algorithm", "ES256", NULL);
	CHECK(r->r == -1 && err_has("jwt_algorithm = \"ES256\" needs jwt_public_key_file"));
	EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
	char ec_path[160];
	snprintf(ec_path, sizeof(ec_path), "%s/ec.pem", tmpdir);
	BIO *b = BIO_new_file(ec_path, "w");
	CHECK(ec && b && PEM_write_bio_PUBKEY(b, ec));
	BIO_free(b);
	EVP_PKEY_free(ec);
	r = load("--jwt-algorithm", "HS256", "--jwt-secret-file", secret, "--jwt-public-key-file", ec_path, NULL);
	CHECK(r->r == -1 && err_has("option --jwt-public-key-file: jwt_public_key_file is set, but jwt_algorithm = "
				    "\"HS256\" (option --jwt-algorithm) reads jwt_secret_file instead"));
	r = load("--jwt-secret-file", secret, NULL);
	CHECK(r->r == -1 && err_has("option --jwt-secret-file: jwt_secret_file is set, but jwt_algorithm is not "
				    "(signed tokens are off)"));
	setenv("HERALD_JWT_PUBLIC_KEY_FILE", ec_path, 1);
	r = load(NULL);
	CHECK(r->r == -1 && err_has("environment HERALD_JWT_PUBLIC_KEY_FILE: jwt_public_key_file is set"));
	setenv("HERALD_JWT_ALGORITHM", "ES256", 1);
	r = load(NULL);
	CHECK(r->r == 0 && strcmp(cfg.jwt_algorithm, "ES256") == 0);
	r = load("--jwt-algorithm", "RS256", NULL);
	CHECK(r->r == -1 && err_has("environment HERALD_JWT_PUBLIC_KEY_FILE: jwt_public_key_file = \"") &&
	      err_has("\": not an RSA key, which RS256 needs"));
	clear_env();

	/* The verifier's refusals, with the origin of the file's key. */
	const char *shortf = write_bytes("jwt-short", "TOPSECRET\n", 10);
	char text[400], want[600];
	snprintf(text, sizeof(text), "jwt_algorithm = HS256\njwt_secret_file = %s\n", shortf);
	const char *p = write_file(text);
	r = load("--config", p, NULL);
	snprintf(want, sizeof(want), "%s:2: jwt_secret_file = \"%s\": the secret is 9 bytes; HS256 needs at least 32",
		 p, shortf);
	CHECK(r->r == -1 && r->code == 1 && err_has(want));
	CHECK(strstr(r->err, "TOPSECRET") == NULL);
	r = load("--jwt-algorithm", "ES256", "--jwt-public-key-file", "/nonexistent/key.pem", NULL);
	CHECK(r->r == -1 && err_has("option --jwt-public-key-file: jwt_public_key_file = \"/nonexistent/key.pem\": "
				    "No such file or directory"));
	r = load("--jwt-algorithm", "ES256", "--jwt-public-key-file", secret, NULL);
	CHECK(r->r == -1 && err_has("no PEM public key"));
	/* jwt_jwks_file: alone, each key naming its algorithm; beside
	 * jwt_algorithm or a key file, refused naming both origins; a set
	 * that does not load, refused naming the key and the member. */
	const char *set = write_bytes("jwks.json", "{\"keys\":[{\"kty\":\"oct\",\"k\":\"c2hvcnQ\"}]}", 38);
	r = load("--jwt-jwks-file", set, NULL);
	snprintf(want, sizeof(want), "option --jwt-jwks-file: jwt_jwks_file = \"%s\": keys[0]: \"k\": 5 bytes", set);
	CHECK(r->r == -1 && err_has(want));
	r = load("--jwt-jwks-file", set, "--jwt-algorithm", "HS256", NULL);
	CHECK(r->r == -1 && err_has("option --jwt-algorithm: jwt_algorithm = \"HS256\" is set, but jwt_jwks_file "
				    "(option --jwt-jwks-file) names each key's algorithm; leave jwt_algorithm empty"));
	r = load("--jwt-jwks-file", set, "--jwt-secret-file", secret, NULL);
	CHECK(r->r == -1 && err_has("option --jwt-secret-file: jwt_secret_file is set, but jwt_jwks_file (option "
				    "--jwt-jwks-file) holds the keys"));
	set = write_bytes("jwks-good.json",
			  "{\"keys\":[{\"kid\":\"a\",\"kty\":\"oct\",\"k\":"
			  "\"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY\"}]}",
			  84);
	r = load("--jwt-jwks-file", set, NULL);
	CHECK(r->r == 0 && strcmp(cfg.jwt_jwks_file, set) == 0 && strcmp(cfg.jwt_algorithm, "") == 0);
	r = load("--jwt-algorithm", "EdDSA", "--jwt-public-key-file", ec_path, NULL);
	CHECK(r->r == -1 && err_has("not an Ed25519 key, which EdDSA needs"));
	/* --check-config takes the same path. */
	r = load("--check-config", "--jwt-algorithm", "ES256", "--jwt-public-key-file", secret, NULL);
	CHECK(r->r == -1 && r->check && err_has("no PEM public key"));
	r = load("--check-config", "--jwt-algorithm", "ES256", "--jwt-public-key-file", ec_path, NULL);
	CHECK(r->r == 0 && r->check);
}

/* What server.c's SIGHUP does: load afresh, and replace the settings only
 * when that succeeded. */
static int reload_into(struct config *c, int argc, char **argv)
{
	struct config fresh;
	bool check;
	const char *command;
	int code;
	if (config_load_checked(&fresh, argc, argv, &check, &command, &code) != 0)
		return -1;
	config_free(c);
	*c = fresh;
	return 0;
}

static void test_reload_and_print(void)
{
	const char *p = write_file("backlog = 11\npublish_token = s3cret\n");
	char *argv[] = { "herald", "--config", (char *)p, NULL };
	const struct res *r = load_argv(3, argv);
	CHECK_EQ_INT(r->r, 0);
	CHECK_EQ_INT(cfg.backlog, 11);

	/* The file changes; a reload sees it. */
	FILE *f = fopen(p, "w");
	fputs("backlog = 12\n", f);
	fclose(f);
	fflush(stderr);
	CHECK_EQ_INT(reload_into(&cfg, 3, argv), 0);
	CHECK_EQ_INT(cfg.backlog, 12);
	CHECK(strcmp(cfg.publish_token, "") == 0);

	/* A broken file: the reload fails and the settings stay. */
	f = fopen(p, "w");
	fputs("backlog = 0\n", f);
	fclose(f);
	int save = dup(2), devnull = open("/dev/null", O_WRONLY);
	dup2(devnull, 2);
	int rr = reload_into(&cfg, 3, argv);
	fflush(stderr);
	dup2(save, 2);
	close(save);
	close(devnull);
	CHECK_EQ_INT(rr, -1);
	CHECK_EQ_INT(cfg.backlog, 12);
	CHECK(cfg.config_path && strcmp(cfg.config_path, p) == 0);

	/* config_print: every key once, secrets masked. */
	r = load("--publish-token", "s3cret", "--listen", "127.0.0.1:1", "--listen", "127.0.0.1:2", NULL);
	char pp[128];
	snprintf(pp, sizeof(pp), "%s/print", tmpdir);
	f = fopen(pp, "w");
	config_print(&cfg, f);
	fclose(f);
	char *out = slurp(pp);
	CHECK(strstr(out, "s3cret") == NULL);
	CHECK(strstr(out, "publish_token = (set)\n") != NULL);
	CHECK(strstr(out, "read_token = \n") != NULL);
	CHECK(strstr(out, "listen = 127.0.0.1:1, 127.0.0.1:2\n") != NULL);
	CHECK(strstr(out, "backlog = 1024\n") != NULL);
	CHECK(strstr(out, "log_level = info\n") != NULL);
	CHECK(strstr(out, "heartbeat_interval = 15000ms\n") != NULL);
	CHECK(strstr(out, "retention_age = 604800s\n") != NULL);
	CHECK(strstr(out, "queue_limit = 262144\n") != NULL);
	CHECK(strstr(out, "metrics_access = local\n") != NULL);
	CHECK(strstr(out, "metrics_token = \n") != NULL);
	CHECK(strstr(out, "ipv6_prefix = 64\n") != NULL);
	CHECK(strstr(out, "tls_ticket_rotate = 43200000ms\n") != NULL);
	CHECK(strstr(out, "jwt_leeway = 10s\n") != NULL);
	CHECK(strstr(out, "jwt_subscribe_claim = subscribe\n") != NULL);
	CHECK(strstr(out, "console = on\n") != NULL);
	/* Each key exactly once, at the start of a line. */
	static const char *const keys[] = {
		"listen",
		"db",
		"backlog",
		"log_level",
		"per_address_limit",
		"max_readers",
		"heartbeat_interval",
		"header_timeout",
		"keepalive_timeout",
		"stall_timeout",
		"max_request_line",
		"max_header_bytes",
		"max_headers",
		"max_body",
		"queue_limit",
		"retention_age",
		"retention_count",
		"publish_token",
		"read_token",
		"trusted_proxies",
		"retry_ms",
		"rotate_after",
		"busy_timeout_ms",
		"ipv6_prefix",
		"publish_token_file",
		"read_token_file",
		"allow_origin",
		"metrics_access",
		"metrics_token",
		"metrics_token_file",
		"unix_mode",
		"tls_cert",
		"tls_key",
		"tls_ticket_rotate",
		"jwt_algorithm",
		"jwt_secret_file",
		"jwt_public_key_file",
		"jwt_leeway",
		"jwt_audience",
		"jwt_issuer",
		"jwt_subscribe_claim",
		"jwt_publish_claim",
		"jwt_cookie",
		"console",
	};
	int missing = 0;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		char pat[64];
		snprintf(pat, sizeof(pat), "\n%s = ", keys[i]);
		const char *at = strncmp(out, pat + 1, strlen(pat + 1)) == 0 ? out : strstr(out, pat);
		if (!at || strstr(at + 1, pat)) {
			fprintf(stderr, "  config_print: key %s missing or repeated\n", keys[i]);
			missing++;
		}
	}
	CHECK_EQ_INT(missing, 0);
	free(out);

	/* The usage text lists every key. */
	snprintf(pp, sizeof(pp), "%s/usage", tmpdir);
	f = fopen(pp, "w");
	config_usage(f);
	fclose(f);
	out = slurp(pp);
	CHECK(strstr(out, "trusted_proxies") && strstr(out, "busy_timeout_ms") && strstr(out, "--check-config"));
	free(out);
}

/* Run check (config_check, or one module's) on c with stderr captured
 * into last.err. */
static int check_captured(config_check_fn *check, const struct config *c)
{
	char ep[128];
	snprintf(ep, sizeof(ep), "%s/stderr-check", tmpdir);
	fflush(stderr);
	int save = dup(2), efd = open(ep, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (save < 0 || efd < 0) {
		perror("capture");
		exit(2);
	}
	dup2(efd, 2);
	close(efd);
	int n = check(c);
	fflush(stderr);
	dup2(save, 2);
	close(save);
	free(last.err);
	last.err = slurp(ep);
	return n;
}

/* config_load parses values only; what a module must judge (an address it
 * binds, a pair it loads, a key it reads) is config_check's list, which
 * names the key's origin as config_load would, and runs every check even
 * after one failed. */
static void test_module_checks(void)
{
	char *argv[] = { "herald", "--listen", "127.0.0.1:99999", "--jwt-secret-file", "/tmp/s", NULL };
	struct config c;
	bool check;
	const char *command;
	int code;
	CHECK_EQ_INT(config_load(&c, 5, argv, &check, &command, &code), 0);
	CHECK_EQ_INT(check_captured(config_check, &c), 2);
	CHECK(err_has("option --listen: listen = \"127.0.0.1:99999\": the port must be a number from 0 to 65535"));
	CHECK(err_has("option --jwt-secret-file: jwt_secret_file is set, but jwt_algorithm is not"));
	/* Each module's check alone. */
	CHECK_EQ_INT(check_captured(listener_check_config, &c), 1);
	CHECK_EQ_INT(check_captured(tls_check_config, &c), 0);
	CHECK_EQ_INT(check_captured(jwt_check_config, &c), 1);
	config_free(&c);

	/* Where each value came from, kept with the settings. */
	const char *p = write_file("# one\nbacklog = 7\n");
	setenv("HERALD_DB", "x.db", 1);
	const struct res *r = load("--config", p, "--retry-ms", "5", NULL);
	clear_env();
	CHECK_EQ_INT(r->r, 0);
	char want[256];
	snprintf(want, sizeof(want), "%s:2", p);
	CHECK(strcmp(config_origin(&cfg, "backlog"), want) == 0);
	CHECK(strcmp(config_origin(&cfg, "db"), "environment HERALD_DB") == 0);
	CHECK(strcmp(config_origin(&cfg, "retry_ms"), "option --retry-ms") == 0);
	CHECK(strcmp(config_origin(&cfg, "listen"), "built-in default") == 0);

	/* config_bad_value words a module's refusal as config's own: the
	 * range of a number, never a secret, a URL without its password. */
	char ep[128];
	snprintf(ep, sizeof(ep), "%s/stderr-bad", tmpdir);
	fflush(stderr);
	int save = dup(2), efd = open(ep, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	CHECK(save >= 0 && efd >= 0);
	dup2(efd, 2);
	close(efd);
	config_bad_value(&cfg, "backlog", "7", "too few");
	config_bad_value(&cfg, "publish_token", "hunter2", "refused");
	config_bad_value(&cfg, "redis_url", "redis://u:pw123@h:1", "refused");
	fflush(stderr);
	dup2(save, 2);
	close(save);
	free(last.err);
	last.err = slurp(ep);
	snprintf(want, sizeof(want), "%s:2: backlog = \"7\": too few (allowed: 1 to 65535)", p);
	CHECK(err_has(want));
	CHECK(err_has("built-in default: publish_token = (value not shown): refused"));
	CHECK(strstr(last.err, "hunter2") == NULL && strstr(last.err, "pw123") == NULL);
}

static void note_changed(const char *key, void *arg)
{
	char *names = arg;
	strcat(names, key);
	strcat(names, " ");
}

/* A reload keeps every key the table flags as read at start-up only, with
 * its origin, and names each one the new settings had changed. */
static void test_restart_keys(void)
{
	char *a[] = { "herald",    "--listen",     "127.0.0.1:1,unix:/tmp/r.sock",
		      "--backlog", "10",           "--db",
		      "a.db",      "--read-token", "t1",
		      NULL };
	char *b[] = { "herald",         "--listen", "127.0.0.1:2",  "--backlog", "11",        "--db", "a.db",
		      "--redis-stream", "s2",       "--read-token", "t2",        "--workers", "1",    NULL };
	struct config cur, fresh;
	bool check;
	const char *command;
	int code;
	CHECK_EQ_INT(config_load(&cur, 9, a, &check, &command, &code), 0);
	CHECK_EQ_INT(config_load(&fresh, 13, b, &check, &command, &code), 0);
	char names[256] = "";
	config_keep_restart_keys(&fresh, &cur, note_changed, names);
	CHECK(strcmp(names, "listen backlog redis_stream ") == 0);
	CHECK(fresh.nlisten == 2 && strcmp(fresh.listen[1], "unix:/tmp/r.sock") == 0 && fresh.backlog == 10);
	CHECK(strcmp(fresh.db, "a.db") == 0 && strcmp(fresh.redis_stream, "herald") == 0);
	CHECK(strcmp(config_origin(&fresh, "redis_stream"), "built-in default") == 0);
	CHECK(strcmp(fresh.read_token, "t2") == 0); /* not flagged: the new value */
	CHECK(cur.nlisten == 0 && cur.db == NULL);
	config_free(&cur);
	config_free(&fresh);
}

/* Loads and frees in a loop, including failed loads: the leak checker at
 * exit must find nothing. config_free twice is harmless. */
static void test_free(void)
{
	const char *tf = write_file("token\n");
	char text[256];
	snprintf(text, sizeof(text),
		 "listen = 127.0.0.1:1,unix:/tmp/b\npublish_token = x\ndb = y\nread_token_file = %s\n", tf);
	const char *p = write_file(text);
	for (int i = 0; i < 50; i++) {
		load("--config", p, "--listen", "127.0.0.1:3,bad", "--read-token", "r", NULL);
		load("--config", p, "--listen", "127.0.0.1:3", "--metrics-token-file", tf, NULL);
		load("--config", p, "--backlog", "0", NULL);
		load("--bogus", NULL);
	}
	load("--config", p, NULL);
	config_free(&cfg);
	config_free(&cfg);
	CHECK_EQ_INT(cfg.nlisten, 0);
	CHECK(cfg.db == NULL && cfg.publish_token == NULL && cfg.config_path == NULL);
	memset(&cfg, 0, sizeof(cfg));
}

int main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/herald-test-config-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	clear_env();
	test_defaults();
	test_file();
	test_precedence();
	test_units();
	test_refusals_in_file();
	test_long_lines();
	test_flags();
	test_listen_addresses();
	test_checked_strings();
	test_quotes();
	test_env_names();
	test_near_misses();
	test_token_files();
	test_new_keys();
	test_jwt_keys();
	test_console_key();
	test_reload_and_print();
	test_module_checks();
	test_restart_keys();
	test_free();

	config_free(&cfg);
	free(last.err);
	free(last.out);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	return check_done("test_config");
}
