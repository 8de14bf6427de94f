/* SPDX-License-Identifier: BSD-2-Clause */
/* test_tls_park.c: the record sealer of parked TLS streams. Its key
 * schedule and record protection against the example trace of RFC 8448
 * (section 3, the simple 1-RTT handshake); its records byte for byte
 * against OpenSSL's own for each TLS 1.3 suite, on a real handshake over a
 * socketpair; the end of the sequence at PARK_SEQ_MAX; and writes through a
 * socket that takes records in part, where every record must open under
 * the next sequence number and nothing may be lost or repeated; and the
 * reader of a session parked reading on: records split anywhere, padding,
 * the first record found near the counted number and only there, records
 * that wait for room, close_notify, and what it must refuse. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "check.h"
#include "net/tls_context.h"
#include "net/tls_park.h"
#include "common/util.h"

/* Hex (spaces allowed) to bytes; returns the count. */
static size_t unhex(const char *h, unsigned char *out, size_t cap)
{
	size_t n = 0;
	while (*h && n < cap) {
		if (*h == ' ' || *h == '\n') {
			h++;
			continue;
		}
		unsigned v;
		if (sscanf(h, "%2x", &v) != 1)
			break;
		out[n++] = (unsigned char)v;
		h += 2;
	}
	return n;
}

/* Open a record pk sealed under seq: its inner plaintext (without the
 * content type) into out; returns its length, or -1. */
static int open_record(const struct tls_park *pk, uint64_t seq, const unsigned char *rec, size_t len,
		       unsigned char *out, unsigned char *type)
{
	if (len < 5 + 1 + 16 || (size_t)(rec[3] << 8 | rec[4]) != len - 5)
		return -1;
	unsigned char nonce[12];
	memcpy(nonce, pk->iv, 12);
	for (int i = 0; i < 8; i++)
		nonce[11 - i] ^= (unsigned char)(seq >> (8 * i));
	EVP_CIPHER_CTX *cx = EVP_CIPHER_CTX_new();
	int n = 0, f = 0;
	size_t clen = len - 5 - 16;
	int ok = EVP_DecryptInit_ex(cx, pk->cipher, NULL, pk->key, nonce) == 1 &&
		 EVP_DecryptUpdate(cx, NULL, &n, rec, 5) == 1 &&
		 EVP_DecryptUpdate(cx, out, &n, rec + 5, (int)clen) == 1 &&
		 EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_AEAD_SET_TAG, 16, (void *)(rec + len - 16)) == 1 &&
		 EVP_DecryptFinal_ex(cx, out + n, &f) == 1;
	EVP_CIPHER_CTX_free(cx);
	if (!ok || n + f < 1)
		return -1;
	*type = out[n + f - 1];
	return n + f - 1;
}

/* ---- (a) RFC 8448, section 3 ---- */

