/* SPDX-License-Identifier: BSD-2-Clause */
/* test_transport_tls.c: the TLS transport through its table alone, with no
 * connection around it, on a real server context (tls_setup on PEM files
 * made here) and a real OpenSSL client over a socketpair. A handshake that
 * fails comes back from on_io as a reason to close; a handshake not done
 * says so through not_ready; a finished one hands the request to read; and
 * once told it is a stream, the transport's records (parked or not) are
 * read by the client in order, up to its close_notify. A settled
 * connection (an HTTP/2 session) parks at a write and reads on: the
 * client's records after the park open under the number counted before
 * it, and a key update, which a parked session cannot follow, ends it. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "check.h"
#include "core/config.h"
#include "common/log.h"
#include "common/loop.h"
#include "net/tls_context.h"
#include "net/transport_tls.h"

static char dir[] = "/tmp/herald-test-tls-XXXXXX";
static char cert_path[64], key_path[64];

/* A self-signed P-256 pair in dir, as PEM files. */
static void write_pair(void)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, key);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
	X509_set_issuer_name(x, name);
	X509_sign(x, key, EVP_sha256());
	snprintf(cert_path, sizeof(cert_path), "%s/cert.pem", dir);
	snprintf(key_path, sizeof(key_path), "%s/key.pem", dir);
	FILE *f = fopen(cert_path, "w");
	PEM_write_X509(f, x);
	fclose(f);
	f = fopen(key_path, "w");
	PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	fclose(f);
	X509_free(x);
	EVP_PKEY_free(key);
}

static void test_failed_handshake(struct tls_ctx *tc)
{
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	struct transport t = { .ops = &transport_tls, .fd = sv[0] };
	CHECK(t.ops->open(&t, tc, "test peer") == 0);
	const char *nr = transport_not_ready(&t);
	CHECK(nr && strstr(nr, "handshake"));
	CHECK_EQ_INT(transport_events(&t, EPOLLOUT), EPOLLIN | EPOLLRDHUP); /* the handshake's own */
	char buf[64];
	CHECK_EQ_INT(transport_read(&t, buf, sizeof(buf)), -EAGAIN);
	/* A plain HTTP request on a TLS socket. */
	static const char req[] = "GET /api/health HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK(write(sv[1], req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1));
	uint32_t ev = EPOLLIN;
	char why[320] = "";
	CHECK_EQ_INT(transport_on_io(&t, &ev, why, sizeof(why)), -1);
	CHECK(strncmp(why, "TLS handshake: ", 15) == 0);
	transport_free(&t);
	CHECK(t.state == NULL);
	close(sv[0]);
	close(sv[1]);
}

/* Read n bytes of plaintext from the client, the records having been
 * written already. */
static int client_read(SSL *cli, char *buf, int n)
{
	int got = 0;
	for (int i = 0; i < 100 && got < n; i++) {
		int r = SSL_read(cli, buf + got, n - got);
		if (r > 0)
			got += r;
		else if (SSL_get_error(cli, r) != SSL_ERROR_WANT_READ)
			break;
	}
	return got;
}

/* A socketpair with the transport on sv[0] and an OpenSSL client on
 * sv[1], handshaken; the client is returned (freed by the caller with its
 * context, SSL_get_SSL_CTX). */
static SSL *handshaken(struct tls_ctx *tc, struct transport *t, int sv[2], const char *suites)
{
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	*t = (struct transport){ .ops = &transport_tls, .fd = sv[0] };
	CHECK(t->ops->open(t, tc, "test peer") == 0);
	SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
	if (suites)
		CHECK(SSL_CTX_set_ciphersuites(cctx, suites) == 1);
	SSL *cli = SSL_new(cctx);
	SSL_set_fd(cli, sv[1]);
	SSL_set_connect_state(cli);
	/* Both sides step until done; the server only through on_io, which
	 * returns EPOLLIN (read the request) once the handshake is over. */
	uint32_t ev = 0;
	int cdone = 0;
	char why[320];
	for (int i = 0; i < 100 && !(cdone && ev); i++) {
		if (!cdone)
			cdone = SSL_do_handshake(cli) == 1;
		if (!ev) {
			ev = EPOLLIN | EPOLLOUT;
			CHECK(transport_on_io(t, &ev, why, sizeof(why)) == 0);
		}
	}
	CHECK(cdone && ev == EPOLLIN);
	CHECK(transport_not_ready(t) == NULL);
	return cli;
}

static void client_free(SSL *cli)
{
	SSL_CTX *cctx = SSL_get_SSL_CTX(cli);
	SSL_free(cli);
	SSL_CTX_free(cctx);
}

/* Read exactly n bytes through the transport, which has them. */
static bool transport_read_all(struct transport *t, char *out, size_t n)
{
	static char buf[16384];
	size_t got = 0;
	for (int i = 0; i < 1000 && got < n; i++) {
		ssize_t r = transport_read(t, buf, sizeof(buf));
		if (r <= 0)
			return false;
		if (got + (size_t)r > n)
			return false;
		memcpy(out + got, buf, (size_t)r);
		got += (size_t)r;
	}
	return got == n;
}

