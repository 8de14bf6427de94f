/* SPDX-License-Identifier: BSD-2-Clause */
/* tls_park.c: the record layer of parked TLS 1.3 connections: traffic
 * keys from a secret (HKDF-Expand-Label), AEAD sealing of records and
 * their writes with the held-record rule of tls_park.h, and, for a
 * connection that keeps reading, the opening of the client's records.
 *
 * OpenSSL does not tell a session's sequence number, so a stream is parked
 * only after its first record, made by OpenSSL, and ours sealed under some
 * candidate number match byte for byte (tls_park_match): that proves key,
 * IV, cipher and number at once. From there the number only grows. The client's
 * number is counted from the records OpenSSL read; the first record read
 * while parked proves it (only the right key, IV and number open it), and
 * a few numbers around the count are tried, which is safe for opening as
 * it never is for sealing. */
#include "net/tls_park.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "common/util.h"

/* How many sequence numbers a first record is tried under: one ticket
 * record usually went first under this key, so 1 comes first, then 0. */
#define PARK_SEQ_TRIES 8
/* How far from the counted number a client's first record is looked for. */
#define READ_SEQ_TRIES 4
#define TAG_LEN 16
/* The longest TLS 1.3 record: header, 2^14 bytes of content, then the
 * content type, padding and tag within 256 more (RFC 8446 5.2). */
#define REC_MAX (5 + 16384 + 256)

struct tls_sealer {
	EVP_CIPHER *aead[3]; /* AES-128-GCM, AES-256-GCM, ChaCha20-Poly1305 */
	EVP_CIPHER_CTX *seal_ctx;
	EVP_MAC_CTX *hmac[2];       /* HMAC-SHA256, HMAC-SHA384, for expand_label */
	unsigned char buf[REC_MAX]; /* a record sealed, or one opened */
	unsigned char in[REC_MAX];  /* records read, while they are opened */
};

struct tls_sealer *tls_sealer_new(void)
{
	return xcalloc(1, sizeof(struct tls_sealer));
}

void tls_sealer_free(struct tls_sealer *s)
{
	if (!s)
		return;
	for (int i = 0; i < 3; i++)
		EVP_CIPHER_free(s->aead[i]);
	EVP_CIPHER_CTX_free(s->seal_ctx);
	EVP_MAC_CTX_free(s->hmac[0]);
	EVP_MAC_CTX_free(s->hmac[1]);
	OPENSSL_cleanse(s->buf, sizeof(s->buf));
	OPENSSL_cleanse(s->in, sizeof(s->in));
	free(s);
}

/* HKDF-Expand-Label(secret, label, "", len) of RFC 8446 7.1, for len up to
 * the hash's size: one HMAC block, T(1) = HMAC(secret, HkdfLabel || 1),
 * with an HMAC context kept per hash (OpenSSL's HKDF object costs ten
 * times as much to set up per call). Returns 0 or -1. */
