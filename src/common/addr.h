/* SPDX-License-Identifier: BSD-2-Clause */
/* addr.h: client addresses: the trusted-proxy list (CIDR ranges and the unix
 * socket), and the client address of a request: the peer, or the nearest
 * X-Forwarded-For hop that is not itself a trusted proxy when the peer is one. */
#ifndef HERALD_ADDR_H
#define HERALD_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#define TRUST_MAX 32

struct cidr {
	int family; /* AF_INET or AF_INET6 */
	unsigned char addr[16];
	int bits;
};

struct trust {
	struct cidr nets[TRUST_MAX];
	size_t n;
	bool unix_socket; /* peers on the unix socket are trusted proxies */
};

/* Parse "127.0.0.0/8,::1,unix" into t. Returns 0, or -1 with a reason in err. */
int trust_parse(struct trust *t, const char *list, char *err, size_t errlen);

/* Whether the textual address (IPv4 or IPv6) lies in a trusted range. */
bool trust_has(const struct trust *t, const char *ip);

/* Write the peer address of sa as text into out ("unix" for AF_UNIX);
 * IPv4-mapped IPv6 addresses are written as IPv4. Sets *loopback. */
void addr_peer_text(const struct sockaddr *sa, socklen_t len, char *out, size_t outlen, bool *loopback);

/* Choose the client address: the peer unless the peer is a trusted proxy
 * (peer_unix and t->unix_socket, or peer in a trusted range) and xff (the
 * X-Forwarded-For value, may be NULL) names hops: then the rightmost hop
 * that is not trusted (or the leftmost when all are). Invalid entries end
 * the walk. Writes into out. */
void addr_client(const struct trust *t, const char *peer, bool peer_unix, const char *xff, size_t xff_len, char *out,
		 size_t outlen);

/* The key the per-address cap counts client under: an IPv6 address
 * reduced to its first prefix_bits bits and written as "net/bits" (one
 * household or host usually holds a whole /64), anything else as it is. */
void addr_count_key(const char *client, int prefix_bits, char *out, size_t outlen);

#endif
