/* SPDX-License-Identifier: BSD-2-Clause */
/* h2_head.c: an HTTP/2 stream's request kept from its fields and DATA
 * and handed on as the record the HTTP/1.1 parser fills, and a response
 * head record (struct http_head) made into HEADERS fields. Pure: the connection
 * layer judges the record with the limits it applies to every HTTP/1.1
 * request. The request's buffers are its own (h2_request_free); the
 * record's slices point into them. */
#include "h2/h2_head.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

static bool name_is(const char *p, size_t n, const char *lit)
{
	return strlen(lit) == n && strncasecmp(p, lit, n) == 0;
}

/* Fields that name the HTTP/1.1 connection, which HTTP/2 forbids. */
static bool hop_by_hop(const char *p, size_t n)
{
	return name_is(p, n, "connection") || name_is(p, n, "keep-alive") || name_is(p, n, "proxy-connection") ||
	       name_is(p, n, "transfer-encoding") || name_is(p, n, "upgrade");
}

void h2_fields_make(struct h2_fields *out, const struct http_head *h)
{
	*out = (struct h2_fields){ 0 };
	int st = h->status;
	out->status[0] = (char)('0' + st / 100 % 10);
	out->status[1] = (char)('0' + st / 10 % 10);
	out->status[2] = (char)('0' + st % 10);
	out->f = xmalloc((h->nfields + 1) * sizeof(*out->f));
	out->names = xmalloc(h->text_len + 1); /* room for every name */
	out->f[out->n++] = (struct h2_field){ ":status", 7, out->status, 3 };
	char *w = out->names;
	for (size_t i = 0; i < h->nfields; i++) {
		struct http_slice name = http_head_name(h, i), value = http_head_value(h, i);
		if (hop_by_hop(name.p, name.n))
			continue;
		/* HTTP/2 wants names in lower case (RFC 9113 8.2.1). */
		for (size_t k = 0; k < name.n; k++)
			w[k] = (char)tolower((unsigned char)name.p[k]);
		out->f[out->n++] = (struct h2_field){ w, name.n, value.p, value.n };
		w += name.n;
	}
}

void h2_fields_free(struct h2_fields *out)
{
	free(out->f);
	free(out->names);
	*out = (struct h2_fields){ 0 };
}

/* Make room for need bytes in *buf (capacity *cap, doubling from first
 * and never past most), counting what it adds in r->held. */
static void grow(struct h2_request *r, char **buf, size_t *cap, size_t need, size_t first, size_t most)
{
	if (need <= *cap)
		return;
	size_t n = MAX(need, *cap ? *cap * 2 : first);
	n = MAX(MIN(n, most), need);
	*buf = xrealloc(*buf, n);
	r->held += n - *cap;
	*cap = n;
}

/* Count n bytes of HTTP/1.1 head text against head_limit. False (and
 * too_large set) once they pass it. */
static bool head_count(struct h2_request *r, size_t n)
{
	if (r->too_large || r->head_len + n > r->head_limit) {
		r->too_large = true;
		return false;
	}
	r->head_len += n;
	return true;
}

/* Keep a pseudo-field's value (once; a repeat is nghttp2's to refuse). */
static void keep(struct h2_request *r, char **slot, size_t *len, const char *v, size_t n)
{
	if (*slot)
		return;
	if (n > r->head_limit) {
		r->too_large = true;
		return;
	}
	*slot = xstrndup(v, n);
	*len = n;
	r->held += n + 1;
}

/* Keep a field as it is, after those kept before it. */
static void keep_field(struct h2_request *r, const char *name, size_t namelen, const char *value, size_t valuelen)
{
	/* As an HTTP/1.1 line: `name: value` CRLF. */
	if (!head_count(r, namelen + valuelen + 4))
		return;
	if (r->nkept == HTTP_MAX_HEADERS_HARD) {
		r->too_many = true;
		return;
	}
	if (r->nkept == r->kept_cap) {
		size_t n = r->kept_cap ? r->kept_cap * 2 : 8;
		r->kept = xrealloc(r->kept, n * sizeof(*r->kept));
		r->held += (n - r->kept_cap) * sizeof(*r->kept);
		r->kept_cap = n;
	}
	grow(r, &r->fields, &r->fields_cap, r->fields_len + namelen + valuelen, 512, r->head_limit);
	struct h2_kept *k = &r->kept[r->nkept++];
	*k = (struct h2_kept){ r->fields_len, r->fields_len + namelen, namelen, valuelen };
	memcpy(r->fields + k->name, name, namelen);
	memcpy(r->fields + k->value, value, valuelen);
	r->fields_len += namelen + valuelen;
}

