/* SPDX-License-Identifier: BSD-2-Clause */
/* test_addr.c: trusted-proxy lists (parsing, range membership at every
 * prefix boundary, against a bit-by-bit reference on random ranges), peer
 * address text, and the client address from X-Forwarded-For chains, also
 * against a reference walk on random chains. X-Forwarded-For values are
 * placed right before a PROT_NONE page, so reading past their length faults. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/addr.h"
#include "check.h"
#include "guard.h"

static struct trust deftrust;

static bool parses(struct trust *t, const char *list)
{
	char err[128] = "untouched";
	int r = trust_parse(t, list, err, sizeof(err));
	if (r != 0)
		fprintf(stderr, "  trust_parse(\"%s\"): %s\n", list, err);
	return r == 0;
}

/* trust_parse refuses list; the reason is non-empty and contains needle. */
static bool refuses(const char *list, const char *needle)
{
	struct trust t;
	char err[256];
	err[0] = '\0';
	int r = trust_parse(&t, list, err, sizeof(err));
	bool ok = r == -1 && err[0] && memchr(err, '\0', sizeof(err)) && (!needle || strstr(err, needle));
	if (!ok)
		fprintf(stderr, "  trust_parse(\"%s\") = %d, err \"%s\" (wanted \"%s\")\n", list, r, err,
			needle ? needle : "");
	return ok;
}

static void test_trust_parse(void)
{
	struct trust t;
	CHECK(parses(&t, "127.0.0.0/8,::1,unix"));
	CHECK_EQ_INT(t.n, 2);
	CHECK(t.unix_socket);
	CHECK_EQ_INT(t.nets[0].family, AF_INET);
	CHECK_EQ_INT(t.nets[0].bits, 8);
	CHECK(memcmp(t.nets[0].addr, "\x7f\0\0\0", 4) == 0);
	CHECK_EQ_INT(t.nets[1].family, AF_INET6);
	CHECK_EQ_INT(t.nets[1].bits, 128);

	CHECK(parses(&t, ""));
	CHECK_EQ_INT(t.n, 0);
	CHECK(!t.unix_socket);
	CHECK(!trust_has(&t, "127.0.0.1"));

	CHECK(parses(&t, " , ,\t,"));
	CHECK_EQ_INT(t.n, 0);

	CHECK(parses(&t, "unix"));
	CHECK_EQ_INT(t.n, 0);
	CHECK(t.unix_socket);
	CHECK(parses(&t, "unix,unix"));
	CHECK(t.unix_socket);

	CHECK(parses(&t, " 10.0.0.0/8 ,\t192.168.0.0/16\t, fd00::/8 ,2001:db8::1"));
	CHECK_EQ_INT(t.n, 4);
	CHECK(!t.unix_socket);
	CHECK_EQ_INT(t.nets[2].family, AF_INET6);
	CHECK_EQ_INT(t.nets[2].bits, 8);
	CHECK_EQ_INT(t.nets[3].bits, 128);
	CHECK(parses(&t, "10.0.0.0/08")); /* leading zero in the length */
	CHECK_EQ_INT(t.nets[0].bits, 8);
	CHECK(parses(&t, "0.0.0.0/0,::/0"));
	CHECK_EQ_INT(t.nets[0].bits, 0);
	CHECK_EQ_INT(t.nets[1].bits, 0);
	/* An IPv4-mapped address is the IPv4 address it carries. */
	CHECK(parses(&t, "::ffff:192.0.2.1"));
	CHECK_EQ_INT(t.nets[0].family, AF_INET);
	CHECK_EQ_INT(t.nets[0].bits, 32);

	/* Bad addresses: the reason quotes the entry. */
	CHECK(refuses("1.2.3", "1.2.3"));
	CHECK(refuses("256.1.1.1", "256.1.1.1"));
	CHECK(refuses("foo", "foo"));
	CHECK(refuses("127.0.0.1,localhost", "localhost"));
	CHECK(refuses("1.2.3.4.5", "1.2.3.4.5"));
	CHECK(refuses("::g", "::g"));
	CHECK(refuses("1:2:3:4:5:6:7:8:9", NULL));
	CHECK(refuses("fe80::1%eth0", NULL));
	CHECK(refuses("[::1]", "[::1]"));
	CHECK(refuses("1.2.3.4:80", NULL));
	CHECK(refuses("/8", NULL));
	CHECK(refuses("unix/8", NULL));
	CHECK(refuses("UNIX", "UNIX"));
	CHECK(refuses("127.0.0.1;10.0.0.1", NULL));

	/* Bad prefix lengths. */
	CHECK(refuses("10.0.0.0/33", "33"));
	CHECK(refuses("::/129", "129"));
	CHECK(refuses("10.0.0.0/", "/"));
	CHECK(refuses("10.0.0.0/-1", "-1"));
	CHECK(refuses("10.0.0.0/+8", "+8"));
	CHECK(refuses("10.0.0.0/8x", "8x"));
	CHECK(refuses("10.0.0.0/8/8", NULL));
	CHECK(refuses("10.0.0.0/0x8", NULL));
	CHECK(refuses("10.0.0.0/99999999999999999999999", NULL));
	CHECK(refuses("10.0.0.0/ 8", NULL));
	/* A mapped address is IPv4, so 32 is its limit. */
	CHECK(refuses("::ffff:10.0.0.0/33", NULL));

	/* At most TRUST_MAX ranges; "unix" does not count. */
	char list[4096];
	size_t n = 0;
	for (int i = 0; i < TRUST_MAX; i++)
		n += (size_t)snprintf(list + n, sizeof(list) - n, "10.%d.0.0/16,", i);
	n += (size_t)snprintf(list + n, sizeof(list) - n, "unix");
	CHECK(parses(&t, list));
	CHECK_EQ_INT(t.n, TRUST_MAX);
	CHECK(t.unix_socket);
	CHECK(trust_has(&t, "10.31.255.255"));
	CHECK(!trust_has(&t, "10.32.0.0"));
	snprintf(list + n, sizeof(list) - n, ",10.200.0.0/16");
	CHECK(refuses(list, "32"));

	/* The reason fits any buffer and stays NUL-terminated. */
	char small[8];
	memset(small, 'X', sizeof(small));
	CHECK_EQ_INT(trust_parse(&t, "not-an-address-at-all", small, sizeof(small)), -1);
	CHECK(memchr(small, '\0', sizeof(small)) != NULL);

	/* A long list of bad text does not overflow anything. */
	char *longbad = malloc(100001);
	memset(longbad, 'z', 100000);
	longbad[100000] = '\0';
	CHECK(refuses(longbad, NULL));
	free(longbad);
}

