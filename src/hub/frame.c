/* SPDX-License-Identifier: BSD-2-Clause */
/* frame.c: SSE encoding of events, resets, heartbeats and the stream head. */
#include "hub/frame.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "common/log.h"
#include "store/mercure_update.h"
#include "common/util.h"

/* Length of the first line of s (up to CR or LF). */
static size_t line_len(const char *s, size_t n)
{
	size_t i = 0;
	while (i < n && s[i] != '\n' && s[i] != '\r')
		i++;
	return i;
}

/* A row whose frame would pass FRAME_MAX_BYTES (only another program's
 * INSERT can make one: publishes are bounded by max_body) keeps its id, so
 * readers stay in order, but carries a note instead of the data. */
static struct chunk *frame_too_large(const struct store_event *ev, size_t bytes)
{
	static const char fmt[] = "id: %lld\nevent: too_large\ndata: {\"id\":%lld,\"bytes\":%zu,\"limit\":%zu}\n\n";
	log_warn("event %lld would take %zu bytes as a frame, over the limit of %zu; sent as a too_large event",
		 (long long)ev->id, bytes, (size_t)FRAME_MAX_BYTES);
	int n = snprintf(NULL, 0, fmt, (long long)ev->id, (long long)ev->id, bytes, (size_t)FRAME_MAX_BYTES);
	struct chunk *c = chunk_new((size_t)n + 1);
	snprintf(c->data, (size_t)n + 1, fmt, (long long)ev->id, (long long)ev->id, bytes, (size_t)FRAME_MAX_BYTES);
	c->len = (uint32_t)n;
	return c;
}

/* "name" then value[0..n) and a line break at p; returns the end. */
static char *put_field(char *p, const char *name, const char *value, size_t n)
{
	size_t k = strlen(name);
	memcpy(p, name, k);
	memcpy(p + k, value, n);
	p[k + n] = '\n';
	return p + k + n + 1;
}

/* The most bytes data_lines writes for ev. Worst case: every data byte is
 * a line break, each costing "data: " + "\n". */
static size_t data_lines_cap(const struct store_event *ev)
{
	size_t lines = 1;
	for (size_t i = 0; i < ev->data_len; i++)
		if (ev->data[i] == '\n' || ev->data[i] == '\r')
			lines++;
	return ev->data_len + lines * 7 + 2;
}

/* ev's data as "data: " lines (LF, CRLF and CR each end one) and the
 * event's closing blank line, at p; returns the end. */
static char *data_lines(char *p, const struct store_event *ev)
{
	const char *d = ev->data ? ev->data : "";
	size_t n = ev->data ? ev->data_len : 0, i = 0;
	for (;;) {
		size_t l = line_len(d + i, n - i);
		memcpy(p, "data: ", 6);
		p += 6;
		memcpy(p, d + i, l);
		p += l;
		*p++ = '\n';
		i += l;
		if (i >= n)
			break;
		if (d[i] == '\r' && i + 1 < n && d[i + 1] == '\n')
			i++;
		i++;
		if (i == n) {
			/* A trailing line break means one more, empty, data line. */
			memcpy(p, "data: \n", 7);
			p += 7;
			break;
		}
	}
	*p++ = '\n';
	return p;
}

struct chunk *frame_event(const struct store_event *ev)
{
	const char *type = ev->type ? ev->type : "";
	size_t tlen = line_len(type, ev->type ? ev->type_len : 0);
	if (tlen == 0) {
		type = "message";
		tlen = 7;
	}
	size_t cap = 32 + 8 + tlen + 1 + data_lines_cap(ev);
	if (cap > FRAME_MAX_BYTES)
		return frame_too_large(ev, cap);
	struct chunk *c = chunk_new(cap);
	char *p = c->data;
	p += sprintf(p, "id: %lld\nevent: ", (long long)ev->id);
	memcpy(p, type, tlen);
	p += tlen;
	*p++ = '\n';
	p = data_lines(p, ev);
	c->len = (uint32_t)(p - c->data);
	return c;
}

struct chunk *frame_mercure(const struct store_event *ev)
{
	struct mercure_block b;
	char made[MERCURE_LOG_ID_LEN + 1];
	if (!ev->mercure || !mercure_block_parse(ev->mercure, ev->mercure_len, &b))
		b = (struct mercure_block){ .retry = "" };
	if (!b.id_len) {
		/* No id of the publisher's: the one made from the log and
		 * the row's number. */
		mercure_log_id(ev->id, made);
		b.id = made;
		b.id_len = MERCURE_LOG_ID_LEN;
	}
	const char *type = ev->type ? ev->type : "";
	size_t tlen = line_len(type, ev->type ? ev->type_len : 0);
	if (tlen == 7 && memcmp(type, "message", 7) == 0)
		tlen = 0; /* the default: no event: line, as the update had none */
	size_t cap = data_lines_cap(ev) + b.id_len + tlen + b.retry_len + 32;
	if (cap > FRAME_MAX_BYTES)
		return frame_too_large(ev, cap);
	struct chunk *c = chunk_new(cap);
	char *p = c->data;
	p = put_field(p, "id: ", b.id, b.id_len);
	if (tlen)
		p = put_field(p, "event: ", type, tlen);
	if (b.retry_len)
		p = put_field(p, "retry: ", b.retry, b.retry_len);
	p = data_lines(p, ev);
	c->len = (uint32_t)(p - c->data);
	return c;
}

