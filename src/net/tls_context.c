/* SPDX-License-Identifier: BSD-2-Clause */
/* tls_context.c: the TLS server context of tls: listeners with OpenSSL 3:
 * certificate chain and key, protocol settings, ALPN, session tickets and
 * their rotation, the reload on SIGHUP, the check of a pair before use, and
 * the heap's free pages handed back after a burst of handshakes. Each
 * connection's handshake and I/O is transport_tls.c's; parked streams'
 * records are tls_park.c's (the sealer it shares is owned here).
 *
 * Invariants:
 * - The server context is swapped on reload; every SSL holds a reference to
 *   the context it was made from, so open connections are untouched and the
 *   old context is freed with its last connection.
 * - Session-ticket keys belong to this module, not to a context: keys[0]
 *   seals new tickets, keys[1] (the one before) still opens tickets, so a
 *   ticket resumes for one to two tls_ticket_rotate periods. A loop timer
 *   rotates them; a reload keeps them. */
#include "net/tls_context.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "core/config.h"
#include "common/log.h"
#include "common/loop.h"
#include "net/tls_park.h"
#include "common/util.h"

/* TLS 1.2 suites: forward secret AEAD only. TLS 1.3 keeps OpenSSL's list. */
#define TLS12_CIPHERS "ECDHE+AESGCM:ECDHE+CHACHA20"

/* A session-ticket key: tickets carry its name, are encrypted with AES-256-CBC
 * under aes and authenticated with HMAC-SHA256 under hmac. */
struct ticket_key {
	unsigned char name[16];
	unsigned char aes[32];
	unsigned char hmac[32];
};

/* Ticket keys live here, not in an SSL_CTX, so that every context (the one
 * in service and older ones still held by open connections) uses the same
 * pair, and a reload keeps them. keys[0] seals new tickets; keys[1], the one
 * before, still opens tickets for one more period. */
struct tls_ctx {
	SSL_CTX *ssl_ctx; /* for new handshakes */
	struct ticket_key keys[2];
	bool have_previous;
	struct loop *lp;
	const struct config *cfg; /* tls_ticket_rotate, read again after a reload */
	struct loop_timer rotate_timer;
	int64_t rotate_ms; /* the period the timer was armed with; 0 = never */
	/* Handshake memory given back to the kernel (see trim_heap). */
	long handshaking;   /* handshakes in progress */
	long since_trim;    /* handshakes ended since the last trim */
	uint64_t last_trim; /* loop_now() of the last trim */
	struct loop_timer trim_timer;
	struct tls_sealer *sealer; /* shared by every parked stream */
};

const char *tls_error_text(char *buf, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	if (!e)
		snprintf(buf, len, "unknown error");
	else
		ERR_error_string_n(e, buf, len);
	ERR_clear_error();
	return buf;
}

/* Never prompt for a passphrase (a reload must not block on a terminal). */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return 0;
}

/* Choose h2 (while the http2 setting, read at each handshake, is on), then
 * http/1.1 (or http/1.0) from the client's ALPN list; a client that offers
 * only other protocols gets no_application_protocol. The connection learns
 * nothing of the choice: an h2 client opens with HTTP/2's preface, which
 * hands the connection to the HTTP/2 session. */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char with_h2[] = "\x02h2\x08http/1.1\x08http/1.0";
	const unsigned char *ours = with_h2 + 3;
	unsigned int n = sizeof(with_h2) - 1 - 3;
	const struct config *cfg = arg;
	(void)ssl;
	if (cfg && cfg->http2) {
		ours = with_h2;
		n = sizeof(with_h2) - 1;
	}
	if (SSL_select_next_proto((unsigned char **)out, outlen, ours, n, in, inlen) == OPENSSL_NPN_NEGOTIATED)
		return SSL_TLSEXT_ERR_OK;
	return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* Describe the leaf certificate of ctx: subject, expiry, SHA-256
 * fingerprint in the AB:CD:... form `openssl x509 -fingerprint` prints. */
