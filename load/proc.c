/* proc.c: kernel readings and shared plumbing for the load tools (see proc.h).
 * Everything here is best effort in the sense that a missing /proc file gives
 * an error value the caller prints as "n/a", never a crash. */
#include "proc.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Read a small file whole into buf (NUL-terminated); bytes read or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t got = 0;
	while (got + 1 < len) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
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

/* ---- /proc/PID ---------------------------------------------------------- */

/* Parse /proc/N/stat: ppid, utime and stime. The command name may hold spaces
 * and parentheses, so fields are counted from the last ')'. */
static int stat_fields(pid_t pid, pid_t *ppid, uint64_t *utime, uint64_t *stime)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	char *p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	p++;
	/* After ')': field 3 is state; ppid is 4, utime 14, stime 15. */
	int field = 2;
	char *save = NULL;
	for (char *tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		field++;
		if (field == 4 && ppid)
			*ppid = (pid_t)strtol(tok, NULL, 10);
		else if (field == 14 && utime)
			*utime = strtoull(tok, NULL, 10);
		else if (field == 15) {
			if (stime)
				*stime = strtoull(tok, NULL, 10);
			return 0;
		}
	}
	return -EINVAL;
}

int proc_family(pid_t pid, int children, pid_t *out, int max)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (max < 1 || access(path, F_OK) != 0)
		return 0;
	out[0] = pid;
	int n = 1;
	if (!children)
		return n;
	/* Collect (pid, ppid) of every process once, then grow the family until
	 * no process's parent is newly in it. */
	DIR *d = opendir("/proc");
	if (!d)
		return n;
	size_t cap = 256, cnt = 0;
	pid_t(*pairs)[2] = xmalloc(cap * sizeof(*pairs));
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		pid_t p = (pid_t)atoi(de->d_name), pp = 0;
		if (p == pid || stat_fields(p, &pp, NULL, NULL) != 0)
			continue;
		if (cnt == cap) {
			cap *= 2;
			pairs = xrealloc(pairs, cap * sizeof(*pairs));
		}
		pairs[cnt][0] = p;
		pairs[cnt][1] = pp;
		cnt++;
	}
	closedir(d);
	int grew = 1;
	while (grew && n < max) {
		grew = 0;
		for (size_t i = 0; i < cnt && n < max; i++) {
			if (pairs[i][0] == 0)
				continue;
			for (int j = 0; j < n; j++) {
				if (pairs[i][1] == out[j]) {
					out[n++] = pairs[i][0];
					pairs[i][0] = 0;
					grew = 1;
					break;
				}
			}
		}
	}
	free(pairs);
	return n;
}

#define FAMILY_MAX 256

int proc_cpu_ticks(pid_t pid, int children, uint64_t *ticks)
{
	pid_t fam[FAMILY_MAX];
	int n = proc_family(pid, children, fam, FAMILY_MAX);
	if (n == 0)
		return -ESRCH;
	uint64_t sum = 0;
	for (int i = 0; i < n; i++) {
		uint64_t u = 0, s = 0;
		if (stat_fields(fam[i], NULL, &u, &s) == 0)
			sum += u + s;
		else if (i == 0)
			return -ESRCH;
	}
	*ticks = sum;
	return 0;
}

long proc_clk_tck(void)
{
	long t = sysconf(_SC_CLK_TCK);
	return t > 0 ? t : 100;
}

int proc_threads(pid_t pid, int children)
{
	pid_t fam[FAMILY_MAX];
	int n = proc_family(pid, children, fam, FAMILY_MAX);
	if (n == 0)
		return -1;
	int total = 0;
	for (int i = 0; i < n; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task", (int)fam[i]);
		DIR *d = opendir(path);
		if (!d) {
			if (i == 0)
				return -1;
			continue;
		}
		struct dirent *de;
		while ((de = readdir(d)))
			if (isdigit((unsigned char)de->d_name[0]))
				total++;
		closedir(d);
	}
	return total;
}

long proc_rss_kb(pid_t pid, int children)
{
	pid_t fam[FAMILY_MAX];
	int n = proc_family(pid, children, fam, FAMILY_MAX);
	if (n == 0)
		return -1;
	long total = 0;
	for (int i = 0; i < n; i++) {
		char path[64], buf[4096];
		snprintf(path, sizeof(path), "/proc/%d/status", (int)fam[i]);
		if (read_small(path, buf, sizeof(buf)) <= 0) {
			if (i == 0)
				return -1;
			continue;
		}
		char *p = strstr(buf, "\nVmRSS:");
		if (p)
			total += strtol(p + 7, NULL, 10);
	}
	return total;
}

