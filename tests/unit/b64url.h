/* SPDX-License-Identifier: BSD-2-Clause */
/* b64url.h: base64url without padding (RFC 7515), for the unit tests that
 * sign tokens and write JWK members. out holds 4 * n / 3 + 4 bytes. */
#ifndef HERALD_TEST_B64URL_H
#define HERALD_TEST_B64URL_H

#include <stddef.h>

static inline void b64url(const unsigned char *in, size_t n, char *out)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);
		out[o++] = abc[v >> 18];
		out[o++] = abc[(v >> 12) & 63];
		if (i + 1 < n)
			out[o++] = abc[(v >> 6) & 63];
		if (i + 2 < n)
			out[o++] = abc[v & 63];
	}
	out[o] = '\0';
}

#endif
