/* SPDX-License-Identifier: BSD-2-Clause */
/* listener.c: listening sockets and the accept loop. */
#include "net/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "net/conn.h"
#include "common/log.h"
#include "common/procstat.h"
#include "common/sockdiag.h"
#include "net/transport_plain.h"
#include "net/transport_tls.h"
#include "common/util.h"

#define ACCEPT_RETRY_MS 100
/* How long the kernel holds a connection whose client has sent nothing
 * (defer_accept); Linux rounds it to SYN-ACK retransmissions, 1 s is one. */
#define DEFER_ACCEPT_S 1

static int read_somaxconn(void)
{
	long v;
	return procstat_sysctl("net.core.somaxconn", &v) == 0 ? (int)v : -1;
}

/* The accept-queue limit the kernel applies to a listening TCP socket:
 * TCP_INFO reports it in tcpi_sacked for sockets in LISTEN. */
static int kernel_backlog(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 || ti.tcpi_state != TCP_LISTEN)
		return -1;
	return (int)ti.tcpi_sacked;
}

/* The same for a unix listening socket, which has no TCP_INFO: ask
 * sock_diag (what ss(8) reads) for the socket with this inode; for a
 * listener, UNIX_DIAG_RQLEN carries the limit in udiag_wqueue. -1 when
 * netlink is unavailable (e.g. RestrictAddressFamilies without AF_NETLINK). */
static int unix_backlog(int fd)
{
	struct stat st;
	struct sockdiag_listener l;
	if (fstat(fd, &st) < 0 || sockdiag_unix_socket(st.st_ino, &l) != 0)
		return -1;
	return (int)l.max;
}

/* Split "host:port", "[v6]:port" into a sockaddr. The port is 0 to 65535
 * in decimal digits only; the host an IP address, or empty or "*" for every
 * address (IPv6, which serves IPv4 too unless written [::]). */
static int parse_tcp(const char *addr, struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN + 8];
	const char *colon;
	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');
		if (!close || close[1] != ':') {
			snprintf(err, errlen, "expected [IPv6]:port");
			return -1;
		}
		if ((size_t)(close - addr - 1) >= sizeof(host)) {
			snprintf(err, errlen, "not an IPv6 address between [ and ]");
			return -1;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(close - addr - 1), addr + 1);
		colon = close + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon) {
			snprintf(err, errlen, "expected host:port, [IPv6]:port or unix:/path");
			return -1;
		}
		if ((size_t)(colon - addr) >= sizeof(host)) {
			snprintf(err, errlen, "the host is not an IP address (names are not resolved)");
			return -1;
		}
		snprintf(host, sizeof(host), "%.*s", (int)(colon - addr), addr);
	}
	const char *ps = colon + 1;
	size_t digits = strspn(ps, "0123456789");
	long port = digits && digits <= 5 && !ps[digits] ? strtol(ps, NULL, 10) : -1;
	if (port < 0 || port > 65535) {
		snprintf(err, errlen, "the port must be a number from 0 to 65535");
		return -1;
	}
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in = (void *)ss;
	struct sockaddr_in6 *in6 = (void *)ss;
	if (strcmp(host, "*") == 0 || host[0] == '\0') {
		in6->sin6_family = AF_INET6;
		in6->sin6_addr = in6addr_any;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
	} else if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		*len = sizeof(*in);
	} else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		*len = sizeof(*in6);
	} else {
		snprintf(err, errlen, "\"%s\" is not an IP address (names are not resolved)", host);
		return -1;
	}
	return 0;
}

int listen_addr_parse(const char *text, struct listen_addr *la, char *err, size_t errlen)
{
	memset(la, 0, sizeof(*la));
	if (strncmp(text, "tls:", 4) == 0) {
		la->tls = true;
		text += 4;
	}
	if (strncmp(text, "unix:", 5) == 0) {
		const char *path = text + 5;
		if (la->tls) {
			snprintf(err, errlen, "TLS is served on TCP addresses only");
			return -1;
		}
		if (!path[0] || strlen(path) >= sizeof(la->path)) {
			snprintf(err, errlen, "the unix socket path is empty or longer than %zu bytes",
				 sizeof(la->path) - 1);
			return -1;
		}
		la->is_unix = true;
		snprintf(la->path, sizeof(la->path), "%s", path);
		return 0;
	}
	return parse_tcp(text, &la->ss, &la->len, err, errlen);
}