static void test_stream(struct tls_ctx *tc)
{
	int sv[2];
	struct transport t;
	SSL *cli = handshaken(tc, &t, sv, NULL);
	static const char req[] = "GET /api/events/stream HTTP/1.1\r\nHost: x\r\n\r\n";
	CHECK(SSL_write(cli, req, sizeof(req) - 1) == (int)(sizeof(req) - 1));
	char buf[4096];
	ssize_t n = transport_read(&t, buf, sizeof(buf));
	CHECK(n == (ssize_t)(sizeof(req) - 1) && memcmp(buf, req, (size_t)n) == 0);
	CHECK(!transport_input_pending(&t));

	/* A stream now: every write reaches the client, in order. */
	transport_streaming(&t);
	static const char *const frames[] = { "HTTP/1.1 200 OK\r\n\r\nretry: 2000\n\n", "id: 1\ndata: a\n\n",
					      "id: 2\ndata: b\n\n" };
	for (int k = 0; k < 3; k++) {
		size_t len = strlen(frames[k]);
		struct iovec iov = { (void *)frames[k], len };
		CHECK_EQ_INT(transport_writev(&t, &iov, 1), len);
		CHECK(!transport_output_pending(&t));
		CHECK(client_read(cli, buf, (int)len) == (int)len && memcmp(buf, frames[k], len) == 0);
	}
	/* Two frames in one call, as a stream round writes them. */
	struct iovec two[2] = { { (void *)"id: 3\n\n", 7 }, { (void *)"id: 4\n\n", 7 } };
	CHECK_EQ_INT(transport_writev(&t, two, 2), 14);
	CHECK(client_read(cli, buf, 14) == 14 && memcmp(buf, "id: 3\n\nid: 4\n\n", 14) == 0);
	/* The goodbye is a close_notify the client reads as the end. */
	transport_shutdown(&t);
	int r = SSL_read(cli, buf, sizeof(buf));
	CHECK(r <= 0 && SSL_get_error(cli, r) == SSL_ERROR_ZERO_RETURN);
	transport_free(&t);
	client_free(cli);
	close(sv[0]);
	close(sv[1]);
}

static void test_settled_session(struct tls_ctx *tc, const char *suite, bool key_update)
{
	int sv[2];
	struct transport t;
	SSL *cli = handshaken(tc, &t, sv, suite);
	CHECK(strcmp(SSL_CIPHER_get_name(SSL_get_current_cipher(cli)), suite) == 0);
	transport_settle(&t);
	/* Twelve records before the park, read through OpenSSL: more than
	 * the few numbers tried around the count. */
	static char sent[20000], got[20000];
	size_t n = 0;
	for (int k = 0; k < 12; k++) {
		int l = snprintf(sent + n, sizeof(sent) - n, "frame %d;", k);
		CHECK(SSL_write(cli, sent + n, l) == l);
		n += (size_t)l;
	}
	CHECK(transport_read_all(&t, got, n) && memcmp(got, sent, n) == 0);
	CHECK(!transport_input_pending(&t));
	/* A write parks it; the client reads it. */
	struct iovec iov = { (void *)"settings", 8 };
	CHECK_EQ_INT(transport_writev(&t, &iov, 1), 8);
	char buf[64];
	CHECK(client_read(cli, buf, 8) == 8 && memcmp(buf, "settings", 8) == 0);
	if (key_update) {
		/* Parked, a key update cannot be followed: the read fails where
		 * OpenSSL would have read on. */
		CHECK(SSL_key_update(cli, SSL_KEY_UPDATE_NOT_REQUESTED) == 1);
		CHECK(SSL_write(cli, "x", 1) == 1);
		char big[16384];
		CHECK_EQ_INT(transport_read(&t, big, sizeof(big)), -EPROTO);
		CHECK_EQ_INT(transport_read(&t, big, sizeof(big)), -EPROTO);
	} else {
		/* Records after the park, small and full, read in order. */
		n = 0;
		for (int k = 0; k < 20; k++) {
			int l = k == 7 ? 16384 : snprintf(sent + n, sizeof(sent) - n, "after %d;", k);
			if (k == 7)
				memset(sent + n, 'f', 16384);
			CHECK(SSL_write(cli, sent + n, l) == l);
			n += (size_t)l;
		}
		CHECK(transport_read_all(&t, got, n) && memcmp(got, sent, n) == 0);
		char big[16384];
		CHECK_EQ_INT(transport_read(&t, big, sizeof(big)), -EAGAIN);
		/* Writes go on after reads. */
		iov = (struct iovec){ (void *)"ack", 3 };
		CHECK_EQ_INT(transport_writev(&t, &iov, 1), 3);
		CHECK(client_read(cli, buf, 3) == 3 && memcmp(buf, "ack", 3) == 0);
		/* The client's close_notify is the end, read as such. */
		CHECK(SSL_shutdown(cli) >= 0);
		CHECK_EQ_INT(transport_read(&t, big, sizeof(big)), 0);
	}
	transport_free(&t);
	client_free(cli);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	log_set_level(LOG_LVL_WARN);
	CHECK(mkdtemp(dir) != NULL);
	write_pair();
	struct loop *lp = loop_new();
	struct config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tls_cert = cert_path;
	cfg.tls_key = key_path;
	struct tls_ctx *tc = NULL;
	CHECK(tls_setup(&tc, lp, &cfg) == 0 && tc);
	if (tc) {
		test_failed_handshake(tc);
		test_stream(tc);
		/* Every TLS 1.3 suite parking knows, both ways. */
		static const char *const suites[] = { "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
						      "TLS_CHACHA20_POLY1305_SHA256" };
		for (int i = 0; i < 3; i++) {
			test_settled_session(tc, suites[i], false);
			test_settled_session(tc, suites[i], true);
		}
	}
	tls_teardown(tc);
	loop_free(lp);
	unlink(cert_path);
	unlink(key_path);
	rmdir(dir);
	return check_done("test_transport_tls");
}
