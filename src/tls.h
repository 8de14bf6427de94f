/* tls.h: TLS on a listener with OpenSSL: the context (certificate chain and
 * key, reloadable), and a connection's non-blocking handshake and I/O behind
 * conn's read and write. Plain connections (c->tls == NULL) never get here. */
#ifndef HERALD_TLS_H
#define HERALD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct conn;
struct listener;
struct config;
struct loop;
struct tls_ctx;

/* What tls_check_pair found at fault. */
enum { TLS_BAD_CERT = 1, TLS_BAD_KEY = 2 };

/* Load the PEM certificate chain and key into a throwaway context, the way
 * tls_setup would, and free it. Returns 0 when they would serve; otherwise
 * TLS_BAD_CERT or TLS_BAD_KEY (a key that does not match the certificate
 * counts as the key's fault) with the reason in err, which does not repeat
 * the file's name. Touches nothing but the two files. */
int tls_check_pair(const char *cert, const char *key, char *err, size_t errlen);

/* Load the certificate chain and key named by cfg's tls_cert/tls_key into
 * a new context (*out; left NULL when none are configured), make the first
 * session ticket key and arm its rotation every tls_ticket_rotate on lp.
 * cfg is read again at each reload and must outlive the context. Returns
 * 0, or -1 after logging why. */
int tls_setup(struct tls_ctx **out, struct loop *lp, const struct config *cfg);
/* Load the pair named in the (already reloaded) cfg into a new context
 * for new handshakes; open connections keep the context they started with,
 * and the ticket keys carry over (a changed tls_ticket_rotate rearms their
 * timer). tc may be NULL (no TLS). Returns 0, or -1 after logging why, with
 * the old pair in service. */
int tls_reload(struct tls_ctx *tc, const struct config *cfg);
/* Stop the rotation timer and free the context and keys (NULL: nothing);
 * call after every connection is closed. */
void tls_teardown(struct tls_ctx *tc);

/* Attach a server-side TLS session on ls's context to the new connection c
 * (c->tls). Returns 0, or -1 (nothing attached) when OpenSSL cannot. */
int tls_conn_start(struct conn *c, struct listener *ls);
/* Send close_notify when the session is healthy, and free it. */
void tls_conn_free(struct conn *c);
bool tls_conn_handshaking(const struct conn *c);
/* Handle an epoll wake-up for a TLS connection. While handshaking, drive
 * the handshake (closing the connection when it fails) and return 0; once
 * done, return the events conn should act on: EPOLLIN right after the
 * handshake, and an event the TLS layer waited for turned into the one its
 * read or write needs (a write waiting on input, a read waiting on output). */
uint32_t tls_conn_on_io(struct conn *c, uint32_t events);
/* Same contracts as read(2)/writev(2) but returning -errno (-EAGAIN when the
 * TLS layer must wait for the socket). writev encrypts straight from the
 * caller's buffers and returns the plaintext bytes taken; after -EAGAIN (or
 * a short count) the next call must start with the same bytes. */
ssize_t tls_conn_read(struct conn *c, void *buf, size_t len);
ssize_t tls_conn_writev(struct conn *c, const struct iovec *iov, int n);
/* Adjust the epoll interest for what the TLS layer waits on. */
uint32_t tls_conn_events(const struct conn *c, uint32_t wanted);
/* True when decrypted input waits inside OpenSSL, where epoll cannot see it. */
bool tls_conn_pending(const struct conn *c);
/* True when a record of the first queued bytes is encrypted but not yet
 * sent: those bytes are committed and must be offered again as they are. */
bool tls_conn_write_pending(const struct conn *c);
/* Send close_notify (best effort) before conn shuts the write side down. */
void tls_conn_shutdown(struct conn *c);

#endif
