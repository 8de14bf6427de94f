/* SPDX-License-Identifier: BSD-2-Clause */
/* sockdiag.h: listening sockets as the kernel's sock_diag netlink interface
 * (what ss(8) reads) reports them, TCP (IPv4 and IPv6) and unix alike: each
 * with its accept queue now and its maximum, which is the listen backlog
 * that took effect after the net.core.somaxconn cap.
 *
 * One request/response loop serves every call: a dump of one family's
 * listeners, or the lookup of a single unix socket by inode. Each call opens
 * and closes its own netlink socket and waits at most a second for an
 * answer, so it may be called from the event loop at start-up. Nothing here
 * logs. */
#ifndef HERALD_SOCKDIAG_H
#define HERALD_SOCKDIAG_H

#include <stdbool.h>

/* One socket as sock_diag reports it. For a listener the kernel puts the
 * accept queue length in `queued` and its maximum in `max`. */
struct sockdiag_listener {
	int family;     /* AF_INET, AF_INET6 or AF_UNIX */
	char addr[64];  /* numeric, IPv6 in brackets; "unix" for unix sockets */
	int port;       /* 0 for unix sockets */
	char path[110]; /* unix: the name as bound, "@name" when abstract, "" when unnamed */
	char name[180]; /* for people: "127.0.0.1:8199", "[::1]:8199", "unix:/run/herald.sock" */
	unsigned queued;
	unsigned max;
	unsigned long inode;
	unsigned uid;          /* TCP only */
	unsigned long vfs_ino; /* unix: the socket file's inode and device, 0 when none */
	unsigned long vfs_dev;
};

/* List every listening TCP socket (IPv4 and IPv6) of this network
 * namespace. *out is allocated (free it; NULL on failure); returns the count,
 * or -errno when neither family could be read. */
int sockdiag_tcp_listeners(struct sockdiag_listener **out);

/* List every listening unix stream socket of this network namespace, the
 * same way. */
int sockdiag_unix_listeners(struct sockdiag_listener **out);

/* Describe the unix socket whose inode is ino (fstat's st_ino of its
 * descriptor) into *out. Returns 0, -ENOENT when there is no such socket,
 * or another -errno (e.g. -EAFNOSUPPORT where netlink is not allowed). */
int sockdiag_unix_socket(unsigned long ino, struct sockdiag_listener *out);

/* Whether l is the unix listener bound at path: the same name, or the same
 * socket file (so a relative or linked path matches too). */
bool sockdiag_unix_is(const struct sockdiag_listener *l, const char *path);

#endif
