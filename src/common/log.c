/* SPDX-License-Identifier: BSD-2-Clause */
/* log.c: leveled logging to stderr, journald-aware. */
#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static enum log_level level = LOG_LVL_INFO;
static int to_journal;

void log_init(void)
{
	/* JOURNAL_STREAM is "device:inode" of the journal's stream socket; only
	 * trust it when it really is our stderr (a child may inherit it). */
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	unsigned long long dev, ino;
	to_journal = 0;
	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0)
		to_journal = (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_set_level(enum log_level lvl)
{
	level = lvl;
}

static const char *const level_names[] = { "", "", "", "error", "warning", "notice", "info", "debug" };

const char *log_level_name(int lvl)
{
	return lvl >= LOG_LVL_ERR && lvl <= LOG_LVL_DEBUG ? level_names[lvl] : "?";
}

int log_level_parse(const char *s)
{
	static const struct {
		const char *name;
		enum log_level lvl;
	} names[] = {
		{ "error", LOG_LVL_ERR },     { "warning", LOG_LVL_WARN }, { "warn", LOG_LVL_WARN },
		{ "notice", LOG_LVL_NOTICE }, { "info", LOG_LVL_INFO },    { "debug", LOG_LVL_DEBUG },
	};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(s, names[i].name) == 0)
			return (int)names[i].lvl;
	return -1;
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	char line[2048];
	size_t n = 0;
	va_list ap;

	if (lvl > level)
		return;
	if (to_journal) {
		n = (size_t)snprintf(line, sizeof(line), "<%d>", (int)lvl);
	} else {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s: ", ts.tv_nsec / 1000000L,
				      level_names[lvl]);
	}
	va_start(ap, fmt);
	int w = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (w < 0)
		w = 0;
	n += (size_t)w;
	if (n > sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line so concurrent writers to the same journal stream
	 * never interleave within a line. */
	ssize_t r = write(STDERR_FILENO, line, n);
	(void)r;
}
