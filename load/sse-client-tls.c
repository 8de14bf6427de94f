/* SPDX-License-Identifier: BSD-2-Clause */
/* sse-client-tls.c: OpenSSL for the SSE client (load/readers --tls): the
 * client context, a fresh certificate for the herald a tool started, and
 * reader I/O through SSL_read/SSL_write behind conn_read()/conn_write(), so
 * the stream scanner never knows (the certificate is made by tool-tls.c).
 * The handshake itself is driven from the epoll loop in sse-client.c; the
 * publisher stays plain. */
#include "sse-client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

/* ---- reader I/O (plain sockets, or TLS) ------------------------------------ */

void tls_note_error(struct tls *t, const char *what)
{
	tool_tls_note_error(t->first_error, sizeof(t->first_error), what);
}

/* SSL_read/SSL_write results as read(2)/write(2) would give them: -1 with
 * errno EAGAIN when OpenSSL waits for the socket, 0 at the end. */
static ssize_t tls_result(struct tls *t, struct reader *r, int n, const char *what)
{
	if (n > 0)
		return n;
	int saved = errno;
	switch (SSL_get_error(r->ssl, n)) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		errno = saved;
		tls_note_error(t, what);
		errno = saved ? saved : ECONNRESET;
		return -1;
	default:
		tls_note_error(t, what);
		errno = EPROTO;
		return -1;
	}
}

ssize_t conn_read(struct tls *t, struct reader *r, void *buf, size_t len)
{
	if (!r->ssl)
		return read(r->fd, buf, len);
	ERR_clear_error();
	return tls_result(t, r, SSL_read(r->ssl, buf, (int)len), "read");
}

ssize_t conn_write(struct tls *t, struct reader *r, const void *buf, size_t len)
{
	if (!r->ssl)
		return write(r->fd, buf, len);
	ERR_clear_error();
	return tls_result(t, r, SSL_write(r->ssl, buf, (int)len), "write");
}

/* ---- TLS set-up ------------------------------------------------------------ */

/* The certificate itself is tool-tls.c's; struct tls keeps its paths. */
int tls_make_cert(struct tls *t)
{
	struct tool_cert c;
	char err[600];
	if (tool_tls_make_cert(&c, err, sizeof(err)) != 0) {
		fprintf(stderr, "readers: %s\n", err);
		return -1;
	}
	snprintf(t->dir, sizeof(t->dir), "%s", c.dir);
	snprintf(t->cert_path, sizeof(t->cert_path), "%s", c.cert);
	snprintf(t->key_path, sizeof(t->key_path), "%s", c.key);
	return 0;
}

void tls_remove_cert(struct tls *t, int keep)
{
	if (!t->dir[0] || keep)
		return;
	unlink(t->cert_path);
	unlink(t->key_path);
	rmdir(t->dir);
}

int tls_port_from_log(const char *log)
{
	return tool_tls_port_from_log(log);
}

/* The client context: TLS 1.2 or later, ALPN http/1.1, and unless
 * --insecure the server's certificate checked against trust (a PEM file, or
 * the system's CAs when NULL) and the target's address. */
int tls_client_setup(struct tls *t, const char *trust, int insecure, const struct tool_addr *target)
{
	t->ctx = SSL_CTX_new(TLS_client_method());
	if (!t->ctx) {
		tls_note_error(t, "SSL_CTX_new");
		fprintf(stderr, "readers: %s\n", t->first_error);
		return -1;
	}
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(t->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	SSL_CTX_set_mode(t->ctx, SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF); /* every reader a full handshake */
	static const unsigned char alpn[] = "\x08http/1.1";
	SSL_CTX_set_alpn_protos(t->ctx, alpn, sizeof(alpn) - 1);
	if (insecure) {
		SSL_CTX_set_verify(t->ctx, SSL_VERIFY_NONE, NULL);
		return 0;
	}
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	int ok = trust ? SSL_CTX_load_verify_locations(t->ctx, trust, NULL) : SSL_CTX_set_default_verify_paths(t->ctx);
	if (ok != 1) {
		tls_note_error(t, trust ? trust : "the system's CAs");
		fprintf(stderr, "readers: cannot load %s\n", t->first_error);
		return -1;
	}
	char host[INET6_ADDRSTRLEN] = "";
	if (target->family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)&target->sa)->sin_addr, host, sizeof(host));
	else if (target->family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&target->sa)->sin6_addr, host, sizeof(host));
	if (host[0] && X509_VERIFY_PARAM_set1_ip_asc(SSL_CTX_get0_param(t->ctx), host) != 1) {
		fprintf(stderr, "readers: cannot check the certificate against %s\n", host);
		return -1;
	}
	return 0;
}
