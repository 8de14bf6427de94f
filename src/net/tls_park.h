/* SPDX-License-Identifier: BSD-2-Clause */
/* tls_park.h: TLS 1.3 record protection for parked streams. An open stream
 * only writes, so once it is parked its TLS session is reduced to the
 * server's traffic key, IV and record sequence number (about 100 bytes
 * instead of OpenSSL's 14 KB), and its records are sealed here (RFC 8446
 * 5.2-5.3, keys by 7.1-7.3). transport_tls.c decides when to park; this
 * module only derives keys, seals records and writes them.
 *
 * Nonce rule kept here: a sequence number is used for one record only. A
 * record the socket takes in part is held, sealed, and written before any
 * new one; the sequence advances once per sealed record; no record is
 * sealed at or past PARK_SEQ_MAX. */
#ifndef HERALD_TLS_PARK_H
#define HERALD_TLS_PARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <openssl/ssl.h>

/* Records under one AES-GCM key stay far below the limit of RFC 8446 5.5;
 * a stream that reaches this many is ended, and the client reconnects. */
#define PARK_SEQ_MAX (UINT64_C(1) << 24)

/* The TLS 1.3 suites a stream can be parked under (their IANA numbers). */
enum {
	TLS_PARK_AES_128_GCM_SHA256 = 0x1301,
	TLS_PARK_AES_256_GCM_SHA384 = 0x1302,
	TLS_PARK_CHACHA20_POLY1305_SHA256 = 0x1303,
};

/* What every parked stream of a server shares: the fetched AEADs and HMACs,
 * one cipher context, and a record's worth of room to seal into. Owned by
 * the TLS context (tls_context.c). */
struct tls_sealer;

/* One parked stream's write side. Its fields belong to tls_park.c (the
 * TLS transport reads seq for its log and failed); they are visible for
 * the unit tests. */
struct tls_park {
	const EVP_CIPHER *cipher; /* the sealer's fetched cipher */
	uint64_t seq;             /* of the next record */
	uint32_t max_plain;       /* plaintext bytes per record at most (tls_park_record_max) */
	unsigned char key[32];
	unsigned char iv[12];
	unsigned char *out; /* a sealed record the socket has not taken yet, or NULL */
	uint32_t out_len, out_off;
	uint32_t out_plain; /* the plaintext bytes it carries */
	bool failed;        /* sealing or the socket failed: nothing more is sent */
};

/* A new sealer (the caller frees it with tls_sealer_free); its OpenSSL
 * objects are fetched on first use. */
struct tls_sealer *tls_sealer_new(void);
void tls_sealer_free(struct tls_sealer *s);

/* The write side of a stream under suite (TLS_PARK_*), from the server's
 * application traffic secret (slen bytes: 32, or 48 for SHA-384), sealing
 * at most max_plain bytes per record, starting at sequence 0. Returns it
 * (the caller frees it with tls_park_free), or NULL for another suite, a
 * secret of the wrong size, or an OpenSSL failure. */
struct tls_park *tls_park_new(struct tls_sealer *s, unsigned suite, const unsigned char *secret, size_t slen,
			      uint32_t max_plain);
/* Forget the keys and free pk and any record it holds (NULL: nothing). */
void tls_park_free(struct tls_park *pk);

/* Seal n bytes (at most max_plain) of inner content type `type` as one
 * record under sequence number seq, into the sealer's buffer (*rec, valid
 * until the next seal). pk->seq is not touched. Returns the record's
 * length, or -1. */
int tls_park_seal(struct tls_sealer *s, const struct tls_park *pk, uint64_t seq, unsigned char type, const void *p,
		  size_t n, const unsigned char **rec);

/* Find the sequence number under which p (n bytes of application data)
 * seals to made, the record OpenSSL wrote for it, trying the few numbers
 * a new session's first record can have. On a match pk->seq becomes the
 * next number and 0 is returned (key, IV and cipher are proven too);
 * otherwise -1 and pk is unchanged. */
int tls_park_match(struct tls_sealer *s, struct tls_park *pk, const unsigned char *made, size_t made_len, const void *p,
		   size_t n);

/* Hold rec[off..len), the unsent tail of a sealed record carrying plain
 * plaintext bytes (a copy is taken); the caller offers those bytes again
 * on its next write. */
void tls_park_hold(struct tls_park *pk, const unsigned char *rec, size_t len, size_t off, size_t plain);

/* Whether a record is held: its plaintext bytes are committed. */
bool tls_park_holding(const struct tls_park *pk);

/* Write the held record to fd. Returns its plaintext count once all of it
 * is sent (0 when none was held), -EAGAIN while the socket is full, or
 * -errno. */
