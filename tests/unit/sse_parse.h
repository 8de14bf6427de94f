/* SPDX-License-Identifier: BSD-2-Clause */
/* sse_parse.h: a Server-Sent Events reader for tests, written after the
 * WHATWG EventSource parsing rules (lines end at CRLF, LF or CR; a blank line
 * dispatches; one space after the colon is dropped; an event with no data
 * lines is not delivered; the last LF of the data is removed), plus the check
 * that an encoded event frame delivers exactly what it should. Shared by
 * tests/unit/test_frame.c and tests/fuzz/fuzz_frame.c; header-only. */
#ifndef HERALD_TEST_SSE_PARSE_H
#define HERALD_TEST_SSE_PARSE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sse_buf {
	char *p;
	size_t n, cap;
};

static inline void sse_buf_add(struct sse_buf *b, const char *s, size_t n)
{
	if (b->n + n + 1 > b->cap) {
		b->cap = (b->n + n + 1) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	if (n)
		memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static inline void sse_buf_set(struct sse_buf *b, const char *s, size_t n)
{
	b->n = 0;
	sse_buf_add(b, s, n);
}

struct sse_event {
	struct sse_buf id, type, data;
};

struct sse {
	/* What the stream delivered. */
	struct sse_event ev[8];
	size_t nev;
	size_t ncomments;
	long long retry; /* -1 = never set */
	size_t nunknown; /* lines naming a field EventSource ignores */
	bool pending;    /* a field line after the last blank line */
	/* Parser state. */
	struct sse_buf data, type, last_id_buf, last_id;
};

static inline void sse_dispatch(struct sse *s)
{
	s->pending = false;
	sse_buf_set(&s->last_id, s->last_id_buf.p ? s->last_id_buf.p : "", s->last_id_buf.n);
	if (s->data.n == 0) {
		/* No data lines: nothing is dispatched. */
		sse_buf_set(&s->type, "", 0);
		return;
	}
	if (s->data.p[s->data.n - 1] == '\n')
		s->data.n--;
	if (s->nev < sizeof(s->ev) / sizeof(s->ev[0])) {
		struct sse_event *e = &s->ev[s->nev];
		sse_buf_set(&e->id, s->last_id.p, s->last_id.n);
		if (s->type.n)
			sse_buf_set(&e->type, s->type.p, s->type.n);
		else
			sse_buf_set(&e->type, "message", 7);
		sse_buf_set(&e->data, s->data.p, s->data.n);
	}
	s->nev++;
	sse_buf_set(&s->data, "", 0);
	sse_buf_set(&s->type, "", 0);
}

static inline void sse_line(struct sse *s, const char *l, size_t n)
{
	if (n == 0) {
		sse_dispatch(s);
		return;
	}
	if (l[0] == ':') {
		s->ncomments++;
		return;
	}
	const char *colon = memchr(l, ':', n);
	size_t fn = colon ? (size_t)(colon - l) : n;
	const char *v = colon ? colon + 1 : l + n;
	size_t vn = colon ? n - fn - 1 : 0;
	if (vn && v[0] == ' ') {
		v++;
		vn--;
	}
	s->pending = true;
	if (fn == 5 && memcmp(l, "event", 5) == 0) {
		sse_buf_set(&s->type, v, vn);
	} else if (fn == 4 && memcmp(l, "data", 4) == 0) {
		sse_buf_add(&s->data, v, vn);
		sse_buf_add(&s->data, "\n", 1);
	} else if (fn == 2 && memcmp(l, "id", 2) == 0) {
		if (!memchr(v, '\0', vn))
			sse_buf_set(&s->last_id_buf, v, vn);
	} else if (fn == 5 && memcmp(l, "retry", 5) == 0) {
		bool digits = vn > 0;
		long long r = 0;
		for (size_t i = 0; i < vn; i++) {
			if (v[i] < '0' || v[i] > '9')
				digits = false;
			else if (r < 1000000000000LL)
				r = r * 10 + (v[i] - '0');
		}
		if (digits)
			s->retry = r;
	} else {
		s->nunknown++;
	}
}

/* Parse a whole stream; lines end at CRLF, LF or CR. */
static inline void sse_parse(struct sse *s, const char *p, size_t n)
{
	memset(s, 0, sizeof(*s));
	s->retry = -1;
	size_t i = 0;
	while (i < n) {
		size_t j = i;
		while (j < n && p[j] != '\r' && p[j] != '\n')
			j++;
		if (j == n) {
			/* An unterminated last line is never processed. */
			s->pending = true;
			break;
		}
		sse_line(s, p + i, j - i);
		if (p[j] == '\r' && j + 1 < n && p[j + 1] == '\n')
			j++;
		i = j + 1;
	}
}

static inline void sse_free(struct sse *s)
{
	free(s->data.p);
	free(s->type.p);
	free(s->last_id_buf.p);
	free(s->last_id.p);
	for (size_t i = 0; i < sizeof(s->ev) / sizeof(s->ev[0]); i++) {
		free(s->ev[i].id.p);
		free(s->ev[i].type.p);
		free(s->ev[i].data.p);
	}
}

static inline bool sse_buf_is(const struct sse_buf *b, const char *s, size_t n)
{
	return b->n == n && (n == 0 || memcmp(b->p, s, n) == 0);
}

/* CRLF and lone CR become LF; the result is malloc'd, its length in *out_n. */
static inline char *sse_normalise(const char *d, size_t n, size_t *out_n)
{
	char *o = malloc(n + 1);
	if (!o)
		abort();
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (d[i] == '\r') {
			o[k++] = '\n';
			if (i + 1 < n && d[i + 1] == '\n')
				i++;
		} else {
			o[k++] = d[i];
		}
	}
	*out_n = k;
	return o;
}

/* The type a reader must see: up to the first line break, "message" if that
 * leaves nothing. */
static inline void sse_expected_type(const char *t, size_t tn, const char **out, size_t *out_n)
{
	size_t k = 0;
	while (t && k < tn && t[k] != '\r' && t[k] != '\n')
		k++;
	if (k == 0) {
		*out = "message";
		*out_n = 7;
	} else {
		*out = t;
		*out_n = k;
	}
}

/* Whether frame (n bytes) is one complete event frame that a browser would
 * deliver as (id, the type cut at its first line break or "message", the data
 * with CRLF and CR turned into LF), and nothing else. On a mismatch, says
 * what differed on diag (if not NULL). */
static inline bool sse_frame_matches(const char *frame, size_t n, int64_t id, const char *type, size_t type_len,
				     const char *data, size_t data_len, FILE *diag)
{
	struct sse s;
	const char *why = NULL;
	sse_parse(&s, frame, n);
	if (s.nev != 1 || s.pending || s.nunknown || s.ncomments || s.retry != -1)
		why = "not exactly one event and nothing else";
	else if (n < 2 || frame[n - 1] != '\n' || frame[n - 2] != '\n' || (n >= 3 && frame[n - 3] == '\n'))
		why = "does not end in exactly one blank line";
	if (!why) {
		char idtext[32];
		int idn = snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
		const char *et;
		size_t etn, nn;
		sse_expected_type(type, type_len, &et, &etn);
		char *norm = sse_normalise(data ? data : "", data ? data_len : 0, &nn);
		if (!sse_buf_is(&s.ev[0].id, idtext, (size_t)idn) || !sse_buf_is(&s.last_id, idtext, (size_t)idn))
			why = "wrong id";
		else if (!sse_buf_is(&s.ev[0].type, et, etn) || memchr(s.ev[0].type.p, '\n', s.ev[0].type.n) ||
			 memchr(s.ev[0].type.p, '\r', s.ev[0].type.n))
			why = "wrong type";
		else if (!sse_buf_is(&s.ev[0].data, norm, nn))
			why = "wrong data";
		free(norm);
	}
	if (why && diag) {
		fprintf(diag, "  frame for id %lld: %s; frame (%zu bytes): ", (long long)id, why, n);
		for (size_t i = 0; i < n && i < 300; i++) {
			unsigned char ch = (unsigned char)frame[i];
			if (ch >= 0x20 && ch < 0x7f)
				fputc(ch, diag);
			else
				fprintf(diag, "\\x%02x", ch);
		}
		fputc('\n', diag);
	}
	sse_free(&s);
	return why == NULL;
}

#endif
