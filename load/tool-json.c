/* SPDX-License-Identifier: BSD-2-Clause */
/* tool-json.c: the one JSON line each tool ends with, written member by
 * member on stdout (see tool.h), and the reading of a number back out of
 * another tool's line. */
#include "tool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tool_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

/* Nesting of the JSON line being printed: the closing bracket and whether a
 * member was written yet, per level. */
static char json_close[16];
static int json_first[16];
static int json_depth;

static void json_member(const char *key)
{
	if (json_depth > 0) {
		if (!json_first[json_depth - 1])
			putchar(',');
		json_first[json_depth - 1] = 0;
	}
	if (key) {
		tool_json_str(stdout, key);
		putchar(':');
	}
}

void tool_json_open(const char *key, char bracket)
{
	json_member(key);
	putchar(bracket);
	if (json_depth < 16) {
		json_close[json_depth] = bracket == '[' ? ']' : '}';
		json_first[json_depth] = 1;
		json_depth++;
	}
}

void tool_json_close(void)
{
	if (json_depth == 0)
		return;
	json_depth--;
	putchar(json_close[json_depth]);
	if (json_depth == 0) {
		putchar('\n');
		fflush(stdout);
	}
}

void tool_json_int(const char *key, long long v)
{
	json_member(key);
	printf("%lld", v);
}

void tool_json_num(const char *key, double v)
{
	json_member(key);
	if (isnan(v) || isinf(v))
		printf("null");
	else
		printf("%.3f", v);
}

void tool_json_text(const char *key, const char *s)
{
	json_member(key);
	tool_json_str(stdout, s);
}

void tool_json_null(const char *key)
{
	json_member(key);
	printf("null");
}

void tool_json_bool(const char *key, int v)
{
	json_member(key);
	printf("%s", v ? "true" : "false");
}

int tool_json_number(const char *json, const char *key, double *out)
{
	char pat[128];
	snprintf(pat, sizeof(pat), "\"%s\":", key);
	const char *p = strstr(json, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	while (*p == ' ')
		p++;
	char *end;
	double v = strtod(p, &end);
	if (end == p)
		return -1;
	*out = v;
	return 0;
}
