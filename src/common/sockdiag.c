/* SPDX-License-Identifier: BSD-2-Clause */
/* sockdiag.c: listening sockets through sock_diag netlink (see sockdiag.h).
 * diag_query() is the one request/response loop: a dump runs until
 * NLMSG_DONE, a lookup of one socket ends at its single answer, and an
 * NLMSG_ERROR ends either with the kernel's error. */
#include "common/sockdiag.h"

#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

typedef void each_fn(const struct nlmsghdr *h, void *arg);

/* Read the answers to a request on fd, handing each SOCK_DIAG_BY_FAMILY
 * message to each(); a dump ends at NLMSG_DONE, a lookup (dump false) after
 * its first answer. Returns 0 or -errno. */
static int diag_receive(int fd, bool dump, each_fn *each, void *arg)
{
	long buf[4096]; /* 32 KiB, aligned for nlmsghdr */
	for (;;) {
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return dump ? 0 : -ENOENT;
		int len = (int)r;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_type == NLMSG_DONE)
				return 0;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error ? e->error : -EIO;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
				continue;
			each(h, arg);
			if (!dump)
				return 0;
		}
	}
}

/* Send one sock_diag request (req is the family's request struct) and
 * collect its answers as diag_receive does. Returns 0 or -errno. */
static int diag_query(const void *req, size_t reqlen, bool dump, each_fn *each, void *arg)
{
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	/* The kernel answers at once; the limit only guards against a stall. */
	struct timeval tv = { .tv_sec = 1 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct nlmsghdr nlh = { .nlmsg_len = (uint32_t)NLMSG_LENGTH(reqlen),
				.nlmsg_type = SOCK_DIAG_BY_FAMILY,
				.nlmsg_flags = (uint16_t)(NLM_F_REQUEST | (dump ? NLM_F_DUMP : 0)),
				.nlmsg_seq = 1 };
	struct iovec iov[2] = { { .iov_base = &nlh, .iov_len = NLMSG_HDRLEN },
				{ .iov_base = (void *)req, .iov_len = reqlen } };
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	struct msghdr mh = { .msg_name = &kernel, .msg_namelen = sizeof(kernel), .msg_iov = iov, .msg_iovlen = 2 };
	int rc = sendmsg(fd, &mh, 0) < 0 ? -errno : diag_receive(fd, dump, each, arg);
	close(fd);
	return rc;
}

/* The growing list a dump's callback appends to. */
struct listener_list {
	struct sockdiag_listener *v;
	int n, cap;
};

static struct sockdiag_listener *list_add(struct listener_list *l)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 16;
		l->v = xrealloc(l->v, (size_t)l->cap * sizeof(*l->v));
	}
	struct sockdiag_listener *p = &l->v[l->n++];
	memset(p, 0, sizeof(*p));
	return p;
}

/* ---- TCP ------------------------------------------------------------------- */

/* One listening TCP socket: for a listener the kernel puts the accept queue
 * in idiag_rqueue and its maximum in idiag_wqueue. */
static void inet_each(const struct nlmsghdr *h, void *arg)
{
	const struct inet_diag_msg *m = NLMSG_DATA(h);
	struct sockdiag_listener *l = list_add(arg);
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

int sockdiag_tcp_listeners(struct sockdiag_listener **out)
{
	struct listener_list l = { 0 };
	struct inet_diag_req_v2 req;
	memset(&req, 0, sizeof(req));
	req.sdiag_protocol = IPPROTO_TCP;
	req.idiag_states = 1u << TCP_LISTEN;
	req.sdiag_family = AF_INET;
	int r4 = diag_query(&req, sizeof(req), true, inet_each, &l);
	req.sdiag_family = AF_INET6;
	int r6 = diag_query(&req, sizeof(req), true, inet_each, &l);
	if (r4 < 0 && r6 < 0) {
		free(l.v);
		*out = NULL;
		return r4;
	}
	*out = l.v;
	return l.n;
}

/* ---- unix ------------------------------------------------------------------ */

/* Fill l from one unix socket's attributes: its name (UNIX_DIAG_NAME: sun_path
 * as bound, a leading NUL for an abstract name), the file it is bound to
 * (UNIX_DIAG_VFS) and, for a listener, the accept queue now and its maximum
 * (UNIX_DIAG_RQLEN). */
static void unix_fill(const struct nlmsghdr *h, struct sockdiag_listener *l)
{
	const struct unix_diag_msg *m = NLMSG_DATA(h);
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

static void unix_each(const struct nlmsghdr *h, void *arg)
{
	unix_fill(h, list_add(arg));
}

static void unix_one(const struct nlmsghdr *h, void *arg)
{
	unix_fill(h, arg);
}

int sockdiag_unix_listeners(struct sockdiag_listener **out)
{
	struct listener_list l = { 0 };
	struct unix_diag_req req;
	memset(&req, 0, sizeof(req));
	req.sdiag_family = AF_UNIX;
	req.udiag_states = 1u << TCP_LISTEN;
	req.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_RQLEN;
	int rc = diag_query(&req, sizeof(req), true, unix_each, &l);
	if (rc < 0) {
		free(l.v);
		*out = NULL;
		return rc;
	}
	*out = l.v;
	return l.n;
}

int sockdiag_unix_socket(unsigned long ino, struct sockdiag_listener *out)
{
	memset(out, 0, sizeof(*out));
	struct unix_diag_req req;
	memset(&req, 0, sizeof(req));
	req.sdiag_family = AF_UNIX;
	req.udiag_states = ~0u;
	req.udiag_ino = (uint32_t)ino;
	req.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_VFS | UDIAG_SHOW_RQLEN;
	req.udiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.udiag_cookie[1] = INET_DIAG_NOCOOKIE;
	int rc = diag_query(&req, sizeof(req), false, unix_one, out);
	if (rc < 0)
		return rc;
	return out->family == AF_UNIX && out->inode == ino ? 0 : -ENOENT;
}

bool sockdiag_unix_is(const struct sockdiag_listener *l, const char *path)
{
	if (l->family != AF_UNIX || !path || !*path)
		return false;
	if (strcmp(l->path, path) == 0)
		return true;
	/* The name is the path as bound (maybe relative, maybe through a
	 * symbolic link); the file itself tells for sure. */
	struct stat st;
	return l->vfs_ino && stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == l->vfs_ino &&
	       st.st_dev == l->vfs_dev;
}
