/* tls.c: TLS listeners with OpenSSL 3: the server context (certificate chain,
 * key, protocol settings, ALPN, session tickets), its reload on SIGHUP, and
 * each connection's non-blocking handshake, reads and writes.
 *
 * A connection's TLS states:
 *
 *   HANDSHAKING --SSL_do_handshake ok--> OPEN --SSL_shutdown--> (closed by conn)
 *        |  want read  -> EPOLLIN          |  reads and writes map
 *        |  want write -> EPOLLOUT         |  WANT_READ/WANT_WRITE to -EAGAIN
 *        |                                 |
 *        |             first write as a stream, TLS 1.3, first record matched
 *        |                                 v
 *        |                  PARKED (no SSL: key, IV, sequence; records sealed
 *        |                  here; any input ends it; close_notify sealed here)
 *        +-- error or header_timeout -> closed without close_notify
 *
 * Invariants:
 * - conn's own interest (EPOLLIN while it reads, EPOLLOUT while output is
 *   queued) is kept; tls_conn_events only swaps the direction when OpenSSL
 *   said a read must first write or a write must first read, so a socket
 *   ready in the unneeded direction cannot spin the loop.
 * - Writes encrypt directly from the shared event chunks (one SSL_write per
 *   iovec); no plaintext is copied per reader. With partial writes on,
 *   SSL_write returns after each record, and a record that met a full socket
 *   stays encrypted in OpenSSL until the same bytes are offered again
 *   (write_pending), which conn honours by never dropping that frame.
 * - Decrypted bytes can wait inside OpenSSL while the socket is empty
 *   (tls_conn_pending); conn polls them at the end of the pass.
 * - The server context is swapped on reload; every SSL holds a reference to
 *   the context it was made from, so open connections are untouched and the
 *   old context is freed with its last connection.
 * - A parked stream's sequence number only ever grows, and parking happens
 *   only after OpenSSL's own record and ours matched under it, so no nonce
 *   is used twice; a write that the socket takes in part keeps the sealed
 *   record (write_pending) exactly as OpenSSL does.
 * - Session-ticket keys belong to this module, not to a context: keys[0]
 *   seals new tickets, keys[1] (the one before) still opens tickets, so a
 *   ticket resumes for one to two tls_ticket_rotate periods. A loop timer
 *   rotates them; a reload keeps them. */
#include "tls.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "conn.h"
#include "listener.h"
#include "log.h"
#include "loop.h"
#include "util.h"

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
	/* Shared by every parked stream: the TLS 1.3 AEADs, fetched once, one
	 * cipher context, and a record's worth of room to seal into. */
	EVP_CIPHER *aead[3]; /* AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 */
	EVP_CIPHER_CTX *seal_ctx;
	EVP_MAC_CTX *hmac[2]; /* HMAC-SHA256, HMAC-SHA384, for expand_label */
	unsigned char seal_buf[16384 + 22];
};

/* A parked stream's write side (TLS 1.3 only): what OpenSSL's SSL held for
 * it, about 14 KB, reduced to the key, IV and sequence number of the
 * server's application traffic, so an idle reader costs about 100 bytes
 * here. See park(). */
struct tls_park {
	const EVP_CIPHER *cipher; /* the shared fetched cipher (tls_ctx) */
	uint64_t seq;             /* of the next record */
	uint32_t max_plain;       /* plaintext bytes per record at most (record_max) */
	unsigned char key[32];
	unsigned char iv[12];
	unsigned char *out; /* a sealed record the socket has not taken yet, or NULL */
	uint32_t out_len, out_off;
	uint32_t out_plain; /* the plaintext bytes it carries */
};