static void test_rfc8448(void)
{
	unsigned char secret[32], key[16], iv[12], plain[50], want[80];
	unhex("a1 1a f9 f0 55 31 f8 56 ad 47 11 6b 45 a9 50 32 82 04 b4 f4 4b fb 6b 3a 4b 4f 1f 3f cb 63 16 43", secret,
	      sizeof(secret));
	unhex("9f 02 28 3b 6c 9c 07 ef c2 6b b9 f2 ac 92 e3 56", key, sizeof(key));
	unhex("cf 78 2b 88 dd 83 54 9a ad f1 e9 84", iv, sizeof(iv));
	for (int i = 0; i < 50; i++)
		plain[i] = (unsigned char)i;
	/* {server} send application_data record: the second record under
	 * the server's application key (the NewSessionTicket went first). */
	size_t wn = unhex("17 03 03 00 43 2e 93 7e 11 ef 4a c7 40 e5 38 ad 36 00 5f c4 a4 69 32 fc 32 25 d0 5f"
			  " 82 aa 1b 36 e3 0e fa f9 7d 90 e6 df fc 60 2d cb 50 1a 59 a8 fc c4 9c 4b f2 e5 f0 a2"
			  " 1c 00 47 c2 ab f3 32 54 0d d0 32 e1 67 c2 95 5d",
			  want, sizeof(want));
	CHECK_EQ_INT(wn, 72);

	struct tls_sealer *s = tls_sealer_new();
	struct tls_park *pk = tls_park_new(s, TLS_PARK_AES_128_GCM_SHA256, secret, sizeof(secret), 16384);
	CHECK(pk != NULL);
	if (!pk) {
		tls_sealer_free(s);
		return;
	}
	CHECK(memcmp(pk->key, key, sizeof(key)) == 0);
	CHECK(memcmp(pk->iv, iv, sizeof(iv)) == 0);
	const unsigned char *rec;
	int rl = tls_park_seal(s, pk, 1, 0x17, plain, sizeof(plain), &rec);
	CHECK_EQ_INT(rl, 72);
	CHECK(rl == 72 && memcmp(rec, want, 72) == 0);
	/* The same record under another number is another record. */
	rl = tls_park_seal(s, pk, 0, 0x17, plain, sizeof(plain), &rec);
	CHECK(rl == 72 && memcmp(rec, want, 72) != 0);
	/* A secret of the wrong size, or a suite parking does not know. */
	CHECK(tls_park_new(s, TLS_PARK_AES_256_GCM_SHA384, secret, sizeof(secret), 16384) == NULL);
	CHECK(tls_park_new(s, 0x1304, secret, sizeof(secret), 16384) == NULL);
	tls_park_free(pk);
	tls_sealer_free(s);
}

/* ---- (b) byte for byte against OpenSSL ---- */

/* A self-signed P-256 certificate and its key, made here. */
static X509 *make_cert(EVP_PKEY **key)
{
	*key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	X509_set_version(x, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, *key);
	X509_NAME *name = X509_get_subject_name(x);
	X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
	X509_set_issuer_name(x, name);
	X509_sign(x, *key, EVP_sha256());
	return x;
}

/* Read what the socket has now (bounded by cap). */
static size_t read_now(int fd, unsigned char *buf, size_t cap)
{
	size_t n = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	return n;
}

/* The last whole record in buf[0..n): its offset and length. */
static int last_record(const unsigned char *buf, size_t n, size_t *off, size_t *len)
{
	size_t p = 0;
	int found = -1;
	while (p + 5 <= n) {
		size_t l = 5 + (size_t)(buf[p + 3] << 8 | buf[p + 4]);
		if (p + l > n)
			break;
		*off = p, *len = l, found = 0;
		p += l;
	}
	return found;
}

