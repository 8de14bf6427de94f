/* SPDX-License-Identifier: BSD-2-Clause */
/* fuzz_http.c: fuzz target for the request parser in src/http/http.c. Each input
 * is parsed under the default limits and under small ones (so the 414/431
 * paths are hit often) and must keep the parser's promises: slices inside
 * the head, a head no longer than the input, only the documented statuses,
 * and for prefixes of the input 0 up to some length and then exactly the
 * whole input's answer. Successful parses also drive the header, query and
 * percent-decoding helpers and the check of a request record (which must
 * agree with the parser on everything but the head's canonical size);
 * refusals are formatted as responses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "http/http.h"

static const struct http_limits limit_sets[] = {
	{ 8192, 16384, 64 }, /* the server's defaults */
	{ 64, 256, 4 },
	{ 16, 48, 1 },
};

/* Prefixes are copied here to end at a PROT_NONE page, like the input. */
#define PREFIX_CAP (80 * 1024)
static char *prefix_end;

static const char *place_prefix(const uint8_t *data, size_t k)
{
	if (!prefix_end) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t cap = (PREFIX_CAP + page - 1) / page * page;
		char *base = mmap(NULL, cap + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		FUZZ_ASSERT(base != MAP_FAILED);
		FUZZ_ASSERT(mprotect(base + cap, page, PROT_NONE) == 0);
		prefix_end = base + cap;
	}
	if (k > PREFIX_CAP)
		return (const char *)data;
	memcpy(prefix_end - k, data, k);
	return prefix_end - k;
}

static bool inside(struct http_slice s, const char *lo, const char *hi)
{
	if (s.n == 0)
		return s.p == NULL || (s.p >= lo && s.p <= hi);
	return s.p >= lo && s.p <= hi && (size_t)(hi - s.p) >= s.n;
}

