/* SPDX-License-Identifier: BSD-2-Clause */
/* procstat.c: /proc/PID/stat, /proc/net/netstat's TcpExt counters and
 * /proc/sys numbers (see procstat.h). Parsers never write to their input;
 * readers read the whole file first, so a line is never parsed half-read. */
#include "common/procstat.h"

#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

ssize_t procstat_read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	buf[got] = '\0';
	close(fd);
	return (ssize_t)got;
}

/* ---- /proc/PID/stat ------------------------------------------------------ */

/* Whether a number parsed up to end filled its whole field. */
static int field_ends(const char *end)
{
	return *end == ' ' || *end == '\n' || *end == '\0';
}

/* Parse field number f (counted as in proc(5)) at p into ps, when it is one
 * we keep; 0 or -EINVAL. */
static int keep_field(int f, const char *p, struct procstat *ps)
{
	char *end = (char *)p;
	errno = 0;
	switch (f) {
	case 3:
		ps->state = *p;
		return 0;
	case 4:
		ps->ppid = (pid_t)strtol(p, &end, 10);
		break;
	case 14:
		ps->utime = strtoull(p, &end, 10);
		break;
	case 15:
		ps->stime = strtoull(p, &end, 10);
		break;
	case 20:
		ps->threads = strtol(p, &end, 10);
		break;
	case 24:
		ps->rss_pages = strtol(p, &end, 10);
		break;
	default:
		return 0;
	}
	return end == p || errno || !field_ends(end) ? -EINVAL : 0;
}

int procstat_parse(const char *line, struct procstat *ps)
{
	memset(ps, 0, sizeof(*ps));
	const char *open = strchr(line, '(');
	const char *close = strrchr(line, ')');
	if (!open || !close || close < open)
		return -EINVAL;
	char *end;
	errno = 0;
	long pid = strtol(line, &end, 10);
	if (end == line || errno || end > open || pid < 0)
		return -EINVAL;
	ps->pid = (pid_t)pid;
	size_t n = (size_t)(close - open - 1);
	if (n >= sizeof(ps->comm))
		n = sizeof(ps->comm) - 1;
	memcpy(ps->comm, open + 1, n);
	ps->comm[n] = '\0';
	/* After ')' come fields 3 (state) onwards, one space apart; 24 is the
	 * last one kept. */
	const char *p = close + 1;
	for (int f = 3; f <= 24; f++) {
		if (*p != ' ')
			return -EINVAL;
		p++;
		if (*p == ' ' || *p == '\n' || *p == '\0')
			return -EINVAL;
		if (keep_field(f, p, ps) != 0)
			return -EINVAL;
		p += strcspn(p, " \n");
	}
	return 0;
}

int procstat_read(pid_t pid, struct procstat *ps)
{
	char path[64], buf[2048];
	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/stat");
	ssize_t r = procstat_read_file(path, buf, sizeof(buf));
	if (r < 0)
		return (int)r;
	return procstat_parse(buf, ps);
}

long procstat_clk_tck(void)
{
	long t = sysconf(_SC_CLK_TCK);
	return t > 0 ? t : 100;
}

long procstat_page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? p : 4096;
}

/* ---- /proc/net/netstat ----------------------------------------------------- */

/* The text after "TcpExt:" of the nth line (0 or 1) that starts with it,
 * up to its end of line in *len; NULL when there is none. */
static const char *tcpext_line(const char *text, int nth, size_t *len)
{
	for (const char *line = text; line && *line;) {
		const char *nl = strchr(line, '\n');
		if (strncmp(line, "TcpExt:", 7) == 0 && nth-- == 0) {
			*len = (nl ? (size_t)(nl - line) : strlen(line)) - 7;
			return line + 7;
		}
		line = nl ? nl + 1 : NULL;
	}
	return NULL;
}

/* The next space-separated word of s[*at, len) into *w and *wl; 0 at the end. */
static int next_word(const char *s, size_t len, size_t *at, const char **w, size_t *wl)
{
	while (*at < len && s[*at] == ' ')
		(*at)++;
	if (*at >= len)
		return 0;
	*w = s + *at;
	while (*at < len && s[*at] != ' ')
		(*at)++;
	*wl = (size_t)(s + *at - *w);
	return 1;
}

int procstat_tcpext_parse(const char *text, struct procstat_tcpext *t)
{
	memset(t, 0, sizeof(*t));
	size_t nlen = 0, vlen = 0;
	const char *names = tcpext_line(text, 0, &nlen);
	const char *vals = tcpext_line(text, 1, &vlen);
	if (!names || !vals)
		return -ENODATA;
	size_t cap = 1;
	for (size_t i = 0; i < nlen; i++)
		cap += names[i] == ' ';
	t->names = xcalloc(cap, sizeof(*t->names));
	t->vals = xcalloc(cap, sizeof(*t->vals));
	size_t na = 0, va = 0, wl, vl;
	const char *w, *v;
	while ((size_t)t->n < cap && next_word(names, nlen, &na, &w, &wl) && next_word(vals, vlen, &va, &v, &vl)) {
		snprintf(t->names[t->n], sizeof(t->names[0]), "%.*s", (int)wl, w);
		t->vals[t->n] = strtoll(v, NULL, 10);
		t->n++;
	}
	return 0;
}

int procstat_tcpext_read(struct procstat_tcpext *t)
{
	memset(t, 0, sizeof(*t));
	size_t cap = 65536;
	char *buf = xmalloc(cap);
	ssize_t len = procstat_read_file("/proc/net/netstat", buf, cap);
	int rc = len < 0 ? (int)len : procstat_tcpext_parse(buf, t);
	free(buf);
	return rc;
}

void procstat_tcpext_free(struct procstat_tcpext *t)
{
	free(t->names);
	free(t->vals);
	memset(t, 0, sizeof(*t));
}

long long procstat_tcpext_get(const struct procstat_tcpext *t, const char *name)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->names[i], name) == 0)
			return t->vals[i];
	return -1;
}

/* ---- /proc/sys ------------------------------------------------------------- */

int procstat_sysctl(const char *name, long *val)
{
	char path[256], buf[256];
	if (name[0] == '/') {
		snprintf(path, sizeof(path), "%s", name);
	} else {
		int n = snprintf(path, sizeof(path), "/proc/sys/%s", name);
		for (int i = 10; i < n && i < (int)sizeof(path); i++)
			if (path[i] == '.')
				path[i] = '/';
	}
	ssize_t r = procstat_read_file(path, buf, sizeof(buf));
	if (r < 0)
		return (int)r;
	char *end;
	errno = 0;
	long v = strtol(buf, &end, 10);
	if (end == buf || errno)
		return -EINVAL;
	*val = v;
	return 0;
}