struct tls_conn {
	SSL *ssl; /* NULL once parked */
	struct tls_ctx *tc;
	struct tls_park *park;
	unsigned char secret[48]; /* the server's application traffic secret, until parked */
	uint8_t secret_len;
	bool no_park; /* parking was tried, or cannot be */
	bool handshaking;
	bool hs_wants_write;   /* the handshake waits for EPOLLOUT (else EPOLLIN) */
	bool read_wants_write; /* the last SSL_read needs the socket writable */
	bool write_wants_read; /* the last SSL_write needs input first */
	bool write_pending;    /* a record is encrypted but not yet sent */
	bool failed;           /* a fatal error: no close_notify */
	bool shut_sent;
};

/* The newest OpenSSL error as text ("unknown" when the queue is empty),
 * emptying the queue so it cannot be blamed on another connection. */
static const char *ssl_error_text(char *buf, size_t len)
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

/* Choose http/1.1 (or http/1.0) from the client's ALPN list; a client that
 * offers only other protocols (say h2) gets no_application_protocol. */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
		       unsigned int inlen, void *arg)
{
	static const unsigned char ours[] = "\x08http/1.1\x08http/1.0";
	(void)ssl;
	(void)arg;
	if (SSL_select_next_proto((unsigned char **)out, outlen, ours, sizeof(ours) - 1, in, inlen) ==
	    OPENSSL_NPN_NEGOTIATED)
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
			ssl_error_text(buf, sizeof(buf)));
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

/* OpenSSL hands each secret of a handshake to this callback as a key log
 * line; only the server's first application traffic secret (TLS 1.3) is
 * kept, in the connection, for park(). Nothing is written anywhere. */
static void keylog_cb(const SSL *ssl, const char *line)
{
	static const char want[] = "SERVER_TRAFFIC_SECRET_0 ";
	struct tls_conn *t = SSL_get_app_data(ssl);
	if (!t || strncmp(line, want, sizeof(want) - 1) != 0)
		return;
	const char *hex = strchr(line + sizeof(want) - 1, ' ');
	if (!hex)
		return;
	hex++;
	size_t n = strlen(hex) / 2;
	if (n > sizeof(t->secret) || strlen(hex) % 2)
		return;
	for (size_t i = 0; i < n; i++) {
		int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return;
		t->secret[i] = (unsigned char)(hi << 4 | lo);
	}
	t->secret_len = (uint8_t)n;
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
		snprintf(err, errlen, "SSL_CTX_new: %s", ssl_error_text(buf, sizeof(buf)));
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
	SSL_CTX_set_keylog_callback(ctx, keylog_cb);
	SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
	if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) {
		snprintf(err, errlen, "cipher list: %s", ssl_error_text(buf, sizeof(buf)));
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
		snprintf(err, errlen, "%s", ssl_error_text(buf, sizeof(buf)));
		goto fail;
	}
	*bad_key = true;
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
			snprintf(err, errlen, "does not match the certificate in %s", cert);
		else
			snprintf(err, errlen, "%s", ssl_error_text(buf, sizeof(buf)));
		ERR_clear_error();
		goto fail;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		snprintf(err, errlen, "does not match the certificate in %s: %s", cert,
			 ssl_error_text(buf, sizeof(buf)));
		goto fail;
	}
	*bad_key = false;
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/* ctx_new for the logs: the reason, prefixed with the file at fault. */
static SSL_CTX *ctx_load(const char *cert, const char *key, char *err, size_t errlen)
{
	char why[512];
	bool bad_key;
	SSL_CTX *ctx = ctx_new(cert, key, why, sizeof(why), &bad_key);
	if (!ctx)
		snprintf(err, errlen, "%s %s: %s", bad_key ? "tls_key" : "tls_cert", bad_key ? key : cert, why);
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
		log_err("tls: no random bytes for a session ticket key: %s", ssl_error_text(err, sizeof(err)));
		free(tc);
		return -1;
	}
	SSL_CTX *ctx = ctx_load(cfg->tls_cert, cfg->tls_key, err, sizeof(err));
	if (!ctx) {
		log_err("tls: %s", err);
		OPENSSL_cleanse(tc, sizeof(*tc));
		free(tc);
		return -1;
	}
	SSL_CTX_set_app_data(ctx, tc);
	tc->ssl_ctx = ctx;
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
	SSL_CTX *ctx = ctx_load(cfg->tls_cert, cfg->tls_key, err, sizeof(err));
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
	for (int i = 0; i < 3; i++)
		EVP_CIPHER_free(tc->aead[i]);
	EVP_CIPHER_CTX_free(tc->seal_ctx);
	EVP_MAC_CTX_free(tc->hmac[0]);
	EVP_MAC_CTX_free(tc->hmac[1]);
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

