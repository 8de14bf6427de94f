/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_addr.c: fuzz target for src/common/addr.c. The input is
 *   byte 0     bits 0-2: which peer (table below); bit 3: peer is the unix
 *              socket; bits 4-5: output buffer size (64, 16, 8, 1)
 *   then       a trusted-proxy list up to the first LF (NULs end it early),
 *   then       the X-Forwarded-For value: all the rest, ending at the
 *              driver's PROT_NONE page.
 * With no LF, the whole rest is the X-Forwarded-For value and the list is
 * the default one. Invariants: trust_parse answers 0 with sane ranges (each
 * containing its own address) or -1 with a terminated reason; addr_client's
 * output is terminated within its size and is the peer, or a hop of the
 * value that is an IP address (only when the peer is trusted), truncated to
 * the buffer; for values without NUL it also equals a plain reference walk. addr_peer_text gets a
 * sockaddr built from the input bytes.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/addr.h"
#include "fuzz.h"

static const char *const peers[] = {
	"127.0.0.1", "::1", "10.1.2.3", "203.0.113.5", "unix", "::ffff:127.0.0.1", "192.168.1.1", "2001:db8::1",
};
static const size_t outlens[] = { 64, 16, 8, 1 };

static bool is_ip(const char *s)
{
	unsigned char b[16];
	return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

/* The rule written out plainly: from the right, each hop (blanks trimmed)
 * must be an address; take it, and stop at the first one not trusted. */
static void ref_client(const struct trust *t, const char *peer, bool peer_unix, const char *xff, size_t n, char *out,
		       size_t outlen)
{
	snprintf(out, outlen, "%s", peer);
	if (!(peer_unix ? t->unix_socket : trust_has(t, peer)) || !xff || !n)
		return;
	size_t end = n;
	for (;;) {
		size_t start = end;
		while (start > 0 && xff[start - 1] != ',')
			start--;
		size_t a = start, b = end;
		while (a < b && (xff[a] == ' ' || xff[a] == '\t'))
			a++;
		while (b > a && (xff[b - 1] == ' ' || xff[b - 1] == '\t'))
			b--;
		char hop[128];
		if (a == b || b - a >= sizeof(hop))
			return;
		memcpy(hop, xff + a, b - a);
		hop[b - a] = '\0';
		if (!is_ip(hop))
			return;
		size_t m = strlen(hop) < outlen ? strlen(hop) : outlen - 1;
		memcpy(out, hop, m);
		out[m] = '\0';
		if (!trust_has(t, hop) || start == 0)
			return;
		end = start - 1;
	}
}

/* Whether s (m bytes) occurs in p (n bytes). */
static bool occurs(const char *p, size_t n, const char *s, size_t m)
{
	return m == 0 || memmem(p, n, s, m) != NULL;
}

static void check_trust(const struct trust *t)
{
	FUZZ_ASSERT(t->n <= TRUST_MAX);
	for (size_t i = 0; i < t->n; i++) {
		const struct cidr *c = &t->nets[i];
		FUZZ_ASSERT(c->family == AF_INET || c->family == AF_INET6);
		FUZZ_ASSERT(c->bits >= 0 && c->bits <= (c->family == AF_INET ? 32 : 128));
		char text[64];
		FUZZ_ASSERT(inet_ntop(c->family, c->addr, text, sizeof(text)));
		FUZZ_ASSERT(trust_has(t, text));
	}
}

static void check_peer_text(const uint8_t *data, size_t size)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	size_t n = size < sizeof(ss) ? size : sizeof(ss);
	memcpy(&ss, data, n);
	static const sa_family_t fams[] = { AF_INET, AF_INET6, AF_UNIX, AF_UNSPEC };
	ss.ss_family = fams[size % 4];
	socklen_t lens[] = { (socklen_t)n, (socklen_t)sizeof(ss) };
	for (int k = 0; k < 2; k++) {
		char out[64];
		memset(out, 'X', sizeof(out));
		bool lb = false;
		addr_peer_text((const struct sockaddr *)&ss, lens[k], out, sizeof(out), &lb);
		FUZZ_ASSERT(memchr(out, '\0', sizeof(out)));
		FUZZ_ASSERT(strcmp(out, "unix") == 0 || is_ip(out));
		if (lb && strcmp(out, "unix") != 0) {
			struct trust t;
			char err[64];
			FUZZ_ASSERT(trust_parse(&t, "127.0.0.0/8,::1", err, sizeof(err)) == 0);
			FUZZ_ASSERT(trust_has(&t, out));
		}
	}
}