static void test_openssl_suite(const char *name, unsigned suite, X509 *cert, EVP_PKEY *key)
{
	SSL_CTX *sctx = SSL_CTX_new(TLS_server_method()), *cctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_use_certificate(sctx, cert);
	SSL_CTX_use_PrivateKey(sctx, key);
	SSL_CTX_set_min_proto_version(sctx, TLS1_3_VERSION);
	SSL_CTX_set_min_proto_version(cctx, TLS1_3_VERSION);
	CHECK(SSL_CTX_set_ciphersuites(sctx, name) == 1);
	CHECK(SSL_CTX_set_ciphersuites(cctx, name) == 1);
	SSL_CTX_set_keylog_callback(sctx, tls_context_keylog);
	SSL_CTX_set_num_tickets(sctx, 1); /* as herald: one ticket record first */
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	SSL *srv = SSL_new(sctx), *cli = SSL_new(cctx);
	struct tls_secret sec = { .len = 0 };
	SSL_set_app_data(srv, &sec);
	SSL_set_fd(srv, sv[0]);
	SSL_set_fd(cli, sv[1]);
	SSL_set_accept_state(srv);
	SSL_set_connect_state(cli);
	int sdone = 0, cdone = 0;
	for (int i = 0; i < 1000 && !(sdone && cdone); i++) {
		if (!cdone)
			cdone = SSL_do_handshake(cli) == 1;
		if (!sdone)
			sdone = SSL_do_handshake(srv) == 1;
	}
	CHECK(sdone && cdone);
	CHECK(SSL_version(srv) == TLS1_3_VERSION);
	CHECK(sec.len == (suite == TLS_PARK_AES_256_GCM_SHA384 ? 48 : 32));

	static unsigned char raw[65536];
	read_now(sv[1], raw, sizeof(raw)); /* the ticket, if it left already */
	static const char msg1[] = "retry: 2000\n: herald stream\n\n";
	CHECK(SSL_write(srv, msg1, (int)strlen(msg1)) == (int)strlen(msg1));
	size_t n = read_now(sv[1], raw, sizeof(raw)), off = 0, len = 0;
	CHECK(last_record(raw, n, &off, &len) == 0);

	struct tls_sealer *s = tls_sealer_new();
	struct tls_park *pk = tls_park_new(s, suite, sec.bytes, sec.len, tls_park_record_max(srv));
	CHECK(pk != NULL);
	if (pk) {
		/* The first record matches under number 1 (the ticket had 0). */
		CHECK(tls_park_match(s, pk, raw + off, len, msg1, strlen(msg1)) == 0);
		CHECK_EQ_INT(pk->seq, 2);
		/* Every later record is OpenSSL's, byte for byte: a short one
		 * and a full one. */
		static unsigned char big[16384];
		for (size_t i = 0; i < sizeof(big); i++)
			big[i] = (unsigned char)('a' + i % 26);
		const unsigned char *rec;
		for (int k = 0; k < 2; k++) {
			const void *p = k == 0 ? (const void *)"id: 1\ndata: x\n\n" : (const void *)big;
			size_t pn = k == 0 ? 15 : sizeof(big);
			CHECK(SSL_write(srv, p, (int)pn) == (int)pn);
			n = read_now(sv[1], raw, sizeof(raw));
			int rl = tls_park_seal(s, pk, pk->seq, 0x17, p, pn, &rec);
			CHECK(rl > 0 && (size_t)rl == n && memcmp(rec, raw, n) == 0);
			pk->seq++;
		}
		/* A close_notify of ours is what OpenSSL sends. */
		tls_park_close_notify(s, pk, sv[0]);
		size_t mine = read_now(sv[1], raw, sizeof(raw));
		static unsigned char theirs[256];
		SSL_shutdown(srv);
		CHECK(read_now(sv[1], theirs, sizeof(theirs)) == mine && memcmp(raw, theirs, mine) == 0);
	}
	tls_park_free(pk);
	tls_sealer_free(s);
	SSL_free(srv);
	SSL_free(cli);
	SSL_CTX_free(sctx);
	SSL_CTX_free(cctx);
	close(sv[0]);
	close(sv[1]);
}

static void test_openssl(void)
{
	EVP_PKEY *key;
	X509 *cert = make_cert(&key);
	test_openssl_suite("TLS_AES_128_GCM_SHA256", TLS_PARK_AES_128_GCM_SHA256, cert, key);
	test_openssl_suite("TLS_AES_256_GCM_SHA384", TLS_PARK_AES_256_GCM_SHA384, cert, key);
	test_openssl_suite("TLS_CHACHA20_POLY1305_SHA256", TLS_PARK_CHACHA20_POLY1305_SHA256, cert, key);
	X509_free(cert);
	EVP_PKEY_free(key);
}

/* ---- (c) the end of the sequence ---- */

static struct tls_park *some_park(struct tls_sealer *s, uint32_t max_plain)
{
	unsigned char secret[32];
	for (int i = 0; i < 32; i++)
		secret[i] = (unsigned char)(7 * i + 1);
	return tls_park_new(s, TLS_PARK_AES_128_GCM_SHA256, secret, sizeof(secret), max_plain);
}

