/* SPDX-License-Identifier: BSD-2-Clause */
/* webhook_body.h: what a webhook request carries, as pure functions (no
 * I/O, unit-tested): which rows of the log are delivered and as what kind,
 * the JSON body of a batch, and its signature.
 *
 * Body: {"events":[{"id":N,"kind":K,"type":T,"topic":P,"data":D,"time":S},
 * ...]} in id order, where K is "presence" (a join or leave on a
 * $presence/ topic), "subscription" (a Mercure subscription's event) or
 * "publish" (any other event), D the event's data as a JSON string (bytes
 * that are not UTF-8 become \u00XX, one per byte), S its Unix seconds.
 *
 * Signature: HMAC-SHA256 with the secret over the timestamp's decimal
 * text, a '.', then the exact body bytes; sent as lowercase hex. */
#ifndef HERALD_WEBHOOK_BODY_H
#define HERALD_WEBHOOK_BODY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

enum webhook_kind {
	WEBHOOK_SKIP,         /* not delivered */
	WEBHOOK_PRESENCE,     /* presence.join / presence.leave */
	WEBHOOK_SUBSCRIPTION, /* a Mercure subscription opened or closed */
	WEBHOOK_PUBLISH,      /* any other event (with webhook_publishes) */
};

/* What ev is to the webhook; publishes only when publishes is set. */
enum webhook_kind webhook_kind_of(const struct store_event *ev, bool publishes);

/* A batch being built (owned by its builder; webhook_body_free). */
struct webhook_body {
	char *p;
	size_t n, cap;
	size_t count;        /* events in it */
	int64_t first, last; /* their ids */
};

/* Start an empty batch ({"events":[). */
void webhook_body_begin(struct webhook_body *b);
/* Append ev, of kind k (not WEBHOOK_SKIP). */
void webhook_body_add(struct webhook_body *b, enum webhook_kind k, const struct store_event *ev);
/* Close it (]}); p[0..n) is then the body, NUL-terminated. */
void webhook_body_end(struct webhook_body *b);
void webhook_body_free(struct webhook_body *b);

#define WEBHOOK_SIG_HEX 65 /* 64 hex digits and a NUL */

/* The signature of body[0..n) sent at Unix second ts, into hex. */
void webhook_sign(const char *secret, int64_t ts, const char *body, size_t n, char hex[WEBHOOK_SIG_HEX]);

#endif