int fuzz_one(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	uint8_t sel = data[0];
	const char *peer = peers[sel & 7];
	bool peer_unix = (sel & 8) != 0;
	size_t outlen = outlens[(sel >> 4) & 3];
	const char *rest = (const char *)data + 1;
	size_t rn = size - 1;

	struct trust t;
	char err[128];
	const char *nl = memchr(rest, '\n', rn);
	const char *xff = rest;
	size_t xn = rn;
	if (nl) {
		size_t ln = (size_t)(nl - rest);
		char *list = malloc(ln + 1);
		FUZZ_ASSERT(list);
		memcpy(list, rest, ln);
		list[ln] = '\0';
		memset(err, 'X', sizeof(err));
		int r = trust_parse(&t, list, err, sizeof(err));
		FUZZ_ASSERT(r == 0 || r == -1);
		if (r == 0) {
			check_trust(&t);
		} else {
			FUZZ_ASSERT(memchr(err, '\0', sizeof(err)) && err[0]);
			FUZZ_ASSERT(trust_parse(&t, "127.0.0.0/8,::1,unix", err, sizeof(err)) == 0);
		}
		/* A tiny error buffer is still terminated. */
		char small[4];
		struct trust t2;
		memset(small, 'X', sizeof(small));
		if (trust_parse(&t2, list, small, sizeof(small)) < 0)
			FUZZ_ASSERT(memchr(small, '\0', sizeof(small)));
		free(list);
		xff = nl + 1;
		xn = rn - ln - 1;
	} else {
		FUZZ_ASSERT(trust_parse(&t, "127.0.0.0/8,::1,unix", err, sizeof(err)) == 0);
	}

	char out[64], want[64];
	memset(out, 'X', sizeof(out));
	addr_client(&t, peer, peer_unix, xn ? xff : NULL, xn, out, outlen);
	FUZZ_ASSERT(memchr(out, '\0', outlen));
	size_t on = strlen(out);
	bool trusted = peer_unix ? t.unix_socket : trust_has(&t, peer);
	bool is_peer = strncmp(out, peer, outlen - 1) == 0 && on == (strlen(peer) < outlen ? strlen(peer) : outlen - 1);
	if (!is_peer) {
		FUZZ_ASSERT(trusted);
		FUZZ_ASSERT(occurs(xff, xn, out, on));
		if (outlen == 64)
			FUZZ_ASSERT(is_ip(out));
	}
	if (!trusted)
		FUZZ_ASSERT(is_peer);
	/* Header values never hold NUL (the request parser refuses it), and
	 * addr_client reads a hop as a C string; compare only NUL-free values. */
	if (!memchr(xff, '\0', xn)) {
		ref_client(&t, peer, peer_unix, xn ? xff : NULL, xn, want, outlen);
		FUZZ_ASSERT(strcmp(out, want) == 0);
	}

	/* trust_has on the raw value (as a C string) never misbehaves. */
	char *s = malloc(xn + 1);
	FUZZ_ASSERT(s);
	memcpy(s, xff, xn);
	s[xn] = '\0';
	if (trust_has(&t, s))
		FUZZ_ASSERT(is_ip(s));
	free(s);

	check_peer_text(data, size);
	return 0;
}
