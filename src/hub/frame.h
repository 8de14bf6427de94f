/* SPDX-License-Identifier: BSD-2-Clause */
/* frame.h: Server-Sent Events encoding. Each stored event is encoded once
 * into a chunk that every matching reader's queue shares. */
#ifndef HERALD_FRAME_H
#define HERALD_FRAME_H

#include <stdint.h>

#include "common/chunk.h"
#include "http/http.h"
#include "store/store.h"

/* The largest frame sent (chunk lengths are 32-bit; a reader's queue must
 * stay bounded). */
#define FRAME_MAX_BYTES (256u * 1024 * 1024)

/* How a reader's events are encoded; also an index, so that the hub can
 * keep one encoding of an event per format (FRAME_FORMATS of them). */
enum frame_format {
	FRAME_SSE,      /* frame_event: named SSE events */
	FRAME_ENVELOPE, /* frame_event_envelope: unnamed JSON envelopes */
	FRAME_MERCURE,  /* frame_mercure: a Mercure subscriber's frames */
	FRAME_FORMATS
};

/* Encode ev as "id: N\nevent: TYPE\ndata: ...\n\n" with one data line per
 * payload line (LF, CRLF and CR all end a line). The type is sent up to its
 * first line break; an empty one (or one that starts with a break) is sent
 * as "message". An event whose frame would pass FRAME_MAX_BYTES is sent as
 * "event: too_large" with its id and size as data (and a warning logged).
 * Returns a new chunk with one reference. */
struct chunk *frame_event(const struct store_event *ev);

/* Encode ev as one unnamed event whose data is a JSON object (the stream's
 * envelope format, ?envelope=1): "id: N\ndata: {"type":..,"topic":..,
 * "data":..,"public":..,"created_at":N}\n\n". A browser's EventSource then
 * hands every event to onmessage, with its type and topic, whatever the
 * type. Strings are JSON-escaped (control bytes as \u00XX). Over
 * FRAME_MAX_BYTES: as frame_event. Returns a new chunk with one reference. */
struct chunk *frame_event_envelope(const struct store_event *ev);

/* Encode ev for a Mercure subscriber: "id: ID\n", "event: TYPE\n" unless
 * the type is "message" (the SSE default), "retry: N\n" when the update
 * set one, then the data lines as frame_event. ID is the update's own
 * (store_event.mercure), or the row's number for a row of herald's own.
 * Over FRAME_MAX_BYTES: as frame_event. One new reference. */
struct chunk *frame_mercure(const struct store_event *ev);

/* Encode ev in format f (one of the three above); one new reference. */
struct chunk *frame_encode(enum frame_format f, const struct store_event *ev);

/* Encode a reset: "id: LAST\nevent: reset\ndata: {json}\n\n". */
struct chunk *frame_reset(int64_t id, const char *reason, int64_t resume_id);

/* The stream's response head (200 text/event-stream, no-store, no proxy
 * buffering, Connection: close, no length) into h, which the caller adds
 * its own fields to and frees (http_head_free). */
void frame_stream_head(struct http_head *h);

/* The stream's opening frame, "retry: N\n: stream open\n\n", into buf
 * (len bytes, 64 are enough); returns its length. */
size_t frame_stream_open(int64_t retry_ms, char *buf, size_t len);

/* A refusal an EventSource survives: a whole 200 text/event-stream
 * response (Content-Length framed, Connection: close, and X-Refused-Status
 * naming the status other clients get, for tools and logs) whose body is
 * one event: the reconnection delay (retry:), the id the client sends back
 * (id:, when id >= 0), "event: refused" (so onmessage never fires) and as
 * data the one-line JSON {"error":CAUSE,"status":N} other clients get.
 * The head goes into h (the caller may add fields, and frees it); the
 * body is returned, the caller's to free, its length in *len. */
char *frame_refusal(struct http_head *h, int status, int64_t retry_ms, int64_t id, const char *cause, size_t *len);

/* A heartbeat comment frame; one new reference. */
struct chunk *frame_heartbeat(void);

#endif