static int expand_label(struct tls_sealer *s, int sha384, const unsigned char *secret, size_t slen, const char *label,
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
	EVP_MAC_CTX **m = &s->hmac[sha384];
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

/* The cipher, key and IV of suite from a traffic secret. Returns 0, or -1
 * for another suite, a secret of the wrong size or an OpenSSL failure. */
static int traffic_keys(struct tls_sealer *s, unsigned suite, const unsigned char *secret, size_t slen,
			const EVP_CIPHER **cipher, unsigned char key[32], unsigned char iv[12])
{
	int which, sha384 = 0;
	size_t keylen;
	switch (suite) {
	case TLS_PARK_AES_128_GCM_SHA256:
		which = 0, keylen = 16;
		break;
	case TLS_PARK_AES_256_GCM_SHA384:
		which = 1, keylen = 32, sha384 = 1;
		break;
	case TLS_PARK_CHACHA20_POLY1305_SHA256:
		which = 2, keylen = 32;
		break;
	default:
		return -1;
	}
	static const char *const names[3] = { "AES-128-GCM", "AES-256-GCM", "ChaCha20-Poly1305" };
	if (!s->aead[which])
		s->aead[which] = EVP_CIPHER_fetch(NULL, names[which], NULL);
	if (!s->seal_ctx)
		s->seal_ctx = EVP_CIPHER_CTX_new();
	if (!s->aead[which] || !s->seal_ctx || slen != (sha384 ? 48u : 32u))
		return -1;
	*cipher = s->aead[which];
	if (expand_label(s, sha384, secret, slen, "key", key, keylen) < 0 ||
	    expand_label(s, sha384, secret, slen, "iv", iv, 12) < 0)
		return -1;
	return 0;
}

struct tls_park *tls_park_new(struct tls_sealer *s, unsigned suite, const unsigned char *secret, size_t slen,
			      uint32_t max_plain)
{
	if (max_plain == 0 || max_plain > 16384)
		return NULL;
	struct tls_park *pk = xcalloc(1, sizeof(*pk));
	pk->max_plain = max_plain;
	if (traffic_keys(s, suite, secret, slen, &pk->cipher, pk->key, pk->iv) < 0) {
		tls_park_free(pk);
		return NULL;
	}
	return pk;
}

void tls_park_free(struct tls_park *pk)
{
	if (!pk)
		return;
	free(pk->out);
	OPENSSL_cleanse(pk, sizeof(*pk));
	free(pk);
}

/* The per-record nonce: the IV xor the sequence number (RFC 8446 5.3). */
static void record_nonce(const unsigned char iv[12], uint64_t seq, unsigned char nonce[12])
{
	memcpy(nonce, iv, 12);
	for (int i = 0; i < 8; i++)
		nonce[11 - i] ^= (unsigned char)(seq >> (8 * i));
}

/* Seal n bytes of inner type `type`, taken from the pieces of iov from
 * piece *i, offset *off on (both advanced past them), as one record under
 * seq into out (n + RECORD_EXTRA bytes). The AEADs take their input in
 * parts, so pieces are sealed where they are, never joined first. Returns
 * the record's length, or -1. */
static int seal_pieces(struct tls_sealer *s, const struct tls_park *pk, uint64_t seq, unsigned char type,
		       const struct iovec *iov, int *i, size_t *off, size_t n, unsigned char *out)
{
	unsigned char nonce[12];
	size_t clen = n + 1 + TAG_LEN, at = 5;
	int len;
	if (n > pk->max_plain)
		return -1;
	out[0] = 0x17; /* application_data, as every TLS 1.3 record */
	out[1] = 3;
	out[2] = 3;
	out[3] = (unsigned char)(clen >> 8);
	out[4] = (unsigned char)clen;
	record_nonce(pk->iv, seq, nonce);
	EVP_CIPHER_CTX *cx = s->seal_ctx;
	if (EVP_EncryptInit_ex(cx, pk->cipher, NULL, pk->key, nonce) != 1 ||
	    EVP_EncryptUpdate(cx, NULL, &len, out, 5) != 1)
		return -1;
	while (at < 5 + n) {
		size_t k = iov[*i].iov_len - *off;
		if (k > 5 + n - at)
			k = 5 + n - at;
		if (k && (EVP_EncryptUpdate(cx, out + at, &len, (const unsigned char *)iov[*i].iov_base + *off,
					    (int)k) != 1 ||
			  len != (int)k))
			return -1;
		at += k;
		*off += k;
		if (*off == iov[*i].iov_len)
			(*i)++, *off = 0;
	}
	if (EVP_EncryptUpdate(cx, out + at, &len, &type, 1) != 1 || len != 1 ||
	    EVP_EncryptFinal_ex(cx, out + at + 1, &len) != 1 ||
	    EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_AEAD_GET_TAG, TAG_LEN, out + at + 1) != 1)
		return -1;
	return (int)(5 + clen);
}

/* A record's bytes besides its content: header, inner type, tag. */
#define RECORD_EXTRA (5 + 1 + TAG_LEN)

int tls_park_seal(struct tls_sealer *s, const struct tls_park *pk, uint64_t seq, unsigned char type, const void *p,
		  size_t n, const unsigned char **rec)
{
	struct iovec one = { (void *)p, n };
	int i = 0;
	size_t off = 0;
	*rec = s->buf;
	return seal_pieces(s, pk, seq, type, &one, &i, &off, n, s->buf);
}

