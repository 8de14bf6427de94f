/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_head.h: an HTTP/2 stream's request and response heads beside the
 * records herald's handlers read and write (pure: no I/O, no nghttp2).
 *
 * A request arrives as header fields and DATA; h2_request keeps them and
 * makes the request record (struct http_request) the HTTP/1.1 parser
 * fills, with no text in between; the connection layer applies every
 * limit of HTTP/1.1 to it. A handler's response head is a record too
 * (struct http_head); h2_fields_make turns it into the fields of a
 * HEADERS frame, with no text in between. */
#ifndef HERALD_H2_HEAD_H
#define HERALD_H2_HEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "http/http.h"

/* One field of a HEADERS frame. */
struct h2_field {
	const char *name;
	size_t namelen;
	const char *value;
	size_t valuelen;
};

/* The fields of the HEADERS frame that answers with a response head:
 * ":status" first, then the head's fields in order, names lowercased
 * (HTTP/2 wants them so), leaving out the fields only HTTP/1.1 knows
 * (Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
 * Upgrade). The names are owned here (h2_fields_free); the values point
 * into the head, valid while it is unchanged. */
struct h2_fields {
	struct h2_field *f;
	size_t n;
	char *names;
	char status[4];
};
void h2_fields_make(struct h2_fields *out, const struct http_head *h);
void h2_fields_free(struct h2_fields *out);

/* A request arriving on an HTTP/2 stream: its fields and DATA kept as
 * they come, until it is whole and h2_request_record hands it on as the
 * record the HTTP/1.1 parser fills (struct http_request), which the
 * connection layer judges by the limits it applies to every request.
 * Zero-initialise it and set the limits; h2_request_free frees what it
 * holds. */
struct h2_kept {
	size_t name, value; /* offsets into fields */
	size_t namelen, valuelen;
};
struct h2_request {
	size_t head_limit; /* most bytes of head (counted as HTTP/1.1 text) kept */
	size_t body_limit; /* most bytes of body kept */
	size_t head_len;   /* the head's size as HTTP/1.1 text so far */
	char *fields;      /* the kept fields' names and values, back to back */
	size_t fields_len, fields_cap;
	struct h2_kept *kept;
	size_t nkept, kept_cap;
	char *body;
	size_t body_len, body_cap;
	size_t body_seen; /* DATA bytes received, kept or not */
	char *method, *path, *authority;
	size_t method_len, path_len, authority_len;
	char *cookie; /* every cookie field, joined by "; " */
	size_t cookie_len, cookie_cap;
	char length[24]; /* the body's length as text, for its field */
	size_t held;     /* bytes allocated for all of the above */
	bool had_length; /* the client sent content-length */
	bool too_large;  /* the head passed head_limit (or its caller said so): refuse with 431 */
	bool too_many;   /* more fields than a request record holds: refuse with 431 */
};

/* Add one field (pseudo-fields first, as HTTP/2 requires; nghttp2 has
 * checked the names and values). Nothing more is kept once too_large is
 * set. */
void h2_request_field(struct h2_request *r, const char *name, size_t namelen, const char *value, size_t valuelen);

/* Add body bytes (those past body_limit are counted, not kept). */
void h2_request_data(struct h2_request *r, const char *data, size_t len);

/* The whole request as a record: req's slices and *body point into r,
 * valid while r is unchanged. Host is :authority (a host field only
 * without it), cookie crumbs are one field again, the body's length is
 * that of the DATA (a content-length field is replaced by it), and
 * HTTP/1.1's connection fields, expect and te are left out (the body is
 * whole before a handler sees it; keep_alive is false: the stream ends
 * with its response). Returns 0; 431 when the head was too large or had
 * more fields than a record holds; -1 when it had no method or path. */
int h2_request_record(struct h2_request *r, struct http_request *req, const char **body, size_t *body_len);

/* Whether the request's method is HEAD (its response carries no body). */
bool h2_request_is_head(const struct h2_request *r);

void h2_request_free(struct h2_request *r);

#endif