/* A handshake ended (done, failed, or its connection closed). */
static void handshake_ended(struct tls_ctx *tc)
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

/* ---- parked streams ------------------------------------------------------
 *
 * An open stream only writes: its input is read and dropped until the
 * client goes. Such a connection needs from TLS only the sealing of its
 * records, so on its first write as a stream (TLS 1.3 only) the session is
 * parked: the server's traffic key and IV (derived from the secret the key
 * log callback kept, RFC 8446 7.1-7.3) and the record sequence number are
 * kept, and the SSL object is freed.
 *
 * OpenSSL does not tell the sequence number. So the first record is sealed
 * twice: by OpenSSL into a memory BIO, and here with each sequence number
 * a few records back from the start; only when the two match byte for
 * byte, which also proves key, IV and cipher, is the SSL freed. Otherwise
 * the connection keeps its SSL (and that record goes out as OpenSSL made
 * it), so a nonce is never used twice.
 *
 * Parked, any input other than the end of the stream (close_notify, a key
 * update) cannot be read and ends the connection; the reader resumes from
 * its Last-Event-ID like after any drop. */

#define PARK_SEQ_TRIES 8
/* Records under one AES-GCM key stay far below the limit of RFC 8446 5.5;
 * a stream that reaches this many is ended, and the client reconnects. */
#define PARK_SEQ_MAX (UINT64_C(1) << 24)

/* HKDF-Expand-Label(secret, label, "", len) of RFC 8446 7.1, for len up to
 * the hash's size: one HMAC block, T(1) = HMAC(secret, HkdfLabel || 1),
 * with an HMAC context kept per hash (OpenSSL's HKDF object costs ten
 * times as much to set up per call). */
static int expand_label(struct tls_ctx *tc, int sha384, const unsigned char *secret, size_t slen, const char *label,
			unsigned char *out, size_t len)
{
	unsigned char info[32], block[EVP_MAX_MD_SIZE];
	size_t ll = strlen(label), blen = 0;
	info[0] = (unsigned char)(len >> 8);
	info[1] = (unsigned char)len;
	info[2] = (unsigned char)(6 + ll);
	memcpy(info + 3, "tls13 ", 6);
	memcpy(info + 9, label, ll);
	info[9 + ll] = 0;  /* no context */
	info[10 + ll] = 1; /* the block counter */
	EVP_MAC_CTX **m = &tc->hmac[sha384];
	if (!*m) {
		EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
		OSSL_PARAM params[] = {
			OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)(sha384 ? "SHA384" : "SHA256"),
							 0),
			OSSL_PARAM_construct_end(),
		};
		*m = mac ? EVP_MAC_CTX_new(mac) : NULL;
		EVP_MAC_free(mac); /* the context holds its own reference */
		if (*m && EVP_MAC_CTX_set_params(*m, params) != 1) {
			EVP_MAC_CTX_free(*m);
			*m = NULL;
		}
		if (!*m)
			return -1;
	}
	int ok = EVP_MAC_init(*m, secret, slen, NULL) == 1 && EVP_MAC_update(*m, info, 11 + ll) == 1 &&
		 EVP_MAC_final(*m, block, &blen, sizeof(block)) == 1 && blen >= len;
	if (ok)
		memcpy(out, block, len);
	OPENSSL_cleanse(block, sizeof(block));
	return ok ? 0 : -1;
}

/* Seal n bytes (at most the session's record_max) of content type `type`
 * as one TLS 1.3 record with sequence number seq into tc->seal_buf.
 * Returns the record's length, or -1. */