/* ---- /proc/net/netstat and /proc/sys -------------------------------------- */

int proc_tcpext_read(struct proc_tcpext *t)
{
	memset(t, 0, sizeof(*t));
	char *buf = xmalloc(65536);
	ssize_t len = read_small("/proc/net/netstat", buf, 65536);
	if (len <= 0) {
		free(buf);
		return len < 0 ? (int)len : -ENODATA;
	}
	/* The file is pairs of lines "TcpExt: names..." then "TcpExt: values...". */
	char *names = NULL, *vals = NULL;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strncmp(line, "TcpExt:", 7) == 0) {
			if (!names)
				names = line + 7;
			else if (!vals)
				vals = line + 7;
		}
		line = nl ? nl + 1 : NULL;
	}
	if (!names || !vals) {
		free(buf);
		return -ENODATA;
	}
	int cap = 0;
	for (char *p = names; *p; p++)
		if (*p == ' ')
			cap++;
	t->names = xcalloc((size_t)cap + 1, sizeof(*t->names));
	t->vals = xcalloc((size_t)cap + 1, sizeof(*t->vals));
	char *s1 = NULL, *s2 = NULL;
	char *a = strtok_r(names, " ", &s1), *b = strtok_r(vals, " ", &s2);
	while (a && b && t->n <= cap) {
		snprintf(t->names[t->n], sizeof(t->names[0]), "%s", a);
		t->vals[t->n] = strtoll(b, NULL, 10);
		t->n++;
		a = strtok_r(NULL, " ", &s1);
		b = strtok_r(NULL, " ", &s2);
	}
	free(buf);
	return 0;
}

void proc_tcpext_free(struct proc_tcpext *t)
{
	free(t->names);
	free(t->vals);
	memset(t, 0, sizeof(*t));
}

long long proc_tcpext_get(const struct proc_tcpext *t, const char *name)
{
	for (int i = 0; i < t->n; i++)
		if (strcmp(t->names[i], name) == 0)
			return t->vals[i];
	return -1;
}

long long proc_tcpext_now(const char *name)
{
	struct proc_tcpext t;
	if (proc_tcpext_read(&t) != 0)
		return -1;
	long long v = proc_tcpext_get(&t, name);
	proc_tcpext_free(&t);
	return v;
}

int proc_sys_long(const char *name, long *val)
{
	char path[256], buf[256];
	if (name[0] == '/')
		snprintf(path, sizeof(path), "%s", name);
	else {
		int n = snprintf(path, sizeof(path), "/proc/sys/%s", name);
		for (int i = 10; i < n; i++)
			if (path[i] == '.')
				path[i] = '/';
	}
	ssize_t r = read_small(path, buf, sizeof(buf));
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

/* ---- sock_diag ------------------------------------------------------------ */

/* Send one sock_diag dump request and hand every answer of type
 * SOCK_DIAG_BY_FAMILY to each(). Returns 0 or -errno. */
static int diag_dump(const void *req, size_t reqlen, void (*each)(const struct nlmsghdr *, void *), void *arg)
{
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	struct nlmsghdr nlh = { .nlmsg_len = (uint32_t)NLMSG_LENGTH(reqlen),
				.nlmsg_type = SOCK_DIAG_BY_FAMILY,
				.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
				.nlmsg_seq = 1 };
	struct iovec iov[2] = { { .iov_base = &nlh, .iov_len = NLMSG_HDRLEN },
				{ .iov_base = (void *)req, .iov_len = reqlen } };
	struct sockaddr_nl nladdr = { .nl_family = AF_NETLINK };
	struct msghdr mh = { .msg_name = &nladdr, .msg_namelen = sizeof(nladdr), .msg_iov = iov, .msg_iovlen = 2 };
	if (sendmsg(fd, &mh, 0) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	static char buf[32768] __attribute__((aligned(8)));
	int rc = 0;
	for (;;) {
		ssize_t len = recv(fd, buf, sizeof(buf), 0);
		if (len < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			break;
		}
		if (len == 0)
			break;
		struct nlmsghdr *h = (struct nlmsghdr *)buf;
		int done = 0;
		for (; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *err = NLMSG_DATA(h);
				rc = err->error ? err->error : -EIO;
				done = 1;
				break;
			}
			if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY)
				each(h, arg);
		}
		if (done)
			break;
	}
	close(fd);
	return rc;
}