/* Write s[0..n) as a JSON string (quotes included) at p; returns the end.
 * The caller reserves 6 bytes per input byte plus 2. */
static char *json_string(char *p, const char *s, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	*p++ = '"';
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (ch == '"' || ch == '\\') {
			*p++ = '\\';
			*p++ = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			memcpy(p, "\\u00", 4);
			p[4] = hex[ch >> 4];
			p[5] = hex[ch & 15];
			p += 6;
		} else {
			*p++ = (char)ch;
		}
	}
	*p++ = '"';
	return p;
}

struct chunk *frame_event_envelope(const struct store_event *ev)
{
	const char *type = ev->type && ev->type_len ? ev->type : "message";
	size_t tlen = ev->type && ev->type_len ? ev->type_len : 7;
	const char *topic = ev->topic ? ev->topic : "";
	size_t plen = ev->topic ? ev->topic_len : 0;
	const char *data = ev->data ? ev->data : "";
	size_t dlen = ev->data ? ev->data_len : 0;
	size_t cap = 128 + 6 * (tlen + plen + dlen);
	if (cap > FRAME_MAX_BYTES)
		return frame_too_large(ev, cap);
	struct chunk *c = chunk_new(cap);
	char *p = c->data;
	p += sprintf(p, "id: %lld\ndata: {\"type\":", (long long)ev->id);
	p = json_string(p, type, tlen);
	p += sprintf(p, ",\"topic\":");
	p = json_string(p, topic, plen);
	p += sprintf(p, ",\"data\":");
	p = json_string(p, data, dlen);
	p += sprintf(p, ",\"public\":%s,\"created_at\":%lld}\n\n", ev->public ? "true" : "false",
		     (long long)ev->created_at);
	c->len = (uint32_t)(p - c->data);
	return c;
}

struct chunk *frame_encode(enum frame_format f, const struct store_event *ev)
{
	switch (f) {
	case FRAME_ENVELOPE:
		return frame_event_envelope(ev);
	case FRAME_MERCURE:
		return frame_mercure(ev);
	default:
		return frame_event(ev);
	}
}

struct chunk *frame_reset(int64_t id, const char *reason, int64_t resume_id)
{
	static const char fmt[] =
		"id: %lld\nevent: reset\ndata: {\"reason\":\"%s\",\"last_event_id\":%lld,\"id\":%lld}\n\n";
	int n = snprintf(NULL, 0, fmt, (long long)id, reason, (long long)resume_id, (long long)id);
	struct chunk *c = chunk_new((size_t)n + 1);
	snprintf(c->data, (size_t)n + 1, fmt, (long long)id, reason, (long long)resume_id, (long long)id);
	c->len = (uint32_t)n; /* without snprintf's NUL */
	return c;
}

void frame_stream_head(struct http_head *h)
{
	http_head_init(h, 200);
	http_head_add(h, "Content-Type", "text/event-stream");
	http_head_add(h, "Cache-Control", "no-store");
	http_head_add(h, "X-Accel-Buffering", "no");
	http_head_add(h, "Connection", "close");
}

size_t frame_stream_open(int64_t retry_ms, char *buf, size_t len)
{
	int n = snprintf(buf, len, "retry: %lld\n: stream open\n\n", (long long)retry_ms);
	return n < 0 ? 0 : MIN((size_t)n, len - 1);
}

char *frame_refusal(struct http_head *h, int status, int64_t retry_ms, int64_t id, const char *cause, size_t *len)
{
	/* One event, not a comment: some clients take an id only from an event
	 * they dispatch, and one needs a data line. Named, so that a page's
	 * onmessage never sees it; its data is the JSON other clients get. */
	if (!cause)
		cause = http_reason(status);
	size_t cn = strlen(cause);
	char *body = xmalloc(128 + 6 * cn);
	char *p = body;
	p += sprintf(p, "retry: %lld\n", (long long)retry_ms);
	if (id >= 0)
		p += sprintf(p, "id: %lld\n", (long long)id);
	p += sprintf(p, "event: refused\ndata: {\"error\":");
	p = json_string(p, cause, cn);
	p += sprintf(p, ",\"status\":%d}\n\n", status);
	*len = (size_t)(p - body);
	http_head_response(h, 200, "text/event-stream", *len, false);
	http_head_add(h, "Cache-Control", "no-store");
	http_head_addf(h, "X-Refused-Status", "%d", status);
	return body;
}

struct chunk *frame_heartbeat(void)
{
	return chunk_from(": hb\n\n", 6);
}