int listener_check_config(const struct config *cfg)
{
	char err[256];
	struct listen_addr la;
	int errors = 0;
	for (size_t i = 0; i < cfg->nlisten; i++) {
		if (listen_addr_parse(cfg->listen[i], &la, err, sizeof(err)) < 0) {
			config_bad_value(cfg, "listen", cfg->listen[i], err);
			errors++;
		}
	}
	return errors;
}

/* Name a TCP listener "KIND host:port" (KIND is tcp, or tls for TLS). */
static void name_tcp(int fd, const char *kind, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (void *)&ss;
			inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
			port = ntohs(in->sin_port);
			snprintf(out, outlen, "%s %s:%d", kind, host, port);
			return;
		}
		struct sockaddr_in6 *in6 = (void *)&ss;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		port = ntohs(in6->sin6_port);
	}
	snprintf(out, outlen, "%s [%s]:%d", kind, host, port);
}

/* A unix socket path left by a previous run: remove it only when it is a
 * socket nobody accepts on. */
static void remove_stale_socket(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
		return;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0 && errno == ECONNREFUSED) {
		unlink(path);
		log_info("removed stale unix socket %s", path);
	}
	if (fd >= 0)
		close(fd);
}

/* Bind one more SO_REUSEPORT socket to the address ls->fd is bound to (its
 * port as bound, should the address ask for port 0). Returns the listening
 * fd, or -1 with errno set. */
static int open_copy(const struct listener *ls, int backlog)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (getsockname(ls->fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int one = 1, v6only = 0;
	socklen_t vlen = sizeof(v6only);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6 && getsockopt(ls->fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &vlen) == 0)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, backlog) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Open addr into ls; with reuseport, the socket takes SO_REUSEPORT (a
 * group's first copy of a TCP address). */
static int open_one(struct listeners *set, const struct config *cfg, const char *addr, struct listener *ls,
		    bool reuseport)
{
	char err[256] = "";
	struct listen_addr la;
	int fd = -1;
	memset(ls, 0, sizeof(*ls));
	ls->set = set;
	ls->backlog = cfg->backlog;
	if (listen_addr_parse(addr, &la, err, sizeof(err)) < 0) {
		log_err("listen %s: %s", addr, err);
		return -1;
	}
	ls->tls_wanted = la.tls;
	if (la.tls && !set->tls && !reuseport) {
		log_err("listen %s: a tls: listener needs tls_cert and tls_key", addr);
		return -1;
	}
	ls->tls = la.tls ? set->tls : NULL;
	if (la.is_unix) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", la.path);
		remove_stale_socket(la.path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
			goto fail;
		/* unix_mode (0660 by default: owner and group, e.g. a proxy
		 * added to the service's group); the folder's permissions decide
		 * who reaches the socket at all. */
		if (chmod(la.path, (mode_t)cfg->unix_mode) < 0)
			goto fail;
		ls->is_unix = true;
		ls->unix_path = xstrdup(la.path);
		snprintf(ls->name, sizeof(ls->name), "unix %s", la.path);
	} else {
		fd = socket(la.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			goto fail;
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0)
			goto fail;
		if (la.ss.ss_family == AF_INET6) {
			/* "[::]:port" serves IPv6 only; list 0.0.0.0:port too for IPv4. */
			struct sockaddr_in6 *in6 = (void *)&la.ss;
			const char *bare = la.tls ? addr + 4 : addr;
			int v6only = !IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr) || strncmp(bare, "[::]", 4) == 0;
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
		}
		if (bind(fd, (struct sockaddr *)&la.ss, la.len) < 0)
			goto fail;
	}
	if (listen(fd, cfg->backlog) < 0)
		goto fail;
	if (!ls->is_unix)
		name_tcp(fd, ls->tls ? "tls" : "tcp", ls->name, sizeof(ls->name));
	ls->fd = fd;
	return 0;
fail:
	log_err("listen %s: %s", addr, strerror(errno));
	if (fd >= 0)
		close(fd);
	free(ls->unix_path);
	ls->unix_path = NULL;
	return -1;
}

/* Take the sockets systemd passed. One whose name (FileDescriptorName= in
 * the socket unit) is "tls" serves TLS with tls_cert/tls_key. */