static bool is_tchar(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void check_success(const char *buf, size_t size, int r, const struct http_limits *lim,
			  const struct http_request *req)
{
	const char *lo = buf, *hi = buf + r;
	FUZZ_ASSERT((size_t)r <= size);
	FUZZ_ASSERT((size_t)r <= lim->max_header_bytes);
	FUZZ_ASSERT(buf[r - 1] == '\n');
	FUZZ_ASSERT(req->method_name.n > 0 && inside(req->method_name, lo, hi));
	for (size_t i = 0; i < req->method_name.n; i++)
		FUZZ_ASSERT(is_tchar((unsigned char)req->method_name.p[i]));
	FUZZ_ASSERT(req->method_name.n <= lim->max_request_line);
	FUZZ_ASSERT(req->target.n > 0 && inside(req->target, lo, hi));
	FUZZ_ASSERT(req->target.p[0] == '/' || (req->target.n == 1 && req->target.p[0] == '*'));
	FUZZ_ASSERT(req->target.p[0] != '*' || req->method == HTTP_OPTIONS);
	FUZZ_ASSERT(req->path.p == req->target.p && req->path.n <= req->target.n);
	FUZZ_ASSERT(memchr(req->path.p, '?', req->path.n) == NULL);
	FUZZ_ASSERT(inside(req->query, req->target.p, req->target.p + req->target.n));
	if (req->query.n)
		FUZZ_ASSERT(req->query.p == req->path.p + req->path.n + 1);
	for (size_t i = 0; i < req->target.n; i++)
		FUZZ_ASSERT(req->target.p[i] > ' ' && req->target.p[i] < 0x7f);
	FUZZ_ASSERT(req->minor_version == 0 || req->minor_version == 1);
	FUZZ_ASSERT(req->nheaders <= lim->max_headers && req->nheaders <= HTTP_MAX_HEADERS_HARD);
	FUZZ_ASSERT(req->content_length >= -1);
	FUZZ_ASSERT(!(req->content_length >= 0 && req->chunked));

	size_t hosts = 0;
	for (size_t i = 0; i < req->nheaders; i++) {
		const struct http_header *h = &req->headers[i];
		FUZZ_ASSERT(h->name.n > 0 && inside(h->name, lo, hi) && inside(h->value, lo, hi));
		for (size_t j = 0; j < h->name.n; j++)
			FUZZ_ASSERT(is_tchar((unsigned char)h->name.p[j]));
		for (size_t j = 0; j < h->value.n; j++) {
			unsigned char c = (unsigned char)h->value.p[j];
			FUZZ_ASSERT(c == '\t' || (c >= ' ' && c != 0x7f));
		}
		if (h->value.n) {
			FUZZ_ASSERT(h->value.p[0] != ' ' && h->value.p[0] != '\t');
			FUZZ_ASSERT(h->value.p[h->value.n - 1] != ' ' && h->value.p[h->value.n - 1] != '\t');
		}
		if (h->name.n == 4 && strncasecmp(h->name.p, "host", 4) == 0)
			hosts++;

		/* Lookup by a NUL-terminated copy of the name finds this header or
		 * an earlier one of the same name. */
		char name[64];
		if (h->name.n < sizeof(name)) {
			memcpy(name, h->name.p, h->name.n);
			name[h->name.n] = '\0';
			const struct http_header *g = http_header_get(req, name);
			FUZZ_ASSERT(g && g <= h && g->name.n == h->name.n &&
				    strncasecmp(g->name.p, name, g->name.n) == 0);
		}
	}
	FUZZ_ASSERT(hosts <= 1);
	FUZZ_ASSERT(req->minor_version == 0 || hosts == 1);

	/* The same request as a record (as HTTP/2 hands one over) passes the
	 * record check's byte and form rules, all the parser's; only its size
	 * as canonical text (`Name: value`, CRLF) may differ from the bytes
	 * parsed (bare LFs, no space after a colon): 414 or 431, never 400.
	 * With limits that bound the canonical text as they bound the input,
	 * it passes whole. */
	struct http_error e;
	int cr = http_request_check(req, lim, &e);
	FUZZ_ASSERT(cr == 0 || (cr == -1 && (e.status == 414 || e.status == 431)));
	struct http_limits wide = { lim->max_request_line + 16, 4 * (size_t)r + 64, lim->max_headers };
	FUZZ_ASSERT(http_request_check(req, &wide, &e) == 0);

	/* Query helpers on the parsed query: the first parameter's name finds a
	 * value inside the query; decoding never grows the text. */
	if (req->query.n) {
		char name[64];
		size_t nl = 0;
		while (nl < req->query.n && req->query.p[nl] != '=' && req->query.p[nl] != '&')
			nl++;
		if (nl < sizeof(name)) {
			memcpy(name, req->query.p, nl);
			name[nl] = '\0';
			struct http_slice v;
			FUZZ_ASSERT(http_query_get(req->query, name, &v));
			FUZZ_ASSERT(inside(v, req->query.p, req->query.p + req->query.n));
		}
	}
	char *dec = malloc(req->target.n + 1);
	FUZZ_ASSERT(dec);
	long dn = http_percent_decode(req->target, dec);
	FUZZ_ASSERT(dn >= -1 && dn <= (long)req->target.n);
	if (dn >= 0)
		FUZZ_ASSERT(dec[dn] == '\0' && memchr(dec, '\0', (size_t)dn) == NULL);
	free(dec);
}

/* Parse data[0..k), placed to end at a guard page, and check the answer
 * against the whole input's (r, status): "need more" (0), or exactly the
 * same answer, a success only once k reaches the head's end. Returns it. */
static int check_prefix(const uint8_t *data, size_t k, const struct http_limits *lim, int r, int status)
{
	static struct http_request req;
	struct http_error e = { 0, NULL };
	int rk = http_parse_request(place_prefix(data, k), k, lim, &req, &e);
	if (rk != 0) {
		FUZZ_ASSERT(rk == r);
		if (rk < 0)
			FUZZ_ASSERT(e.status == status);
		else
			FUZZ_ASSERT(k >= (size_t)r);
	}
	return rk;
}

#ifndef HERALD_LIBFUZZER
/* Prefixes: 0 below some length, the whole input's answer from there on.
 * All of them for short inputs, a spread of lengths for long ones. */
static void check_prefixes(const uint8_t *data, size_t size, const struct http_limits *lim, int r, int status)
{
	size_t nk = size <= 200 ? size + 1 : 24;
	int prev = 0;
	for (size_t i = 0; i < nk; i++) {
		size_t k = size <= 200 ? i : (i < 8 ? size - i : i < 16 ? (size * (i - 7)) / 9 : (i - 16) * 7);
		if (k > size)
			continue;
		int rk = check_prefix(data, k, lim, r, status);
		if (size <= 200) {
			/* In order: once decided, never undecided again. */
			FUZZ_ASSERT(!(prev != 0 && rk == 0));
			prev = rk;
		}
	}
}
#else
/* The same promise at a few prefixes: under libFuzzer every comparison in
 * the parser is traced, and parsing every prefix took nine tenths of the
 * time. Checked: the head's end for a success (undecided one byte before),
 * the input less one byte, and a pair of neighbours picked from the input's
 * bytes (so each input tries others), the longer one decided if the
 * shorter one is. */
static void check_prefixes(const uint8_t *data, size_t size, const struct http_limits *lim, int r, int status)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a of the input's length and last bytes */
	h = (h ^ size) * 1099511628211ULL;
	for (size_t i = 0; i < size && i < 8; i++)
		h = (h ^ data[size - 1 - i]) * 1099511628211ULL;
	if (r > 0) {
		FUZZ_ASSERT(check_prefix(data, (size_t)r - 1, lim, r, status) == 0);
		FUZZ_ASSERT(check_prefix(data, (size_t)r, lim, r, status) == r);
	}
	if (size > 0)
		check_prefix(data, size - 1, lim, r, status);
	size_t k = size ? h % size : 0;
	int rk = check_prefix(data, k, lim, r, status);
	FUZZ_ASSERT(rk == 0 || check_prefix(data, k + 1, lim, r, status) != 0);
}
#endif