/* The growing list the dump callbacks append to. */
struct listener_list {
	struct proc_listener *v;
	int n, cap;
};

static struct proc_listener *list_add(struct listener_list *l)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = xrealloc(l->v, (size_t)l->cap * sizeof(*l->v));
	}
	struct proc_listener *p = &l->v[l->n++];
	memset(p, 0, sizeof(*p));
	return p;
}

/* One listening TCP socket: for a listener the kernel puts the accept queue
 * in idiag_rqueue and its maximum in idiag_wqueue. */
static void inet_each(const struct nlmsghdr *h, void *arg)
{
	const struct inet_diag_msg *m = NLMSG_DATA(h);
	struct proc_listener *l = list_add(arg);
	l->family = m->idiag_family;
	l->port = ntohs(m->id.idiag_sport);
	l->queued = m->idiag_rqueue;
	l->max = m->idiag_wqueue;
	l->inode = m->idiag_inode;
	l->uid = m->idiag_uid;
	char a[INET6_ADDRSTRLEN] = "?";
	inet_ntop(m->idiag_family, m->id.idiag_src, a, sizeof(a));
	if (m->idiag_family == AF_INET6)
		snprintf(l->addr, sizeof(l->addr), "[%s]", a);
	else
		snprintf(l->addr, sizeof(l->addr), "%s", a);
	snprintf(l->name, sizeof(l->name), "%s:%d", l->addr, l->port);
}

int proc_listeners(struct proc_listener **out)
{
	struct listener_list l = { 0 };
	struct inet_diag_req_v2 req;
	memset(&req, 0, sizeof(req));
	req.sdiag_protocol = IPPROTO_TCP;
	req.idiag_states = 1u << TCP_LISTEN;
	req.sdiag_family = AF_INET;
	int r4 = diag_dump(&req, sizeof(req), inet_each, &l);
	req.sdiag_family = AF_INET6;
	int r6 = diag_dump(&req, sizeof(req), inet_each, &l);
	if (r4 < 0 && r6 < 0) {
		free(l.v);
		*out = NULL;
		return r4;
	}
	*out = l.v;
	return l.n;
}

/* One listening unix socket. The attributes after the message carry its
 * name (UNIX_DIAG_NAME: sun_path as bound, a leading NUL for an abstract
 * name), the file it is bound to (UNIX_DIAG_VFS) and, for a listener, the
 * accept queue now and its maximum (UNIX_DIAG_RQLEN). */
static void unix_each(const struct nlmsghdr *h, void *arg)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
	struct proc_listener *l = list_add(arg);
	l->family = AF_UNIX;
	l->inode = m->udiag_ino;
	int alen = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof(*m));
	for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
		size_t plen = RTA_PAYLOAD(a);
		if (a->rta_type == UNIX_DIAG_NAME && plen > 0) {
			const char *p = RTA_DATA(a);
			size_t n = plen < sizeof(l->path) - 1 ? plen : sizeof(l->path) - 1;
			memcpy(l->path, p, n);
			l->path[n] = '\0';
			if (p[0] == '\0') /* abstract: shown as ss shows it */
				l->path[0] = '@';
		} else if (a->rta_type == UNIX_DIAG_VFS && plen >= sizeof(struct unix_diag_vfs)) {
			const struct unix_diag_vfs *v = RTA_DATA(a);
			/* The kernel's own dev_t: 12 bits of major above 20 of minor. */
			l->vfs_dev = makedev(v->udiag_vfs_dev >> 20, v->udiag_vfs_dev & 0xfffff);
			l->vfs_ino = v->udiag_vfs_ino;
		} else if (a->rta_type == UNIX_DIAG_RQLEN && plen >= sizeof(struct unix_diag_rqlen)) {
			const struct unix_diag_rqlen *q = RTA_DATA(a);
			l->queued = q->udiag_rqueue;
			l->max = q->udiag_wqueue;
		}
	}
	snprintf(l->addr, sizeof(l->addr), "unix");
	snprintf(l->name, sizeof(l->name), "unix:%s", l->path[0] ? l->path : "(unnamed)");
}