size_t tls_park_seal_room(const struct tls_park *pk, size_t plain)
{
	if (pk->out || pk->failed || pk->seq >= PARK_SEQ_MAX || plain == 0)
		return 0;
	size_t records = (plain + pk->max_plain - 1) / pk->max_plain;
	return plain + records * RECORD_EXTRA;
}

size_t tls_park_seal_iov(struct tls_sealer *s, struct tls_park *pk, const struct iovec *iov, int n, size_t plain,
			 unsigned char *buf, size_t *wire)
{
	size_t done = 0, at = 0, off = 0;
	int i = 0;
	(void)n; /* plain, at most their total, bounds the pieces read */
	while (done < plain && pk->seq < PARK_SEQ_MAX && !pk->failed && !pk->out) {
		size_t chunk = plain - done < pk->max_plain ? plain - done : pk->max_plain;
		int rl = seal_pieces(s, pk, pk->seq, 0x17, iov, &i, &off, chunk, buf + at);
		if (rl < 0) {
			/* Nothing after it is sent; records sealed before it
			 * still are, and told (tls_park_sent). */
			pk->failed = true;
			break;
		}
		pk->seq++;
		at += (size_t)rl;
		done += chunk;
	}
	*wire = at;
	return done;
}

ssize_t tls_park_sent(struct tls_park *pk, const unsigned char *wire, size_t wire_len, size_t plain, ssize_t w)
{
	if (w < 0 && w != -EAGAIN) {
		pk->failed = true;
		return w;
	}
	size_t took = w > 0 ? (size_t)w : 0, at = 0, done = 0;
	if (took >= wire_len)
		return (ssize_t)plain;
	/* The records sent whole; each but the last carries max_plain bytes. */
	for (;;) {
		size_t p = plain - done < pk->max_plain ? plain - done : pk->max_plain;
		if (at + p + RECORD_EXTRA > took)
			break;
		at += p + RECORD_EXTRA;
		done += p;
	}
	/* Sealed under their numbers: they go out as they are, first. */
	tls_park_hold(pk, wire, wire_len, took, plain - done);
	return done ? (ssize_t)done : -EAGAIN;
}

int tls_park_match(struct tls_sealer *s, struct tls_park *pk, const unsigned char *made, size_t made_len, const void *p,
		   size_t n)
{
	if (made_len != n + 5 + 1 + TAG_LEN)
		return -1;
	for (uint64_t k = 0; k < PARK_SEQ_TRIES; k++) {
		uint64_t seq = k == 0 ? 1 : k == 1 ? 0 : k;
		const unsigned char *rec;
		int r = tls_park_seal(s, pk, seq, 0x17, p, n, &rec);
		if (r == (int)made_len && memcmp(rec, made, made_len) == 0) {
			pk->seq = seq + 1;
			return 0;
		}
	}
	return -1;
}

void tls_park_hold(struct tls_park *pk, const unsigned char *rec, size_t len, size_t off, size_t plain)
{
	pk->out = xmalloc(len - off);
	memcpy(pk->out, rec + off, len - off);
	pk->out_len = (uint32_t)(len - off);
	pk->out_off = 0;
	pk->out_plain = (uint32_t)plain;
}

bool tls_park_holding(const struct tls_park *pk)
{
	return pk->out != NULL;
}

ssize_t tls_park_flush(struct tls_park *pk, int fd)
{
	if (!pk->out)
		return 0;
	while (pk->out_off < pk->out_len) {
		ssize_t w = send(fd, pk->out + pk->out_off, pk->out_len - pk->out_off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		pk->out_off += (uint32_t)w;
	}
	free(pk->out);
	pk->out = NULL;
	pk->out_len = pk->out_off = 0;
	return pk->out_plain;
}

ssize_t tls_park_writev(struct tls_sealer *s, struct tls_park *pk, int fd, const struct iovec *iov, int n)
{
	size_t done = 0, skip = 0;
	if (pk->failed)
		return -EPIPE;
	if (pk->out) {
		ssize_t r = tls_park_flush(pk, fd);
		if (r < 0)
			return r;
		done = skip = (size_t)r; /* those bytes are the first offered */
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
			const unsigned char *rec;
			int rl = tls_park_seal(s, pk, pk->seq, 0x17, p, chunk, &rec);
			if (rl < 0) {
				pk->failed = true;
				return done ? (ssize_t)done : -EPIPE;
			}
			pk->seq++;
			ssize_t w = send(fd, rec, (size_t)rl, MSG_NOSIGNAL);
			if (w == rl) {
				done += chunk, p += chunk, left -= chunk;
				continue;
			}
			if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
				int e = errno;
				pk->failed = true;
				return done ? (ssize_t)done : -e;
			}
			/* Sealed under its number: it goes out as it is, first. */
			tls_park_hold(pk, rec, (size_t)rl, w > 0 ? (size_t)w : 0, chunk);
			return done ? (ssize_t)done : -EAGAIN;
		}
	}
	return (ssize_t)done;
}