static void describe_cert(SSL_CTX *ctx, char *out, size_t outlen, bool *expired)
{
	X509 *x = SSL_CTX_get0_certificate(ctx);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char subject[256] = "?", fp[EVP_MAX_MD_SIZE * 3 + 1] = "?", until[64] = "?";
	*expired = false;
	if (!x) {
		snprintf(out, outlen, "no certificate");
		return;
	}
	X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
	if (X509_digest(x, EVP_sha256(), md, &mdlen) == 1) {
		for (unsigned int i = 0; i < mdlen; i++)
			snprintf(fp + 3 * i, 4, "%02X%s", md[i], i + 1 < mdlen ? ":" : "");
	}
	const ASN1_TIME *na = X509_get0_notAfter(x);
	BIO *b = BIO_new(BIO_s_mem());
	if (b && ASN1_TIME_print(b, na) == 1) {
		int n = BIO_read(b, until, sizeof(until) - 1);
		until[n > 0 ? n : 0] = '\0';
	}
	BIO_free(b);
	*expired = X509_cmp_current_time(na) < 0;
	snprintf(out, outlen, "subject %s, valid until %s, sha256 %s", subject, until, fp);
}

/* Fill a ticket key from the kernel's random source. Returns 0 or -1. */
static int ticket_key_new(struct ticket_key *k)
{
	return RAND_bytes((unsigned char *)k, (int)sizeof(*k)) == 1 ? 0 : -1;
}

static int ticket_hmac_init(EVP_MAC_CTX *hctx, struct ticket_key *k)
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, k->hmac, sizeof(k->hmac)),
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	return EVP_MAC_CTX_set_params(hctx, params) == 1 ? 0 : -1;
}

/* OpenSSL's ticket key callback. Sealing (enc = 1): the current key and a
 * fresh IV. Opening: the key the ticket names; 1 for the current key, 2 for
 * the previous one (the session resumes and the client gets a ticket under
 * the current key), 0 for any other (a full handshake), -1 on error. */
static int ticket_key_cb(SSL *ssl, unsigned char name[16], unsigned char iv[EVP_MAX_IV_LENGTH], EVP_CIPHER_CTX *cctx,
			 EVP_MAC_CTX *hctx, int enc)
{
	struct tls_ctx *tc = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
	if (!tc)
		return -1;
	if (enc) {
		struct ticket_key *k = &tc->keys[0];
		if (RAND_bytes(iv, EVP_CIPHER_get_iv_length(EVP_aes_256_cbc())) != 1)
			return -1;
		memcpy(name, k->name, sizeof(k->name));
		if (EVP_EncryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv) != 1 || ticket_hmac_init(hctx, k) < 0)
			return -1;
		return 1;
	}
	for (int i = 0; i < (tc->have_previous ? 2 : 1); i++) {
		struct ticket_key *k = &tc->keys[i];
		if (memcmp(name, k->name, sizeof(k->name)) != 0)
			continue;
		if (ticket_hmac_init(hctx, k) < 0 || EVP_DecryptInit_ex(cctx, EVP_aes_256_cbc(), NULL, k->aes, iv) != 1)
			return -1;
		return i == 0 ? 1 : 2;
	}
	return 0;
}

static void rotate_tick(void *arg);

/* (Re)arm the rotation timer for the configured period, when it changed. */
static void rotate_arm(struct tls_ctx *tc)
{
	int64_t ms = tc->cfg->tls_ticket_rotate_ms;
	if (ms == tc->rotate_ms && (ms == 0 || loop_timer_active(&tc->rotate_timer)))
		return;
	tc->rotate_ms = ms;
	if (ms == 0)
		loop_timer_stop(tc->lp, &tc->rotate_timer);
	else
		loop_timer_start(tc->lp, &tc->rotate_timer, (uint64_t)ms, rotate_tick, tc);
}

/* A new current key; the current one becomes the previous one, and the
 * previous one is forgotten, so its tickets no longer resume. */