static void test_seq_max(void)
{
	struct tls_sealer *s = tls_sealer_new();
	struct tls_park *pk = some_park(s, 512);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	static unsigned char plain[1000], raw[4096], back[1024];
	memset(plain, 'e', sizeof(plain));
	pk->seq = PARK_SEQ_MAX - 1;
	struct iovec iov = { plain, sizeof(plain) };
	/* The last number seals one record; the rest is refused. */
	CHECK_EQ_INT(tls_park_writev(s, pk, sv[0], &iov, 1), 512);
	CHECK(pk->seq == PARK_SEQ_MAX);
	iov = (struct iovec){ plain + 512, sizeof(plain) - 512 };
	CHECK_EQ_INT(tls_park_writev(s, pk, sv[0], &iov, 1), -EPIPE);
	CHECK(pk->seq == PARK_SEQ_MAX && !pk->failed);
	/* No close_notify either: it would need a number past the end. */
	tls_park_close_notify(s, pk, sv[0]);
	CHECK(pk->seq == PARK_SEQ_MAX);
	size_t n = read_now(sv[1], raw, sizeof(raw));
	CHECK_EQ_INT(n, 5 + 512 + 1 + 16);
	unsigned char type = 0;
	CHECK_EQ_INT(open_record(pk, PARK_SEQ_MAX - 1, raw, n, back, &type), 512);
	CHECK(type == 0x17 && memcmp(back, plain, 512) == 0);
	tls_park_free(pk);
	tls_sealer_free(s);
	close(sv[0]);
	close(sv[1]);
}

/* ---- (d) partial writes ---- */

/* Every record of raw (got bytes) opens under the next number, carries at
 * most pk->max_plain bytes, and together they are plain (total bytes)
 * once, in order, with one number per record, none skipped. */
static void check_records(const struct tls_park *pk, const unsigned char *raw, size_t got, const unsigned char *plain,
			  size_t total)
{
	static unsigned char back[16384 + 64];
	size_t p = 0, plain_at = 0;
	uint64_t seq = 0;
	int bad = 0;
	while (p + 5 <= got) {
		size_t l = 5 + (size_t)(raw[p + 3] << 8 | raw[p + 4]);
		unsigned char type = 0;
		int m = p + l <= got ? open_record(pk, seq, raw + p, l, back, &type) : -1;
		if (m < 0 || (size_t)m > pk->max_plain || type != 0x17 || plain_at + (size_t)m > total ||
		    memcmp(back, plain + plain_at, (size_t)m) != 0) {
			bad++;
			break;
		}
		plain_at += (size_t)m;
		p += l;
		seq++;
	}
	CHECK(bad == 0);
	CHECK(p == got && plain_at == total);
	CHECK(seq == pk->seq);
}

static void test_partial_writes(void)
{
	struct tls_sealer *s = tls_sealer_new();
	struct tls_park *pk = some_park(s, 16384);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	int small = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	enum { TOTAL = 200000 };
	static unsigned char plain[TOTAL], raw[TOTAL * 2];
	for (size_t i = 0; i < TOTAL; i++)
		plain[i] = (unsigned char)(i * 31 + i / 977);
	size_t off = 0, got = 0;
	int holds = 0, calls = 0;
	while (off < TOTAL && calls++ < 100000) {
		/* The caller's contract: offer again what was not taken, in
		 * pieces of its own choosing (two iovecs here). */
		size_t left = TOTAL - off, cut = left / 3;
		struct iovec iov[2] = { { plain + off, cut }, { plain + off + cut, left - cut } };
		ssize_t r = tls_park_writev(s, pk, sv[0], iov, 2);
		CHECK(r > 0 || r == -EAGAIN);
		if (r < 0 && r != -EAGAIN)
			break;
		if (r > 0)
			off += (size_t)r;
		if (tls_park_holding(pk))
			holds++;
		got += read_now(sv[1], raw + got, sizeof(raw) - got);
	}
	CHECK(off == TOTAL && !tls_park_holding(pk));
	CHECK(holds > 0); /* the socket did take records in part */
	got += read_now(sv[1], raw + got, sizeof(raw) - got);
	/* Every record opens under the next number, and together they are
	 * the plaintext once, in order. */
	check_records(pk, raw, got, plain, TOTAL);
	tls_park_free(pk);
	tls_sealer_free(s);
	close(sv[0]);
	close(sv[1]);
}

/* ---- (d2) records sealed for a send made elsewhere ---- */

/* Records sealed into a buffer and sent by the caller (as a batch of sends
 * does), the result told back: through a socket that takes them in part,
 * sends the caller did not make at all (-EAGAIN), and the held bytes
 * written on the next write, every record opens under the next number and
 * the plaintext arrives once, in order, whatever the cut. Several records
 * per send (512-byte records, up to 8 KiB a send, frames in pieces). */