int proc_unix_listeners(struct proc_listener **out)
{
	struct listener_list l = { 0 };
	struct unix_diag_req req;
	memset(&req, 0, sizeof(req));
	req.sdiag_family = AF_UNIX;
	req.udiag_states = 1u << TCP_LISTEN;
	req.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_RQLEN;
	int rc = diag_dump(&req, sizeof(req), unix_each, &l);
	if (rc < 0) {
		free(l.v);
		*out = NULL;
		return rc;
	}
	*out = l.v;
	return l.n;
}

int proc_unix_listener_is(const struct proc_listener *l, const char *path)
{
	if (l->family != AF_UNIX || !path || !*path)
		return 0;
	if (strcmp(l->path, path) == 0)
		return 1;
	/* The name is the path as bound (maybe relative, maybe through a
	 * symbolic link); the file itself tells for sure. */
	struct stat st;
	return l->vfs_ino && stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == l->vfs_ino &&
	       st.st_dev == l->vfs_dev;
}

/* The listener among ls[0..n) whose socket inode this /proc/N/fd link names
 * and whose owner is not known yet; NULL when none. */
static struct proc_listener *unowned(struct proc_listener *ls, int n, const char *target)
{
	if (strncmp(target, "socket:[", 8) != 0)
		return NULL;
	unsigned long ino = strtoul(target + 8, NULL, 10);
	for (int i = 0; i < n; i++)
		if (ls[i].inode == ino && ls[i].owner == 0)
			return &ls[i];
	return NULL;
}

void proc_listener_owners(struct proc_listener *ls, int n)
{
	int left = 0;
	for (int i = 0; i < n; i++) {
		ls[i].owner = 0;
		ls[i].comm[0] = '\0';
		left += ls[i].inode != 0;
	}
	/* One walk over every process's descriptors, however many listeners. */
	DIR *d = left ? opendir("/proc") : NULL;
	if (!d)
		return;
	struct dirent *de;
	while (left > 0 && (de = readdir(d))) {
		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/proc/%s/fd", de->d_name);
		DIR *fds = opendir(path);
		if (!fds)
			continue;
		struct dirent *fe;
		while (left > 0 && (fe = readdir(fds))) {
			if (fe->d_name[0] == '.')
				continue;
			char link[600], target[128];
			snprintf(link, sizeof(link), "%s/%s", path, fe->d_name);
			ssize_t r = readlink(link, target, sizeof(target) - 1);
			if (r <= 0)
				continue;
			target[r] = '\0';
			struct proc_listener *l = unowned(ls, n, target);
			if (!l)
				continue;
			l->owner = (pid_t)atoi(de->d_name);
			char comm_path[64];
			snprintf(comm_path, sizeof(comm_path), "/proc/%d/comm", (int)l->owner);
			if (read_small(comm_path, l->comm, sizeof(l->comm)) > 0)
				l->comm[strcspn(l->comm, "\n")] = '\0';
			left--;
		}
		closedir(fds);
	}
	closedir(d);
}

/* ---- tool plumbing -------------------------------------------------------- */

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