static int seal(struct tls_ctx *tc, const struct tls_park *pk, uint64_t seq, unsigned char type, const unsigned char *p,
		size_t n)
{
	unsigned char *out = tc->seal_buf, nonce[12];
	size_t clen = n + 1 + 16;
	int len;
	out[0] = 0x17; /* application_data, as every TLS 1.3 record */
	out[1] = 3;
	out[2] = 3;
	out[3] = (unsigned char)(clen >> 8);
	out[4] = (unsigned char)clen;
	memcpy(nonce, pk->iv, sizeof(nonce));
	for (int i = 0; i < 8; i++)
		nonce[11 - i] ^= (unsigned char)(seq >> (8 * i));
	EVP_CIPHER_CTX *cx = tc->seal_ctx;
	if (EVP_EncryptInit_ex(cx, pk->cipher, NULL, pk->key, nonce) != 1 ||
	    EVP_EncryptUpdate(cx, NULL, &len, out, 5) != 1 || EVP_EncryptUpdate(cx, out + 5, &len, p, (int)n) != 1 ||
	    len != (int)n || EVP_EncryptUpdate(cx, out + 5 + n, &len, &type, 1) != 1 || len != 1 ||
	    EVP_EncryptFinal_ex(cx, out + 6 + n, &len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_AEAD_GET_TAG, 16, out + 6 + n) != 1)
		return -1;
	return (int)(5 + clen);
}

/* The most plaintext one record of ssl's session may carry: 2^14, or the
 * maximum fragment length the client negotiated (RFC 6066: 512 to 4096;
 * OpenSSL 3.0 has no record_size_limit). Parking keeps such a session and
 * seals to this bound, as OpenSSL does, rather than refusing it: the first
 * record still matches OpenSSL's byte for byte, and the stream costs what
 * any parked one does. */
static uint32_t record_max(const SSL *ssl)
{
	const SSL_SESSION *sess = SSL_get0_session(ssl);
	uint8_t mode = sess ? SSL_SESSION_get_max_fragment_length(sess) : TLSEXT_max_fragment_length_DISABLED;
	if (mode >= TLSEXT_max_fragment_length_512 && mode <= TLSEXT_max_fragment_length_4096)
		return UINT32_C(256) << mode; /* 512 << (mode - 1) */
	return 16384;
}

/* The key and IV of t's session from its secret; NULL when its cipher is
 * not one parking knows, or OpenSSL fails. */
static struct tls_park *park_keys(struct tls_conn *t)
{
	struct tls_ctx *tc = t->tc;
	const SSL_CIPHER *c = SSL_get_current_cipher(t->ssl);
	int which, sha384 = 0;
	size_t keylen;
	switch (c ? SSL_CIPHER_get_id(c) : 0) {
	case 0x03001301: /* TLS_AES_128_GCM_SHA256 */
		which = 0, keylen = 16;
		break;
	case 0x03001302: /* TLS_AES_256_GCM_SHA384 */
		which = 1, keylen = 32, sha384 = 1;
		break;
	case 0x03001303: /* TLS_CHACHA20_POLY1305_SHA256 */
		which = 2, keylen = 32;
		break;
	default:
		return NULL;
	}
	static const char *const names[3] = { "AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305" };
	if (!tc->aead[which])
		tc->aead[which] = EVP_CIPHER_fetch(NULL, names[which], NULL);
	if (!tc->seal_ctx)
		tc->seal_ctx = EVP_CIPHER_CTX_new();
	if (!tc->aead[which] || !tc->seal_ctx || t->secret_len != (sha384 ? 48 : 32))
		return NULL;
	struct tls_park *pk = xcalloc(1, sizeof(*pk));
	pk->cipher = tc->aead[which];
	pk->max_plain = record_max(t->ssl);
	if (expand_label(tc, sha384, t->secret, t->secret_len, "key", pk->key, keylen) < 0 ||
	    expand_label(tc, sha384, t->secret, t->secret_len, "iv", pk->iv, sizeof(pk->iv)) < 0) {
		OPENSSL_cleanse(pk, sizeof(*pk));
		free(pk);
		return NULL;
	}
	return pk;
}

