/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_jwks.c: fuzz target for jwks_parse in src/auth/jwks.c. An input is
 * the text of a JWK Set. Invariants:
 *   - a refusal leaves the set empty and says why in one line that names
 *     the set's shape or a key (keys[i]) and is never empty;
 *   - an accepted set has 1 to JWKS_MAX_KEYS keys, each with the material
 *     of its algorithm (a secret of 32 to 4096 bytes for HS256, a public
 *     key of the algorithm's type otherwise), a kid on every key when there
 *     are several, kids all different and each found by jwks_find to its
 *     own key, and an issuer that is non-empty when present;
 *   - parsing the same text again gives the same answer (nothing is kept
 *     between calls).
 * Leaks and over-reads are the sanitizers' (and the driver's guard page's).
 */
#include <string.h>

#include "fuzz.h"
#include "auth/jwks.h"

static int parse(const uint8_t *data, size_t size, struct jwks *s, char *err, size_t errlen)
{
	memset(err, 0, errlen);
	return jwks_parse((const char *)data, size, s, err, errlen);
}

int fuzz_one(const uint8_t *data, size_t size)
{
	struct jwks s;
	char err[512];
	int r = parse(data, size, &s, err, sizeof(err));
	if (r < 0) {
		FUZZ_ASSERT(r == -1 && s.n == 0 && s.keys == NULL);
		FUZZ_ASSERT(err[0] != '\0' && strchr(err, '\n') == NULL);
		FUZZ_ASSERT(strncmp(err, "keys[", 5) == 0 || strncmp(err, "\"keys\": ", 8) == 0 ||
			    strncmp(err, "not a JSON object", 17) == 0);
	} else {
		FUZZ_ASSERT(r == 0 && s.n >= 1 && s.n <= JWKS_MAX_KEYS);
		for (size_t i = 0; i < s.n; i++) {
			const struct jwk *k = &s.keys[i];
			if (k->alg == JWK_HS256)
				FUZZ_ASSERT(!k->pkey && k->secret && k->secret_len >= JWK_SECRET_MIN &&
					    k->secret_len <= JWK_SECRET_MAX);
			else
				FUZZ_ASSERT(!k->secret && k->pkey && jwk_key_mismatch(k->pkey, k->alg) == NULL);
			FUZZ_ASSERT(k->kid || s.n == 1);
			if (k->kid)
				FUZZ_ASSERT(jwks_find(&s, k->kid, strlen(k->kid)) == k);
			FUZZ_ASSERT(!k->iss || k->iss[0]);
		}
	}
	struct jwks again;
	char err2[512];
	FUZZ_ASSERT(parse(data, size, &again, err2, sizeof(err2)) == r);
	FUZZ_ASSERT(again.n == s.n && (r == 0 || strcmp(err, err2) == 0));
	jwks_free(&again);
	jwks_free(&s);
	return 0;
}
