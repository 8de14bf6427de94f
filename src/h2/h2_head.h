/* h2_head.h: the HTTP/1.1 text herald's handlers read and write, turned
 * to and from the header lists of HTTP/2 (pure: no I/O, no nghttp2).
 *
 * A request arrives as header fields and DATA; h2_request assembles the
 * HTTP/1.1 request the connection layer parses, with every limit of
 * HTTP/1.1 applying to it. A handler's response begins with an HTTP/1.1
 * head; h2_head_parse takes it apart into the status and the fields of a
 * HEADERS frame. */
#ifndef HERALD_H2_HEAD_H
#define HERALD_H2_HEAD_H

#include <stdbool.h>
#include <stddef.h>

/* One field of a response head: slices of the parsed buffer. */
struct h2_field {
	const char *name;
	size_t namelen;
	const char *value;
	size_t valuelen;
};

/* The length of the head at the start of buf (through its empty line), or
 * 0 when it is not whole. */
size_t h2_head_end(const char *buf, size_t len);

/* Take apart the response head at the start of buf (len bytes): `HTTP/1.x
 * SSS reason`, then `Name: value` lines, then an empty line, each line
 * ending in CRLF. Header names are lowercased in place (HTTP/2 wants them
 * so); the fields only HTTP/1.1 knows (Connection, Keep-Alive,
 * Proxy-Connection, Transfer-Encoding, Upgrade) are left out. Returns the
 * head's length, with *status and at most max fields in out (*n); 0 when
 * the empty line has not come yet; -1 when the head is malformed or has
 * more than max fields. */
long h2_head_parse(char *buf, size_t len, int *status, struct h2_field *out, size_t max, size_t *n);

/* An HTTP/1.1 request being assembled from an HTTP/2 stream's fields and
 * DATA. Zero-initialise it and set the limits; h2_request_free frees what
 * it holds. */
struct h2_request {
	size_t head_limit; /* most bytes of head text kept */
	size_t body_limit; /* most bytes of body kept */
	char *head;        /* the head text so far (request line written once the pseudo-fields are in) */
	size_t head_len, head_cap;
	char *body;
	size_t body_len, body_cap;
	size_t body_seen; /* DATA bytes received, kept or not */
	char *method, *path, *authority;
	char *cookie; /* every cookie field, joined by "; " */
	size_t cookie_len, cookie_cap;
	size_t held; /* bytes allocated for all of the above */
	bool line_written;
	bool had_length; /* the client sent content-length */
	bool too_large;  /* the head passed head_limit (or its caller said so): refuse with 431 */
};

/* Add one field (pseudo-fields first, as HTTP/2 requires; nghttp2 has
 * checked the names and values). Nothing more is kept once too_large is
 * set. */
void h2_request_field(struct h2_request *r, const char *name, size_t namelen, const char *value, size_t valuelen);

/* Add body bytes (those past body_limit are counted, not kept). */
void h2_request_data(struct h2_request *r, const char *data, size_t len);

/* The whole request text (head, `Connection: close`, the body's length,
 * the body), a new allocation the caller frees, its length in *len; NULL
 * when the head was too large (too_large is set) or had no method or
 * path. */
char *h2_request_finish(struct h2_request *r, size_t *len);

/* Whether the request's method is HEAD (its response carries no body). */
bool h2_request_is_head(const struct h2_request *r);

void h2_request_free(struct h2_request *r);

#endif
