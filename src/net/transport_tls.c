/* SPDX-License-Identifier: BSD-2-Clause */
/* transport_tls.c: one TLS connection: its non-blocking handshake, reads
 * and writes through OpenSSL, and the parking of an open TLS 1.3 stream.
 *
 * A connection's TLS states:
 *
 *   HANDSHAKING --SSL_do_handshake ok--> OPEN --SSL_shutdown--> (freed)
 *        |  want read  -> EPOLLIN          |  reads and writes map
 *        |  want write -> EPOLLOUT         |  WANT_READ/WANT_WRITE to -EAGAIN
 *        |                                 |
 *        |      first write after `streaming`, TLS 1.3, first record matched
 *        |                                 v
 *        |                  PARKED (no SSL: key, IV, sequence; records sealed
 *        |                  by tls_park.c; any input ends it; close_notify
 *        |                  sealed there too)
 *        +-- error or header_timeout -> closed without close_notify
 *
 * Invariants:
 * - The connection's own interest (EPOLLIN while it reads, EPOLLOUT while
 *   output is queued) is kept; tls_events only swaps the direction when
 *   OpenSSL said a read must first write or a write must first read, so a
 *   socket ready in the unneeded direction cannot spin the loop.
 * - Writes encrypt directly from the shared event chunks (one SSL_write per
 *   iovec); no plaintext is copied per reader. With partial writes on,
 *   SSL_write returns after each record, and a record that met a full socket
 *   stays encrypted in OpenSSL until the same bytes are offered again
 *   (output_pending), which the connection honours by never dropping that
 *   frame.
 * - Decrypted bytes can wait inside OpenSSL while the socket is empty
 *   (input_pending); the connection polls them at the end of the pass.
 * - Nothing here acts on the connection: a failed handshake is returned
 *   from on_io with its reason, and interest changes through events.
 *
 * Parking: an open stream only writes; its input is read and dropped until
 * the client goes. Such a connection needs from TLS only the sealing of its
 * records, so on its first write after the connection said it is a stream
 * (TLS 1.3 only) the session is parked: the server's traffic key and IV
 * (from the secret the context's key log callback kept) and the record
 * sequence number are kept, and the SSL object is freed. OpenSSL does not
 * tell the sequence number, so the first record is sealed twice: by OpenSSL
 * into a memory BIO, and by tls_park_match; only when the two match byte
 * for byte is the SSL freed. Otherwise the connection keeps its SSL (and
 * that record goes out as OpenSSL made it), so a nonce is never used twice.
 * Parked, any input other than the end of the stream (close_notify, a key
 * update) cannot be read and ends the connection; the reader resumes from
 * its Last-Event-ID like after any drop.
 *
 * Settled connections (an HTTP/2 session, which reads frames for as long
 * as it lives) park the same way at a write when OpenSSL holds no input,
 * and keep reading: the client's traffic key comes from the key log too,
 * and the sequence number of its next record from counting the records
 * OpenSSL read after the handshake (its message callback). Their records
 * are opened by tls_park.c; a key update or an alert other than
 * close_notify cannot be followed and ends the connection. */
#include "net/transport_tls.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "net/tls_context.h"
#include "net/tls_park.h"
#include "common/util.h"

struct tls_conn {
	SSL *ssl; /* NULL once parked */
	struct tls_ctx *tc;
	struct tls_park *park;
	struct tls_park_reader *rd; /* parked, and still reading (settled) */
	uint64_t rseq;              /* the client's records read since the handshake */
	const char *peer;           /* for logs, the connection's */
	struct tls_secret secret;   /* the server's application traffic secret, until parked */
	/* Records sealed for a send made elsewhere (seal), until its result
	 * comes (sealed): the bytes, in the batch's buffer, and the plaintext
	 * they carry. */
	const unsigned char *sealed;
	uint32_t sealed_len, sealed_plain;
	bool streaming;             /* write-only from now on: parking may happen */
	bool settled;               /* long-lived, reading on: parking may happen, with a reader */
	bool no_park;               /* parking was tried, or cannot be */
	bool handshaking;
	bool hs_wants_write;   /* the handshake waits for EPOLLOUT (else EPOLLIN) */
	bool read_wants_write; /* the last SSL_read needs the socket writable */
	bool write_wants_read; /* the last SSL_write needs input first */
	bool write_pending;    /* OpenSSL holds a record encrypted but not yet sent */
	uint32_t pending_len;  /* the plaintext bytes it may carry: the piece last offered */
	bool failed;           /* a fatal error: no close_notify */
	bool shut_sent;
};

