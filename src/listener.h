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

#include "loop.h"

struct server;

struct listener {
	int fd;
	bool is_unix;
	bool from_systemd;
	bool paused;
	char name[160];  /* "tcp 127.0.0.1:8199" or "unix /path" */
	char *unix_path; /* to unlink at exit (our own sockets only) */
	int backlog;     /* as requested, or as the kernel reports */
	struct server *srv;
	struct loop_timer resume_timer;
	void *tls; /* TLS context for this listener, or NULL */
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
 * name lookups). Returns 0, or -1 with the reason in err. Configuration
 * checks every address with it when it is set; open_one binds what it
 * returns. */
int listen_addr_parse(const char *text, struct listen_addr *la, char *err, size_t errlen);

/* Open every configured address (or take systemd's sockets when LISTEN_FDS
 * names some) into srv->listeners. Logs each one as "listening on ...".
 * Returns 0, or -1 after logging which address failed and why. */
int listeners_open(struct server *srv);

/* Start accepting on every listener. */
int listeners_start(struct server *srv);

/* Stop accepting and close every listener (unlinking our unix sockets). */
void listeners_close(struct server *srv);

#endif