/* Keep a sealed record's unsent tail (rec[off..len)) carrying plain
 * plaintext bytes; the caller offers those bytes again (write_pending). */
static void park_hold(struct tls_conn *t, const unsigned char *rec, size_t len, size_t off, size_t plain)
{
	struct tls_park *pk = t->park;
	pk->out = xmalloc(len - off);
	memcpy(pk->out, rec + off, len - off);
	pk->out_len = (uint32_t)(len - off);
	pk->out_off = 0;
	pk->out_plain = (uint32_t)plain;
	t->write_pending = true;
}

/* Write the held record. Returns its plaintext count once all of it is
 * sent, -EAGAIN while the socket is full, or -errno. */
static ssize_t park_flush(struct conn *c)
{
	struct tls_park *pk = c->tls->park;
	while (pk->out_off < pk->out_len) {
		ssize_t w = write(c->fd, pk->out + pk->out_off, pk->out_len - pk->out_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		pk->out_off += (uint32_t)w;
	}
	free(pk->out);
	pk->out = NULL;
	pk->out_len = pk->out_off = 0;
	c->tls->write_pending = false;
	return pk->out_plain;
}

/* Try to park c (see above), sealing the first record from p (n bytes, at
 * most record_max) on the way. Returns the plaintext bytes that record took
 * (the record then sits in pk->out, or OpenSSL's buffers if parking did
 * not work out and t->park is NULL), or 0 when parking was not tried. */
static size_t park(struct conn *c, const unsigned char *p, size_t n)
{
	struct tls_conn *t = c->tls;
	t->no_park = true; /* once */
	if (SSL_version(t->ssl) != TLS1_3_VERSION || t->secret_len == 0 || SSL_has_pending(t->ssl) ||
	    SSL_get_shutdown(t->ssl))
		return 0;
	struct tls_park *pk = park_keys(t);
	OPENSSL_cleanse(t->secret, sizeof(t->secret));
	t->secret_len = 0;
	if (!pk)
		return 0;
	BIO *sock = SSL_get_wbio(t->ssl), *mem = BIO_new(BIO_s_mem());
	if (!mem || BIO_up_ref(sock) != 1) {
		BIO_free(mem);
		free(pk);
		return 0;
	}
	SSL_set0_wbio(t->ssl, mem);
	ERR_clear_error();
	int w = SSL_write(t->ssl, p, (int)n);
	char *made = NULL;
	long made_len = BIO_get_mem_data(mem, &made);
	bool match = false;
	if (w == (int)n && made_len == (long)n + 22) {
		/* One ticket record usually went first under this key: 1 first. */
		for (uint64_t k = 0; k < PARK_SEQ_TRIES && !match; k++) {
			uint64_t seq = k == 0 ? 1 : k == 1 ? 0 : k;
			int r = seal(t->tc, pk, seq, 0x17, p, n);
			if (r == made_len && memcmp(t->tc->seal_buf, made, (size_t)r) == 0) {
				pk->seq = seq + 1;
				match = true;
			}
		}
	}
	if (w <= 0) {
		/* Nothing was sealed: leave the session as it was. */
		ERR_clear_error();
		SSL_set0_wbio(t->ssl, sock);
		OPENSSL_cleanse(pk, sizeof(*pk));
		free(pk);
		return 0;
	}
	/* OpenSSL's record goes out either way, held until the socket takes it. */
	t->park = pk;
	park_hold(t, (const unsigned char *)made, (size_t)made_len, 0, (size_t)w);
	if (match) {
		BIO_free(sock); /* the reference taken above; the SSL frees its own */
		SSL_free(t->ssl);
		t->ssl = NULL;
		log_debug("tls: stream from %s parked (sequence %llu)", c->peer, (unsigned long long)pk->seq);
		return (size_t)w;
	}
	/* Keep the SSL; the record it made still leaves through the hold. */
	SSL_set0_wbio(t->ssl, sock);
	log_debug("tls: stream from %s not parked: its first record did not match", c->peer);
	return (size_t)w;
}

/* Writes of a parked stream (or the record held while parking failed).
 * Same contract as tls_conn_writev. */
static ssize_t park_writev(struct conn *c, const struct iovec *iov, int n)
{
	struct tls_conn *t = c->tls;
	struct tls_park *pk = t->park;
	size_t done = 0, skip = 0;
	if (pk->out) {
		ssize_t r = park_flush(c);
		if (r < 0)
			return r == -EAGAIN || r == -EWOULDBLOCK ? -EAGAIN : r;
		done = skip = (size_t)r; /* those bytes are the first offered */
		if (t->ssl) {
			/* Parking failed: the SSL carries on from here. */
			OPENSSL_cleanse(pk, sizeof(*pk));
			free(pk);
			t->park = NULL;
			return (ssize_t)done;
		}
	}
	for (int i = 0; i < n; i++) {
		const unsigned char *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;
		if (skip) {
			size_t k = skip < left ? skip : left;
			p += k, left -= k, skip -= k;
		}
		while (left) {
			size_t chunk = left < pk->max_plain ? left : pk->max_plain;
			if (pk->seq >= PARK_SEQ_MAX)
				return done ? (ssize_t)done : -EPIPE;
			int rl = seal(t->tc, pk, pk->seq, 0x17, p, chunk);
			if (rl < 0) {
				t->failed = true;
				return done ? (ssize_t)done : -EPIPE;
			}
			pk->seq++;
			ssize_t w = write(c->fd, t->tc->seal_buf, (size_t)rl);
			if (w == rl) {
				done += chunk, p += chunk, left -= chunk;
				continue;
			}
			if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				int e = errno;
				t->failed = true;
				return done ? (ssize_t)done : -e;
			}
			park_hold(t, t->tc->seal_buf, (size_t)rl, w > 0 ? (size_t)w : 0, chunk);
			return done ? (ssize_t)done : -EAGAIN;
		}
	}
	return (ssize_t)done;
}