int tool_accept_queue_max(const struct tool_addr *a)
{
	struct proc_listener *ls = NULL;
	int n = a->family == AF_UNIX ? proc_unix_listeners(&ls) : proc_listeners(&ls);
	int max = -1;
	const char *path = ((const struct sockaddr_un *)&a->sa)->sun_path;
	for (int i = 0; i < n && max < 0; i++)
		if (a->family == AF_UNIX ? proc_unix_listener_is(&ls[i], path) : ls[i].port == a->port)
			max = (int)ls[i].max;
	free(ls);
	return max;
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

/* The herald of the tree this tool was built in, into buf. The Makefile
 * names it (HERALD_TREE_BIN, an absolute path); a build without it guesses
 * the tree the tool sits in (load/NAME -> build/herald). Returns words saying
 * which. */
static const char *tree_herald(char *buf, size_t len)
{
#ifdef HERALD_TREE_BIN
	snprintf(buf, len, "%s", HERALD_TREE_BIN);
	return "the build this tool came from";
#else
	const char *guess = "beside the folder this tool is in";
	char self[4096];
	snprintf(buf, len, "build/herald");
	ssize_t r = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (r <= 0)
		return guess;
	self[r] = '\0';
	/* Drop the tool's name, then load/. */
	for (int up = 0; up < 2; up++) {
		char *slash = strrchr(self, '/');
		if (!slash)
			return guess;
		*slash = '\0';
	}
	snprintf(buf, len, "%s/build/herald", self);
	return guess;
#endif
}

/* The first executable NAME in $PATH's folders, into buf; 0 or -1. */
static int path_search(const char *name, char *buf, size_t len)
{
	const char *path = getenv("PATH");
	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	for (const char *p = path; *p;) {
		size_t n = strcspn(p, ":");
		int w = snprintf(buf, len, "%.*s/%s", (int)n, n ? p : ".", name);
		if (w > 0 && (size_t)w < len && access(buf, X_OK) == 0) {
			struct stat st;
			if (stat(buf, &st) == 0 && S_ISREG(st.st_mode))
				return 0;
		}
		p += n;
		if (*p == ':')
			p++;
	}
	buf[0] = '\0';
	return -1;
}

void tool_herald_help(void)
{
	char tree[4200];
	const char *where = tree_herald(tree, sizeof(tree));
	printf("The herald started here: $HERALD_BIN when set; else, when it exists,\n"
	       "  %s\n"
	       "  (%s); else the first herald on PATH.\n",
	       tree, where);
}

int tool_herald_bin(char *buf, size_t len)
{
	const char *env = getenv("HERALD_BIN");
	if (env && *env) {
		snprintf(buf, len, "%s", env);
		if (access(buf, X_OK) == 0)
			return 0;
		fprintf(stderr, "%s: HERALD_BIN=%s cannot be run: %s\n", usage_name, env, strerror(errno));
		return -1;
	}
	char tree[4200];
	const char *where = tree_herald(tree, sizeof(tree));
	if (access(tree, X_OK) == 0) {
		snprintf(buf, len, "%s", tree);
		return 0;
	}
	if (path_search("herald", buf, len) == 0)
		return 0;
	fprintf(stderr,
		"%s: no herald to start: HERALD_BIN is not set, %s (%s) does not exist, and there is no "
		"herald on PATH.\n"
		"Set HERALD_BIN=/path/to/herald, put herald on PATH (make install), or measure a running "
		"server with --server.\n",
		usage_name, tree, where);
	return -1;
}

int tool_default_backlog(long given)
{
	if (given > 0)
		return (int)given;
	const char *env = getenv("BACKLOG");
	long v;
	if (env && tool_parse_long(env, 1, 1 << 20, &v) == 0)
		return (int)v;
	return 1024;
}

/* Print the last lines of a log file to stderr. */
static void log_tail(const char *path)
{
	char *buf = xmalloc(8192);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		off_t end = lseek(fd, 0, SEEK_END);
		off_t start = end > 4000 ? end - 4000 : 0;
		ssize_t r = pread(fd, buf, 4000, start);
		if (r > 0) {
			buf[r] = '\0';
			fprintf(stderr, "--- last lines of %s ---\n%s%s---\n", path, buf,
				buf[r - 1] == '\n' ? "" : "\n");
		}
		close(fd);
	}
	free(buf);
}