ssize_t tls_park_flush(struct tls_park *pk, int fd);

/* writev(2) through pk to fd: the held record first, then the bytes after
 * the ones it carries, sealed record by record. Returns the plaintext
 * bytes taken, -EAGAIN when the socket took none, or -errno (-EPIPE at
 * PARK_SEQ_MAX or when sealing fails; pk->failed tells a failure apart).
 * After a short count or -EAGAIN the next call starts with the same
 * bytes. */
ssize_t tls_park_writev(struct tls_sealer *s, struct tls_park *pk, int fd, const struct iovec *iov, int n);

/* Sealing for a send made elsewhere (a batch of sends over many sockets,
 * send_batch.h): records are sealed into the caller's buffer, sent by the
 * caller, and the result told back, so that what the socket did not take
 * is held as tls_park_writev would hold it.
 *
 * The room sealing plain bytes takes: each record's header, content type
 * and tag besides its bytes; 0 when nothing can be sealed now (a record
 * held, a failure, the sequence at its end). */
size_t tls_park_seal_room(const struct tls_park *pk, size_t plain);

/* Seal the first plain bytes of iov (n pieces; plain at most their total)
 * as records of at most max_plain bytes each, one sequence number each,
 * into buf (tls_park_seal_room(pk, plain) bytes). Returns the plaintext
 * bytes sealed (fewer when the sequence reaches PARK_SEQ_MAX first; 0 on
 * failure, pk->failed then set) and the wire bytes in *wire. From here
 * they are committed: tls_park_sent must follow, before any other write. */
size_t tls_park_seal_iov(struct tls_sealer *s, struct tls_park *pk, const struct iovec *iov, int n, size_t plain,
			 unsigned char *buf, size_t *wire);

/* The send of those wire bytes (wire_len of them, carrying plain bytes)
 * took w of them, or failed with w = -errno. What was not taken is held
 * (copied) and goes first on the next write. Returns writev's result for
 * the plaintext: the bytes of the records sent whole, -EAGAIN when none
 * was, or w for a failure (pk->failed set). */
ssize_t tls_park_sent(struct tls_park *pk, const unsigned char *wire, size_t wire_len, size_t plain, ssize_t w);

/* Seal a close_notify alert and try once to write it, unless a record is
 * held or the sequence is at its end. */
void tls_park_close_notify(struct tls_sealer *s, struct tls_park *pk, int fd);

/* The most plaintext one record of ssl's session may carry: 2^14, or the
 * maximum fragment length the client negotiated (RFC 6066). */
uint32_t tls_park_record_max(const SSL *ssl);

/* The read side of a parked connection that keeps reading (an HTTP/2
 * session): the client's traffic key and IV, the sequence number of its
 * next record, and the bytes of a record not yet whole. Its fields
 * belong to tls_park.c. */
struct tls_park_reader {
	const EVP_CIPHER *cipher;
	uint64_t seq;  /* of the client's next record */
	uint8_t tries; /* numbers around seq still to try on the first record (0: proven) */
	bool failed;   /* a record failed: nothing more is read */
	bool ended;    /* close_notify came: every read is the end */
	unsigned char key[32];
	unsigned char iv[12];
	unsigned char *part; /* input not yet opened (a record's start, or records that did not fit), or NULL */
	uint32_t part_len;
};

/* The smallest buffer tls_park_read fills: a whole record's content. */
#define TLS_PARK_READ_MIN 16384

/* The read side under suite, from the client's application traffic secret
 * (slen bytes), whose next record is expected to carry sequence number seq
 * (as counted from OpenSSL's records; the first record proves it, trying a
 * few numbers around it). Returns it (the caller frees it with
 * tls_park_reader_free), or NULL as tls_park_new. */
struct tls_park_reader *tls_park_reader_new(struct tls_sealer *s, unsigned suite, const unsigned char *secret,
					    size_t slen, uint64_t seq);
/* Forget the keys and free rd and its buffered input (NULL: nothing). */
void tls_park_reader_free(struct tls_park_reader *rd);

/* read(2) through rd from fd: the application data of every whole record
 * that fits into buf (len at least TLS_PARK_READ_MIN). Returns the bytes
 * put in buf, 0 at the end of the stream (EOF or close_notify), -EAGAIN
 * when no record is whole yet, -errno, or -EPROTO for anything that is not
 * application data (an alert, a key update: a parked session cannot follow
 * them), a record that does not open, or one too long. */
ssize_t tls_park_read(struct tls_sealer *s, struct tls_park_reader *rd, int fd, void *buf, size_t len);

/* Whether a whole record waits in rd (a read would return it without the
 * socket). */
bool tls_park_reader_pending(const struct tls_park_reader *rd);

#endif