static void park_free(struct tls_conn *t)
{
	if (!t->park)
		return;
	free(t->park->out);
	OPENSSL_cleanse(t->park, sizeof(*t->park));
	free(t->park);
	t->park = NULL;
}

int tls_conn_start(struct conn *c, struct listener *ls)
{
	struct tls_ctx *tc = ls->tls;
	ERR_clear_error();
	SSL *ssl = SSL_new(tc->ssl_ctx);
	if (!ssl || SSL_set_fd(ssl, c->fd) != 1) {
		char buf[256];
		log_warn("tls: a session for a connection from %s: %s", c->peer, ssl_error_text(buf, sizeof(buf)));
		SSL_free(ssl);
		return -1;
	}
	SSL_set_accept_state(ssl);
	struct tls_conn *t = xcalloc(1, sizeof(*t));
	t->ssl = ssl;
	t->tc = tc;
	SSL_set_app_data(ssl, t); /* for keylog_cb */
	t->handshaking = true;
	tc->handshaking++;
	c->tls = t;
	return 0;
}

void tls_conn_free(struct conn *c)
{
	struct tls_conn *t = c->tls;
	if (!t)
		return;
	tls_conn_shutdown(c);
	SSL_free(t->ssl);
	park_free(t);
	OPENSSL_cleanse(t->secret, sizeof(t->secret));
	if (t->handshaking)
		handshake_ended(t->tc);
	free(t);
	c->tls = NULL;
}

bool tls_conn_handshaking(const struct conn *c)
{
	return c->tls->handshaking;
}