static bool has(const char *list, const char *ip)
{
	struct trust t;
	if (!parses(&t, list))
		return false;
	return trust_has(&t, ip);
}

static void test_trust_has(void)
{
	/* /0 */
	CHECK(has("0.0.0.0/0", "0.0.0.0"));
	CHECK(has("0.0.0.0/0", "255.255.255.255"));
	CHECK(has("0.0.0.0/0", "::ffff:8.8.8.8"));
	CHECK(!has("0.0.0.0/0", "::1"));
	CHECK(has("::/0", "::1"));
	CHECK(has("::/0", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"));
	CHECK(!has("::/0", "8.8.8.8"));
	CHECK(has("1.2.3.4/0", "200.1.1.1")); /* host bits beyond the prefix are ignored */

	/* /8 */
	CHECK(has("10.0.0.0/8", "10.0.0.0"));
	CHECK(has("10.0.0.0/8", "10.255.255.255"));
	CHECK(!has("10.0.0.0/8", "11.0.0.0"));
	CHECK(!has("10.0.0.0/8", "9.255.255.255"));
	CHECK(has("10.9.9.9/8", "10.1.2.3"));
	CHECK(has("127.0.0.0/8", "::ffff:127.0.0.1"));
	CHECK(has("127.0.0.0/8", "::FFFF:127.1.2.3"));
	CHECK(!has("127.0.0.0/8", "::127.0.0.1")); /* IPv4-compatible is not mapped */

	/* /31 and /32 */
	CHECK(has("192.168.1.4/31", "192.168.1.4"));
	CHECK(has("192.168.1.4/31", "192.168.1.5"));
	CHECK(!has("192.168.1.4/31", "192.168.1.3"));
	CHECK(!has("192.168.1.4/31", "192.168.1.6"));
	CHECK(has("192.168.1.5/31", "192.168.1.4"));
	CHECK(has("192.168.1.4/32", "192.168.1.4"));
	CHECK(!has("192.168.1.4/32", "192.168.1.5"));
	CHECK(has("192.168.1.4", "192.168.1.4"));
	CHECK(!has("192.168.1.4", "192.168.1.5"));
	CHECK(has("192.168.1.4", "::ffff:192.168.1.4"));
	CHECK(has("::ffff:192.168.1.4", "192.168.1.4"));
	CHECK(!has("255.255.255.255/32", "255.255.255.254"));

	/* /127 and /128 */
	CHECK(has("2001:db8::/127", "2001:db8::"));
	CHECK(has("2001:db8::/127", "2001:db8::1"));
	CHECK(!has("2001:db8::/127", "2001:db8::2"));
	CHECK(!has("2001:db8::2/127", "2001:db8::1"));
	CHECK(has("2001:db8::2/127", "2001:db8::3"));
	CHECK(has("::1", "::1"));
	CHECK(has("::1/128", "0:0:0:0:0:0:0:1"));
	CHECK(has("::1", "0000:0000:0000:0000:0000:0000:0000:0001"));
	CHECK(!has("::1", "::2"));
	CHECK(!has("::1", "::"));
	CHECK(!has("::1", "127.0.0.1"));
	CHECK(has("2001:DB8::1", "2001:db8::1"));
	CHECK(!has("2001:db8::1/128", "2001:db8::1:0"));

	/* Lengths that do not fall on a byte. */
	CHECK(has("172.16.0.0/12", "172.31.255.255"));
	CHECK(!has("172.16.0.0/12", "172.32.0.0"));
	CHECK(!has("172.16.0.0/12", "172.15.255.255"));
	CHECK(has("128.0.0.0/1", "200.0.0.0"));
	CHECK(!has("128.0.0.0/1", "127.255.255.255"));
	CHECK(has("fe80::/10", "febf:ffff::1"));
	CHECK(!has("fe80::/10", "fec0::1"));
	CHECK(has("2001:db8::/65", "2001:db8::7fff:ffff:ffff:ffff"));
	CHECK(!has("2001:db8::/65", "2001:db8::8000:0:0:0"));

	/* Not addresses. */
	CHECK(!has("0.0.0.0/0,::/0", ""));
	CHECK(!has("0.0.0.0/0,::/0", "unix"));
	CHECK(!has("0.0.0.0/0,::/0", " 1.2.3.4"));
	CHECK(!has("0.0.0.0/0,::/0", "1.2.3.4 "));
	CHECK(!has("0.0.0.0/0,::/0", "1.2.3.04"));
	CHECK(!has("0.0.0.0/0,::/0", "1.2.3"));
	CHECK(!has("0.0.0.0/0,::/0", "[::1]"));
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd32(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 11);
}

/* The first bits of a and b are equal. */
static bool ref_prefix_eq(const unsigned char *a, const unsigned char *b, int bits)
{
	for (int i = 0; i < bits; i++) {
		int bit = 7 - i % 8;
		if (((a[i / 8] >> bit) & 1) != ((b[i / 8] >> bit) & 1))
			return false;
	}
	return true;
}

/* Random ranges and addresses near them, against the bitwise reference. */
static void test_trust_has_random(void)
{
	int bad = 0;
	for (int iter = 0; iter < 20000 && bad < 5; iter++) {
		bool v6 = rnd32() & 1;
		int fam = v6 ? AF_INET6 : AF_INET, alen = v6 ? 16 : 4, maxb = v6 ? 128 : 32;
		unsigned char net[16], a[16];
		for (int i = 0; i < 16; i++)
			net[i] = (unsigned char)rnd32();
		if (v6 && net[0] == 0)
			net[0] = 0x20; /* keep clear of ::ffff:0:0/96 */
		int bits = (int)(rnd32() % (unsigned)(maxb + 1));
		/* The address equals the range up to a random bit, then random. */
		memcpy(a, net, 16);
		int flip = (int)(rnd32() % (unsigned)(maxb + 1));
		if (flip < maxb) {
			a[flip / 8] ^= (unsigned char)(0x80 >> (flip % 8));
			for (int i = flip + 1; i < maxb; i++)
				if (rnd32() & 1)
					a[i / 8] ^= (unsigned char)(0x80 >> (i % 8));
		}
		if (v6 && a[0] == 0)
			a[0] = 0x20;
		char ntext[64], atext[64], list[80];
		inet_ntop(fam, net, ntext, sizeof(ntext));
		inet_ntop(fam, a, atext, sizeof(atext));
		snprintf(list, sizeof(list), "%s/%d", ntext, bits);
		struct trust t;
		char err[128];
		if (trust_parse(&t, list, err, sizeof(err)) != 0) {
			fprintf(stderr, "  trust_parse(\"%s\"): %s\n", list, err);
			bad++;
			continue;
		}
		bool want = ref_prefix_eq(net, a, bits);
		(void)alen;
		if (trust_has(&t, atext) != want) {
			fprintf(stderr, "  trust_has(%s, %s) != %d\n", list, atext, want);
			bad++;
		}
		if (!v6) {
			/* The same IPv4 address written as mapped IPv6. */
			char mapped[80];
			snprintf(mapped, sizeof(mapped), "::ffff:%s", atext);
			if (trust_has(&t, mapped) != want) {
				fprintf(stderr, "  trust_has(%s, %s) != %d\n", list, mapped, want);
				bad++;
			}
		}
	}
	CHECK_EQ_INT(bad, 0);
}

static void peer4(const char *ip, char *out, size_t outlen, bool *lb)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(1234) };
	inet_pton(AF_INET, ip, &sin.sin_addr);
	addr_peer_text((const struct sockaddr *)&sin, sizeof(sin), out, outlen, lb);
}

