/* SPDX-License-Identifier: BSD-2-Clause */
/* mercure_match.c: Mercure topic matchers, value rules and token rights
 * (mercure_match.h). */
#include "mercure/mercure_match.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"
#include "common/json.h"
#include "auth/jwt.h"
#include "common/text.h"
#include "mercure/urlpattern.h"
#include "common/util.h"

/* Unicode format characters (general category Cf) below U+10000 and the
 * tag characters, as ranges. */
static bool is_format_char(uint32_t c)
{
	static const uint32_t ranges[][2] = {
		{ 0x00AD, 0x00AD },   { 0x0600, 0x0605 },   { 0x061C, 0x061C },   { 0x06DD, 0x06DD },
		{ 0x070F, 0x070F },   { 0x0890, 0x0891 },   { 0x08E2, 0x08E2 },   { 0x180E, 0x180E },
		{ 0x200B, 0x200F },   { 0x202A, 0x202E },   { 0x2060, 0x2064 },   { 0x2066, 0x206F },
		{ 0xFEFF, 0xFEFF },   { 0xFFF9, 0xFFFB },   { 0x110BD, 0x110BD }, { 0x110CD, 0x110CD },
		{ 0x13430, 0x1343F }, { 0x1BCA0, 0x1BCA3 }, { 0x1D173, 0x1D17A }, { 0xE0001, 0xE0001 },
		{ 0xE0020, 0xE007F },
	};
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		if (c >= ranges[i][0] && c <= ranges[i][1])
			return true;
	return false;
}

bool mercure_value_valid(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	if (n == 0 || n > MERCURE_MAX_VALUE || !text_utf8_valid(u, n))
		return false;
	for (size_t i = 0; i < n;) {
		uint32_t c;
		size_t k;
		if (u[i] < 0x80) {
			c = u[i];
			k = 1;
		} else if (u[i] < 0xE0) {
			c = (uint32_t)(u[i] & 0x1F) << 6 | (u[i + 1] & 0x3F);
			k = 2;
		} else if (u[i] < 0xF0) {
			c = (uint32_t)(u[i] & 0x0F) << 12 | (uint32_t)(u[i + 1] & 0x3F) << 6 | (u[i + 2] & 0x3F);
			k = 3;
		} else {
			c = (uint32_t)(u[i] & 0x07) << 18 | (uint32_t)(u[i + 1] & 0x3F) << 12 |
			    (uint32_t)(u[i + 2] & 0x3F) << 6 | (u[i + 3] & 0x3F);
			k = 4;
		}
		if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0x9F) || is_format_char(c))
			return false;
		i += k;
	}
	return true;
}

const char *mercure_matchers_add(struct mercure_matchers *l, enum mercure_kind kind, const char *text, size_t n,
				 const char *base)
{
	if (!mercure_value_valid(text, n))
		return "a topic matcher must be 1 to 2048 bytes of UTF-8 without control or format characters";
	if (l->n >= MERCURE_MAX_MATCHERS)
		return "more than 64 topic matchers";
	struct mercure_matcher m = { .kind = kind, .text = xstrndup(text, n), .len = n };
	if (n == 1 && text[0] == '*') {
		m.kind = MERCURE_ANY;
	} else if (kind == MERCURE_URLPATTERN) {
		const char *why;
		m.up = urlpattern_new(text, n, base, &why);
		if (!m.up) {
			free(m.text);
			return why;
		}
		if (l->width + urlpattern_width(m.up) > MERCURE_MAX_WIDTH) {
			urlpattern_free(m.up);
			free(m.text);
			return "URL patterns wider than 256 in all (the widths of one subscription's patterns add up; "
			       "each is at most 64)";
		}
		l->width += urlpattern_width(m.up);
	}
	l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = m;
	return NULL;
}

bool mercure_matchers_match(const struct mercure_matchers *l, const char *topic, size_t n, const char *base)
{
	/* The topic is taken apart once, at the first URL pattern. */
	struct urlpattern_url u;
	bool parsed = false, hit = false;
	for (size_t i = 0; i < l->n && !hit; i++) {
		const struct mercure_matcher *m = &l->v[i];
		if (m->kind == MERCURE_ANY) {
			hit = true;
		} else if (m->kind == MERCURE_EXACT) {
			hit = m->len == n && memcmp(m->text, topic, n) == 0;
		} else {
			if (!parsed)
				urlpattern_url_parse(&u, topic, n, base);
			parsed = true;
			hit = urlpattern_match_url(m->up, &u);
		}
	}
	if (parsed)
		urlpattern_url_free(&u);
	return hit;
}

/* The matcher type a "match..." parameter names; -1 when it is in the
 * reserved namespace but not a type herald knows, -2 when it is no
 * matcher parameter. */
static int matcher_param(const char *name)
{
	if (strcmp(name, "match") == 0 || strcmp(name, "match_exact") == 0)
		return MERCURE_EXACT;
	if (strcmp(name, "match_urlpattern") == 0)
		return MERCURE_URLPATTERN;
	if (strncasecmp(name, "match", 5) == 0)
		return -1;
	return -2;
}

