/* SPDX-License-Identifier: BSD-2-Clause */
/* http_head.c: the response head record (struct http_head) and its
 * HTTP/1.1 text. A head owns its fields: names and values are copied into
 * one growing buffer (text) and found by offset, so adding never leaves a
 * field pointing at freed memory. HTTP/2 reads the same record (h2_head.c)
 * and never sees the text. */
#include "http/http.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

void http_head_init(struct http_head *h, int status)
{
	*h = (struct http_head){ .status = status };
}

void http_head_response(struct http_head *h, int status, const char *content_type, size_t body_len, bool keep_alive)
{
	http_head_init(h, status);
	h->keep_alive = keep_alive;
	if (content_type)
		http_head_add(h, "Content-Type", content_type);
	/* 1xx, 204 and 304 responses carry no body, so they must not announce
	 * one (RFC 9110 8.6). */
	if (!((status >= 100 && status < 200) || status == 204 || status == 304))
		http_head_addf(h, "Content-Length", "%zu", body_len);
	http_head_add(h, "Connection", keep_alive ? "keep-alive" : "close");
}

/* Copy n bytes to the end of text; returns their offset. */
static size_t keep(struct http_head *h, const char *p, size_t n)
{
	if (h->text_len + n > h->text_cap) {
		size_t cap = h->text_cap ? h->text_cap : 256;
		while (cap < h->text_len + n)
			cap *= 2;
		h->text = xrealloc(h->text, cap);
		h->text_cap = cap;
	}
	size_t at = h->text_len;
	if (n)
		memcpy(h->text + at, p, n);
	h->text_len += n;
	return at;
}

void http_head_addn(struct http_head *h, const char *name, size_t namelen, const char *value, size_t valuelen)
{
	if (h->nfields == h->fields_cap) {
		h->fields_cap = h->fields_cap ? 2 * h->fields_cap : 8;
		h->fields = xrealloc(h->fields, h->fields_cap * sizeof(*h->fields));
	}
	struct http_field *f = &h->fields[h->nfields++];
	f->namelen = namelen;
	f->name = keep(h, name, namelen);
	f->valuelen = valuelen;
	f->value = keep(h, value, valuelen);
}

void http_head_add(struct http_head *h, const char *name, const char *value)
{
	http_head_addn(h, name, strlen(name), value, strlen(value));
}

void http_head_addf(struct http_head *h, const char *name, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		http_head_addn(h, name, strlen(name), small, (size_t)n);
		return;
	}
	char *big = xmalloc((size_t)n + 1);
	va_start(ap, fmt);
	vsnprintf(big, (size_t)n + 1, fmt, ap);
	va_end(ap);
	http_head_addn(h, name, strlen(name), big, (size_t)n);
	free(big);
}

void http_head_append(struct http_head *h, const struct http_head *src)
{
	if (!src)
		return;
	for (size_t i = 0; i < src->nfields; i++) {
		const struct http_field *f = &src->fields[i];
		http_head_addn(h, src->text + f->name, f->namelen, src->text + f->value, f->valuelen);
	}
}

struct http_slice http_head_name(const struct http_head *h, size_t i)
{
	return (struct http_slice){ h->text + h->fields[i].name, h->fields[i].namelen };
}

struct http_slice http_head_value(const struct http_head *h, size_t i)
{
	return (struct http_slice){ h->text + h->fields[i].value, h->fields[i].valuelen };
}

struct http_slice http_head_get(const struct http_head *h, const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < h->nfields; i++)
		if (h->fields[i].namelen == n && strncasecmp(h->text + h->fields[i].name, name, n) == 0)
			return http_head_value(h, i);
	return (struct http_slice){ NULL, 0 };
}

void http_head_free(struct http_head *h)
{
	free(h->text);
	free(h->fields);
	*h = (struct http_head){ 0 };
}

struct chunk *http_head_text(const struct http_head *h, const char *body, size_t body_len)
{
	char line[64];
	int sn = snprintf(line, sizeof(line), "HTTP/1.1 %d %s\r\n", h->status, http_reason(h->status));
	size_t total = (size_t)sn + 2 + body_len;
	for (size_t i = 0; i < h->nfields; i++)
		total += h->fields[i].namelen + 2 + h->fields[i].valuelen + 2;
	struct chunk *c = chunk_new(total);
	char *w = c->data;
	memcpy(w, line, (size_t)sn);
	w += sn;
	for (size_t i = 0; i < h->nfields; i++) {
		const struct http_field *f = &h->fields[i];
		memcpy(w, h->text + f->name, f->namelen);
		w += f->namelen;
		memcpy(w, ": ", 2);
		w += 2;
		memcpy(w, h->text + f->value, f->valuelen);
		w += f->valuelen;
		memcpy(w, "\r\n", 2);
		w += 2;
	}
	memcpy(w, "\r\n", 2);
	w += 2;
	if (body_len)
		memcpy(w, body, body_len);
	return c;
}