int tool_herald_start(struct tool_herald *h, int backlog, int unix_listener, const char *const *extra)
{
	memset(h, 0, sizeof(*h));
	if (tool_herald_bin(h->bin, sizeof(h->bin)) != 0)
		return -1;
	const char *tmp = getenv("TMPDIR");
	snprintf(h->dir, sizeof(h->dir), "%s/herald-load-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(h->dir)) {
		fprintf(stderr, "mkdtemp %s: %s\n", h->dir, strerror(errno));
		return -1;
	}
	snprintf(h->db, sizeof(h->db), "%s/herald.db", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/herald.log", h->dir);
	if (unix_listener)
		snprintf(h->unix_path, sizeof(h->unix_path), "%s/herald.sock", h->dir);

	char bl[32], ul[320];
	snprintf(bl, sizeof(bl), "%d", backlog);
	snprintf(ul, sizeof(ul), "unix:%s", h->unix_path);
	const char *argv[64];
	int ac = 0;
	argv[ac++] = h->bin;
	argv[ac++] = "--db";
	argv[ac++] = h->db;
	argv[ac++] = "--listen";
	argv[ac++] = "127.0.0.1:0";
	if (unix_listener) {
		argv[ac++] = "--listen";
		argv[ac++] = ul;
	}
	argv[ac++] = "--per-address-limit";
	argv[ac++] = "0";
	argv[ac++] = "--backlog";
	argv[ac++] = bl;
	for (int i = 0; extra && extra[i] && ac < 62; i++)
		argv[ac++] = extra[i];
	argv[ac] = NULL;

	int logfd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (logfd < 0) {
		fprintf(stderr, "open %s: %s\n", h->log, strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		close(logfd);
		return -1;
	}
	if (pid == 0) {
		/* herald goes down with us if this tool dies without stopping it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		signal(SIGPIPE, SIG_DFL);
		setpgid(0, 0); /* a terminal's ^C reaches the tool, which stops herald */
		unsetenv("NOTIFY_SOCKET");
		unsetenv("LISTEN_FDS");
		unsetenv("LISTEN_PID");
		execv(h->bin, (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", h->bin, strerror(errno));
		_exit(127);
	}
	close(logfd);
	h->pid = pid;
	h->backlog = backlog;

	/* Wait for "herald ready" (ASan builds start slower), reading the port. */
	double deadline = tool_now_s() + 30.0;
	char *buf = xmalloc(65536);
	for (;;) {
		ssize_t r = read_small(h->log, buf, 65536);
		if (r > 0 && strstr(buf, "herald ready")) {
			char *p = strstr(buf, "listening on tcp 127.0.0.1:");
			if (p) {
				h->port = atoi(p + strlen("listening on tcp 127.0.0.1:"));
				char *b = strstr(p, "(backlog ");
				char *nl = strchr(p, '\n');
				if (b && (!nl || b < nl))
					h->backlog = atoi(b + 9);
			}
			break;
		}
		int st;
		if (waitpid(pid, &st, WNOHANG) == pid) {
			h->pid = 0;
			fprintf(stderr, "herald (%s) exited with %s %d before it was ready\n", h->bin,
				WIFEXITED(st) ? "status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			log_tail(h->log);
			free(buf);
			return -1;
		}
		if (tool_now_s() > deadline) {
			fprintf(stderr, "herald did not log \"herald ready\" within 30 s\n");
			log_tail(h->log);
			free(buf);
			tool_herald_stop(h, 1);
			return -1;
		}
		tool_sleep(0.01, NULL);
	}
	free(buf);
	if (h->port <= 0) {
		fprintf(stderr, "herald is ready but logged no \"listening on tcp 127.0.0.1:PORT\" line\n");
		log_tail(h->log);
		tool_herald_stop(h, 1);
		return -1;
	}
	return 0;
}

int tool_herald_stop(struct tool_herald *h, int keep)
{
	int code = -1;
	if (h->pid > 0) {
		kill(h->pid, SIGTERM);
		double deadline = tool_now_s() + 10.0;
		int st = 0;
		pid_t r;
		while ((r = waitpid(h->pid, &st, WNOHANG)) == 0 && tool_now_s() < deadline)
			tool_sleep(0.01, NULL);
		if (r == 0) {
			fprintf(stderr, "herald (pid %d) did not exit within 10 s of SIGTERM; killing it\n",
				(int)h->pid);
			kill(h->pid, SIGKILL);
			waitpid(h->pid, &st, 0);
			keep = 1;
		} else if (r == h->pid) {
			if (WIFEXITED(st))
				code = WEXITSTATUS(st);
			if (!WIFEXITED(st) || code != 0) {
				fprintf(stderr, "herald exited with %s %d after SIGTERM\n",
					WIFEXITED(st) ? "status" : "signal",
					WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
				log_tail(h->log);
				keep = 1;
			}
		}
		h->pid = 0;
	}
	if (!h->dir[0])
		return code;
	if (keep) {
		fprintf(stderr, "herald's files are kept in %s\n", h->dir);
	} else {
		const char *suffix[] = { "herald.db",         "herald.db-wal", "herald.db-shm",
					 "herald.db-journal", "herald.log",    "herald.sock" };
		for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
			char p[400];
			snprintf(p, sizeof(p), "%s/%s", h->dir, suffix[i]);
			unlink(p);
		}
		if (rmdir(h->dir) != 0)
			fprintf(stderr, "left %s behind: %s\n", h->dir, strerror(errno));
	}
	h->dir[0] = '\0';
	return code;
}

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
