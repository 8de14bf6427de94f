/* SPDX-License-Identifier: BSD-2-Clause */
/* idempotency.c: Idempotency-Key parsing, publisher scopes and body
 * fingerprints (see idempotency.h). */
#include "store/idempotency.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"
#include "common/util.h"

int idem_key_parse(const char *value, size_t n, char *out, const char **why)
{
	if (n < 2 || value[0] != '"' || value[n - 1] != '"') {
		*why = "Idempotency-Key must be a quoted string, as in Idempotency-Key: \"8e03978e-40d5\"";
		return -1;
	}
	size_t k = 0;
	for (size_t i = 1; i < n - 1; i++) {
		unsigned char ch = (unsigned char)value[i];
		if (ch == '\\') {
			if (i + 1 == n - 1 || (value[i + 1] != '"' && value[i + 1] != '\\')) {
				*why = "Idempotency-Key: a backslash may only escape \" or \\";
				return -1;
			}
			ch = (unsigned char)value[++i];
		} else if (ch == '"') {
			*why = "Idempotency-Key: a quote inside the key must be escaped (\\\"), and nothing may follow "
			       "the closing quote";
			return -1;
		} else if (ch < 0x20 || ch > 0x7e) {
			*why = "Idempotency-Key may hold only printable ASCII characters";
			return -1;
		}
		if (k == IDEM_KEY_MAX) {
			*why = "Idempotency-Key is longer than 255 characters";
			return -1;
		}
		out[k++] = (char)ch;
	}
	if (k == 0) {
		*why = "Idempotency-Key is empty";
		return -1;
	}
	out[k] = '\0';
	return 0;
}

void idem_digest(const char *a, size_t alen, const char *b, size_t blen, char out[IDEM_HEX_LEN])
{
	unsigned char md[32];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(ctx, a, alen) != 1 ||
	    (b && (EVP_DigestUpdate(ctx, "", 1) != 1 || EVP_DigestUpdate(ctx, b, blen) != 1)) ||
	    EVP_DigestFinal_ex(ctx, md, &mdlen) != 1 || mdlen != sizeof(md)) {
		/* Out of memory inside OpenSSL: as xmalloc, not survivable. */
		fprintf(stderr, "herald: SHA-256 failed\n");
		abort();
	}
	EVP_MD_CTX_free(ctx);
	for (size_t i = 0; i < sizeof(md); i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* Decode base64url (no padding) from in into out (room for n * 3 / 4 + 1).
 * Returns the length, or -1 for a character outside the alphabet. */
static long b64url_decode(const char *in, size_t n, unsigned char *out)
{
	unsigned acc = 0;
	int bits = 0;
	long k = 0;
	for (size_t i = 0; i < n; i++) {
		int v;
		char ch = in[i];
		if (ch >= 'A' && ch <= 'Z')
			v = ch - 'A';
		else if (ch >= 'a' && ch <= 'z')
			v = ch - 'a' + 26;
		else if (ch >= '0' && ch <= '9')
			v = ch - '0' + 52;
		else if (ch == '-')
			v = 62;
		else if (ch == '_')
			v = 63;
		else
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[k++] = (unsigned char)(acc >> bits);
		}
	}
	return k;
}

/* The sub claim of a JWT's payload, copied into out (len bytes), or false
 * when there is none (or it does not fit). The token is verified already:
 * this only reads it. */
static bool jwt_subject(const char *tok, size_t n, char *out, size_t len)
{
	const char *dot1 = memchr(tok, '.', n);
	if (!dot1)
		return false;
	const char *p = dot1 + 1;
	const char *dot2 = memchr(p, '.', n - (size_t)(p - tok));
	if (!dot2)
		return false;
	size_t plen = (size_t)(dot2 - p);
	unsigned char *json = xmalloc(plen * 3 / 4 + 1);
	long jn = b64url_decode(p, plen, json);
	bool found = false;
	struct json_value root, key, v;
	struct json_iter it;
	if (jn > 0 && json_parse((const char *)json, (size_t)jn, &root) == JSON_OK && root.type == JSON_OBJECT) {
		json_iter_start(&it, &root);
		while (!found && json_iter_next(&it, &key, &v)) {
			if (!json_string_is(&key, "sub", 3) || v.type != JSON_STRING)
				continue;
			size_t sl;
			char *s = json_string_dup(&v, &sl);
			if (s && sl > 0 && sl < len && strlen(s) == sl) {
				memcpy(out, s, sl + 1);
				found = true;
			}
			free(s);
		}
	}
	free(json);
	return found;
}

void idem_publisher(const char *jwt, size_t jwt_len, bool static_token, const char *peer, char *out)
{
	char sub[256];
	if (jwt && jwt_subject(jwt, jwt_len, sub, sizeof(sub))) {
		snprintf(out, IDEM_PUBLISHER_MAX, "sub:%s", sub);
	} else if (jwt) {
		/* Without a subject the token itself is the publisher: a retry
		 * must then show the same token. */
		char d[IDEM_HEX_LEN];
		idem_digest(jwt, jwt_len, NULL, 0, d);
		snprintf(out, IDEM_PUBLISHER_MAX, "jwt:%s", d);
	} else if (static_token) {
		snprintf(out, IDEM_PUBLISHER_MAX, "token");
	} else {
		snprintf(out, IDEM_PUBLISHER_MAX, "peer:%s", peer);
	}
}