static void peer6(const char *ip, char *out, size_t outlen, bool *lb)
{
	struct sockaddr_in6 sin6 = { .sin6_family = AF_INET6, .sin6_port = htons(1234) };
	inet_pton(AF_INET6, ip, &sin6.sin6_addr);
	addr_peer_text((const struct sockaddr *)&sin6, sizeof(sin6), out, outlen, lb);
}

static void test_peer_text(void)
{
	char out[64];
	bool lb;
	peer4("127.0.0.1", out, sizeof(out), &lb);
	CHECK(strcmp(out, "127.0.0.1") == 0 && lb);
	peer4("127.255.255.254", out, sizeof(out), &lb);
	CHECK(strcmp(out, "127.255.255.254") == 0 && lb);
	peer4("10.0.0.1", out, sizeof(out), &lb);
	CHECK(strcmp(out, "10.0.0.1") == 0 && !lb);
	peer4("128.0.0.1", out, sizeof(out), &lb);
	CHECK(strcmp(out, "128.0.0.1") == 0 && !lb);
	peer4("255.255.255.255", out, sizeof(out), &lb);
	CHECK(strcmp(out, "255.255.255.255") == 0 && !lb);

	peer6("::1", out, sizeof(out), &lb);
	CHECK(strcmp(out, "::1") == 0 && lb);
	peer6("2001:db8::1", out, sizeof(out), &lb);
	CHECK(strcmp(out, "2001:db8::1") == 0 && !lb);
	peer6("::", out, sizeof(out), &lb);
	CHECK(strcmp(out, "::") == 0 && !lb);
	peer6("::ffff:127.0.0.1", out, sizeof(out), &lb);
	CHECK(strcmp(out, "127.0.0.1") == 0 && lb);
	peer6("::ffff:10.1.2.3", out, sizeof(out), &lb);
	CHECK(strcmp(out, "10.1.2.3") == 0 && !lb);
	peer6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", out, sizeof(out), &lb);
	CHECK(strcmp(out, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff") == 0 && !lb);

	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	strcpy(sun.sun_path, "/tmp/herald.sock");
	lb = false;
	addr_peer_text((const struct sockaddr *)&sun, sizeof(sun), out, sizeof(out), &lb);
	CHECK(strcmp(out, "unix") == 0 && lb);
	/* An unnamed unix peer (accept gives only the family). */
	lb = false;
	addr_peer_text((const struct sockaddr *)&sun, sizeof(sa_family_t), out, sizeof(out), &lb);
	CHECK(strcmp(out, "unix") == 0 && lb);

	/* A truncated IPv4 sockaddr is not taken for a loopback peer. */
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001) };
	lb = true;
	addr_peer_text((const struct sockaddr *)&sin, 4, out, sizeof(out), &lb);
	CHECK(!lb);
	CHECK(memchr(out, '\0', sizeof(out)) != NULL);

	/* A buffer too small for the text still ends up terminated (inet_ntop
	 * leaves it untouched on ENOSPC, so addr_peer_text must not rely on it). */
	char tiny[8];
	memset(tiny, 'X', sizeof(tiny));
	peer6("2001:db8:1:2:3:4:5:6", tiny, sizeof(tiny), &lb);
	CHECK(memchr(tiny, '\0', sizeof(tiny)) != NULL);
	memset(tiny, 'X', sizeof(tiny));
	peer4("192.168.100.200", tiny, sizeof(tiny), &lb);
	CHECK(memchr(tiny, '\0', sizeof(tiny)) != NULL);

	/* The peer text round-trips into trust_has. */
	peer6("::ffff:127.0.0.1", out, sizeof(out), &lb);
	CHECK(trust_has(&deftrust, out));
	peer6("::1", out, sizeof(out), &lb);
	CHECK(trust_has(&deftrust, out));
	peer4("192.0.2.1", out, sizeof(out), &lb);
	CHECK(!trust_has(&deftrust, out));
}

