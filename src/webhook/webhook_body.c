/* SPDX-License-Identifier: BSD-2-Clause */
/* webhook_body.c: the webhook's rows, batch body and signature
 * (webhook_body.h). */
#include "webhook/webhook_body.h"

#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "common/util.h"
#include "presence/presence.h"

static bool starts(const char *s, size_t n, const char *prefix)
{
	size_t p = strlen(prefix);
	return n >= p && memcmp(s, prefix, p) == 0;
}

enum webhook_kind webhook_kind_of(const struct store_event *ev, bool publishes)
{
	/* No publisher may write a '$' topic (topic.h): these are herald's. */
	if (starts(ev->topic, ev->topic_len, PRESENCE_TOPIC_PREFIX))
		return WEBHOOK_PRESENCE;
	/* A subscription's event (mercure_subs.c): type "mercure" on a
	 * $mercure/ topic, its data the subscription's document. A Mercure
	 * publish may have a $mercure/ row topic too (a topic too long for a
	 * row), and any type, but its data is the publisher's: the document's
	 * opening tells them apart. */
	if (ev->type_len == 7 && memcmp(ev->type, "mercure", 7) == 0 && starts(ev->topic, ev->topic_len, "$mercure/") &&
	    starts(ev->data, ev->data_len, "{\"id\":") &&
	    memmem(ev->data, ev->data_len, ",\"type\":\"subscription\"", 22))
		return WEBHOOK_SUBSCRIPTION;
	return publishes ? WEBHOOK_PUBLISH : WEBHOOK_SKIP;
}

static void add(struct webhook_body *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = xrealloc(b->p, b->cap);
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void adds(struct webhook_body *b, const char *s)
{
	add(b, s, strlen(s));
}

/* s[0..n) as a JSON string. Valid UTF-8 goes as is but for the escapes
 * JSON needs; text that is not UTF-8 has each byte above 0x7f as \u00XX. */
static void add_json(struct webhook_body *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	bool utf8 = text_utf8_valid((const unsigned char *)s, n);
	add(b, "\"", 1);
	size_t run = 0; /* bytes before i that need no escape, not yet added */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[6];
		size_t en = 0;
		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			en = 2;
		} else if (c == '\n') {
			memcpy(esc, "\\n", 2);
			en = 2;
		} else if (c < 0x20 || c == 0x7f || (c > 0x7f && !utf8)) {
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			en = 6;
		}
		if (!en) {
			run++;
			continue;
		}
		add(b, s + i - run, run);
		run = 0;
		add(b, esc, en);
	}
	add(b, s + n - run, run);
	add(b, "\"", 1);
}

void webhook_body_begin(struct webhook_body *b)
{
	*b = (struct webhook_body){ 0 };
	adds(b, "{\"events\":[");
}

void webhook_body_add(struct webhook_body *b, enum webhook_kind k, const struct store_event *ev)
{
	static const char *const kinds[] = { "", "presence", "subscription", "publish" };
	char num[64];
	snprintf(num, sizeof(num), "%s{\"id\":%lld,\"kind\":\"", b->count ? "," : "", (long long)ev->id);
	adds(b, num);
	adds(b, kinds[k]);
	adds(b, "\",\"type\":");
	add_json(b, ev->type, ev->type_len);
	adds(b, ",\"topic\":");
	add_json(b, ev->topic, ev->topic_len);
	adds(b, ",\"data\":");
	add_json(b, ev->data, ev->data_len);
	snprintf(num, sizeof(num), ",\"time\":%lld}", (long long)ev->created_at);
	adds(b, num);
	if (!b->count)
		b->first = ev->id;
	b->last = ev->id;
	b->count++;
}

void webhook_body_end(struct webhook_body *b)
{
	adds(b, "]}");
}

void webhook_body_free(struct webhook_body *b)
{
	free(b->p);
	*b = (struct webhook_body){ 0 };
}

void webhook_sign(const char *secret, int64_t ts, const char *body, size_t n, char hex[WEBHOOK_SIG_HEX])
{
	static const char digits[] = "0123456789abcdef";
	char stamp[32];
	int sl = snprintf(stamp, sizeof(stamp), "%lld.", (long long)ts);
	unsigned char mac[EVP_MAX_MD_SIZE];
	size_t len = 0;
	char digest[] = "SHA256";
	OSSL_PARAM params[] = { OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
				OSSL_PARAM_construct_end() };
	EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
	if (!ctx || !EVP_MAC_init(ctx, (const unsigned char *)secret, strlen(secret), params) ||
	    !EVP_MAC_update(ctx, (const unsigned char *)stamp, (size_t)sl) ||
	    !EVP_MAC_update(ctx, (const unsigned char *)body, n) || !EVP_MAC_final(ctx, mac, &len, sizeof(mac)))
		len = 0; /* out of memory: an empty signature, which no application accepts */
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(hmac);
	for (size_t i = 0; i < len && i < 32; i++) {
		hex[2 * i] = digits[mac[i] >> 4];
		hex[2 * i + 1] = digits[mac[i] & 15];
	}
	hex[len < 32 ? 2 * len : 64] = '\0';
}
