/* SPDX-License-Identifier: BSD-2-Clause */
/* tls_context.h: the TLS server context of tls: listeners (OpenSSL):
 * certificate chain and key (checked, loaded, reloaded), session tickets
 * and their rotation, and the sessions new connections start from. A
 * connection's handshake and I/O are transport_tls.h's. */
#ifndef HERALD_TLS_CONTEXT_H
#define HERALD_TLS_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

struct config;
struct loop;
struct tls_ctx;
struct tls_sealer;

/* Where a session puts the server's and the client's first TLS 1.3
 * application traffic secrets when its handshake derives them (the
 * lengths stay 0 otherwise). */
struct tls_secret {
	unsigned char bytes[48]; /* the server's */
	uint8_t len;
	uint8_t client_len;
	unsigned char client[48];
};

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

/* A new server-side session on tc's current context for the accepted
 * socket fd, in accept state, counted as a handshake in progress until
 * tls_context_handshake_ended. Its secret goes to *secret, which must
 * outlive the SSL (the caller frees it with SSL_free). Returns NULL after
 * logging why, naming peer. */
SSL *tls_context_session(struct tls_ctx *tc, int fd, struct tls_secret *secret, const char *peer);
/* A handshake ended (done, failed, or its connection closed): after a
 * burst of them the heap's free pages are handed back to the kernel. */
void tls_context_handshake_ended(struct tls_ctx *tc);
/* The record sealer every parked stream of tc shares (owned by tc). */
struct tls_sealer *tls_context_sealer(const struct tls_ctx *tc);
/* The newest OpenSSL error as text ("unknown error" when the queue is
 * empty) in buf, emptying the queue so it cannot be blamed on another
 * connection. Returns buf. */
const char *tls_error_text(char *buf, size_t len);

/* The key log callback every server context carries: keeps the server's
 * first TLS 1.3 application traffic secret in the struct tls_secret set as
 * the SSL's app data (the unit tests install it on contexts of their own). */
void tls_context_keylog(const SSL *ssl, const char *line);

#endif