/* addr_client with xff placed before the guard page; returns out. */
static char client_out[64];
static const char *client_n(const struct trust *t, const char *peer, bool peer_unix, const char *xff, size_t n)
{
	memset(client_out, 'X', sizeof(client_out));
	addr_client(t, peer, peer_unix, xff ? guarded(xff, n) : NULL, n, client_out, sizeof(client_out));
	if (!memchr(client_out, '\0', sizeof(client_out)))
		return "(not terminated)";
	return client_out;
}

static const char *client(const char *peer, const char *xff)
{
	return client_n(&deftrust, peer, false, xff, xff ? strlen(xff) : 0);
}

#define CLIENT_IS(peer, xff, want)                                                                  \
	do {                                                                                        \
		const char *got_ = client((peer), (xff));                                           \
		CHECK(strcmp(got_, (want)) == 0);                                                   \
		if (strcmp(got_, (want)) != 0)                                                      \
			fprintf(stderr, "  peer %s, xff \"%s\": got \"%s\", want \"%s\"\n", (peer), \
				(xff) ? (const char *)(xff) : "(null)", got_, (want));              \
	} while (0)

static void test_client(void)
{
	/* No header, or an untrusted peer: the peer. */
	CLIENT_IS("127.0.0.1", NULL, "127.0.0.1");
	CLIENT_IS("127.0.0.1", "", "127.0.0.1");
	CLIENT_IS("203.0.113.5", "1.2.3.4", "203.0.113.5");
	CLIENT_IS("203.0.113.5", "127.0.0.1", "203.0.113.5");
	CLIENT_IS("2001:db8::5", "1.2.3.4", "2001:db8::5");

	/* Trusted peer: the rightmost hop that is not trusted. */
	CLIENT_IS("127.0.0.1", "1.2.3.4", "1.2.3.4");
	CLIENT_IS("::1", "1.2.3.4", "1.2.3.4");
	CLIENT_IS("127.0.0.1", "9.9.9.9, 1.2.3.4", "1.2.3.4");
	CLIENT_IS("127.0.0.1", "9.9.9.9, 1.2.3.4, 127.0.0.2", "1.2.3.4");
	CLIENT_IS("127.0.0.1", "1.2.3.4,127.0.0.2,::1,127.9.9.9", "1.2.3.4");
	CLIENT_IS("127.0.0.1", "2001:db8::1, ::1", "2001:db8::1");
	CLIENT_IS("127.0.0.1", "1.2.3.4, ::ffff:127.0.0.9", "1.2.3.4");
	CLIENT_IS("127.0.0.1", "::ffff:1.2.3.4", "::ffff:1.2.3.4");

	/* All trusted: the leftmost. */
	CLIENT_IS("127.0.0.1", "127.0.0.3", "127.0.0.3");
	CLIENT_IS("127.0.0.1", "127.0.0.3, 127.0.0.2", "127.0.0.3");
	CLIENT_IS("127.0.0.1", "::1, 127.0.0.2", "::1");

	/* A garbage hop ends the walk: the answer is the last hop taken. */
	CLIENT_IS("127.0.0.1", "garbage", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "1.2.3.4, garbage", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "1.2.3.4, garbage, 127.0.0.2", "127.0.0.2");
	CLIENT_IS("127.0.0.1", "garbage, 1.2.3.4", "1.2.3.4");
	CLIENT_IS("127.0.0.1", "1.2.3.4:5678", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "[2001:db8::1]", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "1.2.3.04", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "unknown", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "1.2.3.4 5.6.7.8", "127.0.0.1");

	/* Whitespace around hops. */
	CLIENT_IS("127.0.0.1", "  1.2.3.4\t ,\t5.6.7.8  ", "5.6.7.8");
	CLIENT_IS("127.0.0.1", "\t1.2.3.4\t", "1.2.3.4");
	CLIENT_IS("127.0.0.1", " 1.2.3.4 , 127.0.0.2 ", "1.2.3.4");

	/* Empty entries end the walk like garbage. */
	CLIENT_IS("127.0.0.1", ",", "127.0.0.1");
	CLIENT_IS("127.0.0.1", " ", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "1.2.3.4,", "127.0.0.1");
	CLIENT_IS("127.0.0.1", "1.2.3.4, ", "127.0.0.1");
	CLIENT_IS("127.0.0.1", ",1.2.3.4", "1.2.3.4");
	CLIENT_IS("127.0.0.1", "1.2.3.4,,5.6.7.8", "5.6.7.8");
	CLIENT_IS("127.0.0.1", "1.2.3.4,,127.0.0.2", "127.0.0.2");
	CLIENT_IS("127.0.0.1", "1.2.3.4, ,127.0.0.2", "127.0.0.2");

	/* Unix socket peers are trusted only when the list says "unix". */
	CHECK(strcmp(client_n(&deftrust, "unix", true, "1.2.3.4", 7), "1.2.3.4") == 0);
	struct trust nounix;
	CHECK(parses(&nounix, "127.0.0.0/8"));
	CHECK(strcmp(client_n(&nounix, "unix", true, "1.2.3.4", 7), "unix") == 0);
	/* A unix peer goes by the flag, not by its text. */
	CHECK(strcmp(client_n(&nounix, "127.0.0.1", true, "1.2.3.4", 7), "127.0.0.1") == 0);
	/* An empty list trusts nobody. */
	struct trust none;
	CHECK(parses(&none, ""));
	CHECK(strcmp(client_n(&none, "127.0.0.1", false, "1.2.3.4", 7), "127.0.0.1") == 0);

	/* xff_len bounds the value: nothing after it is read (guard page) and
	 * a longer buffer is cut where the length says. */
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, "1.2.3.4, 5.6.7.8", 7), "1.2.3.4") == 0);
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, "1.2.3.4, 5.6.7.8", 12), "127.0.0.1") == 0);
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, "5.6.7.8", 1), "127.0.0.1") == 0);

	/* Long values: many hops, long hops, long runs of blanks. */
	size_t cap = 200000;
	char *v = malloc(cap);
	size_t n = 0;
	while (n + 32 < cap - 32)
		n += (size_t)snprintf(v + n, cap - n, "10.%u.%u.%u, ", (unsigned)(n % 251), (unsigned)(n % 13),
				      (unsigned)(n % 7));
	n += (size_t)snprintf(v + n, cap - n, "5.6.7.8");
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, v, n), "5.6.7.8") == 0);
	n = 0;
	while (n + 16 < cap - 16)
		n += (size_t)snprintf(v + n, cap - n, "127.0.0.%u,", (unsigned)(n % 200 + 1));
	n += (size_t)snprintf(v + n, cap - n, "127.0.0.1");
	const char *got = client_n(&deftrust, "127.0.0.1", false, v, n);
	char first[32];
	snprintf(first, sizeof(first), "%.*s", (int)strcspn(v, ","), v);
	CHECK(strcmp(got, first) == 0); /* all trusted: the leftmost */
	memset(v, 'a', cap);
	memcpy(v + cap - 9, ",1.2.3.4", 8);
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, v, cap - 1), "1.2.3.4") == 0);
	memcpy(v + cap - 20, ", 1.2.3.4", 9);
	memset(v + cap - 11, 'a', 11);
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, v, cap), "127.0.0.1") == 0);
	memset(v, ' ', cap);
	memcpy(v + 1000, "1.2.3.4", 7);
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, v, cap), "1.2.3.4") == 0);
	memset(v, '\t', cap);
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, v, cap), "127.0.0.1") == 0);
	memset(v, ',', cap);
	CHECK(strcmp(client_n(&deftrust, "127.0.0.1", false, v, cap), "127.0.0.1") == 0);
	free(v);

	/* A small output buffer: truncated, still terminated. */
	char small[5];
	memset(small, 'X', sizeof(small));
	addr_client(&deftrust, "127.0.0.1", false, "203.0.113.77", 12, small, sizeof(small));
	CHECK(memchr(small, '\0', sizeof(small)) != NULL);
	CHECK(strncmp(small, "203.", 4) == 0);
	memset(small, 'X', sizeof(small));
	addr_client(&deftrust, "203.0.113.9", false, NULL, 0, small, sizeof(small));
	CHECK(memchr(small, '\0', sizeof(small)) != NULL);
}

