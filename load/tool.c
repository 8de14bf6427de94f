/* SPDX-License-Identifier: BSD-2-Clause */
/* tool.c: the little plumbing every load tool shares (see tool.h): clocks,
 * usage errors, numbers and addresses from the command line, the fd limit,
 * signals, errno kinds, the path of a sibling tool, percentiles and the
 * formats of table cells. */
#include "tool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int64_t tool_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

double tool_now_s(void)
{
	return (double)tool_now_ns() / 1e9;
}

void tool_sleep(double s, volatile int *stop)
{
	if (s <= 0)
		return;
	struct timespec ts = { .tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9) };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		if (stop && *stop)
			return;
}

static const char *usage_name = "load", *usage_text = "";

void tool_usage(const char *name, const char *usage)
{
	usage_name = name;
	usage_text = usage;
}

const char *tool_name(void)
{
	return usage_name;
}

int tool_usage_error(const char *fmt, ...)
{
	char why[300];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%s: %s\n%s", usage_name, why, usage_text);
	return 2;
}

int tool_parse_long(const char *s, long min, long max, long *out)
{
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || end == s || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int tool_parse_seconds(const char *s, double min, double max, double *out)
{
	if (!s || !*s)
		return -1;
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || !isfinite(v))
		return -1;
	if (strcmp(end, "ms") == 0)
		v /= 1000.0;
	else if (strcmp(end, "m") == 0)
		v *= 60.0;
	else if (*end && strcmp(end, "s") != 0)
		return -1;
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int tool_raise_nofile(long *soft, long *hard)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit want = { .rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max };
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl.rlim_cur = rl.rlim_max;
	}
	if (soft)
		*soft = rl.rlim_cur == RLIM_INFINITY ? 1L << 30 : (long)rl.rlim_cur;
	if (hard)
		*hard = rl.rlim_max == RLIM_INFINITY ? 1L << 30 : (long)rl.rlim_max;
	return 0;
}

int tool_check_fds(long need, const char *what)
{
	long soft = 0, hard = 0;
	if (tool_raise_nofile(&soft, &hard) != 0)
		return 0;
	if (need <= soft)
		return 0;
	fprintf(stderr,
		"%s need about %ld open files, but this process may have at most %ld "
		"(hard limit %ld; see `ulimit -Hn`).\n"
		"Raise the hard limit (LimitNOFILE= in a systemd unit, nofile in "
		"/etc/security/limits.conf, or `ulimit -Hn` as root) or ask for fewer.\n",
		what, need, soft, hard);
	return -1;
}

int tool_parse_addr(const char *s, struct tool_addr *a)
{
	memset(a, 0, sizeof(*a));
	char host[128];
	const char *rest = s;
	if (strncmp(s, "http://", 7) == 0) {
		rest = s + 7;
		const char *slash = strchr(rest, '/');
		size_t hl = slash ? (size_t)(slash - rest) : strlen(rest);
		if (hl == 0 || hl >= sizeof(host))
			return -1;
		memcpy(host, rest, hl);
		host[hl] = '\0';
		if (slash)
			snprintf(a->path, sizeof(a->path), "%s", slash);
		rest = host;
	} else if (strncmp(s, "unix:", 5) == 0) {
		struct sockaddr_un *un = (struct sockaddr_un *)&a->sa;
		const char *p = s + 5;
		if (!*p || strlen(p) >= sizeof(un->sun_path))
			return -1;
		un->sun_family = AF_UNIX;
		strcpy(un->sun_path, p);
		a->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(p) + 1);
		a->family = AF_UNIX;
		snprintf(a->text, sizeof(a->text), "unix:%s", p);
		return 0;
	}
	char hbuf[128];
	const char *colon;
	const char *h;
	if (rest[0] == '[') {
		const char *close = strchr(rest, ']');
		if (!close || close[1] != ':' || (size_t)(close - rest - 1) >= sizeof(hbuf))
			return -1;
		memcpy(hbuf, rest + 1, (size_t)(close - rest - 1));
		hbuf[close - rest - 1] = '\0';
		colon = close + 1;
		h = hbuf;
	} else {
		colon = strrchr(rest, ':');
		if (!colon || (size_t)(colon - rest) >= sizeof(hbuf))
			return -1;
		memcpy(hbuf, rest, (size_t)(colon - rest));
		hbuf[colon - rest] = '\0';
		h = hbuf;
		if (strcmp(h, "localhost") == 0)
			h = "127.0.0.1";
	}
	long port;
	if (tool_parse_long(colon + 1, 1, 65535, &port) != 0)
		return -1;
	a->port = (int)port;
	struct sockaddr_in *in4 = (struct sockaddr_in *)&a->sa;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&a->sa;
	if (inet_pton(AF_INET, h, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		a->len = sizeof(*in4);
		a->family = AF_INET;
		snprintf(a->text, sizeof(a->text), "%s:%ld", h, port);
	} else if (inet_pton(AF_INET6, h, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		a->len = sizeof(*in6);
		a->family = AF_INET6;
		snprintf(a->text, sizeof(a->text), "[%s]:%ld", h, port);
	} else {
		return -1;
	}
	return 0;
}

const char *tool_errno_kind(int err)
{
	switch (err) {
	case ECONNREFUSED:
		return "refused";
	case ECONNRESET:
	case EPIPE:
	case ECONNABORTED:
		return "reset";
	case ETIMEDOUT:
		return "timeout";
	case 0:
		return "closed";
	default:
		return "other";
	}
}

static volatile int *signal_flag;

static void on_signal(int sig)
{
	(void)sig;
	if (signal_flag)
		*signal_flag = 1;
}

void tool_catch_signals(volatile int *flag)
{
	signal_flag = flag;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

const char *tool_sibling(const char *name, char *buf, size_t len)
{
	char self[4096];
	ssize_t r = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (r > 0) {
		self[r] = '\0';
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			int n = snprintf(buf, len, "%s/%s", self, name);
			if (n > 0 && (size_t)n < len && access(buf, X_OK) == 0)
				return buf;
		}
	}
	snprintf(buf, len, "load/%s", name);
	return buf;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void tool_sort_doubles(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
}

double tool_percentile(const double *sorted, size_t n, double p)
{
	if (n == 0)
		return NAN;
	double rank = ceil(p / 100.0 * (double)n);
	size_t i = rank < 1 ? 0 : (size_t)rank - 1;
	if (i >= n)
		i = n - 1;
	return sorted[i];
}

const char *tool_fmt_dur(double s, char *buf, size_t len)
{
	if (isnan(s))
		snprintf(buf, len, "n/a");
	else if (s < 0.001)
		snprintf(buf, len, "%.0f us", s * 1e6);
	else if (s < 0.01)
		snprintf(buf, len, "%.2f ms", s * 1e3);
	else if (s < 1.0)
		snprintf(buf, len, "%.1f ms", s * 1e3);
	else if (s < 100.0)
		snprintf(buf, len, "%.2f s", s);
	else
		snprintf(buf, len, "%.1f s", s);
	return buf;
}

const char *tool_fmt_count(long long v, char *buf, size_t len)
{
	char tmp[32];
	int n = snprintf(tmp, sizeof(tmp), "%lld", v < 0 ? -v : v);
	size_t o = 0;
	if (v < 0 && o + 1 < len)
		buf[o++] = '-';
	for (int i = 0; i < n && o + 1 < len; i++) {
		if (i > 0 && (n - i) % 3 == 0 && o + 1 < len)
			buf[o++] = ',';
		if (o + 1 < len)
			buf[o++] = tmp[i];
	}
	buf[o] = '\0';
	return buf;
}