static int adopt_systemd(struct listeners *set, int n, char **names, bool group)
{
	set->ls = xcalloc((size_t)n, sizeof(*set->ls));
	for (int i = 0; i < n; i++) {
		int fd = SD_LISTEN_FDS_START + i;
		struct listener *ls = &set->ls[set->n];
		memset(ls, 0, sizeof(*ls));
		ls->set = set;
		ls->from_systemd = true;
		if (sd_is_socket(fd, AF_UNIX, SOCK_STREAM, 1) > 0) {
			struct sockaddr_un sun;
			socklen_t len = sizeof(sun);
			ls->is_unix = true;
			if (getsockname(fd, (struct sockaddr *)&sun, &len) == 0 && len > sizeof(sa_family_t))
				snprintf(ls->name, sizeof(ls->name), "unix %s", sun.sun_path);
			else
				snprintf(ls->name, sizeof(ls->name), "unix (unnamed)");
		} else if (sd_is_socket(fd, AF_UNSPEC, SOCK_STREAM, 1) > 0) {
			bool tls = names && names[i] && strcmp(names[i], "tls") == 0;
			if (tls && !set->tls && !group) {
				log_err("systemd passed a socket named tls (fd %d), but tls_cert and tls_key are not "
					"set",
					fd);
				return -1;
			}
			ls->tls = tls ? set->tls : NULL;
			ls->tls_wanted = tls;
			name_tcp(fd, tls ? "tls" : "tcp", ls->name, sizeof(ls->name));
		} else {
			log_err("systemd passed fd %d, which is not a listening stream socket", fd);
			return -1;
		}
		/* systemd hands sockets over blocking; accept4 until EAGAIN
		 * needs them non-blocking, and children must not inherit them. */
		int flags = fcntl(fd, F_GETFL);
		if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
			log_err("systemd socket fd %d: %s", fd, strerror(errno));
			return -1;
		}
		ls->fd = fd;
		ls->backlog = ls->is_unix ? unix_backlog(fd) : kernel_backlog(fd);
		set->n++;
	}
	return 0;
}

static void log_listener(const struct listener *ls, int requested, int somaxconn)
{
	if (ls->from_systemd) {
		/* The socket unit's Backlog= decides, capped by somaxconn;
		 * say so when that is below what herald is configured for. */
		if (ls->backlog >= 0)
			log_info("listening on %s (backlog %d, from systemd)", ls->name, ls->backlog);
		else
			log_info("listening on %s (from systemd)", ls->name);
		if (ls->backlog >= 0 && ls->backlog < requested)
			log_warn("%s: the kernel's backlog %d is below the configured %d; raise Backlog= in the "
				 "socket unit%s",
				 ls->name, ls->backlog, requested,
				 somaxconn > 0 && somaxconn < requested ? " and net.core.somaxconn" : "");
		return;
	}
	int eff = ls->is_unix ? unix_backlog(ls->fd) : kernel_backlog(ls->fd);
	if (eff < 0)
		eff = requested;
	log_info("listening on %s (backlog %d)", ls->name, eff);
	/* What an overflow costs differs: a TCP client's SYN is dropped and
	 * retried after a second; a unix client's connect fails with EAGAIN
	 * (or blocks, if it blocks). */
	const char *cost = ls->is_unix ? "connects fail with EAGAIN (or block) while it is full"
				       : "each dropped handshake waits out a 1 s SYN retransmit";
	if (requested < 128)
		log_warn("%s: backlog %d is small: a burst of connects (clients reconnecting after a restart) "
			 "overflows it, and %s",
			 ls->name, requested, cost);
	if (somaxconn > 0 && requested > somaxconn)
		log_warn("%s: backlog %d is capped to %d by net.core.somaxconn; raise it (sysctl "
			 "net.core.somaxconn=%d), or under bursts %s",
			 ls->name, requested, somaxconn, requested, cost);
}