/* The rule, written out plainly: from the right, each hop (blanks
 * trimmed) must be an address; take it, and stop at the first untrusted. */
static void ref_client(const struct trust *t, const char *peer, bool peer_unix, const char *xff, size_t n, char *out,
		       size_t outlen)
{
	snprintf(out, outlen, "%s", peer);
	if (!(peer_unix ? t->unix_socket : trust_has(t, peer)) || !xff || !n)
		return;
	/* Split into entries first. */
	const char *ent[64];
	size_t len[64], ne = 0, s = 0;
	for (size_t i = 0; i <= n && ne < 64; i++)
		if (i == n || xff[i] == ',') {
			ent[ne] = xff + s;
			len[ne++] = i - s;
			s = i + 1;
		}
	for (size_t k = ne; k-- > 0;) {
		const char *p = ent[k];
		size_t l = len[k];
		while (l && (*p == ' ' || *p == '\t')) {
			p++;
			l--;
		}
		while (l && (p[l - 1] == ' ' || p[l - 1] == '\t'))
			l--;
		char hop[128];
		unsigned char bin[16];
		if (l == 0 || l >= sizeof(hop))
			return;
		memcpy(hop, p, l);
		hop[l] = '\0';
		if (inet_pton(AF_INET, hop, bin) != 1 && inet_pton(AF_INET6, hop, bin) != 1)
			return;
		size_t m = l < outlen ? l : outlen - 1;
		memcpy(out, hop, m);
		out[m] = '\0';
		if (!trust_has(t, hop))
			return;
	}
}

