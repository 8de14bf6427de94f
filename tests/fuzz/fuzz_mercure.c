/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_mercure.c: fuzz target for the Mercure endpoint's pure parts
 * (src/mercure/mercure_match.c, src/store/mercure_update.c). The input is a JSON header
 * line, then a JSON payload line, then a value, then a subscription's
 * query string.
 * Invariants:
 *   - mercure_value_valid agrees with a reference that decodes UTF-8 by
 *     hand and applies the rule (C0, DEL, C1, the format characters listed
 *     in the reference, length 1 to 2048);
 *   - mercure_read_claims on any header and payload either refuses the
 *     token with nothing granted or grants matchers that are valid values
 *     and match their own text when exact;
 *   - a block made of the value as id and topic reads back the same;
 *   - the query either is refused with a reason or gives matchers (at
 *     least one, valid, at most MERCURE_MAX_WIDTH wide together), and
 *     judging the value as an update's topic with them takes at most
 *     (width + URL patterns) steps per byte of the topic resolved
 *     (urlpattern_steps: work, not time), for the query's matchers and
 *     the token's alike.
 * Over-reads are the sanitizers' (and the driver's guard page's). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "common/json.h"
#include "auth/jwt.h"
#include "mercure/mercure_match.h"
#include "store/mercure_update.h"
#include "mercure/urlpattern.h"

#define BASE "https://hub.example/.well-known/mercure"

static bool ref_format(uint32_t c)
{
	return c == 0xAD || (c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F ||
	       (c >= 0x890 && c <= 0x891) || c == 0x8E2 || c == 0x180E || (c >= 0x200B && c <= 0x200F) ||
	       (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) ||
	       c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || c == 0x110BD || c == 0x110CD ||
	       (c >= 0x13430 && c <= 0x1343F) || (c >= 0x1BCA0 && c <= 0x1BCA3) || (c >= 0x1D173 && c <= 0x1D17A) ||
	       c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F);
}

/* The rule, decoding UTF-8 strictly (shortest form, no surrogates, at
 * most U+10FFFF). */
static bool ref_valid(const unsigned char *s, size_t n)
{
	if (n == 0 || n > 2048)
		return false;
	for (size_t i = 0; i < n;) {
		uint32_t c;
		size_t k;
		if (s[i] < 0x80) {
			c = s[i];
			k = 1;
		} else if (s[i] >= 0xC2 && s[i] <= 0xDF) {
			c = s[i] & 0x1F;
			k = 2;
		} else if (s[i] >= 0xE0 && s[i] <= 0xEF) {
			c = s[i] & 0x0F;
			k = 3;
		} else if (s[i] >= 0xF0 && s[i] <= 0xF4) {
			c = s[i] & 0x07;
			k = 4;
		} else {
			return false;
		}
		if (i + k > n)
			return false;
		for (size_t j = 1; j < k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return false;
			c = c << 6 | (s[i + j] & 0x3F);
		}
		if ((k == 3 && c < 0x800) || (k == 4 && (c < 0x10000 || c > 0x10FFFF)) || (c >= 0xD800 && c <= 0xDFFF))
			return false;
		if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || ref_format(c))
			return false;
		i += k;
	}
	return true;
}

/* The next line of data[*at..n). */
static const char *line(const uint8_t *data, size_t n, size_t *at, size_t *len)
{
	const char *p = (const char *)data + *at;
	const char *nl = *at < n ? memchr(p, '\n', n - *at) : NULL;
	*len = nl ? (size_t)(nl - p) : n - (*at < n ? *at : n);
	*at += *len + (nl ? 1 : 0);
	return p;
}

/* Judge topic[0..n) with l, within the steps its width allows. */
static bool judge(const struct mercure_matchers *l, const char *topic, size_t n)
{
	uint64_t before = urlpattern_steps();
	bool hit = mercure_matchers_match(l, topic, n, BASE);
	uint64_t bound = (uint64_t)(l->width + l->n) * (n + 2 * strlen(BASE) + 1);
	FUZZ_ASSERT(urlpattern_steps() - before <= bound);
	return hit;
}

static void check_list(const struct mercure_matchers *l)
{
	FUZZ_ASSERT(l->n <= MERCURE_MAX_MATCHERS && l->width <= MERCURE_MAX_WIDTH);
	for (size_t i = 0; i < l->n; i++) {
		FUZZ_ASSERT(mercure_value_valid(l->v[i].text, l->v[i].len));
		bool self = judge(l, l->v[i].text, l->v[i].len);
		if (l->v[i].kind == MERCURE_EXACT)
			FUZZ_ASSERT(self);
	}
}

int fuzz_one(const uint8_t *data, size_t size)
{
	size_t at = 0, hn, pn, vn;
	const char *h = line(data, size, &at, &hn);
	const char *p = line(data, size, &at, &pn);
	const char *v = line(data, size, &at, &vn);
	size_t qn;
	const char *q = line(data, size, &at, &qn);

	FUZZ_ASSERT(mercure_value_valid(v, vn) == ref_valid((const unsigned char *)v, vn));

	struct json_value header, payload;
	if (json_parse(h, hn, &header) == JSON_OK && json_parse(p, pn, &payload) == JSON_OK &&
	    header.type == JSON_OBJECT && payload.type == JSON_OBJECT) {
		struct mercure_grants g = { .base = BASE, .audience_checked = (size & 1) != 0 };
		int e = mercure_read_claims(&g, &header, &payload);
		if (e != JWT_OK)
			FUZZ_ASSERT(g.publish.n == 0 && g.subscribe.n == 0);
		check_list(&g.publish);
		check_list(&g.subscribe);
		(void)judge(&g.subscribe, v, vn);
		mercure_grants_free(&g);
	}

	struct mercure_matchers want = { 0 };
	struct mercure_query mq;
	const char *why = mercure_query_read((struct http_slice){ q, qn }, BASE, &want, &mq);
	char *last_id = mq.last_id;
	FUZZ_ASSERT(why || want.n > 0);
	check_list(&want);
	(void)judge(&want, v, vn);
	free(last_id);
	mercure_matchers_free(&want);

	if (mercure_value_valid(v, vn)) {
		char *text = malloc(vn + 1);
		memcpy(text, v, vn);
		text[vn] = '\0';
		size_t len;
		char *b = mercure_block_new(text, "", &text, 1, &len);
		struct mercure_block mb;
		FUZZ_ASSERT(mercure_block_parse(b, len, &mb));
		FUZZ_ASSERT(mb.id_len == vn && memcmp(mb.id, v, vn) == 0 && mb.retry_len == 0);
		const char *tp = mb.topics, *end = mb.topics + mb.topics_len, *t;
		size_t tl;
		FUZZ_ASSERT(mercure_block_next_topic(&tp, end, &t, &tl) && tl == vn && memcmp(t, v, vn) == 0);
		FUZZ_ASSERT(!mercure_block_next_topic(&tp, end, &t, &tl));
		free(b);
		free(text);
	}
	return 0;
}
