/* SPDX-License-Identifier: BSD-2-Clause */
/* addr.c: trusted-proxy ranges and the client address behind a proxy. */
#include "common/addr.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "common/util.h"

static int parse_ip(const char *s, int *family, unsigned char *out)
{
	if (inet_pton(AF_INET, s, out) == 1) {
		*family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, s, out) == 1) {
		/* Treat ::ffff:a.b.c.d as the IPv4 address it carries. */
		static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
		if (memcmp(out, mapped, 12) == 0) {
			memmove(out, out + 12, 4);
			*family = AF_INET;
		} else {
			*family = AF_INET6;
		}
		return 0;
	}
	return -1;
}

int trust_parse(struct trust *t, const char *list, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	char *copy = xstrdup(list), *save = NULL;
	int rc = 0;
	for (char *tok = strtok_r(copy, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save)) {
		if (strcmp(tok, "unix") == 0) {
			t->unix_socket = true;
			continue;
		}
		if (t->n == TRUST_MAX) {
			snprintf(err, errlen, "more than %d ranges", TRUST_MAX);
			rc = -1;
			break;
		}
		struct cidr *c = &t->nets[t->n];
		char *slash = strchr(tok, '/');
		if (slash)
			*slash = '\0';
		if (parse_ip(tok, &c->family, c->addr) < 0) {
			snprintf(err, errlen, "\"%s\" is not an IP address", tok);
			rc = -1;
			break;
		}
		int maxbits = c->family == AF_INET ? 32 : 128;
		c->bits = maxbits;
		if (slash) {
			char *end;
			long b = strtol(slash + 1, &end, 10);
			if (!isdigit((unsigned char)slash[1]) || *end || b < 0 || b > maxbits) {
				snprintf(err, errlen, "bad prefix length \"/%s\"", slash + 1);
				rc = -1;
				break;
			}
			c->bits = (int)b;
		}
		t->n++;
	}
	free(copy);
	return rc;
}

static bool cidr_has(const struct cidr *c, int family, const unsigned char *a)
{
	if (c->family != family)
		return false;
	int full = c->bits / 8, rest = c->bits % 8;
	if (memcmp(c->addr, a, (size_t)full) != 0)
		return false;
	if (rest) {
		unsigned char mask = (unsigned char)(0xff << (8 - rest));
		return (c->addr[full] & mask) == (a[full] & mask);
	}
	return true;
}

bool trust_has(const struct trust *t, const char *ip)
{
	int family;
	unsigned char a[16];
	if (parse_ip(ip, &family, a) < 0)
		return false;
	for (size_t i = 0; i < t->n; i++)
		if (cidr_has(&t->nets[i], family, a))
			return true;
	return false;
}

/* The dotted quad of the 4 bytes at b into out, or "" when it does not fit
 * (as inet_ntop would leave it). By hand: glibc's inet_ntop formats IPv4
 * with sprintf, 1-2 % of an open's CPU (perf), for a text every connection
 * makes at accept. */
static void ipv4_text(const unsigned char *b, char *out, size_t outlen)
{
	char t[16];
	size_t at = 0;
	for (int i = 0; i < 4; i++) {
		unsigned v = b[i];
		if (v >= 100)
			t[at++] = (char)('0' + v / 100);
		if (v >= 10)
			t[at++] = (char)('0' + v / 10 % 10);
		t[at++] = (char)('0' + v % 10);
		t[at++] = i < 3 ? '.' : '\0';
	}
	if (at <= outlen)
		memcpy(out, t, at);
}

void addr_peer_text(const struct sockaddr *sa, socklen_t len, char *out, size_t outlen, bool *loopback)
{
	*loopback = false;
	if (outlen == 0)
		return;
	out[0] = '\0'; /* stays a string when inet_ntop finds out too small */
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		ipv4_text((const unsigned char *)&in->sin_addr, out, outlen);
		*loopback = (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	} else if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			ipv4_text(in6->sin6_addr.s6_addr + 12, out, outlen);
			*loopback = in6->sin6_addr.s6_addr[12] == 127;
		} else {
			inet_ntop(AF_INET6, &in6->sin6_addr, out, (socklen_t)outlen);
			*loopback = IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
		}
	} else {
		snprintf(out, outlen, "unix");
		*loopback = sa->sa_family == AF_UNIX;
	}
}

void addr_client(const struct trust *t, const char *peer, bool peer_unix, const char *xff, size_t xff_len, char *out,
		 size_t outlen)
{
	snprintf(out, outlen, "%s", peer);
	bool trusted = peer_unix ? t->unix_socket : trust_has(t, peer);
	if (!trusted || !xff || !xff_len)
		return;
	/* Walk the hops from the right: each hop was added by the proxy to its
	 * left's peer; stop at the first one we do not trust. */
	size_t end = xff_len;
	while (end > 0) {
		size_t start = end;
		while (start > 0 && xff[start - 1] != ',')
			start--;
		size_t a = start, b = end;
		while (a < b && (xff[a] == ' ' || xff[a] == '\t'))
			a++;
		while (b > a && (xff[b - 1] == ' ' || xff[b - 1] == '\t'))
			b--;
		char hop[64];
		int family;
		unsigned char bin[16];
		if (b - a == 0 || b - a >= sizeof(hop))
			return;
		memcpy(hop, xff + a, b - a);
		hop[b - a] = '\0';
		if (parse_ip(hop, &family, bin) < 0)
			return;
		snprintf(out, outlen, "%s", hop);
		if (!trust_has(t, hop))
			return;
		if (start == 0)
			return;
		end = start - 1;
	}
}

void addr_count_key(const char *client, int prefix_bits, char *out, size_t outlen)
{
	int family;
	unsigned char a[16];
	if (prefix_bits <= 0 || prefix_bits >= 128 || parse_ip(client, &family, a) < 0 || family != AF_INET6) {
		snprintf(out, outlen, "%s", client);
		return;
	}
	int full = prefix_bits / 8, rest = prefix_bits % 8;
	if (rest)
		a[full] &= (unsigned char)(0xff << (8 - rest));
	memset(a + full + (rest ? 1 : 0), 0, (size_t)(16 - full - (rest ? 1 : 0)));
	char net[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, a, net, sizeof(net));
	snprintf(out, outlen, "%s/%d", net, prefix_bits);
}