/* The standard refusal as HTTP/1.1 text. */
static struct chunk *format_error(int status, const char *message, bool keep)
{
	size_t len;
	char *body = http_error_body(status, message, &len);
	struct http_head h;
	http_head_error(&h, status, len, keep);
	struct chunk *c = http_head_text(&h, body, len);
	http_head_free(&h);
	free(body);
	return c;
}

/* Parse the whole input and its prefixes under one set of limits. */
static void check_limits(const uint8_t *data, size_t size, const struct http_limits *lim)
{
	static struct http_request req;
	struct http_error err = { 0, NULL };
	const char *buf = (const char *)data;

	int r = http_parse_request(buf, size, lim, &req, &err);
	FUZZ_ASSERT(r >= -1);
	if (r > 0) {
		check_success(buf, size, r, lim, &req);
	} else if (r == 0) {
		/* Waiting for more is only allowed while the head can still fit. */
		FUZZ_ASSERT(size < lim->max_header_bytes);
	} else {
		FUZZ_ASSERT(err.status == 400 || err.status == 414 || err.status == 431 || err.status == 501 ||
			    err.status == 505);
		FUZZ_ASSERT(err.message && err.message[0]);
		struct chunk *c = format_error(err.status, err.message, false);
		FUZZ_ASSERT(c->len > 9 && memcmp(c->data, "HTTP/1.1 ", 9) == 0);
		chunk_unref(c);
	}
	check_prefixes(data, size, lim, r, err.status);
}

int fuzz_one(const uint8_t *data, size_t size)
{
	for (size_t i = 0; i < sizeof(limit_sets) / sizeof(limit_sets[0]); i++)
		check_limits(data, size, &limit_sets[i]);

	/* The error writer escapes arbitrary text into its JSON body. */
	char msg[128];
	size_t mn = size < sizeof(msg) - 1 ? size : sizeof(msg) - 1;
	memcpy(msg, data, mn);
	msg[mn] = '\0';
	struct chunk *c = format_error(400, msg, true);
	FUZZ_ASSERT(c->len > 0 && c->data[c->len - 1] == '\n');
	for (size_t i = 0; i < c->len; i++)
		FUZZ_ASSERT(c->data[i] != '\0');
	chunk_unref(c);
	return 0;
}