/* OpenSSL tells of every record header it reads: the client's records
 * after the handshake are counted, since their sequence number is what a
 * parked session that reads on must continue from. */
static void on_record(int write_p, int version, int content_type, const void *buf, size_t len, SSL *ssl, void *arg)
{
	struct tls_conn *t = arg;
	(void)version;
	(void)buf;
	(void)len;
	(void)ssl;
	if (!write_p && content_type == SSL3_RT_HEADER && !t->handshaking)
		t->rseq++;
}

static int tls_open(struct transport *tp, void *ctx, const char *peer)
{
	struct tls_ctx *tc = ctx;
	struct tls_conn *t = xcalloc(1, sizeof(*t));
	t->ssl = tls_context_session(tc, tp->fd, &t->secret, peer);
	if (!t->ssl) {
		free(t);
		return -1;
	}
	t->tc = tc;
	t->peer = peer;
	t->handshaking = true;
	SSL_set_msg_callback(t->ssl, on_record);
	SSL_set_msg_callback_arg(t->ssl, t);
	tp->state = t;
	return 0;
}

static void tls_shutdown(struct transport *tp)
{
	struct tls_conn *t = tp->state;
	if (t->handshaking || t->failed || t->shut_sent)
		return;
	t->shut_sent = true;
	if (!t->ssl) {
		/* Parked: a close_notify alert of our own, one try. */
		tls_park_close_notify(tls_context_sealer(t->tc), t->park, tp->fd);
		return;
	}
	ERR_clear_error();
	SSL_shutdown(t->ssl); /* one try; the socket is not waited on for it */
	ERR_clear_error();
}

static void tls_moved(struct transport *tp, const char *peer)
{
	struct tls_conn *t = tp->state;
	if (t)
		t->peer = peer;
}

static void tls_free(struct transport *tp)
{
	struct tls_conn *t = tp->state;
	if (!t)
		return;
	tls_shutdown(tp);
	SSL_free(t->ssl);
	tls_park_free(t->park);
	tls_park_reader_free(t->rd);
	OPENSSL_cleanse(&t->secret, sizeof(t->secret));
	if (t->handshaking)
		tls_context_handshake_ended(t->tc);
	free(t);
	tp->state = NULL;
}

/* One handshake step. Returns 0 (done, or waiting: t->handshaking says
 * which), or -1 with the reason in why. */