static void test_sealed_for_a_batch(void)
{
	struct tls_sealer *s = tls_sealer_new();
	struct tls_park *pk = some_park(s, 512);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	int small = 4096;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	enum { TOTAL = 150000 };
	static unsigned char plain[TOTAL], raw[TOTAL * 2], buf[16384];
	for (size_t i = 0; i < TOTAL; i++)
		plain[i] = (unsigned char)(i * 13 + i / 1013);
	size_t off = 0, got = 0;
	int holds = 0, sealed = 0, skipped = 0, calls = 0;
	while (off < TOTAL && calls++ < 100000) {
		size_t left = TOTAL - off, cut = left / 5 < 700 ? left / 5 : 700;
		struct iovec iov[3] = { { plain + off, cut }, { plain + off + cut, 1 },
					{ plain + off + cut + 1, left - cut - 1 } };
		if (left < 3) {
			iov[0].iov_len = left;
			iov[1].iov_len = iov[2].iov_len = 0;
		}
		ssize_t r;
		size_t room = tls_park_seal_room(pk, left < 8192 ? left : 8192);
		if (room) {
			CHECK(!tls_park_holding(pk));
			CHECK(room <= sizeof(buf));
			size_t wire = 0, want = left < 8192 ? left : 8192;
			size_t n = tls_park_seal_iov(s, pk, iov, 3, want, buf, &wire);
			CHECK(n == want && wire == room);
			sealed++;
			ssize_t w;
			if (calls % 7 == 0) {
				w = -EAGAIN; /* as if the batch never ran it */
				skipped++;
			} else {
				w = send(sv[0], buf, wire, MSG_DONTWAIT);
				if (w < 0)
					w = -errno;
			}
			r = tls_park_sent(pk, buf, wire, n, w);
			CHECK(r == -EAGAIN || (r > 0 && (size_t)r <= n));
			CHECK(r != (ssize_t)n || !tls_park_holding(pk));
		} else {
			/* The held bytes go first, on a write of their own (only
			 * them offered here, so the next send is sealed again). */
			CHECK(tls_park_holding(pk));
			holds++;
			struct iovec held = { plain + off, pk->out_plain };
			r = tls_park_writev(s, pk, sv[0], &held, 1);
			CHECK(r > 0 || r == -EAGAIN);
		}
		if (r > 0)
			off += (size_t)r;
		got += read_now(sv[1], raw + got, sizeof(raw) - got);
	}
	CHECK(off == TOTAL && !tls_park_holding(pk));
	CHECK(holds > 0 && sealed > 0 && skipped > 0);
	got += read_now(sv[1], raw + got, sizeof(raw) - got);
	check_records(pk, raw, got, plain, TOTAL);
	/* A failed send: nothing held, nothing more sealed or written. */
	struct iovec one = { plain, 100 };
	size_t wire = 0;
	CHECK(tls_park_seal_iov(s, pk, &one, 1, 100, buf, &wire) == 100);
	CHECK_EQ_INT(tls_park_sent(pk, buf, wire, 100, -ECONNRESET), -ECONNRESET);
	CHECK(pk->failed && !tls_park_holding(pk) && tls_park_seal_room(pk, 100) == 0);
	CHECK_EQ_INT(tls_park_writev(s, pk, sv[0], &one, 1), -EPIPE);
	tls_park_free(pk);
	/* At the end of the sequence: what fits is sealed, then nothing. */
	pk = some_park(s, 512);
	pk->seq = PARK_SEQ_MAX - 2;
	struct iovec big = { plain, 2000 };
	CHECK(tls_park_seal_iov(s, pk, &big, 1, 2000, buf, &wire) == 1024);
	CHECK(wire == 2 * (512 + 22) && pk->seq == PARK_SEQ_MAX);
	CHECK(tls_park_sent(pk, buf, wire, 1024, (ssize_t)wire) == 1024);
	CHECK(tls_park_seal_room(pk, 10) == 0);
	tls_park_free(pk);
	tls_sealer_free(s);
	close(sv[0]);
	close(sv[1]);
}