/* The parameters a subscription takes (docs/mercure.md); a token parameter
 * (authorization, access_token) is known but not read. */
static const char *const sub_params[] = { "match", "match_exact", "match_urlpattern",
					  "topic", "lastEventID", "last_event_id" };

/* name folded for a near match: lower case, without '_' and '-', into
 * out; false when it does not fit. */
static bool fold(const char *name, char *out, size_t len)
{
	size_t k = 0;
	for (; *name; name++) {
		if (*name == '_' || *name == '-')
			continue;
		if (k + 1 >= len)
			return false;
		out[k++] = (char)tolower((unsigned char)*name);
	}
	out[k] = '\0';
	return true;
}

/* The parameter a subscription takes that name is likely a slip for: the
 * same but for case, '_' and '-', else within two edits of it; NULL for
 * none (or a name of fewer than four letters). */
static const char *near_param(const char *name)
{
	char f[32], g[32];
	if (!fold(name, f, sizeof(f)) || strlen(f) < 4)
		return NULL;
	const char *best = NULL;
	size_t best_d = 3;
	for (size_t i = 0; i < ARRAY_LEN(sub_params); i++) {
		fold(sub_params[i], g, sizeof(g));
		size_t d = text_distance(f, g, 2);
		if (d < best_d) {
			best_d = d;
			best = sub_params[i];
		}
	}
	return best;
}

/* Why the parameter name[0..n) is refused, into why: a name herald does
 * not know, or a matcher type it does not (matcher), with the parameter
 * it is likely a slip for. */
static const char *unknown_param(const char *name, size_t n, bool matcher, char *why, size_t len)
{
	char shown[44], hint[64] = "";
	const char *near = near_param(name);
	if (near)
		snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)", near);
	snprintf(why, len,
		 "%s \"%s\"%s: a subscription takes match, match_exact, match_urlpattern, topic, lastEventID and "
		 "last_event_id",
		 matcher ? "unknown topic matcher type" : "unknown query parameter",
		 text_shown(name, n, shown, sizeof(shown)), hint);
	return why;
}

const char *mercure_query_read(struct http_slice query, const char *base, struct mercure_matchers *want,
			       struct mercure_query *q)
{
	char *legacy_id = NULL;
	const char *why = NULL;
	size_t pos = 0;
	struct http_slice name, value;
	q->last_id = NULL;
	q->token_param = NULL;
	q->why[0] = '\0';
	while (!why && http_query_next(query, &pos, &name, &value)) {
		if (name.n == 0)
			continue; /* an empty part ("a=1&&b=2", a trailing '&') */
		size_t nn, vn;
		char *n = http_percent_decode_dup(name, &nn);
		char *v = n ? http_percent_decode_dup(value, &vn) : NULL;
		int kind = n ? matcher_param(n) : -2;
		if (!n || !v)
			why = "a query parameter with a malformed percent escape";
		else if (kind == -1)
			why = unknown_param(n, nn, true, q->why, sizeof(q->why));
		else if (kind >= 0)
			why = mercure_matchers_add(want, (enum mercure_kind)kind, v, vn, base);
		else if (strcmp(n, "topic") == 0)
			why = mercure_matchers_add(want, MERCURE_EXACT, v, vn, base);
		else if (strcmp(n, "last_event_id") == 0) {
			if (!q->last_id)
				q->last_id = xstrdup(v);
		} else if (strcmp(n, "lastEventID") == 0) {
			if (!legacy_id)
				legacy_id = xstrdup(v);
		} else if (strcmp(n, "authorization") == 0)
			q->token_param = "authorization";
		else if (strcmp(n, "access_token") == 0)
			q->token_param = "access_token";
		else
			why = unknown_param(n, nn, false, q->why, sizeof(q->why));
		free(n);
		free(v);
	}
	if (!why && want->n == 0)
		why = "a subscription needs at least one topic matcher (match, match_urlpattern or topic)";
	if (!q->last_id)
		q->last_id = legacy_id;
	else
		free(legacy_id);
	return why;
}

void mercure_matchers_free(struct mercure_matchers *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].text);
		urlpattern_free(l->v[i].up);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
	l->width = 0;
}

void mercure_grants_free(struct mercure_grants *g)
{
	mercure_matchers_free(&g->subscribe);
	mercure_matchers_free(&g->publish);
}

/* Whether the JSON string v is s. */
static bool is(const struct json_value *v, const char *s)
{
	return v->type == JSON_STRING && json_string_is(v, s, strlen(s));
}

/* Add the JSON string v as a matcher of kind to l; false when it is not
 * a string or not a matcher herald takes. */
static bool add_value(struct mercure_matchers *l, enum mercure_kind kind, const struct json_value *v, const char *base)
{
	if (v->type != JSON_STRING)
		return false;
	size_t n;
	char *text = json_string_dup(v, &n);
	bool ok = strlen(text) == n && !mercure_matchers_add(l, kind, text, n, base);
	free(text);
	return ok;
}

