/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_config.c: fuzz target for the configuration file reader and the value
 * parsers in src/core/config.c. The input is a whole configuration file: it is
 * written to an in-memory file (created once per process, rewritten for
 * each input) and loaded the way herald does, config_load_checked (the
 * values, then the modules' checks) with argv {"herald", "--config",
 * PATH}. Invariants: it answers 0 or -1
 * (exit code 1, the settings already freed); on 0 the listen list has 1 to
 * CONFIG_MAX_LISTEN non-empty addresses, the file is named, and config_print
 * writes exactly one "key = value" line per key, so --check-config's output
 * cannot be forged by a value, and no control byte anywhere (listen
 * addresses included: the listener's check parses each one). Leaks and over-reads
 * are the sanitizers'.
 *
 * At start-up the HERALD_* variables (and BACKLOG, LISTEN_FDS) are removed
 * from the environment, since config_load reads them. Every refused value
 * logs a line to file descriptor 2, so fd 2 is /dev/null while config_load
 * runs, and the real stderr between inputs: libFuzzer's statistics, the
 * driver's messages and the invariant checks stay visible, and sanitizer
 * reports go to a copy of the real stderr whenever they happen.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/topic.h"
#include "server/config_check.h"
#include "fuzz.h"

extern char **environ;

/* Present only in sanitizer builds: where reports are written. */
extern void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

static int stderr_fd = -1, null_fd = -1; /* a copy of the real stderr; /dev/null */
static int conf_fd = -1;
static char conf_path[64];
static size_t nkeys; /* lines config_print writes for the defaults */

/* Remove every variable config_load would read. unsetenv moves environ
 * about, so start over after each removal. */
static void clear_environment(void)
{
	bool again = true;
	while (again) {
		again = false;
		for (char **e = environ; *e; e++) {
			if (strncmp(*e, "HERALD_", 7) && strncmp(*e, "BACKLOG=", 8) && strncmp(*e, "LISTEN_FDS=", 11))
				continue;
			char name[256];
			size_t n = strcspn(*e, "=");
			if (n >= sizeof(name))
				n = sizeof(name) - 1;
			memcpy(name, *e, n);
			name[n] = '\0';
			FUZZ_ASSERT(unsetenv(name) == 0);
			again = true;
			break;
		}
	}
}

/* Print cfg into memory, check each line is "key = value" without control
 * bytes, and return the number of lines. */
static size_t check_print(const struct config *cfg)
{
	char *text = NULL;
	size_t len = 0, lines = 0;
	FILE *f = open_memstream(&text, &len);
	FUZZ_ASSERT(f);
	config_print(cfg, f);
	FUZZ_ASSERT(fclose(f) == 0);
	for (const char *p = text; p < text + len;) {
		const char *nl = memchr(p, '\n', (size_t)(text + len - p));
		FUZZ_ASSERT(nl);
		size_t name = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
		FUZZ_ASSERT(name > 0 && strncmp(p + name, " = ", 3) == 0);
		for (const char *c = p; c < nl; c++)
			FUZZ_ASSERT((unsigned char)*c >= 0x20 && *c != 0x7f);
		lines++;
		p = nl + 1;
	}
	free(text);
	return lines;
}

/* Load argv's settings with fd 2 on /dev/null. */
static int quiet_load(struct config *cfg, int argc, char **argv, bool *check_only, int *code)
{
	FUZZ_ASSERT(dup2(null_fd, STDERR_FILENO) == STDERR_FILENO);
	const char *command;
	int r = config_load_checked(cfg, argc, argv, check_only, &command, code);
	FUZZ_ASSERT(r != 1); /* the file cannot hold one of main's commands */
	FUZZ_ASSERT(dup2(stderr_fd, STDERR_FILENO) == STDERR_FILENO);
	return r;
}

static void setup(void)
{
	stderr_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 10);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	FUZZ_ASSERT(stderr_fd >= 0 && null_fd >= 0);
	if (__sanitizer_set_report_fd)
		__sanitizer_set_report_fd((void *)(intptr_t)stderr_fd);
	clear_environment();

	conf_fd = memfd_create("herald-fuzz.conf", MFD_CLOEXEC);
	FUZZ_ASSERT(conf_fd >= 0);
	snprintf(conf_path, sizeof(conf_path), "/proc/self/fd/%d", conf_fd);

	char *argv[] = { "herald", NULL };
	struct config cfg;
	bool check_only;
	int code;
	FUZZ_ASSERT(quiet_load(&cfg, 1, argv, &check_only, &code) == 0);
	nkeys = check_print(&cfg);
	FUZZ_ASSERT(nkeys > 0);
	config_free(&cfg);
}

/* Loaded namespaces: valid patterns (never "*"), each once, every rule
 * resolved, each the namespace of its own pattern's topics. */
static void check_namespaces(const struct config *cfg)
{
	const struct namespaces *t = &cfg->namespaces;
	FUZZ_ASSERT(t->n <= NAMESPACE_MAX);
	for (size_t i = 0; i < t->n; i++) {
		const struct namespace *ns = &t->ns[i];
		size_t len = strlen(ns->pattern);
		FUZZ_ASSERT(topic_pattern_valid(ns->pattern, len) && strcmp(ns->pattern, "*") != 0);
		FUZZ_ASSERT(ns->origin && ns->origin[0]);
		FUZZ_ASSERT(ns->retention_count >= 0 && ns->retention_age_s >= 0 && ns->max_readers >= 0);
		const int sw[] = { ns->anonymous, ns->publish_token, ns->presence, ns->presence_events, ns->mercure };
		for (size_t k = 0; k < sizeof(sw) / sizeof(sw[0]); k++)
			FUZZ_ASSERT(sw[k] == 0 || sw[k] == 1);
		for (size_t j = 0; j < i; j++)
			FUZZ_ASSERT(strcmp(t->ns[j].pattern, ns->pattern) != 0);
		if (ns->pattern[len - 1] != '*')
			FUZZ_ASSERT(namespace_of(t, ns->pattern, len) == (int)i);
	}
}

/* Make the in-memory file hold exactly data[0..size). */
static void write_conf(const uint8_t *data, size_t size)
{
	FUZZ_ASSERT(ftruncate(conf_fd, 0) == 0);
	for (size_t off = 0; off < size;) {
		ssize_t w = pwrite(conf_fd, data + off, size - off, (off_t)off);
		FUZZ_ASSERT(w > 0);
		off += (size_t)w;
	}
}

int fuzz_one(const uint8_t *data, size_t size)
{
	if (conf_fd < 0)
		setup();
	write_conf(data, size);

	char *argv[] = { "herald", "--config", conf_path, NULL };
	struct config cfg;
	bool check_only = true;
	int code = -1;
	int r = quiet_load(&cfg, 3, argv, &check_only, &code);
	FUZZ_ASSERT(r == 0 || r == -1);
	FUZZ_ASSERT(!check_only);
	if (r < 0) {
		/* config_load freed what it had built; LeakSanitizer checks it. */
		FUZZ_ASSERT(code == 1);
		return 0;
	}
	FUZZ_ASSERT(code == 0);
	FUZZ_ASSERT(cfg.nlisten >= 1 && cfg.nlisten <= CONFIG_MAX_LISTEN);
	for (size_t i = 0; i < cfg.nlisten; i++)
		FUZZ_ASSERT(cfg.listen[i] && cfg.listen[i][0]);
	FUZZ_ASSERT(cfg.config_path && strcmp(cfg.config_path, conf_path) == 0);
	FUZZ_ASSERT(check_print(&cfg) == nkeys);
	check_namespaces(&cfg);
	config_free(&cfg);
	return 0;
}
