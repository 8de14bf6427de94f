/* h2_head.c: HTTP/1.1 request text assembled from an HTTP/2 stream's
 * fields, and an HTTP/1.1 response head taken apart into HEADERS fields.
 * Pure: the connection layer's parser judges the assembled request with
 * the limits it applies to every HTTP/1.1 request. */
#include "h2/h2_head.h"

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

size_t h2_head_end(const char *buf, size_t len)
{
	for (size_t i = 3; i < len; i++) {
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return i + 1;
	}
	return 0;
}

long h2_head_parse(char *buf, size_t len, int *status, struct h2_field *out, size_t max, size_t *n)
{
	*n = 0;
	size_t hl = h2_head_end(buf, len);
	if (!hl)
		return 0;
	char *end = buf + hl;
	/* "HTTP/1.x SSS" */
	if (end - buf < 14 || memcmp(buf, "HTTP/1.", 7) != 0 || buf[8] != ' ')
		return -1;
	int st = 0;
	for (int i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return -1;
		st = st * 10 + (buf[i] - '0');
	}
	if (st < 100)
		return -1;
	*status = st;
	char *line = memchr(buf, '\n', (size_t)(end - buf)) + 1;
	while (line < end - 2) {
		char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol || eol[-1] != '\r')
			return -1;
		char *colon = memchr(line, ':', (size_t)(eol - line));
		if (!colon || colon == line)
			return -1;
		char *v = colon + 1, *vend = eol - 1;
		while (v < vend && (*v == ' ' || *v == '\t'))
			v++;
		while (vend > v && (vend[-1] == ' ' || vend[-1] == '\t'))
			vend--;
		size_t nl = (size_t)(colon - line);
		if (!hop_by_hop(line, nl)) {
			if (*n == max)
				return -1;
			for (size_t i = 0; i < nl; i++) {
				if (line[i] >= 'A' && line[i] <= 'Z')
					line[i] = (char)(line[i] - 'A' + 'a');
			}
			out[*n] = (struct h2_field){ line, nl, v, (size_t)(vend - v) };
			(*n)++;
		}
		line = eol + 1;
	}
	return end - buf;
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

/* Append to the head text, or mark the request too large. */
static void head_put(struct h2_request *r, const char *p, size_t n)
{
	if (r->too_large)
		return;
	if (r->head_len + n > r->head_limit) {
		r->too_large = true;
		return;
	}
	grow(r, &r->head, &r->head_cap, r->head_len + n, 512, r->head_limit);
	memcpy(r->head + r->head_len, p, n);
	r->head_len += n;
}

static void head_puts(struct h2_request *r, const char *s)
{
	head_put(r, s, strlen(s));
}

/* The request line and Host, once the pseudo-fields are in. */
static void write_line(struct h2_request *r)
{
	if (r->line_written)
		return;
	r->line_written = true;
	if (!r->method || !r->path)
		return; /* h2_request_finish refuses it */
	head_puts(r, r->method);
	head_put(r, " ", 1);
	head_puts(r, r->path);
	head_put(r, " HTTP/1.1\r\n", 11);
	if (r->authority) {
		head_put(r, "Host: ", 6);
		head_puts(r, r->authority);
		head_put(r, "\r\n", 2);
	}
}

/* Keep a pseudo-field's value (once; a repeat is nghttp2's to refuse). */
static void keep(struct h2_request *r, char **slot, const char *v, size_t n)
{
	if (*slot)
		return;
	if (n > r->head_limit) {
		r->too_large = true;
		return;
	}
	*slot = xstrndup(v, n);
	r->held += n + 1;
}

void h2_request_field(struct h2_request *r, const char *name, size_t namelen, const char *value, size_t valuelen)
{
	if (r->too_large)
		return;
	if (namelen && name[0] == ':') {
		if (name_is(name, namelen, ":method"))
			keep(r, &r->method, value, valuelen);
		else if (name_is(name, namelen, ":path"))
			keep(r, &r->path, value, valuelen);
		else if (name_is(name, namelen, ":authority"))
			keep(r, &r->authority, value, valuelen);
		return; /* :scheme says nothing the handlers read */
	}
	write_line(r);
	if (name_is(name, namelen, "cookie")) {
		/* RFC 9113 8.2.3: the crumbs are one field again for HTTP/1.1. */
		if (r->cookie_len + valuelen + 2 > r->head_limit) {
			r->too_large = true;
			return;
		}
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
		r->had_length = true; /* the length written is that of the DATA */
		return;
	}
	/* :authority stands for Host; the body is whole before the handler
	 * sees it, so nothing waits for a 100 Continue. */
	if ((r->authority && name_is(name, namelen, "host")) || name_is(name, namelen, "expect") ||
	    name_is(name, namelen, "te") || hop_by_hop(name, namelen))
		return;
	head_put(r, name, namelen);
	head_put(r, ": ", 2);
	head_put(r, value, valuelen);
	head_put(r, "\r\n", 2);
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

char *h2_request_finish(struct h2_request *r, size_t *len)
{
	write_line(r);
	if (r->cookie_len) {
		head_put(r, "Cookie: ", 8);
		head_put(r, r->cookie, r->cookie_len);
		head_put(r, "\r\n", 2);
	}
	head_puts(r, "Connection: close\r\n");
	if (r->body_seen || r->had_length) {
		/* More than was kept: the parser refuses the length (413)
		 * before it waits for the body. */
		char cl[48];
		snprintf(cl, sizeof(cl), "Content-Length: %zu\r\n", r->body_seen);
		head_puts(r, cl);
	}
	head_put(r, "\r\n", 2);
	if (r->too_large || !r->method || !r->path)
		return NULL;
	char *text = xmalloc(r->head_len + r->body_len + 1);
	memcpy(text, r->head, r->head_len);
	if (r->body_len)
		memcpy(text + r->head_len, r->body, r->body_len);
	*len = r->head_len + r->body_len;
	return text;
}

bool h2_request_is_head(const struct h2_request *r)
{
	return r->method && strcmp(r->method, "HEAD") == 0;
}

void h2_request_free(struct h2_request *r)
{
	free(r->head);
	free(r->body);
	free(r->method);
	free(r->path);
	free(r->authority);
	free(r->cookie);
	*r = (struct h2_request){ 0 };
}
