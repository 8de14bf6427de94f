/* SPDX-License-Identifier: BSD-2-Clause */
/* test_sockdiag.c: real listeners found through sock_diag with the backlog
 * they were given: a unix listener (by path, through a symbolic link, and by
 * inode, with two connections waiting in its queue), an abstract one, and
 * loopback TCP ones; a closed socket's inode is not found. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "check.h"
#include "common/sockdiag.h"

/* A unix stream listener at path (a leading '@' for an abstract name) with
 * the given backlog; its fd, or -1. */
static int unix_listen(const char *path, int backlog)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	if (n >= sizeof(un.sun_path))
		return -1;
	memcpy(un.sun_path, path, n);
	if (path[0] == '@')
		un.sun_path[0] = '\0';
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '@' ? 0 : 1));
	if (fd < 0 || bind(fd, (struct sockaddr *)&un, len) != 0 || listen(fd, backlog) != 0) {
		perror("unix listener");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&un, sizeof(un)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The listener in the unix dump that sockdiag_unix_is() says is at path;
 * copied to *out. 1 when found once, 0 when not, -1 when found twice. */
static int find_unix(const char *path, struct sockdiag_listener *out)
{
	struct sockdiag_listener *ls = NULL;
	int n = sockdiag_unix_listeners(&ls);
	CHECK(n >= 0);
	int found = 0;
	for (int i = 0; i < n; i++)
		if (sockdiag_unix_is(&ls[i], path)) {
			*out = ls[i];
			found++;
		}
	free(ls);
	return found > 1 ? -1 : found;
}

static void unix_named(void)
{
	char dir[] = "/tmp/herald-sockdiag-XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char path[256], link[256];
	snprintf(path, sizeof(path), "%s/l.sock", dir);
	snprintf(link, sizeof(link), "%s/other-name", dir);
	int lfd = unix_listen(path, 7);
	CHECK(lfd >= 0);
	CHECK(symlink(path, link) == 0);

	struct sockdiag_listener l;
	CHECK_EQ_INT(find_unix(path, &l), 1);
	CHECK_EQ_INT(l.family, AF_UNIX);
	CHECK_EQ_INT(l.max, 7);
	CHECK_EQ_INT(l.queued, 0);
	CHECK(strcmp(l.path, path) == 0);
	char name[300];
	snprintf(name, sizeof(name), "unix:%s", path);
	CHECK(strcmp(l.name, name) == 0);
	/* Another path to the same file names the same listener. */
	CHECK_EQ_INT(find_unix(link, &l), 1);
	CHECK(strcmp(l.path, path) == 0);

	/* Two connections nobody accepts wait in the queue. */
	int c1 = unix_connect(path), c2 = unix_connect(path);
	CHECK(c1 >= 0 && c2 >= 0);
	struct stat st;
	CHECK(fstat(lfd, &st) == 0);
	CHECK_EQ_INT(sockdiag_unix_socket(st.st_ino, &l), 0);
	CHECK_EQ_INT(l.inode, st.st_ino);
	CHECK_EQ_INT(l.max, 7);
	CHECK_EQ_INT(l.queued, 2);
	CHECK(strcmp(l.path, path) == 0);
	CHECK(l.vfs_ino != 0);

	/* Closed: neither the dump nor the lookup by inode finds it. */
	close(c1);
	close(c2);
	close(lfd);
	CHECK_EQ_INT(find_unix(path, &l), 0);
	CHECK_EQ_INT(sockdiag_unix_socket(st.st_ino, &l), -ENOENT);
	unlink(link);
	unlink(path);
	rmdir(dir);
}

static void unix_abstract(void)
{
	char name[64];
	snprintf(name, sizeof(name), "@herald-sockdiag-%d", (int)getpid());
	int lfd = unix_listen(name, 3);
	CHECK(lfd >= 0);
	struct sockdiag_listener l;
	CHECK_EQ_INT(find_unix(name, &l), 1);
	CHECK_EQ_INT(l.max, 3);
	CHECK_EQ_INT(l.vfs_ino, 0);
	struct stat st;
	CHECK(fstat(lfd, &st) == 0);
	CHECK_EQ_INT(sockdiag_unix_socket(st.st_ino, &l), 0);
	CHECK(strcmp(l.path, name) == 0);
	close(lfd);
}

/* A TCP listener on the loopback address of family af with this backlog;
 * its port in *port, or -1 when the family is not available. */
static int tcp_listen(int af, int backlog, int *port)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	socklen_t len;
	if (af == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		in->sin_family = AF_INET;
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_loopback;
		len = sizeof(*in6);
	}
	int fd = socket(af, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, backlog) != 0 ||
	    getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(af == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static void tcp(void)
{
	int p4 = 0, p6 = 0;
	int f4 = tcp_listen(AF_INET, 9, &p4);
	int f6 = tcp_listen(AF_INET6, 11, &p6);
	CHECK(f4 >= 0);
	struct sockdiag_listener *ls = NULL;
	int n = sockdiag_tcp_listeners(&ls);
	CHECK(n > 0);
	int seen4 = 0, seen6 = 0;
	char want4[64], want6[64];
	snprintf(want4, sizeof(want4), "127.0.0.1:%d", p4);
	snprintf(want6, sizeof(want6), "[::1]:%d", p6);
	for (int i = 0; i < n; i++) {
		if (ls[i].family == AF_INET && ls[i].port == p4) {
			seen4++;
			CHECK_EQ_INT(ls[i].max, 9);
			CHECK_EQ_INT(ls[i].queued, 0);
			CHECK(strcmp(ls[i].name, want4) == 0);
			CHECK_EQ_INT(ls[i].uid, getuid());
		}
		if (f6 >= 0 && ls[i].family == AF_INET6 && ls[i].port == p6) {
			seen6++;
			CHECK_EQ_INT(ls[i].max, 11);
			CHECK(strcmp(ls[i].name, want6) == 0);
		}
	}
	CHECK_EQ_INT(seen4, 1);
	CHECK_EQ_INT(seen6, f6 >= 0 ? 1 : 0);
	if (f6 < 0)
		fprintf(stderr, "  (no IPv6 loopback here: only IPv4 checked)\n");
	free(ls);
	close(f4);
	if (f6 >= 0)
		close(f6);
}

int main(void)
{
	unix_named();
	unix_abstract();
	tcp();
	return check_done("test_sockdiag");
}