void h2_request_field(struct h2_request *r, const char *name, size_t namelen, const char *value, size_t valuelen)
{
	if (r->too_large)
		return;
	if (namelen && name[0] == ':') {
		if (name_is(name, namelen, ":method"))
			keep(r, &r->method, &r->method_len, value, valuelen);
		else if (name_is(name, namelen, ":path"))
			keep(r, &r->path, &r->path_len, value, valuelen);
		else if (name_is(name, namelen, ":authority"))
			keep(r, &r->authority, &r->authority_len, value, valuelen);
		return; /* :scheme says nothing the handlers read */
	}
	if (name_is(name, namelen, "cookie")) {
		/* RFC 9113 8.2.3: the crumbs are one field again, as HTTP/1.1
		 * has it. */
		if (!head_count(r, valuelen + (r->cookie_len ? 2 : 10)))
			return;
		grow(r, &r->cookie, &r->cookie_cap, r->cookie_len + valuelen + 2, 256, r->head_limit + 2);
		if (r->cookie_len) {
			memcpy(r->cookie + r->cookie_len, "; ", 2);
			r->cookie_len += 2;
		}
		memcpy(r->cookie + r->cookie_len, value, valuelen);
		r->cookie_len += valuelen;
		return;
	}
	if (name_is(name, namelen, "content-length")) {
		r->had_length = true; /* the length handed on is that of the DATA */
		return;
	}
	/* :authority stands for Host; the body is whole before the handler
	 * sees it, so nothing waits for a 100 Continue. */
	if ((r->authority && name_is(name, namelen, "host")) || name_is(name, namelen, "expect") ||
	    name_is(name, namelen, "te") || hop_by_hop(name, namelen))
		return;
	/* Trimmed as the HTTP/1.1 parser trims (nghttp2 refuses such values
	 * since 1.50, RFC 9113 8.2.1; an older one hands them on). */
	while (valuelen && (value[0] == ' ' || value[0] == '\t')) {
		value++;
		valuelen--;
	}
	while (valuelen && (value[valuelen - 1] == ' ' || value[valuelen - 1] == '\t'))
		valuelen--;
	keep_field(r, name, namelen, value, valuelen);
}

void h2_request_data(struct h2_request *r, const char *data, size_t len)
{
	r->body_seen += len;
	if (r->body_len >= r->body_limit)
		return;
	size_t n = MIN(len, r->body_limit - r->body_len);
	grow(r, &r->body, &r->body_cap, r->body_len + n, 1024, r->body_limit);
	memcpy(r->body + r->body_len, data, n);
	r->body_len += n;
}

/* Add a field to the record (slices of r, or static text). False when
 * the record has no room left: more fields than the parser would ever
 * take (max_headers is at most HTTP_MAX_HEADERS_HARD). */
static bool put(struct http_request *req, const char *name, size_t namelen, const char *value, size_t valuelen)
{
	if (req->nheaders == HTTP_MAX_HEADERS_HARD)
		return false;
	req->headers[req->nheaders++] = (struct http_header){ { name, namelen }, { value, valuelen } };
	return true;
}

int h2_request_record(struct h2_request *r, struct http_request *req, const char **body, size_t *body_len)
{
	if (r->too_large || r->too_many)
		return 431;
	if (!r->method || !r->path)
		return -1;
	http_request_line_set(req, (struct http_slice){ r->method, r->method_len },
			      (struct http_slice){ r->path, r->path_len });
	req->nheaders = 0;
	req->chunked = false;
	req->keep_alive = false;
	req->content_length = -1;
	if (r->authority && !put(req, "Host", 4, r->authority, r->authority_len))
		return 431;
	for (size_t i = 0; i < r->nkept; i++) {
		const struct h2_kept *k = &r->kept[i];
		if (!put(req, r->fields + k->name, k->namelen, r->fields + k->value, k->valuelen))
			return 431;
	}
	if (r->cookie_len && !put(req, "Cookie", 6, r->cookie, r->cookie_len))
		return 431;
	if (r->body_seen || r->had_length) {
		/* More than was kept: the connection refuses the length (413)
		 * before a handler sees the body. */
		int n = snprintf(r->length, sizeof(r->length), "%zu", r->body_seen);
		if (!put(req, "Content-Length", 14, r->length, (size_t)n))
			return 431;
		req->content_length = (int64_t)r->body_seen;
	}
	*body = r->body;
	*body_len = r->body_len;
	return 0;
}

bool h2_request_is_head(const struct h2_request *r)
{
	return r->method && strcmp(r->method, "HEAD") == 0;
}

void h2_request_free(struct h2_request *r)
{
	free(r->fields);
	free(r->kept);
	free(r->body);
	free(r->method);
	free(r->path);
	free(r->authority);
	free(r->cookie);
	*r = (struct h2_request){ 0 };
}
