/* SPDX-License-Identifier: BSD-2-Clause */
/* listener.h: listening sockets: parse an address, socket/bind/listen with
 * the configured backlog, or adopt sockets passed by systemd; accept4 until
 * EAGAIN; survive fd exhaustion by pausing the listener and retrying from a
 * timer. */
#ifndef HERALD_LISTENER_H
#define HERALD_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/config.h"
#include "common/loop.h"
#include "core/metrics.h"

struct conn_pool;
struct listeners;
struct tls_ctx;

struct listener {
	int fd;
	bool is_unix;
	bool from_systemd;
	char name[160];  /* "tcp 127.0.0.1:8199" or "unix /path" */
	char *unix_path; /* to unlink at exit (our own sockets only) */
	int backlog;     /* as requested, or as the kernel reports */
	struct listeners *set;
	struct loop_timer resume_timer; /* accepts paused after EMFILE/ENFILE */
	struct tls_ctx *tls;            /* for a tls: listener, else NULL */
	bool tls_wanted;                /* a tls: address (or systemd's socket named tls) */
	bool nodelay;                   /* TCP_NODELAY set here, so accepted sockets inherit it */
	/* A group of workers: the main process holds one SO_REUSEPORT socket
	 * per worker for a TCP address it opened (copies[i] is worker i's; fd
	 * is copies[0]); a unix or systemd socket is one fd every worker
	 * watches with EPOLLEXCLUSIVE (exclusive set in the workers). */
	int *copies;
	unsigned ncopies;
	bool exclusive;
};

/* Every listening socket, and where their connections go. */
struct listeners {
	struct loop *lp;
	struct conn_pool *pool; /* accepted sockets become its connections; its draining stops accepts */
	struct metrics *m;
	struct tls_ctx *tls; /* the context tls: listeners serve, or NULL */
	struct listener *ls;
	size_t n;
	uint64_t last_exhausted_log;
};

/* One listen address, parsed: "host:port", "[v6]:port", "unix:/path", each
 * but the unix one optionally prefixed "tls:". */
struct listen_addr {
	bool tls;
	bool is_unix;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* unix: the socket's path */
	struct sockaddr_storage ss;                             /* otherwise: the address to bind */
	socklen_t len;
};

/* Parse one listen address without touching the system (no sockets, no
 * name lookups). Returns 0, or -1 with the reason in err. open_one binds
 * what it returns. */
int listen_addr_parse(const char *text, struct listen_addr *la, char *err, size_t errlen);

/* Check every address cfg lists with listen_addr_parse, once cfg is
 * loaded, so that a bad one is refused before anything opens. Logs each
 * bad one as config_bad_value does (its origin, the address, the reason)
 * and returns how many. */
int listener_check_config(const struct config *cfg);

/* Open every address cfg lists (or take systemd's sockets when LISTEN_FDS
 * names some) into set (lp, pool, m and tls filled in by the caller). Logs
 * each one as "listening on ...". Returns 0, or -1 after logging which
 * address failed and why. */
int listeners_open(struct listeners *set, const struct config *cfg);

/* The main process of a group of nworkers workers: as listeners_open, but
 * each TCP address herald opens itself gets nworkers SO_REUSEPORT sockets,
 * and tls: listeners are checked by the workers (set->tls stays NULL). */
int listeners_open_group(struct listeners *set, const struct config *cfg, unsigned nworkers);

/* A worker, after fork: fill out (lp, pool, m and tls filled in later by
 * the caller, who then calls listeners_adopt) with worker index's sockets
 * from the group's set, closing the other workers' copies in this process
 * only; the group's set is emptied (its memory freed). The worker never
 * unlinks a unix socket: the main process does. */
void listeners_pick(struct listeners *group, unsigned index, struct listeners *out);

/* A worker: give its tls: listeners set->tls. Returns 0, or -1 after
 * logging that a tls: listener has no certificate. */
int listeners_adopt(struct listeners *set);

/* Start accepting on every listener. */
int listeners_start(struct listeners *set);

/* Stop accepting and close every listener (unlinking our unix sockets). */
void listeners_close(struct listeners *set);

/* Close what is open and free the set's array. */
void listeners_free(struct listeners *set);

#endif