/* listeners_open, or with nworkers > 1 listeners_open_group. */
static int open_all(struct listeners *set, const struct config *cfg, unsigned nworkers)
{
	bool group = nworkers > 1;
	int somaxconn = read_somaxconn();
	char **names = NULL;
	int n = sd_listen_fds_with_names(1, &names);
	if (n < 0) {
		log_err("reading systemd's LISTEN_FDS: %s", strerror(-n));
		return -1;
	}
	if (n > 0) {
		int r = adopt_systemd(set, n, names, group);
		for (int i = 0; names && i < n; i++)
			free(names[i]);
		free(names);
		if (r < 0)
			return -1;
		log_info("using %d socket(s) from systemd; the listen setting is ignored", n);
	} else {
		set->ls = xcalloc(cfg->nlisten, sizeof(*set->ls));
		for (size_t i = 0; i < cfg->nlisten; i++) {
			struct listener *ls = &set->ls[i];
			if (open_one(set, cfg, cfg->listen[i], ls, group) < 0)
				return -1;
			set->n++;
			if (!group || ls->is_unix)
				continue;
			/* One socket per worker: the kernel spreads connections
			 * over them, and a restarted worker finds its own again
			 * with what queued on it meanwhile. */
			ls->copies = xcalloc(nworkers, sizeof(*ls->copies));
			ls->copies[0] = ls->fd;
			ls->ncopies = 1;
			for (unsigned w = 1; w < nworkers; w++) {
				int fd = open_copy(ls, cfg->backlog);
				if (fd < 0) {
					log_err("listen %s (worker %u's socket): %s", cfg->listen[i], w,
						strerror(errno));
					return -1;
				}
				ls->copies[ls->ncopies++] = fd;
			}
		}
	}
	for (size_t i = 0; i < set->n; i++)
		log_listener(&set->ls[i], cfg->backlog, somaxconn);
	return 0;
}

int listeners_open(struct listeners *set, const struct config *cfg)
{
	return open_all(set, cfg, 1);
}

int listeners_open_group(struct listeners *set, const struct config *cfg, unsigned nworkers)
{
	return open_all(set, cfg, nworkers);
}

void listeners_pick(struct listeners *group, unsigned index, struct listeners *out)
{
	memset(out, 0, sizeof(*out));
	out->ls = xcalloc(group->n ? group->n : 1, sizeof(*out->ls));
	out->n = group->n;
	for (size_t i = 0; i < group->n; i++) {
		struct listener *g = &group->ls[i];
		struct listener *ls = &out->ls[i];
		*ls = *g;
		ls->set = out;
		ls->unix_path = NULL;
		ls->copies = NULL;
		ls->ncopies = 0;
		memset(&ls->resume_timer, 0, sizeof(ls->resume_timer));
		ls->exclusive = g->copies == NULL;
		if (!g->copies)
			continue;
		ls->fd = g->copies[index];
		for (unsigned w = 0; w < g->ncopies; w++)
			if (w != index)
				close(g->copies[w]);
	}
	for (size_t i = 0; i < group->n; i++) {
		free(group->ls[i].copies);
		free(group->ls[i].unix_path);
	}
	free(group->ls);
	memset(group, 0, sizeof(*group));
}

int listeners_adopt(struct listeners *set)
{
	for (size_t i = 0; i < set->n; i++) {
		struct listener *ls = &set->ls[i];
		if (ls->tls_wanted && !set->tls) {
			log_err("%s: a tls listener needs tls_cert and tls_key", ls->name);
			return -1;
		}
		ls->tls = ls->tls_wanted ? set->tls : NULL;
	}
	return 0;
}

static void on_accept(void *arg, uint32_t events);

static uint32_t accept_events(const struct listener *ls)
{
	return ls->exclusive ? EPOLLIN | EPOLLEXCLUSIVE : EPOLLIN;
}

/* Stop taking connections for a while. An EPOLLEXCLUSIVE watch cannot be
 * modified, only removed and added again. */
static void pause_accept(struct listener *ls)
{
	if (ls->exclusive)
		loop_unwatch(ls->set->lp, ls->fd);
	else
		loop_modify(ls->set->lp, ls->fd, 0);
}

static void resume_accept(void *arg)
{
	struct listener *ls = arg;
	if (ls->exclusive)
		loop_watch(ls->set->lp, ls->fd, accept_events(ls), on_accept, ls);
	else
		loop_modify(ls->set->lp, ls->fd, EPOLLIN);
	on_accept(ls, EPOLLIN);
}