/* ---- (e) the reader of a session parked reading on ---- */

static const unsigned char some_secret[32] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3,
					       2, 3, 8, 4, 6, 2, 6, 4, 3, 3, 8, 3, 2, 7, 9, 5 };

/* Seal a client's record: n bytes of p, then inner type, under seq, with
 * the peer's keys (a park from the same secret seals what the reader
 * opens). Appends it to out at *len. */
static void client_record(struct tls_sealer *s, uint64_t seq, unsigned char type, const void *p, size_t n,
			  unsigned char *out, size_t *len)
{
	struct tls_park *peer = tls_park_new(s, TLS_PARK_AES_128_GCM_SHA256, some_secret, 32, 16384);
	const unsigned char *rec;
	int rl = tls_park_seal(s, peer, seq, type, p, n, &rec);
	CHECK(rl > 0);
	memcpy(out + *len, rec, (size_t)rl);
	*len += (size_t)rl;
	tls_park_free(peer);
}

static struct tls_park_reader *some_reader(struct tls_sealer *s, uint64_t seq)
{
	return tls_park_reader_new(s, TLS_PARK_AES_128_GCM_SHA256, some_secret, 32, seq);
}

static void test_reader_records_split_anywhere(void)
{
	struct tls_sealer *s = tls_sealer_new();
	static unsigned char raw[3 * 17000], big[16384], buf[16384], want[20000];
	size_t len = 0, wlen = 0;
	/* Counted 5, and the client's next record is 5: three small records,
	 * one with padding (content, type, zeros sealed as type 0), then a
	 * full one. */
	client_record(s, 5, 0x17, "one,", 4, raw, &len);
	client_record(s, 6, 0x00, "two,\x17\0\0\0", 8, raw, &len);
	client_record(s, 7, 0x17, "three,", 6, raw, &len);
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 31 + 7);
	client_record(s, 8, 0x17, big, sizeof(big), raw, &len);
	memcpy(want, "one,two,three,", 14);
	memcpy(want + 14, big, sizeof(big));
	wlen = 14 + sizeof(big);
	/* Fed in pieces of every size from 1 to 9 bytes, then the rest. */
	for (size_t piece = 1; piece <= 10; piece++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
		struct tls_park_reader *rd = some_reader(s, 5);
		size_t fed = 0, got = 0;
		int bad = 0;
		while (got < wlen && bad == 0) {
			size_t k = piece == 10 ? len - fed : MIN(piece, len - fed);
			if (k)
				CHECK(write(sv[1], raw + fed, k) == (ssize_t)k);
			fed += k;
			ssize_t r;
			while ((r = tls_park_read(s, rd, sv[0], buf, sizeof(buf))) > 0) {
				if (got + (size_t)r > wlen || memcmp(buf, want + got, (size_t)r) != 0)
					bad++;
				got += (size_t)r;
			}
			if (r != -EAGAIN || (fed == len && got < wlen && !tls_park_reader_pending(rd)))
				bad++;
		}
		CHECK(bad == 0 && got == wlen);
		CHECK(!tls_park_reader_pending(rd));
		/* The end of the socket is the end. */
		close(sv[1]);
		CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), 0);
		tls_park_reader_free(rd);
		close(sv[0]);
	}
	tls_sealer_free(s);
}

/* The first record is looked for a few numbers around the count, and no
 * further: a count far off is a record that does not open. */
static void test_reader_first_record_near_the_count(void)
{
	struct tls_sealer *s = tls_sealer_new();
	static unsigned char raw[1024], buf[16384];
	for (int off = -6; off <= 6; off++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
		size_t len = 0;
		client_record(s, (uint64_t)(20 + off), 0x17, "abc", 3, raw, &len);
		client_record(s, (uint64_t)(21 + off), 0x17, "def", 3, raw, &len);
		CHECK(write(sv[1], raw, len) == (ssize_t)len);
		struct tls_park_reader *rd = some_reader(s, 20);
		ssize_t r = tls_park_read(s, rd, sv[0], buf, sizeof(buf));
		if (off >= -4 && off <= 4) {
			CHECK_EQ_INT(r, 6);
			CHECK(memcmp(buf, "abcdef", 6) == 0 && rd->seq == (uint64_t)(22 + off));
		} else {
			CHECK_EQ_INT(r, -EPROTO);
			CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), -EPROTO);
		}
		tls_park_reader_free(rd);
		close(sv[0]);
		close(sv[1]);
	}
	tls_sealer_free(s);
}