static void handshake(struct conn *c)
{
	struct tls_conn *t = c->tls;
	char buf[256], why[320];
	ERR_clear_error();
	int r = SSL_do_handshake(t->ssl);
	if (r == 1) {
		t->handshaking = false;
		handshake_ended(t->tc);
		log_debug("tls: %s from %s%s", SSL_get_version(t->ssl), c->peer,
			  SSL_session_reused(t->ssl) ? " (resumed)" : "");
		return;
	}
	int saved = errno;
	switch (SSL_get_error(t->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		t->hs_wants_write = false;
		return;
	case SSL_ERROR_WANT_WRITE:
		t->hs_wants_write = true;
		return;
	case SSL_ERROR_SYSCALL:
		snprintf(why, sizeof(why), "TLS handshake: %s",
			 ERR_peek_last_error() ? ssl_error_text(buf, sizeof(buf))
			 : saved               ? strerror(saved)
					       : "connection closed");
		break;
	default:
		snprintf(why, sizeof(why), "TLS handshake: %s", ssl_error_text(buf, sizeof(buf)));
		break;
	}
	t->failed = true;
	ERR_clear_error();
	conn_close(c, why);
}

uint32_t tls_conn_on_io(struct conn *c, uint32_t events)
{
	struct tls_conn *t = c->tls;
	if (t->handshaking) {
		handshake(c);
		if (c->state == CONN_CLOSED)
			return 0;
		if (t->handshaking) {
			conn_update_events(c);
			return 0;
		}
		/* The request may have come with the client's last flight. */
		return EPOLLIN;
	}
	uint32_t ev = events;
	if (t->read_wants_write && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		t->read_wants_write = false;
		ev |= EPOLLIN;
	}
	if (t->write_wants_read && (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
		t->write_wants_read = false;
		ev |= EPOLLOUT;
	}
	return ev;
}

ssize_t tls_conn_read(struct conn *c, void *buf, size_t len)
{
	struct tls_conn *t = c->tls;
	if (t->handshaking)
		return -EAGAIN;
	if (t->failed)
		return -EPROTO;
	if (!t->ssl) {
		/* Parked: the end of the stream reads as such; anything else
		 * (an alert, a key update) cannot be read and ends it too. */
		ssize_t r = read(c->fd, buf, len);
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

ssize_t tls_conn_writev(struct conn *c, const struct iovec *iov, int n)
{
	struct tls_conn *t = c->tls;
	size_t done = 0;
	if (t->handshaking)
		return -EAGAIN;
	if (t->failed)
		return -EPIPE;
	if (!t->park && !t->no_park && c->state == CONN_STREAMING && !t->write_pending && n > 0 && iov[0].iov_len) {
		size_t first = MIN(iov[0].iov_len, (size_t)record_max(t->ssl));
		park(c, iov[0].iov_base, first);
	}
	if (t->park)
		return park_writev(c, iov, n);
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

uint32_t tls_conn_events(const struct conn *c, uint32_t wanted)
{
	const struct tls_conn *t = c->tls;
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

bool tls_conn_pending(const struct conn *c)
{
	const struct tls_conn *t = c->tls;
	return !t->handshaking && !t->failed && t->ssl && SSL_pending(t->ssl) > 0;
}

bool tls_conn_write_pending(const struct conn *c)
{
	return c->tls->write_pending;
}

void tls_conn_shutdown(struct conn *c)
{
	struct tls_conn *t = c->tls;
	if (t->handshaking || t->failed || t->shut_sent)
		return;
	t->shut_sent = true;
	if (!t->ssl) {
		/* Parked: a close_notify alert of our own, unless a record is
		 * still half on the wire; one try. */
		static const unsigned char close_notify[2] = { 1, 0 };
		struct tls_park *pk = t->park;
		if (!pk->out && pk->seq < PARK_SEQ_MAX) {
			int rl = seal(t->tc, pk, pk->seq, 0x15, close_notify, sizeof(close_notify));
			if (rl > 0) {
				pk->seq++;
				ssize_t w = write(c->fd, t->tc->seal_buf, (size_t)rl);
				(void)w;
			}
		}
		return;
	}
	ERR_clear_error();
	SSL_shutdown(t->ssl); /* one try; the socket is not waited on for it */
	ERR_clear_error();
}
