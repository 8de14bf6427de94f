/* tls.h: TLS on a listener with OpenSSL: the context (certificate chain and
 * key, reloadable), and a connection's non-blocking handshake and I/O behind
 * conn's read and write. */
#ifndef HERALD_TLS_H
#define HERALD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct conn;
struct listener;
struct server;

/* Load the certificate and key named in the config into srv->tls (NULL when
 * none are configured). Returns 0 or -1 after logging why. */
int tls_setup(struct server *srv);
/* Reload certificate and key; on failure keep the old pair and log why. */
int tls_reload(struct server *srv);
void tls_teardown(struct server *srv);

int tls_conn_start(struct conn *c, struct listener *ls);
void tls_conn_free(struct conn *c);
bool tls_conn_handshaking(const struct conn *c);
void tls_conn_on_io(struct conn *c, uint32_t events);
/* Same contracts as read(2)/writev(2) but returning -errno (-EAGAIN when the
 * TLS layer must wait for the socket). */
ssize_t tls_conn_read(struct conn *c, void *buf, size_t len);
ssize_t tls_conn_writev(struct conn *c, const struct iovec *iov, int n);
/* Adjust the epoll interest for what the TLS layer waits on. */
uint32_t tls_conn_events(const struct conn *c, uint32_t wanted);
void tls_conn_shutdown(struct conn *c);

#endif