static void on_accept(void *arg, uint32_t events)
{
	struct listener *ls = arg;
	struct listeners *set = ls->set;
	(void)events;
	loop_label(set->lp, "accepting connections", NULL);
	while (!conn_pool_draining(set->pool)) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = accept4(ls->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			set->m->connections_accepted++;
			if (!ls->is_unix && !ls->nodelay) {
				int one = 1;
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			}
			conn_new(set->pool, fd, (struct sockaddr *)&ss, len,
				 ls->tls ? &transport_tls : &transport_plain, ls->tls);
			continue;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
			continue;
		case EAGAIN:
			return;
		case EMFILE:
		case ENFILE:
		case ENOBUFS:
		case ENOMEM:
			/* Out of descriptors or memory: stop taking connections
			 * (they wait in the accept queue) and try again shortly,
			 * instead of spinning on a readable listener. */
			set->m->accept_fd_exhausted++;
			if (loop_now(set->lp) - set->last_exhausted_log >= 1000 || set->last_exhausted_log == 0) {
				log_warn("%s: accept: %s; pausing accepts for %d ms (%llu times so far)", ls->name,
					 strerror(errno), ACCEPT_RETRY_MS,
					 (unsigned long long)set->m->accept_fd_exhausted);
				set->last_exhausted_log = loop_now(set->lp);
			}
			pause_accept(ls);
			loop_timer_start(set->lp, &ls->resume_timer, ACCEPT_RETRY_MS, resume_accept, ls);
			return;
		default:
			log_err("%s: accept: %s", ls->name, strerror(errno));
			return;
		}
	}
}

/* Have the kernel hand over a TCP connection once its first bytes have
 * come (TCP_DEFER_ACCEPT): every client of herald speaks first (a request,
 * a ClientHello, HTTP/2's preface), so the accepted socket's first read
 * finds them, where it otherwise found EAGAIN for most of a connect storm's
 * connections (their request comes a moment after the handshake) and the
 * connection came back through epoll to be read: one system call and one
 * wake-up per open saved. A client that connects and says nothing is held
 * by the kernel (as a half-open request, not a socket) for
 * DEFER_ACCEPT_S and then handed over as before, for header_timeout to
 * judge. A socket systemd passed keeps its unit's DeferAcceptSec= when it
 * set one. */
static void defer_accept(struct listener *ls)
{
	int secs = 0;
	socklen_t len = sizeof(secs);
	if (ls->from_systemd && getsockopt(ls->fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, &len) == 0 && secs > 0)
		return;
	secs = DEFER_ACCEPT_S;
	if (setsockopt(ls->fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &secs, sizeof(secs)) < 0)
		log_debug("%s: TCP_DEFER_ACCEPT: %s", ls->name, strerror(errno));
}

int listeners_start(struct listeners *set)
{
	for (size_t i = 0; i < set->n; i++) {
		/* Output is already gathered into one writev per pass; Nagle
		 * would only hold a response back behind the client's delayed
		 * ACK. Set on the listening socket, TCP_NODELAY is inherited by
		 * every connection it accepts (Linux), a system call per
		 * connection saved; where that fails, each connection is set. */
		int one = 1;
		struct listener *ls = &set->ls[i];
		ls->nodelay = !ls->is_unix && setsockopt(ls->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
		if (!ls->is_unix)
			defer_accept(ls);
		int r = loop_watch(set->lp, set->ls[i].fd, accept_events(&set->ls[i]), on_accept, &set->ls[i]);
		if (r < 0) {
			log_err("%s: epoll: %s", set->ls[i].name, strerror(-r));
			return -1;
		}
	}
	return 0;
}

void listeners_close(struct listeners *set)
{
	for (size_t i = 0; i < set->n; i++) {
		struct listener *ls = &set->ls[i];
		if (ls->fd < 0)
			continue;
		if (set->lp) {
			loop_timer_stop(set->lp, &ls->resume_timer);
			loop_unwatch(set->lp, ls->fd);
		}
		for (unsigned w = 1; w < ls->ncopies; w++)
			close(ls->copies[w]);
		free(ls->copies);
		ls->copies = NULL;
		ls->ncopies = 0;
		close(ls->fd);
		ls->fd = -1;
		if (ls->unix_path)
			unlink(ls->unix_path);
		free(ls->unix_path);
		ls->unix_path = NULL;
	}
}

void listeners_free(struct listeners *set)
{
	listeners_close(set);
	free(set->ls);
	set->ls = NULL;
	set->n = 0;
}