static void rotate_tick(void *arg)
{
	struct tls_ctx *tc = arg;
	struct ticket_key fresh;
	if (ticket_key_new(&fresh) < 0) {
		char buf[256];
		log_err("tls: no random bytes for a new session ticket key (%s); keeping the current one",
			tls_error_text(buf, sizeof(buf)));
	} else {
		tc->keys[1] = tc->keys[0];
		tc->keys[0] = fresh;
		tc->have_previous = true;
		OPENSSL_cleanse(&fresh, sizeof(fresh));
		log_debug("tls: session ticket key rotated; tickets from before the last rotation no longer resume");
	}
	tc->rotate_ms = 0; /* rearm for the period configured now */
	rotate_arm(tc);
}

/* Check that path names a regular file we can open (a FIFO or a device
 * would block or never end the PEM reader). Returns 0, or -1 with the
 * reason in err. */
static int check_file(const char *path, char *err, size_t errlen)
{
	struct stat st;
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s", strerror(errno));
		return -1;
	}
	int r = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) ? 0 : -1;
	if (r < 0)
		snprintf(err, errlen, "not a regular file");
	fclose(f);
	return r;
}

static int nibble(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* Put the hex secret at the end of a key log line into out (at most max
 * bytes). Returns its length, or 0 when the line does not end so. */
static uint8_t key_log_secret(const char *line, unsigned char *out, size_t max)
{
	const char *hex = strrchr(line, ' ');
	if (!hex)
		return 0;
	hex++;
	size_t n = strlen(hex) / 2;
	if (n == 0 || n > max || strlen(hex) % 2)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return 0;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return (uint8_t)n;
}

/* OpenSSL hands each secret of a handshake to this callback as a key log
 * line; only the first application traffic secrets (TLS 1.3) are kept,
 * the server's and the client's, in the session's struct tls_secret
 * (tls_context_session), for parking. Nothing is written anywhere. */
void tls_context_keylog(const SSL *ssl, const char *line)
{
	static const char server[] = "SERVER_TRAFFIC_SECRET_0 ", client[] = "CLIENT_TRAFFIC_SECRET_0 ";
	struct tls_secret *t = SSL_get_app_data(ssl);
	if (!t)
		return;
	if (strncmp(line, server, sizeof(server) - 1) == 0)
		t->len = key_log_secret(line, t->bytes, sizeof(t->bytes));
	else if (strncmp(line, client, sizeof(client) - 1) == 0)
		t->client_len = key_log_secret(line, t->client, sizeof(t->client));
}

/* Build a server context from the PEM files. Returns it, or NULL with the
 * reason in err and *bad_key telling whether the key (rather than the
 * certificate) is at fault. The reason does not repeat the file's name. */
static SSL_CTX *ctx_new(const char *cert, const char *key, char *err, size_t errlen, bool *bad_key)
{
	char buf[256];
	*bad_key = false;
	ERR_clear_error();
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		snprintf(err, errlen, "SSL_CTX_new: %s", tls_error_text(buf, sizeof(buf)));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	/* The highest version both sides have wins, so TLS 1.3 is preferred. */
	SSL_CTX_set_max_proto_version(ctx, 0);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_COMPRESSION |
					 SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* Tickets for TLS 1.2 and 1.3; they are stateless, so the server-side
	 * session cache (unbounded work per handshake, memory) stays off.
	 * Their keys are ours (ticket_key_cb), so they rotate and survive a
	 * reload. */
	SSL_CTX_clear_options(ctx, SSL_OP_NO_TICKET);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_cb);
	/* One TLS 1.3 ticket per handshake, not OpenSSL's two: a reader holds
	 * one stream, and every resumption brings it a fresh ticket. The
	 * second cost each full handshake 6% more instructions. */
	SSL_CTX_set_num_tickets(ctx, 1);
	/* Partial writes let one SSL_write end after a record; the moving
	 * buffer lets a retry come from a rebuilt iovec. Idle readers give
	 * their 16 KiB read and write buffers back. */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				      SSL_MODE_RELEASE_BUFFERS);
	SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
	SSL_CTX_set_keylog_callback(ctx, tls_context_keylog);
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
	if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) {
		snprintf(err, errlen, "cipher list: %s", tls_error_text(buf, sizeof(buf)));
		goto fail;
	}
	/* Say "No such file" or "Permission denied" rather than OpenSSL's
	 * "system lib". */
	if (check_file(cert, err, errlen) < 0)
		goto fail;
	if (check_file(key, err, errlen) < 0) {
		*bad_key = true;
		goto fail;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
		snprintf(err, errlen, "%s", tls_error_text(buf, sizeof(buf)));
		goto fail;
	}
	*bad_key = true;
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
			snprintf(err, errlen, "does not match the certificate in %s", cert);
		else
			snprintf(err, errlen, "%s", tls_error_text(buf, sizeof(buf)));
		ERR_clear_error();
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen, "does not match the certificate in %s: %s", cert,
			 tls_error_text(buf, sizeof(buf)));
		goto fail;
	}
	*bad_key = false;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/* ctx_new for the logs: the reason, prefixed with the file at fault. */
