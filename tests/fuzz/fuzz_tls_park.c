/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_tls_park.c: fuzz target for the reader of src/net/tls_park.c (a parked
 * TLS session opening its client's records). The input is a list of
 * pieces, each a kind byte, a length byte and that many bytes:
 *   kind & 3 == 0: the bytes as they are (anything on the wire);
 *   kind & 3 == 1: a record of them sealed with the client's key under the
 *                  next number, of inner type 0x17, 0x17, 0x15 (an alert)
 *                  or 0x16 (a handshake message) by (kind >> 2) & 3, with
 *                  kind >> 4 bytes of padding;
 *   kind & 3 == 2: application data under a number off by
 *                  (kind >> 2) % 17 - 8;
 *   kind & 3 == 3: how many bytes reach the socket between reads (1 + the
 *                  length byte).
 * The wire is fed through a socketpair in those steps, reading with
 * tls_park_read after each, then to its end.
 * Invariants:
 *   - what the reader returns, in order, is a prefix of the contents of
 *     the application data records on the wire, up to the first raw piece
 *     or other record;
 *   - when every piece is a record under the right number, it is exactly
 *     the application data before the first other record, and the reading
 *     ends with 0 (close_notify, or the socket's end) or -EPROTO (an alert
 *     or handshake message came first);
 *   - once it ended or failed it stays so, and it never says a whole
 *     record waits and then returns -EAGAIN; it always comes to an end.
 * Over-reads are the sanitizers' (and the driver's guard page's). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "net/tls_park.h"

#define WIRE_MAX (1 << 16)

static const unsigned char secret[32] = { 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6,
					  7, 8, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4 };

static struct tls_sealer *sealer;

int fuzz_one(const uint8_t *data, size_t size)
{
	if (!sealer)
		sealer = tls_sealer_new();
	static unsigned char wire[WIRE_MAX], all[WIRE_MAX], want[WIRE_MAX], got[WIRE_MAX], buf[16384], inner[600];
	size_t wlen = 0, all_len = 0, want_len = 0, got_len = 0, step = WIRE_MAX;
	bool all_open = true; /* no raw piece nor other record yet: `all` grows */
	bool exact = true;    /* every piece so far a record under the right number */
	bool want_open = true, fails = false;
	struct tls_park *peer = tls_park_new(sealer, TLS_PARK_AES_128_GCM_SHA256, secret, 32, 16384);
	FUZZ_ASSERT(peer);
	uint64_t seq = 0;
	static const unsigned char types[4] = { 0x17, 0x17, 0x15, 0x16 };
	for (size_t i = 0; i + 2 <= size;) {
		unsigned kind = data[i], n = data[i + 1];
		const uint8_t *p = data + i + 2;
		if (i + 2 + n > size)
			n = (unsigned)(size - i - 2);
		i += 2 + n;
		if ((kind & 3) == 3) {
			step = 1 + n;
			continue;
		}
		if ((kind & 3) == 0) {
			if (n == 0)
				continue;
			if (wlen + n > WIRE_MAX)
				break;
			memcpy(wire + wlen, p, n);
			wlen += n;
			all_open = exact = false;
			continue;
		}
		unsigned char type = 0x17;
		size_t pad = 0;
		uint64_t at = seq;
		if ((kind & 3) == 1) {
			type = types[(kind >> 2) & 3];
			pad = kind >> 4;
		} else {
			int d = (int)((kind >> 2) % 17) - 8;
			if ((int64_t)seq + d < 0)
				d = 0;
			at = (uint64_t)((int64_t)seq + d);
		}
		/* Padding: the type, then zeros, sealed as one more zero. */
		memcpy(inner, p, n);
		inner[n] = type;
		memset(inner + n + 1, 0, pad);
		const unsigned char *rec;
		int rl = pad ? tls_park_seal(sealer, peer, at, 0, inner, n + 1 + pad, &rec)
			     : tls_park_seal(sealer, peer, at, type, p, n, &rec);
		FUZZ_ASSERT(rl > 0);
		if (wlen + (size_t)rl > WIRE_MAX)
			break;
		memcpy(wire + wlen, rec, (size_t)rl);
		wlen += (size_t)rl;
		seq++;
		if (all_open && type == 0x17) {
			memcpy(all + all_len, p, n);
			all_len += n;
		} else {
			all_open = false;
		}
		if (at != seq - 1)
			exact = false;
		if (exact && want_open) {
			if (type == 0x17) {
				memcpy(want + want_len, p, n);
				want_len += n;
			} else {
				want_open = false;
				fails = !(type == 0x15 && n == 2 && p[1] == 0); /* else close_notify */
			}
		}
	}
	tls_park_free(peer);

	int sv[2];
	FUZZ_ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
	struct tls_park_reader *rd = tls_park_reader_new(sealer, TLS_PARK_AES_128_GCM_SHA256, secret, 32, 0);
	FUZZ_ASSERT(rd);
	size_t fed = 0;
	ssize_t last = -EAGAIN;
	bool done = false, hung_up = false;
	for (int rounds = 0; rounds < 100000 && !done; rounds++) {
		if (fed < wlen) {
			size_t k = wlen - fed < step ? wlen - fed : step;
			ssize_t w = write(sv[1], wire + fed, k);
			if (w > 0)
				fed += (size_t)w;
		} else if (!hung_up) {
			close(sv[1]);
			hung_up = true;
		}
		for (;;) {
			bool pending = tls_park_reader_pending(rd);
			ssize_t r = tls_park_read(sealer, rd, sv[0], buf, sizeof(buf));
			if (r > 0) {
				FUZZ_ASSERT(got_len + (size_t)r <= WIRE_MAX);
				memcpy(got + got_len, buf, (size_t)r);
				got_len += (size_t)r;
				continue;
			}
			FUZZ_ASSERT(r == 0 || r == -EAGAIN || r == -EPROTO);
			FUZZ_ASSERT(!(pending && r == -EAGAIN));
			if (last == 0 || last == -EPROTO)
				FUZZ_ASSERT(r == last); /* it stays ended or failed */
			last = r;
			if (r != -EAGAIN || hung_up)
				done = r != -EAGAIN;
			break;
		}
		if (hung_up && last == -EAGAIN) {
			/* The socket's end was read as -EAGAIN: it cannot be. */
			FUZZ_ASSERT(fed < wlen);
		}
	}
	FUZZ_ASSERT(done);
	FUZZ_ASSERT(got_len <= all_len && memcmp(got, all, got_len) == 0);
	if (exact) {
		FUZZ_ASSERT(got_len == want_len && memcmp(got, want, got_len) == 0);
		FUZZ_ASSERT(last == (fails ? -EPROTO : 0));
	}
	tls_park_reader_free(rd);
	close(sv[0]);
	if (!hung_up)
		close(sv[1]);
	return 0;
}
