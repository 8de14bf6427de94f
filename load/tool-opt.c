/* SPDX-License-Identifier: BSD-2-Clause */
/* tool-opt.c: the one option parser of the load tools. Each tool describes
 * its options in a table of struct tool_opt (see tool.h): name, short name,
 * kind, where the value goes, its range, what it is called in messages and
 * its --help lines. The parser walks argv once, left to right, so the first
 * problem is the one reported, and the last of a repeated option wins.
 *
 * Exit statuses are the tools' contract: --help prints on stdout and gives
 * 0; an unknown argument or a bad value says why and prints the usage on
 * stderr and gives 2. */
#include "tool.h"

#include <stdio.h>
#include <string.h>

/* The entry for an argument spelled arg ("--events", "-c"); NULL if none. */
static const struct tool_opt *find(const struct tool_opt *t, const char *arg)
{
	for (; t->name; t++) {
		if (t->name[0] != '-')
			continue;
		if (strcmp(arg, t->name) == 0)
			return t;
		if (t->short_name && arg[0] == '-' && arg[1] == t->short_name && arg[2] == '\0')
			return t;
	}
	return NULL;
}

/* Say that o, spelled name, needs a value of its kind within its range;
 * returns 2. The same words serve a missing value and a bad one. */
static int bad_value(const struct tool_opt *o, const char *name)
{
	switch (o->kind) {
	case TOOL_OPT_LONG:
		return tool_usage_error("%s needs %s %ld-%ld", name, o->what, (long)o->min, (long)o->max);
	case TOOL_OPT_DOUBLE:
		return tool_usage_error("%s needs %s (%g to %g)", name, o->what, o->min, o->max);
	default:
		return tool_usage_error("%s needs %s", name, o->what);
	}
}

/* Store value as o asks; 0, or the exit status after saying why. */
static int take(const struct tool_opt *o, const char *name, const char *value)
{
	switch (o->kind) {
	case TOOL_OPT_LONG:
		return tool_parse_long(value, (long)o->min, (long)o->max, o->ptr) == 0 ? 0 : bad_value(o, name);
	case TOOL_OPT_DOUBLE:
		return tool_parse_seconds(value, o->min, o->max, o->ptr) == 0 ? 0 : bad_value(o, name);
	case TOOL_OPT_STRING:
		if (strlen(value) < (size_t)o->min)
			return bad_value(o, name);
		*(const char **)o->ptr = value;
		return 0;
	case TOOL_OPT_CALL:
		return o->call(o->ptr, name, value);
	default:
		return 0;
	}
}

/* Give arg to the first positional entry not filled yet (bit i of *filled
 * for the i-th positional); 0, or the exit status after saying why. */
static int positional(const struct tool_opt *t, const char *arg, unsigned *filled)
{
	unsigned bit = 1;
	for (; t->name; t++) {
		if (t->name[0] == '-')
			continue;
		if (!(*filled & bit)) {
			*filled |= bit;
			if (tool_parse_long(arg, (long)t->min, (long)t->max, t->ptr) == 0)
				return 0;
			return tool_usage_error("%s must be %s from %ld to %ld", t->name, t->what, (long)t->min,
						(long)t->max);
		}
		bit <<= 1;
	}
	return tool_usage_error("unknown argument '%s'", arg);
}

int tool_opt_parse(const struct tool_opt *t, int argc, char **argv, void (*help)(const struct tool_opt *t))
{
	unsigned filled = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int rc;
		if (a[0] != '-') {
			rc = positional(t, a, &filled);
		} else {
			const struct tool_opt *o = find(t, a);
			if (!o)
				return tool_usage_error("unknown argument '%s'", a);
			if (o->kind == TOOL_OPT_HELP) {
				help(t);
				return 0;
			}
			if (o->kind == TOOL_OPT_FLAG) {
				*(int *)o->ptr = 1;
				continue;
			}
			/* A value is the next argument, whatever it looks like. */
			rc = i + 1 < argc ? take(o, a, argv[++i]) : bad_value(o, a);
		}
		if (rc)
			return rc;
	}
	return -1;
}

void tool_opt_help(const struct tool_opt *t)
{
	for (; t->name; t++)
		if (t->help)
			fputs(t->help, stdout);
}