static SSL_CTX *ctx_load(const struct config *cfg, const char *cert, const char *key, char *err, size_t errlen)
{
	char why[512];
	bool bad_key;
	SSL_CTX *ctx = ctx_new(cert, key, why, sizeof(why), &bad_key);
	if (!ctx)
		snprintf(err, errlen, "%s %s: %s", bad_key ? "tls_key" : "tls_cert", bad_key ? key : cert, why);
	else /* the served context reads the http2 setting at each handshake */
		SSL_CTX_set_alpn_select_cb(ctx, select_alpn, (void *)cfg);
	return ctx;
}

int tls_check_pair(const char *cert, const char *key, char *err, size_t errlen)
{
	bool bad_key;
	SSL_CTX *ctx = ctx_new(cert, key, err, errlen, &bad_key);
	if (!ctx)
		return bad_key ? TLS_BAD_KEY : TLS_BAD_CERT;
	SSL_CTX_free(ctx);
	return 0;
}

static void log_loaded(SSL_CTX *ctx, const char *what, const char *cert)
{
	char desc[1024];
	bool expired;
	describe_cert(ctx, desc, sizeof(desc), &expired);
	log_info("tls: %s %s (%s)", what, cert, desc);
	if (expired)
		log_warn("tls: the certificate in %s has expired; clients will refuse it", cert);
}

int tls_setup(struct tls_ctx **out, struct loop *lp, const struct config *cfg)
{
	char err[600];
	*out = NULL;
	if (!cfg->tls_cert || !cfg->tls_cert[0])
		return 0;
	struct tls_ctx *tc = xcalloc(1, sizeof(*tc));
	tc->lp = lp;
	tc->cfg = cfg;
	if (ticket_key_new(&tc->keys[0]) < 0) {
		log_err("tls: no random bytes for a session ticket key: %s", tls_error_text(err, sizeof(err)));
		free(tc);
		return -1;
	}
	SSL_CTX *ctx = ctx_load(cfg, cfg->tls_cert, cfg->tls_key, err, sizeof(err));
	if (!ctx) {
		log_err("tls: %s", err);
		OPENSSL_cleanse(tc, sizeof(*tc));
		free(tc);
		return -1;
	}
	SSL_CTX_set_app_data(ctx, tc);
	tc->ssl_ctx = ctx;
	tc->sealer = tls_sealer_new();
	*out = tc;
	rotate_arm(tc);
	log_loaded(ctx, "serving", cfg->tls_cert);
	return 0;
}