void tls_park_close_notify(struct tls_sealer *s, struct tls_park *pk, int fd)
{
	static const unsigned char close_notify[2] = { 1, 0 }; /* warning, close_notify */
	if (pk->out || pk->failed || pk->seq >= PARK_SEQ_MAX)
		return;
	const unsigned char *rec;
	int rl = tls_park_seal(s, pk, pk->seq, 0x15, close_notify, sizeof(close_notify), &rec);
	if (rl > 0) {
		pk->seq++;
		ssize_t w = send(fd, rec, (size_t)rl, MSG_NOSIGNAL);
		(void)w;
	}
}

uint32_t tls_park_record_max(const SSL *ssl)
{
	const SSL_SESSION *sess = SSL_get0_session(ssl);
	uint8_t mode = sess ? SSL_SESSION_get_max_fragment_length(sess) : TLSEXT_max_fragment_length_DISABLED;
	if (mode >= TLSEXT_max_fragment_length_512 && mode <= TLSEXT_max_fragment_length_4096)
		return UINT32_C(256) << mode; /* 512 << (mode - 1) */
	return 16384;
}

struct tls_park_reader *tls_park_reader_new(struct tls_sealer *s, unsigned suite, const unsigned char *secret,
					    size_t slen, uint64_t seq)
{
	struct tls_park_reader *rd = xcalloc(1, sizeof(*rd));
	rd->seq = seq;
	rd->tries = READ_SEQ_TRIES;
	if (traffic_keys(s, suite, secret, slen, &rd->cipher, rd->key, rd->iv) < 0) {
		tls_park_reader_free(rd);
		return NULL;
	}
	return rd;
}

void tls_park_reader_free(struct tls_park_reader *rd)
{
	if (!rd)
		return;
	if (rd->part)
		OPENSSL_cleanse(rd->part, rd->part_len);
	free(rd->part);
	OPENSSL_cleanse(rd, sizeof(*rd));
	free(rd);
}

/* Open rec (len bytes, a whole record) under sequence number seq into the
 * sealer's buffer. Returns the inner plaintext's length, or -1. */
static int open_under(struct tls_sealer *s, const struct tls_park_reader *rd, uint64_t seq, const unsigned char *rec,
		      size_t len)
{
	unsigned char nonce[12];
	size_t clen = len - 5 - TAG_LEN;
	int l, fin;
	record_nonce(rd->iv, seq, nonce);
	EVP_CIPHER_CTX *cx = s->seal_ctx;
	if (EVP_DecryptInit_ex(cx, rd->cipher, NULL, rd->key, nonce) != 1 ||
	    EVP_DecryptUpdate(cx, NULL, &l, rec, 5) != 1 ||
	    EVP_DecryptUpdate(cx, s->buf, &l, rec + 5, (int)clen) != 1 || l != (int)clen ||
	    EVP_CIPHER_CTX_ctrl(cx, EVP_CTRL_AEAD_SET_TAG, TAG_LEN, (void *)(rec + 5 + clen)) != 1 ||
	    EVP_DecryptFinal_ex(cx, s->buf + l, &fin) != 1)
		return -1;
	return (int)clen;
}

/* Open one whole record: its content goes to s->buf, its length to *n and
 * its inner content type to *type. Returns 0, or -1 (it does not open
 * under any number still possible, or carries no content type). */