/* A second full record waits while the first fills the buffer, and the
 * reader says so; close_notify ends the reading, also what follows it. */
static void test_reader_waits_for_room_and_ends_at_close_notify(void)
{
	struct tls_sealer *s = tls_sealer_new();
	static unsigned char raw[3 * 17000], a[16384], b[16384], buf[16384];
	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	size_t len = 0;
	client_record(s, 0, 0x17, a, 100, raw, &len);
	client_record(s, 1, 0x17, b, sizeof(b), raw, &len);
	client_record(s, 2, 0x15, "\x01\x00", 2, raw, &len);
	client_record(s, 3, 0x17, "after", 5, raw, &len);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	CHECK(write(sv[1], raw, len) == (ssize_t)len);
	struct tls_park_reader *rd = some_reader(s, 0);
	CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), 100);
	CHECK(tls_park_reader_pending(rd)); /* b's record, whole, waits */
	CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), 16384);
	CHECK(memcmp(buf, b, sizeof(b)) == 0);
	CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), 0);
	CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), 0);
	CHECK(!tls_park_reader_pending(rd));
	tls_park_reader_free(rd);
	close(sv[0]);
	close(sv[1]);
	tls_sealer_free(s);
}

/* What a parked session cannot follow ends its reading: a key update (a
 * handshake message), a fatal alert, a forged record, a header that is no
 * TLS 1.3 record, one longer than the limit, a record with no content
 * type; and a buffer shorter than a record's content is refused. */
static void test_reader_refusals(void)
{
	struct tls_sealer *s = tls_sealer_new();
	static unsigned char raw[1024], buf[16384];
	static const unsigned char key_update[5] = { 24, 0, 0, 1, 0 };
	for (int k = 0; k < 7; k++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
		size_t len = 0;
		client_record(s, 0, 0x17, "ok", 2, raw, &len);
		if (k == 0)
			client_record(s, 1, 0x16, key_update, sizeof(key_update), raw, &len);
		else if (k == 1)
			client_record(s, 1, 0x15, "\x02\x28", 2, raw, &len); /* fatal handshake_failure */
		else if (k == 2) {
			client_record(s, 1, 0x17, "forged", 6, raw, &len);
			raw[len - 1] ^= 1;
		} else if (k == 3) {
			memcpy(raw + len, "\x16\x03\x03\x00\x20", 5); /* a plaintext handshake record */
			len += 5 + 32;
		} else if (k == 4) {
			memcpy(raw + len, "\x17\x03\x03\x41\x11", 5); /* 2^14 + 257 bytes */
			len += 5;
		} else if (k == 5) {
			client_record(s, 1, 0x00, "\0\0\0", 3, raw, &len); /* zeros only */
		}
		CHECK(write(sv[1], raw, len) == (ssize_t)len);
		struct tls_park_reader *rd = some_reader(s, 0);
		if (k == 6) {
			CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, TLS_PARK_READ_MIN - 1), -EPROTO);
		} else {
			/* What opened first is delivered; the refusal comes next. */
			CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), 2);
			CHECK_EQ_INT(tls_park_read(s, rd, sv[0], buf, sizeof(buf)), -EPROTO);
		}
		tls_park_reader_free(rd);
		close(sv[0]);
		close(sv[1]);
	}
	tls_sealer_free(s);
}

int main(void)
{
	test_rfc8448();
	test_openssl();
	test_seq_max();
	test_partial_writes();
	test_sealed_for_a_batch();
	test_reader_records_split_anywhere();
	test_reader_first_record_near_the_count();
	test_reader_waits_for_room_and_ends_at_close_notify();
	test_reader_refusals();
	return check_done("test_tls_park");
}