int tls_reload(struct tls_ctx *tc, const struct config *cfg)
{
	char err[600];
	bool want = cfg->tls_cert && cfg->tls_cert[0];
	if (!tc) {
		if (want)
			log_warn("tls: tls_cert is new; TLS listeners start at the next restart");
		return 0;
	}
	rotate_arm(tc); /* tls_ticket_rotate may have changed */
	if (!want) {
		log_warn("tls: tls_cert is no longer set; TLS listeners keep the loaded certificate until a restart");
		return 0;
	}
	SSL_CTX *ctx = ctx_load(cfg, cfg->tls_cert, cfg->tls_key, err, sizeof(err));
	if (!ctx) {
		log_err("tls: reload refused: %s; the previous certificate stays in service", err);
		return -1;
	}
	/* The ticket keys are the module's, so sessions issued before the
	 * reload resume with the new context too. */
	SSL_CTX_set_app_data(ctx, tc);
	SSL_CTX_free(tc->ssl_ctx); /* open connections hold their own reference */
	tc->ssl_ctx = ctx;
	log_loaded(ctx, "reloaded", cfg->tls_cert);
	return 0;
}

void tls_teardown(struct tls_ctx *tc)
{
	if (!tc)
		return;
	loop_timer_stop(tc->lp, &tc->rotate_timer);
	loop_timer_stop(tc->lp, &tc->trim_timer);
	SSL_CTX_free(tc->ssl_ctx);
	tls_sealer_free(tc->sealer);
	OPENSSL_cleanse(tc->keys, sizeof(tc->keys));
	free(tc);
}

/* A handshake holds about 40 KiB for a moment (record buffers, the
 * handshake messages and hashes, key shares) and leaves about 14 KiB behind
 * for the life of the connection (the SSL object, the session, two cipher
 * contexts). After a burst of handshakes at once (a reconnect storm) the
 * freed part lies in holes between the survivors, where malloc keeps it
 * resident: about 10 KiB per connection that never returns. So once a burst
 * is over (no handshake in progress) the free pages are handed back to the
 * kernel, at most once per TRIM_GAP_MS and only after TRIM_MIN handshakes,
 * so a steady trickle of connections costs nothing. */
#define TRIM_MIN 64
#define TRIM_GAP_MS 1000

static void trim_heap(struct tls_ctx *tc)
{
#ifdef __GLIBC__
	uint64_t t0 = clock_mono_ns();
	int released = malloc_trim(0);
	log_debug("tls: %ld handshakes since the last trim; free heap pages %s (%.2f ms)", tc->since_trim,
		  released ? "returned to the kernel" : "none to return", (double)(clock_mono_ns() - t0) / 1e6);
#endif
	tc->since_trim = 0;
	tc->last_trim = loop_now(tc->lp);
}

static void trim_tick(void *arg)
{
	struct tls_ctx *tc = arg;
	if (tc->handshaking == 0 && tc->since_trim >= TRIM_MIN)
		trim_heap(tc);
}

void tls_context_handshake_ended(struct tls_ctx *tc)
{
	tc->handshaking--;
	tc->since_trim++;
	if (tc->handshaking > 0 || tc->since_trim < TRIM_MIN)
		return;
	uint64_t now = loop_now(tc->lp);
	if (now - tc->last_trim >= TRIM_GAP_MS)
		trim_heap(tc);
	else if (!loop_timer_active(&tc->trim_timer))
		loop_timer_start(tc->lp, &tc->trim_timer, tc->last_trim + TRIM_GAP_MS - now, trim_tick, tc);
}

SSL *tls_context_session(struct tls_ctx *tc, int fd, struct tls_secret *secret, const char *peer)
{
	ERR_clear_error();
	SSL *ssl = SSL_new(tc->ssl_ctx);
	if (!ssl || SSL_set_fd(ssl, fd) != 1) {
		char buf[256];
		log_warn("tls: a session for a connection from %s: %s", peer, tls_error_text(buf, sizeof(buf)));
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_accept_state(ssl);
	SSL_set_app_data(ssl, secret); /* for tls_context_keylog */
	tc->handshaking++;
	return ssl;
}

struct tls_sealer *tls_context_sealer(const struct tls_ctx *tc)
{
	return tc->sealer;
}