/* One Mercure authorization detail: actions (strings; unknown ones grant
 * nothing) and topics (matcher objects). False when malformed. */
static bool read_detail(struct mercure_grants *g, const struct json_value *d)
{
	struct json_value actions, topics, e, key, mv, tv;
	struct json_iter it;
	bool pub = false, sub = false;
	if (!json_member(d, "actions", 7, &actions) || actions.type != JSON_ARRAY ||
	    !json_member(d, "topics", 6, &topics) || topics.type != JSON_ARRAY)
		return false;
	size_t nactions = 0, ntopics = 0;
	json_iter_start(&it, &actions);
	while (json_iter_next(&it, NULL, &e)) {
		if (e.type != JSON_STRING)
			return false;
		pub |= is(&e, "publish");
		sub |= is(&e, "subscribe");
		nactions++;
	}
	json_iter_start(&it, &topics);
	while (json_iter_next(&it, NULL, &e)) {
		if (e.type != JSON_OBJECT || !json_member(&e, "match", 5, &mv))
			return false;
		enum mercure_kind kind = MERCURE_EXACT;
		if (json_member(&e, "match_type", 10, &tv)) {
			if (is(&tv, "urlpattern"))
				kind = MERCURE_URLPATTERN;
			else if (!is(&tv, "exact"))
				return false; /* a matcher type herald does not know */
		}
		(void)key;
		if ((pub && !add_value(&g->publish, kind, &mv, g->base)) ||
		    (sub && !add_value(&g->subscribe, kind, &mv, g->base)))
			return false;
		if (!pub && !sub) {
			/* Still checked: a malformed matcher refuses the token. */
			struct mercure_matchers scratch = { 0 };
			bool ok = add_value(&scratch, kind, &mv, g->base);
			mercure_matchers_free(&scratch);
			if (!ok)
				return false;
		}
		ntopics++;
	}
	return nactions > 0 && ntopics > 0;
}

/* The older claim: "mercure": {"publish": [...], "subscribe": [...]}, each
 * a list of topics (exact) or "*". */
static bool read_legacy(struct mercure_grants *g, const struct json_value *payload)
{
	struct json_value m, list, e;
	struct json_iter it;
	if (!json_member(payload, "mercure", 7, &m))
		return true;
	if (m.type != JSON_OBJECT)
		return false;
	static const char *const names[2] = { "publish", "subscribe" };
	struct mercure_matchers *into[2] = { &g->publish, &g->subscribe };
	for (int i = 0; i < 2; i++) {
		if (!json_member(&m, names[i], strlen(names[i]), &list))
			continue;
		if (list.type != JSON_ARRAY)
			return false;
		json_iter_start(&it, &list);
		while (json_iter_next(&it, NULL, &e))
			if (!add_value(into[i], MERCURE_EXACT, &e, g->base))
				return false;
	}
	return true;
}

int mercure_read_claims(void *arg, const struct json_value *header, const struct json_value *payload)
{
	struct mercure_grants *g = arg;
	struct json_value typ, details, d, type;
	struct json_iter it;
	bool ok = true;
	int fault = JWT_MALFORMED;
	if (json_member(header, "typ", 3, &typ) && typ.type == JSON_STRING) {
		/* Compared without "application/" and case-insensitively (RFC 7515 4.1.9). */
		size_t n;
		char *t = json_string_dup(&typ, &n);
		const char *v = strncasecmp(t, "application/", 12) == 0 ? t + 12 : t;
		g->access_token = strlen(t) == n && strcasecmp(v, "at+jwt") == 0;
		free(t);
	}
	if (g->access_token) {
		/* RFC 9068: an issuer, this hub among the audiences (jwt.c has
		 * already held aud and iss to jwt_audience and jwt_issuer when
		 * set), and the rights in authorization_details alone. */
		struct json_value iss, aud, a;
		ok = json_member(payload, "iss", 3, &iss) && iss.type == JSON_STRING;
		bool for_us = false;
		if (json_member(payload, "aud", 3, &aud)) {
			if (aud.type == JSON_ARRAY) {
				json_iter_start(&it, &aud);
				while (!for_us && json_iter_next(&it, NULL, &a))
					for_us = is(&a, g->base);
			} else {
				for_us = is(&aud, g->base);
			}
		}
		if (!ok)
			fault = JWT_BAD_ISSUER;
		else if (!for_us && !g->audience_checked)
			fault = JWT_BAD_AUDIENCE;
		ok = ok && (for_us || g->audience_checked);
		if (ok && json_member(payload, "authorization_details", 21, &details)) {
			if (details.type != JSON_ARRAY)
				ok = false;
			json_iter_start(&it, &details);
			while (ok && json_iter_next(&it, NULL, &d)) {
				if (d.type != JSON_OBJECT || !json_member(&d, "type", 4, &type))
					ok = false;
				else if (is(&type, "https://mercure.rocks/authorization-detail"))
					ok = read_detail(g, &d);
			}
		}
	} else {
		ok = read_legacy(g, payload);
	}
	if (!ok) {
		mercure_grants_free(g);
		return fault;
	}
	return JWT_OK;
}