static void test_client_random(void)
{
	static const char *const pool[] = {
		"1.2.3.4",        "127.0.0.1",   "127.8.9.10", "::1",     "2001:db8::7", "::ffff:127.0.0.5",
		"::ffff:9.8.7.6", "10.0.0.1",    "garbage",    "",        " ",           "1.2.3",
		"fe80::1%lo",     "192.168.7.7", "10.255.0.1", "0.0.0.0",
	};
	struct trust t2;
	CHECK(parses(&t2, "10.0.0.0/8,192.168.0.0/16,unix"));
	const struct trust *ts[] = { &deftrust, &t2 };
	static const char *const peers[] = { "127.0.0.1", "::1", "10.1.1.1", "192.168.7.7", "8.8.8.8", "unix" };
	int bad = 0;
	for (int iter = 0; iter < 20000 && bad < 5; iter++) {
		char xff[512];
		size_t n = 0;
		unsigned hops = rnd32() % 7;
		for (unsigned h = 0; h < hops; h++) {
			if (h)
				xff[n++] = ',';
			static const char *const blanks[] = { "", "", " ", "\t", "  " };
			n += (size_t)snprintf(xff + n, sizeof(xff) - n, "%s%s%s", blanks[rnd32() % 5],
					      pool[rnd32() % (sizeof(pool) / sizeof(pool[0]))], blanks[rnd32() % 5]);
		}
		const struct trust *t = ts[rnd32() % 2];
		const char *peer = peers[rnd32() % (sizeof(peers) / sizeof(peers[0]))];
		bool pu = strcmp(peer, "unix") == 0;
		char want[64];
		ref_client(t, peer, pu, xff, n, want, sizeof(want));
		const char *got = client_n(t, peer, pu, hops ? xff : NULL, n);
		if (strcmp(got, want) != 0) {
			fprintf(stderr, "  peer %s, xff \"%.*s\": got \"%s\", want \"%s\"\n", peer, (int)n, xff, got,
				want);
			bad++;
		}
	}
	CHECK_EQ_INT(bad, 0);
}

int main(void)
{
	arena_init();
	if (!parses(&deftrust, "127.0.0.0/8,::1,unix"))
		return 2;
	test_trust_parse();
	test_trust_has();
	test_trust_has_random();
	test_peer_text();
	test_client();
	test_client_random();
	return check_done("test_addr");
}