static int handshake(struct tls_conn *t, char *why, size_t whylen)
{
	char buf[256];
	ERR_clear_error();
	int r = SSL_do_handshake(t->ssl);
	if (r == 1) {
		t->handshaking = false;
		tls_context_handshake_ended(t->tc);
		log_debug("tls: %s from %s%s", SSL_get_version(t->ssl), t->peer,
			  SSL_session_reused(t->ssl) ? " (resumed)" : "");
		return 0;
	}
	int saved = errno;
	switch (SSL_get_error(t->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		t->hs_wants_write = false;
		return 0;
	case SSL_ERROR_WANT_WRITE:
		t->hs_wants_write = true;
		return 0;
	case SSL_ERROR_SYSCALL:
		snprintf(why, whylen, "TLS handshake: %s",
			 ERR_peek_last_error() ? tls_error_text(buf, sizeof(buf))
			 : saved               ? strerror(saved)
					       : "connection closed");
		break;
	default:
		snprintf(why, whylen, "TLS handshake: %s", tls_error_text(buf, sizeof(buf)));
		break;
	}
	t->failed = true;
	ERR_clear_error();
	return -1;
}

static int tls_on_io(struct transport *tp, uint32_t *events, char *why, size_t whylen)
{
	struct tls_conn *t = tp->state;
	uint32_t in = *events;
	if (t->handshaking) {
		*events = 0;
		if (handshake(t, why, whylen) < 0)
			return -1;
		/* Once done, the request may have come with the client's last
		 * flight. */
		if (!t->handshaking)
			*events = EPOLLIN;
		return 0;
	}
	if (t->read_wants_write && (in & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		t->read_wants_write = false;
		*events |= EPOLLIN;
	}
	if (t->write_wants_read && (in & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
		t->write_wants_read = false;
		*events |= EPOLLOUT;
	}
	return 0;
}

static ssize_t tls_read(struct transport *tp, void *buf, size_t len)
{
	struct tls_conn *t = tp->state;
	if (t->handshaking)
		return -EAGAIN;
	if (t->failed)
		return -EPROTO;
	if (t->rd) {
		/* Parked, reading on: the client's records opened here. */
		ssize_t r = tls_park_read(tls_context_sealer(t->tc), t->rd, tp->fd, buf, len);
		if (r == -EPROTO)
			t->failed = true;
		return r;
	}
	if (!t->ssl) {
		/* Parked: the end of the stream reads as such; anything else
		 * (an alert, a key update) cannot be read and ends it too. */
		ssize_t r = read(tp->fd, buf, len);
		if (r < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		return r == 0 ? 0 : -EPROTO;
	}
	ERR_clear_error();
	int n = SSL_read(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
	if (n > 0) {
		t->read_wants_write = false;
		return n;
	}
	int saved = errno;
	switch (SSL_get_error(t->ssl, n)) {
	case SSL_ERROR_WANT_READ:
		t->read_wants_write = false;
		return -EAGAIN;
	case SSL_ERROR_WANT_WRITE:
		t->read_wants_write = true;
		return -EAGAIN;
	case SSL_ERROR_ZERO_RETURN:
		return 0; /* close_notify, or EOF (SSL_OP_IGNORE_UNEXPECTED_EOF) */
	case SSL_ERROR_SYSCALL:
		t->failed = true;
		ERR_clear_error();
		return saved ? -saved : -ECONNRESET;
	default:
		t->failed = true;
		ERR_clear_error();
		return -EPROTO;
	}
}

/* The TLS 1.3 suites parking knows, as tls_park's numbers; 0 for others. */
static unsigned park_suite(const SSL *ssl)
{
	const SSL_CIPHER *c = SSL_get_current_cipher(ssl);
	uint32_t id = c ? SSL_CIPHER_get_id(c) : 0;
	return (id & 0xffff0000u) == 0x03000000u ? id & 0xffffu : 0;
}

/* Try to park t (see above), sealing the first record from p (n bytes, at
 * most the session's record size) on the way. The record OpenSSL made goes
 * out through the held record either way; t->ssl is NULL when parked. */
static void park(struct tls_conn *t, const unsigned char *p, size_t n)
{
	/* Input buffered inside OpenSSL would be lost: a settled session
	 * tries again at a later write, a stream (whose input is dropped)
	 * does not. */
	if (t->settled && SSL_has_pending(t->ssl))
		return;
	t->no_park = true; /* once */
	if (SSL_version(t->ssl) != TLS1_3_VERSION || t->secret.len == 0 || SSL_has_pending(t->ssl) ||
	    SSL_get_shutdown(t->ssl) || (t->settled && t->secret.client_len == 0))
		return;
	struct tls_sealer *s = tls_context_sealer(t->tc);
	unsigned suite = park_suite(t->ssl);
	struct tls_park *pk = tls_park_new(s, suite, t->secret.bytes, t->secret.len, tls_park_record_max(t->ssl));
	struct tls_park_reader *rd =
		t->settled ? tls_park_reader_new(s, suite, t->secret.client, t->secret.client_len, t->rseq) : NULL;
	OPENSSL_cleanse(&t->secret, sizeof(t->secret));
	if (!pk || (t->settled && !rd)) {
		tls_park_free(pk);
		tls_park_reader_free(rd);
		return;
	}
	BIO *sock = SSL_get_wbio(t->ssl), *mem = BIO_new(BIO_s_mem());
	if (!mem || BIO_up_ref(sock) != 1) {
		BIO_free(mem);
		tls_park_free(pk);
		tls_park_reader_free(rd);
		return;
	}
	SSL_set0_wbio(t->ssl, mem);
	ERR_clear_error();
	int w = SSL_write(t->ssl, p, (int)n);
	char *made = NULL;
	long made_len = BIO_get_mem_data(mem, &made);
	if (w <= 0) {
		/* Nothing was sealed: leave the session as it was. */
		ERR_clear_error();
		SSL_set0_wbio(t->ssl, sock);
		tls_park_free(pk);
		tls_park_reader_free(rd);
		return;
	}
	bool match = w == (int)n && made_len > 0 &&
		     tls_park_match(s, pk, (const unsigned char *)made, (size_t)made_len, p, n) == 0;
	/* OpenSSL's record goes out either way, held until the socket takes it. */
	t->park = pk;
	tls_park_hold(pk, (const unsigned char *)made, (size_t)made_len, 0, (size_t)w);
	if (match) {
		BIO_free(sock); /* the reference taken above; the SSL frees its own */
		SSL_free(t->ssl);
		t->ssl = NULL;
		t->rd = rd;
		log_debug("tls: %s from %s parked (sequence %llu%s)", rd ? "session" : "stream", t->peer,
			  (unsigned long long)pk->seq, rd ? ", reading on" : "");
		return;
	}
	tls_park_reader_free(rd);
	/* Keep the SSL; the record it made still leaves through the hold. */
	SSL_set0_wbio(t->ssl, sock);
	log_debug("tls: stream from %s not parked: its first record did not match", t->peer);
}

/* Writes while t->park is set: a parked stream, or the one record held
 * while parking failed (the SSL then carries on). */
static ssize_t park_writev(struct transport *tp, const struct iovec *iov, int n)
{
	struct tls_conn *t = tp->state;
	if (t->ssl) {
		ssize_t r = tls_park_flush(t->park, tp->fd);
		if (r < 0)
			return r;
		tls_park_free(t->park);
		t->park = NULL;
		return r;
	}
	ssize_t r = tls_park_writev(tls_context_sealer(t->tc), t->park, tp->fd, iov, n);
	if (t->park->failed)
		t->failed = true;
	return r;
}

static ssize_t tls_writev(struct transport *tp, const struct iovec *iov, int n)
{
	struct tls_conn *t = tp->state;
	size_t done = 0;
	if (t->handshaking)
		return -EAGAIN;
	if (t->failed)
		return -EPIPE;
	if (!t->park && !t->no_park && (t->streaming || t->settled) && !t->write_pending && n > 0 && iov[0].iov_len) {
		size_t first = MIN(iov[0].iov_len, (size_t)tls_park_record_max(t->ssl));
		park(t, iov[0].iov_base, first);
	}
	if (t->park)
		return park_writev(tp, iov, n);
	for (int i = 0; i < n; i++) {
		const char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;
		while (left) {
			ERR_clear_error();
			int w = SSL_write(t->ssl, p, left > INT_MAX ? INT_MAX : (int)left);
			if (w > 0) {
				t->write_pending = false;
				t->write_wants_read = false;
				done += (size_t)w;
				p += w;
				left -= (size_t)w;
				continue;
			}
			int saved = errno;
			int e = SSL_get_error(t->ssl, w);
			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
				t->write_pending = true;
				t->pending_len = left > UINT32_MAX ? UINT32_MAX : (uint32_t)left;
				t->write_wants_read = e == SSL_ERROR_WANT_READ;
				return done ? (ssize_t)done : -EAGAIN;
			}
			t->failed = true;
			ERR_clear_error();
			if (done)
				return (ssize_t)done; /* the error comes back on the next call */
			return e == SSL_ERROR_SYSCALL && saved ? -saved : -EPIPE;
		}
	}
	return (ssize_t)done;
}

static uint32_t tls_events(const struct transport *tp, uint32_t wanted)
{
	const struct tls_conn *t = tp->state;
	if (t->handshaking)
		return t->hs_wants_write ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
	uint32_t ev = wanted;
	if (!t->ssl)
		return ev;
	if (t->read_wants_write && (wanted & EPOLLIN))
		ev = (ev & ~(uint32_t)(EPOLLIN | EPOLLRDHUP)) | EPOLLOUT;
	if (t->write_wants_read && (wanted & EPOLLOUT))
		ev = (ev & ~(uint32_t)EPOLLOUT) | EPOLLIN;
	return ev;
}

static bool tls_input_pending(const struct transport *tp)
{
	const struct tls_conn *t = tp->state;
	if (t->handshaking || t->failed)
		return false;
	return t->ssl ? SSL_pending(t->ssl) > 0 : t->rd && tls_park_reader_pending(t->rd);
}

static size_t tls_output_pending(const struct transport *tp)
{
	const struct tls_conn *t = tp->state;
	if (t->park && tls_park_holding(t->park))
		return t->park->out_plain ? t->park->out_plain : 1;
	return t->write_pending ? t->pending_len : 0;
}

/* A parked stream's records sealed here and sent in a batch (see
 * transport.h): only while nothing is held, so the batch's send is the
 * next bytes on the socket. */
static size_t tls_seal_room(const struct transport *tp, size_t plain)
{
	const struct tls_conn *t = tp->state;
	if (t->ssl || !t->park || t->failed || t->handshaking)
		return 0;
	return tls_park_seal_room(t->park, plain);
}

static size_t tls_seal(struct transport *tp, const struct iovec *iov, int n, size_t plain, void *buf, size_t *wire)
{
	struct tls_conn *t = tp->state;
	size_t got = tls_park_seal_iov(tls_context_sealer(t->tc), t->park, iov, n, plain, buf, wire);
	t->sealed = got ? buf : NULL;
	t->sealed_len = (uint32_t)*wire;
	t->sealed_plain = (uint32_t)got;
	if (!got && t->park->failed)
		t->failed = true;
	return got;
}

static ssize_t tls_sealed(struct transport *tp, ssize_t w)
{
	struct tls_conn *t = tp->state;
	if (!t->sealed)
		return w < 0 ? w : -EAGAIN;
	ssize_t r = tls_park_sent(t->park, t->sealed, t->sealed_len, t->sealed_plain, w);
	t->sealed = NULL;
	if (t->park->failed)
		t->failed = true;
	return r;
}

static void tls_streaming(struct transport *tp)
{
	struct tls_conn *t = tp->state;
	t->streaming = true;
}

static void tls_settle(struct transport *tp)
{
	struct tls_conn *t = tp->state;
	t->settled = true;
}

static const char *tls_not_ready(const struct transport *tp)
{
	const struct tls_conn *t = tp->state;
	return t->handshaking ? "TLS handshake not complete within header_timeout" : NULL;
}

static bool tls_secure(const struct transport *tp)
{
	(void)tp;
	return true;
}

const struct transport_ops transport_tls = {
	.name = "tls",
	.ready_at_accept = false,
	.coalesce = true,
	.open = tls_open,
	.read = tls_read,
	.writev = tls_writev,
	.events = tls_events,
	.on_io = tls_on_io,
	.input_pending = tls_input_pending,
	.output_pending = tls_output_pending,
	.seal_room = tls_seal_room,
	.seal = tls_seal,
	.sealed = tls_sealed,
	.streaming = tls_streaming,
	.settle = tls_settle,
	.not_ready = tls_not_ready,
	.shutdown = tls_shutdown,
	.moved = tls_moved,
	.secure = tls_secure,
	.free = tls_free,
};