static int open_record(struct tls_sealer *s, struct tls_park_reader *rd, const unsigned char *rec, size_t len,
		       size_t *n, unsigned char *type)
{
	int r = -1;
	if (rd->seq >= PARK_SEQ_MAX)
		return -1;
	if (rd->tries == 0) {
		r = open_under(s, rd, rd->seq, rec, len);
	} else {
		/* The counted number first, then those beside it. */
		for (int k = 0; k <= 2 * rd->tries && r < 0; k++) {
			int64_t d = k == 0 ? 0 : k % 2 ? (k + 1) / 2 : -(k / 2);
			if ((int64_t)rd->seq + d < 0)
				continue;
			r = open_under(s, rd, (uint64_t)((int64_t)rd->seq + d), rec, len);
			if (r >= 0)
				rd->seq = (uint64_t)((int64_t)rd->seq + d);
		}
		if (r >= 0)
			rd->tries = 0;
	}
	if (r < 0)
		return -1;
	rd->seq++;
	while (r > 0 && s->buf[r - 1] == 0) /* padding */
		r--;
	if (r == 0)
		return -1;
	*type = s->buf[r - 1];
	*n = (size_t)r - 1;
	return 0;
}

/* Keep p[0..n) for the next read. */
static void keep_input(struct tls_park_reader *rd, const unsigned char *p, size_t n)
{
	if (!n)
		return;
	rd->part = xmalloc(n);
	memcpy(rd->part, p, n);
	rd->part_len = (uint32_t)n;
}

static bool whole_record(const unsigned char *p, size_t n)
{
	return n >= 5 && n >= 5 + (size_t)(p[3] << 8 | p[4]);
}

ssize_t tls_park_read(struct tls_sealer *s, struct tls_park_reader *rd, int fd, void *buf, size_t len)
{
	if (rd->ended)
		return 0;
	if (rd->failed || len < TLS_PARK_READ_MIN)
		return -EPROTO;
	unsigned char *in = s->in;
	size_t have = 0, off = 0, got = 0;
	if (rd->part) {
		have = rd->part_len;
		memcpy(in, rd->part, have);
		OPENSSL_cleanse(rd->part, have);
		free(rd->part);
		rd->part = NULL;
		rd->part_len = 0;
	}
	bool eof = false, closed = false;
	if (!whole_record(in, have)) {
		ssize_t r;
		do
			r = recv(fd, in + have, REC_MAX - have, 0);
		while (r < 0 && errno == EINTR);
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			int e = errno;
			keep_input(rd, in, have);
			return -e;
		}
		eof = r == 0;
		have += r > 0 ? (size_t)r : 0;
	}
	while (have - off >= 5) {
		const unsigned char *h = in + off;
		size_t clen = (size_t)(h[3] << 8 | h[4]);
		if (h[0] != 0x17 || h[1] != 3 || h[2] != 3 || clen < 1 + TAG_LEN || clen > REC_MAX - 5)
			goto bad;
		if (have - off < 5 + clen || (got && clen - 1 - TAG_LEN > len - got))
			break; /* not whole yet, or it may not fit: the next read */
		size_t n;
		unsigned char type;
		if (open_record(s, rd, h, 5 + clen, &n, &type) < 0 || n > len - got)
			goto bad; /* (content past 2^14 bytes is a record overflow) */
		off += 5 + clen;
		if (type == 0x17) {
			memcpy((unsigned char *)buf + got, s->buf, n);
			got += n;
			continue;
		}
		if (type == 0x15 && n == 2 && s->buf[1] == 0) {
			closed = true; /* close_notify: nothing after it counts */
			off = have;
			break;
		}
		goto bad; /* an alert, or a handshake message (a key update) */
	}
	if (closed) {
		rd->ended = true; /* the next read is the end too */
		return (ssize_t)got;
	}
	keep_input(rd, in + off, have - off);
	if (got)
		return (ssize_t)got;
	if (eof)
		return have - off ? -EPROTO : 0;
	return -EAGAIN;
bad:
	rd->failed = true;
	return got ? (ssize_t)got : -EPROTO;
}

bool tls_park_reader_pending(const struct tls_park_reader *rd)
{
	return !rd->failed && !rd->ended && rd->part && whole_record(rd->part, rd->part_len);
}
